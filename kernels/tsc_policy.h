/* tsc_policy.h: precision policies, i.e. where attention rounds and to what.
 *
 * A policy gives every stage of FA2-structured attention (forward and backward) a number
 * format and a rounding mode, plus the order/structure choices that change rounding (whether
 * the per-tile P̄V product accumulates straight into the Ō accumulator, tile sizes), the
 * source of δ, and the stabilisation rule of docs/MECHANISM.md §6 (Algorithm 3). The CPU reference
 * in tsc_attention.h is the definition of what each field means, stage by stage.
 *
 *   tsc_policy_t p;
 *   if (tsc_policy_parse("bf16-fa2+stable:beta=2,eps=1e-3", &p) != TSC_OK)
 *       fprintf(stderr, "%s\n", tsc_error_last());        // lists presets and modifiers
 *   char buf[TSC_POLICY_STR_MAX]; tsc_policy_format(&p, buf, sizeof buf);
 *   tsc_policy_t hp_pv = p; tsc_policy_stage_set(&hp_pv, TSC_STAGE_PV, TSC_FMT_FP32);
 *
 * String grammar: PRESET { "+" MODIFIER }, case-sensitive, no spaces.
 *   presets:   the rows of policy.c's preset table (fp64, fp32, bf16-fa2, bf16-torch, ...; a bad string's
 *              error lists them all; docs/PRESETS.md: what each models, and where that knowledge comes from)
 *   modifiers: the rows of policy.c's modifier table (+FMT:STAGE, +hp-delta, +tile:q=BR,k=BC, +stable, ...;
 *              a bad string's error lists them; docs/PRESETS.md section Modifiers says what each sets;
 *              tsc_policy_modifier_info gives each row's syntax and description)
 *   stage names: q k v do acc scores rowmax exparg pbar-pv pbar-l pv oacc l l-rescale o lse
 *                exparg-bwd p dp ds delta-prod delta dq dk dv grad
 *                ("pbar" is accepted for pbar-pv, "s" for scores)
 * Substitutions compose: the paper's "Ō computed in FP32" under bf16-torch is +fp32:pv,oacc,o
 * (raising pv alone changes nothing while the Ō accumulator and O stay BF16), its "δ from an
 * FP32 O" is +hp-delta, and "δ = rowsum(dP ∘ P)" is +dpp-delta.
 * Modifiers apply left to right. tsc_policy_format prints the canonical form: the preset,
 * then only what differs from it, modifier rows in table order, so parse(format(p)) == p for every policy
 * (the round trip).
 */
#ifndef TSC_POLICY_H
#define TSC_POLICY_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_formats.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The stages. Every value a stage produces is rounded to that stage's format (with its mode)
 * right after it is computed; arithmetic between stages runs in FP32 (FP64 when any stage of
 * the policy is FP64). See tsc_attention.h for the exact formula of each. */
typedef enum {
    /* inputs: rounded into these formats on entry (a no-op for values already there) */
    TSC_STAGE_Q = 0,
    TSC_STAGE_K,
    TSC_STAGE_V,
    TSC_STAGE_DO,
    /* every matrix-product accumulator (tensor-core accumulator): QKᵀ, P̄V, dO Vᵀ, Pᵀ dO,
     * dS K, dSᵀ Q, and the per-tile row sum of P̄; each step is one fused multiply-add */
    TSC_STAGE_ACC,
    /* forward */
    TSC_STAGE_S,        /* scores S = α·(Q Kᵀ): the product, then times α, each rounded */
    TSC_STAGE_ROWMAX,   /* tile row max r_m, running max m, stabilised max and tie threshold */
    TSC_STAGE_EXPARG,   /* S − m (and m_old − m_new, S − LSE) as passed to exp */
    TSC_STAGE_PBAR_PV,  /* P̄ = exp(S − m) as used in the P̄V product */
    TSC_STAGE_PBAR_L,   /* P̄ as summed into ℓ */
    TSC_STAGE_PV,       /* per-tile P̄V result (unfused), or each step of the fused Ō update */
    TSC_STAGE_OACC,     /* Ō accumulator across key tiles (and its rescaling by e^{m_old−m_new}) */
    TSC_STAGE_L,        /* ℓ, the running row sum */
    TSC_STAGE_L_RESCALE,/* c·ℓ before the tile's sum is added: at L's format the update rounds
                         * twice, R_L(R_L(c·ℓ) + s); at FP32 once, R_L(c·ℓ + s) */
    TSC_STAGE_O,        /* output O = Ō / ℓ */
    TSC_STAGE_LSE,      /* LSE = m + log ℓ */
    /* backward */
    TSC_STAGE_EXPARG_BWD, /* S − LSE as passed to exp in the backward */
    TSC_STAGE_P,        /* P = exp(S − LSE) as used in Pᵀ dO (dS uses P before this rounding);
                         * materialized softmax: the softmax output P = P̄ / ℓ */
    TSC_STAGE_DP,       /* dP = dO Vᵀ */
    TSC_STAGE_DS,       /* dS = α·P∘(dP − δ) as used in dS K and dSᵀ Q */
    TSC_STAGE_DELTA_PROD, /* each product dO·O of δ's row sum (lp δ) before it is added; FP32
                         * (or wider): fused into the add, one fma per term. hp δ (FP32 O) and
                         * dpp δ always form their products in the compute type */
    TSC_STAGE_DELTA,    /* δ = rowsum(dO ∘ O_src), see tsc_delta_src_t */
    TSC_STAGE_DQ,       /* dQ accumulator across key tiles */
    TSC_STAGE_DK,       /* dK accumulator across query tiles */
    TSC_STAGE_DV,       /* dV accumulator across query tiles */
    TSC_STAGE_GRAD,     /* dQ, dK, dV as returned (GQA: after summing a kv head's group) */
    TSC_STAGE_COUNT
} tsc_stage_t;

