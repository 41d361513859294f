/* The report drawn in memory: its content model through the PDF back end (a PDF surface writing
 * into a string buffer, and page 1 onto an image) and the HTML back end; then the whole report of
 * a small analysis folder (tsc_report_draw). Page counts and pixels asserted; no poppler. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <unistd.h>

#include <cairo-pdf.h>

#include "report_internal.h"
#include "tsc_surface.h"
#include "tsc_test.h"
#include "render_fixture.h"

static long count_nonwhite(cairo_surface_t *img, int x0, int y0, int x1, int y1) {
    return (long)(x1 - x0) * (y1 - y0) - render_count_rgb(img, x0, y0, x1, y1, 0xffffff, 0);
}

static cairo_status_t to_sb(void *c, const unsigned char *d, unsigned int n) {
    tsc_strbuf_append(c, (const char *)d, n);
    return CAIRO_STATUS_SUCCESS;
}

/* The "/Count N" of the PDF's page tree (cairo writes one), or -1. */
static int pdf_page_count(const tsc_strbuf_t *pdf) {
    const char *p = memmem(pdf->p, pdf->len, "/Type /Pages", 12);
    const char *c = p ? memmem(p, pdf->len - (size_t)(p - pdf->p), "/Count ", 7) : NULL;
    return c ? atoi(c + 7) : -1;
}

#define HEADING_RGB 0x0d2659u /* (0.05, 0.15, 0.35) */
#define HEADER_RGB 0xe0e8f5u  /* table header shade (0.88, 0.91, 0.96) */

static char *cells[120 * 3];
static const char *const hdr[3] = {"name", "value", "note"};
static const double widths[3] = {0.3, 0.3, 0.4};
static const char *const items[2] = {"fig2: no log", "fig3: no analysis.h5"};

/* A document of every block kind; its figure is a green PNG made here. */
static void build_doc(tsc_rdoc_t *d, tsc_rp_fig_t *fig, int nrows) {
    for (int r = 0; r < nrows; r++)
        for (int c = 0; c < 3; c++) {
            char buf[64];
            snprintf(buf, sizeof buf, "row %d col %d", r, c);
            free(cells[r * 3 + c]);  /* a second document reuses the table */
            cells[r * 3 + c] = strdup(buf);
        }
    memset(fig, 0, sizeof *fig);
    snprintf(fig->id, sizeof fig->id, "figT");
    snprintf(fig->caption, sizeof fig->caption, "a green test figure");
    fig->ok = 1, fig->w_in = 2, fig->h_in = 1;
    cairo_surface_t *img;
    cairo_t *cr;
    CHECK(tsc_surface_image(144, 72, 72, &img, &cr) == TSC_OK);
    cairo_set_source_rgb(cr, 0, 1, 0);
    cairo_paint(cr);
    cairo_destroy(cr);
    tsc_strbuf_init(&fig->png);
    CHECK(tsc_surface_png(img, 0, &fig->png) == TSC_OK);
    cairo_surface_destroy(img);

    tsc_rblock_t *b = tsc_rdoc_add(d, TSC_RB_HEADING);
    b->text = "First heading";
    b = tsc_rdoc_add(d, TSC_RB_PARA);
    b->text = "A paragraph <with> markup-like & text.", b->pt = 9, b->gap = 6;
    b = tsc_rdoc_add(d, TSC_RB_FIGURE);
    b->fig = fig, b->w_pt = 144, b->gap_img = 3, b->gap_cap = 12, b->alt = "figT", b->html_id = "figT";
    b = tsc_rdoc_add(d, TSC_RB_TABLE);
    b->ncol = 3, b->w = widths, b->hdr = hdr, b->cells = cells, b->nrows = nrows;
    b = tsc_rdoc_add(d, TSC_RB_PAGE);
    b = tsc_rdoc_add(d, TSC_RB_LIST);
    b->text = "Not drawn:", b->pt = 9, b->items = items, b->n_items = 2;
    b = tsc_rdoc_add(d, TSC_RB_PARA);
    b->text = "PDF only", b->pt = 9, b->only = 1;
    b = tsc_rdoc_add(d, TSC_RB_HTML);
    b->text = "<p>HTML only</p>\n", b->only = 2;
    CHECK(!d->nomem && d->n == 8);
}

static int pages_of(const tsc_rdoc_t *d, int *count) {
    tsc_strbuf_t pdf;
    tsc_strbuf_init(&pdf);
    cairo_surface_t *s = cairo_pdf_surface_create_for_stream(to_sb, &pdf, TSC_RP_PAGE_W, TSC_RP_PAGE_H);
    cairo_t *cr = cairo_create(s);
    int n = -1;
    CHECK(tsc_rdoc_pdf(d, cr, 0, &n) == TSC_OK);
    cairo_destroy(cr);
    cairo_surface_finish(s);
    CHECK(cairo_surface_status(s) == CAIRO_STATUS_SUCCESS);
    cairo_surface_destroy(s);
    CHECK(pdf.len > 1000 && memcmp(pdf.p, "%PDF", 4) == 0);
    *count = pdf_page_count(&pdf);
    tsc_strbuf_free(&pdf);
    return n;
}

