/* diff.c: the tensor-level diff of two dumps (tsc_diff.h, docs/DIFF.md). */
#include "tsc_diff.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsc_dump.h"
#include "tsc_formats.h"
#include "tsc_stats.h"

#define MAX_LAYERS 4096 /* layers of one step looked at (a dump's layer index has 3 digits) */
#define MAX_NAMES 64    /* datasets of one layer looked at */

void tsc_diff_opts_init(tsc_diff_opts_t *o) {
    memset(o, 0, sizeof *o);
    tsc_select_init(&o->sel);
}

void tsc_diff_free(tsc_diff_t *r) {
    if (!r) return;
    free(r->path_a);
    free(r->path_b);
    free(r->recs);
    free(r->sets);
    free(r->only);
    free(r);
}

int tsc_diff_worse(const tsc_diff_rec_t *x, const tsc_diff_rec_t *y) {
    if (x->s.nonfinite != y->s.nonfinite) return x->s.nonfinite > y->s.nonfinite;
    if (x->s.max_ulp != y->s.max_ulp) return x->s.max_ulp > y->s.max_ulp;
    return x->s.max_abs > y->s.max_abs;
}

const char *tsc_diff_where(const char *name, const tsc_diff_stat_t *s, char *buf, size_t cap) {
    if (!cap) return buf;
    buf[0] = '\0';
    if (!s->has_first) return buf;
    if (!strncmp(name, "w_", 2)) snprintf(buf, cap, "row %d, column %d", s->first_t, s->first_d);
    else if (!strcmp(name, "lse")) snprintf(buf, cap, "batch %d, token %d", s->first_b, s->first_t);
    else
        snprintf(buf, cap, "batch %d, token %d, %s %d", s->first_b, s->first_t,
                 !strcmp(name, "x") ? "channel" : !strncmp(name, "tiles/", 6) ? "key tile" : "feature", s->first_d);
    return buf;
}

/* The stored bits of element i (size bytes, little-endian). */
static uint64_t bits_at(const unsigned char *p, size_t size, size_t i) {
    uint64_t u = 0;
    for (size_t k = 0; k < size; k++) u |= (uint64_t)p[i * size + k] << (8 * k);
    return u;
}

/* The monotone order of a stored bit pattern u: sign-magnitude to a signed integer, in units of
 * the value's format (a narrower format stored in FP32, TF32 or E8Mx, has its low bits zero:
 * shifted out). +0 and -0 are both 0. */
static int64_t ord_of(uint64_t u, size_t size, int shift) {
    uint64_t sign = u >> (8 * size - 1), mag = u & ((1ull << (8 * size - 1)) - 1);
    mag >>= shift;
    return sign ? -(int64_t)mag : (int64_t)mag;
}

/* Mantissa bits the storage has beyond the format's (TF32 and E8Mx live in FP32). */
static int storage_shift(tsc_format_t f) {
    size_t sz = tsc_format_size(f);
    int m = tsc_format_mant_bits(f);
    return (sz == 4 ? 23 : sz == 8 ? 52 : m) - m;
}

static void stat_merge(tsc_diff_stat_t *t, const tsc_diff_stat_t *s) {
    t->n += s->n;
    t->identical += s->identical;
    t->nonfinite += s->nonfinite;
    t->n_finite += s->n_finite;
    t->sum_ulp += s->sum_ulp;
    t->sum_ulp_signed += s->sum_ulp_signed;
    t->sum_diff += s->sum_diff;
    if (s->max_ulp > t->max_ulp) t->max_ulp = s->max_ulp;
    if (s->max_abs > t->max_abs) t->max_abs = s->max_abs;
    if (!t->has_first && s->has_first) {
        t->has_first = 1;
        t->first_b = s->first_b, t->first_t = s->first_t, t->first_d = s->first_d;
        t->first_a = s->first_a, t->first_bv = s->first_bv;
        t->first_abits = s->first_abits, t->first_bbits = s->first_bbits;
    }
}

/* One side of a slice: its stored bits, their values as float (FP64 is read from the bits). */
typedef struct {
    tsc_format_t fmt;
    size_t size;
    unsigned char *raw;
    float *v;
} side_t;

static double value_at(const side_t *s, size_t i) {
    if (s->fmt == TSC_FMT_FP64) {
        double d;
        memcpy(&d, s->raw + 8 * i, sizeof d);
        return d;
    }
    return s->v[i];
}

