/* heatmap.c: matrices to heatmaps with cairo and pango. See tsc_heatmap.h.
 *
 * Order of work: a statistics pass over every panel (range, masked and non-finite counts), the
 * layout in points (which needs the note text, hence the counts), the pooling factors (which need
 * the plot size in pixels), a pooling pass into small per-panel colour arrays, then drawing. PNG
 * cells are written straight into the image surface's pixels (one store per pixel, no cairo path
 * per cell), which is what makes a 4096 x 4096 map fast; SVG/PDF paint the same colour array as a
 * nearest-neighbour image. */
#include "tsc_heatmap.h"
#include "tsc_surface.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pango/pangocairo.h>

#define MIN_FONT_PT 7.0
#define HATCH_ARGB 0xFF8C8C8Cu   /* hatch lines of masked cells: mid grey, in neither colour map */
#define MASK_BG_ARGB 0xFFFFFFFFu /* between hatch lines: white (cool-warm's centre is 221 grey) */
#define HATCH_PERIOD_PT 3.0
#define HATCH_WIDTH_PT 0.6
#define MAX_PANELS 64

typedef struct { double x, y, w, h; } rect_t;

/* Per-panel working state. */
typedef struct {
    long long n_bad, n_masked, n_nonpos;
    double lo, hi, amax, pmin;      /* over finite unmasked source cells */
    tsc_norm_t norm;
    int fy, fx, nr, nc;             /* pooling block and shown cells */
    uint32_t *argb;                 /* [nr, nc] shown colours; 0 = masked */
    uint8_t *masked;                /* [nr, nc] 1 = masked block */
    rect_t plot, cbar;              /* points */
    int has_cbar;
    int xrot;                       /* x category labels drawn vertically (too wide side by side) */
    double title_w;                 /* the width the panel title wraps at (points) */
    char note[512];
} pstate_t;

void tsc_heatmap_opts_init(tsc_heatmap_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->width_in = 3.25;
    o->height_in = 2.6;
    o->font_pt = 8.0;
    o->dpi = 300.0;
    o->font_family = "DejaVu Sans";
    o->panel_letters = 1;
    o->cmap = TSC_CMAP_VIRIDIS;
    o->norm_kind = TSC_NORM_LINEAR;
    o->pool = TSC_POOL_MAXABS;
    o->max_cells = 512;
}

/* ---------------------------------------------------------------- text */

typedef struct {
    cairo_t *cr;
    const char *family;
} text_t;

static void text_size(const text_t *tx, const char *s, double size, int bold, double wrap_w, double *w, double *h) {
    tsc_surface_text_size(tx->cr, tx->family, size, bold, wrap_w, s, w, h);
}

static void text_draw(const text_t *tx, const char *s, double size, int bold, double wrap_w, double x, double y,
                      double ax, double ay, double angle) {
    tsc_surface_text_at(tx->cr, tx->family, size, bold, wrap_w, s, x, y, ax, ay, angle);
}

/* ---------------------------------------------------------------- statistics and pooling */

static void panel_stats(const tsc_heatmap_panel_t *p, pstate_t *ps) {
    double lo = INFINITY, hi = -INFINITY, amax = 0, pmin = INFINITY;
    long long bad = 0, masked = 0, nonpos = 0;
    for (int i = 0; i < p->rows; i++) {
        const float *row = p->data + (size_t)i * p->cols;
        int jmax = p->cols;
        if (p->causal && i + 1 < jmax) { masked += jmax - (i + 1); jmax = i + 1; }
        if (!p->mask) {
            /* Branch-free over the signs (random signed data would defeat branch prediction). */
            float flo = INFINITY, fhi = -INFINITY, fam = 0, fpm = INFINITY;
            long long fbad = 0, fnp = 0;
            for (int j = 0; j < jmax; j++) {
                float v = row[j];
                if (!(fabsf(v) <= FLT_MAX)) { fbad++; continue; }
                /* Ternaries, not fminf/fmaxf: v is finite here, and the libm calls are not inlined. */
                float av = fabsf(v), pv = v > 0 ? v : INFINITY;
                flo = v < flo ? v : flo;
                fhi = v > fhi ? v : fhi;
                fam = av > fam ? av : fam;
                fpm = pv < fpm ? pv : fpm;
                fnp += v <= 0;
            }
            lo = fmin(lo, flo); hi = fmax(hi, fhi); amax = fmax(amax, fam); pmin = fmin(pmin, fpm);
            bad += fbad; nonpos += fnp;
            continue;
        }
        for (int j = 0; j < jmax; j++) {
            if (p->mask[(size_t)i * p->cols + j]) { masked++; continue; }
            double v = row[j];
            if (!isfinite(v)) { bad++; continue; }
            if (v < lo) lo = v;
            if (v > hi) hi = v;
            if (fabs(v) > amax) amax = fabs(v);
            if (v > 0) { if (v < pmin) pmin = v; }
            else nonpos++;
        }
        /* Caller-masked cells in the causal triangle were counted above already. */
    }
    ps->lo = lo; ps->hi = hi; ps->amax = amax; ps->pmin = pmin;
    ps->n_bad = bad; ps->n_masked = masked; ps->n_nonpos = nonpos;
}

static void norm_from_stats(tsc_norm_t *n, tsc_norm_kind_t kind, double lo, double hi, double amax, double pmin) {
    /* The rules of tsc_norm_autoscale, from precomputed statistics. */
    n->kind = kind;
    if (kind == TSC_NORM_SYMMETRIC) {
        if (!(amax > 0)) amax = 1;
        n->vmin = -amax; n->vmax = amax;
    } else if (kind == TSC_NORM_LOG) {
        if (!isfinite(pmin)) { n->vmin = 1e-3; n->vmax = 1; }
        else if (!(hi > pmin)) { n->vmin = pmin / 10; n->vmax = pmin * 10; }
        else { n->vmin = pmin; n->vmax = hi; }
    } else {
        n->kind = TSC_NORM_LINEAR;
        if (!(lo <= hi)) { n->vmin = 0; n->vmax = 1; }
        else if (!(lo < hi)) { n->vmin = lo - 0.5; n->vmax = lo + 0.5; }
        else { n->vmin = lo; n->vmax = hi; }
    }
}

