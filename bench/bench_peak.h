/* bench_peak.h: what this machine can do, measured in the same run as the benchmark that is compared
 * with it, so a figure says where it sits between the machine's limits (a roofline position) rather
 * than only how it compares with a baseline measured elsewhere:
 *   fma_peak    FP32 FMA GFLOP/s, every thread running 12 independent chains of the widest FMA the
 *               CPU has (16 lanes with AVX-512, 8 with AVX2 + FMA), best burst of 9;
 *   triad_gbs   memory GB/s of the STREAM triad a[i] = b[i] + s·c[i] over three arrays of 64 MiB
 *               (twice a large L3), every thread on its slice, best of 5; bytes counted as STREAM
 *               does (12 per element: two reads and a write, no write-allocate traffic).
 * Header-only (static functions) for the bench/ programs; bench_peak.c prints both. */
#ifndef BENCH_PEAK_H
#define BENCH_PEAK_H

#include <stdlib.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* ---- FP32 FMA peak ---- */
#if defined(__x86_64__) && defined(__GNUC__)
/* 12 named accumulators (an array would be kept in memory at -O2 and time store forwarding,
 * not the FMA units): 12 independent chains cover 2 FMA pipes × 4+ cycles of latency. */
#define CHAINS(V, FMA, SET1, ADD)                                                                  \
    V a0 = SET1(1.0f), a1 = SET1(1.001f), a2 = SET1(1.002f), a3 = SET1(1.003f), a4 = SET1(1.004f),   \
      a5 = SET1(1.005f), a6 = SET1(1.006f), a7 = SET1(1.007f), a8 = SET1(1.008f), a9 = SET1(1.009f), \
      a10 = SET1(1.01f), a11 = SET1(1.011f);                                                       \
    const V b = SET1(0.9999999f), c = SET1(1e-7f);                                                 \
    for (long it = 0; it < iters; it++) {                                                          \
        a0 = FMA(a0, b, c); a1 = FMA(a1, b, c); a2 = FMA(a2, b, c); a3 = FMA(a3, b, c);            \
        a4 = FMA(a4, b, c); a5 = FMA(a5, b, c); a6 = FMA(a6, b, c); a7 = FMA(a7, b, c);            \
        a8 = FMA(a8, b, c); a9 = FMA(a9, b, c); a10 = FMA(a10, b, c); a11 = FMA(a11, b, c);        \
    }                                                                                              \
    V s = ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7)));                       \
    s = ADD(s, ADD(ADD(a8, a9), ADD(a10, a11)));
__attribute__((target("avx512f,fma"))) static float fma_chains512(long iters) {
    CHAINS(__m512, _mm512_fmadd_ps, _mm512_set1_ps, _mm512_add_ps)
    return _mm512_reduce_add_ps(s);
}
__attribute__((target("avx2,fma"))) static float fma_chains256(long iters) {
    CHAINS(__m256, _mm256_fmadd_ps, _mm256_set1_ps, _mm256_add_ps)
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0] + out[7];
}
#endif

/* Returns the measured peak in GFLOP/s (all threads), and the vector width used. */
static inline double fma_peak(int *lanes) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    const int w = __builtin_cpu_supports("avx512f") ? 16 : (__builtin_cpu_supports("fma") ? 8 : 0);
    *lanes = w;
    if (!w) return 0;
    /* short bursts, best of many: on a shared machine the best burst is the closest to the
     * machine's own rate (the same rule as the best-of-N kernel timings it is compared with) */
    const long iters = 10000000;
    double best = 0;
    for (int rep = 0; rep < 9; rep++) {
        int nt = 1;
        volatile float sink = 0;
        double t0 = bench_now();
#pragma omp parallel
        {
#ifdef _OPENMP
#pragma omp single
            nt = omp_get_num_threads();
#endif
            float r = w == 16 ? fma_chains512(iters) : fma_chains256(iters);
#pragma omp atomic
            sink += r;
        }
        double t = bench_now() - t0;
        double g = (double)nt * iters * 12 * w * 2 / t / 1e9;
        best = g > best ? g : best;
        (void)sink;
    }
    return best;
#else
    *lanes = 0;
    return 0;
#endif
}

/* Memory GB/s of the STREAM triad (all threads), or 0 when the arrays cannot be allocated. */
static inline double triad_gbs(void) {
    const size_t n = (size_t)16 << 20; /* 16 Mi floats = 64 MiB per array */
    float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        return 0;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) a[i] = 0, b[i] = 1, c[i] = 2; /* first touch by the thread that uses it */
    double best = 0;
    for (int rep = 0; rep < 6; rep++) {
        const float s = 0.5f + rep;
        double t0 = bench_now();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
        double t = bench_now() - t0;
        double g = 12.0 * n / t / 1e9;
        if (rep > 0 && g > best) best = g; /* the first pass pays page faults */
    }
    volatile float sink = a[n / 2];
    (void)sink;
    free(a), free(b), free(c);
    return best;
}

#endif
