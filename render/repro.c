/* repro.c: the outcome of an experiment's runs (tsc_repro.h): the divergence rule, each run's statistics
 * from its training log, its W^Q norms and the diagnosis of its capture, and outcome.md. */
#include "tsc_repro.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsc_file.h"

/* ---------------------------------------------------------------- the rule */

tsc_status_t tsc_repro_diverged_at(const tsc_log_t *lg, long long *step) {
    if (!lg || !step) return tsc_error_set(TSC_ERR_ARG, "tsc_repro_diverged_at: NULL argument");
    *step = -1;
    int cv = tsc_log_column(lg, "val_loss"), ct = tsc_log_column(lg, "train_loss");
    if (cv < 0 || ct < 0)
        return tsc_error_set(TSC_ERR_MISSING, "%s: no %s column, so no divergence can be read from it",
                             lg->path[0] ? lg->path : lg->name, cv < 0 ? "val_loss" : "train_loss");
    double lo = INFINITY; /* the running minimum of the finite validation losses before row k */
    for (size_t k = 0; k < lg->n_rows; k++) {
        const double *row = lg->values + k * (size_t)lg->n_cols;
        double x = row[cv], t = row[ct];
        if (!isfinite(t) || isinf(x) || (isfinite(x) && x > 2 * lo)) {
            *step = (long long)lg->step[k];
            return TSC_OK;
        }
        if (isfinite(x) && x < lo) lo = x;
    }
    return TSC_OK;
}

int tsc_repro_stopped_nonfinite(const tsc_log_t *lg) {
    int c = lg ? tsc_log_column(lg, "train_loss") : -1;
    return c >= 0 && lg->n_rows > 0 && !isfinite(lg->values[(lg->n_rows - 1) * (size_t)lg->n_cols + (size_t)c]);
}

static const char *const role_names[TSC_REPRO_N_ROLES] = {"lp", "hp", "lp-layer", "stable", "onetile", "hpdelta"};

const char *tsc_repro_role_name(tsc_repro_role_t role) {
    return (unsigned)role < TSC_REPRO_N_ROLES ? role_names[role] : NULL;
}

/* ---------------------------------------------------------------- statistics */

/* Adds the error just set to the row's problem ("a; b") and clears it. */
static void note_error(tsc_strbuf_t *pb) {
    tsc_strbuf_printf(pb, "%s%s", pb->len ? "; " : "", tsc_error_last());
    tsc_error_clear();
}

/* The log at path (name: its display name), or NULL with the reason noted. */
static tsc_log_t *read_log(const char *path, const char *name, tsc_strbuf_t *pb) {
    tsc_log_t *lg;
    if (tsc_log_read(path, name, &lg) == TSC_OK) return lg;
    note_error(pb);
    return NULL;
}

/* The validation-loss statistics of the log at path, and the rule's verdict. */
static void val_stats(const char *path, tsc_repro_row_t *r, tsc_strbuf_t *pb) {
    tsc_log_t *lg = read_log(path, "run", pb);
    if (!lg) return;
    if (tsc_repro_diverged_at(lg, &r->diverged_at) != TSC_OK) {
        note_error(pb);
        tsc_log_free(lg);
        return;
    }
    r->stopped_nonfinite = tsc_repro_stopped_nonfinite(lg);
    int cv = tsc_log_column(lg, "val_loss");
    for (size_t k = 0; k < lg->n_rows; k++) {
        double x = lg->values[k * (size_t)lg->n_cols + (size_t)cv];
        if (!isfinite(x)) continue;
        r->val_final = x;
        if (!(x >= r->val_lowest)) r->val_lowest = x;  /* NaN: none yet */
        if (!(x <= r->val_highest)) r->val_highest = x;
    }
    tsc_log_free(lg);
}

