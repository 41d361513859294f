/* attention_tmpl.c: the per-head forward and backward of tsc_attention.h, written once and
 * compiled three times by attention.c (float portable, float with AVX-512/FMA, double), so
 * every path runs the same statements in the same order. Built on its own it is empty.
 *
 * Template parameters: R (compute type), SFX(name) (symbol suffix), TMPL_DOUBLE (0/1).
 * Every product-accumulate is FMA(): one rounding, the same bits with or without hardware FMA
 * (contraction of a*b+c is switched off in attention.c so no other expression fuses). */
#ifdef TSC_ATTN_TMPL

/* ---- rounding to a stage ---- */

static inline R SFX(rnd)(R x, rst_t *rs) {
    if (rs->id) return x;
#if TMPL_DOUBLE
    if (rs->fmt == TSC_FMT_FP32 && rs->mode == TSC_ROUND_NEAREST_EVEN) return (double)(float)x;
    return tsc_round(x, rs->fmt, rs->mode, &rs->rng);
#else
    if (rs->mode != TSC_ROUND_STOCHASTIC) {
        if (rs->fmt == TSC_FMT_BF16) return rs->mode == TSC_ROUND_NEAREST_EVEN ? bf16_rne(x) : bf16_rz(x);
        if (rs->fmt == TSC_FMT_TF32) return rs->mode == TSC_ROUND_NEAREST_EVEN ? tf32_rne(x) : tf32_rz(x);
        if (rs->drop) /* e8m*: the same rule with the drop of the format's row */
            return tsc_f32_from_bits(rs->mode == TSC_ROUND_NEAREST_EVEN ? tsc_f32_keep_rne(tsc_f32_bits(x), rs->drop)
                                                                        : tsc_f32_keep_rz(tsc_f32_bits(x), rs->drop));
    }
    return (float)tsc_round((double)x, rs->fmt, rs->mode, &rs->rng);
#endif
}

/* Rounds x[0..n) to the stage; the common formats get loops the compiler vectorises. */
static void SFX(rnd_arr)(R *restrict x, int n, rst_t *rs) {
    if (rs->id) return;
#if !TMPL_DOUBLE
    if (rs->mode == TSC_ROUND_NEAREST_EVEN && rs->fmt == TSC_FMT_BF16) {
        for (int i = 0; i < n; i++) x[i] = bf16_rne(x[i]);
        return;
    }
    if (rs->mode == TSC_ROUND_NEAREST_EVEN && rs->fmt == TSC_FMT_TF32) {
        for (int i = 0; i < n; i++) x[i] = tf32_rne(x[i]);
        return;
    }
    if (rs->mode == TSC_ROUND_NEAREST_EVEN && rs->drop) {
        const int drop = rs->drop;
        for (int i = 0; i < n; i++) x[i] = tsc_f32_from_bits(tsc_f32_keep_rne(tsc_f32_bits(x[i]), drop));
        return;
    }
#endif
    for (int i = 0; i < n; i++) x[i] = SFX(rnd)(x[i], rs);
}

#if TMPL_DOUBLE
#define EXPR(x) exp(x)
#define EXP2R(x) exp2(x)
#define LOGR(x) log(x)
#define FMA(a, b, c) fma((a), (b), (c))
#else
#define EXPR(x) SFX(expf)(x)
#define EXP2R(x) ((float)exp2((double)(x))) /* exp2 in FP32: libm's double result rounded once */
#define LOGR(x) tsc_hd_logf(x)
#define FMA(a, b, c) fmaf((a), (b), (c))
/* exp and log for the FP32 reference: hd_math_internal.h's, the functions the CUDA kernels run
 * (only IEEE basic operations, so every path gives the same bits). Always inlined so loops over
 * exp vectorise (a call in the loop would keep them scalar). */
static inline __attribute__((always_inline)) float SFX(expf)(float x) { return tsc_hd_expf(x); }
#endif

/* Per-head context: stage roundings (with this head's stochastic-rounding streams). */
typedef struct {
    rst_t st[TSC_STAGE_COUNT];
    const tsc_policy_t *pol;
    int T, D, causal, Bc, Br;
    int ldT;    /* row stride of the transposed K and V ([D, ldT], see attn_ld) */
    R alpha;    /* the scores' factor: α (R_S(α) under TSC_SCALE_S_LP, 1 under TSC_SCALE_QK) */
    R ds_alpha; /* dS's factor: α (R_DS(α) under TSC_SCALE_S_LP, 1 under TSC_SCALE_QK) */
    R qk_scale; /* √α under TSC_SCALE_QK (Q, K and finally dQ, dK are multiplied by it), else 1 */
    int G;      /* query heads per kv head */
    int expm;   /* tsc_exp_t */
    R sig;      /* exp2 modes: σ = α·log2(e) as the kernel's host computes it (in double, then FP32) */
    R alpha_f;  /* exp2 modes: α in FP32, the LSE's factor */
    R poff;     /* exp2 modes: the max offset (2^poff at the row max) */
    R c2;       /* Triton and Flex: the literal 1.44269504 in FP32 */
    int ltile;  /* Triton and Flex: ℓ = fma(ℓ, c, tile sum), not per key */
} SFX(hctx_t);

static void SFX(hctx_init)(SFX(hctx_t) *cx, const tsc_policy_t *pol, const tsc_attn_dims_t *dims,
                           int b, int h, int salt) {
    cx->pol = pol;
    cx->T = dims->T;
    cx->ldT = attn_ld(dims->T);
    cx->D = dims->D;
    cx->causal = dims->causal;
    /* a tile larger than T is one tile of T (the same arithmetic, a smaller scratch) */
    cx->Bc = pol->block_k < dims->T ? pol->block_k : dims->T;
    cx->Br = pol->block_q < dims->T ? pol->block_q : dims->T;
    const int qk = pol->scale == TSC_SCALE_QK;
    cx->alpha = cx->ds_alpha = qk ? (R)1 : (R)dims->scale;
    cx->qk_scale = qk ? (R)sqrt(dims->scale) : (R)1;
    cx->expm = (int)pol->exp;
    cx->G = dims->Hkv > 0 ? dims->H / dims->Hkv : 1;
    cx->alpha_f = (R)(float)dims->scale;
    cx->sig = (R)((double)(float)dims->scale * 1.4426950408889634074);
    cx->poff = (R)pol->p_offset;
    cx->c2 = (R)1.44269504f;
    cx->ltile = pol->exp >= TSC_EXP_EXP2_TRITON;
    if (pol->exp == TSC_EXP_EXP2_TRITON || pol->exp == TSC_EXP_EXP2_MEMEFF) { /* σ = R(R_FP32(α)·R_FP32(log2 e)) */
        const R a = (R)(float)dims->scale;
        cx->sig = a * cx->c2;
    }
    for (int s = 0; s < TSC_STAGE_COUNT; s++) {
        rst_t *rs = &cx->st[s];
        rs->fmt = pol->fmt[s];
        rs->mode = pol->mode[s];
        rs->id = rs->fmt == TSC_FMT_FP64 || (!TMPL_DOUBLE && rs->fmt == TSC_FMT_FP32);
        rs->drop = tsc_format_exp_bits(rs->fmt) == 8 ? 23 - tsc_format_mant_bits(rs->fmt) : 0;
        /* one stream per (seed, head, stage, pass) so results do not depend on threading */
        tsc_rng_seed(&rs->rng, pol->seed ^ ((uint64_t)b << 48) ^ ((uint64_t)h << 32) ^
                                   ((uint64_t)s << 8) ^ (uint64_t)salt);
    }
    if (pol->scale == TSC_SCALE_S_LP) {
        rst_t rs = cx->st[TSC_STAGE_S], rd = cx->st[TSC_STAGE_DS]; /* copies: no draw from the streams */
        cx->alpha = SFX(rnd)(cx->alpha, &rs);
        cx->ds_alpha = SFX(rnd)(cx->ds_alpha, &rd);
    }
}

/* Number of unmasked keys of row t in the tile starting at j0 (length jn). */
static inline int SFX(n_valid)(const SFX(hctx_t) *cx, int t, int j0, int jn) {
    if (!cx->causal) return jn;
    int v = t + 1 - j0;
    return v < 0 ? 0 : (v > jn ? jn : v);
}

/* y[i] = R(y[i] + R(x[i])) for i < n, one stage (an unfused tile's part added to its gradient); x
 * is scratch, rounded in place. Rounding passes over whole arrays vectorise; stochastic rounding
 * keeps the element-by-element order of its stream's draws. */
static void SFX(acc_round)(R *restrict y, R *restrict x, int n, rst_t *rs) {
    if (rs->mode == TSC_ROUND_STOCHASTIC) {
        for (int i = 0; i < n; i++) y[i] = SFX(rnd)(y[i] + SFX(rnd)(x[i], rs), rs);
        return;
    }
    SFX(rnd_arr)(x, n, rs);
    for (int i = 0; i < n; i++) y[i] += x[i];
    SFX(rnd_arr)(y, n, rs);
}

/* y[0..n) = R_st(fma(a, x, y)) (fused accumulation step) */
static inline void SFX(axpy_round)(R a, const R *restrict x, R *restrict y, int n, rst_t *rs,
                                   rst_t *acc) {
    if (rs->id && acc->id) {
        for (int d = 0; d < n; d++) y[d] = FMA(a, x[d], y[d]);
    } else {
        for (int d = 0; d < n; d++) y[d] = SFX(rnd)(SFX(rnd)(FMA(a, x[d], y[d]), acc), rs);
    }
}



#if TMPL_SIMD
/* SIMD forms of the hot loops (TMPL_SIMD lanes: 16 AVX-512, 8 AVX2), used when the stages involved
 * round as the identity (FP32). Same operations in the same order as the generic loops (each output
 * element is its own sequential chain of fmas), with the accumulators held in registers; the lane
 * count changes which elements share a register, never an element's chain. */
#define VW TMPL_SIMD
#if TMPL_SIMD == 16
#define V __m512
#define VLOAD _mm512_loadu_ps
#define VSTORE _mm512_storeu_ps
#define VSET1 _mm512_set1_ps
#define VZERO _mm512_setzero_ps
#define VFMA _mm512_fmadd_ps
#define VMASK __mmask16
#define VMASK_LEFT(left) ((left) >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (left)) - 1))
#define VMASKZ_LOAD(k, p) _mm512_maskz_loadu_ps(k, p)
#define VMASK_STORE(p, k, v) _mm512_mask_storeu_ps(p, k, v)
#else
#define V __m256
#define VLOAD _mm256_loadu_ps
#define VSTORE _mm256_storeu_ps
#define VSET1 _mm256_set1_ps
#define VZERO _mm256_setzero_ps
#define VFMA _mm256_fmadd_ps
#define VMASK __m256i
#define VMASK_LEFT(left) _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
#define VMASKZ_LOAD(k, p) _mm256_maskload_ps(p, k)
#define VMASK_STORE(p, k, v) _mm256_maskstore_ps(p, k, v)
#endif

/* out[jj] = Σ_d fma x[d]·MT[d, j0+jj] from 0, sequential in d (MT is [D, T], row stride T). */
static inline void SFX(vec_rowdot)(const float *x, const float *MT, int T, int D, int j0, int jv, float *out) {
    int jj = 0;
    for (; jj + 4 * VW <= jv; jj += 4 * VW) {
        V a0 = VZERO(), a1 = a0, a2 = a0, a3 = a0;
        const float *m = MT + j0 + jj;
        for (int d = 0; d < D; d++, m += T) {
            const V xd = VSET1(x[d]);
            a0 = VFMA(xd, VLOAD(m), a0);
            a1 = VFMA(xd, VLOAD(m + VW), a1);
            a2 = VFMA(xd, VLOAD(m + 2 * VW), a2);
            a3 = VFMA(xd, VLOAD(m + 3 * VW), a3);
        }
        VSTORE(out + jj, a0);
        VSTORE(out + jj + VW, a1);
        VSTORE(out + jj + 2 * VW, a2);
        VSTORE(out + jj + 3 * VW, a3);
    }
    for (; jj < jv; jj += VW) {
        const VMASK k = VMASK_LEFT(jv - jj);
        V a = VZERO();
        const float *m = MT + j0 + jj;
        for (int d = 0; d < D; d++, m += T) a = VFMA(VSET1(x[d]), VMASKZ_LOAD(k, m), a);
        VMASK_STORE(out + jj, k, a);
    }
}

