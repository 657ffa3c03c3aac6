/*
 * Facts about the running job for `hpml info`: the MPI library, thread level, nodes and
 * their real host names, and whether node shared memory works.
 */
#ifndef HPML_SYSINFO_H
#define HPML_SYSINFO_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HPML_HOSTNAME_MAX 256

typedef struct hpml_sysinfo {
    char mpi_library[MPI_MAX_LIBRARY_VERSION_STRING]; /* MPI_Get_library_version */
    int mpi_version, mpi_subversion;                  /* MPI standard version */
    int thread_provided;                              /* MPI_Query_thread */
    int ranks;                                        /* size of the communicator */
    int nodes;                                        /* shared-memory domains */
    char (*hostnames)[HPML_HOSTNAME_MAX];             /* per node, valid at rank 0 */
    int *node_ranks;                                  /* ranks per node, at rank 0 */
    int shm_works;        /* 1: every node's MPI_Win_allocate_shared segment is coherent */
    char shm_detail[256]; /* why not, when it does not */
} hpml_sysinfo_t;

/* Collective over `comm`. The per-node arrays are filled at rank 0 of `comm` only. */
int hpml_sysinfo_gather(MPI_Comm comm, hpml_sysinfo_t *out);
/* Free the arrays; NULL-safe. */
void hpml_sysinfo_free(hpml_sysinfo_t *info);
/* "MPI_THREAD_MULTIPLE" etc. */
const char *hpml_thread_level_name(int level);

#ifdef __cplusplus
}
#endif

#endif
