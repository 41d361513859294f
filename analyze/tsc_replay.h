/* tsc_replay.h: recompute attention from a dump under N precision policies, write the replay
 * file (docs/FORMAT.md §2) and compare every policy against the first.
 *
 *   tsc_replay_opts_t o; tsc_replay_opts_init(&o);
 *   o.dump_path = "run.h5"; o.out_path = "replay.h5"; o.policies = pol; o.n_policies = 2;
 *   tsc_replay_t *r;
 *   if (tsc_replay_plan(&o, &r) != TSC_OK) ...;      // opens the dump, checks every dataset needed
 *   if (tsc_replay_run(r, NULL, NULL) != TSC_OK) ...; // replays, writes replay.h5, compares
 *   tsc_json_t j; tsc_json_init(&j); tsc_replay_json(r, &j);   // the documented result
 *   tsc_replay_free(r);
 *
 * Non-finite rule of the comparison. A low-precision policy can overflow (FP8 E4M3 has no Inf:
 * an overflow is NaN), so a policy's O or δ may hold NaN/Inf. For each policy and each of O and
 * δ the comparison counts the elements of that policy's array that are NaN or ±Inf
 * (`n_nonfinite`), and computes max/mean absolute error, rel and the signed sums only over the
 * elements where both that policy's value and the reference's are finite (`n_compared` of `n`).
 * A clean max_abs therefore never hides a NaN: read it together with n_nonfinite. With nothing
 * compared the error statistics are NaN (null in JSON).
 *
 * The result fields below are for C callers; bindings should read the JSON of tsc_replay_json,
 * whose keys are the documented surface (docs/FORMAT.md §2). */
#ifndef TSC_REPLAY_H
#define TSC_REPLAY_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_dump.h"
#include "tsc_json.h"
#include "tsc_policy.h"
#include "tsc_select.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The comparison of one array (O or δ) of one policy against the reference's. */
typedef struct {
    int64_t n;            /* elements seen */
    int64_t n_nonfinite;  /* elements of the policy's array that are NaN or ±Inf */
    int64_t n_compared;   /* elements where the policy's and the reference's values are both finite */
    double max_abs;       /* max |x - ref| over the compared elements */
    double sum_abs;       /* Σ |x - ref| */
    double signed_sum;    /* Σ (x - ref) */
    double ref_max_abs;   /* max |ref| over the compared elements */
    /* set by tsc_replay_cmp_finish; with n_compared 0 these and max_abs are NaN; rel is 0 when
     * ref_max_abs is 0 */
    double mean_abs, rel, signed_mean;
} tsc_replay_cmp_t;

TSC_API void tsc_replay_cmp_init(tsc_replay_cmp_t *c);
/* Adds n elements: x against ref (both double), per the non-finite rule above. */
TSC_API void tsc_replay_cmp_add(tsc_replay_cmp_t *c, const double *ref, const double *x, size_t n);
/* Computes mean_abs, rel (max_abs / ref_max_abs) and signed_mean from the sums. */
TSC_API void tsc_replay_cmp_finish(tsc_replay_cmp_t *c);

typedef struct {
    const char *dump_path;          /* required */
    const char *out_path;           /* the replay file (required) */
    const tsc_policy_t *policies;   /* [n_policies], n_policies >= 1; policies[0] is the reference */
    int n_policies;
    tsc_select_t sel;               /* steps, layers, heads, batches (default all) */
    int forward_only;               /* skip the backward: do not needed, no delta/dq/dk/dv */
    int dump_tiles;                 /* use the dump's tile_q x tile_k in every policy */
} tsc_replay_opts_t;

typedef struct {
    char name[TSC_POLICY_STR_MAX];  /* canonical policy string (with the dump's tiles if asked) */
    int fp64;                       /* results stored as float64 */
    tsc_replay_cmp_t o, delta;      /* against policy 0 (policy 0 against itself: zero errors) */
} tsc_replay_policy_t;

struct tsc_replay_priv;

typedef struct {
    /* the plan (set by tsc_replay_plan) */
    char *dump_path, *out_path;
    tsc_dump_meta_t meta;           /* the dump's metadata */
    char selection[512];            /* the selection, formatted */
    int n_pairs;                    /* (step, layer) pairs to replay */
    int n_steps, n_heads, n_batches;
    long long *steps;               /* [n_steps] selected steps present in the dump */
    int *heads, *batches;           /* [n_heads], [n_batches] ascending */
    int backward;                   /* 0 with forward_only */
    int n_policies;
    tsc_replay_policy_t *policies;  /* [n_policies] */
    /* the result (set by tsc_replay_run) */
    int done;                       /* the file was written and the comparison is complete */
    int64_t n_nonfinite;            /* Σ over policies of o.n_nonfinite + delta.n_nonfinite */
    struct tsc_replay_priv *priv;
} tsc_replay_t;

/* Called after each (step, layer) pair: job of n_jobs done. */
typedef void (*tsc_replay_progress_fn)(void *ctx, int job, int n_jobs, long long step, int layer);

TSC_API void tsc_replay_opts_init(tsc_replay_opts_t *o);
/* Opens the dump, resolves the selection and checks that every dataset the replay needs exists
 * (do unless forward_only), so a missing dataset fails before any work. TSC_ERR_ARG for bad
 * options, TSC_ERR_MISSING for an empty selection or a missing dataset, the dump's error
 * otherwise; *out is NULL on failure. */
TSC_API tsc_status_t tsc_replay_plan(const tsc_replay_opts_t *o, tsc_replay_t **out);
/* Replays every pair under every policy, writes out_path atomically (absent on failure) and
 * fills the comparison. A non-finite input value is an error naming the dataset. */
TSC_API tsc_status_t tsc_replay_run(tsc_replay_t *r, tsc_replay_progress_fn progress, void *ctx);
/* The plan and (after run) the comparison as one JSON object (keys in docs/FORMAT.md §2). */
TSC_API void tsc_replay_json(const tsc_replay_t *r, tsc_json_t *j);
TSC_API void tsc_replay_free(tsc_replay_t *r);

#ifdef __cplusplus
}
#endif
#endif
