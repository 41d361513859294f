/* Unit tests of util/tsc_strbuf.h: appends of every kind, printf growing past the first 256-byte
 * allocation, take, clear and free. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsc_strbuf.h"
#include "tsc_test.h"

int main(void) {
    tsc_strbuf_t sb;
    tsc_strbuf_init(&sb);
    CHECK_STREQ(tsc_strbuf_str(&sb), "");  /* empty before anything is appended */
    CHECK_EQ_INT(sb.len, 0);

    tsc_strbuf_append(&sb, "abcdef", 3);
    tsc_strbuf_puts(&sb, "-x-");
    tsc_strbuf_putc(&sb, 'Z');
    tsc_strbuf_append(&sb, "", 0);
    tsc_strbuf_printf(&sb, "[%d|%s|%.2f]", 42, "s", 0.5);
    CHECK_STREQ(tsc_strbuf_str(&sb), "abc-x-Z[42|s|0.50]");
    CHECK_EQ_INT(sb.len, strlen("abc-x-Z[42|s|0.50]"));
    CHECK(tsc_strbuf_status(&sb) == TSC_OK);

    /* embedded bytes are kept as given (append copies n bytes, NUL-terminates after them) */
    tsc_strbuf_clear(&sb);
    CHECK_STREQ(tsc_strbuf_str(&sb), "");
    CHECK_EQ_INT(sb.len, 0);
    size_t cap_before = sb.cap;
    tsc_strbuf_append(&sb, "a\0b", 3);
    CHECK_EQ_INT(sb.len, 3);
    CHECK(memcmp(sb.p, "a\0b", 4) == 0);
    CHECK_EQ_INT(sb.cap, cap_before);  /* clear keeps the allocation */

    /* printf growth: one call longer than the first allocation, then many small ones */
    tsc_strbuf_clear(&sb);
    char big[1000];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    tsc_strbuf_printf(&sb, "<%s>", big);
    CHECK_EQ_INT(sb.len, 1001);
    CHECK(sb.cap > 256 && sb.cap >= sb.len + 1);
    CHECK(sb.p[0] == '<' && sb.p[1] == 'q' && sb.p[999] == 'q' && sb.p[1000] == '>' && sb.p[1001] == '\0');
    tsc_strbuf_clear(&sb);
    char expect[4096] = "";
    size_t elen = 0;
    for (int i = 0; i < 300; i++) {
        tsc_strbuf_printf(&sb, "%d,", i);
        elen += (size_t)snprintf(expect + elen, sizeof expect - elen, "%d,", i);
    }
    CHECK_EQ_INT(sb.len, elen);
    CHECK_STREQ(tsc_strbuf_str(&sb), expect);
    CHECK(tsc_strbuf_status(&sb) == TSC_OK);

    /* take hands over the text and leaves the buffer empty and reusable */
    char *t = tsc_strbuf_take(&sb);
    CHECK(t != NULL && strcmp(t, expect) == 0);
    free(t);
    CHECK(sb.p == NULL && sb.len == 0 && sb.cap == 0);
    CHECK_STREQ(tsc_strbuf_str(&sb), "");
    t = tsc_strbuf_take(&sb);  /* take of an empty buffer: an empty string, never NULL */
    CHECK(t != NULL && t[0] == '\0');
    free(t);
    tsc_strbuf_puts(&sb, "again");
    CHECK_STREQ(tsc_strbuf_str(&sb), "again");

    tsc_strbuf_free(&sb);
    CHECK(sb.p == NULL && sb.len == 0);
    tsc_strbuf_free(NULL);  /* no-op */
    return tsc_test_done();
}
