/* blas_internal.h (private to analyze/): BLAS runs single-threaded inside tilescope. The analysis
 * runs heads in parallel on OpenMP threads; an OpenBLAS that also starts its own threads for
 * each call oversubscribes the cores (a third of diagnose's time was once spent spinning in
 * OpenBLAS's thread pool). Every function of analyze/ that calls BLAS or LAPACK calls this first
 * (idempotent, thread-safe). */
#ifndef TSC_BLAS_INTERNAL_H
#define TSC_BLAS_INTERNAL_H
void tsc_blas_one_thread(void);
#endif
