/* Multi-rank test harness: failures summed across ranks, rank 0 reports. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "hpml/core.h"

static const char *name = "test";
static long checks, failures;
static int rank, size;

void hpmlt_init(int *argc, char ***argv, const char *test_name)
{
    int provided;

    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    name = test_name;
}

int hpmlt_check(int ok, const char *file, int line, const char *expr, const char *fmt, ...)
{
    va_list ap;
    char msg[512];

    checks++;
    if (ok)
        return 1;
    failures++;
    /* Cap the noise: a broken kernel fails thousands of elements the same way. */
    if (failures <= 20) {
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        fprintf(stderr, "[%s r%d/%d] FAIL %s:%d: %s %s\n", name, rank, size, file, line, expr, msg);
    } else if (failures == 21) {
        fprintf(stderr, "[%s r%d/%d] further failures not shown\n", name, rank, size);
    }
    return 0;
}

int hpmlt_finish(void)
{
    long local[2] = {checks, failures}, total[2] = {0, 0};

    MPI_Allreduce(local, total, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s: %ld checks, %ld failures on %d ranks\n", name, total[0], total[1], size);
    MPI_Finalize();
    /* A test that checked nothing is a broken test. */
    return (total[1] == 0 && total[0] > 0) ? 0 : 1;
}

int hpmlt_rank(void)
{
    return rank;
}

int hpmlt_size(void)
{
    return size;
}

long hpmlt_failures(void)
{
    return failures;
}
