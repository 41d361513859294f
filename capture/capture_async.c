/* capture_async.c: the staging ring and writer thread of tsc_capture_async.h.
 *
 * The staging buffer is a ring: a step's tensors take consecutive regions from head (a region
 * that would run past the end starts again at 0, the skipped bytes counted as the step's), and
 * the writer gives a step's bytes back once the step is written, in order, so tail follows head.
 * Each handed step is a job: its tensors (offset, name, shape) and, for device copies, a CUDA
 * event recorded on the training stream after them. */
#include "tsc_capture_async.h"

#include "tsc_attn_cuda.h"
#include "tsc_formats.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TSC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

enum { ITEM_NAME = 32, ITEM_RANK = 8 };

typedef struct {
    int layer, rank;
    tsc_format_t fmt;
    char name[ITEM_NAME];
    uint64_t dims[ITEM_RANK];
    size_t off;
} item_t;

typedef struct job {
    long long step;
    item_t *items;
    int n, cap;
    size_t bytes;   /* ring bytes the step holds (with skipped ends) */
    void *event;    /* cudaEvent_t after the step's device copies, or NULL */
    struct job *next;
} job_t;

struct tsc_capture_async {
    tsc_capture_t *cap;
    unsigned char *ring;
    size_t size, head, used;
    int pinned;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv_job, cv_space;
    job_t *first, *last;  /* queue handed to the writer */
    job_t *open;          /* the step being put, or NULL (unsampled / none) */
    int stop, busy;
    long waits, written;
    tsc_status_t err;     /* the writer's first error */
    char err_msg[512];
};

static void job_free(job_t *j) {
    if (!j) return;
#ifdef TSC_HAVE_CUDA
    if (j->event) cudaEventDestroy((cudaEvent_t)j->event);
#endif
    free(j->items);
    free(j);
}

static void *writer(void *arg) {
    tsc_capture_async_t *a = arg;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!a->first && !a->stop) pthread_cond_wait(&a->cv_job, &a->mu);
        if (!a->first) break;
        job_t *j = a->first;
        a->first = j->next;
        if (!a->first) a->last = NULL;
        a->busy = 1;
        pthread_mutex_unlock(&a->mu);
        tsc_status_t st = TSC_OK;
#ifdef TSC_HAVE_CUDA
        if (j->event) {
            cudaError_t e = cudaEventSynchronize((cudaEvent_t)j->event);
            if (e != cudaSuccess)
                st = tsc_error_set(TSC_ERR_IO, "capture: the device copies of step %lld failed: %s", j->step,
                                   cudaGetErrorString(e));
        }
#endif
        if (st == TSC_OK) st = tsc_capture_step_begin(a->cap, j->step);
        for (int i = 0; st == TSC_OK && i < j->n; i++) {
            const item_t *it = &j->items[i];
            st = tsc_capture_put(a->cap, it->layer, it->name, it->fmt, it->rank, it->dims, a->ring + it->off);
        }
        if (st == TSC_OK) st = tsc_capture_step_end(a->cap);
        pthread_mutex_lock(&a->mu);
        if (st != TSC_OK && a->err == TSC_OK) {
            a->err = st;
            snprintf(a->err_msg, sizeof a->err_msg, "%s", tsc_error_last());
        }
        if (st == TSC_OK) a->written++;
        a->used -= j->bytes;
        a->busy = 0;
        job_free(j);
        pthread_cond_broadcast(&a->cv_space);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

tsc_status_t tsc_capture_async_open(tsc_capture_async_t **out, tsc_capture_t *cap, size_t staging_bytes) {
    if (!out || !cap || staging_bytes == 0)
        return tsc_error_set(TSC_ERR_ARG, "capture: async open needs a capture and a staging size");
    *out = NULL;
    tsc_capture_async_t *a = calloc(1, sizeof *a);
    if (!a) return tsc_error_set(TSC_ERR_NOMEM, "capture: out of memory");
    a->cap = cap;
    a->size = staging_bytes;
#ifdef TSC_HAVE_CUDA
    if (tsc_cuda_available() && cudaHostAlloc((void **)&a->ring, staging_bytes, cudaHostAllocDefault) == cudaSuccess)
        a->pinned = 1;
    else
        cudaGetLastError();
#endif
    if (!a->ring) a->ring = malloc(staging_bytes);
    if (!a->ring) {
        free(a);
        return tsc_error_set(TSC_ERR_NOMEM, "capture: cannot allocate a staging buffer of %zu bytes", staging_bytes);
    }
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv_job, NULL);
    pthread_cond_init(&a->cv_space, NULL);
    if (pthread_create(&a->thread, NULL, writer, a) != 0) {
        free(a->ring);
        free(a);
        return tsc_error_set(TSC_ERR_IO, "capture: cannot start the writer thread");
    }
    *out = a;
    return TSC_OK;
}

