/* dump.c: dump format v1 reader, validator and whole-dump writer (tsc_dump.h). */
#include "tsc_dump.h"
#include "tsc_h5.h"
#include "capture_internal.h"
#include "manifest_internal.h"
#include "tsc_mem.h"
#include "tsc_strbuf.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- metadata -------------------------------------------------------------------------------- */

void tsc_dump_meta_init(tsc_dump_meta_t *m) {
    memset(m, 0, sizeof *m);
    m->format_version = TSC_DUMP_FORMAT_VERSION;
    m->n_layer = m->n_head = m->n_kv_head = m->head_dim = m->d_model = m->seq_len = m->batch = 1;
    m->causal = 1;
    m->softmax_scale = 1.0;
    m->tile_q = m->tile_k = 64;
    snprintf(m->policy, sizeof m->policy, "unknown");
    m->rank = 0;
    m->world_size = 1;
    snprintf(m->producer, sizeof m->producer, "tilescope");
}

/* ---- problems: every problem of a file in one message ------------------------------------------
 * Opening a dump collects each problem of its root (and, when the geometry is readable, of its
 * steps, layers and datasets) instead of stopping at the first: a writer fixes them all at once. */

#define TSC_DUMP_MAX_PROBLEMS 50

typedef struct {
    tsc_strbuf_t text;    /* "p1; p2; ..." (the first TSC_DUMP_MAX_PROBLEMS) */
    int n;                /* every problem, listed or not */
    tsc_status_t first;   /* the status of the first one */
    const char *path;     /* a validator message's leading "<path>: " is dropped (the list names it once) */
} problems_t;

static void prob_add(problems_t *p, tsc_status_t code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void prob_add(problems_t *p, tsc_status_t code, const char *fmt, ...) {
    if (p->n == 0) p->first = code;
    if (p->n < TSC_DUMP_MAX_PROBLEMS) {
        va_list ap;
        va_start(ap, fmt);
        if (p->n) tsc_strbuf_puts(&p->text, "; ");
        tsc_strbuf_vprintf(&p->text, fmt, ap);
        va_end(ap);
    }
    p->n++;
}

/* The one error of all problems: "path: P" for one, "path: N problems: P1; P2; ...; and M more". */
static tsc_status_t prob_fail(problems_t *p, const char *path) {
    tsc_status_t st;
    if (tsc_strbuf_status(&p->text) != TSC_OK)
        st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory listing problems", path);
    else if (p->n == 1) st = tsc_error_set(p->first, "%s: %s", path, tsc_strbuf_str(&p->text));
    else if (p->n <= TSC_DUMP_MAX_PROBLEMS)
        st = tsc_error_set(p->first, "%s: %d problems: %s", path, p->n, tsc_strbuf_str(&p->text));
    else
        st = tsc_error_set(p->first, "%s: %d problems: %s; and %d more", path, p->n, tsc_strbuf_str(&p->text),
                           p->n - TSC_DUMP_MAX_PROBLEMS);
    tsc_strbuf_free(&p->text);
    return st;
}

/* Every inconsistency of m, each added to p. */
static void meta_problems(const tsc_dump_meta_t *m, problems_t *p) {
    struct { const char *name; int v; } pos[] = {
        {"n_layer", m->n_layer}, {"n_head", m->n_head}, {"n_kv_head", m->n_kv_head}, {"head_dim", m->head_dim},
        {"d_model", m->d_model}, {"seq_len", m->seq_len}, {"batch", m->batch}, {"tile_q", m->tile_q},
        {"tile_k", m->tile_k}, {"world_size", m->world_size}};
    int positive = 1;
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i].v <= 0) {
            prob_add(p, TSC_ERR_SHAPE, "metadata: %s = %d, expected a positive integer", pos[i].name, pos[i].v);
            positive = 0;
        }
    if (positive && m->n_head % m->n_kv_head)
        prob_add(p, TSC_ERR_SHAPE, "metadata: n_head = %d is not a multiple of n_kv_head = %d", m->n_head,
                 m->n_kv_head);
    if (positive && (m->rank < 0 || m->rank >= m->world_size))
        prob_add(p, TSC_ERR_SHAPE, "metadata: rank = %d outside [0, world_size = %d)", m->rank, m->world_size);
    if (!(m->softmax_scale > 0) || !isfinite(m->softmax_scale))
        prob_add(p, TSC_ERR_SHAPE, "metadata: softmax_scale = %g, expected a positive finite number", m->softmax_scale);
    if (m->causal != 0 && m->causal != 1)
        prob_add(p, TSC_ERR_SHAPE, "metadata: causal = %d, expected 0 or 1", m->causal);
}

tsc_status_t tsc_dump_meta_check(const tsc_dump_meta_t *m) {
    problems_t p = {0};
    tsc_strbuf_init(&p.text);
    meta_problems(m, &p);
    tsc_status_t st = TSC_OK;
    if (p.n) {
        /* the first problem alone, as before (callers prefix their own context) */
        const char *t = tsc_strbuf_str(&p.text), *semi = strstr(t, "; ");
        st = tsc_error_set(p.first, "%.*s", semi ? (int)(semi - t) : (int)strlen(t), t);
    }
    tsc_strbuf_free(&p.text);
    return st;
}

static int is_per_head_name(const char *name) {
    return !strcmp(name, "q") || !strcmp(name, "k") || !strcmp(name, "v") || !strcmp(name, "o") ||
           !strcmp(name, "do") || !strcmp(name, "lse") || !strcmp(name, "dq") || !strcmp(name, "dk") ||
           !strcmp(name, "dv") || !strncmp(name, "tiles/", 6);
}

tsc_status_t tsc_dump_expected_shape(const tsc_dump_meta_t *m, const char *name, int *rank, uint64_t dims[4],
                                     int *per_head) {
    uint64_t B = (uint64_t)m->batch, H = (uint64_t)m->n_head, K = (uint64_t)m->n_kv_head, T = (uint64_t)m->seq_len,
             D = (uint64_t)m->head_dim, C = (uint64_t)m->d_model;
    *per_head = is_per_head_name(name);
    dims[0] = dims[1] = dims[2] = dims[3] = 0;
    if (!strcmp(name, "q") || !strcmp(name, "o") || !strcmp(name, "do") || !strcmp(name, "dq")) {
        *rank = 4; dims[0] = B; dims[1] = H; dims[2] = T; dims[3] = D;
    } else if (!strcmp(name, "k") || !strcmp(name, "v") || !strcmp(name, "dk") || !strcmp(name, "dv")) {
        *rank = 4; dims[0] = B; dims[1] = K; dims[2] = T; dims[3] = D;
    } else if (!strcmp(name, "lse")) {
        *rank = 3; dims[0] = B; dims[1] = H; dims[2] = T;
    } else if (!strcmp(name, "x")) {
        *rank = 3; dims[0] = B; dims[1] = T; dims[2] = C;
    } else if (!strcmp(name, "w_q")) {
        *rank = 2; dims[0] = H * D; dims[1] = C;
    } else if (!strcmp(name, "w_k") || !strcmp(name, "w_v")) {
        *rank = 2; dims[0] = K * D; dims[1] = C;
    } else if (!strcmp(name, "w_o")) {
        *rank = 2; dims[0] = C; dims[1] = H * D;
    } else if (!strncmp(name, "tiles/", 6) && name[6] && !strchr(name + 6, '/')) {
        *rank = 4; dims[0] = B; dims[1] = H; dims[2] = T; dims[3] = (T + (uint64_t)m->tile_k - 1) / (uint64_t)m->tile_k;
    } else {
        return tsc_error_set(TSC_ERR_ARG, "unknown dataset name '%s' (expected q, k, v, o, do, lse, dq, dk, dv, x, w_q, w_k, w_v, "
                             "w_o or tiles/<stat>)", name);
    }
    return TSC_OK;
}

static const char *dim_labels_of(const char *name) {
    if (!strcmp(name, "q") || !strcmp(name, "o") || !strcmp(name, "do") || !strcmp(name, "dq"))
        return "batch,head,token,feature";
    if (!strcmp(name, "k") || !strcmp(name, "v") || !strcmp(name, "dk") || !strcmp(name, "dv"))
        return "batch,kv_head,token,feature";
    if (!strcmp(name, "lse")) return "batch,head,token";
    if (!strcmp(name, "x")) return "batch,token,channel";
    if (!strcmp(name, "w_o")) return "out_channel,in_feature";
    if (!strncmp(name, "w_", 2)) return "out_feature,in_channel";
    return "batch,head,token,key_tile";
}

static const char *units_of(const char *name) {
    if (!strcmp(name, "lse")) return "nats";
    if (!strcmp(name, "do")) return "dloss/do";
    if (!strcmp(name, "dq") || !strcmp(name, "dk") || !strcmp(name, "dv")) return "gradient";
    if (!strncmp(name, "tiles/", 6)) return "per tile";
    if (!strncmp(name, "w_", 2)) return "weight";
    return "activation";
}

static void shape_str(int rank, const uint64_t *dims, char *buf, size_t cap) {
    size_t len = 0;
    len += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%llu", i ? ", " : "", (unsigned long long)dims[i]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
}

/* 1 when a dataset name of shape dims[0..rank) matches the shape the metadata implies (erank,
 * edims); tiles/<stat> may use their own key-tile count: only its first three dimensions are
 * fixed, the fourth must be in [1, T] (no more key tiles than keys). */
static int shape_ok(const char *name, int rank, const uint64_t *dims, int erank, const uint64_t *edims) {
    if (rank != erank) return 0;
    int tiles = strncmp(name, "tiles/", 6) == 0, ncheck = tiles ? 3 : erank;
    for (int i = 0; i < ncheck; i++)
        if (dims[i] != edims[i]) return 0;
    return !tiles || (dims[3] > 0 && dims[3] <= edims[2]);  /* a key tile holds at least one key */
}

/* ---- reader ---------------------------------------------------------------------------------- */

struct tsc_dump {
    char path[4096];
    char dir[4200];          /* session folder, "" for a single file */
    tsc_dump_meta_t meta;
    hid_t root;              /* the single file, or the session's session.h5 */
    int n_steps;
    long long *steps;
    long long incomplete;
    long long *no_complete;  /* step groups without the attribute 'complete' (ignored; validator errors) */
    int n_no_complete;
    uint64_t size;
    /* the open step file of a session (one at a time) */
    long long step_open;
    hid_t step_fid;
    /* the last dataset opened (streaming reads come head after head from one dataset) */
    char ds_path[256];
    hid_t ds;
    tsc_dump_dataset_info_t ds_info;
    tsc_format_t ds_attr_fmt;  /* the open dataset's dtype attribute, when it differs from its storage */
    int ds_check_values;       /* 1: every value read must be one of ds_attr_fmt (docs/FORMAT.md §1.4) */
    void *buf;               /* one slice of raw bits, for conversion to float */
    size_t buf_cap;
    /* datasets that passed tsc_h5_check_dataset in this handle, by path (checked_find) */
    struct checked *checked;
    size_t checked_cap, checked_n;
    /* a run of many ranks (manifest.c): every per-layer call goes to the rank holding it */
    tsc_mview_t *mv;
};

/* ---- the verdicts of the untrusted-input check, kept per handle ---------------------------------
 * tsc_h5_check_dataset measures a dataset's stored bytes with H5Dget_storage_size, which walks
 * every chunk of the dataset: a per-head dataset has B x H chunks, and the reader opens it once per
 * head, so asking at every open made reading a dump cost O(heads^2) (8192 heads: most of the
 * time of `analyze`). A dataset that passed (the walk at open, or the first open for reading)
 * is kept here with the stored bytes measured, by its path "step_S/layer_L/name" (the step file of
 * a session holds the same paths), and later opens reuse the verdict: one check per dataset and
 * handle. Only datasets whose storage was measured are kept (not virtual or external ones let
 * through as trusted: their check is cheap, it measures nothing), so a kept verdict holds whether
 * or not TSC_ALLOW_EXTERNAL changes later. A refusal is never kept: it fails the open. */

struct checked {
    char *path;         /* NULL: an empty slot */
    uint64_t stored;    /* H5Dget_storage_size when checked */
};

static uint64_t path_hash(const char *p) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

static const struct checked *checked_find(const tsc_dump_t *d, const char *path) {
    if (!d->checked_cap) return NULL;
    for (size_t i = path_hash(path) & (d->checked_cap - 1);; i = (i + 1) & (d->checked_cap - 1)) {
        const struct checked *c = &d->checked[i];
        if (!c->path) return NULL;
        if (!strcmp(c->path, path)) return c;
    }
}

