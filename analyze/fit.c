/* fit.c: the fit check (tsc_fit.h): captured steps replayed under each policy, the replayed O (and
 * dQ, dK, dV) compared with the captured tensors in ULPs of their stored format, policies ranked. */
#include "tsc_fit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fit_internal.h"
#include "replay_internal.h"
#include "tsc_dump.h"
#include "tsc_mem.h"
#include "tsc_stats.h"

static const char *const tensor_name[TSC_FIT_NT] = {"o", "dq", "dk", "dv"};

typedef struct {
    tsc_fit_policy_t pub;
    tsc_policy_t pol;
    int order;   /* position as given (the last ranking key) */
    int recorded;/* equal to the policy the dump records (wins ties) */
    int f64;     /* the policy computes in double */
} fit_pol_t;

/* The state of one run. */
typedef struct {
    tsc_fit_t *f;
    const tsc_fit_opts_t *o;
    tsc_dump_t *d;
    fit_pol_t *pols;
    tsc_policy_t run_pol; /* the dump's recorded policy, tiles applied as to the others */
    int run_pol_ok;
    int *heads, *batches, *layers;
    int T, D, G;
    size_t TD;
    float *in;    /* q [G·TD], k [TD], v [TD], do [G·TD] */
    float *cap;   /* captured o [G·TD], dq [G·TD], dk [TD], dv [TD] */
    char *out;    /* o, dq [G·TD], dk, dv [TD], lse, delta [G·T]: doubles */
} fit_run_t;

/* ------------------------------------------------------------------ one element, one tensor */

void fit_cmp_add(tsc_fit_cmp_t *c, tsc_format_t fmt, const float *cap, const void *x, int f64, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double xv = f64 ? ((const double *)x)[i] : ((const float *)x)[i], cv = cap[i];
        xv = tsc_round(xv, fmt, TSC_ROUND_NEAREST_EVEN, NULL);
        c->n++;
        if ((isnan(xv) && isnan(cv)) || (xv == cv && signbit(xv) == signbit(cv))) {
            c->n_identical++;
            c->n_within1++;
            if (isfinite(xv) && isnan(c->max_ulp)) c->max_ulp = 0;
            continue;
        }
        if (!isfinite(xv) || !isfinite(cv)) {
            c->n_nonfinite++;
            continue;
        }
        const double ax = fabs(xv), ac = fabs(cv);
        const double u = fabs(xv - cv) / tsc_stats_ulp(ax > ac ? ax : ac, fmt);
        if (u <= 1) c->n_within1++;
        if (isnan(c->max_ulp) || u > c->max_ulp) c->max_ulp = u;
    }
}

void fit_cmp_finish(tsc_fit_cmp_t *c) {
    c->identical = c->n ? (double)c->n_identical / (double)c->n : NAN;
    c->within1 = c->n ? (double)c->n_within1 / (double)c->n : NAN;
}

void fit_cmp_init(tsc_fit_cmp_t *c) {
    memset(c, 0, sizeof *c);
    c->max_ulp = NAN;
}

void fit_cmp_merge(tsc_fit_cmp_t *dst, const tsc_fit_cmp_t *src) {
    dst->n += src->n;
    dst->n_identical += src->n_identical;
    dst->n_within1 += src->n_within1;
    dst->n_nonfinite += src->n_nonfinite;
    if (!isnan(src->max_ulp) && (isnan(dst->max_ulp) || src->max_ulp > dst->max_ulp)) dst->max_ulp = src->max_ulp;
}

/* ------------------------------------------------------------------ plan */

void tsc_fit_opts_init(tsc_fit_opts_t *o) {
    memset(o, 0, sizeof *o);
    tsc_select_init(&o->sel);
}

void tsc_fit_free(tsc_fit_t *f) {
    if (!f) return;
    free(f->dump_path);
    free(f->steps);
    free(f->policies);
    free(f);
}

static void free_run(fit_run_t *R) {
    tsc_dump_close(R->d);
    free(R->pols);
    free(R->heads);
    free(R->batches);
    free(R->layers);
    free(R->in);
    free(R->cap);
    free(R->out);
}

