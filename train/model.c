/* model.c: GPT-2 and Llama models of tsc_model.h: the tensor layout (and the parameter count and
 * shape checks of a configuration that follow from it), allocation, initialisation, per-layer
 * attention policies and the attention view; the forward and backward passes are in
 * model_tmpl.c, instantiated below for float (FP32 and BF16 modes) and double (FP64 mode).
 *
 * GPT-2: token + learned position embeddings; per block x1 = LN1(h), h += W_o·attn(W_q x1 + b_q,
 * W_k x1 + b_k, W_v x1 + b_v) + b_o, x2 = LN2(h), h += W_down·GELU_tanh(W_up x2 + b_up) + b_down;
 * final LN; logits = LN_f(h) · wteᵀ (tied).
 * Llama: token embedding only; RMSNorm (gain only); RoPE on q and k rotating the interleaved
 * pairs (2i, 2i+1) of each head (the original Meta convention, not Hugging Face's half split)
 * by angle t·θ^(−2i/D); grouped-query attention (query head h reads kv head h / (H/Hkv));
 * SwiGLU MLP W_down·(silu(W_gate x2) ∘ W_up x2); no biases; an untied output head "lm_head".
 * Attention: causal, scale 1/√D, through tsc_attn_run_with on the default backend in exact mode
 * under the layer's policy (fp64 in FP64 mode). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "tsc_attention.h"
#include "tsc_formats.h"
#include "tsc_mem.h"
#include "tsc_model.h"

enum { TNAME = 48 };

/* Offsets (elements) of one layer's tensors in the flat arrays; NONE where the arch has none. */
#define NONE ((size_t)-1)
typedef struct {
    size_t ln1_w, ln1_b, w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, ln2_w, ln2_b, w_gate, w_up, b_up, w_down, b_down;
} layer_off_t;
typedef struct {
    size_t wte, wpe, lnf_w, lnf_b, lm_head;
} top_off_t;

/* Activations of one layer (element type real of the instance; N = B·T, Ckv = Hkv·D). */
typedef struct {
    void *res;                 /* [N, C] the block's input (residual stream) */
    void *x1, *mean1, *rstd1;  /* [N, C] norm 1 output = attention input; [N], [N] */
    void *q, *k, *v;           /* [B, H, T, D], [B, Hkv, T, D] x2: as the kernel received them */
    void *o, *lse, *dout;      /* [B, H, T, D], [B, H, T], [B, H, T, D] */
    void *att;                 /* [N, C] o in [B, T, H, D] order: input of w_o */
    void *res2;                /* [N, C] after the attention's residual add */
    void *x2, *mean2, *rstd2;  /* [N, C], [N], [N] norm 2 */
    void *h1, *h2, *h3;        /* [N, F] GPT-2: pre-GELU, its tanh, GELU; Llama: gate, up, silu(gate)·up */
} layer_act_t;

struct tsc_model {
    tsc_model_config_t cfg;
    tsc_prec_t prec;
    int B, T;
    size_t es, n_params;
    void *params, *grads;
    int n_tensors;
    tsc_model_tensor_t *tensors;
    char (*names)[TNAME];
    top_off_t top;
    layer_off_t *lo;             /* [L] */
    layer_act_t *la;             /* [L] */
    tsc_policy_t *pol, pol64;    /* [L] set policies; fp64 */
    tsc_attn_tile_stats_t *tiles;/* [L] */
    double *max_logit;           /* [L] */
    long long *tied_rows;        /* [L] */
    int have_fwd, have_bwd, n_valid;
    int32_t *tokens, *targets;   /* [N] of the last forward */
    void *res_out, *xf, *meanf, *rstdf; /* [N, C], [N, C], [N], [N] */
    void *logits, *dlogits;      /* [N, V] */
    void *rope_cos, *rope_sin;   /* [T, D/2] */
    void *dres, *dx, *datt;      /* [N, C] backward scratch (dx also forward scratch) */
    void *sq, *sk, *sv;          /* [N, C], [N, Ckv] x2: q, k, v (and their gradients) in [B, T, H, D] */
    void *dq, *dk, *dv;          /* [B, H, T, D], [B, Hkv, T, D] x2 */
    void *dh1, *dh2, *dh3;       /* [N, F] */
    uint32_t *work;              /* BF16 packing */
    void **bufs;
    int n_bufs, cap_bufs;
};

/* ------------------------------------------------------------------ layout */

