/* accum.c: the accumulation model (tsc_accum.h).
 *
 * Why an exact multi-word integer: the trace must report the rounding bit and the sticky bits
 * of the true sum, and directed/stochastic rounding of a + b cannot be derived from the double
 * sum once the operands are more than 2^28 apart (the double sum has already dropped the small
 * operand). The exact sum of two doubles spans at most 2099 bits, held here in 36 words with
 * bit k worth 2^(k + BIG_BASE). The untraced nearest-even path for formats of at most 24
 * significant bits uses the double sum instead: rounding twice (to double, then to the format)
 * is innocuous for addition when 53 >= 2p + 2 (Figueroa 1995), and the tests check both paths
 * agree.
 */
#include "tsc_accum.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG_WORDS 36
#define BIG_BASE (-1140) /* bit 0 is 2^-1140: 66 bits of room below the smallest subnormal */

typedef struct { uint64_t w[BIG_WORDS]; } big_t;

static inline uint64_t dbits(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }

/* 2^q for q in [-1074, 1023], exactly. */
static inline double pow2(int q) {
    uint64_t u = q >= -1022 ? (uint64_t)(q + 1023) << 52 : 1ULL << (q + 1074);
    double x;
    memcpy(&x, &u, 8);
    return x;
}

/* Exponent of the leading bit of a finite non-zero double; TSC_ACCUM_EXP_ZERO for 0. */
static int lead_exp(double x) {
    uint64_t a = dbits(x) & 0x7fffffffffffffffULL;
    if (a == 0) return TSC_ACCUM_EXP_ZERO;
    int E = (int)(a >> 52);
    if (E == 0) return 63 - __builtin_clzll(a) - 1074;
    return E - 1023;
}

static void big_set(big_t *x, double v) {
    memset(x, 0, sizeof *x);
    uint64_t a = dbits(v) & 0x7fffffffffffffffULL;
    if (a == 0) return;
    int E = (int)(a >> 52);
    uint64_t m = E ? (a & 0x000fffffffffffffULL) | 0x0010000000000000ULL : a;
    int lx = E ? E - 1075 : -1074;
    int pos = lx - BIG_BASE, wi = pos / 64, sh = pos % 64;
    x->w[wi] |= m << sh;
    if (sh && wi + 1 < BIG_WORDS) x->w[wi + 1] |= m >> (64 - sh);
}

static int big_cmp(const big_t *a, const big_t *b) {
    for (int i = BIG_WORDS - 1; i >= 0; i--)
        if (a->w[i] != b->w[i]) return a->w[i] > b->w[i] ? 1 : -1;
    return 0;
}

static void big_add(big_t *r, const big_t *a, const big_t *b) {
    uint64_t c = 0;
    for (int i = 0; i < BIG_WORDS; i++) {
        uint64_t s = a->w[i] + c;
        c = s < c;
        r->w[i] = s + b->w[i];
        c += r->w[i] < s;
    }
}

static void big_sub(big_t *r, const big_t *a, const big_t *b) { /* a >= b */
    uint64_t br = 0;
    for (int i = 0; i < BIG_WORDS; i++) {
        uint64_t d = a->w[i] - b->w[i];
        uint64_t br2 = a->w[i] < b->w[i];
        r->w[i] = d - br;
        br = br2 | (d < br);
    }
}

static int big_lead(const big_t *x) {
    for (int i = BIG_WORDS - 1; i >= 0; i--)
        if (x->w[i]) return i * 64 + 63 - __builtin_clzll(x->w[i]);
    return -1;
}

static int big_lowest(const big_t *x) {
    for (int i = 0; i < BIG_WORDS; i++)
        if (x->w[i]) return i * 64 + __builtin_ctzll(x->w[i]);
    return -1;
}

static int big_bit(const big_t *x, int k) {
    if (k < 0 || k >= 64 * BIG_WORDS) return 0;
    return (int)((x->w[k / 64] >> (k % 64)) & 1);
}

/* Bits [lo, lo + n) as an integer (n <= 64); bits below index 0 read as 0. */
static uint64_t big_bits(const big_t *x, int lo, int n) {
    uint64_t r = 0;
    for (int i = n - 1; i >= 0; i--) r = (r << 1) | (uint64_t)big_bit(x, lo + i);
    return r;
}

static double fmt_max(tsc_format_t fmt) { return tsc_round(DBL_MAX, fmt, TSC_ROUND_TOWARD_ZERO, NULL); }