/* Pools panel p into ps->argb/masked with blocks fy x fx, colouring through lut and ps->norm. */
static tsc_status_t panel_pool(const tsc_heatmap_panel_t *p, pstate_t *ps, tsc_pool_t pool, const uint32_t *lut) {
    int nr = ps->nr, nc = ps->nc, fy = ps->fy, fx = ps->fx;
    ps->argb = malloc((size_t)nr * nc * sizeof *ps->argb);
    ps->masked = malloc((size_t)nr * nc);
    float *best = malloc((size_t)nc * sizeof *best);
    double *sum = malloc((size_t)nc * sizeof *sum);
    int *cnt = malloc((size_t)nc * sizeof *cnt);
    uint8_t *bad = malloc((size_t)nc);
    if (!ps->argb || !ps->masked || !best || !sum || !cnt || !bad) {
        free(best); free(sum); free(cnt); free(bad);
        return tsc_error_set(TSC_ERR_NOMEM, "heatmap: cannot allocate %dx%d shown cells", nr, nc);
    }
    const tsc_norm_t *nm = &ps->norm;
    int log_norm = nm->kind == TSC_NORM_LOG;
    double lmin = log_norm ? log(nm->vmin) : nm->vmin;
    double inv = log_norm ? 1.0 / (log(nm->vmax) - lmin) : 1.0 / (nm->vmax - nm->vmin);
    for (int r = 0; r < nr; r++) {
        for (int c = 0; c < nc; c++) { best[c] = 0; sum[c] = 0; cnt[c] = 0; bad[c] = 0; }
        int i1 = (r + 1) * fy < p->rows ? (r + 1) * fy : p->rows;
        for (int i = r * fy; i < i1; i++) {
            const float *row = p->data + (size_t)i * p->cols;
            const uint8_t *mrow = p->mask ? p->mask + (size_t)i * p->cols : NULL;
            int jend = p->causal && i + 1 < p->cols ? i + 1 : p->cols;  /* causal: cols > i masked */
            if (!mrow) {
                /* No caller mask: branch-free max-|x| (NaN never wins a > comparison; the block is
                 * flagged non-finite anyway). best starts at 0, which any nonzero value beats. */
                for (int c = 0; c < nc; c++) {
                    int j0 = c * fx, j1 = j0 + fx < jend ? j0 + fx : jend;
                    if (j1 <= j0) continue;
                    float b = best[c];
                    int bd = 0;
                    double sm = 0;
                    if (pool == TSC_POOL_MEAN)
                        for (int j = j0; j < j1; j++) {
                            float v = row[j];
                            int fin = fabsf(v) <= FLT_MAX;
                            bd |= !fin;
                            sm += fin ? v : 0.0f;
                        }
                    else
                        for (int j = j0; j < j1; j++) {
                            float v = row[j], av = fabsf(v);
                            bd |= !(av <= FLT_MAX);
                            b = av > fabsf(b) ? v : b;
                        }
                    best[c] = b; sum[c] += sm; cnt[c] += j1 - j0; bad[c] |= (uint8_t)bd;
                }
                continue;
            }
            for (int c = 0; c < nc; c++) {
                int j0 = c * fx, j1 = j0 + fx < jend ? j0 + fx : jend;
                float b = best[c];
                int k = cnt[c];
                double s = sum[c];
                for (int j = j0; j < j1; j++) {
                    if (mrow && mrow[j]) continue;
                    float v = row[j];
                    if (!isfinite(v)) { bad[c] = 1; continue; }
                    if (!k || fabsf(v) > fabsf(b)) b = v;
                    s += v; k++;
                }
                best[c] = b; cnt[c] = k; sum[c] = s;
            }
        }
        uint32_t *out = ps->argb + (size_t)r * nc;
        uint8_t *mout = ps->masked + (size_t)r * nc;
        for (int c = 0; c < nc; c++) {
            mout[c] = 0;
            if (bad[c]) { out[c] = TSC_CMAP_BAD_ARGB; continue; }
            if (!cnt[c]) { out[c] = 0; mout[c] = 1; continue; }
            double v = pool == TSC_POOL_MEAN ? sum[c] / cnt[c] : best[c];
            double t;
            if (log_norm) t = v > 0 ? (log(v) - lmin) * inv : 0;
            else t = (v - lmin) * inv;
            t = t < 0 ? 0 : t > 1 ? 1 : t;
            out[c] = lut[(int)(t * (TSC_CMAP_LUT_N - 1) + 0.5)];
        }
    }
    free(best); free(sum); free(cnt); free(bad);
    return TSC_OK;
}

/* ---------------------------------------------------------------- layout */

typedef struct {
    double W, H, F, small, m, line_h, small_h;
    rect_t title;        /* figure title box */
    rect_t notes;        /* note paragraph box */
    char notes_text[4096];
    double cb_total;     /* width a colour bar with its labels takes */
    double cb_tick_w;
} layout_t;

/* Index ticks along an axis of n source cells labelled from origin: values and count. */
static int index_ticks(int n, int origin, double length, double spacing, int *vals, int max_vals) {
    int k = (int)(length / spacing);
    if (k < 2) k = 2;
    if (k > max_vals) k = max_vals;
    static const int mult[3] = {1, 2, 5};
    long step = 1;
    for (int e = 0; e < 30; e++) {
        step = (long)mult[e % 3] * (long)pow(10, e / 3);
        long first = (long)ceil((double)origin / step) * step, last = origin + n - 1;
        if (first > last || (last - first) / step + 1 <= k) break;
    }
    int cnt = 0;
    long first = (long)ceil((double)origin / step) * step;
    for (long v = first; v <= origin + n - 1 && cnt < k; v += step) vals[cnt++] = (int)v;
    return cnt;
}

/* Tick labels as drawn: a typographic minus sign (U+2212), as in print. */
static void cbar_tick_labels(const tsc_norm_t *nm, int max_ticks, double *ticks, char labels[][40], int *count) {
    int k = tsc_norm_ticks(nm, ticks, max_ticks);
    double step = (nm->kind != TSC_NORM_LOG && k > 1) ? ticks[1] - ticks[0] : 0;
    for (int i = 0; i < k; i++) {
        char t[32];
        tsc_format_tick(ticks[i], step, t, sizeof t);
        if (t[0] == '-') snprintf(labels[i], 40, "\xe2\x88\x92%s", t + 1);
        else snprintf(labels[i], 40, "%s", t);
    }
    *count = k;
}

