/* matmul.c: the matrix products of train/'s models, C[i, j] (+)= Σ_k A(i, k) · B(j, k).
 *
 * FP64: OpenBLAS dgemm (the build links it); it splits a product among its threads by blocks of
 * C, never along k. FP32: our own kernel, one FMA chain per element in increasing k (AVX-512 with
 * a scalar twin of the same bits; BLAS sgemm on a build for a CPU family without AVX-512 code,
 * since OpenBLAS sgemm gave different bits for 1 and 2 threads). tests/train/test_model.c checks
 * 1 vs 2 threads.
 *
 * BF16 autocast. A and B are rounded to BF16 (nearest-even, tsc_bf16_from_f32) and packed as
 * pairs (k = 2p, 2p+1) in one 32-bit word, element 2p in the low half. Each C[i, j] is one FP32
 * accumulator, starting at +0, updated pair by pair in increasing p, and within a pair the odd
 * element FIRST:
 *     acc = step(acc, A(i,2p+1), B(j,2p+1));  acc = step(acc, A(i,2p), B(j,2p))
 * where step(acc, a, b) is what one lane of VDPBF16PS does (Intel SDM, "VDPBF16PS": "srcdest.fp32[j]
 * += make_fp32(src1.bf16[2j+1]) * make_fp32(src2.bf16[1]); then the same with bf16[2j+0]", FP32 FMA
 * semantics with DAZ on inputs, FTZ on outputs, round to nearest-even, MXCSR neither read nor
 * written): a and b denormal -> ±0, the product a·b exact (two 8-bit significands), acc + a·b
 * rounded once, a denormal sum flushed to a zero of its sign. An odd K is padded with a zero
 * pair half (adds +0·+0: no change). The result then gets + R_bf16(bias[j]) (an FP32 add, no FTZ)
 * and is rounded to BF16; a NaN becomes the canonical quiet NaN 0x7fc0 (so the bits do not depend
 * on which NaN operand a path propagated). C then receives it (or adds it, in FP32).
 * The AVX-512 kernel broadcasts A's pair word for a row against 16 columns' pair words of B, so
 * this sequential-in-k order is exactly what the instruction computes; the portable kernel is the
 * same loop in scalar C (tsc_bf16_dot_step) and gives the same bits. Every C element is computed
 * by one thread from start to end, so thread count cannot change a bit.
 * A GPU's tensor cores differ: an MMA instruction multiplies a k-slice (16 or more products) and
 * adds the products' sum to the FP32 accumulator with its own internal alignment and truncation
 * (not one IEEE rounding per product), cuBLAS may split k across thread blocks (split-k) and
 * add the partial sums in a tree, and denormals are kept. So a BF16 run here matches a GPU's
 * bits only by accident; it matches the semantics (BF16 operands, FP32 accumulate, BF16 out).
 */
#include "cpu_internal.h"
#include "model_internal.h"

#include <cblas.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "tsc_formats.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define TSC_MM_X86 1
#include <immintrin.h>
#endif

/* ------------------------------------------------------------------ counters */

static double stat_sec, stat_flops;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

void tsc_gemm_stats(double *seconds, double *flops, int reset) {
    if (seconds) *seconds = stat_sec;
    if (flops) *flops = stat_flops;
    if (reset) stat_sec = stat_flops = 0;
}

/* ------------------------------------------------------------------ FP32 / FP64 (BLAS) */

/* C = op(A) · op(B) with op(B) the [K, N] matrix B(j, k): one of A, B is contiguous along k or
 * along its rows; the BLAS call is picked from the strides. */
#define GEMM_BLAS(NAME, real, blas)                                                                      \
    void NAME(int M, int N, int K, tsc_mref_t A, tsc_mref_t B, real *C, size_t ldc, int accumulate) {   \
        if (M <= 0 || N <= 0) return;                                                                   \
        if (K <= 0) {                                                                                   \
            if (!accumulate)                                                                            \
                for (int i = 0; i < M; i++) memset(C + (size_t)i * ldc, 0, (size_t)N * sizeof(real));  \
            return;                                                                                     \
        }                                                                                               \
        int ta = A.cs == 1 ? 0 : 1, tb = B.cs == 1 ? 1 : 0;                                             \
        int lda = (int)(ta ? A.cs : A.rs), ldb = (int)(tb ? B.rs : B.cs);                               \
        blas(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K,   \
             1, (const real *)A.p, lda, (const real *)B.p, ldb, accumulate ? 1 : 0, C, (int)ldc);      \
    }
GEMM_BLAS(tsc_gemm_f64, double, cblas_dgemm)
#ifndef TSC_MM_X86
GEMM_BLAS(gemm_f32_blas, float, cblas_sgemm)
#endif

/* ------------------------------------------------------------------ BF16 */

/* rows per block, columns per panel, columns per block (two panels; the FP32 chains' AVX-512 kernel
 * takes three, NR3 columns: 24 accumulators keep its two FMA ports busy where 16 measured 60-85%) */
enum { MR = 8, NP = 16, NR = 32, NR3 = 48 };

