/* tsc_dump.h: the dump, format v1 (docs/FORMAT.md §1): reader, validator and whole-dump writer.
 *
 * A dump holds attention internals of a run: root attributes with the run's geometry, and groups
 * step_<8 digits>/layer_<3 digits>/ with the datasets q, k, v, o, do, lse (and optional x, w_q,
 * w_k, w_v, w_o, tiles/<name>). A dump is one HDF5 file, or a capture-session folder (what an
 * interrupted tsc_capture session leaves: session.h5 plus one step_<8 digits>.h5 file per
 * completed step, see tsc_capture.h); tsc_dump_open reads both the same way.
 *
 * Reading streams one head of one tensor at a time (chunks are one head's [T, D]), so memory does
 * not grow with the file. Values come back as float (exact for bf16/fp16/fp8/f32 sources) or as
 * the stored bits (tsc_dump_read_raw, for bit-level work).
 *
 *   tsc_dump_t *d;
 *   if (tsc_dump_open(&d, "run.h5") != TSC_OK) { fprintf(stderr, "%s\n", tsc_error_last()); ... }
 *   const tsc_dump_meta_t *m = tsc_dump_meta(d);
 *   float *q = malloc(sizeof(float) * m->seq_len * m->head_dim);          // [T, D]
 *   tsc_dump_read(d, tsc_dump_step_at(d, 0), 1, "q", 0, 3, q);             // step, layer 1, b 0, h 3
 *   tsc_dump_close(d); free(q);
 *
 * Ownership: tsc_dump_open allocates the handle, tsc_dump_close(NULL) is a no-op. Threads: every
 * function that touches HDF5 holds the library's HDF5 lock for its duration (tsc_h5_enter,
 * tsc_h5.h), so threads may read through their own handles at once; the calls are serialised
 * (the serial HDF5 library cannot run two at a time), so for parallel work read on one thread
 * and hand the float buffers to OpenMP workers. A handle is not to be shared between threads.
 */
#ifndef TSC_DUMP_H
#define TSC_DUMP_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_formats.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSC_DUMP_FORMAT_NAME "tilescope-dump"
#define TSC_DUMP_FORMAT_VERSION 1

/* The run's metadata (root attributes of the dump; names in docs/FORMAT.md §1). */
typedef struct {
    int format_version;     /* 1 */
    int n_layer, n_head;    /* layers in the model, query heads per layer */
    int n_kv_head;          /* key/value heads (< n_head for grouped-query attention; divides n_head) */
    int head_dim;           /* D */
    int d_model;            /* C, width of x and of the weights' input side */
    int seq_len;            /* T */
    int batch;              /* B, sequences per captured step */
    int causal;             /* 1 causal mask, 0 none */
    double softmax_scale;   /* alpha (1/sqrt(D) usually) */
    int tile_q, tile_k;     /* the run's FA tile sizes (rows of Q, keys per tile); read: seq_len when absent */
    char policy[128];       /* the run's precision policy string, e.g. "bf16-torch"; read: "" when absent */
    int rank, world_size;   /* this file's rank among world_size writers */
    char producer[128];     /* "tilescope-synth 0.1.0", "capture_loop", ...; read: "unknown" when absent */
} tsc_dump_meta_t;

/* Fills m with a consistent default: 1 layer, 1 head and kv head, D 1, C 1, T 1, B 1, causal,
 * softmax_scale 1, tiles 64 x 64, policy "unknown", rank 0 of 1, producer "tilescope".
 * softmax_scale is not derived from head_dim later: set it yourself. */
TSC_API void tsc_dump_meta_init(tsc_dump_meta_t *m);
/* TSC_ERR_SHAPE naming the field when m is inconsistent (a non-positive size, n_head not a
 * multiple of n_kv_head, rank >= world_size, a non-finite or non-positive scale). */
TSC_API tsc_status_t tsc_dump_meta_check(const tsc_dump_meta_t *m);

