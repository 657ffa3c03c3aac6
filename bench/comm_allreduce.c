/*
 * Side-by-side allreduce benchmark: the MPI library's MPI_Allreduce against hpml's
 * automatic allreduce (and optionally every hpml algorithm), f32 sum, in one run.
 * Each sample times a batch of back-to-back calls (at least ~200 µs of work) and takes
 * the maximum over ranks; the table shows the median sample per size, the ratio
 * MPI/hpml, and bus bandwidth (nccl-tests: 2(p−1)/p · bytes / time). It also measures
 * the memory bandwidth of the machine (memcpy of 64 MiB, all ranks at once).
 *
 *   bench/run_comm_allreduce.sh openmpi|mpich [-np 2] [--all]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpml/comm.h"

#define SAMPLES 15

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* algo < 0: MPI_Allreduce on the duplicated communicator. */
static double measure(hpml_comm_t *c, int algo, float *x, float *y, size_t n)
{
    MPI_Comm mc = hpml_comm_mpi(c);
    double s[SAMPLES], t, one;
    int batch;

    /* Warm up and size the batch from one timed call. */
    for (int i = 0; i < 3; i++) {
        if (algo < 0)
            MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, mc);
        else
            hpml_allreduce_algo((hpml_algo_t)algo, x, y, n, HPML_F32, HPML_SUM, c);
    }
    /* Batch size from the fastest of 3 groups of 8 calls (a single call can be stretched
     * by a descheduled peer). */
    one = 1e30;
    for (int g = 0; g < 3; g++) {
        MPI_Barrier(mc);
        t = MPI_Wtime();
        for (int i = 0; i < 8; i++) {
            if (algo < 0)
                MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, mc);
            else
                hpml_allreduce_algo((hpml_algo_t)algo, x, y, n, HPML_F32, HPML_SUM, c);
        }
        t = (MPI_Wtime() - t) / 8;
        if (t < one)
            one = t;
    }
    MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_DOUBLE, MPI_MAX, mc);
    batch = one > 2e-4 ? 1 : (int)(2e-4 / (one > 1e-7 ? one : 1e-7));
    if (batch > 2000)
        batch = 2000;
    for (int k = 0; k < SAMPLES; k++) {
        MPI_Barrier(mc);
        t = MPI_Wtime();
        for (int i = 0; i < batch; i++) {
            if (algo < 0)
                MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, mc);
            else
                hpml_allreduce_algo((hpml_algo_t)algo, x, y, n, HPML_F32, HPML_SUM, c);
        }
        s[k] = (MPI_Wtime() - t) / batch;
        MPI_Allreduce(MPI_IN_PLACE, &s[k], 1, MPI_DOUBLE, MPI_MAX, mc);
    }
    qsort(s, SAMPLES, sizeof(double), cmp_double);
    return s[SAMPLES / 2];
}

static double membw(MPI_Comm mc)
{
    size_t bytes = (size_t)64 << 20;
    char *a = malloc(bytes), *b = malloc(bytes);
    double best = 1e30, t;

    memset(a, 1, bytes);
    memset(b, 2, bytes);
    for (int k = 0; k < 5; k++) {
        MPI_Barrier(mc);
        t = MPI_Wtime();
        memcpy(b, a, bytes);
        t = MPI_Wtime() - t;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, mc);
        if (t < best)
            best = t;
    }
    free(a);
    free(b);
    return (double)bytes / best; /* bytes copied per second per rank */
}

int main(int argc, char **argv)
{
    hpml_comm_t *c;
    int all = argc > 1 && strcmp(argv[1], "--all") == 0;
    size_t maxn = (size_t)16 << 18; /* 16 MiB of f32 */
    float *x, *y;
    int rank, size;
    double bw;

    MPI_Init(&argc, &argv);
    if (hpml_comm_create(MPI_COMM_WORLD, NULL, &c) != 0) {
        fprintf(stderr, "hpml_comm_create: %s\n", hpml_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    rank = hpml_comm_rank(c);
    size = hpml_comm_size(c);
    x = malloc(maxn * 4);
    y = malloc(maxn * 4);
    for (size_t i = 0; i < maxn; i++)
        x[i] = (float)(i % 1000);
    memset(y, 0, maxn * 4);
    bw = membw(hpml_comm_mpi(c));
    if (rank == 0) {
        printf("# allreduce f32 sum, %d ranks, %d node(s); memcpy %.2f GB/s per rank "
               "(all ranks copying at once)\n",
               size, hpml_comm_nodes(c), bw / 1e9);
        printf("# %10s %12s %12s %8s %10s %10s %-8s", "bytes", "mpi_us", "hpml_us", "ratio",
               "mpi_busbw", "hpml_busbw", "algo");
        if (all)
            for (int a = 1; a <= HPML_ALGO_HIER; a++)
                printf(" %12s", hpml_algo_name((hpml_algo_t)a));
        printf("\n");
    }
    for (size_t bytes = 4; bytes <= maxn * 4; bytes *= 4) {
        size_t n = bytes / 4;
        double tm = measure(c, -1, x, y, n), th = measure(c, HPML_ALGO_AUTO, x, y, n);
        double f = 2.0 * (size - 1) / size * (double)bytes / 1e9;

        if (rank == 0)
            printf("  %10zu %12.2f %12.2f %8.2f %10.2f %10.2f %-8s", bytes, tm * 1e6, th * 1e6,
                   tm / th, f / tm, f / th,
                   hpml_algo_name(hpml_algo_selected(c, HPML_COLL_ALLREDUCE, bytes)));
        if (all)
            for (int a = 1; a <= HPML_ALGO_HIER; a++) {
                double ta = measure(c, a, x, y, n);
                if (rank == 0)
                    printf(" %12.2f", ta * 1e6);
            }
        if (rank == 0) {
            printf("\n");
            fflush(stdout);
        }
    }
    free(x);
    free(y);
    hpml_comm_destroy(c);
    MPI_Finalize();
    return 0;
}
