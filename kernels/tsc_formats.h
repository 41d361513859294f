/* tsc_formats.h: the number formats tilescope models, and rounding into them.
 *
 * Every format is described by its encoding; values travel as double (exact for every format
 * here) or float, and as raw bit patterns (uint64_t, low bits used) when stored.
 *
 *   uint16_t b = tsc_bf16_from_f32(-4.703990459442139f);   // 0xc097 (-4.71875), nearest-even
 *   float    f = tsc_bf16_to_f32(b);
 *   tsc_rng_t rng; tsc_rng_seed(&rng, 42);
 *   double   s = tsc_round(0.1, TSC_FMT_BF16, TSC_ROUND_STOCHASTIC, &rng);
 *   tsc_convert_to_f32(TSC_FMT_BF16, bf16_buf, f32_buf, n);          // bulk, exact
 *
 * Rounding modes: nearest-even (IEEE default), toward zero, stochastic (round up with
 * probability equal to the discarded fraction of an ULP; reproducible for a seed).
 * Specials: NaN stays NaN (quiet); Inf stays Inf where the format has it; overflow under
 * nearest-even gives Inf (IEEE formats) or NaN/saturation as each FP8 spec says (documented
 * in formats.c); subnormals are produced and read per each format.
 * In short (finite x whose rounded magnitude exceeds the format's largest finite value):
 *   fp32/tf32/bf16/fp16/fp8-e5m2/e8m*: nearest-even and stochastic -> +-Inf, toward zero -> +-max;
 *   fp8-e4m3 (no Inf): nearest-even and stochastic -> NaN (OCP non-saturating, as PyTorch's
 *   float8_e4m3fn), toward zero -> +-448; an Inf input -> NaN. NaN keeps its sign and top
 *   payload bits, quieted (bf16: (f32 bits >> 16) | 0x0040, as VCVTNEPS2BF16 does).
 * Formats with a chosen width (e8m6 ... e8m1): FP32's exponent range with 6 ... 1 explicit mantissa
 * bits, the rules of bf16 (its subnormals are FP32's grid coarsened to the width); not a format any
 * kernel uses, but a dose of the same rounding for experiments (docs/PRESETS.md). Stored like tf32,
 * as an FP32 with the low 23 - width mantissa bits zero. "e8mN" also names bf16 (N = 7), tf32 (10)
 * and fp32 (23).
 */
#ifndef TSC_FORMATS_H
#define TSC_FORMATS_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TSC_FMT_FP64 = 0,
    TSC_FMT_FP32,
    TSC_FMT_TF32,     /* 1-8-10, stored in 32 bits as an FP32 with the low 13 mantissa bits zero */
    TSC_FMT_BF16,     /* 1-8-7, bias 127 */
    TSC_FMT_FP16,     /* IEEE binary16, 1-5-10, bias 15 */
    TSC_FMT_FP8_E4M3, /* OCP FP8 E4M3 (fn): bias 7, no Inf, NaN = S.1111.111, max 448 */
    TSC_FMT_FP8_E5M2, /* OCP FP8 E5M2: bias 15, IEEE-like Inf/NaN, max 57344 */
    TSC_FMT_E8M6,     /* 1-8-6, bias 127, stored as an FP32 with the low 17 mantissa bits zero */
    TSC_FMT_E8M5,     /* 1-8-5, low 18 bits zero */
    TSC_FMT_E8M4,     /* 1-8-4, low 19 bits zero */
    TSC_FMT_E8M3,     /* 1-8-3, low 20 bits zero */
    TSC_FMT_E8M2,     /* 1-8-2, low 21 bits zero */
    TSC_FMT_E8M1,     /* 1-8-1, low 22 bits zero */
    TSC_FMT_COUNT
} tsc_format_t;

typedef enum {
    TSC_ROUND_NEAREST_EVEN = 0,
    TSC_ROUND_TOWARD_ZERO,
    TSC_ROUND_STOCHASTIC
} tsc_round_t;

/* Counter-based RNG for stochastic rounding: the same seed gives the same bits. */
typedef struct { uint64_t state; } tsc_rng_t;
TSC_API void tsc_rng_seed(tsc_rng_t *rng, uint64_t seed);
TSC_API uint64_t tsc_rng_next(tsc_rng_t *rng);

