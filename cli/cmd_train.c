/* cmd_train.c: `tilescope train`: train a GPT-2 or Llama style model on this CPU, attention
 * under a precision policy per layer, into a run folder (train/tsc_train.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tsc_comm.h"
#include "tsc_data.h"
#include "tsc_train.h"

const char tsc_usage_train[] =
    "usage: tilescope train -o RUN [--model NAME|CONFIG] [--steps N] [--precision fp32|bf16|fp64]\n"
    "                       [--attn-policy [L[,L...]=]POLICY]... [--data SOURCE] [--seed S] [options]\n"
    "       tilescope train --resume RUN [--steps N]\n"
    "       tilescope train --fork RUN[@STEP] -o NEW [--attn-policy POLICY]... [--steps N]\n"
    "       tilescope train --list-models\n"
    "\n"
    "Trains a transformer on this machine's CPU and writes RUN/: log.csv (a row per step: lr,\n"
    "train_loss, val_loss at intervals, grad_norm, per layer max attention logit, rows with tied\n"
    "maxima, W^Q spectral norm at intervals), wq_norms.csv (per head), batches.csv (the batch order),\n"
    "run.cfg (the settings) and ckpt.bin (the latest checkpoint). The same seed and threads give\n"
    "the same log.csv byte for byte; --resume continues from the checkpoint to the same result.\n"
    "\n"
    "  -o, --out RUN       the run folder (created; refused when it holds a run already)\n"
    "  --resume RUN        continue RUN from its checkpoint (--steps N: up to N steps in all)\n"
    "  --fork RUN[@STEP]   a new run NEW (-o) from RUN's checkpoint after STEP steps (RUN/ckpt-STEP.bin,\n"
    "                      see --ckpt-keep; no @STEP: RUN/ckpt.bin) with RUN's settings, batches and\n"
    "                      log up to STEP, and from there the --attn-policy given (all of RUN's\n"
    "                      replaced) and --steps: the same run with a fix from STEP on\n"
    "  --model M           gpt2-tiny | gpt2-mini (default) | gpt2-small | llama-tiny | llama-mini,\n"
    "                      or NAME,key=value,... / arch=gpt2|llama,layers=,heads=,kv_heads=,dim=,\n"
    "                      ff=,vocab=,ctx=,eps=,theta= (--list-models prints the named ones)\n"
    "  --steps N           optimizer steps (default 200)\n"
    "  --precision P       fp32 (default) | bf16 (autocast: BF16 matmul operands and outputs, FP32\n"
    "                      accumulation, norms, softmax, loss and AdamW) | fp64 (checks)\n"
    "  --attn-policy S     attention precision policy, every layer (POLICY) or some (1=POLICY,\n"
    "                      0,2=POLICY); repeatable, applied in order; default fp32. E.g.\n"
    "                      --attn-policy bf16-torch --attn-policy 1=bf16-torch+stable\n"
    "  --data SOURCE       kjv (default: the King James Bible from Debian's bible-kjv, byte-level),\n"
    "                      a text file (byte-level), an llm.c or nanoGPT .bin token file, or a\n"
    "                      folder with nanoGPT's train.bin and val.bin\n"
    "  --batches FILE      replay another run's batch order (its batches.csv) instead of drawing it\n"
    "  --seed S            weights and batch order (default 1337)\n"
    "  --batch B           sequences per step (default 8); --seq-len T (default: the model's context)\n"
    "  --lr X              peak learning rate (default 1e-3); --warmup N steps (default 20); cosine\n"
    "                      decay to --min-lr-frac F x lr (default 0.1) at the last step\n"
    "  --weight-decay X    AdamW decay of the matrices (default 0.1); --grad-clip X (default 1, 0 off)\n"
    "  --beta1 X --beta2 X AdamW betas (default 0.9, 0.95)\n"
    "  --val-every N       validation loss every N steps and at the last (default 25), over\n"
    "                      --val-batches N batches (default 4)\n"
    "  --stats-every N     W^Q spectral norms every N steps (default 50)\n"
    "  --ckpt-every N      checkpoint every N steps (default 100) and at the end\n"
    "  --ckpt-keep N       also keep the newest N checkpoints as RUN/ckpt-STEP.bin (default 0), the\n"
    "                      points --fork can start from\n"
    "  --capture SPEC      write RUN/capture.h5, a dump of the sampled steps and layers (a sampling\n"
    "                      spec: steps=0:200:50,layers=1,heads=0:4)\n"
    "  --flight N          flight recorder: keep the last N steps' attention tensors in memory and\n"
    "                      write them to RUN/flight.h5 when the loss or gradient norm spikes, turns\n"
    "                      NaN/Inf, or on SIGINT/SIGTERM (then a checkpoint is taken and the run\n"
    "                      stops; --resume continues it). --flight-layers SET (default all),\n"
    "                      --flight-max-mb M (memory bound, default 1024), --flight-dumps N (a dump\n"
    "                      per trigger, up to N: flight.h5, flight.2.h5, ...; default 1),\n"
    "                      --flight-keep N (a dump per trigger for the whole run, the newest N\n"
    "                      kept: a long run's dumps are not spent on its first spikes),\n"
    "                      --spike-factor F (also fire above F x the running baseline; default:\n"
    "                      the recorder's rule, docs/FLIGHT.md)\n"
    "  --lr-spike S=LR     run step S at learning rate LR (a planted blow-up, to see what it leaves)\n"
    "  --threads N         OpenMP threads (default: OpenMP's)\n"
    "  --grad-shards G     the batch in G shards of B/G rows, their gradients summed in shard order\n"
    "                      (default 1: the whole batch at once); the run's bits depend on G only\n"
    "Data-parallel on MPI: `mpirun -n N tilescope train ... --grad-shards G` (N divides G, G divides\n"
    "B): process p computes shards p*G/N.. of every step; the gradients go through a chain in shard\n"
    "order, so N processes write the log.csv and ckpt.bin of one process with the same G, byte for\n"
    "byte. Process 0 alone reads and writes RUN; --resume continues on any N; --fork, --capture and\n"
    "--flight run on one process, one shard (docs/DISTRIBUTED.md).\n"
    "  -q, --quiet         print only the final line\n"
    "Exit status: 0 done, 1 the run failed (bad data, a NaN loss: the log and the last checkpoint\n"
    "stay), 2 usage error.\n";

typedef struct {
    int quiet;
    long long every;
    double step_s, chain_s; /* summed over the steps (on several processes: the chain's share) */
    long long done;         /* steps reported in this invocation (a resumed run counts from its first) */
    double first_s;         /* the first of them (its set-up and warm caches make it slow: not in the estimate) */
} print_ctx_t;

