/* The spectral norm the trainer and the analysis share (kernels/spectral_internal.h), against
 * formulations it does not use:
 *   - known singular values: W = (Givens rotations) diag(s) (Givens rotations) built in double,
 *     so sigma_max is s[0] to rounding; wide, tall, square, a row, a column, a 3 x 3, and a
 *     clustered top pair (s2/s1 = 1 - 1e-6, where single-vector power iteration stalls);
 *   - LAPACK's SVD (LAPACKE_dgesdd on the matrix itself, not its Gram matrix) of float matrices:
 *     random, with a dominant column, rank 1, a head's rows of a w_q [16, 32], GPT-2-sized
 *     [768, 768] (which must also converge in few products);
 *   - a repeated top value (identity, permutation, a 2-block diagonal) and the zero matrix;
 *   - the float and double entry points give the same bits on the same values;
 *   - NaN/Inf give NaN (no error), an empty shape TSC_ERR_ARG;
 *   - the planted fault: one product of the Gram matrix is not enough, and the comparison with
 *     LAPACK must say so. */
#include <lapacke.h>
#include <stdint.h>
#include <stdlib.h>

#include "spectral_internal.h"
#include "tsc_test.h"

/* Agreement required with the reference (relative). The iteration stops when the estimate moves
 * by < TSC_SPECTRAL_TOL (1e-10) relative; its error then is far smaller (~1e-13 observed at
 * 768 x 768), so 1e-9 leaves room and still catches an iteration stopped early (the planted fault
 * is off by more than 1e-3). */
#define SPECTRAL_VS_REF_RTOL 1e-9
/* Known singular values survive ~4 n rotations of the construction to a few 1e-15 relative. */
#define KNOWN_RTOL 1e-12

static double urand(uint64_t *s) { return tsc_test_urand(s) - 0.5; } /* [-0.5, 0.5) */

/* Largest singular value of w [rows, cols] (float or double) from LAPACK dgesdd on a double copy. */
static double lapack_norm(const float *wf, const double *wd, int rows, int cols) {
    int k = rows < cols ? rows : cols;
    double *a = malloc((size_t)rows * cols * sizeof *a), *s = malloc((size_t)k * sizeof *s);
    for (size_t i = 0; i < (size_t)rows * cols; i++) a[i] = wf ? wf[i] : wd[i];
    /* row-major [rows, cols] is column-major [cols, rows]: the same singular values */
    lapack_int info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', cols, rows, a, cols, s, NULL, 1, NULL, 1);
    double r = info == 0 ? s[0] : NAN;
    free(a), free(s);
    return r;
}

/* Fails the test (printing got, want, the relative error and the case) unless |got - want| <=
 * rtol * want. */
static void check_rel(const char *what, double got, double want, double rtol, const tsc_spectral_t *r) {
    double rel = want != 0 ? fabs(got - want) / want : fabs(got);
    CHECKF(rel <= rtol, "%s: got %.17g want %.17g (relative error %.3g > %.3g; %d products, converged %d)", what, got,
           want, rel, rtol, r->products, r->converged);
}

/* w [rows, cols] = L diag(s) R in double: diag(s) padded with zeros, then 4 (rows + cols)
 * Givens rotations of random pairs of rows on the left and of columns on the right. */
static void known_matrix(double *w, int rows, int cols, const double *s, uint64_t *seed) {
    int k = rows < cols ? rows : cols;
    memset(w, 0, (size_t)rows * cols * sizeof *w);
    for (int i = 0; i < k; i++) w[(size_t)i * cols + i] = s[i];
    for (int n = 0; n < 4 * (rows + cols); n++) {
        double th = 6.283185307179586 * tsc_test_urand(seed), c = cos(th), sn = sin(th);
        if (n % 2 == 0 && rows > 1) { /* rows i, j */
            int i = (int)(tsc_test_urand(seed) * rows), j = (i + 1 + (int)(tsc_test_urand(seed) * (rows - 1))) % rows;
            for (int q = 0; q < cols; q++) {
                double a = w[(size_t)i * cols + q], b = w[(size_t)j * cols + q];
                w[(size_t)i * cols + q] = c * a - sn * b, w[(size_t)j * cols + q] = sn * a + c * b;
            }
        } else if (cols > 1) { /* columns i, j */
            int i = (int)(tsc_test_urand(seed) * cols), j = (i + 1 + (int)(tsc_test_urand(seed) * (cols - 1))) % cols;
            for (int q = 0; q < rows; q++) {
                double a = w[(size_t)q * cols + i], b = w[(size_t)q * cols + j];
                w[(size_t)q * cols + i] = c * a - sn * b, w[(size_t)q * cols + j] = sn * a + c * b;
            }
        }
    }
}

