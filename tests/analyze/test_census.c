/* Unit tests of analyze/tsc_census.h: the vectorised census equals, bit for bit, a reference that
 * runs every addition through tsc_accum_add2 (exact sum, carry_shift) and every carried FP32 sum
 * through tsc_accum_round (rounding bit, sticky, error), over random rows with mixed signs, zeros,
 * FP32 subnormals, huge and tiny products, tile restarts and every narrow output format; the
 * paper's worked example is one event of error -0.014759540557861328; a planted off-by-one in
 * the reference (carry_shift >= 0 instead of +1) is caught. */
#include <stdint.h>
#include <stdlib.h>

#include "tsc_accum.h"
#include "tsc_census.h"
#include "tsc_test.h"

static uint64_t seed = 2024;
static double urand(void) { return tsc_test_urand(&seed); }

/* A value of every kind a P-bar V row can hold (and some it should not). */
static float any_value(int allow_zero) {
    double u = urand();
    if (allow_zero && u < 0.05) return 0.0f;
    if (u < 0.10) return (float)((urand() - 0.5) * 1e-39); /* FP32 subnormal */
    if (u < 0.15) return (float)((urand() - 0.5) * 1e30);  /* huge */
    float x = (float)((urand() - 0.5) * 8.0);
    if (u < 0.35) x = (float)(int)(x * 4) / 4; /* short significands: exact sums, ties */
    return x;
}

/* The reference: the same loop order as tsc_census_row (chunks of 64 features, keys, features)
 * so that the error sums are added in the same order. carry_min is 1 for the definition; 0
 * plants a fault. */
static void reference(const double *a, const float *v, int nv, int D, int bk, tsc_format_t fmt, double l,
                      int carry_min, uint8_t *evt, tsc_census_t *acc) {
    double div = l > 0 ? l : 1.0;
    memset(evt, 0, (size_t)D);
    for (int i0 = 0; i0 < D; i0 += 64) {
        int n = D - i0 < 64 ? D - i0 : 64;
        float s[64];
        for (int j = 0; j < nv; j++) {
            if (j % bk == 0)
                for (int i = 0; i < 64; i++) s[i] = 0.0f;
            float aj = (float)a[j];
            if (aj == 0.0f) continue;
            acc->additions += n;
            for (int i = 0; i < n; i++) {
                tsc_accum_step_t st;
                double prod = (double)aj * (double)v[(size_t)j * D + i0 + i];
                float sn = (float)tsc_accum_add2((double)s[i], prod, TSC_FMT_FP32, TSC_ROUND_NEAREST_EVEN, NULL, &st);
                CHECK(sn == fmaf(aj, v[(size_t)j * D + i0 + i], s[i]) || (isnan(sn) && isnan(fmaf(aj, v[(size_t)j * D + i0 + i], s[i]))));
                int carried = s[i] != 0.0f && prod != 0.0 && sn != 0.0f && isfinite(sn) && st.carry_shift >= carry_min;
                s[i] = sn;
                if (!carried || tsc_format_mant_bits(fmt) >= 23) continue;
                tsc_accum_round((double)sn, fmt, TSC_ROUND_NEAREST_EVEN, NULL, &st);
                if (!(st.round_bit && st.sticky) || !isfinite(st.result)) continue;
                if (sn < 0) {
                    acc->events_neg++;
                    acc->err_neg += st.error / div;
                } else {
                    acc->events_pos++;
                    acc->err_pos += st.error / div;
                }
                evt[i0 + i] = 1;
            }
        }
    }
}

static int same(const tsc_census_t *x, const tsc_census_t *y) {
    return x->additions == y->additions && x->events_neg == y->events_neg && x->events_pos == y->events_pos &&
           x->err_neg == y->err_neg && x->err_pos == y->err_pos;
}

