/* tsc_attn_cuda.h: attention under a precision policy on an NVIDIA GPU, on device memory.
 *
 * The exact mode runs the CPU reference's arithmetic (tsc_attention.h) with one GPU thread per
 * chain of rounded operations: a query row in the forward, δ and dQ; a key in dK/dV; an element
 * in the GQA sum. Every operation is an IEEE operation that rounds as the CPU's does (nvcc
 * -fmad=false, explicit fmaf; exp and log are the reference's own, hd_math_internal.h), so O,
 * LSE, δ, dQ, dK, dV and the tile statistics are the reference's bits. It is a checking tool,
 * not a fast kernel: no tensor cores, every (row, key) score formed three times in the backward.
 * The same functions run on the CPU as backend "cpu-rowwise", which is how CI checks them
 * without a GPU; bench/gpu_check.sh checks this file on a GPU.
 *
 *   tsc_attn_cuda_io_t io = {TSC_CUDA_BF16, dq_, dk_, dv_, ddo, d_o, d_lse, NULL, d_dq, d_dk, d_dv};
 *   tsc_attn_tile_stats_t ts;  tsc_attn_tile_stats_init(&ts, B, H, T, pol.block_k);  // host
 *   if (tsc_attn_cuda_run(&pol, &dims, &io, &ts, stream) != TSC_OK) puts(tsc_error_last());
 *
 * Scope: the policies the GPU arithmetic covers (online softmax; stages in fp32, tf32, bf16,
 * fp16; nearest-even or toward zero); others give TSC_ERR_UNSUPPORTED naming what is missing.
 * Fast mode: tsc_attn_cuda_run_fast below (tensor cores; not yet run on a GPU). The P̄V rounding
 * census: tsc_attn_cuda_census.
 *
 * In a build without CUDA these functions exist and return TSC_ERR_UNSUPPORTED ("built without
 * CUDA"); tsc_cuda_available() is 0. The "cuda" backend of tsc_attention.h's registry wraps
 * tsc_attn_cuda_run for host arrays (copies in and out). */
#ifndef TSC_ATTN_CUDA_H
#define TSC_ATTN_CUDA_H

#include "tsc_export.h"

#include "tsc_attention.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TSC_CUDA_F32 = 0, TSC_CUDA_BF16 = 1, TSC_CUDA_F16 = 2 } tsc_cuda_dtype_t;

/* Device pointers, row-major, shapes as tsc_attn_io_t. Inputs in dtype (rounded into the policy's
 * q/k/v/do stages on entry, as the reference does); outputs FP32 holding the stage values. Any
 * output may be NULL; dout NULL runs the forward only. */
typedef struct {
    tsc_cuda_dtype_t dtype;
    const void *q, *k, *v, *dout;
    float *o, *lse, *delta, *dq, *dk, *dv;
} tsc_attn_cuda_io_t;

/* 1 when a CUDA device can be used here (a CUDA build, a driver, at least one GPU). */
TSC_API int tsc_cuda_available(void);
/* One line naming the device ("NVIDIA H200, sm_90, 139.8 GiB") or why there is none. */
TSC_API const char *tsc_cuda_describe(void);

/* Exact mode on stream (a cudaStream_t; NULL: the default stream). tiles: host tile statistics
 * (tsc_attn_tile_stats_init for B, H, T, pol->block_k) filled before return, or NULL. Returns
 * after the work is done (the outputs are ready). TSC_ERR_ARG for bad dims or pointers,
 * TSC_ERR_UNSUPPORTED outside the scope above, TSC_ERR_NOMEM / TSC_ERR_IO for CUDA failures
 * (the detail names the call and CUDA's message). Scratch: (3·Bc + 3·D) floats per query row of
 * every head, plus two [B, H, T, D] float arrays when the backward runs. */
TSC_API tsc_status_t tsc_attn_cuda_run(const tsc_policy_t *pol, const tsc_attn_dims_t *dims,
                                       const tsc_attn_cuda_io_t *io, tsc_attn_tile_stats_t *tiles, void *stream);

/* The rounding census of the P̄V accumulation (the definition of tsc_census.h: FP32 sums per
 * feature restarting at each key tile, an event where the significand carried and rounding the
 * sum to fmt has its rounding and sticky bits set), over the P̄V operands the exact forward used,
 * per (batch, query head). err_* are sums of R(x) − x, not divided by ℓ. */
typedef struct {
    long long additions, events_neg, events_pos;
    double err_neg, err_pos;
} tsc_attn_census_t;

/* The exact forward with the census into census[B·H] (fmt BF16 or FP16); io's outputs as in
 * tsc_attn_cuda_run (dout is ignored: forward only). */
TSC_API tsc_status_t tsc_attn_cuda_census(const tsc_policy_t *pol, const tsc_attn_dims_t *dims,
                                          const tsc_attn_cuda_io_t *io, tsc_format_t fmt,
                                          tsc_attn_census_t *census, void *stream);

/* Fast mode (attention_cuda_fast.cu): FlashAttention-2 kernels on tensor cores, the bf16-fa2 /
 * fp16-fa2 arithmetic in the policy's q-stage format (BF16 or FP16; its other stages are not
 * read), D 64 or 128, 64-key tiles (tiles, when given, for block_k 64). Results agree with the
 * reference within rounding error, not bit for bit; dQ sums by atomics, so its last bits vary
 * between runs. UNVERIFIED: compiled, never yet run on a GPU (bench/gpu_check.sh checks it). */
TSC_API tsc_status_t tsc_attn_cuda_run_fast(const tsc_policy_t *pol, const tsc_attn_dims_t *dims,
                                            const tsc_attn_cuda_io_t *io, tsc_attn_tile_stats_t *tiles,
                                            void *stream);

#ifdef __cplusplus
}
#endif
#endif
