/*
 * hpml comm: collectives tuned for ML/DL on top of any MPI-3 library.
 *
 * An hpml_comm_t wraps a user communicator (duplicated, MPI_ERRORS_RETURN). Every
 * collective here is collective over that communicator: all ranks call it with matching
 * arguments in the same order. Set HPML_CHECK=1 to have mismatches reported as
 * HPML_ERR_MISMATCH with a message naming the ranks, instead of a hang.
 *
 * Caller buffers are borrowed for the duration of a call (or until hpml_wait/hpml_test
 * reports completion for nonblocking calls), never kept.
 */
#ifndef HPML_COMM_H
#define HPML_COMM_H

#include <mpi.h>
#include <stddef.h>
#include <stdio.h>

#include "hpml/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hpml_comm hpml_comm_t;
typedef struct hpml_request hpml_request_t;

/* Pass as sendbuf to reduce in place in recvbuf (like MPI_IN_PLACE). */
#define HPML_IN_PLACE ((const void *)1)

/* Collectives that have an algorithm choice. */
typedef enum {
    HPML_COLL_ALLREDUCE = 0,
    HPML_COLL_BCAST,
    HPML_COLL_REDUCE,
    HPML_COLL_ALLGATHER,
    HPML_COLL_REDUCE_SCATTER,
    HPML_COLL_COUNT
} hpml_coll_t;

/* Algorithms. Not every algorithm applies to every collective: see hpml_algo_list. */
typedef enum {
    HPML_ALGO_AUTO = 0,           /* selection table (built-in or HPML_TUNING_FILE) */
    HPML_ALGO_MPI,                /* the MPI library's own collective */
    HPML_ALGO_RECURSIVE_DOUBLING, /* allreduce, allgather */
    HPML_ALGO_RING,               /* allreduce, allgather, reduce_scatter */
    HPML_ALGO_RABENSEIFNER,       /* allreduce */
    HPML_ALGO_REDUCE_BCAST,       /* allreduce */
    HPML_ALGO_SHM,                /* allreduce, bcast, reduce: node shared memory */
    HPML_ALGO_HIER,               /* allreduce: shm intra-node + inter-node per slice */
    HPML_ALGO_BINOMIAL,           /* bcast, reduce */
    HPML_ALGO_SCATTER_ALLGATHER,  /* bcast */
    HPML_ALGO_CHAIN,              /* bcast: pipelined chain */
    HPML_ALGO_BRUCK,              /* allgather */
    HPML_ALGO_COUNT
} hpml_algo_t;

/* Options for hpml_comm_create; NULL means "from the environment" (HPML_CHECK,
 * HPML_RANKS_PER_NODE, HPML_TUNING_FILE, HPML_ALGO_<COLL>). */
typedef struct hpml_comm_config {
    int check;          /* 1: compare a signature of every collective across ranks */
    int ranks_per_node; /* >0: consecutive groups of this many ranks act as nodes */
} hpml_comm_config_t;

/* Collective over `user`. Duplicates it; the caller keeps ownership of `user`. */
int hpml_comm_create(MPI_Comm user, const hpml_comm_config_t *cfg, hpml_comm_t **out);
/* Collective; NULL-safe; waits for outstanding nonblocking operations first. */
void hpml_comm_destroy(hpml_comm_t *comm);

int hpml_comm_rank(const hpml_comm_t *comm);
int hpml_comm_size(const hpml_comm_t *comm);
/* Number of (possibly virtual) nodes, this rank's node index and local rank/size. */
int hpml_comm_nodes(const hpml_comm_t *comm);
int hpml_comm_node(const hpml_comm_t *comm);
int hpml_comm_local_rank(const hpml_comm_t *comm);
int hpml_comm_local_size(const hpml_comm_t *comm);
/* The duplicated MPI communicator (for benchmarks comparing with native MPI). */
MPI_Comm hpml_comm_mpi(const hpml_comm_t *comm);

/*
 * Agree on a failure found before a collective: every rank passes its own rc (0 or an
 * HPML_ERR_*). 0 on every rank when all passed 0; otherwise every rank returns an error,
 * a failing rank its own rc (its message kept), the others the lowest failing rank's code
 * with "rank R: <its message>" as their message. So a check that only some ranks fail
 * (a file one rank cannot read, a node short of memory) ends on every rank instead of
 * leaving the others waiting in the next collective. Collective over comm.
 */
int hpml_comm_agree(hpml_comm_t *comm, int rc);
/* The same, where the non-failing ranks get the lowest failing rank's message as it is and
 * *first (unless NULL) is that rank (-1 when none failed, or when the agreement itself
 * failed: an MPI error returned as such). */
int hpml_comm_agree_rank(hpml_comm_t *comm, int rc, int *first);

