/* test_flight.c: the flight recorder (tsc_flight.h): which steps a fired dump holds and that its
 * tensors are bit-equal to what was handed over, for each trigger (loss spike, grad-norm spike,
 * NaN loss, NaN tensor, manual, SIGTERM), the memory bound, the layer choice, re-arming, and that
 * `tilescope info` and `diagnose` read a fired dump. The tensors are a real attention forward
 * (tsc_attn_run under the dump's policy) on random bf16 inputs, so diagnose has real numbers. */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tsc_attention.h"
#include "tsc_attn_cuda.h"
#include "tsc_flight.h"
#include "tsc_h5.h"
#include "tsc_policy.h"
#include "tsc_test.h"

enum { L = 2, B = 1, H = 2, HKV = 1, T = 16, D = 8 };
#define NQ ((size_t)B * H * T * D)
#define NK ((size_t)B * HKV * T * D)
#define NL ((size_t)B * H * T)
/* bytes of one layer as handed over: q, k, v, do as bf16, o and lse as fp32 */
#define LAYER_BYTES (2 * NQ * 2 + 2 * NK * 2 + NQ * 4 + NL * 4)

static char dir[256];

/* One layer of one step: the tensors exactly as handed over. */
typedef struct {
    uint16_t q[NQ], k[NK], v[NK], dout[NQ];
    float o[NQ], lse[NL];
} tensors_t;

static tsc_dump_meta_t geom(void) {
    tsc_dump_meta_t m;
    tsc_dump_meta_init(&m);
    m.n_layer = L; m.n_head = H; m.n_kv_head = HKV; m.head_dim = D; m.d_model = 16; m.seq_len = T; m.batch = B;
    m.softmax_scale = 0.35355339059327373; m.tile_q = 16; m.tile_k = 16;
    snprintf(m.policy, sizeof m.policy, "bf16-fa2");
    snprintf(m.producer, sizeof m.producer, "test_flight");
    return m;
}

/* Deterministic inputs of (step, layer), rounded to bf16, and the bf16-fa2 forward's o and lse. */
static void make(long long step, int layer, tensors_t *t) {
    uint64_t s = 1000003ULL * (uint64_t)step + 7919ULL * (uint64_t)layer + 1;
    static float q[NQ], k[NK], v[NK];
    for (size_t i = 0; i < NQ; i++) {
        q[i] = tsc_bf16_to_f32(t->q[i] = tsc_bf16_from_f32((float)(2.0 * tsc_test_nrand(&s))));
        t->dout[i] = tsc_bf16_from_f32((float)(0.1 * tsc_test_nrand(&s)));
    }
    for (size_t i = 0; i < NK; i++) {
        k[i] = tsc_bf16_to_f32(t->k[i] = tsc_bf16_from_f32((float)(2.0 * tsc_test_nrand(&s))));
        v[i] = tsc_bf16_to_f32(t->v[i] = tsc_bf16_from_f32((float)tsc_test_nrand(&s)));
    }
    tsc_policy_t pol;
    CHECK(tsc_policy_parse("bf16-fa2", &pol) == TSC_OK);
    tsc_attn_dims_t dims = {.B = B, .H = H, .Hkv = HKV, .T = T, .D = D, .causal = 1, .scale = 0.35355339059327373};
    tsc_attn_io_t io = {.dtype = TSC_ATTN_F32, .q = q, .k = k, .v = v, .o = t->o, .lse = t->lse};
    if (tsc_attn_run(&pol, &dims, &io, NULL, 0) != TSC_OK) fprintf(stderr, "attn: %s\n", tsc_error_last());
}

/* Begins step, hands over both layers (one tensor of q made NaN when nan_q), leaves the step open. */
static tsc_status_t hand_over(tsc_flight_t *fr, long long step, int nan_q) {
    tsc_status_t st = tsc_flight_step_begin(fr, step);
    uint64_t dq[4] = {B, H, T, D}, dk[4] = {B, HKV, T, D}, dl[3] = {B, H, T};
    for (int layer = 0; st == TSC_OK && layer < L; layer++) {
        static tensors_t t;
        make(step, layer, &t);
        if (nan_q && layer == 1) t.q[5] = 0x7fc0;
        st = tsc_flight_put(fr, layer, "q", TSC_FMT_BF16, 4, dq, t.q);
        if (st == TSC_OK) st = tsc_flight_put(fr, layer, "k", TSC_FMT_BF16, 4, dk, t.k);
        if (st == TSC_OK) st = tsc_flight_put(fr, layer, "v", TSC_FMT_BF16, 4, dk, t.v);
        if (st == TSC_OK) st = tsc_flight_put(fr, layer, "o", TSC_FMT_FP32, 4, dq, t.o);
        if (st == TSC_OK) st = tsc_flight_put(fr, layer, "do", TSC_FMT_BF16, 4, dq, t.dout);
        if (st == TSC_OK) st = tsc_flight_put(fr, layer, "lse", TSC_FMT_FP32, 3, dl, t.lse);
    }
    return st;
}

