/*
 * hpml_pca_fit: the distributed fit equals a one-rank fit of the whole data (rank
 * independence), components are orthonormal eigenvectors of the naive covariance with
 * the right eigenvalues, the randomized solver agrees with the full one on data with a
 * spectral gap, truncated SVD, transform, and argument errors.
 * hpml-test: ranks=1 2 3 4
 * hpml-test: mpich-ranks=1 2 3
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hpml/decomp.h"
#include "hpml/io.h"

#define N 203
#define D 9
#define K 4

static double maxdiff(const double *a, const double *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i] - b[i]));
    return m;
}

static void check(hpml_comm_t *comm, hpml_comm_t *self, const double *x, const char *what,
                  const hpml_pca_config_t *cfg)
{
    size_t b, e;
    hpml_pca_t *p = NULL, *q = NULL;

    hpml_io_partition(N, hpml_comm_rank(comm), hpml_comm_size(comm), &b, &e);
    HPMLT_CALL(hpml_pca_fit(comm, x + b * D, e - b, D, cfg, &p));
    HPMLT_CALL(hpml_pca_fit(self, x, N, D, cfg, &q));
    if (p == NULL || q == NULL)
        goto out;
    /* Same signs and values whatever the rank count. */
    HPMLT_CHECK(maxdiff(p->components, q->components, K * D) < 1e-10, "%s: components %g", what,
                maxdiff(p->components, q->components, K * D));
    HPMLT_CHECK(maxdiff(p->explained_variance, q->explained_variance, K) <
                    1e-10 * q->explained_variance[0],
                "%s: explained variance", what);
    HPMLT_CHECK(maxdiff(p->explained_variance_ratio, q->explained_variance_ratio, K) < 1e-12,
                "%s: ratio", what);
    /* Orthonormal rows; C v = lambda v for the naive (centred) second-moment matrix. */
    {
        double c[D * D] = {0}, mean[D] = {0}, worst_orth = 0, worst_eig = 0;

        for (size_t i = 0; i < N; i++)
            for (size_t j = 0; j < D; j++)
                mean[j] += cfg->center ? x[i * D + j] / N : 0;
        for (size_t i = 0; i < N; i++)
            for (size_t a = 0; a < D; a++)
                for (size_t bb = 0; bb < D; bb++)
                    c[a * D + bb] += (x[i * D + a] - mean[a]) * (x[i * D + bb] - mean[bb]);
        for (size_t r = 0; r < K; r++) {
            double lam = p->singular_values[r] * p->singular_values[r];
            for (size_t s = 0; s < K; s++) {
                double dot = 0;
                for (size_t j = 0; j < D; j++)
                    dot += p->components[r * D + j] * p->components[s * D + j];
                worst_orth = fmax(worst_orth, fabs(dot - (r == s)));
            }
            for (size_t a = 0; a < D; a++) {
                double cv = 0;
                for (size_t j = 0; j < D; j++)
                    cv += c[a * D + j] * p->components[r * D + j];
                worst_eig = fmax(worst_eig, fabs(cv - lam * p->components[r * D + a]));
            }
            if (r > 0)
                HPMLT_CHECK(p->singular_values[r] <= p->singular_values[r - 1],
                            "%s: singular values not sorted", what);
        }
        HPMLT_CHECK(worst_orth < 1e-12, "%s: orthonormality %g", what, worst_orth);
        HPMLT_CHECK(worst_eig < 1e-9 * p->singular_values[0] * p->singular_values[0],
                    "%s: eigen residual %g", what, worst_eig);
    }
    /* transform of the local rows equals the one-rank transform of the same rows */
    {
        double *t1 = malloc(((e - b) * K + 1) * sizeof(double));
        double *t2 = malloc(((e - b) * K + 1) * sizeof(double));
        HPMLT_CALL(hpml_pca_transform(p, x + b * D, e - b, t1));
        HPMLT_CALL(hpml_pca_transform(q, x + b * D, e - b, t2));
        HPMLT_CHECK(maxdiff(t1, t2, (e - b) * K) < 1e-9, "%s: transform", what);
        free(t1);
        free(t2);
    }
out:
    hpml_pca_destroy(p);
    hpml_pca_destroy(q);
}

int main(int argc, char **argv)
{
    hpml_comm_t *comm = NULL, *self = NULL;
    hpml_pca_config_t cfg;
    hpml_pca_t *p = NULL;
    double *x = malloc(N * D * sizeof(double)), mix[D * D];
    hpml_rng_t rng;
    int rc;

    hpmlt_init(&argc, &argv, "test_pca");
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &comm));
    HPMLT_CALL(hpml_comm_create(MPI_COMM_SELF, NULL, &self));
    /* Correlated data with a decaying spectrum and an offset. */
    hpml_rng_init(&rng, 7, 0);
    for (size_t i = 0; i < D * D; i++)
        mix[i] = hpml_rng_normal(&rng);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < D; j++) {
            double v = 5.0 + j;
            for (size_t c = 0; c < D; c++)
                v += mix[c * D + j] * hpml_rng_normal(&rng) * pow(0.5, (double)c);
            x[i * D + j] = v;
        }
    hpml_pca_config_init(&cfg);
    cfg.n_components = K;
    check(comm, self, x, "pca full", &cfg);
    cfg.center = 0;
    check(comm, self, x, "tsvd full", &cfg);
    cfg.center = 1;
    cfg.solver = HPML_PCA_RANDOMIZED;
    cfg.n_iter = 10;
    check(comm, self, x, "pca randomized", &cfg);

    /* Errors, on every rank. */
    cfg.n_components = D + 1;
    rc = hpml_pca_fit(comm, x, hpmlt_rank() == 0 ? N : 0, D, &cfg, &p);
    HPMLT_CHECK(rc == HPML_ERR_INVAL && p == NULL, "k > d returned %d", rc);
    cfg.n_components = 1;
    rc = hpml_pca_fit(comm, x, hpmlt_rank() == 0 ? 1 : 0, D, &cfg, &p);
    HPMLT_CHECK(rc == HPML_ERR_INVAL && p == NULL, "one row returned %d", rc);
    hpml_comm_destroy(self);
    hpml_comm_destroy(comm);
    free(x);
    return hpmlt_finish();
}
