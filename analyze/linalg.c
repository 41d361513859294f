/* linalg.c: cosine similarities, Gram-matrix SVD of rank-1 stacks, spectral norms (tsc_linalg.h). */
#include "tsc_linalg.h"

#include "simd_internal.h"

#include <dlfcn.h>
#include <lapacke.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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

/* The analysis runs heads in parallel on OpenMP threads; an OpenBLAS that also starts its own
 * threads for each LAPACK call oversubscribes the cores (a third of diagnose's time was spent
 * spinning in OpenBLAS's thread pool). So BLAS runs single-threaded inside tilescope. Looked up at
 * run time, so any BLAS (reference, OpenBLAS, BLIS) links. */
static void blas_one_thread(void) {
    void (*set)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
    if (set) set(1);
}
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

tsc_status_t tsc_linalg_singular_values(const double *a, size_t m, size_t n, double *s) {
    if (!a || !s || m == 0 || n == 0)
        return tsc_error_set(TSC_ERR_ARG, "singular values: empty matrix [%zu, %zu] or NULL", m, n);
    double *w = malloc(m * n * sizeof *w);
    if (!w) return tsc_error_set(TSC_ERR_NOMEM, "singular values: no memory for a [%zu, %zu] copy", m, n);
    memcpy(w, a, m * n * sizeof *w);
    pthread_once(&blas_once, blas_one_thread);
    lapack_int info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'N', (lapack_int)m, (lapack_int)n, w,
                                     (lapack_int)n, s, NULL, (lapack_int)m, NULL, (lapack_int)n);
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
    pthread_once(&blas_once, blas_one_thread);
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

/* The two products of a power step. Most of the analysis time of a GPT-2-sized dump goes here
 * (random weights have clustered top singular values, so the iteration runs to its cap), so they
 * are compiled for AVX-512 and AVX2 too; `omp simd` lets the row sums reassociate into vector
 * lanes. Results differ from a sequential sum only by rounding. */
TSC_SIMD_CLONES
static void power_matvec(const double *w, size_t rows, size_t cols, const double *v, double *u) {
    for (size_t i = 0; i < rows; i++) { /* u = W v */
        const double *wr = w + i * cols;
        double s = 0.0;
#pragma omp simd reduction(+ : s)
        for (size_t j = 0; j < cols; j++) s += wr[j] * v[j];
        u[i] = s;
    }
}

TSC_SIMD_CLONES
static void power_matvec_t(const double *w, size_t rows, size_t cols, const double *u, double *v) {
    /* v = W^T u, by blocks of 256 columns (a block of v stays in cache) */
    for (size_t j0 = 0; j0 < cols; j0 += 256) {
        size_t j1 = j0 + 256 < cols ? j0 + 256 : cols;
        for (size_t j = j0; j < j1; j++) v[j] = 0.0;
        for (size_t i = 0; i < rows; i++) {
            const double *wr = w + i * cols;
            double ui = u[i];
#pragma omp simd
            for (size_t j = j0; j < j1; j++) v[j] += wr[j] * ui;
        }
    }
}

tsc_status_t tsc_linalg_spectral_norm_power(const float *w, size_t rows, size_t cols, int max_iter,
                                            double tol, double *out, int *iters) {
    if (!w || !out || rows == 0 || cols == 0)
        return tsc_error_set(TSC_ERR_ARG, "spectral norm: empty matrix [%zu, %zu] or NULL", rows, cols);
    double *v = malloc(cols * sizeof *v), *u = malloc(rows * sizeof *u), *wd = malloc(rows * cols * sizeof *wd);
    if (!v || !u || !wd) {
        free(v), free(u), free(wd);
        return tsc_error_set(TSC_ERR_NOMEM, "spectral norm: no memory for [%zu, %zu]", rows, cols);
    }
    for (size_t i = 0; i < rows * cols; i++) wd[i] = w[i];
    if (rows * 4 <= cols) {
        /* A wide matrix (a head's rows of w_q): power iteration on the small Gram matrix
         * G = W W^T [rows, rows], whose top eigenvalue is sigma^2; same iteration, far cheaper. */
        double *g = malloc(rows * rows * sizeof *g);
        if (!g) {
            free(v), free(u), free(wd);
            return tsc_error_set(TSC_ERR_NOMEM, "spectral norm: no memory for a %zu x %zu Gram matrix", rows, rows);
        }
        for (size_t i = 0; i < rows; i++)
            for (size_t k = i; k < rows; k++) g[i * rows + k] = g[k * rows + i] = dot(wd + i * cols, wd + k * cols, cols);
        double *x = u, *y = v; /* both have >= rows entries */
        for (size_t i = 0; i < rows; i++) x[i] = 1.0 + 0.01 * (double)((i * 7919u) % 101u) / 101.0;
        double nx = sqrt(dot(x, x, rows)), lam = 0.0;
        for (size_t i = 0; i < rows; i++) x[i] /= nx;
        int it = 0;
        for (it = 1; it <= max_iter; it++) {
            for (size_t i = 0; i < rows; i++) y[i] = dot(g + i * rows, x, rows);
            double ny = sqrt(dot(y, y, rows)), prev = lam;
            if (ny == 0.0) {
                lam = 0.0;
                break;
            }
            for (size_t i = 0; i < rows; i++) x[i] = y[i] / ny;
            lam = ny; /* |G x| with |x| = 1 -> lambda_max = sigma^2 */
            if (fabs(lam - prev) <= tol * lam) break;
        }
        free(g), free(v), free(u), free(wd);
        *out = sqrt(lam);
        if (iters) *iters = it > max_iter ? max_iter : it;
        return TSC_OK;
    }
    /* A fixed start that is unlikely to be orthogonal to the top right singular vector: all
     * ones plus a small deterministic irregular part. */
    for (size_t j = 0; j < cols; j++) v[j] = 1.0 + 0.01 * (double)((j * 7919u) % 101u) / 101.0;
    double nv = sqrt(dot(v, v, cols));
    for (size_t j = 0; j < cols; j++) v[j] /= nv;
    double sigma = 0.0;
    int it = 0;
    for (it = 1; it <= max_iter; it++) {
        power_matvec(wd, rows, cols, v, u);
        double nu = sqrt(dot(u, u, rows));
        if (nu == 0.0) {
            sigma = 0.0;
            break;
        }
        for (size_t i = 0; i < rows; i++) u[i] /= nu;
        power_matvec_t(wd, rows, cols, u, v); /* v = W^T u_hat; |v| -> sigma_max */
        double nw = sqrt(dot(v, v, cols)); /* = |W^T u_hat| -> sigma_max */
        for (size_t j = 0; j < cols; j++) v[j] /= nw;
        double prev = sigma;
        sigma = nw;
        if (fabs(sigma - prev) <= tol * sigma) break;
    }
    free(v), free(u), free(wd);
    *out = sigma;
    if (iters) *iters = it > max_iter ? max_iter : it;
    return TSC_OK;
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
