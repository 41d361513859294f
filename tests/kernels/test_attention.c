/* test_attention: the attention reference against independent formulations.
 *  - fp64 policy = naive softmax attention in long double (relative 1e-12), forward and
 *    backward, causal and not, odd T (37) with tile 16, tile size 1, GQA (H=4, Hkv=2);
 *  - fp64 backward = central finite differences of L = Σ O∘dO;
 *  - fp32 vs fp64 within a bound derived from the data (below);
 *  - the SIMD and portable paths give identical bits for every preset;
 *  - the checker catches a planted one-ULP change. */
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu_internal.h"
#include "tsc_attention.h"
#include "tsc_test.h"

static uint64_t rng_state = 0x1234567ULL;
static double urand(void) { return tsc_test_urand(&rng_state); }
static double nrand(void) { return tsc_test_nrand(&rng_state); }

typedef struct {
    double *q, *k, *v, *dO;                 /* inputs */
    double *o, *lse, *delta, *dq, *dk, *dv; /* outputs */
} bufs_t;

static void bufs_alloc(bufs_t *b, const tsc_attn_dims_t *d) {
    size_t nq = (size_t)d->B * d->H * d->T * d->D, nk = (size_t)d->B * d->Hkv * d->T * d->D;
    size_t nr = (size_t)d->B * d->H * d->T;
    b->q = calloc(nq, 8); b->k = calloc(nk, 8); b->v = calloc(nk, 8); b->dO = calloc(nq, 8);
    b->o = calloc(nq, 8); b->lse = calloc(nr, 8); b->delta = calloc(nr, 8);
    b->dq = calloc(nq, 8); b->dk = calloc(nk, 8); b->dv = calloc(nk, 8);
}
static void bufs_free(bufs_t *b) {
    free(b->q); free(b->k); free(b->v); free(b->dO); free(b->o); free(b->lse); free(b->delta);
    free(b->dq); free(b->dk); free(b->dv);
}
static void bufs_fill(bufs_t *b, const tsc_attn_dims_t *d, double qscale) {
    size_t nq = (size_t)d->B * d->H * d->T * d->D, nk = (size_t)d->B * d->Hkv * d->T * d->D;
    for (size_t i = 0; i < nq; i++) { b->q[i] = qscale * nrand(); b->dO[i] = nrand(); }
    for (size_t i = 0; i < nk; i++) { b->k[i] = nrand(); b->v[i] = nrand(); }
}
static tsc_attn_io_t io_of(bufs_t *b) {
    tsc_attn_io_t io = {TSC_ATTN_F64, b->q, b->k, b->v, b->dO, b->o, b->lse, b->delta, b->dq, b->dk, b->dv};
    return io;
}

/* Naive attention in long double: the textbook formulas, whole rows, no tiling. */
static void naive(const tsc_attn_dims_t *d, const bufs_t *in, bufs_t *out) {
    const int T = d->T, D = d->D, G = d->H / d->Hkv;
    size_t nk = (size_t)d->B * d->Hkv * T * D;
    for (size_t i = 0; i < nk; i++) out->dk[i] = out->dv[i] = 0;
    long double *P = malloc(sizeof(long double) * T * T), *dP = malloc(sizeof(long double) * T * T);
    long double *dkacc = malloc(sizeof(long double) * nk), *dvacc = malloc(sizeof(long double) * nk);
    for (size_t i = 0; i < nk; i++) dkacc[i] = dvacc[i] = 0;
    for (int b = 0; b < d->B; b++)
        for (int h = 0; h < d->H; h++) {
            const int hk = h / G;
            const double *q = in->q + ((size_t)b * d->H + h) * T * D, *dO = in->dO + ((size_t)b * d->H + h) * T * D;
            const double *k = in->k + ((size_t)b * d->Hkv + hk) * T * D, *v = in->v + ((size_t)b * d->Hkv + hk) * T * D;
            double *o = out->o + ((size_t)b * d->H + h) * T * D, *dq = out->dq + ((size_t)b * d->H + h) * T * D;
            long double *dk = dkacc + ((size_t)b * d->Hkv + hk) * T * D, *dv = dvacc + ((size_t)b * d->Hkv + hk) * T * D;
            for (int t = 0; t < T; t++) {
                int nj = d->causal ? t + 1 : T;
                long double mx = -INFINITY, sum = 0;
                for (int j = 0; j < nj; j++) {
                    long double s = 0;
                    for (int e = 0; e < D; e++) s += (long double)q[t * D + e] * k[j * D + e];
                    P[t * T + j] = s * d->scale;
                    if (P[t * T + j] > mx) mx = P[t * T + j];
                }
                for (int j = 0; j < nj; j++) { P[t * T + j] = expl(P[t * T + j] - mx); sum += P[t * T + j]; }
                for (int j = 0; j < T; j++) P[t * T + j] = j < nj ? P[t * T + j] / sum : 0;
                out->lse[((size_t)b * d->H + h) * T + t] = (double)(mx + logl(sum));
                long double dl = 0;
                for (int e = 0; e < D; e++) {
                    long double acc = 0;
                    for (int j = 0; j < nj; j++) acc += P[t * T + j] * v[j * D + e];
                    o[t * D + e] = (double)acc;
                    dl += acc * dO[t * D + e];
                }
                out->delta[((size_t)b * d->H + h) * T + t] = (double)dl;
                for (int j = 0; j < T; j++) {
                    long double a = 0;
                    for (int e = 0; e < D; e++) a += (long double)dO[t * D + e] * v[j * D + e];
                    dP[t * T + j] = P[t * T + j] * (a - dl) * d->scale; /* dS */
                }
            }
            for (int t = 0; t < T; t++)
                for (int e = 0; e < D; e++) {
                    long double a = 0;
                    for (int j = 0; j < T; j++) a += dP[t * T + j] * k[j * D + e];
                    dq[t * D + e] = (double)a;
                }
            for (int j = 0; j < T; j++)
                for (int e = 0; e < D; e++) {
                    long double a = 0, c = 0;
                    for (int t = 0; t < T; t++) { a += dP[t * T + j] * q[t * D + e]; c += P[t * T + j] * dO[t * D + e]; }
                    dk[j * D + e] += a;
                    dv[j * D + e] += c;
                }
        }
    for (size_t i = 0; i < nk; i++) { out->dk[i] = (double)dkacc[i]; out->dv[i] = (double)dvacc[i]; }
    free(P); free(dP); free(dkacc); free(dvacc);
}

