/* settings.c: what a run's settings may be (tsc_train.h): the options' defaults, the table of
 * numeric settings with their bounds and the checks against it, the attention-policy spec, and
 * the precision names. The lowest file of the trainer: run.cfg's parser (ckpt.c), the loop
 * (train.c) and the CLI's flags read it; it calls neither. */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

void tsc_train_opts_init(tsc_train_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->model = "gpt2-mini";
    o->prec = TSC_PREC_FP32;
    o->data = "kjv";
    o->batch = 8;
    o->steps = 200;
    o->lr = 1e-3;
    o->min_lr_frac = 0.1;
    o->warmup = 20;
    o->beta1 = 0.9;
    o->beta2 = 0.95;
    o->eps = 1e-8;
    o->weight_decay = 0.1;
    o->grad_clip = 1.0;
    o->seed = 1337;
    o->val_every = 25;
    o->val_batches = 4;
    o->stats_every = 50;
    o->ckpt_every = 100;
    o->flight_max_mb = 1024;
    o->flight_dumps = 1;
    o->lr_spike_step = -1;
    o->grad_shards = 1;
}

/* ---- the settings table (tsc_train.h): the one definition of each numeric setting's bounds ---- */

#define OPT(field) offsetof(tsc_train_opts_t, field)
static const tsc_train_setting_t SETTINGS[] = {
    /* key            flag              kind               field               lo     hi       none */
    {"steps", "--steps", TSC_TRAIN_LLONG, OPT(steps), 1, 1e12, 0, 0, NULL},
    {"seed", "--seed", TSC_TRAIN_U64, OPT(seed), 0, 4611686018427387904.0, 0, 0, NULL},
    {"batch", "--batch", TSC_TRAIN_INT, OPT(batch), 1, 65536, 0, 0, NULL},
    {"seq_len", "--seq-len", TSC_TRAIN_INT, OPT(seq_len), 1, 1 << 20, 1, 0, "the model's context"},
    {"lr", "--lr", TSC_TRAIN_DOUBLE, OPT(lr), 1e-12, 100, 0, 0, NULL},
    {"min_lr_frac", "--min-lr-frac", TSC_TRAIN_DOUBLE, OPT(min_lr_frac), 0, 1, 0, 0, NULL},
    {"warmup", "--warmup", TSC_TRAIN_INT, OPT(warmup), 0, 1e9, 0, 0, NULL},
    {"beta1", "--beta1", TSC_TRAIN_DOUBLE, OPT(beta1), 0, 0.999999, 0, 0, NULL},
    {"beta2", "--beta2", TSC_TRAIN_DOUBLE, OPT(beta2), 0, 0.999999999, 0, 0, NULL},
    {"eps", NULL, TSC_TRAIN_DOUBLE, OPT(eps), 0, 1, 0, 0, NULL},
    {"weight_decay", "--weight-decay", TSC_TRAIN_DOUBLE, OPT(weight_decay), 0, 100, 0, 0, NULL},
    {"grad_clip", "--grad-clip", TSC_TRAIN_DOUBLE, OPT(grad_clip), 0, 1e12, 0, 0, NULL},
    {"val_every", "--val-every", TSC_TRAIN_INT, OPT(val_every), 1, 1e9, 0, 0, NULL},
    {"val_batches", "--val-batches", TSC_TRAIN_INT, OPT(val_batches), 1, 1e6, 0, 0, NULL},
    {"stats_every", "--stats-every", TSC_TRAIN_INT, OPT(stats_every), 1, 1e9, 0, 0, NULL},
    {"ckpt_every", "--ckpt-every", TSC_TRAIN_INT, OPT(ckpt_every), 1, 1e9, 0, 0, NULL},
    {"ckpt_keep", "--ckpt-keep", TSC_TRAIN_INT, OPT(ckpt_keep), 0, 1e6, 0, 0, NULL},
    {"threads", "--threads", TSC_TRAIN_INT, OPT(threads), 1, 4096, 1, 0, "OpenMP's default"},
    {"grad_shards", "--grad-shards", TSC_TRAIN_INT, OPT(grad_shards), 1, 65536, 0, 0, NULL},
    {"flight_steps", "--flight", TSC_TRAIN_INT, OPT(flight_steps), 1, 1e6, 1, 0, "the flight recorder off"},
    {"flight_max_mb", "--flight-max-mb", TSC_TRAIN_DOUBLE, OPT(flight_max_mb), 1, 1e9, 0, 0, NULL},
    {"flight_dumps", "--flight-dumps", TSC_TRAIN_INT, OPT(flight_dumps), 1, 1e4, 0, 0, NULL},
    {"flight_keep", "--flight-keep", TSC_TRAIN_INT, OPT(flight_keep), 1, 1e4, 1, 0, "off"},
    {"spike_factor", "--spike-factor", TSC_TRAIN_DOUBLE, OPT(spike_factor), 1, 1e9, 1, 0, "the recorder's own rule"},
    /* --lr-spike STEP=LR sets both */
    {"lr_spike_step", NULL, TSC_TRAIN_LLONG, OPT(lr_spike_step), 0, 1e12, 1, -1, "no spike"},
    {"lr_spike", NULL, TSC_TRAIN_DOUBLE, OPT(lr_spike), 0, 1e6, 0, 0, NULL},
};
#undef OPT
enum { N_SETTINGS = (int)(sizeof SETTINGS / sizeof SETTINGS[0]) };

