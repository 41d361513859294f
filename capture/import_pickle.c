/* import_pickle.c: the restricted unpickler that reads torch .pt files (import_internal.h).
 *
 * A pickle is a program for a stack machine, and Python's unpickler runs whatever callables it
 * names. This one runs none: it knows the opcodes torch.save writes (protocol 2 to 5), builds plain
 * values from them, and recognises by name the handful of globals that wrap a tensor. REDUCE on
 * those is interpreted here (_rebuild_tensor_v2 becomes a tensor record: storage, offset, sizes,
 * strides); every other global, class-building opcode (INST, OBJ, NEWOBJ, NEWOBJ_EX), extension
 * code and text opcode is refused with its byte offset. BUILD's state is dropped (no __setstate__
 * exists to call). Memory: every value lives in one arena capped from the pickle's size and the
 * memory budget, memo indices are bounded by the opcodes read, and the object graph is walked with
 * a depth and a visit bound (shared references cannot make the walk exponential). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import_internal.h"
#include "tsc_mem.h"

enum { V_NONE, V_BOOL, V_INT, V_BIGINT, V_FLOAT, V_STR, V_BYTES, V_TUPLE, V_LIST, V_DICT, V_SET, V_GLOBAL, V_STORAGE, V_TENSOR };
static const char *const kind_name[] = {"None", "bool", "int", "int", "float", "str", "bytes", "tuple", "list", "dict", "set",
                                        "global", "storage", "tensor"};

typedef struct val val_t;
struct val {
    int kind;
    int64_t i;          /* BOOL, INT; GLOBAL: its row; STORAGE, TENSOR: the record's index */
    double f;
    const char *s;      /* STR, BYTES, BIGINT (little-endian two's complement); NUL-terminated */
    size_t len;
    val_t **it;         /* TUPLE, LIST, SET: items; DICT: key, value, key, value, ... */
    size_t n, cap;
};

/* The globals a torch.save pickle names. */
enum { G_ODICT, G_REBUILD_V2, G_REBUILD, G_PARAM, G_FROM_TYPE, G_TYPE, G_SIZE, G_STORAGE };
static const struct {
    const char *mod, *name;
    int role;
} globals[] = {
    {"collections", "OrderedDict", G_ODICT},
    {"torch._utils", "_rebuild_tensor_v2", G_REBUILD_V2},
    {"torch._utils", "_rebuild_tensor", G_REBUILD},
    {"torch._utils", "_rebuild_parameter", G_PARAM},
    {"torch._utils", "_rebuild_parameter_with_state", G_PARAM},
    {"torch._tensor", "_rebuild_from_type_v2", G_FROM_TYPE},
    {"torch", "Tensor", G_TYPE},
    {"torch.nn.parameter", "Parameter", G_TYPE},
    {"torch", "Size", G_SIZE},
};
#define N_GLOBALS (int)(sizeof globals / sizeof globals[0])

/* torch's storage types (torch/storage.py), the element format tilescope stores them as (-1: none)
 * and their element size. */
static const struct {
    const char *name;
    int fmt;
    unsigned elsize;
} storages[] = {
    {"DoubleStorage", TSC_FMT_FP64, 8}, {"FloatStorage", TSC_FMT_FP32, 4}, {"HalfStorage", TSC_FMT_FP16, 2},
    {"BFloat16Storage", TSC_FMT_BF16, 2}, {"LongStorage", -1, 8}, {"IntStorage", -1, 4}, {"ShortStorage", -1, 2},
    {"CharStorage", -1, 1}, {"ByteStorage", -1, 1}, {"BoolStorage", -1, 1}, {"ComplexFloatStorage", -1, 8},
    {"ComplexDoubleStorage", -1, 16}, {"QInt8Storage", -1, 1}, {"QUInt8Storage", -1, 1}, {"QInt32Storage", -1, 4},
    {"QUInt4x2Storage", -1, 1}, {"QUInt2x4Storage", -1, 1},
};
#define N_STORAGES (int)(sizeof storages / sizeof storages[0])

typedef struct blk {
    struct blk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} blk_t;

typedef struct {
    const unsigned char *p;
    size_t n, pos, op_at;
    const char *what;
    tsc_status_t st;        /* the first error */
    blk_t *arena;
    uint64_t arena_total, arena_cap;
    val_t **stack;
    size_t sp, stack_cap;
    size_t *marks;
    size_t n_marks, marks_cap;
    val_t **memo;
    size_t memo_cap, memo_count;
    int ran_out;            /* the input ended inside an opcode (the caller may retry with more) */
    uint64_t ops;
    tsc_pt_objects_t *obj;  /* storages and tensors created */
    size_t obj_cap_s, obj_cap_t;
    int *hash;              /* storage key -> index (open addressing), hash_cap slots */
    int hash_cap;
} vm_t;

