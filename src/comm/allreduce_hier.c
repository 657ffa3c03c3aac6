/*
 * Hierarchical allreduce: intra-node shared-memory reduce-scatter (each local rank
 * reduces its slices of the node's data in the node segment), an inter-node allreduce of
 * each slice among the ranks owning it on every node (MPI_Allreduce, or hpml's recursive
 * doubling/ring for fp16/bf16), then an intra-node allgather by copying every slice out
 * of the segment (as MVAPICH2's and NCCL's two-level allreduce). Slices number the
 * largest node's rank count, so uneven nodes line up; a smaller node's ranks own several.
 * Cost: intra-node ~ shm allreduce; inter-node Rabenseifner-like on n/L per rank.
 */
#include "comm/coll_internal.h"

int hpml__allreduce_hier(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                         hpml_op_t op, hpml_comm_t *comm)
{
    return hpml__allreduce_shm_engine(sendbuf, recvbuf, count, dtype, op, comm, 1, NULL);
}
