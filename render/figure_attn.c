/* figure_attn.c: `figure attn`: the probability pattern P of one head, or of every head of a layer
 * (tsc_attn_view.h), with tied rows and sink keys marked; and the source shared with view.c. */
#include "tsc_attn_view.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attn_view_internal.h"
#include "figure_internal.h"
#include "tsc_fit.h"
#include "tsc_select.h"
#include "tsc_surface.h"

/* ---------------------------------------------------------------- the source */

static int is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* 1 when dir is a folder holding name */
static int dir_has(const char *dir, const char *name) {
    char p[2100];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return is_dir(dir) && stat(p, &sb) == 0;
}

static tsc_status_t src_open(const char *source, const char *dump, attn_src_t *s) {
    if (!source) return tsc_error_set(TSC_ERR_ARG, "no source: give a dump or an analysis folder");
    if (dir_has(source, "summary.json")) {
        tsc_status_t st = tsc_figure_src_open(source, &s->an);
        if (st == TSC_OK)
            st = tsc_fig_open_dump(s->an, dump, "the attention pattern", &s->d, s->dump_path, sizeof s->dump_path);
        return st;
    }
    snprintf(s->dump_path, sizeof s->dump_path, "%s", dump ? dump : source);
    /* a folder is either kind of source: say so when it is neither, rather than report the
     * missing file of one kind only */
    if (is_dir(s->dump_path) && !dir_has(s->dump_path, "session.h5"))
        return tsc_error_set(TSC_ERR_IO, "%s: a folder that is neither an analysis folder (no summary.json) nor a "
                             "capture session (no session.h5)", s->dump_path);
    return tsc_dump_open(&s->d, s->dump_path);
}

tsc_status_t attn_scores_policy(const tsc_figure_src_t *an, tsc_dump_t *d, const char *path, const char *given,
                                char policy[TSC_POLICY_STR_MAX], char source[192]) {
    tsc_policy_t p;
    const char *lp = an ? tsc_jv_str(tsc_figure_src_summary(an), "lp") : NULL;
    if (!(given && *given) && lp && *lp && tsc_policy_parse(lp, &p) == TSC_OK) {
        snprintf(source, 192, "the analysis' lp");
        return tsc_policy_format(&p, policy, TSC_POLICY_STR_MAX);
    }
    tsc_error_clear();
    char spec[96] = "heads=0";
    long long step = tsc_dump_n_steps(d) > 0 ? tsc_dump_step_at(d, 0) : 0;
    for (int l = 0; l < tsc_dump_meta(d)->n_layer; l++)
        if (tsc_dump_has_layer(d, step, l)) {
            snprintf(spec, sizeof spec, "steps=%lld,layers=%d,heads=0", step, l);
            break;
        }
    tsc_select_t sel;
    tsc_select_init(&sel);
    tsc_dump_policy_t dp;
    tsc_status_t st = tsc_select_parse(&sel, spec);
    if (st == TSC_OK) st = tsc_dump_policy(path, tsc_dump_meta(d)->policy, given, "--policy", &sel, NULL, &dp);
    if (st != TSC_OK) return st;
    snprintf(policy, TSC_POLICY_STR_MAX, "%s", dp.name);
    snprintf(source, 192, "%s", dp.source);
    return TSC_OK;
}

tsc_status_t attn_src_open(const char *source, const char *dump, const char *policy, attn_src_t *s) {
    memset(s, 0, sizeof *s);
    tsc_status_t st = src_open(source, dump, s);
    if (st == TSC_OK) st = attn_scores_policy(s->an, s->d, s->dump_path, policy, s->policy, s->policy_source);
    if (st != TSC_OK) attn_src_close(s);
    return st;
}

void attn_src_close(attn_src_t *s) {
    if (s->d) tsc_dump_close(s->d);
    if (s->an) tsc_figure_src_close(s->an);
    memset(s, 0, sizeof *s);
}

const tsc_jv_t *attn_src_record(const attn_src_t *s, long long step, int layer, int head) {
    return s->an ? tsc_fig_head_record(s->an, step, layer, head) : NULL;
}

/* ---------------------------------------------------------------- tokens */

void attn_tokens_free(attn_tokens_t *t) {
    free(t->ids), free(t->text);
    memset(t, 0, sizeof *t);
}

tsc_status_t attn_tokens_read(tsc_dump_t *d, long long step, int b, attn_tokens_t *t) {
    memset(t, 0, sizeof *t);
    int kind = tsc_dump_has_tokens(d, step);
    tsc_error_clear();
    if (kind <= 0) return TSC_OK;
    t->T = tsc_dump_meta(d)->seq_len;
    t->ids = malloc(sizeof *t->ids * (size_t)t->T);
    if (kind >= 2) t->text = malloc(sizeof *t->text * (size_t)t->T);
    if (!t->ids || (kind >= 2 && !t->text)) {
        attn_tokens_free(t);
        return tsc_error_set(TSC_ERR_NOMEM, "tokens: out of memory");
    }
    /* text that cannot be read leaves the ids; ids that cannot be read leave nothing */
    if (t->text && tsc_dump_read_tokens(d, step, b, t->ids, t->text) == TSC_OK) {
        t->kind = 2;
    } else {
        free(t->text);
        t->text = NULL;
        tsc_error_clear();
        if (tsc_dump_read_tokens(d, step, b, t->ids, NULL) == TSC_OK) t->kind = 1;
        else attn_tokens_free(t);
    }
    tsc_error_clear();
    return TSC_OK;
}

void attn_token_text(const attn_tokens_t *t, int i, char *buf, size_t cap) {
    buf[0] = '\0';
    if (!t || t->kind <= 0 || i < 0 || i >= t->T || cap < 16) return;
    if (t->kind == 1) {
        snprintf(buf, cap, "id %lld", (long long)t->ids[i]);
        return;
    }
    snprintf(buf, cap, "%s", t->text[i]); /* the display form (tsc_dump_read_tokens) */
}


/* ---------------------------------------------------------------- the figure */

