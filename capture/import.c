/* import.c: tensors of a tensor file (import_read.c) mapped onto (step, layer, dataset) and written
 * into a dump through the capture API (tsc_import.h). The maps, their defaults and the geometry
 * rules live here alone: the Python package's import_tensors calls this function. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "import_internal.h"
#include "tsc_capture.h"
#include "tsc_file.h"
#include "tsc_import.h"
#include "tsc_mem.h"
#include "tsc_strbuf.h"

/* The dataset names, and the order in which {name} tries them (longest first, as the Python
 * importer's alternation). */
static const char *const names[] = {"q", "k", "v", "o", "do", "lse", "x", "w_q", "w_k", "w_v", "w_o"};
static const int name_try[] = {5, 7, 8, 9, 10, 4, 0, 1, 2, 3, 6};
#define N_NAMES 11
enum { NM_Q = 0, NM_K = 1, NM_V = 2, NM_X = 6 };
static const char *const default_maps[] = {"{name}", "step_{step}/layer_{layer}/{name}", "layer{layer}.{name}",
                                           "layers.{layer}.{name}"};
/* Backtracking steps one name may cost a map ("*a*a*" against a long hostile name). */
#define MATCH_BUDGET 10000000L

typedef struct {
    const char *pat;  /* the pattern: the map up to its first '=' */
    size_t pat_len;
    int target;       /* the dataset of =NAME, -1 when none */
} map_t;

typedef struct {
    const char *step, *layer;  /* the digits {step} / {layer} matched (NULL: absent) */
    size_t step_len, layer_len;
    int name;                  /* the dataset {name} matched, -1 when absent */
    long budget;
} caps_t;

typedef struct {
    long long step;
    int layer, name, tensor;   /* dataset index into names[], tensor index in the file */
} placed_t;

void tsc_import_opts_init(tsc_import_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->causal = 1;
}

static int name_index(const char *s, size_t n) {
    for (int i = 0; i < N_NAMES; i++)
        if (strlen(names[i]) == n && !memcmp(names[i], s, n)) return i;
    return -1;
}

static tsc_status_t map_parse(const char *m, map_t *out) {
    const char *eq = strchr(m, '=');
    out->pat = m;
    out->pat_len = eq ? (size_t)(eq - m) : strlen(m);
    out->target = -1;
    if (eq && (out->target = name_index(eq + 1, strlen(eq + 1))) < 0)
        return tsc_error_set(TSC_ERR_ARG, "map '%s': '%s' is not a dataset name (q k v o do lse x w_q w_k w_v w_o)", m, eq + 1);
    static const char *const fields[] = {"{step}", "{layer}", "{name}"};
    int has_name = 0;
    for (int f = 0; f < 3; f++) {
        int count = 0;
        for (const char *p = m; (p = strstr(p, fields[f])) && p < m + out->pat_len; p++) count++;
        if (count > 1) return tsc_error_set(TSC_ERR_ARG, "map '%s': %s appears twice", m, fields[f]);
        if (f == 2) has_name = count;
    }
    if (!has_name && out->target < 0)
        return tsc_error_set(TSC_ERR_ARG, "map '%s': the pattern has no {name}: add =NAME (one of q k v o do lse x w_q w_k w_v w_o)", m);
    return TSC_OK;
}

const char *const *tsc_import_default_maps(int *n) {
    if (n) *n = (int)(sizeof default_maps / sizeof default_maps[0]);
    return default_maps;
}

size_t tsc_import_opts_size(void) { return sizeof(tsc_import_opts_t); }

tsc_status_t tsc_import_map_check(const char *map) {
    map_t m;
    return map ? map_parse(map, &m) : tsc_error_set(TSC_ERR_ARG, "tsc_import_map_check: NULL map");
}

/* Whole-string match of p[0, n) against s, backtracking greedily as a regular expression would
 * ({step}/{layer} \d+, * .* without newlines, {name} the alternation, longest name first), as
 * the maps' documentation says. */