static double cbar_width(const text_t *tx, const tsc_heatmap_opts_t *o, const tsc_norm_t *nm, double F, double line_h,
                         double *tick_w) {
    double maxw = 0, ticks[16];
    char labels[16][40];
    for (int mt = 2; mt <= 8; mt++) {
        int k;
        cbar_tick_labels(nm, mt, ticks, labels, &k);
        for (int i = 0; i < k; i++) {
            double w;
            text_size(tx, labels[i], F, 0, 0, &w, NULL);
            if (w > maxw) maxw = w;
        }
    }
    *tick_w = maxw;
    int has_label = (o->cbar_label && *o->cbar_label) || (o->cbar_units && *o->cbar_units);
    return 0.5 * F + 0.8 * F + 0.25 * F + 0.2 * F + maxw + (has_label ? 0.3 * F + line_h : 0) + 0.2 * F;
}

static void panel_title(const tsc_heatmap_opts_t *o, const tsc_heatmap_panel_t *p, int i, int n, char *buf, size_t sz) {
    const char *t = p->title ? p->title : "";
    if (n > 1 && o->panel_letters) {
        char letter[16];
        if (i < 26) snprintf(letter, sizeof letter, "(%c)", 'a' + i);
        else snprintf(letter, sizeof letter, "(%d)", i + 1);
        snprintf(buf, sz, "%s%s%s", letter, *t ? " " : "", t);
    } else snprintf(buf, sz, "%s", t);
}

static const char *pool_name(tsc_pool_t p) { return p == TSC_POOL_MEAN ? "mean" : "max-|x|"; }

static void compose_notes(const tsc_heatmap_opts_t *o, const tsc_heatmap_panel_t *p, pstate_t *ps, int n,
                          layout_t *L) {
    L->notes_text[0] = '\0';
    for (int i = 0; i < n; i++) {
        char *b = ps[i].note;
        size_t sz = sizeof ps[i].note, len = 0;
        b[0] = '\0';
#define ADD(...) do { if (len < sz) len += (size_t)snprintf(b + len, sz - len, __VA_ARGS__); } while (0)
        if (ps[i].fy > 1 || ps[i].fx > 1)
            ADD("%s%dx%d shown as %dx%d, %s pooling %dx%d", len ? "; " : "", p[i].rows, p[i].cols, ps[i].nr,
                ps[i].nc, pool_name(o->pool), ps[i].fy, ps[i].fx);
        if (ps[i].n_masked)
            ADD("%shatched: %lld masked cells%s", len ? "; " : "", ps[i].n_masked,
                p[i].causal && !p[i].mask ? " (causal upper triangle)" : p[i].causal ? " (causal and given mask)" : "");
        if (ps[i].n_bad) ADD("%smagenta: %lld non-finite cells (NaN/Inf)", len ? "; " : "", ps[i].n_bad);
        /* For a log scale the values <= 0 have their own note: compare the smallest positive. */
        double dlo = ps[i].norm.kind == TSC_NORM_LOG ? ps[i].pmin : ps[i].lo;
        /* Data are float, limits double: 1e-6 relative slack so a limit typed as the data's own
         * value (1e-6 vs 1e-6f) is not reported as exceeded. */
        double slo = ps[i].norm.vmin - 1e-6 * fabs(ps[i].norm.vmin), shi = ps[i].norm.vmax + 1e-6 * fabs(ps[i].norm.vmax);
        if (o->fixed_norm && dlo <= ps[i].hi && (dlo < slo || ps[i].hi > shi)) {
            char a[32], b2[32];
            tsc_format_tick(dlo, 0, a, sizeof a);
            tsc_format_tick(ps[i].hi, 0, b2, sizeof b2);
            ADD("%sdata range [%s, %s] exceeds the colour scale: clipped to its ends", len ? "; " : "", a, b2);
        }
        if (ps[i].norm.kind == TSC_NORM_LOG && ps[i].n_nonpos)
            ADD("%s%lld cells <= 0 shown at the lowest colour", len ? "; " : "", ps[i].n_nonpos);
#undef ADD
        if (!b[0]) continue;
        size_t tl = strlen(L->notes_text);
        char letter[16] = "";
        if (n > 1) { if (i < 26) snprintf(letter, sizeof letter, "(%c) ", 'a' + i); else snprintf(letter, sizeof letter, "(%d) ", i + 1); }
        if (tl < sizeof L->notes_text)
            snprintf(L->notes_text + tl, sizeof L->notes_text - tl, "%s%s%s.", tl ? "  " : "", letter, b);
    }
    /* the same note on every panel (a grid of like matrices) is said once */
    int same = n > 1 && ps[0].note[0];
    for (int i = 1; same && i < n; i++) same = strcmp(ps[i].note, ps[0].note) == 0;
    if (same) snprintf(L->notes_text, sizeof L->notes_text, "Every panel: %s.", ps[0].note);
}

/* The widest of n category labels (NULL ones count as empty), in points at size F. */
static double labels_width(const text_t *tx, const char *const *labels, int n, double F) {
    double wmax = 0;
    for (int i = 0; i < n; i++) {
        double w;
        text_size(tx, labels[i] ? labels[i] : "", F, 0, 0, &w, NULL);
        if (w > wmax) wmax = w;
    }
    return wmax;
}

/* Points left of a panel's plot: its y label and tick labels. */
static double panel_left(const text_t *tx, const tsc_heatmap_panel_t *p, double F, double lh) {
    double ytw = 0;
    if (p->ytick_labels) {
        ytw = labels_width(tx, p->ytick_labels, p->rows, F);
    } else {
        char a[32], b[32];
        double wa, wb;
        snprintf(a, sizeof a, "%d", p->y_origin);
        snprintf(b, sizeof b, "%d", p->y_origin + p->rows - 1);
        text_size(tx, a, F, 0, 0, &wa, NULL);
        text_size(tx, b, F, 0, 0, &wb, NULL);
        ytw = wa > wb ? wa : wb;
    }
    return (p->ylabel && *p->ylabel ? lh + 0.2 * F : 0) + ytw + 0.2 * F + 0.25 * F;
}

/* Lays out panels and colour bars in points. scale > 0: raster pixels per point (snap the plot
 * and colour bar rectangles to whole pixels). */
