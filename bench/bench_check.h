/* bench_check.h: a benchmark stops at the first library call that fails, naming it and the library's
 * detail: the timing of a failed call measures nothing. */
#ifndef BENCH_CHECK_H
#define BENCH_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "tsc_status.h"

#define BENCH_OK(expr)                                                                            \
    do {                                                                                          \
        if ((expr) != TSC_OK) {                                                                   \
            fprintf(stderr, "benchmark: %s failed: %s\n", #expr, tsc_error_last());               \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

#endif
