/* spectral.c: the spectral norm of a weight matrix (spectral_internal.h), the one definition the
 * trainer and the analysis report.
 *
 * sigma_max(w)^2 is the largest eigenvalue of the Gram matrix of w's smaller side (w^T w when
 * cols <= rows, else w w^T; the larger one's extra eigenvalues are 0), formed in double: a
 * product of two floats is exact there. Its top eigenvalue comes from subspace iteration on a
 * block of 8 vectors with Rayleigh-Ritz, each round a Chebyshev polynomial in the Gram matrix:
 * random weights have clustered top singular values (s2/s1 up to 0.99999 in a GPT-2-sized synth
 * dump), where single-vector power iteration stalls; the block makes the rate depend on
 * l_9/l_1 and the filter on its square root (a 768 x 768 Gram matrix: ~37 products of the
 * Gram matrix with the block for 1e-10, ~110 without the filter).
 *
 * Everything is written out here (no BLAS, no LAPACK): the Gram matrix's dot products, the
 * block's Householder QR and the Ritz values' Jacobi rotations each sum in one fixed order, and
 * the file is compiled with -ffp-contract=off (CMakeLists.txt), so the vector width a loop gets
 * (the AVX-512 clone or the baseline) and the compiler change no bit. LAPACK is the reference of
 * tests/kernels/test_spectral.c, not a dependency of this layer. */
#include "spectral_internal.h"

#include "cpu_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Partial sums a dot product keeps: element j goes to lane j mod LANES, the lanes are added
 * pairwise at the end; one order whatever the loop is vectorised into. */
enum { LANES = 8 };

static double lanes_sum(const double s[LANES]) {
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* Eight lanes as one vector value: lane c of an add or multiply is the scalar operation on lane c, so
 * the order below is the scalar one whatever registers the compiler maps it to (one AVX-512 register,
 * two AVX2 ones, four SSE ones). */
typedef double lanes_t __attribute__((vector_size(LANES * sizeof(double))));

/* An unaligned load of eight doubles (a macro: a function returning the vector would change the ABI
 * between the clones). */
#define LANES_LOAD(v, p) memcpy(&(v), (p), sizeof(v))

/* out[r] = a_r . b (r < 4) for rows a_r, b of length m, each in the fixed lane order: four rows
 * against one, so b is read once per four dot products. */
TSC_SIMD_CLONES
static void dot4(const double *restrict a0, const double *restrict a1, const double *restrict a2,
                 const double *restrict a3, const double *restrict b, size_t m, double out[4]) {
    lanes_t s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    size_t m8 = m - m % LANES, j = 0;
    for (; j < m8; j += LANES) {
        lanes_t bv, x0, x1, x2, x3;
        LANES_LOAD(bv, b + j), LANES_LOAD(x0, a0 + j), LANES_LOAD(x1, a1 + j), LANES_LOAD(x2, a2 + j);
        LANES_LOAD(x3, a3 + j);
        s0 += x0 * bv, s1 += x1 * bv, s2 += x2 * bv, s3 += x3 * bv;
    }
    double t[4] = {0, 0, 0, 0}, l[4][LANES];
    for (; j < m; j++) t[0] += a0[j] * b[j], t[1] += a1[j] * b[j], t[2] += a2[j] * b[j], t[3] += a3[j] * b[j];
    memcpy(l[0], &s0, sizeof s0), memcpy(l[1], &s1, sizeof s1), memcpy(l[2], &s2, sizeof s2);
    memcpy(l[3], &s3, sizeof s3);
    for (int r = 0; r < 4; r++) out[r] = lanes_sum(l[r]) + t[r];
}

/* g = a a^T [k, k], both triangles, for a [k, m] row-major: entry (i, j) is the dot product of
 * rows i and j in the lane order of dot4 (the lone rows of the last block of four take the same
 * path with a repeated row), so g is symmetric by construction. */
static void gram_rows(const double *a, size_t k, size_t m, double *g) {
    /* GRAM_ROWS rows of a at a time, each row j dotted with their blocks of four one after the other
     * (row j is read from memory once per GRAM_ROWS rows, not once per four); the products are dot4's
     * whatever the grouping */
    enum { GRAM_ROWS = 16 };
    for (size_t i1 = 0; i1 < k; i1 += GRAM_ROWS)
        for (size_t j = 0; j < k && j < i1 + GRAM_ROWS; j++)
            for (size_t i0 = i1; i0 < i1 + GRAM_ROWS && i0 < k; i0 += 4) {
                if (j >= i0 + 4) continue; /* the upper triangle: its mirror entry is set */
                const double *r[4];
                for (size_t d = 0; d < 4; d++) r[d] = a + (i0 + d < k ? i0 + d : i0) * m;
                double o[4];
                dot4(r[0], r[1], r[2], r[3], a + j * m, m, o);
                for (size_t d = 0; d < 4 && i0 + d < k; d++)
                    if (j <= i0 + d) g[(i0 + d) * k + j] = g[j * k + i0 + d] = o[d];
            }
}

/* The smaller side of w [rows, cols] (float wf or double wd) as the rows of a [k, m] in double:
 * w^T when cols <= rows, else w. Returns 0 when w holds NaN or Inf. */
static int smaller_side(const float *wf, const double *wd, size_t rows, size_t cols, double *a, size_t *k,
                        size_t *m) {
    int tr = cols <= rows, ok = 1;
    *k = tr ? cols : rows, *m = tr ? rows : cols;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) {
            double v = wf ? (double)wf[i * cols + j] : wd[i * cols + j];
            ok &= isfinite(v) != 0;
            a[tr ? j * rows + i : i * cols + j] = v;
        }
    return ok;
}

