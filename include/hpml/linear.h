/*
 * hpml linear models on data distributed by rows: linear / ridge regression by the
 * normal equations and L2-regularised logistic regression (binary and multinomial) by
 * L-BFGS. Model state is small and replicated on every rank; the data never moves: each
 * fit allreduces d x d / d x t sums (regression) or one gradient per evaluation
 * (logistic). The objectives are scikit-learn's, so coefficients match
 * sklearn.linear_model.LinearRegression / Ridge / LogisticRegression(solver='lbfgs').
 */
#ifndef HPML_LINEAR_H
#define HPML_LINEAR_H

#include <stddef.h>
#include <stdint.h>

#include "hpml/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- linear and ridge regression ------------------------------------------------ */

typedef struct hpml_linreg_config {
    double alpha;      /* ridge penalty alpha |w|^2 (0: ordinary least squares) */
    int fit_intercept; /* 1: centre X and y first; the intercept is not penalised */
} hpml_linreg_config_t;

typedef struct hpml_linreg {
    size_t n_samples, n_features, n_targets;
    double *coef;      /* (t, d) */
    double *intercept; /* (t) zeros without fit_intercept */
} hpml_linreg_t;

/*
 * Minimise |y - Xw - b|^2 + alpha |w|^2 for each of the t target columns of y (rows, t),
 * with (X'X + alpha I) w = X'y solved by Cholesky on centred sums (two passes: means, then
 * centred products, as scikit-learn centres). Collective; same d, t, cfg on every rank.
 * Errors: HPML_ERR_INVAL (bad sizes, alpha < 0, no rows), HPML_ERR_NUMERIC when X'X +
 * alpha I is singular, with the detail "X'X is singular: feature column j is constant"
 * (or "... collinear with earlier columns"), j counted from 0; comm errors.
 */
int hpml_linreg_fit(hpml_comm_t *comm, const double *x, const double *y, size_t rows, size_t d,
                    size_t t, const hpml_linreg_config_t *cfg, hpml_linreg_t **out);
/* pred (rows, t) = x coef^T + intercept. Local. */
int hpml_linreg_predict(const hpml_linreg_t *m, const double *x, size_t rows, double *pred);
void hpml_linreg_destroy(hpml_linreg_t *m); /* NULL-safe */

/*
 * Coefficient of determination of predictions pred against y, both (rows, t) on each
 * rank, averaged over the t targets (sklearn's r2_score, multioutput='uniform_average';
 * a constant target scores 1 if predicted exactly, else 0). Collective.
 */
int hpml_r2_score(hpml_comm_t *comm, const double *y, const double *pred, size_t rows, size_t t,
                  double *r2);

/* ---- logistic regression -------------------------------------------------------- */

/* Called on every rank after each L-BFGS iteration (the CLI prints on rank 0). */
typedef void (*hpml_logreg_progress_fn)(void *ctx, size_t iter, double objective, double grad_norm);

typedef struct hpml_logreg_config {
    double C; /* inverse regularisation strength (sklearn's C), > 0 */
    int fit_intercept;
    int multinomial; /* 0: auto (sigmoid for 2 classes, softmax for more); 1: softmax */
    size_t max_iter; /* L-BFGS iterations */
    double tol;      /* stop when max |gradient| <= tol (of the mean objective) */
    double ftol;     /* or when f decreases by <= ftol relative: scipy's L-BFGS-B factr
                      * test; default 64 eps as sklearn; 0 never */
    size_t memory;   /* L-BFGS history pairs (10) */
    hpml_logreg_progress_fn progress;
    void *progress_ctx;
} hpml_logreg_config_t;

/* Defaults: C 1, intercept, auto, 100 iterations, tol 1e-4, ftol 64 eps, memory 10,
 * no progress. */
void hpml_logreg_config_init(hpml_logreg_config_t *cfg);

typedef struct hpml_logreg {
    size_t n_samples, n_features, n_classes;
    size_t n_rows;     /* rows of coef: 1 for a binary sigmoid model, else n_classes */
    int multinomial;   /* softmax model (for 2 classes coef holds class 1's row only) */
    int64_t *classes;  /* (n_classes) sorted labels */
    double *coef;      /* (n_rows, d) */
    double *intercept; /* (n_rows) */
    size_t n_iter;     /* L-BFGS iterations run */
    int converged;     /* 1 if tol or ftol was met, or no step could lower f with the
                        * gradient at rounding level */
    double objective;  /* final mean objective: mean log-loss + |w|^2 / (2 C n) */
} hpml_logreg_t;

/*
 * Minimise C sum_i logloss_i + |W|^2 / 2 (the intercept is not penalised), scikit-learn's
 * LogisticRegression(penalty='l2', solver='lbfgs') objective, for integer labels y (rows).
 * Each function evaluation is one allreduce of the loss and the gradient. Collective.
 * Errors: HPML_ERR_INVAL (C <= 0, fewer than 2 classes, labels spanning more than 2^20
 * values), HPML_ERR_NUMERIC (non-finite objective), comm errors. Not reaching tol within
 * max_iter is not an error: see converged.
 */
int hpml_logreg_fit(hpml_comm_t *comm, const double *x, const int64_t *y, size_t rows, size_t d,
                    const hpml_logreg_config_t *cfg, hpml_logreg_t **out);
/* proba (rows, n_classes) as sklearn's predict_proba. Local. */
int hpml_logreg_predict_proba(const hpml_logreg_t *m, const double *x, size_t rows, double *proba);
/* The most probable class label of each row (first class on ties). Local. */
int hpml_logreg_predict(const hpml_logreg_t *m, const double *x, size_t rows, int64_t *pred);
void hpml_logreg_destroy(hpml_logreg_t *m); /* NULL-safe */

#ifdef __cplusplus
}
#endif

#endif /* HPML_LINEAR_H */
