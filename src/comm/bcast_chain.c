/*
 * Pipelined chain broadcast: relative rank i receives chunk j from i−1 and forwards it
 * to i+1 while chunk j+1 arrives. From the pipelined bcast of Träff & Ripke and
 * MPICH's/Open MPI's "pipeline"/"chain" bcasts. Cost with k chunks:
 * (p−2+k)(α + nβ/k), so large messages approach nβ whatever p is.
 */
#include <stdint.h>

#include "comm/coll_internal.h"
#include "comm/comm_internal.h"
#include "comm/xfer.h"
#include "core/settings_internal.h"

size_t hpml__bcast_chain_chunk(size_t bytes, int p)
{
    static size_t env_chunk; /* 0: not read yet; SIZE_MAX: unset */
    size_t c = __atomic_load_n(&env_chunk, __ATOMIC_RELAXED);

    if (c == 0) {
        uint64_t v;

        c = hpml__setting_env(HPML__S_BCAST_CHUNK, &v) ? (size_t)v : SIZE_MAX;
        __atomic_store_n(&env_chunk, c, __ATOMIC_RELAXED);
    }
    if (c != SIZE_MAX)
        return c;
    /* With two ranks there is nothing to pipeline: one message is cheapest. Otherwise
     * 64 KiB chunks: below that α dominates, above it the pipeline fills slowly (the
     * optimum k = sqrt((p−2)nβ/α) gives chunks of tens of KiB on shared memory). */
    if (p <= 2)
        return bytes;
    return (size_t)64 << 10;
}

int hpml__bcast_chain_on(MPI_Comm c, void *buf, size_t bytes, int root)
{
    int rank, p, vr, prev, next, rc;
    size_t chunk, nchunks;
    MPI_Request rreq[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Request sreq[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status st[2];
    char *b = buf;

    if ((rc = MPI_Comm_rank(c, &rank)) != MPI_SUCCESS || (rc = MPI_Comm_size(c, &p)) != MPI_SUCCESS)
        return hpml__mpi_error(rc, "MPI_Comm_rank/size");
    if (p == 1 || bytes == 0)
        return 0;
    vr = (rank - root + p) % p;
    prev = vr == 0 ? MPI_PROC_NULL : (rank - 1 + p) % p;
    next = vr == p - 1 ? MPI_PROC_NULL : (rank + 1) % p;
    chunk = hpml__bcast_chain_chunk(bytes, p);
    if (chunk > hpml__xfer_limit())
        chunk = hpml__xfer_limit();
    if (chunk == 0)
        chunk = 1;
    nchunks = hpml__div_up(bytes, chunk);

    /* Two receives in flight: chunk j+1 lands while chunk j is forwarded. The sends of
     * chunk j are waited for two chunks later, so forwarding never blocks the pipeline
     * on the next rank's progress more than necessary. */
    if (prev != MPI_PROC_NULL) {
        for (size_t j = 0; j < nchunks && j < 2; j++) {
            size_t n = hpml__min(chunk, bytes - j * chunk);
            rc = MPI_Irecv(b + j * chunk, (int)n, MPI_BYTE, prev, HPML_TAG_BCAST, c, &rreq[j]);
            if (rc != MPI_SUCCESS)
                return hpml__mpi_error(rc, "MPI_Irecv");
        }
    }
    for (size_t j = 0; j < nchunks; j++) {
        size_t n = hpml__min(chunk, bytes - j * chunk);
        int slot = (int)(j & 1);

        if (prev != MPI_PROC_NULL) {
            rc = MPI_Wait(&rreq[slot], MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS)
                return hpml__mpi_error(rc, "MPI_Wait");
        }
        if (next != MPI_PROC_NULL) {
            rc = MPI_Wait(&sreq[slot], MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS)
                return hpml__mpi_error(rc, "MPI_Wait");
            rc = MPI_Isend(b + j * chunk, (int)n, MPI_BYTE, next, HPML_TAG_BCAST, c, &sreq[slot]);
            if (rc != MPI_SUCCESS)
                return hpml__mpi_error(rc, "MPI_Isend");
        }
        if (prev != MPI_PROC_NULL && j + 2 < nchunks) {
            size_t n2 = hpml__min(chunk, bytes - (j + 2) * chunk);
            rc = MPI_Irecv(b + (j + 2) * chunk, (int)n2, MPI_BYTE, prev, HPML_TAG_BCAST, c,
                           &rreq[slot]);
            if (rc != MPI_SUCCESS)
                return hpml__mpi_error(rc, "MPI_Irecv");
        }
    }
    rc = MPI_Waitall(2, sreq, st); /* a real array: MPICH's headers make GCC check it */
    return rc == MPI_SUCCESS ? 0 : hpml__mpi_error(rc, "MPI_Waitall");
}

int hpml__bcast_chain(void *buf, size_t count, hpml_dtype_t dtype, int root, hpml_comm_t *comm)
{
    return hpml__bcast_chain_on(comm->comm, buf, count * hpml_dtype_size(dtype), root);
}
