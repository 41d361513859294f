/* Every registered attention backend against the reference (cpu-ref): bit equality of O, LSE,
 * δ, dQ, dK, dV and of every tile statistic in exact mode, over shapes (causal and not, GQA, T
 * not a multiple of the tile, D 64 / 128 / odd, one-row tiles, T < 4) and policies. Each output
 * of the backend under test lies between guard regions that must be intact after the run. The
 * checker itself is tested by planting faults, and the tile statistics are recomputed from a
 * trace's scores so that a wrong definition shared by all backends would be caught too. */
#include "tsc_attention.h"
#include "tsc_attn_cuda.h"
#include "tsc_formats.h"
#include "tsc_test.h"

#include <stdlib.h>

static uint64_t rng_state = 0x5eed0123ULL;

/* ---- guarded buffers ---- */

#define GUARD 64
static unsigned char guard_byte(size_t i) { return (unsigned char)(0xA5 ^ (i * 29)); }

/* bytes payload bytes between two GUARD-byte canaries; the payload is filled with junk (0x7f
 * bytes) so an element the backend never writes shows up as a mismatch. */
static void *galloc(size_t bytes) {
    unsigned char *b = malloc(bytes + 2 * GUARD + sizeof(size_t));
    if (!b) abort();
    memcpy(b, &bytes, sizeof(size_t));
    unsigned char *p = b + sizeof(size_t) + GUARD;
    for (size_t i = 0; i < GUARD; i++) p[-1 - (long)i] = p[bytes + i] = guard_byte(i);
    memset(p, 0x7f, bytes);
    return p;
}

static unsigned char *gbase(void *p) { return (unsigned char *)p - GUARD - sizeof(size_t); }

/* Number of damaged canary bytes around p (0 for NULL). */
static int gcheck(void *p) {
    if (!p) return 0;
    size_t bytes;
    memcpy(&bytes, gbase(p), sizeof(size_t));
    const unsigned char *q = p;
    int bad = 0;
    for (size_t i = 0; i < GUARD; i++) bad += (q[-1 - (long)i] != guard_byte(i)) + (q[bytes + i] != guard_byte(i));
    return bad;
}

static void gfree(void *p) {
    if (p) free(gbase(p));
}

/* ---- bit checker ---- */

enum { K_F32, K_F64, K_I32 };
typedef struct {
    size_t n, n_mismatch, worst;
    double worst_ref, worst_out, worst_diff;
} bitcmp_t;

static double elem(const void *a, int kind, size_t i) {
    return kind == K_F32 ? ((const float *)a)[i] : kind == K_F64 ? ((const double *)a)[i] : ((const int32_t *)a)[i];
}

/* Element-wise bit comparison; the worst mismatch is the largest |ref − out| (NaN against a
 * number, or +0 against −0, ranks as infinite). */
static void bitcmp(const void *ref, const void *out, size_t n, int kind, bitcmp_t *r) {
    const size_t es = kind == K_F64 ? 8 : 4;
    memset(r, 0, sizeof *r);
    r->n = n;
    r->worst_diff = -1;
    for (size_t i = 0; i < n; i++) {
        if (memcmp((const char *)ref + i * es, (const char *)out + i * es, es) == 0) continue;
        double a = elem(ref, kind, i), b = elem(out, kind, i), diff = fabs(a - b);
        if (!(diff > 0)) diff = INFINITY;
        r->n_mismatch++;
        if (diff > r->worst_diff) {
            r->worst_diff = diff;
            r->worst = i;
            r->worst_ref = a;
            r->worst_out = b;
        }
    }
}

/* CHECKs bit equality; on failure prints the count, the worst index and both values. */
static void expect_bits(const char *ctx, const char *what, const void *ref, const void *out, size_t n, int kind) {
    bitcmp_t r;
    bitcmp(ref, out, n, kind, &r);
    CHECKF(r.n_mismatch == 0, "%s: %s: %zu of %zu differ; worst [%zu] ref %.17g out %.17g", ctx, what,
           r.n_mismatch, r.n, r.worst, r.worst_ref, r.worst_out);
}

/* ---- one problem: inputs, outputs of a run ---- */

typedef struct {
    tsc_attn_dims_t d;
    const char *tiles;  /* policy suffix giving the tile sizes */
} shape_t;

typedef struct {
    size_t nq, nk, nl, es;
    tsc_attn_dtype_t dt;
    void *in;
    void *out[6];  /* o, lse, delta, dq, dk, dv */
    tsc_attn_tile_stats_t ts;
    int guarded;
} run_t;

static const char *const out_names[6] = {"O", "LSE", "delta", "dQ", "dK", "dV"};

static size_t out_len(const run_t *r, int i) { return i == 0 || i == 3 ? r->nq : i < 3 ? r->nl : r->nk; }

