/* figure_src.c: figure sources (tsc_figure.h): the analysis folder, its training logs, the
 * resolved selection and analysis.h5 reads that every recipe and the evidence map share. */
#include "tsc_figure.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "tsc_file.h"
#include "tsc_h5.h"
#include "tsc_select.h"
#include "figure_internal.h"


/* ---------------------------------------------------------------- source */

/* summary.json and analysis.h5 of one folder must come from one analysis run: both carry the
 * run's id (key / root attribute "run_id", docs/FORMAT.md section 3). A folder written before run
 * ids (neither has one) is accepted unchecked; so is a missing analysis.h5 (the figures that read
 * it report that themselves), but one that is there and cannot be opened is an error: drawing
 * from summary.json alone beside a damaged analysis.h5 would hide the damage. TSC_ERR_FORMAT for
 * a mismatched pair. */
static tsc_status_t check_run_id(const tsc_figure_src_t *s) {
    const char *sid = tsc_jv_str(s->summary, "run_id");
    if (access(s->analysis_path, F_OK) != 0) return TSC_OK;
    hid_t f;
    tsc_status_t ost = tsc_h5_open(&f, s->analysis_path, 0);
    if (ost != TSC_OK)
        return tsc_error_wrap(ost, "the analysis folder %s is damaged (run analyze again): ", s->dir);
    char hid[TSC_RUN_ID_LEN + 8] = "";
    tsc_status_t st = tsc_h5_attr_read_str(f, "run_id", hid, sizeof hid);
    tsc_h5_close(f);
    if (st != TSC_OK) {
        tsc_error_clear();
        hid[0] = '\0';
    }
    if (!sid && !hid[0]) return TSC_OK;
    if (sid && hid[0] && strcmp(sid, hid) == 0) return TSC_OK;
    return tsc_error_set(TSC_ERR_FORMAT, "%s and %s come from different runs (run ids %s and %s): run analyze again",
                         s->analysis_path, s->summary_path, hid[0] ? hid : "(none)", sid ? sid : "(none)");
}

static const char *jv_type_name(const tsc_jv_t *v) {
    static const char *names[] = {"null", "a boolean", "a number", "a string", "an array", "an object"};
    return v ? names[v->type] : "missing";
}

/* The members of summary.json that the figures, the report and compare walk, checked for their
 * types once here, so a damaged or hand-edited file is refused naming the member, rather than
 * read as "no heads" or "no steps". heads is required (analyze writes it, empty when nothing
 * was analysed); the others may be absent (older or partial summaries). */
static tsc_status_t check_summary_shape(const tsc_figure_src_t *s) {
    static const struct { const char *path; tsc_jv_type_t type; const char *want; } members[] = {
        {"computed_over", TSC_JV_OBJECT, "an object"},   {"computed_over.step_list", TSC_JV_ARRAY, "an array"},
        {"flagged_heads", TSC_JV_ARRAY, "an array"},     {"layers", TSC_JV_ARRAY, "an array"},
        {"diagnosis", TSC_JV_OBJECT, "an object"},       {"diagnosis.at_risk", TSC_JV_ARRAY, "an array"},
    };
    const tsc_jv_t *v = tsc_jv_get(s->summary, "heads");
    const char *bad = NULL, *want = NULL;
    if (!v || v->type != TSC_JV_ARRAY) {
        bad = "heads", want = "an array of head records";
    } else {
        for (size_t i = 0; i < v->n; i++) {
            const tsc_jv_t *h = v->items[i];
            if (h->type != TSC_JV_OBJECT || tsc_jv_int(h, "layer", -1) < 0 || tsc_jv_int(h, "head", -1) < 0 ||
                tsc_jv_int(h, "step", -1) < 0)
                return tsc_error_set(TSC_ERR_FORMAT, "%s: 'heads[%zu]' is not a head record (an object with integer "
                                     "layer, head and step): the file is damaged (run analyze again)", s->summary_path, i);
        }
    }
    /* the others may be absent (older or partial summaries), but not of another type; a parent
     * of another type is reported before its child is looked at */
    for (size_t k = 0; k < sizeof members / sizeof members[0] && !bad; k++)
        if ((v = tsc_jv_path(s->summary, members[k].path)) && v->type != members[k].type)
            bad = members[k].path, want = members[k].want;
    if (!bad) return TSC_OK;
    return tsc_error_set(TSC_ERR_FORMAT, "%s: '%s' is %s, expected %s: the file is damaged (run analyze again)",
                         s->summary_path, bad, jv_type_name(v), want);
}