/* Parses s into *pol, applying the dump's tiles unless s names its own (or keep_tiles). */
static tsc_status_t parse_tiled(fit_run_t *R, const char *s, tsc_policy_t *pol) {
    const tsc_dump_meta_t *m = tsc_dump_meta(R->d);
    if (tsc_policy_parse(s, pol) != TSC_OK) return tsc_error_wrap(TSC_ERR_ARG, "fit: policy '%s': ", s);
    /* a materialized softmax models an untiled kernel: the run's tiles are not its */
    if (!R->o->keep_tiles && !strstr(s, "+tile:") && pol->softmax == TSC_SOFTMAX_ONLINE && m->tile_q >= 1 && m->tile_q <= 65536 && m->tile_k >= 1 &&
        m->tile_k <= 65536) {
        pol->block_q = R->f->tile_q = m->tile_q;
        pol->block_k = R->f->tile_k = m->tile_k;
    }
    return TSC_OK;
}

/* Parses one policy string into slot k. */
static tsc_status_t add_policy(fit_run_t *R, int k, const char *s) {
    fit_pol_t *p = &R->pols[k];
    tsc_status_t st = parse_tiled(R, s, &p->pol);
    if (st != TSC_OK) return st;
    p->recorded = R->run_pol_ok && tsc_policy_equal(&p->pol, &R->run_pol);
    snprintf(p->pub.name, sizeof p->pub.name, "%s", s);
    TSC_INVARIANT(tsc_policy_format(&p->pol, p->pub.canonical, sizeof p->pub.canonical) == TSC_OK); /* parsed, tiles
                                                                                                     * in range */
    p->order = k;
    p->f64 = tsc_policy_uses_fp64(&p->pol);
    for (int t = 0; t < TSC_FIT_NT; t++) p->pub.t[t].max_ulp = NAN;
    return TSC_OK;
}

/* The policies as given, or every preset and then the run's own policy when it is none of them. */
static tsc_status_t plan_policies(fit_run_t *R) {
    const tsc_fit_opts_t *o = R->o;
    const int n = o->policies && o->n_policies > 0 ? o->n_policies : TSC_PRESET_COUNT + 1;
    const int tq = R->f->tile_q, tk = R->f->tile_k;
    R->run_pol_ok = parse_tiled(R, R->f->run_policy, &R->run_pol) == TSC_OK;  /* free text: may not parse */
    if (!R->run_pol_ok) tsc_error_clear();
    R->f->tile_q = tq, R->f->tile_k = tk;  /* tiles count as applied once a checked policy gets them */
    if (!(R->pols = calloc((size_t)n, sizeof *R->pols))) return tsc_error_set(TSC_ERR_NOMEM, "fit: out of memory");
    tsc_fit_t *f = R->f;
    if (o->policies && o->n_policies > 0) {
        for (int k = 0; k < n; k++) {
            tsc_status_t st = add_policy(R, k, o->policies[k]);
            if (st != TSC_OK) return st;
        }
        f->n_policies = n;
        return TSC_OK;
    }
    for (int i = 0; i < TSC_PRESET_COUNT; i++) {
        tsc_status_t st = add_policy(R, f->n_policies++, tsc_preset_name((tsc_preset_t)i));
        if (st != TSC_OK) return st;
    }
    if (add_policy(R, f->n_policies, f->run_policy) != TSC_OK) {
        tsc_error_clear();  /* the recorded policy is free text: one that does not parse is skipped */
        return TSC_OK;
    }
    int known = 0;
    for (int k = 0; k < f->n_policies; k++) known |= tsc_policy_equal(&R->pols[k].pol, &R->pols[f->n_policies].pol);
    if (!known) f->n_policies++;
    return TSC_OK;
}

/* Selected heads, batch rows and steps (the first one unless all_steps). */
static tsc_status_t plan_selection(fit_run_t *R) {
    tsc_fit_t *f = R->f;
    replay_sel_t rs = {0};
    tsc_status_t st = replay_sel_resolve(R->d, f->dump_path, &R->o->sel, !R->o->all_steps, "fit", "compare", &rs);
    f->steps = rs.steps, f->n_steps = rs.n_steps;
    R->heads = rs.heads, f->n_heads = rs.n_heads;
    R->batches = rs.batches, f->n_batches = rs.n_batches;
    R->layers = rs.layers;
    return st;
}

/* The selected layers of step s into R->layers. */
static tsc_status_t step_layers(fit_run_t *R, long long s, int *n) {
    replay_sel_t rs = {.layers = R->layers};
    return replay_step_layers(R->d, &R->o->sel, s, &rs, n);
}

