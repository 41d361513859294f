/* kernels.c: the per-kernel bias table (tsc_kernels.h): one dump's inputs under every preset against FP64. */
#include "tsc_kernels.h"
#include "tsc_attention.h"
#include "tsc_census.h"
#include "tsc_dump.h"
#include "tsc_stats.h"
#include "replay_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WIN_ROWS = 64 };

void tsc_kernels_opts_init(tsc_kernels_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->with_stable = 1;
    tsc_select_init(&o->sel);
}

/* One policy variant being measured: the policy and its running sums. */
typedef struct {
    tsc_policy_t pol;
    int ok;
    tsc_moments_t o, delta;
    tsc_kernels_feature_t worst;
    int64_t tied, pbar_one, events;
} variant_t;

/* The trace window's consumer: ties and census events of each completed row. */
typedef struct {
    const float *v;  /* [T, D] the head's V (in the policy's V format: the census reads P̄V's operands) */
    int T, D, causal, block_k;
    tsc_format_t pv_fmt;
    variant_t *var;
} tie_ctx_t;

static void tie_rows(void *ctx, const tsc_attn_trace_t *tr, int t0, int nr) {
    tie_ctx_t *c = ctx;
    for (int t = t0; t < t0 + nr; t++) {
        const size_t slot = (size_t)(t % tr->rows);
        const double *s = tr->s + slot * (size_t)c->T, *a = tr->pbar + slot * (size_t)c->T;
        const int nv = c->causal ? t + 1 : c->T;
        double mx = -INFINITY;
        for (int j = 0; j < nv; j++) mx = s[j] > mx ? s[j] : mx;
        int ties = 0;
        for (int j = 0; j < nv; j++) ties += s[j] == mx;
        if (ties < 2) continue;
        c->var->tied++;
        int ones = 0;
        for (int j = 0; j < nv; j++) ones += s[j] == mx && a[j] == 1.0;
        if (ones < 2) continue;
        c->var->pbar_one++;
        tsc_census_t cen = {0};
        tsc_census_row(a, c->v, nv, c->D, c->block_k, c->pv_fmt, 0, NULL, &cen);
        c->var->events += cen.events_neg + cen.events_pos > 0;
    }
}

typedef struct {
    const tsc_kernels_opts_t *o;
    tsc_kernels_t *k;
    tsc_dump_t *d;
    replay_sel_t rs;
    int n_var;
    variant_t *var;      /* [n_var]: row i plain at 2i, +stable at 2i + 1 */
    /* one head's buffers */
    tsc_moments_t *feat; /* [D] */
    long long step;
    int layer, head;
    float *q, *kk, *v, *dout;      /* as read */
    float *qr, *kr, *vr, *dr;      /* in the variant's input formats */
    float *o32, *lse32, *dl32;
    double *lse64, *ref_o, *ref_dl;     /* FP64 on the inputs as read */
    double *vref_o, *vref_dl;           /* FP64 on a variant's rounded inputs, when they differ */
} run_t;

/* Rounds x[0..n) into fmt (out); 1 when some value changed. */
static int in_format(const float *x, float *out, size_t n, tsc_format_t fmt) {
    int changed = 0;
    for (size_t i = 0; i < n; i++) {
        out[i] = tsc_round_f32(x[i], fmt, TSC_ROUND_NEAREST_EVEN, NULL);
        changed |= memcmp(&out[i], &x[i], sizeof(float)) != 0;
    }
    return changed;
}

/* The FP64 replay of inputs q, k, v, dO into o, delta. */
static tsc_status_t fp64_replay(run_t *R, const float *q, const float *k, const float *v, const float *dout, double *o,
                                double *delta) {
    const tsc_dump_meta_t *m = tsc_dump_meta(R->d);
    tsc_policy_t p;
    TSC_INVARIANT(tsc_policy_preset(TSC_PRESET_FP64, &p) == TSC_OK);
    tsc_attn_dims_t dims = {1, 1, 1, R->k->T, R->k->D, m->causal, m->softmax_scale};
    tsc_attn_io_t io = {TSC_ATTN_F64, q, k, v, R->k->has_do ? dout : NULL, o, R->lse64,
                        R->k->has_do ? delta : NULL, NULL, NULL, NULL};
    return replay_attn(&p, &dims, &io);
}

