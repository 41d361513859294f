/* an_bias.c: measurement a of the analysis (tsc_analysis.h): error summaries of O and delta, the
 * per-feature bias of O and each record's top feature; then the flags, pooled per (layer, head,
 * feature) over the analysed steps and batch rows. */
#include <math.h>
#include <stdlib.h>

#include "an_internal.h"

/* One feature's moments over the rows: (O_lp - O_hp)/ulp (mu), O_lp - O_hp (mv) and the delta
 * contributions dO (O_lp - O_hp) (mc). */
static void feature_moments(const an_bias_view_t *v, int i, tsc_moments_t *mu, tsc_moments_t *mv, tsc_moments_t *mc) {
    int D = v->D;
    tsc_moments_init(mu);
    tsc_moments_init(mv);
    tsc_moments_init(mc);
    for (size_t row = 0; row < v->n_rows; row++) {
        double lp = v->o_lp[row * D + i], hp = v->o_hp[row * D + i];
        double e = lp - hp;
        tsc_moments_add(mv, e);
        tsc_moments_add(mu, isfinite(e) ? e / tsc_stats_ulp(hp, v->o_fmt) : NAN);
    }
    for (size_t row = 0; row < v->n_rows; row++)
        tsc_moments_add(mc, (double)v->dO[row * D + i] * ((double)v->o_lp[row * D + i] - (double)v->o_hp[row * D + i]));
}

