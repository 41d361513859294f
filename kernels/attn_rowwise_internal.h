/* attn_rowwise_internal.h (private to kernels/): the exact mode of the CUDA attention kernels,
 * as functions compiled for host and device (hd_math_internal.h).
 *
 * The CPU reference (attention_tmpl.c) fixes, for every output element, one sequential chain of
 * rounded operations; rows go in blocks of four there only to share loads, which interchanges
 * loops without changing any chain. So each chain can be computed on its own:
 *   tsc_rw_fwd_row     one query row: S per key tile, r_m, tie counts, Algorithm 3, m, c, P̄,
 *                      Ō and ℓ (fused or unfused), O and LSE; the row's tile statistics
 *   tsc_rw_delta_row   δ of one row (lp / hp: from an O; dpp: over keys)
 *   tsc_rw_dq_row      dQ of one row: key tiles of its query tile in order, keys in order
 *   tsc_rw_dkdv_key    dK and dV of one key for one query head: query tiles in order, rows in
 *                      order
 * The CUDA exact kernels run one thread per chain (attention_cuda.cu); the "cpu-rowwise"
 * backend (attention_rowwise.c) runs the same functions on the CPU, so CI, with no GPU, checks
 * their order of operations against the reference bit for bit (tests/kernels/test_backends.c).
 * What a GPU adds beyond these functions (launch geometry, copies) is checked on a GPU
 * (bench/gpu_check.sh).
 *
 * Scope: online softmax; stage formats FP32, TF32, BF16, FP16 with nearest-even or toward-zero
 * rounding; every fused/unfused, δ source, ds-scale, scale, gqa-sum and +stable choice, and
 * torch_quirks. tsc_rw_policy (attention_rowwise.c) refuses the rest (FP8 or FP64 stages,
 * +sr, +materialized) with a message naming it. Inputs are FP32 values already rounded to the
 * q/k/v/do stages (and scaled by √α under +scale:qk): tsc_rw_load does that per element. */
#ifndef TSC_ATTN_ROWWISE_INTERNAL_H
#define TSC_ATTN_ROWWISE_INTERNAL_H

#include "hd_math_internal.h"

/* stage numbers as in tsc_policy.h (tsc_stage_t) */
enum {
    TSC_RW_Q = 0, TSC_RW_K, TSC_RW_V, TSC_RW_DO, TSC_RW_ACC, TSC_RW_S, TSC_RW_ROWMAX, TSC_RW_EXPARG,
    TSC_RW_PBAR_PV, TSC_RW_PBAR_L, TSC_RW_PV, TSC_RW_OACC, TSC_RW_L, TSC_RW_L_RESCALE, TSC_RW_O, TSC_RW_LSE,
    TSC_RW_EXPARG_BWD, TSC_RW_P, TSC_RW_DP, TSC_RW_DS, TSC_RW_DELTA_PROD, TSC_RW_DELTA, TSC_RW_DQ, TSC_RW_DK,
    TSC_RW_DV, TSC_RW_GRAD, TSC_RW_NSTAGE
};
enum { TSC_RW_DELTA_LP = 0, TSC_RW_DELTA_HP = 1, TSC_RW_DELTA_DPP = 2 };      /* tsc_delta_src_t */
enum { TSC_RW_DS_LAST = 0, TSC_RW_DS_FIRST = 1, TSC_RW_DS_ROUNDED = 2 };      /* tsc_ds_scale_t */

/* A policy reduced to what the arithmetic reads, in plain numbers (copied to the device). */
typedef struct {
    unsigned char fmt[TSC_RW_NSTAGE], mode[TSC_RW_NSTAGE]; /* TSC_HD_FP32.. / TSC_HD_RNE, RZ */
    int T, D, causal;
    int Bc, Br;          /* tiles: min(block, T) */
    int fused, quirks, stable, delta_src, ds_scale, gqa_each, scale_qk;
    float alpha;         /* the scores' factor (R_S(α) under +scale:s-lp, 1 under +scale:qk) */
    float ds_alpha;      /* dS's factor (likewise with R_DS) */
    float qk_scale;      /* √α under +scale:qk, else 1 */
    float beta, eps, gap; /* Algorithm 3 (eps: the tie threshold, 1e-3 without +stable) */
} tsc_rw_pol_t;

