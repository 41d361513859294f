/* test_check: the consistency check (analyze/tsc_check.h) on dumps written through the dump API.
 * Geometry: 2 batch rows, 4 query heads on 2 kv heads (GQA), T = 40 (not a multiple of the 16-row tiles),
 * D = 12, causal; q, k, v stored in the preset's input format, o in its O format, lse as FP32.
 * 1. Every preset's own forward (tsc_attn_run) is consistent: no row of any head outside its bound, at
 *    two score scales (plain and 3x sharper rows).
 *    Inputs stored as FP32 that a bf16-torch kernel rounded itself, O stored as FP32 with BF16 values: held to
 *    BF16 (from the values), consistent; a row of O times 1.25 fails alone.
 * 2. A wrong O with the right LSE: fp32 rows 5, 17, 33 of one head times 1.02 -> exactly those rows;
 *    bf16-fa2 O = Ō/ℓ' with ℓ' = 0.8ℓ on rows 3, 20, 38 -> exactly those; the numerator of key tile 1 dropped
 *    for rows 24..39, under bf16-fa2 and fp8-fa3 (the FA4 FP8 bug's shape: O wrong, LSE right) -> exactly those
 *    rows, key tile 1 named, query tiles 1 and 2.
 * 3. A wrong LSE with the right O: +1e-3 (fp32) on rows 0, 39 and +0.25 (bf16) on rows 7, 30 -> those rows.
 * 4. Rows whose max probability rounds to 1 in BF16 with other entries non-zero -> saturated, named, and
 *    still consistent (the x3 sharper inputs of 1 saturate a few rows too: reported, consistent).
 * 5. A NaN in o (b 1, head 3, row 22) -> tile 1 of o named; a NaN in k (b 0, kv head 0, key 35) -> key tile 2
 *    for heads 0 and 1, rows 35..39 not held to the bounds.
 *    Heads a capture never stored (heads_stored) are "not stored", not non-finite.
 * 6. Bad input: a missing file (TSC_ERR_IO naming it), a dump without o (TSC_ERR_MISSING naming 'o'). */
#include "tsc_test.h"

#include "tsc_attention.h"
#include "tsc_check.h"
#include "tsc_dump.h"
#include "tsc_formats.h"
#include "tsc_policy.h"

enum { B = 2, H = 4, HKV = 2, T = 40, D = 12, TILE = 16, NQ = B * H * T * D, NK = B * HKV * T * D, NL = B * H * T };

typedef struct {
    float q[NQ], k[NK], v[NK], o[NQ], lse[NL];
    tsc_format_t in_fmt, o_fmt;
} case_t;

static char dir[] = "/tmp/tsc_check_XXXXXX";

static size_t qi(int b, int h, int t) { return (((size_t)b * H + h) * T + t) * D; }
static size_t ki(int b, int g, int t) { return (((size_t)b * HKV + g) * T + t) * D; }

