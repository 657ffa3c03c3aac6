/*
 * Chunked point-to-point byte transfers for the point-to-point collectives (bcast, reduce,
 * allgather, reduce_scatter). MPI counts are int: every helper here splits a size_t
 * byte count into pieces of at most hpml__xfer_limit() bytes, posting matching pieces
 * on both sides so any message size works.
 */
#ifndef HPML_COMM_XFER_H
#define HPML_COMM_XFER_H

#include <mpi.h>
#include <stddef.h>

#include "hpml/core.h"

/* Tags used by the point-to-point collectives (one per collective, so a stray
 * message from a bug shows up as a hang in one place rather than silent corruption). */
enum {
    HPML_TAG_BCAST = 0x4b10,
    HPML_TAG_REDUCE = 0x4b20,
    HPML_TAG_ALLGATHER = 0x4b30,
    HPML_TAG_REDUCE_SCATTER = 0x4b40,
    HPML_TAG_ALLTOALLV = 0x4b50,
};

/* Largest piece, in bytes, handed to a single MPI call (INT_MAX; HPML_MAX_MSG_BYTES lowers it). */
size_t hpml__xfer_limit(void);

int hpml__xfer_send(const void *buf, size_t bytes, int dest, int tag, MPI_Comm comm);
int hpml__xfer_recv(void *buf, size_t bytes, int src, int tag, MPI_Comm comm);
/* Send `sbytes` to dest while receiving `rbytes` from src (either may be 0 or the peer
 * MPI_PROC_NULL). Deadlock-free whatever the peers' order. */
int hpml__xfer_sendrecv(const void *sbuf, size_t sbytes, int dest, void *rbuf, size_t rbytes,
                        int src, int tag, MPI_Comm comm);
/* Same with two pieces each way (recursive-doubling allgather on non-powers of two). */
int hpml__xfer_sendrecv2(const void *s0, size_t s0bytes, const void *s1, size_t s1bytes, int dest,
                         void *r0, size_t r0bytes, void *r1, size_t r1bytes, int src, int tag,
                         MPI_Comm comm);

/* Map an MPI return code to 0 or HPML_ERR_MPI (with the MPI error string as detail). */
int hpml__xfer_mpi_err(int mpi_rc, const char *what);

/* ceil(a / b) for b > 0 */
static inline size_t hpml__div_up(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

#endif
