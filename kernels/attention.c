/* attention.c: the CPU attention reference under precision policies (tsc_attention.h).
 *
 * The per-head kernels live in attention_tmpl.c and are instantiated here four times:
 * float (portable), float compiled for AVX-512 + FMA and float compiled for AVX2 + FMA (the
 * generic loops, vectorised by the compiler; chosen at run time, for a CPU without AVX-512),
 * and double (used when a policy has an FP64 stage). All run the same statements in the same
 * order; every multiply-add is an explicit fma, and contraction is off, so the float builds
 * give the same bits (tested). Without FMA in the target, the portable build's fmaf is a libm
 * call per multiply-add: the AVX2 build exists because that is 30-100x slower. */
#if defined(__OPTIMIZE__) && !defined(__clang__)
/* The hot loops only pay off vectorised; O2's very-cheap cost model leaves most of them scalar. */
#pragma GCC optimize("O3")
#endif
/* No implicit a*b+c fusion: which expressions fuse must not depend on the target ISA. (gcc
 * ignores the standard pragma; clang honours it and has no optimize pragma.) */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#else
#pragma GCC optimize("fp-contract=off")
#endif

#include "attention_internal.h"

#include "cpu_internal.h"
#include "fbits_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef TSC_ATTN_X86
#include <immintrin.h>
#endif

/* A stage's rounding, with its own stochastic-rounding stream. id: the compute type already
 * holds the stage's format, so rounding is the identity. drop: for a format with FP32's exponent
 * range and p < 23 mantissa bits (bf16, tf32, e8m*), the 23 - p bits that rounding a float
 * clears on its bits; else 0. */
typedef struct {
    tsc_format_t fmt;
    tsc_round_t mode;
    int id, drop;
    tsc_rng_t rng;
} rst_t;

/* BF16 / TF32 from float by bit operations (the same results as tsc_round, tested). */
static inline float bf16_rne(float x) { return tsc_f32_from_bits(tsc_f32_keep_rne(tsc_f32_bits(x), 16)); }
static inline float bf16_rz(float x) { return tsc_f32_from_bits(tsc_f32_keep_rz(tsc_f32_bits(x), 16)); }
static inline float tf32_rne(float x) { return tsc_f32_from_bits(tsc_f32_keep_rne(tsc_f32_bits(x), 13)); }
static inline float tf32_rz(float x) { return tsc_f32_from_bits(tsc_f32_keep_rz(tsc_f32_bits(x), 13)); }

/* Where the forward records one head's per-tile numbers: its slices of the tile statistics
 * ([T, n_kt] each) and/or its trace; NULL members are not written. */
typedef struct {
    tsc_attn_trace_t *tr;
    double *row_max;
    int32_t *tie_count, *tie_count_eps, *pbar_one;
} tile_sink_t;

/* Row stride of a transposed [D, T] operand: T rounded up to 16 floats, and to an odd number of
 * 64-byte lines, so that the D rows a dot-product loop walks down do not all fall in the same
 * cache sets (with T = 1024 they are 4 KiB apart and the L1 holds only a few of them). */
static inline int attn_ld(int T) {
    const int ld = (T + 15) / 16 * 16;
    return (ld / 16) % 2 ? ld : ld + 16;
}

#define TSC_ATTN_TMPL 1

#define R float
#define TMPL_DOUBLE 0
#define TMPL_SIMD 0
#define SFX(name) name##_f
#include "attention_tmpl.c"
#undef SFX
#undef TMPL_SIMD

#ifdef TSC_ATTN_X86
/* The SIMD instances: the same template compiled for a target (GCC's target pragma; clang's
 * attribute pragma, which applies the target to every function the instance defines). */
