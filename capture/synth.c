/* synth.c: synthetic dumps with planted structure (tsc_synth.h; recipe in docs/FORMAT.md §1.6). */
#include "tsc_synth.h"
#include "tsc_manifest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsc_attention.h"
#include "tsc_dump.h"
#include "tsc_formats.h"
#include "tsc_policy.h"
#include "tsc_select.h"

static const tsc_synth_shape_t shapes[] = {
    {.name = "tiny", .batch = 1, .n_layer = 2, .n_head = 4, .n_kv_head = 4, .head_dim = 16, .d_model = 64,
     .seq_len = 64, .tile_q = 16, .tile_k = 16, .default_steps = "0:3",
     .n_planted_layers = 1, .planted_layers = {1}, .n_planted_heads = 2, .planted_heads = {1, 3},
     .tie_key = 8, .rows_stride = 2, .n_features = 2, .features = {4, 9}, .x_channels = {45, 56},
     .description = "B=1, 2 layers, 4 heads, T=64, D=16, C=64, tiles 16, steps 0:3; planted: layer 1, heads 1,3, "
                    "tie keys 0,8, features 4,9"},
    {.name = "gpt2-small", .batch = 1, .n_layer = 12, .n_head = 12, .n_kv_head = 12, .head_dim = 64, .d_model = 768,
     .seq_len = 1024, .tile_q = 512, .tile_k = 512, .default_steps = "0",
     .n_planted_layers = 1, .planted_layers = {1}, .n_planted_heads = 6, .planted_heads = {0, 6, 7, 8, 10, 11},
     .tie_key = 128, .rows_stride = 2, .n_features = 2, .features = {20, 57}, .x_channels = {546, 678},
     .description = "B=1, 12 layers, 12 heads, T=1024, D=64, C=768, tiles 512, step 0; planted: layer 1, heads "
                    "0,6,7,8,10,11 (the paper's 1,7,8,9,11,12 1-based), tie keys 0,128, features 20,57"},
    {.name = "llama-gqa", .batch = 1, .n_layer = 4, .n_head = 8, .n_kv_head = 2, .head_dim = 64, .d_model = 512,
     .seq_len = 256, .tile_q = 64, .tile_k = 64, .default_steps = "0:2",
     .n_planted_layers = 1, .planted_layers = {1}, .n_planted_heads = 2, .planted_heads = {1, 2},
     .tie_key = 32, .rows_stride = 2, .n_features = 2, .features = {20, 57}, .x_channels = {364, 452},
     .description = "B=1, 4 layers, 8 query heads sharing 2 kv heads (GQA), T=256, D=64, C=512, tiles 64, steps "
                    "0:2; planted: layer 1, heads 1,2 (kv head 0), tie keys 0,32, features 20,57"},
};
#define N_SHAPES ((int)(sizeof shapes / sizeof shapes[0]))

const tsc_synth_shape_t *tsc_synth_shape_at(int i) { return i >= 0 && i < N_SHAPES ? &shapes[i] : NULL; }

const char *tsc_synth_shape_names(void) { return "tiny, gpt2-small, llama-gqa"; }

tsc_status_t tsc_synth_shape_get(const char *name, tsc_synth_shape_t *out) {
    for (int i = 0; i < N_SHAPES; i++)
        if (name && !strcmp(name, shapes[i].name)) { *out = shapes[i]; return TSC_OK; }
    return tsc_error_set(TSC_ERR_ARG, "unknown shape '%s' (expected one of: %s)", name ? name : "(null)",
                         tsc_synth_shape_names());
}

void tsc_synth_opts_init(tsc_synth_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->shape = "tiny";
    o->seed = 1;
    o->plant = 1;
}

/* ---- deterministic random numbers -------------------------------------------------------------- */

typedef struct { uint64_t s; } rng_t;

static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static uint64_t rnext(rng_t *r) { return mix(r->s += 0x9e3779b97f4a7c15ULL); }
static double unif(rng_t *r) { return (double)(rnext(r) >> 11) * 0x1p-53; }
/* Approximately standard normal: sum of 6 uniforms (Irwin-Hall), exact arithmetic only, so the
 * same seed gives the same bits on every machine (no libm involved); tails end at +-4.24. */
static double gauss(rng_t *r) {
    double s = 0;
    for (int i = 0; i < 6; i++) s += unif(r);
    return (s - 3.0) * 1.4142135623730951;
}

enum { K_KEY = 1, K_VAL, K_QRY, K_DO, K_X, K_WQ, K_WK, K_WV, K_WO, K_ROT };

/* An independent stream per (seed, step, layer, tensor, b, h): any slice can be regenerated alone. */
static rng_t stream(uint64_t seed, long long step, int layer, int kind, int b, int h) {
    uint64_t z = mix(seed ^ 0x5eed5eed5eedULL);
    z = mix(z ^ (uint64_t)(step + 1) * 0x100000001b3ULL);
    z = mix(z ^ ((uint64_t)layer << 40) ^ ((uint64_t)kind << 32) ^ ((uint64_t)b << 16) ^ (uint64_t)h);
    rng_t r = {z};
    return r;
}

