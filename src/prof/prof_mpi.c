/*
 * The MPI wrappers of libhpml-prof.so: each C binding calls its PMPI_ twin and records
 * time, bytes, the size histogram of its communicator's group and, for point-to-point
 * sends, a message to the destination's world rank. Only the C symbols are interposed
 * (never the Fortran ones), and every argument reaches PMPI_ untouched: MPI_IN_PLACE,
 * MPI_BOTTOM and MPI_STATUS_IGNORE keep their meaning. A blocking receive given
 * MPI_STATUS_IGNORE gets a status of the wrapper's own, to learn the size received.
 *
 * Bytes per call are what this rank sends or contributes (docs/prof.md, "What is
 * counted"): count x type size for sends and reductions, the size received for blocking
 * receives, the posted size for MPI_Irecv.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prof/prof.h"

#define ON  hpml__prof_on
#define NOW hpml__prof_now
/* The call site: where the wrapper returns to, in the program. */
#define RA __builtin_return_address(0)

static inline uint64_t tbytes(int count, MPI_Datatype t)
{
    int s = 0;

    if (count <= 0 || t == MPI_DATATYPE_NULL)
        return 0;
    PMPI_Type_size(t, &s);
    return (uint64_t)count * (uint64_t)s;
}

static inline uint64_t tbytes_sum(const int *counts, int n, MPI_Datatype t)
{
    uint64_t total = 0;

    for (int i = 0; i < n; i++)
        total += counts[i] > 0 ? (uint64_t)counts[i] : 0;
    return total ? (uint64_t)tbytes(1, t) * total : 0;
}

static inline int comm_rank(MPI_Comm comm)
{
    int r = 0;

    PMPI_Comm_rank(comm, &r);
    return r;
}

/* A send of count x t to dest of comm, between t0 and t1. */
static inline void rec_send(void *ra, int id, uint64_t t0, uint64_t t1, int count, MPI_Datatype t,
                            int dest, MPI_Comm comm)
{
    prof_comm_t *c = hpml__prof_comm(comm);
    int w = c != NULL && dest >= 0 && dest < c->size ? c->world[dest] : -1;

    hpml__prof_record(ra, id, t0, t1, tbytes(count, t), c, w);
}

/* Trace mode: the source (as a world rank; -2 for MPI_ANY_SOURCE) and tag (-2 for
 * MPI_ANY_TAG) of a receive, for the next event. */
static inline void received(MPI_Comm comm, int source, int tag)
{
    prof_comm_t *c;

    if (!hpml__prof_tracing)
        return;
    c = hpml__prof_comm(comm);
    hpml__prof_peer_r = source == MPI_ANY_SOURCE                       ? -2
                        : c != NULL && source >= 0 && source < c->size ? c->world[source]
                                                                       : -1;
    hpml__prof_tag_r = tag == MPI_ANY_TAG ? -2 : tag;
}

static inline void rec_coll(void *ra, int id, uint64_t t0, uint64_t t1, uint64_t bytes,
                            MPI_Comm comm)
{
    hpml__prof_record(ra, id, t0, t1, bytes, hpml__prof_comm(comm), -1);
}

static inline void rec_time(void *ra, int id, uint64_t t0, uint64_t t1)
{
    hpml__prof_record(ra, id, t0, t1, 0, NULL, -1);
}

/* ---- point to point ------------------------------------------------------------------ */