#ifdef __clang__
#define TSC_TARGET_BEGIN_512 _Pragma("clang attribute push(__attribute__((target(\"avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,bmi,bmi2\"))), apply_to = function)")
#define TSC_TARGET_BEGIN_256 _Pragma("clang attribute push(__attribute__((target(\"avx2,fma,bmi,bmi2\"))), apply_to = function)")
#define TSC_TARGET_END _Pragma("clang attribute pop")
#else
#define TSC_TARGET_BEGIN_512 _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,bmi,bmi2\")")
#define TSC_TARGET_BEGIN_256 _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma,bmi,bmi2\")")
#define TSC_TARGET_END _Pragma("GCC pop_options")
#endif
TSC_TARGET_BEGIN_512
#define SFX(name) name##_x
#define TMPL_SIMD 16
#include "attention_tmpl.c"
#undef TMPL_SIMD
#undef SFX
TSC_TARGET_END
TSC_TARGET_BEGIN_256
#define SFX(name) name##_v
#define TMPL_SIMD 8
#include "attention_tmpl.c"
#undef TMPL_SIMD
#undef SFX
TSC_TARGET_END
#endif
#undef R
#undef TMPL_DOUBLE

#define R double
#define TMPL_DOUBLE 1
#define TMPL_SIMD 0
#define SFX(name) name##_d
#include "attention_tmpl.c"
#undef SFX
#undef TMPL_SIMD
#undef R
#undef TMPL_DOUBLE

float tsc_attn_expf(float x) { return expf_f(x); }
float tsc_attn_exp2_fa4(float x) { return exp2_poly_f(x); }
float tsc_attn_exp_u20(float x) { return exp_u20_f(x); }

const char *tsc_attn_simd_name(void) {
#ifdef TSC_ATTN_X86
    if (tsc_cpu_has(TSC_CPU_AVX512_ATTN)) return "AVX-512";
    if (tsc_cpu_has(TSC_CPU_AVX2_FMA)) return "AVX2";
#endif
    return "portable";
}
float tsc_attn_logf(float x) { return tsc_hd_logf(x); }

/* ---- SIMD selection ---- */

static int simd_on = 1;

int tsc_attn_simd_available(void) {
#ifdef TSC_ATTN_X86
    return tsc_cpu_has(TSC_CPU_AVX512_ATTN) || tsc_cpu_has(TSC_CPU_AVX2_FMA);
#else
    return 0;
#endif
}

int tsc_attn_simd_set(int enable) {
    int old = simd_on;
    simd_on = enable ? 1 : 0;
    return old;
}

/* ---- driver ---- */

/* The sink of head (b, h): its trace (the last one naming it) and its tile statistics slice;
 * NULL when it has neither. */
static const tile_sink_t *sink_for(const tsc_attn_opts_t *opts, int b, int h, tile_sink_t *sk) {
    memset(sk, 0, sizeof *sk);
    for (int i = 0; i < opts->n_traces; i++)
        if (opts->traces[i].b == b && opts->traces[i].h == h) sk->tr = &opts->traces[i];
    const tsc_attn_tile_stats_t *ts = opts->tiles;
    if (ts) {
        const size_t off = ((size_t)b * ts->H + h) * (size_t)ts->T * ts->n_kt;
        sk->row_max = ts->row_max + off;
        sk->tie_count = ts->tie_count + off;
        sk->tie_count_eps = ts->tie_count_eps + off;
        sk->pbar_one = ts->pbar_one + off;
    }
    return sk->tr || sk->row_max ? sk : NULL;
}

