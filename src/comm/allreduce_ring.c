/*
 * Allreduce by a ring: reduce-scatter (p−1 steps, each rank passes one block to its
 * right neighbour and folds in the block from its left) then allgather (p−1 steps)
 * (Patarasuk & Yuan 2009; Baidu/Horovod ring-allreduce).
 * Cost: 2(p−1)α + 2n(p−1)/p·β + n(p−1)/p·γ. Blocks may be empty when count < p.
 */
#include <stdlib.h>
#include <string.h>

#include "comm/coll_internal.h"
#include "comm/comm_internal.h"

#define TAG 0x4802

int hpml__allreduce_ring_on(MPI_Comm c, void *buf, size_t count, hpml_dtype_t dt, hpml_op_t op)
{
    size_t es = hpml_dtype_size(dt), *off = NULL, *len = NULL, q, r, maxlen;
    char *b = buf, *tmp = NULL;
    int rc = 0, rank, size, left, right;

    HPML__MPI(MPI_Comm_rank(c, &rank));
    HPML__MPI(MPI_Comm_size(c, &size));
    if (size == 1 || count == 0)
        goto out;
    off = malloc(sizeof(size_t) * (size_t)size);
    len = malloc(sizeof(size_t) * (size_t)size);
    q = count / (size_t)size;
    r = count % (size_t)size;
    maxlen = q + (r > 0);
    tmp = hpml_malloc(maxlen * es);
    if (off == NULL || len == NULL || tmp == NULL) {
        rc = HPML_ERR_NOMEM;
        goto out;
    }
    for (int i = 0; i < size; i++) {
        len[i] = q + ((size_t)i < r);
        off[i] = i == 0 ? 0 : off[i - 1] + len[i - 1];
    }
    left = (rank - 1 + size) % size;
    right = (rank + 1) % size;

    /* Reduce-scatter: after step s this rank holds blocks (rank-s-1) summed over s+2
     * ranks; at the end block rank+1 is complete here. */
    for (int s = 0; s < size - 1; s++) {
        int sb = (rank - s + size) % size, rb = (rank - s - 1 + size) % size;

        HPML__MPI(MPI_Sendrecv(b + off[sb] * es, (int)(len[sb] * es), MPI_BYTE, right, TAG, tmp,
                               (int)(len[rb] * es), MPI_BYTE, left, TAG, c, MPI_STATUS_IGNORE));
        rc = hpml_reduce_local3(b + off[rb] * es, tmp, b + off[rb] * es, len[rb], dt, op);
        if (rc != 0)
            goto out;
    }
    /* Allgather: pass the completed blocks around. */
    for (int s = 0; s < size - 1; s++) {
        int sb = (rank + 1 - s + size) % size, rb = (rank - s + size) % size;

        HPML__MPI(MPI_Sendrecv(b + off[sb] * es, (int)(len[sb] * es), MPI_BYTE, right, TAG,
                               b + off[rb] * es, (int)(len[rb] * es), MPI_BYTE, left, TAG, c,
                               MPI_STATUS_IGNORE));
    }
out:
    free(off);
    free(len);
    hpml_free(tmp);
    return rc;
}

int hpml__allreduce_ring(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                         hpml_op_t op, hpml_comm_t *comm)
{
    if (sendbuf != HPML_IN_PLACE && sendbuf != recvbuf)
        memcpy(recvbuf, sendbuf, count * hpml_dtype_size(dtype));
    return hpml__allreduce_ring_on(comm->comm, recvbuf, count, dtype, op);
}
