/* linalg.c: cosine similarities, Gram-matrix SVD of rank-1 stacks, spectral norms (tsc_linalg.h). */
#include "tsc_linalg.h"

#include "blas_internal.h"
#include "cpu_internal.h"

#include <cblas.h>
#include <dlfcn.h>
#include <lapacke.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

static double dot(const double *x, const double *y, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += x[i] * y[i];
    return s;
}

void tsc_linalg_cosine_matrix(const double *x, size_t n, size_t dim, double *out) {
    for (size_t i = 0; i < n; i++) {
        double ni = sqrt(dot(x + i * dim, x + i * dim, dim));
        for (size_t j = i; j < n; j++) {
            double nj = sqrt(dot(x + j * dim, x + j * dim, dim));
            double c = (ni > 0 && nj > 0) ? dot(x + i * dim, x + j * dim, dim) / (ni * nj) : 0.0;
            out[i * n + j] = out[j * n + i] = c;
        }
    }
}

void tsc_linalg_rank1_gram(const double *a, size_t da, const double *b, size_t db, size_t n,
                           double *g) {
    for (size_t i = 0; i < n; i++)
        for (size_t j = i; j < n; j++) {
            double v = dot(a + i * da, a + j * da, da) * dot(b + i * db, b + j * db, db);
            g[i * n + j] = g[j * n + i] = v;
        }
}

void tsc_linalg_rank1_cosine(const double *a, size_t da, const double *b, size_t db, size_t n,
                             double *out) {
    tsc_linalg_rank1_gram(a, da, b, db, n, out);
    /* Normalise in place: cos = g_ij / sqrt(g_ii g_jj); the diagonal is read before it is set. */
    double *d = malloc(n * sizeof *d);
    if (d) {
        for (size_t i = 0; i < n; i++) d[i] = sqrt(out[i * n + i]);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++)
                out[i * n + j] = (d[i] > 0 && d[j] > 0) ? out[i * n + j] / (d[i] * d[j]) : 0.0;
        free(d);
    } else {
        /* No scratch: normalise via the factors directly (slower, same values). */
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) {
                double na = sqrt(dot(a + i * da, a + i * da, da) * dot(a + j * da, a + j * da, da));
                double nb = sqrt(dot(b + i * db, b + i * db, db) * dot(b + j * db, b + j * db, db));
                out[i * n + j] = (na > 0 && nb > 0) ? out[i * n + j] / (na * nb) : 0.0;
            }
    }
}

/* Looked up at run time, so any BLAS (reference, OpenBLAS, BLIS) links. */
static void blas_one_thread(void) {
    void (*set)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
    if (set) set(1);
}
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
void tsc_blas_one_thread(void) { pthread_once(&blas_once, blas_one_thread); }

#define BLAS_BUFFER_BYTES ((size_t)144 << 20) /* OpenBLAS's 128 MiB buffer and its alignment slack */

tsc_status_t tsc_blas_headroom(int nthreads) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return TSC_OK;
    size_t need = BLAS_BUFFER_BYTES * (size_t)(nthreads > 0 ? nthreads : 1);
    void *p = mmap(NULL, need, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return tsc_error_set(TSC_ERR_NOMEM, "the address-space limit (ulimit -v, %llu MiB) leaves no room for the "
                             "BLAS work buffers (%zu MiB for %d thread(s)); raise the limit or set "
                             "OMP_NUM_THREADS lower", (unsigned long long)(rl.rlim_cur >> 20), need >> 20, nthreads);
    munmap(p, need);
    return TSC_OK;
}

tsc_status_t tsc_linalg_singular_values(const double *a, size_t m, size_t n, double *s) {
    if (!a || !s || m == 0 || n == 0)
        return tsc_error_set(TSC_ERR_ARG, "singular values: empty matrix [%zu, %zu] or NULL", m, n);
    double *w = malloc(m * n * sizeof *w);
    if (!w) return tsc_error_set(TSC_ERR_NOMEM, "singular values: no memory for a [%zu, %zu] copy", m, n);
    memcpy(w, a, m * n * sizeof *w);
    tsc_blas_one_thread();
    /* Row-major a [m, n] is column-major a^T [n, m]: same singular values, and LAPACKE need not
     * transpose a copy. */
    lapack_int info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', (lapack_int)n, (lapack_int)m, w,
                                     (lapack_int)n, s, NULL, 1, NULL, 1);
    free(w);
    if (info != 0)
        return tsc_error_set(TSC_ERR_EXTERNAL, "LAPACKE_dgesdd on a [%zu, %zu] matrix failed: info %d",
                             m, n, (int)info);
    return TSC_OK;
}

