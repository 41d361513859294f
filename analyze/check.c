/* check.c: the consistency check (tsc_check.h): a dump's captured O and LSE held to softmax(α q kᵀ)·V
 * and its log-sum-exp, recomputed in FP64 from the captured q, k, v, within bounds derived from the
 * stored formats (docs/CHECK.md). One head is read and checked at a time. */
#include "tsc_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu_internal.h"
#include "replay_internal.h"
#include "tsc_comm.h"
#include "tsc_dump.h"
#include "tsc_formats.h"
#include "tsc_mem.h"
#include "tsc_policy.h"
#include "tsc_stats.h"

/* FP32's unit roundoff: the internal stages (dot products, exp, ℓ, Ō) of every kernel modelled are
 * at least FP32, so each contributes a few of these per term (docs/CHECK.md). */
#define CHK_EPS32 0x1p-24
/* The tiles non-finite counts use when the dump records none (docs/CHECK.md). */
#define CHK_DEFAULT_TILE 64
/* A key tile explains an O row's error when removing its contribution leaves at most this share of
 * the residual's norm (a dropped tile leaves ~0; an unrelated tile leaves ~1). */
#define CHK_TILE_EXPLAINS 0.5

/* Keys per block of the rows' score loop: its sums stay in registers (two 8-lane vectors each). */
#define CHK_JB 16

/* Below this many non-zero finite values a slice's values say nothing about its format (zeros fit every format). */
#define CHK_MIN_VALUES 64

/* The formats' constants the bounds use (the run's from the stored formats; each head's from its values too). */
typedef struct {
    tsc_format_t o_fmt, lse_fmt, p_fmt;
    double u_in, u_s, u_p, u_lse;  /* unit roundoffs: 2^-(mantissa bits + 1) */
    double u_wide;                 /* q, k, v hold values finer than P's format: the kernel rounded them (else 0) */
    double p_zero;                 /* P values at or below this round to zero in P's format */
} chk_fmt_t;

/* What one row found. */
typedef struct {
    double o_ratio, o_err, lse_ratio, lse_err;
    double rest;  /* 1 − P_max: the mass a saturated row's max rounded away */
    int sat, nonfinite, key_tile;
} chk_rowres_t;

typedef struct {
    tsc_check_t *c;
    const tsc_check_opts_t *o;
    tsc_dump_t *d;
    replay_sel_t rs;
    chk_fmt_t f;
    int T, D, G;
    size_t TD;
    float *q, *k, *v, *out, *lse;  /* one head: [T, D] each, lse [T] */
    chk_rowres_t *rr;              /* [T] */
    double *scratch;               /* per thread: S, α·Σ|q k|, e^(S − m) [ldk], Ô, A, B [D] each */
    double *kt, *vcum;             /* one head: K in blocks of CHK_JB keys, each [D, CHK_JB] (a block's
                                    * keys side by side, feature by feature), and Σ_{i<=j} |V[i, :]| [T, D] */
    int ldk;                       /* T rounded up to CHK_JB (the last block's missing keys are 0) */
    int nthr;
} chk_run_t;

static double unit_roundoff(tsc_format_t f) { return ldexp(1.0, -(tsc_format_mant_bits(f) + 1)); }

/* Sets the constants that follow from P's format fmt. */
static void set_p_format(chk_fmt_t *f, tsc_format_t fmt) {
    f->p_fmt = fmt;
    f->u_in = f->u_p = unit_roundoff(fmt);
    /* scores, running max, ℓ and Ō are held at least in BF16 by every kernel modelled: no kernel rounds
     * scores to FP8 (an FP8 matmul writes BF16 or FP32) */
    f->u_s = f->u_in < 0x1p-8 ? f->u_in : 0x1p-8;
    /* half the smallest subnormal of P's format, 2^(emin - mant - 1): values at or below it round to 0 */
    const int eb = tsc_format_exp_bits(fmt), mb = tsc_format_mant_bits(fmt);
    f->p_zero = ldexp(1.0, (2 - (1 << (eb - 1))) - mb - 1);
}

/* The coarsest format coarser than stored that holds every finite value of x[0..n), or stored (also when
 * fewer than CHK_MIN_VALUES values are non-zero): a BF16 kernel's O stored as FP32 holds BF16 values. */
static tsc_format_t value_format(const float *x, size_t n, tsc_format_t stored) {
    static const tsc_format_t cand[] = {TSC_FMT_FP8_E5M2, TSC_FMT_FP8_E4M3, TSC_FMT_BF16, TSC_FMT_FP16};
    size_t nz = 0;
    for (size_t i = 0; i < n && nz < CHK_MIN_VALUES; i++) nz += isfinite(x[i]) && x[i] != 0;
    if (nz < CHK_MIN_VALUES) return stored;
    for (size_t c = 0; c < sizeof cand / sizeof cand[0]; c++) {
        if (tsc_format_mant_bits(cand[c]) >= tsc_format_mant_bits(stored)) continue;
        size_t i = 0;
        while (i < n && (!isfinite(x[i]) || tsc_round_f32(x[i], cand[c], TSC_ROUND_NEAREST_EVEN, NULL) == x[i])) i++;
        if (i == n) return cand[c];
    }
    return stored;
}

static tsc_format_t coarser(tsc_format_t a, tsc_format_t b) {
    return tsc_format_mant_bits(a) <= tsc_format_mant_bits(b) ? a : b;
}

void tsc_check_opts_init(tsc_check_opts_t *o) {
    memset(o, 0, sizeof *o);
    tsc_select_init(&o->sel);
}

void tsc_check_free(tsc_check_t *c) {
    if (!c) return;
    free(c->dump_path);
    free(c->heads);
    free(c);
}

/* ------------------------------------------------------------------ plan */

/* The tiles: the dump's when it records tiles smaller than T, else the recorded policy's (an online
 * softmax's blocks), else 64 x 64; clamped to T. */
