/*
 * Gradient buckets (PyTorch DDP, Horovod's tensor fusion): the gradients of parameters
 * [lo, nparams) grouped into buckets along the layers in reverse order, the order backward
 * produces them, the first one small so communication starts early, later ones ~25 MiB.
 * A bucket's allreduce starts as soon as backward has finished its layers and overlaps the
 * backward of the layers below. Summing gradients of sum-of-losses / global batch gives
 * exactly the global mean, also when the batch does not divide by the rank count.
 *
 * Sharded update (f32 gradients, more than one rank; ZeRO-1 style): a bucket's allreduce
 * is hpml_iallreduce_apply from the gradients into the parameters with the optimizer update
 * as its function, so each parameter is updated by the rank that reduces its gradient (in
 * the progress thread, while backward continues) and every rank receives the new
 * parameters: the same elementwise update as the replicated one, with 1/N of the work per
 * rank of a node. A rank's moments are current only for the parameters it updates; before
 * a checkpoint they are gathered in the same form (an apply whose function returns the
 * moments). docs/decisions/sharded-update.md, docs/decisions/gradient-overlap.md.
 */
#include <stdlib.h>
#include <string.h>

#include "nn/layout.h"

/* The apply function's argument for one bucket: where its parameters start. */
typedef struct {
    nn_buckets_t *b;
    size_t beg;
    float *state; /* gathering: the moment buffer being gathered */
} slice_t;

struct nn_buckets {
    hpml_comm_t *comm;
    int P;
    float *grads, *params;
    hpml_optim_t *o;
    int sharded; /* the buckets' allreduce updates the parameters (sharded update) */
    double lr;   /* this step's learning rate */
    slice_t *slice;
    size_t nparams;
    size_t lo;         /* the buckets hold parameters [lo, nparams) */
    int nb;            /* buckets, in the order backward completes them */
    size_t *beg, *end; /* parameter ranges */
    hpml_request_t **req;
    int next; /* next bucket to start */
    hpml_dtype_t dt;
    uint16_t *wire; /* f16/bf16 copy of the gradients */
    int overlap;
    int err;
};

static void add_bucket(nn_buckets_t *b, size_t beg, size_t end)
{
    b->beg[b->nb] = beg;
    b->end[b->nb++] = end;
}

/* Walk the layers from the last (the order backward finishes them). A bucket closes at a
 * layer boundary when it has reached its capacity, or before a layer that would take it
 * over capacity: then the last layers' gradients travel while the big first layer's weight
 * gradient is still being computed (DDP: 1 MiB first bucket). lo may be a layer's bias
 * after its weights (two layers split). */
static void plan(nn_buckets_t *b, const hpml_model_t *m, const hpml_train_config_t *c)
{
    size_t cap = c->first_bucket_bytes ? c->first_bucket_bytes : c->bucket_bytes;
    size_t cur_end = m->nparams, cur_beg = m->nparams, cur_bytes = 0;

    for (int i = m->nlayers - 1; i >= 0; i--) {
        const nn_layer_t *l = &m->layers[i];
        size_t beg = l->w_off > b->lo ? l->w_off : b->lo, end = l->w_off + l->nw + l->nb;
        size_t bytes = end > beg ? (end - beg) * sizeof(float) : 0;
        if (bytes == 0)
            continue;
        if (cur_bytes > 0 && cur_bytes + bytes > cap) {
            add_bucket(b, cur_beg, cur_end);
            cur_end = cur_beg;
            cur_bytes = 0;
            cap = c->bucket_bytes;
        }
        cur_beg = beg;
        cur_bytes += bytes;
        if (cur_bytes >= cap) {
            add_bucket(b, cur_beg, cur_end);
            cur_end = cur_beg;
            cur_bytes = 0;
            cap = c->bucket_bytes;
        }
    }
    if (cur_bytes > 0)
        add_bucket(b, cur_beg, cur_end);
}

