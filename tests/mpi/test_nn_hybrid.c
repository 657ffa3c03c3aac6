/*
 * The hybrid layout (the first dense layer split by outputs across the ranks, and the
 * second, when it is dense too, by inputs; the rest data-parallel) trains the model
 * that 1 rank and the data-parallel layout train, with one layer split and with two: the
 * same parameters within float rounding, with dropout, uneven splits of the outputs and
 * of the batch, steps where a rank has no sample, 16-bit gradients, blocking or
 * overlapped, sharded or replicated updates. A run resumed from a checkpoint (mid-epoch
 * or at an epoch's end, AdamW: every rank's rows and moments gathered) ends
 * bit-identical to the uninterrupted run. Two layers split on one node exchange through
 * shared memory and train the bits they train through messages. AUTO picks the layout
 * where it applies; asking for it where it cannot apply is a clear error.
 *
 * hpml-test: ranks=1 2 3 4
 * hpml-test: mpich-ranks=1 2 3
 * hpml-test: timeout=240
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn_util.h"

/* 7 outputs: uneven at 2, 3 and 4 ranks. */
#define SPEC "dense 7 relu | dropout 0.2 | dense 16 relu | dense 3"
/* The second layer dense too: it can be split with the first (5 outputs, 7 inputs). */
#define SPEC2 "dense 7 relu | dense 5 relu | dropout 0.2 | dense 3"

/* The layout hpml_train picks for cfg on P ranks of this data (replicated). */
static hpml_parallel_t layout(const hpml_train_config_t *cfg, int P, size_t lb)
{
    hpml_parallel_t l = HPML_PARALLEL_AUTO;

    HPMLT_CALL(hpml_train_layout(cfg, P, 1, 8, 8, 1, lb, &l, NULL));
    return l;
}

/* How many layers it splits there. */
static int split_layers(const hpml_train_config_t *cfg, int P, size_t lb)
{
    hpml_parallel_t l = HPML_PARALLEL_AUTO;
    int n = -1;

    HPMLT_CALL(hpml_train_layout(cfg, P, 1, 8, 8, 1, lb, &l, &n));
    return n;
}

/* hpml_train fails with HPML_ERR_INVAL on every rank and a message containing `what`. */
static void expect_inval(hpml_comm_t *comm, const hpml_train_config_t *cfg, const hpml_dataset_t *d,
                         const char *what)
{
    hpml_model_t *m = NULL;
    int rc = hpml_train(comm, cfg, d, NULL, NULL, NULL, NULL, &m);

    HPMLT_CHECK(rc == HPML_ERR_INVAL && m == NULL, "%s: got %d (%s)", what, rc, hpml_last_error());
    HPMLT_CHECK(strstr(hpml_last_error(), what) != NULL, "message '%s' lacks '%s'",
                hpml_last_error(), what);
    hpml_model_destroy(m);
}

/* cfg (hybrid, split_layers as given) against 1 rank and the data-parallel layout: the
 * same model, in every variant of the layers above the split; a batch smaller than the
 * rank count; resumes bit for bit. Collective. */
