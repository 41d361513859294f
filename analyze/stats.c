/* stats.c: moments, ULPs, sign test, cumulative sums, flagging rule (tsc_stats.h). */
#include "tsc_stats.h"

#include <math.h>

const tsc_flag_rule_t TSC_FLAG_RULE_DEFAULT = {0.01, 0.05, 8};

void tsc_moments_init(tsc_moments_t *m) {
    m->n = m->n_pos = m->n_neg = m->n_nonfinite = m->n_seen = 0;
    m->first_nonfinite = -1;
    m->argmax_abs = -1;
    m->mean = m->m2 = m->sum = m->max_abs = 0.0;
    m->min = INFINITY;
    m->max = -INFINITY;
}

void tsc_moments_add(tsc_moments_t *m, double x) {
    int64_t idx = m->n_seen++;
    if (!isfinite(x)) {
        if (m->n_nonfinite++ == 0) m->first_nonfinite = idx;
        return;
    }
    m->n++;
    double d = x - m->mean;
    m->mean += d / (double)m->n;
    m->m2 += d * (x - m->mean);
    m->sum += x;
    if (x > 0) m->n_pos++;
    else if (x < 0) m->n_neg++;
    if (fabs(x) > m->max_abs || m->argmax_abs < 0) {
        m->max_abs = fabs(x);
        m->argmax_abs = idx;
    }
    if (x < m->min) m->min = x;
    if (x > m->max) m->max = x;
}

void tsc_moments_merge(tsc_moments_t *a, const tsc_moments_t *b) {
    int64_t off = a->n_seen;
    if (b->n > 0) {
        if (a->n == 0) {
            a->mean = b->mean;
            a->m2 = b->m2;
        } else {
            double n = (double)(a->n + b->n), d = b->mean - a->mean;
            a->m2 += b->m2 + d * d * (double)a->n * (double)b->n / n;
            a->mean += d * (double)b->n / n;
        }
        if (b->max_abs > a->max_abs || a->argmax_abs < 0) {
            a->max_abs = b->max_abs;
            a->argmax_abs = b->argmax_abs + off;
        }
        if (b->min < a->min) a->min = b->min;
        if (b->max > a->max) a->max = b->max;
    }
    a->n += b->n;
    a->n_pos += b->n_pos;
    a->n_neg += b->n_neg;
    a->sum += b->sum;
    if (a->n_nonfinite == 0 && b->n_nonfinite > 0) a->first_nonfinite = b->first_nonfinite + off;
    a->n_nonfinite += b->n_nonfinite;
    a->n_seen += b->n_seen;
}

double tsc_moments_variance(const tsc_moments_t *m) {
    return m->n < 2 ? 0.0 : m->m2 / (double)(m->n - 1);
}

double tsc_moments_tstat(const tsc_moments_t *m) {
    if (m->n < 2) return 0.0;
    double sd = sqrt(tsc_moments_variance(m));
    if (sd == 0.0) return m->mean == 0.0 ? 0.0 : copysign(INFINITY, m->mean);
    return m->mean / (sd / sqrt((double)m->n));
}

double tsc_moments_sign_consistency(const tsc_moments_t *m) {
    int64_t nz = m->n_pos + m->n_neg;
    if (nz == 0) return NAN;
    return (double)(m->n_pos > m->n_neg ? m->n_pos : m->n_neg) / (double)nz;
}

double tsc_stats_ulp(double x, tsc_format_t fmt) {
    int mant = tsc_format_mant_bits(fmt), ebits = tsc_format_exp_bits(fmt);
    int emin = 1 - ((1 << (ebits - 1)) - 1); /* exponent of the smallest normal */
    int e = emin;
    if (x != 0.0) {
        int fe;
        frexp(fabs(x), &fe); /* |x| = f * 2^fe, f in [0.5, 1): floor(log2|x|) = fe - 1 */
        if (fe - 1 > e) e = fe - 1;
    }
    return ldexp(1.0, e - mant);
}

/* log of C(n, k) via lgamma (exact enough: relative error ~1e-15 of the log). */
static double log_choose(double n, double k) {
    return lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(n - k + 1.0);
}

double tsc_stats_sign_test_p(int64_t n_pos, int64_t n_neg) {
    if (n_pos < 0 || n_neg < 0) return NAN;
    int64_t n = n_pos + n_neg;
    if (n == 0) return 1.0;
    int64_t k = n_pos > n_neg ? n_pos : n_neg; /* k >= n/2 */
    if (2 * k == n) return 1.0;
    if (n > 1000000000LL) {
        /* Normal approximation with continuity correction: z = (k - 0.5 - n/2) / (sqrt(n)/2). */
        double z = ((double)k - 0.5 - 0.5 * (double)n) / (0.5 * sqrt((double)n));
        double p = erfc(z / sqrt(2.0)); /* = 2 * P(Z >= z) */
        return p > 1.0 ? 1.0 : p;
    }
    /* P(X >= k) = 2^-n sum_{j>=k} C(n, j). The terms decrease for j >= k > n/2: the ratio
     * C(n, j+1)/C(n, j) = (n - j)/(j + 1) < 1, so the sum is accumulated relative to the
     * first term (log space) and stops once a term is below 1e-18 of the running sum. */
    double dn = (double)n;
    double log_first = log_choose(dn, (double)k) - dn * log(2.0);
    double sum = 0.0, term = 1.0;
    for (int64_t j = k; j <= n; j++) {
        sum += term;
        if (term < 1e-18 * sum) break;
        term *= (double)(n - j) / (double)(j + 1);
    }
    double log_tail = log_first + log(sum);
    double p = 2.0 * exp(log_tail);
    return p > 1.0 ? 1.0 : p;
}

