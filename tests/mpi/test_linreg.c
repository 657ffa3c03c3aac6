/*
 * hpml_linreg_fit on distributed rows: the distributed fit equals the one-rank fit of the
 * whole data; noise-free data is recovered exactly;
 * ridge satisfies its normal equations; R^2; singular X'X is reported (constant and
 * collinear columns) on every rank.
 * hpml-test: ranks=1 2 3 4
 * hpml-test: mpich-ranks=1 2 3
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hpml/io.h"
#include "hpml/linear.h"

#define N 187
#define D 6
#define T 2

static double maxdiff(const double *a, const double *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i] - b[i]));
    return m;
}

int main(int argc, char **argv)
{
    hpml_comm_t *comm = NULL, *self = NULL;
    hpml_linreg_config_t cfg = {0.0, 1};
    hpml_linreg_t *m = NULL, *m1 = NULL;
    double *x = malloc(N * D * sizeof(double)), *y = malloc(N * T * sizeof(double));
    double w[T * D], b[T] = {1.5, -0.25}, r2 = 0;
    size_t lo, hi;
    hpml_rng_t rng;
    int rc;

    hpmlt_init(&argc, &argv, "test_linreg");
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &comm));
    HPMLT_CALL(hpml_comm_create(MPI_COMM_SELF, NULL, &self));
    hpml_io_partition(N, hpmlt_rank(), hpmlt_size(), &lo, &hi);
    hpml_rng_init(&rng, 11, 0);
    for (size_t i = 0; i < T * D; i++)
        w[i] = hpml_rng_normal(&rng);
    for (size_t i = 0; i < N * D; i++)
        x[i] = hpml_rng_normal(&rng) + 3.0;
    for (size_t i = 0; i < N; i++)
        for (size_t t = 0; t < T; t++) {
            y[i * T + t] = b[t];
            for (size_t j = 0; j < D; j++)
                y[i * T + t] += w[t * D + j] * x[i * D + j];
        }

    /* Noise-free: exact recovery and R^2 = 1. */
    HPMLT_CALL(hpml_linreg_fit(comm, x + lo * D, y + lo * T, hi - lo, D, T, &cfg, &m));
    if (m != NULL) {
        double *pred = malloc(((hi - lo) * T + 1) * sizeof(double));
        HPMLT_CHECK(maxdiff(m->coef, w, T * D) < 1e-10, "coef error %g",
                    maxdiff(m->coef, w, T * D));
        HPMLT_CHECK(maxdiff(m->intercept, b, T) < 1e-9, "intercept error %g",
                    maxdiff(m->intercept, b, T));
        HPMLT_CALL(hpml_linreg_predict(m, x + lo * D, hi - lo, pred));
        HPMLT_CALL(hpml_r2_score(comm, y + lo * T, pred, hi - lo, T, &r2));
        HPMLT_CHECK(fabs(r2 - 1.0) < 1e-12, "r2 %g", r2);
        free(pred);
    }
    hpml_linreg_destroy(m);
    m = NULL;

    /* Noisy targets, ridge: equal to the one-rank fit, and (Xc'Xc + alpha I) w = Xc'yc. */
    for (size_t i = 0; i < N * T; i++)
        y[i] += 0.3 * hpml_rng_normal(&rng);
    cfg.alpha = 4.0;
    HPMLT_CALL(hpml_linreg_fit(comm, x + lo * D, y + lo * T, hi - lo, D, T, &cfg, &m));
    HPMLT_CALL(hpml_linreg_fit(self, x, y, N, D, T, &cfg, &m1));
    if (m != NULL && m1 != NULL) {
        double mx[D] = {0}, my[T] = {0}, worst = 0;

        HPMLT_CHECK(maxdiff(m->coef, m1->coef, T * D) < 1e-12, "ranks change coef by %g",
                    maxdiff(m->coef, m1->coef, T * D));
        HPMLT_CHECK(maxdiff(m->intercept, m1->intercept, T) < 1e-12, "ranks change intercept");
        for (size_t i = 0; i < N; i++) {
            for (size_t j = 0; j < D; j++)
                mx[j] += x[i * D + j] / N;
            for (size_t t = 0; t < T; t++)
                my[t] += y[i * T + t] / N;
        }
        for (size_t t = 0; t < T; t++)
            for (size_t a = 0; a < D; a++) {
                double lhs = cfg.alpha * m->coef[t * D + a], rhs = 0;
                for (size_t i = 0; i < N; i++) {
                    double r = y[i * T + t] - my[t];
                    for (size_t j = 0; j < D; j++)
                        r -= m->coef[t * D + j] * (x[i * D + j] - mx[j]);
                    rhs += (x[i * D + a] - mx[a]) * r;
                }
                worst = fmax(worst, fabs(lhs - rhs));
            }
        HPMLT_CHECK(worst < 1e-9, "ridge normal equations residual %g", worst);
    }
    hpml_linreg_destroy(m);
    hpml_linreg_destroy(m1);
    m = m1 = NULL;

    /* Singular X'X: a constant column, then a collinear one. Every rank gets the error. */
    cfg.alpha = 0.0;
    for (size_t i = 0; i < N; i++)
        x[i * D + 2] = 0.1;
    rc = hpml_linreg_fit(comm, x + lo * D, y + lo * T, hi - lo, D, T, &cfg, &m);
    HPMLT_CHECK(rc == HPML_ERR_NUMERIC && strstr(hpml_last_error(), "column 2 is constant"),
                "constant column: %d '%s'", rc, hpml_last_error());
    for (size_t i = 0; i < N; i++)
        x[i * D + 2] = 2.0 * x[i * D + 0] - x[i * D + 1];
    rc = hpml_linreg_fit(comm, x + lo * D, y + lo * T, hi - lo, D, T, &cfg, &m);
    HPMLT_CHECK(rc == HPML_ERR_NUMERIC && strstr(hpml_last_error(), "column 2 is collinear"),
                "collinear column: %d '%s'", rc, hpml_last_error());
    cfg.alpha = 1e-3; /* ridge makes it solvable */
    HPMLT_CALL(hpml_linreg_fit(comm, x + lo * D, y + lo * T, hi - lo, D, T, &cfg, &m));
    hpml_linreg_destroy(m);

    hpml_comm_destroy(self);
    hpml_comm_destroy(comm);
    free(x);
    free(y);
    return hpmlt_finish();
}
