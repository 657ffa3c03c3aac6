/*
 * hpml_logreg_fit: at the returned coefficients the gradient of sklearn's objective
 * (computed naively over all rows) vanishes, for binary and multinomial models with and
 * without intercept; the distributed fit matches the one-rank fit; probabilities sum to
 * one and agree with predict; a single class and C <= 0 are errors on every rank.
 * hpml-test: ranks=1 2 3 4
 * hpml-test: mpich-ranks=1 2 3
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hpml/io.h"
#include "hpml/linear.h"

#define N 233
#define D 5

/* max |gradient| of mean loss + |W|^2/(2Cn) at the model, naively over all rows. */
static double kkt(const hpml_logreg_t *m, const double *x, const int64_t *y, double C, int fi)
{
    size_t K = m->n_classes, r = m->multinomial ? K : 1;
    double *g = calloc(r * (D + 1), sizeof(double)), *w = calloc(r * (D + 1), sizeof(double));
    double worst = 0;

    /* Rebuild the full weight rows: a binary softmax model stores class 1's row, class 0's
     * row is its negative (softmax of a 2-class problem with zero-sum rows). */
    for (size_t k = 0; k < r; k++) {
        size_t src = (m->multinomial && K == 2) ? 0 : k;
        double s = (m->multinomial && K == 2 && k == 0) ? -1.0 : 1.0;
        for (size_t j = 0; j < D; j++)
            w[k * (D + 1) + j] = s * m->coef[src * D + j];
        w[k * (D + 1) + D] = s * m->intercept[src];
    }
    for (size_t i = 0; i < N; i++) {
        double z[8], p[8], mx = -INFINITY, sum = 0;
        size_t c = 0;

        while (m->classes[c] != y[i])
            c++;
        for (size_t k = 0; k < r; k++) {
            z[k] = w[k * (D + 1) + D];
            for (size_t j = 0; j < D; j++)
                z[k] += w[k * (D + 1) + j] * x[i * D + j];
            mx = fmax(mx, z[k]);
        }
        if (r == 1) {
            p[0] = 1.0 / (1.0 + exp(-z[0])) - (c == 1);
        } else {
            for (size_t k = 0; k < r; k++)
                sum += exp(z[k] - mx);
            for (size_t k = 0; k < r; k++)
                p[k] = exp(z[k] - mx) / sum - (k == c);
        }
        for (size_t k = 0; k < r; k++) {
            for (size_t j = 0; j < D; j++)
                g[k * (D + 1) + j] += p[k] * x[i * D + j] / N;
            g[k * (D + 1) + D] += p[k] / N;
        }
    }
    for (size_t k = 0; k < r; k++) {
        for (size_t j = 0; j < D; j++)
            worst = fmax(worst, fabs(g[k * (D + 1) + j] + w[k * (D + 1) + j] / (C * N)));
        if (fi)
            worst = fmax(worst, fabs(g[k * (D + 1) + D]));
    }
    free(g);
    free(w);
    return worst;
}

