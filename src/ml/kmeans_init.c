/*
 * K-Means initialisation over distributed rows: greedy k-means++ (scikit-learn's
 * _kmeans_plusplus: 2 + ln k candidates per centre, keep the one that lowers the
 * potential most), uniform random rows, and k-means|| (Bahmani et al., "Scalable
 * K-Means++", VLDB 2012) for large data.
 *
 * Every rank draws the same random numbers (one stream per run), so the choices need no
 * broadcast: the decisions are taken from allgathered per-rank partial sums that every
 * rank adds up in the same order. Cost of k-means++: k passes over the data, each one
 * GEMM against the candidates, and two small collectives per centre.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hpml/comm.h"
#include "hpml/core.h"
#include "ml/kmeans_internal.h"

int hpml__km_fetch_rows(const km_data_t *D, const int64_t *gidx, size_t m, double *out)
{
    size_t d = D->d;

    memset(out, 0, m * d * sizeof(double));
    for (size_t t = 0; t < m; t++) {
        int64_t g = gidx[t];
        if (g >= (int64_t)D->offset && g < (int64_t)(D->offset + D->rows))
            hpml__km_row(D, (size_t)g - D->offset, out + t * d);
    }
    /* Only the owner contributes a non-zero row: the sum is exact. */
    return hpml_allreduce(HPML_IN_PLACE, out, m * d, HPML_F64, HPML_SUM, D->comm);
}

/* Locate r in the global cumulative sum of w (rank order): the owner rank sets *local
 * to the first local index whose running sum reaches r (numpy.searchsorted, side=left,
 * clipped to the last row). pots: per-rank totals, identical on every rank. Returns the
 * owner rank. */
static int locate(const km_data_t *D, const double *pots, const double *cum, double r,
                  size_t *local)
{
    double acc = 0.0;
    int owner = -1, last = -1;

    for (int q = 0; q < D->size; q++) {
        if (D->rank_rows[q] > 0)
            last = q;
        if (owner < 0 && D->rank_rows[q] > 0 && acc + pots[q] >= r) {
            owner = q;
            break;
        }
        acc += pots[q];
    }
    if (owner < 0) { /* rounding: clip to the last row, as scikit-learn does */
        owner = last;
        if (owner == D->rank)
            *local = D->rows - 1;
        return owner;
    }
    if (owner == D->rank) {
        double rr = r - acc;
        size_t lo = 0, hi = D->rows; /* first i with cum[i] >= rr */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (cum[mid] >= rr)
                hi = mid;
            else
                lo = mid + 1;
        }
        *local = lo < D->rows ? lo : D->rows - 1;
    }
    return owner;
}

