/* cmd_analyze.c: `tilescope analyze DUMP -o DIR`: error/bias statistics, ties and sinks, rounding
 * census, O-bar_error curves, gradient-error decomposition, spectral norms (analyze/tsc_analysis.h). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "tsc_analysis.h"
#include "tsc_comm.h"
#include "tsc_file.h"

const char tsc_usage_analyze[] =
    "usage: tilescope analyze DUMP -o DIR [options]\n"
    "Replays every selected step/layer/head under an hp and an lp policy and writes DIR/analysis.h5\n"
    "(arrays for figures) and DIR/summary.json (every metric; keys in docs/FORMAT.md section 3).\n"
    "  -o, --out DIR       output folder, created if missing (required)\n"
    "  --hp POLICY         reference policy (string, default fp32)\n"
    "  --lp POLICY         low-precision policy (string, default: the dump's policy, else the preset\n"
    "                      whose replay best reproduces the captured O (tilescope fit), else bf16-fa2)\n"
    "  --select SPEC       steps=A:B:S,layers=...,heads=...,batches=... (default all)\n"
    "  --steps SET, --layers SET, --heads SET, --batches SET   (e.g. 1,3 or 0:12:2 or all)\n"
    "  --probe B,T,I       also record O-bar_error(t) at batch B, row T, feature I (integers inside the\n"
    "                      dump: one out of range is an error naming the range)\n"
    "  --alpha A           family-wise false-positive bound of the flags (number, default 0.01)\n"
    "  --min-ulp U         minimum |mean bias| of a flagged feature in ULPs (number, default 0.05)\n"
    "  --tie-eps E         tolerance of 'within eps' ties (number, default 1e-3)\n"
    "  --terms N           rank-1 terms per head and step (integer, default 32)\n"
    "  --run-id HEX        the id that pairs analysis.h5 with summary.json (32 hex digits; default a\n"
    "                      fresh random one): two runs with the same id write the same bytes\n"
    "  --no-census         skip the rounding census of P-bar V\n"
    "  --no-identity       skip identity (1) (saves one backward per head)\n"
    "  --json              also print summary.json to stdout\n"
    "  --top N             rows of the per-head table: the N head records most at risk (skipped, then\n"
    "                      flagged, then largest |delta sum|; integer, default 10)\n"
    "  -v, --verbose       print every head record in the table (one row per step, layer and head)\n"
    "  -q, --quiet         no configuration, progress or table on stderr/stdout\n"
    "Progress (with the time left) goes to stderr: a bar on a terminal, else a line every 10%.\n"
    "Under a launcher (mpirun -n N tilescope analyze ...) the processes share the head records and\n"
    "process 0 writes the same bytes one process would (docs/DISTRIBUTED.md).\n"
    "Exit: 0 done, 1 the job failed (bad dump, unwritable DIR), 2 usage error.\n";

int tsc_cli_analysis_flag(const char *cmd, int argc, char **argv, int *i, tsc_analysis_opts_t *o) {
    const char *hp = NULL, *lp = NULL, *select = NULL, *run_id = NULL;
    const tsc_cli_flag_t f[] = {{"--hp", NULL, TSC_CLI_STR, &hp, 0, 0},
                                {"--run-id", NULL, TSC_CLI_STR, &run_id, 0, 0},
                                {"--lp", NULL, TSC_CLI_STR, &lp, 0, 0},
                                {"--select", NULL, TSC_CLI_STR, &select, 0, 0},
                                TSC_CLI_SELECT_FLAGS(&o->sel),
                                {"--alpha", NULL, TSC_CLI_DOUBLE, &o->rule.alpha, 1e-300, 1},
                                {"--min-ulp", NULL, TSC_CLI_DOUBLE, &o->rule.min_ulp, 0, 1e6},
                                {"--tie-eps", NULL, TSC_CLI_DOUBLE, &o->tie_eps, 0, 1e3},
                                {"--terms", NULL, TSC_CLI_INT, &o->n_terms, 1, 4096}};
    int rc = tsc_cli_flag(cmd, argc, argv, i, f, TSC_CLI_NFLAGS(f));
    if (rc) return rc;
    const char *pol = hp ? hp : lp;
    if (pol && strlen(pol) >= TSC_POLICY_STR_MAX)
        return tsc_cli_usage_error(cmd, "%s: policy string too long", hp ? "--hp" : "--lp");
    if (pol) strcpy(hp ? o->hp : o->lp, pol);
    if (select && tsc_select_parse(&o->sel, select) != TSC_OK)
        return tsc_cli_usage_error(cmd, "--select: %s", tsc_error_last());
    if (run_id && !tsc_run_id_valid(run_id))
        return tsc_cli_usage_error(cmd, "--run-id expects %d hexadecimal digits (0-9, a-f), got '%.40s'", TSC_RUN_ID_LEN,
                                   run_id);
    if (run_id) o->run_id = run_id;
    return 0;
}

int tsc_cli_analysis_check(const char *cmd, const tsc_analysis_opts_t *o) {
    tsc_policy_t pol;
    if (o->hp[0] && tsc_policy_parse(o->hp, &pol) != TSC_OK) return tsc_cli_usage_error(cmd, "--hp: %s", tsc_error_last());
    if (o->lp[0] && tsc_policy_parse(o->lp, &pol) != TSC_OK) return tsc_cli_usage_error(cmd, "--lp: %s", tsc_error_last());
    return 0;
}

/* Rank 0's part of tsc_cli_analysis_ready: the folder and its lock. */
static int analysis_dir(const char *cmd, const char *outdir, int *lock_fd) {
    if (tsc_cli_make_dir(outdir) != 0) return tsc_cli_fail(cmd, "%s: cannot create the output folder: %s", outdir, strerror(errno));
    /* one writer per folder, from before analysis.h5 until summary.json is written */
    char holder[32];
    if (tsc_dir_lock(outdir, TSC_CLI_DIR_LOCK, lock_fd, holder, sizeof holder) != TSC_OK) {
        if (holder[0]) return tsc_cli_fail(cmd, "%s is being written by another tilescope analysis (pid %s)", outdir, holder);
        return tsc_cli_fail(cmd, "%s", tsc_error_last());
    }
    return 0;
}

