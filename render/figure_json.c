/* figure_json.c: a small JSON reader (RFC 8259) for summary.json: parses a document into a tree
 * of tsc_jv_t nodes (tsc_figure.h). Strings are decoded (\uXXXX to UTF-8, surrogate pairs
 * joined); numbers are doubles (strtod, so 17-digit values read back bit for bit). */
#include "tsc_figure.h"
#include "tsc_file.h"
#include "tsc_strbuf.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *s, *e, *where;
    const char *start;
    int depth;
} jp_t;

static tsc_status_t jerr(jp_t *p, const char *what) {
    /* the line of the error, for a human looking at the file */
    long line = 1;
    for (const char *c = p->start; c < p->s; c++) line += *c == '\n';
    return tsc_error_set(TSC_ERR_FORMAT, "%s:%ld: invalid JSON: %s", p->where, line, what);
}

static void ws(jp_t *p) {
    while (p->s < p->e && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')) p->s++;
}

void tsc_jv_free(tsc_jv_t *v) {
    if (!v) return;
    for (size_t i = 0; i < v->n; i++) {
        tsc_jv_free(v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    free(v);
}

static int put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 63)); o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 63));
    o[2] = (char)(0x80 | ((cp >> 6) & 63)); o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

static int hex4(const char *s, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int c = s[i], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return -1;
        v = v * 16 + (unsigned)d;
    }
    *out = v;
    return 0;
}

static tsc_status_t parse_string(jp_t *p, char **out) {
    p->s++; /* opening quote */
    const char *b = p->s;
    size_t cap = 16;
    for (const char *c = b; c < p->e && *c != '"'; c++, cap++) if (*c == '\\') c++;
    char *o = malloc(cap + 4), *w = o;
    if (!o) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", p->where);
    while (p->s < p->e && *p->s != '"') {
        unsigned char c = (unsigned char)*p->s;
        if (c < 0x20) { free(o); return jerr(p, "control character in a string"); }
        if (c != '\\') { *w++ = (char)c; p->s++; continue; }
        if (p->s + 1 >= p->e) break;
        char esc = p->s[1];
        p->s += 2;
        switch (esc) {
        case '"': *w++ = '"'; break;
        case '\\': *w++ = '\\'; break;
        case '/': *w++ = '/'; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'n': *w++ = '\n'; break;
        case 'r': *w++ = '\r'; break;
        case 't': *w++ = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (p->e - p->s < 4 || hex4(p->s, &cp)) { free(o); return jerr(p, "bad \\u escape"); }
            p->s += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && p->e - p->s >= 6 && p->s[0] == '\\' && p->s[1] == 'u' &&
                !hex4(p->s + 2, &lo) && lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                p->s += 6;
            }
            w += put_utf8(w, cp);
            break;
        }
        default: free(o); return jerr(p, "bad escape in a string");
        }
    }
    if (p->s >= p->e) { free(o); return jerr(p, "unterminated string"); }
    p->s++;
    *w = 0;
    *out = o;
    return TSC_OK;
}

static tsc_status_t parse_value(jp_t *p, tsc_jv_t **out);

static tsc_status_t push(tsc_jv_t *v, tsc_jv_t *item, char *key, size_t *cap, const char *where) {
    if (v->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        tsc_jv_t **ni = realloc(v->items, nc * sizeof *ni);
        if (!ni) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", where);
        v->items = ni;
        if (v->type == TSC_JV_OBJECT) {
            char **nk = realloc(v->keys, nc * sizeof *nk);
            if (!nk) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", where);
            v->keys = nk;
        }
        *cap = nc;
    }
    v->items[v->n] = item;
    if (v->type == TSC_JV_OBJECT) v->keys[v->n] = key;
    v->n++;
    return TSC_OK;
}

