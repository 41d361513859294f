/* analysis.c: the engine of `tilescope analyze` (tsc_analysis.h). One head at a time: read its
 * inputs, replay hp and lp, measure, write its slices of the (step, layer) arrays, forget it. */
#include "tsc_analysis.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsc_attention.h"
#include "tsc_census.h"
#include "tsc_dump.h"
#include "tsc_grad.h"
#include "tsc_h5.h"
#include "tsc_linalg.h"

#include "blas_internal.h"

#include <cblas.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* Power iteration settings for the spectral norms (tsc_linalg_spectral_norm): stop when sigma
 * moves by < 1e-10 relative (its remaining error is about that change / (1 - (s2/s1)^2): ~1e-8
 * for a gap of 0.5%, as in random weights), at most 1500 iterations. Each result is compared with
 * LAPACK's top eigenvalue of the same Gram matrix and the largest relative difference is reported
 * (max_rel_diff), so a non-converged case is visible. */
#define SPEC_MAX_ITER 1500
#define SPEC_TOL 1e-10

void tsc_analysis_opts_init(tsc_analysis_opts_t *o) {
    memset(o, 0, sizeof *o);
    tsc_select_init(&o->sel);
    o->rule = TSC_FLAG_RULE_DEFAULT;
    o->tie_eps = 1e-3;
    o->probe_b = o->probe_t = o->probe_i = -1;
    o->n_terms = 32;
    o->census = 1;
    o->identity = 1;
}

/* ------------------------------------------------------------------------------------------ */

typedef struct {
    const tsc_analysis_opts_t *o;
    tsc_analysis_t *a;
    tsc_dump_t *d;
    const tsc_dump_meta_t *m;
    tsc_policy_t hp, lp, lp_hd;
    tsc_format_t o_fmt, delta_fmt, out_fmt, v_fmt;
    int B, H, Hkv, T, D, C, nb, nh, N;
    int *bs, *hs;          /* selected batch rows [nb], heads [nh] */
    int has_o;
    /* per (b, head) scratch, float [T, D] unless noted */
    float *q, *k, *v, *dO, *od, *o_hp, *o_lp, *dq_lp, *dq_hd, *vr, *x; /* x [T, C] */
    float *lse_hp, *lse_lp, *dl_hp, *dl_lp, *dl_hd;                    /* [T] */
    double *kd, *pk, *pblk, *xd;                     /* kd, pk [T, D], pblk [PK_ROWS, T], xd [T, C] */
    double *dw, *dwt;                                                  /* [D, C] */
    float *o_hp_all, *o_lp_all;                                        /* [nb, T, D] */
    float *dl_hp_all, *dl_lp_all;                                      /* [nb, T] */
    uint8_t *evt;                                                      /* [nb, T, D] census events */
    uint8_t *tie_row;                                                  /* [nb, T] rows with >= 2 exact maxima */
    tsc_attn_trace_t tr;
    int tr_b;              /* batch row the trace holds, -1 none */
    /* rank-1 candidates of the head: the n_terms tokens with the largest |coeff| */
    int n_cand;
    double *c_coeff, *c_a, *c_b;  /* [N], [N, D], [N, C] */
    /* per (step, layer) output arrays */
    double *f_ulp, *f_val, *f_p;  /* [nh, D] */
    int64_t *f_flag;              /* [nh, D] */
    double *g_dd;                 /* [nh, nb, T] */
    int64_t *g_sink;              /* [nh, T] */
    double *g_curve, *g_curve_c;  /* [nh, T] */
    int64_t *g_probe;             /* [nh, 3] */
    double *g_cos, *g_sv;         /* [nh, N, N], [nh, N] */
    int g_has_rank1;
    /* per (layer, head, feature), pooled over the analysed steps and batch rows: the flag test */
    int nL;
    tsc_moments_t *pool_u;  /* (O_lp - O_hp)/ulp per row, [nL, nh, D] */
    tsc_moments_t *pool_c;  /* delta contributions dO * (O_lp - O_hp) per row, [nL, nh, D] */
    float *dO_all;          /* [nb, T, D] */
} ctx_t;

static void *xcalloc(size_t n, size_t sz, int *bad) {
    void *p = calloc(n ? n : 1, sz);
    if (!p) *bad = 1;
    return p;
}

static int fmt_narrower_than_f32(tsc_format_t f) { return tsc_format_mant_bits(f) < 23; }

/* Reads one head slice and counts non-finite values, remembering the first coordinate. */
static tsc_status_t read_checked(ctx_t *c, tsc_head_result_t *r, long long step, int layer, const char *name,
                                 int b, int h, float *buf, int cols) {
    tsc_status_t st;
#pragma omp critical(tsc_analysis_dump)
    st = tsc_dump_read(c->d, step, layer, name, b, h, buf);
    if (st != TSC_OK) return st;
    size_t n = (size_t)c->T * (size_t)cols;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(buf[i])) {
            if (r->n_nonfinite++ == 0)
                snprintf(r->first_nonfinite, sizeof r->first_nonfinite, "%s[b=%d,t=%zu,d=%zu]", name, b,
                         i / (size_t)cols, i % (size_t)cols);
        }
    return TSC_OK;
}

static tsc_status_t run_attn(ctx_t *c, const tsc_policy_t *pol, int backward, float *o, float *lse, float *delta,
                             float *dq, tsc_attn_trace_t *tr) {
    tsc_attn_dims_t dims = {.B = 1, .H = 1, .Hkv = 1, .T = c->T, .D = c->D, .causal = c->m->causal,
                            .scale = c->m->softmax_scale};
    tsc_attn_io_t io = {.dtype = TSC_ATTN_F32, .q = c->q, .k = c->k, .v = c->v,
                        .dout = backward ? c->dO : NULL, .o = o, .lse = lse,
                        .delta = backward ? delta : NULL, .dq = backward ? dq : NULL};
    if (tr) tr->b = tr->h = 0;
    return tsc_attn_run(pol, &dims, &io, tr, tr ? 1 : 0);
}

/* Index of the last key tile row t visits. */
static int last_tile(const ctx_t *c, int t) { return c->m->causal ? t / c->tr.block_k : c->tr.n_kt - 1; }
static int n_visible(const ctx_t *c, int t) { return c->m->causal ? t + 1 : c->T; }

/* O-bar_error(t') for row t, feature i of the batch row whose lp trace is loaded: the lp prefix
 * sum of a_j v[j,i] (FP32 fused multiply-add, sequential by key, the value rounded to the output
 * format at each prefix) minus the same prefix in double with hp's P-bar = exp(S - m) taken
 * against the same running max m as the lp tile. NaN beyond the visible keys. [T] */
static void obar_curve(const ctx_t *c, int t, int i, double *out) {
    int T = c->T, D = c->D, nv = n_visible(c, t);
    float s = 0.0f;
    double h = 0.0;
    for (int j = 0; j < T; j++) {
        if (j >= nv) {
            out[j] = NAN;
            continue;
        }
        float a = (float)c->tr.pbar[(size_t)t * T + j];
        s = fmaf(a, c->vr[(size_t)j * D + i], s);
        double dotp = 0.0;
        for (int dd = 0; dd < D; dd++) dotp += (double)c->q[(size_t)t * D + dd] * (double)c->k[(size_t)j * D + dd];
        double mref = c->tr.run_max[(size_t)t * c->tr.n_kt + j / c->tr.block_k];
        h += exp(c->m->softmax_scale * dotp - mref) * (double)c->v[(size_t)j * D + i];
        out[j] = tsc_round((double)s, c->out_fmt, TSC_ROUND_NEAREST_EVEN, NULL) - h;
    }
}

/* Loads batch row b of head h (inputs) and runs the lp forward with the trace (and, with
 * backward, the lp backward in the same call: dO must be loaded). */
static tsc_status_t load_lp_trace(ctx_t *c, tsc_head_result_t *r, long long step, int layer, int h, int b,
                                  int backward) {
    int kvh = h / (c->H / c->Hkv);
    tsc_status_t st;
    if ((st = read_checked(c, r, step, layer, "q", b, h, c->q, c->D)) ||
        (st = read_checked(c, r, step, layer, "k", b, kvh, c->k, c->D)) ||
        (st = read_checked(c, r, step, layer, "v", b, kvh, c->v, c->D)))
        return st;
    for (size_t i = 0; i < (size_t)c->T * c->D; i++)
        c->vr[i] = (float)tsc_round(c->v[i], c->v_fmt, TSC_ROUND_NEAREST_EVEN, NULL);
    st = run_attn(c, &c->lp, backward, c->o_lp, c->lse_lp, c->dl_lp,
                 c->o->identity ? c->dq_lp : NULL /* without identity (1), delta only */, &c->tr);
    c->tr_b = st == TSC_OK ? b : -1;
    return st;
}

