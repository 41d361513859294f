/* select.c: the selection spec (tsc_select.h). */
#include "tsc_select.h"

#include "tsc_dump.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tsc_select_set_all(tsc_select_set_t *set) {
    memset(set, 0, sizeof *set);
    set->all = 1;
}

void tsc_select_init(tsc_select_t *s) {
    tsc_select_set_all(&s->steps);
    tsc_select_set_all(&s->layers);
    tsc_select_set_all(&s->heads);
    tsc_select_set_all(&s->batches);
}

/* Parses a non-negative integer filling [p, end); -1 when empty, -2 on error. */
static long long parse_num(const char *p, const char *end) {
    if (p == end) return -1;
    long long v = 0;
    for (const char *c = p; c < end; c++) {
        if (*c < '0' || *c > '9') return -2;
        if (v > (TSC_SELECT_OPEN - 9) / 10) return -2;
        v = v * 10 + (*c - '0');
    }
    return v;
}

/* One set item "N", "a:b", "a:b:s", "a:", ":b", "a::s" in [p, end). */
static tsc_status_t parse_item(tsc_select_set_t *set, const char *p, const char *end) {
    const char *c1 = memchr(p, ':', (size_t)(end - p));
    tsc_select_range_t r;
    int len = (int)(end - p);
    if (set->n >= TSC_SELECT_MAX_ITEMS)
        return tsc_error_set(TSC_ERR_ARG, "selection: more than %d items", TSC_SELECT_MAX_ITEMS);
    if (!c1) {
        long long v = parse_num(p, end);
        if (v < 0) return tsc_error_set(TSC_ERR_ARG, "selection: '%.*s' is not a non-negative integer", len, p);
        r.start = v; r.stop = v + 1; r.stride = 1;
    } else {
        const char *c2 = memchr(c1 + 1, ':', (size_t)(end - c1 - 1));
        const char *stop_end = c2 ? c2 : end;
        long long a = parse_num(p, c1), b = parse_num(c1 + 1, stop_end), s = c2 ? parse_num(c2 + 1, end) : -1;
        if (a == -2 || b == -2 || s == -2 || (c2 && memchr(c2 + 1, ':', (size_t)(end - c2 - 1))))
            return tsc_error_set(TSC_ERR_ARG, "selection: '%.*s' is not start:stop[:stride] of "
                                 "non-negative integers", len, p);
        r.start = a < 0 ? 0 : a;
        r.stop = b < 0 ? TSC_SELECT_OPEN : b;
        r.stride = s < 0 ? 1 : s;
        if (r.stride <= 0) return tsc_error_set(TSC_ERR_ARG, "selection: stride must be positive in '%.*s'", len, p);
        if (r.stop <= r.start)
            return tsc_error_set(TSC_ERR_ARG, "selection: empty range '%.*s' (stop is exclusive and must exceed "
                                 "start)", len, p);
    }
    set->item[set->n++] = r;
    return TSC_OK;
}

static tsc_status_t add_item(tsc_select_set_t *set, const char *p, const char *end) {
    if (end - p == 3 && strncmp(p, "all", 3) == 0) {
        tsc_select_set_all(set);
        return TSC_OK;
    }
    if (p == end) return tsc_error_set(TSC_ERR_ARG, "selection: empty item");
    if (set->all) { set->all = 0; set->n = 0; }
    return parse_item(set, p, end);
}

tsc_status_t tsc_select_set_parse(tsc_select_set_t *set, const char *text) {
    tsc_select_set_t tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.all = 1;
    if (!text || !*text) return tsc_error_set(TSC_ERR_ARG, "selection: empty set (use 'all')");
    int first = 1;
    for (const char *p = text;;) {
        const char *e = strchr(p, ',');
        if (!e) e = p + strlen(p);
        if (first) { tmp.all = 0; first = 0; }
        tsc_status_t st = add_item(&tmp, p, e);
        if (st != TSC_OK) return tsc_error_wrap(st, "'%s': ", text);
        if (!*e) break;
        p = e + 1;
    }
    *set = tmp;
    return TSC_OK;
}

