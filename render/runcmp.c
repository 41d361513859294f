/* runcmp.c: two analysis folders side by side (tsc_runcmp.h): the heads matched by (layer, head),
 * a table of what changed, and shared figures of bias, spectral norms and losses. */
#include "tsc_runcmp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsc_escape.h"
#include "tsc_fit.h"
#include "tsc_file.h"
#include "tsc_json.h"
#include "tsc_plot.h"
#include "tsc_strbuf.h"

enum { F_FLAGGED = 1, F_AT_RISK = 2 };

/* The writer lock of the output folder (tsc_dir_lock): the name analysis folders use (cli.h's
 * TSC_CLI_DIR_LOCK), so a folder being analysed is not compared into either, and the CLI removes a
 * folder it made for a failed compare together with its lock file. */
#define TSC_RUNCMP_LOCK ".tilescope.lock"

typedef struct {
    int layer, head;
    long long step;  /* the last analysed step of the head */
    double bias;     /* delta.cumsum at that step */
    int flags;       /* F_FLAGGED (at any step), F_AT_RISK */
} head_t;

typedef struct {
    int layer, head;
    double a, b;
    int fa, fb;
} match_t;

void tsc_runcmp_opts_init(tsc_runcmp_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->label_a = "A", o->label_b = "B";
    o->max_rows = 20;
    o->dpi = 200;
    o->font_pt = 8;
}

/* The shapes must agree for heads to be matched. */
static tsc_status_t check_shapes(const tsc_figure_src_t *a, const tsc_figure_src_t *b) {
    static const char *const keys[] = {"n_head", "n_kv_head", "head_dim", "d_model", "seq_len"};
    const tsc_jv_t *ga = tsc_jv_get(tsc_figure_src_summary(a), "geometry"), *gb = tsc_jv_get(tsc_figure_src_summary(b), "geometry");
    if (!ga || !gb)
        return tsc_error_set(TSC_ERR_MISSING, "%s/summary.json has no geometry (not an analysis summary)",
                             tsc_figure_src_dir(ga ? b : a));
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        long long va = tsc_jv_int(ga, keys[i], -1), vb = tsc_jv_int(gb, keys[i], -1);
        if (va != vb)
            return tsc_error_set(TSC_ERR_SHAPE, "%s and %s have incompatible shapes: %s %lld vs %lld (compare runs of one "
                                                "model)", tsc_figure_src_dir(a), tsc_figure_src_dir(b), keys[i], va, vb);
    }
    return TSC_OK;
}

static head_t *find_head(head_t *h, int n, int layer, int head) {
    for (int i = 0; i < n; i++)
        if (h[i].layer == layer && h[i].head == head) return &h[i];
    return NULL;
}

/* One entry per (layer, head) of a summary: its pooled record ("per_head": the numbers the report
 * prints), else, from a summary written before it, the bias at its last step and the flags over its
 * steps. */
static tsc_status_t collect(const tsc_figure_src_t *s, head_t **out, int *n) {
    const tsc_jv_t *sm = tsc_figure_src_summary(s), *hs = tsc_jv_get(sm, "per_head");
    if (!hs) hs = tsc_jv_get(sm, "heads");
    *out = NULL, *n = 0;
    if (!hs || hs->type != TSC_JV_ARRAY || hs->n == 0)
        return tsc_error_set(TSC_ERR_MISSING, "%s/summary.json lists no heads", tsc_figure_src_dir(s));
    head_t *h = calloc(hs->n, sizeof *h);
    if (!h) return tsc_error_set(TSC_ERR_NOMEM, "compare: out of memory");
    for (size_t i = 0; i < hs->n; i++) {
        const tsc_jv_t *r = hs->items[i];
        int layer = (int)tsc_jv_int(r, "layer", -1), head = (int)tsc_jv_int(r, "head", -1);
        long long step = tsc_jv_int(r, "step", -1);
        head_t *e = find_head(h, *n, layer, head);
        if (!e) e = &h[(*n)++], e->layer = layer, e->head = head, e->step = -1;
        if (tsc_jv_num(r, "flagged") == 1) e->flags |= F_FLAGGED;
        if (step >= e->step) e->step = step, e->bias = tsc_jv_num(r, tsc_jv_get(r, "delta_cumsum") ? "delta_cumsum" : "delta.cumsum");
    }
    const tsc_jv_t *ar = tsc_jv_path(sm, "diagnosis.at_risk");
    for (size_t i = 0; ar && i < ar->n; i++) {
        head_t *e = find_head(h, *n, (int)tsc_jv_int(ar->items[i], "layer", -1), (int)tsc_jv_int(ar->items[i], "head", -1));
        if (e) e->flags |= F_AT_RISK;
    }
    *out = h;
    return TSC_OK;
}

