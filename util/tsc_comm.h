/* tsc_comm.h: the processes of one job, as the library sees them (docs/DISTRIBUTED.md).
 *
 * A job that can run on several processes (training data-parallel, diagnose over work items)
 * takes a const tsc_comm_t * (an options field; NULL means one process). The library never calls
 * MPI itself: libtilescope has no MPI dependency. A program supplies the operations: the
 * `tilescope` program's MPI communicator (cli/mpi.c, built when CMake finds MPI) wraps
 * MPI_COMM_WORLD, and tsc_comm_serial() is the one-process communicator every job uses without.
 *
 * The operations are blocking and collective where named so (every rank calls them in the same
 * order); each returns TSC_OK or an error with the detail set. Point-to-point send/recv carry
 * bytes whose length both sides know; the derived operations below build what jobs need on them,
 * with a fixed order, so a result never depends on message timing. */
#ifndef TSC_COMM_H
#define TSC_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "tsc_export.h"
#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tsc_comm {
    int rank, size;   /* this process and the job's count, 0 <= rank < size */
    const char *name; /* "serial", "mpi" */
    void *ctx;        /* the implementation's state, passed to every operation */
    /* n bytes to rank dst / from rank src (src != rank) */
    tsc_status_t (*send)(void *ctx, int dst, const void *buf, size_t n);
    tsc_status_t (*recv)(void *ctx, int src, void *buf, size_t n);
    /* collective: root's n bytes into every rank's buf */
    tsc_status_t (*bcast)(void *ctx, int root, void *buf, size_t n);
    /* collective: v[0..n) replaced by the element-wise maximum over ranks */
    tsc_status_t (*max_i64)(void *ctx, int64_t *v, int n);
    /* collective */
    tsc_status_t (*barrier)(void *ctx);
} tsc_comm_t;

/* The one-process communicator: rank 0 of 1; collectives are no-ops, send/recv are errors. */
TSC_API const tsc_comm_t *tsc_comm_serial(void);

/* c, or the serial communicator when c is NULL. */
TSC_API const tsc_comm_t *tsc_comm_or_serial(const tsc_comm_t *c);

/* Collective: every rank's bytes gathered at root in rank order. At root *out gets a malloc'd
 * buffer of every rank's bytes back to back and lens[r] (an array of c->size) each rank's count;
 * elsewhere *out is NULL. Rank r's message goes straight to root; root receives in rank order. */
TSC_API tsc_status_t tsc_comm_gather(const tsc_comm_t *c, int root, const void *buf, size_t n, void **out,
                                     size_t *lens);

/* Collective: root's malloc'd buffer (*buf, *n) sent to every rank; elsewhere *buf gets a malloc'd
 * copy and *n its length. */
TSC_API tsc_status_t tsc_comm_bcast_alloc(const tsc_comm_t *c, int root, void **buf, size_t *n);

/* Collective: the status of every rank agreed on. Returns TSC_OK when every rank passed st ==
 * TSC_OK; otherwise the lowest failing rank's status, and, on the ranks that did not fail, an
 * error "rank R failed: <its message>" (the failing rank keeps its own detail). So every rank
 * leaves a job at the same point and rank 0 can name the rank that failed. */
TSC_API tsc_status_t tsc_comm_agree(const tsc_comm_t *c, tsc_status_t st);

#ifdef __cplusplus
}
#endif

#endif
