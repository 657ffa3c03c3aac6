/* Private structures of the nn layer: the layer list of a model and its buffers. */
#ifndef HPML_NN_INTERNAL_H
#define HPML_NN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hpml/nn.h"

typedef enum { NN_DENSE, NN_CONV, NN_POOL, NN_RELU, NN_FLATTEN, NN_DROPOUT } nn_kind_t;

typedef struct nn_layer {
    nn_kind_t kind;
    int in_c, in_h, in_w;    /* input shape per sample */
    int out_c, out_h, out_w; /* output shape per sample */
    size_t in_size, out_size;
    int k, stride, pad;  /* conv: KxK kernel; pool: KxK window */
    int relu;            /* conv/dense: ReLU fused into the output */
    float p;             /* dropout probability */
    size_t w_off, b_off; /* into the model's params/grads */
    size_t nw, nb;
    /* Buffers sized for max_batch. */
    float *out;   /* n * out_size, owned (NULL for flatten) */
    float *y;     /* the output of the last forward: out, or the input */
    float *col;   /* conv: (C*K*K, n*OH*OW) im2col of the input */
    float *tmp;   /* conv: (OC, n*OH*OW) GEMM output / output gradient */
    int32_t *arg; /* pool: input index of each output's maximum */
    float *mask;  /* dropout: 0 or 1/(1-p) */
    int direct;   /* conv: direct kernel (conv_direct.c) instead of im2col + GEMM */
    float *scr;   /* conv, direct kernel: its scratch (hpml__conv_direct_scratch) */
} nn_layer_t;

struct hpml_model {
    nn_layer_t *layers;
    int nlayers;
    int in_c, in_h, in_w;
    size_t nparams;
    float *params, *grads;
    size_t max_batch, n; /* reserved batch, batch of the last forward */
    const float *input;  /* borrowed during forward/backward */
    float *dbuf[2];      /* gradient ping-pong buffers (max activation size) */
    float *probs;        /* n * classes softmax output */
    int training;
    char *spec;     /* canonical */
    int layer_base; /* a stage's model (hpml__nn_model_stage): the full model's index of
                     * its first layer (dropout masks depend on the layer's index) */
    int borrowed;   /* params and grads point into another model's: not freed */
};

/* The spec word of a layer kind ("dense", "conv", ...). */
const char *hpml__nn_kind_name(nn_kind_t kind);

/* Parse a spec into layers (shapes filled, no buffers). */
int hpml__nn_parse(const char *spec, int in_c, int in_h, int in_w, nn_layer_t **layers,
                   int *nlayers, char **canonical);

/* Direct convolution (conv_direct.c). usable: stride 1, C*K*K <= 32 and the AVX2 path
 * active (HPML_SIMD=portable turns it off). scratch: floats of scratch for a batch of n.
 * forward writes l->out and keeps the padded input in scratch for backward. */
int hpml__conv_direct_usable(const nn_layer_t *l);
size_t hpml__conv_direct_scratch(const nn_layer_t *l, size_t n);
void hpml__conv_direct_forward(const nn_layer_t *l, const float *w, const float *b, const float *x,
                               size_t n, float *scratch);
void hpml__conv_direct_backward(const nn_layer_t *l, const float *w, const float *dy, size_t n,
                                float *dw, float *db, float *dx, float *scratch);
/* Tests: use (on = 1, where usable) or avoid (on = 0) the direct kernel in every conv. */
void hpml__nn_set_conv_direct(hpml_model_t *m, int on);

/* Forward from layer `first` (0: the whole model) of n samples whose input to that layer
 * is x (layer first-1's output, borrowed until backward), as hpml_model_forward. */
int hpml__nn_forward_from(hpml_model_t *m, int first, const float *x, size_t n, int training,
                          const uint64_t *ids, uint64_t key, const float **logits);
/* Backward down to layer `stop` (0: the whole model, as hpml_model_backward). With
 * stop > 0, *dx_out is the gradient of layer stop's input (n rows, in the model's
 * buffers until the next call), and the layers below keep their old gradients. */
int hpml__nn_backward_to(hpml_model_t *m, int stop, const int32_t *labels, float scale,
                         hpml_grad_ready_fn ready, void *ctx, double *loss_sum, size_t *correct,
                         const float **dx_out);
