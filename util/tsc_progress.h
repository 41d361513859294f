/* tsc_progress.h: how far a long library job has got, told through a callback (the library never
 * prints; `tilescope` draws a bar or plain lines on stderr from it, cli/progress.c).
 *
 * A job that takes a tsc_progress_t * (an options field, NULL by default) announces each phase
 * with its number of units (head records, (step, layer) pairs, heads examined ...) and then
 * ticks the units done so far, one call per unit or batch of units, from one thread at a time:
 *
 *   tsc_progress_begin(o->progress, "analysis", n_pairs * n_heads);
 *   for (...) { ...; tsc_progress_tick(o->progress, done); }
 *
 * Both are no-ops when p or p->fn is NULL. fn gets the phase, the units done and the phase's total;
 * done == total is the phase's last call. */
#ifndef TSC_PROGRESS_H
#define TSC_PROGRESS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tsc_progress {
    void (*fn)(void *user, const char *phase, long long done, long long total);
    void *user;        /* passed to fn */
    const char *phase; /* the current phase (a static string), set by tsc_progress_begin */
    long long total;   /* the current phase's units, set by tsc_progress_begin */
} tsc_progress_t;

/* Starts a phase of total units (fn is told 0 of total). */
static inline void tsc_progress_begin(tsc_progress_t *p, const char *phase, long long total) {
    if (!p) return;
    p->phase = phase;
    p->total = total;
    if (p->fn) p->fn(p->user, phase, 0, total);
}

/* done of the current phase's units are finished. */
static inline void tsc_progress_tick(tsc_progress_t *p, long long done) {
    if (p && p->fn) p->fn(p->user, p->phase, done, p->total);
}

#ifdef __cplusplus
}
#endif
#endif