/* The largest per-head W^Q spectral norm of wq_norms.csv at its first and at its last step. */
static void wq_extremes(const char *path, tsc_repro_row_t *r, tsc_strbuf_t *pb) {
    tsc_log_t *lg = read_log(path, "wq", pb);
    if (!lg) return;
    int cl = tsc_log_column(lg, "layer"), ch = tsc_log_column(lg, "head"), cs = tsc_log_column(lg, "wq_sn");
    if (cl < 0 || ch < 0 || cs < 0 || lg->n_rows == 0) {
        /* a file the statistics cannot use is the row's problem, not the call's failure */
        (void)tsc_error_set(TSC_ERR_MISSING, "%s: %s", path,
                            lg->n_rows ? "expected the columns layer, head and wq_sn" : "no rows");
        note_error(pb);
        tsc_log_free(lg);
        return;
    }
    double s0 = lg->step[0], s1 = lg->step[lg->n_rows - 1];
    for (size_t k = 0; k < lg->n_rows; k++) {
        const double *row = lg->values + k * (size_t)lg->n_cols;
        if (lg->step[k] == s0 && !(row[cs] <= r->wq_first)) r->wq_first = row[cs];
        if (lg->step[k] == s1 && !(row[cs] <= r->wq_last))
            r->wq_last = row[cs], r->wq_layer = (int)row[cl], r->wq_head = (int)row[ch];
    }
    tsc_log_free(lg);
}

/* From a diagnosis: the head of layer with the largest |accumulated delta bias| at the layer's last
 * analysed step. */
static void delta_bias(const tsc_jv_t *sm, int layer, tsc_repro_row_t *r) {
    const tsc_jv_t *hs = tsc_jv_path(sm, "heads");
    for (size_t i = 0; hs && i < hs->n; i++)
        if (tsc_jv_int(hs->items[i], "layer", -1) == layer && tsc_jv_int(hs->items[i], "step", -1) > r->delta_step)
            r->delta_step = tsc_jv_int(hs->items[i], "step", -1);
    for (size_t i = 0; hs && i < hs->n; i++) {
        const tsc_jv_t *h = hs->items[i];
        double c = tsc_jv_num(h, "delta.cumsum");
        if (tsc_jv_int(h, "layer", -1) != layer || tsc_jv_int(h, "step", -1) != r->delta_step || !isfinite(c)) continue;
        if (!(fabs(c) <= fabs(r->delta_bias))) r->delta_bias = c, r->delta_head = (int)tsc_jv_int(h, "head", -1);
    }
}

