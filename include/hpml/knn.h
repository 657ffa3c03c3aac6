/*
 * hpml k-nearest neighbours: exact brute-force search in Euclidean distance over a
 * reference set and a query set that are both distributed by rows across the ranks of
 * a communicator, and majority-vote classification.
 *
 * Each rank holds a contiguous block of the reference rows; global reference indices
 * follow rank order (rank 0's rows first). Every reference block is broadcast in turn
 * (in chunks of bounded size), each rank scores its own queries against it with one
 * GEMM per tile (|q|^2 - 2 q.r + |r|^2) and keeps a per-query top-k. Candidates close to
 * the current k-th distance are rescored exactly, so distances are exact and the result
 * is bitwise independent of the number of ranks. Ties are broken by the lower global
 * reference index.
 */
#ifndef HPML_KNN_H
#define HPML_KNN_H

#include <stddef.h>
#include <stdint.h>

#include "hpml/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*hpml_knn_progress_fn)(void *ctx, size_t done, size_t total);

/*
 * The k nearest reference rows of each local query row.
 *
 *   ref       (nref, d) this rank's reference rows, row-major (nref may be 0)
 *   labels    (nref) class labels of those rows, or NULL (NULL on a rank with no
 *             reference rows says nothing: the labels are there when every rank with
 *             rows gives them)
 *   query     (nq, d) this rank's query rows (nq may be 0)
 *   indices   (nq, k) out: global reference indices, nearest first
 *   distances (nq, k) out: Euclidean distances, or NULL
 *   pred      (nq) out: majority label among the k neighbours (ties: the smallest
 *             label, as scikit-learn), or NULL; requires labels
 *
 *   progress  called on every rank after each reference chunk with the reference rows
 *             searched so far and in total (for a progress display), or NULL
 *
 * Collective over comm: every rank passes the same d and k. Returns HPML_ERR_INVAL for
 * d == 0, k == 0, k larger than the total number of reference rows, or pred on some
 * rank while a rank with rows gives no labels (on every rank: the checks use allreduced
 * values); HPML_ERR_NOMEM; the comm
 * error of a failed collective. Buffers are borrowed.
 */
int hpml_knn_search(hpml_comm_t *comm, const double *ref, const int64_t *labels, size_t nref,
                    const double *query, size_t nq, size_t d, size_t k, int64_t *indices,
                    double *distances, int64_t *pred, hpml_knn_progress_fn progress,
                    void *progress_ctx);

#ifdef __cplusplus
}
#endif

#endif /* HPML_KNN_H */
