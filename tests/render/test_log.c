/* Training-log reader (render/tsc_log.h): CSV, TSV, nanoGPT lines, and malformed logs rejected with
 * a message naming the file and the line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tsc_log.h"
#include "tsc_test.h"

static tsc_log_t *parse(const char *text, const char *where) {
    tsc_log_t *lg = NULL;
    tsc_status_t st = tsc_log_parse(text, strlen(text), where, NULL, &lg);
    if (st != TSC_OK) fprintf(stderr, "  (parse %s: %s)\n", where, tsc_error_last());
    return lg;
}

/* Expects a parse failure whose message contains every needle. */
static void expect_fail(const char *text, const char *where, const char *n1, const char *n2) {
    tsc_log_t *lg = NULL;
    tsc_status_t st = tsc_log_parse(text, strlen(text), where, NULL, &lg);
    CHECKF(st == TSC_ERR_FORMAT, "%s: status %d", where, (int)st);
    CHECK(lg == NULL);
    CHECKF(strstr(tsc_error_last(), n1) != NULL, "message '%s' lacks '%s'", tsc_error_last(), n1);
    if (n2) CHECKF(strstr(tsc_error_last(), n2) != NULL, "message '%s' lacks '%s'", tsc_error_last(), n2);
    tsc_log_free(lg);
}

static void test_csv(void) {
    const char *t = "# a comment\nstep,train_loss,val_loss,lr,grad_norm\n0,10.5,10.75,0,1.5\n\n"
                    "100,6.25,6.5,1e-4,\n200,4.125,nan,2e-4,0.75\r\n";
    tsc_log_t *lg = parse(t, "run.csv");
    CHECK(lg != NULL);
    if (!lg) return;
    CHECK_EQ_INT(lg->kind, TSC_LOG_CSV);
    CHECK_EQ_INT(lg->n_rows, 3);
    CHECK_EQ_INT(lg->n_cols, 4); /* step is the x axis, not a value column */
    int tl = tsc_log_column(lg, "train_loss"), vl = tsc_log_column(lg, "val_loss"), gn = tsc_log_column(lg, "grad_norm");
    CHECK(tl == 0 && vl == 1 && gn == 3);
    CHECK_EQ_INT(tsc_log_column(lg, "step"), -1);
    CHECK_NEAR(lg->step[2], 200, 0);
    CHECK_NEAR(lg->values[1 * 4 + tl], 6.25, 0);
    CHECK_NEAR(lg->values[0 * 4 + tsc_log_column(lg, "lr")], 0, 0);
    CHECK(isnan(lg->values[1 * 4 + gn]));   /* empty field: not logged */
    CHECK(isnan(lg->values[2 * 4 + vl]));   /* "nan": not logged */
    CHECK_NEAR(lg->values[2 * 4 + gn], 0.75, 0);
    double x[3], y[3];
    size_t n = tsc_log_series(lg, vl, x, y);
    CHECK_EQ_INT(n, 2); /* the NaN row is left out */
    CHECK_NEAR(x[1], 100, 0);
    CHECK_NEAR(y[1], 6.5, 0);
    CHECK_STREQ(lg->name, "run.csv");
    tsc_log_free(lg);
}

static void test_tsv(void) {
    tsc_log_t *lg = parse("val_loss\tstep\n3.5\t10\n3.25\t20\n", "run.tsv");
    CHECK(lg != NULL);
    if (!lg) return;
    CHECK_EQ_INT(lg->kind, TSC_LOG_TSV);
    CHECK_EQ_INT(lg->n_rows, 2);
    CHECK_EQ_INT(lg->n_cols, 1);
    CHECK_NEAR(lg->step[1], 20, 0);   /* step need not be the first column */
    CHECK_NEAR(lg->values[1], 3.25, 0);
    tsc_log_free(lg);
}

