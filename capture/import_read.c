/* import_read.c: the tensor-file readers of tsc_import.h (.safetensors, .npy, .npz, torch .pt),
 * hardened for hostile files: the whole header is checked at open (util's JSON reader, tsc_jv.h, for
 * the safetensors header; a strict dict-literal parser for npy; the zip directory of .npz and .pt, the restricted
 * unpickler of import_pickle.c for .pt), tensor data is read one tensor at a time. */
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
#include "tsc_jv.h"
#include "tsc_mem.h"

/* Where a tensor's bytes are. */
typedef struct {
    int member;        /* the zip member holding them; -1: the file itself */
    uint64_t base;     /* contiguous: the tensor's first byte; strided: the storage's first byte */
    int strided;
    uint64_t elem0;    /* strided: the first element's index in the storage */
    uint64_t stride[TSC_TENSOR_RANK_MAX];
} src_t;

struct tsc_tensor_file {
    char *path;
    int fd;
    uint64_t size;
    int n, cap;
    tsc_tensor_info_t *t;
    src_t *src;                /* cap entries, one per tensor */
    int n_other, cap_other;
    tsc_tensor_info_t *other;  /* tensors of a type tilescope does not store: listed, never read */
    int has_zip;
    tsc_zip_t zip;
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
        if (t) f->t = t;
        src_t *s = t ? realloc(f->src, (size_t)cap * sizeof *s) : NULL;
        if (!s) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory listing tensors", f->path);
        f->src = s;
        f->cap = cap;
    }
    memset(&f->src[f->n], 0, sizeof f->src[f->n]);
    f->src[f->n].member = -1;
    *out = &f->t[f->n++];
    memset(*out, 0, sizeof **out);
    return TSC_OK;
}

/* A tensor of a type tilescope does not store (an int64 buffer of a state dict): named in the list
 * of skipped tensors, never read. */
static tsc_status_t add_other(tsc_tensor_file_t *f, tsc_tensor_info_t **out) {
    if (f->n_other == f->cap_other) {
        int cap = f->cap_other ? 2 * f->cap_other : 16;
        tsc_tensor_info_t *t = realloc(f->other, (size_t)cap * sizeof *t);
        if (!t) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory listing tensors", f->path);
        f->other = t, f->cap_other = cap;
    }
    *out = &f->other[f->n_other++];
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

/* ---------------------------------------------------------------- safetensors: the JSON header */

/* The header is read by util's JSON reader (tsc_jv.h), which holds it to RFC 8259 and to the bounds
 * a stranger's file needs: UTF-8 strings, no key named twice in an object (a tensor, or a second
 * "dtype"), nesting at most 64 deep, the memory budget, and integers read from their digits, so an
 * offset near 2^64 is exact or refused, never rounded through a double. Here: the entries' shape. */

/* An array of exact non-negative integers into v (at most cap: checked by the caller). */
static tsc_status_t st_uints(const tsc_tensor_file_t *f, const char *name, const char *key, const tsc_jv_t *a, uint64_t *v,
                             int *n) {
    char q[TSC_IMPORT_QUOTE_MAX];
    if (a->type != TSC_JV_ARRAY)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s: %s is not an array of integers", f->path,
                             tsc_import_quote(name, q), key);
    for (size_t i = 0; i < a->n; i++) {
        const char *why = tsc_jv_u64(a->items[i], &v[i]);
        if (why)
            return tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s: %s[%zu] is %s", f->path, tsc_import_quote(name, q), key, i, why);
    }
    *n = (int)a->n;
    return TSC_OK;
}

static const struct {
    const char *name;
    tsc_format_t fmt;
} st_dtypes[] = {{"F64", TSC_FMT_FP64}, {"F32", TSC_FMT_FP32}, {"F16", TSC_FMT_FP16}, {"BF16", TSC_FMT_BF16}};

