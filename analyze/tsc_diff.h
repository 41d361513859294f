/* tsc_diff.h: a tensor-level diff of two dumps (`tilescope diff A B`, docs/DIFF.md).
 *
 * What a user runs to hold two kernels, two library versions or two machines against each other:
 * every dataset the two dumps share, compared element by element per (step, layer, dataset, head),
 * pooled over the selected batch rows (x and the weights have no head: head -1; k, v, dk and dv
 * are indexed by their kv head, kept when a selected query head reads it).
 *
 *   tsc_diff_opts_t o; tsc_diff_opts_init(&o);
 *   tsc_diff_t *r;
 *   if (tsc_diff_run("a.h5", "b.h5", &o, &r) != TSC_OK) puts(tsc_error_last());
 *   printf("%lld of %lld elements bit-identical\n", (long long)r->total.identical, (long long)r->total.n);
 *   tsc_diff_free(r);
 *
 * Per record, over the pairs (a, b) of its elements:
 *   identical   the stored bits are equal, or both are NaN (payloads aside); between two stored
 *               formats, equal values of equal sign
 *   nonfinite   one side NaN or ±Inf and the other not the same (a NaN against a number, +Inf
 *               against -Inf or a number)
 *   ulp         over pairs finite on both sides: in one stored format, the distance in representable
 *               values (|ord(b) − ord(a)|, ord the monotone order of the format's bit patterns; +0 and
 *               −0 are 0 apart), exact across binades; when the two formats differ, |b − a| in units of
 *               the coarser format's ULP at max(|a|, |b|) (tsc_stats_ulp)
 *   mean_diff   the signed mean of b − a over the finite pairs (in the data's units)
 *   max_abs     max |b − a| over the finite pairs
 *   first       the first differing element in (batch row, token, feature) order, with both values
 *               and both stored bit patterns
 * A record "agrees" when it has no non-finite mismatch and max_ulp <= opts.max_ulp.
 * Datasets, layers and steps present in one dump only, heads a head-selecting capture did not
 * store on either side, and datasets that cannot be compared (shapes differ, not floating-point,
 * tensor-parallel weight shards, a name the format does not define) are listed, not compared.
 * The two dumps must have the same geometry (batch, heads, kv heads, T, D, C): TSC_ERR_SHAPE
 * naming both otherwise. */
#ifndef TSC_DIFF_H
#define TSC_DIFF_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_json.h"
#include "tsc_progress.h"
#include "tsc_select.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    tsc_select_t sel;          /* steps, layers, heads, batch rows compared (default: all) */
    double max_ulp;            /* a record agrees up to this distance (default 0: bit-identical) */
    tsc_progress_t *progress;  /* may be NULL; one unit per (step, layer) compared */
} tsc_diff_opts_t;

TSC_API void tsc_diff_opts_init(tsc_diff_opts_t *o);

typedef struct {
    int64_t n, identical, nonfinite;  /* element pairs; bit-identical (or both NaN); non-finite mismatches */
    int64_t n_finite;                 /* pairs finite on both sides (identical ones included) */
    double max_ulp, sum_ulp;          /* over the finite pairs: the largest and the sum of |ULP distance| */
    double sum_ulp_signed;            /* the sum of the signed ULP distance (b above a: positive) */
    double sum_diff, max_abs;         /* sum of b − a, max |b − a| over the finite pairs */
    int has_first;                    /* a differing element was found: */
    int first_b, first_t, first_d;    /* its batch row, token (or row of a weight) and feature (or column) */
    double first_a, first_bv;         /* its two values */
    uint64_t first_abits, first_bbits;/* their stored bits (little-endian, the stored formats' widths) */
} tsc_diff_stat_t;

typedef struct {
    long long step;
    int layer;
    char name[64];                    /* "q", "o", "tiles/row_max", "w_q", ... */
    int head;                         /* -1 for x and the weights; the kv head for k, v, dk, dv */
    char fmt_a[16], fmt_b[16];        /* the stored formats */
    tsc_diff_stat_t s;
    int agrees;                       /* no non-finite mismatch and max_ulp <= opts.max_ulp */
} tsc_diff_rec_t;

/* The records of one dataset name, pooled. */
typedef struct {
    char name[64];
    size_t n_recs, n_disagree;
    tsc_diff_stat_t s;                /* first: that of first_rec */
    long first_rec;                   /* index into recs of its first record with a difference, -1 none */
    long worst_rec;                   /* its worst record (tsc_diff_worse), -1 when none differs */
} tsc_diff_set_t;

typedef struct {
    char what[160];                   /* "step 3", "step 0 layer 2", "step 0 layer 2 dq (...)" */
    int in_a;                         /* 1: only in A, 0: only in B, -1: in both but not comparable */
} tsc_diff_only_t;

typedef struct {
    char *path_a, *path_b;
    char policy_a[128], policy_b[128];/* the dumps' policy attributes ("" when absent) */
    int batch, n_head, n_kv_head, seq_len, head_dim, d_model; /* the geometry both share */
    char selection[256];              /* tsc_select_format of the selection */
    double max_ulp;
    int n_steps;                      /* steps compared */
    size_t n_recs;
    tsc_diff_rec_t *recs;             /* (step, layer, name in HDF5's order, head) order */
    size_t n_sets;
    tsc_diff_set_t *sets;             /* per dataset name, in the order of first appearance */
    size_t n_only;
    tsc_diff_only_t *only;            /* the first TSC_DIFF_MAX_ONLY, n_only counts all */
    tsc_diff_stat_t total;            /* every record pooled; first: that of first_rec */
    long first_rec, worst_rec;        /* as in tsc_diff_set_t, over every record */
    size_t n_disagree;                /* records that do not agree */
} tsc_diff_t;

#define TSC_DIFF_MAX_ONLY 200

/* Compares a and b (dumps, capture sessions, runs of ranks). On success *out holds the result
 * (tsc_diff_free). Errors name the file: unreadable dumps, differing geometry (TSC_ERR_SHAPE), a
 * selection that keeps no common step or no record (TSC_ERR_MISSING). */
TSC_API tsc_status_t tsc_diff_run(const char *a, const char *b, const tsc_diff_opts_t *opts, tsc_diff_t **out);
/* 1 when record x is worse than y: more non-finite mismatches, else a larger max_ulp, else a
 * larger max |b − a|. */
TSC_API int tsc_diff_worse(const tsc_diff_rec_t *x, const tsc_diff_rec_t *y);
/* Where s's first differing element lies, in the words of dataset name: "batch 0, token 5, feature 3"
 * (q k v o do), "batch 0, token 5" (lse), "batch 0, token 5, channel 3" (x), "batch 0, token 5, key
 * tile 3" (tiles/<stat>), "row 5, column 3" (the weights). Returns buf ("" when s has none). */
TSC_API const char *tsc_diff_where(const char *name, const tsc_diff_stat_t *s, char *buf, size_t cap);
/* Every record, the datasets, the not-compared list and the totals as one JSON object (docs/DIFF.md). */
TSC_API void tsc_diff_json(const tsc_diff_t *r, tsc_json_t *j);
TSC_API void tsc_diff_free(tsc_diff_t *r);

#ifdef __cplusplus
}
#endif
#endif
