/*
 * The node shared-memory segment (MPI_Win_allocate_shared over the node-local
 * communicator, created on first use) and the shared windows it and the registered
 * buffers (registered.c) are made of. Every local rank owns a part: a control block of
 * step counters, then `nbuf` pipeline buffers of `chunk_bytes`. Synchronisation is by
 * C11 acquire/release on the counters, never by MPI barriers, and every wait on them is
 * hpml__shm_wait, with the yield rule its caller names (shm_internal.h).
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/cma.h"
#include "comm/comm_internal.h"
#include "comm/shm_internal.h"
#include "comm/store_mode.h"
#include "core/settings_internal.h"

#define DEFAULT_CHUNK ((size_t)256 << 10)
#define DEFAULT_NBUF  4
/* Up to this many bytes the shm allreduce takes one step in which every rank reduces the
 * whole vector (one synchronisation instead of two per chunk). */
#define DEFAULT_SMALL ((size_t)16 << 10)

size_t hpml__shm_default_chunk(void)
{
    return DEFAULT_CHUNK;
}

int hpml__shm_default_nbuf(void)
{
    return DEFAULT_NBUF;
}

/* A setting of the communicator's, or def when unset. */
static uint64_t setting(const hpml_comm_t *comm, hpml__setting_id_t id, uint64_t def)
{
    return comm->set.set[id] ? comm->set.value[id] : def;
}

/* A store mode forced by the environment: plain 0, streaming 1, or -1 (unset: measured). */
static int store_mode(const hpml_comm_t *comm, hpml__setting_id_t id)
{
    return comm->set.set[id] ? (int)comm->set.value[id] : -1;
}

/* Every rank's part starts on a page boundary. MPI only promises the alignment of the
 * datatype: Open MPI 4.1 (osc/sm) returns parts that start 264 bytes into a page, 8 bytes
 * past a cache line, so every pipeline buffer, and every slice of it, straddled cache
 * lines (split vector loads and stores, two lines per line of data moved between the
 * cores); MPICH's are page-aligned. A part is mapped at the same offset within a page in
 * every process (the mappings are page-aligned views of one segment), so each process
 * rounds its view of each part up by the same amount. */
#define SHM_ALIGN ((size_t)4096)

static char *align_up(char *p)
{
    return p + ((SHM_ALIGN - (uintptr_t)p % SHM_ALIGN) % SHM_ALIGN);
}

int hpml__shm_win_create(hpml_comm_t *comm, size_t bytes, hpml_shm_win_t *w)
{
    MPI_Info info = MPI_INFO_NULL;
    MPI_Aint sz;
    int rc = 0, du;
    char *base;

    w->win = MPI_WIN_NULL;
    w->peer = calloc((size_t)comm->local_size, sizeof(char *));
    if (w->peer == NULL)
        return HPML_ERR_NOMEM;
    w->bytes = bytes;
    /* Each rank's part on its own pages (first touch by its owner). */
    HPML__MPI(MPI_Info_create(&info));
    HPML__MPI(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
    HPML__MPI(MPI_Win_allocate_shared((MPI_Aint)(bytes + SHM_ALIGN - 1), 1, info, comm->local,
                                      &base, &w->win));
    w->base = align_up(base);
    for (int i = 0; i < comm->local_size; i++) {
        void *p;

        HPML__MPI(MPI_Win_shared_query(w->win, i, &sz, &du, &p));
        w->peer[i] = align_up(p);
    }
    /* A passive epoch for the whole lifetime: the counters are accessed with C11
     * atomics, which MPI's unified memory model for shared windows permits. */
    HPML__MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, w->win));
out:
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    if (rc != 0) {
        if (w->win != MPI_WIN_NULL)
            MPI_Win_free(&w->win);
        free(w->peer);
        w->peer = NULL;
    }
    return rc;
}

void hpml__shm_win_free(hpml_shm_win_t *w)
{
    if (w->win != MPI_WIN_NULL) {
        MPI_Win_unlock_all(w->win);
        MPI_Win_free(&w->win);
    }
    free(w->peer);
    w->peer = NULL;
}