static void plan_tiles(chk_run_t *R) {
    const tsc_dump_meta_t *m = tsc_dump_meta(R->d);
    tsc_check_t *c = R->c;
    tsc_policy_t pol;
    if (m->tile_q >= 1 && m->tile_k >= 1 && (m->tile_q < m->seq_len || m->tile_k < m->seq_len)) {
        c->tile_q = m->tile_q, c->tile_k = m->tile_k;
        snprintf(c->tile_source, sizeof c->tile_source, "the dump's tile_q, tile_k");
    } else if (m->policy[0] && tsc_policy_parse(m->policy, &pol) == TSC_OK && pol.softmax == TSC_SOFTMAX_ONLINE) {
        tsc_policy_tiles(&pol, &c->tile_q, &c->tile_k);
        snprintf(c->tile_source, sizeof c->tile_source, "the recorded policy's");
    } else {
        tsc_error_clear();  /* the recorded policy is free text: one that does not parse gives no tiles */
        c->tile_q = c->tile_k = CHK_DEFAULT_TILE;
        snprintf(c->tile_source, sizeof c->tile_source, "default %d x %d", CHK_DEFAULT_TILE, CHK_DEFAULT_TILE);
    }
    if (c->tile_q > m->seq_len) c->tile_q = m->seq_len;
    if (c->tile_k > m->seq_len) c->tile_k = m->seq_len;
}

/* Every selected (step, layer) holds q, k, v and o; the formats come from the first pair (a dump
 * stores every layer alike; a later pair in other formats is checked with the first pair's). */
static tsc_status_t plan_pairs(chk_run_t *R) {
    static const char *need[4] = {"q", "k", "v", "o"};
    tsc_check_t *c = R->c;
    tsc_format_t in = TSC_FMT_FP64;
    for (int si = 0; si < c->n_steps; si++) {
        int n_l = 0;
        tsc_status_t st = replay_step_layers(R->d, &R->o->sel, R->rs.steps[si], &R->rs, &n_l);
        if (st != TSC_OK) return tsc_error_wrap(st, "%s: ", c->dump_path);
        for (int li = 0; li < n_l; li++) {
            const int L = R->rs.layers[li];
            const long long s = R->rs.steps[si];
            for (int k = 0; k < 4; k++) {
                tsc_dump_dataset_info_t info;
                if (k == 3 && !tsc_dump_has_dataset(R->d, s, L, "o"))
                    return tsc_error_set(TSC_ERR_MISSING, "%s: step %lld layer %d: no dataset 'o' (the captured O "
                                         "the check holds to softmax(S)·V)", c->dump_path, s, L);
                if (tsc_dump_dataset_info(R->d, s, L, need[k], &info) != TSC_OK)
                    return tsc_error_set(TSC_ERR_MISSING, "%s: step %lld layer %d: dataset '%s' is missing or "
                                         "unusable (%s)", c->dump_path, s, L, need[k], tsc_error_last());
                if (c->n_pairs > 0) continue;
                if (k < 3 && tsc_format_mant_bits(info.dtype) < tsc_format_mant_bits(in)) in = info.dtype;
                if (k == 3) R->f.o_fmt = info.dtype;
            }
            if (c->n_pairs == 0) {
                tsc_dump_dataset_info_t li_;
                c->dtype_lse[0] = 0;
                if (tsc_dump_has_dataset(R->d, s, L, "lse") && tsc_dump_dataset_info(R->d, s, L, "lse", &li_) == TSC_OK) {
                    R->f.lse_fmt = li_.dtype;
                    snprintf(c->dtype_lse, sizeof c->dtype_lse, "%s", tsc_format_name(li_.dtype));
                } else {
                    tsc_error_clear();
                }
            }
            c->n_pairs++;
        }
    }
    if (c->n_pairs == 0) {
        char why[1024];
        return tsc_error_set(TSC_ERR_MISSING, "%s: the selection %s", c->dump_path,
                             tsc_select_miss_text(&R->o->sel, R->d, why, sizeof why));
    }
    chk_fmt_t *f = &R->f;
    set_p_format(f, in);
    f->u_lse = c->dtype_lse[0] ? unit_roundoff(f->lse_fmt) : 0;
    snprintf(c->dtype_qkv, sizeof c->dtype_qkv, "%s", tsc_format_name(in));
    snprintf(c->dtype_o, sizeof c->dtype_o, "%s", tsc_format_name(f->o_fmt));
    snprintf(c->p_format, sizeof c->p_format, "%s", tsc_format_name(in));
    c->u_in = f->u_in, c->u_s = f->u_s, c->u_o = unit_roundoff(f->o_fmt), c->u_lse = f->u_lse;
    return TSC_OK;
}

/* ------------------------------------------------------------------ one row */

/* Eight FP64 lanes (GCC/clang vector extensions: each clone of check_row lowers them to its own
 * registers; every lane is its own chain, so every clone gives the same bits). Macros, not
 * functions: a function passing these by value would have a different ABI in each clone. */
typedef double chk_v8 __attribute__((vector_size(64)));
typedef float chk_v8f __attribute__((vector_size(32)));
typedef long long chk_v8i __attribute__((vector_size(64)));
#define CHK_LOAD(v, p) memcpy(&(v), (p), sizeof(chk_v8))
#define CHK_LOAD_F(v, p) do { chk_v8f f_; memcpy(&f_, (p), sizeof f_); (v) = __builtin_convertvector(f_, chk_v8); } while (0)
#define CHK_ABS(x, mask) ((chk_v8)((chk_v8i)(x) & (mask))) /* mask: every bit but the sign */

/* e^x in FP64 for the rows' reference, in operations a loop over x vectorises (libm's exp is a call
 * per element): x = k ln 2 + r with |r| <= ln 2 / 2 (Cody-Waite, ln 2 in two parts), e^r by its Taylor
 * series to degree 13 (truncation below 2^-57 of the result), times 2^k set in the exponent bits.
 * Within 1.00 FP64 ULP of libm's exp over [-708, 709] (measured at 1.9 M points), far below every
 * bound of the check; 0 below -708 (where e^x is
 * under 2^-1021, nothing beside the row's largest term, which is 1); x is finite and at most 709. */