static void test_nanogpt(void) {
    const char *t = "Overriding config with config/train_gpt2.py:\n"
                    "tokens per iteration will be: 491,520\n"
                    "step 0: train loss 10.9868, val loss 10.9877\n"
                    "iter 0: loss 10.9901, time 35123.45ms, mfu -100.00%\n"
                    "iter 10: loss 9.1234, time 512.20ms, mfu 31.50%\n"
                    "saving checkpoint to out\n"
                    "step 250: train loss 4.3127, val loss 4.3221\n";
    tsc_log_t *lg = parse(t, "train.log");
    CHECK(lg != NULL);
    if (!lg) return;
    CHECK_EQ_INT(lg->kind, TSC_LOG_NANOGPT);
    CHECK_EQ_INT(lg->n_rows, 4);
    int tl = tsc_log_column(lg, "train_loss"), vl = tsc_log_column(lg, "val_loss"), il = tsc_log_column(lg, "iter_loss");
    int tm = tsc_log_column(lg, "time_ms"), mf = tsc_log_column(lg, "mfu");
    CHECK(tl >= 0 && vl >= 0 && il >= 0 && tm >= 0 && mf >= 0);
    int nc = lg->n_cols;
    CHECK_NEAR(lg->step[3], 250, 0);
    CHECK_NEAR(lg->values[3 * nc + vl], 4.3221, 1e-12);
    CHECK_NEAR(lg->values[3 * nc + tl], 4.3127, 1e-12);
    CHECK(isnan(lg->values[3 * nc + il]));
    CHECK_NEAR(lg->step[2], 10, 0);
    CHECK_NEAR(lg->values[2 * nc + il], 9.1234, 1e-12);
    CHECK_NEAR(lg->values[2 * nc + tm], 512.20, 1e-9);
    CHECK_NEAR(lg->values[2 * nc + mf], 31.50, 1e-9);
    double x[4], y[4];
    CHECK_EQ_INT(tsc_log_series(lg, vl, x, y), 2);
    tsc_log_free(lg);
}

static void test_malformed(void) {
    expect_fail("step,loss\n0,1.5\n1,abc\n", "bad.csv", "bad.csv:3", "abc");
    expect_fail("step,loss\n0,1.5\n1,2.5,7\n", "fields.csv", "fields.csv:3", "expected 2 fields");
    expect_fail("train_loss,val_loss\n1,2\n", "nostep.csv", "nostep.csv:1", "step");
    expect_fail("step 0: train loss 1.0\n", "trunc.log", "trunc.log:1", "val loss");
    expect_fail("iter 5 loss 2.0\n", "colon.log", "colon.log:1", "':'");
    expect_fail("step,loss\n", "empty.csv", "empty.csv", "no data rows");
    expect_fail("hello\nworld\n", "prose.log", "prose.log", "no log line found");
    /* llm.c lines that start like log lines but do not parse: named by file and line */
    expect_fail("val loss 3.5\nstep    2/100 | los 3.4 | norm 1.0\n", "llmc.log", "llmc.log:2", "loss X");
    expect_fail("step 1: train loss 3.5 (took 20 ms)\nval loss abc\n", "v.log", "v.log:2", "val loss X");
    expect_fail("s:0 trl:3.5 lr:0.1 norm:1\ns:1 xyz:2\n", "main.log", "main.log:2", "main.log");
    /* nanoGPT and llm.c in one file */
    expect_fail("iter 0: loss 3.5\nstep 1/10 | loss 3.4\n", "mixed.log", "mixed.log:2", "one run");
    expect_fail("step,loss\n,1\n", "nostepval.csv", "nostepval.csv:2", "step");
}

static void test_file(void) {
    char path[] = "/tmp/tsc_test_log_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    const char *t = "step,val_loss\n5,2.5\n";
    CHECK(write(fd, t, strlen(t)) == (ssize_t)strlen(t));
    close(fd);
    char spec[128];
    snprintf(spec, sizeof spec, "bf16 run=%s", path);
    tsc_log_t *lg = NULL;
    CHECK(tsc_log_read_spec(spec, &lg) == TSC_OK);
    if (lg) {
        CHECK_STREQ(lg->name, "bf16 run");
        CHECK_STREQ(lg->path, path);
        CHECK_NEAR(lg->values[0], 2.5, 0);
        tsc_log_free(lg);
    }
    unlink(path);
    CHECK(tsc_log_read(path, NULL, &lg) == TSC_ERR_IO);
    CHECK(strstr(tsc_error_last(), path) != NULL);
    CHECK(tsc_log_read_spec("=x.csv", &lg) == TSC_ERR_ARG);
}


