/*
 * Data-parallel training (Horovod / PyTorch DDP style) over an hpml communicator.
 *
 * Every rank holds the model; rank 0's initial parameters are broadcast. Each epoch the
 * sample order is a permutation that depends only on (seed, epoch), so the global
 * batches are the same at any rank count; rank r takes its block of each global batch
 * (hpml_io_partition), computes gradients scaled by 1/global batch, and the gradient
 * buckets are summed with hpml_iallreduce as soon as backward has finished their layers.
 * Buckets follow the layers in reverse (the order backward produces them), the first one
 * small so communication starts early, later ones ~25 MiB; the allreduce of a bucket
 * overlaps the backward of the layers below it. Summing gradients of sum-of-losses/B
 * gives exactly the global mean even when B does not divide by the rank count.
 *
 * Sharded update (f32 gradients, more than one rank; ZeRO-1 style): a bucket's allreduce
 * is hpml_iallreduce_apply from the gradients into the parameters, and the optimizer
 * update is its function, so each parameter is updated by the rank that reduces its
 * gradient (in the progress thread, while backward continues) and every rank receives
 * the new parameters. The optimizer work per rank shrinks with the node's rank count,
 * and the result is the same elementwise update as the replicated one (the same bits on
 * one node). Each rank's optimizer moments are current only for the parameters it
 * updates; checkpoints gather them in the same form (an apply whose function returns
 * the moments).
 *
 * Checkpoints hold everything that determines the rest of the run (parameters,
 * optimizer moments and step, RNG state, epoch, step in epoch, running epoch sums), so a
 * resumed run is bit-identical to an uninterrupted one at the same rank count.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "hpml/io.h"
#include "nn/nn_internal.h"

void hpml_train_config_default(hpml_train_config_t *c)
{
    memset(c, 0, sizeof(*c));
    hpml_opt_config_default(&c->opt);
    c->epochs = 5;
    c->batch = 128;
    c->seed = 1;
    c->grad_dtype = HPML_F32;
    c->bucket_bytes = 25u << 20;
    c->first_bucket_bytes = 1u << 20;
    c->overlap = 1;
    c->sharded_update = 1;
    c->eval_batch = 1000;
    c->mean = 0.0f;
    c->std = 1.0f;
}

int hpml_train_update_is_sharded(const hpml_train_config_t *c, int nranks)
{
    return c->sharded_update && c->grad_dtype == HPML_F32 && nranks > 1;
}

/* ---- gradient buckets --------------------------------------------------------------- */

typedef struct dp dp_t;

/* The apply function's argument for bucket b: where its parameters start. */
typedef struct {
    dp_t *d;
    size_t beg;
    float *state; /* gathering: the moment buffer being gathered */
} dp_slice_t;

struct dp {
    hpml_comm_t *comm;
    int P;
    float *grads;
    float *params;
    hpml_optim_t *o;
    int sharded; /* the buckets' allreduce updates the parameters (sharded update) */
    double lr;   /* sharded: this step's learning rate */
    dp_slice_t *slice;
    size_t nparams;
    size_t lo;         /* the buckets hold parameters [lo, nparams) (hybrid: above the split) */
    int nb;            /* buckets, in the order backward completes them */
    size_t *beg, *end; /* parameter ranges */
    hpml_request_t **req;
    int next; /* next bucket to start */
    hpml_dtype_t dt;
    uint16_t *wire; /* f16/bf16 copy of the gradients */
    int overlap;
    int err;
    int applied;    /* this step's gradients above the split are summed and applied
                     * already (two layers split through shared memory: pair_tail) */
    double exposed; /* seconds waiting after backward (hybrid: and in the exchanges) */
};

/* Buckets of the gradients of parameters lo.. (dp_lo: 0, or above the hybrid layout's
 * split, where lo may be a layer's bias after its weights). */
static int dp_init(dp_t *d, hpml_comm_t *comm, hpml_model_t *m, hpml_optim_t *o,
                   const hpml_train_config_t *c, size_t lo)
{
    size_t cap, cur_end, cur_beg, cur_bytes = 0;

    memset(d, 0, sizeof(*d));
    d->comm = comm;
    d->P = hpml_comm_size(comm);
    d->grads = m->grads;
    d->params = m->params;
    d->o = o;
    d->sharded = hpml_train_update_is_sharded(c, d->P);
    d->nparams = m->nparams;
    d->lo = lo;
    d->dt = c->grad_dtype;
    d->overlap = c->overlap;
    d->beg = calloc((size_t)m->nlayers + 1, sizeof(size_t));
    d->end = calloc((size_t)m->nlayers + 1, sizeof(size_t));
    d->req = calloc((size_t)m->nlayers + 1, sizeof(*d->req));
    d->slice = calloc((size_t)m->nlayers + 1, sizeof(*d->slice));
    if (!d->beg || !d->end || !d->req || !d->slice)
        return HPML_ERR_NOMEM;
    if (d->dt != HPML_F32 && !(d->wire = hpml_malloc(m->nparams * sizeof(uint16_t) + 2)))
        return HPML_ERR_NOMEM;
    /* Walk the layers from the last (the order backward finishes them). A bucket closes
     * at a layer boundary when it has reached its capacity, or before a layer that would
     * take it over capacity: then the last layers' gradients travel while the big first
     * layer's weight gradient is still being computed (DDP: 1 MiB first bucket). */
    cap = c->first_bucket_bytes ? c->first_bucket_bytes : c->bucket_bytes;
    cur_end = cur_beg = m->nparams;
    for (int i = m->nlayers - 1; i >= 0; i--) {
        nn_layer_t *l = &m->layers[i];
        size_t beg = l->w_off > lo ? l->w_off : lo, end = l->w_off + l->nw + l->nb;
        size_t bytes = end > beg ? (end - beg) * sizeof(float) : 0;
        if (bytes == 0)
            continue;
        if (cur_bytes > 0 && cur_bytes + bytes > cap) {
            d->beg[d->nb] = cur_beg;
            d->end[d->nb++] = cur_end;
            cur_end = cur_beg;
            cur_bytes = 0;
            cap = c->bucket_bytes;
        }
        cur_beg = beg;
        cur_bytes += bytes;
        if (cur_bytes >= cap) {
            d->beg[d->nb] = cur_beg;
            d->end[d->nb++] = cur_end;
            cur_end = cur_beg;
            cur_bytes = 0;
            cap = c->bucket_bytes;
        }
    }
    if (cur_bytes > 0) {
        d->beg[d->nb] = cur_beg;
        d->end[d->nb++] = cur_end;
    }
    for (int b = 0; b < d->nb; b++)
        d->slice[b] = (dp_slice_t){.d = d, .beg = d->beg[b]};
    if (hpml_comm_rank(comm) == 0)
        for (int b = 0; b < d->nb; b++)
            HPML_LOG(HPML_LOG_INFO, "nn: gradient bucket %d: params [%zu, %zu), %.2f MiB", b,
                     d->beg[b], d->end[b], (double)(d->end[b] - d->beg[b]) * 4.0 / 1048576.0);
    return 0;
}

static void dp_free(dp_t *d)
{
    free(d->beg);
    free(d->end);
    free(d->req);
    free(d->slice);
    hpml_free(d->wire);
}

/* Sharded update: the optimizer step for the parameters whose summed gradients `in` this
 * rank has reduced (offset is within the bucket). */
static int dp_update(void *ctx, size_t offset, const void *in, void *out, size_t count)
{
    dp_slice_t *sl = ctx;
    size_t at = sl->beg + offset;

    hpml_optim_update(sl->d->o, at, count, sl->d->params + at, in, out, sl->d->lr);
    return 0;
}

/* Gathering: the current moments of the parameters this rank updates. */
static int dp_gather_fn(void *ctx, size_t offset, const void *in, void *out, size_t count)
{
    dp_slice_t *sl = ctx;
    const float *src = sl->state + sl->beg + offset;

    (void)in;
    if (out != src)
        memcpy(out, src, count * sizeof(float));
    return 0;
}

/* Sharded update: the apply of bucket b from `send` into `recv`, nonblocking (*req set)
 * or, without overlap or when the caller waits for it at once (now), blocking (*req
 * NULL). The updates and the gathering both go through here, so they use the same form
 * and so the same partition. */
