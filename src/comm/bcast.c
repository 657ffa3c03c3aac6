/*
 * hpml_bcast: argument checks, the checking mode, algorithm choice and chunking of
 * counts too large for one algorithm call (MPI counts are int).
 */
#include "comm/coll_internal.h"
#include "comm/comm_internal.h"

hpml__bcast_fn hpml__bcast_impl(hpml_algo_t algo)
{
    switch (algo) {
    case HPML_ALGO_MPI: return hpml__bcast_mpi;
    case HPML_ALGO_BINOMIAL: return hpml__bcast_binomial;
    case HPML_ALGO_SCATTER_ALLGATHER: return hpml__bcast_scatter_allgather;
    case HPML_ALGO_CHAIN: return hpml__bcast_chain;
    case HPML_ALGO_SHM: return hpml__bcast_shm;
    default: return NULL;
    }
}

int hpml_bcast_algo(hpml_algo_t algo, void *buf, size_t count, hpml_dtype_t dtype, int root,
                    hpml_comm_t *comm)
{
    hpml__bcast_fn fn;
    size_t es, maxc, n;
    int rc = 0;

    if (comm == NULL || (unsigned)dtype >= HPML_DTYPE_COUNT || (unsigned)algo >= HPML_ALGO_COUNT)
        return hpml_set_error(HPML_ERR_INVAL,
                              "hpml_bcast: invalid communicator, dtype or algorithm");
    if (root < 0 || root >= comm->size)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_bcast: root %d outside [0, %d)", root,
                              comm->size);
    if (count > 0 && buf == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_bcast: NULL buffer");
    if (algo != HPML_ALGO_AUTO && hpml__bcast_impl(algo) == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_bcast: algorithm '%s' does not implement bcast",
                              hpml_algo_name(algo));
    if (comm->check && (rc = hpml__check(comm, HPML__KIND_BCAST, count, (int)dtype, -1, root)) != 0)
        return rc;
    if (count == 0 || comm->size == 1)
        return 0;
    es = hpml_dtype_size(dtype);
    if (algo == HPML_ALGO_AUTO)
        algo = hpml__select(comm, HPML_COLL_BCAST, count * es);
    fn = hpml__bcast_impl(algo);
    if (fn == NULL)
        return hpml_set_error(HPML_ERR_INVAL,
                              "hpml_bcast: algorithm '%s' does not implement "
                              "bcast",
                              hpml_algo_name(algo));
    maxc = hpml__max_chunk_elems(dtype, comm);
    hpml__prof_enter(HPML_COLL_BCAST, algo, count * es);
    for (size_t off = 0; off < count && rc == 0; off += n) {
        n = hpml__min(maxc, count - off);
        rc = fn((char *)buf + off * es, n, dtype, root, comm);
    }
    hpml__prof_leave();
    return rc;
}

int hpml_bcast(void *buf, size_t count, hpml_dtype_t dtype, int root, hpml_comm_t *comm)
{
    return hpml_bcast_algo(HPML_ALGO_AUTO, buf, count, dtype, root, comm);
}
