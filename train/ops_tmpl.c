/* ops_tmpl.c: the element-wise operations of train/'s models and their backward, written once
 * for an element type `real` (float or double) and a name suffix S; ops.c includes it twice.
 * Shapes: x, y, dx, dy [N, C] row-major (N = B·T rows); w, b, dw, db [C]; mean, rstd [N].
 * Backward conventions: a norm's dx is ADDED into dx (the residual stream's gradient), its
 * dw, db are overwritten; every other d* output is overwritten. */
#ifdef TSC_OPS_TMPL
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define F(name) CAT(name, S)
#define COLS 16 /* columns per thread's share of a column sum */

void F(tsc_layernorm_fwd)(real *y, real *mean, real *rstd, const real *x, const real *w, const real *b, int N,
                          int C, double eps) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const real *xi = x + (size_t)i * C; /* [C] */
        real *yi = y + (size_t)i * C;       /* [C] */
        real m = 0, v = 0;
        for (int c = 0; c < C; c++) m += xi[c];
        m /= C;
        for (int c = 0; c < C; c++) v += (xi[c] - m) * (xi[c] - m);
        v /= C;
        real s = (real)1 / SQRT(v + (real)eps);
        for (int c = 0; c < C; c++) yi[c] = (xi[c] - m) * s * w[c] + b[c];
        mean[i] = m;
        rstd[i] = s;
    }
}

void F(tsc_layernorm_bwd)(real *dx, real *dw, real *db, const real *dy, const real *x, const real *w,
                          const real *mean, const real *rstd, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const real *xi = x + (size_t)i * C, *dyi = dy + (size_t)i * C; /* [C] each */
        real *dxi = dx + (size_t)i * C;
        real m = mean[i], s = rstd[i], g_mean = 0, gx_mean = 0;
        for (int c = 0; c < C; c++) {
            real g = dyi[c] * w[c], xh = (xi[c] - m) * s;
            g_mean += g;
            gx_mean += g * xh;
        }
        g_mean /= C;
        gx_mean /= C;
        for (int c = 0; c < C; c++) {
            real xh = (xi[c] - m) * s;
            dxi[c] += (dyi[c] * w[c] - g_mean - xh * gx_mean) * s;
        }
    }
    /* column sums: threads split the columns, each column sums its rows in order (the same bits
     * for any thread count) */
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += COLS) {
        int c1 = c0 + COLS < C ? c0 + COLS : C;
        for (int c = c0; c < c1; c++) dw[c] = db[c] = 0;
        for (int i = 0; i < N; i++)
            for (int c = c0; c < c1; c++) {
                real dyv = dy[(size_t)i * C + c];
                dw[c] += dyv * (x[(size_t)i * C + c] - mean[i]) * rstd[i];
                db[c] += dyv;
            }
    }
}

void F(tsc_rmsnorm_fwd)(real *y, real *rstd, const real *x, const real *w, int N, int C, double eps) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const real *xi = x + (size_t)i * C; /* [C] */
        real *yi = y + (size_t)i * C;
        real ss = 0;
        for (int c = 0; c < C; c++) ss += xi[c] * xi[c];
        real s = (real)1 / SQRT(ss / C + (real)eps);
        for (int c = 0; c < C; c++) yi[c] = xi[c] * s * w[c];
        rstd[i] = s;
    }
}

void F(tsc_rmsnorm_bwd)(real *dx, real *dw, const real *dy, const real *x, const real *w, const real *rstd,
                        int N, int C) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const real *xi = x + (size_t)i * C, *dyi = dy + (size_t)i * C; /* [C] each */
        real *dxi = dx + (size_t)i * C;
        real s = rstd[i], gx_mean = 0;
        for (int c = 0; c < C; c++) gx_mean += dyi[c] * w[c] * xi[c] * s;
        gx_mean /= C;
        for (int c = 0; c < C; c++) dxi[c] += (dyi[c] * w[c] - xi[c] * s * gx_mean) * s;
    }
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += COLS) { /* as tsc_layernorm_bwd's column sums */
        int c1 = c0 + COLS < C ? c0 + COLS : C;
        for (int c = c0; c < c1; c++) dw[c] = 0;
        for (int i = 0; i < N; i++)
            for (int c = c0; c < c1; c++) dw[c] += dy[(size_t)i * C + c] * x[(size_t)i * C + c] * rstd[i];
    }
}

/* GELU, tanh approximation: y = x/2 · (1 + tanh(√(2/π) (x + 0.044715 x³))). */
#define GELU_S 0.7978845608028654
static inline __attribute__((always_inline)) void F(gelu_one)(real *y, real *th, real v) {
    real u = (real)GELU_S * (v + (real)0.044715 * v * v * v), t = TANH(u);
    *y = (real)0.5 * v * (1 + t);
    *th = t;
}
static void F(gelu_span)(real *y, real *th, const real *x, size_t n) {
    for (size_t i = 0; i < n; i++) F(gelu_one)(y + i, th + i, x[i]);
}
#ifdef GELU_SPAN_SIMD /* the same compiled for a wider vector unit, chosen at run time: vectorised */
GELU_SPAN_SIMD static void F(gelu_span_simd)(real *y, real *th, const real *x, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) F(gelu_one)(y + i, th + i, x[i]);
}
GELU_SPAN_SIMD2 static void F(gelu_span_simd2)(real *y, real *th, const real *x, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) F(gelu_one)(y + i, th + i, x[i]);
}
#endif