tsc_status_t tsc_capture_async_step_begin(tsc_capture_async_t *a, long long step) {
    if (!a) return tsc_error_set(TSC_ERR_ARG, "capture: NULL async capture");
    if (a->open) { /* an unfinished step: dropped, its ring bytes handed back */
        pthread_mutex_lock(&a->mu);
        a->used -= a->open->bytes;
        pthread_mutex_unlock(&a->mu);
        job_free(a->open);
        a->open = NULL;
    }
    if (!tsc_capture_wants(a->cap, step, -1)) return TSC_OK;
    a->open = calloc(1, sizeof *a->open);
    if (!a->open) return tsc_error_set(TSC_ERR_NOMEM, "capture: out of memory");
    a->open->step = step;
    return TSC_OK;
}

/* Reserves n bytes of the ring for the open step (waiting for the writer when full); returns the
 * offset or (size_t)-1 with an error set. */
static size_t reserve(tsc_capture_async_t *a, size_t n) {
    if (n > a->size) {
        (void)tsc_error_set(TSC_ERR_ARG, /* the detail of the caller's failure */ "capture: a tensor of %zu bytes does not fit the staging buffer of %zu bytes", n,
                      a->size);
        return (size_t)-1;
    }
    pthread_mutex_lock(&a->mu);
    for (;;) {
        if (a->used == 0) a->head = 0;
        const size_t skip = a->head + n > a->size ? a->size - a->head : 0; /* wrap to 0 */
        if (a->used + skip + n <= a->size) {
            const size_t off = skip ? 0 : a->head;
            a->used += skip + n;
            a->open->bytes += skip + n;
            a->head = off + n == a->size ? 0 : off + n;
            pthread_mutex_unlock(&a->mu);
            return off;
        }
        if (!a->first && !a->busy) { /* nothing will free space: the open step alone overflows */
            pthread_mutex_unlock(&a->mu);
            (void)tsc_error_set(TSC_ERR_ARG, "capture: step %lld needs more than the staging buffer's %zu bytes",
                          a->open->step, a->size);
            return (size_t)-1;
        }
        a->waits++;
        pthread_cond_wait(&a->cv_space, &a->mu);
    }
}

/* The item of a put, or NULL when the layer is not kept (*st TSC_OK) or on error. */
static item_t *add_item(tsc_capture_async_t *a, int layer, const char *name, tsc_format_t fmt, int rank,
                        const uint64_t *dims, size_t *bytes, tsc_status_t *st) {
    *st = TSC_OK;
    if (!a->open || !tsc_capture_wants(a->cap, a->open->step, layer)) return NULL;
    if (!name || strlen(name) >= ITEM_NAME || rank < 1 || rank > ITEM_RANK || !dims) {
        *st = tsc_error_set(TSC_ERR_ARG, "capture: bad tensor name or rank (%d)", rank);
        return NULL;
    }
    size_t n = tsc_format_size(fmt);
    for (int i = 0; i < rank; i++) {
        if (dims[i] && n > SIZE_MAX / dims[i]) {
            *st = tsc_error_set(TSC_ERR_ARG, "capture: tensor %s is too large", name);
            return NULL;
        }
        n *= (size_t)dims[i];
    }
    job_t *j = a->open;
    if (j->n == j->cap) {
        int c = j->cap ? 2 * j->cap : 16;
        item_t *it = realloc(j->items, (size_t)c * sizeof *it);
        if (!it) {
            *st = tsc_error_set(TSC_ERR_NOMEM, "capture: out of memory");
            return NULL;
        }
        j->items = it;
        j->cap = c;
    }
    const size_t off = reserve(a, n);
    if (off == (size_t)-1) {
        *st = TSC_ERR_ARG;
        return NULL;
    }
    item_t *it = &j->items[j->n++];
    it->layer = layer;
    it->rank = rank;
    it->fmt = fmt;
    snprintf(it->name, sizeof it->name, "%s", name);
    memcpy(it->dims, dims, (size_t)rank * sizeof *dims);
    it->off = off;
    *bytes = n;
    return it;
}

