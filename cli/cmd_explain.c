/* cmd_explain.c: `tilescope explain`: the bit-level trace of a rounding event.
 *
 *   tilescope explain add A B [--acc FMT] [--to FMT] [--round MODE] [--seed N] [--json]
 *
 * adds A and B in the accumulator format and rounds the sum to the output format, printing
 * each step the way docs/MECHANISM.md §5 tells the story: operand bits, exponent alignment, significand
 * overflow, kept bits | rounding bit | sticky bits, direction and exact signed error.
 *
 *   tilescope explain DUMP --layer L --head H --row T --feature I [--step S] [--policy P] ...
 *
 * replays the accumulation of Ō[T, I] = Σ_j P̄[T, j] V[j, I] of one head under a policy with
 * the accumulation model, checks it against the attention reference (kernels/tsc_attention.h)
 * tile by tile, bit for bit, and lists the largest rounding events and the keys where P̄ = 1.
 *
 * The explanations are computed by analyze/tsc_explain.h; this file parses the flags and prints. */
#include "cli.h"

#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsc_explain.h"
#include "tsc_json.h"

const char tsc_usage_explain[] =
    "usage: tilescope explain add A B [options]\n"
    "       tilescope explain DUMP --layer L --head H --row T --feature I [options]\n"
    "\n"
    "Adds A and B (decimal numbers, each first rounded into the accumulator format) exactly,\n"
    "rounds the sum into the accumulator format, then rounds that result to the output format,\n"
    "and prints the bit-level trace of both roundings: operand bits, exponent alignment,\n"
    "significand overflow, kept bits | rounding bit | sticky bits, direction, exact error.\n"
    "\n"
    "options:\n"
    "  --acc FMT     accumulator format (default fp32)\n"
    "  --to FMT      output format the sum is rounded to (default bf16; 'none' to skip)\n"
    "  --round MODE  nearest-even | toward-zero | stochastic (default nearest-even)\n"
    "  --seed N      seed for stochastic rounding (integer >= 0, default 0)\n"
    "  --json        machine-readable output on stdout\n"
    "\n"
    "FMT: fp64, fp32, tf32, bf16, fp16, fp8-e4m3, fp8-e5m2, e8m6, e8m5, e8m4, e8m3, e8m2, e8m1\n"
    "(e8mN: FP32's exponent range with N mantissa bits, docs/PRESETS.md).\n"
    "example (docs/MECHANISM.md §5): tilescope explain add -2.4071154594421387 -2.296875\n"
    "\n"
    "The DUMP form replays the accumulation of O-bar[T, I] = sum_j P-bar[T, j] V[j, I] (the\n"
    "unnormalised output, docs/MECHANISM.md §3) of one head under a policy, addition by addition, checks\n"
    "every key tile against the attention reference bit for bit, and lists the rounding events\n"
    "with the largest errors and the keys where P-bar = 1 (tied row maxima).\n"
    "  --layer L     layer (0-based, required)      --head H     query head (required)\n"
    "  --row T       query row (required)           --feature I  feature of V and O (required)\n"
    "  --step S      step (default: the first step of the dump)\n"
    "  --batch B     batch row (default 0)\n"
    "  --policy P    precision policy (default: the dump's own 'policy' attribute, else bf16-fa2)\n"
    "  --top K       rounding events listed (default 10, 1..1000)\n"
    "  --json        machine-readable output on stdout\n"
    "example: tilescope explain run.h5 --layer 1 --head 1 --row 8 --feature 4 --policy bf16-torch\n";

static const char *CMD = "explain";

/* The shortest decimal that reads back as the same double (like Python's repr). */
static const char *num(double x, char *buf, size_t n) {
    if (isnan(x)) return "nan";
    if (isinf(x)) return x < 0 ? "-inf" : "inf";
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    if (!strchr(buf, '.') && !strchr(buf, 'e') && !strchr(buf, 'n') && strlen(buf) + 2 < n) strcat(buf, ".0");
    return buf;
}

