/* tsc_runcmp.h: two analysis folders side by side (`tilescope compare`): before/after a fix, BF16
 * vs FP32, two seeds. (runcmp, the comparison of two runs; kernels/tsc_attention.h's tsc_compare_*
 * compares two arrays element by element.)
 *
 * Each side is a figure source (tsc_figure.h: DIR/summary.json and DIR/analysis.h5, written by
 * `tilescope analyze`, `diagnose` or `demo`). The heads are matched by (layer, head); the two must
 * have the same shape (heads, kv heads, head dim, model width, sequence length). Written into
 * out_dir:
 *   compare.md            what changed: per matched head the accumulated bias of A and of B
 *                         (summary.json's delta.cumsum at each side's last analysed step of the
 *                         head), the change B - A, and the flags (flagged, at risk) of each side
 *                         and whether they appeared or disappeared; the heads with the largest
 *                         change first, at most opts.max_rows of them
 *   compare.json          the same for every matched head, at full precision
 *   compare_bias.png      per-head bias of A and B as grouped bars on shared axes
 *   compare_spectral.png  spectral norms of W^Q, W^K, W^V, W^O per layer (summary.json's layers
 *                         at the last analysed step) of A and B
 *   compare_loss.png      when logs has training logs: their losses (fig10, else fig2)
 * Strings from the folders (their names, summary.json's policies) and the labels are written into
 * compare.md through the Markdown escaper (tsc_escape.h: no raw HTML, markup, cell or line from
 * them). One writer at a time: out_dir/.tilescope.lock (tsc_dir_lock, the lock of analysis folders)
 * is held from the first file to the last; a second writer fails with TSC_ERR_IO "OUT is being
 * written by another tilescope compare (pid N; ...)" before writing anything.
 *
 *   tsc_runcmp_opts_t o; tsc_runcmp_opts_init(&o);
 *   o.label_a = "bf16"; o.label_b = "bf16+stable";
 *   tsc_runcmp_info_t info;
 *   if (tsc_runcmp_write(a, b, logs, &o, "cmp", &info) != TSC_OK) puts(tsc_error_last());
 */
#ifndef TSC_RUNCMP_H
#define TSC_RUNCMP_H

#include "tsc_export.h"

#include "tsc_figure.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *label_a, *label_b; /* the two runs' names ("A", "B") */
    int max_rows;                  /* rows of compare.md (20) */
    double dpi;                    /* PNG resolution (200) */
    double font_pt;                /* base text size (8) */
} tsc_runcmp_opts_t;

TSC_API void tsc_runcmp_opts_init(tsc_runcmp_opts_t *o);

typedef struct {
    int n_matched;           /* heads in both */
    int n_only_a, n_only_b;  /* heads analysed on one side only */
    int n_appeared, n_gone;  /* heads flagged or at risk in B but not A, in A but not B */
    int n_figures;           /* PNGs written */
    char loss_note[512];     /* why there is no loss figure ("" when there is one) */
} tsc_runcmp_info_t;

/* Compares a and b into out_dir (an existing folder); logs (may be NULL or have no logs) gives the
 * loss figure. Errors: TSC_ERR_SHAPE (incompatible shapes, or no head in common: the message names
 * both folders and what differs), TSC_ERR_MISSING (a summary without heads), TSC_ERR_IO (out_dir is
 * being written by another compare or analysis), those of the writers. */
TSC_API tsc_status_t tsc_runcmp_write(tsc_figure_src_t *a, tsc_figure_src_t *b, tsc_figure_src_t *logs,
                                       const tsc_runcmp_opts_t *o, const char *out_dir, tsc_runcmp_info_t *info);

#ifdef __cplusplus
}
#endif
#endif
