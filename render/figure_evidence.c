/* figure_evidence.c: figure 1 as an evidence map (the causal chain of docs/MECHANISM.md §4-5 with this run's
 * numbers at each link). */
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "figure_internal.h"
#include "tsc_surface.h"
#include "tsc_diagnose.h"

/* ---------------------------------------------------------------- the evidence map */

#define N_NODES 6

typedef struct {
    const char *title;
    int evidence;          /* 0: not measured (no data); 1: measured, does not support the link; 2: supports it */
    char body[512];        /* the numbers, or "no evidence: ..." */
} node_t;

static void addf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void addf(char *buf, size_t cap, const char *fmt, ...) {
    size_t n = strlen(buf);
    if (n >= cap - 1) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
}

tsc_fig_counts_t tsc_fig_head_counts(const tsc_jv_t *sm) {
    tsc_fig_counts_t n = {-1, -1, -1, -1};
    const tsc_jv_t *ph = tsc_jv_get(sm, "per_head");
    if (!ph) return n;
    n.heads = (int)ph->n, n.flagged = n.records = n.delta_biased_records = 0;
    for (size_t i = 0; i < ph->n; i++) {
        n.flagged += tsc_jv_num(ph->items[i], "flagged") == 1;
        n.records += (int)tsc_jv_num(ph->items[i], "steps");
        n.delta_biased_records += (int)tsc_jv_num(ph->items[i], "delta_biased_steps");
    }
    return n;
}

const tsc_jv_t *tsc_fig_pooled(const tsc_jv_t *sm, int layer, int head) {
    const tsc_jv_t *ph = tsc_jv_get(sm, "per_head");
    for (size_t i = 0; ph && i < ph->n; i++)
        if (tsc_jv_num(ph->items[i], "layer") == layer && tsc_jv_num(ph->items[i], "head") == head) return ph->items[i];
    return NULL;
}

/* The verdict line: the diagnosis of the shown head, else how many heads were flagged, else
 * that none was. */
static void set_verdict(const tsc_jv_t *sm, const tsc_jv_t *top, const tsc_fig_sel_t *sel, char *verdict,
                        size_t vcap) {
    tsc_fig_counts_t n = tsc_fig_head_counts(sm);
    if (top)
        snprintf(verdict, vcap, "Verdict for layer %d head %d (step %lld): %s. %s", sel->layer, sel->head, sel->step,
                 tsc_jv_str(top, "verdict") ? tsc_jv_str(top, "verdict") : "?",
                 tsc_jv_str(top, "recommendation") ? tsc_jv_str(top, "recommendation") : "");
    else if (n.flagged > 0)
        snprintf(verdict, vcap, "%d of %d heads flagged (analysis only: run `tilescope diagnose` for the verdict); "
                                "shown: layer %d head %d, step %lld.", n.flagged, n.heads, sel->layer, sel->head, sel->step);
    else
        snprintf(verdict, vcap, "No biased head found (flag rule: family-wise false-positive bound %g); shown: layer %d "
                                "head %d, step %lld.", tsc_jv_num(sm, "flag_rule.alpha"), sel->layer, sel->head, sel->step);
}

/* Link 1: a traced rounding event, else the census of rounding-up events; the rows with ties. */
static void node_rounding(node_t *n, const tsc_jv_t *top, const tsc_jv_t *rec, const tsc_fig_sel_t *sel,
                          int diagnosed) {
    const tsc_jv_t *ev = top ? tsc_jv_get(top, "event") : NULL;
    if (ev && tsc_jv_num(ev, "found") == 1) {
        n->evidence = 2;
        addf(n->body, sizeof n->body, "step %lld row %g feature %g, key %g (P-bar %g)\nFP32 sum %.6g -> %s %.6g\n"
             "error %.3g", sel->step, tsc_jv_num(ev, "token"), tsc_jv_num(ev, "feature"), tsc_jv_num(ev, "key"),
             tsc_jv_num(ev, "pbar"), tsc_jv_num(ev, "sum_fp32"), tsc_jv_str(ev, "out_format") ? tsc_jv_str(ev, "out_format") : "?",
             tsc_jv_num(ev, "rounded"), tsc_jv_num(ev, "error"));
        if (tsc_jv_str(top, "culprit"))
            addf(n->body, sizeof n->body, "\nFP32 in stages %s: %+.0f%% of the bias left", tsc_jv_str(top, "culprit"),
                 100 * tsc_jv_num(top, "culprit_ratio"));
    } else if (rec && tsc_jv_num(rec, "census.events_neg") + tsc_jv_num(rec, "census.events_pos") > 0) {
        n->evidence = 2;
        addf(n->body, sizeof n->body, "census: %g rounding-up events (neg) vs %g (pos) in %g additions",
             tsc_jv_num(rec, "census.events_neg"), tsc_jv_num(rec, "census.events_pos"), tsc_jv_num(rec, "census.additions"));
    } else {
        addf(n->body, sizeof n->body, diagnosed ? "no evidence: diagnose traced no rounding event (it examines "
                                                  "flagged heads; --alpha 1 --min-ulp 0 examines the most biased)"
                                                : "no evidence: no rounding event traced (run tilescope diagnose)");
    }
    if (rec && tsc_jv_num(rec, "ties.rows_multi_max") >= 0)
        addf(n->body, sizeof n->body, "\nrows with >= 2 maxima at step %lld: %g of %g", sel->step,
             tsc_jv_num(rec, "ties.rows_multi_max"), tsc_jv_num(rec, "rows"));
}