TSC_HD float tsc_rw_r(const tsc_rw_pol_t *p, int stage, float x) {
    return tsc_hd_round(x, p->fmt[stage], p->mode[stage]);
}

/* Unmasked keys of row t in the tile at j0 of length jn. */
TSC_HD int tsc_rw_nvalid(const tsc_rw_pol_t *p, int t, int j0, int jn) {
    if (!p->causal) return jn;
    int v = t + 1 - j0;
    return v < 0 ? 0 : (v > jn ? jn : v);
}

/* Σ_d fma x[d]·y[d] from 0, each step rounded to ACC. */
TSC_HD float tsc_rw_dot(const tsc_rw_pol_t *p, const float *x, const float *y, int D) {
    float a = 0.0f;
    for (int d = 0; d < D; d++) a = tsc_rw_r(p, TSC_RW_ACC, fmaf(x[d], y[d], a));
    return a;
}

/* S of (query row q, key row k): R_S(R_S(q·k)·α). */
TSC_HD float tsc_rw_score(const tsc_rw_pol_t *p, const float *q, const float *k) {
    float s = tsc_rw_r(p, TSC_RW_S, tsc_rw_dot(p, q, k, p->D));
    return tsc_rw_r(p, TSC_RW_S, s * p->alpha);
}

/* max of s[0..n) in the reference's order: 16 lanes (index mod 16), each `x > m ? x : m`, then
 * the lanes in order (this fixes the sign of a zero maximum). */
TSC_HD float tsc_rw_rowmax(const float *s, int n) {
    float lane[16];
    for (int i = 0; i < 16; i++) lane[i] = -TSC_HD_INF;
    for (int j = 0; j < n; j++) lane[j & 15] = s[j] > lane[j & 15] ? s[j] : lane[j & 15];
    float mx = lane[0];
    for (int i = 1; i < 16; i++) mx = lane[i] > mx ? lane[i] : mx;
    return mx;
}

/* Algorithm 3 for one tile of a row: m_tile from r_m and r_s. */
TSC_HD float tsc_rw_stable_max(const tsc_rw_pol_t *p, float r_m, int r_s) {
    if (r_s <= 1) return r_m;
    float m = r_m > 0.0f ? tsc_rw_r(p, TSC_RW_ROWMAX, p->beta * r_m) : 0.0f;
    float top = tsc_rw_r(p, TSC_RW_PBAR_PV, tsc_hd_expf(tsc_rw_r(p, TSC_RW_EXPARG, r_m - m)));
    if (top == 1.0f || top == 0.0f) m = tsc_rw_r(p, TSC_RW_ROWMAX, r_m + p->gap);
    return m;
}

/* Where one row's tile statistics go ([n_kt] each), or NULL members. */
typedef struct {
    double *row_max;
    int32_t *tie_count, *tie_count_eps, *pbar_one;
} tsc_rw_tiles_t;

/* The rounding census of one row's P̄V accumulation (the census of analyze/tsc_census.h, with
 * the P̄V operands a_j the forward used): per feature, an FP32 sum restarting at each key tile, one
 * fma per key with a_j != 0; an addition is an event when the significand carried (the sum's
 * exponent above both the previous sum's and the exact product's) and rounding the FP32 sum to
 * fmt (BF16 or FP16) has its rounding bit and sticky bits set, with a finite result. err_* are sums
 * of R(x) − x, not divided by ℓ. */
typedef struct {
    long long additions, events_neg, events_pos;
    double err_neg, err_pos;
} tsc_rw_census_t;

/* frexp's exponent of a non-zero finite normal double */
TSC_HD int tsc_rw_dexp(double x) { return (int)((tsc_hd_bits64(x) >> 52) & 0x7ff) - 1022; }

/* Whether rounding the FP32 value x to fmt (BF16 or FP16, nearest-even) is an event, and its
 * error: with q the quantum at x's exponent (at least the format's smallest normal exponent), an
 * event when frac(|x|/q) > 1/2 (rounding bit and sticky bits) and the rounded-up magnitude is
 * finite in fmt. */
