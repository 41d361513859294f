/* advice.c: what the stable-softmax β sweep of `tilescope diagnose` did, and the practitioner's
 * advice (advice_internal.h; docs/MECHANISM.md §6). */
#include "advice_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tsc_formats.h"

void adv_sweep_init(adv_sweep_acc_t *a, const tsc_policy_t *pol) {
    memset(a, 0, sizeof *a);
    a->pol = pol;
    a->rm_min = INFINITY;
    a->rm_max = -INFINITY;
}

static double rnd_stage(const tsc_policy_t *p, tsc_stage_t s, double x) {
    return tsc_round(x, p->fmt[s], TSC_ROUND_NEAREST_EVEN, NULL);
}

/* Row t of a completed window block: where Algorithm 3 acted and whether the ℓ floor moved ℓ. */
static void sweep_row(adv_sweep_acc_t *a, const tsc_attn_trace_t *tr, int t) {
    const tsc_policy_t *p = a->pol;
    const size_t slot = (size_t)(t % tr->rows);
    const double *tmax = tr->tile_max + slot * tr->n_kt, *rmax = tr->run_max + slot * tr->n_kt;
    const int32_t *rs = tr->ties_eps + slot * tr->n_kt;
    double mx = -INFINITY;
    for (int kt = 0; kt < tr->n_kt; kt++)
        if (!isnan(tmax[kt]) && tmax[kt] > mx) mx = tmax[kt];
    int kt_fix = -1;
    for (int kt = 0; kt < tr->n_kt && kt_fix < 0; kt++)
        if (tmax[kt] == mx && rs[kt] > 1) kt_fix = kt;
    a->rows++;
    if (mx < a->rm_min) a->rm_min = mx;
    if (mx > a->rm_max) a->rm_max = mx;
    if (kt_fix < 0) {
        a->split++;
    } else {
        double m_fix = mx > 0 ? rnd_stage(p, TSC_STAGE_ROWMAX, p->stable.beta * mx) : 0.0;
        double m_guard = rnd_stage(p, TSC_STAGE_ROWMAX, mx + p->stable.gap);
        if (rmax[kt_fix] == m_guard && m_guard != m_fix) a->guard++;
        else a->fix++;
    }
    if (!p->torch_quirks) return;
    /* each visited tile adds max(its P̄ sum, floor) to ℓ; fully masked tiles are visited too */
    double l_true = 0.0, added = 0.0;
    for (int kt = 0; kt < tr->n_kt; kt++) {
        double s = 0.0;
        int j1 = (kt + 1) * tr->block_k < tr->T ? (kt + 1) * tr->block_k : tr->T;
        for (int j = kt * tr->block_k; j < j1; j++) s += tr->pbar[slot * (size_t)tr->T + j];
        l_true += s;
        if (s < ADV_TORCH_L_FLOOR) added += ADV_TORCH_L_FLOOR - s;
    }
    if (added > ldexp(l_true, -(tsc_format_mant_bits(p->fmt[TSC_STAGE_L]) + 1))) a->floor++;
}

typedef struct {
    adv_sweep_acc_t *a;
    const uint8_t *tie;
} sweep_ctx_t;

static void sweep_block(void *ctx, const tsc_attn_trace_t *tr, int t0, int nr) {
    sweep_ctx_t *c = ctx;
    for (int t = t0; t < t0 + nr; t++)
        if (c->tie[t]) sweep_row(c->a, tr, t);
}

tsc_status_t adv_sweep_replay(adv_sweep_acc_t *a, const tsc_attn_dims_t *dims, const float *q, const float *k,
                              const float *v, const uint8_t *tie) {
    sweep_ctx_t c = {a, tie};
    tsc_attn_trace_t tr;
    tsc_status_t st = tsc_attn_trace_init_rows(&tr, dims->T, dims->D, a->pol->block_k,
                                               TSC_TRACE_SCORES | TSC_TRACE_TILES, TSC_ATTN_ROW_GROUP,
                                               sweep_block, &c);
    if (st != TSC_OK) return st;
    tsc_attn_dims_t d1 = *dims;
    d1.B = d1.H = d1.Hkv = 1;
    tsc_attn_io_t io = {.dtype = TSC_ATTN_F32, .q = q, .k = k, .v = v};
    tr.b = tr.h = 0;
    st = tsc_attn_run(a->pol, &d1, &io, &tr, 1);
    tsc_attn_trace_free(&tr);
    return st;
}