/* Link 2: delta_lp - delta_hp biased in a flagged head: the head counts, then the shown head's pooled
 * top feature and accumulated sum (summary.json "per_head", the numbers the report's tables print).
 * Returns the accumulated sum shown. */
static double node_delta(node_t *n, const tsc_jv_t *sm, const tsc_jv_t *top, const tsc_jv_t *rec,
                         const tsc_fig_sel_t *sel) {
    tsc_fig_counts_t c = tsc_fig_head_counts(sm);
    const tsc_jv_t *q = tsc_fig_pooled(sm, sel->layer, sel->head);
    double cum = q ? tsc_jv_num(q, "delta_cumsum") : top ? tsc_jv_num(top, "delta_cumsum")
                                                         : (rec ? tsc_jv_num(rec, "delta.cumsum") : NAN);
    if (c.flagged > 0 || c.delta_biased_records > 0) {
        n->evidence = 2;
        addf(n->body, sizeof n->body, "%d of %d heads flagged; delta biased in %d of %d (step, head) records\n",
             c.flagged, c.heads, c.delta_biased_records, c.records);
        if (q)
            addf(n->body, sizeof n->body, "head %d, top feature %g: %+.3g ULP mean O error over %g steps\n", sel->head,
                 tsc_jv_num(q, "top_feature"), tsc_jv_num(q, "top_feature_mean_ulp"), tsc_jv_num(q, "steps"));
        addf(n->body, sizeof n->body, "sum of delta_lp - delta_hp, accumulated: %+.3g", cum);
    } else {
        n->evidence = c.heads > 0 ? 1 : 0;
        addf(n->body, sizeof n->body, "%s: delta_lp - delta_hp not biased in any head (accumulated %+.3g)",
             n->evidence ? "measured" : "no evidence", cum);
    }
    return cum;
}

/* Links 3 and 4 (nd[2], nd[3]): similar rank-1 terms and the accumulated W^Q error; both need x.
 * nd[1] (link 2) must be filled; cum is its accumulated sum. */
