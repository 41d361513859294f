/* main.c: `tilescope <command> [options]`: dispatch and the shared argument helpers. */
#include "cli.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tsc_contain.h"
#include "tsc_escape.h"
#include "tsc_strbuf.h"
#include "tsc_file.h"
#include "tsc_mem.h"
#include "tsc_status.h"

static int cmd_help(int argc, char **argv);

/* Usage texts live beside their command in cmd_<name>.c; these externs collect them. */
extern const char tsc_usage_info[], tsc_usage_synth[], tsc_usage_pack[];
extern const char tsc_usage_replay[], tsc_usage_fit[], tsc_usage_kernels[], tsc_usage_check[], tsc_usage_diff[];
extern const char tsc_usage_mpi_info[], tsc_usage_merge[];
extern const char tsc_usage_analyze[], tsc_usage_diagnose[];
extern const char tsc_usage_explain[];
extern const char tsc_usage_figure[], tsc_usage_report[], tsc_usage_demo[];
extern const char tsc_usage_view[];
extern const char tsc_usage_compare[];
extern const char tsc_usage_train[];
extern const char tsc_usage_import[];
extern const char tsc_usage_repro[];
extern const char tsc_usage_rescue[];

static const char usage_help[] = "usage: tilescope help [COMMAND]\n";

const char tsc_cli_global_usage[] =
    "Every command accepts --trust-links: follow the external links, external raw storage and\n"
    "virtual datasets of the dumps it reads (refused by default; docs/SECURITY.md), and\n"
    "--max-memory BYTES (suffix K, M, G, T): the memory budget that sizes read from a file are\n"
    "checked against before allocation (default half of the RAM, or TSC_MAX_MEMORY).\n";

const tsc_cli_cmd_t tsc_cli_commands[] = {
    {"info", tsc_cmd_info, "what a dump holds: geometry, steps, layers, datasets, completeness", tsc_usage_info},
    {"synth", tsc_cmd_synth, "write a dump with planted, documented structure", tsc_usage_synth},
    {"import", tsc_cmd_import, "tensors saved elsewhere (.safetensors, .npy, .npz, torch .pt) into a dump", tsc_usage_import},
    {"pack", tsc_cmd_pack, "pack a capture-session folder (a killed run) into one dump file", tsc_usage_pack},
    {"merge", tsc_cmd_merge, "the rank dumps of a run of many processes into one manifest every command reads as a dump", tsc_usage_merge},
    {"replay", tsc_cmd_replay, "recompute attention under precision policies; compare them", tsc_usage_replay},
    {"fit", tsc_cmd_fit, "which policy's replay reproduces the captured O (bit-identical share, ULPs)", tsc_usage_fit},
    {"kernels", tsc_cmd_kernels, "the per-kernel bias table: one input under every preset against FP64", tsc_usage_kernels},
    {"check", tsc_cmd_check, "are the captured O and LSE softmax(alpha q k^T) V and its log-sum-exp, within the formats' bounds", tsc_usage_check},
    {"diff", tsc_cmd_diff, "two dumps compared tensor by tensor: bit-identical share, max ULP, first difference per head", tsc_usage_diff},
    {"analyze", tsc_cmd_analyze, "dump -> analysis.h5 + summary.json: bias, ties, census, decomposition", tsc_usage_analyze},
    {"diagnose", tsc_cmd_diagnose, "the paper's diagnostic workflow: culprit stage, verdict, rounding event, fix", tsc_usage_diagnose},
    {"explain", tsc_cmd_explain, "bit-level trace of a rounding event: an addition, or one output of a dump", tsc_usage_explain},
    {"figure", tsc_cmd_figure, "one of the paper's figures (fig1 evidence map ... fig13) from an analysis folder", tsc_usage_figure},
    {"view", tsc_cmd_view, "one offline HTML file to browse a dump's attention patterns by step, layer, head", tsc_usage_view},
    {"report", tsc_cmd_report, "multi-page PDF + offline HTML report (and summary.json) of an analysis folder", tsc_usage_report},
    {"compare", tsc_cmd_compare, "two analysis folders side by side: per-head bias, spectral norms, losses; what changed", tsc_usage_compare},
    {"train", tsc_cmd_train, "train a GPT-2 / Llama style model on the CPU, attention under a policy per layer", tsc_usage_train},
    {"repro", tsc_cmd_repro, "the paper's experiment in miniature: train hp/lp/stable runs, diagnose, every figure, outcome", tsc_usage_repro},
    {"rescue", tsc_cmd_rescue, "a diverged training run: diagnose its flight dump, rerun it from a checkpoint with the fix", tsc_usage_rescue},
    {"demo", tsc_cmd_demo, "synthesize a GPT-2-small-shaped dump, diagnose it, write the report and figures", tsc_usage_demo},
    {"mpi-info", tsc_cmd_mpi_info, "this process's rank and the job's size under an MPI launcher (mpirun, srun)", tsc_usage_mpi_info},
    {"help", cmd_help, "help on a command", usage_help},
    {NULL, NULL, NULL, NULL}
};

