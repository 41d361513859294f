/* figure.c: figure recipes (tsc_figure.h): the paper's figures 2-13 from analysis.h5, summary.json,
 * training logs and (for raw tensors) the dump; figure 1 as an evidence map (figure_evidence.c). */
#include "tsc_figure.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "attn_view_internal.h"
#include "tsc_attn_map.h"
#include "tsc_dump.h"
#include "tsc_h5.h"
#include "tsc_plot.h"
#include "tsc_policy.h"
#include "figure_internal.h"
#include "tsc_surface.h"

/* Row of head in step_S/layer_L/heads; -1 when that head was not analysed there. */
static int head_row(const tsc_figure_src_t *s, long long step, int layer, int head, char *grp, size_t cap) {
    snprintf(grp, cap, "step_%08lld/layer_%03d", step, layer);
    char p[128];
    snprintf(p, sizeof p, "%s/heads", grp);
    double *hv;
    int r;
    long long d[4];
    if (tsc_fig_read_ds(s, p, &hv, &r, d) != TSC_OK) return -1;
    int row = -1;
    for (long long i = 0; i < d[0]; i++)
        if ((int)hv[i] == head) row = (int)i;
    free(hv);
    return row;
}

/* The selected head's row of a [heads, N] array of its group: grp/name (path into p, the group
 * into grp), read whole into *v (the caller frees it), the row into *row and N into *n. Errors
 * name the figure id: the head was not analysed, the array cannot be read, its shape is not
 * [heads, N] with that row (n_axis names N in the message). */
static tsc_status_t head_vector(const tsc_figure_src_t *s, const char *id, const tsc_fig_sel_t *sel, const char *name,
                                const char *n_axis, char grp[64], char p[128], double **v, int *row, int *n) {
    *v = NULL;
    *row = head_row(s, sel->step, sel->layer, sel->head, grp, 64);
    if (*row < 0)
        return tsc_error_set(TSC_ERR_MISSING, "%s: head %d of layer %d at step %lld was not analysed (%s)", id,
                             sel->head, sel->layer, sel->step, s->analysis_path);
    snprintf(p, 128, "%s/%s", grp, name);
    int r;
    long long d[4];
    tsc_status_t st = tsc_fig_read_ds(s, p, v, &r, d);
    if (st) return tsc_error_wrap(st, "%s: ", id);
    if (r != 2 || *row >= d[0] || d[1] < 1) {
        free(*v);
        *v = NULL;
        return tsc_error_set(TSC_ERR_SHAPE, "%s:%s: expected [heads, %s] with row %d, found rank %d", s->analysis_path,
                             p, n_axis, *row, r);
    }
    *n = (int)d[1];
    return TSC_OK;
}

/* ---------------------------------------------------------------- the dump */

/* Opens the dump the analysis came from: o->dump, else summary's "dump" as given, else that name
 * inside DIR. */
/* Opens the dump a figure of source s reads its raw rows from: dump when given (--dump), else the one
 * summary.json names, else that file's name in the analysis folder. used gets the path opened; errors
 * name id (what needs the dump). */
tsc_status_t tsc_fig_open_dump(const tsc_figure_src_t *s, const char *dump, const char *id, tsc_dump_t **d, char *used,
                               size_t cap) {
    const char *named = tsc_jv_str(s->summary, "dump");
    char alt[2200];
    const char *cand[3] = {dump, named, NULL};
    if (named) {
        snprintf(alt, sizeof alt, "%s/%s", s->dir, tsc_fig_base(named));
        cand[2] = alt;
    }
    if (dump) cand[1] = cand[2] = NULL;
    for (int i = 0; i < 3; i++) {
        if (!cand[i] || access(cand[i], R_OK) != 0) continue;
        tsc_status_t st = tsc_dump_open(d, cand[i]);
        if (st != TSC_OK) return tsc_error_wrap(st, "%s needs the dump: ", id);
        snprintf(used, cap, "%s", cand[i]);
        return TSC_OK;
    }
    if (dump) return tsc_error_set(TSC_ERR_MISSING, "%s needs the dump: %s: cannot open: %s", id, dump, strerror(errno));
    return tsc_error_set(TSC_ERR_MISSING,
                         "%s needs the dump (raw q, k, v, x): summary.json names '%s', which was not found "
                         "(nor in %s); pass --dump FILE", id, named ? named : "(none)", s->dir);
}

/* Reads tensor name of one (step, layer, b, h) into a new [elems] float buffer. */
static tsc_status_t dump_slice(tsc_dump_t *d, const char *id, long long step, int layer, const char *name, int b, int h,
                               float **out) {
    *out = NULL;
    if (!tsc_dump_has_dataset(d, step, layer, name))
        return tsc_error_set(TSC_ERR_MISSING, "%s needs %s at step %lld layer %d: the dump %s has none%s", id, name, step,
                             layer, tsc_dump_path(d),
                             strcmp(name, "x") == 0 ? " (x, the input of the QKV projection, was not captured)" : "");
    uint64_t n = tsc_dump_slice_elems(d, step, layer, name);
    float *buf = malloc((size_t)(n ? n : 1) * sizeof *buf);
    if (!buf) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", id);
    tsc_status_t st = tsc_dump_read(d, step, layer, name, b, h, buf);
    if (st != TSC_OK) { free(buf); return st; }
    *out = buf;
    return TSC_OK;
}

/* ---------------------------------------------------------------- helpers */

/* A path as a caption shows it: its last component (captions sit beside the files they name; a
 * full path would show the folders of the machine that drew them). */
const char *tsc_fig_base(const char *path) {
    const char *b = path ? strrchr(path, '/') : NULL;
    return b && b[1] ? b + 1 : path ? path : "";
}

static void cap_printf(tsc_figure_info_t *info, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cap_printf(tsc_figure_info_t *info, const char *fmt, ...) {
    size_t len = strlen(info->caption);
    if (len >= sizeof info->caption - 1) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(info->caption + len, sizeof info->caption - len, fmt, ap);
    va_end(ap);
}

static void plot_defaults(tsc_plot_opts_t *po, const tsc_figure_opts_t *o, const tsc_figure_info_t *info) {
    tsc_plot_opts_init(po);
    po->width_in = info->width_in, po->height_in = info->height_in;
    po->dpi = o->dpi;
    po->font_pt = o->font_pt;
}

static void heat_defaults(tsc_heatmap_opts_t *ho, const tsc_figure_opts_t *o, const tsc_figure_info_t *info) {
    tsc_heatmap_opts_init(ho);
    ho->width_in = info->width_in, ho->height_in = info->height_in;
    ho->dpi = o->dpi;
    ho->font_pt = o->font_pt;
}

/* ---------------------------------------------------------------- where a recipe draws */

/* A recipe's target: a file (path, fmt), PNG bytes in memory (png), or a w_pt x h_pt box on cr.
 * Recipes build their series or panels, then hand them to emit_plot / emit_heat. */
struct fig_out {
    const char *path;
    tsc_image_format_t fmt;
    tsc_strbuf_t *png;
    cairo_t *cr;
    double w_pt, h_pt;
};

/* Paints an image scaled into the w x h box at the origin of cr. */
static void paint_image(cairo_t *cr, cairo_surface_t *img, double w, double h) {
    cairo_save(cr);
    int iw = cairo_image_surface_get_width(img), ih = cairo_image_surface_get_height(img);
    cairo_scale(cr, w / iw, h / ih);
    cairo_set_source_surface(cr, img, 0, 0);
    /* the image's rectangle only, its edge pixels extended: painting the whole clip with the
     * default EXTEND_NONE blends the last column with transparency, which a PDF viewer draws as a
     * thin grey rule beside the figure */
    cairo_pattern_set_extend(cairo_get_source(cr), CAIRO_EXTEND_PAD);
    cairo_rectangle(cr, 0, 0, iw, ih);
    cairo_fill(cr);
    cairo_restore(cr);
}

/* gnuplot curves: written by gnuplot and read back through its stdout (tsc_plot_render); onto a
 * cairo box as the PNG painted from memory. */
static tsc_status_t emit_plot(const fig_out_t *out, const tsc_plot_opts_t *po, const tsc_plot_series_t *ser, int n) {
    if (out->path) return tsc_plot_write(po, ser, n, out->path, out->fmt);
    if (out->png) return tsc_plot_render(po, ser, n, TSC_IMG_PNG, out->png);
    tsc_strbuf_t png;
    tsc_strbuf_init(&png);
    cairo_surface_t *img = NULL;
    tsc_status_t st = tsc_plot_render(po, ser, n, TSC_IMG_PNG, &png);
    if (!st) st = tsc_surface_png_read(png.p, png.len, "gnuplot's PNG", &img);
    if (!st) paint_image(out->cr, img, out->w_pt, out->h_pt);
    if (img) cairo_surface_destroy(img);
    tsc_strbuf_free(&png);
    return st;
}

/* cairo heatmaps: a file, the fast PNG in memory, or the image painted into the box. On a cairo
 * box the cells are rasterised at opts.dpi exactly as in the PNG (tsc_heatmap_render, in memory),
 * so the page, the PNG and the caption's pooling note agree. */
static tsc_status_t emit_heat(const fig_out_t *out, const tsc_heatmap_opts_t *ho, const tsc_heatmap_panel_t *pan,
                              int n, tsc_heatmap_info_t *hi) {
    if (out->path) return tsc_heatmap_write(ho, pan, n, out->path, out->fmt, hi);
    cairo_surface_t *img = NULL;
    tsc_status_t st = tsc_heatmap_render(ho, pan, n, &img, hi);
    if (!st && out->png) st = tsc_surface_png(img, 1, out->png);
    else if (!st) paint_image(out->cr, img, out->w_pt, out->h_pt);
    if (img) cairo_surface_destroy(img);
    return st;
}

/* Log series for figs 2, 7, 10, 13: each log's loss column (tsc_log_loss_column: val = 1 the
 * validation loss, 0 the per-iteration training loss); returns the number of series made (arrays
 * owned by bufs). */
/* The series of every log's loss column (val: validation, else training), at most TSC_FIG_MAX_LOGS; bufs
 * [2k], [2k+1] their x and y (the caller frees), nm their names. A W&B export of several runs ("<run> -
 * val/loss" columns) gives one series per run, named "<run>" (or "<log>: <run>" among several logs),
 * unless a column was chosen (FILE:COLUMN). */
static int log_series(const tsc_figure_src_t *s, int val, tsc_plot_series_t *ser, double **bufs, char (*nm)[96],
                      tsc_figure_info_t *info) {
    int k = 0;
    for (int i = 0; i < s->n_logs && k < TSC_FIG_MAX_LOGS; i++) {
        const tsc_log_t *lg = s->logs[i];
        int c0 = tsc_log_loss_column(lg, val);
        if (c0 < 0) continue;
        const char *dash = strstr(lg->cols[c0], " - ");
        int runs = lg->pick < 0 && dash; /* the export's runs: the columns ending as c0 does after "<run>" */
        for (int c = c0; c < lg->n_cols && k < TSC_FIG_MAX_LOGS; c++) {
            if (c != c0) {
                const char *d = runs ? strstr(lg->cols[c], " - ") : NULL;
                if (!d || strcmp(d, dash) != 0) continue;
            }
            double *x = malloc(lg->n_rows * sizeof *x), *y = malloc(lg->n_rows * sizeof *y);
            if (!x || !y) { free(x); free(y); continue; }
            size_t n = tsc_log_series(lg, c, x, y);
            if (!n) { free(x); free(y); continue; }
            bufs[2 * k] = x, bufs[2 * k + 1] = y;
            if (runs) {
                int rl = (int)(strstr(lg->cols[c], " - ") - lg->cols[c]);
                if (s->n_logs > 1) snprintf(nm[k], sizeof nm[k], "%.40s: %.*s", lg->name, rl > 50 ? 50 : rl, lg->cols[c]);
                else snprintf(nm[k], sizeof nm[k], "%.*s", rl > 90 ? 90 : rl, lg->cols[c]);
            } else snprintf(nm[k], sizeof nm[k], "%s", lg->name);
            memset(&ser[k], 0, sizeof ser[k]);
            ser[k].name = nm[k], ser[k].x = x, ser[k].y = y, ser[k].n = n, ser[k].style = TSC_PLOT_LINES;
            /* runs of one experiment can coincide: a dash type per run lets the curves under the last one
             * show through its gaps, so overlapping runs read as overlapping, not as missing */
            ser[k].dash = k == 0 ? 1 : 2 + (k - 1) % 4;
            cap_printf(info, "%s'%s' = column %s of %s (%zu points)", k ? "; " : "", nm[k], lg->cols[c],
                       tsc_fig_base(lg->path), n);
            k++;
        }
    }
    return k;
}

/* The error of a loss figure none of whose logs has the column it draws: each log's columns. */
static tsc_status_t no_loss_column(const tsc_figure_src_t *s, const char *id, int val) {
    char cols[1024] = "";
    size_t k = 0;
    for (int i = 0; i < s->n_logs && k < sizeof cols; i++) {
        char one[600];
        tsc_log_describe_columns(s->logs[i], one, sizeof one);
        k += (size_t)snprintf(cols + k, sizeof cols - k, "%s%s: %s", i ? "; " : "", s->logs[i]->path, one);
    }
    return tsc_error_set(TSC_ERR_MISSING,
                         "%s needs a %s column in a --log (%s); %s. Choose one with --log NAME=FILE:COLUMN", id,
                         val ? "validation-loss" : "per-iteration training-loss",
                         val ? "val_loss, val/loss, val, valid_loss or eval_loss"
                             : "iter_loss, train_loss, train/loss or loss",
                         cols);
}

/* Okabe-Ito (plot.c's default palette, colour-blind safe) and the same mixed 70% with white. */
static const char *const run_color[8] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7",
                                         "#e69f00", "#56b4e9", "#f0e442", "#000000"};

