/*
 * Ring allgather: in step s every rank forwards the block it received in step s−1 (its
 * own at s = 0) to its right neighbour. From MPICH's MPIR_Allgather_intra_ring.
 * Cost: (p−1)α + n(p−1)/p·β for n total bytes; bandwidth-optimal for large blocks.
 */
#include <string.h>

#include "comm/coll_internal.h"
#include "comm/comm_internal.h"
#include "comm/xfer.h"

int hpml__allgather_ring(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                         hpml_comm_t *comm)
{
    int p = comm->size, rank = comm->rank, left = (rank - 1 + p) % p, right = (rank + 1) % p;
    size_t blk = count * hpml_dtype_size(dtype);
    char *r = recvbuf;
    int rc;

    if (sendbuf != HPML_IN_PLACE && sendbuf != r + (size_t)rank * blk)
        memcpy(r + (size_t)rank * blk, sendbuf, blk);
    for (int s = 0; s < p - 1; s++) {
        size_t sb = (size_t)((rank - s + p) % p), rb = (size_t)((rank - s - 1 + p) % p);

        rc = hpml__xfer_sendrecv(r + sb * blk, blk, right, r + rb * blk, blk, left,
                                 HPML_TAG_ALLGATHER, comm->comm);
        if (rc != 0)
            return rc;
    }
    return 0;
}
