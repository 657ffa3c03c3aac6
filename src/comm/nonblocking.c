/*
 * Nonblocking collectives (hpml_iallreduce, hpml_ibcast, hpml_test, hpml_wait).
 *
 * With MPI_THREAD_MULTIPLE a progress thread owns a second hpml communicator (its own
 * duplicate of the user's communicator, node segment and selection table) and runs the
 * queued operations one after another with hpml's own algorithms, so they progress
 * while the caller computes. The thread sleeps on a condition variable when the queue is
 * empty. Without MPI_THREAD_MULTIPLE (or with HPML_PROGRESS=mpi) each operation is
 * started as an MPI nonblocking collective on a duplicate communicator (f16/bf16 with
 * hpml's kernels as user-defined MPI ops) and progressed by the MPI library, which on
 * most builds means inside hpml_test/hpml_wait. Either way operations complete in
 * submission order: a request is reported done only when every earlier one is.
 * hpml_iallreduce_apply runs hpml_allreduce_apply in the progress thread; in MPI mode it
 * reduces into a temporary buffer and applies the function to every element when the
 * MPI requests complete.
 *
 * The struct hpml_progress also holds the checking mode's duplicate communicator, so the
 * per-communicator state of the nonblocking engine and of the checking mode is created
 * lazily and torn down in one place, hpml__progress_destroy.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/coll_internal.h"
#include "comm/comm_internal.h"
#include "comm/shm_internal.h"
#include "comm/xfer.h"
#include "core/settings_internal.h"

enum { MODE_NONE = 0, MODE_THREAD, MODE_MPI };

struct hpml_request {
    struct hpml_progress *pg;  /* NULL once the communicator is destroyed */
    struct hpml_request *next; /* live requests in submission order */
    int kind;                  /* HPML__KIND_IALLREDUCE, _IALLREDUCE_APPLY or _IBCAST */
    const void *sendbuf;
    void *buf;
    hpml_apply_fn fn; /* apply: the function and its argument */
    void *ctx;
    void *tmp; /* apply, MPI mode: the reduced values before fn */
    size_t count;
    hpml_dtype_t dtype;
    hpml_op_t op;
    int root;
    int done, result;
    char err[256];     /* detail of a failure in the progress thread */
    MPI_Request *mreq; /* MPI mode: one request per chunk */
    int nmreq;
};

struct hpml_progress {
    hpml_comm_t *comm;
    MPI_Comm check_comm; /* checking mode; valid when check_ready */
    int check_ready;
    int mode;

    pthread_mutex_t lock;
    pthread_cond_t work;              /* the thread waits for requests or stop */
    pthread_cond_t done;              /* callers wait for completions */
    struct hpml_request *head, *tail; /* live requests, submission order */
    struct hpml_request *run;         /* thread: next request to execute */
    int stop;
    _Atomic int waiting;        /* callers blocked in hpml_wait */
    _Atomic uint64_t polled_ns; /* last hpml_test (hpml_time_ns) */
    pthread_t thread;
    hpml_comm_t *tcomm; /* the thread's own communicator */

    MPI_Comm mcomm; /* MPI mode: duplicate for the nonblocking collectives */
};

static int get_pg(hpml_comm_t *comm, struct hpml_progress **out)
{
    struct hpml_progress *pg = comm->progress;

    if (pg == NULL) {
        if ((pg = calloc(1, sizeof(*pg))) == NULL)
            return HPML_ERR_NOMEM;
        pg->comm = comm;
        pg->check_comm = pg->mcomm = MPI_COMM_NULL;
        pthread_mutex_init(&pg->lock, NULL);
        pthread_cond_init(&pg->work, NULL);
        pthread_cond_init(&pg->done, NULL);
        comm->progress = pg;
    }
    *out = pg;
    return 0;
}

int hpml__check_comm(hpml_comm_t *comm, MPI_Comm *out)
{
    struct hpml_progress *pg;
    int rc;

    if ((rc = get_pg(comm, &pg)) != 0)
        return rc;
    if (!pg->check_ready) {
        HPML__MPI(MPI_Comm_dup(comm->comm, &pg->check_comm));
        HPML__MPI(MPI_Comm_set_errhandler(pg->check_comm, MPI_ERRORS_RETURN));
        pg->check_ready = 1;
    }
    *out = pg->check_comm;
out:
    return rc;
}