static float bf(double x) { return tsc_bf16_to_f32(tsc_bf16_from_f32((float)x)); }

/* A random orthogonal D x D matrix (Gram-Schmidt on Gaussian rows), R[i*D + j]. */
static void rotation(uint64_t seed, int layer, int g, int D, double *R) {
    rng_t r = stream(seed, -1, layer, K_ROT, 0, g);
    for (int i = 0; i < D; i++) {
        for (;;) {
            double *row = R + (size_t)i * D;
            for (int j = 0; j < D; j++) row[j] = gauss(&r);
            for (int pass = 0; pass < 2; pass++)  /* twice: classical Gram-Schmidt loses orthogonality */
                for (int k = 0; k < i; k++) {
                    double dot = 0;
                    for (int j = 0; j < D; j++) dot += row[j] * R[(size_t)k * D + j];
                    for (int j = 0; j < D; j++) row[j] -= dot * R[(size_t)k * D + j];
                }
            double n = 0;
            for (int j = 0; j < D; j++) n += row[j] * row[j];
            if (n < 1e-6) continue;
            n = sqrt(n);
            for (int j = 0; j < D; j++) row[j] /= n;
            break;
        }
    }
}

/* out = bf16(R^T x): the vector x of the construction basis expressed in the stored basis. Both
 * q and k of a kv group use the same R, so α·q·k is unchanged up to the BF16 rounding. */
static void rotate_round(const double *R, int D, const double *x, float *out) {
    for (int j = 0; j < D; j++) {
        double s = 0;
        for (int i = 0; i < D; i++) s += R[(size_t)i * D + j] * x[i];
        out[j] = bf(s);
    }
}

/* Checks of the construction only (not stored): four partial sums so the compiler can vectorise. */
static double dotf(const float *a, const float *b, int D) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int i = 0;
    for (; i + 4 <= D; i += 4) {
        s0 += (double)a[i] * b[i];
        s1 += (double)a[i + 1] * b[i + 1];
        s2 += (double)a[i + 2] * b[i + 2];
        s3 += (double)a[i + 3] * b[i + 3];
    }
    for (; i < D; i++) s0 += (double)a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

static int in_list(int v, const int *list, int n) {
    for (int i = 0; i < n; i++)
        if (list[i] == v) return 1;
    return 0;
}

typedef struct {
    const tsc_synth_shape_t *sh;
    uint64_t seed;
    int plant;
    double alpha;
    tsc_policy_t pol;
} gen_t;

/* Keys of one (batch, kv head), in the construction basis k0 [T, D], then rotated by R and rounded
 * into kb: the planted kv heads keep direction 0 for the tied keys (0 and p, the same vector, of
 * length a) and leave it empty in every other key. */
static void gen_keys(const gen_t *g, long long step, int layer, int b, int kh, int kv_planted, double a,
                     const double *R, double *k0, float *kb) {
    const tsc_synth_shape_t *s = g->sh;
    int T = s->seq_len, D = s->head_dim, p = s->tie_key;
    rng_t rk = stream(g->seed, step, layer, K_KEY, b, kh);
    for (int t = 0; t < T; t++) {
        double *x = k0 + (size_t)t * D;
        for (int d = 0; d < D; d++) x[d] = gauss(&rk);
        if (kv_planted) {
            if (t == 0 || t == p) { x[0] = a; for (int d = 1; d < D; d++) x[d] = 0; }
            else x[0] = 0;
        }
        if (kv_planted && t == p) memcpy(kb + (size_t)t * D, kb, sizeof(float) * D);  /* bit-identical */
        else rotate_round(R, D, x, kb + (size_t)t * D);
    }
}

/* Values of one (batch, kv head) into vb [T, D]; the planted features of a planted kv head are
 * large and negative, and their tied pair is nudged to a rounding halfway point. */
static void gen_values(const gen_t *g, long long step, int layer, int b, int kh, int kv_planted, float *vb) {
    const tsc_synth_shape_t *s = g->sh;
    int T = s->seq_len, D = s->head_dim, p = s->tie_key;
    rng_t rv = stream(g->seed, step, layer, K_VAL, b, kh);
    for (int t = 0; t < T; t++)
        for (int d = 0; d < D; d++) {
            double z = gauss(&rv);
            int feat = kv_planted && in_list(d, s->features, s->n_features);
            vb[(size_t)t * D + d] = bf(feat ? -2.2 + 0.4 * z : z);
        }
    if (!kv_planted) return;
    /* The planted features at the two tied keys: nudge V[p] by at most a few BF16
     * spacings so that V[0] + V[p] (exact in FP32) lies exactly halfway between two
     * BF16 values. Alone that tie would round to even; the tiny same-sign mass of the
     * other keys makes it round up in magnitude: every planted row then carries the
     * paper's negative rounding error (docs/MECHANISM.md §5, "two large, one small"). */
    for (int fi = 0; fi < s->n_features; fi++) {
        int f = s->features[fi];
        float v0 = vb[f], vp = vb[(size_t)p * D + f];
        uint16_t bits = tsc_bf16_from_f32(vp);
        static const int steps[] = {0, 1, -1, 2, -2, 3, -3, 4, -4};
        for (size_t k2 = 0; k2 < sizeof steps / sizeof *steps; k2++) {
            float cand = tsc_bf16_to_f32((uint16_t)(bits + steps[k2]));
            float sum = v0 + cand;
            uint32_t u;
            memcpy(&u, &sum, 4);
            if ((u & 0xffffu) == 0x8000u) { vb[(size_t)p * D + f] = cand; break; }
        }
    }
}

