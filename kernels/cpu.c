/* cpu.c: CPU-feature detection for every SIMD path of the library (cpu_internal.h). */
#include "cpu_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
static int detect(tsc_cpu_feature_t f) {
    __builtin_cpu_init();
    switch (f) {
    case TSC_CPU_AVX512_FMA:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
    case TSC_CPU_AVX512_BF16:
        return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    case TSC_CPU_AVX512_ATTN:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
    case TSC_CPU_AVX2_FMA:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case TSC_CPU_N_FEATURES:
        break;
    }
    return 0;
}
#else
static int detect(tsc_cpu_feature_t f) {
    (void)f;
    return 0;
}
#endif

/* The SIMD level each feature belongs to: 2 AVX-512, 1 AVX2 + FMA. */
static int level_of(tsc_cpu_feature_t f) { return f == TSC_CPU_AVX2_FMA ? 1 : 2; }

static int cap = 2;

int tsc_cpu_cap(int level) {
    int old = __atomic_load_n(&cap, __ATOMIC_RELAXED);
    __atomic_store_n(&cap, level < 0 ? 0 : level > 2 ? 2 : level, __ATOMIC_RELAXED);
    return old;
}

int tsc_cpu_has(tsc_cpu_feature_t f) {
    static int cached[TSC_CPU_N_FEATURES] = {-1, -1, -1, -1};
    if ((unsigned)f >= TSC_CPU_N_FEATURES) return 0;
    int c = __atomic_load_n(&cached[f], __ATOMIC_RELAXED);
    if (c < 0) {
        c = detect(f);
        __atomic_store_n(&cached[f], c, __ATOMIC_RELAXED);
    }
    return c && __atomic_load_n(&cap, __ATOMIC_RELAXED) >= level_of(f);
}
