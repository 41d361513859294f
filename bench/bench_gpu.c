/* bench_gpu.c: timings of the CUDA side on a GPU (bench/gpu_check.sh runs it; without a GPU it
 * says so and exits 0).
 *   1. exact mode (tsc_attn_cuda_run, forward + backward) on a GPT-2-small layer shape (B 1, H 12,
 *      T 1024, D 64, causal, bf16-fa2) and a Llama-7B layer shape (B 1, H 32, T 2048, D 128):
 *      wall time, TFLOP/s, and the CPU reference's time on the same work (all cores), so the
 *      exact mode's cost is stated against the tool it replaces;
 *   2. capture overhead: 300 steps of a stand-in training step (the exact forward + backward on
 *      B 1, H 4, T 256, D 64) with tsc_capture_put_device of q, k, v, o, do every step, sampling
 *      1 step in 100, against the same loop without capture: the overhead in % of step time.
 *   3. fast mode (tsc_attn_cuda_run_fast, forward + backward, BF16) on GPT-2-small (B 8, H 12, T 1024,
 *      D 64) and Llama-7B layer (B 1, H 32, T 4096, D 128) shapes, causal: TFLOP/s and the share of
 *      the H200's BF16 dense peak (790 TFLOP/s measured there); bench/gpu_torch_sdpa.py times
 *      torch's own kernels on the same shapes (bench/gpu_check.sh runs both).
 * FLOPs as tsc_attn_flops counts them (forward 4·T'·D, backward 10·T'·D per head, T' unmasked pairs). */
#include "tsc_attention.h"
#include "bench_check.h"
#include "tsc_attn_cuda.h"
#include "tsc_capture.h"
#include "tsc_capture_async.h"
#include "tsc_formats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef TSC_HAVE_CUDA
int main(void) {
    printf("bench_gpu: %s: nothing to time\n", tsc_cuda_describe());
    return 0;
}
#else
#include <cuda_runtime_api.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

typedef struct {
    tsc_attn_dims_t d;
    size_t nq, nk, nr;
    uint16_t *h16[4];
    float *hf[4];
    void *din[4];
    float *dout[6];
} prob_t;

static void prob_init(prob_t *p, int B, int H, int Hkv, int T, int D) {
    memset(p, 0, sizeof *p);
    p->d = (tsc_attn_dims_t){B, H, Hkv, T, D, 1, 1.0 / sqrt((double)D)};
    p->nq = (size_t)B * H * T * D;
    p->nk = (size_t)B * Hkv * T * D;
    p->nr = (size_t)B * H * T;
    const size_t n[4] = {p->nq, p->nk, p->nk, p->nq}, no[6] = {p->nq, p->nr, p->nr, p->nq, p->nk, p->nk};
    uint64_t s = 42;
    for (int w = 0; w < 4; w++) {
        p->h16[w] = malloc(n[w] * 2);
        p->hf[w] = malloc(n[w] * 4);
        for (size_t i = 0; i < n[w]; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            const float x = (float)((double)(s >> 11) / 9007199254740992.0 * 4.0 - 2.0);
            p->h16[w][i] = tsc_bf16_from_f32(x);
            p->hf[w][i] = tsc_bf16_to_f32(p->h16[w][i]);
        }
        cudaMalloc(&p->din[w], n[w] * 2);
        cudaMemcpy(p->din[w], p->h16[w], n[w] * 2, cudaMemcpyHostToDevice);
    }
    for (int i = 0; i < 6; i++) cudaMalloc((void **)&p->dout[i], no[i] * 4);
}

static void prob_free(prob_t *p) {
    for (int w = 0; w < 4; w++) { free(p->h16[w]); free(p->hf[w]); cudaFree(p->din[w]); }
    for (int i = 0; i < 6; i++) cudaFree(p->dout[i]);
}

static int fast_mode;

static double gpu_run(prob_t *p, const tsc_policy_t *pol) {
    tsc_attn_cuda_io_t io = {TSC_CUDA_BF16, p->din[0], p->din[1], p->din[2], p->din[3],
                             p->dout[0], p->dout[1], p->dout[2], p->dout[3], p->dout[4], p->dout[5]};
    const double t0 = now();
    if ((fast_mode ? tsc_attn_cuda_run_fast : tsc_attn_cuda_run)(pol, &p->d, &io, NULL, NULL) != TSC_OK) {
        printf("  cuda run failed: %s\n", tsc_error_last());
        return -1;
    }
    return now() - t0;
}

