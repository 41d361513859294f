/* train.c: the training loop of `tilescope train` (tsc_train.h): per-layer attention policies,
 * AdamW, the run folder's log files, checkpoints and resume, capture. It stands on settings.c
 * (what a setting may be) and ckpt.c (run.cfg and the checkpoint files); neither calls it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "spectral_internal.h"
#include "train_internal.h"
#include "tsc_capture.h"
#include "tsc_comm.h"
#include "tsc_data.h"
#include "tsc_file.h"
#include "tsc_flight.h"
#include "tsc_manifest.h"
#include "tsc_mem.h"
#include "tsc_select.h"

/* ---- the run ---- */

typedef struct {
    tsc_train_opts_t o;
    const char *dir;
    tsc_model_t *model;
    tsc_model_config_t cfg;
    tsc_data_t *data;
    tsc_batch_order_t *order;   /* a replayed order, or NULL */
    tsc_batch_log_t *blog;
    int B, T, L, threads;
    size_t n, elsize;
    void *m, *v;                /* AdamW moments, like the parameters */
    int32_t *x, *y;
    uint64_t *offsets;
    FILE *log, *wq;
    tsc_capture_t *cap;
    tsc_flight_t *flight;       /* the flight recorder, or NULL */
    uint16_t *scratch;          /* BF16 bits of one tensor handed to either (B * T * C: x, q, o, do the largest) */
    double *wq_sn;              /* [L * H] of the last stats step */
    char *cfg_text;
    tsc_train_cfg_t *resumed;   /* settings read back by a resume (r->o's strings point into it) */
    /* gradient shards and processes (tsc_train_opts_t.grad_shards, .comm) */
    const tsc_comm_t *comm;     /* the job's processes; rank 0 alone touches the run folder */
    int G, Bs, j0, j1;          /* shards, rows per shard, this process's shards [j0, j1) */
    void *gsh;                  /* the gradients of this process's shards but the last, [j1 - j0 - 1][n] */
    unsigned char *msg;         /* the chain's message: gradient sum [n], loss sum, max_logit [L], tied [L] */
    size_t msg_bytes;
    double chain_s;             /* this step's time in the chain: waiting for, receiving and passing on the sum */
    double *st_max;             /* [L] this step's max_logit over every shard (NULL: the one forward's view) */
    long long *st_tied;         /* [L] and tied rows summed over the shards */
    int shared, released;       /* rank 0: the others have the settings and state; were told to stop */
    char cap_stem[64], fl_stem[64]; /* on several processes: the recorders' names, "<stem>.rank<R>.h5" */
    char dir_buf[4096];         /* a worker's copy of process 0's run folder (its recorders write there) */
    char fl_report[4200];       /* the flight dump (its manifest) a step reports */
    char path[4096];
} run_t;

/* Whether the step runs in shards (the batch in G pieces, or several processes). */
static int sharded(const run_t *r) { return r->G > 1 || r->comm->size > 1; }

static const char *run_file(run_t *r, const char *name) {
    snprintf(r->path, sizeof r->path, "%s/%s", r->dir, name);
    return r->path;
}

static double lr_at(const tsc_train_opts_t *o, long long s) {
    if (s < o->warmup) return o->lr * (double)(s + 1) / o->warmup;
    double lo = o->lr * o->min_lr_frac;
    long long span = o->steps - 1 - o->warmup;
    double p = span > 0 ? (double)(s - o->warmup) / (double)span : 1.0;
    if (p > 1) p = 1;
    return lo + 0.5 * (1 + cos(M_PI * p)) * (o->lr - lo);
}

/* The global L2 norm of the gradients, summed in double in index order. */
static double grad_norm(const run_t *r) {
    double s = 0;
    if (r->elsize == 8) {
        const double *g = tsc_model_grads(r->model);
        for (size_t i = 0; i < r->n; i++) s += g[i] * g[i];
    } else {
        const float *g = tsc_model_grads(r->model);
        for (size_t i = 0; i < r->n; i++) s += (double)g[i] * g[i];
    }
    return sqrt(s);
}

/* AdamW (decoupled weight decay on the tensors marked decay), gradients scaled by `scale` (clip);
 * the same statements in FP32 or FP64 (T). */
#define ADAMW_BODY(T)                                                                            \
    T *p = tsc_model_params(r->model), *g = tsc_model_grads(r->model), *m = r->m, *v = r->v;    \
    T b1 = (T)r->o.beta1, b2 = (T)r->o.beta2, c1 = (T)(1 - pow(r->o.beta1, (double)t)),          \
      c2 = (T)(1 - pow(r->o.beta2, (double)t)), lrT = (T)lr, eps = (T)r->o.eps, sc = (T)scale;   \
    for (int k = 0; k < tsc_model_n_tensors(r->model); k++) {                                   \
        const tsc_model_tensor_t *tn = tsc_model_tensor(r->model, k);                           \
        T wd = tn->decay ? (T)r->o.weight_decay : 0;                                             \
        size_t end = tn->offset + (size_t)tn->rows * tn->cols;                                   \
        _Pragma("omp parallel for schedule(static)")                                             \
        for (size_t i = tn->offset; i < end; i++) {                                              \
            T gi = g[i] * sc;                                                                    \
            m[i] = b1 * m[i] + (1 - b1) * gi;                                                    \
            v[i] = b2 * v[i] + (1 - b2) * gi * gi;                                               \
            T mh = m[i] / c1, vh = v[i] / c2;                                                    \
            p[i] -= lrT * (mh / (sqrt(vh) + eps) + wd * p[i]);                                   \
        }                                                                                        \
    }

static void adamw_f32(run_t *r, long long t, double lr, double scale) { ADAMW_BODY(float) }
static void adamw_f64(run_t *r, long long t, double lr, double scale) { ADAMW_BODY(double) }

/* Layer l's attention weight w ("w_q", "w_k", "w_v", "w_o"); NULL with the error set when the model
 * lacks it. */
static const tsc_model_tensor_t *attn_weight(const run_t *r, int l, const char *w) {
    char name[64];
    snprintf(name, sizeof name, "h.%d.attn.%s", l, w);
    const tsc_model_tensor_t *tn = tsc_model_tensor_find(r->model, name);
    TSC_INVARIANT(tn != NULL); /* every layer of both architectures has w_q, w_k, w_v, w_o (model.c's layout) */
    return tn;
}

/* Per head of every layer, the spectral norm of W^Q's rows [h*D, (h+1)*D) (kernels/' one
 * definition, spectral_internal.h: the number analysis.h5's wq_head_norm holds for a captured
 * step). An iteration that did not settle is not an error here; its value is logged as it is. */
static tsc_status_t wq_norms(run_t *r) {
    int H = r->cfg.n_head, D = r->cfg.d_model / H, C = r->cfg.d_model;
    const char *base = tsc_model_params(r->model);
    for (int l = 0; l < r->L; l++) {
        const tsc_model_tensor_t *tn = attn_weight(r, l, "w_q");
        for (int h = 0; h < H; h++) {
            const char *wh = base + (tn->offset + (size_t)h * D * C) * r->elsize;
            tsc_spectral_t sn;
            tsc_status_t st = r->elsize == 8 ? tsc_spectral_norm_f64((const double *)wh, D, C, &sn)
                                             : tsc_spectral_norm_f32((const float *)wh, D, C, &sn);
            if (st != TSC_OK) return tsc_error_wrap(st, "layer %d head %d's W^Q: ", l, h);
            r->wq_sn[l * H + h] = sn.norm;
        }
    }
    return TSC_OK;
}

/* Mean validation loss over val_batches consecutive windows (each, in shards, the mean of its
 * shards' losses summed in order). */
static tsc_status_t val_loss(run_t *r, double *out) {
    double sum = 0;
    for (int i = 0; i < r->o.val_batches; i++) {
        double loss = 0, lj;
        tsc_status_t st = tsc_data_batch(r->data, TSC_SPLIT_VAL, r->o.seed, i, r->B, r->T, r->x, r->y, NULL);
        for (int j = 0; j < r->G && st == TSC_OK; j++) {
            size_t at = (size_t)j * r->Bs * r->T;
            if ((st = tsc_model_forward(r->model, r->x + at, r->y + at, &lj)) == TSC_OK) loss += lj;
        }
        if (st != TSC_OK) return tsc_error_wrap(st, "validation: ");
        sum += r->G > 1 ? loss / r->G : loss;
    }
    *out = sum / r->o.val_batches;
    return TSC_OK;
}

static void log_header(run_t *r) {
    fprintf(r->log, "step,lr,train_loss,val_loss,grad_norm");
    for (int l = 0; l < r->L; l++) fprintf(r->log, ",max_logit_%d", l);
    for (int l = 0; l < r->L; l++) fprintf(r->log, ",tied_rows_%d", l);
    for (int l = 0; l < r->L; l++) fprintf(r->log, ",wq_sn_%d", l);
    fprintf(r->log, "\n");
    fprintf(r->wq, "step,layer,head,wq_sn\n");
}

