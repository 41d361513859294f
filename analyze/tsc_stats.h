/* tsc_stats.h: the statistics of the analysis layer: running moments, errors in ULPs, sign
 * consistency, significance (t-statistic and an exact two-sided binomial sign test), cumulative
 * sums, and the "biased feature" flagging rule.
 *
 * Every summary carries the number of samples it was computed over (n) and the number of
 * non-finite samples that were skipped (n_nonfinite, with the index of the first one), so a
 * reader always knows what a figure stands for.
 *
 *   tsc_moments_t m; tsc_moments_init(&m);
 *   for (size_t i = 0; i < n; i++) tsc_moments_add(&m, err[i]);
 *   double t = tsc_moments_tstat(&m);                  // mean / (sd / sqrt(n))
 *   double p = tsc_stats_sign_test_p(m.n_pos, m.n_neg); // two-sided, exact
 *   int biased = tsc_stats_flag(p, n_tests, mean_ulp, &TSC_FLAG_RULE_DEFAULT);
 */
#ifndef TSC_STATS_H
#define TSC_STATS_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_formats.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Running moments (Welford, in double), sign counts and extremes of a stream of samples.
 * Non-finite samples are not added: they are counted, and the index of the first is kept. */
typedef struct {
    int64_t n;            /* finite samples added */
    int64_t n_pos, n_neg; /* samples > 0 and < 0 (zeros count in n only) */
    int64_t n_nonfinite;  /* NaN/Inf samples skipped */
    int64_t first_nonfinite; /* index (the count of add calls before it) of the first, -1 if none */
    int64_t n_seen;       /* every add call, finite or not */
    double mean, m2;      /* Welford mean and sum of squared deviations */
    double sum;           /* plain sum (for sums reported as such, e.g. sum_T of delta differences) */
    double max_abs;       /* largest |x| */
    int64_t argmax_abs;   /* index of the largest |x|, -1 if none */
    double min, max;
} tsc_moments_t;

TSC_API void tsc_moments_init(tsc_moments_t *m);
TSC_API void tsc_moments_add(tsc_moments_t *m, double x);
/* Merges b into a (Chan et al. parallel update); indices of b are offset by a->n_seen. */
TSC_API void tsc_moments_merge(tsc_moments_t *a, const tsc_moments_t *b);
/* Sample variance (n - 1 denominator); 0 when n < 2. */
TSC_API double tsc_moments_variance(const tsc_moments_t *m);
/* mean / (sd / sqrt(n)); 0 when n < 2 or sd = 0 with mean = 0; +-Inf when sd = 0, mean != 0. */
TSC_API double tsc_moments_tstat(const tsc_moments_t *m);
/* Share of the majority sign among the non-zero samples, in [0.5, 1]; NaN when none is non-zero. */
TSC_API double tsc_moments_sign_consistency(const tsc_moments_t *m);

/* The unit in the last place of |x| in fmt (the spacing of fmt's values at |x|; for |x| below the
 * smallest normal, the subnormal spacing). ulp(0) is the smallest subnormal. x must be finite. */
TSC_API double tsc_stats_ulp(double x, tsc_format_t fmt);

/* Two-sided exact binomial sign test: the probability, under "each non-zero sample is positive
 * with probability 1/2 independently", of a split at least as uneven as (n_pos, n_neg).
 * Computed as 2 * P(X >= max(n_pos, n_neg)), X ~ Bin(n, 1/2), capped at 1, by summing the
 * binomial terms in log space from the observed count outwards until they are below 1e-18 of the
 * sum (exact to double precision; O(sqrt(n)) terms). For n > 1e9 it uses the normal
 * approximation with continuity correction. Returns 1 when n = 0. Results below ~1e-300 are 0. */
TSC_API double tsc_stats_sign_test_p(int64_t n_pos, int64_t n_neg);

/* Two-sided p-value of a t-statistic with df degrees of freedom (Student's t):
 * I_{df/(df+t^2)}(df/2, 1/2), the regularized incomplete beta by its continued fraction (Lentz,
 * relative accuracy ~1e-14). df <= 0 or t NaN gives NaN; |t| = Inf gives 0. */
TSC_API double tsc_stats_t_test_p(double t, double df);
/* The regularized incomplete beta I_x(a, b) for a, b > 0, x in [0, 1]. */
TSC_API double tsc_stats_betai(double a, double b, double x);

/* out[i] = x[0] + ... + x[i], accumulated in double (out may alias x). [n] */
TSC_API void tsc_stats_cumsum(const double *x, double *out, size_t n);

/* Error of lp against hp over n elements: max and mean absolute and relative error, mean ULPs. */
typedef struct {
    int64_t n;                 /* finite pairs compared */
    int64_t n_nonfinite;       /* pairs where either side is NaN/Inf (skipped) */
    int64_t first_nonfinite;   /* index of the first such pair, -1 if none */
    double max_abs, mean_abs;  /* |lp - hp| */
    int64_t argmax_abs;        /* index of the largest |lp - hp| */
    double max_rel, mean_rel;  /* |lp - hp| / |hp| over pairs with hp != 0 */
    double signed_mean;        /* mean of lp - hp */
    double mean_ulp;           /* mean of (lp - hp) / ulp_fmt(hp): signed, in ULPs of fmt */
    double mean_abs_ulp, max_abs_ulp;
    double sign_consistency;   /* share of the majority sign among non-zero differences */
    int64_t n_pos, n_neg;      /* positive / negative differences */
    double tstat;              /* t-statistic of the signed differences */
    double p_sign;             /* two-sided sign-test p-value of the differences */
} tsc_err_summary_t;

/* Compares lp against hp ([n] float each) with ULPs of fmt (the lp output format).
 * Always succeeds for n >= 0 (n = 0 gives zeros and p_sign = 1). */
TSC_API void tsc_stats_error_compare(const float *lp, const float *hp, size_t n, tsc_format_t fmt,
                             tsc_err_summary_t *out);
/* Same on double arrays. */
TSC_API void tsc_stats_error_compare_d(const double *lp, const double *hp, size_t n, tsc_format_t fmt,
                               tsc_err_summary_t *out);

/* The flagging rule for a biased head/feature. A feature is flagged when its sign-test p-value,
 * Bonferroni-corrected by the number of tests made in the whole analysis, is below alpha AND its
 * mean signed error is at least min_ulp ULPs in magnitude. Under the null hypothesis (each
 * non-zero error independently positive or negative with probability 1/2), the probability
 * that ANY feature of the analysis is flagged is at most alpha (Bonferroni); the ULP threshold
 * only removes flags. A head is flagged when at least one of its features is. */
typedef struct {
    double alpha;    /* family-wise false-positive bound, default 0.01 */
    double min_ulp;  /* minimum |mean error| in ULPs, default 0.05 */
    int64_t min_n;   /* minimum number of non-zero differences to test, default 8 */
} tsc_flag_rule_t;

extern const tsc_flag_rule_t TSC_FLAG_RULE_DEFAULT;

/* 1 when (p * n_tests < rule->alpha and |mean_ulp| >= rule->min_ulp and n_nonzero >= min_n). */
TSC_API int tsc_stats_flag(double p, int64_t n_tests, double mean_ulp, int64_t n_nonzero,
                   const tsc_flag_rule_t *rule);

#ifdef __cplusplus
}
#endif
#endif