void an_bias_measure(const an_bias_view_t *v, tsc_head_result_t *r) {
    tsc_stats_error_compare(v->o_lp, v->o_hp, v->n_rows * (size_t)v->D, v->o_fmt, &r->o_err);
    tsc_stats_error_compare(v->dl_lp, v->dl_hp, v->n_rows, v->delta_fmt, &r->delta_err);
    double best_p = 2.0, best_abs = -1.0;
    for (int i = 0; i < v->D; i++) {
        tsc_moments_t mu, mv, mc;
        feature_moments(v, i, &mu, &mv, &mc);
        v->f_ulp[i] = mu.mean;
        v->f_val[i] = mv.mean;
        v->f_p[i] = tsc_stats_sign_test_p(mu.n_pos, mu.n_neg);
        v->pool_u[i] = mu;
        v->pool_c[i] = mc;
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
    r->delta_biased = r->delta_err.p_sign * (double)v->n_head_tests < v->rule->alpha &&
                      r->delta_err.n_pos + r->delta_err.n_neg >= v->rule->min_n;
}

/* The pooled flag arrays [nL, nh, D]: mean ulp, p, mean delta contribution, flag. */
typedef struct {
    double *pm, *pp, *pcm;
    int64_t *pf;
} pooled_t;

static void pooled_free(pooled_t *p) { free(p->pm), free(p->pp), free(p->pcm), free(p->pf); }

/* Marks the flagged features of every head record: all are counted and kept in a->feature_flags,
 * the first TSC_ANALYSIS_MAX_FLAGGED are listed. */
static void mark_records(const an_run_t *R, const int64_t *pf) {
    tsc_analysis_t *a = R->a;
    size_t nh = (size_t)R->nh, D = (size_t)R->D;
    for (size_t i = 0; i < a->n_heads; i++) {
        tsc_head_result_t *r = &a->heads[i];
        if (r->skipped) continue;
        size_t li = an_index_int(R->layers, r->layer), hi = an_index_int(R->hs, r->head);
        for (size_t f = 0; f < D; f++) {
            size_t x = (li * nh + hi) * D + f;
            r->n_features_tested++;
            if (!pf[x]) continue;
            if (r->n_features_flagged < TSC_ANALYSIS_MAX_FLAGGED) r->flagged_features[r->n_features_flagged] = (int)f;
            r->n_features_flagged++;
            a->feature_flags[i * D + f] = 1;
        }
        r->flagged = r->n_features_flagged > 0;
    }
}

/* a->pooled: each (layer, head) over its records, from the pooled feature arrays p (see
 * tsc_head_pooled_t for each number's definition). */
static tsc_status_t pool_heads(const an_run_t *R, const pooled_t *p) {
    tsc_analysis_t *a = R->a;
    size_t nh = (size_t)R->nh, D = (size_t)R->D, n = (size_t)R->nL * nh;
    if (!(a->pooled = calloc(n ? n : 1, sizeof *a->pooled)))
        return tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory for the pooled heads [%zu]", n);
    a->n_pooled = n;
    for (size_t li = 0; li < (size_t)R->nL; li++)
        for (size_t hi = 0; hi < nh; hi++) {
            tsc_head_pooled_t *q = &a->pooled[li * nh + hi];
            q->layer = R->layers[li], q->head = R->hs[hi], q->top_feature = -1;
            q->top_feature_mean_ulp = q->o_signed_mean = q->accum_gain = NAN;
            double best_p = 2.0, best_abs = -1.0;
            for (size_t f = 0; f < D; f++) {
                size_t x = (li * nh + hi) * D + f;
                q->n_features_flagged += p->pf[x] != 0;
                if (!isfinite(p->pm[x])) continue;
                if (p->pp[x] < best_p || (p->pp[x] == best_p && fabs(p->pm[x]) > best_abs))
                    best_p = p->pp[x], best_abs = fabs(p->pm[x]), q->top_feature = (int)f,
                    q->top_feature_mean_ulp = p->pm[x];
            }
            q->flagged = q->n_features_flagged > 0;
            double osum = 0.0, on = 0.0, e2 = 0.0, t2 = 0.0;
            for (size_t i = 0; i < a->n_heads; i++) {
                const tsc_head_result_t *r = &a->heads[i];
                if (r->layer != q->layer || r->head != q->head) continue;
                q->n_steps++;
                if (r->skipped) {
                    q->n_skipped++;
                    continue;
                }
                q->delta_biased_steps += r->delta_biased;
                q->delta_cumsum += r->delta_sum; /* the last step's running sum (an_output.c), which comes later */
                q->rows_multi_max += r->rows_multi_max;
                osum += r->o_err.signed_mean * (double)r->o_err.n, on += (double)r->o_err.n;
                if (isfinite(r->rank1_accum_gain) && r->rank1_accum_gain > 0) {
                    double t = r->dwq_err_fro / r->rank1_accum_gain;
                    e2 += r->dwq_err_fro * r->dwq_err_fro, t2 += t * t;
                }
            }
            if (on > 0) q->o_signed_mean = osum / on;
            if (t2 > 0) q->accum_gain = sqrt(e2 / t2);
        }
    return TSC_OK;
}

tsc_status_t an_flags_pool(const an_run_t *R, const an_pool_t *pool, hid_t fid) {
    tsc_analysis_t *a = R->a;
    size_t nh = (size_t)R->nh, D = (size_t)R->D, nP = (size_t)R->nL * nh * D;
    pooled_t p = {malloc(nP * sizeof(double)), malloc(nP * sizeof(double)), malloc(nP * sizeof(double)),
                  malloc(nP * sizeof(int64_t))};
    a->feature_flags = calloc(a->n_heads * D + 1, 1);
    if (!p.pm || !p.pp || !p.pcm || !p.pf || !a->feature_flags) {
        pooled_free(&p);
        return tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory for the pooled flags [%zu]", nP);
    }
    for (size_t x = 0; x < nP; x++) {
        const tsc_moments_t *mu = &pool->u[x], *mc = &pool->c[x];
        p.pm[x] = mu->n ? mu->mean : NAN;
        p.pcm[x] = mc->n ? mc->mean : NAN;
        p.pp[x] = mc->n >= 2 ? tsc_stats_t_test_p(tsc_moments_tstat(mc), (double)(mc->n - 1)) : 1.0;
        p.pf[x] = tsc_stats_flag(p.pp[x], a->n_feature_tests, p.pm[x], mc->n_pos + mc->n_neg, &a->rule);
    }
    mark_records(R, p.pf);
    tsc_status_t st = pool_heads(R, &p);
    if (st != TSC_OK) {
        pooled_free(&p);
        return st;
    }
    hid_t g;
    uint64_t d3[3] = {(uint64_t)R->nL, nh, D};
    st = tsc_h5_group_create(fid, "cumulative", &g);
    if (st == TSC_OK) {
        const an_array_t a[] = {{"feature_bias_ulp", 3, d3, p.pm, NULL, "layer,head,feature", "ulp"},
                                {"feature_p", 3, d3, p.pp, NULL, "layer,head,feature", "probability"},
                                {"feature_delta_contrib", 3, d3, p.pcm, NULL, "layer,head,feature", "value"},
                                {"feature_flag", 3, d3, NULL, p.pf, "layer,head,feature", "bool"}};
        st = an_write_arrays(g, a, sizeof a / sizeof a[0]);
        tsc_h5_close(g);
    }
    pooled_free(&p);
    return st;
}
