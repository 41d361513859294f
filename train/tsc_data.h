/* tsc_data.h: training text for tsc_train.h: token streams, a fixed train/validation split and a
 * recorded, replayable batch order.
 *
 *   tsc_data_t *d;
 *   if (tsc_data_open(&d, "kjv", NULL) != TSC_OK) puts(tsc_error_last());
 *   int32_t x[B*T], y[B*T];
 *   tsc_data_batch(d, TSC_SPLIT_TRAIN, seed, step, B, T, x, y, offsets);  // y = x shifted by one
 *
 * Sources (tsc_data_open's spec):
 *   "kjv"            the built-in default: the King James Bible as Debian's bible-kjv package
 *                    prints it (`bible 'gen1:1-rev22:21'`), byte-level; materialised once into
 *                    a cache file (tsc_data_kjv_path).
 *   FILE.txt / any   plain text, byte-level: vocabulary 256, token = byte.
 *   FILE.bin         llm.c token file (256 x int32 header, magic 20240520, version 1, token
 *                    count; uint16 tokens) or, without that magic, nanoGPT's raw uint16 tokens.
 *   DIR              nanoGPT's layout: DIR/train.bin and DIR/val.bin (raw uint16, or with
 *                    llm.c's header), used as the split as they are.
 * Files are mapped read-only (rewriting one while a run reads it is not supported).
 * Split: unless the source brings its own (DIR), the last 10% of tokens (opts->val_frac) are
 * validation, the rest training; fixed, independent of the seed.
 * Batches: row r of training batch `step` starts at a position drawn from (seed, step, r) by a
 * counter-based generator (splitmix64 chained over the three, mapped onto [0, n_train - T - 1];
 * docs/TRAINING_DATA.md), so any step's batch is computed without the ones before it and a
 * run's batch order replays from its seed alone; tsc_batch_log_* records the offsets a run used
 * (RUN/batches.csv) and replays a recorded order for another run. Validation batches are
 * consecutive windows from the start of the validation split (the same every evaluation).
 */
#ifndef TSC_DATA_H
#define TSC_DATA_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TSC_SPLIT_TRAIN = 0, TSC_SPLIT_VAL = 1 } tsc_split_t;

typedef struct {
    double val_frac;   /* validation fraction when the source has no split of its own; 0: 0.1 */
} tsc_data_opts_t;

typedef struct tsc_data tsc_data_t;

/* Opens a source (see above; opts may be NULL). Errors name the file and the problem: missing
 * or empty file, a .bin whose size is odd or whose header contradicts its size, a split with
 * fewer tokens than one sequence needs (checked by tsc_data_batch), `bible` not installed. */
TSC_API tsc_status_t tsc_data_open(tsc_data_t **out, const char *spec, const tsc_data_opts_t *opts);
TSC_API void tsc_data_close(tsc_data_t *d);
/* Vocabulary size: 256 for text, else 1 + the largest token of either split (at least 256 is
 * not assumed). */
TSC_API int tsc_data_vocab(const tsc_data_t *d);
/* 1 when a token is a byte of text (a plain-text source): its text is that byte. */
TSC_API int tsc_data_byte_level(const tsc_data_t *d);
TSC_API size_t tsc_data_n_tokens(const tsc_data_t *d, tsc_split_t split);
/* What was opened, one line ("kjv: 4.30M tokens (byte-level, vocabulary 256), 3.87M train / 429.8k val"). */
TSC_API const char *tsc_data_describe(const tsc_data_t *d);

/* Batch `step` (>= 0) of B rows of T tokens: x[b*T + t] and targets y = the next token.
 * Training: positions from (seed, step, b) as described above; validation: window
 * (step*B + b) of the validation split, wrapping around. offsets (may be NULL) receives each
 * row's start. TSC_ERR_ARG when the split has fewer than T + 1 tokens. */
TSC_API tsc_status_t tsc_data_batch(const tsc_data_t *d, tsc_split_t split, uint64_t seed, long long step,
                                    int B, int T, int32_t *x, int32_t *y, uint64_t *offsets);
/* The same batch from explicit row offsets (a replayed order). TSC_ERR_ARG when an offset + T
 * runs past the split. Both batch functions only read d: threads may call them at once. */
TSC_API tsc_status_t tsc_data_batch_at(const tsc_data_t *d, tsc_split_t split, const uint64_t *offsets,
                                       int B, int T, int32_t *x, int32_t *y);

/* Where the built-in text is (or will be) cached: $XDG_CACHE_HOME/tilescope/kjv.txt, else
 * $HOME/.cache/tilescope/kjv.txt. */
TSC_API tsc_status_t tsc_data_kjv_path(char *buf, size_t size);

/* ---- batch order: RUN/batches.csv, "step,row,offset" lines after a header ---- */
typedef struct tsc_batch_log tsc_batch_log_t;
/* Opens path for appending (creating it with its header; a resumed run appends after the last
 * complete step, truncating a partial line a crash left, and a last step with fewer rows than
 * step 0). Same as tsc_batch_log_open_at(out, path, -1). */
TSC_API tsc_status_t tsc_batch_log_open(tsc_batch_log_t **out, const char *path);
/* For a run resumed at first_step: opens path like tsc_batch_log_open and also drops every line
 * from the first one of a step >= first_step on (the steps the resumed run writes again;
 * first_step < 0: none). The kept part is rewritten atomically (temporary + rename), so a crash
 * here leaves the old or the new log. TSC_ERR_FORMAT naming the file and line for a wrong header
 * or a malformed complete line; TSC_ERR_IO when it cannot be read or written. *out is NULL on
 * failure. */
TSC_API tsc_status_t tsc_batch_log_open_at(tsc_batch_log_t **out, const char *path, long long first_step);
TSC_API tsc_status_t tsc_batch_log_put(tsc_batch_log_t *bl, long long step, int B, const uint64_t *offsets);
/* Flushes to the file (fsync when sync = 1). */
TSC_API tsc_status_t tsc_batch_log_flush(tsc_batch_log_t *bl, int sync);
/* Flushes and closes; NULL is a no-op. A write error here goes unreported: flush first. */
TSC_API void tsc_batch_log_close(tsc_batch_log_t *bl);

/* A recorded order read back, to replay: the offsets of step's B rows. The log must hold steps
 * 0, 1, 2, ... in order, each with rows 0 .. B-1 in order and every step as many rows as step 0.
 * Errors name the file and line (malformed line, rows missing, out of order, a last line without
 * its newline) or, from _get, the file (B differs from the run's, step not recorded). */
typedef struct tsc_batch_order tsc_batch_order_t;
TSC_API tsc_status_t tsc_batch_order_load(tsc_batch_order_t **out, const char *path);
TSC_API void tsc_batch_order_free(tsc_batch_order_t *bo);
TSC_API long long tsc_batch_order_n_steps(const tsc_batch_order_t *bo);
TSC_API tsc_status_t tsc_batch_order_get(const tsc_batch_order_t *bo, long long step, int B, uint64_t *offsets);

#ifdef __cplusplus
}
#endif
#endif
