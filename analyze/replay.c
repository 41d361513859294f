/* replay.c: attention replayed from a dump under N policies (tsc_replay.h), the replay file of
 * docs/FORMAT.md §2, and the comparison of every policy against the first. */
#include "tsc_replay.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay_internal.h"
#include "tsc_attention.h"
#include "tsc_h5.h"
#include "tsc_mem.h"

struct tsc_replay_priv {
    tsc_dump_t *dump;
    tsc_policy_t *pol;   /* [n_policies] with the dump's tiles applied */
    int *layers;         /* scratch [n_layer + 1] */
    tsc_select_t sel;    /* the selection as planned (the run lists each step's layers again) */
};

/* ------------------------------------------------------------------ comparison */

void tsc_replay_cmp_init(tsc_replay_cmp_t *c) {
    memset(c, 0, sizeof *c);
    c->mean_abs = c->rel = c->signed_mean = NAN;
}

void tsc_replay_cmp_add(tsc_replay_cmp_t *c, const double *ref, const double *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        c->n++;
        if (!isfinite(x[i])) {
            c->n_nonfinite++;
            continue;
        }
        if (!isfinite(ref[i])) continue;
        const double diff = x[i] - ref[i], ad = fabs(diff), ar = fabs(ref[i]);
        c->n_compared++;
        if (ad > c->max_abs) c->max_abs = ad;
        if (ar > c->ref_max_abs) c->ref_max_abs = ar;
        c->sum_abs += ad;
        c->signed_sum += diff;
    }
}

void tsc_replay_cmp_finish(tsc_replay_cmp_t *c) {
    if (c->n_compared == 0) {
        c->max_abs = c->mean_abs = c->rel = c->signed_mean = NAN;
        return;
    }
    c->mean_abs = c->sum_abs / (double)c->n_compared;
    c->signed_mean = c->signed_sum / (double)c->n_compared;
    c->rel = c->ref_max_abs > 0 ? c->max_abs / c->ref_max_abs : 0;
}

/* ------------------------------------------------------------------ plan */

void tsc_replay_opts_init(tsc_replay_opts_t *o) {
    memset(o, 0, sizeof *o);
    tsc_select_init(&o->sel);
}

void tsc_replay_free(tsc_replay_t *r) {
    if (!r) return;
    if (r->priv) {
        tsc_dump_close(r->priv->dump);
        free(r->priv->pol);
        free(r->priv->layers);
        free(r->priv);
    }
    free(r->dump_path);
    free(r->out_path);
    free(r->steps);
    free(r->heads);
    free(r->batches);
    free(r->policies);
    free(r);
}

static tsc_status_t plan_policies(tsc_replay_t *r, const tsc_replay_opts_t *o) {
    const tsc_dump_meta_t *m = &r->meta;
    if (o->dump_tiles && (m->tile_q < 1 || m->tile_q > 65536 || m->tile_k < 1 || m->tile_k > 65536))
        return tsc_error_set(TSC_ERR_FORMAT, "%s: tile sizes %d x %d are not usable with --dump-tiles", r->dump_path,
                             m->tile_q, m->tile_k);
    for (int p = 0; p < r->n_policies; p++) {
        tsc_policy_t *pol = &r->priv->pol[p];
        *pol = o->policies[p];
        if (o->dump_tiles) {
            pol->block_q = m->tile_q;
            pol->block_k = m->tile_k;
        }
        if (tsc_policy_format(pol, r->policies[p].name, sizeof r->policies[p].name) != TSC_OK)
            return tsc_error_wrap(TSC_ERR_ARG, "policy %d: ", p);
        r->policies[p].fp64 = tsc_policy_uses_fp64(pol);
        tsc_replay_cmp_init(&r->policies[p].o);
        tsc_replay_cmp_init(&r->policies[p].delta);
    }
    return TSC_OK;
}

