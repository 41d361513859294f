/* diagnose.c: the Appendix F workflow (tsc_diagnose.h): substitution, verdict, rounding event,
 * mitigation. Replays stream one (batch row, head) at a time like the analysis. */
#include "tsc_diagnose.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advice_internal.h"
#include "an_internal.h"
#include "tsc_accum.h"
#include "tsc_attention.h"
#include "tsc_comm.h"
#include "tsc_dump.h"
#include "tsc_h5.h"
#include "tsc_mem.h"

#ifdef _OPENMP
#include <omp.h>
#endif

void tsc_diagnose_opts_init(tsc_diagnose_opts_t *o) {
    memset(o, 0, sizeof *o);
    tsc_analysis_opts_init(&o->an);
    const double b[4] = {1.5, 2, 4, 8};
    for (int i = 0; i < 4; i++) o->betas[i] = b[i];
    o->n_betas = 4;
    o->eps = 1e-3;
    o->removed_frac = 0.1;
    o->max_heads = 16;
    o->max_steps = 4;
}

typedef struct rep {
    tsc_dump_t *d;
    const tsc_dump_meta_t *m;
    int T, D, H, Hkv, nb;
    int *bs;                   /* [nb] selected batch rows */
    float *q, *k, *v, *dO, *o, *lse, *dl;
    /* the head being examined */
    int ns, nf;
    long long *steps;          /* [ns] */
    int *feats;                /* [nf <= D] features B sums over */
    float *ohp, *dof;          /* [ns, nb, T, nf] hp O and dO at those features */
    double *bstep;             /* [ns] B(lp) per step */
    double *bstep_sq;          /* [ns] its per-row sum of squares (row_sq) and row count per step */
    long long *bstep_n;
    uint8_t *tie;              /* [ns, nb, T] rows with >= 2 exact maxima in lp's scores */
    int use_mask;              /* 1: B sums over the tie rows only */
    int64_t n_tie_rows;
    const tsc_policy_t *lp;
    tsc_attn_trace_t tr;       /* row-window tiles trace of lp (tie rows, tie_block) */
    size_t tie_at;             /* where tie_block writes: r->tie + tie_at + t */
    double row_sq;             /* the last bias_of / delta_sums: sum of squared per-row terms, */
    long long row_n;           /* and the rows summed (for the spread of the sum, row_se) */
    /* the head's inputs once its replayed steps are chosen: every substitution replays the same
     * (step, batch row)s, read from the dump once (load) */
    int cache_on, n_cached, cache_cap;
    long long *c_step;         /* [cache_cap] */
    int *c_b;                  /* [cache_cap] */
    float *cache;              /* [cache_cap, 4, T, D]: q, k, v, dO */
    /* B of each policy already replayed for this head (bias_of): a policy asked again (the chosen
     * set, a beta equal to the stable one) is not replayed again */
    int n_memo, memo_cap;
    char (*memo_pol)[TSC_POLICY_STR_MAX];
    struct memo_val { double sum, row_sq; long long row_n; } *memo_val; /* B and its per-row spread */
    /* threads left over when this process examines fewer heads than it has threads: their contexts
     * (own input and output buffers) replay this head's substitution sets beside it (bias_many) */
    struct rep *help;
    int n_help;
} rep_t;

/* The most bytes of inputs one thread caches for its head (rep_t.cache); more replays read the dump. */
#define DIAG_CACHE_BYTES ((size_t)64 << 20)

/* The standard error of the last bias_of / delta_sums sum, from its per-row terms. */
static double row_se(const rep_t *r, double sum) {
    if (r->row_n < 2) return NAN;
    double n = (double)r->row_n, var = (r->row_sq - sum * sum / n) / (n - 1);
    return sqrt(n * (var > 0 ? var : 0));
}

static tsc_status_t load(rep_t *r, long long step, int layer, int h, int b) {
    int kvh = h / (r->H / r->Hkv);
    size_t TD = (size_t)r->T * r->D;
    float *dst[4] = {r->q, r->k, r->v, r->dO};
    for (int c = 0; c < r->n_cached; c++)
        if (r->c_step[c] == step && r->c_b[c] == b) {
            for (int i = 0; i < 4; i++) memcpy(dst[i], r->cache + ((size_t)c * 4 + i) * TD, TD * sizeof(float));
            return TSC_OK;
        }
    tsc_status_t st;
    tsc_h5_lock();
    if ((st = tsc_dump_read(r->d, step, layer, "q", b, h, r->q)) == TSC_OK &&
        (st = tsc_dump_read(r->d, step, layer, "k", b, kvh, r->k)) == TSC_OK &&
        (st = tsc_dump_read(r->d, step, layer, "v", b, kvh, r->v)) == TSC_OK)
        st = tsc_dump_read(r->d, step, layer, "do", b, h, r->dO);
    tsc_h5_unlock();
    if (st == TSC_OK && r->cache_on && r->n_cached < r->cache_cap) {
        int c = r->n_cached++;
        r->c_step[c] = step, r->c_b[c] = b;
        for (int i = 0; i < 4; i++) memcpy(r->cache + ((size_t)c * 4 + i) * TD, dst[i], TD * sizeof(float));
    }
    return st;
}

/* Starts caching the head's inputs (load) for its ns * nb replayed (step, batch row)s, when they
 * fit in DIAG_CACHE_BYTES; the buffers grow to the largest head seen. */
static void cache_start(rep_t *r) {
    size_t n = (size_t)r->ns * r->nb, per = 4 * (size_t)r->T * r->D * sizeof(float);
    r->n_cached = 0;
    r->cache_on = 0;
    if (n == 0 || n * per > DIAG_CACHE_BYTES) return;
    if ((int)n > r->cache_cap) {
        float *c = realloc(r->cache, n * per);
        long long *cs = c ? realloc(r->c_step, n * sizeof *cs) : NULL;
        if (cs) r->c_step = cs;
        int *cb = cs ? realloc(r->c_b, n * sizeof *cb) : NULL;
        if (cb) r->c_b = cb;
        if (c) r->cache = c;
        if (!c || !cs || !cb) return; /* no cache: every replay reads the dump */
        r->cache_cap = (int)n;
    }
    r->cache_on = 1;
}

/* The memo of B per policy (rep_t.memo_*): 1, *sum and the per-row spread (row_sq, row_n) as
 * bias_replay left them, when pol was replayed for this head. */
static int memo_get(rep_t *r, const char *pol, double *sum) {
    for (int i = 0; i < r->n_memo; i++)
        if (strcmp(r->memo_pol[i], pol) == 0) {
            *sum = r->memo_val[i].sum;
            r->row_sq = r->memo_val[i].row_sq, r->row_n = r->memo_val[i].row_n;
            return 1;
        }
    return 0;
}

static void memo_put(rep_t *r, const char *pol, double sum) {
    if (r->n_memo == r->memo_cap) {
        int cap = r->memo_cap ? 2 * r->memo_cap : 64;
        char (*p)[TSC_POLICY_STR_MAX] = realloc(r->memo_pol, (size_t)cap * sizeof *p);
        if (p) r->memo_pol = p;
        struct memo_val *v = p ? realloc(r->memo_val, (size_t)cap * sizeof *v) : NULL;
        if (v) r->memo_val = v;
        if (!p || !v) return; /* not remembered: replayed again when asked */
        r->memo_cap = cap;
    }
    snprintf(r->memo_pol[r->n_memo], sizeof r->memo_pol[0], "%s", pol);
    r->memo_val[r->n_memo++] = (struct memo_val){sum, r->row_sq, r->row_n};
}

static tsc_attn_dims_t rep_dims(const rep_t *r) {
    tsc_attn_dims_t dims = {.B = 1, .H = 1, .Hkv = 1, .T = r->T, .D = r->D, .causal = r->m->causal,
                            .scale = r->m->softmax_scale};
    return dims;
}

static tsc_status_t run(rep_t *r, const tsc_policy_t *pol, int backward, tsc_attn_trace_t *tr) {
    tsc_attn_dims_t dims = rep_dims(r);
    tsc_attn_io_t io = {.dtype = TSC_ATTN_F32, .q = r->q, .k = r->k, .v = r->v, .dout = backward ? r->dO : NULL,
                        .o = r->o, .lse = r->lse, .delta = backward ? r->dl : NULL};
    if (tr) tr->b = tr->h = 0;
    return tsc_attn_run(pol, &dims, &io, tr, tr ? 1 : 0);
}

/* A helper's copy of r: the head's shared state, the helper's own input and output buffers (tid 0:
 * r's own), reading the input cache without adding to it. */
static rep_t rep_worker(const rep_t *r, int tid) {
    rep_t w = *r;
    if (tid > 0) {
        const rep_t *hp = &r->help[tid - 1];
        w.q = hp->q, w.k = hp->k, w.v = hp->v, w.dO = hp->dO, w.o = hp->o, w.lse = hp->lse, w.dl = hp->dl;
    }
    w.cache_on = 0;
    return w;
}

/* Runs fn(w, i, ctx) for i < n, shared among r and its helpers (each task on rep_worker's copy,
 * loading its own inputs; results go to ctx by index, so they do not depend on the thread count).
 * The first failing task's status and message. */
typedef tsc_status_t (*head_task_fn)(rep_t *w, int i, void *ctx);
static tsc_status_t head_tasks(rep_t *r, int n, head_task_fn fn, void *ctx) {
    struct res {
        tsc_status_t st;
        char msg[512];
    } *res = calloc((size_t)(n ? n : 1), sizeof *res);
    if (!res) return tsc_error_set(TSC_ERR_NOMEM, "diagnose: no memory");
    int nt = 1 + r->n_help;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
    for (int i = 0; i < n; i++) {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        rep_t w = rep_worker(r, tid);
        res[i].st = fn(&w, i, ctx);
        if (res[i].st != TSC_OK) snprintf(res[i].msg, sizeof res[i].msg, "%s", tsc_error_last());
    }
    tsc_status_t ret = TSC_OK;
    for (int i = 0; i < n && ret == TSC_OK; i++)
        if (res[i].st != TSC_OK) ret = tsc_error_set(res[i].st, "%s", res[i].msg);
    free(res);
    return ret;
}

static tsc_status_t bias_replay(rep_t *r, const tsc_policy_t *pol, int layer, int h, int hp_pass, double *sum,
                                double *per_step);

/* The row-window trace's consumer for the tie rows (rep_t.tr): a row is a tie row when the exact
 * ties at its row max, summed over its tiles, are at least 2. Memory O(T·tiles per row) for the
 * group of TSC_ATTN_ROW_GROUP rows, never T x T. */
static void tie_block(void *ctx, const tsc_attn_trace_t *tr, int t0, int nr) {
    rep_t *r = ctx;
    for (int t = t0; t < t0 + nr; t++) {
        const double *tm = tr->tile_max + (size_t)(t % tr->rows) * tr->n_kt;
        const int32_t *te = tr->ties_exact + (size_t)(t % tr->rows) * tr->n_kt;
        double mx = -INFINITY;
        int nt = 0;
        for (int kt = 0; kt < tr->n_kt; kt++)
            if (!isnan(tm[kt]) && tm[kt] > mx) mx = tm[kt];
        for (int kt = 0; kt < tr->n_kt; kt++)
            if (tm[kt] == mx) nt += te[kt];
        r->tie[r->tie_at + t] = nt >= 2;
        r->n_tie_rows += nt >= 2;
    }
}

/* B(pol) over the head's steps (see tsc_diagnose.h); with hp_pass, fills the hp cache instead.
 * per_step (may be NULL) gets B per step (and r->bstep_sq, bstep_n its per-row spread). */
static tsc_status_t bias_of(rep_t *r, const tsc_policy_t *pol, int layer, int h, int hp_pass, double *sum,
                            double *per_step) {
    char key[TSC_POLICY_STR_MAX];
    int memo = !hp_pass && !per_step;
    if (memo) {
        TSC_INVARIANT(tsc_policy_format(pol, key, sizeof key) == TSC_OK); /* lp with a stage raised: valid */
        if (memo_get(r, key, sum)) return TSC_OK;
    }
    tsc_status_t st = bias_replay(r, pol, layer, h, hp_pass, sum, per_step);
    if (st == TSC_OK && memo) memo_put(r, key, *sum);
    return st;
}