static int dp_apply(dp_t *d, int b, const float *send, float *recv, hpml_apply_fn fn, void *ctx,
                    int now, hpml_request_t **req)
{
    size_t n = d->end[b] - d->beg[b];

    *req = NULL;
    if (d->overlap && !now)
        return hpml_iallreduce_apply(send + d->beg[b], recv + d->beg[b], n, HPML_F32, HPML_SUM, fn,
                                     ctx, d->comm, req);
    return hpml_allreduce_apply(send + d->beg[b], recv + d->beg[b], n, HPML_F32, HPML_SUM, fn, ctx,
                                d->comm);
}

/* Sharded update: every rank gets every moment (collective; the gradients are free
 * between steps and serve as the zero input). */
static int dp_gather_state(dp_t *d)
{
    int err = 0;

    if (!d->sharded)
        return 0;
    for (int i = 0; i < hpml_optim_nstate(d->o) && err == 0; i++) {
        float *st = hpml_optim_state(d->o, i);

        memset(d->grads, 0, d->nparams * sizeof(float));
        for (int b = 0; b < d->nb && err == 0; b++) {
            dp_slice_t sl = {.d = d, .beg = d->beg[b], .state = st};
            hpml_request_t *req;

            err = dp_apply(d, b, d->grads, st, dp_gather_fn, &sl, 1, &req);
            if (err == 0 && req != NULL)
                err = hpml_wait(req);
        }
    }
    return err;
}

/* Start bucket b's allreduce: in the background while backward goes on, or, when the
 * caller waits for it at once (now: dp_sync, once the buckets before it are done), in
 * this thread: handing a bucket to the progress thread only to wait for it costs two
 * thread switches on the rank's core (docs/decisions/hybrid-layout.md). */
static void dp_start(dp_t *d, int b, int now)
{
    size_t n = d->end[b] - d->beg[b];
    void *buf = d->grads + d->beg[b];
    int rc;

    if (d->dt == HPML_F16) {
        hpml_f32_to_f16_array(d->wire + d->beg[b], d->grads + d->beg[b], n);
        buf = d->wire + d->beg[b];
    } else if (d->dt == HPML_BF16) {
        hpml_f32_to_bf16_array(d->wire + d->beg[b], d->grads + d->beg[b], n);
        buf = d->wire + d->beg[b];
    }
    if (d->sharded)
        rc = dp_apply(d, b, d->grads, d->params, dp_update, &d->slice[b], now, &d->req[b]);
    else if (d->overlap && !now)
        rc = hpml_iallreduce(HPML_IN_PLACE, buf, n, d->dt, HPML_SUM, d->comm, &d->req[b]);
    else
        rc = hpml_allreduce(HPML_IN_PLACE, buf, n, d->dt, HPML_SUM, d->comm);
    if (rc && !d->err)
        d->err = rc;
}

static void dp_finish_bucket(dp_t *d, int b)
{
    size_t n = d->end[b] - d->beg[b];

    if (d->dt == HPML_F16)
        hpml_f16_to_f32_array(d->grads + d->beg[b], d->wire + d->beg[b], n);
    else if (d->dt == HPML_BF16)
        hpml_bf16_to_f32_array(d->grads + d->beg[b], d->wire + d->beg[b], n);
}

/* Backward callback: parameters [offset, nparams) are final. */
static void dp_ready(void *ctx, size_t offset)
{
    dp_t *d = ctx;

    if (d->P == 1 || !d->overlap)
        return;
    while (d->next < d->nb && d->beg[d->next] >= offset)
        dp_start(d, d->next++, 0);
}

/* Before forward: a new optimizer step at learning rate lr (its updates come from the
 * buckets' allreduces when sharded, from dp_sync otherwise, and in the hybrid layout
 * from split_step for layer 0). */
static void dp_begin(dp_t *d, double lr)
{
    hpml_optim_begin(d->o);
    d->lr = lr;
}

/* After backward: start what is left, wait for everything; then the optimizer step
 * (done already by the allreduces when sharded). */
static int dp_sync(dp_t *d, double lr)
{
    double t0 = hpml_time();
    int err;

    if (d->P == 1) {
        d->next = 0;
        hpml_optim_update(d->o, 0, d->nparams, d->params, d->grads, d->params, lr);
        return 0;
    }
    if (d->applied) {
        d->applied = 0;
        return 0;
    }
    /* The buckets backward started, then the rest in this thread (dp_start). */
    for (int b = 0; b < d->nb; b++) {
        if (b >= d->next) {
            dp_start(d, b, 1);
            d->next = b + 1;
        }
        if (d->req[b]) {
            int rc = hpml_wait(d->req[b]);
            d->req[b] = NULL;
            if (rc && !d->err)
                d->err = rc;
        }
        dp_finish_bucket(d, b);
    }
    d->next = 0;
    d->exposed += hpml_time() - t0;
    err = d->err;
    d->err = 0;
    if (err == 0 && !d->sharded)
        hpml_optim_update(d->o, d->lo, d->nparams - d->lo, d->params + d->lo, d->grads + d->lo,
                          d->params + d->lo, lr);
    return err;
}

/* ---- hybrid layout: the first dense layer split by outputs ---------------------------- */

/*
 * Data parallel where the weights are few, model parallel where they are many
 * (Krizhevsky, "One weird trick for parallelizing convolutional neural networks", 2014).
 * Rank p owns outputs [o[p], o[p+1]) of layer 0, a dense layer, and computes them for the
 * whole global batch, whose inputs every rank holds. One all-to-all gives each rank all
 * the outputs of its own samples, and the layers above run data-parallel as usual. In
 * backward a second all-to-all returns to each owner the gradients of its outputs for
 * the whole batch; it computes its rows of the weight gradient as one rank would for
 * the global batch and updates them. Per step a rank sends about 2 gb out (P-1) / P^2
 * floats instead of allreducing the layer's in x out gradients (2 in out (P-1) / P):
 * less while the samples per rank (gb / P) are fewer than the inputs, which AUTO
 * requires. The rows a rank does not own, and their optimizer moments, go stale in its
 * copy; split_gather brings them up to date when the whole model is needed (evaluation,
 * checkpoints, the end of training).
 */
typedef struct {
    int on;
    hpml_comm_t *comm;
    int P, me;
    size_t in, out;            /* layer 0: inputs and outputs per sample */
    size_t *o;                 /* P + 1: rank p owns outputs [o[p], o[p+1]) */
    size_t *rows;              /* P + 1: rank p has samples [rows[p], rows[p+1]) of a batch */
    size_t *sc, *sd, *rc, *rd; /* all-to-all counts and displacements */
    float *x;                  /* (gb, in): the inputs of the whole global batch */
    float *y;                  /* (gb, no): this rank's outputs for them (after the ReLU) */
    float *g;                  /* (gb, no): their gradients */
    float *a;                  /* (lb, out): all outputs of this rank's samples */
    float *t;                  /* (lb, out): blocks in transit */
    /* Fused (f32, sharded update): the layers above 0 without an allreduce. Rank p owns
     * their parameters [gs[p], gs[p+1]); after the second all-to-all the ranks'
     * gradients of each slice go to its owner (a reduce-scatter as one more all-to-all),
     * who sums them in rank order and updates the slice; the new slices go to every rank
     * right after the next step's first all-to-all (or before anything else reads the
     * whole model). Both exchanges follow an all-to-all, when the ranks are in step, so
     * a step has two points where ranks wait for each other instead of three. */
    int fused, pending; /* pending: this rank's slice is updated, not yet sent */
    size_t lo;          /* the parameters above the split start at lo */
    size_t *gs;         /* P + 1 */
    float *gr;          /* (P, this rank's slice): every rank's gradients of it */
    /* Two layers split (pair): layer 1, dense too, is split by inputs, rank p holding
     * columns [o[p], o[p+1]) of its weights, which take exactly its outputs of layer 0.
     * Each rank computes its part of layer 1's pre-activations for the whole batch; one
     * all-to-all takes each sample's parts to the sample's rank, who sums them; in
     * backward the gradients of those pre-activations for every sample go to every
     * rank (an all-gather). Only layer 1's bias and the layers above are data-parallel. */
    int pair;
    size_t out1; /* layer 1's outputs */
    float *zp;   /* (gb, out1): my part of layer 1's pre-activations */
    float *zr;   /* (P, lb, out1): the other ranks' parts for my samples */
    float *gz;   /* (gb, out1): their gradients, my samples' at rows[me] */
    float *wc;   /* (out1, in1): layer 1's weights, blocked by owner, for gathering */
    /* A pair whose ranks share one node exchanges through registered buffers instead of
     * messages (shm): each rank writes its part of layer 1's pre-activations for every
     * sample to zs, where each sample's rank reads it; every rank writes its samples'
     * rows of their gradients into one matrix for the node, gz0 (local rank 0's gzs),
     * which every rank then reads whole. With f32 gradients and at most PAIR_TAIL_BYTES
     * of parameters above the pair (tail), each rank also puts its gradients of those in
     * us, and every rank sums them in rank order and applies them itself (pair_tail),
     * instead of dp_sync's allreduce. A step then has two node syncs (hpml_comm_node_sync)
     * and no message. The sums are the same bits as through messages. */
    int shm, tail;
    float *zs, *gzs, *gz0, *us;
} split_t;

