/*
 * hpml bench: an OSU-micro-benchmark-compatible harness that times native MPI and hpml
 * algorithms side by side.
 *
 * hpml_bench_run is collective over the communicator it is given: every rank calls it
 * with the same options. It measures, validates and fills a result table that rank 0
 * (every rank, in fact: the numbers are reduced to all ranks) can print with
 * hpml_bench_print_* . The library never prints to stdout on its own: the print
 * functions write to the FILE the caller passes. Not thread-safe (one run at a time).
 * docs/benchmarks.md describes every option and how each statistic is computed.
 */
#ifndef HPML_BENCH_H
#define HPML_BENCH_H

#include <mpi.h>
#include <stddef.h>
#include <stdio.h>

#include "hpml/comm.h"
#include "hpml/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HPML_BENCH_MAX_PCT   16
#define HPML_BENCH_MAX_IMPLS 24

/* One implementation column: native MPI, or hpml with an algorithm (AUTO = hpml's
 * selection; the plain "hpml" of cases with no algorithm choice). */
typedef struct hpml_bench_impl {
    int native;       /* 1: the MPI library's own call */
    hpml_algo_t algo; /* hpml only */
    char name[32];    /* "mpi", "hpml", "hpml:ring" */
} hpml_bench_impl_t;

/* Options with OMB's meaning; 0 / -1 fields mean "OMB's default for the case". */
typedef struct hpml_bench_opts {
    const char *case_name;   /* "allreduce", "latency", ... */
    size_t min_size;         /* bytes */
    size_t max_size;         /* 0: default (1 MiB collectives, 4 MiB point-to-point) */
    long iters;              /* -i; 0: default by size */
    long warmup;             /* -x; -1: default by size */
    int full;                /* -f: min, max, iterations */
    int validate;            /* -c */
    hpml_dtype_t dtype;      /* -T */
    const char *dtype_label; /* "MPI_FLOAT"; NULL: derived from dtype */
    int npct;                /* -z: percentiles */
    double pct[HPML_BENCH_MAX_PCT];
    int in_place;     /* -l */
    int root_rotate;  /* -k rotate */
    int root;         /* -k fixed:N */
    int window;       /* -W; 0: 64 */
    size_t mem_limit; /* -M bytes per rank; 0: 512 MiB */
    int test_calls;   /* -t: test calls during compute (nonblocking) */
    int nimpls;       /* --impl, resolved by hpml_bench_parse_impls */
    hpml_bench_impl_t impls[HPML_BENCH_MAX_IMPLS];
    /* Called on every rank before each (impl, size) measurement, for a progress line. */
    void (*progress)(void *arg, const char *impl, size_t size, int done, int total);
    void *progress_arg;
} hpml_bench_opts_t;

/* One (implementation, size) measurement. Times in microseconds, bandwidths in MB/s
 * (10^6 bytes). NaN marks a statistic that does not apply to the case. */
typedef struct hpml_bench_row {
    size_t size; /* message size in bytes (OMB's meaning for the case) */
    long iters;
    double avg, min, max; /* mean / min / max of per-rank averages (OMB) */
    double maxrank;       /* mean over iterations of the per-iteration maximum across ranks */
    double pct[HPML_BENCH_MAX_PCT];
    double bw;           /* point-to-point bandwidth (bw, bibw, mbw_mr) */
    double msg_rate;     /* mbw_mr messages/s */
    double algbw, busbw; /* collectives: algorithm and bus bandwidth (nccl-tests) */
    double overall, compute, pure, overlap; /* nonblocking (OMB overlap method) */
    int valid;                              /* -1 not checked, 0 failed, 1 passed */
    long bad;                               /* wrong elements summed over ranks */
    char note[160];                         /* first wrong element, when validation failed */
    long warmup;                            /* untimed iterations before the timed ones */
} hpml_bench_row_t;

typedef struct hpml_bench_result {
    const char *case_name;
    const char *title; /* "Allreduce Latency Test" */
    int kind;          /* HPML_BENCH_KIND_* */
    int ranks;
    hpml_dtype_t dtype;
    char dtype_label[32];
    int npct;
    double pct[HPML_BENCH_MAX_PCT];
    int full, validate;
    int nimpls;
    hpml_bench_impl_t impls[HPML_BENCH_MAX_IMPLS];
    size_t nsizes;
    hpml_bench_row_t *rows; /* rows[impl * nsizes + size_index] */
    char note[200];         /* e.g. "hpml has no alltoall algorithm: mpi only" */
    /* Provenance, so that a record says what was measured where and when. */
    const char *op;        /* the reduction ("sum"), NULL for cases that do not reduce */
    int in_place;          /* -l */
    int rooted;            /* the case has a root (-k applies) */
    int root_rotate, root; /* -k rotate, or -k fixed:root */
    long iters_opt;        /* -i as given (0: OMB's default by size; rows hold the count) */
    long warmup_opt;       /* -x as given (-1: OMB's default by size) */
    char mpi_library[256]; /* MPI_Get_library_version's first line */
    int mpi_version[2];    /* MPI_Get_version: standard major, minor */
    int nhosts;            /* distinct processor names, in rank order of first appearance */
    char (*hosts)[MPI_MAX_PROCESSOR_NAME];
    int *host_ranks;    /* ranks on each host */
    char timestamp[32]; /* when the run started, UTC, ISO 8601 ("2026-01-31T12:00:00Z") */
} hpml_bench_result_t;

