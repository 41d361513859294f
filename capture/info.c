/* info.c: a dump's geometry, steps, layers, datasets and problems as one result (tsc_info.h). */
#include "tsc_info.h"

#include <stdlib.h>
#include <string.h>

/* Root attributes a synthetic dump adds (tsc_synth.h), reported when present. */
static const char *planted_longs[] = {"planted_layers", "planted_heads", "planted_kv_heads", "planted_features",
                                      "planted_sink_keys", "planted_tie_keys", "planted_rows_start",
                                      "planted_rows_stride", "planted_x_channels", "synth_seed"};
static const char *planted_strs[] = {"synth_shape", "synth_o_policy", "capture_select", "flight_trigger",
                                     "flight_reason"};
#define N_LONGS (sizeof planted_longs / sizeof *planted_longs)
#define N_STRS (sizeof planted_strs / sizeof *planted_strs)

typedef struct {
    tsc_info_t *in;
    int cap, oom;
} collect_t;

static void collect(void *ctx, int severity, const char *message) {
    collect_t *c = ctx;
    tsc_info_t *in = c->in;
    if (severity >= 2) in->n_errors++;
    else in->n_warnings++;
    if (in->n_problems >= TSC_INFO_MAX_PROBLEMS) return; /* counted, not listed */
    if (in->n_problems == c->cap) {
        int nc = c->cap ? 2 * c->cap : 16;
        tsc_info_problem_t *p = realloc(in->problems, sizeof *p * (size_t)nc);
        if (!p) {
            c->oom = 1;
            return;
        }
        in->problems = p;
        c->cap = nc;
    }
    char *m = strdup(message);
    if (!m) {
        c->oom = 1;
        return;
    }
    in->problems[in->n_problems].severity = severity;
    in->problems[in->n_problems++].message = m;
}

static tsc_status_t read_planted(tsc_dump_t *d, tsc_info_t *in) {
    in->planted = calloc(N_LONGS + N_STRS, sizeof *in->planted);
    if (!in->planted) return tsc_error_set(TSC_ERR_NOMEM, "info: out of memory");
    for (size_t k = 0; k < N_LONGS; k++) {
        size_t n = 0;
        if (tsc_dump_attr_longs(d, planted_longs[k], NULL, 0, &n) != TSC_OK) continue;
        tsc_info_attr_t *a = &in->planted[in->n_planted];
        a->name = planted_longs[k];
        if (!(a->values = malloc(sizeof(long) * (n ? n : 1)))) return tsc_error_set(TSC_ERR_NOMEM, "info: out of memory");
        if (tsc_dump_attr_longs(d, planted_longs[k], a->values, n, &a->n) != TSC_OK) a->n = 0; /* listed empty */
        if (a->n > n) a->n = n;
        in->n_planted++;
    }
    for (size_t k = 0; k < N_STRS; k++) {
        char s[4096];
        if (tsc_dump_attr_str(d, planted_strs[k], s, sizeof s) != TSC_OK) continue;
        tsc_info_attr_t *a = &in->planted[in->n_planted];
        a->name = planted_strs[k];
        a->is_str = 1;
        if (!(a->str = strdup(s))) return tsc_error_set(TSC_ERR_NOMEM, "info: out of memory");
        in->n_planted++;
    }
    return TSC_OK;
}

static tsc_status_t read_layer(tsc_dump_t *d, long long s, tsc_info_layer_t *l) {
    int n = 0;
    if (tsc_dump_dataset_names(d, s, l->layer, NULL, 0, &n) != TSC_OK) return TSC_OK; /* listed empty */
    char (*names)[TSC_DUMP_NAME_MAX] = malloc(sizeof *names * (size_t)(n ? n : 1));
    l->datasets = calloc((size_t)(n ? n : 1), sizeof *l->datasets);
    if (!names || !l->datasets) {
        free(names);
        return tsc_error_set(TSC_ERR_NOMEM, "info: out of memory");
    }
    int n2 = 0;
    if (tsc_dump_dataset_names(d, s, l->layer, names, n, &n2) != TSC_OK) n2 = 0; /* listed empty, as above */
    for (int k = 0; k < n && k < n2; k++) {
        tsc_info_dataset_t *ds = &l->datasets[l->n_datasets++];
        memcpy(ds->name, names[k], sizeof ds->name);
        ds->ok = tsc_dump_dataset_info(d, s, l->layer, names[k], &ds->info) == TSC_OK;
    }
    free(names);
    return TSC_OK;
}

