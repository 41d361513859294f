/* Status codes and the error-detail buffer. */
#include "tsc_status.h"
#include "tsc_test.h"

int main(void) {
    CHECK_STREQ(tsc_status_str(TSC_OK), "ok");
    CHECK_STREQ(tsc_status_str(TSC_ERR_IO), "I/O error");
    tsc_error_clear();
    CHECK_STREQ(tsc_error_last(), "");
    CHECK_EQ_INT(tsc_error_set(TSC_ERR_SHAPE, "%s: q has %d heads", "run.h5", 12), TSC_ERR_SHAPE);
    CHECK_STREQ(tsc_error_last(), "run.h5: q has 12 heads");
    CHECK_EQ_INT(tsc_error_wrap(TSC_ERR_SHAPE, "step %d: ", 3), TSC_ERR_SHAPE);
    CHECK_STREQ(tsc_error_last(), "step 3: run.h5: q has 12 heads");
    return tsc_test_done();
}
