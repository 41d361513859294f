/* model_tmpl.c: forward and backward of tsc_model.h's models for one element type `real`
 * (float: FP32 and BF16 modes; double: FP64), name suffix S; model.c includes it twice.
 * N = B·T rows, C = d_model, F = d_ff, V = vocab, H heads of D, Hkv kv heads, Ckv = Hkv·D. */
#ifdef TSC_MODEL_TMPL
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define F(name) CAT(name, S)
#define P(off) ((real *)m->params + (off))
#define G(off) ((real *)m->grads + (off))
#define R(ptr) ((real *)(ptr))
#define IS_F64 (sizeof(real) == 8)

static void F(gemm)(const tsc_model_t *m, int M, int N, int K, tsc_mref_t A, tsc_mref_t B, const real *bias,
                    real *C, int acc) {
    if (IS_F64) {
        tsc_gemm_f64(M, N, K, A, B, (double *)C, (size_t)N, acc);
    } else if (m->prec == TSC_PREC_BF16) {
        tsc_gemm_bf16(M, N, K, A, B, (const float *)bias, (float *)C, (size_t)N, acc, m->work);
        return;
    } else {
        tsc_gemm_f32(M, N, K, A, B, (float *)C, (size_t)N, acc, (float *)m->work);
    }
    for (int i = 0; bias && i < M; i++)
        for (int j = 0; j < N; j++) C[(size_t)i * N + j] += bias[j];
}

/* out [N, OC] = in [N, IC] · Wᵀ (W [OC, IC]) + b [OC] (b may be NULL). */
static void F(linear_fwd)(const tsc_model_t *m, real *out, const real *in, size_t w, size_t b, int N, int IC,
                          int OC) {
    F(gemm)(m, N, OC, IC, (tsc_mref_t){in, (size_t)IC, 1}, (tsc_mref_t){P(w), (size_t)IC, 1},
            b == NONE ? NULL : P(b), out, 0);
}

/* din [N, IC] (+)= dout [N, OC] · W;  dW [OC, IC] (+)= doutᵀ · in;  db [OC] = Σ_rows dout. */
static void F(linear_bwd)(const tsc_model_t *m, real *din, int din_acc, size_t w, int dw_acc, size_t b,
                          const real *dout, const real *in, int N, int IC, int OC) {
    F(gemm)(m, N, IC, OC, (tsc_mref_t){dout, (size_t)OC, 1}, (tsc_mref_t){P(w), 1, (size_t)IC}, NULL, din,
            din_acc);
    F(gemm)(m, OC, IC, N, (tsc_mref_t){dout, 1, (size_t)OC}, (tsc_mref_t){in, 1, (size_t)IC}, NULL, G(w), dw_acc);
    if (b == NONE) return;
    real *db = G(b);
#pragma omp parallel for schedule(static)
    for (int j0 = 0; j0 < OC; j0 += 16) { /* threads split the columns; each sums its rows in order */
        int j1 = j0 + 16 < OC ? j0 + 16 : OC;
        for (int j = j0; j < j1; j++) db[j] = 0;
        for (int i = 0; i < N; i++)
            for (int j = j0; j < j1; j++) db[j] += dout[(size_t)i * OC + j];
    }
}

/* [B, T, H, D] (rows of a [N, H·D] matrix) <-> [B, H, T, D]. */
static void F(to_bhtd)(real *dst, const real *src, int B, int T, int H, int D) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++)
                memcpy(dst + (((size_t)b * H + h) * T + t) * D, src + (((size_t)b * T + t) * H + h) * D,
                       (size_t)D * sizeof(real));
}

static void F(to_bthd)(real *dst, const real *src, int B, int T, int H, int D) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++)
                memcpy(dst + (((size_t)b * T + t) * H + h) * D, src + (((size_t)b * H + h) * T + t) * D,
                       (size_t)D * sizeof(real));
}

static void F(round_bf16)(real *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = (real)tsc_bf16_to_f32(tsc_bf16_from_f32((float)x[i]));
}

