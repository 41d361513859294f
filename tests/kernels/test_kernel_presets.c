/* ctest-labels: slow
 * test_kernel_presets: the presets read from kernels' source (docs/PRESETS.md, "Kernels read from their
 * source") against a reference written here from the cited lines, not from the presets' code:
 *  - the online softmax of flash-attn 2 (csrc/flash_attn/src/softmax.h: scale_apply_exp2, softmax_rescale_o,
 *    normalize_softmax_lse): max of the unscaled scores, exp2 of one FFMA (or of a rounded product with
 *    UNFUSE_FMA), the FP32 row sum of the unrounded P, P rounded for the P V product, O = acc · (1/sum),
 *    LSE = fma(max, scale, log sum);
 *  - flash-attn 3 FP8 (hopper/softmax.h: Max_offset): max_scaled = max·σ − 8, the sum divided by 2^8 in LSE;
 *  - flash-attn 4 (flash_attn/cute/softmax.py: update_row_max, apply_exp2_convert; utils.py: ex2_emulation_2):
 *    the row max kept while (old − new)·σ >= −8, the emulated exp2 on the columns the schedule picks;
 *  - the Triton tutorial (06-fused-attention.py) and FlexAttention's template (common.py.jinja), both scalings: O;
 *  - PyTorch's mem-efficient kernel (mem_eff_attention/kernel_forward.h iterative_softmax, the epilogue's
 *    normalisation, the LSE of step 7): O and LSE;
 *  - the emulated exp2 itself, over FP32 inputs of [−127, 16] (every 11th bit pattern, plus both ends),
 *    against the kernel's own sequence: an add rounding toward −inf, then round-to-nearest steps;
 *  - PyTorch's CPU flash kernel (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp: cpu_flash_attention,
 *    _exp_reduce_sum_fusion_kernel; vec/vec512/vec512_float.h exp_u20; vec/functional_base.h VecReduceAllSIMD): O and LSE at
 *    16 and 8 lanes, and exp_u20 itself over FP32 inputs of [−104, 90] (every 11th bit pattern). */
#include <fenv.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tsc_attention.h"
#include "tsc_formats.h"
#include "tsc_test.h"

static uint64_t rng_state = 0x5eedULL;
static double nrand(void) { return tsc_test_nrand(&rng_state); }