static void test_model(void) {
    tsc_rp_fig_t fig;
    tsc_rdoc_t small = {0}, big = {0};
    build_doc(&small, &fig, 5);
    int count;
    int n_small = pages_of(&small, &count);
    CHECK_EQ_INT(n_small, 2); /* everything fits on page 1, then the page break */
    CHECK_EQ_INT(count, n_small);
    /* page 1 on an image: heading colour at the top, the figure's green where it was placed
     * (centred, 144 pt wide, below the heading and the paragraph), the table's header shade, the footer */
    cairo_surface_t *img;
    cairo_t *cr;
    CHECK(tsc_surface_image(TSC_RP_PAGE_W, TSC_RP_PAGE_H, 72, &img, &cr) == TSC_OK);
    int n = 0;
    CHECK(tsc_rdoc_pdf(&small, cr, 1, &n) == TSC_OK);
    CHECK_EQ_INT(n, 1);
    cairo_destroy(cr);
    CHECK(render_count_rgb(img, 50, 50, 300, 80, HEADING_RGB, 3) > 40);
    int cx = (int)(TSC_RP_PAGE_W / 2);
    CHECK(render_count_rgb(img, cx - 70, 90, cx + 70, 200, 0x00ff00, 0) > 130 * 60);
    CHECK_EQ_INT(render_count_rgb(img, 0, 0, cx - 80, 842, 0x00ff00, 0), 0);
    CHECK(render_count_rgb(img, 50, 150, 545, 400, HEADER_RGB, 2) > 500);
    CHECK(count_nonwhite(img, 200, 800, 400, 830) > 20);  /* "tilescope report, page 1" */
    CHECK_EQ_INT(count_nonwhite(img, 0, 0, 45, 842), 0);  /* the left margin */
    cairo_surface_destroy(img);

    /* a long table runs over pages, its header repeated */
    build_doc(&big, &fig, 120);
    int n_big = pages_of(&big, &count);
    CHECKF(n_big >= 4, "pages %d", n_big);
    CHECK_EQ_INT(count, n_big);

    tsc_strbuf_t h;
    tsc_strbuf_init(&h);
    tsc_rdoc_html(&small, &h);
    const char *s = tsc_strbuf_str(&h);
    CHECK(strstr(s, "<h2>First heading</h2>\n<p>A paragraph &lt;with&gt; markup-like &amp; text.</p>\n") != NULL);
    CHECK(strstr(s, "<figure id=\"figT\"><img alt=\"figT\" src=\"data:image/png;base64,iVBORw0KGgo") != NULL);
    CHECK(strstr(s, "<figcaption>a green test figure</figcaption>") != NULL);
    CHECK(strstr(s, "<tr><th>name</th><th>value</th><th>note</th></tr>\n<tr><td>row 0 col 0</td>") != NULL);
    CHECK(strstr(s, "<li>fig3: no analysis.h5</li>") != NULL);
    CHECK(strstr(s, "<p>HTML only</p>") != NULL && strstr(s, "PDF only") == NULL);
    CHECK(strstr(s, "</body></html>\n") != NULL);
    tsc_strbuf_free(&h);
    tsc_rdoc_free(&small);
    tsc_rdoc_free(&big);
    tsc_strbuf_free(&fig.png);
    for (int i = 0; i < 120 * 3; i++) free(cells[i]);
}

/* The whole report of the fixture folder, in memory. */
static int report_pages(const char *dir, tsc_report_info_t *info, int *count) {
    tsc_figure_src_t *src = NULL;
    CHECK(tsc_figure_src_open(dir, &src) == TSC_OK);
    if (!src) return -1;
    tsc_strbuf_t pdf;
    tsc_strbuf_init(&pdf);
    cairo_surface_t *s = cairo_pdf_surface_create_for_stream(to_sb, &pdf, TSC_RP_PAGE_W, TSC_RP_PAGE_H);
    cairo_t *cr = cairo_create(s);
    CHECK(tsc_report_draw(src, NULL, NULL, cr, 0, info) == TSC_OK);
    cairo_destroy(cr);
    cairo_surface_destroy(s);
    *count = pdf_page_count(&pdf);
    tsc_strbuf_free(&pdf);
    /* page 1 as pixels */
    cairo_surface_t *img;
    CHECK(tsc_surface_image(TSC_RP_PAGE_W, TSC_RP_PAGE_H, 72, &img, &cr) == TSC_OK);
    tsc_report_info_t one;
    CHECK(tsc_report_draw(src, NULL, NULL, cr, 1, &one) == TSC_OK);
    CHECK_EQ_INT(one.n_pages, 1);
    cairo_destroy(cr);
    CHECK(render_count_rgb(img, 50, 45, 250, 80, HEADING_RGB, 3) > 100); /* the title "tilescope report" */
    CHECK(count_nonwhite(img, 50, 80, 545, 400) > 2000);           /* verdict, metadata */
    cairo_surface_destroy(img);
    tsc_figure_src_close(src);
    return info->n_pages;
}

static void test_report(void) {
    char dir[] = "/tmp/tsc_repdraw_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    CHECK(render_fixture_write(dir, 0) == 0);
    tsc_report_info_t info;
    int count;
    int n = report_pages(dir, &info, &count);
    CHECKF(n >= 3, "pages %d", n); /* verdict | evidence map and heads | figures and the rest */
    CHECK_EQ_INT(count, n);
    CHECK_EQ_INT(info.n_figures, 1); /* only the evidence map has its data here */
    CHECK_EQ_INT(info.n_figures + info.n_skipped, tsc_figure_count());
    /* 300 more head records: the per-head table takes more pages */
    CHECK(render_fixture_write(dir, 300) == 0);
    int n_big = report_pages(dir, &info, &count);
    CHECKF(n_big > n + 3, "pages %d vs %d", n_big, n);
    CHECK_EQ_INT(count, n_big);
    CHECK(tsc_test_rmtree(dir) == 0);
}

int main(void) {
    test_model();
    test_report();
    return tsc_test_done();
}
