/* cmd_replay.c: `tilescope replay DUMP --policy P [--policy P2 ...] -o FILE`: recompute attention
 * forward and backward from a dump's q, k, v, do under precision policies, write the results
 * (docs/FORMAT.md §2) and compare every policy against the first. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "tsc_json.h"
#include "tsc_replay.h"

const char tsc_usage_replay[] =
    "usage: tilescope replay DUMP --policy P [--policy P2 ...] [-o FILE] [--steps SET]\n"
    "                        [--layers SET] [--heads SET] [--batches SET] [--forward-only]\n"
    "                        [--dump-tiles] [--json] [--quiet]\n"
    "\n"
    "Recomputes attention from the dump's captured q, k, v and do under each precision policy\n"
    "(the CPU reference of kernels/tsc_attention.h), writes o, lse, delta, dq, dk, dv per policy\n"
    "to FILE (docs/FORMAT.md section 2; written to a temporary name, then renamed) and prints\n"
    "how far each policy is from the first: max and mean absolute error and the relative error\n"
    "(max abs error / max |reference|) of O and delta, and the signed mean of the delta\n"
    "differences (the bias of docs/MECHANISM.md section 4). Elements where a policy's O or delta is NaN or\n"
    "Inf are counted (column 'non-finite') and left out of the errors, which cover the elements\n"
    "where both the policy and the reference are finite.\n"
    "\n"
    "  --policy P       a policy string (repeatable, at least one; the first is the reference),\n"
    "                   e.g. fp32, bf16-torch, bf16-fa2+stable:beta=2,eps=1e-3, bf16-torch+fp32:pv;\n"
    "                   an invalid string lists the presets and modifiers\n"
    "  -o FILE          output HDF5 file (default replay.h5)\n"
    "  --steps SET      steps to replay (all | N | start:stop[:stride] | a,b,...; default all)\n"
    "  --layers SET     layers to replay (default all)\n"
    "  --heads SET      query heads to replay (default all; dk/dv are then per query head)\n"
    "  --batches SET    batch rows to replay (default all)\n"
    "  --forward-only   skip the backward (then do is not needed; delta, dq, dk, dv not written)\n"
    "  --dump-tiles     use the dump's tile sizes (root tile_q, tile_k) in every policy instead of\n"
    "                   each preset's own (default: the preset's, or the policy's +tile)\n"
    "  --json           print the configuration and comparison as one JSON object on stdout\n"
    "  -q, --quiet      print only the comparison table (no plan, no progress on stderr)\n"
    "Progress (with the time left) goes to stderr: a bar on a terminal, else a line every 10%.\n"
    "\n"
    "Exit status: 0 done, 1 the dump cannot be read or lacks a dataset the replay needs (do for\n"
    "the backward), 2 usage error.\n";

/* The flags: 0 parsed, 2 after a usage error. pol_str has room for argc strings (the --policy values). */
static int parse_args(const char *cmd, int argc, char **argv, tsc_replay_opts_t *o, const char **pol_str, int *json,
                      int *quiet) {
    tsc_cli_list_t pols = {pol_str, 0, argc};
    const tsc_cli_flag_t flags[] = {{"--policy", NULL, TSC_CLI_LIST, &pols, 0, 0},
                                    {"--output", "-o", TSC_CLI_STR, &o->out_path, 0, 0},
                                    TSC_CLI_SELECT_FLAGS(&o->sel),
                                    {"--json", NULL, TSC_CLI_ON, json, 0, 0},
                                    {"--quiet", "-q", TSC_CLI_ON, quiet, 0, 0},
                                    {"--forward-only", NULL, TSC_CLI_ON, &o->forward_only, 0, 0},
                                    {"--dump-tiles", NULL, TSC_CLI_ON, &o->dump_tiles, 0, 0}};
    int rc = tsc_cli_args(cmd, argc, argv, flags, TSC_CLI_NFLAGS(flags), NULL, NULL, 1, &o->dump_path);
    o->n_policies = pols.n;
    if (rc) return rc;
    if (!o->dump_path) return tsc_cli_usage_error(cmd, "no DUMP given");
    if (o->n_policies == 0)
        return tsc_cli_usage_error(cmd, "no --policy given (e.g. --policy fp32 --policy bf16-torch)");
    return 0;
}

static void print_plan(const tsc_replay_t *r) {
    const tsc_dump_meta_t *m = &r->meta;
    printf("replay %s: B=%d H=%d Hkv=%d T=%d D=%d causal=%d scale=%g, run policy '%s'\n", r->dump_path, m->batch,
           m->n_head, m->n_kv_head, m->seq_len, m->head_dim, m->causal, m->softmax_scale,
           m->policy[0] ? m->policy : "(none recorded)");
    printf("  selection %s: %d (step, layer) pairs, %d heads, %d batch rows; %s\n", r->selection, r->n_pairs,
           r->n_heads, r->n_batches, r->backward ? "forward and backward" : "forward only");
    for (int p = 0; p < r->n_policies; p++)
        printf("  policy %d: %s%s\n", p, r->policies[p].name, p == 0 ? " (reference)" : "");
    printf("  output %s\n", r->out_path);
    fflush(stdout);
}

