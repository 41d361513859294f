/* The P̄V rounding census of the CUDA exact mode (kernels/attn_rowwise_internal.h, run here on the
 * CPU as the GPU threads run it) against the analysis' census (tsc_census_row, tsc_census.h), on
 * the P̄V operands of the reference's trace: per head, the additions and the events by sign must be
 * equal; the summed errors agree to 1e-12 relative (the two add them in different orders: per row
 * here, feature chunks of 64 there). Shapes: D 64 (one chunk) and 128, causal, 64-key tiles, T not
 * a multiple of the tile; policies bf16-torch and bf16-fa2; census formats BF16 and FP16. The
 * inputs have repeated keys (exact ties, P̄ = 1) and V features with a common mean (negative: the
 * paper's setting; positive; near zero, both signs), so events of each sign occur. */
#include "attention_internal.h"
#include "tsc_attention.h"
#include "tsc_census.h"
#include "tsc_test.h"

static void one(const char *pname, int T, int D, tsc_format_t fmt, double vmean) {
    tsc_policy_t pol;
    CHECK(tsc_policy_parse(pname, &pol) == TSC_OK);
    char full[96];
    snprintf(full, sizeof full, "%s+tile:q=64,k=64", pname);
    CHECK(tsc_policy_parse(full, &pol) == TSC_OK);
    const tsc_attn_dims_t d = {1, 1, 1, T, D, 1, 1.0 / sqrt((double)D)};
    const size_t n = (size_t)T * D;
    float *q = malloc(n * 4), *k = malloc(n * 4), *v = malloc(n * 4), *o = malloc(n * 4), *lse = malloc(T * 4);
    uint64_t s = 77 + (uint64_t)D;
    for (size_t i = 0; i < n; i++) {
        q[i] = tsc_bf16_to_f32(tsc_bf16_from_f32((float)tsc_test_nrand(&s)));
        k[i] = tsc_bf16_to_f32(tsc_bf16_from_f32((float)tsc_test_nrand(&s)));
        v[i] = tsc_bf16_to_f32(tsc_bf16_from_f32((float)(vmean + 0.4 * tsc_test_nrand(&s))));
    }
    for (int t = 8; t < T; t += 8) memcpy(k + (size_t)t * D, k, (size_t)D * 4); /* ties with the sink */
    tsc_attn_trace_t tr;
    CHECK(tsc_attn_trace_init(&tr, T, D, pol.block_k, TSC_TRACE_SCORES) == TSC_OK);
    tr.b = tr.h = 0;
    tsc_attn_io_t io = {TSC_ATTN_F32, q, k, v, NULL, o, lse, NULL, NULL, NULL, NULL};
    CHECK(tsc_attn_run(&pol, &d, &io, &tr, 1) == TSC_OK);
    tsc_census_t want = {0};
    for (int t = 0; t < T; t++) tsc_census_row(tr.pbar + (size_t)t * T, v, t + 1, D, pol.block_k, fmt, -1, NULL, &want);
    tsc_rw_pol_t p;
    CHECK(tsc_rw_policy(&pol, &d, &p) == TSC_OK);
    float *scr = malloc((3 * (size_t)p.Bc + 3 * (size_t)D) * 4), *orow = malloc((size_t)D * 4);
    tsc_rw_census_t got = {0, 0, 0, 0, 0};
    for (int t = 0; t < T; t++) {
        tsc_rw_census_t row = {0, 0, 0, 0, 0};
        float l1;
        tsc_rw_fwd_row(&p, q + (size_t)t * D, k, v, t, orow, &l1, NULL, scr, &row, (int)fmt);
        got.additions += row.additions;
        got.events_neg += row.events_neg;
        got.events_pos += row.events_pos;
        got.err_neg += row.err_neg;
        got.err_pos += row.err_pos;
        CHECKF(memcmp(orow, o + (size_t)t * D, (size_t)D * 4) == 0, "%s row %d: O differs with the census on", pname, t);
    }
    CHECK_EQ_INT(got.additions, want.additions);
    CHECK_EQ_INT(got.events_neg, want.events_neg);
    CHECK_EQ_INT(got.events_pos, want.events_pos);
    CHECK_NEAR(got.err_neg, want.err_neg, 1e-12 * fabs(want.err_neg));
    CHECK_NEAR(got.err_pos, want.err_pos, 1e-12 * fabs(want.err_pos));
    CHECKF(want.events_neg + want.events_pos > 0, "%s: no events: the comparison would be empty", pname);
    printf("%-10s T=%d D=%d census %s: %lld additions, %lld negative events (err %.6g), %lld positive (err %.6g)\n",
           pname, T, D, tsc_format_name(fmt), (long long)want.additions, (long long)want.events_neg, want.err_neg,
           (long long)want.events_pos,
           want.err_pos);
    tsc_attn_trace_free(&tr);
    free(q); free(k); free(v); free(o); free(lse); free(scr); free(orow);
}

int main(void) {
    one("bf16-torch", 200, 64, TSC_FMT_BF16, -2.2);
    one("bf16-torch", 150, 128, TSC_FMT_BF16, -2.2);
    one("bf16-fa2", 200, 64, TSC_FMT_BF16, 2.2);
    one("bf16-fa2", 130, 128, TSC_FMT_FP16, 0.3);
    return tsc_test_done();
}
