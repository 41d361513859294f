/* Unit tests of analyze/tsc_stats.h: moments, ULPs, sign test, cumulative sums, error summary,
 * flagging rule. Expected values are derived by hand (comments) or by an independent route. */
#include <stdint.h>
#include <stdlib.h>

#include "tsc_stats.h"
#include "tsc_test.h"

/* Exact binomial upper tail by direct summation in long double (range to ~1e-4951, so 2^-2000
 * does not underflow): an independent route from the library's log-space sum. */
static long double tail_direct(int n, int k) {
    long double pmf = ldexpl(1.0L, -n), sum = 0.0L;
    for (int j = 0; j <= n; j++) {
        if (j >= k) sum += pmf;
        pmf = pmf * (long double)(n - j) / (long double)(j + 1);
    }
    return sum;
}

static uint64_t lcg(uint64_t *s) { return tsc_test_lcg(s); }

/* Moments of 1..5: mean 3, sample variance 2.5, t = 3 / sqrt(2.5/5) = 3/sqrt(0.5). */
static void test_moments(void) {
    tsc_moments_t m;
    tsc_moments_init(&m);
    for (int i = 1; i <= 5; i++) tsc_moments_add(&m, i);
    CHECK_EQ_INT(m.n, 5);
    CHECK_NEAR(m.mean, 3.0, 1e-15);
    CHECK_NEAR(tsc_moments_variance(&m), 2.5, 1e-14);
    CHECK_NEAR(tsc_moments_tstat(&m), 3.0 / sqrt(0.5), 1e-12);
    CHECK_NEAR(m.sum, 15.0, 0);
    CHECK_EQ_INT(m.argmax_abs, 4);
}

/* Merge of two halves equals the sequential result. */
static void test_moments_merge(void) {
    tsc_moments_t a, b;
    tsc_moments_init(&a);
    tsc_moments_init(&b);
    double xs[7] = {0.5, -1.25, 3.0, 2.0, -7.5, 0.0, 1.0};
    tsc_moments_t all;
    tsc_moments_init(&all);
    for (int i = 0; i < 7; i++) tsc_moments_add(&all, xs[i]);
    for (int i = 0; i < 3; i++) tsc_moments_add(&a, xs[i]);
    for (int i = 3; i < 7; i++) tsc_moments_add(&b, xs[i]);
    tsc_moments_merge(&a, &b);
    CHECK_EQ_INT(a.n, 7);
    CHECK_NEAR(a.mean, all.mean, 1e-15);
    CHECK_NEAR(tsc_moments_variance(&a), tsc_moments_variance(&all), 1e-13);
    CHECK_EQ_INT(a.argmax_abs, 4); /* -7.5 at index 4 */
    CHECK_EQ_INT(a.n_pos, 4);
    CHECK_EQ_INT(a.n_neg, 2);
}

/* Non-finite samples are counted with the index of the first, not added. */
static void test_moments_nonfinite(void) {
    tsc_moments_t m;
    tsc_moments_init(&m);
    tsc_moments_add(&m, 1.0);
    tsc_moments_add(&m, NAN);
    tsc_moments_add(&m, 2.0);
    tsc_moments_add(&m, -INFINITY);
    CHECK_EQ_INT(m.n, 2);
    CHECK_EQ_INT(m.n_nonfinite, 2);
    CHECK_EQ_INT(m.first_nonfinite, 1);
    CHECK_NEAR(m.mean, 1.5, 0);
}

/* Sign consistency: {1,-1,2,3,0}: 3 positive of 4 non-zero. */
static void test_sign_consistency(void) {
    tsc_moments_t m;
    tsc_moments_init(&m);
    double sc[5] = {1, -1, 2, 3, 0};
    for (int i = 0; i < 5; i++) tsc_moments_add(&m, sc[i]);
    CHECK_NEAR(tsc_moments_sign_consistency(&m), 0.75, 0);
}

/* ULPs: BF16 has 7 mantissa bits: ulp(1) = 2^-7; in [4, 8) 2^-5 (docs/MECHANISM.md §5: half an ULP
 * there is 0.015625). FP32: 2^-23 at 1, smallest subnormal 2^-149 at 0. BF16 subnormal
 * spacing 2^(-126-7). FP16: 2^-10 at 1, 32 at 65504. E4M3: 2^-9 subnormal spacing. */
