/* The figure selection check (tsc_figure_check, render/tsc_figure.h): a --step, --layer, --head, --batch,
 * --token or --feature outside what summary.json covers is refused by the library itself, naming the valid
 * values, by every entry point (check, write, draw, png), however many steps the analysis lists; and the
 * --json object of a figure (tsc_figure_info_json). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <unistd.h>

#include "tsc_figure.h"
#include "tsc_surface.h"
#include "tsc_test.h"

/* More steps than the CLI's old check held (4096), so a step past that count is checked too. */
#define N_STEPS 5000

/* summary.json with steps 0, 2, ..., 2 * (N_STEPS - 1) listed out of order and once twice, head records of
 * layers 2 and 0 (not 1: a gap), and a geometry of 2 heads, 3 batch rows, 16 tokens, 8 features. */
static void write_summary(const char *dir) {
    tsc_strbuf_t sb;
    tsc_strbuf_init(&sb);
    tsc_strbuf_puts(&sb, "{\"format\": \"tilescope-summary\", \"format_version\": 1, \"producer\": \"test\",\n"
                         " \"dump\": \"/nonexistent/dump.h5\", \"lp\": \"bf16\", \"hp\": \"fp32\",\n"
                         " \"geometry\": {\"batch\": 3, \"n_head\": 2, \"n_kv_head\": 2, \"seq_len\": 16, \"head_dim\": 8},\n"
                         " \"computed_over\": {\"step_list\": [");
    for (int i = N_STEPS - 1; i >= 0; i--) tsc_strbuf_printf(&sb, "%d, ", 2 * i); /* descending: the check sorts */
    tsc_strbuf_puts(&sb, "4]},\n \"flagged_heads\": [],\n"
                         " \"heads\": [{\"step\": 0, \"layer\": 2, \"head\": 0, \"delta\": {\"cumsum\": 0.5}},\n"
                         "           {\"step\": 0, \"layer\": 0, \"head\": 1, \"delta\": {\"cumsum\": -0.25}},\n"
                         "           {\"step\": 2, \"layer\": 2, \"head\": 1, \"delta\": {\"cumsum\": 0.125}}]}\n");
    char path[300];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    tsc_test_write_text(path, tsc_strbuf_str(&sb));
    tsc_strbuf_free(&sb);
}

/* Expects o to be refused with TSC_ERR_ARG and a message holding want. */
static void expect_refused(const tsc_figure_src_t *src, const tsc_figure_opts_t *o, const char *want) {
    tsc_status_t st = tsc_figure_check(src, o);
    CHECKF(st == TSC_ERR_ARG, "status %d for '%s'", (int)st, want);
    CHECKF(strstr(tsc_error_last(), want) != NULL, "message '%s' lacks '%s'", tsc_error_last(), want);
    tsc_error_clear();
}

static void test_check(const tsc_figure_src_t *src, const char *dir) {
    tsc_figure_opts_t o;
    tsc_figure_opts_init(&o);
    CHECK(tsc_figure_check(src, &o) == TSC_OK); /* automatic: always passes */
    char want[600];
    o.step = 2 * (N_STEPS - 1); /* the last listed step, past the 4096th value */
    CHECK(tsc_figure_check(src, &o) == TSC_OK);
    o.step = 2 * 4500;
    CHECK(tsc_figure_check(src, &o) == TSC_OK);
    o.step = 2 * 4500 + 1; /* between two listed steps */
    snprintf(want, sizeof want, "--step 9001 was not analysed: the analysis in %s covers steps 0-9998 every 2", dir);
    expect_refused(src, &o, want);
    o.step = 10000; /* one stride past the last */
    expect_refused(src, &o, "--step 10000 was not analysed");
    o.step = 0;
    CHECK(tsc_figure_check(src, &o) == TSC_OK);
    o.step = -1;

    o.layer = 1; /* between the analysed layers 0 and 2 */
    snprintf(want, sizeof want, "--layer 1 was not analysed: the analysis in %s covers layers 0, 2", dir);
    expect_refused(src, &o, want);
    o.layer = 2;
    CHECK(tsc_figure_check(src, &o) == TSC_OK);
    o.layer = -1;

    o.head = 1;
    CHECK(tsc_figure_check(src, &o) == TSC_OK);
    o.head = 2;
    snprintf(want, sizeof want, "--head 2 is out of range: the analysis in %s has 2 query heads (--head 0 to 1)", dir);
    expect_refused(src, &o, want);
    o.head = -1;
    o.batch = 2;
    CHECK(tsc_figure_check(src, &o) == TSC_OK);
    o.batch = 3;
    expect_refused(src, &o, "--batch 3 is out of range: the analysis in");
    expect_refused(src, &o, "has 3 batch rows (--batch 0 to 2)");
    o.batch = -1;
    o.token = 15;
    CHECK(tsc_figure_check(src, &o) == TSC_OK);
    o.token = 16;
    expect_refused(src, &o, "has 16 tokens per sequence (--token 0 to 15)");
    o.token = -1;
    o.feature = 8;
    expect_refused(src, &o, "has 8 features per head (--feature 0 to 7)");
    CHECK(tsc_figure_check(NULL, &o) == TSC_ERR_ARG);
    CHECK(tsc_figure_check(src, NULL) == TSC_ERR_ARG);
    tsc_error_clear();
}

