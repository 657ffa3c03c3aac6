/*
 * latency: ping-pong between ranks 0 and 1 (osu_latency); other ranks wait. One-way
 * latency = round-trip time / 2, timed on rank 0.
 */
#include <string.h>

#include "bench/bench_internal.h"

#define TAG 1

static void buffers(const bench_ctx_t *c, size_t bytes, size_t *s, size_t *r)
{
    (void)c;
    *s = bytes;
    *r = bytes;
}

static int run(bench_ctx_t *c)
{
    int n = (int)c->count;

    if (c->rank == 0) {
        if (MPI_Send(c->sbuf, n, c->mdt, 1, TAG, c->comm) != MPI_SUCCESS)
            return HPML_ERR_MPI;
        return BENCH_MPI(MPI_Recv(c->rbuf, n, c->mdt, 1, TAG, c->comm, MPI_STATUS_IGNORE));
    }
    if (c->rank == 1) {
        if (MPI_Recv(c->rbuf, n, c->mdt, 0, TAG, c->comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return HPML_ERR_MPI;
        return BENCH_MPI(MPI_Send(c->sbuf, n, c->mdt, 0, TAG, c->comm));
    }
    return 0;
}

static void fill(bench_ctx_t *c)
{
    hpml__bench_fill_rank(c, c->sbuf, c->rank, 0, c->count);
    memset(c->rbuf, 0, c->count * c->esize);
}

static void *result(bench_ctx_t *c, size_t *n)
{
    *n = c->rank < 2 ? c->count : 0;
    return c->rbuf;
}

static double expect(const bench_ctx_t *c, size_t i)
{
    return hpml__bench_value(c, 1 - c->rank, i);
}

const bench_case_t hpml__bench_latency = {
    .name = "latency",
    .title = "Latency Test",
    .kind = HPML_BENCH_KIND_LAT,
    .hpml_coll = -1,
    .time_scale = 0.5,
    .buffers = buffers,
    .reports = hpml__bench_rank0,
    .run = run,
    .fill = fill,
    .result = result,
    .expect = expect,
};