/* One tensor's entry {dtype, shape, data_offsets[, other keys]}; its offsets into off. */
static tsc_status_t st_entry(tsc_tensor_file_t *f, const tsc_jv_t *e, tsc_tensor_info_t *t, uint64_t off[2]) {
    char q[TSC_IMPORT_QUOTE_MAX], qd[TSC_IMPORT_QUOTE_MAX];
    const tsc_jv_t *dtype = tsc_jv_get(e, "dtype"), *shape = tsc_jv_get(e, "shape"), *offs = tsc_jv_get(e, "data_offsets");
    if (e->type != TSC_JV_OBJECT)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s: its header entry is not an object", f->path,
                             tsc_import_quote(t->name, q));
    int n_off = 0;
    if (!dtype || !shape || !offs || (offs->type == TSC_JV_ARRAY && offs->n != 2))
        return tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s: header entry lacks dtype, shape or data_offsets [begin, end]",
                             f->path, tsc_import_quote(t->name, q));
    if (dtype->type != TSC_JV_STRING)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s: dtype is not a string", f->path, tsc_import_quote(t->name, q));
    if (shape->type == TSC_JV_ARRAY && shape->n > TSC_TENSOR_RANK_MAX)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s: a shape of %zu dimensions (at most %d)", f->path,
                             tsc_import_quote(t->name, q), shape->n, TSC_TENSOR_RANK_MAX);
    if (st_uints(f, t->name, "shape", shape, t->dims, &t->rank) || st_uints(f, t->name, "data_offsets", offs, off, &n_off))
        return TSC_ERR_FORMAT;
    if (!(t->dtype = strdup(dtype->str))) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory listing tensors", f->path);
    for (size_t k = 0; k < sizeof st_dtypes / sizeof st_dtypes[0]; k++)
        if (!strcmp(t->dtype, st_dtypes[k].name)) return t->fmt = st_dtypes[k].fmt, TSC_OK;
    return tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s: dtype %s is not one tilescope stores (F64, F32, F16, BF16)",
                         f->path, tsc_import_quote(t->name, q), tsc_import_quote(t->dtype, qd));
}

/* __metadata__: an object of strings, checked and dropped. */
static tsc_status_t st_metadata(const tsc_tensor_file_t *f, const tsc_jv_t *m) {
    if (m->type != TSC_JV_OBJECT) return tsc_error_set(TSC_ERR_FORMAT, "%s: __metadata__ must be an object", f->path);
    for (size_t i = 0; i < m->n; i++)
        if (m->items[i]->type != TSC_JV_STRING)
            return tsc_error_set(TSC_ERR_FORMAT, "%s: __metadata__ values must be strings", f->path);
    return TSC_OK;
}

/* The header object (text[len], at byte 8 of the file): every tensor entry, in order. */
static tsc_status_t st_header(tsc_tensor_file_t *f, const char *text, size_t len, uint64_t (**offs)[2]) {
    tsc_jv_t *h;
    *offs = NULL;
    tsc_status_t st = tsc_jv_parse_at(text, len, f->path, 8, &h);
    if (st) return st;
    if (h->type != TSC_JV_OBJECT) st = tsc_error_set(TSC_ERR_FORMAT, "%s: the safetensors header is not a JSON object", f->path);
    size_t n_tensors = h->n - (tsc_jv_get(h, "__metadata__") != NULL);
    if (!st && !(*offs = malloc((n_tensors ? n_tensors : 1) * sizeof **offs)))
        st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory listing tensors", f->path);
    for (size_t i = 0; i < h->n && !st; i++) {
        if (!strcmp(h->keys[i], "__metadata__")) {
            st = st_metadata(f, h->items[i]);
            continue;
        }
        tsc_tensor_info_t *t;
        if (!(st = add_tensor(f, &t)) && !(t->name = strdup(h->keys[i])))
            st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory listing tensors", f->path);
        if (!st) st = st_entry(f, h->items[i], t, (*offs)[f->n - 1]);
    }
    tsc_jv_free(h);
    return st;
}

static const tsc_tensor_file_t *cmp_file;

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Names are unique within a file (a safetensors header or a dict of dicts can spell one twice). */
static tsc_status_t check_names(tsc_tensor_file_t *f) {
    char q[TSC_IMPORT_QUOTE_MAX];
    int n = f->n + f->n_other;
    const char **names = malloc(sizeof *names * (size_t)(n + 1));
    if (!names) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory checking tensors", f->path);
    for (int i = 0; i < f->n; i++) names[i] = f->t[i].name;
    for (int i = 0; i < f->n_other; i++) names[f->n + i] = f->other[i].name;
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    tsc_status_t st = TSC_OK;
    for (int i = 1; i < n && !st; i++)
        if (!strcmp(names[i], names[i - 1]))
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s is named twice", f->path, tsc_import_quote(names[i], q));
    free(names);
    return st;
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
        t->offset = f->src[i].base = data0 + b;
    }
    tsc_status_t st = check_names(f);
    if (st) return st;
    int *ix = malloc((size_t)(f->n ? f->n : 1) * sizeof *ix);
    if (!ix) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory checking tensors", f->path);
    for (int i = 0; i < f->n; i++) ix[i] = i;
    cmp_file = f;
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