static tsc_status_t do_layout(const text_t *tx, const tsc_heatmap_opts_t *o, const tsc_heatmap_panel_t *p,
                              pstate_t *ps, int n, layout_t *L, double scale) {
    double F = L->F, m = L->m, lh = L->line_h;
    double top = m, bottom = L->H - m;
    if (o->title && *o->title) {
        double th;
        text_size(tx, o->title, F * 1.1, 1, L->W - 2 * m, NULL, &th);
        L->title = (rect_t){m, top, L->W - 2 * m, th};
        top += th + 0.3 * F;
    }
    if (L->notes_text[0]) {
        double nh;
        text_size(tx, L->notes_text, L->small, 0, L->W - 2 * m, NULL, &nh);
        L->notes = (rect_t){m, bottom - nh, L->W - 2 * m, nh};
        bottom -= nh + 0.3 * F;
    }
    double right = L->W - m;
    if (!o->per_panel_scale) right -= L->cb_total;
    int gcols = o->grid_cols > 0 ? o->grid_cols : (n < 4 ? n : 4);
    if (gcols > n) gcols = n;
    int grows = (n + gcols - 1) / gcols;
    double cw = (right - m) / gcols, ch = (bottom - top) / grows;
    /* Room above the plots for the tallest panel title as it wraps (a long one takes several lines). */
    double rpad = o->per_panel_scale ? L->cb_total : 0.8 * F, title_h = 0;
    int any_title = 0;
    for (int i = 0; i < n; i++) {
        char t[256];
        double th = 0;
        panel_title(o, &p[i], i, n, t, sizeof t);
        /* centred on the plot, a title may reach into its cell's margins on both sides (at least 1 em) */
        double left = panel_left(tx, &p[i], F, lh), side = left < rpad ? left : rpad;
        ps[i].title_w = cw - left - rpad + 2 * (side > F ? side : F);
        if (t[0]) any_title = 1, text_size(tx, t, F, 1, ps[i].title_w, NULL, &th);
        if (th > title_h) title_h = th;
    }
    double grid_top = INFINITY, grid_bot = -INFINITY;
    for (int i = 0; i < n; i++) {
        int gr = i / gcols, gc = i % gcols;
        double cx = m + gc * cw, cy = top + gr * ch;
        double left = panel_left(tx, &p[i], F, lh);
        double tpad = any_title ? (title_h > lh ? title_h : lh) + 0.25 * F : 0.3 * F;
        /* Category labels on x: vertical when they would not fit side by side. */
        double xlab_h = lh;
        ps[i].xrot = 0;
        if (p[i].xtick_labels) {
            double xtw = labels_width(tx, p[i].xtick_labels, p[i].cols, F);
            if ((xtw + 0.6 * F) * p[i].cols > cw - left - rpad) { ps[i].xrot = 1; xlab_h = xtw; }
        }
        double bpad = 0.25 * F + 0.1 * F + xlab_h + (p[i].xlabel && *p[i].xlabel ? lh + 0.1 * F : 0);
        rect_t pl = {cx + left, cy + tpad, cw - left - rpad, ch - tpad - bpad};
        if (o->equal_aspect && pl.w > 0 && pl.h > 0) {
            /* Square cells: shrink one side and centre the plot in its space. */
            double want = (double)p[i].cols / p[i].rows;
            if (pl.w / pl.h > want) { double w = pl.h * want; pl.x += (pl.w - w) / 2; pl.w = w; }
            else { double h = pl.w / want; pl.y += (pl.h - h) / 2; pl.h = h; }
        }
        if (pl.w < 2 * F || pl.h < 2 * F)
            return tsc_error_set(TSC_ERR_ARG, "heatmap: a %.2fx%.2f in figure with %d panel(s) leaves a plot of "
                                 "%.0fx%.0f pt for %g pt text: make the figure larger", o->width_in, o->height_in,
                                 n, pl.w, pl.h, F);
        if (scale > 0) {
            double x0 = round(pl.x * scale), y0 = round(pl.y * scale);
            double x1 = round((pl.x + pl.w) * scale), y1 = round((pl.y + pl.h) * scale);
            pl = (rect_t){x0 / scale, y0 / scale, (x1 - x0) / scale, (y1 - y0) / scale};
        }
        ps[i].plot = pl;
        if (pl.y < grid_top) grid_top = pl.y;
        if (pl.y + pl.h > grid_bot) grid_bot = pl.y + pl.h;
        if (o->per_panel_scale) {
            ps[i].cbar = (rect_t){pl.x + pl.w + 0.5 * F, pl.y, 0.8 * F, pl.h};
            ps[i].has_cbar = 1;
        }
    }
    if (!o->per_panel_scale) {
        rect_t cb = {right + 0.5 * F, grid_top, 0.8 * F, grid_bot - grid_top};
        for (int i = 0; i < n; i++) { ps[i].cbar = cb; ps[i].has_cbar = i == 0; }
    }
    if (scale > 0)
        for (int i = 0; i < n; i++) {
            rect_t *c = &ps[i].cbar;
            double x0 = round(c->x * scale), y0 = round(c->y * scale);
            double x1 = round((c->x + c->w) * scale), y1 = round((c->y + c->h) * scale);
            *c = (rect_t){x0 / scale, y0 / scale, (x1 - x0) / scale, (y1 - y0) / scale};
        }
    return TSC_OK;
}

/* Pooling factors: the smallest block that fits the limit (pixels for PNG, max_cells otherwise). */
static tsc_status_t choose_pooling(const tsc_heatmap_opts_t *o, const tsc_heatmap_panel_t *p, pstate_t *ps,
                                   double scale) {
    int lim_r, lim_c;
    if (scale > 0) {
        lim_r = (int)lround(ps->plot.h * scale);
        lim_c = (int)lround(ps->plot.w * scale);
    } else lim_r = lim_c = o->max_cells > 0 ? o->max_cells : 512;
    if (lim_r < 1) lim_r = 1;
    if (lim_c < 1) lim_c = 1;
    int fy = (p->rows + lim_r - 1) / lim_r, fx = (p->cols + lim_c - 1) / lim_c;
    if (o->pool == TSC_POOL_NONE) {
        if (fy > 1 || fx > 1)
            return tsc_error_set(TSC_ERR_ARG, "heatmap: a %dx%d matrix does not fit %dx%d %s without pooling: "
                                 "choose max-|x| or mean pooling, or a larger figure", p->rows, p->cols, lim_r,
                                 lim_c, scale > 0 ? "pixels" : "cells");
    } else if (o->pool_factor > 0) {
        if (o->pool_factor > fy) fy = o->pool_factor;
        if (o->pool_factor > fx) fx = o->pool_factor;
    }
    if (fy > p->rows) fy = p->rows;
    if (fx > p->cols) fx = p->cols;
    ps->fy = fy; ps->fx = fx;
    ps->nr = (p->rows + fy - 1) / fy;
    ps->nc = (p->cols + fx - 1) / fx;
    return TSC_OK;
}

