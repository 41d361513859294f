/* hd_math_internal.h (private to kernels/): the scalar arithmetic that the CPU reference and the
 * CUDA kernels share, written once and compiled for both (TSC_HD is __host__ __device__ under
 * nvcc, nothing in C). Only IEEE basic operations (+ − × ÷ with round-to-nearest, fmaf, fma,
 * conversions) and bit operations appear here, so every path that compiles these bodies without
 * contraction (-ffp-contract=off in C, -fmad=false in nvcc) gives the same bits:
 *
 *   tsc_hd_expf   the reference's FP32 exp (Cody-Waite by ln 2, degree-6 polynomial in fmas;
 *                 at most 1.0103 ulp from exp where the result is normal; exp(0) = 1 exactly)
 *   tsc_hd_logf   FP32 log through an atanh series in double-double, rounded to float once:
 *                 correctly rounded (checked against long double on every positive float);
 *                 the reference's LSE uses it, not libm's logf, whose bits differ between glibc
 *                 and CUDA
 *   tsc_hd_round  a float rounded to FP32 (identity), TF32, BF16, FP16 or e8m6 ... e8m1,
 *                 nearest-even or toward zero, returned as the float holding the value: the same
 *                 bits as tsc_round_f32 (checked over every float pattern)
 *
 * FP8 formats, FP64 stages and stochastic rounding are not here: the reference's generic
 * tsc_round handles them, and the CUDA kernels refuse policies that use them. */
#ifndef TSC_HD_MATH_INTERNAL_H
#define TSC_HD_MATH_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define TSC_HD __host__ __device__ __forceinline__
#else
#if defined(__GNUC__)
#define TSC_HD static inline __attribute__((always_inline))
#else
#define TSC_HD static inline
#endif
#endif
#define TSC_HD_INF INFINITY

/* format and mode numbers as in tsc_formats.h (tsc_format_t, tsc_round_t; attention_rowwise.c asserts
 * they agree); e8m6 ... e8m1 are consecutive, 6 ... 1 mantissa bits */
enum { TSC_HD_FP64 = 0, TSC_HD_FP32 = 1, TSC_HD_TF32 = 2, TSC_HD_BF16 = 3, TSC_HD_FP16 = 4,
       TSC_HD_E8M6 = 7, TSC_HD_E8M1 = 12 };
enum { TSC_HD_RNE = 0, TSC_HD_RZ = 1 };

TSC_HD uint32_t tsc_hd_bits(float x) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(x);
#else
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
#endif
}
TSC_HD float tsc_hd_float(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float x;
    memcpy(&x, &u, 4);
    return x;
#endif
}
TSC_HD uint64_t tsc_hd_bits64(double x) {
#ifdef __CUDA_ARCH__
    return (uint64_t)__double_as_longlong(x);
#else
    uint64_t u;
    memcpy(&u, &x, 8);
    return u;
#endif
}
TSC_HD double tsc_hd_double(uint64_t u) {
#ifdef __CUDA_ARCH__
    return __longlong_as_double((long long)u);
#else
    double x;
    memcpy(&x, &u, 8);
    return x;
#endif
}

/* e^x in FP32: the reduction x = n·ln2 + r (ln 2 in two parts), e^r by a degree-6 polynomial
 * (cephes expf coefficients) in fma steps, then 2^n in two factors so results down to the
 * subnormal range come out right. Branch-free selects, so C loops over it vectorise. */