static void check_hybrid(hpml_comm_t *world, hpml_comm_t *self, const hpml_train_config_t *cfg,
                         const hpml_dataset_t *d, const char *what)
{
    hpml_train_config_t c;
    hpml_model_t *one, *data, *hyb;
    char dir[256];

    /* 1 rank, P ranks data-parallel and P ranks hybrid: one model. */
    one = nnt_run(self, cfg, d);
    c = *cfg;
    c.parallel = HPML_PARALLEL_DATA;
    c.split_layers = 0;
    data = nnt_run(world, &c, d);
    c = *cfg;
    c.parallel = HPML_PARALLEL_HYBRID;
    hyb = nnt_run(world, &c, d);
    HPMLT_CHECK(nnt_rel_diff(one, hyb) <= 1e-4, "%s: hybrid vs 1 rank: %g", what,
                nnt_rel_diff(one, hyb));
    HPMLT_CHECK(nnt_rel_diff(data, hyb) <= 1e-4, "%s: hybrid vs data-parallel: %g", what,
                nnt_rel_diff(data, hyb));
    HPMLT_CHECK(hyb && nnt_same_on_all_ranks(hyb), "%s: the ranks' hybrid models differ", what);

    /* The variants of the layers above layer 0 train the same model. */
    {
        struct {
            const char *name;
            hpml_dtype_t dt;
            int overlap, sharded;
            double tol;
        } v[] = {{"blocking", HPML_F32, 0, 1, 1e-5},
                 {"replicated update", HPML_F32, 1, 0, 1e-5},
                 {"f16 gradients", HPML_F16, 1, 1, 2e-3},
                 {"bf16 gradients", HPML_BF16, 1, 1, 2e-2}};
        for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++) {
            hpml_model_t *mk;
            c = *cfg;
            c.parallel = HPML_PARALLEL_HYBRID;
            c.grad_dtype = v[k].dt;
            c.overlap = v[k].overlap;
            c.sharded_update = v[k].sharded;
            mk = nnt_run(world, &c, d);
            HPMLT_CHECK(nnt_rel_diff(hyb, mk) <= v[k].tol, "%s, %s: %g (tolerance %g)", what,
                        v[k].name, nnt_rel_diff(hyb, mk), v[k].tol);
            hpml_model_destroy(mk);
        }
    }

    /* Steps in which a rank has no sample but still computes its outputs for the others:
     * batch 3 of 10 samples leaves rank 3 of 4 without samples in every step, and every
     * rank but one without a sample in each epoch's last step, after steps with samples
     * whose gradients must not be left over (a few epochs, while they are large). */
    {
        hpml_model_t *a, *b;
        hpml_dataset_t few = *d;
        char label[160];
        few.n = few.total = 10;
        c = *cfg;
        c.batch = 3;
        c.epochs = 3;
        c.split_layers = 0;
        a = nnt_run(self, &c, &few);
        c.split_layers = cfg->split_layers;
        c.parallel = HPML_PARALLEL_HYBRID;
        b = nnt_run(world, &c, &few);
        snprintf(label, sizeof(label), "%s, batch 3: hybrid vs 1 rank", what);
        nnt_expect_close(a, b, 1e-4, label);
    }

    /* Checkpoints with AdamW: a mid-epoch checkpoint and an epoch-end one each resume to
     * the uninterrupted run's bits (every rank's rows of layer 0 and their moments are
     * gathered into the checkpoint). */
    {
        hpml_model_t *full, *res;
        c = *cfg;
        c.parallel = HPML_PARALLEL_HYBRID;
        c.opt.kind = HPML_OPT_ADAMW;
        c.opt.lr = 0.01;
        c.opt.weight_decay = 0.01;
        full = nnt_run(world, &c, d);
        nnt_ckpt_dir(dir, sizeof(dir), "hybrid_ckpt_mid");
        c.checkpoint_dir = dir;
        c.checkpoint_every = 5;
        c.max_steps = 5;
        hpml_model_destroy(nnt_run(world, &c, d));
        c.max_steps = 0;
        c.checkpoint_every = 1000;
        c.resume = 1;
        res = nnt_run(world, &c, d);
        HPMLT_CHECK(nnt_same_bits(full, res), "%s: resumed from a mid-epoch checkpoint: differs",
                    what);
        hpml_model_destroy(res);
        nnt_ckpt_remove(dir);

        nnt_ckpt_dir(dir, sizeof(dir), "hybrid_ckpt_epoch");
        c.resume = 0;
        c.checkpoint_every = 0;
        c.epochs = 1;
        hpml_model_destroy(nnt_run(world, &c, d));
        c.epochs = cfg->epochs;
        c.resume = 1;
        res = nnt_run(world, &c, d);
        HPMLT_CHECK(nnt_same_bits(full, res), "%s: resumed from an epoch-end checkpoint: differs",
                    what);
        hpml_model_destroy(res);
        nnt_ckpt_remove(dir);
        hpml_model_destroy(full);
    }

    hpml_model_destroy(one);
    hpml_model_destroy(data);
    hpml_model_destroy(hyb);
}

