/* cmd_explain.c: `tilescope explain`: the bit-level trace of a rounding event.
 *
 *   tilescope explain add A B [--acc FMT] [--to FMT] [--round MODE] [--seed N] [--json]
 *
 * adds A and B in the accumulator format and rounds the sum to the output format, printing
 * each step the way PAPER.md §5 tells the story: operand bits, exponent alignment, significand
 * overflow, kept bits | rounding bit | sticky bits, direction and exact signed error.
 *
 *   tilescope explain DUMP --layer L --head H --row T --feature I [--step S] [--policy P] ...
 *
 * replays the accumulation of Ō[T, I] = Σ_j P̄[T, j] V[j, I] of one head under a policy with
 * the accumulation model, checks it against the attention reference (kernels/tsc_attention.h)
 * tile by tile, bit for bit, and lists the largest rounding events and the keys where P̄ = 1. */
#include "cli.h"

#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tsc_accum.h"
#include "tsc_attention.h"
#include "tsc_dump.h"
#include "tsc_formats.h"
#include "tsc_policy.h"

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
    "FMT: fp64, fp32, tf32, bf16, fp16, fp8-e4m3, fp8-e5m2.\n"
    "example (PAPER.md §5): tilescope explain add -2.4071154594421387 -2.296875\n"
    "\n"
    "The DUMP form replays the accumulation of O-bar[T, I] = sum_j P-bar[T, j] V[j, I] (the\n"
    "unnormalised output, PAPER.md §3) of one head under a policy, addition by addition, checks\n"
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

/* JSON number: non-finite values become null. */
static const char *jnum(double x, char *buf, size_t n) {
    if (!isfinite(x)) return "null";
    return num(x, buf, n);
}

