/* cmd_info.c: `tilescope info FILE [--json]`: what a dump holds, and whether it is sound. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tsc_dump.h"
#include "tsc_select.h"

const char tsc_usage_info[] =
    "usage: tilescope info FILE [--json] [--quick] [--steps SET] [--layers SET]\n"
    "\n"
    "Prints what a dump (format v1) holds: geometry and run metadata, the complete steps and\n"
    "which step is incomplete (a capture killed mid-step), the layers of each step, every dataset\n"
    "with its shape, dtype, compression and size on disk, the planted structure of a synthetic\n"
    "dump, and the problems the validator finds. FILE is a dump file or a capture-session folder\n"
    "(FILE.capture is used when FILE is absent).\n"
    "\n"
    "  --json          machine-readable output on stdout (one JSON object)\n"
    "  --quick         do not read every chunk (faster; corrupt data blocks go unnoticed)\n"
    "  --steps SET     list only these steps (SET: all | N | start:stop[:stride] | a,b,...)\n"
    "  --layers SET    list only these layers\n"
    "\n"
    "Exit status: 0 the dump is sound (warnings allowed), 1 it cannot be read or has errors,\n"
    "2 usage error.\n";

typedef struct {
    int json;
    int n_err, n_warn;
    char **msgs;
    int *sev;
    int n, cap;
} problems_t;

static void collect(void *ctx, int severity, const char *message) {
    problems_t *p = ctx;
    if (severity >= 2) p->n_err++;
    else p->n_warn++;
    if (p->n == p->cap) {
        int nc = p->cap ? 2 * p->cap : 16;
        char **nm = realloc(p->msgs, sizeof(char *) * (size_t)nc);
        if (!nm) return;
        p->msgs = nm;
        int *ns = realloc(p->sev, sizeof(int) * (size_t)nc);
        if (!ns) return;
        p->sev = ns;
        p->cap = nc;
    }
    p->msgs[p->n] = strdup(message);
    if (!p->msgs[p->n]) return;
    p->sev[p->n++] = severity;
}

static void json_str(FILE *o, const char *s) {
    fputc('"', o);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(o, "\\%c", c);
        else if (c == '\n') fputs("\\n", o);
        else if (c == '\t') fputs("\\t", o);
        else if (c < 0x20) fprintf(o, "\\u%04x", c);
        else fputc(c, o);
    }
    fputc('"', o);
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

/* Root attributes a synthetic dump adds (tsc_synth.h), shown when present. */
static const char *planted_longs[] = {"planted_layers", "planted_heads", "planted_kv_heads", "planted_features",
                                      "planted_sink_keys", "planted_tie_keys", "planted_rows_start",
                                      "planted_rows_stride", "planted_x_channels", "synth_seed"};
static const char *planted_strs[] = {"synth_shape", "synth_o_policy", "capture_select"};

