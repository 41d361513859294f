/* analysis.c: the driver of `tilescope analyze` (tsc_analysis.h). One head at a time: read its
 * inputs, replay hp and lp, hand each measurement (an_internal.h) what it needs, write the head's
 * slices of the (step, layer) arrays, forget it. */
#include "tsc_analysis.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "an_internal.h"
#include "blas_internal.h"
#include "fit_internal.h"
#include "tsc_fit.h"
#include "tsc_comm.h"
#include "tsc_mem.h"

#ifdef _OPENMP
#include <omp.h>
#endif

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

void tsc_analysis_free(tsc_analysis_t *a) {
    if (!a) return;
    free(a->steps);
    free(a->heads);
    free(a->layers);
    free(a->feature_flags);
    free(a->pooled);
    free(a->dump_path);
    free(a->selection);
    free(a->ranks);
    free(a);
}

const tsc_head_pooled_t *tsc_analysis_pooled(const tsc_analysis_t *a, int layer, int head) {
    for (size_t i = 0; a && i < a->n_pooled; i++)
        if (a->pooled[i].layer == layer && a->pooled[i].head == head) return &a->pooled[i];
    return NULL;
}

static void *xcalloc(size_t n, size_t sz, int *bad) {
    void *p = calloc(n ? n : 1, sz);
    if (!p) *bad = 1;
    return p;
}

/* ------------------------------------------------------------------------------------------ */
/* One head of one (step, layer), on one thread. */

typedef struct {
    const an_run_t *R;
    an_group_t *G;
    an_across_t *ac;
    an_scratch_t *s;
    tsc_head_result_t *r;
    long long step;
    int layer, hi, h, si, li;
    int has_x;
    double id_res, id_lhs, term_sq;  /* identity (1) maxima; sum of the rank-1 terms' |.|_F^2 */
    int bias_done;                   /* measurement a ran (bias_measure) */
    int probe_ride, probe_ridden;    /* the identity replay is to trace / traced the probe row */
} an_head_t;

/* Reads one head slice (under the HDF5 lock) and counts non-finite values, remembering the first
 * coordinate. */
static tsc_status_t read_checked(an_head_t *x, const char *name, int b, int h, float *buf, int cols) {
    tsc_h5_lock();
    tsc_status_t st = tsc_dump_read(x->R->d, x->step, x->layer, name, b, h, buf);
    tsc_h5_unlock();
    if (st != TSC_OK) return st;
    tsc_head_result_t *r = x->r;
    size_t n = (size_t)x->R->T * (size_t)cols;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(buf[i])) {
            if (r->n_nonfinite++ == 0)
                snprintf(r->first_nonfinite, sizeof r->first_nonfinite, "%s[b=%d,t=%zu,d=%zu]", name, b,
                         i / (size_t)cols, i % (size_t)cols);
        }
    return TSC_OK;
}

static tsc_status_t run_attn(const an_head_t *x, const tsc_policy_t *pol, int backward, float *o, float *lse,
                             float *delta, float *dq, tsc_attn_trace_t *tr) {
    const an_run_t *R = x->R;
    const an_scratch_t *s = x->s;
    tsc_attn_dims_t dims = {.B = 1, .H = 1, .Hkv = 1, .T = R->T, .D = R->D, .causal = R->m->causal,
                            .scale = R->m->softmax_scale};
    tsc_attn_io_t io = {.dtype = TSC_ATTN_F32, .q = s->q, .k = s->k, .v = s->v,
                        .dout = backward ? s->dO : NULL, .o = o, .lse = lse,
                        .delta = backward ? delta : NULL, .dq = backward ? dq : NULL};
    if (tr) tr->b = tr->h = 0;
    return tsc_attn_run(pol, &dims, &io, tr, tr ? 1 : 0);
}

/* The lp forward's row function (the trace holds a window of rows, never T x T): per completed
 * row, AN_TR_ROWS runs measurements b and c and the P K rows of e; AN_TR_PROBE keeps row tr_t. */
static void lp_rows(void *ctx, const tsc_attn_trace_t *tr, int t0, int nr) {
    an_head_t *x = ctx;
    const an_run_t *R = x->R;
    an_scratch_t *s = x->s;
    int T = R->T, D = R->D, causal = R->m->causal;
    for (int t = t0; t < t0 + nr; t++) {
        size_t slot = (size_t)(t % tr->rows);
        const double *srow = tr->s + slot * T, *prow = tr->pbar + slot * T;
        if (s->tr_mode == AN_TR_PROBE && t == s->tr_t) {
            memcpy(s->prow, prow, (size_t)T * sizeof(double));
            memcpy(s->prm, tr->run_max + slot * tr->n_kt, (size_t)tr->n_kt * sizeof(double));
        }
        if (s->tr_mode != AN_TR_ROWS) continue;
        an_ties_view_t tv = {T, causal, R->o->tie_eps, x->G->sink + (size_t)x->hi * T, s->expct,
                             s->tie_row + (size_t)s->tr_bi * T};
        an_ties_row(&tv, t, srow, prow, x->r);
        if (R->o->census) {
            int last_tile = causal ? t / tr->block_k : tr->n_kt - 1;
            an_census_view_t cv = {s->vr, T, D, causal, tr->block_k, R->out_fmt, s->evt + (size_t)s->tr_bi * T * D};
            an_census_row(&cv, t, prow, tr->l[slot * tr->n_kt + last_tile], &s->cs);
        }
        if (s->tr_pk) {
            an_pk_view_t pv = {s->k, T, D, causal, s->kd, s->pblk, s->pk};
            an_pk_row(&pv, t, srow, (double)(float)tr->lse[slot] /* as lse_lp holds it */);
        }
    }
}

/* Loads batch row b of the head (inputs) and runs the lp forward with the trace (and, with
 * backward, the lp backward in the same call: dO must be loaded). mode (AN_TR_*): what the trace's
 * row function does; AN_TR_ROWS (batch row index bi) does nothing when an input is not finite
 * (the head is then skipped). */
static tsc_status_t load_lp_trace(an_head_t *x, int b, int backward, int mode, int bi) {
    const an_run_t *R = x->R;
    an_scratch_t *s = x->s;
    int kvh = x->h / (R->H / R->Hkv);
    tsc_status_t st;
    if ((st = read_checked(x, "q", b, x->h, s->q, R->D)) || (st = read_checked(x, "k", b, kvh, s->k, R->D)) ||
        (st = read_checked(x, "v", b, kvh, s->v, R->D)))
        return st;
    for (size_t i = 0; i < (size_t)R->T * R->D; i++)
        s->vr[i] = (float)tsc_round(s->v[i], R->v_fmt, TSC_ROUND_NEAREST_EVEN, NULL);
    s->tr.row_ctx = x;
    s->tr_mode = mode == AN_TR_ROWS && x->r->n_nonfinite ? AN_TR_NONE : mode;
    s->tr_bi = bi;
    s->cs = (tsc_census_t){0};
    s->tr_pk = s->tr_mode == AN_TR_ROWS && (R->o->identity || x->has_x);
    if (s->tr_pk) {
        an_pk_view_t pv = {s->k, R->T, R->D, R->m->causal, s->kd, s->pblk, s->pk};
        an_pk_begin(&pv);
    }
    st = run_attn(x, &R->lp, backward, s->o_lp, s->lse_lp, s->dl_lp,
                  R->o->identity ? s->dq_lp : NULL /* without identity (1), delta only */, &s->tr);
    s->tr_b = st == TSC_OK ? b : -1;
    if (st == TSC_OK && s->tr_mode == AN_TR_ROWS && R->o->census) an_census_add(&s->cs, x->r);
    s->tr_mode = AN_TR_NONE;
    return st;
}

