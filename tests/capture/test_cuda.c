/* ctest-labels: gpu
 * The CUDA exact mode on a GPU (skipped, exit 77, where there is none; CI has none, and checks
 * the same arithmetic through the cpu-rowwise backend in test_backends). Device inputs in BF16,
 * FP16 and FP32 through tsc_attn_cuda_run against the CPU reference on the same values: O, LSE,
 * δ, dQ, dK, dV and the four tile statistics bit for bit, over shapes larger than test_backends'
 * (T 1000 and 777, not multiples of the tiles; D 64 and 128; causal and not; GQA 4:1) and the
 * presets the issue names (bf16-fa2, bf16-torch, fp32, +stable) plus fp16 and hp δ.
 * The fast mode (tensor cores) against FlashAttention's rule: for O, dQ, dK and dV, the largest
 * error against the FP64 reference is at most twice that of the same-dtype CPU reference
 * (bf16-fa2 / fp16-fa2 on cpu-ref); the mean signed error (bias) is printed.
 * The P̄V rounding census (tsc_attn_cuda_census) per head equal to the same functions run on the
 * host (test_census_rowwise checks those against the analysis' census).
 * Device capture: 12 steps of q (BF16) and lse (FP32) from device memory through
 * tsc_capture_put_device (sampling every third step) equal, bit for bit, the same tensors captured
 * from host memory with tsc_capture_put; and the flight recorder with its ring in GPU memory fed from
 * device tensors writes the same dump as one with a host ring fed the same tensors from the host. */
#include "attention_internal.h"
#include "tsc_attention.h"
#include "tsc_attn_cuda.h"
#include "tsc_capture.h"
#include "tsc_capture_async.h"
#include "tsc_dump.h"
#include "tsc_flight.h"
#include "tsc_formats.h"
#include "tsc_test.h"

#ifndef TSC_HAVE_CUDA
int main(void) {
    printf("skipped: %s\n", tsc_cuda_describe());
    return 77;
}
#else
#include <cuda_runtime_api.h>

static uint64_t seed = 0xC0DAULL;

static void *dev_copy(const void *h, size_t bytes) {
    void *d = NULL;
    if (cudaMalloc(&d, bytes) != cudaSuccess) abort();
    if (h && cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess) abort();
    return d;
}

static size_t bits_differ(const void *a, const void *b, size_t n, size_t es) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += memcmp((const char *)a + i * es, (const char *)b + i * es, es) != 0;
    return bad;
}

