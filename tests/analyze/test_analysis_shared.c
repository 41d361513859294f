/* test_analysis_shared: work the analysis shares instead of repeating gives the numbers of the
 * computation it replaces.
 * 1. lp's fit taken from the analysis's own lp replays (tsc_analysis_t.lp_fit_*) equals
 *    tsc_fit_run of lp on the first analysed step, field for field: on the tiny synth dump, on the
 *    GQA synth dump (the fit replays a kv group at once, the analysis one head) and on a
 *    hand-made dump with two batch rows and a captured o that differs from the replay.
 * 2. The automatic probe traced by the identity replay (one batch row) equals the probe of its own
 *    lp forward (identity off): row, feature, error and the O-bar curve's last value.
 * 3. A dump with NaN in a head's inputs: no shared fit (tsc_fit_run refuses it; diagnose falls back). */
#include "tsc_test.h"

#include <sys/stat.h>

#include "tsc_analysis.h"
#include "tsc_dump.h"
#include "tsc_fit.h"
#include "tsc_synth.h"

static void same_cmp(const tsc_fit_cmp_t *a, const tsc_fit_cmp_t *b, const char *what) {
    CHECKF(a->n == b->n && a->n_identical == b->n_identical && a->n_within1 == b->n_within1 &&
               a->n_nonfinite == b->n_nonfinite,
           "%s: n %lld/%lld identical %lld/%lld within1 %lld/%lld nonfinite %lld/%lld", what, (long long)a->n,
           (long long)b->n, (long long)a->n_identical, (long long)b->n_identical, (long long)a->n_within1,
           (long long)b->n_within1, (long long)a->n_nonfinite, (long long)b->n_nonfinite);
    CHECKF((isnan(a->max_ulp) && isnan(b->max_ulp)) || a->max_ulp == b->max_ulp, "%s: max_ulp %.17g vs %.17g", what,
           a->max_ulp, b->max_ulp);
    CHECKF((isnan(a->identical) && isnan(b->identical)) || a->identical == b->identical, "%s: identical", what);
    CHECKF((isnan(a->within1) && isnan(b->within1)) || a->within1 == b->within1, "%s: within1", what);
}

static tsc_analysis_t *analyse(const char *dump, const char *out, const char *sel, int identity) {
    tsc_analysis_opts_t o;
    tsc_analysis_opts_init(&o);
    o.identity = identity;
    if (sel) CHECK(tsc_select_parse(&o.sel, sel) == TSC_OK);
    tsc_analysis_t *a = NULL;
    tsc_status_t st = tsc_analysis_run(dump, out, &o, &a);
    CHECKF(st == TSC_OK, "%s: %s", dump, tsc_error_last());
    return a;
}

/* 1: the shared fit against tsc_fit_run of the same lp, tiles as the analysis uses them. */
static void check_fit(const char *dump, const char *out, const char *sel) {
    tsc_analysis_t *a = analyse(dump, out, sel, 1);
    if (!a) return;
    CHECKF(a->lp_fit_ok, "%s: no shared fit", dump);
    const char *pol[1] = {a->lp};
    tsc_fit_opts_t fo;
    tsc_fit_opts_init(&fo);
    fo.dump_path = dump;
    fo.policies = pol;
    fo.n_policies = 1;
    fo.keep_tiles = 1;
    if (sel) CHECK(tsc_select_parse(&fo.sel, sel) == TSC_OK);
    tsc_fit_t *f = NULL;
    tsc_status_t st = tsc_fit_run(&fo, &f);
    CHECKF(st == TSC_OK, "%s: %s", dump, tsc_error_last());
    if (st == TSC_OK) {
        CHECK_EQ_INT(a->lp_fit_step, f->steps[0]);
        same_cmp(&a->lp_fit_o, &f->policies[0].t[TSC_FIT_O], dump);
        CHECKF(f->policies[0].t[TSC_FIT_O].n > 0, "%s: nothing compared", dump);
    }
    tsc_fit_free(f);
    tsc_analysis_free(a);
}

/* B = 2, H = 2, T = 16, D = 8, random q/k/v/do (fp32) and o = random too (max_ulp large, few
 * identical), or NaN at one v element when nan is set. */
