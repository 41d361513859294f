/* Unit tests of analyze/tsc_linalg.h on constructed low-rank inputs, and power iteration against
 * LAPACK (with a planted fault: too few iterations must be caught by the same comparison). */
#include <lapacke.h>
#include <stdint.h>
#include <stdlib.h>

#include "tsc_linalg.h"
#include "tsc_test.h"

/* Power iteration vs LAPACK: relative agreement required. 1e-9: the iteration stops when the
 * estimate moves by < 1e-12 relative or less, and its error then is ~(s9/s1)^2k (block of 8), far
 * below this. */
#define POWER_VS_LAPACK_RTOL 1e-9

static double urand(uint64_t *s) { return tsc_test_urand(s) - 0.5; } /* [-0.5, 0.5) */

/* The block power iteration and dsyevr on clustered, wide, tall, rank-1 and tiny matrices. */
static void test_clustered(uint64_t *seed) {
    int it;
    /* Clustered top singular values (s2/s1 = 1 - 1e-6, as random weights have them): single-vector
     * power iteration stalls here, the block iteration must not. W = Q1 diag(s) Q2^T [M, M] with
     * orthogonal Q from LAPACK QR; the reference is dgesdd on the FP32 matrix itself. Also the
     * built-in check (dsyevr on the Gram matrix) and a wide and a tall shape. */
    {
        enum { M = 60 };
        double *q1 = malloc(M * M * sizeof *q1), *q2 = malloc(M * M * sizeof *q2), tau[M], sv[M];
        for (int i = 0; i < M * M; i++) q1[i] = urand(seed), q2[i] = urand(seed);
        LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, M, M, q1, M, tau);
        LAPACKE_dorgqr(LAPACK_ROW_MAJOR, M, M, M, q1, M, tau);
        LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, M, M, q2, M, tau);
        LAPACKE_dorgqr(LAPACK_ROW_MAJOR, M, M, M, q2, M, tau);
        sv[0] = 3.0, sv[1] = 3.0 * (1 - 1e-6);
        for (int i = 2; i < M; i++) sv[i] = 2.5 * (1.0 - (double)i / M);
        float *wc = malloc(M * M * sizeof *wc);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < M; j++) {
                double acc = 0;
                for (int k = 0; k < M; k++) acc += q1[i * M + k] * sv[k] * q2[j * M + k];
                wc[i * M + j] = (float)acc;
            }
        double pw, lp, ref;
        CHECK(tsc_linalg_spectral_norm(wc, M, M, 1500, 1e-12, &pw, &it, &lp) == TSC_OK);
        CHECK(tsc_linalg_spectral_norm_lapack(wc, M, M, &ref) == TSC_OK);
        CHECKF(fabs(pw - ref) <= POWER_VS_LAPACK_RTOL * ref, "clustered: power %.17g dgesdd %.17g (%d it)", pw, ref, it);
        CHECKF(fabs(lp - ref) <= 1e-12 * ref, "clustered: dsyevr %.17g dgesdd %.17g", lp, ref);
        CHECKF(it < 500, "clustered: %d iterations", it);
        /* wide [20, 60] (Gram of the rows) and tall [60, 20] (Gram of the columns) */
        double pw2, ref2;
        CHECK(tsc_linalg_spectral_norm(wc, 20, M, 1500, 1e-12, &pw2, NULL, NULL) == TSC_OK);
        CHECK(tsc_linalg_spectral_norm_lapack(wc, 20, M, &ref2) == TSC_OK);
        CHECKF(fabs(pw2 - ref2) <= POWER_VS_LAPACK_RTOL * ref2, "wide: %.17g vs %.17g", pw2, ref2);
        float *wt = malloc(M * 20 * sizeof *wt);
        for (int i = 0; i < 20; i++)
            for (int j = 0; j < M; j++) wt[j * 20 + i] = wc[i * M + j];
        CHECK(tsc_linalg_spectral_norm(wt, M, 20, 1500, 1e-12, &pw, NULL, &lp) == TSC_OK);
        CHECKF(fabs(pw - ref2) <= POWER_VS_LAPACK_RTOL * ref2, "tall: %.17g vs %.17g", pw, ref2);
        CHECKF(fabs(lp - ref2) <= 1e-12 * ref2, "tall dsyevr: %.17g vs %.17g", lp, ref2);
        /* rank 1 (the block meets a rank-deficient Gram matrix) and a 3 x 3 (block wider than n) */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < M; j++) wc[i * M + j] = (float)((i % 7 + 1) * (j % 5 - 2));
        CHECK(tsc_linalg_spectral_norm(wc, M, M, 1500, 1e-12, &pw, NULL, &lp) == TSC_OK);
        CHECK(tsc_linalg_spectral_norm_lapack(wc, M, M, &ref) == TSC_OK);
        CHECKF(fabs(pw - ref) <= POWER_VS_LAPACK_RTOL * ref && fabs(lp - ref) <= 1e-12 * ref, "rank 1: %.17g %.17g %.17g",
               pw, lp, ref);
        float w3[9] = {2, 0, 0, 0, -5, 0, 0, 0, 1};
        CHECK(tsc_linalg_spectral_norm(w3, 3, 3, 100, 1e-14, &pw, NULL, &lp) == TSC_OK);
        CHECK_NEAR(pw, 5, 1e-13);
        CHECK_NEAR(lp, 5, 1e-13);
        free(q1), free(q2), free(wc), free(wt);
    }
}