/* A planted query row t into qt: q = (c, n): α·q·k = r at keys 0 and p, r drawn for the row
 * uniformly in [TSC_SYNTH_TIE_SCORE_LO, TSC_SYNTH_TIE_SCORE_HI] (varied maxima: one shared value
 * would make every row's stable-softmax rescaling e^((1-β)r) round the same way), α·n·r ~ N(0,1)
 * elsewhere; shrink n until every other visible score is >= TSC_SYNTH_MIN_GAP below. qv [D] is
 * scratch. 1 when the row reached its regime, else 0. */
static int planted_query(const gen_t *g, rng_t *rq, const double *R, const float *kb, int t, double a,
                         double *qv, float *qt) {
    int D = g->sh->head_dim, p = g->sh->tie_key;
    double alpha = g->alpha;
    double sig_n = 1.0 / (alpha * sqrt((double)(D - 1))); /* other planted-row scores ~ N(0, 1) */
    double r = TSC_SYNTH_TIE_SCORE_LO + (TSC_SYNTH_TIE_SCORE_HI - TSC_SYNTH_TIE_SCORE_LO) * unif(rq);
    for (int d = 1; d < D; d++) qv[d] = sig_n * gauss(rq);
    qv[0] = r / (alpha * a);
    int ok = 0;
    for (int it = 0; it < 40 && !ok; it++) {
        rotate_round(R, D, qv, qt);
        double tie = alpha * dotf(qt, kb, D), worst = -INFINITY, mass = 0;
        for (int j = 1; j <= t; j++)
            if (j != p) {
                double sj = alpha * dotf(qt, kb + (size_t)j * D, D);
                if (sj > worst) worst = sj;
                mass += exp(sj - tie);
            }
        /* the non-tied P-bar mass times |V| (< ~4) must stay far below half an
         * ULP of the tied sum (2^-6 in [4, 8)): at most 1e-3 of P-bar mass */
        ok = tie - worst >= TSC_SYNTH_MIN_GAP + 0.25 && mass <= 1e-3;
        if (!ok) for (int d = 1; d < D; d++) qv[d] *= 0.7;
    }
    return ok;
}

/* A random query row t into qt with a unique maximum: redraw until the runner-up is clearly
 * behind (and, next to tied keys, the maximum is not one of them), then scale so that the margin
 * is >= TSC_SYNTH_MIN_MARGIN with scores within +-40 (BF16 spacing there is <= 0.25, far below
 * the margin). qv [D] is scratch. 1 when the row reached its regime, else 0. */
static int random_query(const gen_t *g, rng_t *rq, const double *R, const float *kb, int t, int kv_planted,
                        double self_score, double *qv, float *qt) {
    int D = g->sh->head_dim, p = g->sh->tie_key;
    double alpha = g->alpha;
    int ok = 0;
    for (int it = 0; it < 2000 && !ok; it++) {
        for (int d = 0; d < D; d++) qv[d] = gauss(rq);
        if (kv_planted) qv[0] = 0;  /* no component along the tied keys */
        double best = -INFINITY, second = -INFINITY, s1 = 0, s2 = 0, amax = 0;
        int jb = -1;
        for (int pass = 0; pass < 2 && !ok; pass++) {
            rotate_round(R, D, qv, qt);
            best = second = -INFINITY; s1 = s2 = amax = 0; jb = -1;
            for (int j = 0; j <= t; j++) {
                double sj = alpha * dotf(qt, kb + (size_t)j * D, D);
                s1 += sj; s2 += sj * sj;
                if (fabs(sj) > amax) amax = fabs(sj);
                if (sj > best) { second = best; best = sj; jb = j; }
                else if (sj > second) second = sj;
            }
            if (t == 0) { ok = 1; break; }  /* one visible key */
            if (kv_planted && (jb == 0 || jb == p)) break;
            double gap = best - second;
            if (pass == 1) { ok = gap >= TSC_SYNTH_MIN_MARGIN + 0.25; break; }
            double sd = sqrt(fmax(s2 / (t + 1) - (s1 / (t + 1)) * (s1 / (t + 1)), 1e-12));
            double lam = fmax((TSC_SYNTH_MIN_MARGIN + 0.5) / gap, self_score / 3.0 / sd);
            if (!(gap > 0) || lam * amax > 40.0) break;
            for (int d = 0; d < D; d++) qv[d] *= lam;
        }
    }
    return ok;
}

