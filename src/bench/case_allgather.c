/*
 * allgather: MPI_Allgather against hpml_allgather / hpml_allgather_algo (osu_allgather).
 * Size = each rank's block (OMB); algbw counts the p blocks every rank ends with and
 * busbw = algbw * (p-1)/p (nccl-tests, whose size is the gathered total).
 */
#include <string.h>

#include "bench/bench_internal.h"

static void buffers(const bench_ctx_t *c, size_t bytes, size_t *s, size_t *r)
{
    *s = bytes;
    *r = bytes * (size_t)c->size;
}

static int run(bench_ctx_t *c)
{
    if (c->impl->native)
        return BENCH_MPI(MPI_Allgather(BENCH_SEND_MPI(c), (int)c->count, c->mdt, c->rbuf,
                                       (int)c->count, c->mdt, c->comm));
    if (c->impl->algo == HPML_ALGO_AUTO)
        return hpml_allgather(BENCH_SEND_HPML(c), c->rbuf, c->count, c->dtype, c->hcomm);
    return hpml_allgather_algo(c->impl->algo, BENCH_SEND_HPML(c), c->rbuf, c->count, c->dtype,
                               c->hcomm);
}

BENCH_NATIVE_LOOP(native_loop, BENCH_SEND_MPI(c), c->count,
                  MPI_Allgather(sbuf, count, dt, rbuf, count, dt, comm))

/* Every other block starts zeroed so that a block that never arrives is caught. */
static void fill(bench_ctx_t *c)
{
    size_t blk = c->count * c->esize;

    memset(c->rbuf, 0, blk * (size_t)c->size);
    if (c->in_place)
        hpml__bench_fill_rank(c, (char *)c->rbuf + blk * (size_t)c->rank, c->rank, 0, c->count);
    else
        hpml__bench_fill_rank(c, c->sbuf, c->rank, 0, c->count);
}

static void *result(bench_ctx_t *c, size_t *n)
{
    *n = c->count * (size_t)c->size;
    return c->rbuf;
}

static double expect(const bench_ctx_t *c, size_t i)
{
    return c->count ? hpml__bench_value(c, (int)(i / c->count), i % c->count) : 0;
}

const bench_case_t hpml__bench_allgather = {
    .name = "allgather",
    .title = "Allgather Latency Test",
    .kind = HPML_BENCH_KIND_COLL,
    .hpml_coll = HPML_COLL_ALLGATHER,
    .total_mult = hpml__bench_ranks,
    .bus_factor = hpml__bench_ring_factor,
    .time_scale = 1.0,
    .buffers = buffers,
    .reports = hpml__bench_everyone,
    .run = run,
    .native_loop = native_loop,
    .fill = fill,
    .result = result,
    .expect = expect,
};
