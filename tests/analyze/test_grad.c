/* Unit tests of analyze/tsc_grad.h: identity (1) of docs/MECHANISM.md §4 holds to fp64 precision for a
 * naive fp64 attention backward run twice with two deltas (hp from O, lp from a perturbed O);
 * a planted one-element fault is caught; the rank-1 sum (2) equals (dQ_hp - dQ_lp)^T X. */
#include <stdint.h>
#include <stdlib.h>

#include "tsc_grad.h"
#include "tsc_test.h"

enum { T = 9, D = 5, C = 7 };
/* fp64 tolerance: the residual subtracts two dQ computed with ~T*D-term sums of O(1) values,
 * so its rounding is ~T*D*2^-53 ~ 1e-14 relative to dQ; 1e-11 of the lhs leaves margin. */
#define IDENTITY_RTOL 1e-11

static double urand(uint64_t *s) { return tsc_test_urand(s) - 0.5; } /* [-0.5, 0.5) */

/* Naive causal attention backward for dQ with a given delta: dS = alpha P o (dP - delta),
 * dQ = dS K, dP = dO V^T. P [T, T] given. */
static void dq_naive(const double *P, const double *k, const double *v, const double *dO,
                     const double *delta, double alpha, double *dq) {
    for (int t = 0; t < T; t++) {
        for (int d = 0; d < D; d++) dq[t * D + d] = 0;
        for (int s = 0; s <= t; s++) {
            double dp = 0;
            for (int d = 0; d < D; d++) dp += dO[t * D + d] * v[s * D + d];
            double ds = alpha * P[t * T + s] * (dp - delta[t]);
            for (int d = 0; d < D; d++) dq[t * D + d] += ds * k[s * D + d];
        }
    }
}

int main(void) {
    uint64_t seed = 99;
    double q[T * D], k[T * D], v[T * D], dO[T * D], x[T * C], alpha = 0.45;
    for (int i = 0; i < T * D; i++) {
        q[i] = 2 * urand(&seed);
        k[i] = 2 * urand(&seed);
        v[i] = urand(&seed) - 2.0;
        dO[i] = urand(&seed) - 0.3;
    }
    for (int i = 0; i < T * C; i++) x[i] = urand(&seed);
    /* Naive softmax attention in double: P, O, lse. */
    double P[T * T] = {0}, O[T * D] = {0}, lse[T], pk_ref[T * D] = {0};
    for (int t = 0; t < T; t++) {
        double mx = -INFINITY, sc[T];
        for (int s = 0; s <= t; s++) {
            sc[s] = 0;
            for (int d = 0; d < D; d++) sc[s] += q[t * D + d] * k[s * D + d];
            sc[s] *= alpha;
            if (sc[s] > mx) mx = sc[s];
        }
        double l = 0;
        for (int s = 0; s <= t; s++) l += exp(sc[s] - mx);
        lse[t] = mx + log(l);
        for (int s = 0; s <= t; s++) {
            P[t * T + s] = exp(sc[s] - mx) / l;
            for (int d = 0; d < D; d++) {
                O[t * D + d] += P[t * T + s] * v[s * D + d];
                pk_ref[t * D + d] += P[t * T + s] * k[s * D + d];
            }
        }
    }
    double pk[T * D];
    tsc_grad_pk(q, k, lse, T, D, alpha, 1, pk);
    for (int i = 0; i < T * D; i++) CHECK_NEAR(pk[i], pk_ref[i], 1e-14);

    /* delta_hp from O, delta_lp from O perturbed like a biased low-precision O (-1/64 in
     * feature 2, a small pattern elsewhere). */
    double dhp[T], dlp[T], Olp[T * D];
    for (int i = 0; i < T * D; i++) Olp[i] = O[i] + ((i % D) == 2 ? -0.015625 : 1e-3 * urand(&seed));
    for (int t = 0; t < T; t++) {
        dhp[t] = dlp[t] = 0;
        for (int d = 0; d < D; d++) {
            dhp[t] += dO[t * D + d] * O[t * D + d];
            dlp[t] += dO[t * D + d] * Olp[t * D + d];
        }
    }
    double dqh[T * D], dql[T * D];
    dq_naive(P, k, v, dO, dhp, alpha, dqh);
    dq_naive(P, k, v, dO, dlp, alpha, dql);
    tsc_grad_identity_t id;
    CHECK(tsc_grad_identity_check(dqh, dql, dhp, dlp, pk, T, D, alpha, &id) == TSC_OK);
    CHECK_EQ_INT(id.n, T * D);
    CHECK(id.max_abs_lhs > 1e-4); /* the deltas really differ */
    CHECKF(id.rel_residual <= IDENTITY_RTOL, "relative residual %.3g", id.rel_residual);

    /* Planted fault: one dQ element off by 1e-6 must show up as the worst residual, there. */
    dql[4 * D + 3] += 1e-6;
    CHECK(tsc_grad_identity_check(dqh, dql, dhp, dlp, pk, T, D, alpha, &id) == TSC_OK);
    CHECK(id.rel_residual > IDENTITY_RTOL);
    CHECK_EQ_INT(id.argmax_residual, 4 * D + 3);
    CHECK_NEAR(id.max_abs_residual, 1e-6, 1e-12);
    dql[4 * D + 3] -= 1e-6;

    /* Eq. (2): alpha sum_T (dlp - dhp)[T] PK[T]^T X[T] = (dQ_hp - dQ_lp)^T X. */
    double coeff[T], dw[D * C], want[D * C] = {0};
    for (int t = 0; t < T; t++) coeff[t] = dlp[t] - dhp[t];
    CHECK(tsc_grad_dwq_error(coeff, pk, x, T, D, C, alpha, dw) == TSC_OK);
    for (int t = 0; t < T; t++)
        for (int d = 0; d < D; d++)
            for (int j = 0; j < C; j++) want[d * C + j] += (dqh[t * D + d] - dql[t * D + d]) * x[t * C + j];
    double mx = 0;
    for (int i = 0; i < D * C; i++) mx = fmax(mx, fabs(want[i]));
    for (int i = 0; i < D * C; i++) CHECK_NEAR(dw[i], want[i], IDENTITY_RTOL * mx);
    CHECK(tsc_grad_identity_check(NULL, dql, dhp, dlp, pk, T, D, alpha, &id) == TSC_ERR_ARG);
    CHECK(tsc_grad_dwq_error(coeff, pk, NULL, T, D, C, alpha, dw) == TSC_ERR_ARG);
    return tsc_test_done();
}