static tsc_status_t F(attention)(tsc_model_t *m, int l, int backward) {
    const tsc_model_config_t *c = &m->cfg;
    layer_act_t *a = &m->la[l];
    int D = c->d_model / c->n_head;
    tsc_attn_dims_t dims = {.B = m->B, .H = c->n_head, .Hkv = c->n_kv_head, .T = m->T, .D = D, .causal = 1,
                            .scale = 1.0 / sqrt((double)D)};
    tsc_attn_io_t io = {.dtype = IS_F64 ? TSC_ATTN_F64 : TSC_ATTN_F32, .q = a->q, .k = a->k, .v = a->v};
    tsc_attn_opts_t opt = {.mode = TSC_ATTN_EXACT};
    if (backward) {
        io.dout = a->dout;
        io.dq = m->dq;
        io.dk = m->dk;
        io.dv = m->dv;
    } else {
        io.o = a->o;
        io.lse = a->lse;
        tsc_status_t st = tiles_for(m, l);
        if (st != TSC_OK) return st;
        opt.tiles = &m->tiles[l];
    }
    tsc_status_t st = tsc_attn_run_with(NULL, run_policy(m, l), &dims, &io, &opt);
    if (st != TSC_OK) return tsc_error_wrap(st, "model: layer %d attention", l);
    if (!backward) tile_summary(m, l);
    return TSC_OK;
}

/* Norm `which` (1, 2, or 0: final) forward of the arch: y from x. */
static void F(norm_fwd)(tsc_model_t *m, real *y, real *mean, real *rstd, const real *x, size_t w, size_t b) {
    int N = m->B * m->T, C = m->cfg.d_model;
    if (m->cfg.arch == TSC_ARCH_GPT2) F(tsc_layernorm_fwd)(y, mean, rstd, x, P(w), P(b), N, C, m->cfg.norm_eps);
    else F(tsc_rmsnorm_fwd)(y, rstd, x, P(w), N, C, m->cfg.norm_eps);
}

static void F(norm_bwd)(tsc_model_t *m, real *dx, const real *dy, const real *x, const real *mean, const real *rstd,
                        size_t w, size_t b) {
    int N = m->B * m->T, C = m->cfg.d_model;
    if (m->cfg.arch == TSC_ARCH_GPT2) F(tsc_layernorm_bwd)(dx, G(w), G(b), dy, x, P(w), mean, rstd, N, C);
    else F(tsc_rmsnorm_bwd)(dx, G(w), dy, x, P(w), rstd, N, C);
}

/* One block's forward: a->res -> out. */
static tsc_status_t F(block_fwd)(tsc_model_t *m, int l, real *out) {
    const tsc_model_config_t *c = &m->cfg;
    const layer_off_t *o = &m->lo[l];
    layer_act_t *a = &m->la[l];
    int N = m->B * m->T, C = c->d_model, Fd = c->d_ff, H = c->n_head, Hk = c->n_kv_head, D = C / H, Ck = Hk * D;
    size_t NC = (size_t)N * C, NF = (size_t)N * Fd;
    F(norm_fwd)(m, R(a->x1), R(a->mean1), R(a->rstd1), R(a->res), o->ln1_w, o->ln1_b);
    F(linear_fwd)(m, R(m->sq), R(a->x1), o->w_q, o->b_q, N, C, C);  /* [N, C] */
    F(linear_fwd)(m, R(m->sk), R(a->x1), o->w_k, o->b_k, N, C, Ck); /* [N, Ckv] */
    F(linear_fwd)(m, R(m->sv), R(a->x1), o->w_v, o->b_v, N, C, Ck); /* [N, Ckv] */
    F(to_bhtd)(R(a->q), R(m->sq), m->B, m->T, H, D);
    F(to_bhtd)(R(a->k), R(m->sk), m->B, m->T, Hk, D);
    F(to_bhtd)(R(a->v), R(m->sv), m->B, m->T, Hk, D);
    if (c->arch == TSC_ARCH_LLAMA) {
        F(tsc_rope_fwd)(R(a->q), R(m->rope_cos), R(m->rope_sin), m->B, H, m->T, D, 0);
        F(tsc_rope_fwd)(R(a->k), R(m->rope_cos), R(m->rope_sin), m->B, Hk, m->T, D, 0);
        if (m->prec == TSC_PREC_BF16) { /* autocast: RoPE of BF16 tensors gives BF16 */
            F(round_bf16)(R(a->q), NC);
            F(round_bf16)(R(a->k), (size_t)N * Ck);
        }
    }
    tsc_status_t st = F(attention)(m, l, 0);
    if (st != TSC_OK) return st;
    F(to_bthd)(R(a->att), R(a->o), m->B, m->T, H, D);
    F(linear_fwd)(m, R(m->dx), R(a->att), o->w_o, o->b_o, N, C, C);
    for (size_t i = 0; i < NC; i++) R(a->res2)[i] = R(a->res)[i] + R(m->dx)[i];
    F(norm_fwd)(m, R(a->x2), R(a->mean2), R(a->rstd2), R(a->res2), o->ln2_w, o->ln2_b);
    if (c->arch == TSC_ARCH_GPT2) {
        F(linear_fwd)(m, R(a->h1), R(a->x2), o->w_up, o->b_up, N, C, Fd); /* [N, F] */
        F(tsc_gelu_fwd)(R(a->h3), R(a->h2), R(a->h1), NF); /* h2: tanh values */
    } else {
        F(linear_fwd)(m, R(a->h1), R(a->x2), o->w_gate, NONE, N, C, Fd);
        F(linear_fwd)(m, R(a->h2), R(a->x2), o->w_up, NONE, N, C, Fd);
        F(tsc_swiglu_fwd)(R(a->h3), R(a->h1), R(a->h2), NF);
    }
    F(linear_fwd)(m, R(m->dx), R(a->h3), o->w_down, o->b_down, N, Fd, C);
    for (size_t i = 0; i < NC; i++) out[i] = R(a->res2)[i] + R(m->dx)[i];
    return TSC_OK;
}

