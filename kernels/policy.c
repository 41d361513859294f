/* policy.c: precision policies: presets, the string grammar (tsc_policy.h), canonical form. */
#include "tsc_policy.h"
#include "tsc_strbuf.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *help(void);

static const char *const stage_names[TSC_STAGE_COUNT] = {
    "q", "k", "v", "do", "acc", "scores", "rowmax", "exparg", "pbar-pv", "pbar-l", "pv", "oacc",
    "l", "l-rescale", "o", "lse", "exparg-bwd", "p", "dp", "ds", "delta-prod", "delta", "dq", "dk",
    "dv", "grad"};

static const char *const stage_desc[TSC_STAGE_COUNT] = {
    "input Q", "input K", "input V", "input dO",
    "matrix-product accumulator (each step one fused multiply-add)",
    "scores S = alpha*(Q K^T)", "row max (tile, running, stabilised)",
    "S - m as passed to exp", "P-bar as used in P-bar V", "P-bar as summed into l",
    "per-tile P-bar V result (fused: each step of the O-bar update)",
    "O-bar accumulator across key tiles", "l, the running row sum",
    "c*l before the tile's row sum is added", "output O = O-bar / l",
    "LSE = m + log l", "S - LSE as passed to exp in the backward",
    "P = exp(S - LSE) as used in P^T dO (materialized: the softmax output)", "dP = dO V^T",
    "dS = alpha*P*(dP - delta) as used in dS K and dS^T Q",
    "each product dO*O before it is added into delta (lp delta)", "delta = rowsum(dO * O)",
    "dQ accumulator", "dK accumulator", "dV accumulator", "returned dQ, dK, dV"};




const char *tsc_stage_name(tsc_stage_t stage) {
    return (unsigned)stage < TSC_STAGE_COUNT ? stage_names[stage] : "?";
}

const char *tsc_stage_describe(tsc_stage_t stage) {
    return (unsigned)stage < TSC_STAGE_COUNT ? stage_desc[stage] : "?";
}

/* ---------------------------------------------------------------- the presets */

typedef struct preset_row preset_row_t;
/* A family of presets: the stages and options it sets over the base (every stage at the row's base format). */
typedef void (*preset_build_fn)(tsc_policy_t *p, const preset_row_t *r);

static void build_fa(tsc_policy_t *p, const preset_row_t *r);
static void build_torch(tsc_policy_t *p, const preset_row_t *r);
static void build_eager(tsc_policy_t *p, const preset_row_t *r);
static void build_sdpa_math(tsc_policy_t *p, const preset_row_t *r);
static void build_kernel(tsc_policy_t *p, const preset_row_t *r);

/* One row per preset, in the order help and errors list them (the enum's order, which fit and stored files
 * use, is the row's preset field): name, the kernel it models, the base format of every stage, and the
 * family that sets the rest with the row's lp format, input format and CUDA flag. Adding a preset: its
 * enum value (tsc_policy.h), its row here (a new family only for a new kind of kernel), its section in
 * docs/PRESETS.md (test_policy holds the three together). */
struct preset_row {
    tsc_preset_t preset;
    const char *name, *desc;
    tsc_format_t base;
    preset_build_fn build; /* NULL: the base alone */
    tsc_format_t lp, in;
    int cuda;
};

#define BF TSC_FMT_BF16
#define HF TSC_FMT_FP16
#define F32 TSC_FMT_FP32
static const preset_row_t presets[] = {
    {TSC_PRESET_FP64, "fp64", "every stage FP64", TSC_FMT_FP64, NULL, F32, F32, 0},
    {TSC_PRESET_FP32, "fp32", "every stage FP32", F32, NULL, F32, F32, 0},
    {TSC_PRESET_BF16_FA2, "bf16-fa2", "FlashAttention-2 CUDA kernel, BF16", F32, build_fa, BF, BF, 1},
    {TSC_PRESET_FP16_FA2, "fp16-fa2", "FlashAttention-2 CUDA kernel, FP16", F32, build_fa, HF, HF, 1},
    {TSC_PRESET_FP8_FA3, "fp8-fa3", "FlashAttention-3 FP8 (E4M3) forward, BF16 backward", F32, build_fa, BF,
     TSC_FMT_FP8_E4M3, 1},
    {TSC_PRESET_BF16_TORCH, "bf16-torch", "the paper's pure-PyTorch FlashAttention-2 under CUDA BF16 autocast", F32,
     build_torch, BF, BF, 1},
    {TSC_PRESET_FP16_TORCH, "fp16-torch", "the paper's pure-PyTorch FlashAttention-2 under CUDA FP16 autocast", F32,
     build_torch, HF, HF, 1},
    {TSC_PRESET_BF16_EAGER_CPU, "bf16-eager-cpu", "eager PyTorch softmax(QK^T*scale) V under CPU BF16 autocast", F32,
     build_eager, BF, BF, 0},
    {TSC_PRESET_BF16_EAGER_CUDA, "bf16-eager-cuda", "eager PyTorch softmax(QK^T*scale) V under CUDA BF16 autocast",
     F32, build_eager, BF, BF, 1},
    {TSC_PRESET_FP16_EAGER_CUDA, "fp16-eager-cuda", "eager PyTorch softmax(QK^T*scale) V under CUDA FP16 autocast",
     F32, build_eager, HF, HF, 1},
    {TSC_PRESET_BF16_SDPA_MATH, "bf16-sdpa-math",
     "PyTorch scaled_dot_product_attention math path (torch >= 2.5), BF16 inputs", F32, build_sdpa_math, BF, BF, 0},
    {TSC_PRESET_FP16_SDPA_MATH, "fp16-sdpa-math",
     "PyTorch scaled_dot_product_attention math path (torch >= 2.5), FP16 inputs", F32, build_sdpa_math, HF, HF, 0},
    {TSC_PRESET_BF16_FLASH_ATTN2, "bf16-flash-attn2",
     "upstream flash-attn 2 (CUDA), BF16: exp2 of one FFMA, O = O-bar * (1/l)", F32, build_kernel, BF, BF, 1},
    {TSC_PRESET_BF16_SDPA_FLASH, "bf16-sdpa-flash",
     "PyTorch's SDPA flash backend (its copy of flash-attn 2 with UNFUSE_FMA), BF16", F32, build_kernel, BF, BF, 1},
    {TSC_PRESET_BF16_FA3, "bf16-fa3", "flash-attn 3 (Hopper), BF16, head dim 128, no causal mask (key tiles of 176)", F32, build_kernel, BF,
     BF, 1},
    {TSC_PRESET_FP8_FA3_SCALED, "fp8-fa3-scaled",
     "flash-attn 3 FP8 (E4M3) forward, head dim 128: P-bar scaled so the row max maps to 2^8", F32, build_kernel, BF,
     TSC_FMT_FP8_E4M3, 1},
    {TSC_PRESET_BF16_FA4, "bf16-fa4",
     "flash-attn 4 (SM100), BF16, causal, head dim 128: lazy rescale, emulated exp2 on fixed columns", F32,
     build_kernel, BF, BF, 1},
    {TSC_PRESET_FP16_TRITON, "fp16-triton", "the Triton fused-attention tutorial (06-fused-attention.py), FP16", F32,
     build_kernel, HF, HF, 1},
    {TSC_PRESET_E5M2_TRITON, "e5m2-triton", "the Triton tutorial with FP8 (E5M2) q, k, v: P-bar and O in E5M2", F32,
     build_kernel, TSC_FMT_FP8_E5M2, TSC_FMT_FP8_E5M2, 1},
    {TSC_PRESET_BF16_FLEX, "bf16-flex", "torch FlexAttention (Triton template), BF16: scores * SM_SCALE, then * RCP_LN2",
     F32, build_kernel, BF, BF, 1},
    {TSC_PRESET_BF16_FLEX_PRESCALE, "bf16-flex-prescale",
     "torch FlexAttention with PRESCALE_QK: q * SM_SCALE * RCP_LN2 rounded to BF16 (forward only)", F32, build_kernel,
     BF, BF, 1},
    {TSC_PRESET_BF16_SDPA_MEM_EFFICIENT, "bf16-sdpa-mem-efficient",
     "PyTorch's SDPA mem-efficient backend (CUTLASS kernel from xformers), BF16, head dim <= 64: scores scaled by a "
     "rounded product, exp2 1 at the max",
     F32, build_kernel, BF, BF, 1},
    {TSC_PRESET_BF16_SDPA_CPU_FLASH, "bf16-sdpa-cpu-flash",
     "PyTorch's SDPA flash kernel on the CPU (torch 2.x, AVX-512), BF16: FP32 scores, exp_u20, FP32 sums",
     F32, build_kernel, BF, BF, 0},
};
#undef BF
#undef HF
#undef F32
#define N_PRESETS ((int)(sizeof presets / sizeof presets[0]))
_Static_assert(sizeof presets / sizeof presets[0] == TSC_PRESET_COUNT, "one row per tsc_preset_t");

