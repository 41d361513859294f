/* capture.c: host capture sessions (tsc_capture.h): a session folder with one file per step,
 * each renamed into place when complete, packed into one dump at the end. */
#include "tsc_capture.h"
#include "tsc_h5.h"
#include "capture_internal.h"
#include "tsc_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct tsc_capture {
    char path[4096];
    char dir[4200];
    tsc_dump_meta_t meta;
    tsc_select_t sel;
    tsc_capture_opts_t opts;
    long long last_step;      /* -1 before the first */
    long long cur_step;
    int active;               /* the current step is kept */
    tsc_dump_writer_t *w;     /* the current step's file */
    int n_done;
    int lock_fd;              /* session.lock, flock'ed for the session's life */
};

static int store_fmt_of(const tsc_capture_t *s, tsc_format_t src) {
    return s->opts.store_fmt > 0 ? s->opts.store_fmt - 1 : (int)src;
}

/* The session folder's lock: DIR/session.lock, flock'ed (LOCK_EX) by its writer for the session's
 * life and by pack while it packs, holding the locker's pid as text (util's tsc_dir_lock). *fd:
 * the locked descriptor, -1 on failure: TSC_ERR_IO "WHO: session folder DIR is in use (locked by
 * pid N) ...". */
static tsc_status_t session_lock(const char *dir, const char *who, int *fd) {
    char holder[32];
    tsc_status_t st = tsc_dir_lock(dir, "session.lock", fd, holder, sizeof holder);
    if (st == TSC_OK) return TSC_OK;
    if (holder[0])
        return tsc_error_set(TSC_ERR_IO, "%s: session folder %s is in use (locked by pid %s): another capture or "
                             "pack is writing it", who, dir, holder);
    return tsc_error_wrap(st, "%s: ", who);
}

/* Removes the lock file (while still holding it) and releases it. */
static void session_unlock(const char *dir, int fd, int remove_file) {
    tsc_dir_unlock(dir, "session.lock", fd, remove_file);
}