void adv_sweep_finish(const adv_sweep_acc_t *a, double beta, double ratio, tsc_diag_beta_t *out) {
    memset(out, 0, sizeof *out);
    out->beta = beta;
    out->ratio = ratio;
    out->in_range = beta >= ADV_BETA_LO && beta <= ADV_BETA_HI;
    out->n_rows = a->rows;
    double n = a->rows > 0 ? (double)a->rows : NAN;
    out->frac_fix = a->fix / n, out->frac_guard = a->guard / n;
    out->frac_split = a->split / n, out->frac_floor = a->floor / n;
    out->r_m_min = a->rows ? a->rm_min : NAN;
    out->r_m_max = a->rows ? a->rm_max : NAN;
    out->exparg_ulp = NAN;
    if (a->rows && a->rm_max != 0.0) {
        int e;
        frexp((1.0 - beta) * a->rm_max, &e);
        out->exparg_ulp = ldexp(1.0, e - 1 - tsc_format_mant_bits(a->pol->fmt[TSC_STAGE_EXPARG]));
    }
    if (!a->rows) {
        snprintf(out->what, sizeof out->what, "beta %g: no tie row to look at", beta);
        return;
    }
    snprintf(out->what, sizeof out->what,
             "beta %g%s: of %lld tie rows (max %.3g..%.3g), m = beta*r_m in %.0f%%, fallback m = r_m + %g in "
             "%.0f%%, maxima in different key tiles (no fix) in %.0f%%; 1e-10 row-sum floor moved l in %.0f%%; "
             "exp argument %.3g spaced %.3g",
             beta, out->in_range ? "" : " (outside the studied range 2-8)", (long long)a->rows, out->r_m_min,
             out->r_m_max, 100 * out->frac_fix, a->pol->stable.gap, 100 * out->frac_guard, 100 * out->frac_split,
             100 * out->frac_floor, (1.0 - beta) * a->rm_max, out->exparg_ulp);
}

const char *adv_left(double ratio, char *buf, size_t n) {
    if (!isfinite(ratio)) snprintf(buf, n, "not measured");
    else if (fabs(ratio) < 0.005) snprintf(buf, n, "less than 1%% left");
    else snprintf(buf, n, "%+.0f%% left", 100 * ratio);
    return buf;
}

const char *adv_effect(double ratio, double removed_frac, char *buf, size_t n) {
    if (!isfinite(ratio)) snprintf(buf, n, "was not measured");
    else if (fabs(ratio) < 0.005) snprintf(buf, n, "removes it (less than 1%% of the bias left)");
    else if (fabs(ratio) <= removed_frac) snprintf(buf, n, "removes it (%+.0f%% of the bias left)", 100 * ratio);
    else if (ratio < 0) snprintf(buf, n, "reverses the bias to %+.0f%% of its size", 100 * ratio);
    else snprintf(buf, n, "leaves %+.0f%% of the bias", 100 * ratio);
    return buf;
}

/* Removed with confidence: |ratio| + 2·se within the threshold (a missing se counts as 0). */
static int removes(double ratio, double se, double removed_frac) {
    return isfinite(ratio) && fabs(ratio) + 2 * (isfinite(se) ? se : 0.0) <= removed_frac;
}

static void add_fix(tsc_diag_head_t *dh, double removed_frac, const char *name, const char *where,
                    const char *modifier, const char *metric, double ratio, double se) {
    if (dh->n_fixes >= TSC_DIAG_MAX_FIXES) return;
    tsc_diag_fix_t *f = &dh->fixes[dh->n_fixes++];
    snprintf(f->name, sizeof f->name, "%s", name);
    snprintf(f->where, sizeof f->where, "%s", where);
    snprintf(f->modifier, sizeof f->modifier, "%s", modifier);
    snprintf(f->metric, sizeof f->metric, "%s", metric);
    f->ratio = ratio;
    f->ratio_se = se;
    f->recommended = 0;
    f->removes = removes(ratio, se, removed_frac);
}

/* The upper confidence bound of a fix's |ratio|. */
static double upper(const tsc_diag_fix_t *f) {
    return fabs(f->ratio) + 2 * (isfinite(f->ratio_se) ? f->ratio_se : 0.0);
}

/* A β of the sweep other than 2 that is inside the studied range, did what it says (m = β·r_m in
 * at least 90% of the tie rows, no fallback, no floor) and removes the bias; the smallest such β. */
static int clean_beta(const tsc_diag_head_t *dh, int n_betas, double removed_frac) {
    for (int i = 0; i < n_betas; i++) {
        const tsc_diag_beta_t *b = &dh->sweep[i];
        if (b->beta != 2.0 && b->in_range && b->n_rows > 0 && b->frac_fix >= 0.9 && b->frac_guard == 0 &&
            b->frac_floor == 0 && removes(b->ratio, b->ratio_se, removed_frac))
            return i;
    }
    return -1;
}

