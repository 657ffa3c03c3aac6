/*
 * LD_PRELOAD shim for tests/cli/fail_alone.sh: every allocation of FAIL_ALLOC_MIN bytes
 * or more fails with ENOMEM, so that one rank of a job can run out of memory where the
 * others do not. Smaller ones go to glibc's own allocator.
 */
#define _POSIX_C_SOURCE 200112L /* posix_memalign */
#include <errno.h>
#include <stdlib.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_memalign(size_t align, size_t size);

static int refused(size_t size)
{
    const char *s = getenv("FAIL_ALLOC_MIN");

    return s != NULL && size >= strtoull(s, NULL, 10);
}

void *malloc(size_t size)
{
    if (refused(size)) {
        errno = ENOMEM;
        return NULL;
    }
    return __libc_malloc(size);
}

void *aligned_alloc(size_t align, size_t size)
{
    if (refused(size)) {
        errno = ENOMEM;
        return NULL;
    }
    return __libc_memalign(align, size);
}

int posix_memalign(void **out, size_t align, size_t size)
{
    if (refused(size))
        return ENOMEM;
    *out = __libc_memalign(align, size);
    return *out != NULL ? 0 : ENOMEM;
}