static double max_abs(const double *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* Compares with atol = rel·max|ref| (a relative error on the tensor's scale) and rtol = rel. */
static void expect_close(const char *what, const double *ref, const double *out, size_t n, double rel) {
    tsc_compare_t c;
    char buf[512];
    double atol = rel * max_abs(ref, n);
    tsc_compare_f64(ref, out, n, atol, rel, 0, &c);
    CHECKF(c.n_mismatch == 0, "%s: %s", what, tsc_compare_str(&c, atol, rel, buf, sizeof buf));
}

/* fp64 computes in double with FP64 stages; the naive long double reference differs by
 * accumulated double rounding, a few ulp times the T- and D-term sums: far below 1e-12. */
static const double FP64_REL = 1e-12;

static void check_fp64(int B, int H, int Hkv, int T, int D, int causal, int bq, int bk) {
    tsc_attn_dims_t d = {B, H, Hkv, T, D, causal, 1.0 / sqrt((double)D)};
    bufs_t in, ref, out;
    bufs_alloc(&in, &d); bufs_alloc(&ref, &d); bufs_alloc(&out, &d);
    bufs_fill(&in, &d, 1.5);
    naive(&d, &in, &ref);
    tsc_policy_t p;
    CHECK(tsc_policy_parse("fp64", &p) == TSC_OK);
    p.block_q = bq;
    p.block_k = bk;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) p.fused = 0;
        tsc_attn_io_t io = io_of(&out);
        io.q = in.q; io.k = in.k; io.v = in.v; io.dout = in.dO;
        CHECK(tsc_attn_run(&p, &d, &io, NULL, 0) == TSC_OK);
        size_t nq = (size_t)B * H * T * D, nk = (size_t)B * Hkv * T * D, nr = (size_t)B * H * T;
        char what[160];
        snprintf(what, sizeof what, "fp64%s B%d H%d Hkv%d T%d D%d causal%d tile %dx%d",
                 pass ? "+unfused" : "", B, H, Hkv, T, D, causal, bq, bk);
        char w2[200];
        snprintf(w2, sizeof w2, "%s O", what); expect_close(w2, ref.o, out.o, nq, FP64_REL);
        snprintf(w2, sizeof w2, "%s LSE", what); expect_close(w2, ref.lse, out.lse, nr, FP64_REL);
        snprintf(w2, sizeof w2, "%s delta", what); expect_close(w2, ref.delta, out.delta, nr, FP64_REL);
        snprintf(w2, sizeof w2, "%s dQ", what); expect_close(w2, ref.dq, out.dq, nq, FP64_REL);
        snprintf(w2, sizeof w2, "%s dK", what); expect_close(w2, ref.dk, out.dk, nk, FP64_REL);
        snprintf(w2, sizeof w2, "%s dV", what); expect_close(w2, ref.dv, out.dv, nk, FP64_REL);
    }
    bufs_free(&in); bufs_free(&ref); bufs_free(&out);
}