static void one(const char *pname, tsc_cuda_dtype_t dt, int B, int H, int Hkv, int T, int D, int causal) {
    tsc_policy_t p;
    CHECKF(tsc_policy_parse(pname, &p) == TSC_OK, "%s", tsc_error_last());
    const tsc_attn_dims_t d = {B, H, Hkv, T, D, causal, 1.0 / sqrt((double)D)};
    const size_t nq = (size_t)B * H * T * D, nk = (size_t)B * Hkv * T * D, nr = (size_t)B * H * T;
    const size_t n_in[4] = {nq, nk, nk, nq};
    float *in[4];
    uint16_t *in16[4];
    void *din[4];
    for (int w = 0; w < 4; w++) {
        in[w] = malloc(n_in[w] * 4);
        in16[w] = malloc(n_in[w] * 2);
        for (size_t i = 0; i < n_in[w]; i++) {
            float x = (float)(1.5 * tsc_test_nrand(&seed));
            if (w == 1 && (i / D) % 7 == 3 && i >= (size_t)D) x = in[w][i - D]; /* repeated keys: ties */
            if (dt == TSC_CUDA_BF16) {
                in16[w][i] = tsc_bf16_from_f32(x);
                x = tsc_bf16_to_f32(in16[w][i]);
            } else if (dt == TSC_CUDA_F16) {
                in16[w][i] = tsc_fp16_from_f32(x);
                x = tsc_fp16_to_f32(in16[w][i]);
            }
            in[w][i] = x;
        }
        din[w] = dt == TSC_CUDA_F32 ? dev_copy(in[w], n_in[w] * 4) : dev_copy(in16[w], n_in[w] * 2);
    }
    const size_t n_out[6] = {nq, nr, nr, nq, nk, nk};
    float *ref[6], *got[6];
    float *dout[6];
    for (int i = 0; i < 6; i++) {
        ref[i] = malloc(n_out[i] * 4);
        got[i] = malloc(n_out[i] * 4);
        dout[i] = dev_copy(NULL, n_out[i] * 4);
    }
    tsc_attn_tile_stats_t tr, tg;
    CHECK(tsc_attn_tile_stats_init(&tr, B, H, T, p.block_k) == TSC_OK);
    CHECK(tsc_attn_tile_stats_init(&tg, B, H, T, p.block_k) == TSC_OK);
    tsc_attn_io_t io = {TSC_ATTN_F32, in[0], in[1], in[2], in[3], ref[0], ref[1], ref[2], ref[3], ref[4], ref[5]};
    tsc_attn_opts_t opt = {TSC_ATTN_EXACT, &tr, NULL, 0};
    CHECKF(tsc_attn_run_with(tsc_attn_backend_get("cpu-ref"), &p, &d, &io, &opt) == TSC_OK, "%s", tsc_error_last());
    tsc_attn_cuda_io_t dio = {dt, din[0], din[1], din[2], din[3], dout[0], dout[1], dout[2], dout[3], dout[4], dout[5]};
    tsc_status_t st = tsc_attn_cuda_run(&p, &d, &dio, &tg, NULL);
    CHECKF(st == TSC_OK, "%s: %s", pname, tsc_error_last());
    static const char *names[6] = {"O", "LSE", "delta", "dQ", "dK", "dV"};
    size_t total = 0;
    for (int i = 0; i < 6; i++) {
        cudaMemcpy(got[i], dout[i], n_out[i] * 4, cudaMemcpyDeviceToHost);
        size_t bad = bits_differ(ref[i], got[i], n_out[i], 4);
        total += bad;
        CHECKF(bad == 0, "%s dtype %d B=%d H=%d Hkv=%d T=%d D=%d causal=%d: %s: %zu of %zu differ", pname, (int)dt, B,
               H, Hkv, T, D, causal, names[i], bad, n_out[i]);
    }
    const size_t nt = tsc_attn_tile_stats_size(&tr);
    size_t tb = bits_differ(tr.row_max, tg.row_max, nt, 8) + bits_differ(tr.tie_count, tg.tie_count, nt, 4) +
                bits_differ(tr.tie_count_eps, tg.tie_count_eps, nt, 4) + bits_differ(tr.pbar_one, tg.pbar_one, nt, 4);
    CHECKF(tb == 0, "%s: %zu tile statistics differ", pname, tb);
    printf("%-22s dtype %d B=%d H=%d Hkv=%d T=%d D=%d causal=%d: %zu outputs + %zu tile entries, %zu differ\n",
           pname, (int)dt, B, H, Hkv, T, D, causal, nq * 2 + nr * 2 + nk * 2, 4 * nt, total + tb);
    tsc_attn_tile_stats_free(&tr);
    tsc_attn_tile_stats_free(&tg);
    for (int i = 0; i < 6; i++) { free(ref[i]); free(got[i]); cudaFree(dout[i]); }
    for (int w = 0; w < 4; w++) { free(in[w]); free(in16[w]); cudaFree(din[w]); }
}

/* max |x − ref| and mean (x − ref) over n */
static void err_of(const float *x, const double *ref, size_t n, double *mx, double *bias) {
    double m = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = (double)x[i] - ref[i];
        if (fabs(e) > m || e != e) m = e != e ? INFINITY : fabs(e);
        s += e;
    }
    *mx = m;
    *bias = s / (double)n;
}