static char *dup_or_null(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Row of run, its strings copied; 0, or -1 out of memory. */
static int fill_row(const tsc_repro_run_t *run, int layer, tsc_repro_row_t *r) {
    *r = (tsc_repro_row_t){.role = run->role, .val_final = NAN, .val_lowest = NAN, .val_highest = NAN,
                           .diverged_at = -1, .delta_bias = NAN, .delta_head = -1, .delta_step = -1,
                           .wq_first = NAN, .wq_last = NAN, .wq_layer = -1, .wq_head = -1};
    r->name = dup_or_null(run->name), r->attention = dup_or_null(run->attention);
    r->not_run = dup_or_null(run->not_run);
    if (!r->name || !r->attention || (run->not_run && !r->not_run)) return -1;
    tsc_strbuf_t pb;
    tsc_strbuf_init(&pb);
    if (!run->not_run) {
        val_stats(run->log, r, &pb);
        if (run->diagnosis) delta_bias(run->diagnosis, layer, r);
        if (run->wq_norms) wq_extremes(run->wq_norms, r, &pb);
    }
    if (pb.len && !(r->problem = tsc_strbuf_take(&pb))) return -1;
    tsc_strbuf_free(&pb);
    return 0;
}

static void row_free(tsc_repro_row_t *r) { free(r->name), free(r->attention), free(r->not_run), free(r->problem); }

void tsc_repro_outcome_free(tsc_repro_outcome_t *oc) {
    if (!oc) return;
    for (size_t i = 0; i < oc->n; i++) row_free(&oc->rows[i]);
    free(oc->rows);
    free(oc);
}

tsc_status_t tsc_repro_outcome_compute(const tsc_repro_run_t *runs, size_t n, int layer, tsc_repro_outcome_t **out) {
    if (!out || (!runs && n)) return tsc_error_set(TSC_ERR_ARG, "tsc_repro_outcome_compute: NULL argument");
    *out = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!runs[i].name || !runs[i].attention)
            return tsc_error_set(TSC_ERR_ARG, "outcome: run %zu has no %s", i, runs[i].name ? "attention" : "name");
        if (!runs[i].log && !runs[i].not_run)
            return tsc_error_set(TSC_ERR_ARG, "outcome: run %s has neither a log nor a reason it was not run",
                                 runs[i].name);
        if ((unsigned)runs[i].role >= TSC_REPRO_N_ROLES)
            return tsc_error_set(TSC_ERR_ARG, "outcome: run %s has role %d, not a tsc_repro_role_t", runs[i].name,
                                 (int)runs[i].role);
    }
    tsc_repro_outcome_t *oc = calloc(1, sizeof *oc);
    if (oc && n) oc->rows = calloc(n, sizeof *oc->rows);
    if (!oc || (n && !oc->rows)) {
        free(oc);
        return tsc_error_set(TSC_ERR_NOMEM, "outcome of %zu runs: out of memory", n);
    }
    oc->layer = layer;
    for (size_t i = 0; i < n; i++) {
        int bad = fill_row(&runs[i], layer, &oc->rows[i]);
        oc->n = i + 1; /* the row is freed with the rest, filled or not */
        if (bad) {
            tsc_repro_outcome_free(oc);
            return tsc_error_set(TSC_ERR_NOMEM, "outcome of run %s: out of memory", runs[i].name);
        }
    }
    *out = oc;
    return TSC_OK;
}

/* ---------------------------------------------------------------- Markdown */

static void fmt_num(char *buf, size_t cap, double x, const char *f) {
    if (isfinite(x)) snprintf(buf, cap, f, x);
    else snprintf(buf, cap, "-");
}

tsc_status_t tsc_repro_outcome_table(const tsc_repro_outcome_t *oc, tsc_strbuf_t *sb) {
    if (!oc || !sb) return tsc_error_set(TSC_ERR_ARG, "tsc_repro_outcome_table: NULL argument");
    tsc_strbuf_printf(sb, "| run | attention | final val loss | lowest | highest | diverged at step | "
                          "accumulated delta bias, layer %d | largest W^Q spectral norm: step 0 -> last (layer, head) |\n"
                          "| --- | --- | --- | --- | --- | --- | --- | --- |\n", oc->layer);
    for (size_t i = 0; i < oc->n; i++) {
        const tsc_repro_row_t *r = &oc->rows[i];
        if (r->not_run) {
            tsc_strbuf_printf(sb, "| %s | %s | not run (%s) | | | | | |\n", r->name, r->attention, r->not_run);
            continue;
        }
        char a[32], b[32], c[32], d[48], e[96], w0[32], w1[32];
        fmt_num(a, sizeof a, r->val_final, "%.5f"), fmt_num(b, sizeof b, r->val_lowest, "%.5f");
        fmt_num(c, sizeof c, r->val_highest, "%.5f");
        if (r->diverged_at >= 0) snprintf(d, sizeof d, "%lld%s", r->diverged_at, r->stopped_nonfinite ? " (NaN)" : "");
        else snprintf(d, sizeof d, "none");
        if (r->delta_head >= 0)
            snprintf(e, sizeof e, "%+.3g (head %d, steps 0..%lld)", r->delta_bias, r->delta_head, r->delta_step);
        else snprintf(e, sizeof e, "n/a (no capture)");
        fmt_num(w0, sizeof w0, r->wq_first, "%.4f"), fmt_num(w1, sizeof w1, r->wq_last, "%.4f");
        tsc_strbuf_printf(sb, "| %s | %s | %s | %s | %s | %s | %s | %s -> %s (%d, %d) |\n", r->name, r->attention, a,
                          b, c, d, e, w0, w1, r->wq_layer, r->wq_head);
    }
    return tsc_strbuf_status(sb);
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* dir/flight*.h5: what the flight recorder wrote, in name order, into sb. */
static void flight_note(const char *dir, tsc_strbuf_t *sb) {
    DIR *dp = dir ? opendir(dir) : NULL;
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; dp && (e = readdir(dp));) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "flight", 6) != 0 || l <= 3 || strcmp(e->d_name + l - 3, ".h5") != 0) continue;
        if (n == cap) {
            char **g = realloc(names, sizeof *names * (cap = cap ? 2 * cap : 8));
            if (!g) break;
            names = g;
        }
        if ((names[n] = dup_or_null(e->d_name))) n++;
    }
    if (dp) closedir(dp);
    if (n > 1) qsort(names, n, sizeof *names, cmp_name);
    for (size_t i = 0; i < n; i++) tsc_strbuf_printf(sb, "%s%s/%s", i ? ", " : "The flight recorder fired and wrote ", dir, names[i]);
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    tsc_strbuf_puts(sb, n ? " (its trigger: a loss or gradient-norm spike over its running baseline, a NaN, or a "
                            "signal; a small early spike fires it too, so read it with the log).\n"
                          : "The flight recorder did not fire (no spike, no NaN).\n");
}