static tsc_status_t capture_open(tsc_capture_t **out, const char *path, const tsc_dump_meta_t *meta,
                                 const tsc_capture_opts_t *opts) {
    *out = NULL;
    if (!path || !*path) return tsc_error_set(TSC_ERR_ARG, "capture: empty output path");
    if (strlen(path) >= 4000) return tsc_error_set(TSC_ERR_ARG, "capture: path too long");
    /* the dump is packed onto path at the end: refuse a directory, FIFO or device now */
    tsc_status_t st = tsc_out_check(path);
    if (st != TSC_OK) return tsc_error_wrap(st, "capture: ");
    st = tsc_dump_meta_check(meta);
    if (st != TSC_OK) return tsc_error_wrap(st, "capture %s: ", path);
    tsc_capture_t *s = calloc(1, sizeof *s);
    if (!s) return tsc_error_set(TSC_ERR_NOMEM, "capture %s: out of memory", path);
    snprintf(s->path, sizeof s->path, "%s", path);
    snprintf(s->dir, sizeof s->dir, "%s.capture", path);
    s->meta = *meta;
    s->last_step = s->cur_step = -1;
    if (opts) s->opts = *opts;
    if (s->opts.store_fmt < 0) s->opts.store_fmt = 0;
    if (s->opts.store_fmt > (int)TSC_FMT_COUNT || s->opts.deflate < 0 || s->opts.deflate > 9) {
        free(s);
        return tsc_error_set(TSC_ERR_ARG, "capture %s: store_fmt %d or deflate %d out of range", path,
                             opts ? opts->store_fmt : 0, opts ? opts->deflate : 0);
    }
    st = tsc_select_parse(&s->sel, s->opts.select);
    if (st != TSC_OK) { free(s); return tsc_error_wrap(st, "capture %s: ", path); }
    s->opts.select = NULL;  /* not kept: the caller's string may not outlive the session */
    char sp[4300];
    snprintf(sp, sizeof sp, "%s/session.h5", s->dir);
    struct stat lb;
    if (mkdir(s->dir, 0755) != 0 && (errno != EEXIST || lstat(s->dir, &lb) != 0 || !S_ISDIR(lb.st_mode))) {
        /* An existing folder is reused (its session.h5 is checked below); a symbolic link planted at
         * the folder's name is never followed (it would make this session write, and a later pack
         * delete, another folder's files). */
        st = tsc_error_set(TSC_ERR_IO, "capture %s: cannot create session folder %s: %s", path, s->dir,
                           errno == EEXIST ? "a file or symbolic link is in the way (not followed)" : strerror(errno));
        free(s);
        return st;
    }
    char who[4100];
    snprintf(who, sizeof who, "capture %s", path);
    st = session_lock(s->dir, who, &s->lock_fd);
    if (st != TSC_OK) { free(s); return st; }
    struct stat sb;
    if (stat(sp, &sb) == 0 || errno != ENOENT) {
        st = tsc_error_set(TSC_ERR_IO, "capture %s: session folder %s exists from an earlier session; pack "
                           "it (tsc_capture_pack) or remove it", path, s->dir);
        session_unlock(s->dir, s->lock_fd, 0);
        free(s);
        return st;
    }
    tsc_dump_writer_t *w;
    st = tsc_dump_writer_open(&w, sp, meta, NULL);
    if (st == TSC_OK) {
        char buf[2048];
        st = tsc_dump_writer_attr_str(w, "capture_select", tsc_select_format(&s->sel, buf, sizeof buf));
        if (st == TSC_OK) st = tsc_dump_writer_close(w);
        else tsc_dump_writer_abort(w);
    }
    if (st != TSC_OK) {
        session_unlock(s->dir, s->lock_fd, 1);
        rmdir(s->dir);
        free(s);
        return tsc_error_wrap(st, "capture %s: ", path);
    }
    *out = s;
    return TSC_OK;
}

tsc_status_t tsc_capture_open(tsc_capture_t **out, const char *path, const tsc_dump_meta_t *meta,
                              const tsc_capture_opts_t *opts) {
    TSC_H5_SCOPED(tsc_status_t, capture_open(out, path, meta, opts));
}

int tsc_capture_wants(const tsc_capture_t *s, long long step, int layer) {
    return tsc_select_set_has(&s->sel.steps, step) && (layer < 0 || tsc_select_set_has(&s->sel.layers, layer));
}

int tsc_capture_n_steps(const tsc_capture_t *s) { return s->n_done; }

static tsc_status_t capture_step_begin(tsc_capture_t *s, long long step) {
    if (s->w) { tsc_dump_writer_abort(s->w); s->w = NULL; }
    s->active = 0;
    if (step < 0 || step <= s->last_step)
        return tsc_error_set(TSC_ERR_ARG, "capture %s: step %lld does not follow step %lld", s->path, step,
                             s->last_step);
    s->cur_step = step;
    s->last_step = step;
    if (!tsc_select_set_has(&s->sel.steps, step)) return TSC_OK;
    char sp[4300];
    snprintf(sp, sizeof sp, "%s/step_%08lld.h5", s->dir, step);
    tsc_dump_write_opts_t o = {s->opts.deflate, !s->sel.heads.all || !s->sel.batches.all};
    tsc_status_t st = tsc_dump_writer_open(&s->w, sp, &s->meta, &o);
    if (st != TSC_OK) return tsc_error_wrap(st, "capture step %lld: ", step);
    s->active = 1;
    return TSC_OK;
}

tsc_status_t tsc_capture_step_begin(tsc_capture_t *s, long long step) {
    TSC_H5_SCOPED(tsc_status_t, capture_step_begin(s, step));
}