static inline float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float tsc_bf16_dot_step(float acc, float a, float b) {
    if (fpclassify(a) == FP_SUBNORMAL) a = copysignf(0.0f, a);
    if (fpclassify(b) == FP_SUBNORMAL) b = copysignf(0.0f, b);
    float r = fmaf(a, b, acc);
    if (fpclassify(r) == FP_SUBNORMAL) r = copysignf(0.0f, r);
    return r;
}

/* Packing. Every operand element is rounded to BF16 here (nearest-even, tsc_bf16_rne_bits), once
 * per product, and paired: pair p of a row holds k = 2p in its low half and 2p + 1 in its high half
 * (0 past K). Layouts:
 *   A: row-major pair words, pa[r · K2 + p], M padded to a multiple of MR with zero rows;
 *   B: panels of NP columns, pb[(jp · K2 + p) · NP + l] = column 16 jp + l's pair p, the panel
 *      count padded to even.
 * A row-major A (cs = 1: the forward's activations, the backward's dY) is then its BF16 copy,
 * converted row by row by tsc_convert_from_f32 (the AVX-512 conversion where the CPU has it). A
 * k-major view (rs = 1: the backward's transposed operands) holds a panel's 16 values of one k side
 * by side, so B's panel of pair p is 16 loads of k = 2p and 16 of 2p + 1 (16 lanes at a time where
 * the CPU has AVX-512); A's k-major rows are gathered with the same words. */

/* Pair words of rows [r0, r0 + n) ∩ [0, rows) of X, row r0 + i's pair p at dst[i·si + p·sp];
 * rows past `rows` zero. The scalar reference of every path below. */
static void pack_scalar(tsc_mref_t X, int rows, int K, int K2, int r0, int n, uint32_t *dst, size_t si,
                        size_t sp) {
    const float *x = X.p;
    for (int i = 0; i < n; i++)
        for (int p = 0; p < K2; p++) {
            uint32_t w = 0;
            if (r0 + i < rows) {
                const float *e = x + (size_t)(r0 + i) * X.rs + (size_t)(2 * p) * X.cs;
                uint32_t a, b = 0;
                memcpy(&a, e, 4);
                if (2 * p + 1 < K) memcpy(&b, e + X.cs, 4);
                w = (uint32_t)tsc_bf16_rne_bits(a) | (2 * p + 1 < K ? (uint32_t)tsc_bf16_rne_bits(b) << 16 : 0u);
            }
            dst[(size_t)i * si + (size_t)p * sp] = w;
        }
}

#ifdef TSC_MM_X86
/* tsc_bf16_rne_bits on 16 lanes (the result in each lane's low half). */
__attribute__((target("avx512f")))
static inline __m512i rne16(__m512i u) {
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
    __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    __mmask16 nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7f800000));
    return _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
}

/* A full k-major panel (16 columns, all < N): pair p from 16 values at k = 2p and 16 at 2p + 1. */
__attribute__((target("avx512f")))
static void pack_panel_kmajor_avx512(const float *x, size_t cs, int K, int K2, uint32_t *dst) {
    int full = K / 2;
    for (int p = 0; p < full; p++) {
        const float *lo = x + (size_t)(2 * p) * cs;
        __m512i a = rne16(_mm512_loadu_si512(lo)), b = rne16(_mm512_loadu_si512(lo + cs));
        _mm512_storeu_si512(dst + (size_t)p * NP, _mm512_or_si512(a, _mm512_slli_epi32(b, 16)));
    }
    if (full < K2) _mm512_storeu_si512(dst + (size_t)full * NP, rne16(_mm512_loadu_si512(x + (size_t)(2 * full) * cs)));
}
#endif

static void pack_a(int M, int K, int K2, tsc_mref_t A, uint32_t *pa) {
    int Mp = (M + MR - 1) / MR * MR;
    if (A.cs == 1) {
#pragma omp parallel for schedule(static)
        for (int r = 0; r < Mp; r++) {
            uint16_t *h = (uint16_t *)(pa + (size_t)r * K2);
            if (r >= M) {
                memset(h, 0, (size_t)K2 * 4);
                continue;
            }
            tsc_convert_from_f32(TSC_FMT_BF16, (const float *)A.p + (size_t)r * A.rs, h, (size_t)K,
                                 TSC_ROUND_NEAREST_EVEN, NULL);
            if (K % 2) h[K] = 0;
        }
        return;
    }
    /* k-major: blocks of MR rows; each row's words in order, read from 2·K2 rows of the source */
#pragma omp parallel for schedule(static)
    for (int ib = 0; ib < Mp / MR; ib++) pack_scalar(A, M, K, K2, ib * MR, MR, pa + (size_t)ib * MR * K2, (size_t)K2, 1);
}