const tsc_cli_cmd_t *tsc_cli_find(const char *name) {
    for (const tsc_cli_cmd_t *c = tsc_cli_commands; c->name; c++)
        if (strcmp(c->name, name) == 0) return c;
    return NULL;
}

void tsc_cli_print_usage(const char *cmd, FILE *to) {
    const tsc_cli_cmd_t *c = cmd ? tsc_cli_find(cmd) : NULL;
    if (c) { fputs(c->usage, to); return; }
    fprintf(to, "usage: tilescope <command> [options]   (tilescope %s)\n\ncommands:\n", tsc_version());
    for (c = tsc_cli_commands; c->name; c++) fprintf(to, "  %-10s %s\n", c->name, c->summary);
    fprintf(to, "\n`tilescope help <command>` or `tilescope <command> --help` for its options.\n%s"
                "Exit status: 0 success, 1 the job failed, 2 usage error.\n", tsc_cli_global_usage);
}

/* "tilescope CMD: <message>" and a newline on stderr. */
/* Every message may quote a file's name or contents: control characters and malformed UTF-8 are
 * shown as \xNN (tsc_escape.h), so no message can drive the terminal. */
static void vmessage(const char *cmd, const char *fmt, va_list ap) {
    tsc_cli_progress_done(); /* a message starts on a line of its own */
    char small[1024], *text = small;
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(small, sizeof small, fmt, aq);
    va_end(aq);
    if (n >= (int)sizeof small && (text = malloc((size_t)n + 1))) vsnprintf(text, (size_t)n + 1, fmt, ap);
    if (!text) text = small;
    tsc_strbuf_t b;
    tsc_strbuf_init(&b);
    tsc_esc_term(&b, text, 1);
    fprintf(stderr, "tilescope %s: %s\n", cmd, tsc_strbuf_str(&b));
    tsc_strbuf_free(&b);
    if (text != small) free(text);
}

int tsc_cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmessage(cmd, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    tsc_cli_print_usage(cmd, stderr);
    return 2;
}

int tsc_cli_fail(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmessage(cmd, fmt, ap);
    va_end(ap);
    return 1;
}

int tsc_cli_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

/* The folders this process created (tsc_cli_make_dir), removed again by remove_made_dirs when the
 * job fails and they hold nothing but a folder lock. */
#define TSC_CLI_MAX_MADE 4
static char *made_dirs[TSC_CLI_MAX_MADE];
static int n_made;

int tsc_cli_make_dir(const char *dir) {
    if (mkdir(dir, 0777) == 0) {
        if (n_made < TSC_CLI_MAX_MADE && (made_dirs[n_made] = strdup(dir))) n_made++;
        return 0;
    }
    if (errno == EEXIST) {
        struct stat sb;
        if (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)) return 0;
        errno = ENOTDIR;
    }
    return -1;
}

/* "unknown command 'X'; did you mean 'Y'?" and the list of commands on stderr (from `help` when cmd): 2. */
static int unknown_command(const char *cmd, const char *name) {
    char near[64];
    if (cmd) fprintf(stderr, "tilescope %s: ", cmd);
    else fputs("tilescope: ", stderr);
    fprintf(stderr, "unknown %s '%s'", name[0] == '-' ? "option" : "command", name);
    if (name[0] == '-' ? tsc_cli_nearest_option(NULL, name, near, sizeof near) != NULL
                       : tsc_cli_nearest_command(name, near, sizeof near) != NULL)
        fprintf(stderr, "; did you mean '%s'?", near);
    fputs("\n\n", stderr);
    tsc_cli_print_usage(NULL, stderr);
    return 2;
}

/* 1 when folder dir holds nothing, or only the lock file of an analysis (cli.h). */
static int only_lock(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int other = 0;
    for (struct dirent *e; !other && (e = readdir(d));)
        other = strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, TSC_CLI_DIR_LOCK);
    closedir(d);
    return !other;
}

/* A failed job leaves no empty folder behind: each folder it created (newest first) that holds at most
 * its lock file goes. A folder that existed before, or holds anything else, stays as it is. */
static void remove_made_dirs(void) {
    for (int i = n_made - 1; i >= 0; i--) {
        if (only_lock(made_dirs[i])) {
            char lock[4096];
            if (snprintf(lock, sizeof lock, "%s/%s", made_dirs[i], TSC_CLI_DIR_LOCK) < (int)sizeof lock) unlink(lock);
            rmdir(made_dirs[i]);
        }
        free(made_dirs[i]);
    }
    n_made = 0;
}