/* y[0..D) = fma(a[i], X[i, :], y) for i = 0..n-1 in order (X rows of length D); D % VW == 0. */
static inline __attribute__((always_inline)) void SFX(vec_axpy_rows_nv)(float *y, const float *a, const float *X,
                                                                       int n, int D, const int nv) {
    V acc[128 / VW];
    for (int c = 0; c < nv; c++) acc[c] = VLOAD(y + VW * c);
    for (int i = 0; i < n; i++) {
        const V ai = VSET1(a[i]);
        const float *xr = X + (size_t)i * D;
        for (int c = 0; c < nv; c++) acc[c] = VFMA(ai, VLOAD(xr + VW * c), acc[c]);
    }
    for (int c = 0; c < nv; c++) VSTORE(y + VW * c, acc[c]);
}
static inline int SFX(vec_axpy_rows)(float *y, const float *a, const float *X, int n, int D) {
    switch (D) {
    case 16: SFX(vec_axpy_rows_nv)(y, a, X, n, D, 16 / VW); return 1;
    case 32: SFX(vec_axpy_rows_nv)(y, a, X, n, D, 32 / VW); return 1;
    case 64: SFX(vec_axpy_rows_nv)(y, a, X, n, D, 64 / VW); return 1;
    case 128: SFX(vec_axpy_rows_nv)(y, a, X, n, D, 128 / VW); return 1;
    default: return 0;
    }
}

/* Y[i, :] = fma(a[i], x, Y[i, :]) for i = 0..n-1 (rows of length D); D % VW == 0, D <= 128. */
static inline __attribute__((always_inline)) void SFX(vec_rank1_nv)(float *Y, const float *a, const float *x, int n,
                                                                   int D, const int nv) {
    V xv[128 / VW];
    for (int c = 0; c < nv; c++) xv[c] = VLOAD(x + VW * c);
    for (int i = 0; i < n; i++) {
        const V ai = VSET1(a[i]);
        float *yr = Y + (size_t)i * D;
        for (int c = 0; c < nv; c++) VSTORE(yr + VW * c, VFMA(ai, xv[c], VLOAD(yr + VW * c)));
    }
}
static inline int SFX(vec_rank1)(float *Y, const float *a, const float *x, int n, int D) {
    switch (D) {
    case 16: SFX(vec_rank1_nv)(Y, a, x, n, D, 16 / VW); return 1;
    case 32: SFX(vec_rank1_nv)(Y, a, x, n, D, 32 / VW); return 1;
    case 64: SFX(vec_rank1_nv)(Y, a, x, n, D, 64 / VW); return 1;
    case 128: SFX(vec_rank1_nv)(Y, a, x, n, D, 128 / VW); return 1;
    default: return 0;
    }
}
#define FAST_AXPY_ROWS(y, a, X, n, D) SFX(vec_axpy_rows)(y, a, X, n, D)
#define FAST_RANK1(Y, a, x, n, D) SFX(vec_rank1)(Y, a, x, n, D)
#else
#define FAST_AXPY_ROWS(y, a, X, n, D) 0
#define FAST_RANK1(Y, a, x, n, D) 0
#endif

static inline int SFX(rowdot_fast)(const R *x, const R *MT, int T, int D, int j0, int jv, R *out) {
#if TMPL_SIMD
    SFX(vec_rowdot)(x, MT, T, D, j0, jv, out);
    return 1;
#else
    (void)x; (void)MT; (void)T; (void)D; (void)j0; (void)jv; (void)out;
    return 0;
#endif
}

/* y = fma(a[i], X[i,:], y) over rows i < n, each step rounded to rs (and acc) */
static inline void SFX(axpy_rows)(R *y, const R *a, const R *X, int n, int D, rst_t *rs, rst_t *acc) {
    if (rs->id && acc->id && FAST_AXPY_ROWS(y, a, X, n, D)) return;
    for (int i = 0; i < n; i++) SFX(axpy_round)(a[i], X + (size_t)i * D, y, D, rs, acc);
}

/* Y[i,:] = fma(a[i], x, Y[i,:]) over rows i < n, each step rounded to rs (and acc) */
static inline void SFX(rank1)(R *Y, const R *a, const R *x, int n, int D, rst_t *rs, rst_t *acc) {
    if (rs->id && acc->id && FAST_RANK1(Y, a, x, n, D)) return;
    for (int i = 0; i < n; i++) SFX(axpy_round)(a[i], x, Y + (size_t)i * D, D, rs, acc);
}


/* Rows are processed in blocks of RB: the per-row arithmetic is unchanged (every output element
 * keeps its own sequential chain), only loops are interchanged so one load of K, V feeds RB rows. */
#ifndef TSC_ATTN_RB
#define TSC_ATTN_RB 4
#endif
#define RB TSC_ATTN_RB

#if TMPL_SIMD
/* out[r][jj] = Σ_d fma X[r][d]·MT[d, j0+jj] for RB rows (X rows stride D, out rows stride os). */
static inline void SFX(vec_rowdot4)(const float *X, const float *MT, int T, int D, int j0, int jv, float *out,
                                    int os) {
    const float *x0 = X, *x1 = X + D, *x2 = X + 2 * D, *x3 = X + 3 * D;
    int jj = 0;
#if VW == 16 /* 16 accumulators: enough chains to cover FMA latency (AVX2 has 16 registers in all) */
    for (; jj + 4 * VW <= jv; jj += 4 * VW) {
        V a[4][4];
        for (int r = 0; r < 4; r++)
            for (int c = 0; c < 4; c++) a[r][c] = VZERO();
        const float *m = MT + j0 + jj;
        for (int d = 0; d < D; d++, m += T) {
            const V k0 = VLOAD(m), k1 = VLOAD(m + VW), k2 = VLOAD(m + 2 * VW), k3 = VLOAD(m + 3 * VW);
            const float xs[4] = {x0[d], x1[d], x2[d], x3[d]};
            for (int r = 0; r < 4; r++) {
                const V b = VSET1(xs[r]);
                a[r][0] = VFMA(b, k0, a[r][0]);
                a[r][1] = VFMA(b, k1, a[r][1]);
                a[r][2] = VFMA(b, k2, a[r][2]);
                a[r][3] = VFMA(b, k3, a[r][3]);
            }
        }
        for (int r = 0; r < 4; r++)
            for (int c = 0; c < 4; c++) VSTORE(out + (size_t)r * os + jj + VW * c, a[r][c]);
    }
#endif
    for (; jj + 2 * VW <= jv; jj += 2 * VW) {
        V a00 = VZERO(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
        const float *m = MT + j0 + jj;
        for (int d = 0; d < D; d++, m += T) {
            const V k0 = VLOAD(m), k1 = VLOAD(m + VW);
            V b = VSET1(x0[d]);
            a00 = VFMA(b, k0, a00); a01 = VFMA(b, k1, a01);
            b = VSET1(x1[d]);
            a10 = VFMA(b, k0, a10); a11 = VFMA(b, k1, a11);
            b = VSET1(x2[d]);
            a20 = VFMA(b, k0, a20); a21 = VFMA(b, k1, a21);
            b = VSET1(x3[d]);
            a30 = VFMA(b, k0, a30); a31 = VFMA(b, k1, a31);
        }
        VSTORE(out + jj, a00); VSTORE(out + jj + VW, a01);
        VSTORE(out + os + jj, a10); VSTORE(out + os + jj + VW, a11);
        VSTORE(out + 2 * os + jj, a20); VSTORE(out + 2 * os + jj + VW, a21);
        VSTORE(out + 3 * os + jj, a30); VSTORE(out + 3 * os + jj + VW, a31);
    }
    for (; jj < jv; jj += VW) {
        const VMASK k = VMASK_LEFT(jv - jj);
        V a0 = VZERO(), a1 = a0, a2 = a0, a3 = a0;
        const float *m = MT + j0 + jj;
        for (int d = 0; d < D; d++, m += T) {
            const V kv = VMASKZ_LOAD(k, m);
            a0 = VFMA(VSET1(x0[d]), kv, a0);
            a1 = VFMA(VSET1(x1[d]), kv, a1);
            a2 = VFMA(VSET1(x2[d]), kv, a2);
            a3 = VFMA(VSET1(x3[d]), kv, a3);
        }
        VMASK_STORE(out + jj, k, a0);
        VMASK_STORE(out + os + jj, k, a1);
        VMASK_STORE(out + 2 * os + jj, k, a2);
        VMASK_STORE(out + 3 * os + jj, k, a3);
    }
}
#endif

#if TMPL_SIMD == 16
/* Y[r][:] = fma(A[r][i], X[i,:], Y[r][:]) for i < n, four rows at once, D == 64 (16 registers of 16
 * lanes; with 8 lanes it would need 32, more than AVX2 has, so AVX2 runs the rows one at a time). */
static inline void SFX(vec_axpy4_64)(float *Y, const float *A, int as, const float *X, int n) {
    V y[4][4];
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) y[r][c] = VLOAD(Y + 64 * r + 16 * c);
    for (int i = 0; i < n; i++) {
        const float *xr = X + (size_t)i * 64;
        const V x0 = VLOAD(xr), x1 = VLOAD(xr + 16), x2 = VLOAD(xr + 32), x3 = VLOAD(xr + 48);
        for (int r = 0; r < 4; r++) {
            const V a = VSET1(A[r * as + i]);
            y[r][0] = VFMA(a, x0, y[r][0]);
            y[r][1] = VFMA(a, x1, y[r][1]);
            y[r][2] = VFMA(a, x2, y[r][2]);
            y[r][3] = VFMA(a, x3, y[r][3]);
        }
    }
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) VSTORE(Y + 64 * r + 16 * c, y[r][c]);
}

/* Y[i][:] = fma(A[r][i], x_r, Y[i][:]) for r = 0..3 in order, i < n, D == 64 (X rows x_r). */
static inline void SFX(vec_rank4_64)(float *Y, const float *A, int as, const float *X, int n) {
    V x[4][4];
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) x[r][c] = VLOAD(X + 64 * r + 16 * c);
    for (int i = 0; i < n; i++) {
        float *yr = Y + (size_t)i * 64;
        V y0 = VLOAD(yr), y1 = VLOAD(yr + 16), y2 = VLOAD(yr + 32), y3 = VLOAD(yr + 48);
        for (int r = 0; r < 4; r++) {
            const V a = VSET1(A[r * as + i]);
            y0 = VFMA(a, x[r][0], y0);
            y1 = VFMA(a, x[r][1], y1);
            y2 = VFMA(a, x[r][2], y2);
            y3 = VFMA(a, x[r][3], y3);
        }
        VSTORE(yr, y0); VSTORE(yr + 16, y1);
        VSTORE(yr + 32, y2); VSTORE(yr + 48, y3);
    }
}
#endif

/* Raw dot products for nr rows: out[r][jj] = Σ_d fma X[r][d]·MT[d, j0+jj] (ACC), jj < jv[r]. */
static void SFX(rowdot_rows)(SFX(hctx_t) *cx, const R *X, int nr, const R *MT, int j0, const int *jv, R *out,
                             int os) {
    const int T = cx->ldT, D = cx->D; /* T: MT's row stride */
    rst_t *acc = &cx->st[TSC_STAGE_ACC];
#if TMPL_SIMD
    if (acc->id && nr == 4) {
        SFX(vec_rowdot4)(X, MT, T, D, j0, jv[3] > jv[0] ? jv[3] : jv[0], out, os);
        return;
    }
#endif
    for (int r = 0; r < nr; r++) {
        R *o = out + (size_t)r * os;
        const R *x = X + (size_t)r * D;
        if (acc->id && SFX(rowdot_fast)(x, MT, T, D, j0, jv[r], o)) continue;
        for (int jj = 0; jj < jv[r]; jj++) o[jj] = 0;
        for (int d = 0; d < D; d++) {
            const R xd = x[d];
            const R *restrict mr = MT + (size_t)d * T + j0;
            if (acc->id) for (int jj = 0; jj < jv[r]; jj++) o[jj] = FMA(xd, mr[jj], o[jj]);
            else for (int jj = 0; jj < jv[r]; jj++) o[jj] = SFX(rnd)(FMA(xd, mr[jj], o[jj]), acc);
        }
    }
}

