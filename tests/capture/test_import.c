/* test_import.c: the safetensors and npy readers and tsc_import_run. Files are written here by a
 * writer of the test's own (safetensors: 8-byte little-endian header length, JSON header, raw
 * bytes; npy: magic, version, dict header) holding F32, BF16 and F16 tensors with known bits:
 * the dump must hold exactly those bits per head (tsc_dump_read_raw), in [B, H, T, D] after a bthd
 * layout's transpose. Every malformed file is refused with a message naming the file and the
 * problem (and the tensor at fault), and leaves no output file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tsc_dump.h"
#include "tsc_import.h"
#include "tsc_test.h"

static char dir[64];
enum { B = 2, H = 4, HKV = 2, T = 8, D = 4 };

typedef struct {
    const char *name, *dtype;
    int rank;
    uint64_t dims[4];
    const void *data;
    size_t nbytes;
} wt_t;

/* The bits of element i of tensor `tag`: distinct per tensor and element, never NaN. */
static uint16_t bits16(int tag, size_t i) { return (uint16_t)(0x3c00 + ((tag * 977 + (int)i * 13) % 0x2000)); }

/* Writes a safetensors file; header_extra (may be NULL) replaces the generated JSON when set. */
static void write_st(const char *path, const wt_t *t, int n, const char *header_override, long long len_override,
                     size_t cut) {
    char hdr[8192];
    size_t o = 0, off = 0;
    o += (size_t)snprintf(hdr + o, sizeof hdr - o, "{\"__metadata__\": {\"format\": \"pt\"}");
    for (int i = 0; i < n; i++) {
        o += (size_t)snprintf(hdr + o, sizeof hdr - o, ", \"%s\": {\"dtype\": \"%s\", \"shape\": [", t[i].name, t[i].dtype);
        for (int d = 0; d < t[i].rank; d++) o += (size_t)snprintf(hdr + o, sizeof hdr - o, "%s%llu", d ? ", " : "", (unsigned long long)t[i].dims[d]);
        o += (size_t)snprintf(hdr + o, sizeof hdr - o, "], \"data_offsets\": [%zu, %zu]}", off, off + t[i].nbytes);
        off += t[i].nbytes;
    }
    o += (size_t)snprintf(hdr + o, sizeof hdr - o, "}");
    const char *h = header_override ? header_override : hdr;
    uint64_t hl = len_override >= 0 ? (uint64_t)len_override : strlen(h);
    FILE *f = fopen(path, "wb");
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(hl >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(h, 1, strlen(h), f);
    size_t written = 0;
    for (int i = 0; i < n; i++) {
        size_t w = t[i].nbytes;
        if (cut && written + w > cut) w = cut > written ? cut - written : 0;
        fwrite(t[i].data, 1, w, f);
        written += w;
    }
    fclose(f);
}

static void write_npy(const char *path, const char *dict, const void *data, size_t nbytes) {
    char h[256];
    size_t n = (size_t)snprintf(h, sizeof h, "%s", dict);
    while ((10 + n + 1) % 64) h[n++] = ' ';
    h[n++] = '\n';
    FILE *f = fopen(path, "wb");
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 255), (unsigned char)(n >> 8)};
    fwrite(pre, 1, 10, f);
    fwrite(h, 1, n, f);
    fwrite(data, 1, nbytes, f);
    fclose(f);
}

static uint16_t q16[B * H * T * D], k16[B * HKV * T * D], v16[B * HKV * T * D];
static float o32[B * H * T * D], lse32[B * H * T];

static void fill(void) {
    for (size_t i = 0; i < sizeof q16 / 2; i++) q16[i] = bits16(1, i);
    for (size_t i = 0; i < sizeof k16 / 2; i++) k16[i] = bits16(2, i), v16[i] = bits16(3, i);
    for (size_t i = 0; i < sizeof o32 / 4; i++) o32[i] = (float)i * 0.25f - 7.0f;
    for (size_t i = 0; i < sizeof lse32 / 4; i++) lse32[i] = (float)i / 16.0f;
}

/* Layer-3 tensors of step 7 (BF16 q, F16 k v, F32 o lse) plus one no map selects. */
static int tensors(wt_t *t) {
    static float other[3];
    wt_t a[] = {{"blk.3.attn.q", "BF16", 4, {B, H, T, D}, q16, sizeof q16},
                {"blk.3.attn.k", "F16", 4, {B, HKV, T, D}, k16, sizeof k16},
                {"blk.3.attn.v", "F16", 4, {B, HKV, T, D}, v16, sizeof v16},
                {"blk.3.attn.o", "F32", 4, {B, H, T, D}, o32, sizeof o32},
                {"blk.3.attn.lse", "F32", 3, {B, H, T, 0}, lse32, sizeof lse32},
                {"lm_head", "F32", 1, {3, 0, 0, 0}, other, sizeof other}};
    memcpy(t, a, sizeof a);
    return 6;
}

