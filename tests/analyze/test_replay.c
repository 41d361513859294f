/* test_replay: the comparison of tsc_replay.h on arrays with planted NaN and Inf, against numbers
 * worked out by hand, and its JSON (NaN written as null, counts reported). The end-to-end replay
 * is tests/cli/test_replay.sh and test_replay_nonfinite.sh. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tsc_replay.h"
#include "tsc_test.h"

/* ref = {1, -2, 3, NaN, 5, 6}; x = {1.5, -2, NaN, 4, Inf, 5}:
 *   x non-finite at 2 (NaN) and 4 (Inf): n_nonfinite 2;
 *   ref non-finite at 3: not compared, not counted against x;
 *   compared i = 0, 1, 5: differences +0.5, 0, -1 -> max_abs 1, sum_abs 1.5, mean 0.5,
 *   signed sum -0.5, signed mean -1/6, ref_max_abs max(1, 2, 6) = 6, rel 1/6. */
static void test_planted(void) {
    const double ref[6] = {1, -2, 3, NAN, 5, 6};
    const double x[6] = {1.5, -2, NAN, 4, INFINITY, 5};
    tsc_replay_cmp_t c;
    tsc_replay_cmp_init(&c);
    tsc_replay_cmp_add(&c, ref, x, 3);      /* in two pieces: the sums carry over */
    tsc_replay_cmp_add(&c, ref + 3, x + 3, 3);
    tsc_replay_cmp_finish(&c);
    CHECK_EQ_INT(c.n, 6);
    CHECK_EQ_INT(c.n_nonfinite, 2);
    CHECK_EQ_INT(c.n_compared, 3);
    CHECK(c.max_abs == 1.0);
    CHECK(c.sum_abs == 1.5);
    CHECK(c.mean_abs == 0.5);
    CHECK(c.signed_sum == -0.5);
    CHECK_NEAR(c.signed_mean, -1.0 / 6.0, 1e-16);
    CHECK(c.ref_max_abs == 6.0);
    CHECK_NEAR(c.rel, 1.0 / 6.0, 1e-16);
}

/* Everything non-finite: nothing compared, the statistics are NaN (not a misleading 0). */
static void test_all_nonfinite(void) {
    const double ref[3] = {1, 2, 3}, x[3] = {NAN, -INFINITY, NAN};
    tsc_replay_cmp_t c;
    tsc_replay_cmp_init(&c);
    tsc_replay_cmp_add(&c, ref, x, 3);
    tsc_replay_cmp_finish(&c);
    CHECK_EQ_INT(c.n_nonfinite, 3);
    CHECK_EQ_INT(c.n_compared, 0);
    CHECK(isnan(c.max_abs) && isnan(c.mean_abs) && isnan(c.rel) && isnan(c.signed_mean));
    /* a reference of zeros: rel is 0, not 0/0 */
    const double z[2] = {0, 0};
    tsc_replay_cmp_init(&c);
    tsc_replay_cmp_add(&c, z, z, 2);
    tsc_replay_cmp_finish(&c);
    CHECK(c.rel == 0 && c.max_abs == 0 && c.mean_abs == 0);
}

/* A large random comparison against the sums computed here in a second, plain loop. */
static void test_random(void) {
    enum { N = 10000 };
    static double ref[N], x[N];
    uint64_t s = 7;
    for (int i = 0; i < N; i++) {
        ref[i] = tsc_test_nrand(&s);
        x[i] = ref[i] + 1e-3 * tsc_test_nrand(&s);
        if (i % 97 == 0) x[i] = NAN;
        if (i % 101 == 0) ref[i] = INFINITY;
    }
    long nf = 0, nc = 0;
    double mx = 0, sum = 0, sgn = 0, rmax = 0;
    for (int i = 0; i < N; i++) {
        if (i % 97 == 0) { nf++; continue; }
        if (i % 101 == 0) continue;
        double dlt = x[i] - ref[i];
        nc++;
        mx = fmax(mx, fabs(dlt));
        rmax = fmax(rmax, fabs(ref[i]));
        sum += fabs(dlt);
        sgn += dlt;
    }
    tsc_replay_cmp_t c;
    tsc_replay_cmp_init(&c);
    tsc_replay_cmp_add(&c, ref, x, N);
    tsc_replay_cmp_finish(&c);
    CHECK_EQ_INT(c.n_nonfinite, nf);
    CHECK_EQ_INT(c.n_compared, nc);
    CHECK(c.max_abs == mx);
    CHECK_NEAR(c.mean_abs, sum / nc, 1e-15);
    CHECK_NEAR(c.signed_mean, sgn / nc, 1e-15);
    CHECK_NEAR(c.rel, mx / rmax, 1e-15);
}

/* The JSON of a result with a non-finite statistic: valid (null), counts present. */
static void test_json(void) {
    tsc_replay_policy_t pol[2];
    memset(pol, 0, sizeof pol);
    snprintf(pol[0].name, sizeof pol[0].name, "fp32");
    snprintf(pol[1].name, sizeof pol[1].name, "fp8-fa3");
    const double ref[2] = {1, 2}, x[2] = {NAN, NAN};
    for (int p = 0; p < 2; p++) {
        tsc_replay_cmp_init(&pol[p].o);
        tsc_replay_cmp_add(&pol[p].o, ref, p ? x : ref, 2);
        tsc_replay_cmp_finish(&pol[p].o);
    }
    int heads[1] = {1}, batches[1] = {0};
    tsc_replay_t r;
    memset(&r, 0, sizeof r);
    r.dump_path = "d\"q.h5";
    r.out_path = "r.h5";
    r.n_pairs = 1;
    r.n_heads = r.n_batches = 1;
    r.heads = heads;
    r.batches = batches;
    r.n_policies = 2;
    r.policies = pol;
    r.done = 1;
    r.n_nonfinite = 2;
    tsc_json_t j;
    tsc_json_init(&j);
    tsc_json_set_indent(&j, 0);
    tsc_replay_json(&r, &j);
    CHECK(tsc_json_status(&j) == TSC_OK);
    const char *t = tsc_json_text(&j, NULL);
    CHECK(strstr(t, "\"dump\":\"d\\\"q.h5\"") != NULL);
    CHECK(strstr(t, "nan") == NULL && strstr(t, "inf") == NULL);
    CHECK(strstr(t, "\"policy\":\"fp8-fa3\",\"reference\":false,\"o\":{\"max_abs\":null,\"mean_abs\":null,"
                    "\"rel\":null,\"n\":2,\"n_compared\":0,\"n_nonfinite\":2}") != NULL);
    CHECK(strstr(t, "\"n_nonfinite\":2,\"nonfinite_numbers\":{\"count\":3") != NULL);
    if (tsc_t_fail) printf("%s\n", t);
    tsc_json_free(&j);
}

int main(void) {
    test_planted();
    test_all_nonfinite();
    test_random();
    test_json();
    return tsc_test_done();
}