/* One slice pair of n elements, batch row b; inner is the row length for the first differing
 * element's (t, d). */
static void compare_slice(tsc_diff_stat_t *s, int b, const side_t *A, const side_t *B, size_t n, size_t inner) {
    int same = A->fmt == B->fmt, shift = storage_shift(A->fmt);
    /* differing formats: ULPs of the coarser one */
    tsc_format_t coarse = tsc_format_mant_bits(A->fmt) <= tsc_format_mant_bits(B->fmt) ? A->fmt : B->fmt;
    for (size_t i = 0; i < n; i++) {
        double x = value_at(A, i), y = value_at(B, i);
        int fx = isfinite(x), fy = isfinite(y);
        uint64_t ua = bits_at(A->raw, A->size, i), ub = same ? bits_at(B->raw, B->size, i) : 0;
        int ident = same ? ua == ub : (x == y && signbit(x) == signbit(y));
        if (isnan(x) && isnan(y)) ident = 1;
        s->n++;
        if (ident) {
            s->identical++;
            if (fx) s->n_finite++;
            continue;
        }
        if (!s->has_first) {
            s->has_first = 1;
            s->first_b = b;
            s->first_t = (int)(i / inner);
            s->first_d = (int)(i % inner);
            s->first_a = x;
            s->first_bv = y;
            s->first_abits = ua;
            s->first_bbits = same ? ub : bits_at(B->raw, B->size, i);
        }
        if (!fx || !fy) { /* a NaN against a number, +Inf against -Inf or a number */
            s->nonfinite++;
            continue;
        }
        double u;
        if (same) {
            u = (double)(ord_of(ub, B->size, shift) - ord_of(ua, A->size, shift));
        } else {
            double m = fabs(x) > fabs(y) ? fabs(x) : fabs(y);
            u = (y - x) / tsc_stats_ulp(m, coarse);
        }
        double d = y - x;
        s->n_finite++;
        s->sum_ulp += fabs(u);
        s->sum_ulp_signed += u;
        if (fabs(u) > s->max_ulp) s->max_ulp = fabs(u);
        s->sum_diff += d;
        if (fabs(d) > s->max_abs) s->max_abs = fabs(d);
    }
}

typedef struct {
    tsc_diff_t *r;
    size_t cap_recs, cap_only;
    long long done, total; /* (step, layer) pairs, for the progress */
} acc_t;

static tsc_status_t add_only(acc_t *a, int in_a, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static tsc_status_t add_only(acc_t *a, int in_a, const char *fmt, ...) {
    tsc_diff_t *r = a->r;
    r->n_only++;
    if (r->n_only > TSC_DIFF_MAX_ONLY) return TSC_OK;
    if (r->n_only > a->cap_only) {
        size_t cap = a->cap_only ? 2 * a->cap_only : 16;
        void *p = realloc(r->only, cap * sizeof *r->only);
        if (!p) return tsc_error_set(TSC_ERR_NOMEM, "diff: out of memory");
        r->only = p;
        a->cap_only = cap;
    }
    tsc_diff_only_t *o = &r->only[r->n_only - 1];
    o->in_a = in_a;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->what, sizeof o->what, fmt, ap);
    va_end(ap);
    return TSC_OK;
}

static tsc_diff_rec_t *add_rec(acc_t *a) {
    tsc_diff_t *r = a->r;
    if (r->n_recs == a->cap_recs) {
        size_t cap = a->cap_recs ? 2 * a->cap_recs : 64;
        void *p = realloc(r->recs, cap * sizeof *r->recs);
        if (!p) return NULL;
        r->recs = p;
        a->cap_recs = cap;
    }
    tsc_diff_rec_t *x = &r->recs[r->n_recs++];
    memset(x, 0, sizeof *x);
    return x;
}

static int has_name(char (*names)[TSC_DUMP_NAME_MAX], int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], s)) return 1;
    return 0;
}

/* Whether kv head g is read by a selected query head (groups of n_head / n_kv_head). */
static int kv_selected(const tsc_select_t *sel, int g, int n_head, int n_kv_head) {
    int grp = n_kv_head > 0 ? n_head / n_kv_head : 1;
    for (int h = g * grp; h < (g + 1) * grp; h++)
        if (tsc_select_set_has(&sel->heads, h)) return 1;
    return 0;
}

