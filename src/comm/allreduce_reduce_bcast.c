/*
 * Allreduce as a binomial-tree reduce to rank 0 followed by a binomial-tree broadcast
 * (the textbook composition; MPICH's fallback for non-commutative ops).
 * Cost: 2 lg p·α + 2n lg p·β + n lg p·γ. Rank 0 receives partial results in a fixed
 * order (children by increasing distance), so the result is reproducible.
 */
#include <string.h>

#include "comm/coll_internal.h"
#include "comm/comm_internal.h"

#define TAG 0x4804

int hpml__allreduce_reduce_bcast(const void *sendbuf, void *recvbuf, size_t count,
                                 hpml_dtype_t dtype, hpml_op_t op, hpml_comm_t *comm)
{
    size_t bytes = count * hpml_dtype_size(dtype);
    MPI_Comm c = comm->comm;
    int rank = comm->rank, size = comm->size, rc = 0, mask;
    char *tmp = NULL;

    if (sendbuf != HPML_IN_PLACE && sendbuf != recvbuf)
        memcpy(recvbuf, sendbuf, bytes);
    if (size == 1)
        goto out;
    tmp = hpml_malloc(bytes);
    if (tmp == NULL) {
        rc = HPML_ERR_NOMEM;
        goto out;
    }
    /* Reduce: a rank receives from rank+1, rank+2, rank+4, ... until its lowest set bit,
     * then sends its partial result to rank - lowbit. */
    for (mask = 1; mask < size; mask <<= 1) {
        if (rank & mask) {
            HPML__MPI(MPI_Send(recvbuf, (int)bytes, MPI_BYTE, rank - mask, TAG, c));
            break;
        }
        if (rank + mask < size) {
            HPML__MPI(MPI_Recv(tmp, (int)bytes, MPI_BYTE, rank + mask, TAG, c, MPI_STATUS_IGNORE));
            rc = hpml_reduce_local(recvbuf, tmp, count, dtype, op);
            if (rc != 0)
                goto out;
        }
    }
    /* Broadcast down the same tree. */
    for (mask = 1; mask < size; mask <<= 1) {
        if (rank & mask) {
            HPML__MPI(
                MPI_Recv(recvbuf, (int)bytes, MPI_BYTE, rank - mask, TAG, c, MPI_STATUS_IGNORE));
            break;
        }
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (rank + mask < size)
            HPML__MPI(MPI_Send(recvbuf, (int)bytes, MPI_BYTE, rank + mask, TAG, c));
out:
    hpml_free(tmp);
    return rc;
}