static tsc_status_t capture_put(tsc_capture_t *s, int layer, const char *name, tsc_format_t fmt, int rank,
                                const uint64_t *dims, const void *data) {
    if (s->cur_step < 0) return tsc_error_set(TSC_ERR_ARG, "capture %s: put('%s') outside a step", s->path, name);
    if (!s->active || !tsc_select_set_has(&s->sel.layers, layer)) return TSC_OK;
    if (!data) return tsc_error_set(TSC_ERR_ARG, "capture %s: put('%s'): NULL data", s->path, name);
    if ((unsigned)fmt >= (unsigned)TSC_FMT_COUNT)
        return tsc_error_set(TSC_ERR_ARG, "capture %s: put('%s'): unknown format %d", s->path, name, (int)fmt);
    int erank, per_head;
    uint64_t ed[4];
    tsc_status_t st = tsc_dump_expected_shape(&s->meta, name, &erank, ed, &per_head);
    if (st != TSC_OK) return tsc_error_wrap(st, "capture %s: ", s->path);
    tsc_format_t store = (tsc_format_t)store_fmt_of(s, fmt);
    /* lse is float32 in format v1 whatever the run handed over */
    if (!strcmp(name, "lse")) store = TSC_FMT_FP32;
    if (!per_head || (s->sel.heads.all && s->sel.batches.all))
        return tsc_dump_writer_put(s->w, s->cur_step, layer, name, rank, dims, fmt, data, store);
    if (rank != erank) return tsc_dump_writer_put(s->w, s->cur_step, layer, name, rank, dims, fmt, data, store);
    /* Only the selected heads (for k/v: the kv heads the selected query heads read). */
    int kv = !strcmp(name, "k") || !strcmp(name, "v");
    int group = s->meta.n_head / s->meta.n_kv_head;
    size_t slice = tsc_format_size(fmt);
    for (int i = 2; i < rank; i++) slice *= (size_t)dims[i];
    for (uint64_t b = 0; b < dims[0]; b++) {
        if (!tsc_select_set_has(&s->sel.batches, (long long)b)) continue;
        for (uint64_t h = 0; h < dims[1]; h++) {
            int keep = 0;
            if (kv) {
                for (int qh = (int)h * group; qh < ((int)h + 1) * group && !keep; qh++)
                    keep = tsc_select_set_has(&s->sel.heads, qh);
            } else {
                keep = tsc_select_set_has(&s->sel.heads, (long long)h);
            }
            if (!keep) continue;
            const char *p = (const char *)data + (b * dims[1] + h) * slice;
            st = tsc_dump_writer_put_head(s->w, s->cur_step, layer, name, rank, dims, (int)b, (int)h, fmt, p, store);
            if (st != TSC_OK) return st;
        }
    }
    return TSC_OK;
}

tsc_status_t tsc_capture_put(tsc_capture_t *s, int layer, const char *name, tsc_format_t fmt, int rank,
                             const uint64_t *dims, const void *data) {
    TSC_H5_SCOPED(tsc_status_t, capture_put(s, layer, name, fmt, rank, dims, data));
}

static tsc_status_t capture_put_tokens(tsc_capture_t *s, const int64_t *ids, const char *const *text) {
    if (s->cur_step < 0) return tsc_error_set(TSC_ERR_ARG, "capture %s: tokens outside a step", s->path);
    if (!s->active) return TSC_OK;
    return tsc_dump_writer_put_tokens(s->w, s->cur_step, ids, text);
}

tsc_status_t tsc_capture_put_tokens(tsc_capture_t *s, const int64_t *ids, const char *const *text) {
    TSC_H5_SCOPED(tsc_status_t, capture_put_tokens(s, ids, text));
}