static void node_rank1(node_t *nd, const tsc_jv_t *sm, const tsc_jv_t *top, const tsc_jv_t *rec,
                       const tsc_fig_sel_t *sel, double cum) {
    int has_x = rec && tsc_jv_num(rec, "rank1.has_x") == 1;
    if (has_x) {
        /* similar terms: the state follows the number the box prints, the mean cosine of the rank-1 terms
         * of the tied rows (analysis.h5 rank1_cos, figure 8) */
        double mc = tsc_jv_num(rec, "rank1.mean_cos");
        int similar = tsc_fig_ev_similar(mc) == 2;
        nd[2].evidence = tsc_fig_ev_similar(mc);
        const tsc_jv_t *q = tsc_fig_pooled(sm, sel->layer, sel->head);
        addf(nd[2].body, sizeof nd[2].body, "step %lld: %g terms of tied rows: mean cosine %.3f (%s %.2f)\ntop energy "
             "%.3f, eff. rank %.3g", sel->step, tsc_jv_num(rec, "rank1.terms"), mc, similar ? "similar: >=" : "not similar: <",
             TSC_FIG_SIMILAR_COS, tsc_jv_num(rec, "rank1.top_energy"), tsc_jv_num(rec, "rank1.eff_rank"));
        if (q && isfinite(tsc_jv_num(q, "accum_gain")))
            addf(nd[2].body, sizeof nd[2].body, "\naccumulation gain %.2f (all tokens, %g steps)",
                 tsc_jv_num(q, "accum_gain"), tsc_jv_num(q, "steps"));
        nd[3].evidence = !isfinite(tsc_jv_num(rec, "rank1.dwq_err_fro")) ? 0 : similar && nd[1].evidence == 2 ? 2 : 1;
        addf(nd[3].body, sizeof nd[3].body, "|dW^Q error|_F at step %lld: %.3g\ncoefficient accumulated over %g steps: "
             "%+.3g", sel->step, tsc_jv_num(rec, "rank1.dwq_err_fro"), tsc_jv_num(sm, "computed_over.steps"), cum);
        if (nd[3].evidence == 1)
            addf(nd[3].body, sizeof nd[3].body, "\nwithout a biased coefficient along a common direction the "
                                                "errors do not add up");
    } else {
        snprintf(nd[2].body, sizeof nd[2].body, "no evidence: x not captured (the QKV input is needed for (PK)^T X)");
        snprintf(nd[3].body, sizeof nd[3].body, "no evidence: x not captured");
    }
}

/* Link 5: the shown head's spectral norm of W^Q against the others of its layer. */
static void node_wq_norm(node_t *n, const tsc_figure_src_t *s, const tsc_fig_sel_t *sel) {
    char p[96];
    snprintf(p, sizeof p, "step_%08lld/layer_%03d/wq_head_norm", sel->step, sel->layer);
    double *wn = NULL;
    int r;
    long long d[4];
    if (tsc_fig_read_ds(s, p, &wn, &r, d) == TSC_OK && sel->head < d[0] && isfinite(wn[sel->head])) {
        int rank = 1, H = (int)d[0], nf = 0;
        double mx = 0, sorted[256];
        for (int h = 0; h < H; h++) {
            if (wn[h] > wn[sel->head]) rank++;
            if (wn[h] > mx) mx = wn[h];
            if (isfinite(wn[h]) && nf < 256) sorted[nf++] = wn[h];
        }
        for (int a = 1; a < nf; a++) /* insertion sort for the median: H is small */
            for (int b = a; b > 0 && sorted[b] < sorted[b - 1]; b--) {
                double t = sorted[b];
                sorted[b] = sorted[b - 1], sorted[b - 1] = t;
            }
        double med = nf ? (nf % 2 ? sorted[nf / 2] : 0.5 * (sorted[nf / 2 - 1] + sorted[nf / 2])) : NAN;
        /* supports the link when this head stands out of its layer: 1.5x the median, or in its top quarter
         * when the layer has 4 heads or more (the largest of 2 or 3 heads stands out of nothing) */
        n->evidence = (H >= 4 && rank <= (H + 3) / 4) || wn[sel->head] >= 1.5 * med ? 2 : 1;
        addf(n->body, sizeof n->body, "head %d: %.4g (rank %d of %d in layer %d; largest %.4g, median %.4g)", sel->head,
             wn[sel->head], rank, H, sel->layer, mx, med);
        if (n->evidence == 1)
            addf(n->body, sizeof n->body, H >= 4 ? "\nnot among the largest of its layer"
                                                 : "\nbelow 1.5x the median (%d heads: too few to rank)", H);
    } else {
        addf(n->body, sizeof n->body, "no evidence: w_q not captured");
    }
    free(wn);
}

int tsc_fig_ev_similar(double mean_cos) {
    return !isfinite(mean_cos) ? 0 : mean_cos >= TSC_FIG_SIMILAR_COS ? 2 : 1;
}

int tsc_fig_ev_loss(int diverges, int covers, int same_run) { return diverges && covers && same_run ? 2 : 1; }

/* Link 6: a training log whose loss diverges (last > 1.5x its minimum), that covers the analysed
 * steps and that is known to come from the run the dump was captured in (the user says so:
 * tsc_figure_src_set_same_run); otherwise amber with the reason. */
