/* fuzz_tensor_file.h: what the tensor-file targets share (fuzz_safetensors.c, fuzz_pt.c,
 * fuzz_npz.c): the input written to a file of the given extension (under $TSC_FUZZ_TMPDIR, else
 * /dev/shm when writable, else /tmp: the reader opens paths) and opened with tsc_tensor_file_open.
 * An accepted file must keep the reader's promises: nbytes == product(shape) * element size, a
 * tensor with a plain byte range lies inside the file (and, for .safetensors, no two overlap) and
 * reads back in full, any other tensor reads back or is refused naming the file (a deflated
 * member's data is checked when it is inflated); a refused file's message names it. */
#ifndef TSC_FUZZ_TENSOR_FILE_H
#define TSC_FUZZ_TENSOR_FILE_H

#include "fuzz_target.h"

#include <unistd.h>

#include "tsc_import.h"

/* Tensors bigger than this are not read (a hostile header can declare anything that fits the file). */
#define TSC_FUZZ_READ_MAX (1u << 22)

static const char *tsc_fuzz_tmp_path(const char *ext) {
    static char path[512];
    const char *dir = getenv("TSC_FUZZ_TMPDIR");
    if (!dir || !*dir) dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(path, sizeof path, "%s/tsc_fuzz_tf.%ld%s", dir, (long)getpid(), ext);
    return path;
}

static void tsc_fuzz_check_tensors(tsc_tensor_file_t *f, uint64_t size, int overlap_free) {
    int n = tsc_tensor_file_count(f);
    void *buf = malloc(TSC_FUZZ_READ_MAX);
    for (int i = 0; i < n; i++) {
        const tsc_tensor_info_t *t = tsc_tensor_file_info(f, i);
        uint64_t want = tsc_format_size(t->fmt);
        for (int d = 0; d < t->rank; d++) want *= t->dims[d];
        TSC_FUZZ_CHECK(t->nbytes == want, "tensor %d: nbytes %llu, shape gives %llu", i, (unsigned long long)t->nbytes,
                       (unsigned long long)want);
        TSC_FUZZ_CHECK(t->offset == UINT64_MAX || (t->offset <= size && t->nbytes <= size - t->offset),
                       "tensor %d: [%llu, +%llu) outside the %llu-byte file", i, (unsigned long long)t->offset,
                       (unsigned long long)t->nbytes, (unsigned long long)size);
        for (int k = 0; overlap_free && k < i; k++) {
            const tsc_tensor_info_t *u = tsc_tensor_file_info(f, k);
            TSC_FUZZ_CHECK(!t->nbytes || !u->nbytes || t->offset >= u->offset + u->nbytes || u->offset >= t->offset + t->nbytes,
                           "tensors %d and %d overlap", k, i);
        }
        /* A plain byte range checked at open must read back; a deflated member is only inflated
         * when read, so its corrupt data is found then, and refused naming the file. */
        if (buf && t->nbytes <= TSC_FUZZ_READ_MAX) {
            tsc_status_t st = tsc_tensor_file_read(f, i, buf);
            TSC_FUZZ_CHECK(st == TSC_OK || (t->offset == UINT64_MAX && st == TSC_ERR_FORMAT &&
                                            strstr(tsc_error_last(), tsc_tensor_file_path(f))),
                           "tensor %d does not read back: %s", i, tsc_error_last());
        }
    }
    for (int i = 0; i < tsc_tensor_file_other_count(f); i++)
        TSC_FUZZ_CHECK(tsc_tensor_file_other(f, i)->name != NULL, "other tensor %d has no name", i);
    free(buf);
}

/* The input as a file of extension ext, opened, checked and removed. */
static int tsc_fuzz_tensor_file(const uint8_t *data, size_t size, const char *ext, int overlap_free) {
    const char *path = tsc_fuzz_tmp_path(ext);
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
        tsc_fuzz_check_tensors(f, size, overlap_free);
        tsc_tensor_file_close(f);
    } else {
        TSC_FUZZ_CHECK(strstr(tsc_error_last(), path) != NULL, "the error does not name the file: %s", tsc_error_last());
    }
    unlink(path);
    return 0;
}

#endif