/* Runs one variant on the loaded head and adds its rows to the sums. */
static tsc_status_t run_variant(run_t *R, variant_t *var) {
    const tsc_kernels_t *k = R->k;
    const int T = k->T, D = k->D;
    const size_t TD = (size_t)T * D;
    const tsc_dump_meta_t *m = tsc_dump_meta(R->d);
    tsc_attn_dims_t dims = {1, 1, 1, T, D, m->causal, m->softmax_scale};
    /* the kernel's inputs (it rounds on entry as well); an input format narrower than the dump's (FP8) gets its
     * own FP64 reference on the rounded values, so the table measures the kernel's arithmetic, not quantisation */
    const tsc_format_t *f = var->pol.fmt;
    int changed = in_format(R->q, R->qr, TD, f[TSC_STAGE_Q]) | in_format(R->kk, R->kr, TD, f[TSC_STAGE_K]) |
                  in_format(R->v, R->vr, TD, f[TSC_STAGE_V]);
    if (k->has_do) changed |= in_format(R->dout, R->dr, TD, f[TSC_STAGE_DO]);
    const double *ref_o = R->ref_o, *ref_dl = R->ref_dl;
    if (changed) {
        tsc_status_t rs = fp64_replay(R, R->qr, R->kr, R->vr, R->dr, R->vref_o, R->vref_dl);
        if (rs != TSC_OK) return rs;
        ref_o = R->vref_o, ref_dl = R->vref_dl;
    }
    tsc_attn_io_t io = {TSC_ATTN_F32, R->qr, R->kr, R->vr, k->has_do ? R->dr : NULL, R->o32, R->lse32,
                        k->has_do ? R->dl32 : NULL, NULL, NULL, NULL};
    tie_ctx_t tc = {R->vr, T, D, m->causal, var->pol.block_k < T ? var->pol.block_k : T,
                    var->pol.fmt[TSC_STAGE_PV], var};
    tsc_attn_trace_t tr;
    tsc_status_t st = tsc_attn_trace_init_rows(&tr, T, D, var->pol.block_k, TSC_TRACE_SCORES, WIN_ROWS, tie_rows, &tc);
    if (st != TSC_OK) return st;
    tr.b = tr.h = 0;
    tsc_attn_opts_t opts = {.mode = TSC_ATTN_EXACT, .traces = &tr, .n_traces = 1};
    st = tsc_attn_run_with(NULL, &var->pol, &dims, &io, &opts);
    tsc_attn_trace_free(&tr);
    if (st != TSC_OK) return st;
    const tsc_format_t of = var->pol.fmt[TSC_STAGE_O];
    for (int d = 0; d < D; d++) tsc_moments_init(&R->feat[d]);
    for (int t = 0; t < T; t++) {
        const double *ref = ref_o + (size_t)t * D;
        const float *o = R->o32 + (size_t)t * D;
        double big = 0, sum = 0;
        int n = 0;
        for (int d = 0; d < D; d++) big = fabs(ref[d]) > big ? fabs(ref[d]) : big;
        for (int d = 0; d < D; d++)
            if (fabs(ref[d]) >= ldexp(big, -10) && ref[d] != 0) {
                /* against the reference rounded to O's format: what the kernel adds to its own output rounding */
                const double e = ((double)o[d] - tsc_round(ref[d], of, TSC_ROUND_NEAREST_EVEN, NULL)) /
                                 tsc_stats_ulp(ref[d], of);
                sum += e;
                n++;
                tsc_moments_add(&R->feat[d], e);
            }
        if (n) tsc_moments_add(&var->o, sum / n);
        if (k->has_do) {
            double mag = 0;
            const float *g = R->dout + (size_t)t * D;
            for (int d = 0; d < D; d++) mag += fabs((double)g[d] * ref[d]);
            if (mag > 0) tsc_moments_add(&var->delta, ((double)R->dl32[t] - ref_dl[t]) / tsc_stats_ulp(mag, of));
        }
    }
    for (int d = 0; d < D; d++) {
        const tsc_moments_t *f = &R->feat[d];
        if (f->n < 8) continue;
        const double t = tsc_moments_tstat(f);
        if (isnan(t) || (var->worst.feature >= 0 && !(fabs(t) > fabs(var->worst.bias.t)))) continue;
        var->worst = (tsc_kernels_feature_t){R->layer, R->head, d, R->step, {f->n, f->mean, t}};
    }
    return TSC_OK;
}