static const char caveats[] =
    "## Reading these figures on a short run\n\n"
    "The paper's run failed after about 7000 steps of GPT-2 small on OpenWebText. A run of this configuration is\n"
    "orders of magnitude shorter and smaller, so:\n\n"
    "- fig2, fig7, fig10 (losses): every run is still learning; the curves of the runs lie on top of each other (each\n"
    "  run has its own dash pattern, so they show as one multicoloured dashed line: read the table) and their\n"
    "  differences are of the size of the BF16 rounding\n"
    "  noise between policies. \"No divergence\" here says nothing about whether the mechanism would act later.\n"
    "- fig13 (lp's validation loss and its rows with tied maxima): in a young model the scores are small and close\n"
    "  together, so BF16 scores tie often; a rising count here is not the paper's precursor of a blow-up.\n"
    "- fig3, fig11 (spectral norms): the early growth of freshly initialised weights, the same in every run, not the\n"
    "  accumulation of a biased error.\n"
    "- fig5a, fig12 (accumulated delta difference): a sum over few captured steps; its sign is noise unless the\n"
    "  diagnosis flags a head (the section above says whether it did).\n"
    "- fig4, fig8 (rank-1 terms and their cosines): the cosines follow the stage of training: near 1 in a model that\n"
    "  has barely trained (nearly uniform attention, similar inputs), low in one that has trained a little. The\n"
    "  paper's near-parallel terms were measured close to its failure, so neither tests its claim.\n"
    "- fig6, fig9 (ties at the row maximum): drawn only when the capture has a row with two equal maxima. While the\n"
    "  largest attention logit is small, P-bar is close to 1 at every key, not the paper's regime (a sharp maximum,\n"
    "  the other keys' mass below half an ULP of the sum: docs/MECHANISM.md section 5), so no bias is expected;\n"
    "  fig6b's error then moves up and down at every key, and a negative step that fig6c finds at a tied key is\n"
    "  one of many of its size.\n"
    "- fig1 (evidence map): each link is coloured by the evidence of this run. Links 3 and 5 can show as supported\n"
    "  for the reasons above (high cosines in a barely trained model; with two heads the shown head is the\n"
    "  largest or the smallest).\n\n";

static const char *str_or_empty(const char *s) { return s ? s : ""; }

