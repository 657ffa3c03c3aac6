/*
 * Labelled image data sets for training: images and labels read through hpml io (IDX,
 * gzip or not, or .npy), converted once to scaled, normalised float32, and the
 * rank-count-independent epoch shuffle. No MPI here (train_data.c loads a run's data
 * across the ranks).
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hpml/io.h"
#include "nn/nn_internal.h"

/* (C, H, W) for rows of `cols` values: a square is one channel, 3 squares RGB. */
static void guess_shape(size_t cols, int *c, int *h, int *w)
{
    size_t s = (size_t)(sqrt((double)cols) + 0.5), s3 = (size_t)(sqrt((double)cols / 3) + 0.5);

    if (s * s == cols) {
        *c = 1;
        *h = *w = (int)s;
    } else if (3 * s3 * s3 == cols) {
        *c = 3;
        *h = *w = (int)s3;
    } else {
        *c = 1;
        *h = 1;
        *w = (int)cols;
    }
}

int hpml__dataset_check(const char *images, size_t rows, size_t cols, const char *labels)
{
    size_t lrows, lcols;
    hpml_dtype_t lstored;
    int err;

    /* A sample's shape is held in ints (the model's input shape). */
    if (cols == 0 || cols > INT_MAX)
        return hpml_set_error(HPML_ERR_FORMAT, "%s: %zu values per image; hpml takes 1 to %d",
                              images, cols, INT_MAX);
    if (labels == NULL)
        return 0;
    if ((err = hpml_io_shape(labels, HPML_FMT_AUTO, &lrows, &lcols, &lstored)) != 0)
        return err;
    if (lrows != rows || lcols != 1)
        return hpml_set_error(HPML_ERR_FORMAT,
                              "%s holds %zu x %zu labels but %s holds %zu images (expected one "
                              "label per image)",
                              labels, lrows, lcols, images, rows);
    return 0;
}

/* Rows [begin, end) of `labels` into out->y, checked non-negative, and out->classes. */
static int read_labels(const char *labels, size_t begin, size_t end, hpml_dataset_t *out)
{
    hpml_array_t yi = {0};
    const int32_t *y;
    int mx = -1, err;

    if ((err = hpml_io_read_rows(labels, HPML_FMT_AUTO, HPML_I32, begin, end, 0, &yi)) != 0)
        return err;
    y = yi.data;
    for (size_t i = 0; i < yi.rows; i++) {
        if (y[i] < 0) {
            err = hpml_set_error(HPML_ERR_FORMAT, "%s: label %d of row %zu is negative", labels,
                                 (int)y[i], begin + i);
            hpml_array_free(&yi);
            return err;
        }
        if (y[i] > mx)
            mx = y[i];
    }
    out->classes = mx + 1;
    out->y = yi.data;
    return 0;
}

int hpml__dataset_read(const char *images, const char *labels, size_t rows, size_t cols,
                       hpml_dtype_t stored, size_t begin, size_t end, float scale, float mean,
                       float std, int parts, hpml_dataset_t *out)
{
    hpml_array_t xi = {0};
    int err;

    memset(out, 0, sizeof(*out));
    snprintf(out->source, sizeof(out->source), "%s", images);
    guess_shape(cols, &out->c, &out->h, &out->w);
    if (end > rows)
        end = rows;
    if (begin > end)
        begin = end;
    out->n = end - begin;
    out->offset = begin;
    out->total = rows;
    if (begin == end) { /* an empty block (more ranks than rows) */
        out->x = parts & HPML__DATA_X ? hpml_malloc(0) : NULL;
        out->y = parts & HPML__DATA_Y ? hpml_malloc(0) : NULL;
        err = (parts & HPML__DATA_X && !out->x) || (parts & HPML__DATA_Y && !out->y)
                  ? HPML_ERR_NOMEM
                  : 0;
        goto out;
    }
    if (parts & HPML__DATA_X) {
        float *x;
        size_t nv;
        float a, b;

        if ((err = hpml_io_read_rows(images, HPML_FMT_AUTO, HPML_F32, begin, end, 1, &xi)) != 0)
            goto out;
        if (scale <= 0.0f)
            scale = stored == HPML_U8 ? 1.0f / 255.0f : 1.0f;
        x = xi.data;
        nv = xi.rows * xi.cols;
        a = scale / std;
        b = -mean / std;
        for (size_t i = 0; i < nv; i++)
            x[i] = x[i] * a + b;
        out->x = xi.data;
        xi.data = NULL;
    }
    err = parts & HPML__DATA_Y ? read_labels(labels, begin, end, out) : 0;
out:
    hpml_array_free(&xi);
    if (err != 0)
        hpml_dataset_free(out);
    return err;
}

