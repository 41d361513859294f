/* tsc_train.h: `tilescope train`: a training loop over tsc_model.h and tsc_data.h that writes
 * a run folder.
 *
 *   tsc_train_opts_t o; tsc_train_opts_init(&o);
 *   o.model = "gpt2-mini"; o.steps = 200; o.attn_policy[o.n_attn_policy++] = "1=bf16-torch";
 *   if (tsc_train_run(&o, "run") != TSC_OK) puts(tsc_error_last());
 *
 * The run folder:
 *   run.cfg      every setting as "key = value" lines (what --resume reads back)
 *   log.csv      one row per step: step, lr, train_loss, val_loss (at intervals, else empty),
 *                grad_norm (before clipping), then per layer L: max_logit_L (the largest scaled
 *                score of the step's forward), tied_rows_L (rows whose score maximum occurs more
 *                than once), wq_sn_L (the largest per-head spectral norm of W^Q, at intervals).
 *                No wall-clock column: the same seed and threads give the same file byte for byte.
 *   wq_norms.csv step, layer, head, spectral norm of that head's W^Q rows [D, C] (at intervals)
 *   batches.csv  the batch order (tsc_data.h): step, row, offset
 *   ckpt.bin     the latest checkpoint (temporary name + rename: a kill never leaves a torn one)
 *   ckpt-STEP.bin with ckpt_keep = N: the newest N checkpoints (STEP: the steps done), hard links
 *   capture.h5   with capture: the sampled steps' attention tensors (format v1 dump)
 *   flight.h5    with the flight recorder (flight_steps > 0): the last steps before a trigger
 *                (loss or grad-norm spike, NaN/Inf, SIGINT/SIGTERM; capture/tsc_flight.h)
 * A step: batch -> forward (loss) -> backward -> global grad norm -> clip -> AdamW. The learning
 * rate warms up linearly over `warmup` steps, then decays by a cosine to lr * min_lr_frac at the
 * last step. AdamW runs in the master precision (FP32, FP64 in FP64 mode), decaying matrices only.
 * Resume: every ckpt_every steps (and at the end) the parameters, AdamW moments and step count
 * are checkpointed; tsc_train_resume continues from ckpt.bin and produces the same log.csv as an
 * uninterrupted run (rows after the checkpoint are dropped and recomputed).
 */
#ifndef TSC_TRAIN_H
#define TSC_TRAIN_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_model.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { TSC_TRAIN_MAX_POLICIES = 16 };

struct tsc_comm;

/* What a step reports to its caller (the CLI prints it). */
typedef struct {
    long long step, steps;     /* this step (0-based) of steps */
    double lr, train_loss, val_loss, grad_norm;  /* val_loss NaN when not evaluated this step */
    double tokens_per_s;       /* of this step's forward + backward + update */
    double step_s, chain_s;    /* this step's wall time; of it, on several processes (tsc_train_opts_t.comm),
                                  process 0's wait for the shards' gradient sum to come round the chain
                                  (the others' compute and the transfers; 0 on one process) */
    const char *event;         /* NULL, or "checkpoint" when one was written after this step */
    const char *flight_dump;   /* the dump the flight recorder wrote at this step, or NULL */
} tsc_train_report_t;
typedef void (*tsc_train_report_fn)(void *user, const tsc_train_report_t *r);

