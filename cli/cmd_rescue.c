/* cmd_rescue.c: `tilescope rescue RUN -o DIR`: a failed training run diagnosed from its flight recorder and rerun
 * with the fix the diagnosis recommends. The steps are the other commands', in-process, each printed as the command
 * a user would type (docs/REPRO.md, "Diagnose, fix and rerun"):
 *   1. the run's divergence (tsc_repro_diverged_at) and the flight dump of the trigger before it;
 *   2. `tilescope diagnose DUMP -o DIR/diagnose`, told nothing of the run's policy or layers;
 *   3. the recommended fix of the top at-risk head (tsc_repro_fix_choose), appended to each of the run's policies;
 *   4. `tilescope train --fork RUN@STEP -o DIR/fixed --attn-policy ...` from the newest kept checkpoint before the
 *      dump's first step (the same weights, batches and settings up to there);
 *   5. DIR/loss.png (fig2: the run's and the rerun's validation loss) and DIR/rescue.md. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "tsc_dump.h"
#include "tsc_file.h"
#include "tsc_figure.h"
#include "tsc_log.h"
#include "tsc_repro.h"
#include "tsc_strbuf.h"
#include "tsc_train.h"

const char tsc_usage_rescue[] =
    "usage: tilescope rescue RUN -o DIR [--fix auto|MODIFIER] [--dump FILE] [--from STEP] [-q]\n"
    "A training run (a `tilescope train` folder) that diverged, diagnosed from its flight recorder and\n"
    "rerun with the fix the diagnosis recommends:\n"
    "  1. the step where RUN diverged (validation loss above twice its running minimum, or a\n"
    "     non-finite loss) and the flight dump (RUN/flight*.h5) of the last trigger before it;\n"
    "  2. tilescope diagnose DUMP -o DIR/diagnose, told nothing of the run's policy or layers;\n"
    "  3. the fix recommended for the at-risk head with the largest accumulated delta bias (its policy\n"
    "     modifier, e.g. +stable:beta=2 or +hp-delta), appended to each of RUN's attention policies;\n"
    "  4. a fork of RUN (`tilescope train --fork`) into DIR/fixed with those policies, from RUN's\n"
    "     newest kept checkpoint before the dump's first step (RUN trained with `--ckpt-keep`): the\n"
    "     same weights, batches and settings up to there;\n"
    "  5. DIR/loss.png (both validation-loss curves) and DIR/rescue.md (what was found, what was\n"
    "     done, both runs' outcome, the commands).\n"
    "  -o, --out DIR       output folder, created if missing (required)\n"
    "  --fix F             auto (default: the diagnosis' recommendation) or a policy modifier to apply\n"
    "                      instead (+stable:beta=2, +hp-delta, ...; docs/PRESETS.md)\n"
    "  --dump FILE         the flight dump to diagnose (default: chosen as in 1.)\n"
    "  --from STEP         fork from RUN/ckpt-STEP.bin (an integer; default: chosen as in 4.)\n"
    "  -q, --quiet         only the outcome\n"
    "Exit: 0 the rerun did not diverge; 3 the diagnosis found nothing to fix (no at-risk head: not\n"
    "rerun); 4 the rerun diverged too; 1 a step failed (its message says which); 2 usage error.\n";

enum { RESCUE_OK = 0, RESCUE_NOTHING = 3, RESCUE_STILL = 4 };

/* A flight dump of the run: its path, the newest step it holds and how many. */
typedef struct {
    char path[1200];
    long flight_step, n_steps;
    char trigger[64], reason[256];
} dump_t;

static int read_dump(const char *path, dump_t *out) {
    tsc_dump_t *d;
    if (tsc_dump_open(&d, path) != TSC_OK) return -1;
    size_t n;
    long v = -1;
    snprintf(out->path, sizeof out->path, "%s", path);
    out->flight_step = tsc_dump_attr_longs(d, "flight_step", &v, 1, &n) == TSC_OK && n == 1 ? v : -1;
    out->n_steps = tsc_dump_attr_longs(d, "flight_n_steps", &v, 1, &n) == TSC_OK && n == 1 ? v : 1;
    if (tsc_dump_attr_str(d, "flight_trigger", out->trigger, sizeof out->trigger) != TSC_OK) out->trigger[0] = 0;
    if (tsc_dump_attr_str(d, "flight_reason", out->reason, sizeof out->reason) != TSC_OK) out->reason[0] = 0;
    tsc_dump_close(d);
    tsc_error_clear();
    return out->flight_step >= 0 ? 0 : -1;
}