static void pack_b(int N, int K, int K2, tsc_mref_t B, uint32_t *pb) {
    int npan = (N + NR - 1) / NR * 2;
#ifdef TSC_MM_X86
    int simd = B.rs == 1 && tsc_train_have_avx512();
#endif
#pragma omp parallel for schedule(static)
    for (int jp = 0; jp < npan; jp++) {
        uint32_t *dst = pb + (size_t)jp * K2 * NP;
#ifdef TSC_MM_X86
        if (simd && (jp + 1) * NP <= N) {
            pack_panel_kmajor_avx512((const float *)B.p + (size_t)jp * NP, B.cs, K, K2, dst);
            continue;
        }
#endif
        pack_scalar(B, N, K, K2, jp * NP, NP, dst, 1, NP);
    }
}

/* ---- FP32: blocks of MR rows and npb panels (the kernel's: 3 for AVX-512, 2 otherwise), one fused
 * multiply-add per k in increasing k from +0. A is read in place (row r's element k at
 * row[r][k * cs]); B is packed: pb[(jp * K + k) * NP + l] = B(16 jp + l, k), zero padded to a whole
 * number of blocks. The kernel writes a full block straight into C (ldo = ldc, acc as asked) and an
 * edge block into a tile (ldo = the block's width, acc 0). */

static void pack_b_f32(int N, int K, int npb, tsc_mref_t B, float *pb) {
    int npan = (N + npb * NP - 1) / (npb * NP) * npb;
    const float *b = B.p;
#pragma omp parallel for schedule(static)
    for (int jp = 0; jp < npan; jp++)
        for (int k = 0; k < K; k++) {
            if (B.rs == 1 && (jp + 1) * NP <= N) { /* k-major: the panel's 16 values side by side */
                memcpy(pb + ((size_t)jp * K + k) * NP, b + (size_t)jp * NP + (size_t)k * B.cs, NP * sizeof(float));
                continue;
            }
            for (int l = 0; l < NP; l++) {
                int j = jp * NP + l;
                pb[((size_t)jp * K + k) * NP + l] = j < N ? b[(size_t)j * B.rs + (size_t)k * B.cs] : 0.0f;
            }
        }
}

typedef void (*kern_f32_fn)(const float *const *row, size_t cs, const float *pb, int K, float *out, size_t ldo,
                            int acc);

static void kern_f32_portable(const float *const *row, size_t cs, const float *pb, int K, float *out, size_t ldo,
                              int acc) {
    for (int r = 0; r < MR; r++)
        for (int c = 0; c < NR; c++) {
            const float *b = pb + (size_t)(c / NP) * K * NP + c % NP;
            float s = 0.0f;
            for (int k = 0; k < K; k++) s = fmaf(row[r][(size_t)k * cs], b[(size_t)k * NP], s);
            out[r * ldo + c] = acc ? out[r * ldo + c] + s : s;
        }
}

#ifdef TSC_MM_X86
/* 8 rows x 3 panels (NR3 columns) */
__attribute__((target("avx512f,fma")))
static void kern_f32_avx512(const float *const *row, size_t cs, const float *pb, int K, float *out, size_t ldo,
                            int acc) {
    __m512 c0[MR], c1[MR], c2[MR];
    const float *a[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) c0[r] = c1[r] = c2[r] = _mm512_setzero_ps(), a[r] = row[r];
    const float *pb1 = pb + (size_t)K * NP, *pb2 = pb1 + (size_t)K * NP;
    for (int k = 0; k < K; k++) {
        __m512 b0 = _mm512_loadu_ps(pb + (size_t)k * NP), b1 = _mm512_loadu_ps(pb1 + (size_t)k * NP);
        __m512 b2 = _mm512_loadu_ps(pb2 + (size_t)k * NP);
        size_t ka = (size_t)k * cs;
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            __m512 av = _mm512_set1_ps(a[r][ka]);
            c0[r] = _mm512_fmadd_ps(av, b0, c0[r]);
            c1[r] = _mm512_fmadd_ps(av, b1, c1[r]);
            c2[r] = _mm512_fmadd_ps(av, b2, c2[r]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
        float *o = out + r * ldo;
        if (acc) {
            c0[r] = _mm512_add_ps(_mm512_loadu_ps(o), c0[r]);
            c1[r] = _mm512_add_ps(_mm512_loadu_ps(o + NP), c1[r]);
            c2[r] = _mm512_add_ps(_mm512_loadu_ps(o + 2 * NP), c2[r]);
        }
        _mm512_storeu_ps(o, c0[r]);
        _mm512_storeu_ps(o + NP, c1[r]);
        _mm512_storeu_ps(o + 2 * NP, c2[r]);
    }
}

/* The AVX2 twin: the 8 x 32 block as four 4 x 16 sub-blocks (8 accumulators of 8 lanes: enough
 * independent chains for two FMA units of latency 4), each element the same chain in increasing k. */
__attribute__((target("avx2,fma")))
static void kern_f32_avx2(const float *const *row, size_t cs, const float *pb, int K, float *out, size_t ldo,
                          int acc) {
    for (int h = 0; h < 2; h++) /* the block's two panels of 16 columns */
        for (int q = 0; q < MR; q += 4) {
            __m256 c[4][2];
            const float *a[4];
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) c[r][0] = c[r][1] = _mm256_setzero_ps(), a[r] = row[q + r];
            const float *b = pb + (size_t)h * K * NP;
            for (int k = 0; k < K; k++, b += NP) {
                __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
                size_t ka = (size_t)k * cs;
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++) {
                    __m256 av = _mm256_broadcast_ss(a[r] + ka);
                    c[r][0] = _mm256_fmadd_ps(av, b0, c[r][0]);
                    c[r][1] = _mm256_fmadd_ps(av, b1, c[r][1]);
                }
            }
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                float *o = out + (size_t)(q + r) * ldo + h * NP;
                if (acc) {
                    c[r][0] = _mm256_add_ps(_mm256_loadu_ps(o), c[r][0]);
                    c[r][1] = _mm256_add_ps(_mm256_loadu_ps(o + 8), c[r][1]);
                }
                _mm256_storeu_ps(o, c[r][0]);
                _mm256_storeu_ps(o + 8, c[r][1]);
            }
        }
}

