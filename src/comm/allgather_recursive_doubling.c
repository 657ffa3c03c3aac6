/*
 * Recursive-doubling allgather: in round k rank r swaps everything it has with r XOR 2^k,
 * doubling its blocks each round (Thakur, Rabenseifner & Gropp 2005). A non-power-of-two
 * p folds the r = p − 2^⌊lg p⌋ extra ranks onto the first r ones before and after.
 * Cost: ⌈lg p⌉α + n(p−1)/p·β (+ 2(α + nβ/p·…) for the fold).
 */
#include <string.h>

#include "comm/coll_internal.h"
#include "comm/comm_internal.h"
#include "comm/xfer.h"

int hpml__allgather_recursive_doubling(const void *sendbuf, void *recvbuf, size_t count,
                                       hpml_dtype_t dtype, hpml_comm_t *comm)
{
    int p = comm->size, rank = comm->rank, p2 = 1, extra, rc;
    size_t blk = count * hpml_dtype_size(dtype);
    char *r = recvbuf;

    if (sendbuf != HPML_IN_PLACE && sendbuf != r + (size_t)rank * blk)
        memcpy(r + (size_t)rank * blk, sendbuf, blk);
    while (p2 * 2 <= p)
        p2 *= 2;
    extra = p - p2;

    /* Fold: extra rank p2+i hands its block to rank i, which carries it along. */
    if (rank >= p2)
        return (rc = hpml__xfer_send(r + (size_t)rank * blk, blk, rank - p2, HPML_TAG_ALLGATHER,
                                     comm->comm)) != 0
                   ? rc
                   : hpml__xfer_recv(r, (size_t)p * blk, rank - p2, HPML_TAG_ALLGATHER, comm->comm);
    if (rank < extra && (rc = hpml__xfer_recv(r + (size_t)(p2 + rank) * blk, blk, p2 + rank,
                                              HPML_TAG_ALLGATHER, comm->comm)) != 0)
        return rc;

    /* Among the first p2 ranks, rank q holds after round `mask` the blocks of the ranks
     * [base, base+mask) with base = q & ~(mask−1), plus their extras' blocks
     * [p2+base, p2+min(base+mask, extra)): two contiguous pieces each way. */
    for (int mask = 1; mask < p2; mask <<= 1) {
        int peer = rank ^ mask;
        size_t mb = (size_t)(rank & ~(mask - 1)), pb = (size_t)(peer & ~(mask - 1));
        size_t me_x = mb < (size_t)extra ? hpml__min(mb + (size_t)mask, (size_t)extra) - mb : 0;
        size_t pe_x = pb < (size_t)extra ? hpml__min(pb + (size_t)mask, (size_t)extra) - pb : 0;

        rc = hpml__xfer_sendrecv2(r + mb * blk, (size_t)mask * blk, r + ((size_t)p2 + mb) * blk,
                                  me_x * blk, peer, r + pb * blk, (size_t)mask * blk,
                                  r + ((size_t)p2 + pb) * blk, pe_x * blk, peer, HPML_TAG_ALLGATHER,
                                  comm->comm);
        if (rc != 0)
            return rc;
    }
    if (rank < extra)
        return hpml__xfer_send(r, (size_t)p * blk, p2 + rank, HPML_TAG_ALLGATHER, comm->comm);
    return 0;
}
