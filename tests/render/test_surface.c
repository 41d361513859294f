/* The render surface (tsc_surface.h): text measured and drawn in memory, PNG in memory both ways,
 * the reproducible-date rule, and sinks that leave no partial file under the final name. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cairo-pdf.h>

#include "tsc_jv.h" /* tsc_read_file */
#include "tsc_surface.h"
#include "tsc_test.h"

static uint32_t px(cairo_surface_t *img, int x, int y) {
    cairo_surface_flush(img);
    const unsigned char *d = cairo_image_surface_get_data(img);
    return ((const uint32_t *)(const void *)(d + (size_t)y * cairo_image_surface_get_stride(img)))[x] & 0xffffff;
}

/* Pixels of img whose RGB is not white, inside [x0, x1) x [y0, y1). */
static long dark_count(cairo_surface_t *img, int x0, int y0, int x1, int y1) {
    long n = 0;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) n += px(img, x, y) != 0xffffff;
    return n;
}

static void test_text(void) {
    cairo_surface_t *img;
    cairo_t *cr;
    CHECK(tsc_surface_image(200, 100, 144, &img, &cr) == TSC_OK); /* 400 x 200 pixels, user units points */
    CHECK_EQ_INT(cairo_image_surface_get_width(img), 400);
    CHECK_EQ_INT(cairo_image_surface_get_height(img), 200);
    double w1, h1, w2, w3;
    tsc_surface_text_size(cr, NULL, 10, 0, 0, "iiii", &w1, &h1);
    tsc_surface_text_size(cr, NULL, 10, 0, 0, "WWWW", &w2, NULL);
    tsc_surface_text_size(cr, NULL, 20, 0, 0, "WWWW", &w3, NULL);
    CHECKF(h1 > 9 && h1 < 16, "line height %g of 10 pt text", h1);
    CHECKF(w2 > 2 * w1, "W %g vs i %g", w2, w1);
    CHECK_NEAR(w3, 2 * w2, 0.05 * w2); /* points at any scale: twice the size, twice the width */
    /* wrapped text is taller; the returned height is what was drawn */
    double hw = tsc_surface_text(cr, NULL, 10, 0, 0, 0, 40, "several words wrapped in a narrow box", 0, 0, 0);
    CHECKF(hw > 3 * h1, "wrapped height %g", hw);
    CHECK_EQ_INT(dark_count(img, 0, 0, 400, 200), 0); /* measuring draws nothing */
    cairo_set_source_rgb(cr, 0, 0, 0);
    double hd = tsc_surface_text(cr, NULL, 12, 1, 20, 30, 0, "Ag", 0, 1, 0);
    CHECK(hd > 10);
    /* ink inside the text box (points 20.. x 30..30+hd, pixels x2), none far from it */
    CHECKF(dark_count(img, 40, 60, 100, 60 + (int)(2 * hd)) > 50, "text ink %ld", dark_count(img, 40, 60, 100, 90));
    CHECK_EQ_INT(dark_count(img, 200, 0, 400, 200), 0);
    /* centred on x when not wrapped */
    tsc_surface_text(cr, NULL, 12, 0, 150, 70, 0, "Ag", 1, 1, 0);
    CHECK(dark_count(img, 270, 140, 300, 180) > 10 && dark_count(img, 300, 140, 330, 180) > 10);
    /* anchored text: the centre of the box at (100, 10) rotated 90 degrees stays near there */
    tsc_surface_text_at(cr, NULL, 8, 0, 0, "rot", 100, 12, 0.5, 0.5, M_PI / 2);
    CHECK(dark_count(img, 185, 0, 215, 50) > 10);
    /* invalid UTF-8 from data does not stop the text */
    CHECK(tsc_surface_text(cr, NULL, 10, 0, 0, 0, 0, "bad \xff byte", 0, 0, 0) > 5);
    CHECK(cairo_status(cr) == CAIRO_STATUS_SUCCESS);
    cairo_destroy(cr);
    cairo_surface_destroy(img);
    CHECK(tsc_surface_image(0, 100, 72, &img, &cr) == TSC_ERR_ARG && img == NULL);
}

static void test_png_memory(void) {
    cairo_surface_t *img;
    cairo_t *cr;
    CHECK(tsc_surface_image(100, 50, 72, &img, &cr) == TSC_OK);
    cairo_set_source_rgb(cr, 1, 0, 0);
    cairo_rectangle(cr, 10, 10, 30, 20);
    cairo_fill(cr);
    cairo_destroy(cr);
    for (int fast = 0; fast < 2; fast++) {
        tsc_strbuf_t png;
        tsc_strbuf_init(&png);
        CHECK(tsc_surface_png(img, fast, &png) == TSC_OK);
        CHECK(png.len > 8 && memcmp(png.p, "\x89PNG", 4) == 0);
        cairo_surface_t *back = NULL;
        CHECK(tsc_surface_png_read(png.p, png.len, "test", &back) == TSC_OK);
        if (back) {
            CHECK_EQ_INT(cairo_image_surface_get_width(back), 100);
            CHECK_EQ_U32(px(back, 20, 20), 0xff0000);
            CHECK_EQ_U32(px(back, 60, 20), 0xffffff);
            cairo_surface_destroy(back);
        }
        /* a truncated PNG is an error, not a blank image */
        CHECK(tsc_surface_png_read(png.p, png.len / 2, "half", &back) == TSC_ERR_FORMAT && back == NULL);
        tsc_strbuf_free(&png);
    }
    cairo_surface_destroy(img);
}

