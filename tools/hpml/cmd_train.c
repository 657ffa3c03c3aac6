/*
 * hpml train: data-parallel training of a model spec on Fashion-MNIST (the bundled
 * default) or any IDX/.npy image data set, or a synthetic throughput benchmark.
 * Parses options, loads the data, calls hpml_train and prints the per-epoch report.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "mlcli.h"
#include "opts.h"
#include "train_pipe.h"
#include "hpml/io.h"
#include "hpml/comm.h"
#include "hpml/nn.h"

#define CMD "train"

/* How the gradients above a hybrid split of nsplit layers travel, or the buckets'
 * allreduces, for the header line. */
static const char *sync_mode(const hpml_train_config_t *cfg, int nsplit, int nranks)
{
    if (cfg->stages > 1) /* docs/nn.md, "Pipeline layout" */
        return "summed per stage after the schedule";
    if (nsplit == 2) /* docs/nn.md, "Hybrid layout" */
        return "summed after the split layers";
    if (nsplit == 1)
        return hpml_train_update_is_sharded(cfg, nranks) ? "in the exchanges"
                                                         : "summed after the split layer";
    return cfg->overlap ? "overlapped" : "blocking";
}

/* The layout and how many layers it splits, for the header line. */
static const char *layout_desc(int nsplit)
{
    return nsplit < 0    ? "pipeline layout"
           : nsplit == 2 ? "hybrid layout (2 layers split)"
           : nsplit == 1 ? "hybrid layout (1 layer split)"
                         : "data layout";
}

typedef struct {
    int json, progress_bar, is_tty;
    double best_acc, t85;
    int rank, size;
    size_t batch;
    long last_drawn;
    FILE *metrics;      /* --metrics FILE on rank 0, or NULL */
    long metrics_every; /* a step line every this many steps (0: epochs only) */
    double t0, t_last;  /* start of training; time of the last step line */
    long step_last;     /* global step of the last step line */
    int resume_said;    /* the "resumed from" line is out */
} report_ctx_t;

/* One epoch as a JSON object (--metrics lines, after "head", and --json's history): the
 * same keys. */
static void epoch_json(FILE *f, const char *head, const hpml_epoch_report_t *r)
{
    int test = r->test_acc >= 0;

    fprintf(f,
            "{%s\"epoch\": %d, \"steps\": %ld, \"train_loss\": %.6f, \"train_accuracy\": %.6f, "
            "\"test_loss\": ",
            head, r->epoch, r->steps, r->train_loss, r->train_acc);
    fprintf(f, test ? "%.6f" : "null", r->test_loss);
    fprintf(f, ", \"test_accuracy\": ");
    fprintf(f, test ? "%.6f" : "null", r->test_acc);
    fprintf(f,
            ", \"seconds\": %.3f, \"images_per_second\": %.1f, \"comm_exposed_seconds\": %.3f, "
            "\"lr\": %.6g, \"elapsed_seconds\": %.3f}",
            r->seconds, r->images_per_s, r->comm_exposed_s, r->lr, r->elapsed);
}

/* A --metrics step line: the loss of the step, the rate since the previous line. */
static void metrics_step(report_ctx_t *c, int epoch, long step, long per_epoch, double loss)
{
    double now = hpml_time(), dt = now - c->t_last;
    long global = (long)(epoch - 1) * per_epoch + step, n = global - c->step_last;

    if (c->metrics == NULL || c->metrics_every <= 0 || step % c->metrics_every != 0 ||
        step == per_epoch)
        return;
    fprintf(c->metrics,
            "{\"event\": \"step\", \"epoch\": %d, \"step_in_epoch\": %ld, "
            "\"steps_per_epoch\": %ld, \"loss\": %.6f, \"images_per_second\": %.1f, "
            "\"elapsed_seconds\": %.3f}\n",
            epoch, step, per_epoch, loss, dt > 0 && n > 0 ? (double)n * (double)c->batch / dt : 0.0,
            now - c->t0);
    fflush(c->metrics);
    c->t_last = now;
    c->step_last = global;
}

static void progress(void *vctx, int epoch, long step, long per_epoch, double loss)
{
    report_ctx_t *c = vctx;
    long pct = per_epoch ? step * 100 / per_epoch : 100;

    if (c->rank != 0)
        return;
    metrics_step(c, epoch, step, per_epoch, loss);
    if (!c->progress_bar)
        return;
    if (pct == c->last_drawn && step != per_epoch)
        return;
    c->last_drawn = pct;
    {
        char bar[41];
        int fill = (int)(pct * 40 / 100);
        memset(bar, '#', (size_t)fill);
        memset(bar + fill, '.', (size_t)(40 - fill));
        bar[40] = '\0';
        fprintf(stderr, "\repoch %d [%s] %3ld%% loss %.4f", epoch, bar, pct, loss);
        if (step == per_epoch)
            fprintf(stderr, "\r%*s\r", 75, "");
        fflush(stderr);
    }
}

static void report(void *vctx, const hpml_epoch_report_t *r)
{
    report_ctx_t *c = vctx;

    if (r->test_acc > c->best_acc)
        c->best_acc = r->test_acc;
    if (c->t85 < 0 && r->test_acc >= 0.85)
        c->t85 = r->elapsed;
    if (c->rank != 0)
        return;
    if (c->metrics != NULL) {
        epoch_json(c->metrics, "\"event\": \"epoch\", ", r);
        fputc('\n', c->metrics);
        fflush(c->metrics);
        c->t_last = hpml_time();
        c->step_last = r->steps;
    }
    if (c->json)
        return;
    if (r->resumed_step >= 0 && !c->resume_said) {
        printf("# resumed from epoch %d, step %ld\n", r->resumed_epoch, r->resumed_step);
        c->resume_said = 1;
    }
    if (r->test_acc >= 0)
        printf("%5d %7ld %9.4f %8.2f%% %9.4f %8.2f%% %8.2f %10.0f %10.0f %8.3f\n", r->epoch,
               r->steps, r->train_loss, 100 * r->train_acc, r->test_loss, 100 * r->test_acc,
               r->seconds, r->images_per_s, r->images_per_s_rank, r->comm_exposed_s);
    else
        printf("%5d %7ld %9.4f %8.2f%% %9s %9s %8.2f %10.0f %10.0f %8.3f\n", r->epoch, r->steps,
               r->train_loss, 100 * r->train_acc, "-", "-", r->seconds, r->images_per_s,
               r->images_per_s_rank, r->comm_exposed_s);
    fflush(stdout);
}

