/* attention_cuda.cu: the exact mode of tsc_attn_cuda.h, and the "cuda" backend of the registry.
 *
 * One thread per chain of rounded operations, each running a function of
 * attn_rowwise_internal.h (the same source the CPU backend cpu-rowwise runs, checked against the
 * reference in CI). Compiled with -fmad=false (CMakeLists.txt): nvcc would otherwise contract
 * a·b + c into one fma where the reference rounds the product first. Division and sqrt are
 * IEEE-rounded (nvcc's defaults without --use_fast_math), and denormals are kept (no -ftz).
 *
 * Scratch per query row ((3·Bc + 3·D) floats) lives in global memory, rows side by side: slow
 * (uncoalesced) but the exact mode is for checking, not for speed. */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_internal.h"
#include "tsc_attn_cuda.h"

namespace {

const int kThreads = 128;

unsigned blocks_for(size_t n) { return (unsigned)((n + kThreads - 1) / kThreads); }

__device__ float load_elem(const void *in, int dtype, size_t i) {
    if (dtype == TSC_CUDA_BF16) return __uint_as_float((unsigned)((const unsigned short *)in)[i] << 16);
    if (dtype == TSC_CUDA_F16) return __half2float(((const __half *)in)[i]);
    return ((const float *)in)[i];
}

__global__ void k_load(tsc_rw_pol_t p, int stage, const void *in, int dtype, float *out, size_t n) {
    const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = tsc_rw_load(&p, stage, load_elem(in, dtype, i));
}

/* What every per-row kernel needs to find its head. */
struct heads_t {
    int BH, H, Hkv;
    size_t scr; /* scratch floats per row */
};

__device__ size_t kv_of(const heads_t &g, int bh, size_t TD) {
    const int b = bh / g.H, h = bh % g.H, hk = h / (g.H / g.Hkv);
    return ((size_t)b * g.Hkv + hk) * TD;
}

__global__ void k_fwd(tsc_rw_pol_t p, heads_t g, const float *q, const float *k, const float *v, float *o,
                      float *lse, double *rmax, int32_t *tc, int32_t *tce, int32_t *po, int n_kt, float *scratch,
                      tsc_rw_census_t *cen, int cen_fmt) {
    const size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (r >= (size_t)g.BH * p.T) return;
    const int bh = (int)(r / p.T), t = (int)(r % p.T);
    const size_t TD = (size_t)p.T * p.D, qo = (size_t)bh * TD, ko = kv_of(g, bh, TD);
    tsc_rw_tiles_t tl;
    tl.row_max = rmax ? rmax + r * n_kt : 0;
    tl.tie_count = tc ? tc + r * n_kt : 0;
    tl.tie_count_eps = tce ? tce + r * n_kt : 0;
    tl.pbar_one = po ? po + r * n_kt : 0;
    tsc_rw_fwd_row(&p, q + qo + (size_t)t * p.D, k + ko, v + ko, t, o + qo + (size_t)t * p.D, lse ? lse + r : 0,
                   rmax ? &tl : 0, scratch + r * g.scr, cen ? cen + r : 0, cen_fmt);
}

__global__ void k_delta(tsc_rw_pol_t p, heads_t g, const float *q, const float *k, const float *v, const float *dO,
                        const float *osrc, const float *lse, float *delta) {
    const size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (r >= (size_t)g.BH * p.T) return;
    const int bh = (int)(r / p.T), t = (int)(r % p.T);
    const size_t TD = (size_t)p.T * p.D, qo = (size_t)bh * TD, ko = kv_of(g, bh, TD), ro = qo + (size_t)t * p.D;
    delta[r] = tsc_rw_delta_row(&p, q + ro, k + ko, v + ko, dO + ro, osrc ? osrc + ro : 0, lse[r], t);
}

__global__ void k_dq(tsc_rw_pol_t p, heads_t g, const float *q, const float *k, const float *v, const float *dO,
                     const float *lse, const float *delta, float *dq, float *scratch) {
    const size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (r >= (size_t)g.BH * p.T) return;
    const int bh = (int)(r / p.T), t = (int)(r % p.T);
    const size_t TD = (size_t)p.T * p.D, qo = (size_t)bh * TD, ko = kv_of(g, bh, TD), ro = qo + (size_t)t * p.D;
    tsc_rw_dq_row(&p, q + ro, k + ko, v + ko, dO + ro, lse[r], delta[r], t, dq + ro, scratch + r * g.scr);
}

/* one thread per (query head, key): this query head's dK, dV of the key */
__global__ void k_dkdv(tsc_rw_pol_t p, heads_t g, const float *q, const float *k, const float *v, const float *dO,
                       const float *lse, const float *delta, float *dk_all, float *dv_all, float *scratch) {
    const size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (r >= (size_t)g.BH * p.T) return;
    const int bh = (int)(r / p.T), j = (int)(r % p.T);
    const size_t TD = (size_t)p.T * p.D, qo = (size_t)bh * TD, ko = kv_of(g, bh, TD);
    tsc_rw_dkdv_key(&p, q + qo, k + ko, v + ko, dO + qo, lse + (size_t)bh * p.T, delta + (size_t)bh * p.T, j,
                    dk_all + qo + (size_t)j * p.D, dv_all + qo + (size_t)j * p.D, scratch + r * g.scr);
}

/* one thread per element of a kv head's gradient: the group's sum */
__global__ void k_gqa(tsc_rw_pol_t p, int B, int H, int Hkv, const float *all, float *out) {
    const size_t TD = (size_t)p.T * p.D, n = (size_t)B * Hkv * TD;
    const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const size_t bk = i / TD, e = i % TD;
    const int b = (int)(bk / Hkv), hk = (int)(bk % Hkv), G = H / Hkv;
    out[i] = tsc_rw_gqa_sum(&p, all + ((size_t)b * H + (size_t)hk * G) * TD + e, TD, G);
}

/* Device allocations of one run, freed together. */
struct pool_t {
    void *ptr[24];
    int n;
};

tsc_status_t cuda_fail(cudaError_t e, const char *what) {
    return tsc_error_set(e == cudaErrorMemoryAllocation ? TSC_ERR_NOMEM : TSC_ERR_IO, "attention (cuda): %s: %s",
                         what, cudaGetErrorString(e));
}

template <typename T> tsc_status_t pool_alloc(pool_t *pl, T **out, size_t n) {
    *out = 0;
    if (n == 0) return TSC_OK;
    void *p = 0;
    cudaError_t e = cudaMalloc(&p, n * sizeof(T));
    if (e != cudaSuccess) return cuda_fail(e, "cudaMalloc");
    pl->ptr[pl->n++] = p;
    *out = (T *)p;
    return TSC_OK;
}

void pool_free(pool_t *pl) {
    for (int i = 0; i < pl->n; i++) cudaFree(pl->ptr[i]);
    pl->n = 0;
}

tsc_status_t launched(const char *what) {
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? TSC_OK : cuda_fail(e, what);
}

int cached_avail = -1;
char describe_buf[160];

} // namespace