tsc_status_t tsc_linalg_rank1_svd(const double *a, size_t da, const double *b, size_t db, size_t n,
                                  double *s, double *u1) {
    if (!a || !b || !s || n == 0 || da == 0 || db == 0)
        return tsc_error_set(TSC_ERR_ARG, "rank-1 SVD: empty stack (n %zu, da %zu, db %zu) or NULL", n, da, db);
    double *g = malloc(n * n * sizeof *g), *ev = malloc(n * sizeof *ev);
    if (!g || !ev) {
        free(g);
        free(ev);
        return tsc_error_set(TSC_ERR_NOMEM, "rank-1 SVD: no memory for a %zu x %zu Gram matrix", n, n);
    }
    tsc_linalg_rank1_gram(a, da, b, db, n, g);
    tsc_blas_one_thread();
    lapack_int info = LAPACKE_dsyev(LAPACK_ROW_MAJOR, u1 ? 'V' : 'N', 'U', (lapack_int)n, g,
                                    (lapack_int)n, ev);
    if (info != 0) {
        free(g);
        free(ev);
        return tsc_error_set(TSC_ERR_EXTERNAL, "LAPACKE_dsyev on a %zu x %zu Gram matrix failed: info %d",
                             n, n, (int)info);
    }
    /* dsyev gives ascending eigenvalues; tiny negative ones are rounding of zero. */
    for (size_t i = 0; i < n; i++) {
        double e = ev[n - 1 - i];
        s[i] = e > 0 ? sqrt(e) : 0.0;
    }
    if (u1) {
        /* Eigenvectors are the columns of g (row-major): the top one is column n-1. */
        size_t imax = 0;
        for (size_t i = 0; i < n; i++) {
            u1[i] = g[i * n + (n - 1)];
            if (fabs(u1[i]) > fabs(u1[imax])) imax = i;
        }
        if (u1[imax] < 0)
            for (size_t i = 0; i < n; i++) u1[i] = -u1[i];
    }
    free(g);
    free(ev);
    return TSC_OK;
}

double tsc_linalg_top_energy(const double *s, size_t n) {
    double t = 0.0;
    for (size_t i = 0; i < n; i++) t += s[i] * s[i];
    return (n && t > 0) ? s[0] * s[0] / t : 0.0;
}

double tsc_linalg_effective_rank(const double *s, size_t n) {
    double t = 0.0, h = 0.0;
    for (size_t i = 0; i < n; i++) t += s[i] * s[i];
    if (!(t > 0)) return 0.0;
    for (size_t i = 0; i < n; i++) {
        double p = s[i] * s[i] / t;
        if (p > 0) h -= p * log(p);
    }
    return exp(h);
}

double tsc_linalg_rank1_projection(const double *g, const double *c, const double *u1, double s1,
                                   size_t n, double *norm) {
    double proj = 0.0;
    for (size_t i = 0; i < n; i++) proj += c[i] * u1[i];
    if (norm) {
        double q = 0.0;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) q += c[i] * g[i * n + j] * c[j];
        *norm = q > 0 ? sqrt(q) : 0.0;
    }
    return s1 * proj;
}

/* The Gram matrix of the smaller side of w in double: g = w^T w [cols, cols] when cols <= rows,
 * else w w^T [rows, rows] (BLAS dsyrk, upper triangle). Both have the squared singular values of
 * w (the larger one's extra eigenvalues are 0). Returns g (caller frees) or NULL; *n its order;
 * *finite 0 when w holds NaN/Inf (g is then left unset). */
static double *gram_of(const float *w, size_t rows, size_t cols, size_t *n, int *finite) {
    double *wd = malloc(rows * cols * sizeof *wd);
    size_t k = cols <= rows ? cols : rows;
    double *g = malloc(k * k * sizeof *g);
    if (!wd || !g) {
        free(wd), free(g);
        return NULL;
    }
    int ok = 1;
    for (size_t i = 0; i < rows * cols; i++) {
        wd[i] = w[i];
        ok &= isfinite(w[i]) != 0;
    }
    *finite = ok;
    if (!ok) { /* no Gram matrix of NaN/Inf: LAPACK refuses it */
        free(wd);
        *n = k;
        return g;
    }
    tsc_blas_one_thread();
    if (cols <= rows) /* g = wd^T wd */
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)cols, (int)rows, 1.0, wd, (int)cols, 0.0, g, (int)cols);
    else /* g = wd wd^T */
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)rows, (int)cols, 1.0, wd, (int)cols, 0.0, g, (int)rows);
    free(wd);
    for (size_t i0 = 0; i0 < k; i0 += 32) /* mirror the upper triangle (the power steps read full rows), */
        for (size_t j0 = 0; j0 <= i0; j0 += 32) /* by 32 x 32 tiles */
            for (size_t i = i0; i < i0 + 32 && i < k; i++)
                for (size_t j = j0; j < j0 + 32 && j < i; j++) g[i * k + j] = g[j * k + i];
    *n = k;
    return g;
}

