/* cli.h: the `tilescope` command. One subcommand per file (cmd_<name>.c); each entry point
 * takes the arguments after the subcommand name and returns the exit code:
 * 0 success, 1 the job failed (bad file, bad data), 2 usage error. Only main() exits. */
#ifndef TSC_CLI_H
#define TSC_CLI_H

#include <stdio.h>

#include "tsc_analysis.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;  /* one line for `tilescope help` */
    const char *usage;    /* full usage text for `tilescope help <name>` and --help */
} tsc_cli_cmd_t;

/* The command table (main.c). */
extern const tsc_cli_cmd_t tsc_cli_commands[];
/* The paragraph of `tilescope help` on the options every command accepts (main.c). */
extern const char tsc_cli_global_usage[];
const tsc_cli_cmd_t *tsc_cli_find(const char *name);

/* Prints "tilescope <cmd>: <message>" and the command's usage to stderr; returns 2. */
int tsc_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "tilescope <cmd>: <message>" to stderr; returns 1. */
int tsc_cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* True when arg is -h or --help (then print usage to stdout and return 0). */
int tsc_cli_is_help(const char *arg);
void tsc_cli_print_usage(const char *cmd, FILE *to);

/* Parse a whole-string number for flag, range-checked [lo, hi]. 0 on success; on failure
 * prints a usage error and returns 2 (so callers can `return rc`). */
int tsc_cli_parse_long(const char *cmd, const char *flag, const char *s, long lo, long hi, long *out);
int tsc_cli_parse_double(const char *cmd, const char *flag, const char *s, double lo, double hi,
                         double *out);

/* A command's flags as a table, parsed by tsc_cli_flag. ON / OFF set an int to 1 / 0 and take no
 * value; the others take the next argument: STR keeps it (const char *), LIST appends it to a
 * tsc_cli_list_t (a repeatable flag, at most its cap), SET parses it into a tsc_select_set_t
 * (tsc_select_set_parse: all | N | start:stop[:stride] | a,b,...), DOUBLE parses a number in
 * [lo, hi] into a double, INT / LONG / LLONG an integer in [lo, hi] into an int / long / long long,
 * WHOLE an integer in [lo, hi] into a double. A value that does not parse is a usage error naming
 * the flag. */
typedef enum {
    TSC_CLI_ON, TSC_CLI_OFF, TSC_CLI_STR, TSC_CLI_LIST, TSC_CLI_SET, TSC_CLI_DOUBLE, TSC_CLI_INT, TSC_CLI_LONG,
    TSC_CLI_LLONG, TSC_CLI_WHOLE
} tsc_cli_kind_t;

typedef struct {
    const char *name, *alias;  /* "--out", "-o" (alias may be NULL) */
    tsc_cli_kind_t kind;
    void *dst;
    double lo, hi;             /* the range of a number */
} tsc_cli_flag_t;

/* The values of a repeatable flag, in the order given: v has room for cap of them (the caller's
 * storage: TSC_CLI_LIST(array) for an array, or {v, 0, argc} for one value per argument). */
#define TSC_CLI_LIST_MAX 16 /* the cap of most repeatable flags (a figure source holds 16 training logs) */
typedef struct {
    const char **v;
    int n, cap;
} tsc_cli_list_t;
#define TSC_CLI_LIST(array) {(array), 0, (int)(sizeof(array) / sizeof((array)[0]))}

/* The rows of --steps, --layers, --heads and --batches SET, into the sets of the tsc_select_t *sel
 * (four initializers of a flag table). */
#define TSC_CLI_SELECT_FLAGS(sel)                                                                                   \
    {"--steps", NULL, TSC_CLI_SET, &(sel)->steps, 0, 0}, {"--layers", NULL, TSC_CLI_SET, &(sel)->layers, 0, 0},     \
        {"--heads", NULL, TSC_CLI_SET, &(sel)->heads, 0, 0}, {"--batches", NULL, TSC_CLI_SET, &(sel)->batches, 0, 0}

/* Parses argv[*i] (and its value) when it is one of the n flags of f. Returns 0 when parsed, 2
 * after printing a usage error, -1 when argv[*i] is none of them. */
