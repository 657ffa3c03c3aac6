/*
 * Reports of libhpml-prof.so's data: `hpml prof merge DIR` in library form. The
 * profiler (loaded with LD_PRELOAD) leaves one append-only file per rank in DIR,
 * rank-<world rank>.prof, holding snapshots of its counters; these functions read the
 * last complete snapshot of every rank of the newest run in DIR and write the text and
 * JSON reports (docs/prof.md describes both and the files). No MPI.
 */
#ifndef HPML_PROF_H_PUBLIC
#define HPML_PROF_H_PUBLIC

#include <stdio.h>

typedef struct hpml_prof_report hpml_prof_report_t;

/*
 * Read DIR's rank files. Ranks whose last snapshot is not the one MPI_Finalize wrote (a
 * signal, MPI_Abort, exit without MPI_Finalize, killed: periodic data only) and ranks
 * without a file make the report incomplete; it is built from whatever exists. Files of
 * an earlier run in the same folder are ignored (and counted). Returns 0, HPML_ERR_IO
 * (DIR unreadable, or no rank file in it), HPML_ERR_FORMAT (a file that is not the
 * profiler's), HPML_ERR_NOMEM. *out is owned by the caller: hpml_prof_report_free.
 */
int hpml_prof_load(const char *dir, hpml_prof_report_t **out);
void hpml_prof_report_free(hpml_prof_report_t *r); /* NULL-safe */

/* The run's number of ranks. */
int hpml_prof_ranks(const hpml_prof_report_t *r);
/* 1 when every rank of the run left a final snapshot. */
int hpml_prof_complete(const hpml_prof_report_t *r);
/* A one-line summary of what is missing ("rank 1: signal 15 after 2.0 s"), "" if none. */
const char *hpml_prof_incomplete_why(const hpml_prof_report_t *r);

/* The human report: summary, the `top` calls by total time (0: all), the imbalance of
 * time across ranks, the communication matrix (up to 32 ranks), size histograms, I/O. */
void hpml_prof_write_text(const hpml_prof_report_t *r, FILE *f, int top);
/* The JSON report (docs/prof.md, "JSON"). */
void hpml_prof_write_json(const hpml_prof_report_t *r, FILE *f);
/*
 * The Chrome trace (Trace Event Format JSON, gzip) of a run profiled in trace mode, from
 * DIR's rank-<r>.trace files of the report's run, written to path through a temporary
 * file. *events: the events written besides metadata (at most the run's event cap).
 * Returns 0, 1 when the run left no trace, or an HPML_ERR_*.
 */
int hpml_prof_write_trace(const hpml_prof_report_t *r, const char *dir, const char *path,
                          unsigned long long *events);

/* gnuplot data: the matrix as rows "sender receiver bytes messages" (a blank line after
 * each sender), and per rank "rank not_in_MPI <seconds in each of the top `ncalls` calls>
 * other_MPI", the column names on the first line. */
void hpml_prof_write_matrix_dat(const hpml_prof_report_t *r, FILE *f);
void hpml_prof_write_ranks_dat(const hpml_prof_report_t *r, FILE *f, int ncalls);

#endif
