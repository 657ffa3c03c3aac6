/*
 * The fused K-Means assign, one instruction set and element type per inclusion by
 * kmeans_fused.c: distances to every centre, the first argmin, inertia, label changes
 * and the per-cluster sums in one pass over X, without BLAS and without an n x k matrix.
 *
 * Define before including: KF_T (float/double), KF_V (vector type), KF_W (lanes),
 * KF_SUF (name suffix), KF_TARGET (the target attribute), KF_ROWS(nv) (rows per register
 * block with nv vectors of centres, a constant), KF_RMAX (the largest KF_ROWS), and the
 * vector operations KF_LOAD, KF_STORE, KF_SET1, KF_ZERO, KF_FMA(a, b, c) = a*b + c,
 * KF_ADD, KF_MIN, KF_HMIN (smallest lane, a scalar) and KF_EQ(v, s) (bit mask of the
 * lanes equal to s); optionally KF_ADD_TAIL(s, x, n) (s[0..n) += x[0..n) for n < KF_W,
 * masked). The file undefines the type and the operations at its end.
 *
 * Layout: the centres are padded to kp = a multiple of KF_W and cut into column blocks
 * of at most KF_NVMAX vectors; each block's -2 C^T is one contiguous panel (d x nv*W), so
 * the inner loop reads it in order. For one block of KF_ROWS rows, each feature c is nv
 * vector loads of the panel and one broadcast of x_rc per row, nv FMAs per row: the
 * distances of a row stay in registers. Padded centres have |c|^2 = +inf and never win.
 * Cost per row: 2*d*kp flops; X is read from memory once per call.
 */
#define KF_CAT2(a, b) a##_##b
#define KF_CAT(a, b)  KF_CAT2(a, b)
#define KF_FN(name)   KF_CAT(km_fused_##name, KF_SUF)

/* acc = x(R rows) . panel, then the first minimum of cn + acc per row; where it is below
 * bv[r] it replaces (bv[r], bi[r]). Blocks run in increasing j0, so with the strict
 * comparison the first argmin over all blocks wins, as in the GEMM path. */
KF_TARGET static inline __attribute__((always_inline)) void
KF_FN(block)(const KF_T *x, size_t d, const KF_T *wp, const KF_T *cnp, const size_t nv,
             const size_t R, int32_t j0, KF_T *bv, int32_t *bi)
{
    KF_V acc[KF_RMAX][KF_NVMAX];

#pragma GCC unroll 16
    for (size_t r = 0; r < R; r++)
#pragma GCC unroll 4
        for (size_t q = 0; q < nv; q++)
            acc[r][q] = KF_ZERO();
    for (size_t c = 0; c < d; c++) {
        KF_V w[KF_NVMAX];
#pragma GCC unroll 4
        for (size_t q = 0; q < nv; q++)
            w[q] = KF_LOAD(wp + (c * nv + q) * KF_W);
#pragma GCC unroll 16
        for (size_t r = 0; r < R; r++) {
            KF_V xb = KF_SET1(x[r * d + c]);
#pragma GCC unroll 4
            for (size_t q = 0; q < nv; q++)
                acc[r][q] = KF_FMA(xb, w[q], acc[r][q]);
        }
    }
#pragma GCC unroll 16
    for (size_t r = 0; r < R; r++) {
        KF_V v[KF_NVMAX], m;
        KF_T s;
        uint64_t eq = 0;

        v[0] = KF_ADD(KF_LOAD(cnp), acc[r][0]);
        m = v[0];
#pragma GCC unroll 4
        for (size_t q = 1; q < nv; q++) {
            v[q] = KF_ADD(KF_LOAD(cnp + q * KF_W), acc[r][q]);
            m = KF_MIN(m, v[q]);
        }
        s = KF_HMIN(m);
        if (!(s < bv[r]))
            continue;
#pragma GCC unroll 4
        for (size_t q = 0; q < nv; q++)
            eq |= (uint64_t)KF_EQ(v[q], s) << (q * KF_W);
        if (eq != 0) {
            bv[r] = s;
            bi[r] = j0 + (int32_t)__builtin_ctzll(eq);
        }
    }
}

/* One column block (nv vectors, centres from j0) over the m rows of xt; a last partial
 * register block goes through xpad (KF_RMAX rows of scratch). */
KF_TARGET static inline __attribute__((always_inline)) void
KF_FN(panel)(const KF_T *xt, size_t m, size_t d, const KF_T *wp, const KF_T *cnp, const size_t nv,
             int32_t j0, KF_T *bv, int32_t *bi, KF_T *xpad)
{
    const size_t R = KF_ROWS(nv);
    size_t r0 = 0;

    for (; r0 + R <= m; r0 += R)
        KF_FN(block)(xt + r0 * d, d, wp, cnp, nv, R, j0, bv + r0, bi + r0);
    if (r0 < m) {
        KF_T tb[KF_RMAX];
        int32_t ti[KF_RMAX];

        memcpy(xpad, xt + r0 * d, (m - r0) * d * sizeof(KF_T));
        for (size_t r = 0; r < KF_RMAX; r++) {
            tb[r] = r < m - r0 ? bv[r0 + r] : (KF_T)INFINITY;
            ti[r] = r < m - r0 ? bi[r0 + r] : 0;
        }
        KF_FN(block)(xpad, d, wp, cnp, nv, R, j0, tb, ti);
        for (size_t r = 0; r < m - r0; r++) {
            bv[r0 + r] = tb[r];
            bi[r0 + r] = ti[r];
        }
    }
}

