/* Number formats: names, FP8 tables against the OCP spec, round trips of every BF16/FP16/FP8
 * code, midpoints and saturation, single rounding from double, TF32, stochastic rounding
 * (unbiased, reproducible), and the SIMD BF16 path against the portable one. The exhaustive
 * 2^32 sweeps live in test_formats_bf16_exhaustive.c and test_formats_fp16_exhaustive.c. */
#include "tsc_formats.h"
#include "tsc_test.h"

#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static void test_names(void) {
    static const char *names[] = {"fp64", "fp32", "tf32", "bf16", "fp16", "fp8-e4m3", "fp8-e5m2",
                                  "e8m6", "e8m5", "e8m4", "e8m3", "e8m2", "e8m1"};
    static const size_t sizes[] = {8, 4, 4, 2, 2, 1, 1, 4, 4, 4, 4, 4, 4};
    static const int mant[] = {52, 23, 10, 7, 10, 3, 2, 6, 5, 4, 3, 2, 1},
                     expb[] = {11, 8, 8, 8, 5, 4, 5, 8, 8, 8, 8, 8, 8};
    CHECK_EQ_INT(sizeof names / sizeof *names, TSC_FMT_COUNT);
    for (int f = 0; f < TSC_FMT_COUNT; f++) {
        tsc_format_t got;
        CHECK_STREQ(tsc_format_name((tsc_format_t)f), names[f]);
        CHECK(tsc_format_parse(names[f], &got) == TSC_OK && got == (tsc_format_t)f);
        CHECK_EQ_INT(tsc_format_size((tsc_format_t)f), sizes[f]);
        CHECK_EQ_INT(tsc_format_mant_bits((tsc_format_t)f), mant[f]);
        CHECK_EQ_INT(tsc_format_exp_bits((tsc_format_t)f), expb[f]);
    }
    tsc_format_t got;
    CHECK(tsc_format_parse("bfloat16", &got) == TSC_OK && got == TSC_FMT_BF16);
    CHECK(tsc_format_parse("E4M3", &got) == TSC_OK && got == TSC_FMT_FP8_E4M3);
    CHECK(tsc_format_parse("float32", &got) == TSC_OK && got == TSC_FMT_FP32);
    CHECK(tsc_format_parse("fp12", &got) == TSC_ERR_ARG);
    CHECK(strstr(tsc_error_last(), "fp12") != NULL);
    CHECK(strstr(tsc_error_last(), "fp8-e5m2, e8m6, e8m5, e8m4, e8m3, e8m2 or e8m1") != NULL); /* the table's rows */
    /* e8mN: FP32's exponent range with N mantissa bits, whichever row that is */
    CHECK(tsc_format_parse("e8m7", &got) == TSC_OK && got == TSC_FMT_BF16);
    CHECK(tsc_format_parse("E8M10", &got) == TSC_OK && got == TSC_FMT_TF32);
    CHECK(tsc_format_parse("e8m23", &got) == TSC_OK && got == TSC_FMT_FP32);
    CHECK(tsc_format_parse("e8m4", &got) == TSC_OK && got == TSC_FMT_E8M4);
    CHECK(tsc_format_parse("E8M1", &got) == TSC_OK && got == TSC_FMT_E8M1);
    const char *bad[] = {"e8m0", "e8m8", "e8m04", "e8m", "e8m4x", "e8m230", "e8m+4", "e5m10"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECKF(tsc_format_parse(bad[i], &got) == TSC_ERR_ARG, "%s", bad[i]);
}

