/*
 * reduce_scatter: MPI_Reduce_scatter_block against hpml_reduce_scatter(_algo)
 * (osu_reduce_scatter). Size = the whole reduced vector (each rank keeps size/p), as in
 * OMB and nccl-tests; busbw = algbw * (p-1)/p.
 */
#include "bench/bench_internal.h"

static void buffers(const bench_ctx_t *c, size_t bytes, size_t *s, size_t *r)
{
    (void)c;
    *s = bytes;
    *r = bytes; /* in place: the whole input lives in recvbuf */
}

static size_t block(const bench_ctx_t *c)
{
    return c->count / (size_t)c->size;
}

static int run(bench_ctx_t *c)
{
    if (c->impl->native)
        return BENCH_MPI(MPI_Reduce_scatter_block(BENCH_SEND_MPI(c), c->rbuf, (int)block(c), c->mdt,
                                                  c->msum, c->comm));
    if (c->impl->algo == HPML_ALGO_AUTO)
        return hpml_reduce_scatter(BENCH_SEND_HPML(c), c->rbuf, block(c), c->dtype, HPML_SUM,
                                   c->hcomm);
    return hpml_reduce_scatter_algo(c->impl->algo, BENCH_SEND_HPML(c), c->rbuf, block(c), c->dtype,
                                    HPML_SUM, c->hcomm);
}

BENCH_NATIVE_LOOP(native_loop, BENCH_SEND_MPI(c), block(c),
                  MPI_Reduce_scatter_block(sbuf, rbuf, count, dt, op, comm))

static void fill(bench_ctx_t *c)
{
    hpml__bench_fill_rank(c, c->in_place ? c->rbuf : c->sbuf, c->rank, 0,
                          block(c) * (size_t)c->size);
}

static void *result(bench_ctx_t *c, size_t *n)
{
    *n = block(c);
    return c->rbuf;
}

static double expect(const bench_ctx_t *c, size_t i)
{
    return hpml__bench_sum(c, (size_t)c->rank * block(c) + i);
}

const bench_case_t hpml__bench_reduce_scatter = {
    .name = "reduce_scatter",
    .title = "Reduce_scatter Latency Test",
    .kind = HPML_BENCH_KIND_COLL,
    .op = "sum",
    .hpml_coll = HPML_COLL_REDUCE_SCATTER,
    .total_mult = hpml__bench_one,
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