enum {
    HPML_BENCH_KIND_COLL = 0, /* blocking collective latency */
    HPML_BENCH_KIND_LAT,      /* point-to-point latency (latency, multi_lat) */
    HPML_BENCH_KIND_BW,       /* point-to-point bandwidth (bw, bibw) */
    HPML_BENCH_KIND_MBW,      /* multiple bandwidth / message rate (mbw_mr) */
    HPML_BENCH_KIND_NBC,      /* nonblocking collective overlap */
    HPML_BENCH_KIND_BARRIER   /* no size column */
};

/* Names of the cases, NULL-terminated, in the order `hpml bench --help` lists them. */
const char *const *hpml_bench_cases(void);
/* 1 if `name` is a case. */
int hpml_bench_case_exists(const char *name);
/* The largest message size a case sweeps when -m gives none (OMB's: 1 MiB for
 * collectives, 4 MiB point-to-point); 0 for barrier, which has no sizes, and for a name
 * that is not a case. */
size_t hpml_bench_default_max_size(const char *name);
/* Set OMB's defaults for the options (not the case name). */
void hpml_bench_opts_init(hpml_bench_opts_t *o);

/*
 * Resolve --impl for a case: a comma list of mpi | hpml | hpml:<algorithm> | all.
 * "all" is native MPI, hpml's own selection, then every hpml algorithm for the case's
 * collective. Cases hpml has no implementation of accept only mpi ("all" gives mpi and
 * sets *note); an hpml implementation with no in-place form is refused when o->in_place
 * is set. Returns 0 or HPML_ERR_INVAL with a message in hpml_last_error().
 * Not collective: every rank resolves the same string to the same list.
 */
int hpml_bench_parse_impls(const char *case_name, const char *spec, hpml_bench_opts_t *o,
                           char *note, size_t note_len);

/*
 * Run the benchmark. Collective over `comm` (every rank, same options). Needs at least
 * 2 ranks (mbw_mr and multi_lat an even number). On success *out holds the result on
 * every rank (free with hpml_bench_result_free). Validation failures are not errors:
 * they are recorded in the rows (valid == 0). Returns 0 or a negative HPML_ERR_*.
 * Between two sizes the ranks exchange only OMB's three one-double reductions to rank 0;
 * each rank keeps its per-iteration times (at most HPML_BENCH_STORE doubles, default
 * 2097152, before it reduces them between sizes) for the reductions after the sweep.
 * The environment variable HPML_BENCH_BREAK=drop-last (tests only) zeroes the last
 * element of every hpml result before validation, to prove that validation catches it.
 */
int hpml_bench_run(MPI_Comm comm, const hpml_bench_opts_t *o, hpml_bench_result_t **out);
void hpml_bench_result_free(hpml_bench_result_t *r); /* NULL-safe */

/*
 * Time one implementation (impl: "mpi", "hpml", "hpml:<algo>") of the allreduce (HPML_SUM
 * of sendbuf, or HPML_IN_PLACE, into recvbuf) or bcast (recvbuf from root 0) case of
 * `bytes` bytes on the caller's buffers, with hpml_bench_run's own loop: a barrier, then
 * skip untimed and iters timed iterations, each MPI_Wtime, the operation, MPI_Wtime and a
 * barrier on comm. t[0..iters) receives this rank's times in microseconds. comm serves the
 * barriers and the native call, hcomm (NULL only for "mpi") the hpml one. Collective over
 * comm. For harnesses that run this loop and another language's in turn in one process
 * (bench/python_vs_c.py). Returns 0 or a negative HPML_ERR_*.
 */
int hpml_bench_time_blocking(MPI_Comm comm, hpml_comm_t *hcomm, const char *case_name,
                             const char *impl, const void *sendbuf, void *recvbuf, size_t bytes,
                             hpml_dtype_t dtype, long iters, long skip, double *t);

/* Number of rows with valid == 0. */
int hpml_bench_failures(const hpml_bench_result_t *r);

/* OMB-shaped text, CSV (one row per implementation and size; header when `header`)
 * and JSON (one object). */
void hpml_bench_print_text(FILE *f, const hpml_bench_result_t *r);
void hpml_bench_print_csv(FILE *f, const hpml_bench_result_t *r, int header);
void hpml_bench_print_json(FILE *f, const hpml_bench_result_t *r);

#ifdef __cplusplus
}
#endif

#endif /* HPML_BENCH_H */
