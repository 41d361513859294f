/* an_spectral.c: measurement f of the analysis (tsc_analysis.h): spectral norms of one (step,
 * layer)'s captured weights, and per head for w_q. The norm is kernels/' one definition
 * (spectral_internal.h), the number the trainer writes to wq_norms.csv: its agreement with LAPACK
 * is tests/kernels/test_spectral.c's job, and what a run keeps of the iteration is whether each
 * norm converged (spectral_unconverged in summary.json). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "an_internal.h"
#include "spectral_internal.h"

static const char *const wnames[4] = {"w_q", "w_k", "w_v", "w_o"};

typedef struct {
    float *wm[4];
    size_t rows[4], cols[4];
} weights_t;

/* Reads the weights present, counting non-finite values: that matrix's norm (and the per-head
 * norms of w_q heads that hold one) come out NaN (tsc_spectral_norm_f32), the rest goes on. */
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

/* The four matrices in parallel. */
static tsc_status_t whole_norms(const weights_t *W, long long step, int layer, tsc_layer_result_t *lr) {
    tsc_status_t st = TSC_OK, wst[4] = {TSC_OK, TSC_OK, TSC_OK, TSC_OK};
    tsc_spectral_t res[4];
    char wmsg[4][512];
#pragma omp parallel for schedule(dynamic, 1)
    for (int w = 0; w < 4; w++) {
        if (!W->wm[w]) continue;
        wst[w] = tsc_spectral_norm_f32(W->wm[w], W->rows[w], W->cols[w], &res[w]);
        if (wst[w] != TSC_OK)
            snprintf(wmsg[w], sizeof wmsg[w], "spectral norm of %s, step %lld layer %d: %s", wnames[w], step, layer,
                     tsc_error_last());
    }
    for (int w = 0; w < 4 && st == TSC_OK; w++) {
        if (wst[w] != TSC_OK) st = tsc_error_set(wst[w], "%s", wmsg[w]);
        else if (W->wm[w]) {
            lr->w_norm[w] = res[w].norm;
            lr->spectral_unconverged += !isnan(res[w].norm) && !res[w].converged;
        }
    }
    return st;
}

/* Per head: rows h*D .. (h+1)*D of w_q, into wq_head_norm of g. */
static tsc_status_t head_norms(const an_run_t *R, const weights_t *W, hid_t g, tsc_layer_result_t *lr) {
    int H = R->H, D = R->D;
    double *hn = malloc((size_t)H * sizeof *hn);
    tsc_status_t st = hn ? TSC_OK : tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory for per-head norms");
    for (int h = 0; st == TSC_OK && h < H; h++) {
        tsc_spectral_t res;
        st = tsc_spectral_norm_f32(W->wm[0] + (size_t)h * D * W->cols[0], (size_t)D, W->cols[0], &res);
        if (st != TSC_OK) break;
        hn[h] = res.norm;
        lr->spectral_unconverged += !isnan(res.norm) && !res.converged;
    }
    uint64_t dims[1] = {(uint64_t)H};
    if (st == TSC_OK) st = tsc_h5_write_doubles(g, "wq_head_norm", 1, dims, hn, "head", "1");
    free(hn);
    return st;
}

tsc_status_t an_spectral(const an_run_t *R, hid_t g, long long step, int layer, tsc_layer_result_t *lr) {
    lr->step = step;
    lr->layer = layer;
    lr->spectral_unconverged = 0;
    lr->n_nonfinite = 0;
    lr->first_nonfinite[0] = '\0';
    for (int w = 0; w < 4; w++) lr->w_norm[w] = NAN;
    weights_t W = {{NULL, NULL, NULL, NULL}, {0}, {0}};
    tsc_status_t st = read_weights(R, step, layer, &W, lr);
    if (st == TSC_OK) st = whole_norms(&W, step, layer, lr);
    if (st == TSC_OK && W.wm[0] && W.rows[0] == (size_t)R->H * R->D) st = head_norms(R, &W, g, lr);
    for (int w = 0; w < 4; w++) free(W.wm[w]);
    if (st != TSC_OK) return st;
    uint64_t d4[1] = {4};
    return tsc_h5_write_doubles(g, "w_norm", 1, d4, lr->w_norm, "weight(q,k,v,o)", "1");
}
