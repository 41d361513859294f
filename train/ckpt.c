/* ckpt.c: the trainer's run.cfg text and its checkpoints (docs/TRAINING.md, "Run folder").
 *
 * Checkpoint layout (host byte order, x86-64: little-endian):
 *   "TSCKPT01"   8 bytes magic
 *   u64 cfg_len  i64 steps_done  u32 prec  u32 elsize  u64 n        (32 bytes)
 *   cfg_len bytes of run.cfg text
 *   params, AdamW m, AdamW v        n * elsize bytes each
 *   u64 FNV-1a of every byte above
 * The file is written to a temporary name and renamed (util/tsc_file.h), so a kill at any moment
 * leaves the previous checkpoint or the new one, never a torn file.
 *
 * A checkpoint is read as data from anyone (docs/SECURITY.md): it is opened without following a
 * link, the header must frame exactly the file, and each numeric setting of its text is checked
 * against the bounds of its `tilescope train` flag (tsc_train.h's settings table, settings.c) as
 * it is parsed. Stands on settings.c; the loop (train.c) calls it, never the reverse. */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_internal.h"
#include "tsc_file.h"
#include "tsc_strbuf.h"

#define CKPT_MAGIC "TSCKPT01"
#define CKPT_FIXED 40
#define CKPT_CFG_MAX (1u << 20)

/* ---- run.cfg ---- */

char *tsc_train_cfg_text(const tsc_train_opts_t *o, int threads) {
    tsc_strbuf_t sb;
    tsc_strbuf_init(&sb);
    tsc_strbuf_printf(&sb, "# tilescope train settings (read back by --resume)\n");
    tsc_strbuf_printf(&sb, "model = %s\nprecision = %s\ndata = %s\n", o->model, tsc_train_prec_name(o->prec), o->data);
    tsc_strbuf_printf(&sb, "batch = %d\nseq_len = %d\nsteps = %lld\n", o->batch, o->seq_len, o->steps);
    tsc_strbuf_printf(&sb, "lr = %.17g\nmin_lr_frac = %.17g\nwarmup = %d\n", o->lr, o->min_lr_frac, o->warmup);
    tsc_strbuf_printf(&sb, "beta1 = %.17g\nbeta2 = %.17g\neps = %.17g\n", o->beta1, o->beta2, o->eps);
    tsc_strbuf_printf(&sb, "weight_decay = %.17g\ngrad_clip = %.17g\n", o->weight_decay, o->grad_clip);
    tsc_strbuf_printf(&sb, "seed = %" PRIu64 "\n", o->seed);
    for (int i = 0; i < o->n_attn_policy; i++) tsc_strbuf_printf(&sb, "attn_policy = %s\n", o->attn_policy[i]);
    tsc_strbuf_printf(&sb, "val_every = %d\nval_batches = %d\nstats_every = %d\nckpt_every = %d\nckpt_keep = %d\n",
                      o->val_every, o->val_batches, o->stats_every, o->ckpt_every, o->ckpt_keep);
    if (o->capture) tsc_strbuf_printf(&sb, "capture = %s\n", o->capture);
    if (o->batches) tsc_strbuf_printf(&sb, "batches = %s\n", o->batches);
    tsc_strbuf_printf(&sb, "flight_steps = %d\n", o->flight_steps);
    if (o->flight_layers) tsc_strbuf_printf(&sb, "flight_layers = %s\n", o->flight_layers);
    if (o->flight_keep > 0) tsc_strbuf_printf(&sb, "flight_keep = %d\n", o->flight_keep);
    tsc_strbuf_printf(&sb, "flight_dumps = %d\nflight_max_mb = %.17g\nspike_factor = %.17g\n", o->flight_dumps,
                      o->flight_max_mb, o->spike_factor);
    tsc_strbuf_printf(&sb, "lr_spike_step = %lld\nlr_spike = %.17g\n", o->lr_spike_step, o->lr_spike);
    if (o->fork_of) tsc_strbuf_printf(&sb, "fork_of = %s\n", o->fork_of);
    if (o->grad_shards > 1) tsc_strbuf_printf(&sb, "grad_shards = %d\n", o->grad_shards);
    tsc_strbuf_printf(&sb, "threads = %d\n", threads);
    if (sb.nomem) {
        tsc_strbuf_free(&sb);
        return NULL;
    }
    return tsc_strbuf_take(&sb);
}

static int copy_str(char *dst, size_t cap, const char *v) {
    size_t n = strlen(v);
    if (n >= cap) return -1;
    memcpy(dst, v, n + 1);
    return 0;
}