static void faint_color(const char *hex, char out[24]) {
    unsigned r, g, b;
    sscanf(hex + 1, "%2x%2x%2x", &r, &g, &b);
    snprintf(out, 24, "#%02x%02x%02x", (r * 3 + 255 * 7) / 10 & 0xff, (g * 3 + 255 * 7) / 10 & 0xff,
             (b * 3 + 255 * 7) / 10 & 0xff);
}

/* Figure 10: every logged per-iteration loss drawn faint, and its smoothing bold, per run. */
static tsc_status_t fig10(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const fig_out_t *out, tsc_figure_info_t *info) {
    tsc_plot_series_t ser[2 * TSC_FIG_MAX_LOGS];
    double *bufs[2 * TSC_FIG_MAX_LOGS] = {0}, *sm[TSC_FIG_MAX_LOGS] = {0};
    char faint[TSC_FIG_MAX_LOGS][24], names[TSC_FIG_MAX_LOGS][128];
    snprintf(info->caption, sizeof info->caption, "fig10: training loss vs step: ");
    char lnames[TSC_FIG_MAX_LOGS][96];
    int k = log_series(s, 0, ser, bufs, lnames, info);
    if (k == 0) return no_loss_column(s, "fig10", 0);
    tsc_status_t st = TSC_OK;
    double xlo = INFINITY, xhi = -INFINITY;
    for (int i = 0; i < k && st == TSC_OK; i++) {
        double h = tsc_log_half_life(ser[i].x, ser[i].n);
        if (!(sm[i] = malloc(ser[i].n * sizeof *sm[i]))) {
            st = tsc_error_set(TSC_ERR_NOMEM, "fig10: out of memory");
            break;
        }
        tsc_log_smooth(ser[i].x, ser[i].y, ser[i].n, h, sm[i]);
        /* raw first (underneath, faint), then the smoothed curves on top */
        ser[k + i] = ser[i];
        ser[k + i].y = sm[i];
        ser[k + i].color = run_color[i % 8];
        snprintf(names[i], sizeof names[i], "%.60s", ser[i].name);
        ser[k + i].dash = 1 + i % 5; /* runs told apart without colour too */
        cap_printf(info, "%s'%s' smoothed with half-life %g steps (lag about %g steps)", i ? "; " : ". ",
                   ser[i].name, h, round(h / log(2)));
        ser[k + i].name = names[i];
        faint_color(run_color[i % 8], faint[i]);
        ser[i].color = faint[i];
        ser[i].name = NULL; /* the caption says what the faint lines are; the bold ones carry the run's name */
        xlo = fmin(xlo, ser[i].x[0]), xhi = fmax(xhi, ser[i].x[ser[i].n - 1]);
    }
    if (st == TSC_OK) {
        tsc_plot_opts_t po;
        plot_defaults(&po, o, info);
        po.title = "training loss of each run", po.xlabel = "step", po.ylabel = "training loss";
        po.logy = o->log_y, po.ymin = o->ylo, po.ymax = o->yhi, po.end_labels = 1;
        if (xhi > xlo) po.xmin = xlo, po.xmax = xhi;
        po.max_points = (size_t)-1; /* every point, faint; no min-max envelope */
        cap_printf(info, ". Faint: every logged value; bold: bias-corrected EMA over steps (each point's weight "
                         "halves every half-life); %s loss axis.", o->log_y ? "logarithmic" : "linear");
        st = emit_plot(out, &po, ser, 2 * k);
    }
    for (int i = 0; i < k; i++) free(sm[i]);
    for (int i = 0; i < 2 * k; i++) free(bufs[i]);
    return st;
}

/* Figures 2 and 7: the validation loss of each log (7: of several runs, log-log). */
static tsc_status_t fig_logs(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const char *id, const fig_out_t *out,
                              tsc_figure_info_t *info) {
    if (s->n_logs == 0)
        return tsc_error_set(TSC_ERR_MISSING, "%s needs a training log: pass --log NAME=FILE[:COLUMN] (CSV/TSV with a "
                                              "step column, a TensorBoard or W&B CSV export, nanoGPT or llm.c output)", id);
    if (!strcmp(id, "fig10")) return fig10(s, o, out, info);
    int is7 = strcmp(id, "fig7") == 0;
    tsc_plot_series_t ser[TSC_FIG_MAX_LOGS];
    double *bufs[2 * TSC_FIG_MAX_LOGS] = {0};
    tsc_plot_opts_t po;
    plot_defaults(&po, o, info);
    snprintf(info->caption, sizeof info->caption, "%s: validation loss vs step: ", id);
    char lnames[TSC_FIG_MAX_LOGS][96];
    int k = log_series(s, 1, ser, bufs, lnames, info);
    tsc_status_t st = TSC_OK;
    if (k == 0)
        st = no_loss_column(s, id, 1);
    else if (is7 && k < 2)
        st = tsc_error_set(TSC_ERR_MISSING, "fig7 compares runs: it needs at least two --log with val_loss (got %d)", k);
    if (st == TSC_OK) {
        po.title = is7 ? "validation loss (log-log)" : "validation loss";
        po.xlabel = "step";
        po.ylabel = "validation loss";
        po.logy = is7 || o->log_y, po.ymin = o->ylo, po.ymax = o->yhi;
        po.end_labels = 1; /* each run named at its curve's end: no key over the curves */
        for (int i = 0; i < k; i++) ser[i].dash = 1 + i % 5;
        if (is7) {
            po.logx = 1;
            /* step 0 has no place on a log axis */
            for (int i = 0; i < k; i++) {
                size_t m = 0;
                double *x = bufs[2 * i], *y = bufs[2 * i + 1];
                for (size_t j = 0; j < ser[i].n; j++)
                    if (x[j] > 0) x[m] = x[j], y[m] = y[j], m++;
                ser[i].n = m;
            }
        }
        cap_printf(info, is7 ? ". Log-log axes; steps <= 0 omitted." : o->log_y ? "; logarithmic loss axis." : "; linear loss axis.");
        st = emit_plot(out, &po, ser, k);
    }
    for (int i = 0; i < 2 * k; i++) free(bufs[i]);
    return st;
}

static tsc_status_t fig3(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const tsc_fig_sel_t *sel, const fig_out_t *out,
                          tsc_figure_info_t *info) {
    char p[128];
    snprintf(p, sizeof p, "step_%08lld/layer_%03d/wq_head_norm", sel->step, sel->layer);
    double *v;
    int r;
    long long d[4];
    tsc_status_t st = tsc_fig_read_ds(s, p, &v, &r, d);
    if (st != TSC_OK) return tsc_error_wrap(st, "fig3 needs per-head W^Q norms of layer %d at step %lld: ", sel->layer, sel->step);
    int H = (int)d[0], finite = 0, best = 0;
    for (int h = 0; h < H; h++)
        if (isfinite(v[h])) { finite++; if (!isfinite(v[best]) || v[h] > v[best]) best = h; }
    if (!finite) {
        free(v);
        return tsc_error_set(TSC_ERR_MISSING, "fig3 needs w_q: the analysis has no W^Q norms for layer %d "
                                              "(w_q was not captured)", sel->layer);
    }
    char labels[64][12];
    const char *cats[64];
    int n = H > 64 ? 64 : H;
    for (int h = 0; h < n; h++) snprintf(labels[h], sizeof labels[h], "%d", h), cats[h] = labels[h];
    tsc_plot_opts_t po;
    plot_defaults(&po, o, info);
    char title[96];
    snprintf(title, sizeof title, "W^Q spectral norm per head, layer %d", sel->layer);
    po.title = title, po.xlabel = "head (0-based)", po.ylabel = "spectral norm";
    po.categories = cats, po.n_categories = (size_t)n;
    tsc_plot_series_t ser = {.name = NULL, .y = v, .n = (size_t)n, .style = TSC_PLOT_BARS};
    snprintf(info->caption, sizeof info->caption,
             "fig3: spectral norm of each head's rows of W^Q (power iteration), layer %d, step %lld, from %s:%s. "
             "Largest: head %d (%.4g).", sel->layer, sel->step, tsc_fig_base(s->analysis_path), p, best, v[best]);
    st = emit_plot(out, &po, &ser, 1);
    free(v);
    return st;
}

/* The n tokens with the largest |delta_lp - delta_hp| at the selection, largest first, into tok[],
 * among the rows with tie[t] (two or more maxima: where the biased rounding acts) when tie is given
 * and has n. Returns how many were found (0 without delta_diff). */
static int top_tokens(const tsc_figure_src_t *s, const tsc_fig_sel_t *sel, int T, const unsigned char *tie, int n,
                      int *tok) {
    char grp[64], p[128];
    int row = head_row(s, sel->step, sel->layer, sel->head, grp, sizeof grp), r, n_tie = 0, got = 0;
    long long d[4];
    double *v;
    snprintf(p, sizeof p, "%s/delta_diff", grp);
    if (row < 0 || tsc_fig_read_ds(s, p, &v, &r, d) != TSC_OK) return 0;
    for (int t = 0; tie && t < T; t++) n_tie += tie[t] != 0;
    if (r == 3 && d[2] == T && sel->batch < d[1] && row < d[0]) {
        const double *x = v + ((size_t)row * (size_t)d[1] + (size_t)sel->batch) * (size_t)T;
        for (; got < n; got++) {
            int best = -1;
            for (int t = 0; t < T; t++) {
                int taken = 0;
                for (int k = 0; k < got; k++) taken |= tok[k] == t;
                if (taken || !isfinite(x[t]) || (n_tie >= n && !tie[t])) continue;
                if (best < 0 || fabs(x[t]) > fabs(x[best])) best = t;
            }
            if (best < 0) break;
            tok[got] = best;
        }
    }
    free(v);
    return got;
}

