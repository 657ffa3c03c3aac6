/* barrier: MPI_Barrier against hpml_barrier (osu_barrier); no message size. */
#include "bench/bench_internal.h"

static void buffers(const bench_ctx_t *c, size_t bytes, size_t *s, size_t *r)
{
    (void)c;
    (void)bytes;
    *s = 0;
    *r = 0;
}

static int run(bench_ctx_t *c)
{
    if (c->impl->native)
        return BENCH_MPI(MPI_Barrier(c->comm));
    return hpml_barrier(c->hcomm);
}

const bench_case_t hpml__bench_barrier = {
    .name = "barrier",
    .title = "Barrier Latency Test",
    .kind = HPML_BENCH_KIND_BARRIER,
    .hpml_coll = -1,
    .hpml_plain = 1,
    .time_scale = 1.0,
    .buffers = buffers,
    .reports = hpml__bench_everyone,
    .run = run,
};
