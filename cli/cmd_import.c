/* cmd_import.c: `tilescope import`: tensors another program saved into a dump. Every format
 * (.safetensors, .npy, .npz, torch .pt) is read by the library's own readers (capture/tsc_import.h):
 * no interpreter is started and nothing in the file is ever run. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tsc_escape.h"
#include "tsc_import.h"
#include "tsc_strbuf.h"

const char tsc_usage_import[] =
    "usage: tilescope import FILE -o DUMP [--map PATTERN[=NAME] ...] [--step N] [--no-causal] [--scale S]\n"
    "                        [--policy P] [--layout bhtd|bthd]\n"
    "\n"
    "Writes tensors another program saved into a dump: .safetensors (BF16 kept bit for bit), .npy and\n"
    ".npz ('<f8' '<f4' '<f2'), and torch.save files (.pt .pth .bin, both the zip and the legacy format;\n"
    "F64 F32 F16 BF16 tensors, views gathered). tilescope reads them all itself: a .pt's pickle is\n"
    "interpreted, never run, so a file naming any callable but torch's tensor rebuild is refused, and so\n"
    "is a TorchScript archive. A .npy (or a bare tensor saved alone) is named by the file's stem; tensors\n"
    "of other types (int64 buffers) are listed as skipped.\n"
    "\n"
    "  -o, --out DUMP   the dump to write (a temporary name, renamed when complete)\n"
    "  --map M          PATTERN or PATTERN=NAME, repeatable, the first that matches a tensor's whole\n"
    "                   name wins: {step} {layer} match integers, {name} a dataset (q k v o do lse x\n"
    "                   w_q w_k w_v w_o), * anything; =NAME names the dataset of a pattern without\n"
    "                   {name}. Default: {name} step_{step}/layer_{layer}/{name} layer{layer}.{name}\n"
    "                   layers.{layer}.{name}. Tensors no map selects are listed as skipped.\n"
    "  --step N         the step of tensors whose map has no {step} (default 0; the layer is then 0)\n"
    "  --no-causal      the attention had no causal mask\n"
    "  --scale S        softmax scale (default 1/sqrt(D))\n"
    "  --policy P       the kernel's precision policy, recorded in the dump\n"
    "  --layout L       axis order of q k v o do in the file: bhtd [B, H, T, D] (default) or bthd\n"
    "\n"
    "The geometry comes from the tensors: q [B, H, T, D], k for the kv heads, x [B, T, C] for C.\n"
    "Exit status: 0 imported, 1 a malformed file or a tensor that does not fit (the message names\n"
    "the file and the tensor; no dump is left behind), 2 usage error.\n";

/* A name from the file, with control bytes and malformed UTF-8 as \xNN (tsc_escape.h). */
static void print_name(const char *s) {
    tsc_strbuf_t b;
    tsc_strbuf_init(&b);
    fputs(tsc_esc_term_str(&b, s), stdout);
    tsc_strbuf_free(&b);
}

static void print_result(const char *file, const char *out, const tsc_import_result_t *r) {
    printf("import: ");
    print_name(file);
    printf(" -> ");
    print_name(out);
    printf(": %d datasets, steps [", r->n_datasets);
    for (int i = 0; i < r->n_steps; i++) printf("%s%lld", i ? ", " : "", r->steps[i]);
    printf("], layers [");
    for (int i = 0; i < r->n_layers; i++) printf("%s%d", i ? ", " : "", r->layers[i]);
    printf("]");
    if (r->n_skipped) printf("; skipped %d tensor%s no map selects: ", r->n_skipped, TSC_CLI_S(r->n_skipped));
    for (int i = 0; i < r->n_skipped && i < 8; i++) {
        if (i) printf(", ");
        print_name(r->skipped[i]);
    }
    printf("\n");
}

int tsc_cmd_import(int argc, char **argv) {
    const char *cmd = "import", *file = NULL, *out = NULL, *layout = "bhtd", *mapv[TSC_CLI_LIST_MAX];
    tsc_cli_list_t maps = TSC_CLI_LIST(mapv);
    tsc_import_opts_t o;
    tsc_import_opts_init(&o);
    int no_causal = 0;
    const tsc_cli_flag_t flags[] = {
        {"--out", "-o", TSC_CLI_STR, &out, 0, 0},          {"--map", NULL, TSC_CLI_LIST, &maps, 0, 0},
        {"--step", NULL, TSC_CLI_LLONG, &o.step, 0, 4.0e18}, {"--no-causal", NULL, TSC_CLI_ON, &no_causal, 0, 0},
        {"--scale", NULL, TSC_CLI_DOUBLE, &o.scale, 1e-30, 1e30}, {"--policy", NULL, TSC_CLI_STR, &o.policy, 0, 0},
        {"--layout", NULL, TSC_CLI_STR, &layout, 0, 0}};
    int rc = tsc_cli_args(cmd, argc, argv, flags, TSC_CLI_NFLAGS(flags), NULL, NULL, 0, &file);
    if (rc) return rc;
    if (!file) return tsc_cli_usage_error(cmd, "which file? (FILE: %s)", tsc_tensor_file_types());
    if (!out) return tsc_cli_usage_error(cmd, "where to? (-o DUMP)");
    if (strcmp(layout, "bhtd") && strcmp(layout, "bthd"))
        return tsc_cli_usage_error(cmd, "--layout '%s': bhtd or bthd", layout);
    for (int i = 0; i < maps.n; i++)
        if (tsc_import_map_check(maps.v[i]) != TSC_OK) return tsc_cli_usage_error(cmd, "%s", tsc_error_last());
    if (!tsc_tensor_file_known(file)) {
        const char *dot = strrchr(file, '.');
        return tsc_cli_fail(cmd, "%s: unknown file type '%s' (%s)", file, dot && !strchr(dot, '/') ? dot : "",
                            tsc_tensor_file_types());
    }
    o.causal = !no_causal;
    o.layout_bthd = !strcmp(layout, "bthd");
    o.maps = maps.v, o.n_maps = maps.n;
    tsc_import_result_t *r;
    if (tsc_import_run(file, out, &o, &r) != TSC_OK) return tsc_cli_fail(cmd, "%s", tsc_error_last());
    print_result(file, out, r);
    tsc_import_result_free(r);
    return 0;
}