/* Subspace iteration works on blocks of p <= 8 vectors, stored row-major [n, 8] (unused columns
 * 0), so one row of a block is one AVX-512 vector. */
enum { BLOCK = 8 };

/* y = g x for [n, BLOCK] blocks, four rows of g at a time: each row of x, read once per four
 * rows, feeds four accumulators, and g is streamed once. Each lane sums over j in order. */
TSC_SIMD_CLONES
static void gram_times_block(const double *restrict g, size_t n, const double *restrict x, double *restrict y) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        double a0[BLOCK] = {0}, a1[BLOCK] = {0}, a2[BLOCK] = {0}, a3[BLOCK] = {0};
        const double *g0 = g + i * n, *g1 = g0 + n, *g2 = g1 + n, *g3 = g2 + n;
        for (size_t j = 0; j < n; j++) {
#pragma omp simd
            for (int c = 0; c < BLOCK; c++) {
                double xv = x[j * BLOCK + c];
                a0[c] += g0[j] * xv, a1[c] += g1[j] * xv, a2[c] += g2[j] * xv, a3[c] += g3[j] * xv;
            }
        }
        for (int c = 0; c < BLOCK; c++)
            y[i * BLOCK + c] = a0[c], y[(i + 1) * BLOCK + c] = a1[c], y[(i + 2) * BLOCK + c] = a2[c],
                          y[(i + 3) * BLOCK + c] = a3[c];
    }
    for (; i < n; i++) {
        double a[BLOCK] = {0};
        for (size_t j = 0; j < n; j++)
#pragma omp simd
            for (int c = 0; c < BLOCK; c++) a[c] += g[i * n + j] * x[j * BLOCK + c];
        for (int c = 0; c < BLOCK; c++) y[i * BLOCK + c] = a[c];
    }
}

/* Orthonormal columns for the first p columns of blk [n, BLOCK] (row-major), in place, by
 * Householder QR: Q = H_0 ... H_{p-1} [I_p; 0] is orthonormal to rounding even when blk is
 * rank-deficient (a Gram matrix of low rank; a column that is already 0 below the diagonal gets
 * no reflector). Scratch: v [p, n] (the reflectors, column j zero above row j), q [p, n]
 * (column-major copies). */
static void orthonormalize(double *blk, size_t n, size_t p, double *v, double *q) {
    double coef[BLOCK];
    for (size_t c = 0; c < p; c++)
        for (size_t i = 0; i < n; i++) q[c * n + i] = blk[i * BLOCK + c];
    for (size_t j = 0; j < p; j++) { /* R in q (discarded), the reflectors in v */
        double *x = q + j * n, *u = v + j * n, nrm = 0;
        for (size_t i = j; i < n; i++) nrm += x[i] * x[i];
        nrm = sqrt(nrm);
        memset(u, 0, n * sizeof *u);
        coef[j] = 0;
        if (nrm == 0) continue;
        double beta = x[j] >= 0 ? -nrm : nrm, uu = 0; /* x[j] - beta: no cancellation */
        for (size_t i = j; i < n; i++) u[i] = x[i];
        u[j] -= beta;
        for (size_t i = j; i < n; i++) uu += u[i] * u[i];
        coef[j] = 2 / uu;
        for (size_t c = j; c < p; c++) { /* H_j = I - coef u u^T on the columns not yet reduced */
            double *y = q + c * n, s = 0;
            for (size_t i = j; i < n; i++) s += u[i] * y[i];
            s *= coef[j];
            for (size_t i = j; i < n; i++) y[i] -= s * u[i];
        }
    }
    memset(q, 0, p * n * sizeof *q); /* Q = H_0 (H_1 (... H_{p-1} [I_p; 0])) */
    for (size_t c = 0; c < p; c++) q[c * n + c] = 1;
    for (size_t j = p; j-- > 0;) {
        const double *u = v + j * n;
        if (coef[j] == 0) continue;
        for (size_t c = 0; c < p; c++) {
            double *y = q + c * n, s = 0;
            for (size_t i = j; i < n; i++) s += u[i] * y[i];
            s *= coef[j];
            for (size_t i = j; i < n; i++) y[i] -= s * u[i];
        }
    }
    for (size_t c = 0; c < p; c++)
        for (size_t i = 0; i < n; i++) blk[i * BLOCK + c] = q[c * n + i];
}

