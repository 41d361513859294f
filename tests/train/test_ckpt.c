/* test_ckpt.c: what resume reads from a run folder is data (train/ckpt.c, tsc_train.h's settings
 * table). Every numeric setting read back from a checkpoint is held to the bounds of its
 * `tilescope train` flag: for each row of the table, its bounds and its "not set" value are
 * accepted, one step past either bound is refused naming the file, the line and the setting; the
 * library's options are held to the same table (threads = 100000 is refused, not handed to
 * OpenMP). The checkpoint header must frame exactly the file (its precision's element size, its
 * size). A run folder's files are opened without following links: a symbolic link (dangling or
 * not) and a FIFO are refused at once, naming the file. */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <unistd.h>

#include "train_internal.h"
#include "tsc_test.h"

static const char *BASE = "model = gpt2-tiny\ndata = kjv\n";

/* Parses BASE plus "key = value" as the settings of FILE; the status. */
static tsc_status_t parse_one(const char *key, const char *value, tsc_train_cfg_t *c) {
    char text[512];
    snprintf(text, sizeof text, "%s%s = %s\n", BASE, key, value);
    return tsc_train_cfg_parse(text, "run/ckpt.bin", c);
}

/* The text of a value of setting s: v for doubles (%.17g), else the integer v. */
static void value_text(const tsc_train_setting_t *s, double v, char *buf, size_t n) {
    if (s->kind == TSC_TRAIN_DOUBLE) snprintf(buf, n, "%.17g", v);
    else if (s->kind == TSC_TRAIN_U64) snprintf(buf, n, "%" PRIu64, (uint64_t)v);
    else snprintf(buf, n, "%lld", (long long)v);
}

static void check_row(const tsc_train_setting_t *s, tsc_train_cfg_t *c) {
    char v[64];
    /* the bounds themselves are accepted, and read back as set */
    double ends[2] = {s->lo, s->hi};
    for (int i = 0; i < 2; i++) {
        value_text(s, ends[i], v, sizeof v);
        tsc_status_t st = parse_one(s->key, v, c);
        CHECKF(st == TSC_OK, "%s = %s (a bound) refused: %s", s->key, v, tsc_error_last());
        if (st == TSC_OK && s->kind == TSC_TRAIN_INT)
            CHECKF(*(int *)((char *)&c->o + s->offset) == (int)ends[i], "%s read back wrong", s->key);
    }
    if (s->has_none) {
        value_text(s, s->none, v, sizeof v);
        CHECKF(parse_one(s->key, v, c) == TSC_OK, "%s = %s (not set) refused: %s", s->key, v, tsc_error_last());
    }
    /* one step past each bound is refused, naming the file, the line and the setting */
    char want[128];
    double past[2];
    if (s->kind == TSC_TRAIN_DOUBLE) {
        past[0] = s->lo > 0 ? nextafter(s->lo, -INFINITY) : s->lo - 1;
        past[1] = nextafter(s->hi, INFINITY);
    } else {
        past[0] = s->lo - 1;
        past[1] = s->hi + 1;
    }
    for (int i = 0; i < 2; i++) {
        if (s->has_none && past[i] == s->none) continue;  /* lr_spike_step -1, threads 0: "not set" */
        if (s->kind == TSC_TRAIN_U64 && past[i] < 0) continue;
        if (s->kind == TSC_TRAIN_U64) snprintf(v, sizeof v, "%" PRIu64, (uint64_t)s->hi + 1);
        else value_text(s, past[i], v, sizeof v);
        tsc_status_t st = parse_one(s->key, v, c);
        snprintf(want, sizeof want, "run/ckpt.bin:3: the setting %s = %s is out of range", s->key, v);
        CHECKF(st == TSC_ERR_ARG && strstr(tsc_error_last(), want), "%s = %s: status %d, '%s'", s->key, v, (int)st,
               tsc_error_last());
        if (s->flag) {
            snprintf(want, sizeof want, "(the bounds of %s)", s->flag);
            CHECKF(strstr(tsc_error_last(), want) != NULL, "%s: the message does not name %s: %s", s->key, s->flag,
                   tsc_error_last());
        }
    }
    /* not a number, or not a whole one */
    CHECKF(parse_one(s->key, "12abc", c) == TSC_ERR_FORMAT && strstr(tsc_error_last(), "run/ckpt.bin:3"),
           "%s = 12abc: %s", s->key, tsc_error_last());
    if (s->kind != TSC_TRAIN_DOUBLE)
        CHECKF(parse_one(s->key, "2.5", c) == TSC_ERR_FORMAT, "%s = 2.5 accepted", s->key);
}