/* Keeps path's verdict; out of memory keeps nothing (the next open checks again). */
static void checked_put(tsc_dump_t *d, const char *path, uint64_t stored) {
    if (stored == UINT64_MAX || checked_find(d, path)) return;
    if (2 * (d->checked_n + 1) > d->checked_cap) { /* at most half full */
        size_t nc = d->checked_cap ? 2 * d->checked_cap : 256;
        struct checked *nt = calloc(nc, sizeof *nt);
        if (!nt) return;
        for (size_t j = 0; j < d->checked_cap; j++) {
            if (!d->checked[j].path) continue;
            size_t i = path_hash(d->checked[j].path) & (nc - 1);
            while (nt[i].path) i = (i + 1) & (nc - 1);
            nt[i] = d->checked[j];
        }
        free(d->checked);
        d->checked = nt;
        d->checked_cap = nc;
    }
    char *p = strdup(path);
    if (!p) return;
    size_t i = path_hash(path) & (d->checked_cap - 1);
    while (d->checked[i].path) i = (i + 1) & (d->checked_cap - 1);
    d->checked[i].path = p;
    d->checked[i].stored = stored;
    d->checked_n++;
}

static void checked_free(tsc_dump_t *d) {
    for (size_t i = 0; i < d->checked_cap; i++) free(d->checked[i].path);
    free(d->checked);
    d->checked = NULL;
    d->checked_cap = d->checked_n = 0;
}

/* "step_00000012" -> 12; -1 when name is not a step group name. */
static long long step_of_name(const char *name, const char *suffix) {
    if (strncmp(name, "step_", 5) != 0) return -1;
    const char *p = name + 5;
    long long v = 0;
    int nd = 0;
    while (*p >= '0' && *p <= '9' && nd < 18) { v = v * 10 + (*p - '0'); p++; nd++; }
    if (nd < 8) return -1;
    if (suffix ? strncmp(p, suffix, strlen(suffix)) != 0 : *p != '\0') return -1;
    return v;
}

/* Appends step s to d->steps (capacity *cap, doubled as needed). */
static tsc_status_t push_step(tsc_dump_t *d, size_t *cap, long long s) {
    if ((size_t)d->n_steps == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        long long *ns = realloc(d->steps, nc * sizeof *ns);
        if (!ns) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory listing steps", d->path);
        d->steps = ns;
        *cap = nc;
    }
    d->steps[d->n_steps++] = s;
    return TSC_OK;
}

typedef struct {
    tsc_dump_t *d;
    size_t cap;
    tsc_status_t st;
} list_ctx_t;

static herr_t list_steps_cb(hid_t g, const char *name, const H5L_info_t *info, void *op) {
    list_ctx_t *c = op;
    long long s = step_of_name(name, NULL);
    if (s < 0) return 0;
    c->st = tsc_h5_check_link(g, name);
    if (c->st != TSC_OK) return -1;
    hid_t sg = H5Gopen2(g, name, tsc_h5_gapl());
    if (sg < 0) { c->st = tsc_error_set(TSC_ERR_FORMAT, "%s: group %s is unreadable (corrupt file)", c->d->path, name); return -1; }
    long done = 0;
    int has = H5Aexists(sg, "complete") > 0;
    int complete = has && tsc_h5_attr_read_long(sg, "complete", &done) == TSC_OK && done == 1;
    H5Gclose(sg);
    if (!has) { /* a writer that never marks its steps, not one that stopped: the validator names it */
        long long *grown = realloc(c->d->no_complete, sizeof *grown * (size_t)(c->d->n_no_complete + 1));
        if (!grown) { c->st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory listing steps", c->d->path); return -1; }
        c->d->no_complete = grown;
        c->d->no_complete[c->d->n_no_complete++] = s;
        return 0;
    }
    if (!complete) {
        if (c->d->incomplete < 0 || s < c->d->incomplete) c->d->incomplete = s;
        return 0;
    }
    c->st = push_step(c->d, &c->cap, s);
    return c->st == TSC_OK ? 0 : -1;
}

static tsc_status_t list_session(tsc_dump_t *d) {
    DIR *dp = opendir(d->dir);
    if (!dp) return tsc_error_set(TSC_ERR_IO, "%s: cannot list the session folder: %s", d->dir, strerror(errno));
    size_t cap = 0;
    struct dirent *e;
    tsc_status_t st = TSC_OK;
    while ((e = readdir(dp))) {
        long long s = step_of_name(e->d_name, ".h5");
        if (s < 0) continue;
        const char *rest = strstr(e->d_name, ".h5");
        if (strcmp(rest, ".h5") != 0) {
            /* "step_X.h5.tmp.<pid>": the step in flight when the writer stopped */
            if (strncmp(rest, ".h5.tmp.", 8) == 0 && (d->incomplete < 0 || s < d->incomplete)) d->incomplete = s;
            continue;
        }
        char fp[8192];
        snprintf(fp, sizeof fp, "%s/%s", d->dir, e->d_name);
        st = tsc_h5_check_regular(fp);  /* a FIFO planted as a step file never blocks a reader */
        if (st == TSC_OK) st = push_step(d, &cap, s);
        if (st != TSC_OK) break;
    }
    closedir(dp);
    return st;
}

static uint64_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static uint64_t folder_size(const char *dir) {
    DIR *dp = opendir(dir);
    uint64_t total = 0;
    if (!dp) return 0;
    struct dirent *e;
    char p[8192];
    while ((e = readdir(dp))) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        total += file_size(p);
    }
    closedir(dp);
    return total;
}

/* Validator reports of severity 2 become problems (the validator's callback). */
static void prob_report(void *ctx, int severity, const char *message) {
    problems_t *p = ctx;
    size_t n = p->path ? strlen(p->path) : 0;
    if (n && !strncmp(message, p->path, n) && !strncmp(message + n, ": ", 2)) message += n + 2;
    if (severity >= 2) prob_add(p, TSC_ERR_FORMAT, "%s", message);
}

/* One integer root attribute into *dst: 1 when read, 0 when absent (a problem when required) or bad. */
static int read_root_int(hid_t root, const char *name, int required, int *dst, problems_t *p) {
    long v;
    tsc_status_t st = tsc_h5_attr_read_long(root, name, &v);
    if (st == TSC_ERR_MISSING) {
        if (required) prob_add(p, TSC_ERR_MISSING, "root attribute '%s' is missing", name);
        return 0;
    }
    if (st != TSC_OK) {
        prob_add(p, st, "%s", tsc_error_last());
        return 0;
    }
    if (v < -2147483647L || v > 2147483647L) {
        prob_add(p, TSC_ERR_SHAPE, "root attribute %s = %ld is out of range", name, v);
        return 0;
    }
    *dst = (int)v;
    return 1;
}

/* One optional string root attribute: 1 when read, 0 when absent (dst keeps its default) or bad. */
static int read_root_str(hid_t root, const char *name, char *dst, size_t cap, problems_t *p) {
    char v[256];
    tsc_status_t st = tsc_h5_attr_read_str(root, name, v, sizeof v);
    if (st == TSC_OK) {
        size_t n = strlen(v) < cap ? strlen(v) : cap - 1; /* truncated to the field, as before */
        memcpy(dst, v, n);
        dst[n] = '\0';
        return 1;
    }
    if (st != TSC_ERR_MISSING) prob_add(p, st, "%s", tsc_error_last());
    return 0;
}

/* The format name and version: TSC_OK with problems added when absent or unreadable; a wrong name
 * or version fails at once (another file or another format: its other attributes mean nothing). */
static tsc_status_t read_format(hid_t root, const char *path, problems_t *p) {
    char fmt[128];
    tsc_status_t st = tsc_h5_attr_read_str(root, "format", fmt, sizeof fmt);
    if (st == TSC_ERR_MISSING)
        prob_add(p, TSC_ERR_FORMAT, "not a tilescope dump (root attribute 'format' is missing; expected '%s')",
                 TSC_DUMP_FORMAT_NAME);
    else if (st != TSC_OK) prob_add(p, TSC_ERR_FORMAT, "not a tilescope dump: %s", tsc_error_last());
    else if (strcmp(fmt, TSC_DUMP_FORMAT_NAME) != 0)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: not a tilescope dump (root attribute format = '%s', expected '%s')",
                             path, fmt, TSC_DUMP_FORMAT_NAME);
    long v;
    st = tsc_h5_attr_read_long(root, "format_version", &v);
    if (st == TSC_ERR_MISSING) prob_add(p, TSC_ERR_MISSING, "root attribute 'format_version' is missing");
    else if (st != TSC_OK) prob_add(p, TSC_ERR_FORMAT, "%s", tsc_error_last());
    else if (v != TSC_DUMP_FORMAT_VERSION)
        return tsc_error_set(TSC_ERR_VERSION, "%s: dump format version %ld, this build of tilescope reads version %d; "
                             "use a tilescope that matches the writer (or re-export the dump)", path, v,
                             TSC_DUMP_FORMAT_VERSION);
    return TSC_OK;
}

/* Reads and checks the root attributes of the dump (docs/FORMAT.md §1.1), adding every problem
 * to p; *geometry 1 when every required attribute was read and they are consistent (the shapes
 * of the datasets can then be checked). Fails at once only for another format or version. */
static tsc_status_t read_meta(hid_t root, const char *path, tsc_dump_meta_t *m, problems_t *p, int *geometry) {
    *geometry = 0;
    tsc_dump_meta_init(m);
    tsc_status_t st = read_format(root, path, p);
    if (st != TSC_OK) return st;
    struct { const char *name; int *dst; } ints[] = {
        {"n_layer", &m->n_layer}, {"n_head", &m->n_head}, {"n_kv_head", &m->n_kv_head}, {"head_dim", &m->head_dim},
        {"d_model", &m->d_model}, {"seq_len", &m->seq_len}, {"batch", &m->batch}, {"causal", &m->causal},
        {"rank", &m->rank}, {"world_size", &m->world_size}};
    int have = 0;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        have += read_root_int(root, ints[i].name, 1, ints[i].dst, p);
    tsc_status_t ss = tsc_h5_attr_read_double(root, "softmax_scale", &m->softmax_scale);
    if (ss == TSC_ERR_MISSING) prob_add(p, TSC_ERR_MISSING, "root attribute 'softmax_scale' is missing");
    else if (ss != TSC_OK) prob_add(p, ss, "%s", tsc_error_last());
    /* optional, with their defaults: one tile of T rows and T keys (an untiled kernel), no
     * policy recorded (""), producer "unknown" */
    m->tile_q = m->tile_k = m->seq_len;
    read_root_int(root, "tile_q", 0, &m->tile_q, p);
    read_root_int(root, "tile_k", 0, &m->tile_k, p);
    m->policy[0] = '\0';
    read_root_str(root, "policy", m->policy, sizeof m->policy, p);
    snprintf(m->producer, sizeof m->producer, "unknown");
    read_root_str(root, "producer", m->producer, sizeof m->producer, p);
    if (have == (int)(sizeof ints / sizeof ints[0]) && ss == TSC_OK) {
        int before = p->n;
        meta_problems(m, p);
        *geometry = p->n == before;
    }
    return TSC_OK;
}

/* ---- the untrusted-input walk (docs/SECURITY.md) ---------------------------------------------
 * At open, before any data is read, every object tilescope will read (each complete step's
 * group, its layer groups, the format's datasets in them) is checked: no external or unresolved
 * link (tsc_h5_check_link), no virtual dataset or external raw storage, storage that backs the
 * declared extent (tsc_h5_check_dataset). Link and creation-property metadata only: no chunk is
 * read, so the walk costs a few HDF5 metadata reads per dataset. */

/* The dataset names of the format a reader opens ("tiles" is walked as a group). */
static int is_format_name(const char *name) {
    return is_per_head_name(name) || !strcmp(name, "x") || !strcmp(name, "w_q") || !strcmp(name, "w_k") ||
           !strcmp(name, "w_v") || !strcmp(name, "w_o");
}

typedef struct {
    tsc_status_t st;
    int depth;  /* 0: a step group's links, 1: a layer group's, 2: a tiles group's */
    tsc_dump_t *d;
    char path[512];  /* the group's path from the root: "step_S", "step_S/layer_L", ".../tiles" */
} walk_t;

/* The dataset at w's group's path + "/" + name: checked, and its verdict kept (checked_put). */
static tsc_status_t walk_dataset(walk_t *w, hid_t g, const char *name) {
    tsc_status_t st = tsc_h5_check_link(g, name);
    if (st != TSC_OK) return st;
    hid_t ds = H5Dopen2(g, name, tsc_h5_dapl());
    if (ds < 0) return TSC_OK; /* not a dataset: the reader reports it when it gets there */
    uint64_t stored;
    st = tsc_h5_check_dataset_stored(ds, &stored);
    H5Dclose(ds);
    char p[1024];
    if (st == TSC_OK && w->d && (size_t)snprintf(p, sizeof p, "%s/%s", w->path, name) < sizeof p)
        checked_put(w->d, p, stored);
    return st;
}