static const preset_row_t *preset_row(tsc_preset_t preset) {
    for (int i = 0; i < N_PRESETS; i++)
        if (presets[i].preset == preset) return &presets[i];
    return NULL;
}

const char *tsc_preset_name(tsc_preset_t preset) {
    const preset_row_t *r = preset_row(preset);
    return r ? r->name : "?";
}

const char *tsc_preset_describe(tsc_preset_t preset) {
    const preset_row_t *r = preset_row(preset);
    return r ? r->desc : "?";
}

tsc_status_t tsc_preset_parse(const char *name, tsc_preset_t *out) {
    for (int i = 0; name && i < N_PRESETS; i++)
        if (strcmp(name, presets[i].name) == 0) {
            *out = presets[i].preset;
            return TSC_OK;
        }
    return tsc_error_set(TSC_ERR_ARG, "unknown policy preset '%s'; %s", name ? name : "(null)", help());
}

tsc_status_t tsc_stage_parse(const char *name, tsc_stage_t *out) {
    if (name && strcmp(name, "pbar") == 0) { *out = TSC_STAGE_PBAR_PV; return TSC_OK; }
    if (name && strcmp(name, "s") == 0) { *out = TSC_STAGE_S; return TSC_OK; }
    for (int i = 0; name && i < TSC_STAGE_COUNT; i++)
        if (strcmp(name, stage_names[i]) == 0) {
            *out = (tsc_stage_t)i;
            return TSC_OK;
        }
    return tsc_error_set(TSC_ERR_ARG, "unknown policy stage '%s'; %s", name ? name : "(null)",
                         help());
}

static int fmt_is_low(tsc_format_t f) {
    return f != TSC_FMT_FP64 && f != TSC_FMT_FP32;
}

/* Sets the listed stages (a list ended by TSC_STAGE_COUNT) to fmt. */
static void fmt_set(tsc_policy_t *p, tsc_format_t fmt, const tsc_stage_t *list) {
    for (; *list != TSC_STAGE_COUNT; list++) p->fmt[*list] = fmt;
}

#define STAGES(...) ((const tsc_stage_t[]){__VA_ARGS__, TSC_STAGE_COUNT})
#define INPUTS TSC_STAGE_Q, TSC_STAGE_K, TSC_STAGE_V, TSC_STAGE_DO

/* FA2 CUDA: operands in lp, FP32 S/max/ℓ/Ō in registers; P̄ converted for the P̄V MMA; O
 * rounded once when written. Backward: P and dS converted for their MMAs, dP and the dQ/dK/dV
 * accumulators FP32, gradients written in lp. (FA3 FP8: E4M3 operands and P̄, BF16 O and
 * backward; FA3 has no FP8 backward, it is modelled as FA2's on the E4M3 inputs.) */
static void preset_fa(tsc_policy_t *p, tsc_format_t lp, tsc_format_t in) {
    fmt_set(p, in, STAGES(TSC_STAGE_Q, TSC_STAGE_K, TSC_STAGE_V, TSC_STAGE_PBAR_PV));
    fmt_set(p, lp, STAGES(TSC_STAGE_DO, TSC_STAGE_O, TSC_STAGE_P, TSC_STAGE_DS, TSC_STAGE_GRAD));
}

/* The official pure-PyTorch FA2 (attention.py) under CUDA autocast (docs/PRESETS.md): einsum
 * outputs and `* scale` in lp; amax and S − m in lp tensors; exp in FP32; P̄ cast to lp for the
 * P̄V einsum (FP32 accumulate, lp out); Ō an lp tensor updated in place (mul_, add_); the row
 * sum c·ℓ + s computed in FP32 (FP32 exp and sum results) and rounded once into the lp ℓ
 * tensor; O = Ō / ℓ in lp; LSE = log(ℓ) + m in FP32. Backward: S − LSE in FP32 (LSE is an
 * FP32 tensor) before exp; δ = (dO ∘ O).sum() with the products in lp and the sum in FP32;
 * dS = p * scale * (dP − δ) in FP32; dP and per-tile dQ/dK/dV chunks are lp einsum outputs
 * added into lp gradient tensors; fully masked tiles are visited. */
static void preset_torch(tsc_policy_t *p, tsc_format_t lp) {
    fmt_set(p, lp, STAGES(INPUTS, TSC_STAGE_S, TSC_STAGE_ROWMAX, TSC_STAGE_EXPARG, TSC_STAGE_PBAR_PV,
                          TSC_STAGE_PV, TSC_STAGE_OACC, TSC_STAGE_L, TSC_STAGE_O, TSC_STAGE_P, TSC_STAGE_DP,
                          TSC_STAGE_DS, TSC_STAGE_DELTA_PROD, TSC_STAGE_DQ, TSC_STAGE_DK, TSC_STAGE_DV,
                          TSC_STAGE_GRAD));
    p->fused = 0;
    p->torch_quirks = 1;
    p->ds_scale = TSC_DS_SCALE_FIRST;
    p->block_q = p->block_k = 512;
}

/* Materialized softmax, one tile over every key: eager attention and SDPA's math path. */
static void preset_materialized(tsc_policy_t *p) {
    p->softmax = TSC_SOFTMAX_MATERIALIZED;
    p->delta_src = TSC_DELTA_DPP; /* softmax's backward: δ = Σ dP·P */
    p->ds_scale = TSC_DS_SCALE_ROUNDED;
    p->fused = 0;
    p->block_q = p->block_k = 65536;
}

/* Eager `softmax((q @ kᵀ) * scale) @ v` under autocast (docs/PRESETS.md). Both autocast lists
 * put matmul in lp (FP32 accumulate, lp out): S, the P V product, dP, dQ, dK, dV. CUDA puts
 * softmax on its FP32 list: softmax runs on FP32 S and returns FP32 P (cast to lp for P V;
 * its backward in FP32, dS cast back to lp at the autocast boundary). CPU autocast has no
 * FP32 list entry for softmax: it runs on the lp S and returns lp P, its backward lp too. */
static void preset_eager(tsc_policy_t *p, tsc_format_t lp, int cuda) {
    preset_materialized(p);
    fmt_set(p, lp, STAGES(INPUTS, TSC_STAGE_S, TSC_STAGE_PBAR_PV, TSC_STAGE_PV, TSC_STAGE_O, TSC_STAGE_DP,
                          TSC_STAGE_DS, TSC_STAGE_GRAD));
    if (!cuda) {
        /* measured against torch 1.13's CPU kernels (tests/kernels/eager_torch_ref.py): α is
         * rounded to BF16 (BF16 tensor × Python float), softmax computes in FP32 and returns
         * R(P̄·(1/ℓ)); its backward rounds Σ dP·P to BF16 before dS = R(P·(dP − σ)); the GQA
         * repeat_interleave backward sums BF16 gradients rounding after each add */
        fmt_set(p, lp, STAGES(TSC_STAGE_P, TSC_STAGE_DELTA));
        p->scale = TSC_SCALE_S_LP;
        p->norm = TSC_SOFTMAX_NORM_RECIP;
        p->gqa_sum = TSC_GQA_SUM_EACH;
    }
}