/* A sample file of tests/data/logs (TSC_SRC is the source tree, set by ctest). */
static tsc_log_t *sample(const char *file, const char *column) {
    const char *src = getenv("TSC_SRC");
    CHECKF(src != NULL, "TSC_SRC is not set");
    if (!src) return NULL;
    char spec[2048];
    snprintf(spec, sizeof spec, "run=%s/tests/data/logs/%s%s%s", src, file, column ? ":" : "", column ? column : "");
    tsc_log_t *lg = NULL;
    tsc_status_t st = tsc_log_read_spec(spec, &lg);
    CHECKF(st == TSC_OK, "%s: %s", file, tsc_error_last());
    return lg;
}

static double at(const tsc_log_t *lg, size_t r, const char *col) {
    int c = tsc_log_column(lg, col);
    CHECKF(c >= 0, "no column %s", col);
    return c < 0 ? NAN : lg->values[r * (size_t)lg->n_cols + (size_t)c];
}

/* llm.c's console: "step K/N | ..." is the 0-based step K-1; "val loss" lines belong to the step
 * that follows the last step line; banners, the parameter table, "Writing checkpoint" are skipped. */
static void test_llmc_console(void) {
    tsc_log_t *lg = sample("llmc_gpt2.log", NULL);
    if (!lg) return;
    CHECK_EQ_INT(lg->kind, TSC_LOG_LLMC);
    CHECK_EQ_INT(lg->n_rows, 8); /* 5 step lines + 3 val loss lines */
    /* row 0: "val loss 11.008752" before any step: step 0 */
    CHECK_NEAR(lg->step[0], 0, 0);
    CHECK_NEAR(at(lg, 0, "val_loss"), 11.008752, 1e-12);
    CHECK(isnan(at(lg, 0, "train_loss")));
    /* row 1: "step    1/19073 | loss 11.012345 (+nanz)| norm 15.2847 ..." */
    CHECK_NEAR(lg->step[1], 0, 0);
    CHECK_NEAR(at(lg, 1, "train_loss"), 11.012345, 1e-12);
    CHECK_NEAR(at(lg, 1, "grad_norm"), 15.2847, 1e-12);
    CHECK_NEAR(at(lg, 1, "lr"), 8.57e-07, 1e-18);
    CHECK_NEAR(at(lg, 1, "time_ms"), 1234.56, 1e-9);
    CHECK_NEAR(at(lg, 1, "mfu"), -100.0, 0);
    CHECK_NEAR(at(lg, 1, "tok_s"), 424825, 0);
    /* row 3: "val loss 10.850106" after "step 2/19073": step 2 */
    CHECK_NEAR(lg->step[3], 2, 0);
    CHECK_NEAR(at(lg, 3, "val_loss"), 10.850106, 1e-12);
    /* the last row: "step 1000/19073 | loss 3.912877" (the line that stopped the old reader) */
    CHECK_NEAR(lg->step[7], 999, 0);
    CHECK_NEAR(at(lg, 7, "train_loss"), 3.912877, 1e-12);
    CHECK_EQ_INT(tsc_log_loss_column(lg, 0), tsc_log_column(lg, "train_loss"));
    CHECK_EQ_INT(tsc_log_loss_column(lg, 1), tsc_log_column(lg, "val_loss"));
    tsc_log_free(lg);
    /* "step 1 | loss ..." without /N, and train_gpt2.c's "step N: train loss X (took Y ms)" */
    lg = parse("step 1 | loss 2.5 | norm 0.5\nstep 7: train loss 2.25 (took 41.5 ms)\n", "short.log");
    if (lg) {
        CHECK_EQ_INT(lg->n_rows, 2);
        CHECK_NEAR(lg->step[0], 0, 0);
        CHECK_NEAR(at(lg, 0, "train_loss"), 2.5, 0);
        CHECK_NEAR(lg->step[1], 7, 0);
        CHECK_NEAR(at(lg, 1, "train_loss"), 2.25, 0);
        CHECK_NEAR(at(lg, 1, "time_ms"), 41.5, 0);
        tsc_log_free(lg);
    }
}