/* "  12 s left" (or min, h) from the mean of this invocation's steps but its first; "" before the second. */
static const char *time_left(const print_ctx_t *p, const tsc_train_report_t *r, char *buf, size_t cap) {
    buf[0] = 0;
    if (p->done < 2 || r->step + 1 >= r->steps) return buf;
    double left = (p->step_s - p->first_s) / (double)(p->done - 1) * (double)(r->steps - r->step - 1);
    if (left < 120) snprintf(buf, cap, "  %.0f s left", left);
    else if (left < 7200) snprintf(buf, cap, "  %.0f min left", left / 60);
    else snprintf(buf, cap, "  %.1f h left", left / 3600);
    return buf;
}

/* " on N processes (process 0 waited X s of the steps' Y s, Z %, for the gradient chain)", or "". */
static const char *chain_note(const print_ctx_t *p, const tsc_comm_t *c, char *buf, size_t cap) {
    buf[0] = 0;
    if (c->size > 1)
        snprintf(buf, cap, " on %d processes (process 0 waited %.2f s of the steps' %.2f s, %.0f %%, for the gradient "
                 "chain)", c->size, p->chain_s, p->step_s, p->step_s > 0 ? 100 * p->chain_s / p->step_s : 0.0);
    return buf;
}

static void report(void *user, const tsc_train_report_t *r) {
    print_ctx_t *p = user;
    p->step_s += r->step_s;
    p->chain_s += r->chain_s;
    if (p->done++ == 0) p->first_s = r->step_s;
    if (r->flight_dump) {
        printf("step %lld: the flight recorder wrote %s (tilescope info %s)\n", r->step, r->flight_dump, r->flight_dump);
        fflush(stdout);
    }
    int show = r->step % p->every == 0 || r->step + 1 == r->steps || !isnan(r->val_loss);
    if (p->quiet || !show) return;
    char val[32] = "";
    if (!isnan(r->val_loss)) snprintf(val, sizeof val, "  val %.4f", r->val_loss);
    char left[32];
    printf("step %*lld/%lld  loss %.4f%s  gnorm %.3f  lr %.2e  %.0f tok/s%s\n", r->steps >= 1000 ? 5 : 3, r->step,
           r->steps, r->train_loss, val, r->grad_norm, r->lr, r->tokens_per_s, time_left(p, r, left, sizeof left));
    fflush(stdout);
}