int tsc_train_setting_count(void) { return N_SETTINGS; }

const tsc_train_setting_t *tsc_train_setting_at(int i) { return i >= 0 && i < N_SETTINGS ? &SETTINGS[i] : NULL; }

const tsc_train_setting_t *tsc_train_setting_find(const char *key) {
    for (int i = 0; key && i < N_SETTINGS; i++)
        if (!strcmp(key, SETTINGS[i].key)) return &SETTINGS[i];
    return NULL;
}

tsc_status_t tsc_train_setting_check(const tsc_train_setting_t *s, const tsc_train_opts_t *o, const char *what) {
    const char *f = (const char *)o + s->offset;
    char val[64], lo[32], hi[32], none[96] = "", flag[64] = "";
    int in;
    if (s->kind == TSC_TRAIN_DOUBLE) {
        double v;
        memcpy(&v, f, sizeof v);
        in = (v >= s->lo && v <= s->hi) || (s->has_none && v == s->none);
        snprintf(val, sizeof val, "%.17g", v);
        snprintf(lo, sizeof lo, "%g", s->lo);
        snprintf(hi, sizeof hi, "%g", s->hi);
    } else if (s->kind == TSC_TRAIN_U64) {
        uint64_t v;
        memcpy(&v, f, sizeof v);
        in = v >= (uint64_t)s->lo && v <= (uint64_t)s->hi;
        snprintf(val, sizeof val, "%" PRIu64, v);
        snprintf(lo, sizeof lo, "%" PRIu64, (uint64_t)s->lo);
        snprintf(hi, sizeof hi, "%" PRIu64, (uint64_t)s->hi);
    } else {
        long long v;
        if (s->kind == TSC_TRAIN_INT) {
            int i;
            memcpy(&i, f, sizeof i);
            v = i;
        } else {
            memcpy(&v, f, sizeof v);
        }
        in = (v >= (long long)s->lo && v <= (long long)s->hi) || (s->has_none && v == (long long)s->none);
        snprintf(val, sizeof val, "%lld", v);
        snprintf(lo, sizeof lo, "%lld", (long long)s->lo);
        snprintf(hi, sizeof hi, "%lld", (long long)s->hi);
    }
    if (in) return TSC_OK;
    if (s->has_none) snprintf(none, sizeof none, ", or %g (%s)", s->none, s->none_means);
    snprintf(flag, sizeof flag, " (the bounds of %s)", s->flag ? s->flag : !strncmp(s->key, "lr_spike", 8)
                                                                               ? "--lr-spike" : "the trainer");
    return tsc_error_set(TSC_ERR_ARG, "%s: the setting %s = %s is out of range: expected %s to %s%s%s; refused", what,
                         s->key, val, lo, hi, flag, none);
}