/* The fixes in a fixed order (forward-kernel switch first, then the backward's δ, then holding O
 * in FP32), each with its measured effect and standard error. A fix removes the bias when its
 * upper confidence bound |ratio| + 2 se is <= removed_frac; the recommendation is the removing fix
 * with the smallest bound, and any other within ADV_TIE of it is named as "either". Not "the
 * smallest ratio": a fix whose effect is a per-row coin flip (the stable fix under the PyTorch
 * code rescales the tied terms by e^((1-β)r_m), which rounds up or down row by row) has a wide
 * interval and is not recommended on a lucky draw, so two runs of the same data agree. */
void adv_recommend(tsc_diag_head_t *dh, double removed_frac) {
    char nm[80], eff[96];
    int n_betas = 0;
    while (n_betas < TSC_DIAG_MAX_BETAS && dh->sweep[n_betas].beta > 0) n_betas++;
    dh->n_fixes = 0;
    add_fix(dh, removed_frac, "stable softmax fix (beta 2, eps 0.001)", "forward kernel", "+stable:beta=2", "O",
            dh->stable_ratio, dh->stable_se);
    int cb = clean_beta(dh, n_betas, removed_frac);
    if (cb >= 0) {
        char mod[64];
        snprintf(nm, sizeof nm, "stable softmax fix (beta %g, eps 0.001)", dh->sweep[cb].beta);
        snprintf(mod, sizeof mod, "+stable:beta=%g", dh->sweep[cb].beta);
        add_fix(dh, removed_frac, nm, "forward kernel", mod, "O", dh->sweep[cb].ratio, dh->sweep[cb].ratio_se);
    }
    add_fix(dh, removed_frac, "delta from an FP32 O", "backward kernel's delta preprocessing", "+hp-delta", "delta",
            dh->delta_src_ratio, dh->delta_src_se);
    add_fix(dh, removed_frac, "delta = rowsum(dP o P)", "backward kernel's delta preprocessing", "+dpp-delta",
            "delta", dh->dpp_ratio, dh->dpp_se);
    add_fix(dh, removed_frac, "FP32 O (O-bar accumulated and O written in FP32)", "forward kernel",
            "+fp32:pv,oacc,o", "O", dh->fp32o_ratio, dh->fp32o_se);
    /* the surest: the smallest upper bound |ratio| + 2 se among the fixes that remove the bias;
     * others within ADV_TIE of it are named as "either" (the fixed order breaks exact ties) */
    int first = -1;
    for (int i = 0; i < dh->n_fixes; i++)
        if (dh->fixes[i].removes && (first < 0 || upper(&dh->fixes[i]) < upper(&dh->fixes[first]) - ADV_TIE))
            first = i;
    size_t w = 0, cap = sizeof dh->recommendation;
    if (first < 0) {
        int best = 0;
        for (int i = 1; i < dh->n_fixes; i++)
            if (isfinite(dh->fixes[i].ratio) &&
                (!isfinite(dh->fixes[best].ratio) || fabs(dh->fixes[i].ratio) < fabs(dh->fixes[best].ratio)))
                best = i;
        snprintf(dh->recommendation, cap,
                 "no single kernel option removes the bias; the closest, %s in the %s, %s; run this head in FP32",
                 dh->fixes[best].name, dh->fixes[best].where,
                 adv_effect(dh->fixes[best].ratio, removed_frac, eff, sizeof eff));
    } else {
        tsc_diag_fix_t *f = &dh->fixes[first];
        f->recommended = 1;
        w = (size_t)snprintf(dh->recommendation, cap, "switch on the %s in the %s: %s", f->name, f->where,
                             adv_effect(f->ratio, removed_frac, eff, sizeof eff));
        for (int i = 0, k = 0; i < dh->n_fixes && w < cap; i++)
            if (i != first && dh->fixes[i].removes && upper(&dh->fixes[i]) <= upper(f) + ADV_TIE)
                w += (size_t)snprintf(dh->recommendation + w, cap - w, "%s%s in the %s (%s)",
                                      k++ ? "; or " : "; either that or the ", dh->fixes[i].name, dh->fixes[i].where,
                                      adv_left(dh->fixes[i].ratio, eff, sizeof eff));
    }
    if (strcmp(dh->culprit, "none") != 0)
        snprintf(dh->stage_note, sizeof dh->stage_note, "holding stages '%s' in FP32 %s", dh->culprit,
                 adv_effect(dh->culprit_ratio, removed_frac, eff, sizeof eff));
    else if (strcmp(dh->nearest, "none") != 0)
        snprintf(dh->stage_note, sizeof dh->stage_note,
                 "no set of up to 3 stages held in FP32 removes the bias; the closest, '%s', %s", dh->nearest,
                 adv_effect(dh->nearest_ratio, removed_frac, eff, sizeof eff));
    else
        snprintf(dh->stage_note, sizeof dh->stage_note, "no set of up to 3 stages held in FP32 removes the bias");
}

