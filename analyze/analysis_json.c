/* analysis_json.c: summary.json of an analysis (keys documented in docs/FORMAT.md §3). */
#include <stdio.h>

#include "tsc_analysis.h"

static void err_summary(tsc_json_t *j, const char *key, const tsc_err_summary_t *e) {
    tsc_json_key(j, key);
    tsc_json_object_begin(j);
    tsc_json_kv_int(j, "n", e->n);
    tsc_json_kv_int(j, "nonfinite", e->n_nonfinite);
    tsc_json_kv_number(j, "max_abs", e->max_abs);
    tsc_json_kv_number(j, "mean_abs", e->mean_abs);
    tsc_json_kv_number(j, "max_rel", e->max_rel);
    tsc_json_kv_number(j, "mean_rel", e->mean_rel);
    tsc_json_kv_number(j, "signed_mean", e->signed_mean);
    tsc_json_kv_number(j, "mean_ulp", e->mean_ulp);
    tsc_json_kv_number(j, "mean_abs_ulp", e->mean_abs_ulp);
    tsc_json_kv_number(j, "max_abs_ulp", e->max_abs_ulp);
    tsc_json_kv_number(j, "sign_consistency", e->sign_consistency);
    tsc_json_kv_int(j, "n_pos", e->n_pos);
    tsc_json_kv_int(j, "n_neg", e->n_neg);
    tsc_json_kv_number(j, "t_stat", e->tstat);
    tsc_json_kv_number(j, "p_sign", e->p_sign);
}

/* "features": the per-feature flags of one record. */
static void features_json(tsc_json_t *j, const tsc_head_result_t *r) {
    tsc_json_key(j, "features");
    tsc_json_object_begin(j);
    tsc_json_kv_int(j, "tested", r->n_features_tested);
    tsc_json_kv_int(j, "flagged", r->n_features_flagged);
    int64_t fl[TSC_ANALYSIS_MAX_FLAGGED];
    int nf = r->n_features_flagged < TSC_ANALYSIS_MAX_FLAGGED ? r->n_features_flagged : TSC_ANALYSIS_MAX_FLAGGED;
    for (int i = 0; i < nf; i++) fl[i] = r->flagged_features[i];
    tsc_json_kv_ints(j, "flagged_list", fl, (size_t)nf);
    tsc_json_kv_int(j, "top", r->top_feature);
    tsc_json_kv_number(j, "top_mean_ulp", r->top_feature_mean_ulp);
    tsc_json_kv_number(j, "top_p", r->top_feature_p);
    tsc_json_kv_number(j, "top_sign_consistency", r->top_feature_sign_consistency);
    tsc_json_object_end(j);
}

/* "ties": ties, P-bar = 1 and sinks. */
static void ties_json(tsc_json_t *j, const tsc_head_result_t *r) {
    tsc_json_key(j, "ties");
    tsc_json_object_begin(j);
    tsc_json_kv_int(j, "rows_multi_max", r->rows_multi_max);
    tsc_json_kv_int(j, "rows_multi_max_eps", r->rows_multi_max_eps);
    tsc_json_kv_int(j, "pbar_one", r->pbar_one);
    tsc_json_kv_int(j, "rows_pbar_one_2", r->rows_pbar_one_2);
    int64_t sk[TSC_ANALYSIS_MAX_SINKS], sf[TSC_ANALYSIS_MAX_SINKS];
    int ns = 0;
    for (int i = 0; i < TSC_ANALYSIS_MAX_SINKS; i++)
        if (r->sink_keys[i] >= 0) sk[ns++] = r->sink_keys[i];
    tsc_json_kv_ints(j, "sink_keys", sk, (size_t)ns);
    tsc_json_kv_ints(j, "sink_counts", r->sink_counts, (size_t)ns);
    for (int i = 0; i < r->n_sinks_flagged; i++) sf[i] = r->sinks_flagged[i];
    tsc_json_kv_ints(j, "sinks_flagged", sf, (size_t)r->n_sinks_flagged);
    tsc_json_object_end(j);
}

