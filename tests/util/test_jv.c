/* The JSON reader (util/tsc_jv.h): what util/tsc_json.h writes reads back bit for bit (17
 * significant digits), escapes decode, malformed documents are rejected naming the line; and the
 * bounds a stranger's document is held to: integers exact to 2^64 - 1 (a double would round them),
 * nesting, keys named twice, UTF-8, the number grammar, the memory budget. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsc_json.h"
#include "tsc_jv.h"
#include "tsc_test.h"

/* Parses text; TSC_OK or the status, with *v the tree (NULL on failure). */
static tsc_status_t parse(const char *text, tsc_jv_t **v) { return tsc_jv_parse(text, strlen(text), "t.json", v); }

/* text is refused with TSC_ERR_FORMAT, no tree, and a message naming the file and holding word. */
static void refused(const char *text, const char *word) {
    tsc_jv_t *v = (tsc_jv_t *)1;
    tsc_status_t st = parse(text, &v);
    CHECKF(st == TSC_ERR_FORMAT && v == NULL, "accepted (%d): %s", st, text);
    CHECKF(st != TSC_OK && strstr(tsc_error_last(), "t.json:") && strstr(tsc_error_last(), word), "%s: %s", text,
           tsc_error_last());
    if (st == TSC_OK) tsc_jv_free(v);
}

/* Integers a double cannot hold are read from their digits or refused, never rounded. */
static void test_exact_integers(void) {
    const char *doc = "[18446744073709551615, 18446744073709551616, 9007199254740993, -9223372036854775808,"
                      " -9223372036854775809, 9223372036854775807, 9223372036854775808, 0, -0, 1.0, 1e2,"
                      " 18446744073709551611, \"7\", 123456789012345678901234567890]";
    tsc_jv_t *v;
    CHECK(parse(doc, &v) == TSC_OK);
    if (!v) return;
    uint64_t u = 0;
    const tsc_jv_t *x = tsc_jv_at(v, 0);
    CHECKF(tsc_jv_u64(x, &u) == NULL && u == UINT64_MAX, "2^64 - 1 read as %llu", (unsigned long long)u);
    CHECK(x->num == 18446744073709551616.0); /* the double is rounded; the exact value is not */
    x = tsc_jv_at(v, 1);
    CHECK(x->int_kind == TSC_JV_INT_BIG && tsc_jv_u64(x, &u) && strstr(tsc_jv_u64(x, &u), "above 2^64 - 1"));
    CHECK(tsc_jv_int(x, NULL, -7) == -7);
    x = tsc_jv_at(v, 2);
    CHECKF(tsc_jv_u64(x, &u) == NULL && u == 9007199254740993ull, "2^53 + 1 read as %llu", (unsigned long long)u);
    CHECK(tsc_jv_int(x, NULL, -1) == 9007199254740993ll);
    CHECK(tsc_jv_int(tsc_jv_at(v, 3), NULL, 0) == LLONG_MIN);
    CHECK(tsc_jv_u64(tsc_jv_at(v, 3), &u) && strstr(tsc_jv_u64(tsc_jv_at(v, 3), &u), "negative"));
    CHECK(tsc_jv_at(v, 4)->int_kind == TSC_JV_INT_BIG && tsc_jv_int(tsc_jv_at(v, 4), NULL, 5) == 5);
    CHECK(tsc_jv_int(tsc_jv_at(v, 5), NULL, 0) == LLONG_MAX);
    CHECK(tsc_jv_int(tsc_jv_at(v, 6), NULL, 3) == 3);
    CHECK(tsc_jv_u64(tsc_jv_at(v, 6), &u) == NULL && u == 9223372036854775808ull);
    CHECK(tsc_jv_u64(tsc_jv_at(v, 7), &u) == NULL && u == 0);
    CHECK(tsc_jv_u64(tsc_jv_at(v, 8), &u) != NULL && tsc_jv_int(tsc_jv_at(v, 8), NULL, 9) == 0); /* -0: signed */
    CHECK(tsc_jv_u64(tsc_jv_at(v, 9), &u) && strstr(tsc_jv_u64(tsc_jv_at(v, 9), &u), "fraction"));
    CHECK(tsc_jv_int(tsc_jv_at(v, 9), NULL, 0) == 1);
    CHECK(tsc_jv_u64(tsc_jv_at(v, 10), &u) != NULL && tsc_jv_num(tsc_jv_at(v, 10), NULL) == 100);
    /* the import's old digit loop refused 2^64 - 10 .. 2^64 - 1: the bound is exact now */
    CHECK(tsc_jv_u64(tsc_jv_at(v, 11), &u) == NULL && u == 18446744073709551611ull);
    CHECK(tsc_jv_u64(tsc_jv_at(v, 12), &u) && strstr(tsc_jv_u64(tsc_jv_at(v, 12), &u), "a string"));
    CHECK(tsc_jv_at(v, 13)->int_kind == TSC_JV_INT_BIG && fabs(tsc_jv_num(tsc_jv_at(v, 13), NULL) / 1.2345678901234568e29 - 1) < 1e-15);
    CHECK(tsc_jv_u64(NULL, &u) != NULL);
    tsc_jv_free(v);
}