/* The trace of an addition, step by step; pos are A and B as typed. */
static void print_add(const tsc_explain_add_t *e, const char *const pos[2]) {
    const tsc_format_t acc = e->acc, to = e->to;
    const tsc_round_t mode = e->mode;
    const int have_to = e->have_to, p_to = have_to ? tsc_format_mant_bits(to) : -1;
    const double a = e->a, b = e->b, *in = e->input;
    const tsc_accum_step_t *add = &e->add, *rd = &e->round_to;
    char n1[40], n2[40], n3[40], n4[40], bits[160], bits2[160];
    printf("explain add: a + b in %s (%s)", tsc_format_name(acc), tsc_explain_round_name(mode));
    if (have_to) printf(", the sum then rounded to %s", tsc_format_name(to));
    printf("\n\n");
    const double vals[2] = {a, b};
    const int exps[2] = {add->a_exp, add->b_exp};
    for (int k = 0; k < 2; k++) {
        printf("  %c = %-22s %s", "ab"[k], num(vals[k], n1, sizeof n1),
               tsc_accum_bits_str(vals[k], acc, -1, bits, sizeof bits));
        if (exps[k] != TSC_ACCUM_EXP_ZERO) printf("   (exponent %d)", exps[k]);
        if (vals[k] != in[k]) printf("   [input %s rounded into %s]", pos[k], tsc_format_name(acc));
        printf("\n");
    }
    printf("\n1. addition in %s\n", tsc_format_name(acc));
    if (add->a_exp == TSC_ACCUM_EXP_ZERO || add->b_exp == TSC_ACCUM_EXP_ZERO)
        printf("  alignment:       none (an operand is zero)\n");
    else if (add->align_shift == 0)
        printf("  alignment:       equal exponents (%d): no shift\n", add->a_exp);
    else
        printf("  alignment:       exponents %d and %d: the smaller significand shifts right %d bit%s\n", add->a_exp,
               add->b_exp, add->align_shift, add->align_shift == 1 ? "" : "s");
    if (add->carry_shift > 0)
        printf("  overflow:        the significand sum overflowed: shifted right %d bit (exponent %d)\n",
               add->carry_shift, add->sum_exp);
    else if (add->carry_shift < 0)
        printf("  cancellation:    %d leading bit%s cancelled (exponent %d)\n", -add->carry_shift,
               add->carry_shift == -1 ? "" : "s", add->sum_exp);
    else
        printf("  overflow:        none\n");
    printf("  exact sum:       %s%s\n", num(add->exact_hi, n1, sizeof n1),
           add->exact_lo != 0 ? " (+ a tail below double precision)" : "");
    printf("  kept|r|sticky:   %s   (%d kept bits | rounding bit | %d sticky bit%s)\n",
           tsc_accum_step_bits_str(add, bits, sizeof bits), add->kept_nbits, add->sticky_nbits,
           add->sticky_nbits == 1 ? "" : "s");
    printf("  rounding:        %s\n", tsc_explain_why(add));
    printf("  %s sum:%*s %s   %s\n", tsc_format_name(acc), (int)(11 - strlen(tsc_format_name(acc))), "",
           num(add->result, n1, sizeof n1), tsc_accum_bits_str(add->result, acc, -1, bits2, sizeof bits2));
    printf("  error:           %s (%s ULP of %s)\n", num(add->error, n2, sizeof n2), num(add->error_ulps, n3, sizeof n3),
           tsc_format_name(acc));
    if (have_to) {
        printf("\n2. rounding the %s sum to %s\n", tsc_format_name(acc), tsc_format_name(to));
        if (p_to < tsc_format_mant_bits(acc) && rd->sum_exp >= -126)
            printf("  %s sum bits:   %s   (%s keeps %d mantissa bit%s | rounding bit | sticky bits)\n",
                   tsc_format_name(acc), tsc_accum_bits_str(add->result, acc, p_to, bits, sizeof bits),
                   tsc_format_name(to), p_to, p_to == 1 ? "" : "s");
        printf("  kept|r|sticky:   %s   (%d kept bits | rounding bit | %d sticky bit%s)\n",
               tsc_accum_step_bits_str(rd, bits, sizeof bits), rd->kept_nbits, rd->sticky_nbits,
               rd->sticky_nbits == 1 ? "" : "s");
        printf("  rounding:        %s\n", tsc_explain_why(rd));
        printf("  direction:       %s\n", tsc_accum_dir_str(rd->dir));
        printf("  %s result:%*s %s   %s\n", tsc_format_name(to), (int)(8 - strlen(tsc_format_name(to))), "",
               num(rd->result, n1, sizeof n1), tsc_accum_bits_str(rd->result, to, -1, bits2, sizeof bits2));
        printf("  error:           %s (%s ULP of %s; exact sum %s)\n", num(rd->error, n2, sizeof n2),
               num(rd->error_ulps, n3, sizeof n3), tsc_format_name(to), num(add->exact_hi, n4, sizeof n4));
    }
}

