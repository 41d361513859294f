/* test_capture.c: the host capture API: sampling (steps, layers, heads with GQA), packing, and
 * survival of SIGKILL at arbitrary moments (a child captures in a loop and is killed). */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tsc_capture.h"
#include "tsc_test.h"

static char dir[256];
static int kills_mid_step;

/* The value every test expects at (step, tensor, b, h, t, d): exactly representable in bf16. */
static float val(long long step, int tensor, int b, int h, int t, int d) {
    int v = (int)((step * 131 + tensor * 31 + b * 17 + h * 7 + t * 3 + d) % 251) - 125;
    return (float)v / 8.0f;
}

static tsc_dump_meta_t geom(int T) {
    tsc_dump_meta_t m;
    tsc_dump_meta_init(&m);
    m.n_layer = 2; m.n_head = 4; m.n_kv_head = 2; m.head_dim = 8; m.d_model = 16; m.seq_len = T; m.batch = 2;
    m.softmax_scale = 0.35355339059327373; m.tile_k = 16;
    snprintf(m.policy, sizeof m.policy, "bf16-fa2");
    snprintf(m.producer, sizeof m.producer, "test_capture");
    return m;
}

/* Hands over q (bf16), k, v (f32 -> stored as given), lse (f32) of both layers. */
static tsc_status_t capture_step(tsc_capture_t *c, const tsc_dump_meta_t *m, long long step) {
    int B = m->batch, H = m->n_head, K = m->n_kv_head, T = m->seq_len, D = m->head_dim;
    size_t nq = (size_t)B * H * T * D, nk = (size_t)B * K * T * D;
    uint16_t *q = malloc(nq * 2);
    float *k = malloc(nk * 4), *lse = malloc((size_t)B * H * T * 4);
    tsc_status_t st = tsc_capture_step_begin(c, step);
    for (int layer = 0; st == TSC_OK && layer < 2; layer++) {
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < T; t++) {
                    lse[((size_t)b * H + h) * T + t] = val(step, 9 + layer, b, h, t, 0);
                    for (int d = 0; d < D; d++) {
                        q[(((size_t)b * H + h) * T + t) * D + d] = tsc_bf16_from_f32(val(step, layer, b, h, t, d));
                        if (h < K) k[(((size_t)b * K + h) * T + t) * D + d] = val(step, 4 + layer, b, h, t, d);
                    }
                }
        uint64_t dq[4] = {(uint64_t)B, (uint64_t)H, (uint64_t)T, (uint64_t)D}, dk[4] = {(uint64_t)B, (uint64_t)K, (uint64_t)T,
                                                                                       (uint64_t)D};
        uint64_t dl[3] = {(uint64_t)B, (uint64_t)H, (uint64_t)T};
        st = tsc_capture_put(c, layer, "q", TSC_FMT_BF16, 4, dq, q);
        if (st == TSC_OK) st = tsc_capture_put(c, layer, "k", TSC_FMT_FP32, 4, dk, k);
        if (st == TSC_OK) st = tsc_capture_put(c, layer, "v", TSC_FMT_FP32, 4, dk, k);
        if (st == TSC_OK) st = tsc_capture_put(c, layer, "lse", TSC_FMT_FP32, 3, dl, lse);
    }
    if (st == TSC_OK) st = tsc_capture_step_end(c);
    free(q); free(k); free(lse);
    return st;
}

/* Counts values of step/layer that differ from val() (heads with mask bit set only). */
static long check_step(tsc_dump_t *d, long long step, int layer) {
    const tsc_dump_meta_t *m = tsc_dump_meta(d);
    int T = m->seq_len, D = m->head_dim;
    float *buf = malloc(sizeof(float) * (size_t)T * D);
    long bad = 0;
    tsc_dump_dataset_info_t in;
    if (tsc_dump_dataset_info(d, step, layer, "k", &in) != TSC_OK) { free(buf); return -1; }
    uint64_t kmask = in.heads_mask;
    if (tsc_dump_dataset_info(d, step, layer, "q", &in) != TSC_OK) { free(buf); return -1; }
    for (int b = 0; b < m->batch; b++)
        for (int h = 0; h < m->n_head; h++) {
            if (!(in.heads_mask >> h & 1)) continue;
            if (tsc_dump_read(d, step, layer, "q", b, h, buf) != TSC_OK) { bad++; continue; }
            for (int t = 0; t < T; t++)
                for (int e = 0; e < D; e++) bad += buf[t * D + e] != val(step, layer, b, h, t, e);
            if (h < m->n_kv_head && (kmask >> h & 1) && tsc_dump_read(d, step, layer, "k", b, h, buf) == TSC_OK)
                for (int t = 0; t < T; t++)
                    for (int e = 0; e < D; e++) bad += buf[t * D + e] != val(step, 4 + layer, b, h, t, e);
            if (tsc_dump_read(d, step, layer, "lse", b, h, buf) != TSC_OK) bad++;
            else for (int t = 0; t < T; t++) bad += buf[t] != val(step, 9 + layer, b, h, t, 0);
        }
    free(buf);
    return bad;
}

