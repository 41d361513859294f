/* tsc_surface.h: the one render surface of the render layer: text layout (pango), output sinks
 * (PNG, SVG, PDF written through util/tsc_file.h: a temporary name renamed when complete, every
 * cairo status checked) and the reproducible-date rule of every PDF tilescope writes.
 *
 * Drawing code takes a cairo_t whose user units are points with (0, 0) at the top-left of its
 * box, so the same code draws into a file, onto a report page or into a memory image (tests):
 *
 *   tsc_sink_t k;
 *   if (tsc_sink_open(&k, "fig.pdf", TSC_IMG_PDF, 468, 280, 300) != TSC_OK) return tsc_error_last();
 *   draw(k.cr, 468, 280);                      // any cairo drawing, in points
 *   st = tsc_sink_close(&k, st);               // commit the file, or remove the temporary
 *
 * Reproducible dates: a PDF's CreationDate (and, for cairo's PDFs, ModDate) is SOURCE_DATE_EPOCH
 * when that is set to a non-negative integer, else 2000-01-01T00:00:00Z; never the clock. The rule
 * holds for the PDFs cairo writes (tsc_surface_pdf_date) and those gnuplot writes
 * (tsc_surface_pdf_fix_date rewrites gnuplot's stamp in place). */
#ifndef TSC_SURFACE_H
#define TSC_SURFACE_H

#include "tsc_export.h"

#include <stddef.h>
#include <time.h>

#include <cairo.h>

#include "tsc_file.h"
#include "tsc_status.h"
#include "tsc_strbuf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- image formats ---- */

/* The file formats a sink writes; AUTO: the one path's extension names. */
typedef enum { TSC_IMG_AUTO = 0, TSC_IMG_PNG, TSC_IMG_SVG, TSC_IMG_PDF } tsc_image_format_t;

/* The format implied by path's extension (.png, .svg, .pdf, case-insensitive); TSC_ERR_ARG naming
 * path if none of the three. */
TSC_API tsc_status_t tsc_image_format_from_path(const char *path, tsc_image_format_t *out);

/* ---- text (pango, 72 "dpi", unhinted metrics: the same layout in PNG, SVG and PDF) ---- */

/* Draws text with its top-left at (x, y), wrapped at width w (0: no wrap; then align 1 centres
 * and 2 right-aligns the text on x), align 0 left / 1 centre / 2 right; returns the height of
 * the text. draw = 0 only measures. markup = 1 parses pango markup (our own strings only).
 * family NULL: "DejaVu Sans". Invalid UTF-8 is made valid first. Uses cr's current source. */
TSC_API double tsc_surface_text(cairo_t *cr, const char *family, double pt, int bold, double x, double y, double w,
                                const char *text, int align, int draw, int markup);
/* The logical size of text (w, h may be NULL). */
TSC_API void tsc_surface_text_size(cairo_t *cr, const char *family, double pt, int bold, double wrap_w,
                                   const char *text, double *w, double *h);
/* Draws text in black with its logical box anchored at (x, y): ax, ay in [0, 1] pick the anchor
 * inside the box (0, 0 top-left; 0.5, 0.5 centre); angle rotates the box about the anchor. */
TSC_API void tsc_surface_text_at(cairo_t *cr, const char *family, double pt, int bold, double wrap_w,
                                 const char *text, double x, double y, double ax, double ay, double angle);

/* ---- reproducible dates ---- */

/* SOURCE_DATE_EPOCH when set to a non-negative integer, else 946684800 (2000-01-01T00:00:00Z). */
TSC_API time_t tsc_surface_epoch(void);
/* Stamps a cairo PDF surface's CreationDate and ModDate with tsc_surface_epoch(). */
TSC_API void tsc_surface_pdf_date(cairo_surface_t *pdf);
/* Rewrites the first "/CreationDate (D:YYYYMMDDHHMMSS" in pdf[n] (a PDF gnuplot wrote) to
 * tsc_surface_epoch(), in place (same length, so the xref offsets stay valid). */
TSC_API void tsc_surface_pdf_fix_date(char *pdf, size_t n);

/* ---- PNG in memory ---- */

/* Encodes an image surface as PNG, appended to out. fast = 0: cairo's encoder (what
 * cairo_surface_write_to_png writes); fast = 1: 8-bit RGB, zlib level 1, Sub filter (opaque
 * images; several times faster on large maps). TSC_ERR_EXTERNAL / TSC_ERR_NOMEM on failure. */
TSC_API tsc_status_t tsc_surface_png(cairo_surface_t *img, int fast, tsc_strbuf_t *out);
/* A PNG in memory as an image surface (the caller destroys it); TSC_ERR_FORMAT when it is not a
 * PNG cairo can read. what names it in the error. */
TSC_API tsc_status_t tsc_surface_png_read(const void *png, size_t n, const char *what, cairo_surface_t **out);
/* An RGB24 image of w_pt x h_pt points at dpi, white, with cr scaled to points (*cr and *img are
 * the caller's). TSC_ERR_ARG for a size outside 1..32767 pixels, TSC_ERR_EXTERNAL from cairo. */
TSC_API tsc_status_t tsc_surface_image(double w_pt, double h_pt, double dpi, cairo_surface_t **img, cairo_t **cr);

/* ---- file sinks ---- */

typedef struct {
    tsc_out_t out;          /* the temporary file; committed by tsc_sink_close */
    cairo_surface_t *sf;    /* PNG: the image in memory; SVG/PDF: the vector surface writing out.fp */
    cairo_t *cr;            /* user units: points, origin top-left */
    tsc_image_format_t fmt;
    double scale;           /* pixels per point (PNG), 1 otherwise */
    int fast_png;           /* encode with tsc_surface_png(fast = 1) */
    int write_errno;        /* the first failed write of the vector stream */
} tsc_sink_t;

/* Opens path for a w_pt x h_pt point drawing in fmt (AUTO: from the extension): a temporary file
 * beside path and a surface on it (PNG: an RGB24 image at dpi, encoded on close). PDFs get the
 * reproducible date. The drawing starts blank (PNG: black pixels; paint it). On failure nothing is
 * left behind. */
TSC_API tsc_status_t tsc_sink_open(tsc_sink_t *k, const char *path, tsc_image_format_t fmt, double w_pt, double h_pt,
                                   double dpi);
/* Finishes the drawing: with st == TSC_OK checks cr's and the surface's status, encodes the PNG,
 * and renames the temporary over path; otherwise (or on any failure) removes the temporary and
 * leaves path as it was. Returns st, or the first failure (TSC_ERR_IO naming path). */
TSC_API tsc_status_t tsc_sink_close(tsc_sink_t *k, tsc_status_t st);

/* A drawing function: w_pt x h_pt points on cr. */
typedef tsc_status_t (*tsc_draw_fn)(cairo_t *cr, double w_pt, double h_pt, void *ctx);
/* fn onto a white w_in x h_in inch page written to path (a sink). */
TSC_API tsc_status_t tsc_surface_write(const char *path, tsc_image_format_t fmt, double w_in, double h_in, double dpi,
                                       tsc_draw_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