tsc_status_t tsc_import_pread(int fd, const char *path, void *buf, uint64_t n, uint64_t off, const char *what) {
    for (uint64_t got = 0; got < n;) {
        ssize_t r = pread(fd, (char *)buf + got, n - got > (1u << 30) ? (1u << 30) : (size_t)(n - got), (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return tsc_error_set(TSC_ERR_IO, "%s: cannot read %s: %s", path, what, strerror(errno));
        if (r == 0) return tsc_error_set(TSC_ERR_FORMAT, "%s: truncated: the file ends inside %s", path, what);
        got += (uint64_t)r;
    }
    return TSC_OK;
}

static tsc_status_t read_at(tsc_tensor_file_t *f, void *buf, uint64_t n, uint64_t off, const char *what) {
    return tsc_import_pread(f->fd, f->path, buf, n, off, what);
}

/* Bytes [off, off + n) of zip member `member` (-1: of the file). */
static tsc_status_t read_src(tsc_tensor_file_t *f, int member, uint64_t off, uint64_t n, void *buf, const char *what) {
    return member < 0 ? read_at(f, buf, n, off, what) : tsc_zip_read(&f->zip, member, off, n, buf);
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

/* The header dict {'descr': ..., 'fortran_order': False, 'shape': (...)}, each key once (where:
 * the file, or "file: member" for messages). */
static tsc_status_t npy_dict(const char *where, tsc_tensor_info_t *t, const char *text, size_t len, char *descr) {
    lit_t l = {text, text + len};
    char key[32], q[TSC_IMPORT_QUOTE_MAX];
    int seen = 0;
    if (!lit_eat(&l, '{')) goto bad;
    while (!lit_eat(&l, '}')) {
        if (lit_str(&l, key, sizeof key) || !lit_eat(&l, ':')) goto bad;
        int bit = !strcmp(key, "descr") ? 1 : !strcmp(key, "fortran_order") ? 2 : !strcmp(key, "shape") ? 4 : 0;
        if (!bit || (seen & bit))
            return tsc_error_set(TSC_ERR_FORMAT, "%s: npy header: key %s unknown or given twice", where, tsc_import_quote(key, q));
        seen |= bit;
        lit_ws(&l);
        if (bit == 1 && lit_str(&l, descr, 64))
            return tsc_error_set(TSC_ERR_FORMAT, "%s: npy header: descr is not a simple dtype string (structured arrays are not tensors)", where);
        if (bit == 2) {
            if ((size_t)(l.end - l.p) >= 4 && !memcmp(l.p, "True", 4))
                return tsc_error_set(TSC_ERR_FORMAT, "%s: fortran_order True (column-major) is not supported: save a C-ordered array (np.ascontiguousarray)", where);
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
                         where, (size_t)(l.p - text));
}

/* One npy array of `total` bytes in member (-1: the file), named name (taken). Its header is checked
 * whole; a dtype tilescope does not store is an error, or (other_ok: an .npz member) an entry of the
 * skipped list. */
static tsc_status_t npy_parse(tsc_tensor_file_t *f, int member, uint64_t total, char *name, const char *where, int other_ok) {
    unsigned char h[12];
    char descr[64], q[TSC_IMPORT_QUOTE_MAX], qd[TSC_IMPORT_QUOTE_MAX];
    tsc_tensor_info_t tmp, *t = &tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.name = name;
    tsc_status_t st = TSC_OK;
    if (total < 10 || read_src(f, member, 0, total < 12 ? 10 : 12, h, "the npy preamble") || memcmp(h, "\x93NUMPY", 6)) {
        st = tsc_error_set(TSC_ERR_FORMAT, "%s: not an npy array (no \\x93NUMPY magic)", where);
        goto out;
    }
    if (h[6] < 1 || h[6] > 3) {
        st = tsc_error_set(TSC_ERR_FORMAT, "%s: npy format version %d.%d is not one of 1.0, 2.0, 3.0", where, h[6], h[7]);
        goto out;
    }
    uint64_t hl = h[6] == 1 ? (uint64_t)(h[8] | h[9] << 8) : total < 12 ? UINT64_MAX
                : (uint64_t)h[8] | (uint64_t)h[9] << 8 | (uint64_t)h[10] << 16 | (uint64_t)h[11] << 24;
    uint64_t h0 = h[6] == 1 ? 10 : 12;
    if (hl > total - h0 || hl > (1u << 20)) {
        st = tsc_error_set(TSC_ERR_FORMAT, "%s: npy header length %llu exceeds the array (%llu bytes) or 1 MiB: truncated or not npy",
                           where, hl == UINT64_MAX ? 0ull : (unsigned long long)hl, (unsigned long long)total);
        goto out;
    }
    char *text = malloc((size_t)hl + 1);
    if (!text) {
        st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", where);
        goto out;
    }
    st = read_src(f, member, h0, hl, text, "the npy header");
    if (!st) st = npy_dict(where, t, text, (size_t)hl, descr);
    free(text);
    if (st) goto out;
    size_t k = 0;
    while (k < sizeof npy_dtypes / sizeof npy_dtypes[0] && strcmp(descr, npy_dtypes[k].descr)) k++;
    if (k == sizeof npy_dtypes / sizeof npy_dtypes[0] && !other_ok) {
        st = tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s: dtype %s is not one tilescope stores ('<f8', '<f4', '<f2'; BF16 bits in "
                           "a uint16 array are refused: save BF16 as safetensors or torch .pt)",
                           where, tsc_import_quote(name, q), tsc_import_quote(descr, qd));
        goto out;
    }
    tmp.fmt = k < sizeof npy_dtypes / sizeof npy_dtypes[0] ? npy_dtypes[k].fmt : TSC_FMT_FP32;
    tmp.offset = h0 + hl;
    if (k < sizeof npy_dtypes / sizeof npy_dtypes[0]) {
        if ((st = tensor_size(f, &tmp))) goto out;
        if (total - tmp.offset != tmp.nbytes) {
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s: the shape needs %llu data bytes, the %s holds %llu (%s)", where,
                               tsc_import_quote(name, q), (unsigned long long)tmp.nbytes, member < 0 ? "file" : "member",
                               (unsigned long long)(total - tmp.offset), total - tmp.offset < tmp.nbytes ? "truncated" : "bytes after the array");
            goto out;
        }
    }
    if (!(tmp.dtype = strdup(descr))) {
        st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", where);
        goto out;
    }
    if ((st = k < sizeof npy_dtypes / sizeof npy_dtypes[0] ? add_tensor(f, &t) : add_other(f, &t))) {
        free((char *)tmp.dtype);
        goto out;
    }
    if (k < sizeof npy_dtypes / sizeof npy_dtypes[0]) f->src[f->n - 1].member = member, f->src[f->n - 1].base = tmp.offset;
    if (member >= 0) tmp.offset = f->zip.m[member].method ? UINT64_MAX : f->zip.m[member].data + tmp.offset;
    *t = tmp;
    return TSC_OK;
out:
    free(name);
    return st;
}

static char *stem(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    return strndup(base, dot && dot != base ? (size_t)(dot - base) : strlen(base));
}

static tsc_status_t npy_open(tsc_tensor_file_t *f) {
    char *name = stem(f->path);
    if (!name) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", f->path);
    return npy_parse(f, -1, f->size, name, f->path, 0);
}

/* ---------------------------------------------------------------- npz: a zip of npy arrays */

static tsc_status_t npz_open(tsc_tensor_file_t *f) {
    tsc_status_t st = tsc_zip_open(&f->zip, f->fd, f->size, f->path);
    f->has_zip = 1;
    for (int i = 0; !st && i < f->zip.n; i++) {
        const tsc_zip_member_t *m = &f->zip.m[i];
        size_t nl = strlen(m->name);
        char where[TSC_IMPORT_QUOTE_MAX + 600], q[TSC_IMPORT_QUOTE_MAX];
        snprintf(where, sizeof where, "%.400s: member %s", f->path, tsc_import_quote(m->name, q));
        if (nl < 4 || strcmp(m->name + nl - 4, ".npy")) {
            tsc_tensor_info_t *t = NULL;
            if ((st = add_other(f, &t))) break;
            if (!(t->name = strdup(m->name)) || !(t->dtype = strdup("not an array"))) st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", f->path);
            continue;
        }
        char *name = strndup(m->name, nl - 4);
        st = name ? npy_parse(f, i, m->usize, name, where, 1) : tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", f->path);
    }
    return st ? st : check_names(f);
}

/* ---------------------------------------------------------------- torch .pt */

/* Tensor t of storage s, whose first byte is at base of member (-1: the file): its extent checked
 * against the storage, listed as a tensor (or, of a type tilescope does not store, as skipped). */
static tsc_status_t pt_tensor(tsc_tensor_file_t *f, const tsc_pt_tensor_t *t, const tsc_pt_storage_t *s, int member, uint64_t base) {
    char q[TSC_IMPORT_QUOTE_MAX];
    const char *name = t->name[0] ? t->name : NULL;
    char *own = name ? strdup(name) : stem(f->path); /* a bare tensor is named by the file's stem */
    if (!own) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", f->path);
    uint64_t last = t->offset, numel = 1;
    int empty = 0, contiguous = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        if (!t->size[d]) empty = 1;
        if (t->size[d] > 1 && t->stride[d] != numel) contiguous = 0;
        if (t->size[d] && t->stride[d] && (t->size[d] - 1 > (UINT64_MAX - last) / t->stride[d])) last = UINT64_MAX;
        else if (last != UINT64_MAX) last += (t->size[d] ? t->size[d] - 1 : 0) * t->stride[d];
        numel = t->size[d] && numel > UINT64_MAX / t->size[d] ? UINT64_MAX : numel * t->size[d];
    }
    if (!empty && last >= s->numel) {
        tsc_status_t st = tsc_error_set(TSC_ERR_FORMAT, "%s: tensor %s reaches element %llu of storage '%s', which holds %llu "
                                        "(a forged size, stride or offset)", f->path, tsc_import_quote(own, q),
                                        last == UINT64_MAX ? 0ull : (unsigned long long)last, s->key, (unsigned long long)s->numel);
        free(own);
        return st;
    }
    tsc_tensor_info_t *ti;
    tsc_status_t st = (int)s->fmt < 0 ? add_other(f, &ti) : add_tensor(f, &ti);
    if (st) return free(own), st;
    ti->name = own;
    ti->rank = t->rank;
    for (int d = 0; d < t->rank; d++) ti->dims[d] = t->size[d];
    if (!(ti->dtype = strdup(s->type))) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", f->path);
    if ((int)s->fmt < 0) return TSC_OK;
    ti->fmt = s->fmt;
    if (tensor_size(f, ti)) return TSC_ERR_FORMAT;
    src_t *sr = &f->src[f->n - 1];
    sr->member = member;
    if (contiguous || empty) {
        sr->base = base + t->offset * s->elsize;
        ti->offset = member < 0 ? sr->base : f->zip.m[member].method ? UINT64_MAX : f->zip.m[member].data + sr->base;
    } else {
        sr->base = base, sr->strided = 1, sr->elem0 = t->offset;
        memcpy(sr->stride, t->stride, sizeof sr->stride);
        ti->offset = UINT64_MAX;
    }
    return TSC_OK;
}

static const char *const pt_advice = "load it in Python yourself and save its tensors with torch.save(model.state_dict()) "
                                     "or as safetensors";

/* The zip format (torch >= 1.6): PREFIX/data.pkl, PREFIX/data/<key> for each storage. */
static tsc_status_t pt_zip_open(tsc_tensor_file_t *f) {
    tsc_status_t st = tsc_zip_open(&f->zip, f->fd, f->size, f->path);
    f->has_zip = 1;
    if (st) return st;
    if (!f->zip.n) return tsc_error_set(TSC_ERR_FORMAT, "%s: an empty zip archive, not a torch file", f->path);
    const char *first = f->zip.m[0].name, *slash = strchr(first, '/');
    if (!slash) return tsc_error_set(TSC_ERR_FORMAT, "%s: not a torch.save archive (its members are not in one folder)", f->path);
    size_t pl = (size_t)(slash - first) + 1;
    char *name = malloc(pl + 64 + 4096);
    if (!name) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", f->path);
    for (int i = 0; i < f->zip.n; i++) {
        const char *m = f->zip.m[i].name;
        if (strncmp(m, first, pl)) continue;
        if (!strcmp(m + pl, "constants.pkl") || !strcmp(m + pl, "bytecode.pkl") || !strncmp(m + pl, "code/", 5)) {
            free(name);
            return tsc_error_set(TSC_ERR_FORMAT, "%s: a TorchScript archive (torch.jit.save): it holds code, which tilescope never "
                                 "loads; %s", f->path, pt_advice);
        }
    }
    snprintf(name, pl + 64, "%.*sbyteorder", (int)pl, first);
    int bo = tsc_zip_find(&f->zip, name);
    char order[8] = "";
    if (bo >= 0 && (f->zip.m[bo].usize > 7 || (st = tsc_zip_read(&f->zip, bo, 0, f->zip.m[bo].usize, order)) || strcmp(order, "little")))
        return free(name), st ? st : tsc_error_set(TSC_ERR_FORMAT, "%s: saved as big-endian (byteorder): not read", f->path);
    snprintf(name, pl + 64, "%.*sdata.pkl", (int)pl, first);
    int pk = tsc_zip_find(&f->zip, name);
    if (pk < 0) {
        free(name);
        return tsc_error_set(TSC_ERR_FORMAT, "%s: a zip archive without data.pkl: not a torch.save file", f->path);
    }
    uint64_t n = f->zip.m[pk].usize;
    unsigned char *pkl = NULL;
    if (!(st = tsc_mem_check(n * 2, "the file's pickle")) && !(pkl = malloc(n ? (size_t)n : 1)))
        st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", f->path);
    if (!st) st = tsc_zip_read(&f->zip, pk, 0, n, pkl);
    char what[4600];
    snprintf(what, sizeof what, "%s: %s", f->path, name);
    tsc_pt_objects_t o;
    memset(&o, 0, sizeof o);
    if (!st) st = tsc_pt_unpickle(pkl, (size_t)n, what, TSC_PT_OBJECTS, &o, NULL, NULL);
    free(pkl);
    int *member = st ? NULL : malloc(sizeof *member * (size_t)(o.n_storage + 1));
    if (!st && !member) st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", f->path);
    char q[TSC_IMPORT_QUOTE_MAX];
    for (int i = 0; !st && i < o.n_storage; i++) {
        const tsc_pt_storage_t *s = &o.storage[i];
        snprintf(name, pl + 64 + 4096, "%.*sdata/%.4000s", (int)pl, first, s->key);
        if ((member[i] = tsc_zip_find(&f->zip, name)) < 0)
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: storage %s has no member %s", f->path, tsc_import_quote(s->key, q), name);
        else if (s->numel > UINT64_MAX / s->elsize || f->zip.m[member[i]].usize < s->numel * s->elsize)
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: storage %s declares %llu elements of %u bytes, its member holds %llu bytes "
                               "(truncated or forged)", f->path, tsc_import_quote(s->key, q), (unsigned long long)s->numel,
                               s->elsize, (unsigned long long)f->zip.m[member[i]].usize);
    }
    for (int i = 0; !st && i < o.n_tensor; i++)
        st = pt_tensor(f, &o.tensor[i], &o.storage[o.tensor[i].storage], member[o.tensor[i].storage], 0);
    free(member), free(name);
    tsc_pt_objects_free(&o);
    return st ? st : check_names(f);
}

static const tsc_pt_storage_t *sort_storages;
static int cmp_storage_key(const void *a, const void *b) {
    return strcmp(sort_storages[*(const int *)a].key, sort_storages[*(const int *)b].key);
}

/* The legacy format (torch < 1.6, or _use_new_zipfile_serialization=False): five pickles (magic
 * number, protocol version, sys_info, the objects, the storage keys), then for each key in that
 * order an 8-byte element count and the storage's bytes. The pickles are read through a window of
 * the file that grows while a pickle runs past it. */
static tsc_status_t pt_legacy_open(tsc_tensor_file_t *f) {
    uint64_t window = f->size < (1u << 20) ? f->size : (1u << 20);
    tsc_pt_objects_t o;
    tsc_pt_keys_t keys;
    memset(&o, 0, sizeof o), memset(&keys, 0, sizeof keys);
    size_t pos;
    tsc_status_t st;
    for (;;) {
        unsigned char *buf = NULL;
        if (!(st = tsc_mem_check(window * 2, "the file's pickles")) && !(buf = malloc(window ? (size_t)window : 1)))
            st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", f->path);
        if (!st) st = read_at(f, buf, window, 0, "the pickles");
        pos = 0;
        int short_input = 0;
        static const int kinds[5] = {TSC_PT_MAGIC, TSC_PT_PROTOCOL, TSC_PT_SYSINFO, TSC_PT_OBJECTS, TSC_PT_KEYS};
        for (int k = 0; !st && k < 5; k++) {
            size_t used;
            st = tsc_pt_unpickle(buf + pos, (size_t)(window - pos), f->path, kinds[k], &o, &keys, &used);
            if (used == (size_t)-1) short_input = 1;
            else pos += used;
        }
        free(buf);
        if (!(st && short_input && window < f->size)) break;
        tsc_pt_objects_free(&o), tsc_pt_keys_free(&keys);
        window = f->size - window < 3 * window ? f->size : 4 * window;
    }
    if (st) return tsc_pt_objects_free(&o), tsc_pt_keys_free(&keys), st;
    /* The storage records, in the key list's order. */
    int *ix = malloc(sizeof *ix * (size_t)(o.n_storage + 1));
    uint64_t *base = calloc((size_t)o.n_storage + 1, sizeof *base);
    char q[TSC_IMPORT_QUOTE_MAX];
    if (!ix || !base) st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", f->path);
    for (int i = 0; !st && i < o.n_storage; i++) ix[i] = i;
    sort_storages = o.storage;
    if (!st) qsort(ix, (size_t)o.n_storage, sizeof *ix, cmp_storage_key);
    uint64_t at = pos;
    for (int k = 0; !st && k < keys.n; k++) {
        int lo = 0, hi = o.n_storage - 1, s = -1;
        while (lo <= hi && s < 0) {
            int mid = lo + (hi - lo) / 2, c = strcmp(o.storage[ix[mid]].key, keys.key[k]);
            if (!c) s = ix[mid];
            else if (c < 0) lo = mid + 1;
            else hi = mid - 1;
        }
        if (s < 0) {
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: the key list names storage %s, which no tensor uses", f->path,
                               tsc_import_quote(keys.key[k], q));
            break;
        }
        const tsc_pt_storage_t *sg = &o.storage[s];
        unsigned char n8[8];
        if ((st = read_at(f, n8, 8, at, "a storage record"))) break;
        uint64_t numel = 0;
        for (int b = 7; b >= 0; b--) numel = numel << 8 | n8[b];
        if (numel != sg->numel || base[s]) {
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: storage %s: its record holds %llu elements, the pickle declares %llu%s", f->path,
                               tsc_import_quote(sg->key, q), (unsigned long long)numel, (unsigned long long)sg->numel,
                               base[s] ? " (or it is recorded twice)" : "");
            break;
        }
        if (numel > (f->size - at - 8) / sg->elsize) {
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: storage %s declares %llu elements of %u bytes, the file ends first (truncated or forged)",
                               f->path, tsc_import_quote(sg->key, q), (unsigned long long)numel, sg->elsize);
            break;
        }
        base[s] = at + 8;
        at += 8 + numel * sg->elsize;
    }
    for (int i = 0; !st && i < o.n_tensor; i++) {
        int s = o.tensor[i].storage;
        if (!base[s])
            st = tsc_error_set(TSC_ERR_FORMAT, "%s: storage %s of tensor %s has no data record", f->path,
                               tsc_import_quote(o.storage[s].key, q), tsc_import_quote(o.tensor[i].name, q));
        else st = pt_tensor(f, &o.tensor[i], &o.storage[s], -1, base[s]);
    }
    free(ix), free(base);
    tsc_pt_objects_free(&o), tsc_pt_keys_free(&keys);
    return st ? st : check_names(f);
}