static void write_b2(const char *path, int nan) {
    enum { B = 2, H = 2, T = 16, D = 8, N = B * H * T * D };
    static float q[N], k[N], v[N], o[N], dout[N];
    uint64_t s = 5;
    for (int i = 0; i < N; i++) {
        q[i] = (float)tsc_test_nrand(&s), k[i] = (float)tsc_test_nrand(&s), v[i] = (float)tsc_test_nrand(&s);
        o[i] = (float)(0.3 * tsc_test_nrand(&s)), dout[i] = (float)tsc_test_nrand(&s);
    }
    if (nan) v[T * D + 3] = NAN;
    tsc_dump_meta_t m;
    tsc_dump_meta_init(&m);
    m.n_layer = 1, m.n_head = H, m.n_kv_head = H, m.head_dim = D, m.d_model = D, m.seq_len = T, m.batch = B;
    m.causal = 1, m.softmax_scale = 0.35, m.tile_q = 8, m.tile_k = 8;
    snprintf(m.policy, sizeof m.policy, "bf16-fa2");
    tsc_dump_writer_t *w;
    uint64_t dims[4] = {B, H, T, D};
    CHECK(tsc_dump_writer_open(&w, path, &m, NULL) == TSC_OK);
    const char *names[5] = {"q", "k", "v", "o", "do"};
    const float *data[5] = {q, k, v, o, dout};
    for (int i = 0; i < 5; i++) CHECK(tsc_dump_writer_put(w, 0, 0, names[i], 4, dims, TSC_FMT_FP32, data[i], TSC_FMT_FP32) == TSC_OK);
    CHECK(tsc_dump_writer_step_done(w, 0) == TSC_OK);
    CHECK(tsc_dump_writer_close(w) == TSC_OK);
}

/* 2: the probe traced by the identity replay against the probe of its own lp forward. */
static void check_probe(const char *dump, const char *out) {
    tsc_analysis_t *a = analyse(dump, out, NULL, 1), *b = analyse(dump, out, NULL, 0);
    if (a && b && a->n_heads == b->n_heads) {
        int probes = 0;
        for (size_t i = 0; i < a->n_heads; i++) {
            const tsc_head_result_t *x = &a->heads[i], *y = &b->heads[i];
            probes += x->probe_t >= 0;
            CHECKF(x->probe_b == y->probe_b && x->probe_t == y->probe_t && x->probe_i == y->probe_i,
                   "head %zu: probe (%d,%d,%d) vs (%d,%d,%d)", i, x->probe_b, x->probe_t, x->probe_i, y->probe_b,
                   y->probe_t, y->probe_i);
            CHECKF(x->probe_err == y->probe_err || (isnan(x->probe_err) && isnan(y->probe_err)), "head %zu: probe_err", i);
            CHECKF(x->probe_final_obar_err == y->probe_final_obar_err ||
                       (isnan(x->probe_final_obar_err) && isnan(y->probe_final_obar_err)),
                   "head %zu: final O-bar error %.17g vs %.17g", i, x->probe_final_obar_err, y->probe_final_obar_err);
        }
        CHECKF(probes > 0, "%s: no probe chosen", dump);
    } else {
        CHECK(0);
    }
    tsc_analysis_free(a);
    tsc_analysis_free(b);
}

int main(void) {
    char dir[] = "tsc_shared_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char tiny[256], gqa[256], b2[256], nan[256], out[256];
    snprintf(tiny, sizeof tiny, "%s/tiny.h5", dir);
    snprintf(gqa, sizeof gqa, "%s/gqa.h5", dir);
    snprintf(b2, sizeof b2, "%s/b2.h5", dir);
    snprintf(nan, sizeof nan, "%s/nan.h5", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    mkdir(out, 0777);
    tsc_synth_opts_t so;
    tsc_synth_opts_init(&so);
    CHECK(tsc_synth_write(tiny, &so) == TSC_OK);
    so.shape = "llama-gqa";
    so.steps = "0";
    so.layers = "1";
    CHECK(tsc_synth_write(gqa, &so) == TSC_OK);
    write_b2(b2, 0);
    write_b2(nan, 1);

    check_fit(tiny, out, NULL);
    check_fit(tiny, out, "steps=1:3,heads=1:4"); /* the first selected step, a head subset */
    check_fit(gqa, out, NULL);
    check_fit(b2, out, NULL);
    check_probe(tiny, out);
    check_probe(b2, out); /* two batch rows: its own lp forward both ways */

    tsc_analysis_t *a = analyse(nan, out, NULL, 1);
    if (a) {
        CHECK_EQ_INT(a->n_skipped_heads, 1);
        CHECK(!a->lp_fit_ok);
    }
    tsc_analysis_free(a);
    return tsc_test_done();
}