static void *alloc_as(size_t bytes, int guarded) {
    if (guarded) return galloc(bytes);
    void *p = malloc(bytes);
    if (!p) abort();
    return p;
}

static void run_alloc(run_t *r, const tsc_attn_dims_t *d, const tsc_policy_t *p, tsc_attn_dtype_t dt,
                      int guarded) {
    memset(r, 0, sizeof *r);
    r->nq = (size_t)d->B * d->H * d->T * d->D;
    r->nk = (size_t)d->B * d->Hkv * d->T * d->D;
    r->nl = (size_t)d->B * d->H * d->T;
    r->dt = dt;
    r->es = dt == TSC_ATTN_F64 ? 8 : 4;
    r->guarded = guarded;
    for (int i = 0; i < 6; i++) r->out[i] = alloc_as(out_len(r, i) * r->es, guarded);
    tsc_attn_tile_stats_t *ts = &r->ts;
    ts->B = d->B;
    ts->H = d->H;
    ts->T = d->T;
    ts->block_k = p->block_k;
    ts->n_kt = (d->T + p->block_k - 1) / p->block_k;
    const size_t nt = tsc_attn_tile_stats_size(ts);
    ts->row_max = alloc_as(nt * sizeof(double), guarded);
    ts->tie_count = alloc_as(nt * sizeof(int32_t), guarded);
    ts->tie_count_eps = alloc_as(nt * sizeof(int32_t), guarded);
    ts->pbar_one = alloc_as(nt * sizeof(int32_t), guarded);
}

static void run_free(run_t *r) {
    void (*f)(void *) = r->guarded ? gfree : free;
    for (int i = 0; i < 6; i++) f(r->out[i]);
    f(r->ts.row_max);
    f(r->ts.tie_count);
    f(r->ts.tie_count_eps);
    f(r->ts.pbar_one);
}

static int run_guards(run_t *r) {
    int bad = 0;
    for (int i = 0; i < 6; i++) bad += gcheck(r->out[i]);
    bad += gcheck(r->ts.row_max) + gcheck(r->ts.tie_count) + gcheck(r->ts.tie_count_eps) + gcheck(r->ts.pbar_one);
    return bad;
}

/* Inputs q, k, v, dO in dt: normal values, with planted ties (key j repeats key j − 1 when
 * j % 5 == 0, and every head's row 2 of q is zero, so all its scores tie at 0). */
static void *make_inputs(const tsc_attn_dims_t *d, tsc_attn_dtype_t dt, size_t nq, size_t nk) {
    const size_t n = 2 * nq + 2 * nk, D = (size_t)d->D;
    double *x = malloc(n * sizeof(double));
    if (!x) abort();
    for (size_t i = 0; i < n; i++) x[i] = 1.5 * tsc_test_nrand(&rng_state);
    for (size_t i = 0; i < nq; i++)
        if ((i / D) % (size_t)d->T == 2) x[i] = 0;
    for (int w = 0; w < 2; w++) { /* k and v */
        double *kv = x + nq + (size_t)w * nk;
        for (size_t row = 0; row < nk / D; row++)
            if (row % (size_t)d->T % 5 == 0 && row % (size_t)d->T > 0) memcpy(kv + row * D, kv + (row - 1) * D, D * sizeof(double));
    }
    if (dt == TSC_ATTN_F64) return x;
    float *f = malloc(n * sizeof(float));
    if (!f) abort();
    for (size_t i = 0; i < n; i++) f[i] = (float)x[i];
    free(x);
    return f;
}

static tsc_attn_io_t io_of(const run_t *r, const void *in, int bwd) {
    const char *c = in;
    tsc_attn_io_t io = {r->dt, c, c + r->nq * r->es, c + (r->nq + r->nk) * r->es,
                        bwd ? c + (r->nq + 2 * r->nk) * r->es : NULL,
                        r->out[0], r->out[1], NULL, NULL, NULL, NULL};
    if (bwd) {
        io.delta = r->out[2];
        io.dq = r->out[3];
        io.dk = r->out[4];
        io.dv = r->out[5];
    }
    return io;
}

/* Compares run b against reference a: outputs (only the forward's when !bwd) and tiles. */
static void compare_runs(const char *ctx, const run_t *a, const run_t *b, int bwd) {
    const int kind = a->dt == TSC_ATTN_F64 ? K_F64 : K_F32;
    for (int i = 0; i < (bwd ? 6 : 2); i++) expect_bits(ctx, out_names[i], a->out[i], b->out[i], out_len(a, i), kind);
    const size_t nt = tsc_attn_tile_stats_size(&a->ts);
    expect_bits(ctx, "tiles/row_max", a->ts.row_max, b->ts.row_max, nt, K_F64);
    expect_bits(ctx, "tiles/tie_count", a->ts.tie_count, b->ts.tie_count, nt, K_I32);
    expect_bits(ctx, "tiles/tie_count_eps", a->ts.tie_count_eps, b->ts.tie_count_eps, nt, K_I32);
    expect_bits(ctx, "tiles/pbar_one", a->ts.pbar_one, b->ts.pbar_one, nt, K_I32);
}

