/*
 * Shared-memory allreduce inside a node: every local rank publishes its input in its
 * part of the node segment, local rank i reduces slice i of every peer's data straight
 * from the segment (a reduce-scatter with no messages), then every rank copies all the
 * reduced slices out. Large messages go in cache-sized chunks through a ring of
 * pipeline buffers, so chunk c+1 is copied in while peers still reduce chunk c; ranks
 * synchronise through per-rank step counters (C11 release/acquire), never barriers.
 * Small messages take one step in which every rank reduces the whole vector itself.
 * Cost per rank: (L−1)/L·n copied in, n read + n/L written reducing, (L−1)/L·n copied
 * out (a rank reduces its slices straight into its output and copies them to the
 * segment from L1; in place, local ranks >= 2 reduce into the segment and copy all n
 * out). A registered input (hpml_comm_alloc_shared) of an out-of-place call is read
 * where it is: no copy in. The pipeline buffers, and outputs large enough that they may
 * not stay in the cache, are written with plain or streaming stores as measured
 * (hpml__shm_mode_pick).
 * With several nodes this is the hierarchical algorithm (allreduce_hier.c): the pipeline
 * runs as a reduce-scatter into the owners' outputs, whose slices travel across nodes
 * while later chunks are reduced, then as an allgather of the results (hier_run).
 * hpml_allreduce_apply runs the same protocol, out of place only: an owner passes each
 * block of its slices, reduced into an L1-sized scratch block, through the caller's
 * function into its output and publishes the function's values instead of the sums; the
 * small one-step path applies the whole vector on every rank. Which rank applies which
 * element therefore depends only on count, element size, the node layout and the
 * HPML_SHM_* sizes, never on timing, store mode or registration.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/coll_internal.h"
#include "comm/comm_internal.h"
#include "comm/shm_internal.h"
#include "comm/store_mode.h"

#define OFF_ARRIVED offsetof(hpml_shm_ctrl_t, arrived)
#define OFF_REDUCED offsetof(hpml_shm_ctrl_t, reduced)
#define OFF_DONE    offsetof(hpml_shm_ctrl_t, done)

typedef struct {
    hpml_comm_t *comm;
    hpml_shm_t *s;
    const char *src;         /* this rank's input */
    char *dst;               /* this rank's output */
    size_t es, count, chunk; /* element size, elements, elements per step */
    hpml_dtype_t dt;
    hpml_op_t op;
    int L, lr, S;   /* local ranks, mine, slices per step */
    uint64_t step0; /* step number of chunk 0 */
    int reg;        /* this rank's input is registered (no copy in) */
    int avg;        /* AVG on one node: each reduced range is divided by this at once */
    int nbuf;
    int own_buf; /* small path: every input, mine too, is in the pipeline buffers */
    int direct;  /* my slices are reduced straight into my output */
    int nt;      /* write the pipeline buffers with streaming stores (hpml__shm_mode_pick) */
    int out_nt;  /* write my output with streaming stores (the same) */
    double t0;   /* when every rank had published chunk 0 (hpml__shm_mode_record) */
    size_t boff; /* byte offset of this call's data in every pipeline buffer (pipe_buf) */
    const hpml__apply_t *ap; /* hpml_allreduce_apply's function, or NULL */
    double t_apply;          /* seconds spent in ap->fn (not the store mode's cost) */
} eng_t;

/* Owned slices are reduced into the output in blocks of this many bytes, each copied to
 * the pipeline buffer for the peers while it is still in L1. */
#define DIRECT_BLOCK ((size_t)16 << 10)

/* Local rank k's pipeline buffer for step g, at this call's offset. */
static char *pipe_buf(const eng_t *e, int k, uint64_t g)
{
    return hpml__shm_buf(e->s, k, (int)(g % (uint64_t)e->nbuf)) + e->boff;
}

/* Where a call of `bytes` (one step) puts its data in the pipeline buffers. Reusing the
 * same bytes every nbuf calls leaves them in both cores' caches, so every store needs an
 * invalidation across cores and every load a line modified in the other core's cache.
 * Instead successive rounds of nbuf calls move through the buffers in page-aligned slots,
 * so the same bytes come back only after the whole scratch space (nbuf × chunk per rank)
 * has been used (docs/decisions/shm-allreduce-pipeline.md). Any offset is safe: step g
 * owns all of buffer g % nbuf. */
