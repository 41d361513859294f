/* report_internal.h (private to render/): the report's content model. report.c builds the
 * content once, as a list of blocks (headings, paragraphs, tables, figures, lists); report_doc.c
 * emits it twice: onto A4 PDF pages (any cairo context: a PDF file, a PDF in memory, an image)
 * and as offline HTML. A block marked for one output only (the PDF's title line, page breaks, the
 * HTML's inline markup) is skipped by the other. */
#ifndef TSC_REPORT_INTERNAL_H
#define TSC_REPORT_INTERNAL_H

#include <stddef.h>

#include <cairo.h>

#include "tsc_figure.h"
#include "tsc_report.h"
#include "tsc_status.h"
#include "tsc_strbuf.h"

#define TSC_RP_PAGE_W 595.28 /* A4 in points */
#define TSC_RP_PAGE_H 841.89
#define TSC_RP_MARGIN 50.0

typedef enum {
    TSC_RB_HEADING, /* text; keep: see keep_* */
    TSC_RB_PARA,    /* text in font/pt/bold; html: TSC_RH_* */
    TSC_RB_TABLE,   /* ncol columns (<= 15) at widths w[] (sum 1), header hdr, cells [nrows][ncol] */
    TSC_RB_FIGURE,  /* fig */
    TSC_RB_LIST,    /* title (bold) and items */
    TSC_RB_PAGE,    /* a page break (PDF) */
    TSC_RB_HTML     /* text is raw HTML (HTML) */
} tsc_rb_kind_t;

typedef enum { TSC_RH_P = 0, TSC_RH_P_BOLD, TSC_RH_PRE } tsc_rh_t;

/* A figure of the report: its PNG (for HTML, and painted on PDF pages for gnuplot's curves), its
 * caption, and how it is drawn on a page. */
typedef struct {
    char id[8];
    char caption[2048];
    char why[600];           /* why it is absent (ok = 0) */
    int ok;
    tsc_strbuf_t png;
    double w_in, h_in;
    int vector;              /* drawn with cairo: tsc_figure_draw onto the page rather than the PNG */
} tsc_rp_fig_t;

typedef struct {
    tsc_rb_kind_t kind;
    int only;                /* 0 both outputs, 1 PDF only, 2 HTML only */
    const char *text;
    /* PARA (and the LIST title/items: SANS) */
    const char *font;        /* "DejaVu Sans" when NULL */
    double pt, gap;          /* size, space after (points) */
    int bold, accent;        /* accent: the heading colour */
    tsc_rh_t html;
    /* HEADING: keep with what follows: keep_pt < 0: a plain heading (60 pt must fit); else the
     * heading moves to a new page unless 30 + min(keep_extra + height of keep_text in
     * keep_font/keep_pt, a third of the page) fits. */
    const char *keep_text, *keep_font;
    double keep_pt, keep_extra;
    /* TABLE */
    int ncol, nrows;
    const double *w;
    const char *const *hdr;
    char **cells;
    /* FIGURE: drawn w_pt wide (centred) and w_pt * h_in / w_in high; gaps after the image and the caption */
    const tsc_rp_fig_t *fig;
    double w_pt, gap_img, gap_cap;
    const char *alt, *html_id; /* html_id NULL: no id attribute */
    /* LIST */
    const char *const *items;
    int n_items;
} tsc_rblock_t;

typedef struct {
    tsc_rblock_t *b;
    int n, cap;
    int nomem;
    tsc_figure_src_t *src;          /* for the vector figures */
    const tsc_figure_opts_t *fig_opts;
} tsc_rdoc_t;

/* Appends a zeroed block of kind (NULL when out of memory; doc->nomem set). */
tsc_rblock_t *tsc_rdoc_add(tsc_rdoc_t *doc, tsc_rb_kind_t kind);
void tsc_rdoc_free(tsc_rdoc_t *doc);

/* The PDF back end: the blocks onto cr, page after page (cairo_show_page between pages; the user
 * units of cr must be points of an A4 page). max_pages > 0: stop after that many pages (to draw
 * page 1 onto an image). *n_pages: the pages drawn. TSC_ERR_EXTERNAL when cairo fails, or a
 * figure's error. */
tsc_status_t tsc_rdoc_pdf(const tsc_rdoc_t *doc, cairo_t *cr, int max_pages, int *n_pages);
/* The HTML back end: the whole page appended to out. */
void tsc_rdoc_html(const tsc_rdoc_t *doc, tsc_strbuf_t *out);

/* The report of src (tsc_report.h) onto cr, exactly the pages tsc_report_write puts in its PDF
 * (pdf_path, or "report.pdf" when NULL, is only named in the reproduction commands). cr: A4 in
 * points (a PDF surface, or an image for page 1 with max_pages = 1). info: pages and figures. */
tsc_status_t tsc_report_draw(tsc_figure_src_t *src, const tsc_report_opts_t *o, const char *pdf_path, cairo_t *cr,
                             int max_pages, tsc_report_info_t *info);

#endif
