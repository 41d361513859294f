/* report.c: the review report (tsc_report.h): its content, built once from summary.json and the
 * figures (report_internal.h's content model), then emitted as PDF pages and as offline HTML
 * (report_doc.c), with a copy of summary.json. */
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
#include "report_internal.h"
#include "tsc_accum.h"
#include "tsc_file.h"
#include "tsc_fit.h"
#include "tsc_surface.h"

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

/* ---------------------------------------------------------------- tables */
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
 * rounding bit when keep > 0 (docs/MECHANISM.md §5's notation). */
static int fmt_keep(const char *f) {
    tsc_format_t fmt;
    if (!f || tsc_format_parse(f, &fmt) != TSC_OK) {
        tsc_error_clear();
        return 7; /* an event without a readable format: bf16's, the paper's */
    }
    int m = tsc_format_mant_bits(fmt);
    return m >= 23 ? 0 : m; /* fp32 (and wider): nothing dropped */
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
    tsc_accum_bits_str(before, TSC_FMT_FP32, -1, b1, sizeof b1);
    tsc_accum_bits_str(term, TSC_FMT_FP32, -1, b2, sizeof b2);
    tsc_accum_bits_str(sum, TSC_FMT_FP32, keep > 0 ? keep : -1, b3, sizeof b3);
    tsc_accum_bits_str(rounded, TSC_FMT_FP32, -1, b4, sizeof b4);
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
                                                       "than half\", docs/MECHANISM.md section 5)" : "");
    return 1;
}

static const char *yesno(double v) { return v == 1 ? "yes" : "no"; }

/* 100 x as a whole percentage, without a "-0" for tiny negative values. */
static const char *str_of(const tsc_jv_t *v, const char *key) {
    return tsc_jv_str(v, key) ? tsc_jv_str(v, key) : "";
}

static double pct(double x) {
    double r = round(100 * x);
    return r == 0 ? 0 : r;
}

/* Whether two head records are of the same (layer, head). */
static int same_head(const tsc_jv_t *a, const tsc_jv_t *b) {
    return tsc_jv_num(a, "layer") == tsc_jv_num(b, "layer") && tsc_jv_num(a, "head") == tsc_jv_num(b, "head");
}

/* The first index >= i of a record of arr whose (layer, head) no earlier record has (arr->n when
 * none is left): the loop over each (layer, head) once, at its first record. */
static size_t next_new_head(const tsc_jv_t *arr, size_t i) {
    for (; arr && i < arr->n; i++) {
        size_t j = 0;
        while (j < i && !same_head(arr->items[j], arr->items[i])) j++;
        if (j == i) break;
    }
    return i;
}

/* Fills row k (r: its cells) of a table from the (layer, head) whose first record is arr->items[i]. */
typedef void (*head_row_fn)(const tsc_jv_t *arr, size_t i, int k, char **r, const tsc_jv_t *sm);

/* A table with a row per (layer, head) of arr's records, w cells a row, each row filled by fill
 * (which may read the rest of the summary sm); the rows into *nrows. NULL when out of memory. */
static char **head_table(const tsc_jv_t *arr, int w, head_row_fn fill, const tsc_jv_t *sm, int *nrows) {
    size_t n = arr ? arr->n : 0;
    char **c = calloc((n ? n : 1) * (size_t)w, sizeof *c);
    if (!c) return NULL;
    int k = 0;
    for (size_t i = next_new_head(arr, 0); i < n; i = next_new_head(arr, i + 1), k++)
        fill(arr, i, k, c + (size_t)k * w, sm);
    *nrows = k;
    return c;
}

/* A row of the analysis-only at-risk table: a flagged (layer, head). */
static void flagged_row(const tsc_jv_t *arr, size_t i, int k, char **r, const tsc_jv_t *sm) {
    (void)sm;
    const tsc_jv_t *h = arr->items[i];
    r[0] = cell("%d", k + 1);
    r[1] = cell("%g / %g", tsc_jv_num(h, "layer"), tsc_jv_num(h, "head"));
    r[2] = cell("%g", tsc_jv_num(h, "step"));
    r[3] = cell("-");
    r[4] = cell("%.3g ULP", tsc_jv_num(h, "top_mean_ulp"));
    for (int q = 5; q < 8; q++) r[q] = cell("not measured");
    r[8] = cell("flagged");
}

/* The fix the head's recommendation names (summary.json "fixes", `recommended`), with its signed
 * effect; "none removes it" otherwise. */
static char *first_fix(const tsc_jv_t *h) {
    const tsc_jv_t *fx = tsc_jv_get(h, "fixes");
    for (size_t k = 0; fx && k < fx->n; k++)
        if (tsc_jv_num(fx->items[k], "recommended") == 1)
            return cell("%s (%+.0f%% left)", str_of(fx->items[k], "fix"), pct(tsc_jv_num(fx->items[k], "bias_ratio")));
    return cell("none removes it");
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
            double fu = tsc_jv_num(h, "feature_mean_ulp"), tf = tsc_jv_num(h, "top_feature");
            r[4] = isfinite(fu) && tf >= 0 ? cell("%s; top %g (%+.3g ULP)", feats[0] ? feats : "none", tf, fu)
                                           : cell("%s", feats[0] ? feats : "none");
            if (tsc_jv_str(h, "verdict") && strcmp(tsc_jv_str(h, "verdict"), "not examined") == 0) {
                r[5] = cell("not examined (beyond --max-heads)");
                r[6] = cell("-");
                r[7] = cell("-");
            } else {
                r[5] = first_fix(h);
                r[6] = cell("%+.0f%%", pct(tsc_jv_num(h, "delta_src_ratio")));
                r[7] = cell("%+.0f%%", pct(tsc_jv_num(h, "stable_ratio")));
            }
            double gain = tsc_jv_num(h, "accum_gain");
            const char *vd = tsc_jv_str(h, "verdict") ? tsc_jv_str(h, "verdict") : "?";
            r[8] = isfinite(gain) ? cell("%s (gain %.2f)", vd, gain) : cell("%s", vd);
        }
        *nrows = (int)ar->n;
        return c;
    }
    /* analysis only: the flagged (layer, head)s, each once */
    return head_table(tsc_jv_get(sm, "flagged_heads"), 9, flagged_row, sm, nrows);
}

/* A row of the per-(layer, head) table: the head's pooled record (summary.json "per_head"), the sink
 * keys and a skip's reason from its last step's record. */