static int head_stored(const tsc_dump_dataset_info_t *in, int h) { return h >= 64 || ((in->heads_mask >> h) & 1); }

/* Every (head) record of dataset name at (step, layer). */
static tsc_status_t diff_dataset(acc_t *acc, tsc_dump_t *A, tsc_dump_t *B, const tsc_diff_opts_t *o, long long step,
                                 int layer, const char *name) {
    const tsc_dump_meta_t *m = tsc_dump_meta(A);
    int erank, per_head;
    uint64_t edims[4];
    if (tsc_dump_expected_shape(m, name, &erank, edims, &per_head) != TSC_OK) {
        tsc_error_clear();
        return add_only(acc, -1, "step %lld layer %d %.60s (not a dataset of the dump format)", step, layer, name);
    }
    tsc_dump_dataset_info_t ia, ib;
    tsc_status_t st = tsc_dump_dataset_info(A, step, layer, name, &ia);
    if (st == TSC_OK) st = tsc_dump_dataset_info(B, step, layer, name, &ib);
    if (st == TSC_ERR_UNSUPPORTED) { /* not floating-point, or the weights of tensor-parallel ranks */
        char why[120];
        snprintf(why, sizeof why, "%s", tsc_error_last());
        tsc_error_clear();
        return add_only(acc, -1, "step %lld layer %d %s (%s)", step, layer, name, why);
    }
    if (st != TSC_OK) return st;
    int same_shape = ia.rank == ib.rank;
    for (int i = 0; same_shape && i < ia.rank; i++) same_shape = ia.dims[i] == ib.dims[i];
    if (!same_shape) return add_only(acc, -1, "step %lld layer %d %s (shapes differ)", step, layer, name);
    int weight = !strncmp(name, "w_", 2), isx = !strcmp(name, "x");
    int kv = !strcmp(name, "k") || !strcmp(name, "v") || !strcmp(name, "dk") || !strcmp(name, "dv");
    int nb = weight ? 1 : (int)ia.dims[0], nh = weight || isx ? 1 : (int)ia.dims[1];
    size_t n = (size_t)tsc_dump_slice_elems(A, step, layer, name);
    size_t inner = ia.rank >= 2 ? (size_t)ia.dims[ia.rank - 1] : 1;
    if (ia.rank == 3 && !isx) inner = 1; /* lse [B, H, T]: a token per element */
    side_t sa = {ia.dtype, tsc_format_size(ia.dtype), NULL, NULL}, sb = {ib.dtype, tsc_format_size(ib.dtype), NULL, NULL};
    sa.raw = malloc(n * sa.size + 1);
    sb.raw = malloc(n * sb.size + 1);
    sa.v = malloc(n * sizeof(float) + 1);
    sb.v = malloc(n * sizeof(float) + 1);
    if (!sa.raw || !sb.raw || !sa.v || !sb.v) st = tsc_error_set(TSC_ERR_NOMEM, "diff: out of memory for a slice of %zu", n);
    for (int h = 0; st == TSC_OK && h < nh; h++) {
        if (per_head) {
            if (kv ? !kv_selected(&o->sel, h, m->n_head, m->n_kv_head) : !tsc_select_set_has(&o->sel.heads, h)) continue;
            int in_a = head_stored(&ia, h), in_b = head_stored(&ib, h);
            if (!in_a || !in_b) {
                st = add_only(acc, in_a ? 1 : in_b ? 0 : -1, "step %lld layer %d %s head %d (%s)", step, layer, name, h,
                              in_a ? "B's capture did not store it" : in_b ? "A's capture did not store it"
                                                                       : "neither capture stored it");
                continue;
            }
        }
        tsc_diff_rec_t *x = add_rec(acc);
        if (!x) { st = tsc_error_set(TSC_ERR_NOMEM, "diff: out of memory"); break; }
        x->step = step;
        x->layer = layer;
        x->head = per_head ? h : -1;
        snprintf(x->name, sizeof x->name, "%s", name);
        snprintf(x->fmt_a, sizeof x->fmt_a, "%s", tsc_format_name(ia.dtype));
        snprintf(x->fmt_b, sizeof x->fmt_b, "%s", tsc_format_name(ib.dtype));
        for (int b = 0; st == TSC_OK && b < nb; b++) {
            if (!weight && !tsc_select_set_has(&o->sel.batches, b)) continue;
            st = tsc_dump_read_raw(A, step, layer, name, b, h, sa.raw);
            if (st == TSC_OK) st = tsc_dump_read_raw(B, step, layer, name, b, h, sb.raw);
            if (st != TSC_OK) break;
            if (sa.fmt != TSC_FMT_FP64) tsc_convert_to_f32(sa.fmt, sa.raw, sa.v, n);
            if (sb.fmt != TSC_FMT_FP64) tsc_convert_to_f32(sb.fmt, sb.raw, sb.v, n);
            compare_slice(&x->s, b, &sa, &sb, n, inner);
        }
        x->agrees = x->s.nonfinite == 0 && x->s.max_ulp <= o->max_ulp;
    }
    free(sa.raw); free(sb.raw); free(sa.v); free(sb.v);
    return st;
}

