/* manifest_internal.h: a dump made of the dumps of many ranks (manifest.c), as dump.c uses it.
 *
 * A manifest view holds the rank dumps of one run, each opened as a dump of its own (with every
 * check of tsc_dump_open), their parallel coordinates and the mapping from the whole run's batch
 * rows, heads and layers to the rank that holds them. dump.c gives a tsc_dump_t whose `mv` is set
 * the merged metadata and steps, and sends every per-layer call to the rank picked here. */
#ifndef TSC_MANIFEST_INTERNAL_H
#define TSC_MANIFEST_INTERNAL_H

#include <hdf5.h>

#include "tsc_dump.h"

typedef struct tsc_mview tsc_mview_t;

/* The rank table of a manifest file (root already open, its format attribute
 * "tilescope-manifest"): names and coordinates only, no rank dump opened. path is the manifest's. */
tsc_status_t tsc_mview_from_file(hid_t root, const char *path, tsc_mview_t **out);
/* The rank dumps of a folder: files named "*.rank<N>.h5" or "rank<N>.h5" (none opened yet). */
tsc_status_t tsc_mview_from_dir(const char *dir, tsc_mview_t **out);
/* Opens every rank dump (tsc_dump_open) and merges: the run's metadata into *meta, its steps (the
 * ranks must agree) into a malloc'd *steps of *n_steps, the incomplete step, the bytes on disk.
 * An absent, unreadable or disagreeing rank is an error naming the rank and its file. */
tsc_status_t tsc_mview_open(tsc_mview_t *m, tsc_dump_meta_t *meta, long long **steps, int *n_steps,
                            long long *incomplete, uint64_t *bytes);
void tsc_mview_free(tsc_mview_t *m);
/* 1 once tsc_mview_open succeeded. */
int tsc_mview_is_open(const tsc_mview_t *m);

/* The rank dump holding (step, layer, name) at the run's batch row b and head h, with the row and
 * head in it (*lb, *lh). b and h are not range-checked here; name must be a format name. NULL with
 * the error set when no rank holds the layer. */
tsc_dump_t *tsc_mview_pick(tsc_mview_t *m, long long step, int layer, const char *name, int b, int h, int *lb,
                           int *lh);
/* Layers of step over the pipeline ranks, ascending. */
tsc_status_t tsc_mview_layers(tsc_mview_t *m, long long step, int *layers, int cap, int *n);
/* Dataset info of the run: the rank's, with the batch and head extents of the whole run and the
 * storage summed over the ranks that hold the layer. Weights of tensor-parallel ranks are shards:
 * TSC_ERR_UNSUPPORTED. */
tsc_status_t tsc_mview_dataset_info(tsc_mview_t *m, long long step, int layer, const char *name,
                                    tsc_dump_dataset_info_t *info);
/* Every rank's validator, each message prefixed "rank R (FILE): "; the error count summed. */
int tsc_mview_validate(tsc_mview_t *m, int deep, tsc_dump_report_fn fn, void *ctx);
/* The first rank's dump (root attributes beyond the metadata are read from it). */
tsc_dump_t *tsc_mview_first(tsc_mview_t *m);
int tsc_mview_n_ranks(const tsc_mview_t *m);
int tsc_mview_rank_of(tsc_mview_t *m, long long step, int layer, int b, int h);
tsc_status_t tsc_mview_rank(const tsc_mview_t *m, int i, tsc_dump_rank_t *out);

#endif
