/*
 * bw: unidirectional bandwidth from rank 0 to rank 1 (osu_bw): a window of -W messages,
 * then an acknowledgement. Bandwidth = size * window / time per window.
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
    if (c->rank == 0)
        return hpml__bench_window(c, 1, 1, 0);
    if (c->rank == 1)
        return hpml__bench_window(c, 0, 0, 1);
    return 0;
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
    *n = c->rank == 1 ? c->count : 0;
    return c->rbuf;
}

static double expect(const bench_ctx_t *c, size_t i)
{
    return hpml__bench_value(c, 0, i);
}

const bench_case_t hpml__bench_bw = {
    .name = "bw",
    .title = "Bandwidth Test",
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