static int cmd_help(int argc, char **argv) {
    const char *name = NULL;
    int rc = tsc_cli_args("help", argc, argv, NULL, 0, NULL, NULL, 0, &name);
    if (rc) return rc;
    if (name && !tsc_cli_find(name)) return unknown_command("help", name);
    tsc_cli_print_usage(name, stdout);
    return 0;
}

/* OpenBLAS's pthread build starts a pool of worker threads when it is loaded (one per core, or
 * OMP_NUM_THREADS of them), which tilescope never uses: its BLAS calls run single-threaded on its own
 * OpenMP threads (analyze/blas_internal.h). Each worker maps its 128 MiB work buffer when it first
 * runs, and retries that mmap forever when it fails. Under an address-space limit (ulimit -v) on a
 * loaded machine a worker can run late: the headroom check (tsc_blas_headroom) then measures the
 * address space without its buffer, the job uses that room, the worker's mmap never succeeds, and
 * exit() waits for the worker in OpenBLAS's destructor until the process is killed. The pool can only
 * be kept from starting before OpenBLAS is loaded, i.e. before main(); so under such a limit the
 * program runs itself again with OPENBLAS_NUM_THREADS=1 (once: the variable is then set). Without a
 * limit an mmap of address space does not fail and nothing changes. */
static void blas_pool_off_under_limit(char **argv) {
    struct rlimit rl;
    if (getenv("OPENBLAS_NUM_THREADS") || getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return;
    int (*pool)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "openblas_get_num_threads");
    if (!pool || pool() <= 1) return;
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_NUM_THREADS"); /* no /proc (execv failed): carry on as before */
}

int main(int argc, char **argv) {
    blas_pool_off_under_limit(argv);
#ifdef __GLIBC__
    /* Keep freed blocks in the heap: every head replay allocates and frees tens of MiB of scratch
     * (traces, tiles, Gram matrices), and handing them back to the kernel each time cost ~10% of
     * diagnose's time in page faults (peak RSS +10 MiB). Blocks above 256 MiB are still mapped
     * on their own. */
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
    if (argc < 2) {
        tsc_cli_print_usage(NULL, stderr);
        return 2;
    }
    if (tsc_cli_is_help(argv[1])) {
        tsc_cli_print_usage(NULL, stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("tilescope %s\n", tsc_version());
        return 0;
    }
    /* An interrupted job leaves no half-written temporary beside its outputs. */
    tsc_out_cleanup_install();
    tsc_dump_set_containment(1); /* a dump's metadata is read first in a child (docs/SECURITY.md) */
    const tsc_cli_cmd_t *c = tsc_cli_find(argv[1]);
    if (!c) {
        return unknown_command(NULL, argv[1]);
    }
    for (int i = 2; i < argc; i++)
        if (tsc_cli_is_help(argv[i])) {
            tsc_cli_print_usage(c->name, stdout);
            return 0;
        }
    /* The options every command accepts (tsc_cli_global_usage), taken out of its arguments:
     * --trust-links, the user vouches for the dumps it reads, whose external links, external storage
     * and virtual datasets are then followed (docs/SECURITY.md); --max-memory BYTES, the budget of
     * util/tsc_mem.h, each one checked as it comes (the last wins). */
    int n = 2, trust = 0;
    const char *mem = NULL, *v;
    const tsc_cli_flag_t global[] = {{"--trust-links", NULL, TSC_CLI_ON, &trust, 0, 0},
                                     {"--max-memory", NULL, TSC_CLI_STR, &v, 0, 0}};
    for (int i = 2; i < argc; i++) {
        uint64_t bytes;
        v = NULL;
        int rc = tsc_cli_flag(c->name, argc, argv, &i, global, TSC_CLI_NFLAGS(global));
        if (rc > 0) return rc;
        if (rc < 0) argv[n++] = argv[i];
        if (v && tsc_mem_parse(v, &bytes) != TSC_OK)
            return tsc_cli_usage_error(c->name, "--max-memory: %s", tsc_error_last());
        if (v) mem = v;
    }
    if (trust) setenv("TSC_ALLOW_EXTERNAL", "1", 1);
    if (mem) setenv("TSC_MAX_MEMORY", mem, 1);
    int rc = c->run(n - 2, argv + 2);
    if (rc != 0) {
        remove_made_dirs();
        /* A failed job (a full disk above all) can leave an HDF5 file id whose close failed: libhdf5
         * 1.10's exit handler then flushes it again into the removed temporary and crashes. Every
         * output was already aborted (util/tsc_file.h), so leave without the exit handlers. */
        int bad = fflush(stdout) != 0;
        fflush(stderr);
        (void)bad;
        _exit(rc);
    }
    return rc;
}
