/* tsc_diffview.h: the tensor-level diff of two dumps as one offline HTML page (`tilescope diff
 * --html`, docs/DIFF.md): a summary per dataset, then per step and dataset a grid of layers by heads,
 * each cell coloured by its largest ULP distance (white: bit-identical) and carrying its numbers
 * in a tooltip; the records that disagree listed worst first. No script, no network: it opens from
 * a file anywhere. */
#ifndef TSC_DIFFVIEW_H
#define TSC_DIFFVIEW_H

#include "tsc_diff.h"
#include "tsc_export.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the page to path (atomically). TSC_ERR_IO naming path when it cannot be written. */
TSC_API tsc_status_t tsc_diff_html(const tsc_diff_t *r, const char *path);

#ifdef __cplusplus
}
#endif
#endif
