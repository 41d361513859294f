/* End-to-end tests of analyze/tsc_analysis.h on hand-made dumps whose answers are derived by hand:
 *
 * 1. A 3-step dump, 1 layer, 1 head, T = 2, D = 2, causal, q = k = 0 (so both keys of row 1 tie
 *    at the maximum and P-bar = 1 exactly), v row 0 = (1, 1), v row 1 = (v1, 1), dO = (g, g).
 *    hp (fp32) gives O[1,0] = (1 + v1)/2 exactly; bf16-fa2 rounds that once to BF16 (nearest-even):
 *      step 1: v1 = 1 + 2^-7:   mean 1 + 2^-8   is a tie between 1 (even) and 1 + 2^-7 -> 1:     err -2^-8
 *      step 2: v1 = 1 + 3*2^-7: mean 1 + 3*2^-8 ties 1 + 2^-7 and 1 + 2^-6 (even) -> 1 + 2^-6: err +2^-8
 *      step 3: v1 = 1 + 5*2^-7: mean 1 + 5*2^-8 ties 1 + 2*2^-7 (even) and 1 + 3*2^-7:          err -2^-8
 *    Row 0 and feature 1 are exact. delta = rowsum(dO o O), g = 1, 1, 2, so sum_T(delta_lp - delta_hp)
 *    per step is -2^-8, +2^-8, -2^-7 and its cumulative sum -2^-8, 0, -2^-7.
 *    Ties: row 1 has two exact maxima (1 row per step); P-bar = 1 entries: 1 (row 0) + 2 (row 1);
 *    key 0 holds the row max in both rows, key 1 in one.
 * 2. NaN in one head's v: that head is skipped with the first coordinate named, the other head is
 *    analysed.
 * 3. summary.json: every key it contains is documented in docs/FORMAT.md section 3 ($TSC_SRC).
 */
#include <hdf5.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tsc_analysis.h"
#include "tsc_dump.h"
#include "tsc_test.h"

static tsc_status_t put(tsc_dump_writer_t *w, long long step, const char *name, int H, const float *data) {
    uint64_t dims[4] = {1, (uint64_t)H, 2, 2};
    return tsc_dump_writer_put(w, step, 0, name, 4, dims, TSC_FMT_FP32, data, TSC_FMT_FP32);
}

static int write_cumsum_dump(const char *path) {
    tsc_dump_meta_t m;
    tsc_dump_meta_init(&m);
    m.n_layer = 1, m.n_head = 1, m.n_kv_head = 1, m.head_dim = 2, m.d_model = 2, m.seq_len = 2, m.batch = 1;
    m.causal = 1, m.softmax_scale = 1.0;
    snprintf(m.policy, sizeof m.policy, "bf16-fa2");
    tsc_dump_writer_t *w;
    if (tsc_dump_writer_open(&w, path, &m, NULL) != TSC_OK) return -1;
    float zero[4] = {0, 0, 0, 0};
    const float v1s[3] = {1.0f + 0x1p-7f, 1.0f + 3 * 0x1p-7f, 1.0f + 5 * 0x1p-7f}, g[3] = {1, 1, 2};
    for (int s = 0; s < 3; s++) {
        long long step = 10 * (s + 1);
        float v[4] = {1, 1, v1s[s], 1}, d[4] = {g[s], g[s], g[s], g[s]};
        if (put(w, step, "q", 1, zero) || put(w, step, "k", 1, zero) || put(w, step, "v", 1, v) ||
            put(w, step, "do", 1, d) || tsc_dump_writer_step_done(w, step)) {
            fprintf(stderr, "%s\n", tsc_error_last());
            tsc_dump_writer_abort(w);
            return -1;
        }
    }
    return tsc_dump_writer_close(w) == TSC_OK ? 0 : -1;
}