int hpml_dataset_load(const char *images, const char *labels, size_t begin, size_t end, float scale,
                      float mean, float std, hpml_dataset_t *out)
{
    size_t rows, cols;
    hpml_dtype_t stored;
    int err;

    memset(out, 0, sizeof(*out));
    snprintf(out->source, sizeof(out->source), "%s", images);
    if ((err = hpml_io_shape(images, HPML_FMT_AUTO, &rows, &cols, &stored)) != 0 ||
        (err = hpml__dataset_check(images, rows, cols, labels)) != 0)
        return err;
    return hpml__dataset_read(images, labels, rows, cols, stored, begin, end, scale, mean, std,
                              HPML__DATA_X | HPML__DATA_Y, out);
}

void hpml_dataset_free(hpml_dataset_t *d)
{
    if (d == NULL)
        return;
    hpml_free(d->x);
    hpml_free(d->y);
    d->x = NULL;
    d->y = NULL;
    d->n = 0;
}

void hpml_dataset_stats(const hpml_dataset_t *d, double *mean, double *std)
{
    /* A set without its images (a later pipeline stage's) has no pixels. */
    const size_t nv = d->x ? d->n * (size_t)d->c * d->h * d->w : 0;
    double s = 0, ss = 0;

    for (size_t i = 0; i < nv; i++) {
        s += d->x[i];
        ss += (double)d->x[i] * d->x[i];
    }
    *mean = nv ? s / (double)nv : 0.0;
    *std = nv ? sqrt(fmax(ss / (double)nv - *mean * *mean, 1e-12)) : 1.0;
}

void hpml_dataset_normalize(hpml_dataset_t *d, float mean, float std)
{
    const size_t nv = d->x ? d->n * (size_t)d->c * d->h * d->w : 0;
    const float a = 1.0f / std, b = -mean / std;

    for (size_t i = 0; i < nv; i++)
        d->x[i] = d->x[i] * a + b;
}

void hpml_shuffle(uint64_t seed, long epoch, size_t n, uint32_t *perm)
{
    hpml_rng_t rng;

    hpml_rng_init(&rng, seed, 0x5348554646000000ull + (uint64_t)epoch); /* "SHUFF" + epoch */
    for (size_t i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)hpml_rng_below(&rng, i);
        uint32_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}

static void pick(char *dst, size_t len, const char *dir, const char *base)
{
    snprintf(dst, len, "%s/%s", dir, base);
    if (access(dst, R_OK) != 0)
        snprintf(dst, len, "%s/%s.gz", dir, base);
}

void hpml_data_paths(const char *dir, hpml_data_paths_t *p)
{
    pick(p->train_images, sizeof(p->train_images), dir, "train-images-idx3-ubyte");
    pick(p->train_labels, sizeof(p->train_labels), dir, "train-labels-idx1-ubyte");
    pick(p->test_images, sizeof(p->test_images), dir, "t10k-images-idx3-ubyte");
    pick(p->test_labels, sizeof(p->test_labels), dir, "t10k-labels-idx1-ubyte");
}

const char *hpml_model_preset(const char *name)
{
    static const struct {
        const char *name, *spec;
    } presets[] = {
        {"mlp", "dense 512 relu | dense 256 relu | dense 10"},
        {"lenet", "conv 6 5x5 pad2 relu | pool 2 | conv 16 5x5 relu | pool 2 | dense 120 relu | "
                  "dense 84 relu | dense 10"},
        {"cnn", "conv 32 5x5 pad2 relu | pool 2 | conv 64 5x5 relu | pool 2 | dense 128 relu | "
                "dense 10"},
        {"small-cnn", "conv 16 5x5 pad2 relu | pool 2 | conv 32 5x5 relu | pool 2 | dense 64 "
                      "relu | dense 10"},
        /* Deep sequential models, for which a pipeline's stages matter. */
        {"deep-mlp", "dense 1024 relu | dense 1024 relu | dense 1024 relu | dense 1024 relu | "
                     "dense 1024 relu | dense 1024 relu | dense 1024 relu | dense 1024 relu | "
                     "dense 1024 relu | dense 1024 relu | dense 1024 relu | dense 1024 relu | "
                     "dense 1024 relu | dense 1024 relu | dense 1024 relu | dense 1024 relu | "
                     "dense 10"},
        {"vgg", "conv 32 3x3 pad1 relu | conv 32 3x3 pad1 relu | pool 2 | conv 64 3x3 pad1 relu | "
                "conv 64 3x3 pad1 relu | pool 2 | dense 256 relu | dense 10"},
    };
    for (size_t i = 0; i < sizeof(presets) / sizeof(presets[0]); i++)
        if (strcmp(name, presets[i].name) == 0)
            return presets[i].spec;
    return name;
}
