/* report_doc.c: the report's content model and its two back ends, PDF pages (cairo + pango,
 * through tsc_surface.h's text) and offline HTML (report_internal.h). */
#include "report_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "figure_internal.h"
#include "tsc_escape.h"
#include "render_internal.h"
#include "tsc_surface.h"

#define PAGE_W TSC_RP_PAGE_W
#define PAGE_H TSC_RP_PAGE_H
#define MARGIN TSC_RP_MARGIN
#define SMALL_PT 7.5 /* tables, captions, footers: still >= 7 pt on the printed page */
#define SANS "DejaVu Sans"

tsc_rblock_t *tsc_rdoc_add(tsc_rdoc_t *doc, tsc_rb_kind_t kind) {
    if (doc->nomem) return NULL;
    if (doc->n == doc->cap) {
        int nc = doc->cap ? 2 * doc->cap : 32;
        tsc_rblock_t *nb = realloc(doc->b, (size_t)nc * sizeof *nb);
        if (!nb) { doc->nomem = 1; return NULL; }
        doc->b = nb, doc->cap = nc;
    }
    tsc_rblock_t *b = &doc->b[doc->n++];
    memset(b, 0, sizeof *b);
    b->kind = kind;
    b->keep_pt = -1;
    return b;
}

void tsc_rdoc_free(tsc_rdoc_t *doc) {
    free(doc->b);
    doc->b = NULL, doc->n = doc->cap = 0;
}

/* ---------------------------------------------------------------- PDF pages */

typedef struct {
    cairo_t *cr;
    double y;
    int page, max_pages, stop;
} pdf_t;

static void footer(pdf_t *p) {
    char buf[64];
    snprintf(buf, sizeof buf, "tilescope report, page %d", p->page);
    cairo_set_source_rgb(p->cr, 0.4, 0.4, 0.4);
    tsc_surface_text(p->cr, SANS, SMALL_PT, 0, PAGE_W / 2, PAGE_H - MARGIN / 2 - SMALL_PT, 0, buf, 1, 1, 0);
    cairo_set_source_rgb(p->cr, 0, 0, 0);
}

static void new_page(pdf_t *p) {
    if (p->page > 0) {
        footer(p);
        if (p->max_pages > 0 && p->page >= p->max_pages) { p->stop = 1; return; }
        cairo_show_page(p->cr);
    }
    p->page++;
    p->y = MARGIN;
    cairo_set_source_rgb(p->cr, 0, 0, 0);
}

static void need(pdf_t *p, double h) {
    if (p->y + h > PAGE_H - MARGIN) new_page(p);
}

static double text_h(pdf_t *p, const char *font, double pt, int bold, const char *text) {
    return tsc_surface_text(p->cr, font ? font : SANS, pt, bold, 0, 0, PAGE_W - 2 * MARGIN, text, 0, 0, 0);
}

static void para(pdf_t *p, const char *font, double pt, int bold, const char *text, double gap_after) {
    double h = text_h(p, font, pt, bold, text);
    need(p, h);
    if (p->stop) return;
    tsc_surface_text(p->cr, font ? font : SANS, pt, bold, MARGIN, p->y, PAGE_W - 2 * MARGIN, text, 0, 1, 0);
    p->y += h + gap_after;
}

static void heading(pdf_t *p, const tsc_rblock_t *b) {
    if (b->keep_pt < 0) need(p, 60);
    else {
        double keep = b->keep_extra + (b->keep_text ? text_h(p, b->keep_font, b->keep_pt, 0, b->keep_text) : 0);
        /* a paragraph is never split, so the heading goes with all of it (up to a whole page) */
        double page = PAGE_H - 2 * MARGIN - 30;
        need(p, 30 + (keep < page ? keep : page));
    }
    if (p->stop) return;
    p->y += 6;
    cairo_set_source_rgb(p->cr, 0.05, 0.15, 0.35);
    para(p, SANS, 13, 1, b->text, 5);
    cairo_set_source_rgb(p->cr, 0, 0, 0);
}

/* One table row (header when hdr): wrapped cells, shaded background. Returns its height. */
static double table_row(pdf_t *p, int ncol, const double *x, const char *const *row, int hdr, int odd, int draw) {
    double pad = 2.5, h = 0;
    for (int c = 0; c < ncol; c++) {
        double hh = tsc_surface_text(p->cr, SANS, SMALL_PT, hdr, 0, 0, x[c + 1] - x[c] - 2 * pad, row[c] ? row[c] : "",
                                     0, 0, 0);
        if (hh > h) h = hh;
    }
    h += 2 * pad;
    if (!draw) return h;
    if (hdr || odd) {
        if (hdr) cairo_set_source_rgb(p->cr, 0.88, 0.91, 0.96);
        else cairo_set_source_rgb(p->cr, 0.96, 0.96, 0.96);
        cairo_rectangle(p->cr, x[0], p->y, x[ncol] - x[0], h);
        cairo_fill(p->cr);
    }
    cairo_set_source_rgb(p->cr, 0, 0, 0);
    for (int c = 0; c < ncol; c++)
        tsc_surface_text(p->cr, SANS, SMALL_PT, hdr, x[c] + pad, p->y + pad, x[c + 1] - x[c] - 2 * pad,
                         row[c] ? row[c] : "", 0, 1, 0);
    p->y += h;
    return h;
}

