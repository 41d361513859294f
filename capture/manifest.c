/* manifest.c: a run of many ranks as one dump (tsc_manifest.h, manifest_internal.h,
 * docs/FORMAT.md §1.8).
 *
 * A manifest names rank dumps by file name only, in its own folder: a name with a '/', "." or
 * "..", or a control character is refused before any file is touched, so a manifest from
 * elsewhere reaches no file outside its folder, and each rank dump is opened with every check of
 * tsc_dump_open (containment included). The coordinates of a rank come from its own dump's root
 * attributes (dp_rank, dp_size, tp_rank, tp_size, pp_rank, pp_size; absent: data-parallel over
 * world_size), never from the manifest, so a manifest cannot route one rank's data to another. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "capture_internal.h"
#include "manifest_internal.h"
#include "tsc_escape.h"
#include "tsc_h5.h"
#include "tsc_strbuf.h"
#include "tsc_manifest.h"

#define MANIFEST_FORMAT "tilescope-manifest"
#define MAX_RANKS 65536

typedef struct {
    int expect;       /* the rank the manifest or the file's name gives it (-1: none) */
    char file[256];   /* the name in the folder */
    char path[4400];  /* folder/name */
    int rank, dp, tp, pp;
    tsc_dump_t *d;
    uint64_t bytes;
} mrank_t;

struct tsc_mview {
    char src[4096];  /* the manifest's path or the folder's */
    char dir[4096];  /* the folder the rank files are in */
    int n;
    mrank_t *r;      /* sorted by rank once open */
    int dp_size, tp_size, pp_size;
    int b_local, h_local, hkv_local;
    int *grid;       /* [dp][tp][pp] -> index into r */
    int open;
};

int tsc_mview_is_open(const tsc_mview_t *m) { return m && m->open; }
int tsc_mview_n_ranks(const tsc_mview_t *m) { return m ? m->n : 0; }
tsc_dump_t *tsc_mview_first(tsc_mview_t *m) { return m->n ? m->r[0].d : NULL; }

void tsc_mview_free(tsc_mview_t *m) {
    if (!m) return;
    for (int i = 0; i < m->n; i++)
        if (m->r[i].d) tsc_dump_close(m->r[i].d);
    free(m->r);
    free(m->grid);
    free(m);
}

/* A rank file's name as a manifest may give it: a plain name in the folder. */
static int plain_name(const char *s) {
    if (!*s || !strcmp(s, ".") || !strcmp(s, "..") || strlen(s) >= 256) return 0;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if (*c == '/' || *c < 0x20 || *c == 0x7f) return 0;
    return 1;
}

static void dir_of(const char *path, char *dir, size_t cap) {
    const char *sl = strrchr(path, '/');
    if (!sl) snprintf(dir, cap, ".");
    else if (sl == path) snprintf(dir, cap, "/");
    else snprintf(dir, cap, "%.*s", (int)(sl - path), path);
}

static tsc_mview_t *mview_new(const char *src, const char *dir, int n) {
    tsc_mview_t *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->r = calloc((size_t)(n ? n : 1), sizeof *m->r);
    if (!m->r) { free(m); return NULL; }
    snprintf(m->src, sizeof m->src, "%s", src);
    snprintf(m->dir, sizeof m->dir, "%s", dir);
    m->n = n;
    return m;
}

static tsc_status_t set_file(tsc_mview_t *m, int i, const char *name) {
    if (!plain_name(name)) {
        tsc_strbuf_t b;
        tsc_strbuf_init(&b);
        tsc_status_t st = tsc_error_set(TSC_ERR_FORMAT, "%s: rank file name '%s' is not a plain file name in the "
                                        "manifest's folder (no '/', '.', '..' or control characters); refused", m->src,
                                        tsc_esc_term_str(&b, name));
        tsc_strbuf_free(&b);
        return st;
    }
    snprintf(m->r[i].file, sizeof m->r[i].file, "%s", name);
    snprintf(m->r[i].path, sizeof m->r[i].path, "%s/%s", m->dir, name);
    m->r[i].rank = m->r[i].expect = -1;
    return TSC_OK;
}

