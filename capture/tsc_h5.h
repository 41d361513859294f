/* tsc_h5.h: small, checked HDF5 helpers every layer can use to write and read its own files
 * (dumps, replay.h5, analysis.h5).
 *
 * Every helper checks each HDF5 call and, on failure, records a detail through tsc_error_set
 * that names the file (from H5Fget_name), the object path and what was expected; nothing is
 * printed. Every public function of capture/ that calls HDF5 runs inside the library's HDF5
 * scope (tsc_h5_enter/tsc_h5_leave below): HDF5's automatic error printing is off only for the
 * duration of the call, and the host program's own handler is back in place when it returns.
 * Files are created atomically through util/tsc_file.h: tsc_h5_create writes an exclusive
 * temporary beside path and tsc_h5_commit closes and renames it onto path, so a reader sees the
 * previous file or the complete new one.
 * Number formats are tsc_format_t (kernels/tsc_formats.h); BF16, FP8-E4M3 and FP8-E5M2 map to
 * HDF5 floating-point types of their exact bit layout, so h5dump/h5py convert them on read.
 *
 *   tsc_h5_file_t f;
 *   if (tsc_h5_create(&f, "analysis.h5") != TSC_OK) return fail(tsc_error_last());
 *   hid_t g; tsc_h5_group_create(f.fid, "bias/layer_001", &g);
 *   uint64_t dims[2] = {T, D};            // data: [T, D] float, row-major
 *   tsc_h5_write_floats(g, "err", 2, dims, data, "token,feature", "ulp");
 *   H5Gclose(g); tsc_h5_commit(&f);       // or tsc_h5_abort(&f) on any error
 */
#ifndef TSC_H5_H
#define TSC_H5_H