/* The head's record and its rows of the group arrays, before any measurement. */
static void head_reset(an_head_t *x) {
    const an_run_t *R = x->R;
    an_group_t *G = x->G;
    tsc_head_result_t *r = x->r;
    int T = R->T, D = R->D, hi = x->hi;
    memset(r, 0, sizeof *r);
    r->step = x->step;
    r->layer = x->layer;
    r->head = x->h;
    r->n_rows = (int64_t)R->nb * T;
    r->o_dump_vs_lp_max_abs = G->has_o ? 0.0 : NAN;
    r->identity_rel_residual = r->identity_max_abs_residual = r->identity_max_abs_lhs = NAN;
    r->rank1_top_energy = r->rank1_eff_rank = r->rank1_mean_cos = r->rank1_proj_share = NAN;
    r->dwq_err_fro = r->rank1_accum_gain = NAN;
    r->census_share = NAN;
    r->probe_b = r->probe_t = r->probe_i = -1;
    r->probe_err = r->probe_final_obar_err = NAN;
    r->top_feature = -1;
    r->top_feature_mean_ulp = r->top_feature_p = r->top_feature_sign_consistency = NAN;
    for (int s = 0; s < TSC_ANALYSIS_MAX_SINKS; s++) r->sink_keys[s] = -1;
    double *dd = G->dd + (size_t)hi * R->nb * T;
    for (size_t i = 0; i < (size_t)R->nb * T; i++) dd[i] = NAN;
    memset(G->sink + (size_t)hi * T, 0, (size_t)T * sizeof *G->sink);
    for (int i = 0; i < D; i++) {
        G->f_ulp[hi * D + i] = G->f_val[hi * D + i] = G->f_p[hi * D + i] = NAN;
        G->f_flag[hi * D + i] = 0;
        tsc_moments_init(&G->mu[hi * D + i]);
        tsc_moments_init(&G->mc[hi * D + i]);
    }
    G->r1[hi] = 0;
    for (int j = 0; j < T; j++) G->curve[(size_t)hi * T + j] = G->curve_c[(size_t)hi * T + j] = NAN;
    for (int j = 0; j < 3; j++) G->probe[hi * 3 + j] = -1;
    x->s->cand.n = 0;
    memset(x->s->expct, 0, (size_t)T * sizeof(double));
    tsc_h5_lock();
    x->has_x = R->C > 0 && tsc_dump_has_dataset(R->d, x->step, x->layer, "x");
    tsc_h5_unlock();
    r->has_x = x->has_x;
    if (x->has_x) memset(x->s->dw, 0, (size_t)D * R->C * sizeof(double));
    x->id_res = x->id_lhs = x->term_sq = 0.0;
}

/* Keeps batch row bi's O, dO and delta of both replays; the delta differences; o (dump) vs O_lp. */
static tsc_status_t keep_row(an_head_t *x, int bi, int b) {
    const an_run_t *R = x->R;
    an_scratch_t *s = x->s;
    tsc_head_result_t *r = x->r;
    int T = R->T;
    size_t TD = (size_t)T * R->D;
    memcpy(s->o_hp_all + (size_t)bi * TD, s->o_hp, TD * sizeof(float));
    memcpy(s->o_lp_all + (size_t)bi * TD, s->o_lp, TD * sizeof(float));
    memcpy(s->dO_all + (size_t)bi * TD, s->dO, TD * sizeof(float));
    memcpy(s->dl_hp_all + (size_t)bi * T, s->dl_hp, (size_t)T * sizeof(float));
    memcpy(s->dl_lp_all + (size_t)bi * T, s->dl_lp, (size_t)T * sizeof(float));
    double *dd = x->G->dd + ((size_t)x->hi * R->nb + bi) * T;
    for (int t = 0; t < T; t++) {
        dd[t] = (double)s->dl_lp[t] - (double)s->dl_hp[t];
        r->delta_sum += dd[t];
    }
    if (!x->G->has_o) return TSC_OK;
    tsc_h5_lock();
    tsc_status_t st = tsc_dump_read(R->d, x->step, x->layer, "o", b, x->h, s->od);
    tsc_h5_unlock();
    if (st != TSC_OK) return st;
    for (size_t i = 0; i < TD; i++) {
        double e = fabs((double)s->od[i] - (double)s->o_lp[i]);
        if (e > r->o_dump_vs_lp_max_abs || isnan(e)) r->o_dump_vs_lp_max_abs = e;
    }
    if (x->G->fit_on) fit_cmp_add(&x->G->fit_o[x->hi], x->G->o_dtype, s->od, s->o_lp, 0, TD);
    return TSC_OK;
}

/* a: error summaries, per-feature bias and the pooled moments over the head's nb*T rows. */
static void bias_measure(an_head_t *x) {
    const an_run_t *R = x->R;
    an_scratch_t *s = x->s;
    int D = R->D, hi = x->hi;
    size_t n_rows = (size_t)R->nb * R->T;
    an_bias_view_t bv = {s->o_lp_all, s->o_hp_all, s->dO_all, s->dl_lp_all, s->dl_hp_all, n_rows, D, R->o_fmt,
                         R->delta_fmt, x->G->f_ulp + hi * D, x->G->f_val + hi * D, x->G->f_p + hi * D,
                         x->G->mu + hi * D, x->G->mc + hi * D, R->a->n_head_tests, &R->a->rule};
    an_bias_measure(&bv, x->r);
    x->bias_done = 1;
}

/* d's choice: the top feature, and the row with the largest error in its bias sign among the rows
 * with >= 2 exact maxima (where docs/MECHANISM.md §5's mechanism acts; Fig. 6), or among all rows
 * when there is none; into the record and s->tr_t. */
static void probe_pick(an_head_t *x) {
    const an_run_t *R = x->R;
    an_scratch_t *s = x->s;
    tsc_head_result_t *r = x->r;
    an_probe_view_t pv = {s->o_lp_all, s->o_hp_all, s->tie_row, (size_t)R->nb * R->T, R->D};
    size_t row = an_probe_pick(&pv, r->top_feature, r->top_feature_mean_ulp < 0 ? -1.0 : 1.0, &r->probe_err);
    r->probe_b = R->bs[row / (size_t)R->T];
    r->probe_t = s->tr_t = (int)(row % (size_t)R->T);
    r->probe_i = r->top_feature;
}

/* With one batch row, all that a and d's choice read is known once the row is kept: measure a and
 * pick the probe row now, so the identity replay (the lp forward again, with lp's bits) traces that
 * row and head_probes needs no lp forward of its own. */
static void probe_early(an_head_t *x) {
    bias_measure(x);
    if (x->r->top_feature < 0) return;
    probe_pick(x);
    x->probe_ride = 1;
}

/* e, per batch row: identity (1) with the lp backward and the same backward fed delta from an hp
 * O; the dW^Q error terms when x is captured (NaN/Inf in x: counted, first coordinate kept, the
 * rank-1 analysis of this head skipped, everything else goes on). */
