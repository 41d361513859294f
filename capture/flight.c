/* flight.c: the flight recorder (tsc_flight.h): a ring of the last N steps' tensors in memory,
 * written through the capture API when a trigger fires. */
#include "tsc_flight.h"
#include "tsc_comm.h"
#include "tsc_attn_cuda.h"
#include "tsc_capture.h"
#include "tsc_select.h"
#include "capture_internal.h"
#include "tsc_file.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef TSC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* One tensor of the layout the first step fixed; its bytes sit at offset in every slot. */
typedef struct {
    int layer;
    char name[TSC_DUMP_NAME_MAX];
    tsc_format_t fmt;
    int rank;
    uint64_t dims[4];
    size_t bytes, offset;
    void *first;              /* the first step's copy, until the ring exists */
} flight_entry_t;

/* The running baseline of one series: EMAs of the value (m) and of |value - m| (s). */
typedef struct {
    double m, s;
    int n;                    /* values entered */
} flight_series_t;

struct tsc_flight {
    char path[4096];
    char last_dump[4200];
    tsc_dump_meta_t meta;
    tsc_flight_opts_t opts;
    tsc_select_set_t layers;
    flight_entry_t *ent;      /* the layout: n_ent entries (cap_ent allocated) */
    int n_ent, cap_ent;
    int n_slots;              /* N + 1: the last N completed steps and the step in progress */
    unsigned char *ring;      /* n_slots slots of step_bytes; NULL until the layout is fixed */
    size_t step_bytes;
    unsigned char *present;   /* [n_slots][n_ent]: entry handed over in that slot's step */
    long long *slot_step;     /* [n_slots] the step a slot holds */
    int head, count;          /* the slot of the step in progress; completed steps held (<= N) */
    long long cur_step, last_step; /* the open step (-1: none), the last begun (-1: none) */
    int tensor_bad;           /* the open step handed over a non-finite value (check_tensors) */
    char tensor_what[128];
    flight_series_t loss, grad;
    double last_loss, last_grad;
    int since_fire;           /* steps recorded since the last dump (re-arms at N) */
    int n_dumps, stopped;
    int sig_served;
    int sig_agreed;           /* with opts.comm: the signal a process of the job caught (0: none) */
    int64_t *tok;             /* [n_slots][B*T] each slot's input tokens (tsc_flight_put_tokens), or NULL */
    unsigned char *tok_has;   /* [n_slots] the slot's step handed its tokens over */
    int tok_bytes_text;       /* the tokens are bytes of text: each is written with its byte as text */
};

/* ---- signals: the handler only sets a flag ---------------------------------------------------- */

static volatile sig_atomic_t g_signal;
static tsc_flight_t *g_sig_owner;
static struct sigaction g_old_int, g_old_term;

static void on_signal(int signo) { g_signal = signo; }

tsc_status_t tsc_flight_signals_install(tsc_flight_t *fr) {
    if (g_sig_owner)
        return tsc_error_set(TSC_ERR_ARG, "flight recorder %s: another recorder (%s) holds the signal handlers",
                             fr->path, g_sig_owner->path);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    g_signal = 0;
    if (sigaction(SIGINT, &sa, &g_old_int) != 0) goto fail;
    if (sigaction(SIGTERM, &sa, &g_old_term) != 0) { sigaction(SIGINT, &g_old_int, NULL); goto fail; }
    g_sig_owner = fr;
    return TSC_OK;
fail:
    return tsc_error_set(TSC_ERR_IO, "flight recorder %s: cannot install signal handlers: %s", fr->path,
                         strerror(errno));
}

static int agreed(const tsc_flight_t *fr) { return fr->opts.comm && fr->opts.comm->size > 1; }

int tsc_flight_signal(const tsc_flight_t *fr) {
    if (fr && agreed(fr)) return fr->sig_agreed;
    return fr && g_sig_owner == fr ? (int)g_signal : 0;
}

static void signals_restore(tsc_flight_t *fr) {
    if (g_sig_owner != fr) return;
    sigaction(SIGINT, &g_old_int, NULL);
    sigaction(SIGTERM, &g_old_term, NULL);
    g_sig_owner = NULL;
}

/* ---- options ---------------------------------------------------------------------------------- */

static void spike_init(tsc_flight_spike_t *r) {
    r->k = 6;
    r->factor = 0;
    r->alpha = 0.05;
    r->warmup = 20;
}

void tsc_flight_opts_init(tsc_flight_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->n_steps = 8;
    o->max_bytes = (uint64_t)1 << 30;
    spike_init(&o->loss);
    spike_init(&o->grad);
    o->max_dumps = 1;
}

