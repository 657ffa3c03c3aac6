/*
 * The collectives' algorithms: one signature per collective, so that the dispatchers
 * (allreduce.c, bcast.c, reduce.c, allgather.c, reduce_scatter.c), the selection table,
 * `hpml tune`, the benchmarks and the tests iterate over one table of them; the byte-level
 * forms on a plain MPI communicator that algorithms share; and the shared-memory engine
 * behind allreduce_shm, allreduce_hier and hpml_allreduce_apply.
 *
 * Every algorithm of a collective has that collective's signature. The dispatchers
 * guarantee: 0 < count <= hpml__max_chunk_elems(dtype, comm); op is never HPML_AVG (the
 * dispatcher runs SUM and calls hpml_reduce_finish); root is a valid rank; sendbuf may be
 * HPML_IN_PLACE where the collective allows it.
 */
#ifndef HPML_COMM_COLL_INTERNAL_H
#define HPML_COMM_COLL_INTERNAL_H

#include <mpi.h>
#include <stddef.h>

#include "hpml/comm.h"
#include "hpml/core.h"

/* ---- allreduce ------------------------------------------------------------------- */

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

/* ---- bcast ----------------------------------------------------------------------- */

typedef int (*hpml__bcast_fn)(void *buf, size_t count, hpml_dtype_t dtype, int root,
                              hpml_comm_t *comm);
int hpml__bcast_mpi(void *buf, size_t count, hpml_dtype_t dtype, int root, hpml_comm_t *comm);
int hpml__bcast_binomial(void *buf, size_t count, hpml_dtype_t dtype, int root, hpml_comm_t *comm);
int hpml__bcast_scatter_allgather(void *buf, size_t count, hpml_dtype_t dtype, int root,
                                  hpml_comm_t *comm);
int hpml__bcast_chain(void *buf, size_t count, hpml_dtype_t dtype, int root, hpml_comm_t *comm);
int hpml__bcast_shm(void *buf, size_t count, hpml_dtype_t dtype, int root, hpml_comm_t *comm);
/* The function for an algorithm, NULL if it does not do bcast. */
hpml__bcast_fn hpml__bcast_impl(hpml_algo_t algo);

/* Byte-level point-to-point bcasts on a plain communicator (the shared-memory bcast's
 * inter-node step uses them on the leaders' communicator). */
int hpml__bcast_binomial_on(MPI_Comm c, void *buf, size_t bytes, int root);
int hpml__bcast_chain_on(MPI_Comm c, void *buf, size_t bytes, int root);
/* Blocks are multiples of `unit` bytes (the element size) so no element is split. */
int hpml__bcast_scatter_allgather_on(MPI_Comm c, void *buf, size_t bytes, size_t unit, int root);
/* Pipeline chunk of the chain bcast in bytes (HPML_BCAST_CHUNK, default 64 KiB), and
 * the size above which chunking starts. */
size_t hpml__bcast_chain_chunk(size_t bytes, int p);

/* ---- reduce ---------------------------------------------------------------------- */

typedef int (*hpml__reduce_fn)(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                               hpml_op_t op, int root, hpml_comm_t *comm);
int hpml__reduce_mpi(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                     hpml_op_t op, int root, hpml_comm_t *comm);
int hpml__reduce_binomial(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                          hpml_op_t op, int root, hpml_comm_t *comm);
int hpml__reduce_shm(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                     hpml_op_t op, int root, hpml_comm_t *comm);
hpml__reduce_fn hpml__reduce_impl(hpml_algo_t algo);

/* ---- allgather ------------------------------------------------------------------- */

typedef int (*hpml__allgather_fn)(const void *sendbuf, void *recvbuf, size_t count,
                                  hpml_dtype_t dtype, hpml_comm_t *comm);
int hpml__allgather_mpi(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                        hpml_comm_t *comm);
int hpml__allgather_ring(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                         hpml_comm_t *comm);
int hpml__allgather_recursive_doubling(const void *sendbuf, void *recvbuf, size_t count,
                                       hpml_dtype_t dtype, hpml_comm_t *comm);
int hpml__allgather_bruck(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                          hpml_comm_t *comm);
hpml__allgather_fn hpml__allgather_impl(hpml_algo_t algo);

/* ---- reduce_scatter -------------------------------------------------------------- */

typedef int (*hpml__reduce_scatter_fn)(const void *sendbuf, void *recvbuf, size_t count,
                                       hpml_dtype_t dtype, hpml_op_t op, hpml_comm_t *comm);
int hpml__reduce_scatter_mpi(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                             hpml_op_t op, hpml_comm_t *comm);
int hpml__reduce_scatter_ring(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                              hpml_op_t op, hpml_comm_t *comm);
hpml__reduce_scatter_fn hpml__reduce_scatter_impl(hpml_algo_t algo);

#endif /* HPML_COMM_COLL_INTERNAL_H */
