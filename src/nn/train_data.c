/*
 * A training run's data, loaded by every rank together (hpml_train_data_load): the
 * training set whole on every rank or its block of rows, normalised with the moments of
 * all of it, the class count of every rank's labels, and this rank's block of the test
 * set; failures agreed, so no rank is left in a collective. (data.c holds the MPI-free
 * loading it is built on.)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hpml/comm.h"
#include "hpml/io.h"
#include "nn/nn_internal.h"

/* The mean and standard deviation of the training set's pixels (every rank's rows: the
 * shards' moments combined), and the set standardised with them. Collective when sharded. */
static int normalize_train(hpml_comm_t *comm, int shard, hpml_dataset_t *train, double *mean,
                           double *sd)
{
    int err;

    hpml_dataset_stats(train, mean, sd);
    if (shard) {
        double s3[3] = {(double)train->n, (double)train->n * *mean,
                        (double)train->n * (*sd * *sd + *mean * *mean)};
        if ((err = hpml_allreduce(HPML_IN_PLACE, s3, 3, HPML_F64, HPML_SUM, comm)) != 0)
            return err;
        *mean = s3[1] / s3[0];
        *sd = sqrt(fmax(s3[2] / s3[0] - *mean * *mean, 1e-12));
    }
    hpml_dataset_normalize(train, (float)*mean, (float)*sd);
    return 0;
}

/* This rank's block [*r0, *r1) of the first `limit` rows of `path`, which has *rows rows
 * (at most limit). Agreed. */
static int block_of(hpml_comm_t *comm, const char *path, size_t limit, size_t *rows, size_t *r0,
                    size_t *r1)
{
    size_t cols;
    hpml_dtype_t stored;
    int err;

    *rows = 0;
    err = hpml_io_shape(path, HPML_FMT_AUTO, rows, &cols, &stored);
    if ((err = hpml_comm_agree(comm, err)) != 0)
        return err;
    if (*rows > limit)
        *rows = limit;
    hpml_io_partition(*rows, hpml_comm_rank(comm), hpml_comm_size(comm), r0, r1);
    return 0;
}

int hpml_train_data_load(hpml_comm_t *comm, const hpml_data_paths_t *paths,
                         const hpml_train_data_opts_t *o, hpml_dataset_t *train,
                         hpml_dataset_t *test, float *mean, float *std)
{
    size_t r0 = 0, r1 = o->train_limit, total = 0, t0, t1, trows;
    double mu = 0, sd = 1;
    int32_t classes;
    int err;

    memset(train, 0, sizeof(*train));
    memset(test, 0, sizeof(*test));
    /* Sharded: this rank's block of the (limited) rows only; else every row, up to the
     * limit (hpml_dataset_load stops at the file's end). */
    if (o->shard &&
        (err = block_of(comm, paths->train_images, o->train_limit, &total, &r0, &r1)) != 0)
        goto out;
    err = hpml_dataset_load(paths->train_images, paths->train_labels, r0, r1, -1.0f, 0.0f, 1.0f,
                            train);
    if ((err = hpml_comm_agree(comm, err)) != 0 ||
        (o->normalize && (err = normalize_train(comm, o->shard, train, &mu, &sd)) != 0))
        goto out;
    train->total = o->shard ? total : train->n; /* a limited set is the whole set */
    classes = train->classes;
    if ((err = hpml_allreduce(HPML_IN_PLACE, &classes, 1, HPML_I32, HPML_MAX, comm)) != 0)
        goto out;
    train->classes = classes;
    if (paths->test_images[0] && paths->test_labels[0]) {
        if ((err = block_of(comm, paths->test_images, o->test_limit, &trows, &t0, &t1)) != 0)
            goto out;
        err = hpml_dataset_load(paths->test_images, paths->test_labels, t0, t1, -1.0f, (float)mu,
                                (float)sd, test);
        if ((err = hpml_comm_agree(comm, err)) != 0)
            goto out;
    }
    *mean = (float)mu;
    *std = (float)sd;
out:
    if (err != 0) {
        hpml_dataset_free(train);
        hpml_dataset_free(test);
    }
    return err;
}
