/*
 * Distributed K-Means, Lloyd's algorithm as scikit-learn 1.2 runs it
 * (sklearn/cluster/_kmeans.py _kmeans_single_lloyd and _k_means_lloyd.pyx): per
 * iteration one fused pass over the local rows (GEMM distance tile, or for f32 with
 * k <= 16 an AVX-512 FMA kernel without BLAS; argmin, sums) and
 * one allreduce of [sums k*d | counts k | inertia | changed labels]. Cost per iteration:
 * 2*n*d*k flops and n*d elements read per rank, one allreduce of (k*d + k + 2) doubles.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hpml/comm.h"
#include "hpml/core.h"
#include "hpml/kmeans.h"
#include "ml/kmeans_internal.h"

void hpml_kmeans_params_default(hpml_kmeans_params_t *p)
{
    memset(p, 0, sizeof(*p));
    p->k = 8;
    p->init = HPML_KMEANS_INIT_KMEANSPP;
    p->max_iter = 300;
    p->tol = 1e-4;
}

int hpml_kmeans_init_parse(const char *name, hpml_kmeans_init_t *out)
{
    if (name == NULL)
        return HPML_ERR_INVAL;
    if (strcmp(name, "k-means++") == 0 || strcmp(name, "kmeans++") == 0)
        *out = HPML_KMEANS_INIT_KMEANSPP;
    else if (strcmp(name, "k-means||") == 0 || strcmp(name, "kmeans||") == 0 ||
             strcmp(name, "parallel") == 0)
        *out = HPML_KMEANS_INIT_PARALLEL;
    else if (strcmp(name, "random") == 0)
        *out = HPML_KMEANS_INIT_RANDOM;
    else
        return HPML_ERR_INVAL;
    return 0;
}

const char *hpml_kmeans_init_name(hpml_kmeans_init_t init)
{
    switch (init) {
    case HPML_KMEANS_INIT_KMEANSPP: return "k-means++";
    case HPML_KMEANS_INIT_PARALLEL: return "k-means||";
    case HPML_KMEANS_INIT_RANDOM: return "random";
    case HPML_KMEANS_INIT_ARRAY: return "array";
    }
    return "?";
}

void hpml_kmeans_result_free(hpml_kmeans_result_t *r)
{
    if (r == NULL)
        return;
    hpml_free(r->centroids);
    hpml_free(r->labels);
    memset(r, 0, sizeof(*r));
}

/* Rows per distance tile: the tile of X plus the k x tile distance block fit in about
 * 256 KiB, comfortably inside a per-core L2, so the sweep after the GEMM hits cache. */
static size_t auto_tile(size_t d, size_t k, size_t es)
{
    size_t t = (256u << 10) / ((d + k) * es);

    if (t < 32)
        t = 32;
    if (t > 2048)
        t = 2048;
    return t & ~(size_t)15;
}

static void data_free(km_data_t *D)
{
    hpml_free(D->xn);
    hpml_free(D->rank_rows);
    D->xn = NULL;
    D->rank_rows = NULL;
}

/* Fill D: sizes of every rank (one allgather), offsets, tile; norms are computed by the
 * caller once X is in its final coordinates. */
static int data_setup(km_data_t *D, hpml_comm_t *comm, hpml_dtype_t dt, const void *X, size_t rows,
                      size_t d, size_t k, size_t tile)
{
    int64_t mine = (int64_t)rows, *all = NULL;
    int rc;

    memset(D, 0, sizeof(*D));
    D->comm = comm;
    D->dtype = dt;
    D->X = X;
    D->rows = rows;
    D->d = d;
    D->rank = hpml_comm_rank(comm);
    D->size = hpml_comm_size(comm);
    D->tile = tile ? tile : auto_tile(d, k, hpml_dtype_size(dt));
    all = hpml_malloc((size_t)D->size * sizeof(int64_t));
    D->rank_rows = hpml_malloc((size_t)D->size * sizeof(size_t));
    D->xn = hpml_malloc((rows ? rows : 1) * hpml_dtype_size(dt));
    if (all == NULL || D->rank_rows == NULL || D->xn == NULL) {
        rc = HPML_ERR_NOMEM;
        goto out;
    }
    if ((rc = hpml_allgather(&mine, all, 1, HPML_I64, comm)) != 0)
        goto out;
    for (int q = 0; q < D->size; q++) {
        D->rank_rows[q] = (size_t)all[q];
        if (q < D->rank)
            D->offset += (size_t)all[q];
        D->total += (size_t)all[q];
    }
out:
    hpml_free(all);
    return rc;
}

