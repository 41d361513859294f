/* mem.c: the memory budget (tsc_mem.h). */
#include "tsc_mem.h"

#include <ctype.h>
#include <stdlib.h>
#include <unistd.h>

tsc_status_t tsc_mem_parse(const char *s, uint64_t *out) {
    if (!s || !isdigit((unsigned char)*s)) return tsc_error_set(TSC_ERR_ARG, "memory size '%s': expected digits", s ? s : "");
    uint64_t v = 0;
    const char *p = s;
    for (; isdigit((unsigned char)*p); p++) {
        if (v > (UINT64_MAX - 9) / 10) return tsc_error_set(TSC_ERR_ARG, "memory size '%s' is too large", s);
        v = v * 10 + (uint64_t)(*p - '0');
    }
    unsigned shift = 0;
    switch (toupper((unsigned char)*p)) {
    case 'K': shift = 10; p++; break;
    case 'M': shift = 20; p++; break;
    case 'G': shift = 30; p++; break;
    case 'T': shift = 40; p++; break;
    default: break;
    }
    if (*p == 'B' || *p == 'b') p++;  /* "512MB" reads as 512M */
    if (*p) return tsc_error_set(TSC_ERR_ARG, "memory size '%s': unexpected '%s' (use K, M, G or T)", s, p);
    if (shift && v > (UINT64_MAX >> shift)) return tsc_error_set(TSC_ERR_ARG, "memory size '%s' is too large", s);
    *out = v << shift;
    return TSC_OK;
}

uint64_t tsc_mem_budget(void) {
    const char *env = getenv("TSC_MAX_MEMORY");
    uint64_t v;
    if (env && *env) {
        if (tsc_mem_parse(env, &v) == TSC_OK) return v;
        tsc_error_clear();  /* a bad setting is ignored, not reported as the caller's error */
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return (uint64_t)1 << 30;
    return (uint64_t)pages * (uint64_t)page / 2;
}

tsc_status_t tsc_mem_check(uint64_t bytes, const char *what) {
    uint64_t budget = tsc_mem_budget();
    if (bytes <= budget) return TSC_OK;
    return tsc_error_set(TSC_ERR_UNSUPPORTED,
                         "%s needs %llu bytes (%.1f GiB), above the memory budget of %llu bytes (%.1f GiB); raise "
                         "it with --max-memory or TSC_MAX_MEMORY=<bytes> if the input is trusted",
                         what ? what : "an allocation", (unsigned long long)bytes, (double)bytes / 1073741824.0,
                         (unsigned long long)budget, (double)budget / 1073741824.0);
}