static uint32_t bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static float from_bits(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

/* utils.py ex2_emulation_2: x clamped at −127 (fmax), x + 1.5·2^23 rounded down (add.rm), back and the
 * fraction round to nearest, Horner with fma on POLY_EX2[3], the rounded sum's bits << 23 added as integers.
 * The round-down add runs for a block of inputs between two fesetround calls. */
#define EMU_BLOCK 4096
static void emu_exp2_block(const float *x, float *out, int n) {
    static const float c[4] = {1.0f, 0.695146143436431884765625f, 0.227564394474029541015625f,
                               0.077119089663028717041015625f};
    volatile float xr[EMU_BLOCK];
    float xc[EMU_BLOCK];
    for (int i = 0; i < n; i++) xc[i] = x[i] > -127.0f ? x[i] : -127.0f;
    volatile float big = 12582912.0f;
    fesetround(FE_DOWNWARD);
    for (int i = 0; i < n; i++) xr[i] = xc[i] + big;
    fesetround(FE_TONEAREST);
    for (int i = 0; i < n; i++) {
        const float r = xr[i], back = r - 12582912.0f, f = xc[i] - back;
        float p = c[3];
        for (int j = 2; j >= 0; j--) p = fmaf(p, f, c[j]);
        out[i] = from_bits((bits(r) << 23) + bits(p));
    }
}

/* Every 11th FP32 bit pattern of the two ranges (both ends included) through the library's function got and
 * the test's own block formulation emu; returns how many differ, the count into *n. */
static size_t sweep_patterns(const uint32_t ranges[2][2], float (*got_fn)(float), void (*emu)(const float *, float *, int),
                             const char *name, size_t *n) {
    float xs[EMU_BLOCK], want[EMU_BLOCK];
    size_t bad = 0;
    int fill = 0;
    *n = 0;
    for (int r = 0; r < 2; r++)
        for (uint64_t u = ranges[r][0];; u += 11) {
            if (u > ranges[r][1]) u = ranges[r][1];
            xs[fill++] = from_bits((uint32_t)u);
            if (fill == EMU_BLOCK || u == ranges[r][1]) {
                emu(xs, want, fill);
                for (int i = 0; i < fill; i++) {
                    const float got = got_fn(xs[i]);
                    if (bits(got) != bits(want[i])) {
                        if (bad < 3) fprintf(stderr, "%s: x %a: got %a want %a\n", name, xs[i], got, want[i]);
                        bad++;
                    }
                }
                *n += (size_t)fill;
                fill = 0;
            }
            if (u == ranges[r][1]) break;
        }
    return bad;
}

static void test_emulated_exp2(void) {
    size_t n;
    /* positive [0, 16] and negative [−0, −127] bit patterns */
    const uint32_t ranges[2][2] = {{0x00000000u, 0x41800000u}, {0x80000000u, 0xC2FE0000u}};
    const size_t bad = sweep_patterns(ranges, tsc_attn_exp2_fa4, emu_exp2_block, "exp2 emu", &n);
    CHECKF(bad == 0, "%zu of %zu differ", bad, n);
    CHECKF(n > 200000000, "only %zu inputs", n);
    /* it is an approximation of 2^x: within 1e-4 relative (the polynomial's error), exact at integers */
    CHECK(tsc_attn_exp2_fa4(0.0f) == 1.0f && tsc_attn_exp2_fa4(-3.0f) == 0.125f && tsc_attn_exp2_fa4(8.0f) == 256.0f);
    double worst = 0;
    for (float x = -20.0f; x < 8.0f; x += 0.0137f) {
        const double e = fabs(tsc_attn_exp2_fa4(x) / exp2(x) - 1);
        worst = e > worst ? e : worst;
    }
    CHECKF(worst < 1e-4 && worst > 1e-7, "relative error %g", worst);
    printf("emulated exp2: %zu inputs, %zu differ; relative error <= %.3g\n", n, bad, worst);
}

/* vec/vec512/vec512_float.h and vec/vec256/vec256_float.h exp_u20, read at pytorch v2.6.0: the input clamped between the patterns
 * 0xc2aeac50 and 0x42b17218, fx = floor of fmadd(x, log2e, 0.5) (the AVX-512 form converts to an integer
 * rounding toward −inf: here lrintf under FE_DOWNWARD), fnmadd(fx, ln2, x), Horner fmadds on 1/k! (as
 * written in the source), then the integer (fx − 1 + 127) placed in the exponent field: ldexpf(1, fx − 1),
 * and a field of 0 or below gives +0; times 2. Below the clamp the power is 0. */
static void emu_u20_block(const float *x, float *out, int n) {
    const float c5 = 0.00828929059f, c4 = 0.0418978221f, c3 = 0.166676521f, c2 = 0.499991506f, c1 = 0.999999701f;
    const float lo = from_bits(0xc2aeac50u), hi = from_bits(0x42b17218u);
    const float log2e = from_bits(0x3fb8aa3bu), ln2 = from_bits(0x3f317218u);
    long fxi[EMU_BLOCK];
    float src[EMU_BLOCK], y[EMU_BLOCK];
    for (int i = 0; i < n; i++) src[i] = fmaxf(fminf(x[i], hi), lo); /* x is never NaN here */
    for (int i = 0; i < n; i++) y[i] = fmaf(src[i], log2e, 0.5f);   /* to nearest */
    const int old = fegetround();
    fesetround(FE_DOWNWARD); /* only the conversion rounds down */
    for (int i = 0; i < n; i++) fxi[i] = lrintf(y[i]);
    fesetround(old);
    for (int i = 0; i < n; i++) {
        const float fx = (float)fxi[i], r = fmaf(-fx, ln2, src[i]);
        const float p = fmaf(r, fmaf(r, fmaf(r, fmaf(r, fmaf(r, c5, c4), c3), c2), c1), 1.0f);
        const float pw = (x[i] < lo || fxi[i] - 1 + 127 <= 0) ? 0.0f : ldexpf(1.0f, (int)fxi[i] - 1);
        out[i] = (p * pw) * 2.0f;
    }
}

static void test_exp_u20(void) {
    size_t n;
    /* [0, 90] and [−0, −104]: past both clamps */
    const uint32_t ranges[2][2] = {{0x00000000u, 0x42B40000u}, {0x80000000u, 0xC2D00000u}};
    const size_t bad = sweep_patterns(ranges, tsc_attn_exp_u20, emu_u20_block, "exp_u20", &n);
    CHECKF(bad == 0, "exp_u20: %zu of %zu differ", bad, n);
    CHECKF(n > 200000000, "only %zu inputs", n);
    /* 1 at 0 (P̄ at the row max), and within its name's 20 ULP of exp where the result is normal */
    CHECK(tsc_attn_exp_u20(0.0f) == 1.0f && tsc_attn_exp_u20(-INFINITY) == 0.0f);
    double worst = 0;
    for (float x = -80.0f; x < 80.0f; x += 0.00731f) {
        const double e = fabs(tsc_attn_exp_u20(x) - exp((double)x)) / (exp((double)x) * 0x1p-23);
        worst = e > worst ? e : worst;
    }
    CHECKF(worst > 1 && worst <= 20, "exp_u20 within %.2f ULP of exp", worst);
    printf("exp_u20: %zu inputs, %zu differ; within %.2f FP32 ULP of exp on [-80, 80]\n", n, bad, worst);
}

/* ---- the forward of one head, written from the kernels' lines ---- */

typedef struct {
    int fma;           /* 1: exp2(fma(S, σ, −max_scaled)); 0: exp2(S·σ − max_scaled) (UNFUSE_FMA) */
    int offset;        /* Max_offset (FP8): max_scaled = max·σ − offset; LSE of sum·2^-offset */
    int lazy;          /* FA4: keep the max while (old − new)·σ >= −lazy */
    int freq, res, start; /* FA4's emulated exp2 schedule (freq 0: none) */
    tsc_format_t pfmt; /* P converted for the P V product */
    int Bc;
} kref_t;

static int emulated_col(const kref_t *k, int c) {
    /* apply_exp2_convert: hardware exp2 when k % freq < freq − res, or j >= frg_cnt − 1, or j < start */
    const int j = c / 32, frg_cnt = k->Bc / 32, kk = (c % 32) / 2 * 2;
    if (!k->freq) return 0;
    return !(kk % k->freq < k->freq - k->res || j >= frg_cnt - 1 || j < k->start);
}

static float ref_exp2(const kref_t *k, float x, int col) {
    if (emulated_col(k, col)) {
        float out;
        emu_exp2_block(&x, &out, 1);
        return out;
    }
    return (float)exp2((double)x);
}

/* q [T, D], kk, v [T, D] (already in their formats); o [T, D], lse [T] out. */
static void ref_forward(const kref_t *k, const float *q, const float *kk, const float *v, int T, int D, int causal,
                        float scale, float *o, float *lse, int *pbar_above_one) {
    const float sig = (float)((double)scale * 1.4426950408889634074); /* params.scale_softmax_log2 */
    float *S = malloc(sizeof(float) * (size_t)k->Bc), *acc = malloc(sizeof(float) * (size_t)D);
    for (int t = 0; t < T; t++) {
        float m = -INFINITY, sum = 0;
        for (int d = 0; d < D; d++) acc[d] = 0;
        for (int j0 = 0; j0 < T; j0 += k->Bc) {
            int n = T - j0 < k->Bc ? T - j0 : k->Bc;
            if (causal) n = t + 1 - j0 < n ? t + 1 - j0 : n;
            if (n <= 0) break;
            float mx = -INFINITY;
            for (int j = 0; j < n; j++) {
                float s = 0;
                for (int d = 0; d < D; d++) s = fmaf(q[(size_t)t * D + d], kk[(size_t)(j0 + j) * D + d], s);
                S[j] = s;
                mx = s > mx ? s : mx;
            }
            const float m_prev = m, m_new = mx > m ? mx : m;
            if (m_prev == -INFINITY) {
                m = m_new;
            } else {
                const float a = (m_prev - m_new) * sig; /* exp2f((scores_max_prev - scores_max_cur) * scale) */
                float c;
                if (k->lazy && a >= -(float)k->lazy) {
                    c = 1.0f; /* update_row_max: row_max_new = row_max_old, acc_scale = 1 */
                } else {
                    c = (float)exp2((double)a);
                    m = m_new;
                }
                sum = sum * c;
                for (int d = 0; d < D; d++) acc[d] = acc[d] * c;
            }
            const float max_scaled = m * sig - (float)k->offset;
            for (int j = 0; j < n; j++) {
                const float arg = k->fma ? fmaf(S[j], sig, -max_scaled) : S[j] * sig - max_scaled;
                const float p = ref_exp2(k, arg, j);
                sum = sum + p; /* the row sum adds the FP32 P */
                const float pb = tsc_round_f32(p, k->pfmt, TSC_ROUND_NEAREST_EVEN, NULL);
                if (pb > 1.0f) (*pbar_above_one)++;
                for (int d = 0; d < D; d++) acc[d] = fmaf(pb, v[(size_t)(j0 + j) * D + d], acc[d]);
            }
        }
        const float inv = 1.0f / sum;
        for (int d = 0; d < D; d++)
            o[(size_t)t * D + d] = tsc_round_f32(acc[d] * inv, TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL);
        lse[t] = fmaf(m, scale, tsc_attn_logf(sum * ldexpf(1.0f, -k->offset)));
    }
    free(S);
    free(acc);
}

/* Runs policy pol and the reference on one head; returns the count of O and LSE elements that differ. */
static size_t compare(const char *pol, const kref_t *k, int T, int D, int causal, tsc_format_t in, double qscale,
                      int *above_one, float *o_out) {
    const float scale = 0.125f;
    size_t n = (size_t)T * D;
    float *q = malloc(4 * n), *kk = malloc(4 * n), *v = malloc(4 * n), *o = malloc(4 * n), *ro = malloc(4 * n);
    float *lse = malloc(4 * (size_t)T), *rlse = malloc(4 * (size_t)T);
    for (size_t i = 0; i < n; i++) {
        q[i] = tsc_round_f32((float)(qscale * nrand()), in, TSC_ROUND_NEAREST_EVEN, NULL);
        kk[i] = tsc_round_f32((float)(qscale * nrand()), in, TSC_ROUND_NEAREST_EVEN, NULL);
        v[i] = tsc_round_f32((float)nrand(), in, TSC_ROUND_NEAREST_EVEN, NULL);
    }
    /* a growing drift along the keys: later tiles raise the row max a little (FA4's lazy rescale) */
    for (int j = 0; j < T; j++) kk[(size_t)j * D] = tsc_round_f32(kk[(size_t)j * D] + 0.02f * (float)j, in,
                                                                 TSC_ROUND_NEAREST_EVEN, NULL);
    tsc_policy_t p;
    size_t diff = (size_t)-1;
    if (tsc_policy_parse(pol, &p) != TSC_OK) {
        CHECKF(0, "%s", tsc_error_last());
        goto out;
    }
    tsc_attn_dims_t d = {1, 1, 1, T, D, causal, scale};
    tsc_attn_io_t io = {.dtype = TSC_ATTN_F32, .q = q, .k = kk, .v = v, .o = o, .lse = lse};
    CHECKF(tsc_attn_run(&p, &d, &io, NULL, 0) == TSC_OK, "%s", tsc_error_last());
    *above_one = 0;
    ref_forward(k, q, kk, v, T, D, causal, scale, ro, rlse, above_one);
    diff = 0;
    size_t first = (size_t)-1;
    for (size_t i = 0; i < n; i++)
        if (bits(o[i]) != bits(ro[i])) {
            if (first == (size_t)-1) first = i;
            diff++;
        }
    for (int t = 0; t < T; t++) diff += bits(lse[t]) != bits(rlse[t]);
    if (diff)
        fprintf(stderr, "%s: %zu differ; first O[%zu] %a vs reference %a\n", pol, diff, first,
                first == (size_t)-1 ? 0.0 : o[first], first == (size_t)-1 ? 0.0 : ro[first]);
    if (o_out) { /* O, then LSE */
        memcpy(o_out, o, 4 * n);
        memcpy(o_out + n, lse, 4 * (size_t)T);
    }
out:
    free(q); free(kk); free(v); free(o); free(ro); free(lse); free(rlse);
    return diff;
}

/* The Triton kernels, O only (they store a base-2 LSE; tilescope's LSE is the natural one of the others):
 * kind 0 the tutorial (triton/python/tutorials/06-fused-attention.py, _attn_fwd_inner and _attn_fwd: qk_scale = sm_scale
 * * 1.44269504; off-band m_ij = max(m_i, max(qk) * qk_scale), qk = qk * qk_scale - m_ij as one FMA; on-band
 * (causal, the query block's own keys) qk = qk * qk_scale + mask, m_ij = max(m_i, max(qk)), qk -= m_ij;
 * p = exp2(qk); alpha = exp2(m_i - m_ij); l_i = l_i * alpha + sum(p) as one FMA (l_i starts at 1); acc *= alpha;
 * acc += p.to(fp16) v; O = acc / l_i);
 * kind 1 FlexAttention (templates/common.py.jinja forward_block_mn: qk *= SM_SCALE, then *= RCP_LN2 (1.44269504);
 * m_ij = max(m_i, max(scores)); alpha = exp2(m_i - m_ij); p = exp2(scores - m_ij); l_i = l_i * alpha + sum(p);
 * acc = acc * alpha + p.to(bf16) v; templates/flex_attention.py.jinja: O = acc / l_i);
 * kind 2 FlexAttention with PRESCALE_QK (forward_inner: q = (q * SM_SCALE * RCP_LN2).to(MATMUL_PRECISION); no
 * scaling of qk). */
static void ref_triton(int kind, const float *q, const float *kk, const float *v, int T, int D, int Br, int Bc,
                       float scale, tsc_format_t pf, float *o) {
    const float c2 = 1.44269504f, sig = scale * c2;
    float *S = malloc(sizeof(float) * (size_t)Bc), *acc = malloc(sizeof(float) * (size_t)D);
    float *qp = malloc(sizeof(float) * (size_t)D);
    for (int t = 0; t < T; t++) {
        for (int d = 0; d < D; d++) {
            const float a = q[(size_t)t * D + d] * scale, b = a * c2;
            qp[d] = kind == 2 ? tsc_round_f32(b, TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL) : q[(size_t)t * D + d];
        }
        float m_i = -INFINITY, l_i = kind == 0 ? 1.0f : 0.0f;
        for (int d = 0; d < D; d++) acc[d] = 0;
        const int qs = t / Br * Br;
        for (int j0 = 0; j0 <= t; j0 += Bc) {
            const int n = t + 1 - j0 < Bc ? t + 1 - j0 : Bc;
            float mx = -INFINITY;
            for (int j = 0; j < n; j++) {
                float s = 0;
                for (int d = 0; d < D; d++) s = fmaf(qp[d], kk[(size_t)(j0 + j) * D + d], s);
                if (kind == 1) {
                    s = s * scale;
                    s = s * c2;
                }
                if (kind == 0 && j0 >= qs) s = s * sig; /* on-band: fma(qk, qk_scale, 0) */
                S[j] = s;
                mx = s > mx ? s : mx;
            }
            if (kind == 0 && j0 < qs) mx = mx * sig; /* off-band: max(qk) * qk_scale */
            const float m_ij = mx > m_i ? mx : m_i;
            float l_ij = 0;
            for (int j = 0; j < n; j++) {
                const float arg = kind == 0 && j0 < qs ? fmaf(S[j], sig, -m_ij) : S[j] - m_ij;
                S[j] = (float)exp2((double)arg);
                l_ij = l_ij + S[j];
            }
            const float alpha = (float)exp2((double)(m_i - m_ij));
            l_i = fmaf(l_i, alpha, l_ij);
            for (int d = 0; d < D; d++) acc[d] = acc[d] * alpha;
            for (int j = 0; j < n; j++) {
                const float pb = tsc_round_f32(S[j], pf, TSC_ROUND_NEAREST_EVEN, NULL);
                for (int d = 0; d < D; d++) acc[d] = fmaf(pb, v[(size_t)(j0 + j) * D + d], acc[d]);
            }
            m_i = m_ij;
        }
        for (int d = 0; d < D; d++)
            o[(size_t)t * D + d] = tsc_round_f32(acc[d] / l_i, pf, TSC_ROUND_NEAREST_EVEN, NULL);
    }
    free(S), free(acc), free(qp);
}

/* PyTorch's mem-efficient kernel (aten/src/ATen/native/transformers/cuda/mem_eff_attention/kernel_forward.h:
 * iterative_softmax: frag = frag * (scaling * kLog2e) with kLog2e a float; mi = the row max of the scaled
 * scores; when it grew, out_rescale = exp2f(m_prime - mi), s_prime *= it, the O fragment *= it; frag =
 * exp2f(frag - mi); s_prime += the tile's total of the FP32 values; the P V GEMM takes them converted to the
 * input type and accumulates into the O fragment; epilogue/epilogue_rescale_output.h: O = (1 / s_prime) * accum; step 7:
 * lse = mi / kLog2e + log(s_prime)). q [T, D]... as ref_forward; causal keys of row t: 0..t. */
static void ref_memeff(const float *q, const float *kk, const float *v, int T, int D, int Bc, float scale, float *o,
                       float *lse) {
    const float kLog2e = 1.4426950408889634074f, sig = scale * kLog2e;
    float *S = malloc(sizeof(float) * (size_t)Bc), *acc = malloc(sizeof(float) * (size_t)D);
    for (int t = 0; t < T; t++) {
        float mi = -INFINITY, s_prime = 0;
        for (int d = 0; d < D; d++) acc[d] = 0;
        for (int j0 = 0; j0 <= t; j0 += Bc) {
            const int n = t + 1 - j0 < Bc ? t + 1 - j0 : Bc;
            float mx = mi;
            for (int j = 0; j < n; j++) {
                float s = 0;
                for (int d = 0; d < D; d++) s = fmaf(q[(size_t)t * D + d], kk[(size_t)(j0 + j) * D + d], s);
                S[j] = s * sig;
                mx = S[j] > mx ? S[j] : mx;
            }
            if (mi < mx) { /* changed: m_prime < mi */
                const float r = (float)exp2((double)(mi - mx));
                s_prime = s_prime * r;
                for (int d = 0; d < D; d++) acc[d] = acc[d] * r;
            }
            mi = mx;
            float total = 0;
            for (int j = 0; j < n; j++) {
                S[j] = (float)exp2((double)(S[j] - mi));
                total = total + S[j];
            }
            s_prime = s_prime + total;
            for (int j = 0; j < n; j++) {
                const float pb = tsc_round_f32(S[j], TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL);
                for (int d = 0; d < D; d++) acc[d] = fmaf(pb, v[(size_t)(j0 + j) * D + d], acc[d]);
            }
        }
        const float alpha = 1.0f / s_prime;
        for (int d = 0; d < D; d++)
            o[(size_t)t * D + d] = tsc_round_f32(alpha * acc[d], TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL);
        lse[t] = mi / kLog2e + tsc_attn_logf(s_prime);
    }
    free(S), free(acc);
}

/* torch's CPU flash forward (FlashAttentionKernel.cpp at v2.6.0, cpu_flash_attention, no mask, causal), one
 * head: query blocks of qs rows, key tiles of Bc; per tile qk = the q·k products (a sequential fmaf sum stands
 * for the gemm), the causal columns filled with −inf, qk *= scale and the tile max (_mul_reduce_max_fusion_kernel),
 * tmp_max = max(old, tile); _exp_reduce_sum_fusion_kernel: exp_u20(qk − max) on W-lane vectors summed per lane,
 * vec_reduce_all's shuffle tree (lane l + lane l^d, d = W/2 .. 1), the tail with expf summed after it;
 * exp_tmp = expf(old − max), sum = fma(exp_tmp, sum, tmp_sum) (the source line contracted), dst *= exp_tmp for
 * tiles after the first, dst += the tile's P (BF16) · V (an FP32 sum from 0, then added); at the end
 * out = BF16(dst · (1/sum)), lse = max + log(sum). The reference's expf and logf stand for libm's. */
static void ref_cpu_flash(const float *q, const float *kk, const float *v, int T, int D, int qs, int Bc, int W,
                          float scale, float *o, float *lse) {
    float *qk = malloc(sizeof(float) * (size_t)Bc), *dst = malloc(sizeof(float) * (size_t)D);
    float *acc = malloc(sizeof(float) * (size_t)D);
    for (int t = 0; t < T; t++) {
        const int m = t / qs * qs, num_keys = m + qs < T ? m + qs : T;
        float qk_max = -INFINITY, qk_sum = 0;
        for (int n = 0; n < num_keys; n += Bc) {
            const int kv = Bc < T - n ? Bc : T - n;
            float tile_max = -INFINITY;
            for (int j = 0; j < kv; j++) {
                float s = 0;
                for (int d = 0; d < D; d++) s = fmaf(q[(size_t)t * D + d], kk[(size_t)(n + j) * D + d], s);
                qk[j] = (num_keys - n <= Bc && j > t - n) ? -INFINITY : s;
                qk[j] = qk[j] * scale;
                tile_max = qk[j] > tile_max ? qk[j] : tile_max;
            }
            const float tmp_max = qk_max > tile_max ? qk_max : tile_max;
            float lane[16] = {0}, nxt[16];
            const int nv = W * (kv / W);
            for (int j = 0; j < nv; j++) {
                qk[j] = tsc_attn_exp_u20(qk[j] - tmp_max);
                lane[j % W] += qk[j];
            }
            for (int d = W / 2; d >= 1; d /= 2) {
                for (int l = 0; l < W; l++) nxt[l] = lane[l] + lane[l ^ d];
                memcpy(lane, nxt, sizeof lane);
            }
            float tmp_sum = lane[0];
            for (int j = nv; j < kv; j++) {
                qk[j] = tsc_attn_expf(qk[j] - tmp_max);
                tmp_sum += qk[j];
            }
            const float exp_tmp = tsc_attn_expf(qk_max - tmp_max);
            qk_sum = fmaf(exp_tmp, qk_sum, tmp_sum);
            qk_max = tmp_max;
            for (int d = 0; d < D; d++) {
                if (n == 0) dst[d] = 0;
                else dst[d] = dst[d] * exp_tmp;
                acc[d] = 0;
            }
            for (int j = 0; j < kv; j++) {
                const float pb = tsc_round_f32(qk[j], TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL);
                for (int d = 0; d < D; d++) acc[d] = fmaf(pb, v[(size_t)(n + j) * D + d], acc[d]);
            }
            for (int d = 0; d < D; d++) dst[d] = dst[d] + acc[d];
        }
        const float rcp = 1 / qk_sum;
        for (int d = 0; d < D; d++)
            o[(size_t)t * D + d] = tsc_round_f32(dst[d] * rcp, TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL);
        lse[t] = qk_max + tsc_attn_logf(qk_sum);
    }
    free(qk), free(dst), free(acc);
}

/* Policy pol on a causal head of BF16 inputs against a reference of O and LSE: ref_cpu_flash with W lanes
 * (W > 0; scale 1/sqrt(D)), else ref_memeff (tiles of 16, scale 1/8, the max growing along the keys).
 * Returns the O and LSE elements that differ. */
static size_t compare_o_lse(const char *pol, int T, int D, int W) {
    const double scale = W ? 1.0 / sqrt((double)D) : 0.125;
    const size_t n = (size_t)T * D;
    float *q = malloc(4 * n), *kk = malloc(4 * n), *v = malloc(4 * n), *o = malloc(4 * n), *ro = malloc(4 * n);
    float *lse = malloc(4 * (size_t)T), *rlse = malloc(4 * (size_t)T);
    for (size_t i = 0; i < n; i++) {
        q[i] = tsc_round_f32((float)(2 * nrand()), TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL);
        kk[i] = tsc_round_f32((float)(2 * nrand()), TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL);
        v[i] = tsc_round_f32((float)nrand(), TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL);
    }
    for (int j = 0; !W && j < T; j++) kk[(size_t)j * D] = tsc_round_f32(kk[(size_t)j * D] + 0.05f * (float)j, TSC_FMT_BF16,
                                                                       TSC_ROUND_NEAREST_EVEN, NULL); /* the max grows */
    tsc_policy_t p;
    size_t diff = (size_t)-1;
    if (tsc_policy_parse(pol, &p) == TSC_OK) {
        tsc_attn_dims_t d = {1, 1, 1, T, D, 1, scale};
        tsc_attn_io_t io = {.dtype = TSC_ATTN_F32, .q = q, .k = kk, .v = v, .o = o, .lse = lse};
        CHECKF(tsc_attn_run(&p, &d, &io, NULL, 0) == TSC_OK, "%s", tsc_error_last());
        if (W) ref_cpu_flash(q, kk, v, T, D, T >= 768 ? 256 : T >= 192 ? 64 : 32, 512, W, (float)scale, ro, rlse);
        else ref_memeff(q, kk, v, T, D, 16, (float)scale, ro, rlse);
        diff = 0;
        for (size_t i = 0; i < n; i++) diff += bits(o[i]) != bits(ro[i]);
        for (int t = 0; t < T; t++) diff += bits(lse[t]) != bits(rlse[t]);
    } else {
        CHECKF(0, "%s", tsc_error_last());
    }
    free(q), free(kk), free(v), free(o), free(ro), free(lse), free(rlse);
    return diff;
}

/* Policy pol against ref_triton(kind) on a causal head; the count of O elements that differ. */
static size_t compare_triton(const char *pol, int kind, int T, int D, int Br, int Bc, tsc_format_t in) {
    const float scale = 0.125f;
    const size_t n = (size_t)T * D;
    float *q = malloc(4 * n), *kk = malloc(4 * n), *v = malloc(4 * n), *o = malloc(4 * n), *ro = malloc(4 * n);
    for (size_t i = 0; i < n; i++) {
        q[i] = tsc_round_f32((float)(2 * nrand()), in, TSC_ROUND_NEAREST_EVEN, NULL);
        kk[i] = tsc_round_f32((float)(2 * nrand()), in, TSC_ROUND_NEAREST_EVEN, NULL);
        v[i] = tsc_round_f32((float)nrand(), in, TSC_ROUND_NEAREST_EVEN, NULL);
    }
    tsc_policy_t p;
    size_t diff = (size_t)-1;
    if (tsc_policy_parse(pol, &p) == TSC_OK) {
        tsc_attn_dims_t d = {1, 1, 1, T, D, 1, scale};
        tsc_attn_io_t io = {.dtype = TSC_ATTN_F32, .q = q, .k = kk, .v = v, .o = o};
        CHECKF(tsc_attn_run(&p, &d, &io, NULL, 0) == TSC_OK, "%s", tsc_error_last());
        ref_triton(kind, q, kk, v, T, D, Br, Bc, scale, p.fmt[TSC_STAGE_PBAR_PV], ro);
        diff = 0;
        for (size_t i = 0; i < n; i++) diff += bits(o[i]) != bits(ro[i]);
    } else {
        CHECKF(0, "%s", tsc_error_last());
    }
    free(q), free(kk), free(v), free(o), free(ro);
    return diff;
}

int main(void) {
    test_emulated_exp2();
    test_exp_u20();
    int above = 0;
    const int T = 45, D = 16;
    float *a = malloc(4 * 300 * 17), *b = malloc(4 * 300 * 17); /* O and LSE of T = 300, D = 16 */

    kref_t fa2 = {1, 0, 0, 0, 0, 0, TSC_FMT_BF16, 16};
    rng_state = 1;
    CHECK_EQ_INT(compare("bf16-flash-attn2+tile:q=16,k=16", &fa2, T, D, 1, TSC_FMT_BF16, 2.0, &above, a), 0);
    kref_t sdpa = fa2;
    sdpa.fma = 0;
    rng_state = 1;
    CHECK_EQ_INT(compare("bf16-sdpa-flash+tile:q=16,k=16", &sdpa, T, D, 1, TSC_FMT_BF16, 2.0, &above, b), 0);
    size_t differ = 0; /* the FP32 row sum sees the FFMA's residual at the max: LSE differs */
    for (int i = T * D; i < T * D + T; i++) differ += bits(a[i]) != bits(b[i]);
    CHECKF(differ > 0, "FFMA and the rounded product gave the same LSE on every row"); /* the modifier acts */
    printf("flash-attn2 vs sdpa-flash: %zu of %d LSE values differ\n", differ, T);

    kref_t fp8 = {1, 8, 0, 0, 0, 0, TSC_FMT_FP8_E4M3, 16};
    rng_state = 2;
    CHECK_EQ_INT(compare("fp8-fa3-scaled+tile:q=16,k=16", &fp8, T, D, 0, TSC_FMT_FP8_E4M3, 1.5, &above, NULL), 0);
    CHECKF(above > 0, "no P-bar above 1 under the 2^8 offset");

    kref_t fa4 = {1, 0, 8, 16, 4, 1, TSC_FMT_BF16, 128};
    rng_state = 3;
    CHECK_EQ_INT(compare("bf16-fa4", &fa4, 300, D, 1, TSC_FMT_BF16, 1.0, &above, a), 0);
    CHECKF(above > 0, "the lazy rescale never left P-bar above 1"); /* the threshold acts */
    rng_state = 3;
    kref_t fa4_hw = fa4;
    fa4_hw.freq = 0;
    CHECK_EQ_INT(compare("bf16-fa4+exp2-poly:freq=0", &fa4_hw, 300, D, 1, TSC_FMT_BF16, 1.0, &above, b), 0);
    differ = 0;
    for (int i = 0; i < 300 * D; i++) differ += bits(a[i]) != bits(b[i]);
    CHECKF(differ > 0, "the emulated exp2 columns changed nothing");
    printf("bf16-fa4: %d P-bar above 1; emulated vs hardware exp2: %zu of %d O elements differ\n", above, differ,
           300 * D);
    free(a);
    free(b);

    /* the Triton kernels: a query tile of 32 keys against key tiles of 16 (so off-band and on-band tiles), O */
    rng_state = 4;
    CHECK_EQ_INT(compare_triton("fp16-triton+tile:q=32,k=16", 0, 90, 16, 32, 16, TSC_FMT_FP16), 0);
    rng_state = 5;
    CHECK_EQ_INT(compare_triton("bf16-flex+tile:q=32,k=16", 1, 90, 16, 32, 16, TSC_FMT_BF16), 0);
    rng_state = 6;
    CHECK_EQ_INT(compare_triton("bf16-flex-prescale+tile:q=32,k=16", 2, 90, 16, 32, 16, TSC_FMT_BF16), 0);
    rng_state = 7;
    CHECK_EQ_INT(compare_o_lse("bf16-sdpa-mem-efficient+tile:q=16,k=16", 90, 16, 0), 0);
    rng_state = 7; /* the vendored FA2 (also a rounded product) is another kernel: its LSE and rescale differ */
    differ = compare_o_lse("bf16-sdpa-flash+tile:q=16,k=16", 90, 16, 0);
    CHECKF(differ > 0 && differ != (size_t)-1, "sdpa-flash reproduced the mem-efficient kernel (%zu differ)", differ);
    printf("sdpa-flash vs the mem-efficient reference: %zu of %d O and LSE values differ\n", differ, 90 * 17);
    /* torch's CPU flash: T = 603 (a 512-key tile, then 91 = 5·16 + 11 = 11·8 + 3: both widths have a tail) */
    for (int W = 16; W >= 8; W /= 2)
        for (int D2 = 64; D2 >= 40; D2 -= 24) {
            char pol[96];
            snprintf(pol, sizeof pol, "bf16-sdpa-cpu-flash%s", W == 16 ? "" : "+vexp:u20x8");
            rng_state = 8 + (uint64_t)D2;
            CHECKF(compare_o_lse(pol, 603, D2, W) == 0, "%s, D %d differs from the CPU flash reference", pol, D2);
        }
    rng_state = 72; /* the modifier acts: plain exp and key-order sums differ, and so do the two widths */
    differ = compare_o_lse("bf16-sdpa-cpu-flash+vexp:off", 603, 64, 16);
    CHECKF(differ > 0 && differ != (size_t)-1, "+vexp:off reproduced the exp_u20 kernel");
    printf("sdpa-cpu-flash without exp_u20: %zu of %d O and LSE values differ from the reference\n", differ, 603 * 65);
    rng_state = 72;
    differ = compare_o_lse("bf16-sdpa-cpu-flash+vexp:u20x8", 603, 64, 16);
    CHECKF(differ > 0 && differ != (size_t)-1, "8 lanes reproduced the 16-lane kernel");
    {
        tsc_policy_t p;
        float x[64] = {0}, y[64], g[64];
        tsc_attn_dims_t d = {1, 1, 1, 4, 16, 1, 0.25};
        tsc_attn_io_t io = {.dtype = TSC_ATTN_F32, .q = x, .k = x, .v = x, .dout = x, .o = y, .dq = g};
        CHECK(tsc_policy_parse("bf16-flex-prescale", &p) == TSC_OK);
        CHECK(tsc_attn_run(&p, &d, &io, NULL, 0) == TSC_ERR_UNSUPPORTED); /* its backward is not modelled */
        CHECK(strstr(tsc_error_last(), "PRESCALE_QK") != NULL);
    }

    /* the modifiers' grammar: the canonical form round-trips, and misuse is refused */
    tsc_policy_t p, p2;
    char buf[TSC_POLICY_STR_MAX];
    CHECK(tsc_policy_parse("bf16-fa2+exp:exp2-fma+p-offset:8+lazy-rescale:thr=4+exp2-poly:freq=10,res=4,start=1", &p) ==
          TSC_OK);
    CHECK(tsc_policy_format(&p, buf, sizeof buf) == TSC_OK);
    CHECK_STREQ(buf, "bf16-fa2+exp:exp2-fma+p-offset:8+lazy-rescale:thr=4+exp2-poly:freq=10,res=4,start=1");
    CHECK(tsc_policy_parse(buf, &p2) == TSC_OK && tsc_policy_equal(&p, &p2));
    CHECK(tsc_policy_parse("bf16-fa2+p-offset:8", &p) == TSC_ERR_ARG);          /* needs an exp2 mode */
    CHECK(strstr(tsc_error_last(), "+exp:exp2-fma") != NULL);
    CHECK(tsc_policy_parse("bf16-fa4+stable", &p) == TSC_ERR_ARG);              /* lazy and stable */
    CHECK(tsc_policy_parse("bf16-eager-cpu+exp:exp2-fma", &p) == TSC_ERR_ARG);  /* materialized */
    CHECK(tsc_policy_parse("bf16-fa4+exp2-poly:freq=3,res=3", &p) == TSC_ERR_ARG);
    CHECK(tsc_policy_parse("bf16-flash-attn2", &p) == TSC_OK && tsc_policy_format(&p, buf, sizeof buf) == TSC_OK);
    CHECK_STREQ(buf, "bf16-flash-attn2");
    /* +sum:aten* orders the PyTorch code's torch.sum calls: unfused online softmax only */
    CHECK(tsc_policy_parse("bf16-fa2+sum:aten8", &p) == TSC_ERR_ARG);
    CHECK(strstr(tsc_error_last(), "+unfused") != NULL);
    CHECK(tsc_policy_parse("bf16-eager-cpu+sum:aten16", &p) == TSC_ERR_ARG);
    CHECK(tsc_policy_parse("bf16-torch+sum:aten16", &p) == TSC_OK && tsc_policy_format(&p, buf, sizeof buf) == TSC_OK);
    CHECK_STREQ(buf, "bf16-torch+sum:aten16");
    CHECK(tsc_policy_parse("bf16-fa2+vexp:u20x16", &p) == TSC_ERR_ARG); /* fused */
    CHECK(strstr(tsc_error_last(), "CPU flash") != NULL);
    CHECK(tsc_policy_parse("bf16-sdpa-cpu-flash+sum:aten16", &p) == TSC_ERR_ARG);
    CHECK(tsc_policy_parse("bf16-torch+vexp:u20x8", &p) == TSC_OK && tsc_policy_format(&p, buf, sizeof buf) == TSC_OK);
    CHECK_STREQ(buf, "bf16-torch+vexp:u20x8");
    /* the GPU kernels do not model these: refused by name, never run silently as something else */
    const tsc_attn_backend_t *rw = tsc_attn_backend_get("cpu-rowwise");
    if (rw) {
        float x[64] = {0}, y[64];
        tsc_attn_dims_t d = {1, 1, 1, 4, 16, 1, 0.25};
        tsc_attn_io_t io = {.dtype = TSC_ATTN_F32, .q = x, .k = x, .v = x, .o = y};
        CHECK(tsc_policy_parse("bf16-flash-attn2", &p) == TSC_OK);
        CHECK(tsc_attn_run_with(rw, &p, &d, &io, NULL) == TSC_ERR_UNSUPPORTED);
        CHECK(strstr(tsc_error_last(), "exp2") != NULL);
        CHECK(tsc_policy_parse("bf16-torch+sum:aten8", &p) == TSC_OK);
        CHECK(tsc_attn_run_with(rw, &p, &d, &io, NULL) == TSC_ERR_UNSUPPORTED);
        CHECK(strstr(tsc_error_last(), "+sum:aten8") != NULL);
        CHECK(tsc_policy_parse("bf16-sdpa-cpu-flash", &p) == TSC_OK);
        CHECK(tsc_attn_run_with(rw, &p, &d, &io, NULL) == TSC_ERR_UNSUPPORTED);
        CHECK(strstr(tsc_error_last(), "CPU flash") != NULL);
    }
    return tsc_test_done();
}