static int f32_simd_off;

int tsc_train_have_avx512(void) {
    return tsc_cpu_has(TSC_CPU_AVX512_FMA) && !f32_simd_off;
}

int tsc_train_have_avx2(void) {
    return tsc_cpu_has(TSC_CPU_AVX2_FMA) && !f32_simd_off;
}

int tsc_train_f32_simd_set(int enable) {
    f32_simd_off = !enable;
    return tsc_train_have_avx512() || tsc_train_have_avx2();
}

/* The FP32 chains' kernel for this CPU and its panels per block. */
static int f32_kernel(kern_f32_fn *kern) {
    if (tsc_train_have_avx512()) return *kern = kern_f32_avx512, NR3 / NP;
    *kern = tsc_train_have_avx2() ? kern_f32_avx2 : kern_f32_portable;
    return NR / NP;
}
#else
int tsc_train_have_avx512(void) { return 0; }
int tsc_train_have_avx2(void) { return 0; }
int tsc_train_f32_simd_set(int enable) {
    (void)enable;
    return 0;
}
#endif

void tsc_gemm_f32(int M, int N, int K, tsc_mref_t A, tsc_mref_t B, float *C, size_t ldc, int accumulate,
                  float *work) {
    if (M <= 0 || N <= 0) return;
    double t0 = now();
#ifndef TSC_MM_X86
    gemm_f32_blas(M, N, K, A, B, C, ldc, accumulate); /* no AVX-512 build: BLAS (docs/TRAINING.md) */
    (void)work;
#else
    kern_f32_fn kern;
    int npb = f32_kernel(&kern), nr = npb * NP, Mb = (M + MR - 1) / MR, Nb = (N + nr - 1) / nr;
    pack_b_f32(N, K, npb, B, work);
    /* a k-major A (rs = 1: the backward's dY^T) is copied into blocks of MR rows, pa[(ib K + k) MR + r],
     * 8 blocks per pass over k: read in place, each block would take half a cache line per k and, A
     * being larger than the cache, read every line twice (the weight gradients ran at half the speed
     * of the other products) */
    float *pa = A.rs == 1 && M > 1 ? work + (size_t)Nb * nr * K : NULL;
    if (pa) {
#pragma omp parallel for schedule(static)
        for (int g = 0; g < (Mb + 7) / 8; g++)
            for (int k = 0; k < K; k++) {
                const float *src = (const float *)A.p + (size_t)k * A.cs;
                for (int ib = 8 * g; ib < Mb && ib < 8 * g + 8; ib++) {
                    float *d = pa + ((size_t)ib * K + k) * MR;
                    if ((ib + 1) * MR <= M) memcpy(d, src + ib * MR, MR * sizeof(float));
                    else
                        for (int r = 0; r < MR; r++) /* rows past M repeat row M − 1 (dropped) */
                            d[r] = src[ib * MR + r < M ? ib * MR + r : M - 1];
                }
            }
    }
#pragma omp parallel for collapse(2) schedule(static)
    for (int jb = 0; jb < Nb; jb++)
        for (int ib = 0; ib < Mb; ib++) {
            const float *row[MR];
            for (int r = 0; r < MR; r++) /* rows past M repeat row M − 1; their results are dropped */
                row[r] = pa ? pa + (size_t)ib * K * MR + r
                            : (const float *)A.p + (size_t)(ib * MR + r < M ? ib * MR + r : M - 1) * A.rs;
            size_t cs = pa ? MR : A.cs;
            const float *pb = work + (size_t)jb * nr * K;
            float *dst = C + (size_t)ib * MR * ldc + (size_t)jb * nr;
            if ((ib + 1) * MR <= M && (jb + 1) * nr <= N) {
                kern(row, cs, pb, K, dst, ldc, accumulate);
                continue;
            }
            float tile[MR * NR3];
            kern(row, cs, pb, K, tile, (size_t)nr, 0);
            for (int r = 0; r < MR && ib * MR + r < M; r++)
                for (int c = 0; c < nr && jb * nr + c < N; c++)
                    dst[r * ldc + c] = accumulate ? dst[r * ldc + c] + tile[r * nr + c] : tile[r * nr + c];
        }
#endif
    stat_sec += now() - t0;
    stat_flops += 2.0 * M * N * K;
}