/* bias_of's replays. */
static tsc_status_t bias_replay(rep_t *r, const tsc_policy_t *pol, int layer, int h, int hp_pass, double *sum,
                                double *per_step) {
    *sum = 0.0;
    r->row_sq = 0.0, r->row_n = 0;
    for (int si = 0; si < r->ns; si++) {
        double bs = 0.0, sq0 = r->row_sq;
        long long n0 = r->row_n;
        for (int bi = 0; bi < r->nb; bi++) {
            tsc_status_t st = load(r, r->steps[si], layer, h, r->bs[bi]);
            size_t mrow = ((size_t)si * r->nb + bi) * (size_t)r->T;
            if (hp_pass && st == TSC_OK) { /* tie rows from lp's tile statistics (tie_block) */
                r->tie_at = mrow;
                if (r->n_help > 0) { /* beside hp's replay, in a helper's output buffers */
                    tsc_status_t s2[2] = {TSC_OK, TSC_OK};
                    char msg[2][512] = {"", ""};
#pragma omp parallel for num_threads(2)
                    for (int k = 0; k < 2; k++) {
                        rep_t w = *r;
                        if (k == 0) w.o = r->help[0].o, w.lse = r->help[0].lse, w.dl = r->help[0].dl;
                        s2[k] = k == 0 ? run(&w, r->lp, 0, &r->tr) : run(r, pol, 0, NULL);
                        if (s2[k] != TSC_OK) snprintf(msg[k], sizeof msg[k], "%s", tsc_error_last());
                    }
                    for (int k = 0; k < 2; k++)
                        if (s2[k] != TSC_OK) return tsc_error_set(s2[k], "%s", msg[k]);
                } else {
                    if ((st = run(r, r->lp, 0, &r->tr)) != TSC_OK) return st;
                    st = run(r, pol, 0, NULL);
                }
            } else if (st == TSC_OK) {
                st = run(r, pol, 0, NULL);
            }
            if (st != TSC_OK) return st;
            size_t base = ((size_t)si * r->nb + bi) * (size_t)r->T * r->nf;
            for (int t = 0; t < r->T; t++) {
                double b_row = 0.0;
                for (int f = 0; f < r->nf; f++) {
                    if (!hp_pass && r->use_mask && !r->tie[mrow + t]) continue;
                    size_t x = base + (size_t)t * r->nf + f, e = (size_t)t * r->D + r->feats[f];
                    if (hp_pass) {
                        r->ohp[x] = r->o[e];
                        r->dof[x] = r->dO[e];
                    } else {
                        b_row += (double)r->dof[x] * ((double)r->o[e] - (double)r->ohp[x]);
                    }
                }
                if (!hp_pass && (!r->use_mask || r->tie[mrow + t])) {
                    bs += b_row;
                    r->row_sq += b_row * b_row;
                    r->row_n++;
                }
            }
        }
        if (per_step) {
            per_step[si] = bs;
            r->bstep_sq[si] = r->row_sq - sq0, r->bstep_n[si] = r->row_n - n0;
        }
        *sum += bs;
    }
    return TSC_OK;
}

/* δ of each of n policies over the head's replayed (step, batch row)s, the replays shared among r
 * and its helpers (head_tasks); dl [n][ns·nb·T]. */
typedef struct {
    const tsc_policy_t *pols;
    int layer, h;
    float *dl;
} delta_ctx_t;

static tsc_status_t delta_task(rep_t *w, int i, void *ctx) {
    const delta_ctx_t *c = ctx;
    const size_t per = (size_t)w->ns * w->nb * w->T;
    for (int si = 0; si < w->ns; si++)
        for (int bi = 0; bi < w->nb; bi++) {
            tsc_status_t st = load(w, w->steps[si], c->layer, c->h, w->bs[bi]);
            if (st == TSC_OK) st = run(w, &c->pols[i], 1, NULL);
            if (st != TSC_OK) return st;
            memcpy(c->dl + i * per + ((size_t)si * w->nb + bi) * w->T, w->dl, (size_t)w->T * sizeof(float));
        }
    return TSC_OK;
}

/* Σ over the head's steps and tie rows (every row when it has none, as B) of δ_pol − δ_hp (all
 * features; backward replays) for each of n policies (pols[0] is hp), with its standard error:
 * sum[k], se[k] for k = 1 .. n-1. */
static tsc_status_t delta_sums(rep_t *r, const tsc_policy_t *pols, int n, int layer, int h, double *sum,
                               double *se) {
    const size_t per = (size_t)r->ns * r->nb * r->T;
    delta_ctx_t c = {pols, layer, h, malloc((size_t)n * (per ? per : 1) * sizeof(float))};
    if (!c.dl) return tsc_error_set(TSC_ERR_NOMEM, "diagnose: no memory for %d x %zu delta values", n, per);
    tsc_status_t st = head_tasks(r, n, delta_task, &c);
    for (int k = 1; st == TSC_OK && k < n; k++) {
        sum[k] = 0.0;
        r->row_sq = 0.0, r->row_n = 0;
        for (size_t x = 0; x < per; x++)
            if (!r->use_mask || r->tie[x]) { /* tie rows, as B ([ns, nb, T] like the δ) */
                double dd = (double)c.dl[k * per + x] - (double)c.dl[x];
                sum[k] += dd;
                r->row_sq += dd * dd;
                r->row_n++;
            }
        se[k] = row_se(r, sum[k]);
    }
    free(c.dl);
    return st;
}

/* find_event's search, fed row by row by a row-window trace of lp's forward. */
typedef struct {
    rep_t *r;
    const tsc_policy_t *lp;
    tsc_format_t out_fmt;
    const uint8_t *rows;       /* candidate rows (NULL: all) */
    tsc_diag_head_t *dh;
    double *best;
    int b;
    uint32_t rb, stm;          /* the rounding bit and the sticky bits below it, relative to out_fmt */
    const float *vr;           /* [T, nf] V at the features, rounded to lp's V format */
    long long stride, seen;    /* every stride-th candidate row is searched; candidates seen so far */
} event_ctx_t;

/* frexpf's exponent of a finite nonzero float, from its bits when it is normal. */
static inline int fexp(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    int e = (int)((u >> 23) & 0xff);
    if (e) return e - 126;
    frexpf(x, &e);
    return e;
}

/* Key-feature visits one batch row's event search may make (the search is O(T²·features): at
 * T = 131072 and 64 features, 5.5·10^11): above it, every stride-th candidate row is searched. */
#define DIAG_EVENT_VISITS ((long long)1 << 32)

/* The events of row t (see find_event), from the row's slot of the window trace. */
static void event_row(const event_ctx_t *c, const tsc_attn_trace_t *tr, int t) {
    const rep_t *r = c->r;
    const int bk = c->lp->block_k, slot = t % tr->rows, nf = r->nf;
    const double *pbar = tr->pbar + (size_t)slot * r->T;
    for (int f = 0; f < nf; f++) {
        int i = r->feats[f], nv = r->m->causal ? t + 1 : r->T;
        int lt = r->m->causal ? t / bk : tr->n_kt - 1;
        double l = tr->l[(size_t)slot * tr->n_kt + lt]; /* O = O-bar / l: the event's weight in O */
        if (!(l > 0)) l = 1.0;
        for (int j0 = 0; j0 < nv; j0 += bk) { /* the sum restarts at each key tile */
            const int j1 = j0 + bk < nv ? j0 + bk : nv;
            float s = 0.0f;
            for (int j = j0; j < j1; j++) {
                float a = (float)pbar[j];
                if (a == 0.0f) continue;
                float vv = c->vr[(size_t)j * nf + f];
                float p = a * vv, sn = fmaf(a, vv, s);
                if (s != 0.0f && p != 0.0f && sn != 0.0f && isfinite(sn)) {
                    uint32_t u;
                    memcpy(&u, &sn, sizeof u);
                    if ((u & c->rb) && (u & c->stm)) {
                        int es = fexp(s), ep = fexp(p);
                        if (fexp(sn) > (es > ep ? es : ep)) {
                            double rounded = tsc_round((double)sn, c->out_fmt, TSC_ROUND_NEAREST_EVEN, NULL);
                            double e = rounded - (double)sn;
                            if (fabs(e) / l > *c->best) {
                                tsc_diag_head_t *dh = c->dh;
                                *c->best = fabs(e) / l;
                                dh->ev_found = 1;
                                dh->ev_b = c->b, dh->ev_t = t, dh->ev_i = i, dh->ev_key = j;
                                dh->ev_before = s, dh->ev_term = p, dh->ev_sum = sn;
                                dh->ev_pbar = a, dh->ev_v = vv;
                                dh->ev_rounded = rounded, dh->ev_err = e;
                            }
                        }
                    }
                }
                s = sn;
            }
        }
    }
}

static void event_block(void *ctx, const tsc_attn_trace_t *tr, int t0, int nr) {
    event_ctx_t *c = ctx;
    for (int t = t0; t < t0 + nr && c->rb; t++)
        if (!c->rows || c->rows[t]) {
            if (c->seen++ % c->stride == 0) {
                event_row(c, tr, t);
                c->dh->ev_rows++;
            }
        }
}

/* The largest rounding event among the features F of the candidate rows (rows, or every row) of
 * batch row b at step: FP32 additions s + a*v (sums from 0 per key tile) whose significand
 * overflowed and whose result has rounding bit 1 and sticky bits set relative to out_fmt; the error
 * is R_out(sum) - sum. Every stride-th candidate row when all would pass the batch row's share of
 * DIAG_EVENT_VISITS. The forward's scores are read a group of rows at a time (a row-window trace),
 * so memory is O(T) per row held, not T x T. */
static tsc_status_t find_event(rep_t *r, const tsc_policy_t *lp, tsc_format_t out_fmt, long long step, int layer,
                               int h, int b, const uint8_t *rows, tsc_diag_head_t *dh, double *best) {
    int sh = 23 - tsc_format_mant_bits(out_fmt);
    uint32_t rb = sh >= 2 ? 1u << (sh - 1) : 0;
    long long work = 0, cand = 0;
    for (int t = 0; t < r->T; t++)
        if (!rows || rows[t]) work += (long long)(r->m->causal ? t + 1 : r->T) * r->nf, cand++;
    const long long budget = DIAG_EVENT_VISITS / (r->nb > 0 ? r->nb : 1);
    float *vr = malloc(((size_t)r->T * r->nf + 1) * sizeof *vr);
    if (!vr) return tsc_error_set(TSC_ERR_NOMEM, "diagnose: no memory for the event search's V");
    event_ctx_t c = {r, lp, out_fmt, rows, dh, best, b, rb, rb ? rb - 1 : 0, vr, work > budget ? (work + budget - 1) / budget : 1, 0};
    dh->ev_rows_of += cand;
    tsc_attn_trace_t tr;
    tsc_status_t st = tsc_attn_trace_init_rows(&tr, r->T, r->D, lp->block_k, TSC_TRACE_SCORES | TSC_TRACE_TILES,
                                               TSC_ATTN_ROW_GROUP, event_block, &c);
    if (st != TSC_OK) {
        free(vr);
        return st;
    }
    if ((st = load(r, step, layer, h, b)) == TSC_OK) {
        for (int j = 0; j < r->T; j++)
            for (int f = 0; f < r->nf; f++)
                vr[(size_t)j * r->nf + f] = (float)tsc_round(r->v[(size_t)j * r->D + r->feats[f]],
                                                            lp->fmt[TSC_STAGE_V], TSC_ROUND_NEAREST_EVEN, NULL);
        st = run(r, lp, 0, &tr);
    }
    tsc_attn_trace_free(&tr);
    free(vr);
    if (st != TSC_OK) return st;
    snprintf(dh->ev_fmt, sizeof dh->ev_fmt, "%s", tsc_format_name(out_fmt));
    return TSC_OK;
}