int tsc_cli_analysis_ready(const char *cmd, const char *dump, const char *outdir, int quiet, tsc_analysis_opts_t *o,
                           int *lock_fd) {
    int rc;
    *lock_fd = -1;
    if (!dump) return tsc_cli_usage_error(cmd, "missing DUMP");
    if ((rc = tsc_cli_analysis_check(cmd, o))) return rc;
    if (!outdir) return tsc_cli_usage_error(cmd, "missing -o DIR");
    if ((rc = tsc_cli_comm_start(cmd))) return rc;
    const tsc_comm_t *c = o->comm = tsc_cli_comm();
    if (c->rank == 0) rc = analysis_dir(cmd, outdir, lock_fd);
    /* under a launcher, the other processes leave with rank 0's code (it printed why) */
    int32_t code = rc;
    if (c->bcast(c->ctx, 0, &code, sizeof code) != TSC_OK) return rc ? rc : tsc_cli_fail(cmd, "%s", tsc_error_last());
    if (code) return code;
    static tsc_cli_progress_t progress; /* one job per process */
    o->progress = tsc_cli_progress_init(&progress, cmd, quiet || c->rank != 0);
    return 0;
}

/* the lock file goes with the lock (tsc_dir_lock rechecks the path after locking, so a writer that opened the
 * removed file does not hold the folder) */
void tsc_cli_analysis_unlock(const char *outdir, int lock_fd) { tsc_dir_unlock(outdir, TSC_CLI_DIR_LOCK, lock_fd, 1); }

int tsc_cli_analysis_failed(const char *cmd, const char *outdir, int lock_fd, const tsc_analysis_opts_t *o) {
    const tsc_comm_t *c = o->comm;
    if (c->rank == 0) {
        tsc_cli_analysis_unlock(outdir, lock_fd);
        tsc_cli_fail(cmd, "%s", tsc_error_last());
    }
    /* the others leave after rank 0 has said why: a launcher stops the job at the first non-zero exit */
    (void)c->barrier(c->ctx);
    return 1;
}

