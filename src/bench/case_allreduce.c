/*
 * allreduce: MPI_Allreduce against hpml_allreduce / hpml_allreduce_algo (osu_allreduce).
 * Size = the whole vector on every rank; busbw = algbw * 2(p-1)/p (nccl-tests).
 */
#include "bench/bench_internal.h"

static double bus(int p)
{
    return 2.0 * hpml__bench_ring_factor(p);
}

static void buffers(const bench_ctx_t *c, size_t bytes, size_t *s, size_t *r)
{
    (void)c;
    *s = bytes;
    *r = bytes;
}

static int run(bench_ctx_t *c)
{
    if (c->impl->native)
        return BENCH_MPI(
            MPI_Allreduce(BENCH_SEND_MPI(c), c->rbuf, (int)c->count, c->mdt, c->msum, c->comm));
    if (c->impl->algo == HPML_ALGO_AUTO)
        return hpml_allreduce(BENCH_SEND_HPML(c), c->rbuf, c->count, c->dtype, HPML_SUM, c->hcomm);
    return hpml_allreduce_algo(c->impl->algo, BENCH_SEND_HPML(c), c->rbuf, c->count, c->dtype,
                               HPML_SUM, c->hcomm);
}

BENCH_NATIVE_LOOP(native_loop, BENCH_SEND_MPI(c), c->count,
                  MPI_Allreduce(sbuf, rbuf, count, dt, op, comm))

static void fill(bench_ctx_t *c)
{
    hpml__bench_fill_rank(c, c->in_place ? c->rbuf : c->sbuf, c->rank, 0, c->count);
}

static void *result(bench_ctx_t *c, size_t *n)
{
    *n = c->count;
    return c->rbuf;
}

static double expect(const bench_ctx_t *c, size_t i)
{
    return hpml__bench_sum(c, i);
}

const bench_case_t hpml__bench_allreduce = {
    .name = "allreduce",
    .title = "Allreduce Latency Test",
    .kind = HPML_BENCH_KIND_COLL,
    .op = "sum",
    .hpml_coll = HPML_COLL_ALLREDUCE,
    .total_mult = hpml__bench_one,
    .bus_factor = bus,
    .time_scale = 1.0,
    .buffers = buffers,
    .reports = hpml__bench_everyone,
    .run = run,
    .native_loop = native_loop,
    .fill = fill,
    .result = result,
    .expect = expect,
};