static void data_norms(km_data_t *D)
{
    if (D->dtype == HPML_F32)
        hpml__kmeans_rownorms_f32(D->X, D->rows, D->d, D->xn);
    else
        hpml__kmeans_rownorms_f64(D->X, D->rows, D->d, D->xn);
}

/* Per-column mean (and, with var != NULL, variance) over all ranks: two allreduces. */
static int col_moments(const km_data_t *D, double *mean, double *var)
{
    int rc;

    memset(mean, 0, D->d * sizeof(double));
    if (D->dtype == HPML_F32)
        hpml__kmeans_colstats_f32(D->X, D->rows, D->d, NULL, mean);
    else
        hpml__kmeans_colstats_f64(D->X, D->rows, D->d, NULL, mean);
    if ((rc = hpml_allreduce(HPML_IN_PLACE, mean, D->d, HPML_F64, HPML_SUM, D->comm)) != 0)
        return rc;
    for (size_t c = 0; c < D->d; c++)
        mean[c] /= (double)D->total;
    if (var == NULL)
        return 0;
    memset(var, 0, D->d * sizeof(double));
    if (D->dtype == HPML_F32)
        hpml__kmeans_colstats_f32(D->X, D->rows, D->d, mean, var);
    else
        hpml__kmeans_colstats_f64(D->X, D->rows, D->d, mean, var);
    if ((rc = hpml_allreduce(HPML_IN_PLACE, var, D->d, HPML_F64, HPML_SUM, D->comm)) != 0)
        return rc;
    for (size_t c = 0; c < D->d; c++)
        var[c] /= (double)D->total;
    return 0;
}

static void shift_data(hpml_dtype_t dt, void *X, size_t rows, size_t d, const double *mean,
                       double sign)
{
    if (dt == HPML_F32)
        hpml__kmeans_shift_f32(X, rows, d, mean, sign);
    else
        hpml__kmeans_shift_f64(X, rows, d, mean, sign);
}

/* One record per candidate for relocation: [dist, global index, label, x_0 .. x_d-1]. */
static int rec_cmp(const void *a, const void *b)
{
    const double *x = a, *y = b;

    if (x[0] != y[0])
        return x[0] > y[0] ? -1 : 1; /* farthest first */
    return x[1] < y[1] ? -1 : (x[1] > y[1]);
}

/*
 * scikit-learn's _relocate_empty_clusters_dense over all ranks: each empty cluster gets
 * one of the points farthest from their (old) centres; the point's contribution moves
 * from its cluster's sums to the empty one. The n_empty farthest candidates of every rank
 * are allgathered and every rank picks the same global n_empty. *moved counts relocations.
 */
static int relocate_empty(const km_data_t *D, const double *Cold, size_t k, const int32_t *labels,
                          double *sums, double *counts, size_t *moved)
{
    size_t d = D->d, n_empty = 0, rl = d + 3, P = (size_t)D->size;
    double *dist = NULL, *mine = NULL, *all = NULL;
    int rc = 0;

    for (size_t j = 0; j < k; j++)
        n_empty += counts[j] == 0.0;
    if (n_empty == 0)
        return 0;
    rc = HPML_ERR_NOMEM;
    dist = hpml_malloc((D->rows ? D->rows : 1) * sizeof(double));
    mine = hpml_malloc(n_empty * rl * sizeof(double));
    all = hpml_malloc(P * n_empty * rl * sizeof(double));
    if (dist == NULL || mine == NULL || all == NULL)
        goto out;
    hpml__km_exact(D, Cold, labels, dist);
    /* local top n_empty by insertion into a small sorted list of records */
    for (size_t t = 0; t < n_empty; t++)
        mine[t * rl] = -1.0, mine[t * rl + 1] = 0.0, mine[t * rl + 2] = 0.0;
    for (size_t i = 0; i < D->rows; i++) {
        double rec[2] = {dist[i], (double)(D->offset + i)};
        if (rec_cmp(rec, mine + (n_empty - 1) * rl) >= 0)
            continue;
        size_t pos = n_empty - 1;
        while (pos > 0 && rec_cmp(rec, mine + (pos - 1) * rl) < 0) {
            memcpy(mine + pos * rl, mine + (pos - 1) * rl, 3 * sizeof(double));
            pos--;
        }
        mine[pos * rl] = rec[0];
        mine[pos * rl + 1] = rec[1];
        mine[pos * rl + 2] = (double)i; /* local index for now */
    }
    for (size_t t = 0; t < n_empty; t++) {
        double *r = mine + t * rl;
        if (r[0] < 0.0) {
            memset(r + 3, 0, d * sizeof(double));
            continue;
        }
        size_t li = (size_t)r[2];
        r[2] = (double)labels[li];
        hpml__km_row(D, li, r + 3);
    }
    if ((rc = hpml_allgather(mine, all, n_empty * rl, HPML_F64, D->comm)) != 0)
        goto out;
    qsort(all, P * n_empty, rl * sizeof(double), rec_cmp);
    if (all[0] <= 0.0) /* more clusters than distinct points: nothing to gain */
        goto out;
    for (size_t j = 0, t = 0; j < k && t < n_empty; j++) {
        if (counts[j] != 0.0)
            continue;
        const double *r = all + t * rl;
        t++;
        if (r[0] < 0.0)
            break;
        size_t old = (size_t)r[2];
        for (size_t c = 0; c < d; c++) {
            sums[old * d + c] -= r[3 + c];
            sums[j * d + c] = r[3 + c];
        }
        counts[j] = 1.0;
        counts[old] -= 1.0;
        (*moved)++;
    }
out:
    hpml_free(dist);
    hpml_free(mine);
    hpml_free(all);
    return rc;
}