static tsc_status_t log_row(run_t *r, long long s, double lr, double loss, double vl, double gn, int stats) {
    fprintf(r->log, "%lld,%.9g,%.17g,", s, lr, loss);
    if (!isnan(vl)) fprintf(r->log, "%.17g", vl);
    fprintf(r->log, ",%.17g", gn);
    tsc_model_attn_view_t av;
    for (int pass = 0; pass < 2; pass++)
        for (int l = 0; l < r->L; l++) {
            tsc_status_t st = r->st_max ? TSC_OK : tsc_model_attn_view(r->model, l, &av);
            if (st != TSC_OK) return st;
            if (r->st_max) av.max_logit = r->st_max[l], av.tied_rows = r->st_tied[l];
            if (pass == 0) fprintf(r->log, ",%.9g", av.max_logit);
            else fprintf(r->log, ",%lld", av.tied_rows);
        }
    int H = r->cfg.n_head;
    for (int l = 0; l < r->L; l++) {
        double mx = 0;
        for (int h = 0; h < H && stats; h++) mx = fmax(mx, r->wq_sn[l * H + h]);
        if (stats) fprintf(r->log, ",%.9g", mx);
        else fprintf(r->log, ",");
    }
    fprintf(r->log, "\n");
    for (int l = 0; l < r->L && stats; l++)
        for (int h = 0; h < H; h++) fprintf(r->wq, "%lld,%d,%d,%.9g\n", s, l, h, r->wq_sn[l * H + h]);
    if (fflush(r->log) || fflush(r->wq) || ferror(r->log) || ferror(r->wq))
        return tsc_error_set(TSC_ERR_IO, "%s: cannot write the log: %s", r->dir, strerror(errno));
    return TSC_OK;
}

/* ---- capture ---- */

/* A dump's metadata; its policy string is the policy of `layer` (the lowest layer it keeps). TSC_ERR_ARG when
 * that policy's canonical string does not fit the dump's policy attribute. */
static tsc_status_t dump_meta(run_t *r, tsc_dump_meta_t *meta, int layer) {
    tsc_dump_meta_init(meta);
    meta->n_layer = r->L;
    meta->n_head = r->cfg.n_head;
    meta->n_kv_head = r->cfg.n_kv_head;
    meta->head_dim = r->cfg.d_model / r->cfg.n_head;
    meta->d_model = r->cfg.d_model;
    meta->seq_len = r->T;
    meta->batch = r->Bs; /* this process's rows: the whole batch on one process and one shard */
    meta->rank = r->comm->rank;
    meta->world_size = r->comm->size;
    meta->causal = 1;
    meta->softmax_scale = 1.0 / sqrt((double)meta->head_dim);
    const tsc_policy_t *pol = tsc_model_attn_policy(r->model, layer);
    meta->tile_q = pol->block_q;
    meta->tile_k = pol->block_k;
    snprintf(meta->producer, sizeof meta->producer, "tilescope-train %s", TSC_VERSION);
    char full[TSC_POLICY_STR_MAX];
    TSC_INVARIANT(tsc_policy_format(pol, full, sizeof full) == TSC_OK); /* the model's policies were parsed */
    if (strlen(full) >= sizeof meta->policy)
        return tsc_error_set(TSC_ERR_ARG, "layer %d's attention policy '%s' is longer than the %zu bytes a dump records "
                             "of it: capture from layers with a shorter policy", layer, full, sizeof meta->policy - 1);
    memcpy(meta->policy, full, strlen(full) + 1);
    return TSC_OK;
}

/* The lowest layer of a set (tsc_select.h grammar), 0 when it names none below L. */
static int first_layer(const tsc_select_set_t *set, int L) {
    for (int l = 0; l < L; l++)
        if (tsc_select_set_has(set, l)) return l;
    return 0;
}

/* Where a step's tensors go: the capture session or the flight recorder (one signature). */
typedef struct {
    tsc_status_t (*put)(void *sink, int layer, const char *name, tsc_format_t fmt, int rank, const uint64_t *dims,
                        const void *data);
    void *sink;
    uint16_t *scratch;          /* B * T * C BF16 values */
} sink_t;

static tsc_status_t cap_put(void *s, int l, const char *n, tsc_format_t f, int rank, const uint64_t *d, const void *p) {
    return tsc_capture_put(s, l, n, f, rank, d, p);
}
static tsc_status_t flight_put(void *s, int l, const char *n, tsc_format_t f, int rank, const uint64_t *d,
                               const void *p) {
    return tsc_flight_put(s, l, n, f, rank, d, p);
}

/* Hands one tensor (float, or double in FP64 mode) to the sink: as BF16 bits when every value
 * is exactly a BF16 number (BF16 autocast), else in the model's own format. */
static tsc_status_t put_tensor(run_t *r, sink_t *k, int layer, const char *name, int rank, const uint64_t *dims,
                               const void *data) {
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    if (r->elsize == 8) return k->put(k->sink, layer, name, TSC_FMT_FP64, rank, dims, data);
    const uint32_t *u = data;
    size_t i = 0;
    while (i < n && !(u[i] & 0xffffu)) i++;
    if (i < n || !strcmp(name, "lse")) return k->put(k->sink, layer, name, TSC_FMT_FP32, rank, dims, data);
    for (i = 0; i < n; i++) k->scratch[i] = (uint16_t)(u[i] >> 16);
    return k->put(k->sink, layer, name, TSC_FMT_BF16, rank, dims, k->scratch);
}

/* One layer's attention tensors (x, q, k, v, o, lse, do) and weights (w_q, w_k, w_v, w_o). */
static tsc_status_t put_layer(run_t *r, sink_t *k, int l) {
    tsc_model_attn_view_t av;
    tsc_status_t st = tsc_model_attn_view(r->model, l, &av);
    if (st != TSC_OK) return st;
    uint64_t B = av.B, H = av.H, K = av.Hkv, T = av.T, D = av.D, C = av.C;
    struct { const char *name; int rank; uint64_t d[4]; const void *p; } t[] = {
        {"x", 3, {B, T, C}, av.x},       {"q", 4, {B, H, T, D}, av.q},     {"k", 4, {B, K, T, D}, av.k},
        {"v", 4, {B, K, T, D}, av.v},    {"o", 4, {B, H, T, D}, av.o},     {"lse", 3, {B, H, T}, av.lse},
        {"do", 4, {B, H, T, D}, av.dout}};
    for (size_t i = 0; i < sizeof t / sizeof t[0] && st == TSC_OK; i++)
        if (t[i].p) st = put_tensor(r, k, l, t[i].name, t[i].rank, t[i].d, t[i].p);
    static const char *w[] = {"w_q", "w_k", "w_v", "w_o"};
    const char *base = tsc_model_params(r->model);
    for (int i = 0; i < 4 && st == TSC_OK; i++) {
        const tsc_model_tensor_t *tn = attn_weight(r, l, w[i]);
        uint64_t d[2] = {(uint64_t)tn->rows, (uint64_t)tn->cols};
        st = k->put(k->sink, l, w[i], r->elsize == 8 ? TSC_FMT_FP64 : TSC_FMT_FP32, 2, d,
                    base + tn->offset * r->elsize);
    }
    return st;
}


/* The recorded shard's input tokens (docs/FORMAT.md §1.3) into the capture (cap) or the flight
 * recorder: ids, and each byte as its text when the data is plain text (a token is a byte). */
static tsc_status_t put_tokens(run_t *r, tsc_capture_t *cap, tsc_flight_t *fl) {
    size_t n = (size_t)r->Bs * r->T;
    const int32_t *x = r->x + (size_t)(r->j1 - 1) * n; /* the last shard's rows: the activations recorded */
    const int bytes = tsc_data_byte_level(r->data);
    int64_t *ids = malloc(n * sizeof *ids);
    if (!ids) return tsc_error_set(TSC_ERR_NOMEM, "train: no memory for the tokens");
    for (size_t i = 0; i < n; i++) ids[i] = x[i];
    tsc_status_t st = fl ? tsc_flight_put_tokens(fl, ids, bytes)
                         : bytes ? tsc_capture_put_byte_tokens(cap, ids) : tsc_capture_put_tokens(cap, ids, NULL);
    free(ids);
    return st;
}

static tsc_status_t capture_step(run_t *r, long long s) {
    if (!r->cap || !tsc_capture_wants(r->cap, s, -1)) return TSC_OK;
    sink_t k = {cap_put, r->cap, r->scratch};
    tsc_status_t st = tsc_capture_step_begin(r->cap, s);
    if (st == TSC_OK) st = put_tokens(r, r->cap, NULL);
    for (int l = 0; l < r->L && st == TSC_OK; l++)
        if (tsc_capture_wants(r->cap, s, l)) st = put_layer(r, &k, l);
    if (st == TSC_OK) st = tsc_capture_step_end(r->cap);
    return st == TSC_OK ? st : tsc_error_wrap(st, "capturing step %lld: ", s);
}

/* The flight recorder's step: the chosen layers' tensors, then the loss and gradient norm it
 * watches. *event is set when it wrote a dump. */