extern "C" int tsc_cuda_available(void) {
    if (cached_avail < 0) {
        int n = 0;
        cached_avail = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
        cudaGetLastError(); /* clear the error of a machine without a driver */
    }
    return cached_avail;
}

extern "C" const char *tsc_cuda_describe(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(describe_buf, sizeof describe_buf, "no CUDA device (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        cudaGetLastError();
        return describe_buf;
    }
    cudaDeviceProp pr;
    if (cudaGetDeviceProperties(&pr, 0) != cudaSuccess) return "a CUDA device whose properties cannot be read";
    snprintf(describe_buf, sizeof describe_buf, "%s, sm_%d%d, %.1f GiB", pr.name, pr.major, pr.minor,
             (double)pr.totalGlobalMem / (1u << 30));
    return describe_buf;
}

#define TRY(x)                                                                                                   \
    do {                                                                                                       \
        if ((st = (x)) != TSC_OK) goto done;                                                                   \
    } while (0)

static tsc_status_t run_exact(const tsc_policy_t *pol, const tsc_attn_dims_t *dims, const tsc_attn_cuda_io_t *io,
                              tsc_attn_tile_stats_t *tiles, tsc_attn_census_t *census, tsc_format_t census_fmt,
                              void *stream) {
    if (!pol || !dims || !io || !io->q || !io->k || !io->v)
        return tsc_error_set(TSC_ERR_ARG, "attention (cuda): NULL policy, dims or input");
    if (dims->B < 1 || dims->H < 1 || dims->Hkv < 1 || dims->T < 1 || dims->D < 1 || dims->H % dims->Hkv ||
        !(dims->scale > 0) || (size_t)dims->T * dims->D > ((size_t)1 << 31))
        return tsc_error_set(TSC_ERR_ARG, "attention (cuda): bad dims B=%d H=%d Hkv=%d T=%d D=%d", dims->B,
                             dims->H, dims->Hkv, dims->T, dims->D);
    if (io->dtype != TSC_CUDA_F32 && io->dtype != TSC_CUDA_BF16 && io->dtype != TSC_CUDA_F16)
        return tsc_error_set(TSC_ERR_ARG, "attention (cuda): dtype %d is not F32, BF16 or F16", (int)io->dtype);
    if (tiles && (tiles->B != dims->B || tiles->H != dims->H || tiles->T != dims->T ||
                  tiles->block_k != pol->block_k || !tiles->row_max))
        return tsc_error_set(TSC_ERR_ARG, "attention (cuda): tile statistics do not fit the dims and policy");
    tsc_status_t st = tsc_policy_validate(pol);
    if (st != TSC_OK) return st;
    if (!tsc_cuda_available()) return tsc_error_set(TSC_ERR_UNSUPPORTED, "attention (cuda): %s", tsc_cuda_describe());
    tsc_rw_pol_t p, hp;
    if ((st = tsc_rw_policy(pol, dims, &p)) != TSC_OK) return st;
    tsc_rw_policy_hp(&p, &hp);
    tsc_attn_tile_stats_reset(tiles);

    cudaStream_t s = (cudaStream_t)stream;
    const int B = dims->B, H = dims->H, Hkv = dims->Hkv, T = dims->T, D = dims->D;
    const size_t TD = (size_t)T * D, nq = (size_t)B * H * TD, nk = (size_t)B * Hkv * TD, nr = (size_t)B * H * T;
    const int n_kt = (T + p.Bc - 1) / p.Bc;
    const size_t nt = nr * n_kt;
    const int bwd = io->dout != 0, grads = bwd && (io->dq || io->dk || io->dv);
    heads_t g = {B * H, H, Hkv, 3 * (size_t)p.Bc + 3 * (size_t)D};
    pool_t pl;
    pl.n = 0;
    float *q, *k, *v, *o, *lse, *scr, *dO = 0, *ohp = 0, *delta = 0, *dq = 0, *dk_all = 0, *dv_all = 0;
    double *rmax = 0;
    int32_t *tc = 0, *tce = 0, *po = 0;
    tsc_rw_census_t *cen = 0, *hcen = 0;
    const int cen_fmt = (int)census_fmt;
    cudaError_t e;
    TRY(pool_alloc(&pl, &q, nq));
    TRY(pool_alloc(&pl, &k, nk));
    TRY(pool_alloc(&pl, &v, nk));
    TRY(pool_alloc(&pl, &o, nq));
    TRY(pool_alloc(&pl, &lse, nr));
    TRY(pool_alloc(&pl, &scr, nr * g.scr));
    if (tiles) {
        TRY(pool_alloc(&pl, &rmax, nt));
        TRY(pool_alloc(&pl, &tc, nt));
        TRY(pool_alloc(&pl, &tce, nt));
        TRY(pool_alloc(&pl, &po, nt));
        /* rows never visit some tiles: those keep "not visited" (NaN / -1), as on the CPU */
        if ((e = cudaMemcpyAsync(rmax, tiles->row_max, nt * sizeof(double), cudaMemcpyHostToDevice, s)) ||
            (e = cudaMemcpyAsync(tc, tiles->tie_count, nt * 4, cudaMemcpyHostToDevice, s)) ||
            (e = cudaMemcpyAsync(tce, tiles->tie_count_eps, nt * 4, cudaMemcpyHostToDevice, s)) ||
            (e = cudaMemcpyAsync(po, tiles->pbar_one, nt * 4, cudaMemcpyHostToDevice, s))) {
            st = cuda_fail(e, "copying the tile statistics in");
            goto done;
        }
    }
    k_load<<<blocks_for(nq), kThreads, 0, s>>>(p, TSC_RW_Q, io->q, io->dtype, q, nq);
    k_load<<<blocks_for(nk), kThreads, 0, s>>>(p, TSC_RW_K, io->k, io->dtype, k, nk);
    k_load<<<blocks_for(nk), kThreads, 0, s>>>(p, TSC_RW_V, io->v, io->dtype, v, nk);
    TRY(launched("loading q, k, v"));
    if (census) {
        TRY(pool_alloc(&pl, &cen, nr));
        if ((e = cudaMemsetAsync(cen, 0, nr * sizeof *cen, s)) != cudaSuccess) {
            st = cuda_fail(e, "cudaMemset");
            goto done;
        }
    }
    k_fwd<<<blocks_for(nr), kThreads, 0, s>>>(p, g, q, k, v, o, lse, rmax, tc, tce, po, n_kt, scr, cen, cen_fmt);
    TRY(launched("the forward"));
    if (bwd) {
        TRY(pool_alloc(&pl, &dO, nq));
        TRY(pool_alloc(&pl, &delta, nr));
        k_load<<<blocks_for(nq), kThreads, 0, s>>>(p, TSC_RW_DO, io->dout, io->dtype, dO, nq);
        const float *osrc = o;
        if (p.delta_src == TSC_RW_DELTA_HP) { /* δ from an all-FP32 forward's O */
            TRY(pool_alloc(&pl, &ohp, nq));
            k_fwd<<<blocks_for(nr), kThreads, 0, s>>>(hp, g, q, k, v, ohp, 0, 0, 0, 0, 0, n_kt, scr, 0, 0);
            osrc = ohp;
        } else if (p.delta_src == TSC_RW_DELTA_DPP) {
            osrc = 0;
        }
        k_delta<<<blocks_for(nr), kThreads, 0, s>>>(p, g, q, k, v, dO, osrc, lse, delta);
        TRY(launched("delta"));
        if (grads) {
            dq = io->dq;
            if (!dq) TRY(pool_alloc(&pl, &dq, nq));
            TRY(pool_alloc(&pl, &dk_all, nq));
            TRY(pool_alloc(&pl, &dv_all, nq));
            k_dq<<<blocks_for(nr), kThreads, 0, s>>>(p, g, q, k, v, dO, lse, delta, dq, scr);
            k_dkdv<<<blocks_for(nr), kThreads, 0, s>>>(p, g, q, k, v, dO, lse, delta, dk_all, dv_all, scr);
            if (io->dk) k_gqa<<<blocks_for(nk), kThreads, 0, s>>>(p, B, H, Hkv, dk_all, io->dk);
            if (io->dv) k_gqa<<<blocks_for(nk), kThreads, 0, s>>>(p, B, H, Hkv, dv_all, io->dv);
            TRY(launched("the backward"));
        }
    }
    if ((io->o && (e = cudaMemcpyAsync(io->o, o, nq * 4, cudaMemcpyDeviceToDevice, s))) ||
        (io->lse && (e = cudaMemcpyAsync(io->lse, lse, nr * 4, cudaMemcpyDeviceToDevice, s))) ||
        (io->delta && delta && (e = cudaMemcpyAsync(io->delta, delta, nr * 4, cudaMemcpyDeviceToDevice, s)))) {
        st = cuda_fail(e, "copying the outputs");
        goto done;
    }
    if (tiles &&
        ((e = cudaMemcpyAsync(tiles->row_max, rmax, nt * sizeof(double), cudaMemcpyDeviceToHost, s)) ||
         (e = cudaMemcpyAsync(tiles->tie_count, tc, nt * 4, cudaMemcpyDeviceToHost, s)) ||
         (e = cudaMemcpyAsync(tiles->tie_count_eps, tce, nt * 4, cudaMemcpyDeviceToHost, s)) ||
         (e = cudaMemcpyAsync(tiles->pbar_one, po, nt * 4, cudaMemcpyDeviceToHost, s)))) {
        st = cuda_fail(e, "copying the tile statistics out");
        goto done;
    }
    if ((e = cudaStreamSynchronize(s)) != cudaSuccess) {
        st = cuda_fail(e, "running the kernels");
        goto done;
    }
    if (census) { /* per head, rows in order: the same sums on every run */
        hcen = (tsc_rw_census_t *)malloc(nr * sizeof *hcen);
        if (!hcen) {
            st = tsc_error_set(TSC_ERR_NOMEM, "attention (cuda): out of memory for the census");
            goto done;
        }
        if ((e = cudaMemcpy(hcen, cen, nr * sizeof *hcen, cudaMemcpyDeviceToHost)) != cudaSuccess) {
            st = cuda_fail(e, "copying the census out");
            goto done;
        }
        for (int bh = 0; bh < B * H; bh++) {
            tsc_attn_census_t c = {0, 0, 0, 0.0, 0.0};
            for (int t = 0; t < T; t++) {
                const tsc_rw_census_t *x = &hcen[(size_t)bh * T + t];
                c.additions += x->additions;
                c.events_neg += x->events_neg;
                c.events_pos += x->events_pos;
                c.err_neg += x->err_neg;
                c.err_pos += x->err_pos;
            }
            census[bh] = c;
        }
    }
done:
    cudaStreamSynchronize(s);
    free(hcen);
    pool_free(&pl);
    return st;
}

