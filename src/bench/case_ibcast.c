/*
 * ibcast: MPI_Ibcast against hpml_ibcast with OMB's overlap method (osu_ibcast), root
 * from -k.
 */
#include "bench/bench_internal.h"

static void buffers(const bench_ctx_t *c, size_t bytes, size_t *s, size_t *r)
{
    (void)c;
    *s = 0;
    *r = bytes;
}

static int start(bench_ctx_t *c)
{
    if (c->impl->native)
        return BENCH_MPI(MPI_Ibcast(c->rbuf, (int)c->count, c->mdt, c->root, c->comm, &c->mreq));
    return hpml_ibcast(c->rbuf, c->count, c->dtype, c->root, c->hcomm, &c->hreq);
}

static void fill(bench_ctx_t *c)
{
    if (c->rank == c->root)
        hpml__bench_fill_rank(c, c->rbuf, c->root, 0, c->count);
    else
        for (size_t i = 0; i < c->count; i++)
            hpml__bench_set(c->rbuf, c->dtype, i, 0);
}

static void *result(bench_ctx_t *c, size_t *n)
{
    *n = c->count;
    return c->rbuf;
}

static double expect(const bench_ctx_t *c, size_t i)
{
    return hpml__bench_value(c, c->root, i);
}

const bench_case_t hpml__bench_ibcast = {
    .name = "ibcast",
    .title = "Non-blocking Broadcast Latency Test",
    .kind = HPML_BENCH_KIND_NBC,
    .hpml_coll = -1,
    .hpml_plain = 1,
    .rooted = 1,
    .total_mult = hpml__bench_one,
    .bus_factor = hpml__bench_one,
    .time_scale = 1.0,
    .buffers = buffers,
    .reports = hpml__bench_everyone,
    .start = start,
    .test = hpml__bench_nb_test,
    .wait = hpml__bench_nb_wait,
    .fill = fill,
    .result = result,
    .expect = expect,
};