/* 1 when the pair holds captured tensor t (gradients also need do); its format into *fmt. */
static int has_tensor(fit_run_t *R, long long s, int L, int t, tsc_format_t *fmt) {
    tsc_dump_dataset_info_t info;
    if (!tsc_dump_has_dataset(R->d, s, L, tensor_name[t])) return 0;
    if (tsc_dump_dataset_info(R->d, s, L, tensor_name[t], &info) != TSC_OK ||
        (t != TSC_FIT_O && !tsc_dump_has_dataset(R->d, s, L, "do"))) {
        tsc_error_clear();
        return 0;
    }
    *fmt = info.dtype;
    return 1;
}

/* Every (step, layer) checked before any work: q, k, v and o present and usable. */
static tsc_status_t plan_pairs(fit_run_t *R) {
    static const char *need[4] = {"q", "k", "v", "o"};
    tsc_fit_t *f = R->f;
    for (int si = 0; si < f->n_steps; si++) {
        int n_l = 0;
        tsc_status_t st = step_layers(R, f->steps[si], &n_l);
        if (st != TSC_OK) return tsc_error_wrap(st, "%s: ", f->dump_path);
        for (int li = 0; li < n_l; li++) {
            const int L = R->layers[li];
            for (int k = 0; k < 4; k++) {
                tsc_dump_dataset_info_t info;
                if (k == 3 && !tsc_dump_has_dataset(R->d, f->steps[si], L, "o"))
                    return tsc_error_set(TSC_ERR_MISSING, "%s: step %lld layer %d: no dataset 'o' (the captured O "
                                         "the fit compares with)", f->dump_path, f->steps[si], L);
                if (tsc_dump_dataset_info(R->d, f->steps[si], L, need[k], &info) != TSC_OK)
                    return tsc_error_set(TSC_ERR_MISSING, "%s: step %lld layer %d: dataset '%s' is missing or "
                                         "unusable (%s)", f->dump_path, f->steps[si], L, need[k], tsc_error_last());
            }
            f->n_pairs++;
        }
    }
    if (f->n_pairs == 0) {
        char why[1024];
        return tsc_error_set(TSC_ERR_MISSING, "%s: the selection %s", f->dump_path,
                             tsc_select_miss_text(&R->o->sel, R->d, why, sizeof why));
    }
    return TSC_OK;
}

/* ------------------------------------------------------------------ run */

typedef struct {
    long long s;
    int L, b, g;
    int has[TSC_FIT_NT];
    tsc_format_t fmt[TSC_FIT_NT];
} unit_t;

/* Reads the inputs and the captured tensors of the selected heads hs[0..nh) of kv group g. */
static tsc_status_t load_group(fit_run_t *R, const unit_t *u, const int *hs, int nh, int bwd) {
    const char *path = R->f->dump_path;
    const size_t TD = R->TD, GTD = (size_t)R->G * TD;
    float *q = R->in, *k = q + GTD, *v = k + TD, *dout = v + TD;
    float *co = R->cap, *cdq = co + GTD, *cdk = cdq + GTD, *cdv = cdk + TD;
    tsc_status_t st = replay_read_head(R->d, path, u->s, u->L, "k", u->b, u->g, 1, TD, k);
    if (st == TSC_OK) st = replay_read_head(R->d, path, u->s, u->L, "v", u->b, u->g, 1, TD, v);
    for (int i = 0; i < nh && st == TSC_OK; i++) {
        st = replay_read_head(R->d, path, u->s, u->L, "q", u->b, hs[i], 0, TD, q + i * TD);
        if (st == TSC_OK && bwd) st = replay_read_head(R->d, path, u->s, u->L, "do", u->b, hs[i], 0, TD, dout + i * TD);
        if (st == TSC_OK) st = tsc_dump_read(R->d, u->s, u->L, "o", u->b, hs[i], co + i * TD);
        if (st == TSC_OK && u->has[TSC_FIT_DQ]) st = tsc_dump_read(R->d, u->s, u->L, "dq", u->b, hs[i], cdq + i * TD);
    }
    if (st == TSC_OK && nh == R->G && u->has[TSC_FIT_DK]) st = tsc_dump_read(R->d, u->s, u->L, "dk", u->b, u->g, cdk);
    if (st == TSC_OK && nh == R->G && u->has[TSC_FIT_DV]) st = tsc_dump_read(R->d, u->s, u->L, "dv", u->b, u->g, cdv);
    return st == TSC_OK ? st : tsc_error_wrap(st, "%s: ", path);
}

