/*
 * hpml kmeans: distributed K-Means (Lloyd) over the rows of a data set split across the
 * ranks of an hpml communicator. Each rank passes its own block of rows; centroids are
 * replicated. One allreduce per Lloyd iteration carries the partial sums, counts,
 * inertia and number of changed labels.
 *
 * The algorithm follows scikit-learn's KMeans(algorithm="lloyd"): the data is centred
 * on its mean during the fit, distances come from one GEMM per row tile
 * (|x|^2 - 2 x.c + |c|^2), the tolerance is tol * mean(var(X, axis=0)) compared with the
 * total squared centre shift, a run stops early when no label changed ("strict
 * convergence"), empty clusters are refilled with the points farthest from their
 * centres, and the best of n_init runs (lowest inertia) is kept. Given the same initial
 * centroids the result matches scikit-learn within floating-point tolerance, at any
 * number of ranks.
 *
 * Every function here is collective over the communicator unless it says otherwise;
 * all ranks pass the same parameters (k, cols, dtype, params). Supported dtypes: HPML_F32,
 * HPML_F64. Not thread-safe with other calls on the same communicator.
 */
#ifndef HPML_KMEANS_H
#define HPML_KMEANS_H

#include <stddef.h>
#include <stdint.h>

#include "hpml/comm.h"
#include "hpml/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    HPML_KMEANS_INIT_KMEANSPP = 0, /* greedy k-means++ (scikit-learn's, 2 + ln k trials) */
    HPML_KMEANS_INIT_PARALLEL,     /* k-means|| (Bahmani et al. 2012), for large data */
    HPML_KMEANS_INIT_RANDOM,       /* k distinct rows chosen uniformly */
    HPML_KMEANS_INIT_ARRAY,        /* params.init_centroids */
} hpml_kmeans_init_t;

/* Progress report, passed after every Lloyd iteration (on every rank: the caller decides
 * which rank prints). */
typedef struct hpml_kmeans_progress {
    int run;        /* 0 .. n_init-1 */
    int iter;       /* 1-based iteration within the run */
    double inertia; /* sum of squared distances to the centres used in this iteration */
    double shift;   /* total squared centre shift of this iteration */
    size_t changed; /* labels that changed in this iteration */
    double seconds; /* wall time of this iteration */
} hpml_kmeans_progress_t;

typedef void (*hpml_kmeans_progress_fn)(const hpml_kmeans_progress_t *p, void *user);

typedef struct hpml_kmeans_params {
    size_t k;                         /* number of clusters, 1 <= k <= total rows */
    hpml_kmeans_init_t init;          /* default k-means++ */
    const void *init_centroids;       /* INIT_ARRAY: k x cols of the data dtype (borrowed) */
    int max_iter;                     /* default 300 */
    double tol;                       /* default 1e-4 (relative to the mean feature variance) */
    int n_init;                       /* runs; 0 = auto: 10 for random, 1 otherwise */
    uint64_t seed;                    /* RNG seed (default 0) */
    int n_local_trials;               /* k-means++ trials per centre; 0 = 2 + floor(ln k) */
    int parallel_rounds;              /* k-means|| rounds; 0 = 5 */
    double oversampling;              /* k-means|| points sampled per round / k; 0 = 2 */
    size_t tile_rows;                 /* rows per distance tile; 0 = chosen from cols and k */
    int no_center;                    /* 1: do not centre X in place (see hpml_kmeans_fit) */
    hpml_kmeans_progress_fn progress; /* optional */
    void *progress_user;
} hpml_kmeans_params_t;

/* Fill `p` with the defaults above (k = 8). Not collective. */
void hpml_kmeans_params_default(hpml_kmeans_params_t *p);

