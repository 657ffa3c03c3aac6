/*
 * Checking mode: ranks that call a collective with different arguments (count, root,
 * or a different collective altogether) all get HPML_ERR_MISMATCH with a message naming
 * the operation and the ranks, instead of hanging; matching calls still work before and
 * after. An alarm turns a hang into a failure.
 *
 * hpml-test: ranks=1 2 3 4
 * hpml-test: mpich-ranks=1 2 3
 * hpml-test: timeout=120
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll_util.h"

static void matching(hpml_comm_t *c, const char *when)
{
    int32_t x = 1;

    HPMLT_CALL(hpml_allreduce(HPML_IN_PLACE, &x, 1, HPML_I32, HPML_SUM, c));
    HPMLT_CHECK(x == hpmlt_size(), "%s: matching allreduce gave %d", when, x);
}

int main(int argc, char **argv)
{
    hpml_comm_config_t cfg = {.check = 1, .ranks_per_node = 0};
    hpml_comm_t *c = NULL, *e = NULL;
    int rank, p;
    float buf[400] = {0};

    hpmlt_init(&argc, &argv, "test_check");
    alarm(100); /* a hang becomes a failure, well before the runner's timeout */
    rank = hpmlt_rank();
    p = hpmlt_size();
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, &cfg, &c));
    if (c == NULL)
        return hpmlt_finish();
    matching(c, "first");
    if (p > 1) {
        /* Rank 1 asks for a different count. */
        int rc = hpml_allreduce(HPML_IN_PLACE, buf, rank == 1 ? 200 : 100, HPML_F32, HPML_SUM, c);
        tu_expect_mismatch(rc, "allreduce count 100 vs 200", "rank 1 called allreduce(count=200");
        tu_expect_mismatch(rc, "allreduce count 100 vs 200 (field)", "disagree on count");
        matching(c, "after a count mismatch");

        /* Different collectives: rank 0 bcasts, the others allreduce. */
        rc = rank == 0 ? hpml_bcast(buf, 10, HPML_F32, 0, c)
                       : hpml_allreduce(HPML_IN_PLACE, buf, 10, HPML_F32, HPML_SUM, c);
        tu_expect_mismatch(rc, "bcast vs allreduce", "rank 0 called bcast(count=10, f32, root=0)");
        matching(c, "after a collective mismatch");

        /* Different roots. */
        rc = hpml_bcast(buf, 4, HPML_F32, rank == p - 1 ? p - 1 : 0, c);
        tu_expect_mismatch(rc, "bcast roots", "disagree on root");

        /* Nonblocking operations are checked when they are submitted. */
        {
            hpml_request_t *r = NULL;
            rc = hpml_iallreduce(HPML_IN_PLACE, buf, rank == 0 ? 3 : 4, HPML_F32, HPML_MAX, c, &r);
            tu_expect_mismatch(rc, "iallreduce count", "iallreduce(count=3, f32, max)");
            HPMLT_OK(r == NULL);
        }
        /* Different dtype in reduce_scatter / allgather. */
        rc = hpml_allgather(HPML_IN_PLACE, buf, 2, rank == 1 ? HPML_I32 : HPML_F32, c);
        tu_expect_mismatch(rc, "allgather dtype", "disagree on dtype");
        /* A node sync where the others call a barrier. */
        rc = rank == 0 ? hpml_comm_node_sync(c) : hpml_barrier(c);
        tu_expect_mismatch(rc, "node_sync vs barrier", "rank 0 called node_sync(count=0");
        matching(c, "at the end");
    }
    hpml_comm_destroy(c);

    /* HPML_CHECK=1 from the environment. */
    setenv("HPML_CHECK", "1", 1);
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &e));
    unsetenv("HPML_CHECK");
    if (e != NULL) {
        matching(e, "env");
        if (p > 1) {
            int rc =
                hpml_reduce(HPML_IN_PLACE, buf, 5, HPML_F32, rank == 0 ? HPML_SUM : HPML_MAX, 0, e);
            tu_expect_mismatch(rc, "reduce op via HPML_CHECK", "disagree on op");
        }
        hpml_comm_destroy(e);
    }
    alarm(0);
    return hpmlt_finish();
}
