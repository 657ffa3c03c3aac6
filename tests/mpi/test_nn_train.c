/*
 * Data-parallel training properties: P ranks with global batch B reach the same
 * parameters as 1 rank with batch B (dropout included: its mask is keyed by the global
 * sample index), for a batch that does not divide by P; the sharded and replicated
 * optimizer updates agree bit for bit; a run resumed from a checkpoint ends
 * bit-identical to the uninterrupted run; a corrupt checkpoint is a clear error.
 *
 * hpml-test: ranks=1 2 3
 * hpml-test: mpich-ranks=1 2
 * hpml-test: timeout=240
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "hpml/nn.h"

#define SPEC "conv 4 3x3 pad1 relu | pool 2 | dropout 0.2 | dense 16 relu | dense 3"

/* A small deterministic 3-class problem: the class shifts the mean of a quadrant. */
static void make_data(hpml_dataset_t *d, size_t n)
{
    hpml_rng_t rng;

    memset(d, 0, sizeof(*d));
    d->n = d->total = n;
    d->c = 1;
    d->h = d->w = 8;
    d->classes = 3;
    d->x = hpml_malloc(n * 64 * sizeof(float));
    d->y = hpml_malloc(n * sizeof(int32_t));
    hpml_rng_init(&rng, 99, 0);
    for (size_t i = 0; i < n; i++) {
        int c = (int)hpml_rng_below(&rng, 3);
        d->y[i] = c;
        for (int p = 0; p < 64; p++) {
            int q = (p / 8 < 4 ? 0 : 1) + (p % 8 < 4 ? 0 : 2);
            d->x[i * 64 + (size_t)p] = (float)(0.5 * hpml_rng_normal(&rng) + (q == c ? 1.0 : 0.0));
        }
    }
}

static hpml_model_t *run(hpml_comm_t *comm, hpml_train_config_t *cfg, const hpml_dataset_t *d)
{
    hpml_model_t *m = NULL;

    HPMLT_CALL(hpml_train(comm, cfg, d, NULL, NULL, NULL, NULL, &m));
    return m;
}