static size_t slot_offset(const hpml_shm_t *s, uint64_t step0, size_t bytes)
{
    size_t slot = (bytes + 4095) & ~(size_t)4095,
           k = slot <= s->chunk_bytes ? s->chunk_bytes / slot : 1;

    /* Under a page the lines stay few and a new page per call would cost TLB misses. */
    if (bytes < 4096 || k < 2)
        return 0;
    return (size_t)((step0 / (uint64_t)s->nbuf) % k) * slot;
}

/* Under apply: an error when local rank k's function failed in this call (its elements
 * have no result), else 0. */
static int owner_failed(const eng_t *e, int k)
{
    if (e->ap &&
        atomic_load_explicit(&hpml__shm_ctrl(e->s, k)->failed, memory_order_relaxed) > e->step0)
        return hpml_set_error(HPML_ERR_STATE,
                              "hpml_allreduce_apply: the function failed on local rank %d, so "
                              "the elements it owns have no result",
                              k);
    return 0;
}

/* Elements [lo, hi) of slice j of a chunk of m elements split into S slices, cut at
 * cache-line multiples. */
static void slice_bounds(const eng_t *e, size_t m, int j, size_t *lo, size_t *hi)
{
    size_t align = 64 / e->es ? 64 / e->es : 1;
    size_t per = (m + (size_t)e->S - 1) / (size_t)e->S;

    per = (per + align - 1) / align * align;
    *lo = hpml__min((size_t)j * per, m);
    *hi = hpml__min(*lo + per, m);
}

/* Input of local rank k for chunk c, element offset `at` within the chunk. */
static const char *input_of(const eng_t *e, int k, size_t c, size_t at)
{
    hpml_shm_ctrl_t *ctl = hpml__shm_ctrl(e->s, k);

    if (k == e->lr && !e->own_buf)
        return e->src + (c * e->chunk + at) * e->es;
    if (!e->own_buf && ctl->src_win >= 0)
        return hpml__registered_addr(e->comm, (int)ctl->src_win, k, (size_t)ctl->src_off) +
               (c * e->chunk + at) * e->es;
    return pipe_buf(e, k, e->step0 + c) + at * e->es;
}

static size_t chunk_len(const eng_t *e, size_t c)
{
    return hpml__min(e->chunk, e->count - c * e->chunk);
}

/* Publish chunk c: copy the slices peers will read into my pipeline buffer. */
static void copy_in(eng_t *e, size_t c, int all)
{
    uint64_t g = e->step0 + c;
    size_t m = chunk_len(e, c), lo, hi;
    char *buf = pipe_buf(e, e->lr, g);
    hpml_shm_ctrl_t *me = hpml__shm_ctrl(e->s, e->lr);

    /* The buffer was last used by step g - nbuf. Usually no wait is needed: once this rank
     * has seen every peer publish step g - 1 (s->synced >= g), and since a rank publishes
     * step h only after it finished reading step h - 2 (copy_in(c+1) runs after
     * copy_out(c-1) below; bcast_shm publishes after reading), every peer is done with
     * step g - 3 >= g - nbuf (nbuf >= 3). Other users of the segment (bcast_shm's
     * non-roots wait on the root only) leave s->synced behind; then wait for `done`. */
    if (g >= (uint64_t)e->nbuf && e->s->synced < g)
        hpml__shm_wait_all(e->s, OFF_DONE, g - (uint64_t)e->nbuf + 1, HPML_SHM_YIELD_AFTER_SPIN);
    if (!e->reg) {
        const char *src = e->src + c * e->chunk * e->es;

        if (all) {
            hpml__shm_copy(buf, src, m * e->es, e->nt);
        } else {
            /* Slices I own are read only by me, from my own input. */
            for (int j = 0; j < e->S; j++) {
                if (j % e->L == e->lr)
                    continue;
                slice_bounds(e, m, j, &lo, &hi);
                hpml__shm_copy(buf + lo * e->es, src + lo * e->es, (hi - lo) * e->es, e->nt);
            }
        }
    }
    atomic_store_explicit(&me->arrived, g + 1, memory_order_release);
}

/* out = x_0 op x_1 op ... op x_{L-1} over elements [lo, hi) of chunk c, fixed order;
 * for AVG (e->avg) divided at once, while the range is still in the cache. */