/* Blocking collectives. count is in elements of dtype. */
int hpml_allreduce(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                   hpml_op_t op, hpml_comm_t *comm);
int hpml_allreduce_algo(hpml_algo_t algo, const void *sendbuf, void *recvbuf, size_t count,
                        hpml_dtype_t dtype, hpml_op_t op, hpml_comm_t *comm);
int hpml_bcast(void *buf, size_t count, hpml_dtype_t dtype, int root, hpml_comm_t *comm);
int hpml_bcast_algo(hpml_algo_t algo, void *buf, size_t count, hpml_dtype_t dtype, int root,
                    hpml_comm_t *comm);
int hpml_barrier(hpml_comm_t *comm);

/* Reduce to `root`: recvbuf significant at root only (may be NULL elsewhere). */
int hpml_reduce(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype, hpml_op_t op,
                int root, hpml_comm_t *comm);
int hpml_reduce_algo(hpml_algo_t algo, const void *sendbuf, void *recvbuf, size_t count,
                     hpml_dtype_t dtype, hpml_op_t op, int root, hpml_comm_t *comm);
/* Gather `count` elements from every rank into recvbuf (size*count elements, rank
 * order). sendbuf may be HPML_IN_PLACE: this rank's block is already in recvbuf. */
int hpml_allgather(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                   hpml_comm_t *comm);
int hpml_allgather_algo(hpml_algo_t algo, const void *sendbuf, void *recvbuf, size_t count,
                        hpml_dtype_t dtype, hpml_comm_t *comm);
/* Reduce size*count elements and leave block `rank` (count elements) in recvbuf
 * (MPI_Reduce_scatter_block semantics). HPML_IN_PLACE: input is recvbuf (size*count). */
int hpml_reduce_scatter(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                        hpml_op_t op, hpml_comm_t *comm);
int hpml_reduce_scatter_algo(hpml_algo_t algo, const void *sendbuf, void *recvbuf, size_t count,
                             hpml_dtype_t dtype, hpml_op_t op, hpml_comm_t *comm);

/* Every rank sends block q of sendbuf (scounts[q] elements at element offset sdispls[q])
 * to rank q and receives rank q's block for it into recvbuf (rcounts[q] elements at
 * rdispls[q]): MPI_Alltoallv with size_t counts. What rank p sends to q must be what q
 * expects from p (HPML_CHECK compares every pair; without it a disagreement is undefined,
 * as in MPI). The receive blocks must not overlap each other nor any send block, but
 * sendbuf and recvbuf may be the same array (a rank sharing its own rows of a matrix
 * with every other rank is an all-gather). Any block size: larger blocks travel in
 * several messages. Collective; the arrays have hpml_comm_size entries. */
int hpml_alltoallv(const void *sendbuf, const size_t *scounts, const size_t *sdispls, void *recvbuf,
                   const size_t *rcounts, const size_t *rdispls, hpml_dtype_t dtype,
                   hpml_comm_t *comm);

/* The algorithms implemented for a collective (HPML_ALGO_MPI first, AUTO excluded).
 * *algos points to static storage. */
int hpml_algo_list(hpml_coll_t coll, const hpml_algo_t **algos, size_t *n);
/* The algorithm the selection table picks for `bytes` on this communicator. */
hpml_algo_t hpml_algo_selected(hpml_comm_t *comm, hpml_coll_t coll, size_t bytes);
/* Print the selection table in force for this communicator (source: built-in or the
 * HPML_TUNING_FILE path; per collective the byte ranges and their algorithm; forcing by
 * HPML_ALGO_<COLL>) to `f`, as text or (json != 0) one JSON object. Local, not
 * collective. Returns 0 or HPML_ERR_INVAL. */
int hpml_select_describe(hpml_comm_t *comm, FILE *f, int json);

/* ---- tuning (what `hpml tune` runs) ----------------------------------------------- */

typedef struct hpml_tune_options {
    size_t min_bytes; /* smallest message (0: 8 bytes); sizes grow by 4x */
    size_t max_bytes; /* largest message (0: 16 MiB) */
    int samples;      /* timed samples per point (0: 9) */
    unsigned colls;   /* bit (1u << hpml_coll_t) per collective to tune (0: all) */
} hpml_tune_options_t;

/* Time every algorithm of every selected collective (f32, sum) at each size (min_bytes
 * growing by 4x, and max_bytes itself) on this communicator and write a tuning file for
 * HPML_TUNING_FILE to `out`: per size the algorithm in force (hpml_algo_selected) is kept
 * unless another one's fastest sample (the sample least disturbed by other load) beats it
 * by more than the noise, max(5%, the two algorithms' median-to-fastest spreads); the
 * multi-node hier is not tried on one node. With `report` non-NULL also a table of median
 * and fastest µs per algorithm and the choice. Only rank 0 writes (other ranks may pass
 * NULL). Collective; takes seconds to minutes. Returns 0 or a negative HPML_ERR_*. */
