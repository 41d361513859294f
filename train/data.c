/* data.c: training text (tsc_data.h): token files mapped read-only, the fixed split, the
 * counter-based batch positions, the built-in text's cache and the recorded batch order. */
#include "tsc_data.h"
#include "tsc_file.h"
#include "tsc_mem.h"
#include "tsc_strbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* llm.c's token files (dev/data/data_common.py): 256 int32 header words, then the tokens. */
enum { LLMC_HEADER_BYTES = 256 * 4 };
#define LLMC_MAGIC 20240520      /* GPT-2 tokens, version 1: uint16 */
#define LLMC_MAGIC_LLAMA3 20240801 /* Llama 3 tokens, version 7: uint32 (not read) */
#define LLMC_MAGIC_EVAL 20240522   /* evaluation examples (HellaSwag, MMLU), not a token stream */
#define KJV_RANGE "gen1:1-rev22:21"
#define KJV_NEEDS "the built-in text needs Debian's bible-kjv package (bash scripts/setup.sh installs it)"

/* A run of tokens: width 1 (a byte each) or 2 (little-endian uint16, as numpy writes them on
 * every machine llm.c and nanoGPT run on). */
typedef struct {
    const uint8_t *p;
    size_t n;
    int width;
} stream_t;

/* One mapped file: the whole file, so munmap gets the address mmap returned. */
typedef struct {
    void *base;
    size_t len;
} mapping_t;

struct tsc_data {
    mapping_t map[2];
    stream_t split[2];  /* TSC_SPLIT_TRAIN, TSC_SPLIT_VAL */
    int vocab;
    int byte_level;  /* plain text: a token is a byte (tsc_data_byte_level) */
    char desc[512];  /* "NAME: ..." (tsc_data_describe) */
    int name_len;    /* NAME's length in desc, for messages */
};

static inline int32_t tok_at(const stream_t *s, size_t i) {
    if (s->width == 1) return s->p[i];
    return (int32_t)s->p[2 * i] | (int32_t)s->p[2 * i + 1] << 8;
}

/* ---- mapping files ---- */

/* Maps path read-only. An empty file is refused here (mmap cannot map zero bytes, and an empty
 * token file is always a mistake). */
