/* util_internal.h: helpers shared by the files of util/ (not installed, not exported). */
#ifndef TSC_UTIL_INTERNAL_H
#define TSC_UTIL_INTERNAL_H

#include <stddef.h>

#include "tsc_status.h"

/* Writes data[0..n) followed by tail[0..tail_n) to path atomically (tsc_out_open, checked
 * writes, tsc_out_commit; tsc_out_abort on a failed write). tail may be NULL. */
tsc_status_t tsc_out_write_parts(const char *path, const void *data, size_t n, const void *tail, size_t tail_n);

/* The length (1..4) of the well-formed UTF-8 sequence at p, of which avail bytes may be read; 0
 * when malformed or cut short: a stray continuation byte, an overlong form, a surrogate, a code
 * point above U+10FFFF (RFC 3629; the Unicode standard's table 3-7). The one definition of valid
 * UTF-8 for the writer, the escapers and the reader (escape.c). */
int tsc_utf8_len(const unsigned char *p, size_t avail);

#endif
