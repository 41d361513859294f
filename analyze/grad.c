/* grad.c: P K, identity (1) and the rank-1 sum (2) of docs/MECHANISM.md §4 (tsc_grad.h). */
#include "tsc_grad.h"

#include "blas_internal.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void tsc_grad_pk(const double *q, const double *k, const double *lse, size_t T, size_t D,
                 double alpha, int causal, double *pk) {
    for (size_t t = 0; t < T; t++) {
        double *row = pk + t * D;
        memset(row, 0, D * sizeof *row);
        size_t ns = causal ? t + 1 : T;
        for (size_t s = 0; s < ns; s++) {
            double dotp = 0.0;
            for (size_t d = 0; d < D; d++) dotp += q[t * D + d] * k[s * D + d];
            double p = exp(alpha * dotp - lse[t]);
            for (size_t d = 0; d < D; d++) row[d] += p * k[s * D + d];
        }
    }
}

tsc_status_t tsc_grad_identity_check(const double *dq_hp, const double *dq_lp, const double *delta_hp,
                                     const double *delta_lp, const double *pk, size_t T, size_t D,
                                     double alpha, tsc_grad_identity_t *out) {
    if (!dq_hp || !dq_lp || !delta_hp || !delta_lp || !pk || !out || T == 0 || D == 0)
        return tsc_error_set(TSC_ERR_ARG, "identity (1) check: NULL argument or empty shape [%zu, %zu]", T, D);
    out->max_abs_lhs = out->max_abs_residual = 0.0;
    out->argmax_residual = 0;
    out->n = (int64_t)(T * D);
    for (size_t t = 0; t < T; t++) {
        double c = alpha * (delta_lp[t] - delta_hp[t]);
        for (size_t d = 0; d < D; d++) {
            size_t i = t * D + d;
            double lhs = dq_hp[i] - dq_lp[i];
            double r = fabs(lhs - c * pk[i]);
            if (fabs(lhs) > out->max_abs_lhs) out->max_abs_lhs = fabs(lhs);
            if (r > out->max_abs_residual) {
                out->max_abs_residual = r;
                out->argmax_residual = (int64_t)i;
            }
        }
    }
    out->rel_residual = out->max_abs_lhs > 0 ? out->max_abs_residual / out->max_abs_lhs
                        : (out->max_abs_residual > 0 ? INFINITY : 0.0);
    return TSC_OK;
}

/* One product instead of T rank-1 updates: dw = (alpha diag(coeff) pk)^T x, by BLAS dgemm (a hot
 * spot on GPT-2-sized dumps: T x D x C per head; 8x faster than the rank-1 loop it replaced). */
tsc_status_t tsc_grad_dwq_error(const double *coeff, const double *pk, const double *x, size_t T, size_t D,
                                size_t C, double alpha, double *dw) {
    if (!coeff || !pk || !x || !dw || T == 0 || D == 0 || C == 0)
        return tsc_error_set(TSC_ERR_ARG, "dW^Q error: NULL argument or empty shape [T %zu, D %zu, C %zu]", T, D, C);
    double *a = malloc(T * D * sizeof *a);
    if (!a) return tsc_error_set(TSC_ERR_NOMEM, "dW^Q error: no memory for [%zu, %zu]", T, D);
    tsc_blas_one_thread();
    for (size_t t = 0; t < T; t++)
        for (size_t d = 0; d < D; d++) a[t * D + d] = alpha * coeff[t] * pk[t * D + d];
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)D, (int)C, (int)T, 1.0, a, (int)D, x, (int)C, 0.0, dw,
                (int)C);
    free(a);
    return TSC_OK;
}
