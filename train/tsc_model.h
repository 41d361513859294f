/* tsc_model.h: GPT-2 and Llama style transformers with forward and backward written out, for
 * tilescope's trainer (tsc_train.h). Attention runs through kernels/' FA2 reference
 * (tsc_attn_run) under a precision policy chosen per layer; everything else runs in one of three
 * precisions (tsc_prec_t). Parameters and their gradients live in one flat array each (FP32, or
 * FP64 in FP64 mode), in the order of tsc_model_tensor, so an optimizer and a checkpoint see one
 * buffer.
 *
 *   tsc_model_config_t cfg; tsc_model_config_get("gpt2-mini", &cfg);
 *   tsc_model_t *m; tsc_model_create(&m, &cfg, TSC_PREC_BF16, 8, 256);   // batch 8 x 256 tokens
 *   tsc_model_init(m, 1337);
 *   tsc_policy_t p; tsc_policy_parse("bf16-torch", &p); tsc_model_set_attn_policy(m, -1, &p);
 *   double loss; tsc_model_forward(m, tokens, targets, &loss);       // tokens, targets [B, T]
 *   tsc_model_backward(m);                                           // grads = d loss / d params
 *
 * Weights are stored as PyTorch's nn.Linear stores them, [out, in], y = x W^T (+ b), so a
 * layer's W^Q is rows [0, H*D) of its query projection and goes into a dump as w_q [H*D, C].
 *
 * Precision (tsc_prec_t):
 *   FP32  every tensor FP32; matmuls accumulate in FP32 (one FMA chain per output element, in k
 *         order: the same bits for any thread count).
 *   BF16  autocast semantics: each matmul rounds its two operands to BF16 (round to nearest
 *         even), accumulates in FP32 and rounds its output to BF16 (forward and both backward
 *         products); norms, softmax, cross-entropy, residual adds and the optimizer run in FP32
 *         on FP32 master weights. The accumulation order of the BF16 products is documented in
 *         the implementation (AVX-512 BF16 pairs vs a GPU's tensor-core order).
 *   FP64  every tensor FP64 (gradient checks against finite differences); attention then runs
 *         under the fp64 policy whatever was set.
 */
#ifndef TSC_MODEL_H
#define TSC_MODEL_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_policy.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TSC_ARCH_GPT2 = 0, TSC_ARCH_LLAMA = 1 } tsc_arch_t;
typedef enum { TSC_PREC_FP32 = 0, TSC_PREC_BF16 = 1, TSC_PREC_FP64 = 2 } tsc_prec_t;

enum { TSC_MODEL_NAME_MAX = 32 };

typedef struct {
    char name[TSC_MODEL_NAME_MAX]; /* "gpt2-mini", or "custom" */
    tsc_arch_t arch;
    int n_layer;
    int n_head;        /* query heads */
    int n_kv_head;     /* key/value heads (GQA; = n_head for GPT-2) */
    int d_model;       /* C; head dimension D = C / n_head */
    int d_ff;          /* MLP hidden width (GPT-2: 4C; Llama: SwiGLU width) */
    int vocab;         /* 256 for byte-level text */
    int max_T;         /* context length (GPT-2's learned positions; Llama's RoPE table) */
    double norm_eps;   /* LayerNorm / RMSNorm epsilon */
    double rope_theta; /* Llama only */
} tsc_model_config_t;

/* Named configurations: "gpt2-tiny", "gpt2-mini", "gpt2-small" (12 x 12 x 768, T = 1024),
 * "llama-tiny", "llama-mini". Returns TSC_ERR_ARG naming the known ones when name is unknown. */
TSC_API tsc_status_t tsc_model_config_get(const char *name, tsc_model_config_t *cfg);
/* Number of named configurations and the i-th name (NULL out of range). */
TSC_API int tsc_model_config_count(void);
TSC_API const char *tsc_model_config_name(int i);
/* A named configuration, or a custom one as "KEY=VALUE,..." on top of a named base:
 * "gpt2-mini,layers=2,ctx=64" or "arch=llama,layers=4,heads=8,kv_heads=2,dim=256,ff=688,
 * vocab=256,ctx=256"; keys: arch, layers, heads, kv_heads, dim, ff, vocab, ctx, eps, theta.
 * Checks consistency (dim divisible by heads, heads by kv_heads, positive sizes); TSC_ERR_ARG
 * naming the offending key otherwise. */
TSC_API tsc_status_t tsc_model_config_parse(const char *spec, tsc_model_config_t *cfg);
/* One line: "gpt2 6 layers, 6 heads (6 kv), dim 192, ff 768, vocab 256, ctx 256, 2.8M params". */
TSC_API void tsc_model_config_str(const tsc_model_config_t *cfg, char *buf, size_t size);
/* Parameter count of a configuration. */
TSC_API size_t tsc_model_config_n_params(const tsc_model_config_t *cfg);