/* Inputs in the preset's input format and the preset's own O and LSE. */
static void make_case(case_t *c, const char *preset, double sharp, uint64_t seed) {
    tsc_policy_t p;
    char name[96];
    CHECK(tsc_policy_parse(preset, &p) == TSC_OK);
    if (p.softmax == TSC_SOFTMAX_ONLINE) {  /* the dump's tiles, as a tiled kernel would record them */
        snprintf(name, sizeof name, "%s+tile:q=%d,k=%d", preset, TILE, TILE);
        CHECK(tsc_policy_parse(name, &p) == TSC_OK);
    }
    c->in_fmt = p.fmt[TSC_STAGE_Q];
    c->o_fmt = p.fmt[TSC_STAGE_O];
    for (int i = 0; i < NQ; i++) c->q[i] = tsc_round_f32((float)(sharp * tsc_test_nrand(&seed)), c->in_fmt, 0, NULL);
    for (int i = 0; i < NK; i++) c->k[i] = tsc_round_f32((float)tsc_test_nrand(&seed), c->in_fmt, 0, NULL);
    for (int i = 0; i < NK; i++) c->v[i] = tsc_round_f32((float)tsc_test_nrand(&seed), c->in_fmt, 0, NULL);
    tsc_attn_dims_t dims = {B, H, HKV, T, D, 1, 1 / sqrt((double)D)};
    if (tsc_policy_uses_fp64(&p)) {
        static double q[NQ], k[NK], v[NK], o[NQ], l[NL];
        for (int i = 0; i < NQ; i++) q[i] = c->q[i];
        for (int i = 0; i < NK; i++) k[i] = c->k[i], v[i] = c->v[i];
        tsc_attn_io_t io = {.dtype = TSC_ATTN_F64, .q = q, .k = k, .v = v, .o = o, .lse = l};
        CHECKF(tsc_attn_run(&p, &dims, &io, NULL, 0) == TSC_OK, "%s: %s", preset, tsc_error_last());
        for (int i = 0; i < NQ; i++) c->o[i] = tsc_round_f32((float)o[i], c->o_fmt, 0, NULL);
        for (int i = 0; i < NL; i++) c->lse[i] = (float)l[i];
        if (c->o_fmt == TSC_FMT_FP64) c->o_fmt = TSC_FMT_FP32;
    } else {
        tsc_attn_io_t io = {.dtype = TSC_ATTN_F32, .q = c->q, .k = c->k, .v = c->v, .o = c->o, .lse = c->lse};
        CHECKF(tsc_attn_run(&p, &dims, &io, NULL, 0) == TSC_OK, "%s: %s", preset, tsc_error_last());
    }
}

static void write_case(const char *path, const case_t *c, int with_o, int with_lse) {
    tsc_dump_meta_t m;
    tsc_dump_meta_init(&m);
    m.n_layer = 1, m.n_head = H, m.n_kv_head = HKV, m.head_dim = D, m.d_model = D, m.seq_len = T, m.batch = B;
    m.causal = 1, m.softmax_scale = 1 / sqrt((double)D), m.tile_q = TILE, m.tile_k = TILE;
    snprintf(m.policy, sizeof m.policy, "bf16-fa2");  /* deliberately wrong for most cases: the check never reads it */
    tsc_dump_writer_t *w;
    uint64_t dq[4] = {B, H, T, D}, dk[4] = {B, HKV, T, D}, dl[3] = {B, H, T};
    CHECK(tsc_dump_writer_open(&w, path, &m, NULL) == TSC_OK);
    CHECK(tsc_dump_writer_put(w, 0, 0, "q", 4, dq, TSC_FMT_FP32, c->q, c->in_fmt) == TSC_OK);
    CHECK(tsc_dump_writer_put(w, 0, 0, "k", 4, dk, TSC_FMT_FP32, c->k, c->in_fmt) == TSC_OK);
    CHECK(tsc_dump_writer_put(w, 0, 0, "v", 4, dk, TSC_FMT_FP32, c->v, c->in_fmt) == TSC_OK);
    if (with_o) CHECK(tsc_dump_writer_put(w, 0, 0, "o", 4, dq, TSC_FMT_FP32, c->o, c->o_fmt) == TSC_OK);
    if (with_lse) CHECK(tsc_dump_writer_put(w, 0, 0, "lse", 3, dl, TSC_FMT_FP32, c->lse, TSC_FMT_FP32) == TSC_OK);
    CHECK(tsc_dump_writer_step_done(w, 0) == TSC_OK);
    CHECK(tsc_dump_writer_close(w) == TSC_OK);
}

static tsc_check_t *run_check(const case_t *c, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.h5", dir, name);
    write_case(path, c, 1, 1);
    tsc_check_opts_t o;
    tsc_check_opts_init(&o);
    o.dump_path = path;
    tsc_check_t *r = NULL;
    tsc_status_t st = tsc_check_run(&o, &r);
    CHECKF(st == TSC_OK, "%s: %s", name, tsc_error_last());
    return r;
}

