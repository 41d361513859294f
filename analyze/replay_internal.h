/* replay_internal.h: the parts of the replay (replay.c) that other analyze files reuse: reading one
 * head of a dump with the replay's non-finite check, and running a policy on float inputs whatever
 * the policy's compute type. Not exported. */
#ifndef TSC_REPLAY_INTERNAL_H
#define TSC_REPLAY_INTERNAL_H

#include <stddef.h>

#include "tsc_attention.h"
#include "tsc_dump.h"

/* Reads slice (b, h) of dataset name (n values: T·D, or T for lse) into out and checks every value
 * is finite; kv says h is a kv head (wording only). Errors name path, step, layer, dataset, batch,
 * head and element (a head a capture never stored reads as NaN). */
tsc_status_t replay_read_head(tsc_dump_t *d, const char *path, long long step, int layer, const char *name, int b,
                              int h, int kv, size_t n, float *out);

/* tsc_attn_run with float inputs io->q, k, v, dout (sized by dims) whatever io->dtype: with
 * TSC_ATTN_F64 (a policy with an FP64 stage) the inputs are widened into a temporary copy first;
 * outputs are of io->dtype. */
tsc_status_t replay_attn(const tsc_policy_t *pol, const tsc_attn_dims_t *dims, const tsc_attn_io_t *io);

/* What a selection picks from a dump: the steps present (all of them, or only the first when
 * first_only), the query heads and batch rows, and a layer scratch of n_layer + 1 entries for
 * replay_step_layers. The caller owns and frees the four arrays (allocated even on error). */
typedef struct {
    long long *steps;
    int n_steps;
    int *heads, n_heads;
    int *batches, n_batches;
    int *layers;
} replay_sel_t;

/* Resolves sel against the dump at path. who names the command in errors ("replay", "fit"),
 * verb what it does ("replay", "compare"). TSC_ERR_MISSING when nothing is selected,
 * TSC_ERR_NOMEM, or the memory budget's error for the layer scratch. */
tsc_status_t replay_sel_resolve(tsc_dump_t *d, const char *path, const tsc_select_t *sel, int first_only,
                                const char *who, const char *verb, replay_sel_t *out);

/* The selected layers of step s into rs->layers (*n of them). */
tsc_status_t replay_step_layers(tsc_dump_t *d, const tsc_select_t *sel, long long s, replay_sel_t *rs, int *n);

#endif
