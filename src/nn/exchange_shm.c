/*
 * The two-layer split's exchanges through the node's shared memory (layout.h,
 * nn_exchange_t), where every rank of the communicator is on one node: each rank writes
 * its part of every sample's sums into a registered buffer (hpml_comm_alloc_shared) where
 * the sample's rank reads it (hpml_comm_shared_peer; on one node rank p is local rank p),
 * and writes its samples' rows straight into one matrix for the node (local rank 0's
 * buffer); each exchange is one hpml_comm_node_sync after the writes, and no message.
 * With a tail, each rank also leaves its gradients above the split in a third buffer,
 * which every rank sums in rank order, as the shared-memory allreduce sums small vectors.
 * The next step writes a buffer again only after the other sync: the parts after every
 * rank has passed this step's second (so has finished its sums), the rows and the tail
 * after its first (so every rank has finished reading them). docs/decisions/hybrid-layout.md.
 */
#include <stdlib.h>
#include <string.h>

#include "nn/layout.h"

typedef struct {
    nn_exchange_t base;
    float *rows_mine; /* this rank's registered buffer of the matrix (local rank 0's is used) */
} shm_t;

static int shm_sync(nn_exchange_t *x)
{
    return hpml_comm_node_sync(x->sp->comm);
}

static const float *shm_part(nn_exchange_t *x, int p)
{
    const nn_split_t *sp = x->sp;
    const size_t at = sp->rows[sp->me] * x->w;

    if (p == sp->me)
        return x->parts + at;
    return (const float *)hpml_comm_shared_peer(sp->comm, x->parts, p) + at;
}

static void shm_sum_tail(nn_exchange_t *x, float *g, size_t n)
{
    for (int p = 0; p < x->sp->P; p++) {
        const float *part = hpml_comm_shared_peer(x->sp->comm, x->tail, p);
        if (p == 0)
            memcpy(g, part, n * sizeof(float));
        else
            for (size_t i = 0; i < n; i++)
                g[i] += part[i];
    }
}

/* Freeing a registered buffer is collective: after an error, which may be this rank's
 * alone, the buffers stay until the communicator is destroyed, so that this rank returns
 * and reports instead of waiting for peers still in a step. */
static void shm_close(nn_exchange_t *x, int err)
{
    shm_t *e = (shm_t *)x;

    if (e == NULL)
        return;
    if (err == 0) {
        hpml_comm_free_shared(x->sp->comm, x->parts);
        hpml_comm_free_shared(x->sp->comm, e->rows_mine);
        hpml_comm_free_shared(x->sp->comm, x->tail);
    }
    free(e);
}

static const nn_exchange_ops_t shm_ops = {
    .send_parts = shm_sync,
    .part = shm_part,
    .share_rows = shm_sync,
    .sum_tail = shm_sum_tail,
    .close = shm_close,
};

int hpml__exchange_shm_open(nn_split_t *sp, size_t w, size_t gb, size_t tail_bytes,
                            nn_exchange_t **out)
{
    const size_t zb = gb * w * sizeof(float);
    float *parts, *rows, *rows0, *tail;
    shm_t *e;
    int ok, err;

    *out = NULL;
    if (sp->P == 1 || hpml_comm_nodes(sp->comm) != 1)
        return 0;
    e = calloc(1, sizeof(*e));
    parts = hpml_comm_alloc_shared(sp->comm, zb);
    rows = hpml_comm_alloc_shared(sp->comm, zb);
    tail = tail_bytes ? hpml_comm_alloc_shared(sp->comm, tail_bytes) : NULL;
    rows0 = rows ? hpml_comm_shared_peer(sp->comm, rows, 0) : NULL;
    ok = e && parts && rows0 && (tail || !tail_bytes);
    if ((err = hpml_allreduce(HPML_IN_PLACE, &ok, 1, HPML_I32, HPML_MIN, sp->comm)) != 0)
        goto out;
    if (!ok) {
        /* Whatever was registered stays until the communicator is destroyed: freeing is
         * collective, and a rank that got no buffer has none to free with the others. */
        HPML_LOG(HPML_LOG_WARN, "nn: no shared-memory buffers for the split layers' "
                                "exchanges; they go through messages");
        goto out;
    }
    e->base = (nn_exchange_t){
        .ops = &shm_ops, .sp = sp, .w = w, .parts = parts, .rows = rows0, .tail = tail};
    e->base.desc =
        tail ? "and the gradients above them through shared memory" : "through shared memory";
    e->rows_mine = rows;
    *out = &e->base;
    e = NULL;
out:
    free(e);
    return err;
}