/* One side's trust in its own numbers: the fit of its lp replay to the captured O and its warning (below
 * 99%), the consistency check, the skipped heads; into fit/warn ("" where the summary has none). */
typedef struct {
    char fit[TSC_POLICY_STR_MAX + 160], warn[512];
    double identical;  /* NaN without a fit */
} side_t;

static void side_of(const tsc_figure_src_t *s, side_t *d) {
    const tsc_jv_t *sm = tsc_figure_src_summary(s), *f = tsc_jv_path(sm, "diagnosis.fit"),
                   *k = tsc_jv_path(sm, "diagnosis.check");
    d->fit[0] = d->warn[0] = 0;
    d->identical = NAN;
    if (f && tsc_jv_num(f, "checked") == 1) {
        d->identical = tsc_jv_num(f, "o_identical");
        tsc_fit_sentence(tsc_jv_str(f, "policy") ? tsc_jv_str(f, "policy") : "?", 1, d->identical, d->fit, sizeof d->fit);
        const char *w = tsc_fit_warning(d->identical);
        if (w) snprintf(d->warn, sizeof d->warn, "%s", strncmp(w, "warning: ", 9) ? w : w + 9);
    } else {
        snprintf(d->fit, sizeof d->fit, "no fit measured (an analysis without diagnose: `tilescope diagnose` measures it)");
    }
    size_t n = strlen(d->warn);
    if (k && tsc_jv_num(k, "checked") == 1 && tsc_jv_num(k, "consistent") != 1 && n < sizeof d->warn - 2)
        n += (size_t)snprintf(d->warn + n, sizeof d->warn - n, "%sO and LSE inconsistent: %.200s", n ? "; " : "",
                              tsc_jv_str(k, "sentence") ? tsc_jv_str(k, "sentence") : "?");
    double sk = tsc_jv_num(sm, "n_skipped_heads");
    if (sk > 0 && n < sizeof d->warn - 2)
        snprintf(d->warn + n, sizeof d->warn - n, "%s%g head records skipped for NaN/Inf inputs", n ? "; " : "", sk);
}

/* A flag that disappeared while the bias grew: the flag is a per-feature test (its p-value and the
 * min_ulp floor), not a threshold on this bias, so a vanished flag is no all-clear. */
static int gone_but_larger(const match_t *m) {
    return (m->fa & F_FLAGGED) && !(m->fb & F_FLAGGED) && fabs(m->b) > fabs(m->a);
}

static const char *flag_text(int f) {
    return f == (F_FLAGGED | F_AT_RISK) ? "flagged, at risk" : f == F_FLAGGED ? "flagged" : f == F_AT_RISK ? "at risk" : "-";
}

static const char *flag_change(int fa, int fb) {
    return !fa && fb ? "appeared" : fa && !fb ? "disappeared" : fa != fb ? "changed" : "";
}

/* Largest |change| first, then by (layer, head). */
static int by_change(const void *x, const void *y) {
    const match_t *p = x, *q = y;
    double dp = fabs(p->b - p->a), dq = fabs(q->b - q->a);
    if (isnan(dp) != isnan(dq)) return isnan(dp) ? 1 : -1;
    if (dp != dq) return dp > dq ? -1 : 1;
    return p->layer != q->layer ? p->layer - q->layer : p->head - q->head;
}

static int by_head(const void *x, const void *y) {
    const match_t *p = x, *q = y;
    return p->layer != q->layer ? p->layer - q->layer : p->head - q->head;
}

