/*
 * hpml__shm_copy (src/comm/shm.c), which the shm allreduce uses to fill the pipeline
 * buffers: plain memcpy or streaming stores with a head up to a cache line, whole lines,
 * and a tail. Every destination offset within a line, a few source offsets, sizes around
 * the thresholds: the copy is exact and touches nothing outside [dst, dst + n).
 * And the store-mode picker (hpml__shm_mode_pick/record) on a one-rank segment fed with
 * made-up timings: it follows the faster mode, and a size class that was idle for a long
 * gap after a long run of calls measures both modes again rather than keep a stale choice.
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

/* One call of 1 MiB: the picker's mode, timed at `plain` or `nt` seconds per byte. */
static int mode_call(hpml_shm_t *s, double plain, double nt)
{
    size_t bytes = (size_t)1 << 20;
    int m = hpml__shm_mode_pick(s, bytes);

    hpml__shm_mode_record(s, bytes, m, (m ? nt : plain) * (double)bytes);
    s->step += 4; /* four 256 KiB steps */
    return m;
}

/* Calls of streaming stores among the next `calls` calls. */
static int nt_calls(hpml_shm_t *s, int calls, double plain, double nt, uint64_t gap)
{
    int k = 0;

    for (int i = 0; i < calls; i++) {
        s->step += gap;
        k += mode_call(s, plain, nt);
    }
    return k;
}

static void test_mode_pick(void **state)
{
    static hpml_shm_t s;
    char *peer[1];
    uint64_t stale = (uint64_t)1 << 14;

    (void)state;
    peer[0] = aligned_alloc(64, HPML_SHM_CTRL_BYTES);
    assert_non_null(peer[0]);
    memset(peer[0], 0, HPML_SHM_CTRL_BYTES);
    memset(&s, 0, sizeof(s));
    s.nt = -1;
    s.local_size = 1;
    s.w.peer = peer;
    /* Warm-up: P P N N three times, then the faster mode (plain). */
    assert_int_equal(nt_calls(&s, 12, 1.0, 3.0, 0), 6);
    assert_int_equal(nt_calls(&s, 28, 1.0, 3.0, 0), 0);
    /* Plain stores turn 10x slower: streaming within 3 calls, and it stays. */
    assert_int_equal(nt_calls(&s, 3, 10.0, 3.0, 0) >= 1, 1);
    assert_int_equal(nt_calls(&s, 27, 10.0, 3.0, 0), 27);
    /* A long gap (other sizes), and plain stores are fast again: after one more warm-up
     * the class is back on plain stores, not on streaming until the probe at call 128. */
    s.step += stale + 1;
    assert_int_equal(nt_calls(&s, 12, 1.0, 3.0, 0), 6);
    assert_int_equal(nt_calls(&s, 30, 1.0, 3.0, 0), 0);
    /* A class called once per gap: the first of those calls starts one warm-up (it comes
     * after a run of 42 calls), which then finishes over the next calls, and it keeps
     * its figures from there on instead of warming up at every call. */
    assert_int_equal(nt_calls(&s, 12, 1.0, 3.0, stale + 1), 6);
    assert_int_equal(nt_calls(&s, 40, 1.0, 3.0, stale + 1), 0);
    /* Fixed by HPML_SHM_NT: no measuring. */
    s.nt = 0;
    assert_int_equal(nt_calls(&s, 5, 10.0, 3.0, 0), 0);
    free(peer[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copy_exact),
        cmocka_unit_test(test_mode_pick),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
