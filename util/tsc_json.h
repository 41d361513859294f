/* tsc_json.h: a small JSON writer for summary.json and --json output.
 *
 * The writer builds the document in memory (keys appear in the order they are written, so the
 * output is deterministic), escapes strings per RFC 8259 (quote, backslash, control characters as
 * \uXXXX; well-formed UTF-8 passes through and every byte of malformed UTF-8 becomes U+FFFD, so
 * the document is valid UTF-8 whatever the strings held), prints doubles with 17
 * significant digits (they read back bit for bit), and writes NaN/Inf as null while counting them
 * and remembering the path of the first 16 ("steps[0].heads[3].o.max_rel") so the caller can add
 * a note (tsc_json_nonfinite_note). Errors (no memory, a key outside an object, unbalanced ends)
 * are sticky: later calls do nothing and tsc_json_status reports the first.
 *
 *   tsc_json_t j; tsc_json_init(&j);
 *   tsc_json_object_begin(&j);
 *   tsc_json_key(&j, "n_rows"); tsc_json_int(&j, 1024);
 *   tsc_json_key(&j, "bias"); tsc_json_number(&j, -0.19);
 *   tsc_json_object_end(&j); tsc_json_write_file(&j, "out/summary.json"); tsc_json_free(&j);
 */
#ifndef TSC_JSON_H
#define TSC_JSON_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSC_JSON_MAX_DEPTH 32
#define TSC_JSON_MAX_NOTES 16

typedef struct {
    int is_array;
    int64_t count;  /* members written so far */
    char key[64];   /* the current key (objects) for paths */
} tsc_json_frame_t;

typedef struct {
    char *buf;
    size_t len, cap;
    tsc_status_t status;
    int depth;
    int pending_key;                 /* a key was written, its value is due */
    int indent;                      /* spaces per level; 0 = compact */
    tsc_json_frame_t stack[TSC_JSON_MAX_DEPTH];
    int64_t n_nonfinite;             /* NaN/Inf numbers written as null */
    char nonfinite_paths[TSC_JSON_MAX_NOTES][160];
} tsc_json_t;

/* Starts an empty document (indent 2). Never fails (memory is allocated on first write). */
TSC_API void tsc_json_init(tsc_json_t *j);
/* Frees the buffer; tsc_json_free(NULL) is a no-op. */
TSC_API void tsc_json_free(tsc_json_t *j);
/* A writer on the heap, for bindings that must not depend on the struct's layout (ctypes,
 * cffi): every *_json(result, j) function of the library fills one, tsc_json_text reads it.
 * NULL when out of memory. tsc_json_delete frees it (NULL is a no-op). */
TSC_API tsc_json_t *tsc_json_new(void);
TSC_API void tsc_json_delete(tsc_json_t *j);
TSC_API void tsc_json_set_indent(tsc_json_t *j, int spaces);

TSC_API void tsc_json_object_begin(tsc_json_t *j);
TSC_API void tsc_json_object_end(tsc_json_t *j);
TSC_API void tsc_json_array_begin(tsc_json_t *j);
TSC_API void tsc_json_array_end(tsc_json_t *j);
/* A key inside an object; the next call writes its value. */
TSC_API void tsc_json_key(tsc_json_t *j, const char *key);
TSC_API void tsc_json_string(tsc_json_t *j, const char *s);  /* NULL writes null */
TSC_API void tsc_json_number(tsc_json_t *j, double v);        /* non-finite -> null, noted */
TSC_API void tsc_json_int(tsc_json_t *j, int64_t v);
TSC_API void tsc_json_bool(tsc_json_t *j, int v);
TSC_API void tsc_json_null(tsc_json_t *j);

/* key + value in one call. */
TSC_API void tsc_json_kv_string(tsc_json_t *j, const char *key, const char *s);
TSC_API void tsc_json_kv_number(tsc_json_t *j, const char *key, double v);
TSC_API void tsc_json_kv_int(tsc_json_t *j, const char *key, int64_t v);
TSC_API void tsc_json_kv_bool(tsc_json_t *j, const char *key, int v);
/* An array of n doubles / int64 under key. [n] */
TSC_API void tsc_json_kv_numbers(tsc_json_t *j, const char *key, const double *v, size_t n);
TSC_API void tsc_json_kv_ints(tsc_json_t *j, const char *key, const int64_t *v, size_t n);

