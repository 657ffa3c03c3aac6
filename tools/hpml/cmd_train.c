/*
 * hpml train: data-parallel training of a model spec on Fashion-MNIST (the bundled
 * default) or any IDX/.npy image data set, or a synthetic throughput benchmark.
 * Parses options, loads the data, calls hpml_train and prints the per-epoch report.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "mlcli.h"
#include "hpml/io.h"
#include "hpml/comm.h"
#include "hpml/nn.h"

#define CMD "train"

static void usage(void)
{
    if (cli_rank() != 0)
        return;
    printf(
        "Usage: mpirun -np N hpml train [options]\n\n"
        "Data-parallel training: every rank computes gradients on its part of each global\n"
        "batch; gradient buckets are allreduced (averaged) while backward runs. The first\n"
        "one or two dense layers may instead be split across the ranks (--parallel,\n"
        "--split-layers).\n\n"
        "Model:\n"
        "  -m, --model SPEC         layers, e.g. 'conv 32 5x5 pad2 relu | pool 2 | dense 10',\n"
        "                           or a preset: mlp, lenet, cnn (default mlp)\n"
        "Data (default: Fashion-MNIST in %s):\n"
        "      --data DIR           folder with {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]\n"
        "      --train-images F --train-labels F   any IDX or .npy files instead (both; no\n"
        "                           test set unless --test-images F --test-labels F too)\n"
        "      --train-limit N      use the first N training samples (--test-limit too)\n"
        "      --no-normalize       only scale pixels to [0,1] (default: also standardise)\n"
        "      --shard-data         each rank loads only its block of the training rows and\n"
        "                           shuffles within it (the model then depends on the rank\n"
        "                           count; default: every rank holds the set, global shuffle)\n"
        "Training:\n"
        "  -e, --epochs N           (default 5)\n"
        "  -b, --batch N            global batch, split across ranks (default 128)\n"
        "      --optimizer sgd|adam|adamw  (default sgd)   --lr X (default 0.05 sgd, 0.001 adam)\n"
        "      --momentum X (0.9, below 1)   --weight-decay X (0)\n"
        "      --schedule const|step|cosine  --step-every N --step-gamma X  --warmup STEPS\n"
        "      --seed N             (default 1): initialisation, shuffling, dropout\n"
        "      --grad-dtype f32|f16|bf16   gradient allreduce precision (default f32)\n"
        "      --bucket-size SIZE   gradient bucket (default 25M); --first-bucket SIZE (1M)\n"
        "      --no-overlap         allreduce after backward instead of during it\n"
        "      --replicated-update  every rank runs the whole optimizer step (default with\n"
        "                           f32 gradients and >1 rank: each rank updates the\n"
        "                           parameters it reduces, inside the allreduce or, in\n"
        "                           the hybrid layout, the exchanges)\n"
        "      --parallel auto|data|hybrid   hybrid: the first layer, a dense one, split by\n"
        "                           outputs across the ranks, each computing its outputs\n"
        "                           for the whole batch (two all-to-alls of activations per\n"
        "                           step instead of allreducing its weights; needs the\n"
        "                           training set on every rank); data: every layer\n"
        "                           data-parallel; auto (default): hybrid where it moves\n"
        "                           less data (samples per rank <= the layer's inputs)\n"
        "      --split-layers 1|2   hybrid: split the first layer only, or the second too\n"
        "                           when it is dense (by inputs: the exchanges carry its\n"
        "                           partial sums, through shared memory when the ranks\n"
        "                           share one node, and only the layers above it have\n"
        "                           gradients to sum); implies --parallel hybrid (default:\n"
        "                           the one that moves less data)\n"
        "      --max-steps N        stop after N steps in total\n"
        "Checkpoints and output:\n"
        "      --checkpoint DIR     write checkpoints there (created if missing)\n"
        "      --checkpoint-every STEPS   (default 0: at the end of each epoch)  --resume\n"
        "      --save FILE          save the trained model (for hpml eval / hpml predict)\n"
        "      --json               print a JSON summary instead of the table\n"
        "      --no-progress        no progress bar (it is only drawn when stderr is a terminal)\n"
        "Synthetic benchmark (Horovod-style, random data):\n"
        "      --synthetic          --batch is then per rank (default 128)\n"
        "      --iters N (50) --warmup-iters N (10) --input CxHxW (1x28x28)\n"
        "  -h, --help               this text\n",
        HPML_NN_DEFAULT_DATA);
}

/* How the gradients above a hybrid split of nsplit layers travel, or the buckets'
 * allreduces, for the header line. */
