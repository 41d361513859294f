/* tsc_diagnose.h: `tilescope diagnose`: the paper's Appendix F workflow end to end (docs/MECHANISM.md §8).
 *
 * 1. Run the analysis (tsc_analysis.h) and take the at-risk (layer, head)s: flagged features, or a
 *    significant δ bias in some step. Each is examined at the step with the largest |Σ_T(δ_lp − δ_hp)|.
 * 2. Attribution by substitution: replay that head with one low-precision forward stage of lp at a
 *    time raised to FP32 (tsc_policy_low_stages + tsc_policy_stage_set; inputs q, k, v too when lp
 *    rounds them to a narrower format than the dump stores), and with δ taken from an
 *    FP32 O (+hp-delta, reported apart: it removes the δ error by construction). The culprit is
 *    the single stage with the smallest |ratio| when that is ≤ removed_frac; when none is, every
 *    pair of stages, then every triple, is replayed and the set with the smallest |ratio| of the
 *    smallest size that removes the bias is the culprit (e.g. "pv+oacc+o" for bf16-torch, which
 *    rounds the tied P̄V sum, then Ō, then O: raising one alone is undone by the next); "none"
 *    when no triple removes it. Pairs and triples are replayed only when B(lp) is at least
 *    one SE from 0: below that it is noise, with no bias to attribute.
 * 3. Accumulation verdict: the δ bias test plus the similarity of the rank-1 directions, where x
 *    is captured: the accumulation gain over all tokens (tsc_head_result_t.rank1_accum_gain),
 *    pooled over the head's steps, ≥ TSC_DIAG_ACCUM_GAIN, or mean cosine / top energy of the N
 *    largest terms at the examined step.
 * 4. The bit level: the single P̄V addition with the largest rounding error in O units (error / ℓ
 *    of its row) among the flagged features of the tie rows (every row when none) at the examined step, with operands, FP32 sum and kept|rounding|sticky
 *    bits, like docs/MECHANISM.md §5 (bits formatted here; the sum is the FP32 fused multiply-add).
 * 5. Mitigation: the same δ bias under lp+stable (β = 2, ε = 1e-3) and a β sweep.
 *
 *   tsc_diagnose_opts_t o; tsc_diagnose_opts_init(&o);
 *   tsc_diagnosis_t *dg;
 *   if (tsc_diagnose_run("run.h5", "out", &o, &dg) != TSC_OK) puts(tsc_error_last());
 *   char line[512]; for (size_t i = 0; i < dg->n; i++) puts(tsc_diagnose_line(dg, i, line, sizeof line));
 *   tsc_diagnose_write_summary(dg, "out/summary.json"); tsc_diagnose_free(dg);
 */
#ifndef TSC_DIAGNOSE_H
#define TSC_DIAGNOSE_H

#include "tsc_export.h"

#include <stddef.h>

#include "tsc_analysis.h"
#include "tsc_check.h"
#include "tsc_fit.h"
#include "tsc_policy.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSC_DIAG_MAX_BETAS 8
/* The accumulation gain (pooled over a head's steps) from which the rank-1 terms count as adding
 * up along shared directions: twice the norm that independent random signs would give. On synth
 * dumps (tiny, GPT-2-small and llama-gqa shapes; 726 unplanted head-steps) no unplanted head
 * exceeds 1.53 in any step (1.35 pooled); planted heads pool to 2.65-7.14 (1.47-7.14 per step). */
#define TSC_DIAG_ACCUM_GAIN 2.0
#define TSC_DIAG_MAX_SUBST (TSC_STAGE_COUNT + 2)
#define TSC_DIAG_MAX_ALT 4 /* alternative culprit sets reported (smallest |ratio| first) */

