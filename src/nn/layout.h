/*
 * The trainer's private interfaces: how one training step is spread over the ranks.
 *
 * A layout (one file each: layout_data.c, layout_split1.c, layout_split2.c) owns which
 * layers this rank computes and for which samples, how a step's forward and backward cross
 * the ranks, how the gradients are summed and the optimizer update applied, how the
 * parameters are gathered whole (evaluation, checkpoints, the model returned), and its own
 * buffers. The trainer (trainer.c) owns the model, the optimizer, the data position, the
 * RNG, checkpoints and reporting, and runs a step as forward, backward, update through the
 * layout's table of functions: the pattern of the collectives' algorithm table and the
 * benchmark cases (src/bench/bench_internal.h). docs/nn.md says how to add a layout.
 *
 * Shared pieces: the gradient buckets (buckets.c), what the two split layouts share
 * (split.c), and the two transports of the two-layer split's exchanges (exchange_msg.c,
 * exchange_shm.c).
 */
#ifndef HPML_NN_LAYOUT_H
#define HPML_NN_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "hpml/comm.h"
#include "nn/nn_internal.h"

/* ---- one step ----------------------------------------------------------------------- */

/* A step as the layouts see it: global batch s of gb samples, of which this rank's are
 * rows [b0, b0 + nl) (hpml_io_partition of gb). The trainer has put the inputs in the
 * layout's x: this rank's nl samples, or all gb when the layout asks for the whole batch. */
typedef struct nn_step {
    size_t gb, nl;
    const int32_t *y;    /* nl labels */
    const uint64_t *ids; /* nl global sample indices (dropout masks), or NULL: 0, 1, ... */
    uint64_t key;        /* dropout key of the step */
    double lr;           /* learning rate of the step */
} nn_step_t;

/* ---- layouts ------------------------------------------------------------------------ */

typedef struct nn_layout nn_layout_t;

/* What a layout is opened with: the largest global batch gb and the largest share lb of
 * one rank; the model and optimizer stay the trainer's (borrowed until close). */
typedef struct nn_layout_args {
    hpml_comm_t *comm;
    hpml_model_t *m;
    hpml_optim_t *o;
    const hpml_train_config_t *cfg;
    size_t gb, lb;
} nn_layout_args_t;

typedef struct nn_layout_ops {
    const char *name; /* for messages and logs */
    int split;        /* layers split across the ranks (hpml_train_layout's answer) */
    /* Make the layout (collective: a layout may allocate registered buffers). */
    int (*open)(const nn_layout_args_t *a, nn_layout_t **out);
    /* The step's forward pass: this rank's part of it, and the exchanges it needs. */
    int (*forward)(nn_layout_t *l, const nn_step_t *s);
    /* Loss and backward: *loss_sum and *correct over this rank's samples; the gradients
     * this rank needs are final (a rank without samples zeroes its own). */
    int (*backward)(nn_layout_t *l, const nn_step_t *s, double *loss_sum, size_t *correct);
    /* The gradients summed over the ranks and the optimizer update of the step applied to
     * what this rank owns (the trainer has begun the optimizer step). */
    int (*update)(nn_layout_t *l, const nn_step_t *s);
    /* Every parameter (and with moments, every optimizer moment) whole and current on
     * every rank: before an evaluation, a checkpoint and the end of training. Collective. */
    int (*gather)(nn_layout_t *l, int moments);
    /* Free everything. err != 0: the run failed, maybe on this rank alone, so nothing
     * collective (registered buffers stay until the communicator is destroyed). */
    void (*close)(nn_layout_t *l, int err);
    /* Optional (NULL: none): the per-stage figures of the steps since the last call into
     * out (*n entries, at most 64), then start counting anew. Collective. */
    int (*stages)(nn_layout_t *l, hpml_stage_report_t *out, int *n, double *theory);
} nn_layout_ops_t;

/* The part of every layout the trainer reads; a layout's own struct starts with it. */
struct nn_layout {
    const nn_layout_ops_t *ops;
    float *x;        /* where the trainer puts a step's inputs */
    int whole_batch; /* x takes the whole global batch (gb rows), else this rank's nl */
    double exposed;  /* seconds spent waiting for the other ranks (the trainer resets it) */
    /* Which samples of a step the trainer gives this rank: with nparts 0, its own block of
     * the global batch (hpml_io_partition over the ranks); otherwise block `part` of
     * nparts, with no inputs (skip_x) or no labels (skip_y) where the rank needs none. */
    int nparts, part, skip_x, skip_y;
    int top_layer; /* 0: this rank updates every layer; else only the layers below it */
};