/* Store the last epoch report for the JSON summary. */
typedef struct {
    report_ctx_t base;
    hpml_epoch_report_t last;
    double total_train_s, img_total; /* this run's training time and images */
    int reports;                     /* epochs reported by this run */
    hpml_epoch_report_t *history;    /* rank 0, --json: every epoch of this run */
    size_t nhistory, cap;
    hpml_stage_report_t stages[64]; /* the pipeline's last report */
    int nstages;
    double bubble_theory;
} summary_ctx_t;

static void report_sum(void *vctx, const hpml_epoch_report_t *r)
{
    summary_ctx_t *s = vctx;

    s->last = *r;
    s->last.stages = NULL; /* valid during the call only: copied */
    for (s->nstages = 0; s->nstages < r->nstages && s->nstages < 64; s->nstages++)
        s->stages[s->nstages] = r->stages[s->nstages];
    s->bubble_theory = r->bubble_theory;
    s->reports++;
    s->total_train_s += r->seconds;
    s->img_total += r->images_per_s * r->seconds;
    if (s->base.rank == 0 && s->base.json && s->nhistory < s->cap)
        s->history[s->nhistory++] = *r;
    report(&s->base, r);
}

/* Can `opt path` be written (hpml_io_writable)? 0, or -1 with "<opt> <why>" in why. */
static int can_create(const char *opt, const char *path, char *why, size_t len)
{
    if (hpml_io_writable(path) == 0)
        return 0;
    snprintf(why, len, "%s %s", opt, hpml_last_error());
    return -1;
}

/* Rank 0 makes the checkpoint folder when it is missing (not for --resume, which needs
 * it) and checks that it can write the checkpoint there. */
static int checkpoint_ok(const char *dir, int resume, char *why, size_t len)
{
    struct stat st;
    char file[1100];

    if (resume && stat(dir, &st) != 0) {
        snprintf(why, len, "--resume: checkpoint folder %s: %s", dir, strerror(errno));
        return -1;
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        snprintf(why, len, "--checkpoint %s: cannot create the folder: %s", dir, strerror(errno));
        return -1;
    }
    snprintf(file, sizeof(file), "%s/checkpoint.hpml", dir);
    return can_create("--checkpoint", file, why, len);
}

/* Would --save or the checkpoint overwrite a data file, or each other? 0, or -1 with why. */
static int outputs_clobber(const hpml_data_paths_t *dp, const char *save, const char *ckdir,
                           const char *metrics, char *why, size_t len)
{
    const cli_path_t in[] = {{"--train-images", dp->train_images},
                             {"--train-labels", dp->train_labels},
                             {"--test-images", dp->test_images},
                             {"--test-labels", dp->test_labels}};
    char ck[1100] = "";

    if (ckdir != NULL)
        snprintf(ck, sizeof(ck), "%s/checkpoint.hpml", ckdir);
    if (cli_clobbers(save, in, 4, why, len) != 0 || cli_clobbers(ck, in, 4, why, len) != 0 ||
        cli_clobbers(metrics, in, 4, why, len) != 0)
        return -1;
    if (metrics != NULL && ((save != NULL && hpml_io_same_file(metrics, save)) ||
                            (ck[0] != '\0' && hpml_io_same_file(metrics, ck)))) {
        snprintf(why, len, "--metrics %s is also written as the model or the checkpoint", metrics);
        return -1;
    }
    if (save != NULL && ck[0] != '\0' && hpml_io_same_file(save, ck)) {
        snprintf(why, len,
                 "--save %s is the checkpoint --checkpoint %s writes; choose another name", save,
                 ckdir);
        return -1;
    }
    return 0;
}

typedef struct {
    hpml_train_config_t cfg;
    hpml_data_paths_t dp;
    const char *model, *save, *data, *files[4]; /* --train-images, -labels, --test-... */
    const char *metrics;                        /* --metrics FILE: JSON lines */
    const char *init_from;                      /* --init-from FILE */
    long metrics_every;
    size_t train_limit, test_limit;
    int no_normalize, shard, synthetic, json, no_progress, progress, no_overlap, replicated;
    long iters, witers;
    int in_c, in_h, in_w;
} opts_t;

static int opt_optimizer(void *dest, const char *arg, const char *shown)
{
    if (hpml_opt_parse(arg, &((opts_t *)dest)->cfg.opt.kind) != 0)
        return cli_usage_error(CMD, "%s: %s", shown, hpml_last_error());
    return 0;
}

/* The learning-rate schedule, or (gpipe, 1f1b) the pipeline's: the names differ. */
static int opt_schedule(void *dest, const char *arg, const char *shown)
{
    hpml_train_config_t *c = &((opts_t *)dest)->cfg;

    if (hpml_schedule_parse(arg, &c->schedule) == 0)
        return 0;
    if (hpml_sched_parse(arg, &c->opt.sched) != 0)
        return cli_usage_error(CMD, "%s must be const, step, cosine, gpipe or 1f1b (got '%s')",
                               shown, arg);
    return 0;
}

static int opt_grad_dtype(void *dest, const char *arg, const char *shown)
{
    hpml_dtype_t *dt = &((opts_t *)dest)->cfg.grad_dtype;

    if (hpml_dtype_parse(arg, dt) != 0 || (*dt != HPML_F32 && *dt != HPML_F16 && *dt != HPML_BF16))
        return cli_usage_error(CMD, "%s must be f32, f16 or bf16 (got '%s')", shown, arg);
    return 0;
}