/* ---------------------------------------------------------------- drawing */

static void fill_cells_raster(cairo_surface_t *img, const pstate_t *ps, double scale, int *colmap) {
    unsigned char *data = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    int x0 = (int)lround(ps->plot.x * scale), y0 = (int)lround(ps->plot.y * scale);
    int pw = (int)lround(ps->plot.w * scale), ph = (int)lround(ps->plot.h * scale);
    int period = (int)lround(HATCH_PERIOD_PT * scale), lw = (int)lround(HATCH_WIDTH_PT * scale);
    if (period < 3) period = 3;
    if (lw < 1) lw = 1;
    for (int px = 0; px < pw; px++) colmap[px] = (int)((long long)px * ps->nc / pw);
    for (int py = 0; py < ph; py++) {
        int r = (int)((long long)py * ps->nr / ph);
        const uint32_t *src = ps->argb + (size_t)r * ps->nc;
        uint32_t *dst = (uint32_t *)(void *)(data + (size_t)(y0 + py) * stride) + x0;
        for (int px = 0; px < pw; px++) {
            uint32_t c = src[colmap[px]];
            if (!c) c = ((x0 + px + y0 + py) % period) < lw ? HATCH_ARGB : MASK_BG_ARGB;
            dst[px] = c;
        }
    }
}

static void set_argb(cairo_t *cr, uint32_t c) {
    cairo_set_source_rgb(cr, ((c >> 16) & 255) / 255.0, ((c >> 8) & 255) / 255.0, (c & 255) / 255.0);
}

static tsc_status_t draw_cells_vector(cairo_t *cr, const pstate_t *ps) {
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, ps->nc, ps->nr);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
        tsc_status_t st = tsc_error_set(TSC_ERR_EXTERNAL, "heatmap: cairo_image_surface_create(%dx%d): %s", ps->nc,
                                        ps->nr, cairo_status_to_string(cairo_surface_status(img)));
        cairo_surface_destroy(img);
        return st;
    }
    cairo_surface_flush(img);
    unsigned char *data = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    for (int r = 0; r < ps->nr; r++) memcpy(data + (size_t)r * stride, ps->argb + (size_t)r * ps->nc, (size_t)ps->nc * 4);
    cairo_surface_mark_dirty(img);
    const rect_t *pl = &ps->plot;
    cairo_save(cr);
    set_argb(cr, MASK_BG_ARGB);
    cairo_rectangle(cr, pl->x, pl->y, pl->w, pl->h);
    cairo_fill(cr);
    cairo_translate(cr, pl->x, pl->y);
    cairo_scale(cr, pl->w / ps->nc, pl->h / ps->nr);
    cairo_set_source_surface(cr, img, 0, 0);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
    cairo_rectangle(cr, 0, 0, ps->nc, ps->nr);
    cairo_fill(cr);
    cairo_restore(cr);
    cairo_surface_destroy(img);
    /* Hatch over the masked blocks: clip to their row runs, then diagonal lines. */
    int any = 0;
    cairo_save(cr);
    double cw = pl->w / ps->nc, chh = pl->h / ps->nr;
    for (int r = 0; r < ps->nr; r++) {
        const uint8_t *mrow = ps->masked + (size_t)r * ps->nc;
        for (int c = 0; c < ps->nc;) {
            if (!mrow[c]) { c++; continue; }
            int c0 = c;
            while (c < ps->nc && mrow[c]) c++;
            cairo_rectangle(cr, pl->x + c0 * cw, pl->y + r * chh, (c - c0) * cw, chh);
            any = 1;
        }
    }
    if (any) {
        cairo_clip(cr);
        set_argb(cr, HATCH_ARGB);
        cairo_set_line_width(cr, HATCH_WIDTH_PT);
        for (double k = pl->x + pl->y; k < pl->x + pl->w + pl->y + pl->h + HATCH_PERIOD_PT; k += HATCH_PERIOD_PT) {
            cairo_move_to(cr, k - pl->y, pl->y);
            cairo_line_to(cr, k - (pl->y + pl->h), pl->y + pl->h);
        }
        cairo_stroke(cr);
    } else cairo_new_path(cr);
    cairo_restore(cr);
    return TSC_OK;
}

static void draw_frame(cairo_t *cr, const rect_t *r, double lw) {
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, lw);
    cairo_rectangle(cr, r->x - lw / 2, r->y - lw / 2, r->w + lw, r->h + lw);
    cairo_stroke(cr);
}

