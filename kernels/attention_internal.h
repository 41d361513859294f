/* attention_internal.h: what the files of the attention backends share (not installed).
 * attention.c defines the CPU backends; attention_rowwise.c the CPU instance of the CUDA exact
 * mode; attention_backend.c holds the registry, the argument checks and tsc_attn_run. A CUDA build (TSC_HAVE_CUDA) adds tsc_attn_backend_cuda from its own
 * translation unit; nothing else changes. */
#ifndef TSC_ATTENTION_INTERNAL_H
#define TSC_ATTENTION_INTERNAL_H

#include "tsc_attention.h"

#include "attn_rowwise_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The SIMD instances of the reference template (AVX-512, AVX2 + FMA) are compiled in (x86-64, GCC or
 * clang). */
#if defined(__x86_64__) && defined(__GNUC__)
#define TSC_ATTN_X86 1
#endif

extern const tsc_attn_backend_t tsc_attn_backend_cpu_ref;
extern const tsc_attn_backend_t tsc_attn_backend_cpu_rowwise;
#ifdef TSC_ATTN_X86
extern const tsc_attn_backend_t tsc_attn_backend_cpu_simd;
#endif
#ifdef TSC_HAVE_CUDA
extern const tsc_attn_backend_t tsc_attn_backend_cuda;
#endif

/* A policy and dims reduced to the exact-mode functions' numbers (attn_rowwise_internal.h);
 * TSC_ERR_UNSUPPORTED naming what they do not do (FP8/FP64 stages, +sr, +materialized). */
tsc_status_t tsc_rw_policy(const tsc_policy_t *pol, const tsc_attn_dims_t *dims, tsc_rw_pol_t *out);
/* The same structure with every stage FP32, nearest-even: the forward that hp δ reads. */
void tsc_rw_policy_hp(const tsc_rw_pol_t *p, tsc_rw_pol_t *hp);

#ifdef __cplusplus
}
#endif

#endif