/* Y_r = fma(A[r][i], X[i,:], Y_r) for i < jv[r], rows r < nr (Y rows stride D, A rows stride as),
 * each step rounded to rs. */
static void SFX(axpy_multi)(SFX(hctx_t) *cx, R *Y, const R *A, int as, const R *X, int nr, const int *jv,
                            rst_t *rs) {
    const int D = cx->D;
    rst_t *acc = &cx->st[TSC_STAGE_ACC];
#if TMPL_SIMD == 16
    if (nr == 4 && D == 64 && rs->id && acc->id) {
        int jmin = jv[0];
        for (int r = 1; r < 4; r++) jmin = jv[r] < jmin ? jv[r] : jmin;
        SFX(vec_axpy4_64)(Y, A, as, X, jmin);
        for (int r = 0; r < 4; r++)
            SFX(axpy_rows)(Y + (size_t)r * D, A + (size_t)r * as + jmin, X + (size_t)jmin * D, jv[r] - jmin, D,
                           rs, acc);
        return;
    }
#endif
    for (int r = 0; r < nr; r++) SFX(axpy_rows)(Y + (size_t)r * D, A + (size_t)r * as, X, jv[r], D, rs, acc);
}

/* Y[i,:] = fma(A[r][i], X_r, Y[i,:]) for rows r < nr in order, i < jv[r] (X rows stride D). */
static void SFX(rank1_multi)(SFX(hctx_t) *cx, R *Y, const R *A, int as, const R *X, int nr, const int *jv,
                             rst_t *rs) {
    const int D = cx->D;
    rst_t *acc = &cx->st[TSC_STAGE_ACC];
#if TMPL_SIMD == 16
    if (nr == 4 && D == 64 && rs->id && acc->id) {
        int jmin = jv[0];
        for (int r = 1; r < 4; r++) jmin = jv[r] < jmin ? jv[r] : jmin;
        SFX(vec_rank4_64)(Y, A, as, X, jmin);
        /* the rest: for each element the rows still go in ascending order */
        for (int r = 0; r < 4; r++)
            SFX(rank1)(Y + (size_t)jmin * D, A + (size_t)r * as + jmin, X + (size_t)r * D, jv[r] - jmin, D, rs, acc);
        return;
    }
#endif
    for (int r = 0; r < nr; r++) SFX(rank1)(Y, A + (size_t)r * as, X + (size_t)r * D, jv[r], D, rs, acc);
}

/* S = R_S(R_S(raw) · α) in place over s[0..jv). */
static inline void SFX(scores_finish)(SFX(hctx_t) *cx, R *s, int jv) {
    SFX(rnd_arr)(s, jv, &cx->st[TSC_STAGE_S]);
    if (cx->expm == TSC_EXP_EXP2_SCALED) { /* qk *= SM_SCALE; then *= RCP_LN2 */
        const R alpha = cx->alpha, c2 = cx->c2;
        for (int jj = 0; jj < jv; jj++) s[jj] = s[jj] * alpha;
        SFX(rnd_arr)(s, jv, &cx->st[TSC_STAGE_S]);
        for (int jj = 0; jj < jv; jj++) s[jj] = s[jj] * c2;
        SFX(rnd_arr)(s, jv, &cx->st[TSC_STAGE_S]);
        return;
    }
    if (cx->expm != TSC_EXP_E) return; /* the exp2 kernels keep S unscaled: σ enters exp's argument */
    const R alpha = cx->alpha;
    for (int jj = 0; jj < jv; jj++) s[jj] = s[jj] * alpha;
    SFX(rnd_arr)(s, jv, &cx->st[TSC_STAGE_S]);
}

/* The exp2 kernels' max term of a row: R(R(m·σ) − offset) (tsc_attention.h, "The exponent"). */
static inline R SFX(exp2_ms)(const SFX(hctx_t) *cx, R m) {
    const R a = m * cx->sig;
    return a - cx->poff;
}

/* FA4's emulated exp2 of an FP32 argument: x clamped to >= −127, n = floor(x) (the kernel's add
 * of 1.5·2^23 rounding down), the fraction f = x − n (exact), p = fma(fma(fma(c3, f, c2), f, c1), f, c0),
 * and n added to p's exponent field (the kernel's integer add of bits(1.5·2^23 + n) << 23). */
static inline R SFX(exp2_poly)(R xin) {
    const float x = fmaxf((float)xin, -127.0f);
    const float n = floorf(x), f = x - n;
    const float p = fmaf(fmaf(fmaf(0.077119089663028717041015625f, f, 0.227564394474029541015625f), f,
                              0.695146143436431884765625f), f, 1.0f);
    const uint32_t hi = tsc_f32_bits(12582912.0f + n) << 23;
    return (R)tsc_f32_from_bits(hi + tsc_f32_bits(p));
}

/* Whether column c of a key tile (0-based, tile width Bc) takes the emulated exp2 under
 * +exp2-poly:freq=F,res=R,start=S: 32-column fragments, pairs of columns; a pair k (its first
 * column's index within the fragment) is emulated when k mod F >= F − R, in fragments
 * S .. (the last but one). */
static inline int SFX(poly_col)(const tsc_policy_t *pol, int c, int Bc) {
    const int frag = c / 32, nfrag = (Bc + 31) / 32, k = (c % 32) & ~1;
    return k % pol->poly_freq >= pol->poly_freq - pol->poly_res && frag >= pol->poly_start && frag < nfrag - 1;
}

/* P̄ of keys jj < n of a tile against the max m, before R_PBAR_*: exp(R_EXPARG(S − m)) (TSC_EXP_E),
 * or the exp2 kernels' exp2(R_EXPARG(fma(S, σ, −ms))) / exp2(R_EXPARG(R(S·σ) − ms)),
 * ms = exp2_ms(m), with FA4's emulated exp2 on the columns poly_col selects. */
static inline void SFX(pexp_arr)(SFX(hctx_t) *cx, const R *s, R *out, int n, R m, rst_t *arg, int onband) {
    if (cx->expm == TSC_EXP_E) {
        for (int jj = 0; jj < n; jj++) out[jj] = s[jj] - m;
        SFX(rnd_arr)(out, n, arg);
        for (int jj = 0; jj < n; jj++) out[jj] = EXPR(out[jj]);
        return;
    }
    if (cx->expm == TSC_EXP_EXP2_SCALED || cx->expm == TSC_EXP_EXP2_PRESCALED) { /* S in log2 units */
        for (int jj = 0; jj < n; jj++) out[jj] = s[jj] - m;
        SFX(rnd_arr)(out, n, arg);
        for (int jj = 0; jj < n; jj++) out[jj] = EXP2R(out[jj]);
        return;
    }
    const R ms = SFX(exp2_ms)(cx, m), sig = cx->sig;
    if (cx->expm == TSC_EXP_EXP2_FMA || (cx->expm == TSC_EXP_EXP2_TRITON && !onband)) {
        for (int jj = 0; jj < n; jj++) out[jj] = FMA(s[jj], sig, -ms);
    } else {
        for (int jj = 0; jj < n; jj++) {
            const R a = s[jj] * sig;
            out[jj] = a - ms;
        }
    }
    SFX(rnd_arr)(out, n, arg);
    const tsc_policy_t *pol = cx->pol;
    if (pol->poly_freq) {
        for (int jj = 0; jj < n; jj++)
            out[jj] = SFX(poly_col)(pol, jj, cx->Bc) ? SFX(exp2_poly)(out[jj]) : EXP2R(out[jj]);
    } else {
        for (int jj = 0; jj < n; jj++) out[jj] = EXP2R(out[jj]);
    }
}

/* The backward's P = exp(R_EXPARG_BWD(S − LSE)), or for the exp2 kernels
 * exp2(R_EXPARG_BWD(fma(S, σ, −R(LSE·log2e)))) / exp2(R_EXPARG_BWD(R(S·σ) − R(LSE·log2e))). */
static inline void SFX(pexp_bwd_arr)(SFX(hctx_t) *cx, const R *s, R *out, int n, R lse, rst_t *arg) {
    if (cx->expm == TSC_EXP_E) {
        for (int jj = 0; jj < n; jj++) out[jj] = s[jj] - lse;
        SFX(rnd_arr)(out, n, arg);
        for (int jj = 0; jj < n; jj++) out[jj] = EXPR(out[jj]);
        return;
    }
    const R ms = lse * (R)1.4426950408889634074f, sig = cx->sig;
    if (cx->expm == TSC_EXP_EXP2_SCALED || cx->expm == TSC_EXP_EXP2_PRESCALED) {
        for (int jj = 0; jj < n; jj++) out[jj] = s[jj] - ms;
        SFX(rnd_arr)(out, n, arg);
        for (int jj = 0; jj < n; jj++) out[jj] = EXP2R(out[jj]);
        return;
    }
    if (cx->expm == TSC_EXP_EXP2_FMA || cx->expm == TSC_EXP_EXP2_TRITON) {
        for (int jj = 0; jj < n; jj++) out[jj] = FMA(s[jj], sig, -ms);
    } else {
        for (int jj = 0; jj < n; jj++) {
            const R a = s[jj] * sig;
            out[jj] = a - ms;
        }
    }
    SFX(rnd_arr)(out, n, arg);
    for (int jj = 0; jj < n; jj++) out[jj] = EXP2R(out[jj]);
}

/* Algorithm 3's ε and gap in the units of S: α·QKᵀ, or for the exp2 kernels (S unscaled) x/α. */
static inline R SFX(s_units)(const SFX(hctx_t) *cx, double x) {
    if (cx->expm == TSC_EXP_EXP2_SCALED || cx->expm == TSC_EXP_EXP2_PRESCALED) return (R)x * cx->c2;
    return cx->expm == TSC_EXP_E ? (R)x : (R)x / cx->alpha_f;
}

/* A score, max or threshold of the kernel's units in those of α·QKᵀ, for traces and tile statistics
 * (computed in double: an FP32 times an FP32 is exact there, so equal scores stay equal). */
static inline double SFX(s_natural)(const SFX(hctx_t) *cx, R x) {
    if (cx->expm == TSC_EXP_E) return (double)x;
    if (cx->expm == TSC_EXP_EXP2_SCALED || cx->expm == TSC_EXP_EXP2_PRESCALED) return (double)x * 0.693147180559945309417;
    return (double)x * (double)cx->alpha_f;
}

/* max of s[0..n): 16 lanes (lane = index mod 16), each a sequential `x > m ? x : m`, then the
 * lanes in order. Exact for any order except the sign of a zero maximum, so the order is fixed
 * here, and the compiler can vectorise it (a single chain of compares could not be). */
static inline R SFX(rowmax)(const R *s, int n) {
    R lane[16];
    for (int i = 0; i < 16; i++) lane[i] = -INFINITY;
    int jj = 0;
    for (; jj + 16 <= n; jj += 16)
        for (int i = 0; i < 16; i++) lane[i] = s[jj + i] > lane[i] ? s[jj + i] : lane[i];
    for (int i = 0; jj + i < n; i++) lane[i] = s[jj + i] > lane[i] ? s[jj + i] : lane[i];
    R mx = lane[0];
    for (int i = 1; i < 16; i++) mx = lane[i] > mx ? lane[i] : mx;
    return mx;
}

/* Algorithm 3 and its edge cases for one tile (see tsc_attention.h). Returns m_tile. */
static R SFX(stable_max)(SFX(hctx_t) *cx, R r_m, int r_s) {
    const tsc_stable_t *sb = &cx->pol->stable;
    if (r_s <= 1) return r_m;
    R m = r_m > 0 ? SFX(rnd)((R)sb->beta * r_m, &cx->st[TSC_STAGE_ROWMAX]) : (R)0;
    R top;
    SFX(pexp_arr)(cx, &r_m, &top, 1, m, &cx->st[TSC_STAGE_EXPARG], 0);
    top = SFX(rnd)(top, &cx->st[TSC_STAGE_PBAR_PV]);
    if (top == (R)1 || top == (R)0) m = SFX(rnd)(r_m + SFX(s_units)(cx, sb->gap), &cx->st[TSC_STAGE_ROWMAX]);
    return m;
}

