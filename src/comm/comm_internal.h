/*
 * comm internals: the communicator object, the node shared-memory segment, and the
 * internal algorithm signatures shared by the files of src/comm/.
 *
 * Ownership inside src/comm/:
 *   comm.c, shm.c, select.c, tune.c, allreduce*.c      "comm A"
 *   check.c (hpml__check), nonblocking.c (hpml__progress_*), bcast*.c, reduce*.c,
 *   allgather*.c, reduce_scatter*.c, fusion.c           "comm B"
 *
 * Contract between the two halves:
 *   - Every blocking collective entry point (hpml_allreduce*, hpml_bcast*, hpml_reduce*,
 *     hpml_allgather*, hpml_reduce_scatter*, hpml_barrier) first does
 *         if (comm->check && (rc = hpml__check(comm, KIND, count, dtype, op, root)) != 0)
 *             return rc;
 *     with KIND an hpml__kind_t, dtype/op -1 and root -1 where they do not apply.
 *     hpml__check (comm B, src/comm/check.c) compares the signature (kind, count, dtype,
 *     op, root, comm->seq) across ranks, increments comm->seq, and returns 0 or
 *     HPML_ERR_MISMATCH (with hpml_set_error naming the operation and the ranks).
 *   - hpml_comm_destroy calls hpml__progress_destroy(comm) first (comm B,
 *     src/comm/nonblocking.c): it waits for and tears down comm->progress; it must
 *     accept comm->progress == NULL.
 *   - Algorithm choice for every collective: hpml__select(comm, coll, bytes) (select.c)
 *     returns the algorithm to run (env forcing, tuning file, built-in table); the
 *     public hpml_algo_selected is the same call.
 */
#ifndef HPML_COMM_INTERNAL_H
#define HPML_COMM_INTERNAL_H

#include <limits.h>
#include <mpi.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/settings_internal.h"
#include "hpml/comm.h"
#include "hpml/core.h"

/* Operation kinds for hpml__check: the hpml_coll_t values, then these. */
typedef enum {
    HPML__KIND_ALLREDUCE = HPML_COLL_ALLREDUCE,
    HPML__KIND_BCAST = HPML_COLL_BCAST,
    HPML__KIND_REDUCE = HPML_COLL_REDUCE,
    HPML__KIND_ALLGATHER = HPML_COLL_ALLGATHER,
    HPML__KIND_REDUCE_SCATTER = HPML_COLL_REDUCE_SCATTER,
    HPML__KIND_BARRIER = HPML_COLL_COUNT,
    HPML__KIND_IALLREDUCE,
    HPML__KIND_IBCAST,
    HPML__KIND_ALLOC_SHARED,
    HPML__KIND_ALLREDUCE_APPLY,
    HPML__KIND_IALLREDUCE_APPLY,
    HPML__KIND_ALLTOALLV,
    HPML__KIND_NODE_SYNC,
    HPML__KIND_COUNT
} hpml__kind_t;

/* ---- node shared-memory segment (shm.c) ---------------------------------------- */

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

/* Control block at the start of each local rank's part of the node segment. Counters
 * only grow; each sits on its own cache line so that a rank spinning on a peer's counter
 * does not steal the line the peer writes its data descriptors into. */
#define HPML_SHM_MODE_CLASSES 5 /* size classes of hpml__shm_mode_pick */
/* Its knobs: how the pipeline buffers that peers read are written [0], and how the
 * caller's output is [1]. */
#define HPML_SHM_KNOBS 2

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
    /* Cross-Memory Attach (bcast_shm.c): this rank's pid and the address of its private
     * buffer for the current operation, written before `arrived` is released. */
    int64_t cma_pid;
    uint64_t cma_addr;
    /* hpml_allreduce_apply: step + 1 of the last step whose function failed on this rank,
     * stored before `reduced` is released; a peer that reads a value above its operation's
     * first step reports the failure too. */
    _Atomic uint64_t failed;
    char pad3[64 - 5 * sizeof(int64_t)];
    /* This rank's measured seconds per byte with plain [0] and streaming [1] stores per
     * size class and knob (hpml__shm_mode_pick: the local ranks choose from their sum). */
    _Atomic float mode_cost[HPML_SHM_MODE_CLASSES][HPML_SHM_KNOBS][2];
    char pad4[128 - HPML_SHM_MODE_CLASSES * HPML_SHM_KNOBS * 2 * sizeof(float)];
} hpml_shm_ctrl_t;