/* The head entry of (b-independent) query head h. */
static const tsc_check_head_t *head(const tsc_check_t *r, int h) {
    for (int i = 0; r && i < r->n_heads; i++)
        if (r->heads[i].head == h) return &r->heads[i];
    return NULL;
}

/* 1: each preset's own forward passes. */
static void test_presets(void) {
    for (int sharp = 0; sharp < 2; sharp++)
        for (int i = 0; i < TSC_PRESET_COUNT; i++) {
            static case_t c;
            const char *name = tsc_preset_name((tsc_preset_t)i);
            make_case(&c, name, sharp ? 3.0 : 1.0, 100 + (uint64_t)i);
            tsc_check_t *r = run_check(&c, name);
            if (!r) continue;
            double ow = 0, lw = 0;
            for (int k = 0; k < r->n_heads; k++) {
                if (r->heads[k].o_worst > ow) ow = r->heads[k].o_worst;
                if (r->heads[k].lse_worst > lw) lw = r->heads[k].lse_worst;
            }
            printf("%-16s x%d: worst O ratio %.3f, worst LSE ratio %.3f, saturated rows %lld\n", name, sharp ? 3 : 1,
                   ow, lw, (long long)r->saturated);
            CHECKF(r->n_bad == 0 && r->o_bad == 0 && r->lse_bad == 0 && r->nonfinite == 0,
                   "%s x%d: %d heads inconsistent, O rows %lld, LSE rows %lld", name, sharp ? 3 : 1, r->n_bad,
                   (long long)r->o_bad, (long long)r->lse_bad);
            CHECK_EQ_INT(r->n_heads, H);
            CHECK_EQ_INT(r->rows, B * H * T);
            CHECK(ow > 0 && ow <= 1 && lw <= 1);
            tsc_check_free(r);
        }
}

/* 1b: inputs stored as FP32 that the kernel rounds to BF16 itself (bf16-torch on FP32 tensors, as
 * tilescope.torch.attention captures them), O stored as FP32 holding BF16 values: the values show the kernel's
 * format, so the head is held to BF16 with its inputs' rounding allowed for: consistent; a row of O times 1.25
 * still fails. */
static void test_wide_inputs(void) {
    static case_t c;
    make_case(&c, "fp32", 1.0, 21); /* FP32 values in q, k, v */
    tsc_policy_t p;
    CHECK(tsc_policy_parse("bf16-torch+tile:q=16,k=16", &p) == TSC_OK);
    tsc_attn_dims_t dims = {B, H, HKV, T, D, 1, 1 / sqrt((double)D)};
    tsc_attn_io_t io = {.dtype = TSC_ATTN_F32, .q = c.q, .k = c.k, .v = c.v, .o = c.o, .lse = c.lse};
    CHECK(tsc_attn_run(&p, &dims, &io, NULL, 0) == TSC_OK);
    c.in_fmt = c.o_fmt = TSC_FMT_FP32;
    tsc_check_t *r = run_check(&c, "wide");
    CHECKF(r && r->n_bad == 0, "%lld O rows, %lld LSE rows", r ? (long long)r->o_bad : -1LL,
           r ? (long long)r->lse_bad : -1LL);
    if (r) {
        CHECK_STREQ(r->dtype_qkv, "fp32");
        CHECK_STREQ(r->p_format, "bf16");
        CHECK_STREQ(r->heads[0].p_format, "bf16");
    }
    tsc_check_free(r);
    for (int d = 0; d < D; d++) c.o[qi(1, 2, 30) + d] = tsc_round_f32(c.o[qi(1, 2, 30) + d] * 1.25f, TSC_FMT_BF16, 0, NULL);
    r = run_check(&c, "wide_bad");
    const tsc_check_head_t *h = head(r, 2);
    CHECK(r && h && r->n_bad == 1 && h->o_bad == 1 && h->n_o_rows == 1 && h->o_rows[0].b == 1 && h->o_rows[0].t == 30);
    tsc_check_free(r);
}

