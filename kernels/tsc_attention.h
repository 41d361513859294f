/* tsc_attention.h: FA2-structured attention forward and backward on the CPU, under a
 * precision policy (tsc_policy.h). This is the definition of each policy's arithmetic: every
 * stage value is rounded exactly where the formulas below say, reductions run sequentially
 * by key index (by query index for dK/dV), every product-accumulate step is one fused
 * multiply-add, so `explain` can replay any single element. OpenMP runs across heads.
 *
 *   tsc_policy_t pol; tsc_policy_parse("bf16-fa2", &pol);
 *   tsc_attn_dims_t dims = {.B = 1, .H = 12, .Hkv = 12, .T = 1024, .D = 64, .causal = 1,
 *                           .scale = 0.125};
 *   tsc_attn_io_t io = {.dtype = TSC_ATTN_F32, .q = q, .k = k, .v = v, .dout = dO,
 *                       .o = o, .lse = lse, .delta = delta, .dq = dq, .dk = dk, .dv = dv};
 *   if (tsc_attn_run(&pol, &dims, &io, NULL, 0) != TSC_OK) puts(tsc_error_last());
 *
 * Notation: row t (query), key j, tile j' (keys [j'·Bc, (j'+1)·Bc), the last tile may be
 * short), R_X(x) = x rounded to stage X's format and mode, fma(a,b,c) = a·b + c rounded once
 * to the ACC format (FP32 in every preset but fp64). Arithmetic not named below runs in the
 * compute type (FP32, or FP64 when any stage is FP64; tsc_policy_uses_fp64) and exp is
 * tsc_attn_expf (FP32, ≤ 2 ulp, exp(0) = 1 exactly) or libm exp (FP64).
 *
 * Forward, per row t, m = −inf, ℓ = 0, Ō = 0, then for each key tile j' holding unmasked keys:
 *   S_j   = R_S(R_S(Σ_d fma q[t,d]·k[j,d]) · α)                    (causal: j > t is masked)
 *   r_m   = max S_j over the tile (R_ROWMAX; the sign of a zero max follows a fixed 16-lane
 *           order); m_tile = r_m, or Algorithm 3 (below)
 *   m_new = max(m, m_tile);  c = exp(R_EXPARG(m − m_new)) (0 on the first tile)
 *   P̄_j   = exp(R_EXPARG(S_j − m_new));  a_j = R_PBAR_PV(P̄_j);  b_j = R_PBAR_L(P̄_j)
 *   unfused (PyTorch):  pv = R_PV(Σ_j fma a_j·v[j,:]);   Ō = R_OACC(R_OACC(c·Ō) + pv)
 *                       s  = Σ_j b_j (ACC, from 0);      ℓ = R_L(R_L(c·ℓ) + s)
 *   fused (FA2 CUDA):   Ō = R_OACC(c·Ō); then per key Ō = R_PV(fma(a_j, v[j,:], Ō))
 *                       ℓ = R_L(c·ℓ);    then per key ℓ = R_L(ℓ + b_j)
 *   m = m_new.  At the end O = R_O(Ō / ℓ), LSE = R_LSE(m + log ℓ).
 * Backward, δ first (per row): δ = R_DELTA(Σ_d fma dO[t,d]·O_src[t,d]) with O_src the returned
 * O (lp), an all-FP32 forward's O (hp), or δ = R_DELTA(Σ_j fma dP_j·P_j) over keys (dpp).
 * Then per query tile i', key tile j', row t in i', key j in j' (unmasked):
 *   S_j as forward;  P_j = exp(R_EXPARG(S_j − LSE_t));  p_j = R_P(P_j)
 *   dP_j = R_DP(Σ_d fma dO[t,d]·v[j,d]);  dS_j = R_DS((P_j·(dP_j − δ_t))·α)
 *   dV[j,:] gets p_j·dO[t,:],  dK[j,:] gets dS_j·q[t,:],  dQ[t,:] gets dS_j·k[j,:]:
 *   fused: straight into the accumulator, G = R_G(fma(x, y, G)) per product (G = DQ/DK/DV);
 *   unfused: a per-(i',j') tile sum from 0 (ACC), then G = R_G(G + R_G(tile sum)).
 *   At the end each gradient is R_GRAD(G). GQA: a kv head's dK/dV are the R_GRAD-rounded
 *   per-query-head results summed in ACC in head order, then R_GRAD again.
 *
 * Algorithm 3 (+stable, PAPER.md §6), per row and key tile, and its edge cases:
 *   r_s = #{j in tile : S_j ≥ R_ROWMAX(r_m − ε)} (the official code's ≥ test in S's format);
 *   r_s ≤ 1: m_tile = r_m.   r_s > 1: m_tile = β·r_m if r_m > 0, else 0.
 *   - Repeated max of exactly 0, or |r_m| so small that exp(r_m − m_tile) rounds to 1 in the
 *     P̄_PV format (e.g. r_m = 1e-4 under BF16), would leave P̄ = 1 at the ties: when
 *     R_PBAR_PV(exp(R_EXPARG(r_m − m_tile))) is 1, m_tile = r_m + gap instead (gap = 1).
 *   - The same fallback when that value is 0 (r_m ≪ 0, or β·r_m large, would underflow every
 *     entry of the tile and leave ℓ = 0 on a one-tile row).
 *   - Fully masked key tiles of a row (causal) are skipped, as FA2 kernels never visit them.
 *     torch_quirks policies (bf16-torch) visit them like the official code: under +stable
 *     such a tile with more than one key counts as a repeated negative max, m_tile = 0; and
 *     every tile row sum s is clamped to ≥ 1e-10 before it is added to ℓ. (A consequence the
 *     official code shares: under +stable with r_m above ~23, s = Σ e^{S−β·r_m} < 1e-10, the
 *     clamp replaces it and O of that row collapses toward 0; bf16-fa2+stable does not.)
 *   - Ties split across two key tiles are not repeated maxima of either tile: Algorithm 3
 *     leaves P̄ = 1 there (per-tile rule, as printed); trace counts reveal it.
 *   m_new = max(m, m_tile) as usual; the backward is unchanged (it reads LSE).
 * Masked entries: S = −inf in traces, P̄ = P = 0, never touched by rounding.
 * Loop order: rows go in blocks of four so one load of K and V feeds four rows; that only
 * interchanges loops (each output element keeps its own sequential chain above). Stochastic
 * rounding (+sr) draws from one stream per (seed, batch, head, stage, pass), consumed in the
 * reference's loop order, so a seed reproduces bit for bit on every path and thread count.
 * Non-finite inputs propagate (NaN in, NaN out); they are not an error here.
 */
