/* import_read.c: the .safetensors and .npy readers of tsc_import.h, hardened for hostile files: the
 * whole header is checked at open (a small strict JSON parser for safetensors, a strict dict-literal
 * parser for npy), tensor data is read one tensor at a time with pread. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "import_internal.h"
#include "tsc_file.h"
#include "tsc_import.h"
#include "tsc_mem.h"

struct tsc_tensor_file {
    char *path;
    int fd;
    uint64_t size;
    int n, cap;
    tsc_tensor_info_t *t;
};

const char *tsc_import_quote(const char *s, char buf[TSC_IMPORT_QUOTE_MAX]) {
    size_t o = 0, i = 0;
    buf[o++] = '\'';
    for (; s[i] && i < 120; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f || c == '\'' || c == '\\') o += (size_t)snprintf(buf + o, 5, "\\x%02x", c);
        else buf[o++] = (char)c;
    }
    if (s[i]) o += (size_t)snprintf(buf + o, 4, "...");
    buf[o++] = '\'';
    buf[o] = '\0';
    return buf;
}

static tsc_status_t add_tensor(tsc_tensor_file_t *f, tsc_tensor_info_t **out) {
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 16;
        tsc_tensor_info_t *t = realloc(f->t, (size_t)cap * sizeof *t);
        if (!t) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory listing tensors", f->path);
        f->t = t;
        f->cap = cap;
    }
    *out = &f->t[f->n++];
    memset(*out, 0, sizeof **out);
    return TSC_OK;
}

/* nbytes = product(dims) * element size, overflow-checked. */
static tsc_status_t tensor_size(const tsc_tensor_file_t *f, tsc_tensor_info_t *t) {
    char q[TSC_IMPORT_QUOTE_MAX];
    uint64_t n = tsc_format_size(t->fmt);
    for (int d = 0; d < t->rank; d++) {
        if (t->dims[d] > (1ull << 53) || (t->dims[d] && n > UINT64_MAX / t->dims[d]))
            return tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s: shape overflows 64 bits", f->path,
                                 tsc_import_quote(t->name, q));
        n *= t->dims[d];
    }
    t->nbytes = n;
    return TSC_OK;
}

/* ---------------------------------------------------------------- safetensors: strict JSON */

typedef struct {
    const char *s, *p, *end, *path;
} jp_t;

static tsc_status_t jp_fail(const jp_t *j, const char *what) {
    return tsc_error_set(TSC_ERR_FORMAT, "%s: malformed JSON header at byte %zu: %s", j->path,
                         (size_t)(j->p - j->s) + 8, what);
}

static void jp_ws(jp_t *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static int jp_eat(jp_t *j, char c) {
    jp_ws(j);
    if (j->p < j->end && *j->p == c) {
        j->p++;
        return 1;
    }
    return 0;
}

static int hex4(const char *p, unsigned *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        *v = *v * 16 + (unsigned)d;
    }
    return 0;
}

static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) return (size_t)(o[0] = (char)cp, 1);
    if (cp < 0x800) return o[0] = (char)(0xc0 | cp >> 6), o[1] = (char)(0x80 | (cp & 63)), 2;
    if (cp < 0x10000)
        return o[0] = (char)(0xe0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 63)), o[2] = (char)(0x80 | (cp & 63)), 3;
    o[0] = (char)(0xf0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 63));
    return o[2] = (char)(0x80 | (cp >> 6 & 63)), o[3] = (char)(0x80 | (cp & 63)), 4;
}