/* Outputs [o0, o1) of dense layer li for n samples x: y (n, o1-o0) = x w[o0:o1]^T + b,
 * with the layer's ReLU. */
void hpml__nn_dense_rows_forward(const hpml_model_t *m, int li, const float *x, size_t n, size_t o0,
                                 size_t o1, float *y);
/* Their backward: g (n, o1-o0), the gradient of y, goes through the ReLU in place; the
 * gradients of w[o0:o1] and b[o0:o1] are overwritten (rows o0..o1 of the layer's). */
void hpml__nn_dense_rows_backward(hpml_model_t *m, int li, const float *x, size_t n, size_t o0,
                                  size_t o1, const float *y, float *g);

/* Dense layer li split by inputs (the layer above hpml__nn_dense_rows_*'s, whose outputs
 * [i0, i1) are its inputs [i0, i1)): z (n, out) = x (n, i1-i0) w[:, i0:i1]^T, the part of
 * the pre-activations those inputs give, no bias or ReLU. */
void hpml__nn_dense_cols_forward(const hpml_model_t *m, int li, const float *x, size_t n, size_t i0,
                                 size_t i1, float *z);
/* Where the caller puts the summed pre-activations of layer li's samples (its output
 * buffer, room for the reserved batch); hpml__nn_dense_finish_forward then adds the bias
 * and applies the ReLU to n of them, and backward reads them as the layer's output. */
float *hpml__nn_dense_sums(hpml_model_t *m, int li);
void hpml__nn_dense_finish_forward(hpml_model_t *m, int li, size_t n);
/* The ReLU and bias part of layer li's backward for those n samples: g (n, out) = dy
 * through the ReLU; b's gradient (overwritten) = the column sums of g. */
void hpml__nn_dense_act_backward(hpml_model_t *m, int li, const float *dy, size_t n, float *g);
/* The inputs [i0, i1) part of layer li's backward, g (n, out) being the gradient of the
 * pre-activations and x (n, i1-i0) those inputs: the gradient of w[:, i0:i1] (those
 * columns of every row, overwritten) and dx (n, i1-i0) = g w[:, i0:i1]. */
void hpml__nn_dense_cols_backward(hpml_model_t *m, int li, const float *x, size_t n, size_t i0,
                                  size_t i1, const float *g, float *dx);

/* Layers [l0, l1) of full as a model of their own (a pipeline stage): its input is layer
 * l0's, its parameters and gradients are full's (borrowed: full must outlive it), and its
 * dropout masks are full's. */
int hpml__nn_model_stage(hpml_model_t *full, int l0, int l1, hpml_model_t **out);
/* Backward of a pipeline stage's model over the last forward's n samples: from the loss
 * of labels (scaled as hpml_model_backward's; *loss_sum and *correct set) or, with labels
 * NULL, from the given gradient of the output dy (n, output size); each layer's gradients
 * overwritten; with want_dx, *dx_out is the gradient of the input (n rows, in the model's
 * buffers until the next call). */
int hpml__nn_backward_stage(hpml_model_t *m, const int32_t *labels, float scale, const float *dy,
                            int want_dx, double *loss_sum, size_t *correct, const float **dx_out);

/* Bytes of the buffers hpml_model_reserve(m, nb) allocates (activations, im2col, masks,
 * the gradient buffers and the softmax output). */
size_t hpml__nn_act_bytes(const hpml_model_t *m, size_t nb);
/* Layer l's part of them (its own buffers, without the model's gradient buffers). */
size_t hpml__nn_layer_act_bytes(const nn_layer_t *l, size_t nb);

/* Data sets (data.c). Does `cols` values per image fit a model's input, and (labels not
 * NULL) does `labels` hold one label for each of the `rows` images of `images`? */
int hpml__dataset_check(const char *images, size_t rows, size_t cols, const char *labels);
/* What hpml__dataset_read reads: the images, the labels. */
#define HPML__DATA_X 1
#define HPML__DATA_Y 2
/* hpml_dataset_load of a set whose shape is known (`rows` images of `cols` values stored
 * as `stored`, checked by hpml__dataset_check), reading only the `parts` asked for: a set
 * without its images or its labels has x or y NULL (and no classes), and its file is never
 * opened. */
