/* explain.c: the bit-level explanation of an addition and of an accumulation Ō[T, I] in a dump
 * (tsc_explain.h). */
#include "tsc_explain.h"
#include "tsc_fit.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsc_attention.h"
#include "tsc_dump.h"
#include "tsc_select.h"

const char *tsc_explain_round_name(tsc_round_t m) {
    return m == TSC_ROUND_NEAREST_EVEN ? "nearest-even" : m == TSC_ROUND_TOWARD_ZERO ? "toward-zero" : "stochastic";
}

const char *tsc_explain_dir_key(tsc_accum_dir_t d) {
    return d == TSC_ACCUM_EXACT ? "exact" : d == TSC_ACCUM_AWAY ? "away" : "toward";
}

const char *tsc_explain_why(const tsc_accum_step_t *st) {
    if (!st->round_bit && !st->sticky) return "nothing discarded: exact";
    if (st->mode == TSC_ROUND_TOWARD_ZERO) return "toward zero: discarded bits dropped";
    if (st->mode == TSC_ROUND_STOCHASTIC)
        return st->dir == TSC_ACCUM_AWAY ? "stochastic: the draw fell below the discarded fraction, rounded up"
                                         : "stochastic: the draw fell above the discarded fraction, truncated";
    if (!st->round_bit) return "rounding bit 0: less than half an ULP, truncated";
    if (st->sticky) return "rounding bit 1, sticky bits non-zero: more than half an ULP, rounded up in magnitude";
    return st->dir == TSC_ACCUM_AWAY ? "rounding bit 1, sticky bits zero: an exact tie, rounded to even (up)"
                                     : "rounding bit 1, sticky bits zero: an exact tie, rounded to even (down)";
}

/* ------------------------------------------------------------------ explain add */

tsc_status_t tsc_explain_add(double a, double b, tsc_format_t acc, int have_to, tsc_format_t to, tsc_round_t mode,
                             uint64_t seed, tsc_explain_add_t *out) {
    if (!out) return tsc_error_set(TSC_ERR_ARG, "explain add: no result");
    memset(out, 0, sizeof *out);
    out->acc = acc;
    out->to = to;
    out->have_to = have_to;
    out->mode = mode;
    out->seed = seed;
    out->input[0] = a;
    out->input[1] = b;
    tsc_rng_t rng;
    tsc_rng_seed(&rng, seed);
    /* The operands enter the accumulator format first (nearest-even: they are inputs, not sums). */
    out->a = tsc_round(a, acc, TSC_ROUND_NEAREST_EVEN, NULL);
    out->b = tsc_round(b, acc, TSC_ROUND_NEAREST_EVEN, NULL);
    if (!isfinite(out->a) || !isfinite(out->b))
        return tsc_error_set(TSC_ERR_NONFINITE, "an operand overflows %s: A=%.17g B=%.17g", tsc_format_name(acc), a, b);
    tsc_accum_add2(out->a, out->b, acc, mode, &rng, &out->add);
    if (have_to) tsc_accum_round(out->add.result, to, mode, &rng, &out->round_to);
    return TSC_OK;
}

static void step_json(tsc_json_t *j, const char *key, const tsc_accum_step_t *st) {
    char bits[160], kept[160], hex[40];
    tsc_json_key(j, key);
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "format", tsc_format_name(st->fmt));
    tsc_json_kv_string(j, "round", tsc_explain_round_name(st->mode));
    tsc_json_kv_number(j, "exact", st->exact_hi);
    tsc_json_kv_number(j, "exact_lo", st->exact_lo);
    tsc_json_kv_int(j, "sum_exp", st->sum_exp == TSC_ACCUM_EXP_ZERO ? 0 : st->sum_exp);
    tsc_json_kv_int(j, "ulp_exp", st->ulp_exp);
    tsc_accum_step_bits_str(st, bits, sizeof bits);
    snprintf(kept, sizeof kept, "%s", bits);
    char *bar = strchr(kept, '|');
    if (bar) *bar = '\0';
    tsc_json_kv_string(j, "bits", bits);
    tsc_json_kv_string(j, "kept_bits", kept);
    tsc_json_kv_int(j, "kept_nbits", st->kept_nbits);
    tsc_json_kv_int(j, "round_bit", st->round_bit);
    tsc_json_kv_bool(j, "sticky", st->sticky);
    tsc_json_kv_int(j, "sticky_nbits", st->sticky_nbits);
    tsc_json_kv_number(j, "result", st->result);
    snprintf(hex, sizeof hex, "0x%0*" PRIx64, (int)(tsc_format_size(st->fmt) * 2), st->result_bits);
    tsc_json_kv_string(j, "result_bits", hex);
    tsc_json_kv_string(j, "direction", tsc_explain_dir_key(st->dir));
    tsc_json_kv_number(j, "error", st->error);
    tsc_json_kv_number(j, "error_ulps", st->error_ulps);
    tsc_json_object_end(j);
}

