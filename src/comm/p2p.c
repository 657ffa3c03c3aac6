/*
 * Point-to-point messages through an hpml communicator: send, receive and their
 * nonblocking forms, and splitting a communicator. Every byte goes through the
 * communicator's MPI duplicate, so the profiler (PMPI) and the benchmarks see it; counts
 * above MPI's int limit go as several messages of at most hpml__xfer_limit() bytes, which
 * both sides post in the same order (MPI keeps the order of messages of one tag between
 * two ranks). User tags are 0..HPML_TAG_MAX, below the collectives' own tags (xfer.h).
 */
#include <stdlib.h>

#include "comm/comm_internal.h"
#include "comm/xfer.h"

struct hpml_p2p_request {
    MPI_Request *mreq;
    int n;
};

/* MPI_Waitall one request at a time: MPI_STATUSES_IGNORE trips GCC's bounds check on
 * MPICH's headers. The first error. */
static int wait_all(int n, MPI_Request *r)
{
    int err = MPI_SUCCESS;

    for (int i = 0; i < n; i++) {
        int rc = MPI_Wait(&r[i], MPI_STATUS_IGNORE);
        err = err == MPI_SUCCESS ? rc : err;
    }
    return err;
}

/* Check the arguments; *bytes the message's size. */
static int check(const void *buf, size_t count, hpml_dtype_t dtype, int peer, int tag,
                 const hpml_comm_t *comm, const char *what, size_t *bytes)
{
    size_t es;

    if (comm == NULL || (buf == NULL && count > 0))
        return hpml_set_error(HPML_ERR_INVAL, "%s: NULL argument", what);
    if ((es = hpml_dtype_size(dtype)) == 0)
        return hpml_set_error(HPML_ERR_INVAL, "%s: bad dtype %d", what, (int)dtype);
    if (peer < 0 || peer >= comm->size)
        return hpml_set_error(HPML_ERR_INVAL, "%s: rank %d outside 0..%d", what, peer,
                              comm->size - 1);
    if (tag < 0 || tag > HPML_TAG_MAX)
        return hpml_set_error(HPML_ERR_INVAL, "%s: tag %d outside 0..%d", what, tag, HPML_TAG_MAX);
    if (count > SIZE_MAX / es)
        return hpml_set_error(HPML_ERR_RANGE, "%s: %zu elements overflow a size_t", what, count);
    *bytes = count * es;
    return 0;
}

/* Pieces of a message of `bytes` bytes (a message of 0 bytes is one empty piece). */
static int pieces(size_t bytes)
{
    size_t lim = hpml__xfer_limit(), n = bytes == 0 ? 1 : hpml__div_up(bytes, lim);

    return n > (size_t)INT32_MAX ? -1 : (int)n;
}

int hpml_send(const void *buf, size_t count, hpml_dtype_t dtype, int dest, int tag,
              hpml_comm_t *comm)
{
    size_t bytes = 0;
    int rc = check(buf, count, dtype, dest, tag, comm, "hpml_send", &bytes);

    if (rc != 0)
        return rc;
    if (bytes == 0)
        return hpml__xfer_mpi_err(MPI_Send(buf, 0, MPI_BYTE, dest, tag, comm->comm), "MPI_Send");
    return hpml__xfer_send(buf, bytes, dest, tag, comm->comm);
}

int hpml_recv(void *buf, size_t count, hpml_dtype_t dtype, int src, int tag, hpml_comm_t *comm)
{
    size_t bytes = 0;
    int rc = check(buf, count, dtype, src, tag, comm, "hpml_recv", &bytes);

    if (rc != 0)
        return rc;
    if (bytes == 0)
        return hpml__xfer_mpi_err(
            MPI_Recv(buf, 0, MPI_BYTE, src, tag, comm->comm, MPI_STATUS_IGNORE), "MPI_Recv");
    return hpml__xfer_recv(buf, bytes, src, tag, comm->comm);
}

