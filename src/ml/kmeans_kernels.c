/*
 * K-Means kernels for f32 and f64 (the template is kmeans_kernels.h), and their dtype
 * dispatch from the double-precision centres the driver keeps.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/settings_internal.h"
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

static int use_avx512 = -1;

static int argmin_fast_f32(const float *dt, size_t m, size_t k, const float *cn, float *bv,
                           int32_t *bi)
{
    if (use_avx512 < 0)
        use_avx512 = __builtin_cpu_supports("avx512f") ? 1 : 0;
    if (!use_avx512)
        return 0;
    argmin_rows_f32_avx512(dt, m, k, cn, bv, bi);
    return 1;
}
#define KM_ARGMIN_F32(dt, m, k, cn, bv, bi) argmin_fast_f32(dt, m, k, cn, bv, bi)

/*
 * Fused assign for f32 and k <= 16 without BLAS: all k distances of a row live in one
 * AVX-512 vector. wt (d x 16) holds -2 C^T padded with zero columns; for each feature c
 * one load of wt[c] serves FK rows, each an FMA with the broadcast x_rc, so X streams
 * from memory once with no packing copy (the GEMM path's largest cost at small d:
 * docs/decisions/kmeans-kernel.md). Padded lanes get cn = +inf and never win. The first
 * lane equal to the row minimum is the first argmin, as in the GEMM path.
 */
#define FK 8

__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
small_rows(const float *x, size_t nr, size_t d, const float *wt, __m512 cnv, float *bv, int32_t *bi)
{
    __m512 acc[FK];

    for (size_t r = 0; r < FK; r++)
        acc[r] = _mm512_setzero_ps();
    for (size_t c = 0; c < d; c++) {
        __m512 w = _mm512_loadu_ps(wt + c * 16);
        for (size_t r = 0; r < nr; r++)
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(x[r * d + c]), w, acc[r]);
    }
    for (size_t r = 0; r < nr; r++) {
        __m512 v = _mm512_add_ps(cnv, acc[r]);
        float mn = _mm512_reduce_min_ps(v);
        __mmask16 eq = _mm512_cmp_ps_mask(v, _mm512_set1_ps(mn), _CMP_EQ_OQ);
        bv[r] = mn;
        bi[r] = (int32_t)__builtin_ctz((unsigned)eq);
    }
}

__attribute__((target("avx512f"))) static int
assign_small_f32(const float *X, const float *xn, size_t n, size_t d, const float *C,
                 const float *cn, size_t k, int32_t *labels, double *sums, double *counts,
                 double *inertia, size_t *changed, double *mind)
{
    float *wt = NULL, *csum = NULL, cnp[16], bv[FK];
    int32_t bi[FK];
    double inert = 0.0;
    size_t nchanged = 0, since_flush = 0;
    __m512 cnv;

    wt = hpml_malloc(d * 16 * sizeof(float));
    if (sums != NULL)
        csum = hpml_calloc(k * d, sizeof(float));
    if (wt == NULL || (sums != NULL && csum == NULL)) {
        hpml_free(wt);
        return HPML_ERR_NOMEM;
    }
    for (size_t c = 0; c < d; c++)
        for (size_t j = 0; j < 16; j++)
            wt[c * 16 + j] = j < k ? -2.0f * C[j * d + c] : 0.0f;
    for (size_t j = 0; j < 16; j++)
        cnp[j] = j < k ? cn[j] : INFINITY;
    cnv = _mm512_loadu_ps(cnp);

    for (size_t i0 = 0; i0 < n; i0 += FK) {
        size_t nr = n - i0 < FK ? n - i0 : FK;
        const float *xt = X + i0 * d;

        if (nr == FK)
            small_rows(xt, FK, d, wt, cnv, bv, bi);
        else
            small_rows(xt, nr, d, wt, cnv, bv, bi);
        for (size_t r = 0; r < nr; r++) {
            size_t i = i0 + r;
            int32_t l = bi[r];
            double dist = (double)xn[i] + (double)bv[r];

            if (dist < 0.0)
                dist = 0.0;
            inert += dist;
            if (mind != NULL)
                mind[i] = dist;
            if (labels[i] != l) {
                nchanged++;
                labels[i] = l;
            }
            if (sums != NULL) {
                float *s = csum + (size_t)l * d;
                const float *x = xt + r * d;
                size_t c = 0;
                for (; c + 16 <= d; c += 16)
                    _mm512_storeu_ps(s + c,
                                     _mm512_add_ps(_mm512_loadu_ps(s + c), _mm512_loadu_ps(x + c)));
                for (; c < d; c++)
                    s[c] += x[c];
                counts[l] += 1.0;
            }
        }
        if (sums != NULL) {
            since_flush += nr;
            if (since_flush >= 4096 || i0 + nr >= n) {
                for (size_t q = 0; q < k * d; q++) {
                    sums[q] += (double)csum[q];
                    csum[q] = 0.0f;
                }
                since_flush = 0;
            }
        }
    }
    *inertia += inert;
    if (changed != NULL)
        *changed += nchanged;
    hpml_free(wt);
    hpml_free(csum);
    return 0;
}
#undef FK

/* 1: the fused kernel above applies (AVX-512, k <= 16, not disabled by
 * HPML_KMEANS_GEMM=1, which forces the BLAS path for comparison). */
static int use_small_f32(size_t k)
{
    static int ok = -1;

    if (ok < 0) {
        uint64_t gemm = 0;

        (void)hpml__setting_env(HPML__S_KMEANS_GEMM, &gemm);
        ok = __builtin_cpu_supports("avx512f") && gemm == 0;
    }
    return ok && k <= 16;
}
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
    int rc;

    if (c == NULL)
        return HPML_ERR_NOMEM;
#if defined(__x86_64__) && defined(__GNUC__)
    if (D->dtype == HPML_F32 && use_small_f32(k))
        rc = assign_small_f32(D->X, D->xn, D->rows, D->d, c, cn, k, labels, sums, counts, inertia,
                              changed, mind);
    else
#endif
        if (D->dtype == HPML_F32)
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
