/*
 * Broadcast as a binomial scatter of p blocks followed by a ring allgather (van de
 * Geijn; MPICH's MPIR_Bcast_intra_scatter_ring_allgather). Cost:
 * (lg p + p − 1)α + 2n(p−1)/p·β: half the bandwidth term of a tree for large n.
 */
#include "comm/coll_internal.h"
#include "comm/comm_internal.h"
#include "comm/xfer.h"

/* Byte range of relative blocks [first, first+nblk) clamped to the message. */
static size_t range_bytes(size_t first, size_t nblk, size_t blk, size_t bytes)
{
    size_t lo = first * blk, hi = (first + nblk) * blk;

    if (lo >= bytes)
        return 0;
    return (hi > bytes ? bytes : hi) - lo;
}

int hpml__bcast_scatter_allgather_on(MPI_Comm c, void *buf, size_t bytes, size_t unit, int root)
{
    int rank, p, vr, mask, rc, left, right;
    size_t blk;
    char *b = buf;

    if ((rc = MPI_Comm_rank(c, &rank)) != MPI_SUCCESS || (rc = MPI_Comm_size(c, &p)) != MPI_SUCCESS)
        return hpml__mpi_error(rc, "MPI_Comm_rank/size");
    if (p == 1 || bytes == 0)
        return 0;
    if (unit == 0)
        unit = 1;
    vr = (rank - root + p) % p;
    /* Relative block i (i = relative rank) starts at byte i·blk of the buffer. */
    blk = hpml__div_up(hpml__div_up(bytes, unit), (size_t)p) * unit;

    /* Scatter: relative rank vr receives the blocks of its subtree [vr, vr+mask) from its
     * parent, then hands [vr+m, vr+2m) to child vr+m for decreasing m. */
    for (mask = 1; mask < p; mask <<= 1) {
        if (vr & mask) {
            size_t n = range_bytes((size_t)vr, (size_t)mask, blk, bytes);

            rc = hpml__xfer_recv(b + (size_t)vr * blk, n, (rank - mask + p) % p, HPML_TAG_BCAST, c);
            if (rc != 0)
                return rc;
            break;
        }
    }
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (vr + mask < p) {
            size_t n = range_bytes((size_t)(vr + mask), (size_t)mask, blk, bytes);

            rc = hpml__xfer_send(b + (size_t)(vr + mask) * blk, n, (rank + mask) % p,
                                 HPML_TAG_BCAST, c);
            if (rc != 0)
                return rc;
        }
    }

    /* Ring allgather of the blocks: in step s relative rank vr forwards block vr−s to
     * its right neighbour and receives block vr−s−1 from its left one. */
    left = (rank - 1 + p) % p;
    right = (rank + 1) % p;
    for (int s = 0; s < p - 1; s++) {
        size_t sb = (size_t)((vr - s + p) % p), rb = (size_t)((vr - s - 1 + p) % p);

        rc = hpml__xfer_sendrecv(b + sb * blk, range_bytes(sb, 1, blk, bytes), right, b + rb * blk,
                                 range_bytes(rb, 1, blk, bytes), left, HPML_TAG_BCAST, c);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int hpml__bcast_scatter_allgather(void *buf, size_t count, hpml_dtype_t dtype, int root,
                                  hpml_comm_t *comm)
{
    size_t es = hpml_dtype_size(dtype);

    return hpml__bcast_scatter_allgather_on(comm->comm, buf, count * es, es, root);
}
