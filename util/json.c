/* json.c: deterministic JSON writer with non-finite bookkeeping (tsc_json.h). */
#include "tsc_json.h"
#include "tsc_file.h"
#include "util_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void tsc_json_init(tsc_json_t *j) {
    memset(j, 0, sizeof *j);
    j->status = TSC_OK;
    j->indent = 2;
}

void tsc_json_free(tsc_json_t *j) {
    if (!j) return;
    free(j->buf);
    j->buf = NULL;
    j->len = j->cap = 0;
}

tsc_json_t *tsc_json_new(void) {
    tsc_json_t *j = malloc(sizeof *j);
    if (j) tsc_json_init(j);
    return j;
}

void tsc_json_delete(tsc_json_t *j) {
    if (!j) return;
    tsc_json_free(j);
    free(j);
}

void tsc_json_set_indent(tsc_json_t *j, int spaces) { j->indent = spaces < 0 ? 0 : spaces; }

static void put(tsc_json_t *j, const char *s, size_t n) {
    if (j->status != TSC_OK) return;
    if (j->len + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 4096;
        while (cap < j->len + n + 1) cap *= 2;
        char *b = realloc(j->buf, cap);
        if (!b) {
            j->status = tsc_error_set(TSC_ERR_NOMEM, "JSON writer: no memory for %zu bytes", cap);
            return;
        }
        j->buf = b;
        j->cap = cap;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

static void puts_(tsc_json_t *j, const char *s) { put(j, s, strlen(s)); }

static void newline(tsc_json_t *j) {
    if (!j->indent) return;
    put(j, "\n", 1);
    for (int i = 0; i < j->depth * j->indent; i++) put(j, " ", 1);
}

static void misuse(tsc_json_t *j, const char *what) {
    if (j->status == TSC_OK) j->status = tsc_error_set(TSC_ERR_INTERNAL, "JSON writer misuse: %s", what);
}

/* Before any value: separators and indentation, and the array index for paths. */
static void before_value(tsc_json_t *j) {
    if (j->status != TSC_OK) return;
    if (j->depth == 0) {
        if (j->len) misuse(j, "second top-level value");
        return;
    }
    tsc_json_frame_t *f = &j->stack[j->depth - 1];
    if (f->is_array) {
        if (f->count++) put(j, ",", 1);
        newline(j);
    } else {
        if (!j->pending_key) misuse(j, "a value in an object without a key");
        j->pending_key = 0;
    }
}

static void begin(tsc_json_t *j, int is_array) {
    before_value(j);
    if (j->status != TSC_OK) return;
    if (j->depth >= TSC_JSON_MAX_DEPTH) {
        misuse(j, "nesting deeper than TSC_JSON_MAX_DEPTH");
        return;
    }
    put(j, is_array ? "[" : "{", 1);
    tsc_json_frame_t *f = &j->stack[j->depth++];
    f->is_array = is_array;
    f->count = 0;
    f->key[0] = '\0';
}

static void end(tsc_json_t *j, int is_array) {
    if (j->status != TSC_OK) return;
    if (j->depth == 0 || j->stack[j->depth - 1].is_array != is_array || j->pending_key) {
        misuse(j, is_array ? "unbalanced array end" : "unbalanced object end");
        return;
    }
    int had = j->stack[j->depth - 1].count > 0;
    j->depth--;
    if (had) newline(j);
    put(j, is_array ? "]" : "}", 1);
}

void tsc_json_object_begin(tsc_json_t *j) { begin(j, 0); }
void tsc_json_object_end(tsc_json_t *j) { end(j, 0); }
void tsc_json_array_begin(tsc_json_t *j) { begin(j, 1); }
void tsc_json_array_end(tsc_json_t *j) { end(j, 1); }

/* Writes s as a JSON string: quotes, backslashes and control characters escaped, and every byte
 * that is not part of well-formed UTF-8 replaced by U+FFFD, so the output is always valid UTF-8
 * (strings from files, such as HDF5 attributes, may hold anything). */
static void put_escaped(tsc_json_t *j, const char *s) {
    put(j, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p >= 0x80) {
            int n = tsc_utf8_len(p, 4); /* a NUL fails the byte it is in: no read past it */
            if (n) {
                put(j, (const char *)p, (size_t)n);
                p += n - 1;
            } else {
                puts_(j, "\xef\xbf\xbd");
            }
            continue;
        }
        char tmp[8];
        switch (*p) {
        case '"': puts_(j, "\\\""); break;
        case '\\': puts_(j, "\\\\"); break;
        case '\n': puts_(j, "\\n"); break;
        case '\r': puts_(j, "\\r"); break;
        case '\t': puts_(j, "\\t"); break;
        case '\b': puts_(j, "\\b"); break;
        case '\f': puts_(j, "\\f"); break;
        default:
            if (*p < 0x20 || *p == 0x7f) {
                snprintf(tmp, sizeof tmp, "\\u%04x", *p);
                puts_(j, tmp);
            } else {
                put(j, (const char *)p, 1);
            }
        }
    }
    put(j, "\"", 1);
}

void tsc_json_key(tsc_json_t *j, const char *key) {
    if (j->status != TSC_OK) return;
    if (j->depth == 0 || j->stack[j->depth - 1].is_array || j->pending_key) {
        misuse(j, "a key outside an object or twice in a row");
        return;
    }
    tsc_json_frame_t *f = &j->stack[j->depth - 1];
    if (f->count++) put(j, ",", 1);
    newline(j);
    put_escaped(j, key);
    put(j, j->indent ? ": " : ":", j->indent ? 2 : 1);
    snprintf(f->key, sizeof f->key, "%s", key);
    j->pending_key = 1;
}

void tsc_json_string(tsc_json_t *j, const char *s) {
    before_value(j);
    if (s) put_escaped(j, s);
    else puts_(j, "null");
}

/* The path of the value being written: keys joined by '.', array indices in brackets. */
static void current_path(const tsc_json_t *j, char *out, size_t cap) {
    size_t n = 0;
    out[0] = '\0';
    for (int d = 0; d < j->depth && n < cap; d++) {
        const tsc_json_frame_t *f = &j->stack[d];
        int w;
        if (f->is_array) w = snprintf(out + n, cap - n, "[%" PRId64 "]", f->count - 1);
        else w = snprintf(out + n, cap - n, "%s%s", n ? "." : "", f->key);
        if (w < 0) break;
        n += (size_t)w;
    }
}

void tsc_json_number(tsc_json_t *j, double v) {
    before_value(j);
    if (!isfinite(v)) {
        if (j->n_nonfinite < TSC_JSON_MAX_NOTES) { /* built apart: the path's keys live in j too */
            char path[sizeof j->nonfinite_paths[0]];
            current_path(j, path, sizeof path);
            memcpy(j->nonfinite_paths[j->n_nonfinite], path, sizeof path);
        }
        j->n_nonfinite++;
        puts_(j, "null");
        return;
    }
    char tmp[40];
    if (v == 0.0) v = 0.0; /* -0 prints as 0 */
    if (v == floor(v) && fabs(v) < 1e15) snprintf(tmp, sizeof tmp, "%.1f", v);
    else snprintf(tmp, sizeof tmp, "%.17g", v);
    puts_(j, tmp);
}

void tsc_json_int(tsc_json_t *j, int64_t v) {
    before_value(j);
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%" PRId64, v);
    puts_(j, tmp);
}

void tsc_json_bool(tsc_json_t *j, int v) {
    before_value(j);
    puts_(j, v ? "true" : "false");
}

void tsc_json_null(tsc_json_t *j) {
    before_value(j);
    puts_(j, "null");
}

void tsc_json_kv_string(tsc_json_t *j, const char *key, const char *s) { tsc_json_key(j, key); tsc_json_string(j, s); }
void tsc_json_kv_number(tsc_json_t *j, const char *key, double v) { tsc_json_key(j, key); tsc_json_number(j, v); }
void tsc_json_kv_int(tsc_json_t *j, const char *key, int64_t v) { tsc_json_key(j, key); tsc_json_int(j, v); }
void tsc_json_kv_bool(tsc_json_t *j, const char *key, int v) { tsc_json_key(j, key); tsc_json_bool(j, v); }

void tsc_json_kv_numbers(tsc_json_t *j, const char *key, const double *v, size_t n) {
    tsc_json_key(j, key);
    int ind = j->indent;
    tsc_json_array_begin(j);
    j->indent = 0; /* numeric arrays on one line */
    for (size_t i = 0; i < n; i++) tsc_json_number(j, v[i]);
    tsc_json_array_end(j);
    j->indent = ind;
}

void tsc_json_kv_ints(tsc_json_t *j, const char *key, const int64_t *v, size_t n) {
    tsc_json_key(j, key);
    int ind = j->indent;
    tsc_json_array_begin(j);
    j->indent = 0;
    for (size_t i = 0; i < n; i++) tsc_json_int(j, v[i]);
    tsc_json_array_end(j);
    j->indent = ind;
}

void tsc_json_kv_fields(tsc_json_t *j, const void *obj, const tsc_json_field_t *f, size_t n) {
    const char *base = obj;
    for (size_t i = 0; i < n; i++) {
        const char *m = base + f[i].offset;
        int iv;
        long lv;
        long long llv;
        unsigned long ulv;
        double dv;
        float fv;
        const char *sv;
        tsc_json_key(j, f[i].key);
        switch (f[i].kind) {
        case TSC_JSON_F_INT: memcpy(&iv, m, sizeof iv), tsc_json_int(j, iv); break;
        case TSC_JSON_F_LONG: memcpy(&lv, m, sizeof lv), tsc_json_int(j, lv); break;
        case TSC_JSON_F_LLONG: memcpy(&llv, m, sizeof llv), tsc_json_int(j, llv); break;
        case TSC_JSON_F_ULONG: memcpy(&ulv, m, sizeof ulv), tsc_json_int(j, (int64_t)ulv); break;
        case TSC_JSON_F_DOUBLE: memcpy(&dv, m, sizeof dv), tsc_json_number(j, dv); break;
        case TSC_JSON_F_FLOAT: memcpy(&fv, m, sizeof fv), tsc_json_number(j, fv); break;
        case TSC_JSON_F_BOOL: memcpy(&iv, m, sizeof iv), tsc_json_bool(j, iv); break;
        case TSC_JSON_F_STR: memcpy(&sv, m, sizeof sv), tsc_json_string(j, sv); break;
        case TSC_JSON_F_CHARS: tsc_json_string(j, m); break;
        case TSC_JSON_F_TEXT: tsc_json_string(j, m[0] ? m : NULL); break;
        default: misuse(j, "unknown field kind"); return;
        }
    }
}

void tsc_json_kv_object(tsc_json_t *j, const char *key, const void *obj, const tsc_json_field_t *f, size_t n) {
    tsc_json_key(j, key);
    tsc_json_object_begin(j);
    tsc_json_kv_fields(j, obj, f, n);
    tsc_json_object_end(j);
}

void tsc_json_nonfinite_note(tsc_json_t *j) {
    int64_t n = j->n_nonfinite;
    tsc_json_object_begin(j);
    tsc_json_kv_int(j, "count", n);
    tsc_json_kv_string(j, "written_as", "null");
    tsc_json_key(j, "first_paths");
    tsc_json_array_begin(j);
    for (int64_t i = 0; i < n && i < TSC_JSON_MAX_NOTES; i++) tsc_json_string(j, j->nonfinite_paths[i]);
    tsc_json_array_end(j);
    tsc_json_object_end(j);
}

tsc_status_t tsc_json_status(const tsc_json_t *j) { return j->status; }

const char *tsc_json_text(const tsc_json_t *j, size_t *len) {
    if (len) *len = j->len;
    return j->buf ? j->buf : "";
}

tsc_status_t tsc_json_write_file(const tsc_json_t *j, const char *path) {
    if (j->status != TSC_OK) return tsc_error_set(j->status, "%s: not written: the JSON writer failed earlier", path);
    if (j->depth != 0 || j->len == 0)
        return tsc_error_set(TSC_ERR_INTERNAL, "%s: not written: the JSON document is unfinished", path);
    return tsc_out_write_parts(path, j->buf, j->len, "\n", 1);
}