/* "census", "probe", "identity", "rank1". */
static void measures_json(tsc_json_t *j, const tsc_head_result_t *r) {
    tsc_json_key(j, "census");
    tsc_json_object_begin(j);
    tsc_json_kv_int(j, "additions", r->census_additions);
    tsc_json_kv_int(j, "events_neg", r->census_events_neg);
    tsc_json_kv_int(j, "events_pos", r->census_events_pos);
    tsc_json_kv_number(j, "err_neg", r->census_err_neg);
    tsc_json_kv_number(j, "err_pos", r->census_err_pos);
    tsc_json_kv_number(j, "share_explained", r->census_share);
    tsc_json_object_end(j);

    tsc_json_key(j, "probe");
    tsc_json_object_begin(j);
    tsc_json_kv_int(j, "batch", r->probe_b);
    tsc_json_kv_int(j, "token", r->probe_t);
    tsc_json_kv_int(j, "feature", r->probe_i);
    tsc_json_kv_number(j, "o_err", r->probe_err);
    tsc_json_kv_number(j, "final_obar_err", r->probe_final_obar_err);
    tsc_json_object_end(j);

    tsc_json_key(j, "identity");
    tsc_json_object_begin(j);
    tsc_json_kv_number(j, "rel_residual", r->identity_rel_residual);
    tsc_json_kv_number(j, "max_abs_residual", r->identity_max_abs_residual);
    tsc_json_kv_number(j, "max_abs_lhs", r->identity_max_abs_lhs);
    tsc_json_object_end(j);

    tsc_json_key(j, "rank1");
    tsc_json_object_begin(j);
    tsc_json_kv_bool(j, "has_x", r->has_x);
    tsc_json_kv_int(j, "terms", r->n_terms);
    tsc_json_kv_number(j, "top_energy", r->rank1_top_energy);
    tsc_json_kv_number(j, "eff_rank", r->rank1_eff_rank);
    tsc_json_kv_number(j, "mean_cos", r->rank1_mean_cos);
    tsc_json_kv_number(j, "proj_share", r->rank1_proj_share);
    tsc_json_kv_number(j, "dwq_err_fro", r->dwq_err_fro);
    tsc_json_kv_number(j, "accum_gain", r->rank1_accum_gain);
    tsc_json_object_end(j);
}

static void head_json(tsc_json_t *j, const tsc_head_result_t *r) {
    tsc_json_object_begin(j);
    tsc_json_kv_int(j, "step", r->step);
    tsc_json_kv_int(j, "layer", r->layer);
    tsc_json_kv_int(j, "head", r->head);
    tsc_json_kv_int(j, "rows", r->n_rows);
    tsc_json_kv_bool(j, "skipped", r->skipped);
    tsc_json_kv_int(j, "nonfinite_inputs", r->n_nonfinite);
    tsc_json_kv_string(j, "first_nonfinite", r->first_nonfinite[0] ? r->first_nonfinite : NULL);
    if (r->skipped) {
        tsc_json_object_end(j);
        return;
    }
    tsc_json_kv_bool(j, "flagged", r->flagged);
    tsc_json_kv_bool(j, "delta_biased", r->delta_biased);
    err_summary(j, "o", &r->o_err);
    tsc_json_object_end(j);
    err_summary(j, "delta", &r->delta_err);
    tsc_json_kv_number(j, "sum", r->delta_sum);
    tsc_json_kv_number(j, "cumsum", r->delta_cumsum);
    tsc_json_object_end(j);
    tsc_json_kv_number(j, "o_dump_vs_lp_max_abs", r->o_dump_vs_lp_max_abs);

    features_json(j, r);
    ties_json(j, r);
    measures_json(j, r);
    tsc_json_object_end(j);
}

void tsc_analysis_summary_json(const tsc_analysis_t *a, tsc_json_t *j) {
    tsc_analysis_summary_json_ex(a, j, NULL, NULL);
}

/* "geometry" and "computed_over". */
static void geometry_json(const tsc_analysis_t *a, tsc_json_t *j) {
    tsc_json_key(j, "geometry");
    tsc_json_object_begin(j);
    tsc_json_kv_int(j, "batch", a->B);
    tsc_json_kv_int(j, "n_head", a->H);
    tsc_json_kv_int(j, "n_kv_head", a->Hkv);
    tsc_json_kv_int(j, "seq_len", a->T);
    tsc_json_kv_int(j, "head_dim", a->D);
    tsc_json_kv_int(j, "d_model", a->C);
    tsc_json_kv_bool(j, "causal", a->causal);
    tsc_json_kv_number(j, "softmax_scale", a->scale);
    tsc_json_object_end(j);

    int64_t rows = a->n_heads ? a->heads[0].n_rows : 0;
    tsc_json_key(j, "computed_over");
    tsc_json_object_begin(j);
    tsc_json_kv_int(j, "steps", a->n_steps);
    tsc_json_kv_int(j, "head_records", (int64_t)a->n_heads);
    tsc_json_kv_int(j, "rows_per_head", rows);
    tsc_json_kv_int(j, "elements_per_head", rows * a->D);
    tsc_json_key(j, "step_list");
    tsc_json_array_begin(j);
    for (int i = 0; i < a->n_steps; i++) tsc_json_int(j, a->steps[i]);
    tsc_json_array_end(j);
    tsc_json_object_end(j);
}