static tsc_status_t flight_step(run_t *r, long long s, double loss, double gn, const char **event) {
    /* a stopped recorder of a job still takes part in step_end: a signal there stops every process */
    if (!r->flight || (tsc_flight_stopped(r->flight) && r->comm->size == 1)) return TSC_OK;
    sink_t k = {flight_put, r->flight, r->scratch};
    int stopped = tsc_flight_stopped(r->flight);
    tsc_status_t st = stopped ? TSC_OK : tsc_flight_step_begin(r->flight, s);
    if (st == TSC_OK && !stopped) st = put_tokens(r, NULL, r->flight);
    for (int l = 0; l < r->L && st == TSC_OK && !stopped; l++)
        if (tsc_flight_wants(r->flight, l)) st = put_layer(r, &k, l);
    int fired = 0;
    if (st == TSC_OK || r->comm->size > 1) { /* collective on a job: every process ends the step */
        tsc_status_t est = tsc_flight_step_end(r->flight, loss, gn, &fired);
        if (st == TSC_OK) st = est;
    }
    if (fired) *event = tsc_flight_last_dump(r->flight);
    return st == TSC_OK ? st : tsc_error_wrap(st, "flight recorder, step %lld: ", s);
}

/* ---- opening and closing a run ---- */

/* A log closed: its last lines reach the disk or the close says why not. */
static tsc_status_t close_log(run_t *r, FILE *f, const char *name) {
    return f && fclose(f) != 0 ? tsc_error_set(TSC_ERR_IO, "%s: cannot write: %s", run_file(r, name), strerror(errno))
                               : TSC_OK;
}

/* Frees the run; the status of closing what it wrote (the capture packed into one file, the flight recorder, the
 * logs): the first failure, the others' details lost. */
static tsc_status_t run_free(run_t *r) {
    tsc_status_t st = r->cap ? tsc_capture_close(r->cap) : TSC_OK, s2;
    if (r->flight && (s2 = tsc_flight_close(r->flight)) != TSC_OK && st == TSC_OK) st = s2;
    if ((s2 = close_log(r, r->log, "log.csv")) != TSC_OK && st == TSC_OK) st = s2;
    if ((s2 = close_log(r, r->wq, "wq_norms.csv")) != TSC_OK && st == TSC_OK) st = s2;
    if (r->blog) tsc_batch_log_close(r->blog);
    tsc_batch_order_free(r->order);
    tsc_data_close(r->data);
    tsc_model_free(r->model);
    free(r->m);
    free(r->v);
    free(r->x);
    free(r->y);
    free(r->offsets);
    free(r->wq_sn);
    free(r->scratch);
    free(r->cfg_text);
    free(r->resumed);
    free(r->gsh);
    free(r->msg);
    free(r->st_max);
    free(r->st_tied);
    return st;
}

static tsc_status_t apply_policies(run_t *r) {
    for (int i = 0; i < r->o.n_attn_policy; i++) {
        uint64_t mask;
        tsc_policy_t pol;
        tsc_status_t st = tsc_train_policy_spec(r->o.attn_policy[i], r->L, &mask, &pol);
        for (int l = 0; l < r->L && l < 64 && st == TSC_OK; l++)
            if (mask >> l & 1) st = tsc_model_set_attn_policy(r->model, l, &pol);
        if (st != TSC_OK) return st;
    }
    return TSC_OK;
}

/* A resumed checkpoint must hold exactly the arrays its settings imply: n parameters of elsize
 * bytes, three times (weights, AdamW m and v). Checked before the model is allocated, so a small
 * file cannot make resume build a large model first. at_least: n is a lower bound (the data may
 * still widen the vocabulary). */
static tsc_status_t ckpt_fits(const run_t *r, const tsc_ckpt_t *ck, const char *path, size_t n, int at_least) {
    unsigned long long cfg_len = strlen(ck->cfg_text);
    unsigned long long have = tsc_ckpt_size(cfg_len, ck->n, ck->elsize), need = tsc_ckpt_size(cfg_len, n, r->elsize);
    if (at_least ? n <= ck->n : n == ck->n && r->elsize == ck->elsize) return TSC_OK;
    const tsc_model_config_t *c = &r->cfg;
    return tsc_error_set(TSC_ERR_FORMAT,
                         "%s: %llu bytes, the settings (model %s: n_layer=%d, n_head=%d, d_model=%d, d_ff=%d, "
                         "vocab=%d, precision %s) need %s%llu (%zu parameters x 3 arrays x %zu bytes + %llu bytes of "
                         "header and settings); the checkpoint is truncated or belongs to other settings; refused",
                         path, have, r->o.model, c->n_layer, c->n_head, c->d_model, c->d_ff, c->vocab,
                         tsc_train_prec_name(r->o.prec), at_least ? "at least " : "", need, n, r->elsize,
                         need - 3ull * n * r->elsize);
}

/* The string settings that are specs, parsed before anything is allocated: the attention
 * policies against the model's layers, the capture spec and the flight recorder's layers. */
static tsc_status_t check_specs(run_t *r) {
    for (int i = 0; i < r->o.n_attn_policy; i++) {
        uint64_t mask;
        tsc_policy_t pol;
        tsc_status_t st = tsc_train_policy_spec(r->o.attn_policy[i], r->cfg.n_layer, &mask, &pol);
        if (st != TSC_OK) return st;
    }
    tsc_select_t sel;
    tsc_select_set_t set;
    tsc_status_t st;
    if (r->o.capture && (st = tsc_select_parse(&sel, r->o.capture)) != TSC_OK) return tsc_error_wrap(st, "--capture: ");
    if (r->o.flight_layers && (st = tsc_select_set_parse(&set, r->o.flight_layers)) != TSC_OK)
        return tsc_error_wrap(st, "flight recorder layers: ");
    return TSC_OK;
}

/* Everything but the files: model (initialised from the seed), data, buffers, policies. Every
 * setting is checked first (tsc_train_opts_check, the specs, the model's shape; with a
 * checkpoint ck, its size against the one the settings imply; the memory budget against the
 * model's parameters, gradients, AdamW moments and batch buffers), then threads are set and
 * memory allocated. ck_path names the checkpoint in messages. */
static tsc_status_t run_setup(run_t *r, const tsc_ckpt_t *ck, const char *ck_path) {
    const tsc_train_opts_t *o = &r->o;
    tsc_status_t st = tsc_train_opts_check(o, ck ? ck_path : "train");
    if (st != TSC_OK) return st;
    if ((st = tsc_model_config_parse(o->model, &r->cfg)) != TSC_OK) return st;
    r->B = o->batch;
    r->T = o->seq_len ? o->seq_len : r->cfg.max_T;
    if (r->T > r->cfg.max_T)
        return tsc_error_set(TSC_ERR_ARG, "train: sequence length %d exceeds the model's context %d", r->T,
                             r->cfg.max_T);
    r->L = r->cfg.n_layer;
    r->elsize = o->prec == TSC_PREC_FP64 ? 8 : 4;
    if ((st = check_specs(r)) != TSC_OK) return st;
    int P = r->comm->size;
    r->G = o->grad_shards > 0 ? o->grad_shards : 1;
    if (r->B % r->G || r->G % P)
        return tsc_error_set(TSC_ERR_ARG, "train: %d gradient shards on %d processes of a batch of %d: the shards must "
                             "divide the batch and the processes the shards (--grad-shards)", r->G, P, r->B);
    if (r->G != P && (o->capture || o->flight_steps > 0))
        return tsc_error_set(TSC_ERR_UNSUPPORTED, "train: --capture and --flight record one shard per process, and "
                             "this run has %d gradient shards on %d process%s: run it on %d (mpirun -n %d, also "
                             "to resume it), or a new run with --grad-shards %d", r->G, P, P == 1 ? "" : "es",
                             r->G, r->G, P);
    r->Bs = r->B / r->G;
    r->j0 = r->comm->rank * (r->G / P);
    r->j1 = r->j0 + r->G / P;
    /* the data can only widen the vocabulary: a checkpoint smaller than the model before that is
     * refused before the data is opened */
    if (ck && (st = ckpt_fits(r, ck, ck_path, tsc_model_config_n_params(&r->cfg), 1)) != TSC_OK) return st;
    if ((st = tsc_data_open(&r->data, o->data, NULL)) != TSC_OK) return st;
    int vocab = tsc_data_vocab(r->data);
    if (vocab > r->cfg.vocab) r->cfg.vocab = vocab;   /* tokenized data: widen the embedding */
    size_t n = tsc_model_config_n_params(&r->cfg);
    if (ck && (st = ckpt_fits(r, ck, ck_path, n, 0)) != TSC_OK) return st;
    int records = o->capture || o->flight_steps > 0;
    uint64_t tokens = (uint64_t)r->B * (uint64_t)r->T,
             need = 4 * (uint64_t)n * r->elsize + 2 * tokens * sizeof(int32_t) + (uint64_t)r->B * sizeof(uint64_t) +
                    (uint64_t)r->L * r->cfg.n_head * sizeof(double) +
                    (records ? tokens * (uint64_t)r->cfg.d_model * sizeof(uint16_t) : 0);
    if (sharded(r)) need += (uint64_t)(r->j1 - r->j0) * n * r->elsize; /* the shards' gradients, the chain's message */
    if ((st = tsc_mem_check(need, "the model's parameters, gradients and AdamW moments and the batch buffers")) !=
        TSC_OK)
        return tsc_error_wrap(st, "train (model %s, batch %d x %d tokens): ", o->model, r->B, r->T);
#ifdef _OPENMP
    if (o->threads > 0) omp_set_num_threads(o->threads);
    r->threads = omp_get_max_threads();
#else
    r->threads = 1;
#endif
    st = tsc_model_create(&r->model, &r->cfg, o->prec, r->Bs, r->T);
    if (st != TSC_OK) return st;
    tsc_model_init(r->model, o->seed);
    if ((st = apply_policies(r)) != TSC_OK) return st;
    r->n = tsc_model_n_params(r->model);
    r->m = calloc(r->n, r->elsize);
    r->v = calloc(r->n, r->elsize);
    r->x = malloc(sizeof(int32_t) * r->B * r->T);
    r->y = malloc(sizeof(int32_t) * r->B * r->T);
    r->offsets = malloc(sizeof(uint64_t) * r->B);
    r->wq_sn = calloc((size_t)r->L * r->cfg.n_head, sizeof(double));
    if (records) r->scratch = malloc(sizeof(uint16_t) * (size_t)r->B * r->T * (size_t)r->cfg.d_model);
    if (!r->m || !r->v || !r->x || !r->y || !r->offsets || !r->wq_sn || (records && !r->scratch))
        return tsc_error_set(TSC_ERR_NOMEM, "train: out of memory");
    if (sharded(r)) {
        r->msg_bytes = r->n * r->elsize + sizeof(double) + (size_t)r->L * (sizeof(double) + sizeof(long long));
        r->gsh = r->j1 - r->j0 > 1 ? malloc((size_t)(r->j1 - r->j0 - 1) * r->n * r->elsize) : NULL;
        r->msg = malloc(r->msg_bytes);
        r->st_max = malloc((size_t)r->L * sizeof *r->st_max);
        r->st_tied = malloc((size_t)r->L * sizeof *r->st_tied);
        if ((r->j1 - r->j0 > 1 && !r->gsh) || !r->msg || !r->st_max || !r->st_tied)
            return tsc_error_set(TSC_ERR_NOMEM, "train: out of memory for the gradient shards");
    }
    if (o->batches && (st = tsc_batch_order_load(&r->order, o->batches)) != TSC_OK) return st;
    r->cfg_text = tsc_train_cfg_text(o, r->threads);
    return r->cfg_text ? TSC_OK : tsc_error_set(TSC_ERR_NOMEM, "train: out of memory");
}