/* Census of the P-bar V additions of batch row bi (trace loaded): see tsc_census.h. */
static void census(ctx_t *c, tsc_head_result_t *r, int bi) {
    int T = c->T, D = c->D;
    tsc_census_t cs = {0};
    for (int t = 0; t < T; t++)
        tsc_census_row(c->tr.pbar + (size_t)t * T, c->vr, n_visible(c, t), D, c->tr.block_k, c->out_fmt,
                       c->tr.l[(size_t)t * c->tr.n_kt + last_tile(c, t)], c->evt + ((size_t)bi * T + t) * D, &cs);
    r->census_additions += cs.additions;
    r->census_events_neg += cs.events_neg;
    r->census_events_pos += cs.events_pos;
    r->census_err_neg += cs.err_neg;
    r->census_err_pos += cs.err_pos;
}

/* Inserts token (b, t) into the head's top-|coeff| rank-1 candidates. */
static void cand_insert(ctx_t *c, double coeff, const double *pkrow, const double *xrow) {
    int slot = -1;
    if (c->n_cand < c->N) slot = c->n_cand++;
    else {
        int mi = 0;
        for (int i = 1; i < c->n_cand; i++)
            if (fabs(c->c_coeff[i]) < fabs(c->c_coeff[mi])) mi = i;
        if (fabs(coeff) > fabs(c->c_coeff[mi])) slot = mi;
    }
    if (slot < 0) return;
    c->c_coeff[slot] = coeff;
    memcpy(c->c_a + (size_t)slot * c->D, pkrow, (size_t)c->D * sizeof(double));
    memcpy(c->c_b + (size_t)slot * c->C, xrow, (size_t)c->C * sizeof(double));
}

/* Per-dump arrays for the across-step rank-1 similarity: the top term of each (step, layer, head). */
typedef struct {
    int S, nL;
    int *layers;
    double *top_a, *top_b;  /* [S, nL, nh, D], [S, nL, nh, C] */
    int8_t *has;            /* [S, nL, nh] */
} across_t;

/* P K [T, D] in double (c->pk) with P = exp(S - LSE) from lp's own scores (the trace) and LSE:
 * the P the lp backward uses (up to the rounding of S - LSE), at half the cost of recomputing
 * q.k (tsc_grad_pk does that from q, k). PK_ROWS rows of P at a time, each block one BLAS
 * product with K (c->kd, K in double). */
enum { PK_ROWS = 64 };
static void pk_from_trace(ctx_t *c) {
    int T = c->T, D = c->D;
    tsc_blas_one_thread();
    for (size_t i = 0; i < (size_t)T * D; i++) c->kd[i] = c->k[i];
    for (int t0 = 0; t0 < T; t0 += PK_ROWS) {
        int nr = T - t0 < PK_ROWS ? T - t0 : PK_ROWS, nk = n_visible(c, t0 + nr - 1);
        for (int r = 0; r < nr; r++) {
            int t = t0 + r, nv = n_visible(c, t);
            const double *srow = c->tr.s + (size_t)t * T;
            double lse = c->lse_lp[t], *prow = c->pblk + (size_t)r * nk;
            for (int j = 0; j < nv; j++) prow[j] = exp(srow[j] - lse);
            for (int j = nv; j < nk; j++) prow[j] = 0.0;
        }
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, D, nk, 1.0, c->pblk, nk, c->kd, D, 0.0,
                    c->pk + (size_t)t0 * D, D);
    }
}

