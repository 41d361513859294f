/* analysis_json.c: summary.json of an analysis (keys documented in docs/FORMAT.md §3). */
#include <stdio.h>

#include "an_internal.h"
#include "tsc_analysis.h"
#include "tsc_info.h"

#define ERR_F(m, k) TSC_JSON_FIELD(tsc_err_summary_t, m, k)
static const tsc_json_field_t err_fields[] = {
    ERR_F(n, "n"), ERR_F(n_nonfinite, "nonfinite"), ERR_F(max_abs, "max_abs"), ERR_F(mean_abs, "mean_abs"),
    ERR_F(max_rel, "max_rel"), ERR_F(mean_rel, "mean_rel"), ERR_F(signed_mean, "signed_mean"),
    ERR_F(mean_ulp, "mean_ulp"), ERR_F(mean_abs_ulp, "mean_abs_ulp"), ERR_F(max_abs_ulp, "max_abs_ulp"),
    ERR_F(sign_consistency, "sign_consistency"), ERR_F(n_pos, "n_pos"), ERR_F(n_neg, "n_neg"),
    ERR_F(tstat, "t_stat"), ERR_F(p_sign, "p_sign")};

/* key: {the error summary's fields, and the object left open for the caller's keys. */
static void err_summary(tsc_json_t *j, const char *key, const tsc_err_summary_t *e) {
    tsc_json_key(j, key);
    tsc_json_object_begin(j);
    tsc_json_kv_fields(j, e, err_fields, TSC_JSON_NFIELDS(err_fields));
}

#define HEAD_F(m, k) TSC_JSON_FIELD(tsc_head_result_t, m, k)
#define HEAD_B(m, k) TSC_JSON_BOOL(tsc_head_result_t, m, k)
/* The record's (step, layer, head). */
static const tsc_json_field_t head_key_fields[] = {HEAD_F(step, "step"), HEAD_F(layer, "layer"), HEAD_F(head, "head")};

/* key: the record's flagged features (the first TSC_ANALYSIS_MAX_FLAGGED). */
static void flagged_list_json(tsc_json_t *j, const char *key, const tsc_head_result_t *r) {
    int64_t fl[TSC_ANALYSIS_MAX_FLAGGED];
    int nf = r->n_features_flagged < TSC_ANALYSIS_MAX_FLAGGED ? r->n_features_flagged : TSC_ANALYSIS_MAX_FLAGGED;
    for (int i = 0; i < nf; i++) fl[i] = r->flagged_features[i];
    tsc_json_kv_ints(j, key, fl, (size_t)nf);
}

/* "features": the per-feature flags of one record. */
static void features_json(tsc_json_t *j, const tsc_head_result_t *r) {
    tsc_json_key(j, "features");
    tsc_json_object_begin(j);
    tsc_json_kv_int(j, "tested", r->n_features_tested);
    tsc_json_kv_int(j, "flagged", r->n_features_flagged);
    flagged_list_json(j, "flagged_list", r);
    static const tsc_json_field_t top[] = {HEAD_F(top_feature, "top"), HEAD_F(top_feature_mean_ulp, "top_mean_ulp"),
                                           HEAD_F(top_feature_p, "top_p"),
                                           HEAD_F(top_feature_sign_consistency, "top_sign_consistency")};
    tsc_json_kv_fields(j, r, top, TSC_JSON_NFIELDS(top));
    tsc_json_object_end(j);
}