typedef struct km_run {
    double inertia;
    int n_iter, converged, strict;
    size_t relocated;
    double seconds;      /* the whole run, final label and inertia pass included */
    double iter_seconds; /* the Lloyd iterations only */
} km_run_t;

/* One Lloyd run from C (k x d, kernel coordinates), which it updates in place. */
static int lloyd_run(const km_data_t *D, const hpml_kmeans_params_t *p, int run, double tol_abs,
                     double *C, int32_t *labels, km_run_t *res)
{
    size_t k = p->k, d = D->d, nbuf = k * d + k + 2;
    double *buf = NULL, *Cnew = NULL;
    int rc = HPML_ERR_NOMEM, it;
    double t_start = hpml_time();

    memset(res, 0, sizeof(*res));
    buf = hpml_malloc(nbuf * sizeof(double));
    Cnew = hpml_malloc(k * d * sizeof(double));
    if (buf == NULL || Cnew == NULL)
        goto out;
    for (size_t i = 0; i < D->rows; i++)
        labels[i] = -1;

    for (it = 0; it < p->max_iter; it++) {
        double t0 = hpml_time(), *sums = buf, *counts = buf + k * d, shift = 0.0;
        size_t changed = 0, nchanged;

        memset(buf, 0, nbuf * sizeof(double));
        if ((rc = hpml__km_assign(D, C, k, labels, sums, counts, &buf[k * d + k], &changed,
                                  NULL)) != 0)
            goto out;
        buf[k * d + k + 1] = (double)changed;
        if ((rc = hpml_allreduce(HPML_IN_PLACE, buf, nbuf, HPML_F64, HPML_SUM, D->comm)) != 0)
            goto out;
        nchanged = (size_t)buf[k * d + k + 1];
        if ((rc = relocate_empty(D, C, k, labels, sums, counts, &res->relocated)) != 0)
            goto out;
        for (size_t j = 0; j < k; j++) {
            /* An empty cluster that could not be refilled keeps its zero sum, i.e. moves
             * to the data mean, exactly as scikit-learn's _average_centers leaves it. */
            double inv = counts[j] > 0.0 ? 1.0 / counts[j] : 1.0;
            for (size_t c = 0; c < d; c++) {
                double v = sums[j * d + c] * inv, dv = v - C[j * d + c];
                Cnew[j * d + c] = v;
                shift += dv * dv;
            }
        }
        memcpy(C, Cnew, k * d * sizeof(double));
        res->iter_seconds += hpml_time() - t0;
        if (p->progress) {
            hpml_kmeans_progress_t pr = {run,   it + 1,   buf[k * d + k],
                                         shift, nchanged, hpml_time() - t0};
            p->progress(&pr, p->progress_user);
        }
        if (nchanged == 0) {
            res->strict = 1;
            res->converged = 1;
            break;
        }
        if (shift <= tol_abs) {
            res->converged = 1;
            break;
        }
    }
    res->n_iter = it < p->max_iter ? it + 1 : p->max_iter;
    if (!res->strict) {
        /* Labels for the final centres (scikit-learn reruns the E-step). */
        double dummy = 0.0;
        if ((rc = hpml__km_assign(D, C, k, labels, NULL, NULL, &dummy, NULL, NULL)) != 0)
            goto out;
    }
    res->inertia = hpml__km_exact(D, C, labels, NULL);
    if ((rc = hpml_allreduce(HPML_IN_PLACE, &res->inertia, 1, HPML_F64, HPML_SUM, D->comm)) != 0)
        goto out;
    rc = 0;
out:
    res->seconds = hpml_time() - t_start;
    hpml_free(buf);
    hpml_free(Cnew);
    return rc;
}

