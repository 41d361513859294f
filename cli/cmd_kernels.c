/* cmd_kernels.c: `tilescope kernels [DUMP]`: the per-kernel bias table (analyze/tsc_kernels.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "tsc_kernels.h"
#include "tsc_synth.h"

const char tsc_usage_kernels[] =
    "usage: tilescope kernels [DUMP] [--policy P ...] [--no-stable] [--steps SET] [--layers SET] [--heads SET]\n"
    "                         [--batches SET] [--all-steps] [--json] [--markdown] [--quiet]\n"
    "\n"
    "Replays one set of inputs under every preset (the kernels it models) and compares each with an FP64\n"
    "replay of the same inputs: which kernels carry the paper's bias, as modelled. Without DUMP the input is\n"
    "built in: a Llama-style layer with grouped-query attention, a sink key and rows with tied maxima\n"
    "(`tilescope synth --shape llama-gqa --layers 1 --steps 0`, seed 1).\n"
    "\n"
    "  --policy P       a policy to measure (repeatable); default every preset but fp64 (the reference)\n"
    "  --no-stable      skip the +stable:beta=2,eps=1e-3 column\n"
    "  --steps/--layers/--heads/--batches SET   the selection (default all); only its first step unless\n"
    "                   --all-steps\n"
    "  --json           one JSON object (docs/FORMAT.md section 2.2)\n"
    "  --markdown       the table as Markdown (docs/KERNELS.md is this output for the built-in input)\n"
    "  -q, --quiet      no progress on stderr\n"
    "\n"
    "Columns (analyze/tsc_kernels.h has the definitions): O bias = mean signed error of O in ULPs of the\n"
    "kernel's O format, per query row (features below 2^-10 of the row's largest |O| left out), with its\n"
    "t-statistic over rows; delta bias = the error of delta = rowsum(dO * O) in ULPs of the O format at the\n"
    "size of its terms (needs dO); tied -> events = rows with two or more keys at the row max, and of them\n"
    "the rows whose P-bar V accumulation has a rounding event (significand overflow, round bit, sticky bits\n"
    "in the kernel's P-bar V format); +stable: the same under Algorithm 3.\n"
    "Exit status: 0 done, 1 the dump cannot be read or lacks q, k, v, 2 usage error.\n";

/* "+0.012 (t +2.5)", or "-". */
static const char *bias_text(const tsc_kernels_bias_t *b, char *s, size_t cap) {
    if (!b->n || isnan(b->mean)) snprintf(s, cap, "-");
    else if (isnan(b->t)) snprintf(s, cap, "%+.3f", b->mean);
    else snprintf(s, cap, "%+.3f (t %+.1f)", b->mean, b->t);
    return s;
}

/* "h1 f20: -0.41 (t -9.3)" (the layer too when the table covers several). */
static const char *worst_text(const tsc_kernels_feature_t *w, int layers, char *s, size_t cap) {
    char b[48];
    if (w->feature < 0) snprintf(s, cap, "-");
    else if (layers > 1) snprintf(s, cap, "L%d h%d f%d: %s", w->layer, w->head, w->feature, bias_text(&w->bias, b, sizeof b));
    else snprintf(s, cap, "h%d f%d: %s", w->head, w->feature, bias_text(&w->bias, b, sizeof b));
    return s;
}

/* "224 / 96 / 96": tied rows, with P-bar = 1 at the ties, with a rounding event. */
static const char *ties_text(const tsc_kernels_stats_t *st, char *s, size_t cap) {
    snprintf(s, cap, "%lld / %lld / %lld", (long long)st->tied_rows, (long long)st->pbar_one_rows,
             (long long)st->event_rows);
    return s;
}

static void cell(int md, int width, const char *text) {
    if (md) printf(" %s |", text);
    else printf("  %-*s", width, text);
}

