/* tsc_analysis.h: `tilescope analyze`: a dump -> DIR/analysis.h5 + per-head results (which
 * summary.json is written from). For every selected step, layer and head it replays attention
 * under an hp and an lp policy (tsc_attention.h) and measures (issue 4, item 1):
 *   a. error and bias of O and delta (lp - hp): max/mean abs/rel error, ULPs, signed mean, sign
 *      consistency, t-statistic, sign-test p; per-feature bias of O; sum_T(delta_lp - delta_hp)
 *      and its cumulative sum across the analysed steps;
 *   b. ties and sinks from the lp scores: rows with >= 2 entries at the row max (exactly, and
 *      within eps), P-bar = 1 counts, key positions holding the row max (sinks);
 *   c. a rounding census of the P-bar V accumulation (FP32 additions whose significand overflowed
 *      and whose result has rounding bit 1 and sticky bits set relative to the output format);
 *   d. O-bar_error(t) for a chosen and an automatically chosen (b, T, I);
 *   e. identity (1) of docs/MECHANISM.md §4 and, where x is captured, the rank-1 decomposition of the
 *      dW^Q error (cosine similarity, SVD energy, effective rank, projection share);
 *   f. spectral norms of captured weights (per head for w_q), power iteration vs LAPACK.
 *
 * Memory bound: heads are streamed; the heads of one (step, layer) run in parallel on the OpenMP
 * threads (dump reads serialised), each thread holding the inputs and outputs of one (batch row,
 * head) in float (about 16 T*D floats), the head's per-batch-row O and dO (B*T*D floats), delta
 * differences (B*T), [AN_PK_ROWS = 64, T] doubles of P rows and the [T, D] P K, and, with x
 * captured, one [T, C] x slice (float and double). Nothing is T*T: the lp forward hands each
 * completed block of 4 rows to the measurements (a row-window trace, tsc_attn_trace_init_rows:
 * 8*T doubles of S and P-bar), and a probe's O-bar_error curve reruns the lp forward keeping only
 * its row. So memory is O(threads * (T*(D*(B + 1) + C + 64))) plus O(S*L*H*(D + C)): about 0.2 GB
 * per thread at T = 32768, D = 64, C = 512, B = 1. Before allocating, the run checks threads times
 * this bound against the memory budget (tsc_mem_check: TSC_MAX_MEMORY). Time stays O(T^2 * D) per
 * head (three forwards and two backwards, plus one forward per probe). T is limited to 2^24 by the
 * trace (and by the dump's own limits); the analysis.h5 arrays are at most [heads, B, T], none T*T.
 * Weights: the four [out, in] matrices of one (step, layer) at a time, plus per thread a double
 * copy of one and its Gram matrix of the smaller side.
 *   tsc_analysis_opts_t o; tsc_analysis_opts_init(&o);
 *   tsc_analysis_t *a;
 *   if (tsc_analysis_run("run.h5", "out", &o, &a) != TSC_OK) puts(tsc_error_last());
 *   for (size_t i = 0; i < a->n_heads; i++) if (a->heads[i].flagged) ...;
 *   tsc_analysis_write_summary(a, "out/summary.json"); tsc_analysis_free(a);
 */
#ifndef TSC_ANALYSIS_H
#define TSC_ANALYSIS_H

#include "tsc_dump.h"
#include "tsc_export.h"
#include "tsc_file.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_fit.h"
#include "tsc_json.h"
#include "tsc_policy.h"
#include "tsc_progress.h"
#include "tsc_select.h"
#include "tsc_stats.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tsc_comm;

#define TSC_ANALYSIS_FORMAT_NAME "tilescope-analysis"
#define TSC_ANALYSIS_FORMAT_VERSION 1
#define TSC_ANALYSIS_MAX_SINKS 4      /* top sink keys reported per head */
#define TSC_ANALYSIS_MAX_FLAGGED 16   /* flagged features listed per head (all are counted) */

typedef struct {
    char hp[TSC_POLICY_STR_MAX];  /* "" -> fp32 */
    char lp[TSC_POLICY_STR_MAX];  /* "" -> the dump's policy if it parses, else the preset whose
                                   * replay best reproduces the captured O (tsc_fit.h, first step),
                                   * else bf16-fa2 */
    tsc_select_t sel;             /* steps/layers/heads/batches */
    tsc_flag_rule_t rule;         /* default TSC_FLAG_RULE_DEFAULT */
    double tie_eps;               /* "within eps" ties, default 1e-3 */
    int probe_b, probe_t, probe_i;/* a chosen (b, T, I) for O-bar_error(t); -1: none */
    int n_terms;                  /* rank-1 terms per head and step (largest |coefficient|), 32 */
    int census;                   /* 1 (default): rounding census of P-bar V */
    int identity;                 /* 1 (default): identity (1) via an lp+hp-delta backward */
    tsc_progress_t *progress;     /* head records analysed (tsc_progress.h), or NULL (default) */
    const struct tsc_comm *comm;  /* the job's processes (tsc_comm.h); NULL: this one. Each (step, layer,
                                   * head) is one work item; process 0 writes analysis.h5, with the bytes
                                   * one process writes, and alone gets *out (NULL on the others) */
    const char *run_id;           /* NULL (default): a fresh random id; else TSC_RUN_ID_LEN hex digits
                                   * (a rerun whose bytes are to be compared) */
} tsc_analysis_opts_t;