static void sampling(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/sampled.h5", dir);
    tsc_dump_meta_t m = geom(19);
    tsc_capture_t *c;
    tsc_capture_opts_t o = {.select = "steps=0:10:2,layers=1,heads=1", .store_fmt = TSC_FMT_BF16 + 1};
    CHECKF(tsc_capture_open(&c, path, &m, &o) == TSC_OK, "%s", tsc_error_last());
    if (!c) return;
    CHECK(tsc_capture_wants(c, 4, 1) && !tsc_capture_wants(c, 4, 0) && !tsc_capture_wants(c, 5, -1));
    for (long long s = 0; s < 7; s++) CHECKF(capture_step(c, &m, s) == TSC_OK, "%s", tsc_error_last());
    CHECK(tsc_capture_step_begin(c, 3) == TSC_ERR_ARG);  /* steps must increase */
    CHECK_EQ_INT(tsc_capture_n_steps(c), 4);             /* 0, 2, 4, 6 */
    CHECK(tsc_capture_close(c) == TSC_OK);
    struct stat sb;
    char sd[320];
    snprintf(sd, sizeof sd, "%s.capture", path);
    CHECK(stat(sd, &sb) != 0);  /* packed: folder gone */
    tsc_dump_t *d;
    CHECKF(tsc_dump_open(&d, path) == TSC_OK, "%s", tsc_error_last());
    if (!d) return;
    CHECK(!tsc_dump_is_session(d));
    CHECK_EQ_INT(tsc_dump_n_steps(d), 4);
    CHECK_EQ_INT(tsc_dump_step_at(d, 3), 6);
    int layers[4], nl;
    CHECK(tsc_dump_layers(d, 2, layers, 4, &nl) == TSC_OK && nl == 1 && layers[0] == 1);
    tsc_dump_dataset_info_t in;
    CHECK(tsc_dump_dataset_info(d, 2, 1, "q", &in) == TSC_OK);
    CHECK_EQ_U32(in.heads_mask, 0x2);      /* query head 1 only */
    CHECK_EQ_INT(in.dtype, TSC_FMT_BF16);  /* store_fmt converted */
    CHECK(tsc_dump_dataset_info(d, 2, 1, "k", &in) == TSC_OK);
    CHECK_EQ_U32(in.heads_mask, 0x1);      /* kv head 0 serves query heads 0 and 1 */
    CHECK(tsc_dump_dataset_info(d, 2, 1, "lse", &in) == TSC_OK);
    CHECK_EQ_INT(in.dtype, TSC_FMT_FP32);  /* lse stays fp32 */
    float buf[19 * 8];
    CHECK(tsc_dump_read(d, 2, 1, "q", 0, 0, buf) == TSC_OK && isnan(buf[0]));  /* unselected head: NaN */
    for (int i = 0; i < 4; i++) CHECK_EQ_INT(check_step(d, tsc_dump_step_at(d, i), 1), 0);
    char sel[256];
    CHECK(tsc_dump_attr_str(d, "capture_select", sel, sizeof sel) == TSC_OK);
    CHECK_STREQ(sel, "steps=0:10:2,layers=1,heads=1,batches=all");
    tsc_dump_close(d);
}

