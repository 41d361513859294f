/* attn_map.c: the attention pattern of one head recomputed from a dump, with its tied rows and
 * sink keys (tsc_attn_map.h). */
#include "tsc_attn_map.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsc_attention.h"
#include "tsc_mem.h"
#include "tsc_policy.h"
#include "tsc_select.h"
#include "replay_internal.h"

void tsc_attn_map_free(tsc_attn_map_t *m) {
    if (!m) return;
    free(m->p), free(m->s), free(m->tie_eps_count), free(m->tie_exact_count), free(m->col_mass), free(m->col_uniform);
    free(m->is_sink);
    memset(m, 0, sizeof *m);
}

void tsc_attn_map_choices(tsc_dump_t *d, char *buf, size_t cap) {
    const tsc_dump_meta_t *mt = tsc_dump_meta(d);
    int ns = tsc_dump_n_steps(d), len = snprintf(buf, cap, "steps");
    for (int i = 0; i < ns && i < 12 && len >= 0 && (size_t)len < cap; i++)
        len += snprintf(buf + len, cap - (size_t)len, "%s %lld", i ? "," : "", tsc_dump_step_at(d, i));
    if (ns > 12 && len >= 0 && (size_t)len < cap) len += snprintf(buf + len, cap - (size_t)len, ", ... (%d in all)", ns);
    if (len >= 0 && (size_t)len < cap)
        snprintf(buf + len, cap - (size_t)len, "; layers 0-%d; heads 0-%d (%d kv heads); batch rows 0-%d",
                 mt->n_layer - 1, mt->n_head - 1, mt->n_kv_head, mt->batch - 1);
}

void tsc_attn_map_step_layers(tsc_dump_t *d, long long step, char *buf, size_t cap) {
    const int nl_max = tsc_dump_meta(d)->n_layer;
    int *ls = malloc(sizeof(int) * (size_t)(nl_max + 1)), n = 0;
    size_t len = 0;
    buf[0] = '\0';
    if (ls && tsc_dump_layers(d, step, ls, nl_max, &n) == TSC_OK) {
        if (n > nl_max) n = nl_max;
        for (int i = 0; i < n && len + 24 < cap;) {
            int j = i;
            while (j + 1 < n && ls[j + 1] == ls[j] + 1) j++;
            if (j > i) len += (size_t)snprintf(buf + len, cap - len, "%s%d-%d", len ? ", " : "", ls[i], ls[j]);
            else len += (size_t)snprintf(buf + len, cap - len, "%s%d", len ? ", " : "", ls[i]);
            i = j + 1;
        }
    }
    tsc_error_clear();
    free(ls);
    if (!buf[0]) snprintf(buf, cap, "none");
}

/* P, the tie counts and the column masses of row i, from its scores sr [T] (−inf where masked);
 * P goes into the kept part of m->p (tsc_attn_map_t). */
static void map_row(tsc_attn_map_t *m, const double *sr, int i) {
    const int T = m->T, f = m->pool, a = i / f;
    int nv = m->causal ? i + 1 : T;
    double mx = -INFINITY, sum = 0.0;
    for (int j = 0; j < nv; j++)
        if (sr[j] > mx) mx = sr[j];
    int ne = 0, nx = 0;
    for (int j = 0; j < nv; j++) {
        sum += exp(sr[j] - mx);
        ne += sr[j] >= mx - m->tie_eps;
        nx += sr[j] == mx;
    }
    float *pr = a >= m->p_row0 && a < m->p_row0 + m->p_rows ? m->p + (size_t)(a - m->p_row0) * m->p_cols : NULL;
    for (int j = 0; j < T; j++) {
        double p = j < nv ? exp(sr[j] - mx) / sum : 0.0;
        if (pr && f == 1) pr[j] = (float)p;
        else if (pr && j < nv && (float)p > pr[j / f]) pr[j / f] = (float)p;
        m->col_mass[j] += p;
        if (j < nv) m->col_uniform[j] += 1.0 / nv;
    }
    for (int j = 0; m->s && pr && j < T; j++) m->s[(size_t)(a - m->p_row0) * T + j] = j < nv ? sr[j] : -INFINITY;
    m->tie_eps_count[i] = ne, m->tie_exact_count[i] = nx;
    m->n_tied_rows += ne >= 2;
}

