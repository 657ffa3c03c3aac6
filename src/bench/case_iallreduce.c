/*
 * iallreduce: MPI_Iallreduce against hpml_iallreduce with OMB's overlap method
 * (osu_iallreduce): pure communication time, then the operation overlapped with compute.
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

static int start(bench_ctx_t *c)
{
    if (c->impl->native)
        return BENCH_MPI(MPI_Iallreduce(BENCH_SEND_MPI(c), c->rbuf, (int)c->count, c->mdt, c->msum,
                                        c->comm, &c->mreq));
    return hpml_iallreduce(BENCH_SEND_HPML(c), c->rbuf, c->count, c->dtype, HPML_SUM, c->hcomm,
                           &c->hreq);
}

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

const bench_case_t hpml__bench_iallreduce = {
    .name = "iallreduce",
    .title = "Non-blocking Allreduce Latency Test",
    .kind = HPML_BENCH_KIND_NBC,
    .op = "sum",
    .hpml_coll = -1,
    .hpml_plain = 1,
    .total_mult = hpml__bench_one,
    .bus_factor = bus,
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