/* One head of the dump, for the figures that draw its attention rows. The rows' scores are the kernel's: S as
 * the attention reference computes it under the analysis' lp (analyze/tsc_attn_map.h, the policy chosen by the
 * rule the viewer uses), so the keys where P-bar = 1 are the ties lp's kernel sees (BF16 scores tie far more
 * often than exact ones). */
typedef struct {
    tsc_dump_t *d;
    char path[1100];
    int T, D, C, H, Hkv, causal;
    long long step;
    int layer, head, batch;
    char policy[TSC_POLICY_STR_MAX], policy_source[192];
    float *k, *v;
} dump_head_t;

static void dump_head_free(dump_head_t *h) {
    free(h->k), free(h->v);
    tsc_dump_close(h->d);
}

/* The scores in words, for captions. */
static const char *score_words(const dump_head_t *dh, char *buf, size_t cap) {
    snprintf(buf, cap, "S as the attention reference computes it under %.200s (%.190s)", dh->policy, dh->policy_source);
    return buf;
}

/* Row t of the head: P-bar = exp(S - rowmax) (unnormalised) and P = softmax(S), in double from the kernel's S,
 * both [T] and 0 at masked keys; *n_max: the keys at the row maximum (P-bar = 1). */
static tsc_status_t attn_row(const dump_head_t *dh, int t, double *pbar, double *p, int *n_max) {
    tsc_attn_map_keep_t keep = {.row0 = t, .row1 = t + 1, .pool = 1, .scores = 1};
    tsc_attn_map_t m;
    tsc_status_t st = tsc_attn_map_compute_kept(dh->d, dh->step, dh->layer, dh->head, dh->batch, dh->policy, 0,
                                                &keep, &m);
    if (st == TSC_OK) {
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < dh->T; j++) mx = m.s[j] > mx ? m.s[j] : mx;
        for (int j = 0; j < dh->T; j++) sum += pbar[j] = m.s[j] == -INFINITY ? 0.0 : exp(m.s[j] - mx);
        for (int j = 0; j < dh->T; j++) p[j] = pbar[j] / sum;
        if (n_max) *n_max = m.tie_exact_count[t];
    }
    tsc_attn_map_free(&m);
    return st;
}

/* Every row's number of keys at the row maximum into exact[T] (one pass of the kernel, P barely kept). */
static tsc_status_t head_ties(const dump_head_t *dh, int32_t *exact) {
    tsc_attn_map_keep_t keep = {.row0 = 0, .row1 = 0, .pool = dh->T};
    tsc_attn_map_t m;
    tsc_status_t st = tsc_attn_map_compute_kept(dh->d, dh->step, dh->layer, dh->head, dh->batch, dh->policy, 0,
                                                &keep, &m);
    if (st == TSC_OK) memcpy(exact, m.tie_exact_count, sizeof(int32_t) * (size_t)dh->T);
    tsc_attn_map_free(&m);
    return st;
}

static tsc_status_t dump_head(const tsc_figure_src_t *s, const tsc_figure_opts_t *o, const char *id,
                              const tsc_fig_sel_t *sel, int need_v, dump_head_t *dh) {
    memset(dh, 0, sizeof *dh);
    tsc_status_t st = tsc_fig_open_dump(s, o->dump, id, &dh->d, dh->path, sizeof dh->path);
    if (st != TSC_OK) return st;
    const tsc_dump_meta_t *m = tsc_dump_meta(dh->d);
    dh->T = m->seq_len, dh->D = m->head_dim, dh->C = m->d_model, dh->H = m->n_head, dh->Hkv = m->n_kv_head;
    dh->causal = m->causal;
    dh->step = sel->step, dh->layer = sel->layer, dh->head = sel->head, dh->batch = sel->batch;
    if (sel->head >= dh->H || sel->batch >= m->batch) {
        dump_head_free(dh);
        return tsc_error_set(TSC_ERR_ARG, "%s: head %d / batch %d outside the dump %s (H %d, B %d)", id, sel->head,
                             sel->batch, dh->path, dh->H, m->batch);
    }
    int kvh = sel->head / (dh->H / dh->Hkv);
    if ((st = attn_scores_policy(s, dh->d, dh->path, NULL, dh->policy, dh->policy_source)) ||
        (st = dump_slice(dh->d, id, sel->step, sel->layer, "k", sel->batch, kvh, &dh->k)) ||
        (need_v && (st = dump_slice(dh->d, id, sel->step, sel->layer, "v", sel->batch, kvh, &dh->v)))) {
        dump_head_free(dh);
        return st;
    }
    return TSC_OK;
}

/* Rows of the head with two or more keys at the row maximum into tie[T]; their number into *n. */
static tsc_status_t tie_mask(const dump_head_t *dh, unsigned char *tie, int *n) {
    int32_t *exact = malloc(sizeof(int32_t) * (size_t)dh->T);
    tsc_status_t st = exact ? head_ties(dh, exact)
                            : tsc_error_set(TSC_ERR_NOMEM, "out of memory for the tie counts of %d rows", dh->T);
    *n = 0;
    for (int t = 0; st == TSC_OK && t < dh->T; t++) *n += tie[t] = exact[t] >= 2;
    free(exact);
    return st;
}

/* PK[t] into pk[D] and the rank-1 term (PK)[t]^T X[t] into term[D, C] (pbar, p: [T] scratch). */
static tsc_status_t rank1_term(const dump_head_t *dh, const float *x, int t, double *pbar, double *p, double *pk,
                               float *term) {
    int T = dh->T, D = dh->D, C = dh->C;
    tsc_status_t st = attn_row(dh, t, pbar, p, NULL);
    for (int e = 0; st == TSC_OK && e < D; e++) {
        double acc = 0;
        for (int j = 0; j < T; j++) acc += p[j] * dh->k[(size_t)j * D + e];
        pk[e] = acc;
        for (int c = 0; c < C; c++) term[(size_t)e * C + c] = (float)(acc * x[(size_t)t * C + c]);
    }
    return st;
}

static double cosine_f(const float *a, const float *b, size_t n) {
    double dot = 0, na = 0, nb = 0;
    for (size_t i = 0; i < n; i++) dot += (double)a[i] * b[i], na += (double)a[i] * a[i], nb += (double)b[i] * b[i];
    return dot / sqrt(na * nb);
}

static tsc_status_t fig4(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const tsc_fig_sel_t *sel, const fig_out_t *out,
                          tsc_figure_info_t *info) {
    dump_head_t dh;
    tsc_status_t st = dump_head(s, o, "fig4", sel, 0, &dh);
    if (st != TSC_OK) return st;
    float *x = NULL;
    if ((st = dump_slice(dh.d, "fig4", sel->step, sel->layer, "x", sel->batch, 0, &x)) != TSC_OK) {
        dump_head_free(&dh);
        return st;
    }
    int T = dh.T, D = dh.D, C = dh.C, tok[2], n_tie = 0;
    double *pbar = malloc((size_t)T * sizeof *pbar), *p = malloc((size_t)T * sizeof *p);
    float *term = malloc((size_t)2 * D * C * sizeof *term);
    unsigned char *tie = calloc((size_t)T, 1);
    double pk[2][1024];
    if (!pbar || !p || !term || !tie || D > 1024) {
        st = tsc_error_set(TSC_ERR_NOMEM, "fig4: out of memory (or head_dim %d > 1024)", D);
        goto out;
    }
    if ((st = tie_mask(&dh, tie, &n_tie)) != TSC_OK) goto out;
    if (top_tokens(s, sel, T, tie, 2, tok) < 2) tok[0] = T - 1, tok[1] = T / 2;
    if (sel->token >= 0 && o->token >= 0) tok[0] = sel->token;
    if (tok[1] == tok[0]) tok[1] = tok[0] > 0 ? tok[0] - 1 : 1;
    for (int i = 0; i < 2 && st == TSC_OK; i++) st = rank1_term(&dh, x, tok[i], pbar, p, pk[i], term + (size_t)i * D * C);
    if (st != TSC_OK) goto out;
    double cosv = cosine_f(term, term + (size_t)D * C, (size_t)D * C);
    /* PK[T] as a [D, 1] column and X[T] as a [1, C] row, beside their outer product [D, C] */
    float *pkx = malloc((size_t)2 * (D + C) * sizeof *pkx);
    if (!pkx) { st = tsc_error_set(TSC_ERR_NOMEM, "fig4: out of memory"); goto out; }
    for (int i = 0; i < 2; i++) {
        for (int e = 0; e < D; e++) pkx[(size_t)i * (D + C) + e] = (float)pk[i][e];
        for (int c = 0; c < C; c++) pkx[(size_t)i * (D + C) + D + c] = x[(size_t)tok[i] * C + c];
    }
    tsc_heatmap_opts_t ho;
    heat_defaults(&ho, o, info);
    ho.cmap = TSC_CMAP_COOLWARM, ho.norm_kind = TSC_NORM_SYMMETRIC;
    ho.per_panel_scale = 1, ho.grid_cols = 3;
    char title[128], t[6][48];
    snprintf(title, sizeof title, "layer %d head %d, step %lld: cosine of the two terms %.4f", sel->layer, sel->head,
             sel->step, cosv);
    ho.title = title;
    tsc_heatmap_panel_t pan[6];
    memset(pan, 0, sizeof pan);
    for (int i = 0; i < 2; i++) {
        snprintf(t[3 * i], sizeof t[0], "PK[%d]", tok[i]);
        snprintf(t[3 * i + 1], sizeof t[0], "X[%d]", tok[i]);
        snprintf(t[3 * i + 2], sizeof t[0], "(PK)^T X, token %d", tok[i]);
        pan[3 * i] = (tsc_heatmap_panel_t){.data = pkx + (size_t)i * (D + C), .rows = D, .cols = 1, .title = t[3 * i],
                                           .ylabel = "head feature"};
        pan[3 * i + 1] = (tsc_heatmap_panel_t){.data = pkx + (size_t)i * (D + C) + D, .rows = 1, .cols = C,
                                               .title = t[3 * i + 1], .xlabel = "input channel"};
        pan[3 * i + 2] = (tsc_heatmap_panel_t){.data = term + (size_t)i * D * C, .rows = D, .cols = C,
                                               .title = t[3 * i + 2], .xlabel = "input channel"};
    }
    tsc_heatmap_info_t hi[6];
    char sw[480];
    snprintf(info->caption, sizeof info->caption,
             "fig4: PK[T] (head features), X[T] (input channels) and their outer product (PK)[T]^T X[T], the rank-1 "
             "term of the W^Q gradient (eq. 2), layer %d head %d step %lld batch %d, at tokens %d and %d (the two "
             "largest |delta_lp - delta_hp| in %.300s among the %d rows with two or more maxima%s); P = softmax(S) "
             "in double, %s, from q, k, x of %.300s. Each panel has its own symmetric colour scale. "
             "Cosine similarity of the two terms: %.6f.", sel->layer, sel->head, sel->step, sel->batch, tok[0], tok[1],
             tsc_fig_base(s->analysis_path), n_tie, n_tie >= 2 ? "" : ": too few, so among all rows",
             score_words(&dh, sw, sizeof sw), tsc_fig_base(dh.path), cosv);
    st = emit_heat(out, &ho, pan, 6, hi);
    free(pkx);
    if (st == TSC_OK && hi[2].note[0]) cap_printf(info, " Note: %s.", hi[2].note);
out:
    free(pbar), free(p), free(term), free(x), free(tie);
    dump_head_free(&dh);
    return st;
}

