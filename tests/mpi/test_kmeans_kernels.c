/*
 * K-Means assign kernels agree: the GEMM path (BLAS + portable argmin), the fused AVX2+FMA
 * kernel and the fused AVX-512 kernel (each where the CPU has it), f32 and f64, k from 1
 * to 53 (one to several column blocks of centres, padded lanes) and d from 1 to 33
 * (vector tails). For each: predict puts every row at its nearest centre by an exact
 * double distance (up to f32 near-ties), and a fit from the same initial centres gives
 * the GEMM path's labels (f64: identical, also n_iter; f32: at most 2 rows differ) and
 * inertia to 1e-5 relative. Data: blobs, 1001 rows split over the ranks.
 * hpml-test: ranks=1 2
 * hpml-test: mpich-ranks=2
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hpml/comm.h"
#include "hpml/io.h"
#include "hpml/kmeans.h"
#include "ml/kmeans_internal.h"

#define N    1001
#define DMAX 33
#define KMAX 53

static const char *kname[3] = {"gemm", "avx2", "avx512"};

/* Blobs around k centres in a box of side 40, unit noise; every rank builds all rows. */
static void make_data(double *X, size_t d, size_t k, uint64_t seed)
{
    hpml_rng_t r;
    static double cent[KMAX * DMAX];

    hpml_rng_init(&r, seed, 0);
    for (size_t q = 0; q < k * d; q++)
        cent[q] = 40.0 * hpml_rng_uniform(&r) - 20.0;
    for (size_t i = 0; i < N; i++) {
        size_t c = (size_t)hpml_rng_below(&r, k);
        for (size_t j = 0; j < d; j++)
            X[i * d + j] = cent[c * d + j] + hpml_rng_normal(&r);
    }
}

/* Rows of this rank not labelled with their nearest centre (exact, in double, with
 * slack for f32 near-ties). */
static size_t not_nearest(const double *X, size_t rows, size_t d, const double *C, size_t k,
                          const int32_t *lab, double slack)
{
    size_t bad = 0;

    for (size_t i = 0; i < rows; i++) {
        double best = INFINITY, got = INFINITY;
        for (size_t j = 0; j < k; j++) {
            double s = 0.0;
            for (size_t c = 0; c < d; c++) {
                double v = X[i * d + c] - C[j * d + c];
                s += v * v;
            }
            best = fmin(best, s);
            if ((int32_t)j == lab[i])
                got = s;
        }
        bad += got > best + slack * (1.0 + best);
    }
    return bad;
}

typedef struct {
    double inertia;
    int n_iter;
    int32_t *labels;
} fit_t;

/* Fit from C0 (rows of X) with the kernel in force; dtype f32 converts X and C0. */
static int fit(hpml_comm_t *comm, hpml_dtype_t dt, const double *X, size_t rows, size_t d,
               const double *C0, size_t k, fit_t *out)
{
    static float Xf[N * DMAX], Cf[KMAX * DMAX];
    static double Xd[N * DMAX];
    hpml_kmeans_params_t p;
    hpml_kmeans_result_t r;
    int rc;

    hpml_kmeans_params_default(&p);
    p.k = k;
    p.init = HPML_KMEANS_INIT_ARRAY;
    p.max_iter = 50;
    if (dt == HPML_F32) {
        for (size_t q = 0; q < rows * d; q++)
            Xf[q] = (float)X[q];
        for (size_t q = 0; q < k * d; q++)
            Cf[q] = (float)C0[q];
        p.init_centroids = Cf;
        rc = hpml_kmeans_fit(comm, &p, dt, Xf, rows, d, &r);
    } else {
        memcpy(Xd, X, rows * d * sizeof(double));
        p.init_centroids = C0;
        rc = hpml_kmeans_fit(comm, &p, dt, Xd, rows, d, &r);
    }
    if (rc != 0)
        return rc;
    out->inertia = r.inertia;
    out->n_iter = r.n_iter;
    out->labels = r.labels;
    r.labels = NULL;
    hpml_kmeans_result_free(&r);
    return 0;
}