static tsc_status_t grad_row(an_head_t *x, int bi, int b) {
    const an_run_t *R = x->R;
    an_scratch_t *s = x->s;
    int T = R->T, D = R->D, C = R->C;
    double scale = R->m->softmax_scale;
    tsc_status_t st;
    /* P K: filled row by row by the lp forward (lp_rows) */
    if (R->o->identity) {
        /* the same lp forward as the traced one: it can trace the automatic probe's row (probe_early) */
        s->tr.row_ctx = x;
        s->tr_mode = x->probe_ride ? AN_TR_PROBE : AN_TR_NONE;
        st = run_attn(x, &R->lp_hd, 1, s->o_hp /* scratch */, s->lse_hp, s->dl_hd, s->dq_hd,
                      x->probe_ride ? &s->tr : NULL);
        s->tr_mode = AN_TR_NONE;
        if (st != TSC_OK) return st;
        x->probe_ridden = x->probe_ride;
        if ((st = an_identity_row(s->dq_hd, s->dq_lp, s->dl_hd, s->dl_lp, s->pk, T, D, scale, &x->id_res,
                                  &x->id_lhs)) != TSC_OK)
            return st;
    }
    if (!x->has_x) return TSC_OK;
    int64_t before = x->r->n_nonfinite;
    if ((st = read_checked(x, "x", b, 0, s->x, C)) != TSC_OK) return st;
    if (x->r->n_nonfinite > before) {
        x->has_x = x->r->has_x = 0;
        s->cand.n = 0;
        return TSC_OK;
    }
    for (size_t i = 0; i < (size_t)T * C; i++) s->xd[i] = s->x[i];
    an_dwq_view_t dv = {x->G->dd + ((size_t)x->hi * R->nb + bi) * T, s->pk, s->xd, T, D, C, scale, s->dw, s->dwt,
                        &x->term_sq, &s->cand, s->tie_row + (size_t)bi * T};
    return an_dwq_row(&dv);
}

/* Batch row bi: replays, then the per-row parts of measurements b, c and e. */
static tsc_status_t head_row(an_head_t *x, int bi) {
    const an_run_t *R = x->R;
    an_scratch_t *s = x->s;
    int b = R->bs[bi], D = R->D;
    tsc_status_t st;
    if ((st = read_checked(x, "do", b, x->h, s->dO, D)) != TSC_OK) return st;
    if ((st = load_lp_trace(x, b, 1, AN_TR_ROWS, bi)) != TSC_OK) return st;
    if (x->r->n_nonfinite) {
        x->r->skipped = 1;
        return TSC_OK;
    }
    if ((st = run_attn(x, &R->hp, 1, s->o_hp, s->lse_hp, s->dl_hp, NULL, NULL)) != TSC_OK) return st;
    if ((st = keep_row(x, bi, b)) != TSC_OK) return st;
    if (R->nb == 1 && R->o->identity) probe_early(x);
    /* b and c ran per row during the lp forward (lp_rows) */
    return grad_row(x, bi, b);
}

/* d: the automatic probe (probe_pick; its lp row traced by the identity replay when probe_early
 * chose it, else by one more lp forward), then the chosen probe, if any. */
static tsc_status_t head_probes(an_head_t *x) {
    const an_run_t *R = x->R;
    an_scratch_t *s = x->s;
    tsc_head_result_t *r = x->r;
    int T = R->T, hi = x->hi;
    tsc_status_t st;
    an_curve_view_t cv = {s->prow, s->prm, s->q, s->k, s->v, s->vr, T, R->D, R->m->causal, R->lp.block_k,
                          R->m->softmax_scale, R->out_fmt};
    if (r->top_feature >= 0) {
        int i = r->top_feature;
        if (!x->probe_ridden) {
            probe_pick(x); /* the trace keeps only a window of rows: one more lp forward for row t */
            if ((st = load_lp_trace(x, r->probe_b, 0, AN_TR_PROBE, 0)) != TSC_OK) return st;
        }
        int t = r->probe_t;
        an_obar_curve(&cv, t, i, x->G->curve + (size_t)hi * T);
        r->probe_final_obar_err = x->G->curve[(size_t)hi * T + an_n_visible(R->m->causal, T, t) - 1];
        x->G->probe[hi * 3] = r->probe_b;
        x->G->probe[hi * 3 + 1] = t;
        x->G->probe[hi * 3 + 2] = i;
    }
    if (R->o->probe_t >= 0) {
        int pb = R->o->probe_b >= 0 ? R->o->probe_b : R->bs[0];
        s->tr_t = R->o->probe_t;
        if ((st = load_lp_trace(x, pb, 0, AN_TR_PROBE, 0)) != TSC_OK) return st;
        an_obar_curve(&cv, R->o->probe_t, R->o->probe_i, x->G->curve_c + (size_t)hi * T);
    }
    return TSC_OK;
}

/* After the batch rows: measurements a to e over the head's nb*T rows. */
static tsc_status_t head_finish(an_head_t *x) {
    const an_run_t *R = x->R;
    an_scratch_t *s = x->s;
    tsc_head_result_t *r = x->r;
    int T = R->T, D = R->D, hi = x->hi;
    size_t n_rows = (size_t)R->nb * T;
    if (!x->bias_done) bias_measure(x);
    an_sinks(x->G->sink + (size_t)hi * T, s->expct, T, (int64_t)n_rows, r);
    if (R->o->census) r->census_share = an_census_share(s->o_lp_all, s->o_hp_all, s->evt, n_rows * D);
    tsc_status_t st = head_probes(x);
    if (st != TSC_OK) return st;
    if (R->o->identity) {
        r->identity_max_abs_residual = x->id_res;
        r->identity_max_abs_lhs = x->id_lhs;
        r->identity_rel_residual = x->id_lhs > 0 ? x->id_res / x->id_lhs : (x->id_res > 0 ? INFINITY : 0.0);
    }
    if (!x->has_x) return TSC_OK;
    size_t aslot = ((size_t)x->si * R->nL + x->li) * R->nh + hi;
    an_rank1_view_t rv = {&s->cand, s->dw, x->term_sq, R->m->softmax_scale, R->N,
                          x->G->sv + (size_t)hi * R->N, x->G->cos + (size_t)hi * R->N * R->N,
                          x->ac->top_a + aslot * D, x->ac->top_b + aslot * R->C, x->ac->has + aslot};
    return an_rank1_finish(&rv, r, &x->G->r1[hi]);
}

