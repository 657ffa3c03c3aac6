/*
 * Allreduce by the MPI library's own MPI_Allreduce for the dtypes MPI knows; fp16/bf16
 * (which MPI lacks) go to hpml's recursive doubling (small) or ring (large), as do
 * reductions the MPI library gets wrong (Open MPI 4.1: 8-bit sums saturate; MPICH 4.0:
 * u8 min/max compare as signed).
 * Cost: whatever the MPI library's tuned selection gives.
 */
#include <string.h>

#include "comm/coll_internal.h"
#include "comm/comm_internal.h"

/* Above this many bytes fp16/bf16 use the ring rather than recursive doubling. */
#define NATIVE_RING_BYTES ((size_t)64 << 10)

int hpml__mpi_op_ok(hpml_dtype_t dt, hpml_op_t op)
{
    int lib;

    if (hpml__mpi_dtype(dt) == MPI_DATATYPE_NULL)
        return 0;
    lib = hpml__mpi_lib();
    /* Open MPI 4.1's AVX reduction component saturates 8-bit integer sums instead of
     * wrapping (127 + 1 = 127) on vectors of 64+ elements; hpml promises wrap-around. */
    if (lib == HPML__LIB_OPENMPI && (dt == HPML_I8 || dt == HPML_U8) &&
        (op == HPML_SUM || op == HPML_AVG))
        return 0;
    /* MPICH 4.0 compares MPI_UINT8_T as signed in MIN/MAX (min(248, 3) = 248). */
    if (lib == HPML__LIB_MPICH && dt == HPML_U8 && (op == HPML_MIN || op == HPML_MAX))
        return 0;
    return 1;
}

int hpml__allreduce_native_on(MPI_Comm c, void *buf, size_t count, hpml_dtype_t dt, hpml_op_t op)
{
    MPI_Datatype mdt = hpml__mpi_dtype(dt);
    int rc = 0;

    if (!hpml__mpi_op_ok(dt, op)) {
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

    if (!hpml__mpi_op_ok(dtype, op)) {
        if (sendbuf != HPML_IN_PLACE && sendbuf != recvbuf)
            memcpy(recvbuf, sendbuf, count * hpml_dtype_size(dtype));
        return hpml__allreduce_native_on(comm->comm, recvbuf, count, dtype, op);
    }
    HPML__MPI(MPI_Allreduce(sendbuf == HPML_IN_PLACE || sendbuf == recvbuf ? MPI_IN_PLACE : sendbuf,
                            recvbuf, (int)count, mdt, hpml__mpi_op(op), comm->comm));
out:
    return rc;
}