/* The expected shape of a dataset name ("q", "k", "v", "o", "do", "lse", "x", "w_q", "w_k",
 * "w_v", "w_o"; "tiles/<stat>" gets rank 4 with dims[3] = ceil(T / tile_k)) under m: its rank
 * and dims. Weights: w_q [H*D, C], w_k/w_v [Hkv*D, C], w_o [C, H*D]. TSC_ERR_ARG for an unknown
 * name. *per_head: 1 when dims are [B, H or Hkv, T, ...] (q k v o do lse tiles/<stat>). */
TSC_API tsc_status_t tsc_dump_expected_shape(const tsc_dump_meta_t *m, const char *name, int *rank,
                                     uint64_t dims[4], int *per_head);

typedef struct tsc_dump tsc_dump_t;

/* Opens a dump (a file or a capture-session folder; a path "X" whose file is absent but whose
 * session folder "X.capture" exists opens the folder) and validates its root: the format name
 * (TSC_ERR_FORMAT), the version (TSC_ERR_VERSION: "wrote version N, this build reads 1; ...")
 * and the geometry attributes (TSC_ERR_MISSING / TSC_ERR_SHAPE; tile_q, tile_k, policy and
 * producer are optional, docs/FORMAT.md §1.1). Every root problem is collected, and when the
 * geometry is usable the validator's errors (tsc_dump_validate, quick) join them: one error,
 * "X: P" for a single problem, "X: N problems: P1; P2; ...; and M more" (the first 50 listed),
 * with the status of the first. Another format name or version fails at once. A missing file is TSC_ERR_IO, a
 * file that is not HDF5 or is truncated/corrupt TSC_ERR_FORMAT. Lists the steps (cheap: no
 * dataset is read). A dump is untrusted input (docs/SECURITY.md): before any data is read, every
 * step, layer and format dataset is checked (tsc_h5_check_link, tsc_h5_check_dataset), and a
 * dump with an external/user-defined link, an unresolved soft link, a virtual dataset, external
 * raw storage or storage under 1/1000 of its declared bytes is refused (TSC_ERR_FORMAT naming
 * the file and the object); a FIFO, device or socket (the path, session.h5 or a step file) is
 * TSC_ERR_IO, found with stat() before any open. TSC_ALLOW_EXTERNAL=1 lets links, external
 * storage and virtual datasets through. With containment on (tsc_contain.h; off by default, the
 * CLI turns it on) a forked child opens and walks the dump first, and a libhdf5 crash, hang or
 * runaway there is TSC_ERR_FORMAT naming the file and the cause. On failure *out is NULL and
 * nothing is left open. */
TSC_API tsc_status_t tsc_dump_open(tsc_dump_t **out, const char *path);
TSC_API void tsc_dump_close(tsc_dump_t *d);

TSC_API const tsc_dump_meta_t *tsc_dump_meta(const tsc_dump_t *d);
/* The path given to tsc_dump_open; 1 when it is a capture-session folder. */
TSC_API const char *tsc_dump_path(const tsc_dump_t *d);
TSC_API int tsc_dump_is_session(const tsc_dump_t *d);
/* Total bytes on disk (the file, or every file of the session folder). */
TSC_API uint64_t tsc_dump_size_bytes(const tsc_dump_t *d);

/* Steps, ascending. Only complete steps are listed; an incomplete step (no "complete" attribute,
 * or a session's step file never renamed into place) is reported by tsc_dump_incomplete_step
 * (its number, or -1 when every step is complete). */
TSC_API int tsc_dump_n_steps(const tsc_dump_t *d);
long long tsc_dump_step_at(const tsc_dump_t *d, int i);
TSC_API int tsc_dump_has_step(const tsc_dump_t *d, long long step);
long long tsc_dump_incomplete_step(const tsc_dump_t *d);

/* Layers present in step, ascending, into layers[0..cap) ; *n gets the total count.
 * TSC_ERR_MISSING when the step is absent. */
TSC_API tsc_status_t tsc_dump_layers(tsc_dump_t *d, long long step, int *layers, int cap, int *n);
TSC_API int tsc_dump_has_layer(tsc_dump_t *d, long long step, int layer);

