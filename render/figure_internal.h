/* figure_internal.h: private helpers shared by figure*.c and report*.c (not installed). */
#ifndef TSC_FIGURE_INTERNAL_H
#define TSC_FIGURE_INTERNAL_H

#include <cairo.h>

#include "tsc_figure.h"

typedef struct {
    long long step;
    int layer, head, batch, token, feature;
} tsc_fig_sel_t;

/* The resolved selection of a figure (tsc_figure_opts_t's -1 fields filled in). */
void tsc_fig_resolve(const tsc_figure_src_t *s, const tsc_figure_opts_t *o, tsc_fig_sel_t *sel);
/* summary.json's record of (step, layer, head), or NULL. */
const tsc_jv_t *tsc_fig_head_record(const tsc_figure_src_t *s, long long step, int layer, int head);
/* A whole analysis.h5 dataset as doubles ([prod dims], caller frees); rank <= 4. */
tsc_status_t tsc_fig_read_ds(const tsc_figure_src_t *s, const char *dspath, double **data, int *rank,
                             long long dims[4]);
const char *tsc_fig_analysis_path(const tsc_figure_src_t *s);
const char *tsc_fig_summary_path(const tsc_figure_src_t *s);
/* Figure 1 to a file. */
tsc_status_t tsc_fig_evidence_write(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const char *path,
                                    tsc_image_format_t fmt, tsc_figure_info_t *info);

/* Text with pango in point units (72 dpi, unhinted): draws text at (x, y) top-left, wrapped at
 * width w (0: no wrap), align 0 left / 1 centre / 2 right; returns the height drawn. With
 * draw = 0 only measures. markup = 1 parses pango markup (our own strings only). */
double tsc_fig_text(cairo_t *cr, const char *family, double pt, int bold, double x, double y, double w,
                    const char *text, int align, int draw, int markup);

/* Draws with fn onto a new w_in x h_in inch figure written to path (PNG at dpi, SVG, PDF) through
 * a temporary name + rename. PDF creation date from SOURCE_DATE_EPOCH, else fixed. */
typedef tsc_status_t (*tsc_fig_draw_fn)(cairo_t *cr, double w_pt, double h_pt, void *ctx);
tsc_status_t tsc_fig_cairo_write(const char *path, tsc_image_format_t fmt, double w_in, double h_in, double dpi,
                                 tsc_fig_draw_fn fn, void *ctx);
/* The PDF CreationDate tilescope stamps: SOURCE_DATE_EPOCH when set (UTC), else 2000-01-01. */
void tsc_fig_pdf_date(cairo_surface_t *pdf);

#endif
