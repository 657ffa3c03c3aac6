/*
 * Shared memory among the node's ranks: the shared windows (shm.c), the node segment with
 * its control blocks and step counters (shm.c; the protocol every shared-memory algorithm
 * follows is described at hpml_shm_t), the one wait on a peer's counter and its yield
 * rules (shm.c), and the registered buffers (registered.c).
 */
#ifndef HPML_COMM_SHM_INTERNAL_H
#define HPML_COMM_SHM_INTERNAL_H

#include <mpi.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/store_mode.h"
#include "hpml/comm.h"

/* One shared window: every local rank owns `bytes` of it; peer[i] is local rank i's part
 * mapped in this process. */
typedef struct hpml_shm_win {
    MPI_Win win;
    char *base;   /* this rank's part */
    size_t bytes; /* size of every rank's part (equal on all local ranks) */
    char **peer;  /* local_size pointers */
    int id;       /* index in the order of creation (same on every local rank) */
    struct hpml_shm_win *next;
} hpml_shm_win_t;

/* Allocate one shared window over comm->local with `bytes` per rank, each rank's part on
 * its own pages and page-aligned, in a passive epoch for the window's lifetime. Collective
 * over comm->local; 0 or an error. hpml__shm_win_free frees it (collective too). */
int hpml__shm_win_create(hpml_comm_t *comm, size_t bytes, hpml_shm_win_t *w);
void hpml__shm_win_free(hpml_shm_win_t *w);

/* Control block at the start of each local rank's part of the node segment. Counters
 * only grow; each sits on its own cache line so that a rank spinning on a peer's counter
 * does not steal the line the peer writes its data descriptors into. */
typedef struct hpml_shm_ctrl {
    _Atomic uint64_t arrived; /* steps whose input this rank has published */
    char pad0[64 - sizeof(uint64_t)];
    _Atomic uint64_t reduced; /* steps whose slice this rank has reduced */
    char pad1[64 - sizeof(uint64_t)];
    _Atomic uint64_t done; /* steps this rank has finished reading every buffer of */
    char pad2[64 - sizeof(uint64_t)];
    /* Where this rank's input for the current operation is, when it is a registered
     * buffer: window id (-1: in the scratch buffers) and byte offset in its part. Written
     * before `arrived` is released, read by peers after acquiring it. */
    int64_t src_win;
    int64_t src_off;
    /* Cross-Memory Attach (cma.c, bcast_shm.c): this rank's pid and the address of its
     * private buffer for the current operation, written before `arrived` is released. */
    int64_t cma_pid;
    uint64_t cma_addr;
    /* hpml_allreduce_apply: step + 1 of the last step whose function failed on this rank,
     * stored before `reduced` is released; a peer that reads a value above its operation's
     * first step reports the failure too. */
    _Atomic uint64_t failed;
    char pad3[64 - 5 * sizeof(int64_t)];
    /* This rank's measured seconds per byte with plain [0] and streaming [1] stores per
     * size class and knob, for the store-mode picker of every local rank (store_mode.c:
     * the local ranks choose from their sum). */
    _Atomic float mode_cost[HPML_SHM_MODE_CLASSES][HPML_SHM_KNOBS][2];
    char pad4[128 - HPML_SHM_MODE_CLASSES * HPML_SHM_KNOBS * 2 * sizeof(float)];
} hpml_shm_ctrl_t;

/* The node segment used by the shared-memory algorithms (allreduce_shm.c, bcast_shm.c,
 * reduce_shm.c) and hpml_comm_node_sync. Protocol shared by all of them: steps are
 * numbered by `step` (advanced identically on every local rank); step g uses buffer
 * g % nbuf; a rank stores `arrived` = g+1 when its data for step g is published and
 * `done` = g+1 when it has finished reading every buffer of step g; a buffer is rewritten
 * at step g only when every rank's `done` >= g - nbuf + 1 (or, in allreduce_shm.c, when
 * `synced` proves it). */
typedef struct hpml_shm {
    hpml_shm_win_t w;           /* window holding ctrl + scratch for every local rank */
    size_t chunk_bytes;         /* pipeline chunk (bytes per step) */
    int nbuf;                   /* pipeline depth: scratch buffers per rank */
    uint64_t step;              /* next step number (identical on every local rank) */
    unsigned spin;              /* HPML_SHM_YIELD_AFTER_SPIN: polls before a wait yields */
    int oversubscribed;         /* more local ranks than online cores */
    size_t small_bytes;         /* one-step path up to this size (HPML_SHM_SMALL) */
    uint64_t synced;            /* this rank has seen every local rank publish steps < synced */
    int cma;                    /* every local rank can read/write the others' memory (cma.c) */
    int local_size, local_rank; /* of the communicator that made it */
    hpml_store_mode_t mode;     /* the store-mode picker's state (store_mode.c) */
} hpml_shm_t;

