/*
 * comm B internals: algorithm signatures for bcast, reduce, allgather and
 * reduce_scatter, the byte-level building blocks they share, and the hooks of the
 * nonblocking engine and the checking mode. Builds on comm_internal.h (comm A).
 *
 * Every algorithm of a collective has that collective's signature, so the dispatchers,
 * benchmarks and tests iterate over one table. The dispatchers guarantee:
 * 0 < count <= hpml__max_chunk_elems(dtype, comm); op is never HPML_AVG (the dispatcher
 * runs SUM and calls hpml_reduce_finish); root is a valid rank; sendbuf may be
 * HPML_IN_PLACE where the collective allows it.
 */
#ifndef HPML_COMMB_INTERNAL_H
#define HPML_COMMB_INTERNAL_H

#include "comm/comm_internal.h"
#include "comm/xfer.h"

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

/* ---- MPI fallbacks for f16/bf16 --------------------------------------------------- */

/* MPI datatype and op that reduce `dtype` with hpml's kernels: the predefined ones for
 * the MPI types, a 2-byte type with user-defined ops (created once, never freed) for
 * f16/bf16. AVG maps to SUM. Returns 0 or an error. */
int hpml__mpi_reduce_types(hpml_dtype_t dtype, hpml_op_t op, MPI_Datatype *mdt, MPI_Op *mop);

/* ---- comm B state (nonblocking.c) -------------------------------------------------- */

/* The duplicate communicator the checking mode runs its own collectives on (created on
 * first use; collective over comm, which every rank's first checked call is). */
int hpml__check_comm(hpml_comm_t *comm, MPI_Comm *out);

#endif