/* Length of the valid UTF-8 sequence at p (RFC 3629: no overlongs, no surrogates), 0 if invalid. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0], n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!n || (size_t)(end - p) < n) return 0;
    unsigned cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (unsigned i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    static const unsigned min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return n;
}

/* A JSON string into *out (malloc'ed, NUL-terminated; *len its bytes, which may hold a NUL). */
static tsc_status_t jp_string(jp_t *j, char **out, size_t *len) {
    *out = NULL;
    if (!jp_eat(j, '"')) return jp_fail(j, "a string expected");
    char *o = malloc((size_t)(j->end - j->p) + 1), *w = o;
    if (!o) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory parsing the header", j->path);
    while (j->p < j->end && *j->p != '"') {
        unsigned char c = (unsigned char)*j->p;
        if (c < 0x20) return free(o), jp_fail(j, "a control character in a string");
        if (c != '\\') {
            size_t n = utf8_len((const unsigned char *)j->p, (const unsigned char *)j->end);
            if (!n) return free(o), jp_fail(j, "a string that is not valid UTF-8");
            memcpy(w, j->p, n), w += n, j->p += n;
            continue;
        }
        if (j->end - j->p < 2) break;
        char e = j->p[1];
        const char *map = strchr("\"\"\\\\//b\bf\fn\nr\rt\t", e);
        if (e && map && (map - "\"\"\\\\//b\bf\fn\nr\rt\t") % 2 == 0) {
            *w++ = map[1], j->p += 2;
            continue;
        }
        unsigned cp, lo;
        if (e != 'u' || j->end - j->p < 6 || hex4(j->p + 2, &cp)) return free(o), jp_fail(j, "a bad escape in a string");
        j->p += 6;
        if (cp >= 0xdc00 && cp <= 0xdfff) return free(o), jp_fail(j, "a lone low surrogate in a string");
        if (cp >= 0xd800 && cp <= 0xdbff) {
            if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' || hex4(j->p + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
                return free(o), jp_fail(j, "a high surrogate without its low half");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00), j->p += 6;
        }
        w += put_utf8(w, cp);
    }
    if (j->p >= j->end) return free(o), jp_fail(j, "an unterminated string");
    j->p++;
    *w = '\0';
    *out = o, *len = (size_t)(w - o);
    return TSC_OK;
}

/* A non-negative JSON integer (no sign, fraction or exponent; no leading zeros). */
static tsc_status_t jp_uint(jp_t *j, uint64_t *v) {
    jp_ws(j);
    if (j->p >= j->end || *j->p < '0' || *j->p > '9') return jp_fail(j, "a non-negative integer expected");
    if (*j->p == '0' && j->end - j->p > 1 && j->p[1] >= '0' && j->p[1] <= '9') return jp_fail(j, "a number with a leading zero");
    for (*v = 0; j->p < j->end && *j->p >= '0' && *j->p <= '9'; j->p++) {
        if (*v > (UINT64_MAX - 9) / 10) return jp_fail(j, "an integer above 2^64");
        *v = *v * 10 + (uint64_t)(*j->p - '0');
    }
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E')) return jp_fail(j, "an integer expected, not a fraction");
    return TSC_OK;
}

/* Skips any JSON value (entries' unknown keys), nesting at most depth deep. */
static tsc_status_t jp_skip(jp_t *j, int depth) {
    jp_ws(j);
    if (depth > 64) return jp_fail(j, "nested deeper than 64");
    if (j->p >= j->end) return jp_fail(j, "a value expected");
    char c = *j->p, *s;
    size_t n;
    if (c == '"') {
        if (jp_string(j, &s, &n)) return TSC_ERR_FORMAT;
        free(s);
        return TSC_OK;
    }
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        j->p++;
        if (jp_eat(j, close)) return TSC_OK;
        do {
            if (c == '{') {
                if (jp_string(j, &s, &n)) return TSC_ERR_FORMAT;
                free(s);
                if (!jp_eat(j, ':')) return jp_fail(j, "':' expected");
            }
            if (jp_skip(j, depth + 1)) return TSC_ERR_FORMAT;
        } while (jp_eat(j, ','));
        return jp_eat(j, close) ? TSC_OK : jp_fail(j, c == '{' ? "',' or '}' expected" : "',' or ']' expected");
    }
    if (c == '-') j->p++;
    if (j->p < j->end && *j->p >= '0' && *j->p <= '9') { /* a number: its digits, fraction and exponent */
        while (j->p < j->end && ((*j->p >= '0' && *j->p <= '9') || (*j->p && strchr(".eE+-", *j->p)))) j->p++;
        return TSC_OK;
    }
    static const char *const lit[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t l = strlen(lit[i]);
        if ((size_t)(j->end - j->p) >= l && !memcmp(j->p, lit[i], l)) return j->p += l, TSC_OK;
    }
    return jp_fail(j, "a value expected");
}

static tsc_status_t jp_uints(jp_t *j, uint64_t *v, int cap, int *n) {
    if (!jp_eat(j, '[')) return jp_fail(j, "an array expected");
    *n = 0;
    if (jp_eat(j, ']')) return TSC_OK;
    do {
        if (*n == cap) return jp_fail(j, "an array longer than 16 (rank above 16)");
        if (jp_uint(j, &v[(*n)++])) return TSC_ERR_FORMAT;
    } while (jp_eat(j, ','));
    return jp_eat(j, ']') ? TSC_OK : jp_fail(j, "',' or ']' expected");
}