/* L = Σ O ∘ dO, so ∂L/∂x is what the backward returns for x in {q, k, v}. Central
 * differences with step h: truncation error O(h²·|L'''|) ≈ 1e-10 and cancellation
 * ≈ 1e-16·|L|/h ≈ 1e-11 for h = 1e-5 and O(1) data: a relative 1e-6 leaves a wide margin
 * yet catches any wrong term (a missing α, a transposed index, a sign). */
static const double FD_STEP = 1e-5, FD_REL = 1e-6;

static double loss(const tsc_policy_t *p, const tsc_attn_dims_t *d, bufs_t *in, bufs_t *tmp) {
    tsc_attn_io_t io = {TSC_ATTN_F64, in->q, in->k, in->v, NULL, tmp->o, NULL, NULL, NULL, NULL, NULL};
    CHECK(tsc_attn_run(p, d, &io, NULL, 0) == TSC_OK);
    double L = 0;
    size_t nq = (size_t)d->B * d->H * d->T * d->D;
    for (size_t i = 0; i < nq; i++) L += tmp->o[i] * in->dO[i];
    return L;
}

static void check_fd(int causal) {
    tsc_attn_dims_t d = {1, 2, 1, 9, 4, causal, 0.5};
    bufs_t in, out, tmp;
    bufs_alloc(&in, &d); bufs_alloc(&out, &d); bufs_alloc(&tmp, &d);
    bufs_fill(&in, &d, 1.0);
    tsc_policy_t p;
    CHECK(tsc_policy_parse("fp64+tile:q=4,k=4", &p) == TSC_OK);
    tsc_attn_io_t io = io_of(&out);
    io.q = in.q; io.k = in.k; io.v = in.v; io.dout = in.dO;
    CHECK(tsc_attn_run(&p, &d, &io, NULL, 0) == TSC_OK);
    double *xs[3] = {in.q, in.k, in.v}, *gs[3] = {out.dq, out.dk, out.dv};
    size_t ns[3] = {(size_t)d.H * d.T * d.D, (size_t)d.Hkv * d.T * d.D, (size_t)d.Hkv * d.T * d.D};
    const char *names[3] = {"dq", "dk", "dv"};
    for (int w = 0; w < 3; w++) {
        double gmax = max_abs(gs[w], ns[w]);
        int bad = 0;
        for (size_t i = 0; i < ns[w]; i++) {
            double x0 = xs[w][i];
            xs[w][i] = x0 + FD_STEP;
            double lp = loss(&p, &d, &in, &tmp);
            xs[w][i] = x0 - FD_STEP;
            double lm = loss(&p, &d, &in, &tmp);
            xs[w][i] = x0;
            double fd = (lp - lm) / (2 * FD_STEP);
            if (fabs(fd - gs[w][i]) > FD_REL * (gmax + fabs(fd))) {
                if (bad++ < 3)
                    fprintf(stderr, "  causal %d %s[%zu]: backward %.12g, finite difference %.12g\n", causal,
                            names[w], i, gs[w][i], fd);
            }
        }
        CHECKF(bad == 0, "finite differences: %d elements of %s disagree (causal %d)", bad, names[w], causal);
    }
    bufs_free(&in); bufs_free(&out); bufs_free(&tmp);
}

/* fp32 vs fp64: a first-order bound derived per head from the data, u = 2^-24.
 *  ΔS ≤ (D + 4)·u·α·max_t,j Σ_d |q_d k_d|        (input rounding 2u, D-term fma dot, ×α, stage)
 *  P̄ relative error e1 ≤ 2ΔS + 2u·Smax + 4u       (S and m both off by ΔS; exp argument rounded,
 *                                                 |S − m| ≤ 2·Smax; exp within 2 ulp = 4u)
 *  |ΔO| ≤ max|v|·(2·e1 + (2T + 4)·u)              (normalised weights off by ≤ 2e1; sequential
 *                                                 T-term sums of P̄v and of P̄; v rounding; division)
 *  |ΔLSE| ≤ ΔS + e1 + (T + 2)·u·(1 + |LSE|)
 * The factor FP32_SAFETY covers the neglected second-order terms (products of the e's, < 1%). */
static const double FP32_SAFETY = 1.5;