tsc_status_t tsc_mview_from_file(hid_t root, const char *path, tsc_mview_t **out) {
    *out = NULL;
    long v = 0, n = 0;
    tsc_status_t st = tsc_h5_attr_read_long(root, "format_version", &v);
    if (st != TSC_OK) return tsc_error_wrap(st, "%s: manifest: ", path);
    if (v != 1)
        return tsc_error_set(TSC_ERR_VERSION, "%s: manifest format version %ld, this build reads version 1", path, v);
    if ((st = tsc_h5_attr_read_long(root, "world_size", &n)) != TSC_OK) return tsc_error_wrap(st, "%s: manifest: ", path);
    if (n < 1 || n > MAX_RANKS)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: manifest world_size %ld is outside 1..%d", path, n, MAX_RANKS);
    char dir[4096];
    dir_of(path, dir, sizeof dir);
    tsc_mview_t *m = mview_new(path, dir, (int)n);
    if (!m) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < m->n && st == TSC_OK; i++) {
        char g[64], name[512];
        snprintf(g, sizeof g, "ranks/rank_%05d", i);
        if (!tsc_h5_exists(root, g)) {
            st = tsc_error_set(TSC_ERR_MISSING, "%s: manifest lists no file for rank %d of %ld (group %s is missing)", path,
                               i, n, g);
            break;
        }
        if ((st = tsc_h5_check_link(root, g)) != TSC_OK) break;
        hid_t gid = H5Gopen2(root, g, tsc_h5_gapl());
        if (gid < 0) { st = tsc_error_set(TSC_ERR_FORMAT, "%s: manifest group %s is unreadable", path, g); break; }
        st = tsc_h5_attr_read_str(gid, "file", name, sizeof name);
        H5Gclose(gid);
        if (st != TSC_OK) { st = tsc_error_wrap(st, "%s: manifest %s: ", path, g); break; }
        st = set_file(m, i, name);
        m->r[i].expect = i;
    }
    if (st != TSC_OK) { tsc_mview_free(m); return st; }
    *out = m;
    return TSC_OK;
}