/* A child captures steps in a loop (reporting each completed step through a pipe) until killed. */
static void sigkill_once(int round, long delay_us) {
    char path[300];
    snprintf(path, sizeof path, "%s/killed_%d.h5", dir, round);
    int fds[2];
    if (pipe(fds) != 0) { CHECK(0); return; }
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        tsc_dump_meta_t m = geom(64);
        tsc_capture_t *c;
        if (tsc_capture_open(&c, path, &m, NULL) != TSC_OK) _exit(3);
        for (long long s = 0;; s++) {
            if (capture_step(c, &m, s) != TSC_OK) _exit(4);
            char b = 1;
            if (write(fds[1], &b, 1) != 1) _exit(5);
        }
    }
    close(fds[1]);
    /* wait for 3 completed steps, then kill after a round-dependent delay: the kill lands at
     * different points of a step (datasets, attributes, close, rename) */
    int got = 0;
    char b;
    while (got < 3 && read(fds[0], &b, 1) == 1) got++;
    struct timespec ts = {0, delay_us * 1000};
    nanosleep(&ts, NULL);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    while (read(fds[0], &b, 1) == 1) got++;  /* steps reported complete before the kill */
    close(fds[0]);
    CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "round %d: child exited %d", round, status);

    tsc_dump_t *d;
    CHECKF(tsc_dump_open(&d, path) == TSC_OK, "round %d: %s", round, tsc_error_last());
    if (!d) return;
    int n = tsc_dump_n_steps(d);
    CHECK(tsc_dump_is_session(d));
    /* every step the child reported is there; at most one more (completed after its last report) */
    CHECKF(n >= got && n <= got + 1, "round %d: %d steps in the file, %d reported", round, n, got);
    for (int i = 0; i < n; i++) {
        CHECK_EQ_INT(tsc_dump_step_at(d, i), i);
        CHECK_EQ_INT(check_step(d, i, 0), 0);
        CHECK_EQ_INT(check_step(d, i, 1), 0);
    }
    long long inc = tsc_dump_incomplete_step(d);
    CHECKF(inc == -1 || inc == n, "round %d: incomplete step %lld with %d complete", round, inc, n);
    kills_mid_step += inc >= 0;
    CHECK(tsc_dump_validate(d, 1, NULL, NULL) == 0);
    tsc_dump_close(d);

    /* pack what the killed session left; the packed file says the same */
    char sd[320];
    snprintf(sd, sizeof sd, "%s.capture", path);
    CHECKF(tsc_capture_pack(sd, path, 1) == TSC_OK, "%s", tsc_error_last());
    CHECK(tsc_dump_open(&d, path) == TSC_OK);
    if (!d) return;
    CHECK(!tsc_dump_is_session(d));
    CHECK_EQ_INT(tsc_dump_n_steps(d), n);
    CHECK_EQ_INT(tsc_dump_incomplete_step(d), inc);
    if (n) CHECK_EQ_INT(check_step(d, n - 1, 1), 0);
    tsc_dump_close(d);
}

int main(void) {
    snprintf(dir, sizeof dir, "tsc_test_capture_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    sampling();
    /* stale session folders are not overwritten */
    char p[300];
    snprintf(p, sizeof p, "%s/stale.h5", dir);
    tsc_dump_meta_t m = geom(4);
    tsc_capture_t *c, *c2;
    tsc_capture_opts_t keep = {.keep_session = 1};
    CHECK(tsc_capture_open(&c, p, &m, &keep) == TSC_OK);
    CHECK(capture_step(c, &m, 0) == TSC_OK);
    CHECK(tsc_capture_close(c) == TSC_OK);
    CHECK(tsc_capture_open(&c2, p, &m, NULL) == TSC_ERR_IO && c2 == NULL);
    tsc_dump_t *d;
    CHECK(tsc_dump_open(&d, p) == TSC_OK && tsc_dump_n_steps(d) == 1);  /* opens p.capture */
    tsc_dump_close(d);
    CHECK(tsc_capture_open(&c2, p, &m, &(tsc_capture_opts_t){.select = "steps=1:0"}) == TSC_ERR_ARG);
    snprintf(p, sizeof p, "%s/no/such/dir/run.h5", dir);  /* unwritable: the folder is missing */
    CHECK(tsc_capture_open(&c2, p, &m, NULL) == TSC_ERR_IO && c2 == NULL);
    CHECKF(strstr(tsc_error_last(), "run.h5.capture") != NULL, "%s", tsc_error_last());

    /* delays from 0 to ~15 ms spread the kill over whole steps (a step takes a few ms) */
    for (int r = 0; r < 12; r++) sigkill_once(r, (long)r * 1300);
    printf("SIGKILL rounds that hit a step in flight: %d of 12\n", kills_mid_step);
    tsc_test_rmtree(dir);
    return tsc_test_done();
}
