/* The formats with a chosen width (e8m6 ... e8m1) through the dump writer and reader, bit for bit: a
 * small dump stores q rounded by the writer from FP32 and k handed over as container bits, each as an
 * HDF5 float32 dataset with the format's name as its dtype attribute (docs/FORMAT.md §1.4); the raw
 * and float reads must give the bits of a reference written here (libm's nearbyint on |x| / ULP, not
 * formats.c), the deep validation must pass, and a float32 dataset whose dtype attribute says e8m4
 * while it holds a value that is not must be refused when it is read (the checker's planted fault). */
#include <hdf5.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tsc_dump.h"
#include "tsc_h5.h"
#include "tsc_test.h"

enum { B = 1, H = 2, HKV = 1, T = 5, D = 7, N_Q = B * H * T * D, N_K = B * HKV * T * D };

static char dir[256];

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* x rounded to nearest-even with p mantissa bits and FP32's exponent range, as container bits. */
static uint32_t ref_bits(float x, int p) {
    const uint32_t u = f2u(x), low = (1u << (23 - p)) - 1u;
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u & ~low) | 0x00400000u; /* NaN: quieted */
    if (isinf(x) || x == 0) return u;
    int e;
    frexp(fabs((double)x), &e);             /* |x| in [2^(e-1), 2^e) */
    const int q = (e - 1 > -126 ? e - 1 : -126) - p; /* the ULP's exponent; subnormals: 2^(-126-p) */
    const double r = nearbyint(fabs((double)x) / ldexp(1.0, q)) * ldexp(1.0, q);
    const double max = ldexp(2.0 - ldexp(1.0, -p), 127);
    const float rf = r > max ? INFINITY : (float)r;
    return (u & 0x80000000u) | f2u(rf);
}

static tsc_dump_meta_t geometry(void) {
    tsc_dump_meta_t m;
    tsc_dump_meta_init(&m);
    m.n_layer = 1; m.n_head = H; m.n_kv_head = HKV; m.head_dim = D; m.d_model = 4; m.seq_len = T; m.batch = B;
    m.softmax_scale = 0.25;
    snprintf(m.policy, sizeof m.policy, "bf16-torch+e8m4:pbar-pv,pv,oacc");
    snprintf(m.producer, sizeof m.producer, "test_formats_e8_dump");
    return m;
}

/* FP32 inputs with every kind of case: ties and near-ties at the width, specials, subnormals, the top. */
static void inputs(float *x, int n, int p, uint64_t seed) {
    uint64_t s = seed;
    const uint32_t fixed[] = {0x7fc00001u, 0xffa00000u, 0x7f800000u, 0xff800000u, 0x00000000u, 0x80000000u,
                              0x00000001u, 0x807fffffu, 0x7f7fffffu, 0xff7fffffu, 0x3f800000u | (1u << (22 - p)),
                              0x3f800000u | (3u << (22 - p)), 0xbf800000u | (1u << (22 - p)) | 1u,
                              (1u << (22 - p)), 0x7f800000u - (1u << (22 - p))};
    const int nf = (int)(sizeof fixed / sizeof *fixed);
    for (int i = 0; i < n; i++) {
        uint32_t r = (uint32_t)tsc_test_lcg(&s);
        x[i] = i < nf ? u2f(fixed[i]) : u2f(r);
    }
}