static tsc_status_t map_file(const char *path, mapping_t *m) {
    m->base = NULL;
    m->len = 0;
    tsc_status_t st = tsc_file_check_regular(path);
    if (st != TSC_OK) return st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return tsc_error_set(TSC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat s;
    if (fstat(fd, &s) != 0 || !S_ISREG(s.st_mode)) st = tsc_error_set(TSC_ERR_IO, "%s: not a regular file", path);
    else if (s.st_size == 0) st = tsc_error_set(TSC_ERR_FORMAT, "%s: empty file (no tokens)", path);
    else if ((unsigned long long)s.st_size > SIZE_MAX) st = tsc_error_set(TSC_ERR_UNSUPPORTED, "%s: too large", path);
    if (st == TSC_OK) {
        void *p = mmap(NULL, (size_t)s.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) st = tsc_error_set(TSC_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
        else m->base = p, m->len = (size_t)s.st_size;
    }
    close(fd);
    return st;
}

static void unmap_file(mapping_t *m) {
    if (m->base) munmap(m->base, m->len);
    m->base = NULL;
    m->len = 0;
}

static int32_t header_word(const mapping_t *m, int i) {
    int32_t v;
    memcpy(&v, (const uint8_t *)m->base + 4 * i, 4);
    return v;
}

/* A .bin file as tokens: llm.c's header when its first word is the magic, else nanoGPT's raw
 * uint16. kind receives "llm.c" or "raw uint16" for the description. Raw GPT-2 tokens never
 * start with one of llm.c's magics: their first token would be 54986 to 55201, past GPT-2's
 * 50257 ids. */
static tsc_status_t bin_stream(const char *path, const mapping_t *m, stream_t *s, const char **kind) {
    int32_t magic = m->len >= LLMC_HEADER_BYTES ? header_word(m, 0) : 0;
    if (magic == LLMC_MAGIC_LLAMA3)
        return tsc_error_set(TSC_ERR_UNSUPPORTED, "%s: an llm.c Llama 3 token file (magic %d, version %d, uint32 "
                             "tokens); only GPT-2's (magic %d, version 1, uint16 tokens) are read", path, magic,
                             header_word(m, 1), LLMC_MAGIC);
    if (magic == LLMC_MAGIC_EVAL)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: an llm.c evaluation file (magic %d: multiple-choice examples), "
                             "not training tokens", path, magic);
    if (magic == LLMC_MAGIC) {
        int32_t version = header_word(m, 1), count = header_word(m, 2);
        if (version != 1)
            return tsc_error_set(TSC_ERR_VERSION, "%s: llm.c header version %d; expected 1 (uint16 tokens)", path,
                                 version);
        uint64_t want = LLMC_HEADER_BYTES + 2 * (uint64_t)(uint32_t)count;
        if (count <= 0 || want != m->len)
            return tsc_error_set(TSC_ERR_FORMAT, "%s: llm.c header says %d tokens, so the file should have "
                                 "1024 + 2 x %d = %" PRIu64 " bytes, but it has %zu", path, count, count,
                                 count > 0 ? want : (uint64_t)LLMC_HEADER_BYTES, m->len);
        *s = (stream_t){(const uint8_t *)m->base + LLMC_HEADER_BYTES, (size_t)count, 2};
        *kind = "llm.c uint16";
        return TSC_OK;
    }
    if (m->len % 2)
        return tsc_error_set(TSC_ERR_FORMAT, "%s: %zu bytes, an odd size: not uint16 tokens (nanoGPT's raw .bin) "
                             "and no llm.c header (magic %d)", path, m->len, LLMC_MAGIC);
    *s = (stream_t){(const uint8_t *)m->base, m->len / 2, 2};
    *kind = "raw uint16";
    return TSC_OK;
}

static int stream_max(const stream_t *s) {
    int32_t mx = 0;
    if (s->width == 1) return 255;
    for (size_t i = 0; i < s->n; i++) {
        int32_t t = tok_at(s, i);
        if (t > mx) mx = t;
    }
    return mx;
}

/* ---- the built-in text ---- */

tsc_status_t tsc_data_kjv_path(char *buf, size_t size) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (xdg && *xdg) n = snprintf(buf, size, "%s/tilescope/kjv.txt", xdg);
    else if (home && *home) n = snprintf(buf, size, "%s/.cache/tilescope/kjv.txt", home);
    else return tsc_error_set(TSC_ERR_ARG, "kjv: neither XDG_CACHE_HOME nor HOME is set: no place for the cache");
    if (n < 0 || (size_t)n >= size)
        return tsc_error_set(TSC_ERR_ARG, "kjv: the cache path does not fit %zu bytes", size);
    return TSC_OK;
}

/* mkdir -p of the folder that holds path. */
static tsc_status_t make_parent_dirs(const char *path) {
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return tsc_error_set(TSC_ERR_ARG, "%s: path too long", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return TSC_OK;
    *slash = '\0';
    for (char *p = dir + 1; ; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            return tsc_error_set(TSC_ERR_IO, "%s: cannot create: %s", dir, strerror(errno));
        *p = c;
        if (!c) break;
    }
    return TSC_OK;
}

/* Whether an executable named name is in $PATH (what posix_spawnp would run). */
static int on_path(const char *name) {
    const char *path = getenv("PATH");
    char full[PATH_MAX];
    while (path && *path) {
        size_t n = strcspn(path, ":");
        if (snprintf(full, sizeof full, "%.*s/%s", (int)n, n ? path : ".", name) < (int)sizeof full &&
            access(full, X_OK) == 0)
            return 1;
        path += n + (path[n] == ':');
    }
    return 0;
}

/* Runs `bible gen1:1-rev22:21` with its stdout on the temporary of cache and renames it into
 * place, so a cache file is always the whole text. */
static tsc_status_t kjv_materialise(const char *cache) {
    if (!on_path("bible")) return tsc_error_set(TSC_ERR_EXTERNAL, "kjv: `bible` not found on PATH: " KJV_NEEDS);
    tsc_status_t st = make_parent_dirs(cache);
    tsc_out_t o;
    if (st == TSC_OK) st = tsc_out_open(&o, cache);
    if (st != TSC_OK) return st;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fileno(o.fp), STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    char *argv[] = {"bible", KJV_RANGE, NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, "bible", &fa, NULL, argv, environ), status = 0;
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) st = tsc_error_set(TSC_ERR_EXTERNAL, "kjv: cannot run `bible`: %s; " KJV_NEEDS, strerror(rc));
    else if (waitpid(pid, &status, 0) < 0)
        st = tsc_error_set(TSC_ERR_EXTERNAL, "kjv: waiting for `bible`: %s", strerror(errno));
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        st = tsc_error_set(TSC_ERR_EXTERNAL, "kjv: `bible " KJV_RANGE "` failed (status %d); " KJV_NEEDS, status);
    struct stat s;
    if (st == TSC_OK && (fstat(fileno(o.fp), &s) != 0 || s.st_size == 0))
        st = tsc_error_set(TSC_ERR_EXTERNAL, "kjv: `bible " KJV_RANGE "` printed nothing; " KJV_NEEDS);
    if (st != TSC_OK) {
        tsc_out_abort(&o);
        return st;
    }
    return tsc_out_commit(&o);
}