static tsc_status_t run_head(run_t *R, long long s, int L, int b, int h) {
    const tsc_kernels_t *k = R->k;
    const size_t TD = (size_t)k->T * k->D;
    const int g = h / (tsc_dump_meta(R->d)->n_head / tsc_dump_meta(R->d)->n_kv_head);
    const char *path = k->dump_path;
    R->step = s, R->layer = L, R->head = h;
    tsc_status_t st = replay_read_head(R->d, path, s, L, "q", b, h, 0, TD, R->q);
    if (st == TSC_OK) st = replay_read_head(R->d, path, s, L, "k", b, g, 1, TD, R->kk);
    if (st == TSC_OK) st = replay_read_head(R->d, path, s, L, "v", b, g, 1, TD, R->v);
    if (st == TSC_OK && k->has_do) st = replay_read_head(R->d, path, s, L, "do", b, h, 0, TD, R->dout);
    if (st == TSC_OK) st = fp64_replay(R, R->q, R->kk, R->v, R->dout, R->ref_o, R->ref_dl);
    for (int i = 0; i < R->n_var && st == TSC_OK; i++)
        if (R->var[i].ok) {
            st = run_variant(R, &R->var[i]);
            if (st != TSC_OK)
                st = tsc_error_wrap(st, "step %lld layer %d head %d, policy %s: ", s, L, h, k->rows[i / 2].name);
        }
    return st;
}

static void finish_bias(const tsc_moments_t *m, tsc_kernels_bias_t *b) {
    b->n = m->n;
    b->mean = m->n ? m->mean : NAN;
    b->t = m->n >= 2 ? tsc_moments_tstat(m) : NAN;
}

static void finish_stats(const variant_t *v, tsc_kernels_stats_t *s) {
    finish_bias(&v->o, &s->o);
    finish_bias(&v->delta, &s->delta);
    s->worst = v->worst;
    s->tied_rows = v->tied;
    s->pbar_one_rows = v->pbar_one;
    s->event_rows = v->events;
    s->event_share = v->tied ? (double)v->events / (double)v->tied : NAN;
}

