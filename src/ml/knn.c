/*
 * Exact k-nearest-neighbour search, brute force, with reference and query rows both
 * distributed. Every rank broadcasts its reference block in turn (chunks of at most
 * KNN_CHUNK_ROWS rows); each rank scores its queries against a chunk with one dgemm per
 * query tile, squared distance = |q|^2 - 2 q.r + |r|^2, and keeps a sorted top-k per
 * query. Cost per rank: (nq_local * n_ref * d) multiply-adds; the reference set crosses
 * the network once (P broadcasts of its blocks).
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

#include "hpml/knn.h"

#define KNN_CHUNK_ROWS  2048 /* reference rows per broadcast chunk (also capped by bytes) */
#define KNN_CHUNK_ELEMS (1u << 21)
#define KNN_QTILE       512 /* query rows per GEMM tile */

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

int hpml_knn_search(hpml_comm_t *comm, const double *ref, const int64_t *labels, size_t nref,
                    const double *query, size_t nq, size_t d, size_t k, int64_t *indices,
                    double *distances, int64_t *pred, hpml_knn_progress_fn progress,
                    void *progress_ctx)
{
    int rc = 0, P = hpml_comm_size(comm), me = hpml_comm_rank(comm);
    int64_t *counts = NULL, flags[3];
    double *chunk = NULL, *cnorm = NULL, *qnorm = NULL, *g = NULL;
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
    cnorm = hpml_malloc(chunk_rows * sizeof(double));
    clab = hpml_calloc(chunk_rows, sizeof(int64_t));
    qnorm = hpml_malloc((nq ? nq : 1) * sizeof(double));
    g = hpml_malloc(KNN_QTILE * chunk_rows * sizeof(double));
    t.key = hpml_malloc(nq * k * sizeof(double));
    t.idx = hpml_malloc(nq * k * sizeof(int64_t));
    t.lab = hpml_calloc(nq * k, sizeof(int64_t));
    t.fill = hpml_calloc(nq ? nq : 1, sizeof(size_t));
    /* Agree across ranks on missing labels and failed allocations, so that no rank is
     * left waiting in a broadcast that another rank will never join. */
    flags[0] = labels == NULL;
    flags[1] = pred != NULL && labels == NULL;
    flags[2] = !chunk || !cnorm || !clab || !qnorm || !g || !t.key || !t.idx || !t.lab || !t.fill;
    if ((rc = hpml_allreduce(HPML_IN_PLACE, flags, 3, HPML_I64, HPML_MAX, comm)) != 0)
        goto out;
    if (flags[2]) {
        rc = hpml_set_error(HPML_ERR_NOMEM, "knn: out of memory on at least one rank");
        goto out;
    }
    if (flags[1]) {
        rc = hpml_set_error(HPML_ERR_INVAL, "knn: predictions need reference labels");
        goto out;
    }
    for (size_t i = 0; i < nq; i++)
        qnorm[i] = cblas_ddot((int)d, query + i * d, 1, query + i * d, 1);

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
                cnorm[j] = cblas_ddot((int)d, chunk + j * d, 1, chunk + j * d, 1);
            for (size_t q0 = 0; q0 < nq; q0 += KNN_QTILE) {
                size_t qn = nq - q0 < KNN_QTILE ? nq - q0 : KNN_QTILE;

                /* g (qn, cn) = Q_tile R_chunk^T */
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)qn, (int)cn, (int)d, 1.0,
                            query + q0 * d, (int)d, chunk, (int)d, 0.0, g, (int)cn);
                for (size_t i = 0; i < qn; i++) {
                    size_t q = q0 + i;
                    const double *gi = g + i * cn;

                    for (size_t j = 0; j < cn; j++) {
                        double approx = qnorm[q] - 2.0 * gi[j] + cnorm[j];
                        /* Rounding bound of the GEMM form, generously. */
                        double slack = 8.0 * (double)(d + 2) * DBL_EPSILON * (qnorm[q] + cnorm[j]);

                        if (t.fill[q] == k && approx - slack > t.key[q * k + k - 1])
                            continue;
                        topk_insert(&t, q, k, sqdist(query + q * d, chunk + j * d, d),
                                    (int64_t)(offset + c0 + j), clab[j]);
                    }
                }
            }
            if (progress != NULL)
                progress(progress_ctx, offset + c0 + cn, total);
        }
        offset += n;
    }
    for (size_t q = 0; q < nq; q++) {
        memcpy(indices + q * k, t.idx + q * k, k * sizeof(int64_t));
        if (distances != NULL)
            for (size_t j = 0; j < k; j++)
                distances[q * k + j] = sqrt(t.key[q * k + j]);
        if (pred != NULL)
            pred[q] = majority(t.lab + q * k, k);
    }
out:
    hpml_free(counts);
    hpml_free(chunk);
    hpml_free(cnorm);
    hpml_free(clab);
    hpml_free(qnorm);
    hpml_free(g);
    hpml_free(t.key);
    hpml_free(t.idx);
    hpml_free(t.lab);
    hpml_free(t.fill);
    return rc;
}
