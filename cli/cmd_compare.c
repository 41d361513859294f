/* cmd_compare.c: `tilescope compare DIR_A DIR_B -o OUT` (render/tsc_runcmp.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"
#include "tsc_escape.h"
#include "tsc_runcmp.h"

const char tsc_usage_compare[] =
    "usage: tilescope compare DIR_A DIR_B -o OUT [--label A=NAME] [--label B=NAME] [--log A=FILE[:COLUMN] ...]\n"
    "Compares two analysis folders (written by analyze, diagnose or demo) of one model: before and after a\n"
    "fix, BF16 vs FP32. The heads are matched by layer and head; the folders must have the same shape.\n"
    "Writes OUT/compare.md (per head: the accumulated bias of A and B, the change B - A, and the flags\n"
    "that appeared or disappeared, largest change first), OUT/compare.json (every head), and the shared\n"
    "figures OUT/compare_bias.png, OUT/compare_spectral.png and, with logs, OUT/compare_loss.png.\n"
    "  -o, --out OUT       output folder, created if missing (required)\n"
    "  --label A=NAME, --label B=NAME   the runs' names in the table and figures (default A, B)\n"
    "  --log A=FILE[:COLUMN], --log B=FILE[:COLUMN]   a training log of run A or B (any format of\n"
    "                      `tilescope figure --log`, docs/LOGS.md); repeatable. A warning when it does\n"
    "                      not cover that run's analysed steps\n"
    "  --rows N            rows of compare.md (integer 1..1000, default 20)\n"
    "  --dpi N             PNG resolution (integer 30..1200, default 200)\n"
    "  -q, --quiet         print nothing on success\n"
    "One compare writes OUT at a time: a second one into it fails at once.\n"
    "Exit: 0 written, 1 the job failed (incompatible folders, unreadable files, OUT being written by\n"
    "another compare), 2 usage error.\n";

typedef struct {
    const char *dir[2];           /* DIR_A, DIR_B */
    const char *label[2];
    const char *logv[2][TSC_CLI_LIST_MAX];
    tsc_cli_list_t logs[2];       /* FILE[:COLUMN] per side, in logv */
    char spec[TSC_CLI_LIST_MAX][1200]; /* "LABEL=FILE" for the shared loss figure */
} compare_args_t;

/* --label A=NAME and --log A=FILE: which side (A or B) and the value after '='. */
static int side_of(const char *cmd, const char *flag, const char *v, const char **rest) {
    if ((v[0] == 'A' || v[0] == 'a' || v[0] == 'B' || v[0] == 'b') && v[1] == '=' && v[2]) {
        *rest = v + 2;
        return v[0] == 'A' || v[0] == 'a' ? 0 : 1;
    }
    tsc_cli_usage_error(cmd, "%s '%s': expected A=... or B=...", flag, v);
    return -1;
}

/* --label and --log, whose value names a side, and the two folders (DIR_A, then DIR_B). */
static int compare_flag(const char *cmd, int argc, char **argv, int *i, void *ctx) {
    compare_args_t *c = ctx;
    const char *label = NULL, *log = NULL, *rest;
    const tsc_cli_flag_t f[] = {{"--label", NULL, TSC_CLI_STR, &label, 0, 0}, {"--log", NULL, TSC_CLI_STR, &log, 0, 0}};
    if (argv[*i][0] != '-') return tsc_cli_operand(cmd, argv[*i], 0, &c->dir[c->dir[0] != NULL]);
    int rc = tsc_cli_flag(cmd, argc, argv, i, f, TSC_CLI_NFLAGS(f));
    if (rc) return rc;
    int s = side_of(cmd, label ? "--label" : "--log", label ? label : log, &rest);
    if (s < 0) return 2;
    if (label) {
        if (strlen(rest) > 60) return tsc_cli_usage_error(cmd, "--label: a name of at most 60 bytes");
        c->label[s] = rest;
        return 0;
    }
    tsc_cli_list_t *l = &c->logs[s];
    if (l->n + c->logs[!s].n >= TSC_CLI_LIST_MAX) return tsc_cli_usage_error(cmd, "--log: at most %d", TSC_CLI_LIST_MAX);
    l->v[l->n++] = rest;
    return 0;
}

/* The logs of both sides in one source, each named after its run's label. */
static tsc_status_t open_logs(compare_args_t *c, tsc_figure_src_t **out) {
    const char *specs[TSC_CLI_LIST_MAX];
    int n = 0;
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < c->logs[s].n; k++, n++) {
            snprintf(c->spec[n], sizeof c->spec[n], "%s=%s", c->label[s], c->logs[s].v[k]);
            specs[n] = c->spec[n];
        }
    return tsc_figure_src_open_logs(NULL, specs, n, out);
}

