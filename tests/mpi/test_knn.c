/*
 * hpml_knn_search against a naive exact search over the whole data on every rank:
 * random data (uneven row blocks, a rank with no reference rows), integer data with many
 * exact ties (lower global index first), classification votes, and argument errors; data
 * beyond 2^40 (DGEMM) and near 1e-30 (underflow in SGEMM); several broadcast chunks, query
 * tiles and reference blocks with each SIMD scan and both GEMM precisions.
 * hpml-test: ranks=1 2 3 4
 * hpml-test: mpich-ranks=1 2 3
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hpml/io.h"
#include "hpml/knn.h"

/* Naive exact top-k of query q among all n reference rows: (distance, index) order. */
static void naive(const double *ref, size_t n, const double *q, size_t d, size_t k, int64_t *idx,
                  double *dist)
{
    double *d2 = malloc(n * sizeof(double));
    char *used = calloc(n, 1);

    for (size_t j = 0; j < n; j++) {
        d2[j] = 0;
        for (size_t c = 0; c < d; c++)
            d2[j] += (q[c] - ref[j * d + c]) * (q[c] - ref[j * d + c]);
    }
    for (size_t t = 0; t < k; t++) {
        size_t best = n;
        for (size_t j = 0; j < n; j++)
            if (!used[j] && (best == n || d2[j] < d2[best]))
                best = j;
        used[best] = 1;
        idx[t] = (int64_t)best;
        dist[t] = sqrt(d2[best]);
    }
    free(d2);
    free(used);
}

static void run_case(hpml_comm_t *comm, const char *what, size_t nref, size_t nq, size_t d,
                     size_t k, int integer, uint64_t seed, double scale)
{
    int P = hpml_comm_size(comm), me = hpml_comm_rank(comm);
    double *ref = malloc(nref * d * sizeof(double)), *qry = malloc(nq * d * sizeof(double));
    int64_t *lab = malloc(nref * sizeof(int64_t));
    size_t rb, re, qb, qe;
    hpml_rng_t rng;

    hpml_rng_init(&rng, seed, 0);
    for (size_t i = 0; i < nref * d; i++)
        ref[i] = scale * (integer ? (double)hpml_rng_below(&rng, 3) : hpml_rng_normal(&rng));
    for (size_t i = 0; i < nq * d; i++)
        qry[i] = scale * (integer ? (double)hpml_rng_below(&rng, 3) : hpml_rng_normal(&rng));
    for (size_t i = 0; i < nref; i++)
        lab[i] = (int64_t)hpml_rng_below(&rng, 3) * 10 - 7;
    hpml_io_partition(nref, me, P, &rb, &re);
    hpml_io_partition(nq, (me + 1) % P, P, &qb, &qe); /* a different split for queries */
    {
        size_t nql = qe - qb;
        int64_t *idx = malloc((nql * k + 1) * sizeof(int64_t));
        int64_t *pred = malloc((nql + 1) * sizeof(int64_t));
        double *dist = malloc((nql * k + 1) * sizeof(double));
        int64_t *eidx = malloc(k * sizeof(int64_t));
        double *edist = malloc(k * sizeof(double));
        long bad_idx = 0, bad_pred = 0;
        double maxerr = 0;

        /* A rank without reference rows passes NULL for them and their labels. */
        HPMLT_CALL(hpml_knn_search(comm, re > rb ? ref + rb * d : NULL, re > rb ? lab + rb : NULL,
                                   re - rb, qry + qb * d, nql, d, k, idx, dist, pred, NULL, NULL));
        for (size_t i = 0; i < nql; i++) {
            int64_t best = 0;
            size_t bestn = 0;

            naive(ref, nref, qry + (qb + i) * d, d, k, eidx, edist);
            for (size_t t = 0; t < k; t++) {
                bad_idx += idx[i * k + t] != eidx[t];
                maxerr = fmax(maxerr, fabs(dist[i * k + t] - edist[t]));
            }
            for (size_t a = 0; a < k; a++) { /* majority, smallest label on ties */
                size_t n = 0;
                for (size_t b = 0; b < k; b++)
                    n += lab[eidx[b]] == lab[eidx[a]];
                if (n > bestn || (n == bestn && lab[eidx[a]] < best)) {
                    best = lab[eidx[a]];
                    bestn = n;
                }
            }
            bad_pred += pred[i] != best;
        }
        HPMLT_CHECK(bad_idx == 0, "%s: %ld wrong indices", what, bad_idx);
        HPMLT_CHECK(maxerr <= 1e-12, "%s: distance error %g", what, maxerr);
        HPMLT_CHECK(bad_pred == 0, "%s: %ld wrong predictions", what, bad_pred);
        free(idx);
        free(pred);
        free(dist);
        free(eidx);
        free(edist);
    }
    free(ref);
    free(qry);
    free(lab);
}

