/*
 * multi_lat: ping-pong between every pair (r, r + p/2) at once (osu_multi_lat); the
 * latency is the mean over all ranks of their one-way latency (round trip / 2).
 */
#include <string.h>

#include "bench/bench_internal.h"

#define TAG 2

static void buffers(const bench_ctx_t *c, size_t bytes, size_t *s, size_t *r)
{
    (void)c;
    *s = bytes;
    *r = bytes;
}

static int run(bench_ctx_t *c)
{
    int half = c->size / 2, n = (int)c->count;

    if (c->rank < half) {
        if (MPI_Send(c->sbuf, n, c->mdt, c->rank + half, TAG, c->comm) != MPI_SUCCESS)
            return HPML_ERR_MPI;
        return BENCH_MPI(
            MPI_Recv(c->rbuf, n, c->mdt, c->rank + half, TAG, c->comm, MPI_STATUS_IGNORE));
    }
    if (MPI_Recv(c->rbuf, n, c->mdt, c->rank - half, TAG, c->comm, MPI_STATUS_IGNORE) !=
        MPI_SUCCESS)
        return HPML_ERR_MPI;
    return BENCH_MPI(MPI_Send(c->sbuf, n, c->mdt, c->rank - half, TAG, c->comm));
}

static void fill(bench_ctx_t *c)
{
    hpml__bench_fill_rank(c, c->sbuf, c->rank, 0, c->count);
    memset(c->rbuf, 0, c->count * c->esize);
}

static void *result(bench_ctx_t *c, size_t *n)
{
    *n = c->count;
    return c->rbuf;
}

static double expect(const bench_ctx_t *c, size_t i)
{
    int half = c->size / 2;

    return hpml__bench_value(c, c->rank < half ? c->rank + half : c->rank - half, i);
}

const bench_case_t hpml__bench_multi_lat = {
    .name = "multi_lat",
    .title = "Multi Latency Test",
    .kind = HPML_BENCH_KIND_LAT,
    .hpml_coll = -1,
    .even_ranks = 1,
    .time_scale = 0.5,
    .buffers = buffers,
    .reports = hpml__bench_everyone,
    .run = run,
    .fill = fill,
    .result = result,
    .expect = expect,
};
