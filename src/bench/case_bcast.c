/*
 * bcast: MPI_Bcast against hpml_bcast / hpml_bcast_algo (osu_bcast), root from -k.
 * Size = the whole vector; busbw = algbw * 1 (nccl-tests).
 */
#include "bench/bench_internal.h"

static void buffers(const bench_ctx_t *c, size_t bytes, size_t *s, size_t *r)
{
    (void)c;
    *s = 0;
    *r = bytes;
}

static int run(bench_ctx_t *c)
{
    if (c->impl->native)
        return BENCH_MPI(MPI_Bcast(c->rbuf, (int)c->count, c->mdt, c->root, c->comm));
    if (c->impl->algo == HPML_ALGO_AUTO)
        return hpml_bcast(c->rbuf, c->count, c->dtype, c->root, c->hcomm);
    return hpml_bcast_algo(c->impl->algo, c->rbuf, c->count, c->dtype, c->root, c->hcomm);
}

BENCH_NATIVE_LOOP(native_loop, NULL, c->count, MPI_Bcast(rbuf, count, dt, root, comm))

/* Non-roots start from zeros so that a broadcast that does nothing is caught. */
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

const bench_case_t hpml__bench_bcast = {
    .name = "bcast",
    .title = "Broadcast Latency Test",
    .kind = HPML_BENCH_KIND_COLL,
    .hpml_coll = HPML_COLL_BCAST,
    .rooted = 1,
    .total_mult = hpml__bench_one,
    .bus_factor = hpml__bench_one,
    .time_scale = 1.0,
    .buffers = buffers,
    .reports = hpml__bench_everyone,
    .run = run,
    .native_loop = native_loop,
    .fill = fill,
    .result = result,
    .expect = expect,
};