static void pooled_row(const tsc_jv_t *ph, size_t i, int k, char **r, const tsc_jv_t *sm) {
    (void)k;
    const tsc_jv_t *q = ph->items[i], *hs = tsc_jv_get(sm, "heads"), *last = NULL;
    for (size_t j = 0; hs && j < hs->n; j++)
        if (same_head(hs->items[j], q)) last = hs->items[j];
    r[0] = cell("%g / %g", tsc_jv_num(q, "layer"), tsc_jv_num(q, "head"));
    double steps = tsc_jv_num(q, "steps"), skipped = tsc_jv_num(q, "skipped_steps");
    if (skipped > 0 && skipped == steps) {
        r[1] = cell("skipped: %s", last && tsc_jv_str(last, "first_nonfinite") ? tsc_jv_str(last, "first_nonfinite")
                                                                                 : "NaN/Inf");
        for (int c = 2; c < 8; c++) r[c] = cell("-");
        return;
    }
    r[1] = cell("%s", yesno(tsc_jv_num(q, "flagged")));
    r[2] = skipped > 0 ? cell("%g of %g (%g skipped)", tsc_jv_num(q, "delta_biased_steps"), steps - skipped, skipped)
                       : cell("%g of %g", tsc_jv_num(q, "delta_biased_steps"), steps);
    r[3] = cell("%+.3g", tsc_jv_num(q, "delta_cumsum"));
    r[4] = cell("%+.3g", tsc_jv_num(q, "o_signed_mean"));
    r[5] = cell("%g (%+.3g ULP)", tsc_jv_num(q, "top_feature"), tsc_jv_num(q, "top_feature_mean_ulp"));
    r[6] = cell("%g", tsc_jv_num(q, "rows_multi_max"));
    const tsc_jv_t *sk = last ? tsc_jv_path(last, "ties.sinks_flagged") : NULL;
    char sinks[64] = "";
    for (size_t c = 0; sk && c < sk->n; c++)
        snprintf(sinks + strlen(sinks), sizeof sinks - strlen(sinks), "%s%g", c ? "," : "", sk->items[c]->num);
    r[7] = cell("%s", sinks[0] ? sinks : "none");
}

/* Per (layer, head), pooled over steps: [n][8]. */
static char **head_rows(const tsc_jv_t *sm, int *nrows) {
    *nrows = 0;
    return head_table(tsc_jv_get(sm, "per_head"), 8, pooled_row, sm, nrows);
}

/* ---------------------------------------------------------------- the report's content */

#define MIT_COLS 6  /* the fixes' table: layer / head, up to 4 fixes, the recommended one */
#define BETA_COLS 7 /* the beta sweep's table */

/* Everything the report says, built once for both outputs. */
typedef struct {
    tsc_rp_fig_t figs[MAX_FIGS];
    int nf;
    char verdict[1024], meta[2048], event[2048], mitig[1024], stages[2048];
    char **mit_cells, **beta_cells;      /* the fixes' table [n_mit][mit_ncol], the beta sweep [n_beta][BETA_COLS] */
    int n_mit, mit_ncol, n_beta;
    const char *mit_hdr[MIT_COLS];
    char mit_hdr_buf[MIT_COLS][160], beta_title[256], sweep[2048];
    char ranks[8192];  /* a run of many ranks: where each at-risk head's bias comes from; "" otherwise */
    char fit[TSC_POLICY_STR_MAX + 128], fit_warn[256];  /* the diagnosed policy's fit; "" without one */
    char check[384];   /* the consistency check's line (summary.json diagnosis.check); "" without one */
    int check_bad;     /* it found an inconsistency: the line is bold */
    int has_event;
    int diagnosed;     /* summary.json comes from diagnose (it has a diagnosis, maybe with no head at risk) */
    const tsc_jv_t *top;
    tsc_strbuf_t repro;
    char **ar_cells, **hd_cells;
    int n_ar, n_hd;
    char skipped[MAX_FIGS][800];
    const char *skipped_items[MAX_FIGS];
    int n_skipped;
} content_t;

static void content_free(content_t *c) {
    for (int i = 0; i < c->nf; i++) tsc_strbuf_free(&c->figs[i].png);
    tsc_strbuf_free(&c->repro);
    if (c->ar_cells) free_cells(c->ar_cells, (size_t)c->n_ar * 9);
    if (c->hd_cells) free_cells(c->hd_cells, (size_t)c->n_hd * 8);
    if (c->mit_cells) free_cells(c->mit_cells, (size_t)c->n_mit * c->mit_ncol);
    if (c->beta_cells) free_cells(c->beta_cells, (size_t)c->n_beta * BETA_COLS);
    free(c);
}

/* Every figure whose data exists, as PNG in memory (the absent ones with the reason). */
static void collect_figures(tsc_figure_src_t *src, const tsc_figure_opts_t *fo, const tsc_report_opts_t *o, content_t *c,
                            tsc_report_info_t *info) {
    tsc_progress_begin(o->progress, "figures drawn", tsc_figure_count() < MAX_FIGS ? tsc_figure_count() : MAX_FIGS);
    for (int i = 0; i < tsc_figure_count() && c->nf < MAX_FIGS; i++) {
        tsc_rp_fig_t *f = &c->figs[c->nf++];
        tsc_figure_info_t fi;
        tsc_strbuf_init(&f->png);
        snprintf(f->id, sizeof f->id, "%s", tsc_figure_id(i));
        if (tsc_figure_png(src, f->id, fo, &f->png, &fi) == TSC_OK) {
            f->ok = 1;
            snprintf(f->caption, sizeof f->caption, "%s", fi.caption);
            f->w_in = fi.width_in, f->h_in = fi.height_in;
            f->vector = tsc_figure_spec(i)->kind == TSC_FIG_KIND_CAIRO;
        } else {
            snprintf(f->why, sizeof f->why, "%s", tsc_error_last());
            tsc_strbuf_free(&f->png);
            char line[sizeof c->skipped[0]];
            snprintf(line, sizeof line, "%s: %s", f->id, f->why);
            memcpy(c->skipped[c->n_skipped], line, sizeof line);
            c->skipped_items[c->n_skipped] = c->skipped[c->n_skipped];
            c->n_skipped++;
        }
        info->n_figures += f->ok;
        info->n_skipped += !f->ok;
        tsc_progress_tick(o->progress, i + 1);
    }
}

/* The verdict: how many of the analysed (layer, head)s are at risk (flagged by the pooled feature rule, or
 * with delta biased in a step: the at-risk table's rows), and the top one's verdict. */
static void verdict_text(const tsc_jv_t *sm, const tsc_jv_t *top, char *verdict, size_t cap) {
    tsc_fig_counts_t n = tsc_fig_head_counts(sm);
    char of[32] = "";
    if (n.heads > 0) snprintf(of, sizeof of, " of %d", n.heads);
    char step[96] = "";
    const char *bs = tsc_jv_str(sm, "diagnosis.biased_step");
    if (bs && strcmp(bs, "none") != 0) snprintf(step, sizeof step, "; biased rounding step: %.48s", bs);
    if (top)
        snprintf(verdict, cap, "%g%s heads at risk%s. Top: layer %g head %g: %s. Recommendation: %s",
                 tsc_jv_num(sm, "diagnosis.n_at_risk"), of, step, tsc_jv_num(top, "layer"), tsc_jv_num(top, "head"),
                 tsc_jv_str(top, "verdict") ? tsc_jv_str(top, "verdict") : "?",
                 tsc_jv_str(top, "recommendation") ? tsc_jv_str(top, "recommendation") : "-");
    else if (n.flagged > 0 || (n.heads < 0 && tsc_jv_num(sm, "n_flagged_heads") > 0))
        snprintf(verdict, cap, "%d%s heads flagged (analysis only; run `tilescope diagnose` for the "
                               "verdict, culprit stage and mitigation).", n.heads < 0 ? (int)tsc_jv_num(sm, "n_flagged_heads") : n.flagged, of);
    else
        snprintf(verdict, cap, "No biased head: nothing at risk under the flag rule (family-wise "
                               "false-positive bound %g).", tsc_jv_num(sm, "flag_rule.alpha"));
}