/* The node segment used by the shared-memory algorithms (allreduce_shm.c and comm B's
 * bcast_shm.c/reduce_shm.c). Protocol shared by all of them: steps are numbered by
 * `step` (advanced identically on every local rank); step g uses buffer g % nbuf; a
 * rank stores `arrived` = g+1 when its data for step g is published and `done` = g+1 when
 * it has finished reading every buffer of step g; a buffer is rewritten at step g only
 * when every rank's `done` >= g - nbuf + 1 (or, in allreduce_shm.c, when `synced` proves
 * it). */
typedef struct hpml_shm {
    hpml_shm_win_t w;   /* window holding ctrl + scratch for every local rank */
    size_t chunk_bytes; /* pipeline chunk (bytes per step) */
    int nbuf;           /* pipeline depth: scratch buffers per rank */
    uint64_t step;      /* next step number (identical on every local rank) */
    unsigned spin;      /* pause iterations before a waiting rank starts to yield */
    size_t small_bytes; /* one-step path up to this size (HPML_SHM_SMALL) */
    uint64_t synced;    /* this rank has seen every local rank publish steps < synced */
    int cma;            /* every local rank can read/write the others' memory (CMA) */
    int nt;             /* HPML_SHM_NT: pipeline streamed 1, plain 0, measured -1 */
    int out_nt;         /* HPML_SHM_OUT_NT: outputs streamed 1, plain 0, measured -1 */
    size_t llc_bytes;   /* last-level cache of this rank's core (0: unknown) */
    /* The store-mode picker (hpml__shm_mode_pick), per size class and knob: measured
     * seconds per byte of plain [0] and streaming [1] operations, the first samples of
     * each, the calls in which the knob was measured, the mode it runs between probes,
     * and its call count when each mode's figure was last measured. */
    double mode_cost[HPML_SHM_MODE_CLASSES][HPML_SHM_KNOBS][2];
    double mode_warm[HPML_SHM_MODE_CLASSES][HPML_SHM_KNOBS][2][3];
    int local_size, local_rank; /* of the communicator that made it */
    unsigned mode_calls[HPML_SHM_MODE_CLASSES][HPML_SHM_KNOBS];
    int mode_cur[HPML_SHM_MODE_CLASSES][HPML_SHM_KNOBS];
    unsigned mode_seen[HPML_SHM_MODE_CLASSES][HPML_SHM_KNOBS][2];
    int mode_last[HPML_SHM_MODE_CLASSES];      /* modes of the last call + 1 (0: none yet) */
    uint64_t mode_step[HPML_SHM_MODE_CLASSES]; /* `step` at the last call of the class */
    unsigned mode_run[HPML_SHM_MODE_CLASSES];  /* its calls since the last gap of MODE_STALE */
    unsigned mode_class_calls[HPML_SHM_MODE_CLASSES]; /* its calls since its warm-up began */
    /* What the call between hpml__shm_mode_pick and hpml__shm_mode_record measures: its
     * class (-1: nothing), its modes, and per knob its role (ROLE_* in shm.c). */
    int pend_class, pend_modes, pend_role[HPML_SHM_KNOBS];
} hpml_shm_t;

#define HPML_SHM_CTRL_BYTES ((size_t)384)
_Static_assert(sizeof(hpml_shm_ctrl_t) <= HPML_SHM_CTRL_BYTES, "control block too large");