/* Opens RUN/NAME for appending (created when missing), never through a symbolic link. */
static FILE *open_append(run_t *r, const char *name, tsc_status_t *st) {
    int fd;
    tsc_status_t s = tsc_train_file_open(run_file(r, name), O_WRONLY | O_APPEND | O_CREAT, &fd);
    if (s != TSC_OK) {
        *st = s;
        return NULL;
    }
    FILE *f = fdopen(fd, "a");
    if (!f) {
        *st = tsc_error_set(TSC_ERR_IO, "%s: cannot open for writing: %s", r->path, strerror(errno));
        close(fd);
    }
    return f;
}

/* Writes dst (atomically) with the header of CSV src and its rows whose step (first field) is below steps_done:
 * what an uninterrupted run had written when its checkpoint was taken. src and dst may be one file. */
static tsc_status_t csv_copy_cut(const char *src, const char *dst, long long steps_done) {
    int fd;
    tsc_status_t st = tsc_train_file_open(src, O_RDONLY, &fd);
    if (st != TSC_OK) return st;
    struct stat sb;
    unsigned long long lim = tsc_file_text_limit();
    FILE *in = fstat(fd, &sb) == 0 && (unsigned long long)sb.st_size <= lim ? fdopen(fd, "rb") : NULL;
    if (!in) {
        st = (unsigned long long)sb.st_size > lim
                 ? tsc_error_set(TSC_ERR_UNSUPPORTED, "%s: %llu bytes, above the limit of %llu bytes for a text "
                                 "input; raise it with TSC_MAX_MEMORY=<bytes> if the run is trusted", src,
                                 (unsigned long long)sb.st_size, lim)
                 : tsc_error_set(TSC_ERR_IO, "%s: cannot read: %s", src, strerror(errno));
        close(fd);
        return st;
    }
    tsc_out_t out;
    if ((st = tsc_out_open(&out, dst)) != TSC_OK) {
        fclose(in);
        return st;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t k;
    for (long long i = 0; (k = getline(&line, &cap, in)) > 0; i++) {
        if (line[k - 1] != '\n') break;                       /* a torn last line: dropped */
        if (i > 0 && strtoll(line, NULL, 10) >= steps_done) break;
        if (fwrite(line, 1, (size_t)k, out.fp) != (size_t)k) break;
    }
    int bad = ferror(in) || ferror(out.fp);
    free(line);
    fclose(in);
    if (bad) {
        st = tsc_error_set(TSC_ERR_IO, "%s: cannot rewrite: %s", out.path, strerror(errno));
        tsc_out_abort(&out);
        return st;
    }
    return tsc_out_commit(&out);
}

/* RUN/NAME.h5, or RUN/NAME-from-STEP.h5 when a resumed run finds the first taken. */
static const char *dump_name(run_t *r, const char *name, long long from, char *buf, size_t size) {
    snprintf(buf, size, "%s.h5", name);
    char sess[128];
    snprintf(sess, sizeof sess, "%s.capture", buf);
    struct stat sb;
    if (lstat(run_file(r, buf), &sb) == 0 || lstat(run_file(r, sess), &sb) == 0)
        snprintf(buf, size, "%s-from-%lld.h5", name, from);
    return run_file(r, buf);
}

/* The capture session (--capture) and the flight recorder (--flight). */
/* A recorder's file: NAME.h5 (NAME-from-FROM.h5 when a resumed run's NAME.h5 exists); on several
 * processes the stem is process 0's choice (r->*_stem) and each writes STEM.rank<R>.h5, and
 * process 0 the manifest STEM.h5 over them when they are complete. */
static const char *recorder_path(run_t *r, const char *name, char *stem, long long from, char *buf, size_t size) {
    if (r->comm->size == 1) return dump_name(r, name, from, buf, size);
    if (r->comm->rank == 0) { /* the stem: free for the manifest and for process 0's rank dump */
        char a[128], b[128];
        struct stat sb;
        snprintf(stem, 64, "%s", name);
        snprintf(a, sizeof a, "%s.h5", stem);
        snprintf(b, sizeof b, "%s.rank0.h5.capture", stem);
        if (lstat(run_file(r, a), &sb) == 0 || lstat(run_file(r, b), &sb) == 0) snprintf(stem, 64, "%s-from-%lld", name, from);
    }
    snprintf(buf, size, "%s.rank%d.h5", stem, r->comm->rank);
    return run_file(r, buf);
}

static tsc_status_t recorders_open(run_t *r, long long from) {
    tsc_dump_meta_t meta;
    char name[96];
    tsc_select_t sel;
    tsc_select_set_t set;
    tsc_status_t st = TSC_OK;
    if (r->o.capture) {
        if ((st = tsc_select_parse(&sel, r->o.capture)) != TSC_OK) return tsc_error_wrap(st, "--capture: ");
        if ((st = dump_meta(r, &meta, first_layer(&sel.layers, r->L))) != TSC_OK) return tsc_error_wrap(st, "--capture: ");
        tsc_capture_opts_t co = {.select = r->o.capture};
        st = tsc_capture_open(&r->cap, recorder_path(r, "capture", r->cap_stem, from, name, sizeof name), &meta, &co);
    }
    if (st != TSC_OK || r->o.flight_steps <= 0) return st;
    tsc_select_set_all(&set);
    if (r->o.flight_layers && (st = tsc_select_set_parse(&set, r->o.flight_layers)) != TSC_OK)
        return tsc_error_wrap(st, "flight recorder layers: ");
    if ((st = dump_meta(r, &meta, first_layer(&set, r->L))) != TSC_OK) return tsc_error_wrap(st, "--flight: ");
    tsc_flight_opts_t fo;
    tsc_flight_opts_init(&fo);
    fo.n_steps = r->o.flight_steps;
    fo.layers = r->o.flight_layers;
    fo.max_bytes = (uint64_t)(r->o.flight_max_mb * 1048576.0);
    fo.max_dumps = r->o.flight_keep > 0 ? r->o.flight_keep : r->o.flight_dumps;
    fo.keep_newest = r->o.flight_keep > 0;
    fo.comm = r->comm->size > 1 ? r->comm : NULL; /* a trigger on one process fires on all */
    if (r->o.spike_factor > 0) fo.loss.factor = fo.grad.factor = r->o.spike_factor;
    st = tsc_flight_open(&r->flight, recorder_path(r, "flight", r->fl_stem, from, name, sizeof name), &meta, &fo);
    if (st == TSC_OK) st = tsc_flight_signals_install(r->flight);
    return st;
}

/* The manifest STEM.h5 over the processes' rank dumps STEM.rank<R>.h5 (process 0, after a barrier:
 * every process has written its own). rank0_path: process 0's dump, whose name gives the others'. */
static tsc_status_t recorder_manifest(run_t *r, const char *rank0_path, char *out, size_t size) {
    const tsc_comm_t *c = r->comm;
    tsc_status_t st = c->barrier(c->ctx);
    if (st != TSC_OK || c->rank != 0) return st;
    const char *at = strstr(rank0_path, ".rank0.");
    if (!at) return tsc_error_set(TSC_ERR_INTERNAL, "%s: not a rank dump's name", rank0_path);
    size_t pre = (size_t)(at - rank0_path);
    snprintf(out, size, "%.*s%s", (int)pre, rank0_path, at + 6);
    char (*paths)[4200] = malloc((size_t)c->size * sizeof *paths);
    const char **pp = malloc((size_t)c->size * sizeof *pp);
    if (!paths || !pp) st = tsc_error_set(TSC_ERR_NOMEM, "train: out of memory");
    for (int i = 0; st == TSC_OK && i < c->size; i++) {
        snprintf(paths[i], sizeof paths[i], "%.*s.rank%d.%s", (int)pre, rank0_path, i, at + 7);
        pp[i] = paths[i];
    }
    if (st == TSC_OK) st = tsc_manifest_write(out, pp, c->size);
    free(paths), free(pp);
    return st;
}

/* --flight-keep K on several processes: each recorder removed its rank dump K triggers older (the
 * library's keep_newest); process 0 removes that trigger's manifest with it, so no manifest names
 * rank dumps that are gone. Dump i's manifest is STEM.h5 (i = 1), else STEM.i.h5 (tsc_flight's
 * dump names, with ".rank<R>" taken out by recorder_manifest). */
static tsc_status_t manifest_drop_old(run_t *r) {
    int old = tsc_flight_n_dumps(r->flight) - r->o.flight_keep;
    if (r->comm->rank != 0 || r->o.flight_keep <= 0 || old < 1) return TSC_OK;
    char name[96];
    if (old == 1) snprintf(name, sizeof name, "%s.h5", r->fl_stem);
    else snprintf(name, sizeof name, "%s.%d.h5", r->fl_stem, old);
    const char *path = run_file(r, name);
    if (unlink(path) != 0 && errno != ENOENT)
        return tsc_error_set(TSC_ERR_IO, "removing the older flight manifest %s: %s", path, strerror(errno));
    return TSC_OK;
}

/* At the clean end of a run on several processes: every capture packed, then its manifest. */
static tsc_status_t recorders_finish(run_t *r) {
    if (!r->cap || r->comm->size == 1) return TSC_OK;
    char rank0[4200], out[4200];
    snprintf(rank0, sizeof rank0, "%s/%s.rank0.h5", r->dir, r->cap_stem);
    tsc_status_t st = tsc_capture_close(r->cap);
    r->cap = NULL;
    tsc_status_t mst = recorder_manifest(r, rank0, out, sizeof out);
    return st != TSC_OK ? st : mst;
}

/* ---- the loop ---- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* RUN/ckpt-STEP.bin: a kept checkpoint (ckpt_keep). */
static const char *kept_name(run_t *r, long long steps_done) {
    char name[64];
    snprintf(name, sizeof name, "ckpt-%lld.bin", steps_done);
    return run_file(r, name);
}

/* ckpt.bin; with ckpt_keep = N also ckpt-STEP.bin (a hard link to the same bytes: ckpt.bin is later replaced by
 * a rename, the link keeps these), and the kept one N checkpoints older removed. */
static tsc_status_t checkpoint(run_t *r, long long steps_done) {
    tsc_status_t st = tsc_batch_log_flush(r->blog, 1);
    if (st != TSC_OK) return st;
    tsc_ckpt_t c = {.cfg_text = r->cfg_text, .steps_done = steps_done, .prec = r->o.prec, .n = r->n,
                    .elsize = r->elsize, .params = tsc_model_params(r->model), .m = r->m, .v = r->v};
    char latest[sizeof r->path];
    snprintf(latest, sizeof latest, "%s", run_file(r, "ckpt.bin"));
    if ((st = tsc_ckpt_save(latest, &c)) != TSC_OK || r->o.ckpt_keep <= 0) return st;
    const char *kept = kept_name(r, steps_done);
    unlink(kept);  /* a resumed run writes the same step's checkpoint again */
    if (link(latest, kept) != 0 && (st = tsc_ckpt_save(kept, &c)) != TSC_OK) return st;
    long long old = steps_done - (long long)r->o.ckpt_keep * r->o.ckpt_every;
    if (old > 0 && old % r->o.ckpt_every == 0) unlink(kept_name(r, old));
    return TSC_OK;
}

static tsc_status_t get_batch(run_t *r, long long s) {
    tsc_status_t st;
    if (r->order) {
        st = tsc_batch_order_get(r->order, s, r->B, r->offsets);
        if (st == TSC_OK) st = tsc_data_batch_at(r->data, TSC_SPLIT_TRAIN, r->offsets, r->B, r->T, r->x, r->y);
    } else {
        st = tsc_data_batch(r->data, TSC_SPLIT_TRAIN, r->o.seed, s, r->B, r->T, r->x, r->y, r->offsets);
    }
    if (st == TSC_OK) st = tsc_batch_log_put(r->blog, s, r->B, r->offsets);
    return st;
}

/* ---- shards and processes ---- */

/* The NaN-propagating maximum (the order of the shards cannot change it). */
static double max_nan(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }

#define ADD_INTO(T, dst, src, n)                                                                 \
    do {                                                                                         \
        T *d_ = (T *)(dst);                                                                      \
        const T *s_ = (const T *)(src);                                                          \
        _Pragma("omp parallel for schedule(static)") for (size_t i_ = 0; i_ < (n); i_++) d_[i_] += s_[i_]; \
    } while (0)

/* dst[i] += src[i] in the parameters' type: one rounding per element, so the sum's bits depend on
 * the order of the terms only, not on threads. */
static void add_into(const run_t *r, void *dst, const void *src) {
    if (r->elsize == 8) ADD_INTO(double, dst, src, r->n);
    else ADD_INTO(float, dst, src, r->n);
}

/* This step's shards: this process's forwards and backwards, then the chain that sums every shard's
 * gradient in shard order, left to right (((g0 + g1) + g2) + ...): process p receives the sum of
 * the shards before its own from p - 1, adds its shards in order and sends it on; the last process
 * broadcasts the whole sum, and every process ends with the same gradients (scaled by 1/G), loss
 * (the shards' mean) and attention statistics (max, and sum of tied rows, over the shards). */
static tsc_status_t shards_step(run_t *r, double *loss, double *local) {
    const tsc_comm_t *c = r->comm;
    size_t gb = r->n * r->elsize;
    unsigned char *sum_g = r->msg;
    double sum_l = 0, lj;
    double *mx = (double *)(r->msg + gb + sizeof(double));
    long long *tied = (long long *)(mx + r->L);
    double lossj[64];
    tsc_status_t st = TSC_OK;
    for (int l = 0; l < r->L; l++) r->st_max[l] = -INFINITY, r->st_tied[l] = 0;
    for (int j = r->j0; j < r->j1 && st == TSC_OK; j++) {
        size_t at = (size_t)j * r->Bs * r->T;
        if ((st = tsc_model_forward(r->model, r->x + at, r->y + at, &lj)) == TSC_OK) st = tsc_model_backward(r->model);
        for (int l = 0; l < r->L && st == TSC_OK; l++) {
            tsc_model_attn_view_t av;
            if ((st = tsc_model_attn_view(r->model, l, &av)) == TSC_OK) {
                r->st_max[l] = max_nan(r->st_max[l], av.max_logit);
                r->st_tied[l] += av.tied_rows;
            }
        }
        if (st == TSC_OK && j + 1 < r->j1) memcpy((char *)r->gsh + (size_t)(j - r->j0) * gb, tsc_model_grads(r->model), gb);
        if (j - r->j0 < 64) lossj[j - r->j0] = lj;
    }
    if (st != TSC_OK) return st;
    if (r->j1 - r->j0 > 64) return tsc_error_set(TSC_ERR_UNSUPPORTED, "train: more than 64 gradient shards per process");
    *local = lossj[0]; /* this process's first shard: what its flight recorder watches */
    /* the chain: the sum so far arrives from the previous process (the wait for it is timed) */
    double t = now_s();
    if (c->rank > 0 && (st = c->recv(c->ctx, c->rank - 1, r->msg, r->msg_bytes)) != TSC_OK) return st;
    r->chain_s = now_s() - t;
    if (c->rank > 0) memcpy(&sum_l, r->msg + gb, sizeof sum_l);
    for (int j = r->j0; j < r->j1; j++) {
        const void *g = j + 1 < r->j1 ? (char *)r->gsh + (size_t)(j - r->j0) * gb : tsc_model_grads(r->model);
        if (j == 0) {
            memcpy(sum_g, g, gb);
            sum_l = lossj[0];
            for (int l = 0; l < r->L; l++) mx[l] = r->st_max[l], tied[l] = r->st_tied[l];
        } else {
            add_into(r, sum_g, g);
            sum_l += lossj[j - r->j0];
        }
    }
    if (r->j0 > 0)
        for (int l = 0; l < r->L; l++) mx[l] = max_nan(mx[l], r->st_max[l]), tied[l] += r->st_tied[l];
    memcpy(r->msg + gb, &sum_l, sizeof sum_l);
    t = now_s();
    if (c->rank + 1 < c->size && (st = c->send(c->ctx, c->rank + 1, r->msg, r->msg_bytes)) != TSC_OK) return st;
    if (c->size > 1 && (st = c->bcast(c->ctx, c->size - 1, r->msg, r->msg_bytes)) != TSC_OK) return st;
    r->chain_s += now_s() - t;
    memcpy(&sum_l, r->msg + gb, sizeof sum_l);
    for (int l = 0; l < r->L; l++) r->st_max[l] = mx[l], r->st_tied[l] = tied[l];
    /* the mean over the shards: the sum scaled by 1/G (exact for G a power of two) */
    if (r->elsize == 8) {
        double *g = tsc_model_grads(r->model), k = 1.0 / r->G;
        const double *sg = (const double *)sum_g;
        for (size_t i = 0; i < r->n; i++) g[i] = sg[i] * k;
    } else {
        float *g = tsc_model_grads(r->model), k = 1.0f / (float)r->G;
        const float *sg = (const float *)sum_g;
        for (size_t i = 0; i < r->n; i++) g[i] = sg[i] * k;
    }
    *loss = sum_l / r->G;
    return TSC_OK;
}

/* The step's batch from process 0 to the others, after a word: 1 a step follows, 0 the run is
 * done, -1 process 0 stopped it. */
static tsc_status_t share_batch(run_t *r, int64_t *word) {
    const tsc_comm_t *c = r->comm;
    tsc_status_t st = c->bcast(c->ctx, 0, word, sizeof *word);
    if (st == TSC_OK && *word == 1) st = c->bcast(c->ctx, 0, r->x, sizeof(int32_t) * (size_t)r->B * r->T);
    if (st == TSC_OK && *word == 1) st = c->bcast(c->ctx, 0, r->y, sizeof(int32_t) * (size_t)r->B * r->T);
    return st;
}

/* Process 0 to the others, before the first step: the settings (process 0 only: a worker has
 * received them before its set-up, tsc_train_worker), the steps done, the model's parameters and
 * AdamW moments (a resumed run's, or the seed's). */
static tsc_status_t share_start(run_t *r, long long *from) {
    const tsc_comm_t *c = r->comm;
    tsc_status_t st;
    if (c->rank == 0) {
        size_t n = strlen(r->cfg_text) + 1;
        void *cfg = malloc(n);
        if (!cfg) return tsc_error_set(TSC_ERR_NOMEM, "train: out of memory");
        memcpy(cfg, r->cfg_text, n);
        r->shared = 1;
        st = tsc_comm_bcast_alloc(c, 0, &cfg, &n);
        free(cfg);
        if (st != TSC_OK) return st;
    }
    int64_t f = *from;
    size_t gb = r->n * r->elsize;
    if ((st = c->bcast(c->ctx, 0, &f, sizeof f)) != TSC_OK) return st;
    *from = f;
    if (r->o.capture || r->o.flight_steps > 0) { /* the recorders: the folder and their names */
        if (c->rank == 0) snprintf(r->dir_buf, sizeof r->dir_buf, "%s", r->dir);
        if ((st = c->bcast(c->ctx, 0, r->dir_buf, sizeof r->dir_buf)) != TSC_OK ||
            (st = c->bcast(c->ctx, 0, r->cap_stem, sizeof r->cap_stem)) != TSC_OK ||
            (st = c->bcast(c->ctx, 0, r->fl_stem, sizeof r->fl_stem)) != TSC_OK)
            return st;
        if (c->rank != 0) r->dir = r->dir_buf;
    }
    if ((st = c->bcast(c->ctx, 0, tsc_model_params(r->model), gb)) == TSC_OK && (st = c->bcast(c->ctx, 0, r->m, gb)) == TSC_OK)
        st = c->bcast(c->ctx, 0, r->v, gb);
    return st;
}

/* One step in shards (or on several processes): the batch, the shards and the chain, then on
 * process 0 the statistics, the validation at intervals and the log; everywhere the update. */
static tsc_status_t sharded_step(run_t *r, long long s, tsc_train_report_t *rep) {
    int last = s == r->o.steps - 1, stats = s % r->o.stats_every == 0 || last, zero = r->comm->rank == 0;
    double vl = NAN, loss;
    tsc_status_t st = zero ? get_batch(r, s) : TSC_OK;
    if (st == TSC_OK && r->comm->size > 1 && zero) {
        int64_t word = 1;
        st = share_batch(r, &word);
    }
    double local = NAN;
    if (st == TSC_OK) st = shards_step(r, &loss, &local);
    if (st != TSC_OK) return tsc_error_wrap(st, "step %lld: ", s);
    double gn = grad_norm(r), lr = s == r->o.lr_spike_step ? r->o.lr_spike : lr_at(&r->o, s);
    /* the recorders (one shard per process): each its own rows; the flight trigger is agreed */
    const char *fired = NULL;
    if ((st = capture_step(r, s)) != TSC_OK) return st;
    if ((st = flight_step(r, s, local, gn, &fired)) != TSC_OK) return st;
    char manifest[4200];
    if (fired && r->comm->size > 1) {
        if ((st = recorder_manifest(r, fired, manifest, sizeof manifest)) != TSC_OK ||
            (st = manifest_drop_old(r)) != TSC_OK)
            return tsc_error_wrap(st, "step %lld: the flight dumps' manifest: ", s);
        fired = manifest;
    }
    if (zero) {
        if ((s % r->o.val_every == 0 || last) && (st = val_loss(r, &vl)) != TSC_OK) return tsc_error_wrap(st, "step %lld: ", s);
        *rep = (tsc_train_report_t){.step = s, .steps = r->o.steps, .lr = lr, .train_loss = loss, .val_loss = vl,
                                    .grad_norm = gn, .flight_dump = fired ? r->fl_report : NULL};
        if (fired) snprintf(r->fl_report, sizeof r->fl_report, "%s", fired);
        if (stats && (st = wq_norms(r)) != TSC_OK) return st;
        if ((st = log_row(r, s, lr, loss, vl, gn, stats)) != TSC_OK) return st;
    }
    if (!isfinite(loss) || !isfinite(gn))
        return tsc_error_set(TSC_ERR_NONFINITE, "step %lld: the training %s is %s; the run stopped (the last checkpoint is "
                             "%s)", s, isfinite(loss) ? "gradient norm" : "loss",
                             isnan(isfinite(loss) ? gn : loss) ? "NaN" : "infinite", zero ? run_file(r, "ckpt.bin") :
                             "process 0's");
    double scale = r->o.grad_clip > 0 && gn > r->o.grad_clip ? r->o.grad_clip / gn : 1.0;
    if (r->elsize == 8) adamw_f64(r, s + 1, lr, scale);
    else adamw_f32(r, s + 1, lr, scale);
    return TSC_OK;
}

/* One step: validation (at intervals), forward, backward, statistics, capture, log, update. */
static tsc_status_t train_step(run_t *r, long long s, tsc_train_report_t *rep) {
    int last = s == r->o.steps - 1, stats = s % r->o.stats_every == 0 || last;
    double vl = NAN, loss;
    tsc_status_t st = TSC_OK;
    if (s % r->o.val_every == 0 || last) st = val_loss(r, &vl);
    if (st == TSC_OK) st = get_batch(r, s);
    if (st == TSC_OK) st = tsc_model_forward(r->model, r->x, r->y, &loss);
    if (st == TSC_OK) st = tsc_model_backward(r->model);
    if (st != TSC_OK) return tsc_error_wrap(st, "step %lld: ", s);
    double gn = grad_norm(r), lr = s == r->o.lr_spike_step ? r->o.lr_spike : lr_at(&r->o, s);
    *rep = (tsc_train_report_t){.step = s, .steps = r->o.steps, .lr = lr, .train_loss = loss, .val_loss = vl,
                                .grad_norm = gn};
    if (stats && (st = wq_norms(r)) != TSC_OK) return st;
    if ((st = capture_step(r, s)) != TSC_OK) return st;
    if ((st = flight_step(r, s, loss, gn, &rep->flight_dump)) != TSC_OK) return st;
    if ((st = log_row(r, s, lr, loss, vl, gn, stats)) != TSC_OK) return st;
    if (!isfinite(loss) || !isfinite(gn))
        return tsc_error_set(TSC_ERR_NONFINITE,
                             "step %lld: the training %s is %s; the run stopped (the last checkpoint is %s%s%s)", s,
                             isfinite(loss) ? "gradient norm" : "loss",
                             isnan(isfinite(loss) ? gn : loss) ? "NaN" : "infinite", run_file(r, "ckpt.bin"),
                             rep->flight_dump ? "; the flight recorder wrote " : "",
                             rep->flight_dump ? rep->flight_dump : "");
    double scale = r->o.grad_clip > 0 && gn > r->o.grad_clip ? r->o.grad_clip / gn : 1.0;
    if (r->elsize == 8) adamw_f64(r, s + 1, lr, scale);
    else adamw_f32(r, s + 1, lr, scale);
    return TSC_OK;
}

static tsc_status_t train_loop(run_t *r, long long from) {
    tsc_status_t st;
    if (r->comm->size > 1 && (st = share_start(r, &from)) != TSC_OK) return st;
    for (long long s = from; s < r->o.steps; s++) {
        double t0 = now_s();
        tsc_train_report_t rep;
        if ((st = sharded(r) ? sharded_step(r, s, &rep) : train_step(r, s, &rep)) != TSC_OK) return st;
        rep.step_s = now_s() - t0;
        rep.tokens_per_s = (double)r->B * r->T / rep.step_s;
        rep.chain_s = r->comm->size > 1 ? r->chain_s : 0;
        int sig = r->flight ? tsc_flight_signal(r->flight) : 0;
        if ((s + 1) % r->o.ckpt_every == 0 || s + 1 == r->o.steps || sig) {
            if ((st = checkpoint(r, s + 1)) != TSC_OK) return st;
            rep.event = "checkpoint";
        }
        if (r->o.report) r->o.report(r->o.user, &rep);
        if (sig)
            return tsc_error_set(TSC_ERR_IO, "interrupted by signal %d after step %lld: checkpoint %s written%s%s; "
                                             "continue with --resume %s", sig, s, run_file(r, "ckpt.bin"),
                                 tsc_flight_n_dumps(r->flight) ? ", flight recorder dump " : "",
                                 tsc_flight_n_dumps(r->flight) ? tsc_flight_last_dump(r->flight) : "", r->dir);
    }
    if (r->comm->size > 1) { /* the others stop after the last step */
        int64_t word = 0;
        r->released = 1;
        if ((st = share_batch(r, &word)) != TSC_OK) return st;
        return recorders_finish(r);
    }
    return TSC_OK;
}

/* Locks the run folder, runs `body`, and releases everything. */
static tsc_status_t with_lock(run_t *r, tsc_status_t (*body)(run_t *, void *), void *ctx) {
    int fd;
    char holder[32];
    if (!r->comm) r->comm = tsc_comm_serial();
    tsc_status_t st = tsc_dir_lock(r->dir, ".tilescope.lock", &fd, holder, sizeof holder);
    if (st == TSC_OK) st = body(r, ctx);
    else fd = -1;
    if (r->comm->size > 1 && !r->released) { /* process 0 stopped before the end: the others leave too */
        tsc_status_t keep = st;
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", tsc_error_last());
        if (!r->shared) {
            void *none = NULL;
            size_t zero = 0;
            (void)tsc_comm_bcast_alloc(r->comm, 0, &none, &zero);
        } else {
            int64_t word = -1;
            (void)share_batch(r, &word);
        }
        st = tsc_error_set(keep, "%s", msg);
    }
    if (fd < 0) return st;
    tsc_status_t cst = run_free(r);
    if (st == TSC_OK) st = cst; /* a run that failed reports its own error, not its recorders' */
    tsc_dir_unlock(r->dir, ".tilescope.lock", fd, 1);
    return st;
}

static tsc_status_t run_body_new(run_t *r, void *ctx) {
    (void)ctx;
    struct stat sb;
    if (stat(run_file(r, "run.cfg"), &sb) == 0)
        return tsc_error_set(TSC_ERR_IO, "%s: the folder holds a run already (run.cfg); resume it with --resume "
                                         "or choose another folder", r->dir);
    tsc_status_t st = run_setup(r, NULL, NULL);
    if (st == TSC_OK) st = tsc_out_write_all(run_file(r, "run.cfg"), r->cfg_text, strlen(r->cfg_text));
    static const char *fresh[] = {"log.csv", "wq_norms.csv", "batches.csv", "ckpt.bin"};
    for (int i = 0; i < 4 && st == TSC_OK; i++) remove(run_file(r, fresh[i]));
    if (st == TSC_OK && (r->log = open_append(r, "log.csv", &st)) && (r->wq = open_append(r, "wq_norms.csv", &st)))
        log_header(r);
    if (st == TSC_OK) st = tsc_batch_log_open(&r->blog, run_file(r, "batches.csv"));
    if (st == TSC_OK) st = recorders_open(r, 0);
    if (st == TSC_OK && r->o.ckpt_keep > 0) st = checkpoint(r, 0);  /* ckpt-0.bin: a fork can start from the top */
    if (st == TSC_OK) st = train_loop(r, 0);
    return st;
}

static tsc_status_t make_dir(const char *dir) {
    if (mkdir(dir, 0755) && errno != EEXIST)
        return tsc_error_set(TSC_ERR_IO, "%s: cannot create the run folder: %s", dir, strerror(errno));
    struct stat sb;
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode))
        return tsc_error_set(TSC_ERR_IO, "%s: not a folder", dir);
    return TSC_OK;
}