/* Reads a [S, L, nh] cumulative dataset and the axes; the column of (layer, head) or -1. */
typedef struct {
    double *v, *steps, *layers, *heads;
    long long S, L, NH;
} cum_t;

static void cum_free(cum_t *c) { free(c->v), free(c->steps), free(c->layers), free(c->heads); }

static tsc_status_t cum_read(const tsc_figure_src_t *s, const char *name, cum_t *c) {
    memset(c, 0, sizeof *c);
    char p[128];
    int r;
    long long d[4];
    tsc_status_t st;
    snprintf(p, sizeof p, "cumulative/%s", name);
    if ((st = tsc_fig_read_ds(s, p, &c->v, &r, d))) return st;
    c->S = d[0], c->L = r > 1 ? d[1] : 1, c->NH = r > 2 ? d[2] : 1;
    long long ds[4], dl[4], dh[4];
    int rs, rl, rh;
    if ((st = tsc_fig_read_ds(s, "cumulative/steps", &c->steps, &rs, ds)) ||
        (st = tsc_fig_read_ds(s, "cumulative/layers", &c->layers, &rl, dl)) ||
        (st = tsc_fig_read_ds(s, "cumulative/heads", &c->heads, &rh, dh))) {
        cum_free(c);
        return st;
    }
    if (r != 3 || rs != 1 || rl != 1 || rh != 1 || ds[0] != c->S || dl[0] != c->L || dh[0] != c->NH) {
        cum_free(c);
        return tsc_error_set(TSC_ERR_SHAPE, "%s:%s: expected [steps, layers, heads] matching cumulative/steps, layers, "
                                            "heads", s->analysis_path, p);
    }
    return TSC_OK;
}

/* Figures of a quantity "over steps" need at least two analysed steps to show anything. */
static tsc_status_t need_steps(const cum_t *c, const char *id, const tsc_figure_src_t *s) {
    if (c->S >= 2) return TSC_OK;
    return tsc_error_set(TSC_ERR_MISSING, "%s plots a quantity over steps: it needs at least two analysed steps (%s has "
                                          "%lld; capture and analyse more steps)", id, s->analysis_path, c->S);
}

static int cum_layer(const cum_t *c, int layer) {
    for (long long i = 0; i < c->L; i++)
        if ((int)c->layers[i] == layer) return (int)i;
    return -1;
}

static tsc_status_t fig5a(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const tsc_fig_sel_t *sel, const fig_out_t *out,
                           tsc_figure_info_t *info) {
    cum_t c;
    tsc_status_t st = cum_read(s, "delta_cumsum", &c);
    if (st) return tsc_error_wrap(st, "fig5a needs the cumulative delta sums: ");
    if ((st = need_steps(&c, "fig5a", s))) { cum_free(&c); return st; }
    int li = cum_layer(&c, sel->layer);
    if (li < 0) {
        cum_free(&c);
        return tsc_error_set(TSC_ERR_MISSING, "fig5a: layer %d was not analysed (%s)", sel->layer, s->analysis_path);
    }
    int nh = (int)(c.NH > 16 ? 16 : c.NH);
    tsc_plot_series_t ser[16];
    double *ys = malloc((size_t)nh * (size_t)c.S * sizeof *ys);
    char names[16][24];
    if (!ys) { cum_free(&c); return tsc_error_set(TSC_ERR_NOMEM, "fig5a: out of memory"); }
    for (int h = 0; h < nh; h++) {
        for (long long t = 0; t < c.S; t++) ys[h * c.S + t] = c.v[(t * c.L + li) * c.NH + h];
        snprintf(names[h], sizeof names[h], "head %d%s", (int)c.heads[h], (int)c.heads[h] == sel->head ? " *" : "");
        ser[h] = (tsc_plot_series_t){.name = names[h], .x = c.steps, .y = ys + h * c.S, .n = (size_t)c.S,
                                     .style = TSC_PLOT_LINESPOINTS};
    }
    tsc_plot_opts_t po;
    plot_defaults(&po, o, info);
    char title[96];
    snprintf(title, sizeof title, "cumulative sum_T(delta_lp - delta_hp), layer %d", sel->layer);
    po.title = title, po.xlabel = "step", po.ylabel = "cumulative sum";
    snprintf(info->caption, sizeof info->caption,
             "fig5a: running sum over the analysed steps of sum_T(delta_lp - delta_hp) per head of layer %d (* the "
             "selected head %d), from %s:cumulative/delta_cumsum. A positive, rising curve is the biased coefficient "
             "of docs/MECHANISM.md section 4.", sel->layer, sel->head, tsc_fig_base(s->analysis_path));
    st = emit_plot(out, &po, ser, nh);
    free(ys);
    cum_free(&c);
    return st;
}

static tsc_status_t fig5b(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const tsc_fig_sel_t *sel, const fig_out_t *out,
                           tsc_figure_info_t *info) {
    tsc_dump_t *d;
    char used[1100];
    tsc_status_t st = tsc_fig_open_dump(s, o->dump, "fig5b", &d, used, sizeof used);
    if (st) return st;
    const tsc_dump_meta_t *m = tsc_dump_meta(d);
    int T = m->seq_len, D = m->head_dim, t = sel->token >= 0 ? sel->token : T - 1;
    float *ov = NULL, *dov = NULL;
    if (t >= T) { tsc_dump_close(d); return tsc_error_set(TSC_ERR_ARG, "fig5b: token %d outside T = %d", t, T); }
    if ((st = dump_slice(d, "fig5b", sel->step, sel->layer, "o", sel->batch, sel->head, &ov)) ||
        (st = dump_slice(d, "fig5b", sel->step, sel->layer, "do", sel->batch, sel->head, &dov))) {
        free(ov);
        tsc_dump_close(d);
        return st;
    }
    double *y1 = malloc((size_t)D * sizeof *y1), *y2 = malloc((size_t)D * sizeof *y2);
    if (!y1 || !y2) st = tsc_error_set(TSC_ERR_NOMEM, "fig5b: out of memory");
    else {
        for (int e = 0; e < D; e++) y1[e] = ov[(size_t)t * D + e], y2[e] = dov[(size_t)t * D + e];
        tsc_plot_series_t ser[2] = {{.name = "O[T,:]", .y = y1, .n = (size_t)D, .style = TSC_PLOT_LINESPOINTS},
                                    {.name = "dO[T,:] (right axis)", .y = y2, .n = (size_t)D,
                                     .style = TSC_PLOT_LINESPOINTS, .y2 = 1}};
        tsc_plot_opts_t po;
        plot_defaults(&po, o, info);
        char title[96];
        snprintf(title, sizeof title, "O and dO at token %d, layer %d head %d", t, sel->layer, sel->head);
        po.title = title, po.xlabel = "feature", po.ylabel = "O", po.y2label = "dO";
        snprintf(info->caption, sizeof info->caption,
                 "fig5b: O[T,:] (left axis) and dO[T,:] (right axis) over the features at token T = %d, layer %d head "
                 "%d step %lld batch %d, as stored in the dump %s. Features where both are negative carry a positive "
                 "delta_lp - delta_hp when O_lp < O_hp.", t, sel->layer, sel->head, sel->step, sel->batch, tsc_fig_base(used));
        st = emit_plot(out, &po, ser, 2);
    }
    free(y1), free(y2), free(ov), free(dov);
    tsc_dump_close(d);
    return st;
}

/* Figure 5c: the mean of O_lp - O_hp per feature in value units (as the paper plots it), or with
 * o->ulp in ULPs of each element. A ULP mean weighs the many near-zero outputs (tiny ULPs) far above
 * the large ones where the biased rounding acts, so value units are the default. */
static tsc_status_t fig5c(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const tsc_fig_sel_t *sel, const fig_out_t *out,
                           tsc_figure_info_t *info) {
    char grp[64], p[128];
    double *v;
    int row, D, worst = 0;
    tsc_status_t st = head_vector(s, "fig5c", sel, o->ulp ? "o_feature_bias_ulp" : "o_feature_bias", "D", grp, p, &v,
                                  &row, &D);
    if (st) return st;
    const double *y = v + (size_t)row * D;
    for (int e = 0; e < D; e++)
        if (fabs(y[e]) > fabs(y[worst]) || !isfinite(y[worst])) worst = e;
    tsc_plot_series_t ser = {.name = NULL, .y = y, .n = (size_t)D, .style = TSC_PLOT_IMPULSES};
    tsc_plot_opts_t po;
    plot_defaults(&po, o, info);
    char title[96];
    snprintf(title, sizeof title, "mean O_lp - O_hp per feature, layer %d head %d", sel->layer, sel->head);
    po.title = title, po.xlabel = "feature", po.ylabel = o->ulp ? "mean error [ULP]" : "mean error (value units)";
    const tsc_jv_t *rec = tsc_fig_head_record(s, sel->step, sel->layer, sel->head);
    snprintf(info->caption, sizeof info->caption,
             "fig5c: mean of O_lp - O_hp per feature %s over the %g rows of layer %d head %d at step %lld "
             "(lp %s, hp %s), from %s:%s. Largest |bias|: feature %d, %.3g%s.",
             o->ulp ? "in ULPs of each element (--ulp)" : "in value units", tsc_jv_num(rec, "rows"), sel->layer,
             sel->head, sel->step, tsc_jv_str(s->summary, "lp"), tsc_jv_str(s->summary, "hp"),
             tsc_fig_base(s->analysis_path), p, worst, y[worst], o->ulp ? " ULP" : "");
    info->n_marks = 1, info->marks[0] = worst;
    st = emit_plot(out, &po, &ser, 1);
    free(v);
    return st;
}

static tsc_status_t fig6a(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const tsc_fig_sel_t *sel, const fig_out_t *out,
                           tsc_figure_info_t *info) {
    dump_head_t dh;
    tsc_status_t st = dump_head(s, o, "fig6a", sel, 1, &dh);
    if (st) return st;
    int T = dh.T, D = dh.D, t = sel->token >= 0 && sel->token < T ? sel->token : T - 1;
    int f = sel->feature >= 0 && sel->feature < D ? sel->feature : 0;
    double *pbar = malloc((size_t)T * sizeof *pbar), *p = malloc((size_t)T * sizeof *p),
           *vv = malloc((size_t)T * sizeof *vv);
    if (!pbar || !p || !vv) st = tsc_error_set(TSC_ERR_NOMEM, "fig6a: out of memory");
    else {
        int ones = 0;
        st = attn_row(&dh, t, pbar, p, &ones);
        for (int j = 0; j < T; j++) vv[j] = dh.v[(size_t)j * D + f];
        tsc_plot_series_t ser[2] = {{.name = "V[:, I]", .y = vv, .n = (size_t)T, .style = TSC_PLOT_LINES},
                                    {.name = "P-bar[T, :] (right axis)", .y = pbar, .n = (size_t)(dh.causal ? t + 1 : T),
                                     .style = TSC_PLOT_IMPULSES, .y2 = 1}};
        tsc_plot_opts_t po;
        plot_defaults(&po, o, info);
        char title[96], sw[480];
        snprintf(title, sizeof title, "V[:, %d] and P-bar[%d, :], layer %d head %d", f, t, sel->layer, sel->head);
        po.title = title, po.xlabel = "token (key)", po.ylabel = "V", po.y2label = "P-bar";
        snprintf(info->caption, sizeof info->caption,
                 "fig6a: V[:, I] (left) and the unnormalised P-bar[T, :] = exp(S - rowmax) in double (right) "
                 "over the keys, %s, at T = %d, I = %d, layer %d head %d step %lld batch %d, from q, k, v of %s. "
                 "%d keys have P-bar = 1 (ties at the row maximum).", score_words(&dh, sw, sizeof sw), t, f,
                 sel->layer, sel->head, sel->step, sel->batch, tsc_fig_base(dh.path), ones);
        if (st == TSC_OK) st = emit_plot(out, &po, ser, 2);
    }
    free(pbar), free(p), free(vv);
    dump_head_free(&dh);
    return st;
}

