/* tsc_flight.h: a flight recorder for training runs. It keeps the attention tensors of the last
 * N completed steps (of chosen layers) in a memory ring and, when a trigger fires, writes them
 * as a format-v1 dump through the capture API (tsc_capture.h), so `tilescope info`, `diagnose`
 * and `replay` read it like any capture. docs/FLIGHT.md has the rules and an example.
 *
 * Triggers, checked when a step ends (tsc_flight_step_end):
 *   - a loss or grad-norm spike against a running baseline: baseline m and spread s are EMAs
 *     (weight alpha) of the values and of their absolute deviation from m; once warmup values
 *     were seen, a value fires when value > m + k * max(s, 0.01 |m|) or value > factor * m
 *     (m > 0). A value that fires, and a non-finite one, does not enter the baseline;
 *   - a NaN or Inf loss or grad norm (always), or in a tensor handed over (check_tensors);
 *   - SIGINT / SIGTERM, after tsc_flight_signals_install: the handler only sets a flag; the
 *     next step_begin, step_end, trigger or close writes the dump and stops the recorder;
 *     tsc_flight_signal tells the training loop to stop;
 *   - an explicit tsc_flight_trigger(fr, "reason").
 * The dump holds the last N completed steps that handed over tensors, in step order (fewer when
 * the run had fewer), plus the root attributes flight_* (docs/FORMAT.md §1.1). A dump is never
 * written over an existing file: the path must not exist when the recorder opens, nor when it
 * writes. After a fire the recorder stops, unless max_dumps > 1: it then empties the ring and
 * re-arms once N new steps are recorded; dump i (i >= 2) is written to "<stem>.<i>.h5" (path
 * "crash.h5" -> "crash.2.h5"; a path without ".h5" gets ".<i>" appended). With keep_newest the
 * recorder never stops for its count: it keeps the newest max_dumps dumps and deletes the older
 * ones it wrote (a long run's budget is not spent on its first spikes). A signal always stops it.
 *
 * Memory: the first step that hands over tensors fixes the layout (which tensors, their format
 * and shape) and so the step's bytes; then the ring of N slots is allocated once, and refused
 * with TSC_ERR_ARG naming both numbers when N x step bytes > max_bytes. Later steps copy into
 * their slot and allocate nothing; a tensor the first step did not hand over, or one with
 * another format or shape, is TSC_ERR_ARG.
 *
 *   tsc_flight_t *fr; tsc_flight_opts_t o; tsc_flight_opts_init(&o);
 *   o.n_steps = 8; o.layers = "1,3";
 *   if (tsc_flight_open(&fr, "crash.h5", &meta, &o) != TSC_OK) die(tsc_error_last());
 *   tsc_flight_signals_install(fr);
 *   for (step = 0; !tsc_flight_signal(fr); step++) {
 *       tsc_flight_step_begin(fr, step);
 *       tsc_flight_put(fr, layer, "q", TSC_FMT_BF16, 4, dims, q_host);   // as tsc_capture_put
 *       ... train ...
 *       int fired; tsc_flight_step_end(fr, loss, grad_norm, &fired);
 *       if (fired) log("flight dump %s", tsc_flight_last_dump(fr));
 *   }
 *   tsc_flight_close(fr);
 *
 * The library stays silent: every function returns TSC_OK or an error with a detail
 * (tsc_error_last). A recorder is used from one thread.
 */
#ifndef TSC_FLIGHT_H
#define TSC_FLIGHT_H

#include "tsc_export.h"

#include <stdint.h>

#include "tsc_dump.h"
#include "tsc_formats.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tsc_comm;

/* A spike rule of one series (loss or grad norm). */
typedef struct {
    double k;        /* fire when value > m + k * max(s, 0.01 |m|); k <= 0: off. Default 6 */
    double factor;   /* fire when value > factor * m (m > 0); factor <= 0: off. Default 0 (off) */
    double alpha;    /* EMA weight of the newest value, in (0, 1]. Default 0.05 */
    int warmup;      /* values entered into the baseline before the rule arms (>= 1). Default 20 */
} tsc_flight_spike_t;

typedef struct {
    int n_steps;             /* N, the steps the ring holds (>= 1). Default 8 */
    const char *layers;      /* layers kept, set grammar of tsc_select.h ("1,3", "0:4", "all");
                                NULL: all. Others are skipped by tsc_flight_put */
    uint64_t max_bytes;      /* bound of the ring (N x step bytes). Default 1 GiB */
    int store_fmt;           /* as tsc_capture_opts_t: 0 store as handed over, else format + 1 */
    int deflate;             /* as tsc_capture_opts_t: 0 none, 1..9 */
    tsc_flight_spike_t loss; /* the loss's spike rule */
    tsc_flight_spike_t grad; /* the grad norm's spike rule */
    int check_tensors;       /* 1: a NaN/Inf in a tensor handed over fires when its step ends. Default 0 */
    int max_dumps;           /* dumps written before the recorder stops (>= 1). Default 1 */
    int keep_newest;         /* 1: max_dumps bounds the dumps kept on disk, not those written: the
                                recorder keeps firing, and writing dump i > max_dumps deletes dump
                                i - max_dumps (its own file), so the newest max_dumps remain. Default 0 */
    int device;              /* 1: keep the ring in GPU memory (a CUDA build with a GPU; tsc_flight_open
                                refuses it otherwise). Default 0: host memory */
    const struct tsc_comm *comm; /* NULL (default): this process decides alone. Else this recorder is
                                one process's of a job (tsc_comm.h; each writes its own ring to its
                                own path): tsc_flight_step_end is collective, and a trigger seen by
                                any process (its series' spike, a NaN, a caught signal) fires on
                                every one, with the reason of the lowest such process; a signal
                                stops every recorder and tsc_flight_signal reports it everywhere */
} tsc_flight_opts_t;