static void check_fp32_bound(void) {
    tsc_attn_dims_t d = {1, 3, 3, 70, 16, 1, 0.25};
    bufs_t in, r64, r32;
    bufs_alloc(&in, &d); bufs_alloc(&r64, &d); bufs_alloc(&r32, &d);
    bufs_fill(&in, &d, 2.0);
    tsc_policy_t p64, p32;
    CHECK(tsc_policy_parse("fp64+tile:q=32,k=32", &p64) == TSC_OK);
    CHECK(tsc_policy_parse("fp32+tile:q=32,k=32", &p32) == TSC_OK);
    tsc_attn_io_t io = io_of(&r64);
    io.q = in.q; io.k = in.k; io.v = in.v; io.dout = NULL;
    CHECK(tsc_attn_run(&p64, &d, &io, NULL, 0) == TSC_OK);
    io = io_of(&r32);
    io.q = in.q; io.k = in.k; io.v = in.v; io.dout = NULL;
    CHECK(tsc_attn_run(&p32, &d, &io, NULL, 0) == TSC_OK);
    const double u = ldexp(1, -24);
    const int T = d.T, D = d.D;
    for (int h = 0; h < d.H; h++) {
        const double *q = in.q + (size_t)h * T * D, *k = in.k + (size_t)h * T * D, *v = in.v + (size_t)h * T * D;
        double qk = 0, smax = 0, vmax = max_abs(v, (size_t)T * D);
        for (int t = 0; t < T; t++)
            for (int j = 0; j <= t; j++) {
                double a = 0, s = 0;
                for (int e = 0; e < D; e++) { a += fabs(q[t * D + e] * k[j * D + e]); s += q[t * D + e] * k[j * D + e]; }
                qk = a > qk ? a : qk;
                smax = fabs(s * d.scale) > smax ? fabs(s * d.scale) : smax;
            }
        double dS = (D + 4) * u * d.scale * qk;
        double e1 = 2 * dS + 2 * u * smax + 4 * u;
        double bound_o = FP32_SAFETY * vmax * (2 * e1 + (2.0 * T + 4) * u);
        double worst_o = 0, worst_l = 0, bound_l_min = INFINITY;
        int bad_l = 0;
        for (int t = 0; t < T; t++) {
            for (int e = 0; e < D; e++) {
                double diff = fabs(r32.o[((size_t)h * T + t) * D + e] - r64.o[((size_t)h * T + t) * D + e]);
                worst_o = diff > worst_o ? diff : worst_o;
            }
            double L = r64.lse[(size_t)h * T + t];
            double bl = FP32_SAFETY * (dS + e1 + (T + 2.0) * u * (1 + fabs(L)));
            double dl = fabs(r32.lse[(size_t)h * T + t] - L);
            worst_l = dl > worst_l ? dl : worst_l;
            bound_l_min = bl < bound_l_min ? bl : bound_l_min;
            bad_l += dl > bl;
        }
        CHECKF(worst_o <= bound_o, "head %d: fp32 O off by %.3g > derived bound %.3g", h, worst_o, bound_o);
        CHECKF(bad_l == 0, "head %d: %d LSE values beyond the bound (worst %.3g)", h, bad_l, worst_l);
        /* and fp32 really is a different computation (the bound is not vacuous) */
        CHECKF(worst_o > 0 && worst_o < 1e-4, "head %d: fp32 O error %.3g not in (0, 1e-4)", h, worst_o);
        printf("fp32 vs fp64 head %d: max |dO| %.3g (bound %.3g), max |dLSE| %.3g (bound >= %.3g)\n", h,
               worst_o, bound_o, worst_l, bound_l_min);
    }
    bufs_free(&in); bufs_free(&r64); bufs_free(&r32);
}