tsc_status_t tsc_train_opts_check(const tsc_train_opts_t *o, const char *what) {
    for (int i = 0; i < N_SETTINGS; i++) {
        tsc_status_t st = tsc_train_setting_check(&SETTINGS[i], o, what);
        if (st != TSC_OK) return st;
    }
    if ((int)o->prec < TSC_PREC_FP32 || (int)o->prec > TSC_PREC_FP64)
        return tsc_error_set(TSC_ERR_ARG, "%s: precision %d is not fp32, bf16 or fp64; refused", what, (int)o->prec);
    if (o->n_attn_policy < 0 || o->n_attn_policy > TSC_TRAIN_MAX_POLICIES)
        return tsc_error_set(TSC_ERR_ARG, "%s: %d attention policies (at most %d); refused", what, o->n_attn_policy,
                             TSC_TRAIN_MAX_POLICIES);
    for (int i = 0; i < o->n_attn_policy; i++)
        if (!o->attn_policy[i]) return tsc_error_set(TSC_ERR_ARG, "%s: attention policy %d is NULL", what, i);
    if (o->flight_keep > 0 && o->flight_dumps > 1)
        return tsc_error_set(TSC_ERR_ARG, "%s: flight_dumps = %d and flight_keep = %d: give one (the first stops the "
                             "recorder after that many dumps, the second keeps the newest that many); refused", what,
                             o->flight_dumps, o->flight_keep);
    if (!o->model || !o->data) return tsc_error_set(TSC_ERR_ARG, "%s: no model or no data named", what);
    return TSC_OK;
}

tsc_status_t tsc_train_policy_spec(const char *spec, int n_layer, uint64_t *layer_mask, tsc_policy_t *pol) {
    const char *p = spec;
    while ((*p >= '0' && *p <= '9') || *p == ',') p++;
    const char *policy = spec;
    uint64_t mask = n_layer >= 64 ? ~0ull : (1ull << n_layer) - 1;
    if (p > spec && *p == '=') {
        mask = 0;
        policy = p + 1;
        for (const char *q = spec; q < p;) {
            char *end;
            long l = strtol(q, &end, 10);
            if (end == q || (end < p && *end != ','))
                return tsc_error_set(TSC_ERR_ARG, "attention policy '%s': expected LAYER[,LAYER...]=POLICY", spec);
            if (l < 0 || l >= n_layer || l >= 64)
                return tsc_error_set(TSC_ERR_ARG,
                                     "attention policy '%s': the model has no layer %ld (its layers are 0..%d)",
                                     spec, l, n_layer - 1);
            mask |= 1ull << l;
            q = end + (end < p);
        }
    }
    tsc_status_t st = tsc_policy_parse(policy, pol);
    if (st != TSC_OK) return tsc_error_wrap(st, "attention policy '%s': ", spec);
    *layer_mask = mask;
    return TSC_OK;
}

tsc_status_t tsc_train_policy_append(const char *spec, const char *modifier, char *out, size_t cap) {
    if (!spec || !modifier || !out || !cap) return tsc_error_set(TSC_ERR_ARG, "policy append: NULL argument");
    size_t nl = strcspn(modifier, ":");  /* the modifier's name: "+stable:beta=2" -> "+stable" */
    int has = 0;
    for (const char *f = strchr(spec, '+'); f && nl > 1; f = strchr(f + 1, '+'))
        if (!strncmp(f, modifier, nl) && (f[nl] == 0 || f[nl] == '+' || f[nl] == ':')) has = 1;
    int k = has ? snprintf(out, cap, "%s", spec) : snprintf(out, cap, "%s%s", spec, modifier);
    if (k < 0 || (size_t)k >= cap)
        return tsc_error_set(TSC_ERR_ARG, "attention policy '%s' with %s: longer than %zu bytes", spec, modifier, cap - 1);
    return TSC_OK;
}

const char *tsc_train_prec_name(tsc_prec_t p) {
    return p == TSC_PREC_BF16 ? "bf16" : p == TSC_PREC_FP64 ? "fp64" : "fp32";
}