int hpml__km_init_kmeanspp(const km_data_t *D, size_t k, int trials, uint64_t seed, uint64_t stream,
                           double *C, int64_t *indices)
{
    size_t n = D->rows, d = D->d, L;
    double *closest = NULL, *cum = NULL, *dist = NULL, *cand = NULL, *lpot = NULL;
    double *pots = NULL, *gpots = NULL;
    int64_t *gidx = NULL;
    hpml_rng_t rng;
    int rc = HPML_ERR_NOMEM;

    L = trials > 0 ? (size_t)trials : 2 + (size_t)log((double)k);
    hpml_rng_init(&rng, seed, stream);
    closest = hpml_malloc(n * sizeof(double));
    cum = hpml_malloc(n * sizeof(double));
    dist = hpml_malloc(L * n * sizeof(double));
    cand = hpml_malloc(L * (d + 1) * sizeof(double));
    lpot = hpml_malloc(L * sizeof(double));
    pots = hpml_malloc((size_t)D->size * L * sizeof(double));
    gpots = hpml_malloc((size_t)D->size * sizeof(double));
    gidx = hpml_malloc(L * sizeof(int64_t));
    if (!closest || !cum || !dist || !cand || !lpot || !pots || !gpots || !gidx)
        goto out;

    /* First centre: uniform. */
    gidx[0] = (int64_t)hpml_rng_below(&rng, D->total);
    if ((rc = hpml__km_fetch_rows(D, gidx, 1, C)) != 0)
        goto out;
    if (indices)
        indices[0] = gidx[0];
    if ((rc = hpml__km_dists(D, C, 1, closest)) != 0)
        goto out;
    lpot[0] = 0.0;
    for (size_t i = 0; i < n; i++)
        lpot[0] += closest[i];
    if ((rc = hpml_allgather(lpot, gpots, 1, HPML_F64, D->comm)) != 0)
        goto out;

    for (size_t c = 1; c < k; c++) {
        double total = 0.0, best_pot = 0.0;
        size_t best = 0;

        for (int q = 0; q < D->size; q++)
            total += gpots[q];
        {
            double run = 0.0;
            for (size_t i = 0; i < n; i++) {
                run += closest[i];
                cum[i] = run;
            }
        }
        for (size_t t = 0; t < L; t++) {
            double r = hpml_rng_uniform(&rng) * total;
            size_t li = 0;
            int owner = locate(D, gpots, cum, r, &li);
            gidx[t] = owner == D->rank ? (int64_t)(D->offset + li) : -1;
        }
        /* Candidate rows and their global indices in one allreduce: row t of cand is
         * [gidx+1, x...] from the owner, zeros elsewhere. */
        memset(cand, 0, L * (d + 1) * sizeof(double));
        for (size_t t = 0; t < L; t++)
            if (gidx[t] >= 0) {
                cand[t * (d + 1)] = (double)(gidx[t] + 1);
                hpml__km_row(D, (size_t)gidx[t] - D->offset, cand + t * (d + 1) + 1);
            }
        if ((rc = hpml_allreduce(HPML_IN_PLACE, cand, L * (d + 1), HPML_F64, HPML_SUM, D->comm)) !=
            0)
            goto out;
        for (size_t t = 0; t < L; t++) {
            gidx[t] = (int64_t)cand[t * (d + 1)] - 1;
            memmove(cand + t * d, cand + t * (d + 1) + 1, d * sizeof(double));
        }
        if ((rc = hpml__km_dists(D, cand, L, dist)) != 0)
            goto out;
        for (size_t t = 0; t < L; t++) {
            double s = 0.0;
            double *dt = dist + t * n;
            for (size_t i = 0; i < n; i++) {
                if (closest[i] < dt[i])
                    dt[i] = closest[i];
                s += dt[i];
            }
            lpot[t] = s;
        }
        /* Per-rank potentials of every candidate: the global potential (summed in rank
         * order, the same on every rank) picks the best, and its per-rank split drives
         * the next sampling. */
        if ((rc = hpml_allgather(lpot, pots, L, HPML_F64, D->comm)) != 0)
            goto out;
        for (size_t t = 0; t < L; t++) {
            double s = 0.0;
            for (int q = 0; q < D->size; q++)
                s += pots[(size_t)q * L + t];
            if (t == 0 || s < best_pot) {
                best_pot = s;
                best = t;
            }
        }
        for (int q = 0; q < D->size; q++)
            gpots[q] = pots[(size_t)q * L + best];
        memcpy(closest, dist + best * n, n * sizeof(double));
        memcpy(C + c * d, cand + best * d, d * sizeof(double));
        if (indices)
            indices[c] = gidx[best];
    }
    rc = 0;
out:
    hpml_free(closest);
    hpml_free(cum);
    hpml_free(dist);
    hpml_free(cand);
    hpml_free(lpot);
    hpml_free(pots);
    hpml_free(gpots);
    hpml_free(gidx);
    return rc;
}

/* k distinct indices below n, in draw order. */
static int distinct_indices(hpml_rng_t *rng, size_t k, size_t n, int64_t *out)
{
    if (k * 2 >= n) { /* small population: partial Fisher-Yates */
        int64_t *p = hpml_malloc(n * sizeof(int64_t));
        if (p == NULL)
            return HPML_ERR_NOMEM;
        for (size_t i = 0; i < n; i++)
            p[i] = (int64_t)i;
        for (size_t i = 0; i < k; i++) {
            size_t j = i + (size_t)hpml_rng_below(rng, n - i);
            int64_t t = p[i];
            p[i] = p[j];
            p[j] = t;
            out[i] = p[i];
        }
        hpml_free(p);
        return 0;
    }
    /* rejection with an open-addressing set (at most half full) */
    size_t cap = 16;
    while (cap < 4 * k)
        cap *= 2;
    int64_t *set = hpml_malloc(cap * sizeof(int64_t));
    if (set == NULL)
        return HPML_ERR_NOMEM;
    for (size_t i = 0; i < cap; i++)
        set[i] = -1;
    for (size_t i = 0; i < k;) {
        int64_t v = (int64_t)hpml_rng_below(rng, n);
        size_t h = (size_t)((uint64_t)v * 0x9E3779B97F4A7C15ull) & (cap - 1);
        while (set[h] >= 0 && set[h] != v)
            h = (h + 1) & (cap - 1);
        if (set[h] == v)
            continue;
        set[h] = v;
        out[i++] = v;
    }
    hpml_free(set);
    return 0;
}