/* ---- the sweep ---- */

static const shape_t shapes[] = {
    {{1, 2, 2, 37, 64, 1, 0.125}, "+tile:q=16,k=16"},  /* causal, T not a multiple of the tile */
    {{1, 2, 2, 40, 64, 0, 0.125}, "+tile:q=16,k=16"},  /* not causal */
    {{2, 4, 2, 29, 17, 1, 0.25}, "+tile:q=8,k=12"},    /* GQA 2:1, odd D */
    {{1, 3, 1, 21, 33, 0, 0.2}, "+tile:q=4,k=8"},      /* GQA 3:1, odd D, not causal */
    {{1, 2, 1, 19, 64, 1, 0.125}, "+tile:q=1,k=1"},    /* one-row, one-key tiles */
    {{1, 1, 1, 23, 16, 1, 0.3}, "+tile:q=1,k=16"},     /* one-row query tiles */
    {{1, 1, 1, 3, 64, 1, 0.5}, "+tile:q=16,k=16"},     /* T < 4: a partial row block only */
    {{1, 2, 2, 50, 128, 1, 0.09}, "+tile:q=32,k=64"},  /* D = 128, a partial 64-key block */
};

static const char *const policies[] = {"fp32", "bf16-fa2", "bf16-torch", "bf16-fa2+stable", "bf16-torch+stable",
                                       "fp8-fa3", "fp8-fa3+stable", "fp64", "bf16-fa2+unfused+hp-delta",
                                       "bf16-torch+sr:seed=9+dpp-delta", "fp16-torch+ds-scale:first+bf16:delta-prod",
                                       "bf16-fa2+scale:qk+dpp-delta", "bf16-torch+scale:s-lp+gqa-sum:each+stable",
                                       "fp16-fa2+rz:pv,oacc,l+tf32:s+unfused", "bf16-torch+fused+ds-scale:rounded",
                                       "bf16-torch+e8m4:pbar-pv,pv,oacc", "bf16-fa2+e8m2:pbar-pv,dp+e8m6:o+rz:o",
                                       "bf16-torch+e8m1:pv,oacc+rz:pv", "bf16-torch+sum:aten16+stable",
                                       "bf16-sdpa-cpu-flash", "bf16-torch+vexp:u20x8+gqa-sum:each"};

#define N_SHAPES (int)(sizeof shapes / sizeof *shapes)
#define N_POLICIES (int)(sizeof policies / sizeof *policies)

/* Whether the GPU kernels' arithmetic covers policy p (their documented scope): stages in fp32,
 * tf32, bf16, fp16 or e8m6 ... e8m1, no stochastic rounding, the online softmax, sums in key order. The backends built on
 * it (cpu-rowwise, cuda) must refuse every other policy with TSC_ERR_UNSUPPORTED. */
static int gpu_scope(const tsc_policy_t *p) {
    for (int s = 0; s < TSC_STAGE_COUNT; s++) {
        if (p->fmt[s] != TSC_FMT_FP32 && p->fmt[s] != TSC_FMT_TF32 && p->fmt[s] != TSC_FMT_BF16 &&
            p->fmt[s] != TSC_FMT_FP16 && (p->fmt[s] < TSC_FMT_E8M6 || p->fmt[s] > TSC_FMT_E8M1))
            return 0;
        if (p->mode[s] == TSC_ROUND_STOCHASTIC && p->fmt[s] != TSC_FMT_FP32) return 0;
    }
    return p->softmax == TSC_SOFTMAX_ONLINE && p->sum_order == TSC_SUM_SEQ && p->vexp == TSC_VEXP_OFF;
}
static int gpu_arith(const tsc_attn_backend_t *be) {
    return strcmp(be->name, "cpu-rowwise") == 0 || strcmp(be->name, "cuda") == 0;
}

static int n_refused;

/* One (backend, shape, policy, dtype) case against the reference run ref. */
static void check_case(const tsc_attn_backend_t *be, const char *ctx, const tsc_policy_t *p, const tsc_attn_dims_t *d,
                       const void *in, const run_t *ref, tsc_attn_mode_t mode) {
    run_t got;
    run_alloc(&got, d, p, ref->dt, 1);
    tsc_attn_io_t io = io_of(&got, in, 1);
    tsc_attn_opts_t opt = {mode, &got.ts, NULL, 0};
    tsc_status_t st = tsc_attn_run_with(be, p, d, &io, &opt);
    if (gpu_arith(be) && !gpu_scope(p)) {
        CHECKF(st == TSC_ERR_UNSUPPORTED &&
                   (strstr(tsc_error_last(), "GPU kernels") || strstr(tsc_error_last(), "does not support")),
               "%s: outside the GPU kernels' scope, expected a refusal naming them, got %d: %s", ctx, (int)st,
               tsc_error_last());
        n_refused++;
        run_free(&got);
        return;
    }
    CHECKF(st == TSC_OK, "%s: %s", ctx, tsc_error_last());
    if (st == TSC_OK) compare_runs(ctx, ref, &got, 1);
    CHECKF(run_guards(&got) == 0, "%s: %d guard bytes overwritten", ctx, run_guards(&got));
    run_free(&got);
}

