/* tsc_capture.h: the host capture API: a training program hands attention tensors to a capture
 * session, which keeps the sampled steps/layers/heads in a dump (format v1, tsc_dump.h).
 *
 * Crash safety (SIGKILL at any moment): an HDF5 file killed while open can be unreadable (its
 * metadata cache and superblock are written lazily), so a session never keeps a file open across
 * steps. It writes a session folder "<path>.capture/": session.h5 (root attributes, written once
 * at open) and one file step_<8 digits>.h5 per step, written to a temporary name and renamed
 * into place when the step ends (rename is atomic). A killed session therefore leaves the
 * completed steps readable and at most one temporary file, which tsc_dump_open reports as the
 * incomplete step. tsc_capture_close packs the folder into the single file path (temporary name
 * + rename) and removes the folder, unless opts.keep_session is set. tsc_dump_open(path) opens
 * the file, or the folder "<path>.capture" when the file is absent.
 * One writer per folder: the session flock()s "<path>.capture/session.lock" (holding its pid)
 * from open to close, so a second capture of the same path, or a pack of the live folder, fails
 * with "session folder DIR is in use (locked by pid N)"; the lock dies with its process.
 *
 *   tsc_capture_t *cap; tsc_capture_opts_t o = {.select = "steps=0:1000:10,layers=1"};
 *   tsc_capture_open(&cap, "run.h5", &meta, &o);                  // meta: tsc_dump_meta_t
 *   for (step...) { tsc_capture_step_begin(cap, step);
 *       tsc_capture_put(cap, layer, "q", TSC_FMT_BF16, 4, dims, q_host);   // [B, H, T, D]
 *       tsc_capture_step_end(cap); }
 *   tsc_capture_close(cap);
 *
 * Every function returns TSC_OK or an error with a recorded detail (tsc_error_last); after an
 * error the session stays usable for later steps (the failed step is dropped).
 */
#ifndef TSC_CAPTURE_H
#define TSC_CAPTURE_H

#include "tsc_export.h"

#include <stdint.h>

#include "tsc_dump.h"
#include "tsc_formats.h"
#include "tsc_select.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *select;      /* sampling spec (tsc_select.h), NULL = everything. Heads not selected
                                are not written (their chunks read as NaN); k/v keep the kv heads
                                the selected query heads use. */
    int deflate;             /* 0 none (default), 1..9 lossless deflate + shuffle */
    int store_fmt;           /* -1 or 0 (default): store each tensor in the format handed over;
                                else a tsc_format_t + 1 to convert to (e.g. TSC_FMT_BF16 + 1) */
    int keep_session;        /* 1: tsc_capture_close leaves the session folder instead of packing */
} tsc_capture_opts_t;

typedef struct tsc_capture tsc_capture_t;

/* Creates the session folder "<path>.capture" (TSC_ERR_IO when it exists with a session.h5 in
 * it already, or cannot be created, or when path itself is a directory, FIFO or device, which
 * could never receive the packed dump) and writes session.h5 from meta (tsc_dump_meta_check'ed).
 * A stale folder from a killed session is not overwritten: remove it or pack it first.
 * opts may be NULL. On failure *out is NULL. */
TSC_API tsc_status_t tsc_capture_open(tsc_capture_t **out, const char *path, const tsc_dump_meta_t *meta,
                              const tsc_capture_opts_t *opts);

/* Records this rank's parallel coordinates (root attributes dp_rank, dp_size, tp_rank, tp_size,
 * pp_rank, pp_size; docs/FORMAT.md §1.8): without them a rank of a run of many is taken as purely
 * data-parallel (dp_rank = rank). Before the first step; each rank in [0, size) and the sizes'
 * product the metadata's world_size, else TSC_ERR_ARG naming the axis. */
TSC_API tsc_status_t tsc_capture_parallel(tsc_capture_t *s, int dp_rank, int dp_size, int tp_rank, int tp_size,
                                          int pp_rank, int pp_size);

/* 1 when the sampling spec keeps step (and layer, unless layer < 0): lets a caller skip the
 * device-to-host copy of tensors that would be dropped. */
TSC_API int tsc_capture_wants(const tsc_capture_t *s, long long step, int layer);

/* Starts step (must be greater than the previous step: TSC_ERR_ARG otherwise). A step the spec
 * does not keep makes the following puts no-ops. A step begun while another is open discards
 * the open one. */
TSC_API tsc_status_t tsc_capture_step_begin(tsc_capture_t *s, long long step);

/* Hands over one tensor of layer (host memory; copied before return). name and shape as in
 * tsc_dump.h (q/o/do [B, H, T, D], k/v [B, Hkv, T, D], lse [B, H, T] f32, x [B, T, C],
 * w_q [H*D, C], w_k/w_v [Hkv*D, C], w_o [C, H*D], tiles/<stat> [B, H, T, n_key_tiles]);
 * fmt TSC_FMT_FP32, TSC_FMT_BF16 or TSC_FMT_FP16 (others accepted too); stored in fmt, or in
 * opts.store_fmt when set (lse is always stored as fp32). TSC_ERR_SHAPE when dims
 * contradict the metadata, TSC_ERR_ARG outside a step. A layer not kept is skipped (TSC_OK). */
TSC_API tsc_status_t tsc_capture_put(tsc_capture_t *s, int layer, const char *name, tsc_format_t fmt,
                             int rank, const uint64_t *dims, const void *data);

/* Hands over the step's input tokens (optional): ids [B*T] and their text (NULL, or [B*T] UTF-8
 * strings), as tsc_dump_writer_put_tokens; a step not kept makes it a no-op. */
TSC_API tsc_status_t tsc_capture_put_tokens(tsc_capture_t *s, const int64_t *ids, const char *const *text);
/* The same for a byte-level vocabulary (a plain-text source): each id's byte as its text. */
TSC_API tsc_status_t tsc_capture_put_byte_tokens(tsc_capture_t *s, const int64_t *ids);

/* Finishes the step: marks it complete, closes its file and renames it into place. After this
 * returns TSC_OK the step survives a SIGKILL of the process. */
TSC_API tsc_status_t tsc_capture_step_end(tsc_capture_t *s);

/* Number of steps completed so far. */
TSC_API int tsc_capture_n_steps(const tsc_capture_t *s);

/* Ends the session: discards an open step, packs the folder into path (unless keep_session) and
 * frees s (also on failure; the folder is then left in place and the detail says why). */
TSC_API tsc_status_t tsc_capture_close(tsc_capture_t *s);

/* Packs a session folder (left by a killed process or keep_session) into one dump file out_path
 * (an exclusive temporary renamed into place, util/tsc_file.h: out_path is refused when it is a
 * directory, FIFO or device); removes the folder when remove_folder is 1. Takes the folder's lock
 * first: a live session (its capture still running) is refused. Removes only what the session
 * wrote: session.h5, session.lock, the step_<8 digits>.h5 files it packed and the temporary of the
 * incomplete step; other files stay, and then so does the folder (TSC_ERR_IO after packing). */
TSC_API tsc_status_t tsc_capture_pack(const char *session_dir, const char *out_path, int remove_folder);
/* Removes a closed session folder that will not be packed (a failed import's temporary): what
 * tsc_capture_pack with remove_folder removes, nothing else; taken under the session's lock. */
TSC_API tsc_status_t tsc_capture_discard(const char *session_dir);

#ifdef __cplusplus
}
#endif
#endif