/* Table-driven key/value runs: a table of a struct's members, written in order as key: value, so
 * that a run of kv calls over one struct is one table and one call.
 *   static const tsc_json_field_t f[] = {TSC_JSON_FIELD(tsc_err_summary_t, n, "n"),
 *                                        TSC_JSON_FIELD(tsc_err_summary_t, max_abs, "max_abs")};
 *   tsc_json_kv_fields(j, &e, f, TSC_JSON_NFIELDS(f));
 * TSC_JSON_FIELD picks the kind from the member's C type: int, long, long long, unsigned long
 * (size_t, uint64_t) are written as integers (tsc_json_int), double and float as a number
 * (tsc_json_number);
 * any other type does not compile. TSC_JSON_BOOL: an int written as true/false. TSC_JSON_STR: a
 * char * written as a string (NULL as null). TSC_JSON_CHARS: a char array written as a string.
 * TSC_JSON_TEXT: a char array written as a string, or null when it is empty. Members of nested structs may be named (st.a). C only (_Generic). */
typedef enum {
    TSC_JSON_F_INT, TSC_JSON_F_LONG, TSC_JSON_F_LLONG, TSC_JSON_F_ULONG, TSC_JSON_F_DOUBLE, TSC_JSON_F_FLOAT,
    TSC_JSON_F_BOOL, TSC_JSON_F_STR, TSC_JSON_F_CHARS, TSC_JSON_F_TEXT
} tsc_json_field_kind_t;

typedef struct {
    const char *key;
    int kind;       /* tsc_json_field_kind_t */
    size_t offset;  /* of the member in the struct */
} tsc_json_field_t;

#define TSC_JSON_MEMBER_(type, member) (((type *)0)->member)
#define TSC_JSON_FIELD(type, member, key)                                                                   \
    {key,                                                                                                   \
     _Generic(TSC_JSON_MEMBER_(type, member), int: TSC_JSON_F_INT, long: TSC_JSON_F_LONG,                  \
              long long: TSC_JSON_F_LLONG, unsigned long: TSC_JSON_F_ULONG, double: TSC_JSON_F_DOUBLE,      \
              float: TSC_JSON_F_FLOAT),                                                                   \
     offsetof(type, member)}
#define TSC_JSON_BOOL(type, member, key) \
    {key, _Generic(TSC_JSON_MEMBER_(type, member), int: TSC_JSON_F_BOOL), offsetof(type, member)}
#define TSC_JSON_STR(type, member, key)                                                                    \
    {key, _Generic(TSC_JSON_MEMBER_(type, member), char *: TSC_JSON_F_STR, const char *: TSC_JSON_F_STR), \
     offsetof(type, member)}
/* (a char * member, or an array no longer than a pointer, does not compile here) */
#define TSC_JSON_ARRAY_KIND_(type, member, kind)                                                   \
    (_Generic(TSC_JSON_MEMBER_(type, member), char *: kind) +                                      \
     0 * (int)sizeof(char[sizeof TSC_JSON_MEMBER_(type, member) > sizeof(char *) ? 1 : -1]))
#define TSC_JSON_CHARS(type, member, key) \
    {key, TSC_JSON_ARRAY_KIND_(type, member, TSC_JSON_F_CHARS), offsetof(type, member)}
#define TSC_JSON_TEXT(type, member, key) \
    {key, TSC_JSON_ARRAY_KIND_(type, member, TSC_JSON_F_TEXT), offsetof(type, member)}
#define TSC_JSON_NFIELDS(table) (sizeof(table) / sizeof((table)[0]))

/* Writes the n fields of table f from the struct at obj, in table order, into the current object. */
TSC_API void tsc_json_kv_fields(tsc_json_t *j, const void *obj, const tsc_json_field_t *f, size_t n);
/* key: {fields} (tsc_json_kv_fields inside an object of its own). */
TSC_API void tsc_json_kv_object(tsc_json_t *j, const char *key, const void *obj, const tsc_json_field_t *f,
                                size_t n);

/* Writes, as the value of the current key, the note object about non-finite numbers:
 * {"count": N, "written_as": "null", "first_paths": [...]} (count 0 and an empty list if none). */
TSC_API void tsc_json_nonfinite_note(tsc_json_t *j);

/* TSC_OK, or the first error (TSC_ERR_NOMEM, TSC_ERR_INTERNAL for misuse). */
TSC_API tsc_status_t tsc_json_status(const tsc_json_t *j);
/* The text so far (NUL-terminated; "" when empty). */
TSC_API const char *tsc_json_text(const tsc_json_t *j, size_t *len);
/* Writes the finished document (depth back to 0) to path atomically: a temporary file beside it,
 * then rename. TSC_ERR_INTERNAL if unfinished, TSC_ERR_IO naming the file on failure (the
 * temporary is removed; an old file at path is left untouched). */
TSC_API tsc_status_t tsc_json_write_file(const tsc_json_t *j, const char *path);

#ifdef __cplusplus
}
#endif
#endif