static tsc_status_t write_json(const tsc_figure_src_t *a, const tsc_figure_src_t *b, const tsc_runcmp_opts_t *o,
                               const match_t *m, int n, const char *path) {
    tsc_json_t j;
    tsc_json_init(&j);
    tsc_json_object_begin(&j);
    tsc_json_kv_string(&j, "format", "tilescope-compare");
    tsc_json_kv_int(&j, "format_version", 1);
    const tsc_figure_src_t *src[2] = {a, b};
    const char *lab[2] = {o->label_a, o->label_b}, *key[2] = {"a", "b"};
    for (int k = 0; k < 2; k++) {
        tsc_json_key(&j, key[k]);
        tsc_json_object_begin(&j);
        tsc_json_kv_string(&j, "label", lab[k]);
        tsc_json_kv_string(&j, "dir", tsc_figure_src_dir(src[k]));
        tsc_json_kv_string(&j, "lp", tsc_jv_str(tsc_figure_src_summary(src[k]), "lp"));
        tsc_json_kv_string(&j, "hp", tsc_jv_str(tsc_figure_src_summary(src[k]), "hp"));
        side_t sd;
        side_of(src[k], &sd);
        tsc_json_kv_number(&j, "fit_o_identical", sd.identical);
        tsc_json_kv_string(&j, "fit", sd.fit);
        tsc_json_kv_string(&j, "warning", sd.warn[0] ? sd.warn : NULL);
        tsc_json_object_end(&j);
    }
    tsc_json_key(&j, "heads");
    tsc_json_array_begin(&j);
    for (int i = 0; i < n; i++) {
        tsc_json_object_begin(&j);
        tsc_json_kv_int(&j, "layer", m[i].layer);
        tsc_json_kv_int(&j, "head", m[i].head);
        tsc_json_kv_number(&j, "bias_a", m[i].a);
        tsc_json_kv_number(&j, "bias_b", m[i].b);
        tsc_json_kv_number(&j, "change", m[i].b - m[i].a);
        tsc_json_kv_string(&j, "flags_a", flag_text(m[i].fa));
        tsc_json_kv_string(&j, "flags_b", flag_text(m[i].fb));
        tsc_json_kv_string(&j, "flags_change", flag_change(m[i].fa, m[i].fb));
        tsc_json_kv_bool(&j, "flag_gone_bias_larger", gone_but_larger(&m[i]));
        tsc_json_object_end(&j);
    }
    tsc_json_array_end(&j);
    tsc_json_object_end(&j);
    tsc_status_t st = tsc_json_status(&j);
    if (st == TSC_OK) st = tsc_json_write_file(&j, path);
    tsc_json_free(&j);
    return st;
}

/* Markdown of pieces: each %s of fmt is a string from outside (a label, a folder's name, summary.json's
 * policies: whoever wrote the folder chose them) and goes through the Markdown escaper (tsc_escape.h), so
 * none can add HTML, markup, a table cell or a line to compare.md; NULL is written "-". */
static void md_line(tsc_strbuf_t *t, const char *fmt, int n, const char *const *v) {
    for (int k = 0; *fmt; fmt++) {
        if (fmt[0] == '%' && fmt[1] == 's' && k < n) tsc_esc_md(t, v[k] ? v[k] : "-"), k++, fmt++;
        else tsc_strbuf_putc(t, *fmt);
    }
}

