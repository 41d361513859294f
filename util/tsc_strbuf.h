/* tsc_strbuf.h: a growing, NUL-terminated string buffer. The one copy every layer uses for
 * text built piece by piece (JSON, HTML, gnuplot scripts, messages).
 *
 *   tsc_strbuf_t sb; tsc_strbuf_init(&sb);
 *   tsc_strbuf_printf(&sb, "%d heads", 12);
 *   tsc_strbuf_append(&sb, ", T = 1024", 10);
 *   if (tsc_strbuf_status(&sb) != TSC_OK) ...;   // an allocation failed at some point
 *   puts(tsc_strbuf_str(&sb)); tsc_strbuf_free(&sb);
 *
 * An allocation failure is sticky: later appends do nothing and tsc_strbuf_status reports
 * TSC_ERR_NOMEM, so callers check once at the end. */
#ifndef TSC_STRBUF_H
#define TSC_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

#include "tsc_export.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char *p;      /* the text, NUL-terminated once anything was appended (may be NULL before) */
    size_t len;   /* bytes of text, without the NUL */
    size_t cap;   /* bytes allocated */
    int nomem;    /* an allocation failed; the text is truncated at the failed append */
} tsc_strbuf_t;

TSC_API void tsc_strbuf_init(tsc_strbuf_t *sb);
/* Frees the text; NULL is a no-op. The buffer is empty and reusable afterwards. */
TSC_API void tsc_strbuf_free(tsc_strbuf_t *sb);
/* Empties the text, keeping the allocation. */
TSC_API void tsc_strbuf_clear(tsc_strbuf_t *sb);
TSC_API void tsc_strbuf_append(tsc_strbuf_t *sb, const char *s, size_t n);
TSC_API void tsc_strbuf_puts(tsc_strbuf_t *sb, const char *s);
TSC_API void tsc_strbuf_putc(tsc_strbuf_t *sb, char c);
TSC_API void tsc_strbuf_printf(tsc_strbuf_t *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
TSC_API void tsc_strbuf_vprintf(tsc_strbuf_t *sb, const char *fmt, va_list ap);
/* The text ("" when empty). Valid until the next append or free. */
TSC_API const char *tsc_strbuf_str(const tsc_strbuf_t *sb);
/* Hands the text to the caller (free() it; never NULL unless the buffer ran out of memory)
 * and leaves the buffer empty. */
TSC_API char *tsc_strbuf_take(tsc_strbuf_t *sb);
/* TSC_OK, or TSC_ERR_NOMEM (with a detail) when an append failed. */
TSC_API tsc_status_t tsc_strbuf_status(const tsc_strbuf_t *sb);

#ifdef __cplusplus
}
#endif
#endif