void tsc_diagnose_free(tsc_diagnosis_t *d) {
    if (!d) return;
    tsc_analysis_free(d->an);
    tsc_check_free(d->check);
    free(d->heads);
    free(d);
}

static int by_risk(const void *x, const void *y) {
    const tsc_diag_head_t *a = x, *b = y;
    return (a->risk < b->risk) - (a->risk > b->risk);
}

static int is_forward_stage(tsc_stage_t s) { return s < TSC_STAGE_EXPARG_BWD; }

/* Keeps the TSC_DIAG_MAX_ALT removing sets with the smallest |ratio|, in that order (the culprit
 * is the first; it is taken out of the list once chosen). */
static void alt_insert(tsc_diag_head_t *dh, const char *name, double ratio) {
    enum { CAP = TSC_DIAG_MAX_ALT };
    int n = dh->n_alt, pos = n;
    while (pos > 0 && fabs(dh->alt_ratio[pos - 1]) > fabs(ratio)) pos--;
    if (pos >= CAP) return;
    if (n == CAP) n--; /* drop the last */
    memmove(dh->alt_stage[pos + 1], dh->alt_stage[pos], (size_t)(n - pos) * sizeof dh->alt_stage[0]);
    memmove(&dh->alt_ratio[pos + 1], &dh->alt_ratio[pos], (size_t)(n - pos) * sizeof dh->alt_ratio[0]);
    snprintf(dh->alt_stage[pos], sizeof dh->alt_stage[pos], "%s", name);
    dh->alt_ratio[pos] = ratio;
    dh->n_alt = n + 1;
}

/* Keeps the replayed set with the smallest |ratio| so far, whether it removes the bias or not: when
 * none does, the diagnosis still says which rounding steps carry most of it. */
static void nearest_note(tsc_diag_head_t *dh, const char *name, double ratio, double se) {
    if (!isfinite(ratio) || (isfinite(dh->nearest_ratio) && fabs(dh->nearest_ratio) <= fabs(ratio))) return;
    snprintf(dh->nearest, sizeof dh->nearest, "%s", name);
    dh->nearest_ratio = ratio, dh->nearest_se = se;
}

/* The head's analysed steps, and the features B sums over: every flagged feature (pooled over
 * steps, the same in each of its records), or all D when none is flagged. */
static tsc_status_t head_setup(rep_t *r, const tsc_analysis_t *a, tsc_diag_head_t *dh) {
    r->ns = 0;
    size_t any = a->n_heads;
    for (size_t i = 0; i < a->n_heads; i++) {
        const tsc_head_result_t *x = &a->heads[i];
        if (x->layer != dh->layer || x->head != dh->head || x->skipped) continue;
        r->steps[r->ns++] = x->step;
        any = i;
    }
    dh->n_steps = r->ns;
    r->nf = 0;
    if (any < a->n_heads && a->heads[any].n_features_flagged > 0) {
        const uint8_t *flags = a->feature_flags + any * (size_t)r->D;
        for (int f = 0; f < r->D; f++) {
            if (!flags[f]) continue;
            if (r->nf < TSC_ANALYSIS_MAX_FLAGGED) dh->features[r->nf] = f;
            r->feats[r->nf++] = f;
        }
        dh->n_features = r->nf < TSC_ANALYSIS_MAX_FLAGGED ? r->nf : TSC_ANALYSIS_MAX_FLAGGED;
    } else {
        for (int f = 0; f < r->D; f++) r->feats[r->nf++] = f;
    }
    dh->n_features_summed = r->nf;
    r->n_memo = r->n_cached = r->cache_on = 0;
    size_t n = (size_t)r->ns * r->nb * r->T * r->nf;
    tsc_status_t mst = tsc_mem_check(2 * n * sizeof(float) + (uint64_t)r->ns * r->nb * r->T,
                                     "diagnose: a head's FP32 outputs and tie rows over its steps");
    if (mst != TSC_OK) return mst;
    free(r->ohp), free(r->dof), free(r->bstep), free(r->bstep_sq), free(r->bstep_n);
    free(r->tie);
    r->tie = calloc((size_t)r->ns * r->nb * r->T + 1, 1);
    r->n_tie_rows = 0;
    r->ohp = malloc((n ? n : 1) * sizeof *r->ohp);
    r->dof = malloc((n ? n : 1) * sizeof *r->dof);
    r->bstep = malloc((size_t)(r->ns ? r->ns : 1) * sizeof *r->bstep);
    r->bstep_sq = malloc((size_t)(r->ns ? r->ns : 1) * sizeof *r->bstep_sq);
    r->bstep_n = malloc((size_t)(r->ns ? r->ns : 1) * sizeof *r->bstep_n);
    if (!r->ohp || !r->dof || !r->bstep || !r->bstep_sq || !r->bstep_n || !r->tie)
        return tsc_error_set(TSC_ERR_NOMEM, "diagnose: no memory for %zu values", n);
    return TSC_OK;
}

/* Keeps the max_steps steps with the largest |B(lp)| (in step order): the bias is measured where
 * it is, and the cost of the substitution replays stays bounded on long dumps. */
static tsc_status_t keep_top_steps(rep_t *r, int max_steps, tsc_diag_head_t *dh) {
    uint8_t *keep = calloc((size_t)r->ns, 1);
    if (!keep) return tsc_error_set(TSC_ERR_NOMEM, "diagnose: no memory");
    for (int k = 0; k < max_steps; k++) {
        int bi = -1;
        for (int si = 0; si < r->ns; si++)
            if (!keep[si] && (bi < 0 || fabs(r->bstep[si]) > fabs(r->bstep[bi]))) bi = si;
        if (bi < 0) break;
        keep[bi] = 1;
    }
    size_t blk = (size_t)r->nb * r->T * r->nf, mblk = (size_t)r->nb * r->T;
    int w = 0;
    dh->bias_lp = 0.0;
    r->row_sq = 0.0, r->row_n = 0;
    for (int si = 0; si < r->ns; si++) {
        if (!keep[si]) continue;
        memmove(r->ohp + (size_t)w * blk, r->ohp + (size_t)si * blk, blk * sizeof *r->ohp);
        memmove(r->dof + (size_t)w * blk, r->dof + (size_t)si * blk, blk * sizeof *r->dof);
        memmove(r->tie + (size_t)w * mblk, r->tie + (size_t)si * mblk, mblk);
        r->steps[w] = r->steps[si];
        r->bstep[w] = r->bstep[si];
        dh->bias_lp += r->bstep[w];
        r->row_sq += r->bstep_sq[si], r->row_n += r->bstep_n[si];
        w++;
    }
    r->ns = w;
    free(keep);
    return TSC_OK;
}

/* 1: the hp cache and tie rows, B(lp) per step, the examined step, the replayed steps. */
static tsc_status_t measure_lp(rep_t *r, const tsc_policy_t *hp, const tsc_policy_t *lp, int max_steps,
                               tsc_diag_head_t *dh) {
    double dummy;
    tsc_status_t st;
    if ((st = bias_of(r, hp, dh->layer, dh->head, 1, &dummy, NULL)) != TSC_OK) return st;
    r->use_mask = r->n_tie_rows > 0;
    dh->n_tie_rows = r->n_tie_rows;
    if ((st = bias_of(r, lp, dh->layer, dh->head, 0, &dh->bias_lp, r->bstep)) != TSC_OK) return st;
    if (r->use_mask && !(fabs(dh->bias_lp) >= 2 * row_se(r, dh->bias_lp))) {
        /* too few tie rows for B to stand out of its own rounding noise (a head flagged by its δ sum
         * over every row): a substitution's ratio would be noise over noise, so B takes every row */
        r->use_mask = 0;
        dh->n_tie_rows = 0;
        if ((st = bias_of(r, lp, dh->layer, dh->head, 0, &dh->bias_lp, r->bstep)) != TSC_OK) return st;
    }
    int sbest = 0;
    for (int si = 1; si < r->ns; si++)
        if (fabs(r->bstep[si]) > fabs(r->bstep[sbest])) sbest = si;
    if (r->ns) dh->step = r->steps[sbest];
    if (max_steps > 0 && r->ns > max_steps && (st = keep_top_steps(r, max_steps, dh)) != TSC_OK) return st;
    dh->bias_lp_se = row_se(r, dh->bias_lp); /* row_sq, row_n: lp's replay, over the kept steps */
    dh->n_steps_replayed = r->ns;
    cache_start(r);
    return TSC_OK;
}

static const tsc_stage_t diag_inputs[3] = {TSC_STAGE_Q, TSC_STAGE_K, TSC_STAGE_V};

/* Clears narrow[c] for each input c (q, k, v) whose every value over the head's replayed (step, batch
 * row)s is a number of lp's format for it already: rounding it there is the identity (in any mode),
 * so raising it to FP32 would replay lp itself (BF16 values stored as FP32: an import of BF16 tensors
 * saved in FP32). One read of each (step, batch row); a read that fails clears nothing (the replay
 * then reports it). */
static void drop_exact_inputs(rep_t *r, const tsc_policy_t *lp, const tsc_diag_head_t *dh, int narrow[3]) {
    const size_t n = (size_t)r->T * r->D;
    int exact[3] = {narrow[0], narrow[1], narrow[2]};
    for (int si = 0; si < r->ns && (exact[0] | exact[1] | exact[2]); si++)
        for (int bi = 0; bi < r->nb && (exact[0] | exact[1] | exact[2]); bi++) {
            if (load(r, r->steps[si], dh->layer, dh->head, r->bs[bi]) != TSC_OK) return;
            const float *x[3] = {r->q, r->k, r->v};
            for (int c = 0; c < 3; c++) {
                const tsc_format_t f = lp->fmt[diag_inputs[c]];
                for (size_t i = 0; exact[c] && i < n; i++)
                    if (x[c][i] == x[c][i] && tsc_round_f32(x[c][i], f, TSC_ROUND_NEAREST_EVEN, NULL) != x[c][i])
                        exact[c] = 0;
            }
        }
    for (int c = 0; c < 3; c++)
        if (exact[c]) narrow[c] = 0;
}

/* The stages substitution raises: each input (q, k, v) whose format in lp is narrower than the
 * dump's stored one (FP8 inputs from a BF16 dump: the quantisation itself can be the bias; a BF16
 * stage on BF16 data changes nothing and is not replayed, nor is one whose stored values all are
 * numbers of lp's format already: drop_exact_inputs), and each low forward stage. Every candidate
 * costs a replay alone, and pairs and triples grow with the square and cube of their number. */
static int forward_candidates(rep_t *r, const tsc_policy_t *lp, const tsc_diag_head_t *dh, tsc_stage_t *fw) {
    tsc_stage_t stages[TSC_STAGE_COUNT];
    int nst = tsc_policy_low_stages(lp, stages), nfw = 0, narrow[3];
    for (int c = 0; c < 3; c++) {
        tsc_dump_dataset_info_t info;
        tsc_h5_lock();
        tsc_status_t ist = tsc_dump_dataset_info(r->d, dh->step, dh->layer, tsc_stage_name(diag_inputs[c]), &info);
        tsc_h5_unlock();
        narrow[c] = ist == TSC_OK && tsc_format_mant_bits(lp->fmt[diag_inputs[c]]) < tsc_format_mant_bits(info.dtype);
    }
    if (narrow[0] | narrow[1] | narrow[2]) drop_exact_inputs(r, lp, dh, narrow);
    for (int c = 0; c < 3; c++)
        if (narrow[c]) fw[nfw++] = diag_inputs[c];
    for (int i = 0; i < nst; i++)
        if (is_forward_stage(stages[i])) fw[nfw++] = stages[i];
    return nfw;
}

