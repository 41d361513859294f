/* cmd_demo.c: `tilescope demo [-o DIR]`: synth -> diagnose -> figures + report, in-process, through the
 * other commands' entry points (so each step is exactly what a user would type). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "tsc_figure.h"
#include "tsc_report.h"

const char tsc_usage_demo[] =
    "usage: tilescope demo [-o DIR] [options]\n"
    "The main job in one command: synthesizes a GPT-2-small-shaped dump with the planted mechanism of\n"
    "docs/MECHANISM.md section 5 (ties at the row maximum, negative V features: only layer 1 is written, to stay\n"
    "fast; two steps, so the figures over steps have something to show), runs the diagnosis (`tilescope diagnose`), draws every figure whose data exists into\n"
    "DIR/figures/ and writes DIR/report.pdf, DIR/report.html and DIR/summary.json. Prints each step and\n"
    "where the results are.\n"
    "  -o, --out DIR       output folder, created if missing (default demo-out)\n"
    "  --shape NAME        synth shape: gpt2-small (default), tiny, llama-gqa\n"
    "  --max-heads N       at-risk heads examined in depth by diagnose (integer 1..64, default 64: every\n"
    "                      flagged head, so no at-risk head of the demo is left unexamined)\n"
    "  --log NAME=FILE     a training log to include (repeatable), e.g. examples/logs/*.csv\n"
    "  --seed N            synth seed (integer, default 1)\n"
    "  --steps SET         steps to synthesize (synth's syntax; default 0:2, the tiny shape: its own 0:3)\n"
    "Exit: 0 done, 1 a step failed (its message says which), 2 usage error.\n";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* tsc_figure_write_dir's report of each figure: the ones without data, with the reason. */
static void print_not_drawn(void *user, const char *id, tsc_status_t st, const char *why) {
    (void)user;
    if (st != TSC_OK) printf("      %s not drawn: %s\n", id, why);
}

int tsc_cmd_demo(int argc, char **argv) {
    const char *cmd = "demo", *dir = "demo-out", *shape = "gpt2-small", *steps = NULL, *logv[TSC_CLI_LIST_MAX];
    tsc_cli_list_t logs = TSC_CLI_LIST(logv);
    long max_heads = 64, seed_n = 1;
    int rc;
    const tsc_cli_flag_t flags[] = {{"--out", "-o", TSC_CLI_STR, &dir, 0, 0},
                                    {"--shape", NULL, TSC_CLI_STR, &shape, 0, 0},
                                    {"--max-heads", NULL, TSC_CLI_LONG, &max_heads, 1, 64},
                                    {"--seed", NULL, TSC_CLI_LONG, &seed_n, 0, 4611686018427387904.0},
                                    {"--steps", NULL, TSC_CLI_STR, &steps, 0, 0},
                                    {"--log", NULL, TSC_CLI_LIST, &logs, 0, 0}};
    if ((rc = tsc_cli_args(cmd, argc, argv, flags, TSC_CLI_NFLAGS(flags), NULL, NULL, 0, NULL))) return rc;
    if (strcmp(shape, "gpt2-small") && strcmp(shape, "tiny") && strcmp(shape, "llama-gqa"))
        return tsc_cli_usage_error(cmd, "--shape: expected gpt2-small, tiny or llama-gqa, got '%s'", shape);
    if (strlen(dir) > 900) return tsc_cli_usage_error(cmd, "-o: path too long");
    char figdir[1024], dump[1024], pdf[1024], mh[16], seed[24];
    snprintf(figdir, sizeof figdir, "%s/figures", dir);
    snprintf(dump, sizeof dump, "%s/dump.h5", dir);
    snprintf(pdf, sizeof pdf, "%s/report.pdf", dir);
    snprintf(mh, sizeof mh, "%ld", max_heads);
    snprintf(seed, sizeof seed, "%ld", seed_n);
    if (tsc_cli_make_dir(dir) || tsc_cli_make_dir(figdir)) return tsc_cli_fail(cmd, "%s: cannot create the folder: %s", dir, strerror(errno));
    double t0 = now_s(), t;
    int layer_only = strcmp(shape, "tiny") != 0; /* tiny is small enough to write whole */
    if (!steps && layer_only) steps = "0:2";
    printf("demo: output folder %s (shape %s%s, seed %s)\n", dir, shape, layer_only ? ", layer 1 only" : "", seed);

    char *sargv[16] = {"-o", dump, "--shape", (char *)shape, "--seed", seed, "--quiet"};
    int sargc = 7;
    if (layer_only) sargv[sargc++] = "--layers", sargv[sargc++] = "1";
    if (steps) sargv[sargc++] = "--steps", sargv[sargc++] = (char *)steps;
    printf("[1/4] tilescope synth");
    for (int k = 0; k < sargc; k++) printf(" %s", sargv[k]);
    printf("\n");
    fflush(stdout);
    t = now_s();
    if ((rc = tsc_cmd_synth(sargc, sargv)) != 0) return tsc_cli_fail(cmd, "step 1 (synth) failed");
    printf("      %.1f s\n", now_s() - t);

    printf("[2/4] tilescope diagnose %s -o %s --max-heads %s --quiet\n", dump, dir, mh);
    fflush(stdout);
    t = now_s();
    char *dargv[8] = {dump, "-o", (char *)dir, "--max-heads", mh, "--quiet", NULL};
    if ((rc = tsc_cmd_diagnose(6, dargv)) != 0 && rc != TSC_CLI_EXIT_POOR_FIT) return tsc_cli_fail(cmd, "step 2 (diagnose) failed");
    printf("      %.1f s\n", now_s() - t);

    tsc_figure_src_t *src;
    if (tsc_figure_src_open_logs(dir, logs.v, logs.n, &src) != TSC_OK) return tsc_cli_fail(cmd, "%s", tsc_error_last());
    printf("[3/4] tilescope figure figN --from %s -o %s/figN.png   (every figure whose data exists)\n", dir, figdir);
    fflush(stdout);
    t = now_s();
    tsc_figure_opts_t fo;
    tsc_figure_opts_init(&fo);
    fo.dpi = 200;
    int drawn = 0;
    (void)tsc_figure_write_dir(src, NULL, figdir, &fo, print_not_drawn, NULL, &drawn); /* fails only on NULL */
    printf("      %d figures, %.1f s\n", drawn, now_s() - t);

    printf("[4/4] tilescope report %s -o %s\n", dir, pdf);
    fflush(stdout);
    t = now_s();
    tsc_report_opts_t ro;
    tsc_report_opts_init(&ro);
    tsc_report_info_t info;
    tsc_status_t st = tsc_report_write(src, pdf, &ro, &info);
    tsc_figure_src_close(src);
    if (st != TSC_OK) return tsc_cli_fail(cmd, "step 4 (report): %s", tsc_error_last());
    printf("      %d pages, %.1f s\n", info.n_pages, now_s() - t);
    printf("demo done in %.1f s. Results:\n  report  %s\n  html    %s\n  summary %s/summary.json\n  figures %s/\n"
           "  dump    %s\n", now_s() - t0, pdf, info.html_path, dir, figdir, dump);
    return 0;
}
