/* tsc_census.h: the rounding census of the P-bar V accumulation (docs/MECHANISM.md §5).
 *
 * For one row of attention, each feature i sums the products a_j v[j, i] over the visible keys j
 * in FP32, one fused multiply-add per key in key order (the sum restarts from 0 at each key tile
 * of block_k keys: the tile's P-bar V product), skipping a_j = 0. An addition s + a_j v[j, i] is
 * an *event* when
 *   - the significand overflowed: the exponent of the sum is above both operands' (s and the exact
 *     product a_j v[j, i], the FMA's operands; tsc_accum's carry_shift = +1), and
 *   - rounding that FP32 sum to the output format has rounding bit 1 and non-zero sticky bits
 *     (tsc_accum_round's round_bit and sticky) and a finite result (an overflow of the output
 *     format is not counted: it shows as a non-finite O),
 * the mechanism of the paper's worked example. The error of an event is R(sum) - sum (R: round to
 * the output format, nearest-even), divided by the row's softmax denominator l (O units).
 * Every event is exactly what tsc_accum_add2 + tsc_accum_round would report for that addition
 * (tests/analyze/test_census.c checks this bit for bit): the row is scanned vectorised over
 * features, and only the rare candidate carries go through tsc_accum_add2 and tsc_accum_round.
 *
 *   tsc_census_t c = {0};
 *   uint8_t evt[64];
 *   tsc_census_row(pbar_row, vr, t + 1, 64, 64, TSC_FMT_BF16, l, evt, &c);
 */
#ifndef TSC_CENSUS_H
#define TSC_CENSUS_H

#include "tsc_export.h"

#include <stdint.h>

#include "tsc_formats.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t additions;              /* additions examined (a_j != 0) */
    int64_t events_neg, events_pos; /* events, by the sign of the sum */
    double err_neg, err_pos;        /* summed event errors / l */
} tsc_census_t;

/* Adds one row's census to *acc. a [nv] the row's P-bar (values taken as FP32), v [nv, D] row-major
 * (FP32, already in lp's V format), block_k >= 1, l the row's denominator (<= 0: errors not
 * divided). evt [D] (may be NULL): 1 where feature i had at least one event, else 0. An output
 * format at least as wide as FP32 has no events (only additions are counted). */
TSC_API void tsc_census_row(const double *a, const float *v, int nv, int D, int block_k, tsc_format_t out_fmt, double l,
                    uint8_t *evt, tsc_census_t *acc);

#ifdef __cplusplus
}
#endif
#endif