/* One whole step; returns whether it fired (-1 on an error). */
static int run_step(tsc_flight_t *fr, long long step, double loss, double grad) {
    int fired = 0;
    tsc_status_t st = hand_over(fr, step, 0);
    if (st == TSC_OK) st = tsc_flight_step_end(fr, loss, grad, &fired);
    if (st != TSC_OK) { fprintf(stderr, "step %lld: %s\n", step, tsc_error_last()); return -1; }
    return fired;
}

static tsc_flight_t *open_fr(const char *name, int n, const char *layers, char *path) {
    snprintf(path, 512, "%s/%s", dir, name);
    tsc_flight_opts_t o;
    tsc_flight_opts_init(&o);
    o.n_steps = n;
    o.layers = layers;
    o.loss.warmup = o.grad.warmup = 5;
    tsc_dump_meta_t m = geom();
    tsc_flight_t *fr = NULL;
    if (tsc_flight_open(&fr, path, &m, &o) != TSC_OK) fprintf(stderr, "open: %s\n", tsc_error_last());
    return fr;
}

/* The dump at path holds exactly steps want[0..n) (layers from first_layer on), each tensor's
 * bits equal to make()'s. */
static void check_dump(const char *path, const long long *want, int n, int first_layer) {
    tsc_dump_t *d;
    if (tsc_dump_open(&d, path) != TSC_OK) { CHECKF(0, "%s", tsc_error_last()); return; }
    CHECK_EQ_INT(tsc_dump_n_steps(d), n);
    CHECK(!tsc_dump_is_session(d));
    for (int i = 0; i < n && i < tsc_dump_n_steps(d); i++) {
        CHECK_EQ_INT(tsc_dump_step_at(d, i), want[i]);
        int layers[4], nl = 0;
        CHECK(tsc_dump_layers(d, want[i], layers, 4, &nl) == TSC_OK);
        CHECK_EQ_INT(nl, L - first_layer);
        for (int layer = first_layer; layer < L; layer++) {
            static tensors_t t, got;
            make(want[i], layer, &t);
            int ok = 1;
            for (int h = 0; h < H; h++) {
                ok &= tsc_dump_read_raw(d, want[i], layer, "q", 0, h, got.q + h * T * D) == TSC_OK;
                ok &= tsc_dump_read_raw(d, want[i], layer, "do", 0, h, got.dout + h * T * D) == TSC_OK;
                ok &= tsc_dump_read_raw(d, want[i], layer, "o", 0, h, got.o + h * T * D) == TSC_OK;
                ok &= tsc_dump_read_raw(d, want[i], layer, "lse", 0, h, got.lse + h * T) == TSC_OK;
            }
            ok &= tsc_dump_read_raw(d, want[i], layer, "k", 0, 0, got.k) == TSC_OK;
            ok &= tsc_dump_read_raw(d, want[i], layer, "v", 0, 0, got.v) == TSC_OK;
            CHECKF(ok && !memcmp(&t, &got, sizeof t), "step %lld layer %d: tensors differ from those handed over",
                   want[i], layer);
        }
    }
    CHECK_EQ_INT(tsc_dump_validate(d, 1, NULL, NULL), 0);
    tsc_dump_close(d);
}

static void attr_str(const char *path, const char *name, char *out, size_t cap) {
    hid_t f;
    out[0] = '\0';
    if (tsc_h5_open(&f, path, 0) != TSC_OK) return;
    CHECK(tsc_h5_attr_read_str(f, name, out, cap) == TSC_OK);
    tsc_h5_close(f);
}

static double attr_num(const char *path, const char *name) {
    hid_t f;
    double v = NAN;
    if (tsc_h5_open(&f, path, 0) != TSC_OK) return v;
    long l;
    if (tsc_h5_attr_read_double(f, name, &v) != TSC_OK && tsc_h5_attr_read_long(f, name, &l) == TSC_OK) v = (double)l;
    tsc_h5_close(f);
    return v;
}

