/*
 * mbw_mr: aggregate bandwidth and message rate of p/2 pairs streaming at once
 * (osu_mbw_mr): rank r < p/2 sends windows to r + p/2. The bandwidth is the sum over the
 * senders of size * window / time per window; the message rate is bandwidth / size.
 */
#include <string.h>

#include "bench/p2p_window.h"

static void buffers(const bench_ctx_t *c, size_t bytes, size_t *s, size_t *r)
{
    (void)c;
    *s = bytes;
    *r = bytes;
}

static int run(bench_ctx_t *c)
{
    int half = c->size / 2;

    if (c->rank < half)
        return hpml__bench_window(c, c->rank + half, 1, 0);
    return hpml__bench_window(c, c->rank - half, 0, 1);
}

static int senders(const bench_ctx_t *c)
{
    return c->rank < c->size / 2;
}

static double iter_bytes(const bench_ctx_t *c)
{
    return (double)c->count * (double)c->esize * c->window;
}

static void fill(bench_ctx_t *c)
{
    hpml__bench_fill_rank(c, c->sbuf, c->rank, 0, c->count);
    memset(c->rbuf, 0, c->count * c->esize);
}

static void *result(bench_ctx_t *c, size_t *n)
{
    *n = c->rank >= c->size / 2 ? c->count : 0;
    return c->rbuf;
}

static double expect(const bench_ctx_t *c, size_t i)
{
    return hpml__bench_value(c, c->rank - c->size / 2, i);
}

const bench_case_t hpml__bench_mbw_mr = {
    .name = "mbw_mr",
    .title = "Multiple Bandwidth / Message Rate Test",
    .kind = HPML_BENCH_KIND_MBW,
    .hpml_coll = -1,
    .even_ranks = 1,
    .time_scale = 1.0,
    .iter_bytes = iter_bytes,
    .buffers = buffers,
    .reports = senders,
    .run = run,
    .fill = fill,
    .result = result,
    .expect = expect,
};