static const char *str_or(const tsc_jv_t *v, const char *path, const char *dflt) {
    return tsc_jv_str(v, path) ? tsc_jv_str(v, path) : dflt;
}

/* The fit of the diagnosed policy's replay (summary.json diagnosis.fit, docs/FORMAT.md §3) and its
 * warning below 99%; both "" when the summary has no fit (analyze only, or an older diagnosis). */
static void fit_text(const tsc_jv_t *sm, content_t *c) {
    c->fit[0] = c->fit_warn[0] = 0;
    const tsc_jv_t *f = tsc_jv_path(sm, "diagnosis.fit");
    if (!f) return;
    const int checked = tsc_jv_num(f, "checked") == 1;
    const double ident = tsc_jv_num(f, "o_identical");
    char s[sizeof c->fit - 8];
    tsc_fit_sentence(str_or(f, "policy", "?"), checked, ident, s, sizeof s);
    snprintf(c->fit, sizeof c->fit, "Fit: %s.", s);
    if (checked && tsc_fit_warning(ident)) snprintf(c->fit_warn, sizeof c->fit_warn, "%s.", tsc_fit_warning(ident));
}

/* The consistency check of the captured O and LSE (summary.json diagnosis.check, docs/CHECK.md) as one line;
 * "" when the summary has none (analyze only, or an older diagnosis). */
static void check_text(const tsc_jv_t *sm, content_t *c) {
    c->check[0] = 0;
    c->check_bad = 0;
    const tsc_jv_t *k = tsc_jv_path(sm, "diagnosis.check");
    if (!k) return;
    if (tsc_jv_num(k, "checked") != 1) {
        snprintf(c->check, sizeof c->check, "Consistency check of O and LSE: not run (%.300s).", str_or(k, "note", "?"));
        return;
    }
    c->check_bad = tsc_jv_num(k, "consistent") != 1;
    snprintf(c->check, sizeof c->check, "Consistency check of O and LSE (step %.0f): %.300s.",
             tsc_jv_num(k, "first_step"), str_or(k, "sentence", "?"));
}

static void addf_buf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void meta_text(const tsc_jv_t *sm, const char *dir, char *meta, size_t cap) {
    const double steps = tsc_jv_num(sm, "computed_over.steps"), recs = tsc_jv_num(sm, "computed_over.head_records");
    /* the paper's head numbers are 1-based, and it numbers GPT-2 small's heads: say how they map
     * only where its heads are the ones analysed */
    const int paper = tsc_jv_num(sm, "geometry.n_head") == 12 && tsc_jv_num(sm, "geometry.d_model") == 768;
    snprintf(meta, cap,
             "Analysis folder: %s\nDump: %s\nPolicies: lp %s versus hp %s\nSelection: %s; %g step%s analysed, %g head "
             "record%s, %g rows per head\nGeometry: batch %g, %g heads (%g kv), T %g, D %g, C %g, softmax scale %g\n"
             "Producer: %s. Layers and heads are 0-based%s.",
             dir, str_or(sm, "dump", "?"), str_or(sm, "lp", "?"), str_or(sm, "hp", "?"), str_or(sm, "selection", "?"),
             steps, steps == 1 ? "" : "s", recs, recs == 1 ? "" : "s",
             tsc_jv_num(sm, "computed_over.rows_per_head"), tsc_jv_num(sm, "geometry.batch"),
             tsc_jv_num(sm, "geometry.n_head"), tsc_jv_num(sm, "geometry.n_kv_head"), tsc_jv_num(sm, "geometry.seq_len"),
             tsc_jv_num(sm, "geometry.head_dim"), tsc_jv_num(sm, "geometry.d_model"),
             tsc_jv_num(sm, "geometry.softmax_scale"), str_or(sm, "producer", "?"),
             paper ? " (the paper's 1-based 'head 8' of GPT-2 small is head 7 here)" : "");
    const tsc_jv_t *rk = tsc_jv_path(sm, "ranks");
    if (rk && rk->n) {
        addf_buf(meta, cap, "\nRanks: %zu rank dumps, one run (batch rows and heads read from the rank holding them):", rk->n);
        for (size_t i = 0; i < rk->n && i < 8; i++)
            addf_buf(meta, cap, "%s rank %lld %s (rows %lld-%lld, heads %lld-%lld)", i ? "," : "",
                     tsc_jv_int(rk->items[i], "rank", -1), str_or(rk->items[i], "file", "?"),
                     tsc_jv_int(rk->items[i], "batch0", 0),
                     tsc_jv_int(rk->items[i], "batch0", 0) + tsc_jv_int(rk->items[i], "batch_n", 0) - 1,
                     tsc_jv_int(rk->items[i], "head0", 0),
                     tsc_jv_int(rk->items[i], "head0", 0) + tsc_jv_int(rk->items[i], "head_n", 0) - 1);
        if (rk->n > 8) addf_buf(meta, cap, ", and %zu more (summary.json \"ranks\")", rk->n - 8);
    }
}

/* Appends printf-formatted text to buf[cap] (truncating). */
static void addf_buf(char *buf, size_t cap, const char *fmt, ...) {
    size_t m = strlen(buf);
    if (m + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + m, cap - m, fmt, ap);
    va_end(ap);
}

/* What to switch on, per examined head: the intro (or why nothing was measured), then the fixes' table
 * (a row per examined head, a column per fix, summary.json diagnosis.at_risk[].fixes) and the top
 * head's beta sweep (.beta_sweep), each cell the signed bias left. */
