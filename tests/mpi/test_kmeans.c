/*
 * K-Means library tests over P ranks: the distributed fit equals a one-rank fit of the
 * whole data (f64: same labels, iterations, centroids to 1e-10), k-means++ and random
 * pick distinct data rows, an empty cluster is refilled identically, predict reproduces
 * the fit's labels, and bad input (NaN on one rank only, k > rows) fails on every rank
 * with the same error instead of hanging. Data: 1001 rows, not divisible by 2 or 3.
 * hpml-test: ranks=1 2 3 4
 * hpml-test: mpich-ranks=1 2 3
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hpml/comm.h"
#include "hpml/io.h"
#include "hpml/kmeans.h"

#define N 1001
#define D 6
#define K 5

/* Blobs: K centres in a box, unit noise; every rank builds the same full array. */
static void make_data(double *X)
{
    hpml_rng_t r;
    double cent[K * D];

    hpml_rng_init(&r, 42, 0);
    for (int q = 0; q < K * D; q++)
        cent[q] = 20.0 * hpml_rng_uniform(&r) - 10.0;
    for (int i = 0; i < N; i++) {
        int c = (int)hpml_rng_below(&r, K);
        for (int j = 0; j < D; j++)
            X[i * D + j] = cent[c * D + j] + hpml_rng_normal(&r) + 100.0;
    }
}

static double maxdiff(const double *a, const double *b, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i] - b[i]));
    return m;
}

