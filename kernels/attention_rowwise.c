/* attention_rowwise.c: the "cpu-rowwise" backend, the CUDA exact mode's per-chain functions
 * (attn_rowwise_internal.h) run on the CPU, one row (or key) at a time, and tsc_rw_policy, which
 * both it and the CUDA backend use to reduce a policy to those functions' numbers.
 *
 * It exists to check the GPU arithmetic where there is no GPU: it must give the reference's bits
 * in every output and tile statistic (tests/kernels/test_backends.c). It is slower than cpu-ref
 * (no shared loads; every (row, key) pair's score is formed three times in the backward) and
 * is never the default. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#else
#pragma GCC optimize("fp-contract=off")
#endif

#include "attention_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

_Static_assert((int)TSC_HD_TF32 == TSC_FMT_TF32 && (int)TSC_HD_BF16 == TSC_FMT_BF16 &&
               (int)TSC_HD_FP16 == TSC_FMT_FP16 && (int)TSC_HD_E8M6 == TSC_FMT_E8M6 &&
               (int)TSC_HD_E8M1 == TSC_FMT_E8M1 && TSC_FMT_E8M1 - TSC_FMT_E8M6 == 5,
               "hd_math_internal.h's format numbers are tsc_format_t's");

tsc_status_t tsc_rw_policy(const tsc_policy_t *pol, const tsc_attn_dims_t *dims, tsc_rw_pol_t *out) {
    memset(out, 0, sizeof *out);
    for (int s = 0; s < TSC_STAGE_COUNT; s++) {
        const tsc_format_t f = pol->fmt[s];
        if (f != TSC_FMT_FP32 && f != TSC_FMT_TF32 && f != TSC_FMT_BF16 && f != TSC_FMT_FP16 &&
            (f < TSC_FMT_E8M6 || f > TSC_FMT_E8M1))
            return tsc_error_set(TSC_ERR_UNSUPPORTED, "attention: the GPU kernels hold stages in fp32, tf32, bf16, "
                                 "fp16 or e8m6 ... e8m1; stage %s is %s", tsc_stage_name((tsc_stage_t)s),
                                 tsc_format_name(f));
        if (pol->mode[s] == TSC_ROUND_STOCHASTIC && f != TSC_FMT_FP32)
            return tsc_error_set(TSC_ERR_UNSUPPORTED, "attention: the GPU kernels do not round stochastically "
                                 "(stage %s)", tsc_stage_name((tsc_stage_t)s));
        out->fmt[s] = (unsigned char)f;
        out->mode[s] = (unsigned char)(pol->mode[s] == TSC_ROUND_TOWARD_ZERO ? TSC_HD_RZ : TSC_HD_RNE);
    }
    if (pol->vexp != TSC_VEXP_OFF)
        return tsc_error_set(TSC_ERR_UNSUPPORTED, "attention: the GPU kernels do not model torch's CPU flash kernel "
                             "(+vexp:u20x8 and +vexp:u20x16 are CPU-reference policies)");
    if (pol->exp != TSC_EXP_E || pol->norm != TSC_SOFTMAX_NORM_DIV)
        return tsc_error_set(TSC_ERR_UNSUPPORTED, "attention: the GPU kernels model exp(S - m) and O = O-bar / l "
                             "(+exp:exp2-fma, +exp:exp2-mul and +norm:recip are CPU-reference policies)");
    if (pol->softmax != TSC_SOFTMAX_ONLINE)
        return tsc_error_set(TSC_ERR_UNSUPPORTED, "attention: the GPU kernels run the online softmax only "
                             "(+materialized is a CPU-reference policy)");
    out->T = dims->T;
    out->D = dims->D;
    out->causal = dims->causal != 0;
    out->Bc = pol->block_k < dims->T ? pol->block_k : dims->T;
    out->Br = pol->block_q < dims->T ? pol->block_q : dims->T;
    out->fused = pol->fused != 0;
    out->quirks = pol->torch_quirks != 0;
    out->stable = pol->stable.enabled != 0;
    out->delta_src = pol->delta_src == TSC_DELTA_HP_O ? TSC_RW_DELTA_HP
                     : pol->delta_src == TSC_DELTA_DPP ? TSC_RW_DELTA_DPP : TSC_RW_DELTA_LP;
    out->ds_scale = pol->ds_scale == TSC_DS_SCALE_FIRST     ? TSC_RW_DS_FIRST
                    : pol->ds_scale == TSC_DS_SCALE_ROUNDED ? TSC_RW_DS_ROUNDED : TSC_RW_DS_LAST;
    if (pol->gqa_sum == TSC_GQA_SUM_WIDE)
        return tsc_error_set(TSC_ERR_UNSUPPORTED, "attention: the GPU kernels round each head's dK, dV before the GQA "
                             "sum (+gqa-sum:wide is a CPU-reference policy)");
    if (pol->sum_order != TSC_SUM_SEQ)
        return tsc_error_set(TSC_ERR_UNSUPPORTED, "attention: the GPU kernels sum rows in key order "
                             "(+sum:aten8 and +sum:aten16 are CPU-reference policies)");
    out->gqa_each = pol->gqa_sum == TSC_GQA_SUM_EACH;
    out->scale_qk = pol->scale == TSC_SCALE_QK;
    /* as the reference's head context: α in float, rounded to S / DS under +scale:s-lp */
    out->alpha = out->ds_alpha = out->scale_qk ? 1.0f : (float)dims->scale;
    out->qk_scale = out->scale_qk ? (float)sqrt(dims->scale) : 1.0f;
    if (pol->scale == TSC_SCALE_S_LP) {
        out->alpha = tsc_rw_r(out, TSC_RW_S, out->alpha);
        out->ds_alpha = tsc_rw_r(out, TSC_RW_DS, out->ds_alpha);
    }
    out->beta = (float)pol->stable.beta;
    out->gap = (float)pol->stable.gap;
    out->eps = (float)(pol->stable.enabled ? pol->stable.eps : 1e-3);
    return TSC_OK;
}