/* What one β of the +stable sweep did on the tie rows of the examined step (docs/MECHANISM.md §6). */
typedef struct {
    double beta;
    double ratio;                      /* B(lp+stable:beta) / B(lp) (= beta_ratio) */
    double ratio_se;                   /* its standard error from the spread of the per-row terms */
    int in_range;                      /* 1: inside the studied range 2..8 */
    long long n_rows;                  /* tie rows counted (examined step, every selected batch row) */
    double frac_fix;                   /* m = β·r_m taken in the tile holding the row max */
    double frac_guard;                 /* the edge case fell back to m = r_m + gap (e^((1-β)r_m) rounds to 0 or 1) */
    double frac_split;                 /* no tile holding the max has r_s > 1: the tied maxima sit in different
                                          key tiles (r_s counts per tile), the fix never triggers */
    double frac_floor;                 /* the PyTorch code's 1e-10 floor on each tile's P̄ sum moved ℓ by more
                                          than half an ULP of ℓ's format (policies with torch_quirks) */
    double r_m_min, r_m_max;           /* the row maxima of those rows */
    double exparg_ulp;                 /* spacing of the exp argument (1-β)·r_m_max in the exparg format */
    char what[400];                    /* one sentence */
} tsc_diag_beta_t;

/* One practitioner's fix, replayed for the head: what to switch on in which kernel, and its effect. */
typedef struct {
    char name[80];                     /* e.g. "stable softmax fix (beta 2, eps 0.001)" */
    char where[64];                    /* "forward kernel", "backward kernel's delta preprocessing" */
    char modifier[64];                 /* the policy modifier replayed, e.g. "+hp-delta" */
    char metric[8];                    /* "O": B on the tie rows; "delta": sum_T(delta - delta_hp) */
    double ratio;                      /* effect: that measure under the fix over lp's */
    double ratio_se;                   /* its standard error (spread of the per-row terms) */
    int removes;                       /* |ratio| + 2 ratio_se <= removed_frac: removed, with confidence */
    int recommended;                   /* the fix the recommendation names first */
} tsc_diag_fix_t;
#define TSC_DIAG_MAX_FIXES 6

typedef struct {
    tsc_analysis_opts_t an;            /* the analysis' options (policies, selection, flag rule) */
    double betas[TSC_DIAG_MAX_BETAS];  /* the β sweep of +stable (default 1.5, 2, 4, 8); ε = eps */
    int n_betas;
    double eps;                        /* ε of +stable, default 1e-3 */
    double removed_frac;               /* default 0.1 */
    int max_heads;                     /* heads examined in depth, by risk, default 16 */
    int max_steps;                     /* steps replayed per head (largest |B(lp)|), default 4; 0 all */
} tsc_diagnose_opts_t;

TSC_API void tsc_diagnose_opts_init(tsc_diagnose_opts_t *o);

/* One at-risk (layer, head). The bias measured for every policy X is
 *   B(X) = sum over the analysed steps, batch rows, tie rows T and the head's flagged features i
 *          (every one of them; all head_dim features when none is flagged) of dO[T, i] * (O_X - O_hp)[T, i],
 * the part of sum_T(delta_X - delta_hp) those features carry (docs/MECHANISM.md §5); ratios are B(X)/B(lp).
 * Tie rows: rows with >= 2 exact maxima in lp's scores, where the mechanism of docs/MECHANISM.md §5 acts;
 * other rows only add zero-mean rounding noise that would hide what a substitution removes (all
 * rows are used when the head has no tie row). Forward replays only (O does not depend on the
 * backward stages). */