static tsc_status_t analyze_head(ctx_t *c, tsc_head_result_t *r, long long step, int layer, int hi,
                                 across_t *ac, int si, int li) {
    int h = c->hs[hi], T = c->T, D = c->D;
    size_t TD = (size_t)T * D;
    tsc_status_t st = TSC_OK;
    memset(r, 0, sizeof *r);
    r->step = step;
    r->layer = layer;
    r->head = h;
    r->n_rows = (int64_t)c->nb * T;
    r->o_dump_vs_lp_max_abs = c->has_o ? 0.0 : NAN;
    r->identity_rel_residual = r->identity_max_abs_residual = r->identity_max_abs_lhs = NAN;
    r->rank1_top_energy = r->rank1_eff_rank = r->rank1_mean_cos = r->rank1_proj_share = NAN;
    r->dwq_err_fro = r->rank1_accum_gain = NAN;
    r->census_share = NAN;
    r->probe_b = r->probe_t = r->probe_i = -1;
    r->probe_err = r->probe_final_obar_err = NAN;
    r->top_feature = -1;
    r->top_feature_mean_ulp = r->top_feature_p = r->top_feature_sign_consistency = NAN;
    for (int s = 0; s < TSC_ANALYSIS_MAX_SINKS; s++) r->sink_keys[s] = -1;
    int64_t *sink = c->g_sink + (size_t)hi * T;
    double *ddh = c->g_dd + (size_t)hi * c->nb * T;
    for (size_t i = 0; i < (size_t)c->nb * T; i++) ddh[i] = NAN;
    memset(sink, 0, (size_t)T * sizeof *sink);
    for (int i = 0; i < D; i++) {
        c->f_ulp[hi * D + i] = c->f_val[hi * D + i] = c->f_p[hi * D + i] = NAN;
        c->f_flag[hi * D + i] = 0;
    }
    for (int j = 0; j < T; j++) c->g_curve[(size_t)hi * T + j] = c->g_curve_c[(size_t)hi * T + j] = NAN;
    for (int j = 0; j < 3; j++) c->g_probe[hi * 3 + j] = -1;
    c->n_cand = 0;
    int has_x;
#pragma omp critical(tsc_analysis_dump)
    has_x = c->C > 0 && tsc_dump_has_dataset(c->d, step, layer, "x");
    r->has_x = has_x;
    if (has_x) memset(c->dw, 0, (size_t)D * c->C * sizeof(double));
    double id_res = 0.0, id_lhs = 0.0, term_sq = 0.0;
    double *expct = NULL;
    int bad = 0;
    expct = xcalloc((size_t)T, sizeof(double), &bad);
    if (bad) return tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory for [T = %d]", T);

    for (int bi = 0; bi < c->nb; bi++) {
        int b = c->bs[bi];
        if ((st = read_checked(c, r, step, layer, "do", b, h, c->dO, D)) != TSC_OK) goto done;
        if ((st = load_lp_trace(c, r, step, layer, h, b, 1)) != TSC_OK) goto done;
        if (r->n_nonfinite) {
            r->skipped = 1;
            goto done;
        }
        if ((st = run_attn(c, &c->hp, 1, c->o_hp, c->lse_hp, c->dl_hp, NULL, NULL)) != TSC_OK) goto done;
        memcpy(c->o_hp_all + (size_t)bi * TD, c->o_hp, TD * sizeof(float));
        memcpy(c->o_lp_all + (size_t)bi * TD, c->o_lp, TD * sizeof(float));
        memcpy(c->dO_all + (size_t)bi * TD, c->dO, TD * sizeof(float));
        memcpy(c->dl_hp_all + (size_t)bi * T, c->dl_hp, (size_t)T * sizeof(float));
        memcpy(c->dl_lp_all + (size_t)bi * T, c->dl_lp, (size_t)T * sizeof(float));
        for (int t = 0; t < T; t++) {
            double dd = (double)c->dl_lp[t] - (double)c->dl_hp[t];
            ddh[(size_t)bi * T + t] = dd;
            r->delta_sum += dd;
        }
        if (c->has_o) {
#pragma omp critical(tsc_analysis_dump)
            st = tsc_dump_read(c->d, step, layer, "o", b, h, c->od);
            if (st != TSC_OK) goto done;
            for (size_t i = 0; i < TD; i++) {
                double e = fabs((double)c->od[i] - (double)c->o_lp[i]);
                if (e > r->o_dump_vs_lp_max_abs || isnan(e)) r->o_dump_vs_lp_max_abs = e;
            }
        }
        /* b: ties, P-bar = 1 and sinks from the lp scores (as rounded to the S stage). */
        for (int t = 0; t < T; t++) {
            int nv = n_visible(c, t);
            const double *srow = c->tr.s + (size_t)t * T;
            double mx = -INFINITY;
            for (int j = 0; j < nv; j++)
                if (srow[j] > mx) mx = srow[j];
            int n_ex = 0, n_eps = 0, n_one = 0;
            for (int j = 0; j < nv; j++) {
                if (srow[j] == mx) {
                    n_ex++;
                    sink[j]++;
                }
                if (srow[j] >= mx - c->o->tie_eps) n_eps++;
                if (c->tr.pbar[(size_t)t * T + j] == 1.0) n_one++;
                expct[j] += 1.0 / nv;
            }
            r->rows_multi_max += n_ex >= 2;
            r->rows_multi_max_eps += n_eps >= 2;
            r->pbar_one += n_one;
            r->rows_pbar_one_2 += n_one >= 2;
            c->tie_row[(size_t)bi * T + t] = n_ex >= 2;
        }
        if (c->o->census) census(c, r, bi);
        /* e: identity (1) with the lp backward and the same backward fed delta from an hp O. */
        if (c->o->identity || has_x) pk_from_trace(c);
        if (c->o->identity) {
            if ((st = run_attn(c, &c->lp_hd, 1, c->o_hp /* scratch */, c->lse_hp, c->dl_hd, c->dq_hd, NULL)) != TSC_OK)
                goto done;
            double *a1 = malloc(TD * sizeof(double)), *a2 = malloc(TD * sizeof(double));
            double *d1 = malloc((size_t)T * sizeof(double)), *d2 = malloc((size_t)T * sizeof(double));
            if (!a1 || !a2 || !d1 || !d2) {
                free(a1), free(a2), free(d1), free(d2);
                st = tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory for the identity check");
                goto done;
            }
            for (size_t i = 0; i < TD; i++) {
                a1[i] = c->dq_hd[i];
                a2[i] = c->dq_lp[i];
            }
            for (int t = 0; t < T; t++) {
                d1[t] = c->dl_hd[t];
                d2[t] = c->dl_lp[t];
            }
            tsc_grad_identity_t id;
            tsc_grad_identity_check(a1, a2, d1, d2, c->pk, (size_t)T, (size_t)D, c->m->softmax_scale, &id);
            if (id.max_abs_residual > id_res) id_res = id.max_abs_residual;
            if (id.max_abs_lhs > id_lhs) id_lhs = id.max_abs_lhs;
            free(a1), free(a2), free(d1), free(d2);
        }
        if (has_x) {
            int64_t before = r->n_nonfinite;
            if ((st = read_checked(c, r, step, layer, "x", b, 0, c->x, c->C)) != TSC_OK) goto done;
            if (r->n_nonfinite > before) {
                /* NaN/Inf in x: counted (first coordinate kept); the rank-1 analysis of this head
                 * is skipped, everything else goes on */
                has_x = r->has_x = 0;
                c->n_cand = 0;
                continue;
            }
            for (size_t i = 0; i < (size_t)T * c->C; i++) c->xd[i] = c->x[i];
            double *coeff = ddh + (size_t)bi * T;
            if ((st = tsc_grad_dwq_error(coeff, c->pk, c->xd, (size_t)T, (size_t)D, (size_t)c->C, c->m->softmax_scale,
                                         c->dwt)) != TSC_OK)
                goto done;
            for (size_t i = 0; i < (size_t)D * c->C; i++) c->dw[i] += c->dwt[i];
            for (int t = 0; t < T; t++) {
                if (coeff[t] == 0.0) continue;
                const double *pr = c->pk + (size_t)t * D, *xr = c->xd + (size_t)t * c->C;
                double a = c->m->softmax_scale * coeff[t], np2 = 0.0, nx2 = 0.0;
                for (int d = 0; d < D; d++) np2 += pr[d] * pr[d];
                for (int j = 0; j < c->C; j++) nx2 += xr[j] * xr[j];
                term_sq += a * a * np2 * nx2; /* |a PK[T]^T X[T]|_F^2 = a^2 |PK[T]|^2 |X[T]|^2 */
                cand_insert(c, coeff[t], pr, xr);
            }
        }
    }

    /* a: error summaries and per-feature bias over the nb*T rows. */
    tsc_stats_error_compare(c->o_lp_all, c->o_hp_all, (size_t)c->nb * TD, c->o_fmt, &r->o_err);
    tsc_stats_error_compare(c->dl_lp_all, c->dl_hp_all, (size_t)c->nb * T, c->delta_fmt, &r->delta_err);
    double best_p = 2.0, best_abs = -1.0;
    for (int i = 0; i < D; i++) {
        tsc_moments_t mu, mv;
        tsc_moments_init(&mu);
        tsc_moments_init(&mv);
        for (size_t row = 0; row < (size_t)c->nb * T; row++) {
            double lp = c->o_lp_all[row * D + i], hp = c->o_hp_all[row * D + i];
            double e = lp - hp;
            tsc_moments_add(&mv, e);
            tsc_moments_add(&mu, isfinite(e) ? e / tsc_stats_ulp(hp, c->o_fmt) : NAN);
        }
        double p = tsc_stats_sign_test_p(mu.n_pos, mu.n_neg);
        c->f_ulp[hi * D + i] = mu.mean;
        c->f_val[hi * D + i] = mv.mean;
        c->f_p[hi * D + i] = p;
        size_t slot = ((size_t)li * c->nh + hi) * D + i;
        tsc_moments_t mc;
        tsc_moments_init(&mc);
        for (size_t row = 0; row < (size_t)c->nb * T; row++)
            tsc_moments_add(&mc, (double)c->dO_all[row * D + i] *
                                     ((double)c->o_lp_all[row * D + i] - (double)c->o_hp_all[row * D + i]));
        tsc_moments_merge(&c->pool_u[slot], &mu);
        tsc_moments_merge(&c->pool_c[slot], &mc);
        /* the record's top feature: the most significant delta contribution (then |mean ulp|) */
        double pc = mc.n >= 2 ? tsc_stats_t_test_p(tsc_moments_tstat(&mc), (double)(mc.n - 1)) : 1.0;
        if (isnan(pc)) pc = 1.0;
        if (pc < best_p || (pc == best_p && fabs(mu.mean) > best_abs)) {
            best_p = pc;
            best_abs = fabs(mu.mean);
            r->top_feature = i;
            r->top_feature_mean_ulp = mu.mean;
            r->top_feature_p = pc;
            r->top_feature_sign_consistency = tsc_moments_sign_consistency(&mu);
        }
    }
    r->delta_biased = r->delta_err.p_sign * (double)c->a->n_head_tests < c->a->rule.alpha &&
                      r->delta_err.n_pos + r->delta_err.n_neg >= c->a->rule.min_n;

    /* b: sinks: top keys, and the flagging rule. */
    {
        int64_t nrows = (int64_t)c->nb * T;
        for (int s = 0; s < TSC_ANALYSIS_MAX_SINKS; s++) {
            int best = -1;
            for (int j = 0; j < T; j++) {
                int taken = 0;
                for (int u = 0; u < s; u++) taken |= r->sink_keys[u] == j;
                if (!taken && sink[j] > 0 && (best < 0 || sink[j] > sink[best])) best = j;
            }
            r->sink_keys[s] = best;
            r->sink_counts[s] = best >= 0 ? sink[best] : 0;
            if (best >= 0) {
                /* flagged when the key holds the max in >= 8 rows, >= 25% of the rows, and >= 4x
                 * the count expected if each row's maximum were at a uniformly random visible key
                 * (25%: random tiny synth dumps reach 13 of 64 rows at a key; a sink takes far more) */
                double ex = expct[best];
                if (sink[best] >= 8 && (double)sink[best] >= 0.25 * (double)nrows && (double)sink[best] >= 4.0 * ex)
                    r->sinks_flagged[r->n_sinks_flagged++] = best;
            }
        }
    }

    /* c: share of the O error in elements with an event. */
    if (c->o->census) {
        double all = 0.0, in = 0.0;
        for (size_t e = 0; e < (size_t)c->nb * TD; e++) {
            double er = (double)c->o_lp_all[e] - (double)c->o_hp_all[e];
            all += er;
            if (c->evt[e]) in += er;
        }
        r->census_share = all != 0.0 ? in / all : NAN;
    }

    /* d: the automatic probe: the top feature, and the row with the largest error in its bias
     * sign among the rows with >= 2 exact maxima (where PAPER.md §5's mechanism acts; Fig. 6),
     * or among all rows when there is none. */
    if (r->top_feature >= 0) {
        int i = r->top_feature, best_row = -1, any_tie = 0;
        double sgn = r->top_feature_mean_ulp < 0 ? -1.0 : 1.0, bestv = 0.0;
        for (size_t row = 0; row < (size_t)c->nb * T; row++) any_tie |= c->tie_row[row];
        for (size_t row = 0; row < (size_t)c->nb * T; row++) {
            if (any_tie && !c->tie_row[row]) continue;
            double e = sgn * ((double)c->o_lp_all[row * D + i] - (double)c->o_hp_all[row * D + i]);
            if (best_row < 0 || e > bestv) {
                best_row = (int)row;
                bestv = e;
            }
        }
        int bi = best_row / T, t = best_row % T;
        r->probe_b = c->bs[bi];
        r->probe_t = t;
        r->probe_i = i;
        r->probe_err = sgn * bestv;
        if (c->tr_b != r->probe_b && (st = load_lp_trace(c, r, step, layer, h, r->probe_b, 0)) != TSC_OK) goto done;
        obar_curve(c, t, i, c->g_curve + (size_t)hi * T);
        r->probe_final_obar_err = c->g_curve[(size_t)hi * T + n_visible(c, t) - 1];
        c->g_probe[hi * 3] = r->probe_b;
        c->g_probe[hi * 3 + 1] = t;
        c->g_probe[hi * 3 + 2] = i;
    }
    if (c->o->probe_t >= 0) {
        int pb = c->o->probe_b >= 0 ? c->o->probe_b : c->bs[0];
        if (c->tr_b != pb && (st = load_lp_trace(c, r, step, layer, h, pb, 0)) != TSC_OK) goto done;
        obar_curve(c, c->o->probe_t, c->o->probe_i, c->g_curve_c + (size_t)hi * T);
    }

    /* e: identity summary and the rank-1 analysis of the dW^Q error. */
    if (c->o->identity) {
        r->identity_max_abs_residual = id_res;
        r->identity_max_abs_lhs = id_lhs;
        r->identity_rel_residual = id_lhs > 0 ? id_res / id_lhs : (id_res > 0 ? INFINITY : 0.0);
    }
    if (has_x) {
        double fro = 0.0;
        for (size_t i = 0; i < (size_t)D * c->C; i++) fro += c->dw[i] * c->dw[i];
        r->dwq_err_fro = sqrt(fro);
        r->rank1_accum_gain = term_sq > 0 ? r->dwq_err_fro / sqrt(term_sq) : NAN;
        int n = c->n_cand;
        r->n_terms = n;
        if (n >= 1) {
            double *s = calloc((size_t)n, sizeof *s), *u1 = calloc((size_t)n, sizeof *u1);
            double *g = calloc((size_t)n * n, sizeof *g), *cs = calloc((size_t)n * n, sizeof *cs);
            double *cc = calloc((size_t)n, sizeof *cc);
            if (!s || !u1 || !g || !cs || !cc) {
                free(s), free(u1), free(g), free(cs), free(cc);
                st = tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory for %d rank-1 terms", n);
                goto done;
            }
            st = tsc_linalg_rank1_svd(c->c_a, (size_t)D, c->c_b, (size_t)c->C, (size_t)n, s, u1);
            if (st == TSC_OK) {
                tsc_linalg_rank1_gram(c->c_a, (size_t)D, c->c_b, (size_t)c->C, (size_t)n, g);
                tsc_linalg_rank1_cosine(c->c_a, (size_t)D, c->c_b, (size_t)c->C, (size_t)n, cs);
                r->rank1_top_energy = tsc_linalg_top_energy(s, (size_t)n);
                r->rank1_eff_rank = tsc_linalg_effective_rank(s, (size_t)n);
                double sum = 0.0;
                int np = 0;
                for (int i2 = 0; i2 < n; i2++)
                    for (int j2 = i2 + 1; j2 < n; j2++) {
                        sum += cs[i2 * n + j2];
                        np++;
                    }
                r->rank1_mean_cos = np ? sum / np : 1.0;
                for (int i2 = 0; i2 < n; i2++) cc[i2] = c->m->softmax_scale * c->c_coeff[i2];
                double norm = 0.0;
                double proj = tsc_linalg_rank1_projection(g, cc, u1, s[0], (size_t)n, &norm);
                r->rank1_proj_share = norm > 0 ? fabs(proj) / norm : NAN;
                for (int i2 = 0; i2 < n && i2 < c->N; i2++) {
                    c->g_sv[(size_t)hi * c->N + i2] = s[i2];
                    for (int j2 = 0; j2 < n && j2 < c->N; j2++)
                        c->g_cos[((size_t)hi * c->N + i2) * c->N + j2] = cs[i2 * n + j2];
                }
                c->g_has_rank1 = 1;
                /* the top term for the across-step similarity */
                int top = 0;
                for (int i2 = 1; i2 < n; i2++)
                    if (fabs(c->c_coeff[i2]) > fabs(c->c_coeff[top])) top = i2;
                size_t slot = ((size_t)si * ac->nL + li) * c->nh + hi;
                memcpy(ac->top_a + slot * D, c->c_a + (size_t)top * D, (size_t)D * sizeof(double));
                memcpy(ac->top_b + slot * c->C, c->c_b + (size_t)top * c->C, (size_t)c->C * sizeof(double));
                ac->has[slot] = 1;
            }
            free(s), free(u1), free(g), free(cs), free(cc);
            if (st != TSC_OK) goto done;
        }
    }
done:
    free(expct);
    if (st != TSC_OK)
        return tsc_error_wrap(st, "analysing step %lld layer %d head %d: ", step, layer, h);
    return TSC_OK;
}