/* Work elements fwd_head needs. */
/* Row blocks that visit a key tile together (fwd_head); their S, P̄ buffers are kept apart for key
 * tiles up to FG_BC keys (the unfused tiles of 512: fwd_head's phased form), shared above (the
 * materialized softmax's one tile of up to 65536 keys); the keys a P̄V or score chunk takes. */
#define FG (TSC_ATTN_ROW_GROUP / RB)
#define FG_BC 4096
#define FG_CH 64
static int SFX(fg_sets)(int Bc) { return Bc <= FG_BC ? FG : 1; }
static size_t SFX(fwd_work)(int Bc, int D) {
    return 3 * (size_t)SFX(fg_sets)(Bc) * RB * Bc + 2 * (size_t)FG * RB * D + 2 * (size_t)D;
}

/* State of a block of RB rows of the forward: running max m, ℓ, and of the current key tile
 * r_m, m_new, the rescale factor c, the unmasked key count jv, the tie counts. */
typedef struct {
    R m[RB], l[RB], r_m[RB], m_new[RB], c[RB];
    int jv[RB], ties[RB], r_s[RB];
    int t0; /* the block's first row */
} SFX(fblk_t);

/* Forward scratch: S, P̄ as P̄V operand (PA) and as ℓ term (PB) [RB, Bc], Ō [RB, D], pv and the
 * trace's side sum [D], the block's P̄V rows [RB, D] (fwd_head's batched P̄V). */
typedef struct {
    R *S, *PA, *PB, *OACC, *pv, *side, *PV;
} SFX(fwork_t);

/* torch's exp_u20 of one FP32 lane (tsc_attention.h, "torch's CPU flash kernel"): x clamped to
 * [ln FLT_MIN, ln FLT_MAX] (bit patterns 0xc2aeac50, 0x42b17218), fx = floor(fma(x, log2e, 0.5)),
 * r = fma(−fx, ln2, x), a degree-5 polynomial in r by Horner FMAs, times 2^(fx − 1) (0 below the clamp),
 * times 2. The compares and min/max keep the vector instructions' NaN behaviour. */
static inline float SFX(exp_u20)(float x) {
    const float lo = tsc_f32_from_bits(0xc2aeac50u), hi = tsc_f32_from_bits(0x42b17218u);
    const int below = x < lo;
    float src = x < hi ? x : hi;
    src = src > lo ? src : lo;
    const float fx = floorf(fmaf(src, tsc_f32_from_bits(0x3fb8aa3bu), 0.5f));
    const float r = fmaf(-fx, tsc_f32_from_bits(0x3f317218u), src);
    float p = fmaf(r, 0.00828929059f, 0.0418978221f);
    p = fmaf(r, p, 0.166676521f);
    p = fmaf(r, p, 0.499991506f);
    p = fmaf(r, p, 0.999999701f);
    p = fmaf(r, p, 1.0f);
    const int32_t e = (int32_t)lrintf(fx - 1.0f);
    const float pw = below ? 0.0f : tsc_f32_from_bits((uint32_t)(e + 127) << 23);
    return (p * pw) * 2.0f;
}

/* torch's CPU flash tile sum of x[0..n) (the unmasked keys of a tile jn wide; the masked ones are 0):
 * lane l of W sums x[l], x[l + W], ... over the first W·⌊jn/W⌋ columns, the lanes meet in a shuffle tree
 * (lane l + lane l^d for d = W/2 .. 1), then the tail columns are added in order; every add in ACC. */
static R SFX(sum_vexp)(const R *x, int n, int jn, int W, rst_t *acc) {
    R lane[16], nxt[16];
    for (int l = 0; l < W; l++) lane[l] = 0;
    const int nv = jn / W * W;
    for (int j = 0; j < n && j < nv; j++) lane[j % W] = SFX(rnd)(lane[j % W] + x[j], acc);
    for (int d = W / 2; d >= 1; d /= 2) {
        for (int l = 0; l < W; l++) nxt[l] = SFX(rnd)(lane[l] + lane[l ^ d], acc);
        for (int l = 0; l < W; l++) lane[l] = nxt[l];
    }
    R sum = lane[0];
    for (int j = nv; j < n; j++) sum = SFX(rnd)(sum + x[j], acc);
    return sum;
}

/* ATen's row_sum over nu units of w lanes (unit u: x[u·w .. u·w + w)), into out[0..w): four
 * interleaved accumulators (unit 4i + k goes to k) cascaded over four levels of 2^lp units each, the
 * units past the last group of four into accumulator 0, then accumulators 1..3 into 0; every add
 * rounded to ACC (tsc_attention.h, "Summation order"). w <= 16. */
static void SFX(aten_row_sum)(const R *x, long nu, int w, rst_t *acc, R *out) {
    R a[4][4][16];
    memset(a, 0, sizeof a);
    const long n4 = nu / 4;
    int lp = 0;
    while ((1L << lp) < n4) lp++; /* ceil(log2(n4)) */
    lp = lp / 4 > 4 ? lp / 4 : 4;
    const long step = 1L << lp, mask = step - 1;
    long i = 0;
    while (i + step <= n4) {
        for (long j = 0; j < step; j++, i++)
            for (int k = 0; k < 4; k++)
                for (int l = 0; l < w; l++) a[0][k][l] = SFX(rnd)(a[0][k][l] + x[(i * 4 + k) * w + l], acc);
        for (int j = 1; j < 4; j++) {
            for (int k = 0; k < 4; k++)
                for (int l = 0; l < w; l++) {
                    a[j][k][l] = SFX(rnd)(a[j][k][l] + a[j - 1][k][l], acc);
                    a[j - 1][k][l] = 0;
                }
            if (i & (mask << (j * lp))) break;
        }
    }
    for (; i < n4; i++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < w; l++) a[0][k][l] = SFX(rnd)(a[0][k][l] + x[(i * 4 + k) * w + l], acc);
    for (int j = 1; j < 4; j++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < w; l++) a[0][k][l] = SFX(rnd)(a[0][k][l] + a[j][k][l], acc);
    for (long u = n4 * 4; u < nu; u++)
        for (int l = 0; l < w; l++) a[0][0][l] = SFX(rnd)(a[0][0][l] + x[u * w + l], acc);
    for (int k = 1; k < 4; k++)
        for (int l = 0; l < w; l++) a[0][0][l] = SFX(rnd)(a[0][0][l] + a[0][k][l], acc);
    for (int l = 0; l < w; l++) out[l] = a[0][0][l];
}

/* Σ x[0..n) in ACC in the policy's order (tsc_sum_order_t): key order, or ATen's CPU torch.sum of a
 * contiguous row with W = 8 or 16 lanes: rows shorter than W take the scalar row_sum; longer ones
 * the vector row_sum over n / W vectors, then the tail elements and the W lanes, in order, into a
 * fresh sum; the result is added to the zeroed output. */
static R SFX(sum_ordered)(const tsc_policy_t *pol, const R *x, int n, rst_t *acc) {
    R sum = 0;
    if (pol->sum_order == TSC_SUM_SEQ) {
        for (int j = 0; j < n; j++) sum = SFX(rnd)(sum + x[j], acc);
        return sum;
    }
    const int W = pol->sum_order == TSC_SUM_ATEN16 ? 16 : 8;
    R lanes[16];
    if (n < W) {
        SFX(aten_row_sum)(x, n, 1, acc, lanes);
        sum = lanes[0];
    } else {
        const int nv = n / W;
        SFX(aten_row_sum)(x, nv, W, acc, lanes);
        for (int j = nv * W; j < n; j++) sum = SFX(rnd)(sum + x[j], acc);
        for (int l = 0; l < W; l++) sum = SFX(rnd)(sum + lanes[l], acc);
    }
    return SFX(rnd)((R)0 + sum, acc);
}

/* The materialized softmax's probability of one key from its P̄ = exp(R_EXPARG(S − m)):
 * R_P(P̄ / ℓ) or R_P(P̄ · (1/ℓ)) (the policy's norm). The forward and the backward's
 * recomputation both call this, so they agree bit for bit. */
static inline R SFX(mat_norm)(rst_t *st, R pbar, R l, R inv_l, int recip) {
    return SFX(rnd)(recip ? pbar * inv_l : pbar / l, &st[TSC_STAGE_P]);
}

/* S of row r's tile finished, its max r_m (R_ROWMAX) and the tie counts #{S_j == r_m},
 * #{S_j >= R_ROWMAX(r_m − eps)} into bk; returns r_m. */
static R SFX(tile_max)(SFX(hctx_t) *cx, SFX(fblk_t) *bk, int r, R *s, int n, double eps) {
    rst_t *st = cx->st;
    SFX(scores_finish)(cx, s, n);
    const R mx = SFX(rnd)(SFX(rowmax)(s, n), &st[TSC_STAGE_ROWMAX]);
    const R thr = SFX(rnd)(mx - SFX(s_units)(cx, eps), &st[TSC_STAGE_ROWMAX]);
    bk->ties[r] = bk->r_s[r] = 0;
    for (int jj = 0; jj < n; jj++) {
        bk->ties[r] += s[jj] == mx;
        bk->r_s[r] += s[jj] >= thr;
    }
    bk->r_m[r] = mx;
    return mx;
}

/* Materialized softmax for row r (every key of the row in this one tile, see tsc_attention.h):
 * m = R_ROWMAX(max S), ℓ = R_L(Σ R_PBAR_L(P̄_j)) (ACC, in key order), a_j = R_PBAR_PV(R_P(P̄_j / ℓ)),
 * Ō = R_PV(Σ fma a_j·v[j,:]); O = R_O(Ō) follows in fwd_head (no division). */
static void SFX(fwd_row_mat)(SFX(hctx_t) *cx, SFX(fblk_t) *bk, int r, int j0, const R *v,
                             const SFX(fwork_t) *w) {
    const int D = cx->D, Bc = cx->Bc, n = bk->jv[r];
    rst_t *st = cx->st;
    R *s = w->S + (size_t)r * Bc, *pa = w->PA + (size_t)r * Bc, *pb = w->PB + (size_t)r * Bc;
    R *oacc = w->OACC + (size_t)r * D;
    const R mx = SFX(tile_max)(cx, bk, r, s, n, 1e-3);
    bk->m_new[r] = bk->m[r] = mx;
    bk->c[r] = 0;
    for (int jj = 0; jj < n; jj++) pa[jj] = EXPR(SFX(rnd)(s[jj] - mx, &st[TSC_STAGE_EXPARG]));
    for (int jj = 0; jj < n; jj++) pb[jj] = pa[jj];
    SFX(rnd_arr)(pb, n, &st[TSC_STAGE_PBAR_L]);
    R sum = 0;
    for (int jj = 0; jj < n; jj++) sum = SFX(rnd)(sum + pb[jj], &st[TSC_STAGE_ACC]);
    const R l = SFX(rnd)(sum, &st[TSC_STAGE_L]);
    bk->l[r] = l;
    const int recip = cx->pol->norm == TSC_SOFTMAX_NORM_RECIP;
    for (int jj = 0; jj < n; jj++) pa[jj] = SFX(mat_norm)(st, pa[jj], l, (R)1 / l, recip);
    SFX(rnd_arr)(pa, n, &st[TSC_STAGE_PBAR_PV]);
    for (int d = 0; d < D; d++) oacc[d] = 0;
    SFX(axpy_rows)(oacc, pa, v + (size_t)j0 * D, n, D, &st[TSC_STAGE_ACC], &st[TSC_STAGE_ACC]);
    SFX(rnd_arr)(oacc, D, &st[TSC_STAGE_PV]);
}

/* fwd_row_tile's first part (below): S finished, r_m and the tie counts, m_tile (Algorithm 3),
 * m_new, c and P̄ (PA and PB). Returns 0 when the row is done with this tile (no key, or the
 * materialized softmax, which does all here). */
