/* spectral_internal.h: the spectral norm (largest singular value) of a weight matrix, the one
 * definition of the number that the trainer writes (wq_norms.csv, log.csv's wq_sn_L) and the
 * analysis writes (analysis.h5's w_norm and wq_head_norm, summary.json's spectral_norm), so a
 * captured step's W^Q gives the same value in both (kernels/spectral.c). Private to the layers
 * that link kernels/' objects (kernels/, train/, analyze/): not exported from libtilescope.so.
 *
 *   tsc_spectral_t r;
 *   tsc_spectral_norm_f32(w, rows, cols, &r);           // w [rows, cols] float row-major
 *   if (r.converged) printf("%.17g after %d products\n", r.norm, r.products);
 *
 * Method: Chebyshev-filtered block subspace (power) iteration on the Gram matrix of w's smaller
 * side in double (spectral.c has the details), stopped when the estimate moves by less than
 * TSC_SPECTRAL_TOL relative or after TSC_SPECTRAL_MAX_PRODUCTS products of the Gram matrix with
 * the block. No BLAS or LAPACK: every sum runs in a fixed order written out in spectral.c
 * (compiled without contraction of a·b + c), so a matrix gives the same bits on every machine,
 * for any thread count and either compiler, as the trainer's logs must. Agreement with LAPACK
 * (dgesdd on w, dsyevr on the Gram matrix) is what tests/kernels/test_spectral.c checks: within
 * 1e-9 relative, about 1e-13 observed on GPT-2-sized random weights.
 *
 * Failure contract: TSC_ERR_ARG for a NULL pointer or an empty shape, TSC_ERR_NOMEM when the
 * scratch (one double copy of w, the Gram matrix, the block) cannot be allocated; *out is then
 * unspecified. A w holding NaN or Inf is not an error: norm NaN, products 0, converged 0. A zero
 * matrix gives 0 (converged).
 */
#ifndef TSC_SPECTRAL_INTERNAL_H
#define TSC_SPECTRAL_INTERNAL_H

#include <stddef.h>

#include "tsc_status.h"

/* The definition's settings. 1e-10: the estimate is then within ~1e-13 of LAPACK on GPT-2-sized
 * random weights (clustered top singular values, the slow case), which needs ~37 products at
 * 768 x 768; 1500 products: far above any case seen, a bound on the cost, not a setting. */
#define TSC_SPECTRAL_TOL 1e-10
enum { TSC_SPECTRAL_MAX_PRODUCTS = 1500 };

typedef struct {
    double norm;   /* the largest singular value of w; NaN when w holds NaN or Inf */
    int products;  /* products of the Gram matrix with the block that were taken */
    int converged; /* 1: the estimate settled (moved by < tol relative); 0: the product limit came
                      first (or w held NaN/Inf) */
} tsc_spectral_t;

/* The spectral norm of w [rows, cols] row-major, float or double. The float entry point converts
 * to double first, so tsc_spectral_norm_f32(w) and tsc_spectral_norm_f64 of the same values
 * converted give the same bits. */
tsc_status_t tsc_spectral_norm_f32(const float *w, size_t rows, size_t cols, tsc_spectral_t *out);
tsc_status_t tsc_spectral_norm_f64(const double *w, size_t rows, size_t cols, tsc_spectral_t *out);

/* The same iteration with other settings (tests: too few products is a planted fault their
 * LAPACK comparison must catch). Exactly one of wf, wd is non-NULL. */
tsc_status_t tsc_spectral_norm_with(const float *wf, const double *wd, size_t rows, size_t cols, int max_products,
                                    double tol, tsc_spectral_t *out);

#endif
