/*
 * gather: MPI_Gather (osu_gather), root from -k; hpml has no gather, so native MPI only.
 * Size = each rank's block; algbw counts the p blocks the root receives; busbw =
 * algbw * (p-1)/p (the root's link carries the p-1 remote blocks).
 */
#include <string.h>

#include "bench/bench_internal.h"

static void buffers(const bench_ctx_t *c, size_t bytes, size_t *s, size_t *r)
{
    *s = bytes;
    *r = bytes * (size_t)c->size; /* any rank may be a root under -k rotate */
}

static int run(bench_ctx_t *c)
{
    int ip = c->in_place && c->rank == c->root;

    return BENCH_MPI(MPI_Gather(ip ? MPI_IN_PLACE : c->sbuf, (int)c->count, c->mdt, c->rbuf,
                                (int)c->count, c->mdt, c->root, c->comm));
}

BENCH_NATIVE_LOOP(native_loop, c->in_place && c->rank == c->root ? MPI_IN_PLACE : c->sbuf, c->count,
                  MPI_Gather(sbuf, count, dt, rbuf, count, dt, root, comm))

static void fill(bench_ctx_t *c)
{
    size_t blk = c->count * c->esize;

    if (c->rank == c->root) {
        memset(c->rbuf, 0, blk * (size_t)c->size);
        if (c->in_place) {
            hpml__bench_fill_rank(c, (char *)c->rbuf + blk * (size_t)c->rank, c->rank, 0, c->count);
            return;
        }
    }
    hpml__bench_fill_rank(c, c->sbuf, c->rank, 0, c->count);
}

static void *result(bench_ctx_t *c, size_t *n)
{
    *n = c->rank == c->root ? c->count * (size_t)c->size : 0;
    return c->rank == c->root ? c->rbuf : NULL;
}

static double expect(const bench_ctx_t *c, size_t i)
{
    return hpml__bench_value(c, (int)(i / c->count), i % c->count);
}

const bench_case_t hpml__bench_gather = {
    .name = "gather",
    .title = "Gather Latency Test",
    .kind = HPML_BENCH_KIND_COLL,
    .hpml_coll = -1,
    .rooted = 1,
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
