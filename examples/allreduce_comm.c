/*
 * hpml's allreduce on a communicator of your own: the ranks are split into two halves
 * (even and odd world ranks), each half gets an hpml communicator over its MPI
 * communicator, and the sum is checked against MPI_Allreduce on the same communicator.
 *
 *   cc allreduce_comm.c $(pkg-config --cflags --libs hpml) -o allreduce_comm
 *   mpirun -np 3 ./allreduce_comm
 */
#include <hpml/hpml.h>
#include <stdio.h>
#include <stdlib.h>

#define COUNT 100000

int main(int argc, char **argv)
{
    MPI_Comm half = MPI_COMM_NULL;
    hpml_comm_t *comm = NULL;
    float *x = NULL, *want = NULL;
    int world, rank, size, rc, bad = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world);
    MPI_Comm_split(MPI_COMM_WORLD, world % 2, world, &half);
    MPI_Comm_rank(half, &rank);
    MPI_Comm_size(half, &size);

    /* hpml duplicates `half`: the caller keeps it and frees it. */
    rc = hpml_comm_create(half, NULL, &comm);
    x = malloc(COUNT * sizeof(*x));
    want = malloc(COUNT * sizeof(*want));
    if (rc != 0 || x == NULL || want == NULL) {
        fprintf(stderr, "rank %d: %s\n", world, rc ? hpml_last_error() : "out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < COUNT; i++)
        x[i] = (float)((i + (size_t)world) % 7);
    MPI_Allreduce(x, want, COUNT, MPI_FLOAT, MPI_SUM, half);

    /* In place, as a gradient would be: every rank ends with the sum. */
    rc = hpml_allreduce(HPML_IN_PLACE, x, COUNT, HPML_F32, HPML_SUM, comm);
    if (rc != 0) {
        fprintf(stderr, "rank %d: hpml_allreduce: %s\n", world, hpml_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < COUNT; i++)
        bad += x[i] != want[i];
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (world == 0)
        printf("allreduce over %d rank%s (half %d): %s\n", size, size == 1 ? "" : "s", world % 2,
               bad ? "DIFFERS from MPI_Allreduce" : "equal to MPI_Allreduce");

    hpml_comm_destroy(comm);
    MPI_Comm_free(&half);
    free(x);
    free(want);
    MPI_Finalize();
    return bad != 0;
}