#define RUN_ALL(SUF, RT)                                                                          \
    static tsc_status_t run_all##SUF(const tsc_policy_t *pol, const tsc_policy_t *hp,             \
                                     const tsc_attn_dims_t *dims, const tsc_attn_io_t *io,        \
                                     const tsc_attn_opts_t *opts) {                               \
        const int H = dims->H, BH = dims->B * dims->H, G = dims->H / dims->Hkv;                   \
        const size_t TD = (size_t)dims->T * dims->D;                                              \
        /* bwd: gradients asked for; with dout but no dq, dk, dv the backward computes δ only */ \
        const int bwd = io->dout != NULL && (io->dq || io->dk || io->dv);                         \
        /* G == 1: each head's dK, dV are the result, stored from the thread's scratch; else     \
         * every head's are kept for the group sums below */                                     \
        const int direct = bwd && G == 1;                                                         \
        RT *dk_all = NULL, *dv_all = NULL;                                                        \
        if (bwd && !direct) {                                                                     \
            dk_all = malloc((size_t)BH * TD * sizeof(RT));                                        \
            dv_all = malloc((size_t)BH * TD * sizeof(RT));                                        \
            if (!dk_all || !dv_all) {                                                             \
                free(dk_all);                                                                     \
                free(dv_all);                                                                     \
                return tsc_error_set(TSC_ERR_NOMEM, "attention: out of memory for %d heads of "   \
                                     "[%d, %d] gradients", BH, dims->T, dims->D);                 \
            }                                                                                     \
        }                                                                                         \
        int fail = 0;                                                                             \
        const size_t hmem0 = head_mem##SUF(pol, dims, io->dout != NULL);                          \
        const size_t hmem = hmem0 + (direct ? 2 * TD : 0);                                        \
        _Pragma("omp parallel reduction(|: fail)")                                                \
        { /* one scratch per thread, reused for each of its heads */                             \
            RT *mem = malloc(hmem * sizeof(RT));                                                  \
            fail = mem == NULL;                                                                   \
            _Pragma("omp for schedule(dynamic, 1)")                                               \
            for (int bh = 0; bh < BH; bh++) {                                                     \
                const int b = bh / H, h = bh % H;                                                 \
                tile_sink_t sink;                                                                 \
                const tile_sink_t *sk = sink_for(opts, b, h, &sink);                              \
                if (!mem) continue;                                                               \
                RT *dkh = direct ? mem + hmem0 : bwd ? dk_all + (size_t)bh * TD : NULL;           \
                RT *dvh = direct ? dkh + TD : bwd ? dv_all + (size_t)bh * TD : NULL;              \
                run_head##SUF(pol, hp, dims, io, b, h, sk, dkh, dvh, mem);                        \
                if (direct) {                                                                     \
                    store##SUF(dkh, TD, io->dk, io->dtype, (size_t)bh * TD);                      \
                    store##SUF(dvh, TD, io->dv, io->dtype, (size_t)bh * TD);                      \
                }                                                                                 \
            }                                                                                     \
            free(mem);                                                                            \
        }                                                                                         \
        if (!fail && bwd && !direct) {                                                            \
            /* GQA: a kv head's gradient is the sum of its group's, in head order (ACC), then   \
             * rounded to GRAD (gqa-sum each: rounded to GRAD after each add). */                \
            RT *sum = malloc(TD * sizeof(RT) * 2);                                                \
            if (!sum) fail = 1;                                                                   \
            for (int b = 0; !fail && b < dims->B; b++)                                            \
                for (int hk = 0; hk < dims->Hkv; hk++) {                                          \
                    hctx_t##SUF cx;                                                               \
                    hctx_init##SUF(&cx, pol, dims, b, hk, 3);                                     \
                    const size_t base = ((size_t)b * H + (size_t)hk * G) * TD;                    \
                    const size_t out = ((size_t)b * dims->Hkv + hk) * TD;                         \
                    for (int w = 0; w < 2; w++) {                                                 \
                        const RT *src = (w ? dv_all : dk_all) + base;                             \
                        RT *acc = sum + (size_t)w * TD;                                           \
                        for (size_t i = 0; i < TD; i++) acc[i] = src[i];                          \
                        rst_t *to = &cx.st[pol->gqa_sum == TSC_GQA_SUM_EACH ? TSC_STAGE_GRAD      \
                                                                            : TSC_STAGE_ACC];     \
                        for (int g = 1; g < G; g++)                                               \
                            for (size_t i = 0; i < TD; i++)                                       \
                                acc[i] = rnd##SUF(acc[i] + src[(size_t)g * TD + i], to);          \
                        rnd_arr##SUF(acc, (int)TD, &cx.st[TSC_STAGE_GRAD]);                       \
                        store##SUF(acc, TD, w ? io->dv : io->dk, io->dtype, out);                 \
                    }                                                                             \
                }                                                                                 \
            free(sum);                                                                            \
        }                                                                                         \
        free(dk_all);                                                                             \
        free(dv_all);                                                                             \
        if (fail) return tsc_error_set(TSC_ERR_NOMEM, "attention: out of memory (T=%d, D=%d)",    \
                                       dims->T, dims->D);                                         \
        return TSC_OK;                                                                            \
    }

