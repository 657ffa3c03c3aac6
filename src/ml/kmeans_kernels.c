/*
 * K-Means kernels for f32 and f64 (the template is kmeans_kernels.h), and their dtype
 * dispatch from the double-precision centres the driver keeps.
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "hpml/core.h"
#include "ml/kmeans_internal.h"

/* The kernels are compiled for AVX-512, AVX2 and baseline x86-64 and the loader picks
 * one for the CPU (GCC function multiversioning): the argmin and the sums vectorise
 * much wider than the build's baseline SSE2. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define KM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KM_CLONES
#endif

#define KM_T float
#define KM_SUF f32
#define KM_GEMM cblas_sgemm
#include "ml/kmeans_kernels.h"
#undef KM_T
#undef KM_SUF
#undef KM_GEMM

#define KM_T double
#define KM_SUF f64
#define KM_GEMM cblas_dgemm
#include "ml/kmeans_kernels.h"
#undef KM_T
#undef KM_SUF
#undef KM_GEMM

/* Centres in the data dtype (k x d) and their squared norms, from double. */
static void *centres_to(hpml_dtype_t dt, const double *C, size_t k, size_t d, void **cn_out)
{
    size_t es = hpml_dtype_size(dt);
    char *buf = hpml_malloc((k * d + k) * es);

    if (buf == NULL)
        return NULL;
    if (dt == HPML_F32) {
        float *c = (float *)buf, *cn = c + k * d;
        for (size_t q = 0; q < k * d; q++)
            c[q] = (float)C[q];
        hpml__kmeans_rownorms_f32(c, k, d, cn);
        *cn_out = cn;
    } else {
        double *c = (double *)buf, *cn = c + k * d;
        memcpy(c, C, k * d * sizeof(double));
        hpml__kmeans_rownorms_f64(c, k, d, cn);
        *cn_out = cn;
    }
    return buf;
}

int hpml__km_assign(const km_data_t *D, const double *C, size_t k, int32_t *labels,
                    double *sums, double *counts, double *inertia, size_t *changed,
                    double *mind)
{
    void *cn, *c = centres_to(D->dtype, C, k, D->d, &cn);
    int rc;

    if (c == NULL)
        return HPML_ERR_NOMEM;
    if (D->dtype == HPML_F32)
        rc = hpml__kmeans_assign_f32(D->X, D->xn, D->rows, D->d, c, cn, k, D->tile, labels,
                                     sums, counts, inertia, changed, mind);
    else
        rc = hpml__kmeans_assign_f64(D->X, D->xn, D->rows, D->d, c, cn, k, D->tile, labels,
                                     sums, counts, inertia, changed, mind);
    hpml_free(c);
    return rc;
}

int hpml__km_dists(const km_data_t *D, const double *C, size_t m, double *out)
{
    void *cn, *c = centres_to(D->dtype, C, m, D->d, &cn);
    int rc;

    if (c == NULL)
        return HPML_ERR_NOMEM;
    if (D->dtype == HPML_F32)
        rc = hpml__kmeans_dists_f32(D->X, D->xn, D->rows, D->d, c, cn, m, D->tile, out);
    else
        rc = hpml__kmeans_dists_f64(D->X, D->xn, D->rows, D->d, c, cn, m, D->tile, out);
    hpml_free(c);
    return rc;
}

double hpml__km_exact(const km_data_t *D, const double *C, const int32_t *labels, double *dist)
{
    if (D->dtype == HPML_F32)
        return hpml__kmeans_exact_f32(D->X, D->rows, D->d, C, labels, dist);
    return hpml__kmeans_exact_f64(D->X, D->rows, D->d, C, labels, dist);
}

void hpml__km_row(const km_data_t *D, size_t i, double *out)
{
    if (D->dtype == HPML_F32) {
        const float *x = (const float *)D->X + i * D->d;
        for (size_t c = 0; c < D->d; c++)
            out[c] = x[c];
    } else {
        memcpy(out, (const double *)D->X + i * D->d, D->d * sizeof(double));
    }
}