/* Queries and dO of one (batch, head) into qb and db [T, D], against the head's keys kb. Returns
 * 0, or 1 (tie gap) / 2 (unique-max margin) after writing why for the first row that failed. */
static int gen_head(const gen_t *g, long long step, int layer, int b, int h, int kv_planted, double a,
                    const double *R, const float *kb, double *qv, float *qb, float *db, char *why, size_t why_cap) {
    const tsc_synth_shape_t *s = g->sh;
    int T = s->seq_len, D = s->head_dim, p = s->tie_key, fail = 0;
    int layer_planted = g->plant && in_list(layer, s->planted_layers, s->n_planted_layers);
    int head_planted = layer_planted && in_list(h, s->planted_heads, s->n_planted_heads);
    rng_t rq = stream(g->seed, step, layer, K_QRY, b, h);
    rng_t rd = stream(g->seed, step, layer, K_DO, b, h);
    /* each head gets its own sharpness: the target score of unplanted rows */
    double self_score = 6.0 + 4.0 * unif(&rq);
    for (int t = 0; t < T && !fail; t++) {
        float *qt = qb + (size_t)t * D;
        int planted_row = head_planted && t >= p && (t - p) % s->rows_stride == 0;
        if (planted_row) {
            if (!planted_query(g, &rq, R, kb, t, a, qv, qt)) fail = 1;
        } else {
            if (!random_query(g, &rq, R, kb, t, kv_planted, self_score, qv, qt)) fail = 2;
        }
        if (fail)
            snprintf(why, why_cap, "step %lld, layer %d, head %d, row %d did not reach its %s", step, layer, h, t,
                     fail == 1 ? "tie gap" : "unique-max margin");
    }
    for (int t = 0; t < T; t++)
        for (int d = 0; d < D; d++) {
            double z = gauss(&rd);
            int feat = head_planted && in_list(d, s->features, s->n_features);
            db[(size_t)t * D + d] = bf(1e-3 * (feat ? -1.0 + 0.25 * z : z));
        }
    return fail;
}

/* Fills q, k, v, dO of one layer (float holding BF16 values). Returns 0, or -1 when a row could
 * not be brought into its regime (a bug: the construction makes it converge). */
static int gen_qkvdo(const gen_t *g, long long step, int layer, float *q, float *k, float *v, float *dout,
                     char *why, size_t why_cap) {
    const tsc_synth_shape_t *s = g->sh;
    int B = s->batch, H = s->n_head, Hkv = s->n_kv_head, T = s->seq_len, D = s->head_dim;
    int group = H / Hkv;
    int layer_planted = g->plant && in_list(layer, s->planted_layers, s->n_planted_layers);
    /* the tied keys' length: a row's query sets its tied score α·q·k within the planted range */
    double a = sqrt(0.5 * (TSC_SYNTH_TIE_SCORE_LO + TSC_SYNTH_TIE_SCORE_HI) / g->alpha);
    int fail = 0;
    double *k0 = malloc(sizeof(double) * (size_t)T * D);
    double *R = malloc(sizeof(double) * (size_t)D * D);
    double *qv = malloc(sizeof(double) * (size_t)D * 2);
    if (!k0 || !R || !qv) { free(k0); free(R); free(qv); snprintf(why, why_cap, "out of memory"); return -1; }
    for (int b = 0; b < B && !fail; b++)
        for (int kh = 0; kh < Hkv && !fail; kh++) {
            int kv_planted = 0;
            for (int h = kh * group; h < (kh + 1) * group; h++)
                kv_planted |= layer_planted && in_list(h, s->planted_heads, s->n_planted_heads);
            rotation(g->seed, layer, kh, D, R);
            float *kb = k + ((size_t)b * Hkv + kh) * T * D;
            gen_keys(g, step, layer, b, kh, kv_planted, a, R, k0, kb);
            gen_values(g, step, layer, b, kh, kv_planted, v + ((size_t)b * Hkv + kh) * T * D);
            for (int h = kh * group; h < (kh + 1) * group && !fail; h++)
                fail = gen_head(g, step, layer, b, h, kv_planted, a, R, kb, qv, q + ((size_t)b * H + h) * T * D,
                                dout + ((size_t)b * H + h) * T * D, why, why_cap);
        }
    free(k0);
    free(R);
    free(qv);
    return fail ? -1 : 0;
}

