/*
 * Data-parallel training properties: P ranks with global batch B reach the same
 * parameters as 1 rank with batch B (dropout included: its mask is keyed by the global
 * sample index), for a batch that does not divide by P; the sharded and replicated
 * optimizer updates agree, bit for bit where both sum the gradients alike, on one node,
 * on virtual nodes and without a progress thread; a run resumed from a checkpoint ends
 * bit-identical to the uninterrupted run; a corrupt checkpoint is a clear error.
 *
 * hpml-test: ranks=1 2 3
 * hpml-test: mpich-ranks=1 2 3
 * hpml-test: timeout=240
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn_util.h"

#define SPEC "conv 4 3x3 pad1 relu | pool 2 | dropout 0.2 | dense 16 relu | dense 3"

/* max |p| over a run's parameters. */
static double max_abs(hpml_model_t *m)
{
    double v = 0;

    for (size_t i = 0; i < hpml_model_num_params(m); i++)
        v = fmax(v, fabs((double)hpml_model_params(m)[i]));
    return v;
}

/* max |a - b| over the parameters of two runs of one model; infinite when one failed. */
static double max_diff(hpml_model_t *a, hpml_model_t *b)
{
    double v = 0;

    if (a == NULL || b == NULL)
        return INFINITY;
    for (size_t i = 0; i < hpml_model_num_params(a); i++)
        v = fmax(v, fabs((double)hpml_model_params(a)[i] - hpml_model_params(b)[i]));
    return v;
}

/* `adamw` on comm (`layout` names it in messages): the replicated and the sharded
 * update end within tol × max(1, max |p|) of each other (tol 0: the same bits), and the
 * sharded run checkpointed after 5 steps in dir and resumed sharded ends bit-identical
 * to the uninterrupted one, which needs every moment in the checkpoint to be current
 * (gathered from the rank that updates it). Returns the uninterrupted sharded run; the
 * checkpoint stays in dir. */
static hpml_model_t *check_sharded(hpml_comm_t *comm, const hpml_train_config_t *adamw,
                                   const hpml_dataset_t *d, const char *dir, double tol,
                                   const char *layout)
{
    hpml_train_config_t c = *adamw;
    hpml_model_t *rep, *sh, *res;
    double maxd;

    c.sharded_update = 0;
    rep = nnt_run(comm, &c, d);
    c.sharded_update = 1;
    sh = nnt_run(comm, &c, d);
    maxd = max_diff(rep, sh);
    tol *= rep ? fmax(1.0, max_abs(rep)) : 1.0;
    HPMLT_CHECK(tol > 0 ? maxd <= tol : nnt_same_bits(rep, sh),
                "%s: sharded and replicated updates differ by up to %g (tolerance %g)", layout,
                maxd, tol);
    c.checkpoint_dir = dir;
    c.checkpoint_every = 5;
    c.max_steps = 5;
    hpml_model_destroy(nnt_run(comm, &c, d));
    c.max_steps = 0;
    c.checkpoint_every = 1000; /* no further checkpoint: the caller may resume from it too */
    c.resume = 1;
    res = nnt_run(comm, &c, d);
    HPMLT_CHECK(nnt_same_bits(sh, res),
                "%s: sharded run resumed sharded differs from the uninterrupted one", layout);
    hpml_model_destroy(rep);
    hpml_model_destroy(res);
    return sh;
}