/* Names of the datasets of step/layer ("q", "k", ..., "tiles/row_max"), in HDF5's name order,
 * into names[0..cap); *n gets the total count. TSC_ERR_MISSING when step or layer is absent. */
#define TSC_DUMP_NAME_MAX 64
TSC_API tsc_status_t tsc_dump_dataset_names(tsc_dump_t *d, long long step, int layer,
                                    char (*names)[TSC_DUMP_NAME_MAX], int cap, int *n);

/* What a dataset holds. */
typedef struct {
    int rank;
    uint64_t dims[4];
    tsc_format_t dtype;    /* the stored number format */
    int per_head;          /* 1 for [B, H|Hkv, T, ...] datasets */
    int compressed;        /* 1 when a deflate filter is set */
    uint64_t storage_bytes;/* bytes allocated on disk */
    uint64_t heads_mask;   /* bit h set when head h was stored (all set unless a capture kept only
                              some heads; heads >= 64 are reported as stored) */
} tsc_dump_dataset_info_t;

/* Presence, shape and dtype of step/layer/name. TSC_ERR_MISSING (naming file, step, layer and
 * dataset) when absent; TSC_ERR_SHAPE when its shape contradicts the metadata (the message gives
 * both shapes); TSC_ERR_UNSUPPORTED for a stored type that is none of tsc_format_t's (an integer
 * type included, named with the dataset's dtype attribute); TSC_ERR_FORMAT when the dtype
 * attribute is not a format name or names a format the storage cannot hold (docs/FORMAT.md §1.4). */
TSC_API tsc_status_t tsc_dump_dataset_info(tsc_dump_t *d, long long step, int layer, const char *name,
                                   tsc_dump_dataset_info_t *info);
TSC_API int tsc_dump_has_dataset(tsc_dump_t *d, long long step, int layer, const char *name);

/* Streaming reads of one slice into float (exact conversion from bf16/fp16/fp8/f32; f64 rounded):
 *   q, o, do:   b, h in [0,B) x [0,H)    -> out [T, D]
 *   k, v:       b, h in [0,B) x [0,Hkv)  -> out [T, D]
 *   lse:        b, h                     -> out [T]
 *   tiles/<s>:  b, h                     -> out [T, n_key_tiles]
 *   x:          b in [0,B), h ignored    -> out [T, C]
 *   w_*:        b, h ignored             -> out [out, in], whole
 * Errors as tsc_dump_dataset_info, plus TSC_ERR_ARG for b/h out of range and TSC_ERR_FORMAT when
 * HDF5 cannot read the slice (a corrupt or truncated file) or when the dataset's dtype attribute
 * names a narrower format than its storage and a value of the slice is not one of that format
 * (docs/FORMAT.md §1.4). out is unspecified on failure. */
TSC_API tsc_status_t tsc_dump_read(tsc_dump_t *d, long long step, int layer, const char *name, int b, int h,
                           float *out);
/* Same slice as stored bits (tsc_format_size(info.dtype) bytes per element, little-endian). */
TSC_API tsc_status_t tsc_dump_read_raw(tsc_dump_t *d, long long step, int layer, const char *name, int b,
                               int h, void *out);
/* Elements of one slice read by tsc_dump_read (T*D, T, T*C, out*in, ...). 0 when absent. */
TSC_API uint64_t tsc_dump_slice_elems(tsc_dump_t *d, long long step, int layer, const char *name);

/* The optional tokens of a step (docs/FORMAT.md §1.3, step datasets): the input token ids of each
 * batch row (step_S/tokens, int64 [B, T]) and, when the writer knew them, their text
 * (step_S/token_text, fixed-length UTF-8 strings [B, T] of at most TSC_DUMP_TOKEN_BYTES bytes).
 * tsc_dump_has_tokens: 0 none, 1 ids, 2 ids and text. tsc_dump_read_tokens reads batch row b:
 * ids [T] and/or text [T] (either may be NULL), each text in display form: valid UTF-8 as stored,
 * a control character as \n, \t, \r or \xNN, a byte that is not UTF-8 as \xNN, a character that
 * reorders or breaks the text around it (C1 controls, bidi controls and marks, U+2028, U+2029) as
 * \uXXXX (so it can be shown as it is; HTML still needs escaping). Errors: TSC_ERR_MISSING (no tokens or no text),
 * TSC_ERR_SHAPE, TSC_ERR_FORMAT (not integers, not fixed-length strings, unreadable), TSC_ERR_ARG. */
