/* tsc_check.h: the consistency check (`tilescope check`): are a dump's captured O and LSE what
 * attention computes from its captured q, k, v? Kernel-agnostic: the check never reads the dump's
 * policy for its bounds; it recomputes S = α·q kᵀ (the dump's scale, causal flag and GQA mapping),
 * the softmax and P·V in FP64 and holds the captured tensors to bounds derived from the formats the
 * dump stores them in (docs/CHECK.md has every formula). A silently wrong kernel (the O of one key
 * tile dropped, O = Ō/ℓ' with a wrong ℓ', an LSE in the wrong units) is flagged with its rows and tiles.
 *
 *   tsc_check_opts_t o; tsc_check_opts_init(&o);
 *   o.dump_path = "run.h5";
 *   tsc_check_t *c;
 *   if (tsc_check_run(&o, &c) != TSC_OK) puts(tsc_error_last());
 *   printf("%s\n", c->n_bad ? "inconsistent" : "consistent");
 *   tsc_json_t j; tsc_json_init(&j); tsc_check_json(c, &j); tsc_check_free(c);
 *
 * Per (step, layer, query head), over the selected batch rows, each query row t of batch row b:
 *   LSE       |log Σ_j exp(S_tj − LSE_t)| ≤ λ_t                (rows failing: lse_bad)
 *   O         |O_td − Ô_td| ≤ ulp_O(|Ô_td|) + β_t·Σ_j P_tj|V_jd| for every feature d (rows failing: o_bad)
 *   saturated R_P(P_max) = 1 while another entry of the row is non-zero in P's format, or more than
 *             u_P of the row's mass lies in entries exp(S_tj − m_t) that round to zero in P's format
 *   non-finite a NaN or Inf in q, k, v, o or lse: counted by tile (rows of tile_q queries for q, o,
 *             lse; tile_k keys for k, v); rows touching one are not held to the bounds
 * Ô = softmax(S)·V and P = softmax(S) in FP64; λ_t, β_t, u_P, ulp_O: docs/CHECK.md. A verdict per
 * head: the union of TSC_CHECK_* flags; inconsistent = O, LSE or non-finite (saturation is a
 * property of the data that a kernel's result may suffer from, reported, not an inconsistency). */
#ifndef TSC_CHECK_H
#define TSC_CHECK_H

#include "tsc_export.h"

#include <stddef.h>
#include <stdint.h>

#include "tsc_json.h"
#include "tsc_progress.h"
#include "tsc_select.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tsc_comm;

/* Verdict bits of one head. */
enum {
    TSC_CHECK_O_BAD = 1,        /* some row of O outside its bound */
    TSC_CHECK_LSE_BAD = 2,      /* some row's LSE outside its bound */
    TSC_CHECK_SATURATED = 4,    /* some row saturates P's format (reported; not an inconsistency) */
    TSC_CHECK_NONFINITE = 8,    /* a NaN or Inf in q, k, v, o or lse */
    TSC_CHECK_INCONSISTENT = TSC_CHECK_O_BAD | TSC_CHECK_LSE_BAD | TSC_CHECK_NONFINITE
};

/* Rows and tiles listed per head, worst first. */
#define TSC_CHECK_WORST 5

typedef struct {
    int b, t;        /* batch row, query row */
    double ratio;    /* error / bound (> 1 fails); saturated rows: 1 − P_max (the list holds the largest) */
    double err;      /* O: max |O − Ô| over the row's features; LSE: log Σ exp(S − LSE) (signed);
                        saturated rows: 1 − P_max */
    int key_tile;    /* O: the key tile whose dropped contribution explains the row's error best
                        (the residual O − Ô closest to −Σ_{j in tile} P_tj V_j); -1 when none is within
                        half the residual's norm */
} tsc_check_row_t;

typedef struct {
    char tensor[4];  /* "q", "k", "v", "o", "lse" */
    int b, tile;     /* batch row; tile index: rows [tile·tile_q, ...) or keys [tile·tile_k, ...) */
    int64_t count;   /* non-finite elements in it */
} tsc_check_tile_t;

