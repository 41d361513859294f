/* test_policy: policy strings parse, print canonically and round trip; bad strings are rejected
 * with a message that lists what is valid; preset semantics match docs/MECHANISM.md §3. */
#include "tsc_policy.h"
#include "tsc_test.h"

static void round_trip(const char *s, const char *expect_canon) {
    tsc_policy_t p, p2;
    char buf[TSC_POLICY_STR_MAX], buf2[TSC_POLICY_STR_MAX];
    tsc_status_t st = tsc_policy_parse(s, &p);
    CHECKF(st == TSC_OK, "parse '%s': %s", s, tsc_error_last());
    if (st != TSC_OK) return;
    CHECKF(tsc_policy_format(&p, buf, sizeof buf) == TSC_OK, "format '%s': %s", s, tsc_error_last());
    CHECKF(tsc_policy_parse(buf, &p2) == TSC_OK, "reparse '%s' (from '%s'): %s", buf, s, tsc_error_last());
    CHECKF(tsc_policy_equal(&p, &p2), "'%s' -> '%s' does not round trip", s, buf);
    CHECKF(tsc_policy_format(&p2, buf2, sizeof buf2) == TSC_OK && strcmp(buf, buf2) == 0,
           "canonical form not idempotent: '%s' vs '%s'", buf, buf2);
    if (expect_canon) CHECK_STREQ(buf, expect_canon);
}

static void rejected(const char *s, const char *needle) {
    tsc_policy_t p;
    tsc_error_clear();
    tsc_status_t st = tsc_policy_parse(s, &p);
    CHECKF(st == TSC_ERR_ARG, "'%s' was accepted", s);
    const char *msg = tsc_error_last();
    CHECKF(strstr(msg, "valid presets: fp64, fp32, bf16-fa2, fp16-fa2, fp8-fa3, bf16-torch") != NULL,
           "message for '%s' does not list presets: %s", s, msg);
    CHECKF(strstr(msg, "+stable") && strstr(msg, "+hp-delta") && strstr(msg, "+sr"),
           "message for '%s' does not list modifiers: %s", s, msg);
    if (needle) CHECKF(strstr(msg, needle) != NULL, "message for '%s' lacks '%s': %s", s, needle, msg);
}

