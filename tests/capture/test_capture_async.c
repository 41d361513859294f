/* test_capture_async.c: the asynchronous capture pipeline (tsc_capture_async.h) from host
 * memory, which is the device path without its cudaMemcpyAsync: a stream of 10 steps (every
 * second one sampled, layer 1 only) captured through a staging buffer small enough that the
 * training thread must wait for the writer, against the same tensors through the synchronous
 * tsc_capture_put: the two dumps hold the same steps and the same bits in every dataset and
 * head. Also: unsampled steps cost nothing (no staging bytes), a tensor larger than the staging
 * buffer is refused, a writer error (a shape the dump refuses) comes back with its detail, and
 * tsc_capture_put_device without a GPU is refused on a sampled step and a no-op on an unsampled
 * one. (On a GPU, tests/capture/test_cuda checks the device copy itself: device capture equals host
 * capture of the same tensors.) */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tsc_capture.h"
#include "tsc_attn_cuda.h"
#include "tsc_capture_async.h"
#include "tsc_dump.h"
#include "tsc_h5.h"
#include "tsc_test.h"

/* Holds the library's HDF5 lock for a while, so the writer thread (which writes through HDF5)
 * stalls and the staging buffer fills: the training thread must then wait, deterministically. */
static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;
static int holding;
static void *hold_h5(void *arg) {
    (void)arg;
    tsc_h5_lock();
    pthread_mutex_lock(&hold_mu);
    holding = 1;
    pthread_cond_signal(&hold_cv);
    pthread_mutex_unlock(&hold_mu);
    usleep(300 * 1000);
    tsc_h5_unlock();
    return NULL;
}

static tsc_dump_meta_t geom(void) {
    tsc_dump_meta_t m;
    tsc_dump_meta_init(&m);
    m.n_layer = 2; m.n_head = 4; m.n_kv_head = 2; m.head_dim = 8; m.d_model = 16; m.seq_len = 19; m.batch = 2;
    m.softmax_scale = 0.35355339059327373; m.tile_k = 16;
    snprintf(m.policy, sizeof m.policy, "bf16-fa2");
    snprintf(m.producer, sizeof m.producer, "test_capture_async");
    return m;
}

typedef struct {
    uint16_t *q;
    float *k, *lse;
    uint64_t dq[4], dk[4], dl[3];
} tensors_t;

static void make(tensors_t *x, const tsc_dump_meta_t *m, long long step, int layer) {
    const size_t nq = (size_t)m->batch * m->n_head * m->seq_len * m->head_dim;
    const size_t nk = (size_t)m->batch * m->n_kv_head * m->seq_len * m->head_dim;
    const size_t nl = (size_t)m->batch * m->n_head * m->seq_len;
    uint64_t s = 0x1234 + (uint64_t)step * 977 + (uint64_t)layer;
    for (size_t i = 0; i < nq; i++) x->q[i] = tsc_bf16_from_f32((float)tsc_test_nrand(&s));
    for (size_t i = 0; i < nk; i++) x->k[i] = (float)tsc_test_nrand(&s);
    for (size_t i = 0; i < nl; i++) x->lse[i] = (float)tsc_test_nrand(&s);
    uint64_t dq[4] = {(uint64_t)m->batch, (uint64_t)m->n_head, (uint64_t)m->seq_len, (uint64_t)m->head_dim};
    uint64_t dk[4] = {(uint64_t)m->batch, (uint64_t)m->n_kv_head, (uint64_t)m->seq_len, (uint64_t)m->head_dim};
    uint64_t dl[3] = {(uint64_t)m->batch, (uint64_t)m->n_head, (uint64_t)m->seq_len};
    memcpy(x->dq, dq, sizeof dq);
    memcpy(x->dk, dk, sizeof dk);
    memcpy(x->dl, dl, sizeof dl);
}