/* Replays the loaded group under policy p and adds the comparisons. */
static tsc_status_t run_group(fit_run_t *R, const unit_t *u, int nh, int bwd_all, fit_pol_t *p) {
    /* a policy whose backward is not modelled (FlexAttention's PRESCALE_QK) is compared on O only */
    const int bwd = bwd_all && p->pol.exp != TSC_EXP_EXP2_PRESCALED;
    const tsc_dump_meta_t *m = tsc_dump_meta(R->d);
    const size_t TD = R->TD, GTD = (size_t)R->G * TD, es = p->f64 ? sizeof(double) : sizeof(float);
    const int whole = nh == R->G;
    char *o = R->out, *dq = o + GTD * es, *dk = dq + GTD * es, *dv = dk + TD * es, *lse = dv + TD * es;
    char *delta = lse + (size_t)R->G * R->T * es;
    const float *q = R->in, *k = q + GTD, *v = k + TD, *dout = v + TD;
    tsc_attn_dims_t dims = {1, nh, 1, R->T, R->D, m->causal, m->softmax_scale};
    tsc_attn_io_t io = {p->f64 ? TSC_ATTN_F64 : TSC_ATTN_F32, q, k, v, bwd ? dout : NULL, o, lse,
                        bwd ? delta : NULL, bwd && u->has[TSC_FIT_DQ] ? dq : NULL,
                        bwd && whole && u->has[TSC_FIT_DK] ? dk : NULL, bwd && whole && u->has[TSC_FIT_DV] ? dv : NULL};
    tsc_status_t st = replay_attn(&p->pol, &dims, &io);
    if (st != TSC_OK)
        return tsc_error_wrap(st, "%s: step %lld layer %d policy %s: ", R->f->dump_path, u->s, u->L, p->pub.name);
    const float *co = R->cap, *cdq = co + GTD, *cdk = cdq + GTD, *cdv = cdk + TD;
    fit_cmp_add(&p->pub.t[TSC_FIT_O], u->fmt[TSC_FIT_O], co, o, p->f64, (size_t)nh * TD);
    if (io.dq) fit_cmp_add(&p->pub.t[TSC_FIT_DQ], u->fmt[TSC_FIT_DQ], cdq, dq, p->f64, (size_t)nh * TD);
    if (io.dk) fit_cmp_add(&p->pub.t[TSC_FIT_DK], u->fmt[TSC_FIT_DK], cdk, dk, p->f64, TD);
    if (io.dv) fit_cmp_add(&p->pub.t[TSC_FIT_DV], u->fmt[TSC_FIT_DV], cdv, dv, p->f64, TD);
    return TSC_OK;
}

/* One (step, layer): every selected batch row and kv group, every policy. */
static tsc_status_t run_pair(fit_run_t *R, long long s, int L) {
    unit_t u = {.s = s, .L = L};
    tsc_fit_t *f = R->f;
    int bwd = 0;
    for (int t = 0; t < TSC_FIT_NT; t++) {
        u.has[t] = has_tensor(R, s, L, t, &u.fmt[t]);
        if (u.has[t] && !f->dtype[t][0]) snprintf(f->dtype[t], sizeof f->dtype[t], "%s", tsc_format_name(u.fmt[t]));
        bwd |= t != TSC_FIT_O && u.has[t];
    }
    int *hs = malloc(sizeof(int) * (size_t)R->G);
    if (!hs) return tsc_error_set(TSC_ERR_NOMEM, "fit: out of memory");
    tsc_status_t st = TSC_OK;
    for (int bi = 0; bi < f->n_batches && st == TSC_OK; bi++)
        for (int g = 0; g < tsc_dump_meta(R->d)->n_kv_head && st == TSC_OK; g++) {
            int nh = 0;
            for (int i = 0; i < f->n_heads; i++)
                if (R->heads[i] / R->G == g) hs[nh++] = R->heads[i];
            if (nh == 0) continue;
            u.b = R->batches[bi];
            u.g = g;
            st = load_group(R, &u, hs, nh, bwd);
            for (int p = 0; p < f->n_policies && st == TSC_OK; p++) st = run_group(R, &u, nh, bwd, &R->pols[p]);
        }
    free(hs);
    return st;
}

static int cmp_nan_last(double a, double b) {  /* ascending, NaN last */
    if (isnan(a) || isnan(b)) return isnan(a) - isnan(b);
    return (a > b) - (a < b);
}