/* ---- progress thread -------------------------------------------------------------- */

static int execute(struct hpml_request *r, hpml_comm_t *c)
{
    if (r->kind == HPML__KIND_IBCAST)
        return hpml_bcast(r->buf, r->count, r->dtype, r->root, c);
    if (r->kind == HPML__KIND_IALLREDUCE_APPLY)
        return hpml__allreduce_apply_run(r->sendbuf, r->buf, r->count, r->dtype, r->op, r->fn,
                                         r->ctx, c);
    return hpml_allreduce(r->sendbuf, r->buf, r->count, r->dtype, r->op, c);
}

/* Does a caller wait for a result now: blocked in hpml_wait, or polling hpml_test (one
 * in the last millisecond)? Otherwise it is computing on our core (hpml__shm_wait). */
static int caller_waits(void *arg)
{
    struct hpml_progress *pg = arg;
    uint64_t polled = atomic_load_explicit(&pg->polled_ns, memory_order_relaxed);

    return atomic_load_explicit(&pg->waiting, memory_order_relaxed) > 0 ||
           (int64_t)(hpml_time_ns() - polled) < 1000000;
}

static void *thread_main(void *arg)
{
    struct hpml_progress *pg = arg;
    struct hpml_request *r;
    int rc;

    hpml__shm_urgent = caller_waits;
    hpml__shm_urgent_arg = pg;

    pthread_mutex_lock(&pg->lock);
    for (;;) {
        /* Requests with nothing to move are complete on submission: skip them. */
        while (pg->run != NULL && pg->run->done)
            pg->run = pg->run->next;
        while (pg->run == NULL && !pg->stop) {
            pthread_cond_wait(&pg->work, &pg->lock);
            while (pg->run != NULL && pg->run->done)
                pg->run = pg->run->next;
        }
        if (pg->run == NULL)
            break; /* stop, and the queue is drained */
        r = pg->run;
        pg->run = r->next;
        pthread_mutex_unlock(&pg->lock);

        hpml_clear_error();
        rc = execute(r, pg->tcomm);

        pthread_mutex_lock(&pg->lock);
        if (rc != 0)
            snprintf(r->err, sizeof(r->err), "%s", hpml_last_error());
        r->result = rc;
        r->done = 1;
        pthread_cond_broadcast(&pg->done);
    }
    pthread_mutex_unlock(&pg->lock);
    return NULL;
}

/* ---- MPI mode ----------------------------------------------------------------------- */

static int mpi_start(struct hpml_progress *pg, struct hpml_request *r)
{
    size_t es = hpml_dtype_size(r->dtype), maxc, n, nch;
    MPI_Datatype mdt = MPI_BYTE;
    MPI_Op mop = MPI_OP_NULL;
    int rc = 0;

    if (r->kind != HPML__KIND_IBCAST &&
        (rc = hpml__mpi_reduce_types(r->dtype, r->op, &mdt, &mop)) != 0)
        return rc;
    if (r->kind == HPML__KIND_IALLREDUCE_APPLY && (r->tmp = hpml_malloc(r->count * es)) == NULL)
        return HPML_ERR_NOMEM;
    maxc = hpml__max_chunk_elems(r->dtype, pg->comm);
    nch = hpml__div_up(r->count, maxc);
    if ((r->mreq = malloc(nch * sizeof(MPI_Request))) == NULL)
        return HPML_ERR_NOMEM;
    for (size_t off = 0; off < r->count; off += n) {
        n = hpml__min(maxc, r->count - off);
        char *b = (char *)(r->tmp ? r->tmp : r->buf) + off * es;

        if (r->kind == HPML__KIND_IBCAST) {
            HPML__MPI(
                MPI_Ibcast(b, (int)(n * es), MPI_BYTE, r->root, pg->mcomm, &r->mreq[r->nmreq]));
        } else {
            const void *s = r->sendbuf == HPML_IN_PLACE || r->sendbuf == r->buf
                                ? MPI_IN_PLACE
                                : (const char *)r->sendbuf + off * es;
            HPML__MPI(MPI_Iallreduce(s, b, (int)n, mdt, mop, pg->mcomm, &r->mreq[r->nmreq]));
        }
        r->nmreq++;
    }
out:
    /* Chunks already started still complete (waited for in mpi_finish). */
    return rc;
}

