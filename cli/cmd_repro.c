/* cmd_repro.c: `tilescope repro -o DIR`: the paper's experiment in miniature. The same model, seed and batch
 * order trained under several attention policies (`tilescope train`), the diagnosis of the low-precision run's
 * capture (`tilescope diagnose`), every figure that can be drawn, the report, and DIR/outcome.md. Each step runs
 * in-process through the other commands' entry points, so it is exactly what a user would type (docs/REPRO.md). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "tsc_comm.h"
#include "tsc_figure.h"
#include "tsc_formats.h"
#include "tsc_log.h"
#include "tsc_model.h"
#include "tsc_policy.h"
#include "tsc_report.h"
#include "tsc_repro.h"
#include "tsc_strbuf.h"

const char tsc_usage_repro[] =
    "usage: tilescope repro -o DIR [--config tiny|mini|full] [--budget MINUTES] [--seed S] [options]\n"
    "The paper's experiment in miniature (docs/REPRO.md). Trains one model, seed and batch order under\n"
    "several attention policies, BF16 autocast elsewhere (DIR/runs/NAME/, `tilescope train`):\n"
    "  lp       bf16-torch in every layer; captures layer L every K steps, runs the flight recorder (every\n"
    "           layer, up to 8 dumps); with --keep-checkpoints it keeps a checkpoint every tenth of the run\n"
    "           (train's --ckpt-keep), where `tilescope rescue` reruns it from\n"
    "  hp       fp32 attention\n"
    "  lp1      bf16-torch in layer L only\n"
    "  stable   bf16-torch+stable:beta=2,eps=1e-3 in every layer\n"
    "  onetile  control: bf16-torch with one tile per sequence (+tile:q=T,k=T)\n"
    "  hpdelta  control: bf16-torch+hp-delta (delta from an FP32 O)\n"
    "lp runs first; the others replay its batches.csv. Then `tilescope diagnose` on lp's capture\n"
    "(DIR/diagnose/), every figure that can be drawn (DIR/figures/figN.png, with the runs' logs), the report\n"
    "(DIR/report.pdf, DIR/report.html) and DIR/outcome.md: per run the final, lowest and highest validation\n"
    "loss, the step of divergence (validation loss above twice its running minimum, or a non-finite loss),\n"
    "the diagnosis' accumulated delta bias (lp) and the largest W^Q spectral norm; and the commands.\n"
    "Budget: the steps are fixed per configuration (--steps to change them), so a re-run with the same\n"
    "seed gives the same files byte for byte. The budget is a cap: lp's measured time decides whether\n"
    "the controls fit (they are skipped when not); the plan is printed first.\n"
    "  -o, --out DIR       output folder, created if missing (required)\n"
    "  --config C          tiny (seconds: the test), mini (default: minutes), full (an hour per run;\n"
    "                      accelerating conditions, labelled; docs/REPRO.md)\n"
    "  --budget MINUTES    total time allowed (number; default per config: tiny 5, mini 10, full 360)\n"
    "  --seed S            weights and batch order (integer, default 1337)\n"
    "  --steps N           optimizer steps per run (integer >= 10; default per config: 30, 150, 3000); the\n"
    "                      warm-up is the config's, at most a fifth of the steps\n"
    "  --layer L           the layer captured and run alone in lp1 (integer, default 1)\n"
    "  --lr LR, --model M, --batch B, --seq-len T\n"
    "                      override the configuration's peak learning rate, model (a name or KEY=VALUE\n"
    "                      config, as `tilescope train --model`), batch and context: the regime search\n"
    "                      (docs/REPRO.md); outcome.md labels the overrides\n"
    "  --keep-checkpoints  keep lp's checkpoints of every tenth of the run (for `tilescope rescue`;\n"
    "                      about 11 x the model's parameters and AdamW moments: 214 MB for mini);\n"
    "                      default: only the latest, runs/lp/ckpt.bin\n"
    "  --dose FMT          an accelerating dose of the paper's rounding: every bf16-torch run also rounds\n"
    "                      its P-bar V products and O-bar accumulator (+FMT:pv,oacc) to FMT, a format with\n"
    "                      FP32's exponent range and fewer mantissa bits than BF16 (e8m6 ... e8m1;\n"
    "                      docs/PRESETS.md); hp is unchanged. Labelled in outcome.md, the runs' policies,\n"
    "                      the report and its captions\n"
    "On MPI (`mpirun -n N tilescope repro ...`, docs/DISTRIBUTED.md): every run trains data-parallel in N\n"
    "gradient shards, one per process (N must divide the batch; the runs are those of train's shards), lp's\n"
    "capture and flight dumps are one dump per process and a manifest, the diagnosis runs on the N\n"
    "processes, and process 0 alone prints and writes the figures, report and outcome.md.\n"
    "Exit: 0 done (whatever the outcome), 1 a step failed (its message says which), 2 usage error.\n";

/* A configuration: model and batch geometry, steps, schedule, and the default budget. */
typedef struct {
    const char *name, *model;
    int batch, seq_len;
    long long steps;
    const char *lr;
    int warmup, val_batches;
    double budget_min;
    const char *label;
} repro_cfg_t;

