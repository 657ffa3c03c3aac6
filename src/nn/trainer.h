/*
 * The trainer (trainer.c): a model, its optimizer, where the run is and a layout
 * (layout.h) that spreads each step over the ranks. hpml_train and hpml_train_synthetic
 * (train.c) are loops around hpml__trainer_step.
 */
#ifndef HPML_NN_TRAINER_H
#define HPML_NN_TRAINER_H

#include "nn/layout.h"

typedef struct nn_trainer {
    hpml_comm_t *comm;
    const hpml_train_config_t *cfg;
    int P, rank;
    hpml_model_t *m;
    hpml_optim_t *o;
    nn_layout_t *layout;
    int32_t *y;    /* this rank's labels of a step (lb) */
    uint64_t *ids; /* their global sample indices */
    nn_ckpt_t st;  /* what defines the run and where it is (epoch, step, RNG, the epoch's sums) */
} nn_trainer_t;

typedef struct nn_trainer_args {
    int c, h, w;          /* input shape */
    int classes;          /* labels the model's outputs must cover (0: any) */
    size_t gb, lb;        /* the largest global batch and the largest share of one rank */
    size_t per_rank;      /* the samples per rank that choose the layout */
    int replicated;       /* every rank can read every sample */
    uint64_t samples;     /* the training set's size (checkpoints) */
    uint32_t shard_ranks; /* ranks sharing its rows, 0: the whole set on every rank */
    int resume;           /* continue from the checkpoint in cfg->checkpoint_dir */
} nn_trainer_args_t;

/* Make the model (initialised from cfg->seed, or resumed), its optimizer and its layout;
 * every rank then holds rank 0's parameters. cfg is borrowed until close. Collective. */
int hpml__trainer_open(nn_trainer_t *t, hpml_comm_t *comm, const hpml_train_config_t *cfg,
                       const nn_trainer_args_t *a);
/* One optimizer step on s (inputs in t->layout->x, labels in s->y): forward, backward,
 * update. *loss_sum and *correct over this rank's samples. Collective. */
int hpml__trainer_step(nn_trainer_t *t, const nn_step_t *s, double *loss_sum, size_t *correct);
/* The whole current model on every rank (before an evaluation, and at the end). */
int hpml__trainer_gather(nn_trainer_t *t);
/* Write a checkpoint of the run as `at` says it is (the next step to run). Collective. */
int hpml__trainer_save(nn_trainer_t *t, const nn_ckpt_t *at);
/* Free everything but a model taken out of t (t->m = NULL). err as the layouts' close. */
void hpml__trainer_close(nn_trainer_t *t, int err);

#endif
