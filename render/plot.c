/* plot.c: gnuplot scripts with inline data, and running gnuplot through pipes. See tsc_plot.h. */
#include "tsc_plot.h"
#include "tsc_surface.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIN_FONT_PT 7.0
#define STDERR_KEEP 4096        /* bytes of gnuplot's stderr kept for the error message */
#define GNUPLOT_IDLE_MS 120000  /* a gnuplot silent this long is stuck: killed, reported */

/* Okabe & Ito's colour-blind-safe palette (black last). */
static const char *const palette[] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7",
                                      "#e69f00", "#56b4e9", "#f0e442", "#000000"};

void tsc_plot_opts_init(tsc_plot_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->width_in = 3.25;
    o->height_in = 2.4;
    o->font_pt = 8.0;
    o->dpi = 300.0;
    o->xmin = o->xmax = o->ymin = o->ymax = NAN;
    o->max_points = 2000;
    o->font_family = "DejaVu Sans";
    o->gnuplot = "gnuplot";
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if p does not start one. */
static int utf8_len(const unsigned char *p) {
    int n = p[0] < 0x80 ? 1 : (p[0] & 0xE0) == 0xC0 ? 2 : (p[0] & 0xF0) == 0xE0 ? 3 : (p[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 2 && p[0] < 0xC2) return 0;  /* overlong */
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    return n;
}

char *tsc_plot_quote(const char *s) {
    if (!s) s = "";
    size_t n = 2;
    for (const char *p = s; *p; p++) n += *p == '\'' ? 2 : 1;
    char *out = malloc(n + 1), *q = out;
    if (!out) return NULL;
    *q++ = '\'';
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        int k = utf8_len(p);
        if (k > 1) { memcpy(q, p, (size_t)k); q += k; p += k; continue; }
        /* Invalid UTF-8 becomes '?' (it would make the SVG output invalid XML). */
        if (k == 0) *q++ = '?';
        else if (*p == '\'') { *q++ = '\''; *q++ = '\''; }
        else if (*p < 0x20 || *p == 0x7f) *q++ = ' ';
        else *q++ = (char)*p;
        p++;
    }
    *q++ = '\'';
    *q = '\0';
    return out;
}

/* The script is built in a tsc_strbuf_t (util/tsc_strbuf.h). */
#define sb_printf tsc_strbuf_printf
typedef tsc_strbuf_t sb_t;

/* Appends key + quoted s + suffix. */
static void sb_quoted(sb_t *b, const char *pre, const char *s, const char *post) {
    char *q = tsc_plot_quote(s);
    if (!q) { b->nomem = 1; return; }
    sb_printf(b, "%s%s%s", pre, q, post);
    free(q);
}

static int valid_color(const char *c) {
    if (!c || c[0] != '#' || strlen(c) != 7) return 0;
    for (int i = 1; i < 7; i++)
        if (!strchr("0123456789abcdefABCDEF", c[i])) return 0;
    return 1;
}

static double sx(const tsc_plot_series_t *s, size_t i) { return s->x ? s->x[i] : s->x_origin + (double)i; }

/* Writes series k's data block: "x y [ema]" per point, a blank line at each non-finite y. */
static void data_raw(sb_t *b, const tsc_plot_series_t *s, int k, double xoff) {
    sb_printf(b, "$d%d << EOD\n", k);
    double ema = NAN;
    for (size_t i = 0; i < s->n; i++) {
        double x = sx(s, i), y = s->y[i];
        if (!isfinite(x) || !isfinite(y)) { sb_printf(b, "\n"); continue; }
        ema = isnan(ema) ? y : s->ema_alpha * y + (1 - s->ema_alpha) * ema;
        sb_printf(b, "%.10g %.10g %.10g\n", x + xoff, y, s->ema_alpha > 0 ? ema : y);
    }
    sb_printf(b, "EOD\n");
}

/* Envelope block: per bin "x min max mean ema_at_bin_end" over bins of consecutive points. */
static void data_envelope(sb_t *b, const tsc_plot_series_t *s, int k, size_t bins) {
    sb_printf(b, "$d%d << EOD\n", k);
    double ema = NAN;
    for (size_t bi = 0; bi < bins; bi++) {
        size_t i0 = s->n * bi / bins, i1 = s->n * (bi + 1) / bins;
        double lo = INFINITY, hi = -INFINITY, sum = 0, xs = 0;
        size_t cnt = 0;
        for (size_t i = i0; i < i1; i++) {
            double x = sx(s, i), y = s->y[i];
            if (!isfinite(x) || !isfinite(y)) continue;
            ema = isnan(ema) ? y : s->ema_alpha * y + (1 - s->ema_alpha) * ema;
            if (y < lo) lo = y;
            if (y > hi) hi = y;
            sum += y; xs += x; cnt++;
        }
        if (!cnt) { sb_printf(b, "\n"); continue; }
        sb_printf(b, "%.10g %.10g %.10g %.10g %.10g\n", xs / cnt, lo, hi, sum / cnt, s->ema_alpha > 0 ? ema : sum / cnt);
    }
    sb_printf(b, "EOD\n");
}

/* Tick labels: gnuplot's own choice prints labels that collide on a 3.25 in figure and, over a
 * narrow range far from zero, identical ones ("0.0039" five times). So the ticks of a linear axis
 * are chosen here: a 1-2-5 step that leaves room for k labels (whole numbers only on an axis whose
 * data are all integers: steps, tokens, features, heads), each label printed with as many
 * significant digits as the step needs, written as an explicit list; the range is padded a little
 * (so a value at an end, such as key 0, is not hidden under the axis) and fixed, so no tick falls
 * outside the data's span rounded to the step. Labels equal after printing are never emitted. */
static void axis_tics(sb_t *b, const char *ax, double lo, double hi, int k, int integer, int set_lo, int set_hi,
                      double range[2]) {
    if (!(hi >= lo) || !isfinite(lo) || !isfinite(hi)) return;
    if (hi == lo) { double d = lo ? fabs(lo) * 0.5 : 1; lo -= d, hi += d; }
    if (k < 2) k = 2;
    static const double mult[3] = {1, 2, 5};
    double e0 = floor(log10((hi - lo) / k)) - 1, step = 0;
    for (int j = 0; j < 60; j++) {
        step = mult[j % 3] * pow(10, e0 + j / 3);
        if (integer && step < 1) continue;
        if (ceil(hi / step - 1e-9) - floor(lo / step + 1e-9) <= k) break;
    }
    double mag = fmax(fabs(lo), fabs(hi));
    int digits = (int)(floor(log10(mag > 0 ? mag : step)) - floor(log10(step))) + 2;
    if (mag >= 1 && mag < 1e7 && digits < (int)floor(log10(mag)) + 1) digits = (int)floor(log10(mag)) + 1; /* no 1e+03 */
    if (digits < 1) digits = 1;
    if (digits > 15) digits = 15;
    double pad = 0.02 * (hi - lo);
    if (integer && pad < 0.5 && hi - lo < 20) pad = 0.5 * fmin(1.0, (hi - lo) / 4 + 0.25);
    double rlo = set_lo ? lo : lo - pad, rhi = set_hi ? hi : hi + pad;
    if (range) range[0] = rlo, range[1] = rhi;
    sb_printf(b, "set %srange [%.10g:%.10g]\nset %stics (", ax, rlo, rhi, ax);
    char prev[48] = "", lab[48];
    int first = 1;
    for (double i = ceil(rlo / step - 1e-9); i * step <= rhi * (1 + 1e-12) + 1e-300 && i - ceil(rlo / step) < 200; i++) {
        double v = i * step;
        if (fabs(v) < step * 1e-9) v = 0;
        snprintf(lab, sizeof lab, "%.*g", digits, v);
        if (!strcmp(lab, prev)) continue;
        sb_printf(b, "%s'%s' %.15g", first ? "" : ", ", lab, v);
        snprintf(prev, sizeof prev, "%s", lab);
        first = 0;
    }
    sb_printf(b, ")\n");
}

/* Data range of the series on one axis (which: 'x', 'y' for the left y axis, '2' for the right). */
static void data_range(const tsc_plot_series_t *s, int n, char which, double *lo, double *hi, int *integer) {
    *lo = INFINITY, *hi = -INFINITY, *integer = 1;
    for (int k = 0; k < n; k++) {
        if (which != 'x' && (s[k].y2 != 0) != (which == '2')) continue;
        for (size_t i = 0; i < s[k].n; i++) {
            double v = which == 'x' ? sx(&s[k], i) : s[k].y[i];
            if (!isfinite(v) || (which != 'x' && !isfinite(sx(&s[k], i)))) continue;
            if (v < *lo) *lo = v;
            if (v > *hi) *hi = v;
            *integer &= v == floor(v);
        }
    }
}

/* The ticks of every linear axis (axis_tics); yr: the left y axis' range as set (NaN when not set here). */
static void all_tics(sb_t *b, const tsc_plot_opts_t *o, const tsc_plot_series_t *s, int n, int n_bars, double yr[2]) {
    double lo, hi;
    int integer;
    double wpt = o->width_in * 72 * 0.75, hpt = o->height_in * 72 * 0.55;
    if (!o->logx && !(o->categories && o->n_categories)) {
        data_range(s, n, 'x', &lo, &hi, &integer);
        if (isfinite(o->xmin)) lo = o->xmin;
        if (isfinite(o->xmax)) hi = o->xmax;
        char a[40], c[40];
        snprintf(a, sizeof a, "%g", lo);
        snprintf(c, sizeof c, "%g", hi);
        size_t chars = strlen(a) > strlen(c) ? strlen(a) : strlen(c);
        double label_pt = (double)chars * 0.62 * o->font_pt + 2.0 * o->font_pt;
        axis_tics(b, "x", lo, hi, (int)(wpt / label_pt), integer, isfinite(o->xmin), isfinite(o->xmax), NULL);
    }
    for (int ax = 0; ax < 2; ax++) {
        if (ax ? o->logy2 : o->logy) continue;
        data_range(s, n, ax ? '2' : 'y', &lo, &hi, &integer);
        if (!isfinite(lo)) continue;
        int bars_from_zero = 0;
        if (!ax && n_bars && !isfinite(o->ymin) && lo >= 0) lo = 0, bars_from_zero = 1;
        if (!ax && isfinite(o->ymin)) lo = o->ymin;
        if (!ax && isfinite(o->ymax)) hi = o->ymax;
        axis_tics(b, ax ? "y2" : "y", lo, hi, (int)(hpt / (1.6 * o->font_pt)) + 1, integer,
                  bars_from_zero || (!ax && isfinite(o->ymin)), !ax && isfinite(o->ymax), ax ? NULL : yr);
    }
}

static const char *style_with(tsc_plot_style_t st) {
    switch (st) {
    case TSC_PLOT_POINTS: return "points pt 7 ps 0.35";
    case TSC_PLOT_LINESPOINTS: return "linespoints lw 1.5 pt 7 ps 0.35";
    case TSC_PLOT_STEPS: return "steps lw 1.5";
    case TSC_PLOT_IMPULSES: return "impulses lw 1.5";
    default: return "lines lw 1.5";
    }
}

/* The last finite point's y of series q (NaN when none); its x into *x when x is not NULL. */
static double last_y_at(const tsc_plot_series_t *q, double *x) {
    for (size_t i = q->n; i-- > 0;)
        if (isfinite(q->y[i]) && isfinite(sx(q, i))) {
            if (x) *x = sx(q, i);
            return q->y[i];
        }
    return NAN;
}

/* opts.end_labels: each named left-axis series' name right of the plot, level with its last point
 * (graph coordinates from the y range yr, log when logy), in its colour; sorted by height and nudged
 * apart by a line of text, kept within the plot's height; the right margin made wide enough. A series
 * that ends well before the others (a run stopped early, e.g. at a divergence) is named where it ends,
 * with a cross there, so its label does not sit level with a point at the right edge it never reached. */
static void end_labels(sb_t *b, const tsc_plot_opts_t *o, const tsc_plot_series_t *s, int n, const double yr[2],
                       const char *const *col) {
    int idx[64], m = 0;
    double g[64], xmin = INFINITY, xmax = -INFINITY;
    size_t chars = 0;
    for (int k = 0; k < n; k++)
        for (size_t i = 0; !s[k].y2 && i < s[k].n; i++)
            if (isfinite(s[k].y[i]) && isfinite(sx(&s[k], i))) {
                double x = sx(&s[k], i);
                if (x < xmin) xmin = x;
                if (x > xmax) xmax = x;
            }
    for (int k = 0; k < n && m < 64; k++) {
        double xe = NAN, y = last_y_at(&s[k], &xe);
        if (!s[k].name || !*s[k].name || s[k].y2 || !isfinite(y) || !(yr[1] > yr[0])) continue;
        if (o->logy && (!(y > 0) || !(yr[0] > 0))) continue;
        if (xmax > xmin && xe < xmax - 0.05 * (xmax - xmin) && y >= yr[0] && y <= yr[1]) {
            char *t = tsc_plot_quote(s[k].name);
            if (!t) { b->nomem = 1; return; }
            sb_printf(b, "set label %s at first %.17g, first %.17g left offset char 0.6,0.5 tc rgb '%s' point pt 2 "
                         "ps 0.8 lc rgb '%s' front\n", t, xe, y, col[k], col[k]);
            free(t);
            continue;
        }
        g[m] = o->logy ? (log(y) - log(yr[0])) / (log(yr[1]) - log(yr[0])) : (y - yr[0]) / (yr[1] - yr[0]);
        idx[m++] = k;
        size_t c = strlen(s[k].name);
        if (c > chars) chars = c;
    }
    if (!m) return;
    for (int i = 1; i < m; i++) /* insertion sort by height */
        for (int j = i; j > 0 && g[j] < g[j - 1]; j--) {
            double t = g[j]; g[j] = g[j - 1], g[j - 1] = t;
            int u = idx[j]; idx[j] = idx[j - 1], idx[j - 1] = u;
        }
    const double sep = 1.15 * o->font_pt / (o->height_in * 72 * 0.6); /* a line of text, in graph units */
    for (int i = 1; i < m; i++) if (g[i] < g[i - 1] + sep) g[i] = g[i - 1] + sep;
    if (g[m - 1] > 1) { g[m - 1] = 1; for (int i = m - 1; i-- > 0;) if (g[i] > g[i + 1] - sep) g[i] = g[i + 1] - sep; }
    if (chars > 40) chars = 40;
    double right = 1 - ((double)chars * 0.58 * o->font_pt + 1.2 * o->font_pt) / (o->width_in * 72);
    sb_printf(b, "set rmargin at screen %.4f\n", right < 0.55 ? 0.55 : right);
    for (int i = 0; i < m; i++) {
        char *t = tsc_plot_quote(s[idx[i]].name);
        if (!t) { b->nomem = 1; return; }
        sb_printf(b, "set label %s at graph 1.02, graph %.4f left tc rgb '%s' front\n", t, g[i], col[idx[i]]);
        free(t);
    }
}

/* The script's terminal, output, labels, axes and ranges. out_path NULL: gnuplot's stdout. */
static void script_setup(sb_t *b, const tsc_plot_opts_t *o, const tsc_plot_series_t *s, int n, const char *out_path,
                         tsc_image_format_t fmt, const char *font, int n_bars, int any_y2, const char *const *col) {
    sb_printf(b, "# tilescope plot script (data inline)\nreset\nset encoding utf8\n");
    /* Terminal sizes and font scales: gnuplot's cairo terminals take font sizes at 96 dpi, so
     * pdfcairo needs fontscale 0.75 and pngcairo dpi/96 for the text to measure font_pt points
     * on the printed page. The svg terminal's units are drawn as points. */
    switch (fmt) {
    case TSC_IMG_PNG:
        sb_printf(b, "set terminal pngcairo noenhanced size %ld,%ld fontscale %g linewidth %g",
                  lround(o->width_in * o->dpi), lround(o->height_in * o->dpi), o->dpi / 96.0, o->dpi / 96.0);
        break;
    case TSC_IMG_PDF:
        sb_printf(b, "set terminal pdfcairo noenhanced size %gin,%gin fontscale 0.75 linewidth 0.75", o->width_in,
                  o->height_in);
        break;
    default:
        sb_printf(b, "set terminal svg noenhanced size %ld,%ld", lround(o->width_in * 72), lround(o->height_in * 72));
        break;
    }
    sb_quoted(b, " font ", font, "\n");
    if (out_path) sb_quoted(b, "set output ", out_path, "\n");
    if (o->title && *o->title) sb_quoted(b, "set title ", o->title, "\n");
    if (o->xlabel && *o->xlabel) sb_quoted(b, "set xlabel ", o->xlabel, "\n");
    if (o->ylabel && *o->ylabel) sb_quoted(b, "set ylabel ", o->ylabel, "\n");
    if (o->y2label && *o->y2label) sb_quoted(b, "set y2label ", o->y2label, "\n");
    sb_printf(b, "set grid lc rgb '#d0d0d0' lw 0.5\nset border lw 0.8\nset tics nomirror out scale 0.5\n");
    /* Below the plot by default: a key inside may hide the part of a curve that matters (the
     * explosion at the end of a loss curve). */
    if (o->end_labels) sb_printf(b, "unset key\n");
    else sb_printf(b, "set key %s samplen 2 spacing 1.0\n", o->key_inside ? "inside top right opaque" : "below center horizontal");
    if (o->logx) sb_printf(b, "set logscale x\nset format x '%%g'\n");
    if (o->logy) sb_printf(b, "set logscale y\nset format y '%%g'\n");
    if (any_y2) {
        sb_printf(b, "set y2tics nomirror out scale 0.5\n");
        if (o->logy2) sb_printf(b, "set logscale y2\nset format y2 '%%g'\n");
    }
    if (o->logx && (isfinite(o->xmin) || isfinite(o->xmax))) {
        char lo[40] = "*", hi[40] = "*";
        if (isfinite(o->xmin)) snprintf(lo, sizeof lo, "%.10g", o->xmin);
        if (isfinite(o->xmax)) snprintf(hi, sizeof hi, "%.10g", o->xmax);
        sb_printf(b, "set xrange [%s:%s]\n", lo, hi);
    }
    double yr[2] = {NAN, NAN};
    if (o->logy && (isfinite(o->ymin) || isfinite(o->ymax) || o->end_labels)) {
        /* end labels need the range: the data's positive values widened by 10%, unless given */
        double lo = INFINITY, hi = -INFINITY;
        for (int k = 0; k < n; k++)
            for (size_t i = 0; !s[k].y2 && i < s[k].n; i++)
                if (isfinite(s[k].y[i]) && s[k].y[i] > 0) lo = fmin(lo, s[k].y[i]), hi = fmax(hi, s[k].y[i]);
        if (isfinite(o->ymin)) lo = o->ymin;
        if (isfinite(o->ymax)) hi = o->ymax;
        if (o->end_labels && isfinite(lo) && isfinite(hi) && hi < 20 * lo) {
            /* less than about a decade: gnuplot's decade ticks would leave the axis bare; linear ones */
            axis_tics(b, "y", lo, hi, (int)(o->height_in * 72 * 0.55 / (1.6 * o->font_pt)) + 1, 0, isfinite(o->ymin),
                      isfinite(o->ymax), yr);
        } else {
            yr[0] = isfinite(o->ymin) ? o->ymin : lo / 1.1, yr[1] = isfinite(o->ymax) ? o->ymax : hi * 1.1;
            char a[40] = "*", c[40] = "*";
            if (isfinite(yr[0])) snprintf(a, sizeof a, "%.10g", yr[0]);
            if (isfinite(yr[1])) snprintf(c, sizeof c, "%.10g", yr[1]);
            sb_printf(b, "set yrange [%s:%s]\n", a, c);
        }
    }
    if (o->categories && o->n_categories) {
        sb_printf(b, "set xtics (");
        for (size_t i = 0; i < o->n_categories; i++) {
            sb_quoted(b, i ? ", " : "", o->categories[i], "");
            sb_printf(b, " %zu", i);
        }
        size_t chars = 0;
        for (size_t i = 0; i < o->n_categories; i++) chars += (o->categories[i] ? strlen(o->categories[i]) : 0) + 1;
        int crowded = (double)chars * 0.6 * o->font_pt > o->width_in * 72 * 0.75;
        sb_printf(b, ")%s\n", crowded ? " rotate by -45" : "");
        sb_printf(b, "set xrange [-0.6:%g]\n", o->n_categories - 0.4);
    }
    if (n_bars) {
        sb_printf(b, "set style fill solid 0.85 border lc rgb '#303030'\nset boxwidth %g absolute\n", 0.8 / n_bars);
    }
    all_tics(b, o, s, n, n_bars, yr);
    if (o->end_labels) end_labels(b, o, s, n, yr, col);
}

tsc_status_t tsc_plot_script(const tsc_plot_opts_t *o, const tsc_plot_series_t *s, int n, const char *out_path,
                             tsc_image_format_t fmt, char **script) {
    if (!script) return tsc_error_set(TSC_ERR_ARG, "plot: NULL script pointer");
    *script = NULL;
    if (!o || !s || n < 1) return tsc_error_set(TSC_ERR_ARG, "plot: expected options and at least one series");
    if (out_path && !*out_path) return tsc_error_set(TSC_ERR_ARG, "plot: empty output path");
    for (const unsigned char *p = (const unsigned char *)(out_path ? out_path : ""); *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return tsc_error_set(TSC_ERR_ARG, "plot: output path contains a control character");
    tsc_status_t st;
    if (fmt == TSC_IMG_AUTO && (st = tsc_image_format_from_path(out_path, &fmt))) return st;
    if (!(o->font_pt >= MIN_FONT_PT && o->font_pt <= 72))
        return tsc_error_set(TSC_ERR_ARG, "plot: font size %g pt: expected 7..72 pt (legible in print)", o->font_pt);
    if (!(o->width_in > 0.5 && o->width_in < 100 && o->height_in > 0.5 && o->height_in < 100))
        return tsc_error_set(TSC_ERR_ARG, "plot: figure size %gx%g in outside (0.5, 100) inches", o->width_in, o->height_in);
    if (fmt == TSC_IMG_PNG && !(o->dpi >= 10 && o->dpi <= 2400))
        return tsc_error_set(TSC_ERR_ARG, "plot: dpi %g outside [10, 2400]", o->dpi);
    int n_bars = 0, any_y2 = 0;
    for (int k = 0; k < n; k++) {
        if (!s[k].y || !s[k].n)
            return tsc_error_set(TSC_ERR_ARG, "plot: series %d ('%s') is empty: expected n >= 1 values", k,
                                 s[k].name ? s[k].name : "");
        if (s[k].color && !valid_color(s[k].color))
            return tsc_error_set(TSC_ERR_ARG, "plot: series %d: colour must be #rrggbb", k);
        if (!(s[k].ema_alpha >= 0 && s[k].ema_alpha <= 1))
            return tsc_error_set(TSC_ERR_ARG, "plot: series %d: ema_alpha %g outside [0, 1]", k, s[k].ema_alpha);
        if ((unsigned)s[k].style > TSC_PLOT_BARS) return tsc_error_set(TSC_ERR_ARG, "plot: series %d: unknown style", k);
        n_bars += s[k].style == TSC_PLOT_BARS;
        any_y2 |= s[k].y2 != 0;
    }
    size_t maxp = o->max_points >= 10 ? o->max_points : 10;
    const char *family = o->font_family && *o->font_family ? o->font_family : "DejaVu Sans";
    char font[160];
    snprintf(font, sizeof font, "%.120s,%g", family, o->font_pt);

    sb_t b;
    tsc_strbuf_init(&b);
    const char **col = malloc((size_t)n * sizeof *col); /* each series' colour, as the plot command draws it */
    if (!col) { tsc_strbuf_free(&b); return tsc_error_set(TSC_ERR_NOMEM, "plot: out of memory"); }
    for (int k = 0; k < n; k++) col[k] = s[k].color ? s[k].color : palette[(size_t)k % (sizeof palette / sizeof palette[0])];
    script_setup(&b, o, s, n, out_path, fmt, font, n_bars, any_y2, col);
    free(col);

    /* Data blocks. */
    int bar_i = 0, any_env = 0, any_ema = 0;
    for (int k = 0; k < n; k++) {
        if (s[k].style == TSC_PLOT_BARS) {
            double off = (bar_i - (n_bars - 1) / 2.0) * 0.8 / n_bars;
            data_raw(&b, &s[k], k, n_bars > 1 ? off : 0);
            bar_i++;
        } else if (s[k].n > maxp) {
            data_envelope(&b, &s[k], k, maxp);
            any_env = 1;
        } else data_raw(&b, &s[k], k, 0);
        if (s[k].ema_alpha > 0 && s[k].style != TSC_PLOT_BARS) any_ema = 1;
    }

    /* The plot command. */
    sb_printf(&b, "plot ");
    int first = 1;
    for (int k = 0; k < n; k++) {
        const tsc_plot_series_t *q = &s[k];
        size_t npal = sizeof palette / sizeof palette[0];
        const char *col = q->color ? q->color : palette[k % npal];
        /* the ninth series on reuses a colour: a dash type tells it apart */
        char dt[24];
        snprintf(dt, sizeof dt, " dt %d", q->dash > 0 ? q->dash : 1 + (int)((size_t)k / npal));
        const char *axes = q->y2 ? " axes x1y2" : "";
        char *title = tsc_plot_quote(q->name);
        if (!title) { b.nomem = 1; break; }
        const char *tt = q->name && *q->name ? "title " : "notitle";
        const char *tv = q->name && *q->name ? title : "";
#define SEP() do { sb_printf(&b, first ? "" : ", \\\n     "); first = 0; } while (0)
        if (q->style == TSC_PLOT_BARS) {
            SEP();
            sb_printf(&b, "$d%d using 1:2%s with boxes lc rgb '%s' %s%s", k, axes, col, tt, tv);
        } else if (q->n > maxp) {
            SEP();
            sb_printf(&b, "$d%d using 1:2:3%s with filledcurves fs transparent solid 0.3 noborder lc rgb '%s' notitle",
                      k, axes, col);
            SEP();
            sb_printf(&b, "$d%d using 1:%d%s with lines lw 1.5 lc rgb '%s'%s %s%s", k, q->ema_alpha > 0 ? 5 : 4, axes,
                      col, dt, tt, tv);
        } else if (q->ema_alpha > 0) {
            SEP();
            sb_printf(&b, "$d%d using 1:2%s with lines lw 0.5 lc rgb '#a0%s' notitle", k, axes, col + 1);
            SEP();
            sb_printf(&b, "$d%d using 1:3%s with lines lw 1.5 lc rgb '%s'%s %s%s", k, axes, col, dt, tt, tv);
        } else {
            SEP();
            sb_printf(&b, "$d%d using 1:2%s with %s lc rgb '%s'%s %s%s", k, axes, style_with(q->style), col,
                      q->style == TSC_PLOT_LINES || q->style == TSC_PLOT_LINESPOINTS || q->style == TSC_PLOT_STEPS ? dt : "",
                      tt, tv);
        }
        free(title);
    }
    /* Key entries that say how to read the figure (no data: NaN). */
    if (any_env) {
        SEP();
        sb_printf(&b, "NaN with filledcurves fs transparent solid 0.3 noborder lc rgb '#808080' "
                      "title 'band: min-max per bin; line: %s'", any_ema ? "EMA" : "bin mean");
    }
    if (any_ema && !any_env) {
        double a = 0;
        for (int k = 0; k < n; k++) if (s[k].ema_alpha > 0) { a = s[k].ema_alpha; break; }
        SEP();
        sb_printf(&b, "NaN with lines lw 0.5 lc rgb '#a0000000' title 'faint: raw; bold: EMA (a=%g)'", a);
    }
#undef SEP
    sb_printf(&b, "\nset output\n");
    if (b.nomem) { tsc_strbuf_free(&b); return tsc_error_set(TSC_ERR_NOMEM, "plot: out of memory building the gnuplot script"); }
    *script = tsc_strbuf_take(&b);
    return TSC_OK;
}

/* ---- running gnuplot ---- */

static tsc_status_t fail_start(const char *prog, int err) {
    if (err == ENOENT)
        return tsc_error_set(TSC_ERR_EXTERNAL, "gnuplot not found ('%s' is not on PATH): install it, e.g. "
                             "apt-get install gnuplot-nox", prog);
    return tsc_error_set(TSC_ERR_EXTERNAL, "cannot run gnuplot ('%s'): %s (apt-get install gnuplot-nox)", prog,
                         strerror(err));
}

/* A running gnuplot: its pid and our ends of its pipes (-1 when closed). */
typedef struct {
    pid_t pid;
    int in, out, err;  /* its stdin (we write the script), stdout (the image, or -1: merged into err), stderr */
} gp_proc_t;

static void close_fds(int *fds, int n) {
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) close(fds[i]), fds[i] = -1;
}

/* Starts prog with stdin, stdout and stderr on pipes (stdout into stderr's pipe unless
 * want_out); exec failures come back through a close-on-exec pipe. */
static tsc_status_t gp_spawn(const char *prog, int want_out, gp_proc_t *g) {
    int p[8] = {-1, -1, -1, -1, -1, -1, -1, -1}; /* in, err, ex, out: read end, write end */
    if (pipe(p) || pipe(p + 2) || pipe(p + 4) || fcntl(p[5], F_SETFD, FD_CLOEXEC) < 0 || (want_out && pipe(p + 6))) {
        int e = errno;
        close_fds(p, 8);
        return tsc_error_set(TSC_ERR_EXTERNAL, "plot: pipe() for gnuplot failed: %s", strerror(e));
    }
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close_fds(p, 8);
        return tsc_error_set(TSC_ERR_EXTERNAL, "plot: fork() for gnuplot failed: %s", strerror(e));
    }
    if (pid == 0) {
        /* Child: stdin from the script pipe, stdout into the image pipe (or the capture pipe), stderr captured. */
        dup2(p[0], 0);
        dup2(want_out ? p[7] : p[3], 1);
        dup2(p[3], 2);
        for (int i = 0; i < 8; i++)
            if (i != 5 && p[i] > 2) close(p[i]);
        char *argv[] = {(char *)prog, NULL};
        execvp(prog, argv);
        int e = errno;
        ssize_t w = write(p[5], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    close(p[0]), close(p[3]), close(p[5]);
    if (want_out) close(p[7]);
    int start_err = 0;
    ssize_t r = read(p[4], &start_err, sizeof start_err);  /* EOF (0) once exec succeeded */
    close(p[4]);
    if (r == (ssize_t)sizeof start_err) {
        close(p[1]), close(p[2]);
        if (want_out) close(p[6]);
        waitpid(pid, NULL, 0);
        return fail_start(prog, start_err);
    }
    *g = (gp_proc_t){pid, p[1], want_out ? p[6] : -1, p[2]};
    return TSC_OK;
}

/* Keeps the end of stderr (that is where gnuplot reports the error) in errbuf[STDERR_KEEP]. */
static void keep_tail(char *errbuf, size_t *errlen, const char *tmp, size_t k) {
    if (*errlen + k > STDERR_KEEP - 1) { /* k <= 4096 - 1 */
        size_t drop = *errlen + k - (STDERR_KEEP - 1);
        if (drop > *errlen) drop = *errlen;
        memmove(errbuf, errbuf + drop, *errlen - drop);
        *errlen -= drop;
    }
    memcpy(errbuf + *errlen, tmp, k);
    *errlen += k;
}

/* Feeds the script and drains stdout (into out) and stderr (errbuf) until both close.
 * Returns 1 when gnuplot stalled (killed), 0 otherwise; *write_errno: a failed script write. */
static int gp_pump(gp_proc_t *g, const char *script, tsc_strbuf_t *out, char *errbuf, size_t *errlen, int *write_errno) {
    const char *wp = script;
    size_t left = strlen(script);
    fcntl(g->in, F_SETFL, fcntl(g->in, F_GETFL) | O_NONBLOCK);
    while (g->err >= 0 || g->out >= 0) {
        struct pollfd pf[3];
        int np = 0, ie = -1, io = -1, iw = -1;
        if (g->err >= 0) ie = np, pf[np++] = (struct pollfd){.fd = g->err, .events = POLLIN};
        if (g->out >= 0) io = np, pf[np++] = (struct pollfd){.fd = g->out, .events = POLLIN};
        if (g->in >= 0) iw = np, pf[np++] = (struct pollfd){.fd = g->in, .events = POLLOUT};
        int pr = poll(pf, (nfds_t)np, GNUPLOT_IDLE_MS);
        if (pr < 0) { if (errno == EINTR) continue; break; }
        if (pr == 0) { kill(g->pid, SIGKILL); return 1; }
        char tmp[4096];
        if (ie >= 0 && pf[ie].revents) {
            ssize_t k = read(g->err, tmp, 1024);
            if (k > 0) keep_tail(errbuf, errlen, tmp, (size_t)k);
            else if (k == 0 || (errno != EINTR && errno != EAGAIN)) close_fds(&g->err, 1);
        }
        if (io >= 0 && pf[io].revents) {
            ssize_t k = read(g->out, tmp, sizeof tmp);
            if (k > 0) tsc_strbuf_append(out, tmp, (size_t)k);
            else if (k == 0 || (errno != EINTR && errno != EAGAIN)) close_fds(&g->out, 1);
        }
        if (iw >= 0 && pf[iw].revents) {
            ssize_t k = write(g->in, wp, left);
            if (k > 0) { wp += k; left -= (size_t)k; }
            else if (k < 0 && errno != EAGAIN && errno != EINTR) { *write_errno = errno; left = 0; }
            if (!left) close_fds(&g->in, 1);
        }
    }
    return 0;
}

/* The outcome of a finished gnuplot as a status, with its stderr flattened to one line. */
static tsc_status_t gp_result(const char *prog, int status, int timed_out, int write_errno, char *errbuf, size_t errlen) {
    errbuf[errlen] = '\0';
    for (size_t i = 0; i < errlen; i++) if (errbuf[i] == '\n' || errbuf[i] == '\r' || errbuf[i] == '\t') errbuf[i] = ' ';
    char *msg = errbuf;
    while (*msg == ' ') msg++;
    if (timed_out)
        return tsc_error_set(TSC_ERR_EXTERNAL, "gnuplot ('%s') made no progress for %d s and was killed", prog,
                             GNUPLOT_IDLE_MS / 1000);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (WIFEXITED(status))
            return tsc_error_set(TSC_ERR_EXTERNAL, "gnuplot ('%s') failed with exit status %d%s%s", prog,
                                 WEXITSTATUS(status), *msg ? ": " : "", msg);
        return tsc_error_set(TSC_ERR_EXTERNAL, "gnuplot ('%s') was killed by signal %d%s%s", prog, WTERMSIG(status),
                             *msg ? ": " : "", msg);
    }
    if (write_errno)
        return tsc_error_set(TSC_ERR_EXTERNAL, "gnuplot ('%s') stopped reading its script: %s%s%s", prog,
                             strerror(write_errno), *msg ? ": " : "", msg);
    return TSC_OK;
}

/* Runs gnuplot on script; with out, its stdout (the image) is appended to out. */
static tsc_status_t gp_exec(const char *gnuplot, const char *script, tsc_strbuf_t *out) {
    const char *prog = gnuplot && *gnuplot ? gnuplot : "gnuplot";
    if (!script) return tsc_error_set(TSC_ERR_ARG, "plot: NULL script");
    gp_proc_t g = {-1, -1, -1, -1};
    tsc_status_t st = gp_spawn(prog, out != NULL, &g);
    if (st) return st;
    /* A gnuplot that dies early must not kill us with SIGPIPE: block it on this thread while
     * writing and swallow one that became pending. */
    sigset_t pipe_set, old_set, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
    sigpending(&pending);
    int was_pending = sigismember(&pending, SIGPIPE);
    char errbuf[STDERR_KEEP];
    size_t errlen = 0;
    int write_errno = 0;
    int timed_out = gp_pump(&g, script, out, errbuf, &errlen, &write_errno);
    int fds[3] = {g.in, g.out, g.err};
    close_fds(fds, 3);
    int status = 0;
    while (waitpid(g.pid, &status, 0) < 0 && errno == EINTR) {}
    if (!was_pending) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) > 0) {}
    }
    pthread_sigmask(SIG_SETMASK, &old_set, NULL);
    return gp_result(prog, status, timed_out, write_errno, errbuf, errlen);
}

