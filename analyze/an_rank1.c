/* an_rank1.c: measurement e of the analysis (tsc_analysis.h): identity (1) with the lp backward
 * and the same backward fed delta from an hp O, and the rank-1 decomposition of the dW^Q error. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "an_internal.h"
#include "tsc_grad.h"
#include "tsc_linalg.h"

#include "blas_internal.h"

#include <cblas.h>

/* P K [T, D] in double with P = exp(S - LSE) from lp's own scores (the trace) and LSE: the P the
 * lp backward uses (up to the rounding of S - LSE), at half the cost of recomputing q.k
 * (tsc_grad_pk does that from q, k). AN_PK_ROWS rows of P at a time, each block one BLAS product
 * with K (in double). */
void an_pk_begin(const an_pk_view_t *v) {
    tsc_blas_one_thread();
    for (size_t i = 0; i < (size_t)v->T * v->D; i++) v->kd[i] = v->k[i];
}

/* Row t of the current block of AN_PK_ROWS rows; the block's product once its last row is in. */
void an_pk_row(const an_pk_view_t *v, int t, const double *srow, double lse) {
    int T = v->T, D = v->D, t0 = t - t % AN_PK_ROWS, r = t - t0;
    int nr = T - t0 < AN_PK_ROWS ? T - t0 : AN_PK_ROWS, nk = an_n_visible(v->causal, T, t0 + nr - 1);
    int nv = an_n_visible(v->causal, T, t);
    double *prow = v->pblk + (size_t)r * nk;
    for (int j = 0; j < nv; j++) prow[j] = exp(srow[j] - lse);
    for (int j = nv; j < nk; j++) prow[j] = 0.0;
    if (r == nr - 1)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, D, nk, 1.0, v->pblk, nk, v->kd, D, 0.0,
                    v->pk + (size_t)t0 * D, D);
}

tsc_status_t an_identity_row(const float *dq_hd, const float *dq_lp, const float *dl_hd, const float *dl_lp,
                             const double *pk, int T, int D, double scale, double *res, double *lhs) {
    size_t TD = (size_t)T * D;
    double *a1 = malloc(TD * sizeof(double)), *a2 = malloc(TD * sizeof(double));
    double *d1 = malloc((size_t)T * sizeof(double)), *d2 = malloc((size_t)T * sizeof(double));
    if (!a1 || !a2 || !d1 || !d2) {
        free(a1), free(a2), free(d1), free(d2);
        return tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory for the identity check");
    }
    for (size_t i = 0; i < TD; i++) {
        a1[i] = dq_hd[i];
        a2[i] = dq_lp[i];
    }
    for (int t = 0; t < T; t++) {
        d1[t] = dl_hd[t];
        d2[t] = dl_lp[t];
    }
    tsc_grad_identity_t id;
    tsc_status_t st = tsc_grad_identity_check(a1, a2, d1, d2, pk, (size_t)T, (size_t)D, scale, &id);
    if (st == TSC_OK && id.max_abs_residual > *res) *res = id.max_abs_residual;
    if (st == TSC_OK && id.max_abs_lhs > *lhs) *lhs = id.max_abs_lhs;
    free(a1), free(a2), free(d1), free(d2);
    return st;
}

/* 1 when a candidate (tie, coeff) ranks below (tie2, coeff2): tie rows first, then by |coeff|. */
static int cand_below(int tie, double coeff, int tie2, double coeff2) {
    return tie != tie2 ? tie < tie2 : fabs(coeff) < fabs(coeff2);
}

/* Inserts a token into the candidates (an_cand_t: tie rows first, then the largest |coeff|). */
static void cand_insert(an_cand_t *c, double coeff, int tie, const double *pkrow, const double *xrow) {
    int slot = -1;
    if (c->n < c->cap) slot = c->n++;
    else {
        int mi = 0;
        for (int i = 1; i < c->n; i++)
            if (cand_below(c->tie[i], c->coeff[i], c->tie[mi], c->coeff[mi])) mi = i;
        if (cand_below(c->tie[mi], c->coeff[mi], tie, coeff)) slot = mi;
    }
    if (slot < 0) return;
    c->coeff[slot] = coeff;
    c->tie[slot] = (uint8_t)tie;
    memcpy(c->a + (size_t)slot * c->D, pkrow, (size_t)c->D * sizeof(double));
    memcpy(c->b + (size_t)slot * c->C, xrow, (size_t)c->C * sizeof(double));
}

