/* test_dump.c: dump format v1 round trips (bit for bit, every dtype, odd shapes, GQA), HDF5's own
 * conversion of our custom float types, and the reader's errors. */
#include <hdf5.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tsc_dump.h"
#include "tsc_h5.h"
#include "tsc_test.h"

static char dir[256];

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) {  /* splitmix64: fixed, independent of the code under test */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Random stored bits of fmt; every 8-bit pattern appears, and 16-bit ones include subnormals,
 * zeros, infinities and NaNs (bit patterns are drawn uniformly). */
static void fill_bits(tsc_format_t f, void *buf, size_t n) {
    size_t sz = tsc_format_size(f);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rnd();
        if (sz == 1) r = i & 0xff;
        memcpy((char *)buf + i * sz, &r, sz);
    }
}

static tsc_dump_meta_t geometry(int B, int H, int Hkv, int T, int D, int C) {
    tsc_dump_meta_t m;
    tsc_dump_meta_init(&m);
    m.n_layer = 3; m.n_head = H; m.n_kv_head = Hkv; m.head_dim = D; m.d_model = C; m.seq_len = T; m.batch = B;
    m.softmax_scale = 0.125; m.tile_q = 16; m.tile_k = 16;
    snprintf(m.policy, sizeof m.policy, "bf16-torch");
    snprintf(m.producer, sizeof m.producer, "test_dump");
    return m;
}

/* Writes q/k/v/o/do (fmt), lse (fp32), x and w_q (fmt) as raw bits, then reads them back raw and as
 * float and compares with the bits written / their exact decoding. */
