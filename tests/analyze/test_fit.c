/* test_fit: the element rule of the fit check (analyze/tsc_fit.h) on hand-made dumps.
 * 1. o stored as fp32 = the fp32 replay, then: two +0 made -0 (not identical, 0 ULP), one value
 *    moved 3 fp32 ULPs toward zero, one NaN: identical 28 of 32, within 1 ULP 30, max ULP 3,
 *    non-finite 1; fp32 ranks first.
 * 2. V holding 1000 (beyond E4M3's 448): fp8-fa3's O is NaN in that feature; o stored as that O:
 *    NaN == NaN is identical, so fp8-fa3 fits 100% and ranks first.
 * 3. A dump without o: TSC_ERR_MISSING naming the file and the dataset.
 * 4. The policy that describes a dump: given, else recorded, else fitted, else bf16-fa2 (tsc_dump_policy).
 * 5. The sentence, the percentage (rounded down) and the warning. */
#include "tsc_test.h"

#include "tsc_attention.h"
#include "tsc_dump.h"
#include "tsc_fit.h"

enum { T = 8, D = 4, N = T * D };

static void inputs(float *q, float *k, float *v, float v1) {
    uint64_t s = 11;
    for (int i = 0; i < N; i++) {
        q[i] = (float)tsc_test_nrand(&s);
        k[i] = (float)tsc_test_nrand(&s);
        v[i] = i % D == 0 ? 0.0f : i % D == 1 ? v1 : (float)tsc_test_nrand(&s);
    }
}

static void replay_o(const char *policy, const float *q, const float *k, const float *v, float *o) {
    tsc_policy_t p;
    CHECK(tsc_policy_parse(policy, &p) == TSC_OK);
    tsc_attn_dims_t dims = {1, 1, 1, T, D, 1, 0.5};
    float lse[T];
    tsc_attn_io_t io = {.dtype = TSC_ATTN_F32, .q = q, .k = k, .v = v, .o = o, .lse = lse};
    CHECK(tsc_attn_run(&p, &dims, &io, NULL, 0) == TSC_OK);
}

/* A one-step, one-layer dump of q, k, v (fp32) and, unless o is NULL, o (fp32), recording policy. */
static void write_dump_as(const char *path, const float *q, const float *k, const float *v, const float *o,
                          const char *policy) {
    tsc_dump_meta_t m;
    tsc_dump_meta_init(&m);
    m.n_layer = 1, m.n_head = 1, m.n_kv_head = 1, m.head_dim = D, m.d_model = D, m.seq_len = T, m.batch = 1;
    m.causal = 1, m.softmax_scale = 0.5, m.tile_q = 4, m.tile_k = 4;
    snprintf(m.policy, sizeof m.policy, "%s", policy);
    tsc_dump_writer_t *w;
    uint64_t dims[4] = {1, 1, T, D};
    CHECK(tsc_dump_writer_open(&w, path, &m, NULL) == TSC_OK);
    CHECK(tsc_dump_writer_put(w, 0, 0, "q", 4, dims, TSC_FMT_FP32, q, TSC_FMT_FP32) == TSC_OK);
    CHECK(tsc_dump_writer_put(w, 0, 0, "k", 4, dims, TSC_FMT_FP32, k, TSC_FMT_FP32) == TSC_OK);
    CHECK(tsc_dump_writer_put(w, 0, 0, "v", 4, dims, TSC_FMT_FP32, v, TSC_FMT_FP32) == TSC_OK);
    if (o) CHECK(tsc_dump_writer_put(w, 0, 0, "o", 4, dims, TSC_FMT_FP32, o, TSC_FMT_FP32) == TSC_OK);
    CHECK(tsc_dump_writer_step_done(w, 0) == TSC_OK);
    CHECK(tsc_dump_writer_close(w) == TSC_OK);
}

static void write_dump(const char *path, const float *q, const float *k, const float *v, const float *o) {
    write_dump_as(path, q, k, v, o, "fp32");
}

static tsc_fit_t *fit(const char *path, const char *p1, const char *p2) {
    const char *pol[2] = {p1, p2};
    tsc_fit_opts_t o;
    tsc_fit_opts_init(&o);
    o.dump_path = path;
    o.policies = pol;
    o.n_policies = 2;
    tsc_fit_t *f = NULL;
    tsc_status_t st = tsc_fit_run(&o, &f);
    CHECKF(st == TSC_OK, "%s", tsc_error_last());
    return f;
}