/* Where δ's O comes from. */
typedef enum {
    TSC_DELTA_LP_O = 0, /* the O this forward returned (rounded to the O stage): the paper's lp */
    TSC_DELTA_HP_O,     /* O from a second forward with every stage FP32 (FP64 if ACC is FP64) */
    TSC_DELTA_DPP       /* rowsum(dP ∘ P) over keys, in the ACC format, sequential by key */
} tsc_delta_src_t;

/* How the softmax is formed. */
typedef enum {
    TSC_SOFTMAX_ONLINE = 0,   /* FlashAttention: running max and ℓ over key tiles, O = Ō / ℓ */
    TSC_SOFTMAX_MATERIALIZED  /* eager / SDPA math: P = softmax(S) over the whole row, then O = P V
                               * (needs every key of a row in one tile: T <= tile k) */
} tsc_softmax_t;

/* Where the softmax scale α enters dS = α·P∘(dP − δ) (before dS is rounded to the DS stage). */
typedef enum {
    TSC_DS_SCALE_LAST = 0,    /* R_DS((P·(dP − δ))·α) */
    TSC_DS_SCALE_FIRST,       /* R_DS((P·α)·(dP − δ)): the official PyTorch code's `p * scale * (dp - D)` */
    TSC_DS_SCALE_ROUNDED      /* R_DS(R_DS(P·(dP − δ))·α): autograd of softmax, then of `* scale` */
} tsc_ds_scale_t;

/* How the softmax scale α is applied. */
typedef enum {
    TSC_SCALE_S = 0,  /* S = R_S(R_S(Q Kᵀ)·α), α in the compute type */
    TSC_SCALE_S_LP,   /* the same with α itself rounded to the S format first (a BF16 tensor times
                       * a Python float on the CPU); dS's α likewise rounded to the DS format */
    TSC_SCALE_QK      /* √α applied to Q and to K (R_S each), no α on the scores; dQ and dK are
                       * multiplied by √α before R_GRAD (SDPA math) */
} tsc_scale_t;

/* How a materialized softmax normalises. */
typedef enum {
    TSC_SOFTMAX_NORM_DIV = 0, /* P = R_P(P̄ / ℓ) */
    TSC_SOFTMAX_NORM_RECIP    /* P = R_P(P̄ · (1/ℓ)), 1/ℓ in the compute type (PyTorch's CPU softmax) */
} tsc_softmax_norm_t;

/* How GQA sums the per-query-head dK, dV of one kv head (each already R_GRAD). */
typedef enum {
    TSC_GQA_SUM_ONCE = 0, /* in ACC in head order, then R_GRAD once (a reduction kernel) */
    TSC_GQA_SUM_EACH,     /* R_GRAD after each addition, heads in order (a BF16 CPU sum) */
    TSC_GQA_SUM_WIDE      /* the per-head dK, dV not rounded to GRAD: summed in ACC in head order, then
                           * R_GRAD once (SDPA math with enable_gqa: the expansion is inside the FP32 graph) */
} tsc_gqa_sum_t;

/* The order in which a row's FP32 sums add their terms: ℓ's per-tile sum of P̄ (unfused online and
 * materialized softmax) and δ's sum of dO·O (tsc_attention.h, "Summation order"). */
