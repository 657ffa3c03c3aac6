/*
 * The windowed streaming loop shared by bw, bibw and mbw_mr (osu_bw): a window of
 * nonblocking sends (and/or receives), wait for all, then a 1-byte acknowledgement from
 * the receiver so that the next window starts only when this one has arrived.
 */
#include "bench/p2p_window.h"

#define TAG     3
#define ACK_TAG 4

int hpml__bench_window(bench_ctx_t *c, int peer, int send, int recv)
{
    int n = (int)c->count, k = 0;
    char ack = 0;

    if (recv)
        for (int w = 0; w < c->window; w++)
            if (MPI_Irecv(c->rbuf, n, c->mdt, peer, TAG, c->comm, &c->reqs[k++]) != MPI_SUCCESS)
                return HPML_ERR_MPI;
    if (send)
        for (int w = 0; w < c->window; w++)
            if (MPI_Isend(c->sbuf, n, c->mdt, peer, TAG, c->comm, &c->reqs[k++]) != MPI_SUCCESS)
                return HPML_ERR_MPI;
    if (MPI_Waitall(k, c->reqs, c->stats) != MPI_SUCCESS)
        return HPML_ERR_MPI;
    /* One way (bw, mbw_mr): the receiver acknowledges the window, so the sender's clock
     * stops only when the data has arrived. Both ways (bibw): each side has waited for
     * its own receives already; OMB sends no acknowledgement there either. */
    if (send && !recv)
        return BENCH_MPI(MPI_Recv(&ack, 1, MPI_CHAR, peer, ACK_TAG, c->comm, MPI_STATUS_IGNORE));
    if (recv && !send)
        return BENCH_MPI(MPI_Send(&ack, 1, MPI_CHAR, peer, ACK_TAG, c->comm));
    return 0;
}
