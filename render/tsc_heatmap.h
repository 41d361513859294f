/* tsc_heatmap.h: matrices as heatmaps (cairo + pango): axes, ticks, titles, colour bars, masked
 * and non-finite cells, explicit pooling of large matrices, multi-panel grids; PNG, SVG, PDF.
 *
 * A figure is designed in points at a physical size (default 3.25 x 2.6 inches, text >= 7 pt), so
 * it is legible when printed at that size; PNG output is that design rasterised at opts.dpi.
 * Rendering happens in memory (tsc_heatmap_render gives a cairo image surface you can probe);
 * tsc_heatmap_write re-renders onto a PNG, SVG or PDF target and renames a complete file into place.
 *
 *   tsc_heatmap_opts_t o; tsc_heatmap_opts_init(&o);
 *   o.cmap = TSC_CMAP_COOLWARM; o.norm_kind = TSC_NORM_SYMMETRIC; o.cbar_label = "O_lp - O_hp";
 *   tsc_heatmap_panel_t p = {.data = err, .rows = T, .cols = D, .title = "layer 1, head 8"};
 *   tsc_heatmap_info_t info;                                 // err: [T, D] f32, row-major
 *   tsc_status_t st = tsc_heatmap_write(&o, &p, 1, "err.png", TSC_IMG_AUTO, &info);
 *
 * Honest reduction: a matrix with more cells than the plot has pixels (PNG), or than opts.max_cells
 * per axis (SVG/PDF), is pooled in blocks before drawing, never sampled: max-|x| pooling (the
 * default; each shown cell holds the value of largest magnitude in its block, sign kept, so
 * extremes are never lost) or mean pooling (magnitudes). The figure says so in its note line,
 * e.g. "4096x4096 shown as 683x683, max-|x| pooling 6x6". Cells are drawn as flat blocks (nearest
 * neighbour), never interpolated.
 * Masked cells (a caller mask or the causal upper triangle, col > row) are drawn as grey diagonal
 * hatching on white and named in the note; a pooled block is masked only when all its cells are.
 * Non-finite cells (NaN, Inf) are drawn magenta (TSC_CMAP_BAD_ARGB) and counted in the note; a
 * pooled block with any non-finite unmasked cell is non-finite. The colour scale comes from the
 * finite, unmasked source cells (or a fixed norm) and is shown by a colour bar with label and units.
 */
#ifndef TSC_HEATMAP_H
#define TSC_HEATMAP_H

#include "tsc_export.h"

#include <stdint.h>

#include <cairo.h>

#include "tsc_colormap.h"
#include "tsc_status.h"
#include "tsc_surface.h" /* tsc_image_format_t */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TSC_POOL_MAXABS = 0, /* value of largest magnitude in each block (sign kept): error maps */
    TSC_POOL_MEAN,       /* mean of the finite unmasked cells of each block: magnitudes */
    TSC_POOL_NONE        /* refuse to reduce: TSC_ERR_ARG if the matrix does not fit the pixels */
} tsc_pool_t;

/* One panel: a matrix and its labels. Strings are UTF-8 and drawn as plain text (no markup). */
typedef struct {
    const float *data;                /* [rows, cols] f32, row-major; NaN/Inf allowed */
    int rows, cols;                   /* >= 1 each */
    const uint8_t *mask;              /* [rows, cols] optional, nonzero = masked */
    int causal;                       /* nonzero: also mask the causal upper triangle (col > row) */
    const char *title;                /* panel title or NULL */
    const char *xlabel, *ylabel;      /* axis labels or NULL */
    int x_origin, y_origin;           /* label of index 0 on each axis (e.g. 1 for 1-based heads) */
    const char *const *xtick_labels;  /* [cols] optional category names, replacing numbers */
    const char *const *ytick_labels;  /* [rows] optional */
    tsc_norm_t norm;                  /* this panel's fixed scale (per-panel scale with fixed_norm) */
} tsc_heatmap_panel_t;