static void draw_axes(const text_t *tx, const tsc_heatmap_opts_t *o, const tsc_heatmap_panel_t *p, const pstate_t *ps,
                      const layout_t *L, int idx, int n) {
    cairo_t *cr = tx->cr;
    double F = L->F, tick = 0.25 * F, lw = 0.5;
    const rect_t *pl = &ps->plot;
    draw_frame(cr, pl, lw);
    int vals[64];
    /* x axis: source index i sits at shown position (i + 0.5) / fx of nc cells. */
    int k;
    double maxlw = 0;
    if (p->xtick_labels) {
        maxlw = labels_width(tx, p->xtick_labels, p->cols, F);
        int kk = (int)(pl->w / ((ps->xrot ? L->line_h : maxlw) + 0.6 * F));
        if (kk < 1) kk = 1;
        int stride = (p->cols + kk - 1) / kk;
        k = 0;
        for (int j = 0; j < p->cols && k < 64; j += stride) vals[k++] = j + p->x_origin;
    } else {
        char b[32];
        snprintf(b, sizeof b, "%d", p->x_origin + p->cols - 1);
        text_size(tx, b, F, 0, 0, &maxlw, NULL);
        k = index_ticks(p->cols, p->x_origin, pl->w, maxlw + 1.5 * F, vals, 64);
    }
    cairo_set_line_width(cr, lw);
    for (int t = 0; t < k; t++) {
        int j = vals[t] - p->x_origin;
        double x = pl->x + ((j + 0.5) / ps->fx) * pl->w / ps->nc;
        cairo_move_to(cr, x, pl->y + pl->h + lw);
        cairo_line_to(cr, x, pl->y + pl->h + lw + tick);
        cairo_stroke(cr);
        char b[32];
        const char *s = b;
        if (p->xtick_labels) s = p->xtick_labels[j] ? p->xtick_labels[j] : "";
        else snprintf(b, sizeof b, "%d", vals[t]);
        if (ps->xrot) text_draw(tx, s, F, 0, 0, x, pl->y + pl->h + lw + tick + 0.1 * F, 1, 0.5, -M_PI / 2);
        else text_draw(tx, s, F, 0, 0, x, pl->y + pl->h + lw + tick + 0.1 * F, 0.5, 0, 0);
    }
    /* y axis, row 0 at the top. */
    if (p->ytick_labels) {
        int kk = (int)(pl->h / (L->line_h * 1.1));
        if (kk < 1) kk = 1;
        int stride = (p->rows + kk - 1) / kk;
        k = 0;
        for (int i = 0; i < p->rows && k < 64; i += stride) vals[k++] = i + p->y_origin;
    } else k = index_ticks(p->rows, p->y_origin, pl->h, 2.2 * F, vals, 64);
    double ytw = 0;
    for (int t = 0; t < k; t++) {
        int i = vals[t] - p->y_origin;
        double y = pl->y + ((i + 0.5) / ps->fy) * pl->h / ps->nr;
        cairo_move_to(cr, pl->x - lw, y);
        cairo_line_to(cr, pl->x - lw - tick, y);
        cairo_stroke(cr);
        char b[32];
        const char *s = b;
        if (p->ytick_labels) s = p->ytick_labels[i] ? p->ytick_labels[i] : "";
        else snprintf(b, sizeof b, "%d", vals[t]);
        double w;
        text_size(tx, s, F, 0, 0, &w, NULL);
        if (w > ytw) ytw = w;
        text_draw(tx, s, F, 0, 0, pl->x - lw - tick - 0.2 * F, y, 1, 0.5, 0);
    }
    if (p->xlabel && *p->xlabel)
        text_draw(tx, p->xlabel, F, 0, 0, pl->x + pl->w / 2,
                  pl->y + pl->h + lw + tick + 0.2 * F + (ps->xrot ? maxlw : L->line_h), 0.5, 0, 0);
    if (p->ylabel && *p->ylabel)
        text_draw(tx, p->ylabel, F, 0, 0, pl->x - lw - tick - 0.4 * F - ytw, pl->y + pl->h / 2, 0.5, 1, -M_PI / 2);
    char title[256];
    panel_title(o, p, idx, n, title, sizeof title);
    if (title[0]) text_draw(tx, title, F, 1, ps->title_w, pl->x + pl->w / 2, pl->y - 0.25 * F, 0.5, 1, 0);
}

/* Raster colour bar: exact end colours (top pixel row t = 1, bottom row t = 0). */
static void fill_cbar_raster(cairo_surface_t *img, const rect_t *cb, double scale, const uint32_t *lut) {
    unsigned char *data = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    int x0 = (int)lround(cb->x * scale), y0 = (int)lround(cb->y * scale);
    int pw = (int)lround(cb->w * scale), ph = (int)lround(cb->h * scale);
    for (int py = 0; py < ph; py++) {
        double t = ph > 1 ? 1.0 - (double)py / (ph - 1) : 1.0;
        uint32_t c = lut[(int)(t * (TSC_CMAP_LUT_N - 1) + 0.5)];
        uint32_t *dst = (uint32_t *)(void *)(data + (size_t)(y0 + py) * stride) + x0;
        for (int px = 0; px < pw; px++) dst[px] = c;
    }
}

static tsc_status_t draw_cbar(const text_t *tx, const tsc_heatmap_opts_t *o, const pstate_t *ps, const layout_t *L,
                              const uint32_t *lut, int raster) {
    cairo_t *cr = tx->cr;
    const rect_t *cb = &ps->cbar;
    double F = L->F, lw = 0.5;
    enum { N = 256 };
    if (!raster) {  /* vector: a 1 x 256 image, nearest-neighbour */
        cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, N);
        if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
            cairo_surface_destroy(img);
            return tsc_error_set(TSC_ERR_EXTERNAL, "heatmap: cairo_image_surface_create for the colour bar failed");
        }
        cairo_surface_flush(img);
        unsigned char *data = cairo_image_surface_get_data(img);
        int stride = cairo_image_surface_get_stride(img);
        for (int k = 0; k < N; k++) {  /* top row is t = 1 */
            int li = (int)((double)(N - 1 - k) / (N - 1) * (TSC_CMAP_LUT_N - 1) + 0.5);
            *(uint32_t *)(void *)(data + (size_t)k * stride) = lut[li];
        }
        cairo_surface_mark_dirty(img);
        cairo_save(cr);
        cairo_translate(cr, cb->x, cb->y);
        cairo_scale(cr, cb->w, cb->h / N);
        cairo_set_source_surface(cr, img, 0, 0);
        cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
        cairo_rectangle(cr, 0, 0, 1, N);
        cairo_fill(cr);
        cairo_restore(cr);
        cairo_surface_destroy(img);
    }
    draw_frame(cr, cb, lw);
    double ticks[16];
    char labels[16][40];
    int k, mt = (int)(cb->h / (2.0 * F));
    if (mt < 2) mt = 2;
    if (mt > 8) mt = 8;
    cbar_tick_labels(&ps->norm, mt, ticks, labels, &k);
    cairo_set_line_width(cr, lw);
    for (int i = 0; i < k; i++) {
        double y = cb->y + cb->h * (1 - tsc_norm_apply(&ps->norm, ticks[i]));
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_move_to(cr, cb->x + cb->w + lw, y);
        cairo_line_to(cr, cb->x + cb->w + lw + 0.25 * F, y);
        cairo_stroke(cr);
        text_draw(tx, labels[i], F, 0, 0, cb->x + cb->w + lw + 0.45 * F, y, 0, 0.5, 0);
    }
    char label[512];
    const char *lab = o->cbar_label ? o->cbar_label : "";
    if (o->cbar_units && *o->cbar_units) snprintf(label, sizeof label, "%s%s[%s]", lab, *lab ? " " : "", o->cbar_units);
    else snprintf(label, sizeof label, "%s", lab);
    if (label[0])
        text_draw(tx, label, F, 0, 0, cb->x + cb->w + lw + 0.45 * F + L->cb_tick_w + 0.3 * F, cb->y + cb->h / 2, 0.5, 0,
                  -M_PI / 2);
    return TSC_OK;
}