#define SEND(NAME)                                                                                 \
    int NAME(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm)         \
    {                                                                                              \
        uint64_t t0, t1;                                                                           \
        int rc;                                                                                    \
        if (!ON)                                                                                   \
            return P##NAME(buf, count, t, dest, tag, comm);                                        \
        t0 = NOW();                                                                                \
        rc = P##NAME(buf, count, t, dest, tag, comm);                                              \
        t1 = NOW();                                                                                \
        hpml__prof_tag_s = tag;                                                                    \
        rec_send(RA, PROF_##NAME, t0, t1, count, t, dest, comm);                                   \
        return rc;                                                                                 \
    }
#define ISEND(NAME)                                                                                \
    int NAME(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm,         \
             MPI_Request *req)                                                                     \
    {                                                                                              \
        uint64_t t0, t1;                                                                           \
        int rc;                                                                                    \
        if (!ON)                                                                                   \
            return P##NAME(buf, count, t, dest, tag, comm, req);                                   \
        t0 = NOW();                                                                                \
        rc = P##NAME(buf, count, t, dest, tag, comm, req);                                         \
        t1 = NOW();                                                                                \
        hpml__prof_tag_s = tag;                                                                    \
        rec_send(RA, PROF_##NAME, t0, t1, count, t, dest, comm);                                   \
        if (hpml__prof_tracing && rc == MPI_SUCCESS && hpml__prof_thread() != NULL) {              \
            uint64_t a_ = hpml__prof_self ? NOW() : 0;                                             \
            hpml__prof_irecv_done(hpml__prof_thread(), *req, NULL, 0, 0); /* a stale handle */     \
            if (hpml__prof_self)                                                                   \
                hpml__prof_self_extra(hpml__prof_thread(), a_);                                    \
        }                                                                                          \
        return rc;                                                                                 \
    }

SEND(MPI_Send)
SEND(MPI_Ssend)
SEND(MPI_Bsend)
SEND(MPI_Rsend)
ISEND(MPI_Isend)
ISEND(MPI_Issend)
ISEND(MPI_Ibsend)
ISEND(MPI_Irsend)

int MPI_Recv(void *buf, int count, MPI_Datatype t, int source, int tag, MPI_Comm comm,
             MPI_Status *status)
{
    MPI_Status own;
    uint64_t t0, t1, bytes = 0;
    int rc, n = 0;

    if (!ON)
        return PMPI_Recv(buf, count, t, source, tag, comm, status);
    if (status == MPI_STATUS_IGNORE)
        status = &own;
    t0 = NOW();
    rc = PMPI_Recv(buf, count, t, source, tag, comm, status);
    t1 = NOW();
    if (rc == MPI_SUCCESS && count > 0 && PMPI_Get_count(status, t, &n) == MPI_SUCCESS &&
        n != MPI_UNDEFINED)
        bytes = tbytes(n, t);
    if (rc == MPI_SUCCESS)
        received(comm, status->MPI_SOURCE, status->MPI_TAG);
    hpml__prof_record(RA, PROF_MPI_Recv, t0, t1, bytes, hpml__prof_comm(comm), -1);
    return rc;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype t, int source, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    uint64_t t0, t1;
    int rc;

    if (!ON)
        return PMPI_Irecv(buf, count, t, source, tag, comm, req);
    t0 = NOW();
    rc = PMPI_Irecv(buf, count, t, source, tag, comm, req);
    t1 = NOW();
    received(comm, source, tag); /* as posted: MPI_ANY_SOURCE, MPI_ANY_TAG are kept */
    hpml__prof_record(RA, PROF_MPI_Irecv, t0, t1, tbytes(count, t), hpml__prof_comm(comm), -1);
    if (hpml__prof_tracing && rc == MPI_SUCCESS && hpml__prof_thread() != NULL) {
        uint64_t a = hpml__prof_self ? NOW() : 0;

        hpml__prof_irecv_posted(hpml__prof_thread(), *req, hpml__prof_comm(comm), t0);
        if (hpml__prof_self)
            hpml__prof_self_extra(hpml__prof_thread(), a);
    }
    return rc;
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag, void *rbuf,
                 int rcount, MPI_Datatype rtype, int source, int rtag, MPI_Comm comm,
                 MPI_Status *status)
{
    MPI_Status own;
    uint64_t t0, t1;
    int rc;

    if (!ON)
        return PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag,
                             comm, status);
    if (status == MPI_STATUS_IGNORE && hpml__prof_tracing)
        status = &own;
    t0 = NOW();
    rc = PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm,
                       status);
    t1 = NOW();
    if (rc == MPI_SUCCESS && hpml__prof_tracing) {
        hpml__prof_tag_s = stag;
        received(comm, status->MPI_SOURCE, status->MPI_TAG);
    }
    rec_send(RA, PROF_MPI_Sendrecv, t0, t1, scount, stype, dest, comm);
    return rc;
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype t, int dest, int stag, int source,
                         int rtag, MPI_Comm comm, MPI_Status *status)
{
    MPI_Status own;
    uint64_t t0, t1;
    int rc;

    if (!ON)
        return PMPI_Sendrecv_replace(buf, count, t, dest, stag, source, rtag, comm, status);
    if (status == MPI_STATUS_IGNORE && hpml__prof_tracing)
        status = &own;
    t0 = NOW();
    rc = PMPI_Sendrecv_replace(buf, count, t, dest, stag, source, rtag, comm, status);
    t1 = NOW();
    if (rc == MPI_SUCCESS && hpml__prof_tracing) {
        hpml__prof_tag_s = stag;
        received(comm, status->MPI_SOURCE, status->MPI_TAG);
    }
    rec_send(RA, PROF_MPI_Sendrecv_replace, t0, t1, count, t, dest, comm);
    return rc;
}