/* A repeated top eigenvalue of the Gram matrix (identity, permutation, zero weights): dsyevr may
 * return every eigenvalue equal to the top one, not just the one asked for; the norm must still
 * come out (1, 1, 0) with no write past its output. Then a w_q-sized identity [64, 64] and a
 * 2-block diagonal whose top value is held by two rows. */
static void test_repeated_top(void) {
    enum { M = 64 };
    float *w = calloc(M * M, sizeof *w);
    double pw = -1, lp = -1;
    int it = 0;
    for (int i = 0; i < M; i++) w[i * M + i] = 1.0f;
    CHECK(tsc_linalg_spectral_norm(w, M, M, 1500, 1e-12, &pw, &it, &lp) == TSC_OK);
    CHECK_NEAR(pw, 1, 1e-12);
    CHECK_NEAR(lp, 1, 1e-12);
    for (int i = 0; i < M * M; i++) w[i] = 0.0f; /* a permutation: row i holds a 1 at column (7 i + 3) mod M */
    for (int i = 0; i < M; i++) w[i * M + (7 * i + 3) % M] = 1.0f;
    CHECK(tsc_linalg_spectral_norm(w, M, M, 1500, 1e-12, &pw, NULL, &lp) == TSC_OK);
    CHECK_NEAR(pw, 1, 1e-12);
    CHECK_NEAR(lp, 1, 1e-12);
    for (int i = 0; i < M * M; i++) w[i] = 0.0f;
    CHECK(tsc_linalg_spectral_norm(w, M, M, 1500, 1e-12, &pw, NULL, &lp) == TSC_OK);
    CHECK_NEAR(pw, 0, 0);
    CHECK_NEAR(lp, 0, 0);
    for (int i = 0; i < M; i++) w[i * M + i] = i < 2 ? 4.0f : 0.5f; /* top 4 held twice, wide [M/2, M] */
    CHECK(tsc_linalg_spectral_norm(w, M / 2, M, 1500, 1e-12, &pw, NULL, &lp) == TSC_OK);
    CHECK_NEAR(pw, 4, 1e-12);
    CHECK_NEAR(lp, 4, 1e-12);
    free(w);
}

/* A GPT-2-sized weight [768, 768] of N(0, 0.02^2) entries (clustered top singular values, where
 * plain block power iteration needed ~110 products of the Gram matrix with the block): the
 * Chebyshev-filtered iteration stops at tol 1e-10 within 1e-9 of LAPACK after fewer than 60. */
