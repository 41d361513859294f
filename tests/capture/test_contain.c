/* test_contain.c: the contained pre-check of tsc_dump_open (tsc_contain.h): real libhdf5
 * crashers and a hang (tests/data/hostile/, found by fuzzing) become prompt errors naming the
 * file and the cause; a sound dump opens with the same result; containment is off by default
 * and then no child is started; the HDF5 lock held across the fork does not deadlock the child. */
#include "tsc_contain.h"
#include "tsc_dump.h"
#include "tsc_h5.h"
#include "tsc_synth.h"
#include "tsc_test.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char sound[256];

/* Opens path with the current setting; *secs the time it took; the status. */
static tsc_status_t try_open(const char *path, double *secs) {
    tsc_dump_t *d = (tsc_dump_t *)1;
    double t0 = now_s();
    tsc_status_t st = tsc_dump_open(&d, path);
    *secs = now_s() - t0;
    if (st != TSC_OK) CHECK(d == NULL);
    tsc_dump_close(d);
    return st;
}

/* The meta and head (0, 1) of q of the first step. */
static void read_sound(tsc_dump_meta_t *m, float *q, size_t cap) {
    tsc_dump_t *d = NULL;
    CHECK(tsc_dump_open(&d, sound) == TSC_OK);
    if (!d) return;
    *m = *tsc_dump_meta(d);
    CHECK(tsc_dump_slice_elems(d, tsc_dump_step_at(d, 0), 0, "q") <= cap);
    CHECK(tsc_dump_read(d, tsc_dump_step_at(d, 0), 0, "q", 0, 1, q) == TSC_OK);
    tsc_dump_close(d);
}

static void test_default_off_and_same_result(void) {
    unsetenv("TSC_CONTAIN");
    CHECK_EQ_INT(tsc_dump_containment(), 0);
    static float q_off[1 << 16], q_on[1 << 16];
    tsc_dump_meta_t m_off, m_on;
    long n0 = tsc_dump_precheck_count();
    read_sound(&m_off, q_off, 1 << 16);
    CHECK_EQ_INT(tsc_dump_precheck_count(), n0); /* off: no child */
    tsc_dump_set_containment(1);
    CHECK_EQ_INT(tsc_dump_containment(), 1);
    read_sound(&m_on, q_on, 1 << 16);
    CHECK_EQ_INT(tsc_dump_precheck_count(), n0 + 1);
    CHECK(memcmp(&m_off, &m_on, sizeof m_on) == 0);
    CHECK(memcmp(q_off, q_on, sizeof q_on) == 0);
    CHECK_EQ_INT(m_on.n_head, m_off.n_head);
    CHECK(m_on.n_head > 1);
    /* the environment overrides the program's setting, both ways */
    setenv("TSC_CONTAIN", "0", 1);
    CHECK_EQ_INT(tsc_dump_containment(), 0);
    read_sound(&m_on, q_on, 1 << 16);
    CHECK_EQ_INT(tsc_dump_precheck_count(), n0 + 1);
    tsc_dump_set_containment(0);
    setenv("TSC_CONTAIN", "1", 1);
    CHECK_EQ_INT(tsc_dump_containment(), 1);
    unsetenv("TSC_CONTAIN");
    CHECK_EQ_INT(tsc_dump_containment(), 0);
}

/* A failure the child finds is returned as is: the same status and message as in-process. */
static void test_child_error_passed_through(void) {
    const char *notdump = "contain_notdump.h5";
    FILE *f = fopen(notdump, "w");
    fputs("not an HDF5 file at all\n", f);
    fclose(f);
    const char *paths[] = {notdump, "contain_missing.h5"};
    for (int i = 0; i < 2; i++) {
        double s;
        tsc_dump_set_containment(0);
        tsc_status_t st_off = try_open(paths[i], &s);
        char msg_off[1024];
        snprintf(msg_off, sizeof msg_off, "%s", tsc_error_last());
        tsc_dump_set_containment(1);
        tsc_status_t st_on = try_open(paths[i], &s);
        CHECK(st_off != TSC_OK);
        CHECK_EQ_INT(st_on, st_off);
        CHECK_STREQ(tsc_error_last(), msg_off);
    }
    unlink(notdump);
}

static void hostile_path(char *buf, size_t cap, const char *name) {
    const char *src = getenv("TSC_SRC");
    snprintf(buf, cap, "%s/tests/data/hostile/%s", src ? src : "../..", name);
}

/* What a contained crash reports. Under ASan/UBSan the sanitizer catches the fault in the child
 * first, prints its report and exits 1, so the parent sees an exit without a report, not the signal. */
#ifdef TSC_SANITIZE
#define CRASHED(sig) "while reading the file's metadata: the file is corrupt or hostile; not opened"
#else
#define CRASHED(sig) "the HDF5 library crashed (" sig ") while reading the file's metadata: the file is corrupt " \
                     "or hostile; not opened"
#endif

/* Real libhdf5 1.10.8 crashers: each crashes an uncontained open (SIGSEGV). */
static void test_real_crashers(void) {
    const char *names[] = {"global-heap-segv.h5", "global-heap-memcpy-overlap.h5"};
    tsc_dump_set_containment(1);
    for (int i = 0; i < 2; i++) {
        char p[4096];
        hostile_path(p, sizeof p, names[i]);
        CHECKF(access(p, R_OK) == 0, "%s missing", p);
        double s;
        tsc_status_t st = try_open(p, &s);
        CHECK_EQ_INT(st, TSC_ERR_FORMAT);
        const char *e = tsc_error_last();
        CHECKF(strstr(e, p) == e, "%s", e);
        CHECKF(strstr(e, CRASHED("SIGSEGV")) != NULL, "%s", e);
        CHECKF(s < 10, "%.1f s", s);
    }
}