static void node_loss(node_t *n, const tsc_figure_src_t *s) {
    int nl = tsc_figure_src_n_logs(s);
    const tsc_jv_t *sl = tsc_jv_path(tsc_figure_src_summary(s), "computed_over.step_list");
    double a_lo = INFINITY, a_hi = -INFINITY;
    for (size_t i = 0; sl && i < sl->n; i++) {
        double st = (double)tsc_jv_int(sl->items[i], NULL, -1);
        if (st < a_lo) a_lo = st;
        if (st > a_hi) a_hi = st;
    }
    for (int i = 0; i < nl && !n->evidence; i++) {
        const tsc_log_t *lg = tsc_figure_src_log(s, i);
        int c = tsc_log_loss_column(lg, 1);
        if (c < 0) c = tsc_log_loss_column(lg, 0);
        if (c < 0) continue;
        double mn = INFINITY, last = NAN, smn = 0, slast = 0, s_lo = INFINITY, s_hi = -INFINITY;
        for (size_t k = 0; k < lg->n_rows; k++) {
            double v = lg->values[k * (size_t)lg->n_cols + (size_t)c];
            if (!isfinite(v)) continue;
            if (v < mn) mn = v, smn = lg->step[k];
            if (lg->step[k] < s_lo) s_lo = lg->step[k];
            if (lg->step[k] > s_hi) s_hi = lg->step[k];
            last = v, slast = lg->step[k];
        }
        if (!isfinite(mn)) continue;
        int diverges = last > 1.5 * mn, covers = !isfinite(a_lo) || (s_lo <= a_lo && s_hi >= a_hi);
        int same = s->logs_same_run;
        n->evidence = tsc_fig_ev_loss(diverges, covers, same);
        addf(n->body, sizeof n->body, "run '%s' (%s): min %.4g at step %g, last %.4g at step %g%s", lg->name,
             lg->cols[c], mn, smn, last, slast, diverges ? ": diverges" : ": no divergence");
        if (!covers)
            addf(n->body, sizeof n->body, "\nthe log's steps %g..%g do not cover the analysed steps %g..%g", s_lo, s_hi,
                 a_lo, a_hi);
        if (!same)
            addf(n->body, sizeof n->body, "\nnot known to be the dump's run (--log-same-run says it is)");
    }
    if (!n->evidence)
        addf(n->body, sizeof n->body, "no evidence: no training log given (--log NAME=FILE)");
}

/* Fills the six links of the chain from summary.json, analysis.h5 and the logs. verdict: [cap]. */
static void build_nodes(const tsc_figure_src_t *s, node_t *nd, char *verdict, size_t vcap) {
    const tsc_jv_t *sm = tsc_figure_src_summary(s);
    const tsc_jv_t *top = tsc_jv_path(sm, "diagnosis.at_risk.0");
    tsc_figure_opts_t o;
    tsc_figure_opts_init(&o);
    tsc_fig_sel_t sel;
    tsc_fig_resolve(s, &o, &sel);
    const tsc_jv_t *rec = tsc_fig_head_record(s, sel.step, sel.layer, sel.head);
    static const char *titles[N_NODES] = {"1. Rounding in P-bar V", "2. Biased delta", "3. Similar rank-1 terms",
                                          "4. Accumulated W^Q error", "5. Spectral norm of W^Q", "6. Loss"};
    memset(nd, 0, N_NODES * sizeof *nd);
    for (int i = 0; i < N_NODES; i++) nd[i].title = titles[i];
    set_verdict(sm, top, &sel, verdict, vcap);
    node_rounding(&nd[0], top, rec, &sel, tsc_jv_get(sm, "diagnosis") != NULL);
    double cum = node_delta(&nd[1], sm, top, rec, &sel);
    node_rank1(nd, sm, top, rec, &sel, cum);
    node_wq_norm(&nd[4], s, &sel);
    node_loss(&nd[5], s);
}

typedef struct {
    const tsc_figure_src_t *s;
    double font_pt;
    char *caption;
    size_t cap;
} ev_ctx_t;

static void box_path(cairo_t *cr, double x, double y, double w, double h, double r) {
    cairo_new_sub_path(cr);
    cairo_arc(cr, x + w - r, y + r, r, -M_PI / 2, 0);
    cairo_arc(cr, x + w - r, y + h - r, r, 0, M_PI / 2);
    cairo_arc(cr, x + r, y + h - r, r, M_PI / 2, M_PI);
    cairo_arc(cr, x + r, y + r, r, M_PI, 3 * M_PI / 2);
    cairo_close_path(cr);
}

/* style 2: both ends support the link (dark, solid); 1: measured, not supporting (amber, solid);
 * 0: an end without evidence (grey, dashed) */