static void mitig_text(const tsc_jv_t *sm, const char *dir, content_t *c) {
    const tsc_jv_t *ar = tsc_jv_path(sm, "diagnosis.at_risk");
    size_t cap = sizeof c->mitig;
    if (ar && !ar->n) {
        snprintf(c->mitig, cap, "Not measured: the diagnosis found no head at risk, so no fix was replayed.");
        return;
    }
    if (!ar) {
        snprintf(c->mitig, cap, "Not measured: this analysis has no diagnosis. `tilescope diagnose DUMP -o %s` "
                                "replays the stabilised policy (+stable) and a beta sweep.", dir);
        return;
    }
    snprintf(c->mitig, cap, "Each fix was replayed on the head's tie rows; each cell is the bias left: +100%% = no "
                            "effect, 0%% = removed, negative = the bias reversed sign (e.g. -40%%: reversed, at 40%% of "
                            "its size); * marks a fix that removes it. 'O' fixes are measured on the O error of the flagged "
                            "features, 'delta' fixes on sum(delta - delta_hp).");
    /* the columns: the fixes of the first examined head (every head is replayed with the same ones) */
    const tsc_jv_t *cols = NULL;
    for (size_t i = 0; i < ar->n && !cols; i++)
        if (tsc_jv_get(ar->items[i], "fixes") && tsc_jv_get(ar->items[i], "fixes")->n) cols = tsc_jv_get(ar->items[i], "fixes");
    int nfix = cols ? (int)(cols->n < MIT_COLS - 2 ? cols->n : MIT_COLS - 2) : 0;
    c->mit_hdr[0] = "layer / head";
    for (int k = 0; k < nfix; k++) {
        snprintf(c->mit_hdr_buf[k], sizeof c->mit_hdr_buf[k], "%s (%s; %s)", str_of(cols->items[k], "fix"),
                 str_of(cols->items[k], "where"), str_of(cols->items[k], "measure"));
        c->mit_hdr[k + 1] = c->mit_hdr_buf[k];
    }
    c->mit_hdr[nfix + 1] = "recommended";
    c->mit_ncol = nfix + 2;
    if (!(c->mit_cells = calloc(ar->n * (size_t)c->mit_ncol, sizeof *c->mit_cells))) return;
    for (size_t i = 0; i < ar->n; i++) {
        const tsc_jv_t *h = ar->items[i], *fx = tsc_jv_get(h, "fixes");
        char **r = c->mit_cells + i * (size_t)c->mit_ncol;
        r[0] = cell("%g / %g", tsc_jv_num(h, "layer"), tsc_jv_num(h, "head"));
        for (int k = 0; k < nfix; k++) {
            const tsc_jv_t *f = NULL;
            for (size_t q = 0; fx && q < fx->n && !f; q++)
                if (!strcmp(str_of(fx->items[q], "fix"), str_of(cols->items[k], "fix"))) f = fx->items[q];
            r[k + 1] = f ? cell("%+.0f%%%s", pct(tsc_jv_num(f, "bias_ratio")), tsc_jv_num(f, "removes") == 1 ? " *" : "")
                         : cell("not examined");
        }
        r[nfix + 1] = fx && fx->n ? first_fix(h) : cell("not examined (beyond --max-heads)");
    }
    c->n_mit = (int)ar->n;
    /* the top head's beta sweep */
    const tsc_jv_t *bs = tsc_jv_get(ar->items[0], "beta_sweep");
    if (bs && bs->n && (c->beta_cells = calloc(bs->n * BETA_COLS, sizeof *c->beta_cells))) {
        for (size_t k = 0; k < bs->n; k++) {
            const tsc_jv_t *b = bs->items[k];
            char **r = c->beta_cells + k * BETA_COLS;
            r[0] = cell("%g%s", tsc_jv_num(b, "beta"), tsc_jv_num(b, "in_studied_range") == 1 ? "" : " (outside 2-8)");
            r[1] = cell("%+.0f%%", pct(tsc_jv_num(b, "bias_ratio")));
            r[2] = cell("%.0f%%", 100 * tsc_jv_num(b, "frac_fix"));
            r[3] = cell("%.0f%%", 100 * tsc_jv_num(b, "frac_fallback"));
            r[4] = cell("%.0f%%", 100 * tsc_jv_num(b, "frac_split"));
            r[5] = cell("%.0f%%", 100 * tsc_jv_num(b, "frac_floor"));
            r[6] = cell("%g", tsc_jv_num(b, "exparg_ulp"));
        }
        c->n_beta = (int)bs->n;
        snprintf(c->beta_title, sizeof c->beta_title, "The beta sweep at layer %g head %g, over its %g tie rows "
                 "(row maxima %g..%g):", tsc_jv_num(ar->items[0], "layer"), tsc_jv_num(ar->items[0], "head"),
                 tsc_jv_num(bs->items[0], "n_tie_rows"), tsc_jv_num(bs->items[0], "r_m_min"),
                 tsc_jv_num(bs->items[0], "r_m_max"));
    }
    snprintf(c->sweep, sizeof c->sweep, "The beta sweep, over the examined heads: %s (docs/MECHANISM.md section 6)",
             str_or(sm, "diagnosis.sweep_explanation", "-"));
}

/* A run of many ranks: for each at-risk head, its accumulated delta bias (the at-risk table's sum over the
 * analysed steps, rows and tokens of delta_lp - delta_hp, analysis.h5 delta_diff of each step and layer) split by the
 * rank whose batch rows it was summed over; the parts add up to the table's number. "" without ranks. */
static void ranks_text(const tsc_figure_src_t *src, const tsc_jv_t *sm, char *buf, size_t cap) {
    buf[0] = 0;
    const tsc_jv_t *rk = tsc_jv_path(sm, "ranks"), *ar = tsc_jv_path(sm, "diagnosis.at_risk"),
                   *sl = tsc_jv_path(sm, "computed_over.step_list");
    if (!rk || !rk->n || !sl) return;
    if (!ar || !ar->n) {
        snprintf(buf, cap, "No head at risk: no bias to attribute to the %zu ranks.", rk->n);
        return;
    }
    addf_buf(buf, cap, "Each at-risk head's accumulated sum of delta_lp - delta_hp (the table above), split by the rank "
                       "whose batch rows it comes from (analysis.h5 delta_diff summed over that rank's rows):\n");
    for (size_t i = 0; i < ar->n && i < 12; i++) {
        int layer = (int)tsc_jv_int(ar->items[i], "layer", -1), head = (int)tsc_jv_int(ar->items[i], "head", -1);
        double *part = calloc(rk->n, sizeof *part), total = 0;
        if (!part) return;
        for (size_t k = 0; k < sl->n; k++) {
            long long step = tsc_jv_int(sl->items[k], "", -1);
            char grp[64], p[128];
            snprintf(grp, sizeof grp, "step_%08lld/layer_%03d", step, layer);
            snprintf(p, sizeof p, "%s/heads", grp);
            double *hv = NULL, *dd = NULL;
            int r1, r2, row = -1;
            long long d1[4], d2[4];
            if (tsc_fig_read_ds(src, p, &hv, &r1, d1) != TSC_OK) { tsc_error_clear(); continue; }
            for (long long j = 0; j < d1[0]; j++)
                if ((int)hv[j] == head) row = (int)j;
            free(hv);
            snprintf(p, sizeof p, "%s/delta_diff", grp);
            if (row < 0 || tsc_fig_read_ds(src, p, &dd, &r2, d2) != TSC_OK || r2 != 3) { tsc_error_clear(); free(dd); continue; }
            for (size_t q = 0; q < rk->n; q++) {
                const tsc_jv_t *r = rk->items[q];
                long long b0 = tsc_jv_int(r, "batch0", 0), bn = tsc_jv_int(r, "batch_n", 0), h0 = tsc_jv_int(r, "head0", 0),
                          hn = tsc_jv_int(r, "head_n", 0);
                if (head < h0 || head >= h0 + hn || tsc_jv_int(r, "pp_rank", 0) != 0) continue;
                for (long long b = b0; b < b0 + bn && b < d2[1]; b++)
                    for (long long t = 0; t < d2[2]; t++) {
                        double x = dd[((size_t)row * (size_t)d2[1] + (size_t)b) * (size_t)d2[2] + (size_t)t];
                        if (isfinite(x)) part[q] += x, total += x;
                    }
            }
            free(dd);
        }
        addf_buf(buf, cap, "layer %d head %d (%+.3g):", layer, head, total);
        int shown = 0;
        for (size_t q = 0; q < rk->n; q++) {
            const tsc_jv_t *r = rk->items[q];
            long long h0 = tsc_jv_int(r, "head0", 0), hn = tsc_jv_int(r, "head_n", 0);
            if (head < h0 || head >= h0 + hn || tsc_jv_int(r, "pp_rank", 0) != 0) continue;
            if (shown++ == 16) { addf_buf(buf, cap, " ..."); break; }
            addf_buf(buf, cap, "%s rank %lld %+.3g (%.0f%%)", shown > 1 ? "," : "", tsc_jv_int(r, "rank", -1), part[q],
                     total != 0 ? 100.0 * part[q] / total : 0.0);
        }
        addf_buf(buf, cap, "\n");
        free(part);
    }
}

