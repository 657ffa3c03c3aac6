/*
 * How well the shared-memory allreduce's store-mode picker (src/comm/store_mode.c,
 * hpml__shm_mode_pick) follows the machine. Three communicators, each with its own node
 * segment: the picker's (VAR unset), plain stores (VAR=0) and streaming stores (VAR=1),
 * where VAR is HPML_SHM_NT (the pipeline buffers' knob, the default) or HPML_SHM_OUT_NT
 * (the output's knob, which the picker measures from 4 MiB at 2 ranks and 32 MiB of cache
 * and only from a size's 64th call: with a GAP that makes a block warm up again, it keeps
 * the output plain; GAP 0 gives it long runs). A round gives each of them, in rotating
 * order, a gap of GAP 4-byte allreduces (other sizes, as in an OSU-style sweep) and then
 * a block of 60 allreduces of BYTES; a block's time is the median of its last 40 calls
 * (each the slowest rank's). Reported: the median block time of each, the blocks in
 * which the picker was more than 1.25x (and 1.1x) slower than the better fixed mode of
 * the same round, and every round's three block times (µs) in order
 * picker/plain/streaming.
 *
 *   mpicc.openmpi -O2 -Iinclude tests/perf/store_mode.c build/openmpi/lib/libhpml.a \
 *       $(pkg-config --libs openblas lapacke) -lz -lm -pthread -o build/openmpi/store_mode
 *   mpirun.openmpi --allow-run-as-root --bind-to core -np 2 build/openmpi/store_mode \
 *       [BYTES [ROUNDS [GAP [VAR]]]]    (defaults 1048576 200 20000 HPML_SHM_NT)
 */
#define _GNU_SOURCE /* setenv */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpml/comm.h"

#define BLOCK   60
#define COUNTED 40 /* the last calls of a block */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* argv[i] as a whole number in [lo, hi], or the default; -1 when malformed. */
static long arg(int argc, char **argv, int i, long def, long lo, long hi)
{
    char *end;
    long v;

    if (i >= argc)
        return def;
    v = strtol(argv[i], &end, 10);
    return *argv[i] != '\0' && *end == '\0' && v >= lo && v <= hi ? v : -1;
}

int main(int argc, char **argv)
{
    static const char *modes[3] = {NULL, "0", "1"};
    const char *var = argc > 4 ? argv[4] : "HPML_SHM_NT";
    char names[3][64];
    long bytes, rounds, gap;
    hpml_comm_t *c[3];
    float *x, *y, one = 1, out;
    double *block, t[BLOCK];
    size_t n;
    int rank;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    bytes = arg(argc, argv, 1, 1L << 20, 65536, 1L << 28);
    rounds = arg(argc, argv, 2, 200, 1, 10000);
    gap = arg(argc, argv, 3, 20000, 0, 10000000);
    if (bytes < 0 || rounds < 0 || gap < 0 || bytes % 4 != 0 || argc > 5 ||
        (strcmp(var, "HPML_SHM_NT") != 0 && strcmp(var, "HPML_SHM_OUT_NT") != 0)) {
        if (rank == 0)
            fprintf(stderr, "usage: store_mode [BYTES [ROUNDS [GAP [VAR]]]]: BYTES a multiple "
                            "of 4 from 65536 to 268435456, ROUNDS 1-10000, GAP 0-10000000, VAR "
                            "HPML_SHM_NT or HPML_SHM_OUT_NT\n");
        MPI_Finalize();
        return 2;
    }
    snprintf(names[0], sizeof(names[0]), "picker");
    snprintf(names[1], sizeof(names[1]), "plain (%s=0)", var);
    snprintf(names[2], sizeof(names[2]), "streaming (%s=1)", var);
    n = (size_t)bytes / 4;
    x = malloc((size_t)bytes);
    y = malloc((size_t)bytes);
    block = malloc(sizeof(double) * 3 * (size_t)rounds);
    if (x == NULL || y == NULL || block == NULL) {
        fprintf(stderr, "store_mode: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(i % 1000);
    for (int k = 0; k < 3; k++) {
        /* The mode is read when the communicator's node segment is made: at its first
         * shared-memory collective. */
        if (modes[k] != NULL)
            setenv(var, modes[k], 1);
        else
            unsetenv(var);
        if (hpml_comm_create(MPI_COMM_WORLD, NULL, &c[k]) != 0 ||
            hpml_allreduce(x, y, n, HPML_F32, HPML_SUM, c[k]) != 0) {
            fprintf(stderr, "store_mode: %s\n", hpml_last_error());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    unsetenv(var);
    for (long r = 0; r < rounds; r++)
        for (int j = 0; j < 3; j++) {
            int k = (int)((r + j) % 3);
            double m;

            for (long i = 0; i < gap; i++)
                hpml_allreduce(&one, &out, 1, HPML_F32, HPML_SUM, c[k]);
            for (int i = 0; i < BLOCK; i++) {
                MPI_Barrier(hpml_comm_mpi(c[k]));
                t[i] = MPI_Wtime();
                hpml_allreduce(x, y, n, HPML_F32, HPML_SUM, c[k]);
                t[i] = MPI_Wtime() - t[i];
                MPI_Allreduce(MPI_IN_PLACE, &t[i], 1, MPI_DOUBLE, MPI_MAX, hpml_comm_mpi(c[k]));
            }
            qsort(t + BLOCK - COUNTED, COUNTED, sizeof(double), cmp_double);
            m = (t[BLOCK - COUNTED / 2 - 1] + t[BLOCK - COUNTED / 2]) / 2;
            block[k * rounds + r] = m;
        }
    if (rank == 0) {
        long slow = 0, slower = 0;
        double *sorted = malloc(sizeof(double) * (size_t)rounds);

        for (long r = 0; r < rounds; r++) {
            double p = block[r], fixed = block[rounds + r] < block[2 * rounds + r]
                                             ? block[rounds + r]
                                             : block[2 * rounds + r];

            slow += p > 1.25 * fixed;
            slower += p > 1.1 * fixed;
        }
        printf("# allreduce f32 sum of %ld bytes, blocks of %d calls after %ld 4-byte calls, "
               "%ld rounds\n",
               bytes, BLOCK, gap, rounds);
        for (int k = 0; k < 3 && sorted != NULL; k++) {
            memcpy(sorted, block + k * rounds, sizeof(double) * (size_t)rounds);
            qsort(sorted, (size_t)rounds, sizeof(double), cmp_double);
            printf("%-30s median block %8.1f us  (quartiles %8.1f %8.1f)\n", names[k],
                   sorted[rounds / 2] * 1e6, sorted[rounds / 4] * 1e6,
                   sorted[3 * rounds / 4] * 1e6);
        }
        printf("picker slower than the better fixed mode: by 1.25x in %ld of %ld blocks, "
               "by 1.1x in %ld\n",
               slow, rounds, slower);
        for (long r = 0; r < rounds; r++)
            printf("%s%.0f/%.0f/%.0f", r % 8 ? "  " : "\n", block[r] * 1e6, block[rounds + r] * 1e6,
                   block[2 * rounds + r] * 1e6);
        printf("\n");
        free(sorted);
    }
    for (int k = 0; k < 3; k++)
        hpml_comm_destroy(c[k]);
    free(block);
    free(x);
    free(y);
    MPI_Finalize();
    return 0;
}