static void roundtrip(tsc_format_t fmt, int B, int H, int Hkv, int T, int D, int C, int deflate) {
    char path[300];
    snprintf(path, sizeof path, "%s/rt_%s_%d_%d_%d.h5", dir, tsc_format_name(fmt), T, Hkv, deflate);
    tsc_dump_meta_t m = geometry(B, H, Hkv, T, D, C);
    size_t sz = tsc_format_size(fmt);
    const char *names[] = {"q", "k", "v", "o", "do", "lse", "x", "w_q", "w_o"};
    void *data[9];
    uint64_t n[9];
    tsc_dump_writer_t *w;
    tsc_dump_write_opts_t o = {deflate, 0};
    CHECK(tsc_dump_writer_open(&w, path, &m, &o) == TSC_OK);
    if (!w) return;
    for (int i = 0; i < 9; i++) {
        int rank, ph;
        uint64_t dims[4];
        CHECK(tsc_dump_expected_shape(&m, names[i], &rank, dims, &ph) == TSC_OK);
        n[i] = 1;
        for (int k = 0; k < rank; k++) n[i] *= dims[k];
        tsc_format_t f = i == 5 ? TSC_FMT_FP32 : fmt;
        data[i] = malloc(n[i] * tsc_format_size(f));
        fill_bits(f, data[i], n[i]);
        CHECKF(tsc_dump_writer_put(w, 7, 2, names[i], rank, dims, f, data[i], f) == TSC_OK, "%s: %s", names[i],
               tsc_error_last());
    }
    CHECK(tsc_dump_writer_step_done(w, 7) == TSC_OK);
    CHECK(tsc_dump_writer_close(w) == TSC_OK);
    CHECK(access(path, F_OK) == 0);

    tsc_dump_t *d;
    CHECKF(tsc_dump_open(&d, path) == TSC_OK, "%s", tsc_error_last());
    if (!d) return;
    CHECK_EQ_INT(tsc_dump_n_steps(d), 1);
    CHECK_EQ_INT(tsc_dump_step_at(d, 0), 7);
    CHECK_EQ_INT(tsc_dump_incomplete_step(d), -1);
    CHECK_EQ_INT(tsc_dump_meta(d)->n_kv_head, Hkv);
    CHECK_EQ_INT(tsc_dump_meta(d)->seq_len, T);
    CHECK_STREQ(tsc_dump_meta(d)->policy, "bf16-torch");
    int layers[4], nl = 0;
    CHECK(tsc_dump_layers(d, 7, layers, 4, &nl) == TSC_OK);
    CHECK_EQ_INT(nl, 1);
    CHECK_EQ_INT(layers[0], 2);
    size_t mismatch_raw = 0, mismatch_f = 0;
    for (int i = 0; i < 9; i++) {
        tsc_dump_dataset_info_t in;
        tsc_format_t f = i == 5 ? TSC_FMT_FP32 : fmt;
        size_t fsz = tsc_format_size(f);
        CHECKF(tsc_dump_dataset_info(d, 7, 2, names[i], &in) == TSC_OK, "%s", tsc_error_last());
        CHECK_EQ_INT(in.dtype, f);
        CHECK_EQ_INT(in.compressed, deflate > 0);
        uint64_t slice = tsc_dump_slice_elems(d, 7, 2, names[i]);
        int nb = in.per_head || i == 6 ? (int)in.dims[0] : 1, nh = in.per_head ? (int)in.dims[1] : 1;
        CHECK_EQ_INT(slice * (uint64_t)nb * (uint64_t)nh, n[i]);
        void *raw = malloc(slice * fsz);
        float *fl = malloc(slice * sizeof(float)), *ref = malloc(slice * sizeof(float));
        for (int b = 0; b < nb; b++)
            for (int h = 0; h < nh; h++) {
                const char *src = (const char *)data[i] + ((size_t)b * (size_t)nh + (size_t)h) * slice * fsz;
                CHECK(tsc_dump_read_raw(d, 7, 2, names[i], b, h, raw) == TSC_OK);
                if (memcmp(raw, src, slice * fsz) != 0) mismatch_raw++;
                CHECK(tsc_dump_read(d, 7, 2, names[i], b, h, fl) == TSC_OK);
                for (uint64_t e = 0; e < slice; e++) {
                    uint64_t bits = 0;
                    memcpy(&bits, src + e * fsz, fsz);
                    double want = tsc_decode(bits, f);
                    if (f == TSC_FMT_FP64) want = (double)(float)want;  /* fp64 read as float: rounded */
                    if (isnan(want) ? !isnan(fl[e]) : (double)fl[e] != want) mismatch_f++;
                }
            }
        free(raw); free(fl); free(ref);
    }
    CHECKF(mismatch_raw == 0, "%s T=%d: %zu slices differ bitwise", tsc_format_name(fmt), T, mismatch_raw);
    CHECKF(mismatch_f == 0, "%s T=%d: %zu values differ after conversion", tsc_format_name(fmt), T, mismatch_f);
    CHECK(tsc_dump_validate(d, 1, NULL, NULL) == 0);
    tsc_dump_close(d);
    for (int i = 0; i < 9; i++) free(data[i]);
    (void)sz;
}

/* HDF5's soft conversion (what h5dump and h5py use) of every bit pattern of our custom types to
 * float, against our exact decoding. E4M3 has no Inf and its exponent 1111 holds finite values
 * (256..448) and NaN only at S.1111.111; HDF5 follows IEEE rules, so for those 16 patterns it
 * differs: that, and only that, is expected (documented in docs/FORMAT.md). */
