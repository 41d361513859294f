/* attention_cuda_fast.cu: the fast mode of tsc_attn_cuda.h, FlashAttention-2-structured kernels on
 * tensor cores (WMMA, 16×16×16, BF16 or FP16 operands, FP32 accumulation).
 *
 * The arithmetic is FlashAttention-2's (the bf16-fa2 / fp16-fa2 model): Q, K, V, dO in the
 * policy's input format; S, the running max, ℓ and Ō in FP32; P̄ rounded to the input format for
 * the P̄V product; O = Ō/ℓ; the backward recomputes P from LSE, forms dS = P∘(dP − δ)·α with δ =
 * rowsum(dO∘O), and accumulates dV, dK per key block in registers and dQ with FP32 atomics (so dQ's
 * summation order, and its last bits, vary from run to run). The order inside each tensor-core
 * product is the hardware's, not the reference's: results agree with the reference within
 * rounding error, not bit for bit (FlashAttention's rule: error against FP64 at most twice that of
 * the same-dtype reference; tests/capture/test_cuda.c on a GPU). Only the policy's input format is
 * read; its other stages are the FA2 kernel's by construction.
 *
 * Geometry: a block of 4 warps takes 64 query rows (forward) or 64 keys (backward); each warp owns
 * 16 of them; key (query) tiles of 64 stream through shared memory. D must be 64 or 128.
 *
 * Status: compiled for sm_90 and PTX; it has not run on a GPU yet (none was available where it was
 * written). bench/gpu_check.sh checks it against the rule above and times it. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <math.h>
#include <stdio.h>

#include "attention_internal.h"
#include "tsc_attn_cuda.h"

using namespace nvcuda;

namespace {

const int kWarps = 4, kRows = 16, kTile = 64; /* rows per warp, keys (queries) per tile */

template <typename T> __device__ T to_t(float x);
template <> __device__ __nv_bfloat16 to_t<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __half to_t<__half>(float x) { return __float2half_rn(x); }
template <typename T> __device__ float to_f(T x);
template <> __device__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> __device__ float to_f<__half>(__half x) { return __half2float(x); }

__device__ float in_elem(const void *in, int dtype, size_t i) {
    if (dtype == TSC_CUDA_BF16) return __bfloat162float(((const __nv_bfloat16 *)in)[i]);
    if (dtype == TSC_CUDA_F16) return __half2float(((const __half *)in)[i]);
    return ((const float *)in)[i];
}

template <typename T> __global__ void k_convert(const void *in, int dtype, T *out, size_t n) {
    const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = to_t<T>(in_elem(in, dtype, i));
}

/* dst [64, D] = rows r0 .. r0+63 of src [T, D] (zeros past T), by the whole block. */
template <typename T, int D> __device__ __forceinline__ void load_rows(T *dst, const T *src, int r0, int n_rows) {
    for (int i = threadIdx.x; i < kTile * D; i += blockDim.x) {
        const int r = r0 + i / D;
        dst[i] = r < n_rows ? src[(size_t)r * D + i % D] : to_t<T>(0.0f);
    }
}

/* out [16, 64] (float, row-major) = A [16, D] · B[64, D]^T, by one warp (A, B row-major, in shared
 * memory). */
template <typename T, int D> __device__ __forceinline__ void warp_abt(const T *A, const T *B, float *out) {
    for (int n = 0; n < kTile / 16; n++) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::fill_fragment(acc, 0.0f);
        for (int kk = 0; kk < D / 16; kk++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
            wmma::load_matrix_sync(fa, A + kk * 16, D);
            wmma::load_matrix_sync(fb, B + n * 16 * D + kk * 16, D);
            wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(out + n * 16, acc, kTile, wmma::mem_row_major);
    }
}

struct fdims {
    int B, H, Hkv, T, D, causal;
    float scale;
};

/* Forward: grid (ceil(T/64), B·H). Dynamic shared memory: Q, K, V tiles [64, D] (T), per warp S
 * [16, 64] (float), P̄ [16, 64] (T), Ō [16, D] (float). */