static herr_t walk_cb(hid_t g, const char *name, const H5L_info_t *info, void *op) {
    walk_t *w = op;
    (void)info;
    if (w->depth == 2 || (w->depth == 1 && is_format_name(name)) ||
        (w->depth == 0 && (!strcmp(name, "tokens") || !strcmp(name, "token_text")))) {
        w->st = walk_dataset(w, g, name);
        return w->st == TSC_OK ? 0 : -1;
    }
    int group = w->depth == 1 ? !strcmp(name, "tiles") : !strncmp(name, "layer_", 6);
    if (!group) return 0; /* tilescope never opens it */
    w->st = tsc_h5_check_link(g, name);
    if (w->st != TSC_OK) return -1;
    hid_t sub = H5Gopen2(g, name, tsc_h5_gapl());
    if (sub < 0) return 0; /* not a group: the reader reports it */
    walk_t inner = {TSC_OK, w->depth + 1, w->d, ""};
    if ((size_t)snprintf(inner.path, sizeof inner.path, "%s/%s", w->path, name) >= sizeof inner.path)
        inner.d = NULL; /* a name too long to be one the reader opens: checked, nothing kept */
    hsize_t idx = 0;
    herr_t e = H5Literate(sub, H5_INDEX_NAME, H5_ITER_INC, &idx, walk_cb, &inner);
    H5Gclose(sub);
    w->st = inner.st;
    return e < 0 && w->st != TSC_OK ? -1 : 0;
}

/* Walks step's group in the open file fid (the dump, or a session's step file). */
static tsc_status_t walk_step(tsc_dump_t *d, hid_t fid, long long step) {
    char gp[64];
    snprintf(gp, sizeof gp, "step_%08lld", step);
    walk_t w = {TSC_OK, 0, d, ""};
    snprintf(w.path, sizeof w.path, "%s", gp);
    hsize_t idx = 0;
    tsc_status_t st = tsc_h5_check_link(fid, gp);
    if (st != TSC_OK) return st;
    hid_t g = H5Gopen2(fid, gp, tsc_h5_gapl());
    if (g < 0) return TSC_OK; /* listed but unreadable: the reader reports it */
    H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, &idx, walk_cb, &w);
    H5Gclose(g);
    return w.st;
}

static tsc_status_t walk_dump(tsc_dump_t *d) {
    tsc_status_t st = TSC_OK;
    for (int i = 0; i < d->n_steps && st == TSC_OK; i++) {
        if (!d->dir[0]) {
            st = walk_step(d, d->root, d->steps[i]);
            continue;
        }
        char sp[8192];
        hid_t fid;
        snprintf(sp, sizeof sp, "%s/step_%08lld.h5", d->dir, d->steps[i]);
        st = tsc_h5_open(&fid, sp, 0);
        if (st == TSC_ERR_FORMAT) { st = TSC_OK; continue; } /* a damaged step file: reported when read */
        if (st == TSC_OK) {
            st = walk_step(d, fid, d->steps[i]);
            H5Fclose(fid);
        }
    }
    return st;
}

static int dump_validate(tsc_dump_t *d, int deep, tsc_dump_report_fn fn, void *ctx);

/* Lists the steps of the open root (a single file): complete ones, the incomplete one, the ones
 * without 'complete'. */
static tsc_status_t list_file_steps(tsc_dump_t *d, const char *path) {
    list_ctx_t c = {d, 0, TSC_OK};
    hsize_t idx = 0;
    if (H5Literate(d->root, H5_INDEX_NAME, H5_ITER_INC, &idx, list_steps_cb, &c) < 0)
        return c.st != TSC_OK ? c.st
                              : tsc_error_set(TSC_ERR_FORMAT, "%s: cannot list the root group (corrupt file)", path);
    long inc;
    if (H5Aexists(d->root, "incomplete_step") > 0 && tsc_h5_attr_read_long(d->root, "incomplete_step", &inc) == TSC_OK &&
        inc >= 0 && (d->incomplete < 0 || inc < d->incomplete))
        d->incomplete = inc;
    d->size = file_size(path);
    return TSC_OK;
}

/* 1 when the open root is a manifest (its format attribute names one, docs/FORMAT.md §1.8). */
static int is_manifest(hid_t root) {
    char fmt[64];
    if (H5Aexists(root, "format") <= 0 || tsc_h5_attr_read_str(root, "format", fmt, sizeof fmt) != TSC_OK) {
        tsc_error_clear();
        return 0;
    }
    return strcmp(fmt, "tilescope-manifest") == 0;
}

/* Opens the root file (the dump, or the session's session.h5) and lists the steps; root problems
 * go to p. A manifest's root gives its rank table only (tsc_dump_open opens the ranks). */
static tsc_status_t open_root(tsc_dump_t *d, const char *path, problems_t *p, int *geometry) {
    tsc_status_t st;
    if (d->dir[0]) {
        char sp[8192];
        snprintf(sp, sizeof sp, "%s/session.h5", d->dir);
        st = tsc_h5_open(&d->root, sp, 0);
        if (st != TSC_OK) return tsc_error_wrap(st, "capture session %s: ", d->dir);
        st = read_meta(d->root, sp, &d->meta, p, geometry);
        if (st == TSC_OK) st = list_session(d);
        d->size = folder_size(d->dir);
        return st;
    }
    st = tsc_h5_open(&d->root, path, 0);
    if (st == TSC_OK && is_manifest(d->root)) return tsc_mview_from_file(d->root, path, &d->mv);
    if (st == TSC_OK) st = read_meta(d->root, path, &d->meta, p, geometry);
    return st == TSC_OK ? list_file_steps(d, path) : st;
}

static tsc_status_t dump_open(tsc_dump_t **out, const char *path) {
    *out = NULL;
    if (!path || !*path) return tsc_error_set(TSC_ERR_ARG, "no dump path given");
    tsc_dump_t *d = calloc(1, sizeof *d);
    if (!d) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", path);
    d->root = d->step_fid = d->ds = H5I_INVALID_HID;
    d->incomplete = d->step_open = -1;
    snprintf(d->path, sizeof d->path, "%s", path);
    struct stat sb;
    char alt[4200];
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        /* a folder: a capture session (session.h5), or a run of ranks (manifest.h5, or rank dumps) */
        char sp[4200];
        snprintf(sp, sizeof sp, "%s/session.h5", path);
        if (stat(sp, &sb) != 0) {
            snprintf(sp, sizeof sp, "%s/manifest.h5", path);
            tsc_status_t st = stat(sp, &sb) == 0 ? TSC_OK : tsc_mview_from_dir(path, &d->mv);
            if (st == TSC_OK && !d->mv) {
                tsc_dump_close(d);
                return dump_open(out, sp);
            }
            if (st != TSC_OK) { tsc_dump_close(d); return st; }
            *out = d;
            return TSC_OK;
        }
        snprintf(d->dir, sizeof d->dir, "%s", path);
    } else if (stat(path, &sb) != 0 && errno == ENOENT &&
               (snprintf(alt, sizeof alt, "%s.capture", path), stat(alt, &sb) == 0 && S_ISDIR(sb.st_mode))) {
        snprintf(d->dir, sizeof d->dir, "%s", alt);
    }
    problems_t p = {0};
    tsc_strbuf_init(&p.text);
    int geometry = 0;
    tsc_status_t st = open_root(d, path, &p, &geometry);
    if (st == TSC_OK && d->mv) { /* a manifest: its ranks are opened by tsc_dump_open */
        tsc_strbuf_free(&p.text);
        *out = d;
        return TSC_OK;
    }
    /* steps is NULL when there is none (qsort must not be handed NULL) */
    if (st == TSC_OK && d->n_steps > 1) qsort(d->steps, (size_t)d->n_steps, sizeof *d->steps, tsc_cmp_ll);
    if (st == TSC_OK) st = walk_dump(d);
    if (st == TSC_OK && p.n) {
        /* the root is wrong: with a usable geometry, the steps' errors join the same message */
        p.path = d->path;
        if (geometry) dump_validate(d, 0, prob_report, &p);
        char where[8192];
        snprintf(where, sizeof where, "%s%s", d->dir[0] ? d->dir : path, d->dir[0] ? "/session.h5" : "");
        st = prob_fail(&p, where);
    }
    tsc_strbuf_free(&p.text);
    if (st != TSC_OK) {
        tsc_dump_close(d);
        return st;
    }
    *out = d;
    return TSC_OK;
}

tsc_status_t tsc_dump_open_direct(tsc_dump_t **out, const char *path) {
    TSC_H5_SCOPED(tsc_status_t, dump_open(out, path));
}

tsc_status_t tsc_dump_open(tsc_dump_t **out, const char *path) {
    *out = NULL;
    tsc_status_t st = tsc_contain_before_open(path); /* a child reads it first (tsc_contain.h) */
    if (st == TSC_OK) st = tsc_dump_open_direct(out, path);
    if (st != TSC_OK || !(*out)->mv) return st;
    /* a run of ranks: each rank's dump opened as a dump of its own (its own containment), outside
     * the HDF5 scope; then the merged metadata and steps */
    tsc_dump_t *d = *out;
    static __thread int opening_ranks;
    if (opening_ranks) {
        tsc_dump_close(d);
        *out = NULL;
        return tsc_error_set(TSC_ERR_FORMAT, "%s: a rank dump must be a dump of one rank, not a manifest or a folder of "
                             "ranks; refused", path);
    }
    opening_ranks = 1;
    st = tsc_mview_open(d->mv, &d->meta, &d->steps, &d->n_steps, &d->incomplete, &d->size);
    opening_ranks = 0;
    if (st != TSC_OK) {
        tsc_dump_close(d);
        *out = NULL;
    }
    return st;
}

hid_t tsc_dump_root_id(const tsc_dump_t *d) { return d->root; }
const char *tsc_dump_session_dir(const tsc_dump_t *d) { return d->dir; }

static void close_ds(tsc_dump_t *d) {
    if (d->ds >= 0) H5Dclose(d->ds);
    d->ds = H5I_INVALID_HID;
    d->ds_path[0] = '\0';
}

static void dump_close(tsc_dump_t *d) {
    if (!d) return;
    close_ds(d);
    if (d->step_fid >= 0) H5Fclose(d->step_fid);
    if (d->root >= 0) H5Fclose(d->root);
    free(d->steps);
    free(d->no_complete);
    free(d->buf);
    checked_free(d);
    tsc_mview_free(d->mv);
    free(d);
}

void tsc_dump_close(tsc_dump_t *d) {
    TSC_H5_SCOPED_VOID(dump_close(d));
}

const tsc_dump_meta_t *tsc_dump_meta(const tsc_dump_t *d) { return &d->meta; }
const char *tsc_dump_path(const tsc_dump_t *d) { return d->path; }
int tsc_dump_is_session(const tsc_dump_t *d) { return d->dir[0] != '\0'; }
uint64_t tsc_dump_size_bytes(const tsc_dump_t *d) { return d->size; }
int tsc_dump_n_steps(const tsc_dump_t *d) { return d->n_steps; }
long long tsc_dump_step_at(const tsc_dump_t *d, int i) { return i >= 0 && i < d->n_steps ? d->steps[i] : -1; }
long long tsc_dump_incomplete_step(const tsc_dump_t *d) { return d->incomplete; }

int tsc_dump_has_step(const tsc_dump_t *d, long long step) {
    return bsearch(&step, d->steps, (size_t)d->n_steps, sizeof *d->steps, tsc_cmp_ll) != NULL;
}

/* The file holding step's group (the single file, or the session's step file, opened on demand). */
static tsc_status_t step_file(tsc_dump_t *d, long long step, hid_t *fid) {
    if (!tsc_dump_has_step(d, step))
        return tsc_error_set(TSC_ERR_MISSING, "%s: step %lld is not in the dump%s", d->path, step,
                             step == d->incomplete ? " (it is the incomplete step)" : "");
    if (!d->dir[0]) { *fid = d->root; return TSC_OK; }
    if (d->step_open != step) {
        close_ds(d);
        if (d->step_fid >= 0) H5Fclose(d->step_fid);
        d->step_fid = H5I_INVALID_HID;
        d->step_open = -1;
        char sp[8192];
        snprintf(sp, sizeof sp, "%s/step_%08lld.h5", d->dir, step);
        tsc_status_t st = tsc_h5_open(&d->step_fid, sp, 0);
        if (st != TSC_OK) return st;
        d->step_open = step;
    }
    *fid = d->step_fid;
    return TSC_OK;
}

typedef struct {
    int *layers;
    int cap, n;
} layers_ctx_t;

static herr_t list_layers_cb(hid_t g, const char *name, const H5L_info_t *info, void *op) {
    layers_ctx_t *c = op;
    if (strncmp(name, "layer_", 6) != 0) return 0;
    char *end;
    long l = strtol(name + 6, &end, 10);
    if (*end || end - (name + 6) < 3 || l < 0) return 0;
    if (c->n < c->cap) c->layers[c->n] = (int)l;
    c->n++;
    return 0;
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

static tsc_status_t dump_layers(tsc_dump_t *d, long long step, int *layers, int cap, int *n) {
    hid_t fid;
    *n = 0;
    tsc_status_t st = step_file(d, step, &fid);
    if (st != TSC_OK) return st;
    char gp[64];
    snprintf(gp, sizeof gp, "step_%08lld", step);
    hid_t g = H5Gopen2(fid, gp, tsc_h5_gapl());
    if (g < 0) return tsc_error_set(TSC_ERR_FORMAT, "%s: group %s is unreadable", d->path, gp);
    layers_ctx_t c = {layers, cap, 0};
    hsize_t idx = 0;
    herr_t e = H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, &idx, list_layers_cb, &c);
    H5Gclose(g);
    if (e < 0) return tsc_error_set(TSC_ERR_FORMAT, "%s: cannot list the layers of %s (corrupt file)", d->path, gp);
    if (layers) qsort(layers, (size_t)(c.n < cap ? c.n : cap), sizeof *layers, cmp_int);
    *n = c.n;
    return TSC_OK;
}