static void hdf5_conversion(tsc_format_t fmt) {
    size_t sz = tsc_format_size(fmt), n = sz == 1 ? 256 : 65536;
    char path[300];
    snprintf(path, sizeof path, "%s/conv_%s.h5", dir, tsc_format_name(fmt));
    tsc_h5_file_t f;
    CHECK(tsc_h5_create(&f, path) == TSC_OK);
    void *bits = malloc(n * sz);
    for (size_t i = 0; i < n; i++) { uint16_t v = (uint16_t)i; memcpy((char *)bits + i * sz, &v, sz); }
    uint64_t dims[1] = {n};
    CHECK(tsc_h5_write_array(f.fid, "all", fmt, 1, dims, bits, fmt, "pattern", NULL, NULL) == TSC_OK);
    CHECK(tsc_h5_commit(&f) == TSC_OK);
    hid_t fid;
    CHECK(tsc_h5_open(&fid, path, 0) == TSC_OK);
    float *got = malloc(n * sizeof(float));
    hid_t ds = H5Dopen2(fid, "all", H5P_DEFAULT);
    CHECK(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0);
    size_t bad = 0, bad_e4m3_top = 0, subn = 0;
    for (size_t i = 0; i < n; i++) {
        double want = tsc_decode(i, fmt);
        int same = isnan(want) ? isnan(got[i]) : (double)got[i] == want && !signbit(got[i]) == !signbit(want);
        int e4m3_top = fmt == TSC_FMT_FP8_E4M3 && ((i >> 3) & 0xf) == 0xf;
        if (!same && e4m3_top) bad_e4m3_top++;
        else if (!same) {
            if (bad < 5) fprintf(stderr, "  %s pattern 0x%zx: HDF5 %.9g, exact %.9g\n", tsc_format_name(fmt), i,
                                 (double)got[i], want);
            bad++;
        }
        int mant = tsc_format_mant_bits(fmt), exp_field = (int)((i >> mant) & ((1u << tsc_format_exp_bits(fmt)) - 1));
        if (exp_field == 0 && (i & ((1u << mant) - 1))) subn++;
    }
    CHECKF(bad == 0, "%s: HDF5's conversion differs from the exact value for %zu patterns", tsc_format_name(fmt), bad);
    CHECK(subn > 0);  /* the sweep did cover subnormals */
    /* S.1111.000 (+-256) reads as +-inf and S.1111.001..110 (288..448) as NaN through HDF5; S.1111.111
     * is NaN in both: 7 patterns per sign */
    if (fmt == TSC_FMT_FP8_E4M3) CHECK_EQ_INT(bad_e4m3_top, 14);
    H5Dclose(ds);
    H5Fclose(fid);
    free(bits); free(got);
}

static void write_custom(const char *path, long version, int bad_shape, int drop_k) {
    tsc_dump_meta_t m = geometry(1, 2, 2, 5, 3, 4);
    tsc_dump_writer_t *w;
    CHECK(tsc_dump_writer_open(&w, path, &m, NULL) == TSC_OK);
    float z[64] = {0};
    uint64_t q[4] = {1, 2, 5, 3};
    const char *nm[] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++)
        if (!(drop_k && i == 1)) CHECK(tsc_dump_writer_put(w, 1, 0, nm[i], 4, q, TSC_FMT_FP32, z, TSC_FMT_BF16) == TSC_OK);
    CHECK(tsc_dump_writer_step_done(w, 1) == TSC_OK);
    CHECK(tsc_dump_writer_close(w) == TSC_OK);
    /* plant the inconsistencies with plain HDF5 */
    hid_t fid;
    CHECK(tsc_h5_open(&fid, path, 1) == TSC_OK);
    if (version != 1) CHECK(tsc_h5_attr_write_long(fid, "format_version", version) == TSC_OK);
    if (bad_shape) {
        hid_t g;
        CHECK(tsc_h5_group_create(fid, "step_00000001/layer_000", &g) == TSC_OK);
        uint64_t dd[4] = {1, 2, 6, 3};
        CHECK(tsc_h5_write_array(g, "o", TSC_FMT_BF16, 4, dd, z, TSC_FMT_FP32, "b,h,t,d", NULL, NULL) == TSC_OK);
        H5Gclose(g);
    }
    CHECK(H5Fclose(fid) >= 0);
}

