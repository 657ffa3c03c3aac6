/*
 * Facts about the running job for `hpml info`: nodes are MPI's shared-memory domains
 * (MPI_Comm_split_type), host names come from gethostname on each node's first rank, and
 * shared memory is checked for real: every rank writes its slot of an
 * MPI_Win_allocate_shared segment and reads its neighbour's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hpml/core.h"
#include "hpml/sysinfo.h"

struct node_record {
    int is_leader;
    int local_size;
    char host[HPML_HOSTNAME_MAX];
};

const char *hpml_thread_level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "unknown";
    }
}

/* 1 if a shared window over `node` is coherent between its ranks, else 0 + reason. */
static int check_shm(MPI_Comm node, char *detail, size_t detail_len)
{
    MPI_Win win = MPI_WIN_NULL;
    long *mine = NULL, *peer = NULL;
    MPI_Aint peer_size;
    int peer_disp, lrank, lsize, ok = 0, rc;

    MPI_Comm_rank(node, &lrank);
    MPI_Comm_size(node, &lsize);
    rc = MPI_Win_allocate_shared(64, 1, MPI_INFO_NULL, node, &mine, &win);
    if (rc != MPI_SUCCESS) {
        snprintf(detail, detail_len, "MPI_Win_allocate_shared failed (error %d)", rc);
        return 0;
    }
    rc = MPI_Win_shared_query(win, (lrank + 1) % lsize, &peer_size, &peer_disp, &peer);
    if (rc != MPI_SUCCESS || peer == NULL) {
        snprintf(detail, detail_len, "MPI_Win_shared_query failed (error %d)", rc);
        goto out;
    }
    MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
    *mine = 1000 + lrank;
    MPI_Win_sync(win);
    MPI_Barrier(node);
    MPI_Win_sync(win);
    ok = (*peer == 1000 + (lrank + 1) % lsize);
    MPI_Win_unlock_all(win);
    if (!ok)
        snprintf(detail, detail_len, "a peer's write was not visible through the segment");
out:
    MPI_Win_free(&win);
    return ok;
}

int hpml_sysinfo_gather(MPI_Comm user, hpml_sysinfo_t *out)
{
    MPI_Comm comm = MPI_COMM_NULL, node = MPI_COMM_NULL;
    struct node_record me, *all = NULL;
    int rank, size, lrank, len, rc = 0, shm_local, shm_all;

    memset(out, 0, sizeof(*out));
    if (MPI_Comm_dup(user, &comm) != MPI_SUCCESS)
        return HPML_ERR_MPI;
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    out->ranks = size;
    MPI_Get_library_version(out->mpi_library, &len);
    /* Some libraries end the string with newlines; keep one clean line break policy. */
    while (len > 0 && (out->mpi_library[len - 1] == '\n' || out->mpi_library[len - 1] == ' '))
        out->mpi_library[--len] = '\0';
    MPI_Get_version(&out->mpi_version, &out->mpi_subversion);
    MPI_Query_thread(&out->thread_provided);

    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) !=
        MPI_SUCCESS) {
        rc = hpml_set_error(HPML_ERR_MPI, "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) failed");
        goto out;
    }
    MPI_Comm_rank(node, &lrank);
    memset(&me, 0, sizeof(me));
    me.is_leader = lrank == 0;
    MPI_Comm_size(node, &me.local_size);
    if (gethostname(me.host, sizeof(me.host) - 1) != 0)
        snprintf(me.host, sizeof(me.host), "unknown");

    shm_local = check_shm(node, out->shm_detail, sizeof(out->shm_detail));
    MPI_Allreduce(&shm_local, &shm_all, 1, MPI_INT, MPI_MIN, comm);
    out->shm_works = shm_all;
    if (shm_all && !shm_local)
        out->shm_detail[0] = '\0';
    if (!shm_all && shm_local)
        snprintf(out->shm_detail, sizeof(out->shm_detail), "failed on another node");

    if (rank == 0) {
        all = malloc((size_t)size * sizeof(*all));
        if (all == NULL)
            rc = HPML_ERR_NOMEM;
    }
    /* Every rank must take part in the gather even if rank 0 could not allocate. */
    MPI_Bcast(&rc, 1, MPI_INT, 0, comm);
    if (rc != 0)
        goto out;
    MPI_Gather(&me, (int)sizeof(me), MPI_BYTE, all, (int)sizeof(me), MPI_BYTE, 0, comm);
    {
        int nodes = 0;

        if (rank == 0)
            for (int i = 0; i < size; i++)
                nodes += all[i].is_leader;
        MPI_Bcast(&nodes, 1, MPI_INT, 0, comm);
        out->nodes = nodes;
    }
    if (rank == 0) {
        out->hostnames = calloc((size_t)out->nodes, sizeof(*out->hostnames));
        out->node_ranks = calloc((size_t)out->nodes, sizeof(*out->node_ranks));
        if (out->hostnames == NULL || out->node_ranks == NULL) {
            rc = HPML_ERR_NOMEM;
            goto out;
        }
        for (int i = 0, n = 0; i < size; i++)
            if (all[i].is_leader) {
                memcpy(out->hostnames[n], all[i].host, HPML_HOSTNAME_MAX);
                out->node_ranks[n++] = all[i].local_size;
            }
    }
out:
    free(all);
    if (node != MPI_COMM_NULL)
        MPI_Comm_free(&node);
    MPI_Comm_free(&comm);
    if (rc != 0)
        hpml_sysinfo_free(out);
    return rc;
}

void hpml_sysinfo_free(hpml_sysinfo_t *info)
{
    if (info == NULL)
        return;
    free(info->hostnames);
    free(info->node_ranks);
    info->hostnames = NULL;
    info->node_ranks = NULL;
}
