/* report.c: the review report (tsc_report.h): PDF with cairo + pango, offline HTML, summary copy. */
#include "tsc_report.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cairo-pdf.h>

#include "figure_internal.h"

#define PAGE_W 595.28   /* A4 in points */
#define PAGE_H 841.89
#define MARGIN 50.0
#define BODY_PT 9.0
#define SMALL_PT 7.5    /* tables and captions: still >= 7 pt on the printed page */
#define SANS "DejaVu Sans"
#define MONO "DejaVu Sans Mono"
#define MAX_FIGS 24

void tsc_report_opts_init(tsc_report_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->html = 1;
    o->copy_summary = 1;
    o->fig_dpi = 150;
}

/* ---------------------------------------------------------------- growing string */
typedef struct { char *p; size_t len, cap; int oom; } sb_t;

static void sb_add(sb_t *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 65536;
        while (nc < b->len + n + 1) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) { b->oom = 1; return; }
        b->p = np, b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}
static void sb_printf(sb_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sb_t *b, const char *fmt, ...) {
    char tmp[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) { sb_add(b, tmp, (size_t)n); return; }
    char *big = malloc((size_t)n + 1);
    if (!big) { b->oom = 1; return; }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb_add(b, big, (size_t)n);
    free(big);
}
/* HTML text: & < > " escaped (data strings can hold anything). */
static void sb_html(sb_t *b, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '&': sb_add(b, "&amp;", 5); break;
        case '<': sb_add(b, "&lt;", 4); break;
        case '>': sb_add(b, "&gt;", 4); break;
        case '"': sb_add(b, "&quot;", 6); break;
        default: sb_add(b, s, 1);
        }
    }
}
static void sb_base64(sb_t *b, const unsigned char *d, size_t n) {
    static const char tb[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char q[4];
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0) | (i + 2 < n ? d[i + 2] : 0);
        q[0] = tb[v >> 18], q[1] = tb[(v >> 12) & 63];
        q[2] = i + 1 < n ? tb[(v >> 6) & 63] : '=';
        q[3] = i + 2 < n ? tb[v & 63] : '=';
        sb_add(b, q, 4);
    }
}

/* ---------------------------------------------------------------- PDF page flow */
typedef struct {
    cairo_surface_t *sf;
    cairo_t *cr;
    double y;
    int page;
} pdf_t;

static void footer(pdf_t *p) {
    char buf[64];
    snprintf(buf, sizeof buf, "tilescope report, page %d", p->page);
    cairo_set_source_rgb(p->cr, 0.4, 0.4, 0.4);
    tsc_fig_text(p->cr, SANS, SMALL_PT, 0, PAGE_W / 2, PAGE_H - MARGIN / 2 - SMALL_PT, 0, buf, 1, 1, 0);
    cairo_set_source_rgb(p->cr, 0, 0, 0);
}

static void new_page(pdf_t *p) {
    if (p->page > 0) {
        footer(p);
        cairo_show_page(p->cr);
    }
    p->page++;
    p->y = MARGIN;
    cairo_set_source_rgb(p->cr, 0, 0, 0);
}

static void need(pdf_t *p, double h) {
    if (p->y + h > PAGE_H - MARGIN) new_page(p);
}

static void para(pdf_t *p, const char *font, double pt, int bold, const char *text, double gap_after) {
    double h = tsc_fig_text(p->cr, font, pt, bold, MARGIN, p->y, PAGE_W - 2 * MARGIN, text, 0, 0, 0);
    need(p, h);
    tsc_fig_text(p->cr, font, pt, bold, MARGIN, p->y, PAGE_W - 2 * MARGIN, text, 0, 1, 0);
    p->y += h + gap_after;
}

/* A heading kept with the start of what follows it (keep: the height of that start, in points). */
static void heading_keep(pdf_t *p, const char *text, double keep) {
    need(p, 30 + (keep < PAGE_H / 3 ? keep : PAGE_H / 3));
    p->y += 6;
    cairo_set_source_rgb(p->cr, 0.05, 0.15, 0.35);
    para(p, SANS, 13, 1, text, 5);
    cairo_set_source_rgb(p->cr, 0, 0, 0);
}

static double text_h(pdf_t *p, const char *font, double pt, const char *text) {
    return tsc_fig_text(p->cr, font, pt, 0, 0, 0, PAGE_W - 2 * MARGIN, text, 0, 0, 0);
}

static void heading(pdf_t *p, const char *text) {
    need(p, 60);
    p->y += 6;
    cairo_set_source_rgb(p->cr, 0.05, 0.15, 0.35);
    para(p, SANS, 13, 1, text, 5);
    cairo_set_source_rgb(p->cr, 0, 0, 0);
}