/* Calls counted by time only: NAME(params) forwarding args. */
#define TIMED(NAME, PARAMS, ARGS)                                                                  \
    int NAME PARAMS                                                                                \
    {                                                                                              \
        uint64_t t0;                                                                               \
        int rc;                                                                                    \
        if (!ON)                                                                                   \
            return P##NAME ARGS;                                                                   \
        t0 = NOW();                                                                                \
        rc = P##NAME ARGS;                                                                         \
        rec_time(RA, PROF_##NAME, t0, NOW());                                                      \
        return rc;                                                                                 \
    }

TIMED(MPI_Probe, (int source, int tag, MPI_Comm comm, MPI_Status *status),
      (source, tag, comm, status))
TIMED(MPI_Iprobe, (int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status),
      (source, tag, comm, flag, status))

/* Completion calls. In trace mode, while this thread has receives posted with MPI_Irecv
 * pending, the call's requests are copied before it (a completed one becomes
 * MPI_REQUEST_NULL) and, when the caller ignores statuses, it is given statuses of the
 * wrapper's own; each completed receive then becomes a PROF_TRACE_RECV event with the
 * source and tag of its status, from which `hpml prof merge` draws its flow. */
#define TRACK_LOCAL 16
typedef struct {
    prof_thread_t *t; /* NULL: not tracking */
    MPI_Request rq_local[TRACK_LOCAL], *rq;
    MPI_Status st_local[TRACK_LOCAL], *st, *st_own;
} track_t;

/* Start tracking reqs[0..n) of a call that fills nst statuses (ignored: the caller passed
 * MPI_STATUS(ES)_IGNORE); returns the statuses to pass to the call. */
static MPI_Status *track_begin(track_t *k, int n, const MPI_Request *reqs, int nst, int ignored,
                               MPI_Status *statuses)
{
    prof_thread_t *t;
    uint64_t a;

    k->t = NULL;
    k->rq = k->rq_local;
    k->st_own = NULL;
    if (!hpml__prof_tracing || n <= 0 || (t = hpml__prof_thread()) == NULL || t->npending == 0)
        return statuses;
    a = hpml__prof_self ? NOW() : 0;
    if (n > TRACK_LOCAL && (k->rq = malloc((size_t)n * sizeof(*reqs))) == NULL)
        return statuses;
    k->st = statuses;
    if (ignored && (k->st = k->st_own = nst > TRACK_LOCAL ? malloc((size_t)nst * sizeof(MPI_Status))
                                                          : k->st_local) == NULL) {
        if (k->rq != k->rq_local)
            free(k->rq);
        return statuses;
    }
    memcpy(k->rq, reqs, (size_t)n * sizeof(*reqs));
    k->t = t;
    if (hpml__prof_self)
        hpml__prof_self_extra(t, a);
    return k->st;
}

/* The call, from t0 to t1, returned rc having completed `done` requests: the indices
 * idx[0..done) (all from 0 when idx is NULL), with statuses st[0..done). */
static void track_end(track_t *k, int rc, int done, const int *idx, uint64_t t0, uint64_t t1)
{
    uint64_t a;

    if (k->t == NULL)
        return;
    a = hpml__prof_self ? NOW() : 0;
    for (int j = 0; rc == MPI_SUCCESS && j < done; j++)
        hpml__prof_irecv_done(k->t, k->rq[idx != NULL ? idx[j] : j], &k->st[j], t0, t1);
    if (k->rq != k->rq_local)
        free(k->rq);
    if (k->st_own != NULL && k->st_own != k->st_local)
        free(k->st_own);
    if (hpml__prof_self)
        hpml__prof_self_extra(k->t, a);
}

/* NAME(PARAMS) forwarding ARGS, over the N requests REQS filling NST statuses STV (a
 * single status when ONE); DONE and IDX are track_end's, read after the call. */
#define COMPLETE(NAME, PARAMS, ARGS, N, REQS, NST, STV, ONE, DONE, IDX)                            \
    int NAME PARAMS                                                                                \
    {                                                                                              \
        track_t k;                                                                                 \
        uint64_t t0, t1;                                                                           \
        int rc;                                                                                    \
        if (!ON)                                                                                   \
            return P##NAME ARGS;                                                                   \
        STV = track_begin(&k, N, REQS, NST,                                                        \
                          (ONE) ? STV == MPI_STATUS_IGNORE : STV == MPI_STATUSES_IGNORE, STV);     \
        t0 = NOW();                                                                                \
        rc = P##NAME ARGS;                                                                         \
        t1 = NOW();                                                                                \
        rec_time(RA, PROF_##NAME, t0, t1);                                                         \
        track_end(&k, rc, DONE, IDX, t0, t1);                                                      \
        return rc;                                                                                 \
    }

COMPLETE(MPI_Wait, (MPI_Request * req, MPI_Status *status), (req, status), 1, req, 1, status, 1, 1,
         NULL)
COMPLETE(MPI_Waitall, (int n, MPI_Request reqs[], MPI_Status statuses[]), (n, reqs, statuses), n,
         reqs, n, statuses, 0, n, NULL)
COMPLETE(MPI_Waitany, (int n, MPI_Request reqs[], int *index, MPI_Status *status),
         (n, reqs, index, status), n, reqs, 1, status, 1, *index != MPI_UNDEFINED, index)
COMPLETE(MPI_Waitsome,
         (int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]),
         (n, reqs, outcount, indices, statuses), n, reqs, n, statuses, 0,
         *outcount != MPI_UNDEFINED ? *outcount : 0, indices)
COMPLETE(MPI_Test, (MPI_Request * req, int *flag, MPI_Status *status), (req, flag, status), 1, req,
         1, status, 1, *flag != 0, NULL)
COMPLETE(MPI_Testall, (int n, MPI_Request reqs[], int *flag, MPI_Status statuses[]),
         (n, reqs, flag, statuses), n, reqs, n, statuses, 0, *flag ? n : 0, NULL)
COMPLETE(MPI_Testany, (int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status),
         (n, reqs, index, flag, status), n, reqs, 1, status, 1, *flag &&*index != MPI_UNDEFINED,
         index)
COMPLETE(MPI_Testsome,
         (int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]),
         (n, reqs, outcount, indices, statuses), n, reqs, n, statuses, 0,
         *outcount != MPI_UNDEFINED ? *outcount : 0, indices)