int hpml_tune(hpml_comm_t *comm, const hpml_tune_options_t *opt, FILE *out, FILE *report);

/* Median seconds per call (maximum over ranks) of `algo` for `coll` with `bytes` of f32
 * payload (bytes as the selection table counts them: the whole vector; for allgather and
 * reduce_scatter size × block). HPML_ALGO_AUTO times the selection table's choice.
 * Collective. */
int hpml_tune_time(hpml_comm_t *comm, hpml_coll_t coll, hpml_algo_t algo, size_t bytes, int samples,
                   double *seconds);

/* ---- registered buffers -------------------------------------------------------- */

/* Memory in the node shared-memory segment: a blocking out-of-place allreduce whose
 * input lives there skips the copy into shared memory (peers read it where it is), and a
 * shm bcast from a root buffer there is one copy. Collective over the communicator
 * (every rank asks for the same size). NULL on failure. Freed by hpml_comm_free_shared
 * or destroy. */
void *hpml_comm_alloc_shared(hpml_comm_t *comm, size_t bytes);
void hpml_comm_free_shared(hpml_comm_t *comm, void *p);
/* Local rank k's copy of a registered buffer: p is (a pointer into) a buffer that
 * hpml_comm_alloc_shared returned on this rank, and the result is the same place in the
 * buffer that the same call returned on local rank k, which this rank may read and write.
 * NULL when p is not in a registered buffer or k is not a local rank. */
void *hpml_comm_shared_peer(hpml_comm_t *comm, const void *p, int local_rank);
/* A barrier of the node's ranks through the node segment: returns once every rank of this
 * rank's node has called it as often as this one, and what a rank wrote to registered
 * buffers before its call can then be read by the others. Ranks on other nodes are not
 * waited for. Every rank of the communicator calls it (checking mode compares the calls
 * across the communicator). Used to exchange data through registered buffers without
 * messages: write, sync, read the peers' copies, and sync again before writing anew. */
int hpml_comm_node_sync(hpml_comm_t *comm);

/* ---- nonblocking ---------------------------------------------------------------- */

/* Start an allreduce/bcast; operations complete in submission order and progress in the
 * background (a progress thread when MPI provides MPI_THREAD_MULTIPLE). The buffers must
 * stay valid until hpml_wait returns or hpml_test reports done. */
int hpml_iallreduce(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                    hpml_op_t op, hpml_comm_t *comm, hpml_request_t **req);
int hpml_ibcast(void *buf, size_t count, hpml_dtype_t dtype, int root, hpml_comm_t *comm,
                hpml_request_t **req);
/* Wait for completion and free the request; returns the operation's result. */
int hpml_wait(hpml_request_t *req);
/* *done = 1 when complete (the request is then freed and its result returned). */
int hpml_test(hpml_request_t *req, int *done);

/* ---- point-to-point --------------------------------------------------------------- */

/* Tags of point-to-point messages: 0..HPML_TAG_MAX (below the tags of hpml's own
 * point-to-point collectives, so the two never match each other's messages). */
#define HPML_TAG_MAX 16383

typedef struct hpml_p2p_request hpml_p2p_request_t;

/* Send count elements of dtype to rank dest of comm / receive them from rank src, with a
 * tag; messages of one tag between two ranks arrive in the order they were sent. Counts
 * above MPI's int limit go in pieces that both sides post in the same order, so the
 * receiver must expect exactly the sender's count. Blocking: send may return before the
 * message is received (MPI's eager sends), recv when it has arrived. Errors:
 * HPML_ERR_INVAL (a NULL buffer with a count, a rank outside the communicator, a tag
 * outside 0..HPML_TAG_MAX, a bad dtype), HPML_ERR_MPI. Not collective; thread-safe as the
 * MPI library's point-to-point calls are. */
int hpml_send(const void *buf, size_t count, hpml_dtype_t dtype, int dest, int tag,
              hpml_comm_t *comm);
int hpml_recv(void *buf, size_t count, hpml_dtype_t dtype, int src, int tag, hpml_comm_t *comm);
/* The nonblocking forms: the buffer is borrowed until hpml_p2p_wait returns or
 * hpml_p2p_test reports done, which free the request. Unlike hpml_iallreduce's requests
 * these complete in any order (the MPI library progresses them). */
int hpml_isend(const void *buf, size_t count, hpml_dtype_t dtype, int dest, int tag,
               hpml_comm_t *comm, hpml_p2p_request_t **req);
int hpml_irecv(void *buf, size_t count, hpml_dtype_t dtype, int src, int tag, hpml_comm_t *comm,
               hpml_p2p_request_t **req);