/* The stage sets held in FP32 that remove each head's bias, in the tool's stage names (appendix). */
static void stage_text(const tsc_jv_t *sm, char *buf, size_t cap) {
    const tsc_jv_t *ar = tsc_jv_path(sm, "diagnosis.at_risk");
    snprintf(buf, cap, "Attribution by substitution: the smallest set of the policy's rounding stages (docs/FORMAT.md "
                       "stage names) that, held in FP32, removes the bias; a tool for locating the rounding, not a "
                       "kernel option.\n");
    const char *run = tsc_jv_str(sm, "diagnosis.biased_step");
    if (run) addf_buf(buf, cap, "Over the examined heads (the stages named for at least half of them): %s.\n", run);
    for (size_t i = 0; ar && i < ar->n && i < 12; i++) {
        const tsc_jv_t *h = ar->items[i];
        if (!str_of(h, "stage_note")[0]) continue;
        addf_buf(buf, cap, "layer %g head %g: %s", tsc_jv_num(h, "layer"), tsc_jv_num(h, "head"), str_of(h, "stage_note"));
        const tsc_jv_t *alt = tsc_jv_get(h, "culprit_alternatives");
        for (size_t k = 0; alt && k < alt->n; k++)
            addf_buf(buf, cap, "%s%s (%+.0f%% left)", k ? ", " : "; also ", str_of(alt->items[k], "stage"),
                     pct(tsc_jv_num(alt->items[k], "bias_ratio")));
        addf_buf(buf, cap, "\n");
    }
}

/* Appends a space and s as one POSIX shell word: as is when made only of [A-Za-z0-9_./:=,+-]
 * (and not empty), else in single quotes with each ' written '\''. Paths and names come from
 * summary.json and the command line: a crafted name must not run anything when pasted. */
static void put_word(tsc_strbuf_t *r, const char *s) {
    tsc_strbuf_putc(r, ' ');
    size_t n = strlen(s);
    if (n && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:=,+-") == n) {
        tsc_strbuf_puts(r, s);
        return;
    }
    tsc_strbuf_putc(r, '\'');
    for (; *s; s++) {
        if (*s == '\'') tsc_strbuf_puts(r, "'\\''");
        else tsc_strbuf_putc(r, *s);
    }
    tsc_strbuf_putc(r, '\'');
}

/* " --log NAME=PATH[:COLUMN]" for every log (COLUMN: the column it draws), each one shell word. */
static void put_logs(tsc_strbuf_t *r, tsc_figure_src_t *src) {
    for (int i = 0; i < tsc_figure_src_n_logs(src); i++) {
        const tsc_log_t *lg = tsc_figure_src_log(src, i);
        char arg[400];
        if (lg->pick >= 0)
            snprintf(arg, sizeof arg, "%.63s=%.200s:%.100s", lg->name, lg->path, lg->cols[lg->pick]);
        else
            snprintf(arg, sizeof arg, "%.63s=%.200s", lg->name, lg->path);
        tsc_strbuf_puts(r, " --log");
        put_word(r, arg);
    }
}

/* Lines of r longer than maxc characters broken between options only (before a word that starts
 * with '-', never between an option and its value), with a shell continuation (" \") so the
 * command still copies and pastes as one. */
static void wrap_options(tsc_strbuf_t *r, size_t maxc) {
    tsc_strbuf_t w;
    tsc_strbuf_init(&w);
    const char *p = tsc_strbuf_str(r);
    while (p && *p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p), col = 0;
        for (size_t i = 0; i < len;) {
            size_t j = i + 1; /* the segment [i, j): up to the next " -" outside the first character */
            while (j < len && !(p[j] == ' ' && j + 1 < len && p[j + 1] == '-')) j++;
            if (col > 0 && col + (j - i) + 2 > maxc) {
                tsc_strbuf_puts(&w, " \\\n   ");
                col = 3;
            }
            tsc_strbuf_append(&w, p + i, j - i);
            col += j - i;
            i = j;
        }
        if (eol) tsc_strbuf_putc(&w, '\n');
        p = eol ? eol + 1 : p + len;
    }
    tsc_strbuf_free(r);
    *r = w;
}