static void operand_json(tsc_json_t *j, const char *key, double input, double v, tsc_format_t acc, int exp) {
    char bits[160];
    tsc_json_key(j, key);
    tsc_json_object_begin(j);
    tsc_json_kv_number(j, "input", input);
    tsc_json_kv_number(j, "value", v);
    tsc_json_kv_string(j, "bits", tsc_accum_bits_str(v, acc, -1, bits, sizeof bits));
    tsc_json_kv_int(j, "exp", exp == TSC_ACCUM_EXP_ZERO ? 0 : exp);
    tsc_json_object_end(j);
}

void tsc_explain_add_json(const tsc_explain_add_t *e, tsc_json_t *j) {
    char bits[160];
    const int p_to = e->have_to ? tsc_format_mant_bits(e->to) : -1;
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "command", "explain add");
    tsc_json_kv_string(j, "acc", tsc_format_name(e->acc));
    tsc_json_kv_string(j, "to", e->have_to ? tsc_format_name(e->to) : NULL);
    tsc_json_kv_string(j, "round", tsc_explain_round_name(e->mode));
    tsc_json_kv_int(j, "seed", (int64_t)e->seed);
    operand_json(j, "a", e->input[0], e->a, e->acc, e->add.a_exp);
    operand_json(j, "b", e->input[1], e->b, e->acc, e->add.b_exp);
    tsc_json_kv_int(j, "align_shift", e->add.align_shift);
    tsc_json_kv_int(j, "carry_shift", e->add.carry_shift);
    tsc_json_kv_bool(j, "significand_overflow", e->add.carry_shift > 0);
    tsc_json_kv_string(j, "sum_bits", tsc_accum_bits_str(e->add.result, e->acc,
                                                          e->have_to && p_to < tsc_format_mant_bits(e->acc) ? p_to : -1,
                                                          bits, sizeof bits));
    step_json(j, "add", &e->add);
    if (e->have_to) step_json(j, "round_to", &e->round_to);
    tsc_json_key(j, "nonfinite_numbers");
    tsc_json_nonfinite_note(j);
    tsc_json_object_end(j);
}

/* ------------------------------------------------------------------ explain dump */

typedef struct {
    tsc_explain_event_t *ev;
    size_t n, cap;
    int oom;
} events_t;

static tsc_explain_event_t *ev_push(events_t *E, int key, int tile, const char *kind, double pbar, double v) {
    if (E->n == E->cap) {
        size_t cap = E->cap ? 2 * E->cap : 256;
        tsc_explain_event_t *p = realloc(E->ev, cap * sizeof *p);
        if (!p) {
            E->oom = 1;
            return NULL;
        }
        E->ev = p;
        E->cap = cap;
    }
    tsc_explain_event_t *e = &E->ev[E->n++];
    e->key = key;
    e->tile = tile;
    e->kind = kind;
    e->pbar = pbar;
    e->v = v;
    return e;
}

typedef struct {
    const tsc_policy_t *pol;
    int f64;                /* compute type FP64 (the policy has an FP64 stage) */
    events_t E;
} replay_t;

/* x rounded into stage s's format and mode; stochastic stages round to nearest here (their
 * streams are not replayed), which the result says. Recorded as an event of kind. */