/* Subspace iteration on the Gram matrix works on blocks of p <= 8 vectors, stored row-major
 * [n, 8] (unused columns 0), so one row of a block is one AVX-512 vector. */
enum { BLOCK = 8 };

/* y = g x for [n, BLOCK] blocks, four rows of g at a time: each row of x, read once per four
 * rows, feeds four accumulators, and g is streamed once (twice as fast as BLAS dsymm/dgemm for
 * this shape, which repack g on every call). */
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

/* Orthonormal columns for the first p columns of blk [n, BLOCK] (row-major), in place, through a
 * column-major copy cm [n, p]: Householder QR (dgeqrf + dorgqr) stays orthonormal even when blk
 * is rank-deficient (g of low rank). */
static void orthonormalize(double *blk, size_t n, size_t p, double *cm, double *tau) {
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < p; c++) cm[c * n + i] = blk[i * BLOCK + c];
    LAPACKE_dgeqrf(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)p, cm, (lapack_int)n, tau);
    LAPACKE_dorgqr(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)p, (lapack_int)p, cm, (lapack_int)n, tau);
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < p; c++) blk[i * BLOCK + c] = cm[c * n + i];
}

/* The largest Ritz value of the orthonormal block x [n, BLOCK] (first p columns) with z = g x:
 * the eigenvalues of h = x^T z [p, p] (ascending into ev). Returns 0 when LAPACK fails. */
static int ritz(const double *x, const double *z, size_t n, size_t p, double *h, double *ev) {
    for (size_t a = 0; a < p; a++) /* h = x^T z, symmetric: x^T g x */
        for (size_t b = a; b < p; b++) {
            double v = 0.0;
            for (size_t i = 0; i < n; i++) v += x[i * BLOCK + a] * z[i * BLOCK + b];
            h[a * p + b] = h[b * p + a] = v;
        }
    return LAPACKE_dsyev(LAPACK_COL_MAJOR, 'N', 'U', (lapack_int)p, h, (lapack_int)p, ev) == 0;
}

/* One filter step of the three-term recurrence: y_next = c1 * (g y) + c0 * y + cm * y_prev, with
 * gy = g y given; written into y_prev (which it replaces). */
static void filter_step(double *y_prev, const double *y, const double *gy, size_t n, double c1, double c0, double cm) {
    for (size_t i = 0; i < n * BLOCK; i++) y_prev[i] = c1 * gy[i] + c0 * y[i] + cm * y_prev[i];
}

/* Chebyshev-filtered subspace iteration on the symmetric positive semi-definite g [n, n] (full,
 * both triangles), on a block of p <= 8 orthonormal vectors. Each round: z = g x, the Rayleigh-Ritz
 * values of x (top one: the estimate, stop when it moves by <= tol relative), then x becomes
 * C_d(g) x, orthonormalised: C_d is the Chebyshev polynomial of degree CHEB_DEGREE mapped onto
 * [0, mu], mu the smallest Ritz value of the block, so eigenvalues below mu are damped (|C| <= 1)
 * and the top one grows like cosh(d acosh(2 l1/mu - 1)) instead of (l1/mu)^d for d plain
 * products. Random weights have clustered top singular values (s2/s1 up to 0.99999 in a
 * GPT-2-sized synth dump): the block makes the rate depend on l_{p+1}/l_1, the filter on its
 * square root; a 768 x 768 Gram matrix needs ~30 products of g with the block for 1e-10, where
 * plain block power iteration needed ~110. Where the filter would not help (mu not below the top
 * value, or g of low rank: mu ~ 0) the round is d plain products scaled by the estimate.
 * *iters counts the products of g with the block (at most max_iter). Returns NAN when out of memory. */
enum { CHEB_DEGREE = 6 };

static double power_sym(const double *g, size_t n, int max_iter, double tol, int *iters) {
    size_t p = n < BLOCK ? n : BLOCK;
    double *x = calloc(4 * n * BLOCK + BLOCK * BLOCK + 2 * BLOCK, sizeof *x);
    if (!x) return NAN;
    double *z = x + n * BLOCK, *y = z + n * BLOCK, *cm = y + n * BLOCK, *h = cm + n * BLOCK, *ev = h + BLOCK * BLOCK,
           *tau = ev + BLOCK;
    /* A fixed irregular start, unlikely to be orthogonal to the top eigenvector. */
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < p; c++) x[i * BLOCK + c] = (double)(((i * BLOCK + c) * 7919u) % 1013u) / 1013.0 - 0.5;
    orthonormalize(x, n, p, cm, tau);
    double lam = 0.0;
    int it = 0;
    while (it < max_iter) {
        gram_times_block(g, n, x, z);
        it++;
        if (!ritz(x, z, n, p, h, ev)) break;
        double prev = lam, mu = ev[0];
        lam = ev[p - 1];
        if (fabs(lam - prev) <= tol * fabs(lam) || it >= max_iter) break;
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
        orthonormalize(yc, n, p, cm, tau);
        if (yc != x) memcpy(x, yc, n * BLOCK * sizeof *x);
    }
    free(x);
    if (iters) *iters = it;
    return lam > 0 ? lam : 0.0;
}

