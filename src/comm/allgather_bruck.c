/*
 * Bruck allgather: blocks are kept rotated so that this rank's comes first; in round k
 * rank r sends its first min(2^k, p−2^k) blocks to r − 2^k and appends those of r + 2^k;
 * one final rotation puts them in rank order (Bruck et al. 1997; MPICH's
 * MPIR_Allgather_intra_brucks). Cost: ⌈lg p⌉α + n(p−1)/p·β + one local copy of n;
 * the latency of recursive doubling for any p.
 */
#include <string.h>

#include "comm/coll_internal.h"
#include "comm/comm_internal.h"
#include "comm/xfer.h"

int hpml__allgather_bruck(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                          hpml_comm_t *comm)
{
    int p = comm->size, rank = comm->rank, rc = 0;
    size_t blk = count * hpml_dtype_size(dtype);
    char *r = recvbuf, *tmp = NULL;
    const char *mine = sendbuf == HPML_IN_PLACE ? r + (size_t)rank * blk : sendbuf;

    if ((tmp = hpml_malloc((size_t)p * blk)) == NULL)
        return HPML_ERR_NOMEM;
    /* tmp[j] will hold the block of rank (rank + j) mod p. */
    memcpy(tmp, mine, blk);
    for (int k = 1; k < p; k <<= 1) {
        size_t n = (size_t)(k < p - k ? k : p - k);

        rc = hpml__xfer_sendrecv(tmp, n * blk, (rank - k + p) % p, tmp + (size_t)k * blk, n * blk,
                                 (rank + k) % p, HPML_TAG_ALLGATHER, comm->comm);
        if (rc != 0)
            goto out;
    }
    /* Rotate: tmp[0 .. p−rank) are ranks rank..p−1, the rest ranks 0..rank−1. */
    memcpy(r + (size_t)rank * blk, tmp, (size_t)(p - rank) * blk);
    memcpy(r, tmp + (size_t)(p - rank) * blk, (size_t)rank * blk);
out:
    hpml_free(tmp);
    return rc;
}