/* The row-window trace's consumer: each completed block of rows into the map. */
static void map_block(void *ctx, const tsc_attn_trace_t *tr, int t0, int nr) {
    tsc_attn_map_t *m = ctx;
    for (int i = t0; i < t0 + nr; i++) map_row(m, tr->s + (size_t)(i % tr->rows) * m->T, i);
}

/* Runs pol's forward on qkv (q, k, v, then o and lse scratch) with a row-window trace of S feeding
 * map_row, then marks the sinks. */
static tsc_status_t map_rows(tsc_attn_map_t *m, const tsc_policy_t *pol, const tsc_dump_meta_t *mt, float *qkv) {
    const int T = mt->seq_len, D = mt->head_dim;
    const size_t n = (size_t)T * (size_t)D;
    tsc_attn_trace_t tr;
    tsc_status_t st = tsc_attn_trace_init_rows(&tr, T, D, pol->block_k, TSC_TRACE_SCORES, TSC_ATTN_TRACE_ROW_BLOCK,
                                               map_block, m);
    if (st != TSC_OK) return st;
    tr.b = 0, tr.h = 0;
    tsc_attn_dims_t dims = {1, 1, 1, T, D, mt->causal, mt->softmax_scale};
    int f64 = tsc_policy_uses_fp64(pol);
    double *wide = NULL;
    float *o = qkv + 3 * n;
    tsc_attn_io_t io;
    memset(&io, 0, sizeof io);
    io.dtype = f64 ? TSC_ATTN_F64 : TSC_ATTN_F32;
    if (f64) {
        if (!(wide = malloc(sizeof(double) * (4 * n + (size_t)T)))) {
            tsc_attn_trace_free(&tr);
            return tsc_error_set(TSC_ERR_NOMEM, "attention map: out of memory");
        }
        for (size_t i = 0; i < 3 * n; i++) wide[i] = qkv[i];
        io.q = wide, io.k = wide + n, io.v = wide + 2 * n, io.o = wide + 3 * n, io.lse = wide + 4 * n;
    } else {
        io.q = qkv, io.k = qkv + n, io.v = qkv + 2 * n, io.o = o, io.lse = o + n;
    }
    st = tsc_attn_run(pol, &dims, &io, &tr, 1);
    free(wide);
    tsc_attn_trace_free(&tr);
    for (int j = 0; st == TSC_OK && j < T; j++) {
        m->is_sink[j] = m->col_mass[j] >= TSC_ATTN_MAP_SINK_SHARE * T &&
                        m->col_mass[j] >= TSC_ATTN_MAP_SINK_UNIFORM * m->col_uniform[j];
        m->n_sinks += m->is_sink[j];
    }
    return st;
}

static tsc_status_t check_args(tsc_dump_t *d, long long step, int layer, int head, int batch) {
    const tsc_dump_meta_t *mt = tsc_dump_meta(d);
    char ch[512];
    tsc_attn_map_choices(d, ch, sizeof ch);
    const char *path = tsc_dump_path(d);
    if (!tsc_dump_has_step(d, step))
        return tsc_error_set(TSC_ERR_MISSING, "%s has no step %lld (it has %s)", path, step, ch);
    if (layer < 0 || layer >= mt->n_layer || !tsc_dump_has_layer(d, step, layer)) {
        char ls[256];
        tsc_attn_map_step_layers(d, step, ls, sizeof ls);
        return tsc_error_set(TSC_ERR_MISSING, "%s: step %lld has no layer %d: the layers captured at that step are %s",
                             path, step, layer, ls);
    }
    if (head < 0 || head >= mt->n_head)
        return tsc_error_set(TSC_ERR_ARG, "%s: head %d out of range (the dump has %s)", path, head, ch);
    if (batch < 0 || batch >= mt->batch)
        return tsc_error_set(TSC_ERR_ARG, "%s: batch row %d out of range (the dump has %s)", path, batch, ch);
    for (int i = 0; i < 2; i++) {
        const char *nm = i ? "k" : "q";
        if (!tsc_dump_has_dataset(d, step, layer, nm))
            return tsc_error_set(TSC_ERR_MISSING, "%s: step %lld layer %d has no %s", path, step, layer, nm);
    }
    return TSC_OK;
}