/* The flagged rows of head h (from the worst list; all of them when there are at most TSC_CHECK_WORST)
 * as a bit mask over t, for batch row b. */
static uint64_t rows_mask(const tsc_check_row_t *rows, int n, int b) {
    uint64_t m = 0;
    for (int i = 0; i < n; i++)
        if (rows[i].b == b) m |= 1ull << rows[i].t;
    return m;
}

/* 2: a wrong O, the LSE right. */
static void test_wrong_o(void) {
    static case_t c;
    make_case(&c, "fp32", 1.0, 7);
    const int rows[3] = {5, 17, 33};
    for (int i = 0; i < 3; i++)
        for (int d = 0; d < D; d++) c.o[qi(0, 2, rows[i]) + d] *= 1.02f;
    tsc_check_t *r = run_check(&c, "o_scaled");
    const tsc_check_head_t *h = head(r, 2);
    CHECK(r && h && r->n_bad == 1 && h->verdict == TSC_CHECK_O_BAD);
    if (h) {
        CHECK_EQ_INT(h->o_bad, 3);
        CHECK_EQ_INT(h->lse_bad, 0);
        CHECK(rows_mask(h->o_rows, h->n_o_rows, 0) == (1ull << 5 | 1ull << 17 | 1ull << 33));
        CHECK(h->o_worst > 10); /* a 2% error against FP32's bounds */
    }
    tsc_check_free(r);

    /* bf16-fa2, O = Ō / ℓ' with ℓ' = 0.8 ℓ: the row scaled by 1.25 then rounded to BF16 */
    make_case(&c, "bf16-fa2", 1.0, 8);
    const int rows2[3] = {3, 20, 38};
    for (int i = 0; i < 3; i++)
        for (int d = 0; d < D; d++)
            c.o[qi(1, 0, rows2[i]) + d] = tsc_round_f32(c.o[qi(1, 0, rows2[i]) + d] / 0.8f, TSC_FMT_BF16, 0, NULL);
    r = run_check(&c, "o_ell");
    h = head(r, 0);
    CHECK(r && h && r->n_bad == 1 && h->verdict == TSC_CHECK_O_BAD && r->lse_bad == 0);
    if (h) {
        CHECK_EQ_INT(h->o_bad, 3);
        CHECK(rows_mask(h->o_rows, h->n_o_rows, 1) == (1ull << 3 | 1ull << 20 | 1ull << 38));
    }
    tsc_check_free(r);

    /* the numerator of key tile 1 (keys 16..31) dropped for rows 24..39 of head 1, batch 0, under bf16-fa2 and
     * under fp8-fa3 (E4M3 q, k, v, P̄; BF16 O: the FA4 FP8 bug's shape): O = (Σ_{j not in tile 1} P̄_j V_j) / ℓ with
     * ℓ over every key, so the LSE stays right */
    static const char *const drop_presets[2] = {"bf16-fa2", "fp8-fa3"};
    for (int pi = 0; pi < 2; pi++) {
        make_case(&c, drop_presets[pi], 1.0, 9);
        const double alpha = 1 / sqrt((double)D);
        for (int t = 24; t < T; t++) {
            double s[T], mx = -INFINITY, l = 0, o[D] = {0};
            for (int j = 0; j <= t; j++) {
                s[j] = 0;
                for (int d = 0; d < D; d++) s[j] += (double)c.q[qi(0, 1, t) + d] * c.k[ki(0, 0, j) + d];
                s[j] *= alpha;
                if (s[j] > mx) mx = s[j];
            }
            for (int j = 0; j <= t; j++) l += exp(s[j] - mx);
            for (int j = 0; j <= t; j++)
                if (j < 16 || j >= 32)
                    for (int d = 0; d < D; d++) o[d] += exp(s[j] - mx) / l * c.v[ki(0, 0, j) + d];
            for (int d = 0; d < D; d++) c.o[qi(0, 1, t) + d] = tsc_round_f32((float)o[d], c.o_fmt, 0, NULL);
        }
        r = run_check(&c, drop_presets[pi]);
        h = head(r, 1);
        CHECKF(r && h && r->n_bad == 1 && h->verdict == TSC_CHECK_O_BAD && r->lse_bad == 0, "%s", drop_presets[pi]);
        if (h) {
            CHECKF(h->o_bad == 16, "%s: %lld rows flagged", drop_presets[pi], (long long)h->o_bad); /* every planted row */
            int tiles_ok = h->n_o_rows == TSC_CHECK_WORST;
            for (int i = 0; i < h->n_o_rows; i++)
                tiles_ok &= h->o_rows[i].b == 0 && h->o_rows[i].t >= 24 && h->o_rows[i].key_tile == 1;
            CHECKF(tiles_ok, "%s", drop_presets[pi]);
            /* query tile 1 holds rows 24..31 (8 flagged), tile 2 rows 32..39 (8) */
            CHECK_EQ_INT(h->n_o_tiles, 2);
            CHECK(h->o_tiles[0].tile + h->o_tiles[1].tile == 3 && h->o_tiles[0].count == 8 && h->o_tiles[1].count == 8);
            printf("%s, key tile 1 dropped: worst O ratio %.2f\n", drop_presets[pi], h->o_worst);
        }
        tsc_check_free(r);
    }
}