static const char *sync_mode(const hpml_train_config_t *cfg, int nsplit, int nranks)
{
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
    return nsplit == 2   ? "hybrid layout (2 layers split)"
           : nsplit == 1 ? "hybrid layout (1 layer split)"
                         : "data layout";
}

typedef struct {
    int json, progress_bar, is_tty;
    double best_acc, t85;
    int rank, size;
    size_t batch;
    long last_drawn;
} report_ctx_t;

static void progress(void *vctx, int epoch, long step, long per_epoch, double loss)
{
    report_ctx_t *c = vctx;
    long pct = per_epoch ? step * 100 / per_epoch : 100;

    if (c->rank != 0 || !c->progress_bar)
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
    if (c->rank != 0 || c->json)
        return;
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
    double total_train_s, img_total;
} summary_ctx_t;

static void report_sum(void *vctx, const hpml_epoch_report_t *r)
{
    summary_ctx_t *s = vctx;

    s->last = *r;
    s->total_train_s += r->seconds;
    s->img_total += r->images_per_s * r->seconds;
    report(&s->base, r);
}

/* "--name" of the long option whose getopt value is `val`. */
static const char *long_name(const struct option *opts, int val)
{
    static char name[40];

    for (; opts->name != NULL; opts++)
        if (opts->val == val) {
            snprintf(name, sizeof(name), "--%s", opts->name);
            return name;
        }
    return "option";
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
                           char *why, size_t len)
{
    const cli_path_t in[] = {{"--train-images", dp->train_images},
                             {"--train-labels", dp->train_labels},
                             {"--test-images", dp->test_images},
                             {"--test-labels", dp->test_labels}};
    char ck[1100] = "";

    if (ckdir != NULL)
        snprintf(ck, sizeof(ck), "%s/checkpoint.hpml", ckdir);
    if (cli_clobbers(save, in, 4, why, len) != 0 || cli_clobbers(ck, in, 4, why, len) != 0)
        return -1;
    if (save != NULL && ck[0] != '\0' && hpml_io_same_file(save, ck)) {
        snprintf(why, len,
                 "--save %s is the checkpoint --checkpoint %s writes; choose another name", save,
                 ckdir);
        return -1;
    }
    return 0;
}

