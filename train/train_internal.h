/* train_internal.h: what the trainer's files share (run.cfg, checkpoints). */
#ifndef TSC_TRAIN_INTERNAL_H
#define TSC_TRAIN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tsc_train.h"

/* Settings read back from run.cfg: the options plus the storage their strings point into. */
typedef struct {
    tsc_train_opts_t o;
    char model[256], data[1024], capture[512], batches[1024], flight_layers[256];
    char policy[TSC_TRAIN_MAX_POLICIES][600];
} tsc_train_cfg_t;

/* Writes every setting of o as "key = value" lines (run.cfg; also embedded in checkpoints). The
 * text is malloc'ed; NULL when out of memory. */
char *tsc_train_cfg_text(const tsc_train_opts_t *o, int threads);
/* Parses that text (from file name `what`, for messages) into c; c->o points into c. */
tsc_status_t tsc_train_cfg_parse(const char *text, const char *what, tsc_train_cfg_t *c);

/* A checkpoint: the settings text, steps completed, and params / AdamW m, v (n elements of
 * elsize bytes each). */
typedef struct {
    char *cfg_text;       /* malloc'ed by load */
    long long steps_done;
    int prec;
    size_t n, elsize;
    void *params, *m, *v; /* caller's buffers on save; on load filled into caller's buffers */
} tsc_ckpt_t;

tsc_status_t tsc_ckpt_save(const char *path, const tsc_ckpt_t *c);
/* Reads the header of path: cfg_text (malloc'ed), steps_done, prec, n, elsize. */
tsc_status_t tsc_ckpt_load_header(const char *path, tsc_ckpt_t *c);
/* Reads the arrays into c->params, m, v (each n * elsize bytes) and checks the checksum. */
tsc_status_t tsc_ckpt_load_data(const char *path, tsc_ckpt_t *c);

#endif