/* A checkpoint header: magic, cfg_len, steps, prec, elsize, n. */
static void header(unsigned char *b, uint64_t cfg_len, int64_t steps, uint32_t prec, uint32_t elsize, uint64_t n) {
    memcpy(b, "TSCKPT01", 8);
    memcpy(b + 8, &cfg_len, 8);
    memcpy(b + 16, &steps, 8);
    memcpy(b + 24, &prec, 4);
    memcpy(b + 28, &elsize, 4);
    memcpy(b + 32, &n, 8);
}

int main(void) {
    tsc_train_cfg_t *c = malloc(sizeof *c);
    if (!c) return 1;

    /* the table: every numeric setting of run.cfg has a row; the CLI's flags are its flags */
    CHECK(tsc_train_setting_count() == 26);
    const char *keys[] = {"steps", "seed", "batch", "seq_len", "lr", "threads", "flight_steps", "lr_spike_step", "ckpt_keep", "grad_shards",
                          "flight_dumps"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CHECKF(tsc_train_setting_find(keys[i]) != NULL, "no row for %s", keys[i]);
    const tsc_train_setting_t *th = tsc_train_setting_find("threads");
    CHECK(th && !strcmp(th->flag, "--threads") && th->lo == 1 && th->hi == 4096 && th->has_none && th->none == 0);
    CHECK(tsc_train_setting_find("model") == NULL && tsc_train_setting_find("nonsense") == NULL);
    for (int i = 0; i < tsc_train_setting_count(); i++) check_row(tsc_train_setting_at(i), c);

    /* the finding: threads = 100000 in a checkpoint's settings */
    CHECK(parse_one("threads", "100000", c) == TSC_ERR_ARG);
    CHECK_STREQ(tsc_error_last(), "run/ckpt.bin:3: the setting threads = 100000 is out of range: expected 1 to 4096 "
                                  "(the bounds of --threads), or 0 (OpenMP's default); refused");
    /* the library's options are held to the same table, before any thread starts */
    tsc_train_opts_t o;
    tsc_train_opts_init(&o);
    CHECK(tsc_train_opts_check(&o, "train") == TSC_OK);
    o.threads = 100000;
    CHECK(tsc_train_opts_check(&o, "train") == TSC_ERR_ARG && strstr(tsc_error_last(), "threads = 100000"));
    char dir[] = "/tmp/tsc_ckpt_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char run[256];
    snprintf(run, sizeof run, "%s/run", dir);
    CHECK(tsc_train_run(&o, run) == TSC_ERR_ARG && strstr(tsc_error_last(), "threads = 100000"));
    tsc_train_opts_init(&o);
    o.seed = (1ull << 62) + 1;
    CHECK(tsc_train_opts_check(&o, "train") == TSC_ERR_ARG && strstr(tsc_error_last(), "seed = 4611686018427387905"));
    tsc_train_opts_init(&o);
    o.prec = (tsc_prec_t)7;
    CHECK(tsc_train_opts_check(&o, "train") == TSC_ERR_ARG && strstr(tsc_error_last(), "precision 7"));

    /* other settings: unknown keys, bad precision, strings too long, missing model */
    CHECK(parse_one("threads", "nan", c) == TSC_ERR_FORMAT);
    CHECK(parse_one("lr", "inf", c) == TSC_ERR_FORMAT);
    CHECK(parse_one("eps", "4.9406564584124654e-324", c) == TSC_ERR_FORMAT);  /* subnormal */
    CHECK(parse_one("seed", "-1", c) == TSC_ERR_FORMAT);
    CHECK(parse_one("batch", "99999999999", c) == TSC_ERR_FORMAT);             /* beyond int */
    CHECK(parse_one("precision", "fp8", c) == TSC_ERR_FORMAT && strstr(tsc_error_last(), "run/ckpt.bin:3"));
    CHECK(parse_one("colour", "red", c) == TSC_ERR_FORMAT && strstr(tsc_error_last(), "unknown setting 'colour'"));
    char longv[1100];
    memset(longv, 'a', 300);
    longv[300] = 0;
    CHECK(parse_one("model", longv, c) == TSC_ERR_FORMAT && strstr(tsc_error_last(), "longer than 255 bytes"));
    CHECK(tsc_train_cfg_parse("data = kjv\n", "run/ckpt.bin", c) == TSC_ERR_FORMAT &&
          strstr(tsc_error_last(), "missing the 'model'"));
    CHECK(parse_one("threads", "3", c) == TSC_OK && c->o.threads == 3 && !strcmp(c->o.model, "gpt2-tiny"));

    /* the header frames exactly the file: size, precision's element size */
    unsigned char h[40];
    tsc_ckpt_t k;
    size_t len;
    header(h, 30, 5, TSC_PREC_FP32, 4, 10);
    CHECK(tsc_ckpt_size(30, 10, 4) == 40 + 30 + 120 + 8);
    CHECK(tsc_ckpt_parse_header(h, 40, 198, "x/ckpt.bin", &k, &len) == TSC_OK && len == 30 && k.n == 10 &&
          k.elsize == 4 && k.steps_done == 5);
    CHECK(tsc_ckpt_parse_header(h, 40, 199, "x/ckpt.bin", &k, &len) == TSC_ERR_FORMAT &&
          strstr(tsc_error_last(), "x/ckpt.bin: corrupt checkpoint header (199 bytes, the header implies 198)"));
    CHECK(tsc_ckpt_parse_header(h, 39, 198, "x/ckpt.bin", &k, &len) == TSC_ERR_FORMAT);
    header(h, 30, 5, TSC_PREC_FP64, 4, 10);  /* fp64 with 4-byte elements */
    CHECK(tsc_ckpt_parse_header(h, 40, 198, "x/ckpt.bin", &k, &len) == TSC_ERR_FORMAT);
    header(h, 30, 5, TSC_PREC_FP32, 4, 1ull << 41);
    CHECK(tsc_ckpt_parse_header(h, 40, tsc_ckpt_size(30, 1ull << 41, 4), "x/ckpt.bin", &k, &len) == TSC_ERR_FORMAT);
    header(h, 2u << 20, 5, TSC_PREC_FP32, 4, 0);
    CHECK(tsc_ckpt_parse_header(h, 40, tsc_ckpt_size(2u << 20, 0, 4), "x/ckpt.bin", &k, &len) == TSC_ERR_FORMAT);

    /* files of a run folder: never through a link, regular files only, no blocking on a FIFO */
    char reg[300], lnk[300], dang[300], fifo[300];
    snprintf(reg, sizeof reg, "%s/secret.txt", dir);
    snprintf(lnk, sizeof lnk, "%s/log.csv", dir);
    snprintf(dang, sizeof dang, "%s/wq_norms.csv", dir);
    snprintf(fifo, sizeof fifo, "%s/batches.csv", dir);
    tsc_test_write_text(reg, "SECRET\n");
    CHECK(symlink(reg, lnk) == 0 && symlink("/nonexistent/x", dang) == 0 && mkfifo(fifo, 0644) == 0);
    int fd = -1;
    CHECK(tsc_train_file_open(reg, O_RDONLY, &fd) == TSC_OK && fd >= 0);
    if (fd >= 0) close(fd);
    char want[400];
    snprintf(want, sizeof want, "%s: is a symbolic link", lnk);
    CHECK(tsc_train_file_open(lnk, O_RDONLY, &fd) == TSC_ERR_IO && strstr(tsc_error_last(), want) && fd < 0);
    CHECK(tsc_train_file_open(lnk, O_WRONLY | O_APPEND | O_CREAT, &fd) == TSC_ERR_IO &&
          strstr(tsc_error_last(), want));
    snprintf(want, sizeof want, "%s: is a symbolic link", dang);
    CHECK(tsc_train_file_open(dang, O_WRONLY | O_APPEND | O_CREAT, &fd) == TSC_ERR_IO &&
          strstr(tsc_error_last(), want));
    CHECK(tsc_test_file_is(reg, "SECRET\n"));      /* the link's target untouched */
    snprintf(want, sizeof want, "%s: not a regular file", fifo);
    CHECK(tsc_train_file_open(fifo, O_RDONLY, &fd) == TSC_ERR_IO && strstr(tsc_error_last(), want));
    snprintf(want, sizeof want, "%s/ckpt.bin", dir);
    CHECK(symlink(reg, want) == 0);
    CHECK(tsc_ckpt_load_header(want, &k) == TSC_ERR_IO && strstr(tsc_error_last(), "ckpt.bin: is a symbolic link") &&
          k.cfg_text == NULL);

    if (tsc_test_rmtree(dir)) return 1;
    free(c);
    printf("%d passed, %d failed\n", tsc_t_pass, tsc_t_fail);
    return tsc_t_fail ? 1 : 0;
}
