/* an_internal.h: the pieces of `tilescope analyze` (tsc_analysis.h) shared by its files.
 *
 * analysis.c is the driver: it opens the dump, resolves the policies and the selection (an_run_t),
 * and for every (step, layer) replays each selected head (an_head_t, one per thread) and hands
 * each measurement the few arrays it needs, as a small view:
 *   an_bias.c      a: error summaries, per-feature bias, the top feature; the pooled flags
 *   an_ties.c      b: ties, P-bar = 1 and sinks from the lp scores
 *   an_census.c    c: the rounding census of the P-bar V additions
 *   an_probe.c     d: the automatic probe and the O-bar_error(t) curves
 *   an_rank1.c     e: identity (1) and the rank-1 decomposition of the dW^Q error
 *   an_spectral.c  f: spectral norms of the weights
 *   an_output.c    the (step, layer) groups and the cumulative arrays of analysis.h5
 * Internal to the analyze layer (no TSC_API). */
#ifndef TSC_AN_INTERNAL_H
#define TSC_AN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tsc_analysis.h"
#include "tsc_attention.h"
#include "tsc_census.h"
#include "tsc_dump.h"
#include "tsc_h5.h"
#include "tsc_stats.h"

/* What is fixed for the whole run. */
typedef struct {
    const tsc_analysis_opts_t *o;
    tsc_analysis_t *a;
    tsc_dump_t *d;
    const tsc_dump_meta_t *m;
    tsc_policy_t hp, lp, lp_hd;
    tsc_format_t o_fmt, delta_fmt, out_fmt, v_fmt;
    int B, H, Hkv, T, D, C, N; /* N: rank-1 terms per head */
    int nb, nh, nL;            /* selected batch rows, heads; analysed layers */
    int *bs, *hs, *layers;     /* [nb], [nh], [nL] (layers sorted) */
} an_run_t;

/* The per (step, layer) output arrays, indexed by the head's position hi in the selection. */
typedef struct {
    int has_o;                    /* the dump has o at this (step, layer) */
    int fit_on;                   /* the first analysed step: each head's O_lp vs o into fit_o */
    tsc_format_t o_dtype;         /* with fit_on: the stored format of o */
    tsc_fit_cmp_t *fit_o;         /* [nh] */
    double *f_ulp, *f_val, *f_p;  /* [nh, D] */
    int64_t *f_flag;              /* [nh, D] */
    double *dd;                   /* [nh, nb, T] delta_lp - delta_hp */
    int64_t *sink;                /* [nh, T] */
    double *curve, *curve_c;      /* [nh, T] O-bar_error, automatic and chosen probe */
    int64_t *probe;               /* [nh, 3] */
    double *cos, *sv;             /* [nh, N, N], [nh, N] */
    tsc_moments_t *mu, *mc;       /* [nh, D]: each head's moments of this (step, layer), into the pool in
                                   * head order once every head of the pair is in (an_pool_t) */
    int *r1;                      /* [nh]: the head filled its rank-1 rows (sv, cos) */
    int has_rank1;                /* any head did */
} an_group_t;

/* Per (layer, head, feature) moments pooled over the analysed steps and batch rows: the flag test. */
typedef struct {
    tsc_moments_t *u;  /* (O_lp - O_hp)/ulp per row, [nL, nh, D] */
    tsc_moments_t *c;  /* delta contributions dO * (O_lp - O_hp) per row, [nL, nh, D] */
} an_pool_t;

/* The top rank-1 term of each (step, layer, head), for the across-step similarity. */
typedef struct {
    int S;
    double *top_a, *top_b;  /* [S, nL, nh, D], [S, nL, nh, C] */
    int8_t *has;            /* [S, nL, nh] */
} an_across_t;

/* The rank-1 candidates of one head: the N tokens with the largest |coeff| among the rows with
 * >= 2 exact maxima (where the biased rounding acts, docs/MECHANISM.md section 5), then among the others. */
typedef struct {
    int n, cap, D, C;
    double *coeff, *a, *b;  /* [cap], [cap, D], [cap, C] */
    uint8_t *tie;           /* [cap]: the candidate's row has >= 2 exact maxima */
} an_cand_t;