int tsc_cli_flag(const char *cmd, int argc, char **argv, int *i, const tsc_cli_flag_t *f, size_t n);
#define TSC_CLI_NFLAGS(table) (sizeof(table) / sizeof((table)[0]))
/* An argument no flag took: a usage error "unknown option" when it starts with '-' (a lone "-"
 * is an operand when lone_dash), else the command's one operand into *slot: a usage error
 * "unexpected argument" naming both when *slot is already set, "unknown argument" when slot is
 * NULL (a command that takes no operand). Returns 0 or 2. */
int tsc_cli_operand(const char *cmd, const char *a, int lone_dash, const char **slot);
/* A command's own parser of flags no table can say (the convention of tsc_cli_flag): a flag whose
 * value has structure, a second operand. It matches its flags with tsc_cli_flag too. */
typedef int (*tsc_cli_flag_fn)(const char *cmd, int argc, char **argv, int *i, void *ctx);
/* Parses all of argv: each argument through more(ctx) when more is not NULL, else the table f,
 * else as the one operand (tsc_cli_operand with lone_dash; operand NULL: none is taken).
 * Returns 0, or 2 after a usage error. */
int tsc_cli_args(const char *cmd, int argc, char **argv, const tsc_cli_flag_t *f, size_t n, tsc_cli_flag_fn more,
                 void *ctx, int lone_dash, const char **operand);

/* Warns on stderr for each training log of src whose steps do not cover the analysed steps
 * (tsc_figure_src_log_cover; cmd_figure.c). */
struct tsc_figure_src;
void tsc_cli_warn_log_cover(const char *cmd, const struct tsc_figure_src *src);

/* Creates folder dir unless it exists as a folder. 0 on success; -1 with errno set otherwise
 * (ENOTDIR when dir exists and is not a folder). A folder it created is removed again when the
 * command fails (exit status not 0) while the folder holds nothing but TSC_CLI_DIR_LOCK. */
int tsc_cli_make_dir(const char *dir);

/* The lock file of an analysis folder (tsc_cli_analysis_ready). */
#define TSC_CLI_DIR_LOCK ".tilescope.lock"

/* The analysis flags analyze and diagnose share (--hp --lp --select --steps --layers --heads
 * --batches --alpha --min-ulp --tie-eps --terms): parses argv[*i] (and its value) into o.
 * Returns 0 when parsed, 2 after printing a usage error, -1 when argv[*i] is none of them. */
int tsc_cli_analysis_flag(const char *cmd, int argc, char **argv, int *i, tsc_analysis_opts_t *o);
/* Checks that o's --hp/--lp policies parse: 0, or 2 after printing a usage error. */
int tsc_cli_analysis_check(const char *cmd, const tsc_analysis_opts_t *o);

/* What analyze and diagnose share after their flags: DUMP and -o DIR given, o's policies parse,
 * DIR exists (made if missing) and is locked for this writer (DIR/.tilescope.lock, tsc_dir_lock:
 * *lock_fd, released by tsc_cli_summary_out or tsc_cli_analysis_unlock); sets o->progress to
 * the progress on stderr unless quiet (tsc_cli_progress_init). 0, or the exit code after printing the error ("DIR is being
 * written by another tilescope analysis (pid N)": 1). */
int tsc_cli_analysis_ready(const char *cmd, const char *dump, const char *outdir, int quiet, tsc_analysis_opts_t *o,
                           int *lock_fd);
/* Releases the folder lock of tsc_cli_analysis_ready (the lock file stays); -1 is a no-op. */
void tsc_cli_analysis_unlock(const char *outdir, int lock_fd);
/* After a failed analysis run: rank 0 releases the lock and prints the error; every process of the
 * job waits for that, so a launcher does not stop rank 0 before it has spoken. Returns 1. */
int tsc_cli_analysis_failed(const char *cmd, const char *outdir, int lock_fd, const tsc_analysis_opts_t *o);
/* Writes the summary j to DIR/summary.json and, when print, to stdout; frees j; releases the
 * folder lock lock_fd. 0, or 1 after printing the error. */
int tsc_cli_summary_out(const char *cmd, const char *outdir, tsc_json_t *j, int print, int lock_fd);

/* "did you mean" (suggest.c): the command name / the option of cmd's usage text (or one every
 * command accepts; cmd NULL: the options of `tilescope` itself, --help and --version) nearest to
 * word by edit distance (a transposition is one edit), when close
 * enough to be a typo, or the one that word begins; the part of word after a '=' is ignored.
 * Returns buf, or NULL when none is near. */
