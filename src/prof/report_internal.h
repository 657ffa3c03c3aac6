/*
 * The report's data, shared by report.c (reading the rank files, text and JSON) and
 * trace_json.c (the Chrome trace). Private to src/prof.
 */
#ifndef HPML_PROF_REPORT_INTERNAL_H
#define HPML_PROF_REPORT_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "hpml/prof.h"

#define PROF_GROUPS  65  /* group numbers in a rank's file: 0..64 */
#define PROF_FILES   257 /* file numbers: 0..256 */
#define PROF_REGIONS 256

#define MAX_NAMES 128
#define HB        64 /* bins accepted in a file (the profiler writes 40) */

typedef struct {
    uint64_t count, total_ns, min_ns, max_ns, bytes;
} stat_t;

typedef struct {
    int size;
    int *world;
} group_t;

typedef struct {
    int call, group; /* report-wide indices */
    uint64_t bins[HB];
} hist_t;

typedef struct {
    char *path;
    stat_t op[MAX_NAMES]; /* by I/O name index */
    uint64_t bins[HB];
} file_t;

/* A call site summed over threads and ranks; where[] is filled by symbolize(). */
typedef struct {
    int call, depth;
    char *obj[2], *sym[2], *where[2];
    uint64_t base[2], off[2];
    stat_t st;
} site_t;

/* An hpml collective and algorithm, summed over ranks. */
typedef struct {
    char *name;
    stat_t st;
    uint64_t mpi_calls, mpi_ns, mpi_bytes, p2p_msgs, p2p_bytes;
} hcoll_t;

typedef struct {
    int present, has_snap;
    char state[32];
    long pid;
    char host[64];
    unsigned long seq;
    double elapsed;
    stat_t call[MAX_NAMES];
    uint64_t *msgs, *bytes; /* [ranks] sent to each world rank */
    /* For the trace: this rank's numbering of communicator groups (-> the report's),
     * of files (-> paths) and of regions (-> names), and the events it dropped. */
    int gmap[PROF_GROUPS];
    const char *fpath[PROF_FILES];
    char *region[PROF_REGIONS];
    uint64_t trace_dropped, trace_cap;
    /* HPML_PROF_SELF=1 ('p' line): the profiler's own time, seconds, and the calls timed */
    int has_self;
    uint64_t self_calls;
    double self_calls_s, self_start_s, self_flush_s, self_clock_s;
} rank_t;

struct hpml_prof_report {
    char run[64];
    int ranks, stale;
    rank_t *rank;
    char *names[MAX_NAMES]; /* MPI call names */
    int nnames;
    char *ionames[MAX_NAMES];
    int nionames;
    group_t *groups;
    int ngroups;
    hist_t *hists;
    int nhists;
    file_t *files;
    int nfiles;
    site_t *sites;
    int nsites;
    hcoll_t *hcolls;
    int nhcolls;
    char why[512];
};

#endif
