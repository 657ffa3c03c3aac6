/*
 * hpml__shm_copy (src/comm/shm.c), which the shm allreduce uses to fill the pipeline
 * buffers: plain memcpy or streaming stores with a head up to a cache line, whole lines,
 * and a tail. Every destination offset within a line, a few source offsets, sizes around
 * the thresholds: the copy is exact and touches nothing outside [dst, dst + n).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"

#define GUARD 64

static void test_copy_exact(void **state)
{
    static const size_t sizes[] = {0, 1, 15, 63, 64, 65, 255, 256, 257, 1000, 4113, 100003};
    static const size_t src_offs[] = {0, 1, 7, 32};
    const size_t cap = 100003 + 2 * GUARD + 64;
    unsigned char *src = malloc(cap), *dst = malloc(cap);

    (void)state;
    assert_non_null(src);
    assert_non_null(dst);
    for (size_t i = 0; i < cap; i++)
        src[i] = (unsigned char)(i * 131 + 7);
    for (int nt = 0; nt < 2; nt++)
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
            for (size_t so = 0; so < sizeof(src_offs) / sizeof(src_offs[0]); so++)
                for (size_t doff = 0; doff < 64; doff++) {
                    size_t n = sizes[k];
                    unsigned char *d = dst + GUARD + doff;
                    const unsigned char *s = src + src_offs[so];

                    memset(dst, 0xa5, cap);
                    hpml__shm_copy(d, s, n, nt);
                    if (memcmp(d, s, n) != 0)
                        fail_msg("nt=%d n=%zu dst offset %zu src offset %zu: wrong bytes", nt, n,
                                 doff, src_offs[so]);
                    for (unsigned char *p = dst; p < d; p++)
                        if (*p != 0xa5)
                            fail_msg("nt=%d n=%zu dst offset %zu: wrote before dst", nt, n, doff);
                    for (unsigned char *p = d + n; p < dst + cap; p++)
                        if (*p != 0xa5)
                            fail_msg("nt=%d n=%zu dst offset %zu: wrote past the end", nt, n, doff);
                }
    free(src);
    free(dst);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copy_exact),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
