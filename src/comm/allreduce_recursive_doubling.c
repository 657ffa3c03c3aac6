/*
 * Allreduce by recursive doubling: lg p rounds, each exchanging the whole vector with
 * the partner at distance 2^k. Non-powers of two: the first 2r ranks pair up and the
 * even one folds its data into the odd one first (MPICH's allreduce_intra_recursive_
 * doubling). Cost: lg p·α + n lg p·(β+γ) (+ 2 steps for the fold-in).
 * Both partners compute (lower rank's data) op (higher rank's data), so every rank ends
 * with identical bits.
 */
#include <string.h>

#include "comm/coll_internal.h"
#include "comm/comm_internal.h"

#define TAG 0x4801

int hpml__allreduce_rd_on(MPI_Comm c, void *buf, size_t count, hpml_dtype_t dt, hpml_op_t op)
{
    size_t bytes = count * hpml_dtype_size(dt);
    char *tmp = NULL;
    int rc = 0, rank, size, p2, rem, newrank, mask;

    HPML__MPI(MPI_Comm_rank(c, &rank));
    HPML__MPI(MPI_Comm_size(c, &size));
    if (size == 1 || count == 0)
        goto out;
    tmp = hpml_malloc(bytes);
    if (tmp == NULL) {
        rc = HPML_ERR_NOMEM;
        goto out;
    }
    for (p2 = 1; p2 * 2 <= size; p2 *= 2)
        ;
    rem = size - p2;

    if (rank < 2 * rem) {
        if (rank % 2 == 0) {
            HPML__MPI(MPI_Send(buf, (int)bytes, MPI_BYTE, rank + 1, TAG, c));
            newrank = -1;
        } else {
            HPML__MPI(MPI_Recv(tmp, (int)bytes, MPI_BYTE, rank - 1, TAG, c, MPI_STATUS_IGNORE));
            rc = hpml_reduce_local3(buf, tmp, buf, count, dt, op);
            if (rc != 0)
                goto out;
            newrank = rank / 2;
        }
    } else {
        newrank = rank - rem;
    }

    if (newrank >= 0) {
        for (mask = 1; mask < p2; mask <<= 1) {
            int np = newrank ^ mask;
            int partner = np < rem ? np * 2 + 1 : np + rem;

            HPML__MPI(MPI_Sendrecv(buf, (int)bytes, MPI_BYTE, partner, TAG, tmp, (int)bytes,
                                   MPI_BYTE, partner, TAG, c, MPI_STATUS_IGNORE));
            if (partner < rank)
                rc = hpml_reduce_local3(buf, tmp, buf, count, dt, op);
            else
                rc = hpml_reduce_local(buf, tmp, count, dt, op);
            if (rc != 0)
                goto out;
        }
    }

    if (rank < 2 * rem) {
        if (rank % 2 == 1)
            HPML__MPI(MPI_Send(buf, (int)bytes, MPI_BYTE, rank - 1, TAG, c));
        else
            HPML__MPI(MPI_Recv(buf, (int)bytes, MPI_BYTE, rank + 1, TAG, c, MPI_STATUS_IGNORE));
    }
out:
    hpml_free(tmp);
    return rc;
}

int hpml__allreduce_recursive_doubling(const void *sendbuf, void *recvbuf, size_t count,
                                       hpml_dtype_t dtype, hpml_op_t op, hpml_comm_t *comm)
{
    if (sendbuf != HPML_IN_PLACE && sendbuf != recvbuf)
        memcpy(recvbuf, sendbuf, count * hpml_dtype_size(dtype));
    return hpml__allreduce_rd_on(comm->comm, recvbuf, count, dtype, op);
}
