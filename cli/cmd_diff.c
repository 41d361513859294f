/* cmd_diff.c: `tilescope diff A B`: two dumps compared tensor by tensor (analyze/tsc_diff.h,
 * render/tsc_diffview.h, docs/DIFF.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tsc_diff.h"
#include "tsc_diffview.h"
#include "tsc_escape.h"
#include "tsc_formats.h"

/* The exit status when some compared record differs beyond --max-ulp (0 all agree, 1 an input
 * cannot be read or the geometries differ, 2 usage). */
#define DIFF_EXIT_DIFFER 3
#define DIFF_SHOWN 10 /* disagreeing records printed with their first differing element */

const char tsc_usage_diff[] =
    "usage: tilescope diff A B [--max-ulp N] [--json] [--html FILE] [--steps SET] [--layers SET]\n"
    "                      [--heads SET] [--batches SET] [--quiet]\n"
    "\n"
    "Compares two dumps (files, capture-session folders or runs of ranks) of the same geometry element\n"
    "by element: every dataset both hold, per (step, layer, dataset, head), pooled over the selected\n"
    "batch rows (x and the weights have no head; k and v go by kv head). Per record: the share of\n"
    "bit-identical elements, the largest distance in ULPs (in one stored format the number of\n"
    "representable values between a and b; between two formats |b - a| in ULPs of the coarser),\n"
    "the signed mean of b - a, the largest |b - a|, NaN/Inf on one side only, and the first\n"
    "differing element (batch row, token, feature) with both values (docs/DIFF.md).\n"
    "What only one dump holds (steps, layers, datasets) is listed, not compared.\n"
    "\n"
    "  --max-ulp N      a record agrees up to N ULPs (number >= 0; default 0: bit-identical)\n"
    "  --json           print the result as one JSON object (every record; docs/DIFF.md)\n"
    "  --html FILE      also write an offline HTML page: per dataset, layer-by-head grids coloured\n"
    "                   by ULP distance, the differing records worst first\n"
    "  --steps/--layers/--heads/--batches SET   the selection (default all)\n"
    "  -q, --quiet      no progress on stderr\n"
    "\n"
    "The text: a header line (both dumps, the geometry), a table per dataset (records, records beyond\n"
    "N ULP, identical share, max ULP, mean b - a, the worst record), the first 10 records beyond N\n"
    "ULP with their first differing element, the list of what was not compared, and the verdict.\n"
    "Exit status: 0 every compared record agrees, 3 some record differs beyond N ULP (or has a NaN\n"
    "or Inf against a number), 1 a dump cannot be read or the two geometries differ (the message\n"
    "names the file), 2 usage error.\n";

typedef struct {
    const char *path[2];
} diff_args_t;

/* The two operands, A then B. */
static int diff_operand(const char *cmd, int argc, char **argv, int *i, void *ctx) {
    diff_args_t *a = ctx;
    if (argv[*i][0] == '-') return -1;
    return tsc_cli_operand(cmd, argv[*i], 0, &a->path[a->path[0] != NULL]);
}

/* identical / n in percent, reading 100 only when every pair is identical. */
static const char *share_text(int64_t identical, int64_t n, char *buf, size_t cap) {
    double p = n ? 100.0 * (double)identical / (double)n : 100.0;
    if (identical < n && p > 99.9999) snprintf(buf, cap, ">99.9999%%");
    else snprintf(buf, cap, "%.4f%%", p);
    return buf;
}

static const char *bits_text(uint64_t u, const char *fmt_name, char *buf, size_t cap) {
    tsc_format_t f;
    int digits = tsc_format_parse(fmt_name, &f) == TSC_OK ? (int)(2 * tsc_format_size(f)) : 16;
    snprintf(buf, cap, "0x%0*llx", digits, (unsigned long long)u);
    return buf;
}

static const char *rec_where(const tsc_diff_rec_t *x, int with_name, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "step %lld layer %d", x->step, x->layer);
    if (with_name && n >= 0 && (size_t)n < cap) n += snprintf(buf + n, cap - (size_t)n, " %s", x->name);
    if (x->head >= 0 && n >= 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, " head %d", x->head);
    return buf;
}

static double mean_of(double sum, int64_t n) { return n ? sum / (double)n : 0.0; }

