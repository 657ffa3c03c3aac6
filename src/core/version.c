/* The library's version and the source it was built from. */
#include "hpml/core.h"

/* HPML_BUILD_COMMIT, from the Makefile (build/<mpi>/gen/hpml_commit.h); builds that do
 * not make it (the fuzz targets) say "unknown". */
#if defined(__has_include)
#if __has_include("hpml_commit.h")
#include "hpml_commit.h"
#endif
#endif
#ifndef HPML_BUILD_COMMIT
#define HPML_BUILD_COMMIT "unknown"
#endif

const char *hpml_version(void)
{
    return HPML_VERSION_STRING;
}

const char *hpml_build_commit(void)
{
    return HPML_BUILD_COMMIT;
}
