/* cmd_info.c: `tilescope info FILE [--json]`: what a dump holds, and whether it is sound
 * (the result comes from capture/tsc_info.h; this file parses the flags and prints). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tsc_escape.h"
#include "tsc_strbuf.h"
#include "tsc_info.h"
#include "tsc_json.h"
#include "tsc_strbuf.h"

const char tsc_usage_info[] =
    "usage: tilescope info FILE [--json] [--quick] [--steps SET] [--layers SET]\n"
    "\n"
    "Prints what a dump (format v1) holds: geometry and run metadata, the complete steps and\n"
    "which step is incomplete (a capture killed mid-step), the layers of each step, every dataset\n"
    "with its shape, dtype, compression and size on disk, the planted structure of a synthetic\n"
    "dump, and the problems the validator finds. FILE is a dump file, a capture-session folder, or a\n"
    "run of many ranks (a manifest, or a folder of rank dumps: docs/DISTRIBUTED.md)\n"
    "(FILE.capture is used when FILE is absent).\n"
    "\n"
    "  --json          machine-readable output on stdout (one JSON object)\n"
    "  --quick         do not read every chunk (faster; corrupt data blocks go unnoticed)\n"
    "  --steps SET     list only these steps (SET: all | N | start:stop[:stride] | a,b,...)\n"
    "  --layers SET    list only these layers\n"
    "\n"
    "Exit status: 0 the dump is sound (warnings allowed), 1 it cannot be read or has errors,\n"
    "2 usage error.\n";

/* Writes text to o with everything a terminal could act on made visible (tsc_escape.h): strings
 * in a dump (attributes, object names in messages) come from whoever wrote it. */
static void put_printable(FILE *o, const char *text) {
    tsc_strbuf_t b;
    tsc_strbuf_init(&b);
    tsc_esc_term(&b, text, 1);
    fputs(tsc_strbuf_str(&b), o);
    tsc_strbuf_free(&b);
}

/* "" when every head was stored, else " (heads 1,3)". */
static const char *heads_note(const tsc_dump_dataset_info_t *in, char *buf, size_t cap) {
    buf[0] = '\0';
    if (!in->per_head || in->heads_mask == ~0ULL || in->dims[1] > 64) return buf;
    uint64_t all = in->dims[1] == 64 ? ~0ULL : ((1ULL << in->dims[1]) - 1);
    if ((in->heads_mask & all) == all) return buf;
    size_t len = (size_t)snprintf(buf, cap, " (heads ");
    int first = 1;
    for (uint64_t h = 0; h < in->dims[1] && len < cap; h++)
        if (in->heads_mask >> h & 1) {
            len += (size_t)snprintf(buf + len, cap - len, "%s%llu", first ? "" : ",", (unsigned long long)h);
            first = 0;
        }
    if (first && len < cap) len += (size_t)snprintf(buf + len, cap - len, "none");
    if (len < cap) snprintf(buf + len, cap - len, ")");
    return buf;
}

/* "  steps 2 ... 74: as step 0" for n steps whose listing repeats step ref. */
static void same_steps(FILE *o, int n, long long first, long long last, long long ref) {
    if (n == 1) fprintf(o, "  step %lld: as step %lld\n", first, ref);
    else fprintf(o, "  steps %lld %s %lld: as step %lld\n", first, n == 2 ? "and" : "...", last, ref);
}

static const char *human(uint64_t b, char *buf, size_t cap) {
    if (b >= (1ULL << 30)) snprintf(buf, cap, "%.2f GiB", (double)b / (1ULL << 30));
    else if (b >= (1ULL << 20)) snprintf(buf, cap, "%.1f MiB", (double)b / (1ULL << 20));
    else if (b >= 1024) snprintf(buf, cap, "%.1f KiB", (double)b / 1024);
    else snprintf(buf, cap, "%" PRIu64 " B", b);
    return buf;
}

/* " q[1,4,64,16] bf16, k[...] ..." for one layer. */
static void layer_line(const tsc_info_layer_t *l, tsc_strbuf_t *line) {
    char hn[256];
    for (int k = 0; k < l->n_datasets; k++) {
        const tsc_info_dataset_t *ds = &l->datasets[k];
        const char *comma = k + 1 < l->n_datasets ? "," : "";
        if (!ds->ok) {
            tsc_strbuf_printf(line, " %s (bad)%s", ds->name, comma);
            continue;
        }
        tsc_strbuf_printf(line, " %s[", ds->name);
        for (int r = 0; r < ds->info.rank; r++) tsc_strbuf_printf(line, "%s%" PRIu64, r ? "," : "", ds->info.dims[r]);
        tsc_strbuf_printf(line, "] %s%s%s%s", tsc_format_name(ds->info.dtype), ds->info.compressed ? " deflate" : "",
                          heads_note(&ds->info, hn, sizeof hn), comma);
    }
}