static void print_record(const tsc_diff_rec_t *x) {
    char w[160], ba[24], bb[24];
    const tsc_diff_stat_t *s = &x->s;
    printf("  %s (%s vs %s): %lld of %lld elements differ, max %.6g ULP, mean b-a %+.3g", rec_where(x, 1, w, sizeof w),
           x->fmt_a, x->fmt_b, (long long)(s->n - s->identical), (long long)s->n, s->max_ulp,
           mean_of(s->sum_diff, s->n_finite));
    if (s->nonfinite) printf(", %lld NaN/Inf against a number", (long long)s->nonfinite);
    printf("\n");
    if (s->has_first)
        printf("    first: %s: a %.9g (%s), b %.9g (%s)\n", tsc_diff_where(x->name, s, w, sizeof w), s->first_a,
               bits_text(s->first_abits, x->fmt_a, ba, sizeof ba), s->first_bv,
               bits_text(s->first_bbits, x->fmt_b, bb, sizeof bb));
}

static void print_result(const tsc_diff_t *r, const char *html) {
    tsc_strbuf_t e[4];
    for (int k = 0; k < 4; k++) tsc_strbuf_init(&e[k]);
    char sh[32], w[160];
    printf("diff %s (%s) vs %s (%s): batch %d, %d heads (%d kv), T %d, D %d, C %d; %d step%s, %zu records\n",
           tsc_esc_term_str(&e[0], r->path_a), tsc_esc_term_str(&e[1], r->policy_a[0] ? r->policy_a : "policy unknown"),
           tsc_esc_term_str(&e[2], r->path_b), tsc_esc_term_str(&e[3], r->policy_b[0] ? r->policy_b : "policy unknown"),
           r->batch, r->n_head, r->n_kv_head, r->seq_len, r->head_dim, r->d_model, r->n_steps, r->n_steps == 1 ? "" : "s",
           r->n_recs);
    int wn = 7;
    for (size_t i = 0; i < r->n_sets; i++)
        if ((int)strlen(r->sets[i].name) > wn) wn = (int)strlen(r->sets[i].name);
    printf("%-*s %8s %7s %10s %10s %11s  %s\n", wn, "dataset", "records", "beyond", "identical", "max ULP", "mean b-a",
           "worst record");
    for (size_t i = 0; i < r->n_sets; i++) {
        const tsc_diff_set_t *g = &r->sets[i];
        printf("%-*s %8zu %7zu %10s %10.6g %+11.3g  %s\n", wn, tsc_esc_term_str(&e[0], g->name), g->n_recs, g->n_disagree,
               share_text(g->s.identical, g->s.n, sh, sizeof sh), g->s.max_ulp, mean_of(g->s.sum_diff, g->s.n_finite),
               g->worst_rec >= 0 ? rec_where(&r->recs[g->worst_rec], 0, w, sizeof w) : "-");
    }
    printf("%-*s %8zu %7zu %10s %10.6g %+11.3g  %s\n", wn, "all", r->n_recs, r->n_disagree,
           share_text(r->total.identical, r->total.n, sh, sizeof sh), r->total.max_ulp,
           mean_of(r->total.sum_diff, r->total.n_finite),
           r->worst_rec >= 0 ? rec_where(&r->recs[r->worst_rec], 1, w, sizeof w) : "-");
    /* the first records beyond --max-ulp, or, when all agree, the first that differ within it */
    size_t differ = 0;
    for (size_t i = 0; i < r->n_recs; i++) differ += r->recs[i].s.identical < r->recs[i].s.n;
    int beyond = r->n_disagree > 0;
    size_t listed = beyond ? r->n_disagree : differ;
    if (listed) {
        printf("%s %g ULP (%zu%s):\n", beyond ? "records beyond" : "records that differ within", r->max_ulp, listed,
               listed > DIFF_SHOWN ? "; the first 10" : "");
        size_t shown = 0;
        for (size_t i = 0; i < r->n_recs && shown < DIFF_SHOWN; i++) {
            const tsc_diff_rec_t *x = &r->recs[i];
            if (beyond ? x->agrees : x->s.identical == x->s.n) continue;
            print_record(x);
            shown++;
        }
    }
    if (r->n_only) {
        printf("not compared (%zu%s):\n", r->n_only, r->n_only > TSC_DIFF_MAX_ONLY ? "; the first 200" : "");
        for (size_t i = 0; i < r->n_only && i < TSC_DIFF_MAX_ONLY; i++)
            printf("  %s %s\n", r->only[i].in_a == 1 ? "only in A:" : r->only[i].in_a == 0 ? "only in B:" : "in both:",
                   tsc_esc_term_str(&e[0], r->only[i].what));
    }
    if (html) printf("html view: %s\n", tsc_esc_term_str(&e[0], html));
    /* the verdict */
    if (r->n_disagree) {
        printf("differ: %zu of %zu records beyond %g ULP (", r->n_disagree, r->n_recs, r->max_ulp);
        int first = 1;
        for (size_t i = 0; i < r->n_sets; i++)
            if (r->sets[i].n_disagree) {
                printf("%s%s %zu", first ? "" : ", ", tsc_esc_term_str(&e[0], r->sets[i].name), r->sets[i].n_disagree);
                first = 0;
            }
        printf(")");
        if (r->total.nonfinite) printf("; %lld NaN/Inf against a number", (long long)r->total.nonfinite);
        printf("; max %.6g ULP; %s of %lld elements bit-identical\n", r->total.max_ulp,
               share_text(r->total.identical, r->total.n, sh, sizeof sh), (long long)r->total.n);
    } else if (differ) {
        printf("agree: %zu records within %g ULP (%zu differ, max %.6g ULP; %s of %lld elements bit-identical)\n",
               r->n_recs, r->max_ulp, differ, r->total.max_ulp, share_text(r->total.identical, r->total.n, sh, sizeof sh),
               (long long)r->total.n);
    } else {
        printf("agree: %zu records bit-identical (%lld elements)\n", r->n_recs, (long long)r->total.n);
    }
    for (int k = 0; k < 4; k++) tsc_strbuf_free(&e[k]);
}