static void test_depth(void) {
    char doc[2 * (TSC_JV_MAX_DEPTH + 1) + 1];
    for (int deep = TSC_JV_MAX_DEPTH; deep <= TSC_JV_MAX_DEPTH + 1; deep++) {
        memset(doc, '[', (size_t)deep);
        memset(doc + deep, ']', (size_t)deep);
        doc[2 * deep] = '\0';
        tsc_jv_t *v = NULL;
        tsc_status_t st = parse(doc, &v);
        if (deep == TSC_JV_MAX_DEPTH) {
            CHECKF(st == TSC_OK, "%d deep: %s", deep, tsc_error_last());
            tsc_jv_free(v);
        } else {
            CHECKF(st == TSC_ERR_FORMAT && strstr(tsc_error_last(), "deeper than 64") &&
                   strstr(tsc_error_last(), "at byte 64:"), "%d deep: %s", deep, tsc_error_last());
        }
    }
}

/* A key named twice is refused in small objects (compared pairwise) and large ones (sorted). */
static void test_keys(void) {
    refused("{\"a\": 1, \"b\": 2, \"a\": 3}", "'a' is named twice");
    char doc[512];
    size_t o = 0;
    for (int dup = 0; dup < 2; dup++) {
        o = (size_t)snprintf(doc, sizeof doc, "{");
        for (int i = 0; i < 20; i++) o += (size_t)snprintf(doc + o, sizeof doc - o, "%s\"k%d\": %d", i ? ", " : "", i, i);
        if (dup) o += (size_t)snprintf(doc + o, sizeof doc - o, ", \"k9\": 0");
        snprintf(doc + o, sizeof doc - o, "}");
        tsc_jv_t *v = NULL;
        tsc_status_t st = parse(doc, &v);
        if (!dup) {
            CHECK(st == TSC_OK && v->n == 20 && tsc_jv_int(v, "k19", -1) == 19);
            tsc_jv_free(v);
        } else {
            CHECKF(st == TSC_ERR_FORMAT && strstr(tsc_error_last(), "'k9' is named twice"), "%s", tsc_error_last());
        }
    }
    /* the same key in two objects, and a key that only starts like another, are fine */
    tsc_jv_t *v;
    CHECK(parse("{\"x\": {\"a\": 1}, \"y\": {\"a\": 2}, \"a\": {\"ab\": 3, \"a\": 4}}", &v) == TSC_OK);
    CHECK(tsc_jv_int(v, "y.a", 0) == 2 && tsc_jv_int(v, "a.a", 0) == 4);
    tsc_jv_free(v);
}

static void test_strings(void) {
    refused("[\"\xff\"]", "not valid UTF-8");
    refused("[\"\xc0\xaf\"]", "not valid UTF-8");           /* overlong '/' */
    refused("[\"\xed\xa0\x80\"]", "not valid UTF-8");       /* a surrogate in UTF-8 */
    refused("[\"\xf4\x90\x80\x80\"]", "not valid UTF-8");  /* above U+10FFFF */
    refused("[\"\xe2\x82", "not valid UTF-8");                /* cut short at the end */
    refused("[\"\\ud800\"]", "high surrogate");
    refused("[\"\\ud800\\u0041\"]", "high surrogate");
    refused("[\"\\udc00\"]", "lone low surrogate");
    refused("{\"a\\u0000b\": 1}", "\\u0000");
    refused("[\"tab\there\"]", "control character");
    refused("[\"\\x41\"]", "bad escape");
    refused("\"abc\\", "unterminated");                        /* the old reader accepted this as "abc" */
    tsc_jv_t *v;
    CHECK(parse("[\"\xf0\x9f\x98\x80 \\u00e9\\/\"]", &v) == TSC_OK);
    CHECK_STREQ(tsc_jv_str(tsc_jv_at(v, 0), NULL), "\xf0\x9f\x98\x80 \xc3\xa9/");
    tsc_jv_free(v);
}

