#include "tsc_status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One detail buffer per thread: OpenMP workers reporting errors must not overwrite each other. */
static _Thread_local char tsc_err_buf[8192];  /* room for a dump's list of problems (capture/dump.c) */

const char *tsc_status_str(tsc_status_t st) {
    switch (st) {
    case TSC_OK: return "ok";
    case TSC_ERR_ARG: return "bad argument";
    case TSC_ERR_IO: return "I/O error";
    case TSC_ERR_FORMAT: return "bad file format";
    case TSC_ERR_VERSION: return "unsupported format version";
    case TSC_ERR_MISSING: return "missing data";
    case TSC_ERR_SHAPE: return "shape mismatch";
    case TSC_ERR_NONFINITE: return "non-finite value";
    case TSC_ERR_NOMEM: return "out of memory";
    case TSC_ERR_UNSUPPORTED: return "unsupported";
    case TSC_ERR_EXTERNAL: return "external tool failed";
    case TSC_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

tsc_status_t tsc_error_set(tsc_status_t st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tsc_err_buf, sizeof tsc_err_buf, fmt, ap);
    va_end(ap);
    return st;
}

tsc_status_t tsc_error_wrap(tsc_status_t st, const char *fmt, ...) {
    char old[sizeof tsc_err_buf];
    memcpy(old, tsc_err_buf, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tsc_err_buf, sizeof tsc_err_buf, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof tsc_err_buf)
        snprintf(tsc_err_buf + n, sizeof tsc_err_buf - (size_t)n, "%s", old);
    return st;
}

const char *tsc_error_last(void) { return tsc_err_buf; }

void tsc_error_clear(void) { tsc_err_buf[0] = '\0'; }

void tsc_invariant_failed(const char *cond, const char *file, int line) {
    /* the source's folder and name only ("kernels/policy.c"), whatever path the compiler was given */
    const char *f = file, *a = NULL, *b = NULL;
    for (const char *c = file; *c; c++)
        if (*c == '/') a = b, b = c;
    if (a) f = a + 1;
    else if (b) f = b + 1;
    fprintf(stderr, "tilescope: internal error at %s:%d: %s is false (a bug in tilescope)\n", f, line, cond);
    fflush(stderr);
    abort();
}