static tsc_status_t opts_check(const tsc_flight_opts_t *o, const char *path) {
    const tsc_flight_spike_t *r[2] = {&o->loss, &o->grad};
    for (int i = 0; i < 2; i++)
        if (!(r[i]->alpha > 0 && r[i]->alpha <= 1) || r[i]->warmup < 1 || !isfinite(r[i]->k) ||
            !isfinite(r[i]->factor))
            return tsc_error_set(TSC_ERR_ARG, "flight recorder %s: %s spike rule out of range (alpha %g must be in "
                                 "(0, 1], warmup %d >= 1, k and factor finite)", path, i ? "grad" : "loss",
                                 r[i]->alpha, r[i]->warmup);
    if (o->n_steps < 1 || o->max_dumps < 1 || o->max_bytes == 0)
        return tsc_error_set(TSC_ERR_ARG, "flight recorder %s: n_steps %d, max_dumps %d and max_bytes %llu must be "
                             "positive", path, o->n_steps, o->max_dumps, (unsigned long long)o->max_bytes);
    if (o->store_fmt < 0 || o->store_fmt > (int)TSC_FMT_COUNT || o->deflate < 0 || o->deflate > 9)
        return tsc_error_set(TSC_ERR_ARG, "flight recorder %s: store_fmt %d or deflate %d out of range", path,
                             o->store_fmt, o->deflate);
    return TSC_OK;
}

/* ---- the spike rule --------------------------------------------------------------------------- */

/* 1 when v fires rule r against the baseline b; why gets the sentence. */
static int spike_fires(const flight_series_t *b, const tsc_flight_spike_t *r, const char *what, double v,
                       char *why, size_t cap) {
    if (b->n < r->warmup) return 0;
    double spread = fmax(b->s, 0.01 * fabs(b->m));
    if (r->k > 0 && v > b->m + r->k * spread) {
        snprintf(why, cap, "%s %.6g > baseline %.6g + %g x spread %.6g", what, v, b->m, r->k, spread);
        return 1;
    }
    if (r->factor > 0 && b->m > 0 && v > r->factor * b->m) {
        snprintf(why, cap, "%s %.6g > %g x baseline %.6g", what, v, r->factor, b->m);
        return 1;
    }
    return 0;
}

static void series_add(flight_series_t *b, const tsc_flight_spike_t *r, double v) {
    if (b->n++ == 0) { b->m = v; b->s = 0; return; }
    double d = fabs(v - b->m);
    b->m += r->alpha * (v - b->m);
    b->s += r->alpha * (d - b->s);
}

/* ---- writing a dump --------------------------------------------------------------------------- */

/* Dump i (from 1): path, then "<stem>.<i>.h5". */
static void dump_name(const tsc_flight_t *fr, int i, char *buf, size_t cap) {
    size_t n = strlen(fr->path);
    if (i == 1) snprintf(buf, cap, "%s", fr->path);
    else if (n > 3 && !strcmp(fr->path + n - 3, ".h5")) snprintf(buf, cap, "%.*s.%d.h5", (int)(n - 3), fr->path, i);
    else snprintf(buf, cap, "%s.%d", fr->path, i);
}

/* TSC_ERR_IO when name, or its capture folder, exists: a flight dump never replaces a file. */
static tsc_status_t name_free(const char *name) {
    struct stat sb;
    char dir[4300];
    snprintf(dir, sizeof dir, "%s.capture", name);
    const char *taken = lstat(name, &sb) == 0 ? name : lstat(dir, &sb) == 0 ? dir : NULL;
    if (taken)
        return tsc_error_set(TSC_ERR_IO, "flight recorder: %s exists; a flight dump never overwrites a file", taken);
    return tsc_out_check(name);
}

/* The ring's steps, oldest first, through one capture session. A step that fails is dropped
 * and the others still go in; the first error is returned. */
static tsc_status_t write_steps(tsc_flight_t *fr, tsc_capture_t *cap) {
    tsc_status_t first = TSC_OK;
    int S = fr->n_slots;
    unsigned char *host = NULL; /* a device ring's slot, copied back */
#ifdef TSC_HAVE_CUDA
    if (fr->opts.device) {
        host = malloc(fr->step_bytes ? fr->step_bytes : 1);
        if (!host) return tsc_error_set(TSC_ERR_NOMEM, "flight recorder %s: out of memory", fr->path);
        cudaError_t e = cudaDeviceSynchronize(); /* the puts' asynchronous copies */
        if (e != cudaSuccess) {
            free(host);
            return tsc_error_set(TSC_ERR_IO, "flight recorder %s: the device: %s", fr->path, cudaGetErrorString(e));
        }
    }
#endif
    for (int i = 0; i < fr->count; i++) {
        int slot = (fr->head - fr->count + i + S) % S;
        const unsigned char *pres = fr->present + (size_t)slot * fr->n_ent;
        const unsigned char *base = fr->ring + (size_t)slot * fr->step_bytes;
#ifdef TSC_HAVE_CUDA
        if (host) {
            cudaError_t e = cudaMemcpy(host, base, fr->step_bytes, cudaMemcpyDeviceToHost);
            if (e != cudaSuccess) {
                if (first == TSC_OK)
                    first = tsc_error_set(TSC_ERR_IO, "flight recorder %s: copying step %lld from the device: %s",
                                          fr->path, fr->slot_step[slot], cudaGetErrorString(e));
                continue;
            }
            base = host;
        }
#endif
        tsc_status_t st = tsc_capture_step_begin(cap, fr->slot_step[slot]);
        for (int e = 0; st == TSC_OK && e < fr->n_ent; e++) {
            const flight_entry_t *t = &fr->ent[e];
            if (pres[e]) st = tsc_capture_put(cap, t->layer, t->name, t->fmt, t->rank, t->dims, base + t->offset);
        }
        if (st == TSC_OK && fr->tok_has && fr->tok_has[slot]) {
            const int64_t *ids = fr->tok + (size_t)slot * (size_t)fr->meta.batch * (size_t)fr->meta.seq_len;
            st = fr->tok_bytes_text ? tsc_capture_put_byte_tokens(cap, ids) : tsc_capture_put_tokens(cap, ids, NULL);
        }
        if (st == TSC_OK) st = tsc_capture_step_end(cap);
        if (st != TSC_OK && first == TSC_OK) first = st;
    }
    free(host);
    return first;
}