static int match_at(const char *p, size_t n, const char *s, caps_t *c) {
    if (--c->budget < 0) return 0;
    if (!n) return !*s;
    int is_step = n >= 6 && !strncmp(p, "{step}", 6), is_layer = n >= 7 && !strncmp(p, "{layer}", 7);
    if (is_step || is_layer) {
        size_t tl = is_step ? 6 : 7, d = 0;
        while (s[d] >= '0' && s[d] <= '9') d++;
        for (size_t k = d; k >= 1; k--) {
            if (is_step) c->step = s, c->step_len = k;
            else c->layer = s, c->layer_len = k;
            if (match_at(p + tl, n - tl, s + k, c)) return 1;
        }
        return 0;
    }
    if (n >= 6 && !strncmp(p, "{name}", 6)) {
        for (int i = 0; i < N_NAMES; i++) {
            const char *nm = names[name_try[i]];
            size_t l = strlen(nm);
            if (strncmp(s, nm, l)) continue;
            c->name = name_try[i];
            if (match_at(p + 6, n - 6, s + l, c)) return 1;
        }
        return 0;
    }
    if (*p == '*') {
        for (size_t k = strcspn(s, "\n") + 1; k-- > 0;)
            if (match_at(p + 1, n - 1, s + k, c)) return 1;
        return 0;
    }
    return *p == *s && match_at(p + 1, n - 1, s + 1, c);
}

/* Parses matched digits; -1 when they do not fit max. */
static int digits_value(const char *s, size_t n, long long max, long long *v) {
    *v = 0;
    for (size_t i = 0; i < n; i++) {
        if (*v > (max - 9) / 10 && *v > (max - (s[i] - '0')) / 10) return -1;
        *v = *v * 10 + (s[i] - '0');
    }
    return 0;
}

/* The first map matching tensor i's name places it; *hit 0 when none does. */
static tsc_status_t place_one(const tsc_tensor_file_t *f, const char *nm, int i, const map_t *maps, int n_maps, long long step,
                              placed_t *pl, int *hit) {
    char q[TSC_IMPORT_QUOTE_MAX];
    *hit = 0;
    for (int m = 0; m < n_maps; m++) {
        caps_t c = {NULL, NULL, 0, 0, -1, MATCH_BUDGET};
        if (!match_at(maps[m].pat, maps[m].pat_len, nm, &c)) {
            if (c.budget < 0)
                return tsc_error_set(TSC_ERR_ARG, "%s: tensor %s: map '%.*s' needs too much backtracking", tsc_tensor_file_path(f),
                                     tsc_import_quote(nm, q), (int)maps[m].pat_len, maps[m].pat);
            continue;
        }
        long long layer = 0;
        pl->step = step;
        if ((c.step && digits_value(c.step, c.step_len, LLONG_MAX, &pl->step)) ||
            (c.layer && digits_value(c.layer, c.layer_len, 65535, &layer)))
            return tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s: its step or layer number is too large", tsc_tensor_file_path(f),
                                 tsc_import_quote(nm, q));
        pl->layer = (int)layer;
        pl->name = c.name >= 0 ? c.name : maps[m].target;
        pl->tensor = i;
        *hit = 1;
        return TSC_OK;
    }
    return TSC_OK;
}

