/*
 * Side-by-side allreduce benchmark: the MPI library's MPI_Allreduce against hpml's
 * automatic allreduce (and optionally every hpml algorithm), f32 sum, in one run.
 * Each sample times a batch of back-to-back calls (about 200 µs of work) and takes the
 * maximum over ranks; by default all MPI samples of a size, then all hpml samples (warm
 * caches, as OSU's osu_allreduce), with --interleave alternating MPI and hpml batches.
 * The table shows the median sample per size, the median of the per-pair
 * ratios MPI/hpml, and bus bandwidth (nccl-tests: 2(p−1)/p · bytes / time). It also measures
 * the memory bandwidth of the machine (memcpy of 64 MiB, all ranks at once).
 *
 *   bench/run_comm_allreduce.sh openmpi|mpich [NP] [--all] [--interleave] [--min BYTES]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpml/comm.h"

#define SAMPLES 21

static int interleave;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void call(hpml_comm_t *c, int algo, float *x, float *y, size_t n)
{
    if (algo < 0)
        MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, hpml_comm_mpi(c));
    else
        hpml_allreduce_algo((hpml_algo_t)algo, x, y, n, HPML_F32, HPML_SUM, c);
}

/* Seconds per call of a batch (maximum over ranks). algo < 0: MPI_Allreduce. */
static double batch_time(hpml_comm_t *c, int algo, float *x, float *y, size_t n, int batch)
{
    MPI_Comm mc = hpml_comm_mpi(c);
    double t;

    MPI_Barrier(mc);
    t = MPI_Wtime();
    for (int i = 0; i < batch; i++)
        call(c, algo, x, y, n);
    t = (MPI_Wtime() - t) / batch;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, mc);
    return t;
}

/* Median times of algorithms a and b: all samples of a, then all of b (OSU style, warm
 * caches), or with --interleave in alternation (a, b, a, b, ...: each batch starts with
 * caches left by the other implementation). *ratio is the median of per-pair ratios. */