/* Create the segment on first use. Collective over comm->local. */
int hpml__shm_get(hpml_comm_t *comm, hpml_shm_t **out);
void hpml__shm_destroy(hpml_comm_t *comm);
static inline hpml_shm_ctrl_t *hpml__shm_ctrl(hpml_shm_t *s, int local_rank)
{
    return (hpml_shm_ctrl_t *)s->w.peer[local_rank];
}
static inline char *hpml__shm_buf(hpml_shm_t *s, int local_rank, int buf)
{
    return s->w.peer[local_rank] + HPML_SHM_CTRL_BYTES + (size_t)buf * s->chunk_bytes;
}
/* Spin (then yield, for oversubscribed runs) until *c >= v (acquire). */
void hpml__shm_wait(_Atomic uint64_t *c, uint64_t v, unsigned spin);
/* Set by a progress thread (nonblocking.c) for itself: while urgent(arg) says no caller
 * is waiting for a result, its shm waits spin only briefly before yielding, so that the
 * caller's computation on the same core keeps the core. */
extern _Thread_local int (*hpml__shm_urgent)(void *arg);
extern _Thread_local void *hpml__shm_urgent_arg;
/* Pause iterations (a microsecond or two) before such a progress thread yields. */
#define HPML_SHM_LAZY_SPIN 64u
/* Is this a progress thread whose caller is computing rather than waiting? */
static inline int hpml__shm_lazy(void)
{
    return hpml__shm_urgent != NULL && !hpml__shm_urgent(hpml__shm_urgent_arg);
}
/* Wait until every local rank's counter at byte offset `which` of its ctrl is >= v. */
void hpml__shm_wait_all(hpml_comm_t *comm, hpml_shm_t *s, size_t which, uint64_t v);
/* Store modes of one shm allreduce (shm.c explains): streaming stores into the pipeline
 * buffers that peers read (bit HPML_SHM_MODE_PIPE) and into the caller's output (bit
 * HPML_SHM_MODE_OUT), each plain when its bit is clear. hpml__shm_mode_pick chooses them
 * for an operation of `bytes` (out_ok: the engine writes the caller's output, so that
 * knob applies; otherwise its bit stays clear) from the measurements that
 * hpml__shm_mode_record collects: the seconds that operation took, recorded before the
 * next pick on this segment. */
#define HPML_SHM_MODE_PIPE 1
#define HPML_SHM_MODE_OUT  2
int hpml__shm_mode_pick(hpml_shm_t *s, size_t bytes, int out_ok);
void hpml__shm_mode_record(hpml_shm_t *s, size_t bytes, double seconds);
/* memcpy (nt = 0) or a copy with streaming stores (nt = 1). */
void hpml__shm_copy(void *dst, const void *src, size_t n, int nt);
/* Is [p, p+bytes) inside one of this rank's registered buffers (hpml_comm_alloc_shared:
 * one shared window over comm->local per allocation)? Sets *win, *off. */
int hpml__shm_lookup(hpml_comm_t *comm, const void *p, size_t bytes, int *win, size_t *off);
/* Address of (window id, offset) in local rank `lr`'s part. */
char *hpml__shm_addr(hpml_comm_t *comm, int win, int lr, size_t off);
/* Cross-Memory Attach (Linux process_vm_readv/writev): copy `bytes` from address `remote`
 * of process `pid` to `local` (read) or the other way (write). 0 or HPML_ERR_STATE. Only
 * when s->cma, which hpml__shm_get sets when every local rank could read a peer. */
int hpml__cma_read(int64_t pid, void *local, uint64_t remote, size_t bytes);
int hpml__cma_write(int64_t pid, uint64_t remote, const void *local, size_t bytes);

/* ---- the communicator -------------------------------------------------------------- */

struct hpml_progress; /* comm B: nonblocking engine */
struct hpml_select;   /* select.c: the active selection table */

struct hpml_comm {
    MPI_Comm comm;    /* dup of the user's communicator, MPI_ERRORS_RETURN */
    MPI_Comm local;   /* ranks of this (possibly virtual) node */
    MPI_Comm leaders; /* local rank 0 of every node; MPI_COMM_NULL on other ranks */
    int rank, size;
    int local_rank, local_size;
    int node, nodes;
    int max_local_size; /* largest local_size over the nodes */
    int ranks_per_node; /* HPML_RANKS_PER_NODE (0: real nodes) */
    int real_nodes;     /* number of physical nodes (shared-memory domains) */