const char *tsc_cli_nearest_command(const char *word, char *buf, size_t cap);
const char *tsc_cli_nearest_option(const char *cmd, const char *word, char *buf, size_t cap);
/* The value of flag as cmd's usage text names it (else the text of the options every command
 * accepts): the word after "FLAG " when it is a placeholder (FILE, N, [L=]POLICY, fp32|bf16,
 * A=NAME), and a remark in parentheses right after it ("BYTES (suffix K, M, G, T)"). Returns buf,
 * or NULL when no text names one. */
const char *tsc_cli_value_name(const char *cmd, const char *flag, char *buf, size_t cap);
/* The usage error "unknown option 'WORD'; did you mean '--x'?" (or without the question): 2. */
int tsc_cli_unknown_option(const char *cmd, const char *word);

/* Progress of a long job on stderr (progress.c): a bar redrawn with \r when stderr is a terminal,
 * else a plain line each tenth of a phase or every few seconds, with the time elapsed and an
 * estimate of the time left. tsc_cli_progress_init returns the callback to hand to the library
 * (NULL when quiet); tsc_cli_progress_report feeds it by hand (a library callback of another
 * shape). tsc_cli_progress_done ends the line of a bar left unfinished (a failed job: every
 * message of tsc_cli_fail / tsc_cli_usage_error calls it first). */
typedef struct {
    tsc_progress_t p;
    const char *cmd;
    char phase[64];
    int tty, bar_open, last_tenth;
    double t0, last, prev; /* the phase's start, the last line drawn, the last call (or the start) */
} tsc_cli_progress_t;
tsc_progress_t *tsc_cli_progress_init(tsc_cli_progress_t *r, const char *cmd, int quiet);
void tsc_cli_progress_report(tsc_cli_progress_t *r, const char *phase, long long done, long long total);
void tsc_cli_progress_done(void);

/* Subcommands. */
int tsc_cmd_info(int argc, char **argv);
int tsc_cmd_synth(int argc, char **argv);
int tsc_cmd_train(int argc, char **argv);
int tsc_cmd_pack(int argc, char **argv);
int tsc_cmd_replay(int argc, char **argv);
int tsc_cmd_fit(int argc, char **argv);
int tsc_cmd_kernels(int argc, char **argv);
int tsc_cmd_mpi_info(int argc, char **argv);
int tsc_cmd_merge(int argc, char **argv);
int tsc_cmd_check(int argc, char **argv);
int tsc_cmd_diff(int argc, char **argv);
int tsc_cmd_analyze(int argc, char **argv);
/* diagnose's exit status when lp's replay does not reproduce the dump's captured O (bit-identical share
 * below TSC_FIT_WARN_SHARE): summary.json is written, but it describes the preset, not the run. Callers
 * that run diagnose in-process (demo, repro, rescue) take it as done. */
#define TSC_CLI_EXIT_POOR_FIT 3

/* "s" after a count other than 1: "%d step%s", n, TSC_CLI_S(n). */
#define TSC_CLI_S(n) ((n) == 1 ? "" : "s")
int tsc_cmd_diagnose(int argc, char **argv);
int tsc_cmd_explain(int argc, char **argv);
int tsc_cmd_figure(int argc, char **argv);
int tsc_cmd_figure_attn(int argc, char **argv, int grid);
int tsc_cmd_view(int argc, char **argv);
int tsc_cmd_compare(int argc, char **argv);
int tsc_cmd_report(int argc, char **argv);
int tsc_cmd_demo(int argc, char **argv);
int tsc_cmd_import(int argc, char **argv);
int tsc_cmd_repro(int argc, char **argv);
int tsc_cmd_rescue(int argc, char **argv);

/* The job's processes (mpi.c, docs/DISTRIBUTED.md). tsc_cli_comm_start initialises MPI when a
 * launcher started the program (a command that can run on several processes calls it first);
 * 0 on success, else the exit code after a message. tsc_cli_comm is MPI_COMM_WORLD after a
 * start under a launcher, else the one-process communicator. tsc_cli_comm_built: 1 when this
 * build has MPI. */
struct tsc_comm;
int tsc_cli_comm_start(const char *cmd);
const struct tsc_comm *tsc_cli_comm(void);
int tsc_cli_comm_built(void);

#endif
