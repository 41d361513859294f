/* test_model_bf16.c: the BF16 autocast product (AVX-512 BF16 path and portable path) bit for bit
 * against a scalar formulation written here from the Intel SDM's VDPBF16PS definition, and the
 * BF16-exactness of a BF16-mode forward's q, k, v.
 * Reference, per output element: a, b rounded to BF16 (nearest-even, NaN quieted); acc = +0;
 * for p = 0, 1, ...: acc = step(acc, a[2p+1]·b[2p+1]); acc = step(acc, a[2p]·b[2p]), where a BF16
 * denormal operand reads as 0, the product is exact (in double), acc + product is rounded once
 * to FP32 (TwoSum in double, the midpoint case settled by the sum's error) and a denormal result
 * becomes a zero of its sign; then + bf16(bias), rounded to BF16, NaN -> 0x7fc0. */
#include "tsc_test.h"

#include <float.h>

#include "cpu_internal.h"
#include "model_internal.h"
#include "tsc_model.h"

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static float ref_bf16(float x) { /* nearest-even on the bits, NaN quieted */
    uint32_t u = fbits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return bitsf((u | 0x00400000u) & 0xffff0000u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return bitsf(u & 0xffff0000u);
}

/* x + y (doubles, x a float value, y an exact product) rounded once to float, then FTZ. */
static float ref_add(double x, double y) {
    double s = x + y, bb = s - x, e = (x - (s - bb)) + (y - bb); /* TwoSum: x + y = s + e exactly */
    float r = (float)s;
    if (e != 0 && !isinf(r) && !isnan(r) && (double)r != s) {
        float r2 = nextafterf(r, s > r ? INFINITY : -INFINITY);
        if (!isinf(r2) && ((double)r + (double)r2) / 2 == s) /* s is a midpoint: the exact sum's side wins */
            r = (e > 0) == (r2 > r) ? r2 : r;
    }
    if (r != 0 && fabsf(r) < FLT_MIN) r = copysignf(0.0f, r);
    return r;
}

static float ref_daz(float a) { return fabsf(a) < FLT_MIN ? copysignf(0.0f, a) : a; }

static void reference(int M, int N, int K, const float *A, const float *B, const float *bias, float *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int p = 0; p < (K + 1) / 2; p++)
                for (int h = 1; h >= 0; h--) {
                    int k = 2 * p + h;
                    if (k >= K) continue; /* padding: + 0·0 changes nothing */
                    float a = ref_daz(ref_bf16(A[i * K + k])), b = ref_daz(ref_bf16(B[j * K + k]));
                    acc = ref_add(acc, (double)a * (double)b);
                }
            if (bias) acc = acc + ref_bf16(bias[j]);
            C[i * N + j] = isnan(acc) ? bitsf(0x7fc00000u) : ref_bf16(acc);
        }
}

/* Random FP32 values of many magnitudes, with BF16 rounding ties, FP32/BF16 denormals, and
 * (when specials) a few Inf and NaN. tiny: magnitudes near 2^-64 so products land in FP32's
 * denormal range (the FTZ path). */
static float draw(uint64_t *s, int specials, int tiny) {
    uint32_t r = (uint32_t)tsc_test_lcg(s);
    int kind = (int)(tsc_test_lcg(s) % 1000);
    float v = (float)tsc_test_nrand(s) * ldexpf(1.0f, (int)(r % 16) - 8);
    if (tiny) v = ldexpf((float)tsc_test_nrand(s), -62 - (int)(r % 6));
    if (kind < 100) v = bitsf((fbits(v) & 0xffff0000u) | 0x8000u);                    /* tie at bf16 */
    else if (kind < 140) v = bitsf((r & 0x807fffffu));                                 /* FP32 denormal */
    else if (kind < 180) v = bitsf((r & 0x807f0000u) | 0x00010000u);                   /* BF16 denormal */
    else if (kind < 190) v = 0.0f;
    else if (specials && kind < 192) v = (r & 1) ? INFINITY : -INFINITY;
    else if (specials && kind < 193) v = NAN;
    return v;
}