static int SFX(fwd_row_pre)(SFX(hctx_t) *cx, SFX(fblk_t) *bk, int r, int j0, int jn, const R *v,
                            const SFX(fwork_t) *w) {
    const int Bc = cx->Bc, n = bk->jv[r];
    const tsc_policy_t *pol = cx->pol;
    rst_t *st = cx->st;
    const double eps = pol->stable.enabled ? pol->stable.eps : 1e-3;
    R *s = w->S + (size_t)r * Bc, *pa = w->PA + (size_t)r * Bc, *pb = w->PB + (size_t)r * Bc;
    bk->r_m[r] = -INFINITY;
    bk->ties[r] = bk->r_s[r] = 0;
    if (n == 0 && !pol->torch_quirks) return 0; /* this row is done */
    if (pol->softmax == TSC_SOFTMAX_MATERIALIZED) {
        SFX(fwd_row_mat)(cx, bk, r, j0, v, w);
        return 0;
    }
    R m_tile;
    if (n > 0) {
        const R mx = SFX(tile_max)(cx, bk, r, s, n, eps);
        m_tile = pol->stable.enabled ? SFX(stable_max)(cx, mx, bk->r_s[r]) : mx;
    } else {
        /* torch_quirks: a fully masked tile; under +stable a repeated negative max */
        m_tile = (pol->stable.enabled && jn > 1) ? (R)0 : -INFINITY;
    }
    const R m_old = bk->m[r];
    R mn = m_tile > m_old ? m_tile : m_old, c;
    if (m_old == -INFINITY) {
        c = 0;
    } else if (cx->expm == TSC_EXP_E) {
        c = EXPR(SFX(rnd)(m_old - mn, &st[TSC_STAGE_EXPARG]));
    } else if (cx->expm == TSC_EXP_EXP2_SCALED || cx->expm == TSC_EXP_EXP2_PRESCALED) {
        c = EXP2R(SFX(rnd)(m_old - mn, &st[TSC_STAGE_EXPARG])); /* exp2(m_i - m_ij) */
    } else if (cx->expm == TSC_EXP_EXP2_TRITON || cx->expm == TSC_EXP_EXP2_MEMEFF) { /* both maxima scaled */
        const R a = m_old * cx->sig, b = mn * cx->sig;
        c = EXP2R(SFX(rnd)(a - b, &st[TSC_STAGE_EXPARG]));
    } else { /* exp2((m_old − m_new)·σ); +lazy-rescale keeps m_old while that argument is >= −thr */
        const R d = m_old - mn;
        const R a = SFX(rnd)(d * cx->sig, &st[TSC_STAGE_EXPARG]);
        if (pol->lazy_thr > 0 && a >= -(R)pol->lazy_thr) {
            mn = m_old;
            c = 1;
        } else {
            c = EXP2R(a);
        }
    }
    bk->m_new[r] = mn;
    bk->c[r] = c;
    /* the Triton tutorial's diagonal (on-band) tiles: a causal row's key tiles from its query tile's start */
    const int onband = cx->causal && j0 >= (bk->t0 + r) / cx->Br * cx->Br;
    /* +vexp: the tile's vector columns (the first vw·⌊jn/vw⌋) take exp_u20, the rest exp as usual */
    const int vw = pol->vexp == TSC_VEXP_U20X16 ? 16 : pol->vexp == TSC_VEXP_U20X8 ? 8 : 0;
    const int nvec = vw ? (jn / vw * vw < n ? jn / vw * vw : n) : 0;
    for (int jj = 0; jj < nvec; jj++)
        pa[jj] = (R)SFX(exp_u20)((float)SFX(rnd)(s[jj] - mn, &st[TSC_STAGE_EXPARG]));
    SFX(pexp_arr)(cx, s + nvec, pa + nvec, n - nvec, mn, &st[TSC_STAGE_EXPARG], onband);
    for (int jj = 0; jj < n; jj++) pb[jj] = pa[jj];
    SFX(rnd_arr)(pa, n, &st[TSC_STAGE_PBAR_PV]);
    SFX(rnd_arr)(pb, n, &st[TSC_STAGE_PBAR_L]);
    return 1;
}

/* Its second part: Ō and ℓ take the tile (fused: they are rescaled). pvs: the row's P̄V when the
 * caller summed it already (fwd_head's batched form; rounded there in place), else NULL; lsum:
 * the tile's sum of P̄ in key order when the caller has it (the same batched form), else NULL. */
static void SFX(fwd_row_post)(SFX(hctx_t) *cx, SFX(fblk_t) *bk, int r, int j0, int jn, const R *v,
                              const SFX(fwork_t) *w, R *pvs, const R *lsum) {
    const int D = cx->D, Bc = cx->Bc, n = bk->jv[r];
    const tsc_policy_t *pol = cx->pol;
    rst_t *st = cx->st;
    R *pa = w->PA + (size_t)r * Bc, *pb = w->PB + (size_t)r * Bc;
    R *oacc = w->OACC + (size_t)r * D, *pv = pvs ? pvs : w->pv;
    const R c = bk->c[r], mn = bk->m_new[r];
    const int vw = pol->vexp == TSC_VEXP_U20X16 ? 16 : pol->vexp == TSC_VEXP_U20X8 ? 8 : 0;
    if (pol->fused && cx->ltile) { /* l_i = l_i * alpha + tl.sum(p, 1): one FMA (Triton fuses it) */
        for (int d = 0; d < D; d++) oacc[d] = c * oacc[d];
        SFX(rnd_arr)(oacc, D, &st[TSC_STAGE_OACC]);
        R sum = 0;
        for (int jj = 0; jj < n; jj++) sum = SFX(rnd)(sum + pb[jj], &st[TSC_STAGE_ACC]);
        if (cx->expm == TSC_EXP_EXP2_MEMEFF) /* s_prime *= m_prime_exp; then + the tile's total */
            bk->l[r] = SFX(rnd)(SFX(rnd)(c * bk->l[r], &st[TSC_STAGE_L_RESCALE]) + sum, &st[TSC_STAGE_L]);
        else bk->l[r] = SFX(rnd)(FMA(bk->l[r], c, sum), &st[TSC_STAGE_L]);
    } else if (pol->fused) {
        for (int d = 0; d < D; d++) oacc[d] = c * oacc[d];
        SFX(rnd_arr)(oacc, D, &st[TSC_STAGE_OACC]);
        bk->l[r] = SFX(rnd)(c * bk->l[r], &st[TSC_STAGE_L_RESCALE]); /* the keys' terms follow */
    } else {
        if (!pvs) {
            for (int d = 0; d < D; d++) pv[d] = 0;
            SFX(axpy_rows)(pv, pa, v + (size_t)j0 * D, n, D, &st[TSC_STAGE_ACC], &st[TSC_STAGE_ACC]);
        }
        SFX(rnd_arr)(pv, D, &st[TSC_STAGE_PV]);
        if (st[TSC_STAGE_OACC].mode == TSC_ROUND_STOCHASTIC) { /* the stream's draws interleave */
            for (int d = 0; d < D; d++) {
                R scaled = SFX(rnd)(c * oacc[d], &st[TSC_STAGE_OACC]);
                oacc[d] = SFX(rnd)(scaled + pv[d], &st[TSC_STAGE_OACC]);
            }
        } else {
            for (int d = 0; d < D; d++) oacc[d] = c * oacc[d];
            SFX(rnd_arr)(oacc, D, &st[TSC_STAGE_OACC]);
            for (int d = 0; d < D; d++) oacc[d] = oacc[d] + pv[d];
            SFX(rnd_arr)(oacc, D, &st[TSC_STAGE_OACC]);
        }
        if (vw) { /* torch's CPU flash: sum + exp_tmp * sum[row], contracted to one FMA */
            const R sum = SFX(sum_vexp)(pb, n, jn, vw, &st[TSC_STAGE_ACC]);
            bk->l[r] = SFX(rnd)(FMA(c, bk->l[r], sum), &st[TSC_STAGE_L]);
        } else {
            R sum = lsum ? *lsum : SFX(sum_ordered)(pol, pb, n, &st[TSC_STAGE_ACC]);
            if (pol->torch_quirks && sum < (R)1e-10) sum = (R)1e-10;
            R scaled = SFX(rnd)(c * bk->l[r], &st[TSC_STAGE_L_RESCALE]);
            bk->l[r] = SFX(rnd)(scaled + sum, &st[TSC_STAGE_L]);
        }
    }
    bk->m[r] = mn;
}

/* The batched form's last part for a full block: ℓ's tile sums in key order when seq (the four
 * chains interleaved: one row's adds wait on each other, four rows' do not; ACC is FP32 here),
 * then each row with go[r] takes its P̄V row (w->PV) into Ō and ℓ (fwd_row_post). jv: the rows'
 * key counts (0 where go is 0). */
static void SFX(fwd_block_post)(SFX(hctx_t) *cx, SFX(fblk_t) *bk, int j0, int jn, const R *v,
                                const SFX(fwork_t) *w, const int *go, const int *jv, int seq) {
    const int Bc = cx->Bc, D = cx->D;
    R ls[RB] = {0};
    if (seq) {
        int jmin = jv[0];
        for (int r = 1; r < RB; r++) jmin = jv[r] < jmin ? jv[r] : jmin;
        const R *p0 = w->PB, *p1 = p0 + Bc, *p2 = p1 + Bc, *p3 = p2 + Bc;
        for (int jj = 0; jj < jmin; jj++) {
            ls[0] = ls[0] + p0[jj];
            ls[1] = ls[1] + p1[jj];
            ls[2] = ls[2] + p2[jj];
            ls[3] = ls[3] + p3[jj];
        }
        for (int r = 0; r < RB; r++)
            for (int jj = jmin; jj < jv[r]; jj++) ls[r] = ls[r] + w->PB[(size_t)r * Bc + jj];
    }
    for (int r = 0; r < RB; r++)
        if (go[r]) SFX(fwd_row_post)(cx, bk, r, j0, jn, v, w, w->PV + (size_t)r * D, seq ? &ls[r] : NULL);
}

/* One row r of the block against the key tile at j0 (jn keys, bk->jv[r] unmasked): S finished,
 * r_m and the tie counts, m_tile (Algorithm 3), m_new, c, P̄; unfused, Ō and ℓ take the tile
 * here; fused, they are rescaled here and take the keys in fwd_fused_tile. */
static void SFX(fwd_row_tile)(SFX(hctx_t) *cx, SFX(fblk_t) *bk, int r, int j0, int jn, const R *v,
                              const SFX(fwork_t) *w) {
    if (SFX(fwd_row_pre)(cx, bk, r, j0, jn, v, w)) SFX(fwd_row_post)(cx, bk, r, j0, jn, v, w, NULL, NULL);
}

/* fused: Ō_r += P̄ V and ℓ_r += P̄ for the block's nr rows, each row's chain in key order (rows
 * interleaved so their independent chains overlap). */
static void SFX(fwd_fused_tile)(SFX(hctx_t) *cx, SFX(fblk_t) *bk, int nr, int j0, const R *v,
                                const SFX(fwork_t) *w) {
    const int D = cx->D, Bc = cx->Bc;
    rst_t *st = cx->st;
    const R *PB = w->PB;
    R *l = bk->l;
    SFX(axpy_multi)(cx, w->OACC, w->PA, Bc, v + (size_t)j0 * D, nr, bk->jv, &st[TSC_STAGE_PV]);
    if (cx->ltile) return; /* ℓ took the tile's sum in fwd_row_tile */
    int nmax = 0;
    for (int r = 0; r < nr; r++) nmax = bk->jv[r] > nmax ? bk->jv[r] : nmax;
    if (st[TSC_STAGE_L].id && nr == RB && bk->jv[0] == nmax) {
        for (int jj = 0; jj < nmax; jj++)
            for (int r = 0; r < RB; r++) l[r] = l[r] + PB[(size_t)r * Bc + jj];
    } else {
        for (int jj = 0; jj < nmax; jj++)
            for (int r = 0; r < nr; r++)
                if (jj < bk->jv[r]) l[r] = SFX(rnd)(l[r] + PB[(size_t)r * Bc + jj], &st[TSC_STAGE_L]);
    }
}

/* Records key tile jt of the block's rows t0.. into the sink: the tile statistics and the
 * trace's per-tile numbers from the same values (they cannot disagree), and the trace's S, P̄,
 * P̄V and Ō. Rows that do not visit the tile are left alone. */