static void arrow(cairo_t *cr, double x0, double y0, double x1, double y1, int style, double F) {
    double dash[2] = {3, 2.5};
    cairo_save(cr);
    if (style == 2) cairo_set_source_rgb(cr, 0.15, 0.15, 0.15), cairo_set_line_width(cr, 1.3);
    else if (style == 1) cairo_set_source_rgb(cr, 0.75, 0.45, 0.05), cairo_set_line_width(cr, 1.0);
    else cairo_set_source_rgb(cr, 0.6, 0.6, 0.6), cairo_set_line_width(cr, 1.0), cairo_set_dash(cr, dash, 2, 0);
    double ang = atan2(y1 - y0, x1 - x0), hl = 0.7 * F;
    cairo_move_to(cr, x0, y0);
    cairo_line_to(cr, x1 - hl * 0.8 * cos(ang), y1 - hl * 0.8 * sin(ang));
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    cairo_move_to(cr, x1, y1);
    cairo_line_to(cr, x1 - hl * cos(ang - 0.45), y1 - hl * sin(ang - 0.45));
    cairo_line_to(cr, x1 - hl * cos(ang + 0.45), y1 - hl * sin(ang + 0.45));
    cairo_close_path(cr);
    cairo_fill(cr);
    cairo_restore(cr);
}