void tsc_attn_fig_opts_init(tsc_attn_fig_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->step = -1, o->layer = -1, o->head = -1, o->row0 = -1, o->row1 = -1;
    o->dpi = 300, o->font_pt = 8;
}

/* Token labels of one axis drawn on a panel: the row or key, the token, the label as drawn and its
 * box in points (figure coordinates). At most TLAB_MAX per axis: far more than a plot has room for. */
#define TLAB_MAX 1024
typedef struct {
    int idx;
    char label[128];
    double box[4];
} tlabel_t;

typedef struct {
    const tsc_attn_fig_opts_t *o;
    attn_src_t src;
    long long step;
    int r0, r1, cols, n;       /* rows [r0, r1), keys [0, cols), n panels */
    tsc_attn_map_t *maps;      /* [n] */
    float *data;               /* [n, r1 - r0, cols] */
    uint8_t *mask;             /* [r1 - r0, cols] or NULL */
    char (*titles)[96];
    tsc_heatmap_panel_t *pan;
    tsc_heatmap_info_t *hi;
    double w_pt, heat_h_pt, legend_pt;
    char title[256], sub[128], legend[1024];
    /* the band above the heatmap holding the title and (one head) the subtitle, each on its own
     * lines at its measured height; top_pt: whole pixels */
    double top_pt, title_box[4], sub_box[4];
    /* token labels (tok.kind > 0): drawn here, in the room the heatmap keeps for its tick labels
     * (spacers: invisible text as wide as the widest label) */
    attn_tokens_t tok;
    double lab_pt, lab_lh;     /* label size and line height (points) */
    int max_chars;             /* characters of a token a label shows (then an ellipsis) */
    int row_stride, key_stride; /* 0: every row (key) labelled with its token; s: those at multiples of s,
                                   each as "i: token" */
    int xrot;                  /* key labels run vertically (else side by side: few keys) */
    char ysp[512], xsp[512];
    const char **yspv, **xspv; /* [rows], [cols]: every entry the spacer */
    tlabel_t *rl, *kl;         /* the labels drawn on panel 0 */
    int n_rl, n_kl;
} attn_fig_t;

static void fig_free(attn_fig_t *f) {
    for (int i = 0; f->maps && i < f->n; i++) tsc_attn_map_free(&f->maps[i]);
    free(f->maps), free(f->data), free(f->mask), free(f->titles), free(f->pan), free(f->hi);
    free(f->yspv), free(f->xspv), free(f->rl), free(f->kl);
    attn_tokens_free(&f->tok);
    attn_src_close(&f->src);
}

/* Resolves step, rows and heads, and computes every head's map. */
static tsc_status_t fig_maps(attn_fig_t *f) {
    const tsc_attn_fig_opts_t *o = f->o;
    const tsc_dump_meta_t *mt = tsc_dump_meta(f->src.d);
    char ch[512], ls[256];
    tsc_attn_map_choices(f->src.d, ch, sizeof ch);
    f->step = o->step >= 0 ? o->step : tsc_dump_n_steps(f->src.d) > 0 ? tsc_dump_step_at(f->src.d, 0) : 0;
    const int has_step = tsc_dump_has_step(f->src.d, f->step);
    if (has_step) tsc_attn_map_step_layers(f->src.d, f->step, ls, sizeof ls);
    if (o->layer < 0) {
        if (has_step) return tsc_error_set(TSC_ERR_ARG, "which layer? (--layer L; step %lld of the dump holds layers %s)",
                                           f->step, ls);
        return tsc_error_set(TSC_ERR_ARG, "which layer? (--layer L; the dump has %s)", ch);
    }
    /* a layer the step does not hold: name the layers it holds (a capture may keep a few of the model's) */
    if (has_step && !tsc_dump_has_layer(f->src.d, f->step, o->layer))
        return tsc_error_set(TSC_ERR_MISSING, "%s: step %lld has no layer %d: the layers captured at that step are %s",
                             tsc_dump_path(f->src.d), f->step, o->layer, ls);
    if (o->head >= mt->n_head)
        return tsc_error_set(TSC_ERR_ARG, "head %d out of range (the dump has %s)", o->head, ch);
    const int T = mt->seq_len;
    f->r0 = o->row0 >= 0 ? o->row0 : 0, f->r1 = o->row1 >= 0 ? o->row1 : T;
    if (f->r0 >= f->r1 || f->r1 > T)
        return tsc_error_set(TSC_ERR_ARG, "rows %d:%d: need 0 <= a < b <= T = %d", f->r0, f->r1, T);
    f->cols = mt->causal ? f->r1 : T;
    f->n = o->head >= 0 ? 1 : mt->n_head;
    const size_t cells = (size_t)(f->r1 - f->r0) * (size_t)f->cols;
    f->maps = calloc((size_t)f->n, sizeof *f->maps);
    f->data = malloc(sizeof(float) * cells * (size_t)f->n);
    f->titles = calloc((size_t)f->n, sizeof *f->titles);
    f->pan = calloc((size_t)f->n, sizeof *f->pan), f->hi = calloc((size_t)f->n, sizeof *f->hi);
    if (mt->causal) f->mask = malloc(cells);
    if (!f->maps || !f->data || !f->titles || !f->pan || !f->hi || (mt->causal && !f->mask))
        return tsc_error_set(TSC_ERR_NOMEM, "figure attn: out of memory");
    for (int i = 0; i < f->n; i++) {
        int h = o->head >= 0 ? o->head : i;
        tsc_attn_map_keep_t rows = {.row0 = f->r0, .row1 = f->r1, .pool = 1}; /* only the rows shown: long contexts */
        tsc_status_t st = tsc_attn_map_compute_kept(f->src.d, f->step, o->layer, h, o->batch, f->src.policy, o->tie_eps,
                                                    &rows, &f->maps[i]);
        if (st != TSC_OK) return st;
        for (int r = f->r0; r < f->r1; r++)
            memcpy(f->data + (size_t)i * cells + (size_t)(r - f->r0) * f->cols, f->maps[i].p + (size_t)(r - f->r0) * T,
                   sizeof(float) * (size_t)f->cols);
        float *pd = f->data + (size_t)i * cells; /* the legend says P < P_MIN shows at the lowest colour */
        for (size_t c = 0; c < cells; c++)
            if (pd[c] < TSC_ATTN_P_MIN) pd[c] = (float)TSC_ATTN_P_MIN;
        free(f->maps[i].p); /* the panel holds the rows shown */
        f->maps[i].p = NULL;
    }
    for (int r = f->r0; f->mask && r < f->r1; r++)
        for (int j = 0; j < f->cols; j++) f->mask[(size_t)(r - f->r0) * f->cols + j] = j > r;
    return attn_tokens_read(f->src.d, f->step, o->batch, &f->tok);
}