/* The shared-memory allreduce reduces and applies up to 16 KiB on every rank in one step
 * (HPML_SHM_SMALL's default): a tail up to this size is summed and applied by every rank
 * there too, so pair_tail leaves the same parameters and optimizer state as dp_sync. */
#define PAIR_TAIL_BYTES ((size_t)16 << 10)

int hpml_parallel_parse(const char *name, hpml_parallel_t *out)
{
    static const char *const names[] = {"auto", "data", "hybrid"};

    for (int i = 0; i < 3; i++)
        if (name && strcmp(name, names[i]) == 0) {
            *out = (hpml_parallel_t)i;
            return 0;
        }
    return hpml_set_error(HPML_ERR_INVAL,
                          "parallel layout: expected auto, data or hybrid, got '%s'",
                          name ? name : "(null)");
}

const char *hpml_parallel_name(hpml_parallel_t p)
{
    return p == HPML_PARALLEL_HYBRID ? "hybrid" : p == HPML_PARALLEL_DATA ? "data" : "auto";
}

/* What a rank sends per step with `layers` layers split (lb samples per rank, an even
 * split), in units of 2 (P-1)/P floats: the exchanges of activations (one layer: its
 * outputs for the other ranks' samples, forward and backward) or of partial sums (two
 * layers: layer 1's pre-activations), and the gradients of the parameters above the split
 * (reduce-scattered and all-gathered, or allreduced). */
static double split_cost(const hpml_model_t *m, int P, size_t lb, int layers)
{
    const size_t n = m->nparams;

    if (layers == 1)
        return (double)lb * (double)m->layers[0].out_size +
               (double)(m->nlayers > 1 ? n - m->layers[1].w_off : 0);
    return (double)P * (double)lb * (double)m->layers[1].out_size +
           (double)(n - m->layers[1].b_off);
}

/* How many layers model m has split on P ranks (lb samples per rank): 0 (the data-parallel
 * layout), 1 or 2 (the hybrid layout), or an error when the hybrid layout or a number of
 * split layers was asked for and cannot be used. */
static int use_hybrid(const hpml_train_config_t *c, const hpml_model_t *m, int P, int replicated,
                      size_t lb)
{
    const nn_layer_t *l = &m->layers[0];
    const int forced = c->parallel == HPML_PARALLEL_HYBRID || c->split_layers != 0;
    const int pair_ok = m->nlayers > 1 && m->layers[1].kind == NN_DENSE;

    if (c->split_layers < 0 || c->split_layers > 2)
        return hpml_set_error(HPML_ERR_INVAL,
                              "train: split layers must be 0 (auto), 1 or 2, not %d",
                              c->split_layers);
    if (c->split_layers != 0 && c->parallel == HPML_PARALLEL_DATA)
        return hpml_set_error(HPML_ERR_INVAL,
                              "train: splitting layers is the hybrid layout, not the data-parallel "
                              "one");
    if (P == 1 || c->parallel == HPML_PARALLEL_DATA)
        return 0;
    if (l->kind != NN_DENSE)
        return forced ? hpml_set_error(HPML_ERR_INVAL,
                                       "train: the hybrid layout splits a first 'dense' layer; "
                                       "this model starts with '%s'",
                                       hpml__nn_kind_name(l->kind))
                      : 0;
    if (!replicated)
        return forced ? hpml_set_error(HPML_ERR_INVAL,
                                       "train: the hybrid layout needs the whole training set "
                                       "on every rank (not sharded data)")
                      : 0;
    if (l->out_size < (size_t)P)
        return forced ? hpml_set_error(HPML_ERR_INVAL,
                                       "train: the hybrid layout needs an output of the first "
                                       "layer per rank (it has %zu, for %d ranks)",
                                       l->out_size, P)
                      : 0;
    if (c->split_layers == 2 && !pair_ok)
        return hpml_set_error(
            HPML_ERR_INVAL,
            "train: splitting 2 layers needs a second 'dense' layer; this model's "
            "second layer is '%s'",
            m->nlayers > 1 ? hpml__nn_kind_name(m->layers[1].kind) : "(none)");
    if (!forced && lb > l->in_size)
        return 0;
    if (c->split_layers != 0)
        return c->split_layers;
    return pair_ok && split_cost(m, P, lb, 2) < split_cost(m, P, lb, 1) ? 2 : 1;
}

int hpml_train_layout(const hpml_train_config_t *c, int nranks, int in_c, int in_h, int in_w,
                      int replicated, size_t local_batch, hpml_parallel_t *out, int *split_layers)
{
    hpml_model_t *m = NULL;
    int rc;

    if ((rc = hpml_model_create(c->spec, in_c, in_h, in_w, &m)) != 0)
        return rc;
    rc = use_hybrid(c, m, nranks, replicated, local_batch);
    hpml_model_destroy(m);
    if (rc < 0)
        return rc;
    *out = rc ? HPML_PARALLEL_HYBRID : HPML_PARALLEL_DATA;
    if (split_layers)
        *split_layers = rc;
    return 0;
}

static void split_free(split_t *sp, int err)
{
    free(sp->o);
    free(sp->rows);
    free(sp->sc);
    free(sp->sd);
    free(sp->rc);
    free(sp->rd);
    hpml_free(sp->x);
    hpml_free(sp->y);
    hpml_free(sp->g);
    hpml_free(sp->a);
    hpml_free(sp->t);
    free(sp->gs);
    hpml_free(sp->gr);
    hpml_free(sp->zp);
    hpml_free(sp->zr);
    hpml_free(sp->gz);
    hpml_free(sp->wc);
    /* Freeing a registered buffer is collective: after an error, which may be this rank's
     * alone, the buffers stay until the communicator is destroyed, so that this rank
     * returns and reports instead of waiting for peers still in a step. */
    if (sp->shm && err == 0) {
        hpml_comm_free_shared(sp->comm, sp->zs);
        hpml_comm_free_shared(sp->comm, sp->gzs);
        hpml_comm_free_shared(sp->comm, sp->us);
    }
    memset(sp, 0, sizeof(*sp));
}

/* The first parameter above `layers` (1 or 2) split layers: layer 1's first, or with two
 * layer 1's bias (its weights are split, its bias is not). */
static size_t split_lo(const hpml_model_t *m, int layers)
{
    if (layers == 2)
        return m->layers[1].b_off;
    return m->nlayers > 1 ? m->layers[1].w_off : m->nparams;
}

/* A pair on one node: registered buffers for its exchanges (split_t: shm), when every
 * rank gets them; otherwise it exchanges through messages. f32: the gradients are
 * allreduced as f32 (no compression), which the tail needs. Collective. */