tsc_status_t tsc_figure_src_open(const char *dir, tsc_figure_src_t **out) {
    if (!dir || !out) return tsc_error_set(TSC_ERR_ARG, "tsc_figure_src_open: NULL argument");
    *out = NULL;
    tsc_figure_src_t *s = calloc(1, sizeof *s);
    if (!s) return tsc_error_set(TSC_ERR_NOMEM, "figure source %s: out of memory", dir);
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    snprintf(s->summary_path, sizeof s->summary_path, "%s/summary.json", dir);
    snprintf(s->analysis_path, sizeof s->analysis_path, "%s/analysis.h5", dir);
    tsc_status_t st = tsc_jv_read_file(s->summary_path, &s->summary);
    if (st != TSC_OK) {
        free(s);
        return tsc_error_wrap(st, "reading the analysis of %s (run `tilescope analyze DUMP -o %s` first): ", dir, dir);
    }
    const char *fmt = tsc_jv_str(s->summary, "format");
    if (!fmt || strcmp(fmt, "tilescope-summary") != 0) {
        tsc_jv_free(s->summary);
        free(s);
        return tsc_error_set(TSC_ERR_FORMAT, "%s/summary.json: format is '%s', expected 'tilescope-summary'", dir,
                             fmt ? fmt : "(none)");
    }
    if ((st = check_summary_shape(s)) != TSC_OK || (st = check_run_id(s)) != TSC_OK) {
        tsc_jv_free(s->summary);
        free(s);
        return st;
    }
    *out = s;
    return TSC_OK;
}

void tsc_figure_src_close(tsc_figure_src_t *s) {
    if (!s) return;
    for (int i = 0; i < s->n_logs; i++) tsc_log_free(s->logs[i]);
    tsc_jv_free(s->summary);
    free(s);
}

tsc_status_t tsc_figure_src_add_log(tsc_figure_src_t *s, tsc_log_t *lg) {
    if (!s || !lg) { tsc_log_free(lg); return tsc_error_set(TSC_ERR_ARG, "tsc_figure_src_add_log: NULL argument"); }
    if (s->n_logs >= TSC_FIG_MAX_LOGS) {
        tsc_log_free(lg);
        return tsc_error_set(TSC_ERR_ARG, "at most %d training logs", TSC_FIG_MAX_LOGS);
    }
    s->logs[s->n_logs++] = lg;
    return TSC_OK;
}

/* Whether the first log is the log.csv of the `tilescope train` run folder the dump was captured into:
 * the dump summary.json names (a capture.h5, flight.h5 or their manifests, as the trainer writes them)
 * and the log lie in the same folder, named as given, with the run's run.cfg beside the log. The paths
 * are compared as text: nothing the summary names is opened. */
static int log_beside_dump(const tsc_figure_src_t *s) {
    const char *dump = tsc_jv_str(s->summary, "dump");
    if (!dump || s->n_logs < 1 || !s->logs[0]->path[0]) return 0;
    const char *lp = s->logs[0]->path, *ls = strrchr(lp, '/'), *ds = strrchr(dump, '/');
    size_t ld = ls ? (size_t)(ls - lp) : 0, dd = ds ? (size_t)(ds - dump) : 0;
    if (strcmp(ls ? ls + 1 : lp, "log.csv") != 0 || ld != dd || strncmp(lp, dump, ld) != 0) return 0;
    const char *dn = ds ? ds + 1 : dump;
    if (strncmp(dn, "capture", 7) != 0 && strncmp(dn, "flight", 6) != 0) return 0;
    char cfg[1100];
    if ((size_t)snprintf(cfg, sizeof cfg, "%.*s%srun.cfg", (int)ld, lp, ld ? "/" : "") >= sizeof cfg) return 0;
    return access(cfg, R_OK) == 0;
}

