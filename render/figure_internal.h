/* figure_internal.h: private helpers shared by figure*.c and report*.c (not installed).
 * Calls go one way: figure_src.c (the source, selection, analysis.h5 reads) <- figure_evidence.c
 * (figure 1) <- figure.c (every recipe, tsc_figure_draw/write) <- report.c. */
#ifndef TSC_FIGURE_INTERNAL_H
#define TSC_FIGURE_INTERNAL_H

#include <cairo.h>

#include "tsc_dump.h"
#include "tsc_figure.h"

#define TSC_FIG_MAX_LOGS 16

/* A figure source (tsc_figure_src_open, figure_src.c). */
struct tsc_figure_src {
    char dir[1024];
    char summary_path[1100];
    char analysis_path[1100];
    tsc_jv_t *summary;
    tsc_log_t *logs[TSC_FIG_MAX_LOGS];
    int n_logs;
    int logs_same_run;  /* the user says the logs come from the run the dump was captured in */
};

/* The evidence map's states (0 no data, 1 measured but not supporting, 2 supporting), each from the
 * number its box prints. Link 3: the mean cosine of the rank-1 terms of the tied rows, similar at
 * >= TSC_FIG_SIMILAR_COS. Link 6: a diverging loss supports it only from a log that covers the
 * analysed steps and is known to be the dump's run. */
#define TSC_FIG_SIMILAR_COS 0.5
int tsc_fig_ev_similar(double mean_cos);
int tsc_fig_ev_loss(int diverges, int covers, int same_run);

/* The head counts every page prints, from summary.json's "per_head" (one entry per analysed
 * (layer, head), pooled over the steps): heads analysed, flagged by the pooled feature rule, and the
 * (step, head) records whose delta is biased. All -1 for a summary without "per_head". */
typedef struct {
    int heads, flagged, records, delta_biased_records;
} tsc_fig_counts_t;
tsc_fig_counts_t tsc_fig_head_counts(const tsc_jv_t *summary);
/* The pooled record of (layer, head) in summary.json's "per_head", NULL when absent. */
const tsc_jv_t *tsc_fig_pooled(const tsc_jv_t *summary, int layer, int head);

typedef struct {
    long long step;
    int layer, head, batch, token, feature;
} tsc_fig_sel_t;

/* The resolved selection of a figure (tsc_figure_opts_t's -1 fields filled in). */
void tsc_fig_resolve(const tsc_figure_src_t *s, const tsc_figure_opts_t *o, tsc_fig_sel_t *sel);
/* summary.json's record of (step, layer, head), or NULL. */
const tsc_jv_t *tsc_fig_head_record(const tsc_figure_src_t *s, long long step, int layer, int head);
/* A whole analysis.h5 dataset as doubles ([prod dims], caller frees); rank <= 4. */
tsc_status_t tsc_fig_read_ds(const tsc_figure_src_t *s, const char *dspath, double **data, int *rank,
                             long long dims[4]);
const char *tsc_fig_analysis_path(const tsc_figure_src_t *s);
/* The last component of path ("" for NULL; path itself when it ends in '/'), for captions. */
const char *tsc_fig_base(const char *path);
/* Opens the dump whose raw rows a figure of s reads (figure.c): dump (--dump) when given, else the one
 * summary.json names, else that name in the analysis folder; used[cap] gets the path opened, errors name id. */
tsc_status_t tsc_fig_open_dump(const tsc_figure_src_t *s, const char *dump, const char *id, tsc_dump_t **d, char *used,
                               size_t cap);
const char *tsc_fig_summary_path(const tsc_figure_src_t *s);
/* Figure 1 into a w_pt x h_pt box of cr (user units points) with opts o; info->caption filled. */
tsc_status_t tsc_fig_evidence_cairo(const tsc_figure_src_t *s, const tsc_figure_opts_t *o, cairo_t *cr, double w_pt,
                                    double h_pt, tsc_figure_info_t *info);

/* Where a recipe draws (figure.c). */
typedef struct fig_out fig_out_t;

#endif
