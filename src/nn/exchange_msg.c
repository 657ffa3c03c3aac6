/*
 * The two-layer split's exchanges through messages (layout.h, nn_exchange_t): the parts of
 * every sample's sums go to the sample's rank in one all-to-all, and the rows of the
 * shared matrix to every rank in a second one (an all-gather). The gradients above the
 * split are left to the gradient buckets (no tail).
 */
#include <stdlib.h>

#include "nn/layout.h"

typedef struct {
    nn_exchange_t base;
    float *recv; /* (P, nl, w): the other ranks' parts of this rank's samples */
} msg_t;

static int msg_send_parts(nn_exchange_t *x)
{
    msg_t *e = (msg_t *)x;
    nn_split_t *sp = x->sp;
    const size_t w = x->w, nl = sp->nl;

    for (int p = 0; p < sp->P; p++) {
        int self = p == sp->me; /* my own part is read where it is */
        sp->sc[p] = self ? 0 : (sp->rows[p + 1] - sp->rows[p]) * w;
        sp->sd[p] = sp->rows[p] * w;
        sp->rc[p] = self ? 0 : nl * w;
        sp->rd[p] = (size_t)p * nl * w;
    }
    return hpml_alltoallv(x->parts, sp->sc, sp->sd, e->recv, sp->rc, sp->rd, HPML_F32, sp->comm);
}

static const float *msg_part(nn_exchange_t *x, int p)
{
    const nn_split_t *sp = x->sp;

    if (p == sp->me)
        return x->parts + sp->rows[sp->me] * x->w;
    return ((msg_t *)x)->recv + (size_t)p * sp->nl * x->w;
}

static int msg_share_rows(nn_exchange_t *x)
{
    return hpml__split_share(x->sp, x->rows, x->sp->rows, x->w);
}

static void msg_close(nn_exchange_t *x, int err)
{
    msg_t *e = (msg_t *)x;

    (void)err;
    if (e == NULL)
        return;
    hpml_free(x->parts);
    hpml_free(x->rows);
    hpml_free(e->recv);
    free(e);
}

static const nn_exchange_ops_t msg_ops = {
    .send_parts = msg_send_parts,
    .part = msg_part,
    .share_rows = msg_share_rows,
    .sum_tail = NULL, /* no tail */
    .close = msg_close,
};

int hpml__exchange_msg_open(nn_split_t *sp, size_t w, size_t gb, size_t lb, nn_exchange_t **out)
{
    msg_t *e = calloc(1, sizeof(*e));
    int err = HPML_ERR_NOMEM;

    *out = NULL;
    if (e == NULL)
        goto out;
    e->base = (nn_exchange_t){.ops = &msg_ops, .sp = sp, .w = w, .desc = "through messages"};
    e->base.parts = hpml_malloc(gb * w * sizeof(float) + 1);
    e->recv = hpml_malloc((size_t)sp->P * lb * w * sizeof(float) + 1);
    e->base.rows = hpml_malloc(gb * w * sizeof(float) + 1);
    if (!e->base.parts || !e->recv || !e->base.rows)
        goto out;
    *out = &e->base;
    e = NULL;
    err = 0;
out:
    msg_close(e ? &e->base : NULL, err);
    return err;
}