/* The smallest and largest eigenvalue of the symmetric h [p, p] (p <= BLOCK; overwritten) by
 * cyclic Jacobi rotations, each of which zeroes one off-diagonal pair (the rotation of Rutishauser's
 * formulation: t = tan(phi) from theta = (h_jj - h_ii) / 2h_ij, the smaller root). An entry
 * negligible beside both diagonal entries is set to 0 after a few sweeps; 50 sweeps bound the
 * loop (an 8 x 8 needs about 6). Accurate to rounding for any symmetric h. */
static void sym_extremes(double *h, size_t p, double *lo, double *hi) {
    for (int sweep = 0; sweep < 50; sweep++) {
        double off = 0;
        for (size_t i = 0; i < p; i++)
            for (size_t j = i + 1; j < p; j++) off += h[i * p + j] * h[i * p + j];
        if (off == 0) break;
        for (size_t i = 0; i < p; i++)
            for (size_t j = i + 1; j < p; j++) {
                double hij = h[i * p + j], hii = h[i * p + i], hjj = h[j * p + j];
                if (hij == 0) continue;
                if (sweep > 3 && fabs(hii) + 100 * fabs(hij) == fabs(hii) && fabs(hjj) + 100 * fabs(hij) == fabs(hjj)) {
                    h[i * p + j] = h[j * p + i] = 0;
                    continue;
                }
                double theta = (hjj - hii) / (2 * hij);
                double t = fabs(theta) > 1e150 ? 0.5 / theta
                                               : (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1));
                double c = 1 / sqrt(t * t + 1), s = t * c;
                for (size_t k = 0; k < p; k++) {
                    if (k == i || k == j) continue;
                    double hki = h[k * p + i], hkj = h[k * p + j];
                    h[k * p + i] = h[i * p + k] = c * hki - s * hkj;
                    h[k * p + j] = h[j * p + k] = s * hki + c * hkj;
                }
                h[i * p + i] = hii - t * hij;
                h[j * p + j] = hjj + t * hij;
                h[i * p + j] = h[j * p + i] = 0;
            }
    }
    *lo = *hi = h[0];
    for (size_t i = 1; i < p; i++) {
        double d = h[i * p + i];
        if (d < *lo) *lo = d;
        if (d > *hi) *hi = d;
    }
}

/* The extreme Ritz values of the orthonormal block x [n, BLOCK] (first p columns) with z = g x:
 * the eigenvalues of x^T g x = x^T z [p, p] (into h). */
static void ritz(const double *x, const double *z, size_t n, size_t p, double *h, double *lo, double *hi) {
    for (size_t a = 0; a < p; a++)
        for (size_t b = a; b < p; b++) {
            double v = 0.0;
            for (size_t i = 0; i < n; i++) v += x[i * BLOCK + a] * z[i * BLOCK + b];
            h[a * p + b] = h[b * p + a] = v;
        }
    sym_extremes(h, p, lo, hi);
}

/* One filter step of the three-term recurrence: y_next = c1 * (g y) + c0 * y + cm * y_prev, with
 * gy = g y given; written into y_prev (which it replaces). */
static void filter_step(double *y_prev, const double *y, const double *gy, size_t n, double c1, double c0, double cm) {
    for (size_t i = 0; i < n * BLOCK; i++) y_prev[i] = c1 * gy[i] + c0 * y[i] + cm * y_prev[i];
}

/* Chebyshev-filtered subspace iteration on the symmetric positive semi-definite g [n, n] (full,
 * both triangles), on a block of p <= 8 orthonormal vectors. Each round: z = g x, the Ritz
 * values of x (top one: the estimate; stop when it moves by <= tol relative), then x becomes
 * C_d(g) x, orthonormalised: C_d is the Chebyshev polynomial of degree CHEB_DEGREE mapped onto
 * [0, mu], mu the smallest Ritz value of the block, so eigenvalues below mu are damped (|C| <= 1)
 * and the top one grows like cosh(d acosh(2 l1/mu - 1)) instead of (l1/mu)^d for d plain
 * products. Where the filter would not help (mu not below the top value, or g of low rank:
 * mu ~ 0) the round is d plain products scaled by the estimate. r->products counts the products
 * of g with the block (at most max_iter). Returns the top eigenvalue estimate, NAN when out of
 * memory. */
