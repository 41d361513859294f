/* an_ties.c: measurement b of the analysis (tsc_analysis.h): ties at the row max, P-bar = 1
 * counts and sinks, from the lp scores (as rounded to the S stage). */
#include <math.h>

#include "an_internal.h"

void an_ties_row(const an_ties_view_t *v, int t, const double *srow, const double *prow, tsc_head_result_t *r) {
    int T = v->T;
    {
        int nv = an_n_visible(v->causal, T, t);
        double mx = -INFINITY;
        for (int j = 0; j < nv; j++)
            if (srow[j] > mx) mx = srow[j];
        int n_ex = 0, n_eps = 0, n_one = 0;
        for (int j = 0; j < nv; j++) {
            if (srow[j] == mx) {
                n_ex++;
                v->sink[j]++;
            }
            if (srow[j] >= mx - v->tie_eps) n_eps++;
            if (prow[j] == 1.0) n_one++;
            v->expct[j] += 1.0 / nv;
        }
        r->rows_multi_max += n_ex >= 2;
        r->rows_multi_max_eps += n_eps >= 2;
        r->pbar_one += n_one;
        r->rows_pbar_one_2 += n_one >= 2;
        v->tie_row[t] = n_ex >= 2;
    }
}

void an_sinks(const int64_t *sink, const double *expct, int T, int64_t n_rows, tsc_head_result_t *r) {
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
            if (sink[best] >= 8 && (double)sink[best] >= 0.25 * (double)n_rows && (double)sink[best] >= 4.0 * ex)
                r->sinks_flagged[r->n_sinks_flagged++] = best;
        }
    }
}