static double stage_round(replay_t *R, double x, tsc_stage_t s, int key, int tile, const char *kind) {
    tsc_round_t mode = R->pol->mode[s] == TSC_ROUND_STOCHASTIC ? TSC_ROUND_NEAREST_EVEN : R->pol->mode[s];
    tsc_explain_event_t *e = ev_push(&R->E, key, tile, kind, NAN, NAN);
    return tsc_accum_round(x, R->pol->fmt[s], mode, NULL, e ? &e->st : NULL);
}

/* The compute type's rounding of an exact product or sum (FP32, or FP64 when f64). */
static double compute_round(const replay_t *R, double x) { return R->f64 ? x : (double)(float)x; }

/* fma(a, v, y) rounded once into the ACC format: a·v is exact in double for factors of at most
 * 26 significant bits (every format but fp64), so the model adds it exactly. */
static double fma_acc(replay_t *R, double y, double a, double v, int key, int tile, const char *kind) {
    tsc_stage_t s = TSC_STAGE_ACC;
    tsc_round_t mode = R->pol->mode[s] == TSC_ROUND_STOCHASTIC ? TSC_ROUND_NEAREST_EVEN : R->pol->mode[s];
    tsc_explain_event_t *e = ev_push(&R->E, key, tile, kind, a, v);
    if (R->f64) { /* the reference's fma in double; the trace is of the rounded product */
        double r = fma(a, v, y);
        if (e) tsc_accum_add2(y, a * v, R->pol->fmt[s], mode, NULL, &e->st);
        return r;
    }
    return tsc_accum_add2(y, a * v, R->pol->fmt[s], mode, NULL, e ? &e->st : NULL);
}

static int cmp_err(const void *x, const void *y) {
    const tsc_explain_event_t *a = x, *b = y;
    double ea = isnan(a->st.error) ? -1 : fabs(a->st.error), eb = isnan(b->st.error) ? -1 : fabs(b->st.error);
    if (ea != eb) return ea < eb ? 1 : -1;
    return a->key < b->key ? -1 : a->key > b->key;
}

/* One head's inputs and the reference run on it with its forward intermediates. */
typedef struct {
    int T, D, causal;
    float *v, *o_dump;
    double *o;
    tsc_attn_trace_t tr;
} head_t;

static void head_free(head_t *h) {
    free(h->v);
    free(h->o_dump);
    free(h->o);
    tsc_attn_trace_free(&h->tr);
}

/* The policy, the step and the indices of e, checked against the dump. */
static tsc_status_t resolve(tsc_dump_t *d, const tsc_explain_dump_opts_t *o, tsc_explain_dump_t *e) {
    const tsc_dump_meta_t *m = tsc_dump_meta(d);
    if (o->policy) e->policy = *o->policy;
    else {
        /* the rule every command follows (tsc_fit.h); a fit looks at the traced step and layer only */
        tsc_select_t sel;
        tsc_select_init(&sel);
        char spec[96];
        if (o->step >= 0) snprintf(spec, sizeof spec, "steps=%lld,layers=%d", o->step, o->layer);
        else snprintf(spec, sizeof spec, "layers=%d", o->layer);
        tsc_dump_policy_t dp;
        tsc_status_t st = tsc_select_parse(&sel, spec);
        if (st == TSC_OK) st = tsc_dump_policy(o->dump_path, m->policy, NULL, "--policy", &sel, NULL, &dp);
        if (st != TSC_OK) return st;
        e->policy = dp.policy;
        if (dp.origin != TSC_POLICY_RECORDED) snprintf(e->note, sizeof e->note, "%s", dp.source);
    }
    tsc_status_t fst = tsc_policy_format(&e->policy, e->policy_name, sizeof e->policy_name);
    if (fst != TSC_OK) return tsc_error_wrap(fst, "%s: the policy: ", o->dump_path); /* a caller's struct */
    e->step = o->step;
    if (e->step < 0) {
        if (tsc_dump_n_steps(d) < 1) return tsc_error_set(TSC_ERR_MISSING, "%s: no complete step in the dump", o->dump_path);
        e->step = tsc_dump_step_at(d, 0);
    }
    if (!tsc_dump_has_step(d, e->step)) {
        long long have[64];
        int n = tsc_dump_n_steps(d) < 64 ? tsc_dump_n_steps(d) : 64;
        char list[512];
        for (int i = 0; i < n; i++) have[i] = tsc_dump_step_at(d, i);
        return tsc_error_set(TSC_ERR_MISSING, "%s: no step %lld in the dump; it has %d steps: %s%s", o->dump_path,
                             e->step, tsc_dump_n_steps(d), tsc_select_runs_text(have, n, list, sizeof list),
                             n < tsc_dump_n_steps(d) ? ", ... (tilescope info lists them)" : "");
    }
    const struct { const char *name, *what; int v, n; } ix[] = {{"layer", "layers", o->layer, m->n_layer},
        {"head", "query heads", o->head, m->n_head}, {"row", "rows (tokens)", o->row, m->seq_len},
        {"feature", "features per head", o->feature, m->head_dim}, {"batch", "batch rows", o->batch, m->batch}};
    for (size_t i = 0; i < sizeof ix / sizeof ix[0]; i++)
        if (ix[i].v < 0 || ix[i].v >= ix[i].n)
            return tsc_error_set(TSC_ERR_ARG, "%s: %s %d is out of range: the dump has %d %s (0 to %d)", o->dump_path,
                                 ix[i].name, ix[i].v, ix[i].n, ix[i].what, ix[i].n - 1);
    e->layer = o->layer;
    e->head = o->head;
    e->kv_head = o->head / (m->n_head / m->n_kv_head);
    e->batch = o->batch;
    e->row = o->row;
    e->feature = o->feature;
    for (int s = 0; s < TSC_STAGE_COUNT; s++) e->stochastic |= e->policy.mode[s] == TSC_ROUND_STOCHASTIC;
    return TSC_OK;
}