static inline double chk_exp(double x) {
    const double shift = 0x1.8p52, kd = (x * 0x1.71547652b82fep0 + shift) - shift;
    const double r = (x - kd * 0x1.62e42fefa3800p-1) - kd * 0x1.ef35793c76730p-45;
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    int64_t k;
    const double kb = kd + shift; /* k in the low bits of kb's significand */
    memcpy(&k, &kb, sizeof k);
    const int64_t e = ((k + 1023) & 0x7ff) << 52;
    double two_k;
    memcpy(&two_k, &e, sizeof two_k);
    return x < -708.0 ? 0.0 : p * two_k;
}

/* Checks query row t of the loaded head (docs/CHECK.md has each formula). sc: S, α·Σ|q k|, e^(S − m) [ldk], then Ô, A, B [D].
 * Its vector loops keep every lane independent (no reduction across lanes, no contraction: the file is built
 * with -ffp-contract=off), so each clone gives the same bits. */
TSC_SIMD_CLONES
static void check_row(const chk_run_t *R, const chk_fmt_t *f, int t, int causal, double alpha, int has_lse, double *sc,
                      chk_rowres_t *res) {
    const int T = R->T, D = R->D, nvis = causal ? t + 1 : T;
    const float *q = R->q + (size_t)t * D;
    double *S = sc, *Sa = sc + R->ldk, *E = Sa + R->ldk, *oh = E + R->ldk, *A = oh + D, *Bv = A + D;
    double m = -INFINITY;
    /* any order of the FP64 sum is the reference (its error is far below every bound); this one is
     * feature by feature, CHK_JB keys at a time (a block of K, read in order), the keys' sums in registers */
    const chk_v8i abs_mask = {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX};
    for (int j0 = 0; j0 < nvis; j0 += CHK_JB) {
        chk_v8 s0 = {0}, s1 = {0}, a0 = {0}, a1 = {0};
        const double *kp = R->kt + (size_t)j0 * D;
        for (int d = 0; d < D; d++, kp += CHK_JB) {
            const double qd = q[d];
            chk_v8 k0, k1;
            CHK_LOAD(k0, kp), CHK_LOAD(k1, kp + 8);
            const chk_v8 x0 = qd * k0, x1 = qd * k1;
            s0 += x0, s1 += x1;
            a0 += CHK_ABS(x0, abs_mask), a1 += CHK_ABS(x1, abs_mask);
        }
        memcpy(S + j0, &s0, sizeof s0), memcpy(S + j0 + 8, &s1, sizeof s1);
        memcpy(Sa + j0, &a0, sizeof a0), memcpy(Sa + j0 + 8, &a1, sizeof a1);
    }
    for (int j = 0; j < nvis; j++) {
        S[j] *= alpha;
        Sa[j] *= alpha;
        if (S[j] > m) m = S[j];
    }
    double l = 0;
    for (int j = 0; j < nvis; j++) E[j] = chk_exp(S[j] - m);
    for (int j = 0; j < nvis; j++) l += E[j];
    const double lse_ref = m + log(l);
    /* Δ = log Σ P_j e^{δ_j}: how far a kernel's own rounding of the scores can move the row (Sa
     * becomes e^{δ_j}) */
    const double c_abs = (D + 2) * CHK_EPS32 + f->u_wide * (2 + f->u_wide);
    for (int j = 0; j < nvis; j++) Sa[j] = chk_exp(f->u_s * (2 * fabs(S[j]) + fabs(S[j] - m)) + c_abs * Sa[j]);
    double sum_pe = 0, pmax = 0, under = 0, p_other = 0;
    int jmax = 0;
    for (int j = 0; j < nvis; j++) {
        const double pb = E[j], p = pb / l;
        sum_pe += p * Sa[j];
        if (pb <= f->p_zero) under += p;
        if (p > pmax) pmax = p, jmax = j;
        S[j] = p;  /* S now holds P */
    }
    for (int j = 0; j < nvis; j++)
        if (j != jmax && S[j] > p_other) p_other = S[j];
    const double Delta = log(sum_pe);
    const int ntile = (nvis + R->c->tile_k - 1) / R->c->tile_k;
    res->rest = 1 - pmax;
    res->sat = (tsc_round(pmax, f->p_fmt, TSC_ROUND_NEAREST_EVEN, NULL) == 1.0 && p_other > f->p_zero) ||
               under > f->u_p;
    /* LSE: log Σ exp(S − LSE) = lse_ref − LSE */
    res->lse_err = res->lse_ratio = 0;
    if (has_lse) {
        const double L = R->lse[t];
        const double lam = Delta + (ntile + 2) * f->u_s + f->u_lse * fabs(L) + (nvis + 8) * CHK_EPS32 * (1 + fabs(L));
        res->lse_err = lse_ref - L;
        res->lse_ratio = fabs(res->lse_err) / lam;
    }
    /* O: Ô = P V, A = P|V|, B = Σ|V| (the absolute underflow term of P's format) */
    int d0 = 0;
    for (; d0 + 16 <= D; d0 += 16) { /* 16 features at a time, the sums in registers, keys in order */
        chk_v8 o0 = {0}, o1 = {0}, a0 = {0}, a1 = {0};
        const float *vj = R->v + d0;
        for (int j = 0; j < nvis; j++, vj += D) {
            const double p = S[j];
            chk_v8 v0, v1;
            CHK_LOAD_F(v0, vj);
            CHK_LOAD_F(v1, vj + 8);
            o0 += p * v0, o1 += p * v1;
            a0 += p * CHK_ABS(v0, abs_mask), a1 += p * CHK_ABS(v1, abs_mask);
        }
        memcpy(oh + d0, &o0, sizeof o0), memcpy(oh + d0 + 8, &o1, sizeof o1);
        memcpy(A + d0, &a0, sizeof a0), memcpy(A + d0 + 8, &a1, sizeof a1);
    }
    for (int d = d0; d < D; d++) oh[d] = A[d] = 0;
    for (int j = 0; j < nvis && d0 < D; j++) {
        const float *vj = R->v + (size_t)j * D;
        const double p = S[j];
        for (int d = d0; d < D; d++) {
            oh[d] += p * vj[d];
            A[d] += p * fabs(vj[d]);
        }
    }
    for (int d = 0; d < D; d++) Bv[d] = R->vcum[(size_t)(nvis - 1) * D + d];
    const double beta = exp(2 * Delta) * (1 + f->u_p) * (1 + f->u_wide) * pow(1 + f->u_s, 2 * ntile + 2) - 1 +
                        (nvis + D + 8) * CHK_EPS32;
    const float *o = R->out + (size_t)t * D;
    res->o_ratio = res->o_err = 0;
    for (int d = 0; d < D; d++) {
        const double e = fabs(o[d] - oh[d]);
        const double bound = tsc_stats_ulp(fabs(oh[d]), f->o_fmt) + beta * A[d] + f->p_zero * Bv[d];
        if (e > res->o_err) res->o_err = e;
        if (e / bound > res->o_ratio) res->o_ratio = e / bound;
    }
    res->key_tile = -1;
    if (res->o_ratio <= 1) return;
    /* which key tile's dropped contribution explains the residual r = O − Ô best: min ||r + Σ_tile P V|| */
    double rn = 0, best = INFINITY;
    for (int d = 0; d < D; d++) rn += (o[d] - oh[d]) * (o[d] - oh[d]);
    for (int kt = 0; kt < ntile; kt++) {
        for (int d = 0; d < D; d++) A[d] = o[d] - oh[d];
        const int j1 = (kt + 1) * R->c->tile_k < nvis ? (kt + 1) * R->c->tile_k : nvis;
        for (int j = kt * R->c->tile_k; j < j1; j++)
            for (int d = 0; d < D; d++) A[d] += S[j] * R->v[(size_t)j * D + d];
        double n2 = 0;
        for (int d = 0; d < D; d++) n2 += A[d] * A[d];
        if (n2 < best) best = n2, res->key_tile = kt;
    }
    if (!(best <= CHK_TILE_EXPLAINS * CHK_TILE_EXPLAINS * rn)) res->key_tile = -1;
}

