/* cmd_view.c: `tilescope figure attn|attn-grid SOURCE ...` and `tilescope view SOURCE -o view.html`
 * (render/tsc_attn_view.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "tsc_attn_view.h"
#include "tsc_escape.h"
#include "tsc_json.h"
#include "tsc_select.h"

static const char usage_attn[] =
    "usage: tilescope figure attn SOURCE --layer L --head H [options] -o FILE\n"
    "       tilescope figure attn --from DIR --layer L --head H [options] -o FILE\n"
    "       tilescope figure attn-grid SOURCE --layer L [options] -o FILE   (= attn --head all)\n"
    "The attention probabilities P = softmax(S) of one head (or every head of a layer, one grid row per\n"
    "kv group under GQA), recomputed from the dump's q and k; log colour scale, causal mask hatched grey,\n"
    "tied rows (>= 2 keys within eps of the row max) marked red at the right, sink keys (>= 10% of all\n"
    "rows' P, >= 2x uniform) marked orange on top (docs/VIEW.md). SOURCE: a dump or an analysis folder\n"
    "(then its per-head tie and sink counts are printed under a one-head figure). When the dump holds the\n"
    "step's input tokens, rows and keys are labelled with them (every one when they fit, else every\n"
    "few as \"i: token\"; token ids as \"id N\").\n"
    "  -o, --out FILE      output .png, .svg or .pdf (required)\n"
    "  --from DIR          the analysis (or capture-session) folder, as SOURCE is (instead of SOURCE)\n"
    "  --layer L           layer, 0-based (required)\n"
    "  --head H|all        query head, 0-based, or all (default all)\n"
    "  --step S            step (default: the dump's first)\n"
    "  --batch B           batch row (default 0)\n"
    "  --rows A:B          rows A..B-1 only (zoom; causal: keys 0..B-1)\n"
    "  --policy P          round S under policy P (default: the analysis' lp, else the dump's\n"
    "                      recorded policy, else the best fit of its O, else bf16-fa2)\n"
    "  --tie-eps E         eps of a tie (default 1e-3)\n"
    "  --dump FILE         the dump when SOURCE is an analysis folder (default: the one it names)\n"
    "  --width IN, --height IN, --dpi N, --font PT   size (inches), PNG resolution, text size\n"
    "  --json              print what was drawn (tied rows, sinks, plot box in pixels, the tokens and\n"
    "                      labels, the title's layout) as JSON\n"
    "Exit: 0 written, 1 the job failed, 2 usage error.\n";

const char tsc_usage_view[] =
    "usage: tilescope view SOURCE -o view.html [options]\n"
    "Writes one self-contained offline HTML file (no network, no external script) to browse the\n"
    "attention patterns of a dump by step, batch row, layer and head: click a head to show its pattern,\n"
    "zoom into rows and keys, read the head's ties, sinks and (with an analysis folder as SOURCE) its\n"
    "bias, flags and spectral norm (docs/VIEW.md). When the dump holds the steps' input tokens, hovering\n"
    "a cell names its row's and key's tokens and a zoom labels the axes with them.\n"
    "  -o, --out FILE      output .html (required)\n"
    "  --steps SET         steps to include (\"0,2\", \"0:4\"; default the first 4)\n"
    "  --max-steps N       steps included by default (4)\n"
    "  --overview N        overview image edge in cells, max-pooled (default 128)\n"
    "  --max-mb MB         size budget of the file (default 20): full-resolution patterns are added,\n"
    "                      heads with ties or sinks first, while the file stays below it\n"
    "  --batch B           batch row (default 0)\n"
    "  --batches SET       batch rows to include, switched in the page (\"0,1\", \"0:4\", all; default\n"
    "                      the --batch row); the size budget covers every row's patterns\n"
    "  --policy P          round S under policy P (default: the analysis' lp, else the dump's\n"
    "                      recorded policy, else the best fit of its O, else bf16-fa2)\n"
    "  --dump FILE         the dump when SOURCE is an analysis folder\n"
    "Exit: 0 written, 1 the job failed, 2 usage error.\n";

/* A usage error of figure attn, with its own usage text. */
static int attn_usage(const char *msg, const char *arg) {
    fprintf(stderr, "tilescope figure: attn: %s%s\n\n%s", msg, arg ? arg : "", usage_attn);
    return 2;
}

