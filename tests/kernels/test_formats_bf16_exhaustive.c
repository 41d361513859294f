/* ctest-labels: slow (over 5 s on 2 cores) */
/* Exhaustive: every one of the 2^32 FP32 bit patterns rounded to BF16, nearest-even and toward
 * zero, against an independent formulation that lets the FPU do the rounding: adding a
 * constant c whose float ULP is the BF16 ULP of x to |x| (default rounding, nearest-even) keeps
 * exactly the bits at or above that ULP, so (|x| + c) - c is |x| rounded to nearest-even BF16
 * precision, with the FPU, not an integer carry trick, deciding ties. Toward zero steps
 * that result back by one ULP when it landed above |x| (fpu_round_ref.h, with 7 mantissa bits, the
 * reference of the e8m* formats' exhaustive test too). Checked paths: the bulk conversion
 * (AVX-512 BF16 where the CPU has it), the portable bulk path, and (on 1/16 of the inputs)
 * the scalar function.
 *
 * Under TSC_SANITIZE (ASan/UBSan at -O1, far slower) the outer loop takes every 257th high
 * half-word: 255 binades of both signs spread from subnormal to the top, each with all 65536
 * low half-words (every tie, sticky and carry pattern); NaN/Inf and the SIMD-vs-portable
 * comparison on specials are in test_formats.c. The normal build is exhaustive. */
#include "fpu_round_ref.h"
#include "tsc_formats.h"
#include "tsc_test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Reference BF16 bits of every x in src, nearest-even (want) and toward zero (want_z): the top half
 * of fpu_round_ref.h's FP32 pattern with 7 mantissa bits. */
static void ref_bf16(const float *src, uint16_t *want, uint16_t *want_z, uint32_t n) {
    static uint32_t w[CHUNK], wz[CHUNK];
    for (uint32_t i0 = 0; i0 < n; i0 += CHUNK) {
        const uint32_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
        fpu_ref_round(src + i0, w, wz, m, 7);
        for (uint32_t i = 0; i < m; i++) {
            want[i0 + i] = (uint16_t)(w[i] >> 16);
            want_z[i0 + i] = (uint16_t)(wz[i] >> 16);
        }
    }
}

static uint16_t ref_one(uint32_t u, int rtz) {
    float x = fpu_ref_u2f(u);
    uint16_t a, b;
    ref_bf16(&x, &a, &b, 1);
    return rtz ? b : a;
}

int main(void) {
    float *src = malloc(CHUNK * sizeof *src);
    uint16_t *simd = malloc(CHUNK * sizeof *simd), *port = malloc(CHUNK * sizeof *port),
             *rtz = malloc(CHUNK * sizeof *rtz), *want = malloc(CHUNK * 2), *want_z = malloc(CHUNK * 2);
    if (!src || !simd || !port || !rtz || !want || !want_z) return 1;
    int have_simd = tsc_formats_simd_set(1);
    printf("AVX-512 BF16 path: %s\n", have_simd ? "active" : "not available (portable only)");
    uint64_t bad_rne = 0, bad_rtz = 0, bad_scalar = 0, bad_port = 0, n = 0;
    for (uint32_t hi = 0; hi < 65536u; hi += HI_STRIDE) {
        for (uint32_t lo = 0; lo < CHUNK; lo++) src[lo] = fpu_ref_u2f(hi << 16 | lo);
        tsc_formats_simd_set(1);
        tsc_convert_from_f32(TSC_FMT_BF16, src, simd, CHUNK, TSC_ROUND_NEAREST_EVEN, NULL);
        tsc_formats_simd_set(0);
        tsc_convert_from_f32(TSC_FMT_BF16, src, port, CHUNK, TSC_ROUND_NEAREST_EVEN, NULL);
        tsc_convert_from_f32(TSC_FMT_BF16, src, rtz, CHUNK, TSC_ROUND_TOWARD_ZERO, NULL);
        ref_bf16(src, want, want_z, CHUNK);
        if (memcmp(simd, want, CHUNK * 2) || memcmp(port, want, CHUNK * 2) || memcmp(rtz, want_z, CHUNK * 2)) {
            for (uint32_t lo = 0; lo < CHUNK; lo++) {
                if (simd[lo] != want[lo] && bad_rne++ < 5)
                    fprintf(stderr, "rne 0x%08x: got 0x%04x want 0x%04x\n", hi << 16 | lo, simd[lo], want[lo]);
                if (port[lo] != want[lo] && bad_port++ < 5)
                    fprintf(stderr, "portable 0x%08x: got 0x%04x want 0x%04x\n", hi << 16 | lo, port[lo], want[lo]);
                if (rtz[lo] != want_z[lo] && bad_rtz++ < 5)
                    fprintf(stderr, "rtz 0x%08x: got 0x%04x want 0x%04x\n", hi << 16 | lo, rtz[lo], want_z[lo]);
            }
        }
        /* The scalar entry point shares the portable formula; one high half-word in 16 suffices. */
        if (hi % 16 == 0)
            for (uint32_t lo = 0; lo < CHUNK; lo++)
                if (tsc_bf16_from_f32(src[lo]) != want[lo] && bad_scalar++ < 5)
                    fprintf(stderr, "scalar 0x%08x wrong\n", hi << 16 | lo);
        n += CHUNK;
    }
    tsc_formats_simd_set(1);
    printf("checked %llu inputs: mismatches rne(bulk) %llu, rne(portable) %llu, rtz %llu, scalar %llu\n",
           (unsigned long long)n, (unsigned long long)bad_rne, (unsigned long long)bad_port,
           (unsigned long long)bad_rtz, (unsigned long long)bad_scalar);
    CHECK(n == (HI_STRIDE == 1 ? 4294967296ULL : n));
    CHECK_EQ_INT(bad_rne, 0);
    CHECK_EQ_INT(bad_port, 0);
    CHECK_EQ_INT(bad_rtz, 0);
    CHECK_EQ_INT(bad_scalar, 0);
    /* The reference must itself distinguish the modes: a tie and a sticky case, by hand. */
    CHECK_EQ_U32(ref_one((0x3f808000u), 0), 0x3f80); /* 1 + 2^-8: tie, even stays */
    CHECK_EQ_U32(ref_one((0x3f818000u), 0), 0x3f82); /* odd LSB: tie goes up */
    CHECK_EQ_U32(ref_one((0x3f818000u), 1), 0x3f81);
    CHECK_EQ_U32(ref_one((0x7f7fffffu), 0), 0x7f80); /* FLT_MAX overflows to Inf */
    CHECK_EQ_U32(ref_one((0x7f7fffffu), 1), 0x7f7f);
    free(src); free(simd); free(port); free(rtz); free(want); free(want_z);
    return tsc_test_done();
}
