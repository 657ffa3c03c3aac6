/*
 * K-Means kernels for f32 and f64 (the template is kmeans_kernels.h), and their dtype
 * dispatch from the double-precision centres the driver keeps.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/simd_internal.h"
#include "hpml/core.h"
#include "ml/kmeans_internal.h"

/* The kernels are compiled for AVX-512, AVX2 and baseline x86-64 and the loader picks
 * one for the CPU (GCC function multiversioning): the argmin and the sums vectorise
 * much wider than the build's baseline SSE2. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                             \
    !defined(__SANITIZE_ADDRESS__)
#define KM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KM_CLONES
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* First argmin of cn[j] + dt[i*k + j] per row with AVX-512: 16 clusters per vector, the
 * running minimum per lane, then the smallest index among lanes equal to the minimum
 * (so ties resolve to the first cluster, as the portable loop and scikit-learn do). */
__attribute__((target("avx512f"))) static void
argmin_rows_f32_avx512(const float *dt, size_t m, size_t k, const float *cn, float *bv, int32_t *bi)
{
    const __m512 inf = _mm512_set1_ps(INFINITY);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (size_t i = 0; i < m; i++) {
        const float *row = dt + i * k;
        __m512 best = inf;
        __m512i bidx = _mm512_setzero_si512();
        for (size_t j = 0; j < k; j += 16) {
            __mmask16 mk = k - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (k - j)) - 1);
            __m512 v = _mm512_add_ps(_mm512_mask_loadu_ps(inf, mk, cn + j),
                                     _mm512_mask_loadu_ps(inf, mk, row + j));
            __mmask16 lt = _mm512_cmp_ps_mask(v, best, _CMP_LT_OQ);
            best = _mm512_mask_blend_ps(lt, best, v);
            bidx = _mm512_mask_blend_epi32(lt, bidx,
                                           _mm512_add_epi32(lane, _mm512_set1_epi32((int)j)));
        }
        float mn = _mm512_reduce_min_ps(best);
        __mmask16 eq = _mm512_cmp_ps_mask(best, _mm512_set1_ps(mn), _CMP_EQ_OQ);
        bv[i] = mn;
        bi[i] = _mm512_mask_reduce_min_epi32(eq, bidx);
    }
}

static int argmin_fast_f32(const float *dt, size_t m, size_t k, const float *cn, float *bv,
                           int32_t *bi)
{
    if (!hpml__simd_avx512())
        return 0;
    argmin_rows_f32_avx512(dt, m, k, cn, bv, bi);
    return 1;
}
#define KM_ARGMIN_F32(dt, m, k, cn, bv, bi) argmin_fast_f32(dt, m, k, cn, bv, bi)
#else
#define KM_ARGMIN_F32(dt, m, k, cn, bv, bi) 0
#endif

#define KM_T           float
#define KM_SUF         f32
#define KM_ARGMIN_FAST KM_ARGMIN_F32
#define KM_GEMM        cblas_sgemm
#include "ml/kmeans_kernels.h"
#undef KM_T
#undef KM_SUF
#undef KM_GEMM

#undef KM_ARGMIN_FAST
#define KM_T                                 double
#define KM_SUF                               f64
#define KM_ARGMIN_FAST(dt, m, k, cn, bv, bi) 0
#define KM_GEMM                              cblas_dgemm
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

int hpml__km_assign(const km_data_t *D, const double *C, size_t k, int32_t *labels, double *sums,
                    double *counts, double *inertia, size_t *changed, double *mind)
{
    void *cn, *c = centres_to(D->dtype, C, k, D->d, &cn);
    km_kernel_t kern = hpml__km_kernel();
    int rc;

    if (c == NULL)
        return HPML_ERR_NOMEM;
    if (kern != KM_KERNEL_GEMM)
        rc = hpml__km_fused_assign(kern, D->dtype, D->X, D->xn, D->rows, D->d, c, cn, k, labels,
                                   sums, counts, inertia, changed, mind);
    else if (D->dtype == HPML_F32)
        rc = hpml__kmeans_assign_f32(D->X, D->xn, D->rows, D->d, c, cn, k, D->tile, labels, sums,
                                     counts, inertia, changed, mind);
    else
        rc = hpml__kmeans_assign_f64(D->X, D->xn, D->rows, D->d, c, cn, k, D->tile, labels, sums,
                                     counts, inertia, changed, mind);
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