static int opt_parallel(void *dest, const char *arg, const char *shown)
{
    if (hpml_parallel_parse(arg, &((opts_t *)dest)->cfg.parallel) != 0)
        return cli_usage_error(CMD, "%s must be auto, data or hybrid (got '%s')", shown, arg);
    return 0;
}

static int opt_split(void *dest, const char *arg, const char *shown)
{
    if (strcmp(arg, "1") != 0 && strcmp(arg, "2") != 0)
        return cli_usage_error(CMD, "%s must be 1 or 2 (got '%s')", shown, arg);
    ((opts_t *)dest)->cfg.split_layers = arg[0] - '0';
    return 0;
}

static int opt_input(void *dest, const char *arg, const char *shown)
{
    opts_t *o = dest;
    char extra;

    if (sscanf(arg, "%dx%dx%d%c", &o->in_c, &o->in_h, &o->in_w, &extra) != 3 || o->in_c <= 0 ||
        o->in_h <= 0 || o->in_w <= 0)
        return cli_usage_error(CMD, "%s must be CxHxW like 1x28x28 (got '%s')", shown, arg);
    return 0;
}

#define OFF(field) offsetof(opts_t, field)
static const opt_t options[] = {
    {.kind = OPT_SECTION, .help = "Model:"},
    {.name = "model",
     .letter = 'm',
     .kind = OPT_STRING,
     .off = OFF(model),
     .arg = "SPEC",
     .help = "layers, e.g. 'conv 32 5x5 pad2 relu | pool 2 | dense 10',\n"
             "or a preset: mlp, lenet, cnn, small-cnn, deep-mlp, vgg\n"
             "(default mlp)"},
    {.kind = OPT_SECTION, .help = "Data (default: Fashion-MNIST in " HPML_NN_DEFAULT_DATA "):"},
    {.name = "data",
     .kind = OPT_STRING,
     .off = OFF(data),
     .arg = "DIR",
     .help = "folder with {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]"},
    {.name = "train-images",
     .kind = OPT_STRING,
     .off = OFF(files[0]),
     .arg = "FILE",
     .help = "any IDX or .npy images instead (with --train-labels; no\n"
             "test set unless --test-images and --test-labels too)"},
    {.name = "train-labels",
     .kind = OPT_STRING,
     .off = OFF(files[1]),
     .arg = "FILE",
     .help = "their labels"},
    {.name = "test-images",
     .kind = OPT_STRING,
     .off = OFF(files[2]),
     .arg = "FILE",
     .help = "test images (with --test-labels)"},
    {.name = "test-labels",
     .kind = OPT_STRING,
     .off = OFF(files[3]),
     .arg = "FILE",
     .help = "their labels"},
    {.name = "train-limit",
     .kind = OPT_SIZE,
     .off = OFF(train_limit),
     .arg = "N",
     .help = "use the first N training samples",
     .min = 1,
     .max = 1LL << 40},
    {.name = "test-limit",
     .kind = OPT_SIZE,
     .off = OFF(test_limit),
     .arg = "N",
     .help = "use the first N test samples",
     .min = 1,
     .max = 1LL << 40},
    {.name = "no-normalize",
     .kind = OPT_FLAG,
     .off = OFF(no_normalize),
     .help = "only scale pixels to [0,1] (default: also standardise)"},
    {.name = "shard-data",
     .kind = OPT_FLAG,
     .off = OFF(shard),
     .help = "each rank loads only its block of the training rows and\n"
             "shuffles within it (the model then depends on the rank\n"
             "count; default: every rank holds the set, global shuffle)"},
    {.kind = OPT_SECTION, .help = "Training:"},
    {.name = "epochs",
     .letter = 'e',
     .kind = OPT_INT,
     .off = OFF(cfg.epochs),
     .arg = "N",
     .help = "(default 5)",
     .min = 1,
     .max = 1000000},
    {.name = "batch",
     .letter = 'b',
     .kind = OPT_SIZE,
     .off = OFF(cfg.batch),
     .arg = "N",
     .help = "global batch, split across ranks (default 128)",
     .min = 1,
     .max = 1L << 30},
    {.name = "optimizer",
     .kind = OPT_FUNC,
     .arg = "sgd|adam|adamw",
     .fn = opt_optimizer,
     .help = "(default sgd)"},
    {.name = "lr",
     .kind = OPT_DOUBLE,
     .off = OFF(cfg.opt.lr),
     .arg = "X",
     .help = "learning rate (default 0.05 sgd, 0.001 adam)",
     .dmin = 0,
     .dmax = HUGE_VAL},
    {.name = "momentum",
     .kind = OPT_DOUBLE,
     .off = OFF(cfg.opt.momentum),
     .arg = "X",
     .help = "SGD momentum (default 0.9; below 1: the velocity would grow\n"
             "without bound)",
     .dmin = 0,
     .dmax = 1,
     .open_max = 1},
    {.name = "weight-decay",
     .kind = OPT_DOUBLE,
     .off = OFF(cfg.opt.weight_decay),
     .arg = "X",
     .help = "(default 0)",
     .dmin = 0,
     .dmax = HUGE_VAL},
    {.name = "schedule",
     .kind = OPT_FUNC,
     .arg = "const|step|cosine|gpipe|1f1b",
     .fn = opt_schedule,
     .help = "learning-rate schedule (default const); gpipe|1f1b:\n"
             "the pipeline's (default gpipe; give --schedule twice\n"
             "for both)"},
    {.name = "step-every",
     .kind = OPT_INT,
     .off = OFF(cfg.opt.step_every),
     .arg = "N",
     .help = "step schedule: epochs between steps",
     .min = 0,
     .max = 1L << 30},
    {.name = "step-gamma",
     .kind = OPT_DOUBLE,
     .off = OFF(cfg.opt.step_gamma),
     .arg = "X",
     .help = "step schedule: the factor",
     .dmin = 0,
     .dmax = HUGE_VAL},
    {.name = "warmup",
     .kind = OPT_INT,
     .off = OFF(cfg.opt.warmup_steps),
     .arg = "STEPS",
     .help = "linear warm-up of the learning rate",
     .min = 0,
     .max = 1L << 30},
    {.name = "seed",
     .kind = OPT_U64,
     .off = OFF(cfg.seed),
     .arg = "N",
     .help = "(default 1): initialisation, shuffling, dropout",
     .min = 0,
     .max = 1LL << 62},
    {.name = "grad-dtype",
     .kind = OPT_FUNC,
     .arg = "f32|f16|bf16",
     .fn = opt_grad_dtype,
     .help = "gradient allreduce precision (default f32)"},
    {.name = "bucket-size",
     .kind = OPT_BYTES,
     .off = OFF(cfg.bucket_bytes),
     .arg = "SIZE",
     .help = "gradient bucket (default 25M)",
     .min = 1,
     .max = 1LL << 40},
    {.name = "first-bucket",
     .kind = OPT_BYTES,
     .off = OFF(cfg.first_bucket_bytes),
     .arg = "SIZE",
     .help = "the first bucket, sent early (default 1M)",
     .min = 0,
     .max = 1LL << 40},
    {.name = "no-overlap",
     .kind = OPT_FLAG,
     .off = OFF(no_overlap),
     .help = "allreduce after backward instead of during it"},
    {.name = "replicated-update",
     .kind = OPT_FLAG,
     .off = OFF(replicated),
     .help = "every rank runs the whole optimizer step (default with\n"
             "f32 gradients and >1 rank: each rank updates the\n"
             "parameters it reduces, inside the allreduce or, in\n"
             "the hybrid layout, the exchanges)"},
    {.name = "parallel",
     .kind = OPT_FUNC,
     .arg = "auto|data|hybrid",
     .fn = opt_parallel,
     .help = "hybrid: the first layer, a dense one, split by\n"
             "outputs across the ranks, each computing its outputs\n"
             "for the whole batch (two all-to-alls of activations per\n"
             "step instead of allreducing its weights; needs the\n"
             "training set on every rank); data: every layer\n"
             "data-parallel; auto (default): hybrid where it moves\n"
             "less data (samples per rank <= the layer's inputs)"},
    {.name = "split-layers",
     .kind = OPT_FUNC,
     .arg = "1|2",
     .fn = opt_split,
     .help = "hybrid: split the first layer only, or the second too\n"
             "when it is dense (by inputs: the exchanges carry its\n"
             "partial sums, through shared memory when the ranks\n"
             "share one node, and only the layers above it have\n"
             "gradients to sum); implies --parallel hybrid (default:\n"
             "the one that moves less data)"},
    {.name = "pipeline",
     .kind = OPT_INT,
     .off = OFF(cfg.stages),
     .arg = "S",
     .help = "cut the layers into S stages (rank p: stage p % S of\n"
             "replica p / S; ranks a multiple of S); activations pass\n"
             "between stages, each stage's gradients are summed over\n"
             "its replicas (default 1: no pipeline)",
     .min = 1,
     .max = 64},
    {.name = "micro-batches",
     .kind = OPT_INT,
     .off = OFF(cfg.micro_batches),
     .arg = "M",
     .help = "pipeline: each replica's share of a batch in M\n"
             "micro-batches (default S)",
     .min = 1,
     .max = 8191},
    {.name = "recompute",
     .kind = OPT_FLAG,
     .off = OFF(cfg.recompute),
     .help = "pipeline: keep only each stage's inputs and compute its\n"
             "forward again in backward (less memory, more compute)"},
    {.name = "partition",
     .kind = OPT_STRING,
     .off = OFF(cfg.partition),
     .arg = "uniform|auto|N,N,...",
     .help = "pipeline: layers per stage, evenly (default), listed,\n"
             "or auto: each layer's forward+backward timed, the cut\n"
             "minimising the slowest stage within --memory-limit"},
    {.name = "trace",
     .kind = OPT_STRING,
     .off = OFF(cfg.trace),
     .arg = "FILE",
     .help = "pipeline: write the first epoch's schedule (its first\n"
             "4096 actions per rank) as a Chrome/Perfetto trace"},
    {.name = "memory-limit",
     .kind = OPT_BYTES,
     .off = OFF(cfg.memory_limit),
     .arg = "BYTES",
     .help = "refuse a layout whose parameters, gradients, optimizer\n"
             "state and activations need more per rank (e.g. 512M)",
     .min = 1,
     .max = 1LL << 60},
    {.name = "max-steps",
     .kind = OPT_LONG,
     .off = OFF(cfg.max_steps),
     .arg = "N",
     .help = "stop after N steps in total",
     .min = 0,
     .max = 1LL << 50},
    {.kind = OPT_SECTION, .help = "Checkpoints and output:"},
    {.name = "checkpoint",
     .kind = OPT_STRING,
     .off = OFF(cfg.checkpoint_dir),
     .arg = "DIR",
     .help = "write checkpoints there (created if missing)"},
    {.name = "checkpoint-every",
     .kind = OPT_LONG,
     .off = OFF(cfg.checkpoint_every),
     .arg = "STEPS",
     .help = "(default 0: at the end of each epoch)",
     .min = 0,
     .max = 1LL << 50},
    {.name = "resume",
     .kind = OPT_FLAG,
     .off = OFF(cfg.resume),
     .help = "continue from the checkpoint in --checkpoint DIR"},
    {.name = "init-from",
     .kind = OPT_STRING,
     .off = OFF(init_from),
     .arg = "FILE",
     .help = "start from the parameters of a model file or an .npz\n"
             "(hpml export's, or a PyTorch state_dict's: docs/models.md)\n"
             "and its input normalisation"},
    {.name = "save",
     .kind = OPT_STRING,
     .off = OFF(save),
     .arg = "FILE",
     .help = "save the trained model (for hpml eval / hpml predict)"},
    {.name = "json",
     .kind = OPT_FLAG,
     .off = OFF(json),
     .help = "print a JSON summary instead of the table"},
    {.name = "progress",
     .kind = OPT_FLAG,
     .off = OFF(progress),
     .help = "progress line on stderr even when it is not a terminal\n"
             "(under mpirun the ranks' stderr never is one)"},
    {.name = "no-progress",
     .kind = OPT_FLAG,
     .off = OFF(no_progress),
     .help = "no progress line (default: only when stderr is a terminal)"},
    {.name = "metrics",
     .kind = OPT_STRING,
     .off = OFF(metrics),
     .arg = "FILE",
     .help = "append one JSON line per epoch (and per --metrics-every\n"
             "steps) to FILE, flushed as it goes (docs/nn.md)"},
    {.name = "metrics-every",
     .kind = OPT_LONG,
     .off = OFF(metrics_every),
     .arg = "STEPS",
     .help = "also a --metrics line every STEPS steps (default 0: none)",
     .min = 0,
     .max = 1L << 40},
    {.kind = OPT_SECTION, .help = "Synthetic benchmark (Horovod-style, random data):"},
    {.name = "synthetic",
     .kind = OPT_FLAG,
     .off = OFF(synthetic),
     .help = "--batch is then per rank (default 128)"},
    {.name = "iters",
     .kind = OPT_LONG,
     .off = OFF(iters),
     .arg = "N",
     .help = "timed steps (default 50)",
     .min = 1,
     .max = 1L << 30},
    {.name = "warmup-iters",
     .kind = OPT_LONG,
     .off = OFF(witers),
     .arg = "N",
     .help = "steps before the timed ones (default 10)",
     .min = 0,
     .max = 1L << 30},
    {.name = "input",
     .kind = OPT_FUNC,
     .arg = "CxHxW",
     .fn = opt_input,
     .help = "sample shape (default 1x28x28)"},
    {0},
};
#undef OFF

