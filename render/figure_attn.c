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

/* ---------------------------------------------------------------- the figure */

void tsc_attn_fig_opts_init(tsc_attn_fig_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->step = -1, o->layer = -1, o->head = -1, o->row0 = -1, o->row1 = -1;
    o->dpi = 300, o->font_pt = 8;
}

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
    double heat_h_pt, legend_pt;
    char title[256], legend[1024];
} attn_fig_t;

static void fig_free(attn_fig_t *f) {
    for (int i = 0; f->maps && i < f->n; i++) tsc_attn_map_free(&f->maps[i]);
    free(f->maps), free(f->data), free(f->mask), free(f->titles), free(f->pan), free(f->hi);
    attn_src_close(&f->src);
}

/* Resolves step, rows and heads, and computes every head's map. */
static tsc_status_t fig_maps(attn_fig_t *f) {
    const tsc_attn_fig_opts_t *o = f->o;
    const tsc_dump_meta_t *mt = tsc_dump_meta(f->src.d);
    char ch[512];
    tsc_attn_map_choices(f->src.d, ch, sizeof ch);
    f->step = o->step >= 0 ? o->step : tsc_dump_n_steps(f->src.d) > 0 ? tsc_dump_step_at(f->src.d, 0) : 0;
    if (o->layer < 0) return tsc_error_set(TSC_ERR_ARG, "which layer? (--layer L; the dump has %s)", ch);
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
    return TSC_OK;
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
        /* the blank second line keeps the title clear of the sink marks above the plot */
        if (f->n == 1)
            snprintf(f->titles[i], sizeof f->titles[i], "%d tied rows, sink keys %.56s\n", tied_in(m, f->r0, f->r1), sk);
        else
            snprintf(f->titles[i], sizeof f->titles[i], "h%d%.14s \xe2\x97\x80%d \xe2\x96\xbc%.40s\n", m->head, kv,
                     tied_in(m, f->r0, f->r1), m->n_sinks ? sk : "-");
        tsc_heatmap_panel_t *p = &f->pan[i];
        p->data = f->data + (size_t)i * cells;
        p->rows = f->r1 - f->r0, p->cols = f->cols;
        p->mask = f->mask;
        p->title = f->titles[i];
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
    ho->width_in = w_in, ho->height_in = f->heat_h_pt / 72.0;
    ho->dpi = f->o->dpi, ho->font_pt = f->o->font_pt;
    ho->title = f->title;
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

static tsc_status_t fig_draw(cairo_t *cr, double w_pt, double h_pt, void *ctx) {
    attn_fig_t *f = ctx;
    (void)h_pt;
    tsc_heatmap_opts_t ho;
    heat_opts(f, w_pt / 72.0, &ho);
    cairo_surface_t *img = NULL;
    tsc_status_t st = tsc_heatmap_render(&ho, f->pan, f->n, &img, f->hi);
    if (st != TSC_OK) return st;
    double k = 72.0 / f->o->dpi;
    cairo_save(cr);
    cairo_scale(cr, k, k);
    cairo_set_source_surface(cr, img, 0, 0);
    cairo_paint(cr);
    cairo_restore(cr);
    cairo_surface_destroy(img);
    for (int i = 0; i < f->n; i++) marks(cr, f, i, k);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    tsc_surface_text(cr, NULL, f->o->font_pt * 0.85, 0, 6, f->heat_h_pt, w_pt - 12, f->legend, 0, 1, 0);
    return TSC_OK;
}

static void describe(const attn_fig_t *f, const char *path, double w_pt, double h_pt, tsc_json_t *j) {
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "file", path);
    tsc_json_kv_string(j, "dump", tsc_fig_base(f->src.dump_path));
    tsc_json_kv_int(j, "step", f->step);
    tsc_json_kv_int(j, "layer", f->o->layer);
    tsc_json_kv_int(j, "batch", f->o->batch);
    tsc_json_kv_string(j, "policy", f->maps[0].policy);
    tsc_json_kv_string(j, "policy_source", f->src.policy_source);
    tsc_json_kv_number(j, "tie_eps", f->maps[0].tie_eps);
    int64_t rows[2] = {f->r0, f->r1}, px[2] = {(int64_t)lround(w_pt * f->o->dpi / 72), (int64_t)lround(h_pt * f->o->dpi / 72)};
    tsc_json_kv_ints(j, "rows", rows, 2);
    tsc_json_kv_int(j, "cols", f->cols);
    tsc_json_kv_ints(j, "image_px", px, 2);
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

tsc_status_t tsc_attn_figure_write(const tsc_attn_fig_opts_t *o, const char *path, tsc_image_format_t fmt,
                                   tsc_json_t *desc) {
    if (!o || !path) return tsc_error_set(TSC_ERR_ARG, "tsc_attn_figure_write: NULL argument");
    attn_fig_t f;
    memset(&f, 0, sizeof f);
    f.o = o;
    tsc_status_t st = attn_src_open(o->source, o->dump, o->policy, &f.src);
    if (st == TSC_OK) st = fig_maps(&f);
    if (st == TSC_OK) {
        fig_panels(&f);
        const tsc_dump_meta_t *mt = tsc_dump_meta(f.src.d);
        int G = mt->n_head / mt->n_kv_head, gc = G > 1 && G <= 8 ? G : (int)ceil(sqrt((double)f.n));
        int grows = (f.n + gc - 1) / gc;
        double w_in = o->width_in > 0 ? o->width_in : f.n > 1 ? 6.5 : 3.25;
        double h_in = o->height_in > 0 ? o->height_in : f.n > 1 ? 0.9 + grows * (6.0 / gc + 0.3) : 3.4;
        cairo_surface_t *tmp = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
        cairo_t *mc = cairo_create(tmp);
        f.legend_pt = tsc_surface_text(mc, NULL, o->font_pt * 0.85, 0, 0, 0, w_in * 72 - 12, f.legend, 0, 0, 0) + 4;
        cairo_destroy(mc), cairo_surface_destroy(tmp);
        f.heat_h_pt = h_in * 72 - f.legend_pt;
        if (f.heat_h_pt < 72) st = tsc_error_set(TSC_ERR_ARG, "figure attn: %g in is too short for the figure", h_in);
        if (st == TSC_OK) st = tsc_surface_write(path, fmt, w_in, h_in, o->dpi, fig_draw, &f);
        if (st == TSC_OK && desc) describe(&f, path, w_in * 72, h_in * 72, desc);
    }
    fig_free(&f);
    return st;
}