/* Complete r (wait = 1) or see whether it completed (wait = 0). */
static void mpi_progress(struct hpml_request *r, int wait)
{
    int flag = 1, rc;

    if (r->done)
        return;
    if (r->nmreq > 0) {
        /* One at a time: completed requests become MPI_REQUEST_NULL, which test as done.
         * (MPI_Testall with MPI_STATUSES_IGNORE trips GCC's bounds check on MPICH.) */
        rc = MPI_SUCCESS;
        for (int i = 0; i < r->nmreq && rc == MPI_SUCCESS; i++) {
            int f = 1;

            rc = wait ? MPI_Wait(&r->mreq[i], MPI_STATUS_IGNORE)
                      : MPI_Test(&r->mreq[i], &f, MPI_STATUS_IGNORE);
            flag &= f;
        }
        if (rc != MPI_SUCCESS) {
            r->result = hpml__mpi_error(rc, "MPI_Wait/MPI_Test");
            snprintf(r->err, sizeof(r->err), "%s", hpml_last_error());
            flag = 1;
        }
    }
    if (!flag)
        return;
    if (r->result == 0 && r->kind != HPML__KIND_IBCAST && r->op == HPML_AVG)
        r->result = hpml_reduce_finish(r->tmp ? r->tmp : r->buf, r->count, r->dtype, r->op,
                                       r->pg->comm->size);
    if (r->result == 0 && r->kind == HPML__KIND_IALLREDUCE_APPLY) {
        hpml_clear_error();
        if ((r->result = r->fn(r->ctx, 0, r->tmp, r->buf, r->count)) != 0)
            snprintf(r->err, sizeof(r->err), "%s", hpml_last_error());
    }
    hpml_free(r->tmp);
    r->tmp = NULL;
    free(r->mreq);
    r->mreq = NULL;
    r->nmreq = 0;
    r->done = 1;
}

/* ---- submission ------------------------------------------------------------------ */

static int start_engine(hpml_comm_t *comm, struct hpml_progress *pg)
{
    int provided = MPI_THREAD_SINGLE, rc = 0;

    MPI_Query_thread(&provided);
    pg->mode = provided == MPI_THREAD_MULTIPLE ? MODE_THREAD : MODE_MPI;
    if (comm->set.set[HPML__S_PROGRESS] && comm->set.value[HPML__S_PROGRESS] == 1) /* "mpi" */
        pg->mode = MODE_MPI;
    if (pg->mode == MODE_THREAD) {
        hpml_comm_config_t cfg = {.check = 0, .ranks_per_node = comm->ranks_per_node};

        if ((rc = hpml_comm_create(comm->comm, &cfg, &pg->tcomm)) != 0)
            return rc;
        if (pthread_create(&pg->thread, NULL, thread_main, pg) != 0) {
            hpml_comm_destroy(pg->tcomm);
            pg->tcomm = NULL;
            return hpml_set_error(HPML_ERR_STATE, "cannot start the progress thread");
        }
    } else {
        HPML__MPI(MPI_Comm_dup(comm->comm, &pg->mcomm));
        HPML__MPI(MPI_Comm_set_errhandler(pg->mcomm, MPI_ERRORS_RETURN));
    }
    HPML_LOG(HPML_LOG_DEBUG, "nonblocking collectives: %s",
             pg->mode == MODE_THREAD ? "progress thread" : "MPI nonblocking collectives");
out:
    if (rc != 0)
        pg->mode = MODE_NONE;
    return rc;
}