static void run_case(int M, int N, int K, int specials, int tiny, int with_bias, int acc, uint64_t *s) {
    size_t nA = (size_t)M * K, nB = (size_t)N * K, nC = (size_t)M * N;
    float *A = malloc(nA * 4), *B = malloc(nB * 4), *bias = malloc((size_t)N * 4), *ref = malloc(nC * 4);
    float *c1 = malloc(nC * 4), *c2 = malloc(nC * 4), *c0 = malloc(nC * 4);
    /* tiny 2: A's rows 8..15 and B's columns 32.. tiny, the rest not (blocks of both AVX2 paths in
     * one product); tiny 3: every magnitude near 2^-56, where the AVX2 path's test of its blocks
     * (operand exponents summing to 142 or more) falls on either side */
    for (size_t i = 0; i < nA; i++) {
        A[i] = draw(s, specials, tiny == 1 || (tiny == 2 && i / K >= 8 && i / K < 16));
        if (tiny == 3) A[i] = ldexpf((float)tsc_test_nrand(s), -56 - (int)(tsc_test_lcg(s) % 2));
    }
    for (size_t i = 0; i < nB; i++) {
        B[i] = draw(s, specials, tiny == 1 || (tiny == 2 && i / K >= 32));
        if (tiny == 3) B[i] = ldexpf((float)tsc_test_nrand(s), -56 - (int)(tsc_test_lcg(s) % 2));
    }
    for (int j = 0; j < N; j++) bias[j] = draw(s, 0, 0);
    for (size_t i = 0; i < nC; i++) c0[i] = (float)tsc_test_nrand(s);
    reference(M, N, K, A, B, with_bias ? bias : NULL, ref);
    if (acc)
        for (size_t i = 0; i < nC; i++) ref[i] = c0[i] + ref[i];
    uint32_t *work = malloc(tsc_gemm_work(M, N, K) * 4);
    memcpy(c1, c0, nC * 4);
    memcpy(c2, c0, nC * 4);
    int simd = tsc_gemm_bf16_simd_set(1);
    tsc_gemm_bf16(M, N, K, (tsc_mref_t){A, (size_t)K, 1}, (tsc_mref_t){B, (size_t)K, 1}, with_bias ? bias : NULL, c1,
                  (size_t)N, acc, work);
    /* the AVX2 + FMA path (FP32 chains on packed BF16 operands) even where AVX-512 BF16 exists */
    float *c5 = malloc(nC * 4), *c6 = malloc(nC * 4);
    memcpy(c5, c0, nC * 4);
    memcpy(c6, c0, nC * 4);
    int old_cap = tsc_cpu_cap(1);
    tsc_gemm_bf16(M, N, K, (tsc_mref_t){A, (size_t)K, 1}, (tsc_mref_t){B, (size_t)K, 1}, with_bias ? bias : NULL, c5,
                  (size_t)N, acc, work);
    tsc_cpu_cap(old_cap);
    tsc_gemm_bf16_simd_set(0);
    tsc_gemm_bf16(M, N, K, (tsc_mref_t){A, (size_t)K, 1}, (tsc_mref_t){B, (size_t)K, 1}, with_bias ? bias : NULL, c2,
                  (size_t)N, acc, work);
    /* the transposed views the backward passes (A(i,k) at k·M + i, B(j,k) at k·N + j), SIMD kernel */
    float *At = malloc(nA * 4), *Bt = malloc(nB * 4), *c3 = malloc(nC * 4);
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) At[(size_t)k * M + i] = A[(size_t)i * K + k];
    for (int j = 0; j < N; j++)
        for (int k = 0; k < K; k++) Bt[(size_t)k * N + j] = B[(size_t)j * K + k];
    memcpy(c3, c0, nC * 4);
    tsc_gemm_bf16_simd_set(1);
    tsc_gemm_bf16(M, N, K, (tsc_mref_t){At, 1, (size_t)M}, (tsc_mref_t){Bt, 1, (size_t)N}, with_bias ? bias : NULL,
                  c3, (size_t)N, acc, work);
    old_cap = tsc_cpu_cap(1); /* transposed on the AVX2 path */
    tsc_gemm_bf16(M, N, K, (tsc_mref_t){At, 1, (size_t)M}, (tsc_mref_t){Bt, 1, (size_t)N}, with_bias ? bias : NULL,
                  c6, (size_t)N, acc, work);
    tsc_cpu_cap(old_cap);
    float *c4 = malloc(nC * 4); /* the same on the scalar kernel and scalar packing */
    memcpy(c4, c0, nC * 4);
    tsc_gemm_bf16_simd_set(0);
    tsc_train_f32_simd_set(0);
    tsc_gemm_bf16(M, N, K, (tsc_mref_t){At, 1, (size_t)M}, (tsc_mref_t){Bt, 1, (size_t)N}, with_bias ? bias : NULL,
                  c4, (size_t)N, acc, work);
    tsc_gemm_bf16_simd_set(1);
    tsc_train_f32_simd_set(1);
    size_t bad1 = 0, bad2 = 0, bad3 = 0, bad4 = 0, nan = 0, zero = 0;
    for (size_t i = 0; i < nC; i++) {
        if (fbits(c1[i]) != fbits(ref[i]) && bad1++ < 3)
            fprintf(stderr, "simd [%zu]: 0x%08x ref 0x%08x\n", i, fbits(c1[i]), fbits(ref[i]));
        if (fbits(c2[i]) != fbits(ref[i]) && bad2++ < 3)
            fprintf(stderr, "portable [%zu]: 0x%08x ref 0x%08x\n", i, fbits(c2[i]), fbits(ref[i]));
        if ((fbits(c5[i]) != fbits(ref[i]) || fbits(c6[i]) != fbits(ref[i])) && bad4++ < 3)
            fprintf(stderr, "avx2 [%zu]: 0x%08x 0x%08x ref 0x%08x\n", i, fbits(c5[i]), fbits(c6[i]), fbits(ref[i]));
        if ((fbits(c3[i]) != fbits(ref[i]) || fbits(c4[i]) != fbits(ref[i])) && bad3++ < 3)
            fprintf(stderr, "transposed [%zu]: 0x%08x ref 0x%08x\n", i, fbits(c3[i]), fbits(ref[i]));
        nan += isnan(ref[i]);
        zero += ref[i] == 0;
    }
    printf("M %d N %d K %d specials %d tiny %d bias %d acc %d (simd: %s; AVX2 %s): %zu elements, %zu NaN, %zu zero; "
           "mismatches simd %zu portable %zu transposed %zu avx2 %zu\n", M, N, K, specials, tiny, with_bias, acc,
           !simd ? "none" : tsc_cpu_has(TSC_CPU_AVX512_BF16) ? "AVX-512 BF16" : tsc_train_have_avx512() ? "AVX-512 FP32 chains" : "AVX2", tsc_cpu_has(TSC_CPU_AVX2_FMA) ? "run" : "absent",
           nC, nan, zero, bad1, bad2, bad3, bad4);
    CHECK_EQ_INT(bad4, 0);
    CHECK_EQ_INT(bad1, 0);
    CHECK_EQ_INT(bad2, 0);
    CHECK_EQ_INT(bad3, 0);
    if (specials && K > 64) CHECK(nan > 0 && nan < nC); /* the long case exercises NaN and finite results */
    if (tiny == 1 && !acc) CHECK(zero > 0);     /* and FTZ of the FP32 accumulator */
    free(A); free(B); free(bias); free(ref); free(c0); free(c1); free(c2); free(work);
    free(At); free(Bt); free(c3); free(c4); free(c5); free(c6);
}