static void test_gpt2_sized(uint64_t *seed) {
    enum { M = 768 };
    float *w = malloc((size_t)M * M * sizeof *w);
    for (size_t i = 0; i < (size_t)M * M; i++) w[i] = (float)(0.02 * tsc_test_nrand(seed));
    double pw, lp;
    int it = 0;
    CHECK(tsc_linalg_spectral_norm(w, M, M, 1500, 1e-10, &pw, &it, &lp) == TSC_OK);
    CHECKF(fabs(pw - lp) <= POWER_VS_LAPACK_RTOL * lp, "768: iteration %.17g dsyevr %.17g (%d products)", pw, lp, it);
    CHECKF(it < 60, "768: %d products of the Gram matrix with the block", it);
    free(w);
}

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

    /* Spectral norm: power iteration vs LAPACK on an odd-shaped random matrix and on one with a
     * dominant direction; then the planted fault (2 iterations) must exceed the tolerance. */
    enum { R = 37, C = 53 };
    float *w = malloc(R * C * sizeof *w);
    for (int i = 0; i < R * C; i++) w[i] = (float)urand(&seed);
    for (int i = 0; i < R; i++) w[i * C + 11] += 3.0f; /* a strong common column: large gap */
    double sp, sl;
    int it;
    CHECK(tsc_linalg_spectral_norm_power(w, R, C, 1000, 1e-14, &sp, &it) == TSC_OK);
    CHECK(tsc_linalg_spectral_norm_lapack(w, R, C, &sl) == TSC_OK);
    CHECKF(fabs(sp - sl) <= POWER_VS_LAPACK_RTOL * sl, "power %.17g lapack %.17g (%d iterations)", sp, sl, it);
    for (int i = 0; i < R * C; i++) w[i] = (float)urand(&seed);
    CHECK(tsc_linalg_spectral_norm_power(w, R, C, 5000, 1e-15, &sp, &it) == TSC_OK);
    CHECK(tsc_linalg_spectral_norm_lapack(w, R, C, &sl) == TSC_OK);
    CHECKF(fabs(sp - sl) <= POWER_VS_LAPACK_RTOL * sl, "power %.17g lapack %.17g (%d iterations)", sp, sl, it);
    CHECK(tsc_linalg_spectral_norm_power(w, R, C, 1, 0, &sp, &it) == TSC_OK);
    CHECKF(fabs(sp - sl) > POWER_VS_LAPACK_RTOL * sl, "planted fault not caught: %.17g vs %.17g", sp, sl);
    test_clustered(&seed);
    test_repeated_top();
    test_gpt2_sized(&seed);
    /* NaN or Inf anywhere: NaN norms, no LAPACK error. */
    {
        float wn[6] = {1, 2, 3, 4, 5, 6};
        double pw = 0, lp = 0;
        wn[4] = NAN;
        CHECK(tsc_linalg_spectral_norm(wn, 2, 3, 100, 1e-12, &pw, &it, &lp) == TSC_OK);
        CHECK(isnan(pw) && isnan(lp) && it == 0);
        wn[4] = INFINITY;
        CHECK(tsc_linalg_spectral_norm(wn, 3, 2, 100, 1e-12, &pw, NULL, &lp) == TSC_OK);
        CHECK(isnan(pw) && isnan(lp));
    }
    /* Zero matrix and empty shape. */
    for (int i = 0; i < R * C; i++) w[i] = 0;
    CHECK(tsc_linalg_spectral_norm_power(w, R, C, 10, 1e-12, &sp, &it) == TSC_OK);
    CHECK_NEAR(sp, 0, 0);
    CHECK(tsc_linalg_spectral_norm_power(w, 0, C, 10, 1e-12, &sp, &it) == TSC_ERR_ARG);
    free(w);
    return tsc_test_done();
}
