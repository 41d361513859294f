/* test_attn_map_kept: an attention map that keeps only part of P (tsc_attn_map_compute_kept, the
 * long-context path of `view` and `figure attn`) holds exactly what the full map gives:
 * 1. pooled f x f: each cell is the max of the full map's visible entries in its block (-1 when it
 *    has none), recomputed here from the full map; pool 1 is the full map bit for bit;
 * 2. a band of rows: those rows of the full map, bit for bit;
 * 3. tie counts, column masses and sinks do not depend on what is kept (every row counts);
 * 4. under a memory budget too small for T x T floats, the full map is refused with the budget's
 *    error while the pooled overview and a band of rows are computed;
 * 5. the scores a band keeps are the policy's (BF16 values), -inf where masked, and give the map's P and
 *    exact-tie counts;
 * 6. a pool below 1, rows outside the grid, or scores with a pool above 1 are argument errors.
 * On the planted llama-gqa dump (T = 256, causal, ties and a sink) and an unplanted one at
 * T = 300 (not a multiple of the pools). */
#include "tsc_test.h"

#include <sys/stat.h>
#include <unistd.h>

#include "tsc_attn_map.h"
#include "tsc_dump.h"
#include "tsc_synth.h"

static void same_stats(const tsc_attn_map_t *a, const tsc_attn_map_t *b, const char *what) {
    int bad = a->T != b->T || a->n_tied_rows != b->n_tied_rows || a->n_sinks != b->n_sinks;
    for (int i = 0; !bad && i < a->T; i++)
        bad = a->tie_eps_count[i] != b->tie_eps_count[i] || a->tie_exact_count[i] != b->tie_exact_count[i] ||
              a->col_mass[i] != b->col_mass[i] || a->col_uniform[i] != b->col_uniform[i] ||
              a->is_sink[i] != b->is_sink[i];
    CHECKF(!bad, "%s: tie counts, column masses or sinks differ from the full map's", what);
}

/* The full map's max over the visible entries of block (a, b) of size f, or -1. */
static float block_max(const tsc_attn_map_t *full, int f, int a, int b) {
    const int T = full->T;
    float mx = -1.0f;
    for (int i = a * f; i < (a + 1) * f && i < T; i++)
        for (int j = b * f; j < (b + 1) * f && j < T; j++)
            if ((!full->causal || j <= i) && full->p[(size_t)i * T + j] > mx) mx = full->p[(size_t)i * T + j];
    return mx;
}