/* SIMD vs portable paths: bit-identical outputs for each preset (and unfused, sr, hp-delta). */
static void check_paths(void) {
    if (!tsc_attn_simd_available()) {
        printf("SIMD path not available on this CPU: path comparison skipped\n");
        return;
    }
    const char *pols[] = {"fp32", "bf16-fa2", "bf16-torch+tile:q=16,k=16", "fp16-fa2", "fp8-fa3",
                          "bf16-fa2+stable+hp-delta", "bf16-torch+sr:seed=5+dpp-delta+tile:q=8,k=24",
                          "bf16-fa2+unfused+tf32:scores", "bf16-eager-cpu", "bf16-eager-cuda", "bf16-sdpa-math",
                          "bf16-flash-attn2+tile:q=16,k=16", "bf16-sdpa-flash+stable", "fp8-fa3-scaled",
                          "bf16-fa4+tile:q=16,k=64+exp2-poly:freq=4,res=2,start=0"};
    /* D = 24 (generic loops) and D = 64 (the four-row register-blocked forms), causal and odd T */
    tsc_attn_dims_t dd[2] = {{2, 4, 2, 53, 24, 1, 0.2}, {1, 3, 3, 75, 64, 1, 0.125}};
    for (int di = 0; di < 2; di++) {
    tsc_attn_dims_t d = dd[di];
    size_t nq = (size_t)d.B * d.H * d.T * d.D, nk = (size_t)d.B * d.Hkv * d.T * d.D;
    float *in = malloc(sizeof(float) * (2 * nq + 2 * nk));
    float *out[3];
    size_t nout = 2 * nq + 2 * (size_t)d.B * d.H * d.T + 2 * nk;
    out[0] = malloc(sizeof(float) * nout);
    out[1] = malloc(sizeof(float) * nout);
    out[2] = malloc(sizeof(float) * nout);
    for (size_t i = 0; i < 2 * nq + 2 * nk; i++) in[i] = (float)(2 * nrand());
    for (size_t pi = 0; pi < sizeof pols / sizeof *pols; pi++) {
        tsc_policy_t p;
        CHECKF(tsc_policy_parse(pols[pi], &p) == TSC_OK, "%s", tsc_error_last());
        /* 0 portable, 1 the widest SIMD instance, 2 the AVX2 one (the same as 1 without AVX-512) */
        for (int simd = 0; simd < 3; simd++) {
            float *o = out[simd];
            tsc_attn_io_t io = {TSC_ATTN_F32, in, in + nq, in + nq + nk, in + nq + 2 * nk,
                                o, o + nq, o + nq + (size_t)d.B * d.H * d.T, o + nq + 2 * (size_t)d.B * d.H * d.T,
                                o + 2 * nq + 2 * (size_t)d.B * d.H * d.T, o + 2 * nq + 2 * (size_t)d.B * d.H * d.T + nk};
            tsc_attn_simd_set(simd > 0);
            int old_cap = tsc_cpu_cap(simd == 2 ? 1 : 2);
            CHECK(tsc_attn_run(&p, &d, &io, NULL, 0) == TSC_OK);
            tsc_cpu_cap(old_cap);
        }
        tsc_attn_simd_set(1);
        tsc_compare_t c;
        char buf[400];
        tsc_compare_f32(out[0], out[1], nout, 0, 0, 0, &c);
        CHECKF(c.n_mismatch == 0, "%s D=%d: SIMD (%s) vs portable: %s", pols[pi], d.D, tsc_attn_simd_name(),
               tsc_compare_str(&c, 0, 0, buf, sizeof buf));
        tsc_compare_f32(out[0], out[2], nout, 0, 0, 0, &c);
        CHECKF(c.n_mismatch == 0, "%s D=%d: AVX2 vs portable: %s", pols[pi], d.D, tsc_compare_str(&c, 0, 0, buf, sizeof buf));
    }
    free(in); free(out[0]); free(out[1]); free(out[2]);
    }
}

/* With dout but no dq, dk, dv the backward stops after δ: O, LSE and δ must be bit-identical to
 * a full backward's, for every δ source (lp O, an hp O, dP·P), GQA included, in float and double. */
static void check_delta_only(void) {
    const char *pols[] = {"bf16-torch+tile:q=16,k=16", "bf16-fa2+hp-delta", "bf16-torch+dpp-delta+tile:q=8,k=24",
                          "fp16-fa2", "fp64"};
    tsc_attn_dims_t d = {2, 4, 2, 45, 12, 1, 0.3};
    size_t nq = (size_t)d.B * d.H * d.T * d.D, nk = (size_t)d.B * d.Hkv * d.T * d.D, nr = (size_t)d.B * d.H * d.T;
    for (int dt = 0; dt < 2; dt++)
        for (size_t pi = 0; pi < sizeof pols / sizeof *pols; pi++) {
            tsc_policy_t p;
            CHECKF(tsc_policy_parse(pols[pi], &p) == TSC_OK, "%s", tsc_error_last());
            bufs_t full, part;
            bufs_alloc(&full, &d);
            bufs_alloc(&part, &d);
            bufs_fill(&full, &d, 1.5);
            if (dt == 0) { /* float: the double buffers' storage reused as float arrays */
                double *src[4] = {full.q, full.k, full.v, full.dO};
                size_t n[4] = {nq, nk, nk, nq};
                for (int w = 0; w < 4; w++)
                    for (size_t i = 0; i < n[w]; i++) ((float *)src[w])[i] = (float)src[w][i];
            }
            memcpy(part.q, full.q, nq * 8), memcpy(part.dO, full.dO, nq * 8);
            memcpy(part.k, full.k, nk * 8), memcpy(part.v, full.v, nk * 8);
            tsc_attn_io_t io = io_of(&full), io2 = io_of(&part);
            io.dtype = io2.dtype = dt == 0 ? TSC_ATTN_F32 : TSC_ATTN_F64;
            io2.dq = io2.dk = io2.dv = NULL;
            CHECK(tsc_attn_run(&p, &d, &io, NULL, 0) == TSC_OK);
            CHECK(tsc_attn_run(&p, &d, &io2, NULL, 0) == TSC_OK);
            size_t es = dt == 0 ? 4 : 8;
            CHECKF(memcmp(full.o, part.o, nq * es) == 0, "%s: O differs with delta only", pols[pi]);
            CHECKF(memcmp(full.lse, part.lse, nr * es) == 0, "%s: LSE differs with delta only", pols[pi]);
            CHECKF(memcmp(full.delta, part.delta, nr * es) == 0, "%s: delta differs with delta only", pols[pi]);
            int nonzero = 0; /* delta was computed at all */
            for (size_t i = 0; i < nr * es; i++) nonzero |= ((const unsigned char *)full.delta)[i] != 0;
            CHECK(nonzero);
            bufs_free(&full);
            bufs_free(&part);
        }
}