static void errors(void) {
    char p[300];
    tsc_dump_t *d = NULL;
    snprintf(p, sizeof p, "%s/absent.h5", dir);
    CHECK(tsc_dump_open(&d, p) == TSC_ERR_IO && d == NULL);
    CHECK(strstr(tsc_error_last(), "absent.h5") != NULL);

    snprintf(p, sizeof p, "%s/text.h5", dir);
    FILE *fp = fopen(p, "w");
    fputs("not hdf5 at all\n", fp);
    fclose(fp);
    CHECK(tsc_dump_open(&d, p) == TSC_ERR_FORMAT);
    CHECK(strstr(tsc_error_last(), "not an HDF5 file") != NULL);

    snprintf(p, sizeof p, "%s/v2.h5", dir);
    write_custom(p, 2, 0, 0);
    CHECK(tsc_dump_open(&d, p) == TSC_ERR_VERSION);
    CHECKF(strstr(tsc_error_last(), "version 2") != NULL, "%s", tsc_error_last());

    snprintf(p, sizeof p, "%s/shape.h5", dir);
    write_custom(p, 1, 1, 1);
    CHECKF(tsc_dump_open(&d, p) == TSC_OK, "%s", tsc_error_last());
    tsc_dump_dataset_info_t in;
    CHECK(tsc_dump_dataset_info(d, 1, 0, "o", &in) == TSC_ERR_SHAPE);
    CHECKF(strstr(tsc_error_last(), "[1, 2, 6, 3]") && strstr(tsc_error_last(), "[1, 2, 5, 3]"), "%s",
           tsc_error_last());
    CHECK(tsc_dump_dataset_info(d, 1, 0, "k", &in) == TSC_ERR_MISSING);
    CHECK(strstr(tsc_error_last(), "'k'") != NULL);
    float buf[64];
    CHECK(tsc_dump_read(d, 1, 0, "q", 0, 2, buf) == TSC_ERR_ARG);   /* head out of range */
    CHECK(tsc_dump_read(d, 2, 0, "q", 0, 0, buf) == TSC_ERR_MISSING); /* no step 2 */
    CHECK(tsc_dump_validate(d, 1, NULL, NULL) == 2);                 /* missing k, bad o */
    tsc_dump_close(d);

    /* writer refuses a shape that contradicts the metadata, and a second write */
    tsc_dump_meta_t m = geometry(1, 2, 1, 4, 2, 3);
    tsc_dump_writer_t *w;
    snprintf(p, sizeof p, "%s/refuse.h5", dir);
    CHECK(tsc_dump_writer_open(&w, p, &m, NULL) == TSC_OK);
    float z[32] = {0};
    uint64_t kd[4] = {1, 2, 4, 2};  /* k has Hkv = 1 heads */
    CHECK(tsc_dump_writer_put(w, 0, 0, "k", 4, kd, TSC_FMT_FP32, z, TSC_FMT_BF16) == TSC_ERR_SHAPE);
    kd[1] = 1;
    CHECK(tsc_dump_writer_put(w, 0, 0, "k", 4, kd, TSC_FMT_FP32, z, TSC_FMT_BF16) == TSC_OK);
    CHECK(tsc_dump_writer_put(w, 0, 0, "k", 4, kd, TSC_FMT_FP32, z, TSC_FMT_BF16) == TSC_ERR_ARG);
    CHECK(tsc_dump_writer_put(w, 0, 5, "q", 4, kd, TSC_FMT_FP32, z, TSC_FMT_BF16) != TSC_OK); /* layer 5 >= 3 */
    tsc_dump_writer_abort(w);
    CHECK(access(p, F_OK) != 0);  /* nothing left behind */

    /* unwritable folder */
    CHECK(tsc_dump_writer_open(&w, "/proc/no/such/dir/x.h5", &m, NULL) == TSC_ERR_IO);
    CHECK(strstr(tsc_error_last(), "x.h5") != NULL);
}

/* f32 handed over, stored bf16: rounding is nearest-even, as tsc_bf16_from_f32 defines it; the
 * paper's worked example sum -4.703990459442139 must come back as -4.71875 (0xc097). */
