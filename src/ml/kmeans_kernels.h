/*
 * K-Means kernels, instantiated for float and double by kmeans_kernels.c: include this
 * file with KM_T (element type), KM_SUF (name suffix) and KM_GEMM (cblas_sgemm or
 * cblas_dgemm) defined.
 *
 * The GEMM path of assign (kmeans_fused.c has the fused one and the choice): per tile of
 * rows, one GEMM gives -2 X.C^T (tile x k), then the argmin of each row (AVX-512 for f32
 * where the SIMD choice allows it), and, while the tile
 * of X is still in cache, the argmin, the label change count, the inertia and the
 * per-cluster sums are done in the same sweep. X is read from memory once per
 * iteration. Sums accumulate in KM_T over blocks of rows and are flushed into double,
 * which bounds the f32 rounding error without a double convert per element.
 */
#define KM_CAT2(a, b) a##_##b
#define KM_CAT(a, b)  KM_CAT2(a, b)
#define KM_FN(name)   KM_CAT(hpml__kmeans_##name, KM_SUF)

/* Row layout (dt is m x k): bv[i], bi[i] = min and first argmin over j of
 * cn[j] + dt[i*k + j]. Portable form; kmeans_kernels.c has an AVX-512 one for f32. */
static inline __attribute__((always_inline)) void
KM_FN(argmin_rows)(const KM_T *restrict dt, size_t m, size_t k, const KM_T *restrict cn,
                   KM_T *restrict bv, int32_t *restrict bi)
{
    for (size_t i = 0; i < m; i++) {
        const KM_T *row = dt + i * k;
        KM_T b = cn[0] + row[0];
        int32_t bj = 0;
        for (size_t j = 1; j < k; j++) {
            KM_T v = cn[j] + row[j];
            if (v < b) { /* strict: the first of equal minima wins */
                b = v;
                bj = (int32_t)j;
            }
        }
        bv[i] = b;
        bi[i] = bj;
    }
}

#define KT_T  KM_T
#define KT_FN KM_FN
#define KT_ATTR
#define KT_ADDROW(s, x, d)                                                                         \
    for (size_t c_ = 0; c_ < (d); c_++)                                                            \
    (s)[c_] += (x)[c_]
#include "ml/kmeans_take.h"
#undef KT_T
#undef KT_FN
#undef KT_ATTR
#undef KT_ADDROW

KM_CLONES
int KM_FN(assign)(const KM_T *X, const KM_T *xn, size_t n, size_t d, const KM_T *C, const KM_T *cn,
                  size_t k, size_t tile, int32_t *labels, double *sums, double *counts,
                  double *inertia, size_t *changed, double *mind)
{
    KM_T *dt = NULL, *bv = NULL, *csum = NULL;
    int32_t *bi = NULL;
    km_tally_t t = {0};
    int rc = HPML_ERR_NOMEM;

    if (tile == 0)
        tile = 256;
    dt = hpml_malloc(k * tile * sizeof(KM_T));
    bv = hpml_malloc(tile * sizeof(KM_T));
    bi = hpml_malloc(tile * sizeof(int32_t));
    if (sums != NULL)
        csum = hpml_calloc(k * d, sizeof(KM_T));
    if (dt == NULL || bv == NULL || bi == NULL || (sums != NULL && csum == NULL))
        goto out;

    for (size_t i0 = 0; i0 < n; i0 += tile) {
        size_t m = n - i0 < tile ? n - i0 : tile;
        const KM_T *xt = X + i0 * d;

        /* dt (m x k) = -2 xt (m x d) . C^T (d x k). This orientation (the tile as
         * OpenBLAS's A operand) is the faster one (docs/decisions/kmeans-kernel.md). */
        KM_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)k, (int)d, -2.0, xt, (int)d,
                C, (int)d, 0.0, dt, (int)k);
        if (!KM_ARGMIN_FAST(dt, m, k, cn, bv, bi))
            KM_FN(argmin_rows)(dt, m, k, cn, bv, bi);
        KM_FN(take)
        (xt, m, d, xn + i0, bv, bi, labels + i0, mind != NULL ? mind + i0 : NULL, csum, counts,
         sums, k, i0 + m >= n, &t);
    }
    km_tally_out(&t, inertia, changed);
    rc = 0;
