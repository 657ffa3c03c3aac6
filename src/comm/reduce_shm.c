/*
 * Shared-memory reduce: the shared-memory allreduce (every local rank reduces its
 * slice of all peers' buffers in the node segment), with the result kept at the root
 * only. Cost: the shared-memory allreduce's, about 2n/B_copy on one node: cheaper than
 * a tree of n-byte messages whenever n is large.
 */
#include "comm/coll_internal.h"
#include "comm/comm_internal.h"

int hpml__reduce_shm(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                     hpml_op_t op, int root, hpml_comm_t *comm)
{
    size_t bytes = count * hpml_dtype_size(dtype);
    void *tmp = NULL;
    int rc;

    if (comm->rank == root)
        return hpml__allreduce_shm(sendbuf, recvbuf, count, dtype, op, comm);
    /* Elsewhere recvbuf may be NULL, and an in-place input must stay unchanged. */
    if ((tmp = hpml_malloc(bytes)) == NULL)
        return HPML_ERR_NOMEM;
    rc = hpml__allreduce_shm(sendbuf == HPML_IN_PLACE ? recvbuf : sendbuf, tmp, count, dtype, op,
                             comm);
    hpml_free(tmp);
    return rc;
}