/* Keys where the probe row (batch pb, query t) has P-bar = 1 (ties at the row maximum), from q, k of
 * the dump; into one[T] (1 at a tie key). Returns the number found, -1 without the dump. */
static int probe_tie_keys(const tsc_figure_src_t *s, const tsc_figure_opts_t *o, const tsc_fig_sel_t *sel, int pb,
                          int t, int T, unsigned char *one) {
    tsc_fig_sel_t ps = *sel;
    ps.batch = pb;
    dump_head_t dh;
    if (dump_head(s, o, "fig6b", &ps, 0, &dh) != TSC_OK) { tsc_error_clear(); return -1; }
    int n = -1;
    double *pbar = malloc((size_t)T * sizeof *pbar), *p = malloc((size_t)T * sizeof *p);
    if (pbar && p && dh.T == T && t < T && attn_row(&dh, t, pbar, p, NULL) == TSC_OK) {
        n = 0;
        for (int j = 0; j < T; j++) n += (one[j] = pbar[j] == 1.0);
    }
    tsc_error_clear(); /* without the row, fig6b/6c draw the curve without the P-bar = 1 marks */
    free(pbar), free(p);
    dump_head_free(&dh);
    return n;
}

/* The most negative jump y[j] - y[j-1] of the curve (j >= 1), only at keys with one[j] when one is
 * given; -1 when there is no negative jump there. */
static int neg_jump(const double *y, int n, const unsigned char *one) {
    int jump = -1;
    for (int j = 1; j < n; j++) {
        if ((one && !one[j]) || !isfinite(y[j]) || !isfinite(y[j - 1]) || !(y[j] < y[j - 1])) continue;
        if (jump < 0 || y[j] - y[j - 1] < y[jump] - y[jump - 1]) jump = j;
    }
    return jump;
}

/* Figures 6b and 6c: O-bar_error(t) at the analysis' automatic probe (an_obar_curve: the rounding
 * error of the P-bar V accumulation alone), and a zoom onto its largest negative jump at a key where
 * P-bar = 1 (the event docs/MECHANISM.md section 5 describes). Without such a jump 6c is not drawn. */
