/*
 * Every collective algorithm against the MPI's own result, in one compact pass meant for
 * runs across nodes (tests/cli/cluster.sh runs it on 2 and 3 emulated nodes with 1 and 2
 * ranks per node; here it runs on one node). allreduce, reduce, reduce_scatter: every
 * algorithm × dtype × op; bcast, allgather: every algorithm × dtype; alltoallv with
 * unequal blocks; counts 0, 1, not divisible by the ranks, 1000, and above the chunk
 * limit (HPML_MAX_CHUNK_ELEMS lowered, three dtypes and two ops); roots on the first and the last
 * rank. Data are small integers every dtype holds exactly, so the results must match bit for bit.
 * Under MPICH above 2 ranks the reductions take every dtype with sum and max and every op with
 * three dtypes.
 *
 * hpml-test: ranks=2 3
 * hpml-test: mpich-ranks=2
 * hpml-test: timeout=300
 */
#include <stdlib.h>
#include <string.h>

#include "coll_util.h"

static int rank, size;

/* The reference reduction of tu_val over every rank, by MPI in f64, in dtype dt. */
static void *reference(size_t n, hpml_dtype_t dt, hpml_op_t op)
{
    double *mine = malloc((n + 1) * sizeof(double)), *sum = malloc((n + 1) * sizeof(double));
    void *ref = malloc(n * hpml_dtype_size(dt) + 8);

    for (size_t i = 0; i < n; i++)
        mine[i] = tu_val(rank, i, op, dt);
    MPI_Allreduce(mine, sum, (int)n, MPI_DOUBLE, tu_mpi_op(op), MPI_COMM_WORLD);
    tu_ref(dt, sum, ref, n, op, size);
    free(mine);
    free(sum);
    return ref;
}

static int same(const void *a, const void *b, size_t n, hpml_dtype_t dt, size_t *at)
{
    size_t es = hpml_dtype_size(dt);

    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)a + i * es, (const char *)b + i * es, es) != 0) {
            *at = i;
            return 0;
        }
    return 1;
}

#define CASE_CHECK(ok, coll, algo, dt, op, n, extra, rc, at)                                       \
    HPMLT_CHECK(ok, "%s algo=%s dtype=%s op=%s count=%zu %s: rc=%d (%s), first mismatch at %zu",   \
                coll, hpml_algo_name(algo), hpml_dtype_name(dt), hpml_op_name(op), n, extra, rc,   \
                (rc) ? hpml_last_error() : "", at)

static void algos_of(hpml_coll_t coll, hpml_algo_t *out, size_t *n)
{
    const hpml_algo_t *list;
    size_t k;

    hpml_algo_list(coll, &list, &k);
    out[0] = HPML_ALGO_AUTO;
    memcpy(out + 1, list, k * sizeof(*list));
    *n = k + 1;
}

/* Every dtype in dtypes × every op in ops (bit masks). */
static void reductions(hpml_comm_t *c, const size_t *counts, size_t ncounts, unsigned dtypes,
                       unsigned ops)
{
    hpml_algo_t ar[HPML_ALGO_COUNT + 1], rd[HPML_ALGO_COUNT + 1], rs[HPML_ALGO_COUNT + 1];
    size_t nar, nrd, nrs;

    algos_of(HPML_COLL_ALLREDUCE, ar, &nar);
    algos_of(HPML_COLL_REDUCE, rd, &nrd);
    algos_of(HPML_COLL_REDUCE_SCATTER, rs, &nrs);
    for (int d = 0; d < HPML_DTYPE_COUNT; d++)
        for (int o = 0; o < HPML_OP_COUNT; o++)
            for (size_t k = 0; k < ncounts; k++) {
                if (!(dtypes >> d & 1) || !(ops >> o & 1))
                    continue;
                hpml_dtype_t dt = (hpml_dtype_t)d;
                hpml_op_t op = (hpml_op_t)o;
                size_t n = counts[k], es = hpml_dtype_size(dt), at = 0;
                size_t total = n * (size_t)size;
                char *in = malloc(total * es + 8), *out = malloc(total * es + 8);
                void *ref = reference(n, dt, op), *ref_rs = reference(total, dt, op);
                int rc, ip;

                for (size_t a = 0; a < nar; a++) {
                    ip = (int)((a + k) % 2);
                    tu_fill(dt, in, n, rank, op);
                    memcpy(out, in, n * es);
                    rc = hpml_allreduce_algo(ar[a], ip ? HPML_IN_PLACE : in, out, n, dt, op, c);
                    CASE_CHECK(rc == 0 && same(out, ref, n, dt, &at), "allreduce", ar[a], dt, op, n,
                               ip ? "in place" : "", rc, at);
                }
                for (size_t a = 0; a < nrd; a++)
                    for (int root = 0; root < size; root += size - 1) {
                        tu_fill(dt, in, n, rank, op);
                        memset(out, 0, n * es + 8);
                        rc = hpml_reduce_algo(rd[a], in, out, n, dt, op, root, c);
                        CASE_CHECK(rc == 0 && (rank != root || same(out, ref, n, dt, &at)),
                                   "reduce", rd[a], dt, op, n, root ? "root last" : "root 0", rc,
                                   at);
                        if (size == 1)
                            break;
                    }
                for (size_t a = 0; a < nrs; a++) {
                    tu_fill(dt, in, total, rank, op);
                    rc = hpml_reduce_scatter_algo(rs[a], in, out, n, dt, op, c);
                    CASE_CHECK(rc == 0 &&
                                   same(out, (char *)ref_rs + (size_t)rank * n * es, n, dt, &at),
                               "reduce_scatter", rs[a], dt, op, n, "", rc, at);
                }
                free(in);
                free(out);
                free(ref);
                free(ref_rs);
            }
}