static void SFX(fwd_record)(SFX(hctx_t) *cx, const tile_sink_t *sk, const SFX(fblk_t) *bk, int nr, int t0,
                            int jt, const R *v, const SFX(fwork_t) *w) {
    const int T = cx->T, D = cx->D, Bc = cx->Bc, j0 = jt * Bc, n_kt = (T + Bc - 1) / Bc;
    tsc_attn_trace_t *tr = sk->tr;
    rst_t *st = cx->st;
    for (int r = 0; r < nr; r++) {
        const int t = t0 + r, n = bk->jv[r];
        if (n == 0 && !cx->pol->torch_quirks) continue;
        const R *s = w->S + (size_t)r * Bc, *pa = w->PA + (size_t)r * Bc;
        const size_t ti = (size_t)t * n_kt + jt;
        int on = 0;
        for (int jj = 0; jj < n; jj++) on += pa[jj] == (R)1;
        const double row_max = SFX(s_natural)(cx, bk->r_m[r]);
        const int32_t ties = bk->ties[r], ties_eps = bk->r_s[r];
        if (sk->row_max) {
            sk->row_max[ti] = row_max;
            sk->tie_count[ti] = ties;
            sk->tie_count_eps[ti] = ties_eps;
            sk->pbar_one[ti] = on;
        }
        if (!tr) continue;
        const size_t slot = tr->rows > 0 ? (size_t)(t % tr->rows) : (size_t)t;
        const size_t tti = slot * n_kt + jt;
        if (tr->tile_max) {
            tr->tile_max[tti] = row_max;
            tr->ties_exact[tti] = ties;
            tr->ties_eps[tti] = ties_eps;
            tr->pbar_one[tti] = on;
            tr->run_max[tti] = SFX(s_natural)(cx, bk->m_new[r]);
            tr->l[tti] = bk->l[r];
        }
        if (tr->s)
            for (int jj = 0; jj < n; jj++) {
                tr->s[slot * T + j0 + jj] = SFX(s_natural)(cx, s[jj]);
                tr->pbar[slot * T + j0 + jj] = pa[jj];
            }
        if (tr->pv) {
            R *side = w->side;
            for (int d = 0; d < D; d++) side[d] = 0;
            SFX(axpy_rows)(side, pa, v + (size_t)j0 * D, n, D, &st[TSC_STAGE_ACC], &st[TSC_STAGE_ACC]);
            if (!cx->pol->fused) SFX(rnd_arr)(side, D, &st[TSC_STAGE_PV]);
            for (int d = 0; d < D; d++) {
                tr->pv[tti * D + d] = side[d];
                tr->oacc[tti * D + d] = w->OACC[(size_t)r * D + d];
            }
        }
    }
}

/* Window trace: the slots of rows t0 .. t0+nr-1 back to "not visited" before the block runs. */
static void SFX(win_reset)(tsc_attn_trace_t *tr, int t0, int nr) {
    const int T = tr->T, n_kt = tr->n_kt, D = tr->D;
    for (int r = 0; r < nr; r++) {
        const size_t slot = (size_t)((t0 + r) % tr->rows);
        if (tr->s)
            for (int j = 0; j < T; j++) {
                tr->s[slot * T + j] = -INFINITY;
                tr->pbar[slot * T + j] = 0;
            }
        if (tr->tile_max)
            for (int k = 0; k < n_kt; k++) {
                const size_t i = slot * n_kt + k;
                tr->tile_max[i] = tr->run_max[i] = tr->l[i] = NAN;
                tr->ties_exact[i] = tr->ties_eps[i] = tr->pbar_one[i] = -1;
            }
        if (tr->pv)
            for (size_t i = slot * n_kt * D; i < (slot + 1) * n_kt * D; i++) tr->pv[i] = tr->oacc[i] = NAN;
    }
}

/* The keys of the chunk at c0 (FG_CH wide) each of nr rows takes, jc[r] from its count jv[r];
 * returns the largest (0: no row has a key there). */
static int SFX(chunk_keys)(const int *jv, int nr, int c0, int *jc) {
    int mx = 0;
    for (int r = 0; r < nr; r++) {
        const int n = jv[r] - c0;
        jc[r] = n < 0 ? 0 : n > FG_CH ? FG_CH : n;
        mx = jc[r] > mx ? jc[r] : mx;
    }
    return mx;
}

/* Forward of one head. q [T, D], kT [D, ldT], v [T, D] (rounded inputs); o [T, D] and lse [T]
 * out (either may be NULL); work: fwd_work elements. sink: tile statistics and/or a trace of
 * this head, or NULL.
 * Rows go in blocks of RB, and up to FG blocks form a group that visits each key tile in turn:
 * the tile's K and V are then read from cache by every block of the group instead of from memory
 * by each (at long T they do not fit in cache: one block alone reads 2 bytes per FLOP). The
 * batched unfused form goes further, in phases over the whole group: every block's scores, then
 * every block's P̄, then every block's P̄V, FG_CH keys at a time so each chunk of K and V is read
 * from L1 by all blocks, then each row's Ō and ℓ. Each block keeps its own state, Ō and buffers,
 * and a row's operations and their order do not depend on the grouping (a chunk only splits a
 * row's key loop in order), so neither do the bits; only stochastic rounding, whose streams are
 * drawn in row order, and a trace window smaller than the group run blocks one at a time. */
static void SFX(fwd_head)(SFX(hctx_t) *cx, const R *q, const R *kT, const R *v, R *o, R *lse,
                          R *mrow, R *lrow, const tile_sink_t *sink, R *work) {
    const int T = cx->T, D = cx->D, Bc = cx->Bc, ns = SFX(fg_sets)(Bc);
    const tsc_policy_t *pol = cx->pol;
    R *S0 = work, *PA0 = S0 + (size_t)ns * RB * Bc, *PB0 = PA0 + (size_t)ns * RB * Bc;
    R *oacc_g = PB0 + (size_t)ns * RB * Bc; /* FG blocks' Ō, [FG, RB, D] */
    R *pv_g = oacc_g + (size_t)FG * RB * D; /* FG blocks' batched P̄V rows, [FG, RB, D] */
    R *pv1 = pv_g + (size_t)FG * RB * D, *side = pv1 + D;
    rst_t *st = cx->st;
    const int n_kt = (T + Bc - 1) / Bc;
    tsc_attn_trace_t *win = sink && sink->tr && sink->tr->row_fn ? sink->tr : NULL;
    /* the batched P̄V (below): where its four-row kernel exists, and no stage draws random numbers
     * (stochastic rounding's draws must keep the row-by-row order) */
    int batch_pv = 0, stoch = 0;
    for (int i = 0; i < TSC_STAGE_COUNT; i++) stoch |= st[i].mode == TSC_ROUND_STOCHASTIC;
#if TMPL_SIMD == 16
    batch_pv = !pol->fused && pol->softmax == TSC_SOFTMAX_ONLINE && D == 64 && st[TSC_STAGE_ACC].id && !stoch;
#endif
    const int phased = batch_pv && ns == FG;
    /* ℓ's tile sums in key order (sum_ordered's TSC_SUM_SEQ) computed by the batched form */
    const int seq = pol->sum_order == TSC_SUM_SEQ && !pol->vexp;
    int fg = stoch ? 1 : FG;
    if (win && win->rows / RB < fg) fg = win->rows / RB;
    SFX(fwork_t) wg[FG];
    for (int g = 0; g < FG; g++) {
        const size_t so = (size_t)(ns > 1 ? g : 0) * RB * Bc;
        wg[g] = (SFX(fwork_t)){S0 + so, PA0 + so, PB0 + so, oacc_g + (size_t)g * RB * D, pv1, side,
                               pv_g + (size_t)g * RB * D};
    }
    for (int T0 = 0; T0 < T; T0 += fg * RB) {
        const int ng = (T - T0 + RB - 1) / RB < fg ? (T - T0 + RB - 1) / RB : fg;
        SFX(fblk_t) bks[FG];
        int live[FG], nrs[FG];
        for (int g = 0; g < ng; g++) {
            SFX(fblk_t) *bk = &bks[g];
            const int t0 = T0 + g * RB, nr = T - t0 < RB ? T - t0 : RB;
            bk->t0 = t0;
            nrs[g] = nr;
            for (int r = 0; r < nr; r++) {
                bk->m[r] = -INFINITY;
                bk->l[r] = 0;
            }
            for (size_t i = 0; i < (size_t)nr * D; i++) wg[g].OACC[i] = 0;
            if (win) SFX(win_reset)(win, t0, nr);
            live[g] = 1;
        }
        for (int jt = 0; jt < n_kt; jt++) {
            const int j0 = jt * Bc, jn = (T - j0 < Bc) ? T - j0 : Bc;
            int act[FG], anyk[FG], any_g = 0;
            for (int g = 0; g < ng; g++) {
                act[g] = anyk[g] = 0;
                if (!live[g]) continue;
                SFX(fblk_t) *bk = &bks[g];
                for (int r = 0; r < nrs[g]; r++) {
                    bk->jv[r] = SFX(n_valid)(cx, bk->t0 + r, j0, jn);
                    anyk[g] |= bk->jv[r] > 0;
                }
                /* causal: once no row of the block sees a key here, no later tile has one either */
                if (!anyk[g] && !pol->torch_quirks) {
                    live[g] = 0;
                    continue;
                }
                act[g] = any_g = 1;
            }
            if (!any_g) break;
            if (phased) {
                int go[FG][RB], jp[FG][RB];
                for (int c0 = 0; c0 < jn; c0 += FG_CH) /* every block's scores, a chunk of keys at a time */
                    for (int g = 0; g < ng; g++) {
                        if (!anyk[g]) continue;
                        int jc[RB];
                        if (SFX(chunk_keys)(bks[g].jv, nrs[g], c0, jc)) SFX(rowdot_rows)(cx, q + (size_t)bks[g].t0 * D, nrs[g], kT, j0 + c0, jc, wg[g].S + c0, Bc);
                    }
                for (int g = 0; g < ng; g++) { /* every row's P̄ (a last, partial block: its whole tile) */
                    if (!act[g]) continue;
                    if (nrs[g] < RB) {
                        for (int r = 0; r < nrs[g]; r++) SFX(fwd_row_tile)(cx, &bks[g], r, j0, jn, v, &wg[g]);
                        continue;
                    }
                    for (int r = 0; r < RB; r++) {
                        go[g][r] = SFX(fwd_row_pre)(cx, &bks[g], r, j0, jn, v, &wg[g]);
                        jp[g][r] = go[g][r] ? bks[g].jv[r] : 0;
                    }
                    for (size_t i = 0; i < (size_t)RB * D; i++) wg[g].PV[i] = 0;
                }
                for (int c0 = 0; c0 < jn; c0 += FG_CH) /* every block's P̄V chains, a chunk at a time */
                    for (int g = 0; g < ng; g++) {
                        if (!act[g] || nrs[g] < RB) continue;
                        int jc[RB];
                        if (SFX(chunk_keys)(jp[g], RB, c0, jc))
                            SFX(axpy_multi)(cx, wg[g].PV, wg[g].PA + c0, Bc, v + (size_t)(j0 + c0) * D, RB, jc,
                                            &st[TSC_STAGE_ACC]);
                    }
                for (int g = 0; g < ng; g++) { /* each row's Ō and ℓ */
                    if (!act[g]) continue;
                    if (nrs[g] == RB) SFX(fwd_block_post)(cx, &bks[g], j0, jn, v, &wg[g], go[g], jp[g], seq);
                    if (sink) SFX(fwd_record)(cx, sink, &bks[g], nrs[g], bks[g].t0, jt, v, &wg[g]);
                }
                continue;
            }
            for (int g = 0; g < ng; g++) {
                if (!act[g]) continue;
                SFX(fblk_t) *bk = &bks[g];
                SFX(fwork_t) *w = &wg[g];
                const int t0 = bk->t0, nr = nrs[g];
                if (anyk[g]) SFX(rowdot_rows)(cx, q + (size_t)t0 * D, nr, kT, j0, bk->jv, w->S, Bc);
                if (batch_pv && nr == RB) {
                    /* unfused, deterministic: every row's P̄ first, then the four rows' P̄V chains
                     * together (axpy_multi: 16 independent FMA chains, where one row has 4), then
                     * each row's Ō and ℓ; a row's operations and their order are those of
                     * fwd_row_tile */
                    int go[RB], jv[RB];
                    for (int r = 0; r < RB; r++) {
                        go[r] = SFX(fwd_row_pre)(cx, bk, r, j0, jn, v, w);
                        jv[r] = go[r] ? bk->jv[r] : 0;
                    }
                    for (size_t i = 0; i < (size_t)RB * D; i++) w->PV[i] = 0;
                    SFX(axpy_multi)(cx, w->PV, w->PA, Bc, v + (size_t)j0 * D, RB, jv, &st[TSC_STAGE_ACC]);
                    SFX(fwd_block_post)(cx, bk, j0, jn, v, w, go, jv, seq);
                } else {
                    for (int r = 0; r < nr; r++) SFX(fwd_row_tile)(cx, bk, r, j0, jn, v, w);
                }
                if (pol->fused && anyk[g] && pol->softmax == TSC_SOFTMAX_ONLINE)
                    SFX(fwd_fused_tile)(cx, bk, nr, j0, v, w);
                if (sink) SFX(fwd_record)(cx, sink, bk, nr, t0, jt, v, w);
            }
        }
        for (int g = 0; g < ng; g++) {
            const SFX(fblk_t) *bk = &bks[g];
            const int t0 = bk->t0, nr = nrs[g];
            for (int r = 0; r < nr; r++) {
                const int t = t0 + r;
                const int mat = pol->softmax == TSC_SOFTMAX_MATERIALIZED;
                if (o) { /* O = R_O(Ō / ℓ) (materialized: R_O(Ō)), as loops that vectorise */
                    R *orow = o + (size_t)t * D;
                    const R *ob = wg[g].OACC + (size_t)r * D, l = bk->l[r];
                    if (mat) for (int d = 0; d < D; d++) orow[d] = ob[d];
                    else if (pol->norm == TSC_SOFTMAX_NORM_RECIP) {
                        const R il = (R)1 / l; /* the CUDA kernels' O = Ō·(1/ℓ) */
                        for (int d = 0; d < D; d++) orow[d] = ob[d] * il;
                    } else for (int d = 0; d < D; d++) orow[d] = ob[d] / l;
                    SFX(rnd_arr)(orow, D, &st[TSC_STAGE_O]);
                }
                if (mrow) {
                    mrow[t] = bk->m[r];
                    lrow[t] = bk->l[r];
                }
                if (lse || win) { /* win implies lse (run_head): one rounding, as without a trace */
                    /* exp2 kernels: fma(m', α, log(ℓ·2^-offset)) (m' unscaled; the FP8 offset taken out) */
                    R lv;
                    if (cx->expm == TSC_EXP_E) {
                        lv = SFX(rnd)(bk->m[r] + LOGR(bk->l[r]), &st[TSC_STAGE_LSE]);
                    } else if (cx->expm == TSC_EXP_EXP2_SCALED || cx->expm == TSC_EXP_EXP2_PRESCALED) {
                        const R l2 = (R)log2((double)bk->l[r]), e2 = bk->m[r] + l2; /* m_i + log2(l_i) */
                        lv = SFX(rnd)(e2 * (R)0.693147180559945309417, &st[TSC_STAGE_LSE]); /* natural units */
                    } else if (cx->expm == TSC_EXP_EXP2_MEMEFF) { /* mi / kLog2e + log(s_prime), mi = R(m'·σ) */
                        const R mi = bk->m[r] * cx->sig, a = mi / (R)1.4426950408889634074f;
                        lv = SFX(rnd)(a + LOGR(bk->l[r]), &st[TSC_STAGE_LSE]);
                    } else {
                        lv = SFX(rnd)(FMA(bk->m[r], cx->alpha_f, LOGR(bk->l[r] * (R)ldexp(1.0, -pol->p_offset))),
                                      &st[TSC_STAGE_LSE]);
                    }
                    if (lse) lse[t] = lv;
                    if (win) win->lse[t % win->rows] = (double)lv;
                }
            }
            if (win) win->row_fn(win->row_ctx, win, t0, nr);
        }
    }
}