/* ---- BF16 */

/* The result of one element: + bias (already BF16-rounded; NULL: none), rounded to BF16, NaN
 * canonical, stored or added. The AVX-512 kernel's epilogue is this, 16 lanes at a time. */
static inline void epilogue(float acc, const float *bias16, int j, float *c, int accumulate) {
    if (bias16) acc += bias16[j];
    uint32_t h = isnan(acc) ? 0x7fc0u : tsc_bf16_from_f32(acc);
    float v = bits_f(h << 16);
    *c = accumulate ? *c + v : v;
}

/* The FP32 chains of rows pa + r·K2 (r < MR) against the two panels at pb. raw: into out[r·NR + c]
 * as they are (an edge block, finished by the caller); else through the epilogue into out[r·ldo + c]
 * (bias16 from the block's first column). */
static void kern_portable(const uint32_t *pa, const uint32_t *pb, int K2, float *out, size_t ldo, int acc,
                          const float *bias16, int raw) {
    for (int r = 0; r < MR; r++)
        for (int c = 0; c < NR; c++) {
            const uint32_t *a = pa + (size_t)r * K2, *b = pb + (size_t)(c / NP) * K2 * NP + c % NP;
            float s = 0.0f;
            for (int p = 0; p < K2; p++) {
                uint32_t x = a[p], y = b[(size_t)p * NP];
                s = tsc_bf16_dot_step(s, bits_f(x & 0xffff0000u), bits_f(y & 0xffff0000u));
                s = tsc_bf16_dot_step(s, bits_f(x << 16), bits_f(y << 16));
            }
            if (raw) out[r * NR + c] = s;
            else epilogue(s, bias16, c, out + r * ldo + c, acc);
        }
}

#ifdef TSC_MM_X86
/* epilogue() on 16 lanes: integer nearest-even to BF16 (as tsc_bf16_from_f32 for every non-NaN). */
__attribute__((target("avx512f")))
static inline __m512 epilogue16(__m512 v, const float *bias16, const float *o, int acc) {
    if (bias16) v = _mm512_add_ps(v, _mm512_loadu_ps(bias16));
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);
    r = _mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u));
    r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7fc00000));
    __m512 h = _mm512_castsi512_ps(r);
    return acc ? _mm512_add_ps(_mm512_loadu_ps(o), h) : h;
}

__attribute__((target("avx512bf16,avx512f,avx512vl,avx512bw")))
static void kern_avx512(const uint32_t *pa, const uint32_t *pb, int K2, float *out, size_t ldo, int acc,
                        const float *bias16, int raw) {
    __m512 c0[MR], c1[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) c0[r] = c1[r] = _mm512_setzero_ps();
    const uint32_t *pb1 = pb + (size_t)K2 * NP;
    for (int p = 0; p < K2; p++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(pb + (size_t)p * NP);
        __m512bh b1 = (__m512bh)_mm512_loadu_si512(pb1 + (size_t)p * NP);
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            __m512bh a = (__m512bh)_mm512_set1_epi32((int)pa[(size_t)r * K2 + p]);
            c0[r] = _mm512_dpbf16_ps(c0[r], a, b0);
            c1[r] = _mm512_dpbf16_ps(c1[r], a, b1);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
        float *o = out + (raw ? (size_t)r * NR : r * ldo);
        if (!raw) {
            c0[r] = epilogue16(c0[r], bias16, o, acc);
            c1[r] = epilogue16(c1[r], bias16 ? bias16 + NP : NULL, o + NP, acc);
        }
        _mm512_storeu_ps(o, c0[r]);
        _mm512_storeu_ps(o + NP, c1[r]);
    }
}

static int have_bf16(void) { return tsc_cpu_has(TSC_CPU_AVX512_BF16); }
#endif

#ifdef TSC_MM_X86
/* ---- BF16 on AVX2 + FMA (no VDPBF16PS). The pair sequence above is an FP32 FMA chain over k in the
 * order 1, 0, 3, 2, ... on BF16 operands, so the operands are packed as floats in that order (A:
 * k-major blocks of MR rows, paf[(ib·Kp + k')·MR + r]; B: panels as the FP32 path, pbf[(jp·Kp + k')·NP
 * + l]; element k' holds k = k' xor 1, Kp = 2·K2, zero past K), each rounded to BF16 and a BF16
 * denormal flushed to a zero of its sign (the instruction's DAZ) at packing, and the FP32 kernel
 * runs the chains. It has no FTZ. It needs none where no chain can meet a denormal: if every product
 * a·b is a multiple of 2^-126, every exact sum is one too, and a multiple of 2^-126 below 2^-103
 * in magnitude is exactly representable (so never rounded off that grid) while above it the grid
 * of FP32 is coarser than 2^-126: every accumulator is then 0 or at least 2^-126 in magnitude, and
 * the chain is the instruction's bit for bit. A BF16 value with biased exponent E has its last
 * significand bit at 2^(E-134), so the products of a block are multiples of 2^-126 when
 * minE(A rows) + minE(B columns) >= 142 over its nonzero operands. A block that misses it (operands
 * below about 2^-56 with others as small) runs the exact scalar step (tsc_bf16_dot_step) on the
 * same packed operands instead. */