/* ---------------------------------------------------------------- the figure */

static tsc_status_t check_args(const tsc_heatmap_opts_t *o, const tsc_heatmap_panel_t *p, int n) {
    if (!o || !p || n < 1 || n > MAX_PANELS)
        return tsc_error_set(TSC_ERR_ARG, "heatmap: expected options and 1..%d panels, got %d", MAX_PANELS, n);
    if (!(o->width_in > 0.5 && o->width_in < 100 && o->height_in > 0.5 && o->height_in < 100))
        return tsc_error_set(TSC_ERR_ARG, "heatmap: figure size %gx%g in outside (0.5, 100) inches", o->width_in,
                             o->height_in);
    if (!(o->font_pt >= MIN_FONT_PT && o->font_pt <= 72))
        return tsc_error_set(TSC_ERR_ARG, "heatmap: font size %g pt: expected 7..72 pt (legible in print)", o->font_pt);
    if ((unsigned)o->cmap >= TSC_CMAP_COUNT) return tsc_error_set(TSC_ERR_ARG, "heatmap: unknown colour map %d", (int)o->cmap);
    if ((unsigned)o->pool > TSC_POOL_NONE) return tsc_error_set(TSC_ERR_ARG, "heatmap: unknown pooling %d", (int)o->pool);
    for (int i = 0; i < n; i++)
        if (!p[i].data || p[i].rows < 1 || p[i].cols < 1)
            return tsc_error_set(TSC_ERR_ARG, "heatmap: panel %d: expected data of at least 1x1, got %dx%d%s", i,
                                 p[i].rows, p[i].cols, p[i].data ? "" : " (NULL data)");
    return TSC_OK;
}

static void free_states(pstate_t *ps, int n) {
    if (!ps) return;
    for (int i = 0; i < n; i++) { free(ps[i].argb); free(ps[i].masked); }
    free(ps);
}

/* The whole figure on cr (user units = points). img/scale: the raster target for direct pixel
 * writes (scale = pixels per point), or NULL/0 for vector drawing. */
static tsc_status_t draw_figure(cairo_t *cr, cairo_surface_t *img, double scale, const tsc_heatmap_opts_t *o,
                                const tsc_heatmap_panel_t *p, int n, tsc_heatmap_info_t *info) {
    tsc_status_t st = check_args(o, p, n);
    if (st) return st;
    pstate_t *ps = calloc((size_t)n, sizeof *ps);
    uint32_t *lut = malloc(TSC_CMAP_LUT_N * sizeof *lut);
    int *colmap = NULL;
    if (!ps || !lut) { free(ps); free(lut); return tsc_error_set(TSC_ERR_NOMEM, "heatmap: out of memory"); }
    tsc_cmap_fill_lut(o->cmap, lut, TSC_CMAP_LUT_N);
    text_t tx = {cr, o->font_family && *o->font_family ? o->font_family : "DejaVu Sans"};

    /* Scales. */
    double glo = INFINITY, ghi = -INFINITY, gamax = 0, gpmin = INFINITY;
    for (int i = 0; i < n; i++) {
        panel_stats(&p[i], &ps[i]);
        glo = fmin(glo, ps[i].lo); ghi = fmax(ghi, ps[i].hi);
        gamax = fmax(gamax, ps[i].amax); gpmin = fmin(gpmin, ps[i].pmin);
    }
    for (int i = 0; i < n && !st; i++) {
        if (o->fixed_norm) {
            const tsc_norm_t *src = o->per_panel_scale ? &p[i].norm : &o->norm;
            st = tsc_norm_init(&ps[i].norm, src->kind, src->vmin, src->vmax);
            if (st) st = tsc_error_wrap(st, "heatmap panel %d: ", i);
        } else if (o->per_panel_scale) norm_from_stats(&ps[i].norm, o->norm_kind, ps[i].lo, ps[i].hi, ps[i].amax, ps[i].pmin);
        else norm_from_stats(&ps[i].norm, o->norm_kind, glo, ghi, gamax, gpmin);
    }
    layout_t L;
    memset(&L, 0, sizeof L);
    if (!st) {
        L.W = o->width_in * 72.0; L.H = o->height_in * 72.0; L.F = o->font_pt;
        L.small = fmax(MIN_FONT_PT, 0.9 * o->font_pt);
        L.m = 0.5 * L.F;
        text_size(&tx, "Ag", L.F, 0, 0, NULL, &L.line_h);
        text_size(&tx, "Ag", L.small, 0, 0, NULL, &L.small_h);
        L.cb_total = 0;
        for (int i = 0; i < n; i++) {
            double tw, w = cbar_width(&tx, o, &ps[i].norm, L.F, L.line_h, &tw);
            if (w > L.cb_total) { L.cb_total = w; L.cb_tick_w = tw; }
        }
        /* Notes depend on the pooling, pooling on the plot size, the plot size on the notes: two
         * rounds settle it (the note's line count is what matters). */
        for (int round = 0; round < 3 && !st; round++) {
            char before[sizeof L.notes_text];
            memcpy(before, L.notes_text, sizeof before);
            st = do_layout(&tx, o, p, ps, n, &L, img ? scale : 0);
            for (int i = 0; i < n && !st; i++) st = choose_pooling(o, &p[i], &ps[i], img ? scale : 0);
            if (!st) compose_notes(o, p, ps, n, &L);
            if (!st && strcmp(before, L.notes_text) == 0) break;
        }
    }
    for (int i = 0; i < n && !st; i++) st = panel_pool(&p[i], &ps[i], o->pool, lut);

    if (!st) {
        cairo_save(cr);
        cairo_set_source_rgb(cr, 1, 1, 1);
        cairo_rectangle(cr, 0, 0, L.W, L.H);
        cairo_fill(cr);
        cairo_restore(cr);
        for (int i = 0; i < n && !st && !img; i++) st = draw_cells_vector(cr, &ps[i]);
    }
    if (!st) {
        for (int i = 0; i < n; i++) draw_axes(&tx, o, &p[i], &ps[i], &L, i, n);
        for (int i = 0; i < n && !st; i++)
            if (ps[i].has_cbar) st = draw_cbar(&tx, o, &ps[i], &L, lut, img != NULL);
        if (o->title && *o->title) text_draw(&tx, o->title, L.F * 1.1, 1, L.title.w, L.W / 2, L.title.y, 0.5, 0, 0);
        if (L.notes_text[0]) text_draw(&tx, L.notes_text, L.small, 0, L.notes.w, L.notes.x, L.notes.y, 0, 0, 0);
        /* Raster cells last, so they own every pixel of their rectangles (no antialiased frame
         * edge bleeds into the first row of cells). */
        if (img && !st) {
            cairo_surface_flush(img);
            int maxw = 1;
            for (int i = 0; i < n; i++) maxw = (int)fmax(maxw, lround(ps[i].plot.w * scale));
            colmap = malloc((size_t)maxw * sizeof *colmap);
            if (!colmap) st = tsc_error_set(TSC_ERR_NOMEM, "heatmap: out of memory");
            for (int i = 0; i < n && !st; i++) {
                fill_cells_raster(img, &ps[i], scale, colmap);
                if (ps[i].has_cbar) fill_cbar_raster(img, &ps[i].cbar, scale, lut);
            }
            cairo_surface_mark_dirty(img);
        }
        if (cairo_status(cr) != CAIRO_STATUS_SUCCESS)
            st = tsc_error_set(TSC_ERR_EXTERNAL, "heatmap: cairo drawing failed: %s", cairo_status_to_string(cairo_status(cr)));
    }
    if (!st && info) {
        double u = img ? scale : 1.0;
        for (int i = 0; i < n; i++) {
            tsc_heatmap_info_t *f = &info[i];
            f->plot_x = ps[i].plot.x * u; f->plot_y = ps[i].plot.y * u;
            f->plot_w = ps[i].plot.w * u; f->plot_h = ps[i].plot.h * u;
            if (img) {
                f->plot_x = round(f->plot_x); f->plot_y = round(f->plot_y);
                f->plot_w = round(f->plot_w); f->plot_h = round(f->plot_h);
            }
            f->cbar_x = ps[i].cbar.x * u; f->cbar_y = ps[i].cbar.y * u;
            f->cbar_w = ps[i].cbar.w * u; f->cbar_h = ps[i].cbar.h * u;
            if (img) {
                f->cbar_x = round(f->cbar_x); f->cbar_y = round(f->cbar_y);
                f->cbar_w = round(f->cbar_w); f->cbar_h = round(f->cbar_h);
            }
            f->shown_rows = ps[i].nr; f->shown_cols = ps[i].nc;
            f->pool_rows = ps[i].fy; f->pool_cols = ps[i].fx;
            f->pool = o->pool;
            f->n_nonfinite = ps[i].n_bad; f->n_masked = ps[i].n_masked;
            f->norm = ps[i].norm;
            snprintf(f->note, sizeof f->note, "%s", ps[i].note);
        }
    }
    free(colmap);
    free(lut);
    free_states(ps, n);
    return st;
}

