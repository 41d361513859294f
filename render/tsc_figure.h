/* tsc_figure.h: the paper's figures (docs/MECHANISM.md §7) drawn from analysis outputs and training logs.
 *
 * A figure source is an analysis folder (DIR/summary.json + DIR/analysis.h5, docs/FORMAT.md §3,
 * written by `tilescope analyze` or `tilescope diagnose`), the training logs added to it
 * (tsc_log.h), and, for the recipes that need raw tensors (TSC_FIG_NEEDS_DUMP), the dump
 * that summary.json names (or opts.dump). The recipes are the rows of the figure table below
 * (tsc_figure_spec: id, description, size, needs, kind, scope; `tilescope figure --list`; what each
 * shows: docs/MECHANISM.md section 7).
 * ("fig5" is fig5a, "fig6" is fig6a.) A recipe whose data is absent fails with TSC_ERR_MISSING
 * naming what is missing ("fig4 needs x: the dump has no x (the QKV input was not captured)").
 * Every figure comes with a caption saying what was plotted and from which file.
 *
 *   tsc_figure_src_t *src;
 *   if (tsc_figure_src_open("out", &src) != TSC_OK) puts(tsc_error_last());
 *   tsc_figure_opts_t o; tsc_figure_opts_init(&o);
 *   tsc_figure_info_t info;
 *   if (tsc_figure_write(src, "fig3", &o, "fig3.pdf", TSC_IMG_AUTO, &info) == TSC_OK) puts(info.caption);
 *   tsc_figure_src_close(src);
 *
 * summary.json is read with util/tsc_jv.h (tsc_figure_src_summary gives its tree).
 */
#ifndef TSC_FIGURE_H
#define TSC_FIGURE_H

#include "tsc_export.h"

#include <stdint.h>

#include <stddef.h>

#include <cairo.h>

#include "tsc_heatmap.h"
#include "tsc_json.h"
#include "tsc_jv.h"
#include "tsc_log.h"
#include "tsc_status.h"
#include "tsc_strbuf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- figure sources and recipes ---- */
typedef struct tsc_figure_src tsc_figure_src_t;

/* Opens dir/summary.json (required) and notes dir/analysis.h5 (read when a recipe needs it).
 * Errors: TSC_ERR_IO / TSC_ERR_FORMAT naming the file (not a tilescope-summary). */
TSC_API tsc_status_t tsc_figure_src_open(const char *dir, tsc_figure_src_t **out);
/* The same, then reads and adds n training logs named by specs ("NAME=FILE" or "FILE", see
 * tsc_log_read_spec). Errors: those of the open, the log reader (naming file and line) or
 * add_log; on failure nothing stays open and *out is NULL. dir may be NULL: a source of training
 * logs alone, for the loss figures (fig2, fig7, fig10); the others then fail with TSC_ERR_MISSING. */
TSC_API tsc_status_t tsc_figure_src_open_logs(const char *dir, const char *const *specs, int n, tsc_figure_src_t **out);
TSC_API void tsc_figure_src_close(tsc_figure_src_t *s);
/* Adds a training log; the source takes ownership (also on failure). At most 16. */
TSC_API tsc_status_t tsc_figure_src_add_log(tsc_figure_src_t *s, tsc_log_t *lg);
TSC_API const tsc_jv_t *tsc_figure_src_summary(const tsc_figure_src_t *s);
TSC_API const char *tsc_figure_src_dir(const tsc_figure_src_t *s);
TSC_API int tsc_figure_src_n_logs(const tsc_figure_src_t *s);
/* The user says the logs come from the run the dump was captured in (`--log-same-run`): only then
 * can a diverging loss support the evidence map's last link. tsc_figure_src_open_logs sets it
 * itself when the first log is the log.csv of the `tilescope train` run folder the dump (as
 * summary.json names it: capture*.h5 or flight*.h5) was captured into, run.cfg beside it. */
TSC_API void tsc_figure_src_set_same_run(tsc_figure_src_t *s, int same_run);
TSC_API const tsc_log_t *tsc_figure_src_log(const tsc_figure_src_t *s, int i);
/* How log i's loss (its per-iteration training loss, else validation loss, else any value) covers
 * the analysed steps (summary.json's computed_over.step_list): out->n_outside > 0 means the log
 * does not cover them. TSC_ERR_MISSING when the source has no analysed steps. */
TSC_API tsc_status_t tsc_figure_src_log_cover(const tsc_figure_src_t *s, int i, tsc_log_cover_t *out);

