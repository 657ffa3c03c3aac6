/*
 * Exact k-nearest-neighbour search, brute force, with reference and query rows both
 * distributed. Every rank broadcasts its reference block in turn (chunks of at most
 * KNN_CHUNK_ROWS rows); each rank scores its queries against a chunk in cache-sized blocks
 * (KNN_QTILE queries x KNN_RTILE references: one GEMM gives -2 Q.R^T, 256 KiB, so it is
 * still in L2 when it is scanned), and a fused top-k selection reads each block once:
 * per query, a vector scan (AVX-512, AVX2 or plain C, as HPML_SIMD allows) finds the
 * references whose GEMM distance |q|^2 - 2 q.r + |r|^2 could beat the current k-th best,
 * and only those are rescored and inserted into the sorted top-k. No distance matrix
 * beyond the block is formed. The GEMM runs in f32 when the data's range allows
 * (docs/decisions/knn-search.md). Cost per rank: 2 * nq_local * n_ref * d flops; the
 * reference set crosses the network once (P broadcasts of its blocks).
 *
 * The GEMM form loses accuracy by cancellation for near points, so a candidate whose
 * GEMM distance is within a rounding bound of the current k-th best is rescored exactly
 * (sum of squared differences) and ranked by that: distances are exact, ties go to the
 * lower global index (chunks arrive in increasing index order and an equal distance never
 * displaces an earlier one), and the result does not depend on the rank count.
 */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "core/settings_internal.h"
#include "core/simd_internal.h"
#include "hpml/knn.h"

#define KNN_CHUNK_ROWS  2048 /* reference rows per broadcast chunk (also capped by bytes) */
#define KNN_CHUNK_ELEMS (1u << 21)
#define KNN_QTILE       128 /* query rows per GEMM block */
#define KNN_RTILE       256 /* reference rows per GEMM block: the block is 256 KiB */

/* First j in [j, n) with cn[j] + g[j] <= t, or n: the candidates of one query row, with g
 * from a dgemm (g64) or an sgemm (g32, compared in double). */
typedef struct {
    size_t (*g64)(const double *g, const double *cn, size_t j, size_t n, double t);
    size_t (*g32)(const float *g, const double *cn, size_t j, size_t n, double t);
} knn_scan_t;

static size_t scan64_portable(const double *g, const double *cn, size_t j, size_t n, double t)
{
    for (; j < n; j++)
        if (cn[j] + g[j] <= t)
            break;
    return j;
}