/* Rows of [r0, r1) that are tied, and sink keys below cols, as a short text ("0, 128"). */
static void list_sinks(const tsc_attn_map_t *m, int cols, char *buf, size_t cap) {
    size_t len = 0;
    int k = 0;
    buf[0] = '\0';
    for (int j = 0; j < cols && len < cap; j++)
        if (m->is_sink[j]) len += (size_t)snprintf(buf + len, cap - len, "%s%d", k++ ? "," : "", j);
    if (!k) snprintf(buf, cap, "none");
}

static int tied_in(const tsc_attn_map_t *m, int r0, int r1) {
    int n = 0;
    for (int r = r0; r < r1; r++) n += m->tie_eps_count[r] >= 2;
    return n;
}

/* Panels, titles and the legend. */
static void fig_panels(attn_fig_t *f) {
    const tsc_attn_fig_opts_t *o = f->o;
    const tsc_dump_meta_t *mt = tsc_dump_meta(f->src.d);
    const int G = mt->n_head / mt->n_kv_head;
    const size_t cells = (size_t)(f->r1 - f->r0) * (size_t)f->cols;
    for (int i = 0; i < f->n; i++) {
        const tsc_attn_map_t *m = &f->maps[i];
        char sk[64];
        list_sinks(m, f->cols, sk, sizeof sk);
        char kv[24] = "";
        if (G > 1) snprintf(kv, sizeof kv, "/kv%d", m->kv_head);
        /* one head: the subtitle is drawn under the title (fig_draw); a grid panel's title has a blank
         * second line that keeps it clear of the sink marks above the plot */
        if (f->n == 1)
            snprintf(f->sub, sizeof f->sub, "%d tied row%s, sink key%s %.56s", tied_in(m, f->r0, f->r1),
                     tied_in(m, f->r0, f->r1) == 1 ? "" : "s", strchr(sk, ',') || !strcmp(sk, "none") ? "s" : "", sk);
        else
            snprintf(f->titles[i], sizeof f->titles[i], "h%d%.14s \xe2\x97\x80%d \xe2\x96\xbc%.40s\n", m->head, kv,
                     tied_in(m, f->r0, f->r1), m->n_sinks ? sk : "-");
        tsc_heatmap_panel_t *p = &f->pan[i];
        p->data = f->data + (size_t)i * cells;
        p->rows = f->r1 - f->r0, p->cols = f->cols;
        p->mask = f->mask;
        p->title = f->n == 1 ? NULL : f->titles[i];
        p->xlabel = "key j", p->ylabel = "query i";
        p->y_origin = f->r0;
    }
    if (f->n == 1)
        snprintf(f->title, sizeof f->title, "P, layer %d head %d (kv %d), step %lld%s", o->layer, f->maps[0].head,
                 f->maps[0].kv_head, f->step, f->r0 > 0 || f->r1 < mt->seq_len ? ", zoom" : "");
    else
        snprintf(f->title, sizeof f->title, "P, layer %d, step %lld%s%s", o->layer, f->step,
                 G > 1 ? ": one row per kv group" : "", f->r0 > 0 || f->r1 < mt->seq_len ? ", zoom" : "");
    const tsc_attn_map_t *m0 = &f->maps[0];
    int len = snprintf(f->legend, sizeof f->legend,
                       "\xe2\x97\x80 red: tied row (>= 2 keys within %g of the row max of S)   "
                       "\xe2\x96\xbc orange: sink key (>= %g%% of all rows' P, >= %gx uniform)   "
                       "grey hatching: causal mask (j > i); P < %g at the lowest colour. Batch %d, S under %s (%s).",
                       m0->tie_eps, 100 * TSC_ATTN_MAP_SINK_SHARE, TSC_ATTN_MAP_SINK_UNIFORM, TSC_ATTN_P_MIN, o->batch, m0->policy,
                       f->src.policy_source);
    if (f->tok.kind > 0 && len > 0 && (size_t)len < sizeof f->legend)
        len += snprintf(f->legend + len, sizeof f->legend - (size_t)len, " Axes: the input token%s of batch row %d%s.",
                        f->tok.kind == 2 ? "s" : " ids", o->batch, f->tok.kind == 2 ? " (\xe2\x90\xa3: a space)" : "");
    const tsc_jv_t *rec = f->n == 1 ? attn_src_record(&f->src, f->step, o->layer, m0->head) : NULL;
    if (rec && len > 0 && (size_t)len < sizeof f->legend) {
        len += snprintf(f->legend + len, sizeof f->legend - (size_t)len,
                        "  Analysis (all rows of the analysed batch): %g rows with tied maxima; row max at key",
                        tsc_jv_num(rec, "ties.rows_multi_max_eps"));
        for (size_t k = 0; k < tsc_jv_len(rec, "ties.sink_keys") && len > 0 && (size_t)len < sizeof f->legend; k++) {
            char a[48], b[48];
            snprintf(a, sizeof a, "ties.sink_keys.%zu", k), snprintf(b, sizeof b, "ties.sink_counts.%zu", k);
            if (tsc_jv_num(rec, a) >= 0)
                len += snprintf(f->legend + len, sizeof f->legend - (size_t)len, "%s %g: %g rows", k ? ";" : "",
                                tsc_jv_num(rec, a), tsc_jv_num(rec, b));
        }
        if (len > 0 && (size_t)len + 1 < sizeof f->legend) f->legend[len++] = '.', f->legend[len] = '\0';
    }
}