/* Writes dump number n_dumps + 1 with the trigger's root attributes. */
static tsc_status_t write_dump(tsc_flight_t *fr, const char *trigger, const char *reason) {
    char name[4200];
    dump_name(fr, fr->n_dumps + 1, name, sizeof name);
    tsc_status_t st = name_free(name);
    if (st != TSC_OK) return st;
    tsc_capture_opts_t co = {.store_fmt = fr->opts.store_fmt, .deflate = fr->opts.deflate};
    tsc_capture_t *cap;
    st = tsc_capture_open(&cap, name, &fr->meta, &co);
    if (st != TSC_OK) return tsc_error_wrap(st, "flight recorder: ");
    long long at = fr->count ? fr->slot_step[(fr->head - 1 + fr->n_slots) % fr->n_slots] : -1;
    tsc_capture_attr_t a[] = {
        {"flight_trigger", trigger, 0, 0}, {"flight_reason", reason, 0, 0},
        {"flight_step", NULL, 1, (double)at}, {"flight_n_steps", NULL, 1, fr->opts.n_steps},
        {"flight_loss", NULL, 0, fr->last_loss}, {"flight_grad_norm", NULL, 0, fr->last_grad},
        {"flight_loss_baseline", NULL, 0, fr->loss.n ? fr->loss.m : NAN},
        {"flight_loss_spread", NULL, 0, fr->loss.n ? fr->loss.s : NAN},
        {"flight_grad_baseline", NULL, 0, fr->grad.n ? fr->grad.m : NAN},
        {"flight_grad_spread", NULL, 0, fr->grad.n ? fr->grad.s : NAN},
    };
    st = tsc_capture_root_attrs(cap, a, (int)(sizeof a / sizeof a[0]));
    if (st == TSC_OK) st = write_steps(fr, cap);
    tsc_status_t cst = tsc_capture_close(cap);
    if (st == TSC_OK) st = cst;
    snprintf(fr->last_dump, sizeof fr->last_dump, "%s", name);
    return st == TSC_OK ? TSC_OK : tsc_error_wrap(st, "flight recorder, writing %s: ", name);
}

/* Fires: writes the dump, then stops (the last dump, or a signal) or empties the ring to re-arm. */
static tsc_status_t fire(tsc_flight_t *fr, const char *trigger, const char *reason, int *fired) {
    tsc_status_t st = write_dump(fr, trigger, reason);
    if (fired) *fired = 1;
    fr->n_dumps++;
    if (fr->opts.keep_newest && fr->n_dumps > fr->opts.max_dumps) {
        /* the oldest one kept: a file this recorder wrote (dump_name), never another */
        char old[4200];
        dump_name(fr, fr->n_dumps - fr->opts.max_dumps, old, sizeof old);
        if (unlink(old) != 0 && errno != ENOENT && st == TSC_OK)
            st = tsc_error_set(TSC_ERR_IO, "flight recorder: removing the older dump %s: %s", old, strerror(errno));
    }
    if ((!fr->opts.keep_newest && fr->n_dumps >= fr->opts.max_dumps) || !strcmp(trigger, "signal")) fr->stopped = 1;
    fr->count = 0;
    fr->since_fire = 0;
    return st;
}

/* A caught signal not served yet: write the dump (when a step was recorded) and stop. */
static tsc_status_t poll_signal(tsc_flight_t *fr, int *fired) {
    if (g_sig_owner != fr || !g_signal || fr->sig_served) return TSC_OK;
    fr->sig_served = 1;
    if (fr->stopped || fr->count == 0) { fr->stopped = 1; return TSC_OK; }
    char why[64];
    snprintf(why, sizeof why, "%s received", g_signal == SIGINT ? "SIGINT" : "SIGTERM");
    return fire(fr, "signal", why, fired);
}

