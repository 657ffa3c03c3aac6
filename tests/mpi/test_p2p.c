/*
 * hpml's point-to-point messages against MPI's: a ring where every rank sends to the next
 * and receives from the previous, blocking (even ranks send first) and nonblocking (the
 * receives posted after the sends), with counts split by HPML_MAX_MSG_BYTES=4099 into many
 * pieces, every dtype's size; the data each rank receives is compared with what the same
 * exchange through MPI_Sendrecv gives. Messages of one tag arrive in order; two tags
 * received in the opposite order of their sends; hpml_p2p_test polled to completion;
 * hpml_comm_split's parts against MPI_Comm_split's; invalid arguments.
 *
 * hpml-test: ranks=1 2 3
 * hpml-test: timeout=60
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hpml/hpml.h"

static unsigned char *pattern(size_t bytes, int rank, int salt)
{
    unsigned char *p = malloc(bytes ? bytes : 1);

    if (p == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (size_t i = 0; i < bytes; i++)
        p[i] = (unsigned char)(i * 131u + (size_t)rank * 17u + (size_t)salt * 7u);
    return p;
}

/* One ring exchange of count elements of dt: through hpml (blocking or not), then MPI. */
static void ring(hpml_comm_t *c, hpml_dtype_t dt, size_t count, int nonblocking)
{
    const int P = hpmlt_size(), me = hpmlt_rank(), next = (me + 1) % P, prev = (me + P - 1) % P;
    const size_t bytes = count * hpml_dtype_size(dt);
    unsigned char *s;
    unsigned char *r, *ref;

    if (P == 1 && !nonblocking) /* a blocking send to oneself waits for its receive */
        return;
    s = pattern(bytes, me, (int)count);
    r = calloc(bytes + 1, 1);
    ref = calloc(bytes + 1, 1);

    if (nonblocking) {
        hpml_p2p_request_t *q[2] = {NULL, NULL};
        HPMLT_CALL(hpml_isend(s, count, dt, next, 5, c, &q[0]));
        HPMLT_CALL(hpml_irecv(r, count, dt, prev, 5, c, &q[1]));
        HPMLT_CALL(hpml_p2p_waitall(2, q));
        HPMLT_OK(q[0] == NULL && q[1] == NULL);
    } else if (me % 2 == 0) {
        HPMLT_CALL(hpml_send(s, count, dt, next, 5, c));
        HPMLT_CALL(hpml_recv(r, count, dt, prev, 5, c));
    } else {
        HPMLT_CALL(hpml_recv(r, count, dt, prev, 5, c));
        HPMLT_CALL(hpml_send(s, count, dt, next, 5, c));
    }
    MPI_Sendrecv(s, (int)bytes, MPI_BYTE, next, 9, ref, (int)bytes, MPI_BYTE, prev, 9,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    HPMLT_CHECK(memcmp(r, ref, bytes + 1) == 0, "%s ring of %zu %s: received bytes differ",
                nonblocking ? "nonblocking" : "blocking", count, hpml_dtype_name(dt));
    free(s);
    free(r);
    free(ref);
}

/* Two messages of tag 1 then one of tag 2 to the next rank; the receiver takes tag 2
 * first (posted before tag 1's), then tag 1's in order. */
static void ordering(hpml_comm_t *c)
{
    const int P = hpmlt_size(), me = hpmlt_rank(), next = (me + 1) % P, prev = (me + P - 1) % P;
    int a[3] = {me * 10 + 1, me * 10 + 2, me * 10 + 3}, got[3] = {-1, -1, -1}, done = 0;
    hpml_p2p_request_t *sq[3], *rq[3];
    long polls = 0;

    HPMLT_CALL(hpml_irecv(&got[2], 1, HPML_I32, prev, 2, c, &rq[2]));
    HPMLT_CALL(hpml_irecv(&got[0], 1, HPML_I32, prev, 1, c, &rq[0]));
    HPMLT_CALL(hpml_irecv(&got[1], 1, HPML_I32, prev, 1, c, &rq[1]));
    for (int i = 0; i < 3; i++)
        HPMLT_CALL(hpml_isend(&a[i], 1, HPML_I32, next, i == 2 ? 2 : 1, c, &sq[i]));
    HPMLT_CALL(hpml_p2p_waitall(3, sq));
    while (!done && polls++ < 100000000L)
        HPMLT_CALL(hpml_p2p_test(rq[2], &done));
    HPMLT_OK(done);
    HPMLT_CALL(hpml_p2p_waitall(2, rq));
    HPMLT_CHECK(got[0] == prev * 10 + 1 && got[1] == prev * 10 + 2 && got[2] == prev * 10 + 3,
                "got %d %d %d from rank %d", got[0], got[1], got[2], prev);
}

/* Even and odd ranks, keys reversing the order: each part's size and rank as MPI's. */
static void split(hpml_comm_t *c)
{
    const int me = hpmlt_rank();
    hpml_comm_t *part = NULL;
    MPI_Comm ref;
    int rs, rr;

    HPMLT_CALL(hpml_comm_split(c, me % 2, -me, &part));
    MPI_Comm_split(MPI_COMM_WORLD, me % 2, -me, &ref);
    MPI_Comm_size(ref, &rs);
    MPI_Comm_rank(ref, &rr);
    if (part != NULL) {
        int v = me, sum = -1, want = 0;
        HPMLT_CHECK(hpml_comm_size(part) == rs && hpml_comm_rank(part) == rr,
                    "part: size %d rank %d, MPI's %d %d", hpml_comm_size(part),
                    hpml_comm_rank(part), rs, rr);
        HPMLT_CALL(hpml_allreduce(&v, &sum, 1, HPML_I32, HPML_SUM, part));
        MPI_Allreduce(&v, &want, 1, MPI_INT, MPI_SUM, ref);
        HPMLT_CHECK(sum == want, "sum over the part %d, MPI's %d", sum, want);
    }
    hpml_comm_destroy(part);
    MPI_Comm_free(&ref);
    HPMLT_OK(hpml_comm_split(c, -1, 0, &part) == HPML_ERR_INVAL && part == NULL);
}

static void invalid(hpml_comm_t *c)
{
    int v = 0;
    hpml_p2p_request_t *q = (hpml_p2p_request_t *)&v;

    HPMLT_OK(hpml_send(&v, 1, HPML_I32, hpmlt_size(), 0, c) == HPML_ERR_INVAL);
    HPMLT_OK(hpml_recv(&v, 1, HPML_I32, -1, 0, c) == HPML_ERR_INVAL);
    HPMLT_OK(hpml_send(&v, 1, HPML_I32, 0, HPML_TAG_MAX + 1, c) == HPML_ERR_INVAL);
    HPMLT_OK(hpml_send(NULL, 1, HPML_I32, 0, 0, c) == HPML_ERR_INVAL);
    HPMLT_OK(hpml_isend(&v, 1, (hpml_dtype_t)99, 0, 0, c, &q) == HPML_ERR_INVAL && q == NULL);
    HPMLT_OK(hpml_irecv(&v, 1, HPML_I32, 0, -1, c, &q) == HPML_ERR_INVAL && q == NULL);
    HPMLT_OK(hpml_p2p_wait(NULL) == 0);
}

int main(int argc, char **argv)
{
    static const hpml_dtype_t dts[] = {HPML_U8, HPML_F16, HPML_F32, HPML_F64};
    static const size_t counts[] = {0, 1, 1000, 20011};
    hpml_comm_t *c = NULL;

    setenv("HPML_MAX_MSG_BYTES", "4099", 1);
    hpmlt_init(&argc, &argv, "test_p2p");
    alarm(50);
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &c));
    for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++)
        for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
            for (int nb = 0; nb < 2; nb++)
                ring(c, dts[d], counts[k], nb);
    ordering(c);
    split(c);
    invalid(c);
    hpml_comm_destroy(c);
    return hpmlt_finish();
}
