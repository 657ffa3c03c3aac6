/*
 * hpml_bcast: every bcast algorithm x dtype x count x root {0, last} against MPI_Bcast,
 * on the default communicator and on one cut into virtual nodes of 2 ranks with a small
 * chunk limit (HPML_MAX_CHUNK_ELEMS) and message limit (HPML_MAX_MSG_BYTES), so the
 * chunking paths and the shared-memory bcast's inter-node step run too.
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
    int roots[2] = {0, p - 1};

    HPMLT_CALL(hpml_algo_list(HPML_COLL_BCAST, &algos, &nalgo));
    for (size_t a = 0; a <= nalgo; a++) {
        hpml_algo_t algo = a < nalgo ? algos[a] : HPML_ALGO_AUTO;

        for (int dt = 0; dt < HPML_DTYPE_COUNT; dt++) {
            size_t es = hpml_dtype_size((hpml_dtype_t)dt);

            for (size_t c = 0; c < nc; c++) {
                size_t n = counts[c];

                /* The big count for a few element sizes only: bcast moves bytes. */
                if (n > 100000 && dt != HPML_F32 && dt != HPML_F16 && dt != HPML_U8)
                    continue;
                for (int ri = 0; ri < (p > 1 ? 2 : 1); ri++) {
                    int root = roots[ri], rc;
                    char *buf = malloc(n * es + 1), *ref = malloc(n * es + 1);
                    size_t d;

                    tu_fill((hpml_dtype_t)dt, ref, n, 1000 + root, HPML_MIN);
                    if (rank == root)
                        memcpy(buf, ref, n * es);
                    else
                        memset(buf, 0xab, n * es), memset(ref, 0xcd, n * es);
                    MPI_Bcast(ref, (int)(n * es), MPI_BYTE, root, MPI_COMM_WORLD);
                    rc = hpml_bcast_algo(algo, buf, n, (hpml_dtype_t)dt, root, comm);
                    HPMLT_CHECK(rc == 0, "%s %s %s n=%zu root=%d: rc %d %s", label,
                                hpml_algo_name(algo), hpml_dtype_name((hpml_dtype_t)dt), n, root,
                                rc, hpml_last_error());
                    d = tu_first_diff(buf, ref, n, es);
                    HPMLT_CHECK(d == n, "%s %s %s n=%zu root=%d: first difference at %zu", label,
                                hpml_algo_name(algo), hpml_dtype_name((hpml_dtype_t)dt), n, root,
                                d);
                    free(buf);
                    free(ref);
                }
            }
        }
    }
}

/* Registered buffers (hpml_comm_alloc_shared): the shared-memory bcast's readers copy
 * straight from the root's buffer. Offsets inside the buffer and every count. */
static void registered(hpml_comm_t *comm, const char *label, int level)
{
    int p = hpmlt_size(), rank = hpmlt_rank();
    size_t counts[8], nc = tu_counts(p, level, counts), maxb = 0;
    char *reg, *ref;

    for (size_t c = 0; c < nc; c++)
        maxb = counts[c] * 8 > maxb ? counts[c] * 8 : maxb;
    reg = hpml_comm_alloc_shared(comm, maxb + 128);
    HPMLT_CHECK(reg != NULL, "%s: hpml_comm_alloc_shared(%zu) failed", label, maxb + 128);
    if (reg == NULL)
        return;
    ref = malloc(maxb + 1);
    for (int dt = 0; dt < HPML_DTYPE_COUNT; dt += 3) { /* f32, bf16, i32: sizes 4, 2, 4 */
        size_t es = hpml_dtype_size((hpml_dtype_t)dt);

        for (size_t c = 0; c < nc; c++) {
            for (int root = 0; root < p; root += (p > 1 ? p - 1 : 1)) {
                for (size_t at = 0; at <= 64; at += 64) {
                    size_t n = counts[c], d;
                    char *buf = reg + at;
                    int rc;

                    tu_fill((hpml_dtype_t)dt, ref, n, 2000 + root + (int)c, HPML_MIN);
                    if (rank != root)
                        memset(buf, 0xab, n * es);
                    else
                        memcpy(buf, ref, n * es);
                    rc = hpml_bcast_algo(HPML_ALGO_SHM, buf, n, (hpml_dtype_t)dt, root, comm);
                    HPMLT_CHECK(rc == 0, "%s registered %s n=%zu root=%d: rc %d %s", label,
                                hpml_dtype_name((hpml_dtype_t)dt), n, root, rc, hpml_last_error());
                    d = tu_first_diff(buf, ref, n, es);
                    HPMLT_CHECK(d == n,
                                "%s registered +%zu %s n=%zu root=%d: first difference at %zu",
                                label, at, hpml_dtype_name((hpml_dtype_t)dt), n, root, d);
                    /* The root may reuse its buffer as soon as bcast returns. */
                    if (rank == root)
                        memset(buf, 0x5a, n * es);
                }
            }
        }
    }
    free(ref);
    hpml_comm_free_shared(comm, reg);
}

int main(int argc, char **argv)
{
    hpml_comm_t *comm, *small;

    tu_init_comms(&argc, &argv, "test_bcast", &comm, &small);
    if (comm != NULL)
        run(comm, "default", tu_level(0));
    if (small != NULL)
        run(small, TU_SMALL, tu_level(1));
    if (comm != NULL)
        registered(comm, "default", tu_level(0));
    if (small != NULL)
        registered(small, TU_SMALL, tu_level(1));

    /* Invalid arguments are errors, not crashes. */
    if (comm != NULL) {
        char x = 0;
        HPMLT_OK(hpml_bcast(&x, 1, HPML_U8, hpmlt_size(), comm) == HPML_ERR_INVAL);
        HPMLT_OK(hpml_bcast_algo(HPML_ALGO_RING, &x, 1, HPML_U8, 0, comm) == HPML_ERR_INVAL);
    }
    hpml_comm_destroy(small);
    hpml_comm_destroy(comm);
    return hpmlt_finish();
}
