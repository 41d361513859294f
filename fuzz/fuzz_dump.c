/* fuzz_dump.c: the input as a dump file (a dump is hostile input: users open dumps they received).
 *
 * The bytes are written to a per-process file (under $TSC_FUZZ_TMPDIR, else /dev/shm when it is
 * writable, else /tmp: the dump reader opens paths; the file is removed once opened), then opened
 * with tsc_dump_open, validated deep (every chunk read), and a few heads of every dataset of the
 * first steps are read, as floats and as raw bits. After tsc_dump_close no HDF5 object may remain
 * open: a leaked id keeps the file open inside HDF5, so the next input under the same name would
 * be read from stale state.
 */
#include "fuzz_target.h"

#include <hdf5.h>
#include <unistd.h>

#include "tsc_dump.h"
#include "tsc_h5.h"

/* Slices bigger than this are not read (the declared shape of a hostile file can be anything;
 * the validator still reads them). */
#define SLICE_MAX_ELEMS (1u << 22)

static const char *tmp_path(void) {
    static char path[512];
    if (path[0]) return path;
    const char *dir = getenv("TSC_FUZZ_TMPDIR");
    if (!dir || !*dir) dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(path, sizeof path, "%s/tsc_fuzz_dump.%ld.h5", dir, (long)getpid());
    return path;
}

static int write_file(const char *path, const uint8_t *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t n = size ? fwrite(data, 1, size, f) : 0;
    return (fclose(f) == 0 && n == size) ? 0 : -1;
}

/* Reads heads 0 and the last one of every dataset of step/layer. */
static void read_layer(tsc_dump_t *d, long long step, int layer, void *buf) {
    char names[16][TSC_DUMP_NAME_MAX];
    int nn = 0;
    if (tsc_dump_dataset_names(d, step, layer, names, 16, &nn) != TSC_OK) return;
    const tsc_dump_meta_t *m = tsc_dump_meta(d);
    for (int k = 0; k < nn && k < 16; k++) {
        tsc_dump_dataset_info_t in;
        if (tsc_dump_dataset_info(d, step, layer, names[k], &in) != TSC_OK) continue;
        uint64_t ne = tsc_dump_slice_elems(d, step, layer, names[k]);
        if (ne == 0 || ne > SLICE_MAX_ELEMS) continue;
        int heads = !strcmp(names[k], "k") || !strcmp(names[k], "v") ? m->n_kv_head : m->n_head;
        (void)tsc_dump_read(d, step, layer, names[k], 0, 0, buf);
        (void)tsc_dump_read(d, step, layer, names[k], m->batch - 1, heads - 1, buf);
        (void)tsc_dump_read_raw(d, step, layer, names[k], 0, heads - 1, buf);
        (void)tsc_dump_read(d, step, layer, names[k], m->batch, heads, buf); /* out of range: an error */
    }
}

static void exercise(tsc_dump_t *d) {
    (void)tsc_dump_validate(d, 1, NULL, NULL);
    long planted[16];
    size_t n;
    char str[256];
    (void)tsc_dump_attr_longs(d, "planted_heads", planted, 16, &n);
    (void)tsc_dump_attr_str(d, "producer", str, sizeof str);
    (void)tsc_dump_incomplete_step(d);
    (void)tsc_dump_size_bytes(d);
    /* one buffer for the whole run: a fresh 16 MiB per input cost a quarter of the run in page
     * faults */
    static float *buf;
    if (!buf) buf = malloc((size_t)SLICE_MAX_ELEMS * sizeof(float));
    if (!buf) return;
    for (int si = 0; si < tsc_dump_n_steps(d) && si < 2; si++) {
        long long step = tsc_dump_step_at(d, si);
        int layers[8], nl = 0;
        if (tsc_dump_layers(d, step, layers, 8, &nl) != TSC_OK) continue;
        for (int li = 0; li < nl && li < 8; li++) read_layer(d, step, layers[li], buf);
    }
}

TSC_FUZZ_TARGET(dump) {
    const char *path = tmp_path();
    if (write_file(path, data, size) != 0) {
        unlink(path);
        return 0;
    }
    tsc_dump_t *d = NULL;
    tsc_status_t st = tsc_dump_open(&d, path);
    /* HDF5 holds the file open, and a single-file dump is never opened again by path: unlinking
     * now leaves no file behind when a later read crashes */
    unlink(path);
    if (st == TSC_OK) {
        TSC_FUZZ_CHECK(d != NULL, "opened without a handle");
        exercise(d);
        tsc_dump_close(d);
    } else {
        TSC_FUZZ_CHECK(d == NULL, "a failed open left a handle");
    }
    tsc_h5_lock();
    ssize_t open_ids = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
    tsc_h5_unlock();
    TSC_FUZZ_CHECK(open_ids == 0, "%ld HDF5 objects still open after tsc_dump_close", (long)open_ids);
    return 0;
}
