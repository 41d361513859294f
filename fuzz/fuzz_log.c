/* fuzz_log.c: the training-log reader (tsc_log.h) on the input: nanoGPT console lines or a CSV/TSV
 * table with a header. An accepted log is read back the way the figures read it. */
#include "fuzz_target.h"

#include <math.h>

#include "tsc_log.h"

TSC_FUZZ_TARGET(log) {
    tsc_log_t *lg = NULL;
    if (tsc_log_parse((const char *)data, size, "fuzz.log", NULL, &lg) == TSC_OK) {
        TSC_FUZZ_CHECK(lg && lg->n_rows > 0 && lg->n_cols > 0 && lg->n_cols <= TSC_LOG_MAX_COLS,
                       "accepted log with %zu rows, %d columns", lg ? lg->n_rows : 0, lg ? lg->n_cols : -1);
        double *x = malloc(lg->n_rows * sizeof *x), *y = malloc(lg->n_rows * sizeof *y);
        for (int c = 0; c < lg->n_cols && x && y; c++) {
            TSC_FUZZ_CHECK(tsc_log_column(lg, lg->cols[c]) >= 0, "column '%s' not found by name", lg->cols[c]);
            size_t k = tsc_log_series(lg, c, x, y);
            TSC_FUZZ_CHECK(k <= lg->n_rows, "series longer than the log");
            for (size_t i = 0; i < k; i++) TSC_FUZZ_CHECK(isfinite(x[i]) && isfinite(y[i]), "non-finite point");
        }
        free(x);
        free(y);
        tsc_log_free(lg);
    } else {
        TSC_FUZZ_CHECK(lg == NULL, "a rejected log left a result");
    }
    return 0;
}
