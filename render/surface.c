/* surface.c: the render surface (tsc_surface.h): pango text, PNG/SVG/PDF sinks through
 * util/tsc_file.h, PNG in memory, and the reproducible-date rule. */
#include "tsc_surface.h"
#include "render_internal.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <pango/pangocairo.h>
#include <png.h>

/* ---------------------------------------------------------------- text */

PangoLayout *tsc_render_layout(cairo_t *cr, const char *family, double pt, int bold, double wrap_w, int align,
                               const char *text, int markup) {
    PangoLayout *l = pango_cairo_create_layout(cr);
    PangoContext *ctx = pango_layout_get_context(l);
    /* User units are points: 72 "dpi" and unhinted metrics keep the layout identical at every
     * raster scale and in vector output. */
    pango_cairo_context_set_resolution(ctx, 72.0);
    cairo_font_options_t *fo = cairo_font_options_create();
    cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
    cairo_font_options_set_hint_style(fo, CAIRO_HINT_STYLE_NONE);
    pango_cairo_context_set_font_options(ctx, fo);
    cairo_font_options_destroy(fo);
    pango_layout_context_changed(l);
    PangoFontDescription *fd = pango_font_description_from_string(family ? family : "DejaVu Sans");
    pango_font_description_set_absolute_size(fd, pt * PANGO_SCALE);
    if (bold) pango_font_description_set_weight(fd, PANGO_WEIGHT_BOLD);
    pango_layout_set_font_description(l, fd);
    pango_font_description_free(fd);
    if (wrap_w > 0) {
        pango_layout_set_width(l, (int)(wrap_w * PANGO_SCALE));
        pango_layout_set_wrap(l, PANGO_WRAP_WORD_CHAR);
        if (align) pango_layout_set_alignment(l, align == 1 ? PANGO_ALIGN_CENTER : PANGO_ALIGN_RIGHT);
    }
    /* Labels come from data: invalid UTF-8 would make pango warn on stderr and draw garbage. */
    gchar *valid = g_utf8_validate(text, -1, NULL) ? NULL : g_utf8_make_valid(text, -1);
    if (markup) pango_layout_set_markup(l, valid ? valid : text, -1);
    else pango_layout_set_text(l, valid ? valid : text, -1);
    g_free(valid);
    return l;
}

double tsc_surface_text(cairo_t *cr, const char *family, double pt, int bold, double x, double y, double w,
                        const char *text, int align, int draw, int markup) {
    PangoLayout *l = tsc_render_layout(cr, family, pt, bold, w, align, text ? text : "", markup);
    int pw, ph;
    pango_layout_get_size(l, &pw, &ph);
    double tw = (double)pw / PANGO_SCALE, th = (double)ph / PANGO_SCALE;
    if (draw) {
        double xx = x;
        if (w <= 0 && align == 1) xx = x - tw / 2;
        else if (w <= 0 && align == 2) xx = x - tw;
        cairo_move_to(cr, xx, y);
        pango_cairo_show_layout(cr, l);
    }
    g_object_unref(l);
    return th;
}

void tsc_surface_text_size(cairo_t *cr, const char *family, double pt, int bold, double wrap_w, const char *text,
                           double *w, double *h) {
    PangoLayout *l = tsc_render_layout(cr, family, pt, bold, wrap_w, 0, text ? text : "", 0);
    PangoRectangle ink, log;
    pango_layout_get_extents(l, &ink, &log);
    if (w) *w = (double)log.width / PANGO_SCALE;
    if (h) *h = (double)log.height / PANGO_SCALE;
    g_object_unref(l);
}

void tsc_surface_text_at(cairo_t *cr, const char *family, double pt, int bold, double wrap_w, const char *text,
                         double x, double y, double ax, double ay, double angle) {
    PangoLayout *l = tsc_render_layout(cr, family, pt, bold, wrap_w, 0, text ? text : "", 0);
    PangoRectangle ink, log;
    pango_layout_get_extents(l, &ink, &log);
    double w = (double)log.width / PANGO_SCALE, h = (double)log.height / PANGO_SCALE;
    cairo_save(cr);
    cairo_translate(cr, x, y);
    cairo_rotate(cr, angle);
    cairo_move_to(cr, -ax * w - (double)log.x / PANGO_SCALE, -ay * h - (double)log.y / PANGO_SCALE);
    cairo_set_source_rgb(cr, 0, 0, 0);
    pango_cairo_update_layout(cr, l);
    pango_cairo_show_layout(cr, l);
    cairo_restore(cr);
    g_object_unref(l);
}