tsc_status_t tsc_repro_outcome_md(const tsc_repro_outcome_t *oc, const tsc_repro_doc_t *doc, tsc_strbuf_t *sb) {
    if (!oc || !doc || !sb) return tsc_error_set(TSC_ERR_ARG, "tsc_repro_outcome_md: NULL argument");
    const char *dir = str_or_empty(doc->dir);
    tsc_strbuf_t table;
    tsc_strbuf_init(&table);
    tsc_status_t st = tsc_repro_outcome_table(oc, &table);
    if (st != TSC_OK) {
        tsc_strbuf_free(&table);
        return st;
    }
    for (size_t i = 0, k = 0; i < oc->n; i++)
        if (oc->rows[i].problem)
            tsc_strbuf_printf(&table, "%s- %s: %s\n", k++ ? "" : "\nNot measured:\n\n", oc->rows[i].name,
                              oc->rows[i].problem);
    tsc_strbuf_printf(sb, "# Outcome of `tilescope repro`, config %s\n\n%s: model %s, BF16 autocast, batch %d x %d "
                          "tokens, %lld steps per run, peak learning rate %s, warm-up %d steps, seed %lld. Every run "
                          "replays the batch order of lp (its batches.csv).\n\n",
                      str_or_empty(doc->config), str_or_empty(doc->label), str_or_empty(doc->model), doc->batch,
                      doc->seq_len, doc->steps, str_or_empty(doc->lr), doc->warmup, doc->seed);
    tsc_strbuf_printf(sb, "## Outcome\n\n%s\nDiverged: the validation loss above twice its running minimum, or a "
                          "non-finite loss (the trainer stops there). Accumulated delta bias: sum over the captured "
                          "steps of sum_T(delta_lp - delta_hp) of the head with the largest magnitude (positive is "
                          "the paper's direction). Heads and layers are 0-based.\n\n", tsc_strbuf_str(&table));
    tsc_strbuf_free(&table);
    /* the report's count: the at-risk heads of the analysed (layer, head)s */
    double nr = tsc_jv_num(doc->diagnosis, "diagnosis.n_at_risk");
    const tsc_jv_t *ph = tsc_jv_get(doc->diagnosis, "per_head");
    const char *fit = tsc_jv_str(doc->diagnosis, "diagnosis.fit.sentence");
    const char *bs = tsc_jv_str(doc->diagnosis, "diagnosis.biased_step");
    tsc_strbuf_printf(sb, "## Diagnosis of lp's capture (%s/diagnose/)\n\n%s; %.0f of %zu heads at risk%s%s.\n", dir,
                      fit ? fit : "no fit", isfinite(nr) ? nr : 0, ph ? ph->n : 0,
                      bs && strcmp(bs, "none") ? "; biased rounding step (named by FP32 substitution for at least "
                                                 "half of the examined heads): " : "",
                      bs && strcmp(bs, "none") ? bs : "");
    flight_note(doc->flight_dir, sb);
    for (size_t i = 0; i < oc->n; i++)
        if (oc->rows[i].role == TSC_REPRO_LP && oc->rows[i].diverged_at >= 0 && doc->flight_dir && doc->ckpt_kept)
            tsc_strbuf_printf(sb, "%s diverged at step %lld: `tilescope rescue %s -o %s/rescue` diagnoses its flight "
                                  "dump, told nothing of the run, and reruns it from the checkpoint before the "
                                  "trigger with the fix the diagnosis recommends.\n",
                              oc->rows[i].name, oc->rows[i].diverged_at, doc->flight_dir, dir);
        else if (oc->rows[i].role == TSC_REPRO_LP && oc->rows[i].diverged_at >= 0 && doc->flight_dir)
            tsc_strbuf_printf(sb, "%s diverged at step %lld: run repro again with --keep-checkpoints to keep its "
                                  "checkpoints, from which `tilescope rescue %s -o %s/rescue` reruns it with the fix "
                                  "the diagnosis recommends.\n",
                              oc->rows[i].name, oc->rows[i].diverged_at, doc->flight_dir, dir);
    if (doc->tile_q > 0 && doc->seq_len <= doc->tile_q && doc->seq_len <= doc->tile_k)
        tsc_strbuf_printf(sb, "onetile: %d tokens fit in one %d x %d tile, so onetile computes what lp computes "
                              "(its log equals lp's): a vacuous control in this configuration.\n",
                          doc->seq_len, doc->tile_q, doc->tile_k);
    tsc_strbuf_puts(sb, "The trainer has no per-head policy, so the paper's control \"FP32 O in the at-risk heads "
                        "only\" is not run.\n\n");
    tsc_strbuf_printf(sb, "## Figures (%s/figures/)\n\n%s\n%s## Commands\n\n```\n%s```\n", dir,
                      str_or_empty(doc->figures), caveats, str_or_empty(doc->commands));
    return tsc_strbuf_status(sb);
}

