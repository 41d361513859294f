/* tsc_kernels.h: the per-kernel bias table (`tilescope kernels`). One set of captured inputs (q, k, v and,
 * where the dump holds it, dO) replayed under every preset, each compared with an FP64 replay of the same
 * inputs, so the rows differ only in how each kernel rounds:
 *
 *   tsc_kernels_opts_t o; tsc_kernels_opts_init(&o);
 *   o.dump_path = "run.h5";                 // policies NULL: every preset but fp64, each also +stable
 *   tsc_kernels_t *k;
 *   if (tsc_kernels_run(&o, &k) != TSC_OK) puts(tsc_error_last());
 *   tsc_json_t j; tsc_json_init(&j); tsc_kernels_json(k, &j); tsc_kernels_free(k);
 *
 * Per kernel (a row), over every selected (step, layer, batch row, query head) and every query row t:
 *   O bias     e_t = the mean over features d of (O_d − R_F(O64_d)) / ulp_F(O64_d), F the policy's O format
 *              and R_F rounding to it (nearest even): the error a kernel adds to the rounding of its output,
 *              so a kernel that rounds only its output scores 0 (a repeated value rounded the same way in
 *              every row would otherwise read as a bias),
 *              over the features with |O64_d| >= 2^-10 · max_d |O64_d| (a near-zero reference would turn an
 *              ordinary rounding into thousands of ULPs); the row means e_t are the samples: `mean`
 *              is their mean, `t` their t-statistic (mean / (sd / √n)), `n` the rows;
 *   δ bias     the rows' (δ_t − δ64_t) / ulp_F(Σ_d |dO_d · O64_d|): the error of δ in ULPs of the O format
 *              at the size of δ's terms (δ itself may cancel to near 0); δ = rowsum(dO ∘ O) as the policy
 *              forms it (its delta source), δ64 from the FP64 replay; absent without dO;
 *   worst feature  the (layer, head, feature) whose errors over the rows have the largest |t|: the same
 *              per-element ULPs, its mean and t over the rows (at least 8), where the paper's bias lives
 *              (a few features of a few heads; the row means above average it away);
 *   ties       `tied_rows`: rows whose scores have >= 2 keys equal to the row max (the policy's S);
 *              `pbar_one_rows`: of those, the rows where >= 2 of the tied keys have P̄ = 1 exactly (the
 *              paper's precondition: their products are the values themselves); `event_rows`: of those, the
 *              rows whose P̄V accumulation has at least one rounding event of docs/MECHANISM.md §5 in the
 *              policy's pv format (tsc_census.h: significand overflow, round bit 1, sticky bits; a P̄V
 *              accumulated in FP32 has none); `event_share` = event_rows / tied_rows;
 *   stable     the same three for POLICY+stable:beta=2,eps=1e-3 (Algorithm 3); `stable_ok` 0 with the
 *              reason when the policy refuses it (FA4's lazy rescale chooses the max its own way).
 * Memory: one head's inputs and outputs per policy plus a 64-row trace window (O(64·T)), linear in T. */
#ifndef TSC_KERNELS_H
#define TSC_KERNELS_H

#include "tsc_export.h"

#include <stdint.h>

#include "tsc_json.h"
#include "tsc_policy.h"
#include "tsc_progress.h"
#include "tsc_select.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t n;    /* samples (rows) */
    double mean;  /* NaN when n = 0 */
    double t;     /* t-statistic; NaN when n < 2, ±Inf for a constant non-zero error */
} tsc_kernels_bias_t;

typedef struct {
    int layer, head, feature;     /* -1 when no feature had 8 rows */
    long long step;
    tsc_kernels_bias_t bias;
} tsc_kernels_feature_t;

typedef struct {
    tsc_kernels_bias_t o, delta;
    tsc_kernels_feature_t worst;
    int64_t tied_rows, pbar_one_rows, event_rows;
    double event_share;           /* NaN when no row is tied */
} tsc_kernels_stats_t;

typedef struct {
    char name[TSC_POLICY_STR_MAX];   /* as given (a preset's name for the defaults) */
    char desc[160];                  /* the preset's one line, or "" */
    char o_format[16];               /* the policy's O format */
    tsc_kernels_stats_t plain, stable;
    int stable_ok;                   /* 0: +stable was refused (stable_why says why) or not asked */
    char stable_why[200];
} tsc_kernels_row_t;

typedef struct {
    const char *dump_path;           /* required */
    const char *label;               /* the input's name in the result (NULL: dump_path), e.g. "built-in" */
    const char *const *policies;     /* NULL/0: every preset but fp64 (the reference), in preset order */
    int n_policies;
    int with_stable;                 /* default 1: each policy also +stable:beta=2,eps=1e-3 */
    tsc_select_t sel;                /* default: every layer, head and batch row of the dump's first step */
    int all_steps;                   /* 0 (default): the first selected step only */
    tsc_progress_t *progress;        /* heads done, or NULL */
} tsc_kernels_opts_t;

typedef struct {
    char *dump_path;                 /* the label when one was given */
    char selection[512];
    int n_steps, n_pairs, n_heads, n_batches, T, D, causal;
    long long first_step;
    int has_do;
    int n_rows;
    tsc_kernels_row_t *rows;         /* [n_rows] in the order asked */
} tsc_kernels_t;

TSC_API void tsc_kernels_opts_init(tsc_kernels_opts_t *o);
/* Runs the table. TSC_ERR_ARG (bad options or a policy string, named), the dump's errors (named), TSC_ERR_MISSING
 * for an empty selection or a dump without q, k, v; *out is NULL on failure. */
TSC_API tsc_status_t tsc_kernels_run(const tsc_kernels_opts_t *o, tsc_kernels_t **out);
/* The result as one JSON object (docs/FORMAT.md §2.2). */
TSC_API void tsc_kernels_json(const tsc_kernels_t *k, tsc_json_t *j);
TSC_API void tsc_kernels_free(tsc_kernels_t *k);

#ifdef __cplusplus
}
#endif
#endif
