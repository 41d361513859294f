/* ctest-labels: slow (over 5 s on 2 cores) */
/* The arithmetic the CPU reference and the CUDA kernels share (kernels/hd_math_internal.h),
 * against formulations we did not write for it:
 *   - tsc_hd_round (TF32, BF16, FP16, e8m6 ... e8m1; nearest-even and toward zero) against
 *     tsc_round_f32, the generic rounding through double that the reference uses, over FP32 bit
 *     patterns: every pattern with a stride (61 normally, 427 for e8m*; 1021 and 7147 under
 *     sanitizers), plus every pattern within 4096 of each format's overflow threshold, subnormal
 *     boundary and zero, both signs. NaN results compare as "a NaN of the same sign", everything
 *     else bit for bit.
 *   - tsc_hd_logf against log computed in long double and rounded once to float (correct
 *     rounding) over every positive float with a stride (7; 257 under sanitizers), and the
 *     specials; also counts how often glibc's logf differs from it (printed, not asserted).
 *   - tsc_hd_expf is the reference's exp (tsc_attn_expf): equal bits on the strided sweep, and
 *     within 1.0103 ulp of exp computed in double where the result is normal.
 * The attention arithmetic built on these is checked against the reference by test_backends
 * (backend cpu-rowwise). */
#include "hd_math_internal.h"
#include "tsc_attention.h"
#include "tsc_formats.h"
#include "tsc_test.h"

#ifdef TSC_SANITIZE
#define ROUND_STRIDE 1021u
#define LOG_STRIDE 257u
#else
#define ROUND_STRIDE 61u
#define LOG_STRIDE 7u
#endif

static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* 1 when a and b are the same bits, or both NaN of the same sign */
static int same(float a, float b) {
    if (a != a || b != b) return a != a && b != b && signbit(a) == signbit(b);
    return f2u(a) == f2u(b);
}

static long round_mismatch;
static void check_round_at(uint32_t u, int fmt, int mode) {
    const float x = u2f(u);
    const float want = tsc_round_f32(x, (tsc_format_t)fmt, (tsc_round_t)mode, NULL);
    const float got = tsc_hd_round(x, fmt, mode);
    if (!same(want, got)) {
        if (round_mismatch < 5)
            fprintf(stderr, "round fmt %d mode %d: x %a (0x%08x): want %a got %a\n", fmt, mode, x, u, want, got);
        round_mismatch++;
    }
}

static void check_rounding(void) {
    const int fmts[] = {TSC_FMT_TF32, TSC_FMT_BF16, TSC_FMT_FP16, TSC_FMT_E8M6, TSC_FMT_E8M5, TSC_FMT_E8M4,
                        TSC_FMT_E8M3, TSC_FMT_E8M2, TSC_FMT_E8M1};
    /* boundaries: FP16 max (65504) and its overflow threshold 65520, its smallest normal 2^-14 and
     * subnormal 2^-24, the FP32 ones; zero; the overflow threshold of e8m6 ... e8m1, (2 - 2^-(p+1))·2^127
     * (the last slot, set per format) */
    uint32_t edges[] = {0x477fe000u, 0x477ff000u, 0x38800000u, 0x33800000u, 0x33000000u,
                        0x7f7fffffu, 0x00800000u, 0x00000000u, 0x7f800000u, 0x7f800000u};
    const size_t n_edges = sizeof edges / sizeof *edges;
    long n = 0;
    for (size_t fi = 0; fi < sizeof fmts / sizeof *fmts; fi++)
        for (int mode = 0; mode < 2; mode++) {
            const int p = tsc_format_mant_bits((tsc_format_t)fmts[fi]);
            /* the e8m* formats are the same bit rule as tf32 and bf16 with another drop: a coarser stride */
            const uint64_t stride = p <= 6 ? 7 * ROUND_STRIDE : ROUND_STRIDE;
            edges[n_edges - 1] = 0x7f800000u - (p <= 6 ? 1u << (22 - p) : 0u);
            round_mismatch = 0;
            for (uint64_t u = 0; u <= 0xffffffffu; u += stride, n++) check_round_at((uint32_t)u, fmts[fi], mode);
            for (size_t e = 0; e < n_edges; e++)
                for (int64_t d = -4096; d <= 4096; d++) {
                    const int64_t v = (int64_t)edges[e] + d;
                    if (v < 0 || v > 0x7fffffff) continue;
                    check_round_at((uint32_t)v, fmts[fi], mode);
                    check_round_at((uint32_t)v | 0x80000000u, fmts[fi], mode);
                    n += 2;
                }
            CHECKF(round_mismatch == 0, "%s %s: %ld mismatches against tsc_round_f32",
                   tsc_format_name((tsc_format_t)fmts[fi]), mode ? "toward zero" : "nearest-even", round_mismatch);
        }
    printf("rounding: %ld (format, mode, input) cases against tsc_round_f32\n", n);
}

static void check_log(void) {
    long n = 0, bad = 0, glibc_diff = 0;
    for (uint64_t u = 1; u < 0x7f800000u; u += LOG_STRIDE, n++) {
        const float x = u2f((uint32_t)u);
        const float want = (float)logl((long double)x);
        const float got = tsc_hd_logf(x);
        if (f2u(want) != f2u(got)) {
            if (bad < 5) fprintf(stderr, "logf(%a): want %a got %a\n", x, want, got);
            bad++;
        }
        glibc_diff += f2u(logf(x)) != f2u(got);
    }
    CHECKF(bad == 0, "logf: %ld of %ld not correctly rounded", bad, n);
    printf("logf: %ld positive floats, all correctly rounded; glibc's logf differs on %ld of them\n", n,
           glibc_diff);
    CHECK(isinf(tsc_hd_logf(0.0f)) && tsc_hd_logf(0.0f) < 0);
    CHECK(isinf(tsc_hd_logf(-0.0f)) && tsc_hd_logf(-0.0f) < 0);
    CHECK(isnan(tsc_hd_logf(-1.0f)));
    CHECK(isnan(tsc_hd_logf(NAN)));
    CHECK(isinf(tsc_hd_logf(INFINITY)) && tsc_hd_logf(INFINITY) > 0);
    CHECK(tsc_hd_logf(1.0f) == 0.0f && !signbit(tsc_hd_logf(1.0f)));
    CHECK(f2u(tsc_attn_logf(3.0f)) == f2u(tsc_hd_logf(3.0f)));
}

static void check_exp(void) {
    long n = 0, bad = 0;
    double worst = 0;
    for (uint64_t u = 0; u <= 0xffffffffu; u += LOG_STRIDE * 3u, n++) {
        const float x = u2f((uint32_t)u);
        const float got = tsc_hd_expf(x);
        if (!same(got, tsc_attn_expf(x))) bad++;
        const double e = exp((double)x);
        if (x == x && e >= 0x1p-126 && e <= 0x1.fffffep127) {
            const double ulp = ldexp(1.0, ilogb(e) - 23);
            const double err = fabs((double)got - e) / ulp;
            if (err > worst) worst = err;
        }
    }
    CHECKF(bad == 0, "expf: %ld of %ld differ from tsc_attn_expf", bad, n);
    CHECKF(worst <= 1.0103, "expf: worst error %.4f ulp", worst);
    printf("expf: %ld inputs, the reference's bits, worst %.4f ulp where the result is normal\n", n, worst);
}

int main(void) {
    check_rounding();
    check_log();
    check_exp();
    return tsc_test_done();
}