/* OCP OFP8 spec values, written from the spec's tables rather than computed by a formula. */
static void test_fp8_tables(void) {
    const tsc_format_t e4 = TSC_FMT_FP8_E4M3, e5 = TSC_FMT_FP8_E5M2;
    CHECK(tsc_decode(0x7e, e4) == 448.0);          /* S.1111.110: max normal */
    CHECK(tsc_decode(0xfe, e4) == -448.0);
    CHECK(tsc_decode(0x01, e4) == 0x1p-9);         /* S.0000.001: min subnormal */
    CHECK(tsc_decode(0x07, e4) == 0.875 * 0x1p-6); /* max subnormal */
    CHECK(tsc_decode(0x08, e4) == 0x1p-6);         /* min normal */
    CHECK(tsc_decode(0x38, e4) == 1.0);            /* bias 7 */
    CHECK(tsc_decode(0x78, e4) == 256.0);          /* S.1111.000 is a number in E4M3 fn */
    CHECK(tsc_decode(0x80, e4) == 0.0 && signbit(tsc_decode(0x80, e4)));
    CHECK(tsc_decode(0x7b, e5) == 57344.0);        /* S.11110.11: max normal */
    CHECK(tsc_decode(0x01, e5) == 0x1p-16);        /* min subnormal */
    CHECK(tsc_decode(0x04, e5) == 0x1p-14);        /* min normal */
    CHECK(tsc_decode(0x3c, e5) == 1.0);            /* bias 15 */
    CHECK(isinf(tsc_decode(0x7c, e5)) && tsc_decode(0xfc, e5) < 0);
    int nan4 = 0, nan5 = 0, inf4 = 0;
    for (uint32_t c = 0; c < 256; c++) {
        nan4 += isnan(tsc_decode(c, e4)) != 0;
        inf4 += isinf(tsc_decode(c, e4)) != 0;
        nan5 += isnan(tsc_decode(c, e5)) != 0;
    }
    CHECK_EQ_INT(nan4, 2);  /* 0x7f, 0xff only */
    CHECK_EQ_INT(inf4, 0);  /* no Inf in E4M3 fn */
    CHECK_EQ_INT(nan5, 6);  /* S.11111.{01,10,11} */
    CHECK(isnan(tsc_decode(0x7f, e4)) && isnan(tsc_decode(0xff, e4)));
    /* All 256 codes of each against the spec's definition: (-1)^S * 2^(1-bias) * 0.M for E = 0,
     * (-1)^S * 2^(E-bias) * 1.M otherwise; E4M3: only S.1111.111 is NaN; E5M2: E = 31 is
     * Inf (M = 0) or NaN. */
    long bad_tab = 0;
    for (int c = 0; c < 256; c++) {
        int s4 = c >> 7, E4 = (c >> 3) & 15, M4 = c & 7;
        int s5 = c >> 7, E5 = (c >> 2) & 31, M5 = c & 3;
        double w4 = (E4 == 15 && M4 == 7) ? NAN : E4 == 0 ? ldexp(M4 / 8.0, -6) : ldexp(1 + M4 / 8.0, E4 - 7);
        double w5 = E5 == 31 ? (M5 ? NAN : INFINITY) : E5 == 0 ? ldexp(M5 / 4.0, -14) : ldexp(1 + M5 / 4.0, E5 - 15);
        if (s4) w4 = -w4;
        if (s5) w5 = -w5;
        double g4 = tsc_decode((uint64_t)c, e4), g5 = tsc_decode((uint64_t)c, e5);
        bad_tab += isnan(w4) ? !isnan(g4) : (g4 != w4 || !signbit(g4) != !signbit(w4));
        bad_tab += isnan(w5) ? !isnan(g5) : (g5 != w5 || !signbit(g5) != !signbit(w5));
    }
    CHECK_EQ_INT(bad_tab, 0);
    /* Positive codes increase strictly; negative codes mirror them. */
    for (int f = TSC_FMT_FP8_E4M3; f <= TSC_FMT_FP8_E5M2; f++) {
        int mono = 1, mirror = 1;
        uint32_t top = f == TSC_FMT_FP8_E4M3 ? 0x7e : 0x7c;
        for (uint32_t c = 1; c <= top; c++) mono &= tsc_decode(c, (tsc_format_t)f) > tsc_decode(c - 1, (tsc_format_t)f);
        for (uint32_t c = 0; c <= top; c++) mirror &= tsc_decode(c | 0x80, (tsc_format_t)f) == -tsc_decode(c, (tsc_format_t)f);
        CHECK(mono);
        CHECK(mirror);
    }
    /* The same through the bulk decoder. */
    uint8_t codes[256];
    float out[256];
    for (int c = 0; c < 256; c++) codes[c] = (uint8_t)c;
    tsc_convert_to_f32(e4, codes, out, 256);
    CHECK(out[0x7e] == 448.0f && out[0x01] == 0x1p-9f && isnan(out[0x7f]));
    tsc_convert_to_f32(e5, codes, out, 256);
    CHECK(out[0x7b] == 57344.0f && out[0x01] == 0x1p-16f && isinf(out[0x7c]));
}

