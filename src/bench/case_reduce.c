/*
 * reduce: MPI_Reduce against hpml_reduce / hpml_reduce_algo (osu_reduce), root from -k.
 * Size = the whole vector; busbw = algbw * 1 (nccl-tests).
 */
#include "bench/bench_internal.h"

static void buffers(const bench_ctx_t *c, size_t bytes, size_t *s, size_t *r)
{
    (void)c;
    *s = bytes;
    *r = bytes;
}

static int run(bench_ctx_t *c)
{
    /* In place only at the root, as MPI defines it. */
    int ip = c->in_place && c->rank == c->root;

    if (c->impl->native)
        return BENCH_MPI(MPI_Reduce(ip ? MPI_IN_PLACE : c->sbuf, c->rbuf, (int)c->count, c->mdt,
                                    c->msum, c->root, c->comm));
    if (c->impl->algo == HPML_ALGO_AUTO)
        return hpml_reduce(ip ? HPML_IN_PLACE : c->sbuf, c->rbuf, c->count, c->dtype, HPML_SUM,
                           c->root, c->hcomm);
    return hpml_reduce_algo(c->impl->algo, ip ? HPML_IN_PLACE : c->sbuf, c->rbuf, c->count,
                            c->dtype, HPML_SUM, c->root, c->hcomm);
}

BENCH_NATIVE_LOOP(native_loop, c->in_place && c->rank == c->root ? MPI_IN_PLACE : c->sbuf, c->count,
                  MPI_Reduce(sbuf, rbuf, count, dt, op, root, comm))

static void fill(bench_ctx_t *c)
{
    int ip = c->in_place && c->rank == c->root;

    hpml__bench_fill_rank(c, ip ? c->rbuf : c->sbuf, c->rank, 0, c->count);
}

static void *result(bench_ctx_t *c, size_t *n)
{
    *n = c->rank == c->root ? c->count : 0;
    return c->rank == c->root ? c->rbuf : NULL;
}

static double expect(const bench_ctx_t *c, size_t i)
{
    return hpml__bench_sum(c, i);
}

const bench_case_t hpml__bench_reduce = {
    .name = "reduce",
    .title = "Reduce Latency Test",
    .kind = HPML_BENCH_KIND_COLL,
    .op = "sum",
    .hpml_coll = HPML_COLL_REDUCE,
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