static void check_dump(const char *path, int head) {
    tsc_dump_t *d = NULL;
    CHECKF(tsc_dump_open(&d, path) == TSC_OK, "%s: %s", path, tsc_error_last());
    if (!d) return;
    tsc_attn_map_t full, m;
    CHECKF(tsc_attn_map_compute(d, 0, 1, head, 0, "bf16-fa2", 0, &full) == TSC_OK, "full: %s", tsc_error_last());
    const int T = full.T;
    CHECK(full.pool == 1 && full.p_row0 == 0 && full.p_rows == T && full.p_cols == T);
    const int pools[] = {1, 3, 7, 64};
    for (size_t k = 0; k < sizeof pools / sizeof pools[0]; k++) {
        const int f = pools[k], g = (T + f - 1) / f;
        tsc_attn_map_keep_t keep = {.row0 = 0, .row1 = 0, .pool = f};
        CHECKF(tsc_attn_map_compute_kept(d, 0, 1, head, 0, "bf16-fa2", 0, &keep, &m) == TSC_OK, "pool %d: %s", f,
               tsc_error_last());
        CHECK(m.pool == f && m.p_rows == g && m.p_cols == g);
        int bad = 0;
        for (int a = 0; a < g && !bad; a++)
            for (int b = 0; b < g && !bad; b++) {
                float want = f == 1 ? full.p[(size_t)a * T + b] : block_max(&full, f, a, b);
                if (memcmp(&want, &m.p[(size_t)a * g + b], sizeof want) != 0) {
                    CHECKF(0, "%s pool %d cell (%d, %d): %.9g, the full map's block max %.9g", path, f, a, b,
                           m.p[(size_t)a * g + b], want);
                    bad = 1;
                }
            }
        same_stats(&full, &m, "pooled");
        tsc_attn_map_free(&m);
    }
    tsc_attn_map_keep_t band = {.row0 = 37, .row1 = 101, .pool = 1};
    CHECKF(tsc_attn_map_compute_kept(d, 0, 1, head, 0, "bf16-fa2", 0, &band, &m) == TSC_OK, "band: %s",
           tsc_error_last());
    CHECK(m.p_row0 == 37 && m.p_rows == 64 && m.p_cols == T);
    CHECK(m.p && memcmp(m.p, full.p + (size_t)37 * T, sizeof(float) * 64 * (size_t)T) == 0);
    same_stats(&full, &m, "band");
    tsc_attn_map_free(&m);

    /* the band's scores under bf16-torch (S a BF16 stage): BF16 values, -inf past the causal edge, and the
     * map's P and exact-tie counts recomputed from them in double */
    band.scores = 1;
    CHECKF(tsc_attn_map_compute_kept(d, 0, 1, head, 0, "bf16-torch", 0, &band, &m) == TSC_OK, "scores: %s",
           tsc_error_last());
    CHECK(m.s != NULL);
    int bad_s = 0, ties = 0;
    for (int r = 0; m.s && r < 64 && !bad_s; r++) {
        const double *sr = m.s + (size_t)r * T;
        const int i = 37 + r, nv = m.causal ? i + 1 : T;
        double mx = -INFINITY, sum = 0;
        int nx = 0;
        for (int j = 0; j < T; j++) {
            if (j >= nv) { bad_s |= sr[j] != -INFINITY; continue; }
            union { float f; uint32_t u; } b = {(float)sr[j]};
            bad_s |= (double)b.f != sr[j] || (b.u & 0xffffu) != 0; /* a BF16 value: the low 16 bits clear */
            if (sr[j] > mx) mx = sr[j];
        }
        for (int j = 0; j < nv; j++) sum += exp(sr[j] - mx), nx += sr[j] == mx;
        for (int j = 0; j < nv && !bad_s; j++) bad_s |= m.p[(size_t)r * T + j] != (float)(exp(sr[j] - mx) / sum);
        bad_s |= nx != m.tie_exact_count[i];
        ties += nx >= 2;
    }
    CHECKF(!bad_s, "%s: the kept scores are not BF16, not masked, or do not give the map's P and ties", path);
    if (head == 1) CHECKF(ties > 0, "the planted head's band has no tied row");
    tsc_attn_map_free(&m);

    /* the budget: below T x T floats, above the streamed computation's O(T * D) */
    char budget[32];
    snprintf(budget, sizeof budget, "%zu", (size_t)T * T * sizeof(float) / 2 + 5 * (size_t)T * 64 * 4 + 32 * T);
    setenv("TSC_MAX_MEMORY", budget, 1);
    CHECK(tsc_attn_map_compute(d, 0, 1, head, 0, "bf16-fa2", 0, &m) == TSC_ERR_UNSUPPORTED);
    CHECK(strstr(tsc_error_last(), "memory budget") != NULL);
    tsc_attn_map_free(&m);
    tsc_attn_map_keep_t ov = {.row0 = 0, .row1 = 0, .pool = 4}, rows = {.row0 = 0, .row1 = 16, .pool = 1};
    CHECKF(tsc_attn_map_compute_kept(d, 0, 1, head, 0, "bf16-fa2", 0, &ov, &m) == TSC_OK, "budget, pooled: %s",
           tsc_error_last());
    same_stats(&full, &m, "pooled under the budget");
    tsc_attn_map_free(&m);
    CHECKF(tsc_attn_map_compute_kept(d, 0, 1, head, 0, "bf16-fa2", 0, &rows, &m) == TSC_OK, "budget, band: %s",
           tsc_error_last());
    tsc_attn_map_free(&m);
    unsetenv("TSC_MAX_MEMORY");

    tsc_attn_map_keep_t bad[] = {{.row0 = 0, .row1 = 0, .pool = 0},  {.row0 = 5, .row1 = 5, .pool = 1},
                                 {.row0 = 0, .row1 = T + 1, .pool = 1}, {.row0 = 0, .row1 = 0, .pool = -3},
                                 {.row0 = -1, .row1 = 4, .pool = 2}, {.row0 = 0, .row1 = 40, .pool = 8},
                                 {.row0 = 0, .row1 = 0, .pool = 2, .scores = 1}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        CHECKF(tsc_attn_map_compute_kept(d, 0, 1, head, 0, NULL, 0, &bad[k], &m) == TSC_ERR_ARG, "bad keep %zu", k);
        tsc_attn_map_free(&m);
    }
    tsc_attn_map_free(&full);
    tsc_dump_close(d);
}

int main(void) {
    char dir[] = "tsc_mapkept_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char planted[256], plain[256];
    snprintf(planted, sizeof planted, "%s/planted.h5", dir);
    snprintf(plain, sizeof plain, "%s/plain.h5", dir);
    tsc_synth_opts_t o;
    tsc_synth_opts_init(&o);
    o.shape = "llama-gqa", o.steps = "0", o.layers = "1";
    CHECKF(tsc_synth_write(planted, &o) == TSC_OK, "synth: %s", tsc_error_last());
    o.seq_len = 300, o.plant = 0;
    CHECKF(tsc_synth_write(plain, &o) == TSC_OK, "synth: %s", tsc_error_last());
    check_dump(planted, 1); /* a planted head: tie rows and the sink key 0 */
    check_dump(plain, 5);
    tsc_attn_map_t m;
    tsc_dump_t *d = NULL;
    if (tsc_dump_open(&d, planted) == TSC_OK) {
        tsc_attn_map_keep_t ov = {.row0 = 0, .row1 = 0, .pool = 8};
        CHECK(tsc_attn_map_compute_kept(d, 0, 1, 1, 0, NULL, 0, &ov, &m) == TSC_OK);
        CHECKF(m.n_sinks >= 1 && m.is_sink[0] && m.n_tied_rows > 0, "planted: %d sinks, %d tied rows", m.n_sinks,
               m.n_tied_rows);
        tsc_attn_map_free(&m);
        tsc_dump_close(d);
    }
    remove(planted), remove(plain), rmdir(dir);
    return tsc_test_done();
}