/* The limits on input-sized structures. */
#define DEPTH_MAX 64
#define VISIT_MAX (1u << 22)
#define MEMO_MAX (1u << 24)

static void *fail(vm_t *v, tsc_status_t code, const char *fmt, const char *detail) {
    if (!v->st) {
        char msg[256];
        snprintf(msg, sizeof msg, fmt, detail ? detail : "");
        v->st = tsc_error_set(code, "%s: at byte %zu: %s", v->what, v->op_at, msg);
    }
    return NULL;
}

/* Makes room for element n of the malloc'ed array *p (doubling from 16); 0, or -1 with the error set. */
static int grow(vm_t *v, void **p, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return 0;
    size_t c = *cap ? 2 * *cap : 16;
    void *q = realloc(*p, c * elem);
    if (!q) return fail(v, TSC_ERR_NOMEM, "out of memory%s", ""), -1;
    *p = q, *cap = c;
    return 0;
}

static void *arena_alloc(vm_t *v, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!v->arena || v->arena->cap - v->arena->used < n) {
        size_t cap = n > (1u << 20) ? n : (1u << 20);
        if (v->arena_total + cap > v->arena_cap)
            return fail(v, TSC_ERR_UNSUPPORTED, "the pickle's objects need more than %s of memory", "its size allows");
        blk_t *b = malloc(sizeof *b + cap);
        if (!b) return fail(v, TSC_ERR_NOMEM, "out of memory%s", "");
        b->next = v->arena, b->used = 0, b->cap = cap;
        v->arena = b, v->arena_total += cap;
    }
    void *r = v->arena->data + v->arena->used;
    v->arena->used += n;
    memset(r, 0, n);
    return r;
}

static val_t *mk(vm_t *v, int kind) {
    val_t *x = arena_alloc(v, sizeof *x);
    if (x) x->kind = kind;
    return x;
}

static int add_item(vm_t *v, val_t *c, val_t *x) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 4;
        val_t **it = arena_alloc(v, cap * sizeof *it);
        if (!it) return -1;
        if (c->n) memcpy(it, c->it, c->n * sizeof *it);
        c->it = it, c->cap = cap;
    }
    c->it[c->n++] = x;
    return 0;
}

static int push(vm_t *v, val_t *x) {
    if (!x) return -1;
    if (grow(v, (void **)&v->stack, &v->stack_cap, v->sp, sizeof *v->stack)) return -1;
    v->stack[v->sp++] = x;
    return 0;
}

static val_t *pop(vm_t *v) {
    size_t floor = v->n_marks ? v->marks[v->n_marks - 1] : 0;
    if (v->sp <= floor) return fail(v, TSC_ERR_FORMAT, "an opcode pops an empty stack%s", "");
    return v->stack[--v->sp];
}

static val_t *top(vm_t *v) {
    size_t floor = v->n_marks ? v->marks[v->n_marks - 1] : 0;
    return v->sp > floor ? v->stack[v->sp - 1] : fail(v, TSC_ERR_FORMAT, "an opcode needs a value on an empty stack%s", "");
}

/* Pops the items above the last mark into a new value of kind; pops the mark. */
static val_t *pop_mark(vm_t *v, int kind) {
    if (!v->n_marks) return fail(v, TSC_ERR_FORMAT, "an opcode needs a MARK%s", "");
    size_t m = v->marks[--v->n_marks];
    val_t *c = mk(v, kind);
    if (!c) return NULL;
    if (v->sp > m) {
        c->it = arena_alloc(v, (v->sp - m) * sizeof *c->it);
        if (!c->it) return NULL;
        memcpy(c->it, v->stack + m, (v->sp - m) * sizeof *c->it);
        c->n = c->cap = v->sp - m;
    }
    v->sp = m;
    return c;
}

static const unsigned char *take(vm_t *v, size_t k) {
    if (k > v->n - v->pos) return v->ran_out = 1, fail(v, TSC_ERR_FORMAT, "the pickle ends inside an opcode%s", "");
    const unsigned char *r = v->p + v->pos;
    v->pos += k;
    return r;
}

static uint64_t uint_le(const unsigned char *p, int k) {
    uint64_t x = 0;
    for (int i = k - 1; i >= 0; i--) x = x << 8 | p[i];
    return x;
}

static val_t *mk_bytes(vm_t *v, int kind, uint64_t len) {
    if (len > v->n - v->pos) return v->ran_out = 1, fail(v, TSC_ERR_FORMAT, "a string runs past the end of the pickle%s", "");
    const unsigned char *s = take(v, (size_t)len);
    val_t *x = s ? mk(v, kind) : NULL;
    char *c = x ? arena_alloc(v, (size_t)len + 1) : NULL;
    if (!c) return NULL;
    memcpy(c, s, (size_t)len);
    c[len] = '\0';
    x->s = c, x->len = (size_t)len;
    return x;
}