/* The steps the reference relies on, on hand-picked values. */
static void check_step(void) {
    CHECK(tsc_bf16_dot_step(1.0f, 1.0f, ldexpf(1.0f, -24)) == 1.0f);            /* tie to even */
    CHECK(tsc_bf16_dot_step(1.0f, 1.0f, ldexpf(1.5f, -24)) == 1.0f + ldexpf(1.0f, -23));
    CHECK(tsc_bf16_dot_step(0.0f, ldexpf(1.0f, -70), ldexpf(1.0f, -60)) == 0.0f); /* denormal sum flushed */
    CHECK(signbit(tsc_bf16_dot_step(-0.0f, ldexpf(-1.0f, -70), ldexpf(1.0f, -60))));
    CHECK(tsc_bf16_dot_step(2.0f, bitsf(0x00010000u), 1e30f) == 2.0f);           /* denormal operand is 0 */
}

static void check_forward_bf16(const char *name) {
    tsc_model_config_t cfg;
    CHECK(tsc_model_config_get(name, &cfg) == TSC_OK);
    tsc_model_t *m = NULL;
    CHECK(tsc_model_create(&m, &cfg, TSC_PREC_BF16, 2, 16) == TSC_OK);
    if (!m) return;
    tsc_model_init(m, 3);
    int32_t tok[32], tgt[32];
    for (int i = 0; i < 32; i++) tok[i] = (i * 37) % 256, tgt[i] = (i * 11 + 5) % 256;
    double loss = 0;
    CHECK(tsc_model_forward(m, tok, tgt, &loss) == TSC_OK);
    CHECK(fabs(loss - log(256.0)) < 0.1);
    size_t off = 0, n = 0;
    for (int l = 0; l < cfg.n_layer; l++) {
        tsc_model_attn_view_t v;
        CHECK(tsc_model_attn_view(m, l, &v) == TSC_OK);
        const float *arr[3] = {v.q, v.k, v.v};
        size_t cnt[3] = {(size_t)v.B * v.H * v.T * v.D, (size_t)v.B * v.Hkv * v.T * v.D, (size_t)v.B * v.Hkv * v.T * v.D};
        for (int a = 0; a < 3; a++)
            for (size_t i = 0; i < cnt[a]; i++, n++) off += (fbits(arr[a][i]) & 0xffffu) != 0;
    }
    printf("%s BF16 forward: loss %.4f, %zu q/k/v values, %zu not BF16-exact\n", name, loss, n, off);
    CHECK_EQ_INT(off, 0);
    CHECK(tsc_model_backward(m) == TSC_OK);
    tsc_model_free(m);
}

