/* cmd_explain.c: `tilescope explain`: the bit-level trace of a rounding event.
 *
 *   tilescope explain add A B [--acc FMT] [--to FMT] [--round MODE] [--seed N] [--json]
 *
 * adds A and B in the accumulator format and rounds the sum to the output format, printing
 * each step the way PAPER.md §5 tells the story: operand bits, exponent alignment, significand
 * overflow, kept bits | rounding bit | sticky bits, direction and exact signed error. */
#include "cli.h"

#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tsc_accum.h"
#include "tsc_formats.h"

const char tsc_usage_explain[] =
    "usage: tilescope explain add A B [options]\n"
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
    "FMT: fp64, fp32, tf32, bf16, fp16, fp8-e4m3, fp8-e5m2.\n"
    "example (PAPER.md §5): tilescope explain add -2.4071154594421387 -2.296875\n";

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

/* JSON number: non-finite values become null. */
static const char *jnum(double x, char *buf, size_t n) {
    if (!isfinite(x)) return "null";
    return num(x, buf, n);
}

static const char *round_name(tsc_round_t m) {
    return m == TSC_ROUND_NEAREST_EVEN ? "nearest-even" : m == TSC_ROUND_TOWARD_ZERO ? "toward-zero" : "stochastic";
}

static const char *dir_key(tsc_accum_dir_t d) {
    return d == TSC_ACCUM_EXACT ? "exact" : d == TSC_ACCUM_AWAY ? "away" : "toward";
}

/* Why the rounding went the way it did, in words. */
static const char *why(const tsc_accum_step_t *st) {
    if (!st->round_bit && !st->sticky) return "nothing discarded: exact";
    if (st->mode == TSC_ROUND_TOWARD_ZERO) return "toward zero: discarded bits dropped";
    if (st->mode == TSC_ROUND_STOCHASTIC)
        return st->dir == TSC_ACCUM_AWAY ? "stochastic: the draw fell below the discarded fraction, rounded up"
                                         : "stochastic: the draw fell above the discarded fraction, truncated";
    if (!st->round_bit) return "rounding bit 0: less than half an ULP, truncated";
    if (st->sticky) return "rounding bit 1, sticky bits non-zero: more than half an ULP, rounded up in magnitude";
    return st->dir == TSC_ACCUM_AWAY ? "rounding bit 1, sticky bits zero: an exact tie, rounded to even (up)"
                                     : "rounding bit 1, sticky bits zero: an exact tie, rounded to even (down)";
}

static void print_step_json(const char *key, const tsc_accum_step_t *st, int last) {
    char b1[40], b2[40], b3[40], b4[40], bits[160], sb[160];
    int hex = (int)(tsc_format_size(st->fmt) * 2);
    printf("  \"%s\": {\"format\": \"%s\", \"round\": \"%s\", \"exact\": %s, \"exact_lo\": %s, \"sum_exp\": %d, "
           "\"ulp_exp\": %d,\n", key, tsc_format_name(st->fmt), round_name(st->mode), jnum(st->exact_hi, b1, sizeof b1),
           jnum(st->exact_lo, b2, sizeof b2), st->sum_exp == TSC_ACCUM_EXP_ZERO ? 0 : st->sum_exp, st->ulp_exp);
    tsc_accum_step_bits_str(st, bits, sizeof bits);
    snprintf(sb, sizeof sb, "%s", bits);
    char *bar = strchr(sb, '|');
    if (bar) *bar = '\0';
    printf("    \"bits\": \"%s\", \"kept_bits\": \"%s\", \"kept_nbits\": %d, \"round_bit\": %d, \"sticky\": %s, "
           "\"sticky_nbits\": %d,\n", bits, sb, st->kept_nbits, st->round_bit, st->sticky ? "true" : "false",
           st->sticky_nbits);
    printf("    \"result\": %s, \"result_bits\": \"0x%0*" PRIx64 "\", \"direction\": \"%s\", \"error\": %s, "
           "\"error_ulps\": %s}%s\n", jnum(st->result, b3, sizeof b3), hex, st->result_bits, dir_key(st->dir),
           jnum(st->error, b4, sizeof b4), jnum(st->error_ulps, b1, sizeof b1), last ? "" : ",");
}