static int pair_shm_init(split_t *sp, const hpml_model_t *m, size_t gb, int f32)
{
    const size_t zb = gb * sp->out1 * sizeof(float), tb = (m->nparams - sp->lo) * sizeof(float);
    int ok, err;

    if (sp->P == 1 || hpml_comm_nodes(sp->comm) != 1)
        return 0;
    sp->tail = f32 && tb <= PAIR_TAIL_BYTES;
    sp->zs = hpml_comm_alloc_shared(sp->comm, zb);
    sp->gzs = hpml_comm_alloc_shared(sp->comm, zb);
    sp->us = sp->tail ? hpml_comm_alloc_shared(sp->comm, tb) : NULL;
    sp->gz0 = sp->gzs ? hpml_comm_shared_peer(sp->comm, sp->gzs, 0) : NULL;
    ok = sp->zs && sp->gz0 && (sp->us || !sp->tail);
    if ((err = hpml_allreduce(HPML_IN_PLACE, &ok, 1, HPML_I32, HPML_MIN, sp->comm)) != 0)
        return err;
    if (!ok) {
        /* Whatever was registered stays until the communicator is destroyed: freeing is
         * collective, and a rank that got no buffer has none to free with the others. */
        HPML_LOG(HPML_LOG_WARN, "nn: no shared-memory buffers for the split layers' "
                                "exchanges; they go through messages");
        sp->zs = sp->gzs = sp->gz0 = sp->us = NULL;
        sp->tail = 0;
        return 0;
    }
    sp->shm = 1;
    return 0;
}

/* Buffers for global batches of up to gb samples, at most lb per rank, with `layers` (1 or
 * 2) layers split; fused: see split_t; f32: gradients travel as f32. Collective. */
static int split_init(split_t *sp, hpml_comm_t *comm, const hpml_model_t *m, size_t gb, size_t lb,
                      int layers, int fused, int f32)
{
    const nn_layer_t *l = &m->layers[0];
    size_t P1, no;
    int err;

    memset(sp, 0, sizeof(*sp));
    sp->on = 1;
    sp->comm = comm;
    sp->P = hpml_comm_size(comm);
    sp->me = hpml_comm_rank(comm);
    sp->in = l->in_size;
    sp->out = l->out_size;
    P1 = (size_t)sp->P + 1;
    sp->o = malloc(P1 * sizeof(size_t));
    sp->rows = malloc(P1 * sizeof(size_t));
    sp->sc = malloc(P1 * sizeof(size_t));
    sp->sd = malloc(P1 * sizeof(size_t));
    sp->rc = malloc(P1 * sizeof(size_t));
    sp->rd = malloc(P1 * sizeof(size_t));
    if (!sp->o || !sp->rows || !sp->sc || !sp->sd || !sp->rc || !sp->rd)
        return HPML_ERR_NOMEM;
    for (int p = 0; p < sp->P; p++)
        hpml_io_partition(sp->out, p, sp->P, &sp->o[p], &sp->o[p + 1]);
    no = sp->o[sp->me + 1] - sp->o[sp->me];
    sp->x = hpml_malloc(gb * sp->in * sizeof(float) + 1);
    sp->y = hpml_malloc(gb * no * sizeof(float) + 1);
    sp->g = hpml_malloc(gb * no * sizeof(float) + 1);
    sp->a = hpml_malloc(lb * sp->out * sizeof(float) + 1);
    sp->t = hpml_malloc(lb * sp->out * sizeof(float) + 1);
    if (!sp->x || !sp->y || !sp->g || !sp->a || !sp->t)
        return HPML_ERR_NOMEM;
    sp->pair = layers == 2;
    sp->lo = split_lo(m, layers);
    if (sp->pair) {
        const nn_layer_t *l1 = &m->layers[1];
        sp->out1 = l1->out_size;
        if ((err = pair_shm_init(sp, m, gb, f32)) != 0)
            return err;
        if (!sp->shm) {
            sp->zp = hpml_malloc(gb * sp->out1 * sizeof(float) + 1);
            sp->zr = hpml_malloc((size_t)sp->P * lb * sp->out1 * sizeof(float) + 1);
            sp->gz = hpml_malloc(gb * sp->out1 * sizeof(float) + 1);
            if (!sp->zp || !sp->zr || !sp->gz)
                return HPML_ERR_NOMEM;
        }
        if (!(sp->wc = hpml_malloc(l1->nw * sizeof(float) + 1)))
            return HPML_ERR_NOMEM;
        HPML_LOG(HPML_LOG_INFO, "nn: two layers split, exchanges %s",
                 sp->shm ? (sp->tail ? "and the gradients above them through shared memory"
                                     : "through shared memory")
                         : "through messages");
    }
    /* The pair leaves only layer 1's bias and the small layers above to the buckets. */
    sp->fused = fused && !sp->pair && sp->lo < m->nparams;
    if (sp->fused) {
        size_t mine;
        if (!(sp->gs = malloc(P1 * sizeof(size_t))))
            return HPML_ERR_NOMEM;
        for (int p = 0; p < sp->P; p++) {
            hpml_io_partition(m->nparams - sp->lo, p, sp->P, &sp->gs[p], &sp->gs[p + 1]);
            sp->gs[p] += sp->lo;
        }
        sp->gs[sp->P] = m->nparams;
        mine = sp->gs[sp->me + 1] - sp->gs[sp->me];
        if (!(sp->gr = hpml_malloc((size_t)sp->P * mine * sizeof(float) + 1)))
            return HPML_ERR_NOMEM;
    }
    return 0;
}

/* v + bounds[p] * w .. v + bounds[p+1] * w is rank p's: each rank's part to every rank
 * (the exchange is an all-gather). Collective. */
static int split_share(split_t *sp, float *v, const size_t *bounds, size_t w)
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

/* Fused: the ranks' gradients of each slice to its owner, summed in rank order (the same
 * order at every step, so runs repeat bit for bit), and the owner's update. */
static int split_reduce_update(split_t *sp, hpml_model_t *m, dp_t *dp)
{
    const size_t g0 = sp->gs[sp->me], n = sp->gs[sp->me + 1] - g0;
    float *sum = m->grads + g0;
    int err;

    for (int p = 0; p < sp->P; p++) {
        sp->sc[p] = sp->gs[p + 1] - sp->gs[p];
        sp->sd[p] = sp->gs[p];
        sp->rc[p] = n;
        sp->rd[p] = (size_t)p * n;
    }
    if ((err = hpml_alltoallv(m->grads, sp->sc, sp->sd, sp->gr, sp->rc, sp->rd, HPML_F32,
                              sp->comm)) != 0)
        return err;
    memcpy(sum, sp->gr, n * sizeof(float));
    for (int p = 1; p < sp->P; p++) {
        const float *g = sp->gr + (size_t)p * n;
        for (size_t i = 0; i < n; i++)
            sum[i] += g[i];
    }
    hpml_optim_update(dp->o, g0, n, m->params + g0, sum, m->params + g0, dp->lr);
    sp->pending = 1;
    return 0;
}

/* The optimizer step for what this rank owns of the split layers: its rows of layer 0
 * (weights and biases) and, in a pair, its columns of layer 1's weights. */
static void split_update(split_t *sp, hpml_model_t *m, dp_t *dp)
{
    const nn_layer_t *l0 = &m->layers[0];
    const size_t o0 = sp->o[sp->me], no = sp->o[sp->me + 1] - o0, in = sp->in;
    size_t at = l0->w_off + o0 * in;

    hpml_optim_update(dp->o, at, no * in, m->params + at, m->grads + at, m->params + at, dp->lr);
    at = l0->b_off + o0;
    hpml_optim_update(dp->o, at, no, m->params + at, m->grads + at, m->params + at, dp->lr);
    for (size_t r = 0; sp->pair && r < sp->out1; r++) {
        at = m->layers[1].w_off + r * sp->out + o0;
        hpml_optim_update(dp->o, at, no, m->params + at, m->grads + at, m->params + at, dp->lr);
    }
}

/* Pair through shared memory: the gradients above the pair (us) summed over the ranks
 * in rank order, as the shared-memory allreduce sums them, and applied; dp_sync then has
 * nothing left to do this step. */
