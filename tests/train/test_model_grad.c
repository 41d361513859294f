/* test_model_grad.c: FP64 gradients of the models and of each operation against central finite
 * differences. Bound: |analytic − numeric| <= 1e-6 · max(|analytic|, |numeric|) + 1e-10 for every
 * sampled entry (step h = 1e-5 on parameters of size ~0.02..1; the truncation error h² f''' and
 * the cancellation error 1e-16 / h are both far below it). */
#include "tsc_test.h"

#include "model_internal.h"
#include "tsc_model.h"

#define RTOL 1e-6
#define ATOL 1e-10

static int close_enough(double a, double n) { return fabs(a - n) <= RTOL * fmax(fabs(a), fabs(n)) + ATOL; }
/* The operations' checks sum ~24 terms of size ~1 into L, so FD with h = 1e-6 carries an absolute
 * cancellation error of ~1e-16 · |L| / h ~ 1e-9: their bound is 1e-6 relative + 1e-8 absolute. */
static int close_op(double a, double n) { return fabs(a - n) <= RTOL * fmax(fabs(a), fabs(n)) + 1e-8; }

static double loss_at(tsc_model_t *m, const int32_t *tok, const int32_t *tgt) {
    double l = NAN;
    CHECK(tsc_model_forward(m, tok, tgt, &l) == TSC_OK);
    return l;
}

static void check_model(const char *name) {
    tsc_model_config_t cfg;
    CHECK(tsc_model_config_get(name, &cfg) == TSC_OK);
    int B = 2, T = 11;
    tsc_model_t *m = NULL;
    CHECK(tsc_model_create(&m, &cfg, TSC_PREC_FP64, B, T) == TSC_OK);
    if (!m) return;
    tsc_model_init(m, 7);
    double *p = tsc_model_params(m), *g = tsc_model_grads(m);
    uint64_t s = 99;
    /* biases and gains moved off 0 / 1 so their gradients are generic */
    for (size_t i = 0; i < tsc_model_n_params(m); i++) p[i] += 0.05 * tsc_test_nrand(&s);
    int32_t tok[22], tgt[22];
    for (int i = 0; i < B * T; i++) {
        tok[i] = (int32_t)(tsc_test_lcg(&s) % 256);
        tgt[i] = i == 3 ? -1 : (int32_t)(tsc_test_lcg(&s) % 256); /* one ignored target */
    }
    tok[5] = tok[2]; /* a repeated token: its embedding row gets two rows' gradient */
    loss_at(m, tok, tgt);
    CHECK(tsc_model_backward(m) == TSC_OK);
    size_t n = tsc_model_n_params(m);
    double *ga = malloc(n * sizeof *ga);
    memcpy(ga, g, n * sizeof *ga);
    int bad = 0, checked = 0;
    for (int ti = 0; ti < tsc_model_n_tensors(m); ti++) {
        const tsc_model_tensor_t *t = tsc_model_tensor(m, ti);
        size_t sz = (size_t)t->rows * t->cols;
        for (int k = 0; k < 6; k++) {
            size_t j = t->offset + (k == 0 && strcmp(t->name, "wte") == 0 ? (size_t)tok[2] * t->cols
                                                                          : tsc_test_lcg(&s) % sz);
            double keep = p[j], h = 1e-5;
            p[j] = keep + h;
            double lp = loss_at(m, tok, tgt);
            p[j] = keep - h;
            double lm = loss_at(m, tok, tgt);
            p[j] = keep;
            double num = (lp - lm) / (2 * h);
            checked++;
            if (!close_enough(ga[j], num)) {
                if (bad++ < 10) fprintf(stderr, "%s %s[%zu]: analytic %.12g numeric %.12g\n", name, t->name,
                                        j - t->offset, ga[j], num);
            }
        }
    }
    CHECKF(bad == 0, "%s: %d of %d sampled gradient entries off", name, bad, checked);
    printf("%s: %d entries over %d tensors checked, %d off\n", name, checked, tsc_model_n_tensors(m), bad);
    free(ga);
    tsc_model_free(m);
}

/* ---- each operation: y = op(x), L = Σ y·r; backward with dy = r against FD of L */

typedef double (*objective_fn)(const double *x, void *ctx);

static void fd_compare(const char *what, double *x, size_t n, const double *grad, objective_fn f, void *ctx) {
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double keep = x[i], h = 1e-6;
        x[i] = keep + h;
        double lp = f(x, ctx);
        x[i] = keep - h;
        double lm = f(x, ctx);
        x[i] = keep;
        double num = (lp - lm) / (2 * h);
        if (!close_op(grad[i], num) && bad++ < 5)
            fprintf(stderr, "%s[%zu]: analytic %.12g numeric %.12g\n", what, i, grad[i], num);
    }
    CHECKF(bad == 0, "%s: %d of %zu entries off", what, bad, n);
}