void tsc_rw_policy_hp(const tsc_rw_pol_t *p, tsc_rw_pol_t *hp) {
    *hp = *p;
    for (int s = 0; s < TSC_RW_NSTAGE; s++) {
        hp->fmt[s] = TSC_HD_FP32;
        hp->mode[s] = TSC_HD_RNE;
    }
}

/* One (b, h): loads, forward rows, δ, dQ rows, and this query head's dK, dV per key (kept in
 * dk_h, dv_h for the group sum). */
static void run_head(const tsc_rw_pol_t *p, const tsc_rw_pol_t *hp, const tsc_attn_dims_t *dims,
                     const tsc_attn_io_t *io, const tsc_attn_opts_t *opts, int b, int h, float *dk_h,
                     float *dv_h, float *mem) {
    const int T = dims->T, D = dims->D, hk = h / (dims->H / dims->Hkv);
    const size_t TD = (size_t)T * D;
    const size_t qoff = ((size_t)b * dims->H + h) * TD, koff = ((size_t)b * dims->Hkv + hk) * TD;
    const size_t roff = ((size_t)b * dims->H + h) * T;
    float *q = mem, *k = q + TD, *v = k + TD, *o = v + TD, *dO = o + TD, *osrc = dO + TD, *lse = osrc + TD;
    float *delta = lse + T, *scr = delta + T;
    const float *qi = io->q, *ki = io->k, *vi = io->v;
    for (size_t i = 0; i < TD; i++) {
        q[i] = tsc_rw_load(p, TSC_RW_Q, qi[qoff + i]);
        k[i] = tsc_rw_load(p, TSC_RW_K, ki[koff + i]);
        v[i] = tsc_rw_load(p, TSC_RW_V, vi[koff + i]);
    }
    const tsc_attn_tile_stats_t *ts = opts->tiles;
    for (int t = 0; t < T; t++) {
        tsc_rw_tiles_t tl = {0};
        if (ts) {
            const size_t off = (roff + (size_t)t) * ts->n_kt;
            tl.row_max = ts->row_max + off;
            tl.tie_count = ts->tie_count + off;
            tl.tie_count_eps = ts->tie_count_eps + off;
            tl.pbar_one = ts->pbar_one + off;
        }
        tsc_rw_fwd_row(p, q + (size_t)t * D, k, v, t, o + (size_t)t * D, lse + t, ts ? &tl : NULL, scr, NULL, 0);
    }
    if (io->o)
        for (size_t i = 0; i < TD; i++) ((float *)io->o)[qoff + i] = o[i];
    if (io->lse)
        for (int t = 0; t < T; t++) ((float *)io->lse)[roff + t] = lse[t];
    if (!io->dout) return;
    const float *di = io->dout;
    for (size_t i = 0; i < TD; i++) dO[i] = tsc_rw_load(p, TSC_RW_DO, di[qoff + i]);
    const float *src = o;
    if (p->delta_src == TSC_RW_DELTA_HP) {
        for (int t = 0; t < T; t++) tsc_rw_fwd_row(hp, q + (size_t)t * D, k, v, t, osrc + (size_t)t * D, NULL, NULL, scr, NULL, 0);
        src = osrc;
    } else if (p->delta_src == TSC_RW_DELTA_DPP) {
        src = NULL;
    }
    for (int t = 0; t < T; t++)
        delta[t] = tsc_rw_delta_row(p, q + (size_t)t * D, k, v, dO + (size_t)t * D, src ? src + (size_t)t * D : NULL,
                                    lse[t], t);
    if (io->delta)
        for (int t = 0; t < T; t++) ((float *)io->delta)[roff + t] = delta[t];
    if (!dk_h) return;
    float *dq = osrc; /* δ is done with it */
    for (int t = 0; t < T; t++)
        tsc_rw_dq_row(p, q + (size_t)t * D, k, v, dO + (size_t)t * D, lse[t], delta[t], t, dq + (size_t)t * D, scr);
    if (io->dq)
        for (size_t i = 0; i < TD; i++) ((float *)io->dq)[qoff + i] = dq[i];
    for (int j = 0; j < T; j++)
        tsc_rw_dkdv_key(p, q, k, v, dO, lse, delta, j, dk_h + (size_t)j * D, dv_h + (size_t)j * D, scr);
}

