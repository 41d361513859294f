/* linalg.c: cosine similarities, Gram-matrix SVD of rank-1 stacks (tsc_linalg.h); BLAS kept to one
 * thread (blas_internal.h). */
#include "tsc_linalg.h"

#include "blas_internal.h"

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