static void convert_on_write(void) {
    tsc_dump_meta_t m = geometry(1, 1, 1, 3, 2, 2);
    char p[300];
    snprintf(p, sizeof p, "%s/conv_write.h5", dir);
    tsc_dump_writer_t *w;
    CHECK(tsc_dump_writer_open(&w, p, &m, NULL) == TSC_OK);
    float q[6] = {-4.703990459442139f, -4.703125f, 1.0f / 3.0f, 1e-40f, -0.0f, 3.0e38f};
    uint64_t dims[4] = {1, 1, 3, 2};
    CHECK(tsc_dump_writer_put(w, 0, 0, "q", 4, dims, TSC_FMT_FP32, q, TSC_FMT_BF16) == TSC_OK);
    CHECK(tsc_dump_writer_step_done(w, 0) == TSC_OK);
    CHECK(tsc_dump_writer_close(w) == TSC_OK);
    tsc_dump_t *d;
    CHECK(tsc_dump_open(&d, p) == TSC_OK);
    uint16_t raw[6];
    CHECK(tsc_dump_read_raw(d, 0, 0, "q", 0, 0, raw) == TSC_OK);
    CHECK_EQ_U32(raw[0], 0xc097);  /* -4.71875: rounding bit 1 with sticky bits -> up in magnitude */
    CHECK_EQ_U32(raw[1], 0xc096);  /* the exact tie -4.703125 rounds to even, -4.6875 */
    CHECK_EQ_U32(raw[2], 0x3eab);  /* 1/3 = 0x3eaaaaab -> 0x3eab */
    CHECK_EQ_U32(raw[4], 0x8000);
    tsc_dump_close(d);
}

/* tiles/<stat> datasets live in a sub-group, are listed with their prefix and stream per head. */
static void tiles(void) {
    tsc_dump_meta_t m = geometry(1, 2, 1, 5, 2, 2);  /* T = 5, tile_k = 16: one key tile */
    char p[300];
    snprintf(p, sizeof p, "%s/tiles.h5", dir);
    tsc_dump_writer_t *w;
    CHECK(tsc_dump_writer_open(&w, p, &m, NULL) == TSC_OK);
    float z[20] = {0}, ties[10] = {1, 2, 1, 1, 3, 1, 1, 2, 2, 1};
    uint64_t dq[4] = {1, 2, 5, 2}, dk[4] = {1, 1, 5, 2}, dt[4] = {1, 2, 5, 1};
    CHECK(tsc_dump_writer_put(w, 3, 0, "q", 4, dq, TSC_FMT_FP32, z, TSC_FMT_BF16) == TSC_OK);
    CHECK(tsc_dump_writer_put(w, 3, 0, "k", 4, dk, TSC_FMT_FP32, z, TSC_FMT_BF16) == TSC_OK);
    CHECK(tsc_dump_writer_put(w, 3, 0, "v", 4, dk, TSC_FMT_FP32, z, TSC_FMT_BF16) == TSC_OK);
    CHECKF(tsc_dump_writer_put(w, 3, 0, "tiles/tie_count", 4, dt, TSC_FMT_FP32, ties, TSC_FMT_FP32) == TSC_OK, "%s",
           tsc_error_last());
    CHECK(tsc_dump_writer_put(w, 3, 0, "tiles/", 4, dt, TSC_FMT_FP32, ties, TSC_FMT_FP32) == TSC_ERR_ARG);
    CHECK(tsc_dump_writer_step_done(w, 3) == TSC_OK);
    CHECK(tsc_dump_writer_close(w) == TSC_OK);
    tsc_dump_t *d;
    CHECK(tsc_dump_open(&d, p) == TSC_OK);
    if (!d) return;
    char names[8][TSC_DUMP_NAME_MAX];
    int n = 0, found = 0;
    CHECK(tsc_dump_dataset_names(d, 3, 0, names, 8, &n) == TSC_OK);
    CHECK_EQ_INT(n, 4);
    for (int i = 0; i < n && i < 8; i++) found += !strcmp(names[i], "tiles/tie_count");
    CHECK_EQ_INT(found, 1);
    float got[5];
    CHECK(tsc_dump_read(d, 3, 0, "tiles/tie_count", 0, 1, got) == TSC_OK);
    CHECK(got[0] == 1 && got[1] == 1 && got[2] == 2 && got[3] == 2 && got[4] == 1);  /* head 1: ties[5..9] */
    CHECK_EQ_INT(tsc_dump_validate(d, 1, NULL, NULL), 0);
    tsc_dump_close(d);
}