static void heat_opts(const attn_fig_t *f, double w_in, tsc_heatmap_opts_t *ho) {
    const tsc_dump_meta_t *mt = tsc_dump_meta(f->src.d);
    const int G = mt->n_head / mt->n_kv_head;
    tsc_heatmap_opts_init(ho);
    ho->width_in = w_in, ho->height_in = (f->heat_h_pt - f->top_pt) / 72.0;
    ho->dpi = f->o->dpi, ho->font_pt = f->o->font_pt;
    ho->title = NULL; /* drawn above the heatmap (fig_draw) */
    ho->cmap = TSC_CMAP_VIRIDIS;
    ho->fixed_norm = 1;
    TSC_INVARIANT(tsc_norm_init(&ho->norm, TSC_NORM_LOG, TSC_ATTN_P_MIN, 1.0) == TSC_OK); /* 0 < P_MIN < 1 */
    ho->cbar_label = "P (log scale)";
    ho->panel_letters = 0;
    double ratio = (double)(f->r1 - f->r0) / f->cols; /* square cells unless a zoom is a thin strip */
    ho->equal_aspect = ratio >= 0.5 && ratio <= 2;
    if (f->n > 1) {
        int cols = G > 1 && G <= 8 ? G : (int)ceil(sqrt((double)f->n));
        ho->grid_cols = cols;
    }
}

/* ---------------------------------------------------------------- token labels */

/* The label of row or key i: the token (a space as U+2423, at most max_chars characters, then an
 * ellipsis), with "i: " before it when sub. */
static void tok_label(const attn_fig_t *f, int i, int sub, char *buf, size_t cap) {
    char t[TSC_DUMP_TOKEN_TEXT_CAP + 64];
    attn_token_text(&f->tok, i, t, sizeof t);
    size_t o = sub ? (size_t)snprintf(buf, cap, "%d: ", i) : 0;
    int nch = 0;
    for (const unsigned char *s = (const unsigned char *)t; *s && o + 8 < cap;) {
        size_t len = *s < 0x80 ? 1 : (*s & 0xE0) == 0xC0 ? 2 : (*s & 0xF0) == 0xE0 ? 3 : 4;
        if (nch == f->max_chars) {
            memcpy(buf + o, "\xe2\x80\xa6", 3), o += 3;
            break;
        }
        if (*s == ' ' && f->tok.kind == 2) memcpy(buf + o, "\xe2\x90\xa3", 3), o += 3;
        else memcpy(buf + o, s, len), o += len;
        s += len, nch++;
    }
    buf[o] = '\0';
}

static double text_w(cairo_t *cr, double pt, const char *s) {
    double w = 0;
    tsc_surface_text_size(cr, NULL, pt, 0, 0, s, &w, NULL);
    return w;
}

/* The widest label of rows [a, b) at stride (0: every row, the token alone), in points. */
static double labels_w(const attn_fig_t *f, cairo_t *cr, int a, int b, int stride) {
    double w = 0;
    char lab[128];
    for (int i = a; i < b; i++) {
        if (stride && i % stride) continue;
        tok_label(f, i, stride > 0, lab, sizeof lab);
        w = fmax(w, text_w(cr, f->lab_pt, lab));
    }
    return w;
}

/* Invisible text (en spaces) at least need points wide at the heatmap's text size. */
static void spacer(cairo_t *cr, double pt, double need, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = '\0';
    while (o + 4 < cap && text_w(cr, pt, buf) < need) memcpy(buf + o, "\xe2\x80\x82", 3), o += 3, buf[o] = '\0';
}

/* The spacers of the current label forms, on every panel: the heatmap keeps room for them and
 * draws them (invisible) and its tick marks, which fig_draw covers before drawing the labels. */
static void labels_apply(attn_fig_t *f, cairo_t *cr, double w_pt) {
    const double F = f->o->font_pt;
    double lh;
    tsc_surface_text_size(cr, NULL, F, 0, 0, "Ag", NULL, &lh);
    spacer(cr, F, labels_w(f, cr, f->r0, f->r1, f->row_stride) + 0.2 * F + lh + 1, f->ysp, sizeof f->ysp);
    double kw = labels_w(f, cr, 0, f->cols, f->key_stride) + 0.2 * F + lh + 1;
    /* vertical key labels: the heatmap turns its labels when they do not fit side by side, which a
     * spacer as wide as the figure over cols forces; with few keys they stay side by side */
    double turn = w_pt / f->cols - 0.6 * F + 1;
    f->xrot = turn <= fmax(kw, 48);
    if (f->xrot) spacer(cr, F, fmax(kw, turn), f->xsp, sizeof f->xsp);
    else f->xsp[0] = '\0';
    for (int i = 0; i < f->r1 - f->r0; i++) f->yspv[i] = f->ysp;
    for (int j = 0; j < f->cols; j++) f->xspv[j] = f->xsp;
    for (int i = 0; i < f->n; i++) {
        tsc_heatmap_panel_t *p = &f->pan[i];
        p->ytick_labels = f->yspv, p->xtick_labels = f->xspv;
        p->ylabel = NULL, p->xlabel = f->xrot ? NULL : "key j";
    }
}

/* Points per source row and per key of panel i as laid out (hi in pixels at dpi). */
static void pitch(const attn_fig_t *f, int i, double *row, double *key) {
    const tsc_heatmap_info_t *hi = &f->hi[i];
    double k = 72.0 / f->o->dpi;
    *row = hi->plot_h * k / ((double)hi->shown_rows * hi->pool_rows);
    *key = hi->plot_w * k / ((double)hi->shown_cols * hi->pool_cols);
}