static tsc_status_t pt_open(tsc_tensor_file_t *f) {
    unsigned char head[4] = {0};
    if (f->size < 4 || read_at(f, head, 4, 0, "the first bytes"))
        return tsc_error_set(TSC_ERR_FORMAT, "%s: %llu bytes: not a torch file", f->path, (unsigned long long)f->size);
    if (tsc_zip_sniff(head, 4)) return pt_zip_open(f);
    if (head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) return pt_legacy_open(f);
    unsigned char tar[6] = {0};
    if (f->size >= 263 && !read_at(f, tar, 5, 257, "the first bytes") && !memcmp(tar, "ustar", 5))
        return tsc_error_set(TSC_ERR_FORMAT, "%s: the tar format of torch before 0.4 is not read; %s", f->path, pt_advice);
    return tsc_error_set(TSC_ERR_FORMAT, "%s: not a torch file (neither a zip archive nor a pickle)", f->path);
}

/* ---------------------------------------------------------------- the file */

/* The formats, by extension: everything that routes a file derives from this table. */
static const struct {
    const char *ext;
    tsc_status_t (*open)(tsc_tensor_file_t *f);
} formats[] = {
    {".safetensors", st_open}, {".npy", npy_open}, {".npz", npz_open}, {".pt", pt_open}, {".pth", pt_open}, {".bin", pt_open},
};
#define N_FORMATS (int)(sizeof formats / sizeof formats[0])