static tsc_status_t read_step(tsc_dump_t *d, long long s, const tsc_select_t *sel, tsc_info_step_t *st) {
    int n = 0;
    st->step = s;
    if (tsc_dump_layers(d, s, NULL, 0, &n) != TSC_OK) return TSC_OK; /* the validator reports it */
    int *layers = malloc(sizeof(int) * (size_t)(n ? n : 1));
    st->layers = calloc((size_t)(n ? n : 1), sizeof *st->layers);
    if (!layers || !st->layers) {
        free(layers);
        return tsc_error_set(TSC_ERR_NOMEM, "info: out of memory");
    }
    int n2 = 0;
    if (tsc_dump_layers(d, s, layers, n, &n2) != TSC_OK) n2 = 0; /* the validator reports it, as above */
    st->n_layers_all = n < n2 ? n : n2;
    st->tokens = tsc_dump_has_tokens(d, s);
    tsc_status_t rc = TSC_OK;
    for (int li = 0; li < st->n_layers_all && rc == TSC_OK; li++) {
        if (sel && !tsc_select_set_has(&sel->layers, layers[li])) continue;
        tsc_info_layer_t *l = &st->layers[st->n_layers++];
        l->layer = layers[li];
        rc = read_layer(d, s, l);
    }
    free(layers);
    return rc;
}

static tsc_status_t read_all(tsc_dump_t *d, const tsc_select_t *sel, int deep, tsc_info_t *in) {
    in->meta = *tsc_dump_meta(d);
    in->is_session = tsc_dump_is_session(d);
    in->size_bytes = tsc_dump_size_bytes(d);
    in->deep = deep;
    in->dp_size = in->tp_size = in->pp_size = 1;
    in->n_ranks = tsc_dump_n_ranks(d);
    if (in->n_ranks) {
        if (!(in->ranks = calloc((size_t)in->n_ranks, sizeof *in->ranks)))
            return tsc_error_set(TSC_ERR_NOMEM, "info: out of memory");
        for (int i = 0; i < in->n_ranks; i++) {
            (void)tsc_dump_rank(d, i, &in->ranks[i]); /* i < n_ranks: cannot fail */
            if (in->ranks[i].dp_rank + 1 > in->dp_size) in->dp_size = in->ranks[i].dp_rank + 1;
            if (in->ranks[i].tp_rank + 1 > in->tp_size) in->tp_size = in->ranks[i].tp_rank + 1;
            if (in->ranks[i].pp_rank + 1 > in->pp_size) in->pp_size = in->ranks[i].pp_rank + 1;
        }
    }
    collect_t c = {in, 0, 0};
    tsc_dump_validate(d, deep, collect, &c);
    if (c.oom) return tsc_error_set(TSC_ERR_NOMEM, "info: out of memory collecting the problems");
    in->n_steps = tsc_dump_n_steps(d);
    in->incomplete_step = tsc_dump_incomplete_step(d);
    in->steps = malloc(sizeof(long long) * (size_t)(in->n_steps + 1));
    in->listed = calloc((size_t)in->n_steps + 1, sizeof *in->listed);
    if (!in->steps || !in->listed) return tsc_error_set(TSC_ERR_NOMEM, "info: out of memory");
    tsc_status_t st = read_planted(d, in);
    for (int i = 0; i < in->n_steps && st == TSC_OK; i++) {
        in->steps[i] = tsc_dump_step_at(d, i);
        if (sel && !tsc_select_set_has(&sel->steps, in->steps[i])) continue;
        st = read_step(d, in->steps[i], sel, &in->listed[in->n_listed++]);
    }
    return st;
}

