/* an_spectral.c: measurement f of the analysis (tsc_analysis.h): spectral norms of one (step,
 * layer)'s captured weights, power iteration checked against LAPACK, and per head for w_q. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "an_internal.h"
#include "tsc_linalg.h"

/* Iteration settings for the spectral norms (tsc_linalg_spectral_norm): stop when sigma moves by
 * < 1e-10 relative (the Chebyshev-filtered block iteration is then within ~1e-13 of LAPACK on
 * GPT-2-sized random weights), at most 1500 products of the Gram matrix with the block. Each result is compared with
 * LAPACK's top eigenvalue of the same Gram matrix and the largest relative difference is reported
 * (max_rel_diff), so a non-converged case is visible. */
#define SPEC_MAX_ITER 1500
#define SPEC_TOL 1e-10

static const char *const wnames[4] = {"w_q", "w_k", "w_v", "w_o"};

typedef struct {
    float *wm[4];
    size_t rows[4], cols[4];
} weights_t;

/* Reads the weights present, counting non-finite values: that matrix's norms (and the per-head
 * norms of w_q heads that hold one) come out NaN (tsc_linalg_spectral_norm), the rest goes on. */
static tsc_status_t read_weights(const an_run_t *R, long long step, int layer, weights_t *W, tsc_layer_result_t *lr) {
    tsc_status_t st = TSC_OK;
    for (int w = 0; w < 4 && st == TSC_OK; w++) {
        if (!tsc_dump_has_dataset(R->d, step, layer, wnames[w])) continue;
        tsc_dump_dataset_info_t info;
        if ((st = tsc_dump_dataset_info(R->d, step, layer, wnames[w], &info)) != TSC_OK) break;
        size_t rows = (size_t)info.dims[0], cols = (size_t)info.dims[1];
        W->rows[w] = rows, W->cols[w] = cols;
        if (!(W->wm[w] = malloc(rows * cols * sizeof(float))))
            return tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory for %s [%zu, %zu]", wnames[w], rows, cols);
        st = tsc_dump_read(R->d, step, layer, wnames[w], 0, 0, W->wm[w]);
        for (size_t i = 0; st == TSC_OK && i < rows * cols; i++)
            if (!isfinite(W->wm[w][i]) && lr->n_nonfinite++ == 0)
                snprintf(lr->first_nonfinite, sizeof lr->first_nonfinite, "%s[r=%zu,c=%zu]", wnames[w], i / cols,
                         i % cols);
    }
    return st;
}

/* The four matrices in parallel (power iteration and LAPACK each). */
static tsc_status_t whole_norms(const weights_t *W, long long step, int layer, tsc_layer_result_t *lr) {
    tsc_status_t st = TSC_OK, wst[4] = {TSC_OK, TSC_OK, TSC_OK, TSC_OK};
    char wmsg[4][512];
#pragma omp parallel for schedule(dynamic, 1)
    for (int w = 0; w < 4; w++) {
        if (!W->wm[w]) continue;
        wst[w] = tsc_linalg_spectral_norm(W->wm[w], W->rows[w], W->cols[w], SPEC_MAX_ITER, SPEC_TOL, &lr->w_norm[w],
                                          NULL, &lr->w_norm_lapack[w]);
        if (wst[w] != TSC_OK)
            snprintf(wmsg[w], sizeof wmsg[w], "spectral norm of %s, step %lld layer %d: %s", wnames[w], step, layer,
                     tsc_error_last());
    }
    for (int w = 0; w < 4 && st == TSC_OK; w++) {
        if (wst[w] != TSC_OK) st = tsc_error_set(wst[w], "%s", wmsg[w]);
        else if (W->wm[w] && isfinite(lr->w_norm[w]) && lr->w_norm_lapack[w] > 0) {
            double rd = fabs(lr->w_norm[w] - lr->w_norm_lapack[w]) / lr->w_norm_lapack[w];
            if (rd > lr->max_rel_diff) lr->max_rel_diff = rd;
        }
    }
    return st;
}

/* Per head: rows h*D .. (h+1)*D of w_q, into wq_head_norm(_lapack) of g. */
static tsc_status_t head_norms(const an_run_t *R, const weights_t *W, hid_t g) {
    int H = R->H, D = R->D;
    double *hn = malloc((size_t)H * sizeof *hn), *hl = malloc((size_t)H * sizeof *hl);
    tsc_status_t st = TSC_OK;
    if (!hn || !hl) st = tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory for per-head norms");
    for (int h = 0; st == TSC_OK && h < H; h++) {
        const float *wh = W->wm[0] + (size_t)h * D * W->cols[0];
        st = tsc_linalg_spectral_norm(wh, (size_t)D, W->cols[0], SPEC_MAX_ITER, SPEC_TOL, &hn[h], NULL, &hl[h]);
        if (st == TSC_OK && hl[h] > 0) {
            double rd = fabs(hn[h] - hl[h]) / hl[h];
            if (rd > R->a->wq_head_norm_max_rel_diff) R->a->wq_head_norm_max_rel_diff = rd;
        }
    }
    uint64_t dims[1] = {(uint64_t)H};
    if (st == TSC_OK) st = tsc_h5_write_doubles(g, "wq_head_norm", 1, dims, hn, "head", "1");
    if (st == TSC_OK) st = tsc_h5_write_doubles(g, "wq_head_norm_lapack", 1, dims, hl, "head", "1");
    free(hn);
    free(hl);
    return st;
}

tsc_status_t an_spectral(const an_run_t *R, hid_t g, long long step, int layer, tsc_layer_result_t *lr) {
    lr->step = step;
    lr->layer = layer;
    lr->max_rel_diff = 0.0;
    lr->n_nonfinite = 0;
    lr->first_nonfinite[0] = '\0';
    for (int w = 0; w < 4; w++) lr->w_norm[w] = lr->w_norm_lapack[w] = NAN;
    weights_t W = {{NULL, NULL, NULL, NULL}, {0}, {0}};
    tsc_status_t st = read_weights(R, step, layer, &W, lr);
    if (st == TSC_OK) st = whole_norms(&W, step, layer, lr);
    if (st == TSC_OK && W.wm[0] && W.rows[0] == (size_t)R->H * R->D) st = head_norms(R, &W, g);
    for (int w = 0; w < 4; w++) free(W.wm[w]);
    if (st != TSC_OK) return st;
    uint64_t d4[1] = {4};
    st = tsc_h5_write_doubles(g, "w_norm", 1, d4, lr->w_norm, "weight(q,k,v,o)", "1");
    if (st == TSC_OK) st = tsc_h5_write_doubles(g, "w_norm_lapack", 1, d4, lr->w_norm_lapack, "weight(q,k,v,o)", "1");
    return st;
}
