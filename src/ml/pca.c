/*
 * PCA and truncated SVD of row-distributed data.
 *
 * full: allreduce column sums, then the d x d matrix Xc'Xc (dsyrk on centred local rows),
 *       and take its top eigenpairs with LAPACK dsyevr: components are eigenvectors and
 *       singular values sqrt(eigenvalues). Cost per rank: rows*d^2 flops, one d^2 allreduce.
 * randomized: Halko-Martinsson-Tropp range finder with power iterations (scikit-learn's
 *       randomized_svd): Y = Xc Omega, orthonormalised through its allreduced l x l Gram
 *       matrix (twice, which is as stable as Householder QR at these condition numbers),
 *       then the small SVD of B = Q'Xc. Only d x l and l x l blocks are reduced.
 * Signs follow sklearn's svd_flip(u_based_decision=True), decided across ranks.
 */
#include <cblas.h>
#include <float.h>
#include <lapacke.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "hpml/decomp.h"

void hpml_pca_config_init(hpml_pca_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->n_components = 2;
    cfg->solver = HPML_PCA_FULL;
    cfg->center = 1;
    cfg->oversample = 10;
    cfg->n_iter = -1;
    cfg->seed = 0;
}

void hpml_pca_destroy(hpml_pca_t *pca)
{
    if (pca == NULL)
        return;
    hpml_free(pca->mean);
    hpml_free(pca->components);
    hpml_free(pca->explained_variance);
    hpml_free(pca->explained_variance_ratio);
    hpml_free(pca->singular_values);
    hpml_free(pca);
}

/*
 * Orthonormalise the columns of y (rows, l) through its Gram matrix: G = y'y
 * (allreduced when comm is not NULL), G = V diag(lambda) V', y <- y V diag(lambda^-1/2).
 * Directions with negligible lambda are zeroed rather than divided by ~0, so a rank-
 * deficient y yields zero columns instead of noise.
 */
static int orthonormalise(hpml_comm_t *comm, double *y, size_t rows, size_t l, double *work)
{
    double *gram = work, *vec = work + l * l, *lam = work + 2 * l * l, *tmp = lam + l;
    lapack_int m, *isuppz = NULL;
    int rc = 0;

    isuppz = hpml_malloc(2 * l * sizeof(lapack_int));
    if (isuppz == NULL)
        return HPML_ERR_NOMEM;
    memset(gram, 0, l * l * sizeof(double));
    if (rows > 0)
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)l, (int)l, (int)rows, 1.0, y,
                    (int)l, y, (int)l, 0.0, gram, (int)l);
    if (comm != NULL &&
        (rc = hpml_allreduce(HPML_IN_PLACE, gram, l * l, HPML_F64, HPML_SUM, comm)) != 0)
        goto out;
    if (LAPACKE_dsyevr(LAPACK_ROW_MAJOR, 'V', 'A', 'U', (lapack_int)l, gram, (lapack_int)l, 0, 0, 0,
                       0, 0.0, &m, lam, vec, (lapack_int)l, isuppz) != 0) {
        rc = hpml_set_error(HPML_ERR_NUMERIC, "pca: eigensolver failed on a Gram matrix");
        goto out;
    }
    for (size_t j = 0; j < l; j++) {
        double s = lam[j] > lam[l - 1] * (double)l * 1e3 * DBL_EPSILON && lam[j] > 0
                       ? 1.0 / sqrt(lam[j])
                       : 0.0;
        for (size_t i = 0; i < l; i++)
            vec[i * l + j] *= s;
    }
    for (size_t r = 0; r < rows; r++) {
        cblas_dgemv(CblasRowMajor, CblasTrans, (int)l, (int)l, 1.0, vec, (int)l, y + r * l, 1, 0.0,
                    tmp, 1);
        memcpy(y + r * l, tmp, l * sizeof(double));
    }
out:
    hpml_free(isuppz);
    return rc;
}