/* 1: a substitution's ratio B(set)/B(lp), standard error se, removes the bias: its point estimate
 * is within removed_frac of 0 and its effect stands out of the noise (|ratio| + 2 se < 1). Raising
 * the scores changes every probability, and on a head with few rows B then lands anywhere, near 0
 * by chance too; such a draw has a wide se and is not taken for the cause. (Stricter than this,
 * |ratio| + 2 se <= removed_frac as for the fixes, would demand a precision of removed_frac / 2 that
 * a head flagged at 2-3 se never allows.) */
static int set_removes(double ratio, double se, double removed_frac) {
    return isfinite(ratio) && fabs(ratio) <= removed_frac && fabs(ratio) + 2 * (isfinite(se) ? se : 0.0) < 1.0;
}

/* B and its standard error for n policies of this head, as bias_of gives them one by one (the memo
 * consulted first and filled after, in order), the replays shared among r and its helpers: each
 * runs in a copy of r with the helper's own input and output buffers and the head's shared state
 * (steps, features, hp outputs, tie rows, the input cache read only). Each replay is the same
 * computation whichever thread runs it, so the results do not depend on the number of threads. */
static tsc_status_t bias_many(rep_t *r, const tsc_policy_t *pols, int n, int layer, int h, double *sum, double *se) {
    struct item {
        char key[TSC_POLICY_STR_MAX];
        int todo, same;                /* replay it here; an earlier equal policy of the list, or -1 */
        double sq;                     /* the per-row spread of the sum (row_sq, row_n) */
        long long rn;
        tsc_status_t st;
        char msg[512];
    } *it = calloc((size_t)(n ? n : 1), sizeof *it);
    if (!it) return tsc_error_set(TSC_ERR_NOMEM, "diagnose: no memory");
    for (int i = 0; i < n; i++) {
        TSC_INVARIANT(tsc_policy_format(&pols[i], it[i].key, sizeof it[i].key) == TSC_OK);
        it[i].same = -1;
        for (int j = 0; j < i && it[i].same < 0; j++)
            if (strcmp(it[j].key, it[i].key) == 0) it[i].same = j;
        if (it[i].same >= 0) continue;
        if (memo_get(r, it[i].key, &sum[i])) it[i].sq = r->row_sq, it[i].rn = r->row_n;
        else it[i].todo = 1;
    }
    int nt = 1 + r->n_help;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
    for (int i = 0; i < n; i++) {
        if (!it[i].todo) continue;
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        rep_t w = rep_worker(r, tid);
        it[i].st = bias_replay(&w, &pols[i], layer, h, 0, &sum[i], NULL);
        it[i].sq = w.row_sq, it[i].rn = w.row_n;
        if (it[i].st != TSC_OK) snprintf(it[i].msg, sizeof it[i].msg, "%s", tsc_error_last());
    }
    tsc_status_t ret = TSC_OK;
    for (int i = 0; i < n; i++) {
        if (it[i].todo && it[i].st != TSC_OK) {
            ret = tsc_error_set(it[i].st, "%s", it[i].msg);
            break;
        }
        int f = it[i].same >= 0 ? it[i].same : i;
        sum[i] = sum[f];
        r->row_sq = it[f].sq, r->row_n = it[f].rn;
        if (it[i].todo) memo_put(r, it[i].key, sum[i]);
        se[i] = row_se(r, sum[i]);
    }
    free(it);
    return ret;
}

/* 2a: each candidate stage alone raised to FP32. */
static tsc_status_t subst_single(rep_t *r, const tsc_policy_t *lp, const tsc_stage_t *fw, int nfw, double base,
                                 double removed_frac, tsc_diag_head_t *dh) {
    if (nfw > TSC_DIAG_MAX_SUBST - dh->n_subst) nfw = TSC_DIAG_MAX_SUBST - dh->n_subst;
    tsc_policy_t q[TSC_DIAG_MAX_SUBST] = {0};
    double sv[TSC_DIAG_MAX_SUBST] = {0}, se[TSC_DIAG_MAX_SUBST] = {0};
    for (int si = 0; si < nfw; si++) {
        q[si] = *lp;
        tsc_policy_stage_set(&q[si], fw[si], TSC_FMT_FP32);
    }
    tsc_status_t st = bias_many(r, q, nfw, dh->layer, dh->head, sv, se);
    if (st != TSC_OK) return st;
    double best = INFINITY;
    for (int si = 0; si < nfw; si++) {
        int k = dh->n_subst++;
        TSC_INVARIANT(tsc_policy_format(&q[si], dh->subst_name[k], sizeof dh->subst_name[k]) == TSC_OK);
        snprintf(dh->subst_stage[k], sizeof dh->subst_stage[k], "%s", tsc_stage_name(fw[si]));
        dh->subst_ratio[k] = sv[si] / base;
        dh->subst_se[k] = se[si] / fabs(base);
        nearest_note(dh, dh->subst_stage[k], dh->subst_ratio[k], dh->subst_se[k]);
        if (set_removes(dh->subst_ratio[k], dh->subst_se[k], removed_frac) && fabs(dh->subst_ratio[k]) < best) {
            best = fabs(dh->subst_ratio[k]);
            snprintf(dh->culprit, sizeof dh->culprit, "%s", tsc_stage_name(fw[si]));
            dh->culprit_ratio = dh->subst_ratio[k], dh->culprit_se = dh->subst_se[k];
        }
    }
    return TSC_OK;
}

/* lp with stages fw[i0], fw[i1] and (i2 >= 0) fw[i2] in FP32, and the set's name. */
static tsc_policy_t raised(const tsc_policy_t *lp, const tsc_stage_t *fw, int i0, int i1, int i2, char *nm, size_t n) {
    tsc_policy_t q = *lp;
    tsc_policy_stage_set(&q, fw[i0], TSC_FMT_FP32);
    tsc_policy_stage_set(&q, fw[i1], TSC_FMT_FP32);
    if (i2 >= 0) tsc_policy_stage_set(&q, fw[i2], TSC_FMT_FP32);
    snprintf(nm, n, "%s+%s%s%s", tsc_stage_name(fw[i0]), tsc_stage_name(fw[i1]), i2 >= 0 ? "+" : "",
             i2 >= 0 ? tsc_stage_name(fw[i2]) : "");
    return q;
}

/* 2b, one set size: every set of `size` candidates; among the sets that remove the bias
 * (set_removes), the smallest |ratio| is the culprit, the others its alternatives. */
static tsc_status_t subst_sets(rep_t *r, const tsc_policy_t *lp, const tsc_stage_t *fw, int nfw, int size,
                               double base, double removed_frac, tsc_diag_head_t *dh) {
    dh->n_alt = 0;
    int n = 0, cap = nfw * nfw * (size == 3 ? nfw : 1) + 1, kb = -1;
    tsc_policy_t *q = malloc((size_t)cap * sizeof *q);
    char(*nm)[48] = malloc((size_t)cap * sizeof *nm);
    double *sv = malloc((size_t)cap * sizeof *sv), *se = malloc((size_t)cap * sizeof *se);
    tsc_status_t st = q && nm && sv && se ? TSC_OK : tsc_error_set(TSC_ERR_NOMEM, "diagnose: no memory");
    for (int i0 = 0; st == TSC_OK && i0 < nfw; i0++)
        for (int i1 = i0 + 1; i1 < nfw; i1++)
            for (int i2 = size == 3 ? i1 + 1 : -1; size == 3 ? i2 < nfw : i2 < 0; i2++, n++)
                q[n] = raised(lp, fw, i0, i1, i2, nm[n], sizeof nm[n]);
    if (st == TSC_OK) st = bias_many(r, q, n, dh->layer, dh->head, sv, se);
    for (int k = 0; st == TSC_OK && k < n; k++) {
        double ratio = sv[k] / base, rse = se[k] / fabs(base);
        nearest_note(dh, nm[k], ratio, rse);
        if (!set_removes(ratio, rse, removed_frac)) continue;
        alt_insert(dh, nm[k], ratio);
        if (kb < 0 || fabs(ratio) < fabs(sv[kb] / base)) kb = k;
    }
    if (st == TSC_OK && kb >= 0 && dh->n_subst < TSC_DIAG_MAX_SUBST) {
        int k = dh->n_subst++;
        TSC_INVARIANT(tsc_policy_format(&q[kb], dh->subst_name[k], sizeof dh->subst_name[k]) == TSC_OK);
        snprintf(dh->subst_stage[k], sizeof dh->subst_stage[k], "%s", nm[kb]);
        dh->subst_ratio[k] = sv[kb] / base;
        dh->subst_se[k] = se[kb] / fabs(base);
        snprintf(dh->culprit, sizeof dh->culprit, "%s", dh->subst_stage[k]);
        dh->culprit_ratio = dh->subst_ratio[k], dh->culprit_se = dh->subst_se[k];
        /* the culprit itself is the first of the list (smallest |ratio|): keep the others */
        int w = 0;
        for (int i = 0; i < dh->n_alt; i++)
            if (strcmp(dh->alt_stage[i], dh->culprit) != 0) {
                memmove(dh->alt_stage[w], dh->alt_stage[i], sizeof dh->alt_stage[w]);
                dh->alt_ratio[w++] = dh->alt_ratio[i];
            }
        dh->n_alt = w;
    }
    free(q), free(nm), free(sv), free(se);
    return st;
}

/* 2: substitutions: each candidate alone; when none removes the bias, every pair, then every
 * triple. The forward is a chain of roundings: raising one stage alone is often undone by the
 * next (bf16-torch rounds P̄V, then Ō, then O with a BF16 ℓ), so look for the smallest set; among
 * sets of one size the smallest |ratio| wins. Then δ from an FP32 O: removes the δ error by
 * construction; reported to confirm the channel. */
static tsc_status_t substitutions(rep_t *r, const tsc_policy_t *hp, const tsc_policy_t *lp, double base,
                                  double removed_frac, tsc_diag_head_t *dh) {
    tsc_stage_t fw[TSC_STAGE_COUNT + 3];
    int nfw = forward_candidates(r, lp, dh, fw);
    tsc_status_t st = subst_single(r, lp, fw, nfw, base, removed_frac, dh);
    if (st != TSC_OK) return st;
    dh->search_size = nfw ? 1 : 0;
    /* Pairs and triples only when B(lp) is at least one standard error from 0. Below that there is
     * no bias to attribute, only noise, and the search (28 + 56 replays for 8 candidates; at long T
     * each takes minutes) would only add chances for a set to pass by luck. The threshold is one SE,
     * not two: a set that removes a real bias also removes its spread, so its ratio can stand out
     * of the noise when B(lp) itself is at 1-2 SE (fp8-fa3's V on the planted dump). The singles
     * stay, for the closest set. */
    const int measured = isfinite(dh->bias_lp_se) && fabs(dh->bias_lp) >= dh->bias_lp_se;
    if (strcmp(dh->culprit, "none") == 0 && nfw > 1 && measured)
        for (int size = 2; size <= 3 && size <= nfw && strcmp(dh->culprit, "none") == 0; size++) {
            if ((st = subst_sets(r, lp, fw, nfw, size, base, removed_frac, dh)) != TSC_OK) return st;
            dh->search_size = size;
        }
    /* δ under hp, lp, lp with δ from an FP32 O, and lp with the paper's other fix, δ = rowsum(dP o P) */
    tsc_policy_t q[4] = {*hp, *lp, *lp, *lp};
    q[2].delta_src = TSC_DELTA_HP_O;
    q[3].delta_src = TSC_DELTA_DPP;
    double sv[4] = {0}, se[4] = {0};
    if ((st = delta_sums(r, q, 4, dh->layer, dh->head, sv, se)) != TSC_OK) return st;
    const double s_lp = sv[1];
    dh->delta_src_ratio = s_lp != 0.0 ? sv[2] / s_lp : NAN;
    dh->delta_src_se = se[2] / fabs(s_lp);
    dh->dpp_ratio = s_lp != 0.0 ? sv[3] / s_lp : NAN;
    dh->dpp_se = se[3] / fabs(s_lp);
    return TSC_OK;
}

