/* comm.c: the one-process communicator and the derived operations of tsc_comm.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsc_comm.h"

static tsc_status_t serial_p2p(void *ctx, int peer, void *buf, size_t n) {
    (void)ctx; (void)buf; (void)n;
    return tsc_error_set(TSC_ERR_ARG, "one process: there is no rank %d to exchange with", peer);
}
static tsc_status_t serial_send(void *ctx, int dst, const void *buf, size_t n) { return serial_p2p(ctx, dst, (void *)buf, n); }
static tsc_status_t serial_recv(void *ctx, int src, void *buf, size_t n) { return serial_p2p(ctx, src, buf, n); }
static tsc_status_t serial_bcast(void *ctx, int root, void *buf, size_t n) { (void)ctx; (void)root; (void)buf; (void)n; return TSC_OK; }
static tsc_status_t serial_max(void *ctx, int64_t *v, int n) { (void)ctx; (void)v; (void)n; return TSC_OK; }
static tsc_status_t serial_barrier(void *ctx) { (void)ctx; return TSC_OK; }

static const tsc_comm_t serial = {0, 1, "serial", NULL, serial_send, serial_recv, serial_bcast, serial_max, serial_barrier};

const tsc_comm_t *tsc_comm_serial(void) { return &serial; }
const tsc_comm_t *tsc_comm_or_serial(const tsc_comm_t *c) { return c ? c : &serial; }

tsc_status_t tsc_comm_gather(const tsc_comm_t *c, int root, const void *buf, size_t n, void **out, size_t *lens) {
    c = tsc_comm_or_serial(c);
    *out = NULL;
    if (c->rank != root) {
        uint64_t len = n;
        tsc_status_t st = c->send(c->ctx, root, &len, sizeof len);
        if (st == TSC_OK && n) st = c->send(c->ctx, root, buf, n);
        return st;
    }
    tsc_status_t st = TSC_OK;
    size_t total = 0;
    for (int r = 0; r < c->size; r++) {
        uint64_t len = n;
        if (r != root && (st = c->recv(c->ctx, r, &len, sizeof len)) != TSC_OK) return st;
        lens[r] = (size_t)len;
        /* every rank's message must be received even after an allocation failure, so the
         * lengths come first and the payloads after, in rank order */
        total += (size_t)len;
    }
    unsigned char *all = malloc(total ? total : 1);
    if (!all) return tsc_error_set(TSC_ERR_NOMEM, "gathering %zu bytes from %d ranks", total, c->size);
    size_t at = 0;
    for (int r = 0; r < c->size; r++) {
        if (r == root) {
            if (n) memcpy(all + at, buf, n);
        } else if (lens[r] && st == TSC_OK) {
            st = c->recv(c->ctx, r, all + at, lens[r]);
        }
        at += lens[r];
    }
    if (st != TSC_OK) { free(all); return st; }
    *out = all;
    return TSC_OK;
}

tsc_status_t tsc_comm_bcast_alloc(const tsc_comm_t *c, int root, void **buf, size_t *n) {
    c = tsc_comm_or_serial(c);
    if (c->size == 1) return TSC_OK;
    uint64_t len = c->rank == root ? *n : 0;
    tsc_status_t st = c->bcast(c->ctx, root, &len, sizeof len);
    if (st != TSC_OK) return st;
    if (c->rank != root) {
        *buf = malloc(len ? len : 1);
        *n = (size_t)len;
        if (!*buf) return tsc_error_set(TSC_ERR_NOMEM, "receiving %llu bytes", (unsigned long long)len);
    }
    return len ? c->bcast(c->ctx, root, *buf, (size_t)len) : TSC_OK;
}

tsc_status_t tsc_comm_agree(const tsc_comm_t *c, tsc_status_t st) {
    c = tsc_comm_or_serial(c);
    if (c->size == 1) return st;
    /* the lowest failing rank: max over ranks of (size - rank) among the failing ones */
    int64_t v[2] = {st != TSC_OK ? c->size - c->rank : 0, 0};
    tsc_status_t cs = c->max_i64(c->ctx, v, 1);
    if (cs != TSC_OK) return cs;
    if (!v[0]) return TSC_OK;
    int bad = c->size - (int)v[0];
    /* the failing rank's status and message, so every rank can say what failed */
    char msg[1024] = "";
    int64_t code = st;
    if (c->rank == bad) snprintf(msg, sizeof msg, "%s", tsc_error_last());
    if ((cs = c->bcast(c->ctx, bad, &code, sizeof code)) != TSC_OK) return cs;
    if ((cs = c->bcast(c->ctx, bad, msg, sizeof msg)) != TSC_OK) return cs;
    if (c->rank == bad) return st;
    return tsc_error_set((tsc_status_t)code, "rank %d failed: %s", bad, msg);
}
