/* fbits_internal.h (private to kernels/): FP32 bit access and rounding an FP32 value to fewer
 * mantissa bits on its bits (BF16: drop 16, TF32: drop 13), for the CPU code: the host+device
 * functions of hd_math_internal.h under the names the C files use (drop and the mode are
 * constants at every call site, so loops over them vectorise). */
#ifndef TSC_FBITS_INTERNAL_H
#define TSC_FBITS_INTERNAL_H
#include "hd_math_internal.h"

static inline uint32_t tsc_f32_bits(float x) { return tsc_hd_bits(x); }
static inline float tsc_f32_from_bits(uint32_t u) { return tsc_hd_float(u); }

/* u's float rounded to 23 - drop mantissa bits, nearest-even; the low drop bits of the result are 0 */
static inline uint32_t tsc_f32_keep_rne(uint32_t u, int drop) { return tsc_hd_keep(u, drop, TSC_HD_RNE); }
/* the same toward zero (truncation) */
static inline uint32_t tsc_f32_keep_rz(uint32_t u, int drop) { return tsc_hd_keep(u, drop, TSC_HD_RZ); }
#endif
