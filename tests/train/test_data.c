/* Training data (train/tsc_data.h): every source read back against the bytes the test wrote,
 * the split, the batch positions, the batch log and its resume, and every bad input's message. */
#include "tsc_test.h"
#include "tsc_data.h"

#include <dirent.h>
#include <unistd.h>

static char dir[64];

static void path_in(char *buf, size_t size, const char *name) { snprintf(buf, size, "%s/%s", dir, name); }

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return;
    fwrite(p, 1, n, fp);
    fclose(fp);
}

/* An llm.c token file: header (magic, version, count as given) then the tokens. */
static void write_llmc(const char *path, int32_t magic, int32_t version, int32_t count, const uint16_t *tok,
                       size_t n) {
    int32_t h[256] = {0};
    h[0] = magic, h[1] = version, h[2] = count;
    FILE *fp = fopen(path, "wb");
    if (!fp) return;
    fwrite(h, 4, 256, fp);
    fwrite(tok, 2, n, fp);
    fclose(fp);
}

/* Whether opening spec fails with st and a message containing both needles. */
static int open_fails(const char *spec, tsc_status_t st, const char *n1, const char *n2) {
    tsc_data_t *d = (tsc_data_t *)1;
    tsc_status_t got = tsc_data_open(&d, spec, NULL);
    const char *msg = tsc_error_last();
    int ok = got == st && d == NULL && strstr(msg, n1) && (!n2 || strstr(msg, n2));
    if (!ok) fprintf(stderr, "  open(%s): status %d, message \"%s\"\n", spec, (int)got, msg);
    if (got == TSC_OK) tsc_data_close(d);
    return ok;
}

static void test_text(void) {
    enum { N = 5000, B = 4, T = 16 };
    uint8_t buf[N];
    uint64_t s = 11;
    for (int i = 0; i < N; i++) buf[i] = (uint8_t)(tsc_test_lcg(&s) >> 13);
    buf[17] = 0, buf[18] = 255;
    char path[128];
    path_in(path, sizeof path, "text.txt");
    write_bytes(path, buf, N);
    tsc_data_t *d;
    tsc_data_opts_t o = {0.2};
    CHECK(tsc_data_open(&d, path, &o) == TSC_OK);
    if (!d) return;
    CHECK_EQ_INT(tsc_data_vocab(d), 256);
    CHECK_EQ_INT(tsc_data_n_tokens(d, TSC_SPLIT_TRAIN), 4000);
    CHECK_EQ_INT(tsc_data_n_tokens(d, TSC_SPLIT_VAL), 1000);
    CHECK(strstr(tsc_data_describe(d), path) && strstr(tsc_data_describe(d), "byte-level"));
    /* read back through an independent read of the file */
    uint8_t file[N];
    FILE *fp = fopen(path, "rb");
    CHECK(fp && fread(file, 1, N, fp) == N);
    if (fp) fclose(fp);
    int32_t x[B * T], y[B * T];
    uint64_t off[B];
    CHECK(tsc_data_batch(d, TSC_SPLIT_TRAIN, 7, 3, B, T, x, y, off) == TSC_OK);
    int bad = 0;
    for (int b = 0; b < B; b++) {
        bad += off[b] > 4000 - T - 1;
        for (int t = 0; t < T && off[b] <= 4000 - T - 1; t++)
            bad += x[b * T + t] != file[off[b] + t] || y[b * T + t] != file[off[b] + t + 1];
    }
    CHECK_EQ_INT(bad, 0);
    /* validation: consecutive windows of T from the split's start (byte 4000), wrapping after
     * (1000 - 1) / 16 = 62 windows */
    for (long long step = 0; step < 20; step++) {
        CHECK(tsc_data_batch(d, TSC_SPLIT_VAL, 99, step, B, T, x, y, off) == TSC_OK);
        for (int b = 0; b < B; b++) {
            uint64_t w = (uint64_t)(step * B + b) % 62;
            bad += off[b] != w * T;
            for (int t = 0; t < T; t++)
                bad += x[b * T + t] != file[4000 + w * T + t] || y[b * T + t] != file[4000 + w * T + t + 1];
        }
    }
    CHECK_EQ_INT(bad, 0);
    tsc_data_close(d);
}