tsc_status_t tsc_plot_run(const char *gnuplot, const char *script) { return gp_exec(gnuplot, script, NULL); }

tsc_status_t tsc_plot_render(const tsc_plot_opts_t *o, const tsc_plot_series_t *s, int n, tsc_image_format_t fmt,
                             tsc_strbuf_t *out) {
    if (!out) return tsc_error_set(TSC_ERR_ARG, "plot: NULL output buffer");
    if (fmt == TSC_IMG_AUTO) return tsc_error_set(TSC_ERR_ARG, "plot: an image format is needed to draw into memory");
    char *script = NULL;
    size_t start = out->len;
    tsc_status_t st = tsc_plot_script(o, s, n, NULL, fmt, &script);
    if (!st) st = gp_exec(o->gnuplot, script, out);
    free(script);
    if (!st && out->nomem) st = tsc_error_set(TSC_ERR_NOMEM, "plot: out of memory reading gnuplot's image");
    if (!st && out->len == start) st = tsc_error_set(TSC_ERR_EXTERNAL, "gnuplot exited successfully but wrote nothing");
    if (!st && fmt == TSC_IMG_PDF) tsc_surface_pdf_fix_date(out->p + start, out->len - start);
    return st;
}

tsc_status_t tsc_plot_write(const tsc_plot_opts_t *o, const tsc_plot_series_t *s, int n, const char *path,
                            tsc_image_format_t fmt) {
    if (!path || !*path) return tsc_error_set(TSC_ERR_ARG, "plot: empty output path");
    tsc_status_t st;
    if (fmt == TSC_IMG_AUTO && (st = tsc_image_format_from_path(path, &fmt))) return st;
    if ((st = tsc_out_check(path))) return st;
    tsc_strbuf_t img;
    tsc_strbuf_init(&img);
    st = tsc_plot_render(o, s, n, fmt, &img);
    if (st) st = tsc_error_wrap(st, "plotting %s: ", path);
    else st = tsc_out_write_all(path, img.p, img.len);
    tsc_strbuf_free(&img);
    return st;
}