int main(int argc, char **argv)
{
    hpml_comm_t *world = NULL, *self = NULL;
    hpml_train_config_t cfg;
    hpml_dataset_t d;
    hpml_model_t *mp, *m1, *full, *resumed, *bad = NULL;
    char dir[256];
    long pid;

    hpmlt_init(&argc, &argv, "nn_train");
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &world));
    HPMLT_CALL(hpml_comm_create(MPI_COMM_SELF, NULL, &self));
    make_data(&d, 300);
    hpml_train_config_default(&cfg);
    cfg.spec = SPEC;
    cfg.epochs = 2;
    cfg.batch = 32; /* 300 = 9*32 + 12; 32 does not divide by 3 */
    cfg.opt.lr = 0.05;
    cfg.first_bucket_bytes = 256; /* several buckets even for this small model */

    /* P ranks vs 1 rank. */
    mp = run(world, &cfg, &d);
    m1 = run(self, &cfg, &d);
    if (mp && m1) {
        size_t n = hpml_model_num_params(mp);
        double maxd = 0, maxv = 0;
        for (size_t i = 0; i < n; i++) {
            maxd = fmax(maxd, fabs((double)hpml_model_params(mp)[i] - hpml_model_params(m1)[i]));
            maxv = fmax(maxv, fabs((double)hpml_model_params(m1)[i]));
        }
        HPMLT_CHECK(maxd <= 1e-4 * fmax(1.0, maxv), "max |params(P) - params(1)| = %g", maxd);
    }

    /* Blocking allreduce after backward and 16-bit gradients on the wire train the same
     * model (exactly, resp. to within the rounding of the gradients). */
    {
        hpml_dtype_t dts[3] = {HPML_F32, HPML_F16, HPML_BF16};
        for (int k = 0; k < 3 && mp; k++) {
            hpml_model_t *mk;
            double maxd = 0, tol = k == 0 ? 1e-6 : k == 1 ? 2e-3 : 2e-2;
            cfg.overlap = k != 0;
            cfg.grad_dtype = dts[k];
            mk = run(world, &cfg, &d);
            for (size_t i = 0; mk && i < hpml_model_num_params(mp); i++)
                maxd =
                    fmax(maxd, fabs((double)hpml_model_params(mp)[i] - hpml_model_params(mk)[i]));
            HPMLT_CHECK(mk && maxd <= tol, "%s gradients, overlap %d: max diff %g (tolerance %g)",
                        hpml_dtype_name(dts[k]), cfg.overlap, maxd, tol);
            hpml_model_destroy(mk);
        }
        cfg.overlap = 1;
        cfg.grad_dtype = HPML_F32;
    }

    /* The sharded optimizer update (the default at P > 1: each rank updates the
     * parameters it reduces) and the replicated one give the same bits, here with AdamW
     * (two moments, decoupled decay). A checkpoint made by the sharded run holds moments
     * gathered from the ranks that own them: resuming from it, sharded or replicated,
     * reproduces the uninterrupted run bit for bit (a stale moment would not). This
     * model's buckets are small enough for the shared-memory allreduce's one-step path,
     * where every rank updates everything: a communicator with that path off and small
     * pipeline chunks makes the ranks own interleaved slices. */
    {
        hpml_train_config_t c2 = cfg;
        hpml_model_t *rep, *sh, *res_sh, *res_rep;
        hpml_comm_t *sliced = NULL;
        char dir2[256];
        size_t n;

        setenv("HPML_SHM_SMALL", "1", 1);
        setenv("HPML_SHM_CHUNK", "512", 1);
        HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &sliced));

        c2.opt.kind = HPML_OPT_ADAMW;
        c2.opt.lr = 0.01;
        c2.opt.weight_decay = 0.01;
        c2.sharded_update = 0;
        rep = run(sliced, &c2, &d);
        c2.sharded_update = 1;
        sh = run(sliced, &c2, &d);
        n = rep ? hpml_model_num_params(rep) : 0;
        HPMLT_CHECK(rep && sh &&
                        memcmp(hpml_model_params(rep), hpml_model_params(sh), n * sizeof(float)) ==
                            0,
                    "sharded and replicated updates differ");
        pid = (long)getpid();
        MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        snprintf(dir2, sizeof(dir2), "/tmp/hpml_nn_ckpt_adamw_%ld_%d", pid, hpmlt_size());
        c2.checkpoint_dir = dir2;
        c2.checkpoint_every = 5;
        c2.max_steps = 5;
        hpml_model_destroy(run(sliced, &c2, &d));
        c2.max_steps = 0;
        c2.checkpoint_every = 1000; /* no further checkpoint: the same one twice */
        c2.resume = 1;
        res_sh = run(sliced, &c2, &d);
        c2.sharded_update = 0;
        res_rep = run(sliced, &c2, &d);
        HPMLT_CHECK(
            sh && res_sh &&
                memcmp(hpml_model_params(sh), hpml_model_params(res_sh), n * sizeof(float)) == 0,
            "sharded run resumed sharded differs from the uninterrupted one");
        HPMLT_CHECK(
            sh && res_rep &&
                memcmp(hpml_model_params(sh), hpml_model_params(res_rep), n * sizeof(float)) == 0,
            "sharded run resumed replicated differs from the uninterrupted one");
        /* The same from a checkpoint written at the end of epoch 1 (the other place that
         * gathers the moments), without overlap (blocking allreduces). */
        hpml_model_destroy(res_sh);
        c2.sharded_update = 1;
        c2.overlap = 0;
        c2.resume = 0;
        c2.checkpoint_every = 0;
        c2.epochs = 1;
        hpml_model_destroy(run(sliced, &c2, &d));
        c2.epochs = cfg.epochs;
        c2.resume = 1;
        res_sh = run(sliced, &c2, &d);
        HPMLT_CHECK(
            sh && res_sh &&
                memcmp(hpml_model_params(sh), hpml_model_params(res_sh), n * sizeof(float)) == 0,
            "blocking sharded run resumed from an epoch-end checkpoint differs from the "
            "uninterrupted overlapped one");
        MPI_Barrier(MPI_COMM_WORLD);
        if (hpmlt_rank() == 0) {
            char path[300];
            snprintf(path, sizeof(path), "%s/checkpoint.hpml", dir2);
            unlink(path);
            rmdir(dir2);
        }
        hpml_model_destroy(rep);
        hpml_model_destroy(sh);
        hpml_model_destroy(res_sh);
        hpml_model_destroy(res_rep);
        hpml_comm_destroy(sliced);
        unsetenv("HPML_SHM_SMALL");
        unsetenv("HPML_SHM_CHUNK");
    }

    /* Checkpoint after 7 steps, resume, compare with the uninterrupted run bit for bit.
     * Overlap off here too would be equally valid; keep the default (overlapped). */
    pid = (long)getpid();
    MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    snprintf(dir, sizeof(dir), "/tmp/hpml_nn_ckpt_%ld_%d", pid, hpmlt_size());
    full = run(world, &cfg, &d);
    cfg.checkpoint_dir = dir;
    cfg.checkpoint_every = 7;
    cfg.max_steps = 7;
    hpml_model_destroy(run(world, &cfg, &d));
    cfg.max_steps = 0;
    cfg.checkpoint_every = 0;
    cfg.resume = 1;
    resumed = run(world, &cfg, &d);
    if (full && resumed)
        HPMLT_CHECK(memcmp(hpml_model_params(full), hpml_model_params(resumed),
                           hpml_model_num_params(full) * sizeof(float)) == 0,
                    "resumed run differs from the uninterrupted one");

    /* Corrupt the checkpoint: a clear error on every rank, no crash. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (hpmlt_rank() == 0) {
        char path[300];
        FILE *f;
        snprintf(path, sizeof(path), "%s/checkpoint.hpml", dir);
        f = fopen(path, "r+b");
        HPMLT_OK(f != NULL);
        if (f) {
            fseek(f, 100, SEEK_SET);
            fputc(0xff ^ fgetc(f), f);
            fclose(f);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    {
        int rc = hpml_train(world, &cfg, &d, NULL, NULL, NULL, NULL, &bad);
        HPMLT_CHECK(rc == HPML_ERR_FORMAT, "corrupt checkpoint gave %d (%s)", rc,
                    hpml_last_error());
        if (hpmlt_rank() == 0)
            HPMLT_CHECK(strstr(hpml_last_error(), "checksum") != NULL, "message: %s",
                        hpml_last_error());
        HPMLT_OK(bad == NULL);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (hpmlt_rank() == 0) {
        char path[300];
        snprintf(path, sizeof(path), "%s/checkpoint.hpml", dir);
        unlink(path);
        rmdir(dir);
    }
    hpml_model_destroy(mp);
    hpml_model_destroy(m1);
    hpml_model_destroy(full);
    hpml_model_destroy(resumed);
    hpml_dataset_free(&d);
    hpml_comm_destroy(self);
    hpml_comm_destroy(world);
    return hpmlt_finish();
}