static void test_known(uint64_t *seed) {
    static const int shapes[][2] = {{37, 53}, {53, 37}, {64, 64}, {5, 3}, {3, 3}, {1, 9}, {9, 1}, {16, 32}, {2, 2}};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        int rows = shapes[c][0], cols = shapes[c][1], k = rows < cols ? rows : cols;
        for (int clustered = 0; clustered < 2; clustered++) {
            double *s = malloc((size_t)k * sizeof *s), *w = malloc((size_t)rows * cols * sizeof *w);
            /* distinct, unsorted values whose largest is not the first; or a clustered top pair */
            for (int i = 0; i < k; i++) s[i] = 0.5 + 2.0 * (double)((i * 7 + 3) % k) / k;
            int top = 0;
            for (int i = 1; i < k; i++)
                if (s[i] > s[top]) top = i;
            if (clustered && k > 1) s[(top + 1) % k] = s[top] * (1 - 1e-6);
            known_matrix(w, rows, cols, s, seed);
            tsc_spectral_t r;
            char what[96];
            snprintf(what, sizeof what, "known [%d, %d]%s", rows, cols, clustered ? " clustered" : "");
            CHECK(tsc_spectral_norm_f64(w, rows, cols, &r) == TSC_OK);
            check_rel(what, r.norm, s[top], KNOWN_RTOL, &r);
            CHECKF(r.converged, "%s: not converged after %d products", what, r.products);
            free(s), free(w);
        }
    }
}

static void test_lapack(uint64_t *seed) {
    enum { R = 37, C = 53 };
    float *w = malloc(R * C * sizeof *w);
    tsc_spectral_t r;
    for (int i = 0; i < R * C; i++) w[i] = (float)urand(seed);
    CHECK(tsc_spectral_norm_f32(w, R, C, &r) == TSC_OK);
    check_rel("random [37, 53]", r.norm, lapack_norm(w, NULL, R, C), SPECTRAL_VS_REF_RTOL, &r);
    CHECK(tsc_spectral_norm_f32(w, C, R, &r) == TSC_OK); /* the same floats read as [53, 37] */
    check_rel("random [53, 37]", r.norm, lapack_norm(w, NULL, C, R), SPECTRAL_VS_REF_RTOL, &r);
    for (int i = 0; i < R; i++) w[i * C + 11] += 3.0f; /* a strong common column: a large gap */
    CHECK(tsc_spectral_norm_f32(w, R, C, &r) == TSC_OK);
    check_rel("dominant column", r.norm, lapack_norm(w, NULL, R, C), SPECTRAL_VS_REF_RTOL, &r);
    /* the planted fault: one product with tol 0 must be caught by the same comparison */
    tsc_spectral_t f;
    for (int i = 0; i < R * C; i++) w[i] = (float)urand(seed);
    CHECK(tsc_spectral_norm_with(w, NULL, R, C, 1, 0, &f) == TSC_OK);
    double ref = lapack_norm(w, NULL, R, C);
    CHECKF(fabs(f.norm - ref) > SPECTRAL_VS_REF_RTOL * ref && !f.converged && f.products == 1,
           "planted fault not caught: %.17g vs %.17g (%d products, converged %d)", f.norm, ref, f.products, f.converged);
    /* rank 1 (the block meets a rank-deficient Gram matrix): |u| |v| */
    double nu = 0, nv = 0;
    for (int i = 0; i < R; i++) nu += (double)(i % 7 + 1) * (i % 7 + 1);
    for (int j = 0; j < C; j++) nv += (double)(j % 5 - 2) * (j % 5 - 2);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) w[i * C + j] = (float)((i % 7 + 1) * (j % 5 - 2));
    CHECK(tsc_spectral_norm_f32(w, R, C, &r) == TSC_OK);
    check_rel("rank 1", r.norm, sqrt(nu * nv), 1e-14, &r);
    /* one head's rows of a w_q [32, 32] (the trainer's and the analysis' per-head call) */
    for (int i = 0; i < 32 * 32 && i < R * C; i++) w[i] = (float)(0.1 * tsc_test_nrand(seed));
    CHECK(tsc_spectral_norm_f32(w + 16 * 32, 16, 32, &r) == TSC_OK);
    check_rel("head 1 of w_q [32, 32]", r.norm, lapack_norm(w + 16 * 32, NULL, 16, 32), SPECTRAL_VS_REF_RTOL, &r);
    free(w);
}

/* The float entry point is the double one on converted values, bit for bit: the trainer's FP32
 * weights and the analysis' read of the same captured floats give one number. */