/* A real hang (an endless loop in libhdf5 reading a string attribute), bounded by the deadline. */
static void test_real_hang(void) {
    char p[4096];
    hostile_path(p, sizeof p, "global-heap-hang.h5");
    tsc_dump_set_containment(1);
    setenv("TSC_CONTAIN_TIMEOUT", "2", 1);
    double s;
    tsc_status_t st = try_open(p, &s);
    unsetenv("TSC_CONTAIN_TIMEOUT");
    CHECK_EQ_INT(st, TSC_ERR_FORMAT);
    const char *e = tsc_error_last();
    CHECKF(strstr(e, p) == e, "%s", e);
    CHECKF(strstr(e, "did not finish reading the file's metadata within 2 s") != NULL, "%s", e);
    CHECKF(s >= 1.9 && s < 8, "%.2f s", s);
}

/* The test hook (honoured only in the child): abort, and an allocation runaway stopped by
 * RLIMIT_AS (the memory budget + headroom; malloc fails, the hook aborts as libhdf5 may). */
static void test_hooks(void) {
    tsc_dump_set_containment(1);
    double s;
    setenv("TSC_CONTAIN_TEST_CRASH", "abort", 1);
    CHECK_EQ_INT(try_open(sound, &s), TSC_ERR_FORMAT);
    CHECKF(strstr(tsc_error_last(), "the HDF5 library aborted (SIGABRT") != NULL, "%s", tsc_error_last());
    setenv("TSC_CONTAIN_TEST_CRASH", "alloc", 1);
    setenv("TSC_MAX_MEMORY", "64M", 1);
    CHECK_EQ_INT(try_open(sound, &s), TSC_ERR_FORMAT);
#ifdef TSC_SANITIZE
    CHECKF(strstr(tsc_error_last(), CRASHED("SIGABRT")) != NULL, "%s", tsc_error_last()); /* ASan's allocator */
#else
    CHECKF(strstr(tsc_error_last(), "(SIGABRT") != NULL, "%s", tsc_error_last());
#endif
    unsetenv("TSC_MAX_MEMORY");
    setenv("TSC_CONTAIN_TEST_CRASH", "segv", 1);
    CHECK_EQ_INT(try_open(sound, &s), TSC_ERR_FORMAT);
    CHECKF(strstr(tsc_error_last(), "crashed (SIGSEGV)") != NULL, "%s", tsc_error_last());
    unsetenv("TSC_CONTAIN_TEST_CRASH");
    CHECK_EQ_INT(try_open(sound, &s), TSC_OK); /* the hook is the only cause */
}

/* *arg: 0 starting, 1 holding the lock, 2 the main thread is done forking. The thread lives until 2:
 * a thread ending while the process forks may leave the child a lock of the thread teardown held
 * (the sanitizers' thread registry), and the child would hang until the deadline. */
static void *hold_lock(void *arg) {
    int *state = arg;
    tsc_h5_lock();
    __atomic_store_n(state, 1, __ATOMIC_RELEASE); /* the fork below must find it holding the lock */
    usleep(300000);
    tsc_h5_unlock();
    while (__atomic_load_n(state, __ATOMIC_ACQUIRE) != 2) usleep(1000);
    return NULL;
}

/* Forking while this thread holds the HDF5 lock (nested) or while another thread holds it: the
 * child gets a fresh lock, the parent's stays usable. */
static void test_lock_across_fork(void) {
    tsc_dump_set_containment(1);
    setenv("TSC_CONTAIN_TIMEOUT", "20", 1);
    double s;
    tsc_h5_lock();
    CHECK_EQ_INT(try_open(sound, &s), TSC_OK);
    tsc_h5_unlock();
    CHECKF(s < 10, "%.1f s", s);
    pthread_t t;
    int held = 0;
    pthread_create(&t, NULL, hold_lock, &held);
    /* wait for the lock itself, not a fixed time: a thread still starting up (its sanitizer
     * bookkeeping under a lock) when the process forks would leave the child that lock held */
    while (!__atomic_load_n(&held, __ATOMIC_ACQUIRE)) usleep(1000);
    tsc_status_t st = try_open(sound, &s);
    CHECKF(st == TSC_OK, "status %d: %s", (int)st, tsc_error_last());
    __atomic_store_n(&held, 2, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    unsetenv("TSC_CONTAIN_TIMEOUT");
}

int main(void) {
    snprintf(sound, sizeof sound, "contain_sound.%ld.h5", (long)getpid());
    tsc_synth_opts_t o;
    tsc_synth_opts_init(&o);
    o.shape = "tiny";
    o.seed = 3;
    if (tsc_synth_write(sound, &o) != TSC_OK) {
        fprintf(stderr, "synth: %s\n", tsc_error_last());
        return 1;
    }
    test_default_off_and_same_result();
    test_child_error_passed_through();
    test_real_crashers();
    test_real_hang();
    test_hooks();
    test_lock_across_fork();
    unlink(sound);
    return tsc_test_done();
}