tsc_status_t tsc_capture_put_async(tsc_capture_async_t *a, int layer, const char *name, tsc_format_t fmt, int rank,
                                   const uint64_t *dims, const void *host) {
    if (!a) return tsc_error_set(TSC_ERR_ARG, "capture: NULL async capture");
    tsc_status_t st;
    size_t n = 0;
    item_t *it = add_item(a, layer, name, fmt, rank, dims, &n, &st);
    if (it) memcpy(a->ring + it->off, host, n);
    return st;
}

tsc_status_t tsc_capture_put_device(tsc_capture_async_t *a, int layer, const char *name, tsc_format_t fmt, int rank,
                                    const uint64_t *dims, const void *dev, void *stream) {
    if (!a) return tsc_error_set(TSC_ERR_ARG, "capture: NULL async capture");
    if (!a->open || !tsc_capture_wants(a->cap, a->open->step, layer)) return TSC_OK; /* not sampled: nothing */
#ifdef TSC_HAVE_CUDA
    if (!a->pinned)
        return tsc_error_set(TSC_ERR_UNSUPPORTED, "capture: device capture needs a GPU (%s)", tsc_cuda_describe());
    tsc_status_t st;
    size_t n = 0;
    item_t *it = add_item(a, layer, name, fmt, rank, dims, &n, &st);
    if (!it) return st;
    cudaError_t e = cudaMemcpyAsync(a->ring + it->off, dev, n, cudaMemcpyDeviceToHost, (cudaStream_t)stream);
    if (e != cudaSuccess)
        return tsc_error_set(TSC_ERR_IO, "capture: copying %s of layer %d from the device: %s", name, layer,
                             cudaGetErrorString(e));
    return TSC_OK;
#else
    (void)fmt; (void)rank; (void)dims; (void)dev; (void)stream; (void)name;
    return tsc_error_set(TSC_ERR_UNSUPPORTED, "capture: device capture needs a CUDA build (%s)", tsc_cuda_describe());
#endif
}

tsc_status_t tsc_capture_async_step_end(tsc_capture_async_t *a, void *stream) {
    if (!a) return tsc_error_set(TSC_ERR_ARG, "capture: NULL async capture");
    job_t *j = a->open;
    a->open = NULL;
    if (j) {
#ifdef TSC_HAVE_CUDA
        if (a->pinned) {
            cudaEvent_t ev;
            if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess ||
                cudaEventRecord(ev, (cudaStream_t)stream) != cudaSuccess) {
                pthread_mutex_lock(&a->mu);
                a->used -= j->bytes;
                pthread_mutex_unlock(&a->mu);
                job_free(j);
                return tsc_error_set(TSC_ERR_IO, "capture: cannot record an event: %s",
                                     cudaGetErrorString(cudaGetLastError()));
            }
            j->event = ev;
        }
#else
        (void)stream;
#endif
        pthread_mutex_lock(&a->mu);
        if (a->last) a->last->next = j;
        else a->first = j;
        a->last = j;
        pthread_cond_signal(&a->cv_job);
        pthread_mutex_unlock(&a->mu);
    }
    pthread_mutex_lock(&a->mu);
    tsc_status_t st = a->err;
    if (st != TSC_OK) st = tsc_error_set(st, "%s", a->err_msg);
    pthread_mutex_unlock(&a->mu);
    return st;
}

tsc_status_t tsc_capture_async_close(tsc_capture_async_t *a) {
    if (!a) return TSC_OK;
    if (a->open) {
        job_free(a->open);
        a->open = NULL;
    }
    pthread_mutex_lock(&a->mu);
    a->stop = 1;
    pthread_cond_signal(&a->cv_job);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->thread, NULL);
    tsc_status_t st = a->err;
    if (st != TSC_OK) st = tsc_error_set(st, "%s", a->err_msg);
#ifdef TSC_HAVE_CUDA
    if (a->pinned) cudaFreeHost(a->ring);
    else
#endif
        free(a->ring);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv_job);
    pthread_cond_destroy(&a->cv_space);
    free(a);
    return st;
}

long tsc_capture_async_waits(const tsc_capture_async_t *a) { return a ? a->waits : 0; }

long tsc_capture_async_written(tsc_capture_async_t *a) {
    if (!a) return 0;
    pthread_mutex_lock(&a->mu);
    long n = a->written;
    pthread_mutex_unlock(&a->mu);
    return n;
}
