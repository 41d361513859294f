/* cmd_diagnose.c: `tilescope diagnose DUMP -o DIR`: the Appendix F workflow (analyze/tsc_diagnose.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "tsc_attention.h"
#include "tsc_comm.h"
#include "tsc_diagnose.h"
#include "tsc_dump.h"

const char tsc_usage_diagnose[] =
    "usage: tilescope diagnose DUMP -o DIR [options]\n"
    "Runs the analysis (see `tilescope help analyze`), then for each at-risk layer/head: attribution by\n"
    "substitution (each low-precision stage of lp raised to FP32 in turn, and delta from an FP32 O),\n"
    "the accumulation verdict, the largest rounding event at the head's probe, and the mitigation\n"
    "(lp+stable, beta = 2 and a sweep, with what each beta did) and the kernel options that remove the\n"
    "bias (stable fix, delta from an FP32 O, delta = rowsum(dP o P), FP32 O). Writes DIR/analysis.h5 and DIR/summary.json; prints one line per\n"
    "at-risk head (evidence, verdict, recommendation), ranked by the accumulated delta bias. First it\n"
    "states how well lp's replay reproduces the dump's captured O on the first selected step (the\n"
    "fit, see `tilescope help fit`) and warns below 99%: the diagnosis may then not describe the run.\n"
    "  -o, --out DIR       output folder, created if missing (required)\n"
    "  --hp POLICY, --lp POLICY, --select SPEC, --steps/--layers/--heads/--batches SET,\n"
    "  --alpha A, --min-ulp U, --tie-eps E, --terms N, --run-id HEX   as for analyze\n"
    "  --betas B1,B2,...   the beta sweep of +stable (numbers in [1, 64], default 1.5,2,4,8)\n"
    "  --eps E             epsilon of +stable (number, default 1e-3)\n"
    "  --max-heads N       at-risk heads examined in depth (integer, default 16)\n"
    "  --max-steps N       steps replayed per head, those with the largest bias (integer, default 4; 0 all)\n"
    "  --json              print summary.json to stdout instead of the text\n"
    "  --top N             at-risk heads printed, most at risk first (integer, default 10)\n"
    "  -v, --verbose       print every at-risk head (summary.json always lists every one), and on stderr\n"
    "                      the attention work done (runs, heads, FLOPs by formula)\n"
    "  -q, --quiet         no configuration line and no progress on stderr\n"
    "Progress (with the time left) goes to stderr: a bar on a terminal, else a line every 10%.\n"
    "Under a launcher (mpirun -n N tilescope diagnose ...) the processes share the analysis' head\n"
    "records and the examination of the at-risk heads; process 0 writes analysis.h5 and summary.json,\n"
    "byte for byte those of one process (docs/DISTRIBUTED.md).\n"
    "Below 99% on a BF16/FP16/FP8 O the text ends in \"the capture or the preset is wrong\" and the likely\n"
    "causes (on stderr with --json) instead of a verdict on the run (an FP32 O's bits follow the kernel's\n"
    "summation order: there the warning alone is printed).\n"
    "Exit: 0 done (whether or not anything is at risk), 1 the job failed, 2 usage error, 3 done, but lp's\n"
    "replay reproduces less than 99% of the captured BF16/FP16/FP8 O bit for bit: the capture or the preset\n"
    "is wrong.\n";

/* 1 when the captured O of the fit's step is FP32 or FP64: its bits follow the summation order of the
 * kernel, which no preset fixes, so a bit-identical share below 99% is no evidence against the capture;
 * BF16/FP16/FP8 O is rounded once at the end, and a replay of the right kernel reproduces its bits. */
static int o_is_wide(const char *dump, long long step) {
    tsc_dump_t *d;
    int wide = 0, layers[1], n = 0;
    tsc_dump_dataset_info_t info;
    if (tsc_dump_open(&d, dump) != TSC_OK) {
        tsc_error_clear();
        return 0; /* the diagnosis opened it; a second open failing says nothing of O */
    }
    if (tsc_dump_layers(d, step, layers, 1, &n) == TSC_OK && n > 0 &&
        tsc_dump_dataset_info(d, step, layers[0], "o", &info) == TSC_OK)
        wide = info.dtype == TSC_FMT_FP32 || info.dtype == TSC_FMT_FP64;
    tsc_error_clear();
    tsc_dump_close(d);
    return wide;
}