static tsc_status_t analyze_head(an_head_t *x) {
    head_reset(x);
    tsc_status_t st = TSC_OK;
    for (int bi = 0; bi < x->R->nb && st == TSC_OK && !x->r->skipped; bi++) st = head_row(x, bi);
    if (st == TSC_OK && !x->r->skipped) st = head_finish(x);
    if (st != TSC_OK)
        return tsc_error_wrap(st, "analysing step %lld layer %d head %d: ", x->step, x->layer, x->h);
    return TSC_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* The run. */

/* Bytes of one thread's scratch (scratch_alloc) plus the attention kernel's own buffers for one
 * head (q, k^T, v, o, k, v^T, dO, O source, dQ in double at most, with the row work): the memory
 * bound of tsc_analysis.h, O(T·(D·(nb + 1) + C + AN_PK_ROWS)) per thread, nothing T x T. */
static uint64_t scratch_bytes(const an_run_t *R) {
    uint64_t T = (uint64_t)R->T, D = (uint64_t)R->D, C = (uint64_t)R->C, nb = (uint64_t)R->nb, TD = T * D;
    uint64_t n_kt = T / (uint64_t)R->lp.block_k + 1, W = AN_TR_WINDOW;
    uint64_t fl = 10 * TD + 5 * T + T * C + nb * (3 * TD + 2 * T);
    uint64_t db = 2 * TD + (uint64_t)AN_PK_ROWS * T + T * C + 2 * D * C + 2 * T + n_kt;
    uint64_t trace = W * (2 * T * 8 + n_kt * 36 + 8);
    uint64_t kernel = (9 * TD + 2 * T) * 8 + (uint64_t)(R->lp.block_k + R->lp.block_q) * 64 * 8;
    uint64_t cand = (uint64_t)R->N * (1 + D + (C ? C : 1)) * 8;
    return fl * 4 + db * 8 + nb * (TD + T) + trace + kernel + cand;
}

/* The per-thread scratch (see tsc_analysis.h for the memory bound). */
static tsc_status_t scratch_alloc(const an_run_t *R, an_scratch_t *s) {
    int bad = 0;
    size_t TD = (size_t)R->T * R->D, T = (size_t)R->T, D = (size_t)R->D, C = (size_t)R->C;
    size_t N = (size_t)R->N, nb = (size_t)R->nb;
    float **fs[] = {&s->q, &s->k, &s->v, &s->dO, &s->od, &s->o_hp, &s->o_lp, &s->dq_lp, &s->dq_hd, &s->vr};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) *fs[i] = xcalloc(TD, sizeof(float), &bad);
    float **ft[] = {&s->lse_hp, &s->lse_lp, &s->dl_hp, &s->dl_lp, &s->dl_hd};
    for (size_t i = 0; i < sizeof ft / sizeof ft[0]; i++) *ft[i] = xcalloc(T, sizeof(float), &bad);
    s->x = xcalloc(T * C, sizeof(float), &bad);
    s->kd = xcalloc(TD, sizeof(double), &bad);
    s->pk = xcalloc(TD, sizeof(double), &bad);
    s->pblk = xcalloc((size_t)AN_PK_ROWS * T, sizeof(double), &bad);
    s->xd = xcalloc(T * C, sizeof(double), &bad);
    s->dw = xcalloc(D * C, sizeof(double), &bad);
    s->dwt = xcalloc(D * C, sizeof(double), &bad);
    s->expct = xcalloc(T, sizeof(double), &bad);
    s->prow = xcalloc(T, sizeof(double), &bad);
    s->prm = xcalloc(T / (size_t)R->lp.block_k + 1, sizeof(double), &bad);
    s->o_hp_all = xcalloc(nb * TD, sizeof(float), &bad);
    s->o_lp_all = xcalloc(nb * TD, sizeof(float), &bad);
    s->dO_all = xcalloc(nb * TD, sizeof(float), &bad);
    s->dl_hp_all = xcalloc(nb * T, sizeof(float), &bad);
    s->dl_lp_all = xcalloc(nb * T, sizeof(float), &bad);
    s->evt = xcalloc(nb * TD, 1, &bad);
    s->tie_row = xcalloc(nb * T, 1, &bad);
    s->cand = (an_cand_t){0, R->N, R->D, R->C, xcalloc(N, sizeof(double), &bad), xcalloc(N * D, sizeof(double), &bad),
                          xcalloc(N * (C ? C : 1), sizeof(double), &bad), xcalloc(N, 1, &bad)};
    if (bad) return tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory for the scratch of one head (T %zu, D %zu)", T, D);
    s->tr_b = -1;
    return tsc_attn_trace_init_rows(&s->tr, R->T, R->D, R->lp.block_k, TSC_TRACE_SCORES | TSC_TRACE_TILES,
                                    AN_TR_WINDOW, lp_rows, NULL);
}

static void scratch_free(an_scratch_t *s) {
    void *ps[] = {s->q, s->k, s->v, s->dO, s->od, s->o_hp, s->o_lp, s->dq_lp, s->dq_hd, s->vr, s->x,
                  s->lse_hp, s->lse_lp, s->dl_hp, s->dl_lp, s->dl_hd, s->kd, s->pk, s->pblk, s->xd, s->dw,
                  s->dwt, s->expct, s->o_hp_all, s->o_lp_all, s->dO_all, s->dl_hp_all, s->dl_lp_all, s->evt,
                  s->tie_row, s->prow, s->prm, s->cand.coeff, s->cand.a, s->cand.b, s->cand.tie};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
    tsc_attn_trace_free(&s->tr);
}

/* Policies (hp defaults to fp32; lp to the dump's recorded policy, else the best fit), their formats,
 * the geometry, and the parts of the result that describe the run. */
static tsc_status_t run_setup(an_run_t *R, const char *dump_path) {
    const tsc_analysis_opts_t *o = R->o;
    const tsc_dump_meta_t *m = R->m;
    tsc_analysis_t *a = R->a;
    tsc_status_t st;
    /* a chosen probe inside the dump (B, T, I), never clamped or dropped */
    const struct { const char *name, *what; int v, n; } pr[] = {{"batch", "batch rows", o->probe_b, m->batch},
        {"row", "rows (tokens)", o->probe_t, m->seq_len}, {"feature", "features per head", o->probe_i, m->head_dim}};
    for (size_t i = 0; i < sizeof pr / sizeof pr[0] && o->probe_t >= 0; i++)
        if (pr[i].v >= pr[i].n)
            return tsc_error_set(TSC_ERR_ARG, "%s: the probe's %s %d is out of range: the dump has %d %s (0 to %d)",
                                 dump_path, pr[i].name, pr[i].v, pr[i].n, pr[i].what, pr[i].n - 1);
    snprintf(a->hp, sizeof a->hp, "%s", o->hp[0] ? o->hp : "fp32");
    if ((st = tsc_policy_parse(a->hp, &R->hp)) != TSC_OK) return tsc_error_wrap(st, "--hp '%s': ", a->hp);
    tsc_dump_policy_t lp;
    if ((st = tsc_dump_policy(dump_path, m->policy, o->lp, "--lp", &o->sel, o->progress, &lp)) != TSC_OK) return st;
    R->lp = lp.policy;
    snprintf(a->lp_source, sizeof a->lp_source, "%s", lp.source);
    /* canonical names; both parsed, so both format */
    TSC_INVARIANT(tsc_policy_format(&R->hp, a->hp, sizeof a->hp) == TSC_OK);
    TSC_INVARIANT(tsc_policy_format(&R->lp, a->lp, sizeof a->lp) == TSC_OK);
    R->lp_hd = R->lp;
    R->lp_hd.delta_src = TSC_DELTA_HP_O;
    R->o_fmt = R->lp.fmt[TSC_STAGE_O];
    R->delta_fmt = R->lp.fmt[TSC_STAGE_DELTA];
    R->v_fmt = R->lp.fmt[TSC_STAGE_V];
    R->out_fmt = tsc_format_mant_bits(R->lp.fmt[TSC_STAGE_PV]) < 23 ? R->lp.fmt[TSC_STAGE_PV] : R->o_fmt;
    if ((a->n_ranks = tsc_dump_n_ranks(R->d)) > 0) {
        if (!(a->ranks = calloc((size_t)a->n_ranks, sizeof *a->ranks)))
            return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", dump_path);
        for (int i = 0; i < a->n_ranks; i++) (void)tsc_dump_rank(R->d, i, &a->ranks[i]); /* i in range */
    }
    R->B = a->B = m->batch;
    R->H = a->H = m->n_head;
    R->Hkv = a->Hkv = m->n_kv_head;
    R->T = a->T = m->seq_len;
    R->D = a->D = m->head_dim;
    R->C = a->C = m->d_model;
    R->N = o->n_terms > 0 ? o->n_terms : 32;
    a->n_layer = m->n_layer;
    a->scale = m->softmax_scale;
    a->causal = m->causal;
    a->rule = o->rule;
    a->tie_eps = o->tie_eps;
    /* the longest canonical selection: four sets of TSC_SELECT_MAX_ITEMS ranges of three numbers */
    size_t sel_cap = 4 * (16 + (size_t)TSC_SELECT_MAX_ITEMS * 64);
    a->dump_path = malloc(strlen(dump_path) + 1);
    a->selection = malloc(sel_cap);
    if (!a->dump_path || !a->selection) return tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory");
    memcpy(a->dump_path, dump_path, strlen(dump_path) + 1);
    tsc_select_format(&o->sel, a->selection, sel_cap);
    return TSC_OK;
}

/* The selected (step, layer) pairs, in the dump's order. */
typedef struct {
    int n;
    long long *step;
    int *layer;
} pairs_t;

static int cmp_int(const void *x, const void *y) { return *(const int *)x - *(const int *)y; }

/* The selected layers of one step into the pairs and the run's layer list. A layer group outside
 * [0, n_layer) is an error: every per-layer array is sized by n_layer. */