tsc_status_t tsc_capture_put_byte_tokens(tsc_capture_t *s, const int64_t *ids) {
    const size_t n = (size_t)s->meta.batch * (size_t)s->meta.seq_len;
    char(*txt)[2] = malloc(n * sizeof *txt);
    const char **tp = malloc(n * sizeof *tp);
    tsc_status_t st = txt && tp ? TSC_OK : tsc_error_set(TSC_ERR_NOMEM, "capture %s: no memory for the tokens", s->path);
    for (size_t i = 0; st == TSC_OK && i < n; i++) txt[i][0] = (char)ids[i], txt[i][1] = 0, tp[i] = txt[i];
    if (st == TSC_OK) st = tsc_capture_put_tokens(s, ids, tp);
    free(txt), free(tp);
    return st;
}

static tsc_status_t capture_step_end(tsc_capture_t *s) {
    if (s->cur_step < 0) return tsc_error_set(TSC_ERR_ARG, "capture %s: step_end without step_begin", s->path);
    long long step = s->cur_step;
    s->cur_step = -1;
    if (!s->active) return TSC_OK;
    s->active = 0;
    tsc_dump_writer_t *w = s->w;
    s->w = NULL;
    tsc_status_t st = tsc_dump_writer_step_done(w, step);
    if (st != TSC_OK) {
        tsc_dump_writer_abort(w);
        return tsc_error_wrap(st, "capture step %lld: ", step);
    }
    /* close + rename: after this the step file is complete under its final name */
    st = tsc_dump_writer_close(w);
    if (st != TSC_OK) return tsc_error_wrap(st, "capture step %lld: ", step);
    s->n_done++;
    return TSC_OK;
}

tsc_status_t tsc_capture_step_end(tsc_capture_t *s) {
    TSC_H5_SCOPED(tsc_status_t, capture_step_end(s));
}

static tsc_status_t capture_pack(const char *session_dir, const char *out_path, int remove_folder, int lock_fd);

static tsc_status_t capture_close(tsc_capture_t *s) {
    if (!s) return TSC_OK;
    if (s->w) tsc_dump_writer_abort(s->w);
    tsc_status_t st = TSC_OK;
    if (!s->opts.keep_session) st = capture_pack(s->dir, s->path, 1, s->lock_fd);
    else session_unlock(s->dir, s->lock_fd, 0);  /* kept: unlocked, so pack may take it */
    free(s);
    return st;
}

tsc_status_t tsc_capture_close(tsc_capture_t *s) {
    TSC_H5_SCOPED(tsc_status_t, capture_close(s));
}

static tsc_status_t copy_file(const char *from, const char *to);

static tsc_status_t capture_root_attrs(tsc_capture_t *s, const tsc_capture_attr_t *a, int n) {
    if (s->last_step >= 0)
        return tsc_error_set(TSC_ERR_ARG, "capture %s: root attributes must come before the first step", s->path);
    char sp[4300];
    snprintf(sp, sizeof sp, "%s/session.h5", s->dir);
    tsc_out_t o;
    tsc_status_t st = tsc_out_open_name(&o, sp);
    if (st == TSC_OK) st = copy_file(sp, o.tmp);
    hid_t fid = -1;
    if (st == TSC_OK) st = tsc_h5_open(&fid, o.tmp, 1);
    for (int i = 0; st == TSC_OK && i < n; i++) {
        if (a[i].str) st = tsc_h5_attr_write_str(fid, a[i].name, a[i].str);
        else if (a[i].is_long) st = tsc_h5_attr_write_long(fid, a[i].name, (long)a[i].num);
        else st = tsc_h5_attr_write_double(fid, a[i].name, a[i].num);
    }
    if (fid >= 0 && H5Fclose(fid) < 0 && st == TSC_OK)
        st = tsc_error_set(TSC_ERR_IO, "capture %s: closing %s failed", s->path, o.tmp);
    if (o.tmp) {
        if (st == TSC_OK) st = tsc_out_commit(&o);
        else tsc_out_abort(&o);
    }
    return st == TSC_OK ? TSC_OK : tsc_error_wrap(st, "capture %s: ", s->path);
}