/* ------------------------------------------------------------------ one head */

/* Inserts r into the worst-first list rows[0..*n) of cap TSC_CHECK_WORST. */
static void add_worst(tsc_check_row_t *rows, int *n, tsc_check_row_t r) {
    const int full = *n == TSC_CHECK_WORST;
    if (full && rows[TSC_CHECK_WORST - 1].ratio >= r.ratio) return;
    int i = full ? TSC_CHECK_WORST - 1 : (*n)++;
    while (i > 0 && rows[i - 1].ratio < r.ratio) rows[i] = rows[i - 1], i--;
    rows[i] = r;
}

/* Adds count to the tile (tensor, b, tile) of the most-first list tiles[0..*n). */
static void add_tile(tsc_check_tile_t *tiles, int *n, const char *tensor, int b, int tile, int64_t count) {
    tsc_check_tile_t x = {"", b, tile, count};
    snprintf(x.tensor, sizeof x.tensor, "%s", tensor);
    for (int i = 0; i < *n; i++)
        if (!strcmp(tiles[i].tensor, tensor) && tiles[i].b == b && tiles[i].tile == tile) {
            x.count += tiles[i].count;
            memmove(&tiles[i], &tiles[i + 1], sizeof *tiles * (size_t)(*n - i - 1));
            (*n)--;
            break;
        }
    const int full = *n == TSC_CHECK_WORST;
    if (full && tiles[TSC_CHECK_WORST - 1].count >= x.count) return;
    int i = full ? TSC_CHECK_WORST - 1 : (*n)++;
    while (i > 0 && tiles[i - 1].count < x.count) tiles[i] = tiles[i - 1], i--;
    tiles[i] = x;
}

/* Counts the non-finite elements of one tensor by tile; bad[t] |= 1 for rows they reach. Returns the count. */
static int64_t count_nonfinite(chk_run_t *R, tsc_check_head_t *h, const char *name, const float *x, int cols, int keys,
                               int b, int causal, char *bad) {
    const int T = R->T, tile = keys ? R->c->tile_k : R->c->tile_q;
    int64_t total = 0;
    for (int t0 = 0; t0 < T; t0 += tile) {
        int64_t n = 0;
        for (int t = t0; t < T && t < t0 + tile; t++)
            for (int d = 0; d < cols; d++)
                if (!isfinite(x[(size_t)t * cols + d])) {
                    n++;
                    if (!keys) bad[t] = 1;
                    else for (int r = causal ? t : 0; r < T; r++) bad[r] = 1;  /* every row that sees key t */
                }
        if (n) add_tile(h->tiles, &h->n_tiles, name, b, t0 / tile, n);
        total += n;
    }
    return total;
}