/* The dump to diagnose: the first of the episode of triggers that ends at the newest trigger at or before the
 * divergence (any trigger when the run did not diverge). The recorder fires again n_steps after a fire while
 * the spike lasts, so the triggers of one episode are at most n_steps apart; the first holds the steps where the
 * blow-up began. Returns 0, or -1 when the run has no readable flight dump. */
static int choose_dump(const char *run, long long diverged, dump_t *best) {
    DIR *dir = opendir(run);
    if (!dir) return -1;
    dump_t all[64];
    int n = 0;
    for (struct dirent *e; (e = readdir(dir)) && n < 64;) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "flight", 6) || len < 4 || strcmp(e->d_name + len - 3, ".h5")) continue;
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", run, e->d_name);
        if (!read_dump(path, &all[n]) && (diverged < 0 || all[n].flight_step <= diverged)) n++;
    }
    closedir(dir);
    if (!n) return -1;
    int last = 0;
    for (int i = 1; i < n; i++)
        if (all[i].flight_step > all[last].flight_step) last = i;
    for (int moved = 1; moved;) {  /* walk back over the episode */
        moved = 0;
        for (int i = 0; i < n; i++)
            if (all[i].flight_step < all[last].flight_step &&
                all[i].flight_step >= all[last].flight_step - (all[last].n_steps > 0 ? all[last].n_steps : 1)) {
                last = i;
                moved = 1;
                break;
            }
    }
    *best = all[last];
    return 0;
}

/* The newest kept checkpoint RUN/ckpt-S.bin with S <= limit; -1 when none. */
static long long choose_fork(const char *run, long long limit) {
    DIR *dir = opendir(run);
    long long best = -1;
    for (struct dirent *e; dir && (e = readdir(dir));) {
        long long s;
        char tail[8];
        if (sscanf(e->d_name, "ckpt-%lld.%7s", &s, tail) == 2 && !strcmp(tail, "bin") && s <= limit && s > best)
            best = s;
    }
    if (dir) closedir(dir);
    return best;
}

static int diverged_at(const char *log, long long *step) {
    tsc_log_t *lg;
    if (tsc_log_read(log, "run", &lg) != TSC_OK) return -1;
    tsc_status_t st = tsc_repro_diverged_at(lg, step);
    tsc_log_free(lg);
    return st == TSC_OK ? 0 : -1;
}

/* DIR/loss.png: fig2 of the run's and the rerun's logs. */
static int loss_figure(const char *run, const char *dir, char *png, size_t cap) {
    char a[1300], b[1300];
    snprintf(a, sizeof a, "original=%s/log.csv", run);
    snprintf(b, sizeof b, "fixed=%s/fixed/log.csv", dir);
    const char *specs[] = {a, b};
    tsc_figure_src_t *src;
    if (tsc_figure_src_open_logs(NULL, specs, 2, &src) != TSC_OK) return -1;
    tsc_figure_opts_t fo;
    tsc_figure_opts_init(&fo);
    fo.dpi = 150;
    snprintf(png, cap, "%s/loss.png", dir);
    tsc_figure_info_t info;
    tsc_status_t st = tsc_figure_write(src, "fig2", &fo, png, TSC_IMG_AUTO, &info);
    tsc_figure_src_close(src);
    return st == TSC_OK ? 0 : -1;
}

/* "tilescope train --fork SPEC -o FIXED --attn-policy P ..." with the policies the fork's run.cfg records. */
static void fork_command(tsc_strbuf_t *cmds, const char *spec, const char *fixed) {
    char path[1200], *text = NULL;
    size_t len;
    snprintf(path, sizeof path, "%s/run.cfg", fixed);
    tsc_strbuf_printf(cmds, "tilescope train --fork %s -o %s", spec, fixed);
    if (tsc_file_read_text(path, &text, &len) == TSC_OK)
        for (char *p = text; p && *p;) {
            char *nl = strchr(p, '\n');
            if (nl) *nl = 0;
            if (!strncmp(p, "attn_policy = ", 14)) tsc_strbuf_printf(cmds, " --attn-policy '%s'", p + 14);
            p = nl ? nl + 1 : NULL;
        }
    tsc_error_clear();
    free(text);
    tsc_strbuf_puts(cmds, "\n");
}