/* x [B, T, C], w_q [H*D, C], w_k/w_v [Hkv*D, C], w_o [C, H*D]: GPT-2-like initialisation scale. */
static void gen_x_w(const gen_t *g, long long step, int layer, float *x, float *wq, float *wk, float *wv, float *wo) {
    const tsc_synth_shape_t *s = g->sh;
    int B = s->batch, H = s->n_head, Hkv = s->n_kv_head, T = s->seq_len, D = s->head_dim, C = s->d_model;
    int layer_planted = g->plant && in_list(layer, s->planted_layers, s->n_planted_layers);
    for (int b = 0; b < B; b++) {
        rng_t r = stream(g->seed, step, layer, K_X, b, 0);
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                double mu = 0;
                /* the shared columns of x: LayerNorm outputs with two persistent massive channels
                 * (+0.8 and -0.6 times 4 sqrt(C)), so the common part has 4x the norm of the random
                 * part and every X[T] points along it (cosine about 16/17 between tokens), as the
                 * shared columns of docs/MECHANISM.md §4 (3) */
                if (g->plant && c == s->x_channels[0]) mu = 3.2 * sqrt((double)C);
                if (g->plant && c == s->x_channels[1]) mu = -2.4 * sqrt((double)C);
                x[((size_t)b * T + t) * C + c] = bf(mu + gauss(&r));
            }
    }
    rng_t r = stream(g->seed, step, layer, K_WQ, 0, 0);
    for (size_t i = 0; i < (size_t)H * D * C; i++) wq[i] = (float)(0.02 * gauss(&r));
    if (layer_planted) {
        /* planted heads: a rank-1 part u m^T (u = the tied-key direction of the head's kv group,
         * m = the shared channels of x, normalised), norm 1.5: their W^Q spectral norm is the
         * largest of the layer (random parts: about 0.02 (sqrt(D) + sqrt(C))) */
        double *R = malloc(sizeof(double) * (size_t)D * D);
        if (R) {
            double m0 = 4.0 / 5.0, m1 = -3.0 / 5.0;
            for (int h = 0; h < H; h++) {
                if (!in_list(h, s->planted_heads, s->n_planted_heads)) continue;
                rotation(g->seed, layer, h / (H / Hkv), D, R);
                for (int i = 0; i < D; i++) {
                    double u = R[i];  /* row 0 of R: direction 0 of the construction basis */
                    wq[((size_t)h * D + i) * C + s->x_channels[0]] += (float)(1.5 * u * m0);
                    wq[((size_t)h * D + i) * C + s->x_channels[1]] += (float)(1.5 * u * m1);
                }
            }
            free(R);
        }
    }
    for (size_t i = 0; i < (size_t)H * D * C; i++) wq[i] = bf(wq[i]);
    r = stream(g->seed, step, layer, K_WK, 0, 0);
    for (size_t i = 0; i < (size_t)Hkv * D * C; i++) wk[i] = bf(0.02 * gauss(&r));
    r = stream(g->seed, step, layer, K_WV, 0, 0);
    for (size_t i = 0; i < (size_t)Hkv * D * C; i++) wv[i] = bf(0.02 * gauss(&r));
    r = stream(g->seed, step, layer, K_WO, 0, 0);
    for (size_t i = 0; i < (size_t)C * H * D; i++) wo[i] = bf(0.02 * gauss(&r));
}

/* Expands a bounded set into sorted values < limit (limit < 0: no limit but open ranges refused). */
static tsc_status_t expand_set(const tsc_select_set_t *set, long long limit, long long **vals, int *n,
                               const char *what) {
    *vals = NULL;
    *n = 0;
    if (set->all && limit < 0) return tsc_error_set(TSC_ERR_ARG, "%s: 'all' is not a finite list", what);
    long long cap = 0;
    if (set->all) {
        cap = limit;
    } else {
        for (int i = 0; i < set->n; i++) {
            const tsc_select_range_t *r = &set->item[i];
            if (r->stop == TSC_SELECT_OPEN && limit < 0)
                return tsc_error_set(TSC_ERR_ARG, "%s: open range is not a finite list", what);
            long long stop = r->stop == TSC_SELECT_OPEN ? limit : r->stop;
            if (stop > r->start) cap += (stop - r->start + r->stride - 1) / r->stride;
        }
    }
    if (cap > 100000) return tsc_error_set(TSC_ERR_ARG, "%s: more than 100000 values", what);
    long long *v = malloc(sizeof(long long) * (size_t)(cap + 1));
    if (!v) return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", what);
    int k = 0;
    long long top = limit < 0 ? 100000000000LL : limit;
    for (long long x = 0; x < top && k < cap + 1; x++) {
        if (!set->all) {
            /* jump to the next candidate: the smallest start >= x among the ranges */
            long long nx = -1;
            for (int i = 0; i < set->n; i++) {
                const tsc_select_range_t *r = &set->item[i];
                long long c;
                if (x <= r->start) c = r->start;
                else c = r->start + ((x - r->start + r->stride - 1) / r->stride) * r->stride;
                if (c < r->stop && (nx < 0 || c < nx)) nx = c;
            }
            if (nx < 0 || nx >= top) break;
            x = nx;
        }
        v[k++] = x;
    }
    *vals = v;
    *n = k;
    return TSC_OK;
}