/* One thread's scratch for one head (see tsc_analysis.h for the memory bound). */
typedef struct {
    float *q, *k, *v, *dO, *od, *o_hp, *o_lp, *dq_lp, *dq_hd, *vr, *x; /* [T, D]; x [T, C] */
    float *lse_hp, *lse_lp, *dl_hp, *dl_lp, *dl_hd;                    /* [T] */
    double *kd, *pk, *pblk, *xd;          /* kd, pk [T, D], pblk [AN_PK_ROWS, T], xd [T, C] */
    double *dw, *dwt;                     /* [D, C] */
    double *expct;                        /* [T] expected row-max count per key */
    float *o_hp_all, *o_lp_all, *dO_all;  /* [nb, T, D] */
    float *dl_hp_all, *dl_lp_all;         /* [nb, T] */
    uint8_t *evt;                         /* [nb, T, D] census events */
    uint8_t *tie_row;                     /* [nb, T] rows with >= 2 exact maxima */
    tsc_attn_trace_t tr;                  /* lp forward, a window of rows (tsc_attn_trace_init_rows) */
    int tr_b;                             /* batch row of the last lp forward, -1 none */
    int tr_mode;                          /* what the row function does (AN_TR_*) */
    int tr_bi, tr_t;                      /* AN_TR_ROWS: batch row index; AN_TR_PROBE: the row */
    int tr_pk;                            /* AN_TR_ROWS: P K rows too (identity or x) */
    tsc_census_t cs;                      /* this batch row's census so far */
    double *prow, *prm;                   /* AN_TR_PROBE: the row's P-bar [T], running max [n_kt] */
    an_cand_t cand;
} an_scratch_t;

enum { AN_PK_ROWS = 64 };
/* What the lp forward's row function does with each completed row: nothing; measurements b, c
 * and the P K rows of e (an_ties_row, an_census_row, an_pk_row); keep the probe row's P-bar. */
enum { AN_TR_NONE = 0, AN_TR_ROWS = 1, AN_TR_PROBE = 2 };
/* Rows the lp trace window holds (the forward's row block). */
enum { AN_TR_WINDOW = TSC_ATTN_ROW_GROUP };

static inline int an_n_visible(int causal, int T, int t) { return causal ? t + 1 : T; }

/* a: bias */
typedef struct {
    const float *o_lp, *o_hp, *dO;   /* [n_rows, D] */
    const float *dl_lp, *dl_hp;      /* [n_rows] */
    size_t n_rows;
    int D;
    tsc_format_t o_fmt, delta_fmt;
    double *f_ulp, *f_val, *f_p;     /* [D]: this head's rows of the group arrays */
    tsc_moments_t *pool_u, *pool_c;  /* [D]: out, this head's moments of (O_lp - O_hp)/ulp and of the
                                      * delta contributions (merged into the pool by the driver) */
    int64_t n_head_tests;
    const tsc_flag_rule_t *rule;
} an_bias_view_t;
void an_bias_measure(const an_bias_view_t *v, tsc_head_result_t *r);
/* The flags pooled per (layer, head, feature) into the head records and cumulative/feature_*. */
tsc_status_t an_flags_pool(const an_run_t *R, const an_pool_t *pool, hid_t fid);

/* b: ties and sinks */
typedef struct {
    int T, causal;
    double tie_eps;
    int64_t *sink;           /* [T] rows whose max each key holds */
    double *expct;           /* [T] the same expected with the max at a uniformly random visible key */
    uint8_t *tie_row;        /* [T] this batch row's rows with >= 2 exact maxima */
} an_ties_view_t;
/* Row t, from its lp scores srow [T] (as rounded to the S stage) and P-bar prow [T]; rows come in
 * order t = 0, 1, ... */
void an_ties_row(const an_ties_view_t *v, int t, const double *srow, const double *prow, tsc_head_result_t *r);
void an_sinks(const int64_t *sink, const double *expct, int T, int64_t n_rows, tsc_head_result_t *r);

/* c: census */
typedef struct {
    const float *vr;         /* v rounded to lp's v format [T, D] */
    int T, D, causal, block_k;
    tsc_format_t out_fmt;
    uint8_t *evt;            /* [T, D] of this batch row */
} an_census_view_t;
/* Row t into cs from its P-bar prow [T] and l, the row's denominator (l after its last tile). */
void an_census_row(const an_census_view_t *v, int t, const double *prow, double l, tsc_census_t *cs);
/* Adds one batch row's census cs to the head's record. */
void an_census_add(const tsc_census_t *cs, tsc_head_result_t *r);
double an_census_share(const float *o_lp, const float *o_hp, const uint8_t *evt, size_t n);

/* d: probes */
typedef struct {
    const float *o_lp, *o_hp;  /* [n_rows, D] */
    const uint8_t *tie_row;    /* [n_rows] */
    size_t n_rows;
    int D;
} an_probe_view_t;
/* The row (over nb*T) with the largest error of feature i in sign sgn, among the tie rows when any. */
size_t an_probe_pick(const an_probe_view_t *v, int i, double sgn, double *err);
typedef struct {
    const double *prow, *prm;     /* the row's lp P-bar [T] and running max per key tile [n_kt] */
    const float *q, *k, *v, *vr;  /* [T, D] */
    int T, D, causal, block_k;
    double scale;
    tsc_format_t out_fmt;
} an_curve_view_t;
void an_obar_curve(const an_curve_view_t *v, int t, int i, double *out);