tsc_status_t tsc_capture_root_attrs(tsc_capture_t *s, const tsc_capture_attr_t *a, int n) {
    TSC_H5_SCOPED(tsc_status_t, capture_root_attrs(s, a, n));
}

tsc_status_t tsc_capture_parallel(tsc_capture_t *s, int dp_rank, int dp_size, int tp_rank, int tp_size, int pp_rank,
                                  int pp_size) {
    const int r[3] = {dp_rank, tp_rank, pp_rank}, n[3] = {dp_size, tp_size, pp_size};
    static const char *const axis[3] = {"dp", "tp", "pp"};
    for (int i = 0; i < 3; i++)
        if (n[i] < 1 || r[i] < 0 || r[i] >= n[i])
            return tsc_error_set(TSC_ERR_ARG, "capture %s: %s rank %d of size %d (want 0 <= rank < size)", s->path,
                                 axis[i], r[i], n[i]);
    if ((long long)n[0] * n[1] * n[2] != s->meta.world_size)
        return tsc_error_set(TSC_ERR_ARG, "capture %s: dp x tp x pp sizes %d x %d x %d are not the world size %d", s->path,
                             n[0], n[1], n[2], s->meta.world_size);
    tsc_capture_attr_t a[6] = {{"dp_rank", NULL, 1, dp_rank}, {"dp_size", NULL, 1, dp_size},
                               {"tp_rank", NULL, 1, tp_rank}, {"tp_size", NULL, 1, tp_size},
                               {"pp_rank", NULL, 1, pp_rank}, {"pp_size", NULL, 1, pp_size}};
    return tsc_capture_root_attrs(s, a, 6);
}

/* ---- packing ---------------------------------------------------------------------------------- */

static tsc_status_t copy_file(const char *from, const char *to) {
    int in = open(from, O_RDONLY);
    if (in < 0) return tsc_error_set(TSC_ERR_IO, "%s: cannot open: %s", from, strerror(errno));
    int outfd = open(to, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
    if (outfd < 0) {
        int err = errno;
        close(in);
        return tsc_error_set(TSC_ERR_IO, "%s: cannot open: %s", to, strerror(err));
    }
    char buf[1 << 16];
    tsc_status_t st = TSC_OK;
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n == 0) break;
        if (n < 0) { if (errno == EINTR) continue; st = tsc_error_set(TSC_ERR_IO, "%s: read failed: %s", from, strerror(errno)); break; }
        for (ssize_t off = 0; off < n;) {
            ssize_t m = write(outfd, buf + off, (size_t)(n - off));
            if (m < 0) {
                if (errno == EINTR) continue;
                st = tsc_error_set(TSC_ERR_IO, "%s: write failed: %s", to, strerror(errno));
                break;
            }
            off += m;
        }
        if (st != TSC_OK) break;
    }
    close(in);
    if (close(outfd) != 0 && st == TSC_OK) st = tsc_error_set(TSC_ERR_IO, "%s: close failed: %s", to, strerror(errno));
    return st;
}

/* The complete steps of a session folder, ascending (*steps malloc'ed), and its incomplete one. */
static tsc_status_t session_steps(const char *session_dir, long long **steps, int *n, long long *incomplete) {
    tsc_dump_t *d;
    tsc_status_t st = tsc_dump_open(&d, session_dir);
    if (st != TSC_OK) return st;
    *n = tsc_dump_n_steps(d);
    *incomplete = tsc_dump_incomplete_step(d);
    *steps = malloc(sizeof(long long) * (size_t)(*n + 1));
    if (!*steps) st = tsc_error_set(TSC_ERR_NOMEM, "packing %s: out of memory", session_dir);
    for (int i = 0; st == TSC_OK && i < *n; i++) (*steps)[i] = tsc_dump_step_at(d, i);
    tsc_dump_close(d);
    if (st == TSC_OK && *n > 1) qsort(*steps, (size_t)*n, sizeof **steps, tsc_cmp_ll);
    return st;
}

