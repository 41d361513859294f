/* tsc_manifest.h: a run of many ranks as one dump (docs/FORMAT.md §1.8, docs/DISTRIBUTED.md).
 *
 * A manifest is a small HDF5 file beside the rank dumps of one run (or of one flight trigger):
 * the dump root attributes of the whole run (batch and heads summed over the parallel
 * coordinates) and a table of ranks, each with its file's name (in the manifest's folder) and its
 * coordinates (data, tensor and pipeline parallel rank). tsc_dump_open opens a manifest, or a
 * folder of rank dumps, as one dump: batch row b and head h are read from the rank that holds
 * them. */
#ifndef TSC_MANIFEST_H
#define TSC_MANIFEST_H

#include "tsc_export.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the manifest of the n rank dumps rank_paths[0..n) at path (atomically). Every rank dump
 * is opened and validated (as tsc_dump_open), must lie in path's folder, and must agree with the
 * others (geometry, steps, layers, dtypes; world_size = n); a problem names the rank's file.
 * Order does not matter: ranks are sorted by their rank attribute. */
TSC_API tsc_status_t tsc_manifest_write(const char *path, const char *const *rank_paths, int n);

/* Writes DIR/manifest.h5 over every rank dump in dir (files *.h5 with a rank attribute, the
 * manifest itself excluded). TSC_ERR_MISSING naming the ranks absent from 0..world_size-1. */
TSC_API tsc_status_t tsc_manifest_write_dir(const char *dir);

#ifdef __cplusplus
}
#endif

#endif