/* Wait for a request (NULL: nothing to wait for) and free it. */
int hpml_p2p_wait(hpml_p2p_request_t *req);
/* *done = 1 when complete (the request is then freed). */
int hpml_p2p_test(hpml_p2p_request_t *req, int *done);
/* Wait for n requests (NULL entries skipped) and set each to NULL; the first error. */
int hpml_p2p_waitall(size_t n, hpml_p2p_request_t **reqs);

/* The ranks of comm with the same color (>= 0) as a new communicator, ranked by key then
 * by their rank in comm (MPI_Comm_split), with comm's checking mode. Collective over comm;
 * destroy the result with hpml_comm_destroy. */
int hpml_comm_split(hpml_comm_t *comm, int color, int key, hpml_comm_t **out);

/* ---- allreduce with a function applied to the result ----------------------------- */

/* Called by hpml_allreduce_apply on elements [offset, offset + count) of the reduced
 * vector: `in` holds their reduced values, and fn writes their final values to `out`
 * (which is recvbuf + offset, or memory that is then copied there; it may be the same
 * memory as `in`). Returns 0 or a negative HPML_ERR_* (with hpml_set_error). fn must not
 * call hpml on the same communicator. */
typedef int (*hpml_apply_fn)(void *ctx, size_t offset, const void *in, void *out, size_t count);

/* recvbuf = fn(allreduce(sendbuf)) on every rank, where each element passes through fn
 * on only some ranks: in the shared-memory allreduce, on one rank per node (the rank that
 * reduces it), so work done in fn, such as an optimizer update of the parameters whose
 * gradients are being summed (ZeRO-1 style), is split between a node's ranks instead of
 * repeated on each. A piece of at most HPML_SHM_SMALL bytes (16 KiB) on one node (a
 * call, or a piece of HPML_MAX_CHUNK_ELEMS elements of a larger one) is reduced and
 * applied by every rank, as the shared-memory allreduce does in one step.
 * Which rank applies which element is the same from call to call as long as these are:
 * count, dtype, the communicator, the form (blocking, or nonblocking: the progress thread
 * has its own communicator and segment) and the environment (HPML_SHM_*,
 * HPML_MAX_CHUNK_ELEMS, HPML_PROGRESS). So state that fn keeps per element (optimizer
 * moments) stays current on the rank that uses it; to gather such state, call in the same
 * form with an fn that writes the state to `out`. Elements of recvbuf that this rank
 * passes to fn keep their old values until fn has been called for them, so fn may read
 * them (an optimizer reads the parameters it updates); on error recvbuf is undefined.
 * When fn fails on a rank, that rank and the ranks that read its output return an error.
 * Out of place only (sendbuf is not HPML_IN_PLACE and does not overlap recvbuf). Needs
 * the node segment (the error of its creation otherwise). Collective. */
int hpml_allreduce_apply(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                         hpml_op_t op, hpml_apply_fn fn, void *ctx, hpml_comm_t *comm);
/* Nonblocking form. fn runs in the progress thread, concurrently with the caller; without
 * one (HPML_PROGRESS=mpi, or no MPI_THREAD_MULTIPLE) on every element on every rank,
 * inside the hpml_test/hpml_wait that completes the request; on one rank inside this
 * call. ctx, sendbuf and recvbuf are borrowed until completion: the caller must not touch
 * recvbuf, nor sendbuf's contents, until then. */
int hpml_iallreduce_apply(const void *sendbuf, void *recvbuf, size_t count, hpml_dtype_t dtype,
                          hpml_op_t op, hpml_apply_fn fn, void *ctx, hpml_comm_t *comm,
                          hpml_request_t **req);

/* ---- tensor fusion -------------------------------------------------------------- */

/* A fusion buffer: add many tensors, one allreduce over the packed buffer, the results
 * are copied back into each tensor (Horovod's tensor fusion, DDP's buckets). */
typedef struct hpml_fusion hpml_fusion_t;
int hpml_fusion_create(hpml_comm_t *comm, hpml_dtype_t dtype, hpml_op_t op, size_t capacity_bytes,
                       hpml_fusion_t **out);
void hpml_fusion_destroy(hpml_fusion_t *f);
/* Register `count` elements at `tensor` (borrowed until execute returns). */
int hpml_fusion_add(hpml_fusion_t *f, void *tensor, size_t count);
/* Allreduce every added tensor in place (in as few operations as the capacity allows),
 * then forget them. */
int hpml_fusion_execute(hpml_fusion_t *f);

/* Algorithm names ("ring", "rabenseifner", "mpi", "auto", ...) and parsing. */
const char *hpml_algo_name(hpml_algo_t algo);
int hpml_algo_parse(const char *name, hpml_algo_t *out);
const char *hpml_coll_name(hpml_coll_t coll);

#ifdef __cplusplus
}
#endif

#endif /* HPML_COMM_H */
