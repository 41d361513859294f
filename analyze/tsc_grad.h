/* tsc_grad.h: the gradient-error decomposition of docs/MECHANISM.md §4.
 *
 * Only delta differs between the hp and lp backward passes in the paper's experiment, so
 *   (1) dQ_hp - dQ_lp = alpha * diag(delta_lp - delta_hp) * (P K)                       [T, D]
 *   (2) dW^Q_hp - dW^Q_lp = alpha * sum_T (delta_lp - delta_hp)[T] * (PK)[T]^T X[T]      [D, C]
 * This module computes P K from q, k and lse (P = exp(alpha q k^T - lse), causal mask), checks
 * identity (1) with a residual, and builds the rank-1 sum (2). Everything is in double.
 *
 *   double pk[T * D];
 *   tsc_grad_pk(q, k, lse, T, D, alpha, 1, pk);
 *   tsc_grad_identity_t id;
 *   tsc_grad_identity_check(dq_hp, dq_lp, delta_hp, delta_lp, pk, T, D, alpha, &id);
 *   tsc_grad_dwq_error(coeff, pk, x, T, D, C, alpha, dw);   // coeff = delta_lp - delta_hp
 */
#ifndef TSC_GRAD_H
#define TSC_GRAD_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* pk = P K with P[t, s] = exp(alpha q_t.k_s - lse_t) for s <= t (causal) or all s.
 * q [T, D], k [T, D], lse [T] (natural log of the row sums of exp(alpha q k^T)), pk [T, D]. */
TSC_API void tsc_grad_pk(const double *q, const double *k, const double *lse, size_t T, size_t D,
                 double alpha, int causal, double *pk);

/* The check of identity (1) over T rows and D features. */
typedef struct {
    double max_abs_lhs;      /* max |dQ_hp - dQ_lp| */
    double max_abs_residual; /* max |(dQ_hp - dQ_lp) - alpha diag(delta_lp - delta_hp) PK| */
    double rel_residual;     /* max_abs_residual / max_abs_lhs (0 when the lhs is 0 and so is the residual) */
    int64_t argmax_residual; /* flat index t*D + d of the largest residual */
    int64_t n;               /* T * D elements compared */
} tsc_grad_identity_t;

/* dq_hp, dq_lp, pk [T, D]; delta_hp, delta_lp [T]. Returns TSC_ERR_ARG for NULL/empty. */
TSC_API tsc_status_t tsc_grad_identity_check(const double *dq_hp, const double *dq_lp, const double *delta_hp,
                                     const double *delta_lp, const double *pk, size_t T, size_t D,
                                     double alpha, tsc_grad_identity_t *out);

/* dw = alpha * sum_T coeff[T] * pk[T]^T x[T]: the error of one head's W^Q gradient, eq. (2).
 * coeff [T], pk [T, D], x [T, C], dw [D, C] (overwritten). One BLAS product (dgemm), so the
 * order of the additions is BLAS's. Returns TSC_ERR_ARG (NULL, empty shape), TSC_ERR_NOMEM
 * (it needs T x D doubles of scratch). */
TSC_API tsc_status_t tsc_grad_dwq_error(const double *coeff, const double *pk, const double *x, size_t T, size_t D,
                                size_t C, double alpha, double *dw);

#ifdef __cplusplus
}
#endif
#endif