static const struct {
    const char *name;
    tsc_format_t fmt;
} st_dtypes[] = {{"F64", TSC_FMT_FP64}, {"F32", TSC_FMT_FP32}, {"F16", TSC_FMT_FP16}, {"BF16", TSC_FMT_BF16}};

/* One tensor's entry {dtype, shape, data_offsets[, other keys]}; offsets into t->offset/nbytes. */
static tsc_status_t st_entry(tsc_tensor_file_t *f, jp_t *j, tsc_tensor_info_t *t, uint64_t off[2]) {
    char q[TSC_IMPORT_QUOTE_MAX], *key = NULL, *dtype = NULL;
    size_t kl, dl;
    int seen = 0, n_off = 0;
    if (!jp_eat(j, '{')) return jp_fail(j, "a tensor entry must be an object");
    if (!jp_eat(j, '}')) do {
        if (jp_string(j, &key, &kl)) goto fail;
        if (!jp_eat(j, ':')) { jp_fail(j, "':' expected"); goto fail; }
        int bit = strlen(key) != kl ? 0 : !strcmp(key, "dtype") ? 1 : !strcmp(key, "shape") ? 2 : !strcmp(key, "data_offsets") ? 4 : 0;
        if (bit & seen) {
            tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s: key '%s' given twice", f->path, tsc_import_quote(t->name, q), key);
            goto fail;
        }
        seen |= bit;
        free(key), key = NULL;
        tsc_status_t st = bit == 1 ? jp_string(j, &dtype, &dl) : bit == 2 ? jp_uints(j, t->dims, TSC_TENSOR_RANK_MAX, &t->rank)
                        : bit == 4 ? jp_uints(j, off, 2, &n_off) : jp_skip(j, 1);
        if (st) goto fail;
    } while (jp_eat(j, ','));
    if (!jp_eat(j, '}')) { jp_fail(j, "',' or '}' expected"); goto fail; }
    if (seen != 7 || n_off != 2) {
        tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s: header entry lacks dtype, shape or data_offsets [begin, end]",
                      f->path, tsc_import_quote(t->name, q));
        goto fail;
    }
    t->dtype = dtype;
    for (size_t k = 0; k < sizeof st_dtypes / sizeof st_dtypes[0]; k++)
        if (!strcmp(dtype, st_dtypes[k].name)) return t->fmt = st_dtypes[k].fmt, TSC_OK;
    char qd[TSC_IMPORT_QUOTE_MAX];
    return tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s: dtype %s is not one tilescope stores (F64, F32, F16, BF16)",
                         f->path, tsc_import_quote(t->name, q), tsc_import_quote(dtype, qd));
fail:
    free(key), free(dtype);
    return TSC_ERR_FORMAT;
}

static tsc_status_t st_metadata(jp_t *j) {
    char *s;
    size_t n;
    if (!jp_eat(j, '{')) return jp_fail(j, "__metadata__ must be an object");
    if (jp_eat(j, '}')) return TSC_OK;
    do {
        for (int k = 0; k < 2; k++) {
            jp_ws(j);
            if (k && j->p < j->end && *j->p != '"') return jp_fail(j, "__metadata__ values must be strings");
            if (jp_string(j, &s, &n)) return TSC_ERR_FORMAT;
            free(s);
            if (!k && !jp_eat(j, ':')) return jp_fail(j, "':' expected");
        }
    } while (jp_eat(j, ','));
    return jp_eat(j, '}') ? TSC_OK : jp_fail(j, "',' or '}' expected");
}