/* s as the body of a JSON string (quotes, backslashes and control characters escaped). */
static void json_puts(const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
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
    else if (add.align_shift == 0)
        printf("  alignment:       equal exponents (%d): no shift\n", add.a_exp);
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

/* ------------------------------------------------------------------ explain DUMP */

typedef struct {
    int key, tile;          /* key index (-1 for per-tile events), key tile */
    const char *kind;       /* "fma", "pv", "acc", "rescale", "oacc", "o" */
    double pbar, v;         /* the product's factors (fma / acc events) */
    tsc_accum_step_t st;
} event_t;

typedef struct {
    event_t *ev;
    size_t n, cap;
    int oom;
} events_t;

static event_t *ev_push(events_t *E, int key, int tile, const char *kind, double pbar, double v) {
    if (E->n == E->cap) {
        size_t cap = E->cap ? 2 * E->cap : 256;
        event_t *p = realloc(E->ev, cap * sizeof *p);
        if (!p) {
            E->oom = 1;
            return NULL;
        }
        E->ev = p;
        E->cap = cap;
    }
    event_t *e = &E->ev[E->n++];
    e->key = key;
    e->tile = tile;
    e->kind = kind;
    e->pbar = pbar;
    e->v = v;
    return e;
}

typedef struct {
    const tsc_policy_t *pol;
    int f64;                /* compute type FP64 (the policy has an FP64 stage) */
    events_t E;
} replay_t;

/* x rounded into stage s's format and mode; stochastic stages round to nearest here (their
 * streams are not replayed), which the report says. Recorded as an event of kind. */
static double stage_round(replay_t *R, double x, tsc_stage_t s, int key, int tile, const char *kind) {
    tsc_round_t mode = R->pol->mode[s] == TSC_ROUND_STOCHASTIC ? TSC_ROUND_NEAREST_EVEN : R->pol->mode[s];
    event_t *e = ev_push(&R->E, key, tile, kind, NAN, NAN);
    return tsc_accum_round(x, R->pol->fmt[s], mode, NULL, e ? &e->st : NULL);
}

/* The compute type's rounding of an exact product or sum (FP32, or FP64 when f64). */
static double compute_round(replay_t *R, double x) { return R->f64 ? x : (double)(float)x; }

/* fma(a, v, y) rounded once into the ACC format: a·v is exact in double for factors of at most
 * 26 significant bits (every format but fp64), so the model adds it exactly. */
static double fma_acc(replay_t *R, double y, double a, double v, int key, int tile, const char *kind) {
    tsc_stage_t s = TSC_STAGE_ACC;
    tsc_round_t mode = R->pol->mode[s] == TSC_ROUND_STOCHASTIC ? TSC_ROUND_NEAREST_EVEN : R->pol->mode[s];
    event_t *e = ev_push(&R->E, key, tile, kind, a, v);
    if (R->f64) { /* the reference's fma in double; the trace is of the rounded product */
        double r = fma(a, v, y);
        if (e) tsc_accum_add2(y, a * v, R->pol->fmt[s], mode, NULL, &e->st);
        return r;
    }
    return tsc_accum_add2(y, a * v, R->pol->fmt[s], mode, NULL, e ? &e->st : NULL);
}

static int cmp_err(const void *x, const void *y) {
    const event_t *a = x, *b = y;
    double ea = isnan(a->st.error) ? -1 : fabs(a->st.error), eb = isnan(b->st.error) ? -1 : fabs(b->st.error);
    if (ea != eb) return ea < eb ? 1 : -1;
    return a->key < b->key ? -1 : a->key > b->key;
}

static int explain_dump(int argc, char **argv) {
    const char *path = argv[0];
    long step = -1, layer = -1, head = -1, row = -1, feat = -1, batch = 0, top = 10;
    const char *pol_str = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long *dst = NULL;
        long lo = 0, hi = LONG_MAX;
        if (strcmp(a, "--step") == 0) dst = &step;
        else if (strcmp(a, "--layer") == 0) dst = &layer;
        else if (strcmp(a, "--head") == 0) dst = &head;
        else if (strcmp(a, "--row") == 0) dst = &row;
        else if (strcmp(a, "--feature") == 0) dst = &feat;
        else if (strcmp(a, "--batch") == 0) dst = &batch;
        else if (strcmp(a, "--top") == 0) { dst = &top; lo = 1; hi = 1000; }
        if (dst) {
            const char *v = tsc_cli_value(CMD, argc, argv, &i);
            if (!v) return 2;
            int rc = tsc_cli_parse_long(CMD, a, v, lo, hi, dst);
            if (rc) return rc;
        } else if (strcmp(a, "--policy") == 0) {
            if (!(pol_str = tsc_cli_value(CMD, argc, argv, &i))) return 2;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else {
            return tsc_cli_usage_error(CMD, "unknown option '%s'", a);
        }
    }
    if (layer < 0 || head < 0 || row < 0 || feat < 0)
        return tsc_cli_usage_error(CMD, "a dump needs --layer, --head, --row and --feature");
    tsc_policy_t pol;
    if (pol_str && tsc_policy_parse(pol_str, &pol) != TSC_OK)
        return tsc_cli_usage_error(CMD, "--policy: %s", tsc_error_last());

    tsc_dump_t *d = NULL;
    if (tsc_dump_open(&d, path) != TSC_OK) return tsc_cli_fail(CMD, "%s", tsc_error_last());
    const tsc_dump_meta_t *m = tsc_dump_meta(d);
    int rc = 1;
    float *q = NULL, *k = NULL, *v = NULL, *o_dump = NULL;
    double *q64 = NULL, *k64 = NULL, *v64 = NULL, *o = NULL;
    tsc_attn_trace_t tr;
    memset(&tr, 0, sizeof tr);
    replay_t R;
    memset(&R, 0, sizeof R);
    char pol_name[TSC_POLICY_STR_MAX], note[300] = "";
    const int T = m->seq_len, D = m->head_dim;
    if (!pol_str) {
        if (tsc_policy_parse(m->policy, &pol) != TSC_OK) {
            tsc_policy_preset(TSC_PRESET_BF16_FA2, &pol);
            snprintf(note, sizeof note, "the dump's policy '%.128s' is not a policy string: using bf16-fa2", m->policy);
        }
    }
    tsc_policy_format(&pol, pol_name, sizeof pol_name);
    if (step < 0) {
        if (tsc_dump_n_steps(d) < 1) {
            tsc_cli_fail(CMD, "%s: no complete step in the dump", path);
            goto done;
        }
        step = (long)tsc_dump_step_at(d, 0);
    }
    if (!tsc_dump_has_step(d, step)) {
        tsc_cli_fail(CMD, "%s: no step %ld in the dump (tilescope info %s lists them)", path, step, path);
        goto done;
    }
    if (layer >= m->n_layer || head >= m->n_head || row >= T || feat >= D || batch >= m->batch) {
        tsc_cli_fail(CMD, "%s: out of range: layer %ld of %d, head %ld of %d, row %ld of %d, feature %ld of %d, "
                     "batch %ld of %d", path, layer, m->n_layer, head, m->n_head, row, T, feat, D, batch, m->batch);
        goto done;
    }
    const int kvh = (int)head / (m->n_head / m->n_kv_head);
    size_t td = (size_t)T * D;
    q = malloc(td * sizeof *q);
    k = malloc(td * sizeof *k);
    v = malloc(td * sizeof *v);
    o = malloc(td * sizeof *o);
    o_dump = malloc(td * sizeof *o_dump);
    q64 = malloc(td * sizeof *q64);
    k64 = malloc(td * sizeof *k64);
    v64 = malloc(td * sizeof *v64);
    if (!q || !k || !v || !o || !o_dump || !q64 || !k64 || !v64) {
        tsc_cli_fail(CMD, "out of memory for one head (T=%d, D=%d)", T, D);
        goto done;
    }
    if (tsc_dump_read(d, step, (int)layer, "q", (int)batch, (int)head, q) != TSC_OK ||
        tsc_dump_read(d, step, (int)layer, "k", (int)batch, kvh, k) != TSC_OK ||
        tsc_dump_read(d, step, (int)layer, "v", (int)batch, kvh, v) != TSC_OK) {
        tsc_cli_fail(CMD, "%s", tsc_error_last());
        goto done;
    }
    int have_o = tsc_dump_has_dataset(d, step, (int)layer, "o") &&
                 tsc_dump_read(d, step, (int)layer, "o", (int)batch, (int)head, o_dump) == TSC_OK;

    /* The reference on this one head, with its forward intermediates. */
    if (tsc_attn_trace_init(&tr, T, D, pol.block_k, TSC_TRACE_SCORES | TSC_TRACE_TILES | TSC_TRACE_PV) != TSC_OK) {
        tsc_cli_fail(CMD, "%s", tsc_error_last());
        goto done;
    }
    tr.b = 0;
    tr.h = 0;
    tsc_attn_dims_t dims = {.B = 1, .H = 1, .Hkv = 1, .T = T, .D = D, .causal = m->causal,
                            .scale = m->softmax_scale};
    /* Double I/O: outputs are then the exact stage values even under FP64 policies. */
    for (size_t x = 0; x < td; x++) {
        q64[x] = q[x];
        k64[x] = k[x];
        v64[x] = v[x];
    }
    tsc_attn_io_t io = {.dtype = TSC_ATTN_F64, .q = q64, .k = k64, .v = v64, .o = o};
    if (tsc_attn_run(&pol, &dims, &io, &tr, 1) != TSC_OK) {
        tsc_cli_fail(CMD, "%s: attention under %s: %s", path, pol_name, tsc_error_last());
        goto done;
    }

    /* The replay of row t, feature i, following tsc_attention.h's forward formulas. */
    R.pol = &pol;
    R.f64 = tsc_policy_uses_fp64(&pol);
    const int t = (int)row, fi = (int)feat, nkt = tr.n_kt, bk = tr.block_k;
    double oacc = 0, m_old = -INFINITY, l_last = NAN;
    int tiles = 0, mismatch_tile = -1, n_ones = 0;
    double mismatch_model = 0, mismatch_ref = 0;
    for (int kt = 0; kt < nkt; kt++) {
        size_t ti = (size_t)t * nkt + kt;
        double mn = tr.run_max[ti];
        if (isnan(mn)) continue; /* a tile this row never visits */
        tiles++;
        double c = 0;
        if (m_old != -INFINITY) {
            double arg = stage_round(&R, compute_round(&R, m_old - mn), TSC_STAGE_EXPARG, -1, kt, "exparg");
            R.E.n--; /* the exponent argument is not part of Ō's chain: not listed */
            c = R.f64 ? exp(arg) : (double)tsc_attn_expf((float)arg);
        }
        int j0 = kt * bk, j1 = j0 + bk < T ? j0 + bk : T;
        if (m->causal && j1 > t + 1) j1 = t + 1;
        double scaled = stage_round(&R, compute_round(&R, c * oacc), TSC_STAGE_OACC, -1, kt, "rescale");
        if (pol.fused) {
            oacc = scaled;
            for (int j = j0; j < j1; j++) {
                double a = tr.pbar[(size_t)t * T + j];
                double vv = tsc_round(v[(size_t)j * D + fi], pol.fmt[TSC_STAGE_V], TSC_ROUND_NEAREST_EVEN, NULL);
                n_ones += a == 1.0;
                oacc = fma_acc(&R, oacc, a, vv, j, kt, "fma");
                oacc = stage_round(&R, oacc, TSC_STAGE_PV, j, kt, "pv");
            }
        } else {
            double pv = 0;
            for (int j = j0; j < j1; j++) {
                double a = tr.pbar[(size_t)t * T + j];
                double vv = tsc_round(v[(size_t)j * D + fi], pol.fmt[TSC_STAGE_V], TSC_ROUND_NEAREST_EVEN, NULL);
                n_ones += a == 1.0;
                pv = fma_acc(&R, pv, a, vv, j, kt, "acc");
            }
            pv = stage_round(&R, pv, TSC_STAGE_PV, -1, kt, "pv");
            event_t *e = ev_push(&R.E, -1, kt, "oacc", NAN, NAN);
            double sum = R.f64 ? scaled + pv
                               : tsc_accum_add2(scaled, pv, TSC_FMT_FP32, TSC_ROUND_NEAREST_EVEN, NULL,
                                                e ? &e->st : NULL);
            oacc = stage_round(&R, sum, TSC_STAGE_OACC, -1, kt, "oacc");
        }
        double ref = tr.oacc[ti * D + fi];
        if (mismatch_tile < 0 && !(oacc == ref || (isnan(oacc) && isnan(ref)))) {
            mismatch_tile = kt;
            mismatch_model = oacc;
            mismatch_ref = ref;
        }
        m_old = mn;
        l_last = tr.l[ti];
    }
    if (R.E.oom) {
        tsc_cli_fail(CMD, "out of memory recording rounding events");
        goto done;
    }
    double o_model = stage_round(&R, compute_round(&R, oacc / l_last), TSC_STAGE_O, -1, -1, "o");
    double o_ref = o[(size_t)t * D + fi];
    int o_match = o_model == o_ref || (isnan(o_model) && isnan(o_ref));
    int sr = 0;
    for (int s = 0; s < TSC_STAGE_COUNT; s++) sr |= pol.mode[s] == TSC_ROUND_STOCHASTIC;

    /* Statistics over the chain, then the top events by |error|. */
    size_t n_inexact = 0, n_up = 0, n_down = 0;
    double err_sum = 0, err_ones = 0;
    for (size_t e = 0; e < R.E.n; e++) {
        const tsc_accum_step_t *st = &R.E.ev[e].st;
        if (st->dir == TSC_ACCUM_EXACT || isnan(st->error)) continue;
        n_inexact++;
        n_up += st->dir == TSC_ACCUM_AWAY;
        n_down += st->dir == TSC_ACCUM_TOWARD;
        if (strcmp(R.E.ev[e].kind, "o") != 0) err_sum += st->error;
        if (R.E.ev[e].pbar == 1.0) err_ones += st->error;
    }
    int *ones = malloc(sizeof(int) * (size_t)(n_ones ? n_ones : 1));
    if (!ones) {
        tsc_cli_fail(CMD, "out of memory");
        goto done;
    }
    int no = 0;
    for (int j = 0; j < T; j++)
        if ((!m->causal || j <= t) && tr.pbar[(size_t)t * T + j] == 1.0) ones[no++] = j;
    qsort(R.E.ev, R.E.n, sizeof *R.E.ev, cmp_err);
    size_t ntop = 0; /* inexact events only: exact ones have nothing to explain */
    while (ntop < R.E.n && ntop < (size_t)top && R.E.ev[ntop].st.dir != TSC_ACCUM_EXACT) ntop++;
    char n1[40], n2[40], n3[40], n4[40], n5[40], n6[40], n7[40], bits[200];

    if (json) {
        printf("{\n  \"command\": \"explain dump\", \"dump\": \"");
        json_puts(path);
        printf("\", \"step\": %ld, \"layer\": %ld, \"head\": %ld, \"kv_head\": %d, \"batch\": %ld, \"row\": %ld, "
               "\"feature\": %ld,\n", step, layer, head, kvh, batch, row, feat);
        printf("  \"policy\": \"%s\", \"fused\": %s, \"stochastic_replayed_as_nearest\": %s, \"tiles\": %d,\n",
               pol_name, pol.fused ? "true" : "false", sr ? "true" : "false", tiles);
        printf("  \"replay_matches_reference\": %s, \"mismatch_tile\": %d, \"o_matches_reference\": %s,\n",
               mismatch_tile < 0 ? "true" : "false", mismatch_tile, o_match ? "true" : "false");
        printf("  \"obar\": %s, \"l\": %s, \"o\": %s, \"o_reference\": %s, \"o_dump\": %s,\n",
               jnum(oacc, n1, sizeof n1), jnum(l_last, n2, sizeof n2), jnum(o_model, n3, sizeof n3),
               jnum(o_ref, n4, sizeof n4), have_o ? jnum(o_dump[(size_t)t * D + fi], n5, sizeof n5) : "null");
        printf("  \"pbar_one_keys\": [");
        for (int j = 0; j < no; j++) printf("%s%d", j ? ", " : "", ones[j]);
        printf("],\n  \"events\": %zu, \"inexact\": %zu, \"up\": %zu, \"down\": %zu, \"error_sum\": %s, "
               "\"error_sum_at_pbar_one\": %s,\n  \"top\": [\n", R.E.n, n_inexact, n_up, n_down,
               jnum(err_sum, n1, sizeof n1), jnum(err_ones, n2, sizeof n2));
        for (size_t e = 0; e < ntop; e++) {
            const event_t *ev = &R.E.ev[e];
            printf("    {\"key\": %d, \"tile\": %d, \"kind\": \"%s\", \"pbar\": %s, \"v\": %s, \"before\": %s, "
                   "\"exact\": %s, \"result\": %s, \"format\": \"%s\", \"error\": %s, \"error_ulps\": %s, "
                   "\"carry_shift\": %d, \"bits\": \"%s\", \"direction\": \"%s\"}%s\n", ev->key, ev->tile, ev->kind,
                   jnum(ev->pbar, n1, sizeof n1), jnum(ev->v, n2, sizeof n2), jnum(ev->st.a, n3, sizeof n3),
                   jnum(ev->st.exact_hi, n4, sizeof n4), jnum(ev->st.result, n5, sizeof n5),
                   tsc_format_name(ev->st.fmt), jnum(ev->st.error, n6, sizeof n6),
                   jnum(ev->st.error_ulps, n7, sizeof n7), ev->st.carry_shift,
                   tsc_accum_step_bits_str(&ev->st, bits, sizeof bits), dir_key(ev->st.dir),
                   e + 1 < ntop ? "," : "");
        }
        printf("  ]\n}\n");
    } else {
        printf("explain %s: step %ld, layer %ld, head %ld (kv head %d), batch %ld: O-bar[%ld, %ld] = "
               "sum_j P-bar[%ld, j] V[j, %ld]\n", path, step, layer, head, kvh, batch, row, feat, row, feat);
        printf("policy: %s (%s; P-bar for P-bar V in %s, tile P-bar V in %s, O-bar in %s, accumulator %s)\n",
               pol_name, pol.fused ? "fused: each product goes straight into O-bar" : "unfused: per-tile sums",
               tsc_format_name(pol.fmt[TSC_STAGE_PBAR_PV]), tsc_format_name(pol.fmt[TSC_STAGE_PV]),
               tsc_format_name(pol.fmt[TSC_STAGE_OACC]), tsc_format_name(pol.fmt[TSC_STAGE_ACC]));
        if (note[0]) printf("note: %s\n", note);
        if (sr) printf("note: stochastic stages are replayed with nearest-even (their random streams are not)\n");
        if (sr)
            printf("replay: %s the attention reference's stochastic run (informational only)\n",
                   mismatch_tile < 0 && o_match ? "happens to equal" : "differs from");
        else if (mismatch_tile < 0)
            printf("replay: bit-identical to the attention reference after each of %d key tiles\n", tiles);
        else
            printf("replay: DIFFERS from the attention reference at key tile %d: model %s, reference %s\n",
                   mismatch_tile, num(mismatch_model, n1, sizeof n1), num(mismatch_ref, n2, sizeof n2));
        printf("result: O-bar = %s, l = %s, O = %s (reference %s%s%s%s)\n", num(oacc, n1, sizeof n1),
               num(l_last, n2, sizeof n2), num(o_model, n3, sizeof n3), num(o_ref, n4, sizeof n4),
               o_match ? ", equal" : ", DIFFERENT", have_o ? "; the dump's o " : "",
               have_o ? num(o_dump[(size_t)t * D + fi], n5, sizeof n5) : "");
        printf("keys with P-bar = 1 (tied row maxima): ");
        if (!no) printf("none");
        for (int j = 0; j < no && j < 64; j++) printf("%s%d", j ? ", " : "", ones[j]);
        printf(no > 64 ? ", ... (%d keys)\n" : " (%d key%s)\n", no, no == 1 ? "" : "s");
        printf("rounding events: %zu, %zu inexact (%zu up, %zu down in magnitude); signed error sum %s, "
               "of which at P-bar = 1 keys %s\n", R.E.n, n_inexact, n_up, n_down, num(err_sum, n1, sizeof n1),
               num(err_ones, n2, sizeof n2));
        printf("\nlargest rounding errors (top %zu by size):\n", ntop);
        printf("  %5s %4s %-7s %-12s %-11s %-13s %-13s %-5s %-11s %-7s %s\n", "key", "tile", "event", "P-bar", "v",
               "before", "result", "fmt", "error", "ULPs", "kept|r|sticky");
        for (size_t e = 0; e < ntop; e++) {
            const event_t *ev = &R.E.ev[e];
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
    free(ones);
    /* A deterministic policy must replay bit for bit; a stochastic one cannot (streams differ). */
    rc = sr || (mismatch_tile < 0 && o_match) ? 0 : 1;
    if (rc) fprintf(stderr, "tilescope explain: %s: the replay of O-bar[%ld, %ld] differs from the attention reference\n",
                    path, row, feat);
done:
    free(R.E.ev);
    tsc_attn_trace_free(&tr);
    free(q); free(k); free(v); free(o); free(o_dump); free(q64); free(k64); free(v64);
    tsc_dump_close(d);
    return rc;
}

int tsc_cmd_explain(int argc, char **argv) {
    if (argc < 1) return tsc_cli_usage_error(CMD, "missing 'add' or a dump file");
    if (strcmp(argv[0], "add") == 0) return explain_add(argc - 1, argv + 1);
    if (strncmp(argv[0], "--", 2) == 0) return tsc_cli_usage_error(CMD, "expected 'add' or a dump file before the options");
    return explain_dump(argc, argv);
}
