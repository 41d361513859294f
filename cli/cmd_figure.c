/* cmd_figure.c: `tilescope figure figN [--from DIR] [--log NAME=FILE ...] -o FILE` (render/tsc_figure.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tsc_figure.h"
#include "tsc_json.h"

const char tsc_usage_figure[] =
    "usage: tilescope figure FIG --from DIR -o FILE [options]\n"
    "       tilescope figure fig2|fig7|fig10 --log NAME=FILE[:COLUMN] ... -o FILE\n"
    "       tilescope figure --list\n"
    "       tilescope figure attn|attn-grid SOURCE --layer L [--head H|all] [--step S] [--batch B]\n"
    "              [--rows A:B] [--policy P] -o FILE   (attention patterns of a dump, labelled with its\n"
    "              tokens when it holds them; docs/VIEW.md)\n"
    "       tilescope figure attn|attn-grid --from DIR --layer L ... -o FILE   (the same, of an analysis folder)\n"
    "Draws one of the paper's figures (docs/MECHANISM.md section 7) from an analysis folder (DIR/summary.json and\n"
    "DIR/analysis.h5, written by `tilescope analyze` or `tilescope diagnose`) and training logs. The output\n"
    "type follows the extension of FILE: .png, .svg or .pdf. Prints the figure's caption (what was\n"
    "plotted, from which file). FIG: fig1 (evidence map) ... fig13; fig5a/b/c, fig6a/b/c (fig5 = fig5a).\n"
    "  --from DIR          the analysis folder (required, except for the loss figures fig2, fig7, fig10)\n"
    "  -o, --out FILE      output file (required)\n"
    "  --log NAME=FILE[:COLUMN]  a training log: CSV/TSV with a step column, a TensorBoard or W&B CSV\n"
    "                      export, nanoGPT or llm.c output (docs/LOGS.md); COLUMN: the loss column to\n"
    "                      draw (a header name); repeatable. A warning when it does not cover the\n"
    "                      analysed steps\n"
    "  --log-same-run      the logs come from the run the dump was captured in: only then can a diverging\n"
    "                      loss support the evidence map's loss link (fig1). Known without it when the first\n"
    "                      log is the log.csv of the train run folder holding the dump\n"
    "  --dump FILE         the dump, for fig4, fig5b, fig6a, fig9 (default: the one summary.json names)\n"
    "  --step N            step (integer; default: the top at-risk head's step, else the last analysed)\n"
    "  --layer L, --head H layer and head, 0-based (integers; default: the top at-risk head)\n"
    "  --batch B, --token T, --feature I   probe of fig4, fig5b, fig6a (integers; default: the analysis'\n"
    "                      automatic probe; fig6b/fig6c always show the automatic probe the analysis traced)\n"
    "  --width IN, --height IN   figure size in inches (numbers; default per figure, 3.25 x 2.6)\n"
    "  --dpi N             PNG resolution (integer 30..1200, default 300)\n"
    "  --font PT           base text size in points (number 7..20, default 8)\n"
    "  --log-y             fig2, fig10: a logarithmic loss axis (default linear; fig7 is log-log)\n"
    "  --ylim LO:HI        fig2, fig7, fig10: the loss axis' limits, e.g. 2:6 (default: the data's range)\n"
    "  --ulp               fig5c: the mean error in ULPs of each element (default: value units, as a ULP\n"
    "                      mean is dominated by near-zero outputs)\n"
    "  --json              print {id, file, caption, layer, head, step, marks} as JSON (marks: what the figure\n"
    "                      points out: fig5c the tallest bar's feature; fig6b the jump's key; fig6c the first and\n"
    "                      last key shown and the jump's key)\n"
    "  --list              list the figures and exit\n"
    "A --step, --layer, --head, --batch, --token or --feature outside what the analysis covers is an\n"
    "error that names the valid values (exit 2).\n"
    "Exit: 0 written, 1 the data is missing or the job failed (the message names what), 2 usage error.\n";

void tsc_cli_warn_log_cover(const char *cmd, const tsc_figure_src_t *src) {
    for (int i = 0; i < tsc_figure_src_n_logs(src); i++) {
        tsc_log_cover_t cv;
        if (tsc_figure_src_log_cover(src, i, &cv) != TSC_OK) {
            tsc_error_clear();
            return;
        }
        const tsc_log_t *lg = tsc_figure_src_log(src, i);
        if (cv.n_outside)
            fprintf(stderr, "tilescope %s: warning: log '%s' (%s) has values for steps %g..%g; %zu of the %zu analysed "
                            "steps lie outside (first: step %lld), so it does not cover the analysed steps\n",
                    cmd, lg->name, lg->path, cv.first, cv.last, cv.n_outside, cv.n_steps, cv.first_outside);
    }
}

int tsc_cmd_figure(int argc, char **argv) {
    if (argc > 0 && (strcmp(argv[0], "attn") == 0 || strcmp(argv[0], "attn-grid") == 0))
        return tsc_cmd_figure_attn(argc - 1, argv + 1, strcmp(argv[0], "attn-grid") == 0);
    const char *cmd = "figure", *fig = NULL, *dir = NULL, *out = NULL, *ylim = NULL, *logv[TSC_CLI_LIST_MAX];
    tsc_cli_list_t logs = TSC_CLI_LIST(logv);
    int json = 0, same_run = 0, list = 0, rc;
    tsc_figure_opts_t o;
    tsc_figure_opts_init(&o);
    const tsc_cli_flag_t flags[] = {{"--from", NULL, TSC_CLI_STR, &dir, 0, 0},
                                    {"--out", "-o", TSC_CLI_STR, &out, 0, 0},
                                    {"--log", NULL, TSC_CLI_LIST, &logs, 0, 0},
                                    {"--log-same-run", NULL, TSC_CLI_ON, &same_run, 0, 0},
                                    {"--dump", NULL, TSC_CLI_STR, &o.dump, 0, 0},
                                    {"--step", NULL, TSC_CLI_LLONG, &o.step, 0, 99999999},
                                    {"--layer", NULL, TSC_CLI_INT, &o.layer, 0, 100000000},
                                    {"--head", NULL, TSC_CLI_INT, &o.head, 0, 100000000},
                                    {"--batch", NULL, TSC_CLI_INT, &o.batch, 0, 100000000},
                                    {"--token", NULL, TSC_CLI_INT, &o.token, 0, 100000000},
                                    {"--feature", NULL, TSC_CLI_INT, &o.feature, 0, 100000000},
                                    {"--width", NULL, TSC_CLI_DOUBLE, &o.width_in, 1, 40},
                                    {"--height", NULL, TSC_CLI_DOUBLE, &o.height_in, 1, 40},
                                    {"--dpi", NULL, TSC_CLI_WHOLE, &o.dpi, 30, 1200},
                                    {"--font", NULL, TSC_CLI_DOUBLE, &o.font_pt, 7, 20},
                                    {"--json", NULL, TSC_CLI_ON, &json, 0, 0},
                                    {"--ulp", NULL, TSC_CLI_ON, &o.ulp, 0, 0},
                                    {"--log-y", NULL, TSC_CLI_ON, &o.log_y, 0, 0},
                                    {"--ylim", NULL, TSC_CLI_STR, &ylim, 0, 0},
                                    {"--list", NULL, TSC_CLI_ON, &list, 0, 0}};
    if ((rc = tsc_cli_args(cmd, argc, argv, flags, TSC_CLI_NFLAGS(flags), NULL, NULL, 0, &fig))) return rc;
    if (list) {
        for (int k = 0; k < tsc_figure_count(); k++) printf("  %-6s %s\n", tsc_figure_id(k), tsc_figure_describe(k));
        printf("  attn   one head's attention pattern P from a dump (figure attn SOURCE|--from DIR --layer L --head H; docs/VIEW.md)\n"
               "  attn-grid  every head of a layer, one row per GQA group (figure attn-grid SOURCE --layer L)\n");
        return 0;
    }
    if (!fig) return tsc_cli_usage_error(cmd, "which figure? (FIG, e.g. fig3; --list shows them)");
    if (ylim) {
        char *end = NULL, *mid = NULL;
        o.ylo = strtod(ylim, &mid);
        if (mid != ylim && *mid == ':') o.yhi = strtod(mid + 1, &end);
        if (mid == ylim || *mid != ':' || end == mid + 1 || *end || !isfinite(o.ylo) || !isfinite(o.yhi) || !(o.yhi > o.ylo))
            return tsc_cli_usage_error(cmd, "--ylim expects LO:HI with LO < HI (e.g. 2:6), found '%s'", ylim);
        if (o.log_y && !(o.ylo > 0))
            return tsc_cli_usage_error(cmd, "--ylim %s with --log-y: a logarithmic axis needs LO > 0", ylim);
    }
    if (!tsc_figure_canonical(fig)) return tsc_cli_usage_error(cmd, "unknown figure '%s' (--list shows them)", fig);
    int logs_only = !strcmp(tsc_figure_canonical(fig), "fig2") || !strcmp(tsc_figure_canonical(fig), "fig7") ||
                    !strcmp(tsc_figure_canonical(fig), "fig10");
    if (!dir && !(logs_only && logs.n))
        return tsc_cli_usage_error(cmd, "--from DIR is required%s", logs_only ? " (or at least one --log)" : "");
    if (!out) return tsc_cli_usage_error(cmd, "-o FILE is required");
    tsc_image_format_t fmt;
    if (tsc_image_format_from_path(out, &fmt) != TSC_OK)
        return tsc_cli_usage_error(cmd, "-o %s: the extension must be .png, .svg or .pdf", out);
    tsc_figure_src_t *src;
    if (tsc_figure_src_open_logs(dir, logs.v, logs.n, &src) != TSC_OK) return tsc_cli_fail(cmd, "%s", tsc_error_last());
    /* a selection outside the analysis is a usage error (exit 2), refused before any warning or work */
    tsc_status_t st = tsc_figure_check(src, &o);
    if (st != TSC_OK) {
        rc = st == TSC_ERR_ARG ? 2 : 1;
        tsc_cli_fail(cmd, "%s", tsc_error_last());
        tsc_figure_src_close(src);
        return rc;
    }
    tsc_cli_warn_log_cover(cmd, src);
    if (same_run) tsc_figure_src_set_same_run(src, 1); /* else as the source found it (log beside its dump) */
    tsc_figure_info_t info;
    st = tsc_figure_write(src, fig, &o, out, fmt, &info);
    tsc_figure_src_close(src);
    if (st != TSC_OK) return tsc_cli_fail(cmd, "%s: %s", out, tsc_error_last());
    if (json) {
        tsc_json_t j;
        tsc_json_init(&j);
        tsc_figure_info_json(&info, out, &j);
        if (tsc_json_status(&j) != TSC_OK) { tsc_json_free(&j); return tsc_cli_fail(cmd, "out of memory"); }
        puts(tsc_json_text(&j, NULL));
        tsc_json_free(&j);
    } else {
        printf("%s: %s\n", out, info.caption);
    }
    return 0;
}