int hpml__km_init_random(const km_data_t *D, size_t k, uint64_t seed, uint64_t stream, double *C,
                         int64_t *indices)
{
    int64_t *idx = hpml_malloc(k * sizeof(int64_t));
    hpml_rng_t rng;
    int rc;

    if (idx == NULL)
        return HPML_ERR_NOMEM;
    hpml_rng_init(&rng, seed, stream);
    rc = distinct_indices(&rng, k, D->total, idx);
    if (rc == 0)
        rc = hpml__km_fetch_rows(D, idx, k, C);
    if (rc == 0 && indices)
        memcpy(indices, idx, k * sizeof(int64_t));
    hpml_free(idx);
    return rc;
}

/* Uniform in [0, 1) from (seed, stream, round, global row): the k-means|| sample of a
 * row does not depend on how the rows are split across ranks. */
static double hash_uniform(uint64_t seed, uint64_t stream, uint64_t round, uint64_t row)
{
    uint64_t z = seed ^ (stream * 0xD1B54A32D192ED03ull) ^ (round * 0xABC98388FB8FAC03ull) ^
                 (row * 0x9E3779B97F4A7C15ull);
    for (int i = 0; i < 2; i++) { /* splitmix64 finaliser, twice */
        z += 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
    }
    return (double)(z >> 11) * 0x1.0p-53;
}

/* out (m x nb) = squared distances between rows of A and rows of B (double, local). */
static void local_dists(const double *A, size_t m, const double *B, size_t nb, size_t d,
                        double *out)
{
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)nb, (int)d, -2.0, A, (int)d,
                B, (int)d, 0.0, out, (int)nb);
    for (size_t i = 0; i < m; i++) {
        double an = 0.0;
        for (size_t c = 0; c < d; c++)
            an += A[i * d + c] * A[i * d + c];
        for (size_t j = 0; j < nb; j++) {
            double bn = 0.0;
            for (size_t c = 0; c < d; c++)
                bn += B[j * d + c] * B[j * d + c];
            double v = out[i * nb + j] + an + bn;
            out[i * nb + j] = v > 0.0 ? v : 0.0;
        }
    }
}

/* Weighted greedy k-means++ and then weighted Lloyd on a small local point set P (np x
 * d, weights w): the reclustering step of k-means||. Deterministic, so every rank gets
 * the same centres. */