/* Rounds the exact value (-1)^neg * X into fmt; fills the rounding part of st. */
static double round_big(const big_t *X, int neg, tsc_format_t fmt, tsc_round_t mode, uint64_t draw,
                        tsc_accum_step_t *st) {
    int p = tsc_format_mant_bits(fmt);
    int emin = 2 - (1 << (tsc_format_exp_bits(fmt) - 1)); /* 1 - bias: -1022, -126, -14, -6 */
    int lead = big_lead(X);
    st->kept = 0;
    st->kept_nbits = 0;
    st->round_bit = st->sticky = 0;
    st->sticky_bits = 0;
    st->sticky_shown = st->sticky_nbits = 0;
    if (lead < 0) {
        st->sum_exp = TSC_ACCUM_EXP_ZERO;
        st->ulp_exp = emin - p;
        st->dir = TSC_ACCUM_EXACT;
        return neg ? -0.0 : 0.0;
    }
    int e = lead + BIG_BASE;
    int q = (e > emin ? e : emin) - p;
    int kpos = q - BIG_BASE;
    st->sum_exp = e;
    st->ulp_exp = q;
    st->kept_nbits = lead >= kpos ? lead - kpos + 1 : 0;
    st->kept = st->kept_nbits ? big_bits(X, kpos, st->kept_nbits) : 0;
    st->round_bit = big_bit(X, kpos - 1);
    int low = big_lowest(X);
    st->sticky = low < kpos - 1;
    st->sticky_nbits = st->sticky ? kpos - 1 - low : 0;
    st->sticky_shown = st->sticky_nbits < 64 ? st->sticky_nbits : 64;
    st->sticky_bits = st->sticky_shown ? big_bits(X, kpos - 1 - st->sticky_shown, st->sticky_shown) : 0;
    uint64_t up = 0;
    if (mode == TSC_ROUND_NEAREST_EVEN)
        up = st->round_bit && (st->sticky || (st->kept & 1));
    else if (mode == TSC_ROUND_STOCHASTIC)
        up = draw < big_bits(X, kpos - 64, 64); /* the discarded fraction, to 2^-64 */
    double r = (double)(st->kept + up) * pow2(q);
    st->dir = !st->round_bit && !st->sticky ? TSC_ACCUM_EXACT : up ? TSC_ACCUM_AWAY : TSC_ACCUM_TOWARD;
    double mx = fmt_max(fmt);
    if (r > mx) { /* overflow: the rules of tsc_formats.h */
        if (mode == TSC_ROUND_TOWARD_ZERO) r = mx;
        else r = fmt == TSC_FMT_FP8_E4M3 ? NAN : INFINITY;
    }
    return neg ? -r : r;
}

static void fill_result(tsc_accum_step_t *st, double r) {
    st->result = r;
    st->result_bits = tsc_encode(r, st->fmt, TSC_ROUND_NEAREST_EVEN, NULL);
    if (isfinite(r)) {
        st->error = (r - st->exact_hi) - st->exact_lo;
        st->error_ulps = st->error / pow2(st->ulp_exp);
    } else {
        st->error = st->error_ulps = isnan(r) ? NAN : r;
    }
}

static void nonfinite_step(tsc_accum_step_t *st, double r) {
    st->exact_hi = st->a + st->b;
    st->exact_lo = 0;
    st->sum_exp = st->ulp_exp = 0;
    st->kept = 0;
    st->kept_nbits = st->round_bit = st->sticky = st->sticky_shown = st->sticky_nbits = 0;
    st->sticky_bits = 0;
    st->dir = TSC_ACCUM_EXACT;
    st->result = r;
    st->result_bits = tsc_encode(r, st->fmt, TSC_ROUND_NEAREST_EVEN, NULL);
    st->error = st->error_ulps = NAN;
}

