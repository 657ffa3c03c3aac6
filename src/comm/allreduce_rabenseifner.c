/*
 * Rabenseifner's allreduce: reduce-scatter by recursive halving, then allgather by
 * recursive doubling (Rabenseifner 2004; Thakur, Rabenseifner & Gropp 2005, as in MPICH's
 * allreduce_intra_reduce_scatter_allgather). Non-powers of two: the first 2r ranks fold
 * pairwise into r ranks first and get the result back at the end.
 * Cost: 2 lg p·α + 2n(p−1)/p·β + n(p−1)/p·γ (+ 2 whole-vector steps for the fold-in).
 */
#include <stdlib.h>
#include <string.h>

#include "comm/coll_internal.h"
#include "comm/comm_internal.h"

#define TAG 0x4803

static int rab_on(MPI_Comm c, void *vbuf, size_t count, hpml_dtype_t dt, hpml_op_t op)
{
    size_t es = hpml_dtype_size(dt), bytes = count * es, *cnts = NULL, *disps = NULL;
    size_t send_cnt, recv_cnt;
    char *buf = vbuf, *tmp = NULL;
    int rc = 0, rank, size, p2, rem, newrank, mask, send_idx, recv_idx, last_idx;

    HPML__MPI(MPI_Comm_rank(c, &rank));
    HPML__MPI(MPI_Comm_size(c, &size));
    if (size == 1 || count == 0)
        goto out;
    for (p2 = 1; p2 * 2 <= size; p2 *= 2)
        ;
    rem = size - p2;
    tmp = hpml_malloc(bytes);
    cnts = malloc(sizeof(size_t) * (size_t)p2);
    disps = malloc(sizeof(size_t) * (size_t)p2);
    if (tmp == NULL || cnts == NULL || disps == NULL) {
        rc = HPML_ERR_NOMEM;
        goto out;
    }

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
        for (int i = 0; i < p2; i++) {
            cnts[i] = count / (size_t)p2 + ((size_t)i < count % (size_t)p2);
            disps[i] = i == 0 ? 0 : disps[i - 1] + cnts[i - 1];
        }
        /* Reduce-scatter by recursive halving: keep the half the partner does not. */
        mask = 1;
        send_idx = recv_idx = 0;
        last_idx = p2;
        while (mask < p2) {
            int newdst = newrank ^ mask;
            int dst = newdst < rem ? newdst * 2 + 1 : newdst + rem;

            send_cnt = recv_cnt = 0;
            if (newrank < newdst) {
                send_idx = recv_idx + p2 / (mask * 2);
                for (int i = send_idx; i < last_idx; i++)
                    send_cnt += cnts[i];
                for (int i = recv_idx; i < send_idx; i++)
                    recv_cnt += cnts[i];
            } else {
                recv_idx = send_idx + p2 / (mask * 2);
                for (int i = send_idx; i < recv_idx; i++)
                    send_cnt += cnts[i];
                for (int i = recv_idx; i < last_idx; i++)
                    recv_cnt += cnts[i];
            }
            HPML__MPI(MPI_Sendrecv(buf + disps[send_idx] * es, (int)(send_cnt * es), MPI_BYTE, dst,
                                   TAG, tmp + disps[recv_idx] * es, (int)(recv_cnt * es), MPI_BYTE,
                                   dst, TAG, c, MPI_STATUS_IGNORE));
            /* (lower rank's data) op (higher rank's data) */
            if (dst < rank)
                rc = hpml_reduce_local3(buf + disps[recv_idx] * es, tmp + disps[recv_idx] * es,
                                        buf + disps[recv_idx] * es, recv_cnt, dt, op);
            else
                rc = hpml_reduce_local(buf + disps[recv_idx] * es, tmp + disps[recv_idx] * es,
                                       recv_cnt, dt, op);
            if (rc != 0)
                goto out;
            send_idx = recv_idx;
            mask <<= 1;
            if (mask < p2)
                last_idx = recv_idx + p2 / mask;
        }
        /* Allgather by recursive doubling, retracing the halving steps. */
        mask >>= 1;
        while (mask > 0) {
            int newdst = newrank ^ mask;
            int dst = newdst < rem ? newdst * 2 + 1 : newdst + rem;

            send_cnt = recv_cnt = 0;
            if (newrank < newdst) {
                if (mask != p2 / 2)
                    last_idx = last_idx + p2 / (mask * 2);
                recv_idx = send_idx + p2 / (mask * 2);
                for (int i = send_idx; i < recv_idx; i++)
                    send_cnt += cnts[i];
                for (int i = recv_idx; i < last_idx; i++)
                    recv_cnt += cnts[i];
            } else {
                recv_idx = send_idx - p2 / (mask * 2);
                for (int i = send_idx; i < last_idx; i++)
                    send_cnt += cnts[i];
                for (int i = recv_idx; i < send_idx; i++)
                    recv_cnt += cnts[i];
            }
            HPML__MPI(MPI_Sendrecv(buf + disps[send_idx] * es, (int)(send_cnt * es), MPI_BYTE, dst,
                                   TAG, buf + disps[recv_idx] * es, (int)(recv_cnt * es), MPI_BYTE,
                                   dst, TAG, c, MPI_STATUS_IGNORE));
            if (newrank > newdst)
                send_idx = recv_idx;
            mask >>= 1;
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
    free(cnts);
    free(disps);
    return rc;
}

int hpml__allreduce_rabenseifner(const void *sendbuf, void *recvbuf, size_t count,
                                 hpml_dtype_t dtype, hpml_op_t op, hpml_comm_t *comm)
{
    if (sendbuf != HPML_IN_PLACE && sendbuf != recvbuf)
        memcpy(recvbuf, sendbuf, count * hpml_dtype_size(dtype));
    return rab_on(comm->comm, recvbuf, count, dtype, op);
}
