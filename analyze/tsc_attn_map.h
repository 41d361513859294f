/* tsc_attn_map.h: the attention pattern of one head, recomputed from a dump (docs/VIEW.md).
 *
 * For one (step, layer, query head, batch row) of a dump, the scores S = α·q·kᵀ are computed by the
 * attention reference (kernels/tsc_attention.h) under a precision policy (default "fp32"), as
 * rounded to the policy's S stage, from the dump's q and the k of the head's kv head (GQA: query
 * head h reads kv head h / (H / Hkv)). The probabilities are P = softmax(S) per row, exponentials
 * and normalisation in double, 0 at masked keys (causal: j > i). On these:
 *   - tied row: a row with at least 2 visible keys whose score is within ε of the row's maximum
 *     (S_ij ≥ max_j S_ij − ε; ε = tie_eps, default 1e-3, the analysis' default), the analysis'
 *     `rows_multi_max_eps` rule; exact ties (S_ij == max) are counted too;
 *   - sink key: a key j whose column receives at least 10% of the probability mass of all rows
 *     (Σ_i P_ij ≥ 0.1·T) and at least twice what uniform attention over each row's visible keys
 *     would give it (Σ_i P_ij ≥ 2·Σ_{i: j visible} 1/n_visible(i)).
 *
 *   tsc_attn_map_t m;
 *   if (tsc_attn_map_compute(d, 0, 1, 3, 0, NULL, 0, &m) != TSC_OK) puts(tsc_error_last());
 *   ... m.p[i * m.T + j], m.tie_eps_count[i], m.is_sink[j] ...
 *   tsc_attn_map_free(&m);
 *
 * Memory. The scores are read a few rows at a time from the reference's row-window trace, so the
 * computation holds O(T·(D + tile)) besides P; P itself is kept only as asked (tsc_attn_map_keep_t):
 * every row at full resolution (tsc_attn_map_compute: T x T floats, for short T), a band of rows,
 * or max-pooled f x f blocks (an overview: (T/f)² floats), so a long-context map (T up to 131072)
 * costs what its figure shows. Tie counts, column masses and sinks always cover every row.
 */
#ifndef TSC_ATTN_MAP_H
#define TSC_ATTN_MAP_H

#include "tsc_export.h"

#include <stdint.h>

#include "tsc_dump.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSC_ATTN_MAP_TIE_EPS 1e-3      /* default ε of a tie */
#define TSC_ATTN_MAP_SINK_SHARE 0.10   /* a sink's least share of all rows' probability mass */
#define TSC_ATTN_MAP_SINK_UNIFORM 2.0  /* ... and least multiple of its mass under uniform attention */

typedef struct {
    int T, causal;
    int head, kv_head, batch, layer;
    long long step;
    double tie_eps;
    char policy[128];        /* the policy S was rounded under (canonical string) */
    float *p;                /* [p_rows, p_cols] the P kept: rows p_row0 .. p_row0 + p_rows - 1 of P
                              * (pool 1: p_cols = T, 0 where masked), or of P max-pooled in pool x pool
                              * blocks (the max over the block's visible entries; -1 where it has none) */
    int pool, p_row0, p_rows, p_cols;
    double *s;               /* [p_rows, T] S of the kept rows as the policy rounds it (-inf where masked),
                              * when tsc_attn_map_keep_t.scores asks for it (pool 1); else NULL */
    int32_t *tie_eps_count;  /* [T] visible keys within ε of the row max */
    int32_t *tie_exact_count;/* [T] visible keys equal to the row max */
    double *col_mass;        /* [T] Σ_i P_ij */
    double *col_uniform;     /* [T] Σ_{i: j visible} 1 / n_visible(i) */
    uint8_t *is_sink;        /* [T] 1 for a sink key (rule above) */
    int n_tied_rows;         /* rows with tie_eps_count >= 2 */
    int n_sinks;
} tsc_attn_map_t;

/* Computes the map of (step, layer, head, batch) of an open dump under policy (NULL or "": fp32;
 * any policy string of tsc_policy_parse) with tie ε tie_eps (<= 0: the default). *m is the
 * caller's (tsc_attn_map_free, also after a failure). Errors: TSC_ERR_ARG (head, batch out of
 * range, a bad policy; the message lists the valid range), TSC_ERR_MISSING (no such step or
 * layer, no q or k), TSC_ERR_NONFINITE (q or k holds NaN/Inf), the dump reader's errors,
 * TSC_ERR_NOMEM or the memory budget's error (T x T floats for P). */
TSC_API tsc_status_t tsc_attn_map_compute(tsc_dump_t *d, long long step, int layer, int head, int batch,
                                          const char *policy, double tie_eps, tsc_attn_map_t *m);
/* Which part of P a map keeps (see tsc_attn_map_t.p): rows [row0, row1) of P max-pooled in
 * pool x pool blocks (pool 1: P itself), row indices counted in the pooled grid of ceil(T/pool)
 * rows; row1 <= 0 means to the last. */
typedef struct {
    int row0, row1;
    int pool;
    int scores;              /* 1: keep the rows' S too (tsc_attn_map_t.s; pool 1 only) */
} tsc_attn_map_keep_t;

/* tsc_attn_map_compute keeping only what keep asks of P (NULL: every row, pool 1, which is
 * tsc_attn_map_compute). TSC_ERR_ARG also for pool < 1, rows outside the grid, or scores with pool > 1;
 * the memory budget is checked against what is kept. */
TSC_API tsc_status_t tsc_attn_map_compute_kept(tsc_dump_t *d, long long step, int layer, int head, int batch,
                                               const char *policy, double tie_eps, const tsc_attn_map_keep_t *keep,
                                               tsc_attn_map_t *m);
TSC_API void tsc_attn_map_free(tsc_attn_map_t *m);

/* The step, layer, head and batch choices of a dump as one line for messages ("steps 0, 1, 2;
 * layers 0-3; heads 0-7 (2 kv heads); batch rows 0-0"), into buf. */
TSC_API void tsc_attn_map_choices(tsc_dump_t *d, char *buf, size_t cap);
/* The layers step holds (a capture may keep a few of the model's), as "0, 3, 5-7", into buf (at most cap
 * bytes); "none" when it holds none or cannot be read. */
TSC_API void tsc_attn_map_step_layers(tsc_dump_t *d, long long step, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
