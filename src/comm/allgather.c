/*
 * hpml_allgather: argument checks, the checking mode, algorithm choice, and chunking of
 * per-rank counts too large for one algorithm call: each piece is gathered into a
 * scratch buffer and copied to its place in every block.
 */
#include <string.h>

#include "comm/coll_internal.h"
#include "comm/comm_internal.h"

hpml__allgather_fn hpml__allgather_impl(hpml_algo_t algo)
{
    switch (algo) {
    case HPML_ALGO_MPI: return hpml__allgather_mpi;
    case HPML_ALGO_RING: return hpml__allgather_ring;
    case HPML_ALGO_RECURSIVE_DOUBLING: return hpml__allgather_recursive_doubling;
    case HPML_ALGO_BRUCK: return hpml__allgather_bruck;
    default: return NULL;
    }
}

int hpml_allgather_algo(hpml_algo_t algo, const void *sendbuf, void *recvbuf, size_t count,
                        hpml_dtype_t dtype, hpml_comm_t *comm)
{
    hpml__allgather_fn fn;
    size_t es, maxc, n, blk;
    char *r = recvbuf, *tmp = NULL;
    const char *mine;
    int rc = 0, p;

    if (comm == NULL || (unsigned)dtype >= HPML_DTYPE_COUNT || (unsigned)algo >= HPML_ALGO_COUNT)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_allgather: invalid communicator, dtype or "
                                              "algorithm");
    if (count > 0 && (sendbuf == NULL || recvbuf == NULL))
        return hpml_set_error(HPML_ERR_INVAL, "hpml_allgather: NULL buffer");
    if (algo != HPML_ALGO_AUTO && hpml__allgather_impl(algo) == NULL)
        return hpml_set_error(HPML_ERR_INVAL,
                              "hpml_allgather: algorithm '%s' does not implement allgather",
                              hpml_algo_name(algo));
    if (comm->check &&
        (rc = hpml__check(comm, HPML__KIND_ALLGATHER, count, (int)dtype, -1, -1)) != 0)
        return rc;
    if (count == 0)
        return 0;
    p = comm->size;
    es = hpml_dtype_size(dtype);
    blk = count * es;
    mine = sendbuf == HPML_IN_PLACE ? r + (size_t)comm->rank * blk : sendbuf;
    if (p == 1) {
        if (mine != r)
            memmove(r, mine, blk);
        return 0;
    }
    if (algo == HPML_ALGO_AUTO)
        algo = hpml__select(comm, HPML_COLL_ALLGATHER, (size_t)p * blk);
    fn = hpml__allgather_impl(algo);
    if (fn == NULL)
        return hpml_set_error(HPML_ERR_INVAL,
                              "hpml_allgather: algorithm '%s' does not "
                              "implement allgather",
                              hpml_algo_name(algo));
    maxc = hpml__max_chunk_elems(dtype, comm);
    hpml__prof_enter(HPML_COLL_ALLGATHER, algo, (size_t)p * blk);
    if (count <= maxc) {
        rc = fn(sendbuf, recvbuf, count, dtype, comm);
        goto out;
    }
    if ((tmp = hpml_malloc((size_t)p * maxc * es)) == NULL) {
        rc = HPML_ERR_NOMEM;
        goto out;
    }
    for (size_t off = 0; off < count; off += n) {
        n = hpml__min(maxc, count - off);
        if ((rc = fn(mine + off * es, tmp, n, dtype, comm)) != 0)
            goto out;
        for (int q = 0; q < p; q++)
            if (q != comm->rank || sendbuf != HPML_IN_PLACE)
                memcpy(r + (size_t)q * blk + off * es, tmp + (size_t)q * n * es, n * es);
    }
out:
    hpml__prof_leave();
    hpml_free(tmp);
    return rc;
}

int hpml_allgather(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                   hpml_comm_t *comm)
{
    return hpml_allgather_algo(HPML_ALGO_AUTO, sendbuf, recvbuf, count, dtype, comm);
}