static size_t scan32_portable(const float *g, const double *cn, size_t j, size_t n, double t)
{
    for (; j < n; j++)
        if (cn[j] + (double)g[j] <= t)
            break;
    return j;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* One vector of candidates: LOADG(g + j) gives W doubles; the first lane with
 * cn + g <= t, as in the portable loops. */
#define KNN_SCAN(name, attr, W, VD, LOADG, LOADD, ADD, MASK)                                       \
    attr static size_t name(const KNN_GT *g, const double *cn, size_t j, size_t n, double t)       \
    {                                                                                              \
        for (; j + (W) <= n; j += (W)) {                                                           \
            VD v = ADD(LOADD(cn + j), LOADG(g + j));                                               \
            unsigned m = (unsigned)(MASK(v, t));                                                   \
            if (m != 0)                                                                            \
                return j + (size_t)__builtin_ctz(m);                                               \
        }                                                                                          \
        return KNN_TAIL(g, cn, j, n, t);                                                           \
    }
#define AVX2_MASK(v, t)   _mm256_movemask_pd(_mm256_cmp_pd((v), _mm256_set1_pd(t), _CMP_LE_OQ))
#define AVX512_MASK(v, t) _mm512_cmp_pd_mask((v), _mm512_set1_pd(t), _CMP_LE_OQ)
#define CVT256(p)         _mm256_cvtps_pd(_mm_loadu_ps(p))
#define CVT512(p)         _mm512_cvtps_pd(_mm256_loadu_ps(p))

#define KNN_GT   double
#define KNN_TAIL scan64_portable
KNN_SCAN(scan64_avx2, __attribute__((target("avx2"))), 4, __m256d, _mm256_loadu_pd, _mm256_loadu_pd,
         _mm256_add_pd, AVX2_MASK)
KNN_SCAN(scan64_avx512, __attribute__((target("avx512f"))), 8, __m512d, _mm512_loadu_pd,
         _mm512_loadu_pd, _mm512_add_pd, AVX512_MASK)
#undef KNN_GT
#undef KNN_TAIL
#define KNN_GT   float
#define KNN_TAIL scan32_portable
KNN_SCAN(scan32_avx2, __attribute__((target("avx2"))), 4, __m256d, CVT256, _mm256_loadu_pd,
         _mm256_add_pd, AVX2_MASK)
KNN_SCAN(scan32_avx512, __attribute__((target("avx512f"))), 8, __m512d, CVT512, _mm512_loadu_pd,
         _mm512_add_pd, AVX512_MASK)
#undef KNN_GT
#undef KNN_TAIL
#endif

static knn_scan_t pick_scan(void)
{
    knn_scan_t s = {scan64_portable, scan32_portable};

#if defined(__x86_64__) && defined(__GNUC__)
    if (hpml__simd_avx512())
        s = (knn_scan_t){scan64_avx512, scan32_avx512};
    else if (hpml__simd_path() == HPML_SIMD_AVX2)
        s = (knn_scan_t){scan64_avx2, scan32_avx2};
#endif
    return s;
}

/* Largest |x| of n values; +inf when one is NaN or infinite. */
static double max_abs(const double *x, size_t n)
{
    double m = 0.0;

    for (size_t i = 0; i < n; i++) {
        double a = fabs(x[i]);
        if (!(a <= m))
            m = isfinite(a) ? a : INFINITY;
    }
    return m;
}

typedef struct {
    double *key; /* (nq, k) exact squared distances, ascending */
    int64_t *idx;
    int64_t *lab;
    size_t *fill;
} topk_t;

static double sqdist(const double *a, const double *b, size_t d)
{
    double s = 0.0;

    for (size_t j = 0; j < d; j++) {
        double t = a[j] - b[j];
        s += t * t;
    }
    return s;
}

/* Insert (key, idx) into the sorted list of query q unless it is not better than the
 * k-th; equal keys keep their earlier (lower-index) entries first. */
static void topk_insert(topk_t *t, size_t q, size_t k, double key, int64_t idx, int64_t lab)
{
    double *kv = t->key + q * k;
    int64_t *iv = t->idx + q * k, *lv = t->lab + q * k;
    size_t n = t->fill[q], pos;

    if (n == k && !(key < kv[k - 1]))
        return;
    pos = n < k ? n : k - 1;
    while (pos > 0 && kv[pos - 1] > key) {
        kv[pos] = kv[pos - 1];
        iv[pos] = iv[pos - 1];
        lv[pos] = lv[pos - 1];
        pos--;
    }
    kv[pos] = key;
    iv[pos] = idx;
    lv[pos] = lab;
    if (n < k)
        t->fill[q] = n + 1;
}

/* Most frequent label among v[0..k); the smallest label on ties (scipy.stats.mode). */
static int64_t majority(const int64_t *v, size_t k)
{
    int64_t best = v[0];
    size_t best_n = 0;

    for (size_t i = 0; i < k; i++) {
        size_t n = 0;

        for (size_t j = 0; j < k; j++)
            n += v[j] == v[i];
        if (n > best_n || (n == best_n && v[i] < best)) {
            best = v[i];
            best_n = n;
        }
    }
    return best;
}

/*
 * The fused top-k of query q over one GEMM block (g = -2 q.r_j, or g32 in float; cnp =
 * (1 - s)|r_j|^2, qs = (1 - s)|q|^2 - a, s and a the relative and absolute rounding bounds
 * of the GEMM form): r_j can only enter the top-k if
 * qs + cnp[j] + g[j], its GEMM distance minus the bound, is not above the current k-th
 * exact distance; those few are rescored exactly and inserted. The threshold tightens as
 * the top-k fills, so the scan restarts after each insertion.
 */
static void select_row(topk_t *t, size_t q, size_t k, const double *g, const float *g32,
                       const double *cnp, size_t rn, const knn_scan_t *scan, double qs,
                       const double *qrow, const double *rblock, size_t d, int64_t first,
                       const int64_t *rlab)
{
    size_t j = 0;

    /* Until the list is full every reference enters (NaN distances too). */
    for (; j < rn && t->fill[q] < k; j++)
        topk_insert(t, q, k, sqdist(qrow, rblock + j * d, d), first + (int64_t)j, rlab[j]);
    while (j < rn) {
        double th = t->key[q * k + k - 1] - qs;

        j = g32 != NULL ? scan->g32(g32, cnp, j, rn, th) : scan->g64(g, cnp, j, rn, th);
        if (j == rn)
            break;
        topk_insert(t, q, k, sqdist(qrow, rblock + j * d, d), first + (int64_t)j, rlab[j]);
        j++;
    }
}

/* The k nearest of each of the nq queries from t into the caller's arrays: indices,
 * distances (square roots of t's squared ones; NULL: not wanted) and the majority label
 * (NULL: not wanted). */
static void write_results(const topk_t *t, size_t nq, size_t k, int64_t *indices, double *distances,
                          int64_t *pred)
{
    for (size_t q = 0; q < nq; q++) {
        memcpy(indices + q * k, t->idx + q * k, k * sizeof(int64_t));
        if (distances != NULL)
            for (size_t j = 0; j < k; j++)
                distances[q * k + j] = sqrt(t->key[q * k + j]);
        if (pred != NULL)
            pred[q] = majority(t->lab + q * k, k);
    }
}

int hpml_knn_search(hpml_comm_t *comm, const double *ref, const int64_t *labels, size_t nref,
                    const double *query, size_t nq, size_t d, size_t k, int64_t *indices,
                    double *distances, int64_t *pred, hpml_knn_progress_fn progress,
                    void *progress_ctx)
{
    int rc = 0, P = hpml_comm_size(comm), me = hpml_comm_rank(comm);
    int64_t *counts = NULL, flags[4];
    double *chunk = NULL, *cnp = NULL, *qnorm = NULL, *g = NULL, slack, aslack;
    float *q32 = NULL, *c32 = NULL, *g32 = NULL;
    knn_scan_t scan = pick_scan();
    uint64_t f64;
    int lowp;
    int64_t *clab = NULL;
    topk_t t = {0};
    size_t chunk_rows, total = 0, offset = 0;

    if (d == 0 || k == 0)
        return hpml_set_error(HPML_ERR_INVAL, "knn: d and k must be positive");
    counts = hpml_calloc((size_t)P, sizeof(int64_t));
    if (counts == NULL)
        return HPML_ERR_NOMEM;
    counts[me] = (int64_t)nref;
    if ((rc = hpml_allreduce(HPML_IN_PLACE, counts, (size_t)P, HPML_I64, HPML_SUM, comm)) != 0)
        goto out;
    for (int r = 0; r < P; r++)
        total += (size_t)counts[r];
    if (k > total) {
        rc = hpml_set_error(HPML_ERR_INVAL, "knn: k = %zu but the reference set has %zu rows", k,
                            total);
        goto out;
    }
    chunk_rows = KNN_CHUNK_ELEMS / d;
    if (chunk_rows > KNN_CHUNK_ROWS)
        chunk_rows = KNN_CHUNK_ROWS;
    if (chunk_rows == 0)
        chunk_rows = 1;
    chunk = hpml_malloc(chunk_rows * d * sizeof(double));
    cnp = hpml_malloc(chunk_rows * sizeof(double));
    clab = hpml_calloc(chunk_rows, sizeof(int64_t));
    qnorm = hpml_malloc((nq ? nq : 1) * sizeof(double));
    g = hpml_malloc(KNN_QTILE * KNN_RTILE * sizeof(double));
    q32 = hpml_malloc((nq ? nq : 1) * d * sizeof(float));
    c32 = hpml_malloc(chunk_rows * d * sizeof(float));
    g32 = hpml_malloc(KNN_QTILE * KNN_RTILE * sizeof(float));
    t.key = hpml_malloc(nq * k * sizeof(double));
    t.idx = hpml_malloc(nq * k * sizeof(int64_t));
    t.lab = hpml_calloc(nq * k, sizeof(int64_t));
    t.fill = hpml_calloc(nq ? nq : 1, sizeof(size_t));
    /* Agree across ranks on missing labels and failed allocations, so that no rank is
     * left waiting in a broadcast that another rank will never join. Labels are missing
     * when a rank with reference rows has none (a rank without rows has nothing to
     * label: its NULL is no statement); predictions need them. */
    flags[0] = labels == NULL && nref > 0;
    flags[1] = pred != NULL;
    flags[2] = !chunk || !cnp || !clab || !qnorm || !g || !q32 || !c32 || !g32 || !t.key ||
               !t.idx || !t.lab || !t.fill;
    /* Data within 2^40 in magnitude: the GEMM may run in f32 (twice the flop rate), the
     * candidates being rescored in double anyway (see the bounds below). */
    flags[3] = max_abs(ref, nref * d) > 0x1p40 || max_abs(query, nq * d) > 0x1p40;
    if ((rc = hpml_allreduce(HPML_IN_PLACE, flags, 4, HPML_I64, HPML_MAX, comm)) != 0)
        goto out;
    /* Rounding bound of the GEMM form -2 q.r: relative to |q|^2 + |r|^2, generously (8x
     * the (d+2) u of the dot product and, in f32, of the rows' conversion to float), and
     * in f32 an absolute part for values that underflow (each term errs by at most
     * 2^-150 * 2^40). */
    if (!hpml__setting_env(HPML__S_KNN_DGEMM, &f64))
        f64 = 0;
    lowp = flags[3] == 0 && f64 == 0;
    slack = 8.0 * (double)(d + 2) * (lowp ? FLT_EPSILON : DBL_EPSILON);
    aslack = lowp ? (double)(d + 2) * 0x1p-100 : 0.0;
    if (flags[2]) {
        rc = hpml_set_error(HPML_ERR_NOMEM, "knn: out of memory on at least one rank");
        goto out;
    }
    if (flags[0] && flags[1]) {
        rc = hpml_set_error(HPML_ERR_INVAL, "knn: predictions need reference labels");
        goto out;
    }
    for (size_t i = 0; i < nq; i++)
        qnorm[i] = (1.0 - slack) * cblas_ddot((int)d, query + i * d, 1, query + i * d, 1) - aslack;
    for (size_t i = 0; lowp && i < nq * d; i++)
        q32[i] = (float)query[i];

    for (int root = 0; root < P; root++) {
        size_t n = (size_t)counts[root];

        for (size_t c0 = 0; c0 < n; c0 += chunk_rows) {
            size_t cn = n - c0 < chunk_rows ? n - c0 : chunk_rows;

            if (root == me) {
                memcpy(chunk, ref + c0 * d, cn * d * sizeof(double));
                if (!flags[0])
                    memcpy(clab, labels + c0, cn * sizeof(int64_t));
            }
            if ((rc = hpml_bcast(chunk, cn * d, HPML_F64, root, comm)) != 0)
                goto out;
            if (!flags[0] && (rc = hpml_bcast(clab, cn, HPML_I64, root, comm)) != 0)
                goto out;
            for (size_t j = 0; j < cn; j++)
                cnp[j] = (1.0 - slack) * cblas_ddot((int)d, chunk + j * d, 1, chunk + j * d, 1);
            for (size_t i = 0; lowp && i < cn * d; i++)
                c32[i] = (float)chunk[i];
            for (size_t q0 = 0; q0 < nq; q0 += KNN_QTILE) {
                size_t qn = nq - q0 < KNN_QTILE ? nq - q0 : KNN_QTILE;

                for (size_t r0 = 0; r0 < cn; r0 += KNN_RTILE) {
                    size_t rn = cn - r0 < KNN_RTILE ? cn - r0 : KNN_RTILE;

                    /* g (qn, rn) = -2 Q_tile R_block^T */
                    if (lowp)
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)qn, (int)rn,
                                    (int)d, -2.0f, q32 + q0 * d, (int)d, c32 + r0 * d, (int)d, 0.0f,
                                    g32, (int)rn);
                    else
                        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)qn, (int)rn,
                                    (int)d, -2.0, query + q0 * d, (int)d, chunk + r0 * d, (int)d,
                                    0.0, g, (int)rn);
                    for (size_t i = 0; i < qn; i++)
                        select_row(&t, q0 + i, k, g + i * rn, lowp ? g32 + i * rn : NULL, cnp + r0,
                                   rn, &scan, qnorm[q0 + i], query + (q0 + i) * d, chunk + r0 * d,
                                   d, (int64_t)(offset + c0 + r0), clab + r0);
                }
            }
            if (progress != NULL)
                progress(progress_ctx, offset + c0 + cn, total);
        }
        offset += n;
    }
    write_results(&t, nq, k, indices, distances, pred);
out:
    hpml_free(counts);
    hpml_free(chunk);
    hpml_free(cnp);
    hpml_free(clab);
    hpml_free(qnorm);
    hpml_free(g);
    hpml_free(q32);
    hpml_free(c32);
    hpml_free(g32);
    hpml_free(t.key);
    hpml_free(t.idx);
    hpml_free(t.lab);
    hpml_free(t.fill);
    return rc;
}