extern const nn_layout_ops_t hpml__layout_data, hpml__layout_split1, hpml__layout_split2,
    hpml__layout_pipe;

/* The pipeline's stages for c (c->stages > 1) on model m and P ranks with lb samples per
 * rank: bounds[0..S] the layer bounds (bounds may be NULL: only the checks; with "auto",
 * any partition within the memory limit, which pipe_open replaces by the measured one).
 * HPML_ERR_INVAL with a message when the pipeline cannot be made (more stages than layers,
 * ranks not a multiple of the stages, a partition list that does not add up, a memory
 * limit no partition meets, another layout asked for...). Local, the same verdict on every
 * rank. layout_pipe.c. */
int hpml__pipe_plan(const hpml_train_config_t *c, const hpml_model_t *m, int P, size_t lb,
                    int *bounds);

/* Contiguous stages of L layers minimising the slowest stage: cost[l] the time of layer l,
 * mem[l] its bytes (parameters, gradients, state) and act[l] its activation bytes per kept
 * micro-batch; edge[i] (i = 0..L, edge[0] = edge[L] = 0) the bytes a stage that starts or
 * ends at layer i holds for its messages there; stage s keeps keep[s] micro-batches. Every
 * stage gets at least one layer and at most limit bytes (0: no limit). bounds[0..S];
 * *slowest the slowest stage's cost. Exact (dynamic programming over the stages x layer
 * prefixes); ties go to the earliest cut. HPML_ERR_INVAL when no partition meets the limit
 * (or S > L). Pure, layout_pipe.c. */
int hpml__pipe_balance(const double *cost, const double *mem, const double *act, const double *edge,
                       int L, int S, const int *keep, double limit, int *bounds, double *slowest);
/* The bytes of model m's parameters, gradients and optimizer state under cfg, and its
 * activations for a batch of n (hpml_model_reserve's buffers). */
double hpml__model_bytes(const hpml_train_config_t *c, const hpml_model_t *m, size_t n);

/* The layout for model m on P ranks with lb samples per rank (replicated: every rank can
 * read every sample): c->parallel and c->split_layers, or the cheaper where they leave the
 * choice (layout.c, docs/nn.md). HPML_ERR_INVAL with a message when a layout that was asked
 * for cannot be used. Local. */
int hpml__layout_pick(const hpml_train_config_t *c, const hpml_model_t *m, int P, int replicated,
                      size_t lb, const nn_layout_ops_t **out);

/* ---- gradient buckets (buckets.c) ---------------------------------------------------- */

typedef struct nn_buckets nn_buckets_t;

/* The buckets over parameters [lo, nparams) of a, each allreduced (with the sharded update
 * an apply whose function is the optimizer update) once backward has finished its
 * layers. */
int hpml__buckets_open(const nn_layout_args_t *a, size_t lo, nn_buckets_t **out);
void hpml__buckets_close(nn_buckets_t *b);
/* Before backward: the step's learning rate (the sharded update applies it in the
 * progress thread while backward runs). */
void hpml__buckets_begin(nn_buckets_t *b, double lr);
/* hpml_grad_ready_fn for hpml_model_backward, ctx the buckets: starts the buckets whose
 * gradients are final. */
void hpml__buckets_ready(void *ctx, size_t offset);
/* After backward: start the rest, wait for every bucket (the seconds go to *exposed), then
 * the replicated update of [lo, nparams). */
int hpml__buckets_sync(nn_buckets_t *b, double lr, double *exposed);
/* Sharded update: every rank gets every moment of [lo, nparams). Collective. */
int hpml__buckets_gather_moments(nn_buckets_t *b);

/* ---- what the split layouts share (split.c) ----------------------------------------- */

/* Layer 0, a dense layer, split by outputs: rank p owns outputs [own[p], own[p+1]) and
 * computes them for every sample of the global batch. */
