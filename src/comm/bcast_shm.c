/*
 * Shared-memory broadcast: the root copies the message chunk by chunk into its scratch
 * buffers of the node segment and the other local ranks copy each chunk out as soon as
 * it is published (one writer, many readers, pipelined over the segment's buffers).
 * When the root's buffer is registered (hpml_comm_alloc_shared) the readers copy
 * straight from it. Private buffers above CMA_MIN bytes go by Cross-Memory Attach
 * (process_vm_readv/writev, as Open MPI's vader and MPICH's nemesis do): one copy, and
 * with two local ranks the root writes half into the reader while the reader reads the
 * other half, so both cores copy. Across nodes the node leaders run a chain/binomial
 * bcast between the two node steps. Cost on one node: two copies per byte pipelined
 * (small private), one copy (registered; CMA, split over two cores at 2 ranks); no MPI
 * message at all. Its waits keep the core while every local rank has one
 * (HPML_SHM_YIELD_OVERSUBSCRIBED, shm_internal.h).
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "comm/cma.h"
#include "comm/coll_internal.h"
#include "comm/comm_internal.h"
#include "comm/shm_internal.h"
#include "comm/xfer.h"
#include "core/settings_internal.h"

#define OFF_DONE offsetof(hpml_shm_ctrl_t, done)

/* Bytes per pipeline step: at most the segment's buffer size; smaller steps keep the
 * handoff in cache (HPML_BCAST_SHM_CHUNK overrides, for tuning). */
static size_t step_bytes(const hpml_comm_t *comm, const hpml_shm_t *s)
{
    size_t c = comm->set.set[HPML__S_BCAST_SHM_CHUNK]
                   ? (size_t)comm->set.value[HPML__S_BCAST_SHM_CHUNK]
                   : s->chunk_bytes;

    /* Each step's buffer starts with a descriptor (below). */
    return hpml__min(c, s->chunk_bytes - 64);
}

/* Advance this rank's counters to `v` (steps done); `done` last, as peers reuse a
 * buffer only after seeing everyone's `done`. */
static void finish_step(hpml_shm_ctrl_t *me, uint64_t v)
{
    atomic_store_explicit(&me->reduced, v, memory_order_release);
    atomic_store_explicit(&me->done, v, memory_order_release);
}

/* Each step's buffer starts with a descriptor saying where the step's data is: in the
 * buffer itself (win = -1) or in the root's registered buffer (hpml_comm_alloc_shared
 * window `win`, byte offset `off` in the root's part). It lives in the step's buffer,
 * which the root rewrites only after every rank is done with the step, so a reader can
 * never see the descriptor of a later operation. */
typedef struct {
    int64_t win;
    int64_t off;
    char pad[48];
} step_desc_t;
_Static_assert(sizeof(step_desc_t) == 64, "the step data stays cache-line aligned");

/* Private buffers from this size on go by CMA (when the node has it): from here the
 * pipelined path's second copy lost to the MPI libraries' single copy
 * (docs/decisions/cross-memory-attach.md). */
#define CMA_MIN ((size_t)64 << 10)

/* One step by Cross-Memory Attach. Every rank publishes its buffer's address and pid;
 * the root also says in the step's descriptor whether its buffer is registered (readers
 * then memcpy from the mapping, which needs no system call) or private (win = -2). With
 * two local ranks and a private root buffer, the reader reads [0, half) while the root
 * writes [half, bytes) into the reader's buffer; otherwise every reader reads it all. */