int main(void) {
    /* canonical forms */
    round_trip("bf16-fa2+stable:beta=2,eps=1e-3", "bf16-fa2+stable:beta=2,eps=1e-3");
    round_trip("bf16-fa2+stable", "bf16-fa2+stable:beta=2,eps=1e-3");
    round_trip("bf16-fa2+stable:eps=0.001,beta=2.0", "bf16-fa2+stable:beta=2,eps=1e-3");
    round_trip("bf16-torch+stable:beta=7,eps=0", "bf16-torch+stable:beta=7,eps=0");
    round_trip("bf16-torch+stable:gap=0.5", "bf16-torch+stable:beta=2,eps=1e-3,gap=0.5");
    /* two-digit values print without an exponent: %.1g gives "1e+01", and '+' separates modifiers
     * (found by fuzz/fuzz_policy) */
    round_trip("bf16-fa2+stable:gap=10", "bf16-fa2+stable:beta=2,eps=1e-3,gap=10");
    round_trip("bf16-fa2+stable:beta=20,gap=64", "bf16-fa2+stable:beta=20,eps=1e-3,gap=64");
    round_trip("bf16-fa2+stable:beta=60.5,eps=1", "bf16-fa2+stable:beta=60.5,eps=1");
    round_trip("fp64", "fp64");
    /* the kernels' structure modifiers and stages */
    for (int i = 0; i < TSC_PRESET_COUNT; i++) round_trip(tsc_preset_name((tsc_preset_t)i), tsc_preset_name((tsc_preset_t)i));
    round_trip("bf16-fa2+gqa-sum:each+norm:recip+scale:qk+ds-scale:first+materialized+bf16:l-rescale,delta-prod",
               "bf16-fa2+bf16:l-rescale,delta-prod+materialized+ds-scale:first+scale:qk+norm:recip+gqa-sum:each");
    round_trip("bf16-eager-cpu+online+ds-scale:last+scale:s+norm:div+gqa-sum:once",
               "bf16-eager-cpu+online+ds-scale:last+scale:s+norm:div+gqa-sum:once");
    round_trip("bf16-torch+bf16:exparg-bwd,l-rescale+fp32:delta-prod", "bf16-torch+fp32:delta-prod+bf16:l-rescale,exparg-bwd");
    rejected("bf16-fa2+scale:x", "+scale needs :s, :s-lp or :qk");
    rejected("bf16-fa2+ds-scale", "+ds-scale needs :last, :first or :rounded");
    rejected("bf16-fa2+norm:half", "+norm needs :div or :recip");
    rejected("bf16-eager-cpu+stable", "a materialized softmax has none");
    rejected("bf16-fa2+online:1", "+online takes no arguments");
    {
        /* the presets' distinguishing choices (docs/PRESETS.md) */
        tsc_policy_t t, e, g, m;
        CHECK(tsc_policy_parse("bf16-torch", &t) == TSC_OK);
        CHECK(tsc_policy_parse("bf16-eager-cpu", &e) == TSC_OK);
        CHECK(tsc_policy_parse("bf16-eager-cuda", &g) == TSC_OK);
        CHECK(tsc_policy_parse("bf16-sdpa-math", &m) == TSC_OK);
        CHECK(t.fmt[TSC_STAGE_EXPARG] == TSC_FMT_BF16 && t.fmt[TSC_STAGE_EXPARG_BWD] == TSC_FMT_FP32 &&
              t.fmt[TSC_STAGE_DELTA_PROD] == TSC_FMT_BF16 && t.fmt[TSC_STAGE_L] == TSC_FMT_BF16 &&
              t.fmt[TSC_STAGE_L_RESCALE] == TSC_FMT_FP32 && t.ds_scale == TSC_DS_SCALE_FIRST);
        CHECK(e.softmax == TSC_SOFTMAX_MATERIALIZED && e.fmt[TSC_STAGE_P] == TSC_FMT_BF16 &&
              e.fmt[TSC_STAGE_DELTA] == TSC_FMT_BF16 && e.norm == TSC_SOFTMAX_NORM_RECIP &&
              e.scale == TSC_SCALE_S_LP && e.gqa_sum == TSC_GQA_SUM_EACH && e.delta_src == TSC_DELTA_DPP);
        CHECK(g.softmax == TSC_SOFTMAX_MATERIALIZED && g.fmt[TSC_STAGE_P] == TSC_FMT_FP32 &&
              g.fmt[TSC_STAGE_PBAR_PV] == TSC_FMT_BF16 && g.norm == TSC_SOFTMAX_NORM_DIV);
        CHECK(m.scale == TSC_SCALE_QK && m.fmt[TSC_STAGE_S] == TSC_FMT_FP32 && m.fmt[TSC_STAGE_O] == TSC_FMT_BF16);
    }
    round_trip("fp32", "fp32");
    round_trip("fp16-fa2", "fp16-fa2");
    round_trip("fp8-fa3", "fp8-fa3");
    round_trip("bf16-fa2+hp-delta", "bf16-fa2+hp-delta");
    round_trip("bf16-fa2+hp-delta+lp-delta", "bf16-fa2");
    round_trip("bf16-torch+dpp-delta", "bf16-torch+dpp-delta");
    round_trip("bf16-fa2+sr", "bf16-fa2+sr");
    round_trip("bf16-fa2+sr:seed=42", "bf16-fa2+sr:seed=42");
    round_trip("bf16-fa2+sr:seed=42,pv", "bf16-fa2+sr:seed=42,pv");
    round_trip("bf16-fa2+rz:o", "bf16-fa2+rz:o");
    round_trip("bf16-torch+fp32:pv", "bf16-torch+fp32:pv");
    round_trip("bf16-torch+fp32:oacc,pv", "bf16-torch+fp32:pv,oacc");
    round_trip("bf16-torch+fp32:scores+fp32:pbar", "bf16-torch+fp32:scores,pbar-pv");
    round_trip("bf16-fa2+fp32:delta", "bf16-fa2");   /* already FP32: no difference */
    round_trip("fp32+bf16:o+fp16:p", "fp32+bf16:o+fp16:p");
    round_trip("fp32+fp8-e5m2:ds,dp", "fp32+fp8-e5m2:dp,ds");
    round_trip("bf16-fa2+unfused+tile:q=64,k=32", "bf16-fa2+unfused+tile:q=64,k=32");
    round_trip("bf16-torch+fused", "bf16-torch+fused");
    round_trip("bf16-fa2+sr:seed=3+fp32:pbar-pv+stable:beta=4", NULL);
    /* sr then raising a stage: that stage goes back to nearest-even, the rest stay stochastic */
    {
        tsc_policy_t p;
        CHECK(tsc_policy_parse("bf16-fa2+sr+fp32:pbar", &p) == TSC_OK);
        CHECK(p.mode[TSC_STAGE_PBAR_PV] == TSC_ROUND_NEAREST_EVEN);
        CHECK(p.mode[TSC_STAGE_O] == TSC_ROUND_STOCHASTIC);
        CHECK(p.mode[TSC_STAGE_L] == TSC_ROUND_NEAREST_EVEN);  /* an FP32 stage */
        char buf[TSC_POLICY_STR_MAX];
        CHECK(tsc_policy_format(&p, buf, sizeof buf) == TSC_OK);
        CHECK_STREQ(buf, "bf16-fa2+fp32:pbar-pv+sr");
    }

    /* preset semantics (docs/MECHANISM.md §3) */
    {
        tsc_policy_t fa2, tor, f8;
        CHECK(tsc_policy_parse("bf16-fa2", &fa2) == TSC_OK);
        CHECK(tsc_policy_parse("bf16-torch", &tor) == TSC_OK);
        CHECK(tsc_policy_parse("fp8-fa3", &f8) == TSC_OK);
        /* FA2 CUDA: S, ℓ, Ō FP32; P̄ for P̄V BF16; O rounded once */
        CHECK(fa2.fmt[TSC_STAGE_S] == TSC_FMT_FP32 && fa2.fmt[TSC_STAGE_L] == TSC_FMT_FP32);
        CHECK(fa2.fmt[TSC_STAGE_OACC] == TSC_FMT_FP32 && fa2.fmt[TSC_STAGE_PV] == TSC_FMT_FP32);
        CHECK(fa2.fmt[TSC_STAGE_PBAR_PV] == TSC_FMT_BF16 && fa2.fmt[TSC_STAGE_PBAR_L] == TSC_FMT_FP32);
        CHECK(fa2.fmt[TSC_STAGE_O] == TSC_FMT_BF16 && fa2.fused == 1);
        /* official PyTorch: BF16 scores, max, row sums, per-tile P̄V and Ō accumulator */
        CHECK(tor.fmt[TSC_STAGE_S] == TSC_FMT_BF16 && tor.fmt[TSC_STAGE_ROWMAX] == TSC_FMT_BF16);
        CHECK(tor.fmt[TSC_STAGE_L] == TSC_FMT_BF16 && tor.fmt[TSC_STAGE_PV] == TSC_FMT_BF16);
        CHECK(tor.fmt[TSC_STAGE_OACC] == TSC_FMT_BF16 && tor.fused == 0 && tor.torch_quirks == 1);
        CHECK(tor.fmt[TSC_STAGE_PBAR_L] == TSC_FMT_FP32);  /* exp runs in FP32, sum in FP32 */
        CHECK(tor.block_q == 512 && tor.block_k == 512);
        CHECK(f8.fmt[TSC_STAGE_PBAR_PV] == TSC_FMT_FP8_E4M3 && f8.fmt[TSC_STAGE_V] == TSC_FMT_FP8_E4M3);
        CHECK(!tsc_policy_uses_fp64(&fa2));
        /* substitution list: low-precision stages of bf16-fa2, inputs excluded */
        tsc_stage_t st[TSC_STAGE_COUNT];
        int n = tsc_policy_low_stages(&fa2, st);
        CHECK_EQ_INT(n, 5);
        if (n == 5) {
            CHECK(st[0] == TSC_STAGE_PBAR_PV && st[1] == TSC_STAGE_O && st[2] == TSC_STAGE_P &&
                  st[3] == TSC_STAGE_DS && st[4] == TSC_STAGE_GRAD);
        }
        tsc_policy_t sub = fa2;
        tsc_policy_stage_set(&sub, TSC_STAGE_PBAR_PV, TSC_FMT_FP32);
        char buf[TSC_POLICY_STR_MAX];
        CHECK(tsc_policy_format(&sub, buf, sizeof buf) == TSC_OK);
        CHECK_STREQ(buf, "bf16-fa2+fp32:pbar-pv");
        CHECK_EQ_INT(tsc_policy_low_stages(&tor, NULL), 16); /* with delta-prod */
        char tiny[8];
        CHECK(tsc_policy_format(&sub, tiny, sizeof tiny) == TSC_ERR_ARG && tiny[0] == '\0');
        /* every stage has a name that parses back */
        for (int s = 0; s < TSC_STAGE_COUNT; s++) {
            tsc_stage_t back;
            CHECK(tsc_stage_parse(tsc_stage_name((tsc_stage_t)s), &back) == TSC_OK && (int)back == s);
        }
    }

    /* rejected strings */
    rejected("", NULL);
    rejected("bf16", "unknown preset 'bf16'");
    rejected("BF16-FA2", NULL);
    rejected("bf16-fa2+", "empty modifier");
    rejected("bf16-fa2++stable", "empty modifier");
    rejected("bf16-fa2+foo", "unknown modifier '+foo'");
    rejected("bf16-fa2+stable:beta=x", "bad 'beta=x'");
    rejected("bf16-fa2+stable:beta=0.5", "beta in [1, 64]");
    rejected("bf16-fa2+stable:", "empty argument list");
    rejected("bf16-fa2+stable:delta=3", "bad 'delta=3'");
    rejected("bf16-fa2+fp32:nosuch", "unknown stage 'nosuch'");
    rejected("bf16-fa2+fp32", "unknown modifier");
    rejected("bf16-fa2+fp99:pv", "unknown modifier");
    rejected("bf16-fa2+bf16:acc", "acc stage must be fp32 or fp64");
    rejected("fp32+tile:q=0", "bad 'q=0'");
    rejected("fp32+tile:q=64,z=3", "bad 'z=3'");
    rejected("fp32+sr:seed=-1", "bad 'seed=-1'");
    rejected("fp32+rz:seed=1", "bad 'seed=1'");
    rejected("fp32+hp-delta:1", "takes no arguments");
    rejected("bf16-fa2 +stable", NULL);
    /* the preset table against its enum, its help and docs/PRESETS.md */
    {
        tsc_policy_t p;
        char *doc = NULL;
        const char *src = getenv("TSC_SRC");
        if (src) {
            char path[2048];
            snprintf(path, sizeof path, "%s/docs/PRESETS.md", src);
            FILE *f = fopen(path, "rb");
            CHECKF(f != NULL, "cannot read %s", path);
            if (f) {
                doc = calloc(1, 1 << 20);
                if (doc) (void)fread(doc, 1, (1 << 20) - 1, f); /* a short read leaves the text NUL-terminated */
                fclose(f);
            }
        }
        CHECK(tsc_policy_parse("no-such-preset", &p) == TSC_ERR_ARG);
        char err[4096];
        snprintf(err, sizeof err, "%s", tsc_error_last());
        for (int i = 0; i < TSC_PRESET_COUNT; i++) {
            const char *name = tsc_preset_name((tsc_preset_t)i);
            tsc_preset_t back = TSC_PRESET_COUNT;
            CHECKF(strcmp(name, "?") != 0, "preset %d has no row", i);
            CHECKF(strcmp(tsc_preset_describe((tsc_preset_t)i), "?") != 0, "%s: no description", name);
            CHECKF(tsc_preset_parse(name, &back) == TSC_OK && back == (tsc_preset_t)i, "%s parses back", name);
            for (int j = 0; j < i; j++) CHECKF(strcmp(tsc_preset_name((tsc_preset_t)j), name) != 0, "%s twice", name);
            char item[64];
            char last[64];
            snprintf(item, sizeof item, " %s,", name);
            snprintf(last, sizeof last, " %s;", name);
            CHECKF(strstr(err, item) || strstr(err, last), "the error of a bad preset does not list %s", name);
            snprintf(item, sizeof item, "`%s`", name);
            CHECKF(!doc || strstr(doc, item) != NULL, "docs/PRESETS.md does not name %s", item);
        }
        CHECK_STREQ(tsc_preset_name(TSC_PRESET_COUNT), "?");
        CHECK(tsc_policy_preset(TSC_PRESET_COUNT, &p) == TSC_ERR_ARG);
        /* the modifier table against the error's list, docs/PRESETS.md, and the parser: every value an
         * enum row names parses and prints back; every row is documented with its syntax */
        CHECK(tsc_policy_modifier_count() >= 13);
        for (int i = 0; i < tsc_policy_modifier_count(); i++) {
            char syn[256], cell[300], probe[320];
            const char *desc = NULL;
            CHECKF(tsc_policy_modifier_info(i, syn, sizeof syn, &desc) == TSC_OK, "modifier %d: %s", i, tsc_error_last());
            CHECKF(desc && strlen(desc) > 10, "modifier %s has no description", syn);
            CHECKF(strstr(err, syn) != NULL, "the error of a bad preset does not list %s", syn);
            size_t n = 0;
            for (const char *c = syn; *c && n + 3 < sizeof cell; c++) {
                if (*c == '|') cell[n++] = '\\'; /* a table cell escapes its bars */
                cell[n++] = *c;
            }
            cell[n] = '\0';
            snprintf(probe, sizeof probe, "| `%s` | %s |", cell, desc ? desc : "");
            CHECKF(!doc || strstr(doc, probe) != NULL, "docs/PRESETS.md lacks the row %s", probe);
            /* "+a, +b" (bare values) and "+name:a|b" (an argument) parse and print back */
            char *bar = strchr(syn, ':');
            if (syn[1] != 'F' && !strchr(syn, '[') && (strstr(syn, ", +") || (bar && strchr(syn, '|')))) {
                char vals[256];
                snprintf(vals, sizeof vals, "%s", bar && !strstr(syn, ", +") ? bar + 1 : syn);
                int k = 0;
                for (char *save = NULL, *v = strtok_r(vals, bar && !strstr(syn, ", +") ? "|" : ", +", &save); v;
                     v = strtok_r(NULL, bar && !strstr(syn, ", +") ? "|" : ", +", &save), k++) {
                    char pol[320], canon[TSC_POLICY_STR_MAX];
                    /* +sum and +vexp model PyTorch code's sums: they need an unfused preset */
                    const char *base = strncmp(syn, "+sum:", 5) == 0 || strncmp(syn, "+vexp:", 6) == 0 ? "bf16-torch" : "bf16-fa2";
                    if (bar && !strstr(syn, ", +")) snprintf(pol, sizeof pol, "%s+%.*s:%s", base, (int)(bar - syn - 1), syn + 1, v);
                    else snprintf(pol, sizeof pol, "%s+%s", base, v);
                    tsc_policy_t a, b;
                    CHECKF(tsc_policy_parse(pol, &a) == TSC_OK, "%s (from row %s): %s", pol, syn, tsc_error_last());
                    CHECK(tsc_policy_format(&a, canon, sizeof canon) == TSC_OK);
                    CHECKF(tsc_policy_parse(canon, &b) == TSC_OK && tsc_policy_equal(&a, &b), "%s -> %s", pol, canon);
                }
                CHECKF(k >= 2, "row %s lists %d values", syn, k);
            }
        }
        {
            char syn[8];
            CHECK(tsc_policy_modifier_info(tsc_policy_modifier_count(), syn, sizeof syn, NULL) == TSC_ERR_ARG);
            CHECK(tsc_policy_modifier_info(0, syn, 4, NULL) == TSC_ERR_ARG); /* "+FMT:..." does not fit */
            CHECK_STREQ(syn, "");
        }
        free(doc);
    }
    /* the accessors the Python package reads an opaque policy through */
    {
        tsc_policy_t p;
        int q = 0, k = 0;
        CHECK_EQ_INT(tsc_policy_size(), sizeof(tsc_policy_t));
        CHECK(tsc_policy_parse("fp32+tile:q=48,k=80", &p) == TSC_OK);
        tsc_policy_tiles(&p, &q, &k);
        CHECK_EQ_INT(q, 48);
        CHECK_EQ_INT(k, 80);
        tsc_policy_tiles(&p, NULL, &k); /* either output may be NULL */
        CHECK(tsc_policy_parse("bf16-fa2+rz:pbar-pv", &p) == TSC_OK);
        CHECK_EQ_INT(tsc_policy_stage_format(&p, TSC_STAGE_PBAR_PV), TSC_FMT_BF16);
        CHECK_EQ_INT(tsc_policy_stage_mode(&p, TSC_STAGE_PBAR_PV), TSC_ROUND_TOWARD_ZERO);
        CHECK_EQ_INT(tsc_policy_stage_mode(&p, TSC_STAGE_O), TSC_ROUND_NEAREST_EVEN);
        CHECK_EQ_INT(tsc_policy_stage_format(&p, TSC_STAGE_O), TSC_FMT_BF16);
        CHECK_EQ_INT(tsc_policy_stage_format(&p, TSC_STAGE_OACC), TSC_FMT_FP32);
        CHECK_EQ_INT(tsc_policy_stage_format(&p, TSC_STAGE_COUNT), TSC_FMT_FP32);
        CHECK_EQ_INT(tsc_policy_stage_mode(NULL, TSC_STAGE_PV), TSC_ROUND_NEAREST_EVEN);
    }
    return tsc_test_done();
}