/* The end of a step on every process of opts.comm: whether any process caught a signal or has a
 * trigger (the lowest one's reason is broadcast), then every process fires, or none. Every
 * process takes part whatever its own step's status, so none waits for one that failed. */
static tsc_status_t step_end_agreed(tsc_flight_t *fr, long long step, tsc_status_t st, const char *trigger,
                                    const char *why, int *fired) {
    const tsc_comm_t *c = fr->opts.comm;
    int sig = g_sig_owner == fr && g_signal && !fr->sig_served ? (int)g_signal : 0;
    int armed = !(fr->count == 0 || (fr->n_dumps > 0 && fr->since_fire < fr->opts.n_steps));
    int want = st == TSC_OK && trigger && armed;
    /* the lowest process with a signal, with a trigger (max of size - rank), and the signal */
    int64_t v[3] = {sig ? c->size - c->rank : 0, want ? c->size - c->rank : 0, sig};
    tsc_status_t cs = c->max_i64(c->ctx, v, 3);
    if (cs != TSC_OK) return st != TSC_OK ? st : cs;
    if (v[0]) {
        int from = c->size - (int)v[0];
        fr->sig_served = 1;
        fr->sig_agreed = (int)v[2];
        if (fr->stopped || fr->count == 0) {
            fr->stopped = 1;
            return st;
        }
        char reason[128];
        snprintf(reason, sizeof reason, "%s received by process %d of %d", v[2] == SIGINT ? "SIGINT" : "SIGTERM", from,
                 c->size);
        tsc_status_t fst = fire(fr, "signal", reason, fired);
        return st != TSC_OK ? st : fst;
    }
    if (!v[1]) return st;
    int from = c->size - (int)v[1];
    char msg[32 + 320] = "";
    if (c->rank == from) {
        snprintf(msg, 32, "%s", trigger);
        snprintf(msg + 32, 320, "%s at step %lld on process %d of %d", why, step, from, c->size);
    }
    if ((cs = c->bcast(c->ctx, from, msg, sizeof msg)) != TSC_OK) return st != TSC_OK ? st : cs;
    if (st != TSC_OK || fr->stopped || !armed) return st;
    return fire(fr, msg, msg + 32, fired);
}

/* ---- the recorder ----------------------------------------------------------------------------- */

tsc_status_t tsc_flight_open(tsc_flight_t **out, const char *path, const tsc_dump_meta_t *meta,
                             const tsc_flight_opts_t *opts) {
    *out = NULL;
    if (!path || !*path) return tsc_error_set(TSC_ERR_ARG, "flight recorder: empty output path");
    if (strlen(path) >= 4000) return tsc_error_set(TSC_ERR_ARG, "flight recorder: path too long");
    tsc_flight_opts_t o;
    if (opts) o = *opts;
    else tsc_flight_opts_init(&o);
    tsc_status_t st = opts_check(&o, path);
    if (st != TSC_OK) return st;
    if (o.device && !tsc_cuda_available())
        return tsc_error_set(TSC_ERR_UNSUPPORTED, "flight recorder %s: a ring in GPU memory needs a GPU (%s)", path,
                             tsc_cuda_describe());
    if ((st = tsc_dump_meta_check(meta)) != TSC_OK) return tsc_error_wrap(st, "flight recorder %s: ", path);
    if ((st = name_free(path)) != TSC_OK) return st;
    tsc_flight_t *fr = calloc(1, sizeof *fr);
    if (!fr) return tsc_error_set(TSC_ERR_NOMEM, "flight recorder %s: out of memory", path);
    tsc_select_set_all(&fr->layers);
    if (o.layers && (st = tsc_select_set_parse(&fr->layers, o.layers)) != TSC_OK) {
        free(fr);
        return tsc_error_wrap(st, "flight recorder %s: layers ", path);
    }
    o.layers = NULL;  /* not kept: the caller's string may not outlive the recorder */
    fr->n_slots = o.n_steps + 1;
    fr->slot_step = calloc((size_t)fr->n_slots, sizeof *fr->slot_step);
    if (!fr->slot_step) { free(fr); return tsc_error_set(TSC_ERR_NOMEM, "flight recorder %s: out of memory", path); }
    snprintf(fr->path, sizeof fr->path, "%s", path);
    fr->meta = *meta;
    fr->opts = o;
    fr->cur_step = fr->last_step = -1;
    *out = fr;
    return TSC_OK;
}

int tsc_flight_wants(const tsc_flight_t *fr, int layer) {
    return !fr->stopped && layer >= 0 && layer < fr->meta.n_layer && tsc_select_set_has(&fr->layers, layer);
}

/* Forgets the open step's tensors: the first step's copies, or the slot's presence marks. */
static void drop_open_step(tsc_flight_t *fr) {
    if (!fr->ring) {
        for (int e = 0; e < fr->n_ent; e++) free(fr->ent[e].first);
        fr->n_ent = 0;
    } else {
        memset(fr->present + (size_t)fr->head * fr->n_ent, 0, (size_t)fr->n_ent);
    }
    if (fr->tok_has) fr->tok_has[fr->head] = 0;
    fr->tensor_bad = 0;
}