/* ---------------------------------------------------------------- reproducible dates */

time_t tsc_surface_epoch(void) {
    const char *e = getenv("SOURCE_DATE_EPOCH");
    time_t t = 946684800; /* 2000-01-01T00:00:00Z: a fixed date keeps the bytes reproducible */
    if (e && *e) {
        char *end;
        errno = 0;
        long long v = strtoll(e, &end, 10);
        if (!errno && !*end && v >= 0) t = (time_t)v;
    }
    return t;
}

void tsc_surface_pdf_date(cairo_surface_t *pdf) {
    time_t t = tsc_surface_epoch();
    struct tm tm;
    char buf[32];
    if (!gmtime_r(&t, &tm) || !strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm)) return;
    cairo_pdf_surface_set_metadata(pdf, CAIRO_PDF_METADATA_CREATE_DATE, buf);
    cairo_pdf_surface_set_metadata(pdf, CAIRO_PDF_METADATA_MOD_DATE, buf);
}

void tsc_surface_pdf_fix_date(char *pdf, size_t n) {
    time_t t = tsc_surface_epoch();
    struct tm tm;
    char stamp[16];
    if (!pdf || !gmtime_r(&t, &tm) || strftime(stamp, sizeof stamp, "%Y%m%d%H%M%S", &tm) != 14) return;
    static const char key[] = "/CreationDate (D:";
    size_t klen = sizeof key - 1;
    for (size_t i = 0; i + klen + 14 <= n; i++)
        if (pdf[i] == '/' && memcmp(pdf + i, key, klen) == 0) {
            memcpy(pdf + i + klen, stamp, 14);
            return;
        }
}

/* ---------------------------------------------------------------- PNG in memory */

static cairo_status_t sb_write(void *c, const unsigned char *data, unsigned int len) {
    tsc_strbuf_append(c, (const char *)data, len);
    return ((tsc_strbuf_t *)c)->nomem ? CAIRO_STATUS_NO_MEMORY : CAIRO_STATUS_SUCCESS;
}

static void png_sb_write(png_structp png, png_bytep data, png_size_t len) {
    tsc_strbuf_t *sb = png_get_io_ptr(png);
    tsc_strbuf_append(sb, (const char *)data, len);
    if (sb->nomem) png_error(png, "out of memory");
}

static void png_sb_flush(png_structp png) { (void)png; }

/* 8-bit RGB, zlib level 1 with the Sub filter: libpng directly rather than cairo's encoder, whose
 * defaults (level 6, adaptive filtering on RGBA) cost more than the whole render of a 4096 x 4096
 * map; level 1 with Sub is several times faster for a modest size increase. */
static tsc_status_t png_fast(cairo_surface_t *img, tsc_strbuf_t *out) {
    int w = cairo_image_surface_get_width(img), h = cairo_image_surface_get_height(img);
    int stride = cairo_image_surface_get_stride(img);
    const unsigned char *data = cairo_image_surface_get_data(img);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    unsigned char *volatile row = malloc((size_t)w * 3);
    if (!png || !info || !row) {
        png_destroy_write_struct(&png, info ? &info : NULL);
        free(row);
        return tsc_error_set(TSC_ERR_NOMEM, "PNG: cannot set up the encoder");
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(row);
        return tsc_error_set(TSC_ERR_NOMEM, "PNG: the encoder ran out of memory");
    }
    png_set_write_fn(png, out, png_sb_write, png_sb_flush);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_compression_level(png, 1);
    png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_SUB);
    png_write_info(png, info);
    for (int y = 0; y < h; y++) {
        const uint32_t *src = (const uint32_t *)(const void *)(data + (size_t)y * stride);
        for (int x = 0; x < w; x++) {
            row[3 * x] = (unsigned char)(src[x] >> 16);
            row[3 * x + 1] = (unsigned char)(src[x] >> 8);
            row[3 * x + 2] = (unsigned char)src[x];
        }
        png_write_row(png, row);
    }
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(row);
    return TSC_OK;
}

