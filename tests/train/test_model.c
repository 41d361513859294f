/* test_model.c: configurations, the loss at initialisation, FP32 against FP64, determinism
 * (twice, and 1 vs 2 threads), per-layer attention policies and the attention view. */
#include "tsc_test.h"

#include <dlfcn.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tsc_attention.h"
#include "tsc_model.h"

static void check_configs(void) {
    tsc_model_config_t c;
    CHECK_EQ_INT(tsc_model_config_count(), 5);
    CHECK(tsc_model_config_name(5) == NULL);
    CHECK(tsc_model_config_get("gpt2-mini", &c) == TSC_OK);
    CHECK(c.n_layer == 6 && c.n_head == 6 && c.n_kv_head == 6 && c.d_model == 192 && c.d_ff == 768 &&
          c.vocab == 256 && c.max_T == 256);
    /* independent count: 2 embeddings (V + T) x C, per layer 4 C^2 + 2 C F + 4 C + F + C + 4 C, final 2 C */
    size_t C = 192, F = 768, expect = (256 + 256) * C + 6 * (4 * C * C + 2 * C * F + 4 * C + F + C + 4 * C) + 2 * C;
    CHECK_EQ_INT(tsc_model_config_n_params(&c), expect);
    CHECK(tsc_model_config_get("llama-mini", &c) == TSC_OK);
    CHECK(c.n_kv_head == 2 && c.d_ff == 512 && c.rope_theta == 10000 && c.arch == TSC_ARCH_LLAMA);
    size_t Ckv = 2 * 32, Fl = 512;
    expect = 2 * 256 * C + 6 * (2 * C * C + 2 * C * Ckv + 3 * C * Fl + 2 * C) + C;
    CHECK_EQ_INT(tsc_model_config_n_params(&c), expect);
    CHECK(tsc_model_config_get("gpt2-small", &c) == TSC_OK && c.n_layer == 12 && c.max_T == 1024);
    CHECK(tsc_model_config_get("nope", &c) == TSC_ERR_ARG);
    CHECK(strstr(tsc_error_last(), "llama-tiny") != NULL);
    CHECK(tsc_model_config_parse("gpt2-mini,layers=2,ctx=64", &c) == TSC_OK);
    CHECK(c.n_layer == 2 && c.max_T == 64 && c.d_model == 192 && strcmp(c.name, "custom") == 0);
    CHECK(tsc_model_config_parse("arch=llama,layers=4,heads=8,kv_heads=2,dim=256,ff=688,vocab=256,ctx=256", &c) == TSC_OK);
    CHECK(c.arch == TSC_ARCH_LLAMA && c.n_head == 8 && c.n_kv_head == 2 && c.d_ff == 688 && c.rope_theta == 10000);
    CHECK(tsc_model_config_parse("gpt2-tiny,dim=33", &c) == TSC_ERR_ARG);
    CHECK(strstr(tsc_error_last(), "dim") != NULL);
    CHECK(tsc_model_config_parse("llama-tiny,kv_heads=3", &c) == TSC_ERR_ARG);
    CHECK(strstr(tsc_error_last(), "kv_heads") != NULL);
    CHECK(tsc_model_config_parse("gpt2-tiny,colour=3", &c) == TSC_ERR_ARG);
    CHECK(strstr(tsc_error_last(), "colour") != NULL);
    CHECK(tsc_model_config_parse("gpt2-tiny,layers=x", &c) == TSC_ERR_ARG);
    CHECK(tsc_model_config_parse("gpt2-tiny,layers=0", &c) == TSC_ERR_ARG);
    char buf[160];
    CHECK(tsc_model_config_get("gpt2-mini", &c) == TSC_OK);
    tsc_model_config_str(&c, buf, sizeof buf);
    CHECK_STREQ(buf, "gpt2 6 layers, 6 heads (6 kv), dim 192, ff 768, vocab 256, ctx 256, 2.8M params");
    tsc_model_t *m = NULL;
    CHECK(tsc_model_create(&m, &c, TSC_PREC_FP32, 1, 300) == TSC_ERR_ARG && m == NULL);
}

