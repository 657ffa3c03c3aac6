/*
 * scatter: MPI_Scatter (osu_scatter), root from -k; hpml has no scatter, so native MPI
 * only. Size = each rank's block; algbw counts the p blocks the root sends; busbw =
 * algbw * (p-1)/p.
 */
#include <string.h>

#include "bench/bench_internal.h"

static void buffers(const bench_ctx_t *c, size_t bytes, size_t *s, size_t *r)
{
    *s = bytes * (size_t)c->size; /* any rank may be a root under -k rotate */
    *r = bytes * (size_t)c->size; /* in place at the root: its blocks are in recvbuf */
}

static int run(bench_ctx_t *c)
{
    int ip = c->in_place && c->rank == c->root;

    /* In place at the root (MPI): recvbuf is MPI_IN_PLACE and the root's own block stays
     * where it is in the send buffer, which we keep in rbuf. */
    if (ip)
        return BENCH_MPI(MPI_Scatter(c->rbuf, (int)c->count, c->mdt, MPI_IN_PLACE, (int)c->count,
                                     c->mdt, c->root, c->comm));
    return BENCH_MPI(MPI_Scatter(c->sbuf, (int)c->count, c->mdt, c->rbuf, (int)c->count, c->mdt,
                                 c->root, c->comm));
}

static void fill(bench_ctx_t *c)
{
    size_t n = c->count * (size_t)c->size;
    int ip = c->in_place && c->rank == c->root;

    if (c->rank == c->root)
        hpml__bench_fill_rank(c, ip ? c->rbuf : c->sbuf, c->root, 0, n);
    if (!ip)
        memset(c->rbuf, 0, c->count * c->esize);
}

static void *result(bench_ctx_t *c, size_t *n)
{
    int ip = c->in_place && c->rank == c->root;

    *n = c->count;
    return ip ? (char *)c->rbuf + (size_t)c->rank * c->count * c->esize : c->rbuf;
}

static double expect(const bench_ctx_t *c, size_t i)
{
    return hpml__bench_value(c, c->root, (size_t)c->rank * c->count + i);
}

const bench_case_t hpml__bench_scatter = {
    .name = "scatter",
    .title = "Scatter Latency Test",
    .kind = HPML_BENCH_KIND_COLL,
    .hpml_coll = -1,
    .rooted = 1,
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
