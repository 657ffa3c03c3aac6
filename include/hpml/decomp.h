/*
 * hpml decompositions: PCA and truncated SVD of data distributed by rows.
 *
 * The "full" solver allreduces the column sums and the d x d covariance (or Gram)
 * matrix and calls LAPACK's symmetric eigensolver (dsyevr); it suits d up to a few
 * thousand. The "randomized" solver (Halko, Martinsson and Tropp 2011, as in
 * scikit-learn's randomized_svd) never forms a d x d matrix: it needs allreduces of
 * d x l and l x l blocks (l = components + oversampling), so it suits wide data.
 *
 * Components follow scikit-learn's svd_flip sign convention (u-based: in each column of
 * U the entry of largest magnitude is positive, the first such row on ties), so they
 * match sklearn.decomposition.PCA / TruncatedSVD entry by entry.
 */
#ifndef HPML_DECOMP_H
#define HPML_DECOMP_H

#include <stddef.h>
#include <stdint.h>

#include "hpml/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { HPML_PCA_FULL = 0, HPML_PCA_RANDOMIZED } hpml_pca_solver_t;

typedef struct hpml_pca_config {
    size_t n_components; /* 1 .. min(n, d) */
    hpml_pca_solver_t solver;
    int center;        /* 1: PCA (subtract the mean); 0: truncated SVD */
    size_t oversample; /* randomized: extra columns (sklearn: 10) */
    int n_iter;        /* randomized: power iterations, < 0 for sklearn's auto */
    uint64_t seed;     /* randomized: the Gaussian test matrix */
} hpml_pca_config_t;

/* Defaults: 2 components, full solver, centred, oversample 10, auto iterations, seed 0. */
void hpml_pca_config_init(hpml_pca_config_t *cfg);

/* A fitted model; every array is replicated on all ranks. */
typedef struct hpml_pca {
    size_t n_samples, n_features, n_components;
    int center;
    double *mean;                     /* (d) zeros for truncated SVD */
    double *components;               /* (k, d) rows are unit principal axes */
    double *explained_variance;       /* (k) PCA: s^2/(n-1); TSVD: var of the projection */
    double *explained_variance_ratio; /* (k) over the total variance of the data */
    double *singular_values;          /* (k) */
    double total_variance;            /* PCA: sum of column variances (ddof 1); TSVD: ddof 0 */
} hpml_pca_t;

/*
 * Fit on this rank's rows x (rows, d). Collective; every rank passes the same d and cfg.
 * Errors: HPML_ERR_INVAL (d == 0, n_components out of range, fewer than 2 rows in total
 * for PCA), HPML_ERR_NOMEM, HPML_ERR_NUMERIC (the eigensolver or SVD failed), comm errors.
 * *out is freed with hpml_pca_destroy.
 */
int hpml_pca_fit(hpml_comm_t *comm, const double *x, size_t rows, size_t d,
                 const hpml_pca_config_t *cfg, hpml_pca_t **out);

/* out (rows, k) = (x - mean) components^T. Local: no communication. */
int hpml_pca_transform(const hpml_pca_t *pca, const double *x, size_t rows, double *out);

void hpml_pca_destroy(hpml_pca_t *pca); /* NULL-safe */

#ifdef __cplusplus
}
#endif

#endif /* HPML_DECOMP_H */
