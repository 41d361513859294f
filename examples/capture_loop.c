/* capture_loop.c: a training loop that captures attention internals through the host capture API.
 *
 * The "model" is a toy: per layer, q/k/v come from fixed random projections of a drifting input;
 * attention runs with the CPU reference under bf16-fa2 (tsc_attention.h); dO is a random upstream
 * gradient. What matters is the capture pattern a real (GPU) training loop copies:
 *
 *   tsc_capture_open(&cap, out, &meta, &opts);         // once, with the run's geometry
 *   for each step:
 *       tsc_capture_step_begin(cap, step);
 *       if (tsc_capture_wants(cap, step, layer))      // skip device->host copies not kept
 *           tsc_capture_put(cap, layer, "q", TSC_FMT_BF16, 4, dims, q_host);   ... k v o do lse
 *       tsc_capture_step_end(cap);                    // the step is now safe from a crash
 *   tsc_capture_close(cap);                           // packs the session into one file
 *
 * usage: capture_loop OUT.h5 [--steps N] [--select SPEC] [--sleep-ms MS]
 *   --steps N       training steps to run (default 20; 0 = forever, for the SIGKILL demo)
 *   --select SPEC   sampling spec (default "steps=0::5,layers=1,heads=all")
 *   --sleep-ms MS   pause after each step (default 0)
 * Kill it with SIGKILL and run `tilescope info OUT.h5`: every completed step is there.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tsc_attention.h"
#include "tsc_capture.h"
#include "tsc_formats.h"
#include "tsc_policy.h"

enum { B = 1, L = 2, H = 4, HKV = 2, T = 64, D = 16, C = 32 };

static uint64_t rng = 12345;
static float frand(void) {  /* uniform in [-1, 1) */
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng >> 40) * (1.0 / (1 << 23))) - 1.0f;
}

static void to_bf16(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = tsc_bf16_from_f32(src[i]);
}

