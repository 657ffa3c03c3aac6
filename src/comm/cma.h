/*
 * Cross-Memory Attach (cma.c): copies between two processes' private memory with Linux's
 * process_vm_readv / process_vm_writev, which the shared-memory bcast uses for private
 * buffers (docs/decisions/cross-memory-attach.md), and the probe that tells whether the
 * node's ranks can use them.
 */
#ifndef HPML_COMM_CMA_H
#define HPML_COMM_CMA_H

#include <stddef.h>
#include <stdint.h>

#include "hpml/comm.h"

struct hpml_shm;

/* Can every local rank read its neighbour's memory with process_vm_readv (same uid, no
 * ptrace restriction, a kernel with CMA)? Sets s->cma to the answer, which all local ranks
 * agree on so that they all take the same path; 0 when `enabled` is 0 (HPML_SHM_CMA=0)
 * or the node has one rank. Collective over comm->local, when the segment is made (the
 * ranks read each other's control blocks). 0 or an error. */
int hpml__cma_probe(hpml_comm_t *comm, struct hpml_shm *s, int enabled);
/* Copy `bytes` from address `remote` of process `pid` to `local` (read) or the other way
 * (write). 0 or HPML_ERR_STATE. Only when s->cma. */
int hpml__cma_read(int64_t pid, void *local, uint64_t remote, size_t bytes);
int hpml__cma_write(int64_t pid, uint64_t remote, const void *local, size_t bytes);

#endif /* HPML_COMM_CMA_H */