TSC_HD int tsc_rw_event(float x, int fmt, double *err) {
    const int keep = fmt == TSC_HD_FP16 ? 10 : 7, emin = fmt == TSC_HD_FP16 ? -14 : -126;
    const double maxf = fmt == TSC_HD_FP16 ? 65504.0 : 3.3895313892515355e38;
    const double ax = fabs((double)x);
    int ex = tsc_rw_dexp(ax) - 1;
    if (ex < emin) ex = emin;
    const double q = tsc_hd_double((uint64_t)(ex - keep + 1023) << 52);
    const double n = floor(ax / q), r = ax / q - n;
    if (!(r > 0.5) || (n + 1.0) * q > maxf) return 0;
    *err = x < 0 ? -(1.0 - r) * q : (1.0 - r) * q;
    return 1;
}

/* The census of one key: s[d] = fma(a, v[d], s[d]) for d < D, counting the events. */
TSC_HD void tsc_rw_census_key(int fmt, float a, const float *v, float *s, int D, tsc_rw_census_t *c) {
    c->additions += D;
    for (int d = 0; d < D; d++) {
        const float prev = s[d], vd = v[d], sn = fmaf(a, vd, prev);
        s[d] = sn;
        if (fmt != TSC_HD_BF16 && fmt != TSC_HD_FP16) continue;
        if (prev == 0.0f || vd == 0.0f || sn == 0.0f || !(fabsf(sn) <= 3.4028234663852886e38f)) continue;
        const double pd = (double)a * (double)vd, e = tsc_rw_dexp((double)prev + pd);
        if (!(e > tsc_rw_dexp((double)prev) && e > tsc_rw_dexp(pd))) continue;
        double err;
        if (!tsc_rw_event(sn, fmt, &err)) continue;
        if (sn < 0) {
            c->events_neg++;
            c->err_neg += err;
        } else {
            c->events_pos++;
            c->err_pos += err;
        }
    }
}

/* Forward of query row t of one head. q: the row [D]; K, V: the head's [T, D]; o: the row's
 * output [D] or NULL; lse: where LSE goes, or NULL; tiles: the row's statistics or NULL; census:
 * the row's P̄V rounding census into fmt (cen_fmt), or NULL. scratch: 3·Bc + 3·D floats. */