/* compare.md: the setting, then the heads that changed most (m sorted by by_change). */
static tsc_status_t write_md(const tsc_figure_src_t *a, const tsc_figure_src_t *b, const tsc_runcmp_opts_t *o,
                             const match_t *m, int n, const tsc_runcmp_info_t *info, const char *path) {
    tsc_strbuf_t t;
    tsc_strbuf_init(&t);
    const tsc_jv_t *sa = tsc_figure_src_summary(a), *sb = tsc_figure_src_summary(b);
    md_line(&t, "# What changed: %s -> %s\n\n", 2, (const char *[]){o->label_a, o->label_b});
    md_line(&t, "- A = %s: %s (lp %s, hp %s)\n", 4,
            (const char *[]){o->label_a, tsc_figure_src_dir(a), tsc_jv_str(sa, "lp"), tsc_jv_str(sa, "hp")});
    md_line(&t, "- B = %s: %s (lp %s, hp %s)\n", 4,
            (const char *[]){o->label_b, tsc_figure_src_dir(b), tsc_jv_str(sb, "lp"), tsc_jv_str(sb, "hp")});
    const tsc_figure_src_t *src[2] = {a, b};
    const char *side[2] = {"A", "B"};
    for (int k = 0; k < 2; k++) {
        side_t sd;
        side_of(src[k], &sd);
        tsc_strbuf_printf(&t, "- %s fit: ", side[k]);
        md_line(&t, "%s\n", 1, (const char *[]){sd.fit});
        if (sd.warn[0]) {
            tsc_strbuf_printf(&t, "- **%s warning: ", side[k]);
            md_line(&t, "%s**\n", 1, (const char *[]){sd.warn});
        }
    }
    tsc_strbuf_printf(&t, "- %d heads in both; %d only in A, %d only in B; flags appeared on %d heads, disappeared "
                          "from %d\n", info->n_matched, info->n_only_a, info->n_only_b, info->n_appeared, info->n_gone);
    int larger = 0;
    for (int i = 0; i < n; i++) larger += gone_but_larger(&m[i]);
    if (larger)
        tsc_strbuf_printf(&t, "- **%d head%s lost %s flag while %s |bias| grew** (marked ! below): the flag is a "
                              "per-feature test (its p-value and the min_ulp floor), not a threshold on this bias, so a "
                              "vanished flag is no all-clear\n", larger, larger == 1 ? "" : "s", larger == 1 ? "its" : "their",
                          larger == 1 ? "its" : "their");
    tsc_strbuf_printf(&t, "\n");
    tsc_strbuf_printf(&t, "Bias: the accumulated sum over tokens and steps of delta_lp - delta_hp (summary.json "
                          "`per_head` `delta_cumsum`). Flagged: a feature's bias passed the "
                          "test of summary.json's flag_rule; at risk: ranked by the diagnosis.\n\n");
    int rows = n < o->max_rows ? n : o->max_rows;
    tsc_strbuf_printf(&t, "| layer | head | bias A | bias B | change (B - A) | flags A | flags B | flags |\n"
                          "|---:|---:|---:|---:|---:|---|---|---|\n");
    for (int i = 0; i < rows; i++)
        tsc_strbuf_printf(&t, "| %d | %d | %.6g | %.6g | %+.6g | %s | %s | %s%s |\n", m[i].layer, m[i].head, m[i].a, m[i].b,
                          m[i].b - m[i].a, flag_text(m[i].fa), flag_text(m[i].fb), flag_change(m[i].fa, m[i].fb),
                          gone_but_larger(&m[i]) ? " !" : "");
    if (rows < n)
        tsc_strbuf_printf(&t, "\n%d more heads changed less; compare.json lists every head.\n", n - rows);
    tsc_status_t st = t.nomem ? tsc_error_set(TSC_ERR_NOMEM, "compare: out of memory") : tsc_out_write_all(path, t.p, t.len);
    tsc_strbuf_free(&t);
    return st;
}

static void plot_init(tsc_plot_opts_t *po, const tsc_runcmp_opts_t *o) {
    tsc_plot_opts_init(po);
    po->width_in = 6.5, po->height_in = 2.8, po->dpi = o->dpi, po->font_pt = o->font_pt;
}

/* Grouped bars of A and B over categories; NaN bars are left out. */
static tsc_status_t bars(const tsc_runcmp_opts_t *o, tsc_plot_opts_t *po, const char *const *cats, const double *va,
                         const double *vb, int n, const char *path) {
    po->categories = cats, po->n_categories = (size_t)n;
    tsc_plot_series_t ser[2] = {{.name = o->label_a, .y = va, .n = (size_t)n, .style = TSC_PLOT_BARS},
                                {.name = o->label_b, .y = vb, .n = (size_t)n, .style = TSC_PLOT_BARS}};
    return tsc_plot_write(po, ser, 2, path, TSC_IMG_PNG);
}

/* compare_bias.png: the heads of the table (at most 16, by (layer, head)), A and B side by side. */
static tsc_status_t fig_bias(const tsc_runcmp_opts_t *o, const match_t *m, int n, const char *path) {
    enum { MAXB = 16 };
    match_t top[MAXB];
    int k = n < MAXB ? n : MAXB;
    memcpy(top, m, (size_t)k * sizeof *top);
    qsort(top, (size_t)k, sizeof *top, by_head);
    char lab[MAXB][24];
    const char *cats[MAXB];
    double va[MAXB], vb[MAXB];
    for (int i = 0; i < k; i++) {
        snprintf(lab[i], sizeof lab[i], "%d/%d", top[i].layer, top[i].head);
        cats[i] = lab[i], va[i] = top[i].a, vb[i] = top[i].b;
    }
    tsc_plot_opts_t po;
    plot_init(&po, o);
    char title[160];
    snprintf(title, sizeof title, "accumulated bias per head%s", n > k ? " (the 16 heads that changed most)" : "");
    po.title = title, po.xlabel = "layer/head", po.ylabel = "sum of delta_lp - delta_hp";
    return bars(o, &po, cats, va, vb, k, path);
}

