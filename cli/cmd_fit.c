/* cmd_fit.c: `tilescope fit DUMP`: which policy's replay reproduces the captured O (analyze/tsc_fit.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tsc_fit.h"

const char tsc_usage_fit[] =
    "usage: tilescope fit DUMP [--policy P ...] [--steps SET] [--layers SET] [--heads SET] [--batches SET]\n"
    "                     [--all-steps] [--keep-tiles] [--json] [--quiet]\n"
    "\n"
    "Replays captured steps under precision policies and compares the replayed O (and dQ, dK, dV\n"
    "where the dump holds them) with the captured tensors, element by element, in ULPs of the\n"
    "captured format; ranks the policies by the share of bit-identical O elements. A diagnosis\n"
    "describes a run only when its policy's replay reproduces that run's O.\n"
    "\n"
    "  --policy P       a policy to check (repeatable); default every preset, then the dump's\n"
    "                   recorded policy when it is none of them\n"
    "  --steps/--layers/--heads/--batches SET   the selection (default all); only its first step\n"
    "                   is compared unless --all-steps\n"
    "  --all-steps      compare every selected step\n"
    "  --keep-tiles     keep each policy's own tile sizes (default: a policy without +tile gets the\n"
    "                   dump's tile_q x tile_k, except materialized-softmax presets such as\n"
    "                   bf16-eager-cpu, which model untiled kernels)\n"
    "  --json           print the result as one JSON object (docs/FORMAT.md section 2.1)\n"
    "  -q, --quiet      no progress on stderr (by default a bar with the time left on a terminal,\n"
    "                   else a line every 10% of the (step, layer) pairs)\n"
    "\n"
    "Columns: identical = same bits after rounding the replay to the captured format (NaN == NaN);\n"
    "<=1 ULP = |replay - captured| / ulp(max magnitude) <= 1; max ULP over elements finite on both sides.\n"
    "Exit status: 0 done, 1 the dump cannot be read or has no captured o, 2 usage error.\n";

/* "  99.97%  100.00%      2" for one tensor, or dashes when it was not compared. */
static void put_cmp(const tsc_fit_cmp_t *c) {
    char a[32], b[32];
    if (!c->n) {
        printf("  %9s %9s %8s", "-", "-", "-");
        return;
    }
    printf("  %9s %9s", tsc_fit_percent(c->identical, a, sizeof a), tsc_fit_percent(c->within1, b, sizeof b));
    if (isnan(c->max_ulp)) printf(" %8s", "-");
    else printf(" %8.4g", c->max_ulp);
}

static void print_result(const tsc_fit_t *f) {
    static const char *tn[TSC_FIT_NT] = {"O", "dQ", "dK", "dV"};
    printf("fit %s: run policy %s%s%s, %d (step, layer) pairs of step%s", f->dump_path, f->run_policy[0] ? "'" : "", f->run_policy[0] ? f->run_policy : "(none recorded)", f->run_policy[0] ? "'" : "", f->n_pairs,
           f->n_steps > 1 ? "s" : "");
    for (int i = 0; i < f->n_steps && i < 8; i++) printf("%s%lld", i ? "," : " ", f->steps[i]);
    printf("%s, %d heads, %d batch rows", f->n_steps > 8 ? ",..." : "", f->n_heads, f->n_batches);
    if (f->tile_q) printf(", tiles %d x %d (the dump's)", f->tile_q, f->tile_k);
    printf("; captured O is %s\n", f->dtype[TSC_FIT_O]);
    int w = 6;
    for (int p = 0; p < f->n_policies; p++)
        if ((int)strlen(f->policies[p].name) > w) w = (int)strlen(f->policies[p].name);
    printf("%4s  %-*s", "rank", w, "policy");
    for (int t = 0; t < TSC_FIT_NT; t++)
        if (f->dtype[t][0]) {
            char a[16], b[16], c[16];
            snprintf(a, sizeof a, "%s ident.", tn[t]);
            snprintf(b, sizeof b, "%s <=1ULP", tn[t]);
            snprintf(c, sizeof c, "%s maxULP", tn[t]);
            printf("  %9s %9s %8s", a, b, c);
        }
    printf("\n");
    for (int p = 0; p < f->n_policies; p++) {
        printf("%4d  %-*s", f->policies[p].rank, w, f->policies[p].name);
        for (int t = 0; t < TSC_FIT_NT; t++)
            if (f->dtype[t][0]) put_cmp(&f->policies[p].t[t]);
        if (f->policies[p].t[TSC_FIT_O].n_nonfinite)
            printf("  (%lld O elements non-finite on one side)", (long long)f->policies[p].t[TSC_FIT_O].n_nonfinite);
        printf("\n");
    }
    const tsc_fit_policy_t *b = &f->policies[0];
    char pc[32];
    printf("best fit: %s (O bit-identical on %s of elements)\n", b->name,
           tsc_fit_percent(b->t[TSC_FIT_O].identical, pc, sizeof pc));
    if (!(b->t[TSC_FIT_O].identical >= TSC_FIT_WARN_SHARE))
        printf("warning: no policy reproduces the captured O on 99%% of elements: the replay does not reproduce "
               "this run, and a diagnosis may not describe it\n");
}

