/* test_trace_window: the forward's row groups (up to TSC_ATTN_ROW_GROUP rows visit a key tile
 * together) change no bit, and a row-window trace holds the full trace's values.
 *  - For presets of each forward form (FP32, the unfused batched form of bf16-torch, the fused
 *    FA2 form, stochastic rounding, the materialized softmax), causal and not, T = 203 (no
 *    multiple of a group), D = 64 (the batched kernels) and 24: the output O and LSE of a run
 *    without trace (rows in groups), of a run with a 4-row window (one block at a time) and of
 *    one with a full trace are the same bits.
 *  - Windows of 4, 12, 32, 64 and 256 rows (more than T): row_fn sees every block once, in row
 *    order, and each row's S, P-bar, tile numbers, P-bar V, O-bar and LSE in its slot equal the
 *    full trace's bit for bit. */
#include <stdlib.h>
#include <string.h>

#include "tsc_attention.h"
#include "tsc_test.h"

static uint64_t rng_state = 0x7e57ab1eULL;

typedef struct {
    const tsc_attn_trace_t *full;
    const float *lse;  /* the run's LSE output, [T] */
    int next, T, bad;  /* the next row expected, rows that differed */
} win_ctx_t;

static int same(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static void win_rows(void *ctx, const tsc_attn_trace_t *tr, int t0, int nr) {
    win_ctx_t *c = ctx;
    const tsc_attn_trace_t *f = c->full;
    const int T = tr->T, K = tr->n_kt, D = tr->D;
    if (t0 != c->next || nr < 1 || nr > TSC_ATTN_TRACE_ROW_BLOCK) c->bad++;
    c->next = t0 + nr;
    for (int t = t0; t < t0 + nr; t++) {
        const size_t sl = (size_t)(t % tr->rows);
        int ok = same(tr->lse[sl], (double)c->lse[t]);
        for (int j = 0; j < T; j++)
            ok &= same(tr->s[sl * T + j], f->s[(size_t)t * T + j]) && same(tr->pbar[sl * T + j], f->pbar[(size_t)t * T + j]);
        for (int k = 0; k < K; k++) {
            const size_t a = sl * K + k, b = (size_t)t * K + k;
            ok &= same(tr->tile_max[a], f->tile_max[b]) && same(tr->run_max[a], f->run_max[b]) &&
                  same(tr->l[a], f->l[b]) && tr->ties_exact[a] == f->ties_exact[b] &&
                  tr->ties_eps[a] == f->ties_eps[b] && tr->pbar_one[a] == f->pbar_one[b];
            for (int d = 0; d < D; d++)
                ok &= same(tr->pv[a * D + d], f->pv[b * D + d]) && same(tr->oacc[a * D + d], f->oacc[b * D + d]);
        }
        c->bad += !ok;
    }
}

static void run_case(const char *pol_s, int causal, int D) {
    const int T = 203, H = 2, flags = TSC_TRACE_SCORES | TSC_TRACE_TILES | TSC_TRACE_PV;
    tsc_policy_t pol;
    CHECKF(tsc_policy_parse(pol_s, &pol) == TSC_OK, "%s", pol_s);
    tsc_attn_dims_t dims = {1, H, 1, T, D, causal, 1.0 / 8};
    const size_t nq = (size_t)H * T * D, nk = (size_t)T * D;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4);
    float *o[3], *lse[3];
    for (int i = 0; i < 3; i++) o[i] = malloc(nq * 4), lse[i] = malloc((size_t)H * T * 4);
    /* a few repeated keys, so rows have ties at their maximum */
    for (size_t i = 0; i < nq; i++) q[i] = (float)tsc_test_nrand(&rng_state);
    for (size_t i = 0; i < nk; i++) k[i] = (float)tsc_test_nrand(&rng_state), v[i] = (float)tsc_test_nrand(&rng_state);
    for (int t = 7; t < T; t += 9) memcpy(k + (size_t)t * D, k + (size_t)(t - 5) * D, (size_t)D * 4);
    tsc_attn_io_t io = {.dtype = TSC_ATTN_F32, .q = q, .k = k, .v = v, .o = o[0], .lse = lse[0]};
    CHECK(tsc_attn_run(&pol, &dims, &io, NULL, 0) == TSC_OK); /* rows in groups */
    tsc_attn_trace_t full;
    CHECK(tsc_attn_trace_init(&full, T, D, pol.block_k, flags) == TSC_OK);
    full.b = 0, full.h = 1;
    io.o = o[1], io.lse = lse[1];
    CHECK(tsc_attn_run(&pol, &dims, &io, &full, 1) == TSC_OK);
    const int windows[] = {4, 12, 32, 64, 256};
    for (size_t w = 0; w < sizeof windows / sizeof *windows; w++) {
        win_ctx_t c = {&full, lse[0] + T, 0, T, 0}; /* the grouped run's LSE (this run stores its own after the head) */
        tsc_attn_trace_t tr;
        CHECK(tsc_attn_trace_init_rows(&tr, T, D, pol.block_k, flags, windows[w], win_rows, &c) == TSC_OK);
        tr.b = 0, tr.h = 1;
        io.o = o[2], io.lse = lse[2];
        CHECK(tsc_attn_run(&pol, &dims, &io, &tr, 1) == TSC_OK);
        tsc_attn_trace_free(&tr);
        CHECKF(c.bad == 0 && c.next == T, "%s causal %d D %d window %d: %d rows differ from the full trace, "
               "rows seen up to %d", pol_s, causal, D, windows[w], c.bad, c.next);
        CHECKF(memcmp(o[0], o[2], nq * 4) == 0 && memcmp(lse[0], lse[2], (size_t)H * T * 4) == 0,
               "%s causal %d D %d: O or LSE with a %d-row window differ from the grouped run", pol_s, causal, D,
               windows[w]);
    }
    CHECKF(memcmp(o[0], o[1], nq * 4) == 0 && memcmp(lse[0], lse[1], (size_t)H * T * 4) == 0,
           "%s causal %d D %d: O or LSE with a full trace differ from the grouped run", pol_s, causal, D);
    tsc_attn_trace_free(&full);
    free(q), free(k), free(v);
    for (int i = 0; i < 3; i++) free(o[i]), free(lse[i]);
}

int main(void) {
    const char *pols[] = {"fp32", "bf16-torch", "bf16-fa2", "bf16-fa2+sr:seed=3", "bf16-eager-cpu", "bf16-sdpa-flash"};
    for (size_t i = 0; i < sizeof pols / sizeof *pols; i++)
        for (int causal = 0; causal < 2; causal++) {
            run_case(pols[i], causal, 64);
            if (causal) run_case(pols[i], causal, 24);
        }
    return tsc_test_done();
}