/* The header object: every tensor entry, __metadata__ checked and dropped. */
static tsc_status_t st_header(tsc_tensor_file_t *f, const char *text, size_t len, uint64_t (**offs)[2]) {
    jp_t j = {text, text, text + len, f->path};
    int meta_seen = 0, cap = 0;
    *offs = NULL;
    if (!jp_eat(&j, '{')) return jp_fail(&j, "the header must be a JSON object");
    if (!jp_eat(&j, '}')) do {
        char *name, q[TSC_IMPORT_QUOTE_MAX];
        size_t nl;
        if (jp_string(&j, &name, &nl)) return TSC_ERR_FORMAT;
        if (!jp_eat(&j, ':')) return free(name), jp_fail(&j, "':' expected");
        if (!strcmp(name, "__metadata__")) {
            free(name);
            if (meta_seen++) return jp_fail(&j, "__metadata__ given twice");
            if (st_metadata(&j)) return TSC_ERR_FORMAT;
            continue;
        }
        tsc_tensor_info_t *t;
        if (add_tensor(f, &t)) return free(name), TSC_ERR_NOMEM;
        t->name = name;
        if (strlen(name) != nl)
            return tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s: a NUL byte in the name", f->path, tsc_import_quote(name, q));
        if (f->n > cap) {
            cap = cap ? 2 * cap : 16;
            uint64_t(*o)[2] = realloc(*offs, (size_t)cap * sizeof *o);
            if (!o) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory listing tensors", f->path);
            *offs = o;
        }
        if (st_entry(f, &j, t, (*offs)[f->n - 1])) return TSC_ERR_FORMAT;
    } while (jp_eat(&j, ','));
    if (!jp_eat(&j, '}')) return jp_fail(&j, "',' or '}' expected");
    jp_ws(&j);
    if (j.p != j.end) return jp_fail(&j, "bytes after the header object");
    return TSC_OK;
}

static const tsc_tensor_file_t *cmp_file;

static int cmp_name(const void *a, const void *b) {
    return strcmp(cmp_file->t[*(const int *)a].name, cmp_file->t[*(const int *)b].name);
}

static int cmp_span(const void *a, const void *b) {
    const tsc_tensor_info_t *x = &cmp_file->t[*(const int *)a], *y = &cmp_file->t[*(const int *)b];
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->nbytes != y->nbytes ? (x->nbytes < y->nbytes ? -1 : 1) : strcmp(x->name, y->name);
}

/* Sizes, offsets inside the data region, no duplicate names, no overlap. */
static tsc_status_t st_check(tsc_tensor_file_t *f, uint64_t (*offs)[2], uint64_t data0) {
    char q[TSC_IMPORT_QUOTE_MAX], q2[TSC_IMPORT_QUOTE_MAX];
    uint64_t data_len = f->size - data0;
    for (int i = 0; i < f->n; i++) {
        tsc_tensor_info_t *t = &f->t[i];
        uint64_t b = offs[i][0], e = offs[i][1];
        if (tensor_size(f, t)) return TSC_ERR_FORMAT;
        if (e < b || e - b != t->nbytes)
            return tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s: data_offsets [%llu, %llu] hold %llu bytes, its shape in %s needs %llu",
                                 f->path, tsc_import_quote(t->name, q), (unsigned long long)b, (unsigned long long)e,
                                 e < b ? 0ull : (unsigned long long)(e - b), t->dtype, (unsigned long long)t->nbytes);
        if (e > data_len)
            return tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s: data_offsets end %llu beyond the %llu data bytes (truncated file)",
                                 f->path, tsc_import_quote(t->name, q), (unsigned long long)e, (unsigned long long)data_len);
        t->offset = data0 + b;
    }
    int *ix = malloc((size_t)(f->n ? f->n : 1) * sizeof *ix);
    if (!ix) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory checking tensors", f->path);
    for (int i = 0; i < f->n; i++) ix[i] = i;
    cmp_file = f;
    qsort(ix, (size_t)f->n, sizeof *ix, cmp_name);
    tsc_status_t st = TSC_OK;
    for (int i = 1; i < f->n && !st; i++)
        if (!strcmp(f->t[ix[i]].name, f->t[ix[i - 1]].name))
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s is named twice in the header", f->path,
                               tsc_import_quote(f->t[ix[i]].name, q));
    qsort(ix, (size_t)f->n, sizeof *ix, cmp_span);
    for (int i = 1; i < f->n && !st; i++) {
        const tsc_tensor_info_t *a = &f->t[ix[i - 1]], *b = &f->t[ix[i]];
        if (b->offset < a->offset + a->nbytes)
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: tensors %s and %s overlap (data_offsets)", f->path,
                               tsc_import_quote(a->name, q), tsc_import_quote(b->name, q2));
    }
    free(ix);
    return st;
}