static int reduce_range(eng_t *e, size_t c, size_t lo, size_t hi, char *out)
{
    size_t n = hi - lo;
    int rc = 0;

    if (n == 0)
        return 0;
    if (e->L == 1) {
        if (out != input_of(e, 0, c, lo))
            memmove(out, input_of(e, 0, c, lo), n * e->es);
    } else {
        rc = hpml_reduce_local3(out, input_of(e, 0, c, lo), input_of(e, 1, c, lo), n, e->dt, e->op);
        for (int k = 2; k < e->L && rc == 0; k++)
            rc = hpml_reduce_local(out, input_of(e, k, c, lo), n, e->dt, e->op);
    }
    if (rc == 0 && e->avg)
        rc = hpml_reduce_finish(out, n, e->dt, HPML_AVG, e->avg);
    return rc;
}

/* Pass elements [lo, hi) of chunk c, reduced, through the apply function: in = out is
 * memory that already holds them reduced (in != NULL), else they are reduced into an
 * L1 scratch block first. */
static int apply_range(eng_t *e, size_t c, size_t lo, size_t hi, char *in, char *out)
{
    _Alignas(64) char tmp[DIRECT_BLOCK];
    const hpml__apply_t *ap = e->ap;
    size_t blk = DIRECT_BLOCK / e->es;
    int rc = 0;

    for (size_t a = lo; a < hi && rc == 0; a += blk) {
        size_t b = hpml__min(a + blk, hi), n = b - a;
        char *src = in ? in + (a - lo) * e->es : tmp;
        double t;

        if (in == NULL)
            rc = reduce_range(e, c, a, b, tmp);
        if (rc == 0 && ap->op == HPML_AVG)
            rc = hpml_reduce_finish(src, n, e->dt, ap->op, ap->contributions);
        t = hpml_time();
        if (rc == 0)
            rc = ap->fn(ap->ctx, ap->base + c * e->chunk + a, src, out + (a - lo) * e->es, n);
        e->t_apply += hpml_time() - t;
    }
    return rc;
}

/* Reduce the slices of chunk c I own, into my pipeline buffer (or my output: direct). */
static int reduce_owned(eng_t *e, size_t c)
{
    uint64_t g = e->step0 + c;
    size_t m = chunk_len(e, c), lo, hi;
    char *buf = pipe_buf(e, e->lr, g);
    hpml_shm_ctrl_t *me = hpml__shm_ctrl(e->s, e->lr);
    int rc = 0, r2;

    hpml__shm_wait_all(e->s, OFF_ARRIVED, g + 1, HPML_SHM_YIELD_AFTER_SPIN);
    e->s->synced = g + 1;
    if (c == 0)
        e->t0 = hpml_time();
    for (int j = e->lr; j < e->S && rc == 0; j += e->L) {
        slice_bounds(e, m, j, &lo, &hi);
        if (e->direct) {
            /* Straight into my output, then one copy from L1 for the peers: my own slices
             * are not copied out of the segment again (copy_out skips them). */
            size_t blk = DIRECT_BLOCK / e->es;
            char *dst = e->dst + c * e->chunk * e->es;

            for (size_t a = lo; a < hi && rc == 0; a += blk) {
                size_t b = hpml__min(a + blk, hi);

                if (e->out_nt) {
                    /* Reduced in L1, then streamed to my output and copied for the peers. */
                    _Alignas(64) char tmp[DIRECT_BLOCK];

                    rc = reduce_range(e, c, a, b, tmp);
                    hpml__shm_copy(dst + a * e->es, tmp, (b - a) * e->es, 1);
                    hpml__shm_copy(buf + a * e->es, tmp, (b - a) * e->es, e->nt);
                    continue;
                }
                rc = e->ap ? apply_range(e, c, a, b, NULL, dst + a * e->es)
                           : reduce_range(e, c, a, b, dst + a * e->es);
                hpml__shm_copy(buf + a * e->es, dst + a * e->es, (b - a) * e->es, e->nt);
            }
            continue;
        }
        r2 = reduce_range(e, c, lo, hi, buf + lo * e->es);
        if (r2 == 0 && rc == 0 && e->ap)
            r2 = apply_range(e, c, lo, hi, buf + lo * e->es, buf + lo * e->es);
        rc = rc ? rc : r2;
    }
    if (rc != 0 && e->ap)
        atomic_store_explicit(&me->failed, g + 1, memory_order_relaxed);
    atomic_store_explicit(&me->reduced, g + 1, memory_order_release);
    return rc;
}