int tsc_cli_summary_out(const char *cmd, const char *outdir, tsc_json_t *j, int print, int lock_fd) {
    char path[4096];
    snprintf(path, sizeof path, "%s/summary.json", outdir);
    tsc_status_t st = tsc_json_write_file(j, path);
    tsc_cli_analysis_unlock(outdir, lock_fd);
    if (st == TSC_OK && print) puts(tsc_json_text(j, NULL));
    tsc_json_free(j);
    return st == TSC_OK ? 0 : tsc_cli_fail(cmd, "%s", tsc_error_last());
}

/* The analysis flags and --probe B,T,I (each an integer in [0, INT_MAX]; the dump bounds them further). */
static int analyze_flag(const char *cmd, int argc, char **argv, int *i, void *ctx) {
    tsc_analysis_opts_t *o = ctx;
    const char *v = NULL;
    const tsc_cli_flag_t f[] = {{"--probe", NULL, TSC_CLI_STR, &v, 0, 0}};
    int rc = tsc_cli_analysis_flag(cmd, argc, argv, i, o);
    if (rc < 0) rc = tsc_cli_flag(cmd, argc, argv, i, f, TSC_CLI_NFLAGS(f));
    if (rc || !v) return rc;
    int *dst[3] = {&o->probe_b, &o->probe_t, &o->probe_i};
    const char *p = v;
    for (int k = 0; k < 3; k++) {
        char *end;
        errno = 0;
        long n = strtol(p, &end, 10);
        if (errno || end == p || n < 0 || n > INT_MAX || *end != (k < 2 ? ',' : '\0'))
            return tsc_cli_usage_error(cmd, "--probe expects B,T,I (three non-negative integers), got '%s'", v);
        *dst[k] = (int)n;
        p = end + 1;
    }
    return 0;
}

/* The table order without --verbose: skipped records first, then flagged ones, then the largest |delta sum|. */
static int by_risk(const void *x, const void *y) {
    const tsc_head_result_t *a = *(const tsc_head_result_t *const *)x, *b = *(const tsc_head_result_t *const *)y;
    if (a->skipped != b->skipped) return b->skipped - a->skipped;
    if (a->flagged != b->flagged) return b->flagged - a->flagged;
    double da = fabs(a->delta_sum), db = fabs(b->delta_sum);
    return da < db ? 1 : da > db ? -1 : 0;
}

/* One row per head record: every record in the analysis' order (top 0), or the top most at risk
 * (by_risk) and a line saying how many were left out. 0, or -1 out of memory. */
static int print_table(const tsc_analysis_t *res, size_t top) {
    size_t n = res->n_heads, shown = top && top < n ? top : n;
    const tsc_head_result_t **rows = malloc((n ? n : 1) * sizeof *rows);
    if (!rows) return -1;
    for (size_t i = 0; i < n; i++) rows[i] = &res->heads[i];
    if (shown < n) qsort(rows, n, sizeof *rows, by_risk);
    printf("%-8s %-5s %-4s %-9s %-11s %-9s %-12s %-8s %s\n", "step", "layer", "head", "O ulp", "delta sum",
           "ties", "flagged", "feature", "sinks");
    for (size_t i = 0; i < shown; i++) {
        const tsc_head_result_t *r = rows[i];
        if (r->skipped)
            printf("%-8lld %-5d %-4d skipped: %lld non-finite inputs, first %s\n", r->step, r->layer, r->head,
                   (long long)r->n_nonfinite, r->first_nonfinite);
        else
            printf("%-8lld %-5d %-4d %+9.4f %+11.4g %-9lld %-12s %-8d %d\n", r->step, r->layer, r->head,
                   r->o_err.mean_ulp, r->delta_sum, (long long)r->rows_multi_max, r->flagged ? "BIASED" : "-",
                   r->top_feature, r->n_sinks_flagged ? r->sinks_flagged[0] : -1);
    }
    if (shown < n)
        printf("(%zu of %zu head records shown: skipped, then flagged, then the largest |delta sum|; %zu omitted: "
               "--verbose prints all, --top N more, summary.json has every one)\n", shown, n, n - shown);
    free(rows);
    return 0;
}