static void roundtrip(tsc_format_t fmt) {
    const int p = tsc_format_mant_bits(fmt);
    const char *name = tsc_format_name(fmt);
    char path[320];
    snprintf(path, sizeof path, "%s/%s.h5", dir, name);
    float q[N_Q], kf[N_K];
    uint32_t want_q[N_Q], k[N_K], raw[N_Q];
    inputs(q, N_Q, p, 0x1234 + (uint64_t)p);
    inputs(kf, N_K, p, 0x5678 + (uint64_t)p);
    for (int i = 0; i < N_Q; i++) want_q[i] = ref_bits(q[i], p);
    for (int i = 0; i < N_K; i++) k[i] = ref_bits(kf[i], p);
    tsc_dump_meta_t m = geometry();
    tsc_dump_writer_t *w;
    CHECK(tsc_dump_writer_open(&w, path, &m, NULL) == TSC_OK);
    if (!w) return;
    const uint64_t dq[4] = {B, H, T, D}, dk[4] = {B, HKV, T, D};
    CHECKF(tsc_dump_writer_put(w, 0, 0, "q", 4, dq, TSC_FMT_FP32, q, fmt) == TSC_OK, "%s", tsc_error_last());
    CHECKF(tsc_dump_writer_put(w, 0, 0, "k", 4, dk, fmt, k, fmt) == TSC_OK, "%s", tsc_error_last());
    CHECKF(tsc_dump_writer_put(w, 0, 0, "v", 4, dk, fmt, k, TSC_FMT_FP32) == TSC_OK, "%s", tsc_error_last());
    CHECK(tsc_dump_writer_step_done(w, 0) == TSC_OK);
    CHECK(tsc_dump_writer_close(w) == TSC_OK);

    /* the storage is IEEE float32 and the attribute names the format */
    hid_t fid;
    CHECK(tsc_h5_open(&fid, path, 0) == TSC_OK);
    const char *ds_names[3] = {"q", "k", "v"}, *attrs[3] = {name, name, "fp32"};
    for (int i = 0; i < 3; i++) {
        char dsp[64], attr[32] = "";
        snprintf(dsp, sizeof dsp, "step_00000000/layer_000/%s", ds_names[i]);
        hid_t ds = H5Dopen2(fid, dsp, H5P_DEFAULT), ty = H5Dget_type(ds);
        CHECKF(H5Tequal(ty, H5T_IEEE_F32LE) > 0, "%s %s", name, ds_names[i]);
        CHECK(tsc_h5_attr_read_str(ds, "dtype", attr, sizeof attr) == TSC_OK);
        CHECK_STREQ(attr, attrs[i]);
        H5Tclose(ty);
        H5Dclose(ds);
    }
    H5Fclose(fid);

    tsc_dump_t *d;
    CHECKF(tsc_dump_open(&d, path) == TSC_OK, "%s", tsc_error_last());
    if (!d) return;
    long bad = 0;
    for (int h = 0; h < H; h++) {
        float f[T * D];
        CHECK(tsc_dump_read_raw(d, 0, 0, "q", 0, h, raw) == TSC_OK);
        CHECKF(tsc_dump_read(d, 0, 0, "q", 0, h, f) == TSC_OK, "%s", tsc_error_last());
        for (int i = 0; i < T * D; i++) {
            const uint32_t want = want_q[h * T * D + i];
            if (raw[i] != want && bad++ < 5)
                fprintf(stderr, "%s q[%d]: input 0x%08x stored 0x%08x want 0x%08x\n", name, h * T * D + i,
                        f2u(q[h * T * D + i]), raw[i], want);
            bad += f2u(f[i]) != want;
        }
    }
    for (int n = 0; n < 2; n++) { /* k as handed over; v the same values stored as fp32 */
        float f[T * D];
        CHECK(tsc_dump_read_raw(d, 0, 0, ds_names[1 + n], 0, 0, raw) == TSC_OK);
        CHECKF(tsc_dump_read(d, 0, 0, ds_names[1 + n], 0, 0, f) == TSC_OK, "%s", tsc_error_last());
        bad += memcmp(raw, k, sizeof k) != 0 || memcmp(f, k, sizeof k) != 0;
    }
    CHECKF(bad == 0, "%s: %ld values differ from the reference", name, bad);
    CHECKF(tsc_dump_validate(d, 1, NULL, NULL) == 0, "%s", name);
    tsc_dump_close(d);
}

/* A float32 dataset whose attribute says e8m4 must hold e8m4 values: 1 + 2^-10 is not one. */
static void planted_fault(void) {
    char path[320];
    snprintf(path, sizeof path, "%s/fault.h5", dir);
    float q[N_Q], k[N_K];
    for (int i = 0; i < N_Q; i++) q[i] = 1.0f;
    for (int i = 0; i < N_K; i++) k[i] = 1.0f;
    k[3] = 1.0f + 0x1p-10f;
    tsc_dump_meta_t m = geometry();
    tsc_dump_writer_t *w;
    CHECK(tsc_dump_writer_open(&w, path, &m, NULL) == TSC_OK);
    if (!w) return;
    const uint64_t dq[4] = {B, H, T, D}, dk[4] = {B, HKV, T, D};
    CHECK(tsc_dump_writer_put(w, 0, 0, "q", 4, dq, TSC_FMT_FP32, q, TSC_FMT_E8M4) == TSC_OK);
    CHECK(tsc_dump_writer_put(w, 0, 0, "k", 4, dk, TSC_FMT_FP32, k, TSC_FMT_FP32) == TSC_OK);
    CHECK(tsc_dump_writer_put(w, 0, 0, "v", 4, dk, TSC_FMT_FP32, k, TSC_FMT_FP32) == TSC_OK);
    CHECK(tsc_dump_writer_step_done(w, 0) == TSC_OK);
    CHECK(tsc_dump_writer_close(w) == TSC_OK);
    hid_t fid;
    CHECK(tsc_h5_open(&fid, path, 1) == TSC_OK);
    hid_t ds = H5Dopen2(fid, "step_00000000/layer_000/k", H5P_DEFAULT);
    CHECK(H5Adelete(ds, "dtype") >= 0);
    CHECK(tsc_h5_attr_write_str(ds, "dtype", "e8m4") == TSC_OK);
    H5Dclose(ds);
    H5Fclose(fid);
    tsc_dump_t *d;
    CHECKF(tsc_dump_open(&d, path) == TSC_OK, "%s", tsc_error_last());
    if (!d) return;
    float f[T * D];
    CHECK(tsc_dump_read(d, 0, 0, "q", 0, 1, f) == TSC_OK);
    CHECK(tsc_dump_read(d, 0, 0, "k", 0, 0, f) == TSC_ERR_FORMAT);
    CHECKF(strstr(tsc_error_last(), "its dtype attribute says 'e8m4' but it is stored as fp32 holding values that "
                                    "are not e8m4 (batch 0, head 0, element 3 = 1.00097656)") != NULL,
           "%s", tsc_error_last());
    CHECK(tsc_dump_validate(d, 1, NULL, NULL) > 0);
    tsc_dump_close(d);
}

int main(void) {
    snprintf(dir, sizeof dir, "tsc_test_e8_dump_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    const tsc_format_t fmts[] = {TSC_FMT_E8M6, TSC_FMT_E8M5, TSC_FMT_E8M4, TSC_FMT_E8M3, TSC_FMT_E8M2,
                                 TSC_FMT_E8M1};
    for (size_t i = 0; i < sizeof fmts / sizeof *fmts; i++) roundtrip(fmts[i]);
    planted_fault();
    tsc_test_rmtree(dir);
    return tsc_test_done();
}
