/*
 * Allreduce by the MPI library's own MPI_Allreduce for the dtypes MPI knows; fp16/bf16
 * (which MPI lacks) go to hpml's recursive doubling (small) or ring (large).
 * Cost: whatever the MPI library's tuned selection gives.
 */
#include <string.h>

#include "comm/comm_internal.h"

/* Above this many bytes fp16/bf16 use the ring rather than recursive doubling. */
#define NATIVE_RING_BYTES ((size_t)64 << 10)

int hpml__allreduce_native_on(MPI_Comm c, void *buf, size_t count, hpml_dtype_t dt,
                              hpml_op_t op)
{
    MPI_Datatype mdt = hpml__mpi_dtype(dt);
    int rc = 0;

    if (mdt == MPI_DATATYPE_NULL) {
        if (count * hpml_dtype_size(dt) <= NATIVE_RING_BYTES)
            return hpml__allreduce_rd_on(c, buf, count, dt, op);
        return hpml__allreduce_ring_on(c, buf, count, dt, op);
    }
    HPML__MPI(MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, mdt, hpml__mpi_op(op), c));
out:
    return rc;
}

int hpml__allreduce_mpi(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                        hpml_op_t op, hpml_comm_t *comm)
{
    MPI_Datatype mdt = hpml__mpi_dtype(dtype);
    int rc = 0;

    if (mdt == MPI_DATATYPE_NULL) {
        if (sendbuf != HPML_IN_PLACE && sendbuf != recvbuf)
            memcpy(recvbuf, sendbuf, count * hpml_dtype_size(dtype));
        return hpml__allreduce_native_on(comm->comm, recvbuf, count, dtype, op);
    }
    HPML__MPI(MPI_Allreduce(sendbuf == HPML_IN_PLACE || sendbuf == recvbuf ? MPI_IN_PLACE
                                                                           : sendbuf,
                            recvbuf, (int)count, mdt, hpml__mpi_op(op), comm->comm));
out:
    return rc;
}