/* One table row (header when hdr): wrapped cells, shaded background. Returns its height. */
static double table_row(pdf_t *p, int ncol, const double *x, const char *const *row, int hdr, int odd, int draw) {
    double pad = 2.5, h = 0;
    for (int c = 0; c < ncol; c++) {
        double hh = tsc_fig_text(p->cr, SANS, SMALL_PT, hdr, 0, 0, x[c + 1] - x[c] - 2 * pad, row[c] ? row[c] : "", 0, 0, 0);
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
        tsc_fig_text(p->cr, SANS, SMALL_PT, hdr, x[c] + pad, p->y + pad, x[c + 1] - x[c] - 2 * pad, row[c] ? row[c] : "",
                     0, 1, 0);
    p->y += h;
    return h;
}

/* A table: ncol (<= 15) columns at relative widths w[] (sum 1); the header row is repeated on every page. */
static void table(pdf_t *p, int ncol, const double *w, const char *const *hdr, char **cells, int nrows) {
    double W = PAGE_W - 2 * MARGIN, x[16];
    x[0] = MARGIN;
    for (int c = 1; c <= ncol; c++) x[c] = x[c - 1] + w[c - 1] * W;
    double hh = table_row(p, ncol, x, hdr, 1, 0, 0);
    need(p, 2 * hh + 10);
    table_row(p, ncol, x, hdr, 1, 0, 1);
    for (int r = 0; r < nrows; r++) {
        const char *const *row = (const char *const *)(cells + (size_t)r * ncol);
        double h = table_row(p, ncol, x, row, 0, r % 2, 0);
        if (p->y + h > PAGE_H - MARGIN) {
            new_page(p);
            table_row(p, ncol, x, hdr, 1, 0, 1);
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

/* ---------------------------------------------------------------- content */
typedef struct {
    char id[8];
    char caption[2048];
    unsigned char *png;
    size_t png_len;
    double w_in, h_in;
    int ok;
    char why[600];
} fig_t;

typedef struct {
    cairo_surface_t *img;
    const unsigned char *d;
    size_t n, off;
} png_rd_t;

static cairo_status_t png_read(void *c, unsigned char *data, unsigned int len) {
    png_rd_t *r = c;
    if (r->off + len > r->n) return CAIRO_STATUS_READ_ERROR;
    memcpy(data, r->d + r->off, len);
    r->off += len;
    return CAIRO_STATUS_SUCCESS;
}

static char *cell(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *cell(const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return strdup(buf);
}

static void free_cells(char **c, size_t n) {
    for (size_t i = 0; i < n; i++) free(c[i]);
    free(c);
}

/* Bits of an FP32 value: "s eeeeeeee mmm...", with "|" after keep mantissa bits and after the
 * rounding bit when keep > 0 (PAPER.md §5's notation). */
static void f32_bits(float f, int keep, char *out, size_t cap) {
    uint32_t u;
    memcpy(&u, &f, 4);
    char b[64];
    int k = 0;
    b[k++] = (char)('0' + (u >> 31));
    b[k++] = ' ';
    for (int i = 30; i >= 23; i--) b[k++] = (char)('0' + ((u >> i) & 1));
    b[k++] = ' ';
    for (int i = 22, j = 0; i >= 0; i--, j++) {
        if (keep > 0 && (j == keep || j == keep + 1)) b[k++] = '|';
        b[k++] = (char)('0' + ((u >> i) & 1));
    }
    b[k] = 0;
    snprintf(out, cap, "%s", b);
}

static int fmt_keep(const char *f) {
    if (!f) return 7;
    if (!strcmp(f, "fp16")) return 10;
    if (!strcmp(f, "fp8-e4m3")) return 3;
    if (!strcmp(f, "fp8-e5m2")) return 2;
    if (!strcmp(f, "fp32") || !strcmp(f, "tf32")) return strcmp(f, "tf32") ? 0 : 10;
    return 7; /* bf16 */
}

/* The worked-example block of the top at-risk head's rounding event (multi-line, monospace). */
static int event_text(const tsc_jv_t *top, long long step, char *out, size_t cap) {
    const tsc_jv_t *ev = top ? tsc_jv_get(top, "event") : NULL;
    if (!ev || tsc_jv_num(ev, "found") != 1) return 0;
    const char *f = tsc_jv_str(ev, "out_format");
    int keep = fmt_keep(f);
    float before = (float)tsc_jv_num(ev, "sum_before"), term = (float)tsc_jv_num(ev, "term"),
          sum = (float)tsc_jv_num(ev, "sum_fp32"), rounded = (float)tsc_jv_num(ev, "rounded");
    char b1[64], b2[64], b3[64], b4[64];
    f32_bits(before, 0, b1, sizeof b1);
    f32_bits(term, 0, b2, sizeof b2);
    f32_bits(sum, keep, b3, sizeof b3);
    f32_bits(rounded, 0, b4, sizeof b4);
    /* the rounded value in the output format's width: drop the mantissa bits it does not keep */
    if (keep > 0 && keep < 23) b4[1 + 1 + 8 + 1 + keep] = 0;
    snprintf(out, cap,
             "layer %g head %g, step %lld, batch %g, row T = %g, feature I = %g, key %g (P-bar = %.9g, v = %.9g)\n"
             "  running FP32 sum   %-22.17g %s\n"
             "+ term P-bar*v       %-22.17g %s\n"
             "= exact FP32 sum     %-22.17g %s\n"
             "                     (kept bits | rounding bit | sticky bits)\n"
             "  rounded to %-8s%-22.17g %s\n"
             "  error (rounded - sum) %.17g%s",
             tsc_jv_num(top, "layer"), tsc_jv_num(top, "head"), step, tsc_jv_num(ev, "batch"), tsc_jv_num(ev, "token"),
             tsc_jv_num(ev, "feature"), tsc_jv_num(ev, "key"), tsc_jv_num(ev, "pbar"), tsc_jv_num(ev, "v"),
             (double)before, b1, (double)term, b2, (double)sum, b3, f ? f : "?", (double)rounded, b4,
             tsc_jv_num(ev, "error"),
             tsc_jv_num(ev, "error") * (double)sum > 0 ? "  (rounded up in magnitude: the sticky bits made a tie \"more "
                                                       "than half\", PAPER.md section 5)" : "");
    return 1;
}

static const char *yesno(double v) { return v == 1 ? "yes" : "no"; }

/* 100 x as a whole percentage, without a "-0" for tiny negative values. */
static double pct(double x) {
    double r = round(100 * x);
    return r == 0 ? 0 : r;
}

/* Rows of the ranked at-risk table: [n][9]. */
static char **at_risk_rows(const tsc_jv_t *sm, int *nrows) {
    const tsc_jv_t *ar = tsc_jv_path(sm, "diagnosis.at_risk");
    *nrows = 0;
    if (ar && ar->n) {
        char **c = calloc(ar->n * 9, sizeof *c);
        if (!c) return NULL;
        for (size_t i = 0; i < ar->n; i++) {
            const tsc_jv_t *h = ar->items[i];
            char feats[128] = "";
            const tsc_jv_t *fl = tsc_jv_get(h, "features");
            for (size_t k = 0; fl && k < fl->n && k < 8; k++)
                snprintf(feats + strlen(feats), sizeof feats - strlen(feats), "%s%g", k ? "," : "", fl->items[k]->num);
            char **r = c + i * 9;
            r[0] = cell("%g", tsc_jv_num(h, "rank"));
            r[1] = cell("%g / %g", tsc_jv_num(h, "layer"), tsc_jv_num(h, "head"));
            r[2] = cell("%g", tsc_jv_num(h, "step"));
            r[3] = cell("%+.3g", tsc_jv_num(h, "delta_cumsum"));
            r[4] = cell("%s (%.3g ULP)", feats[0] ? feats : "none", tsc_jv_num(h, "feature_mean_ulp"));
            if (!isfinite(tsc_jv_num(h, "culprit_ratio"))) {
                r[5] = cell("not examined (beyond --max-heads)");
                r[6] = cell("-");
                r[7] = cell("-");
            } else {
                r[5] = cell("%s (leaves %.0f%%)", tsc_jv_str(h, "culprit") ? tsc_jv_str(h, "culprit") : "?",
                            pct(tsc_jv_num(h, "culprit_ratio")));
                r[6] = cell("%.0f%%", pct(tsc_jv_num(h, "delta_src_ratio")));
                r[7] = cell("%.0f%%", pct(tsc_jv_num(h, "stable_ratio")));
            }
            double gain = tsc_jv_num(h, "accum_gain");
            const char *vd = tsc_jv_str(h, "verdict") ? tsc_jv_str(h, "verdict") : "?";
            r[8] = isfinite(gain) ? cell("%s (gain %.1f)", vd, gain) : cell("%s", vd);
        }
        *nrows = (int)ar->n;
        return c;
    }
    /* analysis only: the flagged (layer, head)s, each once */
    const tsc_jv_t *fh = tsc_jv_get(sm, "flagged_heads");
    size_t n = fh ? fh->n : 0;
    char **c = calloc((n ? n : 1) * 9, sizeof *c);
    if (!c) return NULL;
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        const tsc_jv_t *h = fh->items[i];
        int dup = 0;
        for (size_t j = 0; j < i; j++)
            dup |= tsc_jv_num(fh->items[j], "layer") == tsc_jv_num(h, "layer") &&
                   tsc_jv_num(fh->items[j], "head") == tsc_jv_num(h, "head");
        if (dup) continue;
        char **r = c + (size_t)k * 9;
        r[0] = cell("%d", k + 1);
        r[1] = cell("%g / %g", tsc_jv_num(h, "layer"), tsc_jv_num(h, "head"));
        r[2] = cell("%g", tsc_jv_num(h, "step"));
        r[3] = cell("-");
        r[4] = cell("%.3g ULP", tsc_jv_num(h, "top_mean_ulp"));
        for (int q = 5; q < 8; q++) r[q] = cell("not measured");
        r[8] = cell("flagged");
        k++;
    }
    *nrows = k;
    return c;
}

/* Per (layer, head), pooled over steps: [n][8]. */
static char **head_rows(const tsc_jv_t *sm, int *nrows) {
    const tsc_jv_t *hs = tsc_jv_get(sm, "heads");
    *nrows = 0;
    size_t n = hs ? hs->n : 0;
    char **c = calloc((n ? n : 1) * 8, sizeof *c);
    if (!c) return NULL;
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        const tsc_jv_t *h = hs->items[i];
        double L = tsc_jv_num(h, "layer"), H = tsc_jv_num(h, "head");
        int seen = 0;
        for (size_t j = 0; j < i; j++) seen |= tsc_jv_num(hs->items[j], "layer") == L && tsc_jv_num(hs->items[j], "head") == H;
        if (seen) continue;
        /* the last step's record carries the running sums; count biased steps and ties over all */
        const tsc_jv_t *last = h;
        int biased = 0, steps = 0;
        double ties = 0, omean = 0;
        for (size_t j = i; j < n; j++) {
            const tsc_jv_t *g = hs->items[j];
            if (tsc_jv_num(g, "layer") != L || tsc_jv_num(g, "head") != H) continue;
            last = g, steps++;
            biased += tsc_jv_num(g, "delta_biased") == 1;
            double t = tsc_jv_num(g, "ties.rows_multi_max");
            if (isfinite(t)) ties += t;
            double om = tsc_jv_num(g, "o.mean_ulp");
            if (isfinite(om)) omean += om;
        }
        char **r = c + (size_t)k * 8;
        r[0] = cell("%g / %g", L, H);
        if (tsc_jv_num(last, "skipped") == 1) {
            r[1] = cell("skipped: %s", tsc_jv_str(last, "first_nonfinite") ? tsc_jv_str(last, "first_nonfinite") : "NaN/Inf");
            for (int q = 2; q < 8; q++) r[q] = cell("-");
        } else {
            r[1] = cell("%s", yesno(tsc_jv_num(last, "flagged")));
            r[2] = cell("%d of %d", biased, steps);
            r[3] = cell("%+.3g", tsc_jv_num(last, "delta.cumsum"));
            r[4] = cell("%+.3g", steps ? omean / steps : NAN);
            r[5] = cell("%g (%+.3g ULP)", tsc_jv_num(last, "features.top"), tsc_jv_num(last, "features.top_mean_ulp"));
            r[6] = cell("%g", ties);
            const tsc_jv_t *sk = tsc_jv_path(last, "ties.sinks_flagged");
            char sinks[64] = "";
            for (size_t q = 0; sk && q < sk->n; q++)
                snprintf(sinks + strlen(sinks), sizeof sinks - strlen(sinks), "%s%g", q ? "," : "", sk->items[q]->num);
            r[7] = cell("%s", sinks[0] ? sinks : "none");
        }
        k++;
    }
    *nrows = k;
    return c;
}

/* Writes a file atomically from memory. */
static tsc_status_t write_atomic(const char *path, const char *data, size_t n) {
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return tsc_error_set(TSC_ERR_IO, "%s: cannot open for writing: %s", tmp, strerror(errno));
    size_t w = fwrite(data, 1, n, f);
    int e = errno;
    if (fclose(f) != 0 || w != n) {
        unlink(tmp);
        return tsc_error_set(TSC_ERR_IO, "%s: write failed: %s", path, strerror(w != n ? e : errno));
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        unlink(tmp);
        return tsc_error_set(TSC_ERR_IO, "%s: cannot rename %s into place: %s", path, tmp, strerror(e));
    }
    return TSC_OK;
}

typedef struct {
    const tsc_figure_src_t *s;
} ev_png_t;

static tsc_status_t ev_png_draw(cairo_t *cr, double w, double h, void *c) {
    return tsc_figure_evidence_draw(cr, ((ev_png_t *)c)->s, w, h, 8, NULL, 0);
}

tsc_status_t tsc_report_write(tsc_figure_src_t *src, const char *pdf_path, const tsc_report_opts_t *o,
                              tsc_report_info_t *info) {
    tsc_report_info_t local;
    tsc_report_opts_t dflt;
    if (!info) info = &local;
    memset(info, 0, sizeof *info);
    if (!o) tsc_report_opts_init(&dflt), o = &dflt;
    if (!src || !pdf_path) return tsc_error_set(TSC_ERR_ARG, "tsc_report_write: NULL argument");
    size_t plen = strlen(pdf_path);
    if (plen < 5 || strcmp(pdf_path + plen - 4, ".pdf") != 0 || plen > 1000)
        return tsc_error_set(TSC_ERR_ARG, "report %s: the output must be a path ending in .pdf", pdf_path);
    {
        /* fail early, naming the folder, rather than after drawing every figure */
        char folder[1100];
        const char *sl = strrchr(pdf_path, '/');
        snprintf(folder, sizeof folder, "%.*s", sl ? (int)(sl - pdf_path) : 1, sl ? pdf_path : ".");
        if (sl == pdf_path) snprintf(folder, sizeof folder, "/");
        if (access(folder, W_OK) != 0)
            return tsc_error_set(TSC_ERR_IO, "report %s: cannot write into the folder %s: %s", pdf_path, folder,
                                 strerror(errno));
    }
    const tsc_jv_t *sm = tsc_figure_src_summary(src);
    const char *dir = tsc_figure_src_dir(src);
    tsc_status_t st = TSC_OK;
    tsc_figure_opts_t fo;
    tsc_figure_opts_init(&fo);
    fo.dpi = o->fig_dpi > 0 ? o->fig_dpi : 150;
    fo.dump = o->dump;
    tsc_fig_sel_t sel;
    tsc_fig_resolve(src, &fo, &sel);

    /* 1. every figure to a temporary PNG, kept in memory */
    fig_t *figs = calloc(MAX_FIGS, sizeof *figs);
    if (!figs) return tsc_error_set(TSC_ERR_NOMEM, "report: out of memory");
    int nf = 0;
    char tmp_png[1200];
    snprintf(tmp_png, sizeof tmp_png, "%.*s.fig.%ld.png", (int)(plen - 4), pdf_path, (long)getpid());
    for (int i = 0; i < tsc_figure_count() && nf < MAX_FIGS; i++) {
        fig_t *f = &figs[nf++];
        tsc_figure_info_t fi;
        snprintf(f->id, sizeof f->id, "%s", tsc_figure_id(i));
        if (o->progress) fprintf(stderr, "report: %s ...\n", f->id);
        tsc_status_t fs = tsc_figure_write(src, f->id, &fo, tmp_png, TSC_IMG_PNG, &fi);
        if (fs == TSC_OK) {
            char *buf;
            size_t n;
            if (tsc_read_file(tmp_png, &buf, &n) == TSC_OK) {
                f->png = (unsigned char *)buf, f->png_len = n, f->ok = 1;
                snprintf(f->caption, sizeof f->caption, "%s", fi.caption);
                f->w_in = fi.width_in, f->h_in = fi.height_in;
            } else snprintf(f->why, sizeof f->why, "%s", tsc_error_last());
            unlink(tmp_png);
        } else {
            snprintf(f->why, sizeof f->why, "%s", tsc_error_last());
        }
        info->n_figures += f->ok;
        info->n_skipped += !f->ok;
    }

    /* 2. the text blocks both outputs share */
    const tsc_jv_t *top = tsc_jv_path(sm, "diagnosis.at_risk.0");
    int has_diag = tsc_jv_get(sm, "diagnosis") != NULL;
    char verdict[1024];
    double n_flag = tsc_jv_num(sm, "n_flagged_heads");
    if (top)
        snprintf(verdict, sizeof verdict, "%g layer/head(s) at risk. Top: layer %g head %g: %s. Recommendation: %s",
                 tsc_jv_num(sm, "diagnosis.n_at_risk"), tsc_jv_num(top, "layer"), tsc_jv_num(top, "head"),
                 tsc_jv_str(top, "verdict") ? tsc_jv_str(top, "verdict") : "?",
                 tsc_jv_str(top, "recommendation") ? tsc_jv_str(top, "recommendation") : "-");
    else if (n_flag > 0)
        snprintf(verdict, sizeof verdict, "%g flagged head records (analysis only; run `tilescope diagnose` for the "
                                          "verdict, culprit stage and mitigation).", n_flag);
    else
        snprintf(verdict, sizeof verdict, "No biased head: nothing at risk under the flag rule (family-wise "
                                          "false-positive bound %g).", tsc_jv_num(sm, "flag_rule.alpha"));
    char meta[2048];
    snprintf(meta, sizeof meta,
             "Analysis folder: %s\nDump: %s\nPolicies: lp %s versus hp %s\nSelection: %s; %g steps analysed, %g head "
             "records, %g rows per head\nGeometry: batch %g, %g heads (%g kv), T %g, D %g, C %g, softmax scale %g\n"
             "Producer: %s. Layers and heads are 0-based (the paper's 'head 8' is head 7 here).",
             dir, tsc_jv_str(sm, "dump") ? tsc_jv_str(sm, "dump") : "?", tsc_jv_str(sm, "lp") ? tsc_jv_str(sm, "lp") : "?",
             tsc_jv_str(sm, "hp") ? tsc_jv_str(sm, "hp") : "?", tsc_jv_str(sm, "selection") ? tsc_jv_str(sm, "selection") : "?",
             tsc_jv_num(sm, "computed_over.steps"), tsc_jv_num(sm, "computed_over.head_records"),
             tsc_jv_num(sm, "computed_over.rows_per_head"), tsc_jv_num(sm, "geometry.batch"),
             tsc_jv_num(sm, "geometry.n_head"), tsc_jv_num(sm, "geometry.n_kv_head"), tsc_jv_num(sm, "geometry.seq_len"),
             tsc_jv_num(sm, "geometry.head_dim"), tsc_jv_num(sm, "geometry.d_model"),
             tsc_jv_num(sm, "geometry.softmax_scale"), tsc_jv_str(sm, "producer") ? tsc_jv_str(sm, "producer") : "?");
    char event[2048];
    int has_event = event_text(top, tsc_jv_int(top, "step", 0), event, sizeof event);
    char mitig[2048] = "";
    const tsc_jv_t *ar = tsc_jv_path(sm, "diagnosis.at_risk");
    if (ar && ar->n) {
        const tsc_jv_t *betas = tsc_jv_path(sm, "diagnosis.betas");
        snprintf(mitig, sizeof mitig, "Policy replayed: %s (PAPER.md section 6, Algorithm 3). Share of the bias B(lp) "
                                      "left (100%% = no effect, 0%% = removed; a negative share means the bias changed sign, and a "
                                      "share far outside [-100%%, 100%%] means the stabilised replay made an error larger than the "
                                      "bias it targets, e.g. a beta so large that the row sums underflow: PAPER.md section 6, "
                                      "'too large underflows'):\n",
                 tsc_jv_str(sm, "diagnosis.stable_policy") ? tsc_jv_str(sm, "diagnosis.stable_policy") : "?");
        for (size_t i = 0; i < ar->n && i < 12; i++) {
            const tsc_jv_t *h = ar->items[i];
            size_t m = strlen(mitig);
            if (!isfinite(tsc_jv_num(h, "stable_ratio"))) {
                snprintf(mitig + m, sizeof mitig - m, "layer %g head %g: not examined (beyond --max-heads)\n",
                         tsc_jv_num(h, "layer"), tsc_jv_num(h, "head"));
                continue;
            }
            snprintf(mitig + m, sizeof mitig - m, "layer %g head %g: +stable leaves %.1f%%; beta sweep:", tsc_jv_num(h, "layer"),
                     tsc_jv_num(h, "head"), 100 * tsc_jv_num(h, "stable_ratio"));
            const tsc_jv_t *br = tsc_jv_get(h, "beta_ratios");
            for (size_t k = 0; br && k < br->n; k++) {
                m = strlen(mitig);
                snprintf(mitig + m, sizeof mitig - m, " beta %g: %.1f%%", tsc_jv_num(tsc_jv_at(betas, k), NULL),
                         100 * br->items[k]->num);
            }
            m = strlen(mitig);
            snprintf(mitig + m, sizeof mitig - m, "\n");
        }
    } else {
        snprintf(mitig, sizeof mitig, "Not measured: this analysis has no diagnosis. `tilescope diagnose DUMP -o %s` "
                                      "replays the stabilised policy (+stable) and a beta sweep.", dir);
    }
    sb_t repro = {0};
    const char *dump = tsc_jv_str(sm, "dump") ? tsc_jv_str(sm, "dump") : "DUMP";
    char maxh[48] = "";
    if (ar && ar->n) {
        /* heads examined in depth: those with measured ratios (diagnose --max-heads) */
        size_t k = 0;
        for (size_t i = 0; i < ar->n; i++) k += isfinite(tsc_jv_num(ar->items[i], "stable_ratio")) != 0;
        if (k < ar->n) snprintf(maxh, sizeof maxh, " --max-heads %zu", k);
    }
    sb_printf(&repro, "tilescope %s %s -o %s --lp '%s' --hp '%s' --select '%s'%s\n", has_diag ? "diagnose" : "analyze",
              dump, dir, tsc_jv_str(sm, "lp") ? tsc_jv_str(sm, "lp") : "?",
              tsc_jv_str(sm, "hp") ? tsc_jv_str(sm, "hp") : "?",
              tsc_jv_str(sm, "selection") ? tsc_jv_str(sm, "selection") : "all", maxh);
    char logargs[1024] = "";
    for (int i = 0; i < tsc_figure_src_n_logs(src); i++) {
        const tsc_log_t *lg = tsc_figure_src_log(src, i);
        size_t m = strlen(logargs);
        snprintf(logargs + m, sizeof logargs - m, " --log '%.63s=%.200s'", lg->name, lg->path);
    }
    sb_printf(&repro, "tilescope report %s%s%s%s -o %s\n", dir, logargs, o->dump ? " --dump " : "", o->dump ? o->dump : "",
              pdf_path);
    for (int i = 0; i < nf; i++)
        if (figs[i].ok) {
            /* only the figures that read training logs get the --log arguments */
            int uses_logs = !strcmp(figs[i].id, "fig1") || !strcmp(figs[i].id, "fig2") || !strcmp(figs[i].id, "fig7") ||
                            !strcmp(figs[i].id, "fig10") || !strcmp(figs[i].id, "fig13");
            int uses_dump = !strcmp(figs[i].id, "fig4") || !strcmp(figs[i].id, "fig5b") || !strcmp(figs[i].id, "fig6a") ||
                            !strcmp(figs[i].id, "fig9");
            sb_printf(&repro, "tilescope figure %s --from %s%s%s%s -o %s.pdf\n", figs[i].id, dir, uses_logs ? logargs : "",
                      uses_dump && o->dump ? " --dump " : "", uses_dump && o->dump ? o->dump : "", figs[i].id);
        }
    if (has_event && top)
        sb_printf(&repro, "tilescope explain add %.9g %.9g --to %s   # the rounding event above\n",
                  tsc_jv_num(top, "event.sum_before"), tsc_jv_num(top, "event.term"),
                  tsc_jv_str(top, "event.out_format") ? tsc_jv_str(top, "event.out_format") : "bf16");
    if (repro.oom) { st = tsc_error_set(TSC_ERR_NOMEM, "report: out of memory"); goto done; }

    int n_ar = 0, n_hd = 0;
    char **ar_cells = at_risk_rows(sm, &n_ar), **hd_cells = head_rows(sm, &n_hd);
    static const char *ar_hdr[9] = {"rank", "layer / head", "step", "accumulated sum of delta_lp - delta_hp",
                                    "flagged features (mean O error)", "culprit stage", "delta from FP32 O leaves",
                                    "+stable leaves", "verdict"};
    static const double ar_w[9] = {0.05, 0.09, 0.06, 0.13, 0.15, 0.18, 0.11, 0.09, 0.14};
    static const char *hd_hdr[8] = {"layer / head", "flagged", "delta-biased steps", "accumulated sum of delta diff",
                                    "mean O error [ULP]", "top feature (mean ULP)", "rows with >= 2 maxima",
                                    "sink keys"};
    static const double hd_w[8] = {0.10, 0.08, 0.11, 0.15, 0.12, 0.18, 0.13, 0.13};
    if (!ar_cells || !hd_cells) { st = tsc_error_set(TSC_ERR_NOMEM, "report: out of memory"); goto cells_done; }

    /* 3. the PDF */
    {
        char tmp[1200];
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", pdf_path, (long)getpid());
        pdf_t p = {0};
        p.sf = cairo_pdf_surface_create(tmp, PAGE_W, PAGE_H);
        if (cairo_surface_status(p.sf) != CAIRO_STATUS_SUCCESS) {
            st = tsc_error_set(TSC_ERR_IO, "%s: cannot create the PDF: %s", pdf_path,
                               cairo_status_to_string(cairo_surface_status(p.sf)));
            cairo_surface_destroy(p.sf);
            goto cells_done;
        }
        tsc_fig_pdf_date(p.sf);
        cairo_pdf_surface_set_metadata(p.sf, CAIRO_PDF_METADATA_TITLE, "tilescope report");
        cairo_pdf_surface_set_metadata(p.sf, CAIRO_PDF_METADATA_CREATOR, "tilescope " TSC_VERSION);
        p.cr = cairo_create(p.sf);
        new_page(&p);
        cairo_set_source_rgb(p.cr, 0.05, 0.15, 0.35);
        para(&p, SANS, 20, 1, "tilescope report", 4);
        cairo_set_source_rgb(p.cr, 0, 0, 0);
        para(&p, SANS, BODY_PT, 0, "Low-precision attention: where rounding error comes from and whether it accumulates "
                                   "(the workflow of Qiu & Yao, ICLR 2026, Appendix F).", 8);
        heading(&p, "Verdict");
        para(&p, SANS, 10.5, 1, verdict, 6);
        para(&p, SANS, SMALL_PT + 0.5, 0, meta, 6);
        heading(&p, "At-risk heads, ranked by the accumulated delta bias");
        if (n_ar) table(&p, 9, ar_w, ar_hdr, ar_cells, n_ar);
        else para(&p, SANS, BODY_PT, 0, "None.", 6);
        new_page(&p);
        heading(&p, "Evidence map (figure 1)");
        {
            double w = PAGE_W - 2 * MARGIN, h = w * 3.9 / 6.5;
            char cap[2048];
            cairo_save(p.cr);
            cairo_translate(p.cr, MARGIN, p.y);
            cairo_rectangle(p.cr, 0, 0, w, h);
            cairo_clip(p.cr);
            st = tsc_figure_evidence_draw(p.cr, src, w, h, 8, cap, sizeof cap);
            cairo_restore(p.cr);
            p.y += h + 6;
            para(&p, SANS, SMALL_PT, 0, cap, 10);
            if (st) goto pdf_done;
        }
        heading(&p, "Per layer and head (pooled over the analysed steps)");
        table(&p, 8, hd_w, hd_hdr, hd_cells, n_hd);
        new_page(&p);
        heading(&p, "Figures");
        for (int i = 0; i < nf; i++) {
            fig_t *f = &figs[i];
            if (!f->ok || !strcmp(f->id, "fig1")) continue;
            png_rd_t rd = {NULL, f->png, f->png_len, 0};
            cairo_surface_t *img = cairo_image_surface_create_from_png_stream(png_read, &rd);
            if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
                cairo_surface_destroy(img);
                continue;
            }
            /* printed 1.4x the design size (3.25 in -> 4.55 in), so its 8 pt text prints at 11 pt */
            double w = f->w_in * 72 * 1.4, maxw = PAGE_W - 2 * MARGIN;
            if (w > maxw) w = maxw;
            double h = w * f->h_in / f->w_in;
            double ch = tsc_fig_text(p.cr, SANS, SMALL_PT, 0, 0, 0, maxw, f->caption, 0, 0, 0);
            need(&p, h + ch + 14);
            double sc = w / cairo_image_surface_get_width(img);
            cairo_save(p.cr);
            cairo_translate(p.cr, MARGIN + (maxw - w) / 2, p.y);
            cairo_scale(p.cr, sc, sc);
            cairo_set_source_surface(p.cr, img, 0, 0);
            cairo_paint(p.cr);
            cairo_restore(p.cr);
            cairo_surface_destroy(img);
            p.y += h + 3;
            para(&p, SANS, SMALL_PT, 0, f->caption, 12);
        }
        if (info->n_skipped) {
            para(&p, SANS, BODY_PT, 1, "Figures not drawn (their data is absent):", 3);
            for (int i = 0; i < nf; i++)
                if (!figs[i].ok) {
                    char line[800];
                    snprintf(line, sizeof line, "%s: %s", figs[i].id, figs[i].why);
                    para(&p, SANS, SMALL_PT, 0, line, 2);
                }
        }
        heading_keep(&p, "The rounding event found in this data (bit level)",
                     has_event ? 40 + text_h(&p, MONO, SMALL_PT, event) : 30);
        if (has_event) {
            para(&p, SANS, BODY_PT, 0, "The single P-bar V addition with the largest rounding error among the flagged "
                                       "features of the top at-risk head, printed like PAPER.md section 5's worked "
                                       "example: the FP32 sum's bits after the output format's kept mantissa, then the "
                                       "rounding bit, then the sticky bits.", 4);
            para(&p, MONO, SMALL_PT, 0, event, 8);
        } else {
            para(&p, SANS, BODY_PT, 0, "No rounding event was traced: run `tilescope diagnose` on the dump (it looks for "
                                       "the largest event at each at-risk head).", 8);
        }
        heading_keep(&p, "Measured effect of the mitigation", text_h(&p, SANS, BODY_PT, mitig));
        para(&p, SANS, BODY_PT, 0, mitig, 8);
        heading_keep(&p, "Commands that reproduce every number", text_h(&p, MONO, SMALL_PT, repro.p));
        para(&p, MONO, SMALL_PT, 0, repro.p, 8);
        footer(&p);
        cairo_show_page(p.cr);
    pdf_done:
        info->n_pages = p.page;
        cairo_destroy(p.cr);
        cairo_surface_finish(p.sf);
        if (!st && cairo_surface_status(p.sf) != CAIRO_STATUS_SUCCESS)
            st = tsc_error_set(TSC_ERR_IO, "%s: writing the PDF failed: %s", pdf_path,
                               cairo_status_to_string(cairo_surface_status(p.sf)));
        cairo_surface_destroy(p.sf);
        if (!st && rename(tmp, pdf_path) != 0)
            st = tsc_error_set(TSC_ERR_IO, "%s: cannot rename %s into place: %s", pdf_path, tmp, strerror(errno));
        if (st) { unlink(tmp); goto cells_done; }
    }

    /* 4. the HTML: the same content, figures as data URIs */
    if (o->html) {
        sb_t h = {0};
        snprintf(info->html_path, sizeof info->html_path, "%.*s.html", (int)(plen - 4), pdf_path);
        sb_printf(&h, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tilescope report</title>\n"
                      "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto;color:#111}"
                      "h1,h2{color:#0d2659}table{border-collapse:collapse;font-size:85%%;margin:0.5em 0}"
                      "td,th{border:1px solid #bbb;padding:2px 5px;text-align:left;vertical-align:top}"
                      "th{background:#e1e8f5}tr:nth-child(even){background:#f4f4f4}pre{background:#f6f6f6;"
                      "padding:0.6em;overflow-x:auto;font-size:85%%}figure{margin:1.2em 0}img{max-width:100%%}"
                      "figcaption{font-size:85%%;color:#333}</style></head><body>\n<h1>tilescope report</h1>\n");
        sb_printf(&h, "<h2>Verdict</h2>\n<p><b>");
        sb_html(&h, verdict);
        sb_printf(&h, "</b></p>\n<pre>");
        sb_html(&h, meta);
        sb_printf(&h, "</pre>\n<h2>At-risk heads, ranked by the accumulated delta bias</h2>\n");
        if (n_ar) {
            sb_printf(&h, "<table><tr>");
            for (int c = 0; c < 9; c++) sb_printf(&h, "<th>"), sb_html(&h, ar_hdr[c]), sb_printf(&h, "</th>");
            sb_printf(&h, "</tr>\n");
            for (int r = 0; r < n_ar; r++) {
                sb_printf(&h, "<tr>");
                for (int c = 0; c < 9; c++) sb_printf(&h, "<td>"), sb_html(&h, ar_cells[r * 9 + c]), sb_printf(&h, "</td>");
                sb_printf(&h, "</tr>\n");
            }
            sb_printf(&h, "</table>\n");
        } else sb_printf(&h, "<p>None.</p>\n");
        /* the evidence map as its own PNG */
        {
            ev_png_t ec = {src};
            tsc_status_t es = tsc_fig_cairo_write(tmp_png, TSC_IMG_PNG, 6.5, 3.9, 150, ev_png_draw, &ec);
            char *buf = NULL;
            size_t n = 0;
            sb_printf(&h, "<h2>Evidence map (figure 1)</h2>\n");
            if (!es && tsc_read_file(tmp_png, &buf, &n) == TSC_OK) {
                sb_printf(&h, "<figure><img alt=\"evidence map\" src=\"data:image/png;base64,");
                sb_base64(&h, (unsigned char *)buf, n);
                sb_printf(&h, "\"><figcaption>");
                sb_html(&h, figs[0].ok ? figs[0].caption : "");
                sb_printf(&h, "</figcaption></figure>\n");
            }
            free(buf);
            unlink(tmp_png);
        }
        sb_printf(&h, "<h2>Per layer and head (pooled over the analysed steps)</h2>\n<table><tr>");
        for (int c = 0; c < 8; c++) sb_printf(&h, "<th>"), sb_html(&h, hd_hdr[c]), sb_printf(&h, "</th>");
        sb_printf(&h, "</tr>\n");
        for (int r = 0; r < n_hd; r++) {
            sb_printf(&h, "<tr>");
            for (int c = 0; c < 8; c++) sb_printf(&h, "<td>"), sb_html(&h, hd_cells[r * 8 + c]), sb_printf(&h, "</td>");
            sb_printf(&h, "</tr>\n");
        }
        sb_printf(&h, "</table>\n<h2>Figures</h2>\n");
        for (int i = 0; i < nf; i++) {
            if (!figs[i].ok || !strcmp(figs[i].id, "fig1")) continue;
            sb_printf(&h, "<figure id=\"%s\"><img alt=\"%s\" src=\"data:image/png;base64,", figs[i].id, figs[i].id);
            sb_base64(&h, figs[i].png, figs[i].png_len);
            sb_printf(&h, "\"><figcaption>");
            sb_html(&h, figs[i].caption);
            sb_printf(&h, "</figcaption></figure>\n");
        }
        if (info->n_skipped) {
            sb_printf(&h, "<p><b>Figures not drawn (their data is absent):</b></p><ul>\n");
            for (int i = 0; i < nf; i++)
                if (!figs[i].ok) sb_printf(&h, "<li>%s: ", figs[i].id), sb_html(&h, figs[i].why), sb_printf(&h, "</li>\n");
            sb_printf(&h, "</ul>\n");
        }
        sb_printf(&h, "<h2>The rounding event found in this data (bit level)</h2>\n");
        if (has_event) sb_printf(&h, "<pre>"), sb_html(&h, event), sb_printf(&h, "</pre>\n");
        else sb_printf(&h, "<p>No rounding event was traced: run <code>tilescope diagnose</code> on the dump.</p>\n");
        sb_printf(&h, "<h2>Measured effect of the mitigation</h2>\n<pre>");
        sb_html(&h, mitig);
        sb_printf(&h, "</pre>\n<h2>Commands that reproduce every number</h2>\n<pre>");
        sb_html(&h, repro.p);
        sb_printf(&h, "</pre>\n</body></html>\n");
        if (h.oom) st = tsc_error_set(TSC_ERR_NOMEM, "report: out of memory building the HTML");
        else st = write_atomic(info->html_path, h.p, h.len);
        free(h.p);
        if (st) goto cells_done;
    }

    /* 5. summary.json beside the report, unless it is that very file */
    if (o->copy_summary) {
        char dst[1200], rs[PATH_MAX], rd[PATH_MAX];
        const char *slash = strrchr(pdf_path, '/');
        if (slash) snprintf(dst, sizeof dst, "%.*s/summary.json", (int)(slash - pdf_path), pdf_path);
        else snprintf(dst, sizeof dst, "summary.json");
        int same = realpath(tsc_fig_summary_path(src), rs) && realpath(dst, rd) && strcmp(rs, rd) == 0;
        if (!same) {
            char *buf;
            size_t n;
            if ((st = tsc_read_file(tsc_fig_summary_path(src), &buf, &n)) == TSC_OK) {
                st = write_atomic(dst, buf, n);
                free(buf);
            }
        }
        if (!st) snprintf(info->summary_path, sizeof info->summary_path, "%.1000s", dst);
    }
cells_done:
    free_cells(ar_cells, (size_t)n_ar * 9);
    free_cells(hd_cells, (size_t)n_hd * 8);
done:
    free(repro.p);
    for (int i = 0; i < nf; i++) free(figs[i].png);
    free(figs);
    return st;
}