TSC_HD void tsc_rw_fwd_row(const tsc_rw_pol_t *p, const float *q, const float *K, const float *V, int t, float *o,
                           float *lse, const tsc_rw_tiles_t *tiles, float *scratch, tsc_rw_census_t *census,
                           int cen_fmt) {
    const int T = p->T, D = p->D, Bc = p->Bc, n_kt = (T + Bc - 1) / Bc;
    float *s = scratch, *pa = s + Bc, *pb = pa + Bc, *pv = pb + Bc, *oacc = pv + D, *cs = oacc + D;
    float m = -TSC_HD_INF, l = 0.0f;
    for (int d = 0; d < D; d++) oacc[d] = 0.0f;
    for (int jt = 0; jt < n_kt; jt++) {
        const int j0 = jt * Bc, jn = T - j0 < Bc ? T - j0 : Bc, n = tsc_rw_nvalid(p, t, j0, jn);
        if (n == 0 && !p->quirks) break; /* causal: no later tile has a key for this row */
        float r_m = -TSC_HD_INF, m_tile;
        int ties = 0, r_s = 0;
        if (n > 0) {
            for (int jj = 0; jj < n; jj++) s[jj] = tsc_rw_score(p, q, K + (size_t)(j0 + jj) * D);
            r_m = tsc_rw_r(p, TSC_RW_ROWMAX, tsc_rw_rowmax(s, n));
            const float thr = tsc_rw_r(p, TSC_RW_ROWMAX, r_m - p->eps);
            for (int jj = 0; jj < n; jj++) {
                ties += s[jj] == r_m;
                r_s += s[jj] >= thr;
            }
            m_tile = p->stable ? tsc_rw_stable_max(p, r_m, r_s) : r_m;
        } else {
            m_tile = (p->stable && jn > 1) ? 0.0f : -TSC_HD_INF; /* quirks: a fully masked tile */
        }
        const float m_old = m, mn = m_tile > m_old ? m_tile : m_old;
        const float c = m_old == -TSC_HD_INF ? 0.0f : tsc_hd_expf(tsc_rw_r(p, TSC_RW_EXPARG, m_old - mn));
        int on = 0;
        for (int jj = 0; jj < n; jj++) {
            const float e = tsc_hd_expf(tsc_rw_r(p, TSC_RW_EXPARG, s[jj] - mn));
            pa[jj] = tsc_rw_r(p, TSC_RW_PBAR_PV, e);
            pb[jj] = tsc_rw_r(p, TSC_RW_PBAR_L, e);
            on += pa[jj] == 1.0f;
        }
        if (p->fused) {
            for (int d = 0; d < D; d++) oacc[d] = tsc_rw_r(p, TSC_RW_OACC, c * oacc[d]);
            l = tsc_rw_r(p, TSC_RW_L_RESCALE, c * l);
            for (int jj = 0; jj < n; jj++) {
                const float *vr = V + (size_t)(j0 + jj) * D;
                for (int d = 0; d < D; d++)
                    oacc[d] = tsc_rw_r(p, TSC_RW_PV, tsc_rw_r(p, TSC_RW_ACC, fmaf(pa[jj], vr[d], oacc[d])));
            }
            for (int jj = 0; jj < n; jj++) l = tsc_rw_r(p, TSC_RW_L, l + pb[jj]);
        } else {
            for (int d = 0; d < D; d++) pv[d] = 0.0f;
            for (int jj = 0; jj < n; jj++) {
                const float *vr = V + (size_t)(j0 + jj) * D;
                for (int d = 0; d < D; d++) pv[d] = tsc_rw_r(p, TSC_RW_ACC, fmaf(pa[jj], vr[d], pv[d]));
            }
            for (int d = 0; d < D; d++) {
                const float scaled = tsc_rw_r(p, TSC_RW_OACC, c * oacc[d]);
                oacc[d] = tsc_rw_r(p, TSC_RW_OACC, scaled + tsc_rw_r(p, TSC_RW_PV, pv[d]));
            }
            float sum = 0.0f;
            for (int jj = 0; jj < n; jj++) sum = tsc_rw_r(p, TSC_RW_ACC, sum + pb[jj]);
            if (p->quirks && sum < 1e-10f) sum = 1e-10f;
            l = tsc_rw_r(p, TSC_RW_L, tsc_rw_r(p, TSC_RW_L_RESCALE, c * l) + sum);
        }
        m = mn;
        if (census) { /* the census sums restart at each key tile */
            for (int d = 0; d < D; d++) cs[d] = 0.0f;
            for (int jj = 0; jj < n; jj++)
                if (pa[jj] != 0.0f) tsc_rw_census_key(cen_fmt, pa[jj], V + (size_t)(j0 + jj) * D, cs, D, census);
        }
        if (tiles && tiles->row_max) {
            tiles->row_max[jt] = (double)r_m;
            tiles->tie_count[jt] = ties;
            tiles->tie_count_eps[jt] = r_s;
            tiles->pbar_one[jt] = on;
        }
    }
    if (o)
        for (int d = 0; d < D; d++) o[d] = tsc_rw_r(p, TSC_RW_O, oacc[d] / l);
    if (lse) *lse = tsc_rw_r(p, TSC_RW_LSE, m + tsc_hd_logf(l));
}

/* P (unrounded, pf), p = R_P(P) (pr) and dS of (row t, key j) in the backward: S as in the
 * forward, P = exp(R_EXPARG_BWD(S − LSE_t)), dP = R_DP(dO_t·v_j), dS with α where ds_scale says. */
TSC_HD void tsc_rw_p_ds(const tsc_rw_pol_t *p, const float *q, const float *k, const float *dO, const float *v,
                        float lse, float delta, float *pr, float *ds, float *pf_out, float *dp_out) {
    const float s = tsc_rw_score(p, q, k);
    const float pf = tsc_hd_expf(tsc_rw_r(p, TSC_RW_EXPARG_BWD, s - lse));
    const float dp = tsc_rw_r(p, TSC_RW_DP, tsc_rw_dot(p, dO, v, p->D));
    float x;
    switch (p->ds_scale) {
    case TSC_RW_DS_FIRST: x = (pf * p->ds_alpha) * (dp - delta); break;
    case TSC_RW_DS_ROUNDED: x = tsc_rw_r(p, TSC_RW_DS, pf * (dp - delta)) * p->ds_alpha; break;
    default: x = (pf * (dp - delta)) * p->ds_alpha; break;
    }
    if (pr) *pr = tsc_rw_r(p, TSC_RW_P, pf);
    if (ds) *ds = tsc_rw_r(p, TSC_RW_DS, x);
    if (pf_out) *pf_out = pf;
    if (dp_out) *dp_out = dp;
}

