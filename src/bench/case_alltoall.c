/*
 * alltoall: MPI_Alltoall against hpml_alltoallv with every block `count` elements
 * (osu_alltoall): block d of the send buffer goes to rank d and block s of the receive
 * buffer comes from rank s, MPI_Alltoall's layout, so both are validated alike.
 * hpml_alltoallv has no in-place form: -l runs native MPI only. Size = one block per
 * destination; algbw counts the p blocks a rank receives and busbw = algbw * (p-1)/p
 * (nccl-tests).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_internal.h"

/* hpml_alltoallv's counts (the same for sending and receiving: every block is `count`
 * elements) and displacements (d * count). They change only with the size or the rank
 * count, so they are rebuilt then, not in every timed call. The harness runs one benchmark
 * at a time (bench.h), so one cache per process suffices; it is kept for later runs. */
static struct {
    size_t *counts, *displs; /* one allocation of 2 * size entries */
    int size;
    size_t count;
} layout;

static int set_layout(const bench_ctx_t *c)
{
    if (layout.size != c->size) {
        size_t *a = realloc(layout.counts, 2 * (size_t)c->size * sizeof(*a));

        if (a == NULL)
            return HPML_ERR_NOMEM;
        layout.counts = a;
        layout.displs = a + c->size;
        layout.size = c->size;
        layout.count = SIZE_MAX; /* no block has this many elements: refill below */
    }
    if (layout.count != c->count) {
        for (int d = 0; d < c->size; d++) {
            layout.counts[d] = c->count;
            layout.displs[d] = (size_t)d * c->count;
        }
        layout.count = c->count;
    }
    return 0;
}

static void buffers(const bench_ctx_t *c, size_t bytes, size_t *s, size_t *r)
{
    *s = bytes * (size_t)c->size;
    *r = bytes * (size_t)c->size;
}

static int run(bench_ctx_t *c)
{
    int rc;

    if (c->impl->native)
        return BENCH_MPI(MPI_Alltoall(BENCH_SEND_MPI(c), (int)c->count, c->mdt, c->rbuf,
                                      (int)c->count, c->mdt, c->comm));
    /* hpml_bench_parse_impls refuses this; options set by other means fail here, alike
     * on every rank. */
    if (c->in_place)
        return hpml_set_error(HPML_ERR_UNSUPPORTED,
                              "-l/--in-place with alltoall --impl %s: %s (--impl mpi runs in "
                              "place)",
                              c->impl->name, hpml__bench_alltoall.no_in_place);
    if ((rc = set_layout(c)) != 0)
        return rc;
    return hpml_alltoallv(c->sbuf, layout.counts, layout.displs, c->rbuf, layout.counts,
                          layout.displs, c->dtype, c->hcomm);
}

BENCH_NATIVE_LOOP(native_loop, BENCH_SEND_MPI(c), c->count,
                  MPI_Alltoall(sbuf, count, dt, rbuf, count, dt, comm))

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
    .hpml_plain = 1,
    .no_in_place = "hpml_alltoallv has no in-place form",
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