typedef struct nn_split {
    nn_layout_t base;
    hpml_comm_t *comm;
    hpml_model_t *m;
    hpml_optim_t *o;
    int P, me;
    size_t in, out;            /* layer 0: inputs and outputs per sample */
    size_t *own;               /* P + 1: rank p owns outputs [own[p], own[p+1]) of layer 0 */
    size_t *rows;              /* P + 1: rank p has samples [rows[p], rows[p+1]) of the step */
    size_t nl;                 /* rows[me + 1] - rows[me] */
    size_t *sc, *sd, *rc, *rd; /* all-to-all counts and displacements */
    float *x;                  /* (gb, in): the inputs of the whole global batch (base.x) */
    float *y;                  /* (gb, no): this rank's outputs of layer 0 (after the ReLU) */
    float *g;                  /* (gb, no): their gradients */
    nn_buckets_t *bk;          /* the layers above, when their gradients are allreduced */
} nn_split_t;

/* Buffers for global batches of up to a->gb samples. */
int hpml__split_open(nn_split_t *sp, const nn_layout_args_t *a);
void hpml__split_close(nn_split_t *sp);
/* This step's rows of each rank (sp->rows, sp->nl). */
void hpml__split_rows(nn_split_t *sp, size_t gb);
/* v + bounds[p] * w .. v + bounds[p+1] * w is rank p's: each rank's part to every rank
 * (an all-gather through one all-to-all). Collective. */
int hpml__split_share(nn_split_t *sp, float *v, const size_t *bounds, size_t w);
/* The optimizer update of this rank's rows of layer 0 (weights, then biases). */
void hpml__split_update_rows(nn_split_t *sp, double lr);
/* v laid out as the parameters: every rank's rows of layer 0 to every rank. Collective. */
int hpml__split_gather_rows(nn_split_t *sp, float *v);
/* The time of an exchange into the layout's exposed seconds: t0 = hpml_time() before it. */
int hpml__split_waited(nn_split_t *sp, double t0, int err);

/* ---- the two-layer split's exchange transports --------------------------------------- */

/*
 * The exchanges of two layers split: every rank holds a part (gb, w) of every sample's
 * sums, which the sample's rank adds up (parts); every rank computes its samples' rows of
 * a (gb, w) matrix that every rank then needs whole (rows); and, where the transport can
 * carry them, the gradients of the parameters above the split, summed by every rank
 * (tail). Through messages (exchange_msg.c) or through the node's shared memory
 * (exchange_shm.c), where an exchange is one node sync after the writes.
 */
typedef struct nn_exchange nn_exchange_t;

typedef struct nn_exchange_ops {
    /* Every rank has written its part of every sample's sums at parts: each rank can read
     * every part of its own rows. Collective. */
    int (*send_parts)(nn_exchange_t *x);
    /* Rank p's part of this rank's rows (nl of them, from row r0). */
    const float *(*part)(nn_exchange_t *x, int p);
    /* Every rank has written its rows of rows: every rank can read it whole. Collective. */
    int (*share_rows)(nn_exchange_t *x);
    /* With a tail: g (n) = the sum over the ranks, in rank order, of their tails. */
    void (*sum_tail)(nn_exchange_t *x, float *g, size_t n);
    void (*close)(nn_exchange_t *x, int err);
} nn_exchange_ops_t;

struct nn_exchange {
    const nn_exchange_ops_t *ops;
    nn_split_t *sp;
    size_t w;         /* values per sample */
    float *parts;     /* (gb, w): where this rank writes its part of every sample's sums */
    float *rows;      /* (gb, w): the matrix whose rows each rank computes for its samples */
    float *tail;      /* where this rank leaves its gradients above the split, or NULL: the
                       * transport does not carry them */
    const char *desc; /* for the log: "through messages", ... */
};

/* A transport for sp's exchanges of w values per sample, for global batches of up to gb
 * samples. Shared memory (tail_bytes > 0: room for a tail of that many bytes) is possible
 * only where every rank is on one node; *out is NULL when it is not (or not every rank got
 * its buffers: agreed), and the caller takes messages. Both collective. */
int hpml__exchange_shm_open(nn_split_t *sp, size_t w, size_t gb, size_t tail_bytes,
                            nn_exchange_t **out);
int hpml__exchange_msg_open(nn_split_t *sp, size_t w, size_t gb, size_t lb, nn_exchange_t **out);

#endif
