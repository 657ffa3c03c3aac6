/*
 * Reduce by the MPI library's own MPI_Reduce. MPI has no fp16/bf16 type, so those are
 * carried as MPI_UINT16_T with user-defined ops running hpml's kernels (commutative, so
 * MPI may use its tree algorithms). Cost: whatever the MPI library's selection gives.
 */
#include <pthread.h>
#include <string.h>

#include "comm/coll_internal.h"
#include "comm/comm_internal.h"

#define HALF_OP(name, dt, op)                                                                      \
    static void name(void *in, void *inout, int *len, MPI_Datatype *type)                          \
    {                                                                                              \
        (void)type;                                                                                \
        hpml_reduce_local(inout, in, (size_t)*len, dt, op);                                        \
    }
HALF_OP(f16_sum, HPML_F16, HPML_SUM)
HALF_OP(f16_prod, HPML_F16, HPML_PROD)
HALF_OP(f16_min, HPML_F16, HPML_MIN)
HALF_OP(f16_max, HPML_F16, HPML_MAX)
HALF_OP(bf16_sum, HPML_BF16, HPML_SUM)
HALF_OP(bf16_prod, HPML_BF16, HPML_PROD)
HALF_OP(bf16_min, HPML_BF16, HPML_MIN)
HALF_OP(bf16_max, HPML_BF16, HPML_MAX)

static pthread_mutex_t half_lock = PTHREAD_MUTEX_INITIALIZER;
static int half_ready;
static MPI_Op half_ops[2][4]; /* [f16, bf16][sum, prod, min, max] */

static int half_init(void)
{
    static MPI_User_function *const fns[2][4] = {{f16_sum, f16_prod, f16_min, f16_max},
                                                 {bf16_sum, bf16_prod, bf16_min, bf16_max}};
    int rc = 0;

    pthread_mutex_lock(&half_lock);
    if (!half_ready) {
        for (int d = 0; d < 2; d++)
            for (int o = 0; o < 4; o++)
                HPML__MPI(MPI_Op_create(fns[d][o], 1, &half_ops[d][o]));
        half_ready = 1;
    }
out:
    pthread_mutex_unlock(&half_lock);
    return rc;
}

int hpml__mpi_reduce_types(hpml_dtype_t dtype, hpml_op_t op, MPI_Datatype *mdt, MPI_Op *mop)
{
    int rc, o = op == HPML_AVG ? HPML_SUM : (int)op;

    *mdt = hpml__mpi_dtype(dtype);
    if (*mdt != MPI_DATATYPE_NULL) {
        *mop = hpml__mpi_op(op);
        return 0;
    }
    if ((rc = half_init()) != 0)
        return rc;
    *mdt = MPI_UINT16_T;
    *mop = half_ops[dtype == HPML_BF16][o];
    return 0;
}

int hpml__reduce_mpi(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                     hpml_op_t op, int root, hpml_comm_t *comm)
{
    MPI_Datatype mdt;
    MPI_Op mop;
    void *tmp = NULL;
    int rc;

    if ((rc = hpml__mpi_reduce_types(dtype, op, &mdt, &mop)) != 0)
        return rc;
    if (sendbuf == HPML_IN_PLACE || (comm->rank == root && sendbuf == recvbuf)) {
        /* Non-roots' input is recvbuf for in place. At the root the input is copied
         * rather than passed as MPI_IN_PLACE: MPICH 4.0.2's MPI_Reduce crashes on
         * MPI_IN_PLACE at the root from about 1000 floats on (reading through the
         * MPI_IN_PLACE sentinel). */
        if (comm->rank == root) {
            if ((tmp = hpml_malloc(count * hpml_dtype_size(dtype))) == NULL)
                return HPML_ERR_NOMEM;
            memcpy(tmp, recvbuf, count * hpml_dtype_size(dtype));
            HPML__MPI(MPI_Reduce(tmp, recvbuf, (int)count, mdt, mop, root, comm->comm));
        } else {
            HPML__MPI(MPI_Reduce(recvbuf, NULL, (int)count, mdt, mop, root, comm->comm));
        }
    } else {
        HPML__MPI(MPI_Reduce(sendbuf, recvbuf, (int)count, mdt, mop, root, comm->comm));
    }
out:
    hpml_free(tmp);
    return rc;
}