/* Reads q, k, v (and o when present) of the head and runs the reference on it. */
static tsc_status_t load_head(tsc_dump_t *d, tsc_explain_dump_t *e, head_t *h) {
    const tsc_dump_meta_t *m = tsc_dump_meta(d);
    h->T = m->seq_len;
    h->D = m->head_dim;
    h->causal = m->causal;
    const size_t td = (size_t)h->T * h->D;
    float *q = malloc(td * sizeof *q), *k = malloc(td * sizeof *k);
    double *qkv = malloc(3 * td * sizeof *qkv);
    h->v = malloc(td * sizeof *h->v);
    h->o = malloc(td * sizeof *h->o);
    h->o_dump = malloc(td * sizeof *h->o_dump);
    tsc_status_t st = TSC_OK;
    if (!q || !k || !qkv || !h->v || !h->o || !h->o_dump)
        st = tsc_error_set(TSC_ERR_NOMEM, "out of memory for one head (T=%d, D=%d)", h->T, h->D);
    if (st == TSC_OK) st = tsc_dump_read(d, e->step, e->layer, "q", e->batch, e->head, q);
    if (st == TSC_OK) st = tsc_dump_read(d, e->step, e->layer, "k", e->batch, e->kv_head, k);
    if (st == TSC_OK) st = tsc_dump_read(d, e->step, e->layer, "v", e->batch, e->kv_head, h->v);
    if (st == TSC_OK)
        e->have_o = tsc_dump_has_dataset(d, e->step, e->layer, "o") &&
                    tsc_dump_read(d, e->step, e->layer, "o", e->batch, e->head, h->o_dump) == TSC_OK;
    if (st == TSC_OK)
        st = tsc_attn_trace_init(&h->tr, h->T, h->D, e->policy.block_k,
                                 TSC_TRACE_SCORES | TSC_TRACE_TILES | TSC_TRACE_PV);
    if (st == TSC_OK) {
        /* Double I/O: outputs are then the exact stage values even under FP64 policies. */
        for (size_t x = 0; x < td; x++) {
            qkv[x] = q[x];
            qkv[td + x] = k[x];
            qkv[2 * td + x] = h->v[x];
        }
        h->tr.b = 0;
        h->tr.h = 0;
        tsc_attn_dims_t dims = {.B = 1, .H = 1, .Hkv = 1, .T = h->T, .D = h->D, .causal = h->causal,
                                .scale = m->softmax_scale};
        tsc_attn_io_t io = {.dtype = TSC_ATTN_F64, .q = qkv, .k = qkv + td, .v = qkv + 2 * td, .o = h->o};
        st = tsc_attn_run(&e->policy, &dims, &io, &h->tr, 1);
        if (st != TSC_OK) st = tsc_error_wrap(st, "%s: attention under %s: ", e->dump_path, e->policy_name);
    }
    free(q);
    free(k);
    free(qkv);
    return st;
}

