/*
 * Binomial-tree broadcast: in round k the ranks that already hold the data (relative
 * rank < 2^k) send it to relative rank + 2^k. From MPICH's MPIR_Bcast_intra_binomial.
 * Cost: ceil(lg p)·(α + nβ); best for small messages.
 */
#include "comm/coll_internal.h"
#include "comm/comm_internal.h"
#include "comm/xfer.h"

int hpml__bcast_binomial_on(MPI_Comm c, void *buf, size_t bytes, int root)
{
    int rank, p, vr, mask, rc;

    if ((rc = MPI_Comm_rank(c, &rank)) != MPI_SUCCESS || (rc = MPI_Comm_size(c, &p)) != MPI_SUCCESS)
        return hpml__mpi_error(rc, "MPI_Comm_rank/size");
    if (p == 1 || bytes == 0)
        return 0;
    vr = (rank - root + p) % p;

    /* Receive from the parent: the relative rank with our lowest set bit cleared. */
    for (mask = 1; mask < p; mask <<= 1) {
        if (vr & mask) {
            rc = hpml__xfer_recv(buf, bytes, (rank - mask + p) % p, HPML_TAG_BCAST, c);
            if (rc != 0)
                return rc;
            break;
        }
    }
    /* Send to the children, largest subtree first so it can start forwarding early. */
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (vr + mask < p) {
            rc = hpml__xfer_send(buf, bytes, (rank + mask) % p, HPML_TAG_BCAST, c);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

int hpml__bcast_binomial(void *buf, size_t count, hpml_dtype_t dtype, int root, hpml_comm_t *comm)
{
    return hpml__bcast_binomial_on(comm->comm, buf, count * hpml_dtype_size(dtype), root);
}
