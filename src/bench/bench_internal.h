/*
 * The benchmark harness's private interface: one bench_case_t per benchmark (nccl-tests'
 * `struct testColl` idea), filled by a small file per case; harness.c owns the sweep,
 * the timing loops, the statistics and validation.
 */
#ifndef HPML_BENCH_INTERNAL_H
#define HPML_BENCH_INTERNAL_H

#include <mpi.h>
#include <stddef.h>

#include "hpml/bench.h"

typedef struct bench_ctx {
    MPI_Comm comm;      /* for native MPI calls */
    hpml_comm_t *hcomm; /* NULL when no hpml implementation is measured */
    int rank, size;
    hpml_dtype_t dtype;
    MPI_Datatype mdt; /* the dtype's MPI type (bytes for f16/bf16) */
    MPI_Op msum;      /* MPI_SUM, or a user op for f16/bf16 */
    size_t esize;     /* bytes per element */
    const hpml_bench_impl_t *impl;
    size_t bytes; /* message size as OMB defines it for the case */
    size_t count; /* elements per block: bytes / esize */
    int root;
    int in_place;
    int window;
    void *sbuf, *rbuf;
    MPI_Request *reqs;    /* window * 2 */
    MPI_Status *stats;    /* window * 2 (MPI_STATUSES_IGNORE trips GCC's
                           * -Wstringop-overflow with MPICH's headers) */
    MPI_Request mreq;     /* nonblocking collective in flight (native) */
    hpml_request_t *hreq; /* nonblocking collective in flight (hpml) */
} bench_ctx_t;

typedef struct bench_case {
    const char *name;
    const char *title;       /* "Allreduce Latency Test" */
    int kind;                /* HPML_BENCH_KIND_* */
    int hpml_coll;           /* hpml_coll_t with an algorithm choice, or -1 */
    int hpml_plain;          /* 1: hpml has one implementation (barrier, iallreduce, ...) */
    const char *no_in_place; /* hpml's has no in-place form: why, for -l's error; or NULL */
    int rooted;              /* uses -k */
    const char *op;          /* the reduction it times ("sum"), NULL when it does not reduce */
    int even_ranks;          /* needs an even number of ranks (pairs) */
    /* Bytes moved per operation for algbw: size times this (1, or p for per-rank
     * blocks); busbw = algbw times bus_factor(p). 0 factor: no busbw column. */
    double (*total_mult)(int p);
    double (*bus_factor)(int p);
    /* Point-to-point: bytes per timed iteration for bandwidth (size * window ...). */
    double (*iter_bytes)(const bench_ctx_t *c);
    double time_scale; /* per-iteration time multiplier (latency: 0.5 one way) */
    /* Buffer bytes needed on this rank for message size `bytes`. */
    void (*buffers)(const bench_ctx_t *c, size_t bytes, size_t *sbytes, size_t *rbytes);
    /* 1 when this rank's times count in the statistics (pt2pt: senders only). */
    int (*reports)(const bench_ctx_t *c);
    /* One timed operation (blocking cases). Returns 0 or an HPML_ERR_*. */
    int (*run)(bench_ctx_t *c);
    /* Optional: the whole blocking loop of the native implementation, as OMB writes it
     * (the MPI call's arguments in locals, the call itself between the two MPI_Wtime,
     * no call through a pointer there); t as time_blocking fills it, so only for cases
     * whose time_scale is 1. */
    int (*native_loop)(bench_ctx_t *c, long iters, long skip, double *t);
    /* Nonblocking cases: start, test, wait. */
    int (*start)(bench_ctx_t *c);
    int (*test)(bench_ctx_t *c, int *done);
    int (*wait)(bench_ctx_t *c);
    /* Validation: fill the inputs, and say where this rank's result is and what each
     * element must be. NULL check: the case has nothing to validate. */
    void (*fill)(bench_ctx_t *c);
    /* Result on this rank: pointer and element count (NULL/0 when none here). */
    void *(*result)(bench_ctx_t *c, size_t *n);
    /* Expected value of result element i on this rank. */
    double (*expect)(const bench_ctx_t *c, size_t i);
} bench_case_t;