static void test_ulp(void) {
    CHECK_NEAR(tsc_stats_ulp(1.0, TSC_FMT_BF16), ldexp(1, -7), 0);
    CHECK_NEAR(tsc_stats_ulp(-4.703125, TSC_FMT_BF16), 0.03125, 0);
    CHECK_NEAR(tsc_stats_ulp(1.999, TSC_FMT_BF16), ldexp(1, -7), 0);
    CHECK_NEAR(tsc_stats_ulp(2.0, TSC_FMT_BF16), ldexp(1, -6), 0);
    CHECK_NEAR(tsc_stats_ulp(1.0, TSC_FMT_FP32), ldexp(1, -23), 0);
    CHECK_NEAR(tsc_stats_ulp(0.0, TSC_FMT_FP32), ldexp(1, -149), 0);
    CHECK_NEAR(tsc_stats_ulp(1e-40, TSC_FMT_BF16), ldexp(1, -133), 0);
    CHECK_NEAR(tsc_stats_ulp(1.0, TSC_FMT_FP16), ldexp(1, -10), 0);
    CHECK_NEAR(tsc_stats_ulp(65504.0, TSC_FMT_FP16), 32.0, 0);
    CHECK_NEAR(tsc_stats_ulp(0.001, TSC_FMT_FP8_E4M3), ldexp(1, -9), 0);
}

/* Sign test, small exact cases: 10 of 10 positive: 2 * 2^-10; 9 of 10: 2 * 11/1024;
 * balanced: 1; 3 vs 2: 2 * 16/32 capped to 1; n = 0: 1. */
static void test_sign_test_small(void) {
    CHECK_NEAR(tsc_stats_sign_test_p(10, 0), 2.0 / 1024.0, 1e-16);
    CHECK_NEAR(tsc_stats_sign_test_p(0, 10), 2.0 / 1024.0, 1e-16);
    CHECK_NEAR(tsc_stats_sign_test_p(9, 1), 22.0 / 1024.0, 1e-15);
    CHECK_NEAR(tsc_stats_sign_test_p(5, 5), 1.0, 0);
    CHECK_NEAR(tsc_stats_sign_test_p(3, 2), 1.0, 1e-12);
    CHECK_NEAR(tsc_stats_sign_test_p(0, 0), 1.0, 0);
}

/* Sign test for large n: exact long-double sums, the normal approximation, tiny p. */
static void test_sign_test_large(void) {
    /* n = 2000 against the direct long-double sum, relative 1e-10 (the log-space sum loses
     * ~1e-13 relative in lgamma of 2000). */
    int ks[4] = {1010, 1050, 1100, 1300};
    for (int i = 0; i < 4; i++) {
        double want = (double)(2.0L * tail_direct(2000, ks[i]));
        double got = tsc_stats_sign_test_p(ks[i], 2000 - ks[i]);
        CHECKF(fabs(got - want) <= 1e-10 * want, "k=%d: %.17g vs %.17g", ks[i], got, want);
    }
    /* Large n (1e6, 2 sigma): agrees with the normal approximation with continuity correction
     * to 1e-3 relative (the approximation's own error at z = 2 for n = 1e6 is ~1e-4). */
    {
        int64_t n = 1000000, k = 501000;
        double z = ((double)k - 0.5 - 0.5 * (double)n) / (0.5 * sqrt((double)n));
        double approx = erfc(z / sqrt(2.0));
        double got = tsc_stats_sign_test_p(k, n - k);
        CHECKF(fabs(got - approx) <= 1e-3 * approx, "%.17g vs %.17g", got, approx);
    }
    /* n > 1e9 uses the normal approximation: z ~ 0.6324, two-sided p ~ 0.5271. */
    CHECK_NEAR(tsc_stats_sign_test_p(500010000, 499990000), 0.5271, 1e-3);
    /* Very uneven splits give tiny (or zero) p without NaN. */
    double tiny = tsc_stats_sign_test_p(100000, 0);
    CHECK(tiny >= 0.0 && tiny < 1e-300);
}

/* Student t: two-sided critical values from tables (p = 0.05): df 1: 12.706205, df 10:
 * 2.228139, df 1e6: ~1.959966 (normal). Incomplete beta with integer arguments equals a
 * binomial tail: I_0.4(2, 3) = P(Bin(4, 0.4) >= 2) = 1 - 0.6^4 - 4*0.4*0.6^3 = 0.5248. */
static void test_t_test(void) {
    CHECK_NEAR(tsc_stats_t_test_p(12.706205, 1), 0.05, 1e-6);
    CHECK_NEAR(tsc_stats_t_test_p(-2.228139, 10), 0.05, 1e-6);
    CHECK_NEAR(tsc_stats_t_test_p(1.959966, 1e6), 0.05, 1e-5);
    CHECK_NEAR(tsc_stats_t_test_p(0.0, 5), 1.0, 1e-14);
    CHECK_NEAR(tsc_stats_t_test_p(INFINITY, 5), 0.0, 0);
    CHECK_NEAR(tsc_stats_betai(2, 3, 0.4), 0.5248, 1e-13);
    CHECK_NEAR(tsc_stats_betai(1, 1, 0.3), 0.3, 1e-14);
    CHECK(isnan(tsc_stats_t_test_p(1.0, 0)));
}