typedef struct {
    tsc_model_tensor_t *t;
    char (*names)[TNAME];
    int n;
    size_t off;
} lay_t;

static size_t add(lay_t *L, const char *name, int layer, int rows, int cols) {
    if (L->t) {
        if (layer >= 0) snprintf(L->names[L->n], TNAME, "h.%d.%s", layer, name);
        else snprintf(L->names[L->n], TNAME, "%s", name);
        L->t[L->n] = (tsc_model_tensor_t){L->names[L->n], L->off, rows, cols, cols > 1};
    }
    size_t o = L->off;
    L->n++;
    L->off += (size_t)rows * cols;
    return o;
}

/* Walks the tensors in storage order; fills t, names, top and lo when not NULL. Returns the
 * tensor count; *n_params the element count. */
static int layout(const tsc_model_config_t *c, lay_t *L, top_off_t *top, layer_off_t *lo) {
    int C = c->d_model, F = c->d_ff, Ckv = c->n_kv_head * (c->d_model / c->n_head), gpt = c->arch == TSC_ARCH_GPT2;
    top_off_t tp = {NONE, NONE, NONE, NONE, NONE};
    tp.wte = add(L, "wte", -1, c->vocab, C);
    if (gpt) tp.wpe = add(L, "wpe", -1, c->max_T, C);
    for (int l = 0; l < c->n_layer; l++) {
        layer_off_t o;
        memset(&o, 0xff, sizeof o);
        o.ln1_w = add(L, "ln1.w", l, C, 1);
        if (gpt) o.ln1_b = add(L, "ln1.b", l, C, 1);
        o.w_q = add(L, "attn.w_q", l, C, C);
        if (gpt) o.b_q = add(L, "attn.b_q", l, C, 1);
        o.w_k = add(L, "attn.w_k", l, Ckv, C);
        if (gpt) o.b_k = add(L, "attn.b_k", l, Ckv, 1);
        o.w_v = add(L, "attn.w_v", l, Ckv, C);
        if (gpt) o.b_v = add(L, "attn.b_v", l, Ckv, 1);
        o.w_o = add(L, "attn.w_o", l, C, C);
        if (gpt) o.b_o = add(L, "attn.b_o", l, C, 1);
        o.ln2_w = add(L, "ln2.w", l, C, 1);
        if (gpt) o.ln2_b = add(L, "ln2.b", l, C, 1);
        if (!gpt) o.w_gate = add(L, "mlp.w_gate", l, F, C);
        o.w_up = add(L, "mlp.w_up", l, F, C);
        if (gpt) o.b_up = add(L, "mlp.b_up", l, F, 1);
        o.w_down = add(L, "mlp.w_down", l, C, F);
        if (gpt) o.b_down = add(L, "mlp.b_down", l, C, 1);
        if (lo) lo[l] = o;
    }
    tp.lnf_w = add(L, "ln_f.w", -1, C, 1);
    if (gpt) tp.lnf_b = add(L, "ln_f.b", -1, C, 1);
    if (!gpt) tp.lm_head = add(L, "lm_head", -1, c->vocab, C);
    if (top) *top = tp;
    return L->n;
}

size_t tsc_model_config_n_params(const tsc_model_config_t *cfg) {
    lay_t L = {0};
    layout(cfg, &L, NULL, NULL);
    return L.off;
}

/* The shapes this file's models are built for: the architectures' rules (GPT-2 has no GQA, RoPE
 * rotates pairs), the parameter count the layout implies, and sizes a tsc_model_create can hold. */
