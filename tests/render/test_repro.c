/* The outcome of an experiment's runs (render/tsc_repro.h): the divergence rule on synthetic logs whose
 * answers are known (and differ from what a near-miss rule would give: twice the first value, twice the
 * global minimum, >= instead of >, a row index instead of a step, a NaN validation cell counted); the
 * statistics of a list of runs from files; the table, outcome.md and the JSON. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <unistd.h>

#include "tsc_repro.h"
#include "tsc_test.h"

static tsc_log_t *parse(const char *text) {
    tsc_log_t *lg = NULL;
    if (tsc_log_parse(text, strlen(text), "synthetic.csv", NULL, &lg) != TSC_OK)
        fprintf(stderr, "  (parse: %s)\n", tsc_error_last());
    return lg;
}

/* The step the rule finds in text, and whether the trainer stopped on a non-finite loss. */
static long long diverged(const char *text, int *stopped) {
    tsc_log_t *lg = parse(text);
    long long step = -2;
    CHECK(lg != NULL);
    if (!lg) return step;
    CHECK(tsc_repro_diverged_at(lg, &step) == TSC_OK);
    if (stopped) *stopped = tsc_repro_stopped_nonfinite(lg);
    tsc_log_free(lg);
    return step;
}

/* Never diverges: 3.0 is exactly twice the running minimum 1.5 (not above it), the empty validation cells
 * are steps without an evaluation, and 2.9 after 1.5 is below twice it. */
static const char never[] = "step,train_loss,val_loss\n"
                            "0,5.0,4.0\n5,4.8,\n10,4.5,2.5\n20,4.0,1.5\n30,3.9,2.9\n35,3.8,\n40,3.8,3.0\n50,3.7,2.0\n";
/* Diverges at step 20 (row 2): 4.5 is above twice the running minimum 2.0. Twice the global minimum (1.0,
 * later) would say step 0; twice the first value (3.0) would say never. */
static const char above[] = "step,train_loss,val_loss\n"
                            "0,5.0,3.0\n10,4.0,2.0\n15,3.9,\n20,3.8,4.5\n30,3.5,1.0\n40,3.4,2.5\n";
/* Stops on a NaN training loss at step 3, where no validation loss was computed. */
static const char nan_run[] = "step,train_loss,val_loss,grad_norm\n0,5.0,5.0,1\n1,4.9,,1\n2,4.8,4.7,1\n3,nan,,1\n";

static void test_rule(void) {
    int stopped = -1;
    CHECK_EQ_INT(diverged(never, &stopped), -1);
    CHECK_EQ_INT(stopped, 0);
    CHECK_EQ_INT(diverged(above, &stopped), 20);
    CHECK_EQ_INT(stopped, 0);
    CHECK_EQ_INT(diverged(nan_run, &stopped), 3);
    CHECK_EQ_INT(stopped, 1);
    /* an infinite training loss, and "-nan" as glibc prints a negative NaN */
    CHECK_EQ_INT(diverged("step,train_loss,val_loss\n0,5,5\n7,inf,\n", &stopped), 7);
    CHECK_EQ_INT(stopped, 1);
    CHECK_EQ_INT(diverged("step,train_loss,val_loss\n0,5,5\n7,-nan,\n", &stopped), 7);
    CHECK_EQ_INT(stopped, 1);
    /* an infinite validation loss diverges; the run went on, so it did not stop there */
    CHECK_EQ_INT(diverged("step,train_loss,val_loss\n0,5,5\n4,4,inf\n8,3,4\n", &stopped), 4);
    CHECK_EQ_INT(stopped, 0);
    /* the first validation loss has no minimum before it, however large */
    CHECK_EQ_INT(diverged("step,val_loss,train_loss\n100,1e9,5\n200,6e8,5\n", NULL), -1);
    /* a log without the columns: TSC_ERR_MISSING naming what is missing */
    tsc_log_t *lg = parse("step,train_loss\n0,1\n");
    long long step = 5;
    CHECK(lg && tsc_repro_diverged_at(lg, &step) == TSC_ERR_MISSING);
    CHECK_EQ_INT(step, -1);
    CHECK(strstr(tsc_error_last(), "no val_loss column") != NULL);
    CHECK_EQ_INT(tsc_repro_stopped_nonfinite(lg), 0);
    tsc_log_free(lg);
    tsc_error_clear();
    CHECK(tsc_repro_diverged_at(NULL, &step) == TSC_ERR_ARG);
    CHECK_EQ_INT(tsc_repro_stopped_nonfinite(NULL), 0);
    tsc_error_clear();
}