/* What Algorithm 3 did under q on the tie rows of the examined step (advice.c). */
static tsc_status_t sweep_stats(rep_t *r, const tsc_policy_t *q, double ratio, tsc_diag_head_t *dh,
                                tsc_diag_beta_t *out) {
    adv_sweep_acc_t acc;
    adv_sweep_init(&acc, q);
    int si = 0;
    while (si < r->ns - 1 && r->steps[si] != dh->step) si++;
    tsc_attn_dims_t dims = rep_dims(r);
    for (int bi = 0; bi < r->nb && r->ns && r->use_mask; bi++) {
        tsc_status_t st = load(r, dh->step, dh->layer, dh->head, r->bs[bi]);
        if (st == TSC_OK)
            st = adv_sweep_replay(&acc, &dims, r->q, r->k, r->v, r->tie + ((size_t)si * r->nb + bi) * r->T);
        if (st != TSC_OK) return st;
    }
    adv_sweep_finish(&acc, q->stable.beta, ratio, out);
    return TSC_OK;
}

/* One β of the sweep (head_tasks): what Algorithm 3 did on the tie rows under pols[i]. */
typedef struct {
    const tsc_policy_t *pols;
    tsc_diag_head_t *dh;
} sweep_ctx_t;

static tsc_status_t sweep_task(rep_t *w, int i, void *ctx) {
    const sweep_ctx_t *c = ctx;
    return sweep_stats(w, &c->pols[i], c->dh->beta_ratio[i], c->dh, &c->dh->sweep[i]);
}

/* 5: mitigation: lp+stable, the beta sweep (with what each beta did), and the practitioner's
 * FP32 O (+fp32:pv,oacc,o). */
static tsc_status_t mitigation(rep_t *r, const tsc_policy_t *stable,
                               const tsc_diagnose_opts_t *opts, double base, tsc_diag_head_t *dh) {
    /* the replays of B first, shared among the helpers: lp+stable, each β, FP32 O */
    tsc_policy_t q[TSC_DIAG_MAX_BETAS + 2];
    double sv[TSC_DIAG_MAX_BETAS + 2], se[TSC_DIAG_MAX_BETAS + 2];
    int nb = opts->n_betas < TSC_DIAG_MAX_BETAS ? opts->n_betas : TSC_DIAG_MAX_BETAS;
    q[0] = *stable;
    for (int bi = 0; bi < nb; bi++) {
        q[1 + bi] = *stable;
        q[1 + bi].stable.beta = opts->betas[bi];
    }
    q[1 + nb] = *r->lp;
    tsc_policy_stage_set(&q[1 + nb], TSC_STAGE_PV, TSC_FMT_FP32);
    tsc_policy_stage_set(&q[1 + nb], TSC_STAGE_OACC, TSC_FMT_FP32);
    tsc_policy_stage_set(&q[1 + nb], TSC_STAGE_O, TSC_FMT_FP32);
    tsc_status_t st = bias_many(r, q, nb + 2, dh->layer, dh->head, sv, se);
    if (st != TSC_OK) return st;
    dh->stable_ratio = sv[0] / base;
    dh->stable_se = se[0] / fabs(base);
    for (int bi = 0; bi < nb; bi++) dh->beta_ratio[bi] = sv[1 + bi] / base;
    sweep_ctx_t c = {q + 1, dh};
    if ((st = head_tasks(r, nb, sweep_task, &c)) != TSC_OK) return st;
    for (int bi = 0; bi < nb; bi++) dh->sweep[bi].ratio_se = se[1 + bi] / fabs(base);
    dh->fp32o_ratio = sv[1 + nb] / base;
    dh->fp32o_se = se[1 + nb] / fabs(base);
    return TSC_OK;
}

/* 3: the verdict, from the δ bias test and the similarity of the rank-1 directions. */
static void verdict(const tsc_analysis_t *a, tsc_diag_head_t *dh) {
    const tsc_head_result_t *rec = NULL;
    for (size_t i = 0; i < a->n_heads; i++)
        if (a->heads[i].layer == dh->layer && a->heads[i].head == dh->head && a->heads[i].step == dh->step)
            rec = &a->heads[i];
    dh->delta_p = rec ? rec->delta_err.p_sign : NAN;
    dh->mean_cos = rec ? rec->rank1_mean_cos : NAN;
    dh->top_energy = rec ? rec->rank1_top_energy : NAN;
    int biased = dh->flagged || dh->delta_biased;
    /* Similar directions (docs/MECHANISM.md §4 (3)): over all tokens, the signed rank-1 terms add up to at
     * least TSC_DIAG_ACCUM_GAIN times what the same terms give with independent random signs
     * (gain^2 - 1 is the energy-weighted sum of their pairwise cosines); or, among the N largest
     * terms, they are nearly parallel, or one direction holds more energy than all others together
     * AND the accumulated error lies mostly along it. */
    double proj = rec ? rec->rank1_proj_share : NAN;
    int similar = (isfinite(dh->accum_gain) && dh->accum_gain >= TSC_DIAG_ACCUM_GAIN) ||
                  (isfinite(dh->mean_cos) && dh->mean_cos >= 0.9) ||
                  (isfinite(dh->top_energy) && dh->top_energy >= 0.5 && isfinite(proj) && proj >= 0.8);
    if (!biased) snprintf(dh->verdict, sizeof dh->verdict, "not biased");
    else if (rec && rec->has_x) snprintf(dh->verdict, sizeof dh->verdict, similar ? "accumulates" : "biased");
    else snprintf(dh->verdict, sizeof dh->verdict, "biased (no x)");
}

/* The policies one examination replays. */
typedef struct {
    const tsc_policy_t *hp, *lp, *stable;
    tsc_format_t out_fmt;
} diag_pols_t;

/* Steps 2-5 for one at-risk head (see tsc_diagnose.h). */
static tsc_status_t examine(rep_t *r, const tsc_analysis_t *a, const diag_pols_t *P, const tsc_diagnose_opts_t *opts,
                            tsc_diag_head_t *dh) {
    tsc_status_t st;
    if ((st = head_setup(r, a, dh)) != TSC_OK || (st = measure_lp(r, P->hp, P->lp, opts->max_steps, dh)) != TSC_OK)
        return st;
    double base = dh->bias_lp != 0.0 ? dh->bias_lp : 1.0;
    if ((st = substitutions(r, P->hp, P->lp, base, opts->removed_frac, dh)) != TSC_OK) return st;
    if ((st = mitigation(r, P->stable, opts, base, dh)) != TSC_OK) return st;
    verdict(a, dh);
    /* 4. the bit level at the examined step */
    double evbest = 0.0;
    dh->ev_found = 0;
    dh->ev_rows = dh->ev_rows_of = 0;
    for (int bi = 0; bi < r->nb && r->ns; bi++) {
        int si = 0;
        while (si < r->ns - 1 && r->steps[si] != dh->step) si++;
        const uint8_t *rows = r->use_mask ? r->tie + ((size_t)si * r->nb + bi) * r->T : NULL;
        if ((st = find_event(r, P->lp, P->out_fmt, dh->step, dh->layer, dh->head, r->bs[bi], rows, dh, &evbest)) !=
            TSC_OK)
            return st;
    }
    adv_recommend(dh, opts->removed_frac);
    return TSC_OK;
}

/* The at-risk (layer, head)s: flagged (pooled over steps), or δ-biased in some step; by risk. */
static tsc_status_t at_risk(tsc_diagnosis_t *dg) {
    const tsc_analysis_t *a = dg->an;
    dg->heads = calloc(a->n_heads ? a->n_heads : 1, sizeof *dg->heads);
    if (!dg->heads) return tsc_error_set(TSC_ERR_NOMEM, "diagnose: no memory");
    for (size_t i = 0; i < a->n_heads; i++) {
        const tsc_head_result_t *x = &a->heads[i];
        if (x->skipped || !(x->flagged || x->delta_biased)) continue;
        size_t k = 0;
        while (k < dg->n && !(dg->heads[k].layer == x->layer && dg->heads[k].head == x->head)) k++;
        tsc_diag_head_t *dh = &dg->heads[k];
        if (k == dg->n) {
            dg->n++;
            memset(dh, 0, sizeof *dh);
            dh->layer = x->layer;
            dh->head = x->head;
            dh->step = x->step;
            dh->culprit_ratio = dh->stable_ratio = dh->delta_src_ratio = dh->dpp_ratio = dh->fp32o_ratio = NAN;
            dh->nearest_ratio = dh->nearest_se = dh->culprit_se = dh->bias_lp_se = NAN;
            dh->feature_mean_ulp = dh->accum_gain = NAN;
            dh->top_feature = -1;
            for (int b = 0; b < TSC_DIAG_MAX_BETAS; b++) dh->beta_ratio[b] = NAN;
            snprintf(dh->culprit, sizeof dh->culprit, "none");
            snprintf(dh->nearest, sizeof dh->nearest, "none");
        }
        dh->flagged |= x->flagged;
        dh->delta_biased |= x->delta_biased;
    }
    for (size_t k = 0; k < dg->n; k++) {
        tsc_diag_head_t *dh = &dg->heads[k];
        const tsc_head_pooled_t *q = tsc_analysis_pooled(a, dh->layer, dh->head);
        if (q) /* the analysis' pooled numbers, so that every page prints the same ones */
            dh->delta_cumsum = q->delta_cumsum, dh->top_feature = q->top_feature,
            dh->feature_mean_ulp = q->top_feature_mean_ulp, dh->accum_gain = q->accum_gain;
        dh->risk = fabs(dh->delta_cumsum);
    }
    if (dg->n > 1) qsort(dg->heads, dg->n, sizeof *dg->heads, by_risk);
    return TSC_OK;
}

/* One thread's replay context. */
static tsc_status_t rep_init(rep_t *r, tsc_dump_t *d, const tsc_analysis_t *a, const tsc_policy_t *lp,
                             const tsc_select_set_t *batches) {
    const tsc_dump_meta_t *m = tsc_dump_meta(d);
    r->d = d;
    r->m = m;
    r->T = m->seq_len, r->D = m->head_dim, r->H = m->n_head, r->Hkv = m->n_kv_head;
    r->lp = lp;
    r->bs = malloc((size_t)(m->batch > 0 ? m->batch : 1) * sizeof *r->bs);
    r->feats = malloc((size_t)(r->D > 0 ? r->D : 1) * sizeof *r->feats);
    if (!r->bs || !r->feats) return tsc_error_set(TSC_ERR_NOMEM, "diagnose: no memory");
    for (int b = 0; b < m->batch; b++)
        if (tsc_select_set_has(batches, b)) r->bs[r->nb++] = b;
    size_t TD = (size_t)r->T * r->D;
    float **bufs[] = {&r->q, &r->k, &r->v, &r->dO, &r->o};
    int bad = 0;
    for (size_t i = 0; i < 5; i++)
        if (!(*bufs[i] = malloc(TD * sizeof(float)))) bad = 1;
    r->lse = malloc((size_t)r->T * sizeof(float));
    r->dl = malloc((size_t)r->T * sizeof(float));
    r->steps = malloc((size_t)(a->n_steps ? a->n_steps : 1) * sizeof(long long));
    if (bad || !r->lse || !r->dl || !r->steps) return tsc_error_set(TSC_ERR_NOMEM, "diagnose: no memory");
    return tsc_attn_trace_init_rows(&r->tr, r->T, r->D, lp->block_k, TSC_TRACE_TILES, TSC_ATTN_ROW_GROUP,
                                    tie_block, r);
}

static void rep_free(rep_t *r) {
    void *ps[] = {r->bs, r->feats, r->q, r->k, r->v, r->dO, r->o, r->lse, r->dl, r->steps,
                  r->ohp, r->dof, r->bstep, r->bstep_sq, r->bstep_n, r->tie, r->cache, r->c_step, r->c_b, r->memo_pol, r->memo_val};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
    tsc_attn_trace_free(&r->tr);
}

