/* model_config.c: the named model configurations, "KEY=VALUE" overrides, the one-line summary.
 * It stands on model.c, which holds what a configuration implies (the tensor layout, the
 * parameter count) and which configurations a model can be built from (tsc_model_config_check);
 * model.c never calls back. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "tsc_model.h"

static const tsc_model_config_t NAMED[] = {
    /* name          arch            L   H   Hkv  C    F     V    T     eps   theta */
    {"gpt2-tiny", TSC_ARCH_GPT2, 2, 2, 2, 32, 128, 256, 32, 1e-5, 0},
    {"gpt2-mini", TSC_ARCH_GPT2, 6, 6, 6, 192, 768, 256, 256, 1e-5, 0},
    {"gpt2-small", TSC_ARCH_GPT2, 12, 12, 12, 768, 3072, 256, 1024, 1e-5, 0},
    {"llama-tiny", TSC_ARCH_LLAMA, 2, 4, 2, 32, 96, 256, 32, 1e-5, 10000},
    {"llama-mini", TSC_ARCH_LLAMA, 6, 6, 2, 192, 512, 256, 256, 1e-5, 10000},
};
enum { N_NAMED = (int)(sizeof NAMED / sizeof NAMED[0]) };

int tsc_model_config_count(void) { return N_NAMED; }

const char *tsc_model_config_name(int i) { return i >= 0 && i < N_NAMED ? NAMED[i].name : NULL; }

tsc_status_t tsc_model_config_get(const char *name, tsc_model_config_t *cfg) {
    for (int i = 0; name && i < N_NAMED; i++)
        if (strcmp(name, NAMED[i].name) == 0) {
            *cfg = NAMED[i];
            return TSC_OK;
        }
    char list[256];
    size_t len = 0;
    for (int i = 0; i < N_NAMED; i++) /* ", "-separated, cut at the buffer's end */
        for (int k = !i; k < 2; k++) {
            const char *part = k ? NAMED[i].name : ", ";
            size_t n = strlen(part);
            if (n > sizeof list - 1 - len) n = sizeof list - 1 - len;
            memcpy(list + len, part, n);
            len += n;
        }
    list[len] = '\0';
    return tsc_error_set(TSC_ERR_ARG, "unknown model '%s' (known: %s)", name ? name : "(null)", list);
}

/* One KEY=VALUE into cfg. kv_set tracks whether kv_heads was given (else it follows heads). */
static tsc_status_t apply(tsc_model_config_t *c, const char *key, const char *val, int *kv_set) {
    if (strcmp(key, "arch") == 0) {
        if (strcmp(val, "gpt2") == 0) c->arch = TSC_ARCH_GPT2;
        else if (strcmp(val, "llama") == 0) c->arch = TSC_ARCH_LLAMA;
        else return tsc_error_set(TSC_ERR_ARG, "model: arch=%s is not gpt2 or llama", val);
        if (c->arch == TSC_ARCH_LLAMA && !(c->rope_theta > 0)) c->rope_theta = 10000;
        return TSC_OK;
    }
    char *end;
    errno = 0;
    double d = strtod(val, &end);
    if (!*val || *end || errno) return tsc_error_set(TSC_ERR_ARG, "model: %s=%s is not a number", key, val);
    if (strcmp(key, "eps") == 0) c->norm_eps = d;
    else if (strcmp(key, "theta") == 0) c->rope_theta = d;
    else {
        struct { const char *k; int *p; } ints[] = {{"layers", &c->n_layer}, {"heads", &c->n_head},
            {"kv_heads", &c->n_kv_head}, {"dim", &c->d_model}, {"ff", &c->d_ff}, {"vocab", &c->vocab},
            {"ctx", &c->max_T}};
        size_t i = 0;
        while (i < sizeof ints / sizeof ints[0] && strcmp(key, ints[i].k)) i++;
        if (i == sizeof ints / sizeof ints[0])
            return tsc_error_set(TSC_ERR_ARG, "model: unknown key '%s' (keys: arch, layers, heads, kv_heads, "
                                 "dim, ff, vocab, ctx, eps, theta)", key);
        if (d != (int)d || d < -1e9 || d > 1e9)
            return tsc_error_set(TSC_ERR_ARG, "model: %s=%s is not an integer", key, val);
        *ints[i].p = (int)d;
        if (ints[i].p == &c->n_kv_head) *kv_set = 1;
    }
    return TSC_OK;
}

tsc_status_t tsc_model_config_parse(const char *spec, tsc_model_config_t *cfg) {
    if (!spec || !*spec) return tsc_error_set(TSC_ERR_ARG, "model: empty configuration");
    char buf[512];
    if (strlen(spec) >= sizeof buf) return tsc_error_set(TSC_ERR_ARG, "model: configuration string too long");
    strcpy(buf, spec);
    char *save = NULL, *tok = strtok_r(buf, ",", &save);
    tsc_model_config_t c;
    int kv_set = 0, custom = 0;
    if (strchr(tok, '=')) {
        c = NAMED[1]; /* a bare KEY=VALUE list starts from gpt2-mini */
    } else {
        tsc_status_t st = tsc_model_config_get(tok, &c);
        if (st != TSC_OK) return st;
        tok = strtok_r(NULL, ",", &save);
    }
    int base_gqa = c.n_kv_head != c.n_head;
    for (; tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) return tsc_error_set(TSC_ERR_ARG, "model: '%s' is not KEY=VALUE", tok);
        *eq = 0;
        tsc_status_t st = apply(&c, tok, eq + 1, &kv_set);
        if (st != TSC_OK) return st;
        custom = 1;
    }
    if (!kv_set && (c.arch == TSC_ARCH_GPT2 || !base_gqa)) c.n_kv_head = c.n_head;
    if (!kv_set && c.arch == TSC_ARCH_LLAMA && base_gqa && c.n_head % c.n_kv_head) c.n_kv_head = c.n_head;
    if (custom) snprintf(c.name, sizeof c.name, "custom");
    tsc_status_t st = tsc_model_config_check(&c);
    if (st != TSC_OK) return st;
    *cfg = c;
    return TSC_OK;
}

void tsc_model_config_str(const tsc_model_config_t *c, char *buf, size_t size) {
    double n = (double)tsc_model_config_n_params(c);
    char np[32];
    if (n >= 1e9) snprintf(np, sizeof np, "%.1fB", n / 1e9);
    else if (n >= 1e6) snprintf(np, sizeof np, "%.1fM", n / 1e6);
    else snprintf(np, sizeof np, "%.1fK", n / 1e3);
    snprintf(buf, size, "%s %d layers, %d heads (%d kv), dim %d, ff %d, vocab %d, ctx %d, %s params",
             c->arch == TSC_ARCH_LLAMA ? "llama" : "gpt2", c->n_layer, c->n_head, c->n_kv_head, c->d_model,
             c->d_ff, c->vocab, c->max_T, np);
}
