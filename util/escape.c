/* escape.c: text from received files made inert per output kind (tsc_escape.h). */
#include "tsc_escape.h"
#include "util_internal.h"

#include <stdio.h>
#include <string.h>

int tsc_utf8_len(const unsigned char *p, size_t avail) {
    if (!avail) return 0;
    unsigned char c = p[0];
    if (c < 0x80) return 1;
    int n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (!n || avail < (size_t)n) return 0;
    unsigned char lo = 0x80, hi = 0xbf; /* the range of the second byte */
    if (c == 0xe0) lo = 0xa0;
    else if (c == 0xed) hi = 0x9f;
    else if (c == 0xf0) lo = 0x90;
    else if (c == 0xf4) hi = 0x8f;
    if (p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf) return 0;
    return n;
}

/* A NUL-terminated string may be read 4 bytes at a time: its NUL fails the check of the byte it
 * is in, and no byte after a failed one is read. */
static int utf8_len(const unsigned char *p) { return tsc_utf8_len(p, 4); }

/* A control character: C0, DEL, or C1 (U+0080..U+009F, UTF-8 c2 80..c2 9f) at p of length n. */
static int is_control(const unsigned char *p, int n) {
    return n == 1 ? p[0] < 0x20 || p[0] == 0x7f : n == 2 && p[0] == 0xc2 && p[1] < 0xa0;
}

static void hex_bytes(tsc_strbuf_t *b, const unsigned char *p, int n) {
    char x[8];
    for (int i = 0; i < n; i++) {
        snprintf(x, sizeof x, "\\x%02x", p[i]);
        tsc_strbuf_puts(b, x);
    }
}

void tsc_esc_term(tsc_strbuf_t *b, const char *s, int multiline) {
    for (const unsigned char *p = (const unsigned char *)s; p && *p;) {
        int n = utf8_len(p);
        if (!n) hex_bytes(b, p, 1), p++;
        else if (is_control(p, n) && !(*p == '\t' || (multiline && *p == '\n'))) hex_bytes(b, p, n), p += n;
        else tsc_strbuf_append(b, (const char *)p, (size_t)n), p += n;
    }
}

const char *tsc_esc_term_str(tsc_strbuf_t *b, const char *s) {
    tsc_strbuf_clear(b);
    tsc_esc_term(b, s, 0);
    return tsc_strbuf_str(b);
}

void tsc_esc_html(tsc_strbuf_t *b, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; p && *p;) {
        int n = utf8_len(p);
        if (!n) { tsc_strbuf_puts(b, "\xef\xbf\xbd"), p++; continue; }
        switch (*p) {
        case '&': tsc_strbuf_puts(b, "&amp;"); break;
        case '<': tsc_strbuf_puts(b, "&lt;"); break;
        case '>': tsc_strbuf_puts(b, "&gt;"); break;
        case '"': tsc_strbuf_puts(b, "&quot;"); break;
        case '\'': tsc_strbuf_puts(b, "&#39;"); break;
        default:
            if (is_control(p, n) && *p != '\t' && *p != '\n') hex_bytes(b, p, n);
            else tsc_strbuf_append(b, (const char *)p, (size_t)n);
        }
        p += n;
    }
}

void tsc_esc_md(tsc_strbuf_t *b, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; p && *p;) {
        int n = utf8_len(p);
        if (!n) { tsc_strbuf_puts(b, "\xef\xbf\xbd"), p++; continue; }
        if (*p == '<') tsc_strbuf_puts(b, "&lt;");
        else if (*p == '>') tsc_strbuf_puts(b, "&gt;");
        else if (*p == '&') tsc_strbuf_puts(b, "&amp;");
        else if (is_control(p, n)) hex_bytes(b, p, n);
        else {
            if (n == 1 && strchr("\\`*_{}[]()#|~!$", *p)) tsc_strbuf_putc(b, '\\');
            tsc_strbuf_append(b, (const char *)p, (size_t)n);
        }
        p += n;
    }
}

void tsc_esc_script_json(tsc_strbuf_t *b, const char *json) {
    for (const char *p = json; p && *p; p++) {
        if (*p == '<') tsc_strbuf_puts(b, "\\u003c");
        else if (*p == '>') tsc_strbuf_puts(b, "\\u003e");
        else if (*p == '&') tsc_strbuf_puts(b, "\\u0026");
        else if (p[0] == '\xe2' && p[1] == '\x80' && (p[2] == '\xa8' || p[2] == '\xa9'))
            tsc_strbuf_puts(b, p[2] == '\xa8' ? "\\u2028" : "\\u2029"), p += 2;
        else tsc_strbuf_putc(b, *p);
    }
}