/* The rows and their variants: each policy, and with_stable its +stable form where the policy accepts it. */
static tsc_status_t plan_rows(run_t *R) {
    const tsc_kernels_opts_t *o = R->o;
    tsc_kernels_t *k = R->k;
    const int n = o->policies && o->n_policies > 0 ? o->n_policies : TSC_PRESET_COUNT - 1;
    k->rows = calloc((size_t)n, sizeof *k->rows);
    R->var = calloc((size_t)n * 2, sizeof *R->var);
    if (!k->rows || !R->var) return tsc_error_set(TSC_ERR_NOMEM, "kernels: out of memory");
    k->n_rows = n;
    R->n_var = 2 * n;
    for (int i = 0; i < n; i++) {
        tsc_kernels_row_t *row = &k->rows[i];
        variant_t *plain = &R->var[2 * i], *stab = &R->var[2 * i + 1];
        const char *name = o->policies && o->n_policies > 0 ? o->policies[i] : tsc_preset_name((tsc_preset_t)(i + 1));
        snprintf(row->name, sizeof row->name, "%s", name);
        if (tsc_policy_parse(name, &plain->pol) != TSC_OK) return TSC_ERR_ARG;
        if (tsc_policy_uses_fp64(&plain->pol))
            return tsc_error_set(TSC_ERR_ARG, "kernels: policy %s computes in FP64: it is the reference, not a kernel",
                                 name);
        if (plain->pol.softmax == TSC_SOFTMAX_MATERIALIZED && k->T > plain->pol.block_k)
            return tsc_error_set(TSC_ERR_ARG, "kernels: policy %s (a materialized softmax) needs every key of a row in "
                                 "one tile (%d), and the dump's rows have %d keys", name, plain->pol.block_k, k->T);
        tsc_preset_t pr;
        if (tsc_preset_parse(name, &pr) == TSC_OK) snprintf(row->desc, sizeof row->desc, "%s", tsc_preset_describe(pr));
        tsc_error_clear();
        snprintf(row->o_format, sizeof row->o_format, "%s", tsc_format_name(plain->pol.fmt[TSC_STAGE_O]));
        plain->ok = 1;
        if (o->with_stable) {
            char sname[TSC_POLICY_STR_MAX + 32];
            snprintf(sname, sizeof sname, "%s+stable:beta=2,eps=1e-3", name);
            if (tsc_policy_parse(sname, &stab->pol) == TSC_OK) {
                stab->ok = row->stable_ok = 1;
            } else {
                /* the first clause of the parser's reason ("policy 'X': policy: REASON; valid presets ...") */
                const char *e = tsc_error_last(), *r = strstr(e, "policy: ");
                r = r ? r + 8 : e;
                const char *end = strstr(r, "; valid presets");
                snprintf(row->stable_why, sizeof row->stable_why, "%.*s", end ? (int)(end - r) : (int)strlen(r), r);
                tsc_error_clear();
            }
        }
        plain->worst.feature = stab->worst.feature = -1;
        tsc_moments_init(&plain->o), tsc_moments_init(&plain->delta);
        tsc_moments_init(&stab->o), tsc_moments_init(&stab->delta);
    }
    return TSC_OK;
}

static tsc_status_t alloc_head(run_t *R) {
    const size_t TD = (size_t)R->k->T * R->k->D, T = (size_t)R->k->T;
    R->q = malloc(sizeof(float) * (9 * TD + 2 * T));
    R->ref_o = malloc(sizeof(double) * (2 * TD + 3 * T));
    R->feat = malloc(sizeof(tsc_moments_t) * (size_t)R->k->D);
    if (!R->q || !R->ref_o || !R->feat) return tsc_error_set(TSC_ERR_NOMEM, "kernels: out of memory for a head of T = %zu", T);
    R->kk = R->q + TD, R->v = R->kk + TD, R->dout = R->v + TD;
    R->qr = R->dout + TD, R->kr = R->qr + TD, R->vr = R->kr + TD, R->dr = R->vr + TD, R->o32 = R->dr + TD;
    R->lse32 = R->o32 + TD, R->dl32 = R->lse32 + T;
    R->lse64 = R->ref_o + TD, R->ref_dl = R->lse64 + T, R->vref_o = R->ref_dl + T, R->vref_dl = R->vref_o + TD;
    return TSC_OK;
}

