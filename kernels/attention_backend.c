/* attention_backend.c: the attention backend registry (tsc_attention.h), the argument checks
 * every backend relies on, tsc_attn_run on the default backend, and the tile statistics. */
#include "attention_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- registry ---- */

static const tsc_attn_backend_t *const registry[] = {
    &tsc_attn_backend_cpu_ref,
#ifdef TSC_ATTN_X86
    &tsc_attn_backend_cpu_simd,
#endif
    &tsc_attn_backend_cpu_rowwise,
#ifdef TSC_HAVE_CUDA
    &tsc_attn_backend_cuda,
#endif
};

#define N_BACKENDS ((int)(sizeof registry / sizeof *registry))

int tsc_attn_backend_count(void) { return N_BACKENDS; }

const tsc_attn_backend_t *tsc_attn_backend_at(int i) {
    return i >= 0 && i < N_BACKENDS ? registry[i] : NULL;
}

const tsc_attn_backend_t *tsc_attn_backend_get(const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < N_BACKENDS; i++)
        if (strcmp(registry[i]->name, name) == 0) return registry[i];
    return NULL;
}

/* ---- tile statistics ---- */

size_t tsc_attn_tile_stats_size(const tsc_attn_tile_stats_t *ts) {
    if (!ts || ts->B < 1 || ts->H < 1 || ts->T < 1 || ts->n_kt < 1) return 0;
    return (size_t)ts->B * ts->H * ts->T * ts->n_kt;
}

void tsc_attn_tile_stats_reset(tsc_attn_tile_stats_t *ts) {
    const size_t n = tsc_attn_tile_stats_size(ts);
    if (n == 0 || !ts->row_max || !ts->tie_count || !ts->tie_count_eps || !ts->pbar_one) return;
    for (size_t i = 0; i < n; i++) {
        ts->row_max[i] = NAN;
        ts->tie_count[i] = ts->tie_count_eps[i] = ts->pbar_one[i] = -1;
    }
}

tsc_status_t tsc_attn_tile_stats_init(tsc_attn_tile_stats_t *ts, int B, int H, int T, int block_k) {
    if (!ts) return tsc_error_set(TSC_ERR_ARG, "attention tile statistics: NULL");
    memset(ts, 0, sizeof *ts);
    if (B < 1 || H < 1 || T < 1 || block_k < 1 || T > (1 << 24) || (double)B * H * T > 1e12)
        return tsc_error_set(TSC_ERR_ARG, "attention tile statistics: bad sizes B=%d H=%d T=%d block_k=%d", B,
                             H, T, block_k);
    ts->B = B;
    ts->H = H;
    ts->T = T;
    ts->block_k = block_k;
    ts->n_kt = (T + block_k - 1) / block_k;
    const size_t n = tsc_attn_tile_stats_size(ts);
    ts->row_max = malloc(n * sizeof(double));
    ts->tie_count = malloc(n * sizeof(int32_t));
    ts->tie_count_eps = malloc(n * sizeof(int32_t));
    ts->pbar_one = malloc(n * sizeof(int32_t));
    if (!ts->row_max || !ts->tie_count || !ts->tie_count_eps || !ts->pbar_one) {
        tsc_attn_tile_stats_free(ts);
        return tsc_error_set(TSC_ERR_NOMEM, "attention tile statistics: out of memory for B=%d H=%d T=%d "
                             "block_k=%d", B, H, T, block_k);
    }
    tsc_attn_tile_stats_reset(ts);
    return TSC_OK;
}

void tsc_attn_tile_stats_free(tsc_attn_tile_stats_t *ts) {
    if (!ts) return;
    free(ts->row_max);
    free(ts->tie_count);
    free(ts->tie_count_eps);
    free(ts->pbar_one);
    memset(ts, 0, sizeof *ts);
}

/* ---- running ---- */