/* Printed instead of a verdict on the run when the fit is poor (TSC_CLI_EXIT_POOR_FIT). */
static void poor_fit(FILE *out, const tsc_diagnosis_t *dg, const char *dump) {
    char a[32], b[32];
    fprintf(out, "the capture or the preset is wrong: replay under %s reproduces %s of the captured O bit for bit "
            "(%s within 1 ULP, at most %g ULP apart) on step %lld, below 99%%, so nothing here describes the run. "
            "Likely causes: the kernel that ran is not the one modelled (`tilescope fit %s` ranks the presets; "
            "--lp chooses one; a backend or custom kernel no preset models); the capture's layout (k, v of "
            "grouped-query attention expanded by tiling, k.repeat, and stored as if by repeat_interleave; heads or "
            "tokens transposed); a wrong softmax_scale or causal flag in the dump; q, k, v and o taken from "
            "different calls or steps.\n",
            dg->an->lp, tsc_fit_percent(dg->fit.identical, a, sizeof a), tsc_fit_percent(dg->fit.within1, b, sizeof b),
            dg->fit.max_ulp, dg->fit_step, dump);
}

/* The analysis flags and --betas B1,B2,... */
static int diagnose_flag(const char *cmd, int argc, char **argv, int *i, void *ctx) {
    tsc_diagnose_opts_t *o = ctx;
    const char *v = NULL;
    const tsc_cli_flag_t f[] = {{"--betas", NULL, TSC_CLI_STR, &v, 0, 0}};
    int rc = tsc_cli_analysis_flag(cmd, argc, argv, i, &o->an);
    if (rc < 0) rc = tsc_cli_flag(cmd, argc, argv, i, f, TSC_CLI_NFLAGS(f));
    if (rc || !v) return rc;
    char buf[256];
    if (strlen(v) >= sizeof buf) return tsc_cli_usage_error(cmd, "--betas: at most %zu characters", sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", v);
    o->n_betas = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (o->n_betas >= TSC_DIAG_MAX_BETAS)
            return tsc_cli_usage_error(cmd, "--betas takes at most %d values", TSC_DIAG_MAX_BETAS);
        if ((rc = tsc_cli_parse_double(cmd, "--betas", tok, 1, 64, &o->betas[o->n_betas++]))) return rc;
    }
    if (o->n_betas == 0) return tsc_cli_usage_error(cmd, "--betas needs at least one value");
    return 0;
}

