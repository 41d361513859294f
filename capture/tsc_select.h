/* tsc_select.h: the selection spec every command and the capture API share: which steps,
 * layers and heads (and batch rows) to keep or to look at.
 *
 * Grammar (whitespace not allowed):
 *   spec  := item ("," item)*         item := key "=" set | set-item continuing the previous key
 *   key   := steps | layers | heads | batches
 *   set   := "all" | set-item ("," set-item)*
 *   set-item := N | start:stop | start:stop:stride | start: | :stop | start::stride
 * Ranges are half-open like Python slices: "6000:7000:10" is 6000, 6010, ..., 6990; "5:" is
 * every value >= 5. A key that does not appear selects all. Examples:
 *   "steps=6000:7000:10,layers=1,heads=all"   "layers=0,1,heads=1:12:2"   "steps=100"
 * The flag forms use the set grammar alone: --steps 6000:7000:10 --layers 1,3 --heads all.
 *
 *   tsc_select_t sel;
 *   if (tsc_select_parse(&sel, "steps=6000:7000:10,layers=1") != TSC_OK) usage(tsc_error_last());
 *   if (flag_heads) tsc_select_set_parse(&sel.heads, flag_heads);   // --heads overrides
 *   if (tsc_select_has(&sel, step, layer, head)) ...;                // head < 0: do not test heads
 *   char buf[256]; tsc_select_format(&sel, buf, sizeof buf);        // "steps=6000:7000:10,layers=1,..."
 */
#ifndef TSC_SELECT_H
#define TSC_SELECT_H

#include "tsc_export.h"

#include <stddef.h>

#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSC_SELECT_MAX_ITEMS 32

/* One range start:stop:stride (stop exclusive; TSC_SELECT_OPEN when open-ended). */
#define TSC_SELECT_OPEN 0x7fffffffffffffffLL
typedef struct {
    long long start, stop, stride;
} tsc_select_range_t;

/* A set of non-negative integers: all, or the union of up to TSC_SELECT_MAX_ITEMS ranges. */
typedef struct {
    int all;  /* 1: every value */
    int n;    /* number of ranges (0 with all == 0: the empty set) */
    tsc_select_range_t item[TSC_SELECT_MAX_ITEMS];
} tsc_select_set_t;

typedef struct {
    tsc_select_set_t steps, layers, heads, batches;
} tsc_select_t;

/* Selects everything. */
TSC_API void tsc_select_init(tsc_select_t *s);
TSC_API void tsc_select_set_all(tsc_select_set_t *set);

/* Parses a full spec into s (keys not named select all). TSC_ERR_ARG with a message naming the
 * offending text on a syntax error, an unknown key, a negative number, stride <= 0,
 * stop <= start, or more than TSC_SELECT_MAX_ITEMS ranges; s is then set to select all.
 * spec NULL or "" selects all. */
TSC_API tsc_status_t tsc_select_parse(tsc_select_t *s, const char *spec);
/* Parses the set grammar alone ("all", "1,3", "6000:7000:10"); same errors. */
TSC_API tsc_status_t tsc_select_set_parse(tsc_select_set_t *set, const char *text);

/* Membership. */
TSC_API int tsc_select_set_has(const tsc_select_set_t *set, long long v);
/* 1 when step and layer are selected, and head too unless head < 0. */
TSC_API int tsc_select_has(const tsc_select_t *s, long long step, long long layer, long long head);

/* For callers that hold a selection as an opaque buffer (the Python package through ctypes): the
 * size of tsc_select_t to allocate, and whether step is among its steps (0 for a NULL s). */
TSC_API size_t tsc_select_size(void);
TSC_API int tsc_select_has_step(const tsc_select_t *s, long long step);

/* Number of selected values in [0, n) (e.g. heads among n_head). */
long long tsc_select_set_count(const tsc_select_set_t *set, long long n);

/* Canonical text of the set ("all", "1,3,5:9:2") / of the spec ("steps=...,layers=...,heads=...,
 * batches=..."); truncated to cap (always NUL-terminated). Returns buf. */
TSC_API const char *tsc_select_set_format(const tsc_select_set_t *set, char *buf, size_t cap);
TSC_API const char *tsc_select_format(const tsc_select_t *s, char *buf, size_t cap);

/* Why sel matches nothing in dump d, and what d holds, for an error message ("the selection
 * '...' " goes before it): "matches none of the dump's steps (steps=99); the dump has steps 0-2; layers
 * 0-11; heads 0-11; batch rows 0-3" (each part of sel that matches none of d's values is named;
 * runs print as "0-11" or "0-99000 every 1000"). Truncated to cap, always NUL-terminated. Returns buf. */
struct tsc_dump;
/* The ascending values v[0..n) as runs for a message: "0-11", "0-99000 every 1000", "3, 7", ending
 * in ", ... (N in all)" when cap runs out. Always NUL-terminated. Returns buf. */
TSC_API const char *tsc_select_runs_text(const long long *v, int n, char *buf, size_t cap);
TSC_API const char *tsc_select_miss_text(const tsc_select_t *sel, struct tsc_dump *d, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
