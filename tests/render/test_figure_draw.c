/* Figures drawn in memory (tsc_figure_draw, tsc_figure_png): figure 1 (the evidence map) from a
 * summary.json the test writes, onto an image surface; pixels asserted. No file is written by the
 * drawing itself and nothing is read back through poppler. gnuplot's curves are checked when
 * gnuplot is installed (painted from its stdout). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <unistd.h>

#include "tsc_figure.h"
#include "tsc_plot.h"
#include "tsc_surface.h"
#include "tsc_test.h"
#include "render_fixture.h"

#define GREY 0xf8f8f8u  /* the fill of a link without evidence (0.97) */
#define AMBER 0xfff8e6u /* the fill of a measured link that does not support the chain (1, 0.97, 0.90) */

/* Pixels darker than mid-grey. */
static long count_dark(cairo_surface_t *img, int x0, int y0, int x1, int y1) {
    cairo_surface_flush(img);
    long n = 0;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) {
            uint32_t p = render_px(img, x, y);
            n += ((p >> 16) & 255) + ((p >> 8) & 255) + (p & 255) < 3 * 110;
        }
    return n;
}

/* Figure 1 onto a 650 x 390 pixel image (6.5 x 3.9 in at 100 dpi). */
static void test_evidence_map(tsc_figure_src_t *src, const char *dir) {
    tsc_figure_opts_t o;
    tsc_figure_opts_init(&o);
    cairo_surface_t *img;
    cairo_t *cr;
    CHECK(tsc_surface_image(468, 280.8, 100, &img, &cr) == TSC_OK);
    tsc_figure_info_t info;
    CHECK(tsc_figure_draw(src, "fig1", &o, cr, 468, 280.8, &info) == TSC_OK);
    CHECK(cairo_status(cr) == CAIRO_STATUS_SUCCESS);
    int W = cairo_image_surface_get_width(img), H = cairo_image_surface_get_height(img);
    CHECK_EQ_INT(W, 650);
    CHECK_EQ_INT(H, 390);
    CHECK_STREQ(info.id, "fig1");
    CHECK(strstr(info.caption, "fig1: evidence map") == info.caption);
    CHECK(strstr(info.caption, "summary.json") && !strstr(info.caption, dir)); /* names the summary it read, not its folder */
    /* the margin is white; the title is dark text in the top band */
    CHECK_EQ_U32(render_px(img, 2, 2), 0xffffff);
    CHECK_EQ_U32(render_px(img, W - 3, H - 3), 0xffffff);
    CHECKF(count_dark(img, 0, 0, W, H / 12) > 300, "title ink %ld", count_dark(img, 0, 0, W, H / 12));
    /* no analysis.h5: the links without evidence are grey boxes, in two rows of three;
     * the first box spans x 1.5%..31% and y ~16%..51% of the figure, the fourth (row 2, right) ~59%..94% */
    long box1 = render_count_rgb(img, W * 5 / 100, H * 28 / 100, W * 28 / 100, H * 46 / 100, GREY, 2);
    long area1 = (long)(W * 23 / 100) * (H * 18 / 100);
    CHECKF(box1 > area1 / 3, "grey fill of box 1: %ld of %ld pixels", box1, area1);
    long box4 = render_count_rgb(img, W * 72 / 100, H * 70 / 100, W * 95 / 100, H * 88 / 100, GREY, 2);
    CHECKF(box4 > area1 / 3, "grey fill of box 4: %ld", box4);
    /* summary.json measured delta (not biased): the second link is amber, between boxes 1 and 3 */
    long box2 = render_count_rgb(img, W * 40 / 100, H * 28 / 100, W * 62 / 100, H * 46 / 100, AMBER, 2);
    CHECKF(box2 > area1 / 3, "amber fill of box 2: %ld", box2);
    CHECK(render_count_rgb(img, W * 40 / 100, H * 28 / 100, W * 62 / 100, H * 46 / 100, GREY, 2) == 0);
    /* the gap between the two rows of boxes is background */
    CHECK(render_count_rgb(img, W * 5 / 100, H * 54 / 100, W * 28 / 100, H * 55 / 100, GREY, 2) == 0);
    cairo_destroy(cr);
    cairo_surface_destroy(img);
}

/* The box is where the figure lands: drawn at an offset on a larger page, nothing left of it. */
static void test_box(tsc_figure_src_t *src) {
    tsc_figure_opts_t o;
    tsc_figure_opts_init(&o);
    cairo_surface_t *img;
    cairo_t *cr;
    CHECK(tsc_surface_image(400, 200, 72, &img, &cr) == TSC_OK);
    cairo_translate(cr, 200, 0);
    CHECK(tsc_figure_draw(src, "fig1", &o, cr, 200, 200, NULL) == TSC_OK);
    cairo_destroy(cr);
    CHECK_EQ_INT(count_dark(img, 0, 0, 200, 200), 0);
    CHECK(count_dark(img, 200, 0, 400, 200) > 100);
    CHECK(render_count_rgb(img, 200, 0, 400, 200, GREY, 2) > 2000);
    cairo_surface_destroy(img);
}