static tsc_model_t *make(const char *name, tsc_prec_t prec, int B, int T) {
    tsc_model_config_t c;
    CHECK(tsc_model_config_parse(name, &c) == TSC_OK);
    tsc_model_t *m = NULL;
    CHECK(tsc_model_create(&m, &c, prec, B, T) == TSC_OK);
    if (m) tsc_model_init(m, 1337);
    return m;
}

static void batch(int32_t *tok, int32_t *tgt, int n, uint64_t seed) {
    for (int i = 0; i < n; i++) tok[i] = (int32_t)(tsc_test_lcg(&seed) % 256), tgt[i] = (int32_t)(tsc_test_lcg(&seed) % 256);
}

static void check_init_loss_and_fp64(const char *name) {
    int B = 2, T = 32, N = B * T;
    int32_t tok[64], tgt[64];
    batch(tok, tgt, N, 5);
    tsc_model_t *m32 = make(name, TSC_PREC_FP32, B, T), *m64 = make(name, TSC_PREC_FP64, B, T);
    if (!m32 || !m64) return;
    size_t n = tsc_model_n_params(m32);
    const float *p32 = tsc_model_params(m32);
    double *p64 = tsc_model_params(m64);
    for (size_t i = 0; i < n; i++) p64[i] = p32[i]; /* the same (FP32-representable) weights */
    double l32 = 0, l64 = 0;
    CHECK(tsc_model_forward(m32, tok, tgt, &l32) == TSC_OK && tsc_model_backward(m32) == TSC_OK);
    CHECK(tsc_model_forward(m64, tok, tgt, &l64) == TSC_OK && tsc_model_backward(m64) == TSC_OK);
    CHECKF(fabs(l32 - log(256.0)) < 0.05, "%s loss at init %.5f vs ln 256 = 5.5452", name, l32);
    const float *g32 = tsc_model_grads(m32);
    const double *g64 = tsc_model_grads(m64);
    double num = 0, den = 0, worst = 0;
    for (size_t i = 0; i < n; i++) {
        num += (g32[i] - g64[i]) * (g32[i] - g64[i]);
        den += g64[i] * g64[i];
    }
    /* per tensor, relative to the tensor's norm; tensors whose gradient is (analytically) zero,
     * as the key bias's (softmax ignores a constant added to every score of a row), are skipped */
    for (int t = 0; t < tsc_model_n_tensors(m32); t++) {
        const tsc_model_tensor_t *te = tsc_model_tensor(m32, t);
        double a = 0, b = 0;
        for (size_t i = te->offset; i < te->offset + (size_t)te->rows * te->cols; i++)
            a += (g32[i] - g64[i]) * (g32[i] - g64[i]), b += g64[i] * g64[i];
        if (b > 1e-12 * den && sqrt(a / b) > worst) worst = sqrt(a / b);
    }
    printf("%s: loss fp32 %.7f fp64 %.7f (|diff| %.2e); grads rel. L2 diff %.2e overall, worst tensor %.2e\n", name,
           l32, l64, fabs(l32 - l64), sqrt(num / den), worst);
    CHECK(fabs(l32 - l64) < 1e-5);
    CHECK(sqrt(num / den) < 1e-4); /* stated bound: FP32 agrees with FP64 to 1e-4 in relative L2 */
    CHECK(worst < 1e-3);           /* and every tensor to 1e-3 */
    tsc_model_free(m32);
    tsc_model_free(m64);
}

static void set_threads(int n) {
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    /* OpenBLAS's own thread count, when the BLAS behind libblas is OpenBLAS */
    void (*set)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
    if (set) set(n);
}

/* loss and gradient bits of one forward + backward */
static double step(tsc_model_t *m, void *g_out, size_t bytes, const int32_t *tok, const int32_t *tgt) {
    double l = 0;
    CHECK(tsc_model_forward(m, tok, tgt, &l) == TSC_OK);
    CHECK(tsc_model_backward(m) == TSC_OK);
    memcpy(g_out, tsc_model_grads(m), bytes);
    return l;
}