typedef struct {
    double width_in, height_in;  /* physical figure size in inches (3.25 x 2.6) */
    double font_pt;              /* base text size in points, >= 7 (8) */
    double dpi;                  /* PNG resolution (300) */
    const char *title;           /* figure title or NULL */
    const char *font_family;     /* pango family ("DejaVu Sans") */
    int grid_cols;               /* panels per grid row; 0: all in one row up to 4 (0) */
    int panel_letters;           /* prefix panel titles with (a), (b), ... when several panels (1) */
    tsc_cmap_t cmap;             /* TSC_CMAP_VIRIDIS */
    tsc_norm_kind_t norm_kind;   /* for autoscaling (TSC_NORM_LINEAR) */
    int fixed_norm;              /* 0: scale from the data; 1: use .norm (shared) / panel.norm (0) */
    tsc_norm_t norm;             /* the shared fixed scale */
    int per_panel_scale;         /* 0: one scale and colour bar for all panels; 1: one each (0) */
    const char *cbar_label;      /* colour bar label or NULL */
    const char *cbar_units;      /* units, shown as "label [units]", or NULL */
    tsc_pool_t pool;             /* reduction method (TSC_POOL_MAXABS) */
    int pool_factor;             /* block edge; 0 = smallest that fits (0). Raised if too small. */
    int max_cells;               /* SVG/PDF: most cells per axis before pooling (512) */
    int equal_aspect;            /* square cells (plots shrink and centre to keep them) (0) */
} tsc_heatmap_opts_t;

/* What was drawn for one panel (for tests, captions and reports). Coordinates are in the output's
 * units, from the top-left corner: pixels for PNG/tsc_heatmap_render, points for SVG/PDF. */
typedef struct {
    double plot_x, plot_y, plot_w, plot_h;   /* the cell area (whole pixels for PNG) */
    double cbar_x, cbar_y, cbar_w, cbar_h;   /* its colour bar (the shared one when shared) */
    int shown_rows, shown_cols;              /* cells drawn after pooling */
    int pool_rows, pool_cols;                /* block size (1 x 1 = no pooling) */
    tsc_pool_t pool;                         /* method of the reduction (when pooled) */
    long long n_nonfinite;                   /* unmasked source cells that are NaN or Inf */
    long long n_masked;                      /* masked source cells */
    tsc_norm_t norm;                         /* the colour scale used */
    char note[512];                          /* this panel's note as printed on the figure (pooling,
                                                masked and non-finite counts), "" if none: for captions */
} tsc_heatmap_info_t;

/* Defaults as listed above. */
TSC_API void tsc_heatmap_opts_init(tsc_heatmap_opts_t *o);

/* Renders n >= 1 panels into a new ARGB32 image of round(width_in * dpi) x round(height_in * dpi)
 * pixels; *out is the caller's (cairo_surface_destroy). info: [n] or NULL.
 * Fails with TSC_ERR_ARG (bad sizes, font < 7 pt, a figure too small for its text, POOL_NONE on a
 * matrix larger than its pixels), TSC_ERR_NOMEM, TSC_ERR_EXTERNAL (cairo); *out is NULL then. */
TSC_API tsc_status_t tsc_heatmap_render(const tsc_heatmap_opts_t *o, const tsc_heatmap_panel_t *p, int n,
                                cairo_surface_t **out, tsc_heatmap_info_t *info);

/* Draws the figure onto cr, whose user units must be points with (0, 0) at the figure's top-left
 * (for embedding a figure in a larger page, e.g. a report). Vector drawing (no pixel writes).
 * Same failures as tsc_heatmap_render. */
TSC_API tsc_status_t tsc_heatmap_draw(cairo_t *cr, const tsc_heatmap_opts_t *o, const tsc_heatmap_panel_t *p,
                              int n, tsc_heatmap_info_t *info);

/* Writes the figure to path as PNG (at opts.dpi), SVG or PDF (fmt, or from the extension when
 * TSC_IMG_AUTO: .png, .svg, .pdf). The file is written under a temporary name and renamed, so
 * path is either complete or untouched. TSC_ERR_IO names path and the failing call. */
TSC_API tsc_status_t tsc_heatmap_write(const tsc_heatmap_opts_t *o, const tsc_heatmap_panel_t *p, int n,
                               const char *path, tsc_image_format_t fmt, tsc_heatmap_info_t *info);

#ifdef __cplusplus
}
#endif
#endif