static int by_fit(const void *x, const void *y) {
    const fit_pol_t *a = x, *b = y;
    const tsc_fit_cmp_t *ao = &a->pub.t[TSC_FIT_O], *bo = &b->pub.t[TSC_FIT_O];
    int c = cmp_nan_last(-a->pub.score, -b->pub.score);
    if (!c) c = cmp_nan_last(-ao->identical, -bo->identical);
    if (!c) c = cmp_nan_last(-ao->within1, -bo->within1);
    if (!c) c = cmp_nan_last(ao->max_ulp, bo->max_ulp);
    if (!c) c = b->recorded - a->recorded;
    return c ? c : (a->order > b->order) - (a->order < b->order);
}

/* Shares, scores, the ranking, and the ranked copy into f->policies. */
static tsc_status_t rank_policies(fit_run_t *R) {
    tsc_fit_t *f = R->f;
    for (int p = 0; p < f->n_policies; p++) {
        tsc_fit_policy_t *pub = &R->pols[p].pub;
        double sum = 0;
        int n = 0;
        for (int t = 0; t < TSC_FIT_NT; t++) {
            fit_cmp_finish(&pub->t[t]);
            if (pub->t[t].n) sum += pub->t[t].identical, n++;
        }
        pub->score = n ? sum / n : NAN;
    }
    qsort(R->pols, (size_t)f->n_policies, sizeof *R->pols, by_fit);
    if (!(f->policies = calloc((size_t)f->n_policies, sizeof *f->policies)))
        return tsc_error_set(TSC_ERR_NOMEM, "fit: out of memory");
    for (int p = 0; p < f->n_policies; p++) {
        f->policies[p] = R->pols[p].pub;
        f->policies[p].rank = p + 1;
    }
    return TSC_OK;
}

static tsc_status_t alloc_bufs(fit_run_t *R) {
    const tsc_dump_meta_t *m = tsc_dump_meta(R->d);
    R->T = m->seq_len;
    R->D = m->head_dim;
    R->G = m->n_head / m->n_kv_head;
    R->TD = (size_t)R->T * (size_t)R->D;
    const size_t GTD = (size_t)R->G * R->TD, nin = 2 * GTD + 2 * R->TD;
    const size_t bytes = nin * sizeof(float) * 2 + (nin + 2 * (size_t)R->G * R->T) * sizeof(double);
    tsc_status_t st = tsc_mem_check(bytes, "the fit's buffers (one kv-head group)");
    if (st != TSC_OK) return tsc_error_wrap(st, "fit %s: ", R->f->dump_path);
    R->in = malloc(nin * sizeof(float));
    R->cap = malloc(nin * sizeof(float));
    R->out = malloc((nin + 2 * (size_t)R->G * R->T) * sizeof(double));
    if (!R->in || !R->cap || !R->out) return tsc_error_set(TSC_ERR_NOMEM, "fit: out of memory for %s", R->f->dump_path);
    return TSC_OK;
}

static tsc_status_t run_all(fit_run_t *R) {
    tsc_status_t st = alloc_bufs(R);
    long long done = 0;
    tsc_progress_begin(R->o->progress, "(step, layer) pairs fitted", R->f->n_pairs);
    for (int si = 0; si < R->f->n_steps && st == TSC_OK; si++) {
        int n_l = 0;
        st = step_layers(R, R->f->steps[si], &n_l);
        for (int li = 0; li < n_l && st == TSC_OK; li++) {
            st = run_pair(R, R->f->steps[si], R->layers[li]);
            if (st == TSC_OK) tsc_progress_tick(R->o->progress, ++done); /* (step, layer) pairs compared */
        }
    }
    return st == TSC_OK ? rank_policies(R) : st;
}

