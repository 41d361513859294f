/* jv.c: the JSON reader (tsc_jv.h). One recursive-descent pass builds the tree; nodes, member
 * arrays and strings are cut from a few large blocks the root owns (one free for the document,
 * and the memory budget counted exactly as the tree grows). Members of the open containers wait
 * on one scratch stack and are copied into an array of their exact count when the container
 * closes, so no array is ever grown in place. */
#include "tsc_jv.h"
#include "tsc_file.h"
#include "tsc_mem.h"
#include "util_internal.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Blocks start small (a summary.json is tens of KiB) and double up to 1 MiB. */
#define BLOCK_MIN (16u * 1024)
#define BLOCK_MAX (1024u * 1024)
/* Objects with more keys than this are checked for a repeated key by sorting, fewer pairwise. */
#define PAIRWISE_KEYS 8

/* The cost per value tsc_jv.h states (a 64-bit build): a node of 64 bytes and a pointer. */
_Static_assert(sizeof(void *) != 8 || sizeof(tsc_jv_t) == 64, "tsc_jv_t grew: update tsc_jv.h's memory note");

typedef struct blk {
    struct blk *next;
    size_t used, cap;
    double data[]; /* 8-byte aligned: every piece is a multiple of 8 bytes */
} blk_t;

typedef struct {
    const char *s, *e, *start, *where;
    uint64_t base;       /* text[0]'s offset in its file */
    int depth;
    blk_t *blocks;       /* newest first */
    size_t n_blocks;
    uint64_t bytes, budget;
    tsc_jv_t **stk;      /* [cap] members of the open containers */
    char **kstk;         /* [cap] their keys (objects) */
    size_t top, cap;
} jp_t;

/* "WHERE:LINE: malformed JSON at byte N: what" (the line for an editor); a text inside a binary
 * file (base > 0) has no lines worth counting, only its byte in the file. */
static tsc_status_t jerr_at(const jp_t *p, const char *at, const char *what) {
    unsigned long long byte = p->base + (uint64_t)(at - p->start);
    if (p->base) return tsc_error_set(TSC_ERR_FORMAT, "%s: malformed JSON at byte %llu: %s", p->where, byte, what);
    long line = 1;
    for (const char *c = p->start; c < at; c++) line += *c == '\n';
    return tsc_error_set(TSC_ERR_FORMAT, "%s:%ld: malformed JSON at byte %llu: %s", p->where, line, byte, what);
}

static tsc_status_t jerr(const jp_t *p, const char *what) { return jerr_at(p, p->s, what); }

static void ws(jp_t *p) {
    while (p->s < p->e && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')) p->s++;
}

/* Counts n more bytes against the memory budget (read once per document). */
static tsc_status_t charge(jp_t *p, size_t n) {
    p->bytes += n;
    if (p->bytes <= p->budget) return TSC_OK;
    char what[320];
    snprintf(what, sizeof what, "the JSON tree of %s", p->where);
    return tsc_mem_check(p->bytes, what);
}

static tsc_status_t jalloc(jp_t *p, size_t n, void **out) {
    n = (n + 7) & ~(size_t)7;
    blk_t *b = p->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = p->n_blocks < 7 ? (size_t)BLOCK_MIN << p->n_blocks : BLOCK_MAX;
        if (cap < n) cap = n;
        tsc_status_t st = charge(p, sizeof *b + cap);
        if (st) return st;
        if (!(b = malloc(sizeof *b + cap))) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory reading JSON", p->where);
        b->next = p->blocks, b->used = 0, b->cap = cap;
        p->blocks = b, p->n_blocks++;
    }
    *out = (char *)b->data + b->used;
    b->used += n;
    return TSC_OK;
}

/* Gives back the tail of the newest piece (a string sized for its escapes before decoding). */
static void jshrink(jp_t *p, void *piece, size_t had, size_t need) {
    had = (had + 7) & ~(size_t)7, need = (need + 7) & ~(size_t)7;
    blk_t *b = p->blocks;
    if ((char *)piece + had == (char *)b->data + b->used) b->used -= had - need;
}

