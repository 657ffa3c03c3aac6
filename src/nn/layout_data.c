/*
 * The data-parallel layout (Horovod, PyTorch DDP): every rank holds the whole model and
 * computes it on its block of each global batch (hpml_io_partition), with the loss
 * gradient scaled by 1/global batch, so that the sum of the ranks' gradients is the global
 * mean; the gradient buckets (buckets.c) sum them during backward and apply the update,
 * sharded between the ranks or replicated. The parameters are the same on every rank after
 * each step: there is nothing to gather but, with the sharded update, the moments.
 */
#include <stdlib.h>
#include <string.h>

#include "nn/layout.h"

typedef struct {
    nn_layout_t base;
    hpml_model_t *m;
    nn_buckets_t *bk; /* every parameter */
} data_t;

static void data_close(nn_layout_t *l, int err)
{
    data_t *d = (data_t *)l;

    (void)err;
    if (d == NULL)
        return;
    hpml__buckets_close(d->bk);
    hpml_free(d->base.x);
    free(d);
}

static int data_open(const nn_layout_args_t *a, nn_layout_t **out)
{
    data_t *d = calloc(1, sizeof(*d));
    int err = HPML_ERR_NOMEM;

    *out = NULL;
    if (d == NULL)
        return err;
    d->base.ops = &hpml__layout_data;
    d->m = a->m;
    if ((err = hpml__buckets_open(a, 0, &d->bk)) != 0)
        goto out;
    if (!(d->base.x = hpml_malloc(a->lb * hpml_model_input_size(a->m) * sizeof(float)))) {
        err = HPML_ERR_NOMEM;
        goto out;
    }
    *out = &d->base;
    d = NULL;
out:
    data_close(d ? &d->base : NULL, err);
    return err;
}

static int data_forward(nn_layout_t *l, const nn_step_t *s)
{
    data_t *d = (data_t *)l;
    const float *z;

    hpml__buckets_begin(d->bk, s->lr);
    if (s->nl == 0)
        return 0;
    return hpml_model_forward(d->m, l->x, s->nl, 1, s->ids, s->key, &z);
}

/* Each bucket starts its allreduce as soon as backward has finished its layers. */
static int data_backward(nn_layout_t *l, const nn_step_t *s, double *loss_sum, size_t *correct)
{
    data_t *d = (data_t *)l;

    if (s->nl == 0) { /* no sample here: this rank adds nothing to the sums */
        memset(d->m->grads, 0, d->m->nparams * sizeof(float));
        /* The buckets still start as a backward would start them (its last report is the
         * first layer's, offset 0): the other ranks' allreduces run in the background,
         * and one started here in this thread instead would never meet them. */
        hpml__buckets_ready(d->bk, 0);
        return 0;
    }
    return hpml_model_backward(d->m, s->y, 1.0f / (float)s->gb, hpml__buckets_ready, d->bk,
                               loss_sum, correct);
}

static int data_update(nn_layout_t *l, const nn_step_t *s)
{
    return hpml__buckets_sync(((data_t *)l)->bk, s->lr, &l->exposed);
}

static int data_gather(nn_layout_t *l, int moments)
{
    return moments ? hpml__buckets_gather_moments(((data_t *)l)->bk) : 0;
}

const nn_layout_ops_t hpml__layout_data = {
    .name = "data",
    .split = 0,
    .open = data_open,
    .forward = data_forward,
    .backward = data_backward,
    .update = data_update,
    .gather = data_gather,
    .close = data_close,
};
