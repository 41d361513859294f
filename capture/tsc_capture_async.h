/* tsc_capture_async.h: capture from a training loop without stalling it, from device (CUDA) or
 * host memory. Sampled tensors are copied into a staging buffer (pinned host memory when a GPU
 * is used: cudaMemcpyAsync on the training stream) and written by a writer thread through the
 * capture API (tsc_capture.h), off the training thread.
 *
 *   tsc_capture_async_t *a;
 *   tsc_capture_async_open(&a, cap, 256u << 20);        // cap: an open tsc_capture_t
 *   for (step...) {
 *       tsc_capture_async_step_begin(a, step);          // unsampled: everything below returns at once
 *       tsc_capture_put_device(a, layer, "q", TSC_FMT_BF16, 4, dims, q_dev, stream);
 *       tsc_capture_async_step_end(a, stream);          // records an event; never synchronises
 *   }
 *   tsc_capture_async_close(a);                         // drains, joins; then tsc_capture_close(cap)
 *
 * Unsampled steps and layers cost one test of the sampling spec: no copy, no event, no
 * synchronisation. A sampled step's device copies are enqueued on the caller's stream; the
 * writer waits on an event recorded after them, so the training stream is never synchronised.
 * The training thread waits only when the staging buffer is full (the writer is behind by more
 * than its size): tsc_capture_async_waits counts those waits. Between open and close, only the
 * writer thread touches cap. Errors of the writer (a full disk, a shape the dump refuses) are
 * kept: the first is returned by the next step_end or by close, with its detail.
 *
 * tsc_capture_put_device needs a CUDA build with a GPU (TSC_ERR_UNSUPPORTED otherwise, naming
 * why); tsc_capture_put_async takes host memory (copied into staging before it returns) and
 * works everywhere: it is the same pipeline without the device copy. */
#ifndef TSC_CAPTURE_ASYNC_H
#define TSC_CAPTURE_ASYNC_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_capture.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tsc_capture_async tsc_capture_async_t;

/* staging_bytes: the staging buffer (at least the largest tensor put; 64 MiB is plenty for a
 * GPT-2-small layer). TSC_ERR_NOMEM, TSC_ERR_IO (no thread), TSC_ERR_ARG. */
TSC_API tsc_status_t tsc_capture_async_open(tsc_capture_async_t **out, tsc_capture_t *cap, size_t staging_bytes);
/* Starts step (greater than the previous one). */
TSC_API tsc_status_t tsc_capture_async_step_begin(tsc_capture_async_t *a, long long step);
/* One tensor of the open step, as tsc_capture_put; dev: device memory, stream: a cudaStream_t
 * (NULL: the default stream). */
TSC_API tsc_status_t tsc_capture_put_device(tsc_capture_async_t *a, int layer, const char *name, tsc_format_t fmt,
                                            int rank, const uint64_t *dims, const void *dev, void *stream);
/* The same from host memory. */
TSC_API tsc_status_t tsc_capture_put_async(tsc_capture_async_t *a, int layer, const char *name, tsc_format_t fmt,
                                           int rank, const uint64_t *dims, const void *host);
/* Ends the step: hands it to the writer (after the copies enqueued on stream). Returns the
 * writer's first error so far, if any. */
TSC_API tsc_status_t tsc_capture_async_step_end(tsc_capture_async_t *a, void *stream);
/* Waits for every handed step to be written, stops the writer, frees a (not the capture).
 * Returns the writer's first error, if any. */
TSC_API tsc_status_t tsc_capture_async_close(tsc_capture_async_t *a);
/* Times the training thread waited for staging space; steps written so far. */
TSC_API long tsc_capture_async_waits(const tsc_capture_async_t *a);
TSC_API long tsc_capture_async_written(tsc_capture_async_t *a);

#ifdef __cplusplus
}
#endif
#endif