/* The planted structure as root attributes, for tests and readers (empty lists without planting). */
static tsc_status_t write_planted(tsc_dump_writer_t *w, const tsc_synth_shape_t *sh, const tsc_synth_opts_t *o,
                                  const char *polbuf) {
    long pl[TSC_SYNTH_MAX_LIST], ph[TSC_SYNTH_MAX_LIST], pk[TSC_SYNTH_MAX_LIST], pf[TSC_SYNTH_MAX_LIST];
    long sink[1] = {0}, ties[2] = {0, sh->tie_key}, rs[1] = {sh->tie_key}, rstr[1] = {sh->rows_stride},
         xc[2] = {sh->x_channels[0], sh->x_channels[1]}, seed[1] = {(long)o->seed}, planted[1] = {o->plant};
    size_t npl = 0, nph = 0, npk = 0, npf = 0;
    if (o->plant) {
        for (int i = 0; i < sh->n_planted_layers; i++) pl[npl++] = sh->planted_layers[i];
        for (int i = 0; i < sh->n_planted_heads; i++) {
            ph[nph++] = sh->planted_heads[i];
            long kv = sh->planted_heads[i] / (sh->n_head / sh->n_kv_head);
            int dup = 0;
            for (size_t j = 0; j < npk; j++) dup |= pk[j] == kv;
            if (!dup) pk[npk++] = kv;
        }
        for (int i = 0; i < sh->n_features; i++) pf[npf++] = sh->features[i];
    }
    struct { const char *name; const long *v; size_t n; } attrs[] = {
        {"planted_layers", pl, npl}, {"planted_heads", ph, nph}, {"planted_kv_heads", pk, npk},
        {"planted_features", pf, npf}, {"planted_sink_keys", sink, o->plant ? 1u : 0u},
        {"planted_tie_keys", ties, o->plant ? 2u : 0u}, {"planted_rows_start", rs, o->plant ? 1u : 0u},
        {"planted_rows_stride", rstr, o->plant ? 1u : 0u}, {"planted_x_channels", xc, o->plant ? 2u : 0u},
        {"synth_seed", seed, 1}, {"synth_planted", planted, 1}};
    tsc_status_t st = TSC_OK;
    for (size_t i = 0; st == TSC_OK && i < sizeof attrs / sizeof *attrs; i++)
        st = tsc_dump_writer_attr_longs(w, attrs[i].name, attrs[i].v, attrs[i].n);
    if (st == TSC_OK) st = tsc_dump_writer_attr_str(w, "synth_shape", sh->name);
    if (st == TSC_OK) st = tsc_dump_writer_attr_str(w, "synth_o_policy", polbuf);
    return st;
}

/* One layer's tensors, float32, as generated (o and lse computed under the policy). */
typedef struct {
    float *q, *k, *v, *dout, *out, *lse, *x, *wq, *wk, *wv, *wo;
} layer_bufs_t;

static void bufs_free(layer_bufs_t *b) {
    free(b->q); free(b->k); free(b->v); free(b->dout); free(b->out); free(b->lse); free(b->x);
    free(b->wq); free(b->wk); free(b->wv); free(b->wo);
    memset(b, 0, sizeof *b);
}

static tsc_status_t bufs_alloc(layer_bufs_t *b, const tsc_synth_shape_t *sh, const char *path) {
    size_t B = (size_t)sh->batch, H = (size_t)sh->n_head, K = (size_t)sh->n_kv_head, T = (size_t)sh->seq_len,
           D = (size_t)sh->head_dim, C = (size_t)sh->d_model;
    size_t nq = B * H * T * D, nk = B * K * T * D;
    b->q = malloc(nq * 4); b->k = malloc(nk * 4); b->v = malloc(nk * 4); b->dout = malloc(nq * 4);
    b->out = malloc(nq * 4); b->lse = malloc(B * H * T * 4); b->x = malloc(B * T * C * 4);
    b->wq = malloc(H * D * C * 4); b->wk = malloc(K * D * C * 4); b->wv = malloc(K * D * C * 4);
    b->wo = malloc(C * H * D * 4);
    if (b->q && b->k && b->v && b->dout && b->out && b->lse && b->x && b->wq && b->wk && b->wv && b->wo) return TSC_OK;
    bufs_free(b);
    return tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory for one layer of shape %s", path, sh->name);
}

/* Writes one layer of step s, batch rows [b0, b0 + bn): the attention tensors as bf16 (lse as
 * f32), x and the weights. */