/* The checks tsc_attn_run has always made: policy, dims, io, traces. */
static tsc_status_t check_args(const tsc_policy_t *pol, const tsc_attn_dims_t *dims, const tsc_attn_io_t *io,
                               const tsc_attn_trace_t *traces, int n_traces) {
    if (!pol || !dims || !io) return tsc_error_set(TSC_ERR_ARG, "attention: NULL policy, dims or io");
    tsc_status_t st = tsc_policy_validate(pol);
    if (st != TSC_OK) return st;
    if (dims->B < 1 || dims->H < 1 || dims->Hkv < 1 || dims->T < 1 || dims->D < 1 ||
        dims->H % dims->Hkv != 0 || !(dims->scale > 0) || !isfinite(dims->scale))
        return tsc_error_set(TSC_ERR_ARG, "attention: bad dims B=%d H=%d Hkv=%d T=%d D=%d scale=%g "
                             "(need positive sizes, Hkv dividing H, a finite positive scale)",
                             dims->B, dims->H, dims->Hkv, dims->T, dims->D, dims->scale);
    if ((size_t)dims->T * (size_t)dims->D > ((size_t)1 << 31))
        return tsc_error_set(TSC_ERR_ARG, "attention: a head of [%d, %d] is too large", dims->T, dims->D);
    if (pol->softmax == TSC_SOFTMAX_MATERIALIZED && dims->T > pol->block_k)
        return tsc_error_set(TSC_ERR_ARG, "attention: a materialized softmax needs every key of a row in one "
                             "tile, but T = %d exceeds the tile's %d keys", dims->T, pol->block_k);
    if (pol->exp == TSC_EXP_EXP2_PRESCALED && io->dout && (io->dq || io->dk || io->dv))
        return tsc_error_set(TSC_ERR_UNSUPPORTED, "attention: the backward of +exp:exp2-prescaled (FlexAttention's "
                             "PRESCALE_QK) is not modelled: its forward and delta only");
    if (io->dtype != TSC_ATTN_F32 && io->dtype != TSC_ATTN_F64)
        return tsc_error_set(TSC_ERR_ARG, "attention: dtype %d is neither F32 nor F64", (int)io->dtype);
    if (!io->q || !io->k || !io->v) return tsc_error_set(TSC_ERR_ARG, "attention: q, k or v is NULL");
    if (n_traces < 0 || (n_traces > 0 && !traces))
        return tsc_error_set(TSC_ERR_ARG, "attention: %d traces but no array", n_traces);
    for (int i = 0; i < n_traces; i++) {
        const tsc_attn_trace_t *tr = &traces[i];
        if (tr->b < 0 || tr->b >= dims->B || tr->h < 0 || tr->h >= dims->H || tr->T != dims->T ||
            tr->D != dims->D || tr->block_k != pol->block_k)
            return tsc_error_set(TSC_ERR_ARG, "attention: trace %d (b=%d h=%d, T=%d D=%d block_k=%d) "
                                 "does not fit B=%d H=%d T=%d D=%d block_k=%d", i, tr->b, tr->h, tr->T,
                                 tr->D, tr->block_k, dims->B, dims->H, dims->T, dims->D, pol->block_k);
    }
    return TSC_OK;
}

static tsc_status_t check_tiles(const tsc_attn_tile_stats_t *ts, const tsc_policy_t *pol,
                                const tsc_attn_dims_t *dims) {
    if (!ts) return TSC_OK;
    if (ts->B != dims->B || ts->H != dims->H || ts->T != dims->T || ts->block_k != pol->block_k ||
        ts->n_kt != (dims->T + pol->block_k - 1) / pol->block_k || !ts->row_max || !ts->tie_count ||
        !ts->tie_count_eps || !ts->pbar_one)
        return tsc_error_set(TSC_ERR_ARG, "attention: tile statistics (B=%d H=%d T=%d block_k=%d) do not fit "
                             "B=%d H=%d T=%d block_k=%d, or are not allocated", ts->B, ts->H, ts->T,
                             ts->block_k, dims->B, dims->H, dims->T, pol->block_k);
    return TSC_OK;
}

static int uses_sr(const tsc_policy_t *pol) {
    for (int s = 0; s < TSC_STAGE_COUNT; s++)
        if (pol->mode[s] == TSC_ROUND_STOCHASTIC) return 1;
    return 0;
}