static int cmp_placed(const void *a, const void *b) {
    const placed_t *x = a, *y = b;
    if (x->step != y->step) return x->step < y->step ? -1 : 1;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    if (x->name != y->name) return strcmp(names[x->name], names[y->name]);
    return x->tensor - y->tensor;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The name of skipped entry k: a tensor index, or -1 - j for the file's j-th tensor of another type. */
static const char *skipped_name(const tsc_tensor_file_t *f, int k) {
    return k >= 0 ? tsc_tensor_file_info(f, k)->name : tsc_tensor_file_other(f, -1 - k)->name;
}

/* The tensor's shape as the dump sees it ([B, T, H, D] -> [B, H, T, D] under bthd). */
static tsc_status_t host_shape(const tsc_tensor_file_t *f, const placed_t *p, int bthd, uint64_t dims[TSC_TENSOR_RANK_MAX], int *rank) {
    const tsc_tensor_info_t *t = tsc_tensor_file_info(f, p->tensor);
    char q[TSC_IMPORT_QUOTE_MAX];
    memcpy(dims, t->dims, sizeof t->dims);
    *rank = t->rank;
    if (!bthd || p->name > 4) return TSC_OK;
    if (t->rank != 4)
        return tsc_error_set(TSC_ERR_SHAPE, "%s: tensor %s (-> %s): rank %d, [B, T, H, D] expected", tsc_tensor_file_path(f),
                             tsc_import_quote(t->name, q), names[p->name], t->rank);
    dims[1] = t->dims[2], dims[2] = t->dims[1];
    return TSC_OK;
}

/* Whether every q, k, v, o and do fits the first q and k under a layout: [B, H, T, D] (B, T, D of q;
 * H of q for q, o, do and of k for k, v). *bad: the first placed tensor that does not. */
static int layout_fits(const tsc_tensor_file_t *f, const placed_t *pl, int n, const placed_t *qp, const placed_t *kp,
                       int bthd, int *bad) {
    uint64_t qd[TSC_TENSOR_RANK_MAX], kd[TSC_TENSOR_RANK_MAX], d[TSC_TENSOR_RANK_MAX];
    int r;
    if (host_shape(f, qp, bthd, qd, &r) || r != 4 || (kp && (host_shape(f, kp, bthd, kd, &r) || r != 4))) {
        tsc_error_clear();
        return 0;
    }
    for (int i = 0; i < n; i++) {
        if (pl[i].name > 4) continue;
        if (host_shape(f, &pl[i], bthd, d, &r) || r != 4) {
            tsc_error_clear();
            *bad = i;
            return 0;
        }
        const uint64_t h = pl[i].name == NM_K || pl[i].name == NM_V ? (kp ? kd[1] : qd[1]) : qd[1];
        if (d[0] != qd[0] || d[1] != h || d[2] != qd[2] || d[3] != qd[3]) {
            *bad = i;
            return 0;
        }
    }
    return 1;
}

/* The dump's metadata from the tensors: q of the first (step, layer) with one, its k, the first x. */
static tsc_status_t geometry(const tsc_tensor_file_t *f, const placed_t *pl, int n, const tsc_import_opts_t *o,
                            tsc_dump_meta_t *m) {
    const placed_t *qp = NULL, *kp = NULL, *xp = NULL;
    char q[TSC_IMPORT_QUOTE_MAX];
    int max_layer = 0, rank;
    for (int i = 0; i < n; i++) {
        uint64_t d[TSC_TENSOR_RANK_MAX];
        if (host_shape(f, &pl[i], o->layout_bthd, d, &rank)) return TSC_ERR_SHAPE;
        if (pl[i].name == NM_Q && !qp) qp = &pl[i]; /* pl is sorted: the first q is the least (step, layer) */
        if (pl[i].name == NM_X && (!xp || pl[i].tensor < xp->tensor)) xp = &pl[i];
        if (pl[i].layer > max_layer) max_layer = pl[i].layer;
    }
    for (int i = 0; i < n && qp; i++)
        if (pl[i].name == NM_K && pl[i].step == qp->step && pl[i].layer == qp->layer) kp = &pl[i];
    int bad = -1;
    if (qp && !layout_fits(f, pl, n, qp, kp, o->layout_bthd, &bad) && bad >= 0) {
        /* read in the layout given, the tensors disagree: say which, and the layout under which they agree */
        const tsc_tensor_info_t *bt = tsc_tensor_file_info(f, pl[bad].tensor), *qt = tsc_tensor_file_info(f, qp->tensor);
        char q2[TSC_IMPORT_QUOTE_MAX], sb[96] = "", sq[96] = "";
        int other = -1;
        for (int k = 0, w = 0; k < bt->rank; k++) w += snprintf(sb + w, sizeof sb - (size_t)w, "%s%llu", k ? ", " : "", (unsigned long long)bt->dims[k]);
        for (int k = 0, w = 0; k < qt->rank; k++) w += snprintf(sq + w, sizeof sq - (size_t)w, "%s%llu", k ? ", " : "", (unsigned long long)qt->dims[k]);
        return tsc_error_set(TSC_ERR_SHAPE, "%s: tensor %s (-> step %lld layer %d %s) is [%s] and q %s is [%s]: read as %s "
                             "they disagree%s", tsc_tensor_file_path(f), tsc_import_quote(bt->name, q), pl[bad].step,
                             pl[bad].layer, names[pl[bad].name], sb, tsc_import_quote(qt->name, q2), sq,
                             o->layout_bthd ? "[B, T, H, D] (--layout bthd)" : "[B, H, T, D] (the default layout)",
                             layout_fits(f, pl, n, qp, kp, !o->layout_bthd, &other)
                                 ? (o->layout_bthd ? "; they fit [B, H, T, D]: drop --layout bthd"
                                                   : "; they fit [B, T, H, D]: give --layout bthd")
                                 : "");
    }
    uint64_t qd[TSC_TENSOR_RANK_MAX], kd[TSC_TENSOR_RANK_MAX], xd[TSC_TENSOR_RANK_MAX];
    int kr = 0, xr = 0;
    tsc_status_t st = host_shape(f, qp, o->layout_bthd, qd, &rank);
    if (!st && kp) st = host_shape(f, kp, o->layout_bthd, kd, &kr);
    if (!st && xp) st = host_shape(f, xp, o->layout_bthd, xd, &xr);
    if (st) return st;
    const tsc_tensor_info_t *qt = tsc_tensor_file_info(f, qp->tensor);
    if (rank != 4 || (kp && kr != 4) || (xp && xr != 3)) {
        const tsc_tensor_info_t *bad = rank != 4 ? qt : kp && kr != 4 ? tsc_tensor_file_info(f, kp->tensor) : tsc_tensor_file_info(f, xp->tensor);
        return tsc_error_set(TSC_ERR_SHAPE, "%s: tensor %s: rank %d; q and k are [B, H, T, D], x [B, T, C]", tsc_tensor_file_path(f),
                             tsc_import_quote(bad->name, q), bad->rank);
    }
    for (int d = 0; d < 4; d++)
        if (qd[d] > INT_MAX || (kp && kd[d] > INT_MAX) || (xp && d < 3 && xd[d] > INT_MAX))
            return tsc_error_set(TSC_ERR_SHAPE, "%s: tensor %s: a dimension above %d", tsc_tensor_file_path(f), tsc_import_quote(qt->name, q), INT_MAX);
    tsc_dump_meta_init(m);
    m->n_layer = max_layer + 1, m->n_head = (int)qd[1], m->n_kv_head = (int)(kp ? kd[1] : qd[1]), m->head_dim = (int)qd[3];
    m->d_model = xp ? (int)xd[2] : (int)(qd[1] * qd[3] > INT_MAX ? 0 : qd[1] * qd[3]);
    m->seq_len = (int)qd[2], m->batch = (int)qd[0], m->causal = o->causal ? 1 : 0;
    m->softmax_scale = o->scale > 0 ? o->scale : 1.0 / sqrt((double)qd[3]);
    m->tile_q = m->tile_k = (int)qd[2];
    snprintf(m->policy, sizeof m->policy, "%s", o->policy ? o->policy : "");
    const char *src = tsc_tensor_file_path(f), *base = strrchr(src, '/');
    if (o->producer) snprintf(m->producer, sizeof m->producer, "%s", o->producer);
    else snprintf(m->producer, sizeof m->producer, "tilescope import (%.100s)", base ? base + 1 : src);
    if (tsc_dump_meta_check(m)) return tsc_error_wrap(TSC_ERR_SHAPE, "%s: the geometry from tensor %s: ", src, tsc_import_quote(qt->name, q));
    return TSC_OK;
}

/* Reads one placed tensor (transposed to [B, H, T, D] under bthd) and hands it to the session. */
static tsc_status_t put_one(tsc_tensor_file_t *f, tsc_capture_t *cap, const placed_t *p, int bthd) {
    const tsc_tensor_info_t *t = tsc_tensor_file_info(f, p->tensor);
    char q[TSC_IMPORT_QUOTE_MAX];
    uint64_t dims[TSC_TENSOR_RANK_MAX];
    int rank, transpose = bthd && p->name <= 4;
    tsc_status_t st = host_shape(f, p, bthd, dims, &rank);
    if (!st) st = tsc_mem_check(t->nbytes * (transpose ? 2 : 1), "one tensor of the file");
    char *buf = st ? NULL : malloc(t->nbytes ? (size_t)t->nbytes : 1), *tr = NULL;
    if (!st && !buf) st = tsc_error_set(TSC_ERR_NOMEM, "out of memory");
    if (!st) st = tsc_tensor_file_read(f, p->tensor, buf);
    if (!st && transpose) {
        size_t es = tsc_format_size(t->fmt), B = t->dims[0], T = t->dims[1], H = t->dims[2], D = t->dims[3] * es;
        if (!(tr = malloc(t->nbytes ? (size_t)t->nbytes : 1))) st = tsc_error_set(TSC_ERR_NOMEM, "out of memory");
        for (size_t b = 0; !st && b < B; b++)
            for (size_t h = 0; h < H; h++)
                for (size_t i = 0; i < T; i++) memcpy(tr + ((b * H + h) * T + i) * D, buf + ((b * T + i) * H + h) * D, D);
    }
    if (!st) st = tsc_capture_put(cap, p->layer, names[p->name], t->fmt, rank, dims, tr ? tr : buf);
    free(buf);
    free(tr);
    if (st && !strstr(tsc_error_last(), tsc_tensor_file_path(f)))
        st = tsc_error_wrap(st, "%s: tensor %s (-> step %lld layer %d %s): ", tsc_tensor_file_path(f), tsc_import_quote(t->name, q),
                       p->step, p->layer, names[p->name]);
    return st;
}

/* Writes the placed tensors, step by step, into the dump at path. */
static tsc_status_t write_dump(tsc_tensor_file_t *f, const placed_t *pl, int n, const tsc_dump_meta_t *m, int bthd,
                               const char *path) {
    tsc_capture_t *cap = NULL;
    /* The session folder beside the temporary dump is created here, exclusively: nothing planted at
     * its name beforehand is reused. */
    char dir[4200];
    snprintf(dir, sizeof dir, "%s.capture", path);
    tsc_status_t st = mkdir(dir, 0755) == 0 ? TSC_OK
                    : tsc_error_set(TSC_ERR_IO, "%s: cannot create the import's session folder: %s", dir, strerror(errno));
    if (!st) st = tsc_capture_open(&cap, path, m, NULL);
    if (st && !cap) rmdir(dir);
    for (int i = 0; !st && i < n; i++) {
        if (i == 0 || pl[i].step != pl[i - 1].step) {
            if (i) st = tsc_capture_step_end(cap);
            if (!st) st = tsc_capture_step_begin(cap, pl[i].step);
        }
        if (!st) st = put_one(f, cap, &pl[i], bthd);
    }
    if (!st && n) st = tsc_capture_step_end(cap);
    if (cap) {
        char keep[4096];
        snprintf(keep, sizeof keep, "%s", st ? tsc_error_last() : "");
        tsc_status_t cst = tsc_capture_close(cap);
        if (st) st = tsc_error_set(st, "%s", keep);
        else st = cst;
        if (st) { /* the session was the import's own temporary: nothing of it is left behind */
            snprintf(keep, sizeof keep, "%s", tsc_error_last());
            (void)tsc_capture_discard(dir); /* best effort: the error reported is the import's */
            st = tsc_error_set(st, "%s", keep);
        }
    }
    return st;
}

static tsc_status_t make_result(const tsc_tensor_file_t *f, const placed_t *pl, int n, const int *skip, int n_skip,
                                tsc_import_result_t **res) {
    tsc_import_result_t *r = calloc(1, sizeof *r);
    if (!r || !(r->steps = malloc(sizeof *r->steps * (size_t)(n + 1))) || !(r->layers = malloc(sizeof *r->layers * (size_t)(n + 1))) ||
        !(r->skipped = calloc((size_t)n_skip + 1, sizeof *r->skipped)))
        return tsc_import_result_free(r), tsc_error_set(TSC_ERR_NOMEM, "out of memory");
    r->n_datasets = n;
    for (int i = 0; i < n; i++) {
        if (!r->n_steps || r->steps[r->n_steps - 1] != pl[i].step) r->steps[r->n_steps++] = pl[i].step;
        int seen = 0;
        for (int k = 0; k < r->n_layers; k++) seen |= r->layers[k] == pl[i].layer;
        if (!seen) r->layers[r->n_layers++] = pl[i].layer;
    }
    for (int i = 1; i < r->n_layers; i++)
        for (int k = i; k > 0 && r->layers[k - 1] > r->layers[k]; k--) {
            int t = r->layers[k];
            r->layers[k] = r->layers[k - 1], r->layers[k - 1] = t;
        }
    for (int i = 0; i < n_skip; i++)
        if (!(r->skipped[r->n_skipped++] = strdup(skipped_name(f, skip[i]))))
            return tsc_import_result_free(r), tsc_error_set(TSC_ERR_NOMEM, "out of memory");
    qsort(r->skipped, (size_t)r->n_skipped, sizeof *r->skipped, cmp_str);
    *res = r;
    return TSC_OK;
}

/* Every tensor placed by the maps or listed as skipped; pl sorted by (step, layer, name); duplicates
 * and a missing q refused. */
static tsc_status_t place_all(const tsc_tensor_file_t *f, const map_t *maps, int n_maps, const tsc_import_opts_t *o,
                              placed_t *pl, int *n, int *skip, int *n_skip) {
    const char *src = tsc_tensor_file_path(f);
    char q[TSC_IMPORT_QUOTE_MAX], q2[TSC_IMPORT_QUOTE_MAX];
    int nt = tsc_tensor_file_count(f), hit, has_q = 0;
    *n = *n_skip = 0;
    for (int i = 0; i < nt; i++) {
        tsc_status_t st = place_one(f, tsc_tensor_file_info(f, i)->name, i, maps, n_maps, o->step, &pl[*n], &hit);
        if (st) return st;
        if (hit) has_q |= pl[(*n)++].name == NM_Q;
        else skip[(*n_skip)++] = i;
    }
    /* Tensors of a type tilescope does not store are skipped, unless a map asks for one. */
    for (int i = 0; i < tsc_tensor_file_other_count(f); i++) {
        const tsc_tensor_info_t *t = tsc_tensor_file_other(f, i);
        placed_t p;
        tsc_status_t st = place_one(f, t->name, -1, maps, n_maps, o->step, &p, &hit);
        if (st) return st;
        if (hit)
            return tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s (-> %s): dtype %s is not floating-point", src, tsc_import_quote(t->name, q),
                                 names[p.name], t->dtype);
        skip[(*n_skip)++] = -1 - i;
    }
    qsort(pl, (size_t)*n, sizeof *pl, cmp_placed);
    for (int i = 1; i < *n; i++)
        if (pl[i].step == pl[i - 1].step && pl[i].layer == pl[i - 1].layer && pl[i].name == pl[i - 1].name)
            return tsc_error_set(TSC_ERR_FORMAT, "%s: tensors %s and %s both map to step %lld layer %d %s", src,
                                 tsc_import_quote(tsc_tensor_file_info(f, pl[i - 1].tensor)->name, q),
                                 tsc_import_quote(tsc_tensor_file_info(f, pl[i].tensor)->name, q2), pl[i].step, pl[i].layer,
                                 names[pl[i].name]);
    if (has_q) return TSC_OK;
    tsc_strbuf_t sb;
    tsc_strbuf_init(&sb);
    tsc_strbuf_printf(&sb, "%s: no tensor maps to q (tensors:", src);
    for (int i = 0; i < nt && i < 12; i++) tsc_strbuf_printf(&sb, "%s %s", i ? "," : "", tsc_import_quote(tsc_tensor_file_info(f, i)->name, q));
    tsc_strbuf_printf(&sb, "%s; maps:", nt > 12 ? ", ..." : "");
    for (int i = 0; i < n_maps; i++) tsc_strbuf_printf(&sb, "%s %.*s", i ? "," : "", (int)maps[i].pat_len, maps[i].pat);
    tsc_status_t st = tsc_error_set(TSC_ERR_FORMAT, "%s)", tsc_strbuf_str(&sb));
    tsc_strbuf_free(&sb);
    return st;
}