tsc_status_t tsc_fit_run(const tsc_fit_opts_t *o, tsc_fit_t **out) {
    *out = NULL;
    if (!o || !o->dump_path || o->n_policies < 0 || (o->n_policies > 0 && !o->policies))
        return tsc_error_set(TSC_ERR_ARG, "fit: a dump path is required (and policies with n_policies > 0)");
    fit_run_t R;
    memset(&R, 0, sizeof R);
    R.o = o;
    tsc_fit_t *f = R.f = calloc(1, sizeof *f);
    if (!f || !(f->dump_path = strdup(o->dump_path))) {
        free(f);
        return tsc_error_set(TSC_ERR_NOMEM, "fit: out of memory");
    }
    tsc_select_format(&o->sel, f->selection, sizeof f->selection);
    tsc_status_t st = tsc_dump_open(&R.d, o->dump_path);
    if (st == TSC_OK) {
        snprintf(f->run_policy, sizeof f->run_policy, "%s", tsc_dump_meta(R.d)->policy);
        st = plan_policies(&R);
    }
    if (st == TSC_OK) st = plan_selection(&R);
    if (st == TSC_OK) st = plan_pairs(&R);
    if (st == TSC_OK) st = run_all(&R);
    free_run(&R);
    if (st != TSC_OK) {
        tsc_fit_free(f);
        return st;
    }
    *out = f;
    return TSC_OK;
}

int tsc_fit_find(const tsc_fit_t *f, const char *name) {
    for (int p = 0; f && name && p < f->n_policies; p++)
        if (!strcmp(f->policies[p].name, name) || !strcmp(f->policies[p].canonical, name)) return p;
    return -1;
}

/* ------------------------------------------------------------------ text and JSON */

const char *tsc_fit_percent(double share, char *buf, size_t size) {
    if (share == 1) snprintf(buf, size, "100%%");
    else if (isnan(share)) snprintf(buf, size, "-");
    else snprintf(buf, size, "%.2f%%", floor(share * 1e4 + 1e-7) / 100.0);
    return buf;
}

const char *tsc_fit_sentence(const char *policy, int checked, double o_identical, char *buf, size_t size) {
    char pc[32];
    if (!checked) snprintf(buf, size, "no captured O: the fit of the replay could not be checked");
    else
        snprintf(buf, size, "replay under %s reproduces the captured O on %s of elements", policy,
                 tsc_fit_percent(o_identical, pc, sizeof pc));
    return buf;
}

const char *tsc_fit_warning(double o_identical) {
    if (o_identical >= TSC_FIT_WARN_SHARE) return NULL;
    return "warning: below 99%: the replay does not reproduce this run, so the diagnosis may not describe this run";
}

#define FC_F(m) TSC_JSON_FIELD(tsc_fit_cmp_t, m, #m)
static const tsc_json_field_t cmp_fields[] = {FC_F(n), FC_F(identical), FC_F(within1), FC_F(max_ulp),
                                              FC_F(n_identical), FC_F(n_within1), FC_F(n_nonfinite)};

void tsc_fit_json(const tsc_fit_t *f, tsc_json_t *j) {
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "dump", f->dump_path);
    tsc_json_kv_string(j, "run_policy", f->run_policy);
    tsc_json_kv_string(j, "selection", f->selection);
    int64_t *st = malloc(sizeof(int64_t) * (size_t)(f->n_steps + 1));
    for (int i = 0; st && i < f->n_steps; i++) st[i] = f->steps[i];
    tsc_json_kv_ints(j, "steps", st, st ? (size_t)f->n_steps : 0);
    free(st);
    tsc_json_kv_int(j, "pairs", f->n_pairs);
    tsc_json_kv_int(j, "heads", f->n_heads);
    tsc_json_kv_int(j, "batches", f->n_batches);
    tsc_json_key(j, "tiles");
    if (f->tile_q) {
        tsc_json_object_begin(j);
        tsc_json_kv_int(j, "q", f->tile_q);
        tsc_json_kv_int(j, "k", f->tile_k);
        tsc_json_object_end(j);
    } else {
        tsc_json_null(j);
    }
    tsc_json_key(j, "dtype");
    tsc_json_object_begin(j);
    for (int t = 0; t < TSC_FIT_NT; t++)
        if (f->dtype[t][0]) tsc_json_kv_string(j, tensor_name[t], f->dtype[t]);
    tsc_json_object_end(j);
    tsc_json_key(j, "policies");
    tsc_json_array_begin(j);
    for (int p = 0; p < f->n_policies; p++) {
        const tsc_fit_policy_t *P = &f->policies[p];
        tsc_json_object_begin(j);
        tsc_json_kv_int(j, "rank", P->rank);
        tsc_json_kv_string(j, "policy", P->name);
        tsc_json_kv_string(j, "canonical", P->canonical);
        tsc_json_kv_number(j, "score", P->score);
        for (int t = 0; t < TSC_FIT_NT; t++)
            if (P->t[t].n) tsc_json_kv_object(j, tensor_name[t], &P->t[t], cmp_fields, TSC_JSON_NFIELDS(cmp_fields));
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
    tsc_json_kv_string(j, "best", f->n_policies ? f->policies[0].name : NULL);
    tsc_json_kv_number(j, "best_o_identical", f->n_policies ? f->policies[0].t[TSC_FIT_O].identical : NAN);
    tsc_json_kv_bool(j, "warning", !f->n_policies || !(f->policies[0].t[TSC_FIT_O].identical >= TSC_FIT_WARN_SHARE));
    tsc_json_key(j, "nonfinite_numbers");
    tsc_json_nonfinite_note(j);
    tsc_json_object_end(j);
}