typedef struct {
    const char *model;         /* a named config or a spec (tsc_model_config_parse); "gpt2-mini" */
    tsc_prec_t prec;           /* TSC_PREC_FP32 (default), TSC_PREC_BF16 (autocast), TSC_PREC_FP64 */
    const char *data;          /* tsc_data_open spec; "kjv" */
    int batch;                 /* B; 8 */
    int seq_len;               /* T; 0: the model's context */
    long long steps;           /* 200 */
    double lr, min_lr_frac;    /* 1e-3, 0.1 */
    int warmup;                /* 20 */
    double beta1, beta2, eps, weight_decay, grad_clip;  /* 0.9, 0.95, 1e-8, 0.1, 1.0 (0: no clip) */
    uint64_t seed;             /* 1337: weights and batch order */
    int threads;               /* OpenMP threads; 0: OpenMP's default (recorded in run.cfg) */
    const char *attn_policy[TSC_TRAIN_MAX_POLICIES]; /* "POLICY" (every layer) or "L[,L...]=POLICY",
                                                        applied in order; none: fp32 */
    int n_attn_policy;
    int val_every, val_batches; /* 25, 4; validation also at the last step */
    int stats_every;           /* W^Q spectral norms every N steps (and at the last); 50 */
    int ckpt_every;            /* 100; also at the end */
    int ckpt_keep;             /* also keep the newest N checkpoints as ckpt-STEP.bin (0: ckpt.bin alone), the
                                  points a fork (tsc_train_fork) can start from */
    const char *capture;       /* a sampling spec (tsc_select.h) for RUN/capture.h5, or NULL */
    const char *batches;       /* a batches.csv to replay instead of drawing from the seed, or NULL */
    int flight_steps;          /* flight recorder: keep the last N steps (0: off) */
    const char *flight_layers; /* its layers ("1,3"; NULL: every layer) */
    double flight_max_mb;      /* its memory bound in MiB; 1024 */
    int flight_dumps;          /* dumps the recorder writes before it stops (flight.h5, flight.2.h5, ...); 1 */
    int flight_keep;           /* > 0: the recorder never stops for its count and keeps the newest
                                  flight_keep dumps, deleting older ones it wrote; 0: off (flight_dumps) */
    double spike_factor;       /* flight trigger: loss or grad norm above factor x baseline; 0: the
                                  recorder's default rule only (tsc_flight.h) */
    long long lr_spike_step;   /* a planted learning-rate spike: step lr_spike_step runs at lr_spike
                                  (-1: none), to test what a blow-up leaves behind */
    double lr_spike;
    const char *fork_of;       /* "RUN@STEP" of a fork (set by tsc_train_fork, recorded in run.cfg), or NULL */
    int grad_shards;           /* G: the batch in G shards of B/G rows, each a forward and backward of its
                                  own, their gradients (and losses) summed in shard order, left to right,
                                  then scaled by 1/G; 1 (default): the whole batch at once. The bits of a
                                  run depend on G, never on how many processes compute the shards */
    const struct tsc_comm *comm;/* the job's processes (tsc_comm.h; NULL: this one): data-parallel, each
                                  process G/size consecutive shards (docs/DISTRIBUTED.md §3) */
    tsc_train_report_fn report;/* per step, or NULL */
    void *user;
} tsc_train_opts_t;

TSC_API void tsc_train_opts_init(tsc_train_opts_t *o);

/* The numeric settings of a run and their bounds: the one definition of what a setting may be.
 * `tilescope train` builds its flags from this table (flag, kind, [lo, hi]), tsc_train_run checks
 * its options against it, and --resume checks every setting read back from a checkpoint against
 * it before anything is allocated or a thread started. A value is accepted when it lies in
 * [lo, hi] or, for a setting with has_none, equals `none` ("not set": 0 threads is OpenMP's
 * default, seq_len 0 the model's context, ...). Integers must be whole numbers. */
typedef enum { TSC_TRAIN_INT, TSC_TRAIN_LLONG, TSC_TRAIN_DOUBLE, TSC_TRAIN_U64 } tsc_train_kind_t;
typedef struct {
    const char *key;        /* its run.cfg name: "threads" */
    const char *flag;       /* its `tilescope train` flag ("--threads"), or NULL (set another way) */
    tsc_train_kind_t kind;  /* the field's type: int, long long, double, uint64_t */
    size_t offset;          /* of the field in tsc_train_opts_t */
    double lo, hi;
    int has_none;
    double none;
    const char *none_means; /* what `none` means, for messages ("OpenMP's default") */
} tsc_train_setting_t;
TSC_API int tsc_train_setting_count(void);
TSC_API const tsc_train_setting_t *tsc_train_setting_at(int i);
/* The row of a run.cfg key, or NULL. */
TSC_API const tsc_train_setting_t *tsc_train_setting_find(const char *key);
/* TSC_OK when o's value of setting s is accepted; else TSC_ERR_ARG "WHAT: the setting KEY = V is
 * out of range: expected LO to HI [or NONE (meaning)] (the bounds of FLAG); refused". */
TSC_API tsc_status_t tsc_train_setting_check(const tsc_train_setting_t *s, const tsc_train_opts_t *o,
                                             const char *what);
/* Every numeric setting of o (tsc_train_setting_check), the precision, the number of policies and
 * the model and data named; the first failure as above. */
TSC_API tsc_status_t tsc_train_opts_check(const tsc_train_opts_t *o, const char *what);