static void test_llmc_main_log(void) {
    tsc_log_t *lg = sample("llmc_main.log", NULL);
    if (!lg) return;
    CHECK_EQ_INT(lg->kind, TSC_LOG_LLMC);
    CHECK_EQ_INT(lg->n_rows, 6);
    CHECK_NEAR(lg->step[1], 0, 0);
    CHECK_NEAR(at(lg, 1, "train_loss"), 11.0123, 1e-12);
    CHECK_NEAR(at(lg, 1, "lr"), 0.000001, 1e-15);
    CHECK_NEAR(at(lg, 1, "grad_norm"), 15.28, 1e-12);
    CHECK_NEAR(lg->step[3], 2, 0);
    CHECK_NEAR(at(lg, 3, "val_loss"), 10.8501, 1e-12);
    CHECK_NEAR(at(lg, 5, "hellaswag"), 0.2491, 1e-12);
    tsc_log_free(lg);
}

/* W&B's panel export: quoted fields, "<run> - metric" with __MIN/__MAX bands: the metric is the
 * only loss column, so it is picked without being named; empty fields are "not logged". */
static void test_wandb(void) {
    tsc_log_t *lg = sample("wandb_export.csv", NULL);
    if (!lg) return;
    CHECK_EQ_INT(lg->kind, TSC_LOG_WANDB);
    CHECK_EQ_INT(lg->n_rows, 5);
    CHECK_EQ_INT(lg->pick, tsc_log_column(lg, "gpt2-bf16 - train/loss"));
    CHECK_EQ_INT(tsc_log_loss_column(lg, 0), lg->pick);
    CHECK_NEAR(lg->step[1], 10, 0);
    CHECK_NEAR(at(lg, 1, "gpt2-bf16 - train/loss"), 9.1234, 1e-12);
    CHECK(isnan(at(lg, 3, "gpt2-bf16 - train/loss")));
    CHECK_NEAR(lg->step[4], 40, 0);
    CHECK_NEAR(at(lg, 4, "gpt2-bf16 - train/loss__MAX"), 7.2502, 1e-12);
    tsc_log_free(lg);
    /* two metrics: no default pick; the figures find "<run> - train/loss" by its name */
    lg = sample("wandb_two_metrics.csv", NULL);
    if (lg) {
        CHECK_EQ_INT(lg->pick, -1);
        CHECK_EQ_INT(tsc_log_loss_column(lg, 0), tsc_log_column(lg, "gpt2-bf16 - train/loss"));
        CHECK_EQ_INT(tsc_log_loss_column(lg, 1), -1);
        tsc_log_free(lg);
    }
    lg = sample("wandb_two_metrics.csv", "gpt2-bf16 - lr");
    if (lg) {
        CHECK_EQ_INT(lg->pick, tsc_log_column(lg, "gpt2-bf16 - lr"));
        CHECK_NEAR(lg->values[1 * (size_t)lg->n_cols + (size_t)lg->pick], 0.0002, 1e-15);
        tsc_log_free(lg);
    }
    /* a column the file lacks: the message lists the columns */
    const char *src = getenv("TSC_SRC");
    char spec[2048];
    snprintf(spec, sizeof spec, "%s/tests/data/logs/wandb_two_metrics.csv:loss", src ? src : ".");
    lg = NULL;
    CHECK(tsc_log_read_spec(spec, &lg) == TSC_ERR_ARG && lg == NULL);
    CHECKF(strstr(tsc_error_last(), "no column 'loss'") && strstr(tsc_error_last(), "'gpt2-bf16 - lr__MAX'"),
           "message: %s", tsc_error_last());
}