int tsc_cmd_analyze(int argc, char **argv) {
    const char *cmd = "analyze", *dump = NULL, *outdir = NULL;
    int json = 0, quiet = 0, verbose = 0, top = 10, rc, lock_fd;
    tsc_analysis_opts_t o;
    tsc_analysis_opts_init(&o);
    const tsc_cli_flag_t flags[] = {{"--out", "-o", TSC_CLI_STR, &outdir, 0, 0},
                                    {"--no-census", NULL, TSC_CLI_OFF, &o.census, 0, 0},
                                    {"--no-identity", NULL, TSC_CLI_OFF, &o.identity, 0, 0},
                                    {"--json", NULL, TSC_CLI_ON, &json, 0, 0},
                                    {"--top", NULL, TSC_CLI_INT, &top, 1, 1000000},
                                    {"--verbose", "-v", TSC_CLI_ON, &verbose, 0, 0},
                                    {"--quiet", "-q", TSC_CLI_ON, &quiet, 0, 0}};
    if ((rc = tsc_cli_args(cmd, argc, argv, flags, TSC_CLI_NFLAGS(flags), analyze_flag, &o, 1, &dump))) return rc;
    if ((rc = tsc_cli_analysis_ready(cmd, dump, outdir, quiet, &o, &lock_fd))) return rc;
    const int worker = o.comm->rank != 0; /* a process of a launcher's job other than rank 0: no output */
    if (!quiet && !worker) {
        char sel[512];
        fprintf(stderr, "analyze: dump %s -> %s/analysis.h5, %s/summary.json\n", dump, outdir, outdir);
        fprintf(stderr, "analyze: hp %s, lp %s, selection %s, alpha %g, min-ulp %g, tie-eps %g\n",
                o.hp[0] ? o.hp : "fp32", o.lp[0] ? o.lp : "(the dump's policy, else the best-fitting preset)",
                tsc_select_format(&o.sel, sel, sizeof sel), o.rule.alpha, o.rule.min_ulp, o.tie_eps);
    }
    tsc_analysis_t *res;
    if (tsc_analysis_run(dump, outdir, &o, &res) != TSC_OK) return tsc_cli_analysis_failed(cmd, outdir, lock_fd, &o);
    if (worker) return 0;
    tsc_json_t j;
    tsc_json_init(&j);
    tsc_analysis_summary_json(res, &j);
    if ((rc = tsc_cli_summary_out(cmd, outdir, &j, json, lock_fd))) {
        tsc_analysis_free(res);
        return rc;
    }
    if (!json && !quiet) {
        int nflag = 0;
        printf("analysed %zu head%s (%d step%s; %lld rows each), hp %s, lp %s\n", res->n_heads, TSC_CLI_S(res->n_heads),
               res->n_steps, TSC_CLI_S(res->n_steps), res->n_heads ? (long long)res->heads[0].n_rows : 0LL, res->hp, res->lp);
        if (strcmp(res->lp_source, "--lp") != 0 && strcmp(res->lp_source, "the dump's policy") != 0)
            printf("lp: %s\n", res->lp_source);
        if (print_table(res, verbose ? 0 : (size_t)top) != 0) {
            tsc_analysis_free(res);
            return tsc_cli_fail(cmd, "out of memory");
        }
        for (size_t i = 0; i < res->n_heads; i++) nflag += !res->heads[i].skipped && res->heads[i].flagged;
        printf("%d flagged heads (family-wise false-positive bound %g, Bonferroni over %lld feature tests)\n", nflag,
               res->rule.alpha, (long long)res->n_feature_tests);
        for (size_t i = 0; i < res->n_layers_res; i++) {
            const tsc_layer_result_t *l = &res->layers[i];
            if (l->n_nonfinite)
                printf("step %lld layer %d: %lld non-finite weight values, first %s: their spectral norms are NaN\n",
                       l->step, l->layer, (long long)l->n_nonfinite, l->first_nonfinite);
        }
    }
    tsc_analysis_free(res);
    return 0;
}