tsc_status_t replay_sel_resolve(tsc_dump_t *d, const char *path, const tsc_select_t *sel, int first_only,
                                const char *who, const char *verb, replay_sel_t *out) {
    const tsc_dump_meta_t *m = tsc_dump_meta(d);
    const int n_all = tsc_dump_n_steps(d);
    out->heads = malloc(sizeof(int) * (size_t)m->n_head);
    out->batches = malloc(sizeof(int) * (size_t)m->batch);
    out->steps = malloc(sizeof(long long) * (size_t)(n_all + 1));
    const size_t layers_bytes = sizeof(int) * ((size_t)m->n_layer + 1);  /* size_t: n_layer may be INT_MAX */
    char label[64];
    snprintf(label, sizeof label, "the %s's layer list", who);
    tsc_status_t mst = tsc_mem_check(layers_bytes, label);
    if (mst != TSC_OK) return tsc_error_wrap(mst, "%s %s: ", who, path);
    out->layers = malloc(layers_bytes);
    if (!out->heads || !out->batches || !out->steps || !out->layers)
        return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory planning %s", who, path);
    for (int h = 0; h < m->n_head; h++)
        if (tsc_select_set_has(&sel->heads, h)) out->heads[out->n_heads++] = h;
    for (int b = 0; b < m->batch; b++)
        if (tsc_select_set_has(&sel->batches, b)) out->batches[out->n_batches++] = b;
    for (int i = 0; i < n_all && (!first_only || out->n_steps == 0); i++)
        if (tsc_select_set_has(&sel->steps, tsc_dump_step_at(d, i))) out->steps[out->n_steps++] = tsc_dump_step_at(d, i);
    if (out->n_heads == 0 || out->n_batches == 0 || out->n_steps == 0) {
        char why[1024];
        return tsc_error_set(TSC_ERR_MISSING, "%s: the selection leaves nothing to %s: it %s", path, verb,
                             tsc_select_miss_text(sel, d, why, sizeof why));
    }
    return TSC_OK;
}

tsc_status_t replay_step_layers(tsc_dump_t *d, const tsc_select_t *sel, long long s, replay_sel_t *rs, int *n) {
    const int n_layer = tsc_dump_meta(d)->n_layer;
    int n_l = 0, k = 0;
    tsc_status_t st = tsc_dump_layers(d, s, rs->layers, n_layer, &n_l);
    if (st != TSC_OK) return st;
    for (int li = 0; li < n_l && li < n_layer; li++)
        if (tsc_select_set_has(&sel->layers, rs->layers[li])) rs->layers[k++] = rs->layers[li];
    *n = k;
    return TSC_OK;
}

/* The selected heads, batch rows and steps present in the dump. */
static tsc_status_t plan_selection(tsc_replay_t *r, const tsc_select_t *sel) {
    replay_sel_t rs = {0};
    tsc_status_t st = replay_sel_resolve(r->priv->dump, r->dump_path, sel, 0, "replay", "replay", &rs);
    r->steps = rs.steps, r->n_steps = rs.n_steps;
    r->heads = rs.heads, r->n_heads = rs.n_heads;
    r->batches = rs.batches, r->n_batches = rs.n_batches;
    r->priv->layers = rs.layers;
    return st;
}

/* The selected layers of step s (into r->priv->layers). */
static tsc_status_t step_layers(tsc_replay_t *r, const tsc_select_t *sel, long long s, int *n) {
    replay_sel_t rs = {.layers = r->priv->layers};
    return replay_step_layers(r->priv->dump, sel, s, &rs, n);
}

/* Every (step, layer) to replay, checked up front so a missing dataset fails before any work. */
static tsc_status_t plan_pairs(tsc_replay_t *r, const tsc_select_t *sel) {
    static const char *need[4] = {"q", "k", "v", "do"};
    for (int si = 0; si < r->n_steps; si++) {
        int n_l = 0;
        tsc_status_t st = step_layers(r, sel, r->steps[si], &n_l);
        if (st != TSC_OK) return st;
        for (int li = 0; li < n_l; li++) {
            const int L = r->priv->layers[li];
            for (int k = 0; k < (r->backward ? 4 : 3); k++) {
                tsc_dump_dataset_info_t info;
                if (tsc_dump_dataset_info(r->priv->dump, r->steps[si], L, need[k], &info) != TSC_OK)
                    return tsc_error_set(TSC_ERR_MISSING, "%s: step %lld layer %d: dataset '%s' is missing or unusable "
                                         "(%s)%s", r->dump_path, r->steps[si], L, need[k], tsc_error_last(),
                                         k == 3 ? "; the backward replay needs do (use --forward-only to skip it)" : "");
            }
            r->n_pairs++;
        }
    }
    if (r->n_pairs == 0) {
        char why[1024];
        return tsc_error_set(TSC_ERR_MISSING, "%s: the selection %s", r->dump_path,
                             tsc_select_miss_text(sel, r->priv->dump, why, sizeof why));
    }
    return TSC_OK;
}

