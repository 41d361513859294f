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

/* O-bar_error(t') for row t, feature i of the batch row whose lp row t is in v->prow: the lp prefix
 * sum of a_j v[j,i] (FP32 fused multiply-add, sequential by key, the value rounded to the output
 * format at each prefix) minus the same terms a_j v[j,i] summed in double. Both sums take lp's own
 * P-bar a_j (from lp's rounded scores) and lp's v, so the curve is the rounding error of the P-bar V
 * accumulation alone (docs/MECHANISM.md section 5): score rounding, which changes P-bar itself and
 * would add a smooth offset, is not part of it. NaN beyond the visible keys. [T] */
void an_obar_curve(const an_curve_view_t *v, int t, int i, double *out) {
    int T = v->T, D = v->D, nv = an_n_visible(v->causal, T, t);
    float s = 0.0f;
    double h = 0.0;
    for (int j = 0; j < T; j++) {
        if (j >= nv) {
            out[j] = NAN;
            continue;
        }
        float a = (float)v->prow[j], vj = v->vr[(size_t)j * D + i];
        s = fmaf(a, vj, s);
        h += (double)a * (double)vj;
        out[j] = tsc_round((double)s, v->out_fmt, TSC_ROUND_NEAREST_EVEN, NULL) - h;
    }
}
