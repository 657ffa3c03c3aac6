/*
 * LD_PRELOAD shim for tests/cli/ml_errors.sh: rename() to a name containing
 * $FAIL_RENAME, or equal to $FAIL_RENAME_EXACT, fails with EIO, so that a write can fail
 * after every check has passed. Every other rename() is glibc's.
 */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h> /* rename */
#include <stdlib.h>
#include <string.h>

int rename(const char *from, const char *to)
{
    static int (*real)(const char *, const char *);
    const char *part = getenv("FAIL_RENAME"), *exact = getenv("FAIL_RENAME_EXACT");

    if (real == NULL) {
        void *sym = dlsym(RTLD_NEXT, "rename");

        memcpy(&real, &sym, sizeof(real)); /* ISO C has no object-to-function cast */
    }
    if ((part != NULL && *part != '\0' && strstr(to, part) != NULL) ||
        (exact != NULL && strcmp(to, exact) == 0)) {
        errno = EIO;
        return -1;
    }
    return real(from, to);
}
