/* simd_internal.h (private to analyze/): compile a hot loop for AVX-512 and AVX2 as well as the
 * baseline, chosen at run time (gcc function multiversioning). Not in sanitized builds, where
 * the clones only add noise. */
#ifndef TSC_SIMD_INTERNAL_H
#define TSC_SIMD_INTERNAL_H
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(TSC_SANITIZE)
#define TSC_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TSC_SIMD_CLONES
#endif
#endif
