/*
 * The fused K-Means assign (template kmeans_fused.h) for AVX-512 and AVX2+FMA, f32 and
 * f64, any k, and the run-time choice between it and the GEMM path of kmeans_kernels.h
 * (docs/decisions/kmeans-kernel.md).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/settings_internal.h"
#include "core/simd_internal.h"
#include "hpml/core.h"
#include "hpml/kmeans.h"
#include "ml/kmeans_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define KF_NVMAX 3

/* ---- AVX-512: 16 f32 or 8 f64 lanes, 32 registers --------------------------------- */
#define KF_TARGET   __attribute__((target("avx512f")))
#define KF_RMAX     12
#define KF_ROWS(nv) ((nv) == 2 ? 12 : 8)
#define KF_ZERO     _mm512_setzero_ps
#define KF_T        float
#define KF_V        __m512
#define KF_W        16
#define KF_SUF      f32_avx512
#define KF_LOAD     _mm512_loadu_ps
#define KF_STORE    _mm512_storeu_ps
#define KF_SET1     _mm512_set1_ps
#define KF_FMA      _mm512_fmadd_ps
#define KF_ADD      _mm512_add_ps
#define KF_MIN      _mm512_min_ps
#define KF_HMIN     _mm512_reduce_min_ps
#define KF_EQ(v, s) _mm512_cmp_ps_mask((v), _mm512_set1_ps(s), _CMP_EQ_OQ)
#define KF_ADD_TAIL(s, x, n)                                                                       \
    do {                                                                                           \
        __mmask16 m_ = (__mmask16)((1u << (n)) - 1);                                               \
        _mm512_mask_storeu_ps(                                                                     \
            (s), m_,                                                                               \
            _mm512_add_ps(_mm512_maskz_loadu_ps(m_, (s)), _mm512_maskz_loadu_ps(m_, (x))));        \
    } while (0)
#include "ml/kmeans_fused.h"

#define KF_ZERO     _mm512_setzero_pd
#define KF_T        double
#define KF_V        __m512d
#define KF_W        8
#define KF_SUF      f64_avx512
#define KF_LOAD     _mm512_loadu_pd
#define KF_STORE    _mm512_storeu_pd
#define KF_SET1     _mm512_set1_pd
#define KF_FMA      _mm512_fmadd_pd
#define KF_ADD      _mm512_add_pd
#define KF_MIN      _mm512_min_pd
#define KF_HMIN     _mm512_reduce_min_pd
#define KF_EQ(v, s) _mm512_cmp_pd_mask((v), _mm512_set1_pd(s), _CMP_EQ_OQ)
#define KF_ADD_TAIL(s, x, n)                                                                       \
    do {                                                                                           \
        __mmask8 m_ = (__mmask8)((1u << (n)) - 1);                                                 \
        _mm512_mask_storeu_pd(                                                                     \
            (s), m_,                                                                               \
            _mm512_add_pd(_mm512_maskz_loadu_pd(m_, (s)), _mm512_maskz_loadu_pd(m_, (x))));        \
    } while (0)
#include "ml/kmeans_fused.h"
#undef KF_TARGET
#undef KF_RMAX
#undef KF_ROWS

/* ---- AVX2+FMA: 8 f32 or 4 f64 lanes, 16 registers ---------------------------------- */
#define KF_TARGET   __attribute__((target("avx2,fma")))
#define KF_RMAX     8
#define KF_ROWS(nv) ((nv) == 1 ? 8 : (nv) == 2 ? 6 : 4)