tsc_status_t tsc_model_config_check(const tsc_model_config_t *c) {
    struct { const char *key; long v; } pos[] = {{"layers", c->n_layer}, {"heads", c->n_head},
        {"kv_heads", c->n_kv_head}, {"dim", c->d_model}, {"ff", c->d_ff}, {"vocab", c->vocab}, {"ctx", c->max_T}};
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i].v <= 0 || pos[i].v > (1L << 24))
            return tsc_error_set(TSC_ERR_ARG, "model: %s=%ld is not a positive size", pos[i].key, pos[i].v);
    if (c->d_model % c->n_head)
        return tsc_error_set(TSC_ERR_ARG, "model: dim=%d is not divisible by heads=%d", c->d_model, c->n_head);
    if (c->n_head % c->n_kv_head)
        return tsc_error_set(TSC_ERR_ARG, "model: heads=%d is not divisible by kv_heads=%d", c->n_head,
                             c->n_kv_head);
    if (c->arch == TSC_ARCH_GPT2 && c->n_kv_head != c->n_head)
        return tsc_error_set(TSC_ERR_ARG, "model: kv_heads=%d differs from heads=%d (gpt2 has no GQA)",
                             c->n_kv_head, c->n_head);
    if (c->arch == TSC_ARCH_LLAMA && (c->d_model / c->n_head) % 2)
        return tsc_error_set(TSC_ERR_ARG, "model: dim/heads=%d is odd (RoPE rotates pairs)", c->d_model / c->n_head);
    if (!(c->norm_eps > 0) || !(c->norm_eps < 1))
        return tsc_error_set(TSC_ERR_ARG, "model: eps=%g is not in (0, 1)", c->norm_eps);
    if (c->arch == TSC_ARCH_LLAMA && !(c->rope_theta > 1))
        return tsc_error_set(TSC_ERR_ARG, "model: theta=%g is not > 1", c->rope_theta);
    if (tsc_model_config_n_params(c) > ((size_t)1 << 34))
        return tsc_error_set(TSC_ERR_ARG, "model: %zu parameters is more than this trainer holds",
                             tsc_model_config_n_params(c));
    return TSC_OK;
}

/* ------------------------------------------------------------------ allocation */

static void *buf(tsc_model_t *m, size_t n, size_t es) {
    if (m->n_bufs == m->cap_bufs) {
        int cap = m->cap_bufs ? 2 * m->cap_bufs : 64;
        void **nb = realloc(m->bufs, (size_t)cap * sizeof *nb);
        if (!nb) return NULL;
        m->bufs = nb;
        m->cap_bufs = cap;
    }
    void *p = calloc(n ? n : 1, es);
    if (p) m->bufs[m->n_bufs++] = p;
    return p;
}

/* Elements of the activations and scratch alloc_layers allocates (for tsc_mem_check). */
static size_t act_elems(const tsc_model_config_t *c, int B, int T) {
    size_t N = (size_t)B * T, C = c->d_model, F = c->d_ff, V = c->vocab, H = c->n_head;
    size_t Ckv = (size_t)c->n_kv_head * (C / H);
    size_t per_layer = 8 * N * C + 4 * N + 2 * N * Ckv + N * H + 3 * N * F;
    return c->n_layer * per_layer + 5 * N * C + 2 * N + 2 * N * V + 4 * N * Ckv + 3 * N * F;
}

static size_t gemm_work(const tsc_model_config_t *c, int N) {
    int C = c->d_model, Ckv = c->n_kv_head * (c->d_model / c->n_head);
    int shapes[][2] = {{C, C}, {C, Ckv}, {C, c->d_ff}, {c->d_ff, C}, {C, c->vocab}}; /* in, out */
    size_t w = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int IC = shapes[i][0], OC = shapes[i][1];
        size_t a = tsc_gemm_work(N, OC, IC), b = tsc_gemm_work(N, IC, OC), d = tsc_gemm_work(OC, IC, N);
        w = a > w ? a : w;
        w = b > w ? b : w;
        w = d > w ? d : w;
    }
    return w;
}

static tsc_status_t alloc_layers(tsc_model_t *m) {
    const tsc_model_config_t *c = &m->cfg;
    size_t N = (size_t)m->B * m->T, C = c->d_model, F = c->d_ff, es = m->es, H = c->n_head;
    size_t Ckv = (size_t)c->n_kv_head * (C / H);
    int ok = 1;
#define A(field, n) ok &= ((field) = buf(m, (n), es)) != NULL
    for (int l = 0; l < c->n_layer; l++) {
        layer_act_t *a = &m->la[l];
        A(a->res, N * C); A(a->x1, N * C); A(a->mean1, N); A(a->rstd1, N);
        A(a->q, N * C); A(a->k, N * Ckv); A(a->v, N * Ckv);
        A(a->o, N * C); A(a->lse, N * H); A(a->dout, N * C); A(a->att, N * C);
        A(a->res2, N * C); A(a->x2, N * C); A(a->mean2, N); A(a->rstd2, N);
        A(a->h1, N * F); A(a->h2, N * F); A(a->h3, N * F);
    }
    A(m->res_out, N * C); A(m->xf, N * C); A(m->meanf, N); A(m->rstdf, N);
    A(m->logits, N * c->vocab); A(m->dlogits, N * c->vocab);
    A(m->dres, N * C); A(m->dx, N * C); A(m->datt, N * C);
    A(m->sq, N * C); A(m->sk, N * Ckv); A(m->sv, N * Ckv);
    A(m->dq, N * C); A(m->dk, N * Ckv); A(m->dv, N * Ckv);
    A(m->dh1, N * F); A(m->dh2, N * F); A(m->dh3, N * F);
    A(m->rope_cos, (size_t)m->T * (C / H / 2 + 1)); A(m->rope_sin, (size_t)m->T * (C / H / 2 + 1));
#undef A
    ok &= (m->tokens = buf(m, N, 4)) != NULL;
    ok &= (m->targets = buf(m, N, 4)) != NULL;
    if (m->prec != TSC_PREC_FP64) ok &= (m->work = buf(m, gemm_work(c, (int)N), 4)) != NULL;
    return ok ? TSC_OK : tsc_error_set(TSC_ERR_NOMEM, "model: out of memory for the activations");
}