/* The (step, layer) pairs to compare, for the progress. */
static long long count_pairs(tsc_dump_t *A, tsc_dump_t *B, const tsc_diff_opts_t *o) {
    long long total = 0;
    int la[MAX_LAYERS], nla;
    for (int i = 0; i < tsc_dump_n_steps(A); i++) {
        long long s = tsc_dump_step_at(A, i);
        if (!tsc_select_has_step(&o->sel, s) || !tsc_dump_has_step(B, s)) continue;
        if (tsc_dump_layers(A, s, la, MAX_LAYERS, &nla) != TSC_OK) { tsc_error_clear(); continue; }
        for (int k = 0; k < nla && k < MAX_LAYERS; k++) total += tsc_select_set_has(&o->sel.layers, la[k]);
    }
    return total;
}

static tsc_status_t diff_layer(acc_t *acc, tsc_dump_t *A, tsc_dump_t *B, const tsc_diff_opts_t *o, long long s, int L) {
    char na[MAX_NAMES][TSC_DUMP_NAME_MAX], nbn[MAX_NAMES][TSC_DUMP_NAME_MAX];
    int nna = 0, nnb = 0;
    tsc_status_t st = tsc_dump_dataset_names(A, s, L, na, MAX_NAMES, &nna);
    if (st == TSC_OK) st = tsc_dump_dataset_names(B, s, L, nbn, MAX_NAMES, &nnb);
    if (st != TSC_OK) return st;
    if (nna > MAX_NAMES) nna = MAX_NAMES;
    if (nnb > MAX_NAMES) nnb = MAX_NAMES;
    for (int q = 0; st == TSC_OK && q < nnb; q++)
        if (!has_name(na, nna, nbn[q])) st = add_only(acc, 0, "step %lld layer %d %s", s, L, nbn[q]);
    for (int q = 0; st == TSC_OK && q < nna; q++) {
        if (!has_name(nbn, nnb, na[q])) st = add_only(acc, 1, "step %lld layer %d %s", s, L, na[q]);
        else st = diff_dataset(acc, A, B, o, s, L, na[q]);
    }
    return st;
}

static tsc_status_t diff_dumps(tsc_dump_t *A, tsc_dump_t *B, const tsc_diff_opts_t *o, acc_t *acc) {
    tsc_status_t st = TSC_OK;
    for (int i = 0; st == TSC_OK && i < tsc_dump_n_steps(B); i++) {
        long long s = tsc_dump_step_at(B, i);
        if (tsc_select_has_step(&o->sel, s) && !tsc_dump_has_step(A, s)) st = add_only(acc, 0, "step %lld", s);
    }
    acc->total = count_pairs(A, B, o);
    tsc_progress_begin(o->progress, "layers compared", acc->total);
    int la[MAX_LAYERS], lb[MAX_LAYERS];
    for (int i = 0; st == TSC_OK && i < tsc_dump_n_steps(A); i++) {
        long long s = tsc_dump_step_at(A, i);
        if (!tsc_select_has_step(&o->sel, s)) continue;
        if (!tsc_dump_has_step(B, s)) { st = add_only(acc, 1, "step %lld", s); continue; }
        acc->r->n_steps++;
        int nla = 0, nlb = 0;
        if ((st = tsc_dump_layers(A, s, la, MAX_LAYERS, &nla)) != TSC_OK) break;
        if ((st = tsc_dump_layers(B, s, lb, MAX_LAYERS, &nlb)) != TSC_OK) break;
        for (int k = 0; st == TSC_OK && k < nlb && k < MAX_LAYERS; k++)
            if (tsc_select_set_has(&o->sel.layers, lb[k]) && !tsc_dump_has_layer(A, s, lb[k]))
                st = add_only(acc, 0, "step %lld layer %d", s, lb[k]);
        for (int k = 0; st == TSC_OK && k < nla && k < MAX_LAYERS; k++) {
            int L = la[k];
            if (!tsc_select_set_has(&o->sel.layers, L)) continue;
            if (!tsc_dump_has_layer(B, s, L)) st = add_only(acc, 1, "step %lld layer %d", s, L);
            else st = diff_layer(acc, A, B, o, s, L);
            if (st == TSC_OK && acc->done < acc->total) tsc_progress_tick(o->progress, ++acc->done);
        }
    }
    if (st != TSC_OK) return st;
    if (acc->done < acc->total) tsc_progress_tick(o->progress, acc->done = acc->total);
    if (!acc->r->n_steps) {
        char why[1024];
        return tsc_error_set(TSC_ERR_MISSING, "%s and %s have no selected step in common (the selection %s)",
                             tsc_dump_path(A), tsc_dump_path(B), tsc_select_miss_text(&o->sel, A, why, sizeof why));
    }
    if (!acc->r->n_recs)
        return tsc_error_set(TSC_ERR_MISSING, "%s and %s: the selection %s compares no dataset of the %d common step%s "
                             "(%zu not compared)", tsc_dump_path(A), tsc_dump_path(B), acc->r->selection,
                             acc->r->n_steps, acc->r->n_steps == 1 ? "" : "s", acc->r->n_only);
    return TSC_OK;
}

