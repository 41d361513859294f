/* tsc_linalg.h: the linear algebra of the gradient-error analysis (docs/MECHANISM.md §4): cosine
 * similarity of rank-1 terms, singular values of stacked rank-1 terms (energy of the top
 * direction, effective rank, projection of the accumulated error on the top direction). The
 * spectral norms of analysis.h5 are not computed here: the analysis and the trainer share one
 * definition in kernels/ (not exported).
 *
 * A rank-1 term is t_i = a_i b_i^T (a_i = (PK)[T] of length da, b_i = X[T] of length db).
 * Stacking vec(t_i) as the rows of M [n, da*db] would need n*da*db numbers; because
 * <vec(a_i b_i^T), vec(a_j b_j^T)> = (a_i.a_j)(b_i.b_j), everything here works on the n x n Gram
 * matrix G = M M^T instead (memory O(n^2 + n*(da+db))): M's singular values are the square roots
 * of G's eigenvalues, and M's top left singular vector is G's top eigenvector.
 *
 *   double cos[3 * 3], s[3], u1[3];
 *   tsc_linalg_rank1_cosine(a, 4, b, 5, 3, cos);          // a [3, 4], b [3, 5]
 *   tsc_linalg_rank1_svd(a, 4, b, 5, 3, s, u1);           // s descending
 *   double e = tsc_linalg_top_energy(s, 3), r = tsc_linalg_effective_rank(s, 3);
 *
 * Failure contract: functions returning tsc_status_t return TSC_ERR_ARG for a NULL pointer or an
 * empty shape, TSC_ERR_NOMEM when scratch memory cannot be allocated and TSC_ERR_EXTERNAL when
 * LAPACK reports an error (info code in the message); outputs are then unspecified.
 */
#ifndef TSC_LINALG_H
#define TSC_LINALG_H

#include "tsc_export.h"

#include <stddef.h>

#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Cosine similarity of the rows of x: out[i, j] = x_i.x_j / (|x_i| |x_j|); 0 where a row is 0.
 * x [n, dim] double row-major; out [n, n]. */
TSC_API void tsc_linalg_cosine_matrix(const double *x, size_t n, size_t dim, double *out);

/* Cosine similarity of the flattened rank-1 terms a_i b_i^T:
 * out[i, j] = (a_i.a_j)(b_i.b_j) / (|a_i||a_j||b_i||b_j|). a [n, da], b [n, db], out [n, n]. */
TSC_API void tsc_linalg_rank1_cosine(const double *a, size_t da, const double *b, size_t db, size_t n,
                             double *out);

/* Gram matrix of the flattened rank-1 terms: g[i, j] = (a_i.a_j)(b_i.b_j). g [n, n]. */
TSC_API void tsc_linalg_rank1_gram(const double *a, size_t da, const double *b, size_t db, size_t n,
                           double *g);

/* Singular values (descending) of a general matrix a [m, n] row-major (LAPACKE_dgesdd, values
 * only). s [min(m, n)]. a is not modified. */
TSC_API tsc_status_t tsc_linalg_singular_values(const double *a, size_t m, size_t n, double *s);

/* Singular values (descending) of the stacked rank-1 terms (rows vec(a_i b_i^T)), from the
 * eigenvalues of their Gram matrix (LAPACKE_dsyev). s [n]; u1 [n] (may be NULL): the top left
 * singular vector, sign chosen so that its largest-magnitude entry is positive. */
TSC_API tsc_status_t tsc_linalg_rank1_svd(const double *a, size_t da, const double *b, size_t db, size_t n,
                                  double *s, double *u1);

/* Energy share of the top direction: s[0]^2 / sum s^2 (0 when all are 0). s [n] descending. */
TSC_API double tsc_linalg_top_energy(const double *s, size_t n);

/* Effective rank: exp(H), H the entropy of p_i = s_i^2 / sum s^2 (1 for rank one, n for n equal
 * singular values; 0 when all are 0). s [n]. */
TSC_API double tsc_linalg_effective_rank(const double *s, size_t n);

/* Projection of the accumulated error E = sum_i c_i vec(a_i b_i^T) on the top right singular
 * direction v1 of the stack: <E, v1> = s1 * sum_i c_i u1_i. Also |E| = sqrt(c^T G c) through
 * *norm (may be NULL). g [n, n] the Gram matrix, c [n], u1 [n]. */
TSC_API double tsc_linalg_rank1_projection(const double *g, const double *c, const double *u1, double s1,
                                   size_t n, double *norm);

#ifdef __cplusplus
}
#endif
#endif