static void test_llmc_and_raw(void) {
    enum { N = 3001, T = 8 };
    static uint16_t tok[N];
    uint64_t s = 5;
    for (int i = 0; i < N; i++) tok[i] = (uint16_t)(tsc_test_lcg(&s) % 50000);
    tok[2950] = 50256;  /* the largest, in the validation part */
    char path[128];
    path_in(path, sizeof path, "tokens.bin");
    write_llmc(path, 20240520, 1, N, tok, N);
    tsc_data_t *d;
    CHECK(tsc_data_open(&d, path, NULL) == TSC_OK);
    if (!d) return;
    CHECK_EQ_INT(tsc_data_vocab(d), 50257);
    CHECK_EQ_INT(tsc_data_n_tokens(d, TSC_SPLIT_VAL), 300);   /* floor(3001 * 0.1) */
    CHECK_EQ_INT(tsc_data_n_tokens(d, TSC_SPLIT_TRAIN), 2701);
    CHECK(strstr(tsc_data_describe(d), "llm.c") != NULL);
    int32_t x[2 * T], y[2 * T];
    uint64_t off[2] = {0, 2701 - T - 1};
    CHECK(tsc_data_batch_at(d, TSC_SPLIT_TRAIN, off, 2, T, x, y) == TSC_OK);
    int bad = 0;
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < T; t++) bad += x[b * T + t] != tok[off[b] + t] || y[b * T + t] != tok[off[b] + t + 1];
    CHECK_EQ_INT(bad, 0);
    off[1]++;  /* one past the split's last sequence */
    CHECK(tsc_data_batch_at(d, TSC_SPLIT_TRAIN, off, 2, T, x, y) == TSC_ERR_ARG);
    CHECK(tsc_data_batch(d, TSC_SPLIT_VAL, 1, 0, 1, T, x, y, off) == TSC_OK);
    for (int t = 0; t < T; t++) bad += x[t] != tok[2701 + t];
    CHECK_EQ_INT(bad, 0);
    tsc_data_close(d);

    /* nanoGPT raw: the same tokens without a header */
    path_in(path, sizeof path, "raw.bin");
    write_bytes(path, tok, 2 * 1000);
    CHECK(tsc_data_open(&d, path, NULL) == TSC_OK);
    if (!d) return;
    CHECK_EQ_INT(tsc_data_n_tokens(d, TSC_SPLIT_TRAIN) + tsc_data_n_tokens(d, TSC_SPLIT_VAL), 1000);
    CHECK(strstr(tsc_data_describe(d), "raw uint16") != NULL);
    uint64_t o1[1] = {123};
    CHECK(tsc_data_batch_at(d, TSC_SPLIT_TRAIN, o1, 1, T, x, y) == TSC_OK);
    for (int t = 0; t < T; t++) bad += x[t] != tok[123 + t] || y[t] != tok[124 + t];
    CHECK_EQ_INT(bad, 0);
    int mx = 0;
    for (int i = 0; i < 1000; i++) mx = tok[i] > mx ? tok[i] : mx;
    CHECK_EQ_INT(tsc_data_vocab(d), mx + 1);
    tsc_data_close(d);
}

static void test_dir(void) {
    enum { NT = 900, NV = 77, T = 8 };
    uint16_t tr[NT], va[NV];
    for (int i = 0; i < NT; i++) tr[i] = (uint16_t)(i * 7 % 1000);
    for (int i = 0; i < NV; i++) va[i] = (uint16_t)(60000 + i);
    char sub[128], path[160];
    path_in(sub, sizeof sub, "nanogpt");
    mkdir(sub, 0755);
    snprintf(path, sizeof path, "%s/train.bin", sub);
    write_bytes(path, tr, sizeof tr);
    CHECK(open_fails(sub, TSC_ERR_IO, sub, "val.bin"));
    snprintf(path, sizeof path, "%s/val.bin", sub);
    write_bytes(path, va, sizeof va);
    tsc_data_t *d;
    tsc_data_opts_t o = {0.5};  /* ignored: the folder brings its split */
    CHECK(tsc_data_open(&d, sub, &o) == TSC_OK);
    if (!d) return;
    CHECK_EQ_INT(tsc_data_n_tokens(d, TSC_SPLIT_TRAIN), NT);
    CHECK_EQ_INT(tsc_data_n_tokens(d, TSC_SPLIT_VAL), NV);
    CHECK_EQ_INT(tsc_data_vocab(d), 60000 + NV);
    int32_t x[2 * T], y[2 * T];
    uint64_t off[2];
    CHECK(tsc_data_batch(d, TSC_SPLIT_VAL, 0, 4, 2, T, x, y, off) == TSC_OK);
    /* windows 8 and 9 of (77 - 1) / 8 = 9 windows: 8 and 0 */
    CHECK_EQ_INT(off[0], 64);
    CHECK_EQ_INT(off[1], 0);
    CHECK_EQ_INT(x[0], 60064);
    CHECK_EQ_INT(y[T - 1], 60072);
    CHECK_EQ_INT(x[T], 60000);
    tsc_data_close(d);
}