int tsc_cmd_compare(int argc, char **argv) {
    const char *cmd = "compare", *out = NULL;
    compare_args_t c;
    memset(&c, 0, sizeof c);
    c.label[0] = "A", c.label[1] = "B";
    for (int s = 0; s < 2; s++) c.logs[s] = (tsc_cli_list_t)TSC_CLI_LIST(c.logv[s]);
    int quiet = 0, rc;
    tsc_runcmp_opts_t o;
    tsc_runcmp_opts_init(&o);
    const tsc_cli_flag_t flags[] = {{"--out", "-o", TSC_CLI_STR, &out, 0, 0},
                                    {"--rows", NULL, TSC_CLI_INT, &o.max_rows, 1, 1000},
                                    {"--dpi", NULL, TSC_CLI_WHOLE, &o.dpi, 30, 1200},
                                    {"--quiet", "-q", TSC_CLI_ON, &quiet, 0, 0}};
    if ((rc = tsc_cli_args(cmd, argc, argv, flags, TSC_CLI_NFLAGS(flags), compare_flag, &c, 0, NULL))) return rc;
    const char *const *dir = c.dir;
    if (!dir[0] || !dir[1]) return tsc_cli_usage_error(cmd, "two analysis folders are needed (DIR_A DIR_B)");
    if (!out) return tsc_cli_usage_error(cmd, "-o OUT is required");
    if (strlen(out) > 1000) return tsc_cli_usage_error(cmd, "-o: path too long");
    if (strcmp(c.label[0], c.label[1]) == 0) return tsc_cli_usage_error(cmd, "--label: A and B need different names");
    o.label_a = c.label[0], o.label_b = c.label[1];
    tsc_figure_src_t *src[2] = {NULL, NULL}, *logs = NULL;
    tsc_status_t st = TSC_OK;
    for (int s = 0; s < 2 && st == TSC_OK; s++)
        if ((st = tsc_figure_src_open_logs(dir[s], c.logs[s].v, c.logs[s].n, &src[s])) == TSC_OK)
            tsc_cli_warn_log_cover(cmd, src[s]);
    if (st == TSC_OK) st = open_logs(&c, &logs);
    int made = 0;
    if (st == TSC_OK) {
        made = access(out, F_OK) != 0;
        if (tsc_cli_make_dir(out)) st = tsc_error_set(TSC_ERR_IO, "%s: cannot create the folder: %s", out, strerror(errno));
    }
    tsc_runcmp_info_t info;
    if (st == TSC_OK) st = tsc_runcmp_write(src[0], src[1], logs, &o, out, &info);
    for (int s = 0; s < 2; s++) tsc_figure_src_close(src[s]);
    tsc_figure_src_close(logs);
    /* what is printed names folders and files whoever sent them named, and errors quote their
     * contents: every such string goes to the terminal through tsc_esc_term (control bytes as \xNN) */
    tsc_strbuf_t e[5];
    for (int k = 0; k < 5; k++) tsc_strbuf_init(&e[k]);
    if (st != TSC_OK) {
        rc = tsc_cli_fail(cmd, "%s", tsc_esc_term_str(&e[0], tsc_error_last()));
        if (made) rmdir(out); /* only when empty: a failed job leaves no empty folder */
    } else if (!quiet) {
        printf("compare %s (%s) vs %s (%s): %d heads matched (%d only in A, %d only in B); flags appeared on %d, "
               "disappeared from %d\n", tsc_esc_term_str(&e[0], dir[0]), tsc_esc_term_str(&e[1], o.label_a),
               tsc_esc_term_str(&e[2], dir[1]), tsc_esc_term_str(&e[3], o.label_b), info.n_matched, info.n_only_a,
               info.n_only_b, info.n_appeared, info.n_gone);
        const char *o_esc = tsc_esc_term_str(&e[0], out);
        printf("wrote %s/compare.md, %s/compare.json and %d figures%s%s\n", o_esc, o_esc, info.n_figures,
               info.loss_note[0] ? "; no loss figure: " : "", tsc_esc_term_str(&e[1], info.loss_note));
    }
    for (int k = 0; k < 5; k++) tsc_strbuf_free(&e[k]);
    return st != TSC_OK ? rc : 0;
}