/* 3: a wrong LSE, O right. */
static void test_wrong_lse(void) {
    static case_t c;
    make_case(&c, "fp32", 1.0, 11);
    c.lse[(0 * H + 3) * T + 0] += 1e-3f;
    c.lse[(0 * H + 3) * T + 39] += 1e-3f;
    tsc_check_t *r = run_check(&c, "lse_fp32");
    const tsc_check_head_t *h = head(r, 3);
    CHECK(r && h && r->n_bad == 1 && h->verdict == TSC_CHECK_LSE_BAD && r->o_bad == 0);
    if (h) {
        CHECK_EQ_INT(h->lse_bad, 2);
        CHECK(rows_mask(h->lse_rows, h->n_lse_rows, 0) == (1ull << 0 | 1ull << 39));
        CHECK(h->lse_rows[0].err < 0); /* LSE too large: Σ exp(S − LSE) < 1 */
    }
    tsc_check_free(r);
    make_case(&c, "bf16-fa2", 1.0, 12);
    c.lse[(1 * H + 1) * T + 7] += 0.25f;
    c.lse[(1 * H + 1) * T + 30] += 0.25f;
    r = run_check(&c, "lse_bf16");
    h = head(r, 1);
    CHECK(r && h && r->n_bad == 1 && h->verdict == TSC_CHECK_LSE_BAD && r->o_bad == 0);
    if (h) {
        CHECK_EQ_INT(h->lse_bad, 2);
        CHECK(rows_mask(h->lse_rows, h->n_lse_rows, 1) == (1ull << 7 | 1ull << 30));
        CHECK_NEAR(h->lse_rows[0].err, -0.25, 1e-6);
    }
    tsc_check_free(r);
}

/* 4: saturated rows: key t of kv head 0 is 4·e_i and every other key has features 0, 1 zero, q_t = 10.4·e_i,
 * so S_tt = 12 and every other score is 0: P_max = 1/(1 + t e^-12) rounds to 1 in BF16 and the other
 * entries, e^-12 ≈ 6e-6, do not round to 0. */
