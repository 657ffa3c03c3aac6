/*
 * hpml_reduce_scatter: argument checks, the checking mode, algorithm choice, chunking of
 * block counts too large for one algorithm call (each piece's slices of the p blocks are
 * packed into a scratch buffer), and AVG as SUM followed by one division.
 */
#include <string.h>

#include "comm/coll_internal.h"
#include "comm/comm_internal.h"

hpml__reduce_scatter_fn hpml__reduce_scatter_impl(hpml_algo_t algo)
{
    switch (algo) {
    case HPML_ALGO_MPI: return hpml__reduce_scatter_mpi;
    case HPML_ALGO_RING: return hpml__reduce_scatter_ring;
    default: return NULL;
    }
}

int hpml_reduce_scatter_algo(hpml_algo_t algo, const void *sendbuf, void *recvbuf, size_t count,
                             hpml_dtype_t dtype, hpml_op_t op, hpml_comm_t *comm)
{
    hpml__reduce_scatter_fn fn;
    hpml_op_t rop = op == HPML_AVG ? HPML_SUM : op;
    size_t es, maxc, n, blk;
    const char *in;
    char *tmp = NULL;
    int rc = 0, p;

    if (comm == NULL || (unsigned)dtype >= HPML_DTYPE_COUNT || (unsigned)op >= HPML_OP_COUNT ||
        (unsigned)algo >= HPML_ALGO_COUNT)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_reduce_scatter: invalid communicator, "
                                              "dtype, op or algorithm");
    if (count > 0 && (sendbuf == NULL || recvbuf == NULL))
        return hpml_set_error(HPML_ERR_INVAL, "hpml_reduce_scatter: NULL buffer");
    if (algo != HPML_ALGO_AUTO && hpml__reduce_scatter_impl(algo) == NULL)
        return hpml_set_error(
            HPML_ERR_INVAL, "hpml_reduce_scatter: algorithm '%s' does not implement reduce_scatter",
            hpml_algo_name(algo));
    if (comm->check &&
        (rc = hpml__check(comm, HPML__KIND_REDUCE_SCATTER, count, (int)dtype, (int)op, -1)) != 0)
        return rc;
    if (count == 0)
        return 0;
    p = comm->size;
    es = hpml_dtype_size(dtype);
    blk = count * es;
    in = sendbuf == HPML_IN_PLACE ? recvbuf : sendbuf;
    if (p == 1) {
        if (in != recvbuf)
            memcpy(recvbuf, in, blk);
        return hpml_reduce_finish(recvbuf, count, dtype, op, 1);
    }
    if (algo == HPML_ALGO_AUTO)
        algo = hpml__select(comm, HPML_COLL_REDUCE_SCATTER, (size_t)p * blk);
    fn = hpml__reduce_scatter_impl(algo);
    if (fn == NULL)
        return hpml_set_error(HPML_ERR_INVAL,
                              "hpml_reduce_scatter: algorithm '%s' does not "
                              "implement reduce_scatter",
                              hpml_algo_name(algo));
    maxc = hpml__max_chunk_elems(dtype, comm);
    hpml__prof_enter(HPML_COLL_REDUCE_SCATTER, algo, (size_t)p * blk);
    if (count <= maxc) {
        rc = fn(sendbuf, recvbuf, count, dtype, rop, comm);
    } else if ((tmp = hpml_malloc((size_t)p * maxc * es)) == NULL) {
        rc = HPML_ERR_NOMEM;
    } else {
        /* In place, piece `off` of the result overwrites piece `off` of input block 0,
         * which has just been packed; later pieces are untouched. */
        for (size_t off = 0; off < count && rc == 0; off += n) {
            n = hpml__min(maxc, count - off);
            for (int q = 0; q < p; q++)
                memcpy(tmp + (size_t)q * n * es, in + (size_t)q * blk + off * es, n * es);
            rc = fn(tmp, (char *)recvbuf + off * es, n, dtype, rop, comm);
        }
        hpml_free(tmp);
    }
    hpml__prof_leave();
    if (rc == 0 && op == HPML_AVG)
        rc = hpml_reduce_finish(recvbuf, count, dtype, op, p);
    return rc;
}

int hpml_reduce_scatter(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                        hpml_op_t op, hpml_comm_t *comm)
{
    return hpml_reduce_scatter_algo(HPML_ALGO_AUTO, sendbuf, recvbuf, count, dtype, op, comm);
}