/* The rank of a run of many ranks that holds (step, layer, name) at (b, h); NULL with the error set. */
static tsc_dump_t *mv_pick(tsc_dump_t *d, long long step, int layer, const char *name, int *b, int *h) {
    if (!tsc_dump_has_step(d, step)) {
        (void)tsc_error_set(TSC_ERR_MISSING, "%s: step %lld is not in the dump", d->path, step);
        return NULL;
    }
    return tsc_mview_pick(d->mv, step, layer, name, *b, *h, b, h);
}

/* b and h of the whole run in range for name (as a single dump's reader checks them). */
static tsc_status_t mv_range(tsc_dump_t *d, const char *name, int b, int h) {
    int rank, per_head;
    uint64_t dims[4];
    tsc_status_t st = tsc_dump_expected_shape(&d->meta, name, &rank, dims, &per_head);
    if (st != TSC_OK) return tsc_error_wrap(st, "%s: ", d->path);
    if (!strncmp(name, "w_", 2)) return TSC_OK;
    uint64_t hn = !strcmp(name, "x") ? 1 : dims[1];
    if (b < 0 || (uint64_t)b >= dims[0] || h < 0 || (uint64_t)h >= hn)
        return tsc_error_set(TSC_ERR_ARG, "%s: %s slice (b %d, h %d) is outside [0, %llu) x [0, %llu)", d->path, name, b, h,
                             (unsigned long long)dims[0], (unsigned long long)hn);
    return TSC_OK;
}

int tsc_dump_n_ranks(const tsc_dump_t *d) { return d && d->mv ? tsc_mview_n_ranks(d->mv) : 0; }

tsc_status_t tsc_dump_rank(const tsc_dump_t *d, int i, tsc_dump_rank_t *out) {
    if (!d || !d->mv) return tsc_error_set(TSC_ERR_ARG, "%s: not a run of many ranks", d ? d->path : "(null)");
    return tsc_mview_rank(d->mv, i, out);
}

int tsc_dump_rank_of(tsc_dump_t *d, long long step, int layer, int b, int h) {
    return d && d->mv ? tsc_mview_rank_of(d->mv, step, layer, b, h) : -1;
}

tsc_status_t tsc_dump_layers(tsc_dump_t *d, long long step, int *layers, int cap, int *n) {
    if (d->mv) {
        *n = 0;
        if (!tsc_dump_has_step(d, step)) return tsc_error_set(TSC_ERR_MISSING, "%s: step %lld is not in the dump", d->path, step);
        return tsc_mview_layers(d->mv, step, layers, cap, n);
    }
    TSC_H5_SCOPED(tsc_status_t, dump_layers(d, step, layers, cap, n));
}

static int dump_has_layer(tsc_dump_t *d, long long step, int layer) {
    hid_t fid;
    if (step_file(d, step, &fid) != TSC_OK) return 0;
    char gp[64];
    snprintf(gp, sizeof gp, "step_%08lld/layer_%03d", step, layer);
    return tsc_h5_exists(fid, gp);
}

int tsc_dump_has_layer(tsc_dump_t *d, long long step, int layer) {
    if (d->mv) {
        int b = 0, h = 0;
        tsc_dump_t *r = tsc_dump_has_step(d, step) ? mv_pick(d, step, layer, "q", &b, &h) : NULL;
        if (!r) tsc_error_clear();
        return r != NULL;
    }
    TSC_H5_SCOPED(int, dump_has_layer(d, step, layer));
}

typedef struct {
    char (*names)[TSC_DUMP_NAME_MAX];
    int cap, n;
    const char *prefix;
} names_ctx_t;

static herr_t list_names_cb(hid_t g, const char *name, const H5L_info_t *info, void *op) {
    names_ctx_t *c = op;
    H5O_info_t oi;
    if (H5Oget_info_by_name(g, name, &oi, tsc_h5_lapl()) < 0) return 0;
    if (oi.type == H5O_TYPE_GROUP && !c->prefix[0] && !strcmp(name, "tiles")) {
        hid_t tg = H5Gopen2(g, name, tsc_h5_gapl());
        if (tg < 0) return 0;
        names_ctx_t sub = *c;
        sub.prefix = "tiles/";
        hsize_t idx = 0;
        H5Literate(tg, H5_INDEX_NAME, H5_ITER_INC, &idx, list_names_cb, &sub);
        c->n = sub.n;
        H5Gclose(tg);
        return 0;
    }
    if (oi.type != H5O_TYPE_DATASET) return 0;
    if (c->n < c->cap) snprintf(c->names[c->n], TSC_DUMP_NAME_MAX, "%s%s", c->prefix, name);
    c->n++;
    return 0;
}

static tsc_status_t dump_dataset_names(tsc_dump_t *d, long long step, int layer, char (*names)[TSC_DUMP_NAME_MAX],
                                       int cap, int *n) {
    hid_t fid;
    *n = 0;
    tsc_status_t st = step_file(d, step, &fid);
    if (st != TSC_OK) return st;
    char gp[64];
    snprintf(gp, sizeof gp, "step_%08lld/layer_%03d", step, layer);
    if (!tsc_h5_exists(fid, gp))
        return tsc_error_set(TSC_ERR_MISSING, "%s: step %lld has no layer %d", d->path, step, layer);
    hid_t g = H5Gopen2(fid, gp, tsc_h5_gapl());
    if (g < 0) return tsc_error_set(TSC_ERR_FORMAT, "%s: group %s is unreadable", d->path, gp);
    names_ctx_t c = {names, cap, 0, ""};
    hsize_t idx = 0;
    herr_t e = H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, &idx, list_names_cb, &c);
    H5Gclose(g);
    if (e < 0) return tsc_error_set(TSC_ERR_FORMAT, "%s: cannot list %s (corrupt file)", d->path, gp);
    *n = c.n;
    return TSC_OK;
}

tsc_status_t tsc_dump_dataset_names(tsc_dump_t *d, long long step, int layer, char (*names)[TSC_DUMP_NAME_MAX],
                                    int cap, int *n) {
    if (d->mv) {
        int b = 0, h = 0;
        *n = 0;
        tsc_dump_t *r = mv_pick(d, step, layer, "q", &b, &h);
        return r ? tsc_dump_dataset_names(r, step, layer, names, cap, n) : TSC_ERR_MISSING;
    }
    TSC_H5_SCOPED(tsc_status_t, dump_dataset_names(d, step, layer, names, cap, n));
}

/* ---- the dtype attribute against the storage (docs/FORMAT.md §1.4) -------------------------------
 * A dataset's values are stored in an HDF5 floating-point type; its optional string attribute
 * `dtype` names the number format the values are in. They agree when the attribute names the
 * stored format, or a format the stored one holds exactly (fewer or equal mantissa and exponent
 * bits: bf16 values in float32, say) and then every stored value must be one of that format
 * (checked as the data is read). Anything else contradicts: an unknown name, a storage that is
 * not floating-point, a storage that cannot hold every value of the named format. */

/* "uint16", "int64", "a string", ... for a stored type that is not floating-point. */
static const char *type_words(hid_t ty, char *buf, size_t cap) {
    H5T_class_t cls = H5Tget_class(ty);
    if (cls == H5T_INTEGER)
        snprintf(buf, cap, "%sint%zu", H5Tget_sign(ty) == H5T_SGN_NONE ? "u" : "", 8 * H5Tget_size(ty));
    else if (cls == H5T_STRING) snprintf(buf, cap, "a string");
    else snprintf(buf, cap, "HDF5 type class %d", (int)cls);
    return buf;
}

/* 1 when every value of format a is a value of format s. */
static int format_holds(tsc_format_t s, tsc_format_t a) {
    return tsc_format_mant_bits(s) >= tsc_format_mant_bits(a) && tsc_format_exp_bits(s) >= tsc_format_exp_bits(a);
}

/* The stored format of dataset p (type ty) into *fmt, checked against its dtype attribute. */
static tsc_status_t check_dtype(tsc_dump_t *d, const char *p, hid_t ds, hid_t ty, tsc_format_t *fmt) {
    char attr[64] = "", words[64];
    int has = H5Aexists(ds, "dtype") > 0;
    d->ds_check_values = 0;
    if (has && tsc_h5_attr_read_str(ds, "dtype", attr, sizeof attr) != TSC_OK)
        return tsc_error_wrap(TSC_ERR_FORMAT, "%s: dataset %s: ", d->path, p);
    if (H5Tget_class(ty) != H5T_FLOAT) {
        char said[128] = "";
        if (has) snprintf(said, sizeof said, "its dtype attribute says '%s' but ", attr);
        return tsc_error_set(TSC_ERR_UNSUPPORTED, "%s: dataset %s: %sthe stored type is not floating-point (%s); "
                             "format v1 stores each dtype as a floating-point HDF5 type of its own layout "
                             "(docs/FORMAT.md §1.4)", d->path, p, said, type_words(ty, words, sizeof words));
    }
    tsc_status_t st = tsc_h5_type_format(ty, fmt);
    if (st != TSC_OK) return tsc_error_wrap(st, "%s: dataset %s: ", d->path, p);
    if (!has) return TSC_OK;
    tsc_format_t a;
    if (tsc_format_parse(attr, &a) != TSC_OK || strcmp(attr, tsc_format_name(a)) != 0) {
        char names[256];  /* from the format table: every row's name */
        size_t w = 0;
        names[0] = 0;
        for (int f = 0; f < TSC_FMT_COUNT && w < sizeof names; f++)
            w += (size_t)snprintf(names + w, sizeof names - w, "%s%s", f ? ", " : "", tsc_format_name((tsc_format_t)f));
        return tsc_error_set(TSC_ERR_FORMAT, "%s: dataset %s: its dtype attribute '%s' is not a number format name "
                             "(%s)", d->path, p, attr, names);
    }
    if (a == *fmt) return TSC_OK;
    if (!format_holds(*fmt, a))
        return tsc_error_set(TSC_ERR_FORMAT, "%s: dataset %s: its dtype attribute says '%s' but it is stored as %s, "
                             "which cannot hold every %s value", d->path, p, attr, tsc_format_name(*fmt), attr);
    d->ds_attr_fmt = a;
    d->ds_check_values = 1;
    return TSC_OK;
}

/* n stored values (bits of the open dataset's storage format) are all values of its dtype
 * attribute's format; else TSC_ERR_FORMAT naming the dataset, both formats and the first value. */
static tsc_status_t check_values(tsc_dump_t *d, int b, int h, const void *raw, size_t n) {
    tsc_format_t s = d->ds_info.dtype, a = d->ds_attr_fmt;
    for (size_t i = 0; i < n; i++) {
        double x;
        if (s == TSC_FMT_FP64) memcpy(&x, (const char *)raw + 8 * i, 8);
        else if (s == TSC_FMT_FP32 || s == TSC_FMT_TF32) { float f; memcpy(&f, (const char *)raw + 4 * i, 4); x = f; }
        else if (tsc_format_size(s) == 2) {
            uint16_t u;
            memcpy(&u, (const char *)raw + 2 * i, 2);
            x = tsc_decode(u, s);
        }
        else x = tsc_decode(((const uint8_t *)raw)[i], s);
        if (isnan(x) || tsc_round(x, a, TSC_ROUND_NEAREST_EVEN, NULL) == x) continue;
        return tsc_error_set(TSC_ERR_FORMAT, "%s: dataset %s: its dtype attribute says '%s' but it is stored as %s "
                             "holding values that are not %s (batch %d, head %d, element %zu = %.9g)", d->path,
                             d->ds_path, tsc_format_name(a), tsc_format_name(s), tsc_format_name(a), b, h, i, x);
    }
    return TSC_OK;
}