/* FP32 product: per element fmaf(A(i,k), B(j,k), acc) for k = 0, 1, ... from +0, bit for bit, on a
 * row-major A and on the transposed views the backward uses (A(i,k) at k·M + i, B(j,k) at k·N + j).
 * N = 45: one edge block of every kernel; N = 101: whole blocks of 32 and of 48 columns, and edges;
 * K = 1000: a long chain. */
static void check_f32(int M, int N, int K, uint64_t *s) {
    float *A = malloc((size_t)M * K * 4), *B = malloc((size_t)N * K * 4), *C = malloc((size_t)M * N * 4);
    float *work = malloc(tsc_gemm_work(M, N, K) * 4);
    for (int i = 0; i < M * K; i++) A[i] = (float)tsc_test_nrand(s);
    for (int i = 0; i < N * K; i++) B[i] = (float)tsc_test_nrand(s);
    /* every path the CPU has: the widest SIMD (AVX-512), AVX2 + FMA, and the scalar kernel */
    for (int run = 0; run < 6; run++) {
        int layout = run % 2, path = run / 2;
        tsc_mref_t a = layout ? (tsc_mref_t){A, 1, (size_t)M} : (tsc_mref_t){A, (size_t)K, 1};
        tsc_mref_t b = layout ? (tsc_mref_t){B, 1, (size_t)N} : (tsc_mref_t){B, (size_t)K, 1};
        for (int i = 0; i < M * N; i++) C[i] = 1.0f;
        tsc_train_f32_simd_set(path < 2);
        int old_cap = tsc_cpu_cap(path == 1 ? 1 : 2);
        tsc_gemm_f32(M, N, K, a, b, C, (size_t)N, 1, work);
        tsc_cpu_cap(old_cap);
        tsc_train_f32_simd_set(1);
        size_t bad = 0;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float acc = 0.0f;
                for (int k = 0; k < K; k++) {
                    float x = layout ? A[(size_t)k * M + i] : A[(size_t)i * K + k];
                    float y = layout ? B[(size_t)k * N + j] : B[(size_t)j * K + k];
                    acc = fmaf(x, y, acc);
                }
                bad += fbits(C[i * N + j]) != fbits(1.0f + acc);
            }
        CHECKF(bad == 0, "fp32 gemm %dx%dx%d layout %d path %d: %zu of %d elements differ from the FMA chain", M, N, K,
               layout, path, bad, M * N);
    }
    free(A); free(B); free(C); free(work);
}