enum { NR = 3, NC = 8, NN = NR * NC };
typedef struct { const double *w, *b, *r, *u; int kind; } opctx_t; /* kind: 0 LN x, 1 LN w, 2 LN b, 3 RMS x, 4 RMS w */

static double norm_obj(const double *v, void *vc) {
    opctx_t *c = vc;
    double x[NN], w[NC], b[NC], y[NN], mean[NR], rstd[NR], L = 0;
    memcpy(x, c->u, sizeof x);
    memcpy(w, c->w, sizeof w);
    memcpy(b, c->b, sizeof b);
    if (c->kind == 0 || c->kind == 3) memcpy(x, v, sizeof x);
    if (c->kind == 1 || c->kind == 4) memcpy(w, v, sizeof w);
    if (c->kind == 2) memcpy(b, v, sizeof b);
    if (c->kind < 3) tsc_layernorm_fwd_d(y, mean, rstd, x, w, b, NR, NC, 1e-5);
    else tsc_rmsnorm_fwd_d(y, rstd, x, w, NR, NC, 1e-5);
    for (int i = 0; i < NN; i++) L += y[i] * c->r[i];
    return L;
}

static void check_norms(uint64_t *s) {
    double x[NN], w[NC], b[NC], r[NN], y[NN], mean[NR], rstd[NR], dx[NN], dw[NC], db[NC];
    for (int i = 0; i < NN; i++) x[i] = tsc_test_nrand(s) + 0.3, r[i] = tsc_test_nrand(s);
    for (int i = 0; i < NC; i++) w[i] = 1 + 0.3 * tsc_test_nrand(s), b[i] = 0.2 * tsc_test_nrand(s);
    opctx_t c = {w, b, r, x, 0};
    tsc_layernorm_fwd_d(y, mean, rstd, x, w, b, NR, NC, 1e-5);
    memset(dx, 0, sizeof dx);
    tsc_layernorm_bwd_d(dx, dw, db, r, x, w, mean, rstd, NR, NC);
    double v[NN];
    memcpy(v, x, sizeof x); c.kind = 0; fd_compare("layernorm dx", v, NN, dx, norm_obj, &c);
    memcpy(v, w, sizeof w); c.kind = 1; fd_compare("layernorm dw", v, NC, dw, norm_obj, &c);
    memcpy(v, b, sizeof b); c.kind = 2; fd_compare("layernorm db", v, NC, db, norm_obj, &c);
    tsc_rmsnorm_fwd_d(y, rstd, x, w, NR, NC, 1e-5);
    memset(dx, 0, sizeof dx);
    tsc_rmsnorm_bwd_d(dx, dw, r, x, w, rstd, NR, NC);
    memcpy(v, x, sizeof x); c.kind = 3; fd_compare("rmsnorm dx", v, NN, dx, norm_obj, &c);
    memcpy(v, w, sizeof w); c.kind = 4; fd_compare("rmsnorm dw", v, NC, dw, norm_obj, &c);
}

static double act_obj(const double *v, void *vc) {
    opctx_t *c = vc;
    double y[NN], L = 0;
    double th[NN];
    if (c->kind == 0) tsc_gelu_fwd_d(y, th, v, NN);
    if (c->kind == 1) tsc_swiglu_fwd_d(y, v, c->u, NN);   /* d/d gate */
    if (c->kind == 2) tsc_swiglu_fwd_d(y, c->u, v, NN);   /* d/d up */
    if (c->kind == 3) {                                   /* RoPE on [B 1, H 1, T 4, D 6] */
        memcpy(y, v, sizeof y);
        tsc_rope_fwd_d(y, c->w, c->b, 1, 1, 4, 6, 0);
    }
    for (int i = 0; i < NN; i++) L += y[i] * c->r[i];
    return L;
}