/* SDPA math path, torch >= 2.5: lp inputs upcast to FP32, √α applied to q and k, FP32
 * matmuls and softmax, O cast to lp once; autograd of the same in FP32, gradients cast to lp. */
static void preset_sdpa_math(tsc_policy_t *p, tsc_format_t lp) {
    preset_materialized(p);
    p->scale = TSC_SCALE_QK;
    p->ds_scale = TSC_DS_SCALE_LAST;
    p->gqa_sum = TSC_GQA_SUM_WIDE; /* enable_gqa repeats k, v inside the FP32 graph: one rounding of the sum */
    fmt_set(p, lp, STAGES(INPUTS, TSC_STAGE_O, TSC_STAGE_GRAD));
}

/* The kernels read from their source (docs/PRESETS.md, "Kernels read from their source", cites the commit,
 * files and lines of each): FA2's stage formats (preset_fa), then exp2 with α·log2(e) folded into one FFMA
 * (or, PyTorch's copy, a rounded product), O = Ō·(1/ℓ), and each kernel's own rules. */
static void preset_kernel(tsc_policy_t *p, tsc_preset_t which, tsc_format_t lp, tsc_format_t in) {
    preset_fa(p, lp, in);
    p->exp = which == TSC_PRESET_BF16_SDPA_FLASH ? TSC_EXP_EXP2_MUL : TSC_EXP_EXP2_FMA;
    p->norm = TSC_SOFTMAX_NORM_RECIP;
    if (which == TSC_PRESET_FP16_TRITON || which == TSC_PRESET_E5M2_TRITON || which == TSC_PRESET_BF16_FLEX ||
        which == TSC_PRESET_BF16_FLEX_PRESCALE) {
        /* Triton kernels: O = acc / l_i (a division); tiles BLOCK_M 128, BLOCK_N 64 (autotuned; +tile for others) */
        p->exp = which == TSC_PRESET_BF16_FLEX ? TSC_EXP_EXP2_SCALED
                 : which == TSC_PRESET_BF16_FLEX_PRESCALE ? TSC_EXP_EXP2_PRESCALED : TSC_EXP_EXP2_TRITON;
        p->norm = TSC_SOFTMAX_NORM_DIV;
        p->block_q = 128;
        p->block_k = 64;
        if (which == TSC_PRESET_E5M2_TRITON) p->fmt[TSC_STAGE_O] = TSC_FMT_FP8_E5M2; /* o = torch.empty_like(q) */
    }
    /* key-tile widths, head dim 128 without a causal mask: FA3's tile_size_fwd_sm90 (BF16 176, FP8 224);
     * FA2 and FA4 128 */
    if (which == TSC_PRESET_BF16_FA3) p->block_k = 176;
    if (which == TSC_PRESET_BF16_SDPA_MEM_EFFICIENT) { /* kQueriesPerBlock = kKeysPerBlock = 64, O kept in registers */
        p->exp = TSC_EXP_EXP2_MEMEFF;
        p->block_q = p->block_k = 64;
    }
    if (which == TSC_PRESET_BF16_SDPA_CPU_FLASH) { /* kvSplitSize 512; per-tile sums added afterwards */
        p->exp = TSC_EXP_E;
        p->vexp = TSC_VEXP_U20X16;
        p->fused = 0;
        p->block_q = 256;
        p->block_k = 512;
    }
    if (which == TSC_PRESET_FP8_FA3_SCALED) {
        p->p_offset = 8;
        p->block_k = 224;
    }
    if (which == TSC_PRESET_BF16_FA4) {
        p->lazy_thr = 8;
        p->poly_freq = 16; /* causal, head dim 128, one CTA: _TUNING_CONFIG (False, True, 128, False) */
        p->poly_res = 4;
        p->poly_start = 1;
    }
}

/* The families of presets[]: each sets what its kind of kernel rounds (the functions above). */
static void build_fa(tsc_policy_t *p, const preset_row_t *r) { preset_fa(p, r->lp, r->in); }
static void build_torch(tsc_policy_t *p, const preset_row_t *r) { preset_torch(p, r->lp); }
static void build_eager(tsc_policy_t *p, const preset_row_t *r) { preset_eager(p, r->lp, r->cuda); }
static void build_sdpa_math(tsc_policy_t *p, const preset_row_t *r) { preset_sdpa_math(p, r->lp); }
static void build_kernel(tsc_policy_t *p, const preset_row_t *r) { preset_kernel(p, r->preset, r->lp, r->in); }

tsc_status_t tsc_policy_preset(tsc_preset_t preset, tsc_policy_t *out) {
    const preset_row_t *r = preset_row(preset);
    if (!r) return tsc_error_set(TSC_ERR_ARG, "policy preset %d out of range; %s", (int)preset, help());
    tsc_policy_t p;
    memset(&p, 0, sizeof p);
    p.preset = preset;
    p.delta_src = TSC_DELTA_LP_O;
    p.fused = 1;
    p.block_q = 128;
    p.block_k = 128;
    p.stable.enabled = 0;
    p.stable.beta = 2.0;
    p.stable.eps = 1e-3;
    p.stable.gap = 1.0;
    p.softmax = TSC_SOFTMAX_ONLINE;
    p.ds_scale = TSC_DS_SCALE_LAST;
    for (int s = 0; s < TSC_STAGE_COUNT; s++) {
        p.fmt[s] = r->base;
        p.mode[s] = TSC_ROUND_NEAREST_EVEN;
    }
    if (r->build) r->build(&p, r);
    *out = p;
    return TSC_OK;
}

void tsc_policy_stage_set(tsc_policy_t *p, tsc_stage_t stage, tsc_format_t fmt) {
    if (!p || (unsigned)stage >= TSC_STAGE_COUNT) return;
    p->fmt[stage] = fmt;
    if (!fmt_is_low(fmt)) p->mode[stage] = TSC_ROUND_NEAREST_EVEN;
}

int tsc_policy_stage_is_low(const tsc_policy_t *p, tsc_stage_t stage) {
    return p && (unsigned)stage < TSC_STAGE_COUNT && fmt_is_low(p->fmt[stage]);
}

size_t tsc_policy_size(void) { return sizeof(tsc_policy_t); }

void tsc_policy_tiles(const tsc_policy_t *p, int *block_q, int *block_k) {
    if (block_q) *block_q = p ? p->block_q : 0;
    if (block_k) *block_k = p ? p->block_k : 0;
}

tsc_format_t tsc_policy_stage_format(const tsc_policy_t *p, tsc_stage_t stage) {
    return p && (unsigned)stage < TSC_STAGE_COUNT ? p->fmt[stage] : TSC_FMT_FP32;
}

tsc_round_t tsc_policy_stage_mode(const tsc_policy_t *p, tsc_stage_t stage) {
    return p && (unsigned)stage < TSC_STAGE_COUNT ? p->mode[stage] : TSC_ROUND_NEAREST_EVEN;
}

int tsc_policy_uses_fp64(const tsc_policy_t *p) {
    for (int s = 0; s < TSC_STAGE_COUNT; s++)
        if (p->fmt[s] == TSC_FMT_FP64) return 1;
    return 0;
}

int tsc_policy_low_stages(const tsc_policy_t *p, tsc_stage_t *stages) {
    int n = 0;
    for (int s = TSC_STAGE_ACC; s < TSC_STAGE_COUNT; s++)
        if (fmt_is_low(p->fmt[s])) {
            if (stages) stages[n] = (tsc_stage_t)s;
            n++;
        }
    return n;
}