typedef struct {
    int layer, head;
    long long step;                    /* the step with the largest |B(lp)| (the event is looked for there) */
    int n_steps;                       /* analysed steps of this head */
    long long n_tie_rows;              /* rows B sums over (tie rows), 0: all rows were used */
    int n_steps_replayed;              /* steps the substitution replays use (max_steps) */
    double risk;                       /* |sum over steps of sum_T(delta_lp - delta_hp)| (ranking key) */
    double delta_cumsum;               /* that sum, signed */
    double delta_p;                    /* sign-test p of the delta differences at the examined step */
    int n_features;
    int features[TSC_ANALYSIS_MAX_FLAGGED]; /* the first flagged features (pooled), or none: all were used */
    int n_features_summed;             /* features B sums over: every flagged one (n_features lists at most
                                          TSC_ANALYSIS_MAX_FLAGGED of them), or all head_dim when none is */
    int top_feature;                   /* the head's pooled top feature (tsc_head_pooled_t), -1: none */
    double feature_mean_ulp;           /* its pooled mean O error (ULPs) */
    double bias_lp;                    /* B(lp) over the replayed steps */
    double bias_lp_se;                 /* its standard error (from the per-row spread) */
    int flagged, delta_biased;
    int n_subst;
    char subst_name[TSC_DIAG_MAX_SUBST][TSC_POLICY_STR_MAX]; /* policy strings */
    char subst_stage[TSC_DIAG_MAX_SUBST][48];                /* stage name(s), "a+b" for a set */
    double subst_ratio[TSC_DIAG_MAX_SUBST];
    double subst_se[TSC_DIAG_MAX_SUBST];                     /* standard errors of those ratios */
    char culprit[48];                  /* the stage (or smallest set "a+b") removing the bias (|ratio| <=
                                          removed_frac and |ratio| + 2 se < 1), or "none" */
    double culprit_ratio, culprit_se;
    char nearest[48];                  /* the replayed set with the smallest |ratio|, removing or not (the
                                          culprit when there is one; "none" when no set was replayed) */
    double nearest_ratio, nearest_se;
    int search_size;                   /* the largest set size replayed: 1, 2 or 3 (0: no candidate) */
    int n_alt;                         /* other sets of the culprit's size that remove it too */
    char alt_stage[TSC_DIAG_MAX_ALT][48];
    double alt_ratio[TSC_DIAG_MAX_ALT];
    double delta_src_ratio;            /* sum(delta - delta_hp) with delta from an FP32 O (+hp-delta) over lp's */
    double stable_ratio;               /* lp+stable:beta=2,eps=... */
    double beta_ratio[TSC_DIAG_MAX_BETAS];
    tsc_diag_beta_t sweep[TSC_DIAG_MAX_BETAS]; /* what each β did */
    double dpp_ratio;                  /* sum(delta - delta_hp) with delta = rowsum(dP o P) (+dpp-delta) over lp's */
    double fp32o_ratio;                /* B with O-bar accumulated and O written in FP32 (+fp32:pv,oacc,o) */
    double stable_se, delta_src_se, dpp_se, fp32o_se; /* standard errors of those ratios */
    int n_fixes;
    tsc_diag_fix_t fixes[TSC_DIAG_MAX_FIXES]; /* in the fixed order of preference */
    char stage_note[288];              /* the culprit stage set, in the tool's stage names (appendix) */
    char verdict[32];                  /* "accumulates", "biased", "biased (no x)", "not biased" */
    double mean_cos, top_energy;       /* from the analysis (NaN without x) */
    double accum_gain;                 /* tsc_head_pooled_t.accum_gain (NaN without x) */
    char recommendation[480];
    /* the single largest rounding event at the examined step (flagged features, every row) */
    int ev_found;
    long long ev_rows, ev_rows_of;     /* rows searched, of the candidate rows (tie rows, else every row;
                                          every k-th when the search would pass DIAG_EVENT_VISITS) */
    int ev_b, ev_t, ev_i, ev_key;
    float ev_before, ev_term, ev_sum;  /* FP32 running sum, the term a·v, the FP32 result */
    double ev_pbar, ev_v;              /* a = P̄ as used, v */
    double ev_rounded, ev_err;         /* the result rounded to the output format, and its error */
    char ev_fmt[16];                   /* the output format */
} tsc_diag_head_t;