/* The smallest of 1, 2, 5, 10, 20, 50, ... with stride * per >= need. */
static int nice_stride(double per, double need) {
    for (long s = 1;; s *= 10)
        for (int m = 0; m < 3; m++) {
            long v = s * (m == 0 ? 1 : m == 1 ? 2 : 5);
            if (v * per >= need || v > 100000000) return (int)v;
        }
}

/* The heatmap laid out at the current spacers (fills f->hi in heatmap pixels). */
static tsc_status_t heat_layout(attn_fig_t *f) {
    tsc_heatmap_opts_t ho;
    heat_opts(f, f->w_pt / 72.0, &ho);
    cairo_surface_t *img = NULL;
    tsc_status_t st = tsc_heatmap_render(&ho, f->pan, f->n, &img, f->hi);
    if (img) cairo_surface_destroy(img);
    return st;
}

/* A stride that fits per points a row (key) for a label: 0 (every one) while a label's line fits its
 * row, else the smallest of 1, 2, 5, 10, ... whose labels are apart by 1.15 lines; stride when it still
 * fits (the room kept was measured for it). */
static int fit_stride(const attn_fig_t *f, int stride, double per) {
    if (stride == 0 && per >= 1.05 * f->lab_lh) return 0;
    if (stride > 0 && stride * per >= 1.15 * f->lab_lh) return stride;
    int s = nice_stride(per, 1.15 * f->lab_lh);
    return s > stride ? s : stride + 1;
}

/* Label strides that fit: the room the heatmap keeps is measured for the labels of a stride, and
 * changes the plot and so the stride that fits: rounds until the stride of a round fits its plot
 * (strides only grow: it ends). *fits: every row and key labelled. */
static tsc_status_t labels_fit(attn_fig_t *f, cairo_t *cr, int *fits) {
    tsc_status_t st = TSC_OK;
    labels_apply(f, cr, f->w_pt);
    for (int round = 0; st == TSC_OK; round++) {
        st = heat_layout(f);
        if (st != TSC_OK) break;
        double row, key;
        pitch(f, 0, &row, &key);
        int rs = fit_stride(f, f->row_stride, row), ks = f->xrot ? fit_stride(f, f->key_stride, key) : 0;
        if ((rs == f->row_stride && ks == f->key_stride) || round == 12) break;
        f->row_stride = rs, f->key_stride = ks;
        char ysp[sizeof f->ysp], xsp[sizeof f->xsp];
        int xrot = f->xrot;
        memcpy(ysp, f->ysp, sizeof ysp), memcpy(xsp, f->xsp, sizeof xsp);
        labels_apply(f, cr, f->w_pt);
        /* the same room for the new labels: the same plot, which the new strides fit */
        if (!strcmp(ysp, f->ysp) && !strcmp(xsp, f->xsp) && xrot == f->xrot) break;
    }
    *fits = f->row_stride == 0 && f->key_stride == 0;
    return st;
}

/* Covers the heatmap's tick marks left of and under panel i (they mark its own choice of rows), and
 * draws the token labels, their ticks and the axis names; panel 0's labels are kept for --json. */
static void token_axes(cairo_t *cr, attn_fig_t *f, int i) {
    const tsc_heatmap_info_t *hi = &f->hi[i];
    const double k = 72.0 / f->o->dpi, F = f->o->font_pt, lw = 0.5, tick = 0.25 * F;
    const double px = hi->plot_x * k, py = hi->plot_y * k, pw = hi->plot_w * k, ph = hi->plot_h * k;
    cairo_save(cr);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_rectangle(cr, px - lw - tick - 1, py - 1, tick + 1, ph + 2);
    cairo_rectangle(cr, px - 1, py + ph + lw, pw + 2, tick + 1);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, lw);
    cairo_rectangle(cr, px - lw / 2, py - lw / 2, pw + lw, ph + lw);
    cairo_stroke(cr);
    double row, key, lh;
    pitch(f, i, &row, &key);
    tsc_surface_text_size(cr, NULL, F, 0, 0, "Ag", NULL, &lh);
    const int sr = f->row_stride ? f->row_stride : 1, sk = f->xrot && f->key_stride ? f->key_stride : 1;
    char lab[128];
    double maxw = 0;
    if (i == 0) f->n_rl = f->n_kl = 0;
    for (int r = f->r0; r < f->r1; r++) {
        if (r % sr) continue;
        double y = py + (r - f->r0 + 0.5) * row, w, h;
        tok_label(f, r, f->row_stride > 0, lab, sizeof lab);
        tsc_surface_text_size(cr, NULL, f->lab_pt, 0, 0, lab, &w, &h);
        double xr = px - lw - tick - 0.2 * F;
        cairo_move_to(cr, px - lw, y), cairo_line_to(cr, px - lw - tick, y), cairo_stroke(cr);
        tsc_surface_text_at(cr, NULL, f->lab_pt, 0, 0, lab, xr, y, 1, 0.5, 0);
        maxw = fmax(maxw, w);
        if (i == 0 && f->n_rl < TLAB_MAX) {
            tlabel_t *t = &f->rl[f->n_rl++];
            t->idx = r;
            snprintf(t->label, sizeof t->label, "%s", lab);
            t->box[0] = xr - w, t->box[1] = y - h / 2, t->box[2] = w, t->box[3] = h;
        }
    }
    /* every row labelled with its token alone: the axis name says which rows they are */
    char name[64] = "query i";
    if (!f->row_stride) snprintf(name, sizeof name, "query i (%d-%d)", f->r0, f->r1 - 1);
    tsc_surface_text_at(cr, NULL, F, 0, 0, name, px - lw - tick - 0.4 * F - maxw, py + ph / 2, 0.5, 1, -M_PI / 2);
    maxw = 0;
    const double yt = py + ph + lw + tick + 0.1 * F;
    for (int j = 0; j < f->cols; j++) {
        if (j % sk) continue;
        double x = px + (j + 0.5) * key, w, h;
        tok_label(f, j, f->xrot && f->key_stride > 0, lab, sizeof lab);
        if (!f->xrot) { /* side by side: cut to the key's width */
            while (lab[0] && text_w(cr, f->lab_pt, lab) > key - 0.3 * F) {
                size_t n = strlen(lab), cut = n;
                if (n >= 3 && !strcmp(lab + n - 3, "\xe2\x80\xa6")) cut = n - 3; /* drop the ellipsis, then a character */
                while (cut > 0 && ((unsigned char)lab[cut - 1] & 0xC0) == 0x80) cut--;
                if (cut > 0) cut--;
                lab[cut] = '\0';
                if (cut > 0 && cut + 4 < sizeof lab) memcpy(lab + cut, "\xe2\x80\xa6", 4);
            }
            if (!lab[0]) continue;
        }
        tsc_surface_text_size(cr, NULL, f->lab_pt, 0, 0, lab, &w, &h);
        cairo_move_to(cr, x, py + ph + lw), cairo_line_to(cr, x, py + ph + lw + tick), cairo_stroke(cr);
        double box[4];
        if (f->xrot) {
            tsc_surface_text_at(cr, NULL, f->lab_pt, 0, 0, lab, x, yt, 1, 0.5, -M_PI / 2);
            box[0] = x - h / 2, box[1] = yt, box[2] = h, box[3] = w;
            maxw = fmax(maxw, w);
        } else {
            tsc_surface_text_at(cr, NULL, f->lab_pt, 0, 0, lab, x, yt, 0.5, 0, 0);
            box[0] = x - w / 2, box[1] = yt, box[2] = w, box[3] = h;
        }
        if (i == 0 && f->n_kl < TLAB_MAX) {
            tlabel_t *t = &f->kl[f->n_kl++];
            t->idx = j;
            snprintf(t->label, sizeof t->label, "%s", lab);
            memcpy(t->box, box, sizeof box);
        }
    }
    snprintf(name, sizeof name, "key j");
    if (!f->key_stride) snprintf(name, sizeof name, "key j (0-%d)", f->cols - 1);
    if (f->xrot) tsc_surface_text_at(cr, NULL, F, 0, 0, name, px + pw / 2, yt + maxw + 0.2 * F, 0.5, 0, 0);
    cairo_restore(cr);
}