/* The reference itself: outputs must not change when tile statistics are asked for, and
 * tsc_attn_run (the default backend) must agree. */
static void check_ref_consistency(const char *ctx, const tsc_policy_t *p, const tsc_attn_dims_t *d, const void *in,
                                  const run_t *ref) {
    run_t plain;
    run_alloc(&plain, d, p, ref->dt, 1);
    tsc_attn_io_t io = io_of(&plain, in, 1);
    CHECKF(tsc_attn_run(p, d, &io, NULL, 0) == TSC_OK, "%s: %s", ctx, tsc_error_last());
    const int kind = ref->dt == TSC_ATTN_F64 ? K_F64 : K_F32;
    for (int i = 0; i < 6; i++) expect_bits(ctx, out_names[i], ref->out[i], plain.out[i], out_len(ref, i), kind);
    CHECKF(run_guards(&plain) == 0, "%s: tsc_attn_run overwrote guard bytes", ctx);
    run_free(&plain);
}

static void check_sweep(void) {
    const tsc_attn_backend_t *cref = tsc_attn_backend_get("cpu-ref");
    CHECK(cref != NULL);
    if (!cref) return;
    int cases = 0;
    for (int si = 0; si < N_SHAPES; si++)
        for (int pi = 0; pi < N_POLICIES; pi++)
            for (int dti = 0; dti < 2; dti++) {
                if (dti == 1 && si % 2 == 1) continue; /* double I/O on half the shapes */
                const tsc_attn_dims_t *d = &shapes[si].d;
                char pname[128], ctx[256];
                snprintf(pname, sizeof pname, "%s%s", policies[pi], shapes[si].tiles);
                tsc_policy_t p;
                CHECKF(tsc_policy_parse(pname, &p) == TSC_OK, "%s: %s", pname, tsc_error_last());
                const tsc_attn_dtype_t dt = dti ? TSC_ATTN_F64 : TSC_ATTN_F32;
                run_t ref;
                run_alloc(&ref, d, &p, dt, 0);
                void *in = make_inputs(d, dt, ref.nq, ref.nk);
                tsc_attn_io_t io = io_of(&ref, in, 1);
                tsc_attn_opts_t opt = {TSC_ATTN_EXACT, &ref.ts, NULL, 0};
                CHECKF(tsc_attn_run_with(cref, &p, d, &io, &opt) == TSC_OK, "%s: %s", pname, tsc_error_last());
                snprintf(ctx, sizeof ctx, "tsc_attn_run vs cpu-ref %s B=%d H=%d Hkv=%d T=%d D=%d causal=%d %s", pname, d->B, d->H,
                         d->Hkv, d->T, d->D, d->causal, dti ? "f64" : "f32");
                check_ref_consistency(ctx, &p, d, in, &ref);
                for (int bi = 0; bi < tsc_attn_backend_count(); bi++) {
                    const tsc_attn_backend_t *be = tsc_attn_backend_at(bi);
                    if (!be->available() || !(be->caps & TSC_ATTN_CAP_EXACT)) continue;
                    if (dti == 1 && !(be->caps & TSC_ATTN_CAP_F64)) continue; /* float I/O only */
                    for (int mode = 0; mode < 2; mode++) {
                        if (!(be->caps & (mode ? TSC_ATTN_CAP_FAST : TSC_ATTN_CAP_EXACT))) continue;
                        /* fast mode promises the reference's bits only on the CPU backends */
                        if (mode && strncmp(be->name, "cpu-", 4) != 0) continue;
                        snprintf(ctx, sizeof ctx, "%s%s %s B=%d H=%d Hkv=%d T=%d D=%d causal=%d %s", be->name,
                                 mode ? " (fast)" : "", pname, d->B, d->H, d->Hkv, d->T, d->D, d->causal,
                                 dti ? "f64" : "f32");
                        check_case(be, ctx, &p, d, in, &ref, mode ? TSC_ATTN_FAST : TSC_ATTN_EXACT);
                        cases++;
                    }
                }
                free(in);
                run_free(&ref);
            }
    printf("backend sweep: %d cases over %d backend(s), %d of them refused as outside the GPU kernels' scope\n",
           cases, tsc_attn_backend_count(), n_refused);
}

/* ---- the tile statistics themselves ---- */

