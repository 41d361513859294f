/* tsc_attn_view.h: looking at attention (docs/VIEW.md): the probability pattern P of one head or of
 * every head of a layer as a figure, and an offline HTML viewer of a dump's patterns.
 *
 * The source is a dump (file or capture-session folder) or an analysis folder (DIR/summary.json
 * names the dump; its per-head numbers, ties and sinks are shown beside the patterns). P is
 * recomputed from the dump's q and k (analyze/tsc_attn_map.h: S under a policy, by default the one that
 * describes the dump: the analysis' lp, else tsc_dump_policy's rule in analyze/tsc_fit.h;
 * tied rows and sink keys by the rules documented there).
 *
 *   tsc_attn_fig_opts_t o; tsc_attn_fig_opts_init(&o);
 *   o.source = "run.h5"; o.layer = 1; o.head = 3;          // o.head = -1: every head of the layer
 *   tsc_json_t *j = tsc_json_new();                          // optional: what was drawn
 *   if (tsc_attn_figure_write(&o, "attn.png", TSC_IMG_AUTO, j) != TSC_OK) puts(tsc_error_last());
 *
 *   tsc_view_opts_t v; tsc_view_opts_init(&v); v.source = "out";
 *   tsc_view_write(&v, "view.html", NULL);
 */
#ifndef TSC_ATTN_VIEW_H
#define TSC_ATTN_VIEW_H

#include "tsc_export.h"

#include <stddef.h>

#include "tsc_heatmap.h"
#include "tsc_json.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Log colour scale of every pattern: P in [TSC_ATTN_P_MIN, 1]; smaller P shows as the lowest colour. */
#define TSC_ATTN_P_MIN 1e-6

typedef struct {
    const char *source;      /* dump file, session folder or analysis folder (required) */
    const char *dump;        /* the dump when source is an analysis folder; NULL: the one summary.json names */
    long long step;          /* -1: the first step of the dump */
    int layer;               /* required (>= 0) */
    int head;                /* -1: every head of the layer (the grid, GQA groups one per grid row) */
    int batch;               /* batch row (0) */
    int row0, row1;          /* rows [row0, row1) (-1, -1: all); causal: keys [0, row1) are shown */
    const char *policy;      /* S rounded under this policy; NULL: the dump's (above) */
    double tie_eps;          /* 0: TSC_ATTN_MAP_TIE_EPS */
    double width_in, height_in; /* 0: 3.25 x 3.4 (one head; larger with token labels), 6.5 wide (grid) */
    double dpi;              /* 300 */
    double font_pt;          /* 8 */
} tsc_attn_fig_opts_t;

TSC_API void tsc_attn_fig_opts_init(tsc_attn_fig_opts_t *o);

/* Draws the figure into path (PNG, SVG or PDF by fmt or the extension), written atomically.
 * desc (may be NULL) receives one JSON object: file, title, subtitle, step, layer, batch, rows [a, b),
 * image size in pixels (PNG), the boxes of the title, subtitle and heatmap in pixels (layout), and
 * per head: head, kv_head, tied_rows (row indices), sinks (key indices), the plot box {x, y, w, h}
 * in pixels at dpi, and the pooling. When the step holds tokens: tokens ("text" or "ids"), the
 * token of each shown row and key (row_tokens, key_tokens) and the labels drawn with their boxes
 * (row_labels, key_labels). Rows and keys are labelled with their tokens (every one when they fit,
 * else every few as "i: token"); with no size given, a one-head figure of at most 48 rows grows
 * until each has its label. Errors: TSC_ERR_ARG (bad options: the message lists the dump's steps,
 * layers and heads), TSC_ERR_MISSING (a layer the step does not hold: the message lists the layers
 * captured at that step), those of tsc_attn_map_compute, the reader of summary.json, and the
 * output's. */
TSC_API tsc_status_t tsc_attn_figure_write(const tsc_attn_fig_opts_t *o, const char *path, tsc_image_format_t fmt,
                                           tsc_json_t *desc);

typedef struct {
    const char *source;      /* dump or analysis folder (required) */
    const char *dump;        /* as tsc_attn_fig_opts_t */
    const char *steps;       /* selection of steps ("0,2", "0:4"); NULL: at most max_steps from the first */
    int max_steps;           /* 4 */
    const char *policy;      /* NULL: the dump's (above) */
    int overview;            /* edge of each head's overview image in cells (max pooling), 128 */
    double max_mb;           /* size budget of the HTML in MB (20): full-resolution patterns are embedded,
                                most interesting heads first, while the file stays below it */
    int batch;               /* batch row (0) when batches is NULL */
    const char *batches;     /* selection of batch rows ("0,1", "0:4", "all"); NULL: batch alone. Every
                                (step, batch row, layer, head) has its pattern; the budget covers them all */
} tsc_view_opts_t;

TSC_API void tsc_view_opts_init(tsc_view_opts_t *o);

typedef struct {
    int n_steps, n_layers, n_heads;   /* patterns embedded (heads = per layer) */
    int n_batches;                    /* batch rows, each with every step's patterns */
    int n_tokens;                     /* (step, batch row)s whose input tokens the page shows */
    int n_full;                       /* patterns embedded at full resolution */
    int n_skipped;                    /* (step, layer, head)s left out: q or k holds NaN/Inf (a head
                                         the capture did not keep reads as NaN) */
    size_t bytes;                     /* size of the HTML written */
} tsc_view_info_t;

/* Writes one self-contained HTML file (inline script and style, patterns as embedded PNG data)
 * to path, atomically. When the dump holds a step's input tokens (tsc_dump.h), the page labels the
 * pattern's axes with them and names them on hover (text when present, else ids). info may be NULL. Errors as tsc_attn_figure_write; TSC_ERR_UNSUPPORTED when
 * even the overviews do not fit max_mb (the message says which option to change). */
TSC_API tsc_status_t tsc_view_write(const tsc_view_opts_t *o, const char *path, tsc_view_info_t *info);

#ifdef __cplusplus
}
#endif
#endif