static int has_ext(const char *path, const char *ext) {
    size_t n = strlen(path), e = strlen(ext);
    return n > e && !strcasecmp(path + n - e, ext);
}

const char *tsc_tensor_file_types(void) {
    static char list[128];
    if (!list[0])
        for (int i = 0; i < N_FORMATS; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? " " : "", formats[i].ext);
    return list;
}

int tsc_tensor_file_known(const char *path) {
    for (int i = 0; path && i < N_FORMATS; i++)
        if (has_ext(path, formats[i].ext)) return 1;
    return 0;
}

tsc_status_t tsc_tensor_file_open(tsc_tensor_file_t **out, const char *path) {
    if (!out || !path) return tsc_error_set(TSC_ERR_ARG, "tsc_tensor_file_open: NULL argument");
    *out = NULL;
    int kind = 0;
    while (kind < N_FORMATS && !has_ext(path, formats[kind].ext)) kind++;
    if (kind == N_FORMATS) return tsc_error_set(TSC_ERR_UNSUPPORTED, "%s: not a tensor file (%s)", path, tsc_tensor_file_types());
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
    tsc_status_t st = formats[kind].open(f);
    if (st) return tsc_tensor_file_close(f), st;
    *out = f;
    return TSC_OK;
}

void tsc_tensor_file_close(tsc_tensor_file_t *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    for (int i = 0; i < f->n; i++) free((char *)f->t[i].name), free((char *)f->t[i].dtype);
    for (int i = 0; i < f->n_other; i++) free((char *)f->other[i].name), free((char *)f->other[i].dtype);
    if (f->has_zip) tsc_zip_close(&f->zip);
    free(f->t), free(f->src), free(f->other);
    free(f->path);
    free(f);
}