int hpml__dataset_read(const char *images, const char *labels, size_t rows, size_t cols,
                       hpml_dtype_t stored, size_t begin, size_t end, float scale, float mean,
                       float std, int parts, hpml_dataset_t *out);

/* CRC32 (zlib) helpers for model and checkpoint files. */
uint32_t hpml__nn_crc(uint32_t crc, const void *p, size_t n);

/* Write len bytes to path through a mkstemp file next to it (io.c: fsync, rename, fsync of
 * the folder; the old file's mode kept). */
int hpml__nn_write_atomic(const char *path, const void *buf, size_t len);
/* Read a whole file (malloc'ed into *buf). */
int hpml__nn_read_file(const char *path, unsigned char **buf, size_t *len);

/* A growable byte buffer for serialising files. */
typedef struct {
    unsigned char *p;
    size_t len, cap;
    int err;
} nn_buf_t;
void hpml__nn_put(nn_buf_t *b, const void *p, size_t n);
/* Reading: copy n bytes at *off (bounds-checked); -1 when the file is too short. */
int hpml__nn_get(const unsigned char *p, size_t len, size_t *off, void *dst, size_t n);

/* ---- checkpoints (checkpoint.c; the format is in docs/nn.md) ---- */

/* What a checkpoint holds besides the parameters and the optimizer's moments. */
typedef struct nn_ckpt {
    /* The run: a resumed run must have the same, or it would not continue the same run. */
    uint64_t seed, batch;
    uint64_t samples;     /* in the training set */
    uint32_t shard_ranks; /* ranks that shared the rows (--shard-data), 0: the whole set each */
    uint32_t opt_kind;    /* hpml_opt_kind_t */
    /* Where it is: the next step to run, the dropout RNG before it. */
    int64_t epoch, step_in_epoch, global_step;
    hpml_rng_t rng;
    /* The epoch so far: this rank's sums of the loss, correct answers and samples. */
    double loss_sum, correct, seen;
    double train_time; /* seconds of training steps so far (rank 0's) */
    /* In a file: every rank's three sums (nranks x 3, in rank order), so that a run
     * resumed on as many ranks adds up the epoch exactly as an uninterrupted one. The
     * writer owns what it passes; decode mallocs it (the caller frees). */
    uint32_t nranks;
    double *rank_sums;
} nn_ckpt_t;

/* Serialise a checkpoint into b (appended); 0 or b's error. */
int hpml__ckpt_encode(const hpml_model_t *m, hpml_optim_t *o, const nn_ckpt_t *st, nn_buf_t *b);
/* Parse a checkpoint image of len bytes (path for messages): magic, checksum, version, and
 * that it is of m's spec, input shape and size and of o's number of moments; then fills
 * m's parameters, o's moments and step count, and *st (st->rank_sums malloc'ed: free it).
 * HPML_ERR_FORMAT with a message otherwise (m and o then untouched, nothing to free). Not
 * collective. */
int hpml__ckpt_decode(const char *path, const unsigned char *p, size_t len, hpml_model_t *m,
                      hpml_optim_t *o, nn_ckpt_t *st);
/* Is the saved run the run `now` (samples, batch, seed, data layout, optimizer)?
 * HPML_ERR_INVAL naming the first difference otherwise. */
int hpml__ckpt_check_run(const char *path, const nn_ckpt_t *saved, const nn_ckpt_t *now);
/* Rank 0 writes <dir>/checkpoint.hpml (temporary name, fsync, rename); every rank learns
 * whether it worked. Collective. */
int hpml__ckpt_save(hpml_comm_t *comm, const char *dir, const hpml_model_t *m, hpml_optim_t *o,
                    const nn_ckpt_t *st);
/* Rank 0 reads <dir>/checkpoint.hpml and broadcasts it; every rank decodes the same bytes
 * and checks the run against `now`. Collective; the same verdict on every rank except for
 * a rank out of memory. */
int hpml__ckpt_load(hpml_comm_t *comm, const char *dir, hpml_model_t *m, hpml_optim_t *o,
                    const nn_ckpt_t *now, nn_ckpt_t *st);

#endif
