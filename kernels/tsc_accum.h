/* tsc_accum.h: the accumulation model: additions in an explicit order in a chosen number
 * format, each one optionally traced down to the bits (docs/MECHANISM.md §5).
 *
 * Every addition is computed exactly (a multi-word integer holds the exact sum of any two
 * doubles) and then rounded into the accumulator format, so the trace can say which bits were
 * kept, what the rounding bit and the sticky bits were, which way the result moved and by how
 * much. Rounding the final sum to an output format (FP32 sum -> BF16 in the paper) gives the
 * same kind of record.
 *
 *   tsc_accum_step_t st;
 *   tsc_accum_add2(-2.4071154594421387, -2.296875, TSC_FMT_FP32, TSC_ROUND_NEAREST_EVEN, NULL, &st);
 *   tsc_accum_round(st.result, TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL, &st);  // -4.71875
 *   char buf[96];
 *   tsc_accum_bits_str(st.exact_hi, TSC_FMT_FP32, 7, buf, sizeof buf);  // "1 10000001 0010110|1|0000..."
 *   printf("%s -> %.17g (error %.17g)\n", buf, st.result, st.error);
 *
 * A running sum (tsc_accum_t) adds values one by one in the order given, optionally writing one
 * tsc_accum_step_t per addition into a caller-owned buffer.
 */
#ifndef TSC_ACCUM_H
#define TSC_ACCUM_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_formats.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exponent reported for a zero operand or sum (no leading bit). */
#define TSC_ACCUM_EXP_ZERO (-100000)

typedef enum {
    TSC_ACCUM_EXACT = 0, /* nothing was discarded */
    TSC_ACCUM_AWAY,      /* rounded up in magnitude (away from zero) */
    TSC_ACCUM_TOWARD     /* rounded down in magnitude (toward zero: truncated) */
} tsc_accum_dir_t;

/* One rounding event: an addition a + b (or, for tsc_accum_round, rounding a to fmt with b = 0). */
typedef struct {
    tsc_format_t fmt;       /* format the result is rounded into */
    tsc_round_t mode;
    double a, b;            /* operands (values; a = running sum before the addition) */
    uint64_t a_bits, b_bits;/* operands' bit patterns in fmt (tsc_accum_round: the result's bits, b 0) */
    int a_exp, b_exp;       /* exponents of the operands' leading bits (TSC_ACCUM_EXP_ZERO for 0) */
    int align_shift;        /* |a_exp - b_exp|: places the smaller operand's significand moves right */
    int carry_shift;        /* sum_exp - max(a_exp, b_exp): +1 the significand overflowed (the sum is
                               shifted right one place), 0 none, < 0 cancellation (leading bits lost) */
    double exact_hi, exact_lo; /* the exact sum is exact_hi + exact_lo (lo = 0 when it fits a double,
                               always for two FP32 values within 2^28 of each other) */
    int sum_exp;            /* exponent of the exact sum's leading bit */
    int ulp_exp;            /* exponent of the result format's ULP at the sum: kept bits end there */
    uint64_t kept;          /* the kept significand (integer, kept * 2^ulp_exp = truncated |sum|) */
    int kept_nbits;         /* its width: p + 1 for normal results, fewer for subnormal/underflow */
    int round_bit;          /* the first discarded bit */
    int sticky;             /* 1 when any bit below the rounding bit is non-zero */
    uint64_t sticky_bits;   /* the first sticky_shown bits below the rounding bit, MSB first */
    int sticky_shown;       /* how many of them are in sticky_bits (<= 64) */
    int sticky_nbits;       /* bits from below the rounding bit down to the last non-zero one */
    double result;          /* the rounded sum (value in fmt; Inf/NaN on overflow per tsc_formats.h) */
    uint64_t result_bits;
    tsc_accum_dir_t dir;
    double error;           /* result - exact sum, signed (exact whenever exact_lo == 0) */
    double error_ulps;      /* error in units of the result's ULP (2^ulp_exp) */
} tsc_accum_step_t;

/* Adds a + b exactly and rounds into fmt with mode (rng: stochastic only, may be NULL otherwise;
 * one draw per call in stochastic mode, as tsc_round). a and b are taken as given (exact
 * doubles); callers that model an accumulator pass values already in fmt. step may be NULL.
 * Returns the rounded sum (equal to tsc_round(a + b computed exactly, fmt, mode)). */
TSC_API double tsc_accum_add2(double a, double b, tsc_format_t fmt, tsc_round_t mode, tsc_rng_t *rng,
                      tsc_accum_step_t *step);

/* Rounds x (exact) into fmt with a trace in step (b = 0, align_shift = carry_shift = 0).
 * Returns the rounded value (tsc_round(x, fmt, mode, rng)). */
TSC_API double tsc_accum_round(double x, tsc_format_t fmt, tsc_round_t mode, tsc_rng_t *rng,
                       tsc_accum_step_t *step);

/* A running sum in fmt. Starts at +0. The trace buffer is optional and owned by the caller. */
typedef struct {
    tsc_format_t fmt;
    tsc_round_t mode;
    tsc_rng_t *rng;             /* stochastic mode only; not owned */
    double sum;                 /* current value, in fmt */
    size_t n;                   /* additions so far */
    tsc_accum_step_t *trace;    /* [trace_cap], may be NULL */
    size_t trace_cap, trace_len;/* records written: min(n, trace_cap) */
} tsc_accum_t;

/* TSC_ERR_ARG for a NULL acc or an unknown fmt/mode (acc untouched then). */
TSC_API tsc_status_t tsc_accum_init(tsc_accum_t *acc, tsc_format_t fmt, tsc_round_t mode, tsc_rng_t *rng);
/* Records the next additions into buf[0..cap) (cap 0 / NULL: no trace). */
TSC_API void tsc_accum_set_trace(tsc_accum_t *acc, tsc_accum_step_t *buf, size_t cap);
/* sum <- round_fmt(sum + round_fmt(x)): the addend is first rounded into fmt (a no-op for
 * values already there, such as products of two BF16 numbers in FP32). Returns the new sum. */
TSC_API double tsc_accum_add(tsc_accum_t *acc, double x);
/* Sums x[0..n) in index order from +0 into fmt; trace (n records) may be NULL. Returns the sum. */
TSC_API double tsc_accum_sum(const double *x, size_t n, tsc_format_t fmt, tsc_round_t mode, tsc_rng_t *rng,
                     tsc_accum_step_t *trace); /* x: [n] float64; trace: [n] or NULL */

/* x's bits in fmt's layout (x is rounded to fmt nearest-even first if it is not exact there):
 * "s eeeeeeee mmmmmmm|r|sss..." with the mantissa split after `split` bits, then the rounding
 * bit, then the rest (split < 0 or >= mantissa bits: no split, "s eeeeeeee mmm..."). Writes at
 * most n bytes including the NUL; returns buf. */
TSC_API char *tsc_accum_bits_str(double x, tsc_format_t fmt, int split, char *buf, size_t n);

/* The exact sum of a step relative to its result format, as significand bits:
 * "kept bits|r|sticky bits" (e.g. "100101101000011100010111|0|" for an exact FP32 sum, or
 * "10010110|1|000011100010111" for the paper's sum rounded to BF16); sticky bits beyond 64
 * end in "...". Returns buf. */
TSC_API char *tsc_accum_step_bits_str(const tsc_accum_step_t *step, char *buf, size_t n);

/* "exact", "up (away from zero)", "down (toward zero)". */
TSC_API const char *tsc_accum_dir_str(tsc_accum_dir_t dir);

#ifdef __cplusplus
}
#endif
#endif
