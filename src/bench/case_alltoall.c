/*
 * alltoall: MPI_Alltoall (osu_alltoall); hpml has no alltoall of its own, so native MPI
 * only. Size = one block per destination; algbw counts the p blocks a rank receives and
 * busbw = algbw * (p-1)/p (nccl-tests).
 */
#include <string.h>

#include "bench/bench_internal.h"

static void buffers(const bench_ctx_t *c, size_t bytes, size_t *s, size_t *r)
{
    *s = bytes * (size_t)c->size;
    *r = bytes * (size_t)c->size;
}

static int run(bench_ctx_t *c)
{
    return BENCH_MPI(MPI_Alltoall(BENCH_SEND_MPI(c), (int)c->count, c->mdt, c->rbuf, (int)c->count,
                                  c->mdt, c->comm));
}

/* Block d of rank r's input holds value(r, d*count + j): every block is distinct. */
static void fill(bench_ctx_t *c)
{
    size_t n = c->count * (size_t)c->size;

    hpml__bench_fill_rank(c, c->in_place ? c->rbuf : c->sbuf, c->rank, 0, n);
    if (!c->in_place)
        memset(c->rbuf, 0, n * c->esize);
}

static void *result(bench_ctx_t *c, size_t *n)
{
    *n = c->count * (size_t)c->size;
    return c->rbuf;
}

static double expect(const bench_ctx_t *c, size_t i)
{
    size_t src = i / c->count, j = i % c->count;

    return hpml__bench_value(c, (int)src, (size_t)c->rank * c->count + j);
}

const bench_case_t hpml__bench_alltoall = {
    .name = "alltoall",
    .title = "All-to-All Personalized Exchange Latency Test",
    .kind = HPML_BENCH_KIND_COLL,
    .hpml_coll = -1,
    .total_mult = hpml__bench_ranks,
    .bus_factor = hpml__bench_ring_factor,
    .time_scale = 1.0,
    .buffers = buffers,
    .reports = hpml__bench_everyone,
    .run = run,
    .fill = fill,
    .result = result,
    .expect = expect,
};