#ifndef TSC_ATTENTION_H
#define TSC_ATTENTION_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_policy.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int B;          /* batch */
    int H;          /* query heads */
    int Hkv;        /* key/value heads; divides H (query head h reads kv head h / (H/Hkv)) */
    int T;          /* sequence length (queries = keys); need not be a multiple of a tile */
    int D;          /* head dimension */
    int causal;     /* 1: key j attends to query t only when j <= t */
    double scale;   /* softmax scale α (> 0), e.g. 1/sqrt(D) */
} tsc_attn_dims_t;

typedef enum { TSC_ATTN_F32 = 0, TSC_ATTN_F64 = 1 } tsc_attn_dtype_t;

/* Inputs and outputs, all row-major, all of element type dtype. Inputs are rounded into the
 * q/k/v/do stage formats on entry (already-rounded values pass unchanged). Outputs are the
 * exact values of their stage formats, stored as float/double. Any output may be NULL (not
 * computed unless needed); with dout == NULL only the forward runs. */
typedef struct {
    tsc_attn_dtype_t dtype;
    const void *q;      /* [B, H, T, D] */
    const void *k;      /* [B, Hkv, T, D] */
    const void *v;      /* [B, Hkv, T, D] */
    const void *dout;   /* [B, H, T, D] upstream gradient dO, or NULL: forward only */
    void *o;            /* [B, H, T, D] out */
    void *lse;          /* [B, H, T] out */
    void *delta;        /* [B, H, T] out, δ as the backward used it (needs dout; with dq, dk
                         * and dv all NULL the backward stops after δ, at a fraction of its cost) */
    void *dq;           /* [B, H, T, D] out (needs dout) */
    void *dk;           /* [B, Hkv, T, D] out (needs dout) */
    void *dv;           /* [B, Hkv, T, D] out (needs dout) */
} tsc_attn_io_t;

/* What a trace records (bit flags). */
enum {
    TSC_TRACE_SCORES = 1, /* s, pbar: [T, T] */
    TSC_TRACE_TILES = 2,  /* tile_max, run_max, l, ties_exact, ties_eps, pbar_one: [T, n_kt] */
    TSC_TRACE_PV = 4      /* pv, oacc: [T, n_kt, D] (large: T·n_kt·D doubles each) */
};

/* Forward intermediates of one (batch, query head), filled by tsc_attn_run. Allocate with
 * tsc_attn_trace_init, set b and h, pass in the traces array; arrays not asked for are NULL.
 * n_kt = ceil(T / block_k) of the policy used at init. Entries of tiles a row never visits
 * (causal, beyond the diagonal) hold NaN / -1. */