static void run(hpml_comm_t *comm, hpml_comm_t *self, const double *x, const int64_t *y,
                const char *what, double C, int fi, int multinomial)
{
    hpml_logreg_config_t cfg;
    hpml_logreg_t *m = NULL, *m1 = NULL;
    size_t lo, hi;

    hpml_io_partition(N, hpmlt_rank(), hpmlt_size(), &lo, &hi);
    hpml_logreg_config_init(&cfg);
    cfg.C = C;
    cfg.fit_intercept = fi;
    cfg.multinomial = multinomial;
    cfg.tol = 1e-10;
    cfg.ftol = 0;
    cfg.max_iter = 1000;
    HPMLT_CALL(hpml_logreg_fit(comm, x + lo * D, y + lo, hi - lo, D, &cfg, &m));
    HPMLT_CALL(hpml_logreg_fit(self, x, y, N, D, &cfg, &m1));
    if (m == NULL || m1 == NULL)
        goto out;
    HPMLT_CHECK(kkt(m, x, y, C, fi) < 1e-9, "%s: gradient at the solution %g", what,
                kkt(m, x, y, C, fi));
    {
        double worst = 0;
        for (size_t i = 0; i < m->n_rows * D; i++)
            worst = fmax(worst, fabs(m->coef[i] - m1->coef[i]));
        for (size_t i = 0; i < m->n_rows; i++)
            worst = fmax(worst, fabs(m->intercept[i] - m1->intercept[i]));
        HPMLT_CHECK(worst < 1e-7, "%s: distributed vs one-rank fit differ by %g", what, worst);
    }
    {
        double proba[8 * 4];
        int64_t pred[4];
        HPMLT_CALL(hpml_logreg_predict_proba(m, x, 4, proba));
        HPMLT_CALL(hpml_logreg_predict(m, x, 4, pred));
        for (size_t i = 0; i < 4; i++) {
            double s = 0;
            size_t best = 0;
            for (size_t k = 0; k < m->n_classes; k++) {
                s += proba[i * m->n_classes + k];
                if (proba[i * m->n_classes + k] > proba[i * m->n_classes + best])
                    best = k;
            }
            HPMLT_CHECK(fabs(s - 1) < 1e-12 && pred[i] == m->classes[best],
                        "%s: row %zu proba sum %g, pred %lld", what, i, s, (long long)pred[i]);
        }
    }
out:
    hpml_logreg_destroy(m);
    hpml_logreg_destroy(m1);
}

int main(int argc, char **argv)
{
    hpml_comm_t *comm = NULL, *self = NULL;
    double *x = malloc(N * D * sizeof(double)), W[3 * D];
    int64_t *y3 = malloc(N * sizeof(int64_t)), *y2 = malloc(N * sizeof(int64_t));
    hpml_logreg_config_t cfg;
    hpml_logreg_t *m = NULL;
    hpml_rng_t rng;
    int rc;

    hpmlt_init(&argc, &argv, "test_logreg");
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &comm));
    HPMLT_CALL(hpml_comm_create(MPI_COMM_SELF, NULL, &self));
    hpml_rng_init(&rng, 13, 0);
    for (size_t i = 0; i < 3 * D; i++)
        W[i] = hpml_rng_normal(&rng);
    for (size_t i = 0; i < N; i++) {
        double best = -INFINITY;
        for (size_t j = 0; j < D; j++)
            x[i * D + j] = hpml_rng_normal(&rng) + (j == 0 ? 1.0 : 0.0);
        for (size_t k = 0; k < 3; k++) {
            double z = 2.0 * hpml_rng_normal(&rng);
            for (size_t j = 0; j < D; j++)
                z += W[k * D + j] * x[i * D + j];
            if (z > best) {
                best = z;
                y3[i] = (int64_t)k * 4 - 3; /* labels -3, 1, 5 */
            }
        }
        y2[i] = y3[i] == 1 ? 9 : 2;
    }
    run(comm, self, x, y3, "multinomial", 0.8, 1, 0);
    run(comm, self, x, y3, "multinomial, no intercept", 10.0, 0, 0);
    run(comm, self, x, y2, "binary", 0.5, 1, 0);
    run(comm, self, x, y2, "binary softmax", 0.5, 1, 1);

    hpml_logreg_config_init(&cfg);
    for (size_t i = 0; i < N; i++)
        y2[i] = 4;
    rc = hpml_logreg_fit(comm, x, y2, hpmlt_rank() == 0 ? N : 0, D, &cfg, &m);
    HPMLT_CHECK(rc == HPML_ERR_INVAL && m == NULL, "one class returned %d", rc);
    cfg.C = 0;
    rc = hpml_logreg_fit(comm, x, y3, 10, D, &cfg, &m);
    HPMLT_CHECK(rc == HPML_ERR_INVAL && m == NULL, "C = 0 returned %d", rc);
    hpml_comm_destroy(self);
    hpml_comm_destroy(comm);
    free(x);
    free(y3);
    free(y2);
    return hpmlt_finish();
}