typedef struct tsc_flight tsc_flight_t;

/* The defaults above. */
TSC_API void tsc_flight_opts_init(tsc_flight_opts_t *o);

/* A recorder that writes its first dump to path. TSC_ERR_IO when path exists (a dump is never
 * overwritten) or can never be a file (a directory, FIFO, device); TSC_ERR_SHAPE for
 * inconsistent meta (tsc_dump_meta_check); TSC_ERR_ARG for an option out of range or a bad
 * layer set. opts NULL: the defaults. On failure *out is NULL. */
TSC_API tsc_status_t tsc_flight_open(tsc_flight_t **out, const char *path, const tsc_dump_meta_t *meta,
                             const tsc_flight_opts_t *opts);

/* Starts step (greater than the previous one: TSC_ERR_ARG otherwise). A step begun while
 * another is open discards the open one. */
TSC_API tsc_status_t tsc_flight_step_begin(tsc_flight_t *fr, long long step);

/* 1 when layer is kept: lets the caller skip the device-to-host copy of the others. */
TSC_API int tsc_flight_wants(const tsc_flight_t *fr, int layer);

/* Copies one tensor into the step's slot; names, shapes and formats as tsc_capture_put (shape
 * checked against the metadata: TSC_ERR_SHAPE). A layer not kept is skipped (TSC_OK); the same
 * tensor twice in a step, or outside a step, is TSC_ERR_ARG. */
TSC_API tsc_status_t tsc_flight_put(tsc_flight_t *fr, int layer, const char *name, tsc_format_t fmt, int rank,
                            const uint64_t *dims, const void *data);

/* Hands over the open step's input tokens, ids [B*T] (copied): a dump writes them with the step
 * (docs/FORMAT.md §1.3), each id's byte as its text when bytes_as_text (a byte-level vocabulary). */
TSC_API tsc_status_t tsc_flight_put_tokens(tsc_flight_t *fr, const int64_t *ids, int bytes_as_text);

/* Ends the step begun, records it in the ring, enters loss and grad_norm (pass 0 for a
 * series not tracked) and checks the triggers; *fired (may be NULL) is 1 when a dump was
 * written by this call. The first step with tensors fixes the ring (TSC_ERR_ARG over max_bytes:
 * the step is dropped). When writing the dump fails, the error is returned with *fired = 1 and
 * what was written stays (a packed file, or the capture's session folder "<dump>.capture"). */
TSC_API tsc_status_t tsc_flight_step_end(tsc_flight_t *fr, double loss, double grad_norm, int *fired);
/* tsc_flight_put from device memory (a CUDA build with a GPU; TSC_ERR_UNSUPPORTED otherwise):
 * with opts.device the copy into the ring is a device-to-device cudaMemcpyAsync on stream (a
 * cudaStream_t, NULL: the default stream), so the training thread does not wait; the first step
 * (which fixes the layout) is copied to the host once, synchronously. check_tensors does not look
 * at device tensors (the loss and grad-norm triggers still work). A dump copies the ring back
 * after synchronising the device. */
TSC_API tsc_status_t tsc_flight_put_device(tsc_flight_t *fr, int layer, const char *name, tsc_format_t fmt,
                                           int rank, const uint64_t *dims, const void *dev, void *stream);

/* Writes the ring now (the completed steps; an open step goes on), with reason as the
 * flight_reason attribute, then stops or re-arms as a fire does. TSC_ERR_ARG when no step was
 * recorded yet or the recorder has stopped. */
TSC_API tsc_status_t tsc_flight_trigger(tsc_flight_t *fr, const char *reason);

/* Installs handlers of SIGINT and SIGTERM that only set a flag (one recorder at a time:
 * TSC_ERR_ARG for a second); tsc_flight_close puts the previous handlers back. */
TSC_API tsc_status_t tsc_flight_signals_install(tsc_flight_t *fr);
/* The signal caught (SIGINT or SIGTERM) since the install, 0 when none: the loop should stop. */
TSC_API int tsc_flight_signal(const tsc_flight_t *fr);

/* Dumps written so far, the path of the last one ("" when none), and 1 once the recorder has
 * stopped (then step calls are no-ops). */
TSC_API int tsc_flight_n_dumps(const tsc_flight_t *fr);
TSC_API const char *tsc_flight_last_dump(const tsc_flight_t *fr);
TSC_API int tsc_flight_stopped(const tsc_flight_t *fr);

/* Writes the dump when a caught signal has not been served yet, restores the signal handlers
 * and frees fr (NULL: no-op). Returns the write's status. */
TSC_API tsc_status_t tsc_flight_close(tsc_flight_t *fr);

#ifdef __cplusplus
}
#endif
#endif
