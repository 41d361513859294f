/* advice_internal.h: what the stable-softmax β sweep did, and the practitioner's advice of
 * `tilescope diagnose` (advice.c; docs/MECHANISM.md §6). Internal to analyze/. */
#ifndef TSC_ADVICE_INTERNAL_H
#define TSC_ADVICE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tsc_attention.h"
#include "tsc_diagnose.h"
#include "tsc_policy.h"

/* The studied β range: a β outside it is never recommended without saying so. */
#define ADV_BETA_LO 2.0
#define ADV_BETA_HI 8.0
/* Fixes whose upper confidence bounds of |ratio| differ by less than this are equally good. */
#define ADV_TIE 0.01
/* The row-sum floor of the PyTorch code (policies with torch_quirks): each key tile's P̄ sum is
 * clamped to >= this before it is added to ℓ. */
#define ADV_TORCH_L_FLOOR 1e-10

/* Counts over the tie rows of the replays of one β (adv_sweep_replay), turned into a
 * tsc_diag_beta_t by adv_sweep_finish. */
typedef struct {
    const tsc_policy_t *pol;   /* the +stable policy replayed */
    const uint8_t *tie;        /* [T] rows counted */
    int64_t rows, fix, guard, split, floor;
    double rm_min, rm_max;
} adv_sweep_acc_t;

void adv_sweep_init(adv_sweep_acc_t *a, const tsc_policy_t *pol);
/* Replays one (batch row, head) under a->pol (q, k, v [T, D], FP32) with a row-window trace and
 * counts, over the rows with tie[t] set, what Algorithm 3 did in the tile holding the row max. */
tsc_status_t adv_sweep_replay(adv_sweep_acc_t *a, const tsc_attn_dims_t *dims, const float *q, const float *k,
                              const float *v, const uint8_t *tie);
void adv_sweep_finish(const adv_sweep_acc_t *a, double beta, double ratio, tsc_diag_beta_t *out);

/* "leaves +42% of the bias" / "reverses the bias to -42% of its size" / "removes it (-3% left)". */
/* "+42% left", "-42% left", "less than 1% left". */
const char *adv_left(double ratio, char *buf, size_t n);
const char *adv_effect(double ratio, double removed_frac, char *buf, size_t n);
/* The practitioner's fixes measured for the head (dh->fixes), the recommendation and the
 * stage-set note (appendix). */
void adv_recommend(tsc_diag_head_t *dh, double removed_frac);
/* One paragraph: what the sweep did over the examined heads (diagnosis-level). */
const char *adv_sweep_explanation(const tsc_diagnosis_t *d, char *buf, size_t n);

#endif