/* The flags: 0 parsed, 2 after a usage error. pol has room for argc strings (the --policy values). */
static int parse_args(const char *cmd, int argc, char **argv, tsc_fit_opts_t *o, const char **pol, int *json,
                      int *quiet) {
    tsc_cli_list_t pols = {pol, 0, argc};
    const tsc_cli_flag_t flags[] = {{"--policy", NULL, TSC_CLI_LIST, &pols, 0, 0},
                                    TSC_CLI_SELECT_FLAGS(&o->sel),
                                    {"--all-steps", NULL, TSC_CLI_ON, &o->all_steps, 0, 0},
                                    {"--keep-tiles", NULL, TSC_CLI_ON, &o->keep_tiles, 0, 0},
                                    {"--json", NULL, TSC_CLI_ON, json, 0, 0},
                                    {"--quiet", "-q", TSC_CLI_ON, quiet, 0, 0}};
    int rc = tsc_cli_args(cmd, argc, argv, flags, TSC_CLI_NFLAGS(flags), NULL, NULL, 1, &o->dump_path);
    o->n_policies = pols.n;
    if (rc) return rc;
    if (!o->dump_path) return tsc_cli_usage_error(cmd, "no DUMP given");
    tsc_policy_t p;
    for (int k = 0; k < pols.n; k++)
        if (tsc_policy_parse(pols.v[k], &p) != TSC_OK) return tsc_cli_usage_error(cmd, "--policy: %s", tsc_error_last());
    return 0;
}

int tsc_cmd_fit(int argc, char **argv) {
    tsc_fit_opts_t o;
    tsc_fit_opts_init(&o);
    int json = 0, quiet = 0;
    const char **pol = malloc(sizeof(char *) * (size_t)(argc + 1));
    if (!pol) return tsc_cli_fail("fit", "out of memory");
    int rc = parse_args("fit", argc, argv, &o, pol, &json, &quiet);
    o.policies = pol;
    tsc_cli_progress_t pr;
    o.progress = tsc_cli_progress_init(&pr, "fit", quiet);
    tsc_fit_t *f = NULL;
    if (rc == 0 && tsc_fit_run(&o, &f) != TSC_OK) rc = tsc_cli_fail("fit", "%s", tsc_error_last());
    if (rc == 0 && json) {
        tsc_json_t j;
        tsc_json_init(&j);
        tsc_fit_json(f, &j);
        if (tsc_json_status(&j) != TSC_OK) rc = tsc_cli_fail("fit", "%s", tsc_error_last());
        else puts(tsc_json_text(&j, NULL));
        tsc_json_free(&j);
    } else if (rc == 0) {
        print_result(f);
    }
    tsc_fit_free(f);
    free(pol);
    return rc;
}