/* δ of row t. lp and hp: Σ_d over dO_t·osrc_t (lp with a narrower delta-prod stage: each product
 * rounded there, then added; otherwise one fma per term); dpp (osrc NULL): Σ over the row's keys
 * of fma(dP, P). Then R_DELTA. */
TSC_HD float tsc_rw_delta_row(const tsc_rw_pol_t *p, const float *q, const float *K, const float *V,
                              const float *dO, const float *osrc, float lse, int t) {
    const int D = p->D;
    float dl = 0.0f;
    if (osrc) {
        const int split = p->delta_src == TSC_RW_DELTA_LP && p->fmt[TSC_RW_DELTA_PROD] != TSC_HD_FP32 &&
                          p->fmt[TSC_RW_DELTA_PROD] != TSC_HD_FP64;
        for (int d = 0; d < D; d++)
            dl = split ? tsc_rw_r(p, TSC_RW_ACC, dl + tsc_rw_r(p, TSC_RW_DELTA_PROD, dO[d] * osrc[d]))
                       : tsc_rw_r(p, TSC_RW_ACC, fmaf(dO[d], osrc[d], dl));
    } else {
        const int nj = p->causal ? t + 1 : p->T;
        for (int j = 0; j < nj; j++) {
            float pf, dp;
            tsc_rw_p_ds(p, q, K + (size_t)j * D, dO, V + (size_t)j * D, lse, 0.0f, 0, 0, &pf, &dp);
            dl = tsc_rw_r(p, TSC_RW_ACC, fmaf(dp, pf, dl));
        }
    }
    return tsc_rw_r(p, TSC_RW_DELTA, dl);
}

/* dQ of row t (R_GRAD, times √α first under +scale:qk). part: D floats of scratch (unfused). */
TSC_HD void tsc_rw_dq_row(const tsc_rw_pol_t *p, const float *q, const float *K, const float *V, const float *dO,
                          float lse, float delta, int t, float *dq, float *part) {
    const int T = p->T, D = p->D, Bc = p->Bc, Br = p->Br, n_kt = (T + Bc - 1) / Bc;
    const int ti0 = t / Br * Br, tn = T - ti0 < Br ? T - ti0 : Br;
    for (int d = 0; d < D; d++) dq[d] = 0.0f;
    for (int jt = 0; jt < n_kt; jt++) {
        const int j0 = jt * Bc, jn = T - j0 < Bc ? T - j0 : Bc;
        if (p->causal && j0 > ti0 + tn - 1) break; /* the query tile sees no key here */
        const int n = tsc_rw_nvalid(p, t, j0, jn);
        if (!p->fused)
            for (int d = 0; d < D; d++) part[d] = 0.0f;
        for (int jj = 0; jj < n; jj++) {
            const float *k = K + (size_t)(j0 + jj) * D;
            float ds;
            tsc_rw_p_ds(p, q, k, dO, V + (size_t)(j0 + jj) * D, lse, delta, 0, &ds, 0, 0);
            if (p->fused)
                for (int d = 0; d < D; d++)
                    dq[d] = tsc_rw_r(p, TSC_RW_DQ, tsc_rw_r(p, TSC_RW_ACC, fmaf(ds, k[d], dq[d])));
            else
                for (int d = 0; d < D; d++) part[d] = tsc_rw_r(p, TSC_RW_ACC, fmaf(ds, k[d], part[d]));
        }
        if (!p->fused)
            for (int d = 0; d < D; d++)
                dq[d] = tsc_rw_r(p, TSC_RW_DQ, dq[d] + tsc_rw_r(p, TSC_RW_DQ, part[d]));
    }
    for (int d = 0; d < D; d++) {
        const float x = p->scale_qk ? dq[d] * p->qk_scale : dq[d];
        dq[d] = tsc_rw_r(p, TSC_RW_GRAD, x);
    }
}

