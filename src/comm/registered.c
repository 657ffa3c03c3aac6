/*
 * Registered buffers: memory from hpml_comm_alloc_shared is one shared window over the
 * node's ranks per allocation, so that the shared-memory algorithms read a peer's buffer
 * where it is instead of through a copy into the node segment, and callers exchange data
 * through them with hpml_comm_node_sync (docs/decisions/registered-buffers.md).
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "comm/comm_internal.h"
#include "comm/shm_internal.h"

int hpml__registered_lookup(hpml_comm_t *comm, const void *p, size_t bytes, int *win, size_t *off)
{
    const char *c = p;

    for (hpml_shm_win_t *w = comm->registered; w != NULL; w = w->next) {
        if (c >= w->base && c <= w->base + w->bytes && bytes <= (size_t)(w->base + w->bytes - c)) {
            *win = w->id;
            *off = (size_t)(c - w->base);
            return 1;
        }
    }
    return 0;
}

char *hpml__registered_addr(hpml_comm_t *comm, int win, int lr, size_t off)
{
    for (hpml_shm_win_t *w = comm->registered; w != NULL; w = w->next)
        if (w->id == win)
            return w->peer[lr] + off;
    return NULL;
}

void *hpml_comm_alloc_shared(hpml_comm_t *comm, size_t bytes)
{
    hpml_shm_win_t *w;

    if (comm == NULL)
        return NULL;
    if (comm->check && hpml__check(comm, HPML__KIND_ALLOC_SHARED, bytes, -1, -1, -1) != 0)
        return NULL;
    w = calloc(1, sizeof(*w));
    if (w == NULL)
        return NULL;
    /* At least one cache line so that every buffer has a distinct address. */
    if (hpml__shm_win_create(comm, bytes < 64 ? 64 : (bytes + 63) & ~(size_t)63, w) != 0) {
        free(w);
        return NULL;
    }
    w->id = comm->nregistered++;
    w->next = comm->registered;
    comm->registered = w;
    return w->base;
}

void hpml_comm_free_shared(hpml_comm_t *comm, void *p)
{
    hpml_shm_win_t **pp;

    if (comm == NULL || p == NULL)
        return;
    for (pp = &comm->registered; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->base == p) {
            hpml_shm_win_t *w = *pp;

            *pp = w->next;
            hpml__shm_win_free(w);
            free(w);
            return;
        }
    }
}

void *hpml_comm_shared_peer(hpml_comm_t *comm, const void *p, int local_rank)
{
    int win;
    size_t off;

    if (comm == NULL || p == NULL || local_rank < 0 || local_rank >= comm->local_size ||
        !hpml__registered_lookup(comm, p, 1, &win, &off))
        return NULL;
    return hpml__registered_addr(comm, win, local_rank, off);
}

int hpml_comm_node_sync(hpml_comm_t *comm)
{
    hpml_shm_t *s;
    hpml_shm_ctrl_t *me;
    uint64_t g;
    int rc;

    if (comm == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_comm_node_sync: NULL communicator");
    if (comm->check && (rc = hpml__check(comm, HPML__KIND_NODE_SYNC, 0, -1, -1, -1)) != 0)
        return rc;
    if (comm->local_size == 1)
        return 0;
    if ((rc = hpml__shm_get(comm, &s)) != 0)
        return rc;
    /* One step of the segment's protocol that reads no pipeline buffer, so this rank is
     * done with it as soon as it starts: `done` goes up with `arrived`, and the release of
     * `arrived` publishes every store this rank made before. */
    g = s->step;
    me = hpml__shm_ctrl(s, comm->local_rank);
    atomic_store_explicit(&me->done, g + 1, memory_order_release);
    atomic_store_explicit(&me->arrived, g + 1, memory_order_release);
    hpml__shm_wait_all(s, offsetof(hpml_shm_ctrl_t, arrived), g + 1, HPML_SHM_YIELD_AFTER_SPIN);
    s->synced = g + 1;
    s->step = g + 1;
    return 0;
}