static const char *const maps[] = {"blk.{layer}.attn.{name}"};

static tsc_import_opts_t opts(void) {
    tsc_import_opts_t o;
    tsc_import_opts_init(&o);
    o.maps = maps, o.n_maps = 1, o.step = 7;
    return o;
}

/* Element (b, h, t, d) of a [B, X, T, D] buffer, as stored bits. */
static int head_equal(tsc_dump_t *d, const char *name, int b, int h, int heads, const void *src, size_t es) {
    unsigned char got[T * D * 4];
    if (tsc_dump_read_raw(d, 7, 3, name, b, h, got) != TSC_OK) return 0;
    size_t per = !strcmp(name, "lse") ? T : (size_t)T * D;
    return !memcmp(got, (const unsigned char *)src + ((size_t)b * heads + h) * per * es, per * es);
}

static void test_roundtrip(void) {
    char st[128], out[128];
    wt_t t[8];
    int n = tensors(t);
    snprintf(st, sizeof st, "%s/a.safetensors", dir);
    snprintf(out, sizeof out, "%s/a.h5", dir);
    write_st(st, t, n, NULL, -1, 0);
    tsc_import_opts_t o = opts();
    o.policy = "bf16-fa2";
    tsc_import_result_t *r = NULL;
    tsc_status_t s = tsc_import_run(st, out, &o, &r);
    CHECKF(s == TSC_OK, "%s", tsc_error_last());
    if (s) return;
    CHECK(r->n_datasets == 5 && r->n_steps == 1 && r->steps[0] == 7 && r->n_layers == 1 && r->layers[0] == 3);
    CHECK(r->n_skipped == 1 && !strcmp(r->skipped[0], "lm_head"));
    tsc_import_result_free(r);
    tsc_dump_t *d;
    CHECKF(tsc_dump_open(&d, out) == TSC_OK, "%s", tsc_error_last());
    const tsc_dump_meta_t *m = tsc_dump_meta(d);
    CHECK(m->n_layer == 4 && m->n_head == H && m->n_kv_head == HKV && m->head_dim == D && m->seq_len == T && m->batch == B);
    CHECK(m->d_model == H * D && m->causal == 1 && !strcmp(m->policy, "bf16-fa2"));
    CHECK_NEAR(m->softmax_scale, 0.5, 0);
    tsc_dump_dataset_info_t in;
    CHECK(tsc_dump_dataset_info(d, 7, 3, "q", &in) == TSC_OK && in.dtype == TSC_FMT_BF16);
    CHECK(tsc_dump_dataset_info(d, 7, 3, "k", &in) == TSC_OK && in.dtype == TSC_FMT_FP16);
    int bad = 0;
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++)
            bad += !head_equal(d, "q", b, h, H, q16, 2) + !head_equal(d, "o", b, h, H, o32, 4) + !head_equal(d, "lse", b, h, H, lse32, 4);
        for (int h = 0; h < HKV; h++) bad += !head_equal(d, "k", b, h, HKV, k16, 2) + !head_equal(d, "v", b, h, HKV, v16, 2);
    }
    CHECKF(bad == 0, "%d heads differ from the file's bits", bad);
    tsc_dump_close(d);
}

/* [B, T, H, D] in the file: the dump holds the transpose, element for element. */
static void test_bthd(void) {
    static uint16_t qt[B * T * H * D], kt[B * T * HKV * D];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int d = 0; d < D; d++) {
                for (int h = 0; h < H; h++) qt[((b * T + t) * H + h) * D + d] = q16[((b * H + h) * T + t) * D + d];
                for (int h = 0; h < HKV; h++) kt[((b * T + t) * HKV + h) * D + d] = k16[((b * HKV + h) * T + t) * D + d];
            }
    wt_t w[] = {{"blk.3.attn.q", "BF16", 4, {B, T, H, D}, qt, sizeof qt}, {"blk.3.attn.k", "BF16", 4, {B, T, HKV, D}, kt, sizeof kt}};
    char st[128], out[128];
    snprintf(st, sizeof st, "%s/bthd.safetensors", dir);
    snprintf(out, sizeof out, "%s/bthd.h5", dir);
    write_st(st, w, 2, NULL, -1, 0);
    tsc_import_opts_t o = opts();
    o.layout_bthd = 1;
    CHECKF(tsc_import_run(st, out, &o, NULL) == TSC_OK, "%s", tsc_error_last());
    tsc_dump_t *d;
    tsc_status_t os = tsc_dump_open(&d, out);
    CHECKF(os == TSC_OK, "%s", tsc_error_last());
    if (os) return;
    int bad = 0;
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) bad += !head_equal(d, "q", b, h, H, q16, 2);
        for (int h = 0; h < HKV; h++) bad += !head_equal(d, "k", b, h, HKV, k16, 2);
    }
    CHECKF(bad == 0 && tsc_dump_meta(d)->n_kv_head == HKV, "bthd: %d heads differ", bad);
    tsc_dump_close(d);
}