/* The numbers A and B of `explain add`: every argument that does not start with "--" (a number
 * may be negative), at most two. */
typedef struct {
    const char **pos;
    int n;
} add_operands_t;

static int add_operand(const char *cmd, int argc, char **argv, int *i, void *ctx) {
    add_operands_t *p = ctx;
    const char *a = argv[*i];
    if (strncmp(a, "--", 2) == 0) return -1;
    if (p->n == 2) return tsc_cli_usage_error(cmd, "add takes two numbers, got a third: '%s'", a);
    p->pos[p->n++] = a;
    return 0;
}

/* --acc/--to/--round/--seed/--json and the two numbers of `explain add`: 0, or 2 after a usage error. */
static int parse_add(int argc, char **argv, tsc_explain_add_t *o, const char *pos[2], int *json) {
    const char *acc = NULL, *to = NULL, *round = NULL;
    long seed = 0;
    add_operands_t ops = {pos, 0};
    const tsc_cli_flag_t flags[] = {{"--acc", NULL, TSC_CLI_STR, &acc, 0, 0},
                                    {"--to", NULL, TSC_CLI_STR, &to, 0, 0},
                                    {"--round", NULL, TSC_CLI_STR, &round, 0, 0},
                                    {"--seed", NULL, TSC_CLI_LONG, &seed, 0, (double)LONG_MAX},
                                    {"--json", NULL, TSC_CLI_ON, json, 0, 0}};
    int rc = tsc_cli_args(CMD, argc, argv, flags, TSC_CLI_NFLAGS(flags), add_operand, &ops, 0, NULL);
    if (rc) return rc;
    o->seed = (uint64_t)seed;
    if (acc && tsc_format_parse(acc, &o->acc) != TSC_OK) return tsc_cli_usage_error(CMD, "--acc: %s", tsc_error_last());
    if (to && strcmp(to, "none") == 0) o->have_to = 0;
    else if (to && tsc_format_parse(to, &o->to) != TSC_OK) return tsc_cli_usage_error(CMD, "--to: %s", tsc_error_last());
    if (!round || strcmp(round, "nearest-even") == 0 || strcmp(round, "rne") == 0) o->mode = TSC_ROUND_NEAREST_EVEN;
    else if (strcmp(round, "toward-zero") == 0 || strcmp(round, "rtz") == 0) o->mode = TSC_ROUND_TOWARD_ZERO;
    else if (strcmp(round, "stochastic") == 0 || strcmp(round, "sr") == 0) o->mode = TSC_ROUND_STOCHASTIC;
    else return tsc_cli_usage_error(CMD, "--round expects nearest-even, toward-zero or stochastic, got '%s'", round);
    if (ops.n != 2) return tsc_cli_usage_error(CMD, "add needs two numbers A and B");
    for (int k = 0; k < 2; k++) {
        rc = tsc_cli_parse_double(CMD, k ? "B" : "A", pos[k], -DBL_MAX, DBL_MAX, &o->input[k]);
        if (rc) return rc;
    }
    return 0;
}

/* Prints the finished JSON document j on stdout: 0, or 1 when it could not be built. */
static int print_json(tsc_json_t *j) {
    int rc = 0;
    if (tsc_json_status(j) == TSC_OK) puts(tsc_json_text(j, NULL));
    else rc = tsc_cli_fail(CMD, "%s", tsc_error_last());
    tsc_json_free(j);
    return rc;
}

static int explain_add(int argc, char **argv) {
    tsc_explain_add_t o;
    memset(&o, 0, sizeof o);
    o.acc = TSC_FMT_FP32;
    o.to = TSC_FMT_BF16;
    o.have_to = 1;
    o.mode = TSC_ROUND_NEAREST_EVEN;
    const char *pos[2] = {NULL, NULL};
    int json = 0;
    int rc = parse_add(argc, argv, &o, pos, &json);
    if (rc) return rc;
    tsc_explain_add_t e;
    if (tsc_explain_add(o.input[0], o.input[1], o.acc, o.have_to, o.to, o.mode, o.seed, &e) != TSC_OK)
        return tsc_cli_fail(CMD, "an operand overflows %s: A=%s B=%s", tsc_format_name(o.acc), pos[0], pos[1]);
    if (json) {
        tsc_json_t j;
        tsc_json_init(&j);
        tsc_explain_add_json(&e, &j);
        return print_json(&j);
    }
    print_add(&e, pos);
    return 0;
}