double tsc_accum_add2(double a, double b, tsc_format_t fmt, tsc_round_t mode, tsc_rng_t *rng,
                      tsc_accum_step_t *step) {
    uint64_t draw = 0;
    if (mode == TSC_ROUND_STOCHASTIC) {
        if (rng) draw = tsc_rng_next(rng);
        else mode = TSC_ROUND_NEAREST_EVEN; /* as tsc_round */
    }
    tsc_accum_step_t local;
    tsc_accum_step_t *st = step ? step : &local;
    st->fmt = fmt;
    st->mode = mode;
    st->a = a;
    st->b = b;
    st->a_bits = tsc_encode(a, fmt, TSC_ROUND_NEAREST_EVEN, NULL);
    st->b_bits = tsc_encode(b, fmt, TSC_ROUND_NEAREST_EVEN, NULL);
    st->a_exp = lead_exp(a);
    st->b_exp = lead_exp(b);
    st->align_shift = st->carry_shift = 0;
    if (!isfinite(a) || !isfinite(b)) {
        double r = tsc_round(a + b, fmt, TSC_ROUND_NEAREST_EVEN, NULL);
        nonfinite_step(st, r);
        return r;
    }
    /* TwoSum (Knuth): hi + lo == a + b exactly, barring overflow of hi. */
    double hi = a + b, bb = hi - a, lo = (a - (hi - bb)) + (b - bb);
    st->exact_hi = hi;
    st->exact_lo = isfinite(hi) ? lo : 0;
    big_t A, B, S;
    big_set(&A, a);
    big_set(&B, b);
    int na = signbit(a) != 0, nb = signbit(b) != 0, neg;
    if (na == nb) {
        big_add(&S, &A, &B);
        neg = na;
    } else if (big_cmp(&A, &B) >= 0) {
        big_sub(&S, &A, &B);
        neg = na;
    } else {
        big_sub(&S, &B, &A);
        neg = nb;
    }
    int zero = big_lead(&S) < 0;
    if (zero) neg = na && nb; /* x + (-x) = +0; -0 + -0 = -0 (IEEE 754 §6.3) */
    double r = round_big(&S, neg, fmt, mode, draw, st);
    if (st->a_exp != TSC_ACCUM_EXP_ZERO && st->b_exp != TSC_ACCUM_EXP_ZERO) {
        st->align_shift = abs(st->a_exp - st->b_exp);
        if (!zero) st->carry_shift = st->sum_exp - (st->a_exp > st->b_exp ? st->a_exp : st->b_exp);
    }
    fill_result(st, r);
    return r;
}

double tsc_accum_round(double x, tsc_format_t fmt, tsc_round_t mode, tsc_rng_t *rng, tsc_accum_step_t *step) {
    uint64_t draw = 0;
    if (mode == TSC_ROUND_STOCHASTIC) {
        if (rng) draw = tsc_rng_next(rng);
        else mode = TSC_ROUND_NEAREST_EVEN;
    }
    tsc_accum_step_t local;
    tsc_accum_step_t *st = step ? step : &local;
    st->fmt = fmt;
    st->mode = mode;
    st->a = x;
    st->b = 0;
    st->a_bits = st->b_bits = 0; /* a_bits becomes the result's bits below */
    st->a_exp = lead_exp(x);
    st->b_exp = TSC_ACCUM_EXP_ZERO;
    st->align_shift = st->carry_shift = 0;
    if (!isfinite(x)) {
        double r = tsc_round(x, fmt, TSC_ROUND_NEAREST_EVEN, NULL);
        nonfinite_step(st, r);
        return r;
    }
    st->exact_hi = x;
    st->exact_lo = 0;
    big_t X;
    big_set(&X, x);
    double r = round_big(&X, signbit(x) != 0, fmt, mode, draw, st);
    fill_result(st, r);
    st->a_bits = st->result_bits;
    return r;
}

tsc_status_t tsc_accum_init(tsc_accum_t *acc, tsc_format_t fmt, tsc_round_t mode, tsc_rng_t *rng) {
    if (!acc) return tsc_error_set(TSC_ERR_ARG, "tsc_accum_init: NULL accumulator");
    if ((unsigned)fmt >= (unsigned)TSC_FMT_COUNT)
        return tsc_error_set(TSC_ERR_ARG, "tsc_accum_init: unknown format %d", (int)fmt);
    if ((unsigned)mode > (unsigned)TSC_ROUND_STOCHASTIC)
        return tsc_error_set(TSC_ERR_ARG, "tsc_accum_init: unknown rounding mode %d", (int)mode);
    memset(acc, 0, sizeof *acc);
    acc->fmt = fmt;
    acc->mode = mode;
    acc->rng = rng;
    return TSC_OK;
}

void tsc_accum_set_trace(tsc_accum_t *acc, tsc_accum_step_t *buf, size_t cap) {
    acc->trace = cap ? buf : NULL;
    acc->trace_cap = buf ? cap : 0;
    acc->trace_len = 0;
}