/* Writes the packed dump into tmp: a copy of session.h5 (it holds every root attribute) plus
 * each step's group, copied as stored (H5Ocopy keeps chunks and filters, converts nothing). */
/* libhdf5's H5Ocopy crashes (a NULL datatype in H5T_close_real) when the disk fills up under it,
 * so the space the packed dump needs is asked of the file system first: the session's files (the
 * packed dump measured no larger than them, from 17 KB to 280 KB) plus 1/64 and 8 KiB of margin. */
static tsc_status_t check_space(const char *session_dir, const char *tmp, const long long *steps, int n) {
    char p[4400];
    struct stat sb;
    unsigned long long need = 8u << 10;
    snprintf(p, sizeof p, "%s/session.h5", session_dir);
    if (stat(p, &sb) == 0) need += (unsigned long long)sb.st_size;
    for (int i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/step_%08lld.h5", session_dir, steps[i]);
        if (stat(p, &sb) == 0) need += (unsigned long long)sb.st_size;
    }
    need += need / 64;
    snprintf(p, sizeof p, "%s", tmp); /* the folder the dump is packed into */
    char *slash = strrchr(p, '/');
    if (!slash) snprintf(p, sizeof p, ".");
    else slash[slash == p] = '\0'; /* "/x.h5" -> "/", "d/x.h5" -> "d" */
    struct statvfs vb;
    if (statvfs(p, &vb) != 0) return TSC_OK; /* unknown: the copy reports its own errors */
    unsigned long long have = (unsigned long long)vb.f_bavail * vb.f_frsize;
    if (have < need)
        return tsc_error_set(TSC_ERR_IO, "%s: no space left on the disk to pack the capture: about %llu bytes needed, %llu free",
                             tmp, need, have);
    return TSC_OK;
}

static tsc_status_t pack_into(const char *session_dir, const char *tmp, const long long *steps, int n,
                              long long incomplete) {
    char sp[4300];
    snprintf(sp, sizeof sp, "%s/session.h5", session_dir);
    tsc_status_t st = check_space(session_dir, tmp, steps, n);
    if (st != TSC_OK) return st;
    st = copy_file(sp, tmp);
    if (st != TSC_OK) return st;
    hid_t fid = H5Fopen(tmp, H5F_ACC_RDWR, H5P_DEFAULT);
    if (fid < 0) return tsc_error_set(TSC_ERR_IO, "packing %s: cannot open the copy %s", session_dir, tmp);
    if (incomplete >= 0) st = tsc_h5_attr_write_long(fid, "incomplete_step", (long)incomplete);
    for (int i = 0; st == TSC_OK && i < n; i++) {
        char stp[4400], g[64];
        snprintf(stp, sizeof stp, "%s/step_%08lld.h5", session_dir, steps[i]);
        snprintf(g, sizeof g, "step_%08lld", steps[i]);
        hid_t sf;
        st = tsc_h5_open(&sf, stp, 0);
        if (st != TSC_OK) break;
        if (H5Ocopy(sf, g, fid, g, H5P_DEFAULT, H5P_DEFAULT) < 0)
            st = tsc_error_set(TSC_ERR_IO, "packing %s: copying %s from %s failed (disk full?)", session_dir, g, stp);
        H5Fclose(sf);
    }
    if (H5Fclose(fid) < 0 && st == TSC_OK)
        st = tsc_error_set(TSC_ERR_IO, "packing %s: closing %s failed", session_dir, tmp);
    return st;
}

/* 1 when name is "step_%08lld.h5.tmp.<digits>.<digits>" for step: the temporary of the step a
 * writer had in flight when it stopped (tsc_file.h names temporaries "<path>.tmp.<pid>.<n>"). */
