/*
 * Side-by-side bcast timing: MPI_Bcast against each hpml bcast algorithm, interleaved
 * in one run so that both see the same machine state. Per size and implementation:
 * `rounds` rounds of `iters` timed calls (barrier before each call, as osu_bcast does);
 * a call's time is the slowest rank's; reported: the median and the minimum over all
 * calls, and MPI_Bcast's time over the better of chain and shm (">1" = hpml faster).
 *
 *   mpicc.openmpi -O2 -Iinclude tests/perf/bcast_vs_mpi.c build/commB/lib/libhpml.a \
 *       $(pkg-config --libs openblas lapacke) -lz -lm -o build/commB/bcast_vs_mpi
 *   mpirun.openmpi --allow-run-as-root --bind-to none -np 2 build/commB/bcast_vs_mpi [-r] [sizes]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpml/comm.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    static const hpml_algo_t algos[] = {HPML_ALGO_MPI, HPML_ALGO_BINOMIAL,
                                        HPML_ALGO_SCATTER_ALLGATHER, HPML_ALGO_CHAIN,
                                        HPML_ALGO_SHM};
    enum { NIMPL = 1 + sizeof(algos) / sizeof(algos[0]) };
    size_t sizes[16] = {4096, 65536, 262144, 1 << 20, 4 << 20, 16 << 20};
    size_t nsizes = 6;
    int rank, p, provided, rounds = 5;
    hpml_comm_t *comm;
    char *buf;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    /* Optional arguments: -r (every implementation uses one buffer from
     * hpml_comm_alloc_shared, registered in the node segment), then the sizes to run
     * (bytes, at most 16 MiB). */
    int registered = argc > 1 && strcmp(argv[1], "-r") == 0, first = 1 + registered;
    if (argc > first) {
        nsizes = 0;
        for (int i = first; i < argc && nsizes < 16; i++) {
            size_t v = strtoull(argv[i], NULL, 10);
            if (v > 0 && v <= (16 << 20))
                sizes[nsizes++] = v;
        }
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    if (hpml_comm_create(MPI_COMM_WORLD, NULL, &comm) != 0)
        MPI_Abort(MPI_COMM_WORLD, 1);
    buf = registered ? hpml_comm_alloc_shared(comm, 16 << 20) : hpml_malloc(16 << 20);
    if (buf == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    memset(buf, 1, 16 << 20);
    if (rank == 0) {
        char v[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(v, &len);
        printf("# bcast, %d ranks, root 0, %s buffer, %d rounds; time = slowest rank's\n", p,
               registered ? "registered (hpml_comm_alloc_shared)" : "private (hpml_malloc)",
               rounds);
        printf("# %.*s\n", (int)strcspn(v, "\n"), v);
        printf("%10s %12s %12s %12s %12s %12s %12s %8s\n", "bytes", "MPI_Bcast", "hpml:mpi",
               "binomial", "scat+allg", "chain", "shm", "MPI/best");
    }
    for (size_t s = 0; s < nsizes; s++) {
        size_t n = sizes[s];
        int iters = n <= (256 << 10) ? 200 : n <= (4 << 20) ? 40 : 10;
        int total = iters * rounds;
        double *t[NIMPL], med[NIMPL], mn[NIMPL];

        for (int k = 0; k < NIMPL; k++)
            t[k] = calloc((size_t)total, sizeof(double));
        for (int r = 0; r < rounds; r++) {
            for (int k = 0; k < NIMPL; k++) {
                for (int i = -2; i < iters; i++) { /* 2 warm-up calls */
                    double t0, dt, mx;

                    MPI_Barrier(MPI_COMM_WORLD);
                    t0 = MPI_Wtime();
                    if (k == 0)
                        MPI_Bcast(buf, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
                    else
                        hpml_bcast_algo(algos[k - 1], buf, n, HPML_U8, 0, comm);
                    dt = MPI_Wtime() - t0;
                    MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                    if (i >= 0)
                        t[k][r * iters + i] = mx;
                }
            }
        }
        for (int k = 0; k < NIMPL; k++) {
            qsort(t[k], (size_t)total, sizeof(double), cmp_double);
            med[k] = t[k][total / 2];
            mn[k] = t[k][0];
            free(t[k]);
        }
        if (rank == 0) {
            double best = med[4] < med[5] ? med[4] : med[5]; /* chain or shm */
            double bestmin = mn[4] < mn[5] ? mn[4] : mn[5];
            printf("%10zu", n);
            for (int k = 0; k < NIMPL; k++)
                printf(" %10.1fus", med[k] * 1e6);
            printf(" %7.2fx  median\n%10s", med[0] / best, "");
            for (int k = 0; k < NIMPL; k++)
                printf(" %10.1fus", mn[k] * 1e6);
            printf(" %7.2fx  min\n", mn[0] / bestmin);
        }
    }
    if (registered)
        hpml_comm_free_shared(comm, buf);
    else
        hpml_free(buf);
    hpml_comm_destroy(comm);
    MPI_Finalize();
    return 0;
}