/* A number of the kind of a settings row, the whole value (no trailing text), into dst. */
static int parse_value(tsc_train_kind_t kind, const char *v, void *dst) {
    char *end;
    errno = 0;
    if (kind == TSC_TRAIN_DOUBLE) {
        double x = strtod(v, &end);
        /* subnormals refused too: strtod flags some of them ERANGE and not others, so one printed
         * back (%.17g) might not parse again */
        if (end == v || *end || errno == ERANGE || !isfinite(x) || (x != 0 && fabs(x) < DBL_MIN)) return -1;
        *(double *)dst = x;
        return 0;
    }
    if (kind == TSC_TRAIN_U64) {
        if (*v == '-') return -1;
        unsigned long long u = strtoull(v, &end, 10);
        if (end == v || *end || errno) return -1;
        *(uint64_t *)dst = u;
        return 0;
    }
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || errno) return -1;
    if (kind == TSC_TRAIN_INT) {
        if (x < INT_MIN || x > INT_MAX) return -1;
        *(int *)dst = (int)x;
    } else {
        *(long long *)dst = x;
    }
    return 0;
}

/* One "key = value" line into c; what names the file and the line. A numeric setting is parsed
 * by its row of the settings table and checked against its bounds at once (tsc_train.h). */
static tsc_status_t cfg_set(tsc_train_cfg_t *c, const char *key, const char *v, const char *what) {
    tsc_train_opts_t *o = &c->o;
    const tsc_train_setting_t *row = tsc_train_setting_find(key);
    if (row) {
        if (parse_value(row->kind, v, (char *)o + row->offset))
            return tsc_error_set(TSC_ERR_FORMAT, "%s: bad value for %s: '%s'", what, key, v);
        return tsc_train_setting_check(row, o, what);
    }
    if (!strcmp(key, "precision")) {
        for (int p = TSC_PREC_FP32; p <= TSC_PREC_FP64; p++)
            if (!strcmp(v, tsc_train_prec_name((tsc_prec_t)p))) {
                o->prec = (tsc_prec_t)p;
                return TSC_OK;
            }
        return tsc_error_set(TSC_ERR_FORMAT, "%s: bad value for precision: '%s' (fp32, bf16 or fp64)", what, v);
    }
    if (!strcmp(key, "attn_policy")) {
        if (o->n_attn_policy >= TSC_TRAIN_MAX_POLICIES)
            return tsc_error_set(TSC_ERR_FORMAT, "%s: more than %d attn_policy settings", what, TSC_TRAIN_MAX_POLICIES);
        if (copy_str(c->policy[o->n_attn_policy], sizeof c->policy[0], v))
            return tsc_error_set(TSC_ERR_FORMAT, "%s: the attn_policy value is longer than %zu bytes", what,
                                 sizeof c->policy[0] - 1);
        o->attn_policy[o->n_attn_policy] = c->policy[o->n_attn_policy];
        o->n_attn_policy++;
        return TSC_OK;
    }
    struct { const char *k; char *buf; size_t cap; const char **dst; } strs[] = {
        {"model", c->model, sizeof c->model, &o->model}, {"data", c->data, sizeof c->data, &o->data},
        {"capture", c->capture, sizeof c->capture, &o->capture},
        {"batches", c->batches, sizeof c->batches, &o->batches},
        {"flight_layers", c->flight_layers, sizeof c->flight_layers, &o->flight_layers},
        {"fork_of", c->fork_of, sizeof c->fork_of, &o->fork_of}};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if (!strcmp(key, strs[i].k)) {
            if (copy_str(strs[i].buf, strs[i].cap, v))
                return tsc_error_set(TSC_ERR_FORMAT, "%s: the %s value is longer than %zu bytes", what, key,
                                     strs[i].cap - 1);
            *strs[i].dst = strs[i].buf;
            return TSC_OK;
        }
    return tsc_error_set(TSC_ERR_FORMAT, "%s: unknown setting '%s'", what, key);
}