/* The spectral norm of matrix w of layer l at the last analysed step of a summary; NaN if absent. */
static double layer_norm(const tsc_jv_t *sm, int layer, const char *w) {
    const tsc_jv_t *ls = tsc_jv_get(sm, "layers");
    long long best = -1;
    double v = NAN;
    for (size_t i = 0; ls && i < ls->n; i++) {
        const tsc_jv_t *r = ls->items[i];
        long long step = tsc_jv_int(r, "step", -1);
        if (tsc_jv_int(r, "layer", -1) != layer || step < best) continue;
        char key[40];
        snprintf(key, sizeof key, "spectral_norm.%s", w);
        best = step, v = tsc_jv_num(r, key);
    }
    return v;
}

/* compare_spectral.png: W^Q, W^K, W^V, W^O per layer (W^Q only beyond 4 layers), A and B. */
static tsc_status_t fig_spectral(const tsc_figure_src_t *a, const tsc_figure_src_t *b, const tsc_runcmp_opts_t *o,
                                 const char *path, int *drawn) {
    enum { MAXC = 16 };
    static const char *const w[4] = {"w_q", "w_k", "w_v", "w_o"}, *const wn[4] = {"W^Q", "W^K", "W^V", "W^O"};
    const tsc_jv_t *sa = tsc_figure_src_summary(a), *sb = tsc_figure_src_summary(b), *ls = tsc_jv_get(sa, "layers");
    int layers[MAXC], nl = 0;
    for (size_t i = 0; ls && i < ls->n && nl < MAXC; i++) {
        int l = (int)tsc_jv_int(ls->items[i], "layer", -1), seen = 0;
        for (int k = 0; k < nl; k++) seen |= layers[k] == l;
        if (!seen && l >= 0) layers[nl++] = l;
    }
    int nw = nl <= 4 ? 4 : 1, n = 0, finite = 0;
    char lab[MAXC][24];
    const char *cats[MAXC];
    double va[MAXC], vb[MAXC];
    for (int i = 0; i < nl; i++)
        for (int k = 0; k < nw && n < MAXC; k++, n++) {
            snprintf(lab[n], sizeof lab[n], "L%d %s", layers[i], wn[k]);
            cats[n] = lab[n], va[n] = layer_norm(sa, layers[i], w[k]), vb[n] = layer_norm(sb, layers[i], w[k]);
            finite += isfinite(va[n]) || isfinite(vb[n]);
        }
    *drawn = 0;
    if (!finite) return TSC_OK; /* no weights were captured */
    tsc_plot_opts_t po;
    plot_init(&po, o);
    po.title = nw == 4 ? "spectral norms per layer (last analysed step)" : "W^Q spectral norm per layer (last analysed step)";
    po.xlabel = "layer, matrix", po.ylabel = "spectral norm";
    *drawn = 1;
    return bars(o, &po, cats, va, vb, n, path);
}

/* The matched heads of a and b; counts into info. */
static tsc_status_t match_heads(const tsc_figure_src_t *a, const tsc_figure_src_t *b, match_t **out, int *n,
                                tsc_runcmp_info_t *info) {
    head_t *ha = NULL, *hb = NULL;
    int na = 0, nb = 0;
    tsc_status_t st = collect(a, &ha, &na);
    if (st == TSC_OK) st = collect(b, &hb, &nb);
    match_t *m = st == TSC_OK ? calloc((size_t)na, sizeof *m) : NULL;
    if (st == TSC_OK && !m) st = tsc_error_set(TSC_ERR_NOMEM, "compare: out of memory");
    *n = 0;
    for (int i = 0; st == TSC_OK && i < na; i++) {
        head_t *e = find_head(hb, nb, ha[i].layer, ha[i].head);
        if (!e) { info->n_only_a++; continue; }
        match_t *r = &m[(*n)++];
        r->layer = ha[i].layer, r->head = ha[i].head, r->a = ha[i].bias, r->b = e->bias, r->fa = ha[i].flags, r->fb = e->flags;
        info->n_appeared += !r->fa && r->fb;
        info->n_gone += r->fa && !r->fb;
    }
    info->n_matched = *n, info->n_only_b = nb - *n;
    if (st == TSC_OK && *n == 0)
        st = tsc_error_set(TSC_ERR_SHAPE, "%s and %s have no (layer, head) in common: analyse the same layers and heads",
                           tsc_figure_src_dir(a), tsc_figure_src_dir(b));
    free(ha);
    free(hb);
    if (st != TSC_OK) { free(m); m = NULL; }
    *out = m;
    return st;
}

