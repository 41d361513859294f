/* fuzz_target.h: the shape of a fuzz target (fuzz/fuzz_*.c).
 *
 * Each target is one function, tsc_fuzz_<name>(data, size), that feeds the bytes to one reader of
 * the library and returns 0. Built with -DTSC_FUZZ_LIBFUZZER (the -DTSC_FUZZ=ON clang build) the
 * file also defines libFuzzer's entry point LLVMFuzzerTestOneInput; built without it (the normal
 * build) the same function is called by fuzz/replay.c, which runs the committed inputs of
 * fuzz/corpus/ and fuzz/regressions/ through it as a ctest test.
 *
 * A target signals a bug by crashing: the sanitizers do it for memory errors and undefined
 * behaviour, TSC_FUZZ_CHECK for a broken invariant (e.g. a policy that does not round-trip).
 */
#ifndef TSC_FUZZ_TARGET_H
#define TSC_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TSC_FUZZ_LIBFUZZER
#define TSC_FUZZ_ENTRY(name) \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size); \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return tsc_fuzz_##name(data, size); }
#else
#define TSC_FUZZ_ENTRY(name)
#endif

/* TSC_FUZZ_TARGET(policy) { ...body using data, size... } */
#define TSC_FUZZ_TARGET(name) \
    int tsc_fuzz_##name(const uint8_t *data, size_t size); \
    TSC_FUZZ_ENTRY(name) \
    int tsc_fuzz_##name(const uint8_t *data, size_t size)

/* Aborts (so libFuzzer keeps the input) when cond is false; active in every build type. */
#define TSC_FUZZ_CHECK(cond, ...) \
    do { \
        if (!(cond)) { \
            fprintf(stderr, "fuzz check failed (%s:%d): %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__); \
            fputc('\n', stderr); \
            abort(); \
        } \
    } while (0)

/* A NUL-terminated copy of the input (the caller frees); NULL when out of memory. */
static inline char *tsc_fuzz_cstr(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) return NULL;
    if (size) memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

#endif