static val_t *mk_int(vm_t *v, int64_t i, int kind) {
    val_t *x = mk(v, kind);
    if (x) x->i = i;
    return x;
}

/* LONG1 / LONG4: at most 8 bytes become an int, longer ones stay bytes (the legacy magic number). */
static val_t *mk_long(vm_t *v, uint64_t len) {
    if (len > 8) return mk_bytes(v, V_BIGINT, len);
    const unsigned char *b = take(v, (size_t)len);
    if (!b) return NULL;
    uint64_t u = len ? uint_le(b, (int)len) : 0;
    if (len && len < 8 && (b[len - 1] & 0x80)) u |= ~0ull << (8 * len);
    return mk_int(v, (int64_t)u, V_INT);
}

static val_t *mk_global(vm_t *v, const char *mod, size_t ml, const char *name, size_t nl) {
    for (int g = 0; g < N_GLOBALS; g++)
        if (strlen(globals[g].mod) == ml && !memcmp(globals[g].mod, mod, ml) && strlen(globals[g].name) == nl &&
            !memcmp(globals[g].name, name, nl))
            return mk_int(v, g, V_GLOBAL);
    if (ml == 5 && !memcmp(mod, "torch", 5))
        for (int s = 0; s < N_STORAGES; s++)
            if (strlen(storages[s].name) == nl && !memcmp(storages[s].name, name, nl)) return mk_int(v, N_GLOBALS + s, V_GLOBAL);
    char both[200], q[TSC_IMPORT_QUOTE_MAX];
    snprintf(both, sizeof both, "%.*s.%.*s", (int)(ml > 90 ? 90 : ml), mod, (int)(nl > 90 ? 90 : nl), name);
    return fail(v, TSC_ERR_FORMAT,
                "the pickle names the global %s, which a tensor file does not need: refused (tilescope never runs code "
                "from a file; save the tensors with torch.save(state_dict) or as safetensors)",
                tsc_import_quote(both, q));
}

static int role(const val_t *x) {
    return x->kind != V_GLOBAL ? -1 : x->i < N_GLOBALS ? globals[x->i].role : G_STORAGE;
}

/* A non-negative integer from value x (what names it in the message). */
static int get_uint(vm_t *v, const val_t *x, const char *what, uint64_t *out) {
    if (!x || x->kind != V_INT || x->i < 0 || x->i > (int64_t)1 << 62) return fail(v, TSC_ERR_FORMAT, "%s is not a non-negative integer", what), -1;
    *out = (uint64_t)x->i;
    return 0;
}