static tsc_status_t kernels_run(run_t *R) {
    const tsc_kernels_opts_t *o = R->o;
    tsc_kernels_t *k = R->k;
    tsc_status_t st = tsc_dump_open(&R->d, o->dump_path);
    if (st != TSC_OK) return st;
    const tsc_dump_meta_t *m = tsc_dump_meta(R->d);
    k->T = m->seq_len, k->D = m->head_dim, k->causal = m->causal;
    st = replay_sel_resolve(R->d, k->dump_path, &o->sel, !o->all_steps, "kernels", "replay", &R->rs);
    if (st != TSC_OK) return st;
    k->n_steps = R->rs.n_steps, k->n_heads = R->rs.n_heads, k->n_batches = R->rs.n_batches;
    k->first_step = R->rs.n_steps ? R->rs.steps[0] : -1;
    if ((st = plan_rows(R)) != TSC_OK || (st = alloc_head(R)) != TSC_OK) return st;
    /* the pairs: every selected layer of every selected step holding q, k and v; do decides δ for all */
    int n_l = 0, has_do = 1;
    long long work = 0;
    for (int si = 0; si < R->rs.n_steps && st == TSC_OK; si++) {
        if ((st = replay_step_layers(R->d, &o->sel, R->rs.steps[si], &R->rs, &n_l)) != TSC_OK) break;
        for (int li = 0; li < n_l; li++) {
            static const char *need[3] = {"q", "k", "v"};
            for (int n = 0; n < 3; n++)
                if (!tsc_dump_has_dataset(R->d, R->rs.steps[si], R->rs.layers[li], need[n]))
                    return tsc_error_set(TSC_ERR_MISSING, "%s: step %lld layer %d has no dataset '%s' (the kernels "
                                         "table replays q, k and v)", k->dump_path, R->rs.steps[si],
                                         R->rs.layers[li], need[n]);
            has_do &= tsc_dump_has_dataset(R->d, R->rs.steps[si], R->rs.layers[li], "do");
            k->n_pairs++;
        }
    }
    if (st != TSC_OK) return tsc_error_wrap(st, "%s: ", k->dump_path);
    if (k->n_pairs == 0) return tsc_error_set(TSC_ERR_MISSING, "%s: the selection %s picks no layer", k->dump_path, k->selection);
    k->has_do = has_do;
    work = (long long)k->n_pairs * k->n_batches * k->n_heads;
    tsc_progress_begin(o->progress, "kernels", work);
    long long done = 0;
    for (int si = 0; si < R->rs.n_steps && st == TSC_OK; si++) {
        if ((st = replay_step_layers(R->d, &o->sel, R->rs.steps[si], &R->rs, &n_l)) != TSC_OK) break;
        for (int li = 0; li < n_l && st == TSC_OK; li++)
            for (int bi = 0; bi < k->n_batches && st == TSC_OK; bi++)
                for (int hi = 0; hi < k->n_heads && st == TSC_OK; hi++) {
                    st = run_head(R, R->rs.steps[si], R->rs.layers[li], R->rs.batches[bi], R->rs.heads[hi]);
                    tsc_progress_tick(o->progress, ++done);
                }
    }
    if (st != TSC_OK) return tsc_error_wrap(st, "%s: ", k->dump_path);
    for (int i = 0; i < k->n_rows; i++) {
        finish_stats(&R->var[2 * i], &k->rows[i].plain);
        if (k->rows[i].stable_ok) finish_stats(&R->var[2 * i + 1], &k->rows[i].stable);
    }
    return TSC_OK;
}

tsc_status_t tsc_kernels_run(const tsc_kernels_opts_t *o, tsc_kernels_t **out) {
    *out = NULL;
    if (!o || !o->dump_path || !*o->dump_path) return tsc_error_set(TSC_ERR_ARG, "kernels: no dump given");
    tsc_kernels_t *k = calloc(1, sizeof *k);
    run_t R = {.o = o, .k = k};
    if (!k || !(k->dump_path = strdup(o->label ? o->label : o->dump_path))) {
        free(k);
        return tsc_error_set(TSC_ERR_NOMEM, "kernels: out of memory");
    }
    tsc_select_format(&o->sel, k->selection, sizeof k->selection);
    tsc_status_t st = kernels_run(&R);
    if (R.d) tsc_dump_close(R.d);
    free(R.rs.steps), free(R.rs.heads), free(R.rs.batches), free(R.rs.layers);
    free(R.var), free(R.q), free(R.ref_o), free(R.feat);
    if (st != TSC_OK) {
        tsc_kernels_free(k);
        return st;
    }
    *out = k;
    return TSC_OK;
}