/* f: spectral norms of one (step, layer)'s weights: the four matrices in parallel (power
 * iteration and LAPACK each), then each head's rows of w_q. */
static tsc_status_t spectral(ctx_t *c, hid_t g, long long step, int layer, tsc_layer_result_t *lr) {
    static const char *names[4] = {"w_q", "w_k", "w_v", "w_o"};
    lr->step = step;
    lr->layer = layer;
    lr->max_rel_diff = 0.0;
    lr->n_nonfinite = 0;
    lr->first_nonfinite[0] = '\0';
    float *wm[4] = {NULL, NULL, NULL, NULL};
    size_t rows[4] = {0}, cols[4] = {0};
    tsc_status_t st = TSC_OK, wst[4] = {TSC_OK, TSC_OK, TSC_OK, TSC_OK};
    char wmsg[4][512];
    for (int w = 0; w < 4; w++) lr->w_norm[w] = lr->w_norm_lapack[w] = NAN;
    for (int w = 0; w < 4 && st == TSC_OK; w++) {
        if (!tsc_dump_has_dataset(c->d, step, layer, names[w])) continue;
        tsc_dump_dataset_info_t info;
        if ((st = tsc_dump_dataset_info(c->d, step, layer, names[w], &info)) != TSC_OK) break;
        rows[w] = (size_t)info.dims[0], cols[w] = (size_t)info.dims[1];
        if (!(wm[w] = malloc(rows[w] * cols[w] * sizeof(float)))) {
            st = tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory for %s [%zu, %zu]", names[w], rows[w], cols[w]);
            break;
        }
        st = tsc_dump_read(c->d, step, layer, names[w], 0, 0, wm[w]);
        /* Non-finite weights: counted with the first coordinate; that matrix's norms (and the
         * per-head norms of w_q heads that hold one) come out NaN (tsc_linalg_spectral_norm), the
         * rest goes on. */
        for (size_t i = 0; st == TSC_OK && i < rows[w] * cols[w]; i++)
            if (!isfinite(wm[w][i]) && lr->n_nonfinite++ == 0)
                snprintf(lr->first_nonfinite, sizeof lr->first_nonfinite, "%s[r=%zu,c=%zu]", names[w], i / cols[w],
                         i % cols[w]);
    }
    if (st == TSC_OK) {
#pragma omp parallel for schedule(dynamic, 1)
        for (int w = 0; w < 4; w++) {
            if (!wm[w]) continue;
            wst[w] = tsc_linalg_spectral_norm(wm[w], rows[w], cols[w], SPEC_MAX_ITER, SPEC_TOL, &lr->w_norm[w], NULL,
                                              &lr->w_norm_lapack[w]);
            if (wst[w] != TSC_OK)
                snprintf(wmsg[w], sizeof wmsg[w], "spectral norm of %s, step %lld layer %d: %s", names[w], step, layer,
                         tsc_error_last());
        }
        for (int w = 0; w < 4 && st == TSC_OK; w++) {
            if (wst[w] != TSC_OK) st = tsc_error_set(wst[w], "%s", wmsg[w]);
            else if (wm[w] && isfinite(lr->w_norm[w]) && lr->w_norm_lapack[w] > 0) {
                double rd = fabs(lr->w_norm[w] - lr->w_norm_lapack[w]) / lr->w_norm_lapack[w];
                if (rd > lr->max_rel_diff) lr->max_rel_diff = rd;
            }
        }
    }
    if (st == TSC_OK && wm[0] && rows[0] == (size_t)c->H * c->D) {
        /* per head: rows h*D .. (h+1)*D of w_q */
        double *hn = malloc((size_t)c->H * sizeof *hn), *hl = malloc((size_t)c->H * sizeof *hl);
        if (!hn || !hl) st = tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory for per-head norms");
        for (int h = 0; st == TSC_OK && h < c->H; h++) {
            const float *wh = wm[0] + (size_t)h * c->D * cols[0];
            st = tsc_linalg_spectral_norm(wh, (size_t)c->D, cols[0], SPEC_MAX_ITER, SPEC_TOL, &hn[h], NULL, &hl[h]);
            if (st == TSC_OK && hl[h] > 0) {
                double rd = fabs(hn[h] - hl[h]) / hl[h];
                if (rd > c->a->wq_head_norm_max_rel_diff) c->a->wq_head_norm_max_rel_diff = rd;
            }
        }
        uint64_t dims[1] = {(uint64_t)c->H};
        if (st == TSC_OK) st = tsc_h5_write_doubles(g, "wq_head_norm", 1, dims, hn, "head", "1");
        if (st == TSC_OK) st = tsc_h5_write_doubles(g, "wq_head_norm_lapack", 1, dims, hl, "head", "1");
        free(hn);
        free(hl);
    }
    for (int w = 0; w < 4; w++) free(wm[w]);
    if (st != TSC_OK) return st;
    uint64_t d4[1] = {4};
    st = tsc_h5_write_doubles(g, "w_norm", 1, d4, lr->w_norm, "weight(q,k,v,o)", "1");
    if (st == TSC_OK) st = tsc_h5_write_doubles(g, "w_norm_lapack", 1, d4, lr->w_norm_lapack, "weight(q,k,v,o)", "1");
    return st;
}

