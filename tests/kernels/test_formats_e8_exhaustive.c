/* ctest-labels: slow
 * Exhaustive: every one of the 2^32 FP32 bit patterns rounded to e8m5, e8m3 and e8m1 (FP32's exponent
 * range, 5, 3 and 1 mantissa bits, stored as an FP32 with the low bits zero), nearest-even and toward
 * zero, against fpu_round_ref.h's formulation, which lets the FPU decide ties (the reference of
 * test_formats_bf16_exhaustive.c too). Checked paths: the bulk conversion (all inputs, both modes),
 * the decode of every result, and the generic path (tsc_encode from a double and tsc_round_f32) on
 * one high half-word in 61. Under TSC_SANITIZE every 257th high half-word (fpu_round_ref.h); the
 * normal build is exhaustive. */
#include "fpu_round_ref.h"
#include "tsc_formats.h"
#include "tsc_test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint32_t ref_one(uint32_t u, int p, int rtz) {
    float x = fpu_ref_u2f(u);
    uint32_t a, b;
    fpu_ref_round(&x, &a, &b, 1, p);
    return rtz ? b : a;
}

/* got == want, or both NaN of the same sign (tsc_round_f32 returns a float, whose NaN payload C
 * does not pin down) */
static int same_f(float got, uint32_t want) {
    float w = fpu_ref_u2f(want);
    if (w != w) return got != got && (fpu_ref_f2u(got) >> 31) == (want >> 31);
    return fpu_ref_f2u(got) == want;
}

typedef struct { uint64_t rne, rtz, decode, generic, n_generic; } bad_t;

static void check_format(tsc_format_t fmt, float *src, uint32_t *got, uint32_t *got_z, uint32_t *want,
                         uint32_t *want_z, float *dec, bad_t *bad, uint64_t *n) {
    const int p = tsc_format_mant_bits(fmt);
    const char *name = tsc_format_name(fmt);
    for (uint32_t hi = 0; hi < 65536u; hi += HI_STRIDE) {
        for (uint32_t lo = 0; lo < CHUNK; lo++) src[lo] = fpu_ref_u2f(hi << 16 | lo);
        tsc_convert_from_f32(fmt, src, got, CHUNK, TSC_ROUND_NEAREST_EVEN, NULL);
        tsc_convert_from_f32(fmt, src, got_z, CHUNK, TSC_ROUND_TOWARD_ZERO, NULL);
        fpu_ref_round(src, want, want_z, CHUNK, p);
        if (memcmp(got, want, CHUNK * 4) || memcmp(got_z, want_z, CHUNK * 4))
            for (uint32_t lo = 0; lo < CHUNK; lo++) {
                if (got[lo] != want[lo] && bad->rne++ < 5)
                    fprintf(stderr, "%s rne 0x%08x: got 0x%08x want 0x%08x\n", name, hi << 16 | lo, got[lo], want[lo]);
                if (got_z[lo] != want_z[lo] && bad->rtz++ < 5)
                    fprintf(stderr, "%s rtz 0x%08x: got 0x%08x want 0x%08x\n", name, hi << 16 | lo, got_z[lo],
                            want_z[lo]);
            }
        /* reading the container back gives the float it holds */
        tsc_convert_to_f32(fmt, want, dec, CHUNK);
        if (memcmp(dec, want, CHUNK * 4))
            for (uint32_t lo = 0; lo < CHUNK; lo++)
                if (fpu_ref_f2u(dec[lo]) != want[lo] && bad->decode++ < 5)
                    fprintf(stderr, "%s decode 0x%08x: got 0x%08x\n", name, want[lo], fpu_ref_f2u(dec[lo]));
        /* the generic path through a double (tsc_encode, the rounding of the double reference) */
        if (hi % 61 == 0)
            for (uint32_t lo = 0; lo < CHUNK; lo++) {
                const uint32_t e = (uint32_t)tsc_encode((double)src[lo], fmt, TSC_ROUND_NEAREST_EVEN, NULL);
                const uint32_t ez = (uint32_t)tsc_encode((double)src[lo], fmt, TSC_ROUND_TOWARD_ZERO, NULL);
                const int ok = e == want[lo] && ez == want_z[lo] &&
                               same_f(tsc_round_f32(src[lo], fmt, TSC_ROUND_NEAREST_EVEN, NULL), want[lo]) &&
                               same_f(tsc_round_f32(src[lo], fmt, TSC_ROUND_TOWARD_ZERO, NULL), want_z[lo]);
                if (!ok && bad->generic++ < 5) fprintf(stderr, "%s generic 0x%08x wrong\n", name, hi << 16 | lo);
                bad->n_generic++;
            }
        *n += CHUNK;
    }
}