typedef enum {
    TSC_SUM_SEQ = 0, /* in key (feature) order, one add after another (every preset's) */
    TSC_SUM_ATEN8,   /* ATen's CPU torch.sum of a contiguous FP32 row: a cascade over 8-lane vectors
                      * (torch's AVX2 kernels) */
    TSC_SUM_ATEN16   /* the same over 16-lane vectors (torch's AVX-512 kernels) */
} tsc_sum_order_t;

/* torch's CPU flash attention exponentiates and sums a key tile in one vectorised pass
 * (tsc_attention.h, "torch's CPU flash kernel"). */
typedef enum {
    TSC_VEXP_OFF = 0, /* exp(S − m) per key, the tile sum in the policy's +sum order */
    TSC_VEXP_U20X8,   /* exp_u20 on 8-lane vectors, libm exp on the tail, lane sums then a shuffle tree (AVX2) */
    TSC_VEXP_U20X16   /* the same on 16-lane vectors (AVX-512) */
} tsc_vexp_t;

/* How exp's argument is formed (tsc_attention.h, "The exponent"). */
typedef enum {
    TSC_EXP_E = 0,    /* P̄ = exp(R_EXPARG(S − m)), S = α·(Q Kᵀ): the model of every preset before the
                       * kernel presets, and of the PyTorch code (torch.exp of S − m) */
    TSC_EXP_EXP2_FMA, /* CUDA kernels' exp2 with α·log2(e) folded in, one FFMA: S' = R_S(Q Kᵀ) unscaled,
                       * m' its max, P̄ = exp2(fma(S', σ, −R(R(m'·σ) − offset))) (FA2, FA3, FA4) */
    TSC_EXP_EXP2_MUL, /* the same unfused (PyTorch's vendored FA2, UNFUSE_FMA):
                       * P̄ = exp2(R(R(S'·σ) − R(R(m'·σ) − offset))), exactly 1 at the max */
    TSC_EXP_EXP2_TRITON, /* the Triton tutorial: exp2-fma off the diagonal, exp2-mul on the diagonal tiles
                       * (causal), the rescale from the scaled maxima, ℓ = fma(ℓ, c, tile sum) */
    TSC_EXP_EXP2_SCALED, /* FlexAttention: S = R(R(S'·α)·log2e'), exp2(R(S − m)), ℓ = fma(ℓ, c, tile sum) */
    TSC_EXP_EXP2_PRESCALED, /* FlexAttention's PRESCALE_QK: Q rounded to its format after ·α·log2e', S = S' */
    TSC_EXP_EXP2_MEMEFF /* PyTorch's mem-efficient kernel (xformers CUTLASS): every score R(S'·σ), exp2 of its
                       * difference to the scaled max (1 at the max), ℓ = R(R(ℓ·c) + tile sum), LSE from the
                       * scaled max: R(R(m/log2e') + log ℓ) */
} tsc_exp_t;

/* The presets: the kernels people run (docs/PRESETS.md has the sources of each model). */
typedef enum {
    TSC_PRESET_FP64 = 0,
    TSC_PRESET_FP32,
    TSC_PRESET_BF16_FA2,   /* FA2 CUDA kernel: S, ℓ, Ō in FP32; P̄ BF16 for P̄V; O rounded once */
    TSC_PRESET_BF16_TORCH, /* official PyTorch FA2 code under CUDA autocast: BF16 S, max, Ō */
    TSC_PRESET_FP16_FA2,   /* bf16-fa2 with FP16 in place of BF16 */
    TSC_PRESET_FP8_FA3,    /* FA3 FP8 forward: Q, K, V, P̄ in E4M3; O in BF16; backward as bf16-fa2 */
    TSC_PRESET_FP16_TORCH, /* bf16-torch with FP16 in place of BF16 */
    TSC_PRESET_BF16_EAGER_CPU,  /* softmax(α Q Kᵀ) V in eager PyTorch under CPU BF16 autocast */
    TSC_PRESET_BF16_EAGER_CUDA, /* the same under CUDA BF16 autocast (softmax in FP32) */
    TSC_PRESET_FP16_EAGER_CUDA, /* the same under CUDA FP16 autocast */
    TSC_PRESET_BF16_SDPA_MATH,  /* torch SDPA math path (torch >= 2.5) on BF16 inputs */
    TSC_PRESET_FP16_SDPA_MATH,  /* the same on FP16 inputs */
    /* kernels read from their source (docs/PRESETS.md gives the commit, file and lines of each) */
    TSC_PRESET_BF16_FLASH_ATTN2, /* upstream flash-attn 2: FFMA exp2, O = Ō·(1/ℓ) */
    TSC_PRESET_BF16_SDPA_FLASH,  /* PyTorch's vendored FA2 (UNFUSE_FMA): exp2 of a rounded product */
    TSC_PRESET_BF16_FA3,         /* flash-attn 3 (Hopper), BF16, either head-dim regime */
    TSC_PRESET_FP8_FA3_SCALED,   /* flash-attn 3 FP8 forward: E4M3 P̄ with the max mapped to 2^8 */
    TSC_PRESET_BF16_FA4,         /* flash-attn 4 (SM100): lazy rescale, emulated exp2 subset */
    TSC_PRESET_FP16_TRITON,      /* the Triton fused-attention tutorial, FP16 */
    TSC_PRESET_E5M2_TRITON,      /* the same with FP8 (E5M2) inputs: P̄ converted to E5M2 */
    TSC_PRESET_BF16_FLEX,        /* torch FlexAttention: SM_SCALE then RCP_LN2, two roundings */
    TSC_PRESET_BF16_FLEX_PRESCALE, /* FlexAttention with PRESCALE_QK: Q rounded after scaling */
    TSC_PRESET_BF16_SDPA_MEM_EFFICIENT, /* PyTorch's SDPA mem-efficient kernel (CUTLASS, from xformers), head dim <= 64 */
    TSC_PRESET_BF16_SDPA_CPU_FLASH, /* PyTorch's SDPA flash kernel on the CPU: exp_u20, FP32 scores and sums */
    TSC_PRESET_COUNT
} tsc_preset_t;