/* The totals, the per-dataset pools, the first and worst records. */
static tsc_status_t summarize(tsc_diff_t *r) {
    r->first_rec = r->worst_rec = -1;
    r->sets = calloc(r->n_recs ? r->n_recs : 1, sizeof *r->sets);
    if (!r->sets) return tsc_error_set(TSC_ERR_NOMEM, "diff: out of memory");
    for (size_t i = 0; i < r->n_recs; i++) {
        const tsc_diff_rec_t *x = &r->recs[i];
        int differs = x->s.identical < x->s.n;
        tsc_diff_set_t *g = NULL;
        for (size_t k = 0; k < r->n_sets && !g; k++)
            if (!strcmp(r->sets[k].name, x->name)) g = &r->sets[k];
        if (!g) {
            g = &r->sets[r->n_sets++];
            snprintf(g->name, sizeof g->name, "%s", x->name);
            g->first_rec = g->worst_rec = -1;
        }
        g->n_recs++;
        g->n_disagree += !x->agrees;
        r->n_disagree += !x->agrees;
        stat_merge(&g->s, &x->s);
        stat_merge(&r->total, &x->s);
        if (differs && g->first_rec < 0) g->first_rec = (long)i;
        if (differs && r->first_rec < 0) r->first_rec = (long)i;
        if (differs && (g->worst_rec < 0 || tsc_diff_worse(x, &r->recs[g->worst_rec]))) g->worst_rec = (long)i;
        if (differs && (r->worst_rec < 0 || tsc_diff_worse(x, &r->recs[r->worst_rec]))) r->worst_rec = (long)i;
    }
    return TSC_OK;
}