static void test_rule(const char *dir) {
    float q[N], k[N], v[N], o[N];
    char path[512];
    inputs(q, k, v, 1.5f);
    replay_o("fp32+tile:q=4,k=4", q, k, v, o);
    CHECK(o[0] == 0 && !signbit(o[0]));   /* feature 0 of V is 0: O is +0 there */
    o[0] = -0.0f;
    o[D] = -0.0f;
    CHECK(o[2 * D + 2] != 0 && fabsf(o[2 * D + 2]) > 1e-3f);
    o[2 * D + 2] = nextafterf(nextafterf(nextafterf(o[2 * D + 2], 0), 0), 0);
    o[3 * D + 3] = NAN;
    snprintf(path, sizeof path, "%s/rule.h5", dir);
    write_dump(path, q, k, v, o);
    tsc_fit_t *f = fit(path, "bf16-fa2", "fp32");
    if (!f) return;
    const tsc_fit_cmp_t *c = &f->policies[0].t[TSC_FIT_O];
    CHECK_STREQ(f->policies[0].name, "fp32");
    CHECK_STREQ(f->policies[0].canonical, "fp32+tile:q=4,k=4");  /* the dump's tiles */
    CHECK_EQ_INT(f->tile_q, 4);
    CHECK_EQ_INT(c->n, N);
    CHECK_EQ_INT(c->n_identical, N - 4);
    CHECK_EQ_INT(c->n_within1, N - 2);
    CHECK_EQ_INT(c->n_nonfinite, 1);
    CHECK(c->max_ulp == 3.0);
    CHECK(c->identical == (double)(N - 4) / N);
    CHECK_STREQ(f->dtype[TSC_FIT_O], "fp32");
    CHECK(f->dtype[TSC_FIT_DQ][0] == 0 && f->policies[0].t[TSC_FIT_DQ].n == 0);
    CHECK(f->policies[0].score == c->identical);
    CHECK_EQ_INT(f->policies[1].rank, 2);
    CHECK(tsc_fit_find(f, "bf16-fa2") == 1 && tsc_fit_find(f, "fp32+tile:q=4,k=4") == 0 && tsc_fit_find(f, "x") < 0);
    tsc_json_t j;
    tsc_json_init(&j);
    tsc_fit_json(f, &j);
    const char *txt = tsc_json_text(&j, NULL);
    CHECK(txt && strstr(txt, "\"best\": \"fp32\"") && strstr(txt, "\"n_identical\": 28") && strstr(txt, "\"warning\": true"));
    tsc_json_free(&j);
    tsc_fit_free(f);
}

static void test_nan_equal(const char *dir) {
    float q[N], k[N], v[N], o[N];
    char path[512];
    inputs(q, k, v, 1000.0f);
    replay_o("fp8-fa3+tile:q=4,k=4", q, k, v, o);
    CHECK(isnan(o[1]) && isnan(o[T * D - 3]));  /* E4M3 has no 1000: V rounds to NaN */
    snprintf(path, sizeof path, "%s/nan.h5", dir);
    write_dump(path, q, k, v, o);
    tsc_fit_t *f = fit(path, "fp32", "fp8-fa3");
    if (!f) return;
    CHECK_STREQ(f->policies[0].name, "fp8-fa3");
    CHECK_EQ_INT(f->policies[0].t[TSC_FIT_O].n_identical, N);
    CHECK_EQ_INT(f->policies[0].t[TSC_FIT_O].n_nonfinite, 0);
    CHECK_EQ_INT(f->policies[1].t[TSC_FIT_O].n_nonfinite, T);  /* fp32's O is finite where o is NaN */
    tsc_fit_free(f);
}

static void test_no_o(const char *dir) {
    float q[N], k[N], v[N];
    char path[512], want[700];
    inputs(q, k, v, 1.5f);
    snprintf(path, sizeof path, "%s/noo.h5", dir);
    write_dump(path, q, k, v, NULL);
    tsc_fit_opts_t o;
    tsc_fit_opts_init(&o);
    o.dump_path = path;
    tsc_fit_t *f = (tsc_fit_t *)&o;
    CHECK(tsc_fit_run(&o, &f) == TSC_ERR_MISSING && f == NULL);
    snprintf(want, sizeof want, "%s: step 0 layer 0: no dataset 'o' (the captured O the fit compares with)", path);
    CHECK_STREQ(tsc_error_last(), want);
}