RUN_ALL(_f, float)
#ifdef TSC_ATTN_X86
RUN_ALL(_x, float)
RUN_ALL(_v, float)
#endif
RUN_ALL(_d, double)

/* The CPU backends: the portable instance (simd 0) or the widest SIMD one the CPU has; FP64-compute policies
 * run the double instance on both. Arguments were checked by tsc_attn_run_with. */
static tsc_status_t cpu_run(int simd, const tsc_policy_t *pol, const tsc_attn_dims_t *dims,
                            const tsc_attn_io_t *io, const tsc_attn_opts_t *opts) {
    /* δ from an FP32 O: the same structure with every stage FP32 (FP64 when ACC is FP64) */
    tsc_policy_t hp = *pol;
    for (int s = 0; s < TSC_STAGE_COUNT; s++) {
        hp.fmt[s] = pol->fmt[TSC_STAGE_ACC] == TSC_FMT_FP64 ? TSC_FMT_FP64 : TSC_FMT_FP32;
        hp.mode[s] = TSC_ROUND_NEAREST_EVEN;
    }
    if (tsc_policy_uses_fp64(pol)) return run_all_d(pol, &hp, dims, io, opts);
#ifdef TSC_ATTN_X86
    if (simd && tsc_cpu_has(TSC_CPU_AVX512_ATTN)) return run_all_x(pol, &hp, dims, io, opts);
    if (simd && tsc_cpu_has(TSC_CPU_AVX2_FMA)) return run_all_v(pol, &hp, dims, io, opts);
#else
    (void)simd;
#endif
    return run_all_f(pol, &hp, dims, io, opts);
}

static tsc_status_t cpu_ref_run(const tsc_policy_t *pol, const tsc_attn_dims_t *dims, const tsc_attn_io_t *io,
                                const tsc_attn_opts_t *opts) {
    return cpu_run(0, pol, dims, io, opts);
}

static int cpu_ref_available(void) { return 1; }

/* Everything: both I/O dtypes, FP64 stages, exact (and fast, which is the same here), forward,
 * backward, +sr, tile statistics, traces. */
#define CPU_CAPS                                                                                   \
    (TSC_ATTN_CAP_F32 | TSC_ATTN_CAP_F64 | TSC_ATTN_CAP_FP64_STAGES | TSC_ATTN_CAP_EXACT |         \
     TSC_ATTN_CAP_FAST | TSC_ATTN_CAP_FORWARD | TSC_ATTN_CAP_BACKWARD | TSC_ATTN_CAP_STOCHASTIC |  \
     TSC_ATTN_CAP_TILE_STATS | TSC_ATTN_CAP_TRACE)

const tsc_attn_backend_t tsc_attn_backend_cpu_ref = {
    "cpu-ref", "portable C reference (defines the bits; OpenMP across heads)", CPU_CAPS, cpu_ref_available,
    cpu_ref_run};

#ifdef TSC_ATTN_X86
static tsc_status_t cpu_simd_run(const tsc_policy_t *pol, const tsc_attn_dims_t *dims, const tsc_attn_io_t *io,
                                 const tsc_attn_opts_t *opts) {
    return cpu_run(1, pol, dims, io, opts);
}

const tsc_attn_backend_t tsc_attn_backend_cpu_simd = {
    "cpu-simd", "AVX-512 + FMA register-blocked CPU path, or AVX2 + FMA without AVX-512 (same bits as cpu-ref)", CPU_CAPS,
    tsc_attn_simd_available, cpu_simd_run};