tsc_status_t tsc_replay_plan(const tsc_replay_opts_t *o, tsc_replay_t **out) {
    *out = NULL;
    if (!o || !o->dump_path || !o->out_path || !o->policies || o->n_policies < 1)
        return tsc_error_set(TSC_ERR_ARG, "replay: a dump, an output path and at least one policy are required");
    tsc_replay_t *r = calloc(1, sizeof *r);
    if (!r) return tsc_error_set(TSC_ERR_NOMEM, "replay: out of memory");
    r->priv = calloc(1, sizeof *r->priv);
    r->dump_path = strdup(o->dump_path);
    r->out_path = strdup(o->out_path);
    r->n_policies = o->n_policies;
    r->backward = !o->forward_only;
    r->policies = calloc((size_t)o->n_policies, sizeof *r->policies);
    tsc_status_t st = TSC_OK;
    if (!r->priv || !r->dump_path || !r->out_path || !r->policies ||
        !(r->priv->pol = calloc((size_t)o->n_policies, sizeof *r->priv->pol)))
        st = tsc_error_set(TSC_ERR_NOMEM, "replay: out of memory for %d policies", o->n_policies);
    if (st == TSC_OK) st = tsc_dump_open(&r->priv->dump, o->dump_path);
    if (st == TSC_OK) {
        r->meta = *tsc_dump_meta(r->priv->dump);
        r->priv->sel = o->sel;
        tsc_select_format(&o->sel, r->selection, sizeof r->selection);
        st = plan_policies(r, o);
    }
    if (st == TSC_OK) st = plan_selection(r, &o->sel);
    if (st == TSC_OK) st = plan_pairs(r, &o->sel);
    if (st != TSC_OK) {
        tsc_replay_free(r);
        return st;
    }
    *out = r;
    return TSC_OK;
}

/* ------------------------------------------------------------------ run */

typedef struct {
    size_t TD, nq, nr;   /* one head's T*D; all heads' q elements; all heads' rows */
    float *in;           /* q, k, v, do [4 * nq] */
    char *out;           /* o lse delta dq dk dv of one policy, widest type */
    double *ref, *cur;   /* policy 0's and the current policy's o then delta, as double [nq + nr] */
} bufs_t;

tsc_status_t replay_read_head(tsc_dump_t *d, const char *path, long long step, int layer, const char *name, int b,
                              int h, int kv, size_t n, float *out) {
    tsc_status_t st = tsc_dump_read(d, step, layer, name, b, h, out);
    if (st != TSC_OK) return tsc_error_wrap(st, "%s: ", path);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(out[i]))
            return tsc_error_set(TSC_ERR_NONFINITE, "%s: step %lld layer %d dataset '%s' batch %d %s %d holds "
                                 "a non-finite value at element %zu (%g); a head never captured reads as NaN: "
                                 "select captured heads with --heads", path, step, layer, name, b,
                                 kv ? "kv head" : "head", h, i, (double)out[i]);
    return TSC_OK;
}