tsc_status_t tsc_surface_png(cairo_surface_t *img, int fast, tsc_strbuf_t *out) {
    if (!img || !out || cairo_surface_get_type(img) != CAIRO_SURFACE_TYPE_IMAGE)
        return tsc_error_set(TSC_ERR_ARG, "PNG: expected an image surface");
    cairo_surface_flush(img);
    if (fast) return png_fast(img, out);
    cairo_status_t cs = cairo_surface_write_to_png_stream(img, sb_write, out);
    if (out->nomem) return tsc_error_set(TSC_ERR_NOMEM, "PNG: out of memory");
    if (cs != CAIRO_STATUS_SUCCESS) return tsc_error_set(TSC_ERR_EXTERNAL, "PNG: cairo: %s", cairo_status_to_string(cs));
    return TSC_OK;
}

typedef struct {
    const unsigned char *d;
    size_t n, off;
} png_rd_t;

static cairo_status_t png_mem_read(void *c, unsigned char *data, unsigned int len) {
    png_rd_t *r = c;
    if (r->off + len > r->n) return CAIRO_STATUS_READ_ERROR;
    memcpy(data, r->d + r->off, len);
    r->off += len;
    return CAIRO_STATUS_SUCCESS;
}

tsc_status_t tsc_surface_png_read(const void *png, size_t n, const char *what, cairo_surface_t **out) {
    png_rd_t rd = {png, n, 0};
    *out = NULL;
    cairo_surface_t *img = cairo_image_surface_create_from_png_stream(png_mem_read, &rd);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
        tsc_status_t st = tsc_error_set(TSC_ERR_FORMAT, "%s: not a readable PNG (%zu bytes): %s", what ? what : "image",
                                        n, cairo_status_to_string(cairo_surface_status(img)));
        cairo_surface_destroy(img);
        return st;
    }
    *out = img;
    return TSC_OK;
}

tsc_status_t tsc_surface_image(double w_pt, double h_pt, double dpi, cairo_surface_t **img, cairo_t **cr) {
    *img = NULL, *cr = NULL;
    double pw = round(w_pt * dpi / 72.0), ph = round(h_pt * dpi / 72.0);
    if (!(pw >= 1 && pw <= 32767 && ph >= 1 && ph <= 32767))
        return tsc_error_set(TSC_ERR_ARG, "image of %gx%g pt at %g dpi: outside 1..32767 pixels", w_pt, h_pt, dpi);
    cairo_surface_t *sf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)pw, (int)ph);
    cairo_t *c = cairo_create(sf);
    if (cairo_status(c) != CAIRO_STATUS_SUCCESS) {
        tsc_status_t st = tsc_error_set(TSC_ERR_EXTERNAL, "image of %gx%g pixels: cairo: %s", pw, ph,
                                        cairo_status_to_string(cairo_status(c)));
        cairo_destroy(c);
        cairo_surface_destroy(sf);
        return st;
    }
    cairo_scale(c, dpi / 72.0, dpi / 72.0);
    cairo_set_source_rgb(c, 1, 1, 1);
    cairo_paint(c);
    cairo_set_source_rgb(c, 0, 0, 0);
    *img = sf, *cr = c;
    return TSC_OK;
}

/* ---------------------------------------------------------------- file sinks */

static cairo_status_t sink_write(void *c, const unsigned char *data, unsigned int len) {
    tsc_sink_t *k = c;
    if (k->write_errno) return CAIRO_STATUS_WRITE_ERROR;
    if (len && fwrite(data, 1, len, k->out.fp) != len) {
        k->write_errno = errno ? errno : EIO;
        return CAIRO_STATUS_WRITE_ERROR;
    }
    return CAIRO_STATUS_SUCCESS;
}

tsc_status_t tsc_image_format_from_path(const char *path, tsc_image_format_t *out) {
    const char *dot = path ? strrchr(path, '.') : NULL;
    if (dot && strcasecmp(dot, ".png") == 0) *out = TSC_IMG_PNG;
    else if (dot && strcasecmp(dot, ".svg") == 0) *out = TSC_IMG_SVG;
    else if (dot && strcasecmp(dot, ".pdf") == 0) *out = TSC_IMG_PDF;
    else return tsc_error_set(TSC_ERR_ARG, "%s: cannot tell the image format: expected a .png, .svg or .pdf name",
                              path ? path : "(null)");
    return TSC_OK;
}

static const char *fmt_name(tsc_image_format_t fmt) {
    return fmt == TSC_IMG_PNG ? "PNG" : fmt == TSC_IMG_SVG ? "SVG" : "PDF";
}