static void json_bias(tsc_json_t *j, const char *key, const tsc_kernels_bias_t *b) {
    tsc_json_key(j, key);
    tsc_json_object_begin(j);
    tsc_json_kv_int(j, "n", b->n);
    tsc_json_kv_number(j, "mean_ulp", b->mean);
    tsc_json_kv_number(j, "t", b->t);
    tsc_json_object_end(j);
}

static void json_stats(tsc_json_t *j, const tsc_kernels_stats_t *s, int has_do) {
    json_bias(j, "o_bias", &s->o);
    if (has_do) json_bias(j, "delta_bias", &s->delta);
    tsc_json_key(j, "worst_feature");
    if (s->worst.feature < 0) {
        tsc_json_null(j);
    } else {
        tsc_json_object_begin(j);
        tsc_json_kv_int(j, "step", s->worst.step);
        tsc_json_kv_int(j, "layer", s->worst.layer);
        tsc_json_kv_int(j, "head", s->worst.head);
        tsc_json_kv_int(j, "feature", s->worst.feature);
        tsc_json_kv_int(j, "n", s->worst.bias.n);
        tsc_json_kv_number(j, "mean_ulp", s->worst.bias.mean);
        tsc_json_kv_number(j, "t", s->worst.bias.t);
        tsc_json_object_end(j);
    }
    tsc_json_kv_int(j, "tied_rows", s->tied_rows);
    tsc_json_kv_int(j, "pbar_one_rows", s->pbar_one_rows);
    tsc_json_kv_int(j, "event_rows", s->event_rows);
    tsc_json_kv_number(j, "event_share", s->event_share);
}

void tsc_kernels_json(const tsc_kernels_t *k, tsc_json_t *j) {
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "dump", k->dump_path);
    tsc_json_kv_string(j, "selection", k->selection);
    tsc_json_kv_int(j, "first_step", k->first_step);
    tsc_json_kv_int(j, "steps", k->n_steps);
    tsc_json_kv_int(j, "pairs", k->n_pairs);
    tsc_json_kv_int(j, "heads", k->n_heads);
    tsc_json_kv_int(j, "batch_rows", k->n_batches);
    tsc_json_kv_int(j, "seq_len", k->T);
    tsc_json_kv_int(j, "head_dim", k->D);
    tsc_json_kv_bool(j, "causal", k->causal);
    tsc_json_kv_bool(j, "has_do", k->has_do);
    tsc_json_key(j, "kernels");
    tsc_json_array_begin(j);
    for (int i = 0; i < k->n_rows; i++) {
        const tsc_kernels_row_t *r = &k->rows[i];
        tsc_json_object_begin(j);
        tsc_json_kv_string(j, "policy", r->name);
        tsc_json_kv_string(j, "models", r->desc);
        tsc_json_kv_string(j, "o_format", r->o_format);
        json_stats(j, &r->plain, k->has_do);
        tsc_json_key(j, "stable");
        if (r->stable_ok) {
            tsc_json_object_begin(j);
            json_stats(j, &r->stable, k->has_do);
            tsc_json_object_end(j);
        } else if (r->stable_why[0]) {
            tsc_json_object_begin(j);
            tsc_json_kv_string(j, "refused", r->stable_why);
            tsc_json_object_end(j);
        } else {
            tsc_json_null(j);
        }
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
    tsc_json_object_end(j);
}

void tsc_kernels_free(tsc_kernels_t *k) {
    if (!k) return;
    free(k->dump_path);
    free(k->rows);
    free(k);
}
