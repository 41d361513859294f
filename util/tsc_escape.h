/* tsc_escape.h: text from received files made inert in each kind of output. A dump's file name
 * and attributes, summary.json's strings, a log's lines and a folder's name come from whoever
 * wrote them; each output kind has one function here that every writer of that kind uses, so no
 * such string can add markup, close a script, forge a line or drive the terminal.
 *
 *   tsc_strbuf_t b; tsc_strbuf_init(&b);
 *   tsc_esc_md(&b, tsc_jv_str(summary, "lp"));   // compare.md
 *   fprintf(stderr, "%s\n", tsc_esc_term_str(&b, tsc_error_last()));
 *   tsc_strbuf_free(&b);
 *
 * Every function appends to b (NULL s appends nothing) and keeps the text valid UTF-8. "Shown as
 * \xNN" below means the byte is written as the four characters backslash, x and two lower-case hex
 * digits; controls are C0 (below 0x20), DEL (0x7f) and C1 (U+0080..U+009F). */
#ifndef TSC_ESCAPE_H
#define TSC_ESCAPE_H

#include "tsc_export.h"
#include "tsc_strbuf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Terminal (stdout, stderr, logs): every control byte but tab shown as \xNN (ESC, CR, BEL,
 * backspace; newline too unless multiline), and each byte of malformed UTF-8 as \xNN. */
TSC_API void tsc_esc_term(tsc_strbuf_t *b, const char *s, int multiline);
/* tsc_esc_term(b, s, 0) into b emptied first; returns b's text (valid until b changes). */
TSC_API const char *tsc_esc_term_str(tsc_strbuf_t *b, const char *s);

/* HTML text or a quoted attribute value: & < > " ' as &amp; &lt; &gt; &quot; &#39;; controls but
 * tab and newline shown as \xNN; malformed UTF-8 as U+FFFD. */
TSC_API void tsc_esc_html(tsc_strbuf_t *b, const char *s);

/* Markdown inline text (a paragraph, a list item, a table cell): < > & as &lt; &gt; &amp; (no raw
 * HTML), the characters that make emphasis, code, links, headings, tables or escapes
 * (\ ` * _ { } [ ] ( ) # | ~ ! $) backslash-escaped, controls (newline included: no line of a
 * string can start a block) shown as \xNN, malformed UTF-8 as U+FFFD. */
TSC_API void tsc_esc_md(tsc_strbuf_t *b, const char *s);

/* JSON text (as tsc_json writes it) for the inside of an HTML <script> element: < > & as \u003c
 * \u003e \u0026 and U+2028, U+2029 as \u2028 \u2029. In JSON these occur only inside strings, where
 * the escapes read back as the same characters, so JSON.parse of the element's text gives the
 * document unchanged while no string can hold "</script>", "<!--" or "<script" (which end the
 * element or change how the HTML parser finds its end). */
TSC_API void tsc_esc_script_json(tsc_strbuf_t *b, const char *json);

#ifdef __cplusplus
}
#endif
#endif
