/* test_advice.c: what the stable-softmax sweep counts (advice.c), on rows built with a known answer,
 * and the signed sentences of the advice.
 *
 * T = 32, tiles of 8 keys (bf16-torch+tile:q=8,k=8), causal, scale 1. Keys 0 and p are the same
 * vector (2, 0, 0, 0), so every row t >= p has two exact maxima S = 2·2 = 4; every other key scores
 * at most 1. With p = 4 both maxima sit in tile 0: r_s = 2 and Algorithm 3 takes m = β·4 (β = 2),
 * the fallback m = 4 + 1 when e^((1-β)·4) underflows BF16 (β = 30: e^-116), and at β = 8 the
 * tile's P̄ sum 2·e^-28 is below the PyTorch code's 1e-10 floor. With p = 12 the maxima sit in
 * tiles 0 and 1: r_s = 1 in each, the fix never triggers, and the +stable replay's O is the plain
 * replay's, bit for bit (a bias ratio of exactly 1).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "advice_internal.h"
#include "tsc_test.h"

enum { T = 32, D = 4 };

static float q[T * D], k[T * D], v[T * D];
static uint8_t tie[T];

static void build(int p) {
    memset(q, 0, sizeof q);
    memset(k, 0, sizeof k);
    for (int t = 0; t < T; t++) {
        q[t * D + 0] = 2.0f;
        q[t * D + 1] = 1.0f;
        k[t * D + 1] = 0.125f * (float)(t % 8); /* <= 0.875 */
        for (int d = 0; d < D; d++) v[t * D + d] = (float)((t * 7 + d * 3) % 11) * 0.25f - 1.0f;
        tie[t] = t >= p;
    }
    k[0] = k[p * D] = 2.0f;
    k[1] = k[p * D + 1] = 0.0f;
}

static tsc_diag_beta_t sweep(const char *pol_str, double beta) {
    tsc_policy_t pol;
    CHECK(tsc_policy_parse(pol_str, &pol) == TSC_OK);
    pol.stable.enabled = 1;
    pol.stable.beta = beta;
    tsc_attn_dims_t dims = {.B = 1, .H = 1, .Hkv = 1, .T = T, .D = D, .causal = 1, .scale = 1.0};
    adv_sweep_acc_t acc;
    adv_sweep_init(&acc, &pol);
    CHECK(adv_sweep_replay(&acc, &dims, q, k, v, tie) == TSC_OK);
    tsc_diag_beta_t b;
    adv_sweep_finish(&acc, beta, NAN, &b);
    return b;
}

static void test_same_tile(void) {
    build(4);
    tsc_diag_beta_t b = sweep("bf16-torch+tile:q=8,k=8", 2.0);
    CHECK_EQ_INT(b.n_rows, T - 4);
    CHECK(b.frac_fix == 1.0 && b.frac_guard == 0.0 && b.frac_split == 0.0 && b.frac_floor == 0.0);
    CHECK(b.r_m_min == 4.0 && b.r_m_max == 4.0);
    CHECK(b.exparg_ulp == 0x1p-5); /* -4 in BF16: [4, 8) spaced 2^-5 */
    CHECK(b.in_range);
    b = sweep("bf16-torch+tile:q=8,k=8", 30.0);
    CHECK(b.frac_guard == 1.0 && b.frac_fix == 0.0);
    CHECK(!b.in_range && strstr(b.what, "outside the studied range"));
    b = sweep("bf16-torch+tile:q=8,k=8", 8.0);
    CHECK(b.frac_fix == 1.0 && b.frac_floor == 1.0);
    /* FA2 has no row-sum floor */
    b = sweep("bf16-fa2+tile:q=8,k=8", 8.0);
    CHECK(b.frac_fix == 1.0 && b.frac_floor == 0.0);
}

static void run_o(const char *pol_str, int stable, float *o) {
    tsc_policy_t pol;
    CHECK(tsc_policy_parse(pol_str, &pol) == TSC_OK);
    pol.stable.enabled = stable;
    float lse[T];
    tsc_attn_dims_t dims = {.B = 1, .H = 1, .Hkv = 1, .T = T, .D = D, .causal = 1, .scale = 1.0};
    tsc_attn_io_t io = {.dtype = TSC_ATTN_F32, .q = q, .k = k, .v = v, .o = o, .lse = lse};
    CHECK(tsc_attn_run(&pol, &dims, &io, NULL, 0) == TSC_OK);
}