tsc_status_t tsc_figure_src_open_logs(const char *dir, const char *const *specs, int n, tsc_figure_src_t **out) {
    if (!out) return tsc_error_set(TSC_ERR_ARG, "tsc_figure_src_open_logs: NULL argument");
    *out = NULL;
    tsc_status_t st = TSC_OK;
    if (dir) st = tsc_figure_src_open(dir, out);
    else if (!(*out = calloc(1, sizeof **out))) st = tsc_error_set(TSC_ERR_NOMEM, "figure source: out of memory");
    for (int k = 0; st == TSC_OK && k < n; k++) {
        tsc_log_t *lg;
        if ((st = tsc_log_read_spec(specs[k], &lg)) == TSC_OK) st = tsc_figure_src_add_log(*out, lg);
    }
    if (st == TSC_OK) (*out)->logs_same_run = log_beside_dump(*out);
    if (st != TSC_OK && *out) {
        tsc_figure_src_close(*out);
        *out = NULL;
    }
    return st;
}

const tsc_jv_t *tsc_figure_src_summary(const tsc_figure_src_t *s) { return s ? s->summary : NULL; }
const char *tsc_figure_src_dir(const tsc_figure_src_t *s) { return s ? s->dir : NULL; }
int tsc_figure_src_n_logs(const tsc_figure_src_t *s) { return s ? s->n_logs : 0; }
void tsc_figure_src_set_same_run(tsc_figure_src_t *s, int same_run) {
    if (s) s->logs_same_run = same_run != 0;
}
const tsc_log_t *tsc_figure_src_log(const tsc_figure_src_t *s, int i) {
    return s && i >= 0 && i < s->n_logs ? s->logs[i] : NULL;
}
tsc_status_t tsc_figure_src_log_cover(const tsc_figure_src_t *s, int i, tsc_log_cover_t *out) {
    if (!s || !out || i < 0 || i >= s->n_logs) return tsc_error_set(TSC_ERR_ARG, "tsc_figure_src_log_cover: bad argument");
    const tsc_jv_t *sl = tsc_jv_path(s->summary, "computed_over.step_list");
    size_t n = tsc_jv_len(sl, NULL);
    if (!n) return tsc_error_set(TSC_ERR_MISSING, "no analysed steps (no analysis folder, or its summary lists none)");
    long long *steps = malloc(n * sizeof *steps);
    if (!steps) return tsc_error_set(TSC_ERR_NOMEM, "log coverage: out of memory");
    for (size_t k = 0; k < n; k++) steps[k] = tsc_jv_int(sl->items[k], NULL, -1);
    const tsc_log_t *lg = s->logs[i];
    int c = tsc_log_loss_column(lg, 0);
    tsc_log_cover(lg, c >= 0 ? c : tsc_log_loss_column(lg, 1), steps, n, out);
    free(steps);
    return TSC_OK;
}

const char *tsc_fig_analysis_path(const tsc_figure_src_t *s) { return s->analysis_path; }
const char *tsc_fig_summary_path(const tsc_figure_src_t *s) { return s->summary_path; }

void tsc_figure_opts_init(tsc_figure_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->step = -1;
    o->layer = o->head = o->batch = o->token = o->feature = -1;
    o->dpi = 300;
    o->font_pt = 8;
    o->ylo = o->yhi = NAN;
}

/* ---------------------------------------------------------------- analysis.h5 */