enum { CHEB_DEGREE = 6 };

static double power_sym(const double *g, size_t n, int max_iter, double tol, tsc_spectral_t *r) {
    size_t p = n < BLOCK ? n : BLOCK;
    double *x = calloc(3 * n * BLOCK + 2 * p * n + BLOCK * BLOCK, sizeof *x);
    if (!x) return NAN;
    double *z = x + n * BLOCK, *y = z + n * BLOCK, *v = y + n * BLOCK, *q = v + p * n, *h = q + p * n;
    /* A fixed irregular start, unlikely to be orthogonal to the top eigenvector. */
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < p; c++) x[i * BLOCK + c] = (double)(((i * BLOCK + c) * 7919u) % 1013u) / 1013.0 - 0.5;
    orthonormalize(x, n, p, v, q);
    double lam = 0.0;
    int it = 0;
    r->converged = 0;
    while (it < max_iter) {
        gram_times_block(g, n, x, z);
        it++;
        double prev = lam, mu;
        ritz(x, z, n, p, h, &mu, &lam);
        if (fabs(lam - prev) <= tol * fabs(lam)) {
            r->converged = 1;
            break;
        }
        if (it >= max_iter) break;
        /* y_prev = x (in y), y = z scaled: degree 1; then the recurrence, one product each */
        int cheb = p > 1 && mu > 1e-2 * lam && mu < lam * (1 - 1e-9);
        double a = cheb ? 2.0 / mu : 1.0 / lam, b = cheb ? -1.0 : 0.0; /* t = a g + b: [0, mu] -> [-1, 1] */
        memcpy(y, x, n * BLOCK * sizeof *x);
        filter_step(y, x, z, n, a, b, 0.0); /* y = t x: degree 1 (in y; x keeps degree 0) */
        double *yp = x, *yc = y;
        for (int d = 2; d <= CHEB_DEGREE && it < max_iter; d++, it++) {
            gram_times_block(g, n, yc, z);
            filter_step(yp, yc, z, n, cheb ? 2 * a : a, cheb ? 2 * b : b, cheb ? -1.0 : 0.0); /* 2 t y - y_prev */
            double *t = yp;
            yp = yc, yc = t;
        }
        orthonormalize(yc, n, p, v, q);
        if (yc != x) memcpy(x, yc, n * BLOCK * sizeof *x);
    }
    free(x);
    r->products = it;
    return lam > 0 ? lam : 0.0;
}

tsc_status_t tsc_spectral_norm_with(const float *wf, const double *wd, size_t rows, size_t cols, int max_products,
                                    double tol, tsc_spectral_t *out) {
    if ((!wf) == (!wd) || !out || rows == 0 || cols == 0)
        return tsc_error_set(TSC_ERR_ARG, "spectral norm: empty matrix [%zu, %zu] or NULL", rows, cols);
    size_t k, m;
    double *a = malloc(rows * cols * sizeof *a), *g = NULL;
    int finite = a && smaller_side(wf, wd, rows, cols, a, &k, &m);
    if (a && finite) g = malloc(k * k * sizeof *g);
    if (!a || (finite && !g)) {
        free(a);
        return tsc_error_set(TSC_ERR_NOMEM, "spectral norm: no memory for [%zu, %zu] and its Gram matrix", rows, cols);
    }
    *out = (tsc_spectral_t){NAN, 0, 0};
    if (finite) gram_rows(a, k, m, g);
    free(a);
    for (size_t i = 0; finite && i < k * k; i++) finite = isfinite(g[i]) != 0; /* a double w near DBL_MAX */
    if (!finite) {
        free(g);
        return TSC_OK;
    }
    double lam = power_sym(g, k, max_products, tol, out);
    free(g);
    if (isnan(lam)) return tsc_error_set(TSC_ERR_NOMEM, "spectral norm: no memory for the iterate [%zu, %d]", k, BLOCK);
    out->norm = sqrt(lam);
    return TSC_OK;
}

tsc_status_t tsc_spectral_norm_f32(const float *w, size_t rows, size_t cols, tsc_spectral_t *out) {
    return tsc_spectral_norm_with(w, NULL, rows, cols, TSC_SPECTRAL_MAX_PRODUCTS, TSC_SPECTRAL_TOL, out);
}

tsc_status_t tsc_spectral_norm_f64(const double *w, size_t rows, size_t cols, tsc_spectral_t *out) {
    return tsc_spectral_norm_with(NULL, w, rows, cols, TSC_SPECTRAL_MAX_PRODUCTS, TSC_SPECTRAL_TOL, out);
}