const char *tsc_tensor_file_path(const tsc_tensor_file_t *f) { return f ? f->path : ""; }
int tsc_tensor_file_count(const tsc_tensor_file_t *f) { return f ? f->n : 0; }
int tsc_tensor_file_other_count(const tsc_tensor_file_t *f) { return f ? f->n_other : 0; }

const tsc_tensor_info_t *tsc_tensor_file_info(const tsc_tensor_file_t *f, int i) {
    return f && i >= 0 && i < f->n ? &f->t[i] : NULL;
}

const tsc_tensor_info_t *tsc_tensor_file_other(const tsc_tensor_file_t *f, int i) {
    return f && i >= 0 && i < f->n_other ? &f->other[i] : NULL;
}

/* A strided tensor: the span of the storage it reaches, read once, gathered into buf. */
static tsc_status_t read_strided(tsc_tensor_file_t *f, const tsc_tensor_info_t *t, const src_t *s, void *buf, const char *what) {
    size_t es = tsc_format_size(t->fmt);
    uint64_t span = 1, count = 1;
    for (int d = 0; d < t->rank; d++) span += (t->dims[d] - 1) * s->stride[d], count *= t->dims[d];
    if (!count) return TSC_OK;
    tsc_status_t st = tsc_mem_check(span * es + t->nbytes, "one strided tensor of the file");
    unsigned char *tmp = st ? NULL : malloc((size_t)(span * es));
    if (!st && !tmp) st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", f->path);
    if (!st) st = read_src(f, s->member, s->base + s->elem0 * es, span * es, tmp, what);
    uint64_t idx[TSC_TENSOR_RANK_MAX] = {0}, at = 0;
    for (uint64_t k = 0; !st && k < count; k++) {
        memcpy((unsigned char *)buf + k * es, tmp + at * es, es);
        for (int d = t->rank - 1; d >= 0; d--) { /* the odometer: the last dimension fastest */
            at += s->stride[d];
            if (++idx[d] < t->dims[d]) break;
            at -= idx[d] * s->stride[d];
            idx[d] = 0;
        }
    }
    free(tmp);
    return st;
}