tsc_status_t tsc_select_parse(tsc_select_t *s, const char *spec) {
    tsc_select_init(s);
    if (!spec || !*spec) return TSC_OK;
    tsc_select_t tmp;
    tsc_select_init(&tmp);
    tsc_select_set_t *cur = NULL;
    int seen[4] = {0, 0, 0, 0};
    for (const char *p = spec;;) {
        const char *e = strchr(p, ',');
        if (!e) e = p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(e - p));
        const char *val = p;
        if (eq) {
            static const char *keys[4] = {"steps", "layers", "heads", "batches"};
            tsc_select_set_t *sets[4] = {&tmp.steps, &tmp.layers, &tmp.heads, &tmp.batches};
            int k = -1;
            for (int i = 0; i < 4; i++) {
                size_t kl = strlen(keys[i]);
                /* accept the singular too ("step=", "layer=", "head=", "batch=") */
                if (((size_t)(eq - p) == kl && strncmp(p, keys[i], kl) == 0) ||
                    ((size_t)(eq - p) == (i == 3 ? kl - 2 : kl - 1) && strncmp(p, keys[i], (size_t)(eq - p)) == 0))
                    k = i;
            }
            if (k < 0)
                return tsc_error_set(TSC_ERR_ARG, "selection '%s': unknown key '%.*s' (expected steps, layers, heads "
                                     "or batches)", spec, (int)(eq - p), p);
            if (seen[k]) return tsc_error_set(TSC_ERR_ARG, "selection '%s': key '%s' given twice", spec, keys[k]);
            seen[k] = 1;
            cur = sets[k];
            cur->all = 0;
            cur->n = 0;
            val = eq + 1;
        } else if (!cur) {
            return tsc_error_set(TSC_ERR_ARG, "selection '%s': '%.*s' has no key (write steps=..., layers=..., "
                                 "heads=...)", spec, (int)(e - p), p);
        }
        tsc_status_t st = add_item(cur, val, e);
        if (st != TSC_OK) return tsc_error_wrap(st, "'%s': ", spec);
        if (!*e) break;
        p = e + 1;
    }
    *s = tmp;
    return TSC_OK;
}

int tsc_select_set_has(const tsc_select_set_t *set, long long v) {
    if (set->all) return v >= 0;
    if (v < 0) return 0;
    for (int i = 0; i < set->n; i++) {
        const tsc_select_range_t *r = &set->item[i];
        if (v >= r->start && v < r->stop && (v - r->start) % r->stride == 0) return 1;
    }
    return 0;
}

int tsc_select_has(const tsc_select_t *s, long long step, long long layer, long long head) {
    return tsc_select_set_has(&s->steps, step) && tsc_select_set_has(&s->layers, layer) &&
           (head < 0 || tsc_select_set_has(&s->heads, head));
}

size_t tsc_select_size(void) { return sizeof(tsc_select_t); }

int tsc_select_has_step(const tsc_select_t *s, long long step) { return s && tsc_select_set_has(&s->steps, step); }

long long tsc_select_set_count(const tsc_select_set_t *set, long long n) {
    long long c = 0;
    for (long long v = 0; v < n; v++) c += tsc_select_set_has(set, v);
    return c;
}

const char *tsc_select_set_format(const tsc_select_set_t *set, char *buf, size_t cap) {
    if (!cap) return buf;
    buf[0] = '\0';
    if (set->all) { snprintf(buf, cap, "all"); return buf; }
    if (set->n == 0) { snprintf(buf, cap, "none"); return buf; }
    size_t len = 0;
    for (int i = 0; i < set->n && len < cap; i++) {
        const tsc_select_range_t *r = &set->item[i];
        int w;
        const char *sep = i ? "," : "";
        if (r->stop == r->start + 1) w = snprintf(buf + len, cap - len, "%s%lld", sep, r->start);
        else if (r->stop == TSC_SELECT_OPEN)
            w = r->stride == 1 ? snprintf(buf + len, cap - len, "%s%lld:", sep, r->start)
                               : snprintf(buf + len, cap - len, "%s%lld::%lld", sep, r->start, r->stride);
        else if (r->stride == 1) w = snprintf(buf + len, cap - len, "%s%lld:%lld", sep, r->start, r->stop);
        else w = snprintf(buf + len, cap - len, "%s%lld:%lld:%lld", sep, r->start, r->stop, r->stride);
        if (w < 0) break;
        len += (size_t)w;
    }
    return buf;
}

const char *tsc_select_format(const tsc_select_t *s, char *buf, size_t cap) {
    char a[512], b[512], c[512], d[512];
    snprintf(buf, cap, "steps=%s,layers=%s,heads=%s,batches=%s", tsc_select_set_format(&s->steps, a, sizeof a),
             tsc_select_set_format(&s->layers, b, sizeof b), tsc_select_set_format(&s->heads, c, sizeof c),
             tsc_select_set_format(&s->batches, d, sizeof d));
    return buf;
}

/* ---------------------------------------------------------------- what a dump offers */

/* Appends to b (at *len of cap) the ascending values v[0..n) as runs: "0-11", "0-99000 every 1000",
 * "3, 7"; ", ... (N in all)" once cap is nearly full. */