static void pair_tail(split_t *sp, hpml_model_t *m, dp_t *dp)
{
    const size_t n = m->nparams - sp->lo;
    float *g = m->grads + sp->lo;

    for (int p = 0; p < sp->P; p++) {
        const float *part = hpml_comm_shared_peer(sp->comm, sp->us, p);
        if (p == 0)
            memcpy(g, part, n * sizeof(float));
        else
            for (size_t i = 0; i < n; i++)
                g[i] += part[i];
    }
    hpml_optim_update(dp->o, sp->lo, n, m->params + sp->lo, g, m->params + sp->lo, dp->lr);
    dp->applied = 1;
}

/* split_step for a pair (split_t): layer 0's outputs and my part of layer 1's
 * pre-activations for every sample, whose parts go to the sample's rank and are summed
 * there in rank order; the layers above on my samples; every sample's gradient of
 * layer 1's pre-activations to every rank; then my columns of layer 1 and rows of
 * layer 0, gradients and update. Through shared memory (sp->shm) each exchange is one
 * node sync after the writes, the parts are read where their ranks wrote them (on one
 * node rank p is local rank p) and the gradients go straight into the node's matrix.
 * The next step writes the buffers again only after the other sync: zs after every rank
 * has passed this step's second (so has finished its sums), gz0 and us after its first
 * (so every rank has finished reading them). */
static int pair_step(split_t *sp, hpml_model_t *m, dp_t *dp, size_t gb, size_t nl,
                     const int32_t *labels, const uint64_t *ids, uint64_t key, double *lsum,
                     size_t *ok)
{
    const size_t o0 = sp->o[sp->me], o1 = sp->o[sp->me + 1], out1 = sp->out1;
    const size_t r0 = sp->rows[sp->me];
    float *zp = sp->shm ? sp->zs : sp->zp, *gz = sp->shm ? sp->gz0 : sp->gz;
    const float *z, *da;
    double t0;
    int err;

    hpml__nn_dense_rows_forward(m, 0, sp->x, gb, o0, o1, sp->y);
    hpml__nn_dense_cols_forward(m, 1, sp->y, gb, o0, o1, zp);
    for (int p = 0; !sp->shm && p < sp->P; p++) {
        int self = p == sp->me; /* my own part is read where it is */
        sp->sc[p] = self ? 0 : (sp->rows[p + 1] - sp->rows[p]) * out1;
        sp->sd[p] = sp->rows[p] * out1;
        sp->rc[p] = self ? 0 : nl * out1;
        sp->rd[p] = (size_t)p * nl * out1;
    }
    t0 = hpml_time();
    err = sp->shm ? hpml_comm_node_sync(sp->comm)
                  : hpml_alltoallv(zp, sp->sc, sp->sd, sp->zr, sp->rc, sp->rd, HPML_F32, sp->comm);
    dp->exposed += hpml_time() - t0;
    if (err)
        return err;
    if (nl > 0) {
        float *sum = hpml__nn_dense_sums(m, 1);
        const size_t k = nl * out1;

        for (int p = 0; p < sp->P; p++) { /* rank order, so every run sums alike */
            const float *part =
                p == sp->me ? zp + r0 * out1
                : sp->shm   ? (const float *)hpml_comm_shared_peer(sp->comm, zp, p) + r0 * out1
                            : sp->zr + (size_t)p * k;
            if (p == 0)
                memcpy(sum, part, k * sizeof(float));
            else
                for (size_t j = 0; j < k; j++)
                    sum[j] += part[j];
        }
        hpml__nn_dense_finish_forward(m, 1, nl);
        if ((err = hpml__nn_forward_from(m, 2, sum, nl, 1, ids, key, &z)) != 0 ||
            (err = hpml__nn_backward_to(m, 2, labels, 1.0f / (float)gb, NULL, NULL, lsum, ok,
                                        &da)) != 0)
            return err;
        hpml__nn_dense_act_backward(m, 1, da, nl, gz + r0 * out1);
    } else {
        memset(m->grads + sp->lo, 0, (m->nparams - sp->lo) * sizeof(float));
    }
    if (sp->tail)
        memcpy(sp->us, m->grads + sp->lo, (m->nparams - sp->lo) * sizeof(float));
    t0 = hpml_time();
    err = sp->shm ? hpml_comm_node_sync(sp->comm) : split_share(sp, gz, sp->rows, out1);
    dp->exposed += hpml_time() - t0;
    if (err)
        return err;
    if (sp->tail)
        pair_tail(sp, m, dp);
    hpml__nn_dense_cols_backward(m, 1, sp->y, gb, o0, o1, gz, sp->g);
    hpml__nn_dense_rows_backward(m, 0, sp->x, gb, o0, o1, sp->y, sp->g);
    split_update(sp, m, dp);
    return 0;
}

/* One training step of a global batch of gb samples (inputs in sp->x), of which this
 * rank's are labels[0..nl) with ids: forward, backward down to layer 1, the exchanges,
 * then layer 0's rows: gradient and update. Fused, the layers above are updated here
 * too; otherwise dp_sync's buckets do it after this. A pair: pair_step. */
static int split_step(split_t *sp, hpml_model_t *m, dp_t *dp, size_t gb, const int32_t *labels,
                      const uint64_t *ids, uint64_t key, double *lsum, size_t *ok)
{
    const size_t *o = sp->o, out = sp->out;
    const size_t o0 = o[sp->me], no = o[sp->me + 1] - o0;
    const float *z, *da = NULL;
    double t0;
    size_t nl;
    int err;

    for (int p = 0; p < sp->P; p++)
        hpml_io_partition(gb, p, sp->P, &sp->rows[p], &sp->rows[p + 1]);
    nl = sp->rows[sp->me + 1] - sp->rows[sp->me];
    *lsum = 0;
    *ok = 0;
    if (sp->pair)
        return pair_step(sp, m, dp, gb, nl, labels, ids, key, lsum, ok);

    /* Forward: my outputs for every sample; each rank gets its samples' block of them. */
    hpml__nn_dense_rows_forward(m, 0, sp->x, gb, o0, o0 + no, sp->y);
    for (int p = 0; p < sp->P; p++) {
        size_t np = o[p + 1] - o[p];
        sp->sc[p] = (sp->rows[p + 1] - sp->rows[p]) * no;
        sp->sd[p] = sp->rows[p] * no;
        sp->rc[p] = nl * np;
        sp->rd[p] = nl * o[p];
    }
    t0 = hpml_time();
    err = hpml_alltoallv(sp->y, sp->sc, sp->sd, sp->t, sp->rc, sp->rd, HPML_F32, sp->comm);
    if (err == 0 && sp->pending) { /* fused: last step's slices, before layer 1 reads them */
        err = split_share(sp, m->params, sp->gs, 1);
        sp->pending = 0;
    }
    dp->exposed += hpml_time() - t0;
    if (err)
        return err;
    for (int p = 0; p < sp->P; p++) { /* block p is (nl, np): columns o[p].. of a */
        size_t np = o[p + 1] - o[p];
        for (size_t r = 0; r < nl; r++)
            memcpy(sp->a + r * out + o[p], sp->t + nl * o[p] + r * np, np * sizeof(float));
    }
    /* Not fused, the buckets above layer 0 start in dp_sync, after this step: started by
     * dp_ready during backward, their allreduce would run beside the exchange and layer
     * 0's backward, which every rank waits for; where the progress thread shares the
     * rank's core (a 2-core node at 2 ranks) that slowed the step down. */
    if (nl > 0) {
        if ((err = hpml__nn_forward_from(m, 1, sp->a, nl, 1, ids, key, &z)) != 0 ||
            (err = hpml__nn_backward_to(m, 1, labels, 1.0f / (float)gb, NULL, NULL, lsum, ok,
                                        &da)) != 0)
            return err;
        for (int p = 0; p < sp->P; p++) { /* the gradients of rank p's outputs, packed */
            size_t np = o[p + 1] - o[p];
            for (size_t r = 0; r < nl; r++)
                memcpy(sp->t + nl * o[p] + r * np, da + r * out + o[p], np * sizeof(float));
        }
    } else {
        memset(m->grads + sp->lo, 0, (m->nparams - sp->lo) * sizeof(float));
    }

    /* Backward: every rank's gradients of my outputs, then my rows of layer 0. */
    for (int p = 0; p < sp->P; p++) {
        size_t np = o[p + 1] - o[p];
        sp->sc[p] = nl * np;
        sp->sd[p] = nl * o[p];
        sp->rc[p] = (sp->rows[p + 1] - sp->rows[p]) * no;
        sp->rd[p] = sp->rows[p] * no;
    }
    t0 = hpml_time();
    err = hpml_alltoallv(sp->t, sp->sc, sp->sd, sp->g, sp->rc, sp->rd, HPML_F32, sp->comm);
    if (err == 0 && sp->fused)
        err = split_reduce_update(sp, m, dp);
    dp->exposed += hpml_time() - t0;
    if (err)
        return err;
    hpml__nn_dense_rows_backward(m, 0, sp->x, gb, o0, o0 + no, sp->y, sp->g);
    split_update(sp, m, dp);
    return 0;
}