/* Nearest-even to BF16 on the bits of 8 floats, the result in each lane's high half (NaN lanes are
 * left to the caller). */
__attribute__((target("avx2,fma")))
static inline __m256i rne8_hi(__m256i u) {
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
    return _mm256_and_si256(r, _mm256_set1_epi32((int)0xffff0000u));
}

/* BF16 rounding and DAZ of 8 floats, as floats (the BF16 bits in the high half); *mine gets the
 * smallest biased exponent of the nonzero results (255 when all are zero). */
__attribute__((target("avx2,fma")))
static inline __m256 bf16_daz8(__m256 v, __m256i *mine) {
    __m256i u = _mm256_castps_si256(v);
    __m256i r = rne8_hi(u);
    __m256i a = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    __m256i nan = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000)); /* a < 2^31: signed compare */
    __m256i q = _mm256_and_si256(_mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), _mm256_set1_epi32((int)0xffff0000u));
    r = _mm256_blendv_epi8(r, q, nan);
    __m256i e = _mm256_and_si256(_mm256_srli_epi32(r, 23), _mm256_set1_epi32(0xff));
    __m256i den = _mm256_cmpeq_epi32(e, _mm256_setzero_si256());
    r = _mm256_blendv_epi8(r, _mm256_and_si256(r, _mm256_set1_epi32((int)0x80000000u)), den);
    /* zeros (now every E = 0) do not count toward the minimum */
    *mine = _mm256_min_epu32(*mine, _mm256_or_si256(e, _mm256_and_si256(den, _mm256_set1_epi32(255))));
    return _mm256_castsi256_ps(r);
}

/* The scalar twin of bf16_daz8 (the edges of the packing). */
static inline float bf16_daz1(float x, int *mine) {
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t h = (uint32_t)tsc_bf16_rne_bits(u) << 16;
    if (((h >> 23) & 0xff) == 0) h &= 0x80000000u;
    else if ((int)((h >> 23) & 0xff) < *mine) *mine = (int)((h >> 23) & 0xff);
    return bits_f(h);
}

__attribute__((target("avx2,fma")))
static inline int min8(__m256i v) {
    uint32_t t[8];
    _mm256_storeu_si256((__m256i *)t, v);
    uint32_t m = t[0];
    for (int i = 1; i < 8; i++) m = t[i] < m ? t[i] : m;
    return (int)m;
}