static void test_saturated(void) {
    static case_t c;
    make_case(&c, "bf16-fa2", 1.0, 13);
    const int rows[2] = {10, 25};
    for (int t = 0; t < T; t++) c.k[ki(0, 0, t)] = c.k[ki(0, 0, t) + 1] = 0;
    for (int i = 0; i < 2; i++) {  /* row i on feature i, so row 25 does not see row 10's key as a second max */
        const int t = rows[i];
        for (int d = 0; d < D; d++) c.k[ki(0, 0, t) + d] = 0, c.q[qi(0, 0, t) + d] = 0;
        c.k[ki(0, 0, t) + i] = 4;
        c.q[qi(0, 0, t) + i] = tsc_round_f32((float)(12 * sqrt((double)D) / 4), TSC_FMT_BF16, 0, NULL);
    }
    tsc_policy_t p;
    CHECK(tsc_policy_parse("bf16-fa2+tile:q=16,k=16", &p) == TSC_OK);
    tsc_attn_dims_t dims = {B, H, HKV, T, D, 1, 1 / sqrt((double)D)};
    tsc_attn_io_t io = {.dtype = TSC_ATTN_F32, .q = c.q, .k = c.k, .v = c.v, .o = c.o, .lse = c.lse};
    CHECK(tsc_attn_run(&p, &dims, &io, NULL, 0) == TSC_OK);
    tsc_check_t *r = run_check(&c, "saturated");
    const tsc_check_head_t *h = head(r, 0);
    CHECK(r && h && r->n_bad == 0);
    if (h) {
        CHECK(h->verdict == TSC_CHECK_SATURATED);
        CHECK_EQ_INT(h->saturated, 2);
        CHECK(rows_mask(h->sat_rows, h->n_sat_rows, 0) == (1ull << 10 | 1ull << 25));
    }
    CHECK(r && r->saturated == 2 && r->n_saturated == 1);
    tsc_check_free(r);
}

/* 5: NaNs named by tile. */
static void test_nonfinite(void) {
    static case_t c;
    make_case(&c, "bf16-fa2", 1.0, 14);
    c.o[qi(1, 3, 22) + 5] = NAN;
    c.k[ki(0, 0, 35) + 2] = NAN;
    tsc_check_t *r = run_check(&c, "nan");
    CHECK(r && r->n_bad == 3 && r->nonfinite == 3 && r->o_bad == 0 && r->lse_bad == 0); /* heads 0, 1 (k), 3 (o) */
    const tsc_check_head_t *h3 = head(r, 3), *h0 = head(r, 0), *h1 = head(r, 1), *h2 = head(r, 2);
    CHECK(h3 && h3->verdict == TSC_CHECK_NONFINITE && h3->n_tiles == 1);
    if (h3 && h3->n_tiles == 1) {
        CHECK_STREQ(h3->tiles[0].tensor, "o");
        CHECK(h3->tiles[0].b == 1 && h3->tiles[0].tile == 1 && h3->tiles[0].count == 1);
        CHECK_EQ_INT(h3->nonfinite_rows, 1);
    }
    for (int i = 0; i < 2; i++) {
        const tsc_check_head_t *h = i ? h1 : h0;
        CHECK(h && h->verdict == TSC_CHECK_NONFINITE && h->n_tiles == 1);
        if (h && h->n_tiles == 1) {
            CHECK_STREQ(h->tiles[0].tensor, "k");
            CHECK(h->tiles[0].b == 0 && h->tiles[0].tile == 2 && h->tiles[0].count == 1);
            CHECK_EQ_INT(h->nonfinite_rows, 5); /* rows 35..39 of batch row 0 see key 35 */
        }
    }
    CHECK(h2 && h2->verdict == 0);
    tsc_check_free(r);
}

/* 5b: a capture that kept heads 0 and 2 (q, o, lse written head by head): heads 1 and 3 read as NaN and are
 * "not stored", not non-finite. */