double tsc_accum_add(tsc_accum_t *acc, double x) {
    double xr = tsc_round(x, acc->fmt, acc->mode, acc->rng);
    tsc_accum_step_t *st = acc->trace_len < acc->trace_cap ? &acc->trace[acc->trace_len++] : NULL;
    if (!st && acc->mode == TSC_ROUND_NEAREST_EVEN && acc->fmt != TSC_FMT_FP64)
        acc->sum = tsc_round(acc->sum + xr, acc->fmt, TSC_ROUND_NEAREST_EVEN, NULL); /* innocuous double rounding */
    else
        acc->sum = tsc_accum_add2(acc->sum, xr, acc->fmt, acc->mode, acc->rng, st);
    acc->n++;
    return acc->sum;
}

double tsc_accum_sum(const double *x, size_t n, tsc_format_t fmt, tsc_round_t mode, tsc_rng_t *rng,
                     tsc_accum_step_t *trace) {
    tsc_accum_t acc;
    if (tsc_accum_init(&acc, fmt, mode, rng) != TSC_OK) return NAN;
    tsc_accum_set_trace(&acc, trace, trace ? n : 0);
    for (size_t i = 0; i < n; i++) tsc_accum_add(&acc, x[i]);
    return acc.sum;
}

/* Appends the low n bits of v (MSB first) to buf at *pos, bounded by cap. */
static void put_bits(char *buf, size_t cap, size_t *pos, uint64_t v, int n) {
    for (int i = n - 1; i >= 0; i--)
        if (*pos + 1 < cap) buf[(*pos)++] = (char)('0' + ((v >> i) & 1));
}

static void put_str(char *buf, size_t cap, size_t *pos, const char *s) {
    while (*s && *pos + 1 < cap) buf[(*pos)++] = *s++;
}

char *tsc_accum_bits_str(double x, tsc_format_t fmt, int split, char *buf, size_t n) {
    if (!buf || n == 0) return buf;
    size_t pos = 0;
    if ((unsigned)fmt >= (unsigned)TSC_FMT_COUNT) {
        buf[0] = '\0';
        return buf;
    }
    uint64_t bits = tsc_encode(x, fmt, TSC_ROUND_NEAREST_EVEN, NULL);
    int p = tsc_format_mant_bits(fmt), eb = tsc_format_exp_bits(fmt);
    bits >>= 8 * (int)tsc_format_size(fmt) - 1 - eb - p; /* tf32, e8m*: the FP32 container's zero low bits */
    uint64_t mant = bits & ((1ULL << p) - 1);
    put_bits(buf, n, &pos, bits >> (p + eb), 1);
    put_str(buf, n, &pos, " ");
    put_bits(buf, n, &pos, (bits >> p) & ((1ULL << eb) - 1), eb);
    put_str(buf, n, &pos, " ");
    if (split < 0 || split >= p) {
        put_bits(buf, n, &pos, mant, p);
    } else {
        put_bits(buf, n, &pos, mant >> (p - split), split);
        put_str(buf, n, &pos, "|");
        put_bits(buf, n, &pos, mant >> (p - split - 1), 1);
        put_str(buf, n, &pos, "|");
        put_bits(buf, n, &pos, mant, p - split - 1);
    }
    buf[pos] = '\0';
    return buf;
}

char *tsc_accum_step_bits_str(const tsc_accum_step_t *st, char *buf, size_t n) {
    if (!buf || n == 0) return buf;
    size_t pos = 0;
    if (st->kept_nbits > 0) put_bits(buf, n, &pos, st->kept, st->kept_nbits);
    else put_str(buf, n, &pos, "0");
    put_str(buf, n, &pos, "|");
    put_bits(buf, n, &pos, (uint64_t)st->round_bit, 1);
    put_str(buf, n, &pos, "|");
    put_bits(buf, n, &pos, st->sticky_bits, st->sticky_shown);
    if (st->sticky_nbits > st->sticky_shown) put_str(buf, n, &pos, "...");
    buf[pos] = '\0';
    return buf;
}

const char *tsc_accum_dir_str(tsc_accum_dir_t dir) {
    switch (dir) {
    case TSC_ACCUM_EXACT: return "exact";
    case TSC_ACCUM_AWAY: return "up (away from zero)";
    case TSC_ACCUM_TOWARD: return "down (toward zero)";
    }
    return "?";
}
