/*
 * hpml_reduce: argument checks, the checking mode, algorithm choice, chunking of counts
 * too large for one algorithm call, and AVG as SUM followed by one division at the root.
 *
 * HPML_IN_PLACE: every rank's input is in its recvbuf; at the root it is replaced by the
 * result, elsewhere it is left unchanged. Without it, recvbuf matters at the root only.
 */
#include <string.h>

#include "comm/coll_internal.h"
#include "comm/comm_internal.h"

hpml__reduce_fn hpml__reduce_impl(hpml_algo_t algo)
{
    switch (algo) {
    case HPML_ALGO_MPI: return hpml__reduce_mpi;
    case HPML_ALGO_BINOMIAL: return hpml__reduce_binomial;
    case HPML_ALGO_SHM: return hpml__reduce_shm;
    default: return NULL;
    }
}

int hpml_reduce_algo(hpml_algo_t algo, const void *sendbuf, void *recvbuf, size_t count,
                     hpml_dtype_t dtype, hpml_op_t op, int root, hpml_comm_t *comm)
{
    hpml__reduce_fn fn;
    hpml_op_t rop = op == HPML_AVG ? HPML_SUM : op;
    size_t es, maxc, n;
    int rc = 0, in_place = sendbuf == HPML_IN_PLACE;

    if (comm == NULL || (unsigned)dtype >= HPML_DTYPE_COUNT || (unsigned)op >= HPML_OP_COUNT ||
        (unsigned)algo >= HPML_ALGO_COUNT)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_reduce: invalid communicator, dtype, op "
                                              "or algorithm");
    if (root < 0 || root >= comm->size)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_reduce: root %d outside [0, %d)", root,
                              comm->size);
    if (count > 0 && (sendbuf == NULL || ((in_place || comm->rank == root) && recvbuf == NULL)))
        return hpml_set_error(HPML_ERR_INVAL, "hpml_reduce: NULL buffer");
    if (algo != HPML_ALGO_AUTO && hpml__reduce_impl(algo) == NULL)
        return hpml_set_error(HPML_ERR_INVAL,
                              "hpml_reduce: algorithm '%s' does not implement reduce",
                              hpml_algo_name(algo));
    if (comm->check &&
        (rc = hpml__check(comm, HPML__KIND_REDUCE, count, (int)dtype, (int)op, root)) != 0)
        return rc;
    if (count == 0)
        return 0;
    es = hpml_dtype_size(dtype);
    if (comm->size == 1) {
        if (!in_place && sendbuf != recvbuf)
            memcpy(recvbuf, sendbuf, count * es);
        return hpml_reduce_finish(recvbuf, count, dtype, op, 1);
    }
    if (algo == HPML_ALGO_AUTO)
        algo = hpml__select(comm, HPML_COLL_REDUCE, count * es);
    fn = hpml__reduce_impl(algo);
    if (fn == NULL)
        return hpml_set_error(HPML_ERR_INVAL,
                              "hpml_reduce: algorithm '%s' does not implement "
                              "reduce",
                              hpml_algo_name(algo));
    maxc = hpml__max_chunk_elems(dtype, comm);
    hpml__prof_enter(HPML_COLL_REDUCE, algo, count * es);
    for (size_t off = 0; off < count && rc == 0; off += n) {
        n = hpml__min(maxc, count - off);
        rc = fn(in_place ? HPML_IN_PLACE : (const char *)sendbuf + off * es,
                recvbuf == NULL ? NULL : (char *)recvbuf + off * es, n, dtype, rop, root, comm);
    }
    hpml__prof_leave();
    if (rc != 0)
        return rc;
    if (op == HPML_AVG && comm->rank == root)
        rc = hpml_reduce_finish(recvbuf, count, dtype, op, comm->size);
    return rc;
}

int hpml_reduce(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype, hpml_op_t op,
                int root, hpml_comm_t *comm)
{
    return hpml_reduce_algo(HPML_ALGO_AUTO, sendbuf, recvbuf, count, dtype, op, root, comm);
}