int main(int argc, char **argv) {
    const char *out = NULL, *select = "steps=0::5,layers=1,heads=all";
    long steps = 20, sleep_ms = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--select") && i + 1 < argc) select = argv[++i];
        else if (!strcmp(argv[i], "--sleep-ms") && i + 1 < argc) sleep_ms = strtol(argv[++i], NULL, 10);
        else if (argv[i][0] != '-' && !out) out = argv[i];
        else {
            fprintf(stderr, "usage: capture_loop OUT.h5 [--steps N] [--select SPEC] [--sleep-ms MS]\n");
            return 2;
        }
    }
    if (!out || steps < 0 || sleep_ms < 0) {
        fprintf(stderr, "usage: capture_loop OUT.h5 [--steps N] [--select SPEC] [--sleep-ms MS]\n");
        return 2;
    }

    tsc_dump_meta_t meta;
    tsc_dump_meta_init(&meta);
    meta.n_layer = L; meta.n_head = H; meta.n_kv_head = HKV; meta.head_dim = D; meta.d_model = C;
    meta.seq_len = T; meta.batch = B; meta.causal = 1; meta.softmax_scale = 0.25; meta.tile_q = meta.tile_k = 16;
    snprintf(meta.policy, sizeof meta.policy, "bf16-fa2+tile:q=16,k=16");
    snprintf(meta.producer, sizeof meta.producer, "capture_loop");
    tsc_policy_t pol;
    if (tsc_policy_parse(meta.policy, &pol) != TSC_OK) { fprintf(stderr, "%s\n", tsc_error_last()); return 1; }

    tsc_capture_opts_t opts = {.select = select};
    tsc_capture_t *cap;
    if (tsc_capture_open(&cap, out, &meta, &opts) != TSC_OK) {
        fprintf(stderr, "capture_loop: %s\n", tsc_error_last());
        return 1;
    }

    /* fixed projections [C, H*D] and [C, HKV*D] per layer, and a drifting input x [T, C] */
    static float wq[L][C][H * D], wk[L][C][HKV * D], wv[L][C][HKV * D], x[T][C];
    for (int l = 0; l < L; l++)
        for (int c = 0; c < C; c++) {
            for (int j = 0; j < H * D; j++) wq[l][c][j] = 0.5f * frand();
            for (int j = 0; j < HKV * D; j++) { wk[l][c][j] = 0.5f * frand(); wv[l][c][j] = frand(); }
        }
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) x[t][c] = frand();

    static float q[B * H * T * D], k[B * HKV * T * D], v[B * HKV * T * D], o[B * H * T * D], dout[B * H * T * D],
        lse[B * H * T];
    static uint16_t q16[B * H * T * D], k16[B * HKV * T * D], v16[B * HKV * T * D], o16[B * H * T * D],
        do16[B * H * T * D];
    uint64_t dq[4] = {B, H, T, D}, dk[4] = {B, HKV, T, D}, dl[3] = {B, H, T};
    tsc_attn_dims_t dims = {B, H, HKV, T, D, 1, 0.25};

    for (long step = 0; steps == 0 || step < steps; step++) {
        for (int t = 0; t < T; t++)  /* the "training" moves the input a little every step */
            for (int c = 0; c < C; c++) x[t][c] += 0.05f * frand();
        if (tsc_capture_step_begin(cap, step) != TSC_OK) fprintf(stderr, "capture_loop: %s\n", tsc_error_last());
        for (int l = 0; l < L; l++) {
            /* forward of layer l: projections, then attention */
            for (int t = 0; t < T; t++) {
                for (int j = 0; j < H * D; j++) {
                    float s = 0;
                    for (int c = 0; c < C; c++) s += x[t][c] * wq[l][c][j];
                    q[((size_t)(j / D) * T + t) * D + j % D] = tsc_bf16_to_f32(tsc_bf16_from_f32(s));
                }
                for (int j = 0; j < HKV * D; j++) {
                    float sk = 0, sv = 0;
                    for (int c = 0; c < C; c++) { sk += x[t][c] * wk[l][c][j]; sv += x[t][c] * wv[l][c][j]; }
                    k[((size_t)(j / D) * T + t) * D + j % D] = tsc_bf16_to_f32(tsc_bf16_from_f32(sk));
                    v[((size_t)(j / D) * T + t) * D + j % D] = tsc_bf16_to_f32(tsc_bf16_from_f32(sv));
                }
            }
            tsc_attn_io_t io = {.dtype = TSC_ATTN_F32, .q = q, .k = k, .v = v, .o = o, .lse = lse};
            if (tsc_attn_run(&pol, &dims, &io, NULL, 0) != TSC_OK) {
                fprintf(stderr, "capture_loop: %s\n", tsc_error_last());
                return 1;
            }
            for (size_t i = 0; i < sizeof dout / sizeof *dout; i++) dout[i] = 1e-3f * frand();
            /* capture: only when the sampling spec keeps this step and layer (a GPU program
             * would do its device-to-host copies inside this branch) */
            if (!tsc_capture_wants(cap, step, l)) continue;
            to_bf16(q, q16, sizeof q / sizeof *q);
            to_bf16(k, k16, sizeof k / sizeof *k);
            to_bf16(v, v16, sizeof v / sizeof *v);
            to_bf16(o, o16, sizeof o / sizeof *o);
            to_bf16(dout, do16, sizeof dout / sizeof *dout);
            tsc_status_t st = tsc_capture_put(cap, l, "q", TSC_FMT_BF16, 4, dq, q16);
            if (st == TSC_OK) st = tsc_capture_put(cap, l, "k", TSC_FMT_BF16, 4, dk, k16);
            if (st == TSC_OK) st = tsc_capture_put(cap, l, "v", TSC_FMT_BF16, 4, dk, v16);
            if (st == TSC_OK) st = tsc_capture_put(cap, l, "o", TSC_FMT_BF16, 4, dq, o16);
            if (st == TSC_OK) st = tsc_capture_put(cap, l, "do", TSC_FMT_BF16, 4, dq, do16);
            if (st == TSC_OK) st = tsc_capture_put(cap, l, "lse", TSC_FMT_FP32, 3, dl, lse);
            if (st != TSC_OK) fprintf(stderr, "capture_loop: step %ld: %s\n", step, tsc_error_last());
        }
        if (tsc_capture_step_end(cap) != TSC_OK) fprintf(stderr, "capture_loop: %s\n", tsc_error_last());
        if (tsc_capture_wants(cap, step, -1)) {
            printf("step %ld captured\n", step);
            fflush(stdout);
        }
        if (sleep_ms) {
            struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
        }
    }
    int kept = tsc_capture_n_steps(cap);
    if (tsc_capture_close(cap) != TSC_OK) {
        fprintf(stderr, "capture_loop: %s\n", tsc_error_last());
        return 1;
    }
    printf("wrote %s (%d steps kept)\n", out, kept);
    return 0;
}
