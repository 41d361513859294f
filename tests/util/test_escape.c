/* tsc_escape.h: each output kind's escaping of strings from received files, byte for byte. */
#include "tsc_escape.h"
#include "tsc_test.h"

typedef void (*esc_fn)(tsc_strbuf_t *, const char *);

static void term1(tsc_strbuf_t *b, const char *s) { tsc_esc_term(b, s, 0); }
static void term_ml(tsc_strbuf_t *b, const char *s) { tsc_esc_term(b, s, 1); }

/* f(in) must be exactly want. */
static void check(esc_fn f, const char *in, const char *want, int line) {
    tsc_strbuf_t b;
    tsc_strbuf_init(&b);
    f(&b, in);
    CHECKF(strcmp(tsc_strbuf_str(&b), want) == 0, "line %d: got \"%s\", want \"%s\"", line, tsc_strbuf_str(&b), want);
    tsc_strbuf_free(&b);
}
#define CK(f, in, want) check(f, in, want, __LINE__)

int main(void) {
    /* terminal: ESC, CR, BEL, backspace, DEL, C1 (CSI U+009B) and malformed UTF-8 become \xNN; tab and
     * well-formed UTF-8 pass; newline only in multiline text */
    CK(term1, "evil\x1b[31mRED\x1b]0;t\x07\r\b\x7f", "evil\\x1b[31mRED\\x1b]0;t\\x07\\x0d\\x08\\x7f");
    CK(term1, "a\tb\nc", "a\tb\\x0ac");
    CK(term_ml, "a\tb\nc\r", "a\tb\nc\\x0d");
    CK(term1, "\xc2\x9b" "2J \xc2\xa0 \xce\xb4 \xe2\x80\xa8 \xf0\x9f\x98\x80", "\\xc2\\x9b2J \xc2\xa0 \xce\xb4 \xe2\x80\xa8 \xf0\x9f\x98\x80");
    /* malformed: a lone continuation, an overlong '/', a surrogate, above U+10FFFF, cut short at the end */
    CK(term1, "\x80 \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x80", "\\x80 \\xc0\\xaf \\xed\\xa0\\x80 \\xf4\\x90\\x80\\x80 \\xe2\\x80");
    CK(term1, NULL, "");
    tsc_strbuf_t b;
    tsc_strbuf_init(&b);
    tsc_strbuf_puts(&b, "old");
    CHECK_STREQ(tsc_esc_term_str(&b, "x\x1by"), "x\\x1by");
    CHECK_STREQ(tsc_esc_term_str(&b, ""), "");
    tsc_strbuf_free(&b);

    /* HTML: the five characters as entities, controls visible, malformed UTF-8 as U+FFFD */
    CK(tsc_esc_html, "<!--<script>\"a\" & 'b'</script>", "&lt;!--&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/script&gt;");
    CK(tsc_esc_html, "l1\nl2\tx\x1b[2J\r", "l1\nl2\tx\\x1b[2J\\x0d");
    CK(tsc_esc_html, "a\xff" "b \xce\xb4", "a\xef\xbf\xbd" "b \xce\xb4");

    /* Markdown: no raw HTML, no markup, no new line */
    CK(tsc_esc_md, "<script>alert(1)</script>", "&lt;script&gt;alert\\(1\\)&lt;/script&gt;");
    CK(tsc_esc_md, "x\n# h\n| a | b |", "x\\x0a\\# h\\x0a\\| a \\| b \\|");
    CK(tsc_esc_md, "*a* _b_ `c` [d](e) ![f] ~g~ $h$ {i} \\ &amp;",
       "\\*a\\* \\_b\\_ \\`c\\` \\[d\\]\\(e\\) \\!\\[f\\] \\~g\\~ \\$h\\$ \\{i\\} \\\\ &amp;amp;");
    CK(tsc_esc_md, "bf16-torch+stable run-1/a.b:c, d=e \x1b[31m\xfe", "bf16-torch+stable run-1/a.b:c, d=e \\x1b\\[31m\xef\xbf\xbd");

    /* JSON in a script element: < > & and the two line separators as \u escapes, nothing else touched */
    CK(tsc_esc_script_json, "{\"d\": \"x<!--<script>\\\"</script>&\xe2\x80\xa8\xe2\x80\xa9\xe2\x80\xaa\"}",
       "{\"d\": \"x\\u003c!--\\u003cscript\\u003e\\\"\\u003c/script\\u003e\\u0026\\u2028\\u2029\xe2\x80\xaa\"}");
    CK(tsc_esc_script_json, "[1, \"\\\\<\"]", "[1, \"\\\\\\u003c\"]");
    return tsc_test_done();
}
