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
 * tsc_attn_expf (FP32; at most 1.0103 ulp from exp wherever the result is a normal number, measured
 * over every such input; exp(0) = 1 exactly) or libm exp (FP64); log (in LSE) is tsc_attn_logf
 * (FP32, correctly rounded; the same bits on a GPU, unlike libm's logf) or libm log (FP64).
 *
 * Forward, per row t, m = −inf, ℓ = 0, Ō = 0, then for each key tile j' holding unmasked keys:
 *   S_j   = R_S(R_S(Σ_d fma q[t,d]·k[j,d]) · α)                    (causal: j > t is masked)
 *   r_m   = max S_j over the tile (R_ROWMAX; the sign of a zero max follows a fixed 16-lane
 *           order); m_tile = r_m, or Algorithm 3 (below)
 *   m_new = max(m, m_tile);  c = exp(R_EXPARG(m − m_new)) (0 on the first tile)
 *   P̄_j   = exp(R_EXPARG(S_j − m_new));  a_j = R_PBAR_PV(P̄_j);  b_j = R_PBAR_L(P̄_j)
 *   unfused (PyTorch):  pv = R_PV(Σ_j fma a_j·v[j,:]);   Ō = R_OACC(R_OACC(c·Ō) + pv)
 *                       s  = Σ_j b_j (ACC, from 0);      ℓ = R_L(R_L_RESCALE(c·ℓ) + s)
 *   fused (FA2 CUDA):   Ō = R_OACC(c·Ō); then per key Ō = R_PV(fma(a_j, v[j,:], Ō))
 *                       ℓ = R_L_RESCALE(c·ℓ); then per key ℓ = R_L(ℓ + b_j)
 *   m = m_new.  At the end O = R_O(Ō / ℓ), LSE = R_LSE(m + log ℓ).
 * The scale (tsc_scale_t): α as written (+scale:s); +scale:s-lp uses R_S(α) in S and R_DS(α) in
 * dS; +scale:qk replaces q, k by R_S(q·√α), R_S(k·√α) on entry, S takes no α, dS no α, and dQ, dK
 * are multiplied by √α just before R_GRAD.
 * Materialized softmax (+materialized: eager PyTorch, SDPA math; every key of a row in one tile),
 * per row t: S_j as above, m = R_ROWMAX(max_j S_j), P̄_j = exp(R_EXPARG(S_j − m)),
 *   ℓ = R_L(Σ_j R_PBAR_L(P̄_j)) (ACC, from 0), P_j = R_P(P̄_j / ℓ) (+norm:div) or R_P(P̄_j · (1/ℓ))
 *   (+norm:recip), a_j = R_PBAR_PV(P_j), O = R_O(R_PV(Σ_j fma a_j·v[j,:])), LSE = R_LSE(m + log ℓ).
 * Backward, δ first (per row): lp: δ = R_DELTA(Σ_d fma dO[t,d]·O[t,d]), or, when the
 * delta-prod stage is narrower than the compute type, δ = R_DELTA(Σ_d R_DELTA_PROD(dO·O)) (ACC);
 * hp: δ = R_DELTA(Σ_d fma dO·O_hp) with O_hp an all-FP32 forward's O; dpp: δ = R_DELTA(Σ_j fma
 * dP_j·P_j) over keys. Then per query tile i', key tile j', row t in i', key j in j' (unmasked):
 *   S_j as forward;  P_j = exp(R_EXPARG_BWD(S_j − LSE_t));  p_j = R_P(P_j)
 *   (materialized: P_j = the forward's R_P(P̄_j / ℓ) recomputed bit for bit, p_j = R_PBAR_PV(P_j))
 *   dP_j = R_DP(Σ_d fma dO[t,d]·v[j,d]);
 *   dS_j = R_DS((P_j·(dP_j − δ_t))·α) (+ds-scale:last), R_DS((P_j·α)·(dP_j − δ_t)) (first), or
 *          R_DS(R_DS(P_j·(dP_j − δ_t))·α) (rounded)
 *   dV[j,:] gets p_j·dO[t,:],  dK[j,:] gets dS_j·q[t,:],  dQ[t,:] gets dS_j·k[j,:]:
 *   fused: straight into the accumulator, G = R_G(fma(x, y, G)) per product (G = DQ/DK/DV);
 *   unfused: a per-(i',j') tile sum from 0 (ACC), then G = R_G(G + R_G(tile sum)).
 *   At the end each gradient is R_GRAD(G). GQA: a kv head's dK/dV are the R_GRAD-rounded
 *   per-query-head results summed in ACC in head order, then R_GRAD again (+gqa-sum:once), or
 *   rounded to GRAD after each addition (+gqa-sum:each); +gqa-sum:wide skips the per-head R_GRAD of dK, dV
 *   (the compute-type values are summed in ACC in head order, then R_GRAD once).
 * Summation order (tsc_sum_order_t). "Σ (ACC, from 0)" above is key (feature) order, one rounded add after
 *   another (+sum:seq). +sum:aten8 and +sum:aten16 (unfused online softmax only) sum the tile's b_j into s and
 *   the products into lp δ as ATen's CPU torch.sum adds a contiguous FP32 row x[0..n) with W = 8 or 16 lanes;
 *   δ's products are formed first, x_d = R_DELTA_PROD(dO·O) (R_ACC when that stage is not narrower):
 *     n < W: rowsum(x, n, 1); else L = rowsum over the n/W vectors (lane-wise adds), then
 *            s = ((0 + x[W⌊n/W⌋]) + …) + x[n−1], then s = (s + L_0) + … + L_{W−1};  result R_ACC(0 + s).
 *     rowsum over N units u (vectors or scalars): accumulators A_k^lev (k < 4, lev < 4) from 0; unit 4i + k
 *       goes to A_k^0; after each group of 2^lp values of i (lp = max(4, ⌈log2⌊N/4⌋⌉ / 4)) A^lev += A^(lev−1),
 *       A^(lev−1) = 0 for lev = 1, 2, 3 in turn, stopping after the first lev with i mod 2^(lp·(lev+1)) ≠ 0;
 *       at the end A^0 += A^1, A^2, A^3; units 4⌊N/4⌋.. go to A_0^0; then A_0^0 += A_1^0, A_2^0, A_3^0.
 *   Every add is rounded to ACC. (pytorch/pytorch v1.13.1, aten/src/ATen/native/cpu/SumKernel.cpp;
 *   docs/PRESETS.md cites the lines.)
 * torch's CPU flash kernel (+vexp:u20x8, +vexp:u20x16; W = 8 or 16 lanes; +exp:e, unfused, online softmax). For a
 *   key tile of width jn (its unmasked keys j < n), P̄_j = exp_u20(R_EXPARG(S_j − m_new)) for j < W⌊jn/W⌋ and
 *   exp(R_EXPARG(S_j − m_new)) for the rest; the tile sum s = the W lane sums (lane l: P̄_l + P̄_{l+W} + …, from 0)
 *   combined by L_l = L_l + L_{l XOR d} for d = W/2, …, 1, then the tail P̄_j added in order (all in ACC);
 *   ℓ = R_L(fma(c, ℓ, s)).  exp_u20(x) (tsc_attn_exp_u20): x clamped to [lo, hi] (bit patterns 0xc2aeac50,
 *   0x42b17218), f = floor(fma(x, log2e, 0.5)) (log2e = 0x3fb8aa3b), r = fma(−f, ln2, x) (ln2 = 0x3f317218),
 *   p = Horner by FMAs on 0.00828929059, 0.0418978221, 0.166676521, 0.499991506, 0.999999701, 1;
 *   result (p · 2^(f−1)) · 2, where 2^(f−1) is the exponent field f − 1 + 127 (0 when that is 0) and 0 for x < lo.
 *
 * The exponent (tsc_exp_t). Everything above is +exp:e. The CUDA kernels read from their source
 * (docs/PRESETS.md) form exp in base 2 with the scale folded in: S' = R_S(Σ_d fma q·k) is kept unscaled (S in
 * traces and tile statistics convert every score, max and threshold back to units of α·QKᵀ, in double: α·S', or
 * ln 2·S for the Flex modes), σ = R_FP32(R_FP32(α)·log2 e) (the host's
 * float × double), ms = R(R(m'·σ) − N) with N the +p-offset (0 unless FP8), and
 *   +exp:exp2-fma   P̄_j = exp2(R_EXPARG(fma(S'_j, σ, −ms)))          (one FFMA: not exactly 1 at the max)
 *   +exp:exp2-mul   P̄_j = exp2(R_EXPARG(R(S'_j·σ) − ms))              (UNFUSE_FMA: exactly 1 at the max)
 *   c = exp2(R_EXPARG(R(m_old − m_new)·σ)); +lazy-rescale:thr=X: when that argument is >= −X, m_new = m_old
 *   and c = 1 (nothing rescaled; P̄ may exceed 1, up to 2^(X+N));
 *   LSE = R_LSE(fma(m', R_FP32(α), log(ℓ·2^−N)));
 *   backward: P_j = exp2(R_EXPARG_BWD(fma(S'_j, σ, −R(LSE·R_FP32(log2 e))))) (exp2-mul: R(S'_j·σ) − ...).
 * exp2 is FP32's correctly rounded 2^x (libm's double exp2 rounded once; the GPU's ex2.approx may differ by an
 * FP32 ULP or two); +exp2-poly:freq=F,res=R,start=S replaces it on the key-tile columns c it selects (32-column
 * fragments f = c/32 with S <= f < ceil(Bc/32) − 1, pairs k = (c mod 32) rounded down to even, k mod F >= F − R)
 * by FA4's emulation (tsc_attn_exp2_fa4): x = max(x, −127), n = floor(x), f = x − n,
 * p = fma(fma(fma(c3, f, c2), f, c1), f, 1) with c1..c3 = 0.695146143436431884765625,
 * 0.227564394474029541015625, 0.077119089663028717041015625, and n added to p's exponent field.
 * The Triton kernels (ℓ takes each tile's sum in one FMA, ℓ = R_L(fma(ℓ, c, Σ_tile R_PBAR_L(P̄_j))), Ō fused):
 *   +exp:exp2-triton  σ = R(R_FP32(α)·R_FP32(1.44269504)); off the diagonal P̄_j = exp2(R_EXPARG(fma(S'_j, σ,
 *                     −R(m'·σ)))), on the diagonal tiles (causal: key tiles from the row's query tile start, of
 *                     block_q rows) exp2(R_EXPARG(R(S'_j·σ) − R(m'·σ))); c = exp2(R_EXPARG(R(m_old'·σ) − R(m_new'·σ)))
 *   +exp:exp2-scaled  S = R_S(R_S(S'·R_FP32(α))·R_FP32(1.44269504)) (log2 units), P̄_j = exp2(R_EXPARG(S_j − m)),
 *                     c = exp2(R_EXPARG(m_old − m_new)); LSE = R_LSE(R(m + log2 ℓ)·ln 2)
 *   +exp:exp2-prescaled the same with Q replaced on entry by R_Q(R(R(Q·α)·1.44269504)) and S = S' (forward and δ
 *                     only: gradients are refused)
 *   +exp:exp2-memeff  (PyTorch's mem-efficient kernel) σ as exp2-triton; every P̄_j = exp2(R_EXPARG(R(S'_j·σ) −
 *                     R(m'·σ))); c as exp2-triton; ℓ = R_L(R_L_RESCALE(ℓ·c) + Σ_tile R_PBAR_L(P̄_j));
 *                     LSE = R_LSE(R(R(m'·σ)/R_FP32(log2 e)) + log ℓ)
 *   backward: exp2-triton as exp2-fma; the two Flex modes P_j = exp2(R_EXPARG_BWD(S_j − R(LSE·log2 e)));
 *   exp2-memeff as exp2-mul.
 * Algorithm 3's ε and gap are in units of α·QKᵀ: the exp2 modes use ε/α and gap/α on S' (ε·log2 e, gap·log2 e for
 * the Flex modes). +norm:recip on an
 * online policy makes O = R_O(Ō·(1/ℓ)) (the CUDA kernels' inv_sum). The exp2 modes need the online softmax and
 * +scale:s; cpu-rowwise and the CUDA backends refuse them (the CPU backends run them).
 *
 * Algorithm 3 (+stable, docs/MECHANISM.md §6), per row and key tile, and its edge cases:
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
 *
 * Backends. The arithmetic above is one definition with several implementations, each a
 * tsc_attn_backend_t (a name, capability bits and a run function) in a registry:
 *   "cpu-ref"   the portable C instance: the reference that defines the bits. Plain C, no
 *               intrinsics (the compiler may vectorise element-wise loops; with explicit fma
 *               and contraction off that cannot change a bit). Rows go in blocks of four as
 *               described above: that order is part of the definition (+sr streams).
 *   "cpu-simd"  the same template compiled for AVX-512 + FMA with hand-written register-
 *               blocked loops (x86-64 GCC builds; runs only where the CPU has AVX-512).
 *               FP64-compute policies run the reference's double instance.
 *   "cpu-rowwise" the CUDA exact mode's per-row functions (attn_rowwise_internal.h) run on the
 *               CPU: how a machine without a GPU checks the GPU's order of operations. Exact
 *               only, float I/O, no traces, no +sr/+materialized/FP8/FP64 stages; slow.
 *   "cuda"      registered only in a build with CUDA (TSC_HAVE_CUDA; tsc_attn_cuda.h): exact
 *               mode (the reference's bits) and fast mode (tensor cores); available() when a
 *               GPU is present.
 * tsc_attn_run uses the default backend: cpu-simd where it runs and tsc_attn_simd_set(1) (the
 * default), else cpu-ref; tsc_attn_run_with picks one and adds the options below. Exact mode
 * (the default) promises the reference's bits in every output and tile statistic; fast mode
 * lets a backend reorder or fuse arithmetic (results then agree within rounding error only,
 * and tie counts may differ). Both CPU backends are exact in either mode.
 *
 *   const tsc_attn_backend_t *be = tsc_attn_backend_get("cpu-ref");
 *   tsc_attn_tile_stats_t ts;
 *   tsc_attn_tile_stats_init(&ts, dims.B, dims.H, dims.T, pol.block_k);
 *   tsc_attn_opts_t opt = {.mode = TSC_ATTN_EXACT, .tiles = &ts};
 *   if (tsc_attn_run_with(be, &pol, &dims, &io, &opt) != TSC_OK) puts(tsc_error_last());
 *
 * Tile statistics (tsc_attn_tile_stats_t) are backend-neutral: per (batch, query head, row t,
 * key tile j'), the numbers an FA kernel can count in registers, stored as the format v1 dump
 * datasets tiles/<name> [B, H, T, n_key_tiles] (docs/FORMAT.md):
 *   row_max        r_m, the tile row max of S (R_ROWMAX)                    tiles/row_max
 *   tie_count      #{S_j == r_m} in the tile                                tiles/tie_count
 *   tie_count_eps  r_s = #{S_j ≥ R_ROWMAX(r_m − ε)} (ε of the policy; 1e-3 without
 *                  +stable)                                                 tiles/tie_count_eps
 *   pbar_one       #{a_j == 1}: keys whose P̄ (P̄V operand) is exactly 1    tiles/pbar_one
 * Tiles a row never visits (causal, beyond the diagonal; torch_quirks visits them) hold NaN /
 * -1. The T×T trace (tsc_attn_trace_t: S, P̄, running max, ℓ, P̄V, Ō per tile) is a CPU-only
 * debug facility (capability TSC_ATTN_CAP_TRACE); its per-tile counts and the tile statistics
 * are written by the same statement, so they cannot disagree.
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

/* Forward intermediates of one (batch, query head), filled by tsc_attn_run: a CPU-only debug
 * facility (backends with TSC_ATTN_CAP_TRACE); for the per-tile counts of every head use
 * tsc_attn_tile_stats_t, which any backend can fill (ties_exact, ties_eps and pbar_one here
 * are its tie_count, tie_count_eps and pbar_one, written by the same statement). Allocate with
 * tsc_attn_trace_init, set b and h, pass in the traces array; arrays not asked for are NULL.
 * n_kt = ceil(T / block_k) of the policy used at init. Entries of tiles a row never visits
 * (causal, beyond the diagonal) hold NaN / -1. */
/* Row-window traces (long contexts): a trace made by tsc_attn_trace_init_rows holds only
 * `rows` rows (a multiple of TSC_ATTN_TRACE_ROW_BLOCK): row t lives in slot t % rows of every
 * array below (s, pbar [rows, T]; the tile arrays [rows, n_kt]; pv, oacc [rows, n_kt, D]) plus
 * lse [rows]. The forward runs rows in blocks of TSC_ATTN_TRACE_ROW_BLOCK, and up to
 * TSC_ATTN_ROW_GROUP rows (as many as the window holds) visit each key tile together: it resets
 * the group's slots (−inf / 0 / NaN / -1) before the group and, once the group is complete (every
 * tile visited, lse written), calls row_fn(row_ctx, tr, t0, nr) for each of its blocks of rows
 * t0 .. t0+nr-1 in order, on the thread that runs the head. The consumer reads those rows there;
 * they are overwritten later. Memory O(rows·T) instead of O(T²): the values are the full trace's,
 * bit for bit, whatever the window. A window of TSC_ATTN_ROW_GROUP rows runs as fast as no trace;
 * a smaller one makes each block read K and V alone (at long T, from memory: slower). */
enum { TSC_ATTN_TRACE_ROW_BLOCK = 4, TSC_ATTN_ROW_GROUP = 32 };
struct tsc_attn_trace;
typedef void (*tsc_attn_trace_row_fn)(void *ctx, const struct tsc_attn_trace *tr, int t0, int nr);

typedef struct tsc_attn_trace {
    int b, h;            /* which head to trace (set by the caller) */
    int T, D, block_k, n_kt, flags;
    int rows;            /* rows held: T (a full trace) or the window (tsc_attn_trace_init_rows) */
    tsc_attn_trace_row_fn row_fn; /* window mode: called per completed row block; else NULL */
    void *row_ctx;
    double *lse;         /* window mode: [rows] LSE of each held row (R_LSE); else NULL */
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
/* A row-window trace (see above): rows a positive multiple of TSC_ATTN_TRACE_ROW_BLOCK (a
 * window larger than T holds every row), fn not NULL; T up to 2^24. Same errors. */
TSC_API tsc_status_t tsc_attn_trace_init_rows(tsc_attn_trace_t *tr, int T, int D, int block_k, int flags,
                                              int rows, tsc_attn_trace_row_fn fn, void *ctx);
TSC_API void tsc_attn_trace_free(tsc_attn_trace_t *tr);  /* NULL and zeroed traces are no-ops */

/* Runs the forward (and, with io->dout, the backward) for every (b, h) under pol, on the
 * default backend (tsc_attn_backend_default; equivalent to tsc_attn_run_with(NULL, ...)).
 * traces: n_traces traces whose (b, h) select heads (each initialised for dims->T, D and
 * pol->block_k), or NULL/0. Returns TSC_ERR_ARG (bad dims, policy, NULL inputs, a trace that
 * does not fit), TSC_ERR_NOMEM; on error outputs are unspecified. Memory: O(T·D) per
 * running thread beyond the outputs, plus for GQA backward an [B, H, T, D] scratch pair. */
TSC_API tsc_status_t tsc_attn_run(const tsc_policy_t *pol, const tsc_attn_dims_t *dims,
                          const tsc_attn_io_t *io, tsc_attn_trace_t *traces, int n_traces);

/* ---- tile statistics ---- */

/* Per-tile statistics of the forward for every (b, h), [B, H, T, n_kt] row-major each,
 * n_kt = ceil(T / block_k) (see the overview). Allocate with tsc_attn_tile_stats_init; a run
 * first resets every entry to NaN / -1, then fills the tiles each row visits. */
typedef struct {
    int B, H, T, block_k, n_kt;
    double *row_max;         /* r_m */
    int32_t *tie_count;      /* #{S_j == r_m} */
    int32_t *tie_count_eps;  /* r_s */
    int32_t *pbar_one;       /* #{a_j == 1} */
} tsc_attn_tile_stats_t;

/* Allocates the four arrays (NaN / -1 filled). TSC_ERR_ARG for bad sizes, TSC_ERR_NOMEM (then
 * *ts is zeroed and owns nothing). Free with tsc_attn_tile_stats_free (NULL/zeroed: no-op). */
TSC_API tsc_status_t tsc_attn_tile_stats_init(tsc_attn_tile_stats_t *ts, int B, int H, int T, int block_k);
TSC_API void tsc_attn_tile_stats_free(tsc_attn_tile_stats_t *ts);
/* Sets every entry to "not visited" (row_max NaN, counts -1). */
TSC_API void tsc_attn_tile_stats_reset(tsc_attn_tile_stats_t *ts);
/* Element count of each array: B·H·T·n_kt. */
TSC_API size_t tsc_attn_tile_stats_size(const tsc_attn_tile_stats_t *ts);

/* ---- backends ---- */

typedef enum { TSC_ATTN_EXACT = 0, TSC_ATTN_FAST = 1 } tsc_attn_mode_t;

/* Capability bits of a backend. */
enum {
    TSC_ATTN_CAP_F32 = 1u << 0,         /* io->dtype TSC_ATTN_F32 */
    TSC_ATTN_CAP_F64 = 1u << 1,         /* io->dtype TSC_ATTN_F64 */
    TSC_ATTN_CAP_FP64_STAGES = 1u << 2, /* policies with an FP64 stage (tsc_policy_uses_fp64) */
    TSC_ATTN_CAP_EXACT = 1u << 3,       /* exact mode: the reference's bits */
    TSC_ATTN_CAP_FAST = 1u << 4,        /* fast mode */
    TSC_ATTN_CAP_FORWARD = 1u << 5,
    TSC_ATTN_CAP_BACKWARD = 1u << 6,    /* io->dout: δ, dQ, dK, dV */
    TSC_ATTN_CAP_STOCHASTIC = 1u << 7,  /* +sr policies */
    TSC_ATTN_CAP_TILE_STATS = 1u << 8,  /* fills tsc_attn_opts_t.tiles */
    TSC_ATTN_CAP_TRACE = 1u << 9        /* fills tsc_attn_trace_t (CPU debug) */
};

/* What a run asks for beyond the outputs. A zeroed struct (or NULL) is exact mode, nothing. */
typedef struct {
    tsc_attn_mode_t mode;
    tsc_attn_tile_stats_t *tiles;  /* or NULL; must match dims (B, H, T) and pol->block_k */
    tsc_attn_trace_t *traces;      /* or NULL: n_traces CPU debug traces (see tsc_attn_run) */
    int n_traces;
} tsc_attn_opts_t;

typedef struct tsc_attn_backend tsc_attn_backend_t;
struct tsc_attn_backend {
    const char *name;     /* "cpu-ref", "cpu-simd", "cuda" */
    const char *summary;  /* one line for listings */
    unsigned caps;        /* TSC_ATTN_CAP_* */
    /* 1 when it can run on this machine (CPU features, a GPU present) */
    int (*available)(void);
    /* The work, on arguments tsc_attn_run_with has checked (dims, policy, io, traces, tiles
     * reset, capabilities); opts is never NULL. Writes the outputs io asks for and the tiles
     * each row visits; returns TSC_OK or an error with its detail set. */
    tsc_status_t (*run)(const tsc_policy_t *pol, const tsc_attn_dims_t *dims, const tsc_attn_io_t *io,
                        const tsc_attn_opts_t *opts);
};

/* The registry: count, i-th (NULL out of range), by name (NULL when not registered: a build
 * without CUDA has no "cuda"). Registration says the code is built in; available() whether it
 * runs here. tsc_attn_backend_default() is the one tsc_attn_run uses at this moment. */
TSC_API int tsc_attn_backend_count(void);
TSC_API const tsc_attn_backend_t *tsc_attn_backend_at(int i);
TSC_API const tsc_attn_backend_t *tsc_attn_backend_get(const char *name);
TSC_API const tsc_attn_backend_t *tsc_attn_backend_default(void);

/* tsc_attn_run on backend be (NULL: the default) with options (NULL: exact, no tiles, no
 * traces). Besides tsc_attn_run's errors: TSC_ERR_ARG for tile statistics that do not fit,
 * TSC_ERR_UNSUPPORTED when be is not available here or lacks a capability the request needs
 * (the detail names it). */
TSC_API tsc_status_t tsc_attn_run_with(const tsc_attn_backend_t *be, const tsc_policy_t *pol,
                                       const tsc_attn_dims_t *dims, const tsc_attn_io_t *io,
                                       const tsc_attn_opts_t *opts);

/* FLOPs counted the usual way (2 per multiply-add of the matrix products; causal counts the
 * unmasked half including the diagonal): forward 4·T'·D per head, backward 10·T'·D per
 * head, T' = number of unmasked (t, j) pairs. */
TSC_API double tsc_attn_flops(const tsc_attn_dims_t *dims, int backward);

/* The attention this process has run through tsc_attn_run_with (every thread), counted from the
 * formulas of tsc_attn_flops, not timed: a forward 4·T'·D per head; a backward 10·T'·D, or when it
 * returns δ alone (no dq) 2·T·D; either plus 4·T'·D for δ from an FP32 O (a second forward) or
 * from rowsum(dP ∘ P) (the scores and dP again). Lets a benchmark set a command's work against the
 * machine's peak. */
typedef struct {
    int64_t calls;     /* tsc_attn_run_with calls that ran */
    int64_t forwards;  /* (b, h) heads forward */
    int64_t backwards; /* of them, also backward (δ alone or the gradients) */
    double flops;      /* FP32 FLOPs by the formulas above */
} tsc_attn_work_t;
TSC_API tsc_attn_work_t tsc_attn_work(void);

/* The FP32 exp and log of the reference (deterministic, same bits on every path, the CUDA
 * kernels included). */
TSC_API float tsc_attn_expf(float x);
TSC_API float tsc_attn_logf(float x);
/* FA4's emulated exp2 as +exp2-poly computes it ("The exponent" above), for tests and explain. */
TSC_API float tsc_attn_exp2_fa4(float x);
/* torch's exp_u20 as +vexp computes it ("torch's CPU flash kernel" above), for tests and explain. */
TSC_API float tsc_attn_exp_u20(float x);

/* Selects the SIMD path (1, default where the CPU has AVX-512F/FMA or AVX2/FMA: backend
 * "cpu-simd", the widest the CPU has) or the portable one (0: "cpu-ref") for the default backend;
 * all give identical bits. Returns the previous setting. Not thread-safe: set it before calling
 * tsc_attn_run. tsc_attn_simd_available() says whether a SIMD path exists here, and
 * tsc_attn_simd_name() which one cpu-simd runs ("AVX-512", "AVX2" or "portable"). */
TSC_API int tsc_attn_simd_set(int enable);
TSC_API int tsc_attn_simd_available(void);
TSC_API const char *tsc_attn_simd_name(void);

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