int hpml__buckets_open(const nn_layout_args_t *a, size_t lo, nn_buckets_t **out)
{
    const hpml_model_t *m = a->m;
    const size_t nl1 = (size_t)m->nlayers + 1;
    nn_buckets_t *b = calloc(1, sizeof(*b));
    int err = HPML_ERR_NOMEM;

    *out = NULL;
    if (b == NULL)
        goto out;
    b->comm = a->comm;
    b->P = hpml_comm_size(a->comm);
    b->grads = m->grads;
    b->params = m->params;
    b->o = a->o;
    b->sharded = hpml_train_update_is_sharded(a->cfg, b->P);
    b->nparams = m->nparams;
    b->lo = lo;
    b->dt = a->cfg->grad_dtype;
    b->overlap = a->cfg->overlap;
    b->beg = calloc(nl1, sizeof(size_t));
    b->end = calloc(nl1, sizeof(size_t));
    b->req = calloc(nl1, sizeof(*b->req));
    b->slice = calloc(nl1, sizeof(*b->slice));
    if (!b->beg || !b->end || !b->req || !b->slice)
        goto out;
    if (b->dt != HPML_F32 && !(b->wire = hpml_malloc(m->nparams * sizeof(uint16_t) + 2)))
        goto out;
    plan(b, m, a->cfg);
    for (int i = 0; i < b->nb; i++)
        b->slice[i] = (slice_t){.b = b, .beg = b->beg[i]};
    if (hpml_comm_rank(a->comm) == 0)
        for (int i = 0; i < b->nb; i++)
            HPML_LOG(HPML_LOG_INFO, "nn: gradient bucket %d: params [%zu, %zu), %.2f MiB", i,
                     b->beg[i], b->end[i], (double)(b->end[i] - b->beg[i]) * 4.0 / 1048576.0);
    *out = b;
    b = NULL;
    err = 0;
out:
    hpml__buckets_close(b);
    return err;
}

void hpml__buckets_close(nn_buckets_t *b)
{
    if (b == NULL)
        return;
    free(b->beg);
    free(b->end);
    free(b->req);
    free(b->slice);
    hpml_free(b->wire);
    free(b);
}

/* Sharded update: the optimizer step for the parameters whose summed gradients `in` this
 * rank has reduced (offset is within the bucket). */
static int update_fn(void *ctx, size_t offset, const void *in, void *out, size_t count)
{
    slice_t *sl = ctx;
    size_t at = sl->beg + offset;

    hpml_optim_update(sl->b->o, at, count, sl->b->params + at, in, out, sl->b->lr);
    return 0;
}

/* Gathering: the current moments of the parameters this rank updates. */
static int gather_fn(void *ctx, size_t offset, const void *in, void *out, size_t count)
{
    slice_t *sl = ctx;
    const float *src = sl->state + sl->beg + offset;

    (void)in;
    if (out != src)
        memcpy(out, src, count * sizeof(float));
    return 0;
}

/* Sharded update: the apply of bucket i from `send` into `recv`, nonblocking (*req set)
 * or, without overlap or when the caller waits for it at once (now), blocking (*req
 * NULL). The updates and the gathering both go through here, so they use the same form
 * and so the same partition. */
static int apply(nn_buckets_t *b, int i, const float *send, float *recv, hpml_apply_fn fn,
                 void *ctx, int now, hpml_request_t **req)
{
    size_t n = b->end[i] - b->beg[i];

    *req = NULL;
    if (b->overlap && !now)
        return hpml_iallreduce_apply(send + b->beg[i], recv + b->beg[i], n, HPML_F32, HPML_SUM, fn,
                                     ctx, b->comm, req);
    return hpml_allreduce_apply(send + b->beg[i], recv + b->beg[i], n, HPML_F32, HPML_SUM, fn, ctx,
                                b->comm);
}