static void test_tensorboard(void) {
    tsc_log_t *lg = sample("tensorboard_export.csv", NULL);
    if (!lg) return;
    CHECK_EQ_INT(lg->kind, TSC_LOG_TENSORBOARD);
    CHECK_EQ_INT(lg->n_rows, 4);
    CHECK_EQ_INT(lg->pick, tsc_log_column(lg, "Value")); /* not "Wall time" */
    CHECK_NEAR(lg->step[2], 200, 0);
    CHECK_NEAR(at(lg, 2, "Value"), 4.40234375, 0);
    CHECK_NEAR(at(lg, 2, "Wall time"), 1701425086.1739330, 1e-6);
    /* coverage of analysed steps: 0..300 logged */
    long long steps[3] = {0, 250, 400};
    tsc_log_cover_t cv;
    tsc_log_cover(lg, lg->pick, steps, 3, &cv);
    CHECK_NEAR(cv.first, 0, 0);
    CHECK_NEAR(cv.last, 300, 0);
    CHECK_EQ_INT(cv.n_outside, 1);
    CHECK_EQ_INT(cv.first_outside, 400);
    tsc_log_free(lg);
}

static void test_malformed_file(void) {
    const char *src = getenv("TSC_SRC");
    char path[2048];
    snprintf(path, sizeof path, "%s/tests/data/logs/llmc_malformed.log", src ? src : ".");
    tsc_log_t *lg = NULL;
    CHECK(tsc_log_read(path, NULL, &lg) == TSC_ERR_FORMAT && lg == NULL);
    CHECKF(strstr(tsc_error_last(), "llmc_malformed.log:3: malformed llm.c log line") != NULL, "message: %s",
           tsc_error_last());
}

/* Figure 10's smoothing against the weights it is defined by (computed here directly, O(n^2)), a
 * step in the loss (halfway after one half-life), and the half-life rule. */
static void test_smooth(void) {
    enum { N = 2000 };
    static double x[N], y[N], out[N];
    for (int i = 0; i < N; i++) x[i] = i, y[i] = i < 1000 ? 10 : 1;
    x[5] = x[4]; /* a repeated step counts as the mean spacing */
    for (int i = 5; i < N; i++) x[i] = i - 1;
    double h = 50, mean_dx = (x[N - 1] - x[0]) / (N - 1);
    tsc_log_smooth(x, y, N, h, out);
    CHECK_NEAR(out[0], 10, 0); /* bias-corrected: no pull towards 0 */
    for (int i = 0; i < N; i += 97) {
        double num = 0, den = 0;
        for (int j = 0; j <= i; j++) {
            double d = j && x[j] > x[j - 1] ? x[j] - x[j - 1] : mean_dx;
            double w = (1 - pow(0.5, d / h)) * pow(0.5, (x[i] - x[j]) / h);
            num += w * y[j], den += w;
        }
        CHECK_NEAR(out[i], num / den, 1e-9);
    }
    /* the loss drops from 10 to 1 at index 1000 (step 999): one half-life later the average is
     * halfway (5.5), not thousands of steps behind */
    CHECK_NEAR(out[1000 + 49], 5.5, 1e-5);
    CHECK(out[1000 + 200] < 1.6);
    double xs[4] = {0, 100, 200, 300};
    CHECK_NEAR(tsc_log_half_life(xs, 4), 100, 0); /* at least the spacing */
    CHECK_NEAR(tsc_log_half_life(x, N), 20, 0);   /* 1% of 1998 steps, rounded up to 20 */
}

int main(void) {
    test_smooth();
    test_llmc_console();
    test_llmc_main_log();
    test_wandb();
    test_tensorboard();
    test_malformed_file();
    test_csv();
    test_tsv();
    test_nanogpt();
    test_malformed();
    test_file();
    tsc_log_free(NULL);
    return tsc_test_done();
}