typedef struct {
    tsc_analysis_t *an;                /* owned */
    size_t n;
    tsc_diag_head_t *heads;            /* [n] by decreasing risk */
    char stable_policy[TSC_POLICY_STR_MAX];
    double betas[TSC_DIAG_MAX_BETAS];
    int n_betas;
    double removed_frac;
    char sweep_explanation[2048];      /* what the β sweep did over the examined heads */
    /* the fit of lp's replay (tsc_fit.h) on the first selected step: does the diagnosed policy
     * reproduce the captured O? fit_checked 0 when the dump has no o (fit_note: why) */
    int fit_checked;
    long long fit_step;
    tsc_fit_cmp_t fit;                 /* O compared, in ULPs of its captured format */
    char fit_note[512];                /* "" when checked, else the reason it was not */
    /* the consistency check (tsc_check.h) of the first selected step: are the captured O and LSE attention's
     * result on the captured q, k, v? NULL when it could not run (check_note: why, e.g. no o) */
    tsc_check_t *check;
    char check_note[512];
} tsc_diagnosis_t;

/* Runs the workflow (writes out_dir/analysis.h5 through the analysis). Errors as
 * tsc_analysis_run, and TSC_ERR_UNSUPPORTED for more than TSC_DIAG_MAX_BETAS betas; on failure
 * *out is NULL. Under a communicator of several processes (opts->an.comm) every process runs its
 * share of the analysis and of the examination of the at-risk heads (head k on process k mod N);
 * rank 0 alone runs the fit and the check and gets the diagnosis; the others get TSC_OK and *out
 * NULL. */
TSC_API tsc_status_t tsc_diagnose_run(const char *dump_path, const char *out_dir, const tsc_diagnose_opts_t *opts,
                              tsc_diagnosis_t **out);
TSC_API void tsc_diagnose_free(tsc_diagnosis_t *d);

/* One line for head i: "layer L head H: evidence ...; verdict ...; recommendation ...". Returns buf. */
TSC_API const char *tsc_diagnose_line(const tsc_diagnosis_t *d, size_t i, char *buf, size_t size);
/* The head's biased step in words: "pv+oacc (FP32 there leaves +3% of the bias)", or "not isolated
 * (the closest, S in FP32, leaves +35%)" when no set of up to 3 stages removes it. Returns buf. */
TSC_API const char *tsc_diagnose_step_text(const tsc_diag_head_t *h, char *buf, size_t size);
/* The rounding steps the substitutions name over the examined heads: for each stage, the heads whose
 * culprit set holds it and the heads without a culprit whose closest set holds it and leaves at most
 * half of the bias (|nearest_ratio| <= 0.5). */
typedef struct {
    char stage[16];
    int culprit, closest;              /* heads naming the stage in their culprit set, in their closest set */
} tsc_diag_named_t;
typedef struct {
    int n_stages;
    tsc_diag_named_t named[TSC_STAGE_COUNT + 3]; /* by decreasing count (culprit + closest), then culprit,
                                                    then stage order */
    int n_heads;                       /* examined heads (those with a replayed substitution) */
    char biased_step[48];              /* the stages named for at least half of them, "a+b" in stage
                                          order ("pv+oacc"), or "none" */
} tsc_diag_steps_t;
TSC_API void tsc_diagnose_steps(const tsc_diagnosis_t *d, tsc_diag_steps_t *out);
/* "biased step over the 7 examined heads: pv+oacc (named by substitution, culprit set / closest set
 * when none removes the bias: pv 4/3, oacc 4/3, scores 1/0)". Returns buf. */
TSC_API const char *tsc_diagnose_steps_line(const tsc_diagnosis_t *d, char *buf, size_t size);
/* The worked-example block of head i's rounding event (multi-line), or "" when none. Returns buf. */
TSC_API const char *tsc_diagnose_event_text(const tsc_diagnosis_t *d, size_t i, char *buf, size_t size);
/* The analysis summary plus "diagnosis" (keys in docs/FORMAT.md §3). */
TSC_API void tsc_diagnose_summary_json(const tsc_diagnosis_t *d, tsc_json_t *j);
TSC_API tsc_status_t tsc_diagnose_write_summary(const tsc_diagnosis_t *d, const char *path);

#ifdef __cplusplus
}
#endif
#endif