tsc_status_t replay_attn(const tsc_policy_t *pol, const tsc_attn_dims_t *dims, const tsc_attn_io_t *io) {
    if (io->dtype != TSC_ATTN_F64) return tsc_attn_run(pol, dims, io, NULL, 0);
    const size_t TD = (size_t)dims->T * (size_t)dims->D, nq = (size_t)dims->B * (size_t)dims->H * TD,
                 nkv = (size_t)dims->B * (size_t)dims->Hkv * TD, n = 2 * nq + 2 * nkv;
    double *qd = malloc(sizeof(double) * n);
    if (!qd) return tsc_error_set(TSC_ERR_NOMEM, "replay: out of memory widening the inputs of an FP64 policy");
    const float *src[4] = {io->q, io->k, io->v, io->dout};
    const size_t len[4] = {nq, nkv, nkv, nq};
    double *dst[4];
    size_t off = 0;
    for (int a = 0; a < 4; off += len[a], a++) {
        dst[a] = qd + off;
        for (size_t i = 0; src[a] && i < len[a]; i++) dst[a][i] = src[a][i];
    }
    tsc_attn_io_t w = *io;
    w.q = dst[0]; w.k = dst[1]; w.v = dst[2]; w.dout = io->dout ? dst[3] : NULL;
    tsc_status_t st = tsc_attn_run(pol, dims, &w, NULL, 0);
    free(qd);
    return st;
}

/* Reads one per-head dataset slice for the selected batches and heads into dst [B', H', T, X]
 * (kv datasets map query head h to its kv head). Checks values are finite. */
static tsc_status_t load(tsc_replay_t *r, long long step, int layer, const char *name, int kv, size_t slice,
                         float *dst) {
    const int G = r->meta.n_head / r->meta.n_kv_head;
    for (int bi = 0; bi < r->n_batches; bi++)
        for (int hi = 0; hi < r->n_heads; hi++) {
            const int h = kv ? r->heads[hi] / G : r->heads[hi], b = r->batches[bi];
            float *out = dst + ((size_t)bi * r->n_heads + hi) * slice;
            tsc_status_t st = replay_read_head(r->priv->dump, r->dump_path, step, layer, name, b, h, kv, slice, out);
            if (st != TSC_OK) return st;
        }
    return TSC_OK;
}

static tsc_status_t write_group(hid_t fid, const char *path, const tsc_replay_t *r, int p, const tsc_attn_io_t *io) {
    hid_t g;
    tsc_status_t st = tsc_h5_group_create(fid, path, &g);
    if (st != TSC_OK) return st;
    const int f64 = r->policies[p].fp64;
    const uint64_t d4[4] = {(uint64_t)r->n_batches, (uint64_t)r->n_heads, (uint64_t)r->meta.seq_len,
                            (uint64_t)r->meta.head_dim};
    const char *l4 = "batch,head,token,feature", *l3 = "batch,head,token";
    st = tsc_h5_attr_write_str(g, "policy", r->policies[p].name);
    const char *names[6] = {"o", "lse", "delta", "dq", "dk", "dv"};
    const void *data[6] = {io->o, io->lse, io->delta, io->dq, io->dk, io->dv};
    for (int k = 0; k < (r->backward ? 6 : 2) && st == TSC_OK; k++) {
        const int rank = k == 1 || k == 2 ? 3 : 4;
        const char *lab = rank == 3 ? l3 : l4;
        st = f64 ? tsc_h5_write_doubles(g, names[k], rank, d4, data[k], lab, NULL)
                 : tsc_h5_write_floats(g, names[k], rank, d4, data[k], lab, NULL);
    }
    tsc_h5_close(g);
    return st;
}