/* The comparison table; a policy whose O or delta holds NaN/Inf gets a warning line. */
static void print_table(const tsc_replay_t *r) {
    printf("%-40s %10s %10s %10s %10s %10s %10s %11s %10s\n", "policy vs reference", "O max", "O mean", "O rel",
           "delta max", "delta mean", "delta rel", "delta bias", "non-finite");
    for (int p = 0; p < r->n_policies; p++) {
        const tsc_replay_cmp_t *o = &r->policies[p].o, *d = &r->policies[p].delta;
        const int64_t nf = o->n_nonfinite + (r->backward ? d->n_nonfinite : 0);
        if (p == 0) printf("%-40s %-77s %10" PRId64 "\n", r->policies[p].name, "(reference)", nf);
        else {
            printf("%-40s %10.3e %10.3e %10.3e", r->policies[p].name, o->max_abs, o->mean_abs, o->rel);
            if (!r->backward) printf(" %10s %10s %10s %11s", "-", "-", "-", "-");
            else printf(" %10.3e %10.3e %10.3e %+11.3e", d->max_abs, d->mean_abs, d->rel, d->signed_mean);
            printf(" %10" PRId64 "\n", nf);
        }
    }
    for (int p = 0; p < r->n_policies; p++) {
        const tsc_replay_cmp_t *o = &r->policies[p].o, *d = &r->policies[p].delta;
        if (o->n_nonfinite)
            printf("warning: %s: O holds %" PRId64 " non-finite (NaN/Inf) elements of %" PRId64
                   "; its errors cover the %" PRId64 " elements where both it and the reference are finite\n",
                   r->policies[p].name, o->n_nonfinite, o->n, o->n_compared);
        if (r->backward && d->n_nonfinite)
            printf("warning: %s: delta holds %" PRId64 " non-finite (NaN/Inf) elements of %" PRId64
                   "; its errors cover the %" PRId64 " elements where both it and the reference are finite\n",
                   r->policies[p].name, d->n_nonfinite, d->n, d->n_compared);
    }
}

/* The replay's callback into the progress on stderr: (step, layer) pairs replayed. */
static void progress(void *ctx, int job, int n_jobs, long long step, int layer) {
    (void)step, (void)layer;
    tsc_cli_progress_report(ctx, "(step, layer) pairs replayed", job, n_jobs);
}

static int run(tsc_replay_opts_t *o, int json, int quiet) {
    tsc_replay_t *r = NULL;
    if (tsc_replay_plan(o, &r) != TSC_OK) return tsc_cli_fail("replay", "%s", tsc_error_last());
    if (!json && !quiet) print_plan(r);
    tsc_cli_progress_t pr;
    if (tsc_cli_progress_init(&pr, "replay", quiet)) tsc_cli_progress_report(&pr, "(step, layer) pairs replayed", 0, r->n_pairs);
    if (tsc_replay_run(r, quiet ? NULL : progress, &pr) != TSC_OK) {
        tsc_replay_free(r);
        return tsc_cli_fail("replay", "%s", tsc_error_last());
    }
    if (json) {
        tsc_json_t j;
        tsc_json_init(&j);
        tsc_replay_json(r, &j);
        if (tsc_json_status(&j) != TSC_OK) {
            tsc_json_free(&j);
            tsc_replay_free(r);
            return tsc_cli_fail("replay", "%s", tsc_error_last());
        }
        puts(tsc_json_text(&j, NULL));
        tsc_json_free(&j);
    } else {
        print_table(r);
        if (!quiet) printf("wrote %s\n", r->out_path);
    }
    tsc_replay_free(r);
    return 0;
}

int tsc_cmd_replay(int argc, char **argv) {
    tsc_replay_opts_t o;
    tsc_replay_opts_init(&o);
    o.out_path = "replay.h5";
    int json = 0, quiet = 0;
    const char **pol_str = malloc(sizeof(char *) * (size_t)(argc + 1));
    tsc_policy_t *pol = malloc(sizeof(tsc_policy_t) * (size_t)(argc + 1));
    if (!pol_str || !pol) {
        free(pol_str);
        free(pol);
        return tsc_cli_fail("replay", "out of memory");
    }
    int rc = parse_args("replay", argc, argv, &o, pol_str, &json, &quiet);
    for (int p = 0; rc == 0 && p < o.n_policies; p++)
        if (tsc_policy_parse(pol_str[p], &pol[p]) != TSC_OK)
            rc = tsc_cli_usage_error("replay", "--policy: %s", tsc_error_last());
    o.policies = pol;
    if (rc == 0) rc = run(&o, json, quiet);
    free(pol_str);
    free(pol);
    return rc;
}