template <typename T, int D>
__global__ void __launch_bounds__(128) k_fwd_fast(fdims g, const T *Q, const T *K, const T *V, float *O, float *LSE,
                                                  double *rmax, int32_t *tc, int32_t *tce, int32_t *po, int n_kt) {
    extern __shared__ __align__(128) unsigned char smem[];
    T *sQ = (T *)smem, *sK = sQ + kTile * D, *sV = sK + kTile * D;
    float *sS = (float *)(sV + kTile * D);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float *wS = sS + warp * kRows * kTile;
    T *wP = (T *)(sS + kWarps * kRows * kTile) + warp * kRows * kTile;
    float *wO = (float *)((T *)(sS + kWarps * kRows * kTile) + kWarps * kRows * kTile) + warp * kRows * D;
    const int bh = blockIdx.y, b = bh / g.H, h = bh % g.H, hk = h / (g.H / g.Hkv);
    const size_t TD = (size_t)g.T * D;
    const T *q = Q + (size_t)bh * TD, *k = K + ((size_t)b * g.Hkv + hk) * TD, *v = V + ((size_t)b * g.Hkv + hk) * TD;
    const int q0 = blockIdx.x * kTile;
    load_rows<T, D>(sQ, q, q0, g.T);
    for (int i = lane; i < kRows * D; i += 32) wO[i] = 0.0f;
    /* lanes 2r and 2r+1 own row r of the warp: columns [0, 32) and [32, 64) of each tile */
    const int r = lane / 2, half = lane % 2, t = q0 + warp * kRows + r;
    float m = -INFINITY, l = 0.0f;
    const int last_key = g.causal ? min(g.T, q0 + kTile) : g.T;
    for (int j0 = 0; j0 < last_key; j0 += kTile) {
        __syncthreads();
        load_rows<T, D>(sK, k, j0, g.T);
        load_rows<T, D>(sV, v, j0, g.T);
        __syncthreads();
        warp_abt<T, D>(sQ + warp * kRows * D, sK, wS); /* S = Q_w K^T: 16 × 64 */
        __syncwarp();
        /* online softmax of row r over this tile (two lanes per row) */
        float *srow = wS + r * kTile + half * 32;
        float mx = -INFINITY;
        for (int c = 0; c < 32; c++) {
            const int j = j0 + half * 32 + c;
            float s = srow[c] * g.scale;
            if (j >= g.T || (g.causal && j > t) || t >= g.T) s = -INFINITY;
            srow[c] = s;
            mx = fmaxf(mx, s);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        const float mn = fmaxf(m, mx);
        const float c = m == -INFINITY ? 0.0f : __expf(m - mn);
        float sum = 0.0f;
        int ties = 0, ties_eps = 0, ones = 0;
        T *prow = wP + r * kTile + half * 32;
        for (int cc = 0; cc < 32; cc++) {
            const float s = srow[cc];
            const float p = mn == -INFINITY ? 0.0f : __expf(s - mn);
            const T pt = to_t<T>(p);
            prow[cc] = pt;
            sum += p;
            ties += s == mx && s != -INFINITY;
            ties_eps += s >= mx - 1e-3f && s != -INFINITY;
            ones += to_f<T>(pt) == 1.0f;
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        ties += __shfl_xor_sync(0xffffffffu, ties, 1);
        ties_eps += __shfl_xor_sync(0xffffffffu, ties_eps, 1);
        ones += __shfl_xor_sync(0xffffffffu, ones, 1);
        l = c * l + sum;
        m = mn;
        for (int d = half; d < D; d += 2) wO[r * D + d] *= c;
        if (rmax && half == 0 && t < g.T && mx != -INFINITY) {
            const size_t ti = ((size_t)bh * g.T + t) * n_kt + j0 / kTile;
            rmax[ti] = (double)mx;
            tc[ti] = ties;
            tce[ti] = ties_eps;
            po[ti] = ones;
        }
        __syncwarp();
        /* Ō += P̄ V: 16 × D */
        for (int n = 0; n < D / 16; n++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::load_matrix_sync(acc, wO + n * 16, D, wmma::mem_row_major);
            for (int kk = 0; kk < kTile / 16; kk++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
                wmma::load_matrix_sync(fa, wP + kk * 16, kTile);
                wmma::load_matrix_sync(fb, sV + kk * 16 * D + n * 16, D);
                wmma::mma_sync(acc, fa, fb, acc);
            }
            wmma::store_matrix_sync(wO + n * 16, acc, D, wmma::mem_row_major);
        }
        __syncwarp();
    }
    if (t < g.T) {
        for (int d = half; d < D; d += 2) O[(size_t)bh * TD + (size_t)t * D + d] = wO[r * D + d] / l;
        if (half == 0) LSE[(size_t)bh * g.T + t] = m + logf(l);
    }
}

/* δ = rowsum(dO ∘ O), one warp per row. */
template <typename T>
__global__ void k_delta_fast(int rows, int D, const T *dO, const float *O, float *delta) {
    const size_t row = blockIdx.x * (size_t)(blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= (size_t)rows) return;
    float s = 0.0f;
    for (int d = lane; d < D; d += 32) s += to_f<T>(dO[row * D + d]) * O[row * D + d];
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) delta[row] = s;
}

/* Backward: grid (ceil(T/64), B·Hkv): 64 keys of a kv head, each warp 16 of them, over the group's
 * query heads and every query tile that sees them. dK, dV accumulate in registers; dQ (FP32,
 * zeroed beforehand) by atomics. Shared: K, V [64, D] (T); Q, dO [64, D] (T); per warp P^T, dS^T
 * [16, 64] (T) and S^T, dP^T [16, 64] (float); a [64, D] float dQ scratch. */
template <typename T, int D>
__global__ void __launch_bounds__(128) k_bwd_fast(fdims g, const T *Q, const T *K, const T *V, const T *dO,
                                                  const float *LSE, const float *delta, float *dQ, float *dK,
                                                  float *dV) {
    extern __shared__ __align__(128) unsigned char smem[];
    T *sK = (T *)smem, *sV = sK + kTile * D, *sQ = sV + kTile * D, *sdO = sQ + kTile * D;
    T *sP = sdO + kTile * D, *sdS = sP + kWarps * kRows * kTile;
    float *sF = (float *)(sdS + kWarps * kRows * kTile), *sF2 = sF + kWarps * kRows * kTile;
    float *sdQ = sF2 + kWarps * kRows * kTile;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    T *wP = sP + warp * kRows * kTile, *wdS = sdS + warp * kRows * kTile;
    float *wF = sF + warp * kRows * kTile, *wF2 = sF2 + warp * kRows * kTile;
    const int b = blockIdx.y / g.Hkv, hk = blockIdx.y % g.Hkv, G = g.H / g.Hkv;
    const size_t TD = (size_t)g.T * D;
    const int j0 = blockIdx.x * kTile;
    const T *k = K + ((size_t)b * g.Hkv + hk) * TD, *v = V + ((size_t)b * g.Hkv + hk) * TD;
    load_rows<T, D>(sK, k, j0, g.T);
    load_rows<T, D>(sV, v, j0, g.T);
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> adK[D / 16], adV[D / 16];
    for (int n = 0; n < D / 16; n++) {
        wmma::fill_fragment(adK[n], 0.0f);
        wmma::fill_fragment(adV[n], 0.0f);
    }
    /* lanes 2r, 2r+1: key row r of the warp's 16, query columns [0, 32) / [32, 64) */
    const int r = lane / 2, half = lane % 2, j = j0 + warp * kRows + r;
    for (int gh = 0; gh < G; gh++) {
        const int h = hk * G + gh;
        const size_t bh = (size_t)b * g.H + h;
        const T *q = Q + bh * TD, *dO_ = dO + bh * TD;
        const int first_q = g.causal ? j0 / kTile * kTile : 0;
        for (int i0 = first_q; i0 < g.T; i0 += kTile) {
            __syncthreads();
            load_rows<T, D>(sQ, q, i0, g.T);
            load_rows<T, D>(sdO, dO_, i0, g.T);
            for (int i = threadIdx.x; i < kTile * D; i += blockDim.x) sdQ[i] = 0.0f;
            __syncthreads();
            /* S^T = K_w Q^T (16 × 64) into wF, dP^T = V_w dO^T into wF2; then P^T (FP32 for dS,
             * rounded for the dV product) and dS^T */
            warp_abt<T, D>(sK + warp * kRows * D, sQ, wF);
            warp_abt<T, D>(sV + warp * kRows * D, sdO, wF2);
            __syncwarp();
            for (int c = 0; c < 32; c++) {
                const int col = half * 32 + c, t = i0 + col;
                const int masked = t >= g.T || j >= g.T || (g.causal && j > t);
                const float p = masked ? 0.0f : __expf(wF[r * kTile + col] * g.scale - LSE[bh * g.T + t]);
                const float ds = masked ? 0.0f : p * (wF2[r * kTile + col] - delta[bh * g.T + t]) * g.scale;
                wP[r * kTile + col] = to_t<T>(p);
                wdS[r * kTile + col] = to_t<T>(ds);
            }
            __syncwarp();
            /* dV_w += P^T dO; dK_w += dS^T Q */
            for (int n = 0; n < D / 16; n++)
                for (int kk = 0; kk < kTile / 16; kk++) {
                    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fp, fs;
                    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fo, fq;
                    wmma::load_matrix_sync(fp, wP + kk * 16, kTile);
                    wmma::load_matrix_sync(fo, sdO + kk * 16 * D + n * 16, D);
                    wmma::mma_sync(adV[n], fp, fo, adV[n]);
                    wmma::load_matrix_sync(fs, wdS + kk * 16, kTile);
                    wmma::load_matrix_sync(fq, sQ + kk * 16 * D + n * 16, D);
                    wmma::mma_sync(adK[n], fs, fq, adK[n]);
                }
            /* dQ (64 × D) += dS K_w: dS = (dS^T)^T read as a column-major [64, 16] */
            for (int mblk = 0; mblk < kTile / 16; mblk++)
                for (int n = 0; n < D / 16; n++) {
                    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
                    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::col_major> fa;
                    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
                    wmma::fill_fragment(acc, 0.0f);
                    wmma::load_matrix_sync(fa, wdS + mblk * 16, kTile);
                    wmma::load_matrix_sync(fb, sK + warp * kRows * D + n * 16, D);
                    wmma::mma_sync(acc, fa, fb, acc);
                    wmma::store_matrix_sync(wF, acc, 16, wmma::mem_row_major);
                    __syncwarp();
                    for (int e = lane; e < 256; e += 32)
                        atomicAdd(&sdQ[(mblk * 16 + e / 16) * D + n * 16 + e % 16], wF[e]);
                    __syncwarp();
                }
            __syncthreads();
            for (int i = threadIdx.x; i < kTile * D; i += blockDim.x) {
                const int qr = i0 + i / D;
                if (qr < g.T) atomicAdd(&dQ[bh * TD + (size_t)qr * D + i % D], sdQ[i]);
            }
        }
    }
    __syncthreads();
    float *const out[2] = {dK + ((size_t)b * g.Hkv + hk) * TD, dV + ((size_t)b * g.Hkv + hk) * TD};
    for (int n = 0; n < D / 16; n++)
        for (int w = 0; w < 2; w++) { /* through the warp's scratch: fragments have no row layout */
            wmma::store_matrix_sync(wF, w ? adV[n] : adK[n], 16, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                const int kr = j0 + warp * kRows + e / 16;
                if (kr < g.T) out[w][(size_t)kr * D + n * 16 + e % 16] = wF[e];
            }
            __syncwarp();
        }
}

tsc_status_t fail(cudaError_t e, const char *what) {
    return tsc_error_set(e == cudaErrorMemoryAllocation ? TSC_ERR_NOMEM : TSC_ERR_IO, "attention (cuda fast): %s: %s",
                         what, cudaGetErrorString(e));
}

template <typename T, int D>
tsc_status_t run_fast(const fdims &g, const tsc_attn_cuda_io_t *io, tsc_attn_tile_stats_t *tiles, cudaStream_t s) {
    const size_t TD = (size_t)g.T * D, nq = (size_t)g.B * g.H * TD, nk = (size_t)g.B * g.Hkv * TD;
    const size_t nr = (size_t)g.B * g.H * g.T;
    const int n_kt = (g.T + kTile - 1) / kTile;
    const size_t nt = nr * n_kt;
    void *ptr[16];
    int np = 0;
    tsc_status_t st = TSC_OK;
    cudaError_t e = cudaSuccess;
    T *q = 0, *k = 0, *v = 0, *dO = 0;
    float *o = io->o, *lse = io->lse, *delta = io->delta;
    double *rmax = 0;
    int32_t *tc = 0, *tce = 0, *po = 0;
    const size_t fwd_smem = 3 * kTile * D * sizeof(T) + kWarps * kRows * kTile * (sizeof(float) + sizeof(T)) +
                            kWarps * kRows * D * sizeof(float);
    const size_t bwd_smem = 4 * kTile * D * sizeof(T) + 2 * kWarps * kRows * kTile * sizeof(T) +
                            2 * kWarps * kRows * kTile * sizeof(float) + kTile * D * sizeof(float);
#define ALLOC(p, n)                                                                                              \
    do {                                                                                                       \
        if ((e = cudaMalloc((void **)&(p), (n) * sizeof(*(p)))) != cudaSuccess) { st = fail(e, "cudaMalloc"); goto done; } \
        ptr[np++] = (p);                                                                                       \
    } while (0)
    ALLOC(q, nq);
    ALLOC(k, nk);
    ALLOC(v, nk);
    if (!o) ALLOC(o, nq);
    if (!lse) ALLOC(lse, nr);
    k_convert<T><<<(unsigned)((nq + 255) / 256), 256, 0, s>>>(io->q, io->dtype, q, nq);
    k_convert<T><<<(unsigned)((nk + 255) / 256), 256, 0, s>>>(io->k, io->dtype, k, nk);
    k_convert<T><<<(unsigned)((nk + 255) / 256), 256, 0, s>>>(io->v, io->dtype, v, nk);
    if (tiles) {
        ALLOC(rmax, nt);
        ALLOC(tc, nt);
        ALLOC(tce, nt);
        ALLOC(po, nt);
        if ((e = cudaMemcpyAsync(rmax, tiles->row_max, nt * 8, cudaMemcpyHostToDevice, s)) ||
            (e = cudaMemcpyAsync(tc, tiles->tie_count, nt * 4, cudaMemcpyHostToDevice, s)) ||
            (e = cudaMemcpyAsync(tce, tiles->tie_count_eps, nt * 4, cudaMemcpyHostToDevice, s)) ||
            (e = cudaMemcpyAsync(po, tiles->pbar_one, nt * 4, cudaMemcpyHostToDevice, s))) {
            st = fail(e, "copying the tile statistics in");
            goto done;
        }
    }
    if ((e = cudaFuncSetAttribute(k_fwd_fast<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fwd_smem)) ||
        (e = cudaFuncSetAttribute(k_bwd_fast<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bwd_smem))) {
        st = fail(e, "shared memory");
        goto done;
    }
    k_fwd_fast<T, D><<<dim3((g.T + kTile - 1) / kTile, g.B * g.H), 128, fwd_smem, s>>>(g, q, k, v, o, lse, rmax, tc,
                                                                                      tce, po, n_kt);
    if ((e = cudaGetLastError()) != cudaSuccess) { st = fail(e, "the forward"); goto done; }
    if (io->dout && (io->dq || io->dk || io->dv || io->delta)) {
        float *dq = io->dq, *dk = io->dk, *dv = io->dv;
        ALLOC(dO, nq);
        if (!delta) ALLOC(delta, nr);
        if (!dq) ALLOC(dq, nq);
        if (!dk) ALLOC(dk, nk);
        if (!dv) ALLOC(dv, nk);
        k_convert<T><<<(unsigned)((nq + 255) / 256), 256, 0, s>>>(io->dout, io->dtype, dO, nq);
        k_delta_fast<T><<<(unsigned)((nr + 7) / 8), 256, 0, s>>>((int)nr, D, dO, o, delta);
        if ((e = cudaMemsetAsync(dq, 0, nq * 4, s)) != cudaSuccess) { st = fail(e, "cudaMemset"); goto done; }
        k_bwd_fast<T, D><<<dim3((g.T + kTile - 1) / kTile, g.B * g.Hkv), 128, bwd_smem, s>>>(g, q, k, v, dO, lse, delta,
                                                                                            dq, dk, dv);
        if ((e = cudaGetLastError()) != cudaSuccess) { st = fail(e, "the backward"); goto done; }
    }
    if (tiles &&
        ((e = cudaMemcpyAsync(tiles->row_max, rmax, nt * 8, cudaMemcpyDeviceToHost, s)) ||
         (e = cudaMemcpyAsync(tiles->tie_count, tc, nt * 4, cudaMemcpyDeviceToHost, s)) ||
         (e = cudaMemcpyAsync(tiles->tie_count_eps, tce, nt * 4, cudaMemcpyDeviceToHost, s)) ||
         (e = cudaMemcpyAsync(tiles->pbar_one, po, nt * 4, cudaMemcpyDeviceToHost, s)))) {
        st = fail(e, "copying the tile statistics out");
        goto done;
    }
    if ((e = cudaStreamSynchronize(s)) != cudaSuccess) st = fail(e, "running the kernels");
#undef ALLOC
done:
    cudaStreamSynchronize(s);
    for (int i = 0; i < np; i++) cudaFree(ptr[i]);
    return st;
}

} // namespace