static const opt_cmd_t command = {
    .name = CMD,
    .usage = "Usage: mpirun -np N hpml train [options]\n\n"
             "Data-parallel training: every rank computes gradients on its part of each global\n"
             "batch; gradient buckets are allreduced (averaged) while backward runs. The first\n"
             "one or two dense layers may instead be split across the ranks (--parallel,\n"
             "--split-layers), or the layers cut into pipeline stages that pass micro-batches'\n"
             "activations to each other (--pipeline, GPipe or 1F1B).\n",
};

/* The files given one by one (--train-*, --test-*) into the data paths. */
static int data_files(opts_t *o)
{
    char *dst[4] = {o->dp.train_images, o->dp.train_labels, o->dp.test_images, o->dp.test_labels};
    int files = 0;

    hpml_data_paths(o->data != NULL ? o->data : HPML_NN_DEFAULT_DATA, &o->dp);
    for (int i = 0; i < 4; i++)
        if (o->files[i] != NULL) {
            snprintf(dst[i], sizeof(o->dp.train_images), "%s", o->files[i]);
            files |= 1 << i;
        }
    /* Files come in pairs (images alone would be paired with the default set's labels),
     * and replace --data rather than mixing with it. */
    if (o->data != NULL && files != 0)
        return cli_usage_error(CMD, "give --data DIR or --train-*/--test-* files, not both");
    if ((files & 3) == 1 || (files & 3) == 2)
        return cli_usage_error(CMD, "--train-images and --train-labels go together");
    if ((files & 12) == 4 || (files & 12) == 8)
        return cli_usage_error(CMD, "--test-images and --test-labels go together");
    if (files == 3) /* training files of their own: no test set unless given one */
        o->dp.test_images[0] = o->dp.test_labels[0] = '\0';
    return 0;
}

