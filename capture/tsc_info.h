/* tsc_info.h: what a dump holds and whether it is sound, as one result (`tilescope info`).
 *
 *   tsc_select_t sel; tsc_select_init(&sel);          // only sel.steps and sel.layers are used
 *   tsc_info_t *in;
 *   if (tsc_info_read("run.h5", &sel, 1, &in) != TSC_OK) ...;   // the dump cannot be opened
 *   tsc_json_t j; tsc_json_init(&j); tsc_info_json(in, &j);    // the documented result
 *   int sound = in->n_errors == 0;
 *   tsc_info_free(in);
 *
 * The fields are for C callers; bindings should read the JSON of tsc_info_json, whose keys are
 * the documented surface:
 *   path, kind ("file" | "session"), size_bytes, format, format_version,
 *   meta {n_layer, n_head, n_kv_head, head_dim, d_model, seq_len, batch, causal, softmax_scale,
 *         tile_q, tile_k, policy, rank, world_size, producer},
 *   steps [every complete step], n_steps, incomplete_step (null when none),
 *   planted {the synthetic dump's root attributes present: integer arrays and strings},
 *   layers [{step, layer, datasets [{name, shape, dtype, compressed, storage_bytes,
 *            heads_stored (per-head datasets of at most 64 heads)}]}] (the selected steps/layers;
 *            a dataset whose shape or type is unusable is left out here and reported as a problem),
 *   errors, warnings, problems [{severity ("error" | "warning"), message}], ok (no error). */
#ifndef TSC_INFO_H
#define TSC_INFO_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_dump.h"
#include "tsc_json.h"
#include "tsc_select.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char name[TSC_DUMP_NAME_MAX];
    int ok;                          /* 0: tsc_dump_dataset_info failed (shape/type unusable) */
    tsc_dump_dataset_info_t info;    /* valid when ok */
} tsc_info_dataset_t;

typedef struct {
    int layer;
    int n_datasets;
    tsc_info_dataset_t *datasets;    /* in HDF5's name order */
} tsc_info_layer_t;

typedef struct {
    long long step;
    int n_layers_all;                /* layers the step holds (before the layer filter) */
    int n_layers;                    /* the selected ones, listed below */
    tsc_info_layer_t *layers;
    int tokens;                      /* the step's tokens: 0 none, 1 ids, 2 ids and text (tsc_dump_has_tokens) */
} tsc_info_step_t;

typedef struct {
    const char *name;                /* "planted_heads", "synth_shape", ... (static) */
    int is_str;
    long *values;                    /* [n] when !is_str */
    size_t n;
    char *str;                       /* when is_str */
} tsc_info_attr_t;

typedef struct {
    int severity;                    /* 2 error, 1 warning */
    char *message;
} tsc_info_problem_t;

/* The most problems a tsc_info_t lists (n_errors + n_warnings counts every one). */
#define TSC_INFO_MAX_PROBLEMS 50

typedef struct {
    char *path;
    int is_session;                  /* a capture-session folder */
    uint64_t size_bytes;
    tsc_dump_meta_t meta;
    int deep;                        /* every chunk was read by the validator */
    int n_steps;                     /* complete steps */
    long long *steps;                /* [n_steps] ascending */
    long long incomplete_step;       /* -1 when none */
    int n_listed;                    /* the complete steps the selection keeps */
    tsc_info_step_t *listed;
    int n_planted;
    tsc_info_attr_t *planted;
    int n_errors, n_warnings, n_problems; /* problems lists the first TSC_INFO_MAX_PROBLEMS of them */
    tsc_info_problem_t *problems;
    int n_ranks;                     /* a run of many ranks (manifest or folder of rank dumps); else 0 */
    tsc_dump_rank_t *ranks;          /* [n_ranks], by rank */
    int dp_size, tp_size, pp_size;   /* its parallel sizes (1 each when n_ranks is 0) */
} tsc_info_t;

/* Opens path (a dump file, a capture-session folder or a run of many ranks), validates it (reading every chunk when
 * deep) and lists the steps and layers sel keeps (sel NULL: all). The dump's problems are in the
 * result, not the status: TSC_OK unless the dump cannot be opened or memory runs out. */
TSC_API tsc_status_t tsc_info_read(const char *path, const tsc_select_t *sel, int deep, tsc_info_t **out);
/* The result as one JSON object (keys above). */
TSC_API void tsc_info_json(const tsc_info_t *in, tsc_json_t *j);
/* One rank of a run as a JSON object (info's and summary.json's "ranks" entries): rank, file, dp/tp/pp
 * rank, batch0, batch_n, head0, head_n, and with_bytes the file's size_bytes. */
TSC_API void tsc_dump_rank_json(const tsc_dump_rank_t *r, int with_bytes, tsc_json_t *j);
TSC_API void tsc_info_free(tsc_info_t *in);

#ifdef __cplusplus
}
#endif
#endif