/* ---- opening ---- */

static void fmt_count(char *buf, size_t size, size_t n) {
    if (n >= 1000000) snprintf(buf, size, "%.2fM", n / 1e6);
    else if (n >= 10000) snprintf(buf, size, "%.1fk", n / 1e3);
    else snprintf(buf, size, "%zu", n);
}

static void describe(tsc_data_t *d, const char *name, const char *kind) {
    char all[32], tr[32], va[32];
    fmt_count(all, sizeof all, d->split[0].n + d->split[1].n);
    fmt_count(tr, sizeof tr, d->split[0].n);
    fmt_count(va, sizeof va, d->split[1].n);
    int n = snprintf(d->desc, sizeof d->desc, "%s: %s tokens (%s, vocabulary %d), %s train / %s val", name, all,
                     kind, d->vocab, tr, va);
    size_t len = strlen(name);
    d->name_len = (int)(n > 0 && len < sizeof d->desc ? len : strlen(d->desc));
}

/* One file split at its last val_frac: text (width 1) or a .bin. */
static tsc_status_t open_file(tsc_data_t *d, const char *path, const char *name, double val_frac) {
    int is_bin = strlen(path) > 4 && strcmp(path + strlen(path) - 4, ".bin") == 0;
    tsc_status_t st = map_file(path, &d->map[0]);
    if (st != TSC_OK) return st;
    stream_t s = {(const uint8_t *)d->map[0].base, d->map[0].len, 1};
    const char *kind = "byte-level";
    if (is_bin && (st = bin_stream(path, &d->map[0], &s, &kind)) != TSC_OK) return st;
    size_t n_val = (size_t)floor((double)s.n * val_frac);
    d->split[TSC_SPLIT_TRAIN] = (stream_t){s.p, s.n - n_val, s.width};
    d->split[TSC_SPLIT_VAL] = (stream_t){s.p + (s.n - n_val) * (size_t)s.width, n_val, s.width};
    d->vocab = 1 + stream_max(&s);  /* 256 for text */
    d->byte_level = !is_bin;
    describe(d, name, kind);
    return TSC_OK;
}

/* nanoGPT's folder: DIR/train.bin and DIR/val.bin are the split. */
static tsc_status_t open_dir(tsc_data_t *d, const char *dir) {
    static const char *names[2] = {"train.bin", "val.bin"};
    const char *kind = "raw uint16";
    for (int i = 0; i < 2; i++) {
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path)
            return tsc_error_set(TSC_ERR_ARG, "%s: path too long", dir);
        if (access(path, F_OK) != 0)
            return tsc_error_set(TSC_ERR_IO, "%s: no %s (a nanoGPT data folder holds train.bin and val.bin)", dir,
                                 names[i]);
        tsc_status_t st = map_file(path, &d->map[i]);
        if (st == TSC_OK) st = bin_stream(path, &d->map[i], &d->split[i], &kind);
        if (st != TSC_OK) return st;
    }
    int a = stream_max(&d->split[0]), b = stream_max(&d->split[1]);
    d->vocab = 1 + (a > b ? a : b);
    describe(d, dir, kind);
    return TSC_OK;
}

