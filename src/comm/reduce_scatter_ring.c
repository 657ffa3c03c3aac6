/*
 * Ring reduce-scatter: in step s rank r sends its partial sum of block r−s−1 to r+1 and
 * adds the partial sum of block r−s−2 from r−1 to its own input; after p−1 steps block
 * r is complete (Patarasuk & Yuan 2009; the first half of the ring allreduce).
 * Cost: (p−1)α + n(p−1)/p·(β + γ) for n input bytes per rank.
 */
#include "comm/coll_internal.h"
#include "comm/comm_internal.h"
#include "comm/xfer.h"

int hpml__reduce_scatter_ring(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                              hpml_op_t op, hpml_comm_t *comm)
{
    int p = comm->size, rank = comm->rank, left = (rank - 1 + p) % p, right = (rank + 1) % p;
    size_t blk = count * hpml_dtype_size(dtype);
    const char *in = sendbuf == HPML_IN_PLACE ? recvbuf : sendbuf;
    char *acc = NULL, *tmp = NULL;
    int rc = 0;

    if ((acc = hpml_malloc(blk)) == NULL || (tmp = hpml_malloc(blk)) == NULL) {
        rc = HPML_ERR_NOMEM;
        goto out;
    }
    for (int s = 0; s < p - 1; s++) {
        size_t sb = (size_t)((rank - s - 1 + 2 * p) % p), rb = (size_t)((rank - s - 2 + 2 * p) % p);
        const char *src = s == 0 ? in + sb * blk : acc;

        rc = hpml__xfer_sendrecv(src, blk, right, tmp, blk, left, HPML_TAG_REDUCE_SCATTER,
                                 comm->comm);
        if (rc != 0)
            goto out;
        /* Every input block except our own has been read before the last step, so the
         * result may overwrite recvbuf's first block even in place. */
        rc = hpml_reduce_local3(s == p - 2 ? recvbuf : acc, tmp, in + rb * blk, count, dtype, op);
        if (rc != 0)
            goto out;
    }
out:
    hpml_free(acc);
    hpml_free(tmp);
    return rc;
}