static uint32_t hash_str(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* The storage record of key, created on first sight; the same key must repeat its type and size. */
static val_t *storage(vm_t *v, const char *key, int type, uint64_t numel) {
    tsc_pt_objects_t *o = v->obj;
    if (2 * (o->n_storage + 1) > v->hash_cap) {
        int cap = v->hash_cap ? 2 * v->hash_cap : 64;
        int *h = malloc(sizeof *h * (size_t)cap);
        if (!h) return fail(v, TSC_ERR_NOMEM, "out of memory%s", "");
        for (int i = 0; i < cap; i++) h[i] = -1;
        for (int i = 0; i < o->n_storage; i++) {
            uint32_t k = hash_str(o->storage[i].key) & (uint32_t)(cap - 1);
            while (h[k] >= 0) k = (k + 1) & (uint32_t)(cap - 1);
            h[k] = i;
        }
        free(v->hash);
        v->hash = h, v->hash_cap = cap;
    }
    uint32_t k = hash_str(key) & (uint32_t)(v->hash_cap - 1);
    for (; v->hash[k] >= 0; k = (k + 1) & (uint32_t)(v->hash_cap - 1)) {
        tsc_pt_storage_t *s = &o->storage[v->hash[k]];
        if (strcmp(s->key, key)) continue;
        if (strcmp(s->type, storages[type].name) || s->numel != numel)
            return fail(v, TSC_ERR_FORMAT, "storage '%s' is declared twice with different types or sizes", key);
        return mk_int(v, v->hash[k], V_STORAGE);
    }
    if (grow(v, (void **)&o->storage, &v->obj_cap_s, (size_t)o->n_storage, sizeof *o->storage)) return NULL;
    tsc_pt_storage_t *s = &o->storage[o->n_storage];
    if (!(s->key = strdup(key))) return fail(v, TSC_ERR_NOMEM, "out of memory%s", "");
    s->type = storages[type].name, s->fmt = (tsc_format_t)storages[type].fmt, s->elsize = storages[type].elsize, s->numel = numel;
    v->hash[k] = o->n_storage;
    return mk_int(v, o->n_storage++, V_STORAGE);
}

/* BINPERSID: ('storage', torch.XStorage, key, location, numel[, view_metadata]). */
static val_t *persistent(vm_t *v, val_t *pid) {
    if (!pid || pid->kind != V_TUPLE || pid->n < 5 || pid->n > 6 || pid->it[0]->kind != V_STR || strcmp(pid->it[0]->s, "storage"))
        return fail(v, TSC_ERR_FORMAT, "a persistent id that is not ('storage', type, key, location, size)%s", "");
    val_t *type = pid->it[1], *key = pid->it[2];
    uint64_t numel;
    if (role(type) != G_STORAGE) return fail(v, TSC_ERR_FORMAT, "a persistent id whose type is not a torch storage type%s", "");
    if (key->kind != V_STR || !key->len || strlen(key->s) != key->len || strchr(key->s, '/'))
        return fail(v, TSC_ERR_FORMAT, "a storage key that is not a plain name%s", "");
    if (get_uint(v, pid->it[4], "a storage's size", &numel)) return NULL;
    if (pid->n == 6 && pid->it[5]->kind != V_NONE)
        return fail(v, TSC_ERR_FORMAT, "a storage view (the format of torch before 1.0) is not read%s", "");
    return storage(v, key->s, (int)type->i - N_GLOBALS, numel);
}

/* _rebuild_tensor(_v2)(storage, storage_offset, size, stride, ...): a tensor record. */
static val_t *tensor(vm_t *v, const val_t *a) {
    if (a->n < 4 || a->it[0]->kind != V_STORAGE || a->it[2]->kind != V_TUPLE || a->it[3]->kind != V_TUPLE)
        return fail(v, TSC_ERR_FORMAT, "_rebuild_tensor's arguments are not (storage, offset, size, stride, ...)%s", "");
    const val_t *size = a->it[2], *stride = a->it[3];
    if (size->n != stride->n || size->n > TSC_TENSOR_RANK_MAX)
        return fail(v, TSC_ERR_FORMAT, "a tensor's size and stride differ in length or exceed rank 16%s", "");
    tsc_pt_objects_t *o = v->obj;
    if (grow(v, (void **)&o->tensor, &v->obj_cap_t, (size_t)o->n_tensor, sizeof *o->tensor)) return NULL;
    tsc_pt_tensor_t *t = &o->tensor[o->n_tensor];
    memset(t, 0, sizeof *t);
    t->storage = (int)a->it[0]->i, t->rank = (int)size->n;
    if (get_uint(v, a->it[1], "a tensor's storage offset", &t->offset)) return NULL;
    for (int d = 0; d < t->rank; d++)
        if (get_uint(v, size->it[d], "a tensor's size", &t->size[d]) || get_uint(v, stride->it[d], "a tensor's stride", &t->stride[d]))
            return NULL;
    return mk_int(v, o->n_tensor++, V_TENSOR);
}

/* REDUCE: callable(*args), for the callables a tensor file needs. */
static val_t *reduce(vm_t *v, val_t *fn, val_t *args, int depth) {
    if (!fn || !args) return NULL;
    if (args->kind != V_TUPLE) return fail(v, TSC_ERR_FORMAT, "REDUCE's arguments are not a tuple%s", "");
    switch (role(fn)) {
    case G_ODICT:
        if (args->n) return fail(v, TSC_ERR_FORMAT, "OrderedDict called with arguments (only an empty one is built): refused%s", "");
        return mk(v, V_DICT);
    case G_REBUILD_V2:
    case G_REBUILD:
        return tensor(v, args);
    case G_PARAM:
        if (args->n < 1 || args->it[0]->kind != V_TENSOR) return fail(v, TSC_ERR_FORMAT, "_rebuild_parameter without a tensor%s", "");
        return args->it[0];
    case G_SIZE:
        if (args->n != 1 || args->it[0]->kind != V_TUPLE) return fail(v, TSC_ERR_FORMAT, "torch.Size without a tuple%s", "");
        return args->it[0];
    case G_FROM_TYPE: /* (func, type, args, state): func(*args) for a plain tensor or parameter type */
        if (depth > 4 || args->n != 4 || role(args->it[1]) != G_TYPE)
            return fail(v, TSC_ERR_FORMAT, "_rebuild_from_type_v2 for a tensor subclass%s", "");
        return reduce(v, args->it[0], args->it[2], depth + 1);
    default: {
        char what[64];
        snprintf(what, sizeof what, "%s", fn->kind == V_GLOBAL ? "this global" : kind_name[fn->kind]);
        return fail(v, TSC_ERR_FORMAT, "REDUCE calls %s, which builds no tensor: refused", what);
    }
    }
}

static int memo_put(vm_t *v, uint64_t idx, val_t *x) {
    if (!x) return -1;
    if (idx >= MEMO_MAX || idx > 2 * v->ops + 1024) return fail(v, TSC_ERR_FORMAT, "a memo index beyond what the pickle can use%s", ""), -1;
    if (idx >= v->memo_cap) {
        size_t cap = v->memo_cap ? v->memo_cap : 256;
        while (cap <= idx) cap *= 2;
        val_t **m = realloc(v->memo, cap * sizeof *m);
        if (!m) return fail(v, TSC_ERR_NOMEM, "out of memory%s", ""), -1;
        memset(m + v->memo_cap, 0, (cap - v->memo_cap) * sizeof *m);
        v->memo = m, v->memo_cap = cap;
    }
    v->memo_count += !v->memo[idx];
    v->memo[idx] = x;
    return 0;
}

static val_t *memo_get(vm_t *v, uint64_t idx) {
    if (idx >= v->memo_cap || !v->memo[idx]) return fail(v, TSC_ERR_FORMAT, "a memo index that was never stored%s", "");
    return v->memo[idx];
}

/* Appends the items above the mark to the list (APPENDS) or the pairs to the dict (SETITEMS). */
static int extend(vm_t *v, int kind) {
    val_t *items = pop_mark(v, V_TUPLE), *c = items ? top(v) : NULL;
    if (!c) return -1;
    if (c->kind != kind && !(kind == V_LIST && c->kind == V_SET))
        return fail(v, TSC_ERR_FORMAT, kind == V_DICT ? "SETITEMS on a %s" : "APPENDS on a %s", kind_name[c->kind]), -1;
    if (kind == V_DICT && items->n % 2) return fail(v, TSC_ERR_FORMAT, "SETITEMS with an odd number of items%s", ""), -1;
    for (size_t i = 0; i < items->n; i++)
        if (add_item(v, c, items->it[i])) return -1;
    return 0;
}

/* One opcode; 1 at STOP. */
static int step(vm_t *v, val_t **result) {
    v->op_at = v->pos;
    const unsigned char *b = take(v, 1);
    if (!b) return -1;
    v->ops++;
    unsigned char op = *b;
    val_t *x, *y;
    switch (op) {
    case 0x80: return take(v, 1) ? 0 : -1;                     /* PROTO */
    case 0x95: return take(v, 8) ? 0 : -1;                     /* FRAME: a length hint */
    case '.':                                                  /* STOP */
        if (!(*result = pop(v))) return -1;
        return 1;
    case '}': return push(v, mk(v, V_DICT));
    case ']': return push(v, mk(v, V_LIST));
    case ')': return push(v, mk(v, V_TUPLE));
    case 0x8f: return push(v, mk(v, V_SET));                   /* EMPTY_SET */
    case '(':                                                  /* MARK */
        if (grow(v, (void **)&v->marks, &v->marks_cap, v->n_marks, sizeof *v->marks)) return -1;
        v->marks[v->n_marks++] = v->sp;
        return 0;
    case 't': return push(v, pop_mark(v, V_TUPLE));
    case 'l': return push(v, pop_mark(v, V_LIST));
    case 0x91: return push(v, pop_mark(v, V_SET));             /* FROZENSET */
    case 'd':                                                  /* DICT */
        if (!(x = pop_mark(v, V_DICT))) return -1;
        if (x->n % 2) return fail(v, TSC_ERR_FORMAT, "DICT with an odd number of items%s", ""), -1;
        return push(v, x);
    case 0x85: case 0x86: case 0x87: {                          /* TUPLE1, TUPLE2, TUPLE3 */
        int k = op - 0x84;
        val_t *t = mk(v, V_TUPLE), *it[3];
        for (int i = k - 1; i >= 0; i--)
            if (!(it[i] = pop(v))) return -1;
        for (int i = 0; t && i < k; i++)
            if (add_item(v, t, it[i])) return -1;
        return push(v, t);
    }
    case 'a':                                                  /* APPEND */
        if (!(x = pop(v)) || !(y = top(v))) return -1;
        if (y->kind != V_LIST) return fail(v, TSC_ERR_FORMAT, "APPEND on a %s", kind_name[y->kind]), -1;
        return add_item(v, y, x);
    case 'e': return extend(v, V_LIST);                        /* APPENDS */
    case 0x90: return extend(v, V_LIST);                       /* ADDITEMS */
    case 's':                                                  /* SETITEM */
        if (!(y = pop(v)) || !(x = pop(v)) || !top(v)) return -1;
        if (top(v)->kind != V_DICT) return fail(v, TSC_ERR_FORMAT, "SETITEM on a %s", kind_name[top(v)->kind]), -1;
        return add_item(v, top(v), x) || add_item(v, top(v), y) ? -1 : 0;
    case 'u': return extend(v, V_DICT);                        /* SETITEMS */
    case 'X': return (b = take(v, 4)) ? push(v, mk_bytes(v, V_STR, uint_le(b, 4))) : -1;   /* BINUNICODE */
    case 0x8c: return (b = take(v, 1)) ? push(v, mk_bytes(v, V_STR, b[0])) : -1;          /* SHORT_BINUNICODE */
    case 0x8d: return (b = take(v, 8)) ? push(v, mk_bytes(v, V_STR, uint_le(b, 8))) : -1;  /* BINUNICODE8 */
    case 'T': return (b = take(v, 4)) ? push(v, mk_bytes(v, V_STR, uint_le(b, 4))) : -1;   /* BINSTRING */
    case 'U': return (b = take(v, 1)) ? push(v, mk_bytes(v, V_STR, b[0])) : -1;           /* SHORT_BINSTRING */
    case 'B': return (b = take(v, 4)) ? push(v, mk_bytes(v, V_BYTES, uint_le(b, 4))) : -1; /* BINBYTES */
    case 'C': return (b = take(v, 1)) ? push(v, mk_bytes(v, V_BYTES, b[0])) : -1;         /* SHORT_BINBYTES */
    case 0x8e: case 0x96:                                                                   /* BINBYTES8, BYTEARRAY8 */
        return (b = take(v, 8)) ? push(v, mk_bytes(v, V_BYTES, uint_le(b, 8))) : -1;
    case 'J': return (b = take(v, 4)) ? push(v, mk_int(v, (int32_t)(uint32_t)uint_le(b, 4), V_INT)) : -1;
    case 'K': return (b = take(v, 1)) ? push(v, mk_int(v, b[0], V_INT)) : -1;
    case 'M': return (b = take(v, 2)) ? push(v, mk_int(v, (int64_t)uint_le(b, 2), V_INT)) : -1;
    case 0x8a: return (b = take(v, 1)) ? push(v, mk_long(v, b[0])) : -1;                  /* LONG1 */
    case 0x8b: return (b = take(v, 4)) ? push(v, mk_long(v, uint_le(b, 4))) : -1;         /* LONG4 */
    case 'G': {                                                                             /* BINFLOAT, big-endian */
        if (!(b = take(v, 8)) || !(x = mk(v, V_FLOAT))) return -1;
        uint64_t u = 0;
        for (int i = 0; i < 8; i++) u = u << 8 | b[i];
        memcpy(&x->f, &u, 8);
        return push(v, x);
    }
    case 'N': return push(v, mk(v, V_NONE));
    case 0x88: return push(v, mk_int(v, 1, V_BOOL));
    case 0x89: return push(v, mk_int(v, 0, V_BOOL));
    case 'q': return (b = take(v, 1)) && (x = top(v)) ? memo_put(v, b[0], x) : -1;           /* BINPUT */
    case 'r': return (b = take(v, 4)) && (x = top(v)) ? memo_put(v, uint_le(b, 4), x) : -1;  /* LONG_BINPUT */
    case 0x94: return (x = top(v)) ? memo_put(v, v->memo_count, x) : -1;                  /* MEMOIZE: index len(memo) */
    case 'h': return (b = take(v, 1)) ? push(v, memo_get(v, b[0])) : -1;                  /* BINGET */
    case 'j': return (b = take(v, 4)) ? push(v, memo_get(v, uint_le(b, 4))) : -1;         /* LONG_BINGET */
    case 'c': {                                                                             /* GLOBAL "mod\nname\n" */
        const char *s = (const char *)v->p + v->pos, *end = (const char *)v->p + v->n;
        const char *nl1 = memchr(s, '\n', (size_t)(end - s)), *nl2 = nl1 ? memchr(nl1 + 1, '\n', (size_t)(end - nl1 - 1)) : NULL;
        if (!nl2) return v->ran_out = 1, fail(v, TSC_ERR_FORMAT, "GLOBAL without its two lines%s", ""), -1;
        v->pos = (size_t)(nl2 + 1 - (const char *)v->p);
        return push(v, mk_global(v, s, (size_t)(nl1 - s), nl1 + 1, (size_t)(nl2 - nl1 - 1)));
    }
    case 0x93:                                                                              /* STACK_GLOBAL */
        if (!(y = pop(v)) || !(x = pop(v))) return -1;
        if (x->kind != V_STR || y->kind != V_STR) return fail(v, TSC_ERR_FORMAT, "STACK_GLOBAL without two strings%s", ""), -1;
        return push(v, mk_global(v, x->s, x->len, y->s, y->len));
    case 'R':                                                                               /* REDUCE */
        if (!(y = pop(v)) || !(x = pop(v))) return -1;
        return push(v, reduce(v, x, y, 0));
    case 'b':                                                                               /* BUILD: state dropped */
        return pop(v) && top(v) ? 0 : -1;
    case 'Q':                                                                               /* BINPERSID */
        return (x = pop(v)) ? push(v, persistent(v, x)) : -1;
    case '0': return pop(v) ? 0 : -1;                                                       /* POP */
    case '1':                                                                               /* POP_MARK */
        return pop_mark(v, V_TUPLE) ? 0 : -1;
    case '2': return (x = top(v)) ? push(v, x) : -1;                                        /* DUP */
    case 'i': case 'o': case 0x81: case 0x92:
        return fail(v, TSC_ERR_FORMAT, "an opcode that builds an object by calling a class (%s): refused",
                    op == 'i' ? "INST" : op == 'o' ? "OBJ" : op == 0x81 ? "NEWOBJ" : "NEWOBJ_EX"), -1;
    case 0x82: case 0x83: case 0x84:
        return fail(v, TSC_ERR_FORMAT, "an extension-registry opcode (EXT%s): refused", op == 0x82 ? "1" : op == 0x83 ? "2" : "4"), -1;
    case 'P':
        return fail(v, TSC_ERR_FORMAT, "a text persistent id (PERSID)%s: refused", ""), -1;
    default: {
        char hex[8];
        snprintf(hex, sizeof hex, "0x%02x", op);
        return fail(v, TSC_ERR_FORMAT, "opcode %s is not one torch.save writes (protocols 2-5): refused", hex), -1;
    }
    }
}

/* ---------------------------------------------------------------- the object graph to named tensors */

typedef struct {
    vm_t *v;
    uint64_t visits;
    char *name;          /* the path being built */
    size_t len, cap;
    tsc_pt_tensor_t *out;
    int n;
    size_t cap_out;
} walk_t;

static int name_push(walk_t *w, const char *s, size_t n, size_t *old) {
    *old = w->len;
    size_t need = w->len + (w->len ? 1 : 0) + n + 1;
    if (need > w->cap) {
        size_t cap = need * 2;
        char *c = realloc(w->name, cap);
        if (!c) return fail(w->v, TSC_ERR_NOMEM, "out of memory%s", ""), -1;
        w->name = c, w->cap = cap;
    }
    if (w->len) w->name[w->len++] = '.';
    memcpy(w->name + w->len, s, n);
    w->len += n;
    w->name[w->len] = '\0';
    return 0;
}

static int walk(walk_t *w, const val_t *x, int depth) {
    vm_t *v = w->v;
    if (++w->visits > VISIT_MAX) return fail(v, TSC_ERR_FORMAT, "the object graph is too large to list (shared references)%s", ""), -1;
    if (depth > DEPTH_MAX) return fail(v, TSC_ERR_FORMAT, "objects nested deeper than 64%s", ""), -1;
    if (x->kind == V_TENSOR) {
        if (grow(v, (void **)&w->out, &w->cap_out, (size_t)w->n, sizeof *w->out)) return -1;
        w->out[w->n] = v->obj->tensor[x->i];
        if (!(w->out[w->n].name = strdup(w->len ? w->name : ""))) return fail(v, TSC_ERR_NOMEM, "out of memory%s", ""), -1;
        w->n++;
        return 0;
    }
    int dict = x->kind == V_DICT;
    if (!dict && x->kind != V_LIST && x->kind != V_TUPLE) return 0; /* other leaves hold no tensor */
    for (size_t i = 0; i < x->n; i += dict ? 2 : 1) {
        char num[32];
        const char *s = num;
        size_t n, old;
        const val_t *k = dict ? x->it[i] : NULL;
        if (!dict) n = (size_t)snprintf(num, sizeof num, "%zu", i);
        else if (k->kind == V_STR) s = k->s, n = strlen(k->s);
        else if (k->kind == V_INT) n = (size_t)snprintf(num, sizeof num, "%lld", (long long)k->i);
        else if (k->kind == V_BOOL || k->kind == V_NONE) s = k->kind == V_NONE ? "None" : k->i ? "True" : "False", n = strlen(s);
        else return fail(v, TSC_ERR_FORMAT, "a dict key of type %s (tensor names come from str or int keys)", kind_name[k->kind]), -1;
        if (name_push(w, s, n, &old) || walk(w, x->it[dict ? i + 1 : i], depth + 1)) return -1;
        w->len = old;
        w->name[w->len] = '\0';
    }
    return 0;
}

/* ---------------------------------------------------------------- checks of the legacy header pickles */

static tsc_status_t check_header(vm_t *v, int kind, const val_t *r, tsc_pt_keys_t *keys) {
    static const unsigned char magic[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
    if (kind == TSC_PT_MAGIC && !(r->kind == V_BIGINT && r->len == 10 && !memcmp(r->s, magic, 10)))
        return tsc_error_set(TSC_ERR_FORMAT, "%s: not a torch file (no torch.save magic number)", v->what);
    if (kind == TSC_PT_PROTOCOL && !(r->kind == V_INT && r->i == 1001))
        return tsc_error_set(TSC_ERR_FORMAT, "%s: torch legacy protocol version %lld (1001 expected)", v->what, r->kind == V_INT ? (long long)r->i : -1LL);
    if (kind == TSC_PT_SYSINFO) {
        if (r->kind != V_DICT) return tsc_error_set(TSC_ERR_FORMAT, "%s: the torch sys_info is not a dict", v->what);
        for (size_t i = 0; i + 1 < r->n; i += 2)
            if (r->it[i]->kind == V_STR && !strcmp(r->it[i]->s, "little_endian") && !(r->it[i + 1]->kind == V_BOOL && r->it[i + 1]->i))
                return tsc_error_set(TSC_ERR_FORMAT, "%s: saved on a big-endian machine: not read", v->what);
    }
    if (kind == TSC_PT_KEYS) {
        if (r->kind != V_LIST) return tsc_error_set(TSC_ERR_FORMAT, "%s: the storage key list is not a list", v->what);
        if (!(keys->key = calloc(r->n + 1, sizeof *keys->key))) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", v->what);
        for (size_t i = 0; i < r->n; i++) {
            if (r->it[i]->kind != V_STR) return tsc_error_set(TSC_ERR_FORMAT, "%s: a storage key that is not a string", v->what);
            if (!(keys->key[keys->n++] = strdup(r->it[i]->s))) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", v->what);
        }
    }
    return TSC_OK;
}

tsc_status_t tsc_pt_unpickle(const unsigned char *p, size_t n, const char *what, int kind, tsc_pt_objects_t *out,
                             tsc_pt_keys_t *keys, size_t *used) {
    tsc_pt_objects_t scratch;
    memset(&scratch, 0, sizeof scratch);
    if (keys) memset(keys, 0, sizeof *keys);
    if (kind == TSC_PT_OBJECTS) memset(out, 0, sizeof *out);
    vm_t v;
    memset(&v, 0, sizeof v);
    v.p = p, v.n = n, v.what = what, v.obj = kind == TSC_PT_OBJECTS ? out : &scratch;
    v.arena_cap = ((uint64_t)16 << 20) + 256 * (uint64_t)n;
    uint64_t budget = tsc_mem_budget() / 2;
    if (v.arena_cap > budget) v.arena_cap = budget;
    val_t *r = NULL;
    int s = 0;
    while (!s) s = step(&v, &r);
    tsc_status_t st = v.st;
    if (!st && (v.sp || v.n_marks)) st = tsc_error_set(TSC_ERR_FORMAT, "%s: values left on the stack at STOP", what);
    if (used) *used = v.ran_out ? (size_t)-1 : v.pos;
    if (!st && kind == TSC_PT_OBJECTS) {
        walk_t w = {&v, 0, NULL, 0, 0, NULL, 0, 0};
        if (walk(&w, r, 0)) st = v.st;
        for (int i = 0; i < out->n_tensor; i++) free(out->tensor[i].name); /* the anonymous records */
        free(out->tensor);
        out->tensor = w.out, out->n_tensor = w.n;
        free(w.name);
        if (st) {
            for (int i = 0; i < w.n; i++) free(w.out[i].name), w.out[i].name = NULL;
            out->n_tensor = 0;
        }
    } else if (!st) {
        st = check_header(&v, kind, r, keys);
    }
    for (blk_t *b = v.arena, *nx; b; b = nx) nx = b->next, free(b);
    free(v.stack), free(v.marks), free(v.memo), free(v.hash);
    tsc_pt_objects_free(&scratch);
    if (st && kind == TSC_PT_OBJECTS) tsc_pt_objects_free(out);
    if (st && keys) tsc_pt_keys_free(keys);
    return st;
}

void tsc_pt_objects_free(tsc_pt_objects_t *o) {
    if (!o) return;
    for (int i = 0; i < o->n_storage; i++) free(o->storage[i].key);
    for (int i = 0; i < o->n_tensor; i++) free(o->tensor[i].name);
    free(o->storage), free(o->tensor);
    memset(o, 0, sizeof *o);
}

void tsc_pt_keys_free(tsc_pt_keys_t *k) {
    if (!k) return;
    for (int i = 0; i < k->n; i++) free(k->key[i]);
    free(k->key);
    memset(k, 0, sizeof *k);
}