/* The lines of one step; consecutive layers with identical datasets collapse ("layers 0-3:"). */
static void step_block(const tsc_info_step_t *st, tsc_strbuf_t *block) {
    if (st->tokens)
        tsc_strbuf_printf(block, "    tokens: %s\n", st->tokens == 2 ? "ids and text (tokens, token_text)" : "ids (tokens)");
    tsc_strbuf_t line, prev;
    tsc_strbuf_init(&line);
    tsc_strbuf_init(&prev);
    int run_start = -1, run_end = -1;
    for (int li = 0; li <= st->n_layers; li++) {
        const int done = li == st->n_layers;
        tsc_strbuf_clear(&line);
        if (!done) layer_line(&st->layers[li], &line);
        if (!done && run_start >= 0 && strcmp(tsc_strbuf_str(&line), tsc_strbuf_str(&prev)) == 0) {
            run_end = st->layers[li].layer;
            continue;
        }
        if (run_start >= 0) {
            if (run_end > run_start) tsc_strbuf_printf(block, "    layers %d-%d:%s\n", run_start, run_end, tsc_strbuf_str(&prev));
            else tsc_strbuf_printf(block, "    layer %d:%s\n", run_start, tsc_strbuf_str(&prev));
        }
        if (done) break;
        run_start = run_end = st->layers[li].layer;
        tsc_strbuf_clear(&prev);
        tsc_strbuf_puts(&prev, tsc_strbuf_str(&line));
    }
    tsc_strbuf_free(&line);
    tsc_strbuf_free(&prev);
}

/* One block per listed step; consecutive steps with identical blocks collapse ("steps 2 ... 74"). */
static void print_steps(FILE *o, const tsc_info_t *in) {
    tsc_strbuf_t block, prev;
    tsc_strbuf_init(&block);
    tsc_strbuf_init(&prev);
    long long prev_step = -1, same_first = -1, same_last = -1;
    int n_same = 0;
    for (int i = 0; i < in->n_listed; i++) {
        const tsc_info_step_t *st = &in->listed[i];
        tsc_strbuf_clear(&block);
        step_block(st, &block);
        if (prev_step >= 0 && strcmp(tsc_strbuf_str(&block), tsc_strbuf_str(&prev)) == 0) {
            if (n_same++ == 0) same_first = st->step;
            same_last = st->step;
            continue;
        }
        if (n_same) same_steps(o, n_same, same_first, same_last, prev_step);
        n_same = 0;
        fprintf(o, "  step %lld: %d layer%s\n%s", st->step, st->n_layers_all, st->n_layers_all == 1 ? "" : "s",
                tsc_strbuf_str(&block));
        tsc_strbuf_clear(&prev);
        tsc_strbuf_puts(&prev, tsc_strbuf_str(&block));
        prev_step = st->step;
    }
    if (n_same) same_steps(o, n_same, same_first, same_last, prev_step);
    tsc_strbuf_free(&block);
    tsc_strbuf_free(&prev);
}