static void test_npy(void) {
    char p[128], out[128];
    snprintf(p, sizeof p, "%s/q.npy", dir);
    snprintf(out, sizeof out, "%s/npy.h5", dir);
    write_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4, 8, 4), }", o32, sizeof o32);
    CHECKF(tsc_import_run(p, out, NULL, NULL) == TSC_OK, "%s", tsc_error_last());
    tsc_dump_t *d;
    tsc_status_t os = tsc_dump_open(&d, out);
    CHECKF(os == TSC_OK, "%s", tsc_error_last());
    if (os) return;
    unsigned char got[T * D * 4];
    CHECK(tsc_dump_read_raw(d, 0, 0, "q", 1, 2, got) == TSC_OK && !memcmp(got, (unsigned char *)o32 + (1 * H + 2) * T * D * 4, sizeof got));
    tsc_dump_close(d);
}

/* Runs the import on path; a pass when it fails, names path and every word, and leaves no output. */
static void refused(const char *path, const char *w1, const char *w2) {
    char out[128];
    snprintf(out, sizeof out, "%s/bad.h5", dir);
    tsc_import_opts_t o = opts();
    tsc_status_t s = tsc_import_run(path, out, &o, NULL);
    const char *e = tsc_error_last(), *base = strrchr(path, '/') + 1;
    CHECKF(s != TSC_OK && strstr(e, base) && strstr(e, w1) && (!w2 || strstr(e, w2)) && access(out, F_OK) != 0,
           "%s: status %d, message: %s", base, s, e);
}

static void test_malformed(void) {
    wt_t t[8];
    int n = tensors(t);
    char p[128];
    snprintf(p, sizeof p, "%s/bad.safetensors", dir);
    write_st(p, t, n, NULL, 1ll << 40, 0);
    refused(p, "header length", "exceeds the file");
    write_st(p, t, n, "{\"blk.3.attn.q\": {\"dtype\": \"BF16\",", -1, 0);
    refused(p, "malformed JSON", NULL);
    write_st(p, t, n, "{\"a\": 1,}", -1, 0);
    refused(p, "malformed JSON", NULL);
    write_st(p, t, n, NULL, -1, 100);
    refused(p, "truncated", NULL);
    wt_t w[8];
    memcpy(w, t, sizeof w);
    w[2].dtype = "F8_E4M3";
    write_st(p, w, n, NULL, -1, 0);
    refused(p, "'blk.3.attn.v'", "F8_E4M3");
    memcpy(w, t, sizeof w);
    w[1].dims[2] = T - 1; /* the shape no longer fits data_offsets */
    write_st(p, w, n, NULL, -1, 0);
    refused(p, "'blk.3.attn.k'", "data_offsets");
    char hdr[512];
    snprintf(hdr, sizeof hdr, "{\"blk.3.attn.q\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                              " \"blk.3.attn.k\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}");
    write_st(p, t, 1, hdr, -1, 0);
    refused(p, "overlap", NULL);
    snprintf(hdr, sizeof hdr, "{\"blk.3.attn.q\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                              " \"blk.3.attn.q\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}}");
    write_st(p, t, 1, hdr, -1, 0);
    refused(p, "named twice", NULL);
    snprintf(hdr, sizeof hdr, "{\"blk.3.attn.q\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296, 4294967296],"
                              " \"data_offsets\": [0, 8]}}");
    write_st(p, t, 1, hdr, -1, 0);
    refused(p, "'blk.3.attn.q'", "overflows");
    snprintf(hdr, sizeof hdr, "{\"blk.3.attn.q\": {\"dtype\": \"BF16\", \"shape\": [2, 4, 8, 4], \"data_offsets\": [512, 1024]}}");
    write_st(p, t, 1, hdr, -1, 0);
    refused(p, "'blk.3.attn.q'", "beyond");
    memcpy(w, t, sizeof w);
    w[3].dims[2] = T / 2, w[3].nbytes /= 2; /* o with T/2 rows: contradicts q */
    write_st(p, w, n, NULL, -1, 0);
    refused(p, "'blk.3.attn.o'", "step 7 layer 3 o");
    snprintf(p, sizeof p, "%s/bad.npy", dir);
    write_npy(p, "{'descr': '<u2', 'fortran_order': False, 'shape': (2, 4, 8, 4), }", q16, sizeof q16);
    refused(p, "'<u2'", "'bad'");
    write_npy(p, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 4, 8, 4), }", o32, sizeof o32);
    refused(p, "fortran_order", NULL);
    write_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4, 8, 4), }", o32, sizeof o32 - 4);
    refused(p, "truncated", NULL);
    write_npy(p, "{'descr': '<f4', 'shape': (2, 4, 8, 4), }", o32, sizeof o32);
    refused(p, "malformed npy header", NULL);
}