static int is_step_tmp(const char *name, long long step) {
    char pre[64];
    int n = snprintf(pre, sizeof pre, "step_%08lld.h5.tmp.", step);
    if (strncmp(name, pre, (size_t)n) != 0) return 0;
    const char *p = name + n;
    size_t d1 = strspn(p, "0123456789");
    if (!d1 || p[d1] != '.') return 0;
    size_t d2 = strspn(p + d1 + 1, "0123456789");
    return d2 && p[d1 + 1 + d2] == '\0';
}

/* Removes only what the session wrote: session.h5, the packed steps' files, the temporary of
 * the incomplete step, session.lock (last, still locked by lock_fd, which is closed), and the
 * folder if that empties it. Any other file (the user's) is left, and so is the folder. */
static tsc_status_t remove_session(const char *session_dir, const char *out_path, const long long *steps, int n,
                                   long long incomplete, int lock_fd) {
    char p[4400];
    snprintf(p, sizeof p, "%s/session.h5", session_dir);
    unlink(p);
    for (int i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/step_%08lld.h5", session_dir, steps[i]);
        unlink(p);
    }
    DIR *dp = incomplete >= 0 ? opendir(session_dir) : NULL;
    if (dp) {
        struct dirent *e;
        while ((e = readdir(dp))) {
            if (!is_step_tmp(e->d_name, incomplete)) continue;
            snprintf(p, sizeof p, "%s/%s", session_dir, e->d_name);
            unlink(p);
        }
        closedir(dp);
    }
    session_unlock(session_dir, lock_fd, 1);
    if (rmdir(session_dir) != 0)
        return tsc_error_set(TSC_ERR_IO, "packed %s into %s but kept the folder: %s (it holds files pack did not "
                             "write)", session_dir, out_path, strerror(errno));
    return TSC_OK;
}

/* Packs with the session's lock: lock_fd when the caller (the writer) holds it, else taken here
 * (-1), so a live session, still written by its capture, is refused. */
static tsc_status_t capture_pack(const char *session_dir, const char *out_path, int remove_folder, int lock_fd) {
    long long *steps = NULL, incomplete = -1;
    int n = 0;
    tsc_status_t st = TSC_OK;
    if (lock_fd < 0) {
        char who[4200];
        snprintf(who, sizeof who, "packing %s", session_dir);
        if ((st = session_lock(session_dir, who, &lock_fd)) != TSC_OK) return st;
    }
    st = session_steps(session_dir, &steps, &n, &incomplete);
    tsc_out_t o;
    if (st == TSC_OK) st = tsc_out_open_name(&o, out_path);
    if (st == TSC_OK) {
        st = pack_into(session_dir, o.tmp, steps, n, incomplete);
        if (st == TSC_OK) st = tsc_out_commit(&o);
        else tsc_out_abort(&o);
    }
    if (st == TSC_OK && remove_folder) st = remove_session(session_dir, out_path, steps, n, incomplete, lock_fd);
    else session_unlock(session_dir, lock_fd, 0);
    free(steps);
    return st;
}

static tsc_status_t capture_discard(const char *session_dir) {
    char who[4200];
    snprintf(who, sizeof who, "discarding %s", session_dir);
    int lock_fd;
    tsc_status_t st = session_lock(session_dir, who, &lock_fd);
    if (st != TSC_OK) return st;
    long long *steps = NULL, incomplete = -1;
    int n = 0;
    st = session_steps(session_dir, &steps, &n, &incomplete);
    if (st == TSC_OK) st = remove_session(session_dir, session_dir, steps, n, incomplete, lock_fd);
    else session_unlock(session_dir, lock_fd, 0);
    free(steps);
    return st;
}

tsc_status_t tsc_capture_discard(const char *session_dir) {
    TSC_H5_SCOPED(tsc_status_t, capture_discard(session_dir));
}

tsc_status_t tsc_capture_pack(const char *session_dir, const char *out_path, int remove_folder) {
    TSC_H5_SCOPED(tsc_status_t, capture_pack(session_dir, out_path, remove_folder, -1));
}
