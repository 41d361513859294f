/* tsc_status.h: status codes and error details shared by every layer of libtilescope.
 *
 * Library functions never exit and never print; they return a tsc_status_t and record a
 * human-readable detail (naming the file, the object and what was expected) that
 * tsc_error_last() returns until the next error on the same thread.
 *
 *   tsc_status_t st = tsc_dump_open(&d, "run.h5");
 *   if (st != TSC_OK) {
 *       fprintf(stderr, "tilescope: %s\n", tsc_error_last());
 *       return 1;
 *   }
 */
#ifndef TSC_STATUS_H
#define TSC_STATUS_H

#include "tsc_export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Under clang the type itself is warn_unused_result: a status dropped on the floor is a warning (an error
 * with TSC_WERROR), so every status is handled or cast to (void) where ignoring it is right, with a comment
 * saying why. GCC accepts the attribute on functions only. */
#if defined(__clang__)
#define TSC_STATUS_MUST_USE __attribute__((warn_unused_result))
#else
#define TSC_STATUS_MUST_USE
#endif

typedef enum TSC_STATUS_MUST_USE {
    TSC_OK = 0,
    TSC_ERR_ARG,         /* a bad argument (a flag value, a policy string, a NULL pointer) */
    TSC_ERR_IO,          /* a file could not be opened, read, written or renamed */
    TSC_ERR_FORMAT,      /* a file is not what it claims (not HDF5, wrong format name, corrupt) */
    TSC_ERR_VERSION,     /* a format version this build does not read */
    TSC_ERR_MISSING,     /* a required dataset, attribute or group is absent */
    TSC_ERR_SHAPE,       /* a shape contradicts the metadata or another argument */
    TSC_ERR_NONFINITE,   /* NaN or Inf where finite values are required */
    TSC_ERR_NOMEM,       /* an allocation failed */
    TSC_ERR_UNSUPPORTED, /* a valid request this build cannot serve (a dtype, a GPU feature) */
    TSC_ERR_EXTERNAL,    /* an external program or library failed (gnuplot, LAPACK, cairo) */
    TSC_ERR_INTERNAL     /* a broken invariant: a bug in tilescope */
} tsc_status_t;

/* A short, constant name of the status ("I/O error", ...). Never NULL. */
TSC_API const char *tsc_status_str(tsc_status_t st);

/* Records a printf-style detail for st on this thread and returns st, so callers can write
 * `return tsc_error_set(TSC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));`. */
TSC_API tsc_status_t tsc_error_set(tsc_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefixes the current detail with more context ("reading step 3: " + old detail); returns st. */
TSC_API tsc_status_t tsc_error_wrap(tsc_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The detail of the last error recorded on this thread ("" when none). Valid until the next
 * tsc_error_set/tsc_error_wrap on this thread. */
TSC_API const char *tsc_error_last(void);

/* Forgets the last error detail of this thread. */
TSC_API void tsc_error_clear(void);

/* Invariants, as SQLite's ALWAYS and Redis's serverAssert: TSC_INVARIANT(cond) evaluates cond once, in every
 * build; when it is false the process prints "tilescope: internal error at FILE:LINE: cond is false (a bug in
 * tilescope)" on stderr and aborts. For what cannot happen by construction (a validated policy formatted into
 * TSC_POLICY_STR_MAX bytes, a row a table's own test holds); never for what a file, a flag or the machine can
 * cause: that is a status. */
#define TSC_INVARIANT(cond) ((cond) ? (void)0 : tsc_invariant_failed(#cond, __FILE__, __LINE__))
TSC_API void tsc_invariant_failed(const char *cond, const char *file, int line) __attribute__((noreturn));

#ifdef __cplusplus
}
#endif
#endif