/* The header's bounds (util's JSON reader): offsets are exact to 2^64 - 1, never rounded through a
 * double (which reads 2^53 + 1 as 2^53 and 2^64 - 1 as 2^64); keys named once; nesting; UTF-8. */
static void test_header_bounds(void) {
#define Q "{\"blk.3.attn.q\": {\"dtype\": \"F32\", "
#define NEST64 "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
    static const struct {
        const char *header, *w1, *w2;
    } bad[] = {
        {Q "\"shape\": [2], \"data_offsets\": [9007199254740992, 9007199254741001]}}", "'blk.3.attn.q'",
         "[9007199254740992, 9007199254741001] hold 9 bytes"},
        {Q "\"shape\": [2], \"data_offsets\": [18446744073709551607, 18446744073709551615]}}", "'blk.3.attn.q'",
         "end 18446744073709551615 beyond"},
        {Q "\"shape\": [2], \"data_offsets\": [0, 18446744073709551616]}}", "data_offsets[1]", "above 2^64 - 1"},
        {Q "\"shape\": [2.0], \"data_offsets\": [0, 8]}}", "shape[0]", "fraction"},
        {Q "\"shape\": [-2], \"data_offsets\": [0, 8]}}", "shape[0]", "negative"},
        {Q "\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [0, 8]}}", "'dtype' is named twice",
         "malformed JSON at byte 25:"},
        {"{\"__metadata__\": {}, \"__metadata__\": {}}", "'__metadata__' is named twice", NULL},
        {"{\"__metadata__\": {\"a\": 1}}", "__metadata__ values must be strings", NULL},
        {Q "\"shape\": [2], \"data_offsets\": [0, 8], \"x\": [" NEST64 "]}}", "deeper than 64", NULL},
        {"{\"blk.3.attn.q\xff\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", "not valid UTF-8", NULL},
    };
    wt_t t[8];
    tensors(t);
    char p[128];
    snprintf(p, sizeof p, "%s/bounds.safetensors", dir);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_st(p, t, 1, bad[i].header, -1, 0);
        refused(p, bad[i].w1, bad[i].w2);
    }
    /* the header, its entry and 62 arrays: 64 deep, at the limit */
    write_st(p, t, 1, Q "\"shape\": [2], \"data_offsets\": [0, 8], \"x\": " NEST64 "}}", -1, 0);
    tsc_tensor_file_t *tf = NULL;
    CHECKF(tsc_tensor_file_open(&tf, p) == TSC_OK && tsc_tensor_file_count(tf) == 1 && tsc_tensor_file_info(tf, 0)->nbytes == 8,
           "64 deep: %s", tsc_error_last());
    tsc_tensor_file_close(tf);
#undef Q
#undef NEST64
}

static void test_maps(void) {
    CHECK(tsc_import_map_check("a.{layer}.{name}") == TSC_OK && tsc_import_map_check("grad_o.{layer}=do") == TSC_OK);
    CHECK(tsc_import_map_check("a.{layer}") == TSC_ERR_ARG && strstr(tsc_error_last(), "=NAME"));
    CHECK(tsc_import_map_check("a=qq") == TSC_ERR_ARG && strstr(tsc_error_last(), "'qq'"));
    /* greedy backtracking as a regular expression: "*{layer}" leaves one digit to {layer} */
    wt_t w[] = {{"m12.q", "F32", 4, {B, H, T, D}, o32, sizeof o32}};
    char p[128], out[128];
    snprintf(p, sizeof p, "%s/m.safetensors", dir);
    snprintf(out, sizeof out, "%s/m.h5", dir);
    write_st(p, w, 1, NULL, -1, 0);
    const char *const m[] = {"m*{layer}.{name}"};
    tsc_import_opts_t o;
    tsc_import_opts_init(&o);
    o.maps = m, o.n_maps = 1;
    tsc_import_result_t *r = NULL;
    CHECKF(tsc_import_run(p, out, &o, &r) == TSC_OK && r->n_layers == 1 && r->layers[0] == 2, "%s", tsc_error_last());
    tsc_import_result_free(r);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/tsc-import-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    fill();
    test_roundtrip();
    test_bthd();
    test_npy();
    test_malformed();
    test_header_bounds();
    test_maps();
    tsc_test_rmtree(dir);
    return tsc_test_done();
}