typedef struct {
    long long step;          /* -1: automatic (the top at-risk head's step, else the last analysed) */
    int layer, head;         /* -1: the top at-risk (layer, head) (diagnosis, else flags, else largest |Σδ|) */
    int batch, token, feature; /* -1: the analysis' automatic probe */
    const char *dump;        /* the dump for fig4/5b/6a/9; NULL: the one summary.json names */
    double width_in, height_in; /* 0: the row's default (tsc_figure_spec) */
    double dpi;              /* PNG resolution (300) */
    double font_pt;          /* base text size (8) */
    int ulp;                 /* fig5c: the mean error in ULPs of each element instead of value units (0) */
    int log_y;               /* fig2, fig10: a logarithmic loss axis (0: linear; fig7 is always log-log) */
    double ylo, yhi;         /* fig2, fig7, fig10: the loss axis' limits (NaN: the data's range) */
} tsc_figure_opts_t;

TSC_API void tsc_figure_opts_init(tsc_figure_opts_t *o);

typedef struct {
    char id[8];              /* canonical id ("fig5a") */
    char caption[2048];      /* what was plotted, the selection, and the source files */
    double width_in, height_in;
    int layer, head;         /* the resolved selection (-1 when not used) */
    long long step;
    /* What the figure points out, on its x axis: fig5c {tallest bar's feature}; fig6c {first and last
       key shown, the jump's key}; fig6b {the jump's key}; none elsewhere. */
    int64_t marks[4];
    int n_marks;
} tsc_figure_info_t;

/* ---- the figure table: one row per recipe (render/figure.c's recipes[]) ----
 * Everything that differs between figures is in its row: the CLI's --list, the report's choice of
 * arguments, which source repro draws a figure from and whether a page embeds it as vectors all
 * read the row. Adding a figure: its row in figure.c (with its draw function) and its row in
 * docs/MECHANISM.md section 7 (test_figure_table holds the two together). */
enum {
    TSC_FIG_NEEDS_ANALYSIS = 1 << 0, /* an analysis folder (summary.json, analysis.h5) */
    TSC_FIG_NEEDS_LOGS = 1 << 1,     /* reads training logs (--log) */
    TSC_FIG_NEEDS_DUMP = 1 << 2,     /* raw tensors from the dump (--dump or the one summary.json names) */
    TSC_FIG_NEEDS_X = 1 << 3,        /* x, the input of the QKV projection, captured */
};
typedef enum {
    TSC_FIG_KIND_GNUPLOT = 0, /* curves drawn by gnuplot: a PNG painted onto a report page */
    TSC_FIG_KIND_CAIRO,       /* drawn by cairo: vectors in SVG/PDF and on report pages */
} tsc_figure_kind_t;
typedef enum {
    TSC_FIG_RUNS_ALL = 0,  /* drawn with every run's log */
    TSC_FIG_RUNS_CAPTURED, /* about the captured run alone (pairs the loss with its capture): its log only */
} tsc_figure_scope_t;

typedef struct {
    const char *id;          /* canonical id ("fig5a") */
    const char *desc;        /* one line, for --list */
    double width_in, height_in; /* default size */
    unsigned needs;          /* TSC_FIG_NEEDS_* */
    tsc_figure_kind_t kind;
    tsc_figure_scope_t scope;
} tsc_figure_spec_t;

/* Row i of the table (0 <= i < tsc_figure_count()), NULL outside; the row of canonical or alias
 * id name (tsc_figure_canonical), NULL when unknown. */
TSC_API const tsc_figure_spec_t *tsc_figure_spec(int i);
TSC_API const tsc_figure_spec_t *tsc_figure_find(const char *name);
/* The ids of the rows whose needs masked by mask equal value and, when scope >= 0, whose scope is
 * scope, into buf[cap] as "a, b and c" (last_sep " and ") or "a, b, c" (last_sep ", "); returns buf
 * ("" when none). For help and messages that name figures. */
TSC_API const char *tsc_figure_ids_where(unsigned mask, unsigned value, int scope, const char *last_sep, char *buf,
                                         size_t cap);

/* The recipe ids in order and a one-line description of each. */
TSC_API int tsc_figure_count(void);
TSC_API const char *tsc_figure_id(int i);
TSC_API const char *tsc_figure_describe(int i);
/* Canonical id of name ("fig5" -> "fig5a", "Fig3" -> "fig3"); NULL when unknown. */
TSC_API const char *tsc_figure_canonical(const char *name);