static int parse_rows(const char *s, int *a, int *b) {
    char *e1, *e2;
    long x = strtol(s, &e1, 10);
    if (e1 == s || *e1 != ':') return attn_usage("--rows expects A:B (integers), got ", s);
    long y = strtol(e1 + 1, &e2, 10);
    if (*e2 || e2 == e1 + 1 || x < 0 || y <= x || y > 100000000)
        return attn_usage("--rows expects A:B with 0 <= A < B, got ", s);
    *a = (int)x, *b = (int)y;
    return 0;
}

int tsc_cmd_figure_attn(int argc, char **argv, int grid) {
    const char *cmd = "figure", *src = NULL, *from = NULL, *out = NULL, *head = NULL, *rows = NULL;
    int json = 0, rc;
    tsc_attn_fig_opts_t o;
    tsc_attn_fig_opts_init(&o);
    o.batch = 0;
    const tsc_cli_flag_t flags[] = {{"--out", "-o", TSC_CLI_STR, &out, 0, 0},
                                    {"--from", NULL, TSC_CLI_STR, &from, 0, 0},
                                    {"--layer", NULL, TSC_CLI_INT, &o.layer, 0, 100000000},
                                    {"--head", NULL, TSC_CLI_STR, &head, 0, 0},
                                    {"--step", NULL, TSC_CLI_LLONG, &o.step, 0, 99999999},
                                    {"--batch", NULL, TSC_CLI_INT, &o.batch, 0, 100000000},
                                    {"--rows", NULL, TSC_CLI_STR, &rows, 0, 0},
                                    {"--policy", NULL, TSC_CLI_STR, &o.policy, 0, 0},
                                    {"--tie-eps", NULL, TSC_CLI_DOUBLE, &o.tie_eps, 1e-12, 1e3},
                                    {"--dump", NULL, TSC_CLI_STR, &o.dump, 0, 0},
                                    {"--width", NULL, TSC_CLI_DOUBLE, &o.width_in, 1, 40},
                                    {"--height", NULL, TSC_CLI_DOUBLE, &o.height_in, 1, 40},
                                    {"--dpi", NULL, TSC_CLI_WHOLE, &o.dpi, 30, 1200},
                                    {"--font", NULL, TSC_CLI_DOUBLE, &o.font_pt, 7, 20},
                                    {"--json", NULL, TSC_CLI_ON, &json, 0, 0}};
    if ((rc = tsc_cli_args(cmd, argc, argv, flags, TSC_CLI_NFLAGS(flags), NULL, NULL, 0, &src))) return rc;
    /* --from DIR: the folder, as every other figure takes it; the same source as SOURCE naming it */
    if (from && src) return attn_usage("give SOURCE or --from DIR, not both: ", src);
    if (from) {
        struct stat sb;
        if (stat(from, &sb) == 0 && !S_ISDIR(sb.st_mode))
            return attn_usage("--from expects a folder (an analysis folder); give a dump file as SOURCE: ", from);
        src = from;
    }
    if (!src) return attn_usage("which dump or analysis folder? (SOURCE, or --from DIR)", NULL);
    if (!out) return attn_usage("-o FILE is required", NULL);
    if (o.layer < 0) return attn_usage("--layer L is required", NULL);
    if (head && strcmp(head, "all") != 0) {
        long h;
        if ((rc = tsc_cli_parse_long(cmd, "--head", head, 0, 100000000, &h))) return rc;
        if (grid) return attn_usage("attn-grid draws every head: drop --head ", head);
        o.head = (int)h;
    }
    if (rows && (rc = parse_rows(rows, &o.row0, &o.row1))) return rc;
    tsc_image_format_t fmt;
    if (tsc_image_format_from_path(out, &fmt) != TSC_OK)
        return attn_usage("-o: the extension must be .png, .svg or .pdf: ", out);
    o.source = src;
    tsc_json_t j;
    tsc_json_init(&j);
    tsc_strbuf_t e[2]; /* the names and errors printed, control bytes as \xNN (tsc_esc_term) */
    tsc_strbuf_init(&e[0]), tsc_strbuf_init(&e[1]);
    rc = 0;
    if (tsc_attn_figure_write(&o, out, fmt, &j) != TSC_OK) {
        rc = tsc_cli_fail(cmd, "%s", tsc_esc_term_str(&e[0], tsc_error_last()));
    } else if (json) {
        puts(tsc_json_text(&j, NULL));
    } else {
        printf("%s: attention pattern, layer %d, %s, of %s\n", tsc_esc_term_str(&e[0], out), o.layer,
               o.head >= 0 ? "one head" : "every head", tsc_esc_term_str(&e[1], src));
    }
    tsc_strbuf_free(&e[0]), tsc_strbuf_free(&e[1]);
    tsc_json_free(&j);
    return rc;
}