/* ------------------------------------------------------------------ explain DUMP */

/* The explanation of an accumulation: the chain's summary, then the largest events. */
static void print_dump(const tsc_explain_dump_t *e) {
    char n1[40], n2[40], n3[40], n4[40], n5[40], bits[200];
    printf("explain %s: step %lld, layer %d, head %d (kv head %d), batch %d: O-bar[%d, %d] = "
           "sum_j P-bar[%d, j] V[j, %d]\n", e->dump_path, e->step, e->layer, e->head, e->kv_head, e->batch, e->row,
           e->feature, e->row, e->feature);
    printf("policy: %s (%s; P-bar for P-bar V in %s, tile P-bar V in %s, O-bar in %s, accumulator %s)\n",
           e->policy_name, e->policy.fused ? "fused: each product goes straight into O-bar" : "unfused: per-tile sums",
           tsc_format_name(e->policy.fmt[TSC_STAGE_PBAR_PV]), tsc_format_name(e->policy.fmt[TSC_STAGE_PV]),
           tsc_format_name(e->policy.fmt[TSC_STAGE_OACC]), tsc_format_name(e->policy.fmt[TSC_STAGE_ACC]));
    if (e->note[0]) printf("note: %s\n", e->note);
    if (e->stochastic) printf("note: stochastic stages are replayed with nearest-even (their random streams are not)\n");
    if (e->stochastic)
        printf("replay: %s the attention reference's stochastic run (informational only)\n",
               e->mismatch_tile < 0 && e->o_match ? "happens to equal" : "differs from");
    else if (e->mismatch_tile < 0)
        printf("replay: bit-identical to the attention reference after each of %d key tiles\n", e->tiles);
    else
        printf("replay: DIFFERS from the attention reference at key tile %d: model %s, reference %s\n",
               e->mismatch_tile, num(e->mismatch_model, n1, sizeof n1), num(e->mismatch_ref, n2, sizeof n2));
    printf("result: O-bar = %s, l = %s, O = %s (reference %s%s%s%s)\n", num(e->obar, n1, sizeof n1),
           num(e->l, n2, sizeof n2), num(e->o, n3, sizeof n3), num(e->o_ref, n4, sizeof n4),
           e->o_match ? ", equal" : ", DIFFERENT", e->have_o ? "; the dump's o " : "",
           e->have_o ? num(e->o_dump, n5, sizeof n5) : "");
    printf("keys with P-bar = 1 (tied row maxima): ");
    if (!e->n_ones) printf("none");
    for (int j = 0; j < e->n_ones && j < 64; j++) printf("%s%d", j ? ", " : "", e->ones[j]);
    printf(e->n_ones > 64 ? ", ... (%d keys)\n" : " (%d key%s)\n", e->n_ones, e->n_ones == 1 ? "" : "s");
    printf("rounding events: %zu, %zu inexact (%zu up, %zu down in magnitude); signed error sum %s, "
           "of which at P-bar = 1 keys %s\n", e->n_events, e->n_inexact, e->n_up, e->n_down,
           num(e->error_sum, n1, sizeof n1), num(e->error_sum_ones, n2, sizeof n2));
    printf("\nlargest rounding errors (top %zu by size):\n", e->n_top);
    printf("  %5s %4s %-7s %-12s %-11s %-13s %-13s %-5s %-11s %-7s %s\n", "key", "tile", "event", "P-bar", "v",
           "before", "result", "fmt", "error", "ULPs", "kept|r|sticky");
    for (size_t k = 0; k < e->n_top; k++) {
        const tsc_explain_event_t *ev = &e->events[k];
        char kb[16] = "-", pb[24] = "-", vb[24] = "-";
        if (ev->key >= 0) snprintf(kb, sizeof kb, "%d", ev->key);
        if (!isnan(ev->pbar)) snprintf(pb, sizeof pb, "%.6g", ev->pbar);
        if (!isnan(ev->v)) snprintf(vb, sizeof vb, "%.9g", ev->v);
        printf("  %5s %4d %-7s %-12s %-11s %-13.9g %-13.9g %-5s %-11.4e %-7.4f %s\n", kb, ev->tile, ev->kind, pb, vb,
               ev->st.a, ev->st.result, tsc_format_name(ev->st.fmt), ev->st.error, ev->st.error_ulps,
               tsc_accum_step_bits_str(&ev->st, bits, 48));
    }
    printf("  (all values exact in --json; the table rounds them to 9 digits)\n");
    printf("\n(event kinds: acc/fma = one product added in the accumulator format; pv = rounding to the P-bar V\n"
           " stage; rescale = O-bar times exp(m_old - m_new); oacc = adding a tile's P-bar V to O-bar; o = O-bar/l)\n");
}