/* Recomputes head (b, h)'s tile statistics from a trace's S and P̄ (the definitions in
 * tsc_attention.h) and checks them, and the trace's own per-tile counts, against ts. */
static void check_tiles_from_trace(const char *ctx, const tsc_policy_t *p, const tsc_attn_dims_t *d,
                                   const tsc_attn_trace_t *tr, const tsc_attn_tile_stats_t *ts) {
    const int T = d->T, Bc = p->block_k, n_kt = ts->n_kt;
    const double eps = p->stable.enabled ? p->stable.eps : 1e-3;
    const int f64 = tsc_policy_uses_fp64(p);
    const size_t base = ((size_t)tr->b * d->H + tr->h) * (size_t)T * n_kt;
    int bad = 0, visited = 0, ties_seen = 0;
    for (int t = 0; t < T; t++)
        for (int jt = 0; jt < n_kt; jt++) {
            const int j0 = jt * Bc, jn = T - j0 < Bc ? T - j0 : Bc;
            int n = d->causal ? (t + 1 - j0 < 0 ? 0 : (t + 1 - j0 > jn ? jn : t + 1 - j0)) : jn;
            const size_t ti = (size_t)t * n_kt + jt, at = base + ti;
            double mx = -INFINITY;
            int ties = 0, ties_eps = 0, ones = 0;
            if (n == 0 && !p->torch_quirks) { /* never visited */
                bad += !isnan(ts->row_max[at]) || ts->tie_count[at] != -1 || ts->tie_count_eps[at] != -1 ||
                       ts->pbar_one[at] != -1;
                continue;
            }
            visited++;
            const double *s = tr->s + (size_t)t * T + j0, *pb = tr->pbar + (size_t)t * T + j0;
            for (int jj = 0; jj < n; jj++) mx = s[jj] > mx ? s[jj] : mx;
            /* R_ROWMAX(r_m − ε), the subtraction in the compute type */
            double thr = f64 ? mx - eps : (double)(float)(mx - (double)(float)eps);
            thr = tsc_round(thr, p->fmt[TSC_STAGE_ROWMAX], TSC_ROUND_NEAREST_EVEN, NULL);
            for (int jj = 0; jj < n; jj++) {
                ties += s[jj] == mx;
                ties_eps += s[jj] >= thr;
                ones += pb[jj] == 1;
            }
            ties_seen += ties > 1;
            int wrong = memcmp(&ts->row_max[at], &mx, sizeof mx) != 0 || ts->tie_count[at] != ties ||
                        ts->tie_count_eps[at] != ties_eps || ts->pbar_one[at] != ones;
            wrong |= tr->tile_max[ti] != ts->row_max[at] || tr->ties_exact[ti] != ts->tie_count[at] ||
                     tr->ties_eps[ti] != ts->tie_count_eps[at] || tr->pbar_one[ti] != ts->pbar_one[at];
            if (wrong && bad < 3)
                fprintf(stderr, "%s: t=%d tile %d: stats %.9g %d %d %d, recomputed %.9g %d %d %d, trace %.9g %d %d %d\n",
                        ctx, t, jt, ts->row_max[at], ts->tie_count[at], ts->tie_count_eps[at], ts->pbar_one[at], mx,
                        ties, ties_eps, ones, tr->tile_max[ti], tr->ties_exact[ti], tr->ties_eps[ti], tr->pbar_one[ti]);
            bad += wrong;
        }
    CHECKF(bad == 0, "%s: %d tile entries wrong", ctx, bad);
    CHECKF(visited > 0 && ties_seen > 0, "%s: %d visited tiles, %d with ties (the planted ties must show)", ctx,
           visited, ties_seen);
}