static int submit(hpml_comm_t *comm, struct hpml_request *proto, hpml_request_t **out)
{
    struct hpml_progress *pg;
    struct hpml_request *r = NULL;
    int rc;

    if ((rc = get_pg(comm, &pg)) != 0)
        return rc;
    if (pg->mode == MODE_NONE && (rc = start_engine(comm, pg)) != 0)
        return rc;
    if ((r = calloc(1, sizeof(*r))) == NULL)
        return HPML_ERR_NOMEM;
    *r = *proto;
    r->pg = pg;
    /* Nothing to move: complete at once, but still in order behind earlier requests. */
    if (r->count == 0 || comm->size == 1) {
        if (r->kind == HPML__KIND_IALLREDUCE_APPLY && r->count > 0) {
            hpml_clear_error();
            if ((r->result = r->fn(r->ctx, 0, r->sendbuf, r->buf, r->count)) != 0)
                snprintf(r->err, sizeof(r->err), "%s", hpml_last_error());
        } else if (r->kind == HPML__KIND_IALLREDUCE && r->count > 0) {
            if (r->sendbuf != HPML_IN_PLACE && r->sendbuf != r->buf)
                memcpy(r->buf, r->sendbuf, r->count * hpml_dtype_size(r->dtype));
            r->result = hpml_reduce_finish(r->buf, r->count, r->dtype, r->op, 1);
        }
        r->done = 1; /* wait/test still report it only after its predecessors */
    } else if (pg->mode == MODE_MPI) {
        if ((rc = mpi_start(pg, r)) != 0) {
            r->result = rc;
            snprintf(r->err, sizeof(r->err), "%s", hpml_last_error());
        }
    }

    pthread_mutex_lock(&pg->lock);
    if (pg->tail != NULL)
        pg->tail->next = r;
    else
        pg->head = r;
    pg->tail = r;
    if (pg->mode == MODE_THREAD && !r->done) {
        if (pg->run == NULL)
            pg->run = r;
        pthread_cond_signal(&pg->work);
    }
    pthread_mutex_unlock(&pg->lock);
    *out = r;
    return 0;
}

int hpml_iallreduce(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                    hpml_op_t op, hpml_comm_t *comm, hpml_request_t **req)
{
    struct hpml_request proto = {.kind = HPML__KIND_IALLREDUCE,
                                 .sendbuf = sendbuf,
                                 .buf = recvbuf,
                                 .count = count,
                                 .dtype = dtype,
                                 .op = op,
                                 .root = -1};
    int rc;

    if (req == NULL || comm == NULL || (unsigned)dtype >= HPML_DTYPE_COUNT ||
        (unsigned)op >= HPML_OP_COUNT)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_iallreduce: invalid request pointer, "
                                              "communicator, dtype or op");
    *req = NULL;
    if (count > 0 && (sendbuf == NULL || recvbuf == NULL))
        return hpml_set_error(HPML_ERR_INVAL, "hpml_iallreduce: NULL buffer");
    if (comm->check &&
        (rc = hpml__check(comm, HPML__KIND_IALLREDUCE, count, (int)dtype, (int)op, -1)) != 0)
        return rc;
    return submit(comm, &proto, req);
}

int hpml_iallreduce_apply(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                          hpml_op_t op, hpml_apply_fn fn, void *ctx, hpml_comm_t *comm,
                          hpml_request_t **req)
{
    struct hpml_request proto = {.kind = HPML__KIND_IALLREDUCE_APPLY,
                                 .sendbuf = sendbuf,
                                 .buf = recvbuf,
                                 .count = count,
                                 .dtype = dtype,
                                 .op = op,
                                 .root = -1,
                                 .fn = fn,
                                 .ctx = ctx};
    int rc;

    if (req == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_iallreduce_apply: NULL request pointer");
    *req = NULL;
    if ((rc = hpml__allreduce_apply_check("hpml_iallreduce_apply", sendbuf, recvbuf, count, dtype,
                                          op, fn, comm)) != 0)
        return rc;
    if (comm->check &&
        (rc = hpml__check(comm, HPML__KIND_IALLREDUCE_APPLY, count, (int)dtype, (int)op, -1)) != 0)
        return rc;
    return submit(comm, &proto, req);
}

int hpml_ibcast(void *buf, size_t count, hpml_dtype_t dtype, int root, hpml_comm_t *comm,
                hpml_request_t **req)
{
    struct hpml_request proto = {0};
    int rc;

    if (req == NULL || comm == NULL || (unsigned)dtype >= HPML_DTYPE_COUNT)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_ibcast: invalid request pointer, "
                                              "communicator or dtype");
    *req = NULL;
    if (root < 0 || root >= comm->size)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_ibcast: root %d outside [0, %d)", root,
                              comm->size);
    if (count > 0 && buf == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_ibcast: NULL buffer");
    if (comm->check &&
        (rc = hpml__check(comm, HPML__KIND_IBCAST, count, (int)dtype, -1, root)) != 0)
        return rc;
    proto.kind = HPML__KIND_IBCAST;
    proto.buf = buf;
    proto.count = count;
    proto.dtype = dtype;
    proto.op = HPML_SUM;
    proto.root = root;
    return submit(comm, &proto, req);
}