tsc_status_t tsc_train_cfg_parse(const char *text, const char *what, tsc_train_cfg_t *c) {
    memset(c, 0, sizeof *c);
    tsc_train_opts_init(&c->o);
    c->o.model = NULL;
    c->o.data = NULL;
    int line = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        line++;
        char buf[1200], where[4200];
        snprintf(where, sizeof where, "%s:%d", what, line);
        if (len >= sizeof buf) return tsc_error_set(TSC_ERR_FORMAT, "%s: line too long", where);
        memcpy(buf, p, len);
        buf[len] = 0;
        p += len + (nl != NULL);
        if (!buf[0] || buf[0] == '#') continue;
        char *eq = strstr(buf, " = ");
        if (!eq) return tsc_error_set(TSC_ERR_FORMAT, "%s: expected 'key = value', found '%s'", where, buf);
        *eq = 0;
        tsc_status_t st = cfg_set(c, buf, eq + 3, where);
        if (st != TSC_OK) return st;
    }
    if (!c->o.model || !c->o.data)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: missing the 'model' or 'data' setting", what);
    return tsc_train_opts_check(&c->o, what);
}

/* ---- opening the files of a run folder ---- */

tsc_status_t tsc_train_file_open(const char *path, int flags, int *fd) {
    *fd = open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (*fd < 0) {
        int e = errno;
        struct stat ls;
        if (e == ELOOP || (lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode)))
            return tsc_error_set(TSC_ERR_IO, "%s: is a symbolic link; the files of a run folder are never opened "
                                 "through a link (it could copy a file of yours into the run, or make the trainer "
                                 "write to it); refused", path);
        return tsc_error_set(TSC_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    struct stat s;
    if (fstat(*fd, &s) != 0 || !S_ISREG(s.st_mode)) {
        close(*fd);
        *fd = -1;
        return tsc_error_set(TSC_ERR_IO, "%s: not a regular file (a directory, FIFO, device or socket); refused", path);
    }
    return TSC_OK;
}

/* ---- checkpoints ---- */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define FNV_INIT 0xcbf29ce484222325ull

static void put_u64(unsigned char *b, uint64_t v) { memcpy(b, &v, 8); }
static void put_u32(unsigned char *b, uint32_t v) { memcpy(b, &v, 4); }

tsc_status_t tsc_ckpt_save(const char *path, const tsc_ckpt_t *c) {
    unsigned char hdr[CKPT_FIXED];
    size_t cfg_len = strlen(c->cfg_text);
    memcpy(hdr, CKPT_MAGIC, 8);
    put_u64(hdr + 8, cfg_len);
    put_u64(hdr + 16, (uint64_t)c->steps_done);
    put_u32(hdr + 24, (uint32_t)c->prec);
    put_u32(hdr + 28, (uint32_t)c->elsize);
    put_u64(hdr + 32, c->n);
    tsc_out_t out;
    tsc_status_t st = tsc_out_open(&out, path);
    if (st != TSC_OK) return st;
    uint64_t h = fnv1a(FNV_INIT, hdr, sizeof hdr);
    h = fnv1a(h, c->cfg_text, cfg_len);
    int ok = fwrite(hdr, 1, sizeof hdr, out.fp) == sizeof hdr && fwrite(c->cfg_text, 1, cfg_len, out.fp) == cfg_len;
    const void *arr[3] = {c->params, c->m, c->v};
    for (int i = 0; i < 3 && ok; i++) {
        ok = fwrite(arr[i], c->elsize, c->n, out.fp) == c->n;
        h = fnv1a(h, arr[i], c->n * c->elsize);
    }
    unsigned char tail[8];
    put_u64(tail, h);
    if (!ok || fwrite(tail, 1, 8, out.fp) != 8) {
        int e = errno;
        tsc_out_abort(&out);
        return tsc_error_set(TSC_ERR_IO, "%s: cannot write the checkpoint: %s", path, strerror(e));
    }
    return tsc_out_commit(&out);
}

/* The checkpoint opened without following a link (tsc_train_file_open), its size from fstat. */
static tsc_status_t ckpt_open(const char *path, FILE **fp, long long *size) {
    int fd;
    tsc_status_t st = tsc_train_file_open(path, O_RDONLY, &fd);
    if (st != TSC_OK) return st;
    struct stat s;
    if (fstat(fd, &s) != 0 || !(*fp = fdopen(fd, "rb"))) {
        st = tsc_error_set(TSC_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        close(fd);
        return st;
    }
    *size = (long long)s.st_size;
    return TSC_OK;
}

unsigned long long tsc_ckpt_size(unsigned long long cfg_len, unsigned long long n, unsigned long long elsize) {
    return CKPT_FIXED + cfg_len + 3ull * n * elsize + 8;
}

tsc_status_t tsc_ckpt_parse_header(const unsigned char *b, size_t avail, unsigned long long file_size,
                                   const char *path, tsc_ckpt_t *c, size_t *cfg_len) {
    if (avail < CKPT_FIXED || memcmp(b, CKPT_MAGIC, 8))
        return tsc_error_set(TSC_ERR_FORMAT, "%s: not a tilescope checkpoint (bad magic or too short)", path);
    uint64_t len, n, steps;
    uint32_t prec, elsize;
    memcpy(&len, b + 8, 8);
    memcpy(&steps, b + 16, 8);
    memcpy(&prec, b + 24, 4);
    memcpy(&elsize, b + 28, 4);
    memcpy(&n, b + 32, 8);
    /* The size the header implies, overflow-checked against the file's. */
    int bad = len > CKPT_CFG_MAX || prec > 2 || elsize != (prec == TSC_PREC_FP64 ? 8u : 4u) || n > (1ull << 40) ||
              steps > (1ull << 62);
    unsigned long long want = bad ? CKPT_FIXED + 8 : tsc_ckpt_size(len, n, elsize);
    if (bad || want != file_size)
        return tsc_error_set(TSC_ERR_FORMAT,
                             "%s: corrupt checkpoint header (%llu bytes, the header implies %llu); "
                             "the file is truncated or damaged", path, file_size, want);
    c->steps_done = (long long)steps;
    c->prec = (int)prec;
    c->n = (size_t)n;
    c->elsize = elsize;
    *cfg_len = (size_t)len;
    return TSC_OK;
}

tsc_status_t tsc_ckpt_load_header(const char *path, tsc_ckpt_t *c) {
    memset(c, 0, sizeof *c);
    FILE *fp;
    long long size;
    tsc_status_t st = ckpt_open(path, &fp, &size);
    if (st != TSC_OK) return st;
    unsigned char hdr[CKPT_FIXED];
    size_t got = fread(hdr, 1, sizeof hdr, fp), cfg_len;
    st = tsc_ckpt_parse_header(hdr, got, (unsigned long long)size, path, c, &cfg_len);
    if (st != TSC_OK) {
        fclose(fp);
        memset(c, 0, sizeof *c);
        return st;
    }
    c->cfg_text = malloc(cfg_len + 1);
    if (!c->cfg_text) {
        fclose(fp);
        return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", path);
    }
    if (fread(c->cfg_text, 1, cfg_len, fp) != cfg_len || memchr(c->cfg_text, 0, cfg_len)) {
        fclose(fp);
        free(c->cfg_text);
        c->cfg_text = NULL;
        return tsc_error_set(TSC_ERR_FORMAT, "%s: unreadable settings in the checkpoint", path);
    }
    c->cfg_text[cfg_len] = 0;
    fclose(fp);
    return TSC_OK;
}

tsc_status_t tsc_ckpt_load_data(const char *path, tsc_ckpt_t *c) {
    FILE *fp;
    long long size;
    tsc_status_t st = ckpt_open(path, &fp, &size);
    if (st != TSC_OK) return st;
    size_t cfg_len = strlen(c->cfg_text);
    unsigned char hdr[CKPT_FIXED];
    int ok = fread(hdr, 1, sizeof hdr, fp) == sizeof hdr;
    /* the file opened again must be the one whose header was read (not replaced in between) */
    tsc_ckpt_t again;
    size_t again_len = 0;
    if (!ok || tsc_ckpt_parse_header(hdr, sizeof hdr, (unsigned long long)size, path, &again, &again_len) != TSC_OK ||
        again_len != cfg_len || again.n != c->n || again.elsize != c->elsize || again.prec != c->prec ||
        again.steps_done != c->steps_done) {
        fclose(fp);
        return tsc_error_set(TSC_ERR_FORMAT, "%s: the checkpoint changed while it was read; refused", path);
    }
    uint64_t h = fnv1a(FNV_INIT, hdr, sizeof hdr);
    h = fnv1a(h, c->cfg_text, cfg_len);
    ok = ok && fseeko(fp, (off_t)(CKPT_FIXED + cfg_len), SEEK_SET) == 0;
    void *arr[3] = {c->params, c->m, c->v};
    for (int i = 0; i < 3 && ok; i++) {
        ok = fread(arr[i], c->elsize, c->n, fp) == c->n;
        h = fnv1a(h, arr[i], c->n * c->elsize);
    }
    uint64_t want;
    ok = ok && fread(&want, 1, 8, fp) == 8;
    fclose(fp);
    if (!ok) return tsc_error_set(TSC_ERR_FORMAT, "%s: truncated checkpoint", path);
    if (want != h) return tsc_error_set(TSC_ERR_FORMAT, "%s: checkpoint checksum mismatch (the file is damaged)", path);
    return TSC_OK;
}