/* Every code of a small format round-trips through its value, in every rounding mode. */
static void test_round_trips(void) {
    const tsc_format_t fmts[] = {TSC_FMT_BF16, TSC_FMT_FP16, TSC_FMT_FP8_E4M3, TSC_FMT_FP8_E5M2};
    tsc_rng_t rng;
    tsc_rng_seed(&rng, 7);
    for (int k = 0; k < 4; k++) {
        tsc_format_t f = fmts[k];
        uint32_t ncodes = 1u << (8 * tsc_format_size(f));
        long bad = 0, nans = 0;
        for (uint32_t c = 0; c < ncodes; c++) {
            double v = tsc_decode(c, f);
            if (isnan(v)) {
                uint64_t b = tsc_encode(v, f, TSC_ROUND_NEAREST_EVEN, NULL);
                nans++;
                bad += !isnan(tsc_decode(b, f)) || (b >> (8 * tsc_format_size(f) - 1)) != (c >> (8 * tsc_format_size(f) - 1));
                continue;
            }
            for (int m = 0; m < 3; m++)
                bad += tsc_encode(v, f, (tsc_round_t)m, &rng) != c;
            bad += tsc_round(v, f, TSC_ROUND_NEAREST_EVEN, NULL) != v;
        }
        CHECKF(bad == 0, "%s: %ld round-trip failures", tsc_format_name(f), bad);
        CHECK(nans > 0);
    }
    /* BF16 and FP16 through their float fast paths: a NaN comes back quiet (0x0040 / 0x0200). */
    long bad = 0;
    for (uint32_t c = 0; c < 65536; c++) {
        uint16_t b = (uint16_t)c;
        int bnan = (c & 0x7f80) == 0x7f80 && (c & 0x7f);
        bad += tsc_bf16_from_f32(tsc_bf16_to_f32(b)) != (bnan ? (b | 0x40) : b);
        int hnan = (c & 0x7c00) == 0x7c00 && (c & 0x3ff);
        bad += tsc_fp16_from_f32(tsc_fp16_to_f32(b)) != (hnan ? (b | 0x200) : b);
    }
    CHECK_EQ_INT(bad, 0);
}

/* Between two neighbouring codes a < b: the midpoint goes to the even code under nearest-even,
 * anything a hair off the midpoint to the nearer code, anything inside to a under toward-zero. */
static void test_midpoints(void) {
    const tsc_format_t fmts[] = {TSC_FMT_FP16, TSC_FMT_FP8_E4M3, TSC_FMT_FP8_E5M2, TSC_FMT_BF16};
    for (int k = 0; k < 4; k++) {
        tsc_format_t f = fmts[k];
        uint32_t top = f == TSC_FMT_FP16 ? 0x7bff : f == TSC_FMT_BF16 ? 0x7f7f : f == TSC_FMT_FP8_E4M3 ? 0x7e : 0x7b;
        uint32_t sbit = f == TSC_FMT_FP16 || f == TSC_FMT_BF16 ? 0x8000 : 0x80;
        long bad = 0;
        for (uint32_t c = 0; c < top; c++) {
            double a = tsc_decode(c, f), b = tsc_decode(c + 1, f);
            double mid = (a + b) / 2, eps = (b - a) / 1024;
            uint32_t even = (c & 1) ? c + 1 : c;
            bad += tsc_encode(mid, f, TSC_ROUND_NEAREST_EVEN, NULL) != even;
            bad += tsc_encode(-mid, f, TSC_ROUND_NEAREST_EVEN, NULL) != (even | sbit);
            bad += tsc_encode(mid + eps, f, TSC_ROUND_NEAREST_EVEN, NULL) != c + 1;
            bad += tsc_encode(mid - eps, f, TSC_ROUND_NEAREST_EVEN, NULL) != c;
            bad += tsc_encode(b - eps, f, TSC_ROUND_TOWARD_ZERO, NULL) != c;
            bad += tsc_encode(-(b - eps), f, TSC_ROUND_TOWARD_ZERO, NULL) != (c | sbit);
        }
        CHECKF(bad == 0, "%s: %ld midpoint failures", tsc_format_name(f), bad);
    }
}