static void rope_tables(tsc_model_t *m) {
    int D = m->cfg.d_model / m->cfg.n_head, h = D / 2;
    for (int t = 0; t < m->T; t++)
        for (int i = 0; i < h; i++) {
            double ang = t * pow(m->cfg.rope_theta, -2.0 * i / D);
            if (m->es == 8) {
                ((double *)m->rope_cos)[t * h + i] = cos(ang);
                ((double *)m->rope_sin)[t * h + i] = sin(ang);
            } else {
                ((float *)m->rope_cos)[t * h + i] = (float)cos(ang);
                ((float *)m->rope_sin)[t * h + i] = (float)sin(ang);
            }
        }
}

tsc_status_t tsc_model_create(tsc_model_t **out, const tsc_model_config_t *cfg, tsc_prec_t prec, int B, int T) {
    if (!out || !cfg) return tsc_error_set(TSC_ERR_ARG, "model: NULL argument");
    *out = NULL;
    tsc_status_t st = tsc_model_config_check(cfg);
    if (st != TSC_OK) return st;
    if ((unsigned)prec > TSC_PREC_FP64) return tsc_error_set(TSC_ERR_ARG, "model: unknown precision %d", (int)prec);
    if (B <= 0 || T <= 0 || T > cfg->max_T)
        return tsc_error_set(TSC_ERR_ARG, "model: batch %d x %d tokens (need B >= 1, 1 <= T <= ctx %d)", B, T,
                             cfg->max_T);
    size_t es = prec == TSC_PREC_FP64 ? 8 : 4, np = tsc_model_config_n_params(cfg);
    st = tsc_mem_check((act_elems(cfg, B, T) + 2 * np) * es, "model parameters and activations");
    if (st != TSC_OK) return st;
    tsc_model_t *m = calloc(1, sizeof *m);
    if (!m) return tsc_error_set(TSC_ERR_NOMEM, "model: out of memory");
    m->cfg = *cfg;
    m->prec = prec;
    m->B = B;
    m->T = T;
    m->es = es;
    m->n_params = np;
    int L = cfg->n_layer;
    lay_t lay = {0};
    m->n_tensors = layout(cfg, &lay, NULL, NULL);
    m->tensors = calloc((size_t)m->n_tensors, sizeof *m->tensors);
    m->names = calloc((size_t)m->n_tensors, sizeof *m->names);
    m->lo = calloc((size_t)L, sizeof *m->lo);
    m->la = calloc((size_t)L, sizeof *m->la);
    m->pol = calloc((size_t)L, sizeof *m->pol);
    m->tiles = calloc((size_t)L, sizeof *m->tiles);
    m->max_logit = calloc((size_t)L, sizeof *m->max_logit);
    m->tied_rows = calloc((size_t)L, sizeof *m->tied_rows);
    m->params = calloc(np, es);
    m->grads = calloc(np, es);
    if (!m->tensors || !m->names || !m->lo || !m->la || !m->pol || !m->tiles || !m->max_logit || !m->tied_rows ||
        !m->params || !m->grads || alloc_layers(m) != TSC_OK) {
        tsc_model_free(m);
        return tsc_error_set(TSC_ERR_NOMEM, "model: out of memory (%zu parameters, batch %d x %d)", np, B, T);
    }
    lay = (lay_t){m->tensors, m->names, 0, 0};
    layout(cfg, &lay, &m->top, m->lo);
    tsc_policy_t p32;
    TSC_INVARIANT(tsc_policy_parse("fp64", &m->pol64) == TSC_OK && tsc_policy_parse("fp32", &p32) == TSC_OK);
    for (int l = 0; l < L; l++) m->pol[l] = prec == TSC_PREC_FP64 ? m->pol64 : p32;
    if (cfg->arch == TSC_ARCH_LLAMA) rope_tables(m);
    *out = m;
    return TSC_OK;
}