/* Holds o's selection to what the analysis of s covers: step (summary.json's computed_over.step_list),
 * layer (the layers of its head records), head, batch, token and feature (below its geometry's n_head,
 * batch, seq_len, head_dim); -1 fields (automatic) always pass, and so does everything for a source
 * without an analysis folder, or a list the summary leaves empty. A value outside is never clamped to
 * the nearest one: TSC_ERR_ARG with a message naming the field by its `tilescope figure` flag and the
 * valid values ("--step 5 was not analysed: the analysis in DIR covers steps 0, 10, 20", "--head 4 is
 * out of range: the analysis in DIR has 4 query heads (--head 0 to 3)"); TSC_ERR_NOMEM. Every step
 * listed is checked, however long the run. tsc_figure_write, _draw and _png call it first. */
TSC_API tsc_status_t tsc_figure_check(const tsc_figure_src_t *s, const tsc_figure_opts_t *o);

/* Draws recipe id into path (PNG, SVG or PDF by fmt, or the extension for TSC_IMG_AUTO), written
 * to a temporary name and renamed (tsc_surface.h's sinks; gnuplot's image comes through its stdout). info (may be NULL) receives the caption. Errors:
 * TSC_ERR_ARG (unknown id, bad options, a selection outside the analysis: tsc_figure_check),
 * TSC_ERR_MISSING (the data is absent: the detail names
 * it), TSC_ERR_IO / TSC_ERR_FORMAT (reading analysis.h5, the dump or writing path),
 * TSC_ERR_EXTERNAL (gnuplot, cairo). path is untouched on failure. */
TSC_API tsc_status_t tsc_figure_write(tsc_figure_src_t *s, const char *id, const tsc_figure_opts_t *o, const char *path,
                              tsc_image_format_t fmt, tsc_figure_info_t *info);

/* A written figure as one JSON object (`tilescope figure --json`): {id, file (path, null when NULL),
 * caption, layer, head, step, width_in, height_in, marks} from info (tsc_figure_info_t's fields). */
TSC_API void tsc_figure_info_json(const tsc_figure_info_t *info, const char *path, tsc_json_t *j);

/* Draws recipe id onto cr, whose user units are points with (0, 0) at the top-left of a
 * w_pt x h_pt box (<= 0: the figure's size, info->width_in x height_in inches): the core of every
 * figure, in memory, with no file. Figure 1 is drawn as vectors into the box; the heatmaps (fig4,
 * fig8, fig11, fig12) are drawn by cairo into an image at opts.dpi (tsc_heatmap_render: the same
 * pixels and pooling as their PNG) painted into the box; gnuplot's curves are rendered to a PNG at
 * opts.dpi, read back through gnuplot's stdout, and painted scaled into the box. Errors as tsc_figure_write,
 * less the file ones; TSC_ERR_EXTERNAL when cr is or goes into an error state. cr's state (source,
 * transform) is saved and restored. */
TSC_API tsc_status_t tsc_figure_draw(tsc_figure_src_t *s, const char *id, const tsc_figure_opts_t *o, cairo_t *cr,
                                     double w_pt, double h_pt, tsc_figure_info_t *info);

/* Recipe id as the PNG tsc_figure_write would write (the same bytes), appended to png. */
TSC_API tsc_status_t tsc_figure_png(tsc_figure_src_t *s, const char *id, const tsc_figure_opts_t *o, tsc_strbuf_t *png,
                                    tsc_figure_info_t *info);

/* Draws every figure of the table into dir/ID.png (dir must exist) with options o: the figures whose
 * scope is TSC_FIG_RUNS_CAPTURED from captured (NULL: s), the others from s. A figure whose data is
 * absent is not drawn; done (may be NULL) is called after each figure with its id, its status and,
 * when not drawn, the reason (tsc_error_last()). *n_drawn (may be NULL) gets the count drawn.
 * Returns TSC_ERR_ARG for a NULL s, dir or o; otherwise TSC_OK, whatever each figure's status. */
typedef void (*tsc_figure_done_fn)(void *user, const char *id, tsc_status_t st, const char *why);
TSC_API tsc_status_t tsc_figure_write_dir(tsc_figure_src_t *s, tsc_figure_src_t *captured, const char *dir,
                                          const tsc_figure_opts_t *o, tsc_figure_done_fn done, void *user,
                                          int *n_drawn);

/* Figure 1 onto cr (user units: points, origin top-left) in a w x h point box. caption: [cap] or
 * NULL. Never fails on missing data (absent links are drawn as such); TSC_ERR_EXTERNAL on a cairo
 * error. */
TSC_API tsc_status_t tsc_figure_evidence_draw(cairo_t *cr, const tsc_figure_src_t *s, double w, double h, double font_pt,
                                      char *caption, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