/* A table; the header row is repeated on every page. */
static void table(pdf_t *p, const tsc_rblock_t *b) {
    double W = PAGE_W - 2 * MARGIN, x[16];
    int ncol = b->ncol < 15 ? b->ncol : 15;
    x[0] = MARGIN;
    for (int c = 1; c <= ncol; c++) x[c] = x[c - 1] + b->w[c - 1] * W;
    double hh = table_row(p, ncol, x, b->hdr, 1, 0, 0);
    need(p, 2 * hh + 10);
    if (p->stop) return;
    table_row(p, ncol, x, b->hdr, 1, 0, 1);
    for (int r = 0; r < b->nrows; r++) {
        const char *const *row = (const char *const *)(b->cells + (size_t)r * b->ncol);
        double h = table_row(p, ncol, x, row, 0, r % 2, 0);
        if (p->y + h > PAGE_H - MARGIN) {
            new_page(p);
            if (p->stop) return;
            table_row(p, ncol, x, b->hdr, 1, 0, 1);
        }
        table_row(p, ncol, x, row, 0, r % 2, 1);
    }
    cairo_set_source_rgb(p->cr, 0.6, 0.6, 0.6);
    cairo_set_line_width(p->cr, 0.5);
    cairo_move_to(p->cr, MARGIN, p->y);
    cairo_line_to(p->cr, MARGIN + W, p->y);
    cairo_stroke(p->cr);
    cairo_set_source_rgb(p->cr, 0, 0, 0);
    p->y += 8;
}

/* A figure: cairo's figures drawn as vectors into their box, gnuplot's PNG painted from memory;
 * then the caption. */
static tsc_status_t figure(pdf_t *p, const tsc_rdoc_t *doc, const tsc_rblock_t *b) {
    const tsc_rp_fig_t *f = b->fig;
    double maxw = PAGE_W - 2 * MARGIN, w = b->w_pt < maxw ? b->w_pt : maxw, h = w * f->h_in / f->w_in;
    double ch = tsc_surface_text(p->cr, SANS, SMALL_PT, 0, 0, 0, maxw, f->caption, 0, 0, 0);
    need(p, h + ch + 14);
    if (p->stop) return TSC_OK;
    tsc_status_t st = TSC_OK;
    cairo_save(p->cr);
    cairo_translate(p->cr, MARGIN + (maxw - w) / 2, p->y);
    cairo_rectangle(p->cr, 0, 0, w, h);
    cairo_clip(p->cr);
    if (f->vector) {
        st = tsc_figure_draw(doc->src, f->id, doc->fig_opts, p->cr, w, h, NULL);
    } else {
        cairo_surface_t *img = NULL;
        st = tsc_surface_png_read(f->png.p, f->png.len, f->id, &img);
        if (!st) {
            double sc = w / cairo_image_surface_get_width(img);
            cairo_scale(p->cr, sc, sc);
            cairo_set_source_surface(p->cr, img, 0, 0);
            cairo_paint(p->cr);
            cairo_surface_destroy(img);
        }
    }
    cairo_restore(p->cr);
    p->y += h + b->gap_img;
    para(p, SANS, SMALL_PT, 0, f->caption, b->gap_cap);
    return st;
}

static tsc_status_t pdf_block(pdf_t *p, const tsc_rdoc_t *doc, const tsc_rblock_t *b) {
    switch (b->kind) {
    case TSC_RB_HEADING: heading(p, b); break;
    case TSC_RB_PARA:
        if (b->accent) cairo_set_source_rgb(p->cr, 0.05, 0.15, 0.35);
        para(p, b->font, b->pt, b->bold, b->text, b->gap);
        cairo_set_source_rgb(p->cr, 0, 0, 0);
        break;
    case TSC_RB_TABLE: table(p, b); break;
    case TSC_RB_FIGURE: return figure(p, doc, b);
    case TSC_RB_LIST:
        para(p, SANS, b->pt, 1, b->text, 3);
        for (int i = 0; i < b->n_items && !p->stop; i++) para(p, SANS, SMALL_PT, 0, b->items[i], 2);
        break;
    case TSC_RB_PAGE: new_page(p); break;
    case TSC_RB_HTML: break;
    }
    return TSC_OK;
}

tsc_status_t tsc_rdoc_pdf(const tsc_rdoc_t *doc, cairo_t *cr, int max_pages, int *n_pages) {
    pdf_t p = {cr, MARGIN, 0, max_pages, 0};
    tsc_status_t st = TSC_OK;
    new_page(&p);
    for (int i = 0; i < doc->n && !st && !p.stop; i++)
        if (doc->b[i].only != 2) st = pdf_block(&p, doc, &doc->b[i]);
    if (!st && !p.stop) {
        footer(&p);
        cairo_show_page(cr);
    }
    if (n_pages) *n_pages = p.page;
    if (!st && cairo_status(cr) != CAIRO_STATUS_SUCCESS)
        st = tsc_error_set(TSC_ERR_EXTERNAL, "report: cairo drawing failed: %s", cairo_status_to_string(cairo_status(cr)));
    return st;
}