static tsc_status_t fig6bc(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const tsc_fig_sel_t *sel, int zoom,
                           const fig_out_t *out, tsc_figure_info_t *info) {
    const char *id = zoom ? "fig6c" : "fig6b";
    char grp[64], p[128];
    double *v, *pr = NULL;
    int row, r, T;
    tsc_status_t st = head_vector(s, id, sel, "obar_err_auto", "T", grp, p, &v, &row, &T);
    if (st) return st;
    char pp[128];
    snprintf(pp, sizeof pp, "%s/probe_auto", grp);
    long long pd[4];
    int probe[3] = {-1, -1, -1};
    if (tsc_fig_read_ds(s, pp, &pr, &r, pd) == TSC_OK) {
        if (r == 2 && pd[1] == 3 && row < pd[0])
            for (int k = 0; k < 3; k++) probe[k] = isfinite(pr[(size_t)row * 3 + k]) ? (int)pr[(size_t)row * 3 + k] : -1;
        free(pr);
    }
    double *y = v + (size_t)row * T, *x = malloc((size_t)T * sizeof *x);
    unsigned char *one = calloc((size_t)T, 1);
    if (!x || !one) { free(v), free(x), free(one); return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", id); }
    int n = 0;
    for (int t = 0; t < T; t++) {
        x[t] = t;
        if (isfinite(y[t])) n = t + 1;
    }
    if (probe[1] < 0 || n == 0) {
        free(v), free(x), free(one);
        return tsc_error_set(TSC_ERR_MISSING, "%s: the analysis found no probe (no flagged feature or error) for layer "
                                              "%d head %d at step %lld", id, sel->layer, sel->head, sel->step);
    }
    int n_one = probe_tie_keys(s, o, sel, probe[0], probe[1], T, one);
    int jump = neg_jump(y, n, n_one >= 0 ? one : NULL);
    if (zoom && jump < 0) {
        free(v), free(x), free(one);
        return tsc_error_set(TSC_ERR_MISSING, "fig6c zooms onto a negative jump of O-bar_error at a key where P-bar = 1: "
                                              "%s (layer %d head %d step %lld, probe T = %d I = %d)", n_one < 0 ?
                             "the curve has no negative jump" : n_one == 0 ? "the probe row has no key with P-bar = 1" :
                             "none of its keys with P-bar = 1 has one", sel->layer, sel->head, sel->step, probe[1], probe[2]);
    }
    int lo = 0, hi = n;
    if (zoom) {
        lo = jump - 6 < 0 ? 0 : jump - 6;
        hi = jump + 7 > n ? n : jump + 7;
        info->n_marks = 3, info->marks[0] = lo, info->marks[1] = hi - 1, info->marks[2] = jump;
    } else if (jump > 0) {
        info->n_marks = 1, info->marks[0] = jump;
    }
    tsc_plot_series_t ser = {.name = NULL, .x = x + lo, .y = y + lo, .n = (size_t)(hi - lo),
                             .style = zoom ? TSC_PLOT_LINESPOINTS : TSC_PLOT_STEPS};
    tsc_plot_opts_t po;
    plot_defaults(&po, o, info);
    char title[128];
    snprintf(title, sizeof title, "%sO-bar error(t), T=%d I=%d, L%d H%d", zoom ? "zoom: " : "", probe[1], probe[2],
             sel->layer, sel->head);
    po.title = title, po.xlabel = "t (keys summed so far)", po.ylabel = "O-bar_lp - O-bar_exact";
    snprintf(info->caption, sizeof info->caption,
             "%s: O-bar_error(t) = lp prefix sum of P-bar[T,t'] V[t',I] (t' <= t, FP32, rounded to the output format) "
             "minus the same terms summed exactly (in double), at the analysis' automatic probe (batch %d, T = %d, "
             "I = %d), layer %d head %d step %lld, from %s:%s. Both sums take lp's own P-bar and V, so the curve is the "
             "rounding error of the P-bar V accumulation alone; score rounding (which changes P-bar itself and would "
             "add a smooth offset) is not included.", id, probe[0], probe[1], probe[2], sel->layer, sel->head, sel->step,
             tsc_fig_base(s->analysis_path), p);
    const char *where = n_one >= 0 ? "a key where P-bar = 1" : "(keys with P-bar = 1 unknown: no dump)";
    if (zoom)
        cap_printf(info, " Shown: t = %d..%d around the largest negative jump at %s: t = %d, %.3g.", lo, hi - 1, where,
                   jump, y[jump] - y[jump - 1]);
    else if (jump > 0)
        cap_printf(info, " Largest negative jump at %s: t = %d, %.3g.", where, jump, y[jump] - y[jump - 1]);
    else
        cap_printf(info, " The curve has no negative jump%s.", n_one >= 0 ? " at a key where P-bar = 1" : "");
    st = emit_plot(out, &po, &ser, 1);
    free(v), free(x), free(one);
    return st;
}

/* Figure 8's term panels: the rank-1 terms (PK)[T]^T X[T] of the three tied rows with the largest
 * |delta_lp - delta_hp| (figure 4's tokens and one more), from the dump; *terms [3, D, C] (caller
 * frees), their tokens and pairwise cosines cs[3] (a-b, a-c, b-c). Returns the number of terms (0
 * without the dump or x: the figure then shows the cosine matrix alone). */
static int fig8_terms(const tsc_figure_src_t *s, const tsc_figure_opts_t *o, const tsc_fig_sel_t *sel, float **terms,
                      int tok[3], double cs[3], int *D, int *C) {
    dump_head_t dh;
    float *x = NULL;
    *terms = NULL;
    if (dump_head(s, o, "fig8", sel, 0, &dh) != TSC_OK) { tsc_error_clear(); return 0; }
    int T = dh.T, n = 0, n_tie = 0;
    *D = dh.D, *C = dh.C;
    double *pbar = malloc((size_t)T * sizeof *pbar), *p = malloc((size_t)T * sizeof *p), pk[1024];
    unsigned char *tie = calloc((size_t)T, 1);
    float *tm = malloc((size_t)3 * dh.D * dh.C * sizeof *tm);
    if (pbar && p && tie && tm && dh.D <= 1024 &&
        dump_slice(dh.d, "fig8", sel->step, sel->layer, "x", sel->batch, 0, &x) == TSC_OK &&
        tie_mask(&dh, tie, &n_tie) == TSC_OK && n_tie >= 3 && top_tokens(s, sel, T, tie, 3, tok) == 3) {
        size_t DC = (size_t)dh.D * dh.C;
        tsc_status_t st = TSC_OK;
        for (int i = 0; i < 3 && st == TSC_OK; i++) st = rank1_term(&dh, x, tok[i], pbar, p, pk, tm + i * DC);
        if (st == TSC_OK) {
            cs[0] = cosine_f(tm, tm + DC, DC), cs[1] = cosine_f(tm, tm + 2 * DC, DC);
            cs[2] = cosine_f(tm + DC, tm + 2 * DC, DC);
            *terms = tm, tm = NULL, n = 3;
        }
    }
    tsc_error_clear();
    free(pbar), free(p), free(tie), free(tm), free(x);
    dump_head_free(&dh);
    return n;
}

/* Figure 8 (the paper's Llama figure): the rank-1 terms of three tied rows with their pairwise
 * cosines, beside the cosine matrix of all the analysis' tied-row terms (analysis.h5 rank1_cos,
 * whose mean is the number figure 1 shows at link 3). */
static tsc_status_t fig8(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const tsc_fig_sel_t *sel, const fig_out_t *out,
                          tsc_figure_info_t *info) {
    char grp[64], p[128];
    int row = head_row(s, sel->step, sel->layer, sel->head, grp, sizeof grp);
    snprintf(p, sizeof p, "%s/rank1_cos", grp);
    double *v;
    int r;
    long long d[4];
    tsc_status_t st = row < 0 ? TSC_ERR_MISSING : tsc_fig_read_ds(s, p, &v, &r, d);
    if (st)
        return tsc_error_set(TSC_ERR_MISSING, "fig8 needs x: %s has no rank-1 cosines for layer %d head %d at step %lld "
                                              "(x, the input of the QKV projection, was not captured)",
                             s->analysis_path, sel->layer, sel->head, sel->step);
    if (r != 3 || row >= d[0] || d[1] != d[2] || d[1] < 1) {
        free(v);
        return tsc_error_set(TSC_ERR_SHAPE, "%s:%s: expected [heads, N, N] with row %d, found rank %d", s->analysis_path, p,
                             row, r);
    }
    int N = (int)d[1], tok[3], D = 0, C = 0;
    double cs[3] = {NAN, NAN, NAN}, sum = 0;
    long cnt = 0;
    float *m = malloc((size_t)N * N * sizeof *m), *terms = NULL;
    if (!m) { free(v); return tsc_error_set(TSC_ERR_NOMEM, "fig8: out of memory"); }
    for (int i = 0; i < N * N; i++) {
        m[i] = (float)v[(size_t)row * N * N + i];
        if (i / N != i % N && isfinite(m[i])) sum += m[i], cnt++;
    }
    int nt = fig8_terms(s, o, sel, &terms, tok, cs, &D, &C);
    tsc_heatmap_opts_t ho;
    heat_defaults(&ho, o, info);
    ho.cmap = TSC_CMAP_COOLWARM, ho.norm_kind = TSC_NORM_SYMMETRIC, ho.per_panel_scale = 1, ho.grid_cols = 2;
    char title[160], mt[64], tt[3][64];
    snprintf(title, sizeof title, "(PK)[T]^T X[T] of tied rows, L%d H%d step %lld: cosines %.4f, %.4f, %.4f", sel->layer,
             sel->head, sel->step, cs[0], cs[1], cs[2]);
    snprintf(mt, sizeof mt, "cosines of %d terms: mean %.3f", N, cnt ? sum / cnt : NAN);
    tsc_heatmap_panel_t pan[4];
    memset(pan, 0, sizeof pan);
    for (int i = 0; i < nt; i++) {
        snprintf(tt[i], sizeof tt[i], "token %d", tok[i]);
        pan[i] = (tsc_heatmap_panel_t){.data = terms + (size_t)i * D * C, .rows = D, .cols = C, .title = tt[i],
                                       .xlabel = "input channel", .ylabel = "head feature"};
    }
    pan[nt] = (tsc_heatmap_panel_t){.data = m, .rows = N, .cols = N, .title = mt, .xlabel = "term (tied rows first)",
                                    .ylabel = "term"};
    ho.title = nt ? title : NULL;
    if (!nt) {
        ho.fixed_norm = 1, ho.per_panel_scale = 0, ho.grid_cols = 1;
        TSC_INVARIANT(tsc_norm_init(&ho.norm, TSC_NORM_SYMMETRIC, -1, 1) == TSC_OK);
    }
    snprintf(info->caption, sizeof info->caption,
             "fig8: %s(%c) cosine similarity between the rank-1 terms (PK)[T]^T X[T] of %d tokens: the rows with two or "
             "more maxima (where the biased rounding acts) with the largest |delta_lp - delta_hp|, then other rows if "
             "there are fewer; layer %d head %d step %lld, from %s:%s. Mean off-diagonal cosine %.4f (the number figure "
             "1 shows at link 3).", nt ? "(a-c) the terms of the three tied rows with the largest |delta_lp - delta_hp|, "
             "from q, k, x of the dump, each with its own symmetric colour scale; pairwise cosines a-b, a-c, b-c in the "
             "title. " : "", nt ? 'd' : 'a', N, sel->layer, sel->head, sel->step, tsc_fig_base(s->analysis_path), p,
             cnt ? sum / cnt : NAN);
    tsc_heatmap_info_t hi[4];
    st = emit_heat(out, &ho, pan, nt + 1, hi);
    if (st == TSC_OK && nt && hi[0].note[0]) cap_printf(info, " Note: %s.", hi[0].note);
    free(v), free(m), free(terms);
    return st;
}

static tsc_status_t fig9(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const tsc_fig_sel_t *sel, const fig_out_t *out,
                          tsc_figure_info_t *info) {
    dump_head_t dh;
    tsc_status_t st = dump_head(s, o, "fig9", sel, 0, &dh);
    if (st) return st;
    int T = dh.T, rows[3], nr = 0;
    double *pbar = malloc((size_t)T * sizeof *pbar), *ps = malloc((size_t)3 * T * sizeof *ps);
    int32_t *exact = malloc((size_t)T * sizeof *exact);
    if (!pbar || !ps || !exact) { st = tsc_error_set(TSC_ERR_NOMEM, "fig9: out of memory"); goto out; }
    if ((st = head_ties(&dh, exact)) != TSC_OK) goto out;
    for (int t = T - 1; t >= 1 && nr < 3; t--)
        if (exact[t] >= 2) rows[nr++] = t;
    for (int i = 0; i < nr && st == TSC_OK; i++) st = attn_row(&dh, rows[i], pbar, ps + (size_t)i * T, NULL);
    if (st != TSC_OK) goto out;
    if (!nr) {
        st = tsc_error_set(TSC_ERR_MISSING, "fig9: no attention row of layer %d head %d (step %lld, batch %d) has two "
                                            "maxima in %s", sel->layer, sel->head, sel->step, sel->batch, dh.path);
        goto out;
    }
    tsc_plot_series_t ser[3];
    char names[3][32];
    for (int i = 0; i < nr; i++) {
        snprintf(names[i], sizeof names[i], "row T = %d", rows[i]);
        /* a log axis has no place for the masked zeros: keys past T are NaN (gaps) */
        for (int j = 0; j < T; j++)
            if (!(ps[(size_t)i * T + j] >= 1e-300)) ps[(size_t)i * T + j] = NAN; /* 0 and denormals: gaps */
        /* rows of one head often coincide: solid, dashed and dotted keep each one visible */
        /* markers only where a value stands alone between gaps (a line cannot show it); else a line */
        const double *y = ps + (size_t)i * T;
        size_t n = (size_t)(dh.causal ? rows[i] + 1 : T);
        int alone = 0;
        for (size_t j = 0; j < n && !alone; j++)
            alone = !isnan(y[j]) && (j == 0 || isnan(y[j - 1])) && (j + 1 == n || isnan(y[j + 1]));
        ser[i] = (tsc_plot_series_t){.name = names[i], .y = y, .n = n,
                                     .style = alone ? TSC_PLOT_LINESPOINTS : TSC_PLOT_LINES, .dash = 1 + i};
    }
    tsc_plot_opts_t po;
    plot_defaults(&po, o, info);
    char title[96];
    snprintf(title, sizeof title, "attention rows with two maxima, layer %d head %d", sel->layer, sel->head);
    po.title = title, po.xlabel = "key", po.ylabel = "P[T, key]", po.logy = 1;
    /* a fixed range: with a sharp maximum every other key can underflow, leaving one value per row */
    double pmin = 1;
    for (int i = 0; i < nr; i++)
        for (size_t j = 0; j < ser[i].n; j++)
            if (ser[i].y[j] > 0 && ser[i].y[j] < pmin) pmin = ser[i].y[j];
    po.ymin = pmin / 2, po.ymax = 1.5;
    char sw[480];
    snprintf(info->caption, sizeof info->caption,
             "fig9: attention probabilities P[T, :] (softmax of S in double, %s) of the last %d rows with two or "
             "more keys at the row maximum, layer %d head %d step %lld batch %d, from q, k of %s. Log y axis (from "
             "half the smallest probability drawn to 1; keys whose probability underflows to 0 are gaps); solid, "
             "dashed and dotted lines, drawn in that order, so a row that coincides with another stays visible.",
             score_words(&dh, sw, sizeof sw), nr, sel->layer, sel->head, sel->step, sel->batch, tsc_fig_base(dh.path));
    st = emit_plot(out, &po, ser, nr);
out:
    free(pbar), free(ps), free(exact);
    dump_head_free(&dh);
    return st;
}

static tsc_status_t fig11(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const fig_out_t *out,
                          tsc_figure_info_t *info) {
    double *v, *steps = NULL, *layers = NULL;
    int r, rs, rl;
    long long d[4], ds[4], dl[4];
    tsc_status_t st = tsc_fig_read_ds(s, "cumulative/w_norm", &v, &r, d);
    if (st) return tsc_error_wrap(st, "fig11 needs weight spectral norms: ");
    if ((st = tsc_fig_read_ds(s, "cumulative/steps", &steps, &rs, ds)) ||
        (st = tsc_fig_read_ds(s, "cumulative/layers", &layers, &rl, dl))) {
        free(v), free(steps);
        return st;
    }
    if (r != 3 || rs != 1 || rl != 1 || ds[0] != d[0] || dl[0] != d[1]) {
        free(v), free(steps), free(layers);
        return tsc_error_set(TSC_ERR_SHAPE, "%s:cumulative/w_norm: expected [steps, layers, 4] matching cumulative/steps "
                                            "and cumulative/layers", s->analysis_path);
    }
    long long S = d[0], L = d[1], M = d[2];
    if (S < 2) {
        free(v), free(steps), free(layers);
        return tsc_error_set(TSC_ERR_MISSING, "fig11 plots norms over steps: it needs at least two analysed steps (%s "
                                              "has %lld; capture and analyse more steps)", s->analysis_path, S);
    }
    int rows = (int)(L * M), finite = 0;
    float *m = malloc((size_t)rows * (size_t)S * sizeof *m);
    char (*lab)[24] = malloc((size_t)rows * sizeof *lab);
    const char **labp = malloc((size_t)rows * sizeof *labp);
    char (*xl)[24] = malloc((size_t)S * sizeof *xl);
    const char **xlp = malloc((size_t)S * sizeof *xlp);
    static const char *wn[4] = {"w_q", "w_k", "w_v", "w_o"};
    if (!m || !lab || !labp || !xl || !xlp) { st = tsc_error_set(TSC_ERR_NOMEM, "fig11: out of memory"); goto out; }
    for (int li = 0; li < L; li++)
        for (int w = 0; w < M; w++) {
            int row = li * (int)M + w;
            snprintf(lab[row], sizeof lab[row], "L%d %s", (int)layers[li], w < 4 ? wn[w] : "?");
            labp[row] = lab[row];
            for (long long t = 0; t < S; t++) {
                m[(size_t)row * S + t] = (float)v[(t * L + li) * M + w];
                finite += isfinite(m[(size_t)row * S + t]);
            }
        }
    for (long long t = 0; t < S; t++) snprintf(xl[t], sizeof xl[t], "%lld", (long long)steps[t]), xlp[t] = xl[t];
    if (!finite) {
        st = tsc_error_set(TSC_ERR_MISSING, "fig11 needs captured weights: every spectral norm in %s is NaN "
                                            "(w_q, w_k, w_v, w_o were not captured)", s->analysis_path);
        goto out;
    }
    tsc_heatmap_opts_t ho;
    heat_defaults(&ho, o, info);
    ho.cmap = TSC_CMAP_VIRIDIS;
    ho.cbar_label = "spectral norm";
    tsc_heatmap_panel_t pan = {.data = m, .rows = rows, .cols = (int)S, .title = "spectral norm of every weight",
                               .xlabel = "step", .ylabel = "layer, matrix", .xtick_labels = xlp, .ytick_labels = labp};
    snprintf(info->caption, sizeof info->caption,
             "fig11: spectral norm (power iteration) of every captured weight matrix, one row per (layer, matrix), one "
             "column per analysed step, from %s:cumulative/w_norm. NaN cells (magenta) are weights not captured.",
             tsc_fig_base(s->analysis_path));
    tsc_heatmap_info_t hi;
    st = emit_heat(out, &ho, &pan, 1, &hi);
    if (st == TSC_OK && hi.note[0]) cap_printf(info, " Note: %s.", hi.note);
out:
    free(v), free(steps), free(layers), free(m), free(lab), free(labp), free(xl), free(xlp);
    return st;
}

static tsc_status_t fig12(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const tsc_fig_sel_t *sel, const fig_out_t *out,
                           tsc_figure_info_t *info) {
    const tsc_jv_t *sl = tsc_jv_path(s->summary, "computed_over.step_list");
    int S = (int)(sl ? sl->n : 0), T = 0, rows = 0;
    float *m = NULL;
    char (*yl)[24] = S ? malloc((size_t)S * sizeof *yl) : NULL;
    const char **ylp = S ? malloc((size_t)S * sizeof *ylp) : NULL;
    double *acc = NULL;
    tsc_status_t st = TSC_OK;
    if (!S) return tsc_error_set(TSC_ERR_MISSING, "fig12: summary.json lists no analysed steps");
    if (!yl || !ylp) { st = tsc_error_set(TSC_ERR_NOMEM, "fig12: out of memory"); goto out; }
    for (int i = 0; i < S; i++) {
        long long step = tsc_jv_int(sl->items[i], NULL, -1);
        char grp[64], p[128];
        int row = head_row(s, step, sel->layer, sel->head, grp, sizeof grp);
        if (row < 0) continue;
        snprintf(p, sizeof p, "%s/delta_diff", grp);
        double *v;
        int r;
        long long d[4];
        if ((st = tsc_fig_read_ds(s, p, &v, &r, d))) goto out;
        if (r != 3 || row >= d[0] || d[1] < 1 || (m && d[2] != T)) {
            free(v);
            st = tsc_error_set(TSC_ERR_SHAPE, "%s:%s: expected [heads, B, T] with row %d, found rank %d",
                               s->analysis_path, p, row, r);
            goto out;
        }
        if (!m) {
            T = (int)d[2];
            m = calloc((size_t)S * T, sizeof *m);
            acc = calloc((size_t)T, sizeof *acc);
            if (!m || !acc) { free(v); st = tsc_error_set(TSC_ERR_NOMEM, "fig12: out of memory"); goto out; }
        }
        int b = sel->batch < d[1] ? sel->batch : 0;
        for (int t = 0; t < T && t < d[2]; t++) {
            double x = v[((size_t)row * d[1] + b) * d[2] + t];
            if (isfinite(x)) acc[t] += x;
            m[(size_t)rows * T + t] = (float)acc[t];
        }
        snprintf(yl[rows], sizeof yl[rows], "%lld", step);
        ylp[rows] = yl[rows];
        rows++;
        free(v);
    }
    if (!rows) {
        st = tsc_error_set(TSC_ERR_MISSING, "fig12: layer %d head %d was not analysed in %s", sel->layer, sel->head,
                           s->analysis_path);
        goto out;
    }
    tsc_heatmap_opts_t ho;
    heat_defaults(&ho, o, info);
    ho.cmap = TSC_CMAP_COOLWARM, ho.norm_kind = TSC_NORM_SYMMETRIC;
    ho.cbar_label = "cumulative delta_lp - delta_hp";
    char title[96];
    snprintf(title, sizeof title, "cumulative delta diff, L%d H%d", sel->layer, sel->head);
    tsc_heatmap_panel_t pan = {.data = m, .rows = rows, .cols = T, .title = title, .xlabel = "token",
                               .ylabel = "step", .ytick_labels = ylp};
    snprintf(info->caption, sizeof info->caption,
             "fig12: delta_lp - delta_hp per token, summed over the analysed steps up to each row's step (cumulative), "
             "layer %d head %d batch %d, from %s:step_*/layer_%03d/delta_diff. Red: positive (lp above hp).",
             sel->layer, sel->head, sel->batch, tsc_fig_base(s->analysis_path), sel->layer);
    tsc_heatmap_info_t hi;
    st = emit_heat(out, &ho, &pan, 1, &hi);
    if (st == TSC_OK && hi.note[0]) cap_printf(info, " Note: %s.", hi.note);
out:
    free(m), free(acc), free(yl), free(ylp);
    return st;
}

static tsc_status_t fig13(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const tsc_fig_sel_t *sel, const fig_out_t *out,
                           tsc_figure_info_t *info) {
    cum_t c;
    tsc_status_t st = cum_read(s, "rows_multi_max", &c);
    if (st) return tsc_error_wrap(st, "fig13 needs the tie counts: ");
    if ((st = need_steps(&c, "fig13", s))) { cum_free(&c); return st; }
    int li = cum_layer(&c, sel->layer);
    if (li < 0) { cum_free(&c); return tsc_error_set(TSC_ERR_MISSING, "fig13: layer %d was not analysed", sel->layer); }
    double *cnt = calloc((size_t)c.S, sizeof *cnt);
    if (!cnt) { cum_free(&c); return tsc_error_set(TSC_ERR_NOMEM, "fig13: out of memory"); }
    for (long long t = 0; t < c.S; t++)
        for (long long h = 0; h < c.NH; h++) {
            double x = c.v[(t * c.L + li) * c.NH + h];
            if (isfinite(x)) cnt[t] += x;
        }
    tsc_plot_series_t ser[1 + TSC_FIG_MAX_LOGS];
    double *bufs[2 * TSC_FIG_MAX_LOGS] = {0};
    snprintf(info->caption, sizeof info->caption, "fig13: ");
    char lnames[TSC_FIG_MAX_LOGS][96];
    int k = log_series(s, 1, ser, bufs, lnames, info);
    char cname[64];
    snprintf(cname, sizeof cname, "tied rows, layer %d%s", sel->layer, k ? " (right axis)" : "");
    ser[k] = (tsc_plot_series_t){.name = cname, .x = c.steps, .y = cnt, .n = (size_t)c.S,
                                 .style = TSC_PLOT_LINESPOINTS, .y2 = k ? 1 : 0};
    tsc_plot_opts_t po;
    plot_defaults(&po, o, info);
    po.title = k ? "validation loss and rows with multiple maxima" : "rows with multiple maxima";
    po.xlabel = "step";
    po.ylabel = k ? "validation loss" : "rows with >= 2 maxima";
    po.y2label = k ? "rows with >= 2 maxima" : NULL;
    cap_printf(info, "%srows whose scores have two or more entries at the row maximum (where the fix of Algorithm 3 "
                     "would trigger), summed over the heads of layer %d, from %s:cumulative/rows_multi_max%s.",
               k ? " (validation loss, left axis); " : "", sel->layer, tsc_fig_base(s->analysis_path),
               k ? "" : " No training log was given (--log), so no loss curve is drawn");
    st = emit_plot(out, &po, ser, k + 1);
    for (int i = 0; i < 2 * k; i++) free(bufs[i]);
    free(cnt);
    cum_free(&c);
    return st;
}

typedef struct {
    const tsc_figure_src_t *s;
    const tsc_figure_opts_t *o;
    tsc_figure_info_t *info;
} fig1_ctx_t;

static tsc_status_t fig1_fn(cairo_t *cr, double w_pt, double h_pt, void *ctx) {
    fig1_ctx_t *c = ctx;
    return tsc_fig_evidence_cairo(c->s, c->o, cr, w_pt, h_pt, c->info);
}

/* Figure 1 (cairo): onto the box, into a file through the surface module, or as cairo's PNG. */
static tsc_status_t fig1(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const fig_out_t *out, tsc_figure_info_t *info) {
    fig1_ctx_t c = {s, o, info};
    if (out->cr) return fig1_fn(out->cr, out->w_pt, out->h_pt, &c);
    if (out->path) return tsc_surface_write(out->path, out->fmt, info->width_in, info->height_in, o->dpi, fig1_fn, &c);
    cairo_surface_t *img;
    cairo_t *cr;
    tsc_status_t st = tsc_surface_image(info->width_in * 72, info->height_in * 72, o->dpi, &img, &cr);
    if (st) return st;
    st = fig1_fn(cr, info->width_in * 72, info->height_in * 72, &c);
    cairo_destroy(cr);
    if (!st) st = tsc_surface_png(img, 0, out->png);
    cairo_surface_destroy(img);
    return st;
}

/* ---------------------------------------------------------------- the table */

typedef tsc_status_t (*recipe_fn)(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const tsc_fig_sel_t *sel,
                                  const fig_out_t *out, tsc_figure_info_t *info);

/* The recipes whose own signature differs from recipe_fn. */
static tsc_status_t draw_fig1(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const tsc_fig_sel_t *sel,
                              const fig_out_t *out, tsc_figure_info_t *info) {
    (void)sel;
    return fig1(s, o, out, info);
}
#define LOG_RECIPE(name)                                                                                           \
    static tsc_status_t draw_##name(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const tsc_fig_sel_t *sel,    \
                                    const fig_out_t *out, tsc_figure_info_t *info) {                              \
        (void)sel;                                                                                                 \
        return fig_logs(s, o, #name, out, info);                                                                   \
    }
LOG_RECIPE(fig2)
LOG_RECIPE(fig7)
LOG_RECIPE(fig10)
#undef LOG_RECIPE
static tsc_status_t draw_fig6b(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const tsc_fig_sel_t *sel,
                               const fig_out_t *out, tsc_figure_info_t *info) {
    return fig6bc(s, o, sel, 0, out, info);
}
static tsc_status_t draw_fig6c(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const tsc_fig_sel_t *sel,
                               const fig_out_t *out, tsc_figure_info_t *info) {
    return fig6bc(s, o, sel, 1, out, info);
}
static tsc_status_t draw_fig11(tsc_figure_src_t *s, const tsc_figure_opts_t *o, const tsc_fig_sel_t *sel,
                               const fig_out_t *out, tsc_figure_info_t *info) {
    (void)sel;
    return fig11(s, o, out, info);
}

typedef struct {
    tsc_figure_spec_t spec;
    recipe_fn draw;
} recipe_t;

#define A TSC_FIG_NEEDS_ANALYSIS
#define L TSC_FIG_NEEDS_LOGS
#define D TSC_FIG_NEEDS_DUMP
#define X TSC_FIG_NEEDS_X
#define GP TSC_FIG_KIND_GNUPLOT
#define CR TSC_FIG_KIND_CAIRO
#define ALL TSC_FIG_RUNS_ALL
#define CAP TSC_FIG_RUNS_CAPTURED

/* Every figure, in the order of --list, the report and the folders of demo and repro. */
static const recipe_t recipes[] = {
    {{"fig1", "evidence map: the causal chain with this run's numbers at each link", 6.5, 3.9, A | L, CR, CAP}, draw_fig1},
    {{"fig2", "validation loss vs step (training logs)", 3.25, 2.6, L, GP, ALL}, draw_fig2},
    {{"fig3", "W^Q spectral norm per head of one layer (bar chart)", 3.25, 2.6, A, GP, ALL}, fig3},
    {{"fig4", "PK, X and the rank-1 terms (PK)[T]^T X[T] at two tokens, with their cosine (needs the dump with x)", 6.5,
      4.2, A | D | X, CR, ALL},
     fig4},
    {{"fig5a", "cumulative sum_T(delta_lp - delta_hp) over the analysed steps", 3.25, 2.6, A, GP, ALL}, fig5a},
    {{"fig5b", "dO[T,:] and O[T,:] over features at the probe token (needs the dump)", 3.25, 2.6, A | D, GP, ALL}, fig5b},
    {{"fig5c", "mean O_lp - O_hp per feature, in value units (--ulp: in ULPs)", 3.25, 2.6, A, GP, ALL}, fig5c},
    {{"fig6a", "V[:, I] and P-bar[T, :] over tokens at the probe (needs the dump)", 3.25, 2.6, A | D, GP, ALL}, fig6a},
    {{"fig6b", "O-bar error(t): rounding error of the lp prefix sums of P-bar V over tokens", 3.25, 2.6, A, GP, ALL},
     draw_fig6b},
    {{"fig6c", "zoom of fig6b on its largest negative jump at a key where P-bar = 1", 3.25, 2.6, A, GP, ALL}, draw_fig6c},
    {{"fig7", "loss curves of several runs, log-log axes (training logs)", 3.25, 2.6, L, GP, ALL}, draw_fig7},
    {{"fig8", "rank-1 terms of three tied rows and the cosines of the tied-row terms (needs x)", 6.5, 5.0, A | X, CR, ALL},
     fig8},
    {{"fig9", "attention-probability rows with two maxima (needs the dump)", 3.25, 2.6, A | D, GP, ALL}, fig9},
    {{"fig10", "overlay of every log's training loss (EMA and raw)", 3.25, 2.6, L, GP, ALL}, draw_fig10},
    {{"fig11", "spectral norm of every captured weight across steps (heatmap)", 6.5, 3.0, A, CR, ALL}, draw_fig11},
    {{"fig12", "per-token delta difference, cumulative over steps (heatmap)", 3.25, 2.6, A, CR, ALL}, fig12},
    {{"fig13", "validation loss and rows with multiple maxima vs step (dual axis)", 3.25, 2.6, A | L, GP, CAP}, fig13},
};
#undef A
#undef L
#undef D
#undef X
#undef GP
#undef CR
#undef ALL
#undef CAP
#define N_RECIPES ((int)(sizeof recipes / sizeof recipes[0]))

/* Aliases: the paper's figure 5 and 6 are their first panels. */
static const struct {
    const char *alias, *id;
} aliases[] = {{"fig5", "fig5a"}, {"fig6", "fig6a"}};

int tsc_figure_count(void) { return N_RECIPES; }
const tsc_figure_spec_t *tsc_figure_spec(int i) { return i >= 0 && i < N_RECIPES ? &recipes[i].spec : NULL; }
const char *tsc_figure_id(int i) { return i >= 0 && i < N_RECIPES ? recipes[i].spec.id : NULL; }
const char *tsc_figure_describe(int i) { return i >= 0 && i < N_RECIPES ? recipes[i].spec.desc : NULL; }

static const recipe_t *recipe_find(const char *name) {
    char buf[16];
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n >= sizeof buf) return NULL;
    for (size_t i = 0; i <= n; i++) buf[i] = (char)((name[i] >= 'A' && name[i] <= 'Z') ? name[i] + 32 : name[i]);
    const char *id = buf;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(buf, aliases[i].alias) == 0) id = aliases[i].id;
    for (int i = 0; i < N_RECIPES; i++)
        if (strcmp(id, recipes[i].spec.id) == 0) return &recipes[i];
    return NULL;
}

