/* tsc_colormap.h: colour maps and value-to-colour normalisation for figures.
 *
 * Two maps cover what tilescope draws:
 *   - viridis (magnitudes, probabilities): the published 256-entry table of van der Walt & Smith
 *     (the one matplotlib ships), linearly interpolated between entries;
 *   - cool-warm (signed errors, centred on zero): Moreland's diverging map, "Diverging Color Maps
 *     for Scientific Visualization" (ISVC 2009), computed here by his Msh interpolation in CIELAB
 *     (D65) from blue (59, 76, 192) through a neutral white-grey to red (180, 4, 38). It is the
 *     same map as matplotlib's "coolwarm" (its 33 control points come from Moreland's table).
 *   - greys (white to black), for plain intensity.
 * A norm maps data values to t in [0, 1] before the colour map: linear [vmin, vmax], logarithmic
 * (vmin > 0; for probabilities), or symmetric around zero (vmin = -vmax; for signed errors, so
 * zero is always the neutral centre colour).
 *
 *   tsc_norm_t nm;
 *   tsc_norm_autoscale(&nm, TSC_NORM_SYMMETRIC, err, rows * cols, NULL);  // err: [rows*cols] f32
 *   double rgb[3];
 *   tsc_cmap_eval(TSC_CMAP_COOLWARM, tsc_norm_apply(&nm, err[0]), rgb);    // rgb in [0, 1]
 *   uint32_t lut[TSC_CMAP_LUT_N]; tsc_cmap_fill_lut(TSC_CMAP_VIRIDIS, lut, TSC_CMAP_LUT_N);
 *
 * Non-finite values have no colour in any map: tsc_norm_apply returns NaN for them and callers
 * draw TSC_CMAP_BAD_ARGB (magenta, in neither map) and count them.
 */
#ifndef TSC_COLORMAP_H
#define TSC_COLORMAP_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TSC_CMAP_VIRIDIS = 0, /* sequential, perceptually uniform: magnitudes, probabilities */
    TSC_CMAP_COOLWARM,    /* diverging (Moreland cool-warm), neutral at t = 0.5: signed errors */
    TSC_CMAP_GREYS,       /* white (t = 0) to black (t = 1) */
    TSC_CMAP_COUNT
} tsc_cmap_t;

/* Entries of a lookup table that is fine enough for any figure (1024 > 8-bit colour steps). */
#define TSC_CMAP_LUT_N 1024
/* Colour of non-finite cells (NaN, Inf): opaque magenta, 0xAARRGGBB. */
#define TSC_CMAP_BAD_ARGB 0xFFFF00FFu

/* "viridis", "coolwarm", "greys". Never NULL ("?" for an out-of-range value). */
TSC_API const char *tsc_cmap_name(tsc_cmap_t cm);
/* Parses a name as above (also "cool-warm", "diverging", "gray"). TSC_ERR_ARG if unknown. */
TSC_API tsc_status_t tsc_cmap_parse(const char *name, tsc_cmap_t *out);

/* Colour of t (clipped to [0, 1]) as rgb[3] in [0, 1]. NaN t gives the bad colour (1, 0, 1). */
TSC_API void tsc_cmap_eval(tsc_cmap_t cm, double t, double rgb[3]);
/* The same colour packed as opaque 0xFFRRGGBB (each channel rounded to nearest of 0..255). */
TSC_API uint32_t tsc_cmap_argb(tsc_cmap_t cm, double t);
/* Fills lut[n] (n >= 2) with tsc_cmap_argb(cm, i / (n - 1)); index a t in [0, 1] with
 * (int)(t * (n - 1) + 0.5). */
TSC_API void tsc_cmap_fill_lut(tsc_cmap_t cm, uint32_t *lut, int n);

typedef enum {
    TSC_NORM_LINEAR = 0, /* t = (v - vmin) / (vmax - vmin) */
    TSC_NORM_LOG,        /* t = log(v / vmin) / log(vmax / vmin); needs 0 < vmin < vmax */
    TSC_NORM_SYMMETRIC   /* linear with vmin = -vmax: zero maps to t = 0.5 */
} tsc_norm_kind_t;

typedef struct {
    tsc_norm_kind_t kind;
    double vmin, vmax;   /* the data values at t = 0 and t = 1 */
} tsc_norm_t;

/* "linear", "log", "symmetric". */
TSC_API const char *tsc_norm_kind_name(tsc_norm_kind_t kind);
TSC_API tsc_status_t tsc_norm_kind_parse(const char *name, tsc_norm_kind_t *out);

/* Sets a norm from explicit limits. SYMMETRIC uses vmax = max(|vmin|, |vmax|), vmin = -vmax.
 * TSC_ERR_ARG when a limit is not finite, vmin >= vmax, or LOG has vmin <= 0; *n is then unchanged. */
TSC_API tsc_status_t tsc_norm_init(tsc_norm_t *n, tsc_norm_kind_t kind, double vmin, double vmax);

/* Sets a norm from the finite, unmasked values of x ([count] f32; mask [count] optional, nonzero =
 * masked): LINEAR [min, max], SYMMETRIC [-max|x|, max|x|], LOG [smallest positive, max].
 * Degenerate data is widened so vmin < vmax always holds (a constant c: [c - 0.5, c + 0.5], or
 * [-1, 1] / [c / 10, c * 10] for SYMMETRIC and LOG; no usable value: [0, 1], [-1, 1], [1e-3, 1]).
 * Always TSC_OK for valid arguments; TSC_ERR_ARG for NULL n or x with count > 0. */
TSC_API tsc_status_t tsc_norm_autoscale(tsc_norm_t *n, tsc_norm_kind_t kind, const float *x, size_t count,
                                const uint8_t *mask);
/* Widens n to also cover other's range (one scale shared by several panels); SYMMETRIC stays
 * centred on zero. */
TSC_API void tsc_norm_union(tsc_norm_t *n, const tsc_norm_t *other);

/* Maps v to [0, 1], clipping values outside [vmin, vmax] (LOG: v <= 0 maps to 0).
 * Returns NaN for non-finite v. */
TSC_API double tsc_norm_apply(const tsc_norm_t *n, double v);
/* The data value at t in [0, 1] (inverse of tsc_norm_apply inside the range). */
TSC_API double tsc_norm_inverse(const tsc_norm_t *n, double t);

/* Up to max_ticks "nice" tick values inside [vmin, vmax] in ticks[], ascending: steps of 1, 2 or 5
 * times a power of ten (LINEAR, SYMMETRIC, which always includes 0), or powers of ten (LOG, with
 * 2x and 5x when the range spans less than two decades). Returns the count (0 if max_ticks < 1). */
TSC_API int tsc_norm_ticks(const tsc_norm_t *n, double *ticks, int max_ticks);

/* Formats a tick value compactly ("0.25", "-3", "1e-05", "2e+04"), with enough digits to tell
 * apart ticks that are `step` apart (pass 0 for log ticks). Writes at most size bytes. */
TSC_API void tsc_format_tick(double v, double step, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