KF_TARGET static inline float hmin_ps256(__m256 v)
{
    __m128 m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_min_ps(m, _mm_movehl_ps(m, m));
    m = _mm_min_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

KF_TARGET static inline double hmin_pd256(__m256d v)
{
    __m128d m = _mm_min_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    m = _mm_min_sd(m, _mm_unpackhi_pd(m, m));
    return _mm_cvtsd_f64(m);
}

#define KF_ZERO     _mm256_setzero_ps
#define KF_T        float
#define KF_V        __m256
#define KF_W        8
#define KF_SUF      f32_avx2
#define KF_LOAD     _mm256_loadu_ps
#define KF_STORE    _mm256_storeu_ps
#define KF_SET1     _mm256_set1_ps
#define KF_FMA      _mm256_fmadd_ps
#define KF_ADD      _mm256_add_ps
#define KF_MIN      _mm256_min_ps
#define KF_HMIN     hmin_ps256
#define KF_EQ(v, s) (unsigned)_mm256_movemask_ps(_mm256_cmp_ps((v), _mm256_set1_ps(s), _CMP_EQ_OQ))
#include "ml/kmeans_fused.h"

#define KF_ZERO     _mm256_setzero_pd
#define KF_T        double
#define KF_V        __m256d
#define KF_W        4
#define KF_SUF      f64_avx2
#define KF_LOAD     _mm256_loadu_pd
#define KF_STORE    _mm256_storeu_pd
#define KF_SET1     _mm256_set1_pd
#define KF_FMA      _mm256_fmadd_pd
#define KF_ADD      _mm256_add_pd
#define KF_MIN      _mm256_min_pd
#define KF_HMIN     hmin_pd256
#define KF_EQ(v, s) (unsigned)_mm256_movemask_pd(_mm256_cmp_pd((v), _mm256_set1_pd(s), _CMP_EQ_OQ))
#include "ml/kmeans_fused.h"
#define HAVE_FUSED 1
#endif /* x86-64 */

/* -1: not chosen yet (the environment is read on first use); else a km_kernel_t. */
static int forced = -1;

km_kernel_t hpml__km_kernel(void)
{
    int f = __atomic_load_n(&forced, __ATOMIC_RELAXED);
    uint64_t gemm = 0;

    if (f >= 0)
        return (km_kernel_t)f;
#ifdef HAVE_FUSED
    (void)hpml__setting_env(HPML__S_KMEANS_GEMM, &gemm);
    if (gemm == 0 && hpml__simd_avx512())
        return KM_KERNEL_AVX512;
    if (gemm == 0 && hpml__simd_path() == HPML_SIMD_AVX2)
        return KM_KERNEL_AVX2;
#endif
    (void)gemm;
    return KM_KERNEL_GEMM;
}

int hpml__km_kernel_force(int which)
{
#ifdef HAVE_FUSED
    if (which == KM_KERNEL_AVX512 && !hpml_cpu_has_avx512f())
        return HPML_ERR_UNSUPPORTED;
    if (which == KM_KERNEL_AVX2 && !(hpml_cpu_has_avx2() && hpml_cpu_has_fma()))
        return HPML_ERR_UNSUPPORTED;
#else
    if (which == KM_KERNEL_AVX512 || which == KM_KERNEL_AVX2)
        return HPML_ERR_UNSUPPORTED;
#endif
    __atomic_store_n(&forced, which < 0 ? -1 : which, __ATOMIC_RELAXED);
    return 0;
}

const char *hpml_kmeans_kernel_name(void)
{
    switch (hpml__km_kernel()) {
    case KM_KERNEL_AVX512: return "fused AVX-512 (f32 and f64, any k)";
    case KM_KERNEL_AVX2: return "fused AVX2+FMA (f32 and f64, any k)";
    case KM_KERNEL_GEMM: break;
    }
    return "BLAS GEMM tiles + portable argmin";
}

int hpml__km_fused_assign(km_kernel_t kern, hpml_dtype_t dt, const void *X, const void *xn,
                          size_t n, size_t d, const void *C, const void *cn, size_t k,
                          int32_t *labels, double *sums, double *counts, double *inertia,
                          size_t *changed, double *mind)
{
#ifdef HAVE_FUSED
    int (*f32)(const float *, const float *, size_t, size_t, const float *, const float *, size_t,
               int32_t *, double *, double *, double *, size_t *, double *) =
        kern == KM_KERNEL_AVX512 ? km_fused_assign_f32_avx512 : km_fused_assign_f32_avx2;
    int (*f64)(const double *, const double *, size_t, size_t, const double *, const double *,
               size_t, int32_t *, double *, double *, double *, size_t *, double *) =
        kern == KM_KERNEL_AVX512 ? km_fused_assign_f64_avx512 : km_fused_assign_f64_avx2;

    if (kern != KM_KERNEL_GEMM && dt == HPML_F32)
        return f32(X, xn, n, d, C, cn, k, labels, sums, counts, inertia, changed, mind);
    if (kern != KM_KERNEL_GEMM)
        return f64(X, xn, n, d, C, cn, k, labels, sums, counts, inertia, changed, mind);
#endif
    (void)kern, (void)dt, (void)X, (void)xn, (void)n, (void)d, (void)C, (void)cn, (void)k;
    (void)labels, (void)sums, (void)counts, (void)inertia, (void)changed, (void)mind;
    return HPML_ERR_UNSUPPORTED;
}