const tsc_figure_spec_t *tsc_figure_find(const char *name) {
    const recipe_t *r = recipe_find(name);
    return r ? &r->spec : NULL;
}

const char *tsc_figure_canonical(const char *name) {
    const recipe_t *r = recipe_find(name);
    return r ? r->spec.id : NULL;
}

const char *tsc_figure_ids_where(unsigned mask, unsigned value, int scope, const char *last_sep, char *buf,
                                 size_t cap) {
    int idx[N_RECIPES], n = 0;
    for (int i = 0; i < N_RECIPES; i++)
        if ((recipes[i].spec.needs & mask) == value && (scope < 0 || (int)recipes[i].spec.scope == scope)) idx[n++] = i;
    tsc_strbuf_t b;
    tsc_strbuf_init(&b);
    for (int k = 0; k < n; k++)
        tsc_strbuf_printf(&b, "%s%s", k == 0 ? "" : k == n - 1 ? last_sep : ", ", recipes[idx[k]].spec.id);
    if (cap) snprintf(buf, cap, "%s", b.len ? tsc_strbuf_str(&b) : "");
    tsc_strbuf_free(&b);
    return buf;
}

/* Checks the arguments, resolves the selection and fills info's id, size and selection.
 * *cid: the canonical id. */
static tsc_status_t fig_begin(tsc_figure_src_t *s, const char *id, const tsc_figure_opts_t *o, tsc_figure_info_t *info,
                              const char **cid, tsc_fig_sel_t *sel) {
    memset(info, 0, sizeof *info);
    if (!s || !id || !o) return tsc_error_set(TSC_ERR_ARG, "tsc_figure_write: NULL argument");
    *cid = tsc_figure_canonical(id);
    if (!*cid) return tsc_error_set(TSC_ERR_ARG, "unknown figure '%s' (expected fig1 ... fig13, fig5a-c, fig6a-c)", id);
    if (o->font_pt < 7) return tsc_error_set(TSC_ERR_ARG, "figure font %g pt: at least 7 pt (legible in print)", o->font_pt);
    const recipe_t *rc = recipe_find(*cid);
    snprintf(info->id, sizeof info->id, "%s", *cid);
    info->width_in = o->width_in > 0 ? o->width_in : rc->spec.width_in;
    info->height_in = o->height_in > 0 ? o->height_in : rc->spec.height_in;
    if (!s->summary && (rc->spec.needs & TSC_FIG_NEEDS_ANALYSIS)) {
        char logs_only[128];
        return tsc_error_set(TSC_ERR_MISSING, "%s needs an analysis folder (--from DIR); only %s draw from training logs alone",
                             *cid, tsc_figure_ids_where(TSC_FIG_NEEDS_ANALYSIS, 0, -1, " and ", logs_only, sizeof logs_only));
    }
    tsc_status_t st = tsc_figure_check(s, o);
    if (st) return st;
    tsc_fig_resolve(s, o, sel);
    info->layer = sel->layer, info->head = sel->head, info->step = sel->step;
    tsc_error_clear();
    return TSC_OK;
}