/* N of "<anything>.rank<N>.h5" or "rank<N>.h5", else -1. */
static long rank_of_name(const char *s) {
    size_t len = strlen(s);
    if (len < 8 || strcmp(s + len - 3, ".h5")) return -1;
    const char *end = s + len - 3, *p = end;
    while (p > s && p[-1] >= '0' && p[-1] <= '9') p--;
    if (p == end || end - p > 6 || p - s < 4 || strncmp(p - 4, "rank", 4)) return -1;
    if (p - 4 != s && p[-5] != '.') return -1;
    return strtol(p, NULL, 10);
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

tsc_status_t tsc_mview_from_dir(const char *dir, tsc_mview_t **out) {
    *out = NULL;
    DIR *dd = opendir(dir);
    if (!dd) return tsc_error_set(TSC_ERR_IO, "%s: cannot list the folder: %s", dir, strerror(errno));
    char **names = NULL;
    int n = 0, cap = 0;
    tsc_status_t st = TSC_OK;
    for (struct dirent *e; (e = readdir(dd));) {
        if (rank_of_name(e->d_name) < 0) continue;
        if (n == MAX_RANKS) { st = tsc_error_set(TSC_ERR_UNSUPPORTED, "%s: more than %d rank dumps", dir, MAX_RANKS); break; }
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **nn = realloc(names, (size_t)cap * sizeof *names);
            if (!nn) { st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", dir); break; }
            names = nn;
        }
        if (!(names[n] = strdup(e->d_name))) { st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", dir); break; }
        n++;
    }
    closedir(dd);
    tsc_mview_t *m = NULL;
    if (st == TSC_OK && !n)
        st = tsc_error_set(TSC_ERR_MISSING, "%s: a folder that is neither a capture session (no session.h5) nor a run of "
                           "ranks (no manifest.h5 and no rank dumps named *.rank<N>.h5)", dir);
    if (st == TSC_OK) {
        qsort(names, (size_t)n, sizeof *names, cmp_names);
        if (!(m = mview_new(dir, dir, n))) st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", dir);
        for (int i = 0; st == TSC_OK && i < n; i++)
            if ((st = set_file(m, i, names[i])) == TSC_OK) m->r[i].expect = (int)rank_of_name(names[i]);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    if (st != TSC_OK) { tsc_mview_free(m); return st; }
    *out = m;
    return TSC_OK;
}

static int cmp_rank(const void *a, const void *b) {
    const mrank_t *x = a, *y = b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* An optional integer root attribute of a rank dump, or def. */
static tsc_status_t opt_long(tsc_dump_t *d, const char *name, long def, long *v) {
    size_t n = 0;
    tsc_status_t st = tsc_dump_attr_longs(d, name, v, 1, &n);
    if (st == TSC_ERR_MISSING) { tsc_error_clear(); *v = def; return TSC_OK; }
    if (st == TSC_OK && n != 1) return tsc_error_set(TSC_ERR_FORMAT, "%s: root attribute '%s' must be one integer",
                                                    tsc_dump_path(d), name);
    return st;
}

#define GRID(m, dp, tp, pp) ((m)->grid[((size_t)(dp) * (size_t)(m)->tp_size + (size_t)(tp)) * (size_t)(m)->pp_size + (size_t)(pp)])

tsc_status_t tsc_mview_open(tsc_mview_t *m, tsc_dump_meta_t *meta, long long **steps, int *n_steps,
                            long long *incomplete, uint64_t *bytes) {
    *steps = NULL;
    *n_steps = 0;
    tsc_status_t st = TSC_OK;
    long sizes[3] = {0, 0, 0};
    for (int i = 0; i < m->n; i++) {
        mrank_t *r = &m->r[i];
        struct stat sb;
        if (lstat(r->path, &sb) == 0 && S_ISLNK(sb.st_mode) && !tsc_h5_trusted())
            return tsc_error_set(TSC_ERR_FORMAT, "%s: %s is a symbolic link; a rank dump of an untrusted run must be a file "
                                 "in its folder (--trust-links to follow it)", m->src, r->file);
        if ((st = tsc_dump_open(&r->d, r->path)) != TSC_OK) {
            if (r->expect >= 0)
                return tsc_error_wrap(st, "%s: rank %d of %d (%s): ", m->src, r->expect, m->n, r->file);
            return tsc_error_wrap(st, "%s: rank dump %s: ", m->src, r->file);
        }
        if (tsc_dump_n_ranks(r->d))
            return tsc_error_set(TSC_ERR_FORMAT, "%s: %s is itself a run of many ranks; a manifest lists rank dumps",
                                 m->src, r->file);
        const tsc_dump_meta_t *rm = tsc_dump_meta(r->d);
        r->rank = rm->rank;
        if (r->expect >= 0 && r->expect != r->rank)
            return tsc_error_set(TSC_ERR_FORMAT, "%s: %s holds rank %d, but %s says rank %d", m->src, r->file, r->rank,
                                 m->src[0] && strcmp(m->src, m->dir) ? "the manifest" : "its name", r->expect);
        r->bytes = tsc_dump_size_bytes(r->d);
        long c[6];
        const char *cn[6] = {"dp_rank", "dp_size", "tp_rank", "tp_size", "pp_rank", "pp_size"};
        long cd[6] = {rm->rank, rm->world_size, 0, 1, 0, 1};
        for (int k = 0; k < 6 && st == TSC_OK; k++) st = opt_long(r->d, cn[k], cd[k], &c[k]);
        if (st != TSC_OK) return st;
        if (rm->world_size != tsc_dump_meta(m->r[0].d)->world_size)
            return tsc_error_set(TSC_ERR_SHAPE, "%s: %s says world_size %d, %s says %d", m->src, r->file, rm->world_size,
                                 m->r[0].file, tsc_dump_meta(m->r[0].d)->world_size);
        if (c[1] < 1 || c[3] < 1 || c[5] < 1 || c[1] * c[3] * c[5] != rm->world_size || c[0] < 0 || c[0] >= c[1] ||
            c[2] < 0 || c[2] >= c[3] || c[4] < 0 || c[4] >= c[5])
            return tsc_error_set(TSC_ERR_SHAPE, "%s: %s: parallel coordinates dp %ld/%ld, tp %ld/%ld, pp %ld/%ld do not "
                                 "fit world_size %d (each rank below its size, the sizes' product the world size)",
                                 m->src, r->file, c[0], c[1], c[2], c[3], c[4], c[5], rm->world_size);
        if (i == 0) { sizes[0] = c[1]; sizes[1] = c[3]; sizes[2] = c[5]; }
        else if (c[1] != sizes[0] || c[3] != sizes[1] || c[5] != sizes[2])
            return tsc_error_set(TSC_ERR_SHAPE, "%s: %s says dp x tp x pp = %ld x %ld x %ld, %s says %ld x %ld x %ld",
                                 m->src, r->file, c[1], c[3], c[5], m->r[0].file, sizes[0], sizes[1], sizes[2]);
        r->dp = (int)c[0]; r->tp = (int)c[2]; r->pp = (int)c[4];
    }
    qsort(m->r, (size_t)m->n, sizeof *m->r, cmp_rank);
    int ws = tsc_dump_meta(m->r[0].d)->world_size;
    if (ws > m->n) { /* name the ranks no dump holds */
        char miss[512] = "";
        int nm = 0;
        size_t at = 0;
        for (int k = 0, j = 0; k < ws; k++) {
            while (j < m->n && m->r[j].rank < k) j++;
            if (j < m->n && m->r[j].rank == k) continue;
            if (nm++ < 16 && at < sizeof miss - 16) at += (size_t)snprintf(miss + at, sizeof miss - at, "%s%d", nm > 1 ? ", " : "", k);
        }
        return tsc_error_set(TSC_ERR_MISSING, "%s: %s %s%s of world_size %d %s missing (no rank dump holds %s)", m->src,
                             nm > 1 ? "ranks" : "rank", miss, nm > 16 ? ", ..." : "", ws, nm > 1 ? "are" : "is",
                             nm > 1 ? "them" : "it");
    }
    if (ws < m->n)
        return tsc_error_set(TSC_ERR_SHAPE, "%s: %d rank dumps for a run of world_size %d", m->src, m->n, ws);
    for (int i = 0; i < m->n; i++) {
        if (m->r[i].rank == i) continue;
        int dup = i > 0 && m->r[i].rank == m->r[i - 1].rank;
        if (dup)
            return tsc_error_set(TSC_ERR_FORMAT, "%s: %s and %s both hold rank %d", m->src, m->r[i - 1].file,
                                 m->r[i].file, m->r[i].rank);
        return tsc_error_set(TSC_ERR_MISSING, "%s: rank %d of %d is missing (no rank dump holds it)", m->src, i, m->n);
    }
    m->dp_size = (int)sizes[0]; m->tp_size = (int)sizes[1]; m->pp_size = (int)sizes[2];
    m->grid = malloc((size_t)m->n * sizeof *m->grid);
    if (!m->grid) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", m->src);
    for (int i = 0; i < m->n; i++) m->grid[i] = -1;
    for (int i = 0; i < m->n; i++) {
        int *g = &GRID(m, m->r[i].dp, m->r[i].tp, m->r[i].pp);
        if (*g >= 0)
            return tsc_error_set(TSC_ERR_FORMAT, "%s: %s and %s have the same coordinates (dp %d, tp %d, pp %d)", m->src,
                                 m->r[*g].file, m->r[i].file, m->r[i].dp, m->r[i].tp, m->r[i].pp);
        *g = i;
    }
    /* the geometry: every rank the same shard shape */
    const tsc_dump_meta_t *m0 = tsc_dump_meta(m->r[0].d);
    for (int i = 1; i < m->n; i++) {
        const tsc_dump_meta_t *mi = tsc_dump_meta(m->r[i].d);
        const char *what = NULL;
        if (mi->n_layer != m0->n_layer) what = "n_layer";
        else if (mi->n_head != m0->n_head) what = "n_head";
        else if (mi->n_kv_head != m0->n_kv_head) what = "n_kv_head";
        else if (mi->head_dim != m0->head_dim) what = "head_dim";
        else if (mi->d_model != m0->d_model) what = "d_model";
        else if (mi->seq_len != m0->seq_len) what = "seq_len";
        else if (mi->batch != m0->batch) what = "batch";
        else if (mi->causal != m0->causal) what = "causal";
        else if (mi->softmax_scale != m0->softmax_scale) what = "softmax_scale";
        else if (mi->tile_q != m0->tile_q || mi->tile_k != m0->tile_k) what = "tile_q/tile_k";
        else if (strcmp(mi->policy, m0->policy)) what = "policy";
        if (what)
            return tsc_error_set(TSC_ERR_SHAPE, "%s: %s and %s disagree on '%s' (the ranks of one run share a geometry)",
                                 m->src, m->r[0].file, m->r[i].file, what);
        int ns = tsc_dump_n_steps(m->r[i].d);
        for (int k = 0; k < ns || k < tsc_dump_n_steps(m->r[0].d); k++) {
            long long a = tsc_dump_step_at(m->r[0].d, k), b = tsc_dump_step_at(m->r[i].d, k);
            if (a != b)
                return tsc_error_set(TSC_ERR_SHAPE, "%s: %s and %s hold different steps (%s %lld, %s %lld at position %d)",
                                     m->src, m->r[0].file, m->r[i].file, m->r[0].file, a, m->r[i].file, b, k);
        }
    }
    m->b_local = m0->batch;
    m->h_local = m0->n_head;
    m->hkv_local = m0->n_kv_head;
    *meta = *m0;
    meta->batch = m0->batch * m->dp_size;
    meta->n_head = m0->n_head * m->tp_size;
    meta->n_kv_head = m0->n_kv_head * m->tp_size;
    meta->rank = 0;
    meta->world_size = m->n;
    /* the run's steps: the first rank's (all agree) */
    int ns = tsc_dump_n_steps(m->r[0].d);
    if (ns > 0) {
        *steps = malloc((size_t)ns * sizeof **steps);
        if (!*steps) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", m->src);
        for (int k = 0; k < ns; k++) (*steps)[k] = tsc_dump_step_at(m->r[0].d, k);
    }
    *n_steps = ns;
    *incomplete = -1;
    *bytes = 0;
    for (int i = 0; i < m->n; i++) {
        long long inc = tsc_dump_incomplete_step(m->r[i].d);
        if (inc >= 0 && (*incomplete < 0 || inc < *incomplete)) *incomplete = inc;
        *bytes += m->r[i].bytes;
    }
    m->open = 1;
    return TSC_OK;
}

/* The pipeline rank (of data rank dp, tensor rank tp) holding layer at step, or -1. */
static int pp_of(tsc_mview_t *m, int dp, int tp, long long step, int layer) {
    for (int pp = 0; pp < m->pp_size; pp++)
        if (tsc_dump_has_layer(m->r[GRID(m, dp, tp, pp)].d, step, layer)) return pp;
    return -1;
}

/* 1 for the datasets indexed by kv head. */
static int kv_name(const char *name) {
    return !strcmp(name, "k") || !strcmp(name, "v") || !strcmp(name, "dk") || !strcmp(name, "dv");
}
static int weight_name(const char *name) { return !strncmp(name, "w_", 2); }

tsc_dump_t *tsc_mview_pick(tsc_mview_t *m, long long step, int layer, const char *name, int b, int h, int *lb,
                           int *lh) {
    int dp = 0, tp = 0;
    *lb = b; *lh = h;
    if (weight_name(name)) {
        *lb = *lh = 0;
    } else {
        dp = b / m->b_local; *lb = b % m->b_local;
        if (strcmp(name, "x")) {
            int hl = kv_name(name) ? m->hkv_local : m->h_local;
            tp = h / hl; *lh = h % hl;
        }
    }
    if (dp >= m->dp_size) dp = m->dp_size - 1;
    if (tp >= m->tp_size) tp = m->tp_size - 1;
    int pp = pp_of(m, dp, tp, step, layer);
    if (pp < 0) {
        (void)tsc_error_set(TSC_ERR_MISSING, "%s: step %lld has no layer %d in any rank", m->src, step, layer);
        return NULL;
    }
    return m->r[GRID(m, dp, tp, pp)].d;
}

tsc_status_t tsc_mview_layers(tsc_mview_t *m, long long step, int *layers, int cap, int *n) {
    *n = 0;
    int total = 0;
    for (int pp = 0; pp < m->pp_size; pp++) {
        int got = 0, buf[4096];
        tsc_status_t st = tsc_dump_layers(m->r[GRID(m, 0, 0, pp)].d, step, buf, 4096, &got);
        if (st != TSC_OK) return st;
        for (int k = 0; k < got && k < 4096; k++) {
            /* merge into the ascending list */
            int at = total < cap ? total : cap, j;
            for (j = 0; j < at && layers[j] < buf[k]; j++) {}
            if (j < at && layers[j] == buf[k])
                return tsc_error_set(TSC_ERR_FORMAT, "%s: layer %d of step %lld is held by two pipeline ranks", m->src,
                                     buf[k], step);
            if (j < cap) {
                int last = at < cap ? at : cap - 1;
                memmove(layers + j + 1, layers + j, (size_t)(last - j) * sizeof *layers);
                layers[j] = buf[k];
            }
            total++;
        }
    }
    *n = total;
    return TSC_OK;
}

tsc_status_t tsc_mview_dataset_info(tsc_mview_t *m, long long step, int layer, const char *name,
                                    tsc_dump_dataset_info_t *info) {
    if (weight_name(name) && m->tp_size > 1)
        return tsc_error_set(TSC_ERR_UNSUPPORTED, "%s: step %lld, layer %d: the weights of tensor-parallel ranks are shards; "
                             "a run of %d tensor ranks is read without '%s'", m->src, step, layer, m->tp_size, name);
    int lb, lh;
    tsc_dump_t *d = tsc_mview_pick(m, step, layer, name, 0, 0, &lb, &lh);
    if (!d) return TSC_ERR_MISSING;
    tsc_status_t st = tsc_dump_dataset_info(d, step, layer, name, info);
    if (st != TSC_OK || weight_name(name)) return st;
    if (info->per_head) {
        info->dims[0] *= (uint64_t)m->dp_size;
        info->dims[1] *= (uint64_t)m->tp_size;
        if (m->tp_size > 1) info->heads_mask = ~0ull;
    } else if (!strcmp(name, "x")) {
        info->dims[0] *= (uint64_t)m->dp_size;
    }
    uint64_t sum = 0;
    int pp = pp_of(m, 0, 0, step, layer);
    for (int dp = 0; dp < m->dp_size; dp++)
        for (int tp = 0; tp < m->tp_size; tp++) {
            tsc_dump_dataset_info_t in;
            tsc_dump_t *r = m->r[GRID(m, dp, tp, pp < 0 ? 0 : pp)].d;
            if (tsc_dump_dataset_info(r, step, layer, name, &in) != TSC_OK)
                return tsc_error_wrap(TSC_ERR_MISSING, "%s: ", m->src);
            sum += in.storage_bytes;
        }
    info->storage_bytes = sum;
    return TSC_OK;
}

typedef struct {
    tsc_dump_report_fn fn;
    void *ctx;
    const mrank_t *r;
} prefix_t;

static void prefix_report(void *ctx, int severity, const char *message) {
    prefix_t *p = ctx;
    char buf[2048];
    snprintf(buf, sizeof buf, "rank %d (%s): %s", p->r->rank, p->r->file, message);
    if (p->fn) p->fn(p->ctx, severity, buf);
}

int tsc_mview_validate(tsc_mview_t *m, int deep, tsc_dump_report_fn fn, void *ctx) {
    int errors = 0;
    for (int i = 0; i < m->n; i++) {
        prefix_t p = {fn, ctx, &m->r[i]};
        errors += tsc_dump_validate(m->r[i].d, deep, prefix_report, &p);
    }
    return errors;
}

tsc_status_t tsc_mview_rank(const tsc_mview_t *m, int i, tsc_dump_rank_t *out) {
    if (!m || i < 0 || i >= m->n) return tsc_error_set(TSC_ERR_ARG, "rank index %d outside 0..%d", i, m ? m->n - 1 : -1);
    const mrank_t *r = &m->r[i];
    memset(out, 0, sizeof *out);
    out->rank = r->rank;
    out->dp_rank = r->dp; out->tp_rank = r->tp; out->pp_rank = r->pp;
    snprintf(out->file, sizeof out->file, "%s", r->file);
    out->batch0 = r->dp * m->b_local; out->batch_n = m->b_local;
    out->head0 = r->tp * m->h_local; out->head_n = m->h_local;
    out->bytes = r->bytes;
    return TSC_OK;
}

int tsc_mview_rank_of(tsc_mview_t *m, long long step, int layer, int b, int h) {
    int dp = b / m->b_local, tp = h / m->h_local;
    if (dp < 0 || dp >= m->dp_size || tp < 0 || tp >= m->tp_size) return -1;
    int pp = layer >= 0 ? pp_of(m, dp, tp, step, layer) : 0;
    return GRID(m, dp, tp, pp < 0 ? 0 : pp);
}

/* ---- writing a manifest ---------------------------------------------------------------------- */

static tsc_status_t write_manifest(const char *path, tsc_mview_t *m, const tsc_dump_meta_t *meta,
                                   const long long *steps, int n_steps) {
    tsc_h5_file_t f;
    tsc_status_t st = tsc_h5_create(&f, path);
    if (st != TSC_OK) return st;
    hid_t root = f.fid;
    st = tsc_h5_attr_write_str(root, "format", MANIFEST_FORMAT);
    struct { const char *name; long v; } ints[] = {
        {"format_version", 1}, {"world_size", m->n}, {"dp_size", m->dp_size}, {"tp_size", m->tp_size},
        {"pp_size", m->pp_size}, {"n_layer", meta->n_layer}, {"n_head", meta->n_head}, {"n_kv_head", meta->n_kv_head},
        {"head_dim", meta->head_dim}, {"d_model", meta->d_model}, {"seq_len", meta->seq_len}, {"batch", meta->batch},
        {"causal", meta->causal}};
    for (size_t i = 0; st == TSC_OK && i < sizeof ints / sizeof ints[0]; i++)
        st = tsc_h5_attr_write_long(root, ints[i].name, ints[i].v);
    if (st == TSC_OK) st = tsc_h5_attr_write_double(root, "softmax_scale", meta->softmax_scale);
    if (st == TSC_OK) st = tsc_h5_attr_write_str(root, "policy", meta->policy);
    char producer[64];
    snprintf(producer, sizeof producer, "tilescope-merge %s", tsc_version());
    if (st == TSC_OK) st = tsc_h5_attr_write_str(root, "producer", producer);
    if (st == TSC_OK && n_steps > 0) {
        long *sv = malloc((size_t)n_steps * sizeof *sv);
        if (!sv) st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", path);
        for (int i = 0; sv && i < n_steps; i++) sv[i] = (long)steps[i];
        if (st == TSC_OK) st = tsc_h5_attr_write_longs(root, "steps", sv, (size_t)n_steps);
        free(sv);
    }
    for (int i = 0; st == TSC_OK && i < m->n; i++) {
        char g[64];
        snprintf(g, sizeof g, "ranks/rank_%05d", i);
        hid_t gid;
        if ((st = tsc_h5_group_create(root, g, &gid)) != TSC_OK) break;
        tsc_dump_rank_t r;
        (void)tsc_mview_rank(m, i, &r); /* i < n: cannot fail */
        st = tsc_h5_attr_write_str(gid, "file", r.file);
        long v[] = {r.rank, r.dp_rank, r.tp_rank, r.pp_rank, r.batch0, r.batch_n, r.head0, r.head_n, (long)r.bytes};
        const char *vn[] = {"rank", "dp_rank", "tp_rank", "pp_rank", "batch0", "batch_n", "head0", "head_n", "bytes"};
        for (size_t k = 0; st == TSC_OK && k < sizeof v / sizeof *v; k++) st = tsc_h5_attr_write_long(gid, vn[k], v[k]);
        H5Gclose(gid);
    }
    if (st != TSC_OK) { tsc_h5_abort(&f); return st; }
    return tsc_h5_commit(&f);
}

static tsc_status_t same_dir(const char *manifest, const char *rank_path) {
    char a[4096], b[4096], ra[4096], rb[4096];
    dir_of(manifest, a, sizeof a);
    dir_of(rank_path, b, sizeof b);
    if (!realpath(a, ra)) return tsc_error_set(TSC_ERR_IO, "%s: cannot resolve its folder: %s", manifest, strerror(errno));
    if (!realpath(b, rb)) return tsc_error_set(TSC_ERR_IO, "%s: cannot resolve its folder: %s", rank_path, strerror(errno));
    if (strcmp(ra, rb))
        return tsc_error_set(TSC_ERR_ARG, "%s: a manifest names its rank dumps by file name in its own folder; %s is in "
                             "another folder", manifest, rank_path);
    return TSC_OK;
}

static tsc_status_t manifest_write(const char *path, tsc_mview_t *m) {
    tsc_dump_meta_t meta;
    long long *steps = NULL, inc;
    int n_steps = 0;
    uint64_t bytes;
    tsc_status_t st = tsc_mview_open(m, &meta, &steps, &n_steps, &inc, &bytes);
    if (st == TSC_OK) st = write_manifest(path, m, &meta, steps, n_steps);
    free(steps);
    return st;
}

tsc_status_t tsc_manifest_write(const char *path, const char *const *rank_paths, int n) {
    if (!path || !*path || !rank_paths || n < 1 || n > MAX_RANKS)
        return tsc_error_set(TSC_ERR_ARG, "tsc_manifest_write: a path and 1..%d rank dumps are needed", MAX_RANKS);
    char dir[4096];
    dir_of(path, dir, sizeof dir);
    tsc_mview_t *m = mview_new(path, dir, n);
    if (!m) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", path);
    tsc_status_t st = TSC_OK;
    for (int i = 0; st == TSC_OK && i < n; i++) {
        const char *sl = strrchr(rank_paths[i], '/');
        st = same_dir(path, rank_paths[i]);
        if (st == TSC_OK) st = set_file(m, i, sl ? sl + 1 : rank_paths[i]);
        if (st == TSC_OK && !strcmp(m->r[i].path, path))
            st = tsc_error_set(TSC_ERR_ARG, "%s: the manifest cannot be one of its rank dumps", path);
    }
    if (st == TSC_OK) st = manifest_write(path, m);
    tsc_mview_free(m);
    return st;
}

tsc_status_t tsc_manifest_write_dir(const char *dir) {
    tsc_mview_t *m = NULL;
    tsc_status_t st = tsc_mview_from_dir(dir, &m);
    if (st != TSC_OK) return st;
    char path[4200];
    snprintf(path, sizeof path, "%s/manifest.h5", dir);
    snprintf(m->src, sizeof m->src, "%s", dir);
    st = manifest_write(path, m);
    tsc_mview_free(m);
    return st;
}