tsc_status_t tsc_data_open(tsc_data_t **out, const char *spec, const tsc_data_opts_t *opts) {
    if (!out || !spec || !*spec) return tsc_error_set(TSC_ERR_ARG, "tsc_data_open: no data source given");
    *out = NULL;
    double val_frac = opts && opts->val_frac != 0 ? opts->val_frac : 0.1;
    if (!(val_frac > 0 && val_frac < 1))
        return tsc_error_set(TSC_ERR_ARG, "validation fraction %g: expected a number in (0, 1)", val_frac);
    tsc_data_t *d = calloc(1, sizeof *d);
    if (!d) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", spec);
    tsc_status_t st;
    struct stat s;
    if (strcmp(spec, "kjv") == 0) {
        char cache[PATH_MAX];
        st = tsc_data_kjv_path(cache, sizeof cache);
        if (st == TSC_OK && (stat(cache, &s) != 0 || !S_ISREG(s.st_mode) || s.st_size == 0))
            st = kjv_materialise(cache);
        if (st == TSC_OK) st = open_file(d, cache, "kjv", val_frac);
    } else if (stat(spec, &s) == 0 && S_ISDIR(s.st_mode)) {
        st = open_dir(d, spec);
    } else {
        st = open_file(d, spec, spec, val_frac);
    }
    if (st != TSC_OK) {
        tsc_data_close(d);
        return st;
    }
    *out = d;
    return TSC_OK;
}

void tsc_data_close(tsc_data_t *d) {
    if (!d) return;
    unmap_file(&d->map[0]);
    unmap_file(&d->map[1]);
    free(d);
}

int tsc_data_vocab(const tsc_data_t *d) { return d ? d->vocab : 0; }
int tsc_data_byte_level(const tsc_data_t *d) { return d ? d->byte_level : 0; }

size_t tsc_data_n_tokens(const tsc_data_t *d, tsc_split_t split) {
    return d && (split == TSC_SPLIT_TRAIN || split == TSC_SPLIT_VAL) ? d->split[split].n : 0;
}

const char *tsc_data_describe(const tsc_data_t *d) { return d ? d->desc : ""; }

/* ---- batches ---- */

/* splitmix64's finaliser: a bijection of 64-bit words whose every output bit depends on every
 * input bit, so chaining it over (seed, step, row) gives independent-looking positions. */
static uint64_t splitmix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static const char *split_name(tsc_split_t split) { return split == TSC_SPLIT_TRAIN ? "training" : "validation"; }

static tsc_status_t check_batch_args(const tsc_data_t *d, tsc_split_t split, int B, int T, const void *x,
                                     const void *y) {
    if (!d || !x || !y) return tsc_error_set(TSC_ERR_ARG, "data batch: a NULL argument");
    if (split != TSC_SPLIT_TRAIN && split != TSC_SPLIT_VAL)
        return tsc_error_set(TSC_ERR_ARG, "data batch: split %d is neither train (0) nor val (1)", (int)split);
    if (B <= 0 || T <= 0) return tsc_error_set(TSC_ERR_ARG, "data batch: B = %d, T = %d; both must be positive", B, T);
    if (d->split[split].n < (size_t)T + 1)
        return tsc_error_set(TSC_ERR_ARG, "%.*s: the %s split has %zu tokens, fewer than one sequence of %d + 1 "
                             "needs", d->name_len, d->desc, split_name(split), d->split[split].n, T);
    return TSC_OK;
}

tsc_status_t tsc_data_batch_at(const tsc_data_t *d, tsc_split_t split, const uint64_t *offsets, int B, int T,
                               int32_t *x, int32_t *y) {
    tsc_status_t st = check_batch_args(d, split, B, T, x, y);
    if (st == TSC_OK && !offsets) st = tsc_error_set(TSC_ERR_ARG, "data batch: no offsets");
    if (st != TSC_OK) return st;
    const stream_t *s = &d->split[split];
    for (int b = 0; b < B; b++) {
        if (offsets[b] > s->n - 1 - (size_t)T)
            return tsc_error_set(TSC_ERR_ARG, "%.*s: row %d starts at %" PRIu64 ", but the %s split's last "
                                 "sequence of %d + 1 tokens starts at %zu", d->name_len, d->desc, b, offsets[b],
                                 split_name(split), T, s->n - 1 - (size_t)T);
        for (int t = 0; t < T; t++) {
            x[(size_t)b * T + t] = tok_at(s, offsets[b] + t);
            y[(size_t)b * T + t] = tok_at(s, offsets[b] + t + 1);
        }
    }
    return TSC_OK;
}

