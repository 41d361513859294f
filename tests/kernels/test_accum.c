/* The accumulation model: the worked example of docs/MECHANISM.md §5 bit for bit (expectations derived
 * from the paper's bit strings, not from this code), the no-residual counterfactual, FP32
 * additions against the FPU's own float addition (nearest-even and toward zero), large
 * alignment shifts, cancellation, signed zeros, overflow, order dependence, stochastic mode. */
#include "tsc_accum.h"
#include "tsc_test.h"

#include <fenv.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Value of a bit string "s eee...e mmm...m" (spaces and '|' ignored) of a binary format with
 * `ebits` exponent bits and bias 2^(ebits-1) - 1; normal numbers only (enough for the paper). */
static double from_bits(const char *str, int ebits) {
    char digits[128];
    int n = 0;
    for (const char *c = str; *c; c++)
        if (*c == '0' || *c == '1') digits[n++] = *c;
    int sign = digits[0] == '1', e = 0;
    for (int i = 1; i <= ebits; i++) e = 2 * e + (digits[i] - '0');
    double m = 1.0, w = 0.5;
    for (int i = ebits + 1; i < n; i++, w /= 2) m += (digits[i] - '0') * w;
    double v = ldexp(m, e - ((1 << (ebits - 1)) - 1));
    return sign ? -v : v;
}

static void test_paper_example(void) {
    char buf[128];
    /* docs/MECHANISM.md §5: BF16 -2.40625 = 1 10000000 0011010, BF16 -2.296875 = 1 10000000 0010011. */
    const double run_bf16 = from_bits("1 10000000 0011010", 8);
    const double addend = from_bits("1 10000000 0010011", 8);
    CHECK(run_bf16 == -2.40625);
    CHECK(addend == -2.296875);
    /* The FP32 running sum holds the BF16 value plus a residual of about 0.00087. */
    const double run = -2.4071154594421387;
    CHECK((double)(float)run == run);
    CHECK(tsc_round(run, TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL) == run_bf16);
    CHECK(run - run_bf16 < -0.00086 && run - run_bf16 > -0.00088);
    /* The exact sum, from the paper's bits: 1 10000001 0010110|1|000011100010111. */
    const char *paper_sum_bits = "1 10000001 0010110|1|000011100010111";
    const double exact = from_bits(paper_sum_bits, 8);
    CHECK(exact == -4.703990459442139);
    CHECK(exact == run + addend); /* exact in double: both in [2, 4) with 24-bit significands */

    tsc_accum_step_t add;
    double s = tsc_accum_add2(run, addend, TSC_FMT_FP32, TSC_ROUND_NEAREST_EVEN, NULL, &add);
    CHECK(s == exact);
    CHECK(add.exact_hi == exact && add.exact_lo == 0);
    CHECK_EQ_INT(add.a_exp, 1);
    CHECK_EQ_INT(add.b_exp, 1);
    CHECK_EQ_INT(add.align_shift, 0);      /* same exponent: no alignment */
    CHECK_EQ_INT(add.carry_shift, 1);      /* two numbers in [2, 4): the significand overflows */
    CHECK_EQ_INT(add.sum_exp, 2);
    CHECK_EQ_INT(add.round_bit, 0);        /* the bit shifted out by the carry is 0: exact in FP32 */
    CHECK_EQ_INT(add.sticky, 0);
    CHECK(add.dir == TSC_ACCUM_EXACT && add.error == 0);
    CHECK_EQ_U32(add.a_bits, 0xc01a0e2eu); /* 1 10000000 00110100000111000101110 */
    CHECK_EQ_U32(add.b_bits, 0xc0130000u); /* 1 10000000 0010011 then zeros */
    CHECK_STREQ(tsc_accum_bits_str(s, TSC_FMT_FP32, 7, buf, sizeof buf), paper_sum_bits);
    CHECK_STREQ(tsc_accum_bits_str(run_bf16, TSC_FMT_BF16, -1, buf, sizeof buf), "1 10000000 0011010");
    CHECK_STREQ(tsc_accum_bits_str(addend, TSC_FMT_BF16, -1, buf, sizeof buf), "1 10000000 0010011");

    /* Rounding the FP32 sum to BF16: kept 1.0010110, rounding bit 1, sticky non-zero: up in
     * magnitude to 1 10000001 0010111. */
    tsc_accum_step_t rd;
    double r = tsc_accum_round(s, TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL, &rd);
    const double want = from_bits("1 10000001 0010111", 8);
    CHECK(want == -4.71875);
    CHECK(r == want);
    CHECK_EQ_U32(rd.kept, 0x96);           /* 1 0010110 */
    CHECK_EQ_INT(rd.kept_nbits, 8);
    CHECK_EQ_INT(rd.round_bit, 1);
    CHECK_EQ_INT(rd.sticky, 1);
    CHECK_EQ_INT(rd.sticky_nbits, 15);
    CHECK_EQ_U32(rd.sticky_bits, 0x0717);  /* 000011100010111 */
    CHECK(rd.dir == TSC_ACCUM_AWAY);
    CHECK(rd.error == want - exact);
    CHECK(rd.error == -0.014759540557861328);
    CHECK_EQ_INT(rd.ulp_exp, -5);          /* BF16 ULP in [4, 8) is 2^-5 */
    CHECK_EQ_U32(rd.result_bits, 0xc097);
    CHECK_STREQ(tsc_accum_step_bits_str(&rd, buf, sizeof buf), "10010110|1|000011100010111");
    CHECK_STREQ(tsc_accum_bits_str(r, TSC_FMT_BF16, -1, buf, sizeof buf), "1 10000001 0010111");

    /* Counterfactual without the residual: an exact tie, resolved to even, down in magnitude. */
    double s0 = tsc_accum_add2(run_bf16, addend, TSC_FMT_FP32, TSC_ROUND_NEAREST_EVEN, NULL, &add);
    CHECK(s0 == -4.703125);
    CHECK(add.dir == TSC_ACCUM_EXACT && add.carry_shift == 1);
    double r0 = tsc_accum_round(s0, TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL, &rd);
    CHECK(r0 == -4.6875);
    CHECK_EQ_INT(rd.round_bit, 1);
    CHECK_EQ_INT(rd.sticky, 0);
    CHECK(rd.dir == TSC_ACCUM_TOWARD);
    CHECK(rd.error == 0.015625);
    CHECK(rd.error_ulps == 0.5);
    CHECK_STREQ(tsc_accum_step_bits_str(&rd, buf, sizeof buf), "10010110|1|");
    /* The same two numbers added directly in a BF16 accumulator. */
    CHECK(tsc_accum_add2(run_bf16, addend, TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL, NULL) == -4.6875);
}

