/*
 * Tensor fusion: many tensors of assorted sizes (including 0 and one larger than the
 * buffer) allreduced through one fusion buffer give the same bits as one allreduce
 * each; the buffer is reusable after execute; invalid arguments are rejected.
 *
 * hpml-test: ranks=1 2 3 4
 * hpml-test: mpich-ranks=1 2 3
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_util.h"

int main(int argc, char **argv)
{
    enum { NT = 23 };
    hpml_comm_t *comm = NULL;
    hpml_fusion_t *f = NULL;
    int rank, p;

    hpmlt_init(&argc, &argv, "test_fusion");
    rank = hpmlt_rank();
    p = hpmlt_size();
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &comm));
    if (comm == NULL)
        return hpmlt_finish();

    for (int dt = 0; dt < HPML_DTYPE_COUNT; dt++) {
        hpml_op_t op = dt % 2 ? HPML_AVG : HPML_SUM;
        size_t es = hpml_dtype_size((hpml_dtype_t)dt);
        char *t[NT], *exp[NT];
        size_t n[NT];

        /* 4 KiB of capacity: several flushes, and tensor 7 does not fit at all. */
        HPMLT_CALL(hpml_fusion_create(comm, (hpml_dtype_t)dt, op, 4096, &f));
        if (f == NULL)
            break;
        for (int round = 0; round < 2; round++) {
            for (int k = 0; k < NT; k++) {
                n[k] = k == 7 ? 5000 / es + 3 : (size_t)((k * 37 + round * 11) % 300);
                if (k == 3)
                    n[k] = 0;
                t[k] = malloc(n[k] * es + 1);
                exp[k] = malloc(n[k] * es + 1);
                tu_fill((hpml_dtype_t)dt, t[k], n[k], rank + 100 * k, op);
                memcpy(exp[k], t[k], n[k] * es);
                HPMLT_CALL(hpml_allreduce(HPML_IN_PLACE, exp[k], n[k], (hpml_dtype_t)dt, op, comm));
                HPMLT_CALL(hpml_fusion_add(f, t[k], n[k]));
            }
            HPMLT_CALL(hpml_fusion_execute(f));
            for (int k = 0; k < NT; k++) {
                size_t d = tu_first_diff(t[k], exp[k], n[k], es);
                HPMLT_CHECK(d == n[k], "%s %s round %d tensor %d (n=%zu): first difference at %zu",
                            hpml_dtype_name((hpml_dtype_t)dt), hpml_op_name(op), round, k, n[k], d);
                free(t[k]);
                free(exp[k]);
            }
        }
        hpml_fusion_destroy(f);
        f = NULL;
    }
    /* Nothing added: a no-op. Bad arguments: errors. */
    HPMLT_CALL(hpml_fusion_create(comm, HPML_F32, HPML_SUM, 0, &f));
    HPMLT_CALL(hpml_fusion_execute(f));
    HPMLT_OK(hpml_fusion_add(f, NULL, 3) == HPML_ERR_INVAL);
    hpml_fusion_destroy(f);
    hpml_fusion_destroy(NULL);
    HPMLT_OK(hpml_fusion_create(comm, HPML_F64, HPML_SUM, 4, &f) == HPML_ERR_INVAL);
    (void)p;
    hpml_comm_destroy(comm);
    return hpmlt_finish();
}