static tsc_status_t read_at(tsc_tensor_file_t *f, void *buf, uint64_t n, uint64_t off, const char *what) {
    for (uint64_t got = 0; got < n;) {
        ssize_t r = pread(f->fd, (char *)buf + got, n - got > (1u << 30) ? (1u << 30) : (size_t)(n - got), (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return tsc_error_set(TSC_ERR_IO, "%s: cannot read %s: %s", f->path, what, strerror(errno));
        if (r == 0) return tsc_error_set(TSC_ERR_FORMAT, "%s: truncated: the file ends inside %s", f->path, what);
        got += (uint64_t)r;
    }
    return TSC_OK;
}

static tsc_status_t st_open(tsc_tensor_file_t *f) {
    unsigned char h8[8];
    if (f->size < 8)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: truncated: %llu bytes, a safetensors file starts with an 8-byte header length",
                             f->path, (unsigned long long)f->size);
    if (read_at(f, h8, 8, 0, "the header length")) return TSC_ERR_FORMAT;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | h8[i];
    if (n > f->size - 8)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: header length %llu exceeds the file (%llu bytes): truncated or not safetensors",
                             f->path, (unsigned long long)n, (unsigned long long)f->size);
    if (n > TSC_TENSOR_HEADER_MAX)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: header length %llu is above the limit of %u bytes", f->path,
                             (unsigned long long)n, TSC_TENSOR_HEADER_MAX);
    if (n < 2) return tsc_error_set(TSC_ERR_FORMAT, "%s: malformed JSON header: %llu bytes", f->path, (unsigned long long)n);
    char *text = malloc((size_t)n);
    if (!text) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory for a %llu-byte header", f->path, (unsigned long long)n);
    uint64_t(*offs)[2] = NULL;
    tsc_status_t st = read_at(f, text, n, 8, "the header");
    if (!st) st = st_header(f, text, (size_t)n, &offs);
    if (!st) st = st_check(f, offs, 8 + n);
    free(text);
    free(offs);
    return st;
}

/* ---------------------------------------------------------------- npy */

typedef struct {
    const char *p, *end;
} lit_t;

static void lit_ws(lit_t *l) {
    while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r')) l->p++;
}

static int lit_eat(lit_t *l, char c) {
    lit_ws(l);
    return l->p < l->end && *l->p == c ? (l->p++, 1) : 0;
}

/* A quoted Python string without escapes into buf (at most cap - 1 bytes); -1 if none. */
static int lit_str(lit_t *l, char *buf, size_t cap) {
    lit_ws(l);
    if (l->p >= l->end || (*l->p != '\'' && *l->p != '"')) return -1;
    char qc = *l->p++;
    size_t n = 0;
    while (l->p < l->end && *l->p != qc) {
        if (*l->p == '\\' || (unsigned char)*l->p < 0x20 || n + 1 >= cap) return -1;
        buf[n++] = *l->p++;
    }
    if (l->p >= l->end) return -1;
    l->p++;
    buf[n] = '\0';
    return 0;
}

/* (d0, d1, ...) with an optional trailing comma; () is a scalar. */
static int lit_shape(lit_t *l, tsc_tensor_info_t *t) {
    if (!lit_eat(l, '(')) return -1;
    t->rank = 0;
    while (!lit_eat(l, ')')) {
        lit_ws(l);
        if (t->rank == TSC_TENSOR_RANK_MAX || l->p >= l->end || *l->p < '0' || *l->p > '9') return -1;
        uint64_t v = 0;
        for (; l->p < l->end && *l->p >= '0' && *l->p <= '9'; l->p++) {
            if (v > (UINT64_MAX - 9) / 10) return -1;
            v = v * 10 + (uint64_t)(*l->p - '0');
        }
        t->dims[t->rank++] = v;
        if (!lit_eat(l, ',')) {
            if (!lit_eat(l, ')')) return -1;
            break;
        }
    }
    return 0;
}

static const struct {
    const char *descr;
    tsc_format_t fmt;
} npy_dtypes[] = {{"<f8", TSC_FMT_FP64}, {"<f4", TSC_FMT_FP32}, {"<f2", TSC_FMT_FP16}};