int tsc_cmd_info(int argc, char **argv) {
    const char *path = NULL, *steps_s = NULL, *layers_s = NULL;
    int json = 0, deep = 1;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--quick")) deep = 0;
        else if (!strcmp(argv[i], "--steps")) { if (!(steps_s = tsc_cli_value("info", argc, argv, &i))) return 2; }
        else if (!strcmp(argv[i], "--layers")) { if (!(layers_s = tsc_cli_value("info", argc, argv, &i))) return 2; }
        else if (argv[i][0] == '-' && argv[i][1]) return tsc_cli_usage_error("info", "unknown option '%s'", argv[i]);
        else if (path) return tsc_cli_usage_error("info", "more than one FILE ('%s' and '%s')", path, argv[i]);
        else path = argv[i];
    }
    if (!path) return tsc_cli_usage_error("info", "no FILE given");
    tsc_select_t sel;
    tsc_select_init(&sel);
    if (steps_s && tsc_select_set_parse(&sel.steps, steps_s) != TSC_OK)
        return tsc_cli_usage_error("info", "--steps: %s", tsc_error_last());
    if (layers_s && tsc_select_set_parse(&sel.layers, layers_s) != TSC_OK)
        return tsc_cli_usage_error("info", "--layers: %s", tsc_error_last());

    tsc_dump_t *d;
    if (tsc_dump_open(&d, path) != TSC_OK) return tsc_cli_fail("info", "%s", tsc_error_last());
    const tsc_dump_meta_t *m = tsc_dump_meta(d);
    problems_t pr = {0};
    pr.json = json;
    tsc_dump_validate(d, deep, collect, &pr);
    int n_steps = tsc_dump_n_steps(d);
    long long inc = tsc_dump_incomplete_step(d);
    FILE *o = stdout;
    char hb[64];
    int max_layers = m->n_layer + 64;
    int *layers = malloc(sizeof(int) * (size_t)max_layers);
    if (!layers) { tsc_dump_close(d); return tsc_cli_fail("info", "out of memory"); }

    if (json) {
        fprintf(o, "{\"path\": ");
        json_str(o, path);
        fprintf(o, ", \"kind\": \"%s\", \"size_bytes\": %" PRIu64 ", \"format\": \"%s\", \"format_version\": %d",
                tsc_dump_is_session(d) ? "session" : "file", tsc_dump_size_bytes(d), TSC_DUMP_FORMAT_NAME,
                m->format_version);
        fprintf(o, ",\n \"meta\": {\"n_layer\": %d, \"n_head\": %d, \"n_kv_head\": %d, \"head_dim\": %d, "
                   "\"d_model\": %d, \"seq_len\": %d, \"batch\": %d, \"causal\": %s, \"softmax_scale\": %.17g, "
                   "\"tile_q\": %d, \"tile_k\": %d, \"policy\": ",
                m->n_layer, m->n_head, m->n_kv_head, m->head_dim, m->d_model, m->seq_len, m->batch,
                m->causal ? "true" : "false", m->softmax_scale, m->tile_q, m->tile_k);
        json_str(o, m->policy);
        fprintf(o, ", \"rank\": %d, \"world_size\": %d, \"producer\": ", m->rank, m->world_size);
        json_str(o, m->producer);
        fprintf(o, "},\n \"steps\": [");
        for (int i = 0; i < n_steps; i++) fprintf(o, "%s%lld", i ? ", " : "", tsc_dump_step_at(d, i));
        fprintf(o, "], \"n_steps\": %d, \"incomplete_step\": ", n_steps);
        if (inc >= 0) fprintf(o, "%lld", inc);
        else fputs("null", o);
        fprintf(o, ",\n \"planted\": {");
        int first = 1;
        for (size_t k = 0; k < sizeof planted_longs / sizeof *planted_longs; k++) {
            long v[256];
            size_t n = 0;
            if (tsc_dump_attr_longs(d, planted_longs[k], v, 256, &n) != TSC_OK) continue;
            fprintf(o, "%s\"%s\": [", first ? "" : ", ", planted_longs[k]);
            for (size_t j = 0; j < n && j < 256; j++) fprintf(o, "%s%ld", j ? ", " : "", v[j]);
            fputc(']', o);
            first = 0;
        }
        for (size_t k = 0; k < sizeof planted_strs / sizeof *planted_strs; k++) {
            char s[512];
            if (tsc_dump_attr_str(d, planted_strs[k], s, sizeof s) != TSC_OK) continue;
            fprintf(o, "%s\"%s\": ", first ? "" : ", ", planted_strs[k]);
            json_str(o, s);
            first = 0;
        }
        fprintf(o, "},\n \"layers\": [");
        int firstl = 1;
        for (int i = 0; i < n_steps; i++) {
            long long s = tsc_dump_step_at(d, i);
            if (!tsc_select_set_has(&sel.steps, s)) continue;
            int nl = 0;
            if (tsc_dump_layers(d, s, layers, max_layers, &nl) != TSC_OK) continue;
            for (int li = 0; li < nl && li < max_layers; li++) {
                if (!tsc_select_set_has(&sel.layers, layers[li])) continue;
                fprintf(o, "%s\n  {\"step\": %lld, \"layer\": %d, \"datasets\": [", firstl ? "" : ",", s, layers[li]);
                firstl = 0;
                char names[64][TSC_DUMP_NAME_MAX];
                int nn = 0;
                tsc_dump_dataset_names(d, s, layers[li], names, 64, &nn);
                int firstd = 1;
                for (int k = 0; k < nn && k < 64; k++) {
                    tsc_dump_dataset_info_t in;
                    if (tsc_dump_dataset_info(d, s, layers[li], names[k], &in) != TSC_OK) continue;
                    fprintf(o, "%s{\"name\": \"%s\", \"shape\": [", firstd ? "" : ", ", names[k]);
                    for (int r = 0; r < in.rank; r++) fprintf(o, "%s%" PRIu64, r ? ", " : "", in.dims[r]);
                    fprintf(o, "], \"dtype\": \"%s\", \"compressed\": %s, \"storage_bytes\": %" PRIu64,
                            tsc_format_name(in.dtype), in.compressed ? "true" : "false", in.storage_bytes);
                    if (in.per_head && in.dims[1] <= 64) {
                        fprintf(o, ", \"heads_stored\": [");
                        int fh = 1;
                        for (uint64_t h = 0; h < in.dims[1]; h++)
                            if (in.heads_mask >> h & 1) { fprintf(o, "%s%llu", fh ? "" : ", ", (unsigned long long)h); fh = 0; }
                        fputc(']', o);
                    }
                    fputc('}', o);
                    firstd = 0;
                }
                fputs("]}", o);
            }
        }
        fprintf(o, "],\n \"errors\": %d, \"warnings\": %d, \"problems\": [", pr.n_err, pr.n_warn);
        for (int i = 0; i < pr.n; i++) {
            fprintf(o, "%s{\"severity\": \"%s\", \"message\": ", i ? ", " : "", pr.sev[i] >= 2 ? "error" : "warning");
            json_str(o, pr.msgs[i]);
            fputc('}', o);
        }
        fprintf(o, "],\n \"ok\": %s}\n", pr.n_err ? "false" : "true");
    } else {
        fprintf(o, "%s: tilescope dump v%d, %s, %s\n", path, m->format_version,
                tsc_dump_is_session(d) ? "capture-session folder" : "single file",
                human(tsc_dump_size_bytes(d), hb, sizeof hb));
        fprintf(o, "  producer %s, policy %s, rank %d of %d\n", m->producer, m->policy, m->rank, m->world_size);
        fprintf(o, "  geometry: %d layers, %d heads (%d kv heads%s), head_dim %d, d_model %d, seq_len %d, batch %d\n",
                m->n_layer, m->n_head, m->n_kv_head, m->n_kv_head < m->n_head ? ", grouped-query" : "", m->head_dim,
                m->d_model, m->seq_len, m->batch);
        fprintf(o, "  attention: %s, softmax_scale %.9g, tiles %d x %d\n", m->causal ? "causal" : "not causal",
                m->softmax_scale, m->tile_q, m->tile_k);
        int any = 0;
        for (size_t k = 0; k < sizeof planted_longs / sizeof *planted_longs; k++) {
            long v[256];
            size_t n = 0;
            if (tsc_dump_attr_longs(d, planted_longs[k], v, 256, &n) != TSC_OK) continue;
            if (!any) fprintf(o, "  planted (synthetic dump):\n");
            any = 1;
            fprintf(o, "    %-20s", planted_longs[k]);
            for (size_t j = 0; j < n && j < 256; j++) fprintf(o, "%s%ld", j ? "," : "", v[j]);
            fputc('\n', o);
        }
        for (size_t k = 0; k < sizeof planted_strs / sizeof *planted_strs; k++) {
            char s[512];
            if (tsc_dump_attr_str(d, planted_strs[k], s, sizeof s) == TSC_OK) fprintf(o, "    %-20s%s\n", planted_strs[k], s);
        }
        fprintf(o, "  steps: %d complete", n_steps);
        if (n_steps) {
            fprintf(o, " (");
            for (int i = 0; i < n_steps && i < 8; i++) fprintf(o, "%s%lld", i ? ", " : "", tsc_dump_step_at(d, i));
            if (n_steps > 8) fprintf(o, ", ..., %lld", tsc_dump_step_at(d, n_steps - 1));
            fputc(')', o);
        }
        if (inc >= 0) fprintf(o, "; step %lld INCOMPLETE (the writer stopped during it; ignored)", inc);
        fputc('\n', o);
        /* one line per layer; consecutive layers (and steps) with identical datasets collapse */
        char prev_step[8192] = "";
        long long prev_step_no = -1, same_first = -1, same_last = -1;
        int n_same = 0;
        for (int i = 0; i < n_steps; i++) {
            long long s = tsc_dump_step_at(d, i);
            if (!tsc_select_set_has(&sel.steps, s)) continue;
            int nl = 0;
            if (tsc_dump_layers(d, s, layers, max_layers, &nl) != TSC_OK) continue;
            char block[8192] = "", line[2048] = "", prev_line[2048] = "";
            size_t blen = 0;
            int run_start = -1, run_end = -1;
            for (int li = 0; li <= nl && li <= max_layers; li++) {
                int done = li == nl || li == max_layers;
                if (!done && !tsc_select_set_has(&sel.layers, layers[li])) continue;
                line[0] = '\0';
                if (!done) {
                    char names[64][TSC_DUMP_NAME_MAX], hn[256];
                    int nn = 0;
                    size_t len = 0;
                    tsc_dump_dataset_names(d, s, layers[li], names, 64, &nn);
                    for (int k = 0; k < nn && k < 64 && len < sizeof line; k++) {
                        tsc_dump_dataset_info_t in;
                        if (tsc_dump_dataset_info(d, s, layers[li], names[k], &in) != TSC_OK) {
                            len += (size_t)snprintf(line + len, sizeof line - len, " %s (bad)%s", names[k],
                                                    k + 1 < nn ? "," : "");
                            continue;
                        }
                        len += (size_t)snprintf(line + len, sizeof line - len, " %s[", names[k]);
                        for (int r = 0; r < in.rank && len < sizeof line; r++)
                            len += (size_t)snprintf(line + len, sizeof line - len, "%s%" PRIu64, r ? "," : "", in.dims[r]);
                        if (len < sizeof line)
                            len += (size_t)snprintf(line + len, sizeof line - len, "] %s%s%s%s", tsc_format_name(in.dtype),
                                                    in.compressed ? " deflate" : "", heads_note(&in, hn, sizeof hn),
                                                    k + 1 < nn ? "," : "");
                    }
                }
                if (!done && run_start >= 0 && strcmp(line, prev_line) == 0) { run_end = layers[li]; continue; }
                if (run_start >= 0 && blen < sizeof block) {
                    if (run_end > run_start)
                        blen += (size_t)snprintf(block + blen, sizeof block - blen, "    layers %d-%d:%s\n", run_start,
                                                 run_end, prev_line);
                    else
                        blen += (size_t)snprintf(block + blen, sizeof block - blen, "    layer %d:%s\n", run_start,
                                                 prev_line);
                }
                if (done) break;
                run_start = run_end = layers[li];
                memcpy(prev_line, line, sizeof line);
            }
            if (prev_step_no >= 0 && strcmp(block, prev_step) == 0) {
                if (n_same++ == 0) same_first = s;
                same_last = s;
                continue;
            }
            if (n_same) same_steps(o, n_same, same_first, same_last, prev_step_no);
            n_same = 0;
            fprintf(o, "  step %lld: %d layer%s\n%s", s, nl, nl == 1 ? "" : "s", block);
            memcpy(prev_step, block, sizeof block);
            prev_step_no = s;
        }
        if (n_same) same_steps(o, n_same, same_first, same_last, prev_step_no);
        if (pr.n == 0) fprintf(o, "  validation: ok%s\n", deep ? " (every chunk read)" : " (quick: chunks not read)");
        else fprintf(o, "  validation: %d error%s, %d warning%s\n", pr.n_err, pr.n_err == 1 ? "" : "s", pr.n_warn,
                     pr.n_warn == 1 ? "" : "s");
        for (int i = 0; i < pr.n; i++) fprintf(o, "    %s: %s\n", pr.sev[i] >= 2 ? "error" : "warning", pr.msgs[i]);
    }
    int rc = pr.n_err ? 1 : 0;
    if (rc) fprintf(stderr, "tilescope info: %s: the dump has %d error%s (see above)\n", path, pr.n_err,
                    pr.n_err == 1 ? "" : "s");
    for (int i = 0; i < pr.n; i++) free(pr.msgs[i]);
    free(pr.msgs);
    free(pr.sev);
    free(layers);
    tsc_dump_close(d);
    return rc;
}
