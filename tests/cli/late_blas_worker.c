/* late_blas_worker.c: an LD_PRELOAD shim for test_ulimit.sh (built by it; not a test of its own). It
 * stands in for a loaded machine on which OpenBLAS's worker threads run late: every mapping of 100 MiB
 * or more asked for by a thread other than the main one (an OpenBLAS work buffer) waits 0.5 s first. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

void *mmap(void *a, size_t n, int p, int f, int fd, off_t o) {
    static void *(*real)(void *, size_t, int, int, int, off_t);
    if (!real) real = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
    if (n >= (100u << 20) && p != PROT_NONE && gettid() != getpid()) usleep(500000);
    return real(a, n, p, f, fd, o);
}
