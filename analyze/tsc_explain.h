/* tsc_explain.h: the bit-level explanation of rounding events (`tilescope explain`), as results
 * the caller formats.
 *
 * explain add: A and B rounded into the accumulator format, added exactly, the sum rounded into
 * the accumulator format, then (optionally) to an output format; each rounding is a
 * tsc_accum_step_t (operand exponents, alignment, significand overflow, kept bits | rounding bit |
 * sticky bits, direction, exact error).
 *
 *   tsc_explain_add_t e;
 *   tsc_explain_add(-2.4071154594421387, -2.296875, TSC_FMT_FP32, 1, TSC_FMT_BF16,
 *                   TSC_ROUND_NEAREST_EVEN, 0, &e);   // e.round_to.result == -4.71875
 *
 * explain dump: the accumulation of Ō[T, I] = Σ_j P̄[T, j] V[j, I] of one head of a dump replayed
 * under a policy addition by addition with the accumulation model, checked against the attention
 * reference (kernels/tsc_attention.h) after every key tile, bit for bit; the rounding events
 * sorted by |error| and the keys where P̄ = 1.
 *
 * The fields are for C callers; bindings should read the JSON of tsc_explain_add_json and
 * tsc_explain_dump_json, whose keys are the documented surface:
 *   add:  command ("explain add"), acc, to (null without), round, seed,
 *         a / b {input, value, bits, exp}, align_shift, carry_shift, significand_overflow,
 *         sum_bits, add {STEP}, round_to {STEP} (only with an output format), nonfinite_numbers;
 *         STEP = {format, round, exact, exact_lo, sum_exp, ulp_exp, bits, kept_bits, kept_nbits,
 *         round_bit, sticky, sticky_nbits, result, result_bits, direction, error, error_ulps}.
 *   dump: command ("explain dump"), dump, step, layer, head, kv_head, batch, row, feature, policy,
 *         fused, stochastic_replayed_as_nearest, tiles, replay_matches_reference, mismatch_tile
 *         (-1 when none), o_matches_reference, obar, l, o, o_reference, o_dump (null without o),
 *         pbar_one_keys, events, inexact, up, down, error_sum, error_sum_at_pbar_one,
 *         top [{key (-1 for per-tile events), tile, kind, pbar, v, before, exact, result, format,
 *         error, error_ulps, carry_shift, bits, direction}], note (null or why the policy was
 *         replaced), nonfinite_numbers.
 * Numbers are exact (17 significant digits); NaN/Inf are written as null and listed under
 * nonfinite_numbers (util/tsc_json.h). */
#ifndef TSC_EXPLAIN_H
#define TSC_EXPLAIN_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_accum.h"
#include "tsc_formats.h"
#include "tsc_json.h"
#include "tsc_policy.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ explain add */

typedef struct {
    tsc_format_t acc, to;
    int have_to;              /* 0: the sum is not rounded to an output format */
    tsc_round_t mode;
    uint64_t seed;
    double input[2];          /* A and B as given */
    double a, b;              /* A and B rounded (nearest-even) into acc */
    tsc_accum_step_t add;     /* a + b rounded into acc */
    tsc_accum_step_t round_to;/* add.result rounded into to (when have_to) */
} tsc_explain_add_t;

/* TSC_ERR_NONFINITE when A or B is not finite in acc (out->a/b tell which); TSC_ERR_ARG for a
 * bad argument. */
TSC_API tsc_status_t tsc_explain_add(double a, double b, tsc_format_t acc, int have_to, tsc_format_t to,
                                     tsc_round_t mode, uint64_t seed, tsc_explain_add_t *out);
TSC_API void tsc_explain_add_json(const tsc_explain_add_t *e, tsc_json_t *j);

/* Names and words shared by the text and the JSON. */
TSC_API const char *tsc_explain_round_name(tsc_round_t mode);  /* "nearest-even", ... */
TSC_API const char *tsc_explain_dir_key(tsc_accum_dir_t dir);  /* "exact", "away", "toward" */
/* Why a rounding went the way it did, in words ("rounding bit 1, sticky bits zero: ..."). */
TSC_API const char *tsc_explain_why(const tsc_accum_step_t *st);

/* ------------------------------------------------------------------ explain dump */

typedef struct {
    const char *dump_path;
    long long step;             /* -1: the dump's first step */
    int layer, head, row, feature, batch;
    const tsc_policy_t *policy; /* NULL: the dump's own 'policy' attribute, else bf16-fa2 */
    int top;                    /* events kept in the top list (>= 1) */
} tsc_explain_dump_opts_t;

typedef struct {
    int key, tile;              /* key index (-1 for per-tile events), key tile */
    const char *kind;           /* "fma", "acc", "pv", "rescale", "oacc", "o" */
    double pbar, v;             /* the product's factors (fma / acc events; NaN otherwise) */
    tsc_accum_step_t st;
} tsc_explain_event_t;

typedef struct {
    char *dump_path;
    long long step;
    int layer, head, kv_head, batch, row, feature;
    tsc_policy_t policy;
    char policy_name[TSC_POLICY_STR_MAX];
    char note[300];             /* "" or, when the dump records no usable policy, where it came from (tsc_dump_policy) */
    int stochastic;             /* a stage rounds stochastically: replayed as nearest-even */
    int tiles;                  /* key tiles the row visits */
    int mismatch_tile;          /* first tile where the model's Ō differs from the reference, -1 none */
    double mismatch_model, mismatch_ref;
    int o_match;                /* the model's O equals the reference's */
    double obar, l, o, o_ref;   /* the model's Ō, ℓ and O = Ō/ℓ; the reference's O */
    int have_o;
    double o_dump;              /* the dump's o at [row, feature] (when have_o) */
    int n_ones;
    int *ones;                  /* [n_ones] keys where P̄ = 1 */
    size_t n_events, n_inexact, n_up, n_down;
    double error_sum;           /* Σ signed error over the chain (the final division excluded) */
    double error_sum_ones;      /* Σ signed error of events at P̄ = 1 */
    tsc_explain_event_t *events;/* [n_events], sorted by |error| descending */
    size_t n_top;               /* the first n_top events: inexact, at most opts.top */
} tsc_explain_dump_t;

/* Errors: the dump cannot be read (its status), TSC_ERR_MISSING for an absent step,
 * TSC_ERR_ARG for indices out of range, TSC_ERR_NOMEM. A replay that differs from the
 * reference is a result (mismatch_tile, o_match), not an error. */
TSC_API tsc_status_t tsc_explain_dump(const tsc_explain_dump_opts_t *o, tsc_explain_dump_t **out);
TSC_API void tsc_explain_dump_json(const tsc_explain_dump_t *e, tsc_json_t *j);
TSC_API void tsc_explain_dump_free(tsc_explain_dump_t *e);

#ifdef __cplusplus
}
#endif
#endif