static tsc_status_t select_step(an_run_t *R, long long step, pairs_t *p, int *any) {
    int nl = 0, n_layer = R->m->n_layer;
    tsc_status_t st = tsc_dump_layers(R->d, step, NULL, 0, &nl);
    if (st != TSC_OK) return st;
    int *ls = malloc((size_t)(nl > 0 ? nl : 1) * sizeof *ls);
    if (!ls) return tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory for %d layers", nl);
    if ((st = tsc_dump_layers(R->d, step, ls, nl, &nl)) != TSC_OK) {
        free(ls);
        return st;
    }
    *any = 0;
    int added = 0;
    for (int i = 0; i < nl && st == TSC_OK; i++) {
        if (ls[i] >= n_layer) {
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: step %lld has layer group layer_%03d (%d groups), outside "
                               "[0, n_layer = %d)", R->a->dump_path, step, ls[i], nl, n_layer);
            break;
        }
        if (!tsc_select_set_has(&R->o->sel.layers, ls[i])) continue;
        if (added == n_layer) { /* two groups naming one layer (layer_001, layer_0001) */
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: step %lld has %d layer groups, more than n_layer = %d",
                               R->a->dump_path, step, nl, n_layer);
            break;
        }
        p->step[p->n] = step;
        p->layer[p->n++] = ls[i];
        added++;
        *any = 1;
        int seen = 0;
        for (int u = 0; u < R->nL; u++) seen |= R->layers[u] == ls[i];
        if (!seen) R->layers[R->nL++] = ls[i];
    }
    free(ls);
    return st;
}

/* Selected batch rows, heads and (step, layer) pairs; the analysed steps and layers. */
static tsc_status_t run_select(an_run_t *R, pairs_t *p) {
    const tsc_select_t *sel = &R->o->sel;
    tsc_analysis_t *a = R->a;
    int bad = 0, nsteps = tsc_dump_n_steps(R->d);
    size_t L = (size_t)(R->m->n_layer > 0 ? R->m->n_layer : 1);
    R->bs = xcalloc((size_t)R->B, sizeof(int), &bad);
    R->hs = xcalloc((size_t)R->H, sizeof(int), &bad);
    R->layers = xcalloc(L, sizeof(int), &bad);
    /* at most n_layer pairs per step (select_step) */
    p->step = xcalloc((size_t)nsteps * L, sizeof(long long), &bad);
    p->layer = xcalloc((size_t)nsteps * L, sizeof(int), &bad);
    a->steps = xcalloc((size_t)nsteps, sizeof(long long), &bad);
    if (bad) return tsc_error_set(TSC_ERR_NOMEM, "analysis of %s: out of memory", a->dump_path);
    for (int b = 0; b < R->B; b++)
        if (tsc_select_set_has(&sel->batches, b)) R->bs[R->nb++] = b;
    for (int h = 0; h < R->H; h++)
        if (tsc_select_set_has(&sel->heads, h)) R->hs[R->nh++] = h;
    for (int si = 0; si < nsteps; si++) {
        long long step = tsc_dump_step_at(R->d, si);
        if (!tsc_select_set_has(&sel->steps, step)) continue;
        int any = 0;
        tsc_status_t st = select_step(R, step, p, &any);
        if (st != TSC_OK) return st;
        if (any) a->steps[a->n_steps++] = step;
    }
    if (R->nL > 1) qsort(R->layers, (size_t)R->nL, sizeof(int), cmp_int);
    if (p->n == 0 || R->nh == 0 || R->nb == 0) {
        char why[1024];
        return tsc_error_set(TSC_ERR_ARG, "%s: the selection '%s' %s", a->dump_path, a->selection,
                             tsc_select_miss_text(sel, R->d, why, sizeof why));
    }
    return TSC_OK;
}

/* Everything a run holds besides the result: freed by run_free. */
typedef struct {
    an_run_t R;
    pairs_t pairs;
    an_group_t G;
    an_pool_t pool;
    an_across_t ac;
    an_scratch_t *tcs;      /* [nthr] */
    int nthr, n_tcs;
    tsc_status_t *hst;      /* [nh] */
    char (*hmsg)[512];      /* [nh] */
    tsc_h5_file_t f;
    int file_open;
    const tsc_comm_t *comm; /* the job's processes (opts->comm or the serial one) */
    unsigned char *rec;     /* the records of one rank's items of one pair (items_copy) */
    tsc_status_t sst[4];    /* the spectral items of the pair (w_q, w_k, w_v, w_o): status, message, */
    char smsg[4][512];
    an_spectral_part_t spart[4]; /* norms */
    double *shn;            /* [H] and w_q's per-head norms */
    int *own;               /* [n_groups, K] the process of each item of a pair (items_deal) */
    int *order;             /* [K] the items of a pair, largest first */
    int n_groups;           /* pairs computed at once */
    tsc_status_t st;        /* the run's first failure (a rank goes on through the pairs, computing nothing) */
    int fit_bad;            /* lp's fit cannot be taken from this run (tsc_analysis_t.lp_fit_ok) */
    char *path;             /* out_dir/analysis.h5 */
} run_t;

/* The per (step, layer) arrays, the pooled moments, the across-step slots and one scratch per
 * thread: heads of a (step, layer) run in parallel, each writing its own rows. */
static tsc_status_t run_alloc(run_t *u) {
    an_run_t *R = &u->R;
    an_group_t *G = &u->G;
    int bad = 0;
    size_t T = (size_t)R->T, D = (size_t)R->D, C = (size_t)R->C, nh = (size_t)R->nh, N = (size_t)R->N;
    size_t nb = (size_t)R->nb, nP = (size_t)R->nL * nh * D;
    size_t nslots = (size_t)u->ac.S * (size_t)R->nL * nh;
    G->f_ulp = xcalloc(nh * D, sizeof(double), &bad);
    G->f_val = xcalloc(nh * D, sizeof(double), &bad);
    G->f_p = xcalloc(nh * D, sizeof(double), &bad);
    G->f_flag = xcalloc(nh * D, sizeof(int64_t), &bad);
    G->dd = xcalloc(nh * nb * T, sizeof(double), &bad);
    G->sink = xcalloc(nh * T, sizeof(int64_t), &bad);
    G->curve = xcalloc(nh * T, sizeof(double), &bad);
    G->curve_c = xcalloc(nh * T, sizeof(double), &bad);
    G->probe = xcalloc(nh * 3, sizeof(int64_t), &bad);
    G->cos = xcalloc(nh * N * N, sizeof(double), &bad);
    G->fit_o = xcalloc(nh, sizeof *G->fit_o, &bad);
    G->sv = xcalloc(nh * N, sizeof(double), &bad);
    G->mu = xcalloc(nh * D, sizeof(tsc_moments_t), &bad);
    G->mc = xcalloc(nh * D, sizeof(tsc_moments_t), &bad);
    G->r1 = xcalloc(nh, sizeof(int), &bad);
    u->shn = xcalloc((size_t)R->H, sizeof(double), &bad);
    u->pool.u = xcalloc(nP, sizeof(tsc_moments_t), &bad);
    u->pool.c = xcalloc(nP, sizeof(tsc_moments_t), &bad);
    u->ac.top_a = xcalloc(nslots * D, sizeof(double), &bad);
    u->ac.top_b = xcalloc(nslots * (C ? C : 1), sizeof(double), &bad);
    u->ac.has = xcalloc(nslots, 1, &bad);
    R->a->heads = xcalloc((size_t)u->pairs.n * nh, sizeof *R->a->heads, &bad);
    R->a->layers = xcalloc((size_t)u->pairs.n, sizeof *R->a->layers, &bad);
    u->nthr = 1;
#ifdef _OPENMP
    u->nthr = omp_get_max_threads();
#endif
    if (u->nthr > R->nh) u->nthr = R->nh;
    if (u->nthr < 1) u->nthr = 1;
    tsc_status_t mst = tsc_mem_check((uint64_t)u->nthr * scratch_bytes(R), "analysis: the per-thread scratch");
    if (mst != TSC_OK)
        return tsc_error_wrap(mst, "analysis of %s (T %d, D %d, C %d, %d threads): ", R->a->dump_path, R->T, R->D,
                              R->C, u->nthr);
    u->tcs = xcalloc((size_t)u->nthr, sizeof *u->tcs, &bad);
    u->hst = xcalloc(nh, sizeof *u->hst, &bad);
    u->hmsg = xcalloc(nh, sizeof *u->hmsg, &bad);
    if (bad) return tsc_error_set(TSC_ERR_NOMEM, "analysis of %s: out of memory", R->a->dump_path);
    for (size_t x = 0; x < nP; x++) {
        tsc_moments_init(&u->pool.u[x]);
        tsc_moments_init(&u->pool.c[x]);
    }
    for (int t = 0; t < u->nthr; t++) {
        u->n_tcs = t + 1;
        tsc_status_t st = scratch_alloc(R, &u->tcs[t]);
        if (st != TSC_OK) return st;
    }
    /* The BLAS headroom is measured with what the work holds already in place: the scratch above and
     * the OpenMP team, whose threads' stacks and malloc arenas (64 MiB of address space each) appear
     * at its first parallel region and would otherwise come after the check; the BLAS work buffers
     * are then the only large mappings still to come. */
#ifdef _OPENMP
#pragma omp parallel num_threads(u->nthr)
    {
        void *volatile p = malloc(64); /* volatile: a compiler may drop a malloc/free pair */
        free(p);
    }
#endif
    mst = tsc_blas_headroom(u->nthr);
    if (mst != TSC_OK)
        return tsc_error_wrap(mst, "analysis of %s (T %d, D %d, C %d, %d threads): ", R->a->dump_path, R->T, R->D,
                              R->C, u->nthr);
    return TSC_OK;
}