static int check_params(const hpml_kmeans_params_t *p, hpml_dtype_t dt, const void *X, size_t rows,
                        size_t cols)
{
    if (p == NULL || (dt != HPML_F32 && dt != HPML_F64))
        return hpml_set_error(HPML_ERR_INVAL, "kmeans: dtype must be f32 or f64");
    if (p->k < 1 || p->k > INT32_MAX)
        return hpml_set_error(HPML_ERR_INVAL, "kmeans: k must be at least 1");
    if (cols < 1 || cols > INT32_MAX)
        return hpml_set_error(HPML_ERR_INVAL, "kmeans: the data has no columns");
    if (rows > 0 && X == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "kmeans: no data");
    if (p->max_iter < 1)
        return hpml_set_error(HPML_ERR_INVAL, "kmeans: max_iter must be at least 1");
    if (!(p->tol >= 0.0) || !isfinite(p->tol))
        return hpml_set_error(HPML_ERR_INVAL, "kmeans: tol must be >= 0");
    if (p->n_init < 0)
        return hpml_set_error(HPML_ERR_INVAL, "kmeans: n_init must be >= 1");
    if (p->init == HPML_KMEANS_INIT_ARRAY && p->init_centroids == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "kmeans: init array missing");
    if ((int)p->init < 0 || p->init > HPML_KMEANS_INIT_ARRAY)
        return hpml_set_error(HPML_ERR_INVAL, "kmeans: unknown init method");
    return 0;
}

/* Initial centres of run `run` in kernel coordinates (mean subtracted when centred). */
static int init_centres(const km_data_t *D, const hpml_kmeans_params_t *p, int run,
                        const double *mean, double *C, int64_t *indices)
{
    size_t k = p->k, d = D->d;

    switch (p->init) {
    case HPML_KMEANS_INIT_KMEANSPP:
        return hpml__km_init_kmeanspp(D, k, p->n_local_trials, p->seed, (uint64_t)run, C, indices);
    case HPML_KMEANS_INIT_RANDOM:
        return hpml__km_init_random(D, k, p->seed, (uint64_t)run, C, indices);
    case HPML_KMEANS_INIT_PARALLEL:
        if (indices)
            for (size_t j = 0; j < k; j++)
                indices[j] = -1;
        return hpml__km_init_parallel(D, k, p->parallel_rounds, p->oversampling, p->n_local_trials,
                                      p->seed, (uint64_t)run, C);
    case HPML_KMEANS_INIT_ARRAY:
        for (size_t q = 0; q < k * d; q++) {
            double v = D->dtype == HPML_F32 ? (double)((const float *)p->init_centroids)[q]
                                            : ((const double *)p->init_centroids)[q];
            if (!isfinite(v))
                return hpml_set_error(HPML_ERR_NUMERIC,
                                      "kmeans: the initial centroids contain NaN or Inf");
            C[q] = v - (mean ? mean[q % d] : 0.0);
        }
        if (indices)
            for (size_t j = 0; j < k; j++)
                indices[j] = -1;
        return 0;
    }
    return HPML_ERR_INVAL;
}

static int finite_all(const double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return 0;
    return 1;
}