/* The checker must catch a one-ULP change (and report where). */
static void check_planted_fault(void) {
    tsc_attn_dims_t d = {1, 1, 1, 20, 8, 1, 0.35};
    size_t n = (size_t)d.T * d.D;
    float *q = malloc(sizeof(float) * 3 * n), *o = malloc(sizeof(float) * n), *o2 = malloc(sizeof(float) * n);
    for (size_t i = 0; i < 3 * n; i++) q[i] = (float)nrand();
    tsc_policy_t p;
    CHECK(tsc_policy_parse("fp32", &p) == TSC_OK);
    tsc_attn_io_t io = {TSC_ATTN_F32, q, q + n, q + 2 * n, NULL, o, NULL, NULL, NULL, NULL, NULL};
    CHECK(tsc_attn_run(&p, &d, &io, NULL, 0) == TSC_OK);
    io.o = o2;
    CHECK(tsc_attn_run(&p, &d, &io, NULL, 0) == TSC_OK);
    tsc_compare_t c;
    tsc_compare_f32(o, o2, n, 0, 0, 0, &c);
    CHECK_EQ_INT(c.n_mismatch, 0);  /* deterministic */
    const size_t at = 77;
    o2[at] = nextafterf(o2[at], INFINITY);
    tsc_compare_f32(o, o2, n, 0, 0, 0, &c);
    CHECK_EQ_INT(c.n_mismatch, 1);
    CHECK_EQ_INT(c.worst, at);
    CHECK(c.worst_ref == o[at] && c.worst_out == o2[at]);
    CHECK(c.max_abs > 0 && c.max_abs_at == at);
    /* a tolerance of half an ULP (relative 2^-25 of the value) still catches it */
    tsc_compare_f32(o, o2, n, 0, ldexp(1, -25), 0, &c);
    CHECK_EQ_INT(c.n_mismatch, 1);
    /* NaN policy: NaN in output only fails; NaN in both only with allow_nan; Inf sign must match */
    o2[at] = NAN;
    tsc_compare_f32(o, o2, n, 1, 1, 1, &c);
    CHECK_EQ_INT(c.n_mismatch, 1);
    float a[2] = {NAN, INFINITY}, b[2] = {NAN, -INFINITY};
    tsc_compare_f32(a, b, 2, 1, 1, 1, &c);
    CHECK_EQ_INT(c.n_mismatch, 1);
    CHECK_EQ_INT(c.worst, 1);
    tsc_compare_f32(a, a, 2, 0, 0, 0, &c);
    CHECK_EQ_INT(c.n_mismatch, 1);
    free(q); free(o); free(o2);
}

static void check_expf(void) {
    /* tsc_attn_expf: within 1.0103 ulp of exp where the result is normal, exact at 0, 0 below
     * the smallest subnormal, Inf above the largest float. */
    double worst = 0;
    int mono_bad = 0;
    float prev = 0;
    for (float x = -103.0f; x < 88.7f; x += 0.0137f) {
        float y = tsc_attn_expf(x);
        double e = exp((double)x);
        if (e >= ldexp(1, -126)) {
            double ulp = ldexp(1, ilogb(e) - 23);
            double err = fabs(y - e) / ulp;
            worst = err > worst ? err : worst;
        }
        mono_bad += y < prev;
        prev = y;
    }
    for (float x = -0.01f; x < 0.01f; x += 1e-6f) {
        double e = exp((double)x), ulp = ldexp(1, ilogb(e) - 23);
        double err = fabs(tsc_attn_expf(x) - e) / ulp;
        worst = err > worst ? err : worst;
    }
    /* every 4099th float (bit pattern) with a normal result, and the worst input of the
     * exhaustive measurement in docs/PRESETS.md (1.0103 ulp at x = -5.87788439) */
    for (uint32_t u = 0; u < 0xFFFFFFFFu - 4099; u += 4099) {
        float x;
        memcpy(&x, &u, 4);
        if (!(x >= -87.3f && x <= 88.7f)) continue;
        double e = exp((double)x);
        float ef = (float)e;
        double err = fabs(tsc_attn_expf(x) - e) / ((double)nextafterf(ef, INFINITY) - ef);
        worst = err > worst ? err : worst;
    }
    const float xw = -5.87788439f;
    const double ew = exp((double)xw), uw = (double)nextafterf((float)ew, INFINITY) - (float)ew;
    const double errw = fabs(tsc_attn_expf(xw) - ew) / uw;
    CHECKF(errw > 1.0 && errw < 1.0104, "expf at the documented worst input: %.4f ulp", errw);
    CHECKF(worst <= 1.0104, "expf error %.4f ulp (documented: at most 1.0103)", worst);
    CHECK_EQ_INT(mono_bad, 0);
    CHECK(tsc_attn_expf(0.0f) == 1.0f);
    CHECK(tsc_attn_expf(-200.0f) == 0.0f);
    CHECK(isinf(tsc_attn_expf(89.0f)));
    CHECK(isnan(tsc_attn_expf(NAN)));
    CHECK(tsc_attn_expf(-INFINITY) == 0.0f);
    printf("expf: max error %.3f ulp\n", worst);
}