void tsc_model_free(tsc_model_t *m) {
    if (!m) return;
    for (int i = 0; i < m->n_bufs; i++) free(m->bufs[i]);
    for (int l = 0; m->tiles && l < m->cfg.n_layer; l++) tsc_attn_tile_stats_free(&m->tiles[l]);
    free(m->bufs);
    free(m->tensors);
    free(m->names);
    free(m->lo);
    free(m->la);
    free(m->pol);
    free(m->tiles);
    free(m->max_logit);
    free(m->tied_rows);
    free(m->params);
    free(m->grads);
    free(m);
}

const tsc_model_config_t *tsc_model_config(const tsc_model_t *m) { return &m->cfg; }
tsc_prec_t tsc_model_prec(const tsc_model_t *m) { return m->prec; }
size_t tsc_model_n_params(const tsc_model_t *m) { return m->n_params; }
void *tsc_model_params(tsc_model_t *m) { return m->params; }
void *tsc_model_grads(tsc_model_t *m) { return m->grads; }
int tsc_model_n_tensors(const tsc_model_t *m) { return m->n_tensors; }
const void *tsc_model_logits(const tsc_model_t *m) { return m->logits; }

const tsc_model_tensor_t *tsc_model_tensor(const tsc_model_t *m, int i) {
    return i >= 0 && i < m->n_tensors ? &m->tensors[i] : NULL;
}

