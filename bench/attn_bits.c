/* attn_bits: one hash line per (backend, policy, shape, output) of the CPU attention kernels, so a
 * change to a kernel can be checked for bit identity against the outputs before it:
 *   attn_bits > before.txt   (on the old build)      attn_bits | diff before.txt -   (on the new)
 * Every preset with and without +stable (where it applies) and a few structure variants, on shapes with the default tiles (T not a multiple of
 * the tile, causal and not, GQA, D 64 and 128), forward and backward, on cpu-ref and on the
 * default (SIMD) backend. Hashes are FNV-1a of the output's float bits. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsc_attention.h"
#include "tsc_formats.h"

static uint64_t rng = 0x243f6a8885a308d3ULL;
static float urand(void) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 4.0 - 2.0);
}

static uint64_t fnv(const float *x, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    const unsigned char *b = (const unsigned char *)x;
    for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

int main(void) {
    static const tsc_attn_dims_t shapes[] = {
        {1, 2, 2, 200, 64, 1, 0.125}, {1, 2, 2, 200, 64, 0, 0.125}, {1, 4, 2, 150, 128, 1, 0.09},
        {1, 3, 1, 131, 64, 0, 0.2},   {1, 2, 2, 300, 64, 1, 0.125},
    };
    const int nshape = (int)(sizeof shapes / sizeof shapes[0]);
    const tsc_attn_backend_t *bes[2] = {tsc_attn_backend_get("cpu-ref"), tsc_attn_backend_default()};
    /* structure variants the presets do not reach */
    static const char *const extra[] = {"bf16-fa2+unfused+hp-delta", "bf16-fa2+sr", "fp32+tile:q=64,k=32",
                                        "bf16-eager-cpu+online+stable", "fp32+dpp-delta", "bf16-fa2+bf16:dv,dk"};
    const int nextra = (int)(sizeof extra / sizeof extra[0]);
    static const char *const outs[6] = {"O", "lse", "delta", "dq", "dk", "dv"};
    for (int si = 0; si < nshape; si++) {
        const tsc_attn_dims_t *d = &shapes[si];
        const size_t nq = (size_t)d->B * d->H * d->T * d->D, nk = (size_t)d->B * d->Hkv * d->T * d->D;
        const size_t nl = (size_t)d->B * d->H * d->T;
        float *in = malloc(sizeof(float) * (2 * nq + 2 * nk));
        float *out = malloc(sizeof(float) * (2 * nq + 2 * nk + 2 * nl));
        if (!in || !out) return 1;
        for (size_t i = 0; i < 2 * nq + 2 * nk; i++) in[i] = urand();
        for (int pi = 0; pi < 2 * TSC_PRESET_COUNT + nextra; pi++) {
            char name[64];
            if (pi < 2 * TSC_PRESET_COUNT)
                snprintf(name, sizeof name, "%s%s", tsc_preset_name((tsc_preset_t)(pi / 2)), pi % 2 ? "+stable" : "");
            else
                snprintf(name, sizeof name, "%s", extra[pi - 2 * TSC_PRESET_COUNT]);
            tsc_policy_t p;
            if (tsc_policy_parse(name, &p) != TSC_OK) {
                if (pi % 2 && pi < 2 * TSC_PRESET_COUNT) continue; /* +stable needs an online softmax */
                fprintf(stderr, "attn_bits: %s\n", tsc_error_last());
                return 1;
            }
            for (int bi = 0; bi < 2; bi++) {
                float *o = out, *lse = o + nq, *dl = lse + nl, *dq = dl + nl, *dk = dq + nq, *dv = dk + nk;
                tsc_attn_io_t io = {TSC_ATTN_F32, in, in + nq, in + nq + nk, in + nq + 2 * nk, o, lse, dl, dq, dk, dv};
                int nw = 6;
                if (tsc_attn_run_with(bes[bi], &p, d, &io, NULL) != TSC_OK) {
                    /* a policy whose gradients are not modelled (FlexAttention's PRESCALE_QK): forward and δ */
                    io.dq = io.dk = io.dv = NULL;
                    nw = 3;
                    if (tsc_attn_run_with(bes[bi], &p, d, &io, NULL) != TSC_OK) {
                        fprintf(stderr, "attn_bits: %s: %s\n", name, tsc_error_last());
                        return 1;
                    }
                }
                const float *arr[6] = {o, lse, dl, dq, dk, dv};
                const size_t len[6] = {nq, nl, nl, nq, nk, nk};
                for (int w = 0; w < nw; w++)
                    printf("%s %s T=%d D=%d H=%d/%d causal=%d %s %016llx\n", bes[bi]->name, name, d->T, d->D, d->H,
                           d->Hkv, d->causal, outs[w], (unsigned long long)fnv(arr[w], len[w]));
            }
        }
        free(in);
        free(out);
    }
    return 0;
}
