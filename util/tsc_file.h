/* tsc_file.h: output files that are complete or absent. The one implementation of
 * "write a temporary name beside the target, check every write, rename over the target".
 *
 *   tsc_out_t o;
 *   if (tsc_out_open(&o, "out/summary.json") != TSC_OK) return tsc_error_last();
 *   fputs(text, o.fp);                      // or write o.tmp by name (HDF5, gnuplot, cairo)
 *   if (tsc_out_commit(&o) != TSC_OK) ...;  // flush, close, rename; or the temporary is removed
 *
 * The temporary is "<path>.tmp.<pid>.<n>", created with O_CREAT|O_EXCL|O_NOFOLLOW, so a file or
 * symbolic link planted at that name is never written through. The target must be a regular
 * file or absent: a directory, FIFO, device or socket is refused before anything is written.
 * Open temporaries are registered so tsc_out_cleanup_install() can remove them on SIGINT,
 * SIGTERM and SIGHUP. Functions return TSC_ERR_IO (naming the file and strerror) on failure and
 * leave the target untouched. */
#ifndef TSC_FILE_H
#define TSC_FILE_H

#include <stdio.h>

#include "tsc_export.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char *path;   /* the final name (owned copy) */
    char *tmp;    /* the temporary name (owned), NULL when not open */
    FILE *fp;     /* a stream on the temporary; NULL for by-name writers (tsc_out_open_name) */
    int slot;     /* registry slot for signal cleanup, -1 if none */
} tsc_out_t;

/* TSC_OK when path may be written as an output: it does not exist, or it is a regular file
 * (or a link to one). TSC_ERR_IO naming the path otherwise (a directory, FIFO, device...). */
TSC_API tsc_status_t tsc_out_check(const char *path);

/* Creates the temporary exclusively beside path and opens o->fp on it (mode "wb").
 * On failure o owns nothing. */
TSC_API tsc_status_t tsc_out_open(tsc_out_t *o, const char *path);

/* Like tsc_out_open, but closes the stream: for writers that open the temporary by name
 * themselves (HDF5, cairo, gnuplot). The file o->tmp exists, empty, until commit or abort. */
TSC_API tsc_status_t tsc_out_open_name(tsc_out_t *o, const char *path);

/* Flushes and closes o->fp (if open) checking every step, then renames the temporary over
 * the target. On any failure the temporary is removed, the target left as it was, and
 * TSC_ERR_IO names the file. o owns nothing afterwards either way. */
TSC_API tsc_status_t tsc_out_commit(tsc_out_t *o);

/* Closes and removes the temporary; the target is untouched. NULL or a closed o is a no-op. */
TSC_API void tsc_out_abort(tsc_out_t *o);

/* Writes n bytes to path atomically (tsc_out_open + fwrite + commit). */
TSC_API tsc_status_t tsc_out_write_all(const char *path, const void *data, size_t n);

/* ---- reading ---- */

/* TSC_OK when path names a regular file (or a link to one). Otherwise TSC_ERR_IO naming the path:
 * "PATH: cannot open: <strerror>" when stat fails, "PATH: not a regular file (a FIFO, device or
 * socket); refused" for anything else (opening a FIFO for reading blocks forever). */
TSC_API tsc_status_t tsc_file_check_regular(const char *path);

/* The largest text input (JSON, training log) tsc_file_read_text accepts: 1 GiB, or the memory
 * budget (util/tsc_mem.h) when TSC_MAX_MEMORY is set, and never above the budget. */
TSC_API unsigned long long tsc_file_text_limit(void);

/* Reads a whole regular file into *buf (malloc'ed, NUL-terminated; *len excludes the NUL).
 * Refuses non-regular files (checked with stat, then fstat on a non-blocking descriptor, so a
 * FIFO swapped in between never blocks) and files above tsc_file_text_limit() (TSC_ERR_UNSUPPORTED
 * "PATH: N bytes, above the limit of M bytes for a text input; raise it with --max-memory or TSC_MAX_MEMORY=<bytes>
 * if the input is trusted"), also when the file grows while read. */
TSC_API tsc_status_t tsc_file_read_text(const char *path, char **buf, size_t *len);

/* ---- output folders: writer locks and run ids ---- */

/* Locks DIR/NAME for one writer: opens it (created if missing, mode 0644, never through a
 * symbolic link), takes flock(LOCK_EX|LOCK_NB) and writes this process's pid into it. On success
 * *fd holds the lock until tsc_dir_unlock. When another process holds it: TSC_ERR_IO
 * "DIR/NAME is locked by pid N", *fd = -1 and holder (when not NULL) receives that process's pid
 * as it wrote it ("?" when unreadable), for the caller's own sentence. Any other failure
 * (cannot open or lock; DIR/NAME removed or replaced while locking): TSC_ERR_IO naming the file,
 * holder "". The lock is the kernel's: a crashed writer releases it. */
TSC_API tsc_status_t tsc_dir_lock(const char *dir, const char *name, int *fd, char *holder, size_t holder_size);

/* Releases a lock from tsc_dir_lock; with remove_file, DIR/NAME is removed first (while still
 * held). fd < 0 is a no-op. */
TSC_API void tsc_dir_unlock(const char *dir, const char *name, int fd, int remove_file);

/* A fresh run id: 128 random bits from getrandom(2) (else /dev/urandom) as 32 lower-case hex
 * digits and a NUL in out. TSC_ERR_IO when neither source gives 16 bytes. */
#define TSC_RUN_ID_LEN 32
TSC_API tsc_status_t tsc_run_id_new(char out[TSC_RUN_ID_LEN + 1]);
/* 1 when s is a run id: TSC_RUN_ID_LEN lower-case hex digits, nothing after. */
TSC_API int tsc_run_id_valid(const char *s);

/* Installs handlers for SIGINT, SIGTERM and SIGHUP that remove every open temporary, then
 * re-raise the signal with its default action. For programs (the CLI), not libraries. */
TSC_API void tsc_out_cleanup_install(void);

#ifdef __cplusplus
}
#endif
#endif
