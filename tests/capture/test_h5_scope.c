/* test_h5_scope.c: the library silences HDF5's error printing only inside its own calls (the host's
 * automatic error handler is neither called during them nor replaced after them), and its HDF5
 * lock lets two threads read dumps through their own handles at once with correct data. */
#include <hdf5.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tsc_capture.h"
#include "tsc_dump.h"
#include "tsc_h5.h"
#include "tsc_synth.h"
#include "tsc_test.h"

static char dir[256];

/* The host program's handler: counts its calls instead of printing. */
static int handler_calls;
static int handler_tag;
static herr_t counting_handler(hid_t estack, void *client_data) {
    (void)estack;
    if (client_data == &handler_tag) handler_calls++;
    return 0;
}

static int handler_installed(void) {
    H5E_auto2_t f = NULL;
    void *data = NULL;
    if (H5Eget_auto2(H5E_DEFAULT, &f, &data) < 0) return 0;
    return f == counting_handler && data == &handler_tag;
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return;
    fwrite(data, 1, n, fp);
    fclose(fp);
}

/* A raw HDF5 call of the test itself that fails: the host's handler must see it. */
static void raw_failing_open(const char *path) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f >= 0) H5Fclose(f);
}

static void test_silenced_inside_restored_after(const char *dump_path) {
    char bad[300], trunc[300];
    snprintf(bad, sizeof bad, "%s/not_hdf5.h5", dir);
    snprintf(trunc, sizeof trunc, "%s/truncated.h5", dir);
    write_bytes(bad, "this is plain text, not an HDF5 file\n", 37);
    /* a truncated dump: the HDF5 signature is there, so HDF5 itself fails (and fills its stack) */
    FILE *in = fopen(dump_path, "rb");
    char head[2048];
    size_t got = in ? fread(head, 1, sizeof head, in) : 0;
    if (in) fclose(in);
    CHECK(got == sizeof head);
    write_bytes(trunc, head, got);

    H5Eset_auto2(H5E_DEFAULT, counting_handler, &handler_tag);
    /* the test's own failing call reaches the handler: the checks below can see a leak */
    handler_calls = 0;
    raw_failing_open(trunc);
    CHECKF(handler_calls > 0, "a raw failing H5Fopen did not call the installed handler (%d)", handler_calls);

    handler_calls = 0;
    tsc_dump_t *d = (tsc_dump_t *)1;
    CHECK(tsc_dump_open(&d, bad) == TSC_ERR_FORMAT);
    CHECK(d == NULL);
    CHECK(tsc_dump_open(&d, trunc) == TSC_ERR_FORMAT);
    hid_t fid;
    CHECK(tsc_h5_open(&fid, trunc, 0) == TSC_ERR_FORMAT);
    CHECK(tsc_capture_pack(bad, trunc, 0) != TSC_OK);  /* not a session folder */
    /* a failure deep inside HDF5 on a valid file: creating a group in a read-only file */
    CHECK(tsc_h5_open(&fid, dump_path, 0) == TSC_OK);
    CHECK(tsc_h5_group_create(fid, "new/group", NULL) == TSC_ERR_IO);
    long v;
    CHECK(tsc_h5_attr_read_long(fid, "no_such_attribute", &v) == TSC_ERR_MISSING);
    H5Fclose(fid);
    CHECKF(handler_calls == 0, "the host's handler was called %d times during the library's calls", handler_calls);

    /* still installed afterwards, and still called by the host's own failing calls */
    CHECK(handler_installed());
    handler_calls = 0;
    raw_failing_open(bad);
    CHECKF(handler_calls > 0, "the handler was not called after the library's calls (%d)", handler_calls);

    /* the public scope nests: only the outermost leave puts the handler back */
    handler_calls = 0;
    tsc_h5_enter();
    CHECK(!handler_installed());
    tsc_h5_enter();
    raw_failing_open(bad);
    tsc_h5_leave();
    CHECK(!handler_installed());
    raw_failing_open(trunc);
    tsc_h5_leave();
    CHECK_EQ_INT(handler_calls, 0);
    CHECK(handler_installed());
    raw_failing_open(bad);
    CHECK(handler_calls > 0);

    /* a program that installed no handler at all keeps none */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    CHECK(tsc_dump_open(&d, bad) == TSC_ERR_FORMAT);
    H5E_auto2_t f = counting_handler;
    void *data = &handler_tag;
    H5Eget_auto2(H5E_DEFAULT, &f, &data);
    CHECK(f == NULL && data == NULL);
}

/* ---- two threads reading through their own handles ------------------------------------------ */

static const char *names[] = {"q", "k", "v", "o", "do", "lse", "x"};
#define N_NAMES 7
#define N_STEPS 2

typedef struct {
    const char *path;
    float *ref;       /* every slice of every (step, layer, name, b, h), read sequentially */
    size_t total;
    int rounds;
    int mismatches;
    int errors;
    char first_error[512];
} reader_t;