void F(tsc_gelu_fwd)(real *y, real *th, const real *x, size_t n) {
    enum { SPAN = 4096 };
    size_t ns = (n + SPAN - 1) / SPAN;
#ifdef GELU_SPAN_SIMD
    int simd = GELU_SIMD_OK() ? 2 : GELU_SIMD2_OK() ? 1 : 0;
#endif
#pragma omp parallel for schedule(static)
    for (size_t s = 0; s < ns; s++) {
        size_t lo = s * SPAN, len = n - lo < SPAN ? n - lo : SPAN;
#ifdef GELU_SPAN_SIMD
        if (simd) {
            if (simd == 2) F(gelu_span_simd)(y + lo, th + lo, x + lo, len);
            else F(gelu_span_simd2)(y + lo, th + lo, x + lo, len);
            continue;
        }
#endif
        F(gelu_span)(y + lo, th + lo, x + lo, len);
    }
}

/* th: the forward's tanh values (so the backward computes none). */
void F(tsc_gelu_bwd)(real *dx, const real *dy, const real *x, const real *th, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        real v = x[i], t = th[i];
        real du = (real)GELU_S * (1 + (real)(3 * 0.044715) * v * v);
        dx[i] = dy[i] * ((real)0.5 * (1 + t) + (real)0.5 * v * (1 - t * t) * du);
    }
}
#undef GELU_S

/* SwiGLU: y = silu(g) · u, silu(g) = g · σ(g). */
void F(tsc_swiglu_fwd)(real *y, const real *g, const real *u, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) y[i] = g[i] / (1 + EXP(-g[i])) * u[i];
}

void F(tsc_swiglu_bwd)(real *dg, real *du, const real *dy, const real *g, const real *u, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        real sg = 1 / (1 + EXP(-g[i]));
        du[i] = dy[i] * g[i] * sg;
        dg[i] = dy[i] * u[i] * (sg + g[i] * sg * (1 - sg));
    }
}

/* RoPE in place on x [B, H, T, D]: pairs (2i, 2i+1) of position t rotated by angle t·θ^(−2i/D),
 * cs, sn [T, D/2] its cosine and sine; inv 1 rotates back (the backward: Rᵀ = R⁻¹). */
void F(tsc_rope_fwd)(real *x, const real *cs, const real *sn, int B, int H, int T, int D, int inv) {
    real sign = inv ? -1 : 1;
#pragma omp parallel for collapse(2) schedule(static)
    for (int bh = 0; bh < B * H; bh++)
        for (int t = 0; t < T; t++) {
            real *xt = x + ((size_t)bh * T + t) * D; /* [D] */
            for (int i = 0; i < D / 2; i++) {
                real c = cs[(size_t)t * (D / 2) + i], s = sign * sn[(size_t)t * (D / 2) + i];
                real x0 = xt[2 * i], x1 = xt[2 * i + 1];
                xt[2 * i] = x0 * c - x1 * s;
                xt[2 * i + 1] = x0 * s + x1 * c;
            }
        }
}

/* Mean cross-entropy over the rows whose target is >= 0 (their count in *n_valid; 0 rows: 0).
 * Rows in order, each row's loss (log Σ exp − logit[target], max-shifted) summed in double. */
double F(tsc_crossent_fwd)(const real *logits, const int32_t *targets, int N, int V, int *n_valid) {
    double sum = 0;
    int n = 0;
    for (int i = 0; i < N; i++) {
        if (targets[i] < 0) continue;
        const real *l = logits + (size_t)i * V; /* [V] */
        real mx = l[0], z = 0;
        for (int j = 1; j < V; j++) mx = l[j] > mx ? l[j] : mx;
        for (int j = 0; j < V; j++) z += EXP(l[j] - mx);
        sum += (double)(LOG(z) + mx - l[targets[i]]);
        n++;
    }
    *n_valid = n;
    return n ? sum / n : 0.0;
}

void F(tsc_crossent_bwd)(real *dlogits, const real *logits, const int32_t *targets, int N, int V, int n_valid) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const real *l = logits + (size_t)i * V; /* [V] */
        real *d = dlogits + (size_t)i * V;
        if (targets[i] < 0) {
            memset(d, 0, (size_t)V * sizeof(real));
            continue;
        }
        real mx = l[0], z = 0, inv_n = (real)1 / n_valid;
        for (int j = 1; j < V; j++) mx = l[j] > mx ? l[j] : mx;
        for (int j = 0; j < V; j++) z += EXP(l[j] - mx);
        for (int j = 0; j < V; j++) d[j] = (real)EXP(l[j] - mx) / z * inv_n;
        d[targets[i]] -= inv_n;
    }
}

#undef F
#undef COLS
#undef CAT
#undef CAT_
#else
typedef int tsc_ops_tmpl_unused_t; /* built on its own: an empty but valid unit */
#endif
