/* diffview.c: the diff of two dumps as an offline HTML page (tsc_diffview.h, docs/DIFF.md). */
#include "tsc_diffview.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsc_escape.h"
#include "tsc_file.h"
#include "tsc_strbuf.h"

#define MAX_GRIDS 64   /* (step, dataset) grids drawn; those with differences first when there are more */
#define MAX_LISTED 200 /* differing records listed */
#define TSC_DIFF_STR_(x) #x
#define TSC_DIFF_STR(x) TSC_DIFF_STR_(x)

/* A cell's colour: white when bit-identical, then from pale yellow (up to 1 ULP) to deep red (2^10
 * ULP and beyond) on a log scale; purple for a non-finite mismatch. */
static void cell_colour(const tsc_diff_stat_t *s, char *out, size_t cap) {
    if (s->nonfinite) { snprintf(out, cap, "#7b3294"); return; }
    if (s->identical == s->n) { snprintf(out, cap, "#ffffff"); return; }
    double u = s->max_ulp < 1 ? 1 : s->max_ulp, f = log2(u) / 10.0;
    if (f > 1) f = 1;
    int g = (int)(235 - 200 * f), b = (int)(160 - 150 * f);
    snprintf(out, cap, "#ff%02x%02x", g, b);
}

/* identical / n as a percentage that reads 100 only when every pair is identical. */
static void share_text(tsc_strbuf_t *h, int64_t identical, int64_t n) {
    double p = n ? 100.0 * (double)identical / (double)n : 100.0;
    if (identical < n && p > 99.9999) tsc_strbuf_puts(h, "&gt;99.9999%");
    else tsc_strbuf_printf(h, "%.4f%%", p);
}

/* The numbers of s as HTML text (nothing in it needs escaping); name: the dataset its first
 * difference lies in. */
static void stat_text(tsc_strbuf_t *h, const tsc_diff_stat_t *s, const char *name) {
    share_text(h, s->identical, s->n);
    tsc_strbuf_printf(h, " of %lld bit-identical; max %.6g ULP, mean %.3g ULP (signed %+.3g); mean b&minus;a %+.3g; "
                         "max |b&minus;a| %.3g", (long long)s->n, s->max_ulp,
                      s->n_finite ? s->sum_ulp / (double)s->n_finite : 0.0,
                      s->n_finite ? s->sum_ulp_signed / (double)s->n_finite : 0.0,
                      s->n_finite ? s->sum_diff / (double)s->n_finite : 0.0, s->max_abs);
    if (s->nonfinite) tsc_strbuf_printf(h, "; %lld NaN/Inf against a number", (long long)s->nonfinite);
    char w[96];
    if (s->has_first)
        tsc_strbuf_printf(h, "; first at %s: %.9g vs %.9g (bits 0x%llx vs 0x%llx)", tsc_diff_where(name, s, w, sizeof w),
                          s->first_a, s->first_bv, (unsigned long long)s->first_abits, (unsigned long long)s->first_bbits);
}

static void rec_name(tsc_strbuf_t *h, const tsc_diff_rec_t *x) {
    tsc_strbuf_printf(h, "step %lld layer %d <code>", x->step, x->layer);
    tsc_esc_html(h, x->name);
    tsc_strbuf_puts(h, "</code>");
    if (x->head >= 0) tsc_strbuf_printf(h, " head %d", x->head);
}

/* A per-head record's place in the grids: (step, dataset, layer, head). */
typedef struct {
    long long step;
    int set, layer, head;
    size_t rec;
} cell_t;

static int cmp_cell(const void *x, const void *y) {
    const cell_t *a = x, *b = y;
    if (a->step != b->step) return a->step < b->step ? -1 : 1;
    if (a->set != b->set) return a->set < b->set ? -1 : 1;
    if (a->layer != b->layer) return a->layer < b->layer ? -1 : 1;
    if (a->head != b->head) return a->head < b->head ? -1 : 1;
    return a->rec < b->rec ? -1 : a->rec > b->rec;
}