TSC_API void tsc_analysis_opts_init(tsc_analysis_opts_t *o);

/* Results of one (step, layer, head), over the selected batch rows. */
typedef struct {
    long long step;
    int layer, head;
    int64_t n_rows;              /* B*T rows analysed (tokens) */
    int skipped;                 /* 1: inputs had NaN/Inf, nothing else below is valid */
    int64_t n_nonfinite;         /* non-finite input values (q, k, v, do: the head is skipped; x: only
                                    its rank-1 analysis is skipped, has_x is then 0) */
    char first_nonfinite[96];    /* "v[b=0,t=3,d=5]" or "" */
    tsc_err_summary_t o_err;     /* O_lp vs O_hp over B*T*D elements, ULPs of lp's O format */
    tsc_err_summary_t delta_err; /* delta_lp vs delta_hp over B*T rows, ULPs of lp's delta format */
    double delta_sum;            /* sum over b, T of (delta_lp - delta_hp) */
    double delta_cumsum;         /* running sum of delta_sum over the analysed steps (same layer, head) */
    double o_dump_vs_lp_max_abs; /* max |o (dump) - O_lp|, NaN when the dump has no o */
    /* a: per-feature flags */
    int n_features_tested, n_features_flagged;
    int flagged_features[TSC_ANALYSIS_MAX_FLAGGED];
    int flagged;                 /* the (layer, head) is flagged: >= 1 feature flagged, pooled over steps */
    int delta_biased;            /* sign-test p of delta differences * n_head_tests < alpha */
    int top_feature;             /* most significant feature (smallest p, then largest |mean|) */
    double top_feature_mean_ulp, top_feature_p, top_feature_sign_consistency;
    /* b: ties and sinks */
    int64_t rows_multi_max, rows_multi_max_eps; /* rows with >= 2 entries at the row max */
    int64_t pbar_one, rows_pbar_one_2;          /* entries with P-bar = 1; rows with >= 2 of them */
    int sink_keys[TSC_ANALYSIS_MAX_SINKS];      /* keys holding the row max most often (-1: none) */
    int64_t sink_counts[TSC_ANALYSIS_MAX_SINKS];
    int n_sinks_flagged;
    int sinks_flagged[TSC_ANALYSIS_MAX_SINKS];  /* flagged sink keys (rule in docs/FORMAT.md §3) */
    /* c: rounding census */
    int64_t census_additions;                   /* additions examined */
    int64_t census_events_neg, census_events_pos;
    double census_err_neg, census_err_pos;      /* summed event errors, in O units */
    double census_share;                        /* share of the signed O error in elements with an event */
    /* d: probes */
    int probe_b, probe_t, probe_i;              /* automatic (b, T, I) */
    double probe_err;                           /* O_lp - O_hp there */
    double probe_final_obar_err;                /* last point of the O-bar_error(t) curve */
    /* e: gradient decomposition */
    double identity_rel_residual, identity_max_abs_residual, identity_max_abs_lhs; /* NaN: not run */
    int has_x;
    int n_terms;
    double rank1_top_energy, rank1_eff_rank, rank1_mean_cos, rank1_proj_share;
    double dwq_err_fro;                         /* |alpha sum_T coeff[T] PK[T]^T X[T]|_F, all tokens */
    double rank1_accum_gain;                    /* dwq_err_fro / sqrt(sum_T |alpha coeff[T] PK[T]^T X[T]|_F^2):
                                                   ~1 when the terms add like random signs, up to sqrt(n) when
                                                   they all add up in one direction; NaN without x */
} tsc_head_result_t;

/* One (layer, head) pooled over the analysed steps and batch rows: the one definition of each per-head
 * number that the report, figure 1, diagnose and compare print (summary.json "per_head"). */
typedef struct {
    int layer, head;
    int n_steps;                 /* analysed steps with a record of this head */
    int n_skipped;               /* of them, skipped for NaN/Inf inputs */
    int flagged;                 /* >= 1 feature flagged by the pooled rule (tsc_stats_flag) */
    int n_features_flagged;
    int delta_biased_steps;      /* records whose delta_lp - delta_hp is biased (delta_biased) */
    double delta_cumsum;         /* sum over the analysed steps, rows and tokens of delta_lp - delta_hp */
    int top_feature;             /* the feature of smallest pooled p of its delta contribution, then largest
                                    |pooled mean ULP|: the pooled counterpart of a record's top_feature */
    double top_feature_mean_ulp; /* its mean (O_lp - O_hp)/ulp over every row of every step: the number the
                                    flag rule's min_ulp compares */
    double o_signed_mean;        /* mean O_lp - O_hp in value units over all elements of all steps (a mean
                                    in ULPs is dominated by outputs near 0, where an ULP is tiny) */
    int64_t rows_multi_max;      /* rows with >= 2 entries at the row max, summed over the steps */
    double accum_gain;           /* sqrt(sum_s dwq_err_fro_s^2 / sum_s sum_T |term|^2): the energy-weighted mean
                                    of the records' rank1_accum_gain^2 (one step's gain is noisy); NaN without x */
} tsc_head_pooled_t;