/* The first max_heads at-risk heads examined in parallel, one replay context per thread; the dump
 * handle is shared and its reads take the library's HDF5 lock (serial HDF5). Under a communicator
 * of several processes head k is examined by process k mod size and the records go to rank 0 (a
 * record is the same whoever computes it); each process's failures travel with its records, so
 * every process reaches the gather and rank 0 reports the first failing head, as one process does. */
static tsc_status_t examine_all(tsc_diagnosis_t *dg, const char *dump_path, const diag_pols_t *P,
                                const tsc_diagnose_opts_t *opts, const tsc_comm_t *c) {
    const tsc_analysis_t *a = dg->an;
    tsc_dump_t *d = NULL;
    int nthr = 1;
#ifdef _OPENMP
    nthr = omp_get_max_threads();
#endif
    size_t n_exam = dg->n < (size_t)(opts->max_heads > 0 ? opts->max_heads : 0) ? dg->n : (size_t)opts->max_heads;
    size_t n_mine = 0;
    for (size_t k = 0; k < n_exam; k++) n_mine += (int)(k % (size_t)c->size) == c->rank;
    int total = nthr;
    if ((size_t)nthr > n_mine) nthr = (int)(n_mine ? n_mine : 1);
    /* one head and spare threads (a long context examined alone): they replay its substitution sets */
    int n_help = nthr == 1 && n_mine == 1 ? total - 1 : 0;
    rep_t *rs = calloc((size_t)(nthr + n_help), sizeof *rs);
    tsc_status_t *hst = calloc(dg->n ? dg->n : 1, sizeof *hst);
    char (*hmsg)[512] = calloc(dg->n ? dg->n : 1, sizeof *hmsg);
    if (!rs || !hst || !hmsg) {
        free(rs), free(hst), free(hmsg);
        return tsc_error_set(TSC_ERR_NOMEM, "diagnose: no memory");
    }
    tsc_status_t st = n_mine ? tsc_dump_open(&d, dump_path) : TSC_OK;
    /* per thread: q, k, v, dO, O of one head, its row vectors, two row-window traces (a group of
     * rows of S, P-bar and tile numbers) and the input cache: O(T·D), never T x T */
    if (st == TSC_OK && d) {
        const tsc_dump_meta_t *m = tsc_dump_meta(d);
        uint64_t T = (uint64_t)m->seq_len, per = 5 * T * m->head_dim * sizeof(float) + 16 * T +
                                                 TSC_ATTN_ROW_GROUP * 2 * T * 2 * sizeof(double) + DIAG_CACHE_BYTES;
        st = tsc_mem_check((uint64_t)(nthr + n_help) * per, "diagnose: the per-thread replay buffers");
        for (int t = 0; t < nthr + n_help && st == TSC_OK; t++)
            st = rep_init(&rs[t], d, a, P->lp, &opts->an.sel.batches);
        rs[0].help = rs + nthr, rs[0].n_help = n_help;
    }
    long long n_done = 0;
    if (c->rank == 0) tsc_progress_begin(opts->an.progress, "at-risk heads examined", (long long)n_exam);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthr)
    for (size_t k = 0; k < dg->n; k++) {
        tsc_diag_head_t *dh = &dg->heads[k];
        if (k >= n_exam) {
            snprintf(dh->verdict, sizeof dh->verdict, "not examined");
            continue;
        }
        if ((int)(k % (size_t)c->size) != c->rank) continue;
        if ((hst[k] = st) != TSC_OK) { /* this process could not start: its heads carry why */
            snprintf(hmsg[k], sizeof hmsg[k], "%s", tsc_error_last());
            continue;
        }
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        hst[k] = examine(&rs[tid], a, P, opts, dh);
        if (hst[k] != TSC_OK) snprintf(hmsg[k], sizeof hmsg[k], "%s", tsc_error_last());
#pragma omp critical(tsc_diagnose_progress)
        tsc_progress_tick(opts->an.progress, ++n_done);
    }
    for (int t = 0; t < nthr + n_help; t++) rep_free(&rs[t]);
    free(rs);
    tsc_dump_close(d);
    st = TSC_OK;
    if (c->size > 1) { /* the records to rank 0: [status, message, head] per head of this process */
        size_t rec = sizeof *hst + sizeof *hmsg + sizeof *dg->heads, at = 0;
        unsigned char *buf = malloc(n_mine * rec + 1), *all = NULL;
        size_t *lens = calloc((size_t)c->size, sizeof *lens);
        if (!buf || !lens) st = tsc_error_set(TSC_ERR_NOMEM, "diagnose: no memory");
        for (size_t k = 0; buf && k < n_exam; k++) {
            if ((int)(k % (size_t)c->size) != c->rank) continue;
            memcpy(buf + at, &hst[k], sizeof *hst), at += sizeof *hst;
            memcpy(buf + at, hmsg[k], sizeof *hmsg), at += sizeof *hmsg;
            memcpy(buf + at, &dg->heads[k], sizeof *dg->heads), at += sizeof *dg->heads;
        }
        /* every process gathers, even one out of memory (it sends nothing, and says so below) */
        tsc_status_t gst = tsc_comm_gather(c, 0, buf, buf ? at : 0, (void **)&all, lens);
        if (st == TSC_OK) st = gst;
        if (st == TSC_OK && c->rank == 0) {
            const unsigned char *from = all;
            for (int r = 1; r < c->size; r++) {
                from += lens[r - 1];
                size_t got = 0;
                for (size_t k = (size_t)r; k < n_exam; k += (size_t)c->size, got += rec) {
                    if (got + rec > lens[r]) {
                        st = tsc_error_set(TSC_ERR_INTERNAL, "diagnose: process %d sent %zu bytes of records", r, lens[r]);
                        break;
                    }
                    memcpy(&hst[k], from + got, sizeof *hst);
                    memcpy(hmsg[k], from + got + sizeof *hst, sizeof *hmsg);
                    memcpy(&dg->heads[k], from + got + sizeof *hst + sizeof *hmsg, sizeof *dg->heads);
                }
            }
        }
        free(buf), free(all), free(lens);
    }
    if (c->rank == 0)
        for (size_t k = 0; k < n_exam && st == TSC_OK; k++)
            if (hst[k] != TSC_OK) st = tsc_error_set(hst[k], "%s", hmsg[k]);
    free(hst), free(hmsg);
    return st;
}

/* The analysis results the examination reads (the head records, the feature flags, the steps, the
 * pooled heads, the policies), from rank 0 to the other processes, which get them as a partial tsc_analysis_t. */
static tsc_status_t share_analysis(const tsc_comm_t *c, tsc_analysis_t **ap) {
    typedef struct {
        uint64_t n_heads, n_steps, D, n_pooled;
        char hp[TSC_POLICY_STR_MAX], lp[TSC_POLICY_STR_MAX];
    } hdr_t;
    tsc_analysis_t *a = *ap;
    void *buf = NULL;
    size_t n = 0;
    if (c->rank == 0) {
        hdr_t h = {a->n_heads, (uint64_t)a->n_steps, (uint64_t)a->D, a->n_pooled, "", ""};
        memcpy(h.hp, a->hp, sizeof h.hp), memcpy(h.lp, a->lp, sizeof h.lp);
        size_t nh = a->n_heads * sizeof *a->heads, nf = a->n_heads * (size_t)a->D + 1, ns = (size_t)a->n_steps * sizeof *a->steps,
               np = a->n_pooled * sizeof *a->pooled;
        n = sizeof h + nh + nf + ns + np;
        if (!(buf = malloc(n))) return tsc_error_set(TSC_ERR_NOMEM, "diagnose: no memory");
        unsigned char *p = buf;
        memcpy(p, &h, sizeof h), memcpy(p + sizeof h, a->heads, nh), memcpy(p + sizeof h + nh, a->feature_flags, nf);
        memcpy(p + sizeof h + nh + nf, a->steps, ns);
        if (np) memcpy(p + sizeof h + nh + nf + ns, a->pooled, np);
    }
    tsc_status_t st = tsc_comm_bcast_alloc(c, 0, &buf, &n);
    if (st == TSC_OK && c->rank != 0) {
        hdr_t h;
        const unsigned char *p = buf;
        memcpy(&h, p, sizeof h);
        size_t nh = h.n_heads * sizeof *a->heads, nf = h.n_heads * h.D + 1, ns = h.n_steps * sizeof(long long),
               np = h.n_pooled * sizeof *a->pooled;
        if (!(a = *ap = calloc(1, sizeof *a)) || !(a->heads = malloc(nh ? nh : 1)) || !(a->feature_flags = malloc(nf)) ||
            !(a->steps = malloc(ns ? ns : 1)) || !(a->pooled = malloc(np ? np : 1)))
            st = tsc_error_set(TSC_ERR_NOMEM, "diagnose: no memory");
        else {
            a->n_heads = h.n_heads, a->n_steps = (int)h.n_steps, a->D = (int)h.D;
            memcpy(a->hp, h.hp, sizeof a->hp), memcpy(a->lp, h.lp, sizeof a->lp);
            memcpy(a->heads, p + sizeof h, nh), memcpy(a->feature_flags, p + sizeof h + nh, nf);
            memcpy(a->steps, p + sizeof h + nh + nf, ns);
            a->n_pooled = h.n_pooled;
            if (np) memcpy(a->pooled, p + sizeof h + nh + nf + ns, np);
        }
    }
    free(buf);
    return st;
}

/* The consistency check of the first selected step; a dump it cannot check (no o) leaves a note, not an error:
 * the diagnosis replays and does not need o. Collective on the analysis' processes (its heads spread over
 * them, rank 0 gathers); every process notes the same failure. */
static void run_check(tsc_diagnosis_t *dg, const char *dump_path, const tsc_diagnose_opts_t *opts) {
    tsc_check_opts_t co;
    tsc_check_opts_init(&co);
    co.dump_path = dump_path;
    co.sel = opts->an.sel;
    co.first_step_only = 1;
    co.progress = opts->an.progress;
    co.comm = opts->an.comm;
    if (tsc_check_run(&co, &dg->check) != TSC_OK) {
        snprintf(dg->check_note, sizeof dg->check_note, "%s", tsc_error_last());
        tsc_error_clear();
    }
}

/* The fit of lp (the policy the diagnosis replays, tiles as it uses them) on the first selected step.
 * A dump without o, or a fit that cannot run, is noted, never an error of the diagnosis. */
static void check_fit(tsc_diagnosis_t *dg, const char *dump_path, const tsc_diagnose_opts_t *opts) {
    if (dg->an->lp_fit_ok) { /* taken by the analysis from its own lp replays: no replay again */
        dg->fit_checked = 1;
        dg->fit = dg->an->lp_fit_o;
        dg->fit_step = dg->an->lp_fit_step;
        return;
    }
    const char *pol[1] = {dg->an->lp};
    tsc_fit_opts_t fo;
    tsc_fit_opts_init(&fo);
    fo.dump_path = dump_path;
    fo.policies = pol;
    fo.n_policies = 1;
    fo.sel = opts->an.sel;
    fo.keep_tiles = 1;
    fo.progress = opts->an.progress;
    tsc_fit_t *f = NULL;
    tsc_status_t st = tsc_fit_run(&fo, &f);
    dg->fit_checked = st == TSC_OK;
    if (st == TSC_OK) {
        dg->fit = f->policies[0].t[TSC_FIT_O];
        dg->fit_step = f->steps[0];
    } else {
        snprintf(dg->fit_note, sizeof dg->fit_note, "%s", tsc_error_last());
        tsc_error_clear();
    }
    tsc_fit_free(f);
}

