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
    expect_fail("hello\nworld\n", "prose.log", "prose.log", "no 'step N");
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

int main(void) {
    test_csv();
    test_tsv();
    test_nanogpt();
    test_malformed();
    test_file();
    tsc_log_free(NULL);
    return tsc_test_done();
}