/* Continued fraction of the incomplete beta (modified Lentz), valid for x < (a+1)/(a+b+2). */
static double betacf(double a, double b, double x) {
    const double tiny = 1e-300, eps = 1e-15;
    double qab = a + b, qap = a + 1.0, qam = a - 1.0, c = 1.0, d = 1.0 - qab * x / qap;
    if (fabs(d) < tiny) d = tiny;
    d = 1.0 / d;
    double h = d;
    for (int m = 1; m <= 100000; m++) {
        double m2 = 2.0 * m, aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1.0 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1.0 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1.0) < eps) break;
    }
    return h;
}

double tsc_stats_betai(double a, double b, double x) {
    if (!(a > 0 && b > 0) || !(x >= 0 && x <= 1)) return NAN;
    if (x == 0.0 || x == 1.0) return x;
    double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    if (x < (a + 1.0) / (a + b + 2.0)) return exp(lbt) * betacf(a, b, x) / a;
    return 1.0 - exp(lbt) * betacf(b, a, 1.0 - x) / b;
}

double tsc_stats_t_test_p(double t, double df) {
    if (!(df > 0) || isnan(t)) return NAN;
    if (isinf(t)) return 0.0;
    return tsc_stats_betai(0.5 * df, 0.5, df / (df + t * t));
}

void tsc_stats_cumsum(const double *x, double *out, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) {
        s += x[i];
        out[i] = s;
    }
}

/* Shared by the float and double comparisons: accumulates one pair. */
typedef struct {
    tsc_moments_t d;        /* lp - hp */
    double sum_abs, sum_rel, sum_ulp, sum_abs_ulp, max_rel, max_abs_ulp;
    int64_t n_rel;
} cmp_acc_t;

static void cmp_init(cmp_acc_t *c) {
    tsc_moments_init(&c->d);
    c->sum_abs = c->sum_rel = c->sum_ulp = c->sum_abs_ulp = c->max_rel = c->max_abs_ulp = 0.0;
    c->n_rel = 0;
}

static void cmp_add(cmp_acc_t *c, double lp, double hp, tsc_format_t fmt) {
    if (!isfinite(lp) || !isfinite(hp)) {
        tsc_moments_add(&c->d, NAN); /* counted as non-finite with its index */
        return;
    }
    double d = lp - hp, ad = fabs(d);
    tsc_moments_add(&c->d, d);
    c->sum_abs += ad;
    if (hp != 0.0) {
        double r = ad / fabs(hp);
        c->sum_rel += r;
        c->n_rel++;
        if (r > c->max_rel) c->max_rel = r;
    }
    double u = d / tsc_stats_ulp(hp, fmt);
    c->sum_ulp += u;
    c->sum_abs_ulp += fabs(u);
    if (fabs(u) > c->max_abs_ulp) c->max_abs_ulp = fabs(u);
}

static void cmp_finish(const cmp_acc_t *c, tsc_err_summary_t *o) {
    const tsc_moments_t *m = &c->d;
    double n = m->n ? (double)m->n : 1.0;
    o->n = m->n;
    o->n_nonfinite = m->n_nonfinite;
    o->first_nonfinite = m->first_nonfinite;
    o->max_abs = m->max_abs;
    o->argmax_abs = m->argmax_abs;
    o->mean_abs = c->sum_abs / n;
    o->max_rel = c->max_rel;
    o->mean_rel = c->n_rel ? c->sum_rel / (double)c->n_rel : 0.0;
    o->signed_mean = m->n ? m->mean : 0.0;
    o->mean_ulp = c->sum_ulp / n;
    o->mean_abs_ulp = c->sum_abs_ulp / n;
    o->max_abs_ulp = c->max_abs_ulp;
    o->n_pos = m->n_pos;
    o->n_neg = m->n_neg;
    o->sign_consistency = tsc_moments_sign_consistency(m);
    o->tstat = tsc_moments_tstat(m);
    o->p_sign = tsc_stats_sign_test_p(m->n_pos, m->n_neg);
}

/* The comparison of lp with hp, given as float arrays (lpf, hpf) or, when lpd is not NULL, as
 * double arrays (lpd, hpd); floats widen to double exactly. */
static void error_compare(const float *lpf, const float *hpf, const double *lpd, const double *hpd, size_t n,
                          tsc_format_t fmt, tsc_err_summary_t *out) {
    cmp_acc_t c;
    cmp_init(&c);
    for (size_t i = 0; i < n; i++) cmp_add(&c, lpd ? lpd[i] : lpf[i], lpd ? hpd[i] : hpf[i], fmt);
    cmp_finish(&c, out);
}

void tsc_stats_error_compare(const float *lp, const float *hp, size_t n, tsc_format_t fmt,
                             tsc_err_summary_t *out) {
    error_compare(lp, hp, NULL, NULL, n, fmt, out);
}

void tsc_stats_error_compare_d(const double *lp, const double *hp, size_t n, tsc_format_t fmt,
                               tsc_err_summary_t *out) {
    error_compare(NULL, NULL, lp, hp, n, fmt, out);
}

int tsc_stats_flag(double p, int64_t n_tests, double mean_ulp, int64_t n_nonzero,
                   const tsc_flag_rule_t *rule) {
    if (!rule) rule = &TSC_FLAG_RULE_DEFAULT;
    if (n_nonzero < rule->min_n || !(fabs(mean_ulp) >= rule->min_ulp)) return 0;
    double ntests = n_tests > 0 ? (double)n_tests : 1.0;
    return p * ntests < rule->alpha;
}
