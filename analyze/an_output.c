/* an_output.c: analysis.h5's arrays (docs/FORMAT.md): one group per (step, layer) and the
 * cumulative arrays across steps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "an_internal.h"
#include "tsc_linalg.h"

tsc_status_t an_write_arrays(hid_t loc, const an_array_t *a, size_t n) {
    tsc_status_t st = TSC_OK;
    for (size_t k = 0; k < n && st == TSC_OK; k++)
        st = a[k].i ? tsc_h5_write_ints(loc, a[k].name, a[k].rank, a[k].dims, a[k].i, a[k].axes, a[k].unit)
                    : tsc_h5_write_doubles(loc, a[k].name, a[k].rank, a[k].dims, a[k].d, a[k].axes, a[k].unit);
    return st;
}

tsc_status_t an_write_group(const an_run_t *R, const an_group_t *G, hid_t g) {
    int nh = R->nh, D = R->D, T = R->T, N = R->N;
    int64_t *heads = malloc((size_t)nh * sizeof *heads);
    if (!heads) return tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory");
    for (int i = 0; i < nh; i++) heads[i] = R->hs[i];
    uint64_t d1[1] = {(uint64_t)nh}, d2[2] = {(uint64_t)nh, (uint64_t)D}, dt[2] = {(uint64_t)nh, (uint64_t)T};
    uint64_t d3[3] = {(uint64_t)nh, (uint64_t)R->nb, (uint64_t)T}, dp[2] = {(uint64_t)nh, 3};
    uint64_t dc[3] = {(uint64_t)nh, (uint64_t)N, (uint64_t)N}, ds[2] = {(uint64_t)nh, (uint64_t)N};
    an_array_t a[11] = {
        {"heads", 1, d1, NULL, heads, "head", "index"},
        {"o_feature_bias_ulp", 2, d2, G->f_ulp, NULL, "head,feature", "ulp"},
        {"o_feature_bias", 2, d2, G->f_val, NULL, "head,feature", "value"},
        {"o_feature_p", 2, d2, G->f_p, NULL, "head,feature", "probability"},
        {"delta_diff", 3, d3, G->dd, NULL, "head,batch,token", "value"},
        {"sink_counts", 2, dt, NULL, G->sink, "head,key", "rows"},
        {"obar_err_auto", 2, dt, G->curve, NULL, "head,key", "value"},
        {"probe_auto", 2, dp, NULL, G->probe, "head,(batch,token,feature)", "index"}};
    size_t n = 8;
    if (R->o->probe_t >= 0) a[n++] = (an_array_t){"obar_err_chosen", 2, dt, G->curve_c, NULL, "head,key", "value"};
    if (G->has_rank1) {
        a[n++] = (an_array_t){"rank1_cos", 3, dc, G->cos, NULL, "head,term,term", "1"};
        a[n++] = (an_array_t){"rank1_sv", 2, ds, G->sv, NULL, "head,term", "1"};
    }
    tsc_status_t st = an_write_arrays(g, a, n);
    free(heads);
    return st;
}

/* The cumulative arrays across steps: [S, nL, nh] per record, [S, nL, H] and [S, nL, 4] norms,
 * [nL, nh, S, S] cosines, and the index lists. */
typedef struct {
    size_t S, nL, nh, H;
    double *ds, *dc, *mm, *me, *po, *wqh, *wn, *cosS;
    int64_t *stp, *lys, *hds;
} cumul_t;

static void cumul_free(cumul_t *u) {
    void *ps[] = {u->ds, u->dc, u->mm, u->me, u->po, u->wqh, u->wn, u->cosS, u->stp, u->lys, u->hds};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
}