static void time_shape(const char *name, int B, int H, int Hkv, int T, int D, int cpu_too) {
    tsc_policy_t pol;
    BENCH_OK(tsc_policy_parse("bf16-fa2", &pol));
    prob_t p;
    prob_init(&p, B, H, Hkv, T, D);
    gpu_run(&p, &pol); /* warm-up */
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        const double t = gpu_run(&p, &pol);
        if (t >= 0 && t < best) best = t;
    }
    const double fl = tsc_attn_flops(&p.d, 0) + tsc_attn_flops(&p.d, 1);
    printf("%s mode, %s (B %d H %d Hkv %d T %d D %d causal, bf16-fa2): %.4f s, %.3f TFLOP/s", fast_mode ? "fast" :
           "exact", name, B, H, Hkv, T, D, best, fl / best / 1e12);
    if (fast_mode) printf(" = %.1f%% of the 790 TFLOP/s BF16 dense peak", 100.0 * fl / best / 1e12 / 790.0);
    printf("\n");
    if (cpu_too) {
        float *o[6];
        const size_t no[6] = {p.nq, p.nr, p.nr, p.nq, p.nk, p.nk};
        for (int i = 0; i < 6; i++) o[i] = malloc(no[i] * 4);
        tsc_attn_io_t io = {TSC_ATTN_F32, p.hf[0], p.hf[1], p.hf[2], p.hf[3], o[0], o[1], o[2], o[3], o[4], o[5]};
        const double t0 = now();
        BENCH_OK(tsc_attn_run(&pol, &p.d, &io, NULL, 0));
        const double tc = now() - t0;
        printf("  CPU reference (all %ld cores): %.3f s, so the GPU exact mode is %.1fx the CPU's speed\n",
               sysconf(_SC_NPROCESSORS_ONLN), tc, tc / best);
        for (int i = 0; i < 6; i++) free(o[i]);
    }
    prob_free(&p);
}

static double capture_loop(prob_t *p, const tsc_policy_t *pol, int steps, tsc_capture_async_t *a) {
    const uint64_t dq[4] = {(uint64_t)p->d.B, (uint64_t)p->d.H, (uint64_t)p->d.T, (uint64_t)p->d.D};
    const uint64_t dk[4] = {(uint64_t)p->d.B, (uint64_t)p->d.Hkv, (uint64_t)p->d.T, (uint64_t)p->d.D};
    const double t0 = now();
    for (int s = 0; s < steps; s++) {
        gpu_run(p, pol);
        if (!a) continue;
        BENCH_OK(tsc_capture_async_step_begin(a, s));
        BENCH_OK(tsc_capture_put_device(a, 0, "q", TSC_FMT_BF16, 4, dq, p->din[0], NULL));
        BENCH_OK(tsc_capture_put_device(a, 0, "k", TSC_FMT_BF16, 4, dk, p->din[1], NULL));
        BENCH_OK(tsc_capture_put_device(a, 0, "v", TSC_FMT_BF16, 4, dk, p->din[2], NULL));
        BENCH_OK(tsc_capture_put_device(a, 0, "do", TSC_FMT_BF16, 4, dq, p->din[3], NULL));
        BENCH_OK(tsc_capture_put_device(a, 0, "o", TSC_FMT_FP32, 4, dq, p->dout[0], NULL));
        if (tsc_capture_async_step_end(a, NULL) != TSC_OK) printf("  capture: %s\n", tsc_error_last());
    }
    return now() - t0;
}

static void capture_overhead(void) {
    tsc_policy_t pol;
    BENCH_OK(tsc_policy_parse("bf16-fa2", &pol));
    prob_t p;
    prob_init(&p, 1, 4, 4, 256, 64);
    tsc_dump_meta_t m;
    tsc_dump_meta_init(&m);
    m.n_layer = 1; m.n_head = 4; m.n_kv_head = 4; m.head_dim = 64; m.d_model = 256; m.seq_len = 256; m.batch = 1;
    m.softmax_scale = 0.125; m.tile_k = pol.block_k;
    snprintf(m.policy, sizeof m.policy, "bf16-fa2");
    snprintf(m.producer, sizeof m.producer, "bench_gpu");
    char path[] = "/tmp/tsc_bench_gpu_XXXXXX";
    if (!mkdtemp(path)) return;
    char file[128];
    snprintf(file, sizeof file, "%s/cap.h5", path);
    const int steps = 300;
    capture_loop(&p, &pol, 10, NULL); /* warm-up */
    double base = 1e30, with = 1e30;
    for (int r = 0; r < 2; r++) {
        const double b = capture_loop(&p, &pol, steps, NULL);
        if (b < base) base = b;
        tsc_capture_t *cap = NULL;
        const tsc_capture_opts_t o = {.select = "steps=0:100000:100"};
        unlink(file);
        if (tsc_capture_open(&cap, file, &m, &o) != TSC_OK) { printf("capture: %s\n", tsc_error_last()); return; }
        tsc_capture_async_t *a = NULL;
        BENCH_OK(tsc_capture_async_open(&a, cap, 64u << 20));
        const double w = capture_loop(&p, &pol, steps, a);
        BENCH_OK(tsc_capture_async_close(a));
        BENCH_OK(tsc_capture_close(cap));
        if (w < with) with = w;
    }
    printf("capture at 1/100 sampling (q, k, v, do, o of B 1 H 4 T 256 D 64 per sampled step): %d steps %.3f s "
           "without, %.3f s with: overhead %.2f%% of step time (goal < 1%%)\n", steps, base, with,
           100.0 * (with - base) / base);
    unlink(file);
    rmdir(path);
    prob_free(&p);
}

int main(void) {
    if (!tsc_cuda_available()) {
        printf("bench_gpu: %s: nothing to time\n", tsc_cuda_describe());
        return 0;
    }
    printf("device: %s\n", tsc_cuda_describe());
    time_shape("GPT-2-small layer", 1, 12, 12, 1024, 64, 1);
    time_shape("Llama-7B layer", 1, 32, 32, 2048, 128, 0);
    capture_overhead();
    fast_mode = 1;
    time_shape("GPT-2-small", 8, 12, 12, 1024, 64, 0);
    time_shape("Llama-7B layer", 1, 32, 32, 4096, 128, 0);
    return 0;
}
#endif