tsc_status_t tsc_train_run(const tsc_train_opts_t *o, const char *run_dir) {
    run_t r = {.o = *o, .dir = run_dir, .comm = tsc_comm_or_serial(o->comm)};
    tsc_status_t st = make_dir(run_dir);
    if (st != TSC_OK && r.comm->size > 1) { /* the others wait for the settings: none come */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", tsc_error_last());
        void *none = NULL;
        size_t zero = 0;
        (void)tsc_comm_bcast_alloc(r.comm, 0, &none, &zero);
        return tsc_error_set(st, "%s", msg);
    }
    if (st != TSC_OK) return st;
    return with_lock(&r, run_body_new, NULL);
}

tsc_status_t tsc_train_worker(const tsc_comm_t *comm) {
    const tsc_comm_t *c = tsc_comm_or_serial(comm);
    if (c->rank == 0) return tsc_error_set(TSC_ERR_ARG, "train: process 0 runs the run, not a worker's part");
    void *cfg = NULL;
    size_t n = 0;
    tsc_status_t st = tsc_comm_bcast_alloc(c, 0, &cfg, &n);
    if (st != TSC_OK) return st;
    run_t r = {.comm = c};
    if (!n) st = tsc_error_set(TSC_ERR_IO, "train: process 0 could not start the run (its message says why)");
    else if (!(r.resumed = malloc(sizeof *r.resumed))) st = tsc_error_set(TSC_ERR_NOMEM, "train: out of memory");
    else if ((st = tsc_train_cfg_parse(cfg, "the settings from process 0", r.resumed)) == TSC_OK) {
        r.o = r.resumed->o;
        r.o.batches = NULL; /* process 0 reads the batches and sends them */
        r.o.report = NULL;
        st = run_setup(&r, NULL, NULL);
    }
    free(cfg);
    long long from = 0;
    if (st == TSC_OK) st = share_start(&r, &from);
    if (st == TSC_OK) st = recorders_open(&r, from);
    int64_t word = 1;
    for (long long s = from; st == TSC_OK && s < r.o.steps; s++) {
        tsc_train_report_t rep;
        if ((st = share_batch(&r, &word)) != TSC_OK || word != 1) break;
        st = sharded_step(&r, s, &rep);
        if (st == TSC_ERR_NONFINITE) st = TSC_OK; /* process 0 stops the run: its word comes next */
    }
    if (st == TSC_OK && word == 1) st = share_batch(&r, &word); /* after the last step: 0 */
    if (st == TSC_OK && word != 0)
        st = tsc_error_set(TSC_ERR_IO, "train: process 0 stopped the run (its message says why)");
    if (st == TSC_OK) st = recorders_finish(&r);
    tsc_status_t fst = run_free(&r);
    return st == TSC_OK ? fst : st;
}