/* A step's tokens: ids and text round trip; the text comes back in display form (control characters,
 * bidi controls and bytes that are not UTF-8 as escapes), cut to 32 bytes at a character boundary; files whose
 * tokens have the wrong shape or variable-length strings are refused by the reader and the validator. */
static void tokens(void) {
    tsc_dump_meta_t m = geometry(2, 1, 1, 4, 2, 2);
    char p[300];
    snprintf(p, sizeof p, "%s/tokens.h5", dir);
    tsc_dump_writer_t *w;
    CHECK(tsc_dump_writer_open(&w, p, &m, NULL) == TSC_OK);
    if (!w) return;
    float z[16] = {0}; /* [2, 1, 4, 2] */
    uint64_t dq[4] = {2, 1, 4, 2};
    const int64_t ids[8] = {5, 70000, -1, 0, 9, 8, 7, 6};
    /* 31 ASCII bytes then a 4-byte emoji: byte 32 falls inside it, so the cut keeps the 31 */
    const char *long_text = "0123456789012345678901234567890\xF0\x9F\x98\x80tail";
    const char *text[8] = {"a", "\xC3\xA9t\xC3\xA9", "\n", NULL, long_text, "\xFFx\xE2\x80\xAE", "</script>", "tab\there\xC2\x85"};
    for (long long st = 0; st < 2; st++)
        for (const char *const *nm = (const char *const[]){"q", "k", "v", NULL}; *nm; nm++)
            CHECK(tsc_dump_writer_put(w, st, 0, *nm, 4, dq, TSC_FMT_FP32, z, TSC_FMT_BF16) == TSC_OK);
    CHECK(tsc_dump_writer_put_tokens(w, 0, ids, text) == TSC_OK);
    CHECK(tsc_dump_writer_put_tokens(w, 0, ids, NULL) == TSC_ERR_ARG); /* once per step */
    CHECK(tsc_dump_writer_put_tokens(w, 1, ids, NULL) == TSC_OK); /* ids only */
    CHECK(tsc_dump_writer_step_done(w, 0) == TSC_OK);
    CHECK(tsc_dump_writer_step_done(w, 1) == TSC_OK);
    CHECK(tsc_dump_writer_close(w) == TSC_OK);
    tsc_dump_t *d;
    CHECK(tsc_dump_open(&d, p) == TSC_OK);
    if (!d) return;
    CHECK_EQ_INT(tsc_dump_has_tokens(d, 0), 2);
    CHECK_EQ_INT(tsc_dump_has_tokens(d, 1), 1);
    int64_t got[4];
    char tx[4][TSC_DUMP_TOKEN_TEXT_CAP];
    CHECK(tsc_dump_read_tokens(d, 0, 0, got, tx) == TSC_OK);
    CHECK(got[0] == 5 && got[1] == 70000 && got[2] == -1 && got[3] == 0);
    CHECK_STREQ(tx[0], "a");
    CHECK_STREQ(tx[1], "\xC3\xA9t\xC3\xA9"); /* UTF-8 as stored */
    CHECK_STREQ(tx[2], "\\n");                  /* a newline shown as backslash n */
    CHECK_STREQ(tx[3], "");                      /* no text given */
    CHECK(tsc_dump_read_tokens(d, 0, 1, got, tx) == TSC_OK);
    CHECK(got[0] == 9 && got[3] == 6);
    CHECK_STREQ(tx[0], "0123456789012345678901234567890"); /* the emoji would not fit whole */
    CHECK_STREQ(tx[1], "\\xFFx\\u202E"); /* not UTF-8: an escape; the right-to-left override too */
    CHECK_STREQ(tx[2], "</script>");                         /* as stored: escaping is the page's job */
    CHECK_STREQ(tx[3], "tab\\there\\u0085"); /* a C1 control (NEL) */
    CHECK(tsc_dump_read_tokens(d, 1, 0, got, NULL) == TSC_OK && got[1] == 70000);
    CHECK(tsc_dump_read_tokens(d, 1, 0, NULL, tx) == TSC_ERR_MISSING);
    CHECK(tsc_dump_read_tokens(d, 0, 2, got, NULL) == TSC_ERR_ARG); /* batch row 2 of 2 */
    CHECK_EQ_INT(tsc_dump_validate(d, 1, NULL, NULL), 0);
    tsc_dump_close(d);

    /* written by another program: tokens of the wrong shape, text as variable-length strings */
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(f >= 0);
    H5Ldelete(f, "step_00000000/tokens", H5P_DEFAULT);
    H5Ldelete(f, "step_00000000/token_text", H5P_DEFAULT);
    hsize_t bad[2] = {2, 3}, good[2] = {2, 4};
    hid_t sp = H5Screate_simple(2, bad, NULL);
    hid_t ds = H5Dcreate2(f, "step_00000000/tokens", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(ds), H5Sclose(sp);
    sp = H5Screate_simple(2, good, NULL);
    hid_t vt = H5Tcopy(H5T_C_S1);
    H5Tset_size(vt, H5T_VARIABLE);
    ds = H5Dcreate2(f, "step_00000001/token_text", vt, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(ds), H5Tclose(vt), H5Sclose(sp);
    H5Fclose(f);
    CHECK(tsc_dump_open(&d, p) == TSC_OK);
    if (!d) return;
    CHECK(tsc_dump_read_tokens(d, 0, 0, got, NULL) == TSC_ERR_SHAPE);
    CHECK(strstr(tsc_error_last(), "step_00000000/tokens must have shape [2, 4]") != NULL);
    CHECK(tsc_dump_read_tokens(d, 1, 0, NULL, tx) == TSC_ERR_FORMAT);
    CHECK(strstr(tsc_error_last(), "variable-length strings are not read") != NULL);
    CHECK_EQ_INT(tsc_dump_validate(d, 0, NULL, NULL), 2); /* one error per step */
    tsc_dump_close(d);
}

int main(void) {
    snprintf(dir, sizeof dir, "tsc_test_dump_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    tsc_format_t fmts[] = {TSC_FMT_FP32, TSC_FMT_BF16, TSC_FMT_FP16, TSC_FMT_FP8_E4M3, TSC_FMT_FP8_E5M2, TSC_FMT_FP64};
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        roundtrip(fmts[i], 2, 4, 2, 37, 5, 6, 0);  /* GQA, T not a multiple of anything */
        roundtrip(fmts[i], 1, 3, 3, 1, 4, 3, 0);   /* T = 1 */
    }
    roundtrip(TSC_FMT_BF16, 2, 4, 1, 33, 8, 5, 4);  /* deflate + shuffle, MQA */
    hdf5_conversion(TSC_FMT_BF16);
    hdf5_conversion(TSC_FMT_FP16);
    hdf5_conversion(TSC_FMT_FP8_E4M3);
    hdf5_conversion(TSC_FMT_FP8_E5M2);
    errors();
    convert_on_write();
    tiles();
    tokens();
    tsc_test_rmtree(dir);
    return tsc_test_done();
}
