/*
 * Linear and ridge regression by the normal equations on row-distributed data:
 * (Xc'Xc + alpha I) W = Xc'yc with Xc, yc centred by allreduced means (scikit-learn's
 * fit_intercept), solved by Cholesky (dpotrf/dpotrs); intercept = mean(y) - mean(X) W.
 * Cost per rank: rows*d^2 flops; two allreduces (means, then d^2 + d*t centred sums).
 */
#include <cblas.h>
#include <lapacke.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "hpml/linear.h"

/* Below this fraction of its own squared norm a pivot means the column is (numerically)
 * in the span of the earlier ones. */
#define LINREG_PIVOT_RTOL 1e-12

void hpml_linreg_destroy(hpml_linreg_t *m)
{
    if (m == NULL)
        return;
    hpml_free(m->coef);
    hpml_free(m->intercept);
    hpml_free(m);
}

int hpml_linreg_fit(hpml_comm_t *comm, const double *x, const double *y, size_t rows, size_t d,
                    size_t t, const hpml_linreg_config_t *cfg, hpml_linreg_t **out)
{
    hpml_linreg_t *m = NULL;
    double *mean = NULL, *a = NULL, *xc = NULL, *yc = NULL, *diag = NULL;
    size_t n;
    int rc = 0;
    lapack_int info;

    *out = NULL;
    if (d == 0 || t == 0 || d > INT_MAX || t > INT_MAX || rows > INT_MAX || !(cfg->alpha >= 0))
        return hpml_set_error(HPML_ERR_INVAL, "linreg: invalid sizes or alpha");
    mean = hpml_calloc(d + t + 1, sizeof(double));
    /* a = [X'X (d x d) | X'y (d x t)] reduced in one message */
    a = hpml_calloc(d * (d + t), sizeof(double));
    xc = hpml_malloc((rows ? rows : 1) * d * sizeof(double));
    yc = hpml_malloc((rows ? rows : 1) * t * sizeof(double));
    diag = hpml_malloc(d * sizeof(double));
    m = hpml_calloc(1, sizeof(*m));
    if (m != NULL) {
        m->coef = hpml_calloc(t * d, sizeof(double));
        m->intercept = hpml_calloc(t, sizeof(double));
    }
    if (!mean || !a || !xc || !yc || !diag || !m || !m->coef || !m->intercept)
        rc = hpml_set_error(HPML_ERR_NOMEM, "linreg: out of memory for %zu rows of %zu features",
                            rows, d);
    if ((rc = hpml_comm_agree(comm, rc)) != 0)
        goto out;
    for (size_t i = 0; i < rows; i++) {
        for (size_t j = 0; j < d; j++)
            mean[j] += x[i * d + j];
        for (size_t j = 0; j < t; j++)
            mean[d + j] += y[i * t + j];
    }
    mean[d + t] = (double)rows;
    if ((rc = hpml_allreduce(HPML_IN_PLACE, mean, d + t + 1, HPML_F64, HPML_SUM, comm)) != 0)
        goto out;
    n = (size_t)mean[d + t];
    if (n == 0) {
        rc = hpml_set_error(HPML_ERR_INVAL, "linreg: no rows");
        goto out;
    }
    for (size_t j = 0; j < d + t; j++)
        mean[j] = cfg->fit_intercept ? mean[j] / (double)n : 0.0;
    for (size_t i = 0; i < rows; i++) {
        for (size_t j = 0; j < d; j++)
            xc[i * d + j] = x[i * d + j] - mean[j];
        for (size_t j = 0; j < t; j++)
            yc[i * t + j] = y[i * t + j] - mean[d + j];
    }
    if (rows > 0) {
        /* rows 0..d-1 of a, leading dimension d+t: X'X in the first d columns, X'y after */
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, (int)rows, 1.0, xc, (int)d, 0.0,
                    a, (int)(d + t));
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)d, (int)t, (int)rows, 1.0, xc,
                    (int)d, yc, (int)t, 0.0, a + d, (int)(d + t));
    }
    if ((rc = hpml_allreduce(HPML_IN_PLACE, a, d * (d + t), HPML_F64, HPML_SUM, comm)) != 0)
        goto out;
    for (size_t j = 0; j < d; j++) {
        diag[j] = a[j * (d + t) + j];
        a[j * (d + t) + j] += cfg->alpha;
    }
    if (cfg->alpha == 0.0) {
        /* A constant column is detected exactly (global min == max), not by a threshold
         * on its centred sum of squares, which rounding of the mean makes unreliable. */
        double *ext = hpml_malloc(2 * d * sizeof(double)); /* max_j, then -min_j */

        if (ext == NULL) {
            rc = HPML_ERR_NOMEM;
            goto out;
        }
        for (size_t j = 0; j < d; j++)
            ext[j] = ext[d + j] = -HUGE_VAL;
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < d; j++) {
                ext[j] = fmax(ext[j], x[i * d + j]);
                ext[d + j] = fmax(ext[d + j], -x[i * d + j]);
            }
        rc = hpml_allreduce(HPML_IN_PLACE, ext, 2 * d, HPML_F64, HPML_MAX, comm);
        for (size_t j = 0; rc == 0 && j < d; j++)
            if (ext[j] == -ext[d + j] && (cfg->fit_intercept || ext[j] == 0.0))
                rc = hpml_set_error(HPML_ERR_NUMERIC, "X'X is singular: feature column %zu is %s",
                                    j, cfg->fit_intercept ? "constant" : "all zero");
        hpml_free(ext);
        if (rc != 0)
            goto out;
    }
    info = LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'U', (lapack_int)d, a, (lapack_int)(d + t));
    if (info == 0 && cfg->alpha == 0.0)
        for (size_t j = 0; j < d; j++) {
            double p = a[j * (d + t) + j];

            if (p * p <= LINREG_PIVOT_RTOL * diag[j]) {
                info = (lapack_int)j + 1;
                break;
            }
        }
    if (info != 0) {
        rc = hpml_set_error(HPML_ERR_NUMERIC,
                            "X'X is singular: feature column %d is collinear with earlier "
                            "columns",
                            (int)info - 1);
        goto out;
    }
    if (LAPACKE_dpotrs(LAPACK_ROW_MAJOR, 'U', (lapack_int)d, (lapack_int)t, a, (lapack_int)(d + t),
                       a + d, (lapack_int)(d + t)) != 0) {
        rc = hpml_set_error(HPML_ERR_NUMERIC, "linreg: Cholesky solve failed");
        goto out;
    }
    for (size_t j = 0; j < t; j++) {
        double b = mean[d + j];

        for (size_t i = 0; i < d; i++) {
            m->coef[j * d + i] = a[i * (d + t) + d + j];
            b -= mean[i] * m->coef[j * d + i];
        }
        m->intercept[j] = cfg->fit_intercept ? b : 0.0;
    }
    m->n_samples = n;
    m->n_features = d;
    m->n_targets = t;
    *out = m;
    m = NULL;