static int recluster(const double *P, const double *w, size_t np, size_t d, size_t k, size_t L,
                     hpml_rng_t *rng, double *C)
{
    double *closest = hpml_malloc(np * sizeof(double));
    double *dist = hpml_malloc(L * np * sizeof(double));
    double *cum = hpml_malloc(np * sizeof(double));
    double *sums = hpml_malloc(k * (d + 1) * sizeof(double));
    double *dk = hpml_malloc(k * np * sizeof(double));
    size_t *pick = hpml_malloc(L * sizeof(size_t));
    int rc = HPML_ERR_NOMEM;

    if (!closest || !dist || !cum || !sums || !dk || !pick)
        goto out;
    {
        /* first centre with probability proportional to the weight */
        double tw = 0.0, r, run = 0.0;
        size_t i0 = np - 1;
        for (size_t i = 0; i < np; i++)
            tw += w[i];
        r = hpml_rng_uniform(rng) * tw;
        for (size_t i = 0; i < np; i++) {
            run += w[i];
            if (run >= r && w[i] > 0.0) {
                i0 = i;
                break;
            }
        }
        memcpy(C, P + i0 * d, d * sizeof(double));
    }
    local_dists(C, 1, P, np, d, closest);
    for (size_t c = 1; c < k; c++) {
        double pot = 0.0, best_pot = 0.0;
        size_t best = 0;
        for (size_t i = 0; i < np; i++) {
            pot += w[i] * closest[i];
            cum[i] = pot;
        }
        for (size_t t = 0; t < L; t++) {
            double r = hpml_rng_uniform(rng) * pot;
            size_t lo = 0, hi = np;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (cum[mid] >= r)
                    hi = mid;
                else
                    lo = mid + 1;
            }
            pick[t] = lo < np ? lo : np - 1;
            memcpy(sums + t * d, P + pick[t] * d, d * sizeof(double)); /* scratch */
        }
        local_dists(sums, L, P, np, d, dist);
        for (size_t t = 0; t < L; t++) {
            double s = 0.0;
            for (size_t i = 0; i < np; i++) {
                double v = dist[t * np + i] < closest[i] ? dist[t * np + i] : closest[i];
                dist[t * np + i] = v;
                s += w[i] * v;
            }
            if (t == 0 || s < best_pot) {
                best_pot = s;
                best = t;
            }
        }
        memcpy(closest, dist + best * np, np * sizeof(double));
        memcpy(C + c * d, P + pick[best] * d, d * sizeof(double));
    }
    for (int it = 0; it < 30; it++) { /* weighted Lloyd, as Spark's LocalKMeans */
        double moved = 0.0;
        local_dists(C, k, P, np, d, dk);
        memset(sums, 0, k * (d + 1) * sizeof(double));
        for (size_t i = 0; i < np; i++) {
            size_t b = 0;
            for (size_t j = 1; j < k; j++)
                if (dk[j * np + i] < dk[b * np + i])
                    b = j;
            for (size_t c = 0; c < d; c++)
                sums[b * (d + 1) + c] += w[i] * P[i * d + c];
            sums[b * (d + 1) + d] += w[i];
        }
        for (size_t j = 0; j < k; j++) {
            double wj = sums[j * (d + 1) + d];
            if (wj <= 0.0)
                continue; /* keep an empty centre where it is */
            for (size_t c = 0; c < d; c++) {
                double v = sums[j * (d + 1) + c] / wj;
                moved += (v - C[j * d + c]) * (v - C[j * d + c]);
                C[j * d + c] = v;
            }
        }
        if (moved == 0.0)
            break;
    }
    rc = 0;
out:
    hpml_free(closest);
    hpml_free(dist);
    hpml_free(cum);
    hpml_free(sums);
    hpml_free(dk);
    hpml_free(pick);
    return rc;
}