/* Reads the whole dataset at dspath of the analysis file as doubles; *data is the caller's.
 * TSC_ERR_MISSING when absent (what is missing is named by the caller's wrap). */
tsc_status_t tsc_fig_read_ds(const tsc_figure_src_t *s, const char *dspath, double **data, int *rank, long long dims[4]) {
    *data = NULL;
    hid_t f;
    tsc_status_t st = tsc_h5_open(&f, s->analysis_path, 0);
    if (st == TSC_ERR_IO) return TSC_ERR_MISSING; /* the detail (file and reason) is set */
    if (st != TSC_OK) return st;
    st = tsc_h5_read_doubles(f, dspath, 4, data, rank, dims);
    if (st != TSC_OK) st = tsc_error_wrap(st, "%s: ", s->analysis_path);
    tsc_h5_close(f);
    return st;
}

/* ---------------------------------------------------------------- selection */

/* The head record of summary.json for (step, layer, head), or NULL. */
const tsc_jv_t *tsc_fig_head_record(const tsc_figure_src_t *s, long long step, int layer, int head) {
    const tsc_jv_t *hs = tsc_jv_get(s->summary, "heads");
    for (size_t i = 0; hs && i < hs->n; i++) {
        const tsc_jv_t *h = hs->items[i];
        if (tsc_jv_int(h, "step", -1) == step && tsc_jv_int(h, "layer", -1) == layer && tsc_jv_int(h, "head", -1) == head)
            return h;
    }
    return NULL;
}

void tsc_fig_resolve(const tsc_figure_src_t *s, const tsc_figure_opts_t *o, tsc_fig_sel_t *sel) {
    const tsc_jv_t *sm = s->summary;
    long long step = -1;
    int layer = -1, head = -1;
    const tsc_jv_t *top = tsc_jv_path(sm, "diagnosis.at_risk.0");
    if (top) {
        layer = (int)tsc_jv_int(top, "layer", -1), head = (int)tsc_jv_int(top, "head", -1);
        step = tsc_jv_int(top, "step", -1);
    } else if ((top = tsc_jv_path(sm, "flagged_heads.0"))) {
        layer = (int)tsc_jv_int(top, "layer", -1), head = (int)tsc_jv_int(top, "head", -1);
    } else {
        /* the (layer, head) with the largest |accumulated δ difference| */
        const tsc_jv_t *hs = tsc_jv_get(sm, "heads");
        double best = -1;
        for (size_t i = 0; hs && i < hs->n; i++) {
            double c = fabs(tsc_jv_num(hs->items[i], "delta.cumsum"));
            if (isfinite(c) && c > best) {
                best = c;
                layer = (int)tsc_jv_int(hs->items[i], "layer", -1), head = (int)tsc_jv_int(hs->items[i], "head", -1);
            }
        }
        if (layer < 0 && hs && hs->n) layer = (int)tsc_jv_int(hs->items[0], "layer", 0), head = 0;
    }
    if (o->layer >= 0) layer = o->layer;
    if (o->head >= 0) head = o->head;
    size_t ns = tsc_jv_len(sm, "computed_over.step_list");
    if (ns) {
        const tsc_jv_t *sl = tsc_jv_path(sm, "computed_over.step_list");
        if (step < 0) step = tsc_jv_int(sl->items[ns - 1], NULL, -1);
    }
    if (o->step >= 0) step = o->step;
    if (layer < 0) layer = 0;
    if (head < 0) head = 0;
    if (step < 0) step = 0;
    sel->step = step, sel->layer = layer, sel->head = head;
    sel->batch = o->batch, sel->token = o->token, sel->feature = o->feature;
    const tsc_jv_t *rec = tsc_fig_head_record(s, step, layer, head);
    if (rec) {
        if (sel->batch < 0) sel->batch = (int)tsc_jv_int(rec, "probe.batch", -1);
        if (sel->token < 0) sel->token = (int)tsc_jv_int(rec, "probe.token", -1);
        if (sel->feature < 0) sel->feature = (int)tsc_jv_int(rec, "probe.feature", -1);
    }
    if (sel->batch < 0) sel->batch = 0;
}


