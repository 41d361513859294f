/* bench_peak: this machine's FP32 FMA peak and memory bandwidth (bench_peak.h), measured now, with
 * OMP_NUM_THREADS threads. The shell benchmarks print its lines next to their own figures:
 *   bench_peak          ->  "peak: FP32 FMA 198.1 GFLOP/s (8-lane FMA, 2 threads); memory 31.2 GB/s (STREAM triad)" */
#include <stdio.h>

#include "bench_peak.h"

int main(void) {
    int lanes = 0, threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    double f = fma_peak(&lanes), m = triad_gbs();
    printf("peak: FP32 FMA %.1f GFLOP/s (%d-lane FMA, %d threads); memory %.1f GB/s (STREAM triad)\n", f, lanes, threads,
           m);
    return f > 0 && m > 0 ? 0 : 1;
}
