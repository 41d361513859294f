/* Unit tests of analyze/tsc_linalg.h on constructed low-rank inputs and against LAPACK's SVD of the
 * materialised stack. (The spectral norm's tests are tests/kernels/test_spectral.c.) */
#include <lapacke.h>
#include <stdint.h>
#include <stdlib.h>

#include "tsc_linalg.h"
#include "tsc_test.h"

static double urand(uint64_t *s) { return tsc_test_urand(s) - 0.5; } /* [-0.5, 0.5) */

int main(void) {
    uint64_t seed = 7;
    /* Cosine matrix of (1,0), (0,1), (1,1). */
    double x[6] = {1, 0, 0, 1, 1, 1}, c[9];
    tsc_linalg_cosine_matrix(x, 3, 2, c);
    CHECK_NEAR(c[0], 1, 1e-15);
    CHECK_NEAR(c[1], 0, 1e-15);
    CHECK_NEAR(c[2], 1 / sqrt(2.0), 1e-15);
    CHECK_NEAR(c[5], 1 / sqrt(2.0), 1e-15);
    CHECK_NEAR(c[7], 1 / sqrt(2.0), 1e-15);

    /* Effective rank and energy on known spectra: {1,1,1} -> 3, {1,0,0} -> 1, {2,1}: p = .8/.2. */
    double s3[3] = {1, 1, 1}, s1[3] = {1, 0, 0}, s2[2] = {2, 1};
    CHECK_NEAR(tsc_linalg_effective_rank(s3, 3), 3.0, 1e-12);
    CHECK_NEAR(tsc_linalg_effective_rank(s1, 3), 1.0, 1e-15);
    CHECK_NEAR(tsc_linalg_effective_rank(s2, 2), exp(-(0.8 * log(0.8) + 0.2 * log(0.2))), 1e-12);
    CHECK_NEAR(tsc_linalg_top_energy(s2, 2), 0.8, 1e-15);

    /* Singular values of a matrix with known spectrum: rows permuted and signed diag(3, 2, 1)
     * padded to [4, 3]. */
    double dm[12] = {0, -2, 0, 0, 0, 0, 3, 0, 0, 0, 0, 1}, sv[3];
    CHECK(tsc_linalg_singular_values(dm, 4, 3, sv) == TSC_OK);
    CHECK_NEAR(sv[0], 3, 1e-14);
    CHECK_NEAR(sv[1], 2, 1e-14);
    CHECK_NEAR(sv[2], 1, 1e-14);

    /* Rank-1 terms that all share one direction: a_i = alpha_i a0, b_i = beta_i b0 -> the stack
     * has rank 1: top energy 1, effective rank 1, every cosine +-1. */
    enum { N = 6, DA = 4, DB = 5 };
    double a[N * DA], b[N * DB], a0[DA], b0[DB];
    for (int i = 0; i < DA; i++) a0[i] = urand(&seed);
    for (int i = 0; i < DB; i++) b0[i] = urand(&seed);
    for (int n = 0; n < N; n++) {
        double al = 0.5 + n, be = (n % 2 ? -1.0 : 1.0) * (1.0 + 0.1 * n);
        for (int i = 0; i < DA; i++) a[n * DA + i] = al * a0[i];
        for (int i = 0; i < DB; i++) b[n * DB + i] = be * b0[i];
    }
    double cos[N * N], s[N], u1[N];
    tsc_linalg_rank1_cosine(a, DA, b, DB, N, cos);
    for (int i = 0; i < N * N; i++) CHECK_NEAR(fabs(cos[i]), 1.0, 1e-12);
    CHECK_NEAR(cos[0 * N + 1], -1.0, 1e-12); /* beta signs alternate */
    CHECK(tsc_linalg_rank1_svd(a, DA, b, DB, N, s, u1) == TSC_OK);
    CHECK_NEAR(tsc_linalg_top_energy(s, N), 1.0, 1e-12);
    CHECK_NEAR(tsc_linalg_effective_rank(s, N), 1.0, 1e-9);

    /* General rank-1 terms: the Gram route must match LAPACK's SVD of the materialised stack
     * M [N, DA*DB] (an independent computation), and the cosine matrix must match the cosine
     * of M's rows. */
    double M[N * DA * DB];
    for (int i = 0; i < N * DA; i++) a[i] = urand(&seed);
    for (int i = 0; i < N * DB; i++) b[i] = urand(&seed);
    /* Make terms 0..2 similar to each other (a shared direction plus noise). */
    for (int n = 1; n < 3; n++) {
        for (int i = 0; i < DA; i++) a[n * DA + i] = a[i] * (1 + n) + 0.01 * urand(&seed);
        for (int i = 0; i < DB; i++) b[n * DB + i] = b[i] + 0.01 * urand(&seed);
    }
    for (int n = 0; n < N; n++)
        for (int i = 0; i < DA; i++)
            for (int j = 0; j < DB; j++) M[n * DA * DB + i * DB + j] = a[n * DA + i] * b[n * DB + j];
    double sref[N], cref[N * N];
    CHECK(tsc_linalg_singular_values(M, N, DA * DB, sref) == TSC_OK);
    CHECK(tsc_linalg_rank1_svd(a, DA, b, DB, N, s, u1) == TSC_OK);
    for (int i = 0; i < N; i++) CHECKF(fabs(s[i] - sref[i]) <= 1e-10 * sref[0], "s[%d] %.17g vs %.17g", i, s[i], sref[i]);
    tsc_linalg_rank1_cosine(a, DA, b, DB, N, cos);
    tsc_linalg_cosine_matrix(M, N, DA * DB, cref);
    for (int i = 0; i < N * N; i++) CHECK_NEAR(cos[i], cref[i], 1e-12);
    CHECK(cos[0 * N + 1] > 0.99 && cos[1 * N + 2] > 0.99);

    /* Projection of E = sum c_i vec(t_i) on the top right singular vector, against LAPACK's V. */
    double cc[N] = {0.3, -0.1, 0.7, 0.2, -0.5, 0.05}, E[DA * DB] = {0}, g[N * N];
    for (int n = 0; n < N; n++)
        for (int k = 0; k < DA * DB; k++) E[k] += cc[n] * M[n * DA * DB + k];
    double Mc[N * DA * DB], ss[N], U[N * N], VT[N * DA * DB];
    for (int i = 0; i < N * DA * DB; i++) Mc[i] = M[i];
    CHECK(LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'S', N, DA * DB, Mc, DA * DB, ss, U, N, VT, DA * DB) == 0);
    double want = 0, en = 0;
    for (int k = 0; k < DA * DB; k++) {
        want += E[k] * VT[k];
        en += E[k] * E[k];
    }
    tsc_linalg_rank1_gram(a, DA, b, DB, N, g);
    double norm;
    double proj = tsc_linalg_rank1_projection(g, cc, u1, s[0], N, &norm);
    CHECK_NEAR(fabs(proj), fabs(want), 1e-12);
    CHECK_NEAR(norm, sqrt(en), 1e-12);
    return tsc_test_done();
}