typedef struct {
    long long step;
    int layer, head;
    unsigned verdict;             /* TSC_CHECK_* bits */
    int has_lse;                  /* 0: the dump holds no lse (the O check alone) */
    char p_format[16];            /* the format P is held to for this head: the run's, or coarser when the head's
                                     q, k, v or o values all lie in a coarser one ("" when not stored) */
    int p_fmt;                    /* the same as a tsc_format_t */
    int stored;                   /* 0: a capture that kept some heads never wrote this one in q or o
                                     (heads_stored, docs/FORMAT.md §1.3): not checked, verdict "not stored" */
    int64_t rows;                 /* query rows checked (batch rows x T) */
    int64_t o_bad, lse_bad, saturated, nonfinite_rows;
    int64_t nonfinite;            /* non-finite elements of q, k, v, o, lse */
    double o_worst, lse_worst;    /* max error/bound ratio (0 when nothing was checked) */
    int n_o_rows, n_lse_rows, n_sat_rows, n_tiles, n_o_tiles;
    tsc_check_row_t o_rows[TSC_CHECK_WORST], lse_rows[TSC_CHECK_WORST], sat_rows[TSC_CHECK_WORST];
    tsc_check_tile_t tiles[TSC_CHECK_WORST];   /* non-finite, most first */
    tsc_check_tile_t o_tiles[TSC_CHECK_WORST]; /* query tiles ("o") with the most O rows failing */
} tsc_check_head_t;

typedef struct {
    const char *dump_path;       /* required */
    tsc_select_t sel;            /* default all */
    int first_step_only;         /* 1: only the first selected step (what diagnose checks); default 0: every one */
    tsc_progress_t *progress;    /* (step, layer) pairs checked, or NULL */
    const struct tsc_comm *comm; /* NULL (default): this process checks every head. Else collective over the
                                    job's processes (tsc_comm.h): head record k (in step, layer, head order) is
                                    computed by process k mod size and rank 0 gathers them, so its result is
                                    the one-process result bit for bit; elsewhere the result holds only this
                                    process's records and its totals are partial */
} tsc_check_opts_t;

typedef struct {
    char *dump_path;
    char selection[512];
    char dtype_qkv[16], dtype_o[16], dtype_lse[16];  /* formats the bounds used ("" lse: absent) */
    char p_format[16];            /* the coarsest format any head's P was held to (the coarsest stored format of
                                     q, k, v, or coarser where the values say so; tsc_check_head_t.p_format) */
    double u_in, u_s, u_o, u_lse; /* unit roundoffs (docs/CHECK.md) */
    int tile_q, tile_k;           /* the tiles non-finite counts and key tiles use */
    char tile_source[64];         /* "the dump's tile_q, tile_k", "the recorded policy's", "default 64 x 64" */
    int n_steps, n_pairs;
    long long first_step;         /* the first step checked */
    int n_heads;                  /* entries of heads[] */
    int n_bad;                    /* heads with an inconsistency (TSC_CHECK_INCONSISTENT) */
    int n_saturated;              /* heads with saturated rows */
    int n_not_stored;             /* heads the capture did not store (not checked) */
    int64_t rows, o_bad, lse_bad, saturated, nonfinite;
    tsc_check_head_t *heads;      /* [n_heads], step, layer, head order */
} tsc_check_t;

TSC_API void tsc_check_opts_init(tsc_check_opts_t *o);
/* Opens the dump, checks q, k, v and o in every selected (step, layer) before any work (a missing o
 * is TSC_ERR_MISSING: "<dump>: step S layer L: no dataset 'o' (the captured O the check holds to
 * softmax(S)·V)"), then reads one head at a time (q, o, lse of the head, k, v of its kv head) and
 * checks it. Non-finite values are counted, never an error. TSC_ERR_MISSING for an empty selection,
 * the dump's errors otherwise. *out NULL on failure; the dump is closed in every case. */
TSC_API tsc_status_t tsc_check_run(const tsc_check_opts_t *o, tsc_check_t **out);
/* The result as one JSON object (keys in docs/CHECK.md). */
TSC_API void tsc_check_json(const tsc_check_t *c, tsc_json_t *j);
/* The short form diagnose stores in summary.json's diagnosis.check: "checked": true, "first_step", "steps",
 * the counts and up to TSC_CHECK_WORST inconsistent heads (docs/FORMAT.md §3). */
TSC_API void tsc_check_json_summary(const tsc_check_t *c, tsc_json_t *j);
/* "ok", "O inconsistent", "LSE inconsistent", "saturated", "non-finite", or a combination joined by
 * " + " into buf. Returns buf. */
TSC_API const char *tsc_check_verdict_str(unsigned verdict, char *buf, size_t size);
/* One line: "consistent: 24 heads, 1536 rows" or "inconsistent: 2 of 24 heads (O 37 rows, LSE 0
 * rows, non-finite 1)". Returns buf. */
TSC_API const char *tsc_check_sentence(const tsc_check_t *c, char *buf, size_t size);
TSC_API void tsc_check_free(tsc_check_t *c);  /* NULL: no-op */

#ifdef __cplusplus
}
#endif
#endif
