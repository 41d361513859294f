/* contain.c: the contained pre-check of a dump in a child process (tsc_contain.h). */
#define _GNU_SOURCE
#include "tsc_contain.h"
#include "tsc_dump.h"
#include "tsc_h5.h"
#include "capture_internal.h"
#include "tsc_mem.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int g_on;          /* the program's setting (tsc_dump_set_containment) */
static long g_children;   /* children started */

void tsc_dump_set_containment(int on) { __atomic_store_n(&g_on, on ? 1 : 0, __ATOMIC_SEQ_CST); }

int tsc_dump_containment(void) {
    const char *e = getenv("TSC_CONTAIN");
    if (e && *e) return strcmp(e, "0") != 0;
    return __atomic_load_n(&g_on, __ATOMIC_SEQ_CST);
}

long tsc_dump_precheck_count(void) { return __atomic_load_n(&g_children, __ATOMIC_SEQ_CST); }

/* ---- the child's walk ------------------------------------------------------------------------ */

#define SMALL_DUMP_BYTES (64ull << 20) /* dumps up to this size get every chunk read (deep) */

/* Reads one attribute of obj the way tilescope's readers do: strings, integers, floats. */
static herr_t attr_cb(hid_t obj, const char *name, const H5A_info_t *info, void *op) {
    (void)info;
    (void)op;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) return 0;
    hid_t t = H5Aget_type(a);
    H5T_class_t c = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    char s[4096];
    long v[64];
    size_t n;
    if (c == H5T_STRING) (void)tsc_h5_attr_read_str(obj, name, s, sizeof s);
    else if (c == H5T_INTEGER || c == H5T_FLOAT) (void)tsc_h5_attr_read_longs(obj, name, v, 64, &n);
    return 0;
}

static void read_attrs(hid_t obj) {
    hsize_t idx = 0;
    H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, attr_cb, NULL);
}

/* Every attribute of the root and of each step group; for a session, of each step file's group. */
static void walk_attrs(tsc_dump_t *d) {
    tsc_h5_enter();
    read_attrs(tsc_dump_root_id(d));
    for (int i = 0; i < tsc_dump_n_steps(d); i++) {
        char gp[64], sp[8192];
        hid_t fid = tsc_dump_root_id(d), own = H5I_INVALID_HID;
        snprintf(gp, sizeof gp, "step_%08lld", tsc_dump_step_at(d, i));
        if (tsc_dump_session_dir(d)[0]) {
            snprintf(sp, sizeof sp, "%s/%s.h5", tsc_dump_session_dir(d), gp);
            if (tsc_h5_open(&own, sp, 0) != TSC_OK) continue;
            fid = own;
        }
        hid_t g = H5Gopen2(fid, gp, tsc_h5_gapl());
        if (g >= 0) {
            read_attrs(g);
            H5Gclose(g);
        }
        if (own >= 0) H5Fclose(own);
    }
    tsc_h5_leave();
}

/* The listings a command makes: layers of every step, names and info of every dataset. */
static void walk_listing(tsc_dump_t *d) {
    for (int i = 0; i < tsc_dump_n_steps(d); i++) {
        long long s = tsc_dump_step_at(d, i);
        int layers[1024], nl = 0;
        if (tsc_dump_layers(d, s, layers, 1024, &nl) != TSC_OK) continue;
        for (int li = 0; li < nl && li < 1024; li++) {
            char names[64][TSC_DUMP_NAME_MAX];
            int nn = 0;
            if (tsc_dump_dataset_names(d, s, layers[li], names, 64, &nn) != TSC_OK) continue;
            for (int k = 0; k < nn && k < 64; k++) {
                tsc_dump_dataset_info_t in;
                (void)tsc_dump_dataset_info(d, s, layers[li], names[k], &in);
            }
        }
    }
}

static void test_hook(void) {
    const char *h = getenv("TSC_CONTAIN_TEST_CRASH");
    if (!h || !*h) return;
    if (!strcmp(h, "segv")) raise(SIGSEGV);
    if (!strcmp(h, "abort")) abort();
    if (!strcmp(h, "hang"))
        for (volatile unsigned long x = 0;; x++) {}
    if (!strcmp(h, "alloc"))
        for (;;) { /* address space only (untouched): RLIMIT_AS stops it without using memory */
            static void *volatile keep; /* volatile: a compiler may drop an allocation nobody reads */
            keep = malloc(64u << 20);
            if (!keep) abort(); /* what libhdf5 does on some failed allocations */
        }
}