/* e: identity (1) and rank-1 */
typedef struct {
    const float *k;              /* [T, D] */
    int T, D, causal;
    double *kd, *pblk, *pk;      /* scratch [T, D], [AN_PK_ROWS, T]; out [T, D] */
} an_pk_view_t;
/* P K from lp's scores row by row: an_pk_begin, then an_pk_row for t = 0, 1, ... T-1 with the
 * row's scores srow [T] and its LSE (as the forward returns it). */
void an_pk_begin(const an_pk_view_t *v);
void an_pk_row(const an_pk_view_t *v, int t, const double *srow, double lse);
tsc_status_t an_identity_row(const float *dq_hd, const float *dq_lp, const float *dl_hd, const float *dl_lp,
                             const double *pk, int T, int D, double scale, double *res, double *lhs);
typedef struct {
    const double *coeff, *pk, *xd;  /* [T], [T, D], [T, C] */
    int T, D, C;
    double scale;
    double *dw, *dwt;               /* [D, C]: running sum, scratch */
    double *term_sq;                /* running sum of |a PK[T]^T X[T]|_F^2 */
    an_cand_t *cand;
    const uint8_t *tie_row;         /* [T]: rows with >= 2 exact maxima (an_ties_row) */
} an_dwq_view_t;
tsc_status_t an_dwq_row(const an_dwq_view_t *v);
typedef struct {
    const an_cand_t *cand;
    const double *dw;          /* [D, C] */
    double term_sq, scale;
    int N;
    double *sv, *cos;          /* this head's rows [N], [N, N] of the group arrays */
    double *top_a, *top_b;     /* [D], [C]: this (step, layer, head)'s across-step slot */
    int8_t *top_has;
} an_rank1_view_t;
tsc_status_t an_rank1_finish(const an_rank1_view_t *v, tsc_head_result_t *r, int *filled);

/* f: spectral norms of one (step, layer), one matrix at a time so that any process can compute
 * one: an_spectral_part the norm of w_q, w_k, w_v or w_o (w = 0..3; NaN when the dump lacks it)
 * and, for a w_q of H*D rows, the per-head norms hn[R->H] (has_hn 1); an_spectral_merge the four
 * into lr; an_spectral_write puts w_norm and, with has_hn, wq_head_norm into g. */
typedef struct {
    double norm;
    int unconverged;          /* norms of this part whose iteration did not converge */
    int64_t n_nonfinite;      /* NaN/Inf values of the matrix */
    char first_nonfinite[96]; /* "w_q[r=3,c=5]" or "" */
    int has_hn;
} an_spectral_part_t;
tsc_status_t an_spectral_part(const an_run_t *R, long long step, int layer, int w, an_spectral_part_t *o, double *hn);
void an_spectral_merge(long long step, int layer, const an_spectral_part_t parts[4], tsc_layer_result_t *lr);
tsc_status_t an_spectral_write(const an_run_t *R, hid_t g, const tsc_layer_result_t *lr, const double *hn, int has_hn);

/* output */
/* One dataset to write: name, shape, values (int64 when i is not NULL, else the doubles d), and
 * its dim_labels and units attributes (tsc_h5_write_ints / tsc_h5_write_doubles). */
typedef struct {
    const char *name;
    int rank;
    const uint64_t *dims;
    const double *d;
    const int64_t *i;
    const char *axes, *unit;
} an_array_t;
/* Writes the n arrays into loc in order, stopping at the first error (its status). */
tsc_status_t an_write_arrays(hid_t loc, const an_array_t *a, size_t n);
tsc_status_t an_write_group(const an_run_t *R, const an_group_t *G, hid_t g);
tsc_status_t an_write_cumulative(const an_run_t *R, const an_across_t *ac, hid_t fid, const char *path);
/* summary.json of a into path (atomic), with extra's keys (tsc_analysis_summary_json_ex). */
tsc_status_t an_write_summary_ex(const tsc_analysis_t *a, const char *path, tsc_summary_extra_fn extra, void *ctx);

/* Index of v in a[0..n) (it is there). */
static inline size_t an_index_ll(const long long *a, long long v) {
    size_t i = 0;
    while (a[i] != v) i++;
    return i;
}
static inline size_t an_index_int(const int *a, int v) {
    size_t i = 0;
    while (a[i] != v) i++;
    return i;
}

#endif