/* δ sources: rowsum(dP∘P) equals rowsum(dO∘O) in exact arithmetic (fp64: to rounding);
 * +hp-delta reads an all-FP32 forward's O, so on BF16 data its δ is fp32's δ bit for bit. */
static void check_delta_sources(void) {
    tsc_attn_dims_t d = {1, 2, 2, 45, 16, 1, 0.25};
    const size_t n = (size_t)d.H * d.T * d.D, nr = (size_t)d.H * d.T;
    float *in = malloc(sizeof(float) * 4 * n), *o = malloc(sizeof(float) * n);
    float *dl[3];
    for (int i = 0; i < 3; i++) dl[i] = malloc(sizeof(float) * nr);
    for (size_t i = 0; i < 4 * n; i++)
        in[i] = (float)tsc_round(nrand(), TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL);
    const char *pols[3] = {"fp32", "bf16-fa2+hp-delta", "bf16-torch+hp-delta"};
    for (int i = 0; i < 3; i++) {
        tsc_policy_t p;
        CHECK(tsc_policy_parse(pols[i], &p) == TSC_OK);
        tsc_attn_io_t io = {TSC_ATTN_F32, in, in + n, in + 2 * n, in + 3 * n, o, NULL, dl[i], NULL, NULL, NULL};
        CHECK(tsc_attn_run(&p, &d, &io, NULL, 0) == TSC_OK);
    }
    tsc_compare_t c;
    char buf[300];
    tsc_compare_f32(dl[0], dl[1], nr, 0, 0, 0, &c);
    CHECKF(c.n_mismatch == 0, "bf16-fa2+hp-delta vs fp32 delta: %s", tsc_compare_str(&c, 0, 0, buf, sizeof buf));
    /* bf16-torch differs in tiles and fusing, so its FP32 forward is another FP32 rounding */
    tsc_compare_f32(dl[0], dl[2], nr, 1e-5, 1e-5, 0, &c);
    CHECKF(c.n_mismatch == 0, "bf16-torch+hp-delta vs fp32 delta: %s", tsc_compare_str(&c, 1e-5, 1e-5, buf, sizeof buf));
    /* fp64: δ from dP∘P against δ from dO∘O */
    double *ind = malloc(sizeof(double) * 4 * n), *d1 = malloc(sizeof(double) * nr), *d2 = malloc(sizeof(double) * nr);
    double *od = malloc(sizeof(double) * n);
    for (size_t i = 0; i < 4 * n; i++) ind[i] = in[i];
    const char *p64[2] = {"fp64", "fp64+dpp-delta"};
    double *outs[2] = {d1, d2};
    for (int i = 0; i < 2; i++) {
        tsc_policy_t p;
        CHECK(tsc_policy_parse(p64[i], &p) == TSC_OK);
        tsc_attn_io_t io = {TSC_ATTN_F64, ind, ind + n, ind + 2 * n, ind + 3 * n, od, NULL, outs[i], NULL, NULL, NULL};
        CHECK(tsc_attn_run(&p, &d, &io, NULL, 0) == TSC_OK);
    }
    tsc_compare_f64(d1, d2, nr, 1e-12, 1e-12, 0, &c);
    CHECKF(c.n_mismatch == 0, "fp64 dpp-delta vs delta: %s", tsc_compare_str(&c, 1e-12, 1e-12, buf, sizeof buf));
    CHECK(c.max_abs > 0); /* two different computations */
    free(ind); free(d1); free(d2); free(od);
    for (int i = 0; i < 3; i++) free(dl[i]);
    free(in); free(o);
}

/* +sr: a seed reproduces bit for bit (also across thread counts), another seed differs, and
 * the stochastic outputs stay within BF16 rounding of the nearest-even ones. */