/* ---------------------------------------------------------------- drawing */

static void triangle(cairo_t *cr, double x, double y, double s, int down) {
    if (down) cairo_move_to(cr, x - s / 2, y - s), cairo_line_to(cr, x + s / 2, y - s), cairo_line_to(cr, x, y);
    else cairo_move_to(cr, x + s, y - s / 2), cairo_line_to(cr, x + s, y + s / 2), cairo_line_to(cr, x, y);
    cairo_close_path(cr);
    cairo_fill(cr);
}

/* Marks of one panel in points (k: points per pixel of the heatmap image). */
static void marks(cairo_t *cr, const attn_fig_t *f, int i, double k) {
    const tsc_heatmap_info_t *hi = &f->hi[i];
    const tsc_attn_map_t *m = &f->maps[i];
    double px = hi->plot_x * k, py = hi->plot_y * k, pw = hi->plot_w * k, ph = hi->plot_h * k;
    double ch = ph / hi->shown_rows, cw = pw / hi->shown_cols, s = f->n > 1 ? 3.0 : 4.5;
    cairo_set_source_rgb(cr, 0.85, 0.1, 0.1);
    double th = fmax(0.6 * ch, 0.3); /* one tick per shown row that holds a tied row */
    for (int r = f->r0; r < f->r1; r++)
        if (m->tie_eps_count[r] >= 2) {
            double y = py + (((r - f->r0) / hi->pool_rows) + 0.5) * ch;
            cairo_rectangle(cr, px + pw + 0.8, y - th / 2, s, th);
        }
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0.95, 0.5, 0.0);
    for (int j = 0; j < f->cols; j++)
        if (m->is_sink[j]) triangle(cr, px + ((j / hi->pool_cols) + 0.5) * cw, py - 0.6, s, 1);
}

/* The band above the heatmap: the title, then (one head) the subtitle on lines of its own, each at
 * its measured height; top_pt rounded up to whole pixels so the heatmap's cells stay on pixels. */
static void top_band(attn_fig_t *f, cairo_t *cr) {
    const double F = f->o->font_pt, m = 0.5 * F, w = f->w_pt - 2 * m;
    double tw, th, sw = 0, sh = 0;
    tsc_surface_text_size(cr, NULL, F * 1.1, 1, w, f->title, &tw, &th);
    f->title_box[0] = m + (w - fmin(tw, w)) / 2, f->title_box[1] = m, f->title_box[2] = fmin(tw, w), f->title_box[3] = th;
    double y = m + th;
    memset(f->sub_box, 0, sizeof f->sub_box);
    if (f->sub[0]) {
        tsc_surface_text_size(cr, NULL, F, 0, w, f->sub, &sw, &sh);
        y += 0.15 * F;
        f->sub_box[0] = m + (w - fmin(sw, w)) / 2, f->sub_box[1] = y, f->sub_box[2] = fmin(sw, w), f->sub_box[3] = sh;
        y += sh;
    }
    y += 0.1 * F;
    const double px = f->o->dpi / 72.0;
    f->top_pt = ceil(y * px - 1e-9) / px;
}