static void test_saturation_and_specials(void) {
    const tsc_format_t e4 = TSC_FMT_FP8_E4M3, e5 = TSC_FMT_FP8_E5M2;
    const tsc_round_t rne = TSC_ROUND_NEAREST_EVEN, rtz = TSC_ROUND_TOWARD_ZERO;
    /* E4M3 fn: the would-be next value above 448 is 480 (the NaN code); 464 is the tie. */
    CHECK_EQ_U32(tsc_encode(464.0, e4, rne, NULL), 0x7e);
    CHECK_EQ_U32(tsc_encode(464.5, e4, rne, NULL), 0x7f);   /* overflow -> NaN (non-saturating) */
    CHECK_EQ_U32(tsc_encode(-1e6, e4, rne, NULL), 0xff);
    CHECK_EQ_U32(tsc_encode(1e6, e4, rtz, NULL), 0x7e);     /* toward zero saturates to 448 */
    CHECK_EQ_U32(tsc_encode(-479.0, e4, rtz, NULL), 0xfe);
    CHECK_EQ_U32(tsc_encode(INFINITY, e4, rne, NULL), 0x7f); /* no Inf: NaN */
    CHECK_EQ_U32(tsc_encode(-INFINITY, e4, rtz, NULL), 0xff);
    CHECK_EQ_U32(tsc_encode(NAN, e4, rne, NULL), 0x7f);
    CHECK_EQ_U32(tsc_encode(-NAN, e4, rne, NULL), 0xff);
    CHECK_EQ_U32(tsc_encode(0x1p-10, e4, rne, NULL), 0x00);  /* half the smallest subnormal: tie to 0 */
    CHECK_EQ_U32(tsc_encode(0x1.0001p-10, e4, rne, NULL), 0x01);
    CHECK_EQ_U32(tsc_encode(3 * 0x1p-10, e4, rne, NULL), 0x02); /* 1.5 units: tie to even 2 */
    CHECK_EQ_U32(tsc_encode(-0.0, e4, rne, NULL), 0x80);
    /* E5M2: 57344 = 1.11b * 2^15 has an odd mantissa, so the tie 61440 goes up, to Inf. */
    CHECK_EQ_U32(tsc_encode(61440.0, e5, rne, NULL), 0x7c);
    CHECK_EQ_U32(tsc_encode(61439.0, e5, rne, NULL), 0x7b);
    CHECK_EQ_U32(tsc_encode(1e6, e5, rtz, NULL), 0x7b);
    CHECK_EQ_U32(tsc_encode(-INFINITY, e5, rne, NULL), 0xfc);
    CHECK(isnan(tsc_decode(tsc_encode(NAN, e5, rne, NULL), e5)));
    CHECK_EQ_U32(tsc_encode(0x1p-17, e5, rne, NULL), 0x00);
    CHECK_EQ_U32(tsc_encode(0x1.8p-16, e5, rne, NULL), 0x02);
    /* FP16, BF16, FP32 overflow: Inf under nearest-even, the largest finite toward zero. */
    CHECK_EQ_U32(tsc_encode(65519.0, TSC_FMT_FP16, rne, NULL), 0x7bff);
    CHECK_EQ_U32(tsc_encode(65520.0, TSC_FMT_FP16, rne, NULL), 0x7c00);
    CHECK_EQ_U32(tsc_encode(1e9, TSC_FMT_FP16, rtz, NULL), 0x7bff);
    CHECK_EQ_U32(tsc_encode(0x1p-25, TSC_FMT_FP16, rne, NULL), 0x0000);
    CHECK_EQ_U32(tsc_encode(0x1.000001p-25, TSC_FMT_FP16, rne, NULL), 0x0001);
    CHECK_EQ_U32(tsc_encode(1e39, TSC_FMT_BF16, rne, NULL), 0x7f80);
    CHECK_EQ_U32(tsc_encode(1e39, TSC_FMT_BF16, rtz, NULL), 0x7f7f);
    CHECK_EQ_U32(tsc_encode(-1e39, TSC_FMT_FP32, rne, NULL), 0xff800000u);
    CHECK_EQ_U32(tsc_encode(1e39, TSC_FMT_FP32, rtz, NULL), 0x7f7fffffu);
    CHECK_EQ_U32(tsc_encode(0x1p-150, TSC_FMT_FP32, rne, NULL), 0);          /* tie to even 0 */
    CHECK_EQ_U32(tsc_encode(0x1.8p-149, TSC_FMT_FP32, rne, NULL), 2);        /* tie to even 2 */
    CHECK_EQ_U32(tsc_encode(0x1p-133, TSC_FMT_BF16, rne, NULL), 0x0001);     /* smallest BF16 subnormal */
    CHECK(tsc_round(1e-300, TSC_FMT_BF16, rne, NULL) == 0.0);
    /* NaN keeps its sign and top payload, quieted, in every format. */
    for (int f = 0; f < TSC_FMT_COUNT; f++) {
        uint64_t b = tsc_encode(-NAN, (tsc_format_t)f, rne, NULL);
        double v = tsc_decode(b, (tsc_format_t)f);
        CHECKF(isnan(v) && signbit(v), "%s", tsc_format_name((tsc_format_t)f));
        CHECK(isnan(tsc_round(NAN, (tsc_format_t)f, rtz, NULL)));
    }
    CHECK_EQ_U32(tsc_bf16_from_f32(u2f(0x7f800001u)), 0x7fc0); /* signalling NaN with a low payload */
    CHECK_EQ_U32(tsc_bf16_from_f32(u2f(0xff812345u)), 0xffc1);
}