static const repro_cfg_t configs[] = {
    {"tiny", "gpt2-tiny", 4, 32, 30, "1e-3", 5, 2, 5, "test configuration: too short for any outcome"},
    {"mini", "gpt2-mini", 4, 128, 150, "1e-3", 20, 4, 10, "a try in minutes: far too short to diverge"},
    {"full", "gpt2-mini,ctx=1024", 2, 1024, 3000, "3e-3", 200, 8, 360,
     "accelerating conditions: peak learning rate 3e-3 (3x the trainer's default), context 1024 so the 512 tile "
     "splits each row in two as in the paper"}};

enum { RUN_LP, RUN_HP, RUN_LP1, RUN_STABLE, RUN_ONETILE, RUN_HPDELTA, N_RUNS, N_CORE = RUN_ONETILE };
static const char *const run_names[N_RUNS] = {"lp", "hp", "lp1", "stable", "onetile", "hpdelta"};
static const tsc_repro_role_t run_roles[N_RUNS] = {TSC_REPRO_LP,     TSC_REPRO_HP,      TSC_REPRO_LP_LAYER,
                                                   TSC_REPRO_STABLE, TSC_REPRO_ONETILE, TSC_REPRO_HPDELTA};

/* An argument vector with its own storage, printable as the command a user would type. */
typedef struct {
    char *v[48];
    int n;
    char buf[4096];
    size_t used;
} args_t;