static void print_table(const tsc_kernels_t *k, const char *what, int md) {
    char a[96], b[96], c[96], e[96], f[96], g[96];
    const int L = k->n_pairs;
    if (md) {
        printf("Input: %s; step %lld, %d layer(s), %d heads x %d batch rows, T = %d, D = %d%s; every kernel against "
               "an FP64 replay of the same inputs.\n\n", what, k->first_step, k->n_pairs, k->n_heads, k->n_batches,
               k->T, k->D, k->causal ? ", causal" : "");
        printf("| kernel (preset) | O | O bias, rows [ULP] | most biased feature [ULP] |%s tied / P̄=1 / event rows "
               "| +stable: most biased feature | +stable: tied / P̄=1 / event rows |\n", k->has_do ? " δ bias [ULP] |" : "");
        printf("| --- | --- | --- | --- |%s --- | --- | --- |\n", k->has_do ? " --- |" : "");
    } else {
        printf("kernels: %s; step %lld, %d (step, layer) pairs, %d heads x %d batch rows, T %d, D %d%s; every kernel "
               "against an FP64 replay of the same inputs\n", what, k->first_step, k->n_pairs, k->n_heads,
               k->n_batches, k->T, k->D, k->causal ? ", causal" : "");
        printf("%-18s %-9s", "kernel", "O");
        cell(0, 17, "O bias, rows");
        cell(0, 26, "most biased feature");
        if (k->has_do) cell(0, 17, "delta bias");
        cell(0, 17, "tied/P=1/events");
        cell(0, 26, "+stable: most biased");
        printf("  %s\n", "+stable: tied/P=1/events");
    }
    for (int i = 0; i < k->n_rows; i++) {
        const tsc_kernels_row_t *r = &k->rows[i];
        if (md) printf("| `%s` | %s |", r->name, r->o_format);
        else printf("%-18s %-9s", r->name, r->o_format);
        cell(md, 17, bias_text(&r->plain.o, a, sizeof a));
        cell(md, 26, worst_text(&r->plain.worst, L, b, sizeof b));
        if (k->has_do) cell(md, 17, bias_text(&r->plain.delta, c, sizeof c));
        cell(md, 17, ties_text(&r->plain, e, sizeof e));
        if (r->stable_ok) {
            cell(md, 26, worst_text(&r->stable.worst, L, f, sizeof f));
            if (md) cell(md, 0, ties_text(&r->stable, g, sizeof g));
            else printf("  %s", ties_text(&r->stable, g, sizeof g));
        } else {
            cell(md, 26, r->stable_why[0] ? "refused (below)" : "-");
            if (md) cell(md, 0, "-");
            else printf("  -");
        }
        printf("\n");
    }
    /* the most biased feature is the largest |t| of many: say what chance alone gives */
    const double nf = (double)k->n_pairs * k->n_batches * k->n_heads * k->D;
    printf(md ? "\nMost biased feature: of %.0f (layer, head, feature) series, the one with the largest |t| over the "
                "rows; with no bias at all the largest of %.0f t-statistics is about %.1f.\n"
              : "most biased feature: the largest |t| of %.0f (layer, head, feature) series over the rows; with no "
                "bias the largest of %.0f is about %.1f\n", nf, nf, sqrt(2 * log(nf > 1 ? nf : 2)));
    int refused = 0;
    for (int i = 0; i < k->n_rows; i++) refused += k->rows[i].stable_why[0] != 0;
    if (refused) printf(md ? "\n" : "");
    for (int i = 0; i < k->n_rows; i++)
        if (k->rows[i].stable_why[0])
            printf(md ? "- `%s+stable` refused: %s\n" : "note: %s+stable refused: %s\n", k->rows[i].name,
                   k->rows[i].stable_why);
}

