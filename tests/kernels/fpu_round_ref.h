/* fpu_round_ref.h: the exhaustive rounding tests' reference, an independent formulation of rounding a
 * float to p mantissa bits with FP32's exponent range (bf16 is p = 7; e8m6 ... e8m1) that lets the FPU
 * decide: adding a constant c whose float ULP is the format's ULP of x to |x| (default rounding,
 * nearest-even) keeps exactly the bits at or above that ULP, so (|x| + c) - c is |x| rounded to
 * nearest-even at the format's precision, with the FPU, not an integer carry trick, deciding ties.
 * Toward zero steps that result back by one ULP when it landed above |x|. Results are FP32 bit
 * patterns with the low 23 - p bits zero (bf16's bits are their top 16). */
#ifndef TSC_TEST_FPU_ROUND_REF_H
#define TSC_TEST_FPU_ROUND_REF_H

#include <stdint.h>
#include <string.h>

/* The exhaustive loops visit every high half-word (HI_STRIDE 1), each with all CHUNK low half-words;
 * under TSC_SANITIZE (ASan/UBSan at -O1, far slower) every 257th: 255 binades of both signs spread
 * from subnormal to the top, each with every tie, sticky and carry pattern. */
#ifdef TSC_SANITIZE
#define HI_STRIDE 257u
#else
#define HI_STRIDE 1u
#endif
#define CHUNK 65536u

static inline uint32_t fpu_ref_f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float fpu_ref_u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Reference bits of every x in src with p mantissa bits (1 <= p <= 22), nearest-even (want) and
 * toward zero (want_z). c = 2^(lead + 23 - p) has its float ULP at 2^(lead - p), the format's ULP
 * in x's binade (lead = exponent of x's leading bit, -126 for subnormals), and |x| < c. The top
 * binades (lead >= 105 + p, where c would overflow) are first scaled by 2^-64, exactly, and scaled
 * back, which overflows to Inf exactly when the rounded value is 2^128. Inf stays; a NaN keeps its
 * sign and top p payload bits and gets the quiet bit (the FP32 mantissa's top bit). Written
 * branch-free so the compiler vectorises it (4.3e9 inputs). */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))  /* clang vectorises this at -O2 already and has no such attribute */
#endif
static void fpu_ref_round(const float *src, uint32_t *want, uint32_t *want_z, uint32_t n, int p) {
    const uint32_t low = (1u << (23 - p)) - 1u; /* the bits the format does not have */
#ifdef _OPENMP
#pragma omp simd
#endif
    for (uint32_t i = 0; i < n; i++) {
        uint32_t u = fpu_ref_f2u(src[i]);
        uint32_t a = u & 0x7fffffffu;
        int ef = (int)(a >> 23);
        int lead = ef - 127 + (ef == 0);
        int big = lead >= 105 + p;
        float s = fpu_ref_u2f((uint32_t)(127 - 64 * big) << 23);    /* 2^-64 or 1 */
        float back = fpu_ref_u2f((uint32_t)(127 + 64 * big) << 23); /* 2^64 or 1 */
        int l2 = lead - 64 * big;
        float y = fpu_ref_u2f(a) * s;
        float c = fpu_ref_u2f((uint32_t)(l2 + 23 - p + 127) << 23);
        float ulp = c * 0x1p-23f; /* 2^(l2 - p) >= 2^-148, a float subnormal at worst: exact */
        float r = (y + c) - c;
        float rz = r - fpu_ref_u2f(fpu_ref_f2u(ulp) & (0u - (uint32_t)(r > y)));
        uint32_t sg = u & 0x80000000u;
        uint32_t rn = sg | fpu_ref_f2u(r * back), rt = sg | fpu_ref_f2u(rz * back);
        uint32_t special = (u & ~low) | (0x00400000u * ((a & 0x7fffffu) != 0)); /* Inf; quiet NaN */
        uint32_t m = 0u - (uint32_t)(ef == 255);
        want[i] = (special & m) | (rn & ~m);
        want_z[i] = (special & m) | (rt & ~m);
    }
}

#endif
