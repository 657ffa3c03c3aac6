/*
 * hpml nn: a small, fast float32 deep-learning engine (NCHW tensors; dense, conv2d,
 * max-pool, ReLU, flatten, dropout, softmax cross-entropy), optimizers (SGD with
 * momentum, Adam, weight decay, step/cosine schedules) and a data-parallel trainer over
 * hpml's communicator (bucketed, overlapped, optionally fp16/bf16-compressed gradient
 * allreduce; checkpoint/restart).
 *
 * Models are written in a text spec, layers separated by '|':
 *     conv 32 5x5 pad2 relu | pool 2 | conv 64 5x5 relu | pool 2 | dense 128 relu | dense 10
 * Layer words:
 *     dense N [relu]                       fully connected, N outputs
 *     conv N KxK [sS] [padP] [relu]        2-D convolution, N output channels ("conv N K"
 *                                          means KxK; "pad same" keeps the size for s1)
 *     pool K [sS]                          max-pool KxK, stride S (default K)
 *     relu | flatten | dropout P
 * A malformed spec is HPML_ERR_FORMAT with hpml_last_error() naming the column and what
 * was expected.
 *
 * All parameters of a model live in one contiguous float buffer in layer order (each
 * layer's weights then bias), gradients in a second buffer with the same layout, so an
 * optimizer or an allreduce sees one flat vector. The model object is not thread-safe.
 */
#ifndef HPML_NN_H
#define HPML_NN_H

#include <stddef.h>
#include <stdint.h>

#include "hpml/comm.h"
#include "hpml/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- model -------------------------------------------------------------------- */

typedef struct hpml_model hpml_model_t;

/* Parse `spec` for inputs of shape (in_c, in_h, in_w) and allocate the parameters
 * (zero; see hpml_model_init). Errors: HPML_ERR_FORMAT (spec, with column), INVAL. */
int hpml_model_create(const char *spec, int in_c, int in_h, int in_w, hpml_model_t **out);
void hpml_model_destroy(hpml_model_t *m);

/* He initialisation for layers followed by ReLU, Glorot otherwise; biases zero. The same
 * seed gives the same parameters on every machine. */
void hpml_model_init(hpml_model_t *m, uint64_t seed);

size_t hpml_model_num_params(const hpml_model_t *m);
float *hpml_model_params(hpml_model_t *m); /* owned by the model */
float *hpml_model_grads(hpml_model_t *m);
/* Values per sample at the input and at the output (the number of classes). */
size_t hpml_model_input_size(const hpml_model_t *m);
/* The input shape per sample (channels, height, width). */
void hpml_model_input_shape(const hpml_model_t *m, int *c, int *h, int *w);
size_t hpml_model_output_size(const hpml_model_t *m);
/* The spec as parsed (canonical form, e.g. "conv 32 5x5 s1 pad2 relu | ..."). */
const char *hpml_model_spec(const hpml_model_t *m);
/* A one-line-per-layer description with shapes and parameter counts into buf. */
void hpml_model_describe(const hpml_model_t *m, char *buf, size_t len);
/* FLOPs of one forward pass of one sample (multiply-add = 2). */
double hpml_model_flops(const hpml_model_t *m);

/* Preallocate activations for batches up to max_batch (forward/backward never allocate
 * afterwards). Called implicitly by forward with a larger batch. */
int hpml_model_reserve(hpml_model_t *m, size_t max_batch);

/*
 * Forward pass of n samples x (n * input_size floats, NCHW). training=1 applies
 * dropout; its mask for sample i is a hash of (dropout_key, ids[i], layer, element), so
 * it does not depend on how a batch is split across ranks (ids may be NULL: 0..n-1).
 * *logits points into the model (n * output_size), valid until the next call.
 */
int hpml_model_forward(hpml_model_t *m, const float *x, size_t n, int training, const uint64_t *ids,
                       uint64_t dropout_key, const float **logits);

/* Called during backward when the gradients of parameters [offset, num_params) are
 * final and backward no longer reads those parameters, so they may be updated (layers
 * finish in reverse order). */
typedef void (*hpml_grad_ready_fn)(void *ctx, size_t offset);

/*
 * Softmax cross-entropy on the logits of the last forward (training mode) and backward.
 * The gradient is d(sum of losses)/d(params) * scale (scale = 1/global batch makes a
 * sum over ranks the global mean). Gradients are overwritten, not accumulated.
 * *loss_sum = sum of per-sample losses, *correct = samples whose argmax is the label.
 * labels in [0, output_size) else HPML_ERR_INVAL.
 */