static int list_models(void) {
    for (int i = 0; i < tsc_model_config_count(); i++) {
        tsc_model_config_t c;
        char line[256];
        if (tsc_model_config_get(tsc_model_config_name(i), &c) != TSC_OK) continue;
        tsc_model_config_str(&c, line, sizeof line);
        printf("%-12s %s\n", tsc_model_config_name(i), line);
    }
    return 0;
}

static int parse_prec(const char *cmd, const char *s, tsc_prec_t *p) {
    if (!strcmp(s, "fp32")) *p = TSC_PREC_FP32;
    else if (!strcmp(s, "bf16")) *p = TSC_PREC_BF16;
    else if (!strcmp(s, "fp64")) *p = TSC_PREC_FP64;
    else return tsc_cli_usage_error(cmd, "--precision: expected fp32, bf16 or fp64, found '%s'", s);
    return 0;
}

/* The run's first lines: model, precision, attention policies, data. */
static int banner(const char *cmd, const tsc_train_opts_t *o, const char *out) {
    tsc_model_config_t c;
    if (tsc_model_config_parse(o->model, &c) != TSC_OK) return tsc_cli_usage_error(cmd, "%s", tsc_error_last());
    for (int i = 0; i < o->n_attn_policy; i++) {
        uint64_t mask;
        tsc_policy_t pol;
        if (tsc_train_policy_spec(o->attn_policy[i], c.n_layer, &mask, &pol) != TSC_OK)
            return tsc_cli_usage_error(cmd, "%s", tsc_error_last());
    }
    char line[256];
    tsc_model_config_str(&c, line, sizeof line);
    static const char *prec[] = {"fp32", "bf16 autocast", "fp64"};
    printf("train: %s: %s | %s | batch %d | %lld step%s | seed %llu -> %s/\n", o->model, line, prec[o->prec],
           o->batch, o->steps, TSC_CLI_S(o->steps), (unsigned long long)o->seed, out);
    printf("attention:");
    if (!o->n_attn_policy) printf(" fp32 in every layer");
    for (int i = 0; i < o->n_attn_policy; i++) printf(" %s%s", i ? "then " : "", o->attn_policy[i]);
    printf("\n");
    fflush(stdout);
    return 0;
}

/* --resume and --fork take the run's own settings: any flag but these is refused, not ignored. */
static int only_flags(const char *cmd, int argc, char **argv, const char *mode) {
    static const char *const allowed[] = {"--resume", "--fork", "-o", "--out", "--attn-policy", "--steps", "-q", "--quiet"};
    if (!mode) return 0;
    for (int i = 0; i < argc; i++) {
        if (argv[i][0] != '-' || !argv[i][1]) continue;
        size_t n = strcspn(argv[i], "=");
        int ok = 0;
        for (size_t k = 0; k < sizeof allowed / sizeof allowed[0] && !ok; k++)
            ok = strlen(allowed[k]) == n && !strncmp(argv[i], allowed[k], n);
        if (!strcmp(mode, "--resume") && (!strcmp(argv[i], "--attn-policy") || !strncmp(argv[i], "--attn-policy=", 14)))
            ok = 0;
        if (!ok)
            return tsc_cli_usage_error(cmd, "%s keeps the run's settings (run.cfg); %s cannot change with it (%s)",
                                       mode, argv[i], !strcmp(mode, "--fork") ? "--fork takes -o, --attn-policy and "
                                       "--steps" : "--resume takes --steps");
    }
    return 0;
}