typedef struct {
    long long steps;
} resume_ctx_t;

/* Resume reads, rewrites or appends to these files of the run folder, and writes the capture and
 * flight recorder outputs (capture*, flight*: dumps and their session folders). A run folder may
 * come from someone else: before anything is read, none of them may be a symbolic link (a link
 * would make resume copy the linked file into the run or write through it). The trainer's own
 * opens use tsc_train_file_open (O_NOFOLLOW) as well; this check also covers the batch log and the
 * recorders, which open their files by name. */
static tsc_status_t run_files_check(run_t *r) {
    static const char *names[] = {"run.cfg", "log.csv", "wq_norms.csv", "batches.csv", "ckpt.bin"};
    DIR *d = opendir(r->dir);
    if (!d) return tsc_error_set(TSC_ERR_IO, "%s: cannot open the run folder: %s", r->dir, strerror(errno));
    tsc_status_t st = TSC_OK;
    for (struct dirent *e; st == TSC_OK && (e = readdir(d));) {
        int touched = !strncmp(e->d_name, "capture", 7) || !strncmp(e->d_name, "flight", 6) ||
                      !strncmp(e->d_name, "ckpt-", 5);
        for (size_t i = 0; i < sizeof names / sizeof names[0] && !touched; i++) touched = !strcmp(e->d_name, names[i]);
        struct stat sb;
        if (touched && lstat(run_file(r, e->d_name), &sb) == 0 && S_ISLNK(sb.st_mode))
            st = tsc_error_set(TSC_ERR_IO, "%s: is a symbolic link; resume never follows a link in a run folder (it "
                               "could copy a file of yours into the run, or make the trainer write to it); refused",
                               r->path);
    }
    closedir(d);
    return st;
}