/* The flags: 0 parsed, 2 after a usage error. */
static int parse_args(const char *cmd, int argc, char **argv, tsc_kernels_opts_t *o, const char **pol, int *json,
                      int *md, int *quiet) {
    tsc_cli_list_t pols = {pol, 0, argc};
    int no_stable = 0;
    const tsc_cli_flag_t flags[] = {{"--policy", NULL, TSC_CLI_LIST, &pols, 0, 0},
                                    {"--no-stable", NULL, TSC_CLI_ON, &no_stable, 0, 0},
                                    TSC_CLI_SELECT_FLAGS(&o->sel),
                                    {"--all-steps", NULL, TSC_CLI_ON, &o->all_steps, 0, 0},
                                    {"--json", NULL, TSC_CLI_ON, json, 0, 0},
                                    {"--markdown", NULL, TSC_CLI_ON, md, 0, 0},
                                    {"--quiet", "-q", TSC_CLI_ON, quiet, 0, 0}};
    int rc = tsc_cli_args(cmd, argc, argv, flags, TSC_CLI_NFLAGS(flags), NULL, NULL, 1, &o->dump_path);
    o->n_policies = pols.n;
    o->with_stable = !no_stable;
    if (rc) return rc;
    if (*json && *md) return tsc_cli_usage_error(cmd, "--json and --markdown: choose one");
    tsc_policy_t p;
    for (int k = 0; k < pols.n; k++)
        if (tsc_policy_parse(pols.v[k], &p) != TSC_OK) return tsc_cli_usage_error(cmd, "--policy: %s", tsc_error_last());
    return 0;
}

/* The built-in input into a fresh temporary folder: dir and path out; 0, or 1 after the message. */
static int builtin_input(const char *cmd, char *dir, size_t dcap, char *path, size_t pcap) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, dcap, "%s/tilescope-kernels.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return tsc_cli_fail(cmd, "cannot make a temporary folder %s: %s", dir, strerror(errno));
    snprintf(path, pcap, "%s/llama-gqa.h5", dir);
    tsc_synth_opts_t so;
    tsc_synth_opts_init(&so);
    so.shape = "llama-gqa";
    so.seed = 1;
    so.steps = "0";
    so.layers = "1";
    if (tsc_synth_write(path, &so) != TSC_OK) {
        int rc = tsc_cli_fail(cmd, "the built-in input: %s", tsc_error_last());
        rmdir(dir);
        return rc;
    }
    return 0;
}

int tsc_cmd_kernels(int argc, char **argv) {
    const char *cmd = "kernels";
    tsc_kernels_opts_t o;
    tsc_kernels_opts_init(&o);
    int json = 0, md = 0, quiet = 0;
    const char **pol = malloc(sizeof(char *) * (size_t)(argc + 1));
    if (!pol) return tsc_cli_fail(cmd, "out of memory");
    int rc = parse_args(cmd, argc, argv, &o, pol, &json, &md, &quiet);
    o.policies = pol;
    char dir[4096] = "", path[4200] = "";
    const char *what = o.dump_path;
    if (rc == 0 && !o.dump_path) {
        rc = builtin_input(cmd, dir, sizeof dir, path, sizeof path);
        o.dump_path = path;
        o.label = "built-in";
        what = "the built-in Llama-style input (synth llama-gqa layer 1, seed 1: grouped-query heads, a sink key, "
               "planted rows with tied maxima)";
    }
    tsc_cli_progress_t pr;
    o.progress = tsc_cli_progress_init(&pr, cmd, quiet);
    tsc_kernels_t *k = NULL;
    if (rc == 0 && tsc_kernels_run(&o, &k) != TSC_OK) rc = tsc_cli_fail(cmd, "%s", tsc_error_last());
    if (rc == 0 && json) {
        tsc_json_t j;
        tsc_json_init(&j);
        tsc_kernels_json(k, &j);
        if (tsc_json_status(&j) != TSC_OK) rc = tsc_cli_fail(cmd, "%s", tsc_error_last());
        else puts(tsc_json_text(&j, NULL));
        tsc_json_free(&j);
    } else if (rc == 0) {
        print_table(k, what, md);
    }
    tsc_kernels_free(k);
    if (dir[0]) {
        unlink(path);
        rmdir(dir);
    }
    free(pol);
    return rc;
}