static void test_png_and_errors(tsc_figure_src_t *src) {
    tsc_figure_opts_t o;
    tsc_figure_opts_init(&o);
    o.dpi = 50;
    tsc_strbuf_t png;
    tsc_strbuf_init(&png);
    tsc_figure_info_t info;
    CHECK(tsc_figure_png(src, "fig1", &o, &png, &info) == TSC_OK);
    cairo_surface_t *img = NULL;
    CHECK(tsc_surface_png_read(png.p, png.len, "fig1", &img) == TSC_OK);
    if (img) {
        CHECK_EQ_INT(cairo_image_surface_get_width(img), 325); /* 6.5 in at 50 dpi */
        CHECK(render_count_rgb(img, 0, 0, 325, 195, GREY, 2) > 5000);
        cairo_surface_destroy(img);
    }
    tsc_strbuf_free(&png);

    cairo_surface_t *blank;
    cairo_t *cr;
    CHECK(tsc_surface_image(234, 187, 72, &blank, &cr) == TSC_OK);
    /* data absent: TSC_ERR_MISSING naming what, and nothing drawn */
    CHECK(tsc_figure_draw(src, "fig3", &o, cr, 0, 0, &info) == TSC_ERR_MISSING);
    CHECK(strstr(tsc_error_last(), "analysis.h5") != NULL);
    CHECK(tsc_figure_draw(src, "fig2", &o, cr, 0, 0, &info) == TSC_ERR_MISSING); /* no training log */
    CHECK(count_dark(blank, 0, 0, 234, 187) == 0);
    CHECK(tsc_figure_draw(src, "fig99", &o, cr, 0, 0, &info) == TSC_ERR_ARG);
    /* a context already in error is reported, not drawn into */
    cairo_restore(cr);
    CHECK(tsc_figure_draw(src, "fig1", &o, cr, 0, 0, &info) == TSC_ERR_EXTERNAL);
    cairo_destroy(cr);
    cairo_surface_destroy(blank);
}

/* gnuplot's curve (fig2) painted from its stdout into the box. */
static void test_gnuplot_figure(tsc_figure_src_t *src) {
    if (tsc_plot_run(NULL, "exit\n") != TSC_OK) {
        printf("gnuplot not installed: the curve part is skipped\n");
        return;
    }
    const char *csv = "step,val_loss\n0,4.0\n100,3.5\n200,3.2\n300,3.1\n400,3.05\n";
    tsc_log_t *lg;
    CHECK(tsc_log_parse(csv, strlen(csv), "mem.csv", "run", &lg) == TSC_OK);
    CHECK(tsc_figure_src_add_log(src, lg) == TSC_OK);
    tsc_figure_opts_t o;
    tsc_figure_opts_init(&o);
    o.dpi = 100;
    cairo_surface_t *img;
    cairo_t *cr;
    CHECK(tsc_surface_image(500, 300, 72, &img, &cr) == TSC_OK);
    cairo_translate(cr, 100, 50);
    tsc_figure_info_t info;
    CHECK(tsc_figure_draw(src, "fig2", &o, cr, 234, 187.2, &info) == TSC_OK);
    cairo_destroy(cr);
    CHECK(strstr(info.caption, "val") != NULL);
    /* the curve's blue (#0072b2) inside the box, nothing outside it */
    long blue = 0;
    cairo_surface_flush(img);
    for (int y = 50; y < 237; y++)
        for (int x = 100; x < 334; x++) {
            uint32_t p = render_px(img, x, y);
            blue += (p & 255) > 120 && ((p >> 16) & 255) < 80;
        }
    CHECKF(blue > 20, "curve pixels %ld", blue);
    CHECK_EQ_INT(count_dark(img, 0, 0, 100, 300), 0);
    CHECK_EQ_INT(count_dark(img, 340, 0, 500, 300), 0);
    CHECK(count_dark(img, 100, 50, 334, 237) > 200); /* axes, tics, labels */
    cairo_surface_destroy(img);
}

int main(void) {
    char dir[] = "/tmp/tsc_figdraw_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    render_fixture_write(dir, 0);
    tsc_figure_src_t *src = NULL;
    CHECK(tsc_figure_src_open(dir, &src) == TSC_OK);
    if (src) {
        test_evidence_map(src, dir);
        test_box(src);
        test_png_and_errors(src);
        test_gnuplot_figure(src);
        tsc_figure_src_close(src);
    }
    CHECK(tsc_test_rmtree(dir) == 0);
    return tsc_test_done();
}