/* FP32 additions against the FPU's float addition, in nearest-even and toward-zero modes. */
static float fpu_add(float a, float b, int rtz) {
    volatile float va = a, vb = b, r;
    if (rtz) fesetround(FE_TOWARDZERO);
    r = va + vb;
    if (rtz) fesetround(FE_TONEAREST);
    return r;
}

static void test_against_fpu(void) {
    tsc_rng_t rng;
    tsc_rng_seed(&rng, 31337);
    long bad[2] = {0, 0}, inexact = 0, carries = 0, cancels = 0;
    for (int i = 0; i < 300000; i++) {
        uint64_t r = tsc_rng_next(&rng);
        float a = ldexpf(1.0f + (float)(r & 0x7fffff) * 0x1p-23f, (int)((r >> 23) % 9) - 4);
        float b = ldexpf(1.0f + (float)((r >> 32) & 0x7fffff) * 0x1p-23f, (int)((r >> 55) % 40) - 20);
        if (r & (1ULL << 63)) b = -b;
        if (i % 7 == 0) b = -a * (1 + 0x1p-20f); /* heavy cancellation */
        for (int m = 0; m < 2; m++) {
            tsc_accum_step_t st;
            double got = tsc_accum_add2(a, b, TSC_FMT_FP32, (tsc_round_t)m, NULL, &st);
            float want = fpu_add(a, b, m);
            if (got != (double)want && bad[m]++ < 3) fprintf(stderr, "%a + %a mode %d: %a vs %a\n", a, b, m, got, want);
            bad[m] += st.error != got - ((double)a + (double)b); /* exact in double here */
            bad[m] += (st.dir == TSC_ACCUM_EXACT) != (st.error == 0);
            if (m == 0) {
                inexact += st.dir != TSC_ACCUM_EXACT;
                carries += st.carry_shift == 1;
                cancels += st.carry_shift < 0;
            }
        }
    }
    CHECK_EQ_INT(bad[0], 0);
    CHECK_EQ_INT(bad[1], 0);
    CHECK(inexact > 1000 && carries > 1000 && cancels > 1000); /* the sample covers each case */
}