tsc_status_t tsc_repro_outcome_write(const tsc_repro_outcome_t *oc, const tsc_repro_doc_t *doc, const char *path) {
    if (!path) return tsc_error_set(TSC_ERR_ARG, "tsc_repro_outcome_write: NULL path");
    tsc_strbuf_t sb;
    tsc_strbuf_init(&sb);
    tsc_status_t st = tsc_repro_outcome_md(oc, doc, &sb);
    if (st == TSC_ERR_NOMEM) st = tsc_error_set(st, "%s: out of memory", path);
    if (st == TSC_OK) st = tsc_out_write_all(path, tsc_strbuf_str(&sb), sb.len);
    tsc_strbuf_free(&sb);
    return st;
}

/* ---------------------------------------------------------------- JSON */

#define ROW_F(m, key) TSC_JSON_FIELD(tsc_repro_row_t, m, key)
static const tsc_json_field_t id_f[] = {TSC_JSON_STR(tsc_repro_row_t, name, "name"),
                                        TSC_JSON_STR(tsc_repro_row_t, attention, "attention"),
                                        TSC_JSON_STR(tsc_repro_row_t, not_run, "not_run")};
static const tsc_json_field_t verdict_f[] = {ROW_F(diverged_at, "diverged_at"),
                                             TSC_JSON_BOOL(tsc_repro_row_t, stopped_nonfinite, "stopped_nonfinite"),
                                             TSC_JSON_STR(tsc_repro_row_t, problem, "problem")};
static const tsc_json_field_t val_f[] = {ROW_F(val_final, "final"), ROW_F(val_lowest, "lowest"),
                                         ROW_F(val_highest, "highest")};
static const tsc_json_field_t delta_f[] = {ROW_F(delta_bias, "value"), ROW_F(delta_head, "head"),
                                           ROW_F(delta_step, "last_step")};
static const tsc_json_field_t wq_f[] = {ROW_F(wq_first, "first"), ROW_F(wq_last, "last"), ROW_F(wq_layer, "layer"),
                                        ROW_F(wq_head, "head")};
#undef ROW_F

