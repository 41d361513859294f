/* tsc_fit.h: how well a replay reproduces what a dump captured ("fit check"). A diagnosis replays
 * the run's attention under a precision policy; it describes the run only if that replay is the
 * kernel that ran. The fit replays captured steps under each of several policies and compares the
 * replayed O (and dQ, dK, dV where the dump holds them) with the captured tensors, element by
 * element, in ULPs of the captured tensor's format (docs/FORMAT.md §2.1).
 *
 *   tsc_fit_opts_t o; tsc_fit_opts_init(&o);
 *   o.dump_path = "run.h5";                      // policies NULL: every preset (and the run's own)
 *   tsc_fit_t *f;
 *   if (tsc_fit_run(&o, &f) != TSC_OK) puts(tsc_error_last());
 *   printf("best: %s\n", f->policies[0].name);   // ranked, best first
 *   tsc_json_t j; tsc_json_init(&j); tsc_fit_json(f, &j); tsc_fit_free(f);
 *
 * Comparison of one element: the replayed value x is rounded (nearest-even) to the captured
 * tensor's format F (its `dtype` attribute), the value a capture storing x in F would hold, and
 * compared with the captured value c:
 *   identical   x and c have the same bits: equal with the same sign (+0 and -0 differ), or both NaN
 *               (NaN == NaN counts as identical; Inf equals only Inf of its sign);
 *   ULP distance |x - c| / ulp_F(max(|x|, |c|)), ulp_F the spacing of F's values at that magnitude
 *               (tsc_stats_ulp; subnormal spacing below the smallest normal), both finite only: the
 *               number of F values between them when both lie in one binade;
 *   non-finite  not identical and x or c is NaN or Inf (counted, never folded into max_ulp).
 * Ranking: by score (descending), then O's identical share, then O's share within 1 ULP, then O's
 * max ULP (ascending; NaN last), then the policy the dump records (`policy` attribute) before
 * the others, then the order given. score = O's identical share, or, when the
 * dump holds captured gradients, the mean identical share over O and every compared gradient. */
#ifndef TSC_FIT_H
#define TSC_FIT_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_json.h"
#include "tsc_policy.h"
#include "tsc_progress.h"
#include "tsc_select.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Below this share of bit-identical O elements the replay does not reproduce the run. */
#define TSC_FIT_WARN_SHARE 0.99
/* Below this share the best fit is not adopted as a dump's policy (tsc_dump_policy): the default is. */
#define TSC_FIT_ADOPT_SHARE 0.5

/* The tensors compared: O always, the gradients where the dump holds them (with do). */
enum { TSC_FIT_O = 0, TSC_FIT_DQ, TSC_FIT_DK, TSC_FIT_DV, TSC_FIT_NT };

/* One tensor under one policy. */
typedef struct {
    int64_t n;            /* elements compared (0: the tensor was not compared) */
    int64_t n_identical;  /* same bits (NaN == NaN) */
    int64_t n_within1;    /* ULP distance <= 1, identical included */
    int64_t n_nonfinite;  /* not identical, and NaN/Inf on either side */
    double max_ulp;       /* over the elements finite on both sides; NaN when there is none */
    double identical;     /* n_identical / n (NaN when n = 0) */
    double within1;       /* n_within1 / n (NaN when n = 0) */
} tsc_fit_cmp_t;

typedef struct {
    char name[TSC_POLICY_STR_MAX];       /* as given (a preset's name for the defaults) */
    char canonical[TSC_POLICY_STR_MAX];  /* what was replayed (tsc_policy_format, tiles included) */
    int rank;                            /* 1 = best fit */
    double score;                        /* the ranking key (above) */
    tsc_fit_cmp_t t[TSC_FIT_NT];         /* O, dQ, dK, dV */
} tsc_fit_policy_t;

typedef struct {
    const char *dump_path;            /* required */
    const char *const *policies;      /* policy strings; NULL/0: every preset (tsc_preset_name(i),
                                         i < TSC_PRESET_COUNT), then the dump's recorded policy when
                                         it parses and differs from all of them */
    int n_policies;
    tsc_select_t sel;                 /* default all */
    int all_steps;                    /* 0 (default): only the first selected step; 1: every one */
    int keep_tiles;                   /* 0 (default): a policy without "+tile:" gets the dump's
                                         tile_q x tile_k when the dump records usable ones, except a
                                         materialized-softmax policy (an untiled kernel); 1: never */
    tsc_progress_t *progress;         /* (step, layer) pairs compared (tsc_progress.h), or NULL (default) */
} tsc_fit_opts_t;

