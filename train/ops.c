/* ops.c: the element-wise operations of the models, instantiated for float and double. */
#include <math.h>
#include <string.h>

#include "model_internal.h"

/* FP32 e^x from fused multiply-adds only, so a loop of it vectorises and every instance (AVX-512
 * or scalar fmaf) gives the same bits: x clamped to [−87, 88] (e^x stays a normal float), n =
 * nearest integer to x·log2(e) (the 1.5·2^23 shift rounds it), r = x − n·ln2 in two parts
 * (Cody–Waite: n·LN2_HI is exact), e^r by its Taylor polynomial to r^7 (|r| ≤ 0.347: truncation
 * below 6e-9 relative), times 2^n built in the exponent bits. A NaN gives e^−87. */
static inline __attribute__((always_inline)) float exp_f32(float x) {
    const float SHIFT = 12582912.0f, LOG2E = 1.44269504f, LN2_HI = 0.693145751953125f,
                LN2_LO = 1.42860677e-6f;
    x = !(x > -87.0f) ? -87.0f : x; /* NaN too: no float-to-integer conversion of a NaN below */
    x = x > 88.0f ? 88.0f : x;
    float n = fmaf(x, LOG2E, SHIFT) - SHIFT;
    float r = fmaf(n, -LN2_LO, fmaf(n, -LN2_HI, x));
    float p = 1.0f / 5040;
    p = fmaf(p, r, 1.0f / 720);
    p = fmaf(p, r, 1.0f / 120);
    p = fmaf(p, r, 1.0f / 24);
    p = fmaf(p, r, 1.0f / 6);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    uint32_t e = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &e, 4);
    return p * scale;
}

/* FP32 tanh from one e^x: 1 − 2 / (e^{2u} + 1) (±1 where e^{2u} is beyond the clamp); within a
 * few FP32 ulps of 1 + tanh where GELU uses it (absolute error at most 1.9e-7 over the values
 * tests/train/test_model_bf16.c draws). */
static inline __attribute__((always_inline)) float tanh_f32(float u) {
    return 1.0f - 2.0f / (exp_f32(2.0f * u) + 1.0f);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define GELU_SPAN_SIMD __attribute__((target("avx512f,fma")))
#define GELU_SIMD_OK tsc_train_have_avx512
#define GELU_SPAN_SIMD2 __attribute__((target("avx2,fma")))
#define GELU_SIMD2_OK tsc_train_have_avx2
#endif

#define TSC_OPS_TMPL 1
#define real float
#define S _f
#define SQRT sqrtf
#define TANH tanh_f32
#define EXP expf
#define LOG logf
#include "ops_tmpl.c"
#undef real
#undef S
#undef SQRT
#undef TANH
#undef EXP
#undef LOG
#undef GELU_SPAN_SIMD
#undef GELU_SIMD_OK
#undef GELU_SPAN_SIMD2
#undef GELU_SIMD2_OK

#define real double
#define S _d
#define SQRT sqrt
#define TANH tanh
#define EXP exp
#define LOG log
#include "ops_tmpl.c"
#undef real
#undef S
