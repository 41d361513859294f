/* cpu_internal.h: the CPU features the SIMD paths need, detected once (kernels/cpu.c). Private
 * to the layers that link kernels/' objects (kernels/, train/, analyze/): not exported from
 * libtilescope.so. Each SIMD path keeps its own switch (tsc_formats_simd_set, tsc_attn_simd_set,
 * tsc_train_f32_simd_set, tsc_gemm_bf16_simd_set); what the CPU can do is decided here only. */
#ifndef TSC_CPU_INTERNAL_H
#define TSC_CPU_INTERNAL_H

typedef enum {
    TSC_CPU_AVX512_FMA,  /* avx512f + fma: the trainer's FP32 matmul and GELU */
    TSC_CPU_AVX512_BF16, /* avx512bf16 + f + bw + vl: BF16 rounding and the BF16 matmul */
    TSC_CPU_AVX512_ATTN, /* avx512f/vl/bw/dq + avx2 + fma + bmi/bmi2: the attention kernels */
    TSC_CPU_AVX2_FMA,    /* avx2 + fma: the trainer's products, GELU and attention without AVX-512 */
    TSC_CPU_N_FEATURES
} tsc_cpu_feature_t;

/* 1 when this CPU (x86-64, gcc or clang) has every instruction set of f, else 0; the answer is
 * computed once per feature and cached (thread-safe: the same value may be stored twice). */
int tsc_cpu_has(tsc_cpu_feature_t f);

/* Caps what tsc_cpu_has reports: 2 everything (default), 1 no AVX-512 feature, 0 none, as if the
 * CPU lacked the rest; returns the previous cap. Lets a test run each SIMD path a CPU has against
 * the others (every path gives the same bits). Set it before the work, not during. */
int tsc_cpu_cap(int level);

/* Compile a hot loop for AVX-512 and AVX2 as well as the baseline, chosen at run time (gcc
 * function multiversioning). Not with clang, whose resolvers (clang 14) are exported from the
 * library even for static functions, nor in sanitized builds, where the clones only add noise. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(TSC_SANITIZE)
#define TSC_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TSC_SIMD_CLONES
#endif

#endif