tsc_status_t tsc_diagnose_run(const char *dump_path, const char *out_dir, const tsc_diagnose_opts_t *opts,
                              tsc_diagnosis_t **out) {
    *out = NULL;
    if (opts->n_betas < 0 || opts->n_betas > TSC_DIAG_MAX_BETAS)
        return tsc_error_set(opts->n_betas < 0 ? TSC_ERR_ARG : TSC_ERR_UNSUPPORTED,
                             "diagnose: %d betas; the sweep holds at most TSC_DIAG_MAX_BETAS = %d", opts->n_betas,
                             TSC_DIAG_MAX_BETAS);
    tsc_diagnosis_t *dg = calloc(1, sizeof *dg);
    if (!dg) return tsc_error_set(TSC_ERR_NOMEM, "diagnose: no memory");
    tsc_status_t st = tsc_analysis_run(dump_path, out_dir, &opts->an, &dg->an);
    if (st != TSC_OK) {
        free(dg);
        return st;
    }
    const tsc_comm_t *c = tsc_comm_or_serial(opts->an.comm);
    if (c->size > 1 && (st = tsc_comm_agree(c, share_analysis(c, &dg->an))) != TSC_OK) {
        tsc_diagnose_free(dg);
        return st;
    }
    tsc_analysis_t *a = dg->an;
    dg->n_betas = opts->n_betas;
    memcpy(dg->betas, opts->betas, sizeof dg->betas);
    dg->removed_frac = opts->removed_frac;
    tsc_policy_t hp, lp;
    /* the analysis' canonical strings of policies it ran */
    TSC_INVARIANT(tsc_policy_parse(a->hp, &hp) == TSC_OK);
    TSC_INVARIANT(tsc_policy_parse(a->lp, &lp) == TSC_OK);
    /* the fix acts on FlashAttention's running max: a materialized-softmax lp (eager, SDPA math) is fixed in the
     * online form of the same kernel, which the policy string then says (+online) */
    tsc_policy_t stable = lp;
    if (stable.softmax == TSC_SOFTMAX_MATERIALIZED) stable.softmax = TSC_SOFTMAX_ONLINE;
    stable.stable.enabled = 1;
    stable.stable.beta = 2.0;
    stable.stable.eps = opts->eps;
    if (stable.stable.gap <= 0) stable.stable.gap = 1.0;
    if ((st = tsc_policy_format(&stable, dg->stable_policy, sizeof dg->stable_policy)) != TSC_OK) {
        tsc_diagnose_free(dg);
        return tsc_error_wrap(st, "diagnose: the stabilised lp (eps %g): ", opts->eps);
    }
    diag_pols_t P = {&hp, &lp, &stable,
                     tsc_format_mant_bits(lp.fmt[TSC_STAGE_PV]) < 23 ? lp.fmt[TSC_STAGE_PV] : lp.fmt[TSC_STAGE_O]};
    /* every process: the at-risk heads (from the head records), its share of their examination */
    st = tsc_comm_agree(c, at_risk(dg));
    if (st == TSC_OK) st = tsc_comm_agree(c, examine_all(dg, dump_path, &P, opts, c));
    if (st == TSC_OK) run_check(dg, dump_path, opts); /* collective */
    if (st == TSC_OK && c->rank != 0) { /* rank 0 has the records: this process's part is done */
        tsc_diagnose_free(dg);
        return TSC_OK;
    }
    if (st == TSC_OK) {
        check_fit(dg, dump_path, opts);
        adv_sweep_explanation(dg, dg->sweep_explanation, sizeof dg->sweep_explanation);
    }
    if (st != TSC_OK) {
        tsc_diagnose_free(dg);
        return st == TSC_ERR_NOMEM ? st : tsc_error_wrap(st, "diagnose %s: ", dump_path);
    }
    *out = dg;
    return TSC_OK;
}

/* A closest set names its stages in the run's tally when it removes at least half of the bias. */
#define DIAG_CLOSEST_NAMES 0.5

/* Adds each stage of the set "a+b+c" to the tally (culprit: 1, closest: 0). */
static void steps_add(tsc_diag_steps_t *o, const char *set, int culprit) {
    char tmp[48];
    snprintf(tmp, sizeof tmp, "%s", set);
    for (char *save = NULL, *t = strtok_r(tmp, "+", &save); t; t = strtok_r(NULL, "+", &save)) {
        int k = 0;
        while (k < o->n_stages && strcmp(o->named[k].stage, t) != 0) k++;
        if (k == o->n_stages) {
            if (k == (int)(sizeof o->named / sizeof o->named[0])) continue;
            snprintf(o->named[k].stage, sizeof o->named[k].stage, "%s", t);
            o->n_stages++;
        }
        if (culprit) o->named[k].culprit++;
        else o->named[k].closest++;
    }
}

/* Rank of a stage name in the policy's stage order (inputs q, k, v are stages too). */
static int stage_rank(const char *name) {
    tsc_stage_t s;
    return tsc_stage_parse(name, &s) == TSC_OK ? (int)s : TSC_STAGE_COUNT;
}

/* Most named first, then most often as a culprit, then in stage order. */
static int by_named(const void *pa, const void *pb) {
    const tsc_diag_named_t *a = pa, *b = pb;
    int ta = a->culprit + a->closest, tb = b->culprit + b->closest;
    if (ta != tb) return tb - ta;
    if (a->culprit != b->culprit) return b->culprit - a->culprit;
    return stage_rank(a->stage) - stage_rank(b->stage);
}

void tsc_diagnose_steps(const tsc_diagnosis_t *d, tsc_diag_steps_t *o) {
    memset(o, 0, sizeof *o);
    for (size_t i = 0; i < d->n; i++) {
        const tsc_diag_head_t *h = &d->heads[i];
        if (h->n_subst == 0) continue; /* not examined */
        o->n_heads++;
        if (strcmp(h->culprit, "none") != 0) steps_add(o, h->culprit, 1);
        else if (strcmp(h->nearest, "none") != 0 && fabs(h->nearest_ratio) <= DIAG_CLOSEST_NAMES)
            steps_add(o, h->nearest, 0);
    }
    qsort(o->named, (size_t)o->n_stages, sizeof o->named[0], by_named);
    /* the majority stages, joined in the policy's stage order */
    size_t w = 0;
    for (int r = 0; r <= TSC_STAGE_COUNT; r++)
        for (int k = 0; k < o->n_stages; k++)
            if (stage_rank(o->named[k].stage) == r && 2 * (o->named[k].culprit + o->named[k].closest) >= o->n_heads &&
                o->n_heads > 0 && w < sizeof o->biased_step)
                w += (size_t)snprintf(o->biased_step + w, sizeof o->biased_step - w, "%s%s", w ? "+" : "",
                                      o->named[k].stage);
    if (!w) snprintf(o->biased_step, sizeof o->biased_step, "none");
}

const char *tsc_diagnose_steps_line(const tsc_diagnosis_t *d, char *buf, size_t size) {
    tsc_diag_steps_t o;
    tsc_diagnose_steps(d, &o);
    size_t w = (size_t)snprintf(buf, size, "biased step over the %d examined head%s: %s", o.n_heads,
                                o.n_heads == 1 ? "" : "s", o.biased_step);
    for (int k = 0; k < o.n_stages && w < size; k++)
        w += (size_t)snprintf(buf + w, size - w, "%s%s %d/%d",
                              k ? ", " : " (stages named by substitution, in the culprit set / in the closest set "
                                         "when none removes the bias and it leaves at most half: ",
                              o.named[k].stage, o.named[k].culprit, o.named[k].closest);
    if (o.n_stages && w < size) snprintf(buf + w, size - w, ")");
    return buf;
}

const char *tsc_diagnose_step_text(const tsc_diag_head_t *h, char *buf, size_t size) {
    if (strcmp(h->culprit, "none") != 0)
        snprintf(buf, size, "%s (FP32 there leaves %+.0f%% +- %.0f%% of the bias)", h->culprit,
                 100 * h->culprit_ratio, 100 * h->culprit_se);
    else if (strcmp(h->nearest, "none") != 0 && isfinite(h->nearest_ratio) && h->search_size == 1 &&
             !(fabs(h->bias_lp) >= h->bias_lp_se))
        snprintf(buf, size,
                 "not isolated: B(lp) %+.3g is within one SE (%.3g) of 0, noise, so only single stages were "
                 "replayed (the closest, %s in FP32, leaves %+.0f%% +- %.0f%%)",
                 h->bias_lp, h->bias_lp_se, h->nearest, 100 * h->nearest_ratio, 100 * h->nearest_se);
    else if (strcmp(h->nearest, "none") != 0 && isfinite(h->nearest_ratio))
        snprintf(buf, size, "not isolated (the closest, %s in FP32, leaves %+.0f%% +- %.0f%%)", h->nearest,
                 100 * h->nearest_ratio, 100 * h->nearest_se);
    else
        snprintf(buf, size, "not isolated (no stage replayed)");
    return buf;
}

const char *tsc_diagnose_line(const tsc_diagnosis_t *d, size_t i, char *buf, size_t size) {
    const tsc_diag_head_t *h = &d->heads[i];
    if (strcmp(h->verdict, "not examined") == 0) {
        snprintf(buf, size,
                 "layer %d head %d: not examined (beyond --max-heads); accumulated sum_T(delta_lp-delta_hp) %+.3g",
                 h->layer, h->head, h->delta_cumsum);
        return buf;
    }
    char feats[128] = "all", gain[48] = "";
    if (isfinite(h->accum_gain)) snprintf(gain, sizeof gain, " (accumulation gain %.2f)", h->accum_gain);
    if (h->n_features > 0) {
        size_t n = 0;
        for (int f = 0; f < h->n_features && n < sizeof feats - 8; f++)
            n += (size_t)snprintf(feats + n, sizeof feats - n, "%s%d", f ? "," : "", h->features[f]);
        if (h->n_features_summed > h->n_features && n < sizeof feats - 24)
            snprintf(feats + n, sizeof feats - n, ",... (%d in all)", h->n_features_summed);
    }
    char step[128];
    tsc_diagnose_step_text(h, step, sizeof step);
    snprintf(buf, size,
             "layer %d head %d: evidence: features %s biased (B %+.3g over %d steps), accumulated "
             "sum_T(delta_lp-delta_hp) %+.3g; biased step: %s; verdict: %s%s; recommendation: %s",
             h->layer, h->head, feats, h->bias_lp, h->n_steps, h->delta_cumsum, step, h->verdict, gain,
             h->recommendation[0] ? h->recommendation : "-");
    return buf;
}

const char *tsc_diagnose_event_text(const tsc_diagnosis_t *d, size_t i, char *buf, size_t size) {
    const tsc_diag_head_t *h = &d->heads[i];
    if (!h->ev_found) {
        snprintf(buf, size, "%s", "");
        return buf;
    }
    int keep = 7;
    tsc_format_t f;
    if (tsc_format_parse(h->ev_fmt, &f) == TSC_OK) keep = tsc_format_mant_bits(f);
    char b1[64], b2[64], b3[64], b4[64];
    tsc_accum_bits_str(h->ev_before, TSC_FMT_FP32, -1, b1, sizeof b1);
    tsc_accum_bits_str(h->ev_term, TSC_FMT_FP32, -1, b2, sizeof b2);
    tsc_accum_bits_str(h->ev_sum, TSC_FMT_FP32, keep, b3, sizeof b3);
    tsc_accum_bits_str((float)h->ev_rounded, TSC_FMT_FP32, -1, b4, sizeof b4);
    snprintf(buf, size,
             "  largest rounding event: layer %d head %d step %lld, batch %d row %d feature %d, key %d (P-bar %.9g, v %.9g)\n"
             "    running FP32 sum  %.17g  (%s)\n"
             "    + term P-bar*v    %.17g  (%s)\n"
             "    = FP32 sum        %.17g  (%s: kept | rounding bit | sticky)\n"
             "    rounded to %s    %.17g  (%s), error %.17g\n",
             h->layer, h->head, h->step, h->ev_b, h->ev_t, h->ev_i, h->ev_key, h->ev_pbar, h->ev_v, (double)h->ev_before,
             b1, (double)h->ev_term, b2, (double)h->ev_sum, b3, h->ev_fmt, h->ev_rounded, b4, h->ev_err);
    size_t w = strlen(buf);
    if (h->ev_rows < h->ev_rows_of && w < size)
        snprintf(buf + w, size - w, "    (searched in %lld of the %lld candidate rows, evenly spaced: the search is bounded "
                 "at 2^32 key-feature visits)\n", h->ev_rows, h->ev_rows_of);
    return buf;
}