/* Runs recipe cid into out. */
static tsc_status_t fig_run(tsc_figure_src_t *s, const char *cid, const tsc_figure_opts_t *o, const tsc_fig_sel_t *sel,
                            const fig_out_t *out, tsc_figure_info_t *info) {
    const recipe_t *r = recipe_find(cid);
    if (!r) return tsc_error_set(TSC_ERR_INTERNAL, "figure %s has no recipe", cid);
    return r->draw(s, o, sel, out, info);
}

tsc_status_t tsc_figure_draw(tsc_figure_src_t *s, const char *id, const tsc_figure_opts_t *o, cairo_t *cr, double w_pt,
                             double h_pt, tsc_figure_info_t *info) {
    tsc_figure_info_t local;
    if (!info) info = &local;
    const char *cid;
    tsc_fig_sel_t sel;
    tsc_status_t st = fig_begin(s, id, o, info, &cid, &sel);
    if (st) return st;
    if (!cr) return tsc_error_set(TSC_ERR_ARG, "tsc_figure_draw: NULL cairo context");
    if (cairo_status(cr) != CAIRO_STATUS_SUCCESS)
        return tsc_error_set(TSC_ERR_EXTERNAL, "figure %s: the cairo context is in error: %s", cid,
                             cairo_status_to_string(cairo_status(cr)));
    fig_out_t out = {NULL, TSC_IMG_AUTO, NULL, cr, w_pt > 0 ? w_pt : info->width_in * 72,
                     h_pt > 0 ? h_pt : info->height_in * 72};
    cairo_save(cr);
    st = fig_run(s, cid, o, &sel, &out, info);
    cairo_restore(cr);
    if (!st && cairo_status(cr) != CAIRO_STATUS_SUCCESS)
        st = tsc_error_set(TSC_ERR_EXTERNAL, "figure %s: cairo drawing failed: %s", cid, cairo_status_to_string(cairo_status(cr)));
    return st;
}

tsc_status_t tsc_figure_png(tsc_figure_src_t *s, const char *id, const tsc_figure_opts_t *o, tsc_strbuf_t *png,
                            tsc_figure_info_t *info) {
    tsc_figure_info_t local;
    if (!info) info = &local;
    const char *cid;
    tsc_fig_sel_t sel;
    tsc_status_t st = fig_begin(s, id, o, info, &cid, &sel);
    if (st) return st;
    if (!png) return tsc_error_set(TSC_ERR_ARG, "tsc_figure_png: NULL buffer");
    fig_out_t out = {NULL, TSC_IMG_PNG, png, NULL, 0, 0};
    return fig_run(s, cid, o, &sel, &out, info);
}

tsc_status_t tsc_figure_write(tsc_figure_src_t *s, const char *id, const tsc_figure_opts_t *o, const char *path,
                              tsc_image_format_t fmt, tsc_figure_info_t *info) {
    tsc_figure_info_t local;
    if (!info) info = &local;
    const char *cid;
    tsc_fig_sel_t sel;
    tsc_status_t st = fig_begin(s, id, o, info, &cid, &sel);
    if (st) return st;
    if (!path) return tsc_error_set(TSC_ERR_ARG, "tsc_figure_write: NULL argument");
    if (fmt == TSC_IMG_AUTO && (st = tsc_image_format_from_path(path, &fmt))) return st;
    fig_out_t out = {path, fmt, NULL, NULL, 0, 0};
    return fig_run(s, cid, o, &sel, &out, info);
}

tsc_status_t tsc_figure_write_dir(tsc_figure_src_t *s, tsc_figure_src_t *captured, const char *dir,
                                  const tsc_figure_opts_t *o, tsc_figure_done_fn done, void *user, int *n_drawn) {
    if (n_drawn) *n_drawn = 0;
    if (!s || !dir || !o) return tsc_error_set(TSC_ERR_ARG, "tsc_figure_write_dir: NULL argument");
    int drawn = 0;
    for (int i = 0; i < N_RECIPES; i++) {
        const tsc_figure_spec_t *f = &recipes[i].spec;
        char path[1200];
        if (snprintf(path, sizeof path, "%s/%s.png", dir, f->id) >= (int)sizeof path) {
            tsc_status_t st = tsc_error_set(TSC_ERR_ARG, "%s: the folder name is too long", dir);
            if (done) done(user, f->id, st, tsc_error_last());
            continue;
        }
        tsc_figure_src_t *src = f->scope == TSC_FIG_RUNS_CAPTURED && captured ? captured : s;
        tsc_status_t st = tsc_figure_write(src, f->id, o, path, TSC_IMG_PNG, NULL);
        drawn += st == TSC_OK;
        if (done) done(user, f->id, st, st == TSC_OK ? NULL : tsc_error_last());
    }
    if (n_drawn) *n_drawn = drawn;
    return TSC_OK;
}

#define INFO_F(m) TSC_JSON_FIELD(tsc_figure_info_t, m, #m)
static const tsc_json_field_t info_f[] = {TSC_JSON_CHARS(tsc_figure_info_t, caption, "caption"), INFO_F(layer),
                                          INFO_F(head), INFO_F(step), INFO_F(width_in), INFO_F(height_in)};
#undef INFO_F

void tsc_figure_info_json(const tsc_figure_info_t *info, const char *path, tsc_json_t *j) {
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "id", info->id);
    tsc_json_kv_string(j, "file", path);
    tsc_json_kv_fields(j, info, info_f, TSC_JSON_NFIELDS(info_f));
    tsc_json_kv_ints(j, "marks", info->marks, (size_t)info->n_marks);
    tsc_json_object_end(j);
}