int hpml_model_backward(hpml_model_t *m, const int32_t *labels, float scale,
                        hpml_grad_ready_fn ready, void *ctx, double *loss_sum, size_t *correct);

/* Loss and accuracy only (no backward), on the logits of the last forward. */
int hpml_model_loss(const hpml_model_t *m, const int32_t *labels, double *loss_sum,
                    size_t *correct);

/* ---- optimizer ---------------------------------------------------------------- */

typedef enum { HPML_OPT_SGD = 0, HPML_OPT_ADAM, HPML_OPT_ADAMW } hpml_opt_kind_t;
typedef enum { HPML_SCHED_CONST = 0, HPML_SCHED_STEP, HPML_SCHED_COSINE } hpml_sched_t;

typedef struct hpml_opt_config {
    hpml_opt_kind_t kind;
    double lr;           /* base learning rate */
    double momentum;     /* SGD (0.9 typical; 0 = plain SGD); nesterov not supported */
    double beta1, beta2; /* Adam (0.9, 0.999) */
    double eps;          /* Adam (1e-8) */
    double weight_decay; /* L2 (SGD, Adam) or decoupled (AdamW) */
    hpml_sched_t sched;
    double step_gamma; /* step: lr *= gamma every step_every epochs */
    int step_every;
    int warmup_steps; /* linear warm-up over the first steps (0 = none) */
} hpml_opt_config_t;

/* Defaults: SGD lr 0.05 momentum 0.9, Adam betas, eps 1e-8, no decay, constant. */
void hpml_opt_config_default(hpml_opt_config_t *c);
int hpml_opt_parse(const char *name, hpml_opt_kind_t *out);
int hpml_sched_parse(const char *name, hpml_sched_t *out);

/* The learning rate at `step` (0-based) of `total_steps`, `steps_per_epoch`. */
double hpml_opt_lr(const hpml_opt_config_t *c, long step, long total_steps, long steps_per_epoch);

/* Optimizer state: n floats per moment, zero-initialised. */
typedef struct hpml_optim hpml_optim_t;
int hpml_optim_create(const hpml_opt_config_t *c, size_t n, hpml_optim_t **out);
void hpml_optim_destroy(hpml_optim_t *o);
/* One update of params with grads at learning rate lr (t = steps done so far + 1):
 * hpml_optim_begin, then hpml_optim_update of all n parameters. */
void hpml_optim_step(hpml_optim_t *o, float *params, const float *grads, double lr);
/* The same in pieces, for an update split between threads or ranks: begin advances the
 * step counter once per step; update then computes parameters [off, off + count) from
 * their current values `params` (params[i] is parameter off + i) and gradients `grads`
 * into `out` (which may equal params or grads, element for element; otherwise none
 * overlap), with the moments of the same parameters. Each
 * parameter gets one update per step; the moments of parameters this process does not
 * update go stale (hpml_train gathers them for checkpoints). */
void hpml_optim_begin(hpml_optim_t *o);
void hpml_optim_update(hpml_optim_t *o, size_t off, size_t count, const float *params,
                       const float *grads, float *out, double lr);
/* State for checkpoints: number of moment buffers (0, 1 or 2), each n floats, and the
 * step counter. */
int hpml_optim_nstate(const hpml_optim_t *o);
float *hpml_optim_state(hpml_optim_t *o, int i);
long *hpml_optim_t_ptr(hpml_optim_t *o);

/* ---- data --------------------------------------------------------------------- */

/* A labelled image data set in memory: n samples of c*h*w floats (already scaled and
 * normalised), int32 labels. */
typedef struct hpml_dataset {
    size_t n;      /* samples held */
    size_t offset; /* index of the first held sample in the file */
    size_t total;  /* samples in the file */
    int c, h, w;
    int classes;       /* 1 + largest label in the file's held part (at least) */
    float *x;          /* n * c*h*w, hpml_malloc'ed */
    int32_t *y;        /* n */
    char source[1024]; /* the images file, for messages ("" when made in memory) */
} hpml_dataset_t;