static void check_tile_definitions(void) {
    const char *pols[] = {"fp32+tile:q=8,k=8", "bf16-fa2+tile:q=8,k=16", "bf16-torch+stable+tile:q=8,k=8",
                          "fp64+tile:q=4,k=8", "fp8-fa3+tile:q=4,k=4"};
    const tsc_attn_dims_t dd[2] = {{2, 4, 2, 27, 20, 1, 0.3}, {1, 2, 1, 16, 9, 0, 0.4}};
    for (size_t pi = 0; pi < sizeof pols / sizeof *pols; pi++)
        for (int di = 0; di < 2; di++) {
            const tsc_attn_dims_t *d = &dd[di];
            tsc_policy_t p;
            CHECKF(tsc_policy_parse(pols[pi], &p) == TSC_OK, "%s", tsc_error_last());
            run_t r;
            run_alloc(&r, d, &p, TSC_ATTN_F32, 0);
            void *in = make_inputs(d, TSC_ATTN_F32, r.nq, r.nk);
            tsc_attn_io_t io = io_of(&r, in, 0);
            tsc_attn_trace_t tr[2];
            CHECK(tsc_attn_trace_init(&tr[0], d->T, d->D, p.block_k, TSC_TRACE_SCORES | TSC_TRACE_TILES) == TSC_OK);
            CHECK(tsc_attn_trace_init(&tr[1], d->T, d->D, p.block_k, TSC_TRACE_SCORES | TSC_TRACE_TILES) == TSC_OK);
            tr[0].b = 0;
            tr[0].h = d->H > 2 ? 1 : 0; /* two different heads (a second trace of one head stays empty) */
            tr[1].b = d->B - 1;
            tr[1].h = d->H - 1;
            /* stale values from an earlier use must be reset, not kept */
            for (size_t i = 0; i < tsc_attn_tile_stats_size(&r.ts); i++) {
                r.ts.row_max[i] = 7;
                r.ts.tie_count[i] = r.ts.tie_count_eps[i] = r.ts.pbar_one[i] = 7;
            }
            for (int bi = 0; bi < tsc_attn_backend_count(); bi++) {
                const tsc_attn_backend_t *be = tsc_attn_backend_at(bi);
                if (!be->available() || !(be->caps & TSC_ATTN_CAP_TRACE)) continue;
                tsc_attn_opts_t opt = {TSC_ATTN_EXACT, &r.ts, tr, 2};
                CHECKF(tsc_attn_run_with(be, &p, d, &io, &opt) == TSC_OK, "%s", tsc_error_last());
                char ctx[200];
                for (int k = 0; k < 2; k++) {
                    snprintf(ctx, sizeof ctx, "%s %s T=%d D=%d causal=%d head (%d, %d)", be->name, pols[pi], d->T,
                             d->D, d->causal, tr[k].b, tr[k].h);
                    check_tiles_from_trace(ctx, &p, d, &tr[k], &r.ts);
                }
            }
            tsc_attn_trace_free(&tr[0]);
            tsc_attn_trace_free(&tr[1]);
            free(in);
            run_free(&r);
        }
}

/* ---- the checker catches what it must ---- */

static void check_planted_faults(void) {
    const tsc_attn_dims_t d = {1, 2, 1, 24, 64, 1, 0.125};
    tsc_policy_t p;
    CHECK(tsc_policy_parse("bf16-fa2+tile:q=8,k=8", &p) == TSC_OK);
    run_t a, b;
    run_alloc(&a, &d, &p, TSC_ATTN_F32, 0);
    run_alloc(&b, &d, &p, TSC_ATTN_F32, 1);
    void *in = make_inputs(&d, TSC_ATTN_F32, a.nq, a.nk);
    tsc_attn_io_t ia = io_of(&a, in, 1), ib = io_of(&b, in, 1);
    tsc_attn_opts_t oa = {TSC_ATTN_EXACT, &a.ts, NULL, 0}, ob = {TSC_ATTN_EXACT, &b.ts, NULL, 0};
    CHECK(tsc_attn_run_with(NULL, &p, &d, &ia, &oa) == TSC_OK);
    CHECK(tsc_attn_run_with(NULL, &p, &d, &ib, &ob) == TSC_OK);
    bitcmp_t r;
    /* one flipped low bit of one dK element */
    float *dk = b.out[4];
    const size_t at = 301;
    uint32_t u;
    memcpy(&u, &dk[at], 4);
    u ^= 1;
    memcpy(&dk[at], &u, 4);
    bitcmp(a.out[4], b.out[4], a.nk, K_F32, &r);
    CHECK_EQ_INT(r.n_mismatch, 1);
    CHECK_EQ_INT(r.worst, at);
    CHECK(r.worst_ref == ((float *)a.out[4])[at] && r.worst_out == dk[at] && r.worst_ref != r.worst_out);
    /* a sign flip of a zero counts, and outranks a small difference */
    float *o = b.out[0];
    o[5] = nextafterf(o[5], INFINITY);
    ((float *)a.out[0])[9] = 0.0f;
    o[9] = -0.0f;
    bitcmp(a.out[0], b.out[0], a.nq, K_F32, &r);
    CHECK_EQ_INT(r.n_mismatch, 2);
    CHECK_EQ_INT(r.worst, 9);
    /* one tile count off by one */
    b.ts.pbar_one[17]++;
    bitcmp(a.ts.pbar_one, b.ts.pbar_one, tsc_attn_tile_stats_size(&a.ts), K_I32, &r);
    CHECK_EQ_INT(r.n_mismatch, 1);
    CHECK_EQ_INT(r.worst, 17);
    CHECK(r.worst_out == r.worst_ref + 1);
    /* canaries: one byte past the end, one byte before the start */
    CHECK_EQ_INT(run_guards(&b), 0);
    unsigned char *lse = b.out[1];
    lse[b.nl * 4] ^= 0x10;
    CHECK_EQ_INT(run_guards(&b), 1);
    lse[b.nl * 4] ^= 0x10;
    ((unsigned char *)b.ts.row_max)[-1] ^= 1;
    CHECK_EQ_INT(run_guards(&b), 1);
    ((unsigned char *)b.ts.row_max)[-1] ^= 1;
    CHECK_EQ_INT(run_guards(&b), 0);
    free(in);
    run_free(&a);
    run_free(&b);
}