/* One key tile of the row: Ō rescaled, then the tile's products added (fused: straight into Ō;
 * unfused: a tile sum rounded to the PV stage, then added to Ō). */
static double replay_tile(replay_t *R, const head_t *h, int t, int fi, int kt, double c, double oacc, int *n_ones) {
    const tsc_policy_t *pol = R->pol;
    const int T = h->T, D = h->D, bk = h->tr.block_k;
    int j0 = kt * bk, j1 = j0 + bk < T ? j0 + bk : T;
    if (h->causal && j1 > t + 1) j1 = t + 1;
    double scaled = stage_round(R, compute_round(R, c * oacc), TSC_STAGE_OACC, -1, kt, "rescale");
    if (pol->fused) {
        oacc = scaled;
        for (int j = j0; j < j1; j++) {
            double a = h->tr.pbar[(size_t)t * T + j];
            double vv = tsc_round(h->v[(size_t)j * D + fi], pol->fmt[TSC_STAGE_V], TSC_ROUND_NEAREST_EVEN, NULL);
            *n_ones += a == 1.0;
            oacc = fma_acc(R, oacc, a, vv, j, kt, "fma");
            oacc = stage_round(R, oacc, TSC_STAGE_PV, j, kt, "pv");
        }
        return oacc;
    }
    double pv = 0;
    for (int j = j0; j < j1; j++) {
        double a = h->tr.pbar[(size_t)t * T + j];
        double vv = tsc_round(h->v[(size_t)j * D + fi], pol->fmt[TSC_STAGE_V], TSC_ROUND_NEAREST_EVEN, NULL);
        *n_ones += a == 1.0;
        pv = fma_acc(R, pv, a, vv, j, kt, "acc");
    }
    pv = stage_round(R, pv, TSC_STAGE_PV, -1, kt, "pv");
    tsc_explain_event_t *ev = ev_push(&R->E, -1, kt, "oacc", NAN, NAN);
    double sum = R->f64 ? scaled + pv
                        : tsc_accum_add2(scaled, pv, TSC_FMT_FP32, TSC_ROUND_NEAREST_EVEN, NULL, ev ? &ev->st : NULL);
    return stage_round(R, sum, TSC_STAGE_OACC, -1, kt, "oacc");
}

/* The replay of row t, feature i, following tsc_attention.h's forward formulas, compared with
 * the reference after every tile. */
static void replay_row(replay_t *R, const head_t *h, tsc_explain_dump_t *e) {
    const int t = e->row, fi = e->feature, nkt = h->tr.n_kt, D = h->D;
    double oacc = 0, m_old = -INFINITY, l_last = NAN;
    int n_ones = 0;
    e->mismatch_tile = -1;
    for (int kt = 0; kt < nkt; kt++) {
        size_t ti = (size_t)t * nkt + kt;
        double mn = h->tr.run_max[ti];
        if (isnan(mn)) continue; /* a tile this row never visits */
        e->tiles++;
        double c = 0;
        if (m_old != -INFINITY) {
            double arg = stage_round(R, compute_round(R, m_old - mn), TSC_STAGE_EXPARG, -1, kt, "exparg");
            R->E.n--; /* the exponent argument is not part of Ō's chain: not listed */
            c = R->f64 ? exp(arg) : (double)tsc_attn_expf((float)arg);
        }
        oacc = replay_tile(R, h, t, fi, kt, c, oacc, &n_ones);
        double ref = h->tr.oacc[ti * D + fi];
        if (e->mismatch_tile < 0 && !(oacc == ref || (isnan(oacc) && isnan(ref)))) {
            e->mismatch_tile = kt;
            e->mismatch_model = oacc;
            e->mismatch_ref = ref;
        }
        m_old = mn;
        l_last = h->tr.l[ti];
    }
    e->obar = oacc;
    e->l = l_last;
    e->n_ones = n_ones;
    /* a materialized softmax normalised P before P V: O is Ō rounded, no division */
    const int mat = R->pol->softmax == TSC_SOFTMAX_MATERIALIZED;
    e->o = stage_round(R, mat ? oacc : compute_round(R, oacc / l_last), TSC_STAGE_O, -1, -1, "o");
    e->o_ref = h->o[(size_t)t * D + fi];
    e->o_match = e->o == e->o_ref || (isnan(e->o) && isnan(e->o_ref));
    if (e->have_o) e->o_dump = h->o_dump[(size_t)t * D + fi];
}