/*
 * sklearn's svd_flip with u_based_decision: U = Xc V / s, so column j of t = Xc V^T (local
 * rows) ranks rows like U. Find the global row with the largest |t_ij| (the lowest index
 * on ties, as numpy.argmax) and make its entry positive by flipping component j.
 */
static int flip_signs(hpml_comm_t *comm, const double *t, size_t rows, size_t k, size_t row_offset,
                      double *components, size_t d)
{
    double *buf = hpml_calloc(3 * k, sizeof(double));
    double *amax = buf, *where = buf + k, *sign = buf + 2 * k;
    int rc;

    if (buf == NULL)
        return HPML_ERR_NOMEM;
    for (size_t j = 0; j < k; j++)
        for (size_t i = 0; i < rows; i++)
            if (fabs(t[i * k + j]) > amax[j])
                amax[j] = fabs(t[i * k + j]);
    if ((rc = hpml_allreduce(HPML_IN_PLACE, amax, k, HPML_F64, HPML_MAX, comm)) != 0)
        goto out;
    for (size_t j = 0; j < k; j++) {
        where[j] = (double)SIZE_MAX;
        for (size_t i = 0; i < rows; i++)
            if (fabs(t[i * k + j]) == amax[j]) {
                where[j] = (double)(row_offset + i);
                break;
            }
    }
    if ((rc = hpml_allreduce(HPML_IN_PLACE, where, k, HPML_F64, HPML_MIN, comm)) != 0)
        goto out;
    for (size_t j = 0; j < k; j++) {
        sign[j] = 0.0;
        if (where[j] >= (double)row_offset && where[j] < (double)(row_offset + rows)) {
            size_t i = (size_t)where[j] - row_offset;
            sign[j] = t[i * k + j] < 0 ? -1.0 : 1.0;
        }
    }
    if ((rc = hpml_allreduce(HPML_IN_PLACE, sign, k, HPML_F64, HPML_SUM, comm)) != 0)
        goto out;
    for (size_t j = 0; j < k; j++)
        if (sign[j] < 0)
            for (size_t c = 0; c < d; c++)
                components[j * d + c] = -components[j * d + c];
out:
    hpml_free(buf);
    return rc;
}

/* 1 when v[0..n) holds no NaN or Inf. */
static int all_finite(const double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return 0;
    return 1;
}

/* Data whose squares overflow double precision make a covariance of Inf/NaN, from which
 * LAPACK returns garbage (seen: all-zero variances): an error instead. The matrix is
 * allreduced, so every rank decides alike. */
static int overflow_error(void)
{
    return hpml_set_error(HPML_ERR_NUMERIC,
                          "pca: the covariance overflows double precision (values too large "
                          "to square; scale the data)");
}

/* Top-k eigenpairs of the allreduced Gram/covariance matrix of xc. */
static int fit_full(hpml_comm_t *comm, const double *xc, size_t rows, size_t d, size_t k,
                    double *components, double *lambda)
{
    double *c = hpml_calloc(d * d, sizeof(double)), *w = hpml_malloc(d * sizeof(double));
    double *z = hpml_malloc(d * k * sizeof(double));
    lapack_int m, *isuppz = hpml_malloc(2 * d * sizeof(lapack_int));
    int rc = 0;

    if (!c || !w || !z || !isuppz) {
        rc = HPML_ERR_NOMEM;
        goto out;
    }
    if (rows > 0)
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, (int)rows, 1.0, xc, (int)d, 0.0,
                    c, (int)d);
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < i; j++)
            c[i * d + j] = c[j * d + i];
    if ((rc = hpml_allreduce(HPML_IN_PLACE, c, d * d, HPML_F64, HPML_SUM, comm)) != 0)
        goto out;
    if (!all_finite(c, d * d)) {
        rc = overflow_error();
        goto out;
    }
    if (LAPACKE_dsyevr(LAPACK_ROW_MAJOR, 'V', 'I', 'U', (lapack_int)d, c, (lapack_int)d, 0, 0,
                       (lapack_int)(d - k + 1), (lapack_int)d, 0.0, &m, w, z, (lapack_int)k,
                       isuppz) != 0 ||
        (size_t)m != k) {
        rc = hpml_set_error(HPML_ERR_NUMERIC, "pca: the symmetric eigensolver failed");
        goto out;
    }
    /* dsyevr returns ascending eigenvalues; components are wanted largest first. */
    for (size_t j = 0; j < k; j++) {
        size_t src = k - 1 - j;

        lambda[j] = w[src] > 0 ? w[src] : 0.0;
        for (size_t i = 0; i < d; i++)
            components[j * d + i] = z[i * k + src];
    }