static void movements(hpml_comm_t *c, const size_t *counts, size_t ncounts)
{
    hpml_algo_t bc[HPML_ALGO_COUNT + 1], ag[HPML_ALGO_COUNT + 1];
    size_t nbc, nag;

    algos_of(HPML_COLL_BCAST, bc, &nbc);
    algos_of(HPML_COLL_ALLGATHER, ag, &nag);
    for (int d = 0; d < HPML_DTYPE_COUNT; d++)
        for (size_t k = 0; k < ncounts; k++) {
            hpml_dtype_t dt = (hpml_dtype_t)d;
            size_t n = counts[k], es = hpml_dtype_size(dt), at = 0;
            size_t total = n * (size_t)size;
            char *buf = malloc(total * es + 8), *ref = malloc(total * es + 8);
            int rc;

            for (size_t a = 0; a < nbc; a++)
                for (int root = 0; root < size; root += size - 1) {
                    tu_fill(dt, ref, n, root, HPML_SUM);
                    if (rank == root)
                        memcpy(buf, ref, n * es);
                    else
                        memset(buf, 0x5a, n * es);
                    rc = hpml_bcast_algo(bc[a], buf, n, dt, root, c);
                    CASE_CHECK(rc == 0 && same(buf, ref, n, dt, &at), "bcast", bc[a], dt, HPML_SUM,
                               n, root ? "root last" : "root 0", rc, at);
                    if (size == 1)
                        break;
                }
            for (int q = 0; q < size; q++)
                tu_fill(dt, ref + (size_t)q * n * es, n, q, HPML_SUM);
            for (size_t a = 0; a < nag; a++) {
                int ip = (int)((a + k) % 2);
                char *mine = malloc(n * es + 8);

                tu_fill(dt, mine, n, rank, HPML_SUM);
                memset(buf, 0x5a, total * es);
                if (ip)
                    memcpy(buf + (size_t)rank * n * es, mine, n * es);
                rc = hpml_allgather_algo(ag[a], ip ? HPML_IN_PLACE : mine, buf, n, dt, c);
                CASE_CHECK(rc == 0 && same(buf, ref, total, dt, &at), "allgather", ag[a], dt,
                           HPML_SUM, n, ip ? "in place" : "", rc, at);
                free(mine);
            }
            free(buf);
            free(ref);
        }
}

/* The value rank p sends to rank q at element i: small, exact in every dtype. */
static double a2a_val(int p, int q, size_t i)
{
    return (double)((p * 5 + q * 3 + (int)(i % 11)) % 60);
}

static void alltoallv(hpml_comm_t *c, size_t base)
{
    size_t *sc = calloc((size_t)size, sizeof(size_t)), *sd = calloc((size_t)size, sizeof(size_t));
    size_t *rc_ = calloc((size_t)size, sizeof(size_t)), *rd = calloc((size_t)size, sizeof(size_t));

    for (int d = 0; d < HPML_DTYPE_COUNT; d++) {
        hpml_dtype_t dt = (hpml_dtype_t)d;
        size_t es = hpml_dtype_size(dt), stot = 0, rtot = 0, at = 0;

        /* Rank p sends base + (p + 2q) % 3 elements to q: blocks of unequal size. */
        for (int q = 0; q < size; q++) {
            sc[q] = base + (size_t)((rank + 2 * q) % 3);
            sd[q] = stot;
            stot += sc[q];
            rc_[q] = base + (size_t)((q + 2 * rank) % 3);
            rd[q] = rtot;
            rtot += rc_[q];
        }
        char *s = malloc(stot * es + 8), *r = malloc(rtot * es + 8), *ref = malloc(rtot * es + 8);

        for (int q = 0; q < size; q++)
            for (size_t i = 0; i < sc[q]; i++) {
                tu_put(dt, s, sd[q] + i, a2a_val(rank, q, i));
            }
        for (int q = 0; q < size; q++)
            for (size_t i = 0; i < rc_[q]; i++)
                tu_put(dt, ref, rd[q] + i, a2a_val(q, rank, i));
        memset(r, 0x5a, rtot * es);
        int rc = hpml_alltoallv(s, sc, sd, r, rc_, rd, dt, c);
        CASE_CHECK(rc == 0 && same(r, ref, rtot, dt, &at), "alltoallv", HPML_ALGO_AUTO, dt,
                   HPML_SUM, base, "", rc, at);
        free(s);
        free(r);
        free(ref);
    }
    free(sc);
    free(sd);
    free(rc_);
    free(rd);
}