/* The commands that reproduce every number. */
static void repro_text(tsc_figure_src_t *src, const tsc_report_opts_t *o, const char *pdf_path, content_t *c) {
    const tsc_jv_t *sm = tsc_figure_src_summary(src), *ar = tsc_jv_path(sm, "diagnosis.at_risk");
    const char *dir = tsc_figure_src_dir(src);
    tsc_strbuf_t *r = &c->repro;
    char maxh[48] = "";
    if (ar && ar->n) {
        /* heads examined in depth: those with measured ratios (diagnose --max-heads) */
        size_t k = 0;
        for (size_t i = 0; i < ar->n; i++) k += isfinite(tsc_jv_num(ar->items[i], "stable_ratio")) != 0;
        if (k < ar->n) snprintf(maxh, sizeof maxh, " --max-heads %zu", k);
    }
    tsc_strbuf_printf(r, "tilescope %s", tsc_jv_get(sm, "diagnosis") ? "diagnose" : "analyze");
    put_word(r, str_or(sm, "dump", "DUMP"));
    tsc_strbuf_puts(r, " -o");
    put_word(r, dir);
    tsc_strbuf_puts(r, " --lp");
    put_word(r, str_or(sm, "lp", "?"));
    tsc_strbuf_puts(r, " --hp");
    put_word(r, str_or(sm, "hp", "?"));
    tsc_strbuf_puts(r, " --select");
    put_word(r, str_or(sm, "selection", "all"));
    tsc_strbuf_printf(r, "%s\ntilescope report", maxh);
    put_word(r, dir);
    put_logs(r, src);
    if (o->dump) tsc_strbuf_puts(r, " --dump"), put_word(r, o->dump);
    tsc_strbuf_puts(r, " -o");
    put_word(r, pdf_path);
    tsc_strbuf_putc(r, '\n');
    for (int i = 0; i < c->nf; i++) {
        const char *id = c->figs[i].id;
        if (!c->figs[i].ok) continue;
        /* only the figures that read training logs get the --log arguments */
        const tsc_figure_spec_t *spec = tsc_figure_find(id);
        int uses_logs = spec && (spec->needs & TSC_FIG_NEEDS_LOGS), uses_dump = spec && (spec->needs & TSC_FIG_NEEDS_DUMP);
        tsc_strbuf_printf(r, "tilescope figure %s --from", id);
        put_word(r, dir);
        if (uses_logs) put_logs(r, src);
        if (uses_dump && o->dump) tsc_strbuf_puts(r, " --dump"), put_word(r, o->dump);
        tsc_strbuf_printf(r, " -o %s.pdf\n", id);
    }
    if (c->has_event) {
        tsc_strbuf_printf(r, "tilescope explain add %.9g %.9g --to", tsc_jv_num(c->top, "event.sum_before"),
                          tsc_jv_num(c->top, "event.term"));
        put_word(r, str_or(c->top, "event.out_format", "bf16"));
        tsc_strbuf_puts(r, "   # the rounding event above\n");
    }
    /* the characters of the monospaced font (0.6 em wide) that fit the text width */
    wrap_options(r, (size_t)((TSC_RP_PAGE_W - 2 * TSC_RP_MARGIN) / (0.6 * SMALL_PT)) - 1);
}

/* Builds the content; TSC_ERR_NOMEM when out of memory. */
static tsc_status_t build_content(tsc_figure_src_t *src, const tsc_figure_opts_t *fo, const tsc_report_opts_t *o,
                                  const char *pdf_path, content_t *c, tsc_report_info_t *info) {
    const tsc_jv_t *sm = tsc_figure_src_summary(src);
    const char *dir = tsc_figure_src_dir(src);
    tsc_strbuf_init(&c->repro);
    collect_figures(src, fo, o, c, info);
    c->top = tsc_jv_path(sm, "diagnosis.at_risk.0");
    verdict_text(sm, c->top, c->verdict, sizeof c->verdict);
    fit_text(sm, c);
    check_text(sm, c);
    meta_text(sm, dir, c->meta, sizeof c->meta);
    c->has_event = event_text(c->top, tsc_jv_int(c->top, "step", 0), c->event, sizeof c->event);
    c->diagnosed = tsc_jv_path(sm, "diagnosis.at_risk") != NULL;
    mitig_text(sm, dir, c);
    stage_text(sm, c->stages, sizeof c->stages);
    ranks_text(src, sm, c->ranks, sizeof c->ranks);
    repro_text(src, o, pdf_path, c);
    c->ar_cells = at_risk_rows(sm, &c->n_ar);
    c->hd_cells = head_rows(sm, &c->n_hd);
    if (tsc_strbuf_status(&c->repro) || !c->ar_cells || !c->hd_cells)
        return tsc_error_set(TSC_ERR_NOMEM, "report: out of memory");
    return TSC_OK;
}

/* ---------------------------------------------------------------- the document */

static void add_para(tsc_rdoc_t *d, int only, const char *font, double pt, int bold, const char *text, double gap,
                     tsc_rh_t html) {
    tsc_rblock_t *b = tsc_rdoc_add(d, TSC_RB_PARA);
    if (!b) return;
    b->only = only, b->font = font, b->pt = pt, b->bold = bold, b->text = text, b->gap = gap, b->html = html;
}

static void add_heading(tsc_rdoc_t *d, const char *text, const char *keep_text, const char *keep_font, double keep_pt,
                        double keep_extra) {
    tsc_rblock_t *b = tsc_rdoc_add(d, TSC_RB_HEADING);
    if (!b) return;
    b->text = text, b->keep_text = keep_text, b->keep_font = keep_font, b->keep_pt = keep_pt, b->keep_extra = keep_extra;
}

static void add_table(tsc_rdoc_t *d, int ncol, const double *w, const char *const *hdr, char **cells, int nrows) {
    tsc_rblock_t *b = tsc_rdoc_add(d, TSC_RB_TABLE);
    if (b) b->ncol = ncol, b->w = w, b->hdr = hdr, b->cells = cells, b->nrows = nrows;
}

static void add_figure(tsc_rdoc_t *d, const tsc_rp_fig_t *f, double w_pt, double gap_img, double gap_cap, const char *alt,
                       const char *html_id) {
    tsc_rblock_t *b = tsc_rdoc_add(d, TSC_RB_FIGURE);
    if (b) b->fig = f, b->w_pt = w_pt, b->gap_img = gap_img, b->gap_cap = gap_cap, b->alt = alt, b->html_id = html_id;
}

static const char *const ar_hdr[9] = {"#", "layer / head", "step", "accumulated sum of delta_lp - delta_hp",
                                      "flagged features; top feature (mean O error)", "recommended fix (bias left)",
                                      "delta from FP32 O: bias left", "+stable (beta 2): bias left", "verdict"};
static const double ar_w[9] = {0.05, 0.09, 0.06, 0.13, 0.15, 0.18, 0.11, 0.09, 0.14};
static const char *const hd_hdr[8] = {"layer / head", "flagged", "delta-biased steps", "accumulated sum of delta diff",
                                      "mean O error (value units)", "top feature (mean ULP)", "rows with >= 2 maxima",
                                      "sink keys"};
static const double hd_w[8] = {0.10, 0.08, 0.11, 0.15, 0.12, 0.18, 0.13, 0.13};

/* The fixes' table by its number of fix columns (0..4), and the beta sweep's. */
static const double mit_w[MIT_COLS - 1][MIT_COLS] = {{0.3, 0.7},
                                                     {0.12, 0.4, 0.48},
                                                     {0.12, 0.25, 0.25, 0.38},
                                                     {0.1, 0.19, 0.19, 0.19, 0.33},
                                                     {0.09, 0.155, 0.155, 0.155, 0.155, 0.29}};
static const char *const beta_hdr[BETA_COLS] = {"beta", "bias left", "tie rows with m = beta*r_m",
                                                "fallback m = r_m + 1", "maxima in different key tiles (no fix)",
                                                "1e-10 row-sum floor moved l", "exp argument spacing"};