/* Work elements bwd_head needs. */
static size_t SFX(bwd_work)(int Br, int Bc, int D) {
    return 5 * (size_t)RB * Bc + ((size_t)Br + 2 * (size_t)Bc) * D;
}

/* One term dO·O of lp δ's row sum added to acc: fused (one fma) when the delta-prod stage is at
 * least the compute type, else the product rounded to delta-prod, then added (both in ACC).
 * hp δ (an FP32 O) and dpp δ form their products in the compute type: one fma each. */
static inline R SFX(delta_add)(rst_t *st, int lp, R x, R y, R acc) {
    if (!lp || st[TSC_STAGE_DELTA_PROD].id) return SFX(rnd)(FMA(x, y, acc), &st[TSC_STAGE_ACC]);
    return SFX(rnd)(acc + SFX(rnd)(x * y, &st[TSC_STAGE_DELTA_PROD]), &st[TSC_STAGE_ACC]);
}

/* dS of one row from P (pf), dP and δ, α placed as the policy's ds_scale says, rounded to DS. */
static inline void SFX(ds_row)(SFX(hctx_t) *cx, const R *pf, const R *dp, R dlt, R *ds, int n) {
    const R alpha = cx->ds_alpha;
    rst_t *rs = &cx->st[TSC_STAGE_DS];
    switch (cx->pol->ds_scale) {
    case TSC_DS_SCALE_FIRST:
        for (int jj = 0; jj < n; jj++) ds[jj] = (pf[jj] * alpha) * (dp[jj] - dlt);
        break;
    case TSC_DS_SCALE_ROUNDED:
        for (int jj = 0; jj < n; jj++) ds[jj] = pf[jj] * (dp[jj] - dlt);
        SFX(rnd_arr)(ds, n, rs);
        for (int jj = 0; jj < n; jj++) ds[jj] = ds[jj] * alpha;
        break;
    default:
        for (int jj = 0; jj < n; jj++) ds[jj] = (pf[jj] * (dp[jj] - dlt)) * alpha;
        break;
    }
    SFX(rnd_arr)(ds, n, rs);
}

/* Backward of one head. q, dO [T, D], k, v [T, D] with kT, vT [D, ldT]; lse [T] of the forward
 * (materialized softmax: mrow, lrow [T], its row max and ℓ, instead); osrc [T, D] the O δ reads
 * (NULL for dpp); outputs delta [T], dq [T, D], dk, dv [T, D] (this query head's contribution,
 * rounded to GRAD). With dq NULL only δ is computed (dk, dv unused). work: bwd_work elements. */
static void SFX(bwd_head)(SFX(hctx_t) *cx, const R *q, const R *k, const R *kT, const R *v,
                          const R *vT, const R *dO, const R *lse, const R *mrow, const R *lrow,
                          const R *osrc, R *delta, R *dq, R *dk, R *dv, R *work) {
    const int T = cx->T, D = cx->D, Bc = cx->Bc, Br = cx->Br;
    const tsc_policy_t *pol = cx->pol;
    rst_t *st = cx->st, *acc = &st[TSC_STAGE_ACC];
    const size_t W = (size_t)RB * Bc;
    R *S = work, *PR = S + W, *PF = PR + W, *DP = PF + W, *DS = DP + W;
    R *dq_part = DS + W, *dk_part = dq_part + (size_t)Br * D, *dv_part = dk_part + (size_t)Bc * D;
    const int n_kt = (T + Bc - 1) / Bc, n_qt = (T + Br - 1) / Br;
    const int fused = pol->fused;
    (void)v;
    (void)k;

    /* For rows t0..t0+nr of one key tile: S, P_j = exp(R_EXPARG_BWD(S_j − LSE)) (PF), p_j = R_P(P_j)
     * (PR), dP_j = R_DP(Σ_d fma dO·v) (DP). Materialized softmax: PF = the forward's R_P(P̄_j / ℓ),
     * PR = R_PBAR_PV(PF), the P V operand. */
    #define BLOCK_P_DP(t0, nr, j0, jv) do { \
        SFX(rowdot_rows)(cx, q + (size_t)(t0) * D, (nr), kT, (j0), (jv), S, Bc); \
        SFX(rowdot_rows)(cx, dO + (size_t)(t0) * D, (nr), vT, (j0), (jv), DP, Bc); \
        for (int r_ = 0; r_ < (nr); r_++) { \
            const int n_ = (jv)[r_]; \
            R *s_ = S + (size_t)r_ * Bc, *pf_ = PF + (size_t)r_ * Bc, *pr_ = PR + (size_t)r_ * Bc; \
            SFX(scores_finish)(cx, s_, n_); \
            if (mrow) { \
                const R mt_ = mrow[(t0) + r_], lt_ = lrow[(t0) + r_]; \
                const int rc_ = pol->norm == TSC_SOFTMAX_NORM_RECIP; \
                for (int jj = 0; jj < n_; jj++) pf_[jj] = EXPR(SFX(rnd)(s_[jj] - mt_, &st[TSC_STAGE_EXPARG])); \
                for (int jj = 0; jj < n_; jj++) pf_[jj] = SFX(mat_norm)(st, pf_[jj], lt_, (R)1 / lt_, rc_); \
                for (int jj = 0; jj < n_; jj++) pr_[jj] = pf_[jj]; \
                SFX(rnd_arr)(pr_, n_, &st[TSC_STAGE_PBAR_PV]); \
            } else { \
                const R lt_ = lse[(t0) + r_]; \
                SFX(pexp_bwd_arr)(cx, s_, pf_, n_, lt_, &st[TSC_STAGE_EXPARG_BWD]); \
                for (int jj = 0; jj < n_; jj++) pr_[jj] = pf_[jj]; \
                SFX(rnd_arr)(pr_, n_, &st[TSC_STAGE_P]); \
            } \
            SFX(rnd_arr)(DP + (size_t)r_ * Bc, n_, &st[TSC_STAGE_DP]); \
        } \
    } while (0)

    const int lpd = pol->delta_src == TSC_DELTA_LP_O;
    for (int t0 = 0; t0 < T; t0 += RB) {
        const int nr = T - t0 < RB ? T - t0 : RB;
        R dl[RB];
        for (int r = 0; r < nr; r++) {
            const R *x = dO + (size_t)(t0 + r) * D, *y = osrc ? osrc + (size_t)(t0 + r) * D : NULL;
            dl[r] = 0;
            if (y && pol->sum_order != TSC_SUM_SEQ) { /* torch: the product tensor, then its sum */
                rst_t *pr = lpd && !st[TSC_STAGE_DELTA_PROD].id ? &st[TSC_STAGE_DELTA_PROD] : acc;
                for (int d = 0; d < D; d++) dq_part[d] = SFX(rnd)(x[d] * y[d], pr);
                dl[r] = SFX(sum_ordered)(pol, dq_part, D, acc);
            } else if (y) {
                for (int d = 0; d < D; d++) dl[r] = SFX(delta_add)(st, lpd, x[d], y[d], dl[r]);
            }
        }
        if (!osrc) {
            for (int jt = 0; jt < n_kt; jt++) {
                const int j0 = jt * Bc, jn = (T - j0 < Bc) ? T - j0 : Bc;
                int jv[RB], any = 0;
                for (int r = 0; r < nr; r++) any |= (jv[r] = SFX(n_valid)(cx, t0 + r, j0, jn)) > 0;
                if (!any) break;
                BLOCK_P_DP(t0, nr, j0, jv);
                for (int r = 0; r < nr; r++)
                    for (int jj = 0; jj < jv[r]; jj++)
                        dl[r] = SFX(delta_add)(st, 0, DP[(size_t)r * Bc + jj], PF[(size_t)r * Bc + jj], dl[r]);
            }
        }
        for (int r = 0; r < nr; r++) delta[t0 + r] = SFX(rnd)(dl[r], &st[TSC_STAGE_DELTA]);
    }
    if (!dq) return; /* δ only: no gradient was asked for */

    for (size_t i = 0; i < (size_t)T * D; i++) dq[i] = dk[i] = dv[i] = 0;
    for (int it = 0; it < n_qt; it++) {
        const int ti0 = it * Br, tn = (T - ti0 < Br) ? T - ti0 : Br;
        for (int jt = 0; jt < n_kt; jt++) {
            const int j0 = jt * Bc, jn = (T - j0 < Bc) ? T - j0 : Bc;
            if (cx->causal && j0 > ti0 + tn - 1) break;
            if (!fused) {
                for (size_t i = 0; i < (size_t)tn * D; i++) dq_part[i] = 0;
                for (size_t i = 0; i < (size_t)jn * D; i++) dk_part[i] = dv_part[i] = 0;
            }
            for (int t0 = ti0; t0 < ti0 + tn; t0 += RB) {
                const int nr = ti0 + tn - t0 < RB ? ti0 + tn - t0 : RB;
                int jv[RB], any = 0;
                for (int r = 0; r < nr; r++) any |= (jv[r] = SFX(n_valid)(cx, t0 + r, j0, jn)) > 0;
                if (!any) continue;
                BLOCK_P_DP(t0, nr, j0, jv);
                for (int r = 0; r < nr; r++)
                    SFX(ds_row)(cx, PF + (size_t)r * Bc, DP + (size_t)r * Bc, delta[t0 + r],
                                DS + (size_t)r * Bc, jv[r]);
                /* each target element is its own sequential chain: dV[j] and dK[j] by query,
                 * dQ[t] by key, so doing the three arrays one after another changes nothing */
                const size_t jo = (size_t)j0 * D;
                const R *qb = q + (size_t)t0 * D, *dOb = dO + (size_t)t0 * D;
                if (fused) {
                    SFX(rank1_multi)(cx, dv + jo, PR, Bc, dOb, nr, jv, &st[TSC_STAGE_DV]);
                    SFX(rank1_multi)(cx, dk + jo, DS, Bc, qb, nr, jv, &st[TSC_STAGE_DK]);
                    SFX(axpy_multi)(cx, dq + (size_t)t0 * D, DS, Bc, k + jo, nr, jv, &st[TSC_STAGE_DQ]);
                } else {
                    SFX(rank1_multi)(cx, dv_part, PR, Bc, dOb, nr, jv, acc);
                    SFX(rank1_multi)(cx, dk_part, DS, Bc, qb, nr, jv, acc);
                    SFX(axpy_multi)(cx, dq_part + (size_t)(t0 - ti0) * D, DS, Bc, k + jo, nr, jv, acc);
                }
            }
            if (!fused) {
                rst_t *rq = &st[TSC_STAGE_DQ], *rk = &st[TSC_STAGE_DK], *rv = &st[TSC_STAGE_DV];
                SFX(acc_round)(dq + (size_t)ti0 * D, dq_part, tn * D, rq);
                SFX(acc_round)(dk + (size_t)j0 * D, dk_part, jn * D, rk);
                SFX(acc_round)(dv + (size_t)j0 * D, dv_part, jn * D, rv);
            }
        }
    }
    #undef BLOCK_P_DP
    if (cx->pol->scale == TSC_SCALE_QK) /* dQ = √α·(dS K̃), dK = √α·(dSᵀ Q̃) */
        for (size_t i = 0; i < (size_t)T * D; i++) {
            dq[i] = dq[i] * cx->qk_scale;
            dk[i] = dk[i] * cx->qk_scale;
        }
    SFX(rnd_arr)(dq, T * D, &st[TSC_STAGE_GRAD]);
    if (cx->pol->gqa_sum == TSC_GQA_SUM_WIDE && cx->G > 1) return; /* the group sum rounds them, once */
    SFX(rnd_arr)(dk, T * D, &st[TSC_STAGE_GRAD]);
    SFX(rnd_arr)(dv, T * D, &st[TSC_STAGE_GRAD]);
}