#include "tsc_export.h"
#include "tsc_file.h"

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "tsc_formats.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The one lock around libtilescope's HDF5 calls. A libhdf5 built without its thread-safe option
 * must not be entered from two threads at once (Debian 12's is built with it; others may not be),
 * and the error-handler save/restore of tsc_h5_enter needs one owner, so every thread of the
 * library (OpenMP workers of analyze/diagnose included) takes this lock before calling HDF5. It is recursive: a function holding it may call helpers that take it again.
 * Pairs must nest; tsc_h5_unlock without a matching lock is a bug. */
TSC_API void tsc_h5_lock(void);
TSC_API void tsc_h5_unlock(void);

/* The library's HDF5 scope, for code that calls raw HDF5 (H5Dread, H5Literate, ...) besides the
 * helpers: tsc_h5_enter takes the lock (tsc_h5_lock) and, at the outermost level, saves the
 * calling program's automatic error handler (H5Eget_auto2, or H5Eget_auto1 when it was set with
 * the old API) and sets it to none; tsc_h5_leave puts the saved handler back at the outermost
 * level and unlocks. Scopes nest (every tsc_h5_* / tsc_dump_* / tsc_capture_* / tsc_synth_*
 * function enters one itself); every enter needs exactly one leave, on every return path:
 *
 *   tsc_h5_enter();
 *   hid_t ds = H5Dopen2(fid, "a/b", H5P_DEFAULT);   // a failure prints nothing
 *   if (ds < 0) { tsc_h5_leave(); return tsc_error_set(TSC_ERR_FORMAT, "..."); }
 *   ...; H5Dclose(ds);
 *   tsc_h5_leave();
 */
TSC_API void tsc_h5_enter(void);
TSC_API void tsc_h5_leave(void);

/* The HDF5 file datatype of fmt (little-endian): IEEE F64/F32 for fp64/fp32/tf32, IEEE F16 for
 * fp16, and custom floating-point types with the exact BF16 (1-8-7, bias 127), E4M3 (1-4-3,
 * bias 7) and E5M2 (1-5-2, bias 15) layouts. Returns a new type id the caller must H5Tclose,
 * or H5I_INVALID_HID with a recorded error. */
TSC_API hid_t tsc_h5_type_create(tsc_format_t fmt);
/* Recognises a stored floating-point type by its layout (size, sign/exponent/mantissa
 * positions, bias). TSC_ERR_UNSUPPORTED (naming the layout) when it is none of ours. */
TSC_API tsc_status_t tsc_h5_type_format(hid_t type, tsc_format_t *out);

/* An HDF5 file being written to a temporary name. */
typedef struct {
    hid_t fid;        /* the open file (write into it with H5* or the helpers below) */
    char path[4096];  /* final name */
    char tmp[4200];   /* temporary name, "<path>.tmp.<pid>.<n>" ("" once committed or aborted) */
    tsc_out_t out;    /* the atomic output behind it (util/tsc_file.h) */
} tsc_h5_file_t;

/* Creates the temporary "<path>.tmp.<pid>.<n>" exclusively (O_EXCL|O_NOFOLLOW: a file or link
 * planted at that name is never written through) and opens it as a new HDF5 file. TSC_ERR_IO
 * naming path when the folder is not writable, or when path is a directory, FIFO, device or
 * socket (tsc_out_check); then f->fid is H5I_INVALID_HID and nothing is left on disk. */
TSC_API tsc_status_t tsc_h5_create(tsc_h5_file_t *f, const char *path);
/* Flushes, closes and renames the temporary file onto f->path. On failure the temporary file
 * is removed, f->path left as it was, and TSC_ERR_IO is returned; f->fid is invalid afterwards
 * in both cases. */
TSC_API tsc_status_t tsc_h5_commit(tsc_h5_file_t *f);
/* Closes and removes the temporary file (after an error). Safe on a closed/failed file. */
TSC_API void tsc_h5_abort(tsc_h5_file_t *f);

/* Opens an existing file read-only (rw = 0) or read-write (rw = 1), after checking that it
 * exists (TSC_ERR_IO, with strerror), is a regular file (checked with stat() before any open, so
 * a FIFO never blocks: TSC_ERR_IO "not a regular file (a FIFO, device or socket); refused") and
 * is HDF5 (TSC_ERR_FORMAT: "not an HDF5 file"). Readers of files from elsewhere then check each
 * object before reading it (tsc_h5_check_link, tsc_h5_check_dataset; docs/SECURITY.md). */
TSC_API tsc_status_t tsc_h5_open(hid_t *fid, const char *path, int rw);

/* ---- untrusted input (docs/SECURITY.md) ------------------------------------------------------
 * A file from elsewhere may point outside itself (external links, external raw storage, virtual
 * datasets: HDF5 follows them all by default, so a dump could make tilescope copy any local file
 * into its outputs) or declare sizes its bytes do not back. Readers refuse those unless the user
 * trusts the file: the environment variable TSC_ALLOW_EXTERNAL=1 (`--trust-links` in the CLI). */

/* 1 when TSC_ALLOW_EXTERNAL=1 is set: links, external storage and virtual datasets are followed. */
TSC_API int tsc_h5_trusted(void);
/* Access property lists for reading untrusted files: external-link traversal refused (its
 * callback fails) and at most 8 soft links followed; H5P_DEFAULT when trusted. Owned by the
 * library (do not close them). Pass tsc_h5_lapl() to H5Lexists/H5Lget_info/H5Oget_info_by_name,
 * tsc_h5_dapl() to H5Dopen2 and tsc_h5_gapl() to H5Gopen2 on files from elsewhere. (HDF5 has no
 * file-access setting for this: link traversal is a property of each access.) */
TSC_API hid_t tsc_h5_lapl(void);
TSC_API hid_t tsc_h5_dapl(void);
TSC_API hid_t tsc_h5_gapl(void);
/* TSC_ERR_IO naming path unless it is a regular file (stat() only: never opens it). */
TSC_API tsc_status_t tsc_h5_check_regular(const char *path);
/* Every component of the object path "a/b/c" below loc is a hard link or a soft link that
 * resolves inside the file. TSC_ERR_FORMAT naming file and link for an external link ("is an
 * external link (to another file); refused ..."), a user-defined link or a soft link that
 * dangles or cycles ("is a soft link that does not resolve ..."); TSC_ERR_MISSING when absent.
 * Reads link metadata only (H5Lget_info). TSC_OK when trusted. */
TSC_API tsc_status_t tsc_h5_check_link(hid_t loc, const char *path);
/* The most a stored dataset may be compressed: a dataset whose storage is below its extent's
 * uncompressed bytes divided by this is refused (deflate peaks near 1032x on constant data, the
 * one legitimate way to come close; never-written chunks store 0 bytes). */
#define TSC_H5_MAX_RATIO 1000
/* An open dataset is safe to read: not virtual ("a virtual dataset ...; refused"), no external
 * raw storage ("its raw data is stored in external files; refused"), and storage of at least
 * 1/TSC_H5_MAX_RATIO of its declared bytes ("declares N bytes of data but stores M, less than
 * 1/1000 of it ..."). All TSC_ERR_FORMAT naming file and dataset. Reads the creation property
 * list and the storage size only: safe on a VDS mapped onto itself (HDF5 1.10.8 crashes only
 * when such a dataset is read). Virtual/external datasets pass when trusted. The storage size of a
 * chunked dataset is the sum over its chunk index (every chunk visited): a reader that reopens a
 * dataset per head keeps the verdict rather than asking again (the dump reader does, per handle). */
TSC_API tsc_status_t tsc_h5_check_dataset(hid_t ds);

/* Creates (or opens, when present) the group at path "a/b/c" below loc, creating the
 * intermediate groups. *out is the opened group (caller H5Gclose's it); out may be NULL. */
TSC_API tsc_status_t tsc_h5_group_create(hid_t loc, const char *path, hid_t *out);
/* 1 when the link "a/b/c" exists below loc (every component checked), else 0. */
TSC_API int tsc_h5_exists(hid_t loc, const char *path);
/* Closes an open file, group, dataset, dataspace, datatype or attribute inside the library's
 * HDF5 scope (so a failure prints nothing). Invalid ids are ignored. */
TSC_API void tsc_h5_close(hid_t id);
/* Reads the whole dataset at path below loc as doubles: *data [prod dims] (caller frees),
 * *rank <= max_rank and dims[0..rank). TSC_ERR_MISSING when absent, TSC_ERR_FORMAT for a
 * rank above max_rank, a failed read or a dataset tsc_h5_check_link/tsc_h5_check_dataset
 * refuse, TSC_ERR_UNSUPPORTED above the memory budget (tsc_mem_check), TSC_ERR_NOMEM; *data is
 * NULL on failure. */
TSC_API tsc_status_t tsc_h5_read_doubles(hid_t loc, const char *path, int max_rank, double **data, int *rank,
                                         long long *dims);

/* Options of tsc_h5_write_array; NULL means contiguous, uncompressed. */
typedef struct {
    int rank_chunk;          /* 0: contiguous; else chunk = the last rank_chunk dims whole, 1 elsewhere */
    int deflate;             /* 0 none, 1..9 deflate level (with the shuffle filter) */
    double fill;             /* fill value of never-written chunks (converted to the stored type) */
    int has_fill;            /* use fill (else HDF5's default, 0) */
} tsc_h5_write_opts_t;

/* Writes a dataset name (below loc) of stored format store_fmt with shape dims[0..rank-1],
 * from data in src_fmt (rounded nearest-even when the formats differ; stored bit for bit when
 * they are equal). Integer arrays: use tsc_h5_write_ints. Adds the string attributes
 * "dtype" (tsc_format_name), "dims" (dim_labels, comma-separated, e.g. "token,feature") and
 * "units" (may be NULL: then not written). Fails with TSC_ERR_IO naming file and dataset.
 * data: [dims...] in src_fmt, row-major. */
TSC_API tsc_status_t tsc_h5_write_array(hid_t loc, const char *name, tsc_format_t store_fmt, int rank,
                                const uint64_t *dims, const void *data, tsc_format_t src_fmt,
                                const char *dim_labels, const char *units,
                                const tsc_h5_write_opts_t *opts);
/* Same for float data stored as float32 or float64 (store_fmt), the common case. data: [dims...] */
TSC_API tsc_status_t tsc_h5_write_floats(hid_t loc, const char *name, int rank, const uint64_t *dims,
                                 const float *data, const char *dim_labels, const char *units);
TSC_API tsc_status_t tsc_h5_write_doubles(hid_t loc, const char *name, int rank, const uint64_t *dims,
                                  const double *data, const char *dim_labels, const char *units);
/* int64 array (stored as little-endian int64). data: [dims...] */
TSC_API tsc_status_t tsc_h5_write_ints(hid_t loc, const char *name, int rank, const uint64_t *dims,
                               const int64_t *data, const char *dim_labels, const char *units);

/* Attributes on obj (a file, group or dataset id); an existing attribute is replaced.
 * Strings are variable-length UTF-8 (h5py reads them as str). */
TSC_API tsc_status_t tsc_h5_attr_write_str(hid_t obj, const char *name, const char *value);
TSC_API tsc_status_t tsc_h5_attr_write_double(hid_t obj, const char *name, double value);
TSC_API tsc_status_t tsc_h5_attr_write_long(hid_t obj, const char *name, long value);
TSC_API tsc_status_t tsc_h5_attr_write_longs(hid_t obj, const char *name, const long *values, size_t n);
TSC_API tsc_status_t tsc_h5_attr_write_doubles(hid_t obj, const char *name, const double *values, size_t n);

/* The longest string attribute tilescope reads, in bytes: a longer one, or a variable-length one
 * whose descriptor in the file declares more (HDF5 allocates, zero-fills and copies the declared
 * length before it reads a byte: a forged length of 2 GiB cost seconds per read), is refused. */
#define TSC_H5_MAX_STR (1 << 20)

/* Reading attributes: TSC_ERR_MISSING when absent; TSC_ERR_FORMAT when of the wrong class.
 * Strings may be fixed-length or variable-length; value is NUL-terminated, truncated to cap.
 * A string declaring more than TSC_H5_MAX_STR bytes is TSC_ERR_FORMAT ("string attribute 'X'
 * declares N bytes, more than the 1048576 tilescope reads (a forged length); refused"), found
 * before it is read.
 * Numbers convert between integer and floating classes; a scalar reads as an array of one.
 * tsc_h5_attr_read_longs stores at most cap values and the total count in *n. */
TSC_API tsc_status_t tsc_h5_attr_read_str(hid_t obj, const char *name, char *value, size_t cap);
TSC_API tsc_status_t tsc_h5_attr_read_double(hid_t obj, const char *name, double *value);
TSC_API tsc_status_t tsc_h5_attr_read_long(hid_t obj, const char *name, long *value);
TSC_API tsc_status_t tsc_h5_attr_read_longs(hid_t obj, const char *name, long *values, size_t cap, size_t *n);

/* Names the HDF5 object for messages: "<file>:<object path>" into buf (never fails). */
TSC_API const char *tsc_h5_where(hid_t obj, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