/* Every format and mode: the traced addition equals tsc_round of the exact sum (operands are
 * FP16 values within 2^20 of each other, so a + b is exact in double), and the trace is
 * self-consistent where no overflow rule applies: result = (kept + up) ULPs, error = result - exact. */
static void test_all_formats(void) {
    tsc_rng_t rng, r1, r2;
    tsc_rng_seed(&rng, 555);
    long bad = 0, bad_trace = 0;
    for (int f = 0; f < TSC_FMT_COUNT; f++)
        for (int m = 0; m < 3; m++) {
            tsc_rng_seed(&r1, 77 + (uint64_t)f);
            tsc_rng_seed(&r2, 77 + (uint64_t)f);
            for (int i = 0; i < 5000; i++) {
                uint64_t r = tsc_rng_next(&rng);
                double a = tsc_round(ldexp((double)(r & 0xffff) - 32768, -(int)((r >> 16) % 12)), TSC_FMT_FP16,
                                     TSC_ROUND_NEAREST_EVEN, NULL);
                double b = tsc_round(ldexp((double)((r >> 24) & 0xffff) - 32768, -(int)((r >> 40) % 12)), TSC_FMT_FP16,
                                     TSC_ROUND_NEAREST_EVEN, NULL);
                tsc_accum_step_t st;
                double got = tsc_accum_add2(a, b, (tsc_format_t)f, (tsc_round_t)m, &r1, &st);
                double want = tsc_round(a + b, (tsc_format_t)f, (tsc_round_t)m, &r2);
                bad += !(got == want || (isnan(got) && isnan(want)));
                double mx = tsc_round(1e300, (tsc_format_t)f, TSC_ROUND_TOWARD_ZERO, NULL); /* largest finite */
                if (isfinite(got) && got != 0 && st.dir != TSC_ACCUM_EXACT && fabs(a + b) < mx) {
                    double trunc = ldexp((double)st.kept, st.ulp_exp);
                    double mag = fabs(got);
                    bad_trace += !(mag == trunc || mag == trunc + ldexp(1.0, st.ulp_exp));
                    bad_trace += (mag > trunc) != (st.dir == TSC_ACCUM_AWAY);
                    bad_trace += st.error != got - (a + b);
                }
            }
        }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(bad_trace, 0);
}

