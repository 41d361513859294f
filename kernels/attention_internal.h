/* attention_internal.h: what the files of the attention backends share (not installed).
 * attention.c defines the CPU backends; attention_backend.c holds the registry, the argument
 * checks and tsc_attn_run. A CUDA build (TSC_HAVE_CUDA) adds tsc_attn_backend_cuda from its own
 * translation unit; nothing else changes. */
#ifndef TSC_ATTENTION_INTERNAL_H
#define TSC_ATTENTION_INTERNAL_H

#include "tsc_attention.h"

/* The AVX-512 instance of the reference template is compiled in (x86-64 GCC). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TSC_ATTN_X86 1
#endif

extern const tsc_attn_backend_t tsc_attn_backend_cpu_ref;
#ifdef TSC_ATTN_X86
extern const tsc_attn_backend_t tsc_attn_backend_cpu_simd;
#endif
#ifdef TSC_HAVE_CUDA
extern const tsc_attn_backend_t tsc_attn_backend_cuda;
#endif

#endif