tsc_status_t tsc_import_run(const char *src, const char *out, const tsc_import_opts_t *opts, tsc_import_result_t **res) {
    tsc_import_opts_t def;
    if (!opts) tsc_import_opts_init(&def), opts = &def;
    if (res) *res = NULL;
    if (!src || !out) return tsc_error_set(TSC_ERR_ARG, "tsc_import_run: NULL path");
    if (opts->policy && strlen(opts->policy) >= sizeof(((tsc_dump_meta_t *)0)->policy))
        return tsc_error_set(TSC_ERR_ARG, "policy '%.40s...' is longer than 127 bytes", opts->policy);
    int n_maps = opts->maps && opts->n_maps > 0 ? opts->n_maps : 4;
    map_t *maps = calloc((size_t)n_maps, sizeof *maps);
    if (!maps) return tsc_error_set(TSC_ERR_NOMEM, "out of memory");
    tsc_status_t st = TSC_OK;
    for (int i = 0; i < n_maps && !st; i++) st = map_parse(opts->maps && opts->n_maps > 0 ? opts->maps[i] : default_maps[i], &maps[i]);
    tsc_tensor_file_t *f = NULL;
    if (!st) st = tsc_tensor_file_open(&f, src);
    int nt = tsc_tensor_file_count(f), n = 0, n_skip = 0;
    placed_t *pl = st ? NULL : malloc(sizeof *pl * (size_t)(nt + 1));
    int *skip = st ? NULL : malloc(sizeof *skip * (size_t)(nt + tsc_tensor_file_other_count(f) + 1));
    if (!st && (!pl || !skip)) st = tsc_error_set(TSC_ERR_NOMEM, "out of memory");
    if (!st) st = place_all(f, maps, n_maps, opts, pl, &n, skip, &n_skip);
    tsc_dump_meta_t meta;
    if (!st) st = geometry(f, pl, n, opts, &meta);
    tsc_out_t o;
    if (!st) st = tsc_out_open_name(&o, out);
    if (!st) {
        st = write_dump(f, pl, n, &meta, opts->layout_bthd, o.tmp);
        if (st) tsc_out_abort(&o);
        else st = tsc_out_commit(&o);
    }
    if (!st && res) st = make_result(f, pl, n, skip, n_skip, res);
    tsc_tensor_file_close(f);
    free(pl), free(skip), free(maps);
    return st;
}

void tsc_import_result_free(tsc_import_result_t *r) {
    if (!r) return;
    for (int i = 0; r->skipped && i < r->n_skipped; i++) free(r->skipped[i]);
    free(r->skipped), free(r->steps), free(r->layers), free(r);
}

void tsc_import_result_json(const tsc_import_result_t *r, const char *out, tsc_json_t *j) {
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "path", out);
    tsc_json_kv_int(j, "datasets", r->n_datasets);
    tsc_json_key(j, "steps");
    tsc_json_array_begin(j);
    for (int i = 0; i < r->n_steps; i++) tsc_json_int(j, r->steps[i]);
    tsc_json_array_end(j);
    tsc_json_key(j, "layers");
    tsc_json_array_begin(j);
    for (int i = 0; i < r->n_layers; i++) tsc_json_int(j, r->layers[i]);
    tsc_json_array_end(j);
    tsc_json_key(j, "skipped");
    tsc_json_array_begin(j);
    for (int i = 0; i < r->n_skipped; i++) tsc_json_string(j, r->skipped[i]);
    tsc_json_array_end(j);
    tsc_json_object_end(j);
}