/* Loads one [T, D] head from the caller's array (float or double) into R, rounded to stage rs. */
static void SFX(load)(const void *src, tsc_attn_dtype_t dt, size_t off, size_t n, R *dst, rst_t *rs) {
    if (dt == TSC_ATTN_F32) {
        const float *s = (const float *)src + off;
#if TMPL_DOUBLE
        for (size_t i = 0; i < n; i++) dst[i] = SFX(rnd)((double)s[i], rs);
#else
        for (size_t i = 0; i < n; i++) dst[i] = s[i];
        SFX(rnd_arr)(dst, (int)n, rs);
#endif
    } else {
        const double *s = (const double *)src + off;
#if TMPL_DOUBLE
        for (size_t i = 0; i < n; i++) dst[i] = SFX(rnd)(s[i], rs);
#else
        /* round once from the double: to FP32 itself, or straight to the narrower format */
        for (size_t i = 0; i < n; i++)
            dst[i] = rs->mode == TSC_ROUND_NEAREST_EVEN && rs->fmt == TSC_FMT_FP32
                         ? (float)s[i] : (float)tsc_round(s[i], rs->fmt, rs->mode, &rs->rng);
#endif
    }
}

static void SFX(store)(const R *src, size_t n, void *dst, tsc_attn_dtype_t dt, size_t off) {
    if (!dst) return;
    if (dt == TSC_ATTN_F32) {
        float *d = (float *)dst + off;
        for (size_t i = 0; i < n; i++) d[i] = (float)src[i];
    } else {
        double *d = (double *)dst + off;
        for (size_t i = 0; i < n; i++) d[i] = (double)src[i];
    }
}

/* at [D, T] (row stride ld) = a [T, D]ᵀ, in 16 × 16 blocks (column-order writes thrash the cache). */
static void SFX(transpose)(const R *a, int T, int D, R *at, int ld) {
    for (int t0 = 0; t0 < T; t0 += 16)
        for (int d0 = 0; d0 < D; d0 += 16) {
            const int t1 = t0 + 16 < T ? t0 + 16 : T, d1 = d0 + 16 < D ? d0 + 16 : D;
            for (int d = d0; d < d1; d++)
                for (int t = t0; t < t1; t++) at[(size_t)d * ld + t] = a[(size_t)t * D + d];
        }
}

/* Elements of scratch run_head needs for one head (the same for every head of a call). */
static size_t SFX(head_mem)(const tsc_policy_t *pol, const tsc_attn_dims_t *dims, int bwd) {
    const int T = dims->T, D = dims->D;
    const int Bc = pol->block_k < T ? pol->block_k : T, Br = pol->block_q < T ? pol->block_q : T;
    const size_t TD = (size_t)T * D, KT = (size_t)D * attn_ld(T);
    /* forward: q v o k [T, D], kT [D, ldT], lse, mrow, lrow [T], work; backward adds vT
     * [D, ldT], dO osrc dq [T, D], delta [T] and its work */
    size_t n = 4 * TD + KT + 3 * (size_t)T + SFX(fwd_work)(Bc, D);
    if (bwd) n += 3 * TD + KT + (size_t)T + SFX(bwd_work)(Br, Bc, D);
    return n;
}

/* One (b, h): forward (and backward); sink: its tile statistics and/or trace, or NULL. dk_h/dv_h
 * receive this head's GRAD-rounded dK/dV as R; both NULL with io->dout set: the backward
 * computes δ only. mem: head_mem elements of scratch (reused from head to head: a fresh
 * allocation per head costs its page faults every time). */
static void SFX(run_head)(const tsc_policy_t *pol, const tsc_policy_t *hp, const tsc_attn_dims_t *dims,
                          const tsc_attn_io_t *io, int b, int h, const tile_sink_t *sink, R *dk_h, R *dv_h,
                          R *mem) {
    const int T = dims->T, D = dims->D;
    const int Bc = pol->block_k < T ? pol->block_k : T;
    const int hk = h / (dims->H / dims->Hkv);
    const size_t TD = (size_t)T * D, KT = (size_t)D * attn_ld(T);
    const size_t qoff = ((size_t)b * dims->H + h) * TD, koff = ((size_t)b * dims->Hkv + hk) * TD;
    const int bwd = io->dout != NULL;
    const size_t fw = SFX(fwd_work)(Bc, D);
    const int mat = pol->softmax == TSC_SOFTMAX_MATERIALIZED;
    R *q = mem, *kT = q + TD, *v = kT + KT, *o = v + TD, *kk = o + TD, *lse = kk + TD;
    R *mrow = mat ? lse + T : NULL, *lrow = mat ? lse + 2 * T : NULL, *work = lse + 3 * T;
    R *vT = NULL, *dO = NULL, *osrc = NULL, *dq = NULL, *delta = NULL, *bwork = NULL;
    if (bwd) {
        vT = work + fw; dO = vT + KT; osrc = dO + TD; dq = osrc + TD; delta = dq + TD; bwork = delta + T;
    }
    SFX(hctx_t) cx;
    SFX(hctx_init)(&cx, pol, dims, b, h, 0);
    SFX(load)(io->q, io->dtype, qoff, TD, q, &cx.st[TSC_STAGE_Q]);
    SFX(load)(io->k, io->dtype, koff, TD, kk, &cx.st[TSC_STAGE_K]);
    /* The products first, then one rounding pass (rnd_arr's vectorised loops), except under
     * stochastic rounding, whose one stream takes q's and k's draws interleaved. */
    if (pol->exp == TSC_EXP_EXP2_PRESCALED) { /* q = (q * SM_SCALE * RCP_LN2).to(MATMUL_PRECISION) */
        for (size_t i = 0; i < TD; i++) {
            const R a = q[i] * cx.alpha_f;
            q[i] = a * cx.c2;
        }
        SFX(rnd_arr)(q, (int)TD, &cx.st[TSC_STAGE_Q]);
    }
    if (pol->scale == TSC_SCALE_QK) { /* Q̃ = R_S(Q·√α), K̃ = R_S(K·√α); the scores then take no α */
        rst_t *rs = &cx.st[TSC_STAGE_S];
        if (rs->mode == TSC_ROUND_STOCHASTIC) {
            for (size_t i = 0; i < TD; i++) {
                q[i] = SFX(rnd)(q[i] * cx.qk_scale, rs);
                kk[i] = SFX(rnd)(kk[i] * cx.qk_scale, rs);
            }
        } else {
            for (size_t i = 0; i < TD; i++) q[i] *= cx.qk_scale, kk[i] *= cx.qk_scale;
            SFX(rnd_arr)(q, (int)TD, rs);
            SFX(rnd_arr)(kk, (int)TD, rs);
        }
    }
    SFX(transpose)(kk, T, D, kT, attn_ld(T));
    SFX(load)(io->v, io->dtype, koff, TD, v, &cx.st[TSC_STAGE_V]);
    SFX(fwd_head)(&cx, q, kT, v, o, lse, mrow, lrow, sink, work);
    SFX(store)(o, TD, io->o, io->dtype, qoff);
    SFX(store)(lse, (size_t)T, io->lse, io->dtype, (size_t)b * dims->H * T + (size_t)h * T);
    if (!bwd) return;
    SFX(transpose)(v, T, D, vT, attn_ld(T));
    SFX(load)(io->dout, io->dtype, qoff, TD, dO, &cx.st[TSC_STAGE_DO]);
    const R *src = NULL;
    if (pol->delta_src == TSC_DELTA_LP_O) {
        src = o;
    } else if (pol->delta_src == TSC_DELTA_HP_O) {
        SFX(hctx_t) hx;
        SFX(hctx_init)(&hx, hp, dims, b, h, 1);
        SFX(fwd_head)(&hx, q, kT, v, osrc, NULL, NULL, NULL, NULL, work);
        src = osrc;
    }
    SFX(hctx_t) bx;
    SFX(hctx_init)(&bx, pol, dims, b, h, 2);
    SFX(bwd_head)(&bx, q, kk, kT, v, vT, dO, lse, mrow, lrow, src, delta, dk_h ? dq : NULL, dk_h, dv_h, bwork);
    SFX(store)(delta, (size_t)T, io->delta, io->dtype, (size_t)b * dims->H * T + (size_t)h * T);
    if (dk_h) SFX(store)(dq, TD, io->dq, io->dtype, qoff);
}

#undef EXPR
#undef EXP2R
#undef LOGR
#undef FMA
#undef FAST_AXPY_ROWS
#ifdef VW
#undef VW
#undef V
#undef VLOAD
#undef VSTORE
#undef VSET1
#undef VZERO
#undef VFMA
#undef VMASK
#undef VMASK_LEFT
#undef VMASKZ_LOAD
#undef VMASK_STORE
#endif
#undef FAST_RANK1
#undef RB
#undef FG
#undef FG_BC
#undef FG_CH
#endif /* TSC_ATTN_TMPL */
#ifndef TSC_ATTN_TMPL
typedef int tsc_attention_tmpl_unused_t; /* built on its own: an empty but valid unit */
#endif