tsc_status_t tsc_diff_run(const char *a, const char *b, const tsc_diff_opts_t *opts, tsc_diff_t **out) {
    *out = NULL;
    tsc_diff_opts_t o;
    if (opts) o = *opts;
    else tsc_diff_opts_init(&o);
    if (!a || !b) return tsc_error_set(TSC_ERR_ARG, "diff: two dumps are needed");
    if (!(o.max_ulp >= 0)) return tsc_error_set(TSC_ERR_ARG, "diff: max_ulp must be >= 0");
    tsc_dump_t *A = NULL, *B = NULL;
    tsc_status_t st = tsc_dump_open(&A, a);
    if (st == TSC_OK) st = tsc_dump_open(&B, b);
    tsc_diff_t *r = st == TSC_OK ? calloc(1, sizeof *r) : NULL;
    if (st == TSC_OK && !r) st = tsc_error_set(TSC_ERR_NOMEM, "diff: out of memory");
    if (r) {
        r->path_a = strdup(a);
        r->path_b = strdup(b);
        r->max_ulp = o.max_ulp;
        r->first_rec = r->worst_rec = -1;
        if (!r->path_a || !r->path_b) st = tsc_error_set(TSC_ERR_NOMEM, "diff: out of memory");
    }
    if (st == TSC_OK) {
        const tsc_dump_meta_t *ma = tsc_dump_meta(A), *mb = tsc_dump_meta(B);
        if (ma->batch != mb->batch || ma->n_head != mb->n_head || ma->n_kv_head != mb->n_kv_head ||
            ma->seq_len != mb->seq_len || ma->head_dim != mb->head_dim || ma->d_model != mb->d_model)
            st = tsc_error_set(TSC_ERR_SHAPE, "%s (batch %d, heads %d, kv heads %d, T %d, D %d, C %d) and %s (batch %d, "
                               "heads %d, kv heads %d, T %d, D %d, C %d) have different geometries: nothing to compare "
                               "element by element", a, ma->batch, ma->n_head, ma->n_kv_head, ma->seq_len,
                               ma->head_dim, ma->d_model, b, mb->batch, mb->n_head, mb->n_kv_head, mb->seq_len,
                               mb->head_dim, mb->d_model);
        snprintf(r->policy_a, sizeof r->policy_a, "%s", ma->policy);
        snprintf(r->policy_b, sizeof r->policy_b, "%s", mb->policy);
        r->batch = ma->batch, r->n_head = ma->n_head, r->n_kv_head = ma->n_kv_head;
        r->seq_len = ma->seq_len, r->head_dim = ma->head_dim, r->d_model = ma->d_model;
        tsc_select_format(&o.sel, r->selection, sizeof r->selection);
    }
    acc_t acc = {r, 0, 0, 0, 0};
    if (st == TSC_OK) st = diff_dumps(A, B, &o, &acc);
    if (st == TSC_OK) st = summarize(r);
    tsc_dump_close(A);
    tsc_dump_close(B);
    if (st != TSC_OK) { tsc_diff_free(r); return st; }
    *out = r;
    return TSC_OK;
}

/* ---- JSON ---------------------------------------------------------------------------------- */

static void bits_json(tsc_json_t *j, const char *key, uint64_t u, const char *fmt_name) {
    tsc_format_t f;
    size_t digits = 16;
    if (tsc_format_parse(fmt_name, &f) == TSC_OK) digits = 2 * tsc_format_size(f);
    char s[24];
    snprintf(s, sizeof s, "0x%0*llx", (int)digits, (unsigned long long)u);
    tsc_json_kv_string(j, key, s);
}

/* The keys that name a record: step, layer, dataset, head. */
static void rec_id_json(tsc_json_t *j, const tsc_diff_rec_t *x) {
    tsc_json_kv_int(j, "step", x->step);
    tsc_json_kv_int(j, "layer", x->layer);
    tsc_json_kv_string(j, "dataset", x->name);
    tsc_json_kv_int(j, "head", x->head);
}

static void rec_ref_json(tsc_json_t *j, const char *key, const tsc_diff_t *r, long i) {
    tsc_json_key(j, key);
    if (i < 0) {
        tsc_json_null(j);
        return;
    }
    tsc_json_object_begin(j);
    rec_id_json(j, &r->recs[i]);
    tsc_json_object_end(j);
}

/* s's keys; fa, fb: the stored formats of the record its first difference lies in. */
static void stat_json(tsc_json_t *j, const tsc_diff_stat_t *s, const char *fa, const char *fb) {
    tsc_json_kv_int(j, "n", s->n);
    tsc_json_kv_int(j, "identical", s->identical);
    tsc_json_kv_number(j, "identical_share", s->n ? (double)s->identical / (double)s->n : 1.0);
    tsc_json_kv_int(j, "nonfinite_mismatch", s->nonfinite);
    tsc_json_kv_int(j, "finite_pairs", s->n_finite);
    tsc_json_kv_number(j, "max_ulp", s->max_ulp);
    tsc_json_kv_number(j, "mean_ulp", s->n_finite ? s->sum_ulp / (double)s->n_finite : 0.0);
    tsc_json_kv_number(j, "mean_ulp_signed", s->n_finite ? s->sum_ulp_signed / (double)s->n_finite : 0.0);
    tsc_json_kv_number(j, "mean_diff", s->n_finite ? s->sum_diff / (double)s->n_finite : 0.0);
    tsc_json_kv_number(j, "max_abs_diff", s->max_abs);
    tsc_json_key(j, "first_difference");
    if (!s->has_first) {
        tsc_json_null(j);
        return;
    }
    tsc_json_object_begin(j);
    tsc_json_kv_int(j, "batch", s->first_b);
    tsc_json_kv_int(j, "token", s->first_t);
    tsc_json_kv_int(j, "feature", s->first_d);
    tsc_json_kv_number(j, "a", s->first_a);
    tsc_json_kv_number(j, "b", s->first_bv);
    bits_json(j, "a_bits", s->first_abits, fa);
    bits_json(j, "b_bits", s->first_bbits, fb);
    tsc_json_object_end(j);
}