/* splitmix64 (Steele, Lea and Flood 2014) as docs/TRAINING_DATA.md states the positions: a
 * recorded seed must give the same batches in every later version. */
static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void test_batches(void) {
    enum { N = 100000, B = 8, T = 32, STEPS = 2000 };
    static uint8_t buf[N];
    for (int i = 0; i < N; i++) buf[i] = (uint8_t)(i * 31 + i / 256);
    char path[128];
    path_in(path, sizeof path, "batches.txt");
    write_bytes(path, buf, N);
    tsc_data_t *d;
    CHECK(tsc_data_open(&d, path, NULL) == TSC_OK);
    if (!d) return;
    const uint64_t hi = 90000 - T - 1;  /* the last start of the training split */
    static int32_t x[B * T], y[B * T], x2[B * T], y2[B * T];
    uint64_t a[B], b[B], c[B];
    CHECK(tsc_data_batch(d, TSC_SPLIT_TRAIN, 42, 17, B, T, x, y, a) == TSC_OK);
    for (int r = 0; r < B; r++) {
        uint64_t want = (uint64_t)(((unsigned __int128)mix(mix(mix(42) ^ 17) ^ (uint64_t)r) * (hi + 1)) >> 64);
        CHECK_EQ_INT(a[r], want);
    }
    CHECK(tsc_data_batch(d, TSC_SPLIT_TRAIN, 42, 17, B, T, x2, y2, b) == TSC_OK);
    CHECK(memcmp(a, b, sizeof a) == 0 && memcmp(x, x2, sizeof x) == 0 && memcmp(y, y2, sizeof y) == 0);
    CHECK(tsc_data_batch_at(d, TSC_SPLIT_TRAIN, a, B, T, x2, y2) == TSC_OK);
    CHECK(memcmp(x, x2, sizeof x) == 0 && memcmp(y, y2, sizeof y) == 0);
    CHECK(tsc_data_batch(d, TSC_SPLIT_TRAIN, 42, 18, B, T, x2, y2, b) == TSC_OK);
    CHECK(tsc_data_batch(d, TSC_SPLIT_TRAIN, 43, 17, B, T, x2, y2, c) == TSC_OK);
    int same_step = 0, same_seed = 0, same_row = 0;
    for (int r = 0; r < B; r++) {
        same_step += a[r] == b[r];
        same_seed += a[r] == c[r];
        for (int q = 0; q < r; q++) same_row += a[r] == a[q];
    }
    CHECK_EQ_INT(same_step, 0);
    CHECK_EQ_INT(same_seed, 0);
    CHECK_EQ_INT(same_row, 0);
    /* range and spread: 16000 draws over 89968 starts land in every tenth, none past hi */
    int out = 0, tenth[10] = {0};
    for (long long step = 0; step < STEPS; step++) {
        CHECK(tsc_data_batch(d, TSC_SPLIT_TRAIN, 1, step, B, T, x, y, a) == TSC_OK);
        for (int r = 0; r < B; r++) {
            out += a[r] > hi;
            if (a[r] <= hi) tenth[a[r] * 10 / (hi + 1)]++;
        }
    }
    CHECK_EQ_INT(out, 0);
    for (int i = 0; i < 10; i++) CHECKF(tenth[i] > 1400 && tenth[i] < 1800, "tenth %d: %d of 16000", i, tenth[i]);
    /* without an offsets array, and with more rows than the stack buffer */
    static int32_t xl[100 * T], yl[100 * T], xl2[100 * T], yl2[100 * T];
    uint64_t ol[100];
    CHECK(tsc_data_batch(d, TSC_SPLIT_TRAIN, 5, 9, 100, T, xl, yl, NULL) == TSC_OK);
    CHECK(tsc_data_batch(d, TSC_SPLIT_TRAIN, 5, 9, 100, T, xl2, yl2, ol) == TSC_OK);
    CHECK(memcmp(xl, xl2, sizeof xl) == 0 && memcmp(yl, yl2, sizeof yl) == 0);
    /* bad arguments */
    CHECK(tsc_data_batch(d, TSC_SPLIT_TRAIN, 1, -1, B, T, x, y, a) == TSC_ERR_ARG);
    CHECK(tsc_data_batch(d, TSC_SPLIT_TRAIN, 1, 0, 0, T, x, y, a) == TSC_ERR_ARG);
    CHECK(tsc_data_batch(d, (tsc_split_t)2, 1, 0, B, T, x, y, a) == TSC_ERR_ARG);
    tsc_data_close(d);
}