static void test_edges(void) {
    tsc_accum_step_t st;
    /* Far apart: the small operand only sets the sticky bit. */
    double r = tsc_accum_add2(1.0, -0x1p-80, TSC_FMT_FP32, TSC_ROUND_NEAREST_EVEN, NULL, &st);
    CHECK(r == 1.0);
    CHECK_EQ_INT(st.align_shift, 80);
    CHECK_EQ_INT(st.carry_shift, -1);       /* 1 - tiny < 1: the leading bit moved down */
    CHECK(st.round_bit == 1 && st.sticky == 1 && st.dir == TSC_ACCUM_AWAY);
    CHECK_EQ_U32(st.kept, 0xffffff);        /* 24 ones */
    CHECK(st.exact_hi + st.exact_lo == 1.0 - 0x1p-80 || st.exact_lo == -0x1p-80);
    CHECK(st.error == 0x1p-80);
    r = tsc_accum_add2(1.0, -0x1p-80, TSC_FMT_FP32, TSC_ROUND_TOWARD_ZERO, NULL, &st);
    CHECK(r == 1.0 - 0x1p-24);
    CHECK(st.dir == TSC_ACCUM_TOWARD);
    /* FP64 accumulator: ties and sticky bits beyond the double sum. */
    CHECK(tsc_accum_add2(1.0, 0x1p-53, TSC_FMT_FP64, TSC_ROUND_NEAREST_EVEN, NULL, &st) == 1.0);
    CHECK(st.round_bit == 1 && st.sticky == 0);
    CHECK(tsc_accum_add2(1.0 + 0x1p-52, 0x1p-53, TSC_FMT_FP64, TSC_ROUND_NEAREST_EVEN, NULL, &st) == 1.0 + 0x1p-51);
    CHECK(tsc_accum_add2(1.0, 0x1p-53 + 0x1p-105, TSC_FMT_FP64, TSC_ROUND_NEAREST_EVEN, NULL, &st) == 1.0 + 0x1p-52);
    CHECK(st.sticky == 1);
    CHECK(tsc_accum_add2(1.0, -0x1p-200, TSC_FMT_FP64, TSC_ROUND_TOWARD_ZERO, NULL, &st) == 1.0 - 0x1p-53);
    /* Signed zeros. */
    r = tsc_accum_add2(-0.0, -0.0, TSC_FMT_FP32, TSC_ROUND_NEAREST_EVEN, NULL, &st);
    CHECK(r == 0 && signbit(r));
    r = tsc_accum_add2(1.5, -1.5, TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL, &st);
    CHECK(r == 0 && !signbit(r) && st.dir == TSC_ACCUM_EXACT);
    /* Overflow: FP16 65504 + 16 = 65520 is the tie above the largest finite value -> Inf. */
    r = tsc_accum_add2(65504.0, 16.0, TSC_FMT_FP16, TSC_ROUND_NEAREST_EVEN, NULL, &st);
    CHECK(isinf(r) && st.dir == TSC_ACCUM_AWAY);
    CHECK(tsc_accum_add2(65504.0, 16.0, TSC_FMT_FP16, TSC_ROUND_TOWARD_ZERO, NULL, NULL) == 65504.0);
    CHECK(isnan(tsc_accum_add2(448.0, 32.0, TSC_FMT_FP8_E4M3, TSC_ROUND_NEAREST_EVEN, NULL, NULL)));
    /* Non-finite operands pass through. */
    CHECK(isinf(tsc_accum_add2(INFINITY, 1.0, TSC_FMT_FP32, TSC_ROUND_NEAREST_EVEN, NULL, &st)));
    CHECK(isnan(tsc_accum_add2(INFINITY, -INFINITY, TSC_FMT_FP32, TSC_ROUND_NEAREST_EVEN, NULL, &st)));
    /* Subnormal BF16 result: fewer kept bits. */
    r = tsc_accum_round(0x1.8p-130, TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL, &st);
    CHECK(r == 0x1.8p-130 && st.kept_nbits == 4 && st.dir == TSC_ACCUM_EXACT);
    /* Many sticky bits are elided in the string. */
    char buf[256];
    tsc_accum_add2(1.0, 0x1.0000000000001p-100, TSC_FMT_FP32, TSC_ROUND_NEAREST_EVEN, NULL, &st);
    CHECK(st.sticky_nbits > 64 && strstr(tsc_accum_step_bits_str(&st, buf, sizeof buf), "...") != NULL);
    CHECK_STREQ(tsc_accum_dir_str(TSC_ACCUM_AWAY), "up (away from zero)");
    CHECK_STREQ(tsc_accum_bits_str(448.0, TSC_FMT_FP8_E4M3, -1, buf, sizeof buf), "0 1111 110");
    CHECK_STREQ(tsc_accum_bits_str(1.0 + 0x1p-10, TSC_FMT_TF32, 3, buf, sizeof buf), "0 01111111 000|0|000001");
    CHECK_STREQ(tsc_accum_bits_str(1.0, TSC_FMT_FP32, 7, buf, 8), "0 01111"); /* truncated, terminated */
}