#define TSC_DUMP_TOKEN_BYTES 32
#define TSC_DUMP_TOKEN_TEXT_CAP (4 * TSC_DUMP_TOKEN_BYTES + 1)
TSC_API int tsc_dump_has_tokens(tsc_dump_t *d, long long step);
TSC_API tsc_status_t tsc_dump_read_tokens(tsc_dump_t *d, long long step, int b, int64_t *ids,
                                          char (*text)[TSC_DUMP_TOKEN_TEXT_CAP]);

/* A run of many ranks (a manifest or a folder of rank dumps, docs/FORMAT.md §1.8) opened as one
 * dump: its ranks, in rank order. tsc_dump_n_ranks is 0 for a dump of one file or session. */
typedef struct {
    int rank;                   /* the rank dump's rank attribute */
    int dp_rank, tp_rank, pp_rank; /* its data-, tensor- and pipeline-parallel coordinates */
    char file[256];             /* its file's name, in the manifest's folder */
    int batch0, batch_n;        /* the run's batch rows it holds: [batch0, batch0 + batch_n) */
    int head0, head_n;          /* the run's query heads it holds */
    uint64_t bytes;             /* its size on disk */
} tsc_dump_rank_t;
TSC_API int tsc_dump_n_ranks(const tsc_dump_t *d);
TSC_API tsc_status_t tsc_dump_rank(const tsc_dump_t *d, int i, tsc_dump_rank_t *out);
/* The rank holding the run's batch row b and query head h (its index for tsc_dump_rank), or -1
 * when d is not a run of many ranks. The pipeline rank is the one holding layer (-1: the first). */
TSC_API int tsc_dump_rank_of(tsc_dump_t *d, long long step, int layer, int b, int h);

/* Root attributes beyond the metadata (e.g. synth's planted_heads): integer arrays and strings.
 * TSC_ERR_MISSING when absent. *n gets the total count; at most cap values stored. */
TSC_API tsc_status_t tsc_dump_attr_longs(tsc_dump_t *d, const char *name, long *values, size_t cap, size_t *n);
TSC_API tsc_status_t tsc_dump_attr_str(tsc_dump_t *d, const char *name, char *value, size_t cap);

/* Validator: walks every step, layer and dataset (reading every chunk when deep = 1, which
 * catches corrupt data blocks) and calls report(ctx, severity, message) for each problem:
 * severity 2 error (a missing q/k/v, a wrong shape, an unreadable chunk, a stored type that is not
 * floating-point, a dtype attribute that contradicts the storage (its values checked only when
 * deep), a step group without the attribute 'complete'), 1 warning (a missing o/do/lse, an
 * incomplete step (complete = 0, or the writer stopped), a step without layers). Returns the number
 * of errors (>= 0). report may be NULL (count only). */
typedef void (*tsc_dump_report_fn)(void *ctx, int severity, const char *message);
TSC_API int tsc_dump_validate(tsc_dump_t *d, int deep, tsc_dump_report_fn report, void *ctx);

/* ---------------------------------------------------------------------------------------------
 * Writer of whole dumps (synth, tests, export): writes an exclusive temporary "<path>.tmp.<pid>.<n>"
 * (tsc_h5_create) and renames it onto path at tsc_dump_writer_close, so path is either
 * absent/old or complete.
 *
 *   tsc_dump_writer_t *w;
 *   tsc_dump_writer_open(&w, "synth.h5", &meta, NULL);
 *   uint64_t dims[4] = {B, H, T, D};
 *   tsc_dump_writer_put(w, 100, 1, "q", 4, dims, TSC_FMT_FP32, q_f32, TSC_FMT_BF16); // [B,H,T,D]
 *   tsc_dump_writer_step_done(w, 100);      // marks step 100 complete
 *   tsc_dump_writer_close(w);               // rename; tsc_dump_writer_abort(w) on error
 */
