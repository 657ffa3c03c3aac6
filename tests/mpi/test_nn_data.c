/*
 * hpml_train_data_load: the training set whole on every rank or row-sharded, scaled and
 * normalised with the statistics of all its rows (the shards' moments combined), the
 * classes of every rank's labels, train and test limits, this rank's block of the test
 * set normalised alike; and errors agreed, every rank failing when one rank cannot read
 * its file, that rank with its own message and the others naming it. A pipeline's stages:
 * only the first opens the images and only the last the labels (the others are given
 * files that do not exist), all holding the same rows, and a pipeline trained on what they
 * hold ends with data-parallel training's parameters.
 *
 * hpml-test: ranks=1 2 3
 * hpml-test: mpich-ranks=1 2 3
 * hpml-test: timeout=120
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "hpml/io.h"
#include "hpml/nn.h"
#include "nn_util.h"

#define N  50 /* training rows */
#define NT 17 /* test rows */
#define D  16 /* 4x4 pixels */

/* Rank 0 writes 8-bit images and labels (only the last training row has label 7), every
 * rank gets the paths in a folder of rank 0's pid. Collective. */
static void write_data(char *dir, size_t size, hpml_data_paths_t *p)
{
    long pid = (long)getpid();

    MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    snprintf(dir, size, "/tmp/hpml_nn_data_%ld_%d", pid, hpmlt_size());
    snprintf(p->train_images, sizeof(p->train_images), "%s/ti.npy", dir);
    snprintf(p->train_labels, sizeof(p->train_labels), "%s/tl.npy", dir);
    snprintf(p->test_images, sizeof(p->test_images), "%s/ei.npy", dir);
    snprintf(p->test_labels, sizeof(p->test_labels), "%s/el.npy", dir);
    if (hpmlt_rank() == 0) {
        uint8_t x[N * D];
        int64_t y[N];
        size_t shape[3] = {N, 4, 4};

        for (size_t i = 0; i < N * D; i++)
            x[i] = (uint8_t)((i * 37 + i / 7) % 256);
        for (int i = 0; i < N; i++)
            y[i] = i == N - 1 ? 7 : i % 3;
        HPMLT_OK(mkdir(dir, 0755) == 0);
        HPMLT_CALL(hpml_npy_write_nd(p->train_images, x, HPML_U8, 3, shape));
        HPMLT_CALL(hpml_npy_write(p->train_labels, y, HPML_I64, N, 1));
        shape[0] = NT;
        HPMLT_CALL(hpml_npy_write_nd(p->test_images, x + D, HPML_U8, 3, shape));
        HPMLT_CALL(hpml_npy_write(p->test_labels, y, HPML_I64, NT, 1));
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A load and its reference: the loader's sets and normalisation, and the first rows of the
 * training set read by hpml_dataset_load, scaled by 1/255 (what the loader normalises),
 * with their statistics. */
typedef struct {
    hpml_dataset_t tr, te, raw;
    double mean, sd; /* the reference's */
    float m, s;      /* the loader's */
} loaded_t;

static void load(hpml_comm_t *comm, const hpml_data_paths_t *p, const hpml_train_data_opts_t *o,
                 size_t ref_rows, loaded_t *l)
{
    HPMLT_CALL(hpml_dataset_load(p->train_images, p->train_labels, 0, ref_rows, -1.0f, 0.0f, 1.0f,
                                 &l->raw));
    hpml_dataset_stats(&l->raw, &l->mean, &l->sd);
    HPMLT_CALL(hpml_train_data_load(comm, p, o, &l->tr, &l->te, &l->m, &l->s));
}

static void unload(loaded_t *l)
{
    hpml_dataset_free(&l->tr);
    hpml_dataset_free(&l->te);
    hpml_dataset_free(&l->raw);
}

/* Are the pixels of sample i of d those of the reference's sample `at`, normalised with
 * (mean, sd)? */
static int same_pixels(const hpml_dataset_t *d, size_t i, const hpml_dataset_t *raw, size_t at,
                       float mean, float sd, float tol)
{
    for (size_t k = 0; k < D; k++) {
        float want = (raw->x[at * D + k] - mean) / sd;
        if (fabsf(d->x[i * D + k] - want) > tol)
            return 0;
    }
    return 1;
}

/* The same, and its label. */
static int same_sample(const hpml_dataset_t *d, size_t i, const hpml_dataset_t *raw, size_t at,
                       float mean, float sd, float tol)
{
    return same_pixels(d, i, raw, at, mean, sd, tol) && d->y[i] == raw->y[at];
}

static void check_whole(hpml_comm_t *comm, const hpml_data_paths_t *p)
{
    hpml_train_data_opts_t o = {.train_limit = SIZE_MAX, .test_limit = SIZE_MAX, .normalize = 1};
    loaded_t l;
    size_t b0, b1, ntest = 0;

    load(comm, p, &o, N, &l);
    HPMLT_CHECK(l.tr.n == N && l.tr.total == N && l.tr.offset == 0 && l.tr.classes == 8,
                "whole: n %zu total %zu offset %zu classes %d", l.tr.n, l.tr.total, l.tr.offset,
                l.tr.classes);
    HPMLT_CHECK(l.m == (float)l.mean && l.s == (float)l.sd, "whole: mean %g std %g, want %g %g",
                (double)l.m, (double)l.s, l.mean, l.sd);
    for (size_t i = 0; i < l.tr.n && i < N; i++)
        HPMLT_CHECK(same_sample(&l.tr, i, &l.raw, i, l.m, l.s, 1e-5f), "whole: sample %zu", i);
    hpml_io_partition(NT, hpmlt_rank(), hpmlt_size(), &b0, &b1);
    HPMLT_CHECK(l.te.n == b1 - b0 && l.te.offset == b0,
                "test block: %zu rows at %zu, want [%zu, %zu)", l.te.n, l.te.offset, b0, b1);
    for (size_t i = 0; i < l.te.n; i++) /* test row r: training row r + 1's pixels, r's label */
        HPMLT_CHECK(same_pixels(&l.te, i, &l.raw, b0 + i + 1, l.m, l.s, 1e-5f) &&
                        l.te.y[i] == l.raw.y[b0 + i],
                    "test sample %zu", b0 + i);
    MPI_Allreduce(&l.te.n, &ntest, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD);
    HPMLT_CHECK(ntest == NT, "the test blocks hold %zu rows, want %d", ntest, NT);
    unload(&l);

    /* Limits, no normalisation, no test set. */
    o.train_limit = 20;
    o.normalize = 0;
    {
        hpml_data_paths_t q = *p;

        q.test_images[0] = '\0';
        load(comm, &q, &o, 20, &l);
    }
    HPMLT_CHECK(l.tr.n == 20 && l.tr.total == 20 && l.tr.classes == 3 && l.m == 0.0f &&
                    l.s == 1.0f && l.te.n == 0 && l.te.x == NULL,
                "limit 20: n %zu total %zu classes %d mean %g std %g, %zu test rows", l.tr.n,
                l.tr.total, l.tr.classes, (double)l.m, (double)l.s, l.te.n);
    for (size_t i = 0; i < l.tr.n && i < 20; i++)
        HPMLT_CHECK(same_sample(&l.tr, i, &l.raw, i, 0.0f, 1.0f, 0.0f), "limit 20: sample %zu", i);
    unload(&l);
}

static void check_sharded(hpml_comm_t *comm, const hpml_data_paths_t *p)
{
    hpml_train_data_opts_t o = {
        .train_limit = SIZE_MAX, .test_limit = 5, .normalize = 1, .shard = 1};
    loaded_t l;
    size_t b0, b1, ntest = 0;

    load(comm, p, &o, N, &l);
    hpml_io_partition(N, hpmlt_rank(), hpmlt_size(), &b0, &b1);
    /* Every rank knows label 7, which only the last rank's block holds. */
    HPMLT_CHECK(l.tr.n == b1 - b0 && l.tr.offset == b0 && l.tr.total == N && l.tr.classes == 8,
                "sharded: n %zu offset %zu total %zu classes %d, want [%zu, %zu) of %d, 8", l.tr.n,
                l.tr.offset, l.tr.total, l.tr.classes, b0, b1, N);
    /* The combined moments give the whole set's statistics to rounding. */
    HPMLT_CHECK(fabs(l.m - l.mean) <= 1e-6 * fabs(l.mean) + 1e-7 && fabs(l.s - l.sd) <= 1e-6 * l.sd,
                "sharded: mean %.9g std %.9g, want %.9g %.9g", (double)l.m, (double)l.s, l.mean,
                l.sd);
    for (size_t i = 0; i < l.tr.n; i++)
        HPMLT_CHECK(same_sample(&l.tr, i, &l.raw, b0 + i, l.m, l.s, 1e-5f), "sharded: sample %zu",
                    b0 + i);
    MPI_Allreduce(&l.te.n, &ntest, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD);
    HPMLT_CHECK(ntest == 5, "test limit 5: the blocks hold %zu rows", ntest);
    unload(&l);
}

/* The last rank is given a training file that does not exist: every rank fails, the last
 * rank with its own message, the others naming it. */
static void check_agreed_error(hpml_comm_t *comm, const hpml_data_paths_t *p, int shard)
{
    const int last = hpmlt_size() - 1;
    hpml_train_data_opts_t o = {
        .train_limit = SIZE_MAX, .test_limit = SIZE_MAX, .normalize = 1, .shard = shard};
    hpml_data_paths_t q = *p;
    hpml_dataset_t tr, te;
    char want[64];
    float m, s;
    int rc;

    if (hpmlt_rank() == last)
        snprintf(q.train_images, sizeof(q.train_images), "%.1000s.missing", p->train_images);
    rc = hpml_train_data_load(comm, &q, &o, &tr, &te, &m, &s);
    snprintf(want, sizeof(want), "rank %d: ", last);
    HPMLT_CHECK(rc != 0 && tr.x == NULL && te.x == NULL, "shard %d: returned %d", shard, rc);
    if (hpmlt_rank() == last)
        HPMLT_CHECK(strstr(hpml_last_error(), ".missing") != NULL, "shard %d: own message '%s'",
                    shard, hpml_last_error());
    else
        HPMLT_CHECK(strncmp(hpml_last_error(), want, strlen(want)) == 0 &&
                        strstr(hpml_last_error(), ".missing") != NULL,
                    "shard %d: message '%s' does not name rank %d's failure", shard,
                    hpml_last_error(), last);
}

/* A pipeline of S = P stages (P > 1; stage s is rank s): the first stage is given the
 * labels and the others the images as files that do not exist, the last stage's and the
 * others' labels likewise; the load succeeds, the first stage holding the whole set's
 * images and the last its labels, the rest neither, every stage the same rows (sharded:
 * the one replica's block, all of them), the whole set's normalisation and classes on
 * every rank. Trained on those sets, the pipeline ends with the parameters of
 * data-parallel training on the whole set. */
static void check_pipeline(hpml_comm_t *comm, const hpml_data_paths_t *p, int shard)
{
    const int P = hpmlt_size(), s = hpmlt_rank();
    hpml_train_data_opts_t o = {.train_limit = SIZE_MAX, .test_limit = SIZE_MAX, .normalize = 1};
    hpml_data_paths_t q = *p;
    hpml_train_config_t cfg;
    hpml_model_t *a, *b;
    hpml_dataset_t tr, te;
    loaded_t w;
    float m, sd;

    if (P < 2)
        return;
    load(comm, p, &o, N, &w);
    if (s > 0)
        snprintf(q.train_images, sizeof(q.train_images), "%.1000s.missing", p->train_images);
    if (s < P - 1)
        snprintf(q.train_labels, sizeof(q.train_labels), "%.1000s.missing", p->train_labels);
    o.stages = P;
    o.shard = shard;
    HPMLT_CALL(hpml_train_data_load(comm, &q, &o, &tr, &te, &m, &sd));
    HPMLT_CHECK(tr.n == N && tr.offset == 0 && tr.total == N && tr.classes == 8 && tr.c == 1 &&
                    tr.h == 4 && tr.w == 4,
                "pipeline shard %d stage %d: n %zu offset %zu total %zu classes %d %dx%dx%d", shard,
                s, tr.n, tr.offset, tr.total, tr.classes, tr.c, tr.h, tr.w);
    HPMLT_CHECK(fabsf(m - w.m) <= 1e-6f * fabsf(w.m) && fabsf(sd - w.s) <= 1e-6f * w.s,
                "pipeline shard %d stage %d: mean %.9g std %.9g, want %.9g %.9g", shard, s,
                (double)m, (double)sd, (double)w.m, (double)w.s);
    HPMLT_CHECK((s == 0) == (tr.x != NULL) && (s == P - 1) == (tr.y != NULL),
                "pipeline stage %d: holds images %d labels %d", s, tr.x != NULL, tr.y != NULL);
    for (size_t i = 0; tr.x && i < tr.n; i++)
        HPMLT_CHECK(same_pixels(&tr, i, &w.raw, i, m, sd, 1e-5f), "pipeline: sample %zu", i);
    HPMLT_CHECK(!tr.y || memcmp(tr.y, w.raw.y, N * sizeof(int32_t)) == 0,
                "pipeline: the last stage's labels differ");
    HPMLT_CHECK(te.n == w.te.n && te.x && memcmp(te.y, w.te.y, te.n * sizeof(int32_t)) == 0,
                "pipeline stage %d: test block of %zu rows, want %zu", s, te.n, w.te.n);

    hpml_train_config_default(&cfg);
    cfg.spec = "dense 8 relu | dense 8 relu | dense 8";
    cfg.epochs = 1;
    cfg.batch = 12;
    cfg.opt.lr = 0.05;
    cfg.parallel = HPML_PARALLEL_DATA;
    cfg.mean = w.m;
    cfg.std = w.s;
    a = nnt_run(comm, &cfg, &w.tr);
    cfg.parallel = HPML_PARALLEL_AUTO;
    cfg.stages = P;
    cfg.micro_batches = 2;
    b = nnt_run(comm, &cfg, &tr);
    nnt_expect_close(a, b, 1e-5,
                     shard ? "pipeline on the stages' sharded data"
                           : "pipeline on the stages' data");
    hpml_dataset_free(&tr);
    hpml_dataset_free(&te);
    unload(&w);
}

int main(int argc, char **argv)
{
    hpml_comm_t *comm = NULL;
    hpml_data_paths_t p;
    char dir[256];

    hpmlt_init(&argc, &argv, "nn_data");
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &comm));
    write_data(dir, sizeof(dir), &p);
    check_whole(comm, &p);
    check_sharded(comm, &p);
    check_agreed_error(comm, &p, 0);
    check_agreed_error(comm, &p, 1);
    check_pipeline(comm, &p, 0);
    check_pipeline(comm, &p, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    if (hpmlt_rank() == 0) {
        unlink(p.train_images);
        unlink(p.train_labels);
        unlink(p.test_images);
        unlink(p.test_labels);
        rmdir(dir);
    }
    hpml_comm_destroy(comm);
    return hpmlt_finish();
}
