/* fuzz_safetensors.c: the input as a tensor file (a .safetensors or .npy someone saved: hostile input
 * to `tilescope import`). Inputs starting with the npy magic "\x93NUMPY" are written as .npy, others
 * as .safetensors (under $TSC_FUZZ_TMPDIR, else /dev/shm when writable, else /tmp: the reader opens
 * paths). An accepted file must keep the reader's promises: every tensor lies inside the file, after
 * the header, with nbytes == product(shape) * element size, no two tensors overlap (safetensors),
 * and every tensor reads back in full.
 */
#include "fuzz_target.h"

#include <unistd.h>

#include "tsc_import.h"

/* Tensors bigger than this are not read (a hostile header can declare anything that fits the file). */
#define READ_MAX (1u << 22)

static const char *tmp_path(int npy) {
    static char path[2][512];
    if (!path[npy][0]) {
        const char *dir = getenv("TSC_FUZZ_TMPDIR");
        if (!dir || !*dir) dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(path[npy], sizeof path[npy], "%s/tsc_fuzz_st.%ld.%s", dir, (long)getpid(), npy ? "npy" : "safetensors");
    }
    return path[npy];
}

static void check_tensors(tsc_tensor_file_t *f, uint64_t size, int npy) {
    int n = tsc_tensor_file_count(f);
    TSC_FUZZ_CHECK(!npy || n == 1, "an npy holds one tensor, not %d", n);
    void *buf = malloc(READ_MAX);
    for (int i = 0; i < n; i++) {
        const tsc_tensor_info_t *t = tsc_tensor_file_info(f, i);
        uint64_t want = tsc_format_size(t->fmt);
        for (int d = 0; d < t->rank; d++) want *= t->dims[d];
        TSC_FUZZ_CHECK(t->nbytes == want, "tensor %d: nbytes %llu, shape gives %llu", i, (unsigned long long)t->nbytes,
                       (unsigned long long)want);
        TSC_FUZZ_CHECK(t->offset >= (npy ? 10u : 8u) && t->offset <= size && t->nbytes <= size - t->offset,
                       "tensor %d: [%llu, +%llu) outside the %llu-byte file", i, (unsigned long long)t->offset,
                       (unsigned long long)t->nbytes, (unsigned long long)size);
        for (int k = 0; k < i; k++) {
            const tsc_tensor_info_t *u = tsc_tensor_file_info(f, k);
            TSC_FUZZ_CHECK(!t->nbytes || !u->nbytes || t->offset >= u->offset + u->nbytes || u->offset >= t->offset + t->nbytes,
                           "tensors %d and %d overlap", k, i);
        }
        if (buf && t->nbytes <= READ_MAX)
            TSC_FUZZ_CHECK(tsc_tensor_file_read(f, i, buf) == TSC_OK, "tensor %d does not read back: %s", i, tsc_error_last());
    }
    free(buf);
}

TSC_FUZZ_TARGET(safetensors) {
    int npy = size >= 6 && !memcmp(data, "\x93NUMPY", 6);
    const char *path = tmp_path(npy);
    FILE *fp = fopen(path, "wb");
    if (!fp) return 0;
    size_t w = size ? fwrite(data, 1, size, fp) : 0;
    if (fclose(fp) != 0 || w != size) {
        unlink(path);
        return 0;
    }
    tsc_tensor_file_t *f;
    if (tsc_tensor_file_open(&f, path) == TSC_OK) {
        tsc_json_t *js = tsc_json_new();
        if (js) tsc_tensor_file_json(f, js), tsc_json_delete(js);
        check_tensors(f, size, npy);
        tsc_tensor_file_close(f);
    } else {
        TSC_FUZZ_CHECK(strstr(tsc_error_last(), path) != NULL, "the error does not name the file: %s", tsc_error_last());
    }
    unlink(path);
    return 0;
}
