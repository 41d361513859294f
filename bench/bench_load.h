/* bench_load.h: the load rule of the C benchmarks (bench/load.sh states the same rule for the shell
 * ones). A benchmark prints the load average when it starts and when it ends, and claims no ratio
 * (it prints "not claimed" and why) when the 1-minute load average at its start exceeds the limit:
 * $TSC_BENCH_MAX_LOAD, else 0.75 x the online CPUs (1.5 on 2 cores). Timings on a busy machine
 * measure the other processes as much as the code. */
#ifndef TSC_BENCH_LOAD_H
#define TSC_BENCH_LOAD_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The three load averages (-1 when /proc/loadavg cannot be read). */
static void bench_loadavg(double la[3]) {
    la[0] = la[1] = la[2] = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = la[1] = la[2] = -1;
        fclose(f);
    }
}

static double bench_load_limit(void) {
    const char *e = getenv("TSC_BENCH_MAX_LOAD");
    if (e && *e) return atof(e);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return 0.75 * (double)(n > 0 ? n : 1);
}

/* Prints "load average (WHEN): a b c ..." and returns 1 when the machine is busy (only meaningful
 * at the start). */
static int bench_load_report(const char *when) {
    double la[3];
    bench_loadavg(la);
    const double lim = bench_load_limit();
    const int busy = la[0] > lim;
    printf("load average (%s): %.2f %.2f %.2f (limit %.2f, %ld CPUs)%s\n", when, la[0], la[1], la[2], lim,
           sysconf(_SC_NPROCESSORS_ONLN), busy ? ": BUSY" : "");
    return busy;
}

/* The line a benchmark prints instead of its ratio on a busy machine. */
#define BENCH_NOT_CLAIMED "not claimed: machine busy at the start (load average above the limit)"

#endif