void tsc_repro_outcome_json(const tsc_repro_outcome_t *oc, tsc_json_t *j) {
    tsc_json_object_begin(j);
    tsc_json_kv_int(j, "layer", oc->layer);
    tsc_json_key(j, "runs");
    tsc_json_array_begin(j);
    for (size_t i = 0; i < oc->n; i++) {
        const tsc_repro_row_t *r = &oc->rows[i];
        tsc_json_object_begin(j);
        tsc_json_kv_fields(j, r, id_f, TSC_JSON_NFIELDS(id_f));
        tsc_json_kv_string(j, "role", tsc_repro_role_name(r->role));
        tsc_json_kv_fields(j, r, verdict_f, TSC_JSON_NFIELDS(verdict_f));
        tsc_json_kv_object(j, "val_loss", r, val_f, TSC_JSON_NFIELDS(val_f));
        if (r->delta_head >= 0) tsc_json_kv_object(j, "delta_bias", r, delta_f, TSC_JSON_NFIELDS(delta_f));
        else tsc_json_key(j, "delta_bias"), tsc_json_null(j); /* not captured */
        tsc_json_kv_object(j, "wq_sn", r, wq_f, TSC_JSON_NFIELDS(wq_f));
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
    tsc_json_object_end(j);
}

/* ---- the fix of a failed run ---- */

static void copy_field(char *dst, size_t cap, const char *src) { snprintf(dst, cap, "%s", src ? src : ""); }

tsc_status_t tsc_repro_fix_choose(const tsc_jv_t *summary, const char *where, tsc_repro_fix_t *fix) {
    if (!summary || !fix) return tsc_error_set(TSC_ERR_ARG, "fix: NULL summary or result");
    memset(fix, 0, sizeof *fix);
    fix->layer = fix->head = -1;
    fix->step = -1;
    fix->delta_cumsum = NAN;
    const tsc_jv_t *at = tsc_jv_path(summary, "diagnosis.at_risk");
    if (!at) return tsc_error_set(TSC_ERR_FORMAT, "%s: no diagnosis.at_risk (not a summary.json of `tilescope diagnose`)",
                                  where ? where : "summary");
    size_t n = tsc_jv_len(summary, "diagnosis.at_risk");
    fix->n_at_risk = (int)n;
    copy_field(fix->biased_step, sizeof fix->biased_step, tsc_jv_str(summary, "diagnosis.biased_step"));
    uint64_t layers = 0;
    for (size_t i = 0; i < n; i++) {
        long long l = tsc_jv_int(tsc_jv_at(at, i), "layer", -1);
        if (l >= 0 && l < 64) layers |= 1ull << l;
    }
    size_t w = 0;
    for (int l = 0; l < 64; l++)
        if (layers >> l & 1) w += (size_t)snprintf(fix->layers + w, sizeof fix->layers - w, "%s%d", w ? "," : "", l);
    if (!n) return TSC_OK;
    const tsc_jv_t *h = tsc_jv_at(at, 0);  /* ranked: the largest accumulated delta bias first */
    fix->layer = (int)tsc_jv_int(h, "layer", -1);
    fix->head = (int)tsc_jv_int(h, "head", -1);
    fix->step = tsc_jv_int(h, "step", -1);
    fix->delta_cumsum = tsc_jv_num(h, "delta_cumsum");
    copy_field(fix->culprit, sizeof fix->culprit, tsc_jv_str(h, "culprit"));
    copy_field(fix->verdict, sizeof fix->verdict, tsc_jv_str(h, "verdict"));
    copy_field(fix->recommendation, sizeof fix->recommendation, tsc_jv_str(h, "recommendation"));
    const tsc_jv_t *fixes = tsc_jv_get(h, "fixes");
    size_t nf = tsc_jv_len(h, "fixes");
    int pick = -1, fp32o = -1;
    for (size_t i = 0; i < nf; i++) {
        const tsc_jv_t *f = tsc_jv_at(fixes, i);
        const tsc_jv_t *rec = tsc_jv_get(f, "recommended");
        const char *mod = tsc_jv_str(f, "modifier");
        if (!mod) continue;
        if (pick < 0 && rec && rec->type == TSC_JV_BOOL && rec->num == 1) pick = (int)i;
        if (fp32o < 0 && !strncmp(mod, "+fp32:", 6)) fp32o = (int)i;
    }
    fix->removes = pick >= 0;
    if (pick < 0) pick = fp32o;
    if (pick < 0)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: the at-risk head (layer %d, head %d) lists no fix with a modifier",
                             where ? where : "summary", fix->layer, fix->head);
    const tsc_jv_t *f = tsc_jv_at(fixes, (size_t)pick);
    copy_field(fix->fix, sizeof fix->fix, tsc_jv_str(f, "fix"));
    copy_field(fix->modifier, sizeof fix->modifier, tsc_jv_str(f, "modifier"));
    return TSC_OK;
}
