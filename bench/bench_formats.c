/* bench_formats: throughput of the number-format conversions and of the accumulation model,
 * measured side by side in one run (ratios, not absolute claims).
 *
 *   bench_formats [N]      N elements per conversion (default 16M), best of 5 runs each
 *
 * Prints, per path, nanoseconds per element and Gelem/s, then ratios: the AVX-512 BF16 path
 * over the portable one (same bits, checked here too), bulk over a scalar loop, the generic
 * double-based rounding, and a traced addition (exact multi-word sum) over an untraced one.
 * Times are this thread's CPU time, so other load on the machine does not inflate them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tsc_accum.h"
#include "bench_check.h"
#include "tsc_formats.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: robust on a shared machine */
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static volatile uint64_t sink;

typedef void (*bench_fn)(const float *src, void *dst, size_t n);

static void f_bf16_simd(const float *s, void *d, size_t n) {
    tsc_formats_simd_set(1);
    tsc_convert_from_f32(TSC_FMT_BF16, s, d, n, TSC_ROUND_NEAREST_EVEN, NULL);
}
static void f_bf16_port(const float *s, void *d, size_t n) {
    tsc_formats_simd_set(0);
    tsc_convert_from_f32(TSC_FMT_BF16, s, d, n, TSC_ROUND_NEAREST_EVEN, NULL);
    tsc_formats_simd_set(1);
}
static void f_bf16_scalar(const float *s, void *d, size_t n) {
    uint16_t *o = d;
    for (size_t i = 0; i < n; i++) o[i] = tsc_bf16_from_f32(s[i]);
}
static void f_fp16_bulk(const float *s, void *d, size_t n) {
    tsc_convert_from_f32(TSC_FMT_FP16, s, d, n, TSC_ROUND_NEAREST_EVEN, NULL);
}
static void f_e4m3_bulk(const float *s, void *d, size_t n) {
    tsc_convert_from_f32(TSC_FMT_FP8_E4M3, s, d, n, TSC_ROUND_NEAREST_EVEN, NULL);
}
static void f_bf16_generic(const float *s, void *d, size_t n) {
    uint16_t *o = d;
    for (size_t i = 0; i < n; i++) o[i] = (uint16_t)tsc_encode(s[i], TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL);
}
static void f_bf16_sr(const float *s, void *d, size_t n) {
    tsc_rng_t rng;
    tsc_rng_seed(&rng, 1);
    tsc_convert_from_f32(TSC_FMT_BF16, s, d, n, TSC_ROUND_STOCHASTIC, &rng);
}
static void f_accum_fast(const float *s, void *d, size_t n) {
    tsc_accum_t acc;
    BENCH_OK(tsc_accum_init(&acc, TSC_FMT_FP32, TSC_ROUND_NEAREST_EVEN, NULL));
    for (size_t i = 0; i < n; i++) tsc_accum_add(&acc, s[i]);
    memcpy(d, &acc.sum, sizeof acc.sum);
}
static void f_accum_traced(const float *s, void *d, size_t n) {
    tsc_accum_step_t st;
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum = tsc_accum_add2(sum, s[i], TSC_FMT_FP32, TSC_ROUND_NEAREST_EVEN, NULL, &st);
    memcpy(d, &sum, sizeof sum);
}

static double run(const char *name, bench_fn f, const float *src, void *dst, size_t n) {
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        f(src, dst, n);
        double t = now() - t0;
        if (t < best) best = t;
        sink += ((uint8_t *)dst)[n / 2];
    }
    double ns = best * 1e9 / (double)n;
    printf("  %-34s %8.3f ns/elem  %7.3f Gelem/s\n", name, ns, 1.0 / ns);
    return ns;
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)1 << 24;
    if (n < 16) n = 16;
    float *src = malloc(n * sizeof *src);
    uint16_t *a = malloc(n * 8), *b = malloc(n * 8);
    if (!src || !a || !b) return 1;
    tsc_rng_t rng;
    tsc_rng_seed(&rng, 42);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)tsc_rng_next(&rng);
        u = (u & 0x807fffffu) | ((uint32_t)(100 + u % 56) << 23); /* finite, mostly normal */
        memcpy(&src[i], &u, 4);
    }
    printf("bench_formats: %zu elements, best of 5; AVX-512 BF16 path %s\n", n,
           tsc_formats_simd_set(1) ? "available" : "not available (portable numbers twice)");
    double simd = run("f32->bf16 RNE bulk (SIMD)", f_bf16_simd, src, a, n);
    double port = run("f32->bf16 RNE bulk (portable)", f_bf16_port, src, b, n);
    int same = memcmp(a, b, n * 2) == 0;
    double scal = run("f32->bf16 RNE scalar loop", f_bf16_scalar, src, b, n);
    double gen = run("f32->bf16 RNE generic (tsc_encode)", f_bf16_generic, src, b, n);
    double sr = run("f32->bf16 stochastic bulk", f_bf16_sr, src, b, n);
    double h = run("f32->fp16 RNE bulk", f_fp16_bulk, src, b, n);
    double e4 = run("f32->fp8-e4m3 RNE bulk", f_e4m3_bulk, src, b, n);
    size_t na = n / 16;
    double af = run("fp32 running sum, untraced", f_accum_fast, src, b, na);
    double at = run("fp32 running sum, traced (exact)", f_accum_traced, src, b, na);
    printf("ratios: SIMD/portable speedup %.2fx (bits identical: %s); bulk/scalar %.2fx; generic/bulk %.1fx slower;\n"
           "        stochastic/RNE %.1fx; fp16/bf16 %.1fx; e4m3/bf16 %.1fx; traced/untraced addition %.1fx\n",
           port / simd, same ? "yes" : "NO", scal / simd, gen / simd, sr / simd, h / simd, e4 / simd, at / af);
    free(src); free(a); free(b);
    return same ? 0 : 1;
}