/* Spectral norms of one (step, layer). NaN where the weight is absent. */
typedef struct {
    long long step;
    int layer;
    double w_norm[4];          /* w_q, w_k, w_v, w_o (kernels/' spectral norm; NaN: absent or NaN/Inf) */
    int spectral_unconverged;  /* norms of this step/layer (the four and w_q's per-head ones) whose
                                  iteration reached its product limit before settling; 0 normally */
    int64_t n_nonfinite;       /* NaN/Inf values in the weights (their norms are NaN, the rest goes on) */
    char first_nonfinite[96];  /* "w_q[r=3,c=5]" or "" */
} tsc_layer_result_t;

typedef struct {
    char *dump_path;             /* owned, as given */
    char hp[TSC_POLICY_STR_MAX], lp[TSC_POLICY_STR_MAX];
    char lp_source[192];         /* where lp came from: "--lp", "the dump's policy", the best fit of
                                  * the captured O when the dump records no usable policy, or the
                                  * bf16-fa2 default when it has no O either */
    char *selection;             /* owned: the selection's canonical text (tsc_select_format) */
    int B, H, Hkv, T, D, C, n_layer;
    double scale;
    int causal;
    int n_steps;                 /* analysed steps */
    long long *steps;            /* [n_steps] */
    size_t n_heads, n_layers_res;
    tsc_head_result_t *heads;    /* [n_heads] in (step, layer, head) order */
    tsc_layer_result_t *layers;  /* [n_layers_res] */
    int64_t n_feature_tests, n_head_tests; /* Bonferroni denominators: (layer, head, feature) and records */
    tsc_flag_rule_t rule;
    double tie_eps;
    int64_t n_skipped_heads;
    uint8_t *feature_flags;                /* [n_heads, D]: 1 where the feature is flagged (pooled over
                                              steps): every flagged feature, where flagged_features lists
                                              the first TSC_ANALYSIS_MAX_FLAGGED */
    char run_id[TSC_RUN_ID_LEN + 1];       /* this run's id (tsc_run_id_new): root attribute "run_id" of
                                              analysis.h5 and key "run_id" of summary.json, which pair them */
    int lp_fit_ok;                         /* 1: lp_fit_o holds the fit of lp's O on the first analysed
                                              step (tsc_fit.h), taken from the analysis's own lp replay:
                                              the numbers tsc_fit_run gives for lp on that step. 0 when it
                                              could not be taken there (a layer without o, a head with
                                              NaN/Inf inputs, a policy with an FP64 stage) */
    long long lp_fit_step;
    tsc_fit_cmp_t lp_fit_o;
    size_t n_pooled;
    tsc_head_pooled_t *pooled;             /* [n_pooled] in (layer, head) order */
    int n_ranks;                           /* the dump is a run of many ranks (tsc_dump_n_ranks): its */
    tsc_dump_rank_t *ranks;                /* [n_ranks] rank table, summary.json's "ranks"; else 0, NULL */
} tsc_analysis_t;

/* Runs the analysis of dump_path, writing out_dir/analysis.h5 (out_dir must exist). On success
 * *out owns the results (tsc_analysis_free). Errors: those of tsc_dump_open/read (naming file and
 * dataset), TSC_ERR_ARG for a bad policy string or an empty selection, TSC_ERR_IO for the output;
 * on failure no analysis.h5 is left behind and *out is NULL. NaN/Inf in a head's inputs is not an
 * error: that head is skipped and reported. */
TSC_API tsc_status_t tsc_analysis_run(const char *dump_path, const char *out_dir, const tsc_analysis_opts_t *opts,
                              tsc_analysis_t **out);
TSC_API void tsc_analysis_free(tsc_analysis_t *a);
/* The pooled record of (layer, head), NULL when the analysis has none. */
TSC_API const tsc_head_pooled_t *tsc_analysis_pooled(const tsc_analysis_t *a, int layer, int head);

/* Writes the summary (keys documented in docs/FORMAT.md §3) into j as one object. */
TSC_API void tsc_analysis_summary_json(const tsc_analysis_t *a, tsc_json_t *j);
/* The same with extra keys: extra(ctx, j) is called inside the object before "nonfinite_numbers"
 * (diagnose adds its "diagnosis" there). */
typedef void (*tsc_summary_extra_fn)(void *ctx, tsc_json_t *j);
TSC_API void tsc_analysis_summary_json_ex(const tsc_analysis_t *a, tsc_json_t *j, tsc_summary_extra_fn extra, void *ctx);
/* tsc_analysis_summary_json into path (atomic). */
TSC_API tsc_status_t tsc_analysis_write_summary(const tsc_analysis_t *a, const char *path);

#ifdef __cplusplus
}
#endif
#endif