/* A loss spike at step 12 with N = 4: the dump holds steps 9..12; the recorder stops. */
static void test_loss_spike(char *path) {
    tsc_flight_t *fr = open_fr("spike.h5", 4, NULL, path);
    if (!fr) { CHECK(0); return; }
    CHECK_EQ_INT(tsc_flight_n_dumps(fr), 0);
    double mean = 0;
    for (long long s = 0; s < 16; s++) {
        double loss = s == 12 ? 9.0 : 2.0 + 0.01 * (double)(s % 5);
        if (s < 12) mean += loss / 12;
        int f = run_step(fr, s, loss, 1.0);
        CHECKF(f == (s == 12), "step %lld fired %d", s, f);
    }
    CHECK(tsc_flight_stopped(fr));
    CHECK_STREQ(tsc_flight_last_dump(fr), path);
    CHECK(tsc_flight_close(fr) == TSC_OK);
    long long want[] = {9, 10, 11, 12};
    check_dump(path, want, 4, 0);
    char s[256];
    attr_str(path, "flight_trigger", s, sizeof s);
    CHECK_STREQ(s, "loss_spike");
    attr_str(path, "flight_reason", s, sizeof s);
    CHECKF(strstr(s, "loss 9 > baseline") && strstr(s, "at step 12"), "%s", s);
    CHECK_EQ_INT(attr_num(path, "flight_step"), 12);
    CHECK_EQ_INT(attr_num(path, "flight_n_steps"), 4);
    CHECK(attr_num(path, "flight_loss") == 9.0);
    /* the baseline is an average of the steps before: between their min and max, not the spike */
    double base = attr_num(path, "flight_loss_baseline");
    CHECKF(base >= 2.0 && base <= 2.04 && fabs(base - mean) < 0.02, "baseline %g (mean %g)", base, mean);
    CHECK(attr_num(path, "flight_grad_baseline") == 1.0 && attr_num(path, "flight_grad_spread") == 0.0);
}

/* Options that fire on the grad norm's factor rule alone (3 x the baseline, after 5 values). */
static tsc_flight_opts_t grad_factor_opts(int n_steps, int max_dumps) {
    tsc_flight_opts_t o;
    tsc_flight_opts_init(&o);
    o.n_steps = n_steps;
    o.max_dumps = max_dumps;
    o.grad.k = 0; /* the factor rule alone */
    o.grad.factor = 3;
    o.loss.warmup = o.grad.warmup = 5;
    return o;
}

/* The factor rule on the grad norm, re-arming after N steps, a second dump under its own name
 * and the first left as it was; a path that exists is refused at open. */
static void test_grad_rearm(void) {
    char path[512], second[600];
    snprintf(path, sizeof path, "%s/grad.h5", dir);
    snprintf(second, sizeof second, "%s/grad.2.h5", dir);
    tsc_flight_opts_t o = grad_factor_opts(3, 2);
    tsc_dump_meta_t m = geom();
    tsc_flight_t *fr;
    CHECK(tsc_flight_open(&fr, path, &m, &o) == TSC_OK);
    for (long long s = 0; s < 18; s++) {
        double grad = s == 8 || s == 10 || s == 14 ? 3.5 : s == 16 ? 2.9 : 1.0;
        int f = run_step(fr, s, 2.0, grad);
        /* 10 is within 3 steps of the first fire; 2.9 < 3 x 1; the second dump stops it */
        CHECKF(f == (s == 8 || s == 14), "step %lld fired %d", s, f);
    }
    CHECK_EQ_INT(tsc_flight_n_dumps(fr), 2);
    CHECK_STREQ(tsc_flight_last_dump(fr), second);
    CHECK(tsc_flight_stopped(fr));
    CHECK(tsc_flight_close(fr) == TSC_OK);
    long long w1[] = {6, 7, 8}, w2[] = {12, 13, 14};
    check_dump(path, w1, 3, 0);
    check_dump(second, w2, 3, 0);
    char s[256];
    attr_str(second, "flight_trigger", s, sizeof s);
    CHECK_STREQ(s, "grad_norm_spike");
    attr_str(second, "flight_reason", s, sizeof s);
    CHECKF(strstr(s, "grad norm 3.5 > 3 x baseline 1") != NULL, "%s", s);
    CHECK(tsc_flight_open(&fr, path, &m, &o) == TSC_ERR_IO && fr == NULL);
    CHECKF(strstr(tsc_error_last(), "exists") != NULL, "%s", tsc_error_last());
}