/* --fork RUN[@STEP] -o NEW: tsc_train_fork. */
static int fork_run(const char *cmd, const char *spec, const char *out, const tsc_cli_list_t *pols, long long steps,
                    print_ctx_t *pc) {
    char src[1100];
    long long at = -1;
    const char *atp = strrchr(spec, '@');
    if (strlen(spec) >= sizeof src) return tsc_cli_usage_error(cmd, "--fork: the path is too long");
    snprintf(src, sizeof src, "%s", spec);
    if (atp) {
        char *end;
        errno = 0;
        at = strtoll(atp + 1, &end, 10);
        if (end == atp + 1 || *end || errno || at < 0)
            return tsc_cli_usage_error(cmd, "--fork: expected RUN or RUN@STEP (STEP: the steps done, e.g. run@300), "
                                       "found '%s'", spec);
        src[atp - spec] = 0;
    }
    tsc_train_fork_opts_t fo = {.at_step = at, .policies = pols->v, .n_policies = pols->n,
                                .steps = steps > 0 ? steps : 0, .report = report, .user = pc};
    tsc_status_t st = tsc_train_fork(src, &fo, out);
    if (st != TSC_OK) return tsc_cli_fail(cmd, "%s", tsc_error_last());
    printf("%s: forked from %s%s%s; log %s/log.csv (the source's rows up to the fork, then the fork's)\n", out, src,
           atp ? " at step " : "", atp ? atp + 1 : "", out);
    return 0;
}