#define HPML_SHM_CTRL_BYTES ((size_t)384)
_Static_assert(sizeof(hpml_shm_ctrl_t) <= HPML_SHM_CTRL_BYTES, "control block too large");

/* Create the segment on first use. Collective over comm->local. */
int hpml__shm_get(hpml_comm_t *comm, hpml_shm_t **out);
void hpml__shm_destroy(hpml_comm_t *comm);
/* The defaults of HPML_SHM_CHUNK and HPML_SHM_NBUF. */
size_t hpml__shm_default_chunk(void);
int hpml__shm_default_nbuf(void);
static inline hpml_shm_ctrl_t *hpml__shm_ctrl(const hpml_shm_t *s, int local_rank)
{
    return (hpml_shm_ctrl_t *)s->w.peer[local_rank];
}
static inline char *hpml__shm_buf(hpml_shm_t *s, int local_rank, int buf)
{
    return s->w.peer[local_rank] + HPML_SHM_CTRL_BYTES + (size_t)buf * s->chunk_bytes;
}

/* ---- the wait (shm.c) --------------------------------------------------------------- */

/*
 * When a rank that waits for a peer's counter gives its core away (sched_yield). Each
 * algorithm keeps the rule it was built with:
 * - HPML_SHM_YIELD_AFTER_SPIN (the allreduce engine: shm and hierarchical allreduce,
 *   apply, shm reduce; hpml_comm_node_sync): `pause` for s->spin polls (HPML_SHM_SPIN:
 *   20000 by default, 256 when the node has more local ranks than cores), then yield at
 *   every poll. A peer on another core answers within a microsecond, and yielding costs
 *   a time slice whenever another process shares the core, so only oversubscribed nodes
 *   yield early.
 * - HPML_SHM_YIELD_OVERSUBSCRIBED (the shm bcast): `pause` at every poll and never yield
 *   while every local rank has a core, as MPI libraries do: the peer runs on its own core
 *   anyway, and a yield hands ours to whatever else is runnable on a loaded machine. With
 *   more local ranks than cores (s->oversubscribed), yield every 256 polls once 20 µs have
 *   passed, so that the peer can run on ours. HPML_SHM_SPIN does not apply.
 * Under either rule a progress thread whose caller is computing (hpml__shm_lazy) yields
 * after HPML_SHM_LAZY_SPIN polls, so that the computation keeps the core
 * (docs/decisions/gradient-overlap.md).
 */
typedef enum { HPML_SHM_YIELD_AFTER_SPIN, HPML_SHM_YIELD_OVERSUBSCRIBED } hpml_shm_yield_t;

/* Wait until *c >= v (acquire), yielding by `rule`. */
void hpml__shm_wait(const hpml_shm_t *s, _Atomic uint64_t *c, uint64_t v, hpml_shm_yield_t rule);
/* The same for every other local rank's counter at byte offset `which` of its control
 * block. */
void hpml__shm_wait_all(const hpml_shm_t *s, size_t which, uint64_t v, hpml_shm_yield_t rule);
/* Set by a progress thread (nonblocking.c) for itself: urgent(arg) says whether its caller
 * waits for a result (blocked in hpml_wait, or polling hpml_test). */
extern _Thread_local int (*hpml__shm_urgent)(void *arg);
extern _Thread_local void *hpml__shm_urgent_arg;
/* Polls (a microsecond or two) before a progress thread whose caller computes yields. */
#define HPML_SHM_LAZY_SPIN 64u
/* Is this a progress thread whose caller is computing rather than waiting? */
static inline int hpml__shm_lazy(void)
{
    return hpml__shm_urgent != NULL && !hpml__shm_urgent(hpml__shm_urgent_arg);
}

/* ---- registered buffers (registered.c) ---------------------------------------------- */

/* Is [p, p+bytes) inside one of this rank's registered buffers (hpml_comm_alloc_shared:
 * one shared window over comm->local per allocation)? Sets *win, *off. */
int hpml__registered_lookup(hpml_comm_t *comm, const void *p, size_t bytes, int *win, size_t *off);
/* Address of (window id, offset) in local rank `lr`'s part; NULL for an unknown window. */
char *hpml__registered_addr(hpml_comm_t *comm, int win, int lr, size_t off);

#endif /* HPML_COMM_SHM_INTERNAL_H */
