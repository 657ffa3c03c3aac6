/*
 * Broadcast by the MPI library's own MPI_Bcast, on bytes (a bcast moves bits, so
 * f16/bf16 need nothing special). The baseline every other bcast is measured against.
 * Cost: whatever the MPI library's tuned selection gives.
 */
#include "comm/coll_internal.h"
#include "comm/comm_internal.h"

int hpml__bcast_mpi(void *buf, size_t count, hpml_dtype_t dtype, int root, hpml_comm_t *comm)
{
    int rc = 0;

    /* The dispatcher keeps count * size <= INT_MAX. */
    HPML__MPI(MPI_Bcast(buf, (int)(count * hpml_dtype_size(dtype)), MPI_BYTE, root, comm->comm));
out:
    return rc;
}
