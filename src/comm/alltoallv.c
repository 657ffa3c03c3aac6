/*
 * hpml_alltoallv: each rank sends its own block to every rank (MPI_Alltoallv semantics
 * with size_t counts). Linear exchange: every receive, then every send, posted
 * nonblocking and completed together, so no order of the peers can deadlock; a block
 * larger than one MPI call's limit travels as several messages, which match in order
 * because MPI does not let messages on one tag overtake. Each rank moves its P-1 blocks
 * out and P-1 in; its own block is a local copy. In checking mode the ranks also compare
 * every pair's counts, so a disagreement is one clear error instead of a hang.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"
#include "comm/xfer.h"

/* Checking mode: what each rank sends to this one against what this one expects. Every
 * rank learns the first disagreement (by receiving rank, then sender) and fails with it. */
static int check_pairs(hpml_comm_t *comm, const size_t *scounts, const size_t *rcounts)
{
    const int p = comm->size;
    uint64_t *out = NULL, *in = NULL;
    int64_t mine[4] = {-1, -1, 0, 0}, *all = NULL; /* receiver, sender, sent, expected */
    MPI_Comm cc;
    int rc;

    if ((rc = hpml__check_comm(comm, &cc)) != 0)
        return rc;
    out = malloc((size_t)p * sizeof(*out));
    in = malloc((size_t)p * sizeof(*in));
    all = malloc((size_t)p * sizeof(mine));
    if (!out || !in || !all) {
        rc = HPML_ERR_NOMEM;
        goto out;
    }
    for (int q = 0; q < p; q++)
        out[q] = scounts[q];
    HPML__MPI(MPI_Alltoall(out, 1, MPI_UINT64_T, in, 1, MPI_UINT64_T, cc));
    for (int q = 0; q < p; q++)
        if (in[q] != rcounts[q]) {
            mine[0] = comm->rank;
            mine[1] = q;
            mine[2] = (int64_t)in[q];
            mine[3] = (int64_t)rcounts[q];
            break;
        }
    HPML__MPI(MPI_Allgather(mine, 4, MPI_INT64_T, all, 4, MPI_INT64_T, cc));
    for (int q = 0; q < p; q++)
        if (all[4 * q] >= 0) {
            const int64_t *a = all + 4 * q;
            rc = hpml_set_error(HPML_ERR_MISMATCH,
                                "alltoallv: ranks disagree on a block: rank %" PRId64
                                " sends %" PRId64 " elements to rank %" PRId64
                                ", which expects %" PRId64,
                                a[1], a[2], a[0], a[3]);
            break;
        }
out:
    free(out);
    free(in);
    free(all);
    return rc;
}

int hpml_alltoallv(const void *sendbuf, const size_t *scounts, const size_t *sdispls, void *recvbuf,
                   const size_t *rcounts, const size_t *rdispls, hpml_dtype_t dtype,
                   hpml_comm_t *comm)
{
    const char *s = sendbuf;
    char *r = recvbuf;
    MPI_Request *req = NULL;
    MPI_Status *st = NULL; /* a real array: MPICH's headers make GCC check the argument */
    size_t es, lim, nreq = 0, posted = 0, nrecv;
    int rc = 0, p, me;

    if (comm == NULL || (unsigned)dtype >= HPML_DTYPE_COUNT || !scounts || !sdispls || !rcounts ||
        !rdispls)
        return hpml_set_error(HPML_ERR_INVAL,
                              "hpml_alltoallv: invalid communicator, dtype or count array");
    p = comm->size;
    me = comm->rank;
    for (int q = 0; q < p; q++)
        if ((scounts[q] > 0 && sendbuf == NULL) || (rcounts[q] > 0 && recvbuf == NULL))
            return hpml_set_error(HPML_ERR_INVAL, "hpml_alltoallv: NULL buffer");
    if (comm->check) {
        if ((rc = hpml__check(comm, HPML__KIND_ALLTOALLV, 0, (int)dtype, -1, -1)) != 0 ||
            (rc = check_pairs(comm, scounts, rcounts)) != 0)
            return rc;
    } else if (scounts[me] != rcounts[me]) {
        return hpml_set_error(HPML_ERR_INVAL,
                              "hpml_alltoallv: rank %d sends %zu elements to itself but "
                              "expects %zu",
                              me, scounts[me], rcounts[me]);
    }
    es = hpml_dtype_size(dtype);
    lim = hpml__xfer_limit();
    for (int q = 0; q < p; q++)
        if (q != me)
            nreq += hpml__div_up(scounts[q] * es, lim) + hpml__div_up(rcounts[q] * es, lim);
    if (nreq > 0 && ((req = malloc(nreq * sizeof(*req))) == NULL ||
                     (st = malloc(nreq * sizeof(*st))) == NULL)) {
        free(req);
        return HPML_ERR_NOMEM;
    }
    /* Peers in the order me+1, me+2, ...: at every step the ranks talk to different
     * peers instead of all queueing at rank 0. */
    for (int i = 1; i < p && rc == 0; i++) {
        int q = (me + p - i) % p;
        size_t bytes = rcounts[q] * es;
        for (size_t off = 0; off < bytes && rc == 0; off += lim) {
            int n = (int)(bytes - off < lim ? bytes - off : lim);
            rc = hpml__xfer_mpi_err(MPI_Irecv(r + rdispls[q] * es + off, n, MPI_BYTE, q,
                                              HPML_TAG_ALLTOALLV, comm->comm, &req[posted]),
                                    "MPI_Irecv");
            posted += rc == 0;
        }
    }
    nrecv = posted;
    for (int i = 1; i < p && rc == 0; i++) {
        int q = (me + i) % p;
        size_t bytes = scounts[q] * es;
        for (size_t off = 0; off < bytes && rc == 0; off += lim) {
            int n = (int)(bytes - off < lim ? bytes - off : lim);
            rc = hpml__xfer_mpi_err(MPI_Isend(s + sdispls[q] * es + off, n, MPI_BYTE, q,
                                              HPML_TAG_ALLTOALLV, comm->comm, &req[posted]),
                                    "MPI_Isend");
            posted += rc == 0;
        }
    }
    if (rc == 0 && scounts[me] > 0 && s + sdispls[me] * es != r + rdispls[me] * es)
        memmove(r + rdispls[me] * es, s + sdispls[me] * es, scounts[me] * es);
    if (rc != 0) /* a post failed: the peers may never send; cancel the receives */
        for (size_t i = 0; i < nrecv; i++)
            MPI_Cancel(&req[i]);
    if (posted > 0) {
        int wrc = hpml__xfer_mpi_err(MPI_Waitall((int)posted, req, st), "MPI_Waitall");
        if (rc == 0)
            rc = wrc;
    }
    free(req);
    free(st);
    return rc;
}