static tsc_status_t write_root(hid_t fid, const tsc_replay_t *r) {
    const tsc_dump_meta_t *m = &r->meta;
    tsc_status_t st = tsc_h5_attr_write_str(fid, "format", "tilescope-replay");
    if (st == TSC_OK) st = tsc_h5_attr_write_long(fid, "format_version", 1);
    if (st == TSC_OK) st = tsc_h5_attr_write_str(fid, "source", r->dump_path);
    if (st == TSC_OK) st = tsc_h5_attr_write_str(fid, "source_policy", m->policy);
    if (st == TSC_OK) st = tsc_h5_attr_write_str(fid, "selection", r->selection);
    char producer[64];
    snprintf(producer, sizeof producer, "tilescope replay %s", tsc_version());
    if (st == TSC_OK) st = tsc_h5_attr_write_str(fid, "producer", producer);
    if (st == TSC_OK) st = tsc_h5_attr_write_long(fid, "n_policies", r->n_policies);
    if (st == TSC_OK) st = tsc_h5_attr_write_long(fid, "backward", r->backward);
    const long geo[6] = {m->batch, m->n_head, m->n_kv_head, m->seq_len, m->head_dim, m->causal};
    const char *geo_names[6] = {"batch", "n_head", "n_kv_head", "seq_len", "head_dim", "causal"};
    for (int i = 0; i < 6 && st == TSC_OK; i++) st = tsc_h5_attr_write_long(fid, geo_names[i], geo[i]);
    if (st == TSC_OK) st = tsc_h5_attr_write_double(fid, "softmax_scale", m->softmax_scale);
    long *hl = malloc(sizeof(long) * (size_t)(r->n_heads + r->n_batches));
    if (!hl) return st == TSC_OK ? tsc_error_set(TSC_ERR_NOMEM, "replay: out of memory") : st;
    for (int i = 0; i < r->n_heads; i++) hl[i] = r->heads[i];
    for (int i = 0; i < r->n_batches; i++) hl[r->n_heads + i] = r->batches[i];
    if (st == TSC_OK) st = tsc_h5_attr_write_longs(fid, "heads", hl, (size_t)r->n_heads);
    if (st == TSC_OK) st = tsc_h5_attr_write_longs(fid, "batches", hl + r->n_heads, (size_t)r->n_batches);
    free(hl);
    return st;
}

/* The o and delta of io as double, into dst [nq + nr] (delta only with the backward). */
static void to_double(const tsc_attn_io_t *io, int f64, const bufs_t *b, int bwd, double *dst) {
    for (size_t i = 0; i < b->nq; i++) dst[i] = f64 ? ((const double *)io->o)[i] : ((const float *)io->o)[i];
    for (size_t i = 0; bwd && i < b->nr; i++)
        dst[b->nq + i] = f64 ? ((const double *)io->delta)[i] : ((const float *)io->delta)[i];
}

/* Policy p on the loaded inputs: run, write its group, add to its comparison. */
static tsc_status_t run_policy(tsc_replay_t *r, hid_t fid, bufs_t *b, int p, long long step, int L) {
    const tsc_dump_meta_t *m = &r->meta;
    const int f64 = r->policies[p].fp64, bwd = r->backward;
    const size_t es = f64 ? sizeof(double) : sizeof(float), nq = b->nq, nr = b->nr;
    tsc_attn_dims_t dims = {r->n_batches, r->n_heads, r->n_heads, m->seq_len, m->head_dim, m->causal,
                            m->softmax_scale};
    char *ob = b->out;
    float *q = b->in;
    tsc_attn_io_t io = {f64 ? TSC_ATTN_F64 : TSC_ATTN_F32, q, q + nq, q + 2 * nq, bwd ? q + 3 * nq : NULL,
                        ob, ob + nq * es, ob + (nq + nr) * es, ob + (nq + 2 * nr) * es,
                        ob + (2 * nq + 2 * nr) * es, ob + (3 * nq + 2 * nr) * es};
    tsc_status_t st = replay_attn(&r->priv->pol[p], &dims, &io);
    if (st != TSC_OK)
        return tsc_error_wrap(st, "step %lld layer %d policy %s: ", step, L, r->policies[p].name);
    char path[96];
    snprintf(path, sizeof path, "step_%08lld/layer_%03d/policy_%d", step, L, p);
    if ((st = write_group(fid, path, r, p, &io)) != TSC_OK) return st;
    double *x = p == 0 ? b->ref : b->cur;
    to_double(&io, f64, b, bwd, x);
    tsc_replay_cmp_add(&r->policies[p].o, b->ref, x, nq);
    if (bwd) tsc_replay_cmp_add(&r->policies[p].delta, b->ref + nq, x + nq, nr);
    return TSC_OK;
}