/* key: [{stage, policy (when given), bias_ratio}, ...] */
static void stage_list(tsc_json_t *j, const char *key, int n, const char (*stage)[48],
                       const char (*policy)[TSC_POLICY_STR_MAX], const double *ratio, const double *se) {
    tsc_json_key(j, key);
    tsc_json_array_begin(j);
    for (int s = 0; s < n; s++) {
        tsc_json_object_begin(j);
        tsc_json_kv_string(j, "stage", stage[s]);
        if (policy) tsc_json_kv_string(j, "policy", policy[s]);
        tsc_json_kv_number(j, "bias_ratio", ratio[s]);
        if (se) tsc_json_kv_number(j, "bias_ratio_se", se[s]);
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
}

#define DH_F(m) TSC_JSON_FIELD(tsc_diag_head_t, m, #m)
static const tsc_json_field_t at_risk_fields[] = {DH_F(layer), DH_F(head), DH_F(step), DH_F(risk), DH_F(n_steps),
                                                  DH_F(n_steps_replayed), DH_F(n_tie_rows), DH_F(delta_cumsum),
                                                  DH_F(delta_p)};
static const tsc_json_field_t event_fields[] = {
    TSC_JSON_FIELD(tsc_diag_head_t, ev_b, "batch"), TSC_JSON_FIELD(tsc_diag_head_t, ev_t, "token"),
    TSC_JSON_FIELD(tsc_diag_head_t, ev_i, "feature"), TSC_JSON_FIELD(tsc_diag_head_t, ev_key, "key"),
    TSC_JSON_FIELD(tsc_diag_head_t, ev_pbar, "pbar"), TSC_JSON_FIELD(tsc_diag_head_t, ev_v, "v"),
    TSC_JSON_FIELD(tsc_diag_head_t, ev_before, "sum_before"), TSC_JSON_FIELD(tsc_diag_head_t, ev_term, "term"),
    TSC_JSON_FIELD(tsc_diag_head_t, ev_sum, "sum_fp32"), TSC_JSON_CHARS(tsc_diag_head_t, ev_fmt, "out_format"),
    TSC_JSON_FIELD(tsc_diag_head_t, ev_rounded, "rounded"), TSC_JSON_FIELD(tsc_diag_head_t, ev_err, "error")};

/* "fit": the fit of lp's replay (docs/FORMAT.md §3). */
static void fit_json(tsc_json_t *j, const tsc_diagnosis_t *d) {
    char sentence[TSC_POLICY_STR_MAX + 96];
    const double ident = d->fit_checked ? d->fit.identical : NAN;
    tsc_json_key(j, "fit");
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "policy", d->an->lp);
    tsc_json_kv_bool(j, "checked", d->fit_checked);
    if (d->fit_checked) {
        tsc_json_kv_int(j, "step", d->fit_step);
        tsc_json_kv_int(j, "n", d->fit.n);
        tsc_json_kv_number(j, "o_identical", d->fit.identical);
        tsc_json_kv_number(j, "o_within1", d->fit.within1);
        tsc_json_kv_number(j, "o_max_ulp", d->fit.max_ulp);
        tsc_json_kv_int(j, "o_n_nonfinite", d->fit.n_nonfinite);
    }
    tsc_json_kv_bool(j, "warning", !d->fit_checked || tsc_fit_warning(ident) != NULL);
    tsc_json_kv_string(j, "sentence", tsc_fit_sentence(d->an->lp, d->fit_checked, ident, sentence, sizeof sentence));
    tsc_json_kv_string(j, "note", d->fit_checked ? NULL : d->fit_note);
    tsc_json_object_end(j);
}

/* "beta_sweep": what each beta did (docs/FORMAT.md §3). beta, bias_ratio and in_studied_range come
 * from the sweep's settings, so a head that was not examined still lists them. */
static const tsc_json_field_t sweep_fields[] = {
    TSC_JSON_FIELD(tsc_diag_beta_t, ratio_se, "bias_ratio_se"), TSC_JSON_FIELD(tsc_diag_beta_t, n_rows, "n_tie_rows"),
    TSC_JSON_FIELD(tsc_diag_beta_t, frac_fix, "frac_fix"), TSC_JSON_FIELD(tsc_diag_beta_t, frac_guard, "frac_fallback"),
    TSC_JSON_FIELD(tsc_diag_beta_t, frac_split, "frac_split"), TSC_JSON_FIELD(tsc_diag_beta_t, frac_floor, "frac_floor"),
    TSC_JSON_FIELD(tsc_diag_beta_t, r_m_min, "r_m_min"), TSC_JSON_FIELD(tsc_diag_beta_t, r_m_max, "r_m_max"),
    TSC_JSON_FIELD(tsc_diag_beta_t, exparg_ulp, "exparg_ulp"), TSC_JSON_CHARS(tsc_diag_beta_t, what, "what")};

static void beta_sweep_json(tsc_json_t *j, const tsc_diagnosis_t *d, const tsc_diag_head_t *h) {
    tsc_json_key(j, "beta_sweep");
    tsc_json_array_begin(j);
    for (int b = 0; b < d->n_betas; b++) {
        tsc_json_object_begin(j);
        tsc_json_kv_number(j, "beta", d->betas[b]);
        tsc_json_kv_number(j, "bias_ratio", h->beta_ratio[b]);
        tsc_json_kv_bool(j, "in_studied_range", d->betas[b] >= ADV_BETA_LO && d->betas[b] <= ADV_BETA_HI);
        tsc_json_kv_fields(j, &h->sweep[b], sweep_fields, TSC_JSON_NFIELDS(sweep_fields));
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
}

/* "fixes": the practitioner's fixes in the order of preference (docs/FORMAT.md §3). */
static const tsc_json_field_t fix_fields[] = {
    TSC_JSON_CHARS(tsc_diag_fix_t, name, "fix"), TSC_JSON_CHARS(tsc_diag_fix_t, where, "where"),
    TSC_JSON_CHARS(tsc_diag_fix_t, modifier, "modifier"), TSC_JSON_FIELD(tsc_diag_fix_t, ratio, "bias_ratio"),
    TSC_JSON_FIELD(tsc_diag_fix_t, ratio_se, "bias_ratio_se"), TSC_JSON_BOOL(tsc_diag_fix_t, removes, "removes"),
    TSC_JSON_BOOL(tsc_diag_fix_t, recommended, "recommended")};

static void fixes_json(tsc_json_t *j, const tsc_diag_head_t *h) {
    tsc_json_key(j, "fixes");
    tsc_json_array_begin(j);
    for (int i = 0; i < h->n_fixes; i++) {
        tsc_json_object_begin(j);
        tsc_json_kv_fields(j, &h->fixes[i], fix_fields, TSC_JSON_NFIELDS(fix_fields));
        tsc_json_kv_string(j, "measure", h->fixes[i].metric); /* metric[8]: too short for TSC_JSON_CHARS */
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
}

static void diag_json(void *ctx, tsc_json_t *j) {
    const tsc_diagnosis_t *d = ctx;
    tsc_json_key(j, "diagnosis");
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "stable_policy", d->stable_policy);
    tsc_json_kv_numbers(j, "betas", d->betas, (size_t)d->n_betas);
    tsc_json_kv_number(j, "removed_frac", d->removed_frac);
    double range[2] = {ADV_BETA_LO, ADV_BETA_HI};
    tsc_json_kv_numbers(j, "beta_studied_range", range, 2);
    tsc_json_kv_string(j, "sweep_explanation", d->sweep_explanation);
    fit_json(j, d);
    tsc_json_key(j, "check");
    if (d->check) {
        tsc_check_json_summary(d->check, j);
    } else {
        tsc_json_object_begin(j);
        tsc_json_kv_bool(j, "checked", 0);
        tsc_json_kv_string(j, "note", d->check_note);
        tsc_json_object_end(j);
    }
    tsc_json_kv_int(j, "n_at_risk", (int64_t)d->n);
    tsc_diag_steps_t st;
    tsc_diagnose_steps(d, &st);
    tsc_json_kv_string(j, "biased_step", st.biased_step);
    tsc_json_key(j, "steps_named");
    tsc_json_array_begin(j);
    for (int k = 0; k < st.n_stages; k++) {
        tsc_json_object_begin(j);
        tsc_json_kv_string(j, "stage", st.named[k].stage);
        tsc_json_kv_int(j, "culprit", st.named[k].culprit);
        tsc_json_kv_int(j, "closest", st.named[k].closest);
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
    tsc_json_key(j, "at_risk");
    tsc_json_array_begin(j);
    for (size_t i = 0; i < d->n; i++) {
        const tsc_diag_head_t *h = &d->heads[i];
        tsc_json_object_begin(j);
        tsc_json_kv_int(j, "rank", (int64_t)i + 1);
        tsc_json_kv_fields(j, h, at_risk_fields, TSC_JSON_NFIELDS(at_risk_fields));
        int64_t fl[TSC_ANALYSIS_MAX_FLAGGED];
        for (int f = 0; f < h->n_features; f++) fl[f] = h->features[f];
        tsc_json_kv_ints(j, "features", fl, (size_t)h->n_features);
        tsc_json_kv_int(j, "top_feature", h->top_feature);
        tsc_json_kv_number(j, "feature_mean_ulp", h->feature_mean_ulp);
        tsc_json_kv_number(j, "bias_lp", h->bias_lp);
        tsc_json_kv_number(j, "bias_lp_se", h->bias_lp_se);
        stage_list(j, "substitutions", h->n_subst, h->subst_stage, h->subst_name, h->subst_ratio, h->subst_se);
        tsc_json_kv_string(j, "culprit", h->culprit);
        tsc_json_kv_number(j, "culprit_ratio", h->culprit_ratio);
        tsc_json_kv_number(j, "culprit_ratio_se", h->culprit_se);
        stage_list(j, "culprit_alternatives", h->n_alt, h->alt_stage, NULL, h->alt_ratio, NULL);
        tsc_json_kv_string(j, "nearest_set", h->nearest);
        tsc_json_kv_number(j, "nearest_ratio", h->nearest_ratio);
        tsc_json_kv_number(j, "nearest_ratio_se", h->nearest_se);
        tsc_json_kv_int(j, "search_size", h->search_size);
        tsc_json_kv_number(j, "delta_src_ratio", h->delta_src_ratio);
        tsc_json_kv_number(j, "stable_ratio", h->stable_ratio);
        tsc_json_kv_numbers(j, "beta_ratios", h->beta_ratio, (size_t)d->n_betas);
        tsc_json_kv_number(j, "accum_gain", h->accum_gain);
        tsc_json_kv_string(j, "verdict", h->verdict);
        tsc_json_kv_number(j, "dpp_delta_ratio", h->dpp_ratio);
        tsc_json_kv_number(j, "fp32_o_ratio", h->fp32o_ratio);
        beta_sweep_json(j, d, h);
        fixes_json(j, h);
        tsc_json_kv_string(j, "recommendation", h->recommendation);
        tsc_json_kv_string(j, "stage_note", h->stage_note);
        tsc_json_key(j, "event");
        tsc_json_object_begin(j);
        tsc_json_kv_bool(j, "found", h->ev_found);
        tsc_json_kv_int(j, "rows_searched", h->ev_rows);
        tsc_json_kv_int(j, "rows_candidates", h->ev_rows_of);
        if (h->ev_found) tsc_json_kv_fields(j, h, event_fields, TSC_JSON_NFIELDS(event_fields));
        tsc_json_object_end(j);
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
    tsc_json_object_end(j);
}

void tsc_diagnose_summary_json(const tsc_diagnosis_t *d, tsc_json_t *j) {
    tsc_analysis_summary_json_ex(d->an, j, diag_json, (void *)d);
}

tsc_status_t tsc_diagnose_write_summary(const tsc_diagnosis_t *d, const char *path) {
    return an_write_summary_ex(d->an, path, diag_json, (void *)d);
}
