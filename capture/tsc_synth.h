/* tsc_synth.h: synthetic dumps with planted, documented structure (`tilescope synth`), the test
 * and demo input of replay, analysis and figures.
 *
 * What is planted (docs/FORMAT.md §1.6 has the full recipe): in the planted layers and heads,
 * the planted rows have exactly two maxima in their scores, at the sink key 0 and at key p (the
 * two key vectors are bit-identical, so α·q·k ties in any arithmetic), with every other
 * visible score at least 11 below them (the regime of docs/MECHANISM.md §5: the non-tied P̄ mass stays
 * below half an ULP of the tied sum); V of the planted kv heads has the planted features drawn
 * from N(-2.2, 0.4) for every token; dO of the planted heads is negative at those features
 * (N(-1, 0.25) x 1e-3); x has two constant "shared" channels; w_q of the planted heads has an
 * extra rank-1 part along them; V[p] at the planted features is nudged so that V[0] + V[p] is a
 * BF16 midpoint (every planted row then rounds the same way under bf16-torch). Every other row
 * has a unique maximum (a random query, redrawn until the margin is >= 1 after BF16 rounding),
 * and V, dO are symmetric around 0 there: no ties, no sign bias. o and lse are computed with the CPU reference (tsc_attention.h) under the policy
 * stored in the root attribute "policy" (default bf16-torch with the shape's tiles).
 *
 *   tsc_synth_opts_t o; tsc_synth_opts_init(&o);
 *   o.shape = "tiny"; o.seed = 7;
 *   if (tsc_synth_write("synth.h5", &o) != TSC_OK) fprintf(stderr, "%s\n", tsc_error_last());
 *   tsc_synth_shape_t s; tsc_synth_shape_get("gpt2-small", &s);   // s.planted_heads, ...
 *   // every value depends only on (seed, shape, step, layer): same seed, same bits
 */
#ifndef TSC_SYNTH_H
#define TSC_SYNTH_H

#include "tsc_export.h"

#include <stdint.h>

#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSC_SYNTH_MAX_LIST 16

/* A named shape and where its structure is planted. Layers and heads are 0-based. */
typedef struct {
    const char *name;         /* "tiny", "gpt2-small", "llama-gqa" */
    int batch, n_layer, n_head, n_kv_head, head_dim, d_model, seq_len;
    int tile_q, tile_k;
    const char *default_steps;/* set grammar, e.g. "0:3" */
    int n_planted_layers, planted_layers[TSC_SYNTH_MAX_LIST];
    int n_planted_heads, planted_heads[TSC_SYNTH_MAX_LIST];   /* query heads */
    int tie_key;              /* p: the second tied key (the first is the sink, key 0) */
    int rows_stride;          /* planted rows: t >= tie_key with (t - tie_key) % rows_stride == 0 */
    int n_features, features[TSC_SYNTH_MAX_LIST];             /* planted V/dO features */
    int x_channels[2];        /* the two shared channels of x (constant +4 and -3) */
    const char *description;  /* one line for --help */
} tsc_synth_shape_t;

/* Fills *out with the shape called name. TSC_ERR_ARG (listing the names) when unknown. */
TSC_API tsc_status_t tsc_synth_shape_get(const char *name, tsc_synth_shape_t *out);
/* The shape names, comma-separated ("tiny, gpt2-small, llama-gqa"). */
TSC_API const char *tsc_synth_shape_names(void);
/* The i-th shape (0-based), or NULL past the end (for help texts). */
TSC_API const tsc_synth_shape_t *tsc_synth_shape_at(int i);

typedef struct {
    const char *shape;        /* default "tiny" */
    uint64_t seed;            /* default 1 */
    const char *steps;        /* set grammar (tsc_select.h) of the steps to write; NULL: the shape's
                                 default. Open ranges ("5:") are refused. */
    const char *layers;       /* set of layers to write; NULL: all */
    int seq_len;              /* T; 0 (default): the shape's. Otherwise in [tie_key + 1, 131072]:
                                 long-context dumps (one layer of llama-gqa at T = 32768) */
    int plant;                /* 1 (default): plant the structure; 0: plain random everywhere */
    int deflate;              /* 0..9 */
    const char *policy;       /* policy of o/lse; NULL: "bf16-torch" with the shape's tiles */
    int batch;                /* B; 0 (default): the shape's (1). Rows are drawn independently */
    int ranks;                /* 0 or 1 (default): one dump at path. N > 1: a data-parallel run of N
                                 ranks: "X.rank<r>.h5" beside path "X.h5", each with B / N of the B
                                 rows (rank r: rows [r B/N, (r+1) B/N)), and the manifest at path
                                 (docs/FORMAT.md §1.8); the rows' values are those of the one dump */
    /* called after each (step, layer) written with the count done and the total (the library
     * never prints; `tilescope synth` draws a progress bar on a terminal with it); may be NULL */
    void (*progress)(void *ctx, int done, int total);
    void *progress_ctx;
} tsc_synth_opts_t;

TSC_API void tsc_synth_opts_init(tsc_synth_opts_t *o);

/* Writes the dump to path (temporary name + rename). TSC_ERR_ARG for a bad option (unknown
 * shape, bad steps/layers/policy, a set selecting no step or more than 100000 steps),
 * TSC_ERR_IO naming path when it cannot be written; nothing is left at path on failure. */
TSC_API tsc_status_t tsc_synth_write(const char *path, const tsc_synth_opts_t *opts);

/* The range of the tied score α·q·k the planted rows have at keys 0 and p (before rounding; drawn
 * per row, uniformly), and the least gap to every other visible score that synth guarantees
 * (after BF16 rounding of q and k). */
#define TSC_SYNTH_TIE_SCORE_LO 14.0
#define TSC_SYNTH_TIE_SCORE_HI 16.0
#define TSC_SYNTH_MIN_GAP 11.0
/* The least margin between the maximum and the second score of every other row. */
#define TSC_SYNTH_MIN_MARGIN 1.0

#ifdef __cplusplus
}
#endif
#endif
