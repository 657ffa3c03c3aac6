/*
 * Cross-Memory Attach: process_vm_readv / process_vm_writev copy between two processes'
 * private memory in one step, as Open MPI's vader and MPICH's nemesis do for large
 * messages; the system calls pin the pages on every call. Probed once per node segment
 * (docs/decisions/cross-memory-attach.md).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "comm/cma.h"
#include "comm/comm_internal.h"
#include "comm/shm_internal.h"

int hpml__cma_probe(hpml_comm_t *comm, hpml_shm_t *s, int enabled)
{
    hpml_shm_ctrl_t *me = hpml__shm_ctrl(s, comm->local_rank), *next, got;
    int ok = enabled && comm->local_size > 1, all = 0, rc = 0;

    /* Each rank reads the next rank's control block through CMA and compares it with the
     * mapped copy. */
    me->cma_pid = (int64_t)getpid();
    me->cma_addr = (uint64_t)(uintptr_t)me;
    HPML__MPI(MPI_Barrier(comm->local));
    next = hpml__shm_ctrl(s, (comm->local_rank + 1) % comm->local_size);
    if (ok && (hpml__cma_read(next->cma_pid, &got, next->cma_addr, sizeof(got)) != 0 ||
               got.cma_pid != next->cma_pid))
        ok = 0;
    HPML__MPI(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm->local));
    s->cma = all;
    HPML_LOG(HPML_LOG_DEBUG, "cross-memory attach %s", all ? "available" : "not available");
out:
    return rc;
}

/* Copy `bytes` between `local` and address `remote` of process pid: into this process
 * (write = 0) or into pid's (write = 1). */
static int cma_copy(int64_t pid, char *local, uint64_t remote, size_t bytes, int write)
{
    /* The kernel may copy less than asked (it pins the pages in batches): continue. */
    while (bytes > 0) {
        struct iovec li = {local, bytes}, ri = {(void *)(uintptr_t)remote, bytes};
        ssize_t k = write ? process_vm_writev((pid_t)pid, &li, 1, &ri, 1, 0)
                          : process_vm_readv((pid_t)pid, &li, 1, &ri, 1, 0);

        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            return hpml_set_error(HPML_ERR_STATE, "%s: %s",
                                  write ? "process_vm_writev" : "process_vm_readv",
                                  k < 0 ? strerror(errno) : "no progress");
        }
        local += k, remote += (uint64_t)k, bytes -= (size_t)k;
    }
    return 0;
}

int hpml__cma_read(int64_t pid, void *local, uint64_t remote, size_t bytes)
{
    return cma_copy(pid, local, remote, bytes, 0);
}

int hpml__cma_write(int64_t pid, uint64_t remote, const void *local, size_t bytes)
{
    /* process_vm_writev only reads the local buffer. */
    return cma_copy(pid, (char *)(uintptr_t)local, remote, bytes, 1);
}