/* The header dict {'descr': ..., 'fortran_order': False, 'shape': (...)}, each key once. */
static tsc_status_t npy_dict(tsc_tensor_file_t *f, tsc_tensor_info_t *t, const char *text, size_t len, char *descr) {
    lit_t l = {text, text + len};
    char key[32], q[TSC_IMPORT_QUOTE_MAX];
    int seen = 0;
    if (!lit_eat(&l, '{')) goto bad;
    while (!lit_eat(&l, '}')) {
        if (lit_str(&l, key, sizeof key) || !lit_eat(&l, ':')) goto bad;
        int bit = !strcmp(key, "descr") ? 1 : !strcmp(key, "fortran_order") ? 2 : !strcmp(key, "shape") ? 4 : 0;
        if (!bit || (seen & bit))
            return tsc_error_set(TSC_ERR_FORMAT, "%s: npy header: key %s unknown or given twice", f->path, tsc_import_quote(key, q));
        seen |= bit;
        lit_ws(&l);
        if (bit == 1 && lit_str(&l, descr, 64))
            return tsc_error_set(TSC_ERR_FORMAT, "%s: npy header: descr is not a simple dtype string (structured arrays are not tensors)", f->path);
        if (bit == 2) {
            if ((size_t)(l.end - l.p) >= 4 && !memcmp(l.p, "True", 4))
                return tsc_error_set(TSC_ERR_FORMAT, "%s: fortran_order True (column-major) is not supported: save a C-ordered array (np.ascontiguousarray)", f->path);
            if ((size_t)(l.end - l.p) < 5 || memcmp(l.p, "False", 5)) goto bad;
            l.p += 5;
        }
        if (bit == 4 && lit_shape(&l, t)) goto bad;
        if (!lit_eat(&l, ',')) {
            if (!lit_eat(&l, '}')) goto bad;
            break;
        }
    }
    lit_ws(&l);
    if (l.p != l.end || seen != 7) goto bad;
    return TSC_OK;
bad:
    return tsc_error_set(TSC_ERR_FORMAT, "%s: malformed npy header at byte %zu: the dict {'descr', 'fortran_order', 'shape'} expected",
                         f->path, (size_t)(l.p - text));
}

static tsc_status_t npy_open(tsc_tensor_file_t *f) {
    unsigned char h[12];
    char descr[64], q[TSC_IMPORT_QUOTE_MAX], qd[TSC_IMPORT_QUOTE_MAX];
    if (f->size < 10 || read_at(f, h, f->size < 12 ? 10 : 12, 0, "the npy preamble") || memcmp(h, "\x93NUMPY", 6))
        return tsc_error_set(TSC_ERR_FORMAT, "%s: not an npy file (no \\x93NUMPY magic)", f->path);
    if (h[6] < 1 || h[6] > 3) return tsc_error_set(TSC_ERR_FORMAT, "%s: npy format version %d.%d is not one of 1.0, 2.0, 3.0", f->path, h[6], h[7]);
    uint64_t hl = h[6] == 1 ? (uint64_t)(h[8] | h[9] << 8) : f->size < 12 ? UINT64_MAX
                : (uint64_t)h[8] | (uint64_t)h[9] << 8 | (uint64_t)h[10] << 16 | (uint64_t)h[11] << 24;
    uint64_t h0 = h[6] == 1 ? 10 : 12;
    if (hl > f->size - h0 || hl > (1u << 20))
        return tsc_error_set(TSC_ERR_FORMAT, "%s: npy header length %llu exceeds the file (%llu bytes) or 1 MiB: truncated or not npy",
                             f->path, hl == UINT64_MAX ? 0ull : (unsigned long long)hl, (unsigned long long)f->size);
    char *text = malloc((size_t)hl + 1);
    if (!text) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", f->path);
    tsc_tensor_info_t *t;
    tsc_status_t st = read_at(f, text, hl, h0, "the npy header");
    if (!st) st = add_tensor(f, &t);
    if (st) return free(text), st;
    const char *base = strrchr(f->path, '/');
    base = base ? base + 1 : f->path;
    const char *dot = strrchr(base, '.');
    t->name = strndup(base, dot ? (size_t)(dot - base) : strlen(base));
    st = t->name ? npy_dict(f, t, text, (size_t)hl, descr) : tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", f->path);
    free(text);
    if (st) return st;
    if (!(t->dtype = strdup(descr))) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", f->path);
    size_t k = 0;
    while (k < sizeof npy_dtypes / sizeof npy_dtypes[0] && strcmp(descr, npy_dtypes[k].descr)) k++;
    if (k == sizeof npy_dtypes / sizeof npy_dtypes[0])
        return tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s: dtype %s is not one tilescope stores ('<f8', '<f4', '<f2'; BF16 bits in "
                             "a uint16 array are refused: save BF16 as safetensors or torch .pt)",
                             f->path, tsc_import_quote(t->name, q), tsc_import_quote(descr, qd));
    t->fmt = npy_dtypes[k].fmt;
    t->offset = h0 + hl;
    if (tensor_size(f, t)) return TSC_ERR_FORMAT;
    if (f->size - t->offset != t->nbytes)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s: the shape needs %llu data bytes, the file holds %llu (%s)", f->path,
                             tsc_import_quote(t->name, q), (unsigned long long)t->nbytes, (unsigned long long)(f->size - t->offset),
                             f->size - t->offset < t->nbytes ? "truncated file" : "bytes after the array");
    return TSC_OK;
}