tsc_status_t tsc_policy_validate(const tsc_policy_t *p) {
    if (!p) return tsc_error_set(TSC_ERR_ARG, "policy: NULL");
    if ((unsigned)p->preset >= TSC_PRESET_COUNT)
        return tsc_error_set(TSC_ERR_ARG, "policy: preset %d out of range", (int)p->preset);
    for (int s = 0; s < TSC_STAGE_COUNT; s++) {
        if ((unsigned)p->fmt[s] >= TSC_FMT_COUNT)
            return tsc_error_set(TSC_ERR_ARG, "policy: stage %s has format %d, out of range",
                                 stage_names[s], (int)p->fmt[s]);
        if ((unsigned)p->mode[s] > TSC_ROUND_STOCHASTIC)
            return tsc_error_set(TSC_ERR_ARG, "policy: stage %s has rounding mode %d, out of range",
                                 stage_names[s], (int)p->mode[s]);
    }
    if (p->fmt[TSC_STAGE_ACC] != TSC_FMT_FP32 && p->fmt[TSC_STAGE_ACC] != TSC_FMT_FP64)
        return tsc_error_set(TSC_ERR_ARG, "policy: the acc stage must be fp32 or fp64, not %s",
                             tsc_format_name(p->fmt[TSC_STAGE_ACC]));
    if ((unsigned)p->delta_src > TSC_DELTA_DPP)
        return tsc_error_set(TSC_ERR_ARG, "policy: delta source %d out of range", (int)p->delta_src);
    if (p->block_q < 1 || p->block_q > 65536 || p->block_k < 1 || p->block_k > 65536)
        return tsc_error_set(TSC_ERR_ARG, "policy: tile sizes %d x %d outside [1, 65536]",
                             p->block_q, p->block_k);
    if ((unsigned)p->softmax > TSC_SOFTMAX_MATERIALIZED || (unsigned)p->ds_scale > TSC_DS_SCALE_ROUNDED ||
        (unsigned)p->scale > TSC_SCALE_QK || (unsigned)p->norm > TSC_SOFTMAX_NORM_RECIP ||
        (unsigned)p->gqa_sum > TSC_GQA_SUM_WIDE || (unsigned)p->sum_order > TSC_SUM_ATEN16)
        return tsc_error_set(TSC_ERR_ARG, "policy: softmax %d, ds-scale %d, scale %d, norm %d, gqa-sum %d or "
                             "sum %d out of range", (int)p->softmax, (int)p->ds_scale, (int)p->scale, (int)p->norm,
                             (int)p->gqa_sum, (int)p->sum_order);
    if (p->sum_order != TSC_SUM_SEQ && (p->fused || p->softmax != TSC_SOFTMAX_ONLINE))
        return tsc_error_set(TSC_ERR_ARG, "policy: +sum:aten8 and +sum:aten16 order the torch.sum calls of PyTorch "
                             "FlashAttention code (a tile's P-bar, dO*O): they need +unfused and the online softmax");
    if ((unsigned)p->vexp > TSC_VEXP_U20X16)
        return tsc_error_set(TSC_ERR_ARG, "policy: vexp %d out of range", (int)p->vexp);
    if (p->vexp != TSC_VEXP_OFF && (p->exp != TSC_EXP_E || p->fused || p->softmax != TSC_SOFTMAX_ONLINE ||
                                    p->sum_order != TSC_SUM_SEQ || p->scale != TSC_SCALE_S))
        return tsc_error_set(TSC_ERR_ARG, "policy: +vexp:u20x8 and +vexp:u20x16 model torch's CPU flash kernel: they "
                             "need +exp:e, +unfused, the online softmax, +scale:s and no +sum order of their own");
    if ((unsigned)p->exp > TSC_EXP_EXP2_MEMEFF)
        return tsc_error_set(TSC_ERR_ARG, "policy: exp mode %d out of range", (int)p->exp);
    if (p->exp != TSC_EXP_E && (p->softmax != TSC_SOFTMAX_ONLINE || p->scale != TSC_SCALE_S))
        return tsc_error_set(TSC_ERR_ARG, "policy: the +exp:exp2-* modes model FlashAttention-style kernels: "
                             "they need the online softmax and +scale:s");
    if (p->exp >= TSC_EXP_EXP2_TRITON && (p->p_offset || p->lazy_thr != 0 || p->poly_freq || !p->fused))
        return tsc_error_set(TSC_ERR_ARG, "policy: +exp:exp2-triton, exp2-scaled, exp2-prescaled and exp2-memeff "
                             "accumulate O-bar fused and take no +p-offset, +lazy-rescale or +exp2-poly");
    if (p->exp == TSC_EXP_E && (p->p_offset || p->lazy_thr != 0 || p->poly_freq))
        return tsc_error_set(TSC_ERR_ARG, "policy: +p-offset, +lazy-rescale and +exp2-poly belong to the exp2 kernels: "
                             "add +exp:exp2-fma (or exp2-mul)");
    if (p->p_offset < 0 || p->p_offset > 15 || !(p->lazy_thr >= 0 && p->lazy_thr <= 64))
        return tsc_error_set(TSC_ERR_ARG, "policy: +p-offset needs 0..15 and +lazy-rescale thr in [0, 64]; got %d and %g",
                             p->p_offset, p->lazy_thr);
    if (p->lazy_thr != 0 && p->stable.enabled)
        return tsc_error_set(TSC_ERR_ARG, "policy: +lazy-rescale and +stable both choose the running max; use one");
    if (p->poly_freq && (p->poly_freq < 2 || p->poly_freq > 32 || p->poly_res < 1 || p->poly_res >= p->poly_freq ||
                         p->poly_start < 0 || p->poly_start > 2048))
        return tsc_error_set(TSC_ERR_ARG, "policy: +exp2-poly needs freq in [2, 32], res in [1, freq) and start >= 0; "
                             "got freq=%d res=%d start=%d", p->poly_freq, p->poly_res, p->poly_start);
    if (p->softmax == TSC_SOFTMAX_MATERIALIZED && p->stable.enabled)
        return tsc_error_set(TSC_ERR_ARG, "policy: +stable changes FlashAttention's running max; a "
                             "materialized softmax has none (use +online)");
    if (!(p->stable.beta >= 1 && p->stable.beta <= 64) || !(p->stable.eps >= 0 && p->stable.eps <= 1) ||
        !(p->stable.gap > 0 && p->stable.gap <= 64))
        return tsc_error_set(TSC_ERR_ARG,
                             "policy: +stable needs beta in [1, 64], eps in [0, 1], gap in (0, 64]; "
                             "got beta=%g eps=%g gap=%g", p->stable.beta, p->stable.eps, p->stable.gap);
    return TSC_OK;
}

int tsc_policy_equal(const tsc_policy_t *a, const tsc_policy_t *b) {
    int sr = 0;
    for (int s = 0; s < TSC_STAGE_COUNT; s++) sr |= a->mode[s] == TSC_ROUND_STOCHASTIC;
    if (a->preset != b->preset || (sr && a->seed != b->seed) || a->delta_src != b->delta_src ||
        a->fused != b->fused || a->torch_quirks != b->torch_quirks || a->block_q != b->block_q ||
        a->block_k != b->block_k || a->stable.enabled != b->stable.enabled ||
        a->stable.beta != b->stable.beta || a->stable.eps != b->stable.eps ||
        a->stable.gap != b->stable.gap || a->softmax != b->softmax || a->ds_scale != b->ds_scale ||
        a->scale != b->scale || a->norm != b->norm || a->gqa_sum != b->gqa_sum || a->exp != b->exp ||
        a->sum_order != b->sum_order || a->vexp != b->vexp ||
        a->p_offset != b->p_offset || a->lazy_thr != b->lazy_thr || a->poly_freq != b->poly_freq ||
        (a->poly_freq && (a->poly_res != b->poly_res || a->poly_start != b->poly_start)))
        return 0;
    for (int s = 0; s < TSC_STAGE_COUNT; s++)
        if (a->fmt[s] != b->fmt[s] || a->mode[s] != b->mode[s]) return 0;
    return 1;
}