static tsc_status_t run_pair(tsc_replay_t *r, hid_t fid, bufs_t *b, long long step, int L) {
    float *q = b->in;
    tsc_status_t st = load(r, step, L, "q", 0, b->TD, q);
    if (st == TSC_OK) st = load(r, step, L, "k", 1, b->TD, q + b->nq);
    if (st == TSC_OK) st = load(r, step, L, "v", 1, b->TD, q + 2 * b->nq);
    if (st == TSC_OK && r->backward) st = load(r, step, L, "do", 0, b->TD, q + 3 * b->nq);
    /* each selected query head gets its own copy of its kv head: H = Hkv = heads selected */
    for (int p = 0; p < r->n_policies && st == TSC_OK; p++) st = run_policy(r, fid, b, p, step, L);
    if (st != TSC_OK) return st;
    char lpath[64];
    snprintf(lpath, sizeof lpath, "step_%08lld/layer_%03d", step, L);
    hid_t g;
    if ((st = tsc_h5_group_create(fid, lpath, &g)) == TSC_OK) tsc_h5_close(g);
    return st;
}

/* Groups policy_<i> with the comparison attributes (docs/FORMAT.md §2). */
static tsc_status_t write_policy_groups(hid_t fid, tsc_replay_t *r) {
    for (int p = 0; p < r->n_policies; p++) {
        char gp[32];
        snprintf(gp, sizeof gp, "policy_%d", p);
        hid_t g;
        tsc_status_t st = tsc_h5_group_create(fid, gp, &g);
        if (st != TSC_OK) return st;
        const tsc_replay_cmp_t *o = &r->policies[p].o, *d = &r->policies[p].delta;
        st = tsc_h5_attr_write_str(g, "policy", r->policies[p].name);
        if (st == TSC_OK) st = tsc_h5_attr_write_long(g, "o_n_nonfinite", (long)o->n_nonfinite);
        if (st == TSC_OK && r->backward) st = tsc_h5_attr_write_long(g, "delta_n_nonfinite", (long)d->n_nonfinite);
        if (st == TSC_OK && p > 0) {
            const double vals[8] = {o->max_abs, o->mean_abs, o->rel, d->max_abs, d->mean_abs, d->rel,
                                    d->signed_mean, d->signed_sum};
            const char *names[8] = {"o_max_abs", "o_mean_abs", "o_rel", "delta_max_abs", "delta_mean_abs",
                                    "delta_rel", "delta_signed_mean", "delta_signed_sum"};
            for (int i = 0; i < 8 && st == TSC_OK; i++) st = tsc_h5_attr_write_double(g, names[i], vals[i]);
        }
        tsc_h5_close(g);
        if (st != TSC_OK) return st;
    }
    return TSC_OK;
}

static tsc_status_t run_all(tsc_replay_t *r, hid_t fid, bufs_t *b, tsc_replay_progress_fn progress, void *ctx) {
    tsc_status_t st = write_root(fid, r);
    int job = 0;
    for (int si = 0; si < r->n_steps && st == TSC_OK; si++) {
        int n_l = 0;
        st = step_layers(r, &r->priv->sel, r->steps[si], &n_l);
        for (int li = 0; li < n_l && st == TSC_OK; li++) {
            const int L = r->priv->layers[li];
            st = run_pair(r, fid, b, r->steps[si], L);
            if (st == TSC_OK && progress) progress(ctx, ++job, r->n_pairs, r->steps[si], L);
        }
    }
    r->n_nonfinite = 0;
    for (int p = 0; p < r->n_policies; p++) {
        tsc_replay_cmp_finish(&r->policies[p].o);
        tsc_replay_cmp_finish(&r->policies[p].delta);
        r->n_nonfinite += r->policies[p].o.n_nonfinite + r->policies[p].delta.n_nonfinite;
    }
    if (st == TSC_OK) st = write_policy_groups(fid, r);
    return st;
}

