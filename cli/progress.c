/* progress.c: the progress of a long job on stderr (cli.h): a bar redrawn in place on a terminal,
 * plain lines otherwise (each tenth of a phase done, or every TSC_CLI_PROGRESS_EVERY_S seconds), nothing
 * with --quiet. The time left is the elapsed time of the phase scaled by the fraction still to do. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define TSC_CLI_PROGRESS_EVERY_S 5.0 /* plain lines: at least this often while a phase runs */
#define TSC_CLI_PROGRESS_REDRAW_S 0.1 /* the bar: at most this often */
#define TSC_CLI_BAR_WIDTH 24

static tsc_cli_progress_t *open_bar; /* the bar whose line is not ended yet */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "1:05" or "1:02:05" for s seconds, rounded down, or up with up ("0:00 left" only when done). */
static const char *clock_text(double s, int up, char *buf, size_t cap) {
    long t = (long)(s + (up ? 0.999 : 0));
    if (t >= 3600) snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
    return buf;
}

/* "elapsed 0:12, about 0:30 left" (no estimate before the first unit is done). */
static void timing_text(double elapsed, long long done, long long total, char *buf, size_t cap) {
    char e[32], l[32];
    if (done <= 0 || done >= total)
        snprintf(buf, cap, "elapsed %s", clock_text(elapsed, 0, e, sizeof e));
    else
        snprintf(buf, cap, "elapsed %s, about %s left", clock_text(elapsed, 0, e, sizeof e),
                 clock_text(elapsed * (double)(total - done) / (double)done, 1, l, sizeof l));
}

static void draw(void *user, const char *phase, long long done, long long total) {
    tsc_cli_progress_t *r = user;
    double t = now_s();
    if (!phase) phase = "";
    if (strcmp(r->phase, phase) != 0 || done == 0) { /* a new phase: its own clock */
        tsc_cli_progress_done();
        snprintf(r->phase, sizeof r->phase, "%s", phase);
        r->t0 = done == 0 ? t : r->prev; /* a phase first heard of after a unit began with the previous call */
        r->last = t;
        r->last_tenth = -1;
    }
    r->prev = t;
    if (total <= 0) return;
    if (done > total) done = total;
    int pct = (int)(100 * done / total), tenth = (int)(10 * done / total), last = done == total;
    char tm[96];
    timing_text(t - r->t0, done, total, tm, sizeof tm);
    if (r->tty) {
        if (!last && done && t - r->last < TSC_CLI_PROGRESS_REDRAW_S) return;
        char bar[TSC_CLI_BAR_WIDTH + 1];
        int fill = (int)(TSC_CLI_BAR_WIDTH * done / total);
        for (int i = 0; i < TSC_CLI_BAR_WIDTH; i++) bar[i] = i < fill ? '#' : '.';
        bar[TSC_CLI_BAR_WIDTH] = '\0';
        fprintf(stderr, "\r%s: [%s] %3d%% %lld/%lld %s, %s\033[K", r->cmd, bar, pct, done, total, phase, tm);
        r->bar_open = !last;
        open_bar = last ? NULL : r;
        if (last) fputc('\n', stderr);
    } else {
        if (!last && (done == 0 || (tenth == r->last_tenth && t - r->last < TSC_CLI_PROGRESS_EVERY_S))) return;
        fprintf(stderr, "%s: %3d%% (%lld/%lld %s), %s\n", r->cmd, pct, done, total, phase, tm);
        r->last_tenth = tenth;
    }
    r->last = t;
    fflush(stderr);
}

tsc_progress_t *tsc_cli_progress_init(tsc_cli_progress_t *r, const char *cmd, int quiet) {
    memset(r, 0, sizeof *r);
    r->cmd = cmd;
    r->tty = isatty(2);
    r->last_tenth = -1;
    r->prev = now_s();
    r->p.fn = draw;
    r->p.user = r;
    return quiet ? NULL : &r->p;
}

void tsc_cli_progress_done(void) {
    if (open_bar && open_bar->bar_open) fputc('\n', stderr);
    if (open_bar) open_bar->bar_open = 0;
    open_bar = NULL;
}

void tsc_cli_progress_report(tsc_cli_progress_t *r, const char *phase, long long done, long long total) {
    draw(r, phase, done, total);
}