/* The hierarchical allreduce and hpml_allreduce_apply (which runs the same engine) over
 * many pipeline chunks, in place and not, for f32, i32 and bf16 (MPI's own types and a
 * user-defined op on 3 nodes; hpml's kernels on 2), and AVG (divided by the ranks before
 * the apply function, which reads the old values of its output as an optimizer does). */
static int apply_add(void *ctx, size_t offset, const void *in, void *out, size_t n)
{
    (void)ctx;
    (void)offset;
    for (size_t i = 0; i < n; i++)
        ((float *)out)[i] += 2 * ((const float *)in)[i];
    return 0;
}

static void hier_many_chunks(hpml_comm_t *c, const size_t *counts, size_t ncounts)
{
    static const hpml_dtype_t dts[] = {HPML_F32, HPML_I32, HPML_BF16};
    static const hpml_op_t ops[] = {HPML_SUM, HPML_MAX};

    for (size_t k = 0; k < ncounts; k++)
        for (size_t d = 0; d < 3; d++)
            for (size_t o = 0; o < 2; o++)
                for (int ip = 0; ip < 2; ip++) {
                    hpml_dtype_t dt = dts[d];
                    hpml_op_t op = ops[o];
                    size_t n = counts[k], es = hpml_dtype_size(dt), at = 0;
                    char *in = malloc(n * es + 8), *out = malloc(n * es + 8);
                    void *ref = reference(n, dt, op);
                    int rc;

                    tu_fill(dt, in, n, rank, op);
                    memcpy(out, in, n * es);
                    rc = hpml_allreduce_algo(HPML_ALGO_HIER, ip ? HPML_IN_PLACE : in, out, n, dt,
                                             op, c);
                    CASE_CHECK(rc == 0 && same(out, ref, n, dt, &at), "allreduce (many chunks)",
                               HPML_ALGO_HIER, dt, op, n, ip ? "in place" : "", rc, at);
                    free(in);
                    free(out);
                    free(ref);
                }
    for (size_t k = 0; k < ncounts; k++) {
        size_t n = counts[k], at = 0;
        float *in = malloc(n * sizeof(float) + 8), *out = malloc(n * sizeof(float) + 8);
        float *ref = reference(n, HPML_F32, HPML_AVG);
        int rc;

        tu_fill(HPML_F32, in, n, rank, HPML_AVG);
        for (size_t i = 0; i < n; i++) {
            ref[i] = 2 * ref[i] + (float)(i % 5);
            out[i] = (float)(i % 5);
        }
        rc = hpml_allreduce_apply(in, out, n, HPML_F32, HPML_AVG, apply_add, NULL, c);
        CASE_CHECK(rc == 0 && same(out, ref, n, HPML_F32, &at), "allreduce_apply (many chunks)",
                   HPML_ALGO_AUTO, HPML_F32, HPML_AVG, n, "", rc, at);
        free(in);
        free(out);
        free(ref);
    }
}

int main(int argc, char **argv)
{
    hpml_comm_t *c = NULL;

    hpmlt_init(&argc, &argv, "test_nodes");
    rank = hpmlt_rank();
    size = hpmlt_size();
    {
        size_t counts[] = {0, 1, (size_t)size + 1, 1000};

        HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &c));
        if (tu_is_mpich() && size > 2) {
            /* MPICH busy-polls: oversubscribed it is slow, so every dtype with two ops and
             * every op with three dtypes. */
            reductions(c, counts, 4, ~0u, 1u << HPML_SUM | 1u << HPML_MAX);
            reductions(c, counts, 4, 1u << HPML_F32 | 1u << HPML_BF16 | 1u << HPML_U8,
                       1u << HPML_PROD | 1u << HPML_MIN | 1u << HPML_AVG);
        } else {
            reductions(c, counts, 4, ~0u, ~0u);
        }
        movements(c, counts, 4);
        alltoallv(c, 0);
        alltoallv(c, 1000);
        hpml_comm_destroy(c);
    }
    /* Counts above the chunk limit travel as several algorithm calls. */
    setenv("HPML_MAX_CHUNK_ELEMS", "100", 1);
    {
        size_t counts[] = {250};

        HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &c));
        reductions(c, counts, 1, 1u << HPML_F32 | 1u << HPML_F16 | 1u << HPML_I64,
                   1u << HPML_SUM | 1u << HPML_PROD);
        movements(c, counts, 1);
        hpml_comm_destroy(c);
    }
    unsetenv("HPML_MAX_CHUNK_ELEMS");
    /* Many pipeline chunks: the hierarchical allreduce keeps a window of chunks' inter-node
     * allreduces in flight (more chunks than the window), then copies them out in order;
     * slices of uneven length, and a last chunk shorter than the others. */
    setenv("HPML_SHM_CHUNK", "256", 1);
    {
        size_t counts[] = {1500, 37};

        HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &c));
        hier_many_chunks(c, counts, 2);
        hpml_comm_destroy(c);
    }
    unsetenv("HPML_SHM_CHUNK");
    return hpmlt_finish();
}
