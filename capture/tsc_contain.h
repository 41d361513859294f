/* tsc_contain.h: containment of libhdf5 crashes, hangs and runaways on hostile dumps
 * (docs/SECURITY.md, "Containment").
 *
 * libhdf5 parses a file's metadata without hardening: a crafted dump can crash it (heap
 * over-read, memcpy overlap in the global-heap/vlen code), hang it (an endless loop reading a
 * string attribute) or make it allocate without bound, before any of tilescope's checks can
 * refuse it. With containment on, tsc_dump_open first has a child process (fork, no exec: the
 * library is already loaded) open and walk the dump: tsc_dump_open's own untrusted-input walk,
 * the shallow validator (every step, layer and dataset's shape and type), the layer and
 * dataset listings, and every integer, float and string attribute of the root and of each step
 * group; chunk data only when the dump is small (<= 64 MiB: the deep validator). The child runs
 * under resource limits (RLIMIT_AS: its current address space + the memory budget tsc_mem.h +
 * 512 MiB; RLIMIT_CPU: the deadline; RLIMIT_FSIZE 0; RLIMIT_CORE 0) and a wall-clock deadline:
 * 2 s, plus 0.5 s per MiB of the first 64 MiB of dump, plus 10 s per GiB beyond (a 680 KiB dump
 * gets 2.3 s, 64 MiB 34 s, 1 GiB 43 s), or TSC_CONTAIN_TIMEOUT=<seconds> when set. The child reports
 * its status and error detail through a pipe and leaves with _exit (no atexit handler runs, so
 * the parent's HDF5 files are never flushed or closed from the child). A child killed by a
 * signal, stopped at the deadline or over its limits is an error naming the file and the cause:
 *   "d.h5: the HDF5 library crashed (SIGSEGV) while reading the file's metadata: the file is
 *    corrupt or hostile; not opened"
 * A failure the child reports (a refused link, a wrong format) is returned as is, with the
 * child's message, and the dump is not opened in-process. On success the dump is opened
 * in-process as without containment.
 *
 * Off by default in the library (a host process gets no surprise fork); a program turns it on
 * with tsc_dump_set_containment(1) (the tilescope CLI does; a Python binding calls
 * lib.tsc_dump_set_containment(1) through ctypes). The environment variable TSC_CONTAIN=0 or 1,
 * when set, overrides both (read at each open).
 *
 * Limits: the child's HDF5 state is a copy of the caller's; the library's HDF5 lock is taken
 * around fork() so the child never inherits it locked, but a host thread inside libhdf5 without
 * that lock (h5py on another thread) can leave HDF5's own mutex locked in the child: the child
 * then hangs and the deadline refuses the file. Data chunks of larger dumps are read only
 * in-process, so a crash in the decompression of a chunk there is not contained.
 *
 * Test hook: TSC_CONTAIN_TEST_CRASH=segv|abort|hang|alloc, honoured only in the child, makes it
 * crash, spin, or allocate without bound before the walk (tests of the parent's handling). */
#ifndef TSC_CONTAIN_H
#define TSC_CONTAIN_H

#include "tsc_export.h"

#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Turns containment on (1) or off (0) for later tsc_dump_open calls of this process. */
TSC_API void tsc_dump_set_containment(int on);
/* 1 when tsc_dump_open runs the contained pre-check now (TSC_CONTAIN when set, else the
 * program's setting, else 0). */
TSC_API int tsc_dump_containment(void);
/* The contained pre-check of path, whatever the setting: TSC_OK when a child opened and walked
 * it; the child's error; or TSC_ERR_FORMAT for a crash, a deadline or a limit (message above).
 * TSC_ERR_IO when no child can be started (fork or pipe failed). */
TSC_API tsc_status_t tsc_dump_precheck(const char *path);
/* Children started by tsc_dump_precheck in this process (for tests and benchmarks). */
TSC_API long tsc_dump_precheck_count(void);

#ifdef __cplusplus
}
#endif
#endif
