/* Chunked point-to-point byte transfers (see xfer.h). */
#include <limits.h>
#include <stdint.h>

#include "comm/xfer.h"
#include "comm/comm_internal.h"
#include "core/settings_internal.h"

size_t hpml__xfer_limit(void)
{
    static size_t limit;
    size_t l = __atomic_load_n(&limit, __ATOMIC_RELAXED);

    if (l == 0) {
        /* Tests lower it (HPML_MAX_MSG_BYTES) to exercise the split on small messages;
         * the collectives' dispatchers chunk by elements (HPML_MAX_CHUNK_ELEMS) before
         * this, so in practice only multi-block messages reach the limit. */
        uint64_t v = INT_MAX;

        (void)hpml__setting_env(HPML__S_MAX_MSG_BYTES, &v);
        l = (size_t)v;
        __atomic_store_n(&limit, l, __ATOMIC_RELAXED);
    }
    return l;
}

int hpml__xfer_mpi_err(int mpi_rc, const char *what)
{
    return mpi_rc == MPI_SUCCESS ? 0 : hpml__mpi_error(mpi_rc, what);
}

int hpml__xfer_send(const void *buf, size_t bytes, int dest, int tag, MPI_Comm comm)
{
    size_t lim = hpml__xfer_limit();

    for (size_t off = 0; off < bytes; off += lim) {
        size_t n = bytes - off < lim ? bytes - off : lim;
        int rc = MPI_Send((const char *)buf + off, (int)n, MPI_BYTE, dest, tag, comm);

        if (rc != MPI_SUCCESS)
            return hpml__xfer_mpi_err(rc, "MPI_Send");
    }
    return 0;
}

int hpml__xfer_recv(void *buf, size_t bytes, int src, int tag, MPI_Comm comm)
{
    size_t lim = hpml__xfer_limit();

    for (size_t off = 0; off < bytes; off += lim) {
        size_t n = bytes - off < lim ? bytes - off : lim;
        int rc = MPI_Recv((char *)buf + off, (int)n, MPI_BYTE, src, tag, comm, MPI_STATUS_IGNORE);

        if (rc != MPI_SUCCESS)
            return hpml__xfer_mpi_err(rc, "MPI_Recv");
    }
    return 0;
}

int hpml__xfer_sendrecv2(const void *s0, size_t s0bytes, const void *s1, size_t s1bytes, int dest,
                         void *r0, size_t r0bytes, void *r1, size_t r1bytes, int src, int tag,
                         MPI_Comm comm)
{
    size_t lim = hpml__xfer_limit();
    const char *sp[2] = {s0, s1};
    char *rp[2] = {r0, r1};
    size_t sn[2] = {dest == MPI_PROC_NULL ? 0 : s0bytes, dest == MPI_PROC_NULL ? 0 : s1bytes};
    size_t rn[2] = {src == MPI_PROC_NULL ? 0 : r0bytes, src == MPI_PROC_NULL ? 0 : r1bytes};

    /* Piece j of each buffer goes in round j; both sides compute the same pieces. */
    for (size_t off = 0;; off += lim) {
        MPI_Request req[4];
        MPI_Status st[4]; /* not MPI_STATUSES_IGNORE: MPICH's headers make GCC check it */
        int nreq = 0, rc;

        for (int i = 0; i < 2; i++) {
            if (off < rn[i]) {
                size_t n = rn[i] - off < lim ? rn[i] - off : lim;
                rc = MPI_Irecv(rp[i] + off, (int)n, MPI_BYTE, src, tag, comm, &req[nreq]);
                if (rc != MPI_SUCCESS)
                    goto fail;
                nreq++;
            }
        }
        for (int i = 0; i < 2; i++) {
            if (off < sn[i]) {
                size_t n = sn[i] - off < lim ? sn[i] - off : lim;
                rc = MPI_Isend(sp[i] + off, (int)n, MPI_BYTE, dest, tag, comm, &req[nreq]);
                if (rc != MPI_SUCCESS)
                    goto fail;
                nreq++;
            }
        }
        if (nreq == 0)
            return 0;
        rc = MPI_Waitall(nreq, req, st);
        if (rc != MPI_SUCCESS)
            return hpml__xfer_mpi_err(rc, "MPI_Waitall");
        continue;
    fail:
        /* Requests already posted cannot be completed safely after a failed post; the
         * communicator is unusable anyway once MPI reports an error here. */
        return hpml__xfer_mpi_err(rc, "MPI_Isend/MPI_Irecv");
    }
}

int hpml__xfer_sendrecv(const void *sbuf, size_t sbytes, int dest, void *rbuf, size_t rbytes,
                        int src, int tag, MPI_Comm comm)
{
    return hpml__xfer_sendrecv2(sbuf, sbytes, NULL, 0, dest, rbuf, rbytes, NULL, 0, src, tag, comm);
}