/* Datasets of every step, layer, name and head of a and b that differ (or are missing). */
static long compare_dumps(const char *pa, const char *pb, int *steps) {
    tsc_dump_t *a = NULL, *b = NULL;
    if (tsc_dump_open(&a, pa) != TSC_OK || tsc_dump_open(&b, pb) != TSC_OK) {
        fprintf(stderr, "open: %s\n", tsc_error_last());
        tsc_dump_close(a);
        return -1;
    }
    const tsc_dump_meta_t *m = tsc_dump_meta(a);
    long bad = tsc_dump_n_steps(a) != tsc_dump_n_steps(b);
    *steps = tsc_dump_n_steps(a);
    float *x = malloc(4096 * 4), *y = malloc(4096 * 4);
    static const char *names[3] = {"q", "k", "lse"};
    for (int si = 0; si < tsc_dump_n_steps(a); si++) {
        const long long step = tsc_dump_step_at(a, si);
        bad += step != tsc_dump_step_at(b, si);
        for (int layer = 0; layer < 2; layer++)
            for (int n = 0; n < 3; n++)
                for (int bb = 0; bb < m->batch; bb++)
                    for (int h = 0; h < (n == 1 ? m->n_kv_head : m->n_head); h++) {
                        tsc_status_t sa = tsc_dump_read(a, step, layer, names[n], bb, h, x);
                        tsc_status_t sb = tsc_dump_read(b, step, layer, names[n], bb, h, y);
                        const size_t len = n == 2 ? (size_t)m->seq_len : (size_t)m->seq_len * m->head_dim;
                        bad += sa != sb || (sa == TSC_OK && memcmp(x, y, len * 4) != 0);
                    }
    }
    free(x);
    free(y);
    tsc_dump_close(a);
    tsc_dump_close(b);
    return bad;
}

