/* blas_internal.h (private to analyze/): BLAS runs single-threaded inside tilescope. The analysis
 * runs heads in parallel on OpenMP threads; an OpenBLAS that also starts its own threads for
 * each call oversubscribes the cores (a third of diagnose's time was once spent spinning in
 * OpenBLAS's thread pool). Every function of analyze/ that calls BLAS or LAPACK calls this first
 * (idempotent, thread-safe). */
#ifndef TSC_BLAS_INTERNAL_H
#define TSC_BLAS_INTERNAL_H
#include "tsc_status.h"
void tsc_blas_one_thread(void);
/* OpenBLAS maps a 128 MiB work buffer per calling thread on its first call and, when the mmap
 * fails (a low `ulimit -v`), retries forever. Before work starts, this reserves (and releases)
 * that address space for nthreads threads: TSC_ERR_NOMEM naming the limit when it does not fit,
 * instead of a hang. Called once everything else large the work holds is mapped (its scratch, its
 * OpenMP team), and valid only while OpenBLAS runs no worker threads of its own, which map their
 * buffers at times of their own (cli/main.c keeps them from starting under a limit). */
tsc_status_t tsc_blas_headroom(int nthreads);
#endif