int main(int argc, char **argv)
{
    hpml_comm_t *comm = NULL, *self = NULL;
    static double X[N * D], Xf[N * D];
    double *mine;
    size_t b, e, rows;
    int rank, size;
    hpml_kmeans_params_t p;
    hpml_kmeans_result_t rs, rd;

    hpmlt_init(&argc, &argv, "test_kmeans");
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &comm));
    HPMLT_CALL(hpml_comm_create(MPI_COMM_SELF, NULL, &self));
    rank = hpml_comm_rank(comm);
    size = hpml_comm_size(comm);
    hpml_blas_set_threads(1);
    make_data(X);
    memcpy(Xf, X, sizeof(X));
    hpml_io_partition(N, rank, size, &b, &e);
    rows = e - b;
    mine = X + b * D;

    /* 1. distributed fit == one-rank fit (k-means++ init, same seed, f64) */
    for (int init = 0; init < 2; init++) {
        hpml_kmeans_params_default(&p);
        p.k = K;
        p.seed = 5;
        p.init = init ? HPML_KMEANS_INIT_RANDOM : HPML_KMEANS_INIT_KMEANSPP;
        p.n_init = 2;
        HPMLT_CALL(hpml_kmeans_fit(self, &p, HPML_F64, Xf, N, D, &rs));
        HPMLT_CALL(hpml_kmeans_fit(comm, &p, HPML_F64, mine, rows, D, &rd));
        HPMLT_CHECK(rs.n_iter == rd.n_iter, "init %d: n_iter %d vs %d", init, rs.n_iter, rd.n_iter);
        HPMLT_CHECK(fabs(rs.inertia - rd.inertia) <= 1e-9 * rs.inertia,
                    "init %d: inertia %.17g vs %.17g", init, rs.inertia, rd.inertia);
        HPMLT_CHECK(maxdiff(rs.centroids, rd.centroids, K * D) < 1e-10, "init %d: centroids", init);
        HPMLT_CHECK(rd.total_rows == N && rd.rows == rows, "sizes");
        {
            size_t diff = 0;
            for (size_t i = 0; i < rows; i++)
                diff += rs.labels[b + i] != rd.labels[i];
            HPMLT_CHECK(diff == 0, "init %d: %zu labels differ", init, diff);
        }
        /* X was centred during the fit and restored */
        HPMLT_CHECK(maxdiff(mine, Xf + b * D, rows * D) < 1e-12, "X restored");
        /* predict with the fitted centroids gives the fit's labels and inertia */
        {
            int32_t *lab = malloc((rows + 1) * sizeof(int32_t));
            double inert = 0.0;
            size_t diff = 0;
            HPMLT_CALL(
                hpml_kmeans_predict(comm, HPML_F64, mine, rows, D, rd.centroids, K, lab, &inert));
            for (size_t i = 0; i < rows; i++)
                diff += lab[i] != rd.labels[i];
            HPMLT_CHECK(diff == 0, "predict: %zu labels differ", diff);
            HPMLT_CHECK(fabs(inert - rd.inertia) <= 1e-9 * rd.inertia, "predict inertia");
            free(lab);
        }
        hpml_kmeans_result_free(&rs);
        hpml_kmeans_result_free(&rd);
    }

    /* 2. init: k-means++ and random choose K distinct rows of the data */
    for (int init = 0; init < 2; init++) {
        double C[K * D];
        int64_t idx[K];
        hpml_kmeans_params_default(&p);
        p.k = K;
        p.seed = 9;
        p.init = init ? HPML_KMEANS_INIT_RANDOM : HPML_KMEANS_INIT_KMEANSPP;
        HPMLT_CALL(hpml_kmeans_init(comm, &p, HPML_F64, mine, rows, D, C, idx));
        for (int j = 0; j < K; j++) {
            HPMLT_CHECK(idx[j] >= 0 && idx[j] < N, "index %lld", (long long)idx[j]);
            if (idx[j] < 0 || idx[j] >= N)
                continue;
            HPMLT_CHECK(maxdiff(C + j * D, Xf + idx[j] * D, D) == 0.0, "centroid %d is row", j);
            for (int q = 0; q < j; q++)
                HPMLT_CHECK(idx[q] != idx[j], "indices distinct");
        }
    }

    /* 3. k-means|| and f32 run and give a sane clustering */
    {
        static float X32[N * D];
        hpml_kmeans_params_default(&p);
        p.k = K;
        p.init = HPML_KMEANS_INIT_PARALLEL;
        for (size_t q = 0; q < rows * D; q++)
            X32[q] = (float)mine[q];
        HPMLT_CALL(hpml_kmeans_fit(comm, &p, HPML_F32, X32, rows, D, &rd));
        HPMLT_CHECK(isfinite(rd.inertia) && rd.inertia > 0 && rd.inertia < 3.0 * N * D,
                    "k-means|| inertia %g", rd.inertia);
        hpml_kmeans_result_free(&rd);
    }

    /* 3b. f32 assignment kernels: k <= 16 (the AVX-512 kernel where the CPU has it) and
     * k = 20 (BLAS) give each row the nearest centroid by exact double distance, up to
     * near-ties */
    for (int t = 0; t < 3; t++) {
        static const size_t ks[3] = {1, 5, 20};
        static float X32[N * D], C32[20 * D];
        size_t kk = ks[t];
        int32_t *lab = malloc((rows ? rows : 1) * sizeof(int32_t));
        size_t bad = 0;
        HPMLT_CHECK(lab != NULL, "malloc");
        if (lab == NULL)
            break;
        for (size_t q = 0; q < rows * D; q++)
            X32[q] = (float)mine[q];
        for (size_t q = 0; q < kk * D; q++)
            C32[q] = (float)Xf[(q / D) * 41 * D + q % D];
        HPMLT_CALL(hpml_kmeans_predict(comm, HPML_F32, X32, rows, D, C32, kk, lab, NULL));
        for (size_t i = 0; i < rows; i++) {
            double best = INFINITY, got = 0.0;
            for (size_t j = 0; j < kk; j++) {
                double s = 0.0;
                for (int c = 0; c < D; c++) {
                    double v = (double)X32[i * D + c] - (double)C32[j * D + c];
                    s += v * v;
                }
                if (s < best)
                    best = s;
                if ((int32_t)j == lab[i])
                    got = s;
            }
            bad += lab[i] < 0 || (size_t)lab[i] >= kk || got > best + 1e-3 * (1.0 + best);
        }
        HPMLT_CHECK(bad == 0, "f32 k=%zu: %zu rows not at their nearest centroid", kk, bad);
        free(lab);
    }

    /* 4. an initial centroid far away leaves its cluster empty: refilled the same way at
     * any rank count */
    {
        double C0[K * D];
        for (int j = 0; j < K; j++)
            memcpy(C0 + j * D, Xf + (size_t)(j * 97) * D, D * sizeof(double));
        for (int c = 0; c < D; c++)
            C0[3 * D + c] = 1e4;
        hpml_kmeans_params_default(&p);
        p.k = K;
        p.init = HPML_KMEANS_INIT_ARRAY;
        p.init_centroids = C0;
        HPMLT_CALL(hpml_kmeans_fit(self, &p, HPML_F64, Xf, N, D, &rs));
        HPMLT_CALL(hpml_kmeans_fit(comm, &p, HPML_F64, mine, rows, D, &rd));
        HPMLT_CHECK(rd.relocated >= 1, "relocated %zu", rd.relocated);
        HPMLT_CHECK(rs.relocated == rd.relocated && rs.n_iter == rd.n_iter, "same relocation");
        HPMLT_CHECK(maxdiff(rs.centroids, rd.centroids, K * D) < 1e-10, "centroids");
        hpml_kmeans_result_free(&rs);
        hpml_kmeans_result_free(&rd);
    }

    /* 5. errors reach every rank: k > rows; NaN in the last rank's block only */
    {
        int rc;
        hpml_kmeans_params_default(&p);
        p.k = N + 1;
        rc = hpml_kmeans_fit(comm, &p, HPML_F64, mine, rows, D, &rd);
        HPMLT_CHECK(rc == HPML_ERR_INVAL, "k > rows: %d", rc);
        p.k = K;
        if (rank == size - 1 && rows > 0)
            mine[(rows - 1) * D + 2] = NAN;
        rc = hpml_kmeans_fit(comm, &p, HPML_F64, mine, rows, D, &rd);
        HPMLT_CHECK(rc == HPML_ERR_NUMERIC, "NaN: %d", rc);
        p.k = 0;
        rc = hpml_kmeans_fit(comm, &p, HPML_F64, mine, rows, D, &rd);
        HPMLT_CHECK(rc == HPML_ERR_INVAL, "k = 0: %d", rc);
    }

    hpml_comm_destroy(self);
    hpml_comm_destroy(comm);
    return hpmlt_finish();
}