/* s[0..d) += x[0..d) */
KF_TARGET static inline __attribute__((always_inline)) void
KF_FN(addrow)(KF_T *restrict s, const KF_T *restrict x, size_t d)
{
    size_t c = 0;

    for (; c + KF_W <= d; c += KF_W)
        KF_STORE(s + c, KF_ADD(KF_LOAD(s + c), KF_LOAD(x + c)));
#ifdef KF_ADD_TAIL
    if (c < d)
        KF_ADD_TAIL(s + c, x + c, d - c);
#else
    for (; c < d; c++)
        s[c] += x[c];
#endif
}

#define KT_T      KF_T
#define KT_FN     KF_FN
#define KT_ATTR   KF_TARGET
#define KT_ADDROW KF_FN(addrow)
#include "ml/kmeans_take.h"
#undef KT_T
#undef KT_FN
#undef KT_ATTR
#undef KT_ADDROW

/* The assign of kmeans_kernels.h's contract (hpml__kmeans_assign_*), fused. */
KF_TARGET static int KF_FN(assign)(const KF_T *X, const KF_T *xn, size_t n, size_t d, const KF_T *C,
                                   const KF_T *cn, size_t k, int32_t *labels, double *sums,
                                   double *counts, double *inertia, size_t *changed, double *mind)
{
    const size_t nvec = (k + KF_W - 1) / KF_W, kp = nvec * KF_W;
    KF_T *wt = NULL, *cnp = NULL, *bv = NULL, *xpad = NULL, *csum = NULL;
    int32_t *bi = NULL;
    km_tally_t t = {0};
    size_t tm;
    int rc = HPML_ERR_NOMEM;

    /* Rows per tile: with one column block any size will do; with several, the tile of
     * X is swept once per block, so it should stay in L2 (about 128 KiB). */
    tm = nvec <= KF_NVMAX ? 512 : (128u << 10) / (d * sizeof(KF_T));
    tm = tm < KF_RMAX ? KF_RMAX : tm > 1024 ? 1024 : tm;
    wt = hpml_malloc(d * kp * sizeof(KF_T));
    cnp = hpml_malloc(kp * sizeof(KF_T));
    bv = hpml_malloc(tm * sizeof(KF_T));
    bi = hpml_malloc(tm * sizeof(int32_t));
    xpad = hpml_calloc(KF_RMAX * d, sizeof(KF_T));
    if (sums != NULL)
        csum = hpml_calloc(k * d, sizeof(KF_T));
    if (!wt || !cnp || !bv || !bi || !xpad || (sums != NULL && csum == NULL))
        goto out;
    for (size_t v0 = 0; v0 < nvec; v0 += KF_NVMAX) {
        size_t nv = nvec - v0 < KF_NVMAX ? nvec - v0 : KF_NVMAX, w = nv * KF_W;
        KF_T *wp = wt + v0 * KF_W * d;
        for (size_t c = 0; c < d; c++)
            for (size_t j = 0; j < w; j++) {
                size_t col = v0 * KF_W + j;
                wp[c * w + j] = col < k ? (KF_T)-2 * C[col * d + c] : (KF_T)0;
            }
    }
    for (size_t j = 0; j < kp; j++)
        cnp[j] = j < k ? cn[j] : (KF_T)INFINITY;

    for (size_t i0 = 0; i0 < n; i0 += tm) {
        size_t m = n - i0 < tm ? n - i0 : tm;
        const KF_T *xt = X + i0 * d;

        for (size_t i = 0; i < m; i++) {
            bv[i] = (KF_T)INFINITY;
            bi[i] = 0;
        }
        for (size_t v0 = 0; v0 < nvec; v0 += KF_NVMAX) {
            size_t nv = nvec - v0 < KF_NVMAX ? nvec - v0 : KF_NVMAX;
            const KF_T *wp = wt + v0 * KF_W * d, *cb = cnp + v0 * KF_W;
            int32_t j0 = (int32_t)(v0 * KF_W);

            if (nv == 1)
                KF_FN(panel)(xt, m, d, wp, cb, 1, j0, bv, bi, xpad);
            else if (nv == 2)
                KF_FN(panel)(xt, m, d, wp, cb, 2, j0, bv, bi, xpad);
            else
                KF_FN(panel)(xt, m, d, wp, cb, KF_NVMAX, j0, bv, bi, xpad);
        }
        KF_FN(take)
        (xt, m, d, xn + i0, bv, bi, labels + i0, mind != NULL ? mind + i0 : NULL, csum, counts,
         sums, k, i0 + m >= n, &t);
    }
    km_tally_out(&t, inertia, changed);
    rc = 0;
out:
    hpml_free(wt);
    hpml_free(cnp);
    hpml_free(bv);
    hpml_free(bi);
    hpml_free(xpad);
    hpml_free(csum);
    return rc;
}

#undef KF_FN
#undef KF_CAT
#undef KF_CAT2
/* The element type and its operations are defined anew for each inclusion. */
#undef KF_ZERO
#undef KF_T
#undef KF_V
#undef KF_W
#undef KF_SUF
#undef KF_LOAD
#undef KF_STORE
#undef KF_SET1
#undef KF_FMA
#undef KF_ADD
#undef KF_MIN
#undef KF_HMIN
#undef KF_EQ
#undef KF_ADD_TAIL