/* keep_newest: the recorder keeps firing past max_dumps, and each dump past it deletes the
 * oldest of its own, so the newest two stay on disk with their own steps; a file of the same
 * stem it did not write is left alone. */
static void test_keep_newest(void) {
    char path[512], name[4][600], other[600];
    snprintf(path, sizeof path, "%s/keep.h5", dir);
    snprintf(name[0], sizeof name[0], "%s", path);
    for (int i = 1; i < 4; i++) snprintf(name[i], sizeof name[i], "%s/keep.%d.h5", dir, i + 1);
    snprintf(other, sizeof other, "%s/keep.9.h5", dir);
    FILE *f = fopen(other, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    tsc_flight_opts_t o = grad_factor_opts(2, 2);
    o.keep_newest = 1;
    tsc_dump_meta_t m = geom();
    tsc_flight_t *fr;
    CHECK(tsc_flight_open(&fr, path, &m, &o) == TSC_OK);
    for (long long s = 0; s < 22; s++) {
        int f2 = run_step(fr, s, 2.0, s == 8 || s == 12 || s == 16 || s == 20 ? 3.5 : 1.0);
        CHECKF(f2 == (s == 8 || s == 12 || s == 16 || s == 20), "step %lld fired %d", s, f2);
    }
    CHECK_EQ_INT(tsc_flight_n_dumps(fr), 4);
    CHECK(!tsc_flight_stopped(fr));
    CHECK_STREQ(tsc_flight_last_dump(fr), name[3]);
    CHECK(tsc_flight_close(fr) == TSC_OK);
    struct stat sb;
    CHECK(stat(name[0], &sb) != 0 && stat(name[1], &sb) != 0);
    CHECK(stat(other, &sb) == 0);
    long long w3[] = {15, 16}, w4[] = {19, 20};
    check_dump(name[2], w3, 2, 0);
    check_dump(name[3], w4, 2, 0);
}

/* A NaN loss at step 2 with N = 4: fewer steps than N; a NaN in a tensor (check_tensors). */
static void test_nonfinite(void) {
    char path[512], s[256];
    tsc_flight_t *fr = open_fr("nan.h5", 4, NULL, path);
    CHECK(run_step(fr, 0, 2.0, 1.0) == 0 && run_step(fr, 1, 2.0, 1.0) == 0);
    CHECK(run_step(fr, 2, NAN, 1.0) == 1);
    CHECK(tsc_flight_close(fr) == TSC_OK);
    long long want[] = {0, 1, 2};
    check_dump(path, want, 3, 0);
    attr_str(path, "flight_trigger", s, sizeof s);
    CHECK_STREQ(s, "nonfinite_loss");

    snprintf(path, sizeof path, "%s/nanq.h5", dir);
    tsc_flight_opts_t o;
    tsc_flight_opts_init(&o);
    o.n_steps = 2;
    o.check_tensors = 1;
    tsc_dump_meta_t m = geom();
    CHECK(tsc_flight_open(&fr, path, &m, &o) == TSC_OK);
    int fired = -1;
    CHECK(run_step(fr, 0, 2.0, 1.0) == 0);
    CHECK(hand_over(fr, 1, 1) == TSC_OK);
    CHECKF(tsc_flight_step_end(fr, 2.0, 1.0, &fired) == TSC_OK, "%s", tsc_error_last());
    CHECK_EQ_INT(fired, 1);
    CHECK(tsc_flight_close(fr) == TSC_OK);
    attr_str(path, "flight_trigger", s, sizeof s);
    CHECK_STREQ(s, "nonfinite_tensor");
    attr_str(path, "flight_reason", s, sizeof s);
    CHECKF(strstr(s, "layer 1 'q' element 5") != NULL, "%s", s);
}

/* A manual trigger mid-step writes the completed steps; the open step is not in the dump. Only
 * layer 1 is chosen, so layer 0 is never stored. */
static void test_manual_layers(void) {
    char path[512], s[256];
    tsc_flight_t *fr = open_fr("manual.h5", 4, "1", path);
    CHECK(tsc_flight_trigger(fr, "nothing yet") == TSC_ERR_ARG);
    CHECK(!tsc_flight_wants(fr, 0) && tsc_flight_wants(fr, 1));
    for (long long st = 0; st < 6; st++) CHECK(run_step(fr, st, 2.0, 1.0) == 0);
    CHECK(hand_over(fr, 6, 0) == TSC_OK);
    CHECK(tsc_flight_trigger(fr, "operator asked") == TSC_OK);
    CHECK(tsc_flight_stopped(fr));
    CHECK(tsc_flight_close(fr) == TSC_OK);
    long long want[] = {2, 3, 4, 5};
    check_dump(path, want, 4, 1);
    attr_str(path, "flight_trigger", s, sizeof s);
    CHECK_STREQ(s, "manual");
    attr_str(path, "flight_reason", s, sizeof s);
    CHECK_STREQ(s, "operator asked");
    CHECK_EQ_INT(attr_num(path, "flight_step"), 5);
}

static volatile sig_atomic_t prev_handler_hits;
static void prev_handler(int sig) { (void)sig; prev_handler_hits++; }

/* SIGTERM via raise(): the handler sets the flag and writes nothing; the next call writes the
 * dump and stops the recorder: step_end when the signal came mid-step (that step included),
 * step_begin when it came between steps. close restores the handler that was there before. */
static void sigterm_case(int mid_step) {
    char path[512], other_path[512], s[256];
    struct sigaction sa, cur;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = prev_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    prev_handler_hits = 0;
    tsc_flight_t *fr = open_fr(mid_step ? "sig_mid.h5" : "sig.h5", 4, NULL, path);
    CHECK(tsc_flight_signals_install(fr) == TSC_OK);
    tsc_flight_t *other = open_fr("sig_other.h5", 4, NULL, other_path);
    CHECK(tsc_flight_signals_install(other) == TSC_ERR_ARG);
    CHECK(tsc_flight_close(other) == TSC_OK);
    for (long long st = 0; st < 6; st++) CHECK(run_step(fr, st, 2.0, 1.0) == 0);
    CHECK_EQ_INT(tsc_flight_signal(fr), 0);
    if (mid_step) CHECK(hand_over(fr, 6, 0) == TSC_OK);
    raise(SIGTERM);
    CHECK_EQ_INT(tsc_flight_signal(fr), SIGTERM);
    CHECK(!tsc_test_exists(path));   /* the handler wrote nothing */
    int fired = 0;
    if (!mid_step) CHECK(hand_over(fr, 6, 0) == TSC_OK);   /* step_begin writes; the puts are no-ops */
    CHECK_EQ_INT(tsc_flight_n_dumps(fr), !mid_step);
    CHECK(tsc_flight_step_end(fr, 2.0, 1.0, &fired) == TSC_OK);
    CHECK_EQ_INT(fired, mid_step);
    CHECK_EQ_INT(tsc_flight_n_dumps(fr), 1);
    CHECK(tsc_flight_stopped(fr));
    CHECK(tsc_flight_close(fr) == TSC_OK);
    long long want_mid[] = {3, 4, 5, 6}, want_between[] = {2, 3, 4, 5};
    check_dump(path, mid_step ? want_mid : want_between, 4, 0);
    attr_str(path, "flight_trigger", s, sizeof s);
    CHECK_STREQ(s, "signal");
    attr_str(path, "flight_reason", s, sizeof s);
    CHECK_STREQ(s, "SIGTERM received");
    sigaction(SIGTERM, NULL, &cur);
    CHECK(cur.sa_handler == prev_handler);
    CHECK_EQ_INT(prev_handler_hits, 0);
    raise(SIGTERM);
    CHECK_EQ_INT(prev_handler_hits, 1);
    signal(SIGTERM, SIG_DFL);
}

static void test_sigterm(void) {
    sigterm_case(1);
    sigterm_case(0);
}

/* (N + 1) x step bytes over max_bytes: refused at the first step, naming both numbers; nothing written. */
static void test_bound(void) {
    char path[512], want[256];
    snprintf(path, sizeof path, "%s/big.h5", dir);
    tsc_flight_opts_t o;
    tsc_flight_opts_init(&o);
    o.n_steps = 4;
    o.max_bytes = 5 * (uint64_t)(L * LAYER_BYTES) - 1;   /* N + 1 slots */
    tsc_dump_meta_t m = geom();
    tsc_flight_t *fr;
    CHECK(tsc_flight_open(&fr, path, &m, &o) == TSC_OK);
    CHECK(hand_over(fr, 0, 0) == TSC_OK);
    CHECK(tsc_flight_step_end(fr, 2.0, 1.0, NULL) == TSC_ERR_ARG);
    snprintf(want, sizeof want, "5 slots (n_steps + 1 for the step in progress) x %zu bytes per step is more than max_bytes %llu", (size_t)(L * LAYER_BYTES),
             (unsigned long long)o.max_bytes);
    CHECKF(strstr(tsc_error_last(), want) != NULL, "%s (want '%s')", tsc_error_last(), want);
    CHECK(tsc_flight_trigger(fr, "x") == TSC_ERR_ARG);   /* nothing recorded */
    CHECK(tsc_flight_close(fr) == TSC_OK);
    CHECK(!tsc_test_exists(path));
    /* exactly at the bound: accepted */
    o.max_bytes++;
    CHECK(tsc_flight_open(&fr, path, &m, &o) == TSC_OK);
    CHECK(run_step(fr, 0, 2.0, 1.0) == 0);
    uint64_t dq[4] = {B, H, T, D};
    static uint16_t q[NQ];
    CHECK(tsc_flight_step_begin(fr, 1) == TSC_OK);
    CHECK(tsc_flight_put(fr, 0, "q", TSC_FMT_FP16, 4, dq, q) == TSC_ERR_ARG);   /* not the first step's format */
    CHECK(tsc_flight_put(fr, 0, "q", TSC_FMT_BF16, 4, dq, q) == TSC_OK);
    CHECK(tsc_flight_put(fr, 0, "q", TSC_FMT_BF16, 4, dq, q) == TSC_ERR_ARG);   /* twice */
    dq[2] = T + 1;
    CHECK(tsc_flight_put(fr, 0, "q", TSC_FMT_BF16, 4, dq, q) == TSC_ERR_SHAPE);
    CHECK(tsc_flight_close(fr) == TSC_OK);
    CHECK(!tsc_test_exists(path));
}

/* `tilescope info` and `tilescope diagnose` on the loss-spike dump. */
static void test_cli(const char *path) {
    const char *tsc = getenv("TSC");
    CHECKF(tsc != NULL, "TSC is not set (run through ctest)");
    if (!tsc) return;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' info '%s' > '%s/info.txt' 2>&1", tsc, path, dir);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "grep -q 'steps: 4 complete (9, 10, 11, 12)' '%s/info.txt' && "
             "grep -q 'flight_trigger *loss_spike' '%s/info.txt'", dir, dir);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "'%s' diagnose '%s' -o '%s/diag' -q --max-steps 2 > '%s/diag.txt' 2>&1", tsc, path,
             dir, dir);
    int rc = system(cmd);
    CHECKF(rc == 0, "diagnose exit %d", rc);
    snprintf(cmd, sizeof cmd, "%s/diag/summary.json", dir);
    CHECK(tsc_test_exists(cmd));
}