static void check_sr(void) {
    tsc_attn_dims_t d = {1, 3, 3, 33, 16, 1, 0.25};
    const size_t n = (size_t)d.H * d.T * d.D;
    float *in = malloc(sizeof(float) * 4 * n), *o[4];
    for (int i = 0; i < 4; i++) o[i] = malloc(sizeof(float) * 2 * n);
    for (size_t i = 0; i < 4 * n; i++) in[i] = (float)tsc_round(nrand(), TSC_FMT_BF16, TSC_ROUND_NEAREST_EVEN, NULL);
    const char *pols[4] = {"bf16-fa2+sr:seed=7", "bf16-fa2+sr:seed=7", "bf16-fa2+sr:seed=8", "bf16-fa2"};
    for (int i = 0; i < 4; i++) {
        tsc_policy_t p;
        CHECK(tsc_policy_parse(pols[i], &p) == TSC_OK);
        tsc_attn_io_t io = {TSC_ATTN_F32, in, in + n, in + 2 * n, in + 3 * n, o[i], NULL, NULL, o[i] + n, NULL, NULL};
#ifdef _OPENMP
        if (i == 1) omp_set_num_threads(1);
#endif
        CHECK(tsc_attn_run(&p, &d, &io, NULL, 0) == TSC_OK);
#ifdef _OPENMP
        if (i == 1) omp_set_num_threads(omp_get_num_procs());
#endif
    }
    tsc_compare_t c;
    tsc_compare_f32(o[0], o[1], 2 * n, 0, 0, 0, &c);
    CHECK_EQ_INT(c.n_mismatch, 0);
    tsc_compare_f32(o[0], o[2], 2 * n, 0, 0, 0, &c);
    CHECK(c.n_mismatch > n / 4);
    /* O: stochastic P̄ (≤ 1 ulp each, 2^-7 relative) and O (≤ 1 ulp) against nearest-even
     * (≤ 1/2 ulp each): within 3 BF16 ulps of |O| plus 3 ulps of the largest |v| (cancellation) */
    tsc_compare_f32(o[3], o[0], n, 3 * ldexp(1, -7) * 4.0, 3 * ldexp(1, -7), 0, &c);
    char buf[300];
    CHECKF(c.n_mismatch == 0, "sr vs rne O: %s", tsc_compare_str(&c, 3 * ldexp(1, -7) * 4.0, 3 * ldexp(1, -7), buf, sizeof buf));
    for (int i = 0; i < 4; i++) free(o[i]);
    free(in);
}

static void check_errors(void) {
    tsc_policy_t p;
    CHECK(tsc_policy_parse("fp32", &p) == TSC_OK);
    float x[16] = {0};
    tsc_attn_dims_t d = {1, 3, 2, 2, 2, 1, 1.0};
    tsc_attn_io_t io = {TSC_ATTN_F32, x, x, x, NULL, x, NULL, NULL, NULL, NULL, NULL};
    CHECK(tsc_attn_run(&p, &d, &io, NULL, 0) == TSC_ERR_ARG);  /* Hkv does not divide H */
    CHECK(strstr(tsc_error_last(), "Hkv") != NULL);
    d.Hkv = 1; d.scale = -1;
    CHECK(tsc_attn_run(&p, &d, &io, NULL, 0) == TSC_ERR_ARG);
    d.scale = 1; io.q = NULL;
    CHECK(tsc_attn_run(&p, &d, &io, NULL, 0) == TSC_ERR_ARG);
    tsc_attn_trace_free(NULL);
}

int main(void) {
    check_expf();
    check_fp64(1, 2, 2, 20, 8, 0, 128, 128);   /* one tile */
    check_fp64(1, 2, 2, 37, 5, 1, 16, 16);     /* odd T, causal, partial last tile */
    check_fp64(1, 2, 2, 37, 5, 0, 16, 16);
    check_fp64(1, 1, 1, 13, 3, 1, 1, 1);       /* tile size 1 */
    check_fp64(2, 4, 2, 29, 6, 1, 8, 16);      /* GQA H=4, Hkv=2, two batches */
    check_fp64(1, 4, 1, 17, 4, 0, 5, 3);       /* MQA, tiles not dividing T */
    /* random awkward shapes: T from 1, D not a multiple of anything, tiles larger and smaller
     * than T, every row-block tail (T mod 4), GQA groups of 1-3 */
    for (int i = 0; i < 24; i++) {
        int Hkv = 1 + (int)(urand() * 2), G = 1 + (int)(urand() * 3), T = 1 + (int)(urand() * 41);
        int D = 1 + (int)(urand() * 9), bq = 1 + (int)(urand() * 20), bk = 1 + (int)(urand() * 20);
        check_fp64(1 + (i % 2), Hkv * G, Hkv, T, D, i % 3 != 0, bq, bk);
    }
    check_fd(0);
    check_fd(1);
    check_fp32_bound();
    check_paths();
    check_planted_fault();
    check_delta_sources();
    check_delta_only();
    check_sr();
    check_errors();
    return tsc_test_done();
}