static int explain_add(int argc, char **argv) {
    tsc_format_t acc = TSC_FMT_FP32, to = TSC_FMT_BF16;
    int have_to = 1, json = 0;
    tsc_round_t mode = TSC_ROUND_NEAREST_EVEN;
    long seed = 0;
    const char *pos[2] = {NULL, NULL};
    int npos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            if (npos == 2) return tsc_cli_usage_error(CMD, "add takes two numbers, got a third: '%s'", a);
            pos[npos++] = a;
        } else if (strcmp(a, "--acc") == 0 || strcmp(a, "--to") == 0) {
            const char *v = tsc_cli_value(CMD, argc, argv, &i);
            if (!v) return 2;
            if (strcmp(a, "--to") == 0 && strcmp(v, "none") == 0) {
                have_to = 0;
                continue;
            }
            tsc_format_t f;
            if (tsc_format_parse(v, &f) != TSC_OK) return tsc_cli_usage_error(CMD, "%s: %s", a, tsc_error_last());
            if (strcmp(a, "--acc") == 0) acc = f;
            else { to = f; have_to = 1; }
        } else if (strcmp(a, "--round") == 0) {
            const char *v = tsc_cli_value(CMD, argc, argv, &i);
            if (!v) return 2;
            if (strcmp(v, "nearest-even") == 0 || strcmp(v, "rne") == 0) mode = TSC_ROUND_NEAREST_EVEN;
            else if (strcmp(v, "toward-zero") == 0 || strcmp(v, "rtz") == 0) mode = TSC_ROUND_TOWARD_ZERO;
            else if (strcmp(v, "stochastic") == 0 || strcmp(v, "sr") == 0) mode = TSC_ROUND_STOCHASTIC;
            else return tsc_cli_usage_error(CMD, "--round expects nearest-even, toward-zero or stochastic, got '%s'", v);
        } else if (strcmp(a, "--seed") == 0) {
            const char *v = tsc_cli_value(CMD, argc, argv, &i);
            if (!v) return 2;
            int rc = tsc_cli_parse_long(CMD, "--seed", v, 0, LONG_MAX, &seed);
            if (rc) return rc;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else {
            return tsc_cli_usage_error(CMD, "unknown option '%s'", a);
        }
    }
    if (npos != 2) return tsc_cli_usage_error(CMD, "add needs two numbers A and B");
    double in[2];
    for (int k = 0; k < 2; k++) {
        int rc = tsc_cli_parse_double(CMD, k ? "B" : "A", pos[k], -DBL_MAX, DBL_MAX, &in[k]);
        if (rc) return rc;
    }
    tsc_rng_t rng;
    tsc_rng_seed(&rng, (uint64_t)seed);
    /* The operands enter the accumulator format first (nearest-even: they are inputs, not sums). */
    double a = tsc_round(in[0], acc, TSC_ROUND_NEAREST_EVEN, NULL);
    double b = tsc_round(in[1], acc, TSC_ROUND_NEAREST_EVEN, NULL);
    if (!isfinite(a) || !isfinite(b))
        return tsc_cli_fail(CMD, "an operand overflows %s: A=%s B=%s", tsc_format_name(acc), pos[0], pos[1]);
    tsc_accum_step_t add, rd;
    tsc_accum_add2(a, b, acc, mode, &rng, &add);
    if (have_to) tsc_accum_round(add.result, to, mode, &rng, &rd);

    char n1[40], n2[40], n3[40], n4[40], bits[160], bits2[160];
    int p_to = have_to ? tsc_format_mant_bits(to) : -1;
    if (json) {
        printf("{\n  \"command\": \"explain add\", \"acc\": \"%s\", \"to\": %s%s%s, \"round\": \"%s\", \"seed\": %ld,\n",
               tsc_format_name(acc), have_to ? "\"" : "", have_to ? tsc_format_name(to) : "null", have_to ? "\"" : "",
               round_name(mode), seed);
        printf("  \"a\": {\"input\": %s, \"value\": %s, \"bits\": \"%s\", \"exp\": %d},\n", jnum(in[0], n1, sizeof n1),
               jnum(a, n2, sizeof n2), tsc_accum_bits_str(a, acc, -1, bits, sizeof bits),
               add.a_exp == TSC_ACCUM_EXP_ZERO ? 0 : add.a_exp);
        printf("  \"b\": {\"input\": %s, \"value\": %s, \"bits\": \"%s\", \"exp\": %d},\n", jnum(in[1], n1, sizeof n1),
               jnum(b, n2, sizeof n2), tsc_accum_bits_str(b, acc, -1, bits, sizeof bits),
               add.b_exp == TSC_ACCUM_EXP_ZERO ? 0 : add.b_exp);
        printf("  \"align_shift\": %d, \"carry_shift\": %d, \"significand_overflow\": %s,\n", add.align_shift,
               add.carry_shift, add.carry_shift > 0 ? "true" : "false");
        printf("  \"sum_bits\": \"%s\",\n",
               tsc_accum_bits_str(add.result, acc, have_to && p_to < tsc_format_mant_bits(acc) ? p_to : -1, bits,
                                  sizeof bits));
        print_step_json("add", &add, !have_to);
        if (have_to) print_step_json("round_to", &rd, 1);
        printf("}\n");
        return 0;
    }

    printf("explain add: a + b in %s (%s)", tsc_format_name(acc), round_name(mode));
    if (have_to) printf(", the sum then rounded to %s", tsc_format_name(to));
    printf("\n\n");
    const double vals[2] = {a, b};
    const int exps[2] = {add.a_exp, add.b_exp};
    for (int k = 0; k < 2; k++) {
        printf("  %c = %-22s %s", "ab"[k], num(vals[k], n1, sizeof n1),
               tsc_accum_bits_str(vals[k], acc, -1, bits, sizeof bits));
        if (exps[k] != TSC_ACCUM_EXP_ZERO) printf("   (exponent %d)", exps[k]);
        if (vals[k] != in[k]) printf("   [input %s rounded into %s]", pos[k], tsc_format_name(acc));
        printf("\n");
    }
    printf("\n1. addition in %s\n", tsc_format_name(acc));
    if (add.a_exp == TSC_ACCUM_EXP_ZERO || add.b_exp == TSC_ACCUM_EXP_ZERO)
        printf("  alignment:       none (an operand is zero)\n");
    else
        printf("  alignment:       exponents %d and %d: the smaller significand shifts right %d bit%s\n", add.a_exp,
               add.b_exp, add.align_shift, add.align_shift == 1 ? "" : "s");
    if (add.carry_shift > 0)
        printf("  overflow:        the significand sum overflowed: shifted right %d bit (exponent %d)\n",
               add.carry_shift, add.sum_exp);
    else if (add.carry_shift < 0)
        printf("  cancellation:    %d leading bit%s cancelled (exponent %d)\n", -add.carry_shift,
               add.carry_shift == -1 ? "" : "s", add.sum_exp);
    else
        printf("  overflow:        none\n");
    printf("  exact sum:       %s%s\n", num(add.exact_hi, n1, sizeof n1),
           add.exact_lo != 0 ? " (+ a tail below double precision)" : "");
    printf("  kept|r|sticky:   %s   (%d kept bits | rounding bit | %d sticky bit%s)\n",
           tsc_accum_step_bits_str(&add, bits, sizeof bits), add.kept_nbits, add.sticky_nbits,
           add.sticky_nbits == 1 ? "" : "s");
    printf("  rounding:        %s\n", why(&add));
    printf("  %s sum:%*s %s   %s\n", tsc_format_name(acc), (int)(11 - strlen(tsc_format_name(acc))), "",
           num(add.result, n1, sizeof n1), tsc_accum_bits_str(add.result, acc, -1, bits2, sizeof bits2));
    printf("  error:           %s (%s ULP of %s)\n", num(add.error, n2, sizeof n2), num(add.error_ulps, n3, sizeof n3),
           tsc_format_name(acc));
    if (have_to) {
        printf("\n2. rounding the %s sum to %s\n", tsc_format_name(acc), tsc_format_name(to));
        if (p_to < tsc_format_mant_bits(acc) && rd.sum_exp >= -126)
            printf("  %s sum bits:   %s   (%s keeps %d mantissa bits | rounding bit | sticky bits)\n",
                   tsc_format_name(acc), tsc_accum_bits_str(add.result, acc, p_to, bits, sizeof bits),
                   tsc_format_name(to), p_to);
        printf("  kept|r|sticky:   %s   (%d kept bits | rounding bit | %d sticky bit%s)\n",
               tsc_accum_step_bits_str(&rd, bits, sizeof bits), rd.kept_nbits, rd.sticky_nbits,
               rd.sticky_nbits == 1 ? "" : "s");
        printf("  rounding:        %s\n", why(&rd));
        printf("  direction:       %s\n", tsc_accum_dir_str(rd.dir));
        printf("  %s result:%*s %s   %s\n", tsc_format_name(to), (int)(8 - strlen(tsc_format_name(to))), "",
               num(rd.result, n1, sizeof n1), tsc_accum_bits_str(rd.result, to, -1, bits2, sizeof bits2));
        printf("  error:           %s (%s ULP of %s; exact sum %s)\n", num(rd.error, n2, sizeof n2),
               num(rd.error_ulps, n3, sizeof n3), tsc_format_name(to), num(add.exact_hi, n4, sizeof n4));
    }
    return 0;
}

int tsc_cmd_explain(int argc, char **argv) {
    if (argc < 1) return tsc_cli_usage_error(CMD, "missing 'add' (or a dump file)");
    if (strcmp(argv[0], "add") == 0) return explain_add(argc - 1, argv + 1);
    return tsc_cli_usage_error(CMD, "unknown mode '%s' (expected 'add')", argv[0]);
}
