/* bench_heatmap: a 4096 x 4096 error map with colour bar to PNG, tilescope against matplotlib
 * (imshow + colorbar + savefig, same data, size, dpi and colour map) in the same run.
 *
 *   bench_heatmap [--size N] [--reps R] [--mpl bench/mpl_heatmap.py] [--python /usr/bin/python3]
 *
 * Prints each side's best-of-R time for the rendering and file writing only (data already in
 * memory; Python start-up and imports excluded) and the ratio. Not a test: no pass/fail. The load
 * average is printed at the start and the end; a busy start means no ratio is claimed
 * (bench_load.h). The last line is the README row. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_load.h"
#include "bench_check.h"
#include "tsc_heatmap.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char **argv) {
    int n = 4096, reps = 3;
    const char *mpl = "bench/mpl_heatmap.py", *py = "/usr/bin/python3";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--size") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mpl") && i + 1 < argc) mpl = argv[++i];
        else if (!strcmp(argv[i], "--python") && i + 1 < argc) py = argv[++i];
        else { fprintf(stderr, "usage: bench_heatmap [--size N] [--reps R] [--mpl SCRIPT] [--python PY]\n"); return 2; }
    }
    if (n < 16 || n > 16384 || reps < 1) { fprintf(stderr, "bench_heatmap: bad --size or --reps\n"); return 2; }
    char dir[] = "/tmp/tsc-bench-XXXXXX";
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    /* Signed "error" data with structure and a few planted extremes (what max-|x| pooling keeps). */
    float *a = malloc((size_t)n * n * sizeof *a);
    if (!a) { fprintf(stderr, "out of memory\n"); return 1; }
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < (size_t)n * n; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        double u = (double)(x >> 11) / 9007199254740992.0 - 0.5;
        a[i] = (float)(0.3 * u + 0.2 * sin((double)(i / n) * 0.01) * cos((double)(i % n) * 0.013));
    }
    a[(size_t)(n / 3) * n + n / 5] = -4.0f;
    a[(size_t)(2 * n / 3) * n + 4 * n / 5] = 4.0f;
    char raw[128], png[128], mplpng[128];
    snprintf(raw, sizeof raw, "%s/m.f32", dir);
    snprintf(png, sizeof png, "%s/tsc.png", dir);
    snprintf(mplpng, sizeof mplpng, "%s/mpl.png", dir);
    FILE *f = fopen(raw, "wb");
    if (!f || fwrite(a, sizeof *a, (size_t)n * n, f) != (size_t)n * n || fclose(f)) { perror(raw); return 1; }

    tsc_heatmap_opts_t o;
    tsc_heatmap_opts_init(&o);
    o.width_in = 3.25; o.height_in = 2.6; o.dpi = 300;
    o.cmap = TSC_CMAP_COOLWARM; o.norm_kind = TSC_NORM_SYMMETRIC;
    o.title = "error map"; o.cbar_label = "error";
    tsc_heatmap_panel_t p = {.data = a, .rows = n, .cols = n, .xlabel = "feature", .ylabel = "token"};
    tsc_heatmap_info_t info;
    double best = INFINITY, best_render = INFINITY;
    const int busy = bench_load_report("start");
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        if (tsc_heatmap_write(&o, &p, 1, png, TSC_IMG_PNG, &info) != TSC_OK) {
            fprintf(stderr, "bench_heatmap: %s\n", tsc_error_last());
            return 1;
        }
        double t1 = now();
        cairo_surface_t *img = NULL;
        BENCH_OK(tsc_heatmap_render(&o, &p, 1, &img, NULL));
        double t2 = now();
        cairo_surface_destroy(img);
        if (t1 - t0 < best) best = t1 - t0;
        if (t2 - t1 < best_render) best_render = t2 - t1;
    }
    printf("tilescope: %dx%d -> %s (%dx%d cells shown, max-|x| pooling %dx%d): best of %d %.3f s "
           "(render in memory %.3f s, PNG encoding the rest)\n", n, n, "PNG 975x780", info.shown_rows, info.shown_cols,
           info.pool_rows, info.pool_cols, reps, best, best_render);

    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' %d '%s' %d 2>&1", py, mpl, raw, n, mplpng, reps);
    FILE *pp = popen(cmd, "r");
    double mpl_t = NAN;
    char line[512];
    while (pp && fgets(line, sizeof line, pp)) {
        fputs(line, stdout);
        double v;
        if (sscanf(line, "matplotlib: best %lf", &v) == 1) mpl_t = v;
    }
    int rc = pp ? pclose(pp) : -1;
    bench_load_report("end");
    char base[64] = "matplotlib not run", ratio[64] = "n/a";
    if (rc != 0 || !isfinite(mpl_t)) {
        printf("matplotlib: not measured (%s failed; needs python3-matplotlib and numpy)\n", py);
    } else if (busy) {
        printf("ratio: %s\n", BENCH_NOT_CLAIMED);
        snprintf(base, sizeof base, "matplotlib %.3f s", mpl_t);
        snprintf(ratio, sizeof ratio, "not claimed (machine busy)");
    } else {
        printf("ratio: matplotlib / tilescope = %.1fx (goal >= 5x)\n", mpl_t / best);
        snprintf(base, sizeof base, "matplotlib %.3f s", mpl_t);
        snprintf(ratio, sizeof ratio, "%.1fx", mpl_t / best);
    }
    printf("TABLE | %d x %d heatmap + colour bar to PNG | %.3f s | %s | %s |\n", n, n, best, base, ratio);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "bench_heatmap: could not remove %s\n", dir);
    free(a);
    return 0;
}
