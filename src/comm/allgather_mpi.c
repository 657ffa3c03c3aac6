/*
 * Allgather by the MPI library's own MPI_Allgather, on bytes (no reduction, so f16/bf16
 * need nothing special). The baseline for the other allgathers.
 * Cost: whatever the MPI library's tuned selection gives.
 */
#include "comm/coll_internal.h"
#include "comm/comm_internal.h"

int hpml__allgather_mpi(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                        hpml_comm_t *comm)
{
    int n = (int)(count * hpml_dtype_size(dtype)), rc = 0; /* dispatcher: fits an int */
    char *own = (char *)recvbuf + (size_t)comm->rank * (size_t)n;

    HPML__MPI(MPI_Allgather(sendbuf == HPML_IN_PLACE || sendbuf == own ? MPI_IN_PLACE : sendbuf, n,
                            MPI_BYTE, recvbuf, n, MPI_BYTE, comm->comm));
out:
    return rc;
}
