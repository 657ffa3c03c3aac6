/*
 * Binomial-tree reduce: in round k relative rank r with bit k clear receives the partial
 * result of r + 2^k and combines it into its own; ranks with bit k set send theirs to
 * r − 2^k and stop. From MPICH's MPIR_Reduce_intra_binomial.
 * Cost: ceil(lg p)·(α + nβ + nγ).
 */
#include <string.h>

#include "comm/coll_internal.h"
#include "comm/comm_internal.h"
#include "comm/xfer.h"

int hpml__reduce_binomial(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                          hpml_op_t op, int root, hpml_comm_t *comm)
{
    int p = comm->size, rank = comm->rank, vr = (rank - root + p) % p, rc = 0;
    size_t bytes = count * hpml_dtype_size(dtype);
    const void *in = sendbuf == HPML_IN_PLACE ? recvbuf : sendbuf;
    const void *acc = in; /* our partial result so far: the input until we receive */
    void *accbuf = NULL, *tmp = NULL, *scratch = NULL;

    for (int mask = 1; mask < p; mask <<= 1) {
        if ((vr & mask) == 0) {
            int src = vr | mask;

            if (src >= p)
                continue;
            if (tmp == NULL) {
                if ((tmp = hpml_malloc(bytes)) == NULL) {
                    rc = HPML_ERR_NOMEM;
                    goto out;
                }
                /* The root accumulates straight into recvbuf; the others into scratch,
                 * since their input (even in place) must not change. */
                if (rank == root) {
                    accbuf = recvbuf;
                } else {
                    if ((scratch = hpml_malloc(bytes)) == NULL) {
                        rc = HPML_ERR_NOMEM;
                        goto out;
                    }
                    accbuf = scratch;
                }
            }
            if ((rc = hpml__xfer_recv(tmp, bytes, (src + root) % p, HPML_TAG_REDUCE, comm->comm)) !=
                0)
                goto out;
            if ((rc = hpml_reduce_local3(accbuf, acc, tmp, count, dtype, op)) != 0)
                goto out;
            acc = accbuf;
        } else {
            rc =
                hpml__xfer_send(acc, bytes, ((vr & ~mask) + root) % p, HPML_TAG_REDUCE, comm->comm);
            goto out;
        }
    }
    /* Only the root gets here. */
    if (acc != recvbuf)
        memcpy(recvbuf, acc, bytes);
out:
    hpml_free(tmp);
    hpml_free(scratch);
    return rc;
}