/* compare_loss.png: fig10 of the logs (per-iteration training loss), else fig2 (validation loss). */
static tsc_status_t fig_loss(tsc_figure_src_t *logs, const tsc_runcmp_opts_t *o, const char *path, tsc_runcmp_info_t *info) {
    if (!logs || tsc_figure_src_n_logs(logs) == 0) {
        snprintf(info->loss_note, sizeof info->loss_note, "no training log given (--log A=FILE --log B=FILE)");
        return TSC_OK;
    }
    tsc_figure_opts_t fo;
    tsc_figure_opts_init(&fo);
    fo.dpi = o->dpi, fo.font_pt = o->font_pt, fo.width_in = 6.5, fo.height_in = 2.8;
    tsc_status_t st = tsc_figure_write(logs, "fig10", &fo, path, TSC_IMG_PNG, NULL);
    if (st == TSC_ERR_MISSING) st = tsc_figure_write(logs, "fig2", &fo, path, TSC_IMG_PNG, NULL);
    if (st == TSC_OK) info->n_figures++;
    return st;
}

tsc_status_t tsc_runcmp_write(tsc_figure_src_t *a, tsc_figure_src_t *b, tsc_figure_src_t *logs,
                               const tsc_runcmp_opts_t *o, const char *out_dir, tsc_runcmp_info_t *info) {
    tsc_runcmp_info_t local;
    if (!info) info = &local;
    memset(info, 0, sizeof *info);
    if (!a || !b || !o || !out_dir) return tsc_error_set(TSC_ERR_ARG, "tsc_runcmp_write: NULL argument");
    if (!tsc_figure_src_summary(a) || !tsc_figure_src_summary(b))
        return tsc_error_set(TSC_ERR_ARG, "tsc_runcmp_write: both sides need an analysis folder");
    tsc_status_t st = check_shapes(a, b);
    match_t *m = NULL;
    int n = 0;
    if (st == TSC_OK) st = match_heads(a, b, &m, &n, info);
    if (st != TSC_OK) return st;
    qsort(m, (size_t)n, sizeof *m, by_change);
    /* one writer of out_dir at a time, from the first file to the last: two compares into one folder
     * would leave a mix of both */
    int lock = -1;
    char holder[32];
    if ((st = tsc_dir_lock(out_dir, TSC_RUNCMP_LOCK, &lock, holder, sizeof holder)) != TSC_OK) {
        free(m);
        if (holder[0])
            return tsc_error_set(TSC_ERR_IO, "%s is being written by another tilescope compare (pid %s; or an "
                                             "analysis, which takes the same lock)", out_dir, holder);
        return st;
    }
    char path[1200];
    snprintf(path, sizeof path, "%s/compare.json", out_dir);
    st = write_json(a, b, o, m, n, path);
    if (st == TSC_OK) snprintf(path, sizeof path, "%s/compare.md", out_dir), st = write_md(a, b, o, m, n, info, path);
    if (st == TSC_OK) snprintf(path, sizeof path, "%s/compare_bias.png", out_dir), st = fig_bias(o, m, n, path);
    if (st == TSC_OK) info->n_figures++;
    int drawn = 0;
    if (st == TSC_OK) snprintf(path, sizeof path, "%s/compare_spectral.png", out_dir), st = fig_spectral(a, b, o, path, &drawn);
    info->n_figures += drawn;
    if (st == TSC_OK) snprintf(path, sizeof path, "%s/compare_loss.png", out_dir), st = fig_loss(logs, o, path, info);
    tsc_dir_unlock(out_dir, TSC_RUNCMP_LOCK, lock, 1);
    free(m);
    return st;
}