static void check_determinism(const char *name, tsc_prec_t prec) {
    int B = 4, T = 32;
    int32_t tok[128], tgt[128];
    batch(tok, tgt, B * T, 9);
    tsc_model_t *m = make(name, prec, B, T);
    if (!m) return;
    tsc_policy_t p;
    CHECK(tsc_policy_parse("bf16-fa2", &p) == TSC_OK);
    CHECK(tsc_model_set_attn_policy(m, 1, &p) == TSC_OK);
    size_t bytes = tsc_model_n_params(m) * 4;
    void *g1 = malloc(bytes), *g2 = malloc(bytes), *g3 = malloc(bytes);
    set_threads(2);
    double l1 = step(m, g1, bytes, tok, tgt), l2 = step(m, g2, bytes, tok, tgt);
    set_threads(1);
    double l3 = step(m, g3, bytes, tok, tgt);
    set_threads(2);
    CHECK(memcmp(&l1, &l2, 8) == 0 && memcmp(g1, g2, bytes) == 0);
    CHECKF(memcmp(&l1, &l3, 8) == 0 && memcmp(g1, g3, bytes) == 0, "%s prec %d: 1 vs 2 threads differ", name, prec);
    free(g1); free(g2); free(g3);
    tsc_model_free(m);
}

/* Layer 1 under bf16-torch: layer 0 unchanged bit for bit, layer 1 changed; each layer's view
 * equals tsc_attn_run on its q, k, v; max_logit and tied_rows from an independent score pass. */
static void check_policy_and_view(const char *name) {
    int B = 2, T = 32, N = B * T;
    int32_t tok[64], tgt[64];
    batch(tok, tgt, N, 11);
    tsc_model_t *a = make(name, TSC_PREC_FP32, B, T), *b = make(name, TSC_PREC_FP32, B, T);
    if (!a || !b) return;
    const tsc_model_tensor_t *wpe = tsc_model_tensor_find(a, "wpe");
    if (wpe) { /* GPT-2: no position signal and one token repeated in sequence 0: every key of that
                * sequence is the same, so each of its rows t >= 1 has a repeated score max */
        for (int i = 0; i < T; i++) tok[i] = 65;
        memset((float *)tsc_model_params(a) + wpe->offset, 0, (size_t)wpe->rows * wpe->cols * 4);
        memset((float *)tsc_model_params(b) + wpe->offset, 0, (size_t)wpe->rows * wpe->cols * 4);
    }
    tsc_policy_t torch;
    CHECK(tsc_policy_parse("bf16-torch", &torch) == TSC_OK);
    CHECK(tsc_model_set_attn_policy(b, 1, &torch) == TSC_OK);
    CHECK(tsc_model_set_attn_policy(b, 2, &torch) == TSC_ERR_ARG);
    double la, lb;
    CHECK(tsc_model_forward(a, tok, tgt, &la) == TSC_OK);
    CHECK(tsc_model_forward(b, tok, tgt, &lb) == TSC_OK);
    CHECK(tsc_model_backward(b) == TSC_OK);
    tsc_model_attn_view_t va, vb;
    CHECK(tsc_model_attn_view(a, 0, &va) == TSC_OK);
    CHECK(tsc_model_attn_view(b, 0, &vb) == TSC_OK);
    size_t nq = (size_t)va.B * va.H * va.T * va.D;
    CHECK(memcmp(va.o, vb.o, nq * 4) == 0 && memcmp(va.q, vb.q, nq * 4) == 0 && memcmp(va.x, vb.x, (size_t)N * va.C * 4) == 0);
    CHECK(tsc_model_attn_view(a, 1, &va) == TSC_OK);
    CHECK(tsc_model_attn_view(b, 1, &vb) == TSC_OK);
    CHECK(memcmp(va.q, vb.q, nq * 4) == 0);  /* layer 1's input is still layer 0's output */
    CHECK(memcmp(va.o, vb.o, nq * 4) != 0);  /* its attention output changed */
    CHECK(la != lb && vb.dout != NULL && va.dout == NULL);
    for (int l = 0; l < 2; l++) {
        tsc_model_attn_view_t v;
        CHECK(tsc_model_attn_view(b, l, &v) == TSC_OK);
        float *o = malloc(nq * 4), *lse = malloc((size_t)v.B * v.H * v.T * 4);
        tsc_attn_dims_t d = {v.B, v.H, v.Hkv, v.T, v.D, 1, 1.0 / sqrt((double)v.D)};
        tsc_attn_io_t io = {.dtype = TSC_ATTN_F32, .q = v.q, .k = v.k, .v = v.v, .o = o, .lse = lse};
        CHECK(tsc_attn_run(tsc_model_attn_policy(b, l), &d, &io, NULL, 0) == TSC_OK);
        CHECK(memcmp(o, v.o, nq * 4) == 0 && memcmp(lse, v.lse, (size_t)v.B * v.H * v.T * 4) == 0);
        free(o); free(lse);
        if (l != 0) continue;
        /* fp32 policy: S = R(R(Σ fma q·k)·α) in key order; per row the max and how often it occurs */
        const float *q = v.q, *k = v.k;
        double mx = -INFINITY;
        long long tied = 0;
        float alpha = (float)(1.0 / sqrt((double)v.D));
        for (int bh = 0; bh < v.B * v.H; bh++) {
            int kh = (bh / v.H) * v.Hkv + (bh % v.H) / (v.H / v.Hkv);
            for (int t = 0; t < v.T; t++) {
                float rm = -INFINITY;
                int cnt = 0;
                for (int j = 0; j <= t; j++) {
                    float s = 0;
                    for (int e = 0; e < v.D; e++)
                        s = fmaf(q[((size_t)bh * v.T + t) * v.D + e], k[((size_t)kh * v.T + j) * v.D + e], s);
                    s = s * alpha;
                    if (s > rm) rm = s, cnt = 1;
                    else if (s == rm) cnt++;
                }
                tied += cnt > 1;
                if (rm > mx) mx = rm;
            }
        }
        printf("%s layer 0: max_logit %.6f (independent %.6f), tied rows %lld (independent %lld)\n", name,
               v.max_logit, mx, v.tied_rows, tied);
        CHECK(v.max_logit == mx && v.tied_rows == tied);
        if (wpe) CHECK(tied >= (long long)v.H * (v.T - 1));
    }
    tsc_model_free(a);
    tsc_model_free(b);
}