int main(int argc, char **argv)
{
    hpml_comm_t *comm = NULL;
    int64_t idx[4];
    double one[2] = {0, 0};
    int rc;

    hpmlt_init(&argc, &argv, "test_knn");
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &comm));
    run_case(comm, "random", 157, 61, 7, 5, 0, 1, 1.0);
    run_case(comm, "ties", 83, 29, 2, 9, 1, 2, 1.0);          /* 9 grid points: many exact ties */
    run_case(comm, "tiny reference", 2, 13, 3, 2, 0, 3, 1.0); /* ranks without reference rows */
    run_case(comm, "one reference row", 1, 9, 3, 1, 0, 10, 1.0);
    run_case(comm, "k = n", 11, 5, 4, 11, 0, 4, 1.0);
    /* d = 3000: 699-row broadcast chunks, so every block (700 rows or more at 1-3 ranks) is
     * sent in pieces. */
    run_case(comm, "wide, chunked", 2100, 7, 3000, 3, 0, 5, 1.0);
    /* Values beyond 2^40 take the DGEMM path; values near 1e-30 underflow in the SGEMM
     * (their products do), which the absolute bound must cover. */
    run_case(comm, "huge values", 700, 150, 5, 4, 0, 6, 1e13);
    run_case(comm, "tiny values", 500, 40, 5, 4, 0, 7, 1e-30);
    /* Several broadcast chunks, query tiles and reference blocks, with every scan (AVX-512,
     * AVX2, portable, as the CPU has them) and both GEMM precisions. */
    for (int f64 = 0; f64 < 2; f64++) {
        setenv("HPML_KNN_DGEMM", f64 ? "1" : "0", 1);
        for (int path = 0; path < 3; path++) {
            if (path == 1 && !(hpml_cpu_has_avx2() && hpml_cpu_has_f16c() && hpml_cpu_has_fma()))
                continue;
            HPMLT_CALL(hpml_simd_select(path == 0   ? HPML_SIMD_AUTO
                                        : path == 1 ? HPML_SIMD_AVX2
                                                    : HPML_SIMD_PORTABLE));
            run_case(comm, f64 ? "blocked, f64" : "blocked, f32", 4301, 301, 13, 5, 0, 8, 1.0);
            run_case(comm, "ties, blocked", 2500, 140, 2, 7, 1, 9, 1.0);
        }
    }
    HPMLT_CALL(hpml_simd_select(HPML_SIMD_AUTO));
    unsetenv("HPML_KNN_DGEMM");

    /* k larger than the reference set: HPML_ERR_INVAL on every rank, no hang. */
    rc = hpml_knn_search(comm, one, NULL, hpmlt_rank() == 0 ? 1 : 0, one, 1, 2, 4, idx, NULL, NULL,
                         NULL, NULL);
    HPMLT_CHECK(rc == HPML_ERR_INVAL, "k > n returned %d", rc);
    rc = hpml_knn_search(comm, one, NULL, 1, one, 1, 2, 1, idx, NULL, (int64_t *)idx, NULL, NULL);
    HPMLT_CHECK(rc == HPML_ERR_INVAL, "pred without labels returned %d", rc);
    /* Only the last rank has rows and gives no labels: predictions fail everywhere, a
     * search without them succeeds. */
    {
        int last = hpmlt_rank() == hpmlt_size() - 1;
        int64_t lab1 = 5;

        rc = hpml_knn_search(comm, one, last ? NULL : &lab1, last ? 1 : 0, one, 1, 2, 1, idx, NULL,
                             idx + 1, NULL, NULL);
        HPMLT_CHECK(rc == HPML_ERR_INVAL, "pred, labels missing on the rank with rows: %d", rc);
        HPMLT_CALL(hpml_knn_search(comm, one, last ? NULL : &lab1, last ? 1 : 0, one, 1, 2, 1, idx,
                                   NULL, NULL, NULL, NULL));
        HPMLT_CHECK(idx[0] == 0, "search without labels: index %lld", (long long)idx[0]);
    }
    hpml_comm_destroy(comm);
    return hpmlt_finish();
}