typedef struct {
    char *dump_path;
    char run_policy[128];             /* the dump's `policy` attribute */
    char selection[512];              /* the selection as given, formatted */
    int tile_q, tile_k;               /* the dump's tiles applied to the policies; 0 when none was */
    int n_steps;                      /* steps compared */
    long long *steps;                 /* [n_steps] */
    int n_pairs;                      /* (step, layer) pairs compared */
    int n_heads, n_batches;           /* selected query heads and batch rows */
    char dtype[TSC_FIT_NT][16];       /* the captured formats ("" when the tensor was not compared) */
    int n_policies;
    tsc_fit_policy_t *policies;       /* [n_policies], ranked: policies[0] fits best */
} tsc_fit_t;

TSC_API void tsc_fit_opts_init(tsc_fit_opts_t *o);
/* Opens the dump, checks q, k, v and o in every selected (step, layer) before any work (a missing
 * o is TSC_ERR_MISSING: "<dump>: step S layer L: no dataset 'o' (the captured O the fit compares
 * with)"), replays one kv-head group of one batch row at a time under each policy and ranks them.
 * TSC_ERR_ARG for a bad policy string, TSC_ERR_MISSING for an empty selection, the dump's errors
 * otherwise (a non-finite q, k, v or do value is TSC_ERR_NONFINITE naming it). *out NULL on failure. */
TSC_API tsc_status_t tsc_fit_run(const tsc_fit_opts_t *o, tsc_fit_t **out);
/* The result as one JSON object (keys in docs/FORMAT.md §2.1). */
TSC_API void tsc_fit_json(const tsc_fit_t *f, tsc_json_t *j);
TSC_API void tsc_fit_free(tsc_fit_t *f);
/* The index of the policy named name (as given or canonical) in f->policies, or -1. */
TSC_API int tsc_fit_find(const tsc_fit_t *f, const char *name);

/* Where the policy that describes a dump came from (tsc_dump_policy). */
typedef enum {
    TSC_POLICY_GIVEN = 0,  /* the caller's (a flag such as --lp or --policy) */
    TSC_POLICY_RECORDED,   /* the dump's `policy` attribute */
    TSC_POLICY_FITTED,     /* the preset whose replay reproduces the captured O best (tsc_fit_run) */
    TSC_POLICY_DEFAULT     /* bf16-fa2: nothing recorded and no O to fit */
} tsc_policy_origin_t;

typedef struct {
    tsc_policy_t policy;
    char name[TSC_POLICY_STR_MAX];   /* canonical (tsc_policy_format) */
    tsc_policy_origin_t origin;
    char source[192];                /* in words: "--lp", "the dump's policy", "the dump records no policy: the best
                                        fit of its captured O (99.98% bit-identical on step 0)", ... */
} tsc_dump_policy_t;

/* The one rule for which policy describes a dump, used by analyze, diagnose, explain, the viewer and the
 * attention figures: the given policy string when there is one (given_flag names it in messages and in
 * source); else the dump's recorded policy (recorded: its `policy` attribute) when it parses; else the
 * best fit of the captured O on the first step of sel (NULL: the whole dump; the caller narrows it to what
 * it looks at, since the fit replays every preset), with the dump's tiles, when it reproduces at least
 * TSC_FIT_ADOPT_SHARE of O bit for bit; else (no O to fit, or no preset that reproduces half of it) the
 * bf16-fa2 default. TSC_ERR_ARG for a given string that does not parse ("--lp 'x': ..."), the fit's errors
 * other than a missing O. */
TSC_API tsc_status_t tsc_dump_policy(const char *dump_path, const char *recorded, const char *given,
                                     const char *given_flag, const tsc_select_t *sel, tsc_progress_t *progress,
                                     tsc_dump_policy_t *out);

/* The sentence diagnose and the report print: "replay under P reproduces the captured O on
 * 99.97% of elements"; with checked 0: "no captured O: the fit of the replay could not be checked".
 * The percentage is rounded down to two decimals ("100%" only when every element is identical).
 * Returns buf. */
TSC_API const char *tsc_fit_sentence(const char *policy, int checked, double o_identical, char *buf, size_t size);
/* The warning that goes with it when o_identical is below TSC_FIT_WARN_SHARE (or NaN), else NULL. */
TSC_API const char *tsc_fit_warning(double o_identical);
/* The share as the sentence prints it, e.g. "99.97%" (rounded down; "100%" only for 1). */
TSC_API const char *tsc_fit_percent(double share, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
