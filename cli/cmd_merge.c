/* cmd_merge.c: `tilescope merge`: the rank dumps of one run into a manifest (capture/tsc_manifest.h). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tsc_dump.h"
#include "tsc_manifest.h"

const char tsc_usage_merge[] =
    "usage: tilescope merge -o MANIFEST RANK_DUMP...\n"
    "       tilescope merge DIR\n"
    "\n"
    "Writes the manifest of a run of many ranks: a small HDF5 file beside the rank dumps that every\n"
    "command (info, analyze, diagnose, figure, report, view, compare, ...) opens as one dump, batch\n"
    "rows and heads read from the rank that holds them (docs/DISTRIBUTED.md, docs/FORMAT.md 1.8).\n"
    "Each rank dump is opened and checked, and the ranks must agree (geometry, steps, world size;\n"
    "every rank 0..world_size-1 present once): a missing or disagreeing rank is named.\n"
    "The rank dumps must be in MANIFEST's folder (a manifest names them by file name only).\n"
    "With DIR: every rank dump in it (files named *.rank<N>.h5 or rank<N>.h5) into DIR/manifest.h5.\n"
    "A folder of rank dumps is also read directly, without a manifest.\n"
    "\n"
    "  -o FILE    the manifest to write (written to a temporary name, then renamed)\n"
    "\n"
    "Exit status: 0 written, 1 a rank dump is missing, unreadable or disagrees, 2 usage error.\n";

typedef struct {
    const char **paths;
    int n, cap;
    const char *out;
} merge_args_t;

static int merge_arg(const char *cmd, int argc, char **argv, int *i, void *ctx) {
    merge_args_t *a = ctx;
    const tsc_cli_flag_t flags[] = {{"--out", "-o", TSC_CLI_STR, &a->out, 0, 0}};
    int rc = tsc_cli_flag(cmd, argc, argv, i, flags, TSC_CLI_NFLAGS(flags));
    if (rc != -1) return rc;
    if (argv[*i][0] == '-' && argv[*i][1]) return tsc_cli_usage_error(cmd, "unknown option '%s'", argv[*i]);
    if (a->n == a->cap) return tsc_cli_usage_error(cmd, "too many rank dumps (at most %d)", a->cap);
    a->paths[a->n++] = argv[*i];
    return 0;
}

int tsc_cmd_merge(int argc, char **argv) {
    const char *cmd = "merge";
    merge_args_t a = {NULL, 0, argc > 0 ? argc : 1, NULL};
    a.paths = calloc((size_t)a.cap, sizeof *a.paths);
    if (!a.paths) return tsc_cli_fail(cmd, "out of memory");
    int rc = tsc_cli_args(cmd, argc, argv, NULL, 0, merge_arg, &a, 0, NULL);
    const char *written = a.out;
    char dirman[4200];
    tsc_status_t st = TSC_OK;
    if (rc) goto done;
    if (!a.n) { rc = tsc_cli_usage_error(cmd, "which rank dumps? (RANK_DUMP... with -o MANIFEST, or DIR)"); goto done; }
    if (!a.out) {
        if (a.n != 1) { rc = tsc_cli_usage_error(cmd, "name the manifest with -o FILE (or give one DIR)"); goto done; }
        st = tsc_manifest_write_dir(a.paths[0]);
        snprintf(dirman, sizeof dirman, "%s/manifest.h5", a.paths[0]);
        written = dirman;
    } else {
        st = tsc_manifest_write(a.out, a.paths, a.n);
    }
    if (st != TSC_OK) { rc = tsc_cli_fail(cmd, "%s", tsc_error_last()); goto done; }
    tsc_dump_t *d = NULL;
    if (tsc_dump_open(&d, written) != TSC_OK) { rc = tsc_cli_fail(cmd, "%s", tsc_error_last()); goto done; }
    const tsc_dump_meta_t *m = tsc_dump_meta(d);
    printf("%s: %d rank%s, batch %d, %d head%s, %d step%s\n", written, tsc_dump_n_ranks(d), TSC_CLI_S(tsc_dump_n_ranks(d)),
           m->batch, m->n_head, TSC_CLI_S(m->n_head), tsc_dump_n_steps(d), TSC_CLI_S(tsc_dump_n_steps(d)));
    tsc_dump_close(d);
done:
    free(a.paths);
    return rc;
}
