/* fuzz_policy.c: tsc_policy_parse on the input as a string; every policy it accepts must print
 * (tsc_policy_format), and the printed form must parse back to an equal policy that prints the
 * same string (the round trip tsc_policy.h promises). */
#include "fuzz_target.h"

#include "tsc_policy.h"

TSC_FUZZ_TARGET(policy) {
    char *s = tsc_fuzz_cstr(data, size);
    if (!s) return 0;
    tsc_policy_t p, q;
    if (tsc_policy_parse(s, &p) == TSC_OK) {
        char a[TSC_POLICY_STR_MAX], b[TSC_POLICY_STR_MAX];
        TSC_FUZZ_CHECK(tsc_policy_validate(&p) == TSC_OK, "'%s' parsed into an invalid policy: %s", s,
                       tsc_error_last());
        TSC_FUZZ_CHECK(tsc_policy_format(&p, a, sizeof a) == TSC_OK, "'%s' parsed but does not print: %s", s,
                       tsc_error_last());
        TSC_FUZZ_CHECK(tsc_policy_parse(a, &q) == TSC_OK, "'%s' prints as '%s', which does not parse: %s", s, a,
                       tsc_error_last());
        TSC_FUZZ_CHECK(tsc_policy_equal(&p, &q), "'%s' prints as '%s', which parses to another policy", s, a);
        TSC_FUZZ_CHECK(tsc_policy_format(&q, b, sizeof b) == TSC_OK && strcmp(a, b) == 0,
                       "'%s' prints as '%s', which prints as '%s'", s, a, b);
        (void)tsc_policy_uses_fp64(&p);
        (void)tsc_policy_low_stages(&p, NULL);
    }
    free(s);
    return 0;
}