int hpml_kmeans_fit(hpml_comm_t *comm, const hpml_kmeans_params_t *p, hpml_dtype_t dtype, void *X,
                    size_t rows, size_t cols, hpml_kmeans_result_t *out)
{
    km_data_t D;
    double *mean = NULL, *var = NULL, *C = NULL, *Cbest = NULL;
    int32_t *labels = NULL, *lbest = NULL;
    int rc, centred = 0, n_init;
    km_run_t best = {0}, cur;
    size_t k, d = cols, es = hpml_dtype_size(dtype);
    double tol_abs = 0.0, t_init = 0.0, t_lloyd = 0.0, t_iter = 0.0;
    int total_iter = 0;

    memset(&D, 0, sizeof(D));
    if (out == NULL || comm == NULL)
        return HPML_ERR_INVAL;
    memset(out, 0, sizeof(*out));
    if ((rc = check_params(p, dtype, X, rows, cols)) != 0)
        return rc;
    k = p->k;
    if ((rc = data_setup(&D, comm, dtype, X, rows, d, k, p->tile_rows)) != 0)
        goto out;
    if (k > D.total) {
        rc =
            hpml_set_error(HPML_ERR_INVAL, "kmeans: k=%zu is larger than the %zu rows", k, D.total);
        goto out;
    }
    rc = HPML_ERR_NOMEM;
    mean = hpml_malloc(d * sizeof(double));
    var = hpml_malloc(d * sizeof(double));
    C = hpml_malloc(k * d * sizeof(double));
    Cbest = hpml_malloc(k * d * sizeof(double));
    labels = hpml_malloc((rows ? rows : 1) * sizeof(int32_t));
    lbest = hpml_malloc((rows ? rows : 1) * sizeof(int32_t));
    if (!mean || !var || !C || !Cbest || !labels || !lbest)
        goto out;
    if ((rc = col_moments(&D, mean, var)) != 0)
        goto out;
    if (!finite_all(mean, d) || !finite_all(var, d)) {
        /* The sums are global, so every rank sees the same verdict. */
        rc = hpml_set_error(HPML_ERR_NUMERIC, "kmeans: the data contain NaN or Inf");
        goto out;
    }
    if (p->tol > 0.0) {
        double s = 0.0;
        for (size_t c = 0; c < d; c++)
            s += var[c];
        tol_abs = p->tol * s / (double)d;
    }
    if (!p->no_center) {
        /* As scikit-learn: centring makes |x|^2 - 2x.c + |c|^2 accurate in f32. */
        shift_data(dtype, X, rows, d, mean, -1.0);
        centred = 1;
    }
    data_norms(&D);

    n_init = p->n_init;
    if (n_init == 0)
        n_init = p->init == HPML_KMEANS_INIT_RANDOM ? 10 : 1;
    if (p->init == HPML_KMEANS_INIT_ARRAY)
        n_init = 1; /* every run would start from the same centres */

    for (int run = 0; run < n_init; run++) {
        double t0 = hpml_time();
        if ((rc = init_centres(&D, p, run, centred ? mean : NULL, C, NULL)) != 0)
            goto out;
        t_init += hpml_time() - t0;
        if ((rc = lloyd_run(&D, p, run, tol_abs, C, labels, &cur)) != 0)
            goto out;
        t_lloyd += cur.seconds;
        t_iter += cur.iter_seconds;
        total_iter += cur.n_iter;
        if (run == 0 || cur.inertia < best.inertia) {
            double *tc = C;
            int32_t *tl = labels;
            best = cur;
            out->best_run = run;
            C = Cbest, Cbest = tc;
            labels = lbest, lbest = tl;
        }
    }

    out->centroids = hpml_malloc(k * d * es);
    if (out->centroids == NULL) {
        rc = HPML_ERR_NOMEM;
        goto out;
    }
    {
        double *cnt = hpml_calloc(k, sizeof(double));
        if (cnt == NULL) {
            rc = HPML_ERR_NOMEM;
            goto out;
        }
        for (size_t i = 0; i < rows; i++)
            cnt[lbest[i]] += 1.0;
        rc = hpml_allreduce(HPML_IN_PLACE, cnt, k, HPML_F64, HPML_SUM, comm);
        for (size_t j = 0; j < k; j++)
            out->empty += cnt[j] == 0.0;
        hpml_free(cnt);
        if (rc != 0)
            goto out;
    }
    for (size_t q = 0; q < k * d; q++) {
        double v = Cbest[q] + (centred ? mean[q % d] : 0.0);
        if (dtype == HPML_F32)
            ((float *)out->centroids)[q] = (float)v;
        else
            ((double *)out->centroids)[q] = v;
    }
    out->labels = lbest;
    lbest = NULL;
    out->k = k;
    out->cols = d;
    out->dtype = dtype;
    out->rows = rows;
    out->total_rows = D.total;
    out->inertia = best.inertia;
    out->n_iter = best.n_iter;
    out->converged = best.converged;
    out->strict = best.strict;
    out->relocated = best.relocated;
    out->init_seconds = t_init;
    out->lloyd_seconds = t_lloyd;
    out->iter_seconds = t_iter;
    out->total_iter = total_iter;
    rc = 0;
out:
    if (centred)
        shift_data(dtype, X, rows, d, mean, 1.0);
    if (rc != 0) {
        hpml_free(out->centroids);
        out->centroids = NULL;
    }
    data_free(&D);
    hpml_free(mean);
    hpml_free(var);
    hpml_free(C);
    hpml_free(Cbest);
    hpml_free(labels);
    hpml_free(lbest);
    return rc;
}

