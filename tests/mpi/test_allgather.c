/*
 * hpml_allgather: every allgather algorithm x dtype x in place/not x count against
 * MPI_Allgather; also on virtual nodes of 2 ranks with a small chunk limit (the
 * dispatcher's piecewise path).
 *
 * hpml-test: ranks=1 2 3 4 5
 * hpml-test: mpich-ranks=1 2 3
 * hpml-test: timeout=300
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_util.h"

static void run(hpml_comm_t *comm, const char *label, int level)
{
    int p = hpmlt_size(), rank = hpmlt_rank();
    const hpml_algo_t *algos;
    size_t nalgo, counts[8], nc = tu_counts(p, level, counts);

    HPMLT_CALL(hpml_algo_list(HPML_COLL_ALLGATHER, &algos, &nalgo));
    for (size_t a = 0; a <= nalgo; a++) {
        hpml_algo_t algo = a < nalgo ? algos[a] : HPML_ALGO_AUTO;

        for (int dt = 0; dt < HPML_DTYPE_COUNT; dt++) {
            size_t es = hpml_dtype_size((hpml_dtype_t)dt);

            for (int ip = 0; ip < 2; ip++) {
                for (size_t c = 0; c < nc; c++) {
                    size_t n = counts[c], blk = n * es, tot = (size_t)p * blk, d;
                    char *in, *out, *ref;
                    int rc;

                    if (n > 100000 && dt != HPML_F32 && dt != HPML_U8)
                        continue;
                    in = malloc(blk + 1);
                    out = malloc(tot + 1);
                    ref = malloc(tot + 1);
                    tu_fill((hpml_dtype_t)dt, in, n, rank, HPML_MIN);
                    MPI_Allgather(in, (int)blk, MPI_BYTE, ref, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
                    memset(out, 0xab, tot);
                    if (ip) {
                        memcpy(out + (size_t)rank * blk, in, blk);
                        rc = hpml_allgather_algo(algo, HPML_IN_PLACE, out, n, (hpml_dtype_t)dt,
                                                 comm);
                    } else {
                        rc = hpml_allgather_algo(algo, in, out, n, (hpml_dtype_t)dt, comm);
                    }
                    HPMLT_CHECK(rc == 0, "%s %s %s%s n=%zu: rc %d %s", label, hpml_algo_name(algo),
                                hpml_dtype_name((hpml_dtype_t)dt), ip ? " in-place" : "", n, rc,
                                hpml_last_error());
                    d = tu_first_diff(out, ref, (size_t)p * n, es);
                    HPMLT_CHECK(d == (size_t)p * n, "%s %s %s%s n=%zu: first difference at %zu",
                                label, hpml_algo_name(algo), hpml_dtype_name((hpml_dtype_t)dt),
                                ip ? " in-place" : "", n, d);
                    free(in);
                    free(out);
                    free(ref);
                }
            }
        }
    }
}

int main(int argc, char **argv)
{
    hpml_comm_t *comm, *small;

    tu_init_comms(&argc, &argv, "test_allgather", &comm, &small);
    if (comm != NULL)
        run(comm, "default", tu_level(0));
    if (small != NULL)
        run(small, TU_SMALL, tu_level(1));
    hpml_comm_destroy(small);
    hpml_comm_destroy(comm);
    return hpmlt_finish();
}