/* Checks the loaded head (batch row b) into h. */
static tsc_status_t check_head(chk_run_t *R, tsc_check_head_t *h, int b, int has_lse) {
    const tsc_dump_meta_t *m = tsc_dump_meta(R->d);
    const int T = R->T, D = R->D;
    char *bad = calloc((size_t)T, 1);
    if (!bad) return tsc_error_set(TSC_ERR_NOMEM, "check: out of memory");
    int64_t nf = count_nonfinite(R, h, "q", R->q, D, 0, b, m->causal, bad);
    nf += count_nonfinite(R, h, "k", R->k, D, 1, b, m->causal, bad);
    nf += count_nonfinite(R, h, "v", R->v, D, 1, b, m->causal, bad);
    nf += count_nonfinite(R, h, "o", R->out, D, 0, b, m->causal, bad);
    if (has_lse) nf += count_nonfinite(R, h, "lse", R->lse, 1, 0, b, m->causal, bad);
    h->nonfinite += nf;
    /* P's format for this head: the stored formats' coarsest, or coarser when the values say so */
    const tsc_format_t fq = value_format(R->q, R->TD, R->f.p_fmt), fk = value_format(R->k, R->TD, R->f.p_fmt),
                       fv = value_format(R->v, R->TD, R->f.p_fmt), fo = value_format(R->out, R->TD, R->f.o_fmt);
    const tsc_format_t fin = coarser(coarser(fq, fk), fv), fp = coarser(coarser(R->f.p_fmt, fin), fo);
    chk_fmt_t hf = R->f;
    set_p_format(&hf, fp);
    hf.u_wide = tsc_format_mant_bits(fin) > tsc_format_mant_bits(fp) ? unit_roundoff(fp) : 0;
    if (!h->p_format[0] || tsc_format_mant_bits(fp) < tsc_format_mant_bits(h->p_fmt)) {
        h->p_fmt = fp;
        snprintf(h->p_format, sizeof h->p_format, "%s", tsc_format_name(fp));
    }
    for (int j = 0; j < T; j++) /* the rows' shared operands */
        for (int d = 0; d < D; d++) {
            R->kt[((size_t)(j / CHK_JB) * D + d) * CHK_JB + j % CHK_JB] = R->k[(size_t)j * D + d];
            R->vcum[(size_t)j * D + d] = (j ? R->vcum[(size_t)(j - 1) * D + d] : 0) + fabs(R->v[(size_t)j * D + d]);
        }
#pragma omp parallel for schedule(dynamic, 16) num_threads(R->nthr)
    for (int t = 0; t < T; t++) {
        int thr = 0;
#ifdef _OPENMP
        thr = omp_get_thread_num();
#endif
        if (bad[t]) continue;
        check_row(R, &hf, t, m->causal, m->softmax_scale, has_lse, R->scratch + (size_t)thr * (3 * (size_t)R->ldk + 3 * (size_t)D),
                  &R->rr[t]);
    }
    int64_t o_tile_bad = 0;
    for (int t = 0; t < T; t++) {
        h->rows++;
        if (bad[t]) {
            h->nonfinite_rows++;
            continue;
        }
        const chk_rowres_t *r = &R->rr[t];
        if (r->o_ratio > h->o_worst) h->o_worst = r->o_ratio;
        if (r->lse_ratio > h->lse_worst) h->lse_worst = r->lse_ratio;
        if (r->o_ratio > 1) {
            h->o_bad++;
            add_worst(h->o_rows, &h->n_o_rows, (tsc_check_row_t){b, t, r->o_ratio, r->o_err, r->key_tile});
            o_tile_bad++;
        }
        if (r->lse_ratio > 1) {
            h->lse_bad++;
            add_worst(h->lse_rows, &h->n_lse_rows, (tsc_check_row_t){b, t, r->lse_ratio, r->lse_err, -1});
        }
        if (r->sat) {
            h->saturated++;
            add_worst(h->sat_rows, &h->n_sat_rows, (tsc_check_row_t){b, t, r->rest, r->rest, -1});
        }
        if ((t + 1) % R->c->tile_q == 0 || t == T - 1) {  /* end of a query tile */
            if (o_tile_bad) add_tile(h->o_tiles, &h->n_o_tiles, "o", b, t / R->c->tile_q, o_tile_bad);
            o_tile_bad = 0;
        }
    }
    free(bad);
    return TSC_OK;
}

/* ------------------------------------------------------------------ run */

static tsc_status_t read_slice(chk_run_t *R, long long s, int L, const char *name, int b, int h, float *out) {
    tsc_status_t st = tsc_dump_read(R->d, s, L, name, b, h, out);
    return st == TSC_OK ? st : tsc_error_wrap(st, "%s: ", R->c->dump_path);
}

/* One (step, layer): heads hd[0..n_heads) of the result. */
/* The heads q and o both hold (a capture that kept some heads leaves the others unwritten: NaN, not data). */
static uint64_t stored_mask(chk_run_t *R, long long s, int L) {
    uint64_t m = ~0ULL;
    static const char *const names[2] = {"q", "o"};
    for (int k = 0; k < 2; k++) {
        tsc_dump_dataset_info_t info;
        if (tsc_dump_dataset_info(R->d, s, L, names[k], &info) == TSC_OK) m &= info.heads_mask;
        else tsc_error_clear();  /* checked by plan_pairs; a read names any problem */
    }
    return m;
}

/* Whether this process computes head record k (tsc_check_opts_t.comm: k mod size). */
static int mine(const chk_run_t *R, long long k) {
    const tsc_comm_t *c = tsc_comm_or_serial(R->o->comm);
    return k % c->size == c->rank;
}

/* The records of one (step, layer) pair, hd[i] the i-th selected head; k0: the record index of hd[0]. */
static tsc_status_t run_pair(chk_run_t *R, long long s, int L, tsc_check_head_t *hd, long long k0) {
    const int has_lse = tsc_dump_has_dataset(R->d, s, L, "lse");
    const uint64_t mask = stored_mask(R, s, L);
    for (int i = 0; i < R->rs.n_heads; i++) {
        hd[i].step = s, hd[i].layer = L, hd[i].head = R->rs.heads[i], hd[i].has_lse = has_lse;
        hd[i].stored = R->rs.heads[i] >= 64 || (mask >> R->rs.heads[i] & 1);
    }
    tsc_status_t st = TSC_OK;
    for (int bi = 0; bi < R->rs.n_batches && st == TSC_OK; bi++) {
        const int b = R->rs.batches[bi];
        int g_loaded = -1;
        for (int i = 0; i < R->rs.n_heads && st == TSC_OK; i++) {
            const int h = R->rs.heads[i], g = h / R->G;
            if (!hd[i].stored || !mine(R, k0 + i)) continue;
            if (g != g_loaded) {
                st = read_slice(R, s, L, "k", b, g, R->k);
                if (st == TSC_OK) st = read_slice(R, s, L, "v", b, g, R->v);
                g_loaded = g;
            }
            if (st == TSC_OK) st = read_slice(R, s, L, "q", b, h, R->q);
            if (st == TSC_OK) st = read_slice(R, s, L, "o", b, h, R->out);
            if (st == TSC_OK && has_lse) st = read_slice(R, s, L, "lse", b, h, R->lse);
            if (st == TSC_OK) st = check_head(R, &hd[i], b, has_lse);
        }
    }
    return st;
}