int cmd_train(int argc, char **argv)
{
    enum {
        O_DATA = 256,
        O_TRI,
        O_TRL,
        O_TEI,
        O_TEL,
        O_TRLIM,
        O_TELIM,
        O_NONORM,
        O_OPT,
        O_LR,
        O_MOM,
        O_WD,
        O_SCHED,
        O_STEPEV,
        O_STEPG,
        O_WARM,
        O_SEED,
        O_GDT,
        O_BUCKET,
        O_FIRST,
        O_NOOVL,
        O_REPL,
        O_PAR,
        O_SPLIT,
        O_MAXS,
        O_CKPT,
        O_CKEV,
        O_RESUME,
        O_SAVE,
        O_JSON,
        O_NOPROG,
        O_SYN,
        O_ITERS,
        O_WITERS,
        O_INPUT,
        O_SHARD
    };
    static const struct option opts[] = {{"help", no_argument, 0, 'h'},
                                         {"model", required_argument, 0, 'm'},
                                         {"epochs", required_argument, 0, 'e'},
                                         {"batch", required_argument, 0, 'b'},
                                         {"data", required_argument, 0, O_DATA},
                                         {"train-images", required_argument, 0, O_TRI},
                                         {"train-labels", required_argument, 0, O_TRL},
                                         {"test-images", required_argument, 0, O_TEI},
                                         {"test-labels", required_argument, 0, O_TEL},
                                         {"train-limit", required_argument, 0, O_TRLIM},
                                         {"test-limit", required_argument, 0, O_TELIM},
                                         {"no-normalize", no_argument, 0, O_NONORM},
                                         {"shard-data", no_argument, 0, O_SHARD},
                                         {"optimizer", required_argument, 0, O_OPT},
                                         {"lr", required_argument, 0, O_LR},
                                         {"momentum", required_argument, 0, O_MOM},
                                         {"weight-decay", required_argument, 0, O_WD},
                                         {"schedule", required_argument, 0, O_SCHED},
                                         {"step-every", required_argument, 0, O_STEPEV},
                                         {"step-gamma", required_argument, 0, O_STEPG},
                                         {"warmup", required_argument, 0, O_WARM},
                                         {"seed", required_argument, 0, O_SEED},
                                         {"grad-dtype", required_argument, 0, O_GDT},
                                         {"bucket-size", required_argument, 0, O_BUCKET},
                                         {"first-bucket", required_argument, 0, O_FIRST},
                                         {"no-overlap", no_argument, 0, O_NOOVL},
                                         {"replicated-update", no_argument, 0, O_REPL},
                                         {"parallel", required_argument, 0, O_PAR},
                                         {"split-layers", required_argument, 0, O_SPLIT},
                                         {"max-steps", required_argument, 0, O_MAXS},
                                         {"checkpoint", required_argument, 0, O_CKPT},
                                         {"checkpoint-every", required_argument, 0, O_CKEV},
                                         {"resume", no_argument, 0, O_RESUME},
                                         {"save", required_argument, 0, O_SAVE},
                                         {"json", no_argument, 0, O_JSON},
                                         {"no-progress", no_argument, 0, O_NOPROG},
                                         {"synthetic", no_argument, 0, O_SYN},
                                         {"iters", required_argument, 0, O_ITERS},
                                         {"warmup-iters", required_argument, 0, O_WITERS},
                                         {"input", required_argument, 0, O_INPUT},
                                         {0, 0, 0, 0}};
    hpml_train_config_t cfg;
    hpml_data_paths_t dp;
    const char *model = "mlp", *save = NULL, *upd;
    hpml_parallel_t lay = HPML_PARALLEL_DATA;
    int nsplit = 0; /* layers the hybrid layout splits */
    int normalize = 1, shard = 0, synthetic = 0, json = 0, noprog = 0, lr_set = 0, ckev_set = 0,
        data_set = 0, files = 0, rc = CLI_EXIT_FAIL;
    long iters = 50, witers = 10, v;
    int in_c = 1, in_h = 28, in_w = 28;
    size_t train_limit = SIZE_MAX, test_limit = SIZE_MAX;
    double d;
    hpml_comm_t *comm = NULL;
    hpml_dataset_t train = {0}, test = {0};
    hpml_model_t *m = NULL;
    summary_ctx_t sc;
    int opt, err;

    hpml_train_config_default(&cfg);
    hpml_data_paths(HPML_NN_DEFAULT_DATA, &dp);
    optind = 1;
    while ((opt = cli_getopt(CMD, argc, argv, "hm:e:b:", opts)) != -1) {
        switch (opt) {
        case 'h': usage(); return CLI_EXIT_OK;
        case 'm': model = optarg; break;
        case 'e':
            if (cli_opt_long(CMD, "--epochs", optarg, 1, 1000000, &v))
                return CLI_EXIT_USAGE;
            cfg.epochs = (int)v;
            break;
        case 'b':
            if (cli_opt_long(CMD, "--batch", optarg, 1, 1L << 30, &v))
                return CLI_EXIT_USAGE;
            cfg.batch = (size_t)v;
            break;
        case O_DATA:
            hpml_data_paths(optarg, &dp);
            data_set = 1;
            break;
        case O_TRI:
        case O_TRL:
        case O_TEI:
        case O_TEL: {
            char *path = opt == O_TRI   ? dp.train_images
                         : opt == O_TRL ? dp.train_labels
                         : opt == O_TEI ? dp.test_images
                                        : dp.test_labels;
            snprintf(path, sizeof(dp.train_images), "%s", optarg);
            files |= 1 << (opt - O_TRI);
            break;
        }
        case O_TRLIM:
        case O_TELIM:
            if (cli_opt_long(CMD, opt == O_TRLIM ? "--train-limit" : "--test-limit", optarg, 1,
                             1L << 40, &v))
                return CLI_EXIT_USAGE;
            *(opt == O_TRLIM ? &train_limit : &test_limit) = (size_t)v;
            break;
        case O_NONORM: normalize = 0; break;
        case O_SHARD: shard = 1; break;
        case O_OPT:
            if (hpml_opt_parse(optarg, &cfg.opt.kind))
                return cli_usage_error(CMD, "--optimizer: %s", hpml_last_error());
            break;
        case O_LR:
        case O_MOM:
        case O_WD:
        case O_STEPG:
            if (cli_parse_double(optarg, &d) || d < 0)
                return cli_usage_error(CMD, "%s: expected a non-negative number, got '%s'",
                                       long_name(opts, opt), optarg);
            if (opt == O_MOM && d >= 1) /* the velocity would grow without bound */
                return cli_usage_error(CMD, "--momentum: expected a number in [0, 1), got '%s'",
                                       optarg);
            if (opt == O_LR) {
                cfg.opt.lr = d;
                lr_set = 1;
            } else if (opt == O_MOM) {
                cfg.opt.momentum = d;
            } else if (opt == O_WD) {
                cfg.opt.weight_decay = d;
            } else {
                cfg.opt.step_gamma = d;
            }
            break;
        case O_SCHED:
            if (hpml_sched_parse(optarg, &cfg.opt.sched))
                return cli_usage_error(CMD, "--schedule: %s", hpml_last_error());
            break;
        case O_STEPEV:
        case O_WARM:
            if (cli_opt_long(CMD, long_name(opts, opt), optarg, 0, 1L << 30, &v))
                return CLI_EXIT_USAGE;
            if (opt == O_STEPEV)
                cfg.opt.step_every = (int)v;
            else
                cfg.opt.warmup_steps = (int)v;
            break;
        case O_SEED:
            if (cli_opt_long(CMD, "--seed", optarg, 0, 1L << 62, &v))
                return CLI_EXIT_USAGE;
            cfg.seed = (uint64_t)v;
            break;
        case O_GDT:
            if (hpml_dtype_parse(optarg, &cfg.grad_dtype) ||
                (cfg.grad_dtype != HPML_F32 && cfg.grad_dtype != HPML_F16 &&
                 cfg.grad_dtype != HPML_BF16))
                return cli_usage_error(CMD, "--grad-dtype: expected f32, f16 or bf16, got '%s'",
                                       optarg);
            break;
        case O_BUCKET:
        case O_FIRST: {
            size_t sz;
            if (cli_parse_size(optarg, &sz) || (opt == O_BUCKET && sz == 0))
                return cli_usage_error(CMD, "%s: expected a size like 25M, got '%s'",
                                       long_name(opts, opt), optarg);
            *(opt == O_BUCKET ? &cfg.bucket_bytes : &cfg.first_bucket_bytes) = sz;
            break;
        }
        case O_NOOVL: cfg.overlap = 0; break;
        case O_REPL: cfg.sharded_update = 0; break;
        case O_PAR:
            if (hpml_parallel_parse(optarg, &cfg.parallel) != 0)
                return cli_usage_error(CMD, "--parallel: expected auto, data or hybrid, got '%s'",
                                       optarg);
            break;
        case O_SPLIT:
            if (strcmp(optarg, "1") != 0 && strcmp(optarg, "2") != 0)
                return cli_usage_error(CMD, "--split-layers: expected 1 or 2, got '%s'", optarg);
            cfg.split_layers = optarg[0] - '0';
            break;
        case O_MAXS:
        case O_CKEV:
            if (cli_opt_long(CMD, long_name(opts, opt), optarg, 0, 1L << 50, &v))
                return CLI_EXIT_USAGE;
            *(opt == O_MAXS ? &cfg.max_steps : &cfg.checkpoint_every) = v;
            ckev_set |= opt == O_CKEV;
            break;
        case O_CKPT: cfg.checkpoint_dir = optarg; break;
        case O_RESUME: cfg.resume = 1; break;
        case O_SAVE: save = optarg; break;
        case O_JSON: json = 1; break;
        case O_NOPROG: noprog = 1; break;
        case O_SYN: synthetic = 1; break;
        case O_ITERS:
        case O_WITERS:
            if (cli_opt_long(CMD, long_name(opts, opt), optarg, opt == O_ITERS ? 1 : 0, 1L << 30,
                             &v))
                return CLI_EXIT_USAGE;
            *(opt == O_ITERS ? &iters : &witers) = v;
            break;
        case O_INPUT: {
            char extra;
            if (sscanf(optarg, "%dx%dx%d%c", &in_c, &in_h, &in_w, &extra) != 3 || in_c <= 0 ||
                in_h <= 0 || in_w <= 0)
                return cli_usage_error(CMD, "--input: expected CxHxW like 1x28x28, got '%s'",
                                       optarg);
            break;
        }
        default: return CLI_EXIT_USAGE; /* '?': cli_getopt has said what is wrong */
        }
    }
    if (optind < argc)
        return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (cfg.resume && cfg.checkpoint_dir == NULL)
        return cli_usage_error(CMD, "--resume needs --checkpoint DIR");
    if (ckev_set && cfg.checkpoint_dir == NULL)
        return cli_usage_error(CMD, "--checkpoint-every needs --checkpoint DIR");
    /* Files come in pairs (images alone would be paired with the default set's labels),
     * and replace --data rather than mixing with it in option order. */
    if (data_set && files != 0)
        return cli_usage_error(CMD, "give --data DIR or --train-*/--test-* files, not both");
    if ((files & 3) == 1 || (files & 3) == 2)
        return cli_usage_error(CMD, "--train-images and --train-labels go together");
    if ((files & 12) == 4 || (files & 12) == 8)
        return cli_usage_error(CMD, "--test-images and --test-labels go together");
    if (files == 3) /* training files of their own: no test set unless given one */
        dp.test_images[0] = dp.test_labels[0] = '\0';
    if (!lr_set && cfg.opt.kind != HPML_OPT_SGD)
        cfg.opt.lr = 0.001;
    cfg.spec = hpml_model_preset(model);
    /* Check the spec on every rank before any collective, so all fail together. */
    {
        hpml_model_t *probe = NULL;
        int perr = hpml_model_create(cfg.spec, in_c, in_h, in_w, &probe);
        /* Out of memory is this rank's failure (or every rank's), not the spec's. */
        if (perr == HPML_ERR_NOMEM)
            return cli_fail_agreed(CMD, perr);
        if (perr != 0) {
            /* Point at the column under the spec. */
            const char *c = strstr(hpml_last_error(), "column ");
            int col = c && !strchr(cfg.spec, '\n') ? (int)strtol(c + 7, NULL, 10) : 0;
            return cli_usage_error(CMD, "%s\n  %s\n  %*s^", hpml_last_error(), cfg.spec,
                                   col > 0 ? col - 1 : 0, "");
        }
        hpml_model_destroy(probe);
    }
    /* A hybrid layout the model or the data cannot take, too. */
    if (hpml_train_layout(&cfg, cli_size(), in_c, in_h, in_w, synthetic || !shard,
                          synthetic ? cfg.batch
                                    : (cfg.batch + (size_t)cli_size() - 1) / (size_t)cli_size(),
                          &lay, &nsplit) != 0) {
        const char *msg = hpml_last_error();
        char which[32] = "--parallel hybrid";

        if (cfg.split_layers != 0)
            snprintf(which, sizeof(which), "--split-layers %d", cfg.split_layers);
        return cli_usage_error(CMD, "%s: %s", which,
                               strncmp(msg, "train: ", 7) == 0 ? msg + 7 : msg);
    }

    memset(&sc, 0, sizeof(sc));
    sc.base.json = json;
    sc.base.rank = cli_rank();
    sc.base.size = cli_size();
    sc.base.is_tty = isatty(2);
    sc.base.progress_bar = !noprog && sc.base.is_tty && !json;
    sc.base.t85 = -1;
    sc.base.best_acc = -1;
    sc.base.last_drawn = -1;
    hpml_blas_set_threads(1);

    if (mlcli_comm_create(CMD, &comm) != 0)
        return CLI_EXIT_FAIL;
    /* Where the results go is checked before the run, not after it. */
    {
        char why[1200] = "";
        int bad = 0;

        if (sc.base.rank == 0)
            bad = (cfg.checkpoint_dir != NULL &&
                   checkpoint_ok(cfg.checkpoint_dir, cfg.resume, why, sizeof(why)) != 0) ||
                  (save != NULL && can_create("--save", save, why, sizeof(why)) != 0) ||
                  (!synthetic && outputs_clobber(&dp, save, cfg.checkpoint_dir, why, sizeof(why)));
        if (mlcli_agree(CMD, comm, bad, "%s", why))
            goto out;
    }

    upd = hpml_train_update_is_sharded(&cfg, sc.base.size) ? "sharded" : "replicated";
    if (synthetic) {
        hpml_synth_result_t r;
        if ((err = hpml_train_synthetic(comm, &cfg, in_c, in_h, in_w, (int)iters, (int)witers,
                                        &r)) != 0) {
            rc = cli_fail_agreed(CMD, err);
            goto out;
        }
        if (sc.base.rank == 0) {
            if (json) {
                printf("{\"synthetic\": true, \"model\": ");
                hpml_json_string(stdout, cfg.spec);
                printf(
                    ", \"ranks\": %d, \"batch_per_rank\": %zu, \"grad_dtype\": \"%s\", "
                    "\"overlap\": %s, \"update\": \"%s\", \"parallel\": \"%s\", "
                    "\"split_layers\": %d, \"iters\": %ld, "
                    "\"step_s\": %.6f, "
                    "\"compute_s\": %.6f, \"comm_exposed_s\": %.6f, \"images_per_s_rank\": %.1f, "
                    "\"images_per_s_total\": %.1f, \"cpu_s\": %.6f}\n",
                    sc.base.size, cfg.batch, hpml_dtype_name(cfg.grad_dtype),
                    cfg.overlap ? "true" : "false", upd, hpml_parallel_name(lay), nsplit, iters,
                    r.step_s, r.compute_s, r.comm_exposed_s, r.images_per_s_rank,
                    r.images_per_s_total, r.cpu_s);
            } else {
                printf("# hpml train --synthetic: %s\n", cfg.spec);
                printf("# ranks %d, batch %zu per rank, input %dx%dx%d, grad %s, %s, %s update, "
                       "%s, %ld iters after %ld warm-up\n",
                       sc.base.size, cfg.batch, in_c, in_h, in_w, hpml_dtype_name(cfg.grad_dtype),
                       sync_mode(&cfg, nsplit, sc.base.size), upd, layout_desc(nsplit), iters,
                       witers);
                /* img/cpu_s: images per second of process CPU time, which on a
                 * loaded machine estimates the unloaded speed of one rank. */
                printf("# %-6s %12s %12s %12s %14s %14s %14s\n", "ranks", "step_ms", "compute_ms",
                       "comm_ms", "img/s/rank", "img/s_total", "img/cpu_s/rank");
                printf("  %-6d %12.3f %12.3f %12.3f %14.0f %14.0f %14.0f\n", sc.base.size,
                       1e3 * r.step_s, 1e3 * r.compute_s, 1e3 * r.comm_exposed_s,
                       r.images_per_s_rank, r.images_per_s_total,
                       r.cpu_s > 0 ? (double)cfg.batch / r.cpu_s : 0.0);
            }
        }
        rc = CLI_EXIT_OK;
        goto out;
    }

    /* Data: the whole training set on every rank (global shuffling) or its block of rows
     * (--shard-data), this rank's block of the test set. */
    {
        const hpml_train_data_opts_t dopt = {.train_limit = train_limit,
                                             .test_limit = test_limit,
                                             .shard = shard,
                                             .normalize = normalize};
        double t0 = hpml_time();

        err = hpml_train_data_load(comm, &dp, &dopt, &train, &test, &cfg.mean, &cfg.std);
        if (mlcli_check(CMD, comm, err))
            goto out;
        /* The layout for the data as loaded (hpml_train's batch is at most the set); a spec
         * that the data's shape breaks is hpml_train's error below. */
        (void)hpml_train_layout(
            &cfg, sc.base.size, train.c, train.h, train.w, !shard,
            ((cfg.batch < train.n ? cfg.batch : train.n) + (size_t)sc.base.size - 1) /
                (size_t)sc.base.size,
            &lay, &nsplit);
        if (sc.base.rank == 0 && !json) {
            printf("# hpml train: %s\n", cfg.spec);
            printf("# data: %zu training samples %dx%dx%d from %s, %s test samples; loaded in "
                   "%.2f s\n",
                   train.n, train.c, train.h, train.w, dp.train_images, test.x ? "with" : "no",
                   hpml_time() - t0);
            size_t per_lo = cfg.batch / (size_t)sc.base.size,
                   per_hi = (cfg.batch + (size_t)sc.base.size - 1) / (size_t)sc.base.size;
            char per[48];

            if (per_lo == per_hi)
                snprintf(per, sizeof(per), "%zu", per_lo);
            else /* the batch does not divide: some ranks take one sample more */
                snprintf(per, sizeof(per), "%zu-%zu", per_lo, per_hi);
            printf("# %d ranks, global batch %zu (%s per rank), %s lr %g%s, %d epochs, seed "
                   "%llu, grad %s %s, %s update, %s\n",
                   sc.base.size, cfg.batch, per,
                   cfg.opt.kind == HPML_OPT_SGD    ? "sgd"
                   : cfg.opt.kind == HPML_OPT_ADAM ? "adam"
                                                   : "adamw",
                   cfg.opt.lr,
                   cfg.opt.sched == HPML_SCHED_COSINE ? " cosine"
                   : cfg.opt.sched == HPML_SCHED_STEP ? " step"
                                                      : "",
                   cfg.epochs, (unsigned long long)cfg.seed, hpml_dtype_name(cfg.grad_dtype),
                   sync_mode(&cfg, nsplit, sc.base.size), upd, layout_desc(nsplit));
            printf("%5s %7s %9s %9s %9s %9s %8s %10s %10s %8s\n", "epoch", "steps", "loss", "train",
                   "test_loss", "test", "time_s", "img/s", "img/s/rank", "comm_s");
            fflush(stdout);
        }
    }
    sc.base.batch = cfg.batch;
    if ((err = hpml_train(comm, &cfg, &train, test.x ? &test : NULL, report_sum, progress, &sc,
                          &m)) != 0) {
        /* An error every rank saw (a corrupt checkpoint) is one line and exit 1; one that
         * left the other ranks inside a collective ends the job. */
        rc = cli_fail_agreed(CMD, err);
        goto out;
    }
    err = save && sc.base.rank == 0 ? hpml_model_save(m, cfg.mean, cfg.std, save) : 0;
    if (save && mlcli_check(CMD, comm, err))
        goto out;
    if (sc.base.rank == 0) {
        const hpml_epoch_report_t *r = &sc.last;
        double ips = sc.total_train_s > 0 ? sc.img_total / sc.total_train_s : 0;
        if (json) {
            printf("{\"model\": ");
            hpml_json_string(stdout, cfg.spec);
            printf(", \"ranks\": %d, \"batch\": %zu, \"epochs\": %d, \"steps\": %ld, "
                   "\"train_loss\": %.6f, \"train_acc\": %.6f, \"test_loss\": %.6f, "
                   "\"test_acc\": %.6f, \"best_test_acc\": %.6f, \"train_time_s\": %.3f, "
                   "\"images_per_s\": %.1f, \"images_per_s_rank\": %.1f, "
                   "\"time_to_85_s\": %.3f, \"grad_dtype\": \"%s\", \"update\": \"%s\", "
                   "\"parallel\": \"%s\", \"split_layers\": %d, \"saved\": ",
                   sc.base.size, cfg.batch, r->epoch, r->steps, r->train_loss, r->train_acc,
                   r->test_loss, r->test_acc, sc.base.best_acc, r->elapsed, ips, ips / sc.base.size,
                   sc.base.t85, hpml_dtype_name(cfg.grad_dtype), upd, hpml_parallel_name(lay),
                   nsplit);
            if (save)
                hpml_json_string(stdout, save);
            else
                printf("null");
            printf("}\n");
        } else {
            printf("# trained %ld steps in %.2f s: %.0f images/s total, %.0f per rank", r->steps,
                   r->elapsed, ips, ips / sc.base.size);
            if (r->test_acc >= 0)
                printf("; final test accuracy %.2f%%", 100 * r->test_acc);
            printf("\n");
            if (sc.base.t85 >= 0)
                printf("# time to 85%% test accuracy: %.2f s\n", sc.base.t85);
            if (save)
                printf("# model saved to %s\n", save);
        }
    }
    rc = CLI_EXIT_OK;
out:
    hpml_model_destroy(m);
    hpml_dataset_free(&train);
    hpml_dataset_free(&test);
    hpml_comm_destroy(comm);
    return rc;
}