/* Without a GPU, a ring in GPU memory and device tensors are refused with a message saying why
 * (tests/capture/test_cuda.c checks the device ring on a GPU). */
static void test_device_refused(void) {
    if (tsc_cuda_available()) return;
    char path[512];
    snprintf(path, sizeof path, "%s/device.h5", dir);
    tsc_flight_opts_t o;
    tsc_flight_opts_init(&o);
    CHECK_EQ_INT(o.device, 0);
    o.device = 1;
    tsc_dump_meta_t m = geom();
    tsc_flight_t *fr = (tsc_flight_t *)8;
    CHECK(tsc_flight_open(&fr, path, &m, &o) == TSC_ERR_UNSUPPORTED && fr == NULL);
    CHECKF(strstr(tsc_error_last(), "needs a GPU") != NULL, "%s", tsc_error_last());
    o.device = 0;
    CHECK(tsc_flight_open(&fr, path, &m, &o) == TSC_OK);
    CHECK(tsc_flight_step_begin(fr, 0) == TSC_OK);
    uint64_t dq[4] = {B, H, T, D};
    CHECK(tsc_flight_put_device(fr, 1, "q", TSC_FMT_BF16, 4, dq, (void *)8, NULL) == TSC_ERR_UNSUPPORTED);
    CHECK(tsc_flight_close(fr) == TSC_OK);
    CHECK(!tsc_test_exists(path));
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/test_flight.%d", (int)getpid());
    mkdir(dir, 0755);
    char spike[512];
    test_loss_spike(spike);
    test_grad_rearm();
    test_keep_newest();
    test_nonfinite();
    test_manual_layers();
    test_sigterm();
    test_bound();
    test_cli(spike);
    test_device_refused();
    tsc_test_rmtree(dir);
    return tsc_test_done();
}