static tsc_status_t alloc_bufs(chk_run_t *R) {
    const tsc_dump_meta_t *m = tsc_dump_meta(R->d);
    R->T = m->seq_len, R->D = m->head_dim, R->G = m->n_head / m->n_kv_head;
    R->TD = (size_t)R->T * (size_t)R->D;
    R->nthr = 1;
#ifdef _OPENMP
    R->nthr = omp_get_max_threads();
#endif
    R->ldk = (R->T + CHK_JB - 1) / CHK_JB * CHK_JB;
    const size_t KT = (size_t)R->D * (size_t)R->ldk;
    const size_t per_thr = 3 * (size_t)R->ldk + 3 * (size_t)R->D;
    const size_t bytes = (4 * R->TD + (size_t)R->T) * sizeof(float) + (KT + R->TD) * sizeof(double) +
                         (size_t)R->T * sizeof(chk_rowres_t) +
                         (size_t)R->nthr * per_thr * sizeof(double) +
                         (size_t)R->c->n_pairs * (size_t)R->rs.n_heads * sizeof(tsc_check_head_t);
    tsc_status_t st = tsc_mem_check(bytes, "the check's buffers (one head)");
    if (st != TSC_OK) return tsc_error_wrap(st, "check %s: ", R->c->dump_path);
    R->q = malloc((4 * R->TD + (size_t)R->T) * sizeof(float));
    R->rr = calloc((size_t)R->T, sizeof *R->rr);
    R->scratch = malloc((size_t)R->nthr * per_thr * sizeof(double));
    R->kt = calloc(KT + R->TD, sizeof(double)); /* the padding keys stay 0 */
    R->vcum = R->kt ? R->kt + KT : NULL;
    R->c->heads = calloc((size_t)R->c->n_pairs * (size_t)R->rs.n_heads, sizeof *R->c->heads);
    if (!R->q || !R->rr || !R->scratch || !R->kt || !R->c->heads)
        return tsc_error_set(TSC_ERR_NOMEM, "check: out of memory for %s", R->c->dump_path);
    R->k = R->q + R->TD, R->v = R->k + R->TD, R->out = R->v + R->TD, R->lse = R->out + R->TD;
    return TSC_OK;
}

/* On several processes: every process's records to rank 0 (each sends the ones it computed, in
 * record order; rank 0 puts record k back from process k mod size). Collective; st: this process's
 * status so far, agreed first so that no process waits for one that failed. */
static tsc_status_t gather_heads(chk_run_t *R, tsc_status_t st) {
    const tsc_comm_t *c = R->o->comm;
    tsc_check_t *ck = R->c;
    const size_t rec = sizeof(tsc_check_head_t);
    if ((st = tsc_comm_agree(c, st)) != TSC_OK) return st;
    long long n = 0;
    for (long long k = 0; k < ck->n_heads; k++) n += mine(R, k);
    tsc_check_head_t *own = malloc((size_t)(n ? n : 1) * rec);
    st = own ? TSC_OK : tsc_error_set(TSC_ERR_NOMEM, "check: out of memory gathering the head records");
    if ((st = tsc_comm_agree(c, st)) != TSC_OK) {
        free(own);
        return st;
    }
    for (long long k = 0, j = 0; k < ck->n_heads; k++)
        if (mine(R, k)) own[j++] = ck->heads[k];
    void *all = NULL;
    size_t *lens = calloc((size_t)c->size, sizeof *lens);
    st = lens ? tsc_comm_gather(c, 0, own, (size_t)n * rec, &all, lens)
              : tsc_error_set(TSC_ERR_NOMEM, "check: out of memory gathering the head records");
    free(own);
    if (st == TSC_OK && c->rank == 0) { /* process p's records are k = p, p + size, ... in order */
        const unsigned char *at = all;
        for (int p = 0; p < c->size; p++) {
            size_t j = 0;
            for (long long k = p; k < ck->n_heads; k += c->size, j++) {
                if ((j + 1) * rec > lens[p]) {
                    st = tsc_error_set(TSC_ERR_INTERNAL, "check: process %d sent %zu bytes of head records", p, lens[p]);
                    break;
                }
                memcpy(&ck->heads[k], at + j * rec, rec);
            }
            at += lens[p];
        }
    }
    free(all), free(lens);
    return tsc_comm_agree(c, st);
}

static tsc_status_t run_all(chk_run_t *R) {
    tsc_check_t *c = R->c;
    tsc_status_t st = alloc_bufs(R);
    long long done = 0;
    if (st == TSC_OK) tsc_progress_begin(R->o->progress, "(step, layer) pairs checked", c->n_pairs);
    for (int si = 0; si < c->n_steps && st == TSC_OK; si++) {
        int n_l = 0;
        st = replay_step_layers(R->d, &R->o->sel, R->rs.steps[si], &R->rs, &n_l);
        for (int li = 0; li < n_l && st == TSC_OK; li++) {
            st = run_pair(R, R->rs.steps[si], R->rs.layers[li], c->heads + done * R->rs.n_heads, done * R->rs.n_heads);
            if (st == TSC_OK) tsc_progress_tick(R->o->progress, ++done);
        }
    }
    c->n_heads = c->n_pairs * R->rs.n_heads;
    if (R->o->comm && R->o->comm->size > 1 && (st = gather_heads(R, st)) != TSC_OK) return st;
    if (st != TSC_OK) return st;
    for (int i = 0; i < c->n_heads; i++) {
        tsc_check_head_t *h = &c->heads[i];
        h->verdict = (h->o_bad ? TSC_CHECK_O_BAD : 0) | (h->lse_bad ? TSC_CHECK_LSE_BAD : 0) |
                     (h->saturated ? TSC_CHECK_SATURATED : 0) | (h->nonfinite ? TSC_CHECK_NONFINITE : 0);
        c->n_bad += (h->verdict & TSC_CHECK_INCONSISTENT) != 0;
        c->n_saturated += h->saturated > 0;
        c->n_not_stored += !h->stored;
        if (h->stored && h->p_format[0] && tsc_format_mant_bits(h->p_fmt) < tsc_format_mant_bits(R->f.p_fmt)) {
            R->f.p_fmt = h->p_fmt;  /* the run's P format reported: the coarsest any head was held to */
            snprintf(c->p_format, sizeof c->p_format, "%s", h->p_format);
        }
        c->rows += h->rows, c->o_bad += h->o_bad, c->lse_bad += h->lse_bad;
        c->saturated += h->saturated, c->nonfinite += h->nonfinite;
    }
    return TSC_OK;
}