static void check_errors(void) {
    tsc_model_t *m = make("gpt2-tiny", TSC_PREC_FP32, 1, 4);
    if (!m) return;
    int32_t tok[4] = {1, 2, 300, 4}, tgt[4] = {1, 2, 3, 4};
    CHECK(tsc_model_forward(m, tok, tgt, NULL) == TSC_ERR_ARG);
    CHECK(strstr(tsc_error_last(), "300") != NULL);
    CHECK(tsc_model_backward(m) == TSC_ERR_ARG);
    tok[2] = 3;
    CHECK(tsc_model_forward(m, tok, NULL, NULL) == TSC_OK);
    CHECK(tsc_model_backward(m) == TSC_ERR_ARG); /* no targets: no backward */
    CHECK(tsc_model_tensor_find(m, "h.1.attn.w_q") != NULL && tsc_model_tensor_find(m, "h.2.attn.w_q") == NULL);
    CHECK(tsc_model_tensor_find(m, "h.0.attn.b_q")->decay == 0 && tsc_model_tensor_find(m, "wte")->decay == 1);
    tsc_model_free(m);
}

int main(void) {
    check_configs();
    check_errors();
    check_init_loss_and_fp64("gpt2-tiny");
    check_init_loss_and_fp64("llama-tiny");
    check_init_loss_and_fp64("gpt2-mini,layers=2");
    check_determinism("gpt2-tiny", TSC_PREC_FP32);
    check_determinism("gpt2-mini,layers=2", TSC_PREC_FP32);
    check_determinism("llama-tiny", TSC_PREC_BF16);
    check_determinism("gpt2-mini,layers=2", TSC_PREC_BF16);
    check_policy_and_view("gpt2-tiny");
    check_policy_and_view("llama-tiny");
    return tsc_test_done();
}
