/* test_explain: tsc_explain_add on the worked example (an FP32 sum rounded to BF16 whose
 * discarded bits are more than half an ULP), its exact-tie counterfactual, an operand that
 * does not fit the accumulator format, and the JSON keys of a sum without an output format. */
#include <math.h>
#include <string.h>

#include "tsc_explain.h"
#include "tsc_test.h"

int main(void) {
    tsc_explain_add_t e;
    /* -2.4071154594421387 + -2.296875 = -4.703990459442139 exactly in FP32 (the significands
     * overflow: exponent 1 -> 2); to BF16: rounding bit 1 with sticky bits: up in magnitude to
     * -4.71875 (0xc097), error -4.71875 - (-4.703990459442139). */
    CHECK(tsc_explain_add(-2.4071154594421387, -2.296875, TSC_FMT_FP32, 1, TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, 0,
                          &e) == TSC_OK);
    CHECK(e.add.exact_hi == -2.4071154594421387 + -2.296875);
    CHECK_EQ_INT(e.add.align_shift, 0);
    CHECK_EQ_INT(e.add.carry_shift, 1);
    CHECK(e.round_to.result == -4.71875);
    CHECK_EQ_U32(e.round_to.result_bits, 0xc097);
    CHECK(e.round_to.dir == TSC_ACCUM_AWAY && e.round_to.round_bit == 1 && e.round_to.sticky);
    CHECK(e.round_to.error == -4.71875 - (double)(float)(-2.4071154594421387 + -2.296875));
    CHECK_STREQ(tsc_explain_why(&e.round_to),
                "rounding bit 1, sticky bits non-zero: more than half an ULP, rounded up in magnitude");
    /* the exact tie -4.703125 rounds to even: down in magnitude to -4.6875, +half an ULP */
    CHECK(tsc_explain_add(-2.40625, -2.296875, TSC_FMT_FP32, 1, TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, 0, &e) == TSC_OK);
    CHECK(e.round_to.result == -4.6875 && e.round_to.error == 0.015625 && e.round_to.error_ulps == 0.5);
    CHECK_STREQ(tsc_explain_dir_key(e.round_to.dir), "toward");
    /* an operand that does not fit the accumulator format */
    CHECK(tsc_explain_add(1e10, 1, TSC_FMT_FP16, 0, TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, 0, &e) == TSC_ERR_NONFINITE);
    /* JSON: the documented keys, no NaN literal */
    CHECK(tsc_explain_add(1, 0.001, TSC_FMT_FP32, 0, TSC_FMT_BF16, TSC_ROUND_STOCHASTIC, 5, &e) == TSC_OK);
    tsc_json_t j;
    tsc_json_init(&j);
    tsc_json_set_indent(&j, 0);
    tsc_explain_add_json(&e, &j);
    CHECK(tsc_json_status(&j) == TSC_OK);
    const char *t = tsc_json_text(&j, NULL);
    CHECK(strstr(t, "\"command\":\"explain add\",\"acc\":\"fp32\",\"to\":null,\"round\":\"stochastic\",\"seed\":5") != NULL);
    CHECK(strstr(t, "\"round_to\"") == NULL && strstr(t, "\"add\":{\"format\":\"fp32\"") != NULL);
    CHECK(strstr(t, "nan") == NULL);
    tsc_json_free(&j);
    return tsc_test_done();
}