/* The spec, on every rank before any collective, so all fail together. */
static int check_spec(const opts_t *o)
{
    hpml_model_t *probe = NULL;
    int err = hpml_model_create(o->cfg.spec, o->in_c, o->in_h, o->in_w, &probe);
    const char *c;
    int col;

    hpml_model_destroy(probe);
    if (err == 0)
        return 0;
    if (err == HPML_ERR_NOMEM) /* this rank's failure (or every rank's), not the spec's */
        return cli_fail_agreed(CMD, err);
    /* Point at the column under the spec. */
    c = strstr(hpml_last_error(), "column ");
    col = c && !strchr(o->cfg.spec, '\n') ? (int)strtol(c + 7, NULL, 10) : 0;
    return cli_usage_error(CMD, "%s\n  %s\n  %*s^", hpml_last_error(), o->cfg.spec,
                           col > 0 ? col - 1 : 0, "");
}

/* A hybrid layout the model or the data cannot take is a usage error too. */
static int check_layout(const opts_t *o)
{
    size_t P = (size_t)cli_size(), per = o->synthetic ? o->cfg.batch : (o->cfg.batch + P - 1) / P;
    hpml_parallel_t lay;
    const char *msg;
    char which[32] = "--parallel hybrid";
    int nsplit;

    if (hpml_train_layout(&o->cfg, (int)P, o->in_c, o->in_h, o->in_w, o->synthetic || !o->shard,
                          per, &lay, &nsplit) == 0)
        return 0;
    msg = hpml_last_error();
    if (o->cfg.stages > 1)
        snprintf(which, sizeof(which), "--pipeline %d", o->cfg.stages);
    else if (o->cfg.memory_limit > 0 && strstr(msg, "--memory-limit") != NULL)
        snprintf(which, sizeof(which), "--memory-limit");
    else if (o->cfg.split_layers != 0)
        snprintf(which, sizeof(which), "--split-layers %d", o->cfg.split_layers);
    return cli_usage_error(CMD, "%s: %s", which, strncmp(msg, "train: ", 7) == 0 ? msg + 7 : msg);
}

