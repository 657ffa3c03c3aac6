/*
 * The communicator inside src/comm/: struct hpml_comm, the MPI helpers of every file that
 * calls MPI, the hooks of the checking mode (check.c) and of the nonblocking engine
 * (nonblocking.c), and the selection table (select.c). The collectives' algorithms are
 * declared in coll_internal.h; the node segment, registered buffers and the wait in
 * shm_internal.h.
 *
 * Every blocking collective entry point (hpml_allreduce*, hpml_bcast*, hpml_reduce*,
 * hpml_allgather*, hpml_reduce_scatter*, hpml_alltoallv, hpml_barrier) and every
 * collective of the node segment (hpml_comm_alloc_shared, hpml_comm_node_sync) first does
 *     if (comm->check && (rc = hpml__check(comm, KIND, count, dtype, op, root)) != 0)
 *         return rc;
 * with KIND an hpml__kind_t, dtype/op -1 and root -1 where they do not apply. hpml__check
 * compares the signature (kind, count, dtype, op, root, comm->seq) across ranks,
 * increments comm->seq, and returns 0 or HPML_ERR_MISMATCH (with hpml_set_error naming
 * the operation and the ranks).
 */
#ifndef HPML_COMM_INTERNAL_H
#define HPML_COMM_INTERNAL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "core/settings_internal.h"
#include "hpml/comm.h"
#include "hpml/core.h"

struct hpml_shm;      /* shm_internal.h: the node segment */
struct hpml_shm_win;  /* shm_internal.h: one shared window */
struct hpml_progress; /* nonblocking.c: the nonblocking engine */
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
    /* Its scratch (allreduce_shm.c, hier_scratch): grown when a call needs more, with the
     * ranks agreeing that the allocation worked; freed with the communicator. */
    char *hier_buf;
    size_t hier_bytes;

    struct hpml_shm *shm;            /* node segment (shm.c), created lazily */
    struct hpml_shm_win *registered; /* registered.c: hpml_comm_alloc_shared windows,
                                        newest first */
    int nregistered;                 /* windows created so far (ids) */

    hpml__settings_t set;       /* the HPML_* settings, read once at creation */
    size_t max_chunk_elems;     /* largest count one algorithm call handles */
    struct hpml_select *select; /* selection table (select.c) */

    struct hpml_progress *progress; /* nonblocking engine, NULL until first use */
    int check;                      /* HPML_CHECK: compare signatures */
    uint64_t seq;                   /* collective sequence number for hpml__check */
};

/* ---- checking mode (check.c) and the nonblocking engine (nonblocking.c) ------------ */

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

int hpml__check(hpml_comm_t *comm, int kind, size_t count, int dtype, int op, int root);
/* The duplicate communicator the checking mode runs its own collectives on (created on
 * first use, kept with the nonblocking engine's state; collective over comm, which every
 * rank's first checked call is). */
int hpml__check_comm(hpml_comm_t *comm, MPI_Comm *out);
/* Called first by hpml_comm_destroy: waits for and tears down comm->progress and the
 * checking communicator; accepts comm->progress == NULL. */
void hpml__progress_destroy(hpml_comm_t *comm);

/* ---- MPI helpers (comm.c, allreduce_mpi.c, reduce_mpi.c) ------------------------------ */

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
/* The MPI library the program runs on (select.c), from MPI_Get_library_version
 * (callable before MPI_Init), probed once: HPML__LIB_OPENMPI, HPML__LIB_MPICH (or
 * derived) or HPML__LIB_OTHER. The same on every rank of a job. */
#define HPML__LIB_OPENMPI 1
#define HPML__LIB_MPICH   2
#define HPML__LIB_OTHER   3
int hpml__mpi_lib(void);
/* 1 when the MPI library's own reduction gives hpml's semantics for dtype/op: the dtype
 * has an MPI type and the library is not known to get it wrong (Open MPI 4.1's AVX op
 * component saturates 8-bit integer SUM instead of wrapping; MPICH 4.0 compares u8 as
 * signed in MIN/MAX). Use before any
 * MPI_Allreduce/MPI_Reduce/MPI_Reduce_scatter_block on user data. */
int hpml__mpi_op_ok(hpml_dtype_t dt, hpml_op_t op);
/* MPI datatype and op that reduce `dtype` with hpml's kernels: the predefined ones for
 * the MPI types, a 2-byte type with user-defined ops (created once, never freed) for
 * f16/bf16. AVG maps to SUM. Returns 0 or an error. */
int hpml__mpi_reduce_types(hpml_dtype_t dtype, hpml_op_t op, MPI_Datatype *mdt, MPI_Op *mop);

/* ---- selection (select.c) -------------------------------------------------------- */

/* Load HPML_TUNING_FILE (if set) and HPML_ALGO_<COLL>; called by hpml_comm_create. */
int hpml__select_init(hpml_comm_t *comm);
void hpml__select_destroy(hpml_comm_t *comm);
/* A fingerprint of the rules and forced algorithms (equal: the same choices), and where
 * they come from in words; hpml_comm_create compares them across ranks. */
uint64_t hpml__select_digest(const hpml_comm_t *comm);
void hpml__select_source(const hpml_comm_t *comm, char *buf, size_t size);
/* The algorithm to run for `coll` with `bytes` of payload (never AUTO); the public
 * hpml_algo_selected is the same call. */
hpml_algo_t hpml__select(hpml_comm_t *comm, hpml_coll_t coll, size_t bytes);

/* prof_hook.c: around the algorithm's calls in each dispatcher, for libhpml-prof.so. */
void hpml__prof_enter(hpml_coll_t coll, hpml_algo_t algo, size_t bytes);
void hpml__prof_leave(void);
/* Parse a tuning file; errors as HPML_ERR_FORMAT / HPML_ERR_IO with a message naming the
 * file and line. */
int hpml__select_load(struct hpml_select **out, const char *path);
void hpml__select_free(struct hpml_select *s);

static inline size_t hpml__min(size_t a, size_t b)
{
    return a < b ? a : b;
}

#endif /* HPML_COMM_INTERNAL_H */