tsc_status_t tsc_info_read(const char *path, const tsc_select_t *sel, int deep, tsc_info_t **out) {
    *out = NULL;
    tsc_dump_t *d = NULL;
    tsc_status_t st = tsc_dump_open(&d, path);
    if (st != TSC_OK) return st;
    tsc_info_t *in = calloc(1, sizeof *in);
    if (!in || !(in->path = strdup(path))) st = tsc_error_set(TSC_ERR_NOMEM, "info: out of memory");
    if (st == TSC_OK) st = read_all(d, sel, deep, in);
    tsc_dump_close(d);
    if (st != TSC_OK) {
        tsc_info_free(in);
        return st;
    }
    *out = in;
    return TSC_OK;
}

void tsc_info_free(tsc_info_t *in) {
    if (!in) return;
    for (int i = 0; i < in->n_listed; i++) {
        for (int l = 0; l < in->listed[i].n_layers; l++) free(in->listed[i].layers[l].datasets);
        free(in->listed[i].layers);
    }
    for (int i = 0; i < in->n_planted; i++) {
        free(in->planted[i].values);
        free(in->planted[i].str);
    }
    for (int i = 0; i < in->n_problems; i++) free(in->problems[i].message);
    free(in->ranks);
    free(in->listed);
    free(in->planted);
    free(in->problems);
    free(in->steps);
    free(in->path);
    free(in);
}

/* ------------------------------------------------------------------ JSON */

#define META_F(m) TSC_JSON_FIELD(tsc_dump_meta_t, m, #m)
static const tsc_json_field_t meta_fields[] = {
    META_F(n_layer), META_F(n_head), META_F(n_kv_head), META_F(head_dim), META_F(d_model), META_F(seq_len),
    META_F(batch), TSC_JSON_BOOL(tsc_dump_meta_t, causal, "causal"), META_F(softmax_scale), META_F(tile_q),
    META_F(tile_k), TSC_JSON_CHARS(tsc_dump_meta_t, policy, "policy"), META_F(rank), META_F(world_size),
    TSC_JSON_CHARS(tsc_dump_meta_t, producer, "producer")};

static void dataset_json(const tsc_info_dataset_t *ds, tsc_json_t *j) {
    const tsc_dump_dataset_info_t *in = &ds->info;
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "name", ds->name);
    tsc_json_key(j, "shape");
    tsc_json_array_begin(j);
    for (int r = 0; r < in->rank; r++) tsc_json_int(j, (int64_t)in->dims[r]);
    tsc_json_array_end(j);
    tsc_json_kv_string(j, "dtype", tsc_format_name(in->dtype));
    tsc_json_kv_bool(j, "compressed", in->compressed);
    tsc_json_kv_int(j, "storage_bytes", (int64_t)in->storage_bytes);
    if (in->per_head && in->dims[1] <= 64) {
        tsc_json_key(j, "heads_stored");
        tsc_json_array_begin(j);
        for (uint64_t h = 0; h < in->dims[1]; h++)
            if (in->heads_mask >> h & 1) tsc_json_int(j, (int64_t)h);
        tsc_json_array_end(j);
    }
    tsc_json_object_end(j);
}

static void layers_json(const tsc_info_t *in, tsc_json_t *j) {
    tsc_json_key(j, "layers");
    tsc_json_array_begin(j);
    for (int i = 0; i < in->n_listed; i++)
        for (int l = 0; l < in->listed[i].n_layers; l++) {
            const tsc_info_layer_t *L = &in->listed[i].layers[l];
            tsc_json_object_begin(j);
            tsc_json_kv_int(j, "step", in->listed[i].step);
            tsc_json_kv_int(j, "layer", L->layer);
            tsc_json_kv_string(j, "step_tokens", in->listed[i].tokens == 2 ? "ids and text" : in->listed[i].tokens ? "ids" : NULL);
            tsc_json_key(j, "datasets");
            tsc_json_array_begin(j);
            for (int k = 0; k < L->n_datasets; k++)
                if (L->datasets[k].ok) dataset_json(&L->datasets[k], j);
            tsc_json_array_end(j);
            tsc_json_object_end(j);
        }
    tsc_json_array_end(j);
}

