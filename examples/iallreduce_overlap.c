/*
 * A nonblocking allreduce overlapped with computation, as a trainer overlaps the gradient
 * allreduce with the rest of backward: start hpml_iallreduce, compute, poll hpml_test
 * now and then, and hpml_wait for the result. hpml's progress thread moves the data
 * while this thread computes when MPI gives MPI_THREAD_MULTIPLE; otherwise the MPI
 * library progresses it inside hpml_test and hpml_wait.
 *
 *   cc iallreduce_overlap.c $(pkg-config --cflags --libs hpml) -o iallreduce_overlap
 *   mpirun -np 2 ./iallreduce_overlap
 */
#include <hpml/hpml.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define COUNT (1 << 20)
#define WORK  (1 << 22)

int main(int argc, char **argv)
{
    hpml_comm_t *comm = NULL;
    hpml_request_t *req = NULL;
    double *grad = NULL, *want = NULL, acc = 0, t0, t_wait;
    int provided, rank, size, rc, done = 0, polls = 0, bad = 0;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    rc = hpml_comm_create(MPI_COMM_WORLD, NULL, &comm);
    grad = malloc(COUNT * sizeof(*grad));
    want = malloc(COUNT * sizeof(*want));
    if (rc != 0 || grad == NULL || want == NULL) {
        fprintf(stderr, "%s\n", rc ? hpml_last_error() : "out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    rank = hpml_comm_rank(comm);
    size = hpml_comm_size(comm);
    for (size_t i = 0; i < COUNT; i++)
        grad[i] = 0.5 * (double)rank + (double)(i % 13);
    MPI_Allreduce(grad, want, COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);

    /* AVG: the sum divided by the number of ranks, as gradients are averaged. */
    rc = hpml_iallreduce(HPML_IN_PLACE, grad, COUNT, HPML_F64, HPML_AVG, comm, &req);
    for (long i = 0; rc == 0 && i < WORK; i++) {
        acc += 1.0 / (double)(i + 1); /* the "rest of backward" */
        if (!done && i % 65536 == 0) {
            rc = hpml_test(req, &done); /* a completed request is freed by hpml_test */
            polls++;
        }
    }
    t0 = MPI_Wtime();
    if (rc == 0 && !done)
        rc = hpml_wait(req);
    t_wait = MPI_Wtime() - t0;
    if (rc != 0) {
        fprintf(stderr, "rank %d: hpml_iallreduce: %s\n", rank, hpml_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* hpml scales the sum by 1/size: equal to the quotient within a rounding. */
    for (size_t i = 0; i < COUNT; i++)
        bad += fabs(grad[i] - want[i] / size) > 1e-14 * fabs(want[i]);
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("iallreduce of %d doubles over %d ranks, overlapped with compute (%.3f), "
               "%s after %d polls, then %.6f s in hpml_wait: %s\n",
               COUNT, size, acc, done ? "complete" : "still running", polls, t_wait,
               bad ? "DIFFERS from MPI_Allreduce / ranks" : "equal to MPI_Allreduce / ranks");
    hpml_comm_destroy(comm);
    free(grad);
    free(want);
    MPI_Finalize();
    return bad != 0;
}