tsc_status_t tsc_replay_run(tsc_replay_t *r, tsc_replay_progress_fn progress, void *ctx) {
    if (!r || r->done) return tsc_error_set(TSC_ERR_ARG, "replay: run needs a fresh plan");
    const int T = r->meta.seq_len, D = r->meta.head_dim;
    bufs_t b;
    b.TD = (size_t)T * D;
    b.nq = (size_t)r->n_batches * r->n_heads * b.TD;
    b.nr = (size_t)r->n_batches * r->n_heads * T;
    /* one layer's selected heads at a time: O(B·H·T·D), never T x T (an FP64 policy widens its
     * inputs into 4 more such arrays, counted too) */
    tsc_status_t mst = tsc_mem_check(sizeof(float) * 4 * b.nq + sizeof(double) * (8 * b.nq + 4 * b.nr) +
                                         sizeof(double) * 4 * b.nq,
                                     "replay: the buffers of one layer's selected heads");
    if (mst != TSC_OK) return mst;
    b.in = malloc(sizeof(float) * 4 * b.nq);
    b.out = malloc(sizeof(double) * (4 * b.nq + 2 * b.nr));
    b.ref = malloc(sizeof(double) * 2 * (b.nq + b.nr));
    b.cur = b.ref ? b.ref + b.nq + b.nr : NULL;
    tsc_status_t st = TSC_OK;
    if (!b.in || !b.out || !b.ref)
        st = tsc_error_set(TSC_ERR_NOMEM, "replay: out of memory for %d heads of [%d, %d]",
                           r->n_batches * r->n_heads, T, D);
    tsc_h5_file_t f;
    if (st == TSC_OK) st = tsc_h5_create(&f, r->out_path);
    if (st == TSC_OK) {
        st = run_all(r, f.fid, &b, progress, ctx);
        if (st == TSC_OK) st = tsc_h5_commit(&f);
        else tsc_h5_abort(&f);
    }
    free(b.in);
    free(b.out);
    free(b.ref);
    r->done = st == TSC_OK;
    return st;
}

/* ------------------------------------------------------------------ JSON */

#define CMP_F(m) TSC_JSON_FIELD(tsc_replay_cmp_t, m, #m)
static void cmp_json(tsc_json_t *j, const char *key, const tsc_replay_cmp_t *c, int is_delta) {
    static const tsc_json_field_t err[] = {CMP_F(max_abs), CMP_F(mean_abs), CMP_F(rel)};
    static const tsc_json_field_t signed_[] = {CMP_F(signed_mean), CMP_F(signed_sum)};
    static const tsc_json_field_t counts[] = {CMP_F(n), CMP_F(n_compared), CMP_F(n_nonfinite)};
    tsc_json_key(j, key);
    tsc_json_object_begin(j);
    tsc_json_kv_fields(j, c, err, TSC_JSON_NFIELDS(err));
    if (is_delta) tsc_json_kv_fields(j, c, signed_, TSC_JSON_NFIELDS(signed_));
    tsc_json_kv_fields(j, c, counts, TSC_JSON_NFIELDS(counts));
    tsc_json_object_end(j);
}

void tsc_replay_json(const tsc_replay_t *r, tsc_json_t *j) {
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "dump", r->dump_path);
    tsc_json_kv_string(j, "output", r->out_path);
    tsc_json_kv_string(j, "selection", r->selection);
    tsc_json_kv_int(j, "pairs", r->n_pairs);
    tsc_json_key(j, "heads");
    tsc_json_array_begin(j);
    for (int i = 0; i < r->n_heads; i++) tsc_json_int(j, r->heads[i]);
    tsc_json_array_end(j);
    tsc_json_key(j, "batches");
    tsc_json_array_begin(j);
    for (int i = 0; i < r->n_batches; i++) tsc_json_int(j, r->batches[i]);
    tsc_json_array_end(j);
    tsc_json_kv_bool(j, "backward", r->backward);
    tsc_json_kv_bool(j, "done", r->done);
    tsc_json_key(j, "policies");
    tsc_json_array_begin(j);
    for (int p = 0; p < r->n_policies; p++) {
        tsc_json_object_begin(j);
        tsc_json_kv_string(j, "policy", r->policies[p].name);
        tsc_json_kv_bool(j, "reference", p == 0);
        if (r->done) {
            cmp_json(j, "o", &r->policies[p].o, 0);
            if (r->backward) cmp_json(j, "delta", &r->policies[p].delta, 1);
        }
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
    tsc_json_kv_int(j, "n_nonfinite", r->n_nonfinite);
    tsc_json_key(j, "nonfinite_numbers");
    tsc_json_nonfinite_note(j);
    tsc_json_object_end(j);
}
