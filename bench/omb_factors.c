/*
 * What separates hpml bench --impl mpi from osu_allreduce, one factor at a time: OMB's
 * timing loop (barrier; per iteration MPI_Wtime, MPI_Allreduce MPI_SUM, MPI_Wtime,
 * barrier; OMB's iteration and warm-up counts) on nine set-ups in one process,
 * interleaved size by size (the order reversed every other size):
 *   world   MPI_COMM_WORLD, page-aligned buffers, MPI_CHAR (OMB)
 *   dup     a duplicate with MPI_ERRORS_RETURN (hpml bench's communicator)
 *   off64   buffers 64 bytes past a page (hpml_malloc's)
 *   schar   MPI_SIGNED_CHAR
 *   before  all three: hpml bench before it took page-aligned buffers and MPI_CHAR
 *   zeros   a send buffer of zeros (hpml bench's until 4b93140; OMB's holds bytes of 1)
 *   tmp0    the MPI's temporary buffer on a cache line: Open MPI 4.1's recursive doubling
 *   tmp48   (its allreduce up to 4 KiB at 2 ranks) mallocs one of the message's size per
 *           call, whose offset in a line follows the process's heap (it differs between
 *           runs of either program); before timing, a freed chunk of that size at offset
 *           0 (48) is put on top of malloc's per-thread cache, so each call gets it back
 *   hloop   the loop hpml bench used for --impl mpi before 2221ace, and still uses for
 *           hpml's own implementations: the call through a case's function pointer
 *           (which tests which implementation runs), each iteration's time kept in an
 *           array (--impl mpi now writes the MPI's call out, BENCH_NATIVE_LOOP)
 * For each size rank 0 prints the size and the nine Avg latencies (OMB's mean over ranks
 * of the per-rank mean), us. The thread level is the other factor: -t multiple.
 * bench/omb_factors.sh builds and runs it in rounds and compares the columns.
 *
 *   omb_factors [-m MIN:MAX] [-t single|multiple]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NSETUP  9
#define LARGE   8192 /* OMB's LARGE_MESSAGE_SIZE */
#define MAXHELD 256

static const struct setup {
    const char *name;
    int dup, off64, schar, zeros, tmp; /* tmp: -1, or the primed chunk's offset in a line */
    int hloop;
} setups[NSETUP] = {
    {"world", 0, 0, 0, 0, -1, 0}, {"dup", 1, 0, 0, 0, -1, 0},    {"off64", 0, 1, 0, 0, -1, 0},
    {"schar", 0, 0, 1, 0, -1, 0}, {"before", 1, 1, 1, 0, -1, 0}, {"zeros", 0, 0, 0, 1, -1, 0},
    {"tmp0", 0, 0, 0, 0, 0, 0},   {"tmp48", 0, 0, 0, 0, 48, 0},  {"hloop", 0, 0, 0, 0, -1, 1},
};

/* hpml bench's shape of a timed call (src/bench): a context, a case's run function
 * reached through a pointer, which picks the implementation. */
struct hctx {
    MPI_Comm comm;
    MPI_Datatype type;
    const char *s;
    char *r;
    int count, native;
};

static int hrun(struct hctx *h)
{
    if (h->native)
        return MPI_Allreduce(h->s, h->r, h->count, h->type, MPI_SUM, h->comm) == MPI_SUCCESS ? 0
                                                                                             : -1;
    return -1;
}

static int (*volatile hrun_fn)(struct hctx *) = hrun;

/* hpml bench's loop: as time_one, through hrun_fn, keeping each iteration's time in t[]
 * (iters doubles) and averaging them afterwards. */
static double time_hloop(MPI_Comm c, MPI_Datatype type, const char *s, char *r, size_t size,
                         double *t)
{
    int iters = size > LARGE ? 100 : 1000, skip = size > LARGE ? 10 : 100, p;
    struct hctx h = {c, type, s, r, (int)size, 1};
    double sum = 0, lat, avg;

    MPI_Barrier(c);
    for (int i = 0; i < iters + skip; i++) {
        double t0 = MPI_Wtime();
        int rc = hrun_fn(&h);
        double t1 = MPI_Wtime();

        if (rc != 0)
            MPI_Abort(c, 1);
        if (i >= skip)
            t[i - skip] = (t1 - t0) * 1e6;
        MPI_Barrier(c);
    }
    for (int i = 0; i < iters; i++)
        sum += t[i];
    lat = sum / iters;
    MPI_Comm_size(c, &p);
    MPI_Allreduce(&lat, &avg, 1, MPI_DOUBLE, MPI_SUM, c);
    return avg / p;
}

/* Leaves a free chunk for malloc(size) at offset `want` in a cache line on top of malloc's
 * per-thread cache (glibc's tcache is last in, first out), so that the next malloc of that
 * size returns it. Best effort: without such a chunk among 64 tries, nothing is primed. */