tsc_status_t tsc_flight_step_begin(tsc_flight_t *fr, long long step) {
    tsc_status_t st = poll_signal(fr, NULL);
    if (fr->stopped) return st;
    if (fr->cur_step >= 0) drop_open_step(fr);
    fr->cur_step = -1;
    if (step < 0 || step <= fr->last_step)
        return tsc_error_set(TSC_ERR_ARG, "flight recorder %s: step %lld does not follow step %lld", fr->path, step,
                             fr->last_step);
    fr->cur_step = fr->last_step = step;
    if (fr->tok_has) fr->tok_has[fr->head] = 0; /* a step that took no slot left its tokens there */
    return st;
}

/* Index of the first non-finite element of n values in fmt, or -1. */
static long long first_nonfinite(tsc_format_t fmt, const void *data, size_t n) {
    float buf[1024];
    for (size_t i = 0; i < n; i += 1024) {
        size_t m = n - i < 1024 ? n - i : 1024;
        if (fmt == TSC_FMT_FP64) {
            for (size_t j = 0; j < m; j++)
                if (!isfinite(((const double *)data)[i + j])) return (long long)(i + j);
            continue;
        }
        tsc_convert_to_f32(fmt, (const char *)data + i * tsc_format_size(fmt), buf, m);
        for (size_t j = 0; j < m; j++)
            if (!isfinite(buf[j])) return (long long)(i + j);
    }
    return -1;
}

/* The entry of (layer, name), or -1. */
static int find_entry(const tsc_flight_t *fr, int layer, const char *name) {
    for (int e = 0; e < fr->n_ent; e++)
        if (fr->ent[e].layer == layer && !strcmp(fr->ent[e].name, name)) return e;
    return -1;
}

/* The first step: a new entry with its own copy of the data. */
static tsc_status_t add_entry(tsc_flight_t *fr, int layer, const char *name, tsc_format_t fmt, int rank,
                              const uint64_t *dims, size_t bytes, const void *data, int from_device) {
    if (fr->n_ent == fr->cap_ent) {
        int cap = fr->cap_ent ? 2 * fr->cap_ent : 16;
        flight_entry_t *p = realloc(fr->ent, sizeof *p * (size_t)cap);
        if (!p) return tsc_error_set(TSC_ERR_NOMEM, "flight recorder %s: out of memory", fr->path);
        fr->ent = p;
        fr->cap_ent = cap;
    }
    flight_entry_t *t = &fr->ent[fr->n_ent];
    memset(t, 0, sizeof *t);
    t->first = malloc(bytes ? bytes : 1);
    if (!t->first) return tsc_error_set(TSC_ERR_NOMEM, "flight recorder %s: out of memory", fr->path);
    if (!from_device) {
        memcpy(t->first, data, bytes);
    } else {
#ifdef TSC_HAVE_CUDA
        cudaError_t e = cudaMemcpy(t->first, data, bytes, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) {
            free(t->first);
            t->first = NULL;
            return tsc_error_set(TSC_ERR_IO, "flight recorder %s: copying '%s' from the device: %s", fr->path, name,
                                 cudaGetErrorString(e));
        }
#endif
    }
    t->layer = layer;
    snprintf(t->name, sizeof t->name, "%s", name);
    t->fmt = fmt;
    t->rank = rank;
    memcpy(t->dims, dims, sizeof(uint64_t) * (size_t)rank);
    t->bytes = bytes;
    fr->n_ent++;
    return TSC_OK;
}

/* Checks a tensor against the metadata: its byte size into *bytes. */
static tsc_status_t put_check(const tsc_flight_t *fr, int layer, const char *name, tsc_format_t fmt, int rank,
                              const uint64_t *dims, const void *data, size_t *bytes) {
    if (!name || strlen(name) >= TSC_DUMP_NAME_MAX || !data || !dims)
        return tsc_error_set(TSC_ERR_ARG, "flight recorder %s: put: NULL or too long argument", fr->path);
    if ((unsigned)fmt >= (unsigned)TSC_FMT_COUNT)
        return tsc_error_set(TSC_ERR_ARG, "flight recorder %s: put('%s'): unknown format %d", fr->path, name, (int)fmt);
    int erank, per_head;
    uint64_t ed[4];
    tsc_status_t st = tsc_dump_expected_shape(&fr->meta, name, &erank, ed, &per_head);
    if (st != TSC_OK) return tsc_error_wrap(st, "flight recorder %s: ", fr->path);
    int same = rank == erank;
    for (int i = 0; same && i < rank; i++) same = dims[i] == ed[i];
    if (!same)
        return tsc_error_set(TSC_ERR_SHAPE, "flight recorder %s: layer %d '%s' has rank %d shape [%llu, ...], the "
                             "metadata wants rank %d [%llu, ...]", fr->path, layer, name, rank,
                             rank > 0 ? (unsigned long long)dims[0] : 0ULL, erank, (unsigned long long)ed[0]);
    *bytes = tsc_format_size(fmt);
    for (int i = 0; i < rank; i++) *bytes *= (size_t)dims[i];
    return TSC_OK;
}