/* Rounding a double happens once: 1 + 2^-8 + 2^-30 is just above a BF16 tie, but rounding it to
 * float first would land exactly on the tie (1 + 2^-8) and then round down to 1. */
static void test_single_rounding(void) {
    double x = 1.0 + 0x1p-8 + 0x1p-30;
    CHECK_EQ_U32(tsc_encode(x, TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL), 0x3f81);
    CHECK(tsc_round(x, TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL) == 1.0 + 0x1p-7);
    CHECK_EQ_U32(tsc_bf16_from_f32((float)x), 0x3f80); /* the double-rounding answer, for contrast */
    double y = 1.0 + 0x1p-11 + 0x1p-40; /* same story for FP16 */
    CHECK_EQ_U32(tsc_encode(y, TSC_FMT_FP16, TSC_ROUND_NEAREST_EVEN, NULL), 0x3c01);
    /* TF32: 10 mantissa bits, FP32 exponent range, stored with the low 13 bits zero. */
    CHECK_EQ_U32(tsc_encode(1.0 + 0x1p-11, TSC_FMT_TF32, TSC_ROUND_NEAREST_EVEN, NULL), 0x3f800000u);
    CHECK_EQ_U32(tsc_encode(1.0 + 3 * 0x1p-11, TSC_FMT_TF32, TSC_ROUND_NEAREST_EVEN, NULL), 0x3f804000u);
    CHECK(tsc_round(1.0 + 3 * 0x1p-11, TSC_FMT_TF32, TSC_ROUND_NEAREST_EVEN, NULL) == 1.0 + 0x1p-9);
    CHECK_EQ_U32(tsc_encode(1e-40, TSC_FMT_TF32, TSC_ROUND_TOWARD_ZERO, NULL) & 0x1fffu, 0);
    CHECK(isinf(tsc_round(FLT_MAX, TSC_FMT_TF32, TSC_ROUND_NEAREST_EVEN, NULL))); /* rounds up to 2^128 */
    CHECK(tsc_round(FLT_MAX, TSC_FMT_TF32, TSC_ROUND_TOWARD_ZERO, NULL) == 0x1.ffcp127); /* TF32 max */
    /* Random doubles: the generic path agrees with an FPU formulation, r = (|x| + c) - c with c's
     * ULP equal to the BF16 ULP of |x| (normal range only here). */
    tsc_rng_t rng;
    tsc_rng_seed(&rng, 11);
    long bad = 0;
    for (int i = 0; i < 200000; i++) {
        uint64_t r = tsc_rng_next(&rng);
        double v = ldexp(1.0 + (double)(r >> 12) * 0x1p-52, (int)(r % 200) - 100) * ((r >> 11) & 1 ? -1 : 1);
        int e;
        frexp(v, &e);
        double c = ldexp(1.0, e - 1 - 7 + 52);
        volatile double t = fabs(v) + c;
        double want = copysign(t - c, v);
        bad += tsc_round(v, TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL) != want;
        bad += (double)tsc_round_f32((float)v, TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL) !=
               tsc_round((float)v, TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL);
    }
    CHECK_EQ_INT(bad, 0);
}

