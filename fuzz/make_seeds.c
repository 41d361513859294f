/* make_seeds.c: writes the seed dumps of fuzz/corpus/dump/ with the library's own writer, small
 * enough (T=8, D=4) that the fuzzer mutates structure rather than tensor bytes:
 *   mini.h5        1 layer x 2 heads, every dataset kind (q k v o do lse x w_q w_o tiles/row_max),
 *                  bf16, fp16, fp8 and fp32 stores, a planted_heads attribute, one step
 *   gqa.h5         grouped-query (4 query heads on 2 kv heads), deflate, NaN fill, heads of q
 *                  written one at a time (head 3 never written)
 *   incomplete.h5  step 0 (q k v) complete, step 1 (q) written but never marked complete
 * and truncated copies of mini.h5 (half, and the first 4 KiB).
 *
 *   tsc_fuzz_seeds OUTDIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsc_dump.h"

#define T 8
#define D 4
#define C 8

static float vals[4096];

static tsc_status_t put(tsc_dump_writer_t *w, const tsc_dump_meta_t *m, long long step, int layer, const char *name,
                        tsc_format_t store) {
    int rank, per_head;
    uint64_t dims[4];
    tsc_status_t st = tsc_dump_expected_shape(m, name, &rank, dims, &per_head);
    if (st == TSC_OK) st = tsc_dump_writer_put(w, step, layer, name, rank, dims, TSC_FMT_FP32, vals, store);
    return st;
}

/* Layer 0 of step: the first n_core of q k v o do lse, then (full) x, w_q, w_o, tiles/row_max. */
static tsc_status_t write_step(tsc_dump_writer_t *w, const tsc_dump_meta_t *m, long long step, int n_core, int full,
                               int done) {
    static const char *core[] = {"q", "k", "v", "o", "do", "lse"};
    tsc_status_t st = TSC_OK;
    for (int layer = 0; layer < 1 && st == TSC_OK; layer++) {
        for (int i = 0; i < n_core && st == TSC_OK; i++)
            st = put(w, m, step, layer, core[i], i == 1 ? TSC_FMT_FP16 : i == 5 ? TSC_FMT_FP32 : TSC_FMT_BF16);
        if (!full) continue;
        if (st == TSC_OK) st = put(w, m, step, layer, "x", TSC_FMT_BF16);
        if (st == TSC_OK) st = put(w, m, step, layer, "w_q", TSC_FMT_FP8_E4M3);
        if (st == TSC_OK) st = put(w, m, step, layer, "w_o", TSC_FMT_FP32);
        if (st == TSC_OK) st = put(w, m, step, layer, "tiles/row_max", TSC_FMT_FP32);
    }
    if (st == TSC_OK && done) st = tsc_dump_writer_step_done(w, step);
    return st;
}

static void meta_for(tsc_dump_meta_t *m, int n_layer, int n_head, int n_kv_head) {
    tsc_dump_meta_init(m);
    m->n_layer = n_layer, m->n_head = n_head, m->n_kv_head = n_kv_head;
    m->head_dim = D, m->d_model = C, m->seq_len = T, m->batch = 1;
    m->softmax_scale = 0.5, m->tile_q = 4, m->tile_k = 4;
    snprintf(m->policy, sizeof m->policy, "bf16-torch+tile:q=4,k=4");
    snprintf(m->producer, sizeof m->producer, "tsc_fuzz_seeds");
}

static tsc_status_t mini(const char *path) {
    tsc_dump_meta_t m;
    meta_for(&m, 1, 2, 2);
    tsc_dump_writer_t *w;
    tsc_status_t st = tsc_dump_writer_open(&w, path, &m, NULL);
    if (st != TSC_OK) return st;
    long planted[2] = {1, 0};
    st = tsc_dump_writer_attr_longs(w, "planted_heads", planted, 2);
    if (st == TSC_OK) st = write_step(w, &m, 0, 6, 1, 1);
    if (st != TSC_OK) { tsc_dump_writer_abort(w); return st; }
    return tsc_dump_writer_close(w);
}

static tsc_status_t gqa(const char *path) {
    tsc_dump_meta_t m;
    meta_for(&m, 1, 4, 2);
    tsc_dump_write_opts_t o = {.deflate = 1, .fill_nan = 1};
    tsc_dump_writer_t *w;
    tsc_status_t st = tsc_dump_writer_open(&w, path, &m, &o);
    if (st != TSC_OK) return st;
    uint64_t dims[4] = {1, 4, T, D};
    for (int h = 0; h < 3 && st == TSC_OK; h++)
        st = tsc_dump_writer_put_head(w, 5, 0, "q", 4, dims, 0, h, TSC_FMT_FP32, vals, TSC_FMT_BF16);
    static const char *rest[] = {"k", "v", "o", "do", "lse"};
    for (int i = 0; i < 5 && st == TSC_OK; i++) st = put(w, &m, 5, 0, rest[i], i == 4 ? TSC_FMT_FP32 : TSC_FMT_BF16);
    if (st == TSC_OK) st = tsc_dump_writer_step_done(w, 5);
    if (st != TSC_OK) { tsc_dump_writer_abort(w); return st; }
    return tsc_dump_writer_close(w);
}

static tsc_status_t incomplete(const char *path) {
    tsc_dump_meta_t m;
    meta_for(&m, 1, 1, 1);
    tsc_dump_writer_t *w;
    tsc_status_t st = tsc_dump_writer_open(&w, path, &m, NULL);
    if (st != TSC_OK) return st;
    st = write_step(w, &m, 0, 3, 0, 1);
    if (st == TSC_OK) st = write_step(w, &m, 1, 1, 0, 0);
    if (st != TSC_OK) { tsc_dump_writer_abort(w); return st; }
    return tsc_dump_writer_close(w);
}

/* Copies the first len bytes of src to dst (len 0: half of src). */
static int truncated(const char *src, const char *dst, long len) {
    FILE *f = fopen(src, "rb");
    if (!f) return -1;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (len == 0 || (size_t)len > n) len = (long)n / 2;
    FILE *g = fopen(dst, "wb");
    if (!g) return -1;
    size_t k = fwrite(buf, 1, (size_t)len, g);
    return fclose(g) == 0 && k == (size_t)len ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: tsc_fuzz_seeds OUTDIR\n"); return 2; }
    for (int i = 0; i < 4096; i++) vals[i] = (float)((i * 37 % 101) - 50) / 16.0f;
    char p[3][4096], t[2][4096];
    snprintf(p[0], sizeof p[0], "%s/mini.h5", argv[1]);
    snprintf(p[1], sizeof p[1], "%s/gqa.h5", argv[1]);
    snprintf(p[2], sizeof p[2], "%s/incomplete.h5", argv[1]);
    snprintf(t[0], sizeof t[0], "%s/mini_half.h5", argv[1]);
    snprintf(t[1], sizeof t[1], "%s/mini_4k.h5", argv[1]);
    tsc_status_t st = mini(p[0]);
    if (st == TSC_OK) st = gqa(p[1]);
    if (st == TSC_OK) st = incomplete(p[2]);
    if (st != TSC_OK) { fprintf(stderr, "tsc_fuzz_seeds: %s\n", tsc_error_last()); return 1; }
    if (truncated(p[0], t[0], 0) || truncated(p[0], t[1], 4096)) {
        fprintf(stderr, "tsc_fuzz_seeds: cannot write the truncated copies\n");
        return 1;
    }
    return 0;
}
