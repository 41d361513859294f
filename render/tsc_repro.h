/* tsc_repro.h: the outcome of an experiment's training runs (`tilescope repro`, docs/REPRO.md).
 *
 * Per run: the final, lowest and highest validation loss, the step where it diverged (the one rule,
 * tsc_repro_diverged_at), whether the trainer stopped on a non-finite loss, the accumulated delta bias
 * that the diagnosis of its capture measured, and its largest per-head W^Q spectral norm at the first
 * and at the last step; then DIR/outcome.md, the page that reports them with the diagnosis, the
 * figures and the commands. The runs are a list, each with its name, its files and its role in the
 * experiment, so one call covers repro's six runs or a search over several formats and models.
 *
 *   tsc_repro_run_t runs[] = {
 *       {"lp", "bf16-torch", TSC_REPRO_LP, "o/runs/lp/log.csv", "o/runs/lp/wq_norms.csv", summary, NULL},
 *       {"hp", "fp32", TSC_REPRO_HP, "o/runs/hp/log.csv", "o/runs/hp/wq_norms.csv", NULL, NULL}};
 *   tsc_repro_outcome_t *oc;
 *   if (tsc_repro_outcome_compute(runs, 2, 1, &oc) != TSC_OK) return puts(tsc_error_last());
 *   tsc_strbuf_t t; tsc_strbuf_init(&t); tsc_repro_outcome_table(oc, &t); puts(tsc_strbuf_str(&t));
 *   tsc_strbuf_free(&t); tsc_repro_outcome_free(oc);
 *
 * Bindings read the outcome as JSON (tsc_repro_outcome_json); the structs are for C callers.
 */
#ifndef TSC_REPRO_H
#define TSC_REPRO_H

#include "tsc_export.h"

#include <stddef.h>

#include "tsc_json.h"
#include "tsc_jv.h"
#include "tsc_log.h"
#include "tsc_status.h"
#include "tsc_strbuf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The divergence rule, the one definition of "diverged" in tilescope: the first logged step where
 *   - the training loss (column train_loss) is not finite (NaN or +-Inf: the trainer stops there; a
 *     trainer writes it on every row, so an empty cell reads as the NaN it stands for), or
 *   - the validation loss (column val_loss) is infinite, or finite and more than twice its running
 *     minimum: the lowest finite validation loss of the rows before (so the first one never diverges).
 * An empty or NaN val_loss cell means "not evaluated at this step" and counts for nothing. *step gets
 * that step, or -1 when the run never diverged. Errors: TSC_ERR_ARG (NULL), TSC_ERR_MISSING naming the
 * log when it has no train_loss or no val_loss column (*step is then -1). */
TSC_API tsc_status_t tsc_repro_diverged_at(const tsc_log_t *lg, long long *step);

/* 1 when the last row's training loss is not finite: the trainer stopped on a NaN or infinite loss
 * (a result of the run, not a failure of the tool); 0 otherwise, and for a log without train_loss. */
TSC_API int tsc_repro_stopped_nonfinite(const tsc_log_t *lg);

/* What a run is in the experiment. */
typedef enum {
    TSC_REPRO_LP = 0,     /* low-precision attention in every layer: the run whose capture is diagnosed */
    TSC_REPRO_HP,         /* the high-precision reference */
    TSC_REPRO_LP_LAYER,   /* low precision in one layer only */
    TSC_REPRO_STABLE,     /* the stable fix */
    TSC_REPRO_ONETILE,    /* control: one tile per sequence */
    TSC_REPRO_HPDELTA,    /* control: delta from an FP32 O */
    TSC_REPRO_N_ROLES
} tsc_repro_role_t;

/* "lp", "hp", "lp-layer", "stable", "onetile", "hpdelta"; NULL outside the enum. */
TSC_API const char *tsc_repro_role_name(tsc_repro_role_t role);

