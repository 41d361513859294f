/* The figure table (render/figure.c's recipes[], tsc_figure_spec) held against itself, the docs and
 * the CLI: every row is well formed and found by its id; the figures of docs/MECHANISM.md section 7
 * are exactly the table's (a row "fig5" with panels (a) (b) (c) is fig5a, fig5b, fig5c); the
 * figures docs/REPRO.md says are drawn with lp's log alone are the rows of the captured run's scope;
 * `tilescope figure --help` names the table's log-only and dump figures; a source without an
 * analysis refuses exactly the rows that need one; tsc_figure_write_dir visits every row in order. */
#define _GNU_SOURCE
#include "tsc_figure.h"
#include "tsc_status.h"
#include "tsc_test.h"

#include <ctype.h>
#include <unistd.h>

/* path's text (caller frees), NULL when unreadable. */
static char *slurp(const char *path) {
    char *buf = NULL;
    size_t len = 0;
    return tsc_read_file(path, &buf, &len) == TSC_OK ? buf : NULL;
}

/* "fig5a" -> "fig5" (the paper's figure number without the panel letter). */
static void base_of(const char *id, char *out, size_t cap) {
    size_t n = strlen(id);
    while (n > 0 && isalpha((unsigned char)id[n - 1]) && isdigit((unsigned char)id[n - 2])) n--;
    snprintf(out, cap, "%.*s", (int)n, id);
}

static void test_rows(void) {
    int n = tsc_figure_count();
    CHECK(n > 0);
    CHECK(tsc_figure_spec(-1) == NULL);
    CHECK(tsc_figure_spec(n) == NULL);
    for (int i = 0; i < n; i++) {
        const tsc_figure_spec_t *f = tsc_figure_spec(i);
        CHECK(f != NULL);
        if (!f) continue;
        CHECKF(f->id && strlen(f->id) < sizeof(((tsc_figure_info_t *)0)->id), "row %d", i);
        CHECKF(f->desc && *f->desc, "%s: no description", f->id);
        CHECKF(f->width_in > 0 && f->height_in > 0, "%s: size %g x %g", f->id, f->width_in, f->height_in);
        CHECKF(f->needs != 0 && (f->needs & ~0xfu) == 0, "%s: needs 0x%x", f->id, f->needs);
        /* the dump and x are reached through summary.json */
        CHECKF(!(f->needs & (TSC_FIG_NEEDS_DUMP | TSC_FIG_NEEDS_X)) || (f->needs & TSC_FIG_NEEDS_ANALYSIS), "%s", f->id);
        CHECKF(f->kind == TSC_FIG_KIND_GNUPLOT || f->kind == TSC_FIG_KIND_CAIRO, "%s: kind %d", f->id, (int)f->kind);
        CHECKF(f->scope == TSC_FIG_RUNS_ALL || f->scope == TSC_FIG_RUNS_CAPTURED, "%s: scope %d", f->id, (int)f->scope);
        CHECK(tsc_figure_find(f->id) == f);
        CHECK_STREQ(tsc_figure_id(i), f->id);
        CHECK_STREQ(tsc_figure_describe(i), f->desc);
        for (int j = 0; j < i; j++) CHECKF(strcmp(tsc_figure_id(j), f->id) != 0, "%s twice", f->id);
    }
    CHECK(tsc_figure_find("fig5") == tsc_figure_find("fig5a"));
    CHECK(tsc_figure_find("FIG6") == tsc_figure_find("fig6a"));
    CHECK(tsc_figure_find("fig99") == NULL);
    CHECK(tsc_figure_find(NULL) == NULL);
    char buf[256];
    CHECK_STREQ(tsc_figure_ids_where(TSC_FIG_NEEDS_ANALYSIS, 0, -1, " and ", buf, sizeof buf), "fig2, fig7 and fig10");
    CHECK_STREQ(tsc_figure_ids_where(0, 0, TSC_FIG_RUNS_CAPTURED, ", ", buf, sizeof buf), "fig1, fig13");
    CHECK_STREQ(tsc_figure_ids_where(0xf0, 0xf0, -1, ", ", buf, sizeof buf), "");
}

/* docs/MECHANISM.md section 7: one table row per paper figure; panels written (a), (b), ... */
static void test_mechanism_doc(const char *src) {
    char path[2048];
    snprintf(path, sizeof path, "%s/docs/MECHANISM.md", src);
    char *doc = slurp(path);
    CHECKF(doc != NULL, "cannot read %s", path);
    if (!doc) return;
    char *sec = strstr(doc, "\n## 7. The figures"), *end = sec ? strstr(sec + 1, "\n## ") : NULL;
    CHECKF(sec != NULL, "no section 7 in %s", path);
    if (!sec) { free(doc); return; }
    if (end) *end = 0;
    int n_rows = 0, n_ids = 0;
    for (char *p = strstr(sec, "\n| fig"); p; p = strstr(p + 1, "\n| fig")) {
        char base[16];
        int len = 0;
        if (sscanf(p + 3, "%15[a-z0-9]%n", base, &len) != 1 || !isdigit((unsigned char)base[3])) continue;
        n_rows++;
        char *eol = strchr(p + 1, '\n');
        size_t row_len = eol ? (size_t)(eol - p) : strlen(p);
        int panels = 0;
        for (char c = 'a'; c <= 'z'; c++) { /* (a), (b), ... in sequence: "(t)" in a formula is no panel */
            char tag[5] = {'(', c, ')', 0};
            char *hit = strstr(p, tag);
            if (!hit || (size_t)(hit - p) >= row_len) break;
            panels++;
        }
        int in_table = 0;
        for (int i = 0; i < tsc_figure_count(); i++) {
            char b[16];
            base_of(tsc_figure_id(i), b, sizeof b);
            in_table += strcmp(b, base) == 0;
        }
        CHECKF(in_table > 0, "%s is in docs/MECHANISM.md section 7 but not in the figure table", base);
        CHECKF(in_table == (panels ? panels : 1), "%s: %d panels in the docs, %d rows in the table", base, panels, in_table);
        n_ids += in_table;
    }
    for (int i = 0; i < tsc_figure_count(); i++) {
        char b[16], row[24];
        base_of(tsc_figure_id(i), b, sizeof b);
        snprintf(row, sizeof row, "\n| %s |", b);
        CHECKF(strstr(sec, row) != NULL, "%s is in the figure table but has no row in docs/MECHANISM.md section 7",
               tsc_figure_id(i));
    }
    CHECK(n_rows > 0);
    CHECK_EQ_INT(n_ids, tsc_figure_count());
    free(doc);
}

