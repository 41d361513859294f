/* attn_view_internal.h: the source shared by figure_attn.c and view.c (tsc_attn_view.h): a dump
 * opened directly or through the analysis folder that names it. Not installed. */
#ifndef TSC_ATTN_VIEW_INTERNAL_H
#define TSC_ATTN_VIEW_INTERNAL_H

#include "tsc_attn_map.h"
#include "tsc_dump.h"
#include "tsc_figure.h"
#include "tsc_policy.h"

typedef struct {
    tsc_dump_t *d;
    tsc_figure_src_t *an;   /* the analysis folder, or NULL when the source is a dump */
    char dump_path[2048];
    char policy[TSC_POLICY_STR_MAX];  /* S is rounded under this policy (canonical) */
    char policy_source[192];          /* where it came from, in words */
} attn_src_t;

/* Opens source (a dump, a session folder, or an analysis folder holding summary.json) and its dump
 * (dump overrides the one summary.json names), and decides the policy the scores are rounded under: the
 * given one (--policy), else the analysis' lp, else the one that describes the dump (tsc_dump_policy:
 * recorded, else fitted on the dump's first step and layer, else bf16-fa2). On failure nothing stays open. */
tsc_status_t attn_src_open(const char *source, const char *dump, const char *policy, attn_src_t *s);
void attn_src_close(attn_src_t *s);
/* That policy decision for dump d at path, an the analysis folder or NULL: into policy (canonical) and source
 * (in words, 192 bytes). Also used by the paper's figures that draw attention rows (render/figure.c). */
tsc_status_t attn_scores_policy(const tsc_figure_src_t *an, tsc_dump_t *d, const char *path, const char *given,
                                char policy[TSC_POLICY_STR_MAX], char source[192]);
/* summary.json's record of (step, layer, head), or NULL (no analysis folder, head not analysed). */
const tsc_jv_t *attn_src_record(const attn_src_t *s, long long step, int layer, int head);

/* The input tokens of one (step, batch row), when the dump has them (tsc_dump.h): kind 0 none,
 * 1 ids only, 2 ids and text (display form). A step whose tokens cannot be read counts as having
 * none (the patterns are drawn all the same). */
typedef struct {
    int kind, T;
    int64_t *ids;                             /* [T] (kind >= 1) */
    char (*text)[TSC_DUMP_TOKEN_TEXT_CAP];    /* [T] (kind 2) */
} attn_tokens_t;

/* Reads them (kind 0 and nothing allocated when there are none); TSC_ERR_NOMEM only. */
tsc_status_t attn_tokens_read(tsc_dump_t *d, long long step, int b, attn_tokens_t *t);
void attn_tokens_free(attn_tokens_t *t);
/* Token i as text to show, into buf (cap >= 16): kind 2 its text in the dump's display form
 * (tsc_dump_read_tokens: escapes for controls, bidi controls and line separators), cut to cap;
 * kind 1 "id N"; kind 0 "". */
void attn_token_text(const attn_tokens_t *t, int i, char *buf, size_t cap);

#endif