/* The settings of checkpoint c (read from ck_path) into r->o, the caller's report and user kept; every setting is
 * checked against the bounds of its flag as it is parsed (tsc_train.h), and the precision against the header's. */
static tsc_status_t adopt_settings(run_t *r, const tsc_ckpt_t *c, const char *ck_path) {
    tsc_train_cfg_t *cfg = r->resumed = malloc(sizeof *cfg);
    if (!cfg) return tsc_error_set(TSC_ERR_NOMEM, "out of memory");
    tsc_status_t st = tsc_train_cfg_parse(c->cfg_text, ck_path, cfg);
    if (st != TSC_OK) return st;
    tsc_train_report_fn rep = r->o.report;
    void *user = r->o.user;
    r->o = cfg->o;
    r->o.report = rep;
    r->o.user = user;
    if ((int)r->o.prec != c->prec)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: the header says precision %s, the settings %s; refused", ck_path,
                             tsc_train_prec_name((tsc_prec_t)c->prec), tsc_train_prec_name(r->o.prec));
    return TSC_OK;
}

/* From checkpoint c on, with r->o set: the model and its state from the checkpoint, run.cfg, the CSVs of csv_src
 * (r->dir for a resume, the source for a fork) cut to the rows before the checkpoint's step into r->dir (a fork
 * copies batches.csv too; a resume's batch log cuts its own), the recorders, and the loop. A fork writes its own
 * first checkpoint, so it resumes from its own folder. */