tsc_status_t tsc_check_run(const tsc_check_opts_t *o, tsc_check_t **out) {
    if (out) *out = NULL;
    if (!o || !o->dump_path || !out) return tsc_error_set(TSC_ERR_ARG, "check: a dump path is required");
    chk_run_t R;
    memset(&R, 0, sizeof R);
    R.o = o;
    tsc_check_t *c = R.c = calloc(1, sizeof *c);
    if (!c || !(c->dump_path = strdup(o->dump_path))) {
        free(c);
        return tsc_error_set(TSC_ERR_NOMEM, "check: out of memory");
    }
    tsc_select_format(&o->sel, c->selection, sizeof c->selection);
    tsc_status_t st = tsc_dump_open(&R.d, o->dump_path);
    if (st == TSC_OK) {
        st = replay_sel_resolve(R.d, c->dump_path, &o->sel, o->first_step_only, "check", "check", &R.rs);
        c->n_steps = R.rs.n_steps;
        c->first_step = R.rs.n_steps ? R.rs.steps[0] : -1;
    }
    if (st == TSC_OK) {
        plan_tiles(&R);
        st = plan_pairs(&R);
    }
    if (st == TSC_OK) st = run_all(&R);
    tsc_dump_close(R.d);
    free(R.rs.steps), free(R.rs.heads), free(R.rs.batches), free(R.rs.layers);
    free(R.q), free(R.rr), free(R.scratch), free(R.kt);
    if (st != TSC_OK) {
        tsc_check_free(c);
        return st;
    }
    *out = c;
    return TSC_OK;
}

/* ------------------------------------------------------------------ text and JSON */

const char *tsc_check_verdict_str(unsigned v, char *buf, size_t size) {
    static const struct { unsigned bit; const char *name; } names[] = {
        {TSC_CHECK_O_BAD, "O inconsistent"}, {TSC_CHECK_LSE_BAD, "LSE inconsistent"},
        {TSC_CHECK_NONFINITE, "non-finite"}, {TSC_CHECK_SATURATED, "saturated"}};
    size_t n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (v & names[i].bit) {
            int w = snprintf(buf + n, n < size ? size - n : 0, "%s%s", n ? " + " : "", names[i].name);
            if (w > 0) n += (size_t)w;
        }
    if (!v) snprintf(buf, size, "ok");
    return buf;
}

static const char *head_verdict(const tsc_check_head_t *h, char *buf, size_t size) {
    if (!h->stored) {
        snprintf(buf, size, "not stored");
        return buf;
    }
    return tsc_check_verdict_str(h->verdict, buf, size);
}

const char *tsc_check_sentence(const tsc_check_t *c, char *buf, size_t size) {
    int n_o = 0, n_l = 0, n_nf = 0;
    for (int i = 0; i < c->n_heads; i++) {
        n_o += (c->heads[i].verdict & TSC_CHECK_O_BAD) != 0;
        n_l += (c->heads[i].verdict & TSC_CHECK_LSE_BAD) != 0;
        n_nf += (c->heads[i].verdict & TSC_CHECK_NONFINITE) != 0;
    }
    char ns[48] = "";
    if (c->n_not_stored) snprintf(ns, sizeof ns, " (%d not stored)", c->n_not_stored);
    if (!c->n_bad)
        snprintf(buf, size, "consistent: %d heads%s, %lld rows%s; %lld rows saturate %s", c->n_heads, ns,
                 (long long)c->rows, c->dtype_lse[0] ? "" : " (no lse: O only)", (long long)c->saturated, c->p_format);
    else
        snprintf(buf, size, "inconsistent: %d of %d heads (O in %d, %lld rows; LSE in %d, %lld rows; non-finite in %d)",
                 c->n_bad, c->n_heads, n_o, (long long)c->o_bad, n_l, (long long)c->lse_bad, n_nf);
    return buf;
}