out:
    hpml_free(c);
    hpml_free(w);
    hpml_free(z);
    hpml_free(isuppz);
    return rc;
}

static int fit_randomized(hpml_comm_t *comm, const double *xc, size_t rows, size_t n, size_t d,
                          size_t k, const hpml_pca_config_t *cfg, double *components,
                          double *lambda)
{
    size_t mn = n < d ? n : d, l = k + cfg->oversample;
    int n_iter = cfg->n_iter, rc = 0;
    double *omega = NULL, *y = NULL, *b = NULL, *work = NULL, *s = NULL, *u = NULL, *vt = NULL;
    hpml_rng_t rng;

    if (l > mn)
        l = mn;
    if (n_iter < 0)
        n_iter = (double)k < 0.1 * (double)mn ? 7 : 4;
    omega = hpml_malloc(d * l * sizeof(double)); /* (d, l), replicated */
    y = hpml_malloc((rows ? rows : 1) * l * sizeof(double));
    b = hpml_malloc(l * d * sizeof(double));
    work = hpml_malloc((3 * l * l + 2 * l) * sizeof(double));
    s = hpml_malloc(l * sizeof(double));
    u = hpml_malloc(l * l * sizeof(double));
    vt = hpml_malloc(l * d * sizeof(double));
    if (!omega || !y || !b || !work || !s || !u || !vt) {
        rc = HPML_ERR_NOMEM;
        goto out;
    }
    hpml_rng_init(&rng, cfg->seed, 0);
    for (size_t i = 0; i < d * l; i++)
        omega[i] = hpml_rng_normal(&rng);
    for (int it = 0; it <= n_iter; it++) {
        /* y = xc omega, orthonormalised over all ranks */
        if (rows > 0)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)l, (int)d, 1.0,
                        xc, (int)d, omega, (int)l, 0.0, y, (int)l);
        for (int pass = 0; pass < 2; pass++)
            if ((rc = orthonormalise(comm, y, rows, l, work)) != 0)
                goto out;
        if (it == n_iter)
            break;
        /* omega = xc' y (d, l), allreduced, orthonormalised locally (replicated) */
        memset(omega, 0, d * l * sizeof(double));
        if (rows > 0)
            cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)d, (int)l, (int)rows, 1.0, xc,
                        (int)d, y, (int)l, 0.0, omega, (int)l);
        if ((rc = hpml_allreduce(HPML_IN_PLACE, omega, d * l, HPML_F64, HPML_SUM, comm)) != 0)
            goto out;
        for (int pass = 0; pass < 2; pass++)
            if ((rc = orthonormalise(NULL, omega, d, l, work)) != 0)
                goto out;
    }
    /* b (l, d) = y' xc; its SVD gives the right singular vectors. */
    memset(b, 0, l * d * sizeof(double));
    if (rows > 0)
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)l, (int)d, (int)rows, 1.0, y,
                    (int)l, xc, (int)d, 0.0, b, (int)d);
    if ((rc = hpml_allreduce(HPML_IN_PLACE, b, l * d, HPML_F64, HPML_SUM, comm)) != 0)
        goto out;
    if (!all_finite(b, l * d)) {
        rc = overflow_error();
        goto out;
    }
    if (LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'S', (lapack_int)l, (lapack_int)d, b, (lapack_int)d, s, u,
                       (lapack_int)l, vt, (lapack_int)d) != 0) {
        rc = hpml_set_error(HPML_ERR_NUMERIC, "pca: the SVD of the projected matrix failed");
        goto out;
    }
    for (size_t j = 0; j < k; j++) {
        lambda[j] = s[j] * s[j];
        memcpy(components + j * d, vt + j * d, d * sizeof(double));
    }