static tsc_status_t continue_from(run_t *r, tsc_ckpt_t *c, const char *ck_path, const char *csv_src, int fork) {
    tsc_status_t st = run_setup(r, c, ck_path);
    if (st == TSC_OK && (r->n != c->n || r->elsize != c->elsize))  /* ckpt_fits checked it; the model agrees */
        st = tsc_error_set(TSC_ERR_INTERNAL, "%s: the checkpoint holds %zu parameters, the model has %zu", ck_path,
                           c->n, r->n);
    if (st == TSC_OK) {
        c->params = tsc_model_params(r->model);
        c->m = r->m;
        c->v = r->v;
        st = tsc_ckpt_load_data(ck_path, c);
    }
    if (st == TSC_OK) st = tsc_out_write_all(run_file(r, "run.cfg"), r->cfg_text, strlen(r->cfg_text));
    static const char *csvs[] = {"log.csv", "wq_norms.csv", "batches.csv"};
    for (int i = 0; i < 2 + fork && st == TSC_OK; i++) {
        char src[4200], dst[sizeof r->path];
        snprintf(src, sizeof src, "%s/%s", csv_src, csvs[i]);
        snprintf(dst, sizeof dst, "%s", run_file(r, csvs[i]));
        st = csv_copy_cut(src, dst, c->steps_done);
    }
    if (st == TSC_OK && (r->log = open_append(r, "log.csv", &st))) r->wq = open_append(r, "wq_norms.csv", &st);
    if (st == TSC_OK) st = tsc_batch_log_open_at(&r->blog, run_file(r, "batches.csv"), c->steps_done);
    if (st == TSC_OK) st = recorders_open(r, c->steps_done);
    if (st == TSC_OK && fork) st = checkpoint(r, c->steps_done);
    if (st == TSC_OK) st = train_loop(r, c->steps_done);
    return st;
}

static tsc_status_t run_body_resume(run_t *r, void *vctx) {
    resume_ctx_t *ctx = vctx;
    tsc_status_t st = run_files_check(r);
    if (st != TSC_OK) return st;
    char ck_path[sizeof r->path];
    snprintf(ck_path, sizeof ck_path, "%s", run_file(r, "ckpt.bin"));
    tsc_ckpt_t c;
    if ((st = tsc_ckpt_load_header(ck_path, &c)) != TSC_OK) return st;
    st = adopt_settings(r, &c, ck_path);
    if (st == TSC_OK) {
        if (ctx->steps > 0) r->o.steps = ctx->steps;
        if (r->o.steps <= c.steps_done)
            st = tsc_error_set(TSC_ERR_ARG, "%s: the checkpoint is at step %lld already; ask for more --steps",
                               r->dir, c.steps_done);
    }
    if (st == TSC_OK) st = continue_from(r, &c, ck_path, r->dir, 0);
    free(c.cfg_text);
    return st;
}

tsc_status_t tsc_train_resume(const char *run_dir, long long steps, tsc_train_report_fn report, void *user) {
    return tsc_train_resume_on(run_dir, steps, report, user, NULL);
}

tsc_status_t tsc_train_resume_on(const char *run_dir, long long steps, tsc_train_report_fn report, void *user,
                                 const tsc_comm_t *comm) {
    run_t r = {.dir = run_dir, .comm = tsc_comm_or_serial(comm)};
    r.o.report = report;
    r.o.user = user;
    resume_ctx_t ctx = {steps};
    return with_lock(&r, run_body_resume, &ctx);
}

/* ---- fork ---- */

typedef struct {
    const char *src;
    const tsc_train_fork_opts_t *fo;
    char policy[TSC_TRAIN_MAX_POLICIES][600];  /* the source's policies with fo->append */
} fork_ctx_t;

/* SRC/ckpt-AT.bin when kept, else SRC/ckpt.bin (checked to be at step AT by the caller); none when at < 0. */
static void fork_ckpt_path(const fork_ctx_t *f, char *buf, size_t cap) {
    struct stat sb;
    snprintf(buf, cap, "%s/ckpt-%lld.bin", f->src, f->fo->at_step);
    if (f->fo->at_step < 0 || lstat(buf, &sb) != 0) snprintf(buf, cap, "%s/ckpt.bin", f->src);
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* The steps of SRC's kept checkpoints in order ("100, 200" or "none"), for the message of a missing one. */
static void kept_list(const char *src, char *buf, size_t cap) {
    DIR *d = opendir(src);
    long long k[64];
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) && n < 64;) {
        char tail[8];
        if (sscanf(e->d_name, "ckpt-%lld.%7s", &k[n], tail) == 2 && !strcmp(tail, "bin")) n++;
    }
    if (d) closedir(d);
    qsort(k, (size_t)n, sizeof k[0], cmp_ll);
    size_t w = 0;
    buf[0] = 0;
    for (int i = 0; i < n && w + 24 < cap; i++) w += (size_t)snprintf(buf + w, cap - w, "%s%lld", i ? ", " : "", k[i]);
    if (!n) snprintf(buf, cap, "none (train the source with --ckpt-keep N)");
}

static tsc_status_t run_body_fork(run_t *r, void *vctx) {
    fork_ctx_t *f = vctx;
    struct stat sb;
    if (stat(run_file(r, "run.cfg"), &sb) == 0)
        return tsc_error_set(TSC_ERR_IO, "%s: the folder holds a run already (run.cfg); fork into another folder",
                             r->dir);
    char ck_path[4200], fork_of[1100];
    fork_ckpt_path(f, ck_path, sizeof ck_path);
    tsc_ckpt_t c;
    tsc_status_t st = tsc_ckpt_load_header(ck_path, &c);
    if (st != TSC_OK) return st;
    const tsc_train_fork_opts_t *fo = f->fo;
    if (fo->at_step >= 0 && c.steps_done != fo->at_step) {
        char kept[512];
        kept_list(f->src, kept, sizeof kept);
        free(c.cfg_text);
        return tsc_error_set(TSC_ERR_ARG, "%s: no checkpoint after step %lld (ckpt.bin is at step %lld; kept "
                                          "checkpoints: %s)", f->src, fo->at_step, c.steps_done, kept);
    }
    st = adopt_settings(r, &c, ck_path);
    if (st == TSC_OK) {
        if (fo->steps > 0) r->o.steps = fo->steps;
        if (fo->n_policies > TSC_TRAIN_MAX_POLICIES)
            st = tsc_error_set(TSC_ERR_ARG, "fork: %d attention policies (at most %d)", fo->n_policies,
                               TSC_TRAIN_MAX_POLICIES);
        for (int i = 0; i < fo->n_policies && st == TSC_OK; i++) r->o.attn_policy[i] = fo->policies[i];
        if (fo->n_policies > 0) r->o.n_attn_policy = fo->n_policies;
        else if (fo->append)
            for (int i = 0; i < r->o.n_attn_policy && st == TSC_OK; i++)
                if ((st = tsc_train_policy_append(r->o.attn_policy[i], fo->append, f->policy[i],
                                                  sizeof f->policy[i])) == TSC_OK)
                    r->o.attn_policy[i] = f->policy[i];
        snprintf(fork_of, sizeof fork_of, "%s@%lld", f->src, c.steps_done);
        r->o.fork_of = fork_of;
        if (st == TSC_OK && r->o.steps <= c.steps_done)
            st = tsc_error_set(TSC_ERR_ARG, "%s: the checkpoint is at step %lld; a fork needs more --steps than that",
                               ck_path, c.steps_done);
    }
    if (st == TSC_OK) st = continue_from(r, &c, ck_path, f->src, 1);
    free(c.cfg_text);
    return st;
}

tsc_status_t tsc_train_fork(const char *src_run, const tsc_train_fork_opts_t *fo, const char *run_dir) {
    if (!src_run || !fo || !run_dir) return tsc_error_set(TSC_ERR_ARG, "fork: no source run, options or folder");
    if (strlen(src_run) > 1000) return tsc_error_set(TSC_ERR_ARG, "fork: the source path is too long");
    struct stat a, b;
    if (stat(src_run, &a) == 0 && stat(run_dir, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return tsc_error_set(TSC_ERR_ARG, "%s: a fork goes into a new folder, not its source", run_dir);
    tsc_status_t st = make_dir(run_dir);
    if (st != TSC_OK) return st;
    run_t r = {.dir = run_dir};
    r.o.report = fo->report;
    r.o.user = fo->user;
    fork_ctx_t *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return tsc_error_set(TSC_ERR_NOMEM, "fork: out of memory");
    ctx->src = src_run;
    ctx->fo = fo;
    st = with_lock(&r, run_body_fork, ctx);
    free(ctx);
    return st;
}