typedef struct {
    const tsc_diff_t *r;
    size_t i;
} worst_t;

static int cmp_worst(const void *x, const void *y) {
    const worst_t *a = x, *b = y;
    const tsc_diff_rec_t *ra = &a->r->recs[a->i], *rb = &b->r->recs[b->i];
    if (tsc_diff_worse(ra, rb)) return -1;
    if (tsc_diff_worse(rb, ra)) return 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

static int set_of(const tsc_diff_t *r, const char *name) {
    for (size_t k = 0; k < r->n_sets; k++)
        if (!strcmp(r->sets[k].name, name)) return (int)k;
    return -1;
}

/* The grid of cells c[0..n) (one step, one dataset), layers by heads. */
static void grid(tsc_strbuf_t *h, const tsc_diff_t *r, const cell_t *c, size_t n) {
    int maxh = 0;
    for (size_t k = 0; k < n; k++)
        if (c[k].head > maxh) maxh = c[k].head;
    tsc_strbuf_printf(h, "<div class=\"g\" id=\"g%lld-%d\"><div><code>", c[0].step, c[0].set);
    tsc_esc_html(h, r->sets[c[0].set].name);
    tsc_strbuf_printf(h, "</code>, step %lld</div>\n<table><tr><th>layer \\ head</th>", c[0].step);
    for (int hh = 0; hh <= maxh; hh++) tsc_strbuf_printf(h, "<th>%d</th>", hh);
    tsc_strbuf_puts(h, "</tr>\n");
    for (size_t k = 0; k < n;) {
        int L = c[k].layer;
        tsc_strbuf_printf(h, "<tr><th>%d</th>", L);
        for (int hh = 0; hh <= maxh; hh++) {
            if (k >= n || c[k].layer != L || c[k].head != hh) {
                tsc_strbuf_puts(h, "<td class=\"c\" style=\"background:#ddd\" title=\"not compared\"></td>");
                continue;
            }
            const tsc_diff_rec_t *x = &r->recs[c[k].rec];
            char col[16];
            cell_colour(&x->s, col, sizeof col);
            tsc_strbuf_printf(h, "<td class=\"c\" style=\"background:%s\" title=\"layer %d head %d (%s vs %s): ", col, L, hh,
                              x->fmt_a, x->fmt_b);
            stat_text(h, &x->s, x->name);
            tsc_strbuf_puts(h, "\"></td>");
            while (k < n && c[k].layer == L && c[k].head == hh) k++;
        }
        while (k < n && c[k].layer == L) k++; /* heads beyond maxh cannot occur; a guard */
        tsc_strbuf_puts(h, "</tr>\n");
    }
    tsc_strbuf_puts(h, "</table></div>\n");
}

static int group_differs(const tsc_diff_t *r, const cell_t *c, size_t n) {
    for (size_t k = 0; k < n; k++)
        if (r->recs[c[k].rec].s.identical < r->recs[c[k].rec].s.n) return 1;
    return 0;
}

static size_t group_end(const cell_t *c, size_t i, size_t n) {
    size_t e = i;
    while (e < n && c[e].step == c[i].step && c[e].set == c[i].set) e++;
    return e;
}

static void grids(tsc_strbuf_t *h, const tsc_diff_t *r, cell_t *c, size_t n) {
    qsort(c, n, sizeof *c, cmp_cell);
    size_t groups = 0, differing = 0;
    for (size_t i = 0; i < n; i = group_end(c, i, n)) {
        groups++;
        differing += group_differs(r, c + i, group_end(c, i, n) - i);
    }
    if (!groups) return;
    int only_diff = groups > MAX_GRIDS;
    tsc_strbuf_puts(h, "<h2>Per step and dataset: layers by heads</h2>\n");
    if (only_diff)
        tsc_strbuf_printf(h, "<p>%zu (step, dataset) grids: only those with a difference are drawn (%zu%s); the %zu "
                             "bit-identical ones are not.</p>\n", groups, differing,
                          differing > MAX_GRIDS ? ", the first " TSC_DIFF_STR(MAX_GRIDS) : "", groups - differing);
    size_t drawn = 0;
    int open = 0;
    long long step = 0;
    for (size_t i = 0; i < n && drawn < MAX_GRIDS;) {
        size_t e = group_end(c, i, n);
        if (!only_diff || group_differs(r, c + i, e - i)) {
            if (!open || c[i].step != step) { /* a row of grids per step */
                if (open) tsc_strbuf_puts(h, "</div>\n");
                tsc_strbuf_printf(h, "<h3>step %lld</h3>\n<div class=\"row\">\n", c[i].step);
                open = 1;
                step = c[i].step;
            }
            grid(h, r, c + i, e - i);
            drawn++;
        }
        i = e;
    }
    if (open) tsc_strbuf_puts(h, "</div>\n");
}

tsc_status_t tsc_diff_html(const tsc_diff_t *r, const char *path) {
    tsc_strbuf_t h;
    tsc_strbuf_init(&h);
    tsc_strbuf_puts(&h, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tilescope diff</title>\n"
                        "<style>body{font:14px sans-serif;margin:2em;max-width:90em}table{border-collapse:collapse;"
                        "margin:0.5em 0 1.5em}td,th{border:1px solid #bbb;padding:2px 6px;font-size:12px;text-align:left}"
                        "td.c{width:22px;height:18px;padding:0}th{background:#eef}code{font-size:12px}"
                        ".ok{color:#1a7a1a}.bad{color:#b01010}li{margin:2px 0}.row{display:flex;flex-wrap:wrap;gap:0 2em}"
                        ".g table{margin-top:0.2em}</style></head><body>\n"
                        "<h1>tilescope diff</h1>\n<p>A: <code>");
    tsc_esc_html(&h, r->path_a);
    tsc_strbuf_puts(&h, "</code> (policy ");
    tsc_esc_html(&h, r->policy_a[0] ? r->policy_a : "unknown");
    tsc_strbuf_puts(&h, ")<br>B: <code>");
    tsc_esc_html(&h, r->path_b);
    tsc_strbuf_puts(&h, "</code> (policy ");
    tsc_esc_html(&h, r->policy_b[0] ? r->policy_b : "unknown");
    tsc_strbuf_printf(&h, ")<br>geometry: batch %d, %d heads (%d kv), T %d, D %d, C %d; selection <code>", r->batch,
                      r->n_head, r->n_kv_head, r->seq_len, r->head_dim, r->d_model);
    tsc_esc_html(&h, r->selection);
    tsc_strbuf_printf(&h, "</code></p>\n<p class=\"%s\"><b>%s</b>: %zu records (step, layer, dataset, head) over %d "
                          "step%s, %zu beyond %g ULP. ", r->n_disagree ? "bad" : "ok", r->n_disagree ? "differ" : "agree",
                      r->n_recs, r->n_steps, r->n_steps == 1 ? "" : "s", r->n_disagree, r->max_ulp);
    stat_text(&h, &r->total, r->first_rec >= 0 ? r->recs[r->first_rec].name : "");
    tsc_strbuf_puts(&h, ".</p>\n<p>ULP: in one stored format, the distance in representable values; between two formats, "
                        "the difference in units of the coarser one's ULP. Cells: white bit-identical, yellow to red "
                        "up to 1 to 1024+ ULP (the largest in the cell), purple a NaN or Inf on one side only, grey not "
                        "compared. Hover a cell for its numbers.</p>\n");
    /* per dataset */
    tsc_strbuf_puts(&h, "<h2>Per dataset</h2>\n<table><tr><th>dataset</th><th>records</th><th>beyond</th>"
                        "<th>identical</th><th>max ULP</th><th>worst record</th><th>summary</th></tr>\n");
    for (size_t i = 0; i < r->n_sets; i++) {
        const tsc_diff_set_t *g = &r->sets[i];
        tsc_strbuf_printf(&h, "<tr class=\"%s\"><td><code>", g->n_disagree ? "bad" : "ok");
        tsc_esc_html(&h, g->name);
        tsc_strbuf_printf(&h, "</code></td><td>%zu</td><td>%zu</td><td>", g->n_recs, g->n_disagree);
        share_text(&h, g->s.identical, g->s.n);
        tsc_strbuf_printf(&h, "</td><td>%.6g</td><td>", g->s.max_ulp);
        if (g->worst_rec >= 0) rec_name(&h, &r->recs[g->worst_rec]);
        else tsc_strbuf_puts(&h, "&ndash;");
        tsc_strbuf_puts(&h, "</td><td>");
        stat_text(&h, &g->s, g->name);
        tsc_strbuf_puts(&h, "</td></tr>\n");
    }
    tsc_strbuf_puts(&h, "</table>\n");
    /* the records that differ, worst first */
    worst_t *w = malloc((r->n_recs ? r->n_recs : 1) * sizeof *w);
    cell_t *c = malloc((r->n_recs ? r->n_recs : 1) * sizeof *c);
    size_t nw = 0, nc = 0;
    for (size_t i = 0; w && c && i < r->n_recs; i++) {
        const tsc_diff_rec_t *x = &r->recs[i];
        if (x->s.identical < x->s.n) w[nw++] = (worst_t){r, i};
        if (x->head >= 0) c[nc++] = (cell_t){x->step, set_of(r, x->name), x->layer, x->head, i};
    }
    if (w && c) {
        grids(&h, r, c, nc);
        qsort(w, nw, sizeof *w, cmp_worst);
        tsc_strbuf_printf(&h, "<h2>Records that differ (%zu, worst first%s)</h2>\n", nw,
                          nw > MAX_LISTED ? "; the first " TSC_DIFF_STR(MAX_LISTED) : "");
        if (nw) tsc_strbuf_puts(&h, "<ol>\n");
        for (size_t i = 0; i < nw && i < MAX_LISTED; i++) {
            const tsc_diff_rec_t *x = &r->recs[w[i].i];
            tsc_strbuf_printf(&h, "<li class=\"%s\">", x->agrees ? "ok" : "bad");
            rec_name(&h, x);
            tsc_strbuf_printf(&h, " (%s vs %s)%s: ", x->fmt_a, x->fmt_b, x->agrees ? ", within the allowed ULP" : "");
            stat_text(&h, &x->s, x->name);
            tsc_strbuf_puts(&h, "</li>\n");
        }
        if (nw) tsc_strbuf_puts(&h, "</ol>\n");
    } else {
        tsc_strbuf_puts(&h, "<p>(out of memory: the record lists are left out)</p>\n");
    }
    free(w);
    free(c);
    if (r->n_only) {
        tsc_strbuf_printf(&h, "<h2>Not compared (%zu%s)</h2>\n<ul>\n", r->n_only,
                          r->n_only > TSC_DIFF_MAX_ONLY ? "; the first 200" : "");
        for (size_t i = 0; i < r->n_only && i < TSC_DIFF_MAX_ONLY; i++) {
            tsc_strbuf_puts(&h, r->only[i].in_a == 1 ? "<li>only in A: " : r->only[i].in_a == 0 ? "<li>only in B: " : "<li>in both: ");
            tsc_esc_html(&h, r->only[i].what);
            tsc_strbuf_puts(&h, "</li>\n");
        }
        tsc_strbuf_puts(&h, "</ul>\n");
    }
    tsc_strbuf_puts(&h, "</body></html>\n");
    tsc_status_t st = tsc_strbuf_status(&h) ? tsc_error_set(TSC_ERR_NOMEM, "diff: out of memory building %s", path)
                                            : tsc_out_write_all(path, h.p, h.len);
    tsc_strbuf_free(&h);
    return st;
}