static void test_split_tiles(void) {
    build(12);
    tsc_diag_beta_t b = sweep("bf16-torch+tile:q=8,k=8", 2.0);
    CHECK_EQ_INT(b.n_rows, T - 12);
    CHECK(b.frac_split == 1.0 && b.frac_fix == 0.0 && b.frac_guard == 0.0);
    float o_lp[T * D], o_st[T * D];
    run_o("bf16-torch+tile:q=8,k=8", 0, o_lp);
    run_o("bf16-torch+tile:q=8,k=8", 1, o_st);
    CHECK(memcmp(o_lp, o_st, sizeof o_lp) == 0);
}

static void test_sentences(void) {
    char buf[128];
    CHECK(strstr(adv_effect(-0.42, 0.1, buf, sizeof buf), "-42%") && strstr(buf, "reverses"));
    CHECK(strstr(adv_effect(0.42, 0.1, buf, sizeof buf), "+42%") && strstr(buf, "leaves"));
    CHECK(strstr(adv_effect(-0.03, 0.1, buf, sizeof buf), "-3%") && strstr(buf, "removes"));
    CHECK(strstr(adv_effect(-325.0, 0.1, buf, sizeof buf), "-32500%"));
    CHECK(strstr(adv_left(-0.42, buf, sizeof buf), "-42% left"));
    CHECK(strstr(adv_left(0.001, buf, sizeof buf), "less than 1%"));
}

/* The recommendation: the removing fix with the smallest upper confidence bound |ratio| + 2 se,
 * others within 1% of it named as "either"; a fix whose interval reaches past the threshold does
 * not count as removing, however small its ratio; a sign kept in every number. */
static void test_recommend(void) {
    tsc_diag_head_t h;
    memset(&h, 0, sizeof h);
    snprintf(h.culprit, sizeof h.culprit, "pv+oacc+o");
    h.culprit_ratio = -0.04;
    h.stable_ratio = 0.02, h.stable_se = 0.05;    /* upper bound 0.12: not shown to remove it */
    h.delta_src_ratio = 0.001, h.delta_src_se = 0; /* upper bound 0.001 */
    h.dpp_ratio = -0.008, h.dpp_se = 0.0005;      /* 0.009: within 1% of it, "either" */
    h.fp32o_ratio = 0.05, h.fp32o_se = 0.001;     /* removes it, but less surely */
    const double betas[4] = {1.5, 2, 4, 8}, ratios[4] = {0.0, 0.02, -300, 0.0};
    for (int i = 0; i < 4; i++) {
        h.sweep[i].beta = betas[i], h.sweep[i].ratio = ratios[i], h.sweep[i].n_rows = 10;
        h.sweep[i].in_range = betas[i] >= 2 && betas[i] <= 8;
        h.sweep[i].frac_fix = i == 3 ? 0 : 1, h.sweep[i].frac_guard = i == 3;
    }
    adv_recommend(&h, 0.1);
    CHECK(strncmp(h.recommendation, "switch on the delta from an FP32 O", 34) == 0);
    CHECK(strstr(h.recommendation, "either that or the delta = rowsum(dP o P)") && strstr(h.recommendation, "-1% left"));
    CHECK(!strstr(h.recommendation, "FP32 O (O-bar") && !strstr(h.recommendation, "stable"));
    /* beta 1.5 (outside 2-8) and beta 8 (the fallback) are never offered, though their ratio is 0 */
    CHECK_EQ_INT(h.n_fixes, 4);
    CHECK(!h.fixes[0].removes && h.fixes[1].removes && h.fixes[2].removes && h.fixes[3].removes);
    CHECK(h.fixes[1].recommended && !h.fixes[0].recommended && !h.fixes[2].recommended && !h.fixes[3].recommended);
    CHECK(strstr(h.stage_note, "pv+oacc+o") && strstr(h.stage_note, "-4%"));
    /* a reversed bias keeps its sign in the sentence */
    h.stable_ratio = -0.42, h.stable_se = 0.01;
    h.delta_src_ratio = h.dpp_ratio = h.fp32o_ratio = 0.9;
    adv_recommend(&h, 0.1);
    CHECKF(strstr(h.recommendation, "no single kernel option") && strstr(h.recommendation, "-42%"), "%s",
           h.recommendation);
}