static int write_nan_dump(const char *path) {
    tsc_dump_meta_t m;
    tsc_dump_meta_init(&m);
    m.n_layer = 1, m.n_head = 2, m.n_kv_head = 2, m.head_dim = 2, m.d_model = 2, m.seq_len = 2, m.batch = 1;
    m.causal = 1, m.softmax_scale = 1.0;
    tsc_dump_writer_t *w;
    if (tsc_dump_writer_open(&w, path, &m, NULL) != TSC_OK) return -1;
    float zero[8] = {0}, v[8] = {1, 1, 1.0f + 0x1p-7f, 1, 1, 1, NAN, 1}, d[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    if (put(w, 5, "q", 2, zero) || put(w, 5, "k", 2, zero) || put(w, 5, "v", 2, v) || put(w, 5, "do", 2, d) ||
        tsc_dump_writer_step_done(w, 5)) {
        tsc_dump_writer_abort(w);
        return -1;
    }
    return tsc_dump_writer_close(w) == TSC_OK ? 0 : -1;
}

/* Keys of a JSON text as written by tsc_json: every "name": occurrence. Returns 1 when all are
 * named in backquotes (`name`) in section 3 of FORMAT.md. */
static int keys_documented(const char *json, const char *doc_path) {
    FILE *f = fopen(doc_path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", doc_path);
        return 0;
    }
    static char doc[1 << 20];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = '\0';
    char *sec = strstr(doc, "## 3.");
    if (!sec) return 0;
    char *end = strstr(sec + 4, "\n## ");
    if (end) *end = '\0';
    int ok = 1;
    for (const char *p = json; (p = strchr(p, '"'));) {
        const char *q = strchr(p + 1, '"');
        if (!q) break;
        if (q[1] == ':' && q - p - 1 < 60) {
            char key[80];
            snprintf(key, sizeof key, "`%.*s`", (int)(q - p - 1), p + 1);
            if (!strstr(sec, key)) {
                fprintf(stderr, "summary.json key %s is not documented in docs/FORMAT.md section 3\n", key);
                ok = 0;
            }
        }
        p = q + 1;
    }
    return ok;
}

int main(void) {
    char dir[] = "tsc_analysis_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char dump[256], out[256], h5[300];
    snprintf(dump, sizeof dump, "%s/three.h5", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    mkdir(out, 0777);
    CHECK(write_cumsum_dump(dump) == 0);

    tsc_analysis_opts_t o;
    tsc_analysis_opts_init(&o);
    tsc_analysis_t *a = NULL;
    tsc_status_t st = tsc_analysis_run(dump, out, &o, &a);
    CHECKF(st == TSC_OK, "%s", tsc_error_last());
    if (st != TSC_OK) return tsc_test_done();
    CHECK_STREQ(a->lp, "bf16-fa2"); /* the dump's policy */
    CHECK_STREQ(a->hp, "fp32");
    CHECK_EQ_INT(a->n_heads, 3);
    CHECK_EQ_INT(a->n_steps, 3);
    const double u = 0x1p-8;
    const double want_sum[3] = {-u, u, -2 * u}, want_cum[3] = {-u, 0, -2 * u};
    for (int s = 0; s < 3 && (size_t)s < a->n_heads; s++) {
        const tsc_head_result_t *r = &a->heads[s];
        CHECK_EQ_INT(r->step, 10 * (s + 1));
        CHECK_NEAR(r->delta_sum, want_sum[s], 0);
        CHECK_NEAR(r->delta_cumsum, want_cum[s], 0);
        CHECK_EQ_INT(r->n_rows, 2);
        CHECK_EQ_INT(r->o_err.n, 4);
        /* O error: one element of 4 is off by 2^-8 = half a BF16 ULP at 1 + 2^-8 (ulp 2^-7). */
        CHECK_NEAR(r->o_err.mean_ulp, (s == 1 ? 0.5 : -0.5) / 4.0, 1e-15);
        CHECK_NEAR(r->o_err.max_abs, u, 0);
        CHECK_EQ_INT(r->o_err.argmax_abs, 2); /* row 1, feature 0 */
        CHECK_EQ_INT(r->rows_multi_max, 1);
        CHECK_EQ_INT(r->rows_multi_max_eps, 1);
        CHECK_EQ_INT(r->pbar_one, 3);
        CHECK_EQ_INT(r->rows_pbar_one_2, 1);
        CHECK_EQ_INT(r->sink_keys[0], 0);
        CHECK_EQ_INT(r->sink_counts[0], 2);
        CHECK_EQ_INT(r->sink_keys[1], 1);
        CHECK_EQ_INT(r->top_feature, 0);
        CHECK_EQ_INT(r->probe_t, 1);
        CHECK_EQ_INT(r->probe_i, 0);
        CHECK(!r->flagged); /* 1 non-zero difference: below min_n, never significant */
    }
    /* The cumulative array in analysis.h5. */
    snprintf(h5, sizeof h5, "%s/analysis.h5", out);
    hid_t f = H5Fopen(h5, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(f >= 0);
    if (f >= 0) {
        double cum[3] = {0}, sum[3] = {0};
        hid_t d = H5Dopen2(f, "cumulative/delta_cumsum", H5P_DEFAULT);
        CHECK(d >= 0 && H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, cum) >= 0);
        H5Dclose(d);
        d = H5Dopen2(f, "cumulative/delta_sum", H5P_DEFAULT);
        CHECK(d >= 0 && H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, sum) >= 0);
        H5Dclose(d);
        for (int s = 0; s < 3; s++) {
            CHECK_NEAR(cum[s], want_cum[s], 0);
            CHECK_NEAR(sum[s], want_sum[s], 0);
        }
        double dd[2] = {0};
        d = H5Dopen2(f, "step_00000030/layer_000/delta_diff", H5P_DEFAULT);
        CHECK(d >= 0 && H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, dd) >= 0);
        H5Dclose(d);
        CHECK_NEAR(dd[0], 0, 0);
        CHECK_NEAR(dd[1], -2 * u, 0);
        H5Fclose(f);
    }
    /* summary.json: written, and every key documented. */
    char js[300];
    snprintf(js, sizeof js, "%s/summary.json", out);
    CHECK(tsc_analysis_write_summary(a, js) == TSC_OK);
    tsc_json_t j;
    tsc_json_init(&j);
    tsc_analysis_summary_json(a, &j);
    const char *src = getenv("TSC_SRC");
    if (src) {
        char doc[1024];
        snprintf(doc, sizeof doc, "%s/docs/FORMAT.md", src);
        CHECK(keys_documented(tsc_json_text(&j, NULL), doc));
        /* The checker itself: an undocumented key must be caught. */
        CHECK(!keys_documented("{\"surely_not_a_documented_key\": 1}", doc));
    } else {
        fprintf(stderr, "TSC_SRC not set: key documentation check skipped\n");
    }
    tsc_json_free(&j);
    tsc_analysis_free(a);

    /* Steps selection: only step 20 and 30 -> cumulative starts at step 20. */
    tsc_analysis_opts_init(&o);
    CHECK(tsc_select_parse(&o.sel, "steps=20:31") == TSC_OK);
    CHECK(tsc_analysis_run(dump, out, &o, &a) == TSC_OK);
    if (a) {
        CHECK_EQ_INT(a->n_heads, 2);
        if (a->n_heads == 2) {
            CHECK_NEAR(a->heads[0].delta_cumsum, u, 0);
            CHECK_NEAR(a->heads[1].delta_cumsum, -u, 0);
        }
        tsc_analysis_free(a);
    }

    /* NaN in head 1's v (t = 1, d = 0): head 1 skipped and reported, head 0 analysed. */
    snprintf(dump, sizeof dump, "%s/nan.h5", dir);
    CHECK(write_nan_dump(dump) == 0);
    tsc_analysis_opts_init(&o);
    st = tsc_analysis_run(dump, out, &o, &a);
    CHECKF(st == TSC_OK, "%s", tsc_error_last());
    if (st == TSC_OK) {
        CHECK_EQ_INT(a->n_heads, 2);
        CHECK_EQ_INT(a->n_skipped_heads, 1);
        CHECK(!a->heads[0].skipped);
        CHECK_NEAR(a->heads[0].delta_sum, -u, 0);
        CHECK(a->heads[1].skipped);
        CHECK_EQ_INT(a->heads[1].n_nonfinite, 1);
        CHECK_STREQ(a->heads[1].first_nonfinite, "v[b=0,t=1,d=0]");
        tsc_analysis_free(a);
    }
    /* A missing dump: an error naming it, nothing written. */
    remove(h5);
    CHECK(tsc_analysis_run("no_such_dump.h5", out, &o, &a) != TSC_OK);
    CHECK(a == NULL);
    CHECK(strstr(tsc_error_last(), "no_such_dump.h5") != NULL);
    CHECK(access(h5, F_OK) != 0);

    remove(js);
    snprintf(dump, sizeof dump, "%s/three.h5", dir);
    remove(dump);
    snprintf(dump, sizeof dump, "%s/nan.h5", dir);
    remove(dump);
    rmdir(out);
    rmdir(dir);
    return tsc_test_done();
}