/* ---- registry and capability checks ---- */

static int fake_calls;
static int fake_available_flag;
static int fake_available(void) { return fake_available_flag; }
static tsc_status_t fake_run(const tsc_policy_t *pol, const tsc_attn_dims_t *dims, const tsc_attn_io_t *io,
                             const tsc_attn_opts_t *opts) {
    (void)pol, (void)dims, (void)io, (void)opts;
    fake_calls++;
    return TSC_OK;
}

static void check_registry(void) {
    const int n = tsc_attn_backend_count();
    CHECK(n >= 1);
    CHECK(tsc_attn_backend_at(-1) == NULL);
    CHECK(tsc_attn_backend_at(n) == NULL);
    CHECK(tsc_attn_backend_get(NULL) == NULL);
    CHECK(tsc_attn_backend_get("no-such-backend") == NULL);
    const tsc_attn_backend_t *cref = tsc_attn_backend_get("cpu-ref");
    CHECK(cref != NULL && cref == tsc_attn_backend_at(0));
    CHECK(cref && cref->available());
    for (int i = 0; i < n; i++) {
        const tsc_attn_backend_t *be = tsc_attn_backend_at(i);
        CHECKF(be && be->name && be->summary && be->run && be->available, "backend %d incomplete", i);
        CHECKF(tsc_attn_backend_get(be->name) == be, "%s is not found by its name (or the name is taken twice)",
               be->name);
        CHECKF(be->caps & TSC_ATTN_CAP_FORWARD, "%s: no forward", be->name);
        printf("backend %-9s %s caps 0x%03x: %s\n", be->name, be->available() ? "available  " : "unavailable", be->caps,
               be->summary);
    }
    /* "cuda" is registered exactly in a CUDA build; without a GPU it is unavailable and refused */
    const tsc_attn_backend_t *cu = tsc_attn_backend_get("cuda");
    CHECK((cu != NULL) == (strstr(tsc_cuda_describe(), "has no CUDA") == NULL));
    printf("cuda: %s\n", tsc_cuda_describe());
    if (cu) CHECK_EQ_INT(cu->available(), tsc_cuda_available());
    if (cu && !cu->available()) {
        const tsc_attn_dims_t d = {1, 1, 1, 4, 8, 1, 0.3};
        float x[32] = {0}, o[32];
        tsc_policy_t p;
        CHECK(tsc_policy_parse("bf16-fa2", &p) == TSC_OK);
        tsc_attn_io_t io = {TSC_ATTN_F32, x, x, x, NULL, o, NULL, NULL, NULL, NULL, NULL};
        CHECK(tsc_attn_run_with(cu, &p, &d, &io, NULL) == TSC_ERR_UNSUPPORTED);
        CHECK(strstr(tsc_error_last(), "cannot run on this machine") != NULL);
        tsc_attn_cuda_io_t dio = {TSC_CUDA_F32, x, x, x, NULL, o, NULL, NULL, NULL, NULL, NULL};
        CHECK(tsc_attn_cuda_run(&p, &d, &dio, NULL, NULL) == TSC_ERR_UNSUPPORTED);
    }
#if defined(__x86_64__) && defined(__GNUC__)
    const tsc_attn_backend_t *simd = tsc_attn_backend_get("cpu-simd");
    CHECK(simd != NULL);
    if (simd) CHECK_EQ_INT(simd->available(), tsc_attn_simd_available());
    /* the default follows tsc_attn_simd_set, as tsc_attn_run always has */
    int old = tsc_attn_simd_set(0);
    CHECK(tsc_attn_backend_default() == cref);
    tsc_attn_simd_set(1);
    CHECK(tsc_attn_backend_default() == (tsc_attn_simd_available() ? simd : cref));
    tsc_attn_simd_set(old);
#else
    CHECK(tsc_attn_backend_default() == cref);
#endif
}