typedef struct {
    const char *run, *dir;
    long long diverged, fork_step, fixed_diverged;
    dump_t dump;
    tsc_repro_fix_t fix;
    const char *modifier, *lp;
    tsc_strbuf_t cmds;
} rescue_t;

/* DIR/rescue.md, and the outcome table on stdout. */
static int write_md(rescue_t *r, const tsc_jv_t *sm, const char *png) {
    char logs[2][1300], wq[2][1300], pol[2][700], path[1200];
    snprintf(logs[0], sizeof logs[0], "%s/log.csv", r->run);
    snprintf(wq[0], sizeof wq[0], "%s/wq_norms.csv", r->run);
    snprintf(logs[1], sizeof logs[1], "%s/fixed/log.csv", r->dir);
    snprintf(wq[1], sizeof wq[1], "%s/fixed/wq_norms.csv", r->dir);
    snprintf(pol[0], sizeof pol[0], "%s", r->lp);
    snprintf(pol[1], sizeof pol[1], "%s%s (from step %lld)", r->lp, r->modifier, r->fork_step);
    int stable = !strncmp(r->modifier, "+stable", 7);
    tsc_repro_run_t runs[2] = {
        {"original", pol[0], TSC_REPRO_LP, logs[0], wq[0], NULL, NULL},
        {"fixed", pol[1], stable ? TSC_REPRO_STABLE : TSC_REPRO_HPDELTA, logs[1], wq[1], NULL, NULL}};
    tsc_repro_outcome_t *oc;
    if (tsc_repro_outcome_compute(runs, 2, r->fix.layer >= 0 ? r->fix.layer : 0, &oc) != TSC_OK)
        return tsc_cli_fail("rescue", "%s", tsc_error_last());
    tsc_strbuf_t md, table;
    tsc_strbuf_init(&md);
    tsc_strbuf_init(&table);
    (void)tsc_repro_outcome_table(oc, &table);
    r->fixed_diverged = oc->rows[1].diverged_at;
    const tsc_repro_fix_t *f = &r->fix;
    tsc_strbuf_printf(&md, "# Rescue of %s\n\n", r->run);
    if (r->diverged >= 0) tsc_strbuf_printf(&md, "The run diverged at step %lld (validation loss above twice its "
                                                 "running minimum, or a non-finite loss).", r->diverged);
    else tsc_strbuf_printf(&md, "The run did not diverge by the rule (validation loss above twice its running "
                                "minimum, or a non-finite loss); its flight recorder fired, and that is what is read.");
    tsc_strbuf_printf(&md, " Flight dump read: %s (trigger %s at step %ld: %s; it holds up to %ld steps before).\n\n",
                      r->dump.path, r->dump.trigger[0] ? r->dump.trigger : "?", r->dump.flight_step,
                      r->dump.reason[0] ? r->dump.reason : "-", r->dump.n_steps);
    tsc_strbuf_printf(&md, "## Diagnosis (%s/diagnose/, told nothing of the run)\n\n", r->dir);
    tsc_strbuf_printf(&md, "- replayed policy: %s (%s)\n", r->lp, tsc_jv_str(sm, "lp_source") ? tsc_jv_str(sm, "lp_source") : "?");
    tsc_strbuf_printf(&md, "- at-risk layer/heads: %d, in layers %s\n", f->n_at_risk, f->layers[0] ? f->layers : "-");
    if (f->n_at_risk)
        tsc_strbuf_printf(&md, "- top head: layer %d, head %d (accumulated delta bias %+.3g at step %lld)\n"
                               "- biased step over the examined heads (stages named by FP32 substitution for at "
                               "least half of them): %s; the top head's (the set whose FP32 substitution "
                               "removes its bias): %s\n"
                               "- verdict: %s\n- recommendation: %s\n",
                          f->layer, f->head, f->delta_cumsum, f->step, f->biased_step[0] ? f->biased_step : "?",
                          f->culprit, f->verdict, f->recommendation);
    tsc_strbuf_printf(&md, "\n## Fix applied\n\n`%s` appended to every attention policy of the run%s, from the "
                           "checkpoint after step %lld (%s/fixed/; the same weights, batches and settings up to "
                           "there, so its log starts as the run's).\n\n",
                      r->modifier, f->n_at_risk && r->modifier == f->modifier ? " (the diagnosis' recommendation)"
                                                                               : " (given with --fix)",
                      r->fork_step, r->dir);
    tsc_strbuf_printf(&md, "## Outcome\n\n%s\n", tsc_strbuf_str(&table));
    tsc_strbuf_printf(&md, "%s\n\n![validation loss](loss.png)\n\n",
                      r->fixed_diverged < 0 ? "The rerun with the fix did not diverge."
                                            : "The rerun with the fix diverged too: the fix did not remove the cause "
                                              "(a learning-rate blow-up, or a rounding the fix does not reach).");
    tsc_strbuf_printf(&md, "## Commands\n\n```\n%s```\n", tsc_strbuf_str(&r->cmds));
    snprintf(path, sizeof path, "%s/rescue.md", r->dir);
    tsc_status_t st = md.nomem ? tsc_error_set(TSC_ERR_NOMEM, "rescue: out of memory")
                               : tsc_out_write_all(path, tsc_strbuf_str(&md), md.len);
    printf("\n%s\n%s\n%s\n", tsc_strbuf_str(&table), png[0] ? png : "(no loss figure)", path);
    tsc_strbuf_free(&md);
    tsc_strbuf_free(&table);
    tsc_repro_outcome_free(oc);
    return st == TSC_OK ? 0 : tsc_cli_fail("rescue", "%s", tsc_error_last());
}