/* docs/REPRO.md names the figures drawn with lp's log alone. */
static void test_repro_doc(const char *src) {
    char path[2048], ids[256], want[320];
    snprintf(path, sizeof path, "%s/docs/REPRO.md", src);
    char *doc = slurp(path);
    CHECKF(doc != NULL, "cannot read %s", path);
    if (!doc) return;
    snprintf(want, sizeof want, "%s with lp's log alone",
             tsc_figure_ids_where(0, 0, TSC_FIG_RUNS_CAPTURED, " and ", ids, sizeof ids));
    CHECKF(strstr(doc, want) != NULL, "docs/REPRO.md does not say \"%s\"", want);
    free(doc);
}

/* `tilescope figure --help` names the figures that draw without an analysis and the ones that read the dump. */
static void test_cli_help(const char *tsc) {
    char cmd[2100], ids[256], want[400];
    snprintf(cmd, sizeof cmd, "'%s' figure --help 2>&1", tsc);
    FILE *f = popen(cmd, "r");
    CHECK(f != NULL);
    if (!f) return;
    tsc_strbuf_t out;
    tsc_strbuf_init(&out);
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) tsc_strbuf_append(&out, buf, k);
    pclose(f);
    const char *text = tsc_strbuf_str(&out);
    snprintf(want, sizeof want, "(required, except for the loss figures %s)",
             tsc_figure_ids_where(TSC_FIG_NEEDS_ANALYSIS, 0, -1, ", ", ids, sizeof ids));
    CHECKF(strstr(text, want) != NULL, "figure --help lacks \"%s\"", want);
    snprintf(want, sizeof want, "the dump, for %s (default",
             tsc_figure_ids_where(TSC_FIG_NEEDS_DUMP, TSC_FIG_NEEDS_DUMP, -1, ", ", ids, sizeof ids));
    CHECKF(strstr(text, want) != NULL, "figure --help lacks \"%s\"", want);
    tsc_strbuf_free(&out);
}

typedef struct {
    int n, order_ok, n_missing_analysis;
} visit_t;

static void visit(void *user, const char *id, tsc_status_t st, const char *why) {
    visit_t *v = user;
    v->order_ok &= v->n < tsc_figure_count() && strcmp(id, tsc_figure_id(v->n)) == 0;
    const tsc_figure_spec_t *f = tsc_figure_find(id);
    CHECKF(st != TSC_OK && why && *why, "%s drawn from an empty source", id);
    if (f && (f->needs & TSC_FIG_NEEDS_ANALYSIS)) {
        CHECKF(st == TSC_ERR_MISSING && why && strstr(why, "needs an analysis folder"), "%s: %s", id, why ? why : "");
        v->n_missing_analysis++;
    }
    v->n++;
}

/* A source of training logs alone (here none): the rows that need an analysis say so; none is drawn. */
static void test_write_dir(void) {
    tsc_figure_src_t *s = NULL;
    CHECK(tsc_figure_src_open_logs(NULL, NULL, 0, &s) == TSC_OK);
    if (!s) return;
    char dir[] = "/tmp/tsc_figtable_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    tsc_figure_opts_t o;
    tsc_figure_opts_init(&o);
    visit_t v = {0, 1, 0};
    int drawn = -1;
    CHECK(tsc_figure_write_dir(s, NULL, dir, &o, visit, &v, &drawn) == TSC_OK);
    CHECK_EQ_INT(v.n, tsc_figure_count());
    CHECK(v.order_ok);
    CHECK_EQ_INT(drawn, 0);
    int need = 0;
    for (int i = 0; i < tsc_figure_count(); i++) need += (tsc_figure_spec(i)->needs & TSC_FIG_NEEDS_ANALYSIS) != 0;
    CHECK_EQ_INT(v.n_missing_analysis, need);
    CHECK(tsc_figure_write_dir(NULL, NULL, dir, &o, NULL, NULL, NULL) == TSC_ERR_ARG);
    tsc_error_clear();
    tsc_figure_src_close(s);
    rmdir(dir);
}

int main(void) {
    test_rows();
    const char *src = getenv("TSC_SRC"), *tsc = getenv("TSC");
    if (src) {
        test_mechanism_doc(src);
        test_repro_doc(src);
    } else {
        fprintf(stderr, "TSC_SRC unset: the docs checks are skipped\n");
    }
    if (tsc) test_cli_help(tsc);
    else fprintf(stderr, "TSC unset: the CLI check is skipped\n");
    test_write_dir();
    return tsc_test_done();
}