static tsc_status_t ev_draw(cairo_t *cr, double W, double H, void *vctx) {
    ev_ctx_t *c = vctx;
    node_t nd[N_NODES];
    char verdict[512];
    build_nodes(c->s, nd, verdict, sizeof verdict);
    double F = c->font_pt > 0 ? c->font_pt : 8;
    const char *fam = "DejaVu Sans";
    double m = 0.9 * F, y = m;
    cairo_set_source_rgb(cr, 0, 0, 0);
    y += tsc_surface_text(cr, fam, 1.2 * F, 1, m, y, W - 2 * m, "Evidence map: rounding \u2192 biased \u03b4 \u2192 similar "
                      "rank-1 terms \u2192 accumulated error \u2192 spectral norm \u2192 loss", 0, 1, 0);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    y += tsc_surface_text(cr, fam, 0.95 * F, 0, m, y + 2, W - 2 * m, verdict, 0, 1, 0) + 0.8 * F;
    double legend_h = 1.6 * F;
    double gapx = 2.6 * F, gapy = 2.2 * F;
    double bw = (W - 2 * m - 2 * gapx) / 3, bh = (H - y - m - gapy - legend_h) / 2;
    double bx[N_NODES], by[N_NODES];
    /* a snake: 1 2 3 on the first row left to right, then 4 5 6 right to left, so every arrow is short */
    for (int i = 0; i < N_NODES; i++) {
        int row = i / 3, col = row == 0 ? i : 5 - i;
        bx[i] = m + col * (bw + gapx);
        by[i] = y + row * (bh + gapy);
    }
    for (int i = 0; i < N_NODES; i++) {
        double dash[2] = {3, 2.5};
        box_path(cr, bx[i], by[i], bw, bh, 0.5 * F);
        int ev = nd[i].evidence;
        if (ev == 2) cairo_set_source_rgb(cr, 0.91, 0.95, 0.99);
        else if (ev == 1) cairo_set_source_rgb(cr, 1.0, 0.97, 0.90);
        else cairo_set_source_rgb(cr, 0.97, 0.97, 0.97);
        cairo_fill_preserve(cr);
        if (ev == 2) cairo_set_source_rgb(cr, 0.1, 0.25, 0.5), cairo_set_line_width(cr, 1.2);
        else if (ev == 1) cairo_set_source_rgb(cr, 0.75, 0.45, 0.05), cairo_set_line_width(cr, 1.0);
        else cairo_set_source_rgb(cr, 0.6, 0.6, 0.6), cairo_set_line_width(cr, 0.9), cairo_set_dash(cr, dash, 2, 0);
        cairo_stroke(cr);
        cairo_set_dash(cr, NULL, 0, 0);
        double pad = 0.45 * F, ty = by[i] + pad;
        if (ev == 2) cairo_set_source_rgb(cr, 0.05, 0.15, 0.35);
        else if (ev == 1) cairo_set_source_rgb(cr, 0.45, 0.25, 0.0);
        else cairo_set_source_rgb(cr, 0.45, 0.45, 0.45);
        ty += tsc_surface_text(cr, fam, F, 1, bx[i] + pad, ty, bw - 2 * pad, nd[i].title, 0, 1, 0) + 0.2 * F;
        if (ev) cairo_set_source_rgb(cr, 0, 0, 0);
        /* shrink the body text (not below 7 pt) rather than let it overflow the box */
        double fs = 0.92 * F;
        while (fs > 7.0 && ty + tsc_surface_text(cr, fam, fs, 0, 0, 0, bw - 2 * pad, nd[i].body, 0, 0, 0) > by[i] + bh - pad)
            fs -= 0.25;
        if (fs < 7.0) fs = 7.0;
        cairo_save(cr);
        cairo_rectangle(cr, bx[i], by[i], bw, bh);
        cairo_clip(cr);
        tsc_surface_text(cr, fam, fs, 0, bx[i] + pad, ty, bw - 2 * pad, nd[i].body, 0, 1, 0);
        cairo_restore(cr);
    }
    for (int i = 0; i + 1 < N_NODES; i++) {
        int solid = nd[i].evidence < nd[i + 1].evidence ? nd[i].evidence : nd[i + 1].evidence;
        if (i == 2) arrow(cr, bx[2] + bw / 2, by[2] + bh + 1, bx[3] + bw / 2, by[3] - 1, solid, F);
        else if (i < 2) arrow(cr, bx[i] + bw + 1, by[i] + bh / 2, bx[i + 1] - 1, by[i + 1] + bh / 2, solid, F);
        else arrow(cr, bx[i] - 1, by[i] + bh / 2, bx[i + 1] + bw + 1, by[i + 1] + bh / 2, solid, F);
    }
    /* legend */
    double ly = H - m - 0.9 * F;
    static const char *leg[3] = {"supported by this run's data", "measured, not supporting",
                                 "no evidence (no data)"};
    for (int k = 0; k < 3; k++) {
        double lx = m + k * (W - 2 * m) / 3;
        arrow(cr, lx, ly + 0.5 * F, lx + 2.2 * F, ly + 0.5 * F, 2 - k, F);
        cairo_set_source_rgb(cr, k == 2 ? 0.35 : 0, k == 2 ? 0.35 : 0, k == 2 ? 0.35 : 0);
        tsc_surface_text(cr, fam, 0.9 * F, 0, lx + 2.6 * F, ly, (W - 2 * m) / 3 - 2.8 * F, leg[k], 0, 1, 0);
    }
    if (c->caption && c->cap) {
        tsc_figure_opts_t o;
        tsc_figure_opts_init(&o);
        tsc_fig_sel_t sel;
        tsc_fig_resolve(c->s, &o, &sel);
        snprintf(c->caption, c->cap,
                 "fig1: evidence map of the causal chain (docs/MECHANISM.md sections 4-5) for layer %d head %d, step %lld; "
                 "numbers from %s and %s%s. Blue: supported by this run's data; amber: measured but not supporting the "
                 "link; dashed grey: no evidence. ",
                 sel.layer, sel.head, sel.step, "summary.json", "analysis.h5",
                 tsc_figure_src_n_logs(c->s) ? " and the training logs" : "");
        for (int i = 0; i < N_NODES; i++)
            if (nd[i].evidence < 2)
                addf(c->caption, c->cap, "%s%s: %s. ", nd[i].title, nd[i].evidence ? " (not supported)" : "", nd[i].body);
    }
    return TSC_OK;
}

tsc_status_t tsc_figure_evidence_draw(cairo_t *cr, const tsc_figure_src_t *s, double w, double h, double font_pt,
                                      char *caption, size_t cap) {
    ev_ctx_t c = {s, font_pt, caption, cap};
    tsc_status_t st = ev_draw(cr, w, h, &c);
    if (!st && cairo_status(cr) != CAIRO_STATUS_SUCCESS)
        st = tsc_error_set(TSC_ERR_EXTERNAL, "evidence map: cairo failed: %s", cairo_status_to_string(cairo_status(cr)));
    return st;
}

tsc_status_t tsc_fig_evidence_cairo(const tsc_figure_src_t *s, const tsc_figure_opts_t *o, cairo_t *cr, double w_pt,
                                    double h_pt, tsc_figure_info_t *info) {
    return tsc_figure_evidence_draw(cr, s, w_pt, h_pt, o->font_pt, info->caption, sizeof info->caption);
}