/* ---------------------------------------------------------------- HTML */

/* Every block's text, cell, caption and attribute is data (strings of summary.json, a dump, a log)
 * and goes through the one HTML escaper, tsc_esc_html (tsc_escape.h); only TSC_RB_HTML blocks,
 * the report's own markup, are written as they are. The page has no script. */

void tsc_render_base64(tsc_strbuf_t *b, const unsigned char *d, size_t n) {
    static const char tb[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char q[4];
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0) | (i + 2 < n ? d[i + 2] : 0);
        q[0] = tb[v >> 18], q[1] = tb[(v >> 12) & 63];
        q[2] = i + 1 < n ? tb[(v >> 6) & 63] : '=';
        q[3] = i + 2 < n ? tb[v & 63] : '=';
        tsc_strbuf_append(b, q, 4);
    }
}

static void html_table(tsc_strbuf_t *h, const tsc_rblock_t *b) {
    tsc_strbuf_puts(h, "<table><tr>");
    for (int c = 0; c < b->ncol; c++) tsc_strbuf_puts(h, "<th>"), tsc_esc_html(h, b->hdr[c]), tsc_strbuf_puts(h, "</th>");
    tsc_strbuf_puts(h, "</tr>\n");
    for (int r = 0; r < b->nrows; r++) {
        tsc_strbuf_puts(h, "<tr>");
        for (int c = 0; c < b->ncol; c++)
            tsc_strbuf_puts(h, "<td>"), tsc_esc_html(h, b->cells[(size_t)r * b->ncol + c]), tsc_strbuf_puts(h, "</td>");
        tsc_strbuf_puts(h, "</tr>\n");
    }
    tsc_strbuf_puts(h, "</table>\n");
}

static void html_block(tsc_strbuf_t *h, const tsc_rblock_t *b) {
    static const char *const open[] = {"<p>", "<p><b>", "<pre>"}, *const close[] = {"</p>\n", "</b></p>\n", "</pre>\n"};
    switch (b->kind) {
    case TSC_RB_HEADING: tsc_strbuf_puts(h, "<h2>"), tsc_esc_html(h, b->text), tsc_strbuf_puts(h, "</h2>\n"); break;
    case TSC_RB_PARA: tsc_strbuf_puts(h, open[b->html]), tsc_esc_html(h, b->text), tsc_strbuf_puts(h, close[b->html]); break;
    case TSC_RB_TABLE: html_table(h, b); break;
    case TSC_RB_FIGURE:
        tsc_strbuf_puts(h, "<figure");
        if (b->html_id) tsc_strbuf_puts(h, " id=\""), tsc_esc_html(h, b->html_id), tsc_strbuf_puts(h, "\"");
        tsc_strbuf_puts(h, "><img alt=\""), tsc_esc_html(h, b->alt), tsc_strbuf_puts(h, "\" src=\"data:image/png;base64,");
        tsc_render_base64(h, (const unsigned char *)b->fig->png.p, b->fig->png.len);
        tsc_strbuf_puts(h, "\"><figcaption>"), tsc_esc_html(h, b->fig->caption), tsc_strbuf_puts(h, "</figcaption></figure>\n");
        break;
    case TSC_RB_LIST:
        tsc_strbuf_puts(h, "<p><b>"), tsc_esc_html(h, b->text), tsc_strbuf_puts(h, "</b></p><ul>\n");
        for (int i = 0; i < b->n_items; i++) tsc_strbuf_puts(h, "<li>"), tsc_esc_html(h, b->items[i]), tsc_strbuf_puts(h, "</li>\n");
        tsc_strbuf_puts(h, "</ul>\n");
        break;
    case TSC_RB_HTML: tsc_strbuf_puts(h, b->text); break;
    case TSC_RB_PAGE: break;
    }
}

void tsc_rdoc_html(const tsc_rdoc_t *doc, tsc_strbuf_t *h) {
    tsc_strbuf_puts(h, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tilescope report</title>\n"
                       "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto;color:#111}"
                       "h1,h2{color:#0d2659}table{border-collapse:collapse;font-size:85%;margin:0.5em 0}"
                       "td,th{border:1px solid #bbb;padding:2px 5px;text-align:left;vertical-align:top}"
                       "th{background:#e1e8f5}tr:nth-child(even){background:#f4f4f4}pre{background:#f6f6f6;"
                       "padding:0.6em;overflow-x:auto;font-size:85%}figure{margin:1.2em 0}img{max-width:100%}"
                       "figcaption{font-size:85%;color:#333}</style></head><body>\n<h1>tilescope report</h1>\n");
    for (int i = 0; i < doc->n; i++)
        if (doc->b[i].only != 1) html_block(h, &doc->b[i]);
    tsc_strbuf_puts(h, "</body></html>\n");
}