typedef struct hpml_kmeans_result {
    size_t k, cols;
    hpml_dtype_t dtype;
    void *centroids;      /* k x cols of dtype, identical on every rank (hpml_malloc) */
    int32_t *labels;      /* this rank's rows (hpml_malloc; a valid pointer for 0 rows) */
    size_t rows;          /* this rank's rows */
    size_t total_rows;    /* rows over all ranks */
    double inertia;       /* global sum of squared distances to the final centroids */
    int n_iter;           /* Lloyd iterations of the kept run */
    int converged;        /* 1 when the kept run stopped before max_iter */
    int strict;           /* 1 when it stopped because no label changed */
    int best_run;         /* index of the kept run */
    size_t relocated;     /* empty clusters refilled during the kept run */
    size_t empty;         /* clusters that ended with no point (duplicate-heavy data) */
    double init_seconds;  /* time in initialisation, all runs */
    double lloyd_seconds; /* time in Lloyd runs, all runs, with each run's final label
                           * and inertia pass (this rank's clock) */
    int total_iter;       /* Lloyd iterations of all runs */
    double iter_seconds;  /* time in the Lloyd iterations proper (assign, allreduce, update),
                           * all runs, without the final passes: iter_seconds / total_iter
                           * is the time per iteration (this rank's clock) */
} hpml_kmeans_result_t;

/*
 * Cluster the rows of X: `rows` x `cols` of `dtype` on this rank (rows may be 0 on some
 * ranks; the total must be >= k). Unless params->no_center is set, X is centred in
 * place during the fit and restored before returning (as scikit-learn does with
 * copy_x=False: the restored values may differ in the last bit). On success fills *out
 * (free with hpml_kmeans_result_free). Errors: HPML_ERR_INVAL (bad parameters,
 * k > total rows; the same on every rank), HPML_ERR_NUMERIC (NaN/Inf in X or in the
 * initial centroids), HPML_ERR_NOMEM, or a comm error.
 */
int hpml_kmeans_fit(hpml_comm_t *comm, const hpml_kmeans_params_t *params, hpml_dtype_t dtype,
                    void *X, size_t rows, size_t cols, hpml_kmeans_result_t *out);

/* Free what a fit allocated; NULL-safe; leaves the struct zeroed. Not collective. */
void hpml_kmeans_result_free(hpml_kmeans_result_t *r);

/*
 * Initial centroids only (params->init: k-means++, k-means|| or random) for the data as
 * it is (not centred). centroids: k x cols of dtype, caller-allocated, identical on every
 * rank on return. indices (may be NULL): k global row indices of the chosen rows for
 * k-means++ and random (k-means|| reclusters, so it writes -1).
 */
int hpml_kmeans_init(hpml_comm_t *comm, const hpml_kmeans_params_t *params, hpml_dtype_t dtype,
                     const void *X, size_t rows, size_t cols, void *centroids, int64_t *indices);

/*
 * Nearest centroid of each of this rank's rows: labels (caller-allocated, `rows`
 * entries), and optionally the global inertia (sum of squared distances; may be NULL,
 * but all ranks must agree on passing it, as it takes an allreduce). The labels part is
 * local; with inertia == NULL no communication happens.
 */
int hpml_kmeans_predict(hpml_comm_t *comm, hpml_dtype_t dtype, const void *X, size_t rows,
                        size_t cols, const void *centroids, size_t k, int32_t *labels,
                        double *inertia);

/*
 * The assign kernel that fits and predictions of this process use, as a line for
 * `hpml info`: the fused kernel for AVX-512 or AVX2+FMA (HPML_SIMD=avx2 keeps it at AVX2),
 * or BLAS GEMM tiles with a portable argmin (HPML_SIMD=portable, HPML_KMEANS_GEMM=1, or a
 * CPU without AVX2+FMA). Static string; not collective.
 */
const char *hpml_kmeans_kernel_name(void);

/* Parse/print init names: "k-means++", "k-means||", "random". */
int hpml_kmeans_init_parse(const char *name, hpml_kmeans_init_t *out);
const char *hpml_kmeans_init_name(hpml_kmeans_init_t init);

#ifdef __cplusplus
}
#endif

#endif /* HPML_KMEANS_H */
