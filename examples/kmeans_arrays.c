/*
 * K-Means on your own arrays: each rank holds a block of rows in memory (here three
 * well-separated blobs, made on the spot) and calls hpml_kmeans_fit, which is collective
 * over the communicator. The centroids come back on every rank, the labels for this
 * rank's rows. The check: every blob is one cluster.
 *
 *   cc kmeans_arrays.c $(pkg-config --cflags --libs hpml) -o kmeans_arrays
 *   mpirun -np 3 ./kmeans_arrays
 */
#include <hpml/hpml.h>
#include <stdio.h>
#include <stdlib.h>

#define ROWS_PER_RANK 1000
#define COLS          2
#define K             3

int main(int argc, char **argv)
{
    static const double centre[K][COLS] = {{0, 0}, {10, 0}, {0, 10}};
    hpml_comm_t *comm = NULL;
    hpml_kmeans_params_t p;
    hpml_kmeans_result_t res = {0};
    double *X = NULL;
    int rank, rc, bad = 0, seen[K][K] = {{0}};

    MPI_Init(&argc, &argv);
    rc = hpml_comm_create(MPI_COMM_WORLD, NULL, &comm);
    X = malloc(ROWS_PER_RANK * COLS * sizeof(*X));
    if (rc != 0 || X == NULL) {
        fprintf(stderr, "%s\n", rc ? hpml_last_error() : "out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    rank = hpml_comm_rank(comm);
    /* Row i of this rank belongs to blob (i % K), scattered within +-1 of its centre. */
    srand(1234u + (unsigned)rank);
    for (int i = 0; i < ROWS_PER_RANK; i++)
        for (int j = 0; j < COLS; j++)
            X[i * COLS + j] = centre[i % K][j] + 2.0 * rand() / RAND_MAX - 1.0;

    hpml_kmeans_params_default(&p);
    p.k = K;
    p.seed = 7;
    rc = hpml_kmeans_fit(comm, &p, HPML_F64, X, ROWS_PER_RANK, COLS, &res);
    if (rc != 0) {
        fprintf(stderr, "rank %d: hpml_kmeans_fit: %s\n", rank, hpml_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Every blob's rows share one label, and the blobs have different labels. */
    for (int i = 0; i < ROWS_PER_RANK; i++)
        seen[i % K][res.labels[i]] = 1;
    MPI_Allreduce(MPI_IN_PLACE, seen, K * K, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    for (int b = 0; b < K; b++) {
        int n = 0;
        for (int c = 0; c < K; c++) {
            n += seen[b][c];
            bad += seen[b][c] && seen[(b + 1) % K][c];
        }
        bad += n != 1;
    }
    if (rank == 0) {
        const double *C = res.centroids;
        printf("kmeans: %zu rows, k=%d, %d iterations, inertia %.1f, centroids", res.total_rows, K,
               res.n_iter, res.inertia);
        for (int c = 0; c < K; c++)
            printf(" (%.2f, %.2f)", C[c * COLS], C[c * COLS + 1]);
        printf(": %s\n", bad ? "blobs MIXED" : "one cluster per blob");
    }
    hpml_kmeans_result_free(&res);
    hpml_comm_destroy(comm);
    free(X);
    MPI_Finalize();
    return bad != 0;
}
