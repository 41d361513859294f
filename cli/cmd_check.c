/* cmd_check.c: `tilescope check DUMP`: are the captured O and LSE what attention computes from the captured q, k, v
 * (analyze/tsc_check.h)? */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tsc_check.h"
#include "tsc_comm.h"

/* The exit status when the check finds an inconsistency (0 consistent, 1 unreadable input, 2 usage). */
#define CHECK_EXIT_INCONSISTENT 4

const char tsc_usage_check[] =
    "usage: tilescope check DUMP [--steps SET] [--layers SET] [--heads SET] [--batches SET] [--json] [--quiet]\n"
    "\n"
    "Recomputes S = alpha q k^T (the dump's scale, causal mask and GQA mapping), softmax(S) and\n"
    "softmax(S) V in FP64 from the captured q, k, v, and holds the captured O and LSE to them within\n"
    "bounds derived from the stored formats alone, whatever kernel ran (docs/CHECK.md): a kernel\n"
    "whose O is wrong while its LSE is right (a key tile's contribution dropped, a wrong row sum)\n"
    "is flagged with its rows and tiles. Also reports rows whose probabilities saturate P's format\n"
    "and NaN/Inf counts by tile. Without lse in the dump only O is checked. q, k, v must be stored\n"
    "as the kernel read them (an FP8 kernel's inputs after their rounding to FP8).\n"
    "\n"
    "  --steps/--layers/--heads/--batches SET   the selection (default all)\n"
    "  --json           print the result as one JSON object (docs/CHECK.md)\n"
    "  -q, --quiet      no progress on stderr\n"
    "\n"
    "Verdict per head: ok, O inconsistent, LSE inconsistent, non-finite (inconsistencies), saturated\n"
    "(reported only). ratio = error / bound (> 1 fails); rows are (batch, row); tiles are tile_q rows\n"
    "(q, o, lse) or tile_k keys (k, v) of the dump's tiles, else 64.\n"
    "On MPI (`mpirun -n N tilescope check DUMP`) the heads are checked on the N processes and process 0\n"
    "prints the one-process result (docs/DISTRIBUTED.md).\n"
    "Exit status: 0 consistent, 4 an inconsistency found, 1 the dump cannot be read or has no o,\n"
    "2 usage error.\n";

static void print_rows(const char *what, const tsc_check_row_t *r, int n, int64_t total, int with_tile) {
    if (!n) return;
    printf("    %s rows (%lld):", what, (long long)total);
    for (int i = 0; i < n; i++) {
        if (with_tile < 0) printf(" b%d t%d (1-Pmax %.2g", r[i].b, r[i].t, r[i].err);
        else printf(" b%d t%d (x%.3g", r[i].b, r[i].t, r[i].ratio);
        if (with_tile > 0 && r[i].key_tile >= 0) printf(", key tile %d missing?", r[i].key_tile);
        printf(")");
    }
    printf("%s\n", total > n ? " ..." : "");
}

static void print_tiles(const char *what, const tsc_check_tile_t *t, int n) {
    if (!n) return;
    printf("    %s:", what);
    for (int i = 0; i < n; i++) printf(" %s b%d tile %d (%lld)", t[i].tensor, t[i].b, t[i].tile, (long long)t[i].count);
    printf("\n");
}

static void print_result(const tsc_check_t *c) {
    char s[256], v[96];
    printf("check %s: %d (step, layer) pairs, %d heads; q/k/v %s (P held to %s), o %s, lse %s; tiles %d x %d (%s)\n",
           c->dump_path, c->n_pairs, c->n_heads, c->dtype_qkv, c->p_format, c->dtype_o,
           c->dtype_lse[0] ? c->dtype_lse : "absent (O checked alone)", c->tile_q, c->tile_k, c->tile_source);
    printf("%8s %5s %4s  %-28s %6s %7s %7s %6s %9s %9s\n", "step", "layer", "head", "verdict", "rows", "O bad",
           "LSE bad", "sat.", "non-fin.", "worst O");
    for (int i = 0; i < c->n_heads; i++) {
        const tsc_check_head_t *h = &c->heads[i];
        printf("%8lld %5d %4d  %-28s %6lld %7lld %7lld %6lld %9lld %9.3g\n", h->step, h->layer, h->head,
               h->stored ? tsc_check_verdict_str(h->verdict, v, sizeof v) : "not stored", (long long)h->rows, (long long)h->o_bad,
               (long long)h->lse_bad, (long long)h->saturated, (long long)h->nonfinite, h->o_worst);
        print_rows("O", h->o_rows, h->n_o_rows, h->o_bad, 1);
        print_tiles("O rows by query tile", h->o_tiles, h->n_o_tiles);
        print_rows("LSE", h->lse_rows, h->n_lse_rows, h->lse_bad, 0);
        print_rows("saturated", h->sat_rows, h->n_sat_rows, h->saturated, -1);
        print_tiles("non-finite by tile", h->tiles, h->n_tiles);
    }
    printf("%s\n", tsc_check_sentence(c, s, sizeof s));
}

int tsc_cmd_check(int argc, char **argv) {
    tsc_check_opts_t o;
    tsc_check_opts_init(&o);
    int json = 0, quiet = 0;
    const tsc_cli_flag_t flags[] = {TSC_CLI_SELECT_FLAGS(&o.sel), {"--json", NULL, TSC_CLI_ON, &json, 0, 0},
                                    {"--quiet", "-q", TSC_CLI_ON, &quiet, 0, 0}};
    int rc = tsc_cli_args("check", argc, argv, flags, TSC_CLI_NFLAGS(flags), NULL, NULL, 1, &o.dump_path);
    if (rc) return rc;
    if (!o.dump_path) return tsc_cli_usage_error("check", "no DUMP given");
    if ((rc = tsc_cli_comm_start("check"))) return rc;
    o.comm = tsc_cli_comm();
    const int worker = o.comm->rank != 0; /* a launcher's process other than rank 0: computes, prints nothing */
    tsc_cli_progress_t pr;
    o.progress = tsc_cli_progress_init(&pr, "check", quiet || worker);
    tsc_check_t *c = NULL;
    if (tsc_check_run(&o, &c) != TSC_OK) {
        if (worker && !strncmp(tsc_error_last(), "rank ", 5)) return 1; /* another process failed: rank 0 says so */
        return tsc_cli_fail("check", "%s", tsc_error_last());
    }
    if (worker) { /* its result holds its own heads only: rank 0's is the job's, and its exit status */
        tsc_check_free(c);
        return 0;
    }
    if (json) {
        tsc_json_t j;
        tsc_json_init(&j);
        tsc_check_json(c, &j);
        if (tsc_json_status(&j) != TSC_OK) rc = tsc_cli_fail("check", "%s", tsc_error_last());
        else puts(tsc_json_text(&j, NULL));
        tsc_json_free(&j);
    } else {
        print_result(c);
    }
    if (rc == 0 && c->n_bad) rc = CHECK_EXIT_INCONSISTENT;
    tsc_check_free(c);
    return rc;
}
