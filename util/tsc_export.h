/* tsc_export.h: which symbols libtilescope exports, and its version.
 *
 * The library is compiled with -fvisibility=hidden; TSC_API marks the public functions of
 * the tsc_*.h headers, so helpers shared between the library's own files stay internal and
 * a binding (ctypes, cffi) sees exactly the documented surface.
 *
 *   printf("libtilescope %s\n", tsc_version());   // "0.1.0"
 */
#ifndef TSC_EXPORT_H
#define TSC_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define TSC_API __attribute__((visibility("default")))
#else
#define TSC_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version, "MAJOR.MINOR.PATCH" (the same string as `tilescope --version`). Never NULL. */
TSC_API const char *tsc_version(void);
/* The version as MAJOR*10000 + MINOR*100 + PATCH, for bindings that compare numbers. */
TSC_API int tsc_version_number(void);

#ifdef __cplusplus
}
#endif
#endif
