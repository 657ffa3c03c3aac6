/*
 * hpml_reduce: every reduce algorithm x dtype x op x in place/not x count x root
 * {0, last}, against MPI_Reduce of the same (integer-valued) data in f64. In place,
 * non-roots' buffers must come back unchanged. Also on virtual nodes of 2 ranks with a
 * small chunk limit.
 *
 * hpml-test: ranks=1 2 3 4 5
 * hpml-test: mpich-ranks=1 2 3
 * hpml-test: timeout=300
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_util.h"

static void one(hpml_comm_t *comm, const char *label, hpml_algo_t algo, hpml_dtype_t dt,
                hpml_op_t op, int in_place, size_t n, int root)
{
    int p = hpmlt_size(), rank = hpmlt_rank(), rc;
    size_t es = hpml_dtype_size(dt), d;
    char *in = malloc(n * es + 1), *out = malloc(n * es + 1), *exp = malloc(n * es + 1);
    double *v = malloc(n * sizeof(double) + 8), *ref = malloc(n * sizeof(double) + 8);

    for (size_t i = 0; i < n; i++)
        v[i] = tu_val(rank, i, op, dt);
    tu_fill(dt, in, n, rank, op);
    MPI_Reduce(v, ref, (int)n, MPI_DOUBLE, tu_mpi_op(op), root, MPI_COMM_WORLD);
    if (rank == root)
        tu_ref(dt, ref, exp, n, op, p);
    if (in_place) {
        memcpy(out, in, n * es);
        rc = hpml_reduce_algo(algo, HPML_IN_PLACE, out, n, dt, op, root, comm);
    } else {
        memset(out, 0xab, n * es);
        rc = hpml_reduce_algo(algo, in, rank == root ? out : NULL, n, dt, op, root, comm);
    }
    HPMLT_CHECK(rc == 0, "%s %s %s %s%s n=%zu root=%d: rc %d %s", label, hpml_algo_name(algo),
                hpml_dtype_name(dt), hpml_op_name(op), in_place ? " in-place" : "", n, root, rc,
                hpml_last_error());
    if (rank == root)
        d = tu_first_diff(out, exp, n, es);
    else
        d = in_place ? tu_first_diff(out, in, n, es) : n;
    HPMLT_CHECK(d == n, "%s %s %s %s%s n=%zu root=%d: first difference at %zu", label,
                hpml_algo_name(algo), hpml_dtype_name(dt), hpml_op_name(op),
                in_place ? " in-place" : "", n, root, d);
    free(in);
    free(out);
    free(exp);
    free(v);
    free(ref);
}

static void run(hpml_comm_t *comm, const char *label, int level)
{
    int p = hpmlt_size();
    const hpml_algo_t *algos;
    size_t nalgo, counts[8], nc = tu_counts(p, level, counts);
    int roots[2] = {0, p - 1};

    HPMLT_CALL(hpml_algo_list(HPML_COLL_REDUCE, &algos, &nalgo));
    for (size_t a = 0; a <= nalgo; a++) {
        hpml_algo_t algo = a < nalgo ? algos[a] : HPML_ALGO_AUTO;

        for (int dt = 0; dt < HPML_DTYPE_COUNT; dt++)
            for (int op = 0; op < HPML_OP_COUNT; op++)
                for (int ip = 0; ip < 2; ip++)
                    for (size_t c = 0; c < nc; c++) {
                        /* The big count on two combinations: time, not coverage. */
                        if (counts[c] > 100000 && !((dt == HPML_F32 && op == HPML_SUM) ||
                                                    (dt == HPML_BF16 && op == HPML_MAX)))
                            continue;
                        for (int ri = 0; ri < (p > 1 ? 2 : 1); ri++)
                            one(comm, label, algo, (hpml_dtype_t)dt, (hpml_op_t)op, ip, counts[c],
                                roots[ri]);
                    }
    }
}

/* Bitwise reproducibility on data where the order of summation matters (random floats):
 * the same call twice gives the same bits, for every algorithm. */
static void deterministic(hpml_comm_t *comm)
{
    const hpml_algo_t *algos;
    size_t nalgo, n = 10007;
    float *in = malloc(n * sizeof(float)), *a = malloc(n * sizeof(float)),
          *b = malloc(n * sizeof(float));
    hpml_rng_t rng;

    hpml_rng_init(&rng, 42, (uint64_t)hpmlt_rank());
    for (size_t i = 0; i < n; i++)
        in[i] = (float)(hpml_rng_normal(&rng) * 1e3);
    HPMLT_CALL(hpml_algo_list(HPML_COLL_REDUCE, &algos, &nalgo));
    for (size_t k = 0; k < nalgo; k++) {
        HPMLT_CALL(hpml_reduce_algo(algos[k], in, a, n, HPML_F32, HPML_SUM, 0, comm));
        HPMLT_CALL(hpml_reduce_algo(algos[k], in, b, n, HPML_F32, HPML_SUM, 0, comm));
        if (hpmlt_rank() == 0)
            HPMLT_CHECK(memcmp(a, b, n * sizeof(float)) == 0, "%s: two runs differ",
                        hpml_algo_name(algos[k]));
    }
    free(in);
    free(a);
    free(b);
}

int main(int argc, char **argv)
{
    hpml_comm_t *comm, *small;

    tu_init_comms(&argc, &argv, "test_reduce", &comm, &small);
    if (comm != NULL)
        run(comm, "default", tu_level(0));
    if (small != NULL)
        run(small, TU_SMALL, tu_level(1));
    if (comm != NULL)
        deterministic(comm);
    hpml_comm_destroy(small);
    hpml_comm_destroy(comm);
    return hpmlt_finish();
}
