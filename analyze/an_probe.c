/* an_probe.c: measurement d of the analysis (tsc_analysis.h): the automatic probe (b, T, I) and
 * the O-bar_error(t) curve of a probe. */
#include <math.h>

#include "an_internal.h"

size_t an_probe_pick(const an_probe_view_t *v, int i, double sgn, double *err) {
    int D = v->D, any_tie = 0;
    long long best_row = -1;
    double bestv = 0.0;
    for (size_t row = 0; row < v->n_rows; row++) any_tie |= v->tie_row[row];
    for (size_t row = 0; row < v->n_rows; row++) {
        if (any_tie && !v->tie_row[row]) continue;
        double e = sgn * ((double)v->o_lp[row * D + i] - (double)v->o_hp[row * D + i]);
        if (best_row < 0 || e > bestv) {
            best_row = (long long)row;
            bestv = e;
        }
    }
    *err = sgn * bestv;
    return (size_t)best_row;
}

/* O-bar_error(t') for row t, feature i of the batch row whose lp row t is in v->prow, v->prm: the lp prefix
 * sum of a_j v[j,i] (FP32 fused multiply-add, sequential by key, the value rounded to the output
 * format at each prefix) minus the same prefix in double with hp's P-bar = exp(S - m) taken
 * against the same running max m as the lp tile. NaN beyond the visible keys. [T] */
void an_obar_curve(const an_curve_view_t *v, int t, int i, double *out) {
    int T = v->T, D = v->D, nv = an_n_visible(v->causal, T, t);
    float s = 0.0f;
    double h = 0.0;
    for (int j = 0; j < T; j++) {
        if (j >= nv) {
            out[j] = NAN;
            continue;
        }
        float a = (float)v->prow[j];
        s = fmaf(a, v->vr[(size_t)j * D + i], s);
        double dotp = 0.0;
        for (int dd = 0; dd < D; dd++) dotp += (double)v->q[(size_t)t * D + dd] * (double)v->k[(size_t)j * D + dd];
        double mref = v->prm[j / v->block_k];
        h += exp(v->scale * dotp - mref) * (double)v->v[(size_t)j * D + i];
        out[j] = tsc_round((double)s, v->out_fmt, TSC_ROUND_NEAREST_EVEN, NULL) - h;
    }
}