static tsc_status_t put_layer(tsc_dump_writer_t *w, const tsc_synth_shape_t *sh, long long s, int layer,
                              const layer_bufs_t *all, int b0, int bn) {
    uint64_t B = (uint64_t)bn, H = (uint64_t)sh->n_head, K = (uint64_t)sh->n_kv_head,
             T = (uint64_t)sh->seq_len, D = (uint64_t)sh->head_dim, C = (uint64_t)sh->d_model;
    size_t o = (size_t)b0;
    layer_bufs_t rows = *all, *b = &rows;
    rows.q = all->q + o * H * T * D; rows.out = all->out + o * H * T * D; rows.dout = all->dout + o * H * T * D;
    rows.k = all->k + o * K * T * D; rows.v = all->v + o * K * T * D; rows.lse = all->lse + o * H * T;
    rows.x = all->x + o * T * C;
    uint64_t dq[4] = {B, H, T, D}, dk[4] = {B, K, T, D}, dl[3] = {B, H, T}, dx[3] = {B, T, C}, dwq[2] = {H * D, C},
             dwk[2] = {K * D, C}, dwo[2] = {C, H * D};
    tsc_format_t bf16 = TSC_FMT_BF16, f32 = TSC_FMT_FP32;
    tsc_status_t st = tsc_dump_writer_put(w, s, layer, "q", 4, dq, f32, b->q, bf16);
    if (st == TSC_OK) st = tsc_dump_writer_put(w, s, layer, "k", 4, dk, f32, b->k, bf16);
    if (st == TSC_OK) st = tsc_dump_writer_put(w, s, layer, "v", 4, dk, f32, b->v, bf16);
    if (st == TSC_OK) st = tsc_dump_writer_put(w, s, layer, "o", 4, dq, f32, b->out, bf16);
    if (st == TSC_OK) st = tsc_dump_writer_put(w, s, layer, "do", 4, dq, f32, b->dout, bf16);
    if (st == TSC_OK) st = tsc_dump_writer_put(w, s, layer, "lse", 3, dl, f32, b->lse, f32);
    if (st == TSC_OK) st = tsc_dump_writer_put(w, s, layer, "x", 3, dx, f32, b->x, bf16);
    if (st == TSC_OK) st = tsc_dump_writer_put(w, s, layer, "w_q", 2, dwq, f32, b->wq, bf16);
    if (st == TSC_OK) st = tsc_dump_writer_put(w, s, layer, "w_k", 2, dwk, f32, b->wk, bf16);
    if (st == TSC_OK) st = tsc_dump_writer_put(w, s, layer, "w_v", 2, dwk, f32, b->wv, bf16);
    if (st == TSC_OK) st = tsc_dump_writer_put(w, s, layer, "w_o", 2, dwo, f32, b->wo, bf16);
    return st;
}

/* HDF5 is called only through tsc_dump_writer_*, each of which enters the library's HDF5 scope
 * itself: the lock is not held across the attention compute, so other threads' HDF5 calls wait
 * for one dataset write at most, never for a whole synthetic dump. */