/* Reads a whole small file into buf. */
static size_t slurp(const char *path, char *buf, size_t size) {
    FILE *fp = fopen(path, "rb");
    size_t n = fp ? fread(buf, 1, size - 1, fp) : 0;
    if (fp) fclose(fp);
    buf[n] = '\0';
    return n;
}

static void put_steps(tsc_batch_log_t *bl, long long from, long long to, uint64_t base) {
    for (long long s = from; s < to; s++) {
        uint64_t off[3] = {base + 10 * s, base + 10 * s + 1, base + 10 * s + 2};
        CHECK(tsc_batch_log_put(bl, s, 3, off) == TSC_OK);
    }
}

static void test_log(void) {
    char path[128], text[4096];
    path_in(path, sizeof path, "run_batches.csv");
    tsc_batch_log_t *bl;
    CHECK(tsc_batch_log_open(&bl, path) == TSC_OK);
    if (!bl) return;
    put_steps(bl, 0, 5, 1000);
    CHECK(tsc_batch_log_flush(bl, 1) == TSC_OK);
    tsc_batch_log_close(bl);
    slurp(path, text, sizeof text);
    CHECK(strncmp(text, "step,row,offset\n0,0,1000\n0,1,1001\n0,2,1002\n1,0,1010\n", 52) == 0);
    tsc_batch_order_t *bo;
    CHECK(tsc_batch_order_load(&bo, path) == TSC_OK);
    if (!bo) return;
    CHECK_EQ_INT(tsc_batch_order_n_steps(bo), 5);
    uint64_t off[3];
    CHECK(tsc_batch_order_get(bo, 2, 3, off) == TSC_OK);
    CHECK(off[0] == 1020 && off[1] == 1021 && off[2] == 1022);
    CHECK(tsc_batch_order_get(bo, 2, 4, off) == TSC_ERR_ARG && strstr(tsc_error_last(), path));
    CHECK(tsc_batch_order_get(bo, 5, 3, off) == TSC_ERR_ARG && strstr(tsc_error_last(), "step 5 not recorded"));
    tsc_batch_order_free(bo);

    /* a crash mid-write: step 5 with two of its rows and a partial third; a plain reopen drops
     * the whole step and appends after step 4 */
    FILE *fp = fopen(path, "ab");
    fputs("5,0,10\n5,1,11\n5,2,1", fp);
    fclose(fp);
    CHECK(tsc_batch_order_load(&bo, path) == TSC_ERR_FORMAT && strstr(tsc_error_last(), "run_batches.csv:19"));
    CHECK(tsc_batch_log_open(&bl, path) == TSC_OK);
    if (!bl) return;
    CHECK_EQ_INT(slurp(path, text, sizeof text), strlen("step,row,offset\n") + 15 * strlen("0,0,1000\n"));
    put_steps(bl, 5, 6, 1000);
    tsc_batch_log_close(bl);
    CHECK(tsc_batch_order_load(&bo, path) == TSC_OK);
    CHECK_EQ_INT(tsc_batch_order_n_steps(bo), 6);
    tsc_batch_order_free(bo);

    /* resumed at step 3 (its checkpoint): steps 3.. are dropped and written again */
    CHECK(tsc_batch_log_open_at(&bl, path, 3) == TSC_OK);
    if (!bl) return;
    size_t n = slurp(path, text, sizeof text);
    CHECK_EQ_INT(n, strlen("step,row,offset\n") + 9 * strlen("0,0,1000\n"));
    put_steps(bl, 3, 7, 5000);
    tsc_batch_log_close(bl);
    CHECK(tsc_batch_order_load(&bo, path) == TSC_OK);
    if (!bo) return;
    CHECK_EQ_INT(tsc_batch_order_n_steps(bo), 7);
    CHECK(tsc_batch_order_get(bo, 2, 3, off) == TSC_OK && off[0] == 1020);
    CHECK(tsc_batch_order_get(bo, 3, 3, off) == TSC_OK && off[0] == 5030 && off[2] == 5032);
    tsc_batch_order_free(bo);
    /* no temporaries left beside it */
    DIR *dp = opendir(dir);
    int tmps = 0;
    for (struct dirent *e; dp && (e = readdir(dp));) tmps += strstr(e->d_name, ".tmp.") != NULL;
    if (dp) closedir(dp);
    CHECK_EQ_INT(tmps, 0);
}