int hpml_kmeans_init(hpml_comm_t *comm, const hpml_kmeans_params_t *p, hpml_dtype_t dtype,
                     const void *X, size_t rows, size_t cols, void *centroids, int64_t *indices)
{
    km_data_t D;
    double *C = NULL;
    int rc;

    memset(&D, 0, sizeof(D));
    if (comm == NULL || centroids == NULL)
        return HPML_ERR_INVAL;
    if ((rc = check_params(p, dtype, X, rows, cols)) != 0)
        return rc;
    if (p->init == HPML_KMEANS_INIT_ARRAY)
        return hpml_set_error(HPML_ERR_INVAL, "kmeans: init array needs no initialisation");
    if ((rc = data_setup(&D, comm, dtype, X, rows, cols, p->k, p->tile_rows)) != 0)
        goto out;
    if (p->k > D.total) {
        rc = hpml_set_error(HPML_ERR_INVAL, "kmeans: k=%zu is larger than the %zu rows", p->k,
                            D.total);
        goto out;
    }
    data_norms(&D);
    C = hpml_malloc(p->k * cols * sizeof(double));
    if (C == NULL) {
        rc = HPML_ERR_NOMEM;
        goto out;
    }
    if ((rc = init_centres(&D, p, 0, NULL, C, indices)) != 0)
        goto out;
    for (size_t q = 0; q < p->k * cols; q++) {
        if (dtype == HPML_F32)
            ((float *)centroids)[q] = (float)C[q];
        else
            ((double *)centroids)[q] = C[q];
    }
out:
    data_free(&D);
    hpml_free(C);
    return rc;
}

int hpml_kmeans_predict(hpml_comm_t *comm, hpml_dtype_t dtype, const void *X, size_t rows,
                        size_t cols, const void *centroids, size_t k, int32_t *labels,
                        double *inertia)
{
    km_data_t D;
    double *C = NULL, inert = 0.0;
    int rc = HPML_ERR_NOMEM;

    if ((dtype != HPML_F32 && dtype != HPML_F64) || cols < 1 || k < 1 || centroids == NULL ||
        (rows > 0 && (X == NULL || labels == NULL)))
        return hpml_set_error(HPML_ERR_INVAL, "kmeans predict: invalid arguments");
    memset(&D, 0, sizeof(D));
    D.comm = comm;
    D.dtype = dtype;
    D.X = X;
    D.rows = rows;
    D.d = cols;
    D.tile = auto_tile(cols, k, hpml_dtype_size(dtype));
    D.xn = hpml_malloc((rows ? rows : 1) * hpml_dtype_size(dtype));
    C = hpml_malloc(k * cols * sizeof(double));
    if (D.xn == NULL || C == NULL)
        goto out;
    for (size_t q = 0; q < k * cols; q++)
        C[q] = dtype == HPML_F32 ? (double)((const float *)centroids)[q]
                                 : ((const double *)centroids)[q];
    data_norms(&D);
    for (size_t i = 0; i < rows; i++)
        labels[i] = -1;
    if ((rc = hpml__km_assign(&D, C, k, labels, NULL, NULL, &inert, NULL, NULL)) != 0)
        goto out;
    if (inertia != NULL) {
        /* exact distances, as scikit-learn's score */
        inert = hpml__km_exact(&D, C, labels, NULL);
        if ((rc = hpml_allreduce(HPML_IN_PLACE, &inert, 1, HPML_F64, HPML_SUM, comm)) != 0)
            goto out;
        *inertia = inert;
    }
    rc = 0;
out:
    hpml_free(D.xn);
    hpml_free(C);
    return rc;
}