static void test_numbers(void) {
    const char *bad[] = {"[01]", "[1.]", "[.5]", "[+1]", "[-]", "[1e]", "[1e+]", "[0x10]", "[NaN]", "[Infinity]", "[-Infinity]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) refused(bad[i], "malformed JSON");
    refused("[01]", "leading zero");
    tsc_jv_t *v;
    CHECK(parse("[-0.0, 1E+2, 0.5e-3, 0, -1]", &v) == TSC_OK);
    CHECK(signbit(tsc_jv_num(tsc_jv_at(v, 0), NULL)) && tsc_jv_num(tsc_jv_at(v, 1), NULL) == 100);
    CHECK(tsc_jv_num(tsc_jv_at(v, 2), NULL) == 0.5e-3 && tsc_jv_int(tsc_jv_at(v, 4), NULL, 0) == -1);
    tsc_jv_free(v);
    /* a literal longer than the parser's stack buffer reads as strtod reads it */
    char lit[160] = "[0.";
    memset(lit + 3, '0', 120);
    strcpy(lit + 123, "1234567]");
    CHECK(parse(lit, &v) == TSC_OK);
    if (v) CHECK(tsc_jv_num(tsc_jv_at(v, 0), NULL) == strtod(lit + 1, NULL) && tsc_jv_num(tsc_jv_at(v, 0), NULL) > 0);
    tsc_jv_free(v);
}

/* The tree asks the memory budget: 200 000 numbers need ~14 MB of nodes, above a 1 MiB budget. */
static void test_budget(void) {
    size_t n = 200000, len = 2 * n + 1;
    char *doc = malloc(len + 1);
    if (!doc) return;
    doc[0] = '[';
    for (size_t i = 0; i < n; i++) doc[1 + 2 * i] = '0', doc[2 + 2 * i] = i + 1 < n ? ',' : ']';
    doc[len] = '\0';
    const char *old = getenv("TSC_MAX_MEMORY");
    char *saved = old ? strdup(old) : NULL;
    setenv("TSC_MAX_MEMORY", "1M", 1);
    tsc_jv_t *v = (tsc_jv_t *)1;
    tsc_status_t st = tsc_jv_parse(doc, len, "big.json", &v);
    CHECKF(st == TSC_ERR_UNSUPPORTED && v == NULL && strstr(tsc_error_last(), "the JSON tree of big.json") &&
           strstr(tsc_error_last(), "memory budget"), "%d: %s", st, tsc_error_last());
    if (saved) setenv("TSC_MAX_MEMORY", saved, 1);
    else unsetenv("TSC_MAX_MEMORY");
    free(saved);
    CHECKF(tsc_jv_parse(doc, len, "big.json", &v) == TSC_OK && v->n == n, "%s", tsc_error_last());
    tsc_jv_free(v);
    free(doc);
}

/* A text inside a binary file: messages count the file's bytes, not the text's lines. */
static void test_base(void) {
    const char *h = "{\"a\": x}";
    tsc_jv_t *v;
    CHECK(tsc_jv_parse_at(h, strlen(h), "h.safetensors", 8, &v) == TSC_ERR_FORMAT);
    CHECKF(strstr(tsc_error_last(), "h.safetensors: malformed JSON at byte 14: unexpected character"), "%s",
           tsc_error_last());
}

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
    CHECKF(strstr(tsc_error_last(), "bad.json:2: malformed JSON at byte 15: ") != NULL, "%s", tsc_error_last());
    tsc_jv_free(NULL);
    test_exact_integers();
    test_depth();
    test_keys();
    test_strings();
    test_numbers();
    test_budget();
    test_base();
    return tsc_test_done();
}