static void print_text(FILE *o, const tsc_info_t *in) {
    const tsc_dump_meta_t *m = &in->meta;
    char hb[64];
    char kind[128];
    if (in->n_ranks)
        snprintf(kind, sizeof kind, "a run of %d ranks (data %d x tensor %d x pipeline %d)", in->n_ranks, in->dp_size,
                 in->tp_size, in->pp_size);
    else
        snprintf(kind, sizeof kind, "%s", in->is_session ? "capture-session folder" : "single file");
    fprintf(o, "%s: tilescope dump v%d, %s, %s\n", in->path, m->format_version, kind,
            human(in->size_bytes, hb, sizeof hb));
    if (in->n_ranks)
        fprintf(o, "  producer %s, policy %s (rank 0's)\n", m->producer, m->policy[0] ? m->policy : "(none recorded)");
    else
        fprintf(o, "  producer %s, policy %s, rank %d of %d\n", m->producer, m->policy[0] ? m->policy : "(none recorded)",
                m->rank, m->world_size);
    for (int i = 0; i < in->n_ranks; i++) {
        const tsc_dump_rank_t *r = &in->ranks[i];
        char cb[64];
        fprintf(o, "  rank %d: %s, %s, batch rows %d-%d, heads %d-%d, dp %d tp %d pp %d\n", r->rank, r->file,
                human(r->bytes, cb, sizeof cb), r->batch0, r->batch0 + r->batch_n - 1, r->head0, r->head0 + r->head_n - 1,
                r->dp_rank, r->tp_rank, r->pp_rank);
        if (i == 15 && in->n_ranks > 20) {
            fprintf(o, "  ... and %d more ranks (--json lists every one)\n", in->n_ranks - 16);
            break;
        }
    }
    fprintf(o, "  geometry: %d layers, %d heads (%d kv heads%s), head_dim %d, d_model %d, seq_len %d, batch %d\n",
            m->n_layer, m->n_head, m->n_kv_head, m->n_kv_head < m->n_head ? ", grouped-query" : "", m->head_dim,
            m->d_model, m->seq_len, m->batch);
    fprintf(o, "  attention: %s, softmax_scale %.9g, tiles %d x %d\n", m->causal ? "causal" : "not causal",
            m->softmax_scale, m->tile_q, m->tile_k);
    for (int k = 0; k < in->n_planted; k++) {
        const tsc_info_attr_t *a = &in->planted[k];
        if (k == 0 && !a->is_str) fprintf(o, "  planted (synthetic dump):\n");
        fprintf(o, "    %-20s", a->name);
        if (a->is_str) fputs(a->str, o);
        for (size_t j = 0; !a->is_str && j < a->n; j++) fprintf(o, "%s%ld", j ? "," : "", a->values[j]);
        fputc('\n', o);
    }
    fprintf(o, "  steps: %d complete", in->n_steps);
    if (in->n_steps) {
        fprintf(o, " (");
        for (int i = 0; i < in->n_steps && i < 8; i++) fprintf(o, "%s%lld", i ? ", " : "", in->steps[i]);
        if (in->n_steps > 8) fprintf(o, ", ..., %lld", in->steps[in->n_steps - 1]);
        fputc(')', o);
    }
    if (in->incomplete_step >= 0)
        fprintf(o, "; step %lld INCOMPLETE (the writer stopped during it; ignored)", in->incomplete_step);
    fputc('\n', o);
    print_steps(o, in);
    if (in->n_problems == 0)
        fprintf(o, "  validation: ok%s\n", in->deep ? " (every chunk read)" : " (quick: chunks not read)");
    else
        fprintf(o, "  validation: %d error%s, %d warning%s\n", in->n_errors, in->n_errors == 1 ? "" : "s",
                in->n_warnings, in->n_warnings == 1 ? "" : "s");
    for (int i = 0; i < in->n_problems; i++)
        fprintf(o, "    %s: %s\n", in->problems[i].severity >= 2 ? "error" : "warning", in->problems[i].message);
    if (in->n_errors + in->n_warnings > in->n_problems)
        fprintf(o, "    and %d more\n", in->n_errors + in->n_warnings - in->n_problems);
}

int tsc_cmd_info(int argc, char **argv) {
    const char *cmd = "info", *path = NULL;
    int json = 0, deep = 1;
    tsc_select_t sel;
    tsc_select_init(&sel);
    const tsc_cli_flag_t flags[] = {{"--json", NULL, TSC_CLI_ON, &json, 0, 0},
                                    {"--quick", NULL, TSC_CLI_OFF, &deep, 0, 0},
                                    {"--steps", NULL, TSC_CLI_SET, &sel.steps, 0, 0},
                                    {"--layers", NULL, TSC_CLI_SET, &sel.layers, 0, 0}};
    int rc = tsc_cli_args(cmd, argc, argv, flags, TSC_CLI_NFLAGS(flags), NULL, NULL, 1, &path);
    if (rc) return rc;
    if (!path) return tsc_cli_usage_error(cmd, "no FILE given");

    tsc_info_t *in;
    if (tsc_info_read(path, &sel, deep, &in) != TSC_OK) {
        fputs("tilescope info: ", stderr);
        put_printable(stderr, tsc_error_last());
        fputc('\n', stderr);
        return 1;
    }
    if (json) {
        tsc_json_t j;
        tsc_json_init(&j);
        tsc_info_json(in, &j);
        if (tsc_json_status(&j) == TSC_OK) puts(tsc_json_text(&j, NULL));
        else tsc_cli_fail("info", "%s", tsc_error_last());
        tsc_json_free(&j);
    } else {
        /* composed in memory, then written with the file's strings made harmless */
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len);
        if (mem) {
            print_text(mem, in);
            fclose(mem);
            put_printable(stdout, text);
        }
        free(text);
    }
    rc = in->n_errors ? 1 : 0;
    if (rc) {
        fputs("tilescope info: ", stderr);
        put_printable(stderr, path);
        fprintf(stderr, ": the dump has %d error%s (see above)\n", in->n_errors, in->n_errors == 1 ? "" : "s");
    }
    tsc_info_free(in);
    return rc;
}