int hpml__buckets_gather_moments(nn_buckets_t *b)
{
    int err = 0;

    if (b == NULL || !b->sharded)
        return 0;
    /* The gradients are free between steps and serve as the zero input. */
    for (int k = 0; k < hpml_optim_nstate(b->o) && err == 0; k++) {
        float *st = hpml_optim_state(b->o, k);

        memset(b->grads, 0, b->nparams * sizeof(float));
        for (int i = 0; i < b->nb && err == 0; i++) {
            slice_t sl = {.b = b, .beg = b->beg[i], .state = st};
            hpml_request_t *req;

            err = apply(b, i, b->grads, st, gather_fn, &sl, 1, &req);
            if (err == 0 && req != NULL)
                err = hpml_wait(req);
        }
    }
    return err;
}

/* Start bucket i's allreduce: in the background while backward goes on, or, when the
 * caller waits for it at once (now: hpml__buckets_sync, once the buckets before it are
 * done), in this thread: handing a bucket to the progress thread only to wait for it costs
 * two thread switches on the rank's core (docs/decisions/hybrid-layout.md). */
static void start(nn_buckets_t *b, int i, int now)
{
    size_t n = b->end[i] - b->beg[i];
    void *buf = b->grads + b->beg[i];
    int rc;

    if (b->dt == HPML_F16) {
        hpml_f32_to_f16_array(b->wire + b->beg[i], b->grads + b->beg[i], n);
        buf = b->wire + b->beg[i];
    } else if (b->dt == HPML_BF16) {
        hpml_f32_to_bf16_array(b->wire + b->beg[i], b->grads + b->beg[i], n);
        buf = b->wire + b->beg[i];
    }
    if (b->sharded)
        rc = apply(b, i, b->grads, b->params, update_fn, &b->slice[i], now, &b->req[i]);
    else if (b->overlap && !now)
        rc = hpml_iallreduce(HPML_IN_PLACE, buf, n, b->dt, HPML_SUM, b->comm, &b->req[i]);
    else
        rc = hpml_allreduce(HPML_IN_PLACE, buf, n, b->dt, HPML_SUM, b->comm);
    if (rc && !b->err)
        b->err = rc;
}

/* A 16-bit bucket back to f32 once its allreduce is done. */
static void finish(nn_buckets_t *b, int i)
{
    size_t n = b->end[i] - b->beg[i];

    if (b->dt == HPML_F16)
        hpml_f16_to_f32_array(b->grads + b->beg[i], b->wire + b->beg[i], n);
    else if (b->dt == HPML_BF16)
        hpml_bf16_to_f32_array(b->grads + b->beg[i], b->wire + b->beg[i], n);
}

void hpml__buckets_begin(nn_buckets_t *b, double lr)
{
    b->lr = lr;
}

void hpml__buckets_ready(void *ctx, size_t offset)
{
    nn_buckets_t *b = ctx;

    if (b->P == 1 || !b->overlap)
        return;
    while (b->next < b->nb && b->beg[b->next] >= offset)
        start(b, b->next++, 0);
}

int hpml__buckets_sync(nn_buckets_t *b, double lr, double *exposed)
{
    double t0 = hpml_time();
    int err;

    if (b->P == 1) { /* nothing to sum */
        b->next = 0;
        hpml_optim_update(b->o, b->lo, b->nparams - b->lo, b->params + b->lo, b->grads + b->lo,
                          b->params + b->lo, lr);
        return 0;
    }
    /* The buckets backward started, then the rest in this thread (start). */
    for (int i = 0; i < b->nb; i++) {
        if (i >= b->next) {
            start(b, i, 1);
            b->next = i + 1;
        }
        if (b->req[i]) {
            int rc = hpml_wait(b->req[i]);
            b->req[i] = NULL;
            if (rc && !b->err)
                b->err = rc;
        }
        finish(b, i);
    }
    b->next = 0;
    *exposed += hpml_time() - t0;
    err = b->err;
    b->err = 0;
    if (err == 0 && !b->sharded)
        hpml_optim_update(b->o, b->lo, b->nparams - b->lo, b->params + b->lo, b->grads + b->lo,
                          b->params + b->lo, lr);
    return err;
}