static tsc_status_t F(forward)(tsc_model_t *m, const int32_t *tokens, const int32_t *targets, double *loss) {
    const tsc_model_config_t *c = &m->cfg;
    int N = m->B * m->T, C = c->d_model, L = c->n_layer;
    m->have_fwd = m->have_bwd = 0;
    memcpy(m->tokens, tokens, (size_t)N * 4);
    real *h0 = R(L ? m->la[0].res : m->res_out); /* [N, C] embeddings */
    for (int i = 0; i < N; i++) {
        const real *te = P(m->top.wte) + (size_t)tokens[i] * C;
        const real *pe = m->top.wpe == NONE ? NULL : P(m->top.wpe) + (size_t)(i % m->T) * C;
        for (int k = 0; k < C; k++) h0[(size_t)i * C + k] = te[k] + (pe ? pe[k] : 0);
    }
    for (int l = 0; l < L; l++) {
        tsc_status_t st = F(block_fwd)(m, l, R(l + 1 < L ? m->la[l + 1].res : m->res_out));
        if (st != TSC_OK) return st;
    }
    F(norm_fwd)(m, R(m->xf), R(m->meanf), R(m->rstdf), R(m->res_out), m->top.lnf_w, m->top.lnf_b);
    size_t head = m->top.lm_head == NONE ? m->top.wte : m->top.lm_head;
    F(linear_fwd)(m, R(m->logits), R(m->xf), head, NONE, N, C, c->vocab); /* [N, V] */
    m->have_fwd = 1;
    m->n_valid = -1;
    if (targets) {
        memcpy(m->targets, targets, (size_t)N * 4);
        double lv = F(tsc_crossent_fwd)(R(m->logits), targets, N, c->vocab, &m->n_valid);
        if (loss) *loss = lv;
    }
    return TSC_OK;
}

