/*
 * hpml__shm_copy (src/comm/store_mode.c), which the shm allreduce uses to fill the pipeline
 * buffers: plain memcpy or streaming stores with a head up to a cache line, whole lines,
 * and a tail. Every destination offset within a line, a few source offsets, sizes around
 * the thresholds: the copy is exact and touches nothing outside [dst, dst + n).
 * And the store-mode picker (hpml__shm_mode_pick/record) on a one-rank segment fed with
 * made-up timings: it follows the faster mode, and a size class that was idle for a long
 * gap after a long run of calls measures both modes again rather than keep a stale choice;
 * the output's knob is measured in turn with the pipeline's, only in large size classes
 * and where the caller writes no output itself, and HPML_SHM_OUT_NT fixes it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "comm/shm_internal.h"
#include "comm/store_mode.h"

#define GUARD            64
#define MODE_PROBE_CALLS 128u /* store_mode.c's MODE_PROBE */

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

/* One call of `bytes` with the picker's modes, timed at cost[modes] seconds per byte
 * (modes: HPML_SHM_MODE_PIPE and HPML_SHM_MODE_OUT bits). Returns the modes. */
static int mode_call(hpml_shm_t *s, size_t bytes, int out_ok, const double cost[4])
{
    int m = hpml__shm_mode_pick(s, bytes, out_ok);

    hpml__shm_mode_record(s, bytes, cost[m] * (double)bytes);
    s->step += (bytes + ((size_t)256 << 10) - 1) >> 18; /* its 256 KiB steps */
    return m;
}

/* Calls of streaming stores into the pipeline among the next `calls` calls of 1 MiB. */
static int nt_calls(hpml_shm_t *s, int calls, double plain, double nt, uint64_t gap)
{
    const double cost[4] = {plain, nt, plain, nt};
    int k = 0;

    for (int i = 0; i < calls; i++) {
        s->step += gap;
        k += mode_call(s, (size_t)1 << 20, 1, cost) & HPML_SHM_MODE_PIPE;
    }
    return k;
}

/* A one-rank segment for the picker: its control block, measuring both knobs. */
static void mode_setup(hpml_shm_t *s, char **peer, size_t llc)
{
    memset(s, 0, sizeof(*s));
    memset(peer[0], 0, HPML_SHM_CTRL_BYTES);
    s->mode.nt = -1;
    s->mode.out_nt = -1;
    s->mode.llc_bytes = llc;
    s->local_size = 1;
    s->mode.pend_class = -1;
    s->w.peer = peer;
}

/* Over the next `calls` calls: how many had each mode bit, and how many were off the
 * given choice (best: modes bits) on both knobs at once. */
static void out_calls(hpml_shm_t *s, size_t bytes, int out_ok, const double cost[4], int calls,
                      int best, int *pipe, int *out, int *both_off)
{
    *pipe = *out = *both_off = 0;
    for (int i = 0; i < calls; i++) {
        int m = mode_call(s, bytes, out_ok, cost);

        *pipe += (m & HPML_SHM_MODE_PIPE) != 0;
        *out += (m & HPML_SHM_MODE_OUT) != 0;
        *both_off += (m ^ best) == (HPML_SHM_MODE_PIPE | HPML_SHM_MODE_OUT);
    }
}

/* A class's first 76 calls, where both knobs are measured: the pipeline warms up
 * (P P N N ...) with the output plain, which stays plain until the class's call 64; then
 * the output warms up with the pipeline at its choice (plain, with these costs). */
static void warm_up_both(hpml_shm_t *s, size_t bytes, const double cost[4])
{
    for (unsigned n = 0; n < 76; n++) {
        int m = mode_call(s, bytes, 1, cost);

        if (n < 12)
            assert_int_equal(m, (n >> 1) & 1 ? HPML_SHM_MODE_PIPE : 0);
        else if (n < 64)
            assert_int_equal(m, 0);
        else
            assert_int_equal(m, ((n - 64) >> 1) & 1 ? HPML_SHM_MODE_OUT : 0);
    }
}

/* The output's knob: measured from the class's 64th call, in turn with the pipeline's,
 * changed only on figures of both modes taken side by side, only in the size classes
 * that reach an eighth of the cache, and only where the caller allows it. */
