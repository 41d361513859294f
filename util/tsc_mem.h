/* tsc_mem.h: the memory budget that bounds allocations sized by untrusted input.
 *
 * A dump declares its own sizes (seq_len, head_dim, dataset extents); code that allocates from
 * them asks tsc_mem_check first, so a small hostile file cannot make tilescope allocate more
 * than the budget (docs/SECURITY.md):
 *
 *   uint64_t need = (uint64_t)T * T * sizeof(double);
 *   if (tsc_mem_check(need, "the score matrix of one head") != TSC_OK) return TSC_ERR_UNSUPPORTED;
 *   double *s = malloc(need);
 *
 * The budget is half of the physical memory (sysconf), or the environment variable
 * TSC_MAX_MEMORY when set: a byte count with an optional K, M, G or T suffix (powers of 1024,
 * e.g. "512M", "8G"); an unparsable value is ignored (the default applies). It is read on every
 * call, so tests and long-running hosts may change it.
 */
#ifndef TSC_MEM_H
#define TSC_MEM_H

#include "tsc_export.h"

#include <stdint.h>

#include "tsc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The budget in bytes (never 0: 1 GiB when the physical memory cannot be read). */
TSC_API uint64_t tsc_mem_budget(void);
/* TSC_OK when bytes <= tsc_mem_budget(); else TSC_ERR_UNSUPPORTED with the detail
 * "<what> needs N bytes (X GiB), above the memory budget of M bytes (Y GiB); raise it with
 * --max-memory or TSC_MAX_MEMORY=<bytes> if the input is trusted". what may be NULL ("an allocation"). */
TSC_API tsc_status_t tsc_mem_check(uint64_t bytes, const char *what);
/* Parses "123", "64K", "512M", "8G", "1T" (case-insensitive suffix) into *out.
 * TSC_ERR_ARG for anything else (empty, negative, trailing text, overflow). */
TSC_API tsc_status_t tsc_mem_parse(const char *s, uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif
