/*
 * The hybrid layout with two layers split, as Megatron-LM splits a transformer's MLP
 * pair: layer 0 by outputs (split.c) and layer 1, dense too, by inputs, rank p holding
 * columns [own[p], own[p+1]) of its weights, the ones that take exactly its outputs of
 * layer 0. Each rank computes its part of layer 1's pre-activations for every sample; the
 * sample's rank adds the parts up in rank order (the same order every step, so runs repeat
 * bit for bit), and the layers above run data-parallel on its samples. In backward every
 * rank needs the gradients of those pre-activations for every sample (an all-gather).
 * Only layer 1's bias and the layers above are left to sum: by the gradient buckets, or,
 * through shared memory with f32 gradients and a small tail, by the exchange itself.
 * The exchanges go through messages or the node's shared memory (exchange_msg.c,
 * exchange_shm.c; docs/decisions/hybrid-layout.md).
 */
#include <stdlib.h>
#include <string.h>

#include "nn/layout.h"

/* The shared-memory allreduce reduces and applies up to 16 KiB on every rank in one step
 * (HPML_SHM_SMALL's default): a tail up to this size is summed and applied by every rank
 * there too, so carrying it in the exchange leaves the same parameters and optimizer
 * state as the buckets would. */
#define TAIL_BYTES ((size_t)16 << 10)

typedef struct {
    nn_split_t sp;
    size_t out1;      /* layer 1's outputs */
    size_t lo;        /* the parameters above the split: layer 1's bias and up */
    float *wc;        /* (out1, in1): layer 1's weights, blocked by owner, for gathering */
    nn_exchange_t *x; /* the transport of the exchanges */
} split2_t;

static void split2_close(nn_layout_t *l, int err)
{
    split2_t *s = (split2_t *)l;

    if (s == NULL)
        return;
    if (s->x)
        s->x->ops->close(s->x, err);
    hpml__split_close(&s->sp);
    hpml_free(s->wc);
    free(s);
}

/* Shared memory where every rank is on one node (and gets its buffers), else messages.
 * Collective. */
static int exchange_open(split2_t *s, const nn_layout_args_t *a)
{
    const size_t tail = (a->m->nparams - s->lo) * sizeof(float);
    const int f32 = a->cfg->grad_dtype == HPML_F32;
    int err;

    if ((err = hpml__exchange_shm_open(&s->sp, s->out1, a->gb, f32 && tail <= TAIL_BYTES ? tail : 0,
                                       &s->x)) != 0)
        return err;
    if (s->x == NULL && (err = hpml__exchange_msg_open(&s->sp, s->out1, a->gb, a->lb, &s->x)) != 0)
        return err;
    HPML_LOG(HPML_LOG_INFO, "nn: two layers split, exchanges %s", s->x->desc);
    return 0;
}

static int split2_open(const nn_layout_args_t *a, nn_layout_t **out)
{
    const hpml_model_t *m = a->m;
    split2_t *s = calloc(1, sizeof(*s));
    int err = HPML_ERR_NOMEM;

    *out = NULL;
    if (s == NULL)
        return err;
    s->sp.base.ops = &hpml__layout_split2;
    s->out1 = m->layers[1].out_size;
    s->lo = m->layers[1].b_off;
    if ((err = hpml__buckets_open(a, s->lo, &s->sp.bk)) != 0 ||
        (err = hpml__split_open(&s->sp, a)) != 0 || (err = exchange_open(s, a)) != 0)
        goto out;
    if (!(s->wc = hpml_malloc(m->layers[1].nw * sizeof(float) + 1))) {
        err = HPML_ERR_NOMEM;
        goto out;
    }
    *out = &s->sp.base;
    s = NULL;
out:
    split2_close(s ? &s->sp.base : NULL, err);
    return err;
}

/* Layer 0's outputs and my part of layer 1's pre-activations for every sample; each
 * sample's rank sums the parts, then the layers above on its samples. */
static int split2_forward(nn_layout_t *l, const nn_step_t *st)
{
    split2_t *s = (split2_t *)l;
    nn_split_t *sp = &s->sp;
    nn_exchange_t *x = s->x;
    const size_t o0 = sp->own[sp->me], o1 = sp->own[sp->me + 1], k = s->out1;
    const float *z;
    float *sum;
    double t0;
    int err;

    hpml__buckets_begin(sp->bk, st->lr);
    hpml__split_rows(sp, st->gb);
    hpml__nn_dense_rows_forward(sp->m, 0, sp->x, st->gb, o0, o1, sp->y);
    hpml__nn_dense_cols_forward(sp->m, 1, sp->y, st->gb, o0, o1, x->parts);
    t0 = hpml_time();
    if ((err = hpml__split_waited(sp, t0, x->ops->send_parts(x))) != 0 || sp->nl == 0)
        return err;
    sum = hpml__nn_dense_sums(sp->m, 1);
    for (int p = 0; p < sp->P; p++) { /* rank order, so every run sums alike */
        const float *part = x->ops->part(x, p);
        if (p == 0)
            memcpy(sum, part, sp->nl * k * sizeof(float));
        else
            for (size_t j = 0; j < sp->nl * k; j++)
                sum[j] += part[j];
    }
    hpml__nn_dense_finish_forward(sp->m, 1, sp->nl);
    return hpml__nn_forward_from(sp->m, 2, sum, sp->nl, 1, st->ids, st->key, &z);
}