/* One block's backward: dres holds d loss / d (block output) on entry, d loss / d a->res on exit. */
static tsc_status_t F(block_bwd)(tsc_model_t *m, int l) {
    const tsc_model_config_t *c = &m->cfg;
    const layer_off_t *o = &m->lo[l];
    layer_act_t *a = &m->la[l];
    int N = m->B * m->T, C = c->d_model, Fd = c->d_ff, H = c->n_head, Hk = c->n_kv_head, D = C / H, Ck = Hk * D;
    size_t NF = (size_t)N * Fd;
    real *dres = R(m->dres), *dx = R(m->dx);
    memset(dx, 0, (size_t)N * C * sizeof(real));
    F(linear_bwd)(m, R(m->dh3), 0, o->w_down, 0, o->b_down, dres, R(a->h3), N, Fd, C);
    if (c->arch == TSC_ARCH_GPT2) {
        F(tsc_gelu_bwd)(R(m->dh1), R(m->dh3), R(a->h1), R(a->h2), NF);
        F(linear_bwd)(m, dx, 0, o->w_up, 0, o->b_up, R(m->dh1), R(a->x2), N, C, Fd);
    } else {
        F(tsc_swiglu_bwd)(R(m->dh1), R(m->dh2), R(m->dh3), R(a->h1), R(a->h2), NF);
        F(linear_bwd)(m, dx, 0, o->w_gate, 0, NONE, R(m->dh1), R(a->x2), N, C, Fd);
        F(linear_bwd)(m, dx, 1, o->w_up, 0, NONE, R(m->dh2), R(a->x2), N, C, Fd);
    }
    F(norm_bwd)(m, dres, dx, R(a->res2), R(a->mean2), R(a->rstd2), o->ln2_w, o->ln2_b);
    F(linear_bwd)(m, R(m->datt), 0, o->w_o, 0, o->b_o, dres, R(a->att), N, C, C);
    F(to_bhtd)(R(a->dout), R(m->datt), m->B, m->T, H, D);
    tsc_status_t st = F(attention)(m, l, 1);
    if (st != TSC_OK) return st;
    if (c->arch == TSC_ARCH_LLAMA) {
        F(tsc_rope_fwd)(R(m->dq), R(m->rope_cos), R(m->rope_sin), m->B, H, m->T, D, 1);
        F(tsc_rope_fwd)(R(m->dk), R(m->rope_cos), R(m->rope_sin), m->B, Hk, m->T, D, 1);
    }
    F(to_bthd)(R(m->sq), R(m->dq), m->B, m->T, H, D);
    F(to_bthd)(R(m->sk), R(m->dk), m->B, m->T, Hk, D);
    F(to_bthd)(R(m->sv), R(m->dv), m->B, m->T, Hk, D);
    F(linear_bwd)(m, dx, 0, o->w_q, 0, o->b_q, R(m->sq), R(a->x1), N, C, C);
    F(linear_bwd)(m, dx, 1, o->w_k, 0, o->b_k, R(m->sk), R(a->x1), N, C, Ck);
    F(linear_bwd)(m, dx, 1, o->w_v, 0, o->b_v, R(m->sv), R(a->x1), N, C, Ck);
    F(norm_bwd)(m, dres, dx, R(a->res), R(a->mean1), R(a->rstd1), o->ln1_w, o->ln1_b);
    return TSC_OK;
}

static tsc_status_t F(backward)(tsc_model_t *m) {
    const tsc_model_config_t *c = &m->cfg;
    int N = m->B * m->T, C = c->d_model, V = c->vocab;
    F(tsc_crossent_bwd)(R(m->dlogits), R(m->logits), m->targets, N, V, m->n_valid ? m->n_valid : 1);
    size_t head = m->top.lm_head == NONE ? m->top.wte : m->top.lm_head;
    real *dres = R(m->dres), *dx = R(m->dx);
    F(linear_bwd)(m, dx, 0, head, 0, NONE, R(m->dlogits), R(m->xf), N, C, V);
    memset(dres, 0, (size_t)N * C * sizeof(real));
    F(norm_bwd)(m, dres, dx, R(m->res_out), R(m->meanf), R(m->rstdf), m->top.lnf_w, m->top.lnf_b);
    for (int l = c->n_layer - 1; l >= 0; l--) {
        tsc_status_t st = F(block_bwd)(m, l);
        if (st != TSC_OK) return st;
    }
    real *dwte = G(m->top.wte);
    if (m->top.lm_head != NONE) memset(dwte, 0, (size_t)V * C * sizeof(real));
    if (m->top.wpe != NONE) memset(G(m->top.wpe), 0, (size_t)c->max_T * C * sizeof(real));
    for (int i = 0; i < N; i++) /* sequential: rows with the same token add in row order */
        for (int k = 0; k < C; k++) {
            real d = dres[(size_t)i * C + k];
            dwte[(size_t)m->tokens[i] * C + k] += d;
            if (m->top.wpe != NONE) G(m->top.wpe)[(size_t)(i % m->T) * C + k] += d;
        }
    m->have_bwd = 1;
    return TSC_OK;
}

#undef F
#undef CAT
#undef CAT_
#undef P
#undef G
#undef R
#undef IS_F64
#else
typedef int tsc_model_tmpl_unused_t; /* built on its own: an empty but valid unit */
#endif