static int cumul_alloc(cumul_t *u) {
    size_t n3 = u->S * u->nL * u->nh, nw = u->S * u->nL * u->H, nn = u->S * u->nL * 4, nc = u->nL * u->nh * u->S * u->S;
    double **d3[] = {&u->ds, &u->dc, &u->mm, &u->me, &u->po};
    int ok = 1;
    for (size_t i = 0; i < 5; i++) ok &= (*d3[i] = malloc((n3 ? n3 : 1) * sizeof(double))) != NULL;
    ok &= (u->wqh = malloc((nw ? nw : 1) * sizeof(double))) != NULL;
    ok &= (u->wn = malloc((nn ? nn : 1) * sizeof(double))) != NULL;
    ok &= (u->cosS = malloc((nc ? nc : 1) * sizeof(double))) != NULL;
    ok &= (u->stp = malloc((u->S ? u->S : 1) * sizeof(int64_t))) != NULL;
    ok &= (u->lys = malloc((u->nL ? u->nL : 1) * sizeof(int64_t))) != NULL;
    ok &= (u->hds = malloc((u->nh ? u->nh : 1) * sizeof(int64_t))) != NULL;
    if (!ok) return 0;
    for (size_t i = 0; i < n3; i++) u->ds[i] = u->dc[i] = u->mm[i] = u->me[i] = u->po[i] = NAN;
    for (size_t i = 0; i < nw; i++) u->wqh[i] = NAN;
    for (size_t i = 0; i < nn; i++) u->wn[i] = NAN;
    for (size_t i = 0; i < nc; i++) u->cosS[i] = NAN;
    return 1;
}

/* Per-record sums and their running sums across steps, per (layer, head), in step order; the
 * running sum goes back into each record's delta_cumsum. */
static void cumul_records(const an_run_t *R, cumul_t *u) {
    tsc_analysis_t *a = R->a;
    size_t nL = u->nL, nh = u->nh, S = u->S;
    for (size_t i = 0; i < a->n_heads; i++) {
        tsc_head_result_t *r = &a->heads[i];
        size_t x = (an_index_ll(a->steps, r->step) * nL + an_index_int(R->layers, r->layer)) * nh +
                   an_index_int(R->hs, r->head);
        u->ds[x] = r->skipped ? NAN : r->delta_sum;
        u->mm[x] = (double)r->rows_multi_max;
        u->me[x] = (double)r->rows_multi_max_eps;
        u->po[x] = (double)r->pbar_one;
    }
    for (size_t li = 0; li < nL; li++)
        for (size_t hi = 0; hi < nh; hi++) {
            double run = 0.0;
            for (size_t si = 0; si < S; si++) {
                size_t x = (si * nL + li) * nh + hi;
                if (isnan(u->ds[x])) continue; /* not analysed (or skipped): the sum carries over */
                run += u->ds[x];
                u->dc[x] = run;
            }
        }
    for (size_t i = 0; i < a->n_heads; i++) {
        tsc_head_result_t *r = &a->heads[i];
        r->delta_cumsum = u->dc[(an_index_ll(a->steps, r->step) * nL + an_index_int(R->layers, r->layer)) * nh +
                                an_index_int(R->hs, r->head)];
    }
}

/* Spectral norms from the layer results; per-head w_q norms re-read from the groups just written. */
static tsc_status_t cumul_norms(const an_run_t *R, cumul_t *u, hid_t fid, const char *path) {
    tsc_analysis_t *a = R->a;
    tsc_status_t st = TSC_OK;
    for (size_t i = 0; i < a->n_layers_res; i++) {
        tsc_layer_result_t *lr = &a->layers[i];
        size_t x = an_index_ll(a->steps, lr->step) * u->nL + an_index_int(R->layers, lr->layer);
        for (int w = 0; w < 4; w++) u->wn[x * 4 + w] = lr->w_norm[w];
        char gname[96];
        snprintf(gname, sizeof gname, "step_%08lld/layer_%03d/wq_head_norm", lr->step, lr->layer);
        if (!tsc_h5_exists(fid, gname)) continue;
        double *v = NULL;
        int rank = 0;
        long long dims[1] = {0};
        if (tsc_h5_read_doubles(fid, gname, 1, &v, &rank, dims) != TSC_OK || dims[0] != (long long)u->H)
            st = tsc_error_set(TSC_ERR_IO, "%s: cannot read back %s", path, gname);
        else memcpy(u->wqh + x * u->H, v, sizeof *v * (size_t)u->H);
        free(v);
    }
    return st;
}

