/* The JSON reader (util/tsc_jv.h): what util/tsc_json.h writes reads back bit for bit (17
 * significant digits), escapes decode, malformed documents are rejected naming the line. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tsc_json.h"
#include "tsc_jv.h"
#include "tsc_test.h"

int main(void) {
    /* round trip through the project's writer */
    const double vals[] = {-4.703990459442139, 1e-300, 0.1, -2.296875, 3.0e38, 5e-324, 123456789.125};
    tsc_json_t j;
    tsc_json_init(&j);
    tsc_json_object_begin(&j);
    tsc_json_kv_string(&j, "format", "tilescope-summary");
    tsc_json_kv_string(&j, "odd", "quote\" back\\slash\nnewline \x01 caf\xc3\xa9");
    tsc_json_kv_numbers(&j, "vals", vals, sizeof vals / sizeof vals[0]);
    tsc_json_kv_number(&j, "nan", NAN);
    tsc_json_kv_bool(&j, "yes", 1);
    tsc_json_key(&j, "nested");
    tsc_json_object_begin(&j);
    tsc_json_key(&j, "list");
    tsc_json_array_begin(&j);
    tsc_json_object_begin(&j);
    tsc_json_kv_int(&j, "layer", 7);
    tsc_json_object_end(&j);
    tsc_json_array_end(&j);
    tsc_json_object_end(&j);
    tsc_json_object_end(&j);
    size_t len;
    const char *text = tsc_json_text(&j, &len);
    tsc_jv_t *v = NULL;
    CHECK(tsc_jv_parse(text, len, "mem.json", &v) == TSC_OK);
    CHECK_STREQ(tsc_jv_str(v, "format"), "tilescope-summary");
    CHECK_STREQ(tsc_jv_str(v, "odd"), "quote\" back\\slash\nnewline \x01 caf\xc3\xa9");
    CHECK_EQ_INT(tsc_jv_len(v, "vals"), 7);
    for (size_t i = 0; i < 7; i++) {
        double got = tsc_jv_num(tsc_jv_at(tsc_jv_get(v, "vals"), i), NULL);
        uint64_t a, b;
        memcpy(&a, &got, 8);
        memcpy(&b, &vals[i], 8);
        CHECKF(a == b, "vals[%zu]: %.17g read back as %.17g", i, vals[i], got);
    }
    CHECK(isnan(tsc_jv_num(v, "nan")));
    CHECK(tsc_jv_path(v, "nan")->type == TSC_JV_NULL);
    CHECK_NEAR(tsc_jv_num(v, "yes"), 1, 0);
    CHECK_NEAR(tsc_jv_num(v, "nested.list.0.layer"), 7, 0);
    CHECK(tsc_jv_path(v, "nested.list.1") == NULL);
    CHECK(isnan(tsc_jv_num(v, "absent.key")));
    tsc_jv_free(v);
    tsc_json_free(&j);

    /* negative zero keeps its sign */
    CHECK(tsc_jv_parse("[-0.0]", 6, "z.json", &v) == TSC_OK);
    CHECK(signbit(tsc_jv_num(tsc_jv_at(v, 0), NULL)));
    tsc_jv_free(v);

    /* \u escapes, surrogate pairs */
    const char *u = "{\"d\": \"\\u03b4 \\ud83d\\ude00\"}";
    CHECK(tsc_jv_parse(u, strlen(u), "u.json", &v) == TSC_OK);
    CHECK_STREQ(tsc_jv_str(v, "d"), "\xce\xb4 \xf0\x9f\x98\x80");
    tsc_jv_free(v);

    /* malformed: the message names the source and the line */
    const char *bad[] = {"{\"a\": 1,\n \"b\": }", "[1, 2", "{\"a\" 1}", "{\"a\": 1} x", "{\"a\": \"unterminated}",
                         "{\"a\": tru}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = (tsc_jv_t *)1;
        CHECKF(tsc_jv_parse(bad[i], strlen(bad[i]), "bad.json", &v) == TSC_ERR_FORMAT, "accepted: %s", bad[i]);
        CHECK(v == NULL);
        CHECKF(strstr(tsc_error_last(), "bad.json:") != NULL, "%s", tsc_error_last());
    }
    CHECK(tsc_jv_parse(bad[0], strlen(bad[0]), "bad.json", &v) == TSC_ERR_FORMAT);
    CHECKF(strstr(tsc_error_last(), "bad.json: malformed JSON at byte 15 (line 2)") != NULL, "%s", tsc_error_last());
    tsc_jv_free(NULL);
    return tsc_test_done();
}
