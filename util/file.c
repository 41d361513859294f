/* file.c: atomic output files (tsc_file.h). */
#include "tsc_file.h"
#include "util_internal.h"
#include "tsc_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* Open temporaries, for removal from a signal handler: fixed storage (no allocation there),
 * a slot is published by setting used[] after the name is complete. */
#define REG_SLOTS 64
#define REG_NAME 4096
static char reg_name[REG_SLOTS][REG_NAME];
static volatile sig_atomic_t reg_used[REG_SLOTS];

static int reg_add(const char *tmp) {
    if (strlen(tmp) >= REG_NAME) return -1;
    for (int i = 0; i < REG_SLOTS; i++) {
        if (__sync_bool_compare_and_swap(&reg_used[i], 0, 2)) {  /* 2: being filled */
            memcpy(reg_name[i], tmp, strlen(tmp) + 1);
            __sync_synchronize();
            reg_used[i] = 1;
            return i;
        }
    }
    return -1;  /* registry full: the file is still written safely, only not removed on a signal */
}

static void reg_drop(int slot) {
    if (slot >= 0 && slot < REG_SLOTS) reg_used[slot] = 0;
}

static void on_signal(int sig) {
    for (int i = 0; i < REG_SLOTS; i++)
        if (reg_used[i] == 1) unlink(reg_name[i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

void tsc_out_cleanup_install(void) {
    int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

tsc_status_t tsc_out_check(const char *path) {
    struct stat s;
    if (!path || !*path) return tsc_error_set(TSC_ERR_ARG, "empty output path");
    if (stat(path, &s) != 0) {
        if (errno == ENOENT) return TSC_OK;
        return tsc_error_set(TSC_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    }
    if (S_ISREG(s.st_mode)) return TSC_OK;
    const char *what = S_ISDIR(s.st_mode) ? "a directory" : S_ISFIFO(s.st_mode) ? "a FIFO"
                     : S_ISCHR(s.st_mode) || S_ISBLK(s.st_mode) ? "a device" : S_ISSOCK(s.st_mode) ? "a socket"
                     : "not a regular file";
    return tsc_error_set(TSC_ERR_IO, "%s: refusing to write an output here: it is %s (give a regular file name)",
                         path, what);
}

static tsc_status_t open_tmp(tsc_out_t *o, const char *path, int keep_stream) {
    static volatile int counter;
    memset(o, 0, sizeof *o);
    o->slot = -1;
    tsc_status_t st = tsc_out_check(path);
    if (st != TSC_OK) return st;
    size_t n = strlen(path) + 64;
    o->path = strdup(path);
    o->tmp = malloc(n);
    if (!o->path || !o->tmp) {
        free(o->path);
        free(o->tmp);
        memset(o, 0, sizeof *o);
        return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", path);
    }
    int fd = -1;
    for (int tries = 0; tries < 100 && fd < 0; tries++) {
        snprintf(o->tmp, n, "%s.tmp.%ld.%d", path, (long)getpid(), __sync_fetch_and_add(&counter, 1));
        fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        st = tsc_error_set(TSC_ERR_IO, "%s: cannot create a temporary file beside it: %s", path, strerror(errno));
        free(o->path);
        free(o->tmp);
        memset(o, 0, sizeof *o);
        return st;
    }
    o->slot = reg_add(o->tmp);
    if (keep_stream) {
        o->fp = fdopen(fd, "wb");
        if (!o->fp) {
            st = tsc_error_set(TSC_ERR_IO, "%s: cannot open a stream: %s", o->tmp, strerror(errno));
            close(fd);
            tsc_out_abort(o);
            return st;
        }
    } else if (close(fd) != 0) {
        st = tsc_error_set(TSC_ERR_IO, "%s: close: %s", o->tmp, strerror(errno));
        tsc_out_abort(o);
        return st;
    }
    return TSC_OK;
}

tsc_status_t tsc_out_open(tsc_out_t *o, const char *path) { return open_tmp(o, path, 1); }
tsc_status_t tsc_out_open_name(tsc_out_t *o, const char *path) { return open_tmp(o, path, 0); }

static void release(tsc_out_t *o) {
    reg_drop(o->slot);
    free(o->path);
    free(o->tmp);
    memset(o, 0, sizeof *o);
    o->slot = -1;
}

void tsc_out_abort(tsc_out_t *o) {
    if (!o || !o->tmp) return;
    if (o->fp) fclose(o->fp);
    unlink(o->tmp);
    release(o);
}

tsc_status_t tsc_out_commit(tsc_out_t *o) {
    if (!o || !o->tmp) return tsc_error_set(TSC_ERR_INTERNAL, "tsc_out_commit: no open output");
    tsc_status_t st = TSC_OK;
    if (o->fp) {
        FILE *fp = o->fp;
        o->fp = NULL;
        int bad = ferror(fp);
        if (fflush(fp) != 0 || bad)
            st = tsc_error_set(TSC_ERR_IO, "%s: write failed: %s", o->path, bad ? "stream error" : strerror(errno));
        if (fsync(fileno(fp)) != 0 && st == TSC_OK && errno != EINVAL && errno != EROFS)
            st = tsc_error_set(TSC_ERR_IO, "%s: write failed: %s", o->path, strerror(errno));
        if (fclose(fp) != 0 && st == TSC_OK)
            st = tsc_error_set(TSC_ERR_IO, "%s: write failed at close: %s", o->path, strerror(errno));
    }
    if (st == TSC_OK && rename(o->tmp, o->path) != 0)
        st = tsc_error_set(TSC_ERR_IO, "%s: cannot rename the finished temporary into place: %s", o->path,
                           strerror(errno));
    if (st != TSC_OK) unlink(o->tmp);
    release(o);
    return st;
}

tsc_status_t tsc_out_write_parts(const char *path, const void *data, size_t n, const void *tail, size_t tail_n) {
    tsc_out_t o;
    tsc_status_t st = tsc_out_open(&o, path);
    if (st != TSC_OK) return st;
    if ((n && fwrite(data, 1, n, o.fp) != n) || (tail && tail_n && fwrite(tail, 1, tail_n, o.fp) != tail_n)) {
        st = tsc_error_set(TSC_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        tsc_out_abort(&o);
        return st;
    }
    return tsc_out_commit(&o);
}

tsc_status_t tsc_out_write_all(const char *path, const void *data, size_t n) {
    return tsc_out_write_parts(path, data, n, NULL, 0);
}

/* ---- reading ---------------------------------------------------------------------------------- */

static tsc_status_t not_regular(const char *path) {
    return tsc_error_set(TSC_ERR_IO, "%s: not a regular file (a FIFO, device or socket); refused", path);
}

tsc_status_t tsc_file_check_regular(const char *path) {
    struct stat s;
    if (!path || !*path) return tsc_error_set(TSC_ERR_ARG, "empty input path");
    if (stat(path, &s) != 0) return tsc_error_set(TSC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    return S_ISREG(s.st_mode) ? TSC_OK : not_regular(path);
}

unsigned long long tsc_file_text_limit(void) {
    const unsigned long long gib = 1ull << 30, budget = tsc_mem_budget();
    const char *env = getenv("TSC_MAX_MEMORY");
    uint64_t v;
    if (env && tsc_mem_parse(env, &v) == TSC_OK) return budget;
    return budget < gib ? budget : gib;
}

static tsc_status_t too_big(const char *path, unsigned long long n, unsigned long long lim) {
    return tsc_error_set(TSC_ERR_UNSUPPORTED, "%s: %llu bytes, above the limit of %llu bytes for a text input; "
                         "raise it with --max-memory or TSC_MAX_MEMORY=<bytes> if the input is trusted", path, n, lim);
}

tsc_status_t tsc_file_read_text(const char *path, char **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    tsc_status_t st = tsc_file_check_regular(path);
    if (st != TSC_OK) return st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return tsc_error_set(TSC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat s;
    const unsigned long long lim = tsc_file_text_limit();
    if (fstat(fd, &s) != 0 || !S_ISREG(s.st_mode)) st = not_regular(path);
    else if ((unsigned long long)s.st_size > lim) st = too_big(path, (unsigned long long)s.st_size, lim);
    size_t cap = st == TSC_OK ? (size_t)s.st_size + 1 : 0, n = 0;
    char *p = st == TSC_OK ? malloc(cap) : NULL;
    if (st == TSC_OK && !p) st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", path);
    while (st == TSC_OK) {
        if (n + 1 >= cap) {  /* the file grew since fstat */
            if ((unsigned long long)cap > lim) { st = too_big(path, (unsigned long long)n, lim); break; }
            char *q = realloc(p, cap * 2 + 4096);
            if (!q) { st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", path); break; }
            p = q, cap = cap * 2 + 4096;
        }
        ssize_t k = read(fd, p + n, cap - 1 - n);
        if (k == 0) break;
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) st = tsc_error_set(TSC_ERR_IO, "%s: read error: %s", path, strerror(errno));
        else n += (size_t)k;
    }
    close(fd);
    if (st != TSC_OK) { free(p); return st; }
    p[n] = '\0';
    *buf = p;
    *len = n;
    return TSC_OK;
}

/* ---------------------------------------------------------------- folder locks, run ids */

static tsc_status_t lock_busy(int fd, const char *lp, char *holder, size_t holder_size) {
    char pid[32] = "";
    ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
    pid[n > 0 ? n : 0] = '\0';
    pid[strcspn(pid, "\n")] = '\0';
    if (!*pid) snprintf(pid, sizeof pid, "?");
    if (holder && holder_size) snprintf(holder, holder_size, "%s", pid);
    return tsc_error_set(TSC_ERR_IO, "%s is locked by pid %s", lp, pid);
}

tsc_status_t tsc_dir_lock(const char *dir, const char *name, int *fd, char *holder, size_t holder_size) {
    if (holder && holder_size) holder[0] = '\0';
    *fd = -1;
    if (!dir || !name) return tsc_error_set(TSC_ERR_ARG, "tsc_dir_lock: NULL argument");
    char lp[4300];
    if ((size_t)snprintf(lp, sizeof lp, "%s/%s", dir, name) >= sizeof lp)
        return tsc_error_set(TSC_ERR_ARG, "%s: lock path too long", dir);
    int d = open(lp, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (d < 0) return tsc_error_set(TSC_ERR_IO, "%s: cannot open the lock file: %s", lp, strerror(errno));
    struct stat a, b;
    tsc_status_t st = TSC_OK;
    if (flock(d, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        st = err == EWOULDBLOCK ? lock_busy(d, lp, holder, holder_size)
                                : tsc_error_set(TSC_ERR_IO, "%s: cannot lock: %s", lp, strerror(err));
    } else if (fstat(d, &a) != 0 || stat(lp, &b) != 0 || a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
        /* the lock must be on the file still named lp (its holder may have just removed it) */
        st = tsc_error_set(TSC_ERR_IO, "%s was removed while locking it", lp);
    }
    if (st != TSC_OK) {
        close(d);
        return st;
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(d, 0) != 0 || pwrite(d, pid, (size_t)n, 0) != n) { /* the pid is informative only */ }
    *fd = d;
    return TSC_OK;
}

void tsc_dir_unlock(const char *dir, const char *name, int fd, int remove_file) {
    if (fd < 0) return;
    if (remove_file && dir && name) {
        char lp[4300];
        if ((size_t)snprintf(lp, sizeof lp, "%s/%s", dir, name) < sizeof lp) unlink(lp);
    }
    close(fd);
}

static int random_bytes(unsigned char *p, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(p + got, n - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    if (got == n) return 0;
    int d = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (d < 0) return -1;
    for (got = 0; got < n;) {
        ssize_t r = read(d, p + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(d);
    return got == n ? 0 : -1;
}

int tsc_run_id_valid(const char *s) {
    for (int i = 0; i < TSC_RUN_ID_LEN; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return s[TSC_RUN_ID_LEN] == '\0';
}

tsc_status_t tsc_run_id_new(char out[TSC_RUN_ID_LEN + 1]) {
    unsigned char b[TSC_RUN_ID_LEN / 2];
    out[0] = '\0';
    if (random_bytes(b, sizeof b) != 0)
        return tsc_error_set(TSC_ERR_IO, "cannot draw a run id: no random bytes from getrandom or /dev/urandom");
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof b; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[TSC_RUN_ID_LEN] = '\0';
    return TSC_OK;
}