tsc_status_t tsc_data_batch(const tsc_data_t *d, tsc_split_t split, uint64_t seed, long long step, int B, int T,
                            int32_t *x, int32_t *y, uint64_t *offsets) {
    tsc_status_t st = check_batch_args(d, split, B, T, x, y);
    if (st == TSC_OK && step < 0) st = tsc_error_set(TSC_ERR_ARG, "data batch: step %lld is negative", step);
    if (st != TSC_OK) return st;
    uint64_t stack[64], *off = offsets ? offsets : B <= 64 ? stack : malloc((size_t)B * sizeof *off);
    if (!off) return tsc_error_set(TSC_ERR_NOMEM, "data batch: out of memory");
    const size_t n = d->split[split].n;
    for (int b = 0; b < B; b++) {
        if (split == TSC_SPLIT_TRAIN) {
            /* Uniform in [0, n - T - 1]: the high word of a 64 x 64-bit product (Lemire), whose
             * bias, below (n - T) / 2^64, no training run can see. */
            uint64_t r = splitmix64(splitmix64(splitmix64(seed) ^ (uint64_t)step) ^ (uint64_t)b);
            off[b] = (uint64_t)(((unsigned __int128)r * (n - (size_t)T)) >> 64);
        } else {
            /* Consecutive windows of T tokens (each with its next-token target), wrapping around. */
            uint64_t windows = (n - 1) / (size_t)T;
            off[b] = (((uint64_t)step * (uint64_t)B + (uint64_t)b) % windows) * (uint64_t)T;
        }
    }
    st = tsc_data_batch_at(d, split, off, B, T, x, y);
    if (off != offsets && off != stack) free(off);
    return st;
}

/* ---- the batch log: RUN/batches.csv ---- */

#define BATCH_HEADER "step,row,offset\n"

struct tsc_batch_log {
    FILE *fp;
    char *path;
};

/* Parses "step,row,offset" of line [p, end): three unsigned decimal numbers, nothing else (no
 * signs, spaces or carriage returns); 0 on success. */
static int parse_line(const char *p, const char *end, long long *step, long long *row, uint64_t *off) {
    char buf[96];
    size_t n = (size_t)(end - p);
    if (n == 0 || n >= sizeof buf) return -1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    if (strspn(buf, "0123456789,") != n) return -1;
    unsigned long long v[3];
    char *q = buf;
    for (int i = 0; i < 3; i++) {
        char *e;
        errno = 0;
        v[i] = strtoull(q, &e, 10);
        if (e == q || errno || *e != (i < 2 ? ',' : '\0')) return -1;
        q = e + 1;
    }
    if (v[0] > LLONG_MAX || v[1] > INT_MAX) return -1;
    *step = (long long)v[0], *row = (long long)v[1], *off = v[2];
    return 0;
}

static tsc_status_t check_header(const char *path, const char *text, size_t len) {
    size_t hl = strlen(BATCH_HEADER);
    if (len < hl || memcmp(text, BATCH_HEADER, hl) != 0)
        return tsc_error_set(TSC_ERR_FORMAT, "%s:1: not a batch log (expected the header \"step,row,offset\")", path);
    return TSC_OK;
}

/* Where a resumed log continues: after the header and every complete line before the first line
 * of a step >= first_step (first_step < 0: no step is dropped so), less a last step with fewer
 * rows than step 0 (a run stopped between its rows). A line without its newline (a crash
 * mid-write) is dropped; a complete line that does not parse is an error. */
static tsc_status_t log_keep_len(const char *path, const char *text, size_t len, long long first_step,
                                 size_t *keep) {
    tsc_status_t st = check_header(path, text, len);
    if (st != TSC_OK) return st;
    size_t pos = strlen(BATCH_HEADER), step_start = pos;
    long long cur = -1, rows = 0, rows0 = 0;  /* the last step, its rows, step 0's rows */
    for (long long line = 2; pos < len; line++) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        if (!nl) break;
        long long step, row;
        uint64_t off;
        if (parse_line(text + pos, nl, &step, &row, &off) != 0)
            return tsc_error_set(TSC_ERR_FORMAT, "%s:%lld: malformed line (expected step,row,offset)", path, line);
        if (first_step >= 0 && step >= first_step) break;
        if (step != cur) {
            if (cur == 0) rows0 = rows;
            cur = step, rows = 0, step_start = pos;
        }
        rows++;
        pos = (size_t)(nl - text) + 1;
    }
    *keep = rows0 && rows < rows0 ? step_start : pos;
    return TSC_OK;
}