static int parse(int argc, char **argv, opts_t *o)
{
    const opt_set_t set = {options, o};
    int rc, operand;

    memset(o, 0, sizeof(*o));
    hpml_train_config_default(&o->cfg);
    o->model = "mlp";
    o->train_limit = o->test_limit = SIZE_MAX;
    o->iters = 50;
    o->witers = 10;
    o->in_c = 1, o->in_h = 28, o->in_w = 28;
    if ((rc = opts_parse(&command, &set, 1, argc, argv, &operand)) != 0)
        return rc;
    if (o->cfg.resume && o->cfg.checkpoint_dir == NULL)
        return cli_usage_error(CMD, "--resume needs --checkpoint DIR");
    if (o->init_from != NULL && o->synthetic)
        return cli_usage_error(CMD, "--init-from trains on data, not with --synthetic");
    if (opts_given("checkpoint-every") && o->cfg.checkpoint_dir == NULL)
        return cli_usage_error(CMD, "--checkpoint-every needs --checkpoint DIR");
    if ((rc = data_files(o)) != 0)
        return rc;
    if (!opts_given("lr") && o->cfg.opt.kind != HPML_OPT_SGD)
        o->cfg.opt.lr = 0.001;
    if (o->no_overlap)
        o->cfg.overlap = 0;
    if (o->replicated)
        o->cfg.sharded_update = 0;
    if (o->cfg.stages <= 1 &&
        (opts_given("micro-batches") || opts_given("recompute") || opts_given("partition") ||
         opts_given("trace") || o->cfg.schedule != HPML_SCHEDULE_GPIPE))
        return cli_usage_error(CMD, "--micro-batches, --recompute, --partition, --trace and "
                                    "--schedule gpipe|1f1b need --pipeline S with S > 1");
    o->cfg.spec = hpml_model_preset(o->model);
    if ((rc = check_spec(o)) != 0)
        return rc;
    return check_layout(o);
}

/* Where the results go, checked on rank 0 before the run, not after it. Agreed. */
static int check_outputs(const opts_t *o, hpml_comm_t *comm)
{
    const hpml_train_config_t *cfg = &o->cfg;
    char why[1200] = "";
    int bad = 0;

    if (hpml_comm_rank(comm) == 0)
        bad = (cfg->checkpoint_dir != NULL &&
               checkpoint_ok(cfg->checkpoint_dir, cfg->resume, why, sizeof(why)) != 0) ||
              (o->save != NULL && can_create("--save", o->save, why, sizeof(why)) != 0) ||
              (cfg->trace != NULL && can_create("--trace", cfg->trace, why, sizeof(why)) != 0) ||
              (!o->synthetic &&
               outputs_clobber(&o->dp, o->save, cfg->checkpoint_dir, o->metrics, why, sizeof(why)));
    return mlcli_agree(CMD, comm, bad, "%s", why);
}

static const char *update_words(const hpml_train_config_t *cfg, int nranks)
{
    return hpml_train_update_is_sharded(cfg, nranks) ? "sharded" : "replicated";
}

/* --synthetic: the Horovod-style benchmark on random data, and its one line. */
static int run_synthetic(const opts_t *o, hpml_comm_t *comm)
{
    const hpml_train_config_t *cfg = &o->cfg;
    int size = hpml_comm_size(comm), nsplit = 0, err;
    hpml_parallel_t lay = HPML_PARALLEL_DATA;
    hpml_synth_result_t r;

    (void)hpml_train_layout(cfg, size, o->in_c, o->in_h, o->in_w, 1, cfg->batch, &lay, &nsplit);
    if ((err = hpml_train_synthetic(comm, cfg, o->in_c, o->in_h, o->in_w, (int)o->iters,
                                    (int)o->witers, &r)) != 0)
        return cli_fail_agreed(CMD, err);
    if (hpml_comm_rank(comm) != 0)
        return CLI_EXIT_OK;
    if (o->json) {
        cli_json_begin(CMD);
        printf(", \"synthetic\": true, \"model\": ");
        hpml_json_string(stdout, cfg->spec);
        printf(", \"ranks\": %d, \"batch_per_rank\": %zu, \"grad_dtype\": \"%s\", "
               "\"overlap\": %s, \"update\": \"%s\", \"parallel\": \"%s\", "
               "\"split_layers\": %d, \"iterations\": %ld, \"warmup\": %ld, "
               "\"step_seconds\": %.6f, \"compute_seconds\": %.6f, "
               "\"comm_exposed_seconds\": %.6f, \"images_per_second_rank\": %.1f, "
               "\"images_per_second\": %.1f, \"cpu_seconds\": %.6f}\n",
               size, cfg->batch, hpml_dtype_name(cfg->grad_dtype), cfg->overlap ? "true" : "false",
               update_words(cfg, size), hpml_parallel_name(lay), nsplit, o->iters, o->witers,
               r.step_s, r.compute_s, r.comm_exposed_s, r.images_per_s_rank, r.images_per_s_total,
               r.cpu_s);
        return CLI_EXIT_OK;
    }
    printf("# hpml train --synthetic: %s\n", cfg->spec);
    printf("# ranks %d, batch %zu per rank, input %dx%dx%d, grad %s, %s, %s update, "
           "%s, %ld iters after %ld warm-up\n",
           size, cfg->batch, o->in_c, o->in_h, o->in_w, hpml_dtype_name(cfg->grad_dtype),
           sync_mode(cfg, nsplit, size), update_words(cfg, size),
           layout_desc(lay == HPML_PARALLEL_PIPELINE ? -1 : nsplit), o->iters, o->witers);
    /* img/cpu_s: images per second of process CPU time, which on a loaded machine
     * estimates the unloaded speed of one rank. */
    printf("# %-6s %12s %12s %12s %14s %14s %14s\n", "ranks", "step_ms", "compute_ms", "comm_ms",
           "img/s/rank", "img/s_total", "img/cpu_s/rank");
    printf("  %-6d %12.3f %12.3f %12.3f %14.0f %14.0f %14.0f\n", size, 1e3 * r.step_s,
           1e3 * r.compute_s, 1e3 * r.comm_exposed_s, r.images_per_s_rank, r.images_per_s_total,
           r.cpu_s > 0 ? (double)cfg->batch / r.cpu_s : 0.0);
    return CLI_EXIT_OK;
}