/* Statistics over the chain, the keys with P̄ = 1, then the events sorted by |error|. */
static tsc_status_t summarize(tsc_explain_dump_t *e, const head_t *h, int top) {
    for (size_t k = 0; k < e->n_events; k++) {
        const tsc_explain_event_t *ev = &e->events[k];
        if (ev->st.dir == TSC_ACCUM_EXACT || isnan(ev->st.error)) continue;
        e->n_inexact++;
        e->n_up += ev->st.dir == TSC_ACCUM_AWAY;
        e->n_down += ev->st.dir == TSC_ACCUM_TOWARD;
        if (strcmp(ev->kind, "o") != 0) e->error_sum += ev->st.error;
        if (ev->pbar == 1.0) e->error_sum_ones += ev->st.error;
    }
    e->ones = malloc(sizeof(int) * (size_t)(h->T + 1));
    if (!e->ones) return tsc_error_set(TSC_ERR_NOMEM, "out of memory");
    int no = 0;
    for (int j = 0; j < h->T; j++)
        if ((!h->causal || j <= e->row) && h->tr.pbar[(size_t)e->row * h->T + j] == 1.0) e->ones[no++] = j;
    e->n_ones = no;
    if (e->n_events) qsort(e->events, e->n_events, sizeof *e->events, cmp_err);
    /* inexact events only: exact ones have nothing to explain */
    while (e->n_top < e->n_events && e->n_top < (size_t)top && e->events[e->n_top].st.dir != TSC_ACCUM_EXACT)
        e->n_top++;
    return TSC_OK;
}

tsc_status_t tsc_explain_dump(const tsc_explain_dump_opts_t *o, tsc_explain_dump_t **out) {
    *out = NULL;
    if (!o || !o->dump_path || o->top < 1) return tsc_error_set(TSC_ERR_ARG, "explain: a dump and top >= 1 are required");
    tsc_explain_dump_t *e = calloc(1, sizeof *e);
    if (!e || !(e->dump_path = strdup(o->dump_path))) {
        free(e);
        return tsc_error_set(TSC_ERR_NOMEM, "out of memory");
    }
    tsc_dump_t *d = NULL;
    head_t h;
    memset(&h, 0, sizeof h);
    replay_t R = {&e->policy, 0, {NULL, 0, 0, 0}};
    tsc_status_t st = tsc_dump_open(&d, o->dump_path);
    if (st == TSC_OK) st = resolve(d, o, e);
    if (st == TSC_OK) st = load_head(d, e, &h);
    if (st == TSC_OK) {
        R.f64 = tsc_policy_uses_fp64(&e->policy);
        replay_row(&R, &h, e);
        e->events = R.E.ev;
        e->n_events = R.E.n;
        if (R.E.oom) st = tsc_error_set(TSC_ERR_NOMEM, "out of memory recording rounding events");
    } else {
        free(R.E.ev);
    }
    if (st == TSC_OK) st = summarize(e, &h, o->top);
    head_free(&h);
    tsc_dump_close(d);
    if (st != TSC_OK) {
        tsc_explain_dump_free(e);
        return st;
    }
    *out = e;
    return TSC_OK;
}

void tsc_explain_dump_free(tsc_explain_dump_t *e) {
    if (!e) return;
    free(e->dump_path);
    free(e->ones);
    free(e->events);
    free(e);
}