/* "flag_rule", the flagged heads and the power-vs-LAPACK check. */
static void flags_json(const tsc_analysis_t *a, tsc_json_t *j) {
    tsc_json_key(j, "flag_rule");
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "test", "two-sided t-test of the delta contributions dO*(O_lp - O_hp) per (layer, head, "
                                  "feature) pooled over steps and rows, Bonferroni-corrected; and |mean error| >= "
                                  "min_ulp ULPs");
    tsc_json_kv_number(j, "alpha", a->rule.alpha);
    tsc_json_kv_number(j, "min_ulp", a->rule.min_ulp);
    tsc_json_kv_int(j, "min_n", a->rule.min_n);
    tsc_json_kv_int(j, "n_feature_tests", a->n_feature_tests);
    tsc_json_kv_int(j, "n_head_tests", a->n_head_tests);
    tsc_json_kv_number(j, "false_positive_bound", a->rule.alpha);
    tsc_json_kv_number(j, "tie_eps", a->tie_eps);
    tsc_json_object_end(j);

    int64_t nflag = 0;
    for (size_t i = 0; i < a->n_heads; i++) nflag += a->heads[i].flagged;
    tsc_json_kv_int(j, "n_flagged_heads", nflag);
    tsc_json_kv_int(j, "n_skipped_heads", a->n_skipped_heads);
    tsc_json_key(j, "flagged_heads");
    tsc_json_array_begin(j);
    for (size_t i = 0; i < a->n_heads; i++) {
        const tsc_head_result_t *r = &a->heads[i];
        if (!r->flagged) continue;
        tsc_json_object_begin(j);
        tsc_json_kv_int(j, "step", r->step);
        tsc_json_kv_int(j, "layer", r->layer);
        tsc_json_kv_int(j, "head", r->head);
        int64_t fl[TSC_ANALYSIS_MAX_FLAGGED];
        int nf = r->n_features_flagged < TSC_ANALYSIS_MAX_FLAGGED ? r->n_features_flagged : TSC_ANALYSIS_MAX_FLAGGED;
        for (int k = 0; k < nf; k++) fl[k] = r->flagged_features[k];
        tsc_json_kv_ints(j, "features", fl, (size_t)nf);
        tsc_json_kv_number(j, "top_mean_ulp", r->top_feature_mean_ulp);
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
    tsc_json_kv_number(j, "spectral_power_vs_lapack_max_rel_diff", a->wq_head_norm_max_rel_diff);
}

/* "heads" and "layers". */
static void layers_json(const tsc_analysis_t *a, tsc_json_t *j) {
    tsc_json_key(j, "heads");
    tsc_json_array_begin(j);
    for (size_t i = 0; i < a->n_heads; i++) head_json(j, &a->heads[i]);
    tsc_json_array_end(j);

    static const char *wn[4] = {"w_q", "w_k", "w_v", "w_o"};
    tsc_json_key(j, "layers");
    tsc_json_array_begin(j);
    for (size_t i = 0; i < a->n_layers_res; i++) {
        const tsc_layer_result_t *l = &a->layers[i];
        tsc_json_object_begin(j);
        tsc_json_kv_int(j, "step", l->step);
        tsc_json_kv_int(j, "layer", l->layer);
        tsc_json_key(j, "spectral_norm");
        tsc_json_object_begin(j);
        for (int w = 0; w < 4; w++) tsc_json_kv_number(j, wn[w], l->w_norm[w]);
        tsc_json_object_end(j);
        tsc_json_key(j, "spectral_norm_lapack");
        tsc_json_object_begin(j);
        for (int w = 0; w < 4; w++) tsc_json_kv_number(j, wn[w], l->w_norm_lapack[w]);
        tsc_json_object_end(j);
        tsc_json_kv_number(j, "power_vs_lapack_max_rel_diff", l->max_rel_diff);
        tsc_json_kv_int(j, "nonfinite_weights", l->n_nonfinite);
        tsc_json_kv_string(j, "first_nonfinite", l->first_nonfinite[0] ? l->first_nonfinite : NULL);
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
}

void tsc_analysis_summary_json_ex(const tsc_analysis_t *a, tsc_json_t *j, tsc_summary_extra_fn extra, void *ctx) {
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "format", "tilescope-summary");
    tsc_json_kv_int(j, "format_version", TSC_ANALYSIS_FORMAT_VERSION);
    char producer[64];
    snprintf(producer, sizeof producer, "tilescope %s", tsc_version());
    tsc_json_kv_string(j, "producer", producer);
    tsc_json_kv_string(j, "dump", a->dump_path);
    tsc_json_kv_string(j, "hp", a->hp);
    tsc_json_kv_string(j, "lp", a->lp);
    tsc_json_kv_string(j, "selection", a->selection);

    geometry_json(a, j);
    flags_json(a, j);
    layers_json(a, j);
    if (extra) extra(ctx, j);
    tsc_json_key(j, "nonfinite_numbers");
    tsc_json_nonfinite_note(j);
    tsc_json_object_end(j);
}

tsc_status_t tsc_analysis_write_summary(const tsc_analysis_t *a, const char *path) {
    tsc_json_t j;
    tsc_json_init(&j);
    tsc_analysis_summary_json(a, &j);
    tsc_status_t st = tsc_json_write_file(&j, path);
    tsc_json_free(&j);
    return st;
}