int tsc_cmd_diff(int argc, char **argv) {
    const char *cmd = "diff", *html = NULL;
    tsc_diff_opts_t o;
    tsc_diff_opts_init(&o);
    diff_args_t a = {{NULL, NULL}};
    int json = 0, quiet = 0;
    const tsc_cli_flag_t flags[] = {TSC_CLI_SELECT_FLAGS(&o.sel),
                                    {"--max-ulp", NULL, TSC_CLI_DOUBLE, &o.max_ulp, 0, 1e300},
                                    {"--json", NULL, TSC_CLI_ON, &json, 0, 0},
                                    {"--html", NULL, TSC_CLI_STR, &html, 0, 0},
                                    {"--quiet", "-q", TSC_CLI_ON, &quiet, 0, 0}};
    int rc = tsc_cli_args(cmd, argc, argv, flags, TSC_CLI_NFLAGS(flags), diff_operand, &a, 0, NULL);
    if (rc) return rc;
    if (!a.path[0] || !a.path[1]) return tsc_cli_usage_error(cmd, "two dumps are needed (A B)");
    if (html && !html[0]) return tsc_cli_usage_error(cmd, "--html: an empty file name");
    tsc_cli_progress_t pr;
    o.progress = tsc_cli_progress_init(&pr, cmd, quiet);
    tsc_strbuf_t e;
    tsc_strbuf_init(&e);
    tsc_diff_t *r = NULL;
    if (tsc_diff_run(a.path[0], a.path[1], &o, &r) != TSC_OK) {
        rc = tsc_cli_fail(cmd, "%s", tsc_esc_term_str(&e, tsc_error_last()));
        tsc_strbuf_free(&e);
        return rc;
    }
    if (html && tsc_diff_html(r, html) != TSC_OK) rc = tsc_cli_fail(cmd, "%s", tsc_esc_term_str(&e, tsc_error_last()));
    if (rc == 0 && json) {
        tsc_json_t j;
        tsc_json_init(&j);
        tsc_diff_json(r, &j);
        if (tsc_json_status(&j) != TSC_OK) rc = tsc_cli_fail(cmd, "%s", tsc_error_last());
        else puts(tsc_json_text(&j, NULL));
        tsc_json_free(&j);
    } else if (rc == 0) {
        print_result(r, html);
    }
    if (rc == 0 && r->n_disagree) rc = DIFF_EXIT_DIFFER;
    tsc_diff_free(r);
    tsc_strbuf_free(&e);
    return rc;
}