/* The flags of `explain DUMP` (argv[0]): 0, or 2 after a usage error. */
static int parse_dump(int argc, char **argv, tsc_explain_dump_opts_t *o, const char **pol_str, int *json) {
    *o = (tsc_explain_dump_opts_t){.dump_path = argv[0], .step = -1, .layer = -1, .head = -1, .row = -1,
                                   .feature = -1, .batch = 0, .top = 10};
    const tsc_cli_flag_t flags[] = {{"--step", NULL, TSC_CLI_LLONG, &o->step, 0, (double)LONG_MAX},
                                    {"--layer", NULL, TSC_CLI_INT, &o->layer, 0, INT_MAX},
                                    {"--head", NULL, TSC_CLI_INT, &o->head, 0, INT_MAX},
                                    {"--row", NULL, TSC_CLI_INT, &o->row, 0, INT_MAX},
                                    {"--feature", NULL, TSC_CLI_INT, &o->feature, 0, INT_MAX},
                                    {"--batch", NULL, TSC_CLI_INT, &o->batch, 0, INT_MAX},
                                    {"--top", NULL, TSC_CLI_INT, &o->top, 1, 1000},
                                    {"--policy", NULL, TSC_CLI_STR, pol_str, 0, 0},
                                    {"--json", NULL, TSC_CLI_ON, json, 0, 0}};
    int rc = tsc_cli_args(CMD, argc - 1, argv + 1, flags, TSC_CLI_NFLAGS(flags), NULL, NULL, 0, &o->dump_path);
    if (rc) return rc;
    if (o->layer < 0 || o->head < 0 || o->row < 0 || o->feature < 0)
        return tsc_cli_usage_error(CMD, "a dump needs --layer, --head, --row and --feature");
    return 0;
}

static int explain_dump(int argc, char **argv) {
    tsc_explain_dump_opts_t o;
    memset(&o, 0, sizeof o);
    const char *pol_str = NULL;
    int json = 0;
    int rc = parse_dump(argc, argv, &o, &pol_str, &json);
    if (rc) return rc;
    tsc_policy_t pol;
    if (pol_str && tsc_policy_parse(pol_str, &pol) != TSC_OK)
        return tsc_cli_usage_error(CMD, "--policy: %s", tsc_error_last());
    o.policy = pol_str ? &pol : NULL;
    tsc_explain_dump_t *e;
    if (tsc_explain_dump(&o, &e) != TSC_OK) return tsc_cli_fail(CMD, "%s", tsc_error_last());
    if (json) {
        tsc_json_t j;
        tsc_json_init(&j);
        tsc_explain_dump_json(e, &j);
        rc = print_json(&j);
    } else {
        print_dump(e);
    }
    /* A deterministic policy must replay bit for bit; a stochastic one cannot (streams differ). */
    if (!rc && !(e->stochastic || (e->mismatch_tile < 0 && e->o_match))) {
        rc = 1;
        fprintf(stderr, "tilescope explain: %s: the replay of O-bar[%d, %d] differs from the attention reference\n",
                e->dump_path, e->row, e->feature);
    }
    tsc_explain_dump_free(e);
    return rc;
}

int tsc_cmd_explain(int argc, char **argv) {
    if (argc < 1) return tsc_cli_usage_error(CMD, "missing 'add' or a dump file");
    if (strcmp(argv[0], "add") == 0) return explain_add(argc - 1, argv + 1);
    if (strncmp(argv[0], "--", 2) == 0) return tsc_cli_usage_error(CMD, "expected 'add' or a dump file before the options");
    return explain_dump(argc, argv);
}