out:
    hpml_free(omega);
    hpml_free(y);
    hpml_free(b);
    hpml_free(work);
    hpml_free(s);
    hpml_free(u);
    hpml_free(vt);
    return rc;
}

int hpml_pca_fit(hpml_comm_t *comm, const double *x, size_t rows, size_t d,
                 const hpml_pca_config_t *cfg, hpml_pca_t **out)
{
    hpml_pca_t *p = NULL;
    double *sums = NULL, *xc = NULL, *t = NULL, *lambda = NULL, *acc = NULL;
    size_t k = cfg->n_components, n, offset;
    int rc = 0;

    *out = NULL;
    if (d == 0 || d > INT_MAX / 2 || rows > INT_MAX)
        return hpml_set_error(HPML_ERR_INVAL, "pca: unsupported number of features %zu", d);
    /* column sums, row count, and this rank's row offset (exclusive prefix of counts) */
    sums = hpml_calloc(d + 2 + (size_t)hpml_comm_size(comm), sizeof(double));
    if (sums == NULL)
        return HPML_ERR_NOMEM;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < d; j++)
            sums[j] += x[i * d + j];
    sums[d] = (double)rows;
    sums[d + 2 + (size_t)hpml_comm_rank(comm)] = (double)rows;
    if ((rc = hpml_allreduce(HPML_IN_PLACE, sums, d + 2 + (size_t)hpml_comm_size(comm), HPML_F64,
                             HPML_SUM, comm)) != 0)
        goto out;
    n = (size_t)sums[d];
    offset = 0;
    for (int r = 0; r < hpml_comm_rank(comm); r++)
        offset += (size_t)sums[d + 2 + (size_t)r];
    if (k == 0 || k > (n < d ? n : d)) {
        rc = hpml_set_error(HPML_ERR_INVAL,
                            "pca: n_components = %zu must be between 1 and min(rows, columns) "
                            "= %zu",
                            k, n < d ? n : d);
        goto out;
    }
    if (cfg->center && n < 2) {
        rc = hpml_set_error(HPML_ERR_INVAL, "pca: needs at least 2 rows");
        goto out;
    }
    /* Every rank agrees, so that one out of memory leaves none in the next collective. */
    p = hpml_calloc(1, sizeof(*p));
    if ((rc = hpml_comm_agree(comm, p == NULL ? hpml_set_error(HPML_ERR_NOMEM, "pca: out of memory")
                                              : 0)) != 0)
        goto out;
    p->n_samples = n;
    p->n_features = d;
    p->n_components = k;
    p->center = cfg->center;
    p->mean = hpml_calloc(d, sizeof(double));
    p->components = hpml_malloc(k * d * sizeof(double));
    p->explained_variance = hpml_malloc(k * sizeof(double));
    p->explained_variance_ratio = hpml_malloc(k * sizeof(double));
    p->singular_values = hpml_malloc(k * sizeof(double));
    xc = hpml_malloc((rows ? rows : 1) * d * sizeof(double));
    t = hpml_malloc((rows ? rows : 1) * k * sizeof(double));
    lambda = hpml_malloc(k * sizeof(double));
    acc = hpml_calloc(d + 2 * k, sizeof(double));
    if (!p->mean || !p->components || !p->explained_variance || !p->explained_variance_ratio ||
        !p->singular_values || !xc || !t || !lambda || !acc)
        rc = hpml_set_error(HPML_ERR_NOMEM, "pca: out of memory for %zu rows of %zu features", rows,
                            d);
    if ((rc = hpml_comm_agree(comm, rc)) != 0)
        goto out;
    if (cfg->center)
        for (size_t j = 0; j < d; j++)
            p->mean[j] = sums[j] / (double)n;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < d; j++)
            xc[i * d + j] = x[i * d + j] - p->mean[j];

    if (cfg->solver == HPML_PCA_RANDOMIZED)
        rc = fit_randomized(comm, xc, rows, n, d, k, cfg, p->components, lambda);
    else
        rc = fit_full(comm, xc, rows, d, k, p->components, lambda);
    if (rc != 0)
        goto out;

    /* t = xc V^T: decides the signs, and gives TSVD's explained variance. */
    if (rows > 0)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)k, (int)d, 1.0, xc,
                    (int)d, p->components, (int)d, 0.0, t, (int)k);
    if ((rc = flip_signs(comm, t, rows, k, offset, p->components, d)) != 0)
        goto out;

    /* Second-pass sums: column variances of the data, and (TSVD) of the projections. */
    {
        double *colvar = acc, *tsum = acc + d, *tsq = acc + d + k;
        double total = 0.0;

        for (size_t i = 0; i < rows; i++) {
            for (size_t j = 0; j < d; j++) {
                double v = x[i * d + j] - sums[j] / (double)n;
                colvar[j] += v * v;
            }
            for (size_t j = 0; j < k; j++)
                tsum[j] += t[i * k + j];
        }
        if ((rc = hpml_allreduce(HPML_IN_PLACE, acc, d + k, HPML_F64, HPML_SUM, comm)) != 0)
            goto out;
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < k; j++) {
                double v = t[i * k + j] - tsum[j] / (double)n;
                tsq[j] += v * v;
            }
        if ((rc = hpml_allreduce(HPML_IN_PLACE, tsq, k, HPML_F64, HPML_SUM, comm)) != 0)
            goto out;
        for (size_t j = 0; j < d; j++)
            total += colvar[j];
        /* PCA divides by n-1 (sklearn's ddof=1); TruncatedSVD uses np.var (ddof=0). */
        total /= cfg->center ? (double)(n - 1) : (double)n;
        if (!isfinite(total) || !all_finite(tsq, k)) {
            rc = overflow_error();
            goto out;
        }
        p->total_variance = total;
        for (size_t j = 0; j < k; j++) {
            p->singular_values[j] = sqrt(lambda[j]);
            p->explained_variance[j] =
                cfg->center ? lambda[j] / (double)(n - 1) : tsq[j] / (double)n;
            p->explained_variance_ratio[j] = total > 0 ? p->explained_variance[j] / total : 0.0;
        }
    }
    *out = p;
    p = NULL;
out:
    hpml_pca_destroy(p);
    hpml_free(sums);
    hpml_free(xc);
    hpml_free(t);
    hpml_free(lambda);
    hpml_free(acc);
    return rc;
}

int hpml_pca_transform(const hpml_pca_t *pca, const double *x, size_t rows, double *out)
{
    size_t d = pca->n_features, k = pca->n_components;
    double *mv;

    if (rows == 0)
        return 0;
    mv = hpml_malloc(k * sizeof(double));
    if (mv == NULL)
        return HPML_ERR_NOMEM;
    /* (x - mean) V^T = x V^T - V mean, without a centred copy of x */
    cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)k, (int)d, 1.0, pca->components, (int)d,
                pca->mean, 1, 0.0, mv, 1);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)k, (int)d, 1.0, x, (int)d,
                pca->components, (int)d, 0.0, out, (int)k);
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < k; j++)
            out[i * k + j] -= mv[j];
    return 0;
}