/* Canonical lower-case name ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8-e4m3", "fp8-e5m2", "e8m6",
 * ..., "e8m1"). */
TSC_API const char *tsc_format_name(tsc_format_t fmt);
/* Parses a name (also accepts "f32", "float32", "bfloat16", "e4m3", and "e8mN" for the format with 8
 * exponent bits and N mantissa bits: "e8m7" is bf16, "e8m10" tf32, "e8m23" fp32). TSC_ERR_ARG if
 * unknown, listing the names. */
TSC_API tsc_status_t tsc_format_parse(const char *name, tsc_format_t *out);
/* Storage size in bytes: 8, 4, 4, 2, 2, 1, 1, and 4 for every e8m*. */
TSC_API size_t tsc_format_size(tsc_format_t fmt);
/* Explicit mantissa bits (52, 23, 10, 7, 10, 3, 2, then 6 ... 1) and exponent bits (11, 8, 8, 8, 5, 4,
 * 5, then 8). */
TSC_API int tsc_format_mant_bits(tsc_format_t fmt);
TSC_API int tsc_format_exp_bits(tsc_format_t fmt);

/* Fast scalar conversions, nearest-even. */
TSC_API uint16_t tsc_bf16_from_f32(float x);
/* tsc_bf16_from_f32 on the FP32 bit pattern u, inline (loops of it vectorise): nearest-even, a NaN
 * keeps its sign and top payload bits and is made quiet. */
static inline uint16_t tsc_bf16_rne_bits(uint32_t u) {
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x0040u : r); /* a select: vectorises */
}
TSC_API float tsc_bf16_to_f32(uint16_t b);
TSC_API uint16_t tsc_fp16_from_f32(float x);
TSC_API float tsc_fp16_to_f32(uint16_t h);

/* Generic: rounds x to fmt with mode; returns the rounded value as a double (exact).
 * rng is used only for TSC_ROUND_STOCHASTIC (may be NULL otherwise; NULL there means
 * nearest-even). In stochastic mode every call consumes exactly one draw. An out-of-range
 * fmt gives NaN (tsc_encode: 0). Rounding from a double happens once (never through float). */
TSC_API double tsc_round(double x, tsc_format_t fmt, tsc_round_t mode, tsc_rng_t *rng);
/* Generic encode/decode between a double and fmt's bit pattern (low bits of the result). */
TSC_API uint64_t tsc_encode(double x, tsc_format_t fmt, tsc_round_t mode, tsc_rng_t *rng);
TSC_API double tsc_decode(uint64_t bits, tsc_format_t fmt);

/* x rounded to fmt, returned as the float holding that value (exact for every format but
 * fp64, which returns x). Same rules as tsc_round; bf16 nearest-even is a fast path. */
TSC_API float tsc_round_f32(float x, tsc_format_t fmt, tsc_round_t mode, tsc_rng_t *rng);

/* The AVX-512 BF16 path of tsc_convert_from_f32 (bf16, nearest-even) is used when the CPU has
 * it; tsc_formats_simd_set(0) forces the portable path (tests, benchmarks), (1) allows it
 * again; both return 1 when the SIMD path is now in use. Not thread-safe to toggle
 * while conversions run. */
TSC_API int tsc_formats_simd_set(int enable);
TSC_API int tsc_formats_simd_active(void);

/* Bulk conversions of n elements. src/dst hold fmt's storage (tsc_format_size bytes each).
 * tsc_convert_from_f32 rounds with mode (stochastic uses rng); to_f32 is exact except for
 * FP64 sources, which are rounded to nearest-even float. A run-time-selected AVX-512 BF16
 * path gives the same bits as the portable one. */
TSC_API void tsc_convert_from_f32(tsc_format_t fmt, const float *src, void *dst, size_t n,
                          tsc_round_t mode, tsc_rng_t *rng);
TSC_API void tsc_convert_to_f32(tsc_format_t fmt, const void *src, float *dst, size_t n);

#ifdef __cplusplus
}
#endif
#endif
