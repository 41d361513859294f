/* cmd_import.c: `tilescope import`: tensors another program saved into a dump. .safetensors and
 * .npy are read here (capture/tsc_import.h); .npz and torch .pt files (zip archives and pickles)
 * go to the Python importer (python3 -m tilescope import) with the same arguments. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "tsc_import.h"

#ifndef TSC_PY_SOURCE_DIR
#define TSC_PY_SOURCE_DIR ""
#endif
#ifndef TSC_PY_FROM_BIN
#define TSC_PY_FROM_BIN "../lib/python3/dist-packages"
#endif

const char tsc_usage_import[] =
    "usage: tilescope import FILE -o DUMP [--map PATTERN[=NAME] ...] [--step N] [--no-causal] [--scale S]\n"
    "                        [--policy P] [--layout bhtd|bthd]\n"
    "\n"
    "Writes tensors another program saved into a dump: .safetensors (BF16 kept bit for bit) and .npy\n"
    "('<f8' '<f4' '<f2') are read by tilescope itself; .npz and torch .pt/.pth/.bin files are handed to\n"
    "the Python importer (python3 -m tilescope import, with numpy, and torch for .pt; the interpreter:\n"
    "$TSC_PYTHON, else /usr/bin/python3, else python3 on PATH). A .npy tensor is named by the file's stem.\n"
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

static int has_ext(const char *path, const char *ext) {
    size_t n = strlen(path), e = strlen(ext);
    return n > e && !strcasecmp(path + n - e, ext);
}

/* The folder holding the package tilescope for this program: the source tree's python/ when run
 * from a build tree, else the install's, relative to the program's folder. "" when unknown. */
static void package_dir(char *out, size_t cap) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    out[0] = '\0';
    if (n <= 0) return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/CMakeCache.txt", exe);
    static const char source_dir[] = TSC_PY_SOURCE_DIR;  /* "" in a build without the source tree */
    if (access(probe, F_OK) == 0 && source_dir[0]) snprintf(out, cap, "%s", source_dir);
    else if (TSC_PY_FROM_BIN[0] == '/') snprintf(out, cap, "%s", TSC_PY_FROM_BIN);
    else snprintf(out, cap, "%s/%s", exe, TSC_PY_FROM_BIN);
    snprintf(probe, sizeof probe, "%s/tilescope/importer.py", out);
    if (access(probe, R_OK) != 0) out[0] = '\0';
    if (!getenv("TILESCOPE_LIB")) { /* a build tree: the library beside the program */
        snprintf(probe, sizeof probe, "%s/libtilescope.so", exe);
        if (access(probe, R_OK) == 0) setenv("TILESCOPE_LIB", probe, 1);
    }
}

/* Runs argv; its exit status, or -1 when it could not run or died by a signal. */
static int run_wait(char *const argv[], int quiet) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        if (quiet) {
            if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(127);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    int ws;
    while (waitpid(pid, &ws, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

/* .npz / .pt: the first interpreter that imports numpy (and torch) and the package runs the
 * Python importer with the command's own arguments. */
static int import_python(const char *file, int argc, char **argv) {
    const char *cmd = "import";
    int torch = !has_ext(file, ".npz");
    char pkg[2 * PATH_MAX + 64], path[3 * PATH_MAX];
    package_dir(pkg, sizeof pkg);
    if (pkg[0]) {
        const char *old = getenv("PYTHONPATH");
        snprintf(path, sizeof path, "%s%s%s", pkg, old && *old ? ":" : "", old && *old ? old : "");
        setenv("PYTHONPATH", path, 1);
    }
    const char *cands[] = {getenv("TSC_PYTHON"), "/usr/bin/python3", "python3"};
    const char *probe = torch ? "import numpy, torch, tilescope.importer" : "import numpy, tilescope.importer";
    for (size_t c = 0; c < 3; c++) {
        if (!cands[c] || !*cands[c]) continue;
        char *check[] = {(char *)cands[c], "-c", (char *)probe, NULL};
        if (run_wait(check, 1) != 0) continue;
        char **args = calloc((size_t)argc + 5, sizeof *args);
        if (!args) return tsc_cli_fail(cmd, "out of memory");
        args[0] = (char *)cands[c], args[1] = "-m", args[2] = "tilescope", args[3] = "import";
        for (int i = 0; i < argc; i++) args[4 + i] = argv[i];
        fflush(stdout);
        int rc = run_wait(args, 0);
        free(args);
        return rc < 0 ? tsc_cli_fail(cmd, "%s: the Python importer (%s) did not finish", file, cands[c]) : rc;
    }
    return tsc_cli_fail(cmd, "%s: a %s file needs the Python importer: no python3 imports %s%s (tried $TSC_PYTHON, "
                        "/usr/bin/python3, python3 on PATH). Install %s, or point TSC_PYTHON at a python3 that has them",
                        file, torch ? "torch" : ".npz", torch ? "numpy, torch" : "numpy",
                        pkg[0] ? " and the package tilescope" : " and the package tilescope (not found beside this program: "
                                 "install tilescope, or add its python/ folder to PYTHONPATH)",
                        torch ? "python3-numpy and python3-torch" : "python3-numpy");
}

/* Control bytes of a name as \xNN, for the one-line summary. */
static void print_name(const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
}

static void print_result(const char *file, const char *out, const tsc_import_result_t *r) {
    printf("import: %s -> %s: %d datasets, steps [", file, out, r->n_datasets);
    for (int i = 0; i < r->n_steps; i++) printf("%s%lld", i ? ", " : "", r->steps[i]);
    printf("], layers [");
    for (int i = 0; i < r->n_layers; i++) printf("%s%d", i ? ", " : "", r->layers[i]);
    printf("]");
    if (r->n_skipped) printf("; skipped %d tensors no map selects: ", r->n_skipped);
    for (int i = 0; i < r->n_skipped && i < 8; i++) {
        if (i) printf(", ");
        print_name(r->skipped[i]);
    }
    printf("\n");
}

int tsc_cmd_import(int argc, char **argv) {
    const char *cmd = "import", *file = NULL, *out = NULL, *layout = "bhtd";
    tsc_cli_list_t maps = {{0}, 0};
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
    if (!file) return tsc_cli_usage_error(cmd, "which file? (FILE: .safetensors, .npy, .npz or .pt)");
    if (!out) return tsc_cli_usage_error(cmd, "where to? (-o DUMP)");
    if (strcmp(layout, "bhtd") && strcmp(layout, "bthd"))
        return tsc_cli_usage_error(cmd, "--layout '%s': bhtd or bthd", layout);
    for (int i = 0; i < maps.n; i++)
        if (tsc_import_map_check(maps.v[i]) != TSC_OK) return tsc_cli_usage_error(cmd, "%s", tsc_error_last());
    if (has_ext(file, ".npz") || has_ext(file, ".pt") || has_ext(file, ".pth") || has_ext(file, ".bin"))
        return import_python(file, argc, argv);
    if (!has_ext(file, ".safetensors") && !has_ext(file, ".npy")) {
        const char *dot = strrchr(file, '.');
        return tsc_cli_fail(cmd, "%s: unknown file type '%s' (.safetensors, .npy, .npz, .pt)", file,
                            dot && !strchr(dot, '/') ? dot : "");
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
