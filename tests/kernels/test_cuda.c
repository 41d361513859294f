/* The CUDA exact mode on a GPU (skipped, exit 77, where there is none; CI has none, and checks
 * the same arithmetic through the cpu-rowwise backend in test_backends). Device inputs in BF16,
 * FP16 and FP32 through tsc_attn_cuda_run against the CPU reference on the same values: O, LSE,
 * δ, dQ, dK, dV and the four tile statistics bit for bit, over shapes larger than test_backends'
 * (T 1000 and 777, not multiples of the tiles; D 64 and 128; causal and not; GQA 4:1) and the
 * presets the issue names (bf16-fa2, bf16-torch, fp32, +stable) plus fp16 and hp δ.
 * The fast mode (tensor cores) against FlashAttention's rule: for O, dQ, dK and dV, the largest
 * error against the FP64 reference is at most twice that of the same-dtype CPU reference
 * (bf16-fa2 / fp16-fa2 on cpu-ref); the mean signed error (bias) is printed. */
#include "tsc_attention.h"
#include "tsc_attn_cuda.h"
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
    tsc_attn_tile_stats_init(&tr, B, H, T, p.block_k);
    tsc_attn_tile_stats_init(&tg, B, H, T, p.block_k);
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
    fast("bf16-fa2", TSC_CUDA_BF16, 2, 8, 2, 1000, 128, 1);
    fast("bf16-fa2", TSC_CUDA_BF16, 1, 4, 4, 777, 64, 0);
    fast("fp16-fa2", TSC_CUDA_F16, 1, 4, 1, 1000, 64, 1);
    return tsc_test_done();
}
#endif
