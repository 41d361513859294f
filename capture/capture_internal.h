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

/* qsort order of long long values. */
static inline int tsc_cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

#endif
