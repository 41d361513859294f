/* an_spectral.c: measurement f of the analysis (tsc_analysis.h): spectral norms of one (step,
 * layer)'s captured weights, and per head for w_q. The norm is kernels/' one definition
 * (spectral_internal.h), the number the trainer writes to wq_norms.csv: its agreement with LAPACK
 * is tests/kernels/test_spectral.c's job, and what a run keeps of the iteration is whether each
 * norm converged (spectral_unconverged in summary.json). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "an_internal.h"
#include "spectral_internal.h"

static const char *const wnames[4] = {"w_q", "w_k", "w_v", "w_o"};

/* Matrix w of one (step, layer): its norm, and with w_q of H*D rows the per-head norms into hn[H].
 * Non-finite values are counted: that matrix's norm (and the per-head norms of w_q heads that hold
 * one) come out NaN (tsc_spectral_norm_f32), the rest goes on. */
tsc_status_t an_spectral_part(const an_run_t *R, long long step, int layer, int w, an_spectral_part_t *o, double *hn) {
    memset(o, 0, sizeof *o);
    o->norm = NAN;
    if (!tsc_dump_has_dataset(R->d, step, layer, wnames[w])) return TSC_OK;
    tsc_dump_dataset_info_t info;
    tsc_status_t st = tsc_dump_dataset_info(R->d, step, layer, wnames[w], &info);
    if (st != TSC_OK) return st;
    size_t rows = (size_t)info.dims[0], cols = (size_t)info.dims[1];
    float *wm = malloc(rows * cols * sizeof(float));
    if (!wm) return tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory for %s [%zu, %zu]", wnames[w], rows, cols);
    st = tsc_dump_read(R->d, step, layer, wnames[w], 0, 0, wm);
    for (size_t i = 0; st == TSC_OK && i < rows * cols; i++)
        if (!isfinite(wm[i]) && o->n_nonfinite++ == 0)
            snprintf(o->first_nonfinite, sizeof o->first_nonfinite, "%s[r=%zu,c=%zu]", wnames[w], i / cols, i % cols);
    tsc_spectral_t res;
    if (st == TSC_OK && (st = tsc_spectral_norm_f32(wm, rows, cols, &res)) != TSC_OK)
        st = tsc_error_wrap(st, "spectral norm of %s, step %lld layer %d: ", wnames[w], step, layer);
    if (st == TSC_OK) {
        o->norm = res.norm;
        o->unconverged += !isnan(res.norm) && !res.converged;
    }
    /* per head: rows h*D .. (h+1)*D of w_q */
    if (st == TSC_OK && w == 0 && rows == (size_t)R->H * R->D) {
        for (int h = 0; h < R->H && st == TSC_OK; h++)
            if ((st = tsc_spectral_norm_f32(wm + (size_t)h * R->D * cols, (size_t)R->D, cols, &res)) == TSC_OK) {
                hn[h] = res.norm;
                o->unconverged += !isnan(res.norm) && !res.converged;
            }
        o->has_hn = st == TSC_OK;
    }
    free(wm);
    return st;
}

void an_spectral_merge(long long step, int layer, const an_spectral_part_t parts[4], tsc_layer_result_t *lr) {
    lr->step = step;
    lr->layer = layer;
    lr->spectral_unconverged = 0;
    lr->n_nonfinite = 0;
    lr->first_nonfinite[0] = '\0';
    for (int w = 0; w < 4; w++) {
        lr->w_norm[w] = parts[w].norm;
        lr->spectral_unconverged += parts[w].unconverged;
        if (parts[w].n_nonfinite && !lr->n_nonfinite)
            snprintf(lr->first_nonfinite, sizeof lr->first_nonfinite, "%s", parts[w].first_nonfinite);
        lr->n_nonfinite += parts[w].n_nonfinite;
    }
}

tsc_status_t an_spectral_write(const an_run_t *R, hid_t g, const tsc_layer_result_t *lr, const double *hn, int has_hn) {
    tsc_status_t st;
    uint64_t dh[1] = {(uint64_t)R->H}, d4[1] = {4};
    if (has_hn && (st = tsc_h5_write_doubles(g, "wq_head_norm", 1, dh, hn, "head", "1")) != TSC_OK) return st;
    return tsc_h5_write_doubles(g, "w_norm", 1, d4, lr->w_norm, "weight(q,k,v,o)", "1");
}
