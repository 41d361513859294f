/* fuzz_json.c: the JSON reader (tsc_jv_*, util/tsc_jv.h: summary.json, safetensors headers) on the
 * input; an accepted document is walked whole and looked up the way the figure recipes do. */
#include "fuzz_target.h"

#include <math.h>

#include "tsc_jv.h"

/* Visits every node (bounded by the parser's depth limit) so a malformed tree is touched. */
static size_t walk(const tsc_jv_t *v, int depth) {
    size_t n = 1;
    TSC_FUZZ_CHECK(depth <= 80, "tree deeper than the parser allows");
    switch (v->type) {
    case TSC_JV_NUMBER:
        /* an exact integer and its double are the same number: both are correctly rounded */
        if (v->int_kind == TSC_JV_INT_EXACT) {
            double m = (double)v->mag;
            TSC_FUZZ_CHECK(v->num == (signbit(v->num) ? -m : m), "integer %s%llu read as %.17g",
                           signbit(v->num) ? "-" : "", (unsigned long long)v->mag, v->num);
        }
        break;
    case TSC_JV_STRING: TSC_FUZZ_CHECK(v->str != NULL, "string node without text"); n += strlen(v->str) > 0; break;
    case TSC_JV_OBJECT:
        for (size_t i = 0; i < v->n; i++) {
            TSC_FUZZ_CHECK(v->keys[i] != NULL, "object member %zu without a key", i);
            TSC_FUZZ_CHECK(tsc_jv_get(v, v->keys[i]) != NULL, "member '%s' not found by its own key", v->keys[i]);
        }
        /* fall through */
    case TSC_JV_ARRAY:
        for (size_t i = 0; i < v->n; i++) n += walk(tsc_jv_at(v, i), depth + 1);
        break;
    default: break;
    }
    return n;
}

TSC_FUZZ_TARGET(json) {
    tsc_jv_t *root = NULL;
    if (tsc_jv_parse((const char *)data, size, "fuzz.json", &root) == TSC_OK) {
        TSC_FUZZ_CHECK(root != NULL, "accepted without a tree");
        (void)walk(root, 0);
        /* lookups as the figures do them */
        (void)tsc_jv_num(root, "dump.n_head");
        (void)tsc_jv_str(root, "kind");
        (void)tsc_jv_len(root, "heads");
        (void)tsc_jv_int(root, "heads.0.layer", -1);
        (void)tsc_jv_int(root, "verdict.step", -1);
        (void)tsc_jv_path(root, "0.0.0");
        (void)tsc_jv_num(root, NULL);
        tsc_jv_free(root);
    } else {
        TSC_FUZZ_CHECK(root == NULL, "a rejected document left a tree");
    }
    return 0;
}
