/* cmd_report.c: `tilescope report DIR [--log NAME=FILE ...] -o report.pdf` (render/tsc_report.h). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tsc_report.h"

const char tsc_usage_report[] =
    "usage: tilescope report DIR -o FILE.pdf [options]\n"
    "Writes the review report of an analysis folder (DIR/summary.json + DIR/analysis.h5 from `tilescope\n"
    "diagnose` or `tilescope analyze`): a multi-page PDF, a self-contained offline HTML beside it\n"
    "(FILE.html, figures embedded as data URIs) and a copy of summary.json beside it\n"
    "(FILE.summary.json without .pdf; none when FILE is in DIR). Contents:\n"
    "verdict and ranked at-risk heads, evidence map, per-layer/head table, every figure whose data\n"
    "exists, the bit-level rounding event, the mitigation's measured effect, the reproducing commands.\n"
    "The same input gives the same bytes (PDF dates: SOURCE_DATE_EPOCH, else 2000-01-01).\n"
    "  -o, --out FILE.pdf  output PDF (required; must end in .pdf)\n"
    "  --log NAME=FILE     a training log (CSV/TSV with a step column, or nanoGPT output); repeatable\n"
    "  --log-same-run      the logs come from the run the dump was captured in: only then can a diverging\n"
    "                      loss support the evidence map's loss link (fig1). Known without it when the first\n"
    "                      log is the log.csv of the train run folder holding the dump\n"
    "  --dump FILE         the dump for the figures that need raw tensors (default: as summary.json names it)\n"
    "  --no-html           do not write the HTML\n"
    "  --dpi N             resolution of the embedded figures (integer 50..600, default 150)\n"
    "  -q, --quiet         print only the output paths (no progress on stderr: by default a bar with\n"
    "                      the time left on a terminal, else a line every 10% of the figures)\n"
    "Exit: 0 written, 1 the job failed (the message names the file), 2 usage error.\n";

int tsc_cmd_report(int argc, char **argv) {
    const char *cmd = "report", *dir = NULL, *out = NULL, *logv[TSC_CLI_LIST_MAX];
    tsc_cli_list_t logs = TSC_CLI_LIST(logv);
    int quiet = 0, same_run = 0, rc;
    tsc_report_opts_t o;
    tsc_report_opts_init(&o);
    const tsc_cli_flag_t flags[] = {{"--out", "-o", TSC_CLI_STR, &out, 0, 0},
                                    {"--log", NULL, TSC_CLI_LIST, &logs, 0, 0},
                                    {"--log-same-run", NULL, TSC_CLI_ON, &same_run, 0, 0},
                                    {"--dump", NULL, TSC_CLI_STR, &o.dump, 0, 0},
                                    {"--no-html", NULL, TSC_CLI_OFF, &o.html, 0, 0},
                                    {"--dpi", NULL, TSC_CLI_WHOLE, &o.fig_dpi, 50, 600},
                                    {"--quiet", "-q", TSC_CLI_ON, &quiet, 0, 0}};
    if ((rc = tsc_cli_args(cmd, argc, argv, flags, TSC_CLI_NFLAGS(flags), NULL, NULL, 0, &dir))) return rc;
    if (!dir) return tsc_cli_usage_error(cmd, "which analysis folder? (DIR)");
    if (!out) return tsc_cli_usage_error(cmd, "-o FILE.pdf is required");
    size_t ol = strlen(out);
    if (ol < 5 || strcmp(out + ol - 4, ".pdf") != 0) return tsc_cli_usage_error(cmd, "-o %s: must end in .pdf", out);
    tsc_figure_src_t *src;
    if (tsc_figure_src_open_logs(dir, logs.v, logs.n, &src) != TSC_OK) return tsc_cli_fail(cmd, "%s", tsc_error_last());
    if (same_run) tsc_figure_src_set_same_run(src, 1); /* else as the source found it (log beside its dump) */
    if (!quiet) fprintf(stderr, "report: %s -> %s (%d logs, figures at %g dpi%s)\n", dir, out, logs.n, o.fig_dpi,
                        o.html ? ", with HTML" : "");
    tsc_report_info_t info;
    tsc_cli_progress_t pr;
    o.progress = tsc_cli_progress_init(&pr, cmd, quiet);
    tsc_status_t st = tsc_report_write(src, out, &o, &info);
    tsc_figure_src_close(src);
    if (st != TSC_OK) return tsc_cli_fail(cmd, "%s", tsc_error_last());
    printf("%s (%d pages, %d figures, %d without data)\n", out, info.n_pages, info.n_figures, info.n_skipped);
    if (info.html_path[0]) printf("%s\n", info.html_path);
    if (info.summary_path[0]) printf("%s\n", info.summary_path);
    return 0;
}