/* 8 x 8 transpose of rows r[0..8) (each 8 floats). */
__attribute__((target("avx2,fma")))
static inline void transpose8(__m256 *r) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* Packs 8 rows [r0, r0 + 8) of X (element (r, k) at r·rs + k·cs) over k < Kp into dst[k'·ld + i]
 * (k' the stored position, k = k' xor 1; ld 8 for A's blocks, NP for half a panel of B); rows past
 * `rows` and k past K are zero. Returns the smallest biased exponent of the nonzero values. */
__attribute__((target("avx2,fma")))
static int pack8_avx2(tsc_mref_t X, int rows, int K, int Kp, int r0, float *dst, size_t ld) {
    const float *x = X.p;
    __m256i mv = _mm256_set1_epi32(255);
    int mine = 255, full = r0 + 8 <= rows;
    if (full && X.rs == 1) { /* k-major: 8 rows side by side */
        for (int k = 0; k < K; k++)
            _mm256_storeu_ps(dst + (size_t)(k ^ 1) * ld, bf16_daz8(_mm256_loadu_ps(x + (size_t)k * X.cs + r0), &mv));
        for (int k = K; k < Kp; k++) _mm256_storeu_ps(dst + (size_t)(k ^ 1) * ld, _mm256_setzero_ps());
        return min8(mv);
    }
    int k = 0;
    if (full && X.cs == 1) /* row-major: 8 x 8 blocks transposed */
        for (; k + 8 <= K; k += 8) {
            __m256 v[8];
            for (int i = 0; i < 8; i++) v[i] = bf16_daz8(_mm256_loadu_ps(x + (size_t)(r0 + i) * X.rs + k), &mv);
            transpose8(v);
            for (int j = 0; j < 8; j++) _mm256_storeu_ps(dst + (size_t)((k + j) ^ 1) * ld, v[j]);
        }
    for (; k < Kp; k++)
        for (int i = 0; i < 8; i++)
            dst[(size_t)(k ^ 1) * ld + i] =
                r0 + i < rows && k < K ? bf16_daz1(x[(size_t)(r0 + i) * X.rs + (size_t)k * X.cs], &mine) : 0.0f;
    int m = min8(mv);
    return m < mine ? m : mine;
}

/* pack8_avx2 on n <= 8 consecutive groups of 8 rows from r0, group b into dst[b], its smallest
 * exponent into mine[b]. A k-major X (rs = 1; the backward's transposed operands) is read a k row of
 * 8n values at a time: whole cache lines, where one group alone reads half a line per k and, on a
 * source larger than the cache, reads each line again for the next group (that made packing a
 * quarter of a BF16 product's time). */
__attribute__((target("avx2,fma")))
static void pack8n_avx2(tsc_mref_t X, int rows, int K, int Kp, int r0, int n, float *const *dst, size_t ld,
                        int *mine) {
    if (X.rs != 1 || r0 + 8 * n > rows) {
        for (int b = 0; b < n; b++) mine[b] = pack8_avx2(X, rows, K, Kp, r0 + 8 * b, dst[b], ld);
        return;
    }
    __m256i mv[8];
    for (int b = 0; b < n; b++) mv[b] = _mm256_set1_epi32(255);
    for (int k = 0; k < K; k++) {
        const float *src = (const float *)X.p + (size_t)k * X.cs + r0;
        for (int b = 0; b < n; b++)
            _mm256_storeu_ps(dst[b] + (size_t)(k ^ 1) * ld, bf16_daz8(_mm256_loadu_ps(src + 8 * b), &mv[b]));
    }
    for (int b = 0; b < n; b++) {
        for (int k = K; k < Kp; k++) _mm256_storeu_ps(dst[b] + (size_t)(k ^ 1) * ld, _mm256_setzero_ps());
        mine[b] = min8(mv[b]);
    }
}

/* The exact fallback of a block whose operands are too small for the fast chains (see above). */
static void kern_bf16_exact(const float *pa, const float *pb, int Kp, int nr, float *out) {
    for (int r = 0; r < MR; r++)
        for (int c = 0; c < nr; c++) {
            const float *b = pb + (size_t)(c / NP) * Kp * NP + c % NP;
            float s = 0.0f;
            for (int k = 0; k < Kp; k++) s = tsc_bf16_dot_step(s, pa[(size_t)k * MR + r], b[(size_t)k * NP]);
            out[r * nr + c] = s;
        }
}

/* epilogue() on 8 lanes. */
__attribute__((target("avx2,fma")))
static inline void epilogue8(const float *t, const float *bias16, float *o, int acc) {
    __m256 v = _mm256_loadu_ps(t);
    if (bias16) v = _mm256_add_ps(v, _mm256_loadu_ps(bias16));
    __m256i r = rne8_hi(_mm256_castps_si256(v));
    __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    __m256 h = _mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)), nan);
    _mm256_storeu_ps(o, acc ? _mm256_add_ps(_mm256_loadu_ps(o), h) : h);
}

static void gemm_bf16_avx2(int M, int N, int K, tsc_mref_t A, tsc_mref_t B, const float *bias, float *C, size_t ldc,
                           int accumulate, uint32_t *work) {
    kern_f32_fn kern; /* the FP32 chains, 16 lanes where the CPU has AVX-512 */
    int npb = f32_kernel(&kern), nr = npb * NP;
    int Kp = (K + 1) / 2 * 2, Mb = (M + MR - 1) / MR, Nb = (N + nr - 1) / nr;
    float *paf = (float *)work, *pbf = paf + (size_t)Mb * MR * Kp, *bias16 = pbf + (size_t)Nb * nr * Kp;
    int *emin = (int *)(bias16 + N); /* Mb block minima of A, then npb Nb panel minima of B */
    if (bias)
        for (int j = 0; j < N; j++) bias16[j] = tsc_bf16_to_f32(tsc_bf16_from_f32(bias[j]));
    /* A in groups of 8 blocks; B in groups of 8 half panels: a panel of 16 columns is two packs of 8
     * "rows" of B, side by side in its NP-wide k rows */
#pragma omp parallel for schedule(static)
    for (int g = 0; g < (Mb + 7) / 8; g++) {
        int n = Mb - 8 * g < 8 ? Mb - 8 * g : 8;
        float *d[8];
        for (int b = 0; b < n; b++) d[b] = paf + (size_t)(8 * g + b) * MR * Kp;
        pack8n_avx2(A, M, K, Kp, 8 * g * MR, n, d, MR, emin + 8 * g);
    }
    int nh = 2 * npb * Nb;
#pragma omp parallel for schedule(static)
    for (int g = 0; g < (nh + 7) / 8; g++) {
        int n = nh - 8 * g < 8 ? nh - 8 * g : 8, eh[8];
        float *d[8];
        for (int b = 0; b < n; b++) d[b] = pbf + (size_t)((8 * g + b) / 2) * Kp * NP + (size_t)(b % 2) * 8;
        pack8n_avx2(B, N, K, Kp, 8 * g * 8, n, d, NP, eh);
        for (int b = 0; b < n; b += 2) emin[Mb + (8 * g + b) / 2] = eh[b] < eh[b + 1] ? eh[b] : eh[b + 1];
    }
#pragma omp parallel for collapse(2) schedule(static)
    for (int jb = 0; jb < Nb; jb++)
        for (int ib = 0; ib < Mb; ib++) {
            const float *a = paf + (size_t)ib * MR * Kp, *b = pbf + (size_t)jb * nr * Kp;
            int eb = 255;
            for (int q = 0; q < npb; q++) eb = emin[Mb + npb * jb + q] < eb ? emin[Mb + npb * jb + q] : eb;
            float tile[MR * NR3];
            if (emin[ib] + eb >= 142) {
                const float *row[MR];
                for (int r = 0; r < MR; r++) row[r] = a + r;
                kern(row, MR, b, Kp, tile, (size_t)nr, 0);
            } else {
                kern_bf16_exact(a, b, Kp, nr, tile);
            }
            float *dst = C + (size_t)ib * MR * ldc + (size_t)jb * nr;
            if ((ib + 1) * MR <= M && (jb + 1) * nr <= N) {
                for (int r = 0; r < MR; r++)
                    for (int c = 0; c < nr; c += 8)
                        epilogue8(tile + r * nr + c, bias ? bias16 + jb * nr + c : NULL,
                                  dst + (size_t)r * ldc + c, accumulate);
                continue;
            }
            for (int r = 0; r < MR && ib * MR + r < M; r++)
                for (int c = 0; c < nr && jb * nr + c < N; c++)
                    epilogue(tile[r * nr + c], bias ? bias16 : NULL, jb * nr + c, dst + (size_t)r * ldc + c, accumulate);
        }
}
#endif