/* "ties": ties, P-bar = 1 and sinks. */
static void ties_json(tsc_json_t *j, const tsc_head_result_t *r) {
    static const tsc_json_field_t f[] = {HEAD_F(rows_multi_max, "rows_multi_max"),
                                         HEAD_F(rows_multi_max_eps, "rows_multi_max_eps"),
                                         HEAD_F(pbar_one, "pbar_one"), HEAD_F(rows_pbar_one_2, "rows_pbar_one_2")};
    tsc_json_key(j, "ties");
    tsc_json_object_begin(j);
    tsc_json_kv_fields(j, r, f, TSC_JSON_NFIELDS(f));
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
static const tsc_json_field_t census_fields[] = {
    HEAD_F(census_additions, "additions"), HEAD_F(census_events_neg, "events_neg"),
    HEAD_F(census_events_pos, "events_pos"), HEAD_F(census_err_neg, "err_neg"), HEAD_F(census_err_pos, "err_pos"),
    HEAD_F(census_share, "share_explained")};
static const tsc_json_field_t probe_fields[] = {
    HEAD_F(probe_b, "batch"), HEAD_F(probe_t, "token"), HEAD_F(probe_i, "feature"), HEAD_F(probe_err, "o_err"),
    HEAD_F(probe_final_obar_err, "final_obar_err")};
static const tsc_json_field_t identity_fields[] = {
    HEAD_F(identity_rel_residual, "rel_residual"), HEAD_F(identity_max_abs_residual, "max_abs_residual"),
    HEAD_F(identity_max_abs_lhs, "max_abs_lhs")};
static const tsc_json_field_t rank1_fields[] = {
    HEAD_B(has_x, "has_x"), HEAD_F(n_terms, "terms"), HEAD_F(rank1_top_energy, "top_energy"),
    HEAD_F(rank1_eff_rank, "eff_rank"), HEAD_F(rank1_mean_cos, "mean_cos"), HEAD_F(rank1_proj_share, "proj_share"),
    HEAD_F(dwq_err_fro, "dwq_err_fro"), HEAD_F(rank1_accum_gain, "accum_gain")};

static void measures_json(tsc_json_t *j, const tsc_head_result_t *r) {
    tsc_json_kv_object(j, "census", r, census_fields, TSC_JSON_NFIELDS(census_fields));
    tsc_json_kv_object(j, "probe", r, probe_fields, TSC_JSON_NFIELDS(probe_fields));
    tsc_json_kv_object(j, "identity", r, identity_fields, TSC_JSON_NFIELDS(identity_fields));
    tsc_json_kv_object(j, "rank1", r, rank1_fields, TSC_JSON_NFIELDS(rank1_fields));
}

static void head_json(tsc_json_t *j, const tsc_head_result_t *r) {
    static const tsc_json_field_t f[] = {
        HEAD_F(n_rows, "rows"), HEAD_B(skipped, "skipped"), HEAD_F(n_nonfinite, "nonfinite_inputs"),
        TSC_JSON_TEXT(tsc_head_result_t, first_nonfinite, "first_nonfinite")};
    tsc_json_object_begin(j);
    tsc_json_kv_fields(j, r, head_key_fields, TSC_JSON_NFIELDS(head_key_fields));
    tsc_json_kv_fields(j, r, f, TSC_JSON_NFIELDS(f));
    if (r->skipped) {
        tsc_json_object_end(j);
        return;
    }
    static const tsc_json_field_t flags[] = {HEAD_B(flagged, "flagged"), HEAD_B(delta_biased, "delta_biased")};
    tsc_json_kv_fields(j, r, flags, TSC_JSON_NFIELDS(flags));
    err_summary(j, "o", &r->o_err);
    tsc_json_object_end(j);
    err_summary(j, "delta", &r->delta_err);
    static const tsc_json_field_t sums[] = {HEAD_F(delta_sum, "sum"), HEAD_F(delta_cumsum, "cumsum")};
    tsc_json_kv_fields(j, r, sums, TSC_JSON_NFIELDS(sums));
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
#define AN_F(m, k) TSC_JSON_FIELD(tsc_analysis_t, m, k)
    static const tsc_json_field_t geo[] = {
        AN_F(B, "batch"), AN_F(H, "n_head"), AN_F(Hkv, "n_kv_head"), AN_F(T, "seq_len"), AN_F(D, "head_dim"),
        AN_F(C, "d_model"), TSC_JSON_BOOL(tsc_analysis_t, causal, "causal"), AN_F(scale, "softmax_scale")};
    static const tsc_json_field_t over[] = {AN_F(n_steps, "steps"), AN_F(n_heads, "head_records")};
    tsc_json_kv_object(j, "geometry", a, geo, TSC_JSON_NFIELDS(geo));
    if (a->n_ranks) { /* a run of many ranks: which rank holds which rows and heads */
        tsc_json_key(j, "ranks");
        tsc_json_array_begin(j);
        for (int i = 0; i < a->n_ranks; i++) tsc_dump_rank_json(&a->ranks[i], 0, j);
        tsc_json_array_end(j);
    }

    int64_t rows = a->n_heads ? a->heads[0].n_rows : 0;
    tsc_json_key(j, "computed_over");
    tsc_json_object_begin(j);
    tsc_json_kv_fields(j, a, over, TSC_JSON_NFIELDS(over));
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
    static const tsc_json_field_t rule[] = {
        AN_F(rule.alpha, "alpha"), AN_F(rule.min_ulp, "min_ulp"), AN_F(rule.min_n, "min_n"),
        AN_F(n_feature_tests, "n_feature_tests"), AN_F(n_head_tests, "n_head_tests"),
        AN_F(rule.alpha, "false_positive_bound"), AN_F(tie_eps, "tie_eps")};
    tsc_json_kv_fields(j, a, rule, TSC_JSON_NFIELDS(rule));
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
        tsc_json_kv_fields(j, r, head_key_fields, TSC_JSON_NFIELDS(head_key_fields));
        flagged_list_json(j, "features", r);
        tsc_json_kv_number(j, "top_mean_ulp", r->top_feature_mean_ulp);
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
    long long unconverged = 0;
    for (size_t i = 0; i < a->n_layers_res; i++) unconverged += a->layers[i].spectral_unconverged;
    tsc_json_kv_int(j, "spectral_unconverged", unconverged);
}

/* key: {w_q, w_k, w_v, w_o} of four spectral norms. */
static void norms_json(tsc_json_t *j, const char *key, const double w[4]) {
    static const char *wn[4] = {"w_q", "w_k", "w_v", "w_o"};
    tsc_json_key(j, key);
    tsc_json_object_begin(j);
    for (int i = 0; i < 4; i++) tsc_json_kv_number(j, wn[i], w[i]);
    tsc_json_object_end(j);
}

/* "heads", "per_head" and "layers". */
static void layers_json(const tsc_analysis_t *a, tsc_json_t *j) {
    tsc_json_key(j, "heads");
    tsc_json_array_begin(j);
    for (size_t i = 0; i < a->n_heads; i++) head_json(j, &a->heads[i]);
    tsc_json_array_end(j);

#define POOL_F(m, k) TSC_JSON_FIELD(tsc_head_pooled_t, m, k)
    static const tsc_json_field_t pf[] = {
        POOL_F(layer, "layer"), POOL_F(head, "head"), POOL_F(n_steps, "steps"), POOL_F(n_skipped, "skipped_steps"),
        TSC_JSON_BOOL(tsc_head_pooled_t, flagged, "flagged"), POOL_F(n_features_flagged, "features_flagged"),
        POOL_F(delta_biased_steps, "delta_biased_steps"), POOL_F(delta_cumsum, "delta_cumsum"),
        POOL_F(top_feature, "top_feature"), POOL_F(top_feature_mean_ulp, "top_feature_mean_ulp"),
        POOL_F(o_signed_mean, "o_signed_mean"), POOL_F(rows_multi_max, "rows_multi_max"),
        POOL_F(accum_gain, "accum_gain")};
    tsc_json_key(j, "per_head");
    tsc_json_array_begin(j);
    for (size_t i = 0; i < a->n_pooled; i++) {
        tsc_json_object_begin(j);
        tsc_json_kv_fields(j, &a->pooled[i], pf, TSC_JSON_NFIELDS(pf));
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);

#define LAYER_F(m, k) TSC_JSON_FIELD(tsc_layer_result_t, m, k)
    static const tsc_json_field_t key[] = {LAYER_F(step, "step"), LAYER_F(layer, "layer")};
    static const tsc_json_field_t tail[] = {LAYER_F(spectral_unconverged, "spectral_unconverged"),
                                            LAYER_F(n_nonfinite, "nonfinite_weights"),
                                            TSC_JSON_TEXT(tsc_layer_result_t, first_nonfinite, "first_nonfinite")};
    tsc_json_key(j, "layers");
    tsc_json_array_begin(j);
    for (size_t i = 0; i < a->n_layers_res; i++) {
        const tsc_layer_result_t *l = &a->layers[i];
        tsc_json_object_begin(j);
        tsc_json_kv_fields(j, l, key, TSC_JSON_NFIELDS(key));
        norms_json(j, "spectral_norm", l->w_norm);
        tsc_json_kv_fields(j, l, tail, TSC_JSON_NFIELDS(tail));
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
    if (a->run_id[0]) tsc_json_kv_string(j, "run_id", a->run_id);
    static const tsc_json_field_t src[] = {
        TSC_JSON_STR(tsc_analysis_t, dump_path, "dump"), TSC_JSON_CHARS(tsc_analysis_t, hp, "hp"),
        TSC_JSON_CHARS(tsc_analysis_t, lp, "lp"), TSC_JSON_CHARS(tsc_analysis_t, lp_source, "lp_source"),
        TSC_JSON_STR(tsc_analysis_t, selection, "selection")};
    tsc_json_kv_fields(j, a, src, TSC_JSON_NFIELDS(src));

    geometry_json(a, j);
    flags_json(a, j);
    layers_json(a, j);
    if (extra) extra(ctx, j);
    tsc_json_key(j, "nonfinite_numbers");
    tsc_json_nonfinite_note(j);
    tsc_json_object_end(j);
}

tsc_status_t an_write_summary_ex(const tsc_analysis_t *a, const char *path, tsc_summary_extra_fn extra, void *ctx) {
    tsc_json_t j;
    tsc_json_init(&j);
    tsc_analysis_summary_json_ex(a, &j, extra, ctx);
    tsc_status_t st = tsc_json_write_file(&j, path);
    tsc_json_free(&j);
    return st;
}

tsc_status_t tsc_analysis_write_summary(const tsc_analysis_t *a, const char *path) {
    return an_write_summary_ex(a, path, NULL, NULL);
}