/* LAPACK's largest eigenvalue of the symmetric, full g [n, n] (dsyevr, asked for the top one
 * only), as a norm: sqrt, 0 when not positive. dsyevr may return more than the one eigenvalue
 * asked for when the top one is repeated (identity, permutation or zero weights: all equal), so
 * w and isuppz have room for all n. g is overwritten. */
static tsc_status_t lapack_top_eigenvalue(double *g, size_t n, double *out) {
    double *ev = malloc(n * sizeof *ev);
    lapack_int *isuppz = malloc(2 * n * sizeof *isuppz), found = 0;
    if (!ev || !isuppz) {
        free(ev), free(isuppz);
        return tsc_error_set(TSC_ERR_NOMEM, "spectral norm: no memory for %zu eigenvalues", n);
    }
    /* g is symmetric and full: column-major is the same matrix, and LAPACKE copies nothing */
    lapack_int info = LAPACKE_dsyevr(LAPACK_COL_MAJOR, 'N', 'I', 'U', (lapack_int)n, g, (lapack_int)n, 0.0, 0.0,
                                     (lapack_int)n, (lapack_int)n, 0.0, &found, ev, NULL, 1, isuppz);
    if (info != 0 || found < 1 || (size_t)found > n) {
        free(ev), free(isuppz);
        return tsc_error_set(TSC_ERR_EXTERNAL, "LAPACKE_dsyevr on a %zu x %zu Gram matrix failed: info %d, %d found",
                             n, n, (int)info, (int)found);
    }
    double top = ev[0]; /* the largest of those found */
    for (lapack_int i = 1; i < found; i++)
        if (ev[i] > top) top = ev[i];
    *out = top > 0 ? sqrt(top) : 0.0;
    free(ev), free(isuppz);
    return TSC_OK;
}

tsc_status_t tsc_linalg_spectral_norm(const float *w, size_t rows, size_t cols, int max_iter, double tol,
                                      double *power, int *iters, double *lapack) {
    if (!w || !power || rows == 0 || cols == 0)
        return tsc_error_set(TSC_ERR_ARG, "spectral norm: empty matrix [%zu, %zu] or NULL", rows, cols);
    size_t n;
    int finite;
    double *g = gram_of(w, rows, cols, &n, &finite);
    if (!g) return tsc_error_set(TSC_ERR_NOMEM, "spectral norm: no memory for [%zu, %zu] and its Gram matrix", rows, cols);
    if (!finite) {
        free(g);
        *power = NAN;
        if (lapack) *lapack = NAN;
        if (iters) *iters = 0;
        return TSC_OK;
    }
    double lam = power_sym(g, n, max_iter, tol, iters);
    if (isnan(lam)) {
        free(g);
        return tsc_error_set(TSC_ERR_NOMEM, "spectral norm: no memory for the power iterate [%zu]", n);
    }
    *power = sqrt(lam);
    if (lapack) {
        tsc_status_t st = lapack_top_eigenvalue(g, n, lapack);
        if (st != TSC_OK) {
            free(g);
            return st;
        }
    }
    free(g);
    return TSC_OK;
}

tsc_status_t tsc_linalg_spectral_norm_power(const float *w, size_t rows, size_t cols, int max_iter,
                                            double tol, double *out, int *iters) {
    return tsc_linalg_spectral_norm(w, rows, cols, max_iter, tol, out, iters, NULL);
}

tsc_status_t tsc_linalg_spectral_norm_lapack(const float *w, size_t rows, size_t cols, double *out) {
    if (!w || !out || rows == 0 || cols == 0)
        return tsc_error_set(TSC_ERR_ARG, "spectral norm: empty matrix [%zu, %zu] or NULL", rows, cols);
    size_t k = rows < cols ? rows : cols;
    double *a = malloc(rows * cols * sizeof *a), *s = malloc(k * sizeof *s);
    if (!a || !s) {
        free(a);
        free(s);
        return tsc_error_set(TSC_ERR_NOMEM, "spectral norm: no memory for [%zu, %zu]", rows, cols);
    }
    for (size_t i = 0; i < rows * cols; i++) a[i] = w[i];
    tsc_status_t st = tsc_linalg_singular_values(a, rows, cols, s);
    if (st == TSC_OK) *out = s[0];
    free(a);
    free(s);
    return st;
}