/* ---- completion -------------------------------------------------------------------- */

/* Is r complete, and every request before it? MPI mode progresses them (blocking when
 * wait). Called with pg->lock held in thread mode. */
static int in_order_done(struct hpml_progress *pg, struct hpml_request *r, int wait)
{
    for (struct hpml_request *q = pg->head; q != NULL; q = q->next) {
        if (pg->mode == MODE_MPI)
            mpi_progress(q, wait);
        if (!q->done)
            return 0;
        if (q == r)
            return 1;
    }
    return r->done; /* not in the list: cannot happen for a live request */
}

/* Unlink and free a completed request; returns its result (and restores its detail). */
static int release(struct hpml_progress *pg, struct hpml_request *r)
{
    int rc = r->result;

    if (pg != NULL) {
        struct hpml_request **pp = &pg->head, *prev = NULL;

        while (*pp != NULL && *pp != r) {
            prev = *pp;
            pp = &(*pp)->next;
        }
        if (*pp == r) {
            *pp = r->next;
            if (pg->tail == r)
                pg->tail = prev;
            /* A request complete on submission may still be the thread's next one. */
            if (pg->run == r)
                pg->run = r->next;
        }
    }
    if (rc != 0 && r->err[0] != '\0')
        hpml_set_error(rc, "%s", r->err);
    hpml_free(r->tmp);
    free(r->mreq);
    free(r);
    return rc;
}

int hpml_test(hpml_request_t *req, int *done)
{
    struct hpml_progress *pg;
    int ok;

    if (req == NULL || done == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_test: NULL argument");
    pg = req->pg;
    if (pg == NULL) {
        *done = 1;
        return release(NULL, req);
    }
    atomic_store_explicit(&pg->polled_ns, hpml_time_ns(), memory_order_relaxed);
    pthread_mutex_lock(&pg->lock);
    ok = in_order_done(pg, req, 0);
    if (ok) {
        int rc = release(pg, req);

        pthread_mutex_unlock(&pg->lock);
        *done = 1;
        return rc;
    }
    pthread_mutex_unlock(&pg->lock);
    *done = 0;
    return 0;
}

int hpml_wait(hpml_request_t *req)
{
    struct hpml_progress *pg;
    int rc;

    if (req == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_wait: NULL request");
    pg = req->pg;
    if (pg == NULL)
        return release(NULL, req);
    pthread_mutex_lock(&pg->lock);
    atomic_fetch_add_explicit(&pg->waiting, 1, memory_order_relaxed);
    while (!in_order_done(pg, req, 1))
        pthread_cond_wait(&pg->done, &pg->lock); /* thread mode only: MPI mode blocked */
    atomic_fetch_sub_explicit(&pg->waiting, 1, memory_order_relaxed);
    rc = release(pg, req);
    pthread_mutex_unlock(&pg->lock);
    return rc;
}

void hpml__progress_destroy(hpml_comm_t *comm)
{
    struct hpml_progress *pg;

    if (comm == NULL || (pg = comm->progress) == NULL)
        return;
    if (pg->mode == MODE_THREAD) {
        /* The thread drains the queue before it stops: destroy waits for outstanding
         * operations, and the peers' threads run the same ones. */
        pthread_mutex_lock(&pg->lock);
        pg->stop = 1;
        pthread_cond_signal(&pg->work);
        pthread_mutex_unlock(&pg->lock);
        atomic_fetch_add_explicit(&pg->waiting, 1, memory_order_relaxed); /* no yielding */
        pthread_join(pg->thread, NULL);
        hpml_comm_destroy(pg->tcomm);
    } else if (pg->mode == MODE_MPI) {
        for (struct hpml_request *q = pg->head; q != NULL; q = q->next)
            mpi_progress(q, 1);
        MPI_Comm_free(&pg->mcomm);
    }
    /* Requests the caller has not waited for yet stay valid: wait/test on them just
     * returns their result. */
    for (struct hpml_request *q = pg->head; q != NULL; q = q->next)
        q->pg = NULL;
    if (pg->check_ready)
        MPI_Comm_free(&pg->check_comm);
    pthread_cond_destroy(&pg->work);
    pthread_cond_destroy(&pg->done);
    pthread_mutex_destroy(&pg->lock);
    free(pg);
    comm->progress = NULL;
}