tsc_status_t tsc_heatmap_draw(cairo_t *cr, const tsc_heatmap_opts_t *o, const tsc_heatmap_panel_t *p, int n,
                              tsc_heatmap_info_t *info) {
    if (!cr) return tsc_error_set(TSC_ERR_ARG, "heatmap: NULL cairo context");
    return draw_figure(cr, NULL, 0, o, p, n, info);
}

tsc_status_t tsc_heatmap_render(const tsc_heatmap_opts_t *o, const tsc_heatmap_panel_t *p, int n,
                                cairo_surface_t **out, tsc_heatmap_info_t *info) {
    if (!out) return tsc_error_set(TSC_ERR_ARG, "heatmap: NULL output surface pointer");
    *out = NULL;
    tsc_status_t st = check_args(o, p, n);
    if (st) return st;
    if (!(o->dpi >= 10 && o->dpi <= 2400))
        return tsc_error_set(TSC_ERR_ARG, "heatmap: dpi %g outside [10, 2400]", o->dpi);
    int w = (int)lround(o->width_in * o->dpi), h = (int)lround(o->height_in * o->dpi);
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
        st = tsc_error_set(TSC_ERR_EXTERNAL, "heatmap: cairo_image_surface_create(%dx%d): %s", w, h,
                           cairo_status_to_string(cairo_surface_status(img)));
        cairo_surface_destroy(img);
        return st;
    }
    cairo_t *cr = cairo_create(img);
    double scale = o->dpi / 72.0;
    cairo_scale(cr, scale, scale);
    st = draw_figure(cr, img, scale, o, p, n, info);
    cairo_destroy(cr);
    if (st) { cairo_surface_destroy(img); return st; }
    cairo_surface_flush(img);
    *out = img;
    return TSC_OK;
}

tsc_status_t tsc_heatmap_write(const tsc_heatmap_opts_t *o, const tsc_heatmap_panel_t *p, int n, const char *path,
                               tsc_image_format_t fmt, tsc_heatmap_info_t *info) {
    if (!path || !*path) return tsc_error_set(TSC_ERR_ARG, "heatmap: empty output path");
    tsc_status_t st = TSC_OK;
    if (fmt == TSC_IMG_AUTO && (st = tsc_image_format_from_path(path, &fmt))) return st;
    if ((st = check_args(o, p, n))) return st;
    if (fmt == TSC_IMG_PNG) {
        cairo_surface_t *img = NULL;
        tsc_strbuf_t png;
        tsc_strbuf_init(&png);
        st = tsc_heatmap_render(o, p, n, &img, info);
        if (!st && (st = tsc_surface_png(img, 1, &png))) st = tsc_error_wrap(st, "%s: ", path);
        cairo_surface_destroy(img);
        if (!st) st = tsc_out_write_all(path, png.p, png.len);
        tsc_strbuf_free(&png);
        return st;
    }
    tsc_sink_t k;
    if ((st = tsc_sink_open(&k, path, fmt, o->width_in * 72.0, o->height_in * 72.0, o->dpi))) return st;
    return tsc_sink_close(&k, draw_figure(k.cr, NULL, 0, o, p, n, info));
}
