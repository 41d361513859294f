/* tsc_plot.h: curves with gnuplot (loss curves, per-feature and per-token lines, bar charts, dual
 * axes), run as a child process fed a script through a pipe.
 *
 * The script is built in memory (tsc_plot_script, inspectable in tests) with the data inline in
 * `$dN << EOD` blocks, then piped to `gnuplot` (tsc_plot_write), which writes PNG (pngcairo), PDF
 * (pdfcairo) or SVG (svg) to a temporary name that is renamed into place on success.
 *
 *   double step[N], loss[N];                               // [N] f64 each
 *   tsc_plot_opts_t o; tsc_plot_opts_init(&o);
 *   o.title = "validation loss"; o.xlabel = "step"; o.logy = 1;
 *   tsc_plot_series_t s = {.name = "bf16 FA", .x = step, .y = loss, .n = N, .ema_alpha = 0.05};
 *   if (tsc_plot_write(&o, &s, 1, "loss.pdf", TSC_IMG_AUTO) != TSC_OK) puts(tsc_error_last());
 *
 * Honest curves: a series longer than opts.max_points is not thinned; it is drawn as a min-max
 * envelope over max_points bins (filledcurves) with the bin mean (or the EMA) as its line, and the
 * key says so. With ema_alpha > 0 the raw values are drawn faint and the exponential moving average
 * (ema[i] = a*y[i] + (1-a)*ema[i-1], NaN skipped) bold.
 * Sizes: the figure has a physical size in inches and text in points (>= 7), as in print; PNG is
 * rasterised at opts.dpi.
 * Safety: every string that reaches the script (titles, labels, run names, categories, the output
 * path) goes through tsc_plot_quote: a gnuplot single-quoted string, in which gnuplot expands
 * nothing (no backquote command substitution, no @macros, no escapes); a ' is doubled and control
 * characters (newlines included) become spaces, so no string can end the command it is part of.
 * Terminals run `noenhanced`, so labels are drawn exactly as given (O_lp stays O_lp).
 * gnuplot is looked up on PATH (or opts.gnuplot); its absence is TSC_ERR_EXTERNAL saying how to
 * install it; a failing gnuplot is TSC_ERR_EXTERNAL with its exit status and its stderr.
 */
#ifndef TSC_PLOT_H
#define TSC_PLOT_H

#include "tsc_export.h"

#include <stddef.h>

#include "tsc_surface.h"   /* tsc_image_format_t */
#include "tsc_strbuf.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TSC_PLOT_LINES = 0,
    TSC_PLOT_POINTS,
    TSC_PLOT_LINESPOINTS,
    TSC_PLOT_STEPS,       /* per-token staircase (e.g. a cumulative error over tokens) */
    TSC_PLOT_IMPULSES,    /* vertical sticks from zero (e.g. per-feature values) */
    TSC_PLOT_BARS         /* bars; several bar series are grouped side by side */
} tsc_plot_style_t;

typedef struct {
    const char *name;        /* key entry (any text), NULL or "" = none */
    const double *x;         /* [n] f64, or NULL for x = x_origin + index */
    const double *y;         /* [n] f64; NaN/Inf leave a gap */
    size_t n;
    tsc_plot_style_t style;
    int y2;                  /* nonzero: against the second (right) y axis */
    double ema_alpha;        /* in (0, 1]: also draw the EMA line; 0: none */
    const char *color;       /* "#rrggbb" or NULL for the palette (Okabe-Ito, colour-blind safe) */
    double x_origin;         /* x of index 0 when x is NULL (0) */
    int dash;                /* gnuplot dash type >= 1 for lines; 0: solid for the palette's first 8
                                series, then dashed (dt 2, 3, ...) for each further cycle of 8 colours */
} tsc_plot_series_t;

typedef struct {
    double width_in, height_in;           /* physical size (3.25 x 2.4) */
    double font_pt;                       /* >= 7 (8) */
    double dpi;                           /* PNG resolution (300) */
    const char *title, *xlabel, *ylabel, *y2label;   /* or NULL */
    int logx, logy, logy2;                /* logarithmic axes */
    double xmin, xmax, ymin, ymax;        /* axis limits; NaN = automatic (NaN) */
    size_t max_points;                    /* envelope above this many points per series (2000) */
    const char *const *categories;        /* [n_categories] bar labels at x = 0, 1, ... or NULL */
    size_t n_categories;
    int key_inside;                       /* key inside the plot (top right) instead of below it (0) */
    int end_labels;                       /* 1: no key; each named left-axis series is labelled in its colour
                                             right of the plot, level with its last finite point, labels
                                             nudged apart so none overprints another (curves of runs) (0) */
    const char *font_family;              /* ("DejaVu Sans") */
    const char *gnuplot;                  /* program to run ("gnuplot", found on PATH) */
} tsc_plot_opts_t;

/* Defaults as listed above. */
TSC_API void tsc_plot_opts_init(tsc_plot_opts_t *o);

/* s as a gnuplot single-quoted string literal (quotes included): ' doubled, control characters
 * replaced by spaces, bytes that are not valid UTF-8 by '?', everything else verbatim. Caller frees. NULL s gives "''".
 * Returns NULL only when out of memory. */
TSC_API char *tsc_plot_quote(const char *s);

/* Builds the complete gnuplot script that draws the series to out_path (NULL: gnuplot's stdout) in
 * format fmt (AUTO: from the extension of out_path). *script is the caller's (free). TSC_ERR_ARG for bad options or series (n = 0
 * series, a NULL y, a bad colour, font < 7 pt, a path with control characters), TSC_ERR_NOMEM. */
TSC_API tsc_status_t tsc_plot_script(const tsc_plot_opts_t *o, const tsc_plot_series_t *s, int n, const char *out_path,
                             tsc_image_format_t fmt, char **script);

/* Runs gnuplot on the series and appends the image it writes to its stdout (PNG, PDF or SVG: fmt,
 * not AUTO) to out: nothing goes through a file. PDFs get the reproducible date (tsc_surface.h).
 * Errors as for tsc_plot_write, less the file ones. */
TSC_API tsc_status_t tsc_plot_render(const tsc_plot_opts_t *o, const tsc_plot_series_t *s, int n, tsc_image_format_t fmt,
                                     tsc_strbuf_t *out);

/* Draws the series into path (PNG, PDF or SVG): tsc_plot_render, then util/tsc_file.h's atomic
 * write, so path is complete or untouched. Errors: those of tsc_plot_script; TSC_ERR_EXTERNAL when gnuplot cannot
 * be started (not installed: apt-get install gnuplot-nox) or fails (its stderr is in the detail);
 * TSC_ERR_IO for the temporary file or the rename. */
TSC_API tsc_status_t tsc_plot_write(const tsc_plot_opts_t *o, const tsc_plot_series_t *s, int n, const char *path,
                            tsc_image_format_t fmt);

/* Runs a gnuplot program (NULL = "gnuplot") on script (fed through stdin); TSC_OK when it exits 0.
 * Failure details as for tsc_plot_write. */
TSC_API tsc_status_t tsc_plot_run(const char *gnuplot, const char *script);

#ifdef __cplusplus
}
#endif
#endif
