/*
 * Shared-memory broadcast: the root copies the message chunk by chunk into its scratch
 * buffers of the node segment and the other local ranks copy each chunk out as soon as
 * it is published (one writer, many readers, pipelined over the segment's buffers).
 * Across nodes the node leaders run a chain/binomial bcast between the two node steps.
 * Cost on one node: about n/B_copy + (k+1) chunk handoffs; no MPI message at all.
 */
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/commb_internal.h"

/* Bytes per pipeline step: at most the segment's buffer size; smaller steps keep the
 * handoff in cache (HPML_BCAST_SHM_CHUNK overrides, for tuning). */
static size_t step_bytes(const hpml_shm_t *s)
{
    static size_t env; /* 0: not read; SIZE_MAX: unset */
    size_t c = __atomic_load_n(&env, __ATOMIC_RELAXED);

    if (c == 0) {
        const char *e = getenv("HPML_BCAST_SHM_CHUNK");
        char *end = NULL;
        unsigned long long v = e ? strtoull(e, &end, 10) : 0;

        c = (e && end != e && *end == '\0' && v >= 64) ? (size_t)v : SIZE_MAX;
        __atomic_store_n(&env, c, __ATOMIC_RELAXED);
    }
    if (c == SIZE_MAX)
        c = s->chunk_bytes;
    return hpml__min(c, s->chunk_bytes);
}

/* Wait until *c >= v. Spin for up to ~50 µs before yielding: a bcast step takes a few
 * µs, and yielding early hands the core to any other runnable process on a loaded
 * machine (the segment's generic wait yields after a short spin, which suits
 * oversubscribed runs of our own ranks but costs milliseconds under foreign load). */
static void wait_ge(_Atomic uint64_t *c, uint64_t v)
{
    uint64_t t0 = 0;

    for (unsigned spins = 0; atomic_load_explicit(c, memory_order_acquire) < v; spins++) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        if ((spins & 255) == 255) {
            uint64_t t = hpml_time_ns();

            if (t0 == 0)
                t0 = t;
            else if (t - t0 > 50000)
                sched_yield();
        }
    }
}

static void wait_all_done(hpml_comm_t *comm, hpml_shm_t *s, uint64_t v)
{
    for (int i = 0; i < comm->local_size; i++)
        wait_ge(&hpml__shm_ctrl(s, i)->done, v);
}

/* Advance this rank's counters to `v` (steps done); `done` last, as peers reuse a
 * buffer only after seeing everyone's `done`. */
static void finish_step(hpml_shm_ctrl_t *me, uint64_t v)
{
    atomic_store_explicit(&me->reduced, v, memory_order_release);
    atomic_store_explicit(&me->done, v, memory_order_release);
}

/* Bcast of `bytes` from local rank `lroot` over the node segment. */
static int bcast_node(hpml_comm_t *comm, void *buf, size_t bytes, int lroot)
{
    hpml_shm_t *s = NULL;
    hpml_shm_ctrl_t *me, *rc_ctrl;
    size_t chunk, nsteps;
    uint64_t base;
    char *b = buf;
    int rc, lr = comm->local_rank;

    if (comm->local_size == 1 || bytes == 0)
        return 0;
    if ((rc = hpml__shm_get(comm, &s)) != 0)
        return rc;
    chunk = step_bytes(s);
    nsteps = hpml__div_up(bytes, chunk);
    base = s->step;
    s->step += nsteps; /* identical on every local rank: all see the same bytes */
    me = hpml__shm_ctrl(s, lr);
    rc_ctrl = hpml__shm_ctrl(s, lroot);

    for (size_t j = 0; j < nsteps; j++) {
        uint64_t st = base + j;
        size_t n = hpml__min(chunk, bytes - j * chunk);
        char *slot = hpml__shm_buf(s, lroot, (int)(st % (uint64_t)s->nbuf));

        if (lr == lroot) {
            /* The buffer was last used nbuf steps ago: wait until every local rank has
             * finished with that step before overwriting it. */
            if (st >= (uint64_t)s->nbuf)
                wait_all_done(comm, s, st - (uint64_t)s->nbuf + 1);
            memcpy(slot, b + j * chunk, n);
            finish_step(me, st + 1);
            atomic_store_explicit(&me->arrived, st + 1, memory_order_release);
        } else {
            wait_ge(&rc_ctrl->arrived, st + 1);
            memcpy(b + j * chunk, slot, n);
            atomic_store_explicit(&me->arrived, st + 1, memory_order_release);
            finish_step(me, st + 1);
        }
    }
    return 0;
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