static void run_free(run_t *u) {
    an_group_t *G = &u->G;
    for (int t = 0; t < u->n_tcs; t++) scratch_free(&u->tcs[t]);
    void *ps[] = {u->tcs, u->hst, u->hmsg, u->R.bs, u->R.hs, u->R.layers, u->pairs.step, u->pairs.layer,
                  G->f_ulp, G->f_val, G->f_p, G->f_flag, G->dd, G->sink, G->curve, G->curve_c, G->probe, G->cos,
                  G->sv, G->fit_o, G->mu, G->mc, G->r1, u->shn, u->own, u->order, u->rec, u->pool.u, u->pool.c, u->ac.top_a, u->ac.top_b, u->ac.has};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
    free(u->path);
    tsc_dump_close(u->R.d);
}

static tsc_status_t open_output(run_t *u, const char *out_dir, char **pathp) {
    tsc_analysis_t *a = u->R.a;
    size_t size = strlen(out_dir) + sizeof "/analysis.h5";
    char *path = *pathp = malloc(size);
    if (!path) return tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory");
    snprintf(path, size, "%s/analysis.h5", out_dir);
    tsc_status_t st = tsc_h5_create(&u->f, path);
    if (st != TSC_OK) return st;
    u->file_open = 1;
    hid_t fid = u->f.fid;
    char producer[64];
    snprintf(producer, sizeof producer, "tilescope-analyze %s", tsc_version());
    if ((st = tsc_h5_attr_write_str(fid, "format", TSC_ANALYSIS_FORMAT_NAME)) ||
        (st = tsc_h5_attr_write_long(fid, "format_version", TSC_ANALYSIS_FORMAT_VERSION)) ||
        (st = tsc_h5_attr_write_str(fid, "dump", a->dump_path)) || (st = tsc_h5_attr_write_str(fid, "hp", a->hp)) ||
        (st = tsc_h5_attr_write_str(fid, "lp", a->lp)) || (st = tsc_h5_attr_write_str(fid, "selection", a->selection)) ||
        (st = tsc_h5_attr_write_str(fid, "producer", producer)) ||
        (st = tsc_h5_attr_write_str(fid, "run_id", a->run_id)))
        return st;
    return TSC_OK;
}

/* lp's fit on the first analysed step rides on the heads' lp replays (keep_row): on for the pairs
 * of that step when they hold o and lp computes in float, as tsc_fit_run would replay it. */
static void fit_begin(run_t *u, int si, long long step, int layer) {
    an_group_t *G = &u->G;
    tsc_dump_dataset_info_t info;
    G->fit_on = 0;
    if (si != 0 || u->fit_bad) return;
    if (!G->has_o || tsc_policy_uses_fp64(&u->R.lp) || tsc_dump_dataset_info(u->R.d, step, layer, "o", &info) != TSC_OK) {
        tsc_error_clear();
        u->fit_bad = 1;
        return;
    }
    G->fit_on = 1;
    G->o_dtype = info.dtype;
    u->R.a->lp_fit_step = step;
    for (int hi = 0; hi < u->R.nh; hi++) fit_cmp_init(&G->fit_o[hi]);
}

/* The heads' comparisons into the run's, in head order; a skipped head (NaN/Inf inputs, which
 * tsc_fit_run refuses) leaves the fit to tsc_fit_run. */