out:
    hpml_linreg_destroy(m);
    hpml_free(mean);
    hpml_free(a);
    hpml_free(xc);
    hpml_free(yc);
    hpml_free(diag);
    return rc;
}

int hpml_linreg_predict(const hpml_linreg_t *m, const double *x, size_t rows, double *pred)
{
    size_t d = m->n_features, t = m->n_targets;

    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < t; j++)
            pred[i * t + j] = m->intercept[j];
    if (rows > 0)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)t, (int)d, 1.0, x,
                    (int)d, m->coef, (int)d, 1.0, pred, (int)t);
    return 0;
}

int hpml_r2_score(hpml_comm_t *comm, const double *y, const double *pred, size_t rows, size_t t,
                  double *r2)
{
    double *s = hpml_calloc(2 * t + 1, sizeof(double)), *ss;
    int rc;

    if (s == NULL)
        return HPML_ERR_NOMEM;
    ss = hpml_calloc(2 * t, sizeof(double));
    if (ss == NULL) {
        hpml_free(s);
        return HPML_ERR_NOMEM;
    }
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < t; j++)
            s[j] += y[i * t + j];
    s[2 * t] = (double)rows;
    if ((rc = hpml_allreduce(HPML_IN_PLACE, s, 2 * t + 1, HPML_F64, HPML_SUM, comm)) != 0)
        goto out;
    /* ss[j]: residual sum of squares; ss[t + j]: total sum of squares about the mean */
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < t; j++) {
            double r = y[i * t + j] - pred[i * t + j], c = y[i * t + j] - s[j] / s[2 * t];
            ss[j] += r * r;
            ss[t + j] += c * c;
        }
    if ((rc = hpml_allreduce(HPML_IN_PLACE, ss, 2 * t, HPML_F64, HPML_SUM, comm)) != 0)
        goto out;
    *r2 = 0.0;
    for (size_t j = 0; j < t; j++) {
        double v;

        if (ss[t + j] != 0.0)
            v = 1.0 - ss[j] / ss[t + j];
        else
            v = ss[j] == 0.0 ? 1.0 : 0.0;
        *r2 += v / (double)t;
    }
out:
    hpml_free(s);
    hpml_free(ss);
    return rc;
}
