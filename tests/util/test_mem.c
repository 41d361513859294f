/* Unit tests of util/tsc_mem.h: the size parser, the budget from TSC_MAX_MEMORY and the check's
 * wording. */
#include <stdlib.h>

#include "tsc_mem.h"
#include "tsc_test.h"

int main(void) {
    uint64_t v = 0;
    CHECK(tsc_mem_parse("123", &v) == TSC_OK && v == 123);
    CHECK(tsc_mem_parse("64K", &v) == TSC_OK && v == 65536);
    CHECK(tsc_mem_parse("512m", &v) == TSC_OK && v == 512ULL << 20);
    CHECK(tsc_mem_parse("8G", &v) == TSC_OK && v == 8ULL << 30);
    CHECK(tsc_mem_parse("2MB", &v) == TSC_OK && v == 2ULL << 20);
    CHECK(tsc_mem_parse("1T", &v) == TSC_OK && v == 1ULL << 40);
    CHECK(tsc_mem_parse("", &v) == TSC_ERR_ARG);
    CHECK(tsc_mem_parse("-1", &v) == TSC_ERR_ARG);
    CHECK(tsc_mem_parse("12X", &v) == TSC_ERR_ARG);
    CHECK(tsc_mem_parse("99999999999999999999", &v) == TSC_ERR_ARG);
    CHECK(tsc_mem_parse("17179869184G", &v) == TSC_ERR_ARG);

    unsetenv("TSC_MAX_MEMORY");
    uint64_t def = tsc_mem_budget();
    CHECK(def >= (64ULL << 20));  /* half the physical memory of any machine that runs the tests */
    setenv("TSC_MAX_MEMORY", "1M", 1);
    CHECK_EQ_INT(tsc_mem_budget(), 1 << 20);
    CHECK(tsc_mem_check(1 << 20, "x") == TSC_OK);
    CHECK(tsc_mem_check((1 << 20) + 1, "the score matrix") == TSC_ERR_UNSUPPORTED);
    CHECK_STREQ(tsc_error_last(), "the score matrix needs 1048577 bytes (0.0 GiB), above the memory budget of "
                                  "1048576 bytes (0.0 GiB); raise it with --max-memory or TSC_MAX_MEMORY=<bytes> if the input is trusted");
    setenv("TSC_MAX_MEMORY", "lots", 1);  /* ignored: the default applies */
    CHECK_EQ_INT(tsc_mem_budget(), def);
    unsetenv("TSC_MAX_MEMORY");
    return tsc_test_done();
}