#define EV_F(m, k) TSC_JSON_FIELD(tsc_explain_event_t, m, k)
static void event_json(tsc_json_t *j, const tsc_explain_event_t *ev) {
    static const tsc_json_field_t head[] = {
        EV_F(key, "key"), EV_F(tile, "tile"), TSC_JSON_STR(tsc_explain_event_t, kind, "kind"), EV_F(pbar, "pbar"),
        EV_F(v, "v"), EV_F(st.a, "before"), EV_F(st.exact_hi, "exact"), EV_F(st.result, "result")};
    static const tsc_json_field_t err[] = {EV_F(st.error, "error"), EV_F(st.error_ulps, "error_ulps"),
                                           EV_F(st.carry_shift, "carry_shift")};
    char bits[200];
    tsc_json_object_begin(j);
    tsc_json_kv_fields(j, ev, head, TSC_JSON_NFIELDS(head));
    tsc_json_kv_string(j, "format", tsc_format_name(ev->st.fmt));
    tsc_json_kv_fields(j, ev, err, TSC_JSON_NFIELDS(err));
    tsc_json_kv_string(j, "bits", tsc_accum_step_bits_str(&ev->st, bits, sizeof bits));
    tsc_json_kv_string(j, "direction", tsc_explain_dir_key(ev->st.dir));
    tsc_json_object_end(j);
}

#define ED_F(m) TSC_JSON_FIELD(tsc_explain_dump_t, m, #m)
#define ED_B(m, k) TSC_JSON_BOOL(tsc_explain_dump_t, m, k)
void tsc_explain_dump_json(const tsc_explain_dump_t *e, tsc_json_t *j) {
    static const tsc_json_field_t where[] = {
        TSC_JSON_STR(tsc_explain_dump_t, dump_path, "dump"), ED_F(step), ED_F(layer), ED_F(head), ED_F(kv_head),
        ED_F(batch), ED_F(row), ED_F(feature), TSC_JSON_CHARS(tsc_explain_dump_t, policy_name, "policy"),
        ED_B(policy.fused, "fused"), ED_B(stochastic, "stochastic_replayed_as_nearest"), ED_F(tiles)};
    static const tsc_json_field_t result[] = {ED_F(mismatch_tile), ED_B(o_match, "o_matches_reference"), ED_F(obar),
                                              ED_F(l), ED_F(o), TSC_JSON_FIELD(tsc_explain_dump_t, o_ref, "o_reference")};
    static const tsc_json_field_t counts[] = {
        TSC_JSON_FIELD(tsc_explain_dump_t, n_events, "events"), TSC_JSON_FIELD(tsc_explain_dump_t, n_inexact, "inexact"),
        TSC_JSON_FIELD(tsc_explain_dump_t, n_up, "up"), TSC_JSON_FIELD(tsc_explain_dump_t, n_down, "down"),
        ED_F(error_sum), TSC_JSON_FIELD(tsc_explain_dump_t, error_sum_ones, "error_sum_at_pbar_one")};
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "command", "explain dump");
    tsc_json_kv_fields(j, e, where, TSC_JSON_NFIELDS(where));
    tsc_json_kv_bool(j, "replay_matches_reference", e->mismatch_tile < 0);
    tsc_json_kv_fields(j, e, result, TSC_JSON_NFIELDS(result));
    tsc_json_key(j, "o_dump");
    if (e->have_o) tsc_json_number(j, e->o_dump);
    else tsc_json_null(j);
    tsc_json_key(j, "pbar_one_keys");
    tsc_json_array_begin(j);
    for (int k = 0; k < e->n_ones; k++) tsc_json_int(j, e->ones[k]);
    tsc_json_array_end(j);
    tsc_json_kv_fields(j, e, counts, TSC_JSON_NFIELDS(counts));
    tsc_json_key(j, "top");
    tsc_json_array_begin(j);
    for (size_t k = 0; k < e->n_top; k++) event_json(j, &e->events[k]);
    tsc_json_array_end(j);
    tsc_json_kv_string(j, "note", e->note[0] ? e->note : NULL);
    tsc_json_key(j, "nonfinite_numbers");
    tsc_json_nonfinite_note(j);
    tsc_json_object_end(j);
}