/* Copies bytes into the ring at dst: host or device memory on either side (a device ring or a
 * device source needs CUDA; stream orders a device source's copy after the work that wrote it). */
static tsc_status_t ring_copy(tsc_flight_t *fr, unsigned char *dst, const void *src, size_t bytes, int from_device,
                              void *stream) {
    if (!fr->opts.device && !from_device) {
        memcpy(dst, src, bytes);
        return TSC_OK;
    }
#ifdef TSC_HAVE_CUDA
    const enum cudaMemcpyKind kind = fr->opts.device ? (from_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                                     : cudaMemcpyDeviceToHost;
    cudaError_t e = fr->opts.device && from_device ? cudaMemcpyAsync(dst, src, bytes, kind, (cudaStream_t)stream)
                                                   : cudaMemcpy(dst, src, bytes, kind);
    if (e != cudaSuccess)
        return tsc_error_set(TSC_ERR_IO, "flight recorder %s: copying into the ring: %s", fr->path, cudaGetErrorString(e));
    return TSC_OK;
#else
    (void)stream;
    return tsc_error_set(TSC_ERR_UNSUPPORTED, "flight recorder %s: device memory needs a CUDA build", fr->path);
#endif
}

static tsc_status_t put_any(tsc_flight_t *fr, int layer, const char *name, tsc_format_t fmt, int rank,
                            const uint64_t *dims, const void *data, int from_device, void *stream) {
    if (fr->stopped) return TSC_OK;
    if (fr->cur_step < 0)
        return tsc_error_set(TSC_ERR_ARG, "flight recorder %s: put('%s') outside a step", fr->path, name ? name : "");
    if (layer < 0 || layer >= fr->meta.n_layer)
        return tsc_error_set(TSC_ERR_ARG, "flight recorder %s: put('%s'): layer %d outside 0..%d", fr->path,
                             name ? name : "", layer, fr->meta.n_layer - 1);
    if (!tsc_select_set_has(&fr->layers, layer)) return TSC_OK;
    size_t bytes = 0;
    tsc_status_t st = put_check(fr, layer, name, fmt, rank, dims, data, &bytes);
    if (st != TSC_OK) return st;
    int e = find_entry(fr, layer, name);
    if (!fr->ring) {
        if (e >= 0)
            return tsc_error_set(TSC_ERR_ARG, "flight recorder %s: step %lld: layer %d '%s' handed over twice",
                                 fr->path, fr->cur_step, layer, name);
        st = add_entry(fr, layer, name, fmt, rank, dims, bytes, data, from_device);
    } else {
        const flight_entry_t *t = e >= 0 ? &fr->ent[e] : NULL;
        if (!t || t->fmt != fmt || t->bytes != bytes)
            return tsc_error_set(TSC_ERR_ARG, "flight recorder %s: step %lld: layer %d '%s' (%s) is not in the "
                                 "layout the first step fixed%s", fr->path, fr->cur_step, layer, name,
                                 tsc_format_name(fmt), t ? " (another format or size)" : "");
        unsigned char *pres = fr->present + (size_t)fr->head * fr->n_ent + e;
        if (*pres)
            return tsc_error_set(TSC_ERR_ARG, "flight recorder %s: step %lld: layer %d '%s' handed over twice",
                                 fr->path, fr->cur_step, layer, name);
        st = ring_copy(fr, fr->ring + (size_t)fr->head * fr->step_bytes + t->offset, data, bytes, from_device, stream);
        if (st != TSC_OK) return st;
        *pres = 1;
    }
    if (st == TSC_OK && fr->opts.check_tensors && !fr->tensor_bad && !from_device) {
        long long i = first_nonfinite(fmt, data, bytes / tsc_format_size(fmt));
        if (i >= 0) {
            fr->tensor_bad = 1;
            snprintf(fr->tensor_what, sizeof fr->tensor_what, "layer %d '%s' element %lld", layer, name, i);
        }
    }
    return st;
}

tsc_status_t tsc_flight_put(tsc_flight_t *fr, int layer, const char *name, tsc_format_t fmt, int rank,
                            const uint64_t *dims, const void *data) {
    return put_any(fr, layer, name, fmt, rank, dims, data, 0, NULL);
}

tsc_status_t tsc_flight_put_device(tsc_flight_t *fr, int layer, const char *name, tsc_format_t fmt, int rank,
                                   const uint64_t *dims, const void *dev, void *stream) {
    if (!tsc_cuda_available())
        return tsc_error_set(TSC_ERR_UNSUPPORTED, "flight recorder %s: device tensors need a GPU (%s)", fr->path,
                             tsc_cuda_describe());
    return put_any(fr, layer, name, fmt, rank, dims, dev, 1, stream);
}

static void ring_free(tsc_flight_t *fr) {
#ifdef TSC_HAVE_CUDA
    if (fr->opts.device) {
        if (fr->ring) cudaFree(fr->ring);
        fr->ring = NULL;
        return;
    }
#endif
    free(fr->ring);
    fr->ring = NULL;
}

/* The first step with tensors ends: checks the bound, allocates the ring once and moves the
 * step into slot 0. On TSC_ERR_ARG / NOMEM the step is dropped and the next one tries again. */
static tsc_status_t fix_layout(tsc_flight_t *fr) {
    size_t total = 0;
    for (int e = 0; e < fr->n_ent; e++) {
        fr->ent[e].offset = total;
        total += (fr->ent[e].bytes + 63) & ~(size_t)63;   /* slots keep every tensor 64-byte aligned */
    }
    uint64_t N = (uint64_t)fr->n_slots;
    tsc_status_t st = TSC_OK;
    if (total > fr->opts.max_bytes / N) {
        st = tsc_error_set(TSC_ERR_ARG, "flight recorder %s: a ring of %llu slots (n_steps + 1 for the step in "
                           "progress) x %zu bytes per step is more than max_bytes %llu bytes; lower n_steps, keep fewer "
                           "layers, or raise max_bytes", fr->path,
                           (unsigned long long)N, total, (unsigned long long)fr->opts.max_bytes);
    } else {
        if (!fr->opts.device) fr->ring = malloc((size_t)(N * total));
#ifdef TSC_HAVE_CUDA
        else if (cudaMalloc((void **)&fr->ring, (size_t)(N * total)) != cudaSuccess) fr->ring = NULL;
#endif
        fr->present = calloc((size_t)N * (size_t)fr->n_ent, 1);
        if (!fr->ring || !fr->present) {
            ring_free(fr);
            free(fr->present);
            fr->present = NULL;
            st = tsc_error_set(TSC_ERR_NOMEM, "flight recorder %s: cannot allocate the ring (%llu bytes)", fr->path,
                               (unsigned long long)(N * total));
        }
    }
    if (st != TSC_OK) { drop_open_step(fr); return st; }
    fr->step_bytes = total;
    for (int e = 0; e < fr->n_ent; e++) {
        st = ring_copy(fr, fr->ring + fr->ent[e].offset, fr->ent[e].first, fr->ent[e].bytes, 0, NULL);
        if (st != TSC_OK) { /* back to no ring: the next step with tensors tries again */
            ring_free(fr);
            free(fr->present);
            fr->present = NULL;
            drop_open_step(fr);
            return st;
        }
        free(fr->ent[e].first);
        fr->ent[e].first = NULL;
        fr->present[e] = 1;   /* slot 0 is head (0) while the ring is new */
    }
    return TSC_OK;
}

/* Enters one series' value: non-finite or a spike fires (trigger, why set), else the baseline
 * takes it. */
static void series_check(flight_series_t *b, const tsc_flight_spike_t *r, const char *what, double v,
                        const char **trigger, char *why, size_t cap) {
    if (!isfinite(v)) {
        *trigger = !strcmp(what, "loss") ? "nonfinite_loss" : "nonfinite_grad_norm";
        snprintf(why, cap, "%s is %g", what, v);
        return;
    }
    if (spike_fires(b, r, what, v, why, cap)) {
        *trigger = !strcmp(what, "loss") ? "loss_spike" : "grad_norm_spike";
        return;
    }
    series_add(b, r, v);
}

/* Moves the ended step into the ring (the first step with tensors fixes it). A step that handed
 * nothing over takes no slot. */
static tsc_status_t record_step(tsc_flight_t *fr, long long step) {
    if (!fr->ring && fr->n_ent > 0) {
        tsc_status_t st = fix_layout(fr);
        if (st != TSC_OK) return st;
    }
    int recorded = 0;
    if (fr->ring) {
        const unsigned char *pres = fr->present + (size_t)fr->head * fr->n_ent;
        for (int e = 0; e < fr->n_ent && !recorded; e++) recorded = pres[e];
    }
    if (!recorded) return TSC_OK;
    fr->slot_step[fr->head] = step;
    fr->head = (fr->head + 1) % fr->n_slots;   /* the oldest slot, or a free one */
    if (fr->count < fr->opts.n_steps) fr->count++;
    memset(fr->present + (size_t)fr->head * fr->n_ent, 0, (size_t)fr->n_ent);
    if (fr->tok_has) fr->tok_has[fr->head] = 0;
    fr->since_fire++;
    return TSC_OK;
}

/* Enters the step's values into both baselines (each skips only its own spikes) and returns the
 * trigger that fires (loss first, then grad norm, then a tensor), or NULL; why gets the sentence. */
static const char *step_trigger(tsc_flight_t *fr, double loss, double grad_norm, char *why, size_t cap) {
    const char *trigger = NULL, *grad_trigger = NULL;
    char grad_why[256];
    series_check(&fr->loss, &fr->opts.loss, "loss", loss, &trigger, why, cap);
    series_check(&fr->grad, &fr->opts.grad, "grad norm", grad_norm, &grad_trigger, grad_why, sizeof grad_why);
    if (!trigger && grad_trigger) {
        trigger = grad_trigger;
        snprintf(why, cap, "%s", grad_why);
    }
    if (!trigger && fr->tensor_bad) {
        trigger = "nonfinite_tensor";
        snprintf(why, cap, "non-finite value in %s", fr->tensor_what);
    }
    fr->tensor_bad = 0;
    return trigger;
}

tsc_status_t tsc_flight_step_end(tsc_flight_t *fr, double loss, double grad_norm, int *fired) {
    if (fired) *fired = 0;
    /* a job's stopped recorders still agree on a signal: the run stops on every process */
    if (fr->stopped) return agreed(fr) ? step_end_agreed(fr, -1, TSC_OK, NULL, "", fired) : TSC_OK;
    long long step = fr->cur_step;
    fr->cur_step = -1;
    tsc_status_t st = step < 0 ? tsc_error_set(TSC_ERR_ARG, "flight recorder %s: step_end without step_begin",
                                               fr->path)
                               : record_step(fr, step);
    char why[256];
    const char *trigger = st == TSC_OK ? step_trigger(fr, loss, grad_norm, why, sizeof why) : NULL;
    if (st == TSC_OK) {
        fr->last_loss = loss;
        fr->last_grad = grad_norm;
    }
    if (agreed(fr)) return step_end_agreed(fr, step, st, trigger, why, fired);
    /* a caught signal: its dump (with this step) and the recorder stops */
    tsc_status_t sst = poll_signal(fr, fired);
    if (fr->stopped || st != TSC_OK) return st != TSC_OK ? st : sst;
    /* re-armed: the first dump always; a later one once N steps were recorded since the last */
    if (!trigger || fr->count == 0 || (fr->n_dumps > 0 && fr->since_fire < fr->opts.n_steps)) return TSC_OK;
    char reason[320];
    snprintf(reason, sizeof reason, "%s at step %lld", why, step);
    return fire(fr, trigger, reason, fired);
}

tsc_status_t tsc_flight_trigger(tsc_flight_t *fr, const char *reason) {
    int served = 0;
    tsc_status_t st = poll_signal(fr, &served);
    if (served || st != TSC_OK) return st;  /* the signal's dump is the one written */
    if (fr->stopped)
        return tsc_error_set(TSC_ERR_ARG, "flight recorder %s: stopped after %d dump(s)", fr->path, fr->n_dumps);
    if (fr->count == 0)
        return tsc_error_set(TSC_ERR_ARG, "flight recorder %s: no completed step to write", fr->path);
    return fire(fr, "manual", reason && *reason ? reason : "manual trigger", NULL);
}

int tsc_flight_n_dumps(const tsc_flight_t *fr) { return fr->n_dumps; }
const char *tsc_flight_last_dump(const tsc_flight_t *fr) { return fr->last_dump; }
int tsc_flight_stopped(const tsc_flight_t *fr) { return fr->stopped; }

tsc_status_t tsc_flight_close(tsc_flight_t *fr) {
    if (!fr) return TSC_OK;
    /* a job's recorder writes only what every process writes (tsc_flight_step_end), never alone at close */
    tsc_status_t st = agreed(fr) ? TSC_OK : poll_signal(fr, NULL);
    signals_restore(fr);
    if (!fr->ring) drop_open_step(fr);
    free(fr->ent);
    ring_free(fr);
    free(fr->present);
    free(fr->slot_step);
    free(fr->tok), free(fr->tok_has);
    free(fr);
    return st;
}

tsc_status_t tsc_flight_put_tokens(tsc_flight_t *fr, const int64_t *ids, int bytes_as_text) {
    if (fr->stopped) return TSC_OK;
    if (fr->cur_step < 0) return tsc_error_set(TSC_ERR_ARG, "flight recorder %s: tokens outside a step", fr->path);
    size_t n = (size_t)fr->meta.batch * (size_t)fr->meta.seq_len;
    if (!fr->tok) {
        fr->tok = malloc((size_t)fr->n_slots * n * sizeof *fr->tok);
        fr->tok_has = calloc((size_t)fr->n_slots, 1);
        if (!fr->tok || !fr->tok_has) {
            free(fr->tok), free(fr->tok_has);
            fr->tok = NULL, fr->tok_has = NULL;
            return tsc_error_set(TSC_ERR_NOMEM, "flight recorder %s: no memory for %d steps of tokens", fr->path,
                                 fr->n_slots);
        }
    }
    memcpy(fr->tok + (size_t)fr->head * n, ids, n * sizeof *ids);
    fr->tok_has[fr->head] = 1;
    fr->tok_bytes_text = bytes_as_text;
    return TSC_OK;
}