/* dK and dV of key j for one query head (R_GRAD each; dK times √α first under +scale:qk): the
 * query tiles in order, each tile's rows in order. Q, dO: the query head's [T, D]; K, V the kv
 * head's; lse, delta: the query head's [T]. part: 2·D floats of scratch (unfused). */
TSC_HD void tsc_rw_dkdv_key(const tsc_rw_pol_t *p, const float *Q, const float *K, const float *V,
                            const float *dO, const float *lse, const float *delta, int j, float *dk, float *dv,
                            float *part) {
    const int T = p->T, D = p->D, Bc = p->Bc, Br = p->Br, n_qt = (T + Br - 1) / Br;
    const int j0 = j / Bc * Bc;
    const float *k = K + (size_t)j * D, *v = V + (size_t)j * D;
    float *pk = part, *pv = part + D;
    for (int d = 0; d < D; d++) dk[d] = dv[d] = 0.0f;
    for (int it = 0; it < n_qt; it++) {
        const int ti0 = it * Br, tn = T - ti0 < Br ? T - ti0 : Br;
        if (p->causal && j0 > ti0 + tn - 1) continue; /* this (query tile, key tile) is not visited */
        if (!p->fused)
            for (int d = 0; d < D; d++) pk[d] = pv[d] = 0.0f;
        for (int t = ti0; t < ti0 + tn; t++) {
            if (p->causal && j > t) continue;
            const float *q = Q + (size_t)t * D, *dOt = dO + (size_t)t * D;
            float pr, ds;
            tsc_rw_p_ds(p, q, k, dOt, v, lse[t], delta[t], &pr, &ds, 0, 0);
            if (p->fused) {
                for (int d = 0; d < D; d++)
                    dv[d] = tsc_rw_r(p, TSC_RW_DV, tsc_rw_r(p, TSC_RW_ACC, fmaf(pr, dOt[d], dv[d])));
                for (int d = 0; d < D; d++)
                    dk[d] = tsc_rw_r(p, TSC_RW_DK, tsc_rw_r(p, TSC_RW_ACC, fmaf(ds, q[d], dk[d])));
            } else {
                for (int d = 0; d < D; d++) pv[d] = tsc_rw_r(p, TSC_RW_ACC, fmaf(pr, dOt[d], pv[d]));
                for (int d = 0; d < D; d++) pk[d] = tsc_rw_r(p, TSC_RW_ACC, fmaf(ds, q[d], pk[d]));
            }
        }
        if (!p->fused)
            for (int d = 0; d < D; d++) {
                dk[d] = tsc_rw_r(p, TSC_RW_DK, dk[d] + tsc_rw_r(p, TSC_RW_DK, pk[d]));
                dv[d] = tsc_rw_r(p, TSC_RW_DV, dv[d] + tsc_rw_r(p, TSC_RW_DV, pv[d]));
            }
    }
    for (int d = 0; d < D; d++) {
        const float x = p->scale_qk ? dk[d] * p->qk_scale : dk[d];
        dk[d] = tsc_rw_r(p, TSC_RW_GRAD, x);
        dv[d] = tsc_rw_r(p, TSC_RW_GRAD, dv[d]);
    }
}

/* GQA: one element of a kv head's gradient from its group's G per-head values (each R_GRAD),
 * stride apart: summed in head order, rounded to ACC (gqa-sum once) or GRAD (each) per add,
 * then R_GRAD. */
TSC_HD float tsc_rw_gqa_sum(const tsc_rw_pol_t *p, const float *x, size_t stride, int G) {
    float a = x[0];
    for (int g = 1; g < G; g++)
        a = tsc_rw_r(p, p->gqa_each ? TSC_RW_GRAD : TSC_RW_ACC, a + x[(size_t)g * stride]);
    return tsc_rw_r(p, TSC_RW_GRAD, a);
}

/* An input element x (any float) as the arithmetic reads it: rounded to the stage, then under
 * +scale:qk (q and k only) times √α and rounded to S. */
TSC_HD float tsc_rw_load(const tsc_rw_pol_t *p, int stage, float x) {
    float y = tsc_rw_r(p, stage, x);
    if (p->scale_qk && (stage == TSC_RW_Q || stage == TSC_RW_K)) y = tsc_rw_r(p, TSC_RW_S, y * p->qk_scale);
    return y;
}

#endif