/* Layer 1's weights in v (a pair): every rank's columns to every rank, through sp->wc
 * where rank p's columns are the (out1, n_p) block at o[p] * out1. Collective. */
static int pair_gather(split_t *sp, const hpml_model_t *m, float *v)
{
    float *w = v + m->layers[1].w_off;
    const size_t in1 = sp->out, out1 = sp->out1;
    const size_t m0 = sp->o[sp->me], mc = sp->o[sp->me + 1] - m0; /* my columns */
    int err;

    for (size_t r = 0; r < out1; r++)
        memcpy(sp->wc + m0 * out1 + r * mc, w + r * in1 + m0, mc * sizeof(float));
    if ((err = split_share(sp, sp->wc, sp->o, out1)) != 0)
        return err;
    for (int p = 0; p < sp->P; p++) {
        const size_t c0 = sp->o[p], nc = sp->o[p + 1] - c0;
        for (size_t r = 0; p != sp->me && r < out1; r++)
            memcpy(w + r * in1 + c0, sp->wc + c0 * out1 + r * nc, nc * sizeof(float));
    }
    return 0;
}

/* v, laid out as the parameters (the parameters or an optimizer moment): every rank's
 * rows of layer 0 (weights and biases), in a pair its columns of layer 1's weights, and
 * when fused its slice of the layers above, to every rank. Collective. */
static int split_gather(split_t *sp, const hpml_model_t *m, float *v)
{
    const nn_layer_t *l0 = &m->layers[0];
    int err;

    if (!sp->on)
        return 0;
    if ((err = split_share(sp, v + l0->w_off, sp->o, sp->in)) != 0 ||
        (err = split_share(sp, v + l0->b_off, sp->o, 1)) != 0 ||
        (sp->pair && (err = pair_gather(sp, m, v)) != 0))
        return err;
    if (sp->fused && (err = split_share(sp, v, sp->gs, 1)) == 0 && v == m->params)
        sp->pending = 0;
    return err;
}

/* The first parameter whose gradients the buckets allreduce: 0 in the data-parallel
 * layout; with one layer split layer 1's first, or none (nparams) when split_t's fused
 * exchange updates them; with two, layer 1's bias. */
static size_t dp_lo(const hpml_train_config_t *c, const hpml_model_t *m, int P, int split)
{
    if (split == 0)
        return 0;
    return split == 1 && hpml_train_update_is_sharded(c, P) ? m->nparams : split_lo(m, split);
}

/* The parameters and every optimizer moment, whole on every rank (for a checkpoint). */
static int split_gather_all(split_t *sp, const hpml_model_t *m, hpml_optim_t *o)
{
    int err = split_gather(sp, m, m->params);

    for (int i = 0; i < hpml_optim_nstate(o) && err == 0; i++)
        err = split_gather(sp, m, hpml_optim_state(o, i));
    return err;
}

/* ---- checkpoints -------------------------------------------------------------------- */

/* Save the run at st: every rank's epoch sums gathered, the optimizer's moments and the
 * split layers' parameters made whole, rank 0 writes. Collective. */
static int save_checkpoint(hpml_comm_t *comm, const char *dir, dp_t *dp, split_t *sp,
                           hpml_model_t *m, hpml_optim_t *o, nn_ckpt_t *st)
{
    const int P = hpml_comm_size(comm);
    double mine[3] = {st->loss_sum, st->correct, st->seen};
    double *all = malloc(3 * (size_t)P * sizeof(double));
    int err;

    if (all == NULL) /* this rank's failure: the caller's funnel ends the job */
        return hpml_set_error(HPML_ERR_NOMEM, "train: no memory for the checkpoint's sums");
    err = hpml_allgather(mine, all, 3, HPML_F64, comm);
    st->nranks = (uint32_t)P;
    st->rank_sums = all;
    if (err == 0 && (err = dp_gather_state(dp)) == 0 && (err = split_gather_all(sp, m, o)) == 0)
        err = hpml__ckpt_save(comm, dir, m, o, st);
    free(all);
    st->rank_sums = NULL;
    return err;
}

/* Load the checkpoint in dir into m, o and *st (whose run it must be). Each rank takes
 * back its own epoch sums when the run had as many ranks; otherwise rank 0 takes their
 * totals (the report is then the same up to the order of the additions). Collective. */
static int resume(hpml_comm_t *comm, const char *dir, hpml_model_t *m, hpml_optim_t *o,
                  nn_ckpt_t *st)
{
    const int P = hpml_comm_size(comm), rank = hpml_comm_rank(comm);
    nn_ckpt_t now = *st;
    int err;

    if ((err = hpml__ckpt_load(comm, dir, m, o, &now, st)) != 0)
        return err;
    st->loss_sum = st->correct = st->seen = 0;
    for (uint32_t r = 0; r < st->nranks; r++) {
        if (st->nranks == (uint32_t)P ? r == (uint32_t)rank : rank == 0) {
            st->loss_sum += st->rank_sums[3 * r];
            st->correct += st->rank_sums[3 * r + 1];
            st->seen += st->rank_sums[3 * r + 2];
        }
    }
    free(st->rank_sums);
    st->rank_sums = NULL;
    st->nranks = 0;
    return 0;
}

/* ---- training ----------------------------------------------------------------------- */

/*
 * After step `step`: has training diverged? A non-finite loss on any rank comes from
 * non-finite logits (the inputs are checked finite when loaded), whose gradients are not
 * finite either; the gradients are summed over the ranks, so the output layer's bias is
 * not finite after the update on every rank at the same step. Checking those few values
 * (not the loss, which a rank knows only for its own samples) gives every rank the same
 * verdict without a collective. HPML_ERR_NUMERIC naming the step, before anything is saved.
 */
static int check_diverged(const hpml_model_t *m, int64_t step, int64_t epoch)
{
    const nn_layer_t *l = NULL;
    float acc = 0.0f;

    for (int i = m->nlayers - 1; i >= 0 && l == NULL; i--)
        if (m->layers[i].nb > 0)
            l = &m->layers[i];
    if (l == NULL)
        return 0;
    for (size_t j = 0; j < l->nb; j++)
        acc += 0.0f * m->params[l->b_off + j]; /* NaN or Inf makes it NaN */
    if (acc == 0.0f)
        return 0;
    return hpml_set_error(HPML_ERR_NUMERIC,
                          "train: training diverged at step %lld (epoch %lld): the loss and "
                          "the parameters are not finite; nothing was saved (a lower --lr may "
                          "help)",
                          (long long)step, (long long)epoch);
}

/* Are d's samples of shape (c, h, w)? Else HPML_ERR_INVAL naming d's file and both shapes:
 * a forward pass over samples of another size reads past them (or computes garbage). */
static int check_shape(const hpml_dataset_t *d, const char *what, int c, int h, int w)
{
    if (d->c == c && d->h == h && d->w == w)
        return 0;
    return hpml_set_error(HPML_ERR_INVAL, "%s %s: samples are %dx%dx%d, the model takes %dx%dx%d",
                          what, d->source[0] ? d->source : "(in memory)", d->c, d->h, d->w, c, h,
                          w);
}

