/* ctest-labels: slow (over 5 s on 2 cores) */
/* Exhaustive: all 2^32 FP32 bit patterns to FP16 (nearest-even) against the compiler's own
 * _Float16 conversion, an implementation we did not write: compiled for F16C (gcc emits the
 * VCVTPS2PH instruction) where the CPU has it, else libgcc's soft-float __truncsfhf2, which is
 * ~20x slower, so without F16C only every 17th high half-word is visited. Checked: the scalar
 * function (on 1/16 of the inputs) and the bulk conversion (on all). NaN results are
 * compared as "is a NaN of the same sign" (payload propagation is not specified by C); every
 * other result bit for bit. Also: the slow generic path (tsc_encode from double) on one
 * input in 61, which must agree with the fast one, and the FP16 -> FP32 decode of all 2^16 codes
 * against _Float16 -> float.
 *
 * Under TSC_SANITIZE (ASan/UBSan, several times slower) the outer loop takes every 127th high half-word. */
#include "tsc_formats.h"
#include "tsc_test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef TSC_SANITIZE
#define HI_STRIDE 127u
#else
#define HI_STRIDE 1u
#endif
#define CHUNK 65536u

#if !defined(__FLT16_MAX__)
int main(void) {
    printf("no _Float16 in this compiler: skipped\n");
    return 77;
}
#else
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

#define REF_BODY                                                     \
    for (uint32_t i = 0; i < n; i++) {                                 \
        _Float16 h = (_Float16)src[i];                                 \
        memcpy(&want[i], &h, 2);                                       \
    }
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("f16c"))) static void ref_f16c(const float *src, uint16_t *want, uint32_t n) { REF_BODY }
static int have_f16c(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("f16c");
}
#else
static void ref_f16c(const float *src, uint16_t *want, uint32_t n) { REF_BODY }
static int have_f16c(void) { return 0; }
#endif
static void ref_soft(const float *src, uint16_t *want, uint32_t n) { REF_BODY }

static int same16(uint16_t got, uint16_t want) {
    int got_nan = (got & 0x7c00) == 0x7c00 && (got & 0x3ff);
    int want_nan = (want & 0x7c00) == 0x7c00 && (want & 0x3ff);
    if (got_nan || want_nan) return got_nan && want_nan && (got & 0x8000) == (want & 0x8000);
    return got == want;
}

int main(void) {
    float *src = malloc(CHUNK * sizeof *src);
    uint16_t *bulk = malloc(CHUNK * 2), *want = malloc(CHUNK * 2), *scal = malloc(CHUNK * 2);
    if (!src || !bulk || !want || !scal) return 1;
    uint64_t bad_scalar = 0, bad_bulk = 0, bad_generic = 0, n = 0, n_generic = 0;
    int f16c = have_f16c();
    uint32_t stride = HI_STRIDE * (f16c ? 1u : 17u);
    printf("reference: %s\n", f16c ? "_Float16 via F16C" : "_Float16 via libgcc soft-float (strided)");
    for (uint32_t hi = 0; hi < 65536u; hi += stride) {
        for (uint32_t lo = 0; lo < CHUNK; lo++) src[lo] = u2f(hi << 16 | lo);
        if (f16c) ref_f16c(src, want, CHUNK);
        else ref_soft(src, want, CHUNK);
        tsc_convert_from_f32(TSC_FMT_FP16, src, bulk, CHUNK, TSC_ROUND_NEAREST_EVEN, NULL);
        /* The scalar entry point shares the bulk path's formula: one high half-word in 16 suffices. */
        if (hi % 16 == 0)
            for (uint32_t lo = 0; lo < CHUNK; lo++) scal[lo] = tsc_fp16_from_f32(src[lo]);
        else
            memcpy(scal, bulk, CHUNK * 2);
        /* Fast path: identical arrays; element-wise NaN-tolerant comparison only otherwise. */
        if (memcmp(bulk, want, CHUNK * 2) || memcmp(scal, want, CHUNK * 2))
            for (uint32_t lo = 0; lo < CHUNK; lo++) {
                if (!same16(scal[lo], want[lo]) && bad_scalar++ < 5)
                    fprintf(stderr, "scalar 0x%08x: got 0x%04x want 0x%04x\n", hi << 16 | lo, scal[lo], want[lo]);
                if (!same16(bulk[lo], want[lo]) && bad_bulk++ < 5)
                    fprintf(stderr, "bulk 0x%08x: got 0x%04x want 0x%04x\n", hi << 16 | lo, bulk[lo], want[lo]);
            }
        for (uint32_t lo = hi % 61u; lo < CHUNK; lo += 61u) {
            n_generic++;
            uint16_t g = (uint16_t)tsc_encode((double)src[lo], TSC_FMT_FP16, TSC_ROUND_NEAREST_EVEN, NULL);
            if (!same16(g, want[lo]) && bad_generic++ < 5)
                fprintf(stderr, "generic 0x%08x: got 0x%04x want 0x%04x\n", hi << 16 | lo, g, want[lo]);
        }
        n += CHUNK;
    }
    printf("checked %llu inputs (%llu through the generic path): mismatches scalar %llu, bulk %llu, generic %llu\n",
           (unsigned long long)n, (unsigned long long)n_generic, (unsigned long long)bad_scalar,
           (unsigned long long)bad_bulk, (unsigned long long)bad_generic);
    CHECK_EQ_INT(bad_scalar, 0);
    CHECK_EQ_INT(bad_bulk, 0);
    CHECK_EQ_INT(bad_generic, 0);

    /* Decode: all 2^16 codes against _Float16 -> float (NaN: both NaN, same sign). */
    uint64_t bad_dec = 0;
    for (uint32_t c = 0; c < 65536u; c++) {
        _Float16 h;
        uint16_t c16 = (uint16_t)c;
        memcpy(&h, &c16, 2);
        float w = (float)h, g = tsc_fp16_to_f32(c16);
        double gd = tsc_decode(c, TSC_FMT_FP16);
        int ok = isnan(w) ? (isnan(g) && isnan(gd) && !signbit(g) == !signbit(w))
                          : (memcmp(&w, &g, 4) == 0 && gd == (double)w && !signbit(gd) == !signbit(w));
        if (!ok && bad_dec++ < 5) fprintf(stderr, "decode 0x%04x: got %a want %a\n", c, g, w);
    }
    CHECK_EQ_INT(bad_dec, 0);
    free(src); free(bulk); free(want); free(scal);
    return tsc_test_done();
}
#endif
