/* 64-byte aligned allocation: one pair of functions for all of hpml. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hpml/core.h"

void *hpml_malloc(size_t bytes)
{
    void *p = NULL;

    /* Round up so the size is a multiple of the alignment (aligned_alloc requires it)
     * and so vector loops may read a whole line past the end of tiny buffers. */
    if (bytes > SIZE_MAX - HPML_ALIGN)
        return NULL;
    bytes = (bytes + HPML_ALIGN - 1) / HPML_ALIGN * HPML_ALIGN;
    if (bytes == 0)
        bytes = HPML_ALIGN;
    if (posix_memalign(&p, HPML_ALIGN, bytes) != 0)
        return NULL;
    return p;
}

void *hpml_calloc(size_t n, size_t size)
{
    void *p;

    if (size != 0 && n > SIZE_MAX / size)
        return NULL;
    p = hpml_malloc(n * size);
    if (p != NULL)
        memset(p, 0, n * size);
    return p;
}

void hpml_free(void *p)
{
    free(p);
}