tsc_status_t tsc_batch_log_open_at(tsc_batch_log_t **out, const char *path, long long first_step) {
    if (!out || !path || !*path) return tsc_error_set(TSC_ERR_ARG, "batch log: no path");
    *out = NULL;
    struct stat s;
    tsc_status_t st = TSC_OK;
    if (lstat(path, &s) != 0) {
        if (errno != ENOENT) return tsc_error_set(TSC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        st = tsc_out_write_all(path, BATCH_HEADER, strlen(BATCH_HEADER));
    } else {
        char *text;
        size_t len, keep = 0;
        st = tsc_file_read_text(path, &text, &len);
        if (st == TSC_OK) st = log_keep_len(path, text, len, first_step, &keep);
        if (st == TSC_OK && keep != len) st = tsc_out_write_all(path, text, keep);  /* atomic: old or new */
        free(text);
    }
    if (st != TSC_OK) return st;
    int fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    FILE *fp = fd >= 0 ? fdopen(fd, "ab") : NULL;
    tsc_batch_log_t *bl = fp ? calloc(1, sizeof *bl) : NULL;
    char *copy = bl ? strdup(path) : NULL;
    if (!copy) {
        st = tsc_error_set(TSC_ERR_IO, "%s: cannot open for appending: %s", path, strerror(errno ? errno : ENOMEM));
        if (fp) fclose(fp);
        else if (fd >= 0) close(fd);
        free(bl);
        return st;
    }
    bl->fp = fp;
    bl->path = copy;
    *out = bl;
    return TSC_OK;
}

tsc_status_t tsc_batch_log_open(tsc_batch_log_t **out, const char *path) {
    return tsc_batch_log_open_at(out, path, -1);
}

tsc_status_t tsc_batch_log_put(tsc_batch_log_t *bl, long long step, int B, const uint64_t *offsets) {
    if (!bl || !offsets || B <= 0 || step < 0) return tsc_error_set(TSC_ERR_ARG, "batch log: bad arguments");
    for (int b = 0; b < B; b++)
        if (fprintf(bl->fp, "%lld,%d,%" PRIu64 "\n", step, b, offsets[b]) < 0)
            return tsc_error_set(TSC_ERR_IO, "%s: write failed: %s", bl->path, strerror(errno));
    return TSC_OK;
}

tsc_status_t tsc_batch_log_flush(tsc_batch_log_t *bl, int sync) {
    if (!bl) return tsc_error_set(TSC_ERR_ARG, "batch log: NULL");
    if (fflush(bl->fp) != 0 || (sync && fsync(fileno(bl->fp)) != 0))
        return tsc_error_set(TSC_ERR_IO, "%s: write failed: %s", bl->path, strerror(errno));
    return TSC_OK;
}

void tsc_batch_log_close(tsc_batch_log_t *bl) {
    if (!bl) return;
    fclose(bl->fp);
    free(bl->path);
    free(bl);
}

/* ---- a recorded order read back ---- */

struct tsc_batch_order {
    uint64_t *off;      /* [n_steps, rows] */
    long long n_steps;
    int rows;
    char *path;
};

/* The parse's position: steps 0, 1, 2, ... each with rows 0, 1, ... in order, every step with
 * as many rows as step 0 (learnt when step 1 begins). */
typedef struct {
    long long step, rows_in_step;
} order_pos_t;

static tsc_status_t rows_missing(const tsc_batch_order_t *bo, long long line, const order_pos_t *p) {
    return tsc_error_set(TSC_ERR_FORMAT, "%s:%lld: step %lld has %lld rows, step 0 has %d: rows missing", bo->path,
                         line, p->step, p->rows_in_step, bo->rows);
}

static tsc_status_t order_next(tsc_batch_order_t *bo, long long line, order_pos_t *p, long long step, long long row) {
    if (step == p->step && row == p->rows_in_step && (!bo->rows || row < bo->rows)) {
        p->rows_in_step++;
        return TSC_OK;
    }
    if (step == p->step + 1 && row == 0 && p->rows_in_step > 0) {
        if (!bo->rows) bo->rows = (int)p->rows_in_step;
        if (p->rows_in_step != bo->rows) return rows_missing(bo, line - 1, p);
        p->step++;
        p->rows_in_step = 1;
        return TSC_OK;
    }
    if (step == p->step && bo->rows && row == bo->rows)
        return tsc_error_set(TSC_ERR_FORMAT, "%s:%lld: step %lld row %lld: more rows than step 0's %d", bo->path, line,
                             step, row, bo->rows);
    return tsc_error_set(TSC_ERR_FORMAT, "%s:%lld: step %lld row %lld, expected step %lld row %lld or step %lld "
                         "row 0 (steps 0, 1, 2, ... each with rows 0, 1, ... in order)", bo->path, line, step, row,
                         p->step, p->rows_in_step, p->step + 1);
}

static tsc_status_t order_parse(tsc_batch_order_t *bo, const char *text, size_t len) {
    size_t hl = strlen(BATCH_HEADER), pos = hl, cap = 0;
    tsc_status_t st = check_header(bo->path, text, len);
    if (st != TSC_OK) return st;
    for (size_t i = hl; i < len; i++) cap += text[i] == '\n';
    if (tsc_mem_check((uint64_t)cap * sizeof *bo->off, "the recorded batch order") != TSC_OK)
        return tsc_error_wrap(TSC_ERR_UNSUPPORTED, "%s: ", bo->path);
    bo->off = malloc((cap ? cap : 1) * sizeof *bo->off);
    if (!bo->off) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", bo->path);
    order_pos_t p = {0, 0};
    long long n = 0, line = 2;
    for (; pos < len; line++, n++) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        long long step, row;
        if (!nl)
            return tsc_error_set(TSC_ERR_FORMAT, "%s:%lld: the last line has no newline (a run stopped mid-write?)",
                                 bo->path, line);
        if (parse_line(text + pos, nl, &step, &row, &bo->off[n]) != 0)
            return tsc_error_set(TSC_ERR_FORMAT, "%s:%lld: malformed line (expected step,row,offset)", bo->path, line);
        if ((st = order_next(bo, line, &p, step, row)) != TSC_OK) return st;
        pos = (size_t)(nl - text) + 1;
    }
    if (n == 0) return tsc_error_set(TSC_ERR_FORMAT, "%s: no batches recorded", bo->path);
    if (!bo->rows) bo->rows = (int)p.rows_in_step;  /* only step 0 */
    if (p.rows_in_step != bo->rows) return rows_missing(bo, line - 1, &p);
    bo->n_steps = p.step + 1;
    return TSC_OK;
}