int tsc_cmd_view(int argc, char **argv) {
    const char *cmd = "view", *src = NULL, *out = NULL;
    int rc, batch = -1;
    tsc_view_opts_t o;
    tsc_view_opts_init(&o);
    const tsc_cli_flag_t flags[] = {{"--out", "-o", TSC_CLI_STR, &out, 0, 0},
                                    {"--steps", NULL, TSC_CLI_STR, &o.steps, 0, 0},
                                    {"--max-steps", NULL, TSC_CLI_INT, &o.max_steps, 1, 100000},
                                    {"--overview", NULL, TSC_CLI_INT, &o.overview, 16, 1024},
                                    {"--max-mb", NULL, TSC_CLI_DOUBLE, &o.max_mb, 0.01, 4096},
                                    {"--batch", NULL, TSC_CLI_INT, &batch, 0, 100000000},
                                    {"--batches", NULL, TSC_CLI_STR, &o.batches, 0, 0},
                                    {"--policy", NULL, TSC_CLI_STR, &o.policy, 0, 0},
                                    {"--dump", NULL, TSC_CLI_STR, &o.dump, 0, 0}};
    if ((rc = tsc_cli_args(cmd, argc, argv, flags, TSC_CLI_NFLAGS(flags), NULL, NULL, 0, &src))) return rc;
    if (batch >= 0 && o.batches)
        return tsc_cli_usage_error(cmd, "--batch %d and --batches %s: give one of them", batch, o.batches);
    if (batch >= 0) o.batch = batch;
    if (o.batches) {
        tsc_select_set_t set;
        if (tsc_select_set_parse(&set, o.batches) != TSC_OK)
            return tsc_cli_usage_error(cmd, "--batches expects a set of batch rows (\"0,1\", \"0:4\", all): %s",
                                       tsc_error_last());
    }
    if (!src) return tsc_cli_usage_error(cmd, "which dump or analysis folder? (SOURCE)");
    if (!out) return tsc_cli_usage_error(cmd, "-o FILE.html is required");
    o.source = src;
    tsc_view_info_t info;
    /* errors quote the dump's names and the output names whatever SOURCE was called: control bytes as
     * \xNN (tsc_esc_term) */
    tsc_strbuf_t e;
    tsc_strbuf_init(&e);
    if (tsc_view_write(&o, out, &info) != TSC_OK) {
        rc = tsc_cli_fail(cmd, "%s", tsc_esc_term_str(&e, tsc_error_last()));
        tsc_strbuf_free(&e);
        return rc;
    }
    printf("%s: %d step%s x %d batch row%s x %d layer%s x %d head%s (%d at full resolution)%s, %.1f MB\n",
           tsc_esc_term_str(&e, out), info.n_steps, TSC_CLI_S(info.n_steps), info.n_batches, TSC_CLI_S(info.n_batches),
           info.n_layers, TSC_CLI_S(info.n_layers), info.n_heads, TSC_CLI_S(info.n_heads), info.n_full,
           info.n_tokens ? ", with the input tokens" : "", (double)info.bytes / 1e6);
    tsc_strbuf_free(&e);
    if (info.n_skipped)
        fprintf(stderr, "tilescope view: %d heads left out: their q or k holds NaN/Inf (not captured)\n", info.n_skipped);
    return 0;
}