/* ---------------------------------------------------------------- the modifiers */

/* A modifier row: how "+NAME[:ARGS]" is parsed, how the canonical printer writes what it sets, and its
 * help and description. Three kinds:
 *   enum rows   set one int-sized enum field to a named value, either as "+NAME:VALUE" or, "bare", with
 *               each value its own modifier ("+fused", "+unfused"); parse, print and help come from the
 *               field's offset and value names;
 *   mode rows   set a rounding mode on listed stages (or on every low-precision stage);
 *   own rows    (+FMT:STAGE, +tile, +stable) parse and print with their own functions.
 * The canonical form prints the rows in table order, each only where the policy differs from its preset. */
typedef struct modifier modifier_t;
typedef tsc_status_t (*mod_parse_fn)(const modifier_t *m, tsc_policy_t *p, const char *name, char *args,
                                     const char *whole);
typedef tsc_status_t (*mod_print_fn)(const modifier_t *m, tsc_strbuf_t *sb, const tsc_policy_t *p,
                                     const tsc_policy_t *base);
struct modifier {
    const char *name;            /* "tile"; NULL for +FMT:STAGE and for bare enum rows */
    const char *syntax;          /* help form of own and mode rows; enum rows derive theirs */
    const char *desc;            /* one line (docs/PRESETS.md, section Modifiers) */
    mod_parse_fn parse;
    mod_print_fn print;
    size_t field;                /* enum rows: offsetof the field in tsc_policy_t */
    const char *const *values;   /* enum rows: the name of each enum value, in enum order */
    int n_values, bare;
    tsc_round_t mode;            /* mode rows */
};

/* Every enum field an enum row sets is int-sized (the rows read and write it through an int). */
_Static_assert(sizeof(tsc_delta_src_t) == sizeof(int) && sizeof(tsc_softmax_t) == sizeof(int) &&
               sizeof(tsc_ds_scale_t) == sizeof(int) && sizeof(tsc_scale_t) == sizeof(int) &&
               sizeof(tsc_softmax_norm_t) == sizeof(int) && sizeof(tsc_gqa_sum_t) == sizeof(int) &&
               sizeof(tsc_sum_order_t) == sizeof(int) && sizeof(tsc_vexp_t) == sizeof(int) &&
               sizeof(tsc_exp_t) == sizeof(int),
               "enum modifier fields must be int-sized");

static int *enum_field(const modifier_t *m, tsc_policy_t *p) { return (int *)(void *)((char *)p + m->field); }
static int enum_value(const modifier_t *m, const tsc_policy_t *p) {
    return *(const int *)(const void *)((const char *)p + m->field);
}

static int parse_double_full(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

static int parse_u64_full(const char *s, uint64_t *out) {
    char *end;
    if (!*s || *s == '-') return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end) return -1;
    *out = (uint64_t)v;
    return 0;
}