static tsc_status_t write_group(ctx_t *c, hid_t g) {
    int nh = c->nh, D = c->D, T = c->T, N = c->N;
    int64_t *heads = malloc((size_t)nh * sizeof *heads);
    if (!heads) return tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory");
    for (int i = 0; i < nh; i++) heads[i] = c->hs[i];
    uint64_t d1[1] = {(uint64_t)nh}, d2[2] = {(uint64_t)nh, (uint64_t)D}, dt[2] = {(uint64_t)nh, (uint64_t)T};
    uint64_t d3[3] = {(uint64_t)nh, (uint64_t)c->nb, (uint64_t)T}, dp[2] = {(uint64_t)nh, 3};
    uint64_t dc[3] = {(uint64_t)nh, (uint64_t)N, (uint64_t)N}, ds[2] = {(uint64_t)nh, (uint64_t)N};
    tsc_status_t st;
    if ((st = tsc_h5_write_ints(g, "heads", 1, d1, heads, "head", "index")) ||
        (st = tsc_h5_write_doubles(g, "o_feature_bias_ulp", 2, d2, c->f_ulp, "head,feature", "ulp")) ||
        (st = tsc_h5_write_doubles(g, "o_feature_bias", 2, d2, c->f_val, "head,feature", "value")) ||
        (st = tsc_h5_write_doubles(g, "o_feature_p", 2, d2, c->f_p, "head,feature", "probability")) ||
        (st = tsc_h5_write_doubles(g, "delta_diff", 3, d3, c->g_dd, "head,batch,token", "value")) ||
        (st = tsc_h5_write_ints(g, "sink_counts", 2, dt, c->g_sink, "head,key", "rows")) ||
        (st = tsc_h5_write_doubles(g, "obar_err_auto", 2, dt, c->g_curve, "head,key", "value")) ||
        (st = tsc_h5_write_ints(g, "probe_auto", 2, dp, c->g_probe, "head,(batch,token,feature)", "index")))
        goto out;
    if (c->o->probe_t >= 0 &&
        (st = tsc_h5_write_doubles(g, "obar_err_chosen", 2, dt, c->g_curve_c, "head,key", "value")))
        goto out;
    if (c->g_has_rank1 &&
        ((st = tsc_h5_write_doubles(g, "rank1_cos", 3, dc, c->g_cos, "head,term,term", "1")) ||
         (st = tsc_h5_write_doubles(g, "rank1_sv", 2, ds, c->g_sv, "head,term", "1"))))
        goto out;
out:
    free(heads);
    return st;
}

static int cmp_int(const void *x, const void *y) { return *(const int *)x - *(const int *)y; }

void tsc_analysis_free(tsc_analysis_t *a) {
    if (!a) return;
    free(a->steps);
    free(a->heads);
    free(a->layers);
    free(a);
}

/* The per-thread scratch of a context (see tsc_analysis.h for the memory bound). */
static tsc_status_t scratch_alloc(ctx_t *c) {
    int bad = 0;
    size_t TD = (size_t)c->T * c->D, T = (size_t)c->T, D = (size_t)c->D, C = (size_t)c->C;
    size_t N = (size_t)c->N, nb = (size_t)c->nb;
    float **fs[] = {&c->q, &c->k, &c->v, &c->dO, &c->od, &c->o_hp, &c->o_lp, &c->dq_lp, &c->dq_hd, &c->vr};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) *fs[i] = xcalloc(TD, sizeof(float), &bad);
    float **ft[] = {&c->lse_hp, &c->lse_lp, &c->dl_hp, &c->dl_lp, &c->dl_hd};
    for (size_t i = 0; i < sizeof ft / sizeof ft[0]; i++) *ft[i] = xcalloc(T, sizeof(float), &bad);
    c->x = xcalloc(T * C, sizeof(float), &bad);
    c->kd = xcalloc(TD, sizeof(double), &bad);
    c->pk = xcalloc(TD, sizeof(double), &bad);
    c->pblk = xcalloc((size_t)PK_ROWS * T, sizeof(double), &bad);
    c->xd = xcalloc(T * C, sizeof(double), &bad);
    c->dw = xcalloc(D * C, sizeof(double), &bad);
    c->dwt = xcalloc(D * C, sizeof(double), &bad);
    c->o_hp_all = xcalloc(nb * TD, sizeof(float), &bad);
    c->o_lp_all = xcalloc(nb * TD, sizeof(float), &bad);
    c->dl_hp_all = xcalloc(nb * T, sizeof(float), &bad);
    c->dl_lp_all = xcalloc(nb * T, sizeof(float), &bad);
    c->evt = xcalloc(nb * TD, 1, &bad);
    c->c_coeff = xcalloc(N, sizeof(double), &bad);
    c->c_a = xcalloc(N * D, sizeof(double), &bad);
    c->c_b = xcalloc(N * (C ? C : 1), sizeof(double), &bad);
    c->dO_all = xcalloc(nb * TD, sizeof(float), &bad);
    c->tie_row = xcalloc(nb * T, 1, &bad);
    if (bad) return tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory for the scratch of one head (T %zu, D %zu)", T, D);
    c->tr_b = -1;
    return tsc_attn_trace_init(&c->tr, c->T, c->D, c->lp.block_k, TSC_TRACE_SCORES | TSC_TRACE_TILES);
}