/* Algorithm 3 (docs/MECHANISM.md §6). Per key tile of a row: r_m = max S (unmasked entries), r_s =
 * #{S ≥ round_ROWMAX(r_m − eps)}; if r_s > 1: m = beta·r_m when r_m > 0, 0 when r_m ≤ 0;
 * else m = r_m. Edge cases (documented in tsc_attention.h): if r_s > 1 and the chosen m would
 * give round_PBAR_PV(exp(r_m − m)) == 1 (repeated max of exactly 0, tiny |r_m|) or == 0
 * (underflow), m = r_m + gap instead. */
typedef struct {
    int enabled;
    double beta;   /* in [1, 64]; paper and official code: 2 (v2 preprint: 7) */
    double eps;    /* in [0, 1]; tie tolerance, paper 1e-3 (v2 preprint: 0, exact ties) */
    double gap;    /* in (0, 64]; the edge-case shift, default 1 (max P̄ = e^-1) */
} tsc_stable_t;

typedef struct {
    tsc_preset_t preset;                    /* the preset this policy started from */
    tsc_format_t fmt[TSC_STAGE_COUNT];      /* format of each stage */
    tsc_round_t mode[TSC_STAGE_COUNT];      /* rounding mode of each stage */
    uint64_t seed;                          /* stochastic rounding seed */
    tsc_delta_src_t delta_src;
    int fused;        /* 1: accumulate products straight into the running accumulators */
    int torch_quirks; /* 1 (bf16-torch): visit fully masked key tiles (under +stable they count
                       * as a repeated negative max, m = 0) and clamp each tile row sum of P̄
                       * to >= 1e-10, as the official code does */
    int block_q, block_k;                   /* tile sizes Br × Bc */
    tsc_stable_t stable;
    tsc_softmax_t softmax;                  /* online (FA) or materialized (eager, SDPA math) */
    tsc_ds_scale_t ds_scale;                /* where α enters dS */
    tsc_scale_t scale;                      /* how α is applied */
    tsc_softmax_norm_t norm;                        /* materialized softmax: P̄ / ℓ or P̄ · (1/ℓ) */
    tsc_gqa_sum_t gqa_sum;                  /* GQA: the group's dK, dV summed once or per add */
    tsc_sum_order_t sum_order;              /* the order of ℓ's tile sums and of δ's sums */
    tsc_vexp_t vexp;                        /* torch CPU flash's vectorised exp and tile sum, or off */
    tsc_exp_t exp;                          /* how exp's argument is formed */
    int p_offset;     /* exp2 modes: the row max maps to 2^p_offset (FP8 kernels: 8), 0 none */
    double lazy_thr;  /* exp2 modes: keep the running max while it grows by at most this many log2
                       * units (FA4's rescale_threshold, 8), 0 off */
    int poly_freq, poly_res, poly_start; /* exp2 modes: FA4's emulated exp2 on a fixed subset of each
                       * tile's columns (freq 0: every column takes exp2) */
} tsc_policy_t;