/* Opens (or reuses) the dataset and fills d->ds_info, checking the shape against the metadata. */
static tsc_status_t open_ds(tsc_dump_t *d, long long step, int layer, const char *name) {
    char p[256];
    snprintf(p, sizeof p, "step_%08lld/layer_%03d/%s", step, layer, name);
    hid_t fid = H5I_INVALID_HID;
    tsc_status_t st = step_file(d, step, &fid);
    if (st != TSC_OK) return st;
    if (d->ds >= 0 && strcmp(p, d->ds_path) == 0) return TSC_OK;
    close_ds(d);
    int erank, per_head;
    uint64_t edims[4];
    st = tsc_dump_expected_shape(&d->meta, name, &erank, edims, &per_head);
    if (st != TSC_OK) return tsc_error_wrap(st, "%s: ", d->path);
    if (!tsc_h5_exists(fid, p))
        return tsc_error_set(TSC_ERR_MISSING, "%s: step %lld, layer %d has no dataset '%s' (%s)", d->path, step, layer,
                             name, p);
    st = tsc_h5_check_link(fid, p);
    if (st != TSC_OK) return st;
    hid_t ds = H5Dopen2(fid, p, tsc_h5_dapl());
    if (ds < 0) return tsc_error_set(TSC_ERR_FORMAT, "%s: dataset %s is unreadable (corrupt file)", d->path, p);
    /* before anything touches its data or extent: a virtual dataset mapped onto itself crashes
     * HDF5 1.10.8 on read, and external storage would read another file. Checked once per
     * dataset and handle (the walk at open, or here): the check walks every chunk */
    const struct checked *kept = checked_find(d, p);
    uint64_t stored = kept ? kept->stored : UINT64_MAX;
    if (!kept) {
        st = tsc_h5_check_dataset_stored(ds, &stored);
        if (st != TSC_OK) { H5Dclose(ds); return st; }
        checked_put(d, p, stored);
    }
    tsc_dump_dataset_info_t *in = &d->ds_info;
    memset(in, 0, sizeof *in);
    hid_t sp = H5Dget_space(ds), ty = H5Dget_type(ds), pl = H5Dget_create_plist(ds);
    hsize_t hd[8];
    int rank = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    st = TSC_OK;
    if (sp < 0 || ty < 0 || rank < 0 || rank > 8 || H5Sget_simple_extent_dims(sp, hd, NULL) < 0) {
        st = tsc_error_set(TSC_ERR_FORMAT, "%s: dataset %s has an unreadable shape or type", d->path, p);
    } else if ((st = check_dtype(d, p, ds, ty, &in->dtype)) != TSC_OK) {
    } else {
        in->rank = rank;
        for (int i = 0; i < rank && i < 4; i++) in->dims[i] = hd[i];
        if (!shape_ok(name, rank, in->dims, erank, edims)) {
            char got[128], want[128];
            shape_str(rank > 4 ? 4 : rank, in->dims, got, sizeof got);
            shape_str(erank, edims, want, sizeof want);
            st = tsc_error_set(TSC_ERR_SHAPE, "%s: dataset %s has shape %s%s, the metadata implies %s", d->path, p, got,
                               rank > 4 ? "..." : "", want);
        }
        in->per_head = per_head;
        in->storage_bytes = stored != UINT64_MAX ? stored : H5Dget_storage_size(ds);
        int nf = pl >= 0 ? H5Pget_nfilters(pl) : 0;
        for (int i = 0; i < nf; i++) {
            unsigned flags;
            size_t ne = 0;
            if (H5Pget_filter2(pl, (unsigned)i, &flags, &ne, NULL, 0, NULL, NULL) == H5Z_FILTER_DEFLATE) in->compressed = 1;
        }
        in->heads_mask = ~0ULL;
        if (per_head && H5Aexists(ds, "heads_stored") > 0) {
            long hs[64];
            size_t nh = 0;
            if (tsc_h5_attr_read_longs(ds, "heads_stored", hs, 64, &nh) == TSC_OK) {
                in->heads_mask = 0;
                for (size_t i = 0; i < nh && i < 64; i++)
                    if (hs[i] >= 0 && hs[i] < 64) in->heads_mask |= 1ULL << hs[i];
            }
        }
    }
    if (sp >= 0) H5Sclose(sp);
    if (ty >= 0) H5Tclose(ty);
    if (pl >= 0) H5Pclose(pl);
    if (st != TSC_OK) { H5Dclose(ds); return st; }
    d->ds = ds;
    snprintf(d->ds_path, sizeof d->ds_path, "%s", p);
    return TSC_OK;
}

static tsc_status_t dump_dataset_info(tsc_dump_t *d, long long step, int layer, const char *name,
                                      tsc_dump_dataset_info_t *info) {
    tsc_status_t st = open_ds(d, step, layer, name);
    if (st == TSC_OK && info) *info = d->ds_info;
    return st;
}

tsc_status_t tsc_dump_dataset_info(tsc_dump_t *d, long long step, int layer, const char *name,
                                   tsc_dump_dataset_info_t *info) {
    if (d->mv) {
        tsc_dump_dataset_info_t tmp;
        if (!tsc_dump_has_step(d, step)) return tsc_error_set(TSC_ERR_MISSING, "%s: step %lld is not in the dump", d->path, step);
        return tsc_mview_dataset_info(d->mv, step, layer, name, info ? info : &tmp);
    }
    TSC_H5_SCOPED(tsc_status_t, dump_dataset_info(d, step, layer, name, info));
}

static int dump_has_dataset(tsc_dump_t *d, long long step, int layer, const char *name) {
    hid_t fid;
    char p[256];
    if (step_file(d, step, &fid) != TSC_OK) return 0;
    snprintf(p, sizeof p, "step_%08lld/layer_%03d/%s", step, layer, name);
    return tsc_h5_exists(fid, p);
}

int tsc_dump_has_dataset(tsc_dump_t *d, long long step, int layer, const char *name) {
    if (d->mv) {
        tsc_dump_dataset_info_t in;
        int ok = tsc_dump_dataset_info(d, step, layer, name, &in) == TSC_OK;
        if (!ok) tsc_error_clear();
        return ok;
    }
    TSC_H5_SCOPED(int, dump_has_dataset(d, step, layer, name));
}

static uint64_t dump_slice_elems(tsc_dump_t *d, long long step, int layer, const char *name) {
    if (open_ds(d, step, layer, name) != TSC_OK) return 0;
    const tsc_dump_dataset_info_t *in = &d->ds_info;
    uint64_t n = 1;
    for (int i = in->per_head ? 2 : (!strcmp(name, "x") ? 1 : 0); i < in->rank; i++) n *= in->dims[i];
    return n;
}

/* Reads the slice (b, h) of the open dataset with memory type mt into out. */
static tsc_status_t read_slice(tsc_dump_t *d, const char *name, int b, int h, hid_t mt, void *out) {
    const tsc_dump_dataset_info_t *in = &d->ds_info;
    hsize_t start[4] = {0, 0, 0, 0}, count[4];
    int fixed = in->per_head ? 2 : (!strcmp(name, "x") ? 1 : 0);
    if (fixed >= 1 && (b < 0 || (uint64_t)b >= in->dims[0]))
        return tsc_error_set(TSC_ERR_ARG, "%s: %s: batch index %d outside [0, %llu)", d->path, d->ds_path, b,
                             (unsigned long long)in->dims[0]);
    if (fixed >= 2 && (h < 0 || (uint64_t)h >= in->dims[1]))
        return tsc_error_set(TSC_ERR_ARG, "%s: %s: head index %d outside [0, %llu)", d->path, d->ds_path, h,
                             (unsigned long long)in->dims[1]);
    for (int i = 0; i < in->rank; i++) {
        count[i] = i < fixed ? 1 : in->dims[i];
        if (i == 0 && fixed >= 1) start[i] = (hsize_t)b;
        if (i == 1 && fixed >= 2) start[i] = (hsize_t)h;
    }
    hid_t fs = H5Dget_space(d->ds);
    /* the memory space has the selection's own shape: HDF5 then copies whole rows (a 1-D memory
     * space against a 4-D selection makes it walk element by element, ~100x slower) */
    hid_t ms = H5Screate_simple(in->rank, count, NULL);
    tsc_status_t st = TSC_OK;
    if (fs < 0 || ms < 0 || H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0)
        st = tsc_error_set(TSC_ERR_INTERNAL, "%s: %s: cannot select slice (%d, %d)", d->path, d->ds_path, b, h);
    else if (H5Dread(d->ds, mt, ms, fs, H5P_DEFAULT, out) < 0)
        st = tsc_error_set(TSC_ERR_FORMAT, "%s: %s: reading slice (batch %d, head %d) failed: the data is truncated "
                           "or corrupt", d->path, d->ds_path, b, h);
    if (fs >= 0) H5Sclose(fs);
    if (ms >= 0) H5Sclose(ms);
    return st;
}

/* Reads the slice (b, h) of the open dataset as its stored bits into out. */
static tsc_status_t read_slice_raw(tsc_dump_t *d, const char *name, int b, int h, void *out) {
    hid_t mt = tsc_h5_type_create(d->ds_info.dtype);
    if (mt < 0) return tsc_error_wrap(TSC_ERR_INTERNAL, "%s: %s: ", d->path, d->ds_path);
    tsc_status_t st = read_slice(d, name, b, h, mt, out);
    H5Tclose(mt);
    if (st == TSC_OK && d->ds_check_values) {
        const tsc_dump_dataset_info_t *in = &d->ds_info;
        size_t n = 1;
        for (int i = in->per_head ? 2 : (!strcmp(name, "x") ? 1 : 0); i < in->rank; i++) n *= (size_t)in->dims[i];
        st = check_values(d, b, h, out, n);
    }
    return st;
}

static tsc_status_t dump_read_raw(tsc_dump_t *d, long long step, int layer, const char *name, int b, int h,
                                  void *out) {
    tsc_status_t st = open_ds(d, step, layer, name);
    return st == TSC_OK ? read_slice_raw(d, name, b, h, out) : st;
}

static tsc_status_t dump_read(tsc_dump_t *d, long long step, int layer, const char *name, int b, int h, float *out) {
    tsc_status_t st = open_ds(d, step, layer, name);
    if (st != TSC_OK) return st;
    tsc_format_t f = d->ds_info.dtype;
    if ((f == TSC_FMT_FP32 || f == TSC_FMT_FP64 || f == TSC_FMT_TF32) && !d->ds_check_values)
        return read_slice(d, name, b, h, H5T_NATIVE_FLOAT, out);
    /* Read the stored bits and widen them ourselves: exact, and far faster than HDF5's soft
     * (bit-by-bit) conversion of custom floating-point types. */
    uint64_t n = dump_slice_elems(d, step, layer, name);
    size_t need = (size_t)n * tsc_format_size(f);
    if (need > d->buf_cap) {
        if (tsc_mem_check(need, "one slice") != TSC_OK)
            return tsc_error_wrap(TSC_ERR_UNSUPPORTED, "%s: %s: ", d->path, d->ds_path);
        void *nb = realloc(d->buf, need);
        if (!nb) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory reading %s", d->path, d->ds_path);
        d->buf = nb;
        d->buf_cap = need;
    }
    st = read_slice_raw(d, name, b, h, d->buf);
    if (st != TSC_OK) return st;
    if (f == TSC_FMT_FP64)
        for (uint64_t i = 0; i < n; i++) out[i] = (float)((const double *)d->buf)[i];
    else if (f == TSC_FMT_FP32 || f == TSC_FMT_TF32) memcpy(out, d->buf, (size_t)n * sizeof(float));
    else tsc_convert_to_f32(f, d->buf, out, (size_t)n);
    return st;
}

tsc_status_t tsc_dump_attr_longs(tsc_dump_t *d, const char *name, long *values, size_t cap, size_t *n) {
    if (d->mv) return tsc_dump_attr_longs(tsc_mview_first(d->mv), name, values, cap, n);
    tsc_status_t st = tsc_h5_attr_read_longs(d->root, name, values, cap, n);
    return st == TSC_OK ? st : tsc_error_wrap(st, "%s: ", d->path);
}

uint64_t tsc_dump_slice_elems(tsc_dump_t *d, long long step, int layer, const char *name) {
    if (d->mv) {
        int b = 0, h = 0;
        tsc_dump_t *r = mv_pick(d, step, layer, name, &b, &h);
        if (!r) tsc_error_clear();
        return r ? tsc_dump_slice_elems(r, step, layer, name) : 0;
    }
    TSC_H5_SCOPED(uint64_t, dump_slice_elems(d, step, layer, name));
}

tsc_status_t tsc_dump_read_raw(tsc_dump_t *d, long long step, int layer, const char *name, int b, int h, void *out) {
    if (d->mv) {
        tsc_status_t st = mv_range(d, name, b, h);
        tsc_dump_t *r = st == TSC_OK ? mv_pick(d, step, layer, name, &b, &h) : NULL;
        return r ? tsc_dump_read_raw(r, step, layer, name, b, h, out) : st != TSC_OK ? st : TSC_ERR_MISSING;
    }
    TSC_H5_SCOPED(tsc_status_t, dump_read_raw(d, step, layer, name, b, h, out));
}

tsc_status_t tsc_dump_read(tsc_dump_t *d, long long step, int layer, const char *name, int b, int h, float *out) {
    if (d->mv) {
        tsc_status_t st = mv_range(d, name, b, h);
        tsc_dump_t *r = st == TSC_OK ? mv_pick(d, step, layer, name, &b, &h) : NULL;
        return r ? tsc_dump_read(r, step, layer, name, b, h, out) : st != TSC_OK ? st : TSC_ERR_MISSING;
    }
    TSC_H5_SCOPED(tsc_status_t, dump_read(d, step, layer, name, b, h, out));
}