int tsc_cmd_rescue(int argc, char **argv) {
    const char *cmd = "rescue", *fix = "auto", *dump = NULL;
    rescue_t r = {.run = NULL, .dir = NULL, .diverged = -1, .fork_step = -1, .fixed_diverged = -1};
    double from = -1;
    int quiet = 0;
    const tsc_cli_flag_t flags[] = {{"--out", "-o", TSC_CLI_STR, &r.dir, 0, 0},
                                    {"--fix", NULL, TSC_CLI_STR, &fix, 0, 0},
                                    {"--dump", NULL, TSC_CLI_STR, &dump, 0, 0},
                                    {"--from", NULL, TSC_CLI_WHOLE, &from, 0, 1e12},
                                    {"--quiet", "-q", TSC_CLI_ON, &quiet, 0, 0}};
    int rc = tsc_cli_args(cmd, argc, argv, flags, TSC_CLI_NFLAGS(flags), NULL, NULL, 0, &r.run);
    if (rc) return rc;
    if (!r.run) return tsc_cli_usage_error(cmd, "the run folder is required (a `tilescope train` folder)");
    if (!r.dir) return tsc_cli_usage_error(cmd, "-o DIR is required");
    if (strlen(r.dir) > 900 || strlen(r.run) > 900) return tsc_cli_usage_error(cmd, "path too long");
    if (strcmp(fix, "auto") && (fix[0] != '+' || strlen(fix) > 60))
        return tsc_cli_usage_error(cmd, "--fix: expected auto or a policy modifier such as +stable:beta=2, found '%s'",
                                   fix);
    char log[1300], ddir[1100], fixed[1100], png[1200] = "";
    snprintf(log, sizeof log, "%s/log.csv", r.run);
    if (diverged_at(log, &r.diverged)) return tsc_cli_fail(cmd, "%s", tsc_error_last());
    if (dump) {
        if (read_dump(dump, &r.dump))
            return tsc_cli_fail(cmd, "%s: not a flight recorder dump (no flight_step attribute), or unreadable", dump);
    } else if (choose_dump(r.run, r.diverged, &r.dump)) {
        return tsc_cli_fail(cmd, "%s: no flight recorder dump (flight*.h5)%s; train it with --flight N", r.run,
                            r.diverged >= 0 ? " at or before its divergence" : "");
    }
    if (!quiet) {
        if (r.diverged >= 0) printf("rescue: %s diverged at step %lld\n", r.run, r.diverged);
        else printf("rescue: %s did not diverge by the rule; reading its flight recorder anyway\n", r.run);
        printf("  flight dump %s: trigger %s at step %ld (%s)\n", r.dump.path, r.dump.trigger, r.dump.flight_step,
               r.dump.reason);
        fflush(stdout);
    }
    if (tsc_cli_make_dir(r.dir)) return tsc_cli_fail(cmd, "%s: cannot create the folder: %s", r.dir, strerror(errno));
    tsc_strbuf_init(&r.cmds);
    snprintf(ddir, sizeof ddir, "%s/diagnose", r.dir);
    char *dargv[] = {r.dump.path, "-o", ddir, "--quiet", NULL};
    tsc_strbuf_printf(&r.cmds, "tilescope diagnose %s -o %s\n", r.dump.path, ddir);
    if (!quiet) printf("[diagnose] tilescope diagnose %s -o %s\n", r.dump.path, ddir), fflush(stdout);
    if ((rc = tsc_cmd_diagnose(4, dargv)) != 0 && rc != TSC_CLI_EXIT_POOR_FIT) {
        tsc_strbuf_free(&r.cmds);
        return tsc_cli_fail(cmd, "diagnose %s failed (exit %d)", r.dump.path, rc);
    }
    char smpath[1200];
    snprintf(smpath, sizeof smpath, "%s/summary.json", ddir);
    tsc_jv_t *sm;
    if (tsc_jv_read_file(smpath, &sm) != TSC_OK || tsc_repro_fix_choose(sm, smpath, &r.fix) != TSC_OK) {
        tsc_strbuf_free(&r.cmds);
        return tsc_cli_fail(cmd, "%s", tsc_error_last());
    }
    r.lp = tsc_jv_str(sm, "lp") ? tsc_jv_str(sm, "lp") : "?";
    const tsc_repro_fix_t *f = &r.fix;
    if (f->n_at_risk)
        printf("diagnosis: biased step over the examined heads: %s; layer %d head %d carries the largest bias "
               "(%+.3g; its biased step: %s); verdict: %s\nrecommendation: %s\n",
               f->biased_step[0] ? f->biased_step : "?", f->layer, f->head, f->delta_cumsum, f->culprit, f->verdict,
               f->recommendation);
    else
        printf("diagnosis: no at-risk head in %s (%s/summary.json)\n", r.dump.path, ddir);
    r.modifier = strcmp(fix, "auto") ? fix : f->modifier;
    if (!f->n_at_risk && !strcmp(fix, "auto")) {
        printf("nothing to fix: the flight dump shows no biased rounding in attention, so an attention fix would not "
               "address this blow-up (look at the learning rate, the data and the gradient norm in %s); not rerun\n",
               log);
        tsc_jv_free(sm);
        tsc_strbuf_free(&r.cmds);
        return RESCUE_NOTHING;
    }
    long long first = r.dump.flight_step - (r.dump.n_steps > 0 ? r.dump.n_steps : 1) + 1;
    r.fork_step = from >= 0 ? (long long)from : choose_fork(r.run, first < 0 ? 0 : first);
    if (r.fork_step < 0) {
        tsc_jv_free(sm);
        tsc_strbuf_free(&r.cmds);
        return tsc_cli_fail(cmd, "%s: no kept checkpoint (ckpt-STEP.bin) at or before step %lld, the dump's first; "
                            "train the run with --ckpt-keep N (or give --from STEP)", r.run, first);
    }
    snprintf(fixed, sizeof fixed, "%s/fixed", r.dir);
    char spec[1200];
    snprintf(spec, sizeof spec, "%s@%lld", r.run, r.fork_step);
    if (!quiet) printf("[train] fork %s -> %s with %s appended\n", spec, fixed, r.modifier), fflush(stdout);
    tsc_train_fork_opts_t fo = {.at_step = r.fork_step, .append = r.modifier};
    tsc_status_t fst = tsc_train_fork(r.run, &fo, fixed);
    if (fst != TSC_OK && fst != TSC_ERR_NONFINITE) {  /* a NaN loss is an outcome of the rerun, anything else a failure */
        tsc_jv_free(sm);
        tsc_strbuf_free(&r.cmds);
        return tsc_cli_fail(cmd, "train --fork %s: %s", spec, tsc_error_last());
    }
    if (fst != TSC_OK) printf("      the rerun stopped on a non-finite loss: %s\n", tsc_error_last()), tsc_error_clear();
    fork_command(&r.cmds, spec, fixed);
    tsc_strbuf_printf(&r.cmds, "tilescope figure fig2 --log original=%s --log fixed=%s/log.csv -o %s/loss.png\n", log,
                      fixed, r.dir);
    if (loss_figure(r.run, r.dir, png, sizeof png)) {
        fprintf(stderr, "tilescope rescue: warning: the loss figure was not drawn: %s\n", tsc_error_last());
        tsc_error_clear();
        png[0] = 0;
    }
    rc = write_md(&r, sm, png);
    tsc_jv_free(sm);
    tsc_strbuf_free(&r.cmds);
    if (rc) return rc;
    return r.fixed_diverged < 0 ? RESCUE_OK : RESCUE_STILL;
}