tsc_status_t tsc_batch_order_load(tsc_batch_order_t **out, const char *path) {
    if (!out || !path) return tsc_error_set(TSC_ERR_ARG, "batch order: no path");
    *out = NULL;
    tsc_batch_order_t *bo = calloc(1, sizeof *bo);
    if (!bo || !(bo->path = strdup(path))) {
        free(bo);
        return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", path);
    }
    char *text;
    size_t len;
    tsc_status_t st = tsc_file_read_text(path, &text, &len);
    if (st == TSC_OK) {
        st = order_parse(bo, text, len);
        free(text);
    }
    if (st != TSC_OK) {
        tsc_batch_order_free(bo);
        return st;
    }
    *out = bo;
    return TSC_OK;
}

void tsc_batch_order_free(tsc_batch_order_t *bo) {
    if (!bo) return;
    free(bo->off);
    free(bo->path);
    free(bo);
}

long long tsc_batch_order_n_steps(const tsc_batch_order_t *bo) { return bo ? bo->n_steps : 0; }

tsc_status_t tsc_batch_order_get(const tsc_batch_order_t *bo, long long step, int B, uint64_t *offsets) {
    if (!bo || !offsets) return tsc_error_set(TSC_ERR_ARG, "batch order: a NULL argument");
    if (B != bo->rows)
        return tsc_error_set(TSC_ERR_ARG, "%s: the recorded run has %d rows a step, this one %d", bo->path, bo->rows,
                             B);
    if (step < 0 || step >= bo->n_steps)
        return tsc_error_set(TSC_ERR_ARG, "%s: step %lld not recorded (it holds steps 0 to %lld)", bo->path, step,
                             bo->n_steps - 1);
    memcpy(offsets, bo->off + step * bo->rows, (size_t)B * sizeof *offsets);
    return TSC_OK;
}