/* Stochastic rounding. x = 1 + k/8 ULP, and 3 + k/8 of the smallest subnormal, rounds up with
 * probability k/8; over N draws the mean of the rounded values has standard deviation
 * ULP * sqrt(p(1-p)/N). Bound: |mean - x| <= 5 sigma (false-failure chance ~6e-7 per case; the seed
 * is fixed, so the test is deterministic). The bulk conversion, one draw per element, likewise. */
static void test_stochastic(void) {
    enum { N = 200000 };
    static float xs[N];
    static uint8_t dst[N * 4];
    const tsc_format_t fmts[] = {TSC_FMT_BF16, TSC_FMT_FP16, TSC_FMT_FP8_E4M3, TSC_FMT_FP8_E5M2, TSC_FMT_E8M6,
                                 TSC_FMT_E8M5, TSC_FMT_E8M4, TSC_FMT_E8M3, TSC_FMT_E8M2, TSC_FMT_E8M1};
    for (size_t k = 0; k < sizeof fmts / sizeof *fmts; k++) {
        tsc_format_t f = fmts[k];
        const int mant = tsc_format_mant_bits(f), emin = 2 - (1 << (tsc_format_exp_bits(f) - 1));
        const double bases[2] = {-1.0, ldexp(3.0, emin - mant)}, ulps[2] = {ldexp(1.0, -mant), ldexp(1.0, emin - mant)};
        for (int bi = 0; bi < 2; bi++)
            for (int eighths = 1; eighths < 8; eighths += 3) {
                const double ulp = ulps[bi], p = eighths / 8.0, x = bases[bi] + (bi ? p : -p) * ulp;
                tsc_rng_t rng;
                tsc_rng_seed(&rng, 1234 + (uint64_t)eighths + 100 * (uint64_t)bi);
                double sum = 0;
                long other = 0;
                for (int i = 0; i < N; i++) {
                    double r = tsc_round(x, f, TSC_ROUND_STOCHASTIC, &rng);
                    other += fabs(r - x) >= ulp; /* not one of x's two neighbours */
                    sum += r;
                }
                const double sigma = ulp * sqrt(p * (1 - p) / N);
                CHECKF(fabs(sum / N - x) <= 5 * sigma, "%s x=%a: mean %.17g sigma %g", tsc_format_name(f), x, sum / N,
                       sigma);
                CHECK_EQ_INT(other, 0);
                const size_t sz = tsc_format_size(f);
                for (int i = 0; i < N; i++) xs[i] = (float)x;
                tsc_convert_from_f32(f, xs, dst, N, TSC_ROUND_STOCHASTIC, &rng);
                sum = 0;
                for (int i = 0; i < N; i++) {
                    uint64_t bits = 0;
                    memcpy(&bits, dst + (size_t)i * sz, sz);
                    sum += tsc_decode(bits, f);
                }
                CHECKF(fabs(sum / N - x) <= 5 * sigma, "%s bulk x=%a: mean %.17g", tsc_format_name(f), x, sum / N);
            }
    }
    /* Exact values never move; same seed, same bits; another seed, other bits. */
    tsc_rng_t a, b, c;
    tsc_rng_seed(&a, 99);
    tsc_rng_seed(&b, 99);
    tsc_rng_seed(&c, 100);
    long exact_moved = 0, same = 0, diff = 0;
    for (int i = 0; i < 10000; i++) {
        exact_moved += tsc_round(1.5, TSC_FMT_FP8_E4M3, TSC_ROUND_STOCHASTIC, &a) != 1.5;
        (void)tsc_round(1.5, TSC_FMT_FP8_E4M3, TSC_ROUND_STOCHASTIC, &b);
        (void)tsc_round(1.5, TSC_FMT_FP8_E4M3, TSC_ROUND_STOCHASTIC, &c);
    }
    CHECK_EQ_INT(exact_moved, 0);
    float src[1000];
    uint16_t d1[1000], d2[1000], d3[1000], d4[1000];
    for (int i = 0; i < 1000; i++) src[i] = 1.0f + (float)i * 0x1p-17f;
    tsc_convert_from_f32(TSC_FMT_BF16, src, d1, 1000, TSC_ROUND_STOCHASTIC, &a);
    tsc_convert_from_f32(TSC_FMT_BF16, src, d2, 1000, TSC_ROUND_STOCHASTIC, &b);
    tsc_convert_from_f32(TSC_FMT_BF16, src, d3, 1000, TSC_ROUND_STOCHASTIC, &c);
    for (int i = 0; i < 1000; i++) {
        same += d1[i] == d2[i];
        diff += d1[i] != d3[i];
    }
    CHECK_EQ_INT(same, 1000);
    CHECK(diff > 100);
    /* Bulk element i uses draw i: equal to the scalar sequence from the same state. */
    tsc_rng_seed(&a, 5);
    tsc_rng_seed(&b, 5);
    tsc_convert_from_f32(TSC_FMT_BF16, src, d1, 1000, TSC_ROUND_STOCHASTIC, &a);
    long seq_bad = 0;
    for (int i = 0; i < 1000; i++)
        seq_bad += d1[i] != (uint16_t)tsc_encode(src[i], TSC_FMT_BF16, TSC_ROUND_STOCHASTIC, &b);
    CHECK_EQ_INT(seq_bad, 0);
    tsc_convert_from_f32(TSC_FMT_FP8_E4M3, src, d4, 0, TSC_ROUND_STOCHASTIC, &a); /* n = 0: no-op */
    /* Tiny values far below the smallest subnormal stay unbiased to the draw's resolution. */
    tsc_rng_seed(&a, 3);
    long ups = 0;
    for (int i = 0; i < N; i++) ups += tsc_round(0x1p-11, TSC_FMT_FP8_E4M3, TSC_ROUND_STOCHASTIC, &a) != 0;
    double p = 0.25, sd = sqrt(p * (1 - p) * N); /* 2^-11 is a quarter of the 2^-9 subnormal */
    CHECKF(fabs(ups - p * N) <= 5 * sd, "ups %ld", ups);
}