int tsc_cmd_train(int argc, char **argv) {
    const char *cmd = "train";
    tsc_train_opts_t o;
    tsc_train_opts_init(&o);
    const char *out = NULL, *resume = NULL, *fork = NULL, *prec = NULL, *spike = NULL;
    int quiet = 0, list = 0, rc;
    tsc_cli_list_t pols = {o.attn_policy, 0, TSC_TRAIN_MAX_POLICIES};
    long long steps = -1, seed = -1;
    /* The string and switch flags here; the numeric ones from the trainer's settings table (tsc_train.h),
     * the bounds a resumed checkpoint is checked against too. */
    const tsc_cli_flag_t fixed[] = {
        {"--out", "-o", TSC_CLI_STR, &out, 0, 0},           {"--resume", NULL, TSC_CLI_STR, &resume, 0, 0},
        {"--fork", NULL, TSC_CLI_STR, &fork, 0, 0},
        {"--model", NULL, TSC_CLI_STR, &o.model, 0, 0},     {"--precision", NULL, TSC_CLI_STR, &prec, 0, 0},
        {"--attn-policy", NULL, TSC_CLI_LIST, &pols, 0, 0}, {"--data", NULL, TSC_CLI_STR, &o.data, 0, 0},
        {"--batches", NULL, TSC_CLI_STR, &o.batches, 0, 0}, {"--capture", NULL, TSC_CLI_STR, &o.capture, 0, 0},
        {"--flight-layers", NULL, TSC_CLI_STR, &o.flight_layers, 0, 0},
        {"--lr-spike", NULL, TSC_CLI_STR, &spike, 0, 0},
        {"--list-models", NULL, TSC_CLI_ON, &list, 0, 0},   {"--quiet", "-q", TSC_CLI_ON, &quiet, 0, 0}};
    enum { N_FIXED = (int)(sizeof fixed / sizeof fixed[0]), N_MAX = N_FIXED + 64 };
    tsc_cli_flag_t flags[N_MAX];
    size_t nflags = 0;
    for (int i = 0; i < N_FIXED; i++) flags[nflags++] = fixed[i];
    for (int i = 0; i < tsc_train_setting_count() && nflags < N_MAX; i++) {
        const tsc_train_setting_t *s = tsc_train_setting_at(i);
        if (!s->flag) continue;
        /* --steps also bounds --resume's; --seed (a uint64_t, at most 2^62) goes through a long long,
         * every digit kept */
        void *dst = !strcmp(s->key, "steps") ? (void *)&steps : !strcmp(s->key, "seed") ? (void *)&seed
                                                                                          : (char *)&o + s->offset;
        tsc_cli_kind_t kind = s->kind == TSC_TRAIN_INT ? TSC_CLI_INT : s->kind == TSC_TRAIN_DOUBLE ? TSC_CLI_DOUBLE
                                                                                                 : TSC_CLI_LLONG;
        flags[nflags++] = (tsc_cli_flag_t){s->flag, NULL, kind, dst, s->lo, s->hi};
    }
    const char *operand = NULL;
    if ((rc = tsc_cli_args(cmd, argc, argv, flags, nflags, NULL, NULL, 0, &operand))) return rc;
    if (operand) return tsc_cli_usage_error(cmd, "unexpected argument '%s' (the run folder goes after -o)", operand);
    if (list) return list_models();
    if (resume && (out || fork)) return tsc_cli_usage_error(cmd, "--resume RUN continues RUN in place: no -o or --fork");
    if (!out == !resume) return tsc_cli_usage_error(cmd, "give -o RUN (a new run) or --resume RUN");
    if ((rc = only_flags(cmd, argc, argv, resume ? "--resume" : fork ? "--fork" : NULL))) return rc;
    print_ctx_t pc = {.quiet = quiet, .every = 10};
    char note[160];
    if ((rc = tsc_cli_comm_start(cmd))) return rc;
    const tsc_comm_t *comm = tsc_cli_comm();
    if (comm->size > 1 && fork)
        return tsc_cli_usage_error(cmd, "--fork runs on one process (run it without the launcher, then --resume "
                                   "the fork on %d)", comm->size);
    if (comm->rank != 0) { /* process 0 reads the settings, the run folder and prints; this one computes */
        tsc_status_t st = tsc_train_worker(comm);
        if (st == TSC_OK) return 0;
        if (strstr(tsc_error_last(), "process 0")) return 1; /* process 0 says why */
        return tsc_cli_fail(cmd, "process %d of %d: %s", comm->rank, comm->size, tsc_error_last());
    }
    if (fork) return fork_run(cmd, fork, out, &pols, steps, &pc);
    if (resume) {
        tsc_status_t st = tsc_train_resume_on(resume, steps > 0 ? steps : 0, report, &pc, comm);
        if (st != TSC_OK) return tsc_cli_fail(cmd, "%s", tsc_error_last());
        printf("resumed %s%s: log %s/log.csv, checkpoint %s/ckpt.bin\n", resume, chain_note(&pc, comm, note, sizeof note),
               resume, resume);
        return 0;
    }
    if (prec && (rc = parse_prec(cmd, prec, &o.prec))) return rc;
    if (spike) {
        const tsc_train_setting_t *ss = tsc_train_setting_find("lr_spike_step");
        const tsc_train_setting_t *sl = tsc_train_setting_find("lr_spike");
        char *end;
        errno = 0;
        o.lr_spike_step = strtoll(spike, &end, 10);
        if (end == spike || *end != '=' || errno || o.lr_spike_step < ss->lo ||
            tsc_train_setting_check(ss, &o, "--lr-spike") != TSC_OK)
            return tsc_cli_usage_error(cmd, "--lr-spike: expected STEP=LR (e.g. 30=5), STEP in [%.0f, %.0f], found '%s'",
                                       ss->lo, ss->hi, spike);
        if ((rc = tsc_cli_parse_double(cmd, "--lr-spike", end + 1, sl->lo, sl->hi, &o.lr_spike))) return rc;
    }
    if (steps > 0) o.steps = steps;
    if (seed >= 0) o.seed = (uint64_t)seed;
    o.n_attn_policy = pols.n;
    if (!quiet && (rc = banner(cmd, &o, out))) return rc;
    pc.every = o.steps <= 50 ? 1 : 10;
    o.report = report;
    o.user = &pc;
    o.comm = comm;
    tsc_status_t st = tsc_train_run(&o, out);
    if (st != TSC_OK) return tsc_cli_fail(cmd, "%s", tsc_error_last());
    printf("%s: %lld step%s%s; log %s/log.csv; draw it: tilescope figure fig2 --log %s/log.csv -o val_loss.png\n", out,
           o.steps, TSC_CLI_S(o.steps), chain_note(&pc, comm, note, sizeof note), out, out);
    return 0;
}
