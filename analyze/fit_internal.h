/* fit_internal.h (private to analyze/): the fit's comparison of a replayed tensor with the captured
 * one (fit.c), for other analyze files that replay a policy anyway and need the same numbers. */
#ifndef TSC_FIT_INTERNAL_H
#define TSC_FIT_INTERNAL_H

#include <stddef.h>

#include "tsc_fit.h"

/* An empty comparison (n 0, max_ulp NaN). */
void fit_cmp_init(tsc_fit_cmp_t *c);
/* Adds n elements: x (double when f64, else float) rounded to fmt against the captured cap. */
void fit_cmp_add(tsc_fit_cmp_t *c, tsc_format_t fmt, const float *cap, const void *x, int f64, size_t n);
/* Adds the counts and the maximum of src to dst: the same as adding src's elements to dst. */
void fit_cmp_merge(tsc_fit_cmp_t *dst, const tsc_fit_cmp_t *src);
/* The shares identical and within1 from the counts. */
void fit_cmp_finish(tsc_fit_cmp_t *c);

#endif
