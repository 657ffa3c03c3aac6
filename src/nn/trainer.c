/*
 * The trainer: the model, its optimizer, what defines the run and where it is, and the
 * layout that spreads a step over the ranks (layout.h). A step reads as llm.c's: forward,
 * backward, update (the model overwrites its gradients, so there is no zero_grad but for a
 * rank without samples, which its layout zeroes). Checkpoints hold everything that
 * determines the rest of the run (parameters, optimizer moments and step, RNG state, epoch,
 * step in epoch, running epoch sums), so a resumed run is bit-identical to an
 * uninterrupted one at the same rank count (checkpoint.c writes the format).
 */
#include <stdlib.h>
#include <string.h>

#include "nn/trainer.h"

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
    /* A pipeline stage updates its own layers after summing over its replicas. */
    return c->sharded_update && c->grad_dtype == HPML_F32 && nranks > 1 && c->stages <= 1;
}

/* Load the checkpoint in cfg->checkpoint_dir into the model, the optimizer and t->st
 * (whose run it must be). Each rank takes back its own epoch sums when the run had as many
 * ranks; otherwise rank 0 takes their totals (the report is then the same up to the order
 * of the additions). Collective. */
static int resume(nn_trainer_t *t)
{
    nn_ckpt_t now = t->st, *st = &t->st;
    int err;

    if (t->cfg->checkpoint_dir == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "train: --resume needs a checkpoint folder");
    if ((err = hpml__ckpt_load(t->comm, t->cfg->checkpoint_dir, t->m, t->o, &now, st)) != 0)
        return err;
    st->loss_sum = st->correct = st->seen = 0;
    for (uint32_t r = 0; r < st->nranks; r++) {
        if (st->nranks == (uint32_t)t->P ? r == (uint32_t)t->rank : t->rank == 0) {
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

/* The model for inputs (c, h, w) whose outputs cover the labels, its layout, its
 * activations and optimizer. */
static int make_model(nn_trainer_t *t, const nn_trainer_args_t *a, const nn_layout_ops_t **lay)
{
    const hpml_train_config_t *cfg = t->cfg;
    int err;

    if ((err = hpml_model_create(cfg->spec, a->c, a->h, a->w, &t->m)) != 0)
        return err;
    if (hpml_model_output_size(t->m) < (size_t)a->classes)
        return hpml_set_error(HPML_ERR_INVAL,
                              "train: the model has %zu outputs but the labels go up to %d (the "
                              "last layer should be 'dense %d')",
                              hpml_model_output_size(t->m), a->classes - 1, a->classes);
    if ((err = hpml__layout_pick(cfg, t->m, t->P, a->replicated, a->per_rank, lay)) != 0)
        return err;
    /* A pipeline stage computes on models of its own layers (layout_pipe.c). */
    if (*lay != &hpml__layout_pipe && (err = hpml_model_reserve(t->m, a->lb)) != 0)
        return err;
    return hpml_optim_create(&cfg->opt, t->m->nparams, &t->o);
}

int hpml__trainer_open(nn_trainer_t *t, hpml_comm_t *comm, const hpml_train_config_t *cfg,
                       const nn_trainer_args_t *a)
{
    const nn_layout_ops_t *lay = NULL;
    nn_layout_args_t la;
    int err;

    memset(t, 0, sizeof(*t));
    t->comm = comm;
    t->cfg = cfg;
    t->P = hpml_comm_size(comm);
    t->rank = hpml_comm_rank(comm);
    if ((err = make_model(t, a, &lay)) != 0)
        return err;
    la = (nn_layout_args_t){
        .comm = comm, .m = t->m, .o = t->o, .cfg = cfg, .gb = a->gb, .lb = a->lb};
    if ((err = lay->open(&la, &t->layout)) != 0)
        return err;
    {
        /* The labels and ids of the rank's samples: its block, or the layout's part. */
        const nn_layout_t *l = t->layout;
        size_t rows = l->nparts > 0 ? a->gb / (size_t)l->nparts + 1 : a->lb;

        t->y = malloc(rows * sizeof(int32_t));
        t->ids = malloc(rows * sizeof(uint64_t));
    }
    if (!t->y || !t->ids)
        return HPML_ERR_NOMEM;
    hpml_model_init(t->m, cfg->seed);
    if (cfg->init_params != NULL) {
        if (cfg->init_count != t->m->nparams)
            return hpml_set_error(HPML_ERR_INVAL,
                                  "train: the initial parameters are %zu values, the model has %zu",
                                  cfg->init_count, t->m->nparams);
        memcpy(t->m->params, cfg->init_params, cfg->init_count * sizeof(float));
    }
    hpml_rng_init(&t->st.rng, cfg->seed, 0x44524f50ull); /* "DROP" */
    t->st.seed = cfg->seed;
    t->st.batch = a->gb;
    t->st.samples = a->samples;
    t->st.shard_ranks = a->shard_ranks;
    t->st.opt_kind = (uint32_t)cfg->opt.kind;
    if (a->resume && (err = resume(t)) != 0)
        return err;
    /* Every rank starts from rank 0's parameters. */
    return hpml_bcast(t->m->params, t->m->nparams, HPML_F32, 0, comm);
}

int hpml__trainer_step(nn_trainer_t *t, const nn_step_t *s, double *loss_sum, size_t *correct)
{
    nn_layout_t *l = t->layout;
    int err;

    *loss_sum = 0;
    *correct = 0;
    hpml_optim_begin(t->o); /* the step counter (Adam's bias correction) */
    if ((err = l->ops->forward(l, s)) != 0 ||
        (err = l->ops->backward(l, s, loss_sum, correct)) != 0)
        return err;
    return l->ops->update(l, s);
}

int hpml__trainer_gather(nn_trainer_t *t)
{
    return t->layout->ops->gather(t->layout, 0);
}

/* Every rank's epoch sums gathered, the optimizer's moments and the parameters made whole,
 * rank 0 writes. */
int hpml__trainer_save(nn_trainer_t *t, const nn_ckpt_t *at)
{
    nn_ckpt_t st = *at;
    double mine[3] = {st.loss_sum, st.correct, st.seen};
    double *all = malloc(3 * (size_t)t->P * sizeof(double));
    int err;

    if (all == NULL) /* this rank's failure: the caller's funnel ends the job */
        return hpml_set_error(HPML_ERR_NOMEM, "train: no memory for the checkpoint's sums");
    err = hpml_allgather(mine, all, 3, HPML_F64, t->comm);
    st.nranks = (uint32_t)t->P;
    st.rank_sums = all;
    if (err == 0 && (err = t->layout->ops->gather(t->layout, 1)) == 0)
        err = hpml__ckpt_save(t->comm, t->cfg->checkpoint_dir, t->m, t->o, &st);
    free(all);
    return err;
}

void hpml__trainer_close(nn_trainer_t *t, int err)
{
    if (t->layout)
        t->layout->ops->close(t->layout, err);
    hpml_optim_destroy(t->o);
    hpml_model_destroy(t->m);
    free(t->y);
    free(t->ids);
    memset(t, 0, sizeof(*t));
}
