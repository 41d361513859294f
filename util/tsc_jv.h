/* tsc_jv.h: the JSON reader (RFC 8259): every JSON document tilescope reads (summary.json, the
 * header of a .safetensors file) is parsed here into a tree of tsc_jv_t nodes. The writer is
 * tsc_json.h; what it writes reads back bit for bit.
 *
 *   tsc_jv_t *v;
 *   if (tsc_jv_read_file("out/summary.json", &v) != TSC_OK) return puts(tsc_error_last());
 *   double bias = tsc_jv_num(v, "heads.0.bias");     // NaN when absent
 *   const char *kind = tsc_jv_str(v, "kind");        // NULL when absent
 *   tsc_jv_free(v);
 *
 * Documents come from strangers (a tensor file someone saved, a copied analysis folder), so the
 * reader accepts RFC 8259 and nothing more, within stated bounds:
 * - strings are well-formed UTF-8 (no overlong forms, surrogates or code points above U+10FFFF;
 *   RFC 3629), without raw control characters; \uXXXX escapes decode to UTF-8 with surrogate pairs
 *   joined, a lone surrogate is refused, and so is \u0000 (a C string would end there, so "a\u0000b"
 *   would read as "a");
 * - numbers follow the grammar (no leading zeros, '+', bare '.', hex, NaN or Infinity) and are read
 *   as doubles (strtod: 17 significant digits read back bit for bit). A number written as an
 *   integer (no fraction, no exponent) in [-2^63, 2^64) also keeps its exact value, which a double
 *   rounds above 2^53 (a file offset near 2^64 must not move): tsc_jv_u64, tsc_jv_int;
 * - an object names each key once (a second "dtype" must not shadow the first);
 * - arrays and objects nest at most TSC_JV_MAX_DEPTH deep (the parser recurses);
 * - the tree asks the memory budget (tsc_mem.h) as it grows: a value costs 72 bytes (its node and
 *   its place in its parent), so a long array of one-digit numbers needs up to ~50 bytes per byte of
 *   text while it is read; the budget refuses what the machine cannot hold.
 * A refusal is TSC_ERR_FORMAT "WHERE:LINE: malformed JSON at byte N: what is wrong" (a text inside
 * a binary file, tsc_jv_parse_at: "WHERE: malformed JSON at byte N: ..."), or the budget's
 * TSC_ERR_UNSUPPORTED naming WHERE; no tree is left then (*out is NULL).
 */
#ifndef TSC_JV_H
#define TSC_JV_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Containers nested deeper than this are refused (the parser recurses once per level). */
#define TSC_JV_MAX_DEPTH 64

typedef enum { TSC_JV_NULL = 0, TSC_JV_BOOL, TSC_JV_NUMBER, TSC_JV_STRING, TSC_JV_ARRAY, TSC_JV_OBJECT } tsc_jv_type_t;

/* How a NUMBER was written. */
typedef enum {
    TSC_JV_REAL = 0,   /* with a fraction or an exponent (or not a number): only num */
    TSC_JV_INT_EXACT,  /* an integer in [-2^63, 2^64): its magnitude exact in mag, its sign num's */
    TSC_JV_INT_BIG     /* an integer outside that range: num is rounded, no exact value */
} tsc_jv_int_kind_t;

typedef struct tsc_jv {
    tsc_jv_type_t type;
    tsc_jv_int_kind_t int_kind; /* NUMBER */
    double num;             /* NUMBER, BOOL (0/1); NaN for NULL */
    char *str;              /* STRING (UTF-8, NUL-terminated, no NUL inside) */
    size_t n;               /* ARRAY/OBJECT members */
    struct tsc_jv **items;  /* [n] */
    char **keys;            /* [n] (OBJECT), distinct */
    uint64_t mag;           /* NUMBER, int_kind TSC_JV_INT_EXACT: |value| */
    void *blocks_;          /* the root's: the memory the whole tree lives in (private) */
} tsc_jv_t;

/* Parses text[len] (no NUL needed); *out is the caller's (tsc_jv_free). where names the text in
 * messages. Errors as above; text is not modified. */
TSC_API tsc_status_t tsc_jv_parse(const char *text, size_t len, const char *where, tsc_jv_t **out);
/* The same for text that starts at byte base > 0 of the binary file where names (a header after a
 * length field): messages count bytes from the start of that file. */
TSC_API tsc_status_t tsc_jv_parse_at(const char *text, size_t len, const char *where, uint64_t base, tsc_jv_t **out);
/* tsc_read_file then tsc_jv_parse, path naming the document. */
TSC_API tsc_status_t tsc_jv_read_file(const char *path, tsc_jv_t **out);
/* Frees a document: v is the root a parse returned (NULL: a no-op; any other node: nothing, the
 * root owns the whole tree). */
TSC_API void tsc_jv_free(tsc_jv_t *v);

/* Member lookup; NULL when absent or of another type. path: "a.b.0.c" (numbers index arrays). */
TSC_API const tsc_jv_t *tsc_jv_get(const tsc_jv_t *v, const char *key);
TSC_API const tsc_jv_t *tsc_jv_at(const tsc_jv_t *v, size_t i);
TSC_API const tsc_jv_t *tsc_jv_path(const tsc_jv_t *v, const char *path);
TSC_API double tsc_jv_num(const tsc_jv_t *v, const char *path);       /* NaN when absent/null/not a number */
TSC_API const char *tsc_jv_str(const tsc_jv_t *v, const char *path);  /* NULL when absent */
TSC_API size_t tsc_jv_len(const tsc_jv_t *v, const char *path);       /* array length, 0 otherwise */
/* A number as an integer; dflt when absent, null, not finite or outside the range of long long.
 * An integer literal gives its exact value; a fraction is truncated toward zero. */
TSC_API long long tsc_jv_int(const tsc_jv_t *v, const char *path, long long dflt);
/* v (no path) as an exact unsigned 64-bit integer: NULL with *out set, or what v is instead, as a
 * phrase for a message ("a string, not a non-negative integer", "a fraction or an exponent, not an
 * integer", "a negative number", "an integer above 2^64 - 1"). Never rounds: a literal whose value
 * a double cannot hold is read from its digits or refused. */
TSC_API const char *tsc_jv_u64(const tsc_jv_t *v, uint64_t *out);

/* Reads a whole regular file into *buf (NUL-terminated, caller frees): tsc_file_read_text
 * (tsc_file.h), so FIFOs and devices are refused and the size is capped. TSC_ERR_IO names path. */
TSC_API tsc_status_t tsc_read_file(const char *path, char **buf, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