/* A backend that can do little: every request beyond it is refused before its run is called. */
static void check_capabilities(void) {
    const tsc_attn_backend_t fake = {"fake", "test", TSC_ATTN_CAP_F32 | TSC_ATTN_CAP_FORWARD | TSC_ATTN_CAP_FAST,
                                     fake_available, fake_run};
    const tsc_attn_dims_t d = {1, 2, 2, 12, 8, 1, 0.3};
    tsc_policy_t p, p64, psr;
    CHECK(tsc_policy_parse("bf16-fa2+tile:q=4,k=4", &p) == TSC_OK);
    CHECK(tsc_policy_parse("fp64+tile:q=4,k=4", &p64) == TSC_OK);
    CHECK(tsc_policy_parse("bf16-fa2+sr+tile:q=4,k=4", &psr) == TSC_OK);
    run_t r;
    run_alloc(&r, &d, &p, TSC_ATTN_F32, 0);
    void *in = make_inputs(&d, TSC_ATTN_F32, r.nq, r.nk);
    tsc_attn_io_t fwd = io_of(&r, in, 0), bwd = io_of(&r, in, 1), f64 = fwd;
    f64.dtype = TSC_ATTN_F64;
    tsc_attn_trace_t tr;
    CHECK(tsc_attn_trace_init(&tr, d.T, d.D, p.block_k, TSC_TRACE_TILES) == TSC_OK);
    tr.b = tr.h = 0;
    const tsc_attn_opts_t fast = {TSC_ATTN_FAST, NULL, NULL, 0}, exact = {TSC_ATTN_EXACT, NULL, NULL, 0},
                          tiles = {TSC_ATTN_FAST, &r.ts, NULL, 0}, traced = {TSC_ATTN_FAST, NULL, &tr, 1};
    fake_available_flag = 0;
    CHECK(tsc_attn_run_with(&fake, &p, &d, &fwd, &fast) == TSC_ERR_UNSUPPORTED);
    CHECK(strstr(tsc_error_last(), "fake") != NULL);
    fake_available_flag = 1;
    CHECK(tsc_attn_run_with(&fake, &p, &d, &fwd, &exact) == TSC_ERR_UNSUPPORTED);
    CHECK(strstr(tsc_error_last(), "exact") != NULL);
    CHECK(tsc_attn_run_with(&fake, &p, &d, &fwd, NULL) == TSC_ERR_UNSUPPORTED); /* NULL: exact */
    CHECK(tsc_attn_run_with(&fake, &p, &d, &bwd, &fast) == TSC_ERR_UNSUPPORTED);
    CHECK(tsc_attn_run_with(&fake, &p, &d, &f64, &fast) == TSC_ERR_UNSUPPORTED);
    CHECK(tsc_attn_run_with(&fake, &p64, &d, &fwd, &fast) == TSC_ERR_UNSUPPORTED);
    CHECK(tsc_attn_run_with(&fake, &psr, &d, &fwd, &fast) == TSC_ERR_UNSUPPORTED);
    CHECK(tsc_attn_run_with(&fake, &p, &d, &fwd, &tiles) == TSC_ERR_UNSUPPORTED);
    CHECK(tsc_attn_run_with(&fake, &p, &d, &fwd, &traced) == TSC_ERR_UNSUPPORTED);
    CHECK(strstr(tsc_error_last(), "trace") != NULL);
    CHECK_EQ_INT(fake_calls, 0);
    CHECK(tsc_attn_run_with(&fake, &p, &d, &fwd, &fast) == TSC_OK);
    CHECK_EQ_INT(fake_calls, 1);
    /* argument errors come first, for every backend */
    tsc_attn_opts_t badmode = {(tsc_attn_mode_t)7, NULL, NULL, 0};
    CHECK(tsc_attn_run_with(NULL, &p, &d, &fwd, &badmode) == TSC_ERR_ARG);
    tsc_attn_tile_stats_t wrong;
    CHECK(tsc_attn_tile_stats_init(&wrong, d.B, d.H, d.T, p.block_k * 2) == TSC_OK);
    tsc_attn_opts_t badtiles = {TSC_ATTN_EXACT, &wrong, NULL, 0};
    CHECK(tsc_attn_run_with(NULL, &p, &d, &fwd, &badtiles) == TSC_ERR_ARG);
    tsc_attn_tile_stats_free(&wrong);
    tsc_attn_tile_stats_free(&wrong); /* zeroed: a no-op */
    CHECK(tsc_attn_tile_stats_init(&wrong, 0, 1, 1, 1) == TSC_ERR_ARG);
    CHECK(tsc_attn_tile_stats_init(NULL, 1, 1, 1, 1) == TSC_ERR_ARG);
    tsc_attn_tile_stats_free(NULL);
    /* init gives "not visited" everywhere; n_kt rounds up */
    CHECK(tsc_attn_tile_stats_init(&wrong, 2, 3, 10, 4) == TSC_OK);
    CHECK_EQ_INT(wrong.n_kt, 3);
    CHECK_EQ_INT(tsc_attn_tile_stats_size(&wrong), 2 * 3 * 10 * 3);
    CHECK(isnan(wrong.row_max[179]) && wrong.tie_count[0] == -1 && wrong.pbar_one[179] == -1);
    tsc_attn_tile_stats_free(&wrong);
    CHECK(fake_calls == 1);
    tsc_attn_trace_free(&tr);
    free(in);
    run_free(&r);
}

int main(void) {
    check_registry();
    check_capabilities();
    check_planted_faults();
    check_tile_definitions();
    check_sweep();
    return tsc_test_done();
}