tsc_status_t tsc_synth_write(const char *path, const tsc_synth_opts_t *opts) {
    tsc_synth_opts_t o;
    if (opts) o = *opts;
    else tsc_synth_opts_init(&o);
    tsc_synth_shape_t sh;
    tsc_status_t st = tsc_synth_shape_get(o.shape ? o.shape : "tiny", &sh);
    if (st == TSC_OK && o.seq_len != 0) {
        if (o.seq_len <= sh.tie_key || o.seq_len > 131072)
            return tsc_error_set(TSC_ERR_ARG, "seq_len %d out of range [%d, 131072] for shape %s", o.seq_len,
                                 sh.tie_key + 1, sh.name);
        sh.seq_len = o.seq_len;
    }
    if (st != TSC_OK) return st;
    if (o.deflate < 0 || o.deflate > 9) return tsc_error_set(TSC_ERR_ARG, "deflate level %d outside [0, 9]", o.deflate);
    if (o.batch < 0 || o.batch > 4096) return tsc_error_set(TSC_ERR_ARG, "batch %d outside [1, 4096]", o.batch);
    if (o.batch) sh.batch = o.batch;
    int nr = o.ranks > 1 ? o.ranks : 1;
    if (o.ranks < 0 || o.ranks > 4096 || sh.batch % nr)
        return tsc_error_set(TSC_ERR_ARG, "ranks %d: 1..4096 ranks, dividing the batch (%d)", o.ranks, sh.batch);
    tsc_select_set_t sset, lset;
    st = tsc_select_set_parse(&sset, o.steps ? o.steps : sh.default_steps);
    if (st != TSC_OK) return tsc_error_wrap(st, "steps: ");
    tsc_select_set_all(&lset);
    if (o.layers && (st = tsc_select_set_parse(&lset, o.layers)) != TSC_OK) return tsc_error_wrap(st, "layers: ");
    long long *steps = NULL, *layers = NULL;
    int n_steps = 0, n_layers = 0;
    st = expand_set(&sset, -1, &steps, &n_steps, "steps");
    if (st == TSC_OK) st = expand_set(&lset, sh.n_layer, &layers, &n_layers, "layers");
    if (st == TSC_OK && n_steps == 0) st = tsc_error_set(TSC_ERR_ARG, "steps: the set selects no step");
    if (st == TSC_OK && n_layers == 0)
        st = tsc_error_set(TSC_ERR_ARG, "layers: the set selects no layer of the %d in shape %s", sh.n_layer, sh.name);

    gen_t g = {&sh, o.seed, o.plant, 1.0 / sqrt((double)sh.head_dim), {0}};
    char polbuf[TSC_POLICY_STR_MAX];
    if (st == TSC_OK) {
        if (o.policy) {
            st = tsc_policy_parse(o.policy, &g.pol);
        } else {
            snprintf(polbuf, sizeof polbuf, "bf16-torch+tile:q=%d,k=%d", sh.tile_q, sh.tile_k);
            st = tsc_policy_parse(polbuf, &g.pol);
        }
        if (st != TSC_OK) st = tsc_error_wrap(st, "policy: ");
    }
    if (st == TSC_OK) st = tsc_policy_format(&g.pol, polbuf, sizeof polbuf);

    tsc_dump_meta_t m;
    tsc_dump_meta_init(&m);
    m.n_layer = sh.n_layer; m.n_head = sh.n_head; m.n_kv_head = sh.n_kv_head; m.head_dim = sh.head_dim;
    m.d_model = sh.d_model; m.seq_len = sh.seq_len; m.batch = sh.batch; m.causal = 1;
    m.softmax_scale = g.alpha; m.tile_q = g.pol.block_q; m.tile_k = g.pol.block_k;
    if (st == TSC_OK && strlen(polbuf) >= sizeof m.policy)
        st = tsc_error_set(TSC_ERR_ARG, "policy: '%s' is longer than %zu characters", polbuf, sizeof m.policy - 1);
    if (st == TSC_OK) memcpy(m.policy, polbuf, strlen(polbuf) + 1);
    snprintf(m.producer, sizeof m.producer, "tilescope-synth %s", tsc_version());

    layer_bufs_t b = {0};
    if (st == TSC_OK) st = bufs_alloc(&b, &sh, path);
    /* one writer, or one per rank: "X.h5" -> "X.rank<r>.h5" */
    tsc_dump_writer_t *wr[4096] = {0};
    char (*rpath)[4200] = nr > 1 ? calloc((size_t)nr, sizeof *rpath) : NULL;
    if (st == TSC_OK && nr > 1 && !rpath) st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", path);
    tsc_dump_write_opts_t wopts = {o.deflate, 0};
    for (int r = 0; st == TSC_OK && r < nr; r++) {
        const char *wp = path;
        if (nr > 1) {
            size_t n = strlen(path);
            int ext = n > 3 && !strcmp(path + n - 3, ".h5");
            snprintf(rpath[r], sizeof rpath[r], "%.*s.rank%d.h5", (int)(ext ? n - 3 : n), path, r);
            wp = rpath[r];
            m.batch = sh.batch / nr; m.rank = r; m.world_size = nr;
        }
        st = tsc_dump_writer_open(&wr[r], wp, &m, &wopts);
        if (st == TSC_OK) st = write_planted(wr[r], &sh, &o, polbuf);
    }
    tsc_attn_dims_t dims = {sh.batch, sh.n_head, sh.n_kv_head, sh.seq_len, sh.head_dim, 1, g.alpha};
    for (int si = 0; st == TSC_OK && si < n_steps; si++) {
        for (int li = 0; st == TSC_OK && li < n_layers; li++) {
            int layer = (int)layers[li];
            char why[256] = "";
            if (gen_qkvdo(&g, steps[si], layer, b.q, b.k, b.v, b.dout, why, sizeof why) != 0) {
                st = tsc_error_set(TSC_ERR_INTERNAL, "%s: synth construction failed: %s", path, why);
                break;
            }
            tsc_attn_io_t io = {.dtype = TSC_ATTN_F32, .q = b.q, .k = b.k, .v = b.v, .o = b.out, .lse = b.lse};
            st = tsc_attn_run(&g.pol, &dims, &io, NULL, 0);
            if (st != TSC_OK) { st = tsc_error_wrap(st, "%s: computing o under %s: ", path, polbuf); break; }
            gen_x_w(&g, steps[si], layer, b.x, b.wq, b.wk, b.wv, b.wo);
            for (int r = 0; st == TSC_OK && r < nr; r++)
                st = put_layer(wr[r], &sh, steps[si], layer, &b, r * (sh.batch / nr), sh.batch / nr);
            if (st == TSC_OK && o.progress) o.progress(o.progress_ctx, si * n_layers + li + 1, n_steps * n_layers);
        }
        for (int r = 0; st == TSC_OK && r < nr; r++) st = tsc_dump_writer_step_done(wr[r], steps[si]);
    }
    for (int r = 0; r < nr; r++) {
        if (!wr[r]) continue;
        if (st == TSC_OK) st = tsc_dump_writer_close(wr[r]);
        else tsc_dump_writer_abort(wr[r]);
    }
    if (st == TSC_OK && nr > 1) {
        const char **rp = malloc((size_t)nr * sizeof *rp);
        if (!rp) st = tsc_error_set(TSC_ERR_NOMEM, "%s: out of memory", path);
        for (int r = 0; rp && r < nr; r++) rp[r] = rpath[r];
        if (rp) st = tsc_manifest_write(path, rp, nr);
        free(rp);
    }
    free(rpath);
    bufs_free(&b);
    free(steps); free(layers);
    return st;
}