static void fast(const char *pname, tsc_cuda_dtype_t dt, int B, int H, int Hkv, int T, int D, int causal) {
    tsc_policy_t p, p64;
    CHECK(tsc_policy_parse(pname, &p) == TSC_OK && tsc_policy_parse("fp64", &p64) == TSC_OK);
    const tsc_attn_dims_t d = {B, H, Hkv, T, D, causal, 1.0 / sqrt((double)D)};
    const size_t nq = (size_t)B * H * T * D, nk = (size_t)B * Hkv * T * D, nr = (size_t)B * H * T;
    const size_t n_in[4] = {nq, nk, nk, nq}, n_out[6] = {nq, nr, nr, nq, nk, nk};
    float *in[4], *lp[6], *got[6], *dout[6];
    double *in64[4], *hp[6];
    uint16_t *in16[4];
    void *din[4];
    for (int w = 0; w < 4; w++) {
        in[w] = malloc(n_in[w] * 4);
        in64[w] = malloc(n_in[w] * 8);
        in16[w] = malloc(n_in[w] * 2);
        for (size_t i = 0; i < n_in[w]; i++) {
            float x = (float)(1.5 * tsc_test_nrand(&seed));
            in16[w][i] = dt == TSC_CUDA_BF16 ? tsc_bf16_from_f32(x) : tsc_fp16_from_f32(x);
            x = dt == TSC_CUDA_BF16 ? tsc_bf16_to_f32(in16[w][i]) : tsc_fp16_to_f32(in16[w][i]);
            in[w][i] = x;
            in64[w][i] = x;
        }
        din[w] = dev_copy(in16[w], n_in[w] * 2);
    }
    for (int i = 0; i < 6; i++) {
        lp[i] = malloc(n_out[i] * 4);
        got[i] = malloc(n_out[i] * 4);
        hp[i] = malloc(n_out[i] * 8);
        dout[i] = dev_copy(NULL, n_out[i] * 4);
    }
    tsc_attn_io_t i64 = {TSC_ATTN_F64, in64[0], in64[1], in64[2], in64[3], hp[0], hp[1], hp[2], hp[3], hp[4], hp[5]};
    tsc_attn_io_t i32 = {TSC_ATTN_F32, in[0], in[1], in[2], in[3], lp[0], lp[1], lp[2], lp[3], lp[4], lp[5]};
    CHECK(tsc_attn_run(&p64, &d, &i64, NULL, 0) == TSC_OK);
    CHECK(tsc_attn_run(&p, &d, &i32, NULL, 0) == TSC_OK);
    tsc_attn_cuda_io_t dio = {dt, din[0], din[1], din[2], din[3], dout[0], dout[1], dout[2], dout[3], dout[4], dout[5]};
    tsc_status_t st = tsc_attn_cuda_run_fast(&p, &d, &dio, NULL, NULL);
    CHECKF(st == TSC_OK, "fast %s: %s", pname, tsc_error_last());
    static const int which[4] = {0, 3, 4, 5};
    static const char *names[6] = {"O", "LSE", "delta", "dQ", "dK", "dV"};
    for (int w = 0; w < 4; w++) {
        const int i = which[w];
        cudaMemcpy(got[i], dout[i], n_out[i] * 4, cudaMemcpyDeviceToHost);
        double ef, bf, er, br;
        err_of(got[i], hp[i], n_out[i], &ef, &bf);
        err_of(lp[i], hp[i], n_out[i], &er, &br);
        CHECKF(ef <= 2 * er, "fast %s T=%d D=%d: %s: max error %.3g against FP64 > 2 x the CPU %s reference's %.3g",
               pname, T, D, names[i], ef, pname, er);
        printf("fast %-9s B=%d H=%d Hkv=%d T=%d D=%d causal=%d %-2s: max err %.3g (CPU same-dtype %.3g, ratio %.2f), "
               "bias %.3g (CPU %.3g)\n", pname, B, H, Hkv, T, D, causal, names[i], ef, er, er > 0 ? ef / er : 0, bf, br);
    }
    for (int i = 0; i < 6; i++) { free(lp[i]); free(got[i]); free(hp[i]); cudaFree(dout[i]); }
    for (int w = 0; w < 4; w++) { free(in[w]); free(in64[w]); free(in16[w]); cudaFree(din[w]); }
}