/*
 * Load images and labels (IDX, .gz or not, or .npy: images (N, ...) of any numeric
 * type, labels (N) or (N,1) integers), rows [begin, end) (end = SIZE_MAX: to the end).
 * Pixels are multiplied by `scale` (1/255 for 8-bit images) then (x - mean) / std.
 * Images of shape (N, H, W) are one channel; (N, C, H, W) from .npy keep C; flat
 * (N, D) npy rows are (1, 1, D) unless D is a square (then 1 x sqrt x sqrt).
 */
int hpml_dataset_load(const char *images, const char *labels, size_t begin, size_t end, float scale,
                      float mean, float std, hpml_dataset_t *out);
void hpml_dataset_free(hpml_dataset_t *d);
/* Mean and standard deviation of all pixels (for normalisation). */
void hpml_dataset_stats(const hpml_dataset_t *d, double *mean, double *std);
/* x = (x - mean) / std in place. */
void hpml_dataset_normalize(hpml_dataset_t *d, float mean, float std);

/* The bundled default data set. */
#define HPML_NN_DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

/* File names of an MNIST-style folder: {train,t10k}-{images-idx3,labels-idx1}-ubyte, with
 * ".gz" when only the compressed file exists. */
typedef struct hpml_data_paths {
    char train_images[1024], train_labels[1024], test_images[1024], test_labels[1024];
} hpml_data_paths_t;
void hpml_data_paths(const char *dir, hpml_data_paths_t *p);

/* How hpml_train_data_load reads a run's data. */
typedef struct hpml_train_data_opts {
    size_t train_limit; /* use the first rows of the training set only (SIZE_MAX: all) */
    size_t test_limit;  /* the same for the test set */
    int shard;          /* each rank loads only its block of the training rows (--shard-data) */
    int normalize;      /* standardise with the training set's mean and standard deviation */
    int stages; /* a pipeline of this many stages (hpml_train_config_t.stages; 0 or 1: none) */
} hpml_train_data_opts_t;

/*
 * The data of a training run, for hpml_train (collective over comm). *train: the training
 * set of paths->train_images and train_labels, its first opts->train_limit rows, whole on
 * every rank, or with opts->shard this rank's block of them (hpml_io_partition); pixels
 * scaled (1/255 for 8-bit images) and, with opts->normalize, standardised with the mean and
 * standard deviation of all those rows (the shards' moments combined over the ranks);
 * train->total is the number of rows used and train->classes covers every rank's labels.
 * With opts->stages = S > 1 (a pipeline; rank p is stage p % S of replica p / S, the
 * layout of hpml_train) only the first stage reads and holds images (train->x NULL on the
 * others) and only the last stage labels (train->y NULL on the others); the other files
 * are not opened. With opts->shard the blocks are the replicas': all stages of replica r
 * hold the same rows, block r of P / S.
 * *test: this rank's block of the first opts->test_limit rows of paths->test_images and
 * test_labels, normalised alike (empty when either path is ""). *mean and *std receive the
 * normalisation (0 and 1 without), for hpml_train_config_t and hpml_model_save.
 * Errors are agreed (hpml_comm_agree): when any rank fails (a file it cannot read, memory),
 * every rank returns an error, the failing ranks their own, the others the lowest failing
 * rank's code with "rank R: <its message>"; train and test are then empty. Free both with
 * hpml_dataset_free.
 */
int hpml_train_data_load(hpml_comm_t *comm, const hpml_data_paths_t *paths,
                         const hpml_train_data_opts_t *opts, hpml_dataset_t *train,
                         hpml_dataset_t *test, float *mean, float *std);

/* The spec of a preset ("mlp": 784-512-256-10, "deep-mlp": 16 x dense 1024, "vgg": four
 * 3x3 convolutions in two pooled blocks, "lenet": LeNet-5, "cnn": the 2-conv
 * network of the issue), or `name` itself when it is not a preset. */
const char *hpml_model_preset(const char *name);

/* The sample order of `epoch` for seed: a permutation of 0..n-1 that depends only on
 * (seed, epoch, n), never on the number of ranks. */
void hpml_shuffle(uint64_t seed, long epoch, size_t n, uint32_t *perm);

/* ---- model files -------------------------------------------------------------- */

/* Save a trained model (spec, input shape, normalisation, parameters, CRC32) via a
 * temporary file, fsync and rename. Not collective: call on one rank. */
int hpml_model_save(const hpml_model_t *m, float mean, float std, const char *path);
/* Load a model file (or an .npz with its hpml_spec: hpml_model_load_npz); mean and std
 * receive the normalisation used in training. A truncated or
 * corrupt file is HPML_ERR_FORMAT with a message naming it; so is a file with a valid
 * checksum but impossible contents: an input shape or spec whose sizes overflow, fewer or
 * more parameters than its spec needs, a NaN or Inf parameter or normalisation
 * ("non-finite parameter"), a std of 0. */