static void test_not_stored(void) {
    static case_t c;
    make_case(&c, "bf16-fa2", 1.0, 16);
    char path[512];
    snprintf(path, sizeof path, "%s/heads02.h5", dir);
    tsc_dump_meta_t m;
    tsc_dump_meta_init(&m);
    m.n_layer = 1, m.n_head = H, m.n_kv_head = HKV, m.head_dim = D, m.d_model = D, m.seq_len = T, m.batch = B;
    m.causal = 1, m.softmax_scale = 1 / sqrt((double)D), m.tile_q = TILE, m.tile_k = TILE;
    tsc_dump_write_opts_t wo = {0, 1};
    tsc_dump_writer_t *w;
    uint64_t dq[4] = {B, H, T, D}, dk[4] = {B, HKV, T, D}, dl[3] = {B, H, T};
    CHECK(tsc_dump_writer_open(&w, path, &m, &wo) == TSC_OK);
    CHECK(tsc_dump_writer_put(w, 0, 0, "k", 4, dk, TSC_FMT_FP32, c.k, TSC_FMT_BF16) == TSC_OK);
    CHECK(tsc_dump_writer_put(w, 0, 0, "v", 4, dk, TSC_FMT_FP32, c.v, TSC_FMT_BF16) == TSC_OK);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h += 2)
            CHECK(tsc_dump_writer_put_head(w, 0, 0, "q", 4, dq, b, h, TSC_FMT_FP32, c.q + qi(b, h, 0), TSC_FMT_BF16) ==
                  TSC_OK);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h += 2)
            CHECK(tsc_dump_writer_put_head(w, 0, 0, "o", 4, dq, b, h, TSC_FMT_FP32, c.o + qi(b, h, 0), TSC_FMT_BF16) ==
                  TSC_OK);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h += 2)
            CHECK(tsc_dump_writer_put_head(w, 0, 0, "lse", 3, dl, b, h, TSC_FMT_FP32, c.lse + ((size_t)b * H + h) * T,
                                           TSC_FMT_FP32) == TSC_OK);
    CHECK(tsc_dump_writer_step_done(w, 0) == TSC_OK);
    CHECK(tsc_dump_writer_close(w) == TSC_OK);
    tsc_check_opts_t o;
    tsc_check_opts_init(&o);
    o.dump_path = path;
    tsc_check_t *r = NULL;
    CHECKF(tsc_check_run(&o, &r) == TSC_OK, "%s", tsc_error_last());
    CHECK(r && r->n_bad == 0 && r->n_not_stored == 2 && r->nonfinite == 0 && r->rows == 2 * B * T);
    for (int h = 0; r && h < H; h++) CHECK(head(r, h) && head(r, h)->stored == (h % 2 == 0));
    tsc_check_free(r);
}

/* 6: bad input. */
static void test_bad_input(void) {
    char path[512];
    tsc_check_opts_t o;
    tsc_check_opts_init(&o);
    tsc_check_t *r = (tsc_check_t *)1;
    snprintf(path, sizeof path, "%s/missing.h5", dir);
    o.dump_path = path;
    CHECK(tsc_check_run(&o, &r) == TSC_ERR_IO && r == NULL);
    CHECK(strstr(tsc_error_last(), "missing.h5") != NULL);
    static case_t c;
    make_case(&c, "fp32", 1.0, 15);
    snprintf(path, sizeof path, "%s/no_o.h5", dir);
    write_case(path, &c, 0, 1);
    CHECK(tsc_check_run(&o, &r) == TSC_ERR_MISSING && r == NULL);
    CHECKF(strstr(tsc_error_last(), "no_o.h5: step 0 layer 0: no dataset 'o'") != NULL, "%s", tsc_error_last());
    /* without lse: O alone, said so */
    snprintf(path, sizeof path, "%s/no_lse.h5", dir);
    write_case(path, &c, 1, 0);
    CHECK(tsc_check_run(&o, &r) == TSC_OK && r && r->n_bad == 0 && r->dtype_lse[0] == 0 && !r->heads[0].has_lse);
    char s[256];
    if (r) CHECKF(strstr(tsc_check_sentence(r, s, sizeof s), "(no lse: O only)") != NULL, "%s", s);
    tsc_check_free(r);
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    test_presets();
    test_wide_inputs();
    test_wrong_o();
    test_wrong_lse();
    test_saturated();
    test_nonfinite();
    test_not_stored();
    test_bad_input();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return tsc_test_done();
}