/* ---------------------------------------------------------------- the file */

static int has_ext(const char *path, const char *ext) {
    size_t n = strlen(path), e = strlen(ext);
    return n > e && !strcasecmp(path + n - e, ext);
}

tsc_status_t tsc_tensor_file_open(tsc_tensor_file_t **out, const char *path) {
    if (!out || !path) return tsc_error_set(TSC_ERR_ARG, "tsc_tensor_file_open: NULL argument");
    *out = NULL;
    int st_kind = has_ext(path, ".safetensors"), npy = has_ext(path, ".npy");
    if (!st_kind && !npy) return tsc_error_set(TSC_ERR_UNSUPPORTED, "%s: not a .safetensors or .npy file", path);
    if (tsc_file_check_regular(path)) return TSC_ERR_IO;
    tsc_tensor_file_t *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) return free(f), tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", path);
    f->fd = -1;
    struct stat sb;
    f->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (f->fd < 0 || fstat(f->fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        tsc_status_t st = tsc_error_set(TSC_ERR_IO, "%s: cannot open: %s", path, f->fd < 0 ? strerror(errno) : "not a regular file");
        tsc_tensor_file_close(f);
        return st;
    }
    f->size = (uint64_t)sb.st_size;
    tsc_status_t st = st_kind ? st_open(f) : npy_open(f);
    if (st) return tsc_tensor_file_close(f), st;
    *out = f;
    return TSC_OK;
}

void tsc_tensor_file_close(tsc_tensor_file_t *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    for (int i = 0; i < f->n; i++) free((char *)f->t[i].name), free((char *)f->t[i].dtype);
    free(f->t);
    free(f->path);
    free(f);
}

const char *tsc_tensor_file_path(const tsc_tensor_file_t *f) { return f ? f->path : ""; }
int tsc_tensor_file_count(const tsc_tensor_file_t *f) { return f ? f->n : 0; }

const tsc_tensor_info_t *tsc_tensor_file_info(const tsc_tensor_file_t *f, int i) {
    return f && i >= 0 && i < f->n ? &f->t[i] : NULL;
}

tsc_status_t tsc_tensor_file_read(tsc_tensor_file_t *f, int i, void *buf) {
    if (!f || i < 0 || i >= f->n || (!buf && f->t[i].nbytes))
        return tsc_error_set(TSC_ERR_ARG, "tsc_tensor_file_read: bad tensor index or buffer");
    char q[TSC_IMPORT_QUOTE_MAX], what[TSC_IMPORT_QUOTE_MAX + 16];
    snprintf(what, sizeof what, "tensor %s", tsc_import_quote(f->t[i].name, q));
    return read_at(f, buf, f->t[i].nbytes, f->t[i].offset, what);
}

void tsc_tensor_file_json(const tsc_tensor_file_t *f, tsc_json_t *j) {
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "path", tsc_tensor_file_path(f));
    tsc_json_key(j, "tensors");
    tsc_json_array_begin(j);
    for (int i = 0; i < tsc_tensor_file_count(f); i++) {
        const tsc_tensor_info_t *t = &f->t[i];
        int64_t dims[TSC_TENSOR_RANK_MAX];
        for (int d = 0; d < t->rank; d++) dims[d] = (int64_t)t->dims[d];
        tsc_json_object_begin(j);
        tsc_json_kv_string(j, "name", t->name);
        tsc_json_kv_string(j, "dtype", t->dtype);
        tsc_json_kv_string(j, "format", tsc_format_name(t->fmt));
        tsc_json_kv_ints(j, "shape", dims, (size_t)t->rank);
        tsc_json_kv_int(j, "offset", (int64_t)t->offset);
        tsc_json_kv_int(j, "nbytes", (int64_t)t->nbytes);
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
    tsc_json_object_end(j);
}
