/* strbuf.c: the growing string buffer of tsc_strbuf.h. */
#include "tsc_strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tsc_strbuf_init(tsc_strbuf_t *sb) { memset(sb, 0, sizeof *sb); }

void tsc_strbuf_free(tsc_strbuf_t *sb) {
    if (!sb) return;
    free(sb->p);
    memset(sb, 0, sizeof *sb);
}

void tsc_strbuf_clear(tsc_strbuf_t *sb) {
    sb->len = 0;
    if (sb->p) sb->p[0] = '\0';
}

/* Room for n more bytes and the NUL; 0 on failure (then nomem is set). */
static int reserve(tsc_strbuf_t *sb, size_t n) {
    if (sb->nomem) return 0;
    if (n > (size_t)-1 / 2 - sb->len) {
        sb->nomem = 1;
        return 0;
    }
    size_t need = sb->len + n + 1;
    if (need <= sb->cap) return 1;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < need) cap *= 2;
    char *p = realloc(sb->p, cap);
    if (!p) {
        sb->nomem = 1;
        return 0;
    }
    sb->p = p;
    sb->cap = cap;
    return 1;
}

void tsc_strbuf_append(tsc_strbuf_t *sb, const char *s, size_t n) {
    if (!reserve(sb, n)) return;
    memcpy(sb->p + sb->len, s, n);
    sb->len += n;
    sb->p[sb->len] = '\0';
}

void tsc_strbuf_puts(tsc_strbuf_t *sb, const char *s) { tsc_strbuf_append(sb, s, strlen(s)); }

void tsc_strbuf_putc(tsc_strbuf_t *sb, char c) { tsc_strbuf_append(sb, &c, 1); }

void tsc_strbuf_vprintf(tsc_strbuf_t *sb, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || !reserve(sb, (size_t)n)) {
        sb->nomem = 1;
        return;
    }
    vsnprintf(sb->p + sb->len, (size_t)n + 1, fmt, ap);
    sb->len += (size_t)n;
}

void tsc_strbuf_printf(tsc_strbuf_t *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tsc_strbuf_vprintf(sb, fmt, ap);
    va_end(ap);
}

const char *tsc_strbuf_str(const tsc_strbuf_t *sb) { return sb->p ? sb->p : ""; }

char *tsc_strbuf_take(tsc_strbuf_t *sb) {
    char *p = sb->nomem ? NULL : sb->p;
    if (!p && !sb->nomem) p = calloc(1, 1);
    if (sb->nomem) free(sb->p);
    memset(sb, 0, sizeof *sb);
    return p;
}

tsc_status_t tsc_strbuf_status(const tsc_strbuf_t *sb) {
    if (sb->nomem) return tsc_error_set(TSC_ERR_NOMEM, "out of memory building a text of %zu bytes", sb->len);
    return TSC_OK;
}
