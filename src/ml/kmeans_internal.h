/* Private to the K-Means implementation (src/ml/kmeans*.c). */
#ifndef HPML_ML_KMEANS_INTERNAL_H
#define HPML_ML_KMEANS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hpml/comm.h"
#include "hpml/kmeans.h"

/* Per-dtype kernels (kmeans_kernels.h, instantiated in kmeans_kernels.c). */
#define KM_DECLARE(T, SUF)                                                                         \
    int hpml__kmeans_assign_##SUF(const T *X, const T *xn, size_t n, size_t d, const T *C,         \
                                  const T *cn, size_t k, size_t tile, int32_t *labels,             \
                                  double *sums, double *counts, double *inertia, size_t *changed,  \
                                  double *mind);                                                   \
    int hpml__kmeans_dists_##SUF(const T *X, const T *xn, size_t n, size_t d, const T *C,          \
                                 const T *cn, size_t m, size_t tile, double *out);                 \
    void hpml__kmeans_rownorms_##SUF(const T *X, size_t n, size_t d, T *xn);                       \
    void hpml__kmeans_colstats_##SUF(const T *X, size_t n, size_t d, const double *mean,           \
                                     double *sum);                                                 \
    void hpml__kmeans_shift_##SUF(T *X, size_t n, size_t d, const double *mean, double sign);      \
    double hpml__kmeans_exact_##SUF(const T *X, size_t n, size_t d, const double *C,               \
                                    const int32_t *labels, double *dist);
KM_DECLARE(float, f32)
KM_DECLARE(double, f64)
#undef KM_DECLARE

/* The data one rank holds, as the kernels see it (possibly centred), and its place in
 * the whole data set. */
typedef struct km_data {
    hpml_comm_t *comm;
    hpml_dtype_t dtype;
    const void *X; /* rows x d */
    void *xn;      /* rows: |x|^2 in dtype */
    size_t rows, d, total, offset;
    size_t tile;
    int rank, size;
    size_t *rank_rows; /* size: rows of every rank */
} km_data_t;

/* Dtype dispatch of the kernels. */
int hpml__km_assign(const km_data_t *D, const double *C, size_t k, int32_t *labels, double *sums,
                    double *counts, double *inertia, size_t *changed, double *mind);
int hpml__km_dists(const km_data_t *D, const double *C, size_t m, double *out);
double hpml__km_exact(const km_data_t *D, const double *C, const int32_t *labels, double *dist);
void hpml__km_row(const km_data_t *D, size_t i, double *out);

/* Rows with the given global indices, in double, identical on every rank (collective;
 * one allreduce). out: m x d. */
int hpml__km_fetch_rows(const km_data_t *D, const int64_t *gidx, size_t m, double *out);

/* Initial centres in double (kernel coordinates), k x d; indices optional. Collective. */
int hpml__km_init_kmeanspp(const km_data_t *D, size_t k, int trials, uint64_t seed, uint64_t stream,
                           double *C, int64_t *indices);
int hpml__km_init_random(const km_data_t *D, size_t k, uint64_t seed, uint64_t stream, double *C,
                         int64_t *indices);
int hpml__km_init_parallel(const km_data_t *D, size_t k, int rounds, double oversampling,
                           int trials, uint64_t seed, uint64_t stream, double *C);

#endif