/* ---------------------------------------------------------------- selection check */

static int cmp_ll_asc(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* The distinct integer values of key in the records of array path of sm (key NULL: the elements
 * themselves), ascending, into *v (caller frees); their count, or -1 out of memory. Every value is
 * kept: a long run is checked in full, not up to some count. */
static int summary_values(const tsc_jv_t *sm, const char *path, const char *key, long long **v) {
    const tsc_jv_t *a = tsc_jv_path(sm, path);
    size_t n = 0, len = a && a->type == TSC_JV_ARRAY ? a->n : 0;
    if (len > INT_MAX) len = INT_MAX; /* tsc_select_runs_text counts in int */
    if (!(*v = malloc(sizeof **v * (len + 1)))) return -1;
    for (size_t i = 0; i < len; i++) {
        long long x = tsc_jv_int(a->items[i], key, LLONG_MIN);
        if (x != LLONG_MIN) (*v)[n++] = x;
    }
    if (n > 1) qsort(*v, n, sizeof **v, cmp_ll_asc);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || (*v)[u - 1] != (*v)[i]) (*v)[u++] = (*v)[i];
    return (int)u;
}

tsc_status_t tsc_figure_check(const tsc_figure_src_t *s, const tsc_figure_opts_t *o) {
    if (!s || !o) return tsc_error_set(TSC_ERR_ARG, "tsc_figure_check: NULL argument");
    const tsc_jv_t *sm = s->summary;
    if (!sm) return TSC_OK; /* training logs alone: no analysis to hold the selection to */
    static const struct { const char *flag, *key, *what; size_t off; } idx[] = {
        {"--head", "geometry.n_head", "query heads", offsetof(tsc_figure_opts_t, head)},
        {"--batch", "geometry.batch", "batch rows", offsetof(tsc_figure_opts_t, batch)},
        {"--token", "geometry.seq_len", "tokens per sequence", offsetof(tsc_figure_opts_t, token)},
        {"--feature", "geometry.head_dim", "features per head", offsetof(tsc_figure_opts_t, feature)}};
    for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++) {
        int v = *(const int *)((const char *)o + idx[i].off);
        double n = tsc_jv_num(sm, idx[i].key);
        if (v >= 0 && isfinite(n) && v >= n)
            return tsc_error_set(TSC_ERR_ARG, "%s %d is out of range: the analysis in %s has %.0f %s (%s 0 to %.0f)",
                                 idx[i].flag, v, s->dir, n, idx[i].what, idx[i].flag, n - 1);
    }
    const struct { const char *flag, *path, *key, *what; long long v; } sel[] = {
        {"--step", "computed_over.step_list", NULL, "steps", o->step},
        {"--layer", "heads", "layer", "layers", o->layer}};
    for (size_t i = 0; i < sizeof sel / sizeof sel[0]; i++) {
        if (sel[i].v < 0) continue;
        long long *have;
        int n = summary_values(sm, sel[i].path, sel[i].key, &have);
        if (n < 0) return tsc_error_set(TSC_ERR_NOMEM, "checking %s: out of memory", sel[i].flag);
        /* an analysis that lists none has nothing to hold the selection to */
        int found = n == 0 || bsearch(&sel[i].v, have, (size_t)n, sizeof *have, cmp_ll_asc) != NULL;
        if (!found) {
            char list[512];
            tsc_status_t st = tsc_error_set(TSC_ERR_ARG, "%s %lld was not analysed: the analysis in %s covers %s %s",
                                            sel[i].flag, sel[i].v, s->dir, sel[i].what,
                                            tsc_select_runs_text(have, n, list, sizeof list));
            free(have);
            return st;
        }
        free(have);
    }
    return TSC_OK;
}