static void check_acts(uint64_t *s) {
    double x[NN], u[NN], r[NN], dx[NN], du[NN], v[NN], cs[12], sn[12];
    for (int i = 0; i < NN; i++) x[i] = 2 * tsc_test_nrand(s), u[i] = tsc_test_nrand(s), r[i] = tsc_test_nrand(s);
    opctx_t c = {NULL, NULL, r, u, 0};
    double th[NN], y[NN];
    tsc_gelu_fwd_d(y, th, x, NN);
    tsc_gelu_bwd_d(dx, r, x, th, NN);
    memcpy(v, x, sizeof v); fd_compare("gelu", v, NN, dx, act_obj, &c);
    tsc_swiglu_bwd_d(dx, du, r, x, u, NN);
    c.u = u; c.kind = 1; memcpy(v, x, sizeof v); fd_compare("swiglu dgate", v, NN, dx, act_obj, &c);
    c.u = x; c.kind = 2; memcpy(v, u, sizeof v); fd_compare("swiglu dup", v, NN, du, act_obj, &c);
    for (int t = 0; t < 4; t++)
        for (int i = 0; i < 3; i++) cs[t * 3 + i] = cos(t * pow(10000, -2.0 * i / 6)), sn[t * 3 + i] = sin(t * pow(10000, -2.0 * i / 6));
    memcpy(dx, r, sizeof dx);
    tsc_rope_fwd_d(dx, cs, sn, 1, 1, 4, 6, 1); /* backward = inverse rotation of dy */
    c.w = cs; c.b = sn; c.kind = 3; memcpy(v, x, sizeof v); fd_compare("rope", v, NN, dx, act_obj, &c);
    /* RoPE keeps each pair's norm and rotates position 1, pair 0 by exactly 1 radian */
    memcpy(v, x, sizeof v);
    tsc_rope_fwd_d(v, cs, sn, 1, 1, 4, 6, 0);
    CHECK_NEAR(v[6], x[6] * cos(1.0) - x[7] * sin(1.0), 1e-15);
    CHECK_NEAR(v[7], x[6] * sin(1.0) + x[7] * cos(1.0), 1e-15);
}

typedef struct { const int32_t *tgt; } cectx_t;
static double ce_obj(const double *v, void *vc) {
    int nv;
    return tsc_crossent_fwd_d(v, ((cectx_t *)vc)->tgt, 4, 6, &nv);
}

typedef struct { const double *a, *b; int which, M, N, K; } mmctx_t;
static double mm_obj(const double *v, void *vc) {
    mmctx_t *c = vc;
    double C[12], L = 0;
    const double *a = c->which == 0 ? v : c->a, *b = c->which == 1 ? v : c->b;
    /* A [M, K] row-major; B given as [K, N] (B(j, k) at k*N + j: the transposed view) */
    tsc_gemm_f64(c->M, c->N, c->K, (tsc_mref_t){a, (size_t)c->K, 1}, (tsc_mref_t){b, 1, (size_t)c->N}, C, (size_t)c->N, 0);
    for (int i = 0; i < c->M * c->N; i++) L += C[i] * (i + 1) * 0.1;
    return L;
}

static void check_ce_mm(uint64_t *s) {
    double lg[24], d[24];
    int32_t tgt[4] = {2, -1, 5, 0};
    for (int i = 0; i < 24; i++) lg[i] = 3 * tsc_test_nrand(s);
    int nv;
    double l = tsc_crossent_fwd_d(lg, tgt, 4, 6, &nv);
    CHECK_EQ_INT(nv, 3);
    double ref = 0; /* independent: log Σ exp − target logit, unshifted */
    for (int i = 0; i < 4; i++) {
        if (tgt[i] < 0) continue;
        double z = 0;
        for (int j = 0; j < 6; j++) z += exp(lg[i * 6 + j]);
        ref += log(z) - lg[i * 6 + tgt[i]];
    }
    CHECK_NEAR(l, ref / 3, 1e-13);
    tsc_crossent_bwd_d(d, lg, tgt, 4, 6, nv);
    cectx_t c = {tgt};
    fd_compare("cross-entropy", lg, 24, d, ce_obj, &c);
    /* matmul: C[3, 4] = A[3, 5] · B[5, 4]; dA = dC · Bᵀ, dB = Aᵀ · dC, written with the same gemm */
    double A[15], Bm[20], dC[12], dA[15], dB[20];
    for (int i = 0; i < 15; i++) A[i] = tsc_test_nrand(s);
    for (int i = 0; i < 20; i++) Bm[i] = tsc_test_nrand(s);
    for (int i = 0; i < 12; i++) dC[i] = (i + 1) * 0.1;
    tsc_gemm_f64(3, 5, 4, (tsc_mref_t){dC, 4, 1}, (tsc_mref_t){Bm, 4, 1}, dA, 5, 0);   /* dA[i,k] = Σ_j dC[i,j] B[k,j] */
    tsc_gemm_f64(5, 4, 3, (tsc_mref_t){A, 1, 5}, (tsc_mref_t){dC, 1, 4}, dB, 4, 0);    /* dB[k,j] = Σ_i A[i,k] dC[i,j] */
    mmctx_t mc = {A, Bm, 0, 3, 4, 5};
    fd_compare("matmul dA", A, 15, dA, mm_obj, &mc);
    mc.which = 1;
    fd_compare("matmul dB", Bm, 20, dB, mm_obj, &mc);
}

int main(void) {
    uint64_t s = 12345;
    check_norms(&s);
    check_acts(&s);
    check_ce_mm(&s);
    check_model("gpt2-tiny");
    check_model("llama-tiny");
    return tsc_test_done();
}