/* One run of the experiment: what the caller knows about it. */
typedef struct {
    const char *name;          /* its name, the table's first column ("lp", "lp-fp16") */
    const char *attention;     /* its attention policy as the table prints it ("bf16-torch", "fp32") */
    tsc_repro_role_t role;
    const char *log;           /* its training log (step, train_loss, val_loss, ...: tsc_log.h) */
    const char *wq_norms;      /* its W^Q norms (step, layer, head, wq_sn); NULL: none */
    const tsc_jv_t *diagnosis; /* summary.json of the diagnosis of its capture; NULL: not captured */
    const char *not_run;       /* why it was not run ("budget"; then log is not read); NULL: it ran */
} tsc_repro_run_t;

/* One run's statistics. A value that could not be measured is NaN (or -1) and problem says why. */
typedef struct {
    char *name, *attention;    /* copies of the run's */
    char *not_run;             /* a copy of the run's reason, NULL when it ran */
    tsc_repro_role_t role;
    double val_final, val_lowest, val_highest; /* of the finite validation losses; NaN: none */
    long long diverged_at;     /* tsc_repro_diverged_at; -1: never */
    int stopped_nonfinite;     /* tsc_repro_stopped_nonfinite */
    double delta_bias;         /* the diagnosis' accumulated delta bias (summary.json's delta.cumsum:
                                  sum over the captured steps of sum_T(delta_lp - delta_hp)) of the head
                                  of the outcome's layer with the largest magnitude at its last analysed
                                  step; NaN: not captured, or no such head */
    int delta_head;            /* that head; -1 */
    long long delta_step;      /* that last analysed step; -1 */
    double wq_first, wq_last;  /* the largest per-head W^Q spectral norm at the first and at the last
                                  step of wq_norms; NaN: none */
    int wq_layer, wq_head;     /* the (layer, head) of wq_last; -1 */
    char *problem;             /* why a statistic is missing (NULL when none): the log or wq_norms could
                                  not be read, or lacks a column */
} tsc_repro_row_t;

typedef struct {
    int layer;                 /* the captured layer, whose delta bias the rows report */
    size_t n;
    tsc_repro_row_t *rows;     /* [n], in the order of the runs */
} tsc_repro_outcome_t;

/* The statistics of runs[0..n) (n may be 0); *out is the caller's (tsc_repro_outcome_free). A file that
 * cannot be read is not an error: its row's statistics are NaN and its problem says why. Errors:
 * TSC_ERR_ARG (NULL out, NULL runs with n > 0, a run without a name or attention, or with neither a
 * log nor a not_run reason; the message names the run), TSC_ERR_NOMEM; *out is NULL on failure. */
TSC_API tsc_status_t tsc_repro_outcome_compute(const tsc_repro_run_t *runs, size_t n, int layer,
                                               tsc_repro_outcome_t **out);
/* NULL: a no-op. */
TSC_API void tsc_repro_outcome_free(tsc_repro_outcome_t *oc);

/* The outcome table, Markdown, one row per run, appended to sb: run, attention, final, lowest and highest
 * validation loss (%.5f), the step of divergence ("none"; " (NaN)" after it when the trainer stopped on a
 * non-finite loss), the accumulated delta bias (%+.3g, its head and steps, or "n/a (no capture)"), the
 * largest W^Q norm (%.4f) at the first and last step with its (layer, head); "-" for a value not
 * measured; "not run (REASON)" for a run not run. Returns sb's status (TSC_ERR_NOMEM). */
TSC_API tsc_status_t tsc_repro_outcome_table(const tsc_repro_outcome_t *oc, tsc_strbuf_t *sb);

/* What outcome.md says besides the table: the experiment's configuration and the other steps' results. */
typedef struct {
    const char *config, *label; /* the configuration's name and its description (overrides included) */
    const char *model, *lr;     /* as the trainer was given them */
    int batch, seq_len, warmup;
    long long steps, seed;
    int tile_q, tile_k;         /* lp's attention tiles (tsc_policy_tiles): a sequence within one makes the
                                   onetile control vacuous, which outcome.md then says; 0: not said */
    const char *dir;            /* the output folder as the commands name it (DIR/diagnose/, DIR/figures/) */
    const tsc_jv_t *diagnosis;  /* summary.json of the diagnosis of lp's capture (NULL: none) */
    const char *flight_dir;     /* lp's run folder: the flight*.h5 the flight recorder wrote there are
                                   listed (in name order); NULL: none */
    const char *figures;        /* the figures' paragraph ("Drawn: ...", the ones not drawn and why) */
    const char *commands;       /* the commands that made the files, one a line */
    int ckpt_kept;              /* lp kept its checkpoints (repro --keep-checkpoints): rescue can rerun it */
} tsc_repro_doc_t;

