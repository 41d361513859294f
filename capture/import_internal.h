/* import_internal.h: what the tensor-file readers (import_read.c) and the import (import.c) share. */
#ifndef TSC_IMPORT_INTERNAL_H
#define TSC_IMPORT_INTERNAL_H

#include <stddef.h>

/* A tensor name from a file, fit for a message: 'name' in single quotes, control bytes, quotes and
 * backslashes as \xNN, cut at 120 bytes with "...". Returns buf. */
#define TSC_IMPORT_QUOTE_MAX 512
const char *tsc_import_quote(const char *s, char buf[TSC_IMPORT_QUOTE_MAX]);

#endif
