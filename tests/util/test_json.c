/* Unit tests of util/tsc_json.h: exact text, escaping, non-finite bookkeeping, misuse,
 * atomic file write. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tsc_json.h"
#include "tsc_test.h"

int main(void) {
    tsc_json_t j;
    tsc_json_init(&j);
    tsc_json_set_indent(&j, 0);
    tsc_json_object_begin(&j);
    tsc_json_kv_int(&j, "a", 1);
    tsc_json_kv_string(&j, "b", "x\"y\\\n\001");
    double v[3] = {1.5, NAN, -2.0};
    tsc_json_kv_numbers(&j, "c", v, 3);
    tsc_json_kv_bool(&j, "d", 1);
    tsc_json_key(&j, "e");
    tsc_json_null(&j);
    tsc_json_kv_number(&j, "f", 0.1);
    tsc_json_kv_number(&j, "g", INFINITY);
    tsc_json_key(&j, "h");
    tsc_json_array_begin(&j);
    tsc_json_object_begin(&j);
    tsc_json_kv_number(&j, "z", -0.0);
    tsc_json_object_end(&j);
    tsc_json_array_end(&j);
    tsc_json_key(&j, "nonfinite");
    tsc_json_nonfinite_note(&j);
    tsc_json_object_end(&j);
    CHECK(tsc_json_status(&j) == TSC_OK);
    const char *want = "{\"a\":1,\"b\":\"x\\\"y\\\\\\n\\u0001\",\"c\":[1.5,null,-2.0],\"d\":true,\"e\":null,"
                       "\"f\":0.10000000000000001,\"g\":null,\"h\":[{\"z\":0.0}],"
                       "\"nonfinite\":{\"count\":2,\"written_as\":\"null\",\"first_paths\":[\"c[1]\",\"g\"]}}";
    CHECK_STREQ(tsc_json_text(&j, NULL), want);
    CHECK_EQ_INT(j.n_nonfinite, 2);
    /* 17 significant digits read back bit for bit. */
    CHECK(strtod("0.10000000000000001", NULL) == 0.1);

    char dir[] = "tsc_json_XXXXXX"; /* in the test's working directory */
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/s.json", dir);
    CHECK(tsc_json_write_file(&j, path) == TSC_OK);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    char buf[1024] = {0};
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    CHECK_EQ_INT(n, strlen(want) + 1);
    CHECK(strncmp(buf, want, strlen(want)) == 0);
    remove(path);
    /* A path in a missing folder: TSC_ERR_IO, naming the file. */
    snprintf(path, sizeof path, "%s/no/such/s.json", dir);
    CHECK(tsc_json_write_file(&j, path) == TSC_ERR_IO);
    CHECK(strstr(tsc_error_last(), "s.json") != NULL);
    rmdir(dir);
    tsc_json_free(&j);

    /* Misuse is sticky and reported; an unfinished document is not written. */
    tsc_json_init(&j);
    tsc_json_array_begin(&j);
    tsc_json_key(&j, "k");
    CHECK(tsc_json_status(&j) == TSC_ERR_INTERNAL);
    tsc_json_free(&j);
    tsc_json_init(&j);
    tsc_json_object_begin(&j);
    CHECK(tsc_json_write_file(&j, "unused.json") == TSC_ERR_INTERNAL);
    tsc_json_free(&j);
    tsc_json_free(NULL);

    /* Indented output: nested object, stable layout. */
    tsc_json_init(&j);
    tsc_json_object_begin(&j);
    tsc_json_key(&j, "o");
    tsc_json_object_begin(&j);
    tsc_json_kv_int(&j, "n", 3);
    tsc_json_object_end(&j);
    tsc_json_object_end(&j);
    CHECK_STREQ(tsc_json_text(&j, NULL), "{\n  \"o\": {\n    \"n\": 3\n  }\n}");
    tsc_json_free(&j);
    {
        /* malformed UTF-8 (stray continuation, truncated, overlong, surrogate, > U+10FFFF, lone
         * lead byte at the end) becomes U+FFFD byte by byte; well-formed sequences pass through */
        tsc_json_t u;
        tsc_json_init(&u);
        tsc_json_set_indent(&u, 0);
        tsc_json_string(&u, "a\x80" "b\xc3\xa9" "c\xe2\x82" "d\xc0\xaf" "e\xed\xa0\x80" "f\xf4\x90\x80\x80"
                            "g\xf0\x9f\x98\x80" "h\x1b[31m" "\xe2");
        CHECK(tsc_json_status(&u) == TSC_OK);
        CHECK_STREQ(tsc_json_text(&u, NULL),
                    "\"a\xef\xbf\xbd" "b\xc3\xa9" "c\xef\xbf\xbd\xef\xbf\xbd" "d\xef\xbf\xbd\xef\xbf\xbd"
                    "e\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "f\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                    "g\xf0\x9f\x98\x80" "h\\u001b[31m" "\xef\xbf\xbd\"");
        tsc_json_free(&u);
    }

    /* Field tables: every kind, in table order, nested members, NaN noted with its path. */
    struct inner { double x; };
    typedef struct {
        int i;
        long l;
        long long ll;
        size_t u;
        double d;
        float f;
        int b;
        const char *s, *snull;
        char text[16], empty[16];
        struct inner in;
    } rec_t;
    static const tsc_json_field_t rf[] = {
        TSC_JSON_FIELD(rec_t, i, "i"), TSC_JSON_FIELD(rec_t, l, "l"), TSC_JSON_FIELD(rec_t, ll, "ll"),
        TSC_JSON_FIELD(rec_t, u, "u"), TSC_JSON_FIELD(rec_t, d, "d"), TSC_JSON_FIELD(rec_t, f, "f"),
        TSC_JSON_BOOL(rec_t, b, "b"), TSC_JSON_STR(rec_t, s, "s"), TSC_JSON_STR(rec_t, snull, "sn"),
        TSC_JSON_CHARS(rec_t, empty, "c"), TSC_JSON_TEXT(rec_t, text, "t"), TSC_JSON_TEXT(rec_t, empty, "e"),
        TSC_JSON_FIELD(rec_t, in.x, "x")};
    rec_t rec = {-3, 4000000000L, -5LL, 7, 0.5, 0.25f, 1, "q\"", NULL, "hi", "", {NAN}};
    tsc_json_init(&j);
    tsc_json_set_indent(&j, 0);
    tsc_json_object_begin(&j);
    tsc_json_kv_fields(&j, &rec, rf, TSC_JSON_NFIELDS(rf));
    tsc_json_kv_object(&j, "o", &rec, rf, 2);
    tsc_json_object_end(&j);
    CHECK_STREQ(tsc_json_text(&j, NULL), "{\"i\":-3,\"l\":4000000000,\"ll\":-5,\"u\":7,\"d\":0.5,\"f\":0.25,"
                                         "\"b\":true,\"s\":\"q\\\"\",\"sn\":null,\"c\":\"\",\"t\":\"hi\","
                                         "\"e\":null,\"x\":null,\"o\":{\"i\":-3,\"l\":4000000000}}");
    CHECK(j.n_nonfinite == 1);
    CHECK_STREQ(j.nonfinite_paths[0], "x");
    tsc_json_free(&j);
    return tsc_test_done();
}