extern "C" tsc_status_t tsc_attn_cuda_run_fast(const tsc_policy_t *pol, const tsc_attn_dims_t *dims,
                                               const tsc_attn_cuda_io_t *io, tsc_attn_tile_stats_t *tiles,
                                               void *stream) {
    if (!pol || !dims || !io || !io->q || !io->k || !io->v)
        return tsc_error_set(TSC_ERR_ARG, "attention (cuda fast): NULL policy, dims or input");
    if (dims->B < 1 || dims->H < 1 || dims->Hkv < 1 || dims->T < 1 || dims->H % dims->Hkv || !(dims->scale > 0))
        return tsc_error_set(TSC_ERR_ARG, "attention (cuda fast): bad dims");
    if (dims->D != 64 && dims->D != 128)
        return tsc_error_set(TSC_ERR_UNSUPPORTED, "attention (cuda fast): head dimension %d (the fast kernels take "
                             "64 or 128)", dims->D);
    const tsc_format_t f = pol->fmt[TSC_STAGE_Q];
    if (f != TSC_FMT_BF16 && f != TSC_FMT_FP16)
        return tsc_error_set(TSC_ERR_UNSUPPORTED, "attention (cuda fast): the tensor-core kernels take BF16 or FP16 "
                             "inputs; the policy's q stage is %s", tsc_format_name(f));
    if (tiles && (tiles->B != dims->B || tiles->H != dims->H || tiles->T != dims->T || tiles->block_k != 64))
        return tsc_error_set(TSC_ERR_ARG, "attention (cuda fast): tile statistics must be for B, H, T and 64-key "
                             "tiles (the fast kernels' tile)");
    if (!tsc_cuda_available()) return tsc_error_set(TSC_ERR_UNSUPPORTED, "attention (cuda fast): %s", tsc_cuda_describe());
    tsc_attn_tile_stats_reset(tiles);
    const fdims g = {dims->B, dims->H, dims->Hkv, dims->T, dims->D, dims->causal != 0, (float)dims->scale};
    cudaStream_t s = (cudaStream_t)stream;
    if (f == TSC_FMT_BF16)
        return dims->D == 64 ? run_fast<__nv_bfloat16, 64>(g, io, tiles, s) : run_fast<__nv_bfloat16, 128>(g, io, tiles, s);
    return dims->D == 64 ? run_fast<__half, 64>(g, io, tiles, s) : run_fast<__half, 128>(g, io, tiles, s);
}