int main(void) {
    /* The paper's worked example: -2.4071154594421387 + -2.296875 in FP32 rounds to BF16 -4.71875. */
    {
        double a[2] = {1.0, 1.0};
        float v[2] = {-2.4071154594421387f, -2.296875f};
        uint8_t evt[1];
        tsc_census_t c = {0};
        CHECK((double)v[0] == -2.4071154594421387);
        tsc_census_row(a, v, 2, 1, 64, TSC_FMT_BF16, 1.0, evt, &c);
        CHECK_EQ_INT(c.additions, 2);
        CHECK_EQ_INT(c.events_neg, 1);
        CHECK_EQ_INT(c.events_pos, 0);
        CHECKF(c.err_neg == -0.014759540557861328, "%.17g", c.err_neg);
        CHECK_EQ_INT(evt[0], 1);
        /* The same two terms in separate key tiles (block_k 1): no addition carries. */
        tsc_census_t c1 = {0};
        tsc_census_row(a, v, 2, 1, 1, TSC_FMT_BF16, 1.0, evt, &c1);
        CHECK_EQ_INT(c1.events_neg + c1.events_pos, 0);
        CHECK_EQ_INT(evt[0], 0);
        /* Errors are divided by l. */
        tsc_census_t c2 = {0};
        tsc_census_row(a, v, 2, 1, 64, TSC_FMT_BF16, 4.0, evt, &c2);
        CHECKF(c2.err_neg == -0.014759540557861328 / 4.0, "%.17g", c2.err_neg);
    }

    /* Random rows against the reference, every output format, odd feature counts (chunk tails). */
    const tsc_format_t fmts[] = {TSC_FMT_BF16, TSC_FMT_FP16, TSC_FMT_FP8_E4M3, TSC_FMT_FP8_E5M2, TSC_FMT_TF32,
                                 TSC_FMT_FP32};
    const int Ds[] = {1, 7, 64, 100}, bks[] = {1, 5, 64};
    int64_t total_events = 0, mismatches = 0;
    for (size_t fi = 0; fi < sizeof fmts / sizeof fmts[0]; fi++)
        for (size_t di = 0; di < sizeof Ds / sizeof Ds[0]; di++)
            for (size_t bi = 0; bi < sizeof bks / sizeof bks[0]; bi++) {
                int D = Ds[di], bk = bks[bi], nv = 150;
                double *a = malloc((size_t)nv * sizeof *a);
                float *v = malloc((size_t)nv * D * sizeof *v);
                uint8_t *e1 = malloc((size_t)D), *e2 = malloc((size_t)D);
                for (int j = 0; j < nv; j++) a[j] = urand() < 0.1 ? 0.0 : (double)fabsf(any_value(0));
                for (int i = 0; i < nv * D; i++) v[i] = any_value(1);
                tsc_census_t got = {0}, want = {0};
                tsc_census_row(a, v, nv, D, bk, fmts[fi], 1.5, e1, &got);
                reference(a, v, nv, D, bk, fmts[fi], 1.5, 1, e2, &want);
                if (!same(&got, &want) || memcmp(e1, e2, (size_t)D) != 0) {
                    mismatches++;
                    fprintf(stderr, "format %d D %d bk %d: additions %lld/%lld events %lld,%lld / %lld,%lld\n",
                            (int)fmts[fi], D, bk, (long long)got.additions, (long long)want.additions,
                            (long long)got.events_neg, (long long)got.events_pos, (long long)want.events_neg,
                            (long long)want.events_pos);
                }
                if (tsc_format_mant_bits(fmts[fi]) >= 23) CHECK_EQ_INT(got.events_neg + got.events_pos, 0);
                total_events += got.events_neg + got.events_pos;
                /* the planted fault: counting non-carrying additions too must change the census */
                if (D == 100 && bk == 64 && fmts[fi] == TSC_FMT_BF16) {
                    tsc_census_t bad = {0};
                    reference(a, v, nv, D, bk, fmts[fi], 1.5, 0, e2, &bad);
                    CHECK(bad.events_neg + bad.events_pos > got.events_neg + got.events_pos);
                }
                free(a), free(v), free(e1), free(e2);
            }
    CHECK_EQ_INT(mismatches, 0);
    CHECKF(total_events > 1000, "only %lld events: the random rows do not exercise the census", (long long)total_events);
    printf("%lld events compared\n", (long long)total_events);
    return tsc_test_done();
}