/* outcome.md (docs/REPRO.md: the configuration, the table and how to read it, the diagnosis, the
 * flight recorder, the figures, how to read them on a short run, the commands) appended to sb, from oc
 * and doc (NULL strings read as ""). Rows with a problem are listed under the table. Returns sb's
 * status. */
TSC_API tsc_status_t tsc_repro_outcome_md(const tsc_repro_outcome_t *oc, const tsc_repro_doc_t *doc,
                                          tsc_strbuf_t *sb);
/* The same written to path atomically (util/tsc_file.h: complete or absent). Errors: TSC_ERR_ARG (NULL),
 * TSC_ERR_NOMEM, TSC_ERR_IO naming path. */
TSC_API tsc_status_t tsc_repro_outcome_write(const tsc_repro_outcome_t *oc, const tsc_repro_doc_t *doc,
                                             const char *path);

/* The outcome as one JSON object, the row's fields under these keys: {"layer", "runs": [{"name",
 * "attention", "not_run" (null when it ran), "role", "diverged_at" (-1: never), "stopped_nonfinite",
 * "problem" (null: none), "val_loss": {"final", "lowest", "highest"}, "delta_bias": {"value", "head",
 * "last_step"} (null: not captured), "wq_sn": {"first", "last", "layer", "head"}}]}; a number not
 * measured is null, an index not measured -1. */
TSC_API void tsc_repro_outcome_json(const tsc_repro_outcome_t *oc, tsc_json_t *j);

/* ---- the fix of a failed run (`tilescope rescue`, docs/REPRO.md "Diagnose, fix and rerun") ---- */

/* What the diagnosis of a flight dump recommends, read from its summary.json: the top-ranked at-risk
 * head (the largest accumulated delta bias) and the policy modifier of its recommended fix. */
typedef struct {
    int n_at_risk;             /* at-risk layer/heads in the diagnosis; 0: nothing to fix */
    int layer, head;           /* the top-ranked one (-1 when none) */
    long long step;            /* the step of its largest bias (-1) */
    double delta_cumsum;       /* its accumulated delta bias sum_T(delta_lp - delta_hp) (NaN) */
    char culprit[64];          /* the top head's stages whose FP32 substitution removes the bias ("pv+oacc"; "none") */
    char biased_step[64];      /* the stages named for at least half of the examined heads
                                  (diagnosis.biased_step: "pv+oacc"; "none"; "" from an older summary) */
    char verdict[160];         /* the accumulation verdict */
    char fix[96];              /* the recommended fix's name ("stable softmax fix (beta 2, eps 0.001)") */
    char modifier[64];         /* its policy modifier ("+stable:beta=2"); when no single fix removes the
                                  bias, the FP32 O fix's ("+fp32:pv,oacc,o"), which the diagnosis names
                                  as the closest remedy then ("run this head in FP32") */
    int removes;               /* 1: the diagnosis measured that the fix removes the bias */
    char recommendation[512];  /* the diagnosis' sentence */
    char layers[256];          /* every at-risk layer, ascending ("1,3") */
} tsc_repro_fix_t;

/* The fix of summary (a diagnose summary.json). TSC_OK with n_at_risk = 0 when nothing is at risk;
 * TSC_ERR_FORMAT naming `where` when the summary has no diagnosis or an at-risk head lacks its fixes. */
TSC_API tsc_status_t tsc_repro_fix_choose(const tsc_jv_t *summary, const char *where, tsc_repro_fix_t *fix);

#ifdef __cplusplus
}
#endif
#endif