int main(int argc, char **argv)
{
    static const size_t ds[] = {1, 7, 24, 33};
    static const size_t ks[] = {1, 3, 12, 16, 17, 40, 53};
    static double X[N * DMAX], C0[KMAX * DMAX];
    hpml_comm_t *comm = NULL;
    size_t b, e, rows;
    int have[3];

    hpmlt_init(&argc, &argv, "test_kmeans_kernels");
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &comm));
    hpml_blas_set_threads(1);
    hpml_io_partition(N, hpml_comm_rank(comm), hpml_comm_size(comm), &b, &e);
    rows = e - b;
    have[KM_KERNEL_GEMM] = 1;
    have[KM_KERNEL_AVX2] = hpml_cpu_has_avx2() && hpml_cpu_has_fma();
    have[KM_KERNEL_AVX512] = hpml_cpu_has_avx512f();
    if (hpmlt_rank() == 0)
        printf("kernels tested: gemm%s%s\n", have[1] ? " avx2" : "", have[2] ? " avx512" : "");

    for (size_t di = 0; di < sizeof(ds) / sizeof(ds[0]); di++) {
        for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++) {
            size_t d = ds[di], k = ks[ki];
            const double *mine;

            make_data(X, d, k, 100 + di * 10 + ki);
            mine = X + b * d;
            for (size_t j = 0; j < k; j++) /* rows 0, 17, 34, ...: distinct points */
                memcpy(C0 + j * d, X + j * 17 * d, d * sizeof(double));
            for (int dt = 0; dt < 2; dt++) {
                hpml_dtype_t dtype = dt ? HPML_F32 : HPML_F64;
                fit_t ref = {0}, got = {0};

                for (int kern = 0; kern < 3; kern++) {
                    int32_t *lab = malloc((rows ? rows : 1) * sizeof(int32_t));
                    static float Xf[N * DMAX], Cf[KMAX * DMAX];
                    size_t bad, diff = 0;
                    int rc;

                    if (!have[kern] || lab == NULL) {
                        free(lab);
                        continue;
                    }
                    HPMLT_CALL(hpml__km_kernel_force(kern));
                    /* predict: nearest centre, the centres being C0 */
                    if (dtype == HPML_F32) {
                        for (size_t q = 0; q < rows * d; q++)
                            Xf[q] = (float)mine[q];
                        for (size_t q = 0; q < k * d; q++)
                            Cf[q] = (float)C0[q];
                        rc = hpml_kmeans_predict(comm, dtype, Xf, rows, d, Cf, k, lab, NULL);
                    } else {
                        rc = hpml_kmeans_predict(comm, dtype, mine, rows, d, C0, k, lab, NULL);
                    }
                    HPMLT_CHECK(rc == 0, "predict rc %d", rc);
                    bad = not_nearest(mine, rows, d, C0, k, lab, dt ? 1e-4 : 1e-9);
                    HPMLT_CHECK(bad == 0, "%s %s d=%zu k=%zu: %zu rows not nearest", kname[kern],
                                dt ? "f32" : "f64", d, k, bad);
                    free(lab);

                    /* fit: same as the GEMM path's */
                    rc = fit(comm, dtype, mine, rows, d, C0, k, kern == 0 ? &ref : &got);
                    HPMLT_CHECK(rc == 0, "%s fit rc %d", kname[kern], rc);
                    if (rc != 0 || kern == 0)
                        continue;
                    for (size_t i = 0; i < rows; i++)
                        diff += got.labels[i] != ref.labels[i];
                    HPMLT_CHECK(diff <= (dt ? 2u : 0u), "%s %s d=%zu k=%zu: %zu labels differ",
                                kname[kern], dt ? "f32" : "f64", d, k, diff);
                    HPMLT_CHECK(fabs(got.inertia - ref.inertia) <= 1e-5 * ref.inertia,
                                "%s %s d=%zu k=%zu: inertia %.10g vs %.10g", kname[kern],
                                dt ? "f32" : "f64", d, k, got.inertia, ref.inertia);
                    HPMLT_CHECK(dt || got.n_iter == ref.n_iter,
                                "%s f64 d=%zu k=%zu: n_iter %d vs %d", kname[kern], d, k,
                                got.n_iter, ref.n_iter);
                    hpml_free(got.labels);
                    got.labels = NULL;
                }
                hpml_free(ref.labels);
            }
        }
    }
    /* the automatic choice follows HPML_SIMD: never AVX-512 when it says avx2 */
    HPMLT_CALL(hpml__km_kernel_force(-1));
    {
        const char *s = getenv("HPML_SIMD");
        km_kernel_t kk = hpml__km_kernel();
        HPMLT_CHECK(!(s && strcmp(s, "avx2") == 0) || kk != KM_KERNEL_AVX512,
                    "HPML_SIMD=avx2 chose %s", kname[kk]);
        HPMLT_CHECK(!(s && strcmp(s, "portable") == 0) || kk == KM_KERNEL_GEMM,
                    "HPML_SIMD=portable chose %s", kname[kk]);
        HPMLT_CHECK(s != NULL || getenv("HPML_KMEANS_GEMM") != NULL || !have[2] ||
                        kk == KM_KERNEL_AVX512,
                    "auto on an AVX-512 CPU chose %s", kname[kk]);
    }
    hpml_comm_destroy(comm);
    return hpmlt_finish();
}