static void runs_text(const long long *v, int n, char *b, size_t cap, size_t *len) {
    for (int i = 0; i < n && *len < cap;) {
        int j = i + 1;
        long long stride = j < n ? v[j] - v[i] : 0;
        while (j < n && v[j] - v[j - 1] == stride) j++;
        int w, run = j - i >= (stride == 1 ? 3 : 4);
        const char *sep = i ? ", " : "";
        if (*len + 48 >= cap) {
            snprintf(b + *len, cap - *len, "%s... (%d in all)", sep, n);
            *len = cap;
            return;
        }
        if (run && stride == 1) w = snprintf(b + *len, cap - *len, "%s%lld-%lld", sep, v[i], v[j - 1]);
        else if (run) w = snprintf(b + *len, cap - *len, "%s%lld-%lld every %lld", sep, v[i], v[j - 1], stride);
        else w = snprintf(b + *len, cap - *len, "%s%lld", sep, v[i]), j = i + 1;
        *len += w > 0 ? (size_t)w : 0;
        i = j;
    }
}

const char *tsc_select_runs_text(const long long *v, int n, char *buf, size_t cap) {
    size_t len = 0;
    if (cap) buf[0] = '\0';
    runs_text(v, n, buf, cap, &len);
    return buf;
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* The dump's layers over all its steps, ascending, into *out (n_layer + 1 slots); their count, or -1
 * out of memory. */
static int dump_layers_all(tsc_dump_t *d, long long **out) {
    int n_layer = tsc_dump_meta(d)->n_layer, n = 0, nl;
    long long *u = *out = malloc(sizeof *u * ((size_t)(n_layer > 0 ? n_layer : 0) + 1));
    int *ls = malloc(sizeof *ls * ((size_t)(n_layer > 0 ? n_layer : 0) + 1));
    if (!u || !ls) {
        free(ls);
        return -1;
    }
    for (int si = 0; si < tsc_dump_n_steps(d); si++) {
        if (tsc_dump_layers(d, tsc_dump_step_at(d, si), ls, n_layer, &nl) != TSC_OK) continue;
        for (int i = 0; i < nl && i < n_layer; i++) {
            int seen = 0;
            for (int k = 0; k < n && !seen; k++) seen = u[k] == ls[i];
            if (!seen) u[n++] = ls[i];
        }
    }
    free(ls);
    qsort(u, (size_t)n, sizeof *u, cmp_ll);
    return n;
}

/* 1 when set holds one of v[0..n). */
static int set_hits(const tsc_select_set_t *set, const long long *v, int n) {
    for (int i = 0; i < n; i++)
        if (tsc_select_set_has(set, v[i])) return 1;
    return 0;
}

const char *tsc_select_miss_text(const tsc_select_t *sel, tsc_dump_t *d, char *buf, size_t cap) {
    const tsc_dump_meta_t *m = tsc_dump_meta(d);
    int ns = tsc_dump_n_steps(d), nmax = m->n_head > m->batch ? m->n_head : m->batch;
    long long *steps = malloc(sizeof *steps * ((size_t)(ns > 0 ? ns : 0) + 1)), *layers = NULL;
    long long *idx = malloc(sizeof *idx * ((size_t)(nmax > 0 ? nmax : 0) + 1));
    int nl = steps && idx ? dump_layers_all(d, &layers) : -1;
    if (nl < 0) {
        snprintf(buf, cap, "the selection matches nothing in the dump (`tilescope info` lists what it has)");
        free(steps), free(idx), free(layers);
        return buf;
    }
    for (int i = 0; i < ns; i++) steps[i] = tsc_dump_step_at(d, i);
    for (int i = 0; i < nmax; i++) idx[i] = i;
    const struct { const char *name; const tsc_select_set_t *set; const long long *v; int n; } part[4] = {
        {"steps", &sel->steps, steps, ns}, {"layers", &sel->layers, layers, nl},
        {"heads", &sel->heads, idx, m->n_head}, {"batch rows", &sel->batches, idx, m->batch}};
    size_t len = 0;
    char s[512];
    for (int k = 0; k < 4 && len < cap; k++) {
        if (set_hits(part[k].set, part[k].v, part[k].n)) continue;
        int w = snprintf(buf + len, cap - len, "%s%s (%s=%s)", len ? ", nor of its " : "matches none of the dump's ",
                         part[k].name, k == 3 ? "batches" : part[k].name, tsc_select_set_format(part[k].set, s, sizeof s));
        len += w > 0 ? (size_t)w : 0;
    }
    if (len == 0 && cap) {
        int w = snprintf(buf, cap, "matches no (step, layer) that the dump holds");
        len = w > 0 ? (size_t)w : 0;
    }
    for (int k = 0; k < 4 && len < cap; k++) {
        int w = snprintf(buf + len, cap - len, k ? "; %s " : "; the dump has %s ", part[k].name);
        len += w > 0 ? (size_t)w : 0;
        if (len >= cap) break;
        if (part[k].n == 0) {
            w = snprintf(buf + len, cap - len, "none");
            len += w > 0 ? (size_t)w : 0;
        } else {
            runs_text(part[k].v, part[k].n, buf, cap, &len);
        }
    }
    free(steps), free(idx), free(layers);
    return buf;
}