static int bcast_cma(hpml_comm_t *comm, hpml_shm_t *s, char *buf, size_t bytes, int lroot,
                     uint64_t st)
{
    hpml_shm_ctrl_t *me = hpml__shm_ctrl(s, comm->local_rank), *root = hpml__shm_ctrl(s, lroot);
    step_desc_t *d = (step_desc_t *)hpml__shm_buf(s, lroot, (int)(st % (uint64_t)s->nbuf));
    int split = comm->local_size == 2, rc = 0, win = -1;
    size_t half = bytes / 2 / 4096 * 4096, off = 0;

    me->cma_pid = (int64_t)getpid();
    me->cma_addr = (uint64_t)(uintptr_t)buf;
    if (comm->local_rank == lroot) {
        int reg = hpml__registered_lookup(comm, buf, bytes, &win, &off);

        if (st >= (uint64_t)s->nbuf)
            hpml__shm_wait_all(s, OFF_DONE, st - (uint64_t)s->nbuf + 1,
                               HPML_SHM_YIELD_OVERSUBSCRIBED);
        d->win = reg ? win : -2;
        d->off = reg ? (int64_t)off : 0;
        atomic_store_explicit(&me->arrived, st + 1, memory_order_release);
        if (!reg && split) {
            hpml_shm_ctrl_t *r = hpml__shm_ctrl(s, 1 - lroot);

            hpml__shm_wait(s, &r->arrived, st + 1, HPML_SHM_YIELD_OVERSUBSCRIBED);
            rc = hpml__cma_write(r->cma_pid, r->cma_addr + half, buf + half, bytes - half);
        }
        finish_step(me, st + 1);
        /* The readers read this buffer: it must not change before they are done. */
        hpml__shm_wait_all(s, OFF_DONE, st + 1, HPML_SHM_YIELD_OVERSUBSCRIBED);
        return rc;
    }
    atomic_store_explicit(&me->arrived, st + 1, memory_order_release);
    hpml__shm_wait(s, &root->arrived, st + 1, HPML_SHM_YIELD_OVERSUBSCRIBED);
    if (d->win >= 0) {
        const char *src = hpml__registered_addr(comm, (int)d->win, lroot, (size_t)d->off);

        if (src != NULL)
            memcpy(buf, src, bytes);
        else
            rc =
                hpml_set_error(HPML_ERR_STATE, "bcast_shm: unknown window %lld", (long long)d->win);
    } else {
        rc = hpml__cma_read(root->cma_pid, buf, root->cma_addr, split ? half : bytes);
        /* The root's half is in place once the root has finished its step. */
        if (split)
            hpml__shm_wait(s, &root->reduced, st + 1, HPML_SHM_YIELD_OVERSUBSCRIBED);
    }
    /* Keep the protocol going on error so that nobody hangs. */
    finish_step(me, st + 1);
    return rc;
}

/* Bcast of `bytes` from local rank `lroot` over the node segment. When the root's
 * buffer is registered, the readers copy straight out of it (one copy instead of two)
 * and the root returns once they all have. */