int hpml_evaluate(hpml_comm_t *comm, hpml_model_t *m, const hpml_dataset_t *d, size_t batch,
                  double *loss, double *acc)
{
    double s[3] = {0, 0, 0}; /* loss sum, correct, count */
    const size_t in = hpml_model_input_size(m);
    int err;

    if ((err = check_shape(d, "images", m->in_c, m->in_h, m->in_w)) != 0)
        return err;
    if (batch == 0)
        batch = 1000;
    for (size_t i = 0; i < d->n; i += batch) {
        size_t nb = d->n - i < batch ? d->n - i : batch, ok;
        const float *z;
        double l;
        if ((err = hpml_model_forward(m, d->x + i * in, nb, 0, NULL, 0, &z)) != 0 ||
            (err = hpml_model_loss(m, d->y + i, &l, &ok)) != 0)
            return err;
        s[0] += l;
        s[1] += (double)ok;
        s[2] += (double)nb;
    }
    if (comm && (err = hpml_allreduce(HPML_IN_PLACE, s, 3, HPML_F64, HPML_SUM, comm)) != 0)
        return err;
    *loss = s[2] > 0 ? s[0] / s[2] : 0.0;
    *acc = s[2] > 0 ? s[1] / s[2] : 0.0;
    return 0;
}

int hpml_train(hpml_comm_t *comm, const hpml_train_config_t *cfg, const hpml_dataset_t *train,
               const hpml_dataset_t *test, hpml_report_fn report, hpml_progress_fn progress,
               void *ctx, hpml_model_t **out)
{
    hpml_model_t *m = NULL;
    hpml_optim_t *o = NULL;
    dp_t dp;
    split_t sp;
    nn_ckpt_t st;
    uint32_t *perm = NULL;
    float *xb = NULL;
    int32_t *yb = NULL;
    uint64_t *ids = NULL;
    const int P = hpml_comm_size(comm), rank = hpml_comm_rank(comm);
    size_t in, B = cfg->batch, N = train->n, lb_max;
    long steps_per_epoch, total_steps;
    double t_start, resumed_seen = 0;
    int shard_rows, hybrid = 0; /* layers split */
    int err;

    *out = NULL;
    memset(&dp, 0, sizeof(dp));
    memset(&sp, 0, sizeof(sp));
    memset(&st, 0, sizeof(st));
    /* Row-sharded data (--shard-data): this rank holds only rows [offset, offset+n). The
     * checks before the first collective depend only on what every rank has (the file's
     * shape, the configuration), so every rank fails the same way. */
    shard_rows = train->total != N || train->offset != 0;
    if (shard_rows && train->total < (size_t)P)
        return hpml_set_error(HPML_ERR_INVAL,
                              "train: %s holds %zu samples for %d ranks: sharded data needs at "
                              "least one sample per rank",
                              train->source[0] ? train->source : "the training set", train->total,
                              P);
    if (B == 0 || N == 0 || cfg->epochs <= 0)
        return hpml_set_error(HPML_ERR_INVAL, "train: empty data set, batch or epochs");
    if (test != NULL && (err = check_shape(test, "test images", train->c, train->h, train->w)) != 0)
        return err;
    if (N > UINT32_MAX)
        return hpml_set_error(HPML_ERR_RANGE, "train: more than 2^32 samples");
    if ((err = hpml_model_create(cfg->spec, train->c, train->h, train->w, &m)) != 0)
        goto out;
    if (hpml_model_output_size(m) < (size_t)train->classes) {
        err = hpml_set_error(HPML_ERR_INVAL,
                             "train: the model has %zu outputs but the labels go up to %d (the "
                             "last layer should be 'dense %d')",
                             hpml_model_output_size(m), train->classes - 1, train->classes);
        goto out;
    }
    in = hpml_model_input_size(m);
    if (B > N)
        B = N;
    lb_max = B / (size_t)P + 1;
    steps_per_epoch = (long)((train->total + B - 1) / B);
    total_steps = steps_per_epoch * cfg->epochs;
    if ((hybrid = use_hybrid(cfg, m, P, !shard_rows, (B + (size_t)P - 1) / (size_t)P)) < 0) {
        err = hybrid;
        goto out;
    }
    if ((err = hpml_model_reserve(m, lb_max)) != 0 ||
        (err = hpml_optim_create(&cfg->opt, m->nparams, &o)) != 0 ||
        (err = dp_init(&dp, comm, m, o, cfg, dp_lo(cfg, m, P, hybrid))) != 0 ||
        (hybrid &&
         (err = split_init(&sp, comm, m, B, lb_max, hybrid, hpml_train_update_is_sharded(cfg, P),
                           cfg->grad_dtype == HPML_F32)) != 0))
        goto out;
    perm = malloc(N * sizeof(uint32_t));
    xb = hpml_malloc(lb_max * in * sizeof(float));
    yb = malloc(lb_max * sizeof(int32_t));
    ids = malloc(lb_max * sizeof(uint64_t));
    if (!perm || !xb || !yb || !ids) {
        err = HPML_ERR_NOMEM;
        goto out;
    }
    hpml_model_init(m, cfg->seed);
    hpml_rng_init(&st.rng, cfg->seed, 0x44524f50ull); /* "DROP" */
    st.seed = cfg->seed;
    st.batch = B;
    st.samples = train->total;
    st.shard_ranks = shard_rows ? (uint32_t)P : 0;
    st.opt_kind = (uint32_t)cfg->opt.kind;
    if (cfg->resume) {
        if (cfg->checkpoint_dir == NULL) {
            err = hpml_set_error(HPML_ERR_INVAL, "train: --resume needs a checkpoint folder");
            goto out;
        }
        if ((err = resume(comm, cfg->checkpoint_dir, m, o, &st)) != 0)
            goto out;
        resumed_seen = st.seen;
    }
    /* Every rank starts from rank 0's parameters. */
    if ((err = hpml_bcast(m->params, m->nparams, HPML_F32, 0, comm)) != 0)
        goto out;

    t_start = hpml_time() - st.train_time;
    for (; st.epoch < cfg->epochs; st.epoch++, st.step_in_epoch = 0) {
        double t_epoch = hpml_time();
        hpml_epoch_report_t r;
        int stop = 0;

        /* Replicated data: one global permutation. Row-sharded: each rank permutes its rows
         * (a rank-count-dependent order) and walks them cyclically. */
        hpml_shuffle(shard_rows ? cfg->seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1))
                                : cfg->seed,
                     (long)st.epoch, N, perm);
        for (; st.step_in_epoch < steps_per_epoch; st.step_in_epoch++) {
            const size_t T = train->total;
            size_t g0 = (size_t)st.step_in_epoch * B, gb = T - g0 < B ? T - g0 : B;
            size_t b0, b1, nl, ok = 0;
            uint64_t key = hpml_rng_u64(&st.rng);
            double lsum = 0, t_step = hpml_time();
            double lr = hpml_opt_lr(&cfg->opt, (long)st.global_step, total_steps, steps_per_epoch);
            const float *z;

            hpml_io_partition(gb, rank, P, &b0, &b1);
            nl = b1 - b0;
            for (size_t j = 0; j < nl; j++) {
                uint32_t s = shard_rows ? perm[((size_t)st.step_in_epoch * lb_max + j) % N]
                                        : perm[g0 + b0 + j];
                if (!hybrid)
                    memcpy(xb + j * in, train->x + (size_t)s * in, in * sizeof(float));
                yb[j] = train->y[s];
                ids[j] = train->offset + s;
            }
            for (size_t j = 0; hybrid && j < gb; j++) /* layer 0 takes the whole batch */
                memcpy(sp.x + j * in, train->x + (size_t)perm[g0 + j] * in, in * sizeof(float));
            dp_begin(&dp, lr);
            if (hybrid) {
                if ((err = split_step(&sp, m, &dp, gb, yb, ids, key, &lsum, &ok)) != 0)
                    goto out;
            } else if (nl > 0) {
                if ((err = hpml_model_forward(m, xb, nl, 1, ids, key, &z)) != 0 ||
                    (err = hpml_model_backward(m, yb, 1.0f / (float)gb, dp_ready, &dp, &lsum,
                                               &ok)) != 0)
                    goto out;
            } else {
                memset(m->grads, 0, m->nparams * sizeof(float));
            }
            if ((err = dp_sync(&dp, lr)) != 0 ||
                (err = check_diverged(m, st.global_step + 1, st.epoch + 1)) != 0)
                goto out;
            st.global_step++;
            st.loss_sum += lsum;
            st.correct += (double)ok;
            st.seen += (double)nl;
            st.train_time += hpml_time() - t_step;
            if (progress)
                progress(ctx, (int)st.epoch + 1, st.step_in_epoch + 1, steps_per_epoch,
                         nl ? lsum / (double)nl : 0.0);
            if (cfg->checkpoint_dir && cfg->checkpoint_every > 0 &&
                st.global_step % cfg->checkpoint_every == 0) {
                nn_ckpt_t s2 = st;

                s2.step_in_epoch++; /* resume after this step */
                if ((err = save_checkpoint(comm, cfg->checkpoint_dir, &dp, &sp, m, o, &s2)) != 0)
                    goto out;
            }
            if (cfg->max_steps > 0 && st.global_step >= cfg->max_steps) {
                st.step_in_epoch++;
                stop = 1;
                break;
            }
        }
        /* Epoch report: sums over ranks. */
        {
            /* Throughput counts the samples of this run only, not those before a resume. */
            double seen_local = st.seen - resumed_seen;
            double s[4] = {st.loss_sum, st.correct, st.seen, seen_local};

            memset(&r, 0, sizeof(r));
            if ((err = hpml_allreduce(HPML_IN_PLACE, s, 4, HPML_F64, HPML_SUM, comm)) != 0)
                goto out;
            r.epoch = (int)st.epoch + 1;
            r.steps = (long)st.global_step;
            r.train_loss = s[2] > 0 ? s[0] / s[2] : 0;
            r.train_acc = s[2] > 0 ? s[1] / s[2] : 0;
            r.seconds = hpml_time() - t_epoch;
            r.images_per_s = r.seconds > 0 ? s[3] / r.seconds : 0;
            r.images_per_s_rank = r.seconds > 0 ? seen_local / r.seconds : 0;
            r.comm_exposed_s = dp.exposed;
            r.lr = hpml_opt_lr(&cfg->opt, (long)st.global_step - 1, total_steps, steps_per_epoch);
            r.elapsed = hpml_time() - t_start;
            r.test_loss = r.test_acc = -1;
            if ((err = split_gather(&sp, m, m->params)) != 0) /* the whole model */
                goto out;
            if (test && (err = hpml_evaluate(comm, m, test, cfg->eval_batch, &r.test_loss,
                                             &r.test_acc)) != 0)
                goto out;
            r.last = stop || st.epoch + 1 == cfg->epochs;
            t_start += hpml_time() - t_epoch - r.seconds; /* exclude evaluation */
            if (report)
                report(ctx, &r);
        }
        st.loss_sum = st.correct = st.seen = resumed_seen = 0;
        dp.exposed = 0;
        if (stop)
            break;
        if (cfg->checkpoint_dir && cfg->checkpoint_every == 0) {
            nn_ckpt_t s2 = st;

            s2.epoch++;
            s2.step_in_epoch = 0;
            if ((err = save_checkpoint(comm, cfg->checkpoint_dir, &dp, &sp, m, o, &s2)) != 0)
                goto out;
        }
    }
    *out = m;
    m = NULL;