/* Copy every reduced slice of chunk c to my output. Apply: an error when a peer's
 * function failed during this operation (its slices hold no result). */
static int copy_out(eng_t *e, size_t c)
{
    uint64_t g = e->step0 + c;
    size_t m = chunk_len(e, c), lo, hi;
    char *dst = e->dst + c * e->chunk * e->es;
    int rc = 0;

    hpml__shm_wait_all(e->s, OFF_REDUCED, g + 1, HPML_SHM_YIELD_AFTER_SPIN);
    for (int j = 0; j < e->S; j++) {
        int k = j % e->L;

        if (e->direct && k == e->lr)
            continue;
        if (k != e->lr && rc == 0)
            rc = owner_failed(e, k);
        slice_bounds(e, m, j, &lo, &hi);
        if (hi > lo)
            hpml__shm_copy(dst + lo * e->es, pipe_buf(e, k, g) + lo * e->es, (hi - lo) * e->es,
                           e->out_nt);
    }
    atomic_store_explicit(&hpml__shm_ctrl(e->s, e->lr)->done, g + 1, memory_order_release);
    return rc;
}

static int make_slice_comms(hpml_comm_t *comm)
{
    int rc = 0;

    if (comm->slice_comm != NULL)
        return 0;
    comm->slice_comm = malloc(sizeof(MPI_Comm) * (size_t)comm->max_local_size);
    if (comm->slice_comm == NULL)
        return HPML_ERR_NOMEM;
    for (int j = 0; j < comm->max_local_size; j++)
        comm->slice_comm[j] = MPI_COMM_NULL;
    for (int j = 0; j < comm->max_local_size; j++) {
        HPML__MPI(MPI_Comm_split(comm->comm,
                                 j % comm->local_size == comm->local_rank ? 0 : MPI_UNDEFINED,
                                 comm->node, &comm->slice_comm[j]));
        if (comm->slice_comm[j] != MPI_COMM_NULL)
            HPML__MPI(MPI_Comm_set_errhandler(comm->slice_comm[j], MPI_ERRORS_RETURN));
    }
out:
    return rc;
}

/* ---- Hierarchical mode: the node's reduction, the network and the node's copy out
 * overlap. Pass 1 runs the pipeline above as a reduce-scatter only: the owner of each
 * slice of chunk c reduces it straight into its own output and starts a nonblocking
 * allreduce of it across nodes (MPI_Iallreduce among the ranks that own that slice on
 * every node, slice_comm), then goes on with chunk c+1 while the network carries chunk c.
 * Pass 2 takes the chunks in order as their allreduces complete: the owner copies its
 * final slices to its pipeline buffer and every local rank copies the others' out, while
 * later chunks are still on the network. Every wait polls MPI, so the transfers in flight
 * progress while a rank waits for its node. Dtypes and ops the MPI library cannot reduce
 * right (hpml__mpi_op_ok; fp16/bf16 go as MPI_UINT16_T with hpml's kernels as user ops)
 * take hpml's blocking allreduce in pass 2. */

/* Chunks whose inter-node allreduces one rank keeps in flight: enough to keep a link
 * busy while the node reduces (HPML_SHM_CHUNK / L bytes per rank per chunk). */
#define HIER_WINDOW 16

typedef struct {
    MPI_Request *req; /* [chunk * rpc + k * (pair + 1) + i]: my k-th slice of the chunk */
    int own;          /* slices I own per chunk */
    int rpc;          /* requests per chunk */
    int pair;         /* 2 nodes: an exchange (Isend + Irecv) per slice, reduced by hpml */
    int first_node;   /* pair: mine is the first operand (slice rank 0), so the peer is 1 */
    char *peer;       /* pair: the other node's slices, per_slice elements per slice */
    char *stage;      /* apply: my slices reduced, the same layout (else in my output, whose
                       * old values apply's function may read) */
    size_t per_slice;
    size_t first;  /* chunks before this one have completed and been waited for */
    size_t posted; /* chunks whose allreduces were started */
    int nb;        /* nonblocking: pair, or the MPI library reduces this dtype and op right */
    MPI_Datatype mdt;
    MPI_Op mop;
} hier_t;

#define HIER_TAG 7

/* pair: where the other node's part of my k-th slice of chunk c arrives. */
static char *hier_peer(const eng_t *e, const hier_t *h, size_t c, int k)
{
    return h->peer + ((c * (size_t)h->own + (size_t)k) * h->per_slice) * e->es;
}

