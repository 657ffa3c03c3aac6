/*
 * The hybrid layout with one layer split: data parallel where the weights are few, model
 * parallel where they are many (Krizhevsky 2014; split.c). Each rank computes its outputs
 * of layer 0 for the whole global batch; one all-to-all gives each rank all the outputs of
 * its own samples, and the layers above run data-parallel on them. In backward a second
 * all-to-all returns to each owner the gradients of its outputs for the whole batch. Per
 * step a rank sends about 2 gb out (P-1) / P^2 floats instead of allreducing the layer's
 * in x out gradients (2 in out (P-1) / P): less while the samples per rank are fewer than
 * the inputs.
 *
 * Fused (f32, sharded update): the layers above take no allreduce. Rank p owns their
 * parameters [gs[p], gs[p+1]); right after the second all-to-all the ranks' gradients of
 * each slice go to its owner (a reduce-scatter as one more all-to-all), who sums them in
 * rank order and updates the slice; the new slices go to every rank right after the next
 * step's first all-to-all (or before anything else reads the whole model). Both exchanges
 * follow an all-to-all, when the ranks are in step, so a step has two points where ranks
 * wait for each other instead of three. Otherwise the buckets sum the layers above after
 * the step (docs/nn.md, "Hybrid layout").
 */
#include <stdlib.h>
#include <string.h>

#include "hpml/io.h"
#include "nn/layout.h"

typedef struct {
    nn_split_t sp;
    float *a;    /* (lb, out): all outputs of layer 0 for this rank's samples */
    float *t;    /* (lb, out): blocks in transit */
    size_t lo;   /* the parameters above the split start at lo */
    int fused;   /* see the file's comment */
    int pending; /* fused: this rank's slice is updated, not yet sent */
    size_t *gs;  /* fused, P + 1: rank p owns parameters [gs[p], gs[p+1]) above the split */
    float *gr;   /* fused, (P, this rank's slice): every rank's gradients of it */
} split1_t;

static void split1_close(nn_layout_t *l, int err)
{
    split1_t *s = (split1_t *)l;

    (void)err;
    if (s == NULL)
        return;
    hpml__split_close(&s->sp);
    hpml_free(s->a);
    hpml_free(s->t);
    free(s->gs);
    hpml_free(s->gr);
    free(s);
}

/* Fused: every rank's slice of the parameters above the split, and room for every rank's
 * gradients of this rank's slice. */
static int fused_open(split1_t *s)
{
    const nn_split_t *sp = &s->sp;
    const size_t n = sp->m->nparams;
    size_t mine;

    if (!(s->gs = malloc(((size_t)sp->P + 1) * sizeof(size_t))))
        return HPML_ERR_NOMEM;
    for (int p = 0; p < sp->P; p++) {
        hpml_io_partition(n - s->lo, p, sp->P, &s->gs[p], &s->gs[p + 1]);
        s->gs[p] += s->lo;
    }
    s->gs[sp->P] = n;
    mine = s->gs[sp->me + 1] - s->gs[sp->me];
    return (s->gr = hpml_malloc((size_t)sp->P * mine * sizeof(float) + 1)) ? 0 : HPML_ERR_NOMEM;
}

static int split1_open(const nn_layout_args_t *a, nn_layout_t **out)
{
    const hpml_model_t *m = a->m;
    const int sharded = hpml_train_update_is_sharded(a->cfg, hpml_comm_size(a->comm));
    split1_t *s = calloc(1, sizeof(*s));
    int err = HPML_ERR_NOMEM;

    *out = NULL;
    if (s == NULL)
        return err;
    s->sp.base.ops = &hpml__layout_split1;
    s->lo = m->nlayers > 1 ? m->layers[1].w_off : m->nparams;
    s->fused = sharded && s->lo < m->nparams;
    /* The buckets take the layers above unless the fused exchanges do (or there are none). */
    if ((err = hpml__buckets_open(a, sharded ? m->nparams : s->lo, &s->sp.bk)) != 0 ||
        (err = hpml__split_open(&s->sp, a)) != 0)
        goto out;
    err = HPML_ERR_NOMEM;
    s->a = hpml_malloc(a->lb * s->sp.out * sizeof(float) + 1);
    s->t = hpml_malloc(a->lb * s->sp.out * sizeof(float) + 1);
    if (!s->a || !s->t || (s->fused && fused_open(s) != 0))
        goto out;
    *out = &s->sp.base;
    s = NULL;
    err = 0;
out:
    split1_close(s ? &s->sp.base : NULL, err);
    return err;
}

/* My outputs of layer 0 for every sample; each rank gets its samples' block of them, and
 * (fused) last step's slices of the layers above, before layer 1 reads them; then the
 * layers above on my samples. */
static int split1_forward(nn_layout_t *l, const nn_step_t *st)
{
    split1_t *s = (split1_t *)l;
    nn_split_t *sp = &s->sp;
    const size_t *o = sp->own, out = sp->out, o0 = o[sp->me], no = o[sp->me + 1] - o0;
    const float *z;
    size_t nl;
    double t0;
    int err;

    hpml__buckets_begin(sp->bk, st->lr);
    hpml__split_rows(sp, st->gb);
    nl = sp->nl;
    hpml__nn_dense_rows_forward(sp->m, 0, sp->x, st->gb, o0, o0 + no, sp->y);
    for (int p = 0; p < sp->P; p++) {
        size_t np = o[p + 1] - o[p];
        sp->sc[p] = (sp->rows[p + 1] - sp->rows[p]) * no;
        sp->sd[p] = sp->rows[p] * no;
        sp->rc[p] = nl * np;
        sp->rd[p] = nl * o[p];
    }
    t0 = hpml_time();
    err = hpml_alltoallv(sp->y, sp->sc, sp->sd, s->t, sp->rc, sp->rd, HPML_F32, sp->comm);
    if (err == 0 && s->pending) {
        err = hpml__split_share(sp, sp->m->params, s->gs, 1);
        s->pending = 0;
    }
    if ((err = hpml__split_waited(sp, t0, err)) != 0)
        return err;
    for (int p = 0; p < sp->P; p++) { /* block p is (nl, np): columns o[p].. of a */
        size_t np = o[p + 1] - o[p];
        for (size_t r = 0; r < nl; r++)
            memcpy(s->a + r * out + o[p], s->t + nl * o[p] + r * np, np * sizeof(float));
    }
    return nl > 0 ? hpml__nn_forward_from(sp->m, 1, s->a, nl, 1, st->ids, st->key, &z) : 0;
}