#endif

const tsc_attn_backend_t *tsc_attn_backend_default(void) {
#ifdef TSC_ATTN_X86
    if (simd_on && tsc_attn_simd_available()) return &tsc_attn_backend_cpu_simd;
#endif
    return &tsc_attn_backend_cpu_ref;
}

double tsc_attn_flops(const tsc_attn_dims_t *dims, int backward) {
    double T = dims->T, pairs = dims->causal ? T * (T + 1) / 2 : T * T;
    return (backward ? 10.0 : 4.0) * pairs * dims->D * dims->B * dims->H;
}

/* ---- traces ---- */

/* Fills the held rows of every array with "not visited" (S −inf, P̄ 0, tiles NaN / -1, PV NaN). */
static void trace_fill(tsc_attn_trace_t *tr) {
    const size_t RT = (size_t)tr->rows * tr->T, RK = (size_t)tr->rows * tr->n_kt, RKD = RK * tr->D;
    if (tr->s) for (size_t i = 0; i < RT; i++) { tr->s[i] = -INFINITY; tr->pbar[i] = 0; }
    if (tr->tile_max)
        for (size_t i = 0; i < RK; i++) {
            tr->tile_max[i] = tr->run_max[i] = tr->l[i] = NAN;
            tr->ties_exact[i] = tr->ties_eps[i] = tr->pbar_one[i] = -1;
        }
    if (tr->pv) for (size_t i = 0; i < RKD; i++) tr->pv[i] = tr->oacc[i] = NAN;
    if (tr->lse) for (int i = 0; i < tr->rows; i++) tr->lse[i] = NAN;
}

static tsc_status_t trace_alloc(tsc_attn_trace_t *tr, int T, int D, int block_k, int flags, int rows,
                                int window) {
    tr->T = T;
    tr->D = D;
    tr->block_k = block_k;
    tr->n_kt = (T + block_k - 1) / block_k;
    tr->flags = flags;
    tr->rows = rows;
    const size_t RT = (size_t)rows * T, RK = (size_t)rows * tr->n_kt, RKD = RK * D;
    int ok = 1;
#define ALLOC(field, n, type) do { tr->field = malloc((n) * sizeof(type)); ok &= tr->field != NULL; } while (0)
    if (flags & TSC_TRACE_SCORES) { ALLOC(s, RT, double); ALLOC(pbar, RT, double); }
    if (flags & TSC_TRACE_TILES) {
        ALLOC(tile_max, RK, double); ALLOC(run_max, RK, double); ALLOC(l, RK, double);
        ALLOC(ties_exact, RK, int32_t); ALLOC(ties_eps, RK, int32_t); ALLOC(pbar_one, RK, int32_t);
    }
    if (flags & TSC_TRACE_PV) { ALLOC(pv, RKD, double); ALLOC(oacc, RKD, double); }
    if (window) ALLOC(lse, (size_t)rows, double);
#undef ALLOC
    if (!ok) {
        tsc_attn_trace_free(tr);
        return tsc_error_set(TSC_ERR_NOMEM, "attention trace: out of memory for T=%d D=%d flags=%d rows=%d", T,
                             D, flags, rows);
    }
    trace_fill(tr);
    return TSC_OK;
}

tsc_status_t tsc_attn_trace_init(tsc_attn_trace_t *tr, int T, int D, int block_k, int flags) {
    if (!tr) return tsc_error_set(TSC_ERR_ARG, "attention trace: NULL");
    memset(tr, 0, sizeof *tr);
    if (T < 1 || D < 1 || block_k < 1 || T > 65536 || D > 65536)
        return tsc_error_set(TSC_ERR_ARG, "attention trace: bad sizes T=%d D=%d block_k=%d", T, D, block_k);
    return trace_alloc(tr, T, D, block_k, flags, T, 0);
}

