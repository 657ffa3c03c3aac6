/*
 * An MPI program for tests/cli/prof.sh, run under libhpml-prof.so with known traffic:
 *   prof_prog inplace N   allreduce of N doubles in place and not, checked against the
 *                         closed form; prints "inplace ok <sum>" on rank 0 (exit 1 if wrong)
 *   prof_prog abort       a barrier, then rank 1 calls MPI_Abort(3) while the others wait
 *   prof_prog exit        a barrier, then rank 1 calls exit(4) without MPI_Finalize
 *   prof_prog spin        ranks 0 and 1 ping-pong 8 bytes every millisecond until killed
 *   prof_prog io DIR      each rank writes and reads DIR/io-<rank>.dat with known sizes
 *   prof_prog dup DIR     each rank writes DIR/dup-<rank>.dat (1,500 B) and reads it (680 B)
 *                         through descriptors made by dup, dup2, dup3, fcntl F_DUPFD and
 *                         F_DUPFD_CLOEXEC and openat (relative to DIR's descriptor), some
 *                         after the original was closed, and makes DIR/creat-<rank>.dat
 *                         with creat (7 B), whose second descriptor dup2 replaces, and
 *                         DIR/tmp-<rank>-XXXXXX with mkstemp (3 B), which a stream
 *                         fopens and freopens as DIR/creat-<rank>.dat (5 B)
 *   prof_prog pcontrol    5 sends from rank 0 to 1 with MPI_Pcontrol(0), then 3 with 1
 *   prof_prog steps       steps 0, 1, 2 (MPI_Pcontrol(102) after each), step s a region
 *                         "step" (MPI_Pcontrol(100, "step") ... MPI_Pcontrol(101)) of s + 1
 *                         round trips between ranks 0 and 1
 *   prof_prog irecv       receives posted with MPI_Irecv, completed out of order (2 ranks):
 *                         rank 0 sends 8, 16, 24 B (tag 1), 32 B (tag 5), 40 B (tag 6),
 *                         56, 64 B (tag 3) to rank 1 with MPI_Send; rank 1 posts 3
 *                         receives from 0 tag 1 and waits for them in reverse (3 MPI_Wait,
 *                         statuses ignored), 2 of any source and tag completed by one
 *                         MPI_Waitall, 2 of tag 3 completed by MPI_Testsome, 20 of tag 4
 *                         (100 to 119 B) completed by one MPI_Waitall; then rank 1
 *                         sends 48 B (tag 2, MPI_Isend + MPI_Wait) to rank 0's MPI_Irecv,
 *                         completed by MPI_Wait with a status
 */