tsc_status_t tsc_sink_open(tsc_sink_t *k, const char *path, tsc_image_format_t fmt, double w_pt, double h_pt,
                           double dpi) {
    memset(k, 0, sizeof *k);
    k->out.slot = -1;
    tsc_status_t st;
    if (!path || !*path) return tsc_error_set(TSC_ERR_ARG, "empty output path");
    if (fmt == TSC_IMG_AUTO && (st = tsc_image_format_from_path(path, &fmt))) return st;
    if (!(w_pt > 0 && h_pt > 0 && w_pt < 1e5 && h_pt < 1e5))
        return tsc_error_set(TSC_ERR_ARG, "%s: drawing size %gx%g pt", path, w_pt, h_pt);
    k->fmt = fmt;
    k->scale = 1;
    if (fmt == TSC_IMG_PNG) {
        if ((st = tsc_surface_image(w_pt, h_pt, dpi, &k->sf, &k->cr))) return tsc_error_wrap(st, "%s: ", path);
        k->scale = dpi / 72.0;
        if ((st = tsc_out_open(&k->out, path))) {
            cairo_destroy(k->cr);
            cairo_surface_destroy(k->sf);
            memset(k, 0, sizeof *k);
        }
        return st;
    }
    if ((st = tsc_out_open(&k->out, path))) return st;
    k->sf = fmt == TSC_IMG_SVG ? cairo_svg_surface_create_for_stream(sink_write, k, w_pt, h_pt)
                               : cairo_pdf_surface_create_for_stream(sink_write, k, w_pt, h_pt);
    if (cairo_surface_status(k->sf) != CAIRO_STATUS_SUCCESS) {
        st = tsc_error_set(TSC_ERR_IO, "%s: cannot create the %s surface: %s", path, fmt_name(fmt),
                           cairo_status_to_string(cairo_surface_status(k->sf)));
        cairo_surface_destroy(k->sf);
        tsc_out_abort(&k->out);
        memset(k, 0, sizeof *k);
        return st;
    }
    if (fmt == TSC_IMG_PDF) tsc_surface_pdf_date(k->sf);
    k->cr = cairo_create(k->sf);
    return TSC_OK;
}

tsc_status_t tsc_sink_close(tsc_sink_t *k, tsc_status_t st) {
    if (!k->sf) return st;
    const char *path = k->out.path ? k->out.path : "output";
    if (!st && cairo_status(k->cr) != CAIRO_STATUS_SUCCESS)
        st = tsc_error_set(TSC_ERR_EXTERNAL, "%s: cairo drawing failed: %s", path, cairo_status_to_string(cairo_status(k->cr)));
    cairo_destroy(k->cr);
    k->cr = NULL;
    if (k->fmt == TSC_IMG_PNG) {
        tsc_strbuf_t png;
        tsc_strbuf_init(&png);
        if (!st && (st = tsc_surface_png(k->sf, k->fast_png, &png))) st = tsc_error_wrap(st, "%s: ", path);
        if (!st && png.len && fwrite(png.p, 1, png.len, k->out.fp) != png.len)
            st = tsc_error_set(TSC_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        tsc_strbuf_free(&png);
    } else {
        cairo_surface_finish(k->sf);
        if (!st && (k->write_errno || cairo_surface_status(k->sf) != CAIRO_STATUS_SUCCESS))
            st = tsc_error_set(TSC_ERR_IO, "%s: writing the %s failed: %s", path, fmt_name(k->fmt),
                               k->write_errno ? strerror(k->write_errno) : cairo_status_to_string(cairo_surface_status(k->sf)));
    }
    cairo_surface_destroy(k->sf);
    k->sf = NULL;
    if (st) tsc_out_abort(&k->out);
    else st = tsc_out_commit(&k->out);
    return st;
}

tsc_status_t tsc_surface_write(const char *path, tsc_image_format_t fmt, double w_in, double h_in, double dpi,
                               tsc_draw_fn fn, void *ctx) {
    tsc_sink_t k;
    tsc_status_t st = tsc_sink_open(&k, path, fmt, w_in * 72, h_in * 72, dpi);
    if (st) return st;
    cairo_set_source_rgb(k.cr, 1, 1, 1);
    cairo_paint(k.cr);
    return tsc_sink_close(&k, fn(k.cr, w_in * 72, h_in * 72, ctx));
}