/* The one rule for a dump's policy (tsc_dump_policy): given, recorded, fitted, default, in that order. */
static void test_dump_policy(const char *dir) {
    float q[N], k[N], v[N], o[N];
    char path[512], want[700];
    tsc_dump_policy_t dp;
    inputs(q, k, v, 1000.0f);
    replay_o("fp8-fa3+tile:q=4,k=4", q, k, v, o); /* only fp8-fa3 reproduces these NaNs */
    snprintf(path, sizeof path, "%s/pol.h5", dir);
    write_dump_as(path, q, k, v, o, "");
    CHECK(tsc_dump_policy(path, "", NULL, "--lp", NULL, NULL, &dp) == TSC_OK);
    CHECK_EQ_INT(dp.origin, TSC_POLICY_FITTED);
    CHECK_STREQ(dp.name, "fp8-fa3+tile:q=4,k=4");
    CHECK_STREQ(dp.source, "the dump records no policy: the best fit of its captured O (100% bit-identical on step 0)");
    CHECK(tsc_dump_policy(path, "my kernel", NULL, "--lp", NULL, NULL, &dp) == TSC_OK);
    CHECK_EQ_INT(dp.origin, TSC_POLICY_FITTED);
    CHECK(strncmp(dp.source, "the dump's policy 'my kernel' is not a policy string: the best fit", 66) == 0);
    CHECK(tsc_dump_policy(path, "fp32", NULL, "--lp", NULL, NULL, &dp) == TSC_OK);
    CHECK_EQ_INT(dp.origin, TSC_POLICY_RECORDED);
    CHECK_STREQ(dp.name, "fp32");
    CHECK_STREQ(dp.source, "the dump's policy");
    CHECK(tsc_dump_policy(path, "fp32", "bf16-fa2+stable", "--lp", NULL, NULL, &dp) == TSC_OK);
    CHECK_EQ_INT(dp.origin, TSC_POLICY_GIVEN);
    CHECK_STREQ(dp.name, "bf16-fa2+stable:beta=2,eps=1e-3");
    CHECK_STREQ(dp.source, "--lp");
    CHECK(tsc_dump_policy(path, "fp32", "nope", "--lp", NULL, NULL, &dp) == TSC_ERR_ARG);
    CHECK(strncmp(tsc_error_last(), "--lp 'nope': ", 13) == 0);
    snprintf(path, sizeof path, "%s/pol_noo.h5", dir);
    write_dump_as(path, q, k, v, NULL, "");
    CHECK(tsc_dump_policy(path, "", NULL, "--policy", NULL, NULL, &dp) == TSC_OK);
    CHECK_EQ_INT(dp.origin, TSC_POLICY_DEFAULT);
    CHECK_STREQ(dp.name, "bf16-fa2");
    snprintf(want, sizeof want, "the dump records no policy and no O to fit: the bf16-fa2 default (pass --policy)");
    CHECK_STREQ(dp.source, want);
}

static void test_text(void) {
    char b[256];
    CHECK_STREQ(tsc_fit_percent(1.0, b, sizeof b), "100%");
    CHECK_STREQ(tsc_fit_percent(0.99999, b, sizeof b), "99.99%");   /* rounded down, never 100% */
    CHECK_STREQ(tsc_fit_percent(0.9997, b, sizeof b), "99.97%");
    CHECK_STREQ(tsc_fit_percent(0.0, b, sizeof b), "0.00%");
    CHECK_STREQ(tsc_fit_sentence("bf16-torch", 1, 0.9997, b, sizeof b),
                "replay under bf16-torch reproduces the captured O on 99.97% of elements");
    CHECK_STREQ(tsc_fit_sentence("x", 0, NAN, b, sizeof b), "no captured O: the fit of the replay could not be checked");
    CHECK(tsc_fit_warning(0.99) == NULL && tsc_fit_warning(1.0) == NULL);
    CHECK(tsc_fit_warning(0.9899) != NULL && tsc_fit_warning(NAN) != NULL);
}

int main(void) {
    char dir[] = "/tmp/tsc_fit_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    test_rule(dir);
    test_nan_equal(dir);
    test_no_o(dir);
    test_dump_policy(dir);
    test_text();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return tsc_test_done();
}
