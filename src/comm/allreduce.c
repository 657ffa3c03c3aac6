/*
 * hpml_allreduce: argument checks, algorithm choice, chunking of counts too large for
 * one algorithm call (MPI counts are int), and AVG as SUM followed by one division (the
 * shared-memory algorithm divides as it reduces).
 * hpml_allreduce_apply: the shared-memory engine (hierarchical across nodes) with the
 * caller's function applied by each slice's owner.
 */
#include <limits.h>
#include <stdint.h>

#include "comm/coll_internal.h"
#include "comm/comm_internal.h"

hpml__allreduce_fn hpml__allreduce_impl(hpml_algo_t algo)
{
    switch (algo) {
    case HPML_ALGO_MPI: return hpml__allreduce_mpi;
    case HPML_ALGO_RECURSIVE_DOUBLING: return hpml__allreduce_recursive_doubling;
    case HPML_ALGO_RING: return hpml__allreduce_ring;
    case HPML_ALGO_RABENSEIFNER: return hpml__allreduce_rabenseifner;
    case HPML_ALGO_REDUCE_BCAST: return hpml__allreduce_reduce_bcast;
    case HPML_ALGO_SHM: return hpml__allreduce_shm;
    case HPML_ALGO_HIER: return hpml__allreduce_hier;
    default: return NULL;
    }
}

size_t hpml__max_chunk_elems(hpml_dtype_t dt, const hpml_comm_t *comm)
{
    /* Whole bytes of a chunk must fit an int (the p2p algorithms send MPI_BYTE); keep
     * chunks a multiple of 64 elements so slices stay cache-line aligned. */
    size_t lim = ((size_t)INT_MAX / hpml_dtype_size(dt)) & ~(size_t)63;

    if (comm->max_chunk_elems > 0 && comm->max_chunk_elems < lim)
        lim = comm->max_chunk_elems;
    return lim;
}

int hpml_allreduce_algo(hpml_algo_t algo, const void *sendbuf, void *recvbuf, size_t count,
                        hpml_dtype_t dtype, hpml_op_t op, hpml_comm_t *comm)
{
    hpml__allreduce_fn fn;
    hpml_op_t rop = op;
    size_t es, maxc, off, n;
    int rc = 0;

    if (comm == NULL || (unsigned)dtype >= HPML_DTYPE_COUNT || (unsigned)op >= HPML_OP_COUNT ||
        (unsigned)algo >= HPML_ALGO_COUNT)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_allreduce: invalid communicator, "
                                              "dtype, op or algorithm");
    if (count > 0 && (recvbuf == NULL || sendbuf == NULL))
        return hpml_set_error(HPML_ERR_INVAL, "hpml_allreduce: NULL buffer");
    if (comm->check &&
        (rc = hpml__check(comm, HPML__KIND_ALLREDUCE, count, (int)dtype, (int)op, -1)) != 0)
        return rc;
    if (count == 0)
        return 0;
    es = hpml_dtype_size(dtype);
    if (algo == HPML_ALGO_AUTO)
        algo = hpml__select(comm, HPML_COLL_ALLREDUCE, count * es);
    fn = hpml__allreduce_impl(algo);
    if (fn == NULL)
        return hpml_set_error(HPML_ERR_INVAL,
                              "hpml_allreduce: algorithm '%s' does not "
                              "implement allreduce",
                              hpml_algo_name(algo));
    /* The shared-memory algorithm divides each slice as its owner reduces it; the others
     * reduce SUM and the whole output is divided once afterwards. */
    if (op == HPML_AVG && algo != HPML_ALGO_SHM)
        rop = HPML_SUM;
    maxc = hpml__max_chunk_elems(dtype, comm);
    hpml__prof_enter(HPML_COLL_ALLREDUCE, algo, count * es);
    for (off = 0; off < count && rc == 0; off += n) {
        n = hpml__min(maxc, count - off);
        rc = fn(sendbuf == HPML_IN_PLACE ? HPML_IN_PLACE : (const char *)sendbuf + off * es,
                (char *)recvbuf + off * es, n, dtype, rop, comm);
    }
    hpml__prof_leave();
    if (rc != 0)
        return rc;
    if (rop != op)
        rc = hpml_reduce_finish(recvbuf, count, dtype, op, comm->size);
    return rc;
}

int hpml_allreduce(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                   hpml_op_t op, hpml_comm_t *comm)
{
    return hpml_allreduce_algo(HPML_ALGO_AUTO, sendbuf, recvbuf, count, dtype, op, comm);
}

/* Do [a, a + an) and [b, b + bn) bytes overlap? */
static int overlaps(const void *a, size_t an, const void *b, size_t bn)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

    return an > 0 && bn > 0 && x < y + bn && y < x + an;
}

int hpml__allreduce_apply_check(const char *who, const void *sendbuf, void *recvbuf, size_t count,
                                hpml_dtype_t dtype, hpml_op_t op, hpml_apply_fn fn,
                                hpml_comm_t *comm)
{
    if (comm == NULL || (unsigned)dtype >= HPML_DTYPE_COUNT || (unsigned)op >= HPML_OP_COUNT ||
        fn == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "%s: invalid communicator, dtype, op or function",
                              who);
    if (sendbuf == HPML_IN_PLACE)
        return hpml_set_error(HPML_ERR_INVAL,
                              "%s: works out of place only (sendbuf is HPML_IN_PLACE)", who);
    if (count > 0 && (recvbuf == NULL || sendbuf == NULL))
        return hpml_set_error(HPML_ERR_INVAL, "%s: NULL buffer", who);
    if (count > 0 && count > SIZE_MAX / hpml_dtype_size(dtype))
        return hpml_set_error(HPML_ERR_RANGE, "%s: count too large", who);
    if (overlaps(sendbuf, count * hpml_dtype_size(dtype), recvbuf, count * hpml_dtype_size(dtype)))
        return hpml_set_error(HPML_ERR_INVAL, "%s: sendbuf and recvbuf overlap", who);
    return 0;
}

int hpml__allreduce_apply_run(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                              hpml_op_t op, hpml_apply_fn fn, void *ctx, hpml_comm_t *comm)
{
    hpml__apply_t ap = {.fn = fn, .ctx = ctx, .op = op, .contributions = comm->size};
    size_t es = hpml_dtype_size(dtype), maxc = hpml__max_chunk_elems(dtype, comm), n;
    int rc = 0;

    for (size_t off = 0; off < count; off += n) {
        n = hpml__min(maxc, count - off);
        ap.base = off;
        /* After a failure of fn every piece still runs: the peers take part in all. */
        int r2 = hpml__allreduce_shm_engine(
            (const char *)sendbuf + off * es, (char *)recvbuf + off * es, n, dtype,
            op == HPML_AVG ? HPML_SUM : op, comm, comm->nodes > 1, &ap);
        rc = rc ? rc : r2;
    }
    return rc;
}

int hpml_allreduce_apply(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                         hpml_op_t op, hpml_apply_fn fn, void *ctx, hpml_comm_t *comm)
{
    int rc = hpml__allreduce_apply_check("hpml_allreduce_apply", sendbuf, recvbuf, count, dtype, op,
                                         fn, comm);

    if (rc != 0)
        return rc;
    if (comm->check &&
        (rc = hpml__check(comm, HPML__KIND_ALLREDUCE_APPLY, count, (int)dtype, (int)op, -1)) != 0)
        return rc;
    return hpml__allreduce_apply_run(sendbuf, recvbuf, count, dtype, op, fn, ctx, comm);
}