typedef struct {
    int deflate;               /* 0 uncompressed (default), 1..9 deflate level with shuffle */
    int fill_nan;              /* 1: never-written head chunks read as NaN (capture with head
                                  selection); 0: HDF5's default fill (0) */
} tsc_dump_write_opts_t;

typedef struct tsc_dump_writer tsc_dump_writer_t;

/* Creates the temporary file and writes the root attributes of meta (checked by
 * tsc_dump_meta_check first). opts may be NULL. TSC_ERR_IO naming path when not writable. */
TSC_API tsc_status_t tsc_dump_writer_open(tsc_dump_writer_t **out, const char *path,
                                  const tsc_dump_meta_t *meta, const tsc_dump_write_opts_t *opts);
/* Writes dataset name of step/layer (groups created as needed) with shape dims[0..rank) that
 * must equal tsc_dump_expected_shape (TSC_ERR_SHAPE otherwise), from data in src_fmt, stored as
 * store_fmt (bit for bit when equal; rounded nearest-even otherwise). Per-head datasets are
 * chunked one head's slice per chunk. Writing the same dataset twice is TSC_ERR_ARG.
 * data: [dims...] row-major in src_fmt. */
TSC_API tsc_status_t tsc_dump_writer_put(tsc_dump_writer_t *w, long long step, int layer, const char *name,
                                 int rank, const uint64_t *dims, tsc_format_t src_fmt,
                                 const void *data, tsc_format_t store_fmt);
/* Streaming form for per-head datasets: creates the dataset (full shape dims, store_fmt) on the
 * first call and writes one head's slice (b, h): data [T, D] (or [T] for lse, [T, n_tiles] for
 * tiles/<stat>) in src_fmt. Heads never written read as the fill value. */
TSC_API tsc_status_t tsc_dump_writer_put_head(tsc_dump_writer_t *w, long long step, int layer,
                                      const char *name, int rank, const uint64_t *dims, int b, int h,
                                      tsc_format_t src_fmt, const void *data, tsc_format_t store_fmt);
/* Writes a root attribute (integer list / string) beyond the metadata (e.g. planted_heads). */
TSC_API tsc_status_t tsc_dump_writer_attr_longs(tsc_dump_writer_t *w, const char *name, const long *v, size_t n);
TSC_API tsc_status_t tsc_dump_writer_attr_str(tsc_dump_writer_t *w, const char *name, const char *value);
/* Writes step's tokens: ids [B*T] (batch row major), text NULL or [B*T] NUL-terminated UTF-8
 * strings (NULL entries: empty), each kept to TSC_DUMP_TOKEN_BYTES bytes, cut at a character
 * boundary. Once per step; before tsc_dump_writer_step_done. */
TSC_API tsc_status_t tsc_dump_writer_put_tokens(tsc_dump_writer_t *w, long long step, const int64_t *ids,
                                                const char *const *text);
/* Marks step complete (attribute complete = 1 on its group, written after its datasets). */
TSC_API tsc_status_t tsc_dump_writer_step_done(tsc_dump_writer_t *w, long long step);
/* Flushes the file to disk (H5Fflush). */
TSC_API tsc_status_t tsc_dump_writer_flush(tsc_dump_writer_t *w);
/* Closes and renames onto the final path; frees w (also on failure, then the temporary file is
 * removed). */
TSC_API tsc_status_t tsc_dump_writer_close(tsc_dump_writer_t *w);
/* Closes, removes the temporary file, frees w. NULL is a no-op. */
TSC_API void tsc_dump_writer_abort(tsc_dump_writer_t *w);

#ifdef __cplusplus
}
#endif
#endif