static tsc_status_t rowwise_run(const tsc_policy_t *pol, const tsc_attn_dims_t *dims, const tsc_attn_io_t *io,
                                const tsc_attn_opts_t *opts) {
    tsc_rw_pol_t p, hp;
    tsc_status_t st = tsc_rw_policy(pol, dims, &p);
    if (st != TSC_OK) return st;
    tsc_rw_policy_hp(&p, &hp);
    const int B = dims->B, H = dims->H, Hkv = dims->Hkv, G = H / Hkv, T = dims->T, D = dims->D;
    const size_t TD = (size_t)T * D;
    const int grads = io->dout && (io->dq || io->dk || io->dv);
    /* every query head's dK, dV, summed per group below */
    float *dk_all = grads ? malloc((size_t)B * H * TD * sizeof(float)) : NULL;
    float *dv_all = grads ? malloc((size_t)B * H * TD * sizeof(float)) : NULL;
    const size_t hmem = 6 * TD + 2 * (size_t)T + 3 * (size_t)p.Bc + 3 * (size_t)D;
    if (grads && (!dk_all || !dv_all)) {
        free(dk_all);
        free(dv_all);
        return tsc_error_set(TSC_ERR_NOMEM, "attention (cpu-rowwise): out of memory for %d heads of [%d, %d]",
                             B * H, T, D);
    }
    int fail = 0;
#pragma omp parallel reduction(| : fail)
    {
        float *mem = malloc(hmem * sizeof(float));
        fail = mem == NULL;
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < B * H; bh++)
            if (mem)
                run_head(&p, &hp, dims, io, opts, bh / H, bh % H, grads ? dk_all + (size_t)bh * TD : NULL,
                         grads ? dv_all + (size_t)bh * TD : NULL, mem);
        free(mem);
    }
    if (!fail && grads)
        for (int b = 0; b < B; b++)
            for (int hk = 0; hk < Hkv; hk++) {
                const size_t base = ((size_t)b * H + (size_t)hk * G) * TD, out = ((size_t)b * Hkv + hk) * TD;
                for (size_t i = 0; i < TD; i++) {
                    if (io->dk) ((float *)io->dk)[out + i] = tsc_rw_gqa_sum(&p, dk_all + base + i, TD, G);
                    if (io->dv) ((float *)io->dv)[out + i] = tsc_rw_gqa_sum(&p, dv_all + base + i, TD, G);
                }
            }
    free(dk_all);
    free(dv_all);
    if (fail) return tsc_error_set(TSC_ERR_NOMEM, "attention (cpu-rowwise): out of memory (T=%d, D=%d)", T, D);
    return TSC_OK;
}

static int rowwise_available(void) { return 1; }

const tsc_attn_backend_t tsc_attn_backend_cpu_rowwise = {
    "cpu-rowwise",
    "the CUDA exact mode's per-row arithmetic on the CPU (checks the GPU's order of operations; slow)",
    TSC_ATTN_CAP_F32 | TSC_ATTN_CAP_EXACT | TSC_ATTN_CAP_FORWARD | TSC_ATTN_CAP_BACKWARD | TSC_ATTN_CAP_TILE_STATS,
    rowwise_available, rowwise_run};