int tsc_cmd_diagnose(int argc, char **argv) {
    const char *cmd = "diagnose", *dump = NULL, *outdir = NULL;
    int json = 0, quiet = 0, verbose = 0, top = 10, rc, lock_fd;
    tsc_diagnose_opts_t o;
    tsc_diagnose_opts_init(&o);
    o.an.census = 0;   /* the census is analyze's; diagnose looks at the largest event per head */
    o.an.identity = 0; /* identity (1) is analyze's; diagnose's verdict uses the rank-1 terms */
    const tsc_cli_flag_t flags[] = {{"--out", "-o", TSC_CLI_STR, &outdir, 0, 0},
                                    {"--eps", NULL, TSC_CLI_DOUBLE, &o.eps, 0, 1},
                                    {"--max-heads", NULL, TSC_CLI_INT, &o.max_heads, 0, 1000000},
                                    {"--max-steps", NULL, TSC_CLI_INT, &o.max_steps, 0, 1000000},
                                    {"--json", NULL, TSC_CLI_ON, &json, 0, 0},
                                    {"--top", NULL, TSC_CLI_INT, &top, 1, 1000000},
                                    {"--verbose", "-v", TSC_CLI_ON, &verbose, 0, 0},
                                    {"--quiet", "-q", TSC_CLI_ON, &quiet, 0, 0}};
    if ((rc = tsc_cli_args(cmd, argc, argv, flags, TSC_CLI_NFLAGS(flags), diagnose_flag, &o, 1, &dump))) return rc;
    if ((rc = tsc_cli_analysis_ready(cmd, dump, outdir, quiet, &o.an, &lock_fd))) return rc;
    const int worker = o.an.comm->rank != 0; /* a process of a launcher's job other than rank 0: no output */
    if (!quiet && !worker) {
        char sel[512];
        fprintf(stderr, "diagnose: dump %s -> %s; hp %s, lp %s, selection %s, stable eps %g, %d betas\n", dump,
                outdir, o.an.hp[0] ? o.an.hp : "fp32", o.an.lp[0] ? o.an.lp : "(the dump's policy, else the best-fitting preset)",
                tsc_select_format(&o.an.sel, sel, sizeof sel), o.eps, o.n_betas);
    }
    tsc_diagnosis_t *dg;
    if (tsc_diagnose_run(dump, outdir, &o, &dg) != TSC_OK) return tsc_cli_analysis_failed(cmd, outdir, lock_fd, &o.an);
    if (worker) return 0;
    tsc_json_t j;
    tsc_json_init(&j);
    tsc_diagnose_summary_json(dg, &j);
    if ((rc = tsc_cli_summary_out(cmd, outdir, &j, json, lock_fd))) {
        tsc_diagnose_free(dg);
        return rc;
    }
    const int poor = dg->fit_checked && tsc_fit_warning(dg->fit.identical) != NULL && !o_is_wide(dump, dg->fit_step);
    if (!json) {
        const tsc_analysis_t *a = dg->an;
        printf("diagnose %s: hp %s, lp %s; %zu head record%s over %d step%s; %zu of %zu heads at risk "
               "(flags: Bonferroni t-test of delta contributions, family-wise false-positive bound %g, |bias| >= %g ulp)\n",
               dump, a->hp, a->lp, a->n_heads, TSC_CLI_S(a->n_heads), a->n_steps, TSC_CLI_S(a->n_steps), dg->n,
               a->n_pooled, a->rule.alpha, a->rule.min_ulp);
        if (strcmp(a->lp_source, "--lp") != 0 && strcmp(a->lp_source, "the dump's policy") != 0)
            printf("lp: %s\n", a->lp_source);
        char line[2048], ev[2048];
        printf("%s\n", tsc_fit_sentence(a->lp, dg->fit_checked, dg->fit.identical, line, sizeof line));
        if (dg->fit_checked && tsc_fit_warning(dg->fit.identical)) printf("%s\n", tsc_fit_warning(dg->fit.identical));
        if (!dg->fit_checked && !strstr(dg->fit_note, "no dataset 'o'")) printf("  (%s)\n", dg->fit_note);
        if (dg->check) printf("check of O and LSE (step %lld): %s\n", dg->check->first_step,
                              tsc_check_sentence(dg->check, line, sizeof line));
        else if (!strstr(dg->check_note, "no dataset 'o'")) printf("check of O and LSE: not run (%s)\n", dg->check_note);
        size_t shown = verbose || (size_t)top >= dg->n ? dg->n : (size_t)top;
        for (size_t i = 0; i < shown; i++) {
            printf("%zu. %s\n", i + 1, tsc_diagnose_line(dg, i, line, sizeof line));
            fputs(tsc_diagnose_event_text(dg, i, ev, sizeof ev), stdout);
        }
        if (shown < dg->n)
            printf("(%zu of %zu at-risk heads shown, most at risk first; %zu omitted: --verbose prints all, --top N "
                   "more, %s/summary.json has every one)\n", shown, dg->n, dg->n - shown, outdir);
        if (dg->n == 0 && !poor) printf("nothing at risk: no head shows a significant bias\n");
        if (dg->n > 0) printf("%s\n", tsc_diagnose_steps_line(dg, line, sizeof line));
        if (dg->sweep_explanation[0]) printf("what the beta sweep did: %s\n", dg->sweep_explanation);
    }
    if (poor) poor_fit(json ? stderr : stdout, dg, dump);
    if (verbose) {
        fflush(stdout); /* the report first, then this line, also when both go to one pipe */
        const tsc_attn_work_t w = tsc_attn_work();
        fprintf(stderr, "attention work of this process: %lld runs, %lld heads forward, %lld of them backward "
                        "(delta or gradients); %.2f GFLOP (FP32, counted from the formulas)\n",
                (long long)w.calls, (long long)w.forwards, (long long)w.backwards, w.flops / 1e9);
    }
    tsc_diagnose_free(dg);
    return poor ? TSC_CLI_EXIT_POOR_FIT : 0;
}
