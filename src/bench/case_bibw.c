/*
 * bibw: bidirectional bandwidth between ranks 0 and 1 (osu_bibw): both post a window of
 * receives and a window of sends. Bandwidth = 2 * size * window / time per window.
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
    if (c->rank < 2)
        return hpml__bench_window(c, 1 - c->rank, 1, 1);
    return 0;
}

static double iter_bytes(const bench_ctx_t *c)
{
    return 2.0 * (double)c->count * (double)c->esize * c->window;
}

static void fill(bench_ctx_t *c)
{
    hpml__bench_fill_rank(c, c->sbuf, c->rank, 0, c->count);
    memset(c->rbuf, 0, c->count * c->esize);
}

static void *result(bench_ctx_t *c, size_t *n)
{
    *n = c->rank < 2 ? c->count : 0;
    return c->rbuf;
}

static double expect(const bench_ctx_t *c, size_t i)
{
    return hpml__bench_value(c, 1 - c->rank, i);
}

const bench_case_t hpml__bench_bibw = {
    .name = "bibw",
    .title = "Bi-Directional Bandwidth Test",
    .kind = HPML_BENCH_KIND_BW,
    .hpml_coll = -1,
    .time_scale = 1.0,
    .iter_bytes = iter_bytes,
    .buffers = buffers,
    .reports = hpml__bench_rank0,
    .run = run,
    .fill = fill,
    .result = result,
    .expect = expect,
};