static tsc_status_t parse_value(jp_t *p, tsc_jv_t **out) {
    ws(p);
    *out = NULL;
    if (p->s >= p->e) return jerr(p, "unexpected end of input");
    tsc_jv_t *v = calloc(1, sizeof *v);
    if (!v) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", p->where);
    tsc_status_t st = TSC_OK;
    char c = *p->s;
    if (c == '{' || c == '[') {
        if (++p->depth > 64) { free(v); return jerr(p, "nesting deeper than 64"); }
        v->type = c == '{' ? TSC_JV_OBJECT : TSC_JV_ARRAY;
        char close = c == '{' ? '}' : ']';
        size_t cap = 0;
        p->s++;
        ws(p);
        if (p->s < p->e && *p->s == close) {
            p->s++;
        } else {
            for (;;) {
                char *key = NULL;
                ws(p);
                if (v->type == TSC_JV_OBJECT) {
                    if (p->s >= p->e || *p->s != '"') { st = jerr(p, "expected a key string"); break; }
                    if ((st = parse_string(p, &key)) != TSC_OK) break;
                    ws(p);
                    if (p->s >= p->e || *p->s != ':') { free(key); st = jerr(p, "expected ':'"); break; }
                    p->s++;
                }
                tsc_jv_t *item;
                if ((st = parse_value(p, &item)) != TSC_OK) { free(key); break; }
                if ((st = push(v, item, key, &cap, p->where)) != TSC_OK) { free(key); tsc_jv_free(item); break; }
                ws(p);
                if (p->s < p->e && *p->s == ',') { p->s++; continue; }
                if (p->s < p->e && *p->s == close) { p->s++; break; }
                st = jerr(p, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
                break;
            }
        }
        p->depth--;
    } else if (c == '"') {
        v->type = TSC_JV_STRING;
        st = parse_string(p, &v->str);
    } else if (c == 't' && p->e - p->s >= 4 && !strncmp(p->s, "true", 4)) {
        v->type = TSC_JV_BOOL, v->num = 1, p->s += 4;
    } else if (c == 'f' && p->e - p->s >= 5 && !strncmp(p->s, "false", 5)) {
        v->type = TSC_JV_BOOL, v->num = 0, p->s += 5;
    } else if (c == 'n' && p->e - p->s >= 4 && !strncmp(p->s, "null", 4)) {
        v->type = TSC_JV_NULL, v->num = NAN, p->s += 4;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        char buf[64];
        size_t n = 0;
        while (p->s + n < p->e && n < sizeof buf - 1 && strchr("+-0123456789.eE", p->s[n])) n++;
        memcpy(buf, p->s, n);
        buf[n] = 0;
        char *end;
        v->type = TSC_JV_NUMBER;
        v->num = strtod(buf, &end);
        if (end != buf + n) st = jerr(p, "bad number");
        p->s += n;
    } else {
        st = jerr(p, "unexpected character");
    }
    if (st != TSC_OK) { tsc_jv_free(v); return st; }
    *out = v;
    return TSC_OK;
}

tsc_status_t tsc_jv_parse(const char *text, size_t len, const char *where, tsc_jv_t **out) {
    if (!text || !out) return tsc_error_set(TSC_ERR_ARG, "tsc_jv_parse: NULL argument");
    jp_t p = {text, text + len, where ? where : "<json>", text, 0};
    tsc_status_t st = parse_value(&p, out);
    if (st != TSC_OK) return st;
    ws(&p);
    if (p.s != p.e) {
        tsc_jv_free(*out);
        *out = NULL;
        return jerr(&p, "trailing characters after the document");
    }
    return TSC_OK;
}

tsc_status_t tsc_read_file(const char *path, char **buf, size_t *len) {
    /* regular files only (a FIFO would block forever), at most tsc_file_text_limit() bytes */
    return tsc_file_read_text(path, buf, len);
}

tsc_status_t tsc_jv_read_file(const char *path, tsc_jv_t **out) {
    char *buf;
    size_t len;
    *out = NULL;
    tsc_status_t st = tsc_read_file(path, &buf, &len);
    if (st != TSC_OK) return st;
    st = tsc_jv_parse(buf, len, path, out);
    free(buf);
    return st;
}

const tsc_jv_t *tsc_jv_get(const tsc_jv_t *v, const char *key) {
    if (!v || v->type != TSC_JV_OBJECT) return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->keys[i], key) == 0) return v->items[i];
    return NULL;
}

const tsc_jv_t *tsc_jv_at(const tsc_jv_t *v, size_t i) {
    if (!v || (v->type != TSC_JV_ARRAY && v->type != TSC_JV_OBJECT) || i >= v->n) return NULL;
    return v->items[i];
}

const tsc_jv_t *tsc_jv_path(const tsc_jv_t *v, const char *path) {
    char seg[96];
    while (v && path && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        if (n >= sizeof seg) return NULL;
        memcpy(seg, path, n);
        seg[n] = 0;
        if (v->type == TSC_JV_ARRAY && isdigit((unsigned char)seg[0])) v = tsc_jv_at(v, (size_t)strtoul(seg, NULL, 10));
        else v = tsc_jv_get(v, seg);
        path = dot ? dot + 1 : NULL;
    }
    return v;
}

double tsc_jv_num(const tsc_jv_t *v, const char *path) {
    v = path ? tsc_jv_path(v, path) : v;
    return v && (v->type == TSC_JV_NUMBER || v->type == TSC_JV_BOOL) ? v->num : NAN;
}

const char *tsc_jv_str(const tsc_jv_t *v, const char *path) {
    v = path ? tsc_jv_path(v, path) : v;
    return v && v->type == TSC_JV_STRING ? v->str : NULL;
}

size_t tsc_jv_len(const tsc_jv_t *v, const char *path) {
    v = path ? tsc_jv_path(v, path) : v;
    return v && v->type == TSC_JV_ARRAY ? v->n : 0;
}

long long tsc_jv_int(const tsc_jv_t *v, const char *path, long long dflt) {
    double x = tsc_jv_num(v, path);
    /* converting NaN or an out-of-range double to an integer is undefined behaviour: check first */
    if (!isfinite(x) || x < -9.2e18 || x > 9.2e18) return dflt;
    return (long long)x;
}