typedef struct {
    int b, h;            /* which head to trace (set by the caller) */
    int T, D, block_k, n_kt, flags;
    double *s;           /* [T, T] S as rounded to the S stage; −inf where masked */
    double *pbar;        /* [T, T] P̄ as used in P̄V (a_j above); 0 where masked */
    double *tile_max;    /* [T, n_kt] r_m, the tile row max of S */
    double *run_max;     /* [T, n_kt] m_new, the max P̄ of that tile was taken against */
    double *l;           /* [T, n_kt] ℓ after the tile */
    int32_t *ties_exact; /* [T, n_kt] #{S_j == r_m} in the tile */
    int32_t *ties_eps;   /* [T, n_kt] r_s: #{S_j ≥ R_ROWMAX(r_m − ε)} (ε of the policy, even
                          * without +stable; 1e-3 when the policy has none) */
    int32_t *pbar_one;   /* [T, n_kt] #{a_j == 1} in the tile */
    double *pv;          /* [T, n_kt, D] tile P̄V: unfused R_PV(Σ fma); fused, the same sum
                          * accumulated from 0 in ACC (a side value, not added anywhere) */
    double *oacc;        /* [T, n_kt, D] Ō after the tile */
} tsc_attn_trace_t;

/* Allocates the arrays flags asks for (one allocation each; NaN-filled). TSC_ERR_ARG for bad
 * sizes, TSC_ERR_NOMEM (then *tr is zeroed and owns nothing). Free with tsc_attn_trace_free. */
TSC_API tsc_status_t tsc_attn_trace_init(tsc_attn_trace_t *tr, int T, int D, int block_k, int flags);
TSC_API void tsc_attn_trace_free(tsc_attn_trace_t *tr);  /* NULL and zeroed traces are no-ops */

/* Runs the forward (and, with io->dout, the backward) for every (b, h) under pol.
 * traces: n_traces traces whose (b, h) select heads (each initialised for dims->T, D and
 * pol->block_k), or NULL/0. Returns TSC_ERR_ARG (bad dims, policy, NULL inputs, a trace that
 * does not fit), TSC_ERR_NOMEM; on error outputs are unspecified. Memory: O(T·D) per
 * running thread beyond the outputs, plus for GQA backward an [B, H, T, D] scratch pair. */
TSC_API tsc_status_t tsc_attn_run(const tsc_policy_t *pol, const tsc_attn_dims_t *dims,
                          const tsc_attn_io_t *io, tsc_attn_trace_t *traces, int n_traces);

/* FLOPs counted the usual way (2 per multiply-add of the matrix products; causal counts the
 * unmasked half including the diagonal): forward 4·T'·D per head, backward 10·T'·D per
 * head, T' = number of unmasked (t, j) pairs. */
TSC_API double tsc_attn_flops(const tsc_attn_dims_t *dims, int backward);

/* The FP32 exp of the reference (deterministic, same bits on every path). */
TSC_API float tsc_attn_expf(float x);

/* Selects the SIMD path (1, default where the CPU has AVX-512F/FMA) or the portable one (0);
 * both give identical bits. Returns the previous setting. Not thread-safe: set it before
 * calling tsc_attn_run. tsc_attn_simd_available() says whether the SIMD path exists here. */
TSC_API int tsc_attn_simd_set(int enable);
TSC_API int tsc_attn_simd_available(void);

/* Element-wise checker: element i mismatches when |ref − out| > atol + rtol·|ref|, or when
 * exactly one is NaN, or Inf differs in sign; NaN in both counts as a match only with
 * allow_nan. Reports the count, the worst element (largest excess over its tolerance) and
 * the max abs / max rel errors over finite pairs. Never fails; n == 0 gives zeros. */
typedef struct {
    size_t n, n_mismatch, n_nan;
    size_t worst;              /* index of the worst element (0 when none mismatches) */
    double worst_ref, worst_out;
    double max_abs, max_rel;   /* over finite pairs; rel uses |ref| (pairs with ref 0 skipped) */
    size_t max_abs_at, max_rel_at;
} tsc_compare_t;
TSC_API void tsc_compare_f64(const double *ref, const double *out, size_t n, double atol, double rtol,
                     int allow_nan, tsc_compare_t *res);
TSC_API void tsc_compare_f32(const float *ref, const float *out, size_t n, double atol, double rtol,
                     int allow_nan, tsc_compare_t *res);
/* One line: "N of M mismatch (atol A, rtol R); worst [i] ref X out Y; max abs E at i, max rel
 * E at i". Writes at most size bytes (NUL-terminated) and returns buf. */
TSC_API char *tsc_compare_str(const tsc_compare_t *res, double atol, double rtol, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
