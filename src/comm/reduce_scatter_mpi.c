/*
 * Reduce-scatter by the MPI library's own MPI_Reduce_scatter_block; fp16/bf16 as
 * MPI_UINT16_T with user-defined ops running hpml's kernels.
 * Cost: whatever the MPI library's tuned selection gives.
 */
#include "comm/coll_internal.h"
#include "comm/comm_internal.h"

int hpml__reduce_scatter_mpi(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                             hpml_op_t op, hpml_comm_t *comm)
{
    MPI_Datatype mdt;
    MPI_Op mop;
    int rc;

    if ((rc = hpml__mpi_reduce_types(dtype, op, &mdt, &mop)) != 0)
        return rc;
    HPML__MPI(MPI_Reduce_scatter_block(sendbuf == HPML_IN_PLACE ? MPI_IN_PLACE : sendbuf, recvbuf,
                                       (int)count, mdt, mop, comm->comm));
out:
    return rc;
}