static void measure2(hpml_comm_t *c, int a, int b, float *x, float *y, size_t n, double *ta,
                     double *tb, double *ratio)
{
    double sa[SAMPLES], sb[SAMPLES], r[SAMPLES], one = 1e30;
    int batch;

    for (int i = 0; i < 3; i++) {
        call(c, a, x, y, n);
        call(c, b, x, y, n);
    }
    /* Batch size from the fastest of 3 groups of 8 calls (a single call can be stretched
     * by a descheduled peer): about 200 µs per batch. */
    for (int g = 0; g < 3; g++) {
        double t = batch_time(c, a, x, y, n, 8);
        if (t < one)
            one = t;
    }
    batch = one > 2e-4 ? 1 : (int)(2e-4 / (one > 1e-7 ? one : 1e-7));
    if (batch > 2000)
        batch = 2000;
    if (interleave) {
        for (int k = 0; k < SAMPLES; k++) {
            sa[k] = batch_time(c, a, x, y, n, batch);
            sb[k] = batch_time(c, b, x, y, n, batch);
        }
    } else {
        for (int k = 0; k < SAMPLES; k++)
            sa[k] = batch_time(c, a, x, y, n, batch);
        for (int i = 0; i < 3; i++)
            call(c, b, x, y, n);
        for (int k = 0; k < SAMPLES; k++)
            sb[k] = batch_time(c, b, x, y, n, batch);
    }
    for (int k = 0; k < SAMPLES; k++)
        r[k] = sa[k] / sb[k];
    qsort(sa, SAMPLES, sizeof(double), cmp_double);
    qsort(sb, SAMPLES, sizeof(double), cmp_double);
    qsort(r, SAMPLES, sizeof(double), cmp_double);
    *ta = sa[SAMPLES / 2];
    *tb = sb[SAMPLES / 2];
    *ratio = r[SAMPLES / 2];
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

static int usage(int rank, const char *bad)
{
    if (rank == 0)
        fprintf(stderr,
                "comm_allreduce: %s\n"
                "usage: comm_allreduce [--all] [--interleave] [--min BYTES] [--max BYTES] "
                "[--rounds N]\n"
                "  sizes are powers of 4 times --min (default 4) up to --max (default and "
                "largest 16777216); N from 1 to 100\n",
                bad);
    return 2;
}

/* A whole number in [lo, hi] written in full, or -1. */
static long number(const char *s, long lo, long hi)
{
    char *end;
    long v;

    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    v = strtol(s, &end, 10);
    return *end == '\0' && v >= lo && v <= hi ? v : -1;
}

int main(int argc, char **argv)
{
    hpml_comm_t *c;
    int all = 0, rounds = 1, nsizes = 0, bad = 0;
    size_t maxn = (size_t)16 << 18; /* 16 MiB of f32 */
    size_t minb = 4, maxb = maxn * 4;
    double *ratios = NULL;
    float *x, *y;
    int rank, size;
    double bw;
    char why[256] = "";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 1; i < argc && !bad; i++) {
        long v = 0;

        if (strcmp(argv[i], "--all") == 0) {
            all = 1;
        } else if (strcmp(argv[i], "--interleave") == 0) {
            interleave = 1;
        } else if (strcmp(argv[i], "--min") == 0 || strcmp(argv[i], "--max") == 0 ||
                   strcmp(argv[i], "--rounds") == 0) {
            int r = argv[i][2] == 'r';

            v = number(i + 1 < argc ? argv[i + 1] : NULL, r ? 1 : 4, r ? 100 : (long)(maxn * 4));
            if (v < 0) {
                snprintf(why, sizeof(why), "%s needs a whole number from %d to %ld, not '%s'",
                         argv[i], r ? 1 : 4, r ? 100L : (long)(maxn * 4),
                         i + 1 < argc ? argv[i + 1] : "");
                bad = 1;
            } else if (r) {
                rounds = (int)v;
            } else if (argv[i][3] == 'i') {
                minb = (size_t)v;
            } else {
                maxb = (size_t)v;
            }
            i++;
        } else {
            snprintf(why, sizeof(why), "unknown option '%s'", argv[i]);
            bad = 1;
        }
    }
    if (!bad && minb % 4 != 0) {
        snprintf(why, sizeof(why), "--min %zu is not a whole number of f32 (4 bytes)", minb);
        bad = 1;
    }
    if (!bad && minb > maxb) {
        snprintf(why, sizeof(why), "--min %zu is above --max %zu", minb, maxb);
        bad = 1;
    }
    if (bad) {
        MPI_Finalize();
        return usage(rank, why);
    }
    for (size_t b = minb; b <= maxb; b *= 4)
        nsizes++;
    if (hpml_comm_create(MPI_COMM_WORLD, NULL, &c) != 0) {
        fprintf(stderr, "hpml_comm_create: %s\n", hpml_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    size = hpml_comm_size(c);
    x = malloc(maxn * 4);
    y = malloc(maxn * 4);
    ratios = malloc(sizeof(double) * (size_t)(rounds * nsizes));
    if (x == NULL || y == NULL || ratios == NULL) {
        fprintf(stderr, "comm_allreduce: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < maxn; i++)
        x[i] = (float)(i % 1000);
    memset(y, 0, maxn * 4);
    for (int round = 0; round < rounds; round++) {
        int k = 0;

        bw = membw(hpml_comm_mpi(c));
        if (rank == 0) {
            if (rounds > 1)
                printf("# round %d of %d\n", round + 1, rounds);
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
        for (size_t bytes = minb; bytes <= maxb; bytes *= 4, k++) {
            size_t n = bytes / 4;
            double tm, th, ratio, f = 2.0 * (size - 1) / size * (double)bytes / 1e9;

            measure2(c, -1, HPML_ALGO_AUTO, x, y, n, &tm, &th, &ratio);
            ratios[k * rounds + round] = ratio;
            if (rank == 0)
                printf("  %10zu %12.2f %12.2f %8.2f %10.2f %10.2f %-8s", bytes, tm * 1e6, th * 1e6,
                       ratio, f / tm, f / th,
                       hpml_algo_name(hpml_algo_selected(c, HPML_COLL_ALLREDUCE, bytes)));
            if (all)
                for (int a = 1; a <= HPML_ALGO_HIER; a++) {
                    double ta, tm2, r2;

                    measure2(c, -1, a, x, y, n, &tm2, &ta, &r2);
                    if (rank == 0)
                        printf(" %12.2f", ta * 1e6);
                }
            if (rank == 0) {
                printf("\n");
                fflush(stdout);
            }
        }
    }
    if (rank == 0 && rounds > 1) {
        int k = 0;

        printf("# ratio MPI/hpml over %d rounds\n# %10s %8s %8s %8s\n", rounds, "bytes", "median",
               "lowest", "highest");
        for (size_t bytes = minb; bytes <= maxb; bytes *= 4, k++) {
            double *r = ratios + k * rounds;

            qsort(r, (size_t)rounds, sizeof(double), cmp_double);
            printf("  %10zu %8.2f %8.2f %8.2f\n", bytes,
                   rounds % 2 ? r[rounds / 2] : (r[rounds / 2 - 1] + r[rounds / 2]) / 2, r[0],
                   r[rounds - 1]);
        }
    }
    free(ratios);
    free(x);
    free(y);
    hpml_comm_destroy(c);
    MPI_Finalize();
    return 0;
}
