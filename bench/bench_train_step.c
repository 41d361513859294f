/* bench_train_step: forward + backward time of one training step of a tsc_model.h model.
 *   bench_train_step [MODEL [B [T [fp32|bf16 [STEPS]]]]]     (default gpt2-mini 8 256 fp32 5)
 * Prints ms/step, tokens/s, the matmuls' share of the time, their GFLOP/s and that as a
 * fraction of the FMA peak the product's path can reach, measured in the same run (bench_peak.h:
 * every thread on independent chains of the widest FP32 FMA the CPU has); a BF16 product on AVX-512
 * BF16 does two multiply-adds per lane per instruction, so its peak is twice that. The GHz is
 * measured too: a chain of dependent integer adds retires one add per cycle, so adds / second is
 * the core clock while it runs (cpu MHz from /proc/cpuinfo is printed next to it).
 * Threads: OMP_NUM_THREADS. The load average is printed: the numbers mean little on a busy box. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "model_internal.h"
#include "bench_check.h"
#include "bench_peak.h"
#include "cpu_internal.h"
#include "tsc_model.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static double measure_ghz(void) {
    unsigned long x = 0;
    const long n = 200000000;
    double t0 = now();
    for (long i = 0; i < n; i++) {
        __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
    }
    double t = now() - t0;
    return 4.0 * n / t / 1e9;
}

static double cpuinfo_mhz(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    double mhz = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "cpu MHz : %lf", &mhz) == 1) break;
    if (f) fclose(f);
    return mhz;
}

int main(int argc, char **argv) {
    const char *name = argc > 1 ? argv[1] : "gpt2-mini";
    int B = argc > 2 ? atoi(argv[2]) : 8, T = argc > 3 ? atoi(argv[3]) : 256;
    tsc_prec_t prec = argc > 4 && strcmp(argv[4], "bf16") == 0 ? TSC_PREC_BF16 : TSC_PREC_FP32;
    int steps = argc > 5 ? atoi(argv[5]) : 5;
    tsc_model_config_t cfg;
    tsc_model_t *m = NULL;
    if (tsc_model_config_parse(name, &cfg) != TSC_OK || tsc_model_create(&m, &cfg, prec, B, T) != TSC_OK) {
        fprintf(stderr, "bench_train_step: %s\n", tsc_error_last());
        return 1;
    }
    tsc_model_init(m, 1);
    int32_t *tok = malloc((size_t)B * T * 4), *tgt = malloc((size_t)B * T * 4);
    for (int i = 0; i < B * T; i++) tok[i] = (i * 7919) % 256, tgt[i] = (i * 104729 + 3) % 256;
    double loss = 0;
    BENCH_OK(tsc_model_forward(m, tok, tgt, &loss)); /* warm-up */
    BENCH_OK(tsc_model_backward(m));
    tsc_gemm_stats(NULL, NULL, 1);
    double t0 = now();
    for (int s = 0; s < steps; s++) {
        BENCH_OK(tsc_model_forward(m, tok, tgt, &loss));
        BENCH_OK(tsc_model_backward(m));
    }
    double t = (now() - t0) / steps, mm_sec, mm_flops;
    tsc_gemm_stats(&mm_sec, &mm_flops, 1);
    mm_sec /= steps;
    mm_flops /= steps;
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    int lanes = 0;
    int dp = prec == TSC_PREC_BF16 && tsc_cpu_has(TSC_CPU_AVX512_BF16); /* vdpbf16ps: 2 multiply-adds a lane */
    double ghz = measure_ghz(), peak = fma_peak(&lanes) * 1e9 * (dp ? 2 : 1), la[3] = {0};
    const char *path = prec == TSC_PREC_BF16 ? (dp ? "AVX-512 BF16" : tsc_train_have_avx512() ? "AVX-512 FP32 chains" : tsc_cpu_has(TSC_CPU_AVX2_FMA) ? "AVX2 + FMA" : "portable")
                                              : tsc_train_have_avx512() ? "AVX-512" : tsc_train_have_avx2() ? "AVX2 + FMA" : "portable";
    if (getloadavg(la, 3) < 0) la[0] = -1;
    char desc[160];
    tsc_model_config_str(&cfg, desc, sizeof desc);
    printf("%s (%s), B %d T %d, %s, %d threads, loss %.4f\n", name, desc, B, T, prec == TSC_PREC_BF16 ? "bf16" : "fp32",
           threads, loss);
    printf("step %.1f ms, %.0f tokens/s; matmuls %.1f ms (%.0f%% of the step), %.1f GFLOP/s = %.1f%% of peak "
           "%.0f GFLOP/s (%s path; measured %d-lane FMA peak%s; %.2f GHz measured, cpuinfo %.0f MHz); load average %.2f\n",
           t * 1e3, B * T / t, mm_sec * 1e3, 100 * mm_sec / t, mm_flops / mm_sec / 1e9,
           100 * mm_flops / mm_sec / peak, peak / 1e9, path, lanes, dp ? " x 2" : "", ghz, cpuinfo_mhz(), la[0]);
    free(tok);
    free(tgt);
    tsc_model_free(m);
    return 0;
}