static tsc_status_t fig_draw(cairo_t *cr, double w_pt, double h_pt, void *ctx) {
    attn_fig_t *f = ctx;
    (void)h_pt;
    tsc_heatmap_opts_t ho;
    heat_opts(f, w_pt / 72.0, &ho);
    cairo_surface_t *img = NULL;
    tsc_status_t st = tsc_heatmap_render(&ho, f->pan, f->n, &img, f->hi);
    if (st != TSC_OK) return st;
    double k = 72.0 / f->o->dpi, top_px = round(f->top_pt / k);
    cairo_save(cr);
    cairo_translate(cr, 0, f->top_pt);
    cairo_scale(cr, k, k);
    cairo_set_source_surface(cr, img, 0, 0);
    cairo_paint(cr);
    cairo_restore(cr);
    cairo_surface_destroy(img);
    for (int i = 0; i < f->n; i++) f->hi[i].plot_y += top_px, f->hi[i].cbar_y += top_px; /* figure pixels */
    if (f->tok.kind > 0)
        for (int i = 0; i < f->n; i++) token_axes(cr, f, i);
    for (int i = 0; i < f->n; i++) marks(cr, f, i, k);
    const double F = f->o->font_pt;
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    tsc_surface_text(cr, NULL, F * 1.1, 1, 0.5 * F, f->title_box[1], w_pt - F, f->title, 1, 1, 0);
    if (f->sub[0]) tsc_surface_text(cr, NULL, F, 0, 0.5 * F, f->sub_box[1], w_pt - F, f->sub, 1, 1, 0);
    tsc_surface_text(cr, NULL, F * 0.85, 0, 6, f->heat_h_pt, w_pt - 12, f->legend, 0, 1, 0);
    return TSC_OK;
}

static void box_px(tsc_json_t *j, const char *key, const double b[4], double s) {
    double v[4] = {b[0] * s, b[1] * s, b[2] * s, b[3] * s};
    tsc_json_kv_numbers(j, key, v, 4);
}