/* Reads every slice of the dump, in order, into out (or compares with ref when cmp). */
static int read_all(tsc_dump_t *d, float *out, size_t cap, size_t *used, const float *ref, int *mismatch) {
    const tsc_dump_meta_t *m = tsc_dump_meta(d);
    size_t off = 0;
    for (int si = 0; si < tsc_dump_n_steps(d); si++) {
        long long s = tsc_dump_step_at(d, si);
        for (int l = 0; l < m->n_layer; l++) {
            for (int k = 0; k < N_NAMES; k++) {
                int nb = m->batch, nh = !strcmp(names[k], "k") || !strcmp(names[k], "v") ? m->n_kv_head : m->n_head;
                if (!strcmp(names[k], "x")) nh = 1;
                size_t ne = (size_t)tsc_dump_slice_elems(d, s, l, names[k]);
                if (ne == 0) return -1;
                for (int b = 0; b < nb; b++)
                    for (int h = 0; h < nh; h++) {
                        if (off + ne > cap) return -1;
                        if (tsc_dump_read(d, s, l, names[k], b, h, out + off) != TSC_OK) return -1;
                        if (ref && memcmp(out + off, ref + off, ne * sizeof(float)) != 0) (*mismatch)++;
                        off += ne;
                    }
            }
        }
    }
    *used = off;
    return 0;
}

static void *reader_main(void *arg) {
    reader_t *r = arg;
    float *buf = malloc(r->total * sizeof(float));
    for (int round = 0; buf && round < r->rounds; round++) {
        tsc_dump_t *d;
        if (tsc_dump_open(&d, r->path) != TSC_OK) {
            if (!r->errors++) snprintf(r->first_error, sizeof r->first_error, "%s", tsc_error_last());
            continue;
        }
        size_t used = 0;
        memset(buf, 0, r->total * sizeof(float));
        if (read_all(d, buf, r->total, &used, r->ref, &r->mismatches) != 0 || used != r->total) {
            if (!r->errors++) snprintf(r->first_error, sizeof r->first_error, "%s", tsc_error_last());
        }
        tsc_dump_close(d);
    }
    free(buf);
    return NULL;
}

static void test_threads(const char *path_a, const char *path_b) {
    const char *paths[2] = {path_a, path_b};
    float *ref[2] = {NULL, NULL};
    size_t total[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        tsc_dump_t *d;
        CHECK(tsc_dump_open(&d, paths[i]) == TSC_OK);
        if (!d) return;
        CHECK_EQ_INT(tsc_dump_n_steps(d), N_STEPS);
        size_t cap = 1 << 20;
        ref[i] = malloc(cap * sizeof(float));
        CHECK(read_all(d, ref[i], cap, &total[i], NULL, NULL) == 0);
        tsc_dump_close(d);
    }
    /* the two dumps differ (other seeds), so a mixed-up buffer would show */
    CHECK(total[0] == total[1] && memcmp(ref[0], ref[1], total[0] * sizeof(float)) != 0);

    reader_t r[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].path = paths[i % 2];
        r[i].ref = ref[i % 2];
        r[i].total = total[i % 2];
        r[i].rounds = 10;
    }
    /* two threads, one on each dump, then two on the same dump with their own handles */
    for (int pass = 0; pass < 2; pass++) {
        int a = pass == 0 ? 0 : 2, b = pass == 0 ? 1 : 3;
        if (pass == 1) r[b].path = r[a].path, r[b].ref = r[a].ref, r[b].total = r[a].total;
        CHECK(pthread_create(&t[a], NULL, reader_main, &r[a]) == 0);
        CHECK(pthread_create(&t[b], NULL, reader_main, &r[b]) == 0);
        pthread_join(t[a], NULL);
        pthread_join(t[b], NULL);
        for (int k = 0; k < 2; k++) {
            int i = k ? b : a;
            CHECKF(r[i].errors == 0, "reader %d: %d failed rounds (%s)", i, r[i].errors, r[i].first_error);
            CHECKF(r[i].mismatches == 0, "reader %d: %d slices differ from the sequential read", i, r[i].mismatches);
        }
    }
    free(ref[0]);
    free(ref[1]);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/tsc_h5_scope_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/a.h5", dir);
    snprintf(b, sizeof b, "%s/b.h5", dir);
    tsc_synth_opts_t o;
    tsc_synth_opts_init(&o);
    o.steps = "0:2";
    CHECK(tsc_synth_write(a, &o) == TSC_OK);
    o.seed = 7;
    o.deflate = 1;  /* the second one compressed: the filter path runs in parallel too */
    CHECK(tsc_synth_write(b, &o) == TSC_OK);

    test_silenced_inside_restored_after(a);
    test_threads(a, b);

    tsc_test_rmtree(dir);
    return tsc_test_done();
}