static void arg(args_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void arg(args_t *a, const char *fmt, ...) {
    if (a->n >= (int)(sizeof a->v / sizeof a->v[0]) - 1 || a->used >= sizeof a->buf) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(a->buf + a->used, sizeof a->buf - a->used, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof a->buf - a->used) return;
    a->v[a->n++] = a->buf + a->used;
    a->v[a->n] = NULL;
    a->used += (size_t)k + 1;
}

/* "tilescope CMD ARGS..." into sb. */
static void args_text(tsc_strbuf_t *sb, const char *cmd, const args_t *a) {
    tsc_strbuf_printf(sb, "tilescope %s", cmd);
    for (int i = 0; i < a->n; i++) tsc_strbuf_printf(sb, " %s", a->v[i]);
}

typedef struct {
    const repro_cfg_t *cfg;
    const char *dir;
    const char *dose;  /* the dose's format name ("" none): +DOSE:pv,oacc on every bf16-torch run */
    long long steps, seed;
    int layer, warmup, ran[N_RUNS]; /* warmup: the config's, at most a fifth of the steps */
    int tile_q, tile_k;              /* lp's attention tiles: a sequence within one makes onetile vacuous */
    int keep_ckpt;                   /* --keep-checkpoints: lp keeps one every tenth (rescue forks there) */
    double budget_s, t0;
    tsc_strbuf_t cmds; /* the commands, one a line, for outcome.md */
    const tsc_comm_t *comm; /* the job's processes: each trains its shard of every run; process 0 writes */
    char launch[32];        /* "mpirun -n N " before the collective commands in outcome.md ("" on one) */
} repro_t;

/* Process 0's value of v on every process (the job's decisions: whether a run failed, the budget's). */
static int agree_int(const repro_t *r, int v) {
    int64_t w = v;
    if (r->comm->size > 1 && r->comm->bcast(r->comm->ctx, 0, &w, sizeof w) != TSC_OK)
        return tsc_cli_fail("repro", "process %d of %d: %s", r->comm->rank, r->comm->size, tsc_error_last());
    return (int)w;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The attention policy of run i ("" for hp: the trainer's fp32). */
static void run_policy(const repro_t *r, int i, char *buf, size_t cap) {
    char lp[64] = "bf16-torch";
    if (r->dose && r->dose[0]) snprintf(lp, sizeof lp, "bf16-torch+%s:pv,oacc", r->dose);
    switch (i) {
    case RUN_LP: snprintf(buf, cap, "%s", lp); break;
    case RUN_LP1: snprintf(buf, cap, "%d=%s", r->layer, lp); break;
    case RUN_STABLE: snprintf(buf, cap, "%s+stable:beta=2,eps=1e-3", lp); break;
    case RUN_ONETILE: snprintf(buf, cap, "%s+tile:q=%d,k=%d", lp, r->cfg->seq_len, r->cfg->seq_len); break;
    case RUN_HPDELTA: snprintf(buf, cap, "%s+hp-delta", lp); break;
    default: buf[0] = 0;
    }
}

/* Capture and statistics interval: ten captures per run. */
static long long every(const repro_t *r) { return r->steps / 10 > 0 ? r->steps / 10 : 1; }

/* The `tilescope train` arguments of run i. */
static void train_args(const repro_t *r, int i, args_t *a) {
    char pol[128];
    long long k = every(r);
    arg(a, "-o");
    arg(a, "%s/runs/%s", r->dir, run_names[i]);
    arg(a, "--model"), arg(a, "%s", r->cfg->model);
    arg(a, "--precision"), arg(a, "bf16");
    arg(a, "--steps"), arg(a, "%lld", r->steps);
    arg(a, "--seed"), arg(a, "%lld", r->seed);
    arg(a, "--batch"), arg(a, "%d", r->cfg->batch);
    arg(a, "--seq-len"), arg(a, "%d", r->cfg->seq_len);
    arg(a, "--lr"), arg(a, "%s", r->cfg->lr);
    arg(a, "--warmup"), arg(a, "%d", r->warmup);
    arg(a, "--val-every"), arg(a, "%lld", k);
    arg(a, "--val-batches"), arg(a, "%d", r->cfg->val_batches);
    arg(a, "--stats-every"), arg(a, "%lld", k);
    arg(a, "--ckpt-every"), arg(a, "%lld", i == RUN_LP ? k : r->steps);
    run_policy(r, i, pol, sizeof pol);
    if (pol[0]) arg(a, "--attn-policy"), arg(a, "%s", pol);
    if (r->comm->size > 1) arg(a, "--grad-shards"), arg(a, "%d", r->comm->size);
    if (i == RUN_LP) {
        arg(a, "--capture"), arg(a, "steps=0:%lld:%lld,layers=%d", r->steps, k, r->layer);
        if (r->keep_ckpt) arg(a, "--ckpt-keep"), arg(a, "11"); /* every one of the ten: where rescue forks */
        arg(a, "--flight"), arg(a, "4");
        arg(a, "--flight-keep"), arg(a, "8");  /* the newest 8: a long run keeps those before its end */
    } else {
        arg(a, "--batches"), arg(a, "%s/runs/lp/batches.csv", r->dir);
    }
    arg(a, "--quiet");
}

/* The run's log says the trainer stopped on a non-finite loss (a result, not a failure). */
static int ended_nonfinite(const char *path) {
    tsc_log_t *lg;
    if (tsc_log_read(path, "run", &lg) != TSC_OK) {
        tsc_error_clear();
        return 0;
    }
    int bad = tsc_repro_stopped_nonfinite(lg);
    tsc_log_free(lg);
    return bad;
}

/* Trains run i; 0, or 1 after the message (a run that stops on a non-finite loss is recorded, not a failure). */
static int train_run(repro_t *r, int i) {
    args_t a = {.n = 0};
    train_args(r, i, &a);
    tsc_strbuf_t line;
    tsc_strbuf_init(&line);
    args_text(&line, "train", &a);
    printf("[train %s] %s%s\n", run_names[i], r->launch, tsc_strbuf_str(&line));
    fflush(stdout);
    tsc_strbuf_printf(&r->cmds, "%s%s\n", r->launch, tsc_strbuf_str(&line));
    tsc_strbuf_free(&line);
    double t = now_s();
    int rc = tsc_cmd_train(a.n, a.v);
    char log[1200];
    snprintf(log, sizeof log, "%s/runs/%s/log.csv", r->dir, run_names[i]);
    if (r->comm->rank == 0 && rc == 1 && ended_nonfinite(log)) { /* process 0 holds the log */
        printf("      %s stopped on a non-finite loss: recorded as diverged\n", run_names[i]);
        rc = 0;
    }
    if ((rc = agree_int(r, rc)) && r->comm->rank != 0) return rc; /* process 0 says why */
    if (rc) return tsc_cli_fail("repro", "train %s failed (exit %d)", run_names[i], rc);
    r->ran[i] = 1;
    printf("      %.1f s\n", now_s() - t);
    return 0;
}

/* Runs lp, then the other core runs, then the controls when lp's measured time says they fit. */
static int train_all(repro_t *r) {
    double t = now_s();
    int rc = train_run(r, RUN_LP);
    if (rc) return rc;
    double per_run = now_s() - t, left = r->budget_s - (now_s() - r->t0);
    double core = per_run * (N_CORE - 1), ctrl = per_run * (N_RUNS - N_CORE), reserve = 0.1 * r->budget_s;
    int controls = agree_int(r, core + ctrl <= left - reserve); /* process 0's clock decides for all */
    printf("budget: lp took %.1f s; the other core runs need about %.0f s, the controls %.0f s more, "
           "%.0f s of the budget left (%.0f s kept for the diagnosis and figures): controls %s\n",
           per_run, core, ctrl, left, reserve, controls ? "run" : "skipped");
    if (core > left)
        printf("budget: warning: the core runs will overrun the budget by about %.0f s (they run anyway; "
               "--steps shortens them)\n", core - left);
    for (int i = RUN_HP; i < N_RUNS; i++)
        if ((i < N_CORE || controls) && (rc = train_run(r, i))) return rc;
    return 0;
}

static int print_plan(const repro_t *r) {
    const repro_cfg_t *c = r->cfg;
    printf("repro: config %s (%s)\n", c->name, c->label);
    printf("  model %s, BF16 autocast, batch %d x %d tokens, %lld steps per run, peak lr %s, warm-up %d, "
           "seed %lld\n", c->model, c->batch, c->seq_len, r->steps, c->lr, r->warmup, r->seed);
    printf("  runs: lp hp lp1 stable, then the controls onetile hpdelta if the budget allows (%.1f min in all)\n",
           r->budget_s / 60);
    printf("  lp captures layer %d every %lld steps, runs the flight recorder (last 4 steps, every layer) and %s "
           "every %lld steps; the others replay lp's batches.csv\n", r->layer, every(r),
           r->keep_ckpt ? "keeps a checkpoint" : "checkpoints (the latest kept: --keep-checkpoints keeps each)", every(r));
    if (r->comm->size > 1)
        printf("  on %d processes: every run data-parallel with --grad-shards %d (%d rows of each batch per process); "
               "lp's capture and flight dumps are a manifest over one dump per process\n", r->comm->size,
               r->comm->size, c->batch / r->comm->size);
    if (c->seq_len <= r->tile_q && c->seq_len <= r->tile_k)
        printf("  note: %d tokens fit in one %d x %d tile, so onetile computes what lp computes (a vacuous "
               "control here)\n", c->seq_len, r->tile_q, r->tile_k);
    printf("  then: diagnose lp's capture -> %s/diagnose/, figures -> %s/figures/, %s/report.pdf, %s/outcome.md\n",
           r->dir, r->dir, r->dir, r->dir);
    fflush(stdout);
    return 0;
}

/* The logs as figure sources ("lp=DIR/runs/lp/log.csv", lp first: it is the capture's run) into specs. */
static int log_specs(const repro_t *r, char specs[N_RUNS][1200], const char *v[N_RUNS]) {
    int n = 0;
    for (int i = 0; i < N_RUNS; i++)
        if (r->ran[i]) {
            snprintf(specs[n], sizeof specs[n], "%s=%s/runs/%s/log.csv", run_names[i], r->dir, run_names[i]);
            v[n] = specs[n];
            n++;
        }
    return n;
}

/* tsc_figure_write_dir's report of each figure into repro's notes: "Drawn: a, b" and the missing ones with the
 * reason (without the message's own "id:" prefix). */
typedef struct {
    tsc_strbuf_t *notes, missing;
    int drawn;
} fig_notes_t;

static void note_figure(void *user, const char *id, tsc_status_t st, const char *msg) {
    fig_notes_t *n = user;
    if (st == TSC_OK) {
        tsc_strbuf_printf(n->notes, "%s%s", n->drawn++ ? ", " : "Drawn: ", id);
        return;
    }
    if (strncmp(msg, id, strlen(id)) == 0 && msg[strlen(id)] == ':') msg += strlen(id) + 1;
    tsc_strbuf_printf(&n->missing, "- %s:%s%s\n", id, *msg == ' ' ? "" : " ", msg);
    tsc_error_clear();
}

/* Every figure into DIR/figures/ (the ones without data listed with the reason in notes), then the report (src:
 * every run's log; src_lp: lp's alone). */
static int figures_and_report(repro_t *r, tsc_figure_src_t *src, tsc_figure_src_t *src_lp, tsc_strbuf_t *notes,
                              const char *logflags) {
    char figdir[1100], path[1200];
    snprintf(figdir, sizeof figdir, "%s/figures", r->dir);
    if (tsc_cli_make_dir(figdir)) return tsc_cli_fail("repro", "%s: cannot create the folder: %s", figdir, strerror(errno));
    tsc_figure_opts_t fo;
    tsc_figure_opts_init(&fo);
    fo.dpi = 150;
    char captured[128];
    tsc_figure_ids_where(0, 0, TSC_FIG_RUNS_CAPTURED, ", ", captured, sizeof captured);
    tsc_strbuf_printf(&r->cmds, "tilescope figure FIG --from %s/diagnose%s --dpi 150 -o %s/FIG.png"
                                "   (each FIG of `tilescope figure --list` but %s)\n"
                                "tilescope figure FIG --from %s/diagnose --log lp=%s/runs/lp/log.csv --log-same-run "
                                "--dpi 150 -o %s/FIG.png   (FIG: %s)\n",
                      r->dir, logflags, figdir, captured, r->dir, r->dir, figdir, captured);
    fig_notes_t fn = {notes, {0}, 0};
    tsc_strbuf_init(&fn.missing);
    /* the captured run's figures (fig1's loss link, fig13's ties beside the loss) from lp's log alone */
    (void)tsc_figure_write_dir(src, src_lp, figdir, &fo, note_figure, &fn, NULL); /* fails only on NULL */
    if (fn.missing.len)
        tsc_strbuf_printf(notes, ".\n\nNot drawn (no data for them in these runs):\n\n%s", tsc_strbuf_str(&fn.missing));
    else tsc_strbuf_puts(notes, ".\n");
    tsc_strbuf_free(&fn.missing);
    printf("      figures in %s/\n", figdir);
    snprintf(path, sizeof path, "%s/report.pdf", r->dir);
    tsc_strbuf_printf(&r->cmds, "tilescope report %s/diagnose%s --log-same-run -o %s\n", r->dir, logflags, path);
    printf("[report] %s\n", path);
    fflush(stdout);
    tsc_report_opts_t ro;
    tsc_report_opts_init(&ro);
    tsc_report_info_t info;
    if (tsc_report_write(src, path, &ro, &info) != TSC_OK) return tsc_cli_fail("repro", "report: %s", tsc_error_last());
    printf("      %d pages; %s\n", info.n_pages, info.html_path);
    return 0;
}

/* DIR/outcome.md (tsc_repro_outcome_write), and its table on stdout. */
static int write_outcome(repro_t *r, const tsc_jv_t *sm, const tsc_strbuf_t *fignotes) {
    char pol[N_RUNS][128], logs[N_RUNS][1200], wq[N_RUNS][1200], flight[1100], path[1200];
    tsc_repro_run_t runs[N_RUNS];
    for (int i = 0; i < N_RUNS; i++) {
        run_policy(r, i, pol[i], sizeof pol[i]);
        if (!pol[i][0]) snprintf(pol[i], sizeof pol[i], "fp32");
        snprintf(logs[i], sizeof logs[i], "%s/runs/%s/log.csv", r->dir, run_names[i]);
        snprintf(wq[i], sizeof wq[i], "%s/runs/%s/wq_norms.csv", r->dir, run_names[i]);
        runs[i] = (tsc_repro_run_t){run_names[i], pol[i], run_roles[i], logs[i], wq[i], i == RUN_LP ? sm : NULL,
                                    r->ran[i] ? NULL : "budget"};
    }
    tsc_repro_outcome_t *oc;
    if (tsc_repro_outcome_compute(runs, N_RUNS, r->layer, &oc) != TSC_OK) return tsc_cli_fail("repro", "%s", tsc_error_last());
    const repro_cfg_t *c = r->cfg;
    snprintf(flight, sizeof flight, "%s/runs/%s", r->dir, run_names[RUN_LP]);
    snprintf(path, sizeof path, "%s/outcome.md", r->dir);
    tsc_repro_doc_t doc = {c->name,  c->label,  c->model,  c->lr, c->batch, c->seq_len, r->warmup, r->steps, r->seed,
                           r->tile_q, r->tile_k, r->dir, sm, flight, tsc_strbuf_str(fignotes), tsc_strbuf_str(&r->cmds),
                           r->keep_ckpt};
    tsc_status_t st = tsc_repro_outcome_write(oc, &doc, path);
    tsc_strbuf_t table;
    tsc_strbuf_init(&table);
    tsc_status_t tst = tsc_repro_outcome_table(oc, &table); /* printed even when outcome.md failed */
    if (st == TSC_OK) st = tst;
    printf("\n%s\n%s\n", tsc_strbuf_str(&table), path);
    tsc_strbuf_free(&table);
    tsc_repro_outcome_free(oc);
    return st == TSC_OK ? 0 : tsc_cli_fail("repro", "%s", tsc_error_last());
}

/* Process 0's part: every figure, the report and outcome.md from the diagnosis in ddir. */
static int publish(repro_t *r, const char *ddir) {
    char specs[N_RUNS][1200], logflags[N_RUNS * 1300] = "";
    const char *v[N_RUNS];
    int n = log_specs(r, specs, v);
    for (int i = 0; i < n; i++) snprintf(logflags + strlen(logflags), sizeof logflags - strlen(logflags), " --log %s", v[i]);
    tsc_figure_src_t *src, *src_lp;
    if (tsc_figure_src_open_logs(ddir, v, n, &src) != TSC_OK) return tsc_cli_fail("repro", "%s", tsc_error_last());
    if (tsc_figure_src_open_logs(ddir, v, 1, &src_lp) != TSC_OK) {
        tsc_figure_src_close(src);
        return tsc_cli_fail("repro", "%s", tsc_error_last());
    }
    /* fig1's loss link reads the first log, lp's: the capture's run (the report's too: lp's log comes first) */
    tsc_figure_src_set_same_run(src, 1);
    tsc_figure_src_set_same_run(src_lp, 1);
    tsc_strbuf_t notes;
    tsc_strbuf_init(&notes);
    int rc = figures_and_report(r, src, src_lp, &notes, logflags);
    if (!rc) rc = write_outcome(r, tsc_figure_src_summary(src), &notes);
    tsc_strbuf_free(&notes);
    tsc_figure_src_close(src_lp);
    tsc_figure_src_close(src);
    return rc;
}

/* diagnose (on every process) -> figures -> report -> outcome.md (process 0). */
static int analyse(repro_t *r) {
    char cap[1100], ddir[1100];
    snprintf(cap, sizeof cap, "%s/runs/lp/capture.h5", r->dir);
    snprintf(ddir, sizeof ddir, "%s/diagnose", r->dir);
    char *dargv[] = {cap, "-o", ddir, "--quiet", NULL};
    tsc_strbuf_printf(&r->cmds, "%stilescope diagnose %s -o %s --quiet\n", r->launch, cap, ddir);
    printf("[diagnose] %stilescope diagnose %s -o %s --quiet\n", r->launch, cap, ddir);
    fflush(stdout);
    int drc = tsc_cmd_diagnose(4, dargv); /* collective: its work items spread over the processes */
    if (agree_int(r, drc != 0 && drc != TSC_CLI_EXIT_POOR_FIT))
        return r->comm->rank == 0 ? tsc_cli_fail("repro", "diagnose %s failed", cap) : 1;
    /* process 0 draws and writes while the others wait for its status, the job's */
    return agree_int(r, r->comm->rank == 0 ? publish(r, ddir) : 0);
}

int tsc_cmd_repro(int argc, char **argv) {
    const char *cmd = "repro", *config = "mini", *model = NULL, *dose = NULL;
    repro_t r = {.dir = NULL, .steps = -1, .seed = 1337, .layer = 1};
    double budget = -1, steps = -1, layer = 1, lr = -1, batch = -1, seq_len = -1;
    const tsc_cli_flag_t flags[] = {{"--out", "-o", TSC_CLI_STR, &r.dir, 0, 0},
                                    {"--config", NULL, TSC_CLI_STR, &config, 0, 0},
                                    {"--budget", NULL, TSC_CLI_DOUBLE, &budget, 0.01, 1e6},
                                    {"--seed", NULL, TSC_CLI_LLONG, &r.seed, 0, 4611686018427387904.0},
                                    {"--steps", NULL, TSC_CLI_WHOLE, &steps, 10, 1e9},
                                    {"--layer", NULL, TSC_CLI_WHOLE, &layer, 0, 63},
                                    {"--lr", NULL, TSC_CLI_DOUBLE, &lr, 1e-8, 1},
                                    {"--model", NULL, TSC_CLI_STR, &model, 0, 0},
                                    {"--batch", NULL, TSC_CLI_WHOLE, &batch, 1, 4096},
                                    {"--seq-len", NULL, TSC_CLI_WHOLE, &seq_len, 2, 1 << 20},
                                    {"--dose", NULL, TSC_CLI_STR, &dose, 0, 0},
                                    {"--keep-checkpoints", NULL, TSC_CLI_ON, &r.keep_ckpt, 0, 0}};
    const char *operand = NULL;
    int rc = tsc_cli_args(cmd, argc, argv, flags, TSC_CLI_NFLAGS(flags), NULL, NULL, 0, &operand);
    if (rc) return rc;
    if (operand) return tsc_cli_usage_error(cmd, "unexpected argument '%s' (the output folder goes after -o)", operand);
    if (!r.dir) return tsc_cli_usage_error(cmd, "-o DIR is required");
    if (strlen(r.dir) > 900) return tsc_cli_usage_error(cmd, "-o: path too long");
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
        if (strcmp(config, configs[i].name) == 0) r.cfg = &configs[i];
    if (!r.cfg) return tsc_cli_usage_error(cmd, "--config: expected tiny, mini or full, got '%s'", config);
    /* overrides: a copy of the configuration, labelled */
    repro_cfg_t cfg = *r.cfg;
    char lr_text[32], label[1024], over[512] = "";
    if (lr > 0) snprintf(lr_text, sizeof lr_text, "%g", lr), cfg.lr = lr_text;
    if (model) {
        if (strlen(model) > 400) return tsc_cli_usage_error(cmd, "--model: too long");
        cfg.model = model;
    }
    if (batch > 0) cfg.batch = (int)batch;
    if (seq_len > 0) cfg.seq_len = (int)seq_len;
    if (lr > 0) snprintf(over + strlen(over), sizeof over - strlen(over), ", peak lr %s", cfg.lr);
    if (model) snprintf(over + strlen(over), sizeof over - strlen(over), ", model %s", cfg.model);
    if (batch > 0) snprintf(over + strlen(over), sizeof over - strlen(over), ", batch %d", cfg.batch);
    if (seq_len > 0) snprintf(over + strlen(over), sizeof over - strlen(over), ", context %d", cfg.seq_len);
    char dose_name[32] = "", dose_text[256] = "";
    if (dose) {
        tsc_format_t df;
        if (tsc_format_parse(dose, &df) != TSC_OK) return tsc_cli_usage_error(cmd, "--dose: %s", tsc_error_last());
        int m = tsc_format_mant_bits(df);
        if (tsc_format_exp_bits(df) != 8 || m > 7)
            return tsc_cli_usage_error(cmd, "--dose %s: expected a format with FP32's exponent range and at most BF16's "
                                       "7 mantissa bits (bf16, e8m6 ... e8m1); %s has %d exponent and %d mantissa bits",
                                       dose, tsc_format_name(df), tsc_format_exp_bits(df), m);
        if (m < 7) {
            snprintf(dose_name, sizeof dose_name, "%s", tsc_format_name(df));
            snprintf(dose_text, sizeof dose_text,
                     "; accelerating dose: P-bar V and O-bar rounded to %s (%d mantissa bits; BF16 has 7) in every "
                     "bf16-torch run", dose_name, m);
        }
    }
    r.dose = dose_name;
    if (over[0] || dose_text[0]) {
        snprintf(label, sizeof label, "%s%s%s%s", cfg.label, over[0] ? "; overridden:" : "", over[0] ? over + 1 : "",
                 dose_text);
        cfg.label = label;
    }
    r.cfg = &cfg;
    tsc_model_config_t mc;
    if ((rc = tsc_cli_comm_start(cmd))) return rc;
    r.comm = tsc_cli_comm();
    if (r.comm->size > 1) {
        if (r.cfg->batch % r.comm->size)
            return tsc_cli_usage_error(cmd, "on %d processes each run trains %d shards of the batch, and %d does not "
                                       "divide the batch of %d (--batch, or another process count)", r.comm->size,
                                       r.comm->size, r.comm->size, r.cfg->batch);
        snprintf(r.launch, sizeof r.launch, "mpirun -n %d ", r.comm->size);
        if (r.comm->rank != 0 && !freopen("/dev/null", "w", stdout)) /* process 0 prints the plan and the outcome */
            return tsc_cli_fail(cmd, "process %d: cannot silence its output: %s", r.comm->rank, strerror(errno));
    }
    if (tsc_model_config_parse(r.cfg->model, &mc) != TSC_OK)
        return model ? tsc_cli_usage_error(cmd, "--model: %s", tsc_error_last()) : tsc_cli_fail(cmd, "%s", tsc_error_last());
    if (r.cfg->seq_len > mc.max_T)
        return tsc_cli_usage_error(cmd, "--seq-len %d: model %s has a context of %d (add ,ctx=%d to --model)",
                                   r.cfg->seq_len, r.cfg->model, mc.max_T, r.cfg->seq_len);
    if ((int)layer >= mc.n_layer)
        return tsc_cli_usage_error(cmd, "--layer %d: model %s has layers 0 to %d", (int)layer, r.cfg->model, mc.n_layer - 1);
    r.layer = (int)layer;
    r.steps = steps > 0 ? (long long)steps : r.cfg->steps;
    r.warmup = r.steps / 5 < r.cfg->warmup ? (int)(r.steps / 5) : r.cfg->warmup;
    r.budget_s = 60 * (budget > 0 ? budget : r.cfg->budget_min);
    char lp_pol[128];
    tsc_policy_t lp;
    run_policy(&r, RUN_LP, lp_pol, sizeof lp_pol);
    if (tsc_policy_parse(lp_pol, &lp) != TSC_OK) return tsc_cli_fail(cmd, "%s", tsc_error_last());
    tsc_policy_tiles(&lp, &r.tile_q, &r.tile_k);
    char runs[1100];
    snprintf(runs, sizeof runs, "%s/runs", r.dir);
    const char *bad = NULL;
    if (r.comm->rank == 0) bad = tsc_cli_make_dir(r.dir) ? r.dir : tsc_cli_make_dir(runs) ? runs : NULL;
    if (bad) rc = tsc_cli_fail(cmd, "%s: cannot create the folder: %s", bad, strerror(errno));
    if ((rc = agree_int(&r, rc))) return rc; /* every process leaves when process 0 cannot make the folder */
    r.t0 = now_s();
    tsc_strbuf_init(&r.cmds);
    print_plan(&r);
    rc = train_all(&r);
    if (!rc) rc = analyse(&r);
    tsc_strbuf_free(&r.cmds);
    if (!rc) printf("repro done in %.1f s\n", now_s() - r.t0);
    return rc;
}