/* The nonblocking forms: one MPI request per piece. */
static int start(int is_send, void *buf, size_t count, hpml_dtype_t dtype, int peer, int tag,
                 hpml_comm_t *comm, hpml_p2p_request_t **out)
{
    const char *what = is_send ? "hpml_isend" : "hpml_irecv";
    hpml_p2p_request_t *r = NULL;
    size_t bytes = 0, lim = hpml__xfer_limit();
    int rc, n;

    if (out == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "%s: NULL request", what);
    *out = NULL;
    if ((rc = check(buf, count, dtype, peer, tag, comm, what, &bytes)) != 0)
        return rc;
    if ((n = pieces(bytes)) < 0)
        return hpml_set_error(HPML_ERR_RANGE, "%s: %zu bytes are too many pieces", what, bytes);
    if ((r = calloc(1, sizeof(*r))) == NULL ||
        (r->mreq = calloc((size_t)n, sizeof(MPI_Request))) == NULL) {
        free(r);
        return hpml_set_error(HPML_ERR_NOMEM, "%s: out of memory", what);
    }
    for (int i = 0; i < n; i++) {
        size_t off = (size_t)i * lim, len = bytes - off < lim ? bytes - off : lim;
        char *p = (char *)buf + (bytes ? off : 0);

        rc = is_send ? MPI_Isend(p, (int)len, MPI_BYTE, peer, tag, comm->comm, &r->mreq[i])
                     : MPI_Irecv(p, (int)len, MPI_BYTE, peer, tag, comm->comm, &r->mreq[i]);
        if (rc != MPI_SUCCESS) {
            /* The pieces already posted are completed before the error returns, so no
             * MPI request outlives the call. */
            wait_all(i, r->mreq);
            free(r->mreq);
            free(r);
            return hpml__xfer_mpi_err(rc, is_send ? "MPI_Isend" : "MPI_Irecv");
        }
        r->n = i + 1;
    }
    *out = r;
    return 0;
}

int hpml_isend(const void *buf, size_t count, hpml_dtype_t dtype, int dest, int tag,
               hpml_comm_t *comm, hpml_p2p_request_t **req)
{
    return start(1, (void *)(uintptr_t)buf, count, dtype, dest, tag, comm, req);
}

int hpml_irecv(void *buf, size_t count, hpml_dtype_t dtype, int src, int tag, hpml_comm_t *comm,
               hpml_p2p_request_t **req)
{
    return start(0, buf, count, dtype, src, tag, comm, req);
}

int hpml_p2p_wait(hpml_p2p_request_t *req)
{
    int rc;

    if (req == NULL)
        return 0;
    rc = wait_all(req->n, req->mreq);
    free(req->mreq);
    free(req);
    return hpml__xfer_mpi_err(rc, "MPI_Wait");
}

int hpml_p2p_test(hpml_p2p_request_t *req, int *done)
{
    int flag = 0, rc;

    if (done == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_p2p_test: NULL argument");
    if (req == NULL) {
        *done = 1;
        return 0;
    }
    flag = 1; /* a completed piece's request is MPI_REQUEST_NULL, which tests done */
    rc = MPI_SUCCESS;
    for (int i = 0; i < req->n && rc == MPI_SUCCESS; i++) {
        int one = 0;
        rc = MPI_Test(&req->mreq[i], &one, MPI_STATUS_IGNORE);
        flag = flag && one;
    }
    *done = 0;
    if (rc != MPI_SUCCESS || flag) {
        free(req->mreq);
        free(req);
        *done = 1;
    }
    return hpml__xfer_mpi_err(rc, "MPI_Test");
}

int hpml_p2p_waitall(size_t n, hpml_p2p_request_t **reqs)
{
    int err = 0;

    for (size_t i = 0; i < n; i++) {
        int rc = hpml_p2p_wait(reqs[i]);

        reqs[i] = NULL;
        if (err == 0)
            err = rc;
    }
    return err;
}

int hpml_comm_split(hpml_comm_t *comm, int color, int key, hpml_comm_t **out)
{
    MPI_Comm part = MPI_COMM_NULL;
    hpml_comm_config_t cfg;
    int rc;

    if (out == NULL || comm == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_comm_split: NULL argument");
    *out = NULL;
    if (color < 0)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_comm_split: negative color %d", color);
    if ((rc = MPI_Comm_split(comm->comm, color, key, &part)) != MPI_SUCCESS)
        return hpml__xfer_mpi_err(rc, "MPI_Comm_split");
    /* The parts keep the parent's checking mode and virtual nodes. */
    cfg.check = comm->check;
    cfg.ranks_per_node = comm->ranks_per_node;
    rc = hpml_comm_create(part, &cfg, out);
    MPI_Comm_free(&part);
    return rc;
}