tsc_status_t tsc_dump_attr_str(tsc_dump_t *d, const char *name, char *value, size_t cap) {
    if (d->mv) return tsc_dump_attr_str(tsc_mview_first(d->mv), name, value, cap);
    tsc_status_t st = tsc_h5_attr_read_str(d->root, name, value, cap);
    return st == TSC_OK ? st : tsc_error_wrap(st, "%s: ", d->path);
}

/* ---- validator ------------------------------------------------------------------------------- */

static void report(tsc_dump_report_fn fn, void *ctx, int sev, int *errors, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void report(tsc_dump_report_fn fn, void *ctx, int sev, int *errors, const char *fmt, ...) {
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (sev >= 2) (*errors)++;
    if (fn) fn(ctx, sev, msg);
}

static int dump_validate(tsc_dump_t *d, int deep, tsc_dump_report_fn fn, void *ctx) {
    int errors = 0;
    const tsc_dump_meta_t *m = &d->meta;
    if (d->incomplete >= 0)
        report(fn, ctx, 1, &errors, "step %lld is incomplete (the writer stopped during it); it is ignored",
               d->incomplete);
    for (int i = 0; i < d->n_no_complete; i++)
        report(fn, ctx, 2, &errors, "step_%08lld: group attribute 'complete' is missing (a writer sets complete = 1 "
               "after the step's datasets); the step is ignored", d->no_complete[i]);
    if (d->n_steps == 0) report(fn, ctx, 1, &errors, "the dump holds no complete step");
    static const char *required[] = {"q", "k", "v"}, *expected[] = {"o", "do", "lse"};
    static const char *why[] = {"analysis and explain compare it with their replay",
                                "the backward replay and analysis need it", "no command reads it yet"};
    int *layers = NULL; /* [n_layers_cap], grown to each step's group count */
    int n_layers_cap = 0;
    /* the deep check's slice buffer: sized by the slices actually read (each dataset's own dims),
     * never by the root attributes alone, which a file can set to anything */
    size_t slice_max = 0;
    void *buf = NULL;
    for (int si = 0; si < d->n_steps; si++) {
        long long step = d->steps[si];
        int nl = 0;
        tsc_status_t st = tsc_dump_layers(d, step, NULL, 0, &nl); /* count, then list every group */
        if (st == TSC_OK && nl > n_layers_cap) {
            int *grown = realloc(layers, sizeof(int) * (size_t)nl);
            if (!grown) {
                report(fn, ctx, 2, &errors, "step %lld: out of memory for %d layer groups", step, nl);
                continue;
            }
            layers = grown, n_layers_cap = nl;
        }
        if (st == TSC_OK) st = tsc_dump_layers(d, step, layers, n_layers_cap, &nl);
        if (st != TSC_OK) { report(fn, ctx, 2, &errors, "step %lld: %s", step, tsc_error_last()); continue; }
        if (nl == 0) report(fn, ctx, 1, &errors, "step %lld holds no layer", step);
        int tok = tsc_dump_has_tokens(d, step);
        if (tok && m->batch > 0 && m->seq_len > 0) { /* the optional tokens: shape and type, row 0 read */
            int64_t *ids = malloc(sizeof *ids * (size_t)m->seq_len);
            char(*tx)[TSC_DUMP_TOKEN_TEXT_CAP] = tok == 2 ? malloc(sizeof *tx * (size_t)m->seq_len) : NULL;
            if (!ids || (tok == 2 && !tx)) report(fn, ctx, 2, &errors, "step %lld: out of memory for its tokens", step);
            else if (tsc_dump_read_tokens(d, step, 0, ids, tx) != TSC_OK)
                report(fn, ctx, 2, &errors, "step %lld: %s", step, tsc_error_last());
            free(ids), free(tx);
        }
        if (nl > n_layers_cap) nl = n_layers_cap; /* the file changed between the two listings */
        for (int li = 0; li < nl; li++) {
            int layer = layers[li];
            if (layer >= m->n_layer)
                report(fn, ctx, 2, &errors, "step %lld: layer %d is outside [0, n_layer = %d)", step, layer, m->n_layer);
            for (int i = 0; i < 3; i++)
                if (!tsc_dump_has_dataset(d, step, layer, required[i]))
                    report(fn, ctx, 2, &errors, "step %lld, layer %d: dataset '%s' is missing", step, layer, required[i]);
            for (int i = 0; i < 3; i++)
                if (!tsc_dump_has_dataset(d, step, layer, expected[i]))
                    report(fn, ctx, 1, &errors, "step %lld, layer %d: dataset '%s' is missing (%s)", step, layer,
                           expected[i], why[i]);
            char names[64][TSC_DUMP_NAME_MAX];
            int nn = 0;
            if (tsc_dump_dataset_names(d, step, layer, names, 64, &nn) != TSC_OK) {
                report(fn, ctx, 2, &errors, "step %lld, layer %d: %s", step, layer, tsc_error_last());
                continue;
            }
            for (int k = 0; k < nn && k < 64; k++) {
                tsc_dump_dataset_info_t in;
                int erank, ph;
                uint64_t ed[4];
                if (tsc_dump_expected_shape(m, names[k], &erank, ed, &ph) != TSC_OK) {
                    report(fn, ctx, 1, &errors, "step %lld, layer %d: unknown dataset '%s' (ignored)", step, layer,
                           names[k]);
                    continue;
                }
                st = tsc_dump_dataset_info(d, step, layer, names[k], &in);
                if (st != TSC_OK) { report(fn, ctx, 2, &errors, "%s", tsc_error_last()); continue; }
                if (!strcmp(names[k], "lse") && in.dtype != TSC_FMT_FP32)
                    report(fn, ctx, 1, &errors, "step %lld, layer %d: lse is %s, format v1 stores it as fp32", step,
                           layer, tsc_format_name(in.dtype));
                if (!deep) continue;
                uint64_t ne = tsc_dump_slice_elems(d, step, layer, names[k]);
                size_t need = (size_t)ne * tsc_format_size(in.dtype);
                if (need > slice_max && tsc_mem_check(need, "one slice of the deep check") != TSC_OK) {
                    report(fn, ctx, 2, &errors, "step %lld, layer %d, %s: %s", step, layer, names[k], tsc_error_last());
                    continue;
                }
                if (need > slice_max || !buf) { /* at least one byte: a read always gets a buffer */
                    void *nb = realloc(buf, need ? need : 1);
                    if (!nb) { report(fn, ctx, 2, &errors, "out of memory while validating"); continue; }
                    buf = nb;
                    slice_max = need;
                }
                int nb_ = in.per_head || !strcmp(names[k], "x") ? (int)in.dims[0] : 1;
                int nh = in.per_head ? (int)in.dims[1] : 1;
                int bad = 0;
                for (int b = 0; b < nb_ && !bad; b++)
                    for (int h = 0; h < nh && !bad; h++)
                        if (tsc_dump_read_raw(d, step, layer, names[k], b, h, buf) != TSC_OK) {
                            report(fn, ctx, 2, &errors, "%s", tsc_error_last());
                            bad = 1;
                        }
            }
        }
    }
    free(layers);
    free(buf);
    return errors;
}

int tsc_dump_validate(tsc_dump_t *d, int deep, tsc_dump_report_fn fn, void *ctx) {
    if (d->mv) return tsc_mview_is_open(d->mv) ? tsc_mview_validate(d->mv, deep, fn, ctx) : 0;
    TSC_H5_SCOPED(int, dump_validate(d, deep, fn, ctx));
}

/* ---- writer ---------------------------------------------------------------------------------- */

struct tsc_dump_writer {
    tsc_h5_file_t f;
    tsc_dump_meta_t meta;
    tsc_dump_write_opts_t opts;
    /* the dataset being filled head by head */
    char ds_path[256];
    hid_t ds;
    int ds_heads;               /* heads dimension of the open dataset */
    uint64_t heads_written;     /* bit h: head h written (heads < 64) */
    void *conv;                 /* conversion buffer */
    size_t conv_cap;
};

static tsc_status_t writer_close_ds(tsc_dump_writer_t *w) {
    tsc_status_t st = TSC_OK;
    if (w->ds < 0) return st;
    /* A dataset with only some heads written tells readers which ones hold data. */
    if (w->ds_heads <= 64) {
        uint64_t all = w->ds_heads == 64 ? ~0ULL : ((1ULL << w->ds_heads) - 1);
        if (w->heads_written != all) {
            long hs[64];
            size_t n = 0;
            for (int h = 0; h < w->ds_heads; h++)
                if (w->heads_written >> h & 1) hs[n++] = h;
            st = tsc_h5_attr_write_longs(w->ds, "heads_stored", hs, n);
        }
    }
    if (H5Dclose(w->ds) < 0 && st == TSC_OK) st = tsc_error_set(TSC_ERR_IO, "%s: closing %s failed", w->f.path, w->ds_path);
    w->ds = H5I_INVALID_HID;
    w->ds_path[0] = '\0';
    return st;
}

static tsc_status_t write_meta(hid_t root, const tsc_dump_meta_t *m) {
    tsc_status_t st = tsc_h5_attr_write_str(root, "format", TSC_DUMP_FORMAT_NAME);
    if (st == TSC_OK) st = tsc_h5_attr_write_long(root, "format_version", TSC_DUMP_FORMAT_VERSION);
    struct { const char *name; int v; } ints[] = {
        {"n_layer", m->n_layer}, {"n_head", m->n_head}, {"n_kv_head", m->n_kv_head}, {"head_dim", m->head_dim},
        {"d_model", m->d_model}, {"seq_len", m->seq_len}, {"batch", m->batch}, {"causal", m->causal},
        {"tile_q", m->tile_q}, {"tile_k", m->tile_k}, {"rank", m->rank}, {"world_size", m->world_size}};
    for (size_t i = 0; st == TSC_OK && i < sizeof ints / sizeof ints[0]; i++)
        st = tsc_h5_attr_write_long(root, ints[i].name, ints[i].v);
    if (st == TSC_OK) st = tsc_h5_attr_write_double(root, "softmax_scale", m->softmax_scale);
    if (st == TSC_OK) st = tsc_h5_attr_write_str(root, "policy", m->policy);
    if (st == TSC_OK) st = tsc_h5_attr_write_str(root, "producer", m->producer);
    if (st == TSC_OK) st = tsc_h5_attr_write_str(root, "tilescope_version", tsc_version());
    return st;
}

static tsc_status_t dump_writer_open(tsc_dump_writer_t **out, const char *path, const tsc_dump_meta_t *meta,
                                     const tsc_dump_write_opts_t *opts) {
    *out = NULL;
    tsc_status_t st = tsc_dump_meta_check(meta);
    if (st != TSC_OK) return tsc_error_wrap(st, "%s: ", path);
    if (opts && (opts->deflate < 0 || opts->deflate > 9))
        return tsc_error_set(TSC_ERR_ARG, "%s: deflate level %d outside [0, 9]", path, opts->deflate);
    tsc_dump_writer_t *w = calloc(1, sizeof *w);
    if (!w) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", path);
    w->ds = H5I_INVALID_HID;
    w->meta = *meta;
    w->meta.format_version = TSC_DUMP_FORMAT_VERSION;
    if (opts) w->opts = *opts;
    st = tsc_h5_create(&w->f, path);
    if (st != TSC_OK) { free(w); return st; }
    st = write_meta(w->f.fid, &w->meta);
    if (st != TSC_OK) { tsc_dump_writer_abort(w); return st; }
    *out = w;
    return TSC_OK;
}

tsc_status_t tsc_dump_writer_open(tsc_dump_writer_t **out, const char *path, const tsc_dump_meta_t *meta,
                                  const tsc_dump_write_opts_t *opts) {
    TSC_H5_SCOPED(tsc_status_t, dump_writer_open(out, path, meta, opts));
}

static tsc_status_t check_dims(tsc_dump_writer_t *w, const char *name, int rank, const uint64_t *dims, int *per_head) {
    int erank;
    uint64_t ed[4];
    tsc_status_t st = tsc_dump_expected_shape(&w->meta, name, &erank, ed, per_head);
    if (st != TSC_OK) return tsc_error_wrap(st, "%s: ", w->f.path);
    if (!shape_ok(name, rank, dims, erank, ed)) {
        char got[128], want[128];
        shape_str(rank > 4 ? 4 : rank, dims, got, sizeof got);
        shape_str(erank, ed, want, sizeof want);
        return tsc_error_set(TSC_ERR_SHAPE, "%s: dataset '%s' given with shape %s, the metadata implies %s", w->f.path,
                             name, got, want);
    }
    return TSC_OK;
}

static tsc_status_t layer_group(tsc_dump_writer_t *w, long long step, int layer, const char *name, hid_t *g,
                                const char **leaf) {
    char gp[128];
    if (step < 0 || layer < 0 || layer >= w->meta.n_layer)
        return tsc_error_set(TSC_ERR_ARG, "%s: step %lld / layer %d out of range (n_layer = %d)", w->f.path, step,
                             layer, w->meta.n_layer);
    const char *slash = strrchr(name, '/');
    if (slash) snprintf(gp, sizeof gp, "step_%08lld/layer_%03d/%.*s", step, layer, (int)(slash - name), name);
    else snprintf(gp, sizeof gp, "step_%08lld/layer_%03d", step, layer);
    *leaf = slash ? slash + 1 : name;
    int fresh_step = !tsc_h5_exists(w->f.fid, gp);
    tsc_status_t st = tsc_h5_group_create(w->f.fid, gp, g);
    if (st != TSC_OK || !fresh_step) return st;
    /* label the new groups with their numbers (cheap, and readable without parsing names) */
    char sp[64];
    snprintf(sp, sizeof sp, "step_%08lld", step);
    hid_t sg = H5Gopen2(w->f.fid, sp, H5P_DEFAULT);
    if (sg >= 0) {
        if (H5Aexists(sg, "step") <= 0) st = tsc_h5_attr_write_long(sg, "step", (long)step);
        H5Gclose(sg);
    }
    snprintf(sp, sizeof sp, "step_%08lld/layer_%03d", step, layer);
    hid_t lg = H5Gopen2(w->f.fid, sp, H5P_DEFAULT);
    if (lg >= 0) {
        if (st == TSC_OK && H5Aexists(lg, "layer") <= 0) st = tsc_h5_attr_write_long(lg, "layer", layer);
        H5Gclose(lg);
    }
    if (st != TSC_OK) H5Gclose(*g);
    return st;
}

static tsc_h5_write_opts_t ds_opts(const tsc_dump_writer_t *w, const char *name, int per_head) {
    tsc_h5_write_opts_t o = {0, w->opts.deflate, 0, 0};
    /* one chunk = one head's slice (the streaming reader's unit); x: one sequence [T, C] */
    if (per_head) o.rank_chunk = !strcmp(name, "lse") ? 1 : 2;
    else if (!strcmp(name, "x")) o.rank_chunk = 2;
    else if (w->opts.deflate) o.rank_chunk = 2;  /* weights: one chunk, only because filters need chunks */
    if (w->opts.fill_nan && per_head) { o.fill = NAN; o.has_fill = 1; }
    return o;
}

static tsc_status_t dump_writer_put(tsc_dump_writer_t *w, long long step, int layer, const char *name, int rank,
                                    const uint64_t *dims, tsc_format_t src_fmt, const void *data,
                                    tsc_format_t store_fmt) {
    int per_head;
    tsc_status_t st = check_dims(w, name, rank, dims, &per_head);
    if (st != TSC_OK) return st;
    st = writer_close_ds(w);
    if (st != TSC_OK) return st;
    hid_t g;
    const char *leaf;
    st = layer_group(w, step, layer, name, &g, &leaf);
    if (st != TSC_OK) return st;
    if (H5Lexists(g, leaf, H5P_DEFAULT) > 0) {
        H5Gclose(g);
        return tsc_error_set(TSC_ERR_ARG, "%s: step %lld, layer %d: dataset '%s' written twice", w->f.path, step, layer,
                             name);
    }
    tsc_h5_write_opts_t o = ds_opts(w, name, per_head);
    if (per_head && !w->opts.deflate && src_fmt == store_fmt) {
        /* Uncompressed, no conversion: create the dataset empty, then hand HDF5 each head's slice as
         * a finished chunk (H5Dwrite_chunk skips selections, type paths and the chunk cache). */
        st = tsc_h5_write_array(g, leaf, store_fmt, rank, dims, NULL, store_fmt, dim_labels_of(name),
                                units_of(name), &o);
        hid_t ds = st == TSC_OK ? H5Dopen2(g, leaf, H5P_DEFAULT) : H5I_INVALID_HID;
        if (st == TSC_OK && ds < 0) st = tsc_error_set(TSC_ERR_IO, "%s: cannot reopen dataset '%s'", w->f.path, name);
        size_t chunk = tsc_format_size(store_fmt);
        for (int i = 2; i < rank; i++) chunk *= (size_t)dims[i];
        for (uint64_t b = 0; st == TSC_OK && b < dims[0]; b++)
            for (uint64_t h = 0; st == TSC_OK && h < dims[1]; h++) {
                hsize_t off[4] = {b, h, 0, 0};
                const char *p = (const char *)data + (b * dims[1] + h) * chunk;
                if (H5Dwrite_chunk(ds, H5P_DEFAULT, 0, off, chunk, p) < 0)
                    st = tsc_error_set(TSC_ERR_IO, "%s: writing '%s' chunk (%llu, %llu) failed (disk full?)", w->f.path,
                                       name, (unsigned long long)b, (unsigned long long)h);
            }
        if (ds >= 0) H5Dclose(ds);
        H5Gclose(g);
        return st;
    }
    st = tsc_h5_write_array(g, leaf, store_fmt, rank, dims, data, src_fmt, dim_labels_of(name), units_of(name), &o);
    H5Gclose(g);
    return st;
}

tsc_status_t tsc_dump_writer_put(tsc_dump_writer_t *w, long long step, int layer, const char *name, int rank,
                                 const uint64_t *dims, tsc_format_t src_fmt, const void *data,
                                 tsc_format_t store_fmt) {
    TSC_H5_SCOPED(tsc_status_t, dump_writer_put(w, step, layer, name, rank, dims, src_fmt, data, store_fmt));
}

static tsc_status_t dump_writer_put_head(tsc_dump_writer_t *w, long long step, int layer, const char *name, int rank,
                                         const uint64_t *dims, int b, int h, tsc_format_t src_fmt, const void *data,
                                         tsc_format_t store_fmt) {
    int per_head;
    tsc_status_t st = check_dims(w, name, rank, dims, &per_head);
    if (st != TSC_OK) return st;
    if (!per_head)
        return tsc_error_set(TSC_ERR_ARG, "%s: '%s' is not a per-head dataset; write it with tsc_dump_writer_put",
                             w->f.path, name);
    if (b < 0 || (uint64_t)b >= dims[0] || h < 0 || (uint64_t)h >= dims[1])
        return tsc_error_set(TSC_ERR_ARG, "%s: '%s': slice (%d, %d) outside [%llu, %llu]", w->f.path, name, b, h,
                             (unsigned long long)dims[0], (unsigned long long)dims[1]);
    char p[256];
    snprintf(p, sizeof p, "step_%08lld/layer_%03d/%s", step, layer, name);
    hid_t ft = tsc_h5_type_create(store_fmt);
    if (ft < 0) return TSC_ERR_UNSUPPORTED;
    if (w->ds < 0 || strcmp(p, w->ds_path) != 0) {
        st = writer_close_ds(w);
        hid_t g = H5I_INVALID_HID;
        const char *leaf;
        if (st == TSC_OK) st = layer_group(w, step, layer, name, &g, &leaf);
        if (st == TSC_OK && H5Lexists(g, leaf, H5P_DEFAULT) <= 0) {
            tsc_h5_write_opts_t o = ds_opts(w, name, per_head);
            st = tsc_h5_write_array(g, leaf, store_fmt, rank, dims, NULL, store_fmt, dim_labels_of(name),
                                    units_of(name), &o);
        }
        if (st == TSC_OK) {
            w->ds = H5Dopen2(g, leaf, H5P_DEFAULT);
            if (w->ds < 0) st = tsc_error_set(TSC_ERR_IO, "%s: cannot reopen %s", w->f.path, p);
            snprintf(w->ds_path, sizeof w->ds_path, "%s", p);
            w->ds_heads = (int)dims[1];
            w->heads_written = 0;
        }
        if (g >= 0) H5Gclose(g);
        if (st != TSC_OK) { H5Tclose(ft); return st; }
    }
    hsize_t n = 1, start[4] = {(hsize_t)b, (hsize_t)h, 0, 0}, count[4] = {1, 1, 1, 1};
    for (int i = 2; i < rank; i++) { n *= dims[i]; count[i] = dims[i]; }
    const void *buf = data;
    if (src_fmt != store_fmt) {
        size_t need = (size_t)n * (tsc_format_size(store_fmt) + sizeof(float));
        if (need > w->conv_cap) {
            void *nb = realloc(w->conv, need);
            if (!nb) { H5Tclose(ft); return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", w->f.path); }
            w->conv = nb;
            w->conv_cap = need;
        }
        float *f = w->conv;
        void *dst = f + n;
        if (src_fmt == TSC_FMT_FP32) memcpy(f, data, (size_t)n * sizeof(float));
        else tsc_convert_to_f32(src_fmt, data, f, (size_t)n);
        tsc_convert_from_f32(store_fmt, f, dst, (size_t)n, TSC_ROUND_NEAREST_EVEN, NULL);
        buf = dst;
    }
    hid_t fs = H5Dget_space(w->ds), ms = H5Screate_simple(rank, count, NULL);  /* same shape: fast path */
    if (fs < 0 || ms < 0 || H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
        H5Dwrite(w->ds, ft, ms, fs, H5P_DEFAULT, buf) < 0)
        st = tsc_error_set(TSC_ERR_IO, "%s: writing %s slice (%d, %d) failed (disk full?)", w->f.path, p, b, h);
    else if (h < 64)
        w->heads_written |= 1ULL << h;
    if (fs >= 0) H5Sclose(fs);
    if (ms >= 0) H5Sclose(ms);
    H5Tclose(ft);
    return st;
}

tsc_status_t tsc_dump_writer_put_head(tsc_dump_writer_t *w, long long step, int layer, const char *name, int rank,
                                      const uint64_t *dims, int b, int h, tsc_format_t src_fmt, const void *data,
                                      tsc_format_t store_fmt) {
    TSC_H5_SCOPED(tsc_status_t,
                  dump_writer_put_head(w, step, layer, name, rank, dims, b, h, src_fmt, data, store_fmt));
}

tsc_status_t tsc_dump_writer_attr_longs(tsc_dump_writer_t *w, const char *name, const long *v, size_t n) {
    return tsc_h5_attr_write_longs(w->f.fid, name, v, n);
}

tsc_status_t tsc_dump_writer_attr_str(tsc_dump_writer_t *w, const char *name, const char *value) {
    return tsc_h5_attr_write_str(w->f.fid, name, value);
}

static tsc_status_t dump_writer_step_done(tsc_dump_writer_t *w, long long step) {
    tsc_status_t st = writer_close_ds(w);
    if (st != TSC_OK) return st;
    char sp[64];
    snprintf(sp, sizeof sp, "step_%08lld", step);
    hid_t g;
    st = tsc_h5_group_create(w->f.fid, sp, &g);
    if (st != TSC_OK) return st;
    if (H5Aexists(g, "step") <= 0) st = tsc_h5_attr_write_long(g, "step", (long)step);
    /* written last: a reader lists only the steps that carry it */
    if (st == TSC_OK) st = tsc_h5_attr_write_long(g, "complete", 1);
    H5Gclose(g);
    return st;
}

tsc_status_t tsc_dump_writer_step_done(tsc_dump_writer_t *w, long long step) {
    TSC_H5_SCOPED(tsc_status_t, dump_writer_step_done(w, step));
}

static tsc_status_t dump_writer_flush(tsc_dump_writer_t *w) {
    if (H5Fflush(w->f.fid, H5F_SCOPE_GLOBAL) < 0)
        return tsc_error_set(TSC_ERR_IO, "%s: flushing %s failed", w->f.path, w->f.tmp);
    return TSC_OK;
}

tsc_status_t tsc_dump_writer_flush(tsc_dump_writer_t *w) {
    TSC_H5_SCOPED(tsc_status_t, dump_writer_flush(w));
}

static tsc_status_t dump_writer_close(tsc_dump_writer_t *w) {
    if (!w) return TSC_OK;
    tsc_status_t st = writer_close_ds(w);
    if (st == TSC_OK) st = tsc_h5_commit(&w->f);
    else tsc_h5_abort(&w->f);
    free(w->conv);
    free(w);
    return st;
}

tsc_status_t tsc_dump_writer_close(tsc_dump_writer_t *w) {
    TSC_H5_SCOPED(tsc_status_t, dump_writer_close(w));
}

static void dump_writer_abort(tsc_dump_writer_t *w) {
    if (!w) return;
    if (w->ds >= 0) H5Dclose(w->ds);
    tsc_h5_abort(&w->f);
    free(w->conv);
    free(w);
}

void tsc_dump_writer_abort(tsc_dump_writer_t *w) {
    TSC_H5_SCOPED_VOID(dump_writer_abort(w));
}

/* ---- tokens (docs/FORMAT.md §1.3, step datasets) ---------------------------------------------- */

/* The bytes of s kept in a token text slot: at most TSC_DUMP_TOKEN_BYTES, cut before a UTF-8
 * sequence that would not fit whole. */
static size_t token_cut(const char *s) {
    size_t n = strnlen(s, TSC_DUMP_TOKEN_BYTES + 1);
    if (n <= TSC_DUMP_TOKEN_BYTES) return n;
    n = TSC_DUMP_TOKEN_BYTES;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--; /* s[n] continues a sequence: cut before it */
    return n;
}

static tsc_status_t dump_writer_put_tokens(tsc_dump_writer_t *w, long long step, const int64_t *ids,
                                           const char *const *text) {
    if (step < 0 || !ids) return tsc_error_set(TSC_ERR_ARG, "%s: tokens: step %lld or ids missing", w->f.path, step);
    tsc_status_t st = writer_close_ds(w);
    if (st != TSC_OK) return st;
    char gp[64];
    snprintf(gp, sizeof gp, "step_%08lld", step);
    hid_t g;
    if ((st = tsc_h5_group_create(w->f.fid, gp, &g)) != TSC_OK) return st;
    if (H5Lexists(g, "tokens", H5P_DEFAULT) > 0) {
        H5Gclose(g);
        return tsc_error_set(TSC_ERR_ARG, "%s: step %lld: tokens written twice", w->f.path, step);
    }
    const size_t B = (size_t)w->meta.batch, T = (size_t)w->meta.seq_len;
    hsize_t dims[2] = {B, T};
    hid_t sp = H5Screate_simple(2, dims, NULL), ds = H5I_INVALID_HID, ty = H5I_INVALID_HID;
    char *buf = NULL;
    ds = sp >= 0 ? H5Dcreate2(g, "tokens", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) : H5I_INVALID_HID;
    if (ds < 0 || H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, ids) < 0)
        st = tsc_error_set(TSC_ERR_IO, "%s: writing step %lld's tokens failed (disk full?)", w->f.path, step);
    if (st == TSC_OK) st = tsc_h5_attr_write_str(ds, "dims", "batch,token");
    if (st == TSC_OK) st = tsc_h5_attr_write_str(ds, "units", "token id");
    if (ds >= 0) H5Dclose(ds);
    ds = H5I_INVALID_HID;
    if (st == TSC_OK && text) {
        if (!(buf = calloc(B * T, TSC_DUMP_TOKEN_BYTES)))
            st = tsc_error_set(TSC_ERR_NOMEM, "%s: no memory for step %lld's token text", w->f.path, step);
        for (size_t i = 0; st == TSC_OK && i < B * T; i++)
            if (text[i]) memcpy(buf + i * TSC_DUMP_TOKEN_BYTES, text[i], token_cut(text[i]));
        if (st == TSC_OK) {
            ty = H5Tcopy(H5T_C_S1);
            if (ty < 0 || H5Tset_size(ty, TSC_DUMP_TOKEN_BYTES) < 0 || H5Tset_strpad(ty, H5T_STR_NULLPAD) < 0 ||
                H5Tset_cset(ty, H5T_CSET_UTF8) < 0 ||
                (ds = H5Dcreate2(g, "token_text", ty, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) < 0 ||
                H5Dwrite(ds, ty, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
                st = tsc_error_set(TSC_ERR_IO, "%s: writing step %lld's token text failed (disk full?)", w->f.path, step);
        }
        if (st == TSC_OK) st = tsc_h5_attr_write_str(ds, "dims", "batch,token");
        if (ds >= 0) H5Dclose(ds);
        if (ty >= 0) H5Tclose(ty);
    }
    free(buf);
    if (sp >= 0) H5Sclose(sp);
    H5Gclose(g);
    return st;
}

tsc_status_t tsc_dump_writer_put_tokens(tsc_dump_writer_t *w, long long step, const int64_t *ids,
                                        const char *const *text) {
    TSC_H5_SCOPED(tsc_status_t, dump_writer_put_tokens(w, step, ids, text));
}

/* Characters that reorder or break the text around them when shown: C1 controls, the bidi controls
 * and marks, the line and paragraph separators. */
static int token_hidden_char(unsigned cp) {
    return (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F || cp == 0x2028 ||
           cp == 0x2029 || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

/* Appends the display form of one stored token text (n bytes) to out (cap TSC_DUMP_TOKEN_TEXT_CAP):
 * valid UTF-8 as it is, a C0 control character as \n, \t, \r or \xNN, a byte that is not UTF-8 as
 * \xNN, a character token_hidden_char names as \uXXXX. */
static void token_display(const unsigned char *s, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < TSC_DUMP_TOKEN_TEXT_CAP;) {
        unsigned c = s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        int ok = len > 0 && i + len <= n && !(len == 2 && c < 0xC2) && !(len == 4 && c > 0xF4);
        for (size_t k = 1; ok && k < len; k++) ok = (s[i + k] & 0xC0) == 0x80;
        if (ok && len == 3) { /* no overlong form, no surrogate */
            unsigned c1 = s[i + 1];
            ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);
        }
        if (ok && len == 4) ok = !(c == 0xF0 && s[i + 1] < 0x90) && !(c == 0xF4 && s[i + 1] >= 0x90);
        if (ok && len == 1 && (c < 0x20 || c == 0x7F)) {
            o += (size_t)snprintf(out + o, TSC_DUMP_TOKEN_TEXT_CAP - o,
                                  c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : "\\x%02X", c);
            i++;
        } else if (ok) {
            unsigned cp = len == 1 ? c : c & (0x7F >> len);
            for (size_t k = 1; k < len; k++) cp = cp << 6 | (s[i + k] & 0x3F);
            if (token_hidden_char(cp)) o += (size_t)snprintf(out + o, TSC_DUMP_TOKEN_TEXT_CAP - o, "\\u%04X", cp);
            else memcpy(out + o, s + i, len), o += len;
            i += len;
        } else {
            o += (size_t)snprintf(out + o, TSC_DUMP_TOKEN_TEXT_CAP - o, "\\x%02X", c);
            i++;
        }
    }
    out[o] = 0;
}

/* step_S/<name> of the open step file, checked as every dataset a reader opens is (links, storage),
 * and of shape [B, T]. */
static tsc_status_t tokens_open(tsc_dump_t *d, hid_t fid, long long step, const char *name, hid_t *out) {
    char p[64];
    snprintf(p, sizeof p, "step_%08lld/%s", step, name);
    *out = H5I_INVALID_HID;
    if (!tsc_h5_exists(fid, p)) return tsc_error_set(TSC_ERR_MISSING, "%s: step %lld has no %s", d->path, step, name);
    tsc_status_t st = tsc_h5_check_link(fid, p);
    if (st != TSC_OK) return st;
    hid_t ds = H5Dopen2(fid, p, tsc_h5_dapl());
    if (ds < 0) return tsc_error_set(TSC_ERR_FORMAT, "%s: %s is not a readable dataset", d->path, p);
    uint64_t stored;
    if ((st = tsc_h5_check_dataset_stored(ds, &stored)) != TSC_OK) {
        H5Dclose(ds);
        return st;
    }
    hid_t sp = H5Dget_space(ds);
    hsize_t dims[2] = {0, 0};
    int rank = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    if (rank == 2) H5Sget_simple_extent_dims(sp, dims, NULL);
    if (sp >= 0) H5Sclose(sp);
    if (rank != 2 || dims[0] != (hsize_t)d->meta.batch || dims[1] != (hsize_t)d->meta.seq_len) {
        H5Dclose(ds);
        return tsc_error_set(TSC_ERR_SHAPE, "%s: %s must have shape [%d, %d] (batch, seq_len)%s", d->path, p,
                             d->meta.batch, d->meta.seq_len, rank == 2 ? "" : ": it is not 2-dimensional");
    }
    *out = ds;
    return TSC_OK;
}

/* Row b of the open [B, T] dataset ds into buf, read as memory type mt. */
static herr_t tokens_row(hid_t ds, hid_t mt, int b, hsize_t T, void *buf) {
    hid_t fs = H5Dget_space(ds), ms = H5Screate_simple(1, &T, NULL);
    hsize_t start[2] = {(hsize_t)b, 0}, count[2] = {1, T};
    herr_t e = fs >= 0 && ms >= 0 ? H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) : -1;
    if (e >= 0) e = H5Dread(ds, mt, ms, fs, H5P_DEFAULT, buf);
    if (fs >= 0) H5Sclose(fs);
    if (ms >= 0) H5Sclose(ms);
    return e;
}

static tsc_status_t dump_read_tokens(tsc_dump_t *d, long long step, int b, int64_t *ids,
                                     char (*text)[TSC_DUMP_TOKEN_TEXT_CAP]) {
    if (b < 0 || b >= d->meta.batch)
        return tsc_error_set(TSC_ERR_ARG, "%s: batch row %d is outside 0..%d", d->path, b, d->meta.batch - 1);
    hid_t fid;
    tsc_status_t st = step_file(d, step, &fid);
    if (st != TSC_OK) return st;
    const hsize_t T = (hsize_t)d->meta.seq_len;
    hid_t ds;
    if (ids) {
        if ((st = tokens_open(d, fid, step, "tokens", &ds)) != TSC_OK) return st;
        hid_t ft = H5Dget_type(ds);
        int is_int = ft >= 0 && H5Tget_class(ft) == H5T_INTEGER;
        if (ft >= 0) H5Tclose(ft);
        if (!is_int) st = tsc_error_set(TSC_ERR_FORMAT, "%s: step_%08lld/tokens must hold integers", d->path, step);
        else if (tokens_row(ds, H5T_NATIVE_INT64, b, T, ids) < 0)
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: step_%08lld/tokens is unreadable (corrupt file)", d->path, step);
        H5Dclose(ds);
        if (st != TSC_OK) return st;
    }
    if (!text) return TSC_OK;
    if ((st = tokens_open(d, fid, step, "token_text", &ds)) != TSC_OK) return st;
    hid_t ft = H5Dget_type(ds), mt = H5I_INVALID_HID;
    size_t sz = ft >= 0 ? H5Tget_size(ft) : 0;
    unsigned char *raw = NULL;
    if (ft < 0 || H5Tget_class(ft) != H5T_STRING || H5Tis_variable_str(ft) > 0 || sz < 1 || sz > TSC_DUMP_TOKEN_BYTES)
        st = tsc_error_set(TSC_ERR_FORMAT, "%s: step_%08lld/token_text must hold fixed-length strings of 1 to %d bytes "
                           "(numpy 'S%d' of UTF-8; variable-length strings are not read)", d->path, step,
                           TSC_DUMP_TOKEN_BYTES, TSC_DUMP_TOKEN_BYTES);
    else if (!(raw = malloc((size_t)T * sz)))
        st = tsc_error_set(TSC_ERR_NOMEM, "%s: no memory for step %lld's token text", d->path, step);
    else if ((mt = H5Tcopy(ft)) < 0 || tokens_row(ds, mt, b, T, raw) < 0)
        st = tsc_error_set(TSC_ERR_FORMAT, "%s: step_%08lld/token_text is unreadable (corrupt file)", d->path, step);
    for (hsize_t t = 0; st == TSC_OK && t < T; t++) {
        const unsigned char *s = raw + t * sz;
        size_t n = strnlen((const char *)s, sz);
        while (n > 0 && s[n - 1] == ' ' && H5Tget_strpad(ft) == H5T_STR_SPACEPAD) n--;
        token_display(s, n, text[t]);
    }
    free(raw);
    if (mt >= 0) H5Tclose(mt);
    if (ft >= 0) H5Tclose(ft);
    H5Dclose(ds);
    return st;
}

static int dump_has_tokens(tsc_dump_t *d, long long step) {
    hid_t fid;
    if (step_file(d, step, &fid) != TSC_OK) {
        tsc_error_clear();
        return 0;
    }
    char p[64];
    snprintf(p, sizeof p, "step_%08lld/tokens", step);
    if (!tsc_h5_exists(fid, p)) return 0;
    snprintf(p, sizeof p, "step_%08lld/token_text", step);
    return tsc_h5_exists(fid, p) ? 2 : 1;
}

/* A run of many ranks: the dump holding batch row b of the step (the rank of its first layer's q). */
static tsc_dump_t *tokens_rank(tsc_dump_t *d, long long step, int b, int *lb) {
    int layers[1], n = 0;
    if (tsc_mview_layers(d->mv, step, layers, 1, &n) != TSC_OK || n < 1) return NULL;
    int lh;
    return tsc_mview_pick(d->mv, step, layers[0], "q", b, 0, lb, &lh);
}

tsc_status_t tsc_dump_read_tokens(tsc_dump_t *d, long long step, int b, int64_t *ids,
                                  char (*text)[TSC_DUMP_TOKEN_TEXT_CAP]) {
    if (d->mv) {
        int lb = 0;
        tsc_dump_t *r = tsc_dump_has_step(d, step) ? tokens_rank(d, step, b, &lb) : NULL;
        if (!r) return tsc_error_set(TSC_ERR_MISSING, "%s: step %lld, batch row %d is in no rank's dump", d->path, step, b);
        return tsc_dump_read_tokens(r, step, lb, ids, text);
    }
    TSC_H5_SCOPED(tsc_status_t, dump_read_tokens(d, step, b, ids, text));
}

int tsc_dump_has_tokens(tsc_dump_t *d, long long step) {
    if (d->mv) {
        int lb = 0;
        tsc_dump_t *r = tsc_dump_has_step(d, step) ? tokens_rank(d, step, 0, &lb) : NULL;
        if (!r) tsc_error_clear();
        return r ? tsc_dump_has_tokens(r, step) : 0;
    }
    TSC_H5_SCOPED(int, dump_has_tokens(d, step));
}