int hpml_model_load(const char *path, hpml_model_t **out, float *mean, float *std);

/* ---- models as NumPy .npz (docs/models.md) ------------------------------------ */

/* Write m as an .npz that np.load and torch read (via a temporary file and rename; not
 * collective): every parameter as a float32 array named as in the state_dict of the
 * equivalent torch.nn.Sequential ("0.weight" (out, in) or (out, in, kh, kw), "0.bias"),
 * and hpml_spec (str), hpml_input_shape (int32 [c, h, w]), hpml_mean and hpml_std
 * (float32 scalars: inputs are scaled to [0, 1] for 8-bit images, then (x - mean) / std),
 * hpml_modules (str: the Sequential, one module a line, see hpml_model_torch_modules).
 * HPML_ERR_UNSUPPORTED for a spec with no Sequential equivalent (a conv or pool after a
 * flat layer), HPML_ERR_IO when writing fails. */
int hpml_model_export_npz(const hpml_model_t *m, float mean, float std, const char *path);
/* Read a model from an .npz written by hpml_model_export_npz, or by numpy.savez /
 * savez_compressed from a PyTorch state_dict. spec NULL: the file's hpml_spec and
 * hpml_input_shape; otherwise the model is spec on (c, h, w) inputs, and a file that
 * names another spec or shape is HPML_ERR_INVAL. Every parameter array must be present
 * with its shape and no other array be there (hpml_* aside): HPML_ERR_FORMAT naming the
 * array. *mean and *std: the file's hpml_mean and hpml_std, or 0 and 1 when it has none
 * (then *has_norm, unless NULL, is 0). Not collective. */
int hpml_model_load_npz(const char *path, const char *spec, int c, int h, int w, hpml_model_t **out,
                        float *mean, float *std, int *has_norm);
/* The modules of m's nn.Sequential, one a line: "Linear IN OUT", "Conv2d IN OUT K STRIDE
 * PAD", "MaxPool2d K STRIDE", "ReLU", "Flatten", "Dropout P". It takes (N, C, H, W)
 * inputs, or (N, C*H*W) when the spec starts with a dense layer. */
int hpml_model_torch_modules(const hpml_model_t *m, char *buf, size_t len);

/* ---- data-parallel trainer ------------------------------------------------------ */

/* How the ranks share the work. DATA: every rank holds the whole model and computes it
 * on its part of each global batch; the gradients are allreduced. HYBRID (on more than
 * one rank, a first layer that is dense, the whole training set on every rank): that
 * first layer is split by outputs, each rank computing its outputs for the whole global
 * batch and updating its rows of the weights, with two all-to-alls of activations and
 * their gradients per step instead of an allreduce of the layer's gradients. When the
 * second layer is dense too it can be split with it, by inputs (each rank's columns take
 * its outputs of the first layer; split_layers below). The layers above are
 * data-parallel (docs/nn.md). AUTO: HYBRID where it moves less data than DATA (samples
 * per rank at most the first layer's inputs), else DATA. */
typedef enum {
    HPML_PARALLEL_AUTO = 0,
    HPML_PARALLEL_DATA,
    HPML_PARALLEL_HYBRID,
    HPML_PARALLEL_PIPELINE /* stages > 1 (below); not a value of hpml_parallel_parse */
} hpml_parallel_t;
/* "auto", "data" or "hybrid"; HPML_ERR_INVAL otherwise. */
int hpml_parallel_parse(const char *name, hpml_parallel_t *out);
const char *hpml_parallel_name(hpml_parallel_t p);

/* Pipeline schedules: GPipe (every micro-batch's forward, then every backward) and 1F1B
 * (after S - 1 - s forwards, stage s alternates one forward and one backward, so it keeps
 * at most min(M, S - s) micro-batches' activations instead of M). */
typedef enum { HPML_SCHEDULE_GPIPE = 0, HPML_SCHEDULE_1F1B } hpml_schedule_t;
/* "gpipe" or "1f1b"; HPML_ERR_INVAL otherwise. */
int hpml_schedule_parse(const char *name, hpml_schedule_t *out);
const char *hpml_schedule_name(hpml_schedule_t s);

