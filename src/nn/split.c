/*
 * What the two split layouts share (layout_split1.c, layout_split2.c): layer 0, a dense
 * layer, split by outputs (Krizhevsky, "One weird trick for parallelizing convolutional
 * neural networks", 2014). Rank p owns outputs [own[p], own[p+1]) and computes them, with
 * its rows of the weights, for every sample of the global batch, whose inputs every rank
 * holds; it computes its rows' gradients for the whole batch, as one rank would, and
 * updates them with its own moments. The rows a rank does not own, and their moments, go
 * stale in its copy until they are gathered.
 */
#include <stdlib.h>
#include <string.h>

#include "hpml/io.h"
#include "nn/layout.h"

int hpml__split_open(nn_split_t *sp, const nn_layout_args_t *a)
{
    const nn_layer_t *l = &a->m->layers[0];
    size_t P1, no;

    sp->comm = a->comm;
    sp->m = a->m;
    sp->o = a->o;
    sp->P = hpml_comm_size(a->comm);
    sp->me = hpml_comm_rank(a->comm);
    sp->in = l->in_size;
    sp->out = l->out_size;
    P1 = (size_t)sp->P + 1;
    sp->own = malloc(P1 * sizeof(size_t));
    sp->rows = malloc(P1 * sizeof(size_t));
    sp->sc = malloc(P1 * sizeof(size_t));
    sp->sd = malloc(P1 * sizeof(size_t));
    sp->rc = malloc(P1 * sizeof(size_t));
    sp->rd = malloc(P1 * sizeof(size_t));
    if (!sp->own || !sp->rows || !sp->sc || !sp->sd || !sp->rc || !sp->rd)
        return HPML_ERR_NOMEM;
    for (int p = 0; p < sp->P; p++)
        hpml_io_partition(sp->out, p, sp->P, &sp->own[p], &sp->own[p + 1]);
    no = sp->own[sp->me + 1] - sp->own[sp->me];
    sp->x = hpml_malloc(a->gb * sp->in * sizeof(float) + 1);
    sp->y = hpml_malloc(a->gb * no * sizeof(float) + 1);
    sp->g = hpml_malloc(a->gb * no * sizeof(float) + 1);
    if (!sp->x || !sp->y || !sp->g)
        return HPML_ERR_NOMEM;
    sp->base.x = sp->x;
    sp->base.whole_batch = 1;
    return 0;
}

void hpml__split_close(nn_split_t *sp)
{
    free(sp->own);
    free(sp->rows);
    free(sp->sc);
    free(sp->sd);
    free(sp->rc);
    free(sp->rd);
    hpml_free(sp->x);
    hpml_free(sp->y);
    hpml_free(sp->g);
    hpml__buckets_close(sp->bk);
}

void hpml__split_rows(nn_split_t *sp, size_t gb)
{
    for (int p = 0; p < sp->P; p++)
        hpml_io_partition(gb, p, sp->P, &sp->rows[p], &sp->rows[p + 1]);
    sp->nl = sp->rows[sp->me + 1] - sp->rows[sp->me];
}

int hpml__split_share(nn_split_t *sp, float *v, const size_t *bounds, size_t w)
{
    const size_t me = (size_t)sp->me;

    for (int p = 0; p < sp->P; p++) {
        sp->sc[p] = (size_t)p == me ? 0 : (bounds[me + 1] - bounds[me]) * w;
        sp->sd[p] = bounds[me] * w;
        sp->rc[p] = (size_t)p == me ? 0 : (bounds[p + 1] - bounds[p]) * w;
        sp->rd[p] = bounds[p] * w;
    }
    return hpml_alltoallv(v, sp->sc, sp->sd, v, sp->rc, sp->rd, HPML_F32, sp->comm);
}

void hpml__split_update_rows(nn_split_t *sp, double lr)
{
    const nn_layer_t *l0 = &sp->m->layers[0];
    const size_t o0 = sp->own[sp->me], no = sp->own[sp->me + 1] - o0, in = sp->in;
    float *p = sp->m->params, *g = sp->m->grads;
    size_t at = l0->w_off + o0 * in;

    hpml_optim_update(sp->o, at, no * in, p + at, g + at, p + at, lr);
    at = l0->b_off + o0;
    hpml_optim_update(sp->o, at, no, p + at, g + at, p + at, lr);
}

int hpml__split_gather_rows(nn_split_t *sp, float *v)
{
    const nn_layer_t *l0 = &sp->m->layers[0];
    int err;

    if ((err = hpml__split_share(sp, v + l0->w_off, sp->own, sp->in)) != 0)
        return err;
    return hpml__split_share(sp, v + l0->b_off, sp->own, 1);
}

int hpml__split_waited(nn_split_t *sp, double t0, int err)
{
    sp->base.exposed += hpml_time() - t0;
    return err;
}