/* The cases (one file each). */
extern const bench_case_t hpml__bench_latency, hpml__bench_bw, hpml__bench_bibw, hpml__bench_mbw_mr,
    hpml__bench_multi_lat, hpml__bench_allreduce, hpml__bench_bcast, hpml__bench_reduce,
    hpml__bench_allgather, hpml__bench_reduce_scatter, hpml__bench_alltoall, hpml__bench_gather,
    hpml__bench_scatter, hpml__bench_barrier, hpml__bench_iallreduce, hpml__bench_ibcast;

const bench_case_t *hpml__bench_case_find(const char *name);

/* ---- data.c: wrap-free validation data for every dtype ---------------------------- */

/* Input element i of rank r: a small positive integer, exact in every dtype, chosen so
 * that a sum over all ranks stays exact (no wrap-around, no saturation, no rounding). */
double hpml__bench_value(const bench_ctx_t *c, int r, size_t i);
/* Sum over all ranks of hpml__bench_value(c, r, i). */
double hpml__bench_sum(const bench_ctx_t *c, size_t i);
void hpml__bench_set(void *buf, hpml_dtype_t dt, size_t i, double v);
double hpml__bench_get(const void *buf, hpml_dtype_t dt, size_t i);
/* buf[i] = value(rank r, i + offset) for i < n. */
void hpml__bench_fill_rank(const bench_ctx_t *c, void *buf, int r, size_t offset, size_t n);
/* test/wait of the nonblocking cases: the MPI request (c->mreq) for the native
 * implementation, the hpml request (c->hreq, freed on completion) otherwise. */
int hpml__bench_nb_test(bench_ctx_t *c, int *done);
int hpml__bench_nb_wait(bench_ctx_t *c);
/* The MPI type and sum op for a dtype (f16/bf16: MPI_UINT16_T and a user op). */
int hpml__bench_mpi_type(hpml_dtype_t dt, MPI_Datatype *type, MPI_Op *sum);
void hpml__bench_mpi_type_free(MPI_Op *sum);

/* ---- shared helpers for the cases -------------------------------------------------- */

double hpml__bench_one(int p);
double hpml__bench_ranks(int p);
double hpml__bench_ring_factor(int p); /* (p-1)/p */
int hpml__bench_everyone(const bench_ctx_t *c);
int hpml__bench_rank0(const bench_ctx_t *c);
/* The send buffer to pass, or MPI_IN_PLACE / HPML_IN_PLACE when c->in_place. */
#define BENCH_SEND_MPI(c)  ((c)->in_place ? MPI_IN_PLACE : (c)->sbuf)
#define BENCH_SEND_HPML(c) ((c)->in_place ? HPML_IN_PLACE : (c)->sbuf)
/* MPI return code to HPML_ERR_*. */
#define BENCH_MPI(call) ((call) == MPI_SUCCESS ? 0 : HPML_ERR_MPI)

/* A case's native_loop: OMB's blocking loop (a barrier; per iteration MPI_Wtime, CALL,
 * MPI_Wtime, a barrier) with CALL written out and its arguments held in locals (sbuf =
 * SEND, rbuf, count = COUNT, root, dt, op, comm), as osu_<case> calls the MPI: a call
 * through the case's run pointer inside the timed region read 2-4% above it. */
#define BENCH_NATIVE_LOOP(name, SEND, COUNT, CALL)                                                 \
    static int name(bench_ctx_t *c, long iters, long skip, double *t)                              \
    {                                                                                              \
        void *sbuf = (SEND), *rbuf = c->rbuf;                                                      \
        int count = (int)(COUNT), root = c->root;                                                  \
        MPI_Datatype dt = c->mdt;                                                                  \
        MPI_Op op = c->msum;                                                                       \
        MPI_Comm comm = c->comm;                                                                   \
                                                                                                   \
        (void)sbuf, (void)root, (void)op;                                                          \
        if (MPI_Barrier(comm) != MPI_SUCCESS)                                                      \
            return HPML_ERR_MPI;                                                                   \
        for (long i = 0; i < skip + iters; i++) {                                                  \
            double t0 = MPI_Wtime();                                                               \
            int rc = (CALL);                                                                       \
            double t1 = MPI_Wtime();                                                               \
                                                                                                   \
            if (rc != MPI_SUCCESS || MPI_Barrier(comm) != MPI_SUCCESS)                             \
                return HPML_ERR_MPI;                                                               \
            if (i >= skip)                                                                         \
                t[i - skip] = (t1 - t0) * 1e6;                                                     \
        }                                                                                          \
        return 0;                                                                                  \
    }

#endif
