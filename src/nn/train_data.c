/*
 * A training run's data, loaded by every rank together (hpml_train_data_load): the
 * training set whole on every rank or its block of rows (with a pipeline, images on the
 * first stage and labels on the last only), normalised with the moments of all of it, the
 * class count of every rank's labels, and this rank's block of the test
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
 * shards' moments combined; a rank without images adds none), and the set standardised
 * with them. Collective when sharded; without shards a pipeline's later stages, which
 * hold no images, take rank 0's (a first stage's). */
static int normalize_train(hpml_comm_t *comm, int shard, int stages, hpml_dataset_t *train,
                           double *mean, double *sd)
{
    int err;

    hpml_dataset_stats(train, mean, sd);
    if (shard) {
        const double n = train->x ? (double)train->n : 0.0;
        double s3[3] = {n, n * *mean, n * (*sd * *sd + *mean * *mean)};

        if ((err = hpml_allreduce(HPML_IN_PLACE, s3, 3, HPML_F64, HPML_SUM, comm)) != 0)
            return err;
        *mean = s3[0] > 0 ? s3[1] / s3[0] : 0.0;
        *sd = s3[0] > 0 ? sqrt(fmax(s3[2] / s3[0] - *mean * *mean, 1e-12)) : 1.0;
    } else if (stages > 1) {
        double m2[2] = {*mean, *sd};

        if ((err = hpml_bcast(m2, 2, HPML_F64, 0, comm)) != 0)
            return err;
        *mean = m2[0];
        *sd = m2[1];
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

/*
 * The training set's rows on this rank: the images' shape read by the ranks that read the
 * images (with a pipeline of S stages its first stages; rank 0 is one) and given to the
 * others by rank 0, the labels' checked against it by the ranks that read labels; then
 * this rank's block of the first `limit` rows (all of them unsharded; sharded, the
 * block of its replica, or of its rank without a pipeline) of the parts it reads. Agreed.
 */
static int load_train(hpml_comm_t *comm, const hpml_data_paths_t *paths,
                      const hpml_train_data_opts_t *o, hpml_dataset_t *train)
{
    const int P = hpml_comm_size(comm), me = hpml_comm_rank(comm);
    const int S = o->stages > 1 ? o->stages : 1, s = me % S;
    const int parts = (s == 0 ? HPML__DATA_X : 0) | (s == S - 1 ? HPML__DATA_Y : 0);
    int64_t shape[3] = {0, 0, 0}; /* rows, values per row, stored type */
    size_t rows, r0 = 0, r1;
    int err = 0;

    if (P % S != 0)
        return hpml_set_error(HPML_ERR_INVAL,
                              "train data: %d ranks are not a multiple of the %d "
                              "pipeline stages",
                              P, S);
    if (parts & HPML__DATA_X) {
        size_t cols;
        hpml_dtype_t stored;

        if ((err = hpml_io_shape(paths->train_images, HPML_FMT_AUTO, &rows, &cols, &stored)) == 0) {
            shape[0] = (int64_t)rows;
            shape[1] = (int64_t)cols;
            shape[2] = (int64_t)stored;
        }
    }
    if ((err = hpml_comm_agree(comm, err)) != 0 ||
        (S > 1 && (err = hpml_bcast(shape, 3, HPML_I64, 0, comm)) != 0))
        return err;
    err = hpml__dataset_check(paths->train_images, (size_t)shape[0], (size_t)shape[1],
                              parts & HPML__DATA_Y ? paths->train_labels : NULL);
    if ((err = hpml_comm_agree(comm, err)) != 0)
        return err;
    rows = (size_t)shape[0] < o->train_limit ? (size_t)shape[0] : o->train_limit;
    r1 = rows;
    if (o->shard)
        hpml_io_partition(rows, me / S, P / S, &r0, &r1);
    err = hpml__dataset_read(paths->train_images, paths->train_labels, (size_t)shape[0],
                             (size_t)shape[1], (hpml_dtype_t)shape[2], r0, r1, -1.0f, 0.0f, 1.0f,
                             parts, train);
    if ((err = hpml_comm_agree(comm, err)) != 0)
        return err;
    train->total = o->shard ? rows : train->n; /* a limited set is the whole set */
    return 0;
}

int hpml_train_data_load(hpml_comm_t *comm, const hpml_data_paths_t *paths,
                         const hpml_train_data_opts_t *o, hpml_dataset_t *train,
                         hpml_dataset_t *test, float *mean, float *std)
{
    size_t t0, t1, trows;
    double mu = 0, sd = 1;
    int32_t classes;
    int err;

    memset(train, 0, sizeof(*train));
    memset(test, 0, sizeof(*test));
    if ((err = load_train(comm, paths, o, train)) != 0 ||
        (o->normalize && (err = normalize_train(comm, o->shard, o->stages, train, &mu, &sd)) != 0))
        goto out;
    classes = train->classes; /* 0 where the rank holds no labels */
    if ((err = hpml_allreduce(HPML_IN_PLACE, &classes, 1, HPML_I32, HPML_MAX, comm)) != 0)
        goto out;
    train->classes = classes;
    /* The test set: evaluated on the whole model, gathered to every rank, each rank
     * scoring its block (images and labels). */
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