tsc_status_t tsc_attn_trace_init_rows(tsc_attn_trace_t *tr, int T, int D, int block_k, int flags, int rows,
                                      tsc_attn_trace_row_fn fn, void *ctx) {
    if (!tr) return tsc_error_set(TSC_ERR_ARG, "attention trace: NULL");
    memset(tr, 0, sizeof *tr);
    if (T < 1 || D < 1 || block_k < 1 || T > (1 << 24) || D > 65536 || rows < 1 ||
        rows % TSC_ATTN_TRACE_ROW_BLOCK || !fn)
        return tsc_error_set(TSC_ERR_ARG, "attention trace: bad sizes T=%d D=%d block_k=%d rows=%d (or no "
                             "row function)", T, D, block_k, rows);
    tr->row_fn = fn;
    tr->row_ctx = ctx;
    return trace_alloc(tr, T, D, block_k, flags, rows, 1);
}

void tsc_attn_trace_free(tsc_attn_trace_t *tr) {
    if (!tr) return;
    free(tr->s); free(tr->pbar); free(tr->tile_max); free(tr->run_max); free(tr->l);
    free(tr->ties_exact); free(tr->ties_eps); free(tr->pbar_one); free(tr->pv); free(tr->oacc);
    free(tr->lse);
    int b = tr->b, h = tr->h;
    memset(tr, 0, sizeof *tr);
    tr->b = b;
    tr->h = h;
}

/* ---- comparison checker ---- */

#define COMPARE_BODY                                                                              \
    memset(res, 0, sizeof *res);                                                                  \
    res->n = n;                                                                                   \
    double worst_excess = -1;                                                                     \
    for (size_t i = 0; i < n; i++) {                                                              \
        double r = ref[i], o = out[i];                                                            \
        int bad;                                                                                  \
        double excess = 0;                                                                        \
        if (isnan(r) || isnan(o)) {                                                               \
            res->n_nan++;                                                                         \
            bad = !(isnan(r) && isnan(o) && allow_nan);                                           \
            excess = bad ? INFINITY : 0;                                                          \
        } else if (isinf(r) || isinf(o)) {                                                        \
            bad = r != o;                                                                         \
            excess = bad ? INFINITY : 0;                                                          \
        } else {                                                                                  \
            double ad = fabs(r - o), tol = atol + rtol * fabs(r);                                 \
            if (ad > res->max_abs) { res->max_abs = ad; res->max_abs_at = i; }                    \
            if (r != 0 && ad / fabs(r) > res->max_rel) { res->max_rel = ad / fabs(r); res->max_rel_at = i; } \
            bad = ad > tol;                                                                       \
            excess = ad - tol;                                                                    \
        }                                                                                         \
        if (bad) {                                                                                \
            res->n_mismatch++;                                                                    \
            if (excess > worst_excess) {                                                          \
                worst_excess = excess;                                                            \
                res->worst = i;                                                                   \
                res->worst_ref = r;                                                               \
                res->worst_out = o;                                                               \
            }                                                                                     \
        }                                                                                         \
    }

void tsc_compare_f64(const double *ref, const double *out, size_t n, double atol, double rtol,
                     int allow_nan, tsc_compare_t *res) {
    COMPARE_BODY
}

void tsc_compare_f32(const float *ref, const float *out, size_t n, double atol, double rtol,
                     int allow_nan, tsc_compare_t *res) {
    COMPARE_BODY
}

char *tsc_compare_str(const tsc_compare_t *res, double atol, double rtol, char *buf, size_t size) {
    if (!buf || size == 0) return buf;
    snprintf(buf, size, "%zu of %zu mismatch (atol %g, rtol %g); worst [%zu] ref %.17g out %.17g; "
             "max abs %.3g at %zu, max rel %.3g at %zu", res->n_mismatch, res->n, atol, rtol, res->worst,
             res->worst_ref, res->worst_out, res->max_abs, res->max_abs_at, res->max_rel, res->max_rel_at);
    return buf;
}