/* The capability the request needs and be lacks, or NULL. */
static const char *missing_cap(const tsc_attn_backend_t *be, const tsc_policy_t *pol, const tsc_attn_io_t *io,
                               const tsc_attn_opts_t *opts) {
    const unsigned c = be->caps;
    if (!(c & TSC_ATTN_CAP_FORWARD)) return "the forward";
    if (io->dtype == TSC_ATTN_F32 && !(c & TSC_ATTN_CAP_F32)) return "float I/O";
    if (io->dtype == TSC_ATTN_F64 && !(c & TSC_ATTN_CAP_F64)) return "double I/O";
    if (tsc_policy_uses_fp64(pol) && !(c & TSC_ATTN_CAP_FP64_STAGES)) return "FP64 stages";
    if (opts->mode == TSC_ATTN_EXACT && !(c & TSC_ATTN_CAP_EXACT)) return "exact mode";
    if (opts->mode == TSC_ATTN_FAST && !(c & TSC_ATTN_CAP_FAST)) return "fast mode";
    if (io->dout && !(c & TSC_ATTN_CAP_BACKWARD)) return "the backward";
    if (uses_sr(pol) && !(c & TSC_ATTN_CAP_STOCHASTIC)) return "stochastic rounding";
    if (opts->tiles && !(c & TSC_ATTN_CAP_TILE_STATS)) return "tile statistics";
    if (opts->n_traces > 0 && !(c & TSC_ATTN_CAP_TRACE)) return "traces (a CPU debug facility)";
    return NULL;
}

/* tsc_attn_work's counters (atomic: heads run on several threads). */
static int64_t work_calls, work_fwd, work_bwd, work_flops;

static void work_add(const tsc_policy_t *pol, const tsc_attn_dims_t *dims, const tsc_attn_io_t *io) {
    const int64_t heads = (int64_t)dims->B * dims->H;
    double f = tsc_attn_flops(dims, 0);
    if (io->dout) {
        f += io->dq ? tsc_attn_flops(dims, 1) : 2.0 * dims->T * dims->D * (double)heads;
        if (pol->delta_src != TSC_DELTA_LP_O) f += tsc_attn_flops(dims, 0);
    }
    __atomic_fetch_add(&work_calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&work_fwd, heads, __ATOMIC_RELAXED);
    if (io->dout) __atomic_fetch_add(&work_bwd, heads, __ATOMIC_RELAXED);
    __atomic_fetch_add(&work_flops, (int64_t)f, __ATOMIC_RELAXED);
}

tsc_status_t tsc_attn_run_with(const tsc_attn_backend_t *be, const tsc_policy_t *pol, const tsc_attn_dims_t *dims,
                               const tsc_attn_io_t *io, const tsc_attn_opts_t *opts) {
    static const tsc_attn_opts_t none = {TSC_ATTN_EXACT, NULL, NULL, 0};
    if (!opts) opts = &none;
    tsc_status_t st = check_args(pol, dims, io, opts->traces, opts->n_traces);
    if (st != TSC_OK) return st;
    if (opts->mode != TSC_ATTN_EXACT && opts->mode != TSC_ATTN_FAST)
        return tsc_error_set(TSC_ERR_ARG, "attention: mode %d is neither exact nor fast", (int)opts->mode);
    if ((st = check_tiles(opts->tiles, pol, dims)) != TSC_OK) return st;
    if (!be) be = tsc_attn_backend_default();
    if (!be->available())
        return tsc_error_set(TSC_ERR_UNSUPPORTED, "attention: backend %s cannot run on this machine", be->name);
    const char *miss = missing_cap(be, pol, io, opts);
    if (miss) return tsc_error_set(TSC_ERR_UNSUPPORTED, "attention: backend %s does not support %s", be->name, miss);
    tsc_attn_tile_stats_reset(opts->tiles);
    st = be->run(pol, dims, io, opts);
    if (st == TSC_OK) work_add(pol, dims, io);
    return st;
}

tsc_attn_work_t tsc_attn_work(void) {
    tsc_attn_work_t w;
    w.calls = __atomic_load_n(&work_calls, __ATOMIC_RELAXED);
    w.forwards = __atomic_load_n(&work_fwd, __ATOMIC_RELAXED);
    w.backwards = __atomic_load_n(&work_bwd, __ATOMIC_RELAXED);
    w.flops = (double)__atomic_load_n(&work_flops, __ATOMIC_RELAXED);
    return w;
}

tsc_status_t tsc_attn_run(const tsc_policy_t *pol, const tsc_attn_dims_t *dims, const tsc_attn_io_t *io,
                          tsc_attn_trace_t *traces, int n_traces) {
    const tsc_attn_opts_t opts = {TSC_ATTN_EXACT, NULL, traces, n_traces};
    return tsc_attn_run_with(NULL, pol, dims, io, &opts);
}