TIMED(MPI_Comm_dup, (MPI_Comm comm, MPI_Comm *newcomm), (comm, newcomm))
TIMED(MPI_Comm_split, (MPI_Comm comm, int color, int key, MPI_Comm *newcomm),
      (comm, color, key, newcomm))
TIMED(MPI_Comm_split_type,
      (MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm),
      (comm, split_type, key, info, newcomm))
TIMED(MPI_Comm_create, (MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm), (comm, group, newcomm))
TIMED(MPI_Win_free, (MPI_Win * win), (win))

int MPI_Comm_free(MPI_Comm *comm)
{
    uint64_t t0;
    int rc;

    if (!ON)
        return PMPI_Comm_free(comm);
    hpml__prof_comm_forget(*comm);
    t0 = NOW();
    rc = PMPI_Comm_free(comm);
    rec_time(RA, PROF_MPI_Comm_free, t0, NOW());
    return rc;
}

/* A receive freed before it completes gets no event: forget its request (the handle may
 * come back for another request). */
int MPI_Request_free(MPI_Request *req)
{
    if (hpml__prof_tracing && ON && hpml__prof_thread() != NULL)
        hpml__prof_irecv_done(hpml__prof_thread(), *req, NULL, 0, 0);
    return PMPI_Request_free(req);
}