/* What the child reads: tsc_dump_open's walk, the shallow (small dump: deep) validator, the
 * listings and the attributes. The status of the open is the result; the rest only has to
 * finish without a crash. */
static tsc_status_t child_walk(const char *path, uint64_t size) {
    test_hook();
    tsc_dump_t *d = NULL;
    tsc_status_t st = tsc_dump_open_direct(&d, path);
    if (st != TSC_OK) return st;
    (void)tsc_dump_validate(d, size <= SMALL_DUMP_BYTES, NULL, NULL);
    walk_listing(d);
    walk_attrs(d);
    tsc_dump_close(d);
    return TSC_OK;
}

/* ---- the child's process ----------------------------------------------------------------------- */

static void set_limit(int res, rlim_t v) {
    struct rlimit r = {v, v};
    setrlimit(res, &r);
}

/* The address space now mapped (copied from the parent), in bytes. */
static uint64_t vm_bytes(void) {
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%lu", &pages) != 1) pages = 0;
        fclose(f);
    }
    return (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}

static void child_main(const char *path, int fd, double limit_s, uint64_t size) {
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) { /* a libhdf5 message must not interleave with the parent's output */
        dup2(devnull, 1);
        dup2(devnull, 2);
    }
    tsc_h5_lock_child_reset();
    /* the host's handlers (cleanup of temporaries, a crash reporter) are not the child's: a crash
     * must end it by its signal, seen by the parent */
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGXCPU, SIGXFSZ, SIGPIPE, SIGTRAP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    rlim_t cpu = (rlim_t)limit_s + 2;
    struct rlimit r = {cpu, cpu + 1}; /* SIGXCPU at the soft limit, SIGKILL at the hard */
    setrlimit(RLIMIT_CPU, &r);
    set_limit(RLIMIT_AS, (rlim_t)(vm_bytes() + tsc_mem_budget() + (512ull << 20)));
    set_limit(RLIMIT_FSIZE, 0);
    set_limit(RLIMIT_CORE, 0);
    tsc_status_t st = child_walk(path, size);
    int32_t code = (int32_t)st;
    write_all(fd, &code, sizeof code);
    if (st != TSC_OK) write_all(fd, tsc_error_last(), strlen(tsc_error_last()));
    _exit(0); /* never exit(): atexit handlers would close the parent's HDF5 files from here */
}

/* ---- the parent ---------------------------------------------------------------------------------- */

static uint64_t path_size(const char *path) {
    struct stat sb;
    char alt[4200];
    const char *dir = NULL;
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) return (uint64_t)sb.st_size;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) dir = path;
    else if (snprintf(alt, sizeof alt, "%s.capture", path), stat(alt, &sb) == 0 && S_ISDIR(sb.st_mode)) dir = alt;
    if (!dir) return 0;
    uint64_t total = 0;
    DIR *dp = opendir(dir);
    struct dirent *e;
    while (dp && (e = readdir(dp)) != NULL) {
        char p[8192];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) total += (uint64_t)sb.st_size;
    }
    if (dp) closedir(dp);
    return total;
}

/* The child's deadline for a dump of size bytes: 2 s, plus 0.5 s per MiB of the first 64 MiB
 * (SMALL_DUMP_BYTES: the part of which the child reads every chunk), plus 10 s per GiB beyond
 * (the child reads metadata only there); or TSC_CONTAIN_TIMEOUT (seconds) when set to a positive
 * number. A small dump is refused within seconds when libhdf5 hangs on it (was 30 s whatever the
 * size). The margin: valid dumps' pre-checks on a 2-core machine at a load average of 100 to 500
 * took at most 0.63 s (680 KiB, 3 steps), 1.35 s (6.6 MiB, 30 steps), 1.74 s (11.3 MiB, 4096
 * heads), 5.8 s (62 MiB, 300 steps, deflate) and 3.3 s (66 MiB, 300 steps, metadata only), that
 * is 3.7x to 10x under this deadline (docs/SECURITY.md). */
