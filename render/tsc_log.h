/* tsc_log.h: training logs (loss curves) for figures and reports (docs/FORMAT.md §4).
 *
 * Kinds of text file read (docs/LOGS.md has examples of each):
 *   - a table: CSV (comma) or TSV (tab) with a header row naming the columns; one column is the
 *     step (`step`, `iter`, `_step` or TensorBoard's and W&B's `Step`); the others are free
 *     (train_loss, val_loss, lr, ...). Every later row has the header's number of fields, each a
 *     number (optionally "quoted"), or empty / `nan` / `NA` for "not logged". TensorBoard's CSV
 *     export (`Wall time,Step,Value`) and W&B's (`Step,<run> - loss,<run> - loss__MIN,...`) are
 *     such tables (kinds TENSORBOARD and WANDB).
 *   - nanoGPT console output: `step 250: train loss 4.3127, val loss 4.3221` (evaluation lines,
 *     columns train_loss and val_loss) and `iter 10: loss 9.1234, time 35.1ms, mfu 12.3%`
 *     (iteration lines, columns iter_loss, time_ms, mfu).
 *   - llm.c output: the console's `step    1/19073 | loss 11.01 (+0.00z)| norm 15.28 (+0.00z)| lr
 *     8.57e-07 | 1234.56 ms | 42.1% bf16 MFU | 123456 tok/s` (step K is the 0-based step K-1, as in
 *     llm.c's main.log; columns train_loss, grad_norm, lr, time_ms, mfu, tok_s), its `val loss X`
 *     lines (val_loss at the step that follows), `HellaSwag: a/b = X` (hellaswag), train_gpt2.c's
 *     `step N: train loss X (took Y ms)`, and main.log's `s:N trl:X lr:Y norm:Z`, `s:N tel:X`,
 *     `s:N eval:X`.
 * A file is console output when any line is one of these; other lines (banners, "saving
 * checkpoint", ...) are then ignored, and a line that starts like one ("step 7 ...", "iter 7",
 * "val loss", "s:7 ") but does not parse is an error. Lines starting with `#` and blank lines are
 * skipped in both. Errors name the file and the line ("run.csv:17: expected 5 fields, found 4").
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

#define TSC_LOG_MAX_COLS 256  /* a trainer log has a few columns per layer */

typedef enum {
    TSC_LOG_CSV = 0, TSC_LOG_TSV, TSC_LOG_NANOGPT, TSC_LOG_LLMC, TSC_LOG_TENSORBOARD, TSC_LOG_WANDB
} tsc_log_kind_t;

typedef struct {
    char name[64];              /* the run's display name (as given, else the file name) */
    char path[1024];            /* the file it came from ("" when parsed from memory) */
    tsc_log_kind_t kind;
    int n_cols;                 /* value columns, `step` excluded */
    char *cols[TSC_LOG_MAX_COLS];  /* their names */
    size_t n_rows;
    double *step;               /* [n_rows] f64 */
    double *values;             /* [n_rows, n_cols] f64 row-major; NaN = not logged in that row */
    int pick;                   /* the loss column: chosen by FILE:COLUMN, else a table's only value
                                   column (wall time and W&B's __MIN/__MAX left aside); -1: none */
} tsc_log_t;

/* Reads path. name may be NULL (then the file's base name). On success *out is the caller's
 * (tsc_log_free). Errors: TSC_ERR_IO (cannot open/read, with strerror), TSC_ERR_FORMAT (a
 * malformed line, naming path:line and what was expected; an empty log), TSC_ERR_NOMEM. *out is
 * NULL on failure. */
TSC_API tsc_status_t tsc_log_read(const char *path, const char *name, tsc_log_t **out);

/* The same from text[len] in memory; where names the source in messages. */
TSC_API tsc_status_t tsc_log_parse(const char *text, size_t len, const char *where, const char *name, tsc_log_t **out);

/* Parses "[NAME=]FILE[:COLUMN]" (a --log argument): NAME is the display name (default the file's
 * name); COLUMN, a header name, becomes lg->pick (the part after a ':' is a column only when the
 * part before it is an existing file, so a file name may hold ':'). Errors as tsc_log_read,
 * TSC_ERR_ARG for an empty name or file or a COLUMN the log lacks (the message lists its columns). */
TSC_API tsc_status_t tsc_log_read_spec(const char *spec, tsc_log_t **out);

TSC_API void tsc_log_free(tsc_log_t *lg);

/* Index of the value column called name, or -1. */
TSC_API int tsc_log_column(const tsc_log_t *lg, const char *name);

/* The loss column the figures draw: lg->pick when set, else the first of (val = 0, per-iteration
 * training loss) iter_loss, train_loss, train/loss, loss or (val = 1) val_loss, val/loss, val,
 * valid_loss, eval_loss (also as W&B's "<run> - NAME"); -1 when none. */
TSC_API int tsc_log_loss_column(const tsc_log_t *lg, int val);

/* "the columns are: a, b, c" into buf (for messages). */
TSC_API void tsc_log_describe_columns(const tsc_log_t *lg, char *buf, size_t cap);

/* How the logged steps of column c (-1: rows with any value) cover n analysed steps. */
typedef struct {
    double first, last;        /* the first and last step with a value (NaN when none) */
    size_t n_steps, n_outside; /* analysed steps, and those outside [first, last] */
    long long first_outside;   /* the first of those (-1 when none) */
} tsc_log_cover_t;
TSC_API void tsc_log_cover(const tsc_log_t *lg, int c, const long long *steps, size_t n, tsc_log_cover_t *out);

/* Figure 10's smoothing of a loss series x[n] (steps, increasing), y[n]: a bias-corrected
 * exponential moving average over steps, out[i] = sum_j<=i w_j y_j / sum_j<=i w_j with
 * w_j = (1 - 0.5^(d_j / half_life)) 0.5^((x_i - x_j) / half_life), d_j the spacing before point j
 * (the first point and a repeated step count as the mean spacing): the weight of a point halves
 * every half_life steps. Its lag is about 1.44 half-lives; out[0] = y[0]. */
TSC_API void tsc_log_smooth(const double *x, const double *y, size_t n, double half_life, double *out);
/* The half-life figure 10 uses for steps x[n]: 1% of the span, at least the mean spacing and 1,
 * rounded up to 1, 2 or 5 x 10^k. */
TSC_API double tsc_log_half_life(const double *x, size_t n);

/* Copies the rows where column c is finite into x (steps) and y (values), each [n_rows] f64
 * allocated by the caller; returns the count. */
TSC_API size_t tsc_log_series(const tsc_log_t *lg, int c, double *x, double *y);

#ifdef __cplusplus
}
#endif
#endif