static void json_rows(tsc_json_t *j, const char *key, const tsc_check_row_t *r, int n, int with_tile) {
    tsc_json_key(j, key);
    tsc_json_array_begin(j);
    for (int i = 0; i < n; i++) {
        tsc_json_object_begin(j);
        tsc_json_kv_int(j, "batch", r[i].b);
        tsc_json_kv_int(j, "row", r[i].t);
        tsc_json_kv_number(j, "ratio", r[i].ratio);
        tsc_json_kv_number(j, "error", r[i].err);
        if (with_tile) {
            tsc_json_key(j, "key_tile");
            if (r[i].key_tile >= 0) tsc_json_int(j, r[i].key_tile);
            else tsc_json_null(j);
        }
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
}

static void json_tiles(tsc_json_t *j, const char *key, const tsc_check_tile_t *t, int n) {
    tsc_json_key(j, key);
    tsc_json_array_begin(j);
    for (int i = 0; i < n; i++) {
        tsc_json_object_begin(j);
        tsc_json_kv_string(j, "tensor", t[i].tensor);
        tsc_json_kv_int(j, "batch", t[i].b);
        tsc_json_kv_int(j, "tile", t[i].tile);
        tsc_json_kv_int(j, "count", t[i].count);
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
}

static void json_head(tsc_json_t *j, const tsc_check_head_t *h) {
    char v[96];
    tsc_json_object_begin(j);
    tsc_json_kv_int(j, "step", h->step);
    tsc_json_kv_int(j, "layer", h->layer);
    tsc_json_kv_int(j, "head", h->head);
    tsc_json_kv_string(j, "verdict", head_verdict(h, v, sizeof v));
    tsc_json_kv_bool(j, "inconsistent", (h->verdict & TSC_CHECK_INCONSISTENT) != 0);
    tsc_json_kv_bool(j, "lse_present", h->has_lse);
    tsc_json_kv_string(j, "p_format", h->p_format[0] ? h->p_format : NULL);
    tsc_json_kv_int(j, "rows", h->rows);
    tsc_json_kv_int(j, "o_bad_rows", h->o_bad);
    tsc_json_kv_int(j, "lse_bad_rows", h->lse_bad);
    tsc_json_kv_int(j, "saturated_rows", h->saturated);
    tsc_json_kv_int(j, "nonfinite", h->nonfinite);
    tsc_json_kv_int(j, "nonfinite_rows", h->nonfinite_rows);
    tsc_json_kv_number(j, "o_worst_ratio", h->o_worst);
    if (h->has_lse) tsc_json_kv_number(j, "lse_worst_ratio", h->lse_worst);
    else tsc_json_kv_string(j, "lse_worst_ratio", NULL);
    json_rows(j, "o_rows", h->o_rows, h->n_o_rows, 1);
    json_rows(j, "lse_rows", h->lse_rows, h->n_lse_rows, 0);
    json_rows(j, "saturated_rows_first", h->sat_rows, h->n_sat_rows, 0);
    json_tiles(j, "o_tiles", h->o_tiles, h->n_o_tiles);
    json_tiles(j, "nonfinite_tiles", h->tiles, h->n_tiles);
    tsc_json_object_end(j);
}

/* The fields both JSON forms share. */
static void json_common(const tsc_check_t *c, tsc_json_t *j) {
    char s[256];
    tsc_json_kv_bool(j, "consistent", c->n_bad == 0);
    tsc_json_kv_string(j, "sentence", tsc_check_sentence(c, s, sizeof s));
    tsc_json_kv_int(j, "heads", c->n_heads);
    tsc_json_kv_int(j, "inconsistent_heads", c->n_bad);
    tsc_json_kv_int(j, "saturated_heads", c->n_saturated);
    tsc_json_kv_int(j, "not_stored_heads", c->n_not_stored);
    tsc_json_kv_int(j, "rows", c->rows);
    tsc_json_kv_int(j, "o_bad_rows", c->o_bad);
    tsc_json_kv_int(j, "lse_bad_rows", c->lse_bad);
    tsc_json_kv_int(j, "saturated_rows", c->saturated);
    tsc_json_kv_int(j, "nonfinite", c->nonfinite);
    tsc_json_kv_bool(j, "lse_present", c->dtype_lse[0] != 0);
}

void tsc_check_json(const tsc_check_t *c, tsc_json_t *j) {
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "dump", c->dump_path);
    tsc_json_kv_string(j, "selection", c->selection);
    tsc_json_kv_int(j, "first_step", c->first_step);
    tsc_json_kv_int(j, "steps", c->n_steps);
    tsc_json_kv_int(j, "pairs", c->n_pairs);
    json_common(c, j);
    tsc_json_key(j, "formats");
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "qkv", c->dtype_qkv);
    tsc_json_kv_string(j, "o", c->dtype_o);
    tsc_json_kv_string(j, "lse", c->dtype_lse[0] ? c->dtype_lse : NULL);
    tsc_json_kv_string(j, "p", c->p_format);
    tsc_json_kv_number(j, "u_in", c->u_in);
    tsc_json_kv_number(j, "u_s", c->u_s);
    tsc_json_kv_number(j, "u_o", c->u_o);
    tsc_json_kv_number(j, "u_lse", c->u_lse);
    tsc_json_object_end(j);
    tsc_json_key(j, "tiles");
    tsc_json_object_begin(j);
    tsc_json_kv_int(j, "q", c->tile_q);
    tsc_json_kv_int(j, "k", c->tile_k);
    tsc_json_kv_string(j, "source", c->tile_source);
    tsc_json_object_end(j);
    tsc_json_key(j, "per_head");
    tsc_json_array_begin(j);
    for (int i = 0; i < c->n_heads; i++) json_head(j, &c->heads[i]);
    tsc_json_array_end(j);
    tsc_json_key(j, "nonfinite_numbers");
    tsc_json_nonfinite_note(j);
    tsc_json_object_end(j);
}

void tsc_check_json_summary(const tsc_check_t *c, tsc_json_t *j) {
    tsc_json_object_begin(j);
    tsc_json_kv_bool(j, "checked", 1);
    tsc_json_kv_int(j, "first_step", c->first_step);
    tsc_json_kv_int(j, "steps", c->n_steps);
    json_common(c, j);
    tsc_json_key(j, "inconsistent");
    tsc_json_array_begin(j);
    for (int i = 0, n = 0; i < c->n_heads && n < TSC_CHECK_WORST; i++)
        if (c->heads[i].verdict & TSC_CHECK_INCONSISTENT) {
            char v[96];
            const tsc_check_head_t *h = &c->heads[i];
            tsc_json_object_begin(j);
            tsc_json_kv_int(j, "step", h->step);
            tsc_json_kv_int(j, "layer", h->layer);
            tsc_json_kv_int(j, "head", h->head);
            tsc_json_kv_string(j, "verdict", tsc_check_verdict_str(h->verdict, v, sizeof v));
            tsc_json_object_end(j);
            n++;
        }
    tsc_json_array_end(j);
    tsc_json_object_end(j);
}
