/* model_internal.h: the pieces of train/'s models that tests and benchmarks reach directly: the
 * matrix products of the three precisions (matmul.c) and the element-wise operations with their
 * backward (ops_tmpl.c, one instance per element type). Not installed. */
#ifndef TSC_MODEL_INTERNAL_H
#define TSC_MODEL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tsc_model.h"

/* The consistency checks of a configuration (model.c; tsc_model_create and
 * tsc_model_config_parse run them): TSC_OK, or TSC_ERR_ARG naming the offending key. */
tsc_status_t tsc_model_config_check(const tsc_model_config_t *cfg);

/* A read-only matrix view: element (r, c) at p[r * rs + c * cs] (float or double). */
typedef struct {
    const void *p;
    size_t rs, cs;
} tsc_mref_t;

/* The one product shape every matmul of the models is written in:
 *   C[i, j] (+)= Σ_k A(i, k) · B(j, k)     i < M, j < N, k < K,  C row-major with row stride ldc.
 * accumulate 0 overwrites C, 1 adds the product to C (after the product's own rounding). */
void tsc_gemm_f64(int M, int N, int K, tsc_mref_t A, tsc_mref_t B, double *C, size_t ldc, int accumulate);

/* FP32: per element one FP32 accumulator from +0, one fused multiply-add per k in increasing k,
 * then stored or added (FP32 add) into C: the same bits for any thread count (AVX-512 kernel or
 * its scalar twin; a build for a CPU family without AVX-512 code uses BLAS sgemm instead).
 * work: tsc_gemm_work(M, N, K) elements. */
void tsc_gemm_f32(int M, int N, int K, tsc_mref_t A, tsc_mref_t B, float *C, size_t ldc, int accumulate,
                  float *work);
/* BF16 autocast product (matmul.c's comment has the exact arithmetic): A and B rounded to BF16
 * (nearest-even), products accumulated in FP32 by the vdpbf16ps sequence, plus bias (rounded to
 * BF16; NULL: none), the sum rounded to BF16 (a NaN result is the canonical 0x7fc0), then stored
 * or added (FP32 add) into C. Same bits on the AVX-512 BF16 path and the portable one, for any
 * thread count. */
void tsc_gemm_bf16(int M, int N, int K, tsc_mref_t A, tsc_mref_t B, const float *bias, float *C, size_t ldc,
                   int accumulate, uint32_t *work);
/* Whether the AVX-512 + FMA instances of the FP32 product and of FP32 GELU run: the CPU has them
 * and tsc_train_f32_simd_set has not turned them off. The scalar instances give the same bits. */
int tsc_train_have_avx512(void);
/* The same for the AVX2 + FMA instances (a CPU without AVX-512); same bits again. */
int tsc_train_have_avx2(void);
/* Turns those instances on (default) or off (tests); returns whether they run now. */
int tsc_train_f32_simd_set(int enable);
/* Elements (4 bytes each) of the work array tsc_gemm_f32 and tsc_gemm_bf16 need (packed operands),
 * for dense views (the larger stride of A equals its other extent, likewise B), as the models pass. */
size_t tsc_gemm_work(int M, int N, int K);
/* One step of the FP32 accumulation chain: acc + a·b with a, b BF16 values as floats, as one
 * vdpbf16ps lane does it (denormal a, b read as zero, exact product, one rounding to nearest-even,
 * a denormal result flushed to a zero of its sign). */
float tsc_bf16_dot_step(float acc, float a, float b);
/* 1: the AVX-512 BF16 kernel runs when the CPU has it (default); 0: the portable kernel.
 * Returns whether the AVX-512 kernel is now in use. Not thread-safe. */
int tsc_gemm_bf16_simd_set(int enable);

/* Time spent in tsc_gemm_f32 / tsc_gemm_bf16 since the last reset and the FLOPs they did
 * (2·M·N·K each); reset 1 zeroes the counters after reading. Single-threaded callers only. */
void tsc_gemm_stats(double *seconds, double *flops, int reset);

/* Element-wise operations (ops_tmpl.c), instantiated for float (_f) and double (_d). Rows are
 * independent: OpenMP splits rows; reductions over rows (gains, biases) run sequentially. */
#define TSC_OPS_DECL(real, S)                                                                        \
    void tsc_layernorm_fwd##S(real *y, real *mean, real *rstd, const real *x, const real *w,           \
                              const real *b, int N, int C, double eps);                                \
    void tsc_layernorm_bwd##S(real *dx, real *dw, real *db, const real *dy, const real *x,             \
                              const real *w, const real *mean, const real *rstd, int N, int C);         \
    void tsc_rmsnorm_fwd##S(real *y, real *rstd, const real *x, const real *w, int N, int C, double eps); \
    void tsc_rmsnorm_bwd##S(real *dx, real *dw, const real *dy, const real *x, const real *w,          \
                            const real *rstd, int N, int C);                                            \
    void tsc_gelu_fwd##S(real *y, real *th, const real *x, size_t n);                                  \
    void tsc_gelu_bwd##S(real *dx, const real *dy, const real *x, const real *th, size_t n);           \
    void tsc_swiglu_fwd##S(real *y, const real *g, const real *u, size_t n);                           \
    void tsc_swiglu_bwd##S(real *dg, real *du, const real *dy, const real *g, const real *u, size_t n); \
    void tsc_rope_fwd##S(real *x, const real *cs, const real *sn, int B, int H, int T, int D, int inv); \
    double tsc_crossent_fwd##S(const real *logits, const int32_t *targets, int N, int V, int *n_valid); \
    void tsc_crossent_bwd##S(real *dlogits, const real *logits, const int32_t *targets, int N, int V,  \
                             int n_valid);
TSC_OPS_DECL(float, _f)
TSC_OPS_DECL(double, _d)
#undef TSC_OPS_DECL

#endif