/* Order matters: two half-ULP additions to 1 vanish one by one (ties to even), but add up first. */
static void test_running_sum(void) {
    double fwd[3] = {1.0, 0x1p-24, 0x1p-24}, rev[3] = {0x1p-24, 0x1p-24, 1.0};
    tsc_accum_step_t tr[3];
    CHECK(tsc_accum_sum(fwd, 3, TSC_FMT_FP32, TSC_ROUND_NEAREST_EVEN, NULL, tr) == 1.0);
    CHECK(tr[0].dir == TSC_ACCUM_EXACT && tr[1].round_bit == 1 && tr[1].sticky == 0 && tr[1].dir == TSC_ACCUM_TOWARD);
    CHECK(tr[2].a == 1.0 && tr[2].error == -0x1p-24);
    CHECK(tsc_accum_sum(rev, 3, TSC_FMT_FP32, TSC_ROUND_NEAREST_EVEN, NULL, tr) == 1.0 + 0x1p-23);
    CHECK(tsc_accum_sum(fwd, 3, TSC_FMT_FP32, TSC_ROUND_NEAREST_EVEN, NULL, NULL) == 1.0);
    /* Traced and untraced paths agree on a long random sum, in every format. */
    enum { N = 3000 };
    static double x[N];
    static tsc_accum_step_t trace[N];
    tsc_rng_t rng;
    tsc_rng_seed(&rng, 8);
    for (int i = 0; i < N; i++) x[i] = ((double)(tsc_rng_next(&rng) >> 11) * 0x1p-53 - 0.3) * 3;
    for (int f = 0; f < TSC_FMT_COUNT; f++) {
        double a = tsc_accum_sum(x, N, (tsc_format_t)f, TSC_ROUND_NEAREST_EVEN, NULL, NULL);
        double b = tsc_accum_sum(x, N, (tsc_format_t)f, TSC_ROUND_NEAREST_EVEN, NULL, trace);
        CHECKF(a == b || (isnan(a) && isnan(b)), "%s: %.17g vs %.17g", tsc_format_name((tsc_format_t)f), a, b);
    }
    /* The accumulator object: limited trace capacity, addends rounded into the format first. */
    tsc_accum_t acc;
    CHECK(tsc_accum_init(&acc, TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL) == TSC_OK);
    tsc_accum_set_trace(&acc, trace, 2);
    tsc_accum_add(&acc, 1.0);
    tsc_accum_add(&acc, 1.0 + 0x1p-12); /* rounds to 1 first */
    tsc_accum_add(&acc, 0.5);
    CHECK(acc.sum == 2.5 && acc.n == 3 && acc.trace_len == 2);
    CHECK(trace[1].b == 1.0);
    CHECK(tsc_accum_init(&acc, TSC_FMT_COUNT, TSC_ROUND_NEAREST_EVEN, NULL) == TSC_ERR_ARG);
    CHECK(tsc_accum_init(NULL, TSC_FMT_FP32, TSC_ROUND_NEAREST_EVEN, NULL) == TSC_ERR_ARG);
    /* Stochastic accumulation: reproducible for a seed, and unbiased: adding 1/4 ULP (2^-9) to 1
     * in BF16 N times moves the sum by N/4 ULPs on average; here a single addition is repeated
     * from 1 each time, so the mean of N results is 1 + 2^-9 within 5 sigma = 5*2^-7*sqrt(3/16/N). */
    tsc_rng_t r1, r2;
    tsc_rng_seed(&r1, 4);
    tsc_rng_seed(&r2, 4);
    double sum = 0;
    long differ = 0;
    const int M = 100000;
    for (int i = 0; i < M; i++) {
        double v = tsc_accum_add2(1.0, 0x1p-9, TSC_FMT_BF16, TSC_ROUND_STOCHASTIC, &r1, NULL);
        differ += v != tsc_accum_add2(1.0, 0x1p-9, TSC_FMT_BF16, TSC_ROUND_STOCHASTIC, &r2, NULL);
        sum += v;
    }
    CHECK_EQ_INT(differ, 0);
    CHECK(fabs(sum / M - (1.0 + 0x1p-9)) <= 5 * 0x1p-7 * sqrt(3.0 / 16 / M));
    /* Stochastic rounding of a sum equals tsc_round's rule for the same draw. */
    tsc_rng_seed(&r1, 9);
    tsc_rng_seed(&r2, 9);
    long mism = 0;
    for (int i = 0; i < 20000; i++) {
        double a = (float)x[i % N], b = (float)x[(i * 7 + 1) % N];
        mism += tsc_accum_add2(a, b, TSC_FMT_FP16, TSC_ROUND_STOCHASTIC, &r1, NULL) !=
                tsc_round(a + b, TSC_FMT_FP16, TSC_ROUND_STOCHASTIC, &r2); /* FP32 values of similar size: a + b exact in double */
    }
    CHECK_EQ_INT(mism, 0);
}

int main(void) {
    test_paper_example();
    test_against_fpu();
    test_all_formats();
    test_edges();
    test_running_sum();
    return tsc_test_done();
}