void tsc_diff_json(const tsc_diff_t *r, tsc_json_t *j) {
    const tsc_diff_rec_t *f = r->first_rec >= 0 ? &r->recs[r->first_rec] : NULL;
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "a", r->path_a);
    tsc_json_kv_string(j, "b", r->path_b);
    tsc_json_kv_string(j, "policy_a", r->policy_a);
    tsc_json_kv_string(j, "policy_b", r->policy_b);
    tsc_json_key(j, "geometry");
    tsc_json_object_begin(j);
    tsc_json_kv_int(j, "batch", r->batch);
    tsc_json_kv_int(j, "heads", r->n_head);
    tsc_json_kv_int(j, "kv_heads", r->n_kv_head);
    tsc_json_kv_int(j, "seq_len", r->seq_len);
    tsc_json_kv_int(j, "head_dim", r->head_dim);
    tsc_json_kv_int(j, "d_model", r->d_model);
    tsc_json_object_end(j);
    tsc_json_kv_string(j, "selection", r->selection);
    tsc_json_kv_number(j, "max_ulp_allowed", r->max_ulp);
    tsc_json_kv_bool(j, "agree", r->n_disagree == 0);
    tsc_json_kv_int(j, "steps", r->n_steps);
    tsc_json_kv_int(j, "records", (int64_t)r->n_recs);
    tsc_json_kv_int(j, "records_disagreeing", (int64_t)r->n_disagree);
    tsc_json_key(j, "total");
    tsc_json_object_begin(j);
    stat_json(j, &r->total, f ? f->fmt_a : "", f ? f->fmt_b : "");
    rec_ref_json(j, "first_record", r, r->first_rec);
    rec_ref_json(j, "worst_record", r, r->worst_rec);
    tsc_json_object_end(j);
    tsc_json_key(j, "per_dataset");
    tsc_json_array_begin(j);
    for (size_t i = 0; i < r->n_sets; i++) {
        const tsc_diff_set_t *g = &r->sets[i];
        const tsc_diff_rec_t *gf = g->first_rec >= 0 ? &r->recs[g->first_rec] : NULL;
        tsc_json_object_begin(j);
        tsc_json_kv_string(j, "dataset", g->name);
        tsc_json_kv_int(j, "records", (int64_t)g->n_recs);
        tsc_json_kv_int(j, "records_disagreeing", (int64_t)g->n_disagree);
        stat_json(j, &g->s, gf ? gf->fmt_a : "", gf ? gf->fmt_b : "");
        rec_ref_json(j, "first_record", r, g->first_rec);
        rec_ref_json(j, "worst_record", r, g->worst_rec);
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
    tsc_json_key(j, "not_compared");
    tsc_json_array_begin(j);
    for (size_t i = 0; i < r->n_only && i < TSC_DIFF_MAX_ONLY; i++) {
        tsc_json_object_begin(j);
        tsc_json_kv_string(j, "in", r->only[i].in_a == 1 ? "a" : r->only[i].in_a == 0 ? "b" : "both");
        tsc_json_kv_string(j, "what", r->only[i].what);
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
    tsc_json_kv_int(j, "not_compared_count", (int64_t)r->n_only);
    tsc_json_key(j, "per_record");
    tsc_json_array_begin(j);
    for (size_t i = 0; i < r->n_recs; i++) {
        const tsc_diff_rec_t *x = &r->recs[i];
        tsc_json_object_begin(j);
        rec_id_json(j, x);
        tsc_json_kv_string(j, "dtype_a", x->fmt_a);
        tsc_json_kv_string(j, "dtype_b", x->fmt_b);
        tsc_json_kv_bool(j, "agrees", x->agrees);
        stat_json(j, &x->s, x->fmt_a, x->fmt_b);
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
    tsc_json_key(j, "nonfinite_numbers");
    tsc_json_nonfinite_note(j);
    tsc_json_object_end(j);
}