static void census(const char *pname, int H, int T, int D) {
    tsc_policy_t p;
    CHECK(tsc_policy_parse(pname, &p) == TSC_OK);
    const tsc_attn_dims_t d = {1, H, H, T, D, 1, 1.0 / sqrt((double)D)};
    const size_t n = (size_t)H * T * D;
    float *x[3];
    void *dx[3];
    for (int w = 0; w < 3; w++) {
        x[w] = malloc(n * 4);
        for (size_t i = 0; i < n; i++)
            x[w][i] = tsc_bf16_to_f32(tsc_bf16_from_f32((float)((w == 2 ? -2.2 : 0) + tsc_test_nrand(&seed))));
        dx[w] = dev_copy(x[w], n * 4);
    }
    tsc_attn_census_t *got = calloc((size_t)H, sizeof *got);
    tsc_attn_cuda_io_t io = {TSC_CUDA_F32, dx[0], dx[1], dx[2], NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    CHECKF(tsc_attn_cuda_census(&p, &d, &io, TSC_FMT_BF16, got, NULL) == TSC_OK, "%s", tsc_error_last());
    tsc_rw_pol_t rp;
    CHECK(tsc_rw_policy(&p, &d, &rp) == TSC_OK);
    float *scr = malloc((3 * (size_t)rp.Bc + 3 * (size_t)D) * 4), *orow = malloc((size_t)D * 4), lse;
    float *q = malloc((size_t)T * D * 4), *k = malloc((size_t)T * D * 4), *v = malloc((size_t)T * D * 4);
    for (int h = 0; h < H; h++) {
        const size_t off = (size_t)h * T * D;
        for (size_t i = 0; i < (size_t)T * D; i++) {
            q[i] = tsc_rw_load(&rp, TSC_RW_Q, x[0][off + i]);
            k[i] = tsc_rw_load(&rp, TSC_RW_K, x[1][off + i]);
            v[i] = tsc_rw_load(&rp, TSC_RW_V, x[2][off + i]);
        }
        tsc_attn_census_t want = {0, 0, 0, 0, 0};
        for (int t = 0; t < T; t++) {
            tsc_rw_census_t r = {0, 0, 0, 0, 0};
            tsc_rw_fwd_row(&rp, q + (size_t)t * D, k, v, t, orow, &lse, NULL, scr, &r, TSC_HD_BF16);
            want.additions += r.additions;
            want.events_neg += r.events_neg;
            want.events_pos += r.events_pos;
            want.err_neg += r.err_neg;
            want.err_pos += r.err_pos;
        }
        CHECKF(got[h].additions == want.additions && got[h].events_neg == want.events_neg &&
                   got[h].events_pos == want.events_pos && got[h].err_neg == want.err_neg &&
                   got[h].err_pos == want.err_pos,
               "census %s head %d: GPU %lld/%lld/%lld %.17g %.17g, host %lld/%lld/%lld %.17g %.17g", pname, h,
               got[h].additions, got[h].events_neg, got[h].events_pos, got[h].err_neg, got[h].err_pos,
               want.additions, want.events_neg, want.events_pos, want.err_neg, want.err_pos);
    }
    printf("census %s H=%d T=%d D=%d: head 0 %lld additions, %lld negative events, equal to the host's\n", pname, H,
           T, D, got[0].additions, got[0].events_neg);
    for (int w = 0; w < 3; w++) { free(x[w]); cudaFree(dx[w]); }
    free(got); free(scr); free(orow); free(q); free(k); free(v);
}

/* Compares q and lse of every step and head of two dumps; the number that differ. */
static long dumps_differ(const char *pa, const char *pb, int steps_want) {
    tsc_dump_t *x = NULL, *y = NULL;
    if (tsc_dump_open(&x, pa) != TSC_OK || tsc_dump_open(&y, pb) != TSC_OK) {
        tsc_dump_close(x);
        return -1;
    }
    long bad = tsc_dump_n_steps(x) != steps_want || tsc_dump_n_steps(y) != steps_want;
    float *bx = malloc(100 * 64 * 4), *by = malloc(100 * 64 * 4);
    for (int si = 0; si < tsc_dump_n_steps(y) && si < tsc_dump_n_steps(x); si++)
        for (int b = 0; b < 2; b++)
            for (int h = 0; h < 4; h++) {
                const long long s = tsc_dump_step_at(y, si);
                bad += s != tsc_dump_step_at(x, si);
                bad += tsc_dump_read(x, s, 0, "q", b, h, bx) != TSC_OK || tsc_dump_read(y, s, 0, "q", b, h, by) != TSC_OK ||
                       memcmp(bx, by, 100 * 64 * 4) != 0;
                bad += tsc_dump_read(x, s, 0, "lse", b, h, bx) != TSC_OK ||
                       tsc_dump_read(y, s, 0, "lse", b, h, by) != TSC_OK || memcmp(bx, by, 100 * 4) != 0;
            }
    free(bx);
    free(by);
    tsc_dump_close(x);
    tsc_dump_close(y);
    return bad;
}

static void flight_device(const tsc_dump_meta_t *m, const char *dir) {
    char pd[300], ph[300];
    snprintf(pd, sizeof pd, "%s/flight-dev.h5", dir);
    snprintf(ph, sizeof ph, "%s/flight-host.h5", dir);
    tsc_flight_opts_t o;
    tsc_flight_opts_init(&o);
    o.n_steps = 3;
    tsc_flight_t *fh = NULL, *fd = NULL;
    CHECK(tsc_flight_open(&fh, ph, m, &o) == TSC_OK);
    o.device = 1;
    CHECKF(tsc_flight_open(&fd, pd, m, &o) == TSC_OK, "%s", tsc_error_last());
    const size_t nq = (size_t)2 * 4 * 100 * 64, nl = (size_t)2 * 4 * 100;
    uint16_t *q = malloc(nq * 2);
    float *lse = malloc(nl * 4);
    void *dq = dev_copy(NULL, nq * 2), *dl = dev_copy(NULL, nl * 4);
    const uint64_t dimq[4] = {2, 4, 100, 64}, diml[3] = {2, 4, 100};
    for (long long step = 0; step < 7 && fd && fh; step++) {
        for (size_t i = 0; i < nq; i++) q[i] = tsc_bf16_from_f32((float)tsc_test_nrand(&seed));
        for (size_t i = 0; i < nl; i++) lse[i] = (float)tsc_test_nrand(&seed);
        cudaMemcpy(dq, q, nq * 2, cudaMemcpyHostToDevice);
        cudaMemcpy(dl, lse, nl * 4, cudaMemcpyHostToDevice);
        CHECK(tsc_flight_step_begin(fd, step) == TSC_OK && tsc_flight_step_begin(fh, step) == TSC_OK);
        CHECK(tsc_flight_put_device(fd, 0, "q", TSC_FMT_BF16, 4, dimq, dq, NULL) == TSC_OK);
        CHECK(tsc_flight_put_device(fd, 0, "lse", TSC_FMT_FP32, 3, diml, dl, NULL) == TSC_OK);
        CHECK(tsc_flight_put(fh, 0, "q", TSC_FMT_BF16, 4, dimq, q) == TSC_OK);
        CHECK(tsc_flight_put(fh, 0, "lse", TSC_FMT_FP32, 3, diml, lse) == TSC_OK);
        int f1 = 0, f2 = 0;
        CHECK(tsc_flight_step_end(fd, 1.0, 1.0, &f1) == TSC_OK && tsc_flight_step_end(fh, 1.0, 1.0, &f2) == TSC_OK);
        cudaDeviceSynchronize(); /* dq, dl are refilled next step */
    }
    CHECKF(tsc_flight_trigger(fd, "test") == TSC_OK, "%s", tsc_error_last());
    CHECK(tsc_flight_trigger(fh, "test") == TSC_OK);
    CHECK(tsc_flight_close(fd) == TSC_OK && tsc_flight_close(fh) == TSC_OK);
    const long bad = dumps_differ(pd, ph, 3);
    CHECKF(bad == 0, "flight recorder: the device ring's dump differs from the host ring's (%ld)", bad);
    printf("flight recorder: a ring of 3 steps in GPU memory wrote the same dump as a host ring\n");
    free(q); free(lse);
    cudaFree(dq); cudaFree(dl);
}

static void device_capture(void) {
    char dir[] = "/tmp/tsc_test_cuda.XXXXXX";
    if (!mkdtemp(dir)) return;
    char pd[300], ph[300];
    snprintf(pd, sizeof pd, "%s/dev.h5", dir);
    snprintf(ph, sizeof ph, "%s/host.h5", dir);
    tsc_dump_meta_t m;
    tsc_dump_meta_init(&m);
    m.n_layer = 1; m.n_head = 4; m.n_kv_head = 2; m.head_dim = 64; m.d_model = 256; m.seq_len = 100; m.batch = 2;
    m.softmax_scale = 0.125; m.tile_k = 64;
    snprintf(m.policy, sizeof m.policy, "bf16-fa2");
    snprintf(m.producer, sizeof m.producer, "test_cuda");
    const tsc_capture_opts_t o = {.select = "steps=0:12:3"};
    tsc_capture_t *cd = NULL, *ch = NULL;
    CHECK(tsc_capture_open(&cd, pd, &m, &o) == TSC_OK && tsc_capture_open(&ch, ph, &m, &o) == TSC_OK);
    tsc_capture_async_t *a = NULL;
    CHECK(tsc_capture_async_open(&a, cd, 1u << 20) == TSC_OK);
    const size_t nq = (size_t)2 * 4 * 100 * 64, nl = (size_t)2 * 4 * 100;
    uint16_t *q = malloc(nq * 2);
    float *lse = malloc(nl * 4);
    void *dq = dev_copy(NULL, nq * 2), *dl = dev_copy(NULL, nl * 4);
    const uint64_t dimq[4] = {2, 4, 100, 64}, diml[3] = {2, 4, 100};
    cudaStream_t st;
    cudaStreamCreate(&st);
    for (long long step = 0; step < 12; step++) {
        for (size_t i = 0; i < nq; i++) q[i] = tsc_bf16_from_f32((float)tsc_test_nrand(&seed));
        for (size_t i = 0; i < nl; i++) lse[i] = (float)tsc_test_nrand(&seed);
        cudaMemcpyAsync(dq, q, nq * 2, cudaMemcpyHostToDevice, st);
        cudaMemcpyAsync(dl, lse, nl * 4, cudaMemcpyHostToDevice, st);
        CHECK(tsc_capture_async_step_begin(a, step) == TSC_OK);
        CHECK(tsc_capture_put_device(a, 0, "q", TSC_FMT_BF16, 4, dimq, dq, st) == TSC_OK);
        CHECK(tsc_capture_put_device(a, 0, "lse", TSC_FMT_FP32, 3, diml, dl, st) == TSC_OK);
        CHECK(tsc_capture_async_step_end(a, st) == TSC_OK);
        cudaStreamSynchronize(st); /* the host buffers are refilled next step */
        CHECK(tsc_capture_step_begin(ch, step) == TSC_OK);
        CHECK(tsc_capture_put(ch, 0, "q", TSC_FMT_BF16, 4, dimq, q) == TSC_OK);
        CHECK(tsc_capture_put(ch, 0, "lse", TSC_FMT_FP32, 3, diml, lse) == TSC_OK);
        CHECK(tsc_capture_step_end(ch) == TSC_OK);
    }
    CHECKF(tsc_capture_async_close(a) == TSC_OK, "%s", tsc_error_last());
    CHECK(tsc_capture_close(cd) == TSC_OK && tsc_capture_close(ch) == TSC_OK);
    const long bad = dumps_differ(pd, ph, 4);
    CHECKF(bad == 0, "device capture: %ld head slices differ from the host capture", bad);
    printf("device capture: 4 sampled steps of 12, q and lse from device memory, equal to the host capture\n");
    flight_device(&m, dir);
    free(q); free(lse);
    cudaFree(dq); cudaFree(dl);
    cudaStreamDestroy(st);
    tsc_test_rmtree(dir);
}

int main(void) {
    if (!tsc_cuda_available()) {
        printf("skipped: %s\n", tsc_cuda_describe());
        return 77;
    }
    printf("device: %s\n", tsc_cuda_describe());
    one("bf16-fa2", TSC_CUDA_BF16, 2, 8, 2, 1000, 128, 1);
    one("bf16-fa2+stable", TSC_CUDA_BF16, 1, 4, 4, 777, 64, 0);
    one("bf16-torch", TSC_CUDA_BF16, 1, 4, 1, 1000, 64, 1);
    one("bf16-torch+stable", TSC_CUDA_BF16, 1, 4, 2, 777, 128, 1);
    one("fp32", TSC_CUDA_F32, 1, 4, 2, 1000, 64, 1);
    one("fp16-fa2+hp-delta", TSC_CUDA_F16, 1, 4, 4, 777, 64, 1);
    census("bf16-torch", 4, 777, 128);
    device_capture();
    fast("bf16-fa2", TSC_CUDA_BF16, 2, 8, 2, 1000, 128, 1);
    fast("bf16-fa2", TSC_CUDA_BF16, 1, 4, 4, 777, 64, 0);
    fast("fp16-fa2", TSC_CUDA_F16, 1, 4, 1, 1000, 64, 1);
    return tsc_test_done();
}
#endif
