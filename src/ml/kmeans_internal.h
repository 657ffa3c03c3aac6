/* Private to the K-Means implementation (src/ml/kmeans*.c). */
#ifndef HPML_ML_KMEANS_INTERNAL_H
#define HPML_ML_KMEANS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hpml/comm.h"
#include "hpml/kmeans.h"

/* Rows whose sums accumulate in the data type before they are added into the double
 * sums: bounds the f32 rounding error without a conversion per element. */
#define KM_FLUSH_ROWS 4096

/* What an assign pass adds up besides the sums. */
typedef struct {
    double inertia;
    size_t changed, since_flush;
} km_tally_t;

/* Row bookkeeping once the row's nearest centre l and min_j(|c_j|^2 - 2 x.c_j) = bv are
 * known: the distance xn + bv (clamped at 0) into the inertia and *mind, a label change. */
static inline void km_take_row(km_tally_t *t, double xn, double bv, int32_t l, int32_t *label,
                               double *mind)
{
    double dist = xn + bv;

    if (dist < 0.0)
        dist = 0.0;
    t->inertia += dist;
    if (mind != NULL)
        *mind = dist;
    if (*label != l) {
        t->changed++;
        *label = l;
    }
}

/* After m more rows: 1 when the partial sums are due to be flushed into double (every
 * KM_FLUSH_ROWS rows and at the end). */
static inline int km_flush_due(km_tally_t *t, size_t m, int last)
{
    t->since_flush += m;
    if (t->since_flush < KM_FLUSH_ROWS && !last)
        return 0;
    t->since_flush = 0;
    return 1;
}

/* sums[q] += csum[q], csum[q] = 0 for q < len; csum of the data type. */
#define KM_FLUSH_SUMS(csum, sums, len)                                                             \
    do {                                                                                           \
        for (size_t q_ = 0; q_ < (len); q_++) {                                                    \
            (sums)[q_] += (double)(csum)[q_];                                                      \
            (csum)[q_] = 0;                                                                        \
        }                                                                                          \
    } while (0)

/* The pass's totals into the caller's. */
static inline void km_tally_out(const km_tally_t *t, double *inertia, size_t *changed)
{
    *inertia += t->inertia;
    if (changed != NULL)
        *changed += t->changed;
}

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

/* Which assign kernel runs: the GEMM path (BLAS tiles, portable argmin) or the fused
 * kernel (kmeans_fused.c) for an instruction set. */
typedef enum { KM_KERNEL_GEMM = 0, KM_KERNEL_AVX2, KM_KERNEL_AVX512 } km_kernel_t;

/* The kernel for this process: the fused one for the widest instruction set the SIMD
 * choice allows (core/cpu.c: AVX-512 only under HPML_SIMD=auto), the GEMM path under
 * HPML_SIMD=portable, HPML_KMEANS_GEMM=1 or off x86-64. */
km_kernel_t hpml__km_kernel(void);
/* For tests: force a km_kernel_t (-1: back to the automatic choice); HPML_ERR_UNSUPPORTED
 * when the CPU lacks it. Not thread-safe with a running fit. */
int hpml__km_kernel_force(int which);
/* The fused assign (same contract as hpml__kmeans_assign_*), X etc. in dt. */
int hpml__km_fused_assign(km_kernel_t kern, hpml_dtype_t dt, const void *X, const void *xn,
                          size_t n, size_t d, const void *C, const void *cn, size_t k,
                          int32_t *labels, double *sums, double *counts, double *inertia,
                          size_t *changed, double *mind);

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