typedef struct hpml_train_config {
    const char *spec;
    hpml_opt_config_t opt;
    int epochs;
    size_t batch; /* global batch (split across ranks) */
    uint64_t seed;
    hpml_dtype_t grad_dtype;    /* HPML_F32, HPML_F16 or HPML_BF16 on the wire */
    size_t bucket_bytes;        /* ~25 MiB */
    size_t first_bucket_bytes;  /* ~1 MiB: the first gradients ready go out early */
    int overlap;                /* 1: nonblocking allreduce during backward */
    const char *checkpoint_dir; /* NULL: none */
    long checkpoint_every;      /* steps; 0: at the end of each epoch only */
    int resume;
    long max_steps; /* stop after this many steps in total (0: no limit) */
    size_t eval_batch;
    float mean, std;          /* normalisation applied to the data (saved with the model) */
    int sharded_update;       /* 1: the gradient allreduce updates the parameters (see below) */
    hpml_parallel_t parallel; /* default AUTO */
    int split_layers;         /* hybrid: 1 or 2 layers split, 0 (default): the one that moves less
                                 data; nonzero asks for the hybrid layout */
    /* Start from these parameters instead of the seed's initialisation (NULL: none):
     * init_count floats, the spec's parameter buffer (hpml_model_params of a model of the
     * same spec and input shape, e.g. from hpml_model_load_npz); borrowed during
     * hpml_train. Another count is HPML_ERR_INVAL. */
    const float *init_params;
    size_t init_count;
    /* The progress callback's loss at steps (1-based, within the epoch) that are
     * multiples of this is the mean over every rank's samples of the step (one allreduce of
     * two numbers, made on every rank); at other steps, and with 0 (default), this rank's. */
    long progress_mean_every;
    /* Pipeline (docs/nn.md, "Pipeline layout"): stages > 1 cuts the layers into that many
     * contiguous stages; rank p computes stage p % stages of replica p / stages, each
     * replica's share of a global batch in micro_batches micro-batches, activations and
     * their gradients passed between neighbouring stages, each stage's gradients summed
     * over its replicas. The ranks must be a multiple of stages. */
    int stages;               /* 0 or 1: no pipeline */
    int micro_batches;        /* 0: as many as stages */
    hpml_schedule_t schedule; /* GPipe (default) or 1F1B: the same gradients, bit for bit */
    int recompute;            /* keep only each stage's inputs, forward again in backward */
    const char *partition;    /* NULL or "uniform": layers split evenly; "N,N,...": layers
                                 per stage; "auto": contiguous stages minimising the slowest
                                 one's measured forward + backward time (exact dynamic
                                 programming) within memory_limit */
    const char *trace;        /* pipeline: a Chrome/Perfetto trace (JSON) of the first epoch's
                                 schedule, its first 4096 actions per rank, or NULL */
    size_t memory_limit;      /* bytes per rank (0: none): parameters, gradients, optimizer
                                 state and activations as estimated from the model; a layout
                                 that needs more is refused before training */
} hpml_train_config_t;

void hpml_train_config_default(hpml_train_config_t *c);
/* The layout (HPML_PARALLEL_DATA, HPML_PARALLEL_HYBRID, or HPML_PARALLEL_PIPELINE with
 * c->stages > 1) that hpml_train and
 * hpml_train_synthetic use for c on nranks ranks with inputs (in_c, in_h, in_w),
 * `local_batch` samples per rank, and the whole training set on every rank (replicated
 * = 1; hpml_train_synthetic counts as replicated), and in *split_layers (unless NULL)
 * how many layers it splits (0 for DATA, else 1 or 2). Errors: HPML_ERR_INVAL with a
 * message when c->parallel is HYBRID or c->split_layers is set and cannot be used;
 * HPML_ERR_FORMAT for a bad spec. Local, not collective. */
int hpml_train_layout(const hpml_train_config_t *c, int nranks, int in_c, int in_h, int in_w,
                      int replicated, size_t local_batch, hpml_parallel_t *out, int *split_layers);
/* Does hpml_train update the parameters inside the gradient allreduce on `nranks` ranks
 * (sharded_update set, f32 gradients, more than one rank)? Each rank then updates the
 * parameters whose gradients it reduces (ZeRO-1 style; docs/nn.md). */
int hpml_train_update_is_sharded(const hpml_train_config_t *c, int nranks);