TSC_HD float tsc_hd_expf(float x) {
    const float log2e = 1.44269504088896341f, magic = 12582912.0f; /* 1.5 * 2^23 */
    const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
    float xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
    float t = fmaf(xc, log2e, magic);
    float n = t - magic;
    float r = fmaf(-n, ln2_hi, xc);
    r = fmaf(-n, ln2_lo, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    float r2 = r * r;
    float e = fmaf(p, r2, r) + 1.0f;
    int ni = (int)n;
    int n1 = ni / 2, n2 = ni - n1;
    float s1 = tsc_hd_float((uint32_t)(n1 + 127) << 23), s2 = tsc_hd_float((uint32_t)(n2 + 127) << 23);
    float y = e * s1 * s2;
    y = x > 88.72283935546875f ? TSC_HD_INF : y;
    y = x < -103.97208404541016f ? 0.0f : y;
    return x != x ? x : y;
}

/* ln x in FP32, correctly rounded: x = 2^e·m with m in [√½, √2), ln m = 2·atanh(f), f = (m − 1) /
 * (m + 1) (|f| < 0.1716) carried as a double plus its division residual, the series to f^25 in
 * double (truncation below 1e-21 relative), e·ln 2 in two parts, the sum as a double-double
 * (hi, lo), then rounded to float once: (float)hi, corrected by lo's sign when hi is exactly
 * halfway between two floats. Specials as IEEE: ln(±0) = −inf, ln(x < 0) = NaN, ln(inf) = inf,
 * NaN stays NaN. */
TSC_HD float tsc_hd_logf(float x) {
    uint32_t u = tsc_hd_bits(x);
    if (x != x) return x + x;
    if (x == 0.0f) return -TSC_HD_INF;
    if (u >> 31) return (x - x) / (x - x); /* NaN */
    if (u == 0x7f800000u) return x;
    int e = 0;
    if (u < 0x00800000u) { /* subnormal: scale by 2^23, exactly */
        u = tsc_hd_bits(x * 8388608.0f);
        e = -23;
    }
    e += (int)(u >> 23) - 127;
    uint32_t mb = (u & 0x007fffffu) | 0x3f800000u; /* m in [1, 2) */
    if (mb > 0x3fb504f3u) { /* m > √2: take m/2, e + 1 */
        mb -= 0x00800000u;
        e += 1;
    }
    const double m = (double)tsc_hd_float(mb);
    const double m1 = m - 1.0, m2 = m + 1.0; /* exact */
    const double f = m1 / m2;
    const double flo = fma(-f, m2, m1) / m2; /* f + flo = (m − 1)/(m + 1) to ~2^-106 */
    const double f2 = f * f;
    double p = 1.0 / 25.0;
    p = fma(p, f2, 1.0 / 23.0);
    p = fma(p, f2, 1.0 / 21.0);
    p = fma(p, f2, 1.0 / 19.0);
    p = fma(p, f2, 1.0 / 17.0);
    p = fma(p, f2, 1.0 / 15.0);
    p = fma(p, f2, 1.0 / 13.0);
    p = fma(p, f2, 1.0 / 11.0);
    p = fma(p, f2, 1.0 / 9.0);
    p = fma(p, f2, 1.0 / 7.0);
    p = fma(p, f2, 1.0 / 5.0);
    p = fma(p, f2, 1.0 / 3.0);
    const double tail = (2.0 * (f * f2)) * p; /* 2f³·p, below 0.0035·|2f| */
    /* e·ln2_hi is exact (ln2_hi has 32 significant bits, |e| < 2^8) */
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    const double ed = (double)e, a = ed * ln2_hi, b = 2.0 * f;
    const double s = a + b, bb = s - a, err = (a - (s - bb)) + (b - bb); /* two-sum: s + err = a + b */
    const double lo0 = err + (ed * ln2_lo + (2.0 * flo + tail));
    const double hi = s + lo0, lo = lo0 - (hi - s);
    float y = (float)hi;
    const uint32_t yb = tsc_hd_bits(y);
    const float up = tsc_hd_float(yb + 1u); /* the neighbour of larger magnitude */
    if (hi == ((double)y + (double)up) * 0.5 && lo != 0.0 && ((lo > 0.0) == (y > 0.0f))) return up;
    if ((yb & 0x7fffffffu) != 0) {
        const float dn = tsc_hd_float(yb - 1u); /* of smaller magnitude */
        if (hi == ((double)y + (double)dn) * 0.5 && lo != 0.0 && ((lo > 0.0) != (y > 0.0f))) return dn;
    }
    return y;
}

/* FP32 bits u rounded to 23 − drop mantissa bits (nearest-even or toward zero); a NaN is quieted
 * and keeps its sign and top payload bits. Nearest-even adds half an ULP minus one plus the kept
 * LSB, so the carry happens exactly when the dropped part is above half an ULP or a tie with an odd
 * LSB; a carry into the exponent gives the next binade or inf, as IEEE rounding does. NaN is taken
 * first (the carry could turn a NaN with a small payload into inf). Written as selects so C loops
 * over it vectorise (the CPU reference's BF16/TF32 rounding, fbits_internal.h, is this function). */
TSC_HD uint32_t tsc_hd_keep(uint32_t u, int drop, int mode) {
    const uint32_t mask = ~0u << drop;
    const uint32_t r = mode == TSC_HD_RZ ? u & mask : (u + ((1u << (drop - 1)) - 1u) + ((u >> drop) & 1u)) & mask;
    return (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) & mask : r;
}

/* x rounded to IEEE binary16, as the float holding the value. Normal range: 10 mantissa bits
 * kept on x's bits; overflow past 65504 gives inf (nearest-even, from 65520 up) or 65504 (toward
 * zero); below 2^-14 the quantum is 2^-24: |x|·2^24 (exact) rounded to an integer by the 2^23
 * trick (nearest-even) or truncation, times 2^-24 (exact). NaN: quieted, top 10 payload bits. */
TSC_HD float tsc_hd_fp16(float x, int mode) {
    const uint32_t u = tsc_hd_bits(x), a = u & 0x7fffffffu, sign = u & 0x80000000u;
    if (a > 0x7f800000u) return tsc_hd_float(tsc_hd_keep(u, 13, TSC_HD_RNE));
    if (a == 0x7f800000u) return x;
    if (a >= 0x38800000u) { /* |x| >= 2^-14: a normal binary16 (or overflow) */
        uint32_t r = tsc_hd_keep(a, 13, mode);
        if (r > 0x477fe000u) r = mode == TSC_HD_RZ ? 0x477fe000u : 0x7f800000u;
        return tsc_hd_float(sign | r);
    }
    const float q = tsc_hd_float(a) * 16777216.0f; /* < 2^10, exact */
    float n;
    if (mode == TSC_HD_RZ) n = (float)(int)q;
    else n = (q + 8388608.0f) - 8388608.0f;
    return tsc_hd_float(sign | tsc_hd_bits(n * 5.9604644775390625e-08f));
}

/* x rounded to fmt (TSC_HD_FP32: unchanged) with mode, as the float holding the value. */
TSC_HD float tsc_hd_round(float x, int fmt, int mode) {
    switch (fmt) {
    case TSC_HD_BF16: return tsc_hd_float(tsc_hd_keep(tsc_hd_bits(x), 16, mode));
    case TSC_HD_TF32: return tsc_hd_float(tsc_hd_keep(tsc_hd_bits(x), 13, mode));
    case TSC_HD_FP16: return tsc_hd_fp16(x, mode);
    default: /* e8m6 ... e8m1 keep 6 ... 1 mantissa bits: drop 17 ... 22 */
        if (fmt >= TSC_HD_E8M6 && fmt <= TSC_HD_E8M1)
            return tsc_hd_float(tsc_hd_keep(tsc_hd_bits(x), 17 + fmt - TSC_HD_E8M6, mode));
        return x;
    }
}

#endif
