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
    free(m->p), free(m->tie_eps_count), free(m->tie_exact_count), free(m->col_mass), free(m->col_uniform);
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

/* S of one head under pol into s [T, T] (−inf where masked), through the reference's trace. */
static tsc_status_t scores(const tsc_policy_t *pol, const tsc_dump_meta_t *mt, float *qkv, double *s) {
    const int T = mt->seq_len, D = mt->head_dim;
    const size_t n = (size_t)T * (size_t)D;
    tsc_attn_trace_t tr;
    tsc_status_t st = tsc_attn_trace_init(&tr, T, D, pol->block_k, TSC_TRACE_SCORES);
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
    if (st == TSC_OK) memcpy(s, tr.s, sizeof(double) * (size_t)T * (size_t)T);
    free(wide);
    tsc_attn_trace_free(&tr);
    return st;
}

/* P, tie counts and column masses from S. */
static void probabilities(tsc_attn_map_t *m, const double *s) {
    const int T = m->T;
    for (int i = 0; i < T; i++) {
        const double *sr = s + (size_t)i * T;
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
        float *pr = m->p + (size_t)i * T;
        for (int j = 0; j < T; j++) {
            double p = j < nv ? exp(sr[j] - mx) / sum : 0.0;
            pr[j] = (float)p;
            m->col_mass[j] += p;
            if (j < nv) m->col_uniform[j] += 1.0 / nv;
        }
        m->tie_eps_count[i] = ne, m->tie_exact_count[i] = nx;
        m->n_tied_rows += ne >= 2;
    }
    for (int j = 0; j < T; j++) {
        m->is_sink[j] = m->col_mass[j] >= TSC_ATTN_MAP_SINK_SHARE * T &&
                        m->col_mass[j] >= TSC_ATTN_MAP_SINK_UNIFORM * m->col_uniform[j];
        m->n_sinks += m->is_sink[j];
    }
}

static tsc_status_t check_args(tsc_dump_t *d, long long step, int layer, int head, int batch) {
    const tsc_dump_meta_t *mt = tsc_dump_meta(d);
    char ch[512];
    tsc_attn_map_choices(d, ch, sizeof ch);
    const char *path = tsc_dump_path(d);
    if (!tsc_dump_has_step(d, step))
        return tsc_error_set(TSC_ERR_MISSING, "%s has no step %lld (it has %s)", path, step, ch);
    if (layer < 0 || layer >= mt->n_layer || !tsc_dump_has_layer(d, step, layer))
        return tsc_error_set(TSC_ERR_MISSING, "%s: step %lld has no layer %d (the dump has %s)", path, step, layer, ch);
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

tsc_status_t tsc_attn_map_compute(tsc_dump_t *d, long long step, int layer, int head, int batch, const char *policy,
                                  double tie_eps, tsc_attn_map_t *m) {
    if (!d || !m) return tsc_error_set(TSC_ERR_ARG, "tsc_attn_map_compute: NULL argument");
    memset(m, 0, sizeof *m);
    tsc_status_t st = check_args(d, step, layer, head, batch);
    if (st != TSC_OK) return st;
    tsc_policy_t pol;
    if ((st = tsc_policy_parse(policy && *policy ? policy : "fp32", &pol)) != TSC_OK)
        return tsc_error_wrap(st, "attention map: policy: ");
    const tsc_dump_meta_t *mt = tsc_dump_meta(d);
    const int T = mt->seq_len, D = mt->head_dim;
    const size_t n = (size_t)T * (size_t)D, tt = (size_t)T * (size_t)T;
    if ((st = tsc_mem_check(tt * (2 * sizeof(double) + sizeof(float)) + 5 * n * sizeof(float),
                            "the attention map of one head")) != TSC_OK)
        return st;
    m->T = T, m->causal = mt->causal, m->head = head, m->batch = batch, m->layer = layer, m->step = step;
    m->kv_head = head / (mt->n_head / mt->n_kv_head);
    m->tie_eps = tie_eps > 0 ? tie_eps : TSC_ATTN_MAP_TIE_EPS;
    tsc_policy_format(&pol, m->policy, sizeof m->policy);
    float *qkv = calloc(5 * n + (size_t)T, sizeof(float));
    double *s = malloc(sizeof(double) * tt);
    m->p = malloc(sizeof(float) * tt);
    m->tie_eps_count = calloc((size_t)T, sizeof(int32_t)), m->tie_exact_count = calloc((size_t)T, sizeof(int32_t));
    m->col_mass = calloc((size_t)T, sizeof(double)), m->col_uniform = calloc((size_t)T, sizeof(double));
    m->is_sink = calloc((size_t)T, 1);
    if (!qkv || !s || !m->p || !m->tie_eps_count || !m->tie_exact_count || !m->col_mass || !m->col_uniform ||
        !m->is_sink) {
        st = tsc_error_set(TSC_ERR_NOMEM, "attention map: out of memory");
        goto out;
    }
    const char *path = tsc_dump_path(d);
    if ((st = replay_read_head(d, path, step, layer, "q", batch, head, 0, n, qkv)) != TSC_OK) goto out;
    if ((st = replay_read_head(d, path, step, layer, "k", batch, m->kv_head, 1, n, qkv + n)) != TSC_OK) goto out;
    /* v only feeds the forward's output, which is not used: zeros keep it finite */
    if ((st = scores(&pol, mt, qkv, s)) != TSC_OK) goto out;
    probabilities(m, s);
out:
    free(qkv);
    free(s);
    return st;
}