static const double beta_w[BETA_COLS] = {0.14, 0.1, 0.16, 0.14, 0.18, 0.16, 0.12};

/* The verdict, the at-risk table, the evidence map and the per-head table. */
static void doc_front(tsc_rdoc_t *d, const content_t *c) {
    add_para(d, 1, SANS, 20, 1, "tilescope report", 4, TSC_RH_P);
    if (d->n) d->b[d->n - 1].accent = 1;
    add_para(d, 1, SANS, BODY_PT, 0, "Low-precision attention: where rounding error comes from and whether it "
                                     "accumulates (the workflow of Qiu & Yao, ICLR 2026, Appendix F).", 8, TSC_RH_P);
    add_heading(d, "Verdict", NULL, NULL, -1, 0);
    add_para(d, 0, SANS, 10.5, 1, c->verdict, 6, TSC_RH_P_BOLD);
    if (c->fit[0]) add_para(d, 0, SANS, BODY_PT, 0, c->fit, c->fit_warn[0] ? 2 : 6, TSC_RH_P);
    if (c->fit_warn[0]) add_para(d, 0, SANS, BODY_PT, 1, c->fit_warn, 6, TSC_RH_P_BOLD);
    if (c->check[0]) add_para(d, 0, SANS, BODY_PT, c->check_bad, c->check, 6, c->check_bad ? TSC_RH_P_BOLD : TSC_RH_P);
    add_para(d, 0, SANS, SMALL_PT + 0.5, 0, c->meta, 6, TSC_RH_PRE);
    add_heading(d, "At-risk heads, ranked by the accumulated delta bias", NULL, NULL, -1, 0);
    if (c->n_ar) add_table(d, 9, ar_w, ar_hdr, c->ar_cells, c->n_ar);
    else add_para(d, 0, SANS, BODY_PT, 0, "None.", 6, TSC_RH_P);
    if (c->ranks[0]) {
        add_heading(d, "Which ranks the bias comes from", c->ranks, SANS, BODY_PT, 0);
        add_para(d, 0, SANS, BODY_PT, 0, c->ranks, 6, TSC_RH_PRE);
    }
    tsc_rdoc_add(d, TSC_RB_PAGE);
    add_heading(d, "Evidence map (figure 1)", NULL, NULL, -1, 0);
    if (c->nf && c->figs[0].ok) add_figure(d, &c->figs[0], TSC_RP_PAGE_W - 2 * TSC_RP_MARGIN, 6, 10, "evidence map", NULL);
    add_heading(d, "Per layer and head (pooled over the analysed steps)", NULL, NULL, -1, 0);
    add_table(d, 8, hd_w, hd_hdr, c->hd_cells, c->n_hd);
}

/* The figures, the rounding event, the mitigation and the commands. */
static void doc_back(tsc_rdoc_t *d, const content_t *c) {
    tsc_rdoc_add(d, TSC_RB_PAGE);
    add_heading(d, "Figures", NULL, NULL, -1, 0);
    for (int i = 1; i < c->nf; i++)
        if (c->figs[i].ok) /* printed 1.4x the design size (3.25 in -> 4.55 in), so its 8 pt text prints at 11 pt */
            add_figure(d, &c->figs[i], c->figs[i].w_in * 72 * 1.4, 3, 12, c->figs[i].id, c->figs[i].id);
    if (c->n_skipped) {
        tsc_rblock_t *b = tsc_rdoc_add(d, TSC_RB_LIST);
        if (b) b->text = "Figures not drawn (their data is absent):", b->pt = BODY_PT, b->items = c->skipped_items,
               b->n_items = c->n_skipped;
    }
    add_heading(d, "The rounding event found in this data (bit level)", c->has_event ? c->event : NULL, MONO, SMALL_PT,
                c->has_event ? 40 : 30);
    if (c->has_event) {
        add_para(d, 1, SANS, BODY_PT, 0, "The single P-bar V addition with the largest rounding error among the flagged "
                                         "features of the top at-risk head, printed like docs/MECHANISM.md section 5's worked "
                                         "example: the FP32 sum's bits after the output format's kept mantissa, then the "
                                         "rounding bit, then the sticky bits.", 4, TSC_RH_P);
        add_para(d, 0, MONO, SMALL_PT, 0, c->event, 8, TSC_RH_PRE);
    } else if (c->diagnosed) {
        add_para(d, 1, SANS, BODY_PT, 0, "No rounding event was traced: the diagnosis looks for the largest event at each "
                                         "at-risk head, and found no head at risk.", 8, TSC_RH_P);
        tsc_rblock_t *b = tsc_rdoc_add(d, TSC_RB_HTML);
        if (b) b->only = 2, b->text = "<p>No rounding event was traced: the diagnosis found no head at risk.</p>\n";
    } else {
        add_para(d, 1, SANS, BODY_PT, 0, "No rounding event was traced: run `tilescope diagnose` on the dump (it looks for "
                                         "the largest event at each at-risk head).", 8, TSC_RH_P);
        tsc_rblock_t *b = tsc_rdoc_add(d, TSC_RB_HTML);
        if (b) b->only = 2, b->text = "<p>No rounding event was traced: run <code>tilescope diagnose</code> on the dump.</p>\n";
    }
    add_heading(d, "Measured effect of the mitigation", c->mitig, SANS, BODY_PT, c->n_mit ? 40 : 0);
    add_para(d, 0, SANS, BODY_PT, 0, c->mitig, 6, TSC_RH_P);
    if (c->n_mit) add_table(d, c->mit_ncol, mit_w[c->mit_ncol - 2], c->mit_hdr, c->mit_cells, c->n_mit);
    if (c->n_beta) {
        add_para(d, 0, SANS, BODY_PT, 0, c->beta_title, 4, TSC_RH_P);
        add_table(d, BETA_COLS, beta_w, beta_hdr, c->beta_cells, c->n_beta);
    }
    if (c->n_mit) add_para(d, 0, SANS, BODY_PT, 0, c->sweep, 8, TSC_RH_P);
    add_heading(d, "Commands that reproduce every number", tsc_strbuf_str(&c->repro), MONO, SMALL_PT, 0);
    add_para(d, 0, MONO, SMALL_PT, 0, tsc_strbuf_str(&c->repro), 8, TSC_RH_PRE);
    if (c->n_ar) {
        add_heading(d, "Appendix: stage sets that remove the bias", c->stages, SANS, BODY_PT, 0);
        add_para(d, 0, SANS, BODY_PT, 0, c->stages, 8, TSC_RH_PRE);
    }
}

/* ---------------------------------------------------------------- outputs */