static void prime_malloc(size_t size, int want)
{
    void *p[64];
    int n = 0, hit = -1;

    while (n < 64 && hit < 0) {
        if ((p[n] = malloc(size)) == NULL)
            break;
        if ((uintptr_t)p[n] % 64 == (uintptr_t)want)
            hit = n;
        n++;
    }
    for (int i = 0; i < n; i++)
        if (i != hit)
            free(p[i]);
    if (hit >= 0)
        free(p[hit]);
}

static double time_one(MPI_Comm c, MPI_Datatype type, const char *s, char *r, size_t size)
{
    int iters = size > LARGE ? 100 : 1000, skip = size > LARGE ? 10 : 100, p;
    double sum = 0, lat, avg;

    MPI_Barrier(c);
    for (int i = 0; i < iters + skip; i++) {
        double t0 = MPI_Wtime();

        MPI_Allreduce(s, r, (int)size, type, MPI_SUM, c);
        double t1 = MPI_Wtime();

        MPI_Barrier(c);
        if (i >= skip)
            sum += t1 - t0;
    }
    lat = sum * 1e6 / iters;
    MPI_Comm_size(c, &p);
    MPI_Allreduce(&lat, &avg, 1, MPI_DOUBLE, MPI_SUM, c);
    return avg / p;
}

static int parse_range(const char *arg, size_t *lo, size_t *hi)
{
    char *end;
    unsigned long a = strtoul(arg, &end, 10), b;

    if (*end != ':')
        return -1;
    b = strtoul(end + 1, &end, 10);
    if (*end != '\0' || a < 1 || b < a || b > (1ul << 26))
        return -1;
    *lo = a;
    *hi = b;
    return 0;
}

int main(int argc, char **argv)
{
    size_t lo = 4, hi = 1 << 20, page = (size_t)sysconf(_SC_PAGESIZE);
    int level = MPI_THREAD_SINGLE, provided, rank, opt;
    char *mem[2 * NSETUP] = {0}, *sb[NSETUP], *rb[NSETUP];
    MPI_Comm dup = MPI_COMM_NULL;
    void *held[MAXHELD];
    double *iter_t = malloc(1000 * sizeof(double)); /* OMB's most iterations */
    int nheld = 0;

    while ((opt = getopt(argc, argv, "m:t:")) != -1) {
        if (opt == 'm' && parse_range(optarg, &lo, &hi) == 0)
            continue;
        if (opt == 't' && (strcmp(optarg, "single") == 0 || strcmp(optarg, "multiple") == 0)) {
            level = optarg[0] == 's' ? MPI_THREAD_SINGLE : MPI_THREAD_MULTIPLE;
            continue;
        }
        fprintf(stderr, "usage: omb_factors [-m MIN:MAX] [-t single|multiple]\n");
        return 2;
    }
    MPI_Init_thread(&argc, &argv, level, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    for (int k = 0; k < 2 * NSETUP; k++) {
        void *p = NULL;

        if (iter_t == NULL || posix_memalign(&p, page, hi + page) != 0) {
            fprintf(stderr, "omb_factors: cannot allocate %zu bytes\n", hi + page);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        mem[k] = p;
    }
    for (int v = 0; v < NSETUP; v++) {
        size_t off = setups[v].off64 ? 64 : 0;

        sb[v] = mem[2 * v] + off;
        rb[v] = mem[2 * v + 1] + off;
        memset(sb[v], setups[v].zeros ? 0 : 1, hi); /* OMB's send buffer: bytes of 1 */
        memset(rb[v], 0, hi);
    }
    if (rank == 0) {
        printf("# omb_factors: thread level %s; Avg latency (us) per set-up\n# size",
               provided == MPI_THREAD_MULTIPLE ? "multiple" : "single");
        for (int v = 0; v < NSETUP; v++)
            printf(" %s", setups[v].name);
        printf("\n");
    }
    for (size_t size = lo, n = 0; size <= hi; size *= 2, n++) {
        double t[NSETUP];

        for (int k = 0; k < NSETUP; k++) {
            int v = n % 2 ? NSETUP - 1 - k : k;

            if (setups[v].tmp >= 0)
                prime_malloc(size, setups[v].tmp);
            if (setups[v].hloop)
                t[v] = time_hloop(MPI_COMM_WORLD, MPI_CHAR, sb[v], rb[v], size, iter_t);
            else
                t[v] = time_one(setups[v].dup ? dup : MPI_COMM_WORLD,
                                setups[v].schar ? MPI_SIGNED_CHAR : MPI_CHAR, sb[v], rb[v], size);
            /* Take the primed chunk off the cache (freed at the end), so that the set-ups
             * timed next get the heap as it was. */
            if (setups[v].tmp >= 0 && nheld < MAXHELD)
                held[nheld++] = malloc(size);
        }
        if (rank == 0) {
            printf("%zu", size);
            for (int v = 0; v < NSETUP; v++)
                printf(" %.3f", t[v]);
            printf("\n");
        }
    }
    fflush(stdout);
    MPI_Comm_free(&dup);
    for (int k = 0; k < 2 * NSETUP; k++)
        free(mem[k]);
    for (int k = 0; k < nheld; k++)
        free(held[k]);
    free(iter_t);
    MPI_Finalize();
    return 0;
}