/* Longest string tsc_policy_format writes, with its NUL. */
#define TSC_POLICY_STR_MAX 512

/* Fills *out with a preset. TSC_ERR_ARG for an out-of-range preset (*out untouched). */
TSC_API tsc_status_t tsc_policy_preset(tsc_preset_t preset, tsc_policy_t *out);
/* Parses a policy string (grammar above). On failure returns TSC_ERR_ARG with a detail naming
 * the bad part and listing valid presets, modifiers and stage names; *out is untouched. */
TSC_API tsc_status_t tsc_policy_parse(const char *s, tsc_policy_t *out);
/* Writes the canonical string. TSC_ERR_ARG if buf is too small (buf then holds "" when
 * size > 0). TSC_POLICY_STR_MAX always suffices. */
TSC_API tsc_status_t tsc_policy_format(const tsc_policy_t *p, char *buf, size_t size);
/* Checks ranges (formats, modes, tiles, beta/eps/gap). TSC_ERR_ARG with a detail if not. */
TSC_API tsc_status_t tsc_policy_validate(const tsc_policy_t *p);
/* 1 when the two policies compute the same thing (every field equal), else 0. */
TSC_API int tsc_policy_equal(const tsc_policy_t *a, const tsc_policy_t *b);

/* Canonical preset / stage names and their parsers (TSC_ERR_ARG listing valid names). */
TSC_API const char *tsc_preset_name(tsc_preset_t preset);
TSC_API const char *tsc_preset_describe(tsc_preset_t preset);  /* one line: the kernel it models */
TSC_API tsc_status_t tsc_preset_parse(const char *name, tsc_preset_t *out);
TSC_API const char *tsc_stage_name(tsc_stage_t stage);          /* "pv", "oacc", ...; "?" if out of range */
TSC_API const char *tsc_stage_describe(tsc_stage_t stage);      /* one line, e.g. "per-tile P̄V result" */
TSC_API tsc_status_t tsc_stage_parse(const char *name, tsc_stage_t *out);

/* Sets one stage's format (the mode is kept; a stage raised to FP32/FP64 gets nearest-even,
 * since accumulators round that way in hardware). */
TSC_API void tsc_policy_stage_set(tsc_policy_t *p, tsc_stage_t stage, tsc_format_t fmt);
/* 1 when the stage's format has fewer mantissa bits than FP32 (a "low-precision" stage). */
TSC_API int tsc_policy_stage_is_low(const tsc_policy_t *p, tsc_stage_t stage);
/* 1 when any stage is FP64 (the reference then computes in double). */
TSC_API int tsc_policy_uses_fp64(const tsc_policy_t *p);

/* The modifier table (kernels/policy.c), for help and docs: how many rows; row i's syntax as help prints it
 * ("+tile:q=BR,k=BC", "+hp-delta, ...") into syntax[size] and its one-line description (*desc, static).
 * TSC_ERR_ARG for i out of range or a buffer too small (syntax then ""). */
TSC_API int tsc_policy_modifier_count(void);
TSC_API tsc_status_t tsc_policy_modifier_info(int i, char *syntax, size_t size, const char **desc);

/* Accessors for callers that hold a policy as an opaque buffer (the Python package through ctypes):
 * the size of tsc_policy_t to allocate; the tile sizes Br, Bc (block_q, block_k; either may be NULL);
 * a stage's format and rounding mode (TSC_FMT_FP32 / TSC_ROUND_NEAREST_EVEN for a stage out of range). */
TSC_API size_t tsc_policy_size(void);
TSC_API void tsc_policy_tiles(const tsc_policy_t *p, int *block_q, int *block_k);
TSC_API tsc_format_t tsc_policy_stage_format(const tsc_policy_t *p, tsc_stage_t stage);
TSC_API tsc_round_t tsc_policy_stage_mode(const tsc_policy_t *p, tsc_stage_t stage);

/* For substitution experiments ("lp with one stage at a time raised to FP32", docs/MECHANISM.md §2):
 * fills stages[] with the forward/backward stages that are low-precision in p, in enum
 * order, and returns their count (at most TSC_STAGE_COUNT; stages may be NULL to count).
 * For each, `q = *p; tsc_policy_stage_set(&q, s, TSC_FMT_FP32);` is the substituted policy,
 * and tsc_policy_format(&q) names it, e.g. "bf16-fa2+fp32:pbar-pv". Inputs q/k/v/do are
 * excluded (they are the captured data, not a choice of the kernel). */
TSC_API int tsc_policy_low_stages(const tsc_policy_t *p, tsc_stage_t *stages);

#ifdef __cplusplus
}
#endif
#endif