static cairo_status_t to_sb(void *c, const unsigned char *d, unsigned int n) {
    tsc_strbuf_append(c, (const char *)d, n);
    return CAIRO_STATUS_SUCCESS;
}

static void test_dates(void) {
    unsetenv("SOURCE_DATE_EPOCH");
    CHECK_EQ_INT(tsc_surface_epoch(), 946684800);
    setenv("SOURCE_DATE_EPOCH", "86400", 1);
    CHECK_EQ_INT(tsc_surface_epoch(), 86400);
    setenv("SOURCE_DATE_EPOCH", "12abc", 1);
    CHECK_EQ_INT(tsc_surface_epoch(), 946684800);
    setenv("SOURCE_DATE_EPOCH", "86400", 1);
    /* gnuplot's stamp rewritten in place, same length */
    char pdf[] = "%PDF-1.5 ... /CreationDate (D:20261201053630Z) /Producer ...";
    size_t n = strlen(pdf);
    tsc_surface_pdf_fix_date(pdf, n);
    CHECK(strstr(pdf, "/CreationDate (D:19700102000000Z)") != NULL);
    CHECK_EQ_INT(strlen(pdf), n);
    /* cairo's PDFs: the same date, in memory */
    tsc_strbuf_t sb;
    tsc_strbuf_init(&sb);
    cairo_surface_t *s = cairo_pdf_surface_create_for_stream(to_sb, &sb, 100, 100);
    tsc_surface_pdf_date(s);
    cairo_t *cr = cairo_create(s);
    cairo_paint(cr);
    cairo_destroy(cr);
    cairo_surface_destroy(s);
    CHECK(sb.len > 100 && memmem(sb.p, sb.len, "19700102000000", 14) != NULL);
    CHECK(memmem(sb.p, sb.len, "/ModDate", 8) != NULL);
    tsc_strbuf_free(&sb);
    unsetenv("SOURCE_DATE_EPOCH");
}

static int exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static int dir_entries(const char *dir) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *f = popen(cmd, "r");
    int n = -1;
    if (f) {
        if (fscanf(f, "%d", &n) != 1) n = -1;
        pclose(f);
    }
    return n;
}

static tsc_status_t draw_box(cairo_t *cr, double w, double h, void *ctx) {
    (void)ctx;
    cairo_set_source_rgb(cr, 0, 0, 1);
    cairo_rectangle(cr, 0, 0, w / 2, h / 2);
    cairo_fill(cr);
    return TSC_OK;
}

static tsc_status_t draw_broken(cairo_t *cr, double w, double h, void *ctx) {
    (void)w, (void)h, (void)ctx;
    cairo_restore(cr); /* no matching save: cr goes into an error state */
    return TSC_OK;
}

static void test_sinks(void) {
    char dir[] = "/tmp/tsc_surface_XXXXXX", path[256];
    CHECK(mkdtemp(dir) != NULL);
    const char *ext[3] = {"png", "svg", "pdf"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/ok.%s", dir, ext[i]);
        CHECK(tsc_surface_write(path, TSC_IMG_AUTO, 2, 1, 50, draw_box, NULL) == TSC_OK);
        CHECK(exists(path));
        snprintf(path, sizeof path, "%s/broken.%s", dir, ext[i]);
        CHECK(tsc_surface_write(path, TSC_IMG_AUTO, 2, 1, 50, draw_broken, NULL) == TSC_ERR_EXTERNAL);
        CHECK(!exists(path));
    }
    CHECK_EQ_INT(dir_entries(dir), 3); /* the three good files, no temporary left */
    snprintf(path, sizeof path, "%s/ok.png", dir);
    char *buf;
    size_t n;
    cairo_surface_t *img = NULL;
    if (tsc_read_file(path, &buf, &n) == TSC_OK) {
        CHECK(tsc_surface_png_read(buf, n, path, &img) == TSC_OK);
        if (img) {
            CHECK_EQ_INT(cairo_image_surface_get_width(img), 100);
            CHECK_EQ_U32(px(img, 10, 10), 0x0000ff);
            CHECK_EQ_U32(px(img, 90, 40), 0xffffff);
            cairo_surface_destroy(img);
        }
        free(buf);
    }
    /* a folder that does not exist: TSC_ERR_IO, nothing written */
    snprintf(path, sizeof path, "%s/no/such.pdf", dir);
    CHECK(tsc_surface_write(path, TSC_IMG_AUTO, 2, 1, 50, draw_box, NULL) == TSC_ERR_IO);
    /* a failed drawing over an existing file leaves the old file as it was */
    snprintf(path, sizeof path, "%s/ok.svg", dir);
    struct stat before, after;
    stat(path, &before);
    CHECK(tsc_surface_write(path, TSC_IMG_AUTO, 3, 1, 50, draw_broken, NULL) != TSC_OK);
    stat(path, &after);
    CHECK(before.st_ino == after.st_ino && before.st_size == after.st_size);
    CHECK_EQ_INT(dir_entries(dir), 3);
    CHECK(tsc_test_rmtree(dir) == 0);
}

int main(void) {
    test_text();
    test_png_memory();
    test_dates();
    test_sinks();
    return tsc_test_done();
}