/* AVX-512 BF16 path versus portable path, bit for bit, on odd lengths and awkward inputs. */
static void test_simd_vs_portable(void) {
    enum { N = 1 << 20 };
    float *src = malloc(N * sizeof *src);
    uint16_t *a = malloc(N * 2), *b = malloc(N * 2);
    if (!src || !a || !b) { CHECK(0); return; }
    static const uint32_t special[] = {0x7f800000u, 0xff800000u, 0x7f800001u, 0x7fc00000u, 0xffbfffffu,
                                       0x00000001u, 0x807fffffu, 0x00008000u, 0x00018000u, 0x3f808000u,
                                       0x3f818000u, 0x7f7fffffu, 0x7f7f8000u, 0x7f7f7fffu, 0x80000000u,
                                       0x00000000u, 0x0000ffffu, 0x007f8000u, 0x7f800100u, 0xff80ffffu};
    tsc_rng_t rng;
    tsc_rng_seed(&rng, 2024);
    for (int i = 0; i < N; i++) {
        uint64_t r = tsc_rng_next(&rng);
        src[i] = u2f(i % 3 == 0 ? special[r % 20] : i % 3 == 1 ? (uint32_t)r : ((uint32_t)r & 0x807fffffu));
    }
    int have = tsc_formats_simd_set(1);
    printf("SIMD BF16 path %s\n", have ? "active" : "not available on this CPU (comparing portable with itself)");
    /* From src + 3 (an unaligned start), with lengths that are and are not multiples of 16. */
    const size_t lens[] = {N - 3, N - 4, 17, 15, 1, 0};
    long bad = 0;
    for (int k = 0; k < 6; k++) {
        size_t len = lens[k];
        memset(a, 0xab, N * 2);
        memset(b, 0xcd, N * 2);
        tsc_formats_simd_set(1);
        tsc_convert_from_f32(TSC_FMT_BF16, src + 3, a, len, TSC_ROUND_NEAREST_EVEN, NULL);
        tsc_formats_simd_set(0);
        tsc_convert_from_f32(TSC_FMT_BF16, src + 3, b, len, TSC_ROUND_NEAREST_EVEN, NULL);
        for (size_t i = 0; i < len; i++) bad += a[i] != b[i];
        bad += a[len] != 0xabab; /* no write past the end */
    }
    CHECK_EQ_INT(bad, 0);
    /* Both against the definition: subnormals are kept (no DAZ), NaN quieted. */
    tsc_formats_simd_set(1);
    tsc_convert_from_f32(TSC_FMT_BF16, src, a, N, TSC_ROUND_NEAREST_EVEN, NULL);
    long bad_def = 0;
    for (int i = 0; i < N; i++) {
        double v = tsc_decode(a[i], TSC_FMT_BF16);
        double w = tsc_round(src[i], TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL);
        bad_def += isnan(w) ? !isnan(v) : (v != w || !signbit(v) != !signbit(w));
    }
    CHECK_EQ_INT(bad_def, 0);
    CHECK_EQ_U32(f2u(tsc_bf16_to_f32(a[0])) >> 16, a[0]);
    free(src); free(a); free(b);
}