/* My k-th slice of chunk c, starting at element lo of the chunk: where it is reduced. */
static char *hier_mine(const eng_t *e, const hier_t *h, size_t c, int k, size_t lo)
{
    if (h->stage)
        return h->stage + ((c * (size_t)h->own + (size_t)k) * h->per_slice) * e->es;
    return e->dst + (c * e->chunk + lo) * e->es;
}

/* Let the transfers in flight move (MPI progresses nonblocking collectives only inside
 * MPI calls, with no progress thread): test the oldest requests until one is pending. */
static void hier_progress(hier_t *h)
{
    int flag = 1;

    for (size_t i = h->first * (size_t)h->rpc; flag && i < h->posted * (size_t)h->rpc; i++)
        if (MPI_Test(&h->req[i], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            break;
}

/* Wait for requests [from, to) (chunks times slices), MPI_Waitall's work. */
static int hier_waitall(hier_t *h, size_t from, size_t to)
{
    int rc = 0;

    for (size_t i = from; i < to; i++) {
        int r = MPI_Wait(&h->req[i], MPI_STATUS_IGNORE);

        if (r != MPI_SUCCESS && rc == 0)
            rc = hpml__mpi_error(r, "MPI_Iallreduce (hier)");
    }
    return rc;
}

/* Wait until every local peer's counter at `which` reaches v, polling MPI meanwhile. */
static void hier_wait_all(const eng_t *e, hier_t *h, size_t which, uint64_t v)
{
    for (int k = 0; k < e->L; k++) {
        _Atomic uint64_t *cnt = (_Atomic uint64_t *)((char *)hpml__shm_ctrl(e->s, k) + which);

        if (k == e->lr)
            continue;
        while (atomic_load_explicit(cnt, memory_order_acquire) < v) {
            hier_progress(h);
            sched_yield();
        }
    }
}

/* Elements [lo, hi) of chunk c, reduced over the node, into out (my output). In place,
 * local ranks >= 2 would overwrite their input before its turn in the fixed order: they
 * reduce through an L1 block. */
static int hier_reduce(eng_t *e, size_t c, size_t lo, size_t hi, char *out)
{
    _Alignas(64) char tmp[DIRECT_BLOCK];
    size_t blk = DIRECT_BLOCK / e->es;
    int rc = 0;

    if (e->src != e->dst || e->lr < 2)
        return reduce_range(e, c, lo, hi, out);
    for (size_t a = lo; a < hi && rc == 0; a += blk) {
        size_t b = hpml__min(a + blk, hi);

        rc = reduce_range(e, c, a, b, tmp);
        memcpy(out + (a - lo) * e->es, tmp, (b - a) * e->es);
    }
    return rc;
}

/* Pass 1 for chunk c: reduce my slices over the node into my output, release the
 * pipeline buffers of the step, start the slices' allreduces across nodes. */
static int hier_reduce_post(eng_t *e, hier_t *h, size_t c)
{
    uint64_t g = e->step0 + c;
    size_t m = chunk_len(e, c), lo, hi;
    int rc = 0, r2, k = 0;

    hier_wait_all(e, h, OFF_ARRIVED, g + 1);
    e->s->synced = g + 1;
    for (int j = e->lr; j < e->S; j += e->L, k++) {
        slice_bounds(e, m, j, &lo, &hi);
        r2 = hier_reduce(e, c, lo, hi, hier_mine(e, h, c, k, lo));
        rc = rc ? rc : r2;
    }
    k = 0;
    atomic_store_explicit(&hpml__shm_ctrl(e->s, e->lr)->done, g + 1, memory_order_release);
    if (!h->nb)
        return rc;
    /* Keep at most HIER_WINDOW chunks in flight. */
    if (c >= HIER_WINDOW && h->first <= c - HIER_WINDOW) {
        size_t upto = c - HIER_WINDOW + 1;

        r2 = hier_waitall(h, h->first * (size_t)h->rpc, upto * (size_t)h->rpc);
        h->first = upto;
        if (r2 != 0) {
            rc = rc ? rc : r2;
            goto out;
        }
    }
    /* Every owner of slice j starts it, even after a local failure: the other nodes'
     * owners wait for it. */
    for (int j = e->lr; j < e->S; j += e->L, k++) {
        MPI_Request *r = &h->req[c * (size_t)h->rpc + (size_t)k * (size_t)(h->pair + 1)];
        char *mine;

        slice_bounds(e, m, j, &lo, &hi);
        mine = hier_mine(e, h, c, k, lo);
        if (hi == lo)
            continue;
        if (!h->pair) {
            HPML__MPI(MPI_Iallreduce(MPI_IN_PLACE, mine, (int)(hi - lo), h->mdt, h->mop,
                                     e->comm->slice_comm[j], r));
            continue;
        }
        HPML__MPI(MPI_Irecv(hier_peer(e, h, c, k), (int)((hi - lo) * e->es), MPI_BYTE,
                            h->first_node, HIER_TAG, e->comm->slice_comm[j], &r[0]));
        HPML__MPI(MPI_Isend(mine, (int)((hi - lo) * e->es), MPI_BYTE, h->first_node, HIER_TAG,
                            e->comm->slice_comm[j], &r[1]));
    }
out:
    h->posted = c + 1;
    return rc;
}

/* Pass 2 for chunk c (step g): wait for my slices' allreduces (or run them, blocking),
 * apply, publish them; copy the other local ranks' slices out. */
static int hier_finish(eng_t *e, hier_t *h, size_t c, uint64_t g)
{
    size_t m = chunk_len(e, c), lo, hi;
    char *dst = e->dst + c * e->chunk * e->es, *buf = NULL;
    int rc = 0, r2, k = 0;
    hpml_shm_ctrl_t *me = hpml__shm_ctrl(e->s, e->lr);

    if (h->nb) {
        rc = hier_waitall(h, c * (size_t)h->rpc, (c + 1) * (size_t)h->rpc);
        if (h->first < c + 1)
            h->first = c + 1;
    }
    if (e->L > 1) {
        /* Step g's buffer was last read at step g - nbuf. */
        if (g >= (uint64_t)e->nbuf)
            hier_wait_all(e, h, OFF_DONE, g - (uint64_t)e->nbuf + 1);
        buf = pipe_buf(e, e->lr, g);
    }
    for (int j = e->lr; j < e->S; j += e->L, k++) {
        slice_bounds(e, m, j, &lo, &hi);
        if (hi == lo)
            continue;
        if (h->pair) {
            /* x_node0 op x_node1 on both nodes, so that both get the same bits. */
            char *x = hier_mine(e, h, c, k, lo), *y = hier_peer(e, h, c, k);

            r2 = rc ? 0
                    : hpml_reduce_local3(x, h->first_node ? x : y, h->first_node ? y : x, hi - lo,
                                         e->dt, e->op);
        } else {
            r2 = h->nb
                     ? 0
                     : hpml__allreduce_native_on(e->comm->slice_comm[j], hier_mine(e, h, c, k, lo),
                                                 hi - lo, e->dt, e->op);
        }
        if (r2 == 0 && rc == 0 && e->ap)
            r2 = apply_range(e, c, lo, hi, hier_mine(e, h, c, k, lo), dst + lo * e->es);
        rc = rc ? rc : r2;
        if (buf)
            memcpy(buf + lo * e->es, dst + lo * e->es, (hi - lo) * e->es);
    }
    if (e->L == 1)
        return rc;
    if (rc != 0 && e->ap)
        atomic_store_explicit(&me->failed, g + 1, memory_order_relaxed);
    atomic_store_explicit(&me->reduced, g + 1, memory_order_release);
    hier_wait_all(e, h, OFF_REDUCED, g + 1);
    for (int j = 0; j < e->S; j++) {
        int p = j % e->L;

        if (p == e->lr)
            continue;
        if (rc == 0)
            rc = owner_failed(e, p);
        slice_bounds(e, m, j, &lo, &hi);
        if (hi > lo)
            memcpy(dst + lo * e->es, pipe_buf(e, p, g) + lo * e->es, (hi - lo) * e->es);
    }
    atomic_store_explicit(&me->done, g + 1, memory_order_release);
    return rc;
}

/* At least reqs + data bytes of scratch in comm->hier_buf (the requests, then the data).
 * Every rank asks for the same sizes in the same order (they depend only on the call), so
 * all grow the scratch together and agree, in one MPI_Allreduce, whether every allocation
 * worked: a rank without memory makes every rank fail rather than leave the others
 * waiting for its messages. */
static int hier_scratch(hpml_comm_t *comm, size_t data, size_t reqs)
{
    size_t need = reqs + data;
    char *p;
    int ok, rc = 0;

    if (need <= comm->hier_bytes)
        return 0;
    p = hpml_malloc(need);
    ok = p != NULL;
    HPML__MPI(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm->comm));
    if (!ok) {
        rc = hpml_set_error(HPML_ERR_NOMEM, "hier allreduce: %s for %zu bytes of scratch",
                            p ? "another rank has no memory" : "no memory", need);
        goto out;
    }
    hpml_free(comm->hier_buf);
    comm->hier_buf = p;
    comm->hier_bytes = need;
    p = NULL;
out:
    hpml_free(p);
    return rc;
}

/* The hierarchical allreduce of nch chunks: steps step0 .. step0 + nch - 1 for pass 1,
 * then step0 + nch .. step0 + 2 nch - 1 for pass 2. */
static int hier_run(eng_t *e, size_t nch)
{
    hier_t h = {0};
    int rc = 0, r2;

    h.own = (e->S - e->lr + e->L - 1) / e->L;
    /* Between 2 nodes an exchange sends each slice once each way, at once; MPI_Iallreduce
     * (Open MPI's libnbc below 4 ranks) reduces to one node and broadcasts back, two
     * transfers one after the other. */
    h.pair = e->comm->nodes == 2;
    if (h.pair) {
        int r = 0;

        /* Every slice communicator orders its ranks by node. */
        (void)MPI_Comm_rank(e->comm->slice_comm[e->lr], &r);
        h.first_node = r == 0;
    }
    h.nb = h.pair || hpml__mpi_dtype(e->dt) == MPI_DATATYPE_NULL || hpml__mpi_op_ok(e->dt, e->op);
    if (h.nb && !h.pair && (rc = hpml__mpi_reduce_types(e->dt, e->op, &h.mdt, &h.mop)) != 0)
        return rc;
    h.rpc = h.own * (h.pair + 1);
    {
        size_t lo, hi, slots, reqs = nch * (size_t)e->S * 2 * sizeof(MPI_Request);

        slice_bounds(e, e->chunk, 0, &lo, &hi);
        h.per_slice = hi - lo;
        /* Sized by every slice, not just mine, so that all ranks ask for the same. */
        slots = nch * (size_t)e->S * h.per_slice * e->es;
        rc = hier_scratch(e->comm, (size_t)(h.pair + (e->ap != NULL)) * slots, reqs);
        if (rc != 0)
            return rc;
        h.req = (MPI_Request *)(void *)e->comm->hier_buf;
        h.peer = h.pair ? e->comm->hier_buf + reqs : NULL;
        h.stage = e->ap ? e->comm->hier_buf + reqs + (size_t)h.pair * slots : NULL;
        for (size_t i = 0; i < nch * (size_t)h.rpc; i++)
            h.req[i] = MPI_REQUEST_NULL;
    }
    copy_in(e, 0, 0);
    for (size_t c = 0; c < nch; c++) {
        r2 = hier_reduce_post(e, &h, c);
        rc = rc ? rc : r2;
        if (c + 1 < nch)
            copy_in(e, c + 1, 0);
    }
    for (size_t c = 0; c < nch; c++) {
        r2 = hier_finish(e, &h, c, e->step0 + nch + c);
        rc = rc ? rc : r2;
    }
    e->s->step = e->step0 + 2 * nch;
    return rc;
}

int hpml__allreduce_shm_engine(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                               hpml_op_t op, hpml_comm_t *comm, int inter_node,
                               const hpml__apply_t *ap)
{
    eng_t e = {0};
    size_t bytes, nch, off;
    int rc = 0, win;
    hpml_shm_ctrl_t *me;

    e.es = hpml_dtype_size(dtype);
    bytes = count * e.es;
    e.src = sendbuf == HPML_IN_PLACE ? recvbuf : sendbuf;
    e.dst = recvbuf;
    if (comm->size == 1) {
        if (ap)
            return ap->fn(ap->ctx, ap->base, e.src, e.dst, count);
        if (e.src != e.dst)
            memcpy(e.dst, e.src, bytes);
        return 0;
    }
    if (comm->nodes > 1)
        inter_node = 1;
    if (inter_node && (rc = make_slice_comms(comm)) != 0)
        return rc;
    rc = hpml__shm_get(comm, &e.s);
    if (rc != 0)
        return rc;
    e.comm = comm;
    e.count = count;
    e.dt = dtype;
    /* AVG is SUM, divided: on one node by the owner of each slice as it reduces it (the
     * result is published divided, so no rank passes over its whole output again); across
     * nodes, where reduce_range gives the node's partial sums, once at the end. Apply's
     * function gets AVG through ap->op. */
    e.op = op == HPML_AVG ? HPML_SUM : op;
    e.avg = op == HPML_AVG && !inter_node ? comm->size : 0;
    e.L = comm->local_size;
    e.lr = comm->local_rank;
    e.S = inter_node ? comm->max_local_size : e.L;
    e.nbuf = e.s->nbuf;
    e.chunk = e.s->chunk_bytes / e.es;
    e.step0 = e.s->step;
    e.ap = ap;
    me = hpml__shm_ctrl(e.s, e.lr);
    if (bytes <= e.s->chunk_bytes)
        e.boff = slot_offset(e.s, e.step0, bytes);

    if (!inter_node && bytes <= e.s->small_bytes && bytes <= e.s->chunk_bytes) {
        /* One step; every rank reduces the whole vector in the same order, so all get
         * the same bits without a second synchronisation. */
        me->src_win = -1;
        copy_in(&e, 0, 1);
        hpml__shm_wait_all(e.s, OFF_ARRIVED, e.step0 + 1, HPML_SHM_YIELD_AFTER_SPIN);
        e.s->synced = e.step0 + 1;
        /* My own input is read back from my buffer too: in place, the output would
         * otherwise overwrite it before it is used. */
        e.own_buf = 1;
        rc = ap ? apply_range(&e, 0, 0, count, NULL, e.dst) : reduce_range(&e, 0, 0, count, e.dst);
        atomic_store_explicit(&me->done, e.step0 + 1, memory_order_release);
        e.s->step = e.step0 + 1;
        return rc;
    }

    /* A registered input is read by the peers in place, out of place only: in place the
     * result would then be written back over lines the peers have just read, each store
     * first taking its line from their caches, which costs more than the copy in saves
     * (docs/decisions/registered-buffers.md). */
    e.reg = e.src != e.dst && hpml__registered_lookup(comm, e.src, bytes, &win, &off);
    /* In place, my output is my input. Reducing my slices straight into it is still
     * safe when I am one of the first two operands (x0 op x1 is written over my slice
     * only after both are read; further operands are peers'), since no peer reads my
     * slices: registered or not, peers read only their own slices of my input. Local
     * ranks >= 2 would overwrite their input before its turn: they go through the
     * pipeline buffer. */
    e.direct = !inter_node && (e.src != e.dst || e.lr < 2);
    me->src_win = e.reg ? win : -1;
    me->src_off = e.reg ? (int64_t)off : 0;
    nch = (count + e.chunk - 1) / e.chunk;
    if (inter_node) {
        rc = nch ? hier_run(&e, nch) : 0;
        if (rc == 0 && op == HPML_AVG)
            rc = hpml_reduce_finish(e.dst, count, dtype, op, comm->size);
        return rc;
    }
    /* Software pipeline: publish chunk c+1 before copying chunk c out. The store modes
     * are timed from the moment every rank has arrived, so that a late peer does not
     * count against them; the hierarchical algorithm, whose time is mostly the
     * network's, keeps plain stores. Apply's function writes the outputs of my slices
     * itself, so only the pipeline's mode applies there. */
    if (!inter_node) {
        int modes = hpml__shm_mode_pick(e.s, bytes, ap == NULL);

        e.nt = (modes & HPML_SHM_MODE_PIPE) != 0;
        e.out_nt = (modes & HPML_SHM_MODE_OUT) != 0;
    }
    copy_in(&e, 0, 0);
    for (size_t c = 0; c < nch; c++) {
        int r2 = reduce_owned(&e, c);

        if (r2 != 0 && rc == 0)
            rc = r2; /* keep the protocol going so no peer hangs */
        if (c + 1 < nch)
            copy_in(&e, c + 1, 0);
        r2 = copy_out(&e, c);
        if (r2 != 0 && rc == 0)
            rc = r2;
    }
    e.s->step = e.step0 + nch;
    if (!inter_node)
        hpml__shm_mode_record(e.s, bytes, hpml_time() - e.t0 - e.t_apply);
    return rc;
}

int hpml__allreduce_shm(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                        hpml_op_t op, hpml_comm_t *comm)
{
    return hpml__allreduce_shm_engine(sendbuf, recvbuf, count, dtype, op, comm, 0, NULL);
}