int hpml__km_init_parallel(const km_data_t *D, size_t k, int rounds, double oversampling,
                           int trials, uint64_t seed, uint64_t stream, double *C)
{
    size_t n = D->rows, d = D->d, ncand = 0, cap = 0, P = (size_t)D->size;
    size_t L = trials > 0 ? (size_t)trials : 2 + (size_t)log((double)k);
    double l = (oversampling > 0.0 ? oversampling : 2.0) * (double)k, phi = 0.0;
    double *cands = NULL, *d2 = NULL, *mind = NULL, *mine = NULL, *all = NULL, *w = NULL;
    int32_t *near = NULL, *lab = NULL;
    int64_t g0, cnt, *counts = NULL;
    hpml_rng_t rng;
    int rc = HPML_ERR_NOMEM, R = rounds > 0 ? rounds : 5;

    hpml_rng_init(&rng, seed, stream);
    cap = 1 + (size_t)(l * 1.5 * R) + 16;
    cands = hpml_malloc(cap * d * sizeof(double));
    d2 = hpml_malloc((n ? n : 1) * sizeof(double));
    mind = hpml_malloc((n ? n : 1) * sizeof(double));
    near = hpml_malloc((n ? n : 1) * sizeof(int32_t));
    lab = hpml_malloc((n ? n : 1) * sizeof(int32_t));
    counts = hpml_malloc(P * sizeof(int64_t));
    if (!cands || !d2 || !mind || !near || !lab || !counts)
        goto out;

    g0 = (int64_t)hpml_rng_below(&rng, D->total);
    if ((rc = hpml__km_fetch_rows(D, &g0, 1, cands)) != 0)
        goto out;
    ncand = 1;
    if ((rc = hpml__km_dists(D, cands, 1, d2)) != 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        near[i] = 0;
        phi += d2[i];
    }
    if ((rc = hpml_allreduce(HPML_IN_PLACE, &phi, 1, HPML_F64, HPML_SUM, D->comm)) != 0)
        goto out;

    for (int r = 0; r < R && phi > 0.0; r++) {
        size_t maxm = 0, M = 0, m = 0;
        for (size_t i = 0; i < n; i++)
            if (hash_uniform(seed, stream, (uint64_t)r, D->offset + i) < l * d2[i] / phi)
                m++;
        cnt = (int64_t)m;
        if ((rc = hpml_allgather(&cnt, counts, 1, HPML_I64, D->comm)) != 0)
            goto out;
        for (size_t q = 0; q < P; q++) {
            M += (size_t)counts[q];
            if ((size_t)counts[q] > maxm)
                maxm = (size_t)counts[q];
        }
        if (M == 0)
            continue;
        rc = HPML_ERR_NOMEM;
        hpml_free(mine);
        hpml_free(all);
        mine = hpml_calloc(maxm * d, sizeof(double));
        all = hpml_malloc(P * maxm * d * sizeof(double));
        if (!mine || !all)
            goto out;
        for (size_t i = 0, t = 0; i < n; i++)
            if (hash_uniform(seed, stream, (uint64_t)r, D->offset + i) < l * d2[i] / phi)
                hpml__km_row(D, i, mine + (t++) * d);
        if ((rc = hpml_allgather(mine, all, maxm * d, HPML_F64, D->comm)) != 0)
            goto out;
        if (ncand + M > cap) {
            size_t ncap = (ncand + M) * 2;
            double *nc = hpml_malloc(ncap * d * sizeof(double));
            if (nc == NULL) {
                rc = HPML_ERR_NOMEM;
                goto out;
            }
            memcpy(nc, cands, ncand * d * sizeof(double));
            hpml_free(cands);
            cands = nc;
            cap = ncap;
        }
        for (size_t q = 0; q < P; q++) {
            memcpy(cands + ncand * d, all + q * maxm * d, (size_t)counts[q] * d * sizeof(double));
            ncand += (size_t)counts[q];
        }
        /* nearest of the new candidates for every row, in one fused pass */
        {
            double dummy = 0.0;
            for (size_t i = 0; i < n; i++)
                lab[i] = -1;
            if ((rc = hpml__km_assign(D, cands + (ncand - M) * d, M, lab, NULL, NULL, &dummy, NULL,
                                      mind)) != 0)
                goto out;
        }
        phi = 0.0;
        for (size_t i = 0; i < n; i++) {
            if (mind[i] < d2[i]) {
                d2[i] = mind[i];
                near[i] = (int32_t)(ncand - M) + lab[i];
            }
            phi += d2[i];
        }
        if ((rc = hpml_allreduce(HPML_IN_PLACE, &phi, 1, HPML_F64, HPML_SUM, D->comm)) != 0)
            goto out;
    }
    if (ncand < k) {
        /* Too few distinct points were sampled (tiny or duplicate-heavy data). */
        rc = hpml__km_init_kmeanspp(D, k, trials, seed, stream, C, NULL);
        goto out;
    }
    rc = HPML_ERR_NOMEM;
    w = hpml_calloc(ncand, sizeof(double));
    if (w == NULL)
        goto out;
    for (size_t i = 0; i < n; i++)
        w[near[i]] += 1.0;
    if ((rc = hpml_allreduce(HPML_IN_PLACE, w, ncand, HPML_F64, HPML_SUM, D->comm)) != 0)
        goto out;
    rc = recluster(cands, w, ncand, d, k, L, &rng, C);
out:
    hpml_free(cands);
    hpml_free(d2);
    hpml_free(mind);
    hpml_free(near);
    hpml_free(lab);
    hpml_free(counts);
    hpml_free(mine);
    hpml_free(all);
    hpml_free(w);
    return rc;
}