int main(int argc, char **argv)
{
    hpml_comm_t *world = NULL, *self = NULL;
    hpml_train_config_t cfg, adamw;
    hpml_dataset_t d;
    hpml_model_t *mp, *m1, *full, *resumed, *sh1, *bad = NULL;
    char dir[256];
    double steps;

    hpmlt_init(&argc, &argv, "nn_train");
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &world));
    HPMLT_CALL(hpml_comm_create(MPI_COMM_SELF, NULL, &self));
    nnt_make_data(&d, 300, 99);
    hpml_train_config_default(&cfg);
    cfg.spec = SPEC;
    cfg.epochs = 2;
    cfg.batch = 32; /* 300 = 9*32 + 12; 32 does not divide by 3 */
    cfg.opt.lr = 0.05;
    cfg.first_bucket_bytes = 256; /* several buckets even for this small model */

    /* P ranks vs 1 rank. */
    mp = nnt_run(world, &cfg, &d);
    m1 = nnt_run(self, &cfg, &d);
    if (mp && m1) {
        double maxd = max_diff(mp, m1);
        HPMLT_CHECK(maxd <= 1e-4 * fmax(1.0, max_abs(m1)), "max |params(P) - params(1)| = %g",
                    maxd);
    }

    /* Blocking allreduce after backward and 16-bit gradients on the wire train the same
     * model (exactly, resp. to within the rounding of the gradients). */
    {
        hpml_dtype_t dts[3] = {HPML_F32, HPML_F16, HPML_BF16};
        for (int k = 0; k < 3 && mp; k++) {
            hpml_model_t *mk;
            double maxd, tol = k == 0 ? 1e-6 : k == 1 ? 2e-3 : 2e-2;
            cfg.overlap = k != 0;
            cfg.grad_dtype = dts[k];
            mk = nnt_run(world, &cfg, &d);
            maxd = max_diff(mp, mk);
            HPMLT_CHECK(mk && maxd <= tol, "%s gradients, overlap %d: max diff %g (tolerance %g)",
                        hpml_dtype_name(dts[k]), cfg.overlap, maxd, tol);
            hpml_model_destroy(mk);
        }
        cfg.overlap = 1;
        cfg.grad_dtype = HPML_F32;
    }

    /* The sharded optimizer update (the default at P > 1: each rank updates the
     * parameters it reduces) against the replicated one, with AdamW (two moments,
     * decoupled decay). */
    adamw = cfg;
    adamw.opt.kind = HPML_OPT_ADAMW;
    adamw.opt.lr = 0.01;
    adamw.opt.weight_decay = 0.01;

    /* On one node they give the same bits. A checkpoint made by the sharded run holds
     * moments gathered from the ranks that own them: resuming from it, sharded or
     * replicated, reproduces the uninterrupted run bit for bit. This model's buckets are
     * small enough for the shared-memory allreduce's one-step path, where every rank
     * updates everything: a communicator with that path off and small pipeline chunks
     * makes the ranks own interleaved slices. */
    setenv("HPML_SHM_SMALL", "1", 1);
    setenv("HPML_SHM_CHUNK", "512", 1);
    {
        hpml_train_config_t c2 = adamw;
        hpml_model_t *res;
        hpml_comm_t *sliced = NULL;

        HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &sliced));
        nnt_ckpt_dir(dir, sizeof(dir), "nn_ckpt_adamw");
        sh1 = check_sharded(sliced, &adamw, &d, dir, 0, "one node");
        c2.checkpoint_dir = dir;
        c2.checkpoint_every = 1000; /* no further checkpoint: resume from the same one */
        c2.resume = 1;
        c2.sharded_update = 0;
        res = nnt_run(sliced, &c2, &d);
        HPMLT_CHECK(nnt_same_bits(sh1, res),
                    "sharded run resumed replicated differs from the uninterrupted one");
        hpml_model_destroy(res);
        /* The same from a checkpoint written at the end of epoch 1 (the other place that
         * gathers the moments), without overlap (blocking allreduces). */
        c2.sharded_update = 1;
        c2.overlap = 0;
        c2.resume = 0;
        c2.checkpoint_every = 0;
        c2.epochs = 1;
        hpml_model_destroy(nnt_run(sliced, &c2, &d));
        c2.epochs = adamw.epochs;
        c2.resume = 1;
        res = nnt_run(sliced, &c2, &d);
        HPMLT_CHECK(nnt_same_bits(sh1, res),
                    "blocking sharded run resumed from an epoch-end checkpoint differs from the "
                    "uninterrupted overlapped one");
        hpml_model_destroy(res);
        nnt_ckpt_remove(dir);
        hpml_comm_destroy(sliced);
    }

    /* Virtual nodes of k ranks (the last one smaller when k does not divide P, as 2+1),
     * with the same small chunks: the sharded update takes the hierarchical path (each
     * 512-byte piece's slices summed on their node, then across the nodes by MPI among
     * the slice's owners, who update it), the replicated one sums each of these small
     * buckets in one call of MPI's allreduce over all ranks (select.c). At two ranks each
     * sum is one addition, the same in any algorithm, so both give the bits of the
     * one-node run. With more ranks the addends may associate differently, so a summed
     * gradient may differ by a rounding. AdamW divides each step by the gradient's own
     * scale, so that changes a step by a relative rounding, far below a parameter's ulp;
     * what is left is the rounding of the parameter itself, at most one ulp of the
     * largest one per step (unless a gradient cancels to within a rounding of its
     * addends, which this data does not do). A parameter whose update is skipped or done
     * twice moves by about lr, 10^3 times more. A resumed sharded run takes the same path
     * as the uninterrupted one: the same bits. */
    steps = (double)adamw.epochs * (double)((d.n + adamw.batch - 1) / adamw.batch);
    for (int k = 1; k < hpmlt_size(); k++) {
        hpml_comm_config_t vc = {.check = 0, .ranks_per_node = k};
        hpml_comm_t *vnodes = NULL;
        hpml_model_t *sh;
        char layout[64];

        snprintf(layout, sizeof(layout), "virtual nodes of %d", k);
        HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, &vc, &vnodes));
        nnt_ckpt_dir(dir, sizeof(dir), "nn_ckpt_vnodes");
        sh = check_sharded(vnodes, &adamw, &d, dir, hpmlt_size() == 2 ? 0 : steps * FLT_EPSILON,
                           layout);
        if (hpmlt_size() == 2)
            HPMLT_CHECK(nnt_same_bits(sh1, sh), "%s: the sharded run differs from the one-node one",
                        layout);
        hpml_model_destroy(sh);
        nnt_ckpt_remove(dir);
        hpml_comm_destroy(vnodes);
    }
    unsetenv("HPML_SHM_SMALL");
    unsetenv("HPML_SHM_CHUNK");

    /* Without a progress thread (HPML_PROGRESS=mpi, read when a communicator starts its
     * first nonblocking operation) the apply is MPI's nonblocking allreduce of the bucket
     * into a temporary buffer, then the update of every element on every rank. The
     * replicated update sums the same bucket with the same MPI call (in place, which MPI
     * reduces alike), and the update is the same elementwise arithmetic: the same bits,
     * at any rank count. Every rank's moments are current, and at two ranks (one addition
     * per sum) the run has the progress thread's bits too. */
    setenv("HPML_PROGRESS", "mpi", 1);
    {
        hpml_comm_t *mpi_mode = NULL;
        hpml_model_t *sh;

        HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &mpi_mode));
        nnt_ckpt_dir(dir, sizeof(dir), "nn_ckpt_mpi_progress");
        sh = check_sharded(mpi_mode, &adamw, &d, dir, 0, "HPML_PROGRESS=mpi");
        if (hpmlt_size() == 2)
            HPMLT_CHECK(nnt_same_bits(sh1, sh),
                        "HPML_PROGRESS=mpi: the sharded run differs from the progress thread's");
        hpml_model_destroy(sh);
        nnt_ckpt_remove(dir);
        hpml_comm_destroy(mpi_mode);
    }
    unsetenv("HPML_PROGRESS");

    /* Checkpoint after 7 steps, resume, compare with the uninterrupted run bit for bit.
     * Overlap off here too would be equally valid; keep the default (overlapped). */
    nnt_ckpt_dir(dir, sizeof(dir), "nn_ckpt");
    full = nnt_run(world, &cfg, &d);
    cfg.checkpoint_dir = dir;
    cfg.checkpoint_every = 7;
    cfg.max_steps = 7;
    hpml_model_destroy(nnt_run(world, &cfg, &d));
    cfg.max_steps = 0;
    cfg.checkpoint_every = 0;
    cfg.resume = 1;
    resumed = nnt_run(world, &cfg, &d);
    HPMLT_CHECK(nnt_same_bits(full, resumed), "resumed run differs from the uninterrupted one");

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
    nnt_ckpt_remove(dir);
    hpml_model_destroy(mp);
    hpml_model_destroy(m1);
    hpml_model_destroy(sh1);
    hpml_model_destroy(full);
    hpml_model_destroy(resumed);
    hpml_dataset_free(&d);
    hpml_comm_destroy(self);
    hpml_comm_destroy(world);
    return hpmlt_finish();
}