/* ---- the policy that describes a dump ---- */

static tsc_status_t dump_policy_fit(const char *dump_path, const char *recorded, const char *given_flag,
                                    const tsc_select_t *sel, tsc_progress_t *progress, tsc_dump_policy_t *out) {
    char what[96];
    if (recorded && *recorded) snprintf(what, sizeof what, "the dump's policy '%.40s' is not a policy string", recorded);
    else snprintf(what, sizeof what, "the dump records no policy");
    tsc_fit_opts_t fo;
    tsc_fit_opts_init(&fo);
    fo.dump_path = dump_path;
    if (sel) fo.sel = *sel;
    fo.progress = progress;
    tsc_fit_t *f = NULL;
    tsc_status_t st = tsc_fit_run(&fo, &f);
    const char *name = "bf16-fa2";
    char pct0[32];
    if (st == TSC_OK && f->n_policies > 0 && !(f->policies[0].t[TSC_FIT_O].identical >= TSC_FIT_ADOPT_SHARE)) {
        /* no preset reproduces even half of O (a placeholder O, a kernel nobody models): the ranking is noise */
        out->origin = TSC_POLICY_DEFAULT;
        snprintf(out->source, sizeof out->source, "%.60s, no preset fits its O (best %.20s: %.8s): bf16-fa2 "
                 "(pass %.10s)", what, f->policies[0].name,
                 tsc_fit_percent(f->policies[0].t[TSC_FIT_O].identical, pct0, sizeof pct0), given_flag);
    } else if (st == TSC_OK && f->n_policies > 0) {
        char pct[32];
        name = f->policies[0].canonical; /* with the dump's tiles, as fitted */
        out->origin = TSC_POLICY_FITTED;
        snprintf(out->source, sizeof out->source, "%s: the best fit of its captured O (%s bit-identical on step %lld)",
                 what, tsc_fit_percent(f->policies[0].t[TSC_FIT_O].identical, pct, sizeof pct), f->steps[0]);
    } else if (st == TSC_ERR_MISSING || st == TSC_OK) {
        tsc_error_clear();
        out->origin = TSC_POLICY_DEFAULT;
        snprintf(out->source, sizeof out->source, "%s and no O to fit: the bf16-fa2 default (pass %s)", what,
                 given_flag);
    } else {
        tsc_fit_free(f);
        return tsc_error_wrap(st, "choosing the policy of a dump without a recorded one: ");
    }
    st = tsc_policy_parse(name, &out->policy);
    tsc_fit_free(f);
    return st;
}

tsc_status_t tsc_dump_policy(const char *dump_path, const char *recorded, const char *given, const char *given_flag,
                             const tsc_select_t *sel, tsc_progress_t *progress, tsc_dump_policy_t *out) {
    if (!dump_path || !out) return tsc_error_set(TSC_ERR_ARG, "tsc_dump_policy: NULL argument");
    memset(out, 0, sizeof *out);
    if (!given_flag) given_flag = "--policy";
    tsc_status_t st;
    if (given && *given) {
        if ((st = tsc_policy_parse(given, &out->policy)) != TSC_OK) return tsc_error_wrap(st, "%s '%s': ", given_flag, given);
        out->origin = TSC_POLICY_GIVEN;
        snprintf(out->source, sizeof out->source, "%s", given_flag);
    } else if (recorded && tsc_policy_parse(recorded, &out->policy) == TSC_OK) {
        out->origin = TSC_POLICY_RECORDED;
        snprintf(out->source, sizeof out->source, "the dump's policy");
    } else {
        tsc_error_clear();
        if ((st = dump_policy_fit(dump_path, recorded, given_flag, sel, progress, out)) != TSC_OK) return st;
    }
    return tsc_policy_format(&out->policy, out->name, sizeof out->name);
}
