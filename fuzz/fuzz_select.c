/* fuzz_select.c: the selection parser (tsc_select.h) on the input: the whole-spec grammar and the
 * set grammar alone. An accepted spec must print (tsc_select_format) to a text that parses back to
 * the same selection, value for value on a window of small and huge values. */
#include "fuzz_target.h"

#include <limits.h>

#include "tsc_select.h"

/* x + d, held at LLONG_MAX (a range's start plus a huge stride must not overflow the probe). */
static long long add_sat(long long x, long long d) {
    long long r;
    return __builtin_add_overflow(x, d, &r) ? (d > 0 ? LLONG_MAX : LLONG_MIN) : r;
}

/* Same membership on values around every range bound of a, and on 0..63. */
static int same_set(const tsc_select_set_t *a, const tsc_select_set_t *b) {
    for (long long v = 0; v < 64; v++)
        if (tsc_select_set_has(a, v) != tsc_select_set_has(b, v)) return 0;
    for (int i = 0; i < a->n; i++) {
        const tsc_select_range_t *r = &a->item[i];
        long long probe[6] = {r->start, add_sat(r->start, 1), add_sat(r->start, r->stride), add_sat(r->stop, -1), r->stop,
                              r->stop == TSC_SELECT_OPEN ? add_sat(r->stop, -2) : add_sat(r->stop, 1)};
        for (int k = 0; k < 6; k++)
            if (probe[k] >= 0 && tsc_select_set_has(a, probe[k]) != tsc_select_set_has(b, probe[k])) return 0;
    }
    return a->all == b->all;
}

static void round_trip(const tsc_select_t *s, const char *spec) {
    char buf[4096];
    tsc_select_format(s, buf, sizeof buf);
    /* each set prints into 512 bytes: a longer one is cut, and then there is nothing to compare */
    if (strlen(buf) > 4 * 500) return;
    tsc_select_t t;
    TSC_FUZZ_CHECK(tsc_select_parse(&t, buf) == TSC_OK, "'%s' prints as '%s', which does not parse: %s", spec, buf,
                   tsc_error_last());
    TSC_FUZZ_CHECK(same_set(&s->steps, &t.steps) && same_set(&s->layers, &t.layers) &&
                       same_set(&s->heads, &t.heads) && same_set(&s->batches, &t.batches),
                   "'%s' prints as '%s', which selects something else", spec, buf);
}

TSC_FUZZ_TARGET(select) {
    char *s = tsc_fuzz_cstr(data, size);
    if (!s) return 0;
    tsc_select_t sel;
    if (tsc_select_parse(&sel, s) == TSC_OK) {
        (void)tsc_select_has(&sel, 0, 1, 2);
        (void)tsc_select_set_count(&sel.heads, 64);
        round_trip(&sel, s);
    }
    tsc_select_set_t set;
    if (tsc_select_set_parse(&set, s) == TSC_OK) {
        char buf[512];
        tsc_select_set_format(&set, buf, sizeof buf);
        (void)tsc_select_set_count(&set, 64);
        (void)tsc_select_set_has(&set, TSC_SELECT_OPEN - 1);
    }
    free(s);
    return 0;
}
