/* test_select.c: the selection spec grammar, membership and canonical form. */
#include <stdlib.h>

#include "tsc_select.h"
#include "tsc_test.h"

int main(void) {
    tsc_select_t s;
    char buf[512];
    CHECK(tsc_select_parse(&s, "steps=6000:7000:10,layers=1,heads=all") == TSC_OK);
    CHECK(tsc_select_has(&s, 6000, 1, 5));
    CHECK(tsc_select_has(&s, 6990, 1, 11));
    CHECK(!tsc_select_has(&s, 7000, 1, 0));   /* stop is exclusive */
    CHECK(!tsc_select_has(&s, 6005, 1, 0));   /* off stride */
    CHECK(!tsc_select_has(&s, 5990, 1, 0));
    CHECK(!tsc_select_has(&s, 6010, 0, 0));   /* layer 0 not kept */
    CHECK(tsc_select_has(&s, 6010, 1, -1));   /* head < 0: not tested */
    CHECK_EQ_INT(tsc_select_set_count(&s.steps, 10000), 100);
    CHECK_STREQ(tsc_select_format(&s, buf, sizeof buf), "steps=6000:7000:10,layers=1,heads=all,batches=all");

    /* lists continue the previous key; open ranges; singular keys */
    CHECK(tsc_select_parse(&s, "layers=0,3,heads=1:12:2,7,step=5:") == TSC_OK);
    CHECK(tsc_select_set_has(&s.layers, 0) && tsc_select_set_has(&s.layers, 3) && !tsc_select_set_has(&s.layers, 1));
    CHECK(tsc_select_set_has(&s.heads, 1) && tsc_select_set_has(&s.heads, 11) && tsc_select_set_has(&s.heads, 7));
    CHECK(!tsc_select_set_has(&s.heads, 2) && !tsc_select_set_has(&s.heads, 12));
    CHECK(tsc_select_set_has(&s.steps, 5) && tsc_select_set_has(&s.steps, 123456789) && !tsc_select_set_has(&s.steps, 4));
    CHECK_STREQ(tsc_select_format(&s, buf, sizeof buf), "steps=5:,layers=0,3,heads=1:12:2,7,batches=all");
    /* the canonical form parses back to the same selection */
    tsc_select_t s2;
    CHECK(tsc_select_parse(&s2, buf) == TSC_OK);
    char buf2[512];
    CHECK_STREQ(tsc_select_format(&s2, buf2, sizeof buf2), buf);

    /* flag forms */
    tsc_select_set_t set;
    CHECK(tsc_select_set_parse(&set, "all") == TSC_OK && set.all);
    CHECK(tsc_select_set_parse(&set, ":4") == TSC_OK);
    CHECK(tsc_select_set_has(&set, 0) && tsc_select_set_has(&set, 3) && !tsc_select_set_has(&set, 4));
    CHECK(tsc_select_set_parse(&set, "2::3") == TSC_OK);
    CHECK(tsc_select_set_has(&set, 2) && tsc_select_set_has(&set, 8) && !tsc_select_set_has(&set, 9));
    CHECK(!tsc_select_set_has(&set, -1));
    CHECK_STREQ(tsc_select_set_format(&set, buf, sizeof buf), "2::3");

    /* errors leave the selection at "all" and name the problem */
    const char *bad[] = {"steps=5:3", "steps=1:9:0", "layer=x", "bogus=1", "1,2", "steps=-1", "steps=1:2:3:4",
                         "steps=", "layers=1,layers=2", "steps=99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECKF(tsc_select_parse(&s, bad[i]) == TSC_ERR_ARG, "'%s' accepted", bad[i]);
        CHECK(s.steps.all && s.layers.all && s.heads.all);
        CHECKF(tsc_error_last()[0] != '\0', "no message for '%s'", bad[i]);
    }
    CHECK(tsc_select_set_parse(&set, "") == TSC_ERR_ARG);
    CHECK(tsc_select_set_parse(&set, "1,,2") == TSC_ERR_ARG);
    CHECK(tsc_select_parse(&s, NULL) == TSC_OK && s.steps.all);

    /* the runs of an error message that lists what a dump has */
    long long v[100];
    for (int i = 0; i < 12; i++) v[i] = i;
    CHECK_STREQ(tsc_select_runs_text(v, 12, buf, sizeof buf), "0-11");
    for (int i = 0; i < 100; i++) v[i] = 1000LL * i;
    CHECK_STREQ(tsc_select_runs_text(v, 100, buf, sizeof buf), "0-99000 every 1000");
    const long long mixed[] = {0, 1, 2, 5, 9, 10, 11, 20, 30, 40, 50, 7000};
    CHECK_STREQ(tsc_select_runs_text(mixed, 12, buf, sizeof buf), "0-2, 5, 9-11, 20-50 every 10, 7000");
    const long long few[] = {3, 7, 11};
    CHECK_STREQ(tsc_select_runs_text(few, 3, buf, sizeof buf), "3, 7, 11"); /* 3 values: no 'every' */
    CHECK_STREQ(tsc_select_runs_text(few, 0, buf, sizeof buf), "");
    for (int i = 0; i < 100; i++) v[i] = i * i; /* no runs: cut, with the count */
    char small[80];
    tsc_select_runs_text(v, 100, small, sizeof small);
    CHECKF(strstr(small, ", ... (100 in all)") && strncmp(small, "0, 1, 4, 9, ", 12) == 0, "cut list '%s'", small);
    /* the accessors the Python package reads an opaque selection through */
    tsc_select_t sel;
    CHECK_EQ_INT(tsc_select_size(), sizeof(tsc_select_t));
    CHECK(tsc_select_parse(&sel, "steps=0:10:2,layers=1") == TSC_OK);
    CHECK(tsc_select_has_step(&sel, 4) && !tsc_select_has_step(&sel, 5) && !tsc_select_has_step(&sel, 10));
    CHECK(!tsc_select_has_step(NULL, 4));
    return tsc_test_done();
}