static tsc_status_t write_pdf(const tsc_rdoc_t *d, const char *pdf_path, tsc_report_info_t *info) {
    tsc_sink_t k;
    tsc_status_t st = tsc_sink_open(&k, pdf_path, TSC_IMG_PDF, TSC_RP_PAGE_W, TSC_RP_PAGE_H, 72);
    if (st) return st;
    cairo_pdf_surface_set_metadata(k.sf, CAIRO_PDF_METADATA_TITLE, "tilescope report");
    char creator[64];
    snprintf(creator, sizeof creator, "tilescope %s", tsc_version());
    cairo_pdf_surface_set_metadata(k.sf, CAIRO_PDF_METADATA_CREATOR, creator);
    st = tsc_rdoc_pdf(d, k.cr, 0, &info->n_pages);
    return tsc_sink_close(&k, st);
}

static tsc_status_t write_html(const tsc_rdoc_t *d, const char *pdf_path, tsc_report_info_t *info) {
    size_t plen = strlen(pdf_path);
    snprintf(info->html_path, sizeof info->html_path, "%.*s.html", (int)(plen - 4), pdf_path);
    tsc_strbuf_t h;
    tsc_strbuf_init(&h);
    tsc_rdoc_html(d, &h);
    tsc_status_t st = tsc_strbuf_status(&h);
    if (st) st = tsc_error_set(TSC_ERR_NOMEM, "report: out of memory building the HTML");
    else st = tsc_out_write_all(info->html_path, h.p, h.len);
    tsc_strbuf_free(&h);
    return st;
}

/* The copy of summary.json beside the report: FILE.summary.json (named after the PDF, like the
 * HTML), never "summary.json", so a report written into another analysis folder (report A -o
 * B/r.pdf) cannot replace B's own summary.json and pair it with B's analysis.h5. No copy when the
 * PDF is in the analysis folder itself: its summary.json is already there. */
static tsc_status_t copy_summary(tsc_figure_src_t *src, const char *pdf_path, tsc_report_info_t *info) {
    char dst[1200], pdir[1100], rs[PATH_MAX], rd[PATH_MAX];
    const char *slash = strrchr(pdf_path, '/');
    if (slash) snprintf(pdir, sizeof pdir, "%.*s", slash == pdf_path ? 1 : (int)(slash - pdf_path), pdf_path);
    else snprintf(pdir, sizeof pdir, ".");
    snprintf(dst, sizeof dst, "%.*s.summary.json", (int)(strlen(pdf_path) - 4), pdf_path);  /* checked: ends in .pdf */
    tsc_status_t st = TSC_OK;
    int same = realpath(tsc_figure_src_dir(src), rs) && realpath(pdir, rd) && strcmp(rs, rd) == 0;
    if (same) {
        snprintf(dst, sizeof dst, "%.1100s", tsc_fig_summary_path(src));
    } else {
        char *buf;
        size_t n;
        if ((st = tsc_read_file(tsc_fig_summary_path(src), &buf, &n)) == TSC_OK) {
            st = tsc_out_write_all(dst, buf, n);
            free(buf);
        }
    }
    if (!st) snprintf(info->summary_path, sizeof info->summary_path, "%.1000s", dst);
    return st;
}

/* A .pdf path in a folder we can write into (checked before drawing every figure). */
static tsc_status_t check_path(const char *pdf_path) {
    size_t plen = strlen(pdf_path);
    if (plen < 5 || strcmp(pdf_path + plen - 4, ".pdf") != 0 || plen > 1000)
        return tsc_error_set(TSC_ERR_ARG, "report %s: the output must be a path ending in .pdf", pdf_path);
    char folder[1100];
    const char *sl = strrchr(pdf_path, '/');
    snprintf(folder, sizeof folder, "%.*s", sl ? (int)(sl - pdf_path) : 1, sl ? pdf_path : ".");
    if (sl == pdf_path) snprintf(folder, sizeof folder, "/");
    if (access(folder, W_OK) != 0)
        return tsc_error_set(TSC_ERR_IO, "report %s: cannot write into the folder %s: %s", pdf_path, folder, strerror(errno));
    return TSC_OK;
}

/* The content and its document (doc refers to *cp and *fo: free doc, then content_free(*cp)). */
static tsc_status_t report_doc(tsc_figure_src_t *src, const tsc_report_opts_t *o, const char *pdf_path,
                               tsc_figure_opts_t *fo, content_t **cp, tsc_rdoc_t *doc, tsc_report_info_t *info) {
    tsc_figure_opts_init(fo);
    fo->dpi = o->fig_dpi > 0 ? o->fig_dpi : 150;
    fo->dump = o->dump;
    memset(doc, 0, sizeof *doc);
    doc->src = src, doc->fig_opts = fo;
    *cp = calloc(1, sizeof **cp);
    if (!*cp) return tsc_error_set(TSC_ERR_NOMEM, "report: out of memory");
    tsc_status_t st = build_content(src, fo, o, pdf_path, *cp, info);
    if (st) return st;
    doc_front(doc, *cp);
    doc_back(doc, *cp);
    return doc->nomem ? tsc_error_set(TSC_ERR_NOMEM, "report: out of memory") : TSC_OK;
}

tsc_status_t tsc_report_draw(tsc_figure_src_t *src, const tsc_report_opts_t *o, const char *pdf_path, cairo_t *cr,
                             int max_pages, tsc_report_info_t *info) {
    tsc_report_opts_t dflt;
    if (!o) tsc_report_opts_init(&dflt), o = &dflt;
    if (!src || !cr || !info) return tsc_error_set(TSC_ERR_ARG, "tsc_report_draw: NULL argument");
    memset(info, 0, sizeof *info);
    tsc_figure_opts_t fo;
    content_t *c = NULL;
    tsc_rdoc_t doc;
    tsc_status_t st = report_doc(src, o, pdf_path ? pdf_path : "report.pdf", &fo, &c, &doc, info);
    if (!st) st = tsc_rdoc_pdf(&doc, cr, max_pages, &info->n_pages);
    tsc_rdoc_free(&doc);
    if (c) content_free(c);
    return st;
}

tsc_status_t tsc_report_write(tsc_figure_src_t *src, const char *pdf_path, const tsc_report_opts_t *o,
                              tsc_report_info_t *info) {
    tsc_report_info_t local;
    tsc_report_opts_t dflt;
    if (!info) info = &local;
    memset(info, 0, sizeof *info);
    if (!o) tsc_report_opts_init(&dflt), o = &dflt;
    if (!src || !pdf_path) return tsc_error_set(TSC_ERR_ARG, "tsc_report_write: NULL argument");
    tsc_status_t st = check_path(pdf_path);
    if (st) return st;
    tsc_figure_opts_t fo;
    content_t *c = NULL;
    tsc_rdoc_t doc;
    st = report_doc(src, o, pdf_path, &fo, &c, &doc, info);
    if (!st) st = write_pdf(&doc, pdf_path, info);
    if (!st && o->html) st = write_html(&doc, pdf_path, info);
    if (!st && o->copy_summary) st = copy_summary(src, pdf_path, info);
    tsc_rdoc_free(&doc);
    if (c) content_free(c);
    return st;
}