static void free_blocks(blk_t *b) {
    while (b) {
        blk_t *next = b->next;
        free(b);
        b = next;
    }
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

/* One \uXXXX escape (a surrogate pair: two) at p->s into o; the number of bytes written, 0 on error. */
static int unicode_escape(jp_t *p, char *o, tsc_status_t *st) {
    unsigned cp, lo;
    if (p->e - p->s < 6 || hex4(p->s + 2, &cp)) return *st = jerr(p, "a bad \\u escape in a string"), 0;
    if (cp == 0) return *st = jerr(p, "a NUL character (\\u0000) in a string"), 0;
    if (cp >= 0xDC00 && cp < 0xE000) return *st = jerr(p, "a lone low surrogate in a string"), 0;
    if (cp >= 0xD800 && cp < 0xDC00) {
        if (p->e - p->s < 12 || p->s[6] != '\\' || p->s[7] != 'u' || hex4(p->s + 8, &lo) || lo < 0xDC00 || lo >= 0xE000)
            return *st = jerr(p, "a high surrogate without its low half in a string"), 0;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        p->s += 6;
    }
    p->s += 6;
    return put_utf8(o, cp);
}

static tsc_status_t parse_string(jp_t *p, char **out) {
    p->s++; /* the opening quote */
    /* The text is at most as long as its source up to the closing quote: sized from that, not
     * from the rest of the document (which would cost memory quadratic in a list of names). */
    const char *close = p->s;
    while (close < p->e && *close != '"') close += *close == '\\' && close + 1 < p->e ? 2 : 1;
    size_t cap = (size_t)(close - p->s) + 1;
    char *o, *w;
    tsc_status_t st = jalloc(p, cap, (void **)&o);
    if (st) return st;
    for (w = o; p->s < p->e && *p->s != '"';) {
        unsigned char c = (unsigned char)*p->s;
        if (c < 0x20) return jerr(p, "a control character in a string");
        if (c != '\\') {
            int n = tsc_utf8_len((const unsigned char *)p->s, (size_t)(p->e - p->s));
            if (!n) return jerr(p, "a string that is not valid UTF-8");
            memcpy(w, p->s, (size_t)n), w += n, p->s += n;
            continue;
        }
        if (p->e - p->s < 2) return jerr(p, "an unterminated string");
        static const char esc[] = "\"\"\\\\//b\bf\fn\nr\rt\t";
        const char *m = strchr(esc, p->s[1]);
        if (p->s[1] && m && (m - esc) % 2 == 0) {
            *w++ = m[1], p->s += 2;
        } else if (p->s[1] == 'u') {
            int n = unicode_escape(p, w, &st);
            if (!n) return st;
            w += n;
        } else {
            return jerr(p, "a bad escape in a string");
        }
    }
    if (p->s >= p->e) return jerr(p, "an unterminated string");
    p->s++;
    *w = '\0';
    jshrink(p, o, cap, (size_t)(w - o) + 1);
    *out = o;
    return TSC_OK;
}

static int digit(const jp_t *p, const char *s) { return s < p->e && *s >= '0' && *s <= '9'; }

/* RFC 8259's number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?; an integer keeps its digits. */
static tsc_status_t parse_number(jp_t *p, tsc_jv_t *v) {
    const char *b = p->s, *s = p->s + (*p->s == '-');
    if (!digit(p, s)) return jerr(p, "a bad number ('-' without digits)");
    const char *d0 = s;
    if (*s == '0' && digit(p, s + 1)) return jerr(p, "a number with a leading zero");
    while (digit(p, s)) s++;
    const char *d1 = s;
    int real = 0;
    if (s < p->e && *s == '.') {
        if (!digit(p, ++s)) return jerr_at(p, s, "a bad number (no digit after '.')");
        while (digit(p, s)) s++;
        real = 1;
    }
    if (s < p->e && (*s == 'e' || *s == 'E')) {
        s++;
        if (s < p->e && (*s == '+' || *s == '-')) s++;
        if (!digit(p, s)) return jerr_at(p, s, "a bad number (no digit in the exponent)");
        while (digit(p, s)) s++;
        real = 1;
    }
    size_t n = (size_t)(s - b);
    char buf[64], *t = n < sizeof buf ? buf : malloc(n + 1);
    if (!t) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory reading JSON", p->where);
    memcpy(t, b, n);
    t[n] = '\0';
    v->type = TSC_JV_NUMBER;
    v->num = strtod(t, NULL); /* the grammar above is a subset of strtod's */
    if (t != buf) free(t);
    if (!real) {
        uint64_t m = 0;
        int big = 0;
        for (const char *q = d0; q < d1 && !big; q++) {
            unsigned dd = (unsigned)(*q - '0');
            if (m > (UINT64_MAX - dd) / 10) big = 1;
            else m = m * 10 + dd;
        }
        if (*b == '-' && m > (UINT64_C(1) << 63)) big = 1;
        v->int_kind = big ? TSC_JV_INT_BIG : TSC_JV_INT_EXACT;
        v->mag = big ? 0 : m;
    }
    p->s = s;
    return TSC_OK;
}

static tsc_status_t push(jp_t *p, tsc_jv_t *item, char *key) {
    if (p->top == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        tsc_status_t st = charge(p, (cap - p->cap) * (sizeof *p->stk + sizeof *p->kstk));
        if (st) return st;
        tsc_jv_t **s = realloc(p->stk, cap * sizeof *s);
        if (s) p->stk = s;
        char **k = s ? realloc(p->kstk, cap * sizeof *k) : NULL;
        if (!k) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory reading JSON", p->where);
        p->kstk = k, p->cap = cap;
    }
    p->stk[p->top] = item;
    p->kstk[p->top++] = key;
    return TSC_OK;
}

static int cmp_key(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The key an object names twice, or NULL. */
static const char *repeated_key(char **k, size_t n, tsc_status_t *st, const jp_t *p) {
    if (n <= PAIRWISE_KEYS) {
        for (size_t i = 1; i < n; i++)
            for (size_t j = 0; j < i; j++)
                if (!strcmp(k[i], k[j])) return k[i];
        return NULL;
    }
    char **s = malloc(n * sizeof *s);
    if (!s) return *st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory reading JSON", p->where), NULL;
    memcpy(s, k, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_key);
    const char *dup = NULL;
    for (size_t i = 1; i < n && !dup; i++)
        if (!strcmp(s[i], s[i - 1])) dup = s[i];
    free(s);
    return dup;
}

/* Moves the members pushed since base into v (arrays of their exact count); an object's keys
 * must be distinct. open: where v starts, for the message. */
static tsc_status_t seal(jp_t *p, tsc_jv_t *v, size_t base, const char *open) {
    size_t n = p->top - base;
    tsc_status_t st = TSC_OK;
    if (!n) return TSC_OK;
    if (v->type == TSC_JV_OBJECT) {
        const char *dup = repeated_key(p->kstk + base, n, &st, p);
        if (st) return st;
        if (dup) {
            char what[160];
            int len = (int)strnlen(dup, 60);
            while (len > 0 && dup[len] && ((unsigned char)dup[len] & 0xC0) == 0x80) len--; /* whole characters */
            snprintf(what, sizeof what, "the key '%.*s%s' is named twice in the object here", len, dup, dup[len] ? "..." : "");
            return jerr_at(p, open, what);
        }
        if ((st = jalloc(p, n * sizeof *v->keys, (void **)&v->keys))) return st;
        memcpy(v->keys, p->kstk + base, n * sizeof *v->keys);
    }
    if ((st = jalloc(p, n * sizeof *v->items, (void **)&v->items))) return st;
    memcpy(v->items, p->stk + base, n * sizeof *v->items);
    v->n = n;
    return TSC_OK;
}

static tsc_status_t parse_value(jp_t *p, tsc_jv_t **out);

static tsc_status_t parse_container(jp_t *p, tsc_jv_t *v) {
    const char *open = p->s;
    int obj = *p->s == '{';
    char close = obj ? '}' : ']';
    if (++p->depth > TSC_JV_MAX_DEPTH) return jerr(p, "arrays and objects nested deeper than 64");
    v->type = obj ? TSC_JV_OBJECT : TSC_JV_ARRAY;
    size_t base = p->top;
    tsc_status_t st = TSC_OK;
    p->s++;
    ws(p);
    if (p->s < p->e && *p->s == close) {
        p->s++;
    } else {
        for (;;) {
            char *key = NULL;
            tsc_jv_t *item;
            ws(p);
            if (obj) {
                if (p->s >= p->e || *p->s != '"') { st = jerr(p, "expected a key string"); break; }
                if ((st = parse_string(p, &key))) break;
                ws(p);
                if (p->s >= p->e || *p->s != ':') { st = jerr(p, "expected ':'"); break; }
                p->s++;
            }
            if ((st = parse_value(p, &item)) || (st = push(p, item, key))) break;
            ws(p);
            if (p->s < p->e && *p->s == ',') { p->s++; continue; }
            if (p->s < p->e && *p->s == close) { p->s++; break; }
            st = jerr(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
            break;
        }
    }
    if (!st) st = seal(p, v, base, open);
    p->top = base;
    p->depth--;
    return st;
}

static int literal(jp_t *p, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(p->e - p->s) < n || memcmp(p->s, word, n)) return 0;
    p->s += n;
    return 1;
}

/* Pieces of a failed parse need no freeing: they are in the blocks, freed with them. */
static tsc_status_t parse_value(jp_t *p, tsc_jv_t **out) {
    ws(p);
    if (p->s >= p->e) return jerr(p, "unexpected end of input");
    tsc_jv_t *v;
    tsc_status_t st = jalloc(p, sizeof *v, (void **)&v);
    if (st) return st;
    memset(v, 0, sizeof *v);
    *out = v;
    char c = *p->s;
    if (c == '{' || c == '[') return parse_container(p, v);
    if (c == '"') return v->type = TSC_JV_STRING, parse_string(p, &v->str);
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, v);
    if (literal(p, "true")) return v->type = TSC_JV_BOOL, v->num = 1, TSC_OK;
    if (literal(p, "false")) return v->type = TSC_JV_BOOL, v->num = 0, TSC_OK;
    if (literal(p, "null")) return v->type = TSC_JV_NULL, v->num = NAN, TSC_OK;
    return jerr(p, "unexpected character");
}

tsc_status_t tsc_jv_parse_at(const char *text, size_t len, const char *where, uint64_t base, tsc_jv_t **out) {
    if (out) *out = NULL;
    if (!text || !out) return tsc_error_set(TSC_ERR_ARG, "tsc_jv_parse: NULL argument");
    jp_t p = {.s = text, .e = text + len, .start = text, .where = where ? where : "<json>", .base = base};
    p.budget = tsc_mem_budget();
    tsc_jv_t *root;
    tsc_status_t st = parse_value(&p, &root);
    if (!st) {
        ws(&p);
        if (p.s != p.e) st = jerr(&p, "trailing characters after the document");
    }
    free(p.stk);
    free(p.kstk);
    if (st) {
        free_blocks(p.blocks);
        return st;
    }
    root->blocks_ = p.blocks;
    *out = root;
    return TSC_OK;
}

tsc_status_t tsc_jv_parse(const char *text, size_t len, const char *where, tsc_jv_t **out) {
    return tsc_jv_parse_at(text, len, where, 0, out);
}

void tsc_jv_free(tsc_jv_t *v) {
    if (v) free_blocks(v->blocks_);
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
    v = path ? tsc_jv_path(v, path) : v;
    if (v && v->type == TSC_JV_NUMBER && v->int_kind != TSC_JV_REAL) {
        if (v->int_kind == TSC_JV_INT_BIG) return dflt;
        if (!signbit(v->num)) return v->mag <= (uint64_t)LLONG_MAX ? (long long)v->mag : dflt;
        return v->mag == UINT64_C(1) << 63 ? LLONG_MIN : -(long long)v->mag;
    }
    double x = tsc_jv_num(v, NULL);
    /* converting NaN or an out-of-range double to an integer is undefined behaviour: check first */
    if (!isfinite(x) || x < -9.2e18 || x > 9.2e18) return dflt;
    return (long long)x;
}

const char *tsc_jv_u64(const tsc_jv_t *v, uint64_t *out) {
    static const char *const other[] = {"null, not a non-negative integer", "a boolean, not a non-negative integer", "",
                                        "a string, not a non-negative integer", "an array, not a non-negative integer",
                                        "an object, not a non-negative integer"};
    if (!v) return "missing, not a non-negative integer";
    if (v->type != TSC_JV_NUMBER) return other[v->type];
    if (v->int_kind == TSC_JV_REAL) return "a fraction or an exponent, not an integer";
    if (signbit(v->num)) return "a negative number";
    if (v->int_kind == TSC_JV_INT_BIG) return "an integer above 2^64 - 1";
    *out = v->mag;
    return NULL;
}