tsc_status_t tsc_attn_map_compute_kept(tsc_dump_t *d, long long step, int layer, int head, int batch,
                                       const char *policy, double tie_eps, const tsc_attn_map_keep_t *keep,
                                       tsc_attn_map_t *m) {
    if (!d || !m) return tsc_error_set(TSC_ERR_ARG, "tsc_attn_map_compute: NULL argument");
    memset(m, 0, sizeof *m);
    tsc_status_t st = check_args(d, step, layer, head, batch);
    if (st != TSC_OK) return st;
    tsc_policy_t pol;
    if ((st = tsc_policy_parse(policy && *policy ? policy : "fp32", &pol)) != TSC_OK)
        return tsc_error_wrap(st, "attention map: policy: ");
    const tsc_dump_meta_t *mt = tsc_dump_meta(d);
    const int T = mt->seq_len, D = mt->head_dim;
    const int f = keep ? keep->pool : 1, g = f > 0 ? (T + f - 1) / f : 0; /* the grid: g x g */
    const int r0 = keep ? keep->row0 : 0, r1 = keep && keep->row1 > 0 ? keep->row1 : g;
    const int keep_s = keep && keep->scores;
    if (f < 1 || r0 < 0 || r0 >= r1 || r1 > g || (keep_s && f != 1))
        return tsc_error_set(TSC_ERR_ARG, "attention map: pool %d, rows %d:%d%s: need pool >= 1 and 0 <= a < b <= %d%s",
                             f, r0, r1, keep_s ? ", scores kept" : "", g, keep_s ? ", and pool 1 to keep scores" : "");
    const size_t n = (size_t)T * (size_t)D, kept = (size_t)(r1 - r0) * (size_t)g;
    if ((st = tsc_mem_check(kept * (sizeof(float) + (keep_s ? sizeof(double) : 0)) + 5 * n * sizeof(float) + (size_t)T * 32,
                            "the attention map of one head")) != TSC_OK)
        return st;
    m->T = T, m->causal = mt->causal, m->head = head, m->batch = batch, m->layer = layer, m->step = step;
    m->kv_head = head / (mt->n_head / mt->n_kv_head);
    m->tie_eps = tie_eps > 0 ? tie_eps : TSC_ATTN_MAP_TIE_EPS;
    m->pool = f, m->p_row0 = r0, m->p_rows = r1 - r0, m->p_cols = g;
    TSC_INVARIANT(tsc_policy_format(&pol, m->policy, sizeof m->policy) == TSC_OK); /* parsed above; 128 bytes fit a
                                                                                    * preset with modifiers */
    float *qkv = calloc(5 * n + (size_t)T, sizeof(float));
    m->p = f == 1 ? calloc(kept, sizeof(float)) : malloc(sizeof(float) * kept);
    m->tie_eps_count = calloc((size_t)T, sizeof(int32_t)), m->tie_exact_count = calloc((size_t)T, sizeof(int32_t));
    m->col_mass = calloc((size_t)T, sizeof(double)), m->col_uniform = calloc((size_t)T, sizeof(double));
    m->is_sink = calloc((size_t)T, 1);
    if (keep_s) m->s = malloc(sizeof(double) * kept);
    if (!qkv || !m->p || (keep_s && !m->s) || !m->tie_eps_count || !m->tie_exact_count || !m->col_mass || !m->col_uniform ||
        !m->is_sink) {
        st = tsc_error_set(TSC_ERR_NOMEM, "attention map: out of memory");
        goto out;
    }
    for (size_t c = 0; f > 1 && c < kept; c++) m->p[c] = -1.0f; /* pooled: no visible entry yet */
    const char *path = tsc_dump_path(d);
    if ((st = replay_read_head(d, path, step, layer, "q", batch, head, 0, n, qkv)) != TSC_OK) goto out;
    if ((st = replay_read_head(d, path, step, layer, "k", batch, m->kv_head, 1, n, qkv + n)) != TSC_OK) goto out;
    /* v only feeds the forward's output, which is not used: zeros keep it finite */
    st = map_rows(m, &pol, mt, qkv);
out:
    free(qkv);
    return st;
}

tsc_status_t tsc_attn_map_compute(tsc_dump_t *d, long long step, int layer, int head, int batch, const char *policy,
                                  double tie_eps, tsc_attn_map_t *m) {
    return tsc_attn_map_compute_kept(d, step, layer, head, batch, policy, tie_eps, NULL, m);
}