typedef struct hpml_epoch_report {
    int epoch;         /* 1-based */
    long steps;        /* global steps done */
    double train_loss; /* mean over the epoch's samples (all ranks) */
    double train_acc;
    double test_loss, test_acc; /* -1 when there is no test set */
    double seconds;             /* wall time of the epoch's training steps */
    double images_per_s;        /* total over ranks */
    double images_per_s_rank;
    double comm_exposed_s; /* time waiting for gradient allreduces after backward and,
                              in the hybrid layout, in its all-to-alls */
    double elapsed;        /* since training started (excluding evaluation) */
    double lr;
    int last; /* 1 for the final report */
    /* A run resumed from a checkpoint (cfg->resume): the global step and the 1-based
     * epoch it continued from, and the steps it has taken itself (run_steps = steps for
     * a fresh start, and resumed_step -1). */
    long resumed_step;
    int resumed_epoch;
    long run_steps;
    /* The pipeline layout: one entry per stage (its replica 0's figures over the epoch),
     * NULL and 0 otherwise. Valid during the report callback. */
    const struct hpml_stage_report *stages;
    int nstages;
    double bubble_theory; /* (S - 1) / (M + S - 1) */
} hpml_epoch_report_t;

/* One pipeline stage as hpml_train reports it. */
typedef struct hpml_stage_report {
    int first_layer, last_layer;                 /* 0-based, inclusive */
    size_t params;                               /* parameters (and as many gradients) */
    size_t param_bytes, grad_bytes, optim_bytes; /* optimizer state: its moments */
    size_t act_bytes;  /* peak activation memory: the buffers of the micro-batches kept
                          between their forward and backward, counted from their sizes */
    int peak_live;     /* most micro-batches kept at once (their activations, or with
                          recompute their inputs) */
    double step_s;     /* mean seconds per step of the schedule (sends, receives, compute) */
    double busy_s;     /* of which computing */
    double bubble;     /* idle fraction of the schedule: 1 - busy / step */
    size_t data_bytes; /* the training set's images and labels the stage holds (the first
                          stage images only, the last labels only, others none) */
} hpml_stage_report_t;

/* Called on every rank after each epoch (and with progress within epochs when
 * progress != NULL). */
typedef void (*hpml_report_fn)(void *ctx, const hpml_epoch_report_t *r);
typedef void (*hpml_progress_fn)(void *ctx, int epoch, long step, long steps_per_epoch,
                                 double loss);

/*
 * Train data-parallel over comm (collective). `train` is the full training set on every
 * rank (shuffled globally; each rank takes its slice of each global batch), `test` this
 * rank's block of the test set (or NULL), of the training samples' shape (else
 * HPML_ERR_INVAL naming test->source and both shapes, before any collective). On return
 * *model is the trained model (rank 0's
 * parameters broadcast at start, so all ranks agree). Errors as the layers; checkpoint
 * problems are HPML_ERR_IO / HPML_ERR_FORMAT with a message.
 */
int hpml_train(hpml_comm_t *comm, const hpml_train_config_t *cfg, const hpml_dataset_t *train,
               const hpml_dataset_t *test, hpml_report_fn report, hpml_progress_fn progress,
               void *ctx, hpml_model_t **model);

/* Accuracy and mean loss of a model on each rank's block of a data set, summed over
 * ranks (collective). Samples of another shape than the model's input are HPML_ERR_INVAL,
 * naming d->source and both shapes (the same on every rank: the shape is the file's). */
int hpml_evaluate(hpml_comm_t *comm, hpml_model_t *m, const hpml_dataset_t *d, size_t batch,
                  double *loss, double *acc);

/* Synthetic throughput benchmark (Horovod-style): random inputs, `batch` samples per
 * rank, `warmup` then `iters` steps timed. */
typedef struct hpml_synth_result {
    double images_per_s_rank, images_per_s_total;
    double step_s;         /* mean time per step */
    double compute_s;      /* forward + backward + optimizer per step */
    double comm_exposed_s; /* waiting for allreduces after backward (and the hybrid
                              layout's all-to-alls), per step */
    double cpu_s;          /* process CPU time per step (max over ranks): on a loaded
                              machine batch / cpu_s estimates the unloaded speed */
} hpml_synth_result_t;
int hpml_train_synthetic(hpml_comm_t *comm, const hpml_train_config_t *cfg, int in_c, int in_h,
                         int in_w, int iters, int warmup, hpml_synth_result_t *res);

#ifdef __cplusplus
}
#endif

#endif /* HPML_NN_H */