/* Rank 0: the header of the table, once the data is loaded. */
static void print_header(const opts_t *o, const hpml_dataset_t *train, int have_test, double load_s,
                         int size, int nsplit)
{
    const hpml_train_config_t *cfg = &o->cfg;
    /* A pipeline's replicas share the batch: each of its stages sees the replica's part. */
    const int stages = cfg->stages > 1 ? cfg->stages : 1, shares = size / stages;
    size_t per_lo = cfg->batch / (size_t)shares,
           per_hi = (cfg->batch + (size_t)shares - 1) / (size_t)shares;
    char per[48], unit[64];

    printf("# hpml train: %s\n", cfg->spec);
    printf("# data: %zu training samples %dx%dx%d from %s, %s test samples; loaded in %.2f s\n",
           train->n, train->c, train->h, train->w, o->dp.train_images, have_test ? "with" : "no",
           load_s);
    if (per_lo == per_hi)
        snprintf(per, sizeof(per), "%zu", per_lo);
    else /* the batch does not divide: some ranks take one sample more */
        snprintf(per, sizeof(per), "%zu-%zu", per_lo, per_hi);
    if (stages > 1)
        snprintf(unit, sizeof(unit), "replica of %d stages, %d micro-batches", stages,
                 cfg->micro_batches > 0 ? cfg->micro_batches : stages);
    else
        snprintf(unit, sizeof(unit), "rank");
    printf("# %d rank%s, global batch %zu (%s per %s), %s lr %g%s, %d epoch%s, seed "
           "%llu, grad %s %s, %s update, %s\n",
           size, size == 1 ? "" : "s", cfg->batch, per, unit,
           cfg->opt.kind == HPML_OPT_SGD    ? "sgd"
           : cfg->opt.kind == HPML_OPT_ADAM ? "adam"
                                            : "adamw",
           cfg->opt.lr,
           cfg->opt.sched == HPML_SCHED_COSINE ? " cosine"
           : cfg->opt.sched == HPML_SCHED_STEP ? " step"
                                               : "",
           cfg->epochs, cfg->epochs == 1 ? "" : "s", (unsigned long long)cfg->seed,
           hpml_dtype_name(cfg->grad_dtype), sync_mode(cfg, nsplit, size), update_words(cfg, size),
           layout_desc(nsplit));
    printf("%5s %7s %9s %9s %9s %9s %8s %10s %10s %8s\n", "epoch", "steps", "loss", "train",
           "test_loss", "test", "time_s", "img/s", "img/s/rank", "comm_s");
    fflush(stdout);
}

/* Rank 0: the summary after training. */
static void print_summary(const opts_t *o, const summary_ctx_t *sc, int nsplit, hpml_parallel_t lay)
{
    const hpml_train_config_t *cfg = &o->cfg;
    const hpml_epoch_report_t *r = &sc->last;
    double ips = sc->total_train_s > 0 ? sc->img_total / sc->total_train_s : 0;
    int size = sc->base.size;

    if (sc->reports == 0) { /* a resume of a finished run (hpml_train reports nothing else) */
        if (o->json) {
            cli_json_begin(CMD);
            printf(", \"synthetic\": false, \"model\": ");
            hpml_json_string(stdout, cfg->spec);
            printf(", \"ranks\": %d, \"nothing_to_do\": true, \"saved\": ", size);
            if (o->save)
                hpml_json_string(stdout, o->save);
            else
                printf("null");
            printf("}\n");
        } else {
            printf("# resumed from %s/checkpoint.hpml: its run has finished all %d epoch%s; "
                   "nothing left to train (raise --epochs to train on)\n",
                   cfg->checkpoint_dir, cfg->epochs, cfg->epochs == 1 ? "" : "s");
            if (o->save)
                printf("# model saved to %s\n", o->save);
        }
        return;
    }
    if (o->json) {
        int test = r->test_acc >= 0;

        cli_json_begin(CMD);
        printf(", \"synthetic\": false, \"nothing_to_do\": false, \"model\": ");
        hpml_json_string(stdout, cfg->spec);
        printf(", \"resumed_from\": ");
        if (r->resumed_step >= 0)
            printf("{\"epoch\": %d, \"step\": %ld}", r->resumed_epoch, r->resumed_step);
        else
            printf("null");
        printf(", \"ranks\": %d, \"batch\": %zu, \"epochs\": %d, \"steps\": %ld, "
               "\"steps_this_run\": %ld, "
               "\"train_loss\": %.6f, \"train_accuracy\": %.6f, \"test_loss\": ",
               size, cfg->batch, r->epoch, r->steps, r->run_steps, r->train_loss, r->train_acc);
        cli_json_num(r->test_loss, test);
        printf(", \"test_accuracy\": ");
        cli_json_num(r->test_acc, test);
        printf(", \"best_test_accuracy\": ");
        cli_json_num(sc->base.best_acc, test);
        printf(", \"train_seconds\": %.3f, \"images_per_second\": %.1f, "
               "\"images_per_second_rank\": %.1f, \"time_to_85_seconds\": ",
               sc->total_train_s, ips, ips / size);
        cli_json_num(sc->base.t85, sc->base.t85 >= 0);
        printf(", \"grad_dtype\": \"%s\", \"update\": \"%s\", \"parallel\": \"%s\", "
               "\"split_layers\": %d, \"saved\": ",
               hpml_dtype_name(cfg->grad_dtype), update_words(cfg, size), hpml_parallel_name(lay),
               nsplit);
        if (o->save)
            hpml_json_string(stdout, o->save);
        else
            printf("null");
        if (sc->nstages > 0)
            train_pipe_json(cfg, sc->stages, sc->nstages, sc->bubble_theory);
        printf(", \"history\": [");
        for (size_t i = 0; i < sc->nhistory; i++) {
            printf("%s", i ? ", " : "");
            epoch_json(stdout, "", &sc->history[i]);
        }
        printf("]}\n");
        return;
    }
    /* This run's steps, time and rate (a resumed run's earlier part is not in them). */
    printf("# trained %ld step%s in %.2f s: %.0f images/s total, %.0f per rank", r->run_steps,
           r->run_steps == 1 ? "" : "s", sc->total_train_s, ips, ips / size);
    if (r->resumed_step >= 0)
        printf(" (after the %ld resumed from)", r->resumed_step);
    if (r->test_acc >= 0)
        printf("; final test accuracy %.2f%%", 100 * r->test_acc);
    printf("\n");
    if (sc->base.t85 >= 0)
        printf("# time to 85%% test accuracy: %.2f s\n", sc->base.t85);
    if (sc->nstages > 0)
        train_pipe_text(cfg, sc->stages, sc->nstages, sc->bubble_theory);
    if (o->save)
        printf("# model saved to %s\n", o->save);
}