/* A batch log with the given body must fail to load with a message naming file:line and what. */
static void order_fails(const char *body, const char *where, const char *what) {
    char path[128];
    path_in(path, sizeof path, "bad_batches.csv");
    tsc_test_write_text(path, body);
    tsc_batch_order_t *bo = (tsc_batch_order_t *)1;
    tsc_status_t st = tsc_batch_order_load(&bo, path);
    const char *msg = tsc_error_last();
    CHECKF(st == TSC_ERR_FORMAT && !bo && strstr(msg, where) && strstr(msg, what), "%s -> %d \"%s\"", where,
           (int)st, msg);
    if (st == TSC_OK) tsc_batch_order_free(bo);
}

static void test_bad_inputs(void) {
    char p[128];
    path_in(p, sizeof p, "missing.txt");
    CHECK(open_fails(p, TSC_ERR_IO, p, "No such file"));
    path_in(p, sizeof p, "empty.txt");
    tsc_test_write_text(p, "");
    CHECK(open_fails(p, TSC_ERR_FORMAT, p, "empty"));
    path_in(p, sizeof p, "odd.bin");
    write_bytes(p, "abc", 3);
    CHECK(open_fails(p, TSC_ERR_FORMAT, p, "odd size"));
    uint16_t tok[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    path_in(p, sizeof p, "v2.bin");
    write_llmc(p, 20240520, 2, 10, tok, 10);
    CHECK(open_fails(p, TSC_ERR_VERSION, p, "version 2"));
    path_in(p, sizeof p, "llama.bin");
    write_llmc(p, 20240801, 7, 5, tok, 10);
    CHECK(open_fails(p, TSC_ERR_UNSUPPORTED, p, "Llama 3"));
    path_in(p, sizeof p, "hellaswag.bin");
    write_llmc(p, 20240522, 1, 5, tok, 10);
    CHECK(open_fails(p, TSC_ERR_FORMAT, p, "evaluation file"));
    path_in(p, sizeof p, "count.bin");
    write_llmc(p, 20240520, 1, 11, tok, 10);
    CHECK(open_fails(p, TSC_ERR_FORMAT, p, "says 11 tokens"));
    write_llmc(p, 20240520, 1, -3, tok, 10);
    CHECK(open_fails(p, TSC_ERR_FORMAT, p, "says -3 tokens"));
    /* a split too short for one sequence */
    path_in(p, sizeof p, "short.txt");
    tsc_test_write_text(p, "0123456789abcdefghij");   /* 18 train, 2 val */
    tsc_data_t *d;
    CHECK(tsc_data_open(&d, p, NULL) == TSC_OK);
    if (d) {
        int32_t x[32], y[32];
        CHECK(tsc_data_batch(d, TSC_SPLIT_TRAIN, 1, 0, 1, 17, x, y, NULL) == TSC_OK);
        CHECK(tsc_data_batch(d, TSC_SPLIT_TRAIN, 1, 0, 1, 18, x, y, NULL) == TSC_ERR_ARG);
        CHECK(strstr(tsc_error_last(), p) && strstr(tsc_error_last(), "training split has 18 tokens"));
        CHECK(tsc_data_batch(d, TSC_SPLIT_VAL, 1, 0, 1, 2, x, y, NULL) == TSC_ERR_ARG);
        CHECK(strstr(tsc_error_last(), p) && strstr(tsc_error_last(), "validation split has 2 tokens"));
        tsc_data_close(d);
    }
    tsc_data_opts_t o = {1.5};
    CHECK(tsc_data_open(&d, p, &o) == TSC_ERR_ARG && strstr(tsc_error_last(), "1.5"));
    /* batch logs */
    order_fails("step,row\n0,0,1\n", "bad_batches.csv:1", "header");
    order_fails("step,row,offset\n0,0,1\n0,1,x\n", "bad_batches.csv:3", "malformed");
    order_fails("step,row,offset\n0,0,1\n0,1, 2\n", "bad_batches.csv:3", "malformed");
    order_fails("step,row,offset\n0,0,1\n0,1,-2\n", "bad_batches.csv:3", "malformed");
    order_fails("step,row,offset\n0,0,1\n0,1,2\n1,0,3\n2,0,4\n", "bad_batches.csv:4", "step 1 has 1 rows");
    order_fails("step,row,offset\n0,0,1\n0,1,2\n1,0,3\n", "bad_batches.csv:4", "rows missing");
    order_fails("step,row,offset\n0,0,1\n0,2,2\n", "bad_batches.csv:3", "expected step 0 row 1");
    order_fails("step,row,offset\n0,0,1\n2,0,2\n", "bad_batches.csv:3", "expected step 0 row 1");
    order_fails("step,row,offset\n0,0,1\n0,1,2\n1,0,3\n1,1,4\n1,2,5\n", "bad_batches.csv:6", "more rows than step 0");
    order_fails("step,row,offset\n", "bad_batches.csv", "no batches");
    path_in(p, sizeof p, "bad_batches.csv");
    tsc_test_write_text(p, "step,row,offset\n0,0,1\nzz\n");
    tsc_batch_log_t *bl = (tsc_batch_log_t *)1;
    CHECK(tsc_batch_log_open(&bl, p) == TSC_ERR_FORMAT && !bl && strstr(tsc_error_last(), "bad_batches.csv:3"));
}

/* The built-in text, where `bible` is installed (scripts/setup.sh installs it). */
static void test_kjv(void) {
    char cache_dir[128], cache[160];
    path_in(cache_dir, sizeof cache_dir, "cache");
    setenv("XDG_CACHE_HOME", cache_dir, 1);
    CHECK(tsc_data_kjv_path(cache, sizeof cache) == TSC_OK);
    char want[200];
    snprintf(want, sizeof want, "%s/tilescope/kjv.txt", cache_dir);
    CHECK_STREQ(cache, want);
    if (system("command -v bible >/dev/null 2>&1") != 0) {
        printf("note: `bible` is not installed; the built-in text is not checked\n");
        return;
    }
    tsc_data_t *d;
    CHECK(tsc_data_open(&d, "kjv", NULL) == TSC_OK);
    if (!d) return;
    size_t n = tsc_data_n_tokens(d, TSC_SPLIT_TRAIN) + tsc_data_n_tokens(d, TSC_SPLIT_VAL);
    CHECKF(n > 4200000 && n < 4400000, "%zu bytes", n);
    CHECK(strncmp(tsc_data_describe(d), "kjv: ", 5) == 0);
    printf("%s\n", tsc_data_describe(d));
    const char *first = "\nGenesis 1\n\n  1 In the beginning God created the heaven and the earth.\n";
    enum { T = 64 };
    int32_t x[T], y[T];
    uint64_t off[1] = {0};
    CHECK(tsc_data_batch_at(d, TSC_SPLIT_TRAIN, off, 1, T, x, y) == TSC_OK);
    int bad = 0;
    for (int t = 0; t < T; t++) bad += x[t] != (uint8_t)first[t] || y[t] != (uint8_t)first[t + 1];
    CHECK_EQ_INT(bad, 0);
    tsc_data_close(d);
    struct stat st;
    CHECK(stat(cache, &st) == 0 && (size_t)st.st_size == n);
    /* the cache is reused: a planted text is what the next open reads */
    tsc_test_write_text(cache, "a planted cache, not the Bible at all");
    CHECK(tsc_data_open(&d, "kjv", NULL) == TSC_OK);
    if (d) {
        CHECK_EQ_INT(tsc_data_n_tokens(d, TSC_SPLIT_TRAIN) + tsc_data_n_tokens(d, TSC_SPLIT_VAL), 37);
        tsc_data_close(d);
    }
    /* without `bible` and without a cache: the message says what to install */
    char *old_path = strdup(getenv("PATH") ? getenv("PATH") : "");
    path_in(cache_dir, sizeof cache_dir, "cache2");
    setenv("XDG_CACHE_HOME", cache_dir, 1);
    setenv("PATH", dir, 1);
    CHECK(open_fails("kjv", TSC_ERR_EXTERNAL, "bible-kjv", "scripts/setup.sh"));
    setenv("PATH", old_path, 1);
    free(old_path);
}

int main(void) {
    snprintf(dir, sizeof dir, "data_test_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_text();
    test_llmc_and_raw();
    test_dir();
    test_batches();
    test_log();
    test_bad_inputs();
    test_kjv();
    tsc_test_rmtree(dir);
    return tsc_test_done();
}