out:
    dp_free(&dp);
    split_free(&sp, err);
    hpml_optim_destroy(o);
    hpml_model_destroy(m);
    free(perm);
    hpml_free(xb);
    free(yb);
    free(ids);
    return err;
}

static double cpu_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int hpml_train_synthetic(hpml_comm_t *comm, const hpml_train_config_t *cfg, int in_c, int in_h,
                         int in_w, int iters, int warmup, hpml_synth_result_t *res)
{
    hpml_model_t *m = NULL;
    hpml_optim_t *o = NULL;
    dp_t dp;
    split_t sp;
    float *x = NULL, *xown = NULL;
    int32_t *y = NULL;
    const int P = hpml_comm_size(comm);
    const size_t B = cfg->batch; /* per rank, as in Horovod's benchmark */
    double t_total = 0, t_comm = 0, cpu0 = 0;
    hpml_rng_t rng;
    size_t in, classes;
    int err, hybrid = 0; /* layers split */

    memset(&dp, 0, sizeof(dp));
    memset(&sp, 0, sizeof(sp));
    memset(res, 0, sizeof(*res));
    if (B == 0 || iters <= 0)
        return hpml_set_error(HPML_ERR_INVAL, "synthetic: batch and iterations must be > 0");
    if ((err = hpml_model_create(cfg->spec, in_c, in_h, in_w, &m)) != 0)
        goto out;
    /* Synthetic data counts as on every rank: each rank can generate every rank's. */
    if ((hybrid = use_hybrid(cfg, m, P, 1, B)) < 0) {
        err = hybrid;
        goto out;
    }
    if ((err = hpml_model_reserve(m, B)) != 0 ||
        (err = hpml_optim_create(&cfg->opt, m->nparams, &o)) != 0 ||
        (err = dp_init(&dp, comm, m, o, cfg, dp_lo(cfg, m, P, hybrid))) != 0 ||
        (hybrid && (err = split_init(&sp, comm, m, B * (size_t)P, B, hybrid,
                                     hpml_train_update_is_sharded(cfg, P),
                                     cfg->grad_dtype == HPML_F32)) != 0))
        goto out;
    in = hpml_model_input_size(m);
    classes = hpml_model_output_size(m);
    x = hybrid ? sp.x : (xown = hpml_malloc(B * in * sizeof(float)));
    y = malloc(B * sizeof(int32_t));
    if (!x || !y) {
        err = HPML_ERR_NOMEM;
        goto out;
    }
    hpml_model_init(m, cfg->seed);
    /* Rank q's samples come from stream q + 1; the hybrid layout's layer 0 needs all. */
    for (int q = 0; q < P; q++) {
        if (!hybrid && q != hpml_comm_rank(comm))
            continue;
        float *xq = hybrid ? x + (size_t)q * B * in : x;
        hpml_rng_init(&rng, cfg->seed, (uint64_t)q + 1);
        for (size_t i = 0; i < B * in; i++)
            xq[i] = (float)hpml_rng_uniform(&rng);
        for (size_t i = 0; q == hpml_comm_rank(comm) && i < B; i++)
            y[i] = (int32_t)hpml_rng_below(&rng, classes);
    }
    if ((err = hpml_bcast(m->params, m->nparams, HPML_F32, 0, comm)) != 0)
        goto out;
    for (int it = 0; it < warmup + iters; it++) {
        const float *z;
        double l;
        size_t ok;
        if (it == warmup) {
            if ((err = hpml_barrier(comm)) != 0)
                goto out;
            dp.exposed = 0;
            t_total = hpml_time();
            cpu0 = cpu_seconds();
        }
        dp_begin(&dp, cfg->opt.lr * 0.01);
        if (hybrid) {
            err = split_step(&sp, m, &dp, B * (size_t)P, y, NULL, (uint64_t)it, &l, &ok);
            if (err != 0 || (err = dp_sync(&dp, cfg->opt.lr * 0.01)) != 0)
                goto out;
        } else if ((err = hpml_model_forward(m, x, B, 1, NULL, (uint64_t)it, &z)) != 0 ||
                   (err = hpml_model_backward(m, y, 1.0f / (float)(B * (size_t)P), dp_ready, &dp,
                                              &l, &ok)) != 0 ||
                   (err = dp_sync(&dp, cfg->opt.lr * 0.01)) != 0)
            goto out;
    }
    t_total = hpml_time() - t_total;
    t_comm = dp.exposed;
    {
        double s[3] = {t_total, t_comm, cpu_seconds() - cpu0};
        if ((err = hpml_allreduce(HPML_IN_PLACE, s, 3, HPML_F64, HPML_MAX, comm)) != 0)
            goto out;
        t_total = s[0];
        t_comm = s[1];
        res->cpu_s = s[2] / iters;
    }
    res->step_s = t_total / iters;
    res->comm_exposed_s = t_comm / iters;
    res->compute_s = res->step_s - res->comm_exposed_s;
    res->images_per_s_rank = (double)B / res->step_s;
    res->images_per_s_total = res->images_per_s_rank * P;
out:
    dp_free(&dp);
    split_free(&sp, err);
    hpml_optim_destroy(o);
    hpml_model_destroy(m);
    hpml_free(xown);
    free(y);
    return err;
}