/* Load the data (the whole training set on every rank, or its block of rows with
 * --shard-data; this rank's block of the test set), train, save, summarise. */
static int run_training(opts_t *o, hpml_comm_t *comm)
{
    const hpml_train_data_opts_t dopt = {.train_limit = o->train_limit,
                                         .test_limit = o->test_limit,
                                         .shard = o->shard,
                                         .normalize = !o->no_normalize,
                                         .stages = o->cfg.stages};
    hpml_dataset_t train = {0}, test = {0};
    hpml_model_t *m = NULL, *init = NULL;
    hpml_parallel_t lay = HPML_PARALLEL_DATA;
    summary_ctx_t sc;
    int size = hpml_comm_size(comm), nsplit = 0, err, rc = CLI_EXIT_FAIL;
    double t0 = hpml_time();

    memset(&sc, 0, sizeof(sc));
    sc.base.json = o->json;
    sc.base.rank = hpml_comm_rank(comm);
    sc.base.size = size;
    sc.base.is_tty = isatty(2);
    sc.base.progress_bar = !o->no_progress && (o->progress || (sc.base.is_tty && !o->json));
    sc.base.metrics_every = o->metrics_every;
    if (o->metrics != NULL)
        o->cfg.progress_mean_every = o->metrics_every; /* step lines: the loss of all ranks */
    if (sc.base.rank == 0 && o->json) {
        sc.cap = (size_t)o->cfg.epochs;
        sc.history = calloc(sc.cap + 1, sizeof(*sc.history));
    }
    /* --metrics is opened for appending on rank 0 before the data is read, so that a path
     * that cannot be written fails at once. */
    err = 0;
    if (sc.base.rank == 0 && o->metrics != NULL &&
        (sc.base.metrics = fopen(o->metrics, "a")) == NULL)
        err = hpml_set_error(HPML_ERR_IO, "--metrics %s: %s", o->metrics, strerror(errno));
    if (sc.base.rank == 0 && o->json && sc.history == NULL)
        err = hpml_set_error(HPML_ERR_NOMEM, "out of memory for the epoch history");
    if (mlcli_check(CMD, comm, err))
        goto out;
    sc.base.t85 = sc.base.best_acc = -1;
    sc.base.last_drawn = -1;
    sc.base.batch = o->cfg.batch;
    err = hpml_train_data_load(comm, &o->dp, &dopt, &train, &test, &o->cfg.mean, &o->cfg.std);
    if (mlcli_check(CMD, comm, err) ||
        (o->init_from != NULL &&
         mlcli_check(CMD, comm, train_init_from(o->init_from, &o->cfg, &train, &test, &init))))
        goto out;
    /* The layout for the data as loaded (hpml_train's batch is at most the set); a spec
     * that the data's shape breaks is hpml_train's error below. */
    (void)hpml_train_layout(&o->cfg, size, train.c, train.h, train.w, !o->shard,
                            ((o->cfg.batch < train.n ? o->cfg.batch : train.n) + (size_t)size - 1) /
                                (size_t)size,
                            &lay, &nsplit);
    if (sc.base.rank == 0 && !o->json)
        print_header(o, &train, test.x != NULL, hpml_time() - t0, size,
                     lay == HPML_PARALLEL_PIPELINE ? -1 : nsplit);
    sc.base.t0 = sc.base.t_last = hpml_time();
    if ((err = hpml_train(comm, &o->cfg, &train, test.x ? &test : NULL, report_sum, progress, &sc,
                          &m)) != 0) {
        /* An error every rank saw (a corrupt checkpoint) is one line and exit 1; one that
         * left the other ranks inside a collective ends the job. */
        rc = cli_fail_agreed(CMD, err);
        goto out;
    }
    err = o->save && sc.base.rank == 0 ? hpml_model_save(m, o->cfg.mean, o->cfg.std, o->save) : 0;
    if (o->save && mlcli_check(CMD, comm, err))
        goto out;
    if (sc.base.rank == 0)
        print_summary(o, &sc, nsplit, lay);
    rc = CLI_EXIT_OK;
out:
    if (sc.base.metrics != NULL && fclose(sc.base.metrics) != 0 && rc == CLI_EXIT_OK) {
        fprintf(stderr, "hpml %s: --metrics %s: %s\n", CMD, o->metrics, strerror(errno));
        rc = CLI_EXIT_FAIL;
    }
    free(sc.history);
    hpml_model_destroy(m);
    hpml_model_destroy(init);
    hpml_dataset_free(&train);
    hpml_dataset_free(&test);
    return rc;
}

int cmd_train(int argc, char **argv)
{
    opts_t o;
    hpml_comm_t *comm = NULL;
    int rc;

    if ((rc = parse(argc, argv, &o)) != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    hpml_blas_set_threads(1);
    if (mlcli_comm_create(CMD, &comm) != 0)
        return CLI_EXIT_FAIL;
    if (check_outputs(&o, comm) != 0)
        rc = CLI_EXIT_FAIL;
    else if (o.synthetic)
        rc = run_synthetic(&o, comm);
    else
        rc = run_training(&o, comm);
    hpml_comm_destroy(comm);
    return rc;
}
