/* Helpers shared by the nn trainer's multi-rank tests. */
#ifndef HPML_TESTS_NN_UTIL_H
#define HPML_TESTS_NN_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hpml/nn.h"

/* A deterministic 3-class problem on 8x8 inputs: the class shifts a quadrant's mean. */
static inline void nnt_make_data(hpml_dataset_t *d, size_t n, uint64_t seed)
{
    hpml_rng_t rng;

    memset(d, 0, sizeof(*d));
    d->n = d->total = n;
    d->c = 1;
    d->h = d->w = 8;
    d->classes = 3;
    d->x = hpml_malloc(n * 64 * sizeof(float));
    d->y = hpml_malloc(n * sizeof(int32_t));
    hpml_rng_init(&rng, seed, 0);
    for (size_t i = 0; i < n; i++) {
        int c = (int)hpml_rng_below(&rng, 3);
        d->y[i] = c;
        for (int p = 0; p < 64; p++) {
            int q = (p / 8 < 4 ? 0 : 1) + (p % 8 < 4 ? 0 : 2);
            d->x[i * 64 + (size_t)p] = (float)(0.5 * hpml_rng_normal(&rng) + (q == c ? 1.0 : 0.0));
        }
    }
}

/* hpml_train, which must succeed; the trained model or NULL. */
static inline hpml_model_t *nnt_run(hpml_comm_t *comm, const hpml_train_config_t *cfg,
                                    const hpml_dataset_t *d)
{
    hpml_model_t *m = NULL;

    HPMLT_CALL(hpml_train(comm, cfg, d, NULL, NULL, NULL, NULL, &m));
    return m;
}

/* Did two runs of one model end with the same parameters, bit for bit? */
static inline int nnt_same_bits(hpml_model_t *a, hpml_model_t *b)
{
    return a && b &&
           memcmp(hpml_model_params(a), hpml_model_params(b),
                  hpml_model_num_params(a) * sizeof(float)) == 0;
}

/* A checkpoint folder /tmp/hpml_<name>_<rank 0's pid>_<ranks>. Collective. */
static inline void nnt_ckpt_dir(char *dir, size_t size, const char *name)
{
    long pid = (long)getpid();

    MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    snprintf(dir, size, "/tmp/hpml_%s_%ld_%d", name, pid, hpmlt_size());
}

/* Rank 0 removes the checkpoint once every rank is done with it. Collective. */
static inline void nnt_ckpt_remove(const char *dir)
{
    MPI_Barrier(MPI_COMM_WORLD);
    if (hpmlt_rank() == 0) {
        char path[300];
        snprintf(path, sizeof(path), "%s/checkpoint.hpml", dir);
        unlink(path);
        rmdir(dir);
    }
}

/* max |a - b| / max(1, max |a|) over two runs' parameters; infinite when one failed. */
static inline double nnt_rel_diff(hpml_model_t *a, hpml_model_t *b)
{
    double v = 0, mx = 1;

    if (a == NULL || b == NULL)
        return INFINITY;
    for (size_t i = 0; i < hpml_model_num_params(a); i++) {
        v = fmax(v, fabs((double)hpml_model_params(a)[i] - hpml_model_params(b)[i]));
        mx = fmax(mx, fabs((double)hpml_model_params(a)[i]));
    }
    return v / mx;
}

/* Check that a and b ended within tol (nnt_rel_diff), naming `what` if not; both freed. */
static inline void nnt_expect_close(hpml_model_t *a, hpml_model_t *b, double tol, const char *what)
{
    HPMLT_CHECK(nnt_rel_diff(a, b) <= tol, "%s: %g", what, nnt_rel_diff(a, b));
    hpml_model_destroy(a);
    hpml_model_destroy(b);
}

/* Did every rank end with rank 0's parameters? Collective. */
static inline int nnt_same_on_all_ranks(hpml_model_t *m)
{
    size_t n = m ? hpml_model_num_params(m) : 0;
    float *r0 = malloc(n * sizeof(float) + 1);
    int same, all;

    if (m)
        memcpy(r0, hpml_model_params(m), n * sizeof(float));
    MPI_Bcast(r0, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    same = m != NULL && memcmp(r0, hpml_model_params(m), n * sizeof(float)) == 0;
    MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    free(r0);
    return all;
}

#endif