typedef struct tsc_model tsc_model_t;

/* Allocates parameters, gradients and the activations of one B x T batch (T <= max_T).
 * Attention starts under the fp32 policy (fp64 in FP64 mode) in every layer. */
TSC_API tsc_status_t tsc_model_create(tsc_model_t **out, const tsc_model_config_t *cfg, tsc_prec_t prec,
                                      int B, int T);
TSC_API void tsc_model_free(tsc_model_t *m);
TSC_API const tsc_model_config_t *tsc_model_config(const tsc_model_t *m);
TSC_API tsc_prec_t tsc_model_prec(const tsc_model_t *m);

/* Deterministic initialisation from seed (GPT-2: N(0, 0.02), residual projections scaled by
 * 1/sqrt(2 n_layer), biases 0, norm gains 1; Llama likewise without biases). */
TSC_API void tsc_model_init(tsc_model_t *m, uint64_t seed);

/* Flat parameter and gradient arrays, n_params elements of float (double in FP64 mode). */
TSC_API size_t tsc_model_n_params(const tsc_model_t *m);
TSC_API void *tsc_model_params(tsc_model_t *m);
TSC_API void *tsc_model_grads(tsc_model_t *m);

/* The named tensors inside the flat arrays, in storage order. Names: "wte", "wpe", "ln_f.w",
 * "h.3.attn.w_q", "h.3.attn.w_k", "h.3.attn.w_v", "h.3.attn.w_o", "h.3.mlp.w_up", ... shape
 * [rows, cols] (cols 1 for vectors); decay: 1 for matrices AdamW decays, 0 for biases, gains
 * and (by convention) nothing else. Llama has no biases and no "wpe"; its norms are RMSNorm gains
 * ("h.3.ln1.w", "h.3.ln2.w", "ln_f.w"), its MLP adds "h.3.mlp.w_gate" (SwiGLU), its output head
 * is the untied "lm_head" [vocab, C], and RoPE rotates the interleaved pairs (2i, 2i+1) of each
 * head (docs/TRAINING.md). */
typedef struct {
    const char *name;
    size_t offset;     /* in elements from the start of the flat array */
    int rows, cols;
    int decay;
} tsc_model_tensor_t;
TSC_API int tsc_model_n_tensors(const tsc_model_t *m);
TSC_API const tsc_model_tensor_t *tsc_model_tensor(const tsc_model_t *m, int i);
/* The tensor called name, or NULL. */
TSC_API const tsc_model_tensor_t *tsc_model_tensor_find(const tsc_model_t *m, const char *name);

/* Attention policy of layer (0-based), or of every layer when layer < 0. TSC_ERR_ARG when the
 * layer does not exist. In FP64 mode the call is accepted and recorded but fp64 runs. */
TSC_API tsc_status_t tsc_model_set_attn_policy(tsc_model_t *m, int layer, const tsc_policy_t *pol);
TSC_API const tsc_policy_t *tsc_model_attn_policy(const tsc_model_t *m, int layer);

/* Forward over tokens [B, T] (values < vocab: TSC_ERR_ARG otherwise). With targets [B, T]
 * (a value < 0 is ignored in the loss), *loss = mean cross-entropy and the activations the
 * backward needs are kept; targets NULL: logits only. Non-finite values propagate (the loss is
 * then NaN/Inf; not an error). */
TSC_API tsc_status_t tsc_model_forward(tsc_model_t *m, const int32_t *tokens, const int32_t *targets,
                                       double *loss);
/* Backward of the last forward with targets: overwrites the gradients (not accumulated). */
TSC_API tsc_status_t tsc_model_backward(tsc_model_t *m);

/* Logits [B, T, vocab] of the last forward (float, double in FP64 mode). */
TSC_API const void *tsc_model_logits(const tsc_model_t *m);

/* What one layer's attention saw in the last forward (and backward), for capture and the
 * flight recorder. Pointers into the model (valid until the next forward), element type float
 * (double in FP64 mode); q, k after RoPE (Llama) and as the attention kernel received them.
 *   x [B, T, C] the attention's input (after the norm), q [B, H, T, D], k, v [B, Hkv, T, D],
 *   o [B, H, T, D], lse [B, H, T], dout [B, H, T, D] (NULL before a backward).
 * Statistics of the forward: max_logit = max over rows of the scaled score max (the attention
 * logit growth the paper tracks), tied_rows = rows whose score max occurs more than once. */
typedef struct {
    int B, H, Hkv, T, D, C;
    const void *x, *q, *k, *v, *o, *lse, *dout;
    double max_logit;
    long long tied_rows;
} tsc_model_attn_view_t;
TSC_API tsc_status_t tsc_model_attn_view(const tsc_model_t *m, int layer, tsc_model_attn_view_t *v);

#ifdef __cplusplus
}
#endif
#endif