out:
    hpml_free(dt);
    hpml_free(bv);
    hpml_free(bi);
    hpml_free(csum);
    return rc;
}

KM_CLONES
/* out (m x n, double) = squared distances of the n rows of X to the m rows of C,
 * clamped at 0 (|x|^2 + |c|^2 - 2 x.c as scikit-learn's euclidean_distances). */
int KM_FN(dists)(const KM_T *X, const KM_T *xn, size_t n, size_t d, const KM_T *C, const KM_T *cn,
                 size_t m, size_t tile, double *out)
{
    KM_T *dt = NULL;

    if (tile == 0)
        tile = 256;
    dt = hpml_malloc(m * tile * sizeof(KM_T));
    if (dt == NULL)
        return HPML_ERR_NOMEM;
    for (size_t i0 = 0; i0 < n; i0 += tile) {
        size_t r = n - i0 < tile ? n - i0 : tile;

        KM_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)r, (int)d, -2.0, C, (int)d,
                X + i0 * d, (int)d, 0.0, dt, (int)r);
        for (size_t j = 0; j < m; j++)
            for (size_t i = 0; i < r; i++) {
                double v = (double)xn[i0 + i] + (double)cn[j] + (double)dt[j * r + i];
                out[j * n + i0 + i] = v > 0.0 ? v : 0.0;
            }
    }
    hpml_free(dt);
    return 0;
}

/* xn[i] = |x_i|^2 */
void KM_FN(rownorms)(const KM_T *X, size_t n, size_t d, KM_T *xn)
{
    for (size_t i = 0; i < n; i++) {
        const KM_T *x = X + i * d;
        double s = 0.0;
        for (size_t c = 0; c < d; c++)
            s += (double)x[c] * (double)x[c];
        xn[i] = (KM_T)s;
    }
}

/* sum[c] += sum_i x_ic; with mean != NULL: sum[c] += sum_i (x_ic - mean_c)^2 */
void KM_FN(colstats)(const KM_T *X, size_t n, size_t d, const double *mean, double *sum)
{
    for (size_t i = 0; i < n; i++) {
        const KM_T *x = X + i * d;
        if (mean == NULL) {
            for (size_t c = 0; c < d; c++)
                sum[c] += (double)x[c];
        } else {
            for (size_t c = 0; c < d; c++) {
                double v = (double)x[c] - mean[c];
                sum[c] += v * v;
            }
        }
    }
}

/* X += sign * mean (row-wise) */
void KM_FN(shift)(KM_T *X, size_t n, size_t d, const double *mean, double sign)
{
    KM_T *mt = malloc(d * sizeof(KM_T));

    if (mt == NULL) { /* fall back to the slow form rather than fail */
        for (size_t i = 0; i < n; i++)
            for (size_t c = 0; c < d; c++)
                X[i * d + c] = (KM_T)((double)X[i * d + c] + sign * mean[c]);
        return;
    }
    for (size_t c = 0; c < d; c++)
        mt[c] = (KM_T)(sign * mean[c]);
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < d; c++)
            X[i * d + c] += mt[c];
    free(mt);
}

/* Exact squared distance of each row to its centre (C in double): sum over rows, and
 * per row into dist when dist != NULL. */
double KM_FN(exact)(const KM_T *X, size_t n, size_t d, const double *C, const int32_t *labels,
                    double *dist)
{
    double tot = 0.0;

    for (size_t i = 0; i < n; i++) {
        const KM_T *x = X + i * d;
        const double *c = C + (size_t)labels[i] * d;
        double s = 0.0;
        for (size_t q = 0; q < d; q++) {
            double v = (double)x[q] - c[q];
            s += v * v;
        }
        if (dist != NULL)
            dist[i] = s;
        tot += s;
    }
    return tot;
}

#undef KM_FN
#undef KM_CAT
#undef KM_CAT2