/* Trains from scratch into run_dir (created; refused when it holds a run.cfg already: resume it
 * or choose another folder). Errors name the file or setting: unknown model, bad data, a policy
 * for a layer the model lacks, an unwritable folder. A NaN/Inf loss ends the run with
 * TSC_ERR_NONFINITE after the flight recorder (if on) has written its dump; with the recorder on,
 * SIGINT/SIGTERM make it write its dump, a checkpoint is taken after the current step and the run
 * stops with TSC_ERR_IO ("interrupted"; --resume continues it exactly). */
TSC_API tsc_status_t tsc_train_run(const tsc_train_opts_t *o, const char *run_dir);

/* Continues run_dir from its checkpoint up to steps (0: the run's own steps); report/user as in
 * the options. The run folder is data (it may come from someone else): before anything is read,
 * a file of it that resume opens (run.cfg, log.csv, wq_norms.csv, batches.csv, ckpt.bin, capture*
 * and flight* outputs) that is a symbolic link is refused, and the trainer's own opens of them
 * never follow a link (O_NOFOLLOW, then fstat: a regular file). The checkpoint's settings are
 * checked against the bounds above, then its size against the one its settings imply
 * (parameters, AdamW moments, header) and the memory budget (tsc_mem.h) against the model,
 * all before the model is allocated. Each refusal is TSC_ERR_FORMAT, TSC_ERR_ARG, TSC_ERR_IO or
 * TSC_ERR_UNSUPPORTED naming the file and the setting. */
TSC_API tsc_status_t tsc_train_resume(const char *run_dir, long long steps, tsc_train_report_fn report,
                                      void *user);
/* tsc_train_resume on the processes of comm (NULL: this one), as process 0 of them. */
TSC_API tsc_status_t tsc_train_resume_on(const char *run_dir, long long steps, tsc_train_report_fn report, void *user,
                                         const struct tsc_comm *comm);

/* The part of a data-parallel run (opts.comm of more than one process) that a process other than
 * 0 runs while process 0 runs tsc_train_run or tsc_train_resume_on: it receives the settings and
 * the model's state from process 0 (no file of the run folder is opened here: process 0 alone
 * reads and writes the folder, and sends each step's batch), computes its shards and its link of
 * the gradient chain each step, and updates its copy of the model as process 0 does. TSC_OK
 * when the run ended, else the error (process 0 stopped the run: its own message says why). */
TSC_API tsc_status_t tsc_train_worker(const struct tsc_comm *comm);

/* A fork: a new run in run_dir that starts from src_run's checkpoint after at_step steps
 * (src_run/ckpt-AT.bin, kept by ckpt_keep, or src_run/ckpt.bin when it is at that step; at_step < 0:
 * ckpt.bin, whatever its step) with the source's settings but for the attention policies and the
 * steps below. The source's log.csv, wq_norms.csv and batches.csv rows before that step are copied,
 * so the fork's log is one curve from step 0; it draws (or replays) the same batches as the source;
 * capture and flight recorder as in the source, into run_dir. run.cfg records fork_of = SRC@STEP;
 * --resume continues a fork as any run. The source is only read (the checkpoint and the CSVs opened
 * without following a link, as resume's). With other steps, the learning-rate schedule after the
 * fork follows the new total. */
typedef struct {
    long long at_step;            /* -1: src_run/ckpt.bin */
    const char *const *policies;  /* n_policies > 0: these replace the source's attention policies */
    int n_policies;
    const char *append;           /* else, non-NULL: appended to each of the source's policies
                                     (tsc_train_policy_append); a source without any keeps fp32 */
    long long steps;              /* > 0: the fork's total steps; else the source's */
    tsc_train_report_fn report;   /* per step, or NULL */
    void *user;
} tsc_train_fork_opts_t;
TSC_API tsc_status_t tsc_train_fork(const char *src_run, const tsc_train_fork_opts_t *fo, const char *run_dir);

/* spec ("L[,L...]=POLICY" or "POLICY") with modifier ("+stable:beta=2") appended, into out[cap]; a
 * spec whose policy has the modifier's name already ("+stable") is copied as it is. TSC_ERR_ARG when
 * the result does not fit. */
TSC_API tsc_status_t tsc_train_policy_append(const char *spec, const char *modifier, char *out, size_t cap);

/* Parses "POLICY" or "L[,L...]=POLICY" against a model of n_layer layers: *layer_mask bit L set
 * for each layer named (every layer when none). TSC_ERR_ARG naming the layer or the policy error. */
TSC_API tsc_status_t tsc_train_policy_spec(const char *spec, int n_layer, uint64_t *layer_mask,
                                           tsc_policy_t *pol);

#ifdef __cplusplus
}
#endif
#endif