static void test_mode_pick_out(void **state)
{
    static hpml_shm_t s;
    /* Seconds per byte of (pipeline, output): plain/plain, nt/plain, plain/nt, nt/nt. */
    const double out_slow[4] = {1.0, 3.0, 1.4, 4.0}, out_fast[4] = {1.0, 3.0, 0.5, 1.5},
                 burst[4] = {2.0, 4.0, 2.0, 4.0};
    const size_t mib = (size_t)1 << 20;
    char *peer[1];
    int pipe, out, off;

    (void)state;
    peer[0] = aligned_alloc(64, HPML_SHM_CTRL_BYTES);
    assert_non_null(peer[0]);
    mode_setup(&s, peer, 32 * mib);
    /* 8 MiB, one rank, 32 MiB of cache: both knobs are measured. */
    warm_up_both(&s, 8 * mib, out_slow);
    /* Both plain from here, but for the pipeline's probe at the class's calls 128 and
     * 129 (the output plain meanwhile, its count standing still). */
    out_calls(&s, 8 * mib, 1, out_slow, 100, 0, &pipe, &out, &off);
    assert_int_equal(pipe, 2);
    assert_int_equal(out, 0);
    assert_int_equal(off, 0);
    /* A passing slowdown of every mode (3 calls at 2x) raises plain's average above
     * streaming's old figure: both are measured again before any change, and plain
     * stays, the slowdown over. Streamed: at most the two calls that measure it again
     * and the two of its probe (the output's call 128 falls in here), not the calls up to
     * that probe that taking the average at face value gives. */
    out_calls(&s, 8 * mib, 1, burst, 3, 0, &pipe, &out, &off);
    out_calls(&s, 8 * mib, 1, out_slow, 50, 0, &pipe, &out, &off);
    assert_in_range(out, 0, 4);
    assert_int_equal(off, 0);
    /* Streaming the output turns 2x faster than plain: seen at the output's next probe
     * (its calls 256 and 257), and chosen after two calls that measure plain again. */
    out = 0;
    for (int i = 0; i < (int)MODE_PROBE_CALLS && out == 0; i++)
        out_calls(&s, 8 * mib, 1, out_fast, 1, 0, &pipe, &out, &off);
    assert_int_equal(out, 1);
    out_calls(&s, 8 * mib, 1, out_fast, 3, 0, &pipe, &out, &off);
    assert_int_equal(out, 1); /* the second probe call, then plain twice */
    out_calls(&s, 8 * mib, 1, out_fast, 100, HPML_SHM_MODE_OUT, &pipe, &out, &off);
    assert_int_equal(out, 100);
    assert_int_equal(off, 0);
    /* An operation whose output the caller writes (allreduce_apply): never streamed. */
    out_calls(&s, 8 * mib, 0, out_fast, 20, 0, &pipe, &out, &off);
    assert_int_equal(out, 0);
    /* A class below an eighth of the cache (1 MiB): the output stays plain; 4 MiB is
     * measured once the cache is unknown (the warm-up's 6, then all but the probe at its
     * call 128, the class's 194 and 195), 1 MiB still is not. */
    out_calls(&s, mib, 1, out_fast, 300, 0, &pipe, &out, &off);
    assert_int_equal(out, 0);
    mode_setup(&s, peer, 0);
    out_calls(&s, 4 * mib, 1, out_fast, 200, HPML_SHM_MODE_OUT, &pipe, &out, &off);
    assert_int_equal(out, 6 + (200 - 76) - 2);
    out_calls(&s, mib, 1, out_fast, 300, 0, &pipe, &out, &off);
    assert_int_equal(out, 0);
    /* A long gap after a long run: the class warms up again, the output plain (and
     * uncounted) for its first 64 calls. */
    s.step += ((uint64_t)1 << 14) + 1;
    warm_up_both(&s, 4 * mib, out_slow);
    /* Fixed by HPML_SHM_OUT_NT: at every size, where the caller allows it; the pipeline's
     * knob goes on measuring alone. */
    s.mode.out_nt = 1;
    out_calls(&s, 64, 1, out_slow, 10, HPML_SHM_MODE_OUT, &pipe, &out, &off);
    assert_int_equal(out, 10);
    out_calls(&s, 4 * mib, 0, out_slow, 10, 0, &pipe, &out, &off);
    assert_int_equal(out, 0);
    s.mode.out_nt = 0;
    out_calls(&s, 16 * mib, 1, out_fast, 300, 0, &pipe, &out, &off);
    assert_int_equal(out, 0);
    assert_int_equal(pipe, 6 + 2 + 2); /* the new class's warm-up, then two probes */
    free(peer[0]);
}

static void test_mode_pick(void **state)
{
    static hpml_shm_t s;
    char *peer[1];
    uint64_t stale = (uint64_t)1 << 14;

    (void)state;
    peer[0] = aligned_alloc(64, HPML_SHM_CTRL_BYTES);
    assert_non_null(peer[0]);
    /* 1 MiB with an unknown cache: only the pipeline's knob is measured. */
    mode_setup(&s, peer, 0);
    /* Warm-up: P P N N three times, then the faster mode (plain). */
    assert_int_equal(nt_calls(&s, 12, 1.0, 3.0, 0), 6);
    assert_int_equal(nt_calls(&s, 28, 1.0, 3.0, 0), 0);
    /* Plain stores turn 10x slower: within 8 calls (two calls for the average to rise,
     * two to measure streaming again, two plain again) streaming, and it stays. */
    assert_int_equal(nt_calls(&s, 8, 10.0, 3.0, 0), 4);
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
    s.mode.nt = 0;
    assert_int_equal(nt_calls(&s, 5, 10.0, 3.0, 0), 0);
    free(peer[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copy_exact),
        cmocka_unit_test(test_mode_pick),
        cmocka_unit_test(test_mode_pick_out),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