    /* Hierarchical algorithm: slice_comm[j] joins, across nodes, the ranks that own
     * slice j on their node (j < max_local_size); created on first use. */
    MPI_Comm *slice_comm;

    hpml_shm_t *shm;            /* node segment, created lazily */
    hpml_shm_win_t *registered; /* hpml_comm_alloc_shared windows, newest first */
    int nregistered;            /* windows created so far (ids) */

    hpml__settings_t set;       /* the HPML_* settings, read once at creation */
    size_t max_chunk_elems;     /* largest count one algorithm call handles */
    struct hpml_select *select; /* selection table (select.c) */

    /* comm B */
    struct hpml_progress *progress; /* nonblocking engine, NULL until first use */
    int check;                      /* HPML_CHECK: compare signatures */
    uint64_t seq;                   /* collective sequence number for hpml__check */
};

/* Provided by comm B. */
int hpml__check(hpml_comm_t *comm, int kind, size_t count, int dtype, int op, int root);
void hpml__progress_destroy(hpml_comm_t *comm);

/* MPI error to hpml error with a detail message. */
int hpml__mpi_error(int mpi_rc, const char *what);
#define HPML__MPI(call)                                                                            \
    do {                                                                                           \
        int hpml_mpi_rc_ = (call);                                                                 \
        if (hpml_mpi_rc_ != MPI_SUCCESS) {                                                         \
            rc = hpml__mpi_error(hpml_mpi_rc_, #call);                                             \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

/* The MPI datatype for an hpml dtype, MPI_DATATYPE_NULL for f16/bf16. */
MPI_Datatype hpml__mpi_dtype(hpml_dtype_t dt);
/* The MPI op for an hpml op (AVG maps to MPI_SUM). */
MPI_Op hpml__mpi_op(hpml_op_t op);
/* 1 when the MPI library's own reduction gives hpml's semantics for dtype/op: the dtype
 * has an MPI type and the library is not known to get it wrong (Open MPI 4.1's AVX op
 * component saturates 8-bit integer SUM instead of wrapping; MPICH 4.0 compares u8 as
 * signed in MIN/MAX). Use before any
 * MPI_Allreduce/MPI_Reduce/MPI_Reduce_scatter_block on user data. */
int hpml__mpi_op_ok(hpml_dtype_t dt, hpml_op_t op);

/* ---- allreduce algorithms ------------------------------------------------------- */

/*
 * Every allreduce algorithm has this signature. The dispatcher (allreduce.c) guarantees:
 * 0 < count <= comm->max_chunk_elems and count * dtype size <= INT_MAX; op is never
 * HPML_AVG (it runs SUM and calls hpml_reduce_finish); sendbuf may be HPML_IN_PLACE;
 * the dtype/op pair is valid. Results are bitwise reproducible for a given rank count.
 */
typedef int (*hpml__allreduce_fn)(const void *sendbuf, void *recvbuf, size_t count,
                                  hpml_dtype_t dtype, hpml_op_t op, hpml_comm_t *comm);

int hpml__allreduce_mpi(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                        hpml_op_t op, hpml_comm_t *comm);
int hpml__allreduce_recursive_doubling(const void *sendbuf, void *recvbuf, size_t count,
                                       hpml_dtype_t dtype, hpml_op_t op, hpml_comm_t *comm);
int hpml__allreduce_ring(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                         hpml_op_t op, hpml_comm_t *comm);
int hpml__allreduce_rabenseifner(const void *sendbuf, void *recvbuf, size_t count,
                                 hpml_dtype_t dtype, hpml_op_t op, hpml_comm_t *comm);
int hpml__allreduce_reduce_bcast(const void *sendbuf, void *recvbuf, size_t count,
                                 hpml_dtype_t dtype, hpml_op_t op, hpml_comm_t *comm);
int hpml__allreduce_shm(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                        hpml_op_t op, hpml_comm_t *comm);
int hpml__allreduce_hier(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                         hpml_op_t op, hpml_comm_t *comm);

/* Point-to-point algorithms on a plain MPI communicator (used by the ones above and by
 * the hierarchical algorithm's inter-node step). recvbuf holds the input on entry
 * (in place) and the result on return. Same guarantees as hpml__allreduce_fn. */
int hpml__allreduce_rd_on(MPI_Comm c, void *buf, size_t count, hpml_dtype_t dt, hpml_op_t op);
int hpml__allreduce_ring_on(MPI_Comm c, void *buf, size_t count, hpml_dtype_t dt, hpml_op_t op);
/* MPI_Allreduce for MPI dtypes, recursive doubling / ring for f16/bf16. */
int hpml__allreduce_native_on(MPI_Comm c, void *buf, size_t count, hpml_dtype_t dt, hpml_op_t op);

/* hpml_allreduce_apply's function as the engine runs it: `base` is the offset of the
 * engine call's first element in the caller's vector (the dispatcher splits large
 * counts), `op` the caller's op (the engine gets SUM for AVG and divides by
 * `contributions` before fn). */
typedef struct {
    hpml_apply_fn fn;
    void *ctx;
    size_t base;
    hpml_op_t op;
    int contributions;
} hpml__apply_t;

/* Shared-memory engine behind allreduce_shm, allreduce_hier and hpml_allreduce_apply:
 * intra-node reduction of each slice by its owner, then (hier) `inter` on each owned
 * slice, then (apply, out of place only) the owner passes its slices through ap->fn, then
 * every local rank copies the result out. ap is NULL for a plain allreduce. */
int hpml__allreduce_shm_engine(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                               hpml_op_t op, hpml_comm_t *comm, int inter_node,
                               const hpml__apply_t *ap);

/* hpml_allreduce_apply's argument checks (errors name `who`), and its body without the
 * checks and the mismatch check (also run by the progress thread). */
int hpml__allreduce_apply_check(const char *who, const void *sendbuf, void *recvbuf, size_t count,
                                hpml_dtype_t dtype, hpml_op_t op, hpml_apply_fn fn,
                                hpml_comm_t *comm);
int hpml__allreduce_apply_run(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                              hpml_op_t op, hpml_apply_fn fn, void *ctx, hpml_comm_t *comm);

/* The function for an algorithm, NULL if it does not do allreduce. */
hpml__allreduce_fn hpml__allreduce_impl(hpml_algo_t algo);
/* Default internal chunk limit; lowered by HPML_MAX_CHUNK_ELEMS. */
size_t hpml__max_chunk_elems(hpml_dtype_t dt, const hpml_comm_t *comm);

/* The defaults of HPML_SHM_CHUNK and HPML_SHM_NBUF (shm.c). */
size_t hpml__shm_default_chunk(void);
int hpml__shm_default_nbuf(void);

/* ---- selection (select.c) -------------------------------------------------------- */

/* Load HPML_TUNING_FILE (if set) and HPML_ALGO_<COLL>; called by hpml_comm_create. */
int hpml__select_init(hpml_comm_t *comm);
void hpml__select_destroy(hpml_comm_t *comm);
/* A fingerprint of the rules and forced algorithms (equal: the same choices), and where
 * they come from in words; hpml_comm_create compares them across ranks. */
uint64_t hpml__select_digest(const hpml_comm_t *comm);
void hpml__select_source(const hpml_comm_t *comm, char *buf, size_t size);
/* The algorithm to run for `coll` with `bytes` of payload (never AUTO). */
hpml_algo_t hpml__select(hpml_comm_t *comm, hpml_coll_t coll, size_t bytes);
/* Parse a tuning file; errors as HPML_ERR_FORMAT / HPML_ERR_IO with a message naming the
 * file and line. */
int hpml__select_load(struct hpml_select **out, const char *path);
void hpml__select_free(struct hpml_select *s);

static inline size_t hpml__min(size_t a, size_t b)
{
    return a < b ? a : b;
}

#endif /* HPML_COMM_INTERNAL_H */