static void test_same_bits(uint64_t *seed) {
    enum { R = 24, C = 40 };
    float wf[R * C];
    double wd[R * C];
    for (int i = 0; i < R * C; i++) wd[i] = wf[i] = (float)urand(seed);
    tsc_spectral_t a, b;
    CHECK(tsc_spectral_norm_f32(wf, R, C, &a) == TSC_OK && tsc_spectral_norm_f64(wd, R, C, &b) == TSC_OK);
    CHECKF(memcmp(&a.norm, &b.norm, sizeof a.norm) == 0 && a.products == b.products, "%a vs %a", a.norm, b.norm);
    CHECK(tsc_spectral_norm_f32(wf, R, C, &b) == TSC_OK);  /* and again: no hidden state */
    CHECKF(memcmp(&a.norm, &b.norm, sizeof a.norm) == 0, "%a vs %a", a.norm, b.norm);
}

/* A repeated top eigenvalue of the Gram matrix: identity, a permutation, a 2-block diagonal whose
 * top value is held by two rows (wide), and zero weights. */
static void test_repeated_top(void) {
    enum { M = 64 };
    float *w = calloc(M * M, sizeof *w);
    tsc_spectral_t r;
    for (int i = 0; i < M; i++) w[i * M + i] = 1.0f;
    CHECK(tsc_spectral_norm_f32(w, M, M, &r) == TSC_OK);
    CHECK_NEAR(r.norm, 1, 1e-12);
    memset(w, 0, M * M * sizeof *w); /* row i holds a 1 at column (7 i + 3) mod M */
    for (int i = 0; i < M; i++) w[i * M + (7 * i + 3) % M] = 1.0f;
    CHECK(tsc_spectral_norm_f32(w, M, M, &r) == TSC_OK);
    CHECK_NEAR(r.norm, 1, 1e-12);
    memset(w, 0, M * M * sizeof *w);
    CHECK(tsc_spectral_norm_f32(w, M, M, &r) == TSC_OK);
    CHECK(r.norm == 0 && r.converged);
    for (int i = 0; i < M; i++) w[i * M + i] = i < 2 ? 4.0f : 0.5f;
    CHECK(tsc_spectral_norm_f32(w, M / 2, M, &r) == TSC_OK);
    CHECK_NEAR(r.norm, 4, 1e-12);
    float w3[9] = {2, 0, 0, 0, -5, 0, 0, 0, 1};
    CHECK(tsc_spectral_norm_f32(w3, 3, 3, &r) == TSC_OK);
    CHECK_NEAR(r.norm, 5, 1e-13);
    free(w);
}

/* GPT-2-sized [768, 768] N(0, 0.02^2) (clustered top singular values): within the tolerance of
 * LAPACK after fewer than 60 products (plain block power iteration needed ~110). */
static void test_gpt2_sized(uint64_t *seed) {
    enum { M = 768 };
    float *w = malloc((size_t)M * M * sizeof *w);
    for (size_t i = 0; i < (size_t)M * M; i++) w[i] = (float)(0.02 * tsc_test_nrand(seed));
    tsc_spectral_t r;
    CHECK(tsc_spectral_norm_f32(w, M, M, &r) == TSC_OK);
    double ref = lapack_norm(w, NULL, M, M);
    check_rel("768 x 768", r.norm, ref, SPECTRAL_VS_REF_RTOL, &r);
    CHECKF(r.converged && r.products < 60, "768: %d products, converged %d", r.products, r.converged);
    printf("768 x 768: %.17g, dgesdd %.17g, relative difference %.2g, %d products\n", r.norm, ref,
           fabs(r.norm - ref) / ref, r.products);
    free(w);
}

static void test_edges(void) {
    float wn[6] = {1, 2, 3, 4, 5, 6};
    tsc_spectral_t r;
    wn[4] = NAN;
    CHECK(tsc_spectral_norm_f32(wn, 2, 3, &r) == TSC_OK);
    CHECK(isnan(r.norm) && r.products == 0 && !r.converged);
    wn[4] = INFINITY;
    CHECK(tsc_spectral_norm_f32(wn, 3, 2, &r) == TSC_OK);
    CHECK(isnan(r.norm));
    double big[4] = {1e200, 1e200, 1e200, 1e200}; /* finite, but its Gram matrix overflows */
    CHECK(tsc_spectral_norm_f64(big, 2, 2, &r) == TSC_OK);
    CHECK(isnan(r.norm));
    CHECK(tsc_spectral_norm_f32(wn, 0, 3, &r) == TSC_ERR_ARG);
    CHECK(tsc_spectral_norm_f32(NULL, 2, 3, &r) == TSC_ERR_ARG);
    CHECK(tsc_spectral_norm_with(wn, big, 2, 2, 10, 0, &r) == TSC_ERR_ARG);
}

int main(void) {
    uint64_t seed = 7;
    test_known(&seed);
    test_lapack(&seed);
    test_same_bits(&seed);
    test_repeated_top();
    test_gpt2_sized(&seed);
    test_edges();
    return tsc_test_done();
}