/* The run's biased step: the stages of the culprit sets (the closest set where a head has none) of at
 * least half of the examined heads, in the policy's stage order; heads not examined do not count. */
static void test_steps(void) {
    tsc_diag_head_t hs[5];
    memset(hs, 0, sizeof hs);
    const char *culprit[5] = {"oacc+pv", "none", "scores", "none", "none"};
    const char *nearest[5] = {"oacc+pv", "pv+oacc+l", "scores", "none", "o"};
    for (int i = 0; i < 5; i++) {
        snprintf(hs[i].culprit, sizeof hs[i].culprit, "%s", culprit[i]);
        snprintf(hs[i].nearest, sizeof hs[i].nearest, "%s", nearest[i]);
        hs[i].n_subst = i == 4 ? 0 : 3; /* the last was not examined (beyond --max-heads) */
        hs[i].nearest_ratio = 0.3, hs[i].nearest_se = 0.1;
    }
    tsc_diagnosis_t d;
    memset(&d, 0, sizeof d);
    d.n = 5, d.heads = hs;
    tsc_diag_steps_t st;
    tsc_diagnose_steps(&d, &st);
    CHECK_EQ_INT(st.n_heads, 4);
    CHECKF(strcmp(st.biased_step, "pv+oacc") == 0, "%s", st.biased_step); /* 2 of 4, in stage order */
    CHECK_EQ_INT(st.n_stages, 4);
    CHECK(strcmp(st.named[0].stage, "pv") == 0 && st.named[0].culprit == 1 && st.named[0].closest == 1);
    CHECK(strcmp(st.named[1].stage, "oacc") == 0 && st.named[1].culprit == 1 && st.named[1].closest == 1);
    CHECK(strcmp(st.named[2].stage, "scores") == 0 && st.named[2].culprit == 1 && st.named[2].closest == 0);
    CHECK(strcmp(st.named[3].stage, "l") == 0 && st.named[3].culprit == 0 && st.named[3].closest == 1);
    char buf[512];
    CHECKF(strstr(tsc_diagnose_steps_line(&d, buf, sizeof buf), "over the 4 examined heads: pv+oacc (") &&
               strstr(buf, "scores 1/0, l 0/1)"), "%s", buf);
    CHECK(strstr(tsc_diagnose_step_text(&hs[1], buf, sizeof buf), "not isolated (the closest, pv+oacc+l") &&
          strstr(buf, "+30% +- 10%"));
    /* a closest set that leaves more than half of the bias names nothing */
    hs[1].nearest_ratio = -0.6;
    tsc_diagnose_steps(&d, &st);
    CHECKF(strcmp(st.biased_step, "none") == 0 && st.n_stages == 3, "%s %d", st.biased_step, st.n_stages);
    for (int k = 0; k < st.n_stages; k++) CHECK(st.named[k].closest == 0 && st.named[k].culprit == 1); /* 1 of 4: below half */
    hs[1].nearest_ratio = 0.3;
    /* one stage named for 1 of 3 heads is below half: no biased step */
    snprintf(hs[0].culprit, sizeof hs[0].culprit, "q");
    snprintf(hs[1].nearest, sizeof hs[1].nearest, "k");
    hs[3].n_subst = 0;
    tsc_diagnose_steps(&d, &st);
    CHECKF(strcmp(st.biased_step, "none") == 0 && st.n_heads == 3, "%s %d", st.biased_step, st.n_heads);
    /* the stage note of a head without a culprit names the closest set */
    tsc_diag_head_t h = hs[1];
    snprintf(h.nearest, sizeof h.nearest, "pv+oacc+l");
    adv_recommend(&h, 0.1);
    CHECKF(strstr(h.stage_note, "no set of up to 3 stages") && strstr(h.stage_note, "'pv+oacc+l'") &&
               strstr(h.stage_note, "+30%"), "%s", h.stage_note);
}

int main(void) {
    test_steps();
    test_same_tile();
    test_split_tiles();
    test_sentences();
    test_recommend();
    return tsc_test_done();
}