/* The layers above on my samples, the gradients of layer 1's pre-activations of my samples
 * into the shared matrix (and the tail's gradients where the transport carries them),
 * every rank's rows of it to every rank; then my columns of layer 1 and rows of layer 0. */
static int split2_backward(nn_layout_t *l, const nn_step_t *st, double *loss_sum, size_t *correct)
{
    split2_t *s = (split2_t *)l;
    nn_split_t *sp = &s->sp;
    nn_exchange_t *x = s->x;
    hpml_model_t *m = sp->m;
    const size_t o0 = sp->own[sp->me], o1 = sp->own[sp->me + 1];
    const float *da;
    double t0;
    int err;

    if (sp->nl > 0) {
        if ((err = hpml__nn_backward_to(m, 2, st->y, 1.0f / (float)st->gb, NULL, NULL, loss_sum,
                                        correct, &da)) != 0)
            return err;
        hpml__nn_dense_act_backward(m, 1, da, sp->nl, x->rows + sp->rows[sp->me] * s->out1);
    } else {
        memset(m->grads + s->lo, 0, (m->nparams - s->lo) * sizeof(float));
    }
    if (x->tail)
        memcpy(x->tail, m->grads + s->lo, (m->nparams - s->lo) * sizeof(float));
    t0 = hpml_time();
    if ((err = hpml__split_waited(sp, t0, x->ops->share_rows(x))) != 0)
        return err;
    hpml__nn_dense_cols_backward(m, 1, sp->y, st->gb, o0, o1, x->rows, sp->g);
    hpml__nn_dense_rows_backward(m, 0, sp->x, st->gb, o0, o1, sp->y, sp->g);
    return 0;
}

/* My rows of layer 0, my columns of layer 1, and the parameters above: summed by the
 * transport (every rank applies them), or by the buckets. */
static int split2_update(nn_layout_t *l, const nn_step_t *st)
{
    split2_t *s = (split2_t *)l;
    nn_split_t *sp = &s->sp;
    hpml_model_t *m = sp->m;
    const size_t o0 = sp->own[sp->me], no = sp->own[sp->me + 1] - o0, n = m->nparams - s->lo;

    hpml__split_update_rows(sp, st->lr);
    for (size_t r = 0; r < s->out1; r++) {
        size_t at = m->layers[1].w_off + r * sp->out + o0;
        hpml_optim_update(sp->o, at, no, m->params + at, m->grads + at, m->params + at, st->lr);
    }
    if (s->x->tail == NULL)
        return hpml__buckets_sync(sp->bk, st->lr, &l->exposed);
    s->x->ops->sum_tail(s->x, m->grads + s->lo, n);
    hpml_optim_update(sp->o, s->lo, n, m->params + s->lo, m->grads + s->lo, m->params + s->lo,
                      st->lr);
    return 0;
}

/* Layer 1's weights in v: every rank's columns to every rank, through wc where rank p's
 * columns are the (out1, n_p) block at own[p] * out1. Collective. */
static int gather_columns(split2_t *s, float *v)
{
    nn_split_t *sp = &s->sp;
    float *w = v + sp->m->layers[1].w_off;
    const size_t in1 = sp->out, out1 = s->out1;
    const size_t m0 = sp->own[sp->me], mc = sp->own[sp->me + 1] - m0; /* my columns */
    int err;

    for (size_t r = 0; r < out1; r++)
        memcpy(s->wc + m0 * out1 + r * mc, w + r * in1 + m0, mc * sizeof(float));
    if ((err = hpml__split_share(sp, s->wc, sp->own, out1)) != 0)
        return err;
    for (int p = 0; p < sp->P; p++) {
        const size_t c0 = sp->own[p], nc = sp->own[p + 1] - c0;
        for (size_t r = 0; p != sp->me && r < out1; r++)
            memcpy(w + r * in1 + c0, s->wc + c0 * out1 + r * nc, nc * sizeof(float));
    }
    return 0;
}

/* Every rank's rows of layer 0 and columns of layer 1; with moments, the same of every
 * optimizer moment, and those of the buckets (a tail summed by the transport has its
 * moments current on every rank). */
static int split2_gather(nn_layout_t *l, int moments)
{
    split2_t *s = (split2_t *)l;
    nn_split_t *sp = &s->sp;
    int err = moments && s->x->tail == NULL ? hpml__buckets_gather_moments(sp->bk) : 0;

    for (int k = -1; k < (moments ? hpml_optim_nstate(sp->o) : 0) && err == 0; k++) {
        float *v = k < 0 ? sp->m->params : hpml_optim_state(sp->o, k);

        if ((err = hpml__split_gather_rows(sp, v)) == 0)
            err = gather_columns(s, v);
    }
    return err;
}

const nn_layout_ops_t hpml__layout_split2 = {
    .name = "hybrid (2 layers split)",
    .split = 2,
    .open = split2_open,
    .forward = split2_forward,
    .backward = split2_backward,
    .update = split2_update,
    .gather = split2_gather,
    .close = split2_close,
};
