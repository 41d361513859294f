/* capture_internal.h: helpers shared by the files of capture/ (not installed, not exported). */
#ifndef TSC_CAPTURE_INTERNAL_H
#define TSC_CAPTURE_INTERNAL_H

#include "tsc_h5.h"

/* The body of a public entry point that calls HDF5: evaluates expr (of type T) inside the
 * library's HDF5 scope (tsc_h5_enter/tsc_h5_leave: the lock held, HDF5's error printing off)
 * and returns its value. The work lives in a static function, so every return path of it
 * leaves the scope. */
#define TSC_H5_SCOPED(T, expr)          \
    do {                                \
        tsc_h5_enter();                 \
        T tsc_scoped_r_ = (expr);       \
        tsc_h5_leave();                 \
        return tsc_scoped_r_;           \
    } while (0)

/* The same for a statement without a value. */
#define TSC_H5_SCOPED_VOID(stmt) \
    do {                         \
        tsc_h5_enter();          \
        stmt;                    \
        tsc_h5_leave();          \
    } while (0)

/* In a child just forked by the thread holding tsc_h5_lock (contain.c): a fresh, unlocked lock. */
void tsc_h5_lock_child_reset(void);

/* tsc_h5_check_dataset, also giving the storage size it measured (H5Dget_storage_size, which
 * walks every chunk of the dataset) in *stored, or UINT64_MAX when it measured none (a virtual
 * or external dataset let through as trusted). stored may be NULL. */
tsc_status_t tsc_h5_check_dataset_stored(hid_t ds, uint64_t *stored);

/* tsc_dump_open without the contained pre-check (dump.c): what the pre-check's child runs. */
struct tsc_dump;
tsc_status_t tsc_dump_open_direct(struct tsc_dump **out, const char *path);
/* The open dump's root file (the dump, or a session's session.h5) and its session folder ("" for
 * a file dump). */
hid_t tsc_dump_root_id(const struct tsc_dump *d);
const char *tsc_dump_session_dir(const struct tsc_dump *d);
/* The contained pre-check when containment is on (contain.c), else TSC_OK. */
tsc_status_t tsc_contain_before_open(const char *path);
/* The pre-check's deadline in seconds for a dump of size bytes (contain.c): 2 s + 0.5 s per MiB
 * of the first 64 MiB + 10 s per GiB beyond, or TSC_CONTAIN_TIMEOUT when set (docs/SECURITY.md). */
double tsc_contain_deadline_s(uint64_t size);

/* One root attribute for tsc_capture_root_attrs: a string (str != NULL) or else an integer
 * (is_long) or a double (num). */
typedef struct {
    const char *name;
    const char *str;
    int is_long;
    double num;
} tsc_capture_attr_t;
/* Adds root attributes to an open session before its first step (TSC_ERR_ARG after it): they
 * land in session.h5, rewritten as a copy renamed into place, and so in the packed dump.
 * (flight.c: the trigger of a flight dump.) */
struct tsc_capture;
tsc_status_t tsc_capture_root_attrs(struct tsc_capture *s, const tsc_capture_attr_t *a, int n);

/* qsort order of long long values. */
static inline int tsc_cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

#endif