int hpml__shm_get(hpml_comm_t *comm, hpml_shm_t **out)
{
    hpml_shm_t *s = NULL;
    int rc = 0;

    if (comm->shm != NULL) {
        *out = comm->shm;
        return 0;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return HPML_ERR_NOMEM;
    /* Same environment on every rank, so the same sizes. */
    s->local_size = comm->local_size;
    s->local_rank = comm->local_rank;
    s->chunk_bytes = (setting(comm, HPML__S_SHM_CHUNK, DEFAULT_CHUNK) + 63) & ~(size_t)63;
    /* At least 3 (the registry's minimum): allreduce_shm.c relies on 3 buffers to skip
     * "buffer free" waits. */
    s->nbuf = (int)setting(comm, HPML__S_SHM_NBUF, DEFAULT_NBUF);
    s->small_bytes = setting(comm, HPML__S_SHM_SMALL, DEFAULT_SMALL);
    hpml__store_mode_init(&s->mode, store_mode(comm, HPML__S_SHM_NT),
                          store_mode(comm, HPML__S_SHM_OUT_NT), hpml_cpu_llc_bytes());
    {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);

        /* With more local ranks than online cores both yield rules yield early. */
        s->oversubscribed = comm->local_size > (cpus > 0 ? cpus : 1);
        s->spin = (unsigned)setting(comm, HPML__S_SHM_SPIN,
                                    cpus > 0 && comm->local_size > cpus ? 256 : 20000);
    }
    rc = hpml__shm_win_create(comm, HPML_SHM_CTRL_BYTES + (size_t)s->nbuf * s->chunk_bytes, &s->w);
    if (rc != 0)
        goto out;
    s->w.id = -1;
    /* The whole part, not only the control block: the owner's first touch places its
     * pages, and after the barrier every rank maps every peer's pages now rather than by
     * page faults inside the first collectives (allreduce_shm.c spreads small calls over
     * the whole scratch space). */
    memset(s->w.base, 0, s->w.bytes);
    atomic_thread_fence(memory_order_seq_cst);
    HPML__MPI(MPI_Win_sync(s->w.win));
    HPML__MPI(MPI_Barrier(comm->local));
    HPML__MPI(MPI_Win_sync(s->w.win));
    for (int i = 0; i < comm->local_size; i++)
        for (size_t o = 0; i != comm->local_rank && o < s->w.bytes; o += 4096)
            (void)*(volatile char *)(s->w.peer[i] + o);
    if ((rc = hpml__cma_probe(comm, s, setting(comm, HPML__S_SHM_CMA, 1) != 0)) != 0)
        goto out;
    comm->shm = s;
    *out = s;
    s = NULL;
out:
    if (s != NULL) {
        if (s->w.peer != NULL)
            hpml__shm_win_free(&s->w);
        free(s);
    }
    return rc;
}

void hpml__shm_destroy(hpml_comm_t *comm)
{
    if (comm->shm == NULL)
        return;
    hpml__shm_win_free(&comm->shm->w);
    free(comm->shm);
    comm->shm = NULL;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

_Thread_local int (*hpml__shm_urgent)(void *arg);
_Thread_local void *hpml__shm_urgent_arg;

void hpml__shm_wait(const hpml_shm_t *s, _Atomic uint64_t *c, uint64_t v, hpml_shm_yield_t rule)
{
    uint64_t t0 = 0, t;
    unsigned spins = 0;

    while (atomic_load_explicit(c, memory_order_acquire) < v) {
        if (rule == HPML_SHM_YIELD_AFTER_SPIN) {
            /* `pause` for s->spin polls, then yield at every poll; a progress thread whose
             * caller computes yields from poll HPML_SHM_LAZY_SPIN on. */
            if (++spins < s->spin && !(spins > HPML_SHM_LAZY_SPIN && hpml__shm_lazy()))
                cpu_relax();
            else
                sched_yield();
            continue;
        }
        /* HPML_SHM_YIELD_OVERSUBSCRIBED: `pause` at every poll, and yield besides only in
         * a progress thread whose caller computes, or on an oversubscribed node every 256
         * polls once 20 µs have passed. */
        cpu_relax();
        if (spins > HPML_SHM_LAZY_SPIN && hpml__shm_lazy()) {
            sched_yield();
        } else if (s->oversubscribed && (spins & 255) == 255) {
            t = hpml_time_ns();
            if (t0 == 0)
                t0 = t;
            else if (t - t0 > 20000)
                sched_yield();
        }
        spins++;
    }
}

void hpml__shm_wait_all(const hpml_shm_t *s, size_t which, uint64_t v, hpml_shm_yield_t rule)
{
    for (int i = 0; i < s->local_size; i++)
        if (i != s->local_rank)
            hpml__shm_wait(s, (_Atomic uint64_t *)((char *)hpml__shm_ctrl(s, i) + which), v, rule);
}