static void scratch_free(ctx_t *c) {
    void *ps[] = {c->q, c->k, c->v, c->dO, c->od, c->o_hp, c->o_lp, c->dq_lp, c->dq_hd, c->vr, c->x,
                  c->lse_hp, c->lse_lp, c->dl_hp, c->dl_lp, c->dl_hd, c->kd, c->pk, c->pblk, c->xd, c->dw,
                  c->dwt, c->o_hp_all, c->o_lp_all, c->dl_hp_all, c->dl_lp_all, c->evt, c->c_coeff,
                  c->c_a, c->c_b, c->dO_all, c->tie_row};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
    tsc_attn_trace_free(&c->tr);
}

static void ctx_free(ctx_t *c) {
    void *ps[] = {c->bs, c->hs, c->f_ulp, c->f_val, c->f_p, c->f_flag, c->pool_u, c->pool_c, c->g_dd, c->g_sink,
                  c->g_curve, c->g_curve_c, c->g_probe, c->g_cos, c->g_sv};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
}

tsc_status_t tsc_analysis_run(const char *dump_path, const char *out_dir, const tsc_analysis_opts_t *opts,
                              tsc_analysis_t **out) {
    *out = NULL;
    ctx_t cx;
    ctx_t *c = &cx;
    memset(c, 0, sizeof *c);
    c->o = opts;
    tsc_h5_file_t f;
    f.fid = H5I_INVALID_HID;
    int file_open = 0;
    long long *pair_step = NULL;
    int *pair_layer = NULL, npairs = 0;
    across_t ac;
    memset(&ac, 0, sizeof ac);
    ctx_t *tcs = NULL;
    int nthr = 1, n_tcs = 0;
    tsc_status_t *hst = NULL;
    char (*hmsg)[512] = NULL;
    tsc_analysis_t *a = calloc(1, sizeof *a);
    if (!a) return tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory");
    c->a = a;
    tsc_status_t st = tsc_dump_open(&c->d, dump_path);
    if (st != TSC_OK) goto fail;
    c->m = tsc_dump_meta(c->d);
    const tsc_dump_meta_t *m = c->m;
    /* Policies: hp defaults to fp32; lp to the dump's recorded policy, else bf16-fa2. */
    snprintf(a->hp, sizeof a->hp, "%s", opts->hp[0] ? opts->hp : "fp32");
    if ((st = tsc_policy_parse(a->hp, &c->hp)) != TSC_OK) {
        st = tsc_error_wrap(st, "--hp '%s': ", a->hp);
        goto fail;
    }
    if (opts->lp[0]) {
        snprintf(a->lp, sizeof a->lp, "%s", opts->lp);
        if ((st = tsc_policy_parse(a->lp, &c->lp)) != TSC_OK) {
            st = tsc_error_wrap(st, "--lp '%s': ", a->lp);
            goto fail;
        }
    } else if (tsc_policy_parse(m->policy, &c->lp) == TSC_OK) {
        snprintf(a->lp, sizeof a->lp, "%s", m->policy);
    } else {
        tsc_error_clear();
        snprintf(a->lp, sizeof a->lp, "bf16-fa2");
        tsc_policy_parse(a->lp, &c->lp);
    }
    /* Canonical names. */
    tsc_policy_format(&c->hp, a->hp, sizeof a->hp);
    tsc_policy_format(&c->lp, a->lp, sizeof a->lp);
    c->lp_hd = c->lp;
    c->lp_hd.delta_src = TSC_DELTA_HP_O;
    c->o_fmt = c->lp.fmt[TSC_STAGE_O];
    c->delta_fmt = c->lp.fmt[TSC_STAGE_DELTA];
    c->v_fmt = c->lp.fmt[TSC_STAGE_V];
    c->out_fmt = fmt_narrower_than_f32(c->lp.fmt[TSC_STAGE_PV]) ? c->lp.fmt[TSC_STAGE_PV] : c->o_fmt;
    c->B = m->batch;
    c->H = m->n_head;
    c->Hkv = m->n_kv_head;
    c->T = m->seq_len;
    c->D = m->head_dim;
    c->C = m->d_model;
    c->N = opts->n_terms > 0 ? opts->n_terms : 32;
    a->B = c->B, a->H = c->H, a->Hkv = c->Hkv, a->T = c->T, a->D = c->D, a->C = c->C;
    a->n_layer = m->n_layer;
    a->scale = m->softmax_scale;
    a->causal = m->causal;
    a->rule = opts->rule;
    a->tie_eps = opts->tie_eps;
    snprintf(a->dump_path, sizeof a->dump_path, "%s", dump_path);
    tsc_select_format(&opts->sel, a->selection, sizeof a->selection);

    /* Selected batch rows, heads, (step, layer) pairs. */
    int bad = 0;
    c->bs = xcalloc((size_t)c->B, sizeof(int), &bad);
    c->hs = xcalloc((size_t)c->H, sizeof(int), &bad);
    if (bad) goto nomem;
    for (int b = 0; b < c->B; b++)
        if (tsc_select_set_has(&opts->sel.batches, b)) c->bs[c->nb++] = b;
    for (int h = 0; h < c->H; h++)
        if (tsc_select_set_has(&opts->sel.heads, h)) c->hs[c->nh++] = h;
    int nsteps = tsc_dump_n_steps(c->d);
    pair_step = xcalloc((size_t)nsteps * (size_t)(m->n_layer > 0 ? m->n_layer : 1), sizeof(long long), &bad);
    pair_layer = xcalloc((size_t)nsteps * (size_t)(m->n_layer > 0 ? m->n_layer : 1), sizeof(int), &bad);
    a->steps = xcalloc((size_t)nsteps, sizeof(long long), &bad);
    ac.layers = xcalloc((size_t)(m->n_layer > 0 ? m->n_layer : 1), sizeof(int), &bad);
    if (bad) goto nomem;
    for (int si = 0; si < nsteps; si++) {
        long long step = tsc_dump_step_at(c->d, si);
        if (!tsc_select_set_has(&opts->sel.steps, step)) continue;
        int ls[1024], nl = 0;
        if ((st = tsc_dump_layers(c->d, step, ls, 1024, &nl)) != TSC_OK) goto fail;
        int any = 0;
        for (int i = 0; i < nl && i < 1024; i++) {
            if (!tsc_select_set_has(&opts->sel.layers, ls[i])) continue;
            pair_step[npairs] = step;
            pair_layer[npairs++] = ls[i];
            any = 1;
            int seen = 0;
            for (int u = 0; u < ac.nL; u++) seen |= ac.layers[u] == ls[i];
            if (!seen && ac.nL < m->n_layer) ac.layers[ac.nL++] = ls[i];
        }
        if (any) a->steps[a->n_steps++] = step;
    }
    qsort(ac.layers, (size_t)ac.nL, sizeof(int), cmp_int);
    if (npairs == 0 || c->nh == 0 || c->nb == 0) {
        st = tsc_error_set(TSC_ERR_ARG, "%s: the selection '%s' matches no step/layer/head/batch of the dump",
                           dump_path, a->selection);
        goto fail;
    }
    ac.S = a->n_steps;
    a->n_feature_tests = (int64_t)ac.nL * c->nh * c->D; /* pooled over steps: one test per (layer, head, feature) */
    a->n_head_tests = (int64_t)npairs * c->nh;
    a->heads = xcalloc((size_t)npairs * c->nh, sizeof *a->heads, &bad);
    a->layers = xcalloc((size_t)npairs, sizeof *a->layers, &bad);

    /* Scratch. */
    size_t T = (size_t)c->T, D = (size_t)c->D, C = (size_t)c->C, nh = (size_t)c->nh;
    size_t N = (size_t)c->N, nb = (size_t)c->nb;
    c->f_ulp = xcalloc(nh * D, sizeof(double), &bad);
    c->f_val = xcalloc(nh * D, sizeof(double), &bad);
    c->f_p = xcalloc(nh * D, sizeof(double), &bad);
    c->f_flag = xcalloc(nh * D, sizeof(int64_t), &bad);
    c->nL = ac.nL;
    c->pool_u = xcalloc((size_t)ac.nL * nh * D, sizeof(tsc_moments_t), &bad);
    c->pool_c = xcalloc((size_t)ac.nL * nh * D, sizeof(tsc_moments_t), &bad);
    if (!bad)
        for (size_t x = 0; x < (size_t)ac.nL * nh * D; x++) {
            tsc_moments_init(&c->pool_u[x]);
            tsc_moments_init(&c->pool_c[x]);
        }
    c->g_dd = xcalloc(nh * nb * T, sizeof(double), &bad);
    c->g_sink = xcalloc(nh * T, sizeof(int64_t), &bad);
    c->g_curve = xcalloc(nh * T, sizeof(double), &bad);
    c->g_curve_c = xcalloc(nh * T, sizeof(double), &bad);
    c->g_probe = xcalloc(nh * 3, sizeof(int64_t), &bad);
    c->g_cos = xcalloc(nh * N * N, sizeof(double), &bad);
    c->g_sv = xcalloc(nh * N, sizeof(double), &bad);
    size_t nslots = (size_t)ac.S * (size_t)ac.nL * nh;
    ac.top_a = xcalloc(nslots * D, sizeof(double), &bad);
    ac.top_b = xcalloc(nslots * (C ? C : 1), sizeof(double), &bad);
    ac.has = xcalloc(nslots, 1, &bad);
    if (bad) goto nomem;
    /* One copy of the context per thread: shared arrays (indexed by head, disjoint) plus the
     * thread's own scratch; heads of a (step, layer) run in parallel, dump reads serialised. */
#ifdef _OPENMP
    nthr = omp_get_max_threads();
#endif
    if (nthr > c->nh) nthr = c->nh;
    if (nthr < 1) nthr = 1;
    tcs = calloc((size_t)nthr, sizeof *tcs);
    hst = calloc((size_t)c->nh, sizeof *hst);
    hmsg = calloc((size_t)c->nh, sizeof *hmsg);
    if (!tcs || !hst || !hmsg) goto nomem;
    for (int t = 0; t < nthr; t++) {
        tcs[t] = *c;
        if ((st = scratch_alloc(&tcs[t])) != TSC_OK) {
            n_tcs = t + 1;
            goto fail;
        }
        n_tcs = t + 1;
    }

    /* Output file. */
    char path[4096];
    snprintf(path, sizeof path, "%s/analysis.h5", out_dir);
    if ((st = tsc_h5_create(&f, path)) != TSC_OK) goto fail;
    file_open = 1;
    if ((st = tsc_h5_attr_write_str(f.fid, "format", TSC_ANALYSIS_FORMAT_NAME)) ||
        (st = tsc_h5_attr_write_long(f.fid, "format_version", TSC_ANALYSIS_FORMAT_VERSION)) ||
        (st = tsc_h5_attr_write_str(f.fid, "dump", dump_path)) ||
        (st = tsc_h5_attr_write_str(f.fid, "hp", a->hp)) || (st = tsc_h5_attr_write_str(f.fid, "lp", a->lp)) ||
        (st = tsc_h5_attr_write_str(f.fid, "selection", a->selection)) ||
        (st = tsc_h5_attr_write_str(f.fid, "producer", "tilescope-analyze " TSC_VERSION)))
        goto fail;

    for (int p = 0; p < npairs; p++) {
        long long step = pair_step[p];
        int layer = pair_layer[p];
        int si = 0, li = 0;
        while (a->steps[si] != step) si++;
        while (ac.layers[li] != layer) li++;
        c->has_o = tsc_dump_has_dataset(c->d, step, layer, "o");
        c->g_has_rank1 = 0;
        for (int t = 0; t < n_tcs; t++) tcs[t].g_has_rank1 = 0;
        for (size_t i = 0; i < nh * N * N; i++) c->g_cos[i] = NAN;
        for (size_t i = 0; i < nh * N; i++) c->g_sv[i] = NAN;
        char gname[64];
        snprintf(gname, sizeof gname, "step_%08lld/layer_%03d", step, layer);
        hid_t g;
        if ((st = tsc_h5_group_create(f.fid, gname, &g)) != TSC_OK) goto fail;
        if (opts->progress) fprintf(stderr, "\ranalyze: step %lld layer %d (%d/%d)   ", step, layer, p + 1, npairs);
        for (int t = 0; t < n_tcs; t++) tcs[t].has_o = c->has_o;
        size_t h0 = a->n_heads;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthr)
        for (int hi = 0; hi < c->nh; hi++) {
            int tid = 0;
#ifdef _OPENMP
            tid = omp_get_thread_num();
#endif
            hst[hi] = analyze_head(&tcs[tid], &a->heads[h0 + (size_t)hi], step, layer, hi, &ac, si, li);
            if (hst[hi] != TSC_OK) snprintf(hmsg[hi], sizeof hmsg[hi], "%s", tsc_error_last());
            if (tcs[tid].g_has_rank1) {
#pragma omp atomic write
                c->g_has_rank1 = 1;
            }
        }
        for (int hi = 0; hi < c->nh && st == TSC_OK; hi++)
            if (hst[hi] != TSC_OK) st = tsc_error_set(hst[hi], "%s", hmsg[hi]);
        if (st == TSC_OK) {
            for (int hi = 0; hi < c->nh; hi++) a->n_skipped_heads += a->heads[h0 + (size_t)hi].skipped;
            a->n_heads += (size_t)c->nh;
        }
        if (st == TSC_OK) st = write_group(c, g);
        if (st == TSC_OK) st = spectral(c, g, step, layer, &a->layers[a->n_layers_res++]);
        H5Gclose(g);
        if (st != TSC_OK) goto fail;
    }
    if (opts->progress) fprintf(stderr, "\n");

    /* a: the flags, pooled per (layer, head, feature) over the analysed steps and batch rows. */
    {
        size_t nP = (size_t)ac.nL * nh * D;
        double *pm = malloc(nP * sizeof *pm), *pp = malloc(nP * sizeof *pp);
        int64_t *pf = malloc(nP * sizeof *pf);
        if (!pm || !pp || !pf) {
            free(pm), free(pp), free(pf);
            goto nomem;
        }
        double *pcm = malloc(nP * sizeof *pcm);
        if (!pcm) {
            free(pm), free(pp), free(pf);
            goto nomem;
        }
        for (size_t x = 0; x < nP; x++) {
            const tsc_moments_t *mu = &c->pool_u[x], *mc = &c->pool_c[x];
            pm[x] = mu->n ? mu->mean : NAN;
            pcm[x] = mc->n ? mc->mean : NAN;
            pp[x] = mc->n >= 2 ? tsc_stats_t_test_p(tsc_moments_tstat(mc), (double)(mc->n - 1)) : 1.0;
            pf[x] = tsc_stats_flag(pp[x], a->n_feature_tests, pm[x], mc->n_pos + mc->n_neg, &a->rule);
        }
        for (size_t i = 0; i < a->n_heads; i++) {
            tsc_head_result_t *r = &a->heads[i];
            if (r->skipped) continue;
            size_t li = 0, hi = 0;
            while (ac.layers[li] != r->layer) li++;
            while (c->hs[hi] != r->head) hi++;
            for (int f2 = 0; f2 < c->D; f2++) {
                size_t x = (li * nh + hi) * D + (size_t)f2;
                r->n_features_tested++;
                if (!pf[x]) continue;
                if (r->n_features_flagged < TSC_ANALYSIS_MAX_FLAGGED) r->flagged_features[r->n_features_flagged] = f2;
                r->n_features_flagged++;
            }
            r->flagged = r->n_features_flagged > 0;
        }
        hid_t g;
        uint64_t d3[3] = {(uint64_t)ac.nL, nh, D};
        st = tsc_h5_group_create(f.fid, "cumulative", &g);
        if (st == TSC_OK) {
            if ((st = tsc_h5_write_doubles(g, "feature_bias_ulp", 3, d3, pm, "layer,head,feature", "ulp")) ||
                (st = tsc_h5_write_doubles(g, "feature_p", 3, d3, pp, "layer,head,feature", "probability")) ||
                (st = tsc_h5_write_doubles(g, "feature_delta_contrib", 3, d3, pcm, "layer,head,feature", "value")) ||
                (st = tsc_h5_write_ints(g, "feature_flag", 3, d3, pf, "layer,head,feature", "bool"))) {
                /* st carries the error */
            }
            H5Gclose(g);
        }
        free(pm), free(pp), free(pf), free(pcm);
        if (st != TSC_OK) goto fail;
    }

    /* Cumulative sums across steps, per (layer, head), in step order; [S, nL, nh] arrays. */
    {
        size_t S = (size_t)ac.S, nL = (size_t)ac.nL, n3 = S * nL * nh;
        double *ds = malloc(n3 * sizeof *ds), *dc = malloc(n3 * sizeof *dc), *mm = malloc(n3 * sizeof *mm);
        double *me = malloc(n3 * sizeof *me), *po = malloc(n3 * sizeof *po);
        double *wqh = malloc(S * nL * (size_t)c->H * sizeof *wqh), *wn = malloc(S * nL * 4 * sizeof *wn);
        double *cosS = malloc(nL * nh * S * S * sizeof *cosS);
        int64_t *stp = malloc(S * sizeof *stp), *lys = malloc(nL * sizeof *lys), *hds = malloc(nh * sizeof *hds);
        if (!ds || !dc || !mm || !me || !po || !wqh || !wn || !cosS || !stp || !lys || !hds) {
            free(ds), free(dc), free(mm), free(me), free(po), free(wqh), free(wn), free(cosS), free(stp), free(lys),
                free(hds);
            goto nomem;
        }
        for (size_t i = 0; i < n3; i++) ds[i] = dc[i] = mm[i] = me[i] = po[i] = NAN;
        for (size_t i = 0; i < S * nL * (size_t)c->H; i++) wqh[i] = NAN;
        for (size_t i = 0; i < S * nL * 4; i++) wn[i] = NAN;
        for (size_t i = 0; i < nL * nh * S * S; i++) cosS[i] = NAN;
        for (size_t i = 0; i < S; i++) stp[i] = a->steps[i];
        for (size_t i = 0; i < nL; i++) lys[i] = ac.layers[i];
        for (size_t i = 0; i < nh; i++) hds[i] = c->hs[i];
        for (size_t i = 0; i < a->n_heads; i++) {
            tsc_head_result_t *r = &a->heads[i];
            size_t si = 0, li = 0, hi = 0;
            while (a->steps[si] != r->step) si++;
            while (ac.layers[li] != r->layer) li++;
            while (c->hs[hi] != r->head) hi++;
            size_t x = (si * nL + li) * nh + hi;
            ds[x] = r->skipped ? NAN : r->delta_sum;
            mm[x] = (double)r->rows_multi_max;
            me[x] = (double)r->rows_multi_max_eps;
            po[x] = (double)r->pbar_one;
        }
        for (size_t li = 0; li < nL; li++)
            for (size_t hi = 0; hi < nh; hi++) {
                double run = 0.0;
                for (size_t si = 0; si < S; si++) {
                    size_t x = (si * nL + li) * nh + hi;
                    if (isnan(ds[x])) continue; /* not analysed (or skipped): the sum carries over */
                    run += ds[x];
                    dc[x] = run;
                }
            }
        for (size_t i = 0; i < a->n_heads; i++) {
            tsc_head_result_t *r = &a->heads[i];
            size_t si = 0, li = 0, hi = 0;
            while (a->steps[si] != r->step) si++;
            while (ac.layers[li] != r->layer) li++;
            while (c->hs[hi] != r->head) hi++;
            r->delta_cumsum = dc[(si * nL + li) * nh + hi];
        }
        /* Spectral norms back from the per-group datasets are in the layer results; per-head w_q
         * norms are re-read from the groups just written. */
        for (size_t i = 0; i < a->n_layers_res; i++) {
            tsc_layer_result_t *lr = &a->layers[i];
            size_t si = 0, li = 0;
            while (a->steps[si] != lr->step) si++;
            while (ac.layers[li] != lr->layer) li++;
            for (int w = 0; w < 4; w++) wn[(si * nL + li) * 4 + w] = lr->w_norm[w];
            char gname[96];
            snprintf(gname, sizeof gname, "step_%08lld/layer_%03d/wq_head_norm", lr->step, lr->layer);
            if (tsc_h5_exists(f.fid, gname)) {
                hid_t ds_id = H5Dopen2(f.fid, gname, H5P_DEFAULT);
                if (ds_id >= 0) {
                    if (H5Dread(ds_id, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                wqh + (si * nL + li) * (size_t)c->H) < 0)
                        st = tsc_error_set(TSC_ERR_IO, "%s: cannot read back %s", path, gname);
                    H5Dclose(ds_id);
                }
            }
        }
        /* Across-step cosine of each head's top rank-1 term. */
        for (size_t li = 0; li < nL; li++)
            for (size_t hi = 0; hi < nh; hi++)
                for (size_t s1 = 0; s1 < S; s1++)
                    for (size_t s2 = 0; s2 < S; s2++) {
                        size_t x1 = (s1 * nL + li) * nh + hi, x2 = (s2 * nL + li) * nh + hi;
                        if (!ac.has[x1] || !ac.has[x2]) continue;
                        double cs4[4];
                        double *aa = malloc(2 * D * sizeof(double)), *bb = malloc(2 * (C ? C : 1) * sizeof(double));
                        if (!aa || !bb) {
                            free(aa), free(bb);
                            continue;
                        }
                        memcpy(aa, ac.top_a + x1 * D, D * sizeof(double));
                        memcpy(aa + D, ac.top_a + x2 * D, D * sizeof(double));
                        memcpy(bb, ac.top_b + x1 * C, C * sizeof(double));
                        memcpy(bb + C, ac.top_b + x2 * C, C * sizeof(double));
                        tsc_linalg_rank1_cosine(aa, D, bb, C, 2, cs4);
                        cosS[((li * nh + hi) * S + s1) * S + s2] = cs4[1];
                        free(aa), free(bb);
                    }
        hid_t g;
        uint64_t d3[3] = {S, nL, nh}, d1s[1] = {S}, d1l[1] = {nL}, d1h[1] = {nh};
        uint64_t dw3[3] = {S, nL, (uint64_t)c->H}, dn3[3] = {S, nL, 4}, dcs[4] = {nL, nh, S, S};
        if (st == TSC_OK) st = tsc_h5_group_create(f.fid, "cumulative", &g);
        if (st == TSC_OK) {
            if ((st = tsc_h5_write_ints(g, "steps", 1, d1s, stp, "step", "step")) ||
                (st = tsc_h5_write_ints(g, "layers", 1, d1l, lys, "layer", "index")) ||
                (st = tsc_h5_write_ints(g, "heads", 1, d1h, hds, "head", "index")) ||
                (st = tsc_h5_write_doubles(g, "delta_sum", 3, d3, ds, "step,layer,head", "value")) ||
                (st = tsc_h5_write_doubles(g, "delta_cumsum", 3, d3, dc, "step,layer,head", "value")) ||
                (st = tsc_h5_write_doubles(g, "rows_multi_max", 3, d3, mm, "step,layer,head", "rows")) ||
                (st = tsc_h5_write_doubles(g, "rows_multi_max_eps", 3, d3, me, "step,layer,head", "rows")) ||
                (st = tsc_h5_write_doubles(g, "pbar_one", 3, d3, po, "step,layer,head", "entries")) ||
                (st = tsc_h5_write_doubles(g, "wq_head_norm", 3, dw3, wqh, "step,layer,head(all)", "1")) ||
                (st = tsc_h5_write_doubles(g, "w_norm", 3, dn3, wn, "step,layer,weight(q,k,v,o)", "1")) ||
                (st = tsc_h5_write_doubles(g, "rank1_cos_steps", 4, dcs, cosS, "layer,head,step,step", "1"))) {
                /* st carries the error */
            }
            H5Gclose(g);
        }
        free(ds), free(dc), free(mm), free(me), free(po), free(wqh), free(wn), free(cosS), free(stp), free(lys),
            free(hds);
        if (st != TSC_OK) goto fail;
    }
    st = tsc_h5_commit(&f); /* closes the file either way */
    file_open = 0;
    goto done;
nomem:
    st = tsc_error_set(TSC_ERR_NOMEM, "analysis of %s: out of memory", dump_path);
fail:
    if (file_open) tsc_h5_abort(&f);
done:
    for (int t = 0; t < n_tcs; t++) scratch_free(&tcs[t]);
    free(tcs), free(hst), free(hmsg);
    ctx_free(c);
    free(pair_step);
    free(pair_layer);
    free(ac.layers), free(ac.top_a), free(ac.top_b), free(ac.has);
    tsc_dump_close(c->d);
    if (st != TSC_OK) {
        tsc_analysis_free(a);
        return st;
    }
    *out = a;
    return TSC_OK;
}