static void write_file(const char *dir, const char *name, const char *text) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tsc_test_write_text(path, text);
}

/* lp's diagnosis: layer 1 last analysed at step 3, where head 0 has the largest |cumsum|; a larger one at
 * an earlier step and one in layer 0 must not be taken. */
static const char summary[] =
    "{\"per_head\": [{\"layer\": 0, \"head\": 0}, {\"layer\": 0, \"head\": 1}, {\"layer\": 1, \"head\": 0}],\n"
    " \"diagnosis\": {\"n_at_risk\": 2, \"fit\": {\"sentence\": \"replay under p reproduces 100%\"}},\n"
    " \"heads\": [{\"layer\": 1, \"head\": 0, \"step\": 0, \"delta\": {\"cumsum\": 0.5}},\n"
    "            {\"layer\": 1, \"head\": 1, \"step\": 3, \"delta\": {\"cumsum\": 0.001}},\n"
    "            {\"layer\": 1, \"head\": 0, \"step\": 3, \"delta\": {\"cumsum\": -0.002}},\n"
    "            {\"layer\": 0, \"head\": 1, \"step\": 3, \"delta\": {\"cumsum\": 0.9}}]}";

static void test_outcome(const char *dir) {
    char p[6][400];
    write_file(dir, "lp.csv", above);
    write_file(dir, "lp_wq.csv", "step,layer,head,wq_sn\n0,0,0,0.1\n0,1,0,0.2\n30,0,0,0.3\n30,1,0,0.5\n30,1,1,0.4\n");
    write_file(dir, "hp.csv", never);
    write_file(dir, "nan.csv", nan_run);
    write_file(dir, "flight_b.h5", "");
    write_file(dir, "flight_a.h5", "");
    write_file(dir, "flight.txt", "");
    const char *names[6] = {"lp.csv", "lp_wq.csv", "hp.csv", "hp_wq.csv", "nan.csv", "outcome.md"};
    for (int i = 0; i < 6; i++) snprintf(p[i], sizeof p[i], "%s/%s", dir, names[i]);
    tsc_jv_t *sm = NULL;
    CHECK(tsc_jv_parse(summary, strlen(summary), "summary", &sm) == TSC_OK);
    const tsc_repro_run_t runs[] = {
        {"lp", "bf16-torch", TSC_REPRO_LP, p[0], p[1], sm, NULL},
        {"hp", "fp32", TSC_REPRO_HP, p[2], p[3], NULL, NULL}, /* hp_wq.csv does not exist */
        {"nan", "fp8", TSC_REPRO_STABLE, p[4], NULL, NULL, NULL},
        {"ctl", "bf16-torch+hp-delta", TSC_REPRO_HPDELTA, NULL, NULL, NULL, "budget"}};
    tsc_repro_outcome_t *oc = NULL;
    CHECK(tsc_repro_outcome_compute(runs, 4, 1, &oc) == TSC_OK);
    if (!oc) return;
    CHECK_EQ_INT(oc->n, 4);
    const tsc_repro_row_t *lp = &oc->rows[0], *hp = &oc->rows[1], *nr = &oc->rows[2], *ctl = &oc->rows[3];
    CHECK_NEAR(lp->val_final, 2.5, 0);
    CHECK_NEAR(lp->val_lowest, 1.0, 0);
    CHECK_NEAR(lp->val_highest, 4.5, 0);
    CHECK_EQ_INT(lp->diverged_at, 20);
    CHECK_NEAR(lp->delta_bias, -0.002, 0);
    CHECK_EQ_INT(lp->delta_head, 0);
    CHECK_EQ_INT(lp->delta_step, 3);
    CHECK_NEAR(lp->wq_first, 0.2, 0);
    CHECK_NEAR(lp->wq_last, 0.5, 0);
    CHECK(lp->wq_layer == 1 && lp->wq_head == 0);
    CHECK(lp->problem == NULL);
    CHECK_EQ_INT(hp->diverged_at, -1);
    CHECK(isnan(hp->delta_bias) && hp->delta_head == -1);
    CHECK(isnan(hp->wq_first) && hp->wq_layer == -1);
    CHECK(hp->problem && strstr(hp->problem, "hp_wq.csv") != NULL);
    CHECK_EQ_INT(nr->diverged_at, 3);
    CHECK_EQ_INT(nr->stopped_nonfinite, 1);
    CHECK_NEAR(nr->val_final, 4.7, 0);
    CHECK(nr->problem == NULL); /* no wq_norms asked for */
    CHECK(ctl->not_run && strcmp(ctl->not_run, "budget") == 0);

    tsc_strbuf_t t;
    tsc_strbuf_init(&t);
    CHECK(tsc_repro_outcome_table(oc, &t) == TSC_OK);
    const char *tt = tsc_strbuf_str(&t);
    CHECK(strstr(tt, "| accumulated delta bias, layer 1 |") != NULL);
    CHECKF(strstr(tt, "\n| lp | bf16-torch | 2.50000 | 1.00000 | 4.50000 | 20 | -0.002 (head 0, steps 0..3) | "
                      "0.2000 -> 0.5000 (1, 0) |\n") != NULL, "%s", tt);
    CHECK(strstr(tt, "\n| hp | fp32 | 2.00000 | 1.50000 | 4.00000 | none | n/a (no capture) | - -> - (-1, -1) |\n"));
    CHECK(strstr(tt, "\n| nan | fp8 | 4.70000 | 4.70000 | 5.00000 | 3 (NaN) | n/a (no capture) | - -> - (-1, -1) |\n"));
    CHECK(strstr(tt, "\n| ctl | bf16-torch+hp-delta | not run (budget) | | | | | |\n"));
    tsc_strbuf_free(&t);

    const tsc_repro_doc_t doc = {"tiny", "a test", "gpt2-tiny", "1e-3", 4, 32, 5, 30, 7, 512, 64, "out", sm, dir,
                                 "Drawn: fig1.\n", "tilescope train -o out/runs/lp\n", 0};
    CHECK(tsc_repro_outcome_write(oc, &doc, p[5]) == TSC_OK);
    char *md = NULL;
    size_t len = 0;
    CHECK(tsc_read_file(p[5], &md, &len) == TSC_OK);
    if (md) {
        const char *head = "# Outcome of `tilescope repro`, config tiny\n\na test: model gpt2-tiny, BF16 autocast, "
                           "batch 4 x 32 tokens, 30 steps per run, peak learning rate 1e-3, warm-up 5 steps, seed 7.";
        CHECK(strncmp(md, head, strlen(head)) == 0);
        CHECK(strstr(md, "\nNot measured:\n\n- hp: ") != NULL);
        CHECK(strstr(md, "replay under p reproduces 100%; 2 of 3 heads at risk.\n"));
        char want[800];
        snprintf(want, sizeof want, "The flight recorder fired and wrote %s/flight_a.h5, %s/flight_b.h5 (", dir, dir);
        CHECKF(strstr(md, want) != NULL, "no '%s'", want);
        CHECK(strstr(md, "onetile: 32 tokens fit in one 512 x 64 tile"));
        CHECK(strstr(md, "## Figures (out/figures/)\n\nDrawn: fig1.\n\n## Reading these figures"));
        CHECK(strstr(md, "## Commands\n\n```\ntilescope train -o out/runs/lp\n```\n") && md[len - 1] == '\n');
        free(md);
    }

    /* a diverged lp: outcome.md offers rescue only when lp kept its checkpoints, else says how to keep them */
    const tsc_repro_run_t runs2[] = {{"lp", "bf16-torch", TSC_REPRO_LP, p[4], NULL, NULL, NULL}};
    tsc_repro_outcome_t *oc2 = NULL;
    CHECK(tsc_repro_outcome_compute(runs2, 1, 1, &oc2) == TSC_OK);
    for (int kept = 0; kept < 2 && oc2; kept++) {
        tsc_repro_doc_t d2 = doc;
        d2.ckpt_kept = kept;
        tsc_strbuf_t sb;
        tsc_strbuf_init(&sb);
        CHECK(tsc_repro_outcome_md(oc2, &d2, &sb) == TSC_OK);
        const char *s = tsc_strbuf_str(&sb);
        CHECKF((strstr(s, "lp diverged at step 3: run repro again with --keep-checkpoints") != NULL) == !kept,
               "kept %d: the keep-checkpoints sentence", kept);
        CHECKF((strstr(s, "lp diverged at step 3: `tilescope rescue ") != NULL) == kept, "kept %d: the rescue sentence",
               kept);
        tsc_strbuf_free(&sb);
    }
    tsc_repro_outcome_free(oc2);

    tsc_json_t j;
    tsc_json_init(&j);
    tsc_repro_outcome_json(oc, &j);
    CHECK(tsc_json_status(&j) == TSC_OK);
    tsc_jv_t *v = NULL;
    const char *jt = tsc_json_text(&j, &len);
    CHECK(tsc_jv_parse(jt, len, "outcome json", &v) == TSC_OK);
    CHECK_EQ_INT(tsc_jv_int(v, "layer", -9), 1);
    CHECK_EQ_INT(tsc_jv_len(v, "runs"), 4);
    CHECK(tsc_jv_str(v, "runs.0.role") && strcmp(tsc_jv_str(v, "runs.0.role"), "lp") == 0);
    CHECK_EQ_INT(tsc_jv_int(v, "runs.0.diverged_at", -9), 20);
    CHECK_NEAR(tsc_jv_num(v, "runs.0.delta_bias.value"), -0.002, 0);
    CHECK_EQ_INT(tsc_jv_int(v, "runs.0.wq_sn.layer", -9), 1);
    CHECK_EQ_INT(tsc_jv_int(v, "runs.1.diverged_at", -9), -1);
    CHECK(isnan(tsc_jv_num(v, "runs.1.wq_sn.first")) && tsc_jv_int(v, "runs.1.wq_sn.head", -9) == -1);
    CHECK(tsc_jv_path(v, "runs.1.delta_bias")->type == TSC_JV_NULL);
    CHECK(tsc_jv_str(v, "runs.1.problem") != NULL);
    CHECK(tsc_jv_path(v, "runs.0.problem")->type == TSC_JV_NULL);
    CHECK(tsc_jv_path(v, "runs.2.stopped_nonfinite")->num == 1);
    CHECK(tsc_jv_str(v, "runs.3.not_run") && strcmp(tsc_jv_str(v, "runs.3.not_run"), "budget") == 0);
    CHECK(tsc_jv_str(v, "runs.3.role") && strcmp(tsc_jv_str(v, "runs.3.role"), "hpdelta") == 0);
    tsc_jv_free(v);
    tsc_json_free(&j);
    tsc_repro_outcome_free(oc);

    /* refused lists: no name, neither a log nor a reason, a role outside the enum */
    tsc_repro_run_t bad = {"x", "fp32", TSC_REPRO_HP, NULL, NULL, NULL, NULL};
    CHECK(tsc_repro_outcome_compute(&bad, 1, 0, &oc) == TSC_ERR_ARG && oc == NULL);
    CHECK(strstr(tsc_error_last(), "run x has neither a log") != NULL);
    bad.log = p[2], bad.name = NULL;
    CHECK(tsc_repro_outcome_compute(&bad, 1, 0, &oc) == TSC_ERR_ARG);
    bad.name = "x", bad.role = TSC_REPRO_N_ROLES;
    CHECK(tsc_repro_outcome_compute(&bad, 1, 0, &oc) == TSC_ERR_ARG);
    CHECK(tsc_repro_outcome_compute(NULL, 0, 0, &oc) == TSC_OK && oc && oc->n == 0);
    tsc_repro_outcome_free(oc);
    tsc_repro_outcome_free(NULL);
    tsc_error_clear();
    CHECK_STREQ(tsc_repro_role_name(TSC_REPRO_LP_LAYER), "lp-layer");
    CHECK(tsc_repro_role_name(TSC_REPRO_N_ROLES) == NULL);
    tsc_jv_free(sm);
}

int main(void) {
    test_rule();
    char dir[] = "/tmp/tsc_repro_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    test_outcome(dir);
    CHECK(tsc_test_rmtree(dir) == 0);
    return tsc_test_done();
}
