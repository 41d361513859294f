/* render_internal.h (private to render/): helpers the render modules share. */
#ifndef TSC_RENDER_INTERNAL_H
#define TSC_RENDER_INTERNAL_H

#include <stddef.h>

#include <pango/pangocairo.h>

#include "tsc_strbuf.h"

/* A pango layout for text in points at every raster scale (72 "dpi", unhinted metrics, so the
 * layout is identical in PNG, SVG and PDF): font family (NULL: "DejaVu Sans"), size pt, bold;
 * wrapped to wrap_w points when wrap_w > 0, then aligned (0 left, 1 centre, 2 right). Invalid
 * UTF-8 from data is made valid first. markup: text is pango markup. The caller unrefs it.
 * (surface.c; the drawing helpers of tsc_surface.h are built on it.) */
PangoLayout *tsc_render_layout(cairo_t *cr, const char *family, double pt, int bold, double wrap_w, int align,
                               const char *text, int markup);

/* Appends the base64 encoding (RFC 4648, padded) of d[n] to b (report_doc.c). */
void tsc_render_base64(tsc_strbuf_t *b, const unsigned char *d, size_t n);

#endif
