/* tsc_report.h: the review report of an analysis folder: a multi-page PDF (cairo + pango), a
 * self-contained offline HTML beside it (figures as base64 PNG data URIs, no external resource)
 * and a copy of summary.json.
 *
 * Contents: the verdict and the ranked at-risk heads; the evidence map (figure 1); a per-layer/head
 * table; every figure whose data exists (the others listed with the reason); the bit-level rounding
 * event of the diagnosis, printed like docs/MECHANISM.md §5's worked example; the measured effect of the
 * mitigation (or that it was not measured); the commands that reproduce every number.
 * Deterministic: the same input gives the same bytes (the PDF's dates come from SOURCE_DATE_EPOCH,
 * else a fixed date). Text is at least 7 pt on an A4 page.
 *
 *   tsc_figure_src_t *src; tsc_figure_src_open("out", &src);      // + tsc_figure_src_add_log(...)
 *   tsc_report_opts_t o; tsc_report_opts_init(&o);
 *   tsc_report_info_t info;
 *   if (tsc_report_write(src, "out/report.pdf", &o, &info) != TSC_OK) puts(tsc_error_last());
 *   tsc_figure_src_close(src);
 */
#ifndef TSC_REPORT_H
#define TSC_REPORT_H

#include "tsc_export.h"

#include <stddef.h>

#include "tsc_figure.h"
#include "tsc_progress.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int html;              /* also write <pdf without .pdf>.html (1) */
    int copy_summary;      /* also copy summary.json beside the PDF as <pdf without .pdf>.summary.json,
                            * unless the PDF is in the analysis folder (1) */
    double fig_dpi;        /* resolution of the figures embedded as PNG (150) */
    const char *dump;      /* the dump for the figures that need it; NULL: as summary.json names it */
    const char *command;   /* how the report was invoked, for the reproduction section (or NULL) */
    tsc_progress_t *progress; /* figures drawn (tsc_progress.h), or NULL (default) */
} tsc_report_opts_t;

typedef struct {
    int n_pages;
    int n_figures;         /* figures drawn */
    int n_skipped;         /* figures without data */
    char html_path[1100];  /* "" when not written */
    char summary_path[1100];
} tsc_report_info_t;

TSC_API void tsc_report_opts_init(tsc_report_opts_t *o);

/* Writes pdf_path (must end in .pdf), and the HTML and summary copy beside it; each file through a
 * temporary name renamed when complete. Errors: TSC_ERR_ARG (a path not ending in .pdf),
 * TSC_ERR_IO naming the file, TSC_ERR_EXTERNAL (cairo). A figure whose data is absent is not an
 * error (it is listed in the report). */
TSC_API tsc_status_t tsc_report_write(tsc_figure_src_t *src, const char *pdf_path, const tsc_report_opts_t *o,
                              tsc_report_info_t *info);

#ifdef __cplusplus
}
#endif
#endif