static void labels_json(tsc_json_t *j, const char *key, const char *idx, const tlabel_t *l, int n, double s) {
    tsc_json_key(j, key);
    tsc_json_array_begin(j);
    for (int i = 0; i < n; i++) {
        tsc_json_object_begin(j);
        tsc_json_kv_int(j, idx, l[i].idx);
        tsc_json_kv_string(j, "label", l[i].label);
        box_px(j, "box_px", l[i].box, s);
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
}

static void describe(const attn_fig_t *f, const char *path, double w_pt, double h_pt, tsc_json_t *j) {
    const double s = f->o->dpi / 72.0;
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "file", path);
    tsc_json_kv_string(j, "dump", tsc_fig_base(f->src.dump_path));
    tsc_json_kv_int(j, "step", f->step);
    tsc_json_kv_int(j, "layer", f->o->layer);
    tsc_json_kv_int(j, "batch", f->o->batch);
    tsc_json_kv_string(j, "policy", f->maps[0].policy);
    tsc_json_kv_string(j, "policy_source", f->src.policy_source);
    tsc_json_kv_number(j, "tie_eps", f->maps[0].tie_eps);
    int64_t rows[2] = {f->r0, f->r1}, px[2] = {(int64_t)lround(w_pt * s), (int64_t)lround(h_pt * s)};
    tsc_json_kv_ints(j, "rows", rows, 2);
    tsc_json_kv_int(j, "cols", f->cols);
    tsc_json_kv_ints(j, "image_px", px, 2);
    tsc_json_kv_string(j, "title", f->title);
    tsc_json_kv_string(j, "subtitle", f->sub[0] ? f->sub : NULL);
    tsc_json_key(j, "layout");
    tsc_json_object_begin(j);
    box_px(j, "title_px", f->title_box, s);
    if (f->sub[0]) box_px(j, "subtitle_px", f->sub_box, s);
    else tsc_json_kv_string(j, "subtitle_px", NULL);
    double heat[4] = {0, f->top_pt, w_pt, f->heat_h_pt - f->top_pt};
    box_px(j, "heatmap_px", heat, s);
    tsc_json_object_end(j);
    /* the tokens of the shown rows and keys (display form) and the labels drawn on the (first) panel */
    tsc_json_kv_string(j, "tokens", f->tok.kind == 2 ? "text" : f->tok.kind == 1 ? "ids" : NULL);
    if (f->tok.kind > 0) {
        char t[TSC_DUMP_TOKEN_TEXT_CAP + 64];
        tsc_json_key(j, "row_tokens");
        tsc_json_array_begin(j);
        for (int r = f->r0; r < f->r1; r++) attn_token_text(&f->tok, r, t, sizeof t), tsc_json_string(j, t);
        tsc_json_array_end(j);
        tsc_json_key(j, "key_tokens");
        tsc_json_array_begin(j);
        for (int c = 0; c < f->cols; c++) attn_token_text(&f->tok, c, t, sizeof t), tsc_json_string(j, t);
        tsc_json_array_end(j);
        tsc_json_kv_bool(j, "rows_all_labelled", !f->row_stride);
        tsc_json_kv_bool(j, "keys_all_labelled", f->xrot ? !f->key_stride : f->n_kl == f->cols);
        tsc_json_kv_bool(j, "key_labels_vertical", f->xrot);
        labels_json(j, "row_labels", "row", f->rl, f->n_rl, s);
        labels_json(j, "key_labels", "key", f->kl, f->n_kl, s);
    }
    tsc_json_key(j, "heads");
    tsc_json_array_begin(j);
    for (int i = 0; i < f->n; i++) {
        const tsc_attn_map_t *m = &f->maps[i];
        const tsc_heatmap_info_t *hi = &f->hi[i];
        tsc_json_object_begin(j);
        tsc_json_kv_int(j, "head", m->head);
        tsc_json_kv_int(j, "kv_head", m->kv_head);
        tsc_json_key(j, "tied_rows");
        tsc_json_array_begin(j);
        for (int r = f->r0; r < f->r1; r++)
            if (m->tie_eps_count[r] >= 2) tsc_json_int(j, r);
        tsc_json_array_end(j);
        tsc_json_key(j, "sinks");
        tsc_json_array_begin(j);
        for (int c = 0; c < m->T; c++)
            if (m->is_sink[c]) tsc_json_int(j, c);
        tsc_json_array_end(j);
        double box[4] = {hi->plot_x, hi->plot_y, hi->plot_w, hi->plot_h};
        tsc_json_kv_numbers(j, "plot_px", box, 4);
        int64_t pool[2] = {hi->pool_rows, hi->pool_cols}, shown[2] = {hi->shown_rows, hi->shown_cols};
        tsc_json_kv_ints(j, "pool", pool, 2);
        tsc_json_kv_ints(j, "shown", shown, 2);
        tsc_json_kv_string(j, "note", hi->note);
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
    tsc_json_object_end(j);
}

/* The size: the given one, else the default; with token labels on one head and no size given, grown
 * (to at most 12 in a side) until every row and key of a range of at most 48 has its label.
 * Lays out the title band, the legend and the labels for it. */
static tsc_status_t fig_size(attn_fig_t *f, cairo_t *mc, double *w_in, double *h_in) {
    const tsc_attn_fig_opts_t *o = f->o;
    const tsc_dump_meta_t *mt = tsc_dump_meta(f->src.d);
    int G = mt->n_head / mt->n_kv_head, gc = G > 1 && G <= 8 ? G : (int)ceil(sqrt((double)f->n));
    int grows = (f->n + gc - 1) / gc;
    *w_in = o->width_in > 0 ? o->width_in : f->n > 1 ? 6.5 : 3.25;
    *h_in = o->height_in > 0 ? o->height_in : f->n > 1 ? 0.9 + grows * (6.0 / gc + 0.3) : 3.4;
    const int grow = f->tok.kind > 0 && f->n == 1 && !(o->width_in > 0) && !(o->height_in > 0);
    const int rows = f->r1 - f->r0;
    tsc_status_t st = TSC_OK;
    for (int round = 0; round < 4 && st == TSC_OK; round++) {
        f->w_pt = *w_in * 72;
        f->legend_pt = tsc_surface_text(mc, NULL, o->font_pt * 0.85, 0, 0, 0, f->w_pt - 12, f->legend, 0, 0, 0) + 4;
        f->heat_h_pt = *h_in * 72 - f->legend_pt;
        top_band(f, mc);
        if (f->heat_h_pt - f->top_pt < 72)
            return tsc_error_set(TSC_ERR_ARG, "figure attn: %g in is too short for the figure", *h_in);
        if (f->tok.kind <= 0) return TSC_OK;
        /* many rows (keys): a label each cannot fit even the whole figure; start from the stride that
         * would (measuring every label of a long context only to drop them takes long) */
        f->row_stride = rows > 256 ? nice_stride(*h_in * 72 / rows, 1.15 * f->lab_lh) : 0;
        f->key_stride = f->cols > 256 ? nice_stride(f->w_pt / f->cols, 1.15 * f->lab_lh) : 0;
        int fits;
        st = labels_fit(f, mc, &fits);
        if (st != TSC_OK || !grow || fits || round == 3) break;
        /* grow the plot by what it lacks for a label per row (key); square cells scale both sides */
        double row, key, need = 1.08 * f->lab_lh;
        pitch(f, 0, &row, &key);
        const tsc_heatmap_info_t *hi = &f->hi[0];
        double ph = hi->plot_h * 72.0 / o->dpi, pw = hi->plot_w * 72.0 / o->dpi;
        /* and, labelled every few rows, at least 2 in high: the labels' room is not taken from the plot */
        double want_h = rows <= 48 ? rows * need : 144, want_w = f->cols <= 48 ? f->cols * need : 144;
        double ratio = (double)rows / f->cols;
        if (ratio >= 0.5 && ratio <= 2) { /* equal aspect: the cells are square */
            double cell = fmax(want_h / rows, want_w / f->cols);
            want_h = cell * rows, want_w = cell * f->cols;
        }
        if (want_h <= ph + 0.5 && want_w <= pw + 0.5) break; /* more rows than 48: a subset by design */
        double nw = fmin(12, *w_in + fmax(0, want_w - pw) / 72), nh = fmin(12, *h_in + fmax(0, want_h - ph) / 72);
        nw = ceil(nw * o->dpi - 1e-6) / o->dpi, nh = ceil(nh * o->dpi - 1e-6) / o->dpi; /* whole pixels */
        if (nw <= *w_in + 1e-3 && nh <= *h_in + 1e-3) break;
        *w_in = nw, *h_in = nh;
    }
    return st;
}

tsc_status_t tsc_attn_figure_write(const tsc_attn_fig_opts_t *o, const char *path, tsc_image_format_t fmt,
                                   tsc_json_t *desc) {
    if (!o || !path) return tsc_error_set(TSC_ERR_ARG, "tsc_attn_figure_write: NULL argument");
    attn_fig_t f;
    memset(&f, 0, sizeof f);
    f.o = o;
    tsc_status_t st = attn_src_open(o->source, o->dump, o->policy, &f.src);
    if (st == TSC_OK) st = fig_maps(&f);
    cairo_surface_t *tmp = NULL;
    cairo_t *mc = NULL;
    if (st == TSC_OK) {
        fig_panels(&f);
        tmp = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
        mc = cairo_create(tmp);
        if (f.tok.kind > 0) {
            f.lab_pt = fmax(7, 0.875 * o->font_pt);
            tsc_surface_text_size(mc, NULL, f.lab_pt, 0, 0, "Ag", NULL, &f.lab_lh);
            f.max_chars = f.n > 1 ? 6 : 12;
            f.yspv = calloc((size_t)(f.r1 - f.r0), sizeof *f.yspv);
            f.xspv = calloc((size_t)f.cols, sizeof *f.xspv);
            f.rl = calloc(TLAB_MAX, sizeof *f.rl), f.kl = calloc(TLAB_MAX, sizeof *f.kl);
            if (!f.yspv || !f.xspv || !f.rl || !f.kl) st = tsc_error_set(TSC_ERR_NOMEM, "figure attn: out of memory");
        }
    }
    double w_in = 0, h_in = 0;
    if (st == TSC_OK) st = fig_size(&f, mc, &w_in, &h_in);
    if (mc) cairo_destroy(mc);
    if (tmp) cairo_surface_destroy(tmp);
    if (st == TSC_OK) st = tsc_surface_write(path, fmt, w_in, h_in, o->dpi, fig_draw, &f);
    if (st == TSC_OK && desc) describe(&f, path, w_in * 72, h_in * 72, desc);
    fig_free(&f);
    return st;
}
