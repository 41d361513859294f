/* an_census.c: measurement c of the analysis (tsc_analysis.h): the rounding census of the P-bar V
 * additions (tsc_census.h) and the share of the O error in elements with an event. */
#include <math.h>

#include "an_internal.h"
#include "tsc_census.h"

void an_census_row(const an_census_view_t *v, int t, const double *prow, double l, tsc_census_t *cs) {
    tsc_census_row(prow, v->vr, an_n_visible(v->causal, v->T, t), v->D, v->block_k, v->out_fmt, l,
                   v->evt + (size_t)t * v->D, cs);
}

void an_census_add(const tsc_census_t *cs, tsc_head_result_t *r) {
    r->census_additions += cs->additions;
    r->census_events_neg += cs->events_neg;
    r->census_events_pos += cs->events_pos;
    r->census_err_neg += cs->err_neg;
    r->census_err_pos += cs->err_pos;
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