/* Cumulative sums. */
static void test_cumsum(void) {
    double cs[4] = {1, 2, -4, 0.5}, out[4];
    tsc_stats_cumsum(cs, out, 4);
    CHECK_NEAR(out[0], 1, 0);
    CHECK_NEAR(out[1], 3, 0);
    CHECK_NEAR(out[2], -1, 0);
    CHECK_NEAR(out[3], -0.5, 0);
}

/* Error summary in BF16 ULPs: differences {+1 ulp at 1, 0, -1 ulp at 4, -1 ulp at 3} and a
 * NaN pair at index 4. mean_ulp = -1/4, 1 positive, 2 negative, consistency 2/3, max |d| =
 * 2^-5 at index 2. */
static void test_error_summary(void) {
    float hp[5] = {1.0f, 2.0f, -4.0f, 3.0f, 1.0f};
    float lp[5] = {1.0f + 0.0078125f, 2.0f, -4.0f - 0.03125f, 3.0f - 0.015625f, NAN};
    tsc_err_summary_t es;
    tsc_stats_error_compare(lp, hp, 5, TSC_FMT_BF16, &es);
    CHECK_EQ_INT(es.n, 4);
    CHECK_EQ_INT(es.n_nonfinite, 1);
    CHECK_EQ_INT(es.first_nonfinite, 4);
    CHECK_NEAR(es.mean_ulp, -0.25, 1e-15);
    CHECK_NEAR(es.mean_abs_ulp, 0.75, 1e-15);
    CHECK_NEAR(es.max_abs_ulp, 1.0, 0);
    CHECK_EQ_INT(es.n_pos, 1);
    CHECK_EQ_INT(es.n_neg, 2);
    CHECK_NEAR(es.sign_consistency, 2.0 / 3.0, 1e-15);
    CHECK_NEAR(es.max_abs, 0.03125, 0);
    CHECK_EQ_INT(es.argmax_abs, 2);
    CHECK_NEAR(es.signed_mean, (0.0078125 - 0.03125 - 0.015625) / 4.0, 1e-17);
    CHECK_NEAR(es.max_rel, 0.0078125, 1e-17); /* 2^-7 / 1, 2^-5 / 4, 2^-6 / 3 */
}

/* Flagging rule: Bonferroni p * tests < 0.01 and |mean| >= 0.05 ULP and n >= 8. */
static void test_flag_rule(void) {
    CHECK(tsc_stats_flag(1e-5, 100, -0.1, 100, &TSC_FLAG_RULE_DEFAULT));
    CHECK(!tsc_stats_flag(1e-5, 10000, -0.1, 100, &TSC_FLAG_RULE_DEFAULT));
    CHECK(!tsc_stats_flag(1e-9, 100, 0.01, 100, &TSC_FLAG_RULE_DEFAULT));
    CHECK(!tsc_stats_flag(1e-9, 100, 0.5, 4, &TSC_FLAG_RULE_DEFAULT));
}

/* Null simulation: 2000 features x 256 rows of symmetric errors (+-1, +-2 ULP, random
 * signs from a fixed-seed LCG). The family-wise bound says P(any flag) <= 0.01; with this
 * seed no feature is flagged. A planted feature with 75% negative signs is flagged. */
static void test_null_simulation(void) {
    uint64_t seed = 12345;
    int flagged = 0, planted_flagged = 0;
    for (int f = 0; f < 2001; f++) {
        tsc_moments_t fm;
        tsc_moments_init(&fm);
        for (int r = 0; r < 256; r++) {
            double mag = (lcg(&seed) & 1) ? 1.0 : 2.0;
            int neg = (f == 2000) ? (lcg(&seed) % 4 != 0) : (int)(lcg(&seed) & 1);
            tsc_moments_add(&fm, neg ? -mag : mag);
        }
        int fl = tsc_stats_flag(tsc_stats_sign_test_p(fm.n_pos, fm.n_neg), 2001, fm.mean, fm.n_pos + fm.n_neg,
                                &TSC_FLAG_RULE_DEFAULT);
        if (f == 2000) planted_flagged = fl;
        else flagged += fl;
    }
    CHECK_EQ_INT(flagged, 0);
    CHECK(planted_flagged);
}

int main(void) {
    test_moments();
    test_moments_merge();
    test_moments_nonfinite();
    test_sign_consistency();
    test_ulp();
    test_sign_test_small();
    test_sign_test_large();
    test_t_test();
    test_cumsum();
    test_error_summary();
    test_flag_rule();
    test_null_simulation();
    return tsc_test_done();
}