const tsc_model_tensor_t *tsc_model_tensor_find(const tsc_model_t *m, const char *name) {
    for (int i = 0; name && i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

/* N(0, 1) by Box-Muller on tsc_rng_t's 53-bit uniforms. */
static double normal(tsc_rng_t *r) {
    double u1 = ((tsc_rng_next(r) >> 11) + 1) * 0x1p-53, u2 = (tsc_rng_next(r) >> 11) * 0x1p-53;
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

void tsc_model_init(tsc_model_t *m, uint64_t seed) {
    tsc_rng_t r;
    tsc_rng_seed(&r, seed);
    double resid = 0.02 / sqrt(2.0 * m->cfg.n_layer);
    for (int i = 0; i < m->n_tensors; i++) {
        const tsc_model_tensor_t *t = &m->tensors[i];
        const char *nm = t->name;
        size_t n = (size_t)t->rows * t->cols, len = strlen(nm);
        int gain = t->cols == 1 && len > 2 && strcmp(nm + len - 2, ".w") == 0;
        int proj = strstr(nm, "attn.w_o") || strstr(nm, "mlp.w_down");
        for (size_t j = 0; j < n; j++) {
            double v = t->cols > 1 ? normal(&r) * (proj ? resid : 0.02) : gain ? 1.0 : 0.0;
            if (m->es == 8) ((double *)m->params)[t->offset + j] = v;
            else ((float *)m->params)[t->offset + j] = (float)v;
        }
    }
    m->have_fwd = m->have_bwd = 0;
}

tsc_status_t tsc_model_set_attn_policy(tsc_model_t *m, int layer, const tsc_policy_t *pol) {
    if (!m || !pol) return tsc_error_set(TSC_ERR_ARG, "model: NULL argument");
    if (layer >= m->cfg.n_layer)
        return tsc_error_set(TSC_ERR_ARG, "model: layer %d does not exist (%d layers)", layer, m->cfg.n_layer);
    for (int l = 0; l < m->cfg.n_layer; l++)
        if (layer < 0 || l == layer) m->pol[l] = *pol;
    return TSC_OK;
}

const tsc_policy_t *tsc_model_attn_policy(const tsc_model_t *m, int layer) {
    return layer >= 0 && layer < m->cfg.n_layer ? &m->pol[layer] : NULL;
}

tsc_status_t tsc_model_attn_view(const tsc_model_t *m, int layer, tsc_model_attn_view_t *v) {
    if (!m || !v) return tsc_error_set(TSC_ERR_ARG, "model: NULL argument");
    if (layer < 0 || layer >= m->cfg.n_layer)
        return tsc_error_set(TSC_ERR_ARG, "model: layer %d does not exist (%d layers)", layer, m->cfg.n_layer);
    if (!m->have_fwd) return tsc_error_set(TSC_ERR_ARG, "model: no forward has run yet");
    const layer_act_t *a = &m->la[layer];
    *v = (tsc_model_attn_view_t){.B = m->B, .H = m->cfg.n_head, .Hkv = m->cfg.n_kv_head, .T = m->T,
        .D = m->cfg.d_model / m->cfg.n_head, .C = m->cfg.d_model, .x = a->x1, .q = a->q, .k = a->k, .v = a->v,
        .o = a->o, .lse = a->lse, .dout = m->have_bwd ? a->dout : NULL, .max_logit = m->max_logit[layer],
        .tied_rows = m->tied_rows[layer]};
    return TSC_OK;
}

/* The layer's attention policy as it runs, and its tile statistics sized for it. */
static const tsc_policy_t *run_policy(const tsc_model_t *m, int l) {
    return m->prec == TSC_PREC_FP64 ? &m->pol64 : &m->pol[l];
}

static tsc_status_t tiles_for(tsc_model_t *m, int l) {
    tsc_attn_tile_stats_t *ts = &m->tiles[l];
    int bk = run_policy(m, l)->block_k;
    if (ts->row_max && ts->block_k == bk) return TSC_OK;
    tsc_attn_tile_stats_free(ts);
    return tsc_attn_tile_stats_init(ts, m->B, m->cfg.n_head, m->T, bk);
}

/* max_logit and tied_rows of layer l from its tile statistics (see tsc_model_attn_view_t). */
static void tile_summary(tsc_model_t *m, int l) {
    const tsc_attn_tile_stats_t *ts = &m->tiles[l];
    size_t rows = (size_t)ts->B * ts->H * ts->T;
    double mx = -INFINITY;
    long long tied = 0;
    for (size_t r = 0; r < rows; r++) {
        const double *rm = ts->row_max + r * ts->n_kt;
        const int32_t *tc = ts->tie_count + r * ts->n_kt;
        double row = -INFINITY;
        for (int j = 0; j < ts->n_kt; j++)
            if (!isnan(rm[j]) && rm[j] > row) row = rm[j];
        long long n = 0;
        for (int j = 0; j < ts->n_kt; j++)
            if (!isnan(rm[j]) && rm[j] == row && tc[j] > 0) n += tc[j];
        tied += n > 1;
        if (row > mx) mx = row;
    }
    m->max_logit[l] = mx;
    m->tied_rows[l] = tied;
}

static tsc_status_t check_tokens(const tsc_model_t *m, const int32_t *tok, const char *what) {
    size_t N = (size_t)m->B * m->T;
    for (size_t i = 0; i < N; i++)
        if (tok[i] < 0 || tok[i] >= m->cfg.vocab)
            return tsc_error_set(TSC_ERR_ARG, "model: %s[%zu] = %d is outside the vocabulary [0, %d)", what, i,
                                 (int)tok[i], m->cfg.vocab);
    return TSC_OK;
}

#define TSC_MODEL_TMPL 1
#define real float
#define S _f
#include "model_tmpl.c"
#undef real
#undef S
#define real double
#define S _d
#include "model_tmpl.c"
#undef real
#undef S

tsc_status_t tsc_model_forward(tsc_model_t *m, const int32_t *tokens, const int32_t *targets, double *loss) {
    if (!m || !tokens) return tsc_error_set(TSC_ERR_ARG, "model: NULL argument");
    tsc_status_t st = check_tokens(m, tokens, "tokens");
    if (st != TSC_OK) return st;
    for (size_t i = 0; targets && i < (size_t)m->B * m->T; i++)
        if (targets[i] >= m->cfg.vocab)
            return tsc_error_set(TSC_ERR_ARG, "model: targets[%zu] = %d is outside the vocabulary [0, %d)", i,
                                 (int)targets[i], m->cfg.vocab);
    return m->es == 8 ? forward_d(m, tokens, targets, loss) : forward_f(m, tokens, targets, loss);
}

tsc_status_t tsc_model_backward(tsc_model_t *m) {
    if (!m) return tsc_error_set(TSC_ERR_ARG, "model: NULL argument");
    if (!m->have_fwd || m->n_valid < 0)
        return tsc_error_set(TSC_ERR_ARG, "model: backward needs a forward with targets first");
    m->have_bwd = 0;
    return m->es == 8 ? backward_d(m) : backward_f(m);
}
