/* an_census.c: measurement c of the analysis (tsc_analysis.h): the rounding census of the P-bar V
 * additions (tsc_census.h) and the share of the O error in elements with an event. */
#include <math.h>

#include "an_internal.h"
#include "tsc_census.h"

void an_census_rows(const an_census_view_t *v, tsc_head_result_t *r) {
    int T = v->T, D = v->D;
    const tsc_attn_trace_t *tr = v->tr;
    tsc_census_t cs = {0};
    for (int t = 0; t < T; t++) {
        int last_tile = v->causal ? t / tr->block_k : tr->n_kt - 1;
        tsc_census_row(tr->pbar + (size_t)t * T, v->vr, an_n_visible(v->causal, T, t), D, tr->block_k, v->out_fmt,
                       tr->l[(size_t)t * tr->n_kt + last_tile], v->evt + (size_t)t * D, &cs);
    }
    r->census_additions += cs.additions;
    r->census_events_neg += cs.events_neg;
    r->census_events_pos += cs.events_pos;
    r->census_err_neg += cs.err_neg;
    r->census_err_pos += cs.err_pos;
}

double an_census_share(const float *o_lp, const float *o_hp, const uint8_t *evt, size_t n) {
    double all = 0.0, in = 0.0;
    for (size_t e = 0; e < n; e++) {
        double er = (double)o_lp[e] - (double)o_hp[e];
        all += er;
        if (evt[e]) in += er;
    }
    return all != 0.0 ? in / all : NAN;
}