/* Every entry point refuses before drawing: no file written, nothing painted. */
static void test_entry_points(tsc_figure_src_t *src, const char *dir) {
    tsc_figure_opts_t o;
    tsc_figure_opts_init(&o);
    o.step = 1;
    char path[300];
    snprintf(path, sizeof path, "%s/fig1.png", dir);
    tsc_figure_info_t info;
    CHECK(tsc_figure_write(src, "fig1", &o, path, TSC_IMG_AUTO, &info) == TSC_ERR_ARG);
    CHECK(strstr(tsc_error_last(), "--step 1 was not analysed") != NULL);
    CHECK(!tsc_test_exists(path));
    tsc_strbuf_t png;
    tsc_strbuf_init(&png);
    CHECK(tsc_figure_png(src, "fig3", &o, &png, NULL) == TSC_ERR_ARG);
    CHECK_EQ_INT(png.len, 0);
    tsc_strbuf_free(&png);
    cairo_surface_t *img;
    cairo_t *cr;
    CHECK(tsc_surface_image(234, 187.2, 72, &img, &cr) == TSC_OK);
    CHECK(tsc_figure_draw(src, "fig1", &o, cr, 0, 0, NULL) == TSC_ERR_ARG);
    o.step = 2; /* in range: fig1 draws from summary.json alone */
    CHECK(tsc_figure_draw(src, "fig1", &o, cr, 0, 0, &info) == TSC_OK);
    CHECK_EQ_INT(info.step, 2);
    cairo_destroy(cr);
    cairo_surface_destroy(img);
    tsc_error_clear();
}

/* A source of training logs alone has no analysis to hold a selection to. */
static void test_logs_only(void) {
    tsc_figure_src_t *s;
    CHECK(tsc_figure_src_open_logs(NULL, NULL, 0, &s) == TSC_OK);
    tsc_figure_opts_t o;
    tsc_figure_opts_init(&o);
    o.step = 123, o.layer = 7, o.head = 9;
    CHECK(tsc_figure_check(s, &o) == TSC_OK);
    tsc_figure_src_close(s);
}

static void test_info_json(void) {
    tsc_figure_info_t info = {.id = "fig6c", .caption = "a \"caption\"", .width_in = 3.25, .height_in = 2.5,
                              .layer = 1, .head = 0, .step = 20, .marks = {3, 9, 5}, .n_marks = 3};
    tsc_json_t j;
    tsc_json_init(&j);
    tsc_figure_info_json(&info, "out/f.png", &j);
    CHECK(tsc_json_status(&j) == TSC_OK);
    const char *t = tsc_json_text(&j, NULL);
    tsc_jv_t *v = NULL;
    CHECK(tsc_jv_parse(t, strlen(t), "info json", &v) == TSC_OK);
    CHECK(tsc_jv_str(v, "id") && strcmp(tsc_jv_str(v, "id"), "fig6c") == 0);
    CHECK(tsc_jv_str(v, "file") && strcmp(tsc_jv_str(v, "file"), "out/f.png") == 0);
    CHECK(tsc_jv_str(v, "caption") && strcmp(tsc_jv_str(v, "caption"), "a \"caption\"") == 0);
    CHECK_EQ_INT(tsc_jv_int(v, "layer", -9), 1);
    CHECK_EQ_INT(tsc_jv_int(v, "head", -9), 0);
    CHECK_EQ_INT(tsc_jv_int(v, "step", -9), 20);
    CHECK_NEAR(tsc_jv_num(v, "width_in"), 3.25, 0);
    CHECK_NEAR(tsc_jv_num(v, "height_in"), 2.5, 0);
    CHECK_EQ_INT(tsc_jv_len(v, "marks"), 3);
    CHECK_EQ_INT(tsc_jv_int(v, "marks.2", -9), 5);
    tsc_jv_free(v);
    tsc_json_free(&j);
    tsc_json_init(&j);
    tsc_figure_info_json(&info, NULL, &j); /* drawn, not written: no file */
    CHECK(strstr(tsc_json_text(&j, NULL), "\"file\": null") != NULL);
    tsc_json_free(&j);
}

int main(void) {
    char dir[] = "/tmp/tsc_figcheck_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    write_summary(dir);
    tsc_figure_src_t *src = NULL;
    CHECK(tsc_figure_src_open(dir, &src) == TSC_OK);
    if (src) {
        test_check(src, dir);
        test_entry_points(src, dir);
        tsc_figure_src_close(src);
    }
    test_logs_only();
    test_info_json();
    CHECK(tsc_test_rmtree(dir) == 0);
    return tsc_test_done();
}