/* A disconnected communicator's handle may come back for another: forget it too. */
int MPI_Comm_disconnect(MPI_Comm *comm)
{
    if (ON)
        hpml__prof_comm_forget(*comm);
    return PMPI_Comm_disconnect(comm);
}

int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
                            void *baseptr, MPI_Win *win)
{
    uint64_t t0, t1;
    int rc;

    if (!ON)
        return PMPI_Win_allocate_shared(size, disp_unit, info, comm, baseptr, win);
    t0 = NOW();
    rc = PMPI_Win_allocate_shared(size, disp_unit, info, comm, baseptr, win);
    t1 = NOW();
    rec_coll(RA, PROF_MPI_Win_allocate_shared, t0, t1, size > 0 ? (uint64_t)size : 0, comm);
    return rc;
}

/* ---- collectives --------------------------------------------------------------------- */

/* A collective: NAME(params), forwarding args, this rank's bytes computed by BYTES. */
#define COLL(NAME, PARAMS, ARGS, COMM, BYTES)                                                      \
    int NAME PARAMS                                                                                \
    {                                                                                              \
        uint64_t t0, t1;                                                                           \
        int rc;                                                                                    \
        if (!ON)                                                                                   \
            return P##NAME ARGS;                                                                   \
        t0 = NOW();                                                                                \
        rc = P##NAME ARGS;                                                                         \
        t1 = NOW();                                                                                \
        rec_coll(RA, PROF_##NAME, t0, t1, (BYTES), COMM);                                          \
        return rc;                                                                                 \
    }

static inline int comm_size(MPI_Comm comm)
{
    prof_comm_t *c = hpml__prof_comm(comm);

    return c != NULL ? c->size : 0;
}

COLL(MPI_Barrier, (MPI_Comm comm), (comm), comm, 0)
COLL(MPI_Bcast, (void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm),
     (buf, count, t, root, comm), comm, tbytes(count, t))
COLL(MPI_Reduce,
     (const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, int root, MPI_Comm comm),
     (sbuf, rbuf, count, t, op, root, comm), comm, tbytes(count, t))
COLL(MPI_Allreduce,
     (const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm),
     (sbuf, rbuf, count, t, op, comm), comm, tbytes(count, t))
COLL(MPI_Scan, (const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm),
     (sbuf, rbuf, count, t, op, comm), comm, tbytes(count, t))
COLL(MPI_Exscan,
     (const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm),
     (sbuf, rbuf, count, t, op, comm), comm, tbytes(count, t))
COLL(MPI_Gather,
     (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
      int root, MPI_Comm comm),
     (sbuf, scount, stype, rbuf, rcount, rtype, root, comm), comm,
     sbuf == MPI_IN_PLACE ? tbytes(rcount, rtype) : tbytes(scount, stype))
COLL(MPI_Gatherv,
     (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
      const int displs[], MPI_Datatype rtype, int root, MPI_Comm comm),
     (sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm), comm,
     sbuf == MPI_IN_PLACE ? tbytes(rcounts[comm_rank(comm)], rtype) : tbytes(scount, stype))
COLL(MPI_Scatter,
     (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
      int root, MPI_Comm comm),
     (sbuf, scount, stype, rbuf, rcount, rtype, root, comm), comm,
     rbuf == MPI_IN_PLACE ? tbytes(scount, stype) : tbytes(rcount, rtype))
COLL(MPI_Scatterv,
     (const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype, void *rbuf,
      int rcount, MPI_Datatype rtype, int root, MPI_Comm comm),
     (sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm), comm,
     rbuf == MPI_IN_PLACE ? tbytes(scounts[comm_rank(comm)], stype) : tbytes(rcount, rtype))
COLL(MPI_Allgather,
     (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
      MPI_Comm comm),
     (sbuf, scount, stype, rbuf, rcount, rtype, comm), comm,
     sbuf == MPI_IN_PLACE ? tbytes(rcount, rtype) : tbytes(scount, stype))
COLL(MPI_Allgatherv,
     (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
      const int displs[], MPI_Datatype rtype, MPI_Comm comm),
     (sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm), comm,
     sbuf == MPI_IN_PLACE ? tbytes(rcounts[comm_rank(comm)], rtype) : tbytes(scount, stype))
COLL(MPI_Alltoall,
     (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
      MPI_Comm comm),
     (sbuf, scount, stype, rbuf, rcount, rtype, comm), comm,
     (uint64_t)comm_size(comm) *
         (sbuf == MPI_IN_PLACE ? tbytes(rcount, rtype) : tbytes(scount, stype)))
COLL(MPI_Alltoallv,
     (const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void *rbuf,
      const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm),
     (sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm), comm,
     sbuf == MPI_IN_PLACE ? tbytes_sum(rcounts, comm_size(comm), rtype)
                          : tbytes_sum(scounts, comm_size(comm), stype))
COLL(MPI_Reduce_scatter,
     (const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype t, MPI_Op op, MPI_Comm comm),
     (sbuf, rbuf, rcounts, t, op, comm), comm, tbytes_sum(rcounts, comm_size(comm), t))
COLL(MPI_Reduce_scatter_block,
     (const void *sbuf, void *rbuf, int rcount, MPI_Datatype t, MPI_Op op, MPI_Comm comm),
     (sbuf, rbuf, rcount, t, op, comm), comm, (uint64_t)comm_size(comm) * tbytes(rcount, t))
COLL(MPI_Ibarrier, (MPI_Comm comm, MPI_Request *req), (comm, req), comm, 0)
COLL(MPI_Ibcast, (void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm, MPI_Request *req),
     (buf, count, t, root, comm, req), comm, tbytes(count, t))
COLL(MPI_Ireduce,
     (const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, int root, MPI_Comm comm,
      MPI_Request *req),
     (sbuf, rbuf, count, t, op, root, comm, req), comm, tbytes(count, t))
COLL(MPI_Iallreduce,
     (const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
      MPI_Request *req),
     (sbuf, rbuf, count, t, op, comm, req), comm, tbytes(count, t))
COLL(MPI_Iallgather,
     (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
      MPI_Comm comm, MPI_Request *req),
     (sbuf, scount, stype, rbuf, rcount, rtype, comm, req), comm,
     sbuf == MPI_IN_PLACE ? tbytes(rcount, rtype) : tbytes(scount, stype))
COLL(MPI_Ialltoall,
     (const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
      MPI_Comm comm, MPI_Request *req),
     (sbuf, scount, stype, rbuf, rcount, rtype, comm, req), comm,
     (uint64_t)comm_size(comm) *
         (sbuf == MPI_IN_PLACE ? tbytes(rcount, rtype) : tbytes(scount, stype)))

/* ---- start, end, regions ---------------------------------------------------------- */

int MPI_Init(int *argc, char ***argv)
{
    uint64_t t0 = NOW();
    int rc = PMPI_Init(argc, argv);

    if (rc == MPI_SUCCESS) {
        hpml__prof_start(t0);
        if (ON)
            rec_time(RA, PROF_MPI_Init, t0, NOW());
    }
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    uint64_t t0 = NOW();
    int rc = PMPI_Init_thread(argc, argv, required, provided);

    if (rc == MPI_SUCCESS) {
        hpml__prof_start(t0);
        if (ON)
            rec_time(RA, PROF_MPI_Init, t0, NOW());
    }
    return rc;
}

int MPI_Finalize(void)
{
    if (ON)
        hpml__prof_flush("final", 0);
    return PMPI_Finalize();
}

int MPI_Abort(MPI_Comm comm, int errorcode)
{
    if (ON)
        hpml__prof_flush("abort", 0);
    return PMPI_Abort(comm, errorcode);
}

int MPI_Pcontrol(const int level, ...)
{
    const char *name = NULL;

    if (!ON)
        return MPI_SUCCESS;
    if (level == PROF_PCONTROL_BEGIN) { /* its name, the one argument it takes */
        va_list ap;

        va_start(ap, level);
        name = va_arg(ap, const char *);
        va_end(ap);
    }
    hpml__prof_pcontrol(level, name);
    return MPI_SUCCESS;
}