/* FP32 GELU (its own e^x, ops.c): the AVX-512 and scalar instances give the same bits, and both
 * are within bounds of GELU and tanh computed in double. */
static void check_gelu_f32(uint64_t *s) {
    enum { NV = 20000 };
    float *x = malloc(NV * 4), *y1 = malloc(NV * 4), *t1 = malloc(NV * 4), *y2 = malloc(NV * 4), *t2 = malloc(NV * 4);
    const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-40f, 100.0f, -100.0f, 9.0f, -9.0f, 1e30f, -1e30f};
    int ns = (int)(sizeof special / sizeof special[0]);
    for (int i = 0; i < NV; i++)
        x[i] = i < ns ? special[i] : (float)(tsc_test_nrand(s) * (i % 3 == 0 ? 6.0 : 1.5));
    int simd = tsc_train_f32_simd_set(1);
    tsc_gelu_fwd_f(y1, t1, x, NV);
    tsc_train_f32_simd_set(0);
    tsc_gelu_fwd_f(y2, t2, x, NV);
    tsc_train_f32_simd_set(1);
    float *y3 = malloc(NV * 4), *t3 = malloc(NV * 4); /* the AVX2 instance, where AVX-512 would run */
    int old_cap = tsc_cpu_cap(1);
    tsc_gelu_fwd_f(y3, t3, x, NV);
    tsc_cpu_cap(old_cap);
    size_t differ = 0;
    for (int i = 0; i < NV; i++) differ += fbits(y3[i]) != fbits(y2[i]) || fbits(t3[i]) != fbits(t2[i]);
    free(y3);
    free(t3);
    double worst_y = 0, worst_t = 0;
    for (int i = 0; i < NV; i++) {
        differ += fbits(y1[i]) != fbits(y2[i]) || fbits(t1[i]) != fbits(t2[i]);
        double v = x[i], u = 0.7978845608028654 * (v + 0.044715 * v * v * v), t = tanh(u), y = 0.5 * v * (1 + t);
        double ey = fabs(y1[i] - y) / fmax(1.0, fabs(v)), et = fabs(t1[i] - t);
        if (ey > worst_y) worst_y = ey;
        if (et > worst_t) worst_t = et;
    }
    printf("fp32 GELU (simd %s): %d values, %zu differ between instances; worst |y - gelu|/max(1,|x|) %.3g, "
           "worst |tanh error| %.3g\n", !simd ? "absent" : tsc_train_have_avx512() ? "AVX-512 and AVX2" : "AVX2", NV, differ, worst_y, worst_t);
    CHECK_EQ_INT(differ, 0);
    CHECK(worst_y < 3e-7);
    CHECK(worst_t < 3e-7);
    CHECK(y1[5] == 100.0f && y1[6] == 0.0f && t1[0] == 0.0f); /* saturated ends, tanh(0) */
    float nan_in = NAN, ny, nt;
    tsc_gelu_fwd_f(&ny, &nt, &nan_in, 1);
    CHECK(isnan(ny));
    free(x); free(y1); free(t1); free(y2); free(t2);
}

int main(void) {
    uint64_t s = 2024;
    check_step();
    check_f32(21, 45, 77, &s);
    check_f32(19, 101, 33, &s);
    check_f32(13, 50, 1000, &s);
    check_gelu_f32(&s);
    run_case(13, 37, 67, 0, 0, 0, 0, &s);
    run_case(9, 50, 130, 1, 0, 1, 0, &s);
    run_case(17, 33, 64, 0, 1, 0, 0, &s);
    run_case(17, 33, 64, 0, 1, 0, 1, &s);
    run_case(64, 96, 192, 0, 0, 1, 1, &s);
    run_case(40, 45, 1, 1, 0, 0, 0, &s);
    run_case(24, 70, 96, 0, 2, 1, 0, &s);
    run_case(24, 70, 96, 0, 3, 0, 0, &s);
    run_case(24, 70, 801, 0, 2, 1, 1, &s); /* a long K: blocks of both kinds, bias, accumulate */
    run_case(17, 101, 1030, 1, 0, 0, 0, &s);
    check_forward_bf16("gpt2-tiny");
    check_forward_bf16("llama-tiny");
    return tsc_test_done();
}