double tsc_contain_deadline_s(uint64_t size) {
    const char *e = getenv("TSC_CONTAIN_TIMEOUT");
    if (e && *e) {
        char *end;
        double v = strtod(e, &end);
        if (end != e && !*end && v > 0 && v < 1e7) return v;
    }
    double mib = (double)(size < SMALL_DUMP_BYTES ? size : SMALL_DUMP_BYTES) / (double)(1ull << 20);
    double rest_gib = size > SMALL_DUMP_BYTES ? (double)(size - SMALL_DUMP_BYTES) / (double)(1ull << 30) : 0.0;
    return 2.0 + 0.5 * mib + 10.0 * rest_gib;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Reads the child's report until EOF or the deadline; waits for its exit. *timed_out when the
 * deadline passed (the child is then killed). Returns the bytes read into buf. */
static size_t collect(pid_t pid, int fd, double end, char *buf, size_t cap, int *wstatus, int *timed_out) {
    size_t got = 0;
    int eof = 0, reaped = 0;
    *timed_out = 0;
    *wstatus = 0;
    while (!reaped) {
        double left = end - now_s();
        if (left <= 0) {
            *timed_out = 1;
            kill(pid, SIGKILL);
            while (waitpid(pid, wstatus, 0) < 0 && errno == EINTR) {}
            break;
        }
        if (!eof) {
            struct pollfd p = {fd, POLLIN, 0};
            int n = poll(&p, 1, (int)(left * 1000) + 1);
            if (n < 0 && errno != EINTR) eof = 1;
            if (n <= 0) continue;
            ssize_t r = read(fd, buf + got, got < cap ? cap - got : 0);
            if (r > 0) got += (size_t)r;
            else if (r == 0 || errno != EINTR) eof = 1;
            continue;
        }
        pid_t w = waitpid(pid, wstatus, WNOHANG);
        if (w == pid || (w < 0 && errno == ECHILD)) reaped = 1;
        else if (w == 0) usleep(2000);
    }
    return got;
}

static const char *sig_name(int sig) {
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGABRT: return "SIGABRT";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGTRAP: return "SIGTRAP";
    default: return "a signal";
    }
}

/* The parent's verdict on the child's end. */
static tsc_status_t verdict(const char *path, const char *buf, size_t got, int wstatus, int timed_out, double limit) {
    const char *tail = "the file is corrupt or hostile; not opened";
    if (timed_out)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: the HDF5 library did not finish reading the file's metadata within "
                             "%.3g s (a hang or a runaway; TSC_CONTAIN_TIMEOUT sets the limit): %s", path, limit, tail);
    if (WIFSIGNALED(wstatus)) {
        int sig = WTERMSIG(wstatus);
        if (sig == SIGXCPU || sig == SIGKILL)
            return tsc_error_set(TSC_ERR_FORMAT, "%s: the HDF5 library was stopped (%s: over its CPU-time or memory "
                                 "limit) while reading the file's metadata: %s", path, sig_name(sig), tail);
        if (sig == SIGABRT)
            return tsc_error_set(TSC_ERR_FORMAT, "%s: the HDF5 library aborted (SIGABRT: a failed check or an "
                                 "allocation over the memory limit) while reading the file's metadata: %s", path, tail);
        return tsc_error_set(TSC_ERR_FORMAT, "%s: the HDF5 library crashed (%s) while reading the file's metadata: %s",
                             path, sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL ||
                                   sig == SIGTRAP || sig == SIGXFSZ ? sig_name(sig) : strsignal(sig), tail);
    }
    int32_t code;
    if (got < sizeof code)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: the HDF5 library ended without a report (exit status %d) while "
                             "reading the file's metadata: %s", path, WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1,
                             tail);
    memcpy(&code, buf, sizeof code);
    if (code == TSC_OK) return TSC_OK;
    return tsc_error_set((tsc_status_t)code, "%.*s", (int)(got - sizeof code), buf + sizeof code);
}

tsc_status_t tsc_dump_precheck(const char *path) {
    if (!path || !*path) return TSC_OK; /* tsc_dump_open reports it */
    uint64_t size = path_size(path);
    double limit = tsc_contain_deadline_s(size);
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return tsc_error_set(TSC_ERR_IO, "%s: cannot start the contained pre-check: pipe: %s", path, strerror(errno));
    tsc_h5_lock(); /* no other thread of the library is inside HDF5 while the child is made */
    pid_t pid = fork();
    int err = errno;
    if (pid == 0) {
        close(p[0]);
        child_main(path, p[1], limit, size);
    }
    tsc_h5_unlock();
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        return tsc_error_set(TSC_ERR_IO, "%s: cannot start the contained pre-check: fork: %s", path, strerror(err));
    }
    __atomic_add_fetch(&g_children, 1, __ATOMIC_SEQ_CST);
    char buf[8192];
    int wstatus, timed_out;
    size_t got = collect(pid, p[0], now_s() + limit, buf, sizeof buf, &wstatus, &timed_out);
    close(p[0]);
    return verdict(path, buf, got, wstatus, timed_out, limit);
}

tsc_status_t tsc_contain_before_open(const char *path) {
    return tsc_dump_containment() ? tsc_dump_precheck(path) : TSC_OK;
}