/* Sums over the examined heads of one β's counts, as fractions of their tie rows. */
static void pooled(const tsc_diagnosis_t *d, int bi, double *fix, double *guard, double *split, double *floor_,
                   double *rmin, double *rmax, double *ulp, long long *rows, double *rlo, double *rhi) {
    double n = 0, f = 0, g = 0, s = 0, fl = 0;
    *rmin = INFINITY, *rmax = -INFINITY, *ulp = NAN, *rlo = INFINITY, *rhi = -INFINITY;
    for (size_t i = 0; i < d->n; i++) {
        const tsc_diag_beta_t *b = &d->heads[i].sweep[bi];
        if (b->n_rows <= 0) continue;
        n += b->n_rows, f += b->frac_fix * b->n_rows, g += b->frac_guard * b->n_rows;
        s += b->frac_split * b->n_rows, fl += b->frac_floor * b->n_rows;
        if (b->r_m_min < *rmin) *rmin = b->r_m_min;
        if (b->r_m_max > *rmax) *rmax = b->r_m_max, *ulp = b->exparg_ulp;
        if (isfinite(b->ratio)) {
            if (b->ratio < *rlo) *rlo = b->ratio;
            if (b->ratio > *rhi) *rhi = b->ratio;
        }
    }
    *rows = (long long)n;
    *fix = f / n, *guard = g / n, *split = s / n, *floor_ = fl / n;
}

const char *adv_sweep_explanation(const tsc_diagnosis_t *d, char *buf, size_t n) {
    size_t w = 0;
    buf[0] = 0;
    for (int bi = 0; bi < d->n_betas && w < n; bi++) {
        double fix, guard, split, fl, rmin, rmax, ulp, rlo, rhi;
        long long rows;
        pooled(d, bi, &fix, &guard, &split, &fl, &rmin, &rmax, &ulp, &rows, &rlo, &rhi);
        if (rows <= 0) continue;
        double beta = d->betas[bi];
        w += (size_t)snprintf(buf + w, n - w, "%sbeta %g%s, bias left %+.0f%%", w ? " " : "", beta,
                              beta >= ADV_BETA_LO && beta <= ADV_BETA_HI ? "" : " (outside the studied 2-8)", 100 * rlo);
        if (w < n && rhi > rlo) w += (size_t)snprintf(buf + w, n - w, "..%+.0f%%", 100 * rhi);
        if (w < n) w += (size_t)snprintf(buf + w, n - w, ": ");
        if (w >= n) break;
        if (guard >= 0.5)
            w += (size_t)snprintf(buf + w, n - w,
                                  "e^((1-beta)*r_m) rounds to 0 in %.0f%% of the tie rows, so the kernel fell back "
                                  "to m = r_m + gap: the gap rule, not beta %g.",
                                  100 * guard, beta);
        else if (fl >= 0.5)
            w += (size_t)snprintf(buf + w, n - w,
                                  "m = beta*r_m in %.0f%% of the tie rows, where the PyTorch code's 1e-10 floor on "
                                  "each key tile's P-bar sum lies far above the true sum (about e^((1-beta)*r_m), "
                                  "r_m %.3g..%.3g), so l and O come out wrong.",
                                  100 * fix, rmin, rmax);
        else if (split >= 0.5)
            w += (size_t)snprintf(buf + w, n - w,
                                  "in %.0f%% of the tie rows the tied maxima sit in different key tiles (r_s = 1 in "
                                  "each), so the fix never triggers.",
                                  100 * split);
        else
            w += (size_t)snprintf(buf + w, n - w,
                                  "m = beta*r_m in %.0f%% of the tie rows (r_m %.3g..%.3g; exp argument spaced %.3g)%s",
                                  100 * fix, rmin, rmax, ulp, fl > 0 ? "" : ".");
        if (guard < 0.5 && fl > 0 && fl < 0.5 && split < 0.5 && w < n)
            w += (size_t)snprintf(buf + w, n - w, "; the 1e-10 floor moved l in %.0f%% of them.", 100 * fl);
    }
    if (w >= n && n > 4) memcpy(buf + n - 4, "...", 4);
    return buf;
}
