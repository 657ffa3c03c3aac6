/*
 * Hierarchical allreduce: intra-node shared-memory reduce-scatter (each local rank
 * reduces its slices of the node's data in the node segment), an inter-node allreduce of
 * each slice among the ranks owning it on every node, then an intra-node allgather by
 * copying every slice out of the segment (as MVAPICH2's and NCCL's two-level allreduce).
 * The inter-node step is nonblocking and pipelined by chunks, so the network overlaps the
 * node's reduction and copy out (allreduce_shm.c, hier_run). Slices number the largest
 * node's rank count, so uneven nodes line up; a smaller node's ranks own several.
 * Cost (docs/scaling.md): about n / B over each link between 2 nodes, 2 (N-1)/N n / B
 * on N, plus one pipeline chunk of node work.
 */
#include "comm/coll_internal.h"

int hpml__allreduce_hier(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                         hpml_op_t op, hpml_comm_t *comm)
{
    return hpml__allreduce_shm_engine(sendbuf, recvbuf, count, dtype, op, comm, 1, NULL);
}
