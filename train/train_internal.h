/* train_internal.h: what the trainer's files share: the precision names (settings.c), run.cfg
 * and checkpoints (ckpt.c), the opening of a run folder's files (ckpt.c). Calls go one way:
 * settings.c <- ckpt.c <- train.c. */
#ifndef TSC_TRAIN_INTERNAL_H
#define TSC_TRAIN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tsc_train.h"

/* "fp32", "bf16", "fp64": a precision's name in run.cfg and in messages (fp32 for any other value). */
const char *tsc_train_prec_name(tsc_prec_t p);

/* Settings read back from run.cfg: the options plus the storage their strings point into. */
typedef struct {
    tsc_train_opts_t o;
    char model[256], data[1024], capture[512], batches[1024], flight_layers[256], fork_of[1100];
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

/* The bytes of a checkpoint whose settings text is cfg_len bytes long and whose arrays hold n
 * elements of elsize bytes each: header, settings, parameters, AdamW m and v, checksum. */
unsigned long long tsc_ckpt_size(unsigned long long cfg_len, unsigned long long n, unsigned long long elsize);
/* Decodes a checkpoint's fixed header from its first avail bytes (at least 40 are needed) for a
 * file of file_size bytes: c->steps_done, prec, n, elsize and *cfg_len, each checked (magic, a
 * settings text of at most 1 MiB, elsize 4 or 8 matching prec, n below 2^40, and file_size equal
 * to tsc_ckpt_size). TSC_ERR_FORMAT naming path otherwise. c->cfg_text is left alone. */
tsc_status_t tsc_ckpt_parse_header(const unsigned char *b, size_t avail, unsigned long long file_size,
                                   const char *path, tsc_ckpt_t *c, size_t *cfg_len);

/* Opens a file of a run folder (flags as open(2)'s: O_RDONLY, or O_WRONLY|O_APPEND|O_CREAT)
 * without following a symbolic link (O_NOFOLLOW, O_NONBLOCK, O_CLOEXEC) and checks with fstat that
 * it is a regular file. TSC_ERR_IO naming path: "is a symbolic link ...; refused", "not a regular
 * file ...; refused", or "cannot open: <strerror>". */
tsc_status_t tsc_train_file_open(const char *path, int flags, int *fd);

tsc_status_t tsc_ckpt_save(const char *path, const tsc_ckpt_t *c);
/* Reads the header of path: cfg_text (malloc'ed), steps_done, prec, n, elsize. */
tsc_status_t tsc_ckpt_load_header(const char *path, tsc_ckpt_t *c);
/* Reads the arrays into c->params, m, v (each n * elsize bytes) and checks the checksum. */
tsc_status_t tsc_ckpt_load_data(const char *path, tsc_ckpt_t *c);

#endif