void tsc_dump_rank_json(const tsc_dump_rank_t *r, int with_bytes, tsc_json_t *j) {
    tsc_json_object_begin(j);
    tsc_json_kv_int(j, "rank", r->rank);
    tsc_json_kv_string(j, "file", r->file);
    tsc_json_kv_int(j, "dp_rank", r->dp_rank);
    tsc_json_kv_int(j, "tp_rank", r->tp_rank);
    tsc_json_kv_int(j, "pp_rank", r->pp_rank);
    tsc_json_kv_int(j, "batch0", r->batch0);
    tsc_json_kv_int(j, "batch_n", r->batch_n);
    tsc_json_kv_int(j, "head0", r->head0);
    tsc_json_kv_int(j, "head_n", r->head_n);
    if (with_bytes) tsc_json_kv_int(j, "size_bytes", (int64_t)r->bytes);
    tsc_json_object_end(j);
}

void tsc_info_json(const tsc_info_t *in, tsc_json_t *j) {
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "path", in->path);
    tsc_json_kv_string(j, "kind", in->n_ranks ? "ranks" : in->is_session ? "session" : "file");
    tsc_json_kv_int(j, "size_bytes", (int64_t)in->size_bytes);
    tsc_json_kv_string(j, "format", TSC_DUMP_FORMAT_NAME);
    tsc_json_kv_int(j, "format_version", in->meta.format_version);
    tsc_json_kv_object(j, "meta", &in->meta, meta_fields, TSC_JSON_NFIELDS(meta_fields));
    tsc_json_key(j, "steps");
    tsc_json_array_begin(j);
    for (int i = 0; i < in->n_steps; i++) tsc_json_int(j, in->steps[i]);
    tsc_json_array_end(j);
    tsc_json_kv_int(j, "n_steps", in->n_steps);
    tsc_json_key(j, "incomplete_step");
    if (in->incomplete_step >= 0) tsc_json_int(j, in->incomplete_step);
    else tsc_json_null(j);
    tsc_json_key(j, "ranks");
    tsc_json_array_begin(j);
    for (int i = 0; i < in->n_ranks; i++) {
        tsc_dump_rank_json(&in->ranks[i], 1, j);
    }
    tsc_json_array_end(j);
    tsc_json_key(j, "planted");
    tsc_json_object_begin(j);
    for (int i = 0; i < in->n_planted; i++) {
        const tsc_info_attr_t *a = &in->planted[i];
        if (a->is_str) {
            tsc_json_kv_string(j, a->name, a->str);
            continue;
        }
        tsc_json_key(j, a->name);
        tsc_json_array_begin(j);
        for (size_t k = 0; k < a->n; k++) tsc_json_int(j, a->values[k]);
        tsc_json_array_end(j);
    }
    tsc_json_object_end(j);
    layers_json(in, j);
    tsc_json_kv_int(j, "errors", in->n_errors);
    tsc_json_kv_int(j, "warnings", in->n_warnings);
    tsc_json_key(j, "problems");
    tsc_json_array_begin(j);
    for (int i = 0; i < in->n_problems; i++) {
        tsc_json_object_begin(j);
        tsc_json_kv_string(j, "severity", in->problems[i].severity >= 2 ? "error" : "warning");
        tsc_json_kv_string(j, "message", in->problems[i].message);
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
    tsc_json_kv_bool(j, "ok", in->n_errors == 0);
    tsc_json_object_end(j);
}