extern "C" tsc_status_t tsc_attn_cuda_run(const tsc_policy_t *pol, const tsc_attn_dims_t *dims,
                                          const tsc_attn_cuda_io_t *io, tsc_attn_tile_stats_t *tiles, void *stream) {
    return run_exact(pol, dims, io, tiles, NULL, TSC_FMT_FP32, stream);
}

extern "C" tsc_status_t tsc_attn_cuda_census(const tsc_policy_t *pol, const tsc_attn_dims_t *dims,
                                             const tsc_attn_cuda_io_t *io, tsc_format_t fmt,
                                             tsc_attn_census_t *census, void *stream) {
    if (!census) return tsc_error_set(TSC_ERR_ARG, "attention (cuda): no census array");
    if (fmt != TSC_FMT_BF16 && fmt != TSC_FMT_FP16)
        return tsc_error_set(TSC_ERR_UNSUPPORTED, "attention (cuda): the census rounds to bf16 or fp16, not %s",
                             tsc_format_name(fmt));
    tsc_attn_cuda_io_t fwd = *io;
    fwd.dout = 0;
    return run_exact(pol, dims, &fwd, NULL, census, fmt, stream);
}

/* ---- the registry's "cuda" backend: host float arrays in and out ---- */

namespace {

int backend_available(void) { return tsc_cuda_available(); }

tsc_status_t backend_run(const tsc_policy_t *pol, const tsc_attn_dims_t *dims, const tsc_attn_io_t *io,
                         const tsc_attn_opts_t *opts) {
    const size_t TD = (size_t)dims->T * dims->D, nq = (size_t)dims->B * dims->H * TD,
                 nk = (size_t)dims->B * dims->Hkv * TD, nr = (size_t)dims->B * dims->H * dims->T;
    const void *hin[4] = {io->q, io->k, io->v, io->dout};
    const size_t nin[4] = {nq, nk, nk, nq};
    void *hout[6] = {io->o, io->lse, io->delta, io->dq, io->dk, io->dv};
    const size_t nout[6] = {nq, nr, nr, nq, nk, nk};
    pool_t pl;
    pl.n = 0;
    float *din[4] = {0, 0, 0, 0}, *dout[6] = {0, 0, 0, 0, 0, 0};
    tsc_status_t st = TSC_OK;
    cudaError_t e;
    for (int i = 0; i < 4; i++)
        if (hin[i]) {
            TRY(pool_alloc(&pl, &din[i], nin[i]));
            if ((e = cudaMemcpy(din[i], hin[i], nin[i] * 4, cudaMemcpyHostToDevice)) != cudaSuccess) {
                st = cuda_fail(e, "copying the inputs in");
                goto done;
            }
        }
    for (int i = 0; i < 6; i++)
        if (hout[i]) TRY(pool_alloc(&pl, &dout[i], nout[i]));
    {
        tsc_attn_cuda_io_t dio = {TSC_CUDA_F32, din[0], din[1], din[2], din[3],
                                  dout[0], dout[1], dout[2], dout[3], dout[4], dout[5]};
        TRY(opts->mode == TSC_ATTN_FAST ? tsc_attn_cuda_run_fast(pol, dims, &dio, opts->tiles, 0)
                                        : tsc_attn_cuda_run(pol, dims, &dio, opts->tiles, 0));
    }
    for (int i = 0; i < 6; i++)
        if (hout[i] && (e = cudaMemcpy(hout[i], dout[i], nout[i] * 4, cudaMemcpyDeviceToHost)) != cudaSuccess) {
            st = cuda_fail(e, "copying the outputs out");
            goto done;
        }
done:
    pool_free(&pl);
    return st;
}

} // namespace

extern "C" const tsc_attn_backend_t tsc_attn_backend_cuda = {
    "cuda", "CUDA: exact mode (the reference's bits, one GPU thread per chain) and fast mode (tensor cores)",
    TSC_ATTN_CAP_F32 | TSC_ATTN_CAP_EXACT | TSC_ATTN_CAP_FAST | TSC_ATTN_CAP_FORWARD | TSC_ATTN_CAP_BACKWARD | TSC_ATTN_CAP_TILE_STATS,
    backend_available, backend_run};