int main(void) {
    float *src = malloc(CHUNK * sizeof *src), *dec = malloc(CHUNK * sizeof *dec);
    uint32_t *got = malloc(CHUNK * 4), *got_z = malloc(CHUNK * 4), *want = malloc(CHUNK * 4),
             *want_z = malloc(CHUNK * 4);
    if (!src || !dec || !got || !got_z || !want || !want_z) return 1;
    const tsc_format_t fmts[] = {TSC_FMT_E8M5, TSC_FMT_E8M3, TSC_FMT_E8M1};
    for (size_t k = 0; k < sizeof fmts / sizeof *fmts; k++) {
        bad_t bad = {0};
        uint64_t n = 0;
        check_format(fmts[k], src, got, got_z, want, want_z, dec, &bad, &n);
        printf("%s: checked %llu inputs: mismatches rne %llu, rtz %llu, decode %llu; generic path on %llu: %llu\n",
               tsc_format_name(fmts[k]), (unsigned long long)n, (unsigned long long)bad.rne,
               (unsigned long long)bad.rtz, (unsigned long long)bad.decode, (unsigned long long)bad.n_generic,
               (unsigned long long)bad.generic);
        CHECK(n == (HI_STRIDE == 1 ? 4294967296ULL : n));
        CHECK_EQ_INT(bad.rne, 0);
        CHECK_EQ_INT(bad.rtz, 0);
        CHECK_EQ_INT(bad.decode, 0);
        CHECK_EQ_INT(bad.generic, 0);
        CHECK(bad.n_generic > 0);
    }
    /* The reference must itself distinguish the modes and the widths: ties, a sticky case, overflow
     * and a subnormal, by hand. e8m3: 1 + 2^-4 is a tie (1.000|1), even stays 1; 1 + 3·2^-4 (1.001|1)
     * goes up to 1.010. */
    CHECK_EQ_U32(ref_one(0x3f880000u, 3, 0), 0x3f800000u);
    CHECK_EQ_U32(ref_one(0x3f980000u, 3, 0), 0x3fa00000u);
    CHECK_EQ_U32(ref_one(0x3f980000u, 3, 1), 0x3f900000u);
    CHECK_EQ_U32(ref_one(0x3f880001u, 3, 0), 0x3f900000u); /* just above the tie: sticky, up */
    CHECK_EQ_U32(ref_one(0x3f840000u, 5, 0), 0x3f840000u); /* exact at 5 bits, not at 3 */
    CHECK_EQ_U32(ref_one(0x3f840000u, 3, 0), 0x3f800000u);
    CHECK_EQ_U32(ref_one(0x7f7fffffu, 3, 0), 0x7f800000u); /* FLT_MAX overflows to Inf */
    CHECK_EQ_U32(ref_one(0x7f7fffffu, 3, 1), 0x7f700000u); /* toward zero: e8m3's max, 1.875 * 2^127 */
    CHECK_EQ_U32(ref_one(0x7f77ffffu, 3, 0), 0x7f700000u); /* just below the overflow threshold 1.9375 * 2^127 */
    CHECK_EQ_U32(ref_one(0x7f780000u, 3, 0), 0x7f800000u); /* the threshold itself: a tie, the odd max rounds up */
    CHECK_EQ_U32(ref_one(0x00080000u, 3, 0), 0x00000000u); /* 2^-130, half of e8m3's smallest subnormal 2^-129: even 0 */
    CHECK_EQ_U32(ref_one(0x00080001u, 3, 0), 0x00100000u);
    CHECK_EQ_U32(ref_one(0x807fffffu, 3, 0), 0x80800000u); /* the largest subnormal carries into 2^-126 */
    CHECK_EQ_U32(ref_one(0x7f800001u, 3, 0), 0x7fc00000u); /* a signalling NaN: quieted */
    /* e8m1, one mantissa bit: [1, 2) holds 1 and 1.5. 1.25 is a tie, even stays 1; 1.75 (1.1|1) goes up
     * to 2; the largest value 1.5 * 2^127, the threshold 1.75 * 2^127 a tie with the odd max, up to Inf;
     * the one subnormal 2^-127, half of it a tie to even 0, 1.5 * 2^-127 a tie up to 2^-126. */
    CHECK_EQ_U32(ref_one(0x3fa00000u, 1, 0), 0x3f800000u);
    CHECK_EQ_U32(ref_one(0x3fa00001u, 1, 0), 0x3fc00000u);
    CHECK_EQ_U32(ref_one(0x3fe00000u, 1, 0), 0x40000000u);
    CHECK_EQ_U32(ref_one(0x3fe00000u, 1, 1), 0x3fc00000u);
    CHECK_EQ_U32(ref_one(0xc0600000u, 1, 0), 0xc0800000u); /* -3.5: a tie, -3 odd, to -4 */
    CHECK_EQ_U32(ref_one(0x7f5fffffu, 1, 0), 0x7f400000u);
    CHECK_EQ_U32(ref_one(0x7f600000u, 1, 0), 0x7f800000u);
    CHECK_EQ_U32(ref_one(0x7f7fffffu, 1, 1), 0x7f400000u);
    CHECK_EQ_U32(ref_one(0x00200000u, 1, 0), 0x00000000u);
    CHECK_EQ_U32(ref_one(0x00200001u, 1, 0), 0x00400000u);
    CHECK_EQ_U32(ref_one(0x00600000u, 1, 0), 0x00800000u);
    CHECK_EQ_U32(ref_one(0x807fffffu, 1, 1), 0x80400000u);
    CHECK_EQ_U32(ref_one(0xffa12345u, 1, 0), 0xffc00000u); /* NaN: the one payload bit is the quiet bit */
    free(src); free(dec); free(got); free(got_z); free(want); free(want_z);
    return tsc_test_done();
}