/* Across-step cosine of each head's top rank-1 term. */
static void cumul_cosines(const an_run_t *R, const an_across_t *ac, cumul_t *u) {
    size_t S = u->S, nL = u->nL, nh = u->nh, D = (size_t)R->D, C = (size_t)R->C;
    for (size_t li = 0; li < nL; li++)
        for (size_t hi = 0; hi < nh; hi++)
            for (size_t s1 = 0; s1 < S; s1++)
                for (size_t s2 = 0; s2 < S; s2++) {
                    size_t x1 = (s1 * nL + li) * nh + hi, x2 = (s2 * nL + li) * nh + hi;
                    if (!ac->has[x1] || !ac->has[x2]) continue;
                    double cs4[4];
                    double *aa = malloc(2 * D * sizeof(double)), *bb = malloc(2 * (C ? C : 1) * sizeof(double));
                    if (!aa || !bb) {
                        free(aa), free(bb);
                        continue;
                    }
                    memcpy(aa, ac->top_a + x1 * D, D * sizeof(double));
                    memcpy(aa + D, ac->top_a + x2 * D, D * sizeof(double));
                    memcpy(bb, ac->top_b + x1 * C, C * sizeof(double));
                    memcpy(bb + C, ac->top_b + x2 * C, C * sizeof(double));
                    tsc_linalg_rank1_cosine(aa, D, bb, C, 2, cs4);
                    u->cosS[((li * nh + hi) * S + s1) * S + s2] = cs4[1];
                    free(aa), free(bb);
                }
}

static tsc_status_t cumul_write(const cumul_t *u, hid_t fid) {
    hid_t g;
    size_t S = u->S, nL = u->nL, nh = u->nh;
    uint64_t d3[3] = {S, nL, nh}, d1s[1] = {S}, d1l[1] = {nL}, d1h[1] = {nh};
    uint64_t dw3[3] = {S, nL, (uint64_t)u->H}, dn3[3] = {S, nL, 4}, dcs[4] = {nL, nh, S, S};
    tsc_status_t st = tsc_h5_group_create(fid, "cumulative", &g);
    if (st != TSC_OK) return st;
    const an_array_t a[] = {
        {"steps", 1, d1s, NULL, u->stp, "step", "step"},
        {"layers", 1, d1l, NULL, u->lys, "layer", "index"},
        {"heads", 1, d1h, NULL, u->hds, "head", "index"},
        {"delta_sum", 3, d3, u->ds, NULL, "step,layer,head", "value"},
        {"delta_cumsum", 3, d3, u->dc, NULL, "step,layer,head", "value"},
        {"rows_multi_max", 3, d3, u->mm, NULL, "step,layer,head", "rows"},
        {"rows_multi_max_eps", 3, d3, u->me, NULL, "step,layer,head", "rows"},
        {"pbar_one", 3, d3, u->po, NULL, "step,layer,head", "entries"},
        {"wq_head_norm", 3, dw3, u->wqh, NULL, "step,layer,head(all)", "1"},
        {"w_norm", 3, dn3, u->wn, NULL, "step,layer,weight(q,k,v,o)", "1"},
        {"rank1_cos_steps", 4, dcs, u->cosS, NULL, "layer,head,step,step", "1"}};
    st = an_write_arrays(g, a, sizeof a / sizeof a[0]);
    tsc_h5_close(g);
    return st;
}

tsc_status_t an_write_cumulative(const an_run_t *R, const an_across_t *ac, hid_t fid, const char *path) {
    cumul_t u = {.S = (size_t)ac->S, .nL = (size_t)R->nL, .nh = (size_t)R->nh, .H = (size_t)R->H};
    if (!cumul_alloc(&u)) {
        cumul_free(&u);
        return tsc_error_set(TSC_ERR_NOMEM, "analysis of %s: out of memory", R->a->dump_path);
    }
    for (size_t i = 0; i < u.S; i++) u.stp[i] = R->a->steps[i];
    for (size_t i = 0; i < u.nL; i++) u.lys[i] = R->layers[i];
    for (size_t i = 0; i < u.nh; i++) u.hds[i] = R->hs[i];
    cumul_records(R, &u);
    tsc_status_t st = cumul_norms(R, &u, fid, path);
    cumul_cosines(R, ac, &u);
    if (st == TSC_OK) st = cumul_write(&u, fid);
    cumul_free(&u);
    return st;
}