int main(void) {
    char dir[] = "/tmp/tsc_test_async.XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char pa[300], pb[300], pc[300];
    snprintf(pa, sizeof pa, "%s/sync.h5", dir);
    snprintf(pb, sizeof pb, "%s/async.h5", dir);
    snprintf(pc, sizeof pc, "%s/bad.h5", dir);
    tsc_dump_meta_t m = geom();
    const tsc_capture_opts_t o = {.select = "steps=0:10:2,layers=1"};
    tsc_capture_t *ca = NULL, *cb = NULL;
    CHECKF(tsc_capture_open(&ca, pa, &m, &o) == TSC_OK, "%s", tsc_error_last());
    CHECKF(tsc_capture_open(&cb, pb, &m, &o) == TSC_OK, "%s", tsc_error_last());
    tensors_t x;
    const size_t nq = (size_t)m.batch * m.n_head * m.seq_len * m.head_dim;
    x.q = malloc(nq * 2);
    x.k = malloc(nq * 4);
    x.lse = malloc(nq * 4);
    const size_t qbytes = nq * 2;
    tsc_capture_async_t *a = NULL;
    /* room for a little more than one step's three tensors: the thread waits for the writer */
    CHECK(tsc_capture_async_open(&a, cb, qbytes * 3) == TSC_OK);
    pthread_t holder;
    pthread_create(&holder, NULL, hold_h5, NULL);
    pthread_mutex_lock(&hold_mu);
    while (!holding) pthread_cond_wait(&hold_cv, &hold_mu);
    pthread_mutex_unlock(&hold_mu);
    /* the asynchronous capture first, while the writer is stalled */
    for (long long step = 0; step < 10; step++) {
        CHECK(tsc_capture_async_step_begin(a, step) == TSC_OK);
        for (int layer = 0; layer < 2; layer++) {
            make(&x, &m, step, layer);
            CHECK(tsc_capture_put_async(a, layer, "q", TSC_FMT_BF16, 4, x.dq, x.q) == TSC_OK);
            CHECK(tsc_capture_put_async(a, layer, "k", TSC_FMT_FP32, 4, x.dk, x.k) == TSC_OK);
            CHECK(tsc_capture_put_async(a, layer, "lse", TSC_FMT_FP32, 3, x.dl, x.lse) == TSC_OK);
            /* the caller may reuse its buffers at once: the async copy was taken */
            memset(x.q, 0xff, qbytes);
            memset(x.k, 0xff, nq * 4);
        }
        CHECK(tsc_capture_async_step_end(a, NULL) == TSC_OK);
    }
    pthread_join(holder, NULL);
    /* the same tensors through the synchronous API */
    for (long long step = 0; step < 10; step++) {
        CHECK(tsc_capture_step_begin(ca, step) == TSC_OK);
        for (int layer = 0; layer < 2; layer++) {
            make(&x, &m, step, layer);
            CHECK(tsc_capture_put(ca, layer, "q", TSC_FMT_BF16, 4, x.dq, x.q) == TSC_OK);
            CHECK(tsc_capture_put(ca, layer, "k", TSC_FMT_FP32, 4, x.dk, x.k) == TSC_OK);
            CHECK(tsc_capture_put(ca, layer, "lse", TSC_FMT_FP32, 3, x.dl, x.lse) == TSC_OK);
        }
        CHECK(tsc_capture_step_end(ca) == TSC_OK);
    }
    const long waits = tsc_capture_async_waits(a);
    CHECKF(tsc_capture_async_close(a) == TSC_OK, "%s", tsc_error_last());
    CHECK(tsc_capture_close(ca) == TSC_OK);
    CHECK(tsc_capture_close(cb) == TSC_OK);
    int steps = 0;
    const long diff = compare_dumps(pa, pb, &steps);
    CHECKF(diff == 0, "%ld datasets differ between the synchronous and the asynchronous capture", diff);
    CHECK_EQ_INT(steps, 5);
    CHECKF(waits > 0, "the staging buffer never filled (waits %ld)", waits);
    printf("5 sampled steps of 10 through a %zu-byte staging buffer: %ld waits for the writer, dumps identical\n",
           qbytes * 3, waits);

    /* refusals and writer errors */
    tsc_capture_t *cc = NULL;
    CHECK(tsc_capture_open(&cc, pc, &m, &o) == TSC_OK);
    CHECK(tsc_capture_async_open(&a, cc, qbytes / 2) == TSC_OK);
    CHECK(tsc_capture_async_step_begin(a, 1) == TSC_OK); /* unsampled */
    CHECK(tsc_capture_put_async(a, 1, "q", TSC_FMT_BF16, 4, x.dq, x.q) == TSC_OK);
    CHECK(tsc_capture_put_device(a, 1, "q", TSC_FMT_BF16, 4, x.dq, (void *)8, NULL) == TSC_OK);
    CHECK(tsc_capture_async_step_end(a, NULL) == TSC_OK);
    CHECK(tsc_capture_async_step_begin(a, 2) == TSC_OK); /* sampled */
    CHECK(tsc_capture_put_async(a, 1, "q", TSC_FMT_BF16, 4, x.dq, x.q) == TSC_ERR_ARG);
    CHECK(strstr(tsc_error_last(), "does not fit the staging buffer") != NULL);
    uint64_t wrong[4] = {x.dq[0], x.dq[1], x.dq[2] + 1, x.dq[3]};
    CHECK(tsc_capture_put_async(a, 1, "lse", TSC_FMT_FP32, 3, x.dl, x.lse) == TSC_OK);
    CHECK(tsc_capture_put_async(a, 1, "q", TSC_FMT_BF16, 2, wrong + 2, x.q) == TSC_OK); /* refused by the writer */
    tsc_status_t dev = tsc_capture_put_device(a, 1, "k", TSC_FMT_FP32, 4, x.dk, (void *)8, NULL);
    if (!tsc_cuda_available()) CHECK(dev == TSC_ERR_UNSUPPORTED);
    /* the writer may have refused q already (its error is sticky), or not yet: the step's end reports it or not */
    tsc_status_t se = tsc_capture_async_step_end(a, NULL);
    CHECKF(se == TSC_OK || se == TSC_ERR_SHAPE, "step end: %d: %s", (int)se, tsc_error_last());
    tsc_status_t st = tsc_capture_async_close(a);
    CHECKF(st == TSC_ERR_SHAPE && strstr(tsc_error_last(), "q"), "writer error %d: %s", (int)st, tsc_error_last());
    CHECK(tsc_capture_close(cc) == TSC_OK);
    free(x.q);
    free(x.k);
    free(x.lse);
    tsc_test_rmtree(dir);
    return tsc_test_done();
}