tsc_status_t an_dwq_row(const an_dwq_view_t *v) {
    int T = v->T, D = v->D, C = v->C;
    tsc_status_t st = tsc_grad_dwq_error(v->coeff, v->pk, v->xd, (size_t)T, (size_t)D, (size_t)C, v->scale, v->dwt);
    if (st != TSC_OK) return st;
    for (size_t i = 0; i < (size_t)D * C; i++) v->dw[i] += v->dwt[i];
    for (int t = 0; t < T; t++) {
        if (v->coeff[t] == 0.0) continue;
        const double *pr = v->pk + (size_t)t * D, *xr = v->xd + (size_t)t * C;
        double a = v->scale * v->coeff[t], np2 = 0.0, nx2 = 0.0;
        for (int d = 0; d < D; d++) np2 += pr[d] * pr[d];
        for (int j = 0; j < C; j++) nx2 += xr[j] * xr[j];
        *v->term_sq += a * a * np2 * nx2; /* |a PK[T]^T X[T]|_F^2 = a^2 |PK[T]|^2 |X[T]|^2 */
        cand_insert(v->cand, v->coeff[t], v->tie_row[t] != 0, pr, xr);
    }
    return TSC_OK;
}

/* The SVD-based statistics of the n candidates; s, u1 [n], g, cs [n, n], cc [n] scratch. */
static tsc_status_t rank1_stats(const an_rank1_view_t *v, tsc_head_result_t *r, double *s, double *u1, double *g,
                                double *cs, double *cc) {
    const an_cand_t *c = v->cand;
    int n = c->n;
    size_t D = (size_t)c->D, C = (size_t)c->C;
    tsc_status_t st = tsc_linalg_rank1_svd(c->a, D, c->b, C, (size_t)n, s, u1);
    if (st != TSC_OK) return st;
    tsc_linalg_rank1_gram(c->a, D, c->b, C, (size_t)n, g);
    tsc_linalg_rank1_cosine(c->a, D, c->b, C, (size_t)n, cs);
    r->rank1_top_energy = tsc_linalg_top_energy(s, (size_t)n);
    r->rank1_eff_rank = tsc_linalg_effective_rank(s, (size_t)n);
    double sum = 0.0;
    int np = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            sum += cs[i * n + j];
            np++;
        }
    r->rank1_mean_cos = np ? sum / np : 1.0;
    for (int i = 0; i < n; i++) cc[i] = v->scale * c->coeff[i];
    double norm = 0.0;
    double proj = tsc_linalg_rank1_projection(g, cc, u1, s[0], (size_t)n, &norm);
    r->rank1_proj_share = norm > 0 ? fabs(proj) / norm : NAN;
    for (int i = 0; i < n && i < v->N; i++) {
        v->sv[i] = s[i];
        for (int j = 0; j < n && j < v->N; j++) v->cos[(size_t)i * v->N + j] = cs[i * n + j];
    }
    /* the top term for the across-step similarity */
    int top = 0;
    for (int i = 1; i < n; i++)
        if (fabs(c->coeff[i]) > fabs(c->coeff[top])) top = i;
    memcpy(v->top_a, c->a + (size_t)top * D, D * sizeof(double));
    memcpy(v->top_b, c->b + (size_t)top * C, C * sizeof(double));
    *v->top_has = 1;
    return TSC_OK;
}

tsc_status_t an_rank1_finish(const an_rank1_view_t *v, tsc_head_result_t *r, int *filled) {
    const an_cand_t *c = v->cand;
    double fro = 0.0;
    for (size_t i = 0; i < (size_t)c->D * c->C; i++) fro += v->dw[i] * v->dw[i];
    r->dwq_err_fro = sqrt(fro);
    r->rank1_accum_gain = v->term_sq > 0 ? r->dwq_err_fro / sqrt(v->term_sq) : NAN;
    int n = c->n;
    r->n_terms = n;
    if (n < 1) return TSC_OK;
    double *s = calloc((size_t)n, sizeof *s), *u1 = calloc((size_t)n, sizeof *u1);
    double *g = calloc((size_t)n * n, sizeof *g), *cs = calloc((size_t)n * n, sizeof *cs);
    double *cc = calloc((size_t)n, sizeof *cc);
    tsc_status_t st;
    if (!s || !u1 || !g || !cs || !cc) st = tsc_error_set(TSC_ERR_NOMEM, "analysis: no memory for %d rank-1 terms", n);
    else if ((st = rank1_stats(v, r, s, u1, g, cs, cc)) == TSC_OK) *filled = 1;
    free(s), free(u1), free(g), free(cs), free(cc);
    return st;
}