/* Fused: the ranks' gradients of each slice to its owner, summed in rank order (the same
 * order at every step, so runs repeat bit for bit), and the owner's update. */
static int reduce_update(split1_t *s, double lr)
{
    nn_split_t *sp = &s->sp;
    hpml_model_t *m = sp->m;
    const size_t g0 = s->gs[sp->me], n = s->gs[sp->me + 1] - g0;
    float *sum = m->grads + g0;
    int err;

    for (int p = 0; p < sp->P; p++) {
        sp->sc[p] = s->gs[p + 1] - s->gs[p];
        sp->sd[p] = s->gs[p];
        sp->rc[p] = n;
        sp->rd[p] = (size_t)p * n;
    }
    if ((err = hpml_alltoallv(m->grads, sp->sc, sp->sd, s->gr, sp->rc, sp->rd, HPML_F32,
                              sp->comm)) != 0)
        return err;
    memcpy(sum, s->gr, n * sizeof(float));
    for (int p = 1; p < sp->P; p++) {
        const float *g = s->gr + (size_t)p * n;
        for (size_t i = 0; i < n; i++)
            sum[i] += g[i];
    }
    hpml_optim_update(sp->o, g0, n, m->params + g0, sum, m->params + g0, lr);
    s->pending = 1;
    return 0;
}

/* Backward down to layer 1's input; every rank's gradients of my outputs (and, fused, the
 * slices of the layers above to their owners); then my rows of layer 0. The buckets of
 * the layers above start only in update, after this: started during backward, their
 * allreduce would run beside the exchange and layer 0's backward, which every rank waits
 * for; where the progress thread shares the rank's core that slowed the step down. */
static int split1_backward(nn_layout_t *l, const nn_step_t *st, double *loss_sum, size_t *correct)
{
    split1_t *s = (split1_t *)l;
    nn_split_t *sp = &s->sp;
    const size_t *o = sp->own, out = sp->out, o0 = o[sp->me], no = o[sp->me + 1] - o0;
    const size_t nl = sp->nl;
    const float *da = NULL;
    double t0;
    int err;

    if (nl > 0) {
        if ((err = hpml__nn_backward_to(sp->m, 1, st->y, 1.0f / (float)st->gb, NULL, NULL, loss_sum,
                                        correct, &da)) != 0)
            return err;
        for (int p = 0; p < sp->P; p++) { /* the gradients of rank p's outputs, packed */
            size_t np = o[p + 1] - o[p];
            for (size_t r = 0; r < nl; r++)
                memcpy(s->t + nl * o[p] + r * np, da + r * out + o[p], np * sizeof(float));
        }
    } else {
        memset(sp->m->grads + s->lo, 0, (sp->m->nparams - s->lo) * sizeof(float));
    }
    for (int p = 0; p < sp->P; p++) {
        size_t np = o[p + 1] - o[p];
        sp->sc[p] = nl * np;
        sp->sd[p] = nl * o[p];
        sp->rc[p] = (sp->rows[p + 1] - sp->rows[p]) * no;
        sp->rd[p] = sp->rows[p] * no;
    }
    t0 = hpml_time();
    err = hpml_alltoallv(s->t, sp->sc, sp->sd, sp->g, sp->rc, sp->rd, HPML_F32, sp->comm);
    if (err == 0 && s->fused)
        err = reduce_update(s, st->lr);
    if ((err = hpml__split_waited(sp, t0, err)) != 0)
        return err;
    hpml__nn_dense_rows_backward(sp->m, 0, sp->x, st->gb, o0, o0 + no, sp->y, sp->g);
    return 0;
}

static int split1_update(nn_layout_t *l, const nn_step_t *st)
{
    split1_t *s = (split1_t *)l;

    hpml__split_update_rows(&s->sp, st->lr);
    return hpml__buckets_sync(s->sp.bk, st->lr, &l->exposed);
}

/* Every rank's rows of layer 0 and, fused, its slice of the layers above; with moments,
 * the same of every optimizer moment. */
static int split1_gather(nn_layout_t *l, int moments)
{
    split1_t *s = (split1_t *)l;
    nn_split_t *sp = &s->sp;
    int err = moments ? hpml__buckets_gather_moments(sp->bk) : 0;

    for (int k = -1; k < (moments ? hpml_optim_nstate(sp->o) : 0) && err == 0; k++) {
        float *v = k < 0 ? sp->m->params : hpml_optim_state(sp->o, k);

        if ((err = hpml__split_gather_rows(sp, v)) == 0 && s->fused &&
            (err = hpml__split_share(sp, v, s->gs, 1)) == 0 && k < 0)
            s->pending = 0;
    }
    return err;
}

const nn_layout_ops_t hpml__layout_split1 = {
    .name = "hybrid (1 layer split)",
    .split = 1,
    .open = split1_open,
    .forward = split1_forward,
    .backward = split1_backward,
    .update = split1_update,
    .gather = split1_gather,
    .close = split1_close,
};
