/* version.c: the library's version, set by the build from the project version. */
#include "tsc_export.h"

#ifndef TSC_VERSION
#error "TSC_VERSION must be defined by the build"
#endif

const char *tsc_version(void) { return TSC_VERSION; }

int tsc_version_number(void) { return TSC_VERSION_MAJOR * 10000 + TSC_VERSION_MINOR * 100 + TSC_VERSION_PATCH; }