/* Bulk conversions of every format agree with the scalar encode/decode. */
static void test_bulk_all_formats(void) {
    enum { N = 4099 };
    float src[N], back[N];
    static uint8_t dst[N * 8];
    tsc_rng_t rng;
    tsc_rng_seed(&rng, 77);
    for (int i = 0; i < N; i++) {
        uint64_t r = tsc_rng_next(&rng);
        src[i] = ldexpf(1.0f + (float)(r & 0xffffff) * 0x1p-24f, (int)((r >> 24) % 60) - 30) * ((r >> 40) & 1 ? -1.f : 1.f);
    }
    src[0] = NAN; src[1] = INFINITY; src[2] = -0.0f; src[3] = 1e-40f; src[4] = 70000.0f;
    for (int f = 0; f < TSC_FMT_COUNT; f++)
        for (int m = 0; m < 2; m++) {
            tsc_convert_from_f32((tsc_format_t)f, src, dst, N, (tsc_round_t)m, NULL);
            tsc_convert_to_f32((tsc_format_t)f, dst, back, N);
            long bad = 0;
            size_t sz = tsc_format_size((tsc_format_t)f);
            for (int i = 0; i < N; i++) {
                uint64_t want = tsc_encode(src[i], (tsc_format_t)f, (tsc_round_t)m, NULL), got = 0;
                memcpy(&got, dst + (size_t)i * sz, sz); /* little-endian */
                double w = tsc_decode(want, (tsc_format_t)f);
                bad += got != want;
                bad += isnan(w) ? !isnan(back[i]) : back[i] != (float)w;
            }
            CHECKF(bad == 0, "%s mode %d: %ld", tsc_format_name((tsc_format_t)f), m, bad);
        }
}

int main(void) {
    test_names();
    test_fp8_tables();
    test_round_trips();
    test_midpoints();
    test_saturation_and_specials();
    test_single_rounding();
    test_stochastic();
    test_simd_vs_portable();
    test_bulk_all_formats();
    return tsc_test_done();
}
