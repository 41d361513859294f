/* tsc_log.h: training logs (loss curves) for figures and reports (docs/FORMAT.md §4).
 *
 * Two kinds of text file are read, told apart by their first meaningful line:
 *   - a table: CSV (comma) or TSV (tab) with a header row naming the columns; one column must be
 *     `step`; the others are free (train_loss, val_loss, lr, grad_norm, ...). Every later row has
 *     the header's number of fields, each a number, or empty / `nan` / `NA` for "not logged".
 *   - nanoGPT console output: `step 250: train loss 4.3127, val loss 4.3221` (evaluation lines,
 *     columns train_loss and val_loss) and `iter 10: loss 9.1234, time 35.1ms, mfu 12.3%`
 *     (iteration lines, columns iter_loss, time_ms, mfu). Other lines (banners, "saving
 *     checkpoint", ...) are ignored; a line that starts like one of the two but does not parse is
 *     an error.
 * Lines starting with `#` and blank lines are skipped in both. Errors name the file and the line
 * ("run.csv:17: expected 5 fields, found 4").
 *
 *   tsc_log_t *lg;
 *   if (tsc_log_read("train.csv", "bf16", &lg) != TSC_OK) puts(tsc_error_last());
 *   int c = tsc_log_column(lg, "val_loss");                 // -1 when absent
 *   for (size_t r = 0; r < lg->n_rows; r++) use(lg->step[r], lg->values[r * lg->n_cols + c]);
 *   tsc_log_free(lg);
 */
#ifndef TSC_LOG_H
#define TSC_LOG_H

#include "tsc_export.h"

#include <stddef.h>

#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSC_LOG_MAX_COLS 64

typedef enum { TSC_LOG_CSV = 0, TSC_LOG_TSV, TSC_LOG_NANOGPT } tsc_log_kind_t;

typedef struct {
    char name[64];              /* the run's display name (as given, else the file name) */
    char path[1024];            /* the file it came from ("" when parsed from memory) */
    tsc_log_kind_t kind;
    int n_cols;                 /* value columns, `step` excluded */
    char *cols[TSC_LOG_MAX_COLS];  /* their names */
    size_t n_rows;
    double *step;               /* [n_rows] f64 */
    double *values;             /* [n_rows, n_cols] f64 row-major; NaN = not logged in that row */
} tsc_log_t;

/* Reads path. name may be NULL (then the file's base name). On success *out is the caller's
 * (tsc_log_free). Errors: TSC_ERR_IO (cannot open/read, with strerror), TSC_ERR_FORMAT (a
 * malformed line, naming path:line and what was expected; an empty log), TSC_ERR_NOMEM. *out is
 * NULL on failure. */
TSC_API tsc_status_t tsc_log_read(const char *path, const char *name, tsc_log_t **out);

/* The same from text[len] in memory; where names the source in messages. */
TSC_API tsc_status_t tsc_log_parse(const char *text, size_t len, const char *where, const char *name, tsc_log_t **out);

/* Parses "NAME=FILE" (a --log argument): NAME is the display name; a plain FILE names the run
 * after the file. Errors as tsc_log_read, TSC_ERR_ARG for an empty name or file. */
TSC_API tsc_status_t tsc_log_read_spec(const char *spec, tsc_log_t **out);

TSC_API void tsc_log_free(tsc_log_t *lg);

/* Index of the value column called name, or -1. */
TSC_API int tsc_log_column(const tsc_log_t *lg, const char *name);

/* Copies the rows where column c is finite into x (steps) and y (values), each [n_rows] f64
 * allocated by the caller; returns the count. */
TSC_API size_t tsc_log_series(const tsc_log_t *lg, int c, double *x, double *y);

#ifdef __cplusplus
}
#endif
#endif