#define _GNU_SOURCE /* dup3 */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int inplace(int rank, int size, int n)
{
    double *a = malloc((size_t)n * sizeof(double)), *b = malloc((size_t)n * sizeof(double));
    double sum = 0;
    int bad = 0;

    if (a == NULL || b == NULL)
        return 1;
    for (int i = 0; i < n; i++)
        a[i] = rank * 1000.0 + i;
    MPI_Allreduce(MPI_IN_PLACE, a, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++) {
        double want = 1000.0 * size * (size - 1) / 2 + (double)size * i;

        bad += a[i] != want;
        sum += a[i];
    }
    MPI_Allreduce(a, b, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    bad += memcmp(a, b, (size_t)n * sizeof(double)) != 0;
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("inplace %s %.1f\n", bad ? "WRONG" : "ok", sum);
    free(a);
    free(b);
    return bad != 0;
}

static void ping(int rank, int k)
{
    double x[1] = {0};

    for (int i = 0; i < k; i++) {
        if (rank == 0) {
            MPI_Send(x, 1, MPI_DOUBLE, 1, 7, MPI_COMM_WORLD);
            MPI_Recv(x, 1, MPI_DOUBLE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(x, 1, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(x, 1, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD);
        }
    }
}

static int io(int rank, const char *dir)
{
    char path[4096], buf[4096] = {0};
    FILE *f;
    int fd;

    snprintf(path, sizeof(path), "%s/io-%d.dat", dir, rank);
    if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
        return 1;
    for (int i = 0; i < 3; i++)
        if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
            return 1;
    if (pwrite(fd, buf, 100, 0) != 100 || fsync(fd) != 0 || close(fd) != 0)
        return 1;
    if ((fd = open(path, O_RDONLY)) < 0)
        return 1;
    for (int i = 0; i < 2; i++)
        if (read(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
            return 1;
    if (pread(fd, buf, 10, 5) != 10 || close(fd) != 0)
        return 1;
    if ((f = fopen(path, "r+")) == NULL)
        return 1;
    for (int i = 0; i < 10; i++)
        if (fwrite(buf, 1, 100, f) != 100)
            return 1;
    rewind(f);
    if (fread(buf, 1, 1000, f) != 1000 || fclose(f) != 0)
        return 1;
    return 0;
}

/* Per rank, DIR/dup-<rank>.dat: 4 opens (one by openat), 6 duplicates, 10 closes; 2 writes
 * of 1,500 B; 5 reads of 380 B and 1 pread of 300 B. DIR/creat-<rank>.dat: 2 opens (one by
 * creat), 1 write of 7 B, 2 closes (one by dup2). DIR: 1 open, 1 close. A file made by
 * mkstemp from DIR/tmp-<rank>-XXXXXX: 1 open, 1 write of 3 B, 1 close; then fopen'd and
 * freopen'd as DIR/creat-<rank>.dat: 1 fopen and 1 fclose each, and 1 fwrite of 5 B into
 * the latter. */
static int dups(int rank, const char *dir)
{
    char path[4096], cpath[4096], buf[1000] = {0};
    int fd, fd2, fd3, dfd, a, b, bad = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/dup-%d.dat", dir, rank);
    snprintf(cpath, sizeof(cpath), "%s/creat-%d.dat", dir, rank);
    if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0 || (fd2 = dup(fd)) < 0)
        return 1;
    bad |= write(fd2, buf, 1000) != 1000 || close(fd) != 0; /* the duplicate outlives fd */
    bad |= write(fd2, buf, 500) != 500 || close(fd2) != 0;
    if ((fd = open(path, O_RDONLY)) < 0 || (fd2 = fcntl(fd, F_DUPFD, 100)) < 100 ||
        (fd3 = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0 || dup3(fd, 200, O_CLOEXEC) != 200 ||
        dup2(fd, 201) != 201)
        return 1;
    bad |= close(fd) != 0 || read(fd2, buf, 100) != 100 || read(fd3, buf, 200) != 200;
    bad |= pread(200, buf, 300, 0) != 300 || read(201, buf, 50) != 50;
    bad |= close(fd2) != 0 || close(fd3) != 0 || close(200) != 0 || close(201) != 0;
    if ((dfd = open(dir, O_RDONLY | O_DIRECTORY)) < 0 ||
        (fd = openat(dfd, strrchr(path, '/') + 1, O_RDONLY)) < 0)
        return 1;
    bad |= read(fd, buf, 10) != 10 || close(fd) != 0 || close(dfd) != 0;
    if ((fd = creat(cpath, 0644)) < 0)
        return 1;
    bad |= write(fd, buf, 7) != 7 || close(fd) != 0;
    if ((a = open(path, O_RDONLY)) < 0 || (b = open(cpath, O_RDONLY)) < 0 || dup2(a, b) != b)
        return 1;
    bad |= read(b, buf, 20) != 20 || close(a) != 0 || close(b) != 0;
    snprintf(path, sizeof(path), "%s/tmp-%d-XXXXXX", dir, rank);
    if ((fd = mkstemp(path)) < 0)
        return 1;
    bad |= write(fd, buf, 3) != 3 || close(fd) != 0;
    if ((f = fopen(path, "w")) == NULL || (f = freopen(cpath, "w", f)) == NULL)
        return 1;
    bad |= fwrite(buf, 1, 5, f) != 5 || fclose(f) != 0;
    return bad;
}

/* MPI_STATUSES_IGNORE on purpose (the profiler must give such calls statuses of its own);
 * with MPICH's headers GCC takes the constant for an array of size 0. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
static int irecv(int rank)
{
    static char buf[29][128];
    MPI_Request r[29];
    MPI_Status st;
    int done = 0, out, idx[2];

    if (rank == 0) {
        const int sizes[7] = {8, 16, 24, 32, 40, 56, 64}, tags[7] = {1, 1, 1, 5, 6, 3, 3};

        for (int i = 0; i < 7; i++)
            MPI_Send(buf[i], sizes[i], MPI_BYTE, 1, tags[i], MPI_COMM_WORLD);
        for (int i = 0; i < 20; i++)
            MPI_Send(buf[9 + i], 100 + i, MPI_BYTE, 1, 4, MPI_COMM_WORLD);
        MPI_Irecv(buf[8], 64, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &r[8]);
        MPI_Wait(&r[8], &st);
        return st.MPI_SOURCE != 1 || st.MPI_TAG != 2;
    }
    if (rank != 1)
        return 0;
    for (int i = 0; i < 3; i++)
        MPI_Irecv(buf[i], 64, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &r[i]);
    for (int i = 3; i < 5; i++)
        MPI_Irecv(buf[i], 64, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r[i]);
    for (int i = 2; i >= 0; i--)
        MPI_Wait(&r[i], MPI_STATUS_IGNORE);
    MPI_Waitall(2, &r[3], MPI_STATUSES_IGNORE);
    for (int i = 5; i < 7; i++)
        MPI_Irecv(buf[i], 64, MPI_BYTE, 0, 3, MPI_COMM_WORLD, &r[i]);
    while (done < 2) {
        MPI_Testsome(2, &r[5], &out, idx, MPI_STATUSES_IGNORE);
        done += out != MPI_UNDEFINED ? out : 0;
    }
    for (int i = 9; i < 29; i++) /* more than the wrapper's 16 requests on its stack */
        MPI_Irecv(buf[i], 128, MPI_BYTE, 0, 4, MPI_COMM_WORLD, &r[i]);
    MPI_Waitall(20, &r[9], MPI_STATUSES_IGNORE);
    MPI_Isend(buf[7], 48, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &r[7]);
    MPI_Wait(&r[7], MPI_STATUS_IGNORE);
    return 0;
}
#pragma GCC diagnostic pop

int main(int argc, char **argv)
{
    int rank, size, rc = 0;
    const char *mode = argc > 1 ? argv[1] : "";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (strcmp(mode, "inplace") == 0 && argc > 2) {
        rc = inplace(rank, size, atoi(argv[2]));
    } else if (strcmp(mode, "abort") == 0) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 1)
            MPI_Abort(MPI_COMM_WORLD, 3);
        else
            MPI_Recv(NULL, 0, MPI_BYTE, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (strcmp(mode, "exit") == 0) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 1)
            exit(4);
        MPI_Recv(NULL, 0, MPI_BYTE, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (strcmp(mode, "spin") == 0) {
        struct timespec ms = {0, 1000000};

        for (int i = 0;; i++) {
            ping(rank, 1);
            if (i == 0 && rank == 0) {
                printf("ready\n");
                fflush(stdout);
            }
            nanosleep(&ms, NULL);
        }
    } else if (strcmp(mode, "io") == 0 && argc > 2) {
        rc = io(rank, argv[2]);
    } else if (strcmp(mode, "dup") == 0 && argc > 2) {
        rc = dups(rank, argv[2]);
    } else if (strcmp(mode, "pcontrol") == 0) {
        MPI_Pcontrol(0);
        ping(rank, 5);
        MPI_Pcontrol(1);
        ping(rank, 3);
    } else if (strcmp(mode, "steps") == 0) {
        for (int s = 0; s < 3; s++) {
            MPI_Pcontrol(2); /* mpiP's levels 2-4 take no argument: ignored */
            MPI_Pcontrol(100, "step");
            ping(rank, s + 1);
            MPI_Pcontrol(101);
            MPI_Pcontrol(102);
        }
    } else if (strcmp(mode, "irecv") == 0) {
        rc = irecv(rank);
    } else {
        if (rank == 0)
            fprintf(stderr, "usage: prof_prog inplace N | abort | exit | spin | io DIR | dup DIR "
                            "| pcontrol | steps | irecv\n");
        rc = 2;
    }
    MPI_Finalize();
    return rc;
}