static int parse_int_full(const char *s, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

/* ":a, :b or :c", the choices of an enum row with an argument. */
static void enum_choices(const modifier_t *m, tsc_strbuf_t *sb) {
    for (int i = 0; i < m->n_values; i++)
        tsc_strbuf_printf(sb, "%s:%s", i == 0 ? "" : i + 1 < m->n_values ? ", " : " or ", m->values[i]);
}

static tsc_status_t parse_enum(const modifier_t *m, tsc_policy_t *p, const char *name, char *args,
                               const char *whole) {
    if (m->bare) {
        if (args)
            return tsc_error_set(TSC_ERR_ARG, "policy '%s': +%s takes no arguments; %s", whole, name, help());
        for (int i = 0; i < m->n_values; i++)
            if (strcmp(name, m->values[i]) == 0) *enum_field(m, p) = i;
        return TSC_OK;
    }
    for (int i = 0; args && i < m->n_values; i++)
        if (strcmp(args, m->values[i]) == 0) {
            *enum_field(m, p) = i;
            return TSC_OK;
        }
    tsc_strbuf_t sb;
    tsc_strbuf_init(&sb);
    enum_choices(m, &sb);
    tsc_status_t st = tsc_error_set(TSC_ERR_ARG, "policy '%s': +%s needs %s; %s", whole, name,
                                    tsc_strbuf_str(&sb), help());
    tsc_strbuf_free(&sb);
    return st;
}

static tsc_status_t print_enum(const modifier_t *m, tsc_strbuf_t *sb, const tsc_policy_t *p,
                               const tsc_policy_t *base) {
    int v = enum_value(m, p);
    if (v == enum_value(m, base)) return TSC_OK;
    if (v < 0 || v >= m->n_values) return tsc_error_set(TSC_ERR_ARG, "policy format: value %d out of range", v);
    if (m->bare) tsc_strbuf_printf(sb, "+%s", m->values[v]);
    else tsc_strbuf_printf(sb, "+%s:%s", m->name, m->values[v]);
    return TSC_OK;
}

/* +MODE[:seed=N][,STAGE...]: the mode on the listed stages, or with none listed on every low-precision stage. */
static tsc_status_t parse_mode(const modifier_t *m, tsc_policy_t *p, const char *name, char *args,
                               const char *whole) {
    int any_stage = 0;
    char *save = NULL;
    int mark[TSC_STAGE_COUNT] = {0};
    for (char *tok = args ? strtok_r(args, ",", &save) : NULL; tok; tok = strtok_r(NULL, ",", &save)) {
        if (strncmp(tok, "seed=", 5) == 0) {
            if (m->mode != TSC_ROUND_STOCHASTIC || parse_u64_full(tok + 5, &p->seed))
                return tsc_error_set(TSC_ERR_ARG, "policy '%s': bad '%s' in +%s (seed=N, N a "
                                     "non-negative integer, only with +sr); %s", whole, tok, name, help());
            continue;
        }
        tsc_stage_t st;
        if (tsc_stage_parse(tok, &st) != TSC_OK)
            return tsc_error_set(TSC_ERR_ARG, "policy '%s': unknown stage '%s' in +%s; %s", whole, tok, name,
                                 help());
        mark[st] = 1;
        any_stage = 1;
    }
    for (int s = 0; s < TSC_STAGE_COUNT; s++)
        if (any_stage ? mark[s] : fmt_is_low(p->fmt[s])) p->mode[s] = m->mode;
    return TSC_OK;
}

/* The stages that have the mode where the preset does not; bare when exactly the low-precision ones. */
static tsc_status_t print_mode(const modifier_t *m, tsc_strbuf_t *sb, const tsc_policy_t *p,
                               const tsc_policy_t *base) {
    int all_low = 1, any = 0, sep = 0;
    for (int s = 0; s < TSC_STAGE_COUNT; s++) {
        int has = p->mode[s] == m->mode && base->mode[s] != m->mode;
        any |= has;
        if (has != fmt_is_low(p->fmt[s])) all_low = 0;
    }
    if (!any) return TSC_OK;
    tsc_strbuf_printf(sb, "+%s", m->name);
    if (m->mode == TSC_ROUND_STOCHASTIC && p->seed != 0) {
        tsc_strbuf_printf(sb, ":seed=%llu", (unsigned long long)p->seed);
        sep = 1;
    }
    for (int s = 0; !all_low && s < TSC_STAGE_COUNT; s++)
        if (p->mode[s] == m->mode && base->mode[s] != m->mode) {
            tsc_strbuf_printf(sb, "%s%s", sep ? "," : ":", stage_names[s]);
            sep = 1;
        }
    return TSC_OK;
}

/* +FMT:STAGE[,STAGE...] (FMT as tsc_format_name prints it, or one of its aliases). */
static tsc_status_t parse_format(const modifier_t *m, tsc_policy_t *p, const char *name, char *args,
                                 const char *whole) {
    (void)m;
    tsc_format_t fmt;
    char *save = NULL;
    if (tsc_format_parse(name, &fmt) != TSC_OK) return TSC_ERR_ARG; /* the caller's "unknown modifier" */
    for (char *tok = strtok_r(args, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        tsc_stage_t st;
        if (tsc_stage_parse(tok, &st) != TSC_OK)
            return tsc_error_set(TSC_ERR_ARG, "policy '%s': unknown stage '%s' in +%s; %s", whole, tok, name,
                                 help());
        if (st == TSC_STAGE_ACC && fmt != TSC_FMT_FP32 && fmt != TSC_FMT_FP64)
            return tsc_error_set(TSC_ERR_ARG, "policy '%s': the acc stage must be fp32 or fp64; %s", whole,
                                 help());
        tsc_policy_stage_set(p, st, fmt);
    }
    return TSC_OK;
}

/* The stages whose format differs from the preset, grouped by format in format order. */
static tsc_status_t print_format(const modifier_t *m, tsc_strbuf_t *sb, const tsc_policy_t *p,
                                 const tsc_policy_t *base) {
    (void)m;
    for (int f = 0; f < TSC_FMT_COUNT; f++) {
        int first = 1;
        for (int s = 0; s < TSC_STAGE_COUNT; s++) {
            if (p->fmt[s] == base->fmt[s] || (int)p->fmt[s] != f) continue;
            if (first) tsc_strbuf_printf(sb, "+%s:%s", tsc_format_name((tsc_format_t)f), stage_names[s]);
            else tsc_strbuf_printf(sb, ",%s", stage_names[s]);
            first = 0;
        }
    }
    return TSC_OK;
}

static tsc_status_t parse_tile(const modifier_t *m, tsc_policy_t *p, const char *name, char *args,
                               const char *whole) {
    (void)m, (void)name;
    int got = 0;
    char *save = NULL;
    for (char *tok = args ? strtok_r(args, ",", &save) : NULL; tok; tok = strtok_r(NULL, ",", &save)) {
        int *dst = NULL;
        if (strncmp(tok, "q=", 2) == 0) dst = &p->block_q;
        else if (strncmp(tok, "k=", 2) == 0) dst = &p->block_k;
        if (!dst || parse_int_full(tok + 2, 1, 65536, dst))
            return tsc_error_set(TSC_ERR_ARG, "policy '%s': bad '%s' in +tile (expected q=BR,k=BC "
                                 "with integers in [1, 65536]); %s", whole, tok, help());
        got = 1;
    }
    if (!got) return tsc_error_set(TSC_ERR_ARG, "policy '%s': +tile needs q=BR and/or k=BC; %s", whole, help());
    return TSC_OK;
}

static tsc_status_t print_tile(const modifier_t *m, tsc_strbuf_t *sb, const tsc_policy_t *p,
                               const tsc_policy_t *base) {
    (void)m;
    if (p->block_q != base->block_q || p->block_k != base->block_k)
        tsc_strbuf_printf(sb, "+tile:q=%d,k=%d", p->block_q, p->block_k);
    return TSC_OK;
}

static tsc_status_t parse_stable(const modifier_t *m, tsc_policy_t *p, const char *name, char *args,
                                 const char *whole) {
    (void)m, (void)name;
    char *save = NULL;
    p->stable.enabled = 1;
    for (char *tok = args ? strtok_r(args, ",", &save) : NULL; tok; tok = strtok_r(NULL, ",", &save)) {
        double *dst = NULL;
        if (strncmp(tok, "beta=", 5) == 0) dst = &p->stable.beta;
        else if (strncmp(tok, "eps=", 4) == 0) dst = &p->stable.eps;
        else if (strncmp(tok, "gap=", 4) == 0) dst = &p->stable.gap;
        if (!dst || parse_double_full(strchr(tok, '=') + 1, dst))
            return tsc_error_set(TSC_ERR_ARG, "policy '%s': bad '%s' in +stable (expected "
                                 "beta=B,eps=E,gap=G with numbers); %s", whole, tok, help());
    }
    return TSC_OK;
}

/* Shortest decimal that reads back as x; exponent form for small magnitudes ("1e-3"). Never
 * with a '+' (it separates modifiers): %.1g prints 10 as "1e+01", so such forms are skipped
 * ("10"), and a '+' left in an exponent (|x| >= 1e17, outside every range) is dropped. */
static void fmt_num(double x, char *out, size_t size) {
    for (int prec = 1; prec <= 17; prec++) {
        if (x != 0 && fabs(x) < 1e-2) snprintf(out, size, "%.*e", prec - 1, x);
        else snprintf(out, size, "%.*g", prec, x);
        if (strtod(out, NULL) == x && !strchr(out, '+')) break;
    }
    /* tidy exponent: "1e-03" -> "1e-3", "1e+17" -> "1e17" */
    char *e = strchr(out, 'e');
    if (e) {
        char *d = e + 1;
        if (*d == '+') memmove(d, d + 1, strlen(d));
        if (*d == '-') d++;
        char *z = d;
        while (*z == '0' && z[1]) z++;
        if (z != d) memmove(d, z, strlen(z) + 1);
    }
}

static tsc_status_t print_stable(const modifier_t *m, tsc_strbuf_t *sb, const tsc_policy_t *p,
                                 const tsc_policy_t *base) {
    (void)m, (void)base;
    char b[40], e[40], g[40];
    fmt_num(p->stable.beta, b, sizeof b);
    fmt_num(p->stable.eps, e, sizeof e);
    fmt_num(p->stable.gap, g, sizeof g);
    if (p->stable.enabled) {
        tsc_strbuf_printf(sb, "+stable:beta=%s,eps=%s", b, e);
        if (p->stable.gap != 1.0) tsc_strbuf_printf(sb, ",gap=%s", g);
    } else if (p->stable.beta != 2.0 || p->stable.eps != 1e-3 || p->stable.gap != 1.0) {
        /* parameters without the rule (only reachable through the struct): not expressible */
        return tsc_error_set(TSC_ERR_ARG, "policy format: stabilisation parameters beta=%s eps=%s "
                             "gap=%s set while +stable is off have no string form", b, e, g);
    }
    return TSC_OK;
}

static tsc_status_t parse_p_offset(const modifier_t *m, tsc_policy_t *p, const char *name, char *args,
                                   const char *whole) {
    (void)m, (void)name;
    if (!args || parse_int_full(args, 0, 15, &p->p_offset))
        return tsc_error_set(TSC_ERR_ARG, "policy '%s': +p-offset needs an integer in [0, 15] (FP8 kernels: 8); %s",
                             whole, help());
    return TSC_OK;
}

static tsc_status_t print_p_offset(const modifier_t *m, tsc_strbuf_t *sb, const tsc_policy_t *p,
                                   const tsc_policy_t *base) {
    (void)m;
    if (p->p_offset != base->p_offset) tsc_strbuf_printf(sb, "+p-offset:%d", p->p_offset);
    return TSC_OK;
}

static tsc_status_t parse_lazy(const modifier_t *m, tsc_policy_t *p, const char *name, char *args,
                               const char *whole) {
    (void)m, (void)name;
    double v;
    if (!args || strncmp(args, "thr=", 4) != 0 || parse_double_full(args + 4, &v) || !(v >= 0 && v <= 64))
        return tsc_error_set(TSC_ERR_ARG, "policy '%s': +lazy-rescale needs thr=X, X in [0, 64] log2 units "
                             "(FA4: 8); %s", whole, help());
    p->lazy_thr = v;
    return TSC_OK;
}

static tsc_status_t print_lazy(const modifier_t *m, tsc_strbuf_t *sb, const tsc_policy_t *p,
                               const tsc_policy_t *base) {
    (void)m;
    if (p->lazy_thr != base->lazy_thr) {
        char v[40];
        fmt_num(p->lazy_thr, v, sizeof v);
        tsc_strbuf_printf(sb, "+lazy-rescale:thr=%s", v);
    }
    return TSC_OK;
}

static tsc_status_t parse_poly(const modifier_t *m, tsc_policy_t *p, const char *name, char *args,
                               const char *whole) {
    (void)m, (void)name;
    char *save = NULL;
    int freq = -1, res = 4, start = 0;
    for (char *tok = args ? strtok_r(args, ",", &save) : NULL; tok; tok = strtok_r(NULL, ",", &save)) {
        int *dst = strncmp(tok, "freq=", 5) == 0 ? &freq : strncmp(tok, "res=", 4) == 0 ? &res
                   : strncmp(tok, "start=", 6) == 0 ? &start : NULL;
        if (!dst || parse_int_full(strchr(tok, '=') + 1, 0, 2048, dst))
            return tsc_error_set(TSC_ERR_ARG, "policy '%s': bad '%s' in +exp2-poly (expected freq=F[,res=R][,start=S] "
                                 "with integers; F 0 turns it off); %s", whole, tok, help());
    }
    if (freq < 0)
        return tsc_error_set(TSC_ERR_ARG, "policy '%s': +exp2-poly needs freq=F; %s", whole, help());
    p->poly_freq = freq;
    p->poly_res = freq ? res : 0;
    p->poly_start = freq ? start : 0;
    return TSC_OK;
}

static tsc_status_t print_poly(const modifier_t *m, tsc_strbuf_t *sb, const tsc_policy_t *p,
                               const tsc_policy_t *base) {
    (void)m;
    if (p->poly_freq != base->poly_freq || p->poly_res != base->poly_res || p->poly_start != base->poly_start)
        tsc_strbuf_printf(sb, "+exp2-poly:freq=%d,res=%d,start=%d", p->poly_freq, p->poly_res, p->poly_start);
    return TSC_OK;
}

static const char *const delta_names[] = {"lp-delta", "hp-delta", "dpp-delta"};
static const char *const exp_names[] = {"e",           "exp2-fma",       "exp2-mul",   "exp2-triton",
                                        "exp2-scaled", "exp2-prescaled", "exp2-memeff"};
static const char *const fused_names[] = {"unfused", "fused"};
static const char *const softmax_names[] = {"online", "materialized"};
static const char *const ds_scale_names[] = {"last", "first", "rounded"};
static const char *const scale_names[] = {"s", "s-lp", "qk"};
static const char *const norm_names[] = {"div", "recip"};
static const char *const gqa_names[] = {"once", "each", "wide"};
static const char *const sum_names[] = {"seq", "aten8", "aten16"};
static const char *const vexp_names[] = {"off", "u20x8", "u20x16"};

#define ENUM_ROW(nm, fld, names, bare_, d)                                                           \
    {nm, NULL, d, parse_enum, print_enum, offsetof(tsc_policy_t, fld), names,                        \
     (int)(sizeof names / sizeof names[0]), bare_, TSC_ROUND_NEAREST_EVEN}
#define MODE_ROW(nm, syn, md, d) {nm, syn, d, parse_mode, print_mode, 0, NULL, 0, 0, md}
#define OWN_ROW(nm, syn, prs, prt, d) {nm, syn, d, prs, prt, 0, NULL, 0, 0, TSC_ROUND_NEAREST_EVEN}

/* In canonical printing order. */
static const modifier_t modifiers[] = {
    OWN_ROW(NULL, "+FMT:STAGE[,STAGE...]", parse_format, print_format,
            "hold the listed stages in FMT, e.g. +fp32:pv or +fp32:oacc,o (the acc stage only in fp32 or fp64)"),
    ENUM_ROW(NULL, delta_src, delta_names, 1,
             "delta = rowsum(dO * O) with the O this forward returned (the presets' default), with O from an all-FP32 forward, or delta = rowsum(dP * P)"),
    ENUM_ROW(NULL, fused, fused_names, 1,
             "P-bar V (and l, dQ/dK/dV) summed per tile and added afterwards (the PyTorch code), or accumulated straight into the running accumulators (FA2 CUDA)"),
    OWN_ROW("tile", "+tile:q=BR,k=BC", parse_tile, print_tile, "tile sizes Br x Bc (1..65536)"),
    ENUM_ROW(NULL, softmax, softmax_names, 1,
             "FlashAttention's online softmax over key tiles, or softmax(S) over the whole row, then P V (eager PyTorch, SDPA math)"),
    ENUM_ROW("ds-scale", ds_scale, ds_scale_names, 0, "where alpha enters dS (tsc_ds_scale_t)"),
    ENUM_ROW("scale", scale, scale_names, 0, "alpha on the scores, the same with alpha rounded to the scores' format first, or sqrt(alpha) on Q and on K (tsc_scale_t)"),
    ENUM_ROW("norm", norm, norm_names, 0, "P-bar / l or P-bar * (1/l) (materialized softmax), O-bar / l or O-bar * (1/l) (online)"),
    ENUM_ROW("gqa-sum", gqa_sum, gqa_names, 0, "GQA: the group's rounded dK, dV summed then rounded, or rounded after each head's add, or summed unrounded then rounded once (SDPA's enable_gqa)"),
    ENUM_ROW("sum", sum_order, sum_names, 0, "the order of l's FP32 tile sums of P-bar and of delta's sums of dO*O: key order, or ATen's CPU torch.sum (a cascade over 8- or 16-lane vectors: torch's AVX2 or AVX-512 kernels; +unfused online softmax only)"),
    ENUM_ROW("vexp", vexp, vexp_names, 0, "torch's CPU flash kernel's exp and tile sum on 8 or 16 lanes: exp_u20 on the vector columns of a key tile, libm exp on the tail, lane sums then a shuffle tree then the tail, l = fma(c, l, sum) (+exp:e, +unfused, online softmax)"),
    ENUM_ROW("exp", exp, exp_names, 0, "exp(S - m) with S = alpha*QK^T, or the CUDA kernels' exp2 with alpha*log2(e) folded into one FFMA, or into a rounded product, or the Triton tutorial's, FlexAttention's, FlexAttention's PRESCALE_QK or PyTorch's mem-efficient kernel's form (tsc_exp_t, tsc_attention.h)"),
    OWN_ROW("p-offset", "+p-offset:N", parse_p_offset, print_p_offset,
            "exp2 kernels: the row max maps to 2^N before P-bar is rounded (FP8 kernels: 8); log l is taken of l*2^-N"),
    OWN_ROW("lazy-rescale", "+lazy-rescale:thr=X", parse_lazy, print_lazy,
            "exp2 kernels: keep the running max while a new tile raises it by at most X log2 units (P-bar up to 2^X; FA4: 8)"),
    OWN_ROW("exp2-poly", "+exp2-poly:freq=F,res=R,start=S", parse_poly, print_poly,
            "exp2 kernels: FA4's degree-3 polynomial exp2 on the columns its schedule selects (32-column fragments S..last-1, pairs k with k mod F >= F-R)"),
    MODE_ROW("rz", "+rz[:STAGE,...]", TSC_ROUND_TOWARD_ZERO,
             "round toward zero on the listed stages, or with none listed on every stage narrower than FP32"),
    MODE_ROW("sr", "+sr[:seed=N][,STAGE...]", TSC_ROUND_STOCHASTIC, "stochastic rounding (default seed 0), stages as +rz (an FP32 stage rounds only when the policy computes in FP64)"),
    MODE_ROW("rne", "+rne[:STAGE,...]", TSC_ROUND_NEAREST_EVEN, "round to nearest even (every preset's mode), stages as +rz"),
    OWN_ROW("stable", "+stable[:beta=B,eps=E,gap=G]", parse_stable, print_stable,
            "the stabilised softmax of Algorithm 3 (defaults beta=2, tie tolerance eps=1e-3, edge-case shift gap=1)"),
};
#define N_MODIFIERS ((int)(sizeof modifiers / sizeof modifiers[0]))

/* The row a typed name selects (bare enum rows by value name; +FMT:STAGE, tried last, by a format name
 * with stages), or NULL. */
static const modifier_t *modifier_find(const char *name, const char *args) {
    for (int i = 0; i < N_MODIFIERS; i++) {
        const modifier_t *m = &modifiers[i];
        if (m->name && strcmp(m->name, name) == 0) return m;
        for (int v = 0; m->bare && v < m->n_values; v++)
            if (strcmp(m->values[v], name) == 0) return m;
    }
    tsc_format_t fmt;
    for (int i = 0; args && i < N_MODIFIERS; i++)
        if (modifiers[i].parse == parse_format && tsc_format_parse(name, &fmt) == TSC_OK) return &modifiers[i];
    tsc_error_clear();
    return NULL;
}

/* A row's help form: its syntax, or an enum row's "+a, +b" / "+name:a|b". */
static void modifier_syntax(const modifier_t *m, tsc_strbuf_t *sb) {
    if (m->syntax) {
        tsc_strbuf_puts(sb, m->syntax);
        return;
    }
    for (int v = 0; v < m->n_values; v++) {
        if (m->bare) tsc_strbuf_printf(sb, "%s+%s", v ? ", " : "", m->values[v]);
        else tsc_strbuf_printf(sb, "%s%s", v ? "|" : "+", v ? m->values[v] : m->name);
        if (!m->bare && v == 0) tsc_strbuf_printf(sb, ":%s", m->values[0]);
    }
}

int tsc_policy_modifier_count(void) { return N_MODIFIERS; }

tsc_status_t tsc_policy_modifier_info(int i, char *syntax, size_t size, const char **desc) {
    if (i < 0 || i >= N_MODIFIERS || !syntax || size == 0)
        return tsc_error_set(TSC_ERR_ARG, "policy modifier %d out of range (0..%d)", i, N_MODIFIERS - 1);
    tsc_strbuf_t sb;
    tsc_strbuf_init(&sb);
    modifier_syntax(&modifiers[i], &sb);
    tsc_status_t st = tsc_strbuf_status(&sb);
    if (st == TSC_OK && sb.len >= size) st = tsc_error_set(TSC_ERR_ARG, "policy modifier %d: buffer too small", i);
    snprintf(syntax, size, "%s", st == TSC_OK ? tsc_strbuf_str(&sb) : "");
    tsc_strbuf_free(&sb);
    if (desc) *desc = modifiers[i].desc;
    return st;
}

/* "valid presets: NAME, ...; modifiers: ...; stages: ... (example: ...)": from the preset rows, the modifier
 * rows, the format names and the stage names, built once. */
static const char *help_text;
static pthread_once_t help_once = PTHREAD_ONCE_INIT;

static void help_build(void) {
    tsc_strbuf_t sb;
    tsc_strbuf_init(&sb);
    tsc_strbuf_puts(&sb, "valid presets: ");
    for (int i = 0; i < N_PRESETS; i++) tsc_strbuf_printf(&sb, "%s%s", presets[i].name, i + 1 < N_PRESETS ? ", " : "; ");
    tsc_strbuf_puts(&sb, "modifiers: ");
    for (int i = 0; i < N_MODIFIERS; i++) {
        if (i) tsc_strbuf_puts(&sb, ", ");
        modifier_syntax(&modifiers[i], &sb);
        if (modifiers[i].parse == parse_format) {
            tsc_strbuf_puts(&sb, " (FMT:");
            for (int f = 0; f < TSC_FMT_COUNT; f++) tsc_strbuf_printf(&sb, " %s", tsc_format_name((tsc_format_t)f));
            tsc_strbuf_puts(&sb, ")");
        }
    }
    tsc_strbuf_puts(&sb, "; stages:");
    for (int s = 0; s < TSC_STAGE_COUNT; s++) tsc_strbuf_printf(&sb, " %s", stage_names[s]);
    tsc_strbuf_puts(&sb, " (example: bf16-fa2+stable:beta=2,eps=1e-3)");
    help_text = tsc_strbuf_take(&sb); /* kept for the process; NULL only when out of memory */
}

static const char *help(void) {
    (void)pthread_once(&help_once, help_build); /* fails only on a bad once object */
    return help_text ? help_text : "(no memory for the list of presets and modifiers)";
}

static tsc_status_t apply_modifier(tsc_policy_t *p, char *mod, const char *whole) {
    char *args = strchr(mod, ':');
    if (args) *args++ = '\0';
    if (args && !*args)
        return tsc_error_set(TSC_ERR_ARG, "policy '%s': modifier +%s has an empty argument list; %s", whole, mod,
                             help());
    const modifier_t *m = modifier_find(mod, args);
    if (!m)
        return tsc_error_set(TSC_ERR_ARG, "policy '%s': unknown modifier '+%s%s'; %s", whole, mod,
                             args ? ":..." : "", help());
    return m->parse(m, p, mod, args, whole);
}

tsc_status_t tsc_policy_parse(const char *s, tsc_policy_t *out) {
    if (!s || !out) return tsc_error_set(TSC_ERR_ARG, "policy: NULL string; %s", help());
    size_t len = strlen(s);
    if (len == 0 || len >= 4096)
        return tsc_error_set(TSC_ERR_ARG, "policy: empty or overlong string; %s", help());
    char *buf = malloc(len + 1);
    if (!buf) return tsc_error_set(TSC_ERR_NOMEM, "policy '%s': out of memory", s);
    memcpy(buf, s, len + 1);
    tsc_status_t st = TSC_OK;
    char *plus = strchr(buf, '+');
    if (plus) *plus = '\0';
    tsc_preset_t preset;
    tsc_policy_t p;
    if (tsc_preset_parse(buf, &preset) != TSC_OK) {
        st = tsc_error_set(TSC_ERR_ARG, "policy '%s': unknown preset '%s'; %s", s, buf, help());
        goto done;
    }
    TSC_INVARIANT(tsc_policy_preset(preset, &p) == TSC_OK); /* tsc_preset_parse gave it */
    while (plus) {
        char *mod = plus + 1;
        plus = strchr(mod, '+');
        if (plus) *plus = '\0';
        if (!*mod) {
            st = tsc_error_set(TSC_ERR_ARG, "policy '%s': empty modifier; %s", s, help());
            goto done;
        }
        if ((st = apply_modifier(&p, mod, s)) != TSC_OK) goto done;
    }
    if ((st = tsc_policy_validate(&p)) != TSC_OK) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", tsc_error_last());
        st = tsc_error_set(st, "policy '%s': %s; %s", s, detail, help());
        goto done;
    }
    *out = p;
done:
    free(buf);
    return st;
}

/* ---- canonical printing: the preset's name, then each modifier row's part ---- */

tsc_status_t tsc_policy_format(const tsc_policy_t *p, char *buf, size_t size) {
    if (!p || !buf || size == 0) return tsc_error_set(TSC_ERR_ARG, "policy format: NULL or empty buffer");
    buf[0] = '\0';
    if (tsc_policy_validate(p) != TSC_OK) return TSC_ERR_ARG;
    tsc_policy_t base;
    TSC_INVARIANT(tsc_policy_preset(p->preset, &base) == TSC_OK); /* validated above */
    if (p->torch_quirks != base.torch_quirks)
        return tsc_error_set(TSC_ERR_ARG, "policy format: torch_quirks differs from preset %s and "
                             "has no string form", tsc_preset_name(p->preset));
    tsc_strbuf_t sb;
    tsc_strbuf_init(&sb);
    tsc_strbuf_puts(&sb, tsc_preset_name(p->preset));
    tsc_status_t st = TSC_OK;
    for (int i = 0; i < N_MODIFIERS && st == TSC_OK; i++) st = modifiers[i].print(&modifiers[i], &sb, p, &base);
    if (st == TSC_OK) st = tsc_strbuf_status(&sb);
    if (st == TSC_OK && sb.len >= size)
        st = tsc_error_set(TSC_ERR_ARG, "policy format: buffer of %zu bytes too small", size);
    if (st == TSC_OK) memcpy(buf, tsc_strbuf_str(&sb), sb.len + 1);
    tsc_strbuf_free(&sb);
    return st;
}