tsc_status_t tsc_tensor_file_read(tsc_tensor_file_t *f, int i, void *buf) {
    if (!f || i < 0 || i >= f->n || (!buf && f->t[i].nbytes))
        return tsc_error_set(TSC_ERR_ARG, "tsc_tensor_file_read: bad tensor index or buffer");
    char q[TSC_IMPORT_QUOTE_MAX], what[TSC_IMPORT_QUOTE_MAX + 16];
    snprintf(what, sizeof what, "tensor %s", tsc_import_quote(f->t[i].name, q));
    const src_t *s = &f->src[i];
    if (s->strided) return read_strided(f, &f->t[i], s, buf, what);
    return read_src(f, s->member, s->base, f->t[i].nbytes, buf, what);
}

static void info_json(tsc_json_t *j, const tsc_tensor_info_t *t, int stored) {
    int64_t dims[TSC_TENSOR_RANK_MAX];
    for (int d = 0; d < t->rank; d++) dims[d] = (int64_t)t->dims[d];
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "name", t->name);
    tsc_json_kv_string(j, "dtype", t->dtype);
    if (stored) tsc_json_kv_string(j, "format", tsc_format_name(t->fmt));
    tsc_json_kv_ints(j, "shape", dims, (size_t)t->rank);
    if (stored) {
        tsc_json_kv_int(j, "offset", t->offset == UINT64_MAX ? -1 : (int64_t)t->offset);
        tsc_json_kv_int(j, "nbytes", (int64_t)t->nbytes);
    }
    tsc_json_object_end(j);
}

void tsc_tensor_file_json(const tsc_tensor_file_t *f, tsc_json_t *j) {
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "path", tsc_tensor_file_path(f));
    tsc_json_key(j, "tensors");
    tsc_json_array_begin(j);
    for (int i = 0; i < tsc_tensor_file_count(f); i++) info_json(j, &f->t[i], 1);
    tsc_json_array_end(j);
    tsc_json_key(j, "other");
    tsc_json_array_begin(j);
    for (int i = 0; i < tsc_tensor_file_other_count(f); i++) info_json(j, &f->other[i], 0);
    tsc_json_array_end(j);
    tsc_json_object_end(j);
}