static int bcast_node(hpml_comm_t *comm, void *buf, size_t bytes, int lroot)
{
    hpml_shm_t *s = NULL;
    hpml_shm_ctrl_t *me, *rc_ctrl;
    size_t chunk, nsteps, off = 0;
    uint64_t base;
    char *b = buf;
    int rc = 0, lr = comm->local_rank, win = -1, reg = 0;

    if (comm->local_size == 1 || bytes == 0)
        return 0;
    if ((rc = hpml__shm_get(comm, &s)) != 0)
        return rc;
    if (s->cma && bytes >= CMA_MIN) {
        base = s->step++; /* identical on every local rank: all see the same bytes */
        return bcast_cma(comm, s, buf, bytes, lroot, base);
    }
    chunk = step_bytes(comm, s);
    nsteps = hpml__div_up(bytes, chunk);
    base = s->step;
    s->step += nsteps; /* identical on every local rank: all see the same bytes */
    me = hpml__shm_ctrl(s, lr);
    rc_ctrl = hpml__shm_ctrl(s, lroot);
    if (lr == lroot)
        reg = hpml__registered_lookup(comm, buf, bytes, &win, &off);

    for (size_t j = 0; j < nsteps; j++) {
        uint64_t st = base + j;
        size_t n = hpml__min(chunk, bytes - j * chunk);
        char *slot = hpml__shm_buf(s, lroot, (int)(st % (uint64_t)s->nbuf));
        step_desc_t *d = (step_desc_t *)slot;
        char *data = slot + sizeof(step_desc_t);

        if (lr == lroot) {
            /* The buffer was last used nbuf steps ago: wait until every local rank has
             * finished with that step before overwriting it. */
            if (st >= (uint64_t)s->nbuf)
                hpml__shm_wait_all(s, OFF_DONE, st - (uint64_t)s->nbuf + 1,
                                   HPML_SHM_YIELD_OVERSUBSCRIBED);
            d->win = reg ? win : -1;
            d->off = reg ? (int64_t)(off + j * chunk) : 0;
            if (!reg)
                memcpy(data, b + j * chunk, n);
            finish_step(me, st + 1);
            atomic_store_explicit(&me->arrived, st + 1, memory_order_release);
        } else {
            const char *src = data;

            hpml__shm_wait(s, &rc_ctrl->arrived, st + 1, HPML_SHM_YIELD_OVERSUBSCRIBED);
            if (d->win >= 0 &&
                (src = hpml__registered_addr(comm, (int)d->win, lroot, (size_t)d->off)) == NULL) {
                /* Windows are created collectively, so this cannot happen; keep the
                 * protocol going so that nobody hangs. */
                rc = hpml_set_error(HPML_ERR_STATE, "bcast_shm: unknown window %lld",
                                    (long long)d->win);
                src = NULL;
            }
            if (src != NULL)
                memcpy(b + j * chunk, src, n);
            atomic_store_explicit(&me->arrived, st + 1, memory_order_release);
            finish_step(me, st + 1);
        }
    }
    /* The readers copy out of a registered root buffer: it must not change (nor the
     * root leave) before they are done. */
    if (reg && lr == lroot)
        hpml__shm_wait_all(s, OFF_DONE, base + nsteps, HPML_SHM_YIELD_OVERSUBSCRIBED);
    return rc;
}

/* Local rank of `root` on this node, or -1 when it lives on another node. */
static int local_rank_of(hpml_comm_t *comm, int root, int *lroot)
{
    MPI_Group g = MPI_GROUP_NULL, lg = MPI_GROUP_NULL;
    int rc = 0;

    HPML__MPI(MPI_Comm_group(comm->comm, &g));
    HPML__MPI(MPI_Comm_group(comm->local, &lg));
    HPML__MPI(MPI_Group_translate_ranks(g, 1, &root, lg, lroot));
    if (*lroot == MPI_UNDEFINED)
        *lroot = -1;
out:
    if (g != MPI_GROUP_NULL)
        MPI_Group_free(&g);
    if (lg != MPI_GROUP_NULL)
        MPI_Group_free(&lg);
    return rc;
}

int hpml__bcast_shm(void *buf, size_t count, hpml_dtype_t dtype, int root, hpml_comm_t *comm)
{
    size_t bytes = count * hpml_dtype_size(dtype);
    int lroot = -1, rc = 0, mine, lroot_node;

    /* One node: the local communicator is ordered by rank, so the root's local rank is
     * its rank. */
    if (comm->nodes == 1)
        return bcast_node(comm, buf, bytes, root);
    /* Several (possibly virtual) nodes: root's node first, then the leaders, then the
     * other nodes from their leader. */
    if ((rc = local_rank_of(comm, root, &lroot)) != 0)
        return rc;
    if (lroot >= 0 && (rc = bcast_node(comm, buf, bytes, lroot)) != 0)
        return rc;
    if (comm->leaders != MPI_COMM_NULL) {
        mine = lroot >= 0 ? comm->node : -1;
        HPML__MPI(MPI_Allreduce(&mine, &lroot_node, 1, MPI_INT, MPI_MAX, comm->leaders));
        if (comm->nodes > 2 && bytes > ((size_t)64 << 10))
            rc = hpml__bcast_chain_on(comm->leaders, buf, bytes, lroot_node);
        else
            rc = hpml__bcast_binomial_on(comm->leaders, buf, bytes, lroot_node);
        if (rc != 0)
            return rc;
    }
    if (lroot < 0)
        rc = bcast_node(comm, buf, bytes, 0);
out:
    return rc;
}