int main(int argc, char **argv)
{
    hpml_comm_t *world = NULL, *self = NULL;
    hpml_train_config_t cfg, c;
    hpml_dataset_t d;
    int P;

    hpmlt_init(&argc, &argv, "nn_hybrid");
    P = hpmlt_size();
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &world));
    HPMLT_CALL(hpml_comm_create(MPI_COMM_SELF, NULL, &self));
    nnt_make_data(&d, 250, 7);
    hpml_train_config_default(&cfg);
    cfg.spec = SPEC;
    cfg.epochs = 2;
    cfg.batch = 30; /* 250 = 8*30 + 10; 30 splits unevenly over 4 ranks */
    cfg.opt.lr = 0.05;
    cfg.first_bucket_bytes = 256;

    /* AUTO: hybrid on several ranks while the samples per rank are at most the first
     * layer's 64 inputs; data otherwise. */
    HPMLT_OK(layout(&cfg, 1, 30) == HPML_PARALLEL_DATA);
    HPMLT_OK(layout(&cfg, 2, 15) == HPML_PARALLEL_HYBRID);
    HPMLT_OK(layout(&cfg, 2, 65) == HPML_PARALLEL_DATA);
    c = cfg;
    c.parallel = HPML_PARALLEL_HYBRID;
    HPMLT_OK(layout(&c, 2, 65) == HPML_PARALLEL_HYBRID);
    c.parallel = HPML_PARALLEL_DATA;
    HPMLT_OK(layout(&c, 2, 15) == HPML_PARALLEL_DATA);
    /* Two layers where that moves less data (in units of 2 (P-1)/P floats per rank and
     * step: 2*15*16 of layer 1's pre-activations and their gradients plus 67 parameters
     * above the pair, against 15*32 of activations plus 579 parameters above the first
     * layer), one where it does not (SPEC2: 2*15*5 + 23 against 15*7 + 58) or cannot
     * (SPEC: a dropout second). */
    c = cfg;
    HPMLT_OK(split_layers(&c, 2, 15) == 1);
    HPMLT_OK(split_layers(&c, 1, 15) == 0);
    c.spec = SPEC2;
    HPMLT_OK(split_layers(&c, 2, 15) == 1);
    c.spec = "dense 32 relu | dense 16 relu | dense 3";
    HPMLT_OK(split_layers(&c, 2, 15) == 2);
    c.split_layers = 1;
    HPMLT_OK(split_layers(&c, 2, 15) == 1);
    c.split_layers = 2; /* asking for a split asks for the hybrid layout */
    HPMLT_OK(split_layers(&c, 2, 65) == 2);

    /* One layer split (a dropout above it), two (the second dense too), and one layer
     * of a model where two could be. */
    check_hybrid(world, self, &cfg, &d, "1 layer split");
    c = cfg;
    c.spec = SPEC2;
    c.split_layers = 2;
    check_hybrid(world, self, &c, &d, "2 layers split");
    /* On one node, two layers split exchange through registered buffers (and, with f32
     * gradients, sum the parameters above the pair there too); with every rank its own
     * node (ranks_per_node 1), through messages. Both sum in rank order: the same bits on
     * 2 ranks, where the allreduce of the parameters above adds two values whatever its
     * algorithm; within rounding on more. With f16 gradients those go through the
     * allreduce in both. */
    for (int k = 0; k < 2; k++) {
        hpml_comm_config_t one_per_node = {0, 1};
        hpml_comm_t *sep = NULL;
        hpml_model_t *a, *b;
        double diff;

        HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, &one_per_node, &sep));
        c.grad_dtype = k ? HPML_F16 : HPML_F32;
        a = nnt_run(world, &c, &d);
        b = nnt_run(sep, &c, &d);
        diff = nnt_rel_diff(a, b);
        if (P <= 2)
            HPMLT_CHECK(nnt_same_bits(a, b),
                        "2 layers split, %s: shared memory and messages "
                        "differ (%g)",
                        k ? "f16" : "f32", diff);
        else
            HPMLT_CHECK(diff <= (k ? 2e-3 : 1e-5), /* f16: each algorithm rounds its sums */
                        "2 layers split, %s: shared memory vs messages: %g", k ? "f16" : "f32",
                        diff);
        hpml_model_destroy(a);
        hpml_model_destroy(b);
        hpml_comm_destroy(sep);
    }
    c.grad_dtype = HPML_F32;
    c.split_layers = 1;
    check_hybrid(world, self, &c, &d, "1 of 2 dense layers split");
    /* Two layers split where the second is the output layer: the loss reads the summed
     * partial logits. */
    {
        hpml_model_t *a, *b;
        c = cfg;
        c.spec = "dense 7 relu | dense 3";
        a = nnt_run(self, &c, &d);
        c.split_layers = 2;
        b = nnt_run(world, &c, &d);
        HPMLT_CHECK(nnt_rel_diff(a, b) <= 1e-4, "2 layers split, the second the output: %g",
                    nnt_rel_diff(a, b));
        HPMLT_CHECK(b && nnt_same_on_all_ranks(b), "2 layers split, the second the output: the "
                                                   "ranks' models differ");
        hpml_model_destroy(a);
        hpml_model_destroy(b);
    }

    /* Where the hybrid layout cannot apply, asking for it is an error (on 1 rank it is
     * the whole model anyway). */
    if (P > 1) {
        hpml_dataset_t part = d;
        c = cfg;
        c.parallel = HPML_PARALLEL_HYBRID;
        c.spec = "conv 2 3x3 relu | dense 3";
        expect_inval(world, &c, &d, "starts with 'conv'");
        c.spec = "dense 1 relu | dense 3";
        expect_inval(world, &c, &d, "an output of the first layer per rank");
        c.spec = SPEC;
        part.n = d.n / (size_t)P; /* as --shard-data loads it: a block of the rows */
        part.offset = (size_t)hpmlt_rank() * part.n;
        part.x = d.x + part.offset * 64;
        part.y = d.y + part.offset;
        expect_inval(world, &c, &part, "whole training set");
        c.split_layers = 2;
        expect_inval(world, &c, &d, "second layer is 'dropout'");
        c.split_layers = 3;
        expect_inval(world, &c, &d, "must be 0 (auto), 1 or 2, not 3");
        c.split_layers = 1;
        c.parallel = HPML_PARALLEL_DATA;
        expect_inval(world, &c, &d, "not the data-parallel one");
        c.split_layers = 0;
        /* AUTO falls back to data-parallel there. */
        c.parallel = HPML_PARALLEL_AUTO;
        c.spec = "dense 1 relu | dense 3";
        hpml_model_destroy(nnt_run(world, &c, &d));
    }

    hpml_dataset_free(&d);
    hpml_comm_destroy(self);
    hpml_comm_destroy(world);
    return hpmlt_finish();
}