static int simd_off;

int tsc_gemm_bf16_simd_set(int enable) {
    simd_off = !enable;
#ifdef TSC_MM_X86
    return enable && (have_bf16() || tsc_cpu_has(TSC_CPU_AVX2_FMA));
#else
    return 0;
#endif
}

typedef void (*kern_fn)(const uint32_t *, const uint32_t *, int, float *, size_t, int, const float *, int);

static kern_fn pick_kernel(void) {
#ifdef TSC_MM_X86
    if (!simd_off && have_bf16()) return kern_avx512;
#endif
    return kern_portable;
}

size_t tsc_gemm_work(int M, int N, int K) {
    size_t Mb = (size_t)(M + MR - 1) / MR, n2 = (size_t)(N + NR - 1) / NR * NR, n3 = (size_t)(N + NR3 - 1) / NR3 * NR3;
    size_t cols = n2 > n3 ? n2 : n3;                     /* B padded to blocks of two panels or of three */
    size_t packed = (Mb * MR + cols) * (size_t)(K + 1); /* FP32 panels, or BF16 pairs (as floats: FP32 chains) */
    return packed + (size_t)N + Mb + cols / NP;          /* + the rounded bias, + the chains' exponent minima */
}

void tsc_gemm_bf16(int M, int N, int K, tsc_mref_t A, tsc_mref_t B, const float *bias, float *C, size_t ldc,
                   int accumulate, uint32_t *work) {
    if (M <= 0 || N <= 0) return;
    double t0 = now();
#ifdef TSC_MM_X86
    if (!simd_off && !have_bf16() && tsc_cpu_has(TSC_CPU_AVX2_FMA)) {
        gemm_bf16_avx2(M, N, K, A, B, bias, C, ldc, accumulate, work);
        stat_sec += now() - t0;
        stat_flops += 2.0 * M * N * K;
        return;
    }
#endif
    int K2 = (K + 1) / 2, Mb = (M + MR - 1) / MR, Nb = (N + NR - 1) / NR;
    uint32_t *pa = work, *pb = pa + (size_t)Mb * MR * K2;
    float *bias16 = (float *)(pb + (size_t)Nb * NR * K2);
    if (bias)
        for (int j = 0; j < N; j++) bias16[j] = tsc_bf16_to_f32(tsc_bf16_from_f32(bias[j]));
    pack_a(M, K, K2, A, pa);
    pack_b(N, K, K2, B, pb);
    kern_fn kern = pick_kernel();
#pragma omp parallel for collapse(2) schedule(static)
    for (int jb = 0; jb < Nb; jb++)
        for (int ib = 0; ib < Mb; ib++) {
            const uint32_t *a = pa + (size_t)ib * MR * K2, *b = pb + (size_t)jb * NR * K2;
            float *dst = C + (size_t)ib * MR * ldc + (size_t)jb * NR;
            if ((ib + 1) * MR <= M && (jb + 1) * NR <= N) {
                kern(a, b, K2, dst, ldc, accumulate, bias ? bias16 + jb * NR : NULL, 0);
                continue;
            }
            float tile[MR * NR];
            kern(a, b, K2, tile, NR, 0, NULL, 1);
            for (int r = 0; r < MR && ib * MR + r < M; r++)
                for (int c = 0; c < NR && jb * NR + c < N; c++)
                    epilogue(tile[r * NR + c], bias ? bias16 : NULL, jb * NR + c, dst + (size_t)r * ldc + c, accumulate);
        }
    stat_sec += now() - t0;
    stat_flops += 2.0 * M * N * K;
}