static void fit_end(run_t *u, size_t h0) {
    if (!u->G.fit_on) return;
    for (int hi = 0; hi < u->R.nh; hi++) {
        if (u->R.a->heads[h0 + (size_t)hi].skipped) u->fit_bad = 1;
        fit_cmp_merge(&u->R.a->lp_fit_o, &u->G.fit_o[hi]);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Work items over the job's processes (docs/DISTRIBUTED.md §4). A pair (step, layer) has K = nh + 4
 * items: one per selected head over all its selected batch rows (from whichever rank dumps hold
 * them), k = 0 .. nh-1, and the spectral norms of each weight matrix, k = nh + w (w_q, w_k, w_v,
 * w_o). Every process computes its items into the same slots a single process would; each other
 * process sends its records of a pair to rank 0 as one message, and rank 0, with every item of the
 * pair in place, does the rest exactly as one process does: the pool merges in head order, the
 * group, the cumulative arrays. So analysis.h5 holds the same bytes for any number of processes,
 * whoever computed an item.
 *
 * The items of a pair are dealt largest first, each to the least loaded process (the highest on a
 * tie, as rank 0 also finishes the pair), by a cost model counted from the shapes: a head's
 * replays, backward and census ~ 16*nb*T*T*D, a matrix's norm ~ rows*cols*min(rows, cols) (its
 * Gram matrix; w_q's per-head norms add H*D*D*C); the factor 16 is the ratio measured on the
 * GPT-2-small shape (one 768 x 768 norm costs about 1.7 heads of 4 x 256 rows). With at least twice
 * as many processes as a pair has items, they form W = size / K groups (process r in group r mod W)
 * and pair p goes to group p mod W: W pairs are computed at once while rank 0 takes them in, in
 * order. */

enum { N_SPECTRAL = 4 };

static int n_items(const run_t *u) { return u->R.nh + N_SPECTRAL; }

static int item_owner(const run_t *u, int p, int k) {
    return u->own[(size_t)(p % u->n_groups) * (size_t)n_items(u) + (size_t)k];
}

static double item_cost(const run_t *u, int k) {
    static const char *const wn[N_SPECTRAL] = {"w_q", "w_k", "w_v", "w_o"};
    const an_run_t *R = &u->R;
    if (k < R->nh) return 16.0 * R->nb * R->T * R->T * R->D;
    tsc_dump_dataset_info_t info;
    int w = k - R->nh;
    if (!u->pairs.n || !tsc_dump_has_dataset(R->d, u->pairs.step[0], u->pairs.layer[0], wn[w]) ||
        tsc_dump_dataset_info(R->d, u->pairs.step[0], u->pairs.layer[0], wn[w], &info) != TSC_OK) {
        tsc_error_clear();
        return 0.0;
    }
    double r = (double)info.dims[0], c = (double)info.dims[1];
    return r * c * (r < c ? r : c) + (w == 0 ? (double)R->H * R->D * R->D * R->C : 0.0);
}

static tsc_status_t items_deal(run_t *u) {
    int P = u->comm->size, K = n_items(u), W = P >= 2 * K ? P / K : 1;
    double *load = calloc((size_t)P, sizeof *load), *cost = calloc((size_t)K, sizeof *cost);
    u->own = calloc((size_t)W * (size_t)K, sizeof *u->own);
    u->order = calloc((size_t)K, sizeof *u->order);
    if (!u->own || !u->order || !load || !cost) {
        free(load), free(cost);
        return tsc_error_set(TSC_ERR_NOMEM, "analysis: out of memory");
    }
    u->n_groups = W;
    for (int k = 0; k < K; k++) {
        cost[k] = item_cost(u, k);
        int i = k; /* insertion by cost, largest first; equal costs keep item order */
        for (; i > 0 && cost[u->order[i - 1]] < cost[k]; i--) u->order[i] = u->order[i - 1];
        u->order[i] = k;
    }
    for (int g = 0; g < W; g++)
        for (int i = 0; i < K; i++) {
            int k = u->order[i], best = -1;
            for (int r = g; r < P; r += W) /* the group's members, the highest on a tie */
                if (best < 0 || load[r] <= load[best]) best = r;
            u->own[(size_t)g * (size_t)K + (size_t)k] = best;
            load[best] += cost[k];
        }
    free(load), free(cost);
    return TSC_OK;
}

typedef struct {
    void *p;
    size_t n;
} span_t;
enum { ITEM_SPANS = 22 };

/* The pieces of item k's record of pair p (h0: the pair's first head record). A head: its status
 * and message, its head record and everything it wrote into the group, the pool and the across-step
 * slot. The spectral item: its status and message, the layer record and the per-head norms. */
static size_t item_spans(run_t *u, int p, int k, size_t h0, span_t *sp) {
    const an_run_t *R = &u->R;
    an_group_t *G = &u->G;
    size_t D = (size_t)R->D, T = (size_t)R->T, N = (size_t)R->N, C = (size_t)R->C, h = (size_t)k;
    size_t n = 0;
#define SPAN(ptr, count) (sp[n].p = (void *)(ptr), sp[n].n = (count) * sizeof *(ptr), n++)
    if (k >= R->nh) {
        int w = k - R->nh;
        SPAN(&u->sst[w], 1);
        SPAN(u->smsg[w], sizeof u->smsg[w]);
        SPAN(&u->spart[w], 1);
        if (w == 0) SPAN(u->shn, (size_t)R->H);
        return n;
    }
    size_t si = an_index_ll(R->a->steps, u->pairs.step[p]), li = an_index_int(R->layers, u->pairs.layer[p]);
    size_t aslot = (si * (size_t)R->nL + li) * (size_t)R->nh + h;
    SPAN(&u->hst[h], 1);
    SPAN(u->hmsg[h], sizeof u->hmsg[h]);
    SPAN(&R->a->heads[h0 + h], 1);
    SPAN(G->f_ulp + h * D, D);
    SPAN(G->f_val + h * D, D);
    SPAN(G->f_p + h * D, D);
    SPAN(G->f_flag + h * D, D);
    SPAN(G->dd + h * (size_t)R->nb * T, (size_t)R->nb * T);
    SPAN(G->sink + h * T, T);
    SPAN(G->curve + h * T, T);
    SPAN(G->curve_c + h * T, T);
    SPAN(G->probe + h * 3, 3);
    SPAN(G->cos + h * N * N, N * N);
    SPAN(G->sv + h * N, N);
    SPAN(&G->fit_o[h], 1);
    SPAN(G->mu + h * D, D);
    SPAN(G->mc + h * D, D);
    SPAN(u->ac.top_a + aslot * D, D);
    SPAN(u->ac.top_b + aslot * C, C);
    SPAN(u->ac.has + aslot, 1);
    SPAN(&G->r1[h], 1);
#undef SPAN
    return n;
}

/* Bytes of rank r's items of pair p (every item when r < 0). */
static size_t items_bytes(run_t *u, int p, int r) {
    span_t sp[ITEM_SPANS];
    size_t bytes = 0;
    for (int k = 0; k < n_items(u); k++) {
        if (r >= 0 && item_owner(u, p, k) != r) continue;
        size_t n = item_spans(u, p, k, 0, sp);
        for (size_t i = 0; i < n; i++) bytes += sp[i].n;
    }
    return bytes;
}

/* Records of rank r's items of pair p into u->rec (pack) or from it (unpack), in item order. */
static void items_copy(run_t *u, int p, int r, size_t h0, int pack) {
    unsigned char *at = u->rec;
    span_t sp[ITEM_SPANS];
    for (int k = 0; k < n_items(u); k++) {
        if (item_owner(u, p, k) != r) continue;
        size_t n = item_spans(u, p, k, h0, sp);
        for (size_t i = 0; i < n; at += sp[i].n, i++) {
            if (pack) memcpy(at, sp[i].p, sp[i].n);
            else memcpy(sp[i].p, at, sp[i].n);
        }
    }
}

/* An error of item k of pair p, as the process that computed it saw it. */
static void item_error(const run_t *u, char *msg, size_t size) {
    if (u->comm->size > 1) snprintf(msg, size, "on process %d of %d: %s", u->comm->rank, u->comm->size, tsc_error_last());
    else snprintf(msg, size, "%s", tsc_error_last());
}

/* This process's items of pair p in parallel, largest first; after a failure (u->st) the items are
 * marked with it and not computed, so the other processes' messages are still taken in. */
static void pair_compute(run_t *u, int p, size_t h0, int si, int li) {
    an_run_t *R = &u->R;
    tsc_analysis_t *a = R->a;
    long long step = u->pairs.step[p];
    int layer = u->pairs.layer[p], me = u->comm->rank, K = n_items(u);
#pragma omp parallel for schedule(dynamic, 1) num_threads(u->nthr)
    for (int i = 0; i < K; i++) {
        int k = u->order[i];
        if (item_owner(u, p, k) != me) continue;
        if (k >= R->nh) {
            int w = k - R->nh;
            u->smsg[w][0] = '\0';
            if ((u->sst[w] = u->st) == TSC_OK &&
                (u->sst[w] = an_spectral_part(R, step, layer, w, &u->spart[w], u->shn)) != TSC_OK)
                item_error(u, u->smsg[w], sizeof u->smsg[w]);
            continue;
        }
        u->hmsg[k][0] = '\0';
        if ((u->hst[k] = u->st) != TSC_OK) continue;
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        an_head_t x = {R, &u->G, &u->ac, &u->tcs[tid], &a->heads[h0 + (size_t)k], step, layer, k,
                       R->hs[k], si, li, 0, 0.0, 0.0, 0.0, 0, 0, 0};
        if ((u->hst[k] = analyze_head(&x)) != TSC_OK) item_error(u, u->hmsg[k], sizeof u->hmsg[k]);
    }
}

/* The first failure among the items of pair p that rank r computed (every item when r < 0), in
 * item order: the heads, then the matrices. */
static tsc_status_t items_status(const run_t *u, int p, int r) {
    for (int k = 0; k < n_items(u); k++) {
        if (r >= 0 && item_owner(u, p, k) != r) continue;
        if (k < u->R.nh && u->hst[k] != TSC_OK) return tsc_error_set(u->hst[k], "%s", u->hmsg[k]);
        if (k >= u->R.nh && u->sst[k - u->R.nh] != TSC_OK)
            return tsc_error_set(u->sst[k - u->R.nh], "%s", u->smsg[k - u->R.nh]);
    }
    return TSC_OK;
}

/* Rank 0, every item of pair p in place: the pool merges, lp's fit, the group of analysis.h5 with
 * the spectral norms, exactly as one process does them. */
static tsc_status_t pair_finish(run_t *u, int p, size_t h0, int li) {
    an_run_t *R = &u->R;
    tsc_analysis_t *a = R->a;
    size_t nh = (size_t)R->nh, D = (size_t)R->D;
    for (int hi = 0; hi < R->nh; hi++)
        if (u->hst[hi] != TSC_OK) return tsc_error_set(u->hst[hi], "%s", u->hmsg[hi]);
    for (size_t hi = 0; hi < nh; hi++) {
        a->n_skipped_heads += a->heads[h0 + hi].skipped;
        u->G.has_rank1 |= u->G.r1[hi];
        size_t slot = ((size_t)li * nh + hi) * D;
        for (size_t i = 0; i < D; i++) {
            tsc_moments_merge(&u->pool.u[slot + i], &u->G.mu[hi * D + i]);
            tsc_moments_merge(&u->pool.c[slot + i], &u->G.mc[hi * D + i]);
        }
    }
    fit_end(u, h0);
    char gname[64];
    snprintf(gname, sizeof gname, "step_%08lld/layer_%03d", u->pairs.step[p], u->pairs.layer[p]);
    hid_t g;
    tsc_status_t st = tsc_h5_group_create(u->f.fid, gname, &g);
    if (st != TSC_OK) return st;
    st = an_write_group(R, &u->G, g);
    if (st == TSC_OK) st = items_status(u, p, -1); /* the matrices: the heads are checked above */
    if (st == TSC_OK) {
        an_spectral_merge(u->pairs.step[p], u->pairs.layer[p], u->spart, &a->layers[p]);
        st = an_spectral_write(R, g, &a->layers[p], u->shn, u->spart[0].has_hn);
    }
    a->n_layers_res = (size_t)p + 1;
    tsc_h5_close(g);
    return st;
}

/* Pair p: each process its heads; the others' records to rank 0, which finishes the pair. */
static void run_pair(run_t *u, int p) {
    an_run_t *R = &u->R;
    tsc_analysis_t *a = R->a;
    const tsc_comm_t *c = u->comm;
    long long step = u->pairs.step[p];
    int layer = u->pairs.layer[p];
    int si = (int)an_index_ll(a->steps, step), li = (int)an_index_int(R->layers, layer);
    size_t nh = (size_t)R->nh, N = (size_t)R->N, h0 = a->n_heads;
    u->G.has_o = tsc_dump_has_dataset(R->d, step, layer, "o");
    u->G.has_rank1 = 0;
    for (size_t i = 0; i < nh * N * N; i++) u->G.cos[i] = NAN;
    for (size_t i = 0; i < nh * N; i++) u->G.sv[i] = NAN;
    for (size_t hi = 0; hi < nh; hi++) u->hst[hi] = TSC_OK;
    fit_begin(u, si, step, layer);
    pair_compute(u, p, h0, si, li);
    a->n_heads += nh;
    tsc_status_t st = TSC_OK;
    if (c->rank != 0) {
        size_t n = items_bytes(u, p, c->rank);
        items_copy(u, p, c->rank, h0, 1);
        if (n) st = c->send(c->ctx, 0, u->rec, n);
        if (st == TSC_OK) st = items_status(u, p, c->rank);
    } else {
        for (int r = 1; r < c->size && st == TSC_OK; r++) {
            size_t n = items_bytes(u, p, r);
            if (n && (st = c->recv(c->ctx, r, u->rec, n)) == TSC_OK) items_copy(u, p, r, h0, 0);
        }
        if (st == TSC_OK && u->st == TSC_OK) st = pair_finish(u, p, h0, li);
    }
    if (u->st == TSC_OK) u->st = st;
}

static tsc_status_t run_all(run_t *u, const char *dump_path, const char *out_dir) {
    an_run_t *R = &u->R;
    tsc_analysis_t *a = R->a;
    const tsc_comm_t *c = u->comm;
    tsc_status_t st;
    if ((st = tsc_dump_open(&R->d, dump_path)) == TSC_OK) {
        R->m = tsc_dump_meta(R->d);
        if ((st = run_setup(R, dump_path)) == TSC_OK) st = run_select(R, &u->pairs);
    }
    if (st == TSC_OK) {
        u->ac.S = a->n_steps;
        a->n_feature_tests = (int64_t)R->nL * R->nh * R->D; /* pooled over steps: one test per (layer, head, feature) */
        a->n_head_tests = (int64_t)u->pairs.n * R->nh;
        st = run_alloc(u);
    }
    if (st == TSC_OK) {
        if ((st = items_deal(u)) == TSC_OK && !(u->rec = malloc(items_bytes(u, 0, -1))))
            st = tsc_error_set(TSC_ERR_NOMEM, "analysis of %s: out of memory", a->dump_path);
    }
    if (st == TSC_OK && c->rank == 0) st = open_output(u, out_dir, &u->path);
    /* every process leaves here together when one cannot start (its dump, its memory, the folder) */
    if ((st = tsc_comm_agree(c, st)) != TSC_OK) return st;
    tsc_progress_begin(R->o->progress, "head records analysed", (long long)u->pairs.n * R->nh);
    fit_cmp_init(&a->lp_fit_o);
    for (int p = 0; p < u->pairs.n; p++) {
        run_pair(u, p);
        if (u->st == TSC_OK) tsc_progress_tick(R->o->progress, (long long)(p + 1) * R->nh); /* head records done */
    }
    st = u->st;
    if (st == TSC_OK && c->rank == 0) {
        a->lp_fit_ok = !u->fit_bad && a->lp_fit_o.n > 0;
        fit_cmp_finish(&a->lp_fit_o);
        /* a: the flags, pooled per (layer, head, feature) over the analysed steps and batch rows */
        if ((st = an_flags_pool(R, &u->pool, u->f.fid)) == TSC_OK &&
            (st = an_write_cumulative(R, &u->ac, u->f.fid, u->path)) == TSC_OK) {
            u->file_open = 0;
            st = tsc_h5_commit(&u->f); /* closes the file either way */
        }
    }
    return tsc_comm_agree(c, st);
}

tsc_status_t tsc_analysis_run(const char *dump_path, const char *out_dir, const tsc_analysis_opts_t *opts,
                              tsc_analysis_t **out) {
    *out = NULL;
    run_t u;
    memset(&u, 0, sizeof u);
    u.f.fid = H5I_INVALID_HID;
    u.R.o = opts;
    u.comm = tsc_comm_or_serial(opts->comm);
    if (!(u.R.a = calloc(1, sizeof *u.R.a))) return tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory");
    tsc_status_t st = TSC_OK;
    if (opts->run_id) {
        if (!tsc_run_id_valid(opts->run_id))
            st = tsc_error_set(TSC_ERR_ARG, "analysis: run id '%.40s' is not %d hexadecimal digits", opts->run_id,
                               TSC_RUN_ID_LEN);
        else memcpy(u.R.a->run_id, opts->run_id, TSC_RUN_ID_LEN + 1);
    } else st = tsc_run_id_new(u.R.a->run_id); /* pairs analysis.h5 with the summary.json of this run */
    if (st == TSC_OK) st = run_all(&u, dump_path, out_dir);
    if (st != TSC_OK && u.file_open) tsc_h5_abort(&u.f);
    run_free(&u);
    if (st != TSC_OK || u.comm->rank != 0) {
        tsc_analysis_free(u.R.a);
        return st;
    }
    *out = u.R.a;
    return TSC_OK;
}
