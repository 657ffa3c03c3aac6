/*
 * The pipeline layout (stages x micro-batches x replicas) trains the model that the
 * data-parallel layout trains on the same global batches: the same parameters within
 * 1e-5 relative after an epoch, for S = 2 and 3 stages, M = 1, 2 and 5 micro-batches (M < S
 * included), uniform and listed partitions, each stage keeping at most M (GPipe) or
 * min(M, S - s) (1F1B) micro-batches, a convolution, pooling and dropout inside the
 * stages, a last batch smaller than the micro-batches; with more ranks than stages, the
 * replicas of each stage sum their gradients. GPipe, 1F1B and recomputation give the same
 * bits. A checkpointed and resumed pipeline run ends with the bits of the uninterrupted
 * one. --partition auto's dynamic programme finds the exhaustive search's slowest stage
 * within the memory limit; a model that --memory-limit refuses under data-parallel trains
 * under an auto-partitioned pipeline. With row-sharded data whose images only the first
 * stage and whose labels only the last stage holds, each replica's stages walk the
 * replica's block in one order: the pipeline of R replicas trains what data-parallel
 * training on R ranks, each holding one block, trains, and resumes from a checkpoint to the
 * uninterrupted run's bits. Impossible requests are one clear error on every rank before
 * training.
 *
 * hpml-test: ranks=2 3 4
 * hpml-test: mpich-ranks=2 3
 * hpml-test: timeout=120
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hpml/io.h"
#include "nn/layout.h"
#include "nn_util.h"

/* 6 layers: the relus fuse into the conv and the dense layers. */
#define SPEC "conv 4 3x3 pad1 relu | pool 2 | dense 16 relu | dropout 0.2 | dense 8 relu | dense 3"

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

/* The last epoch's stage reports. */
typedef struct {
    hpml_stage_report_t st[8];
    int n;
    double theory;
} stages_t;

static void keep_stages(void *ctx, const hpml_epoch_report_t *r)
{
    stages_t *k = ctx;

    k->n = r->nstages < 8 ? r->nstages : 8;
    memcpy(k->st, r->stages, (size_t)k->n * sizeof(hpml_stage_report_t));
    k->theory = r->bubble_theory;
}

/* hpml_train with the stage reports kept. */
static hpml_model_t *run_reported(hpml_comm_t *comm, const hpml_train_config_t *cfg,
                                  const hpml_dataset_t *d, stages_t *k)
{
    hpml_model_t *m = NULL;

    memset(k, 0, sizeof(*k));
    HPMLT_CALL(hpml_train(comm, cfg, d, NULL, keep_stages, NULL, k, &m));
    return m;
}

/* Each stage kept at most M micro-batches under GPipe, min(M, S - s) under 1F1B (exactly
 * that many: every micro-batch has samples here), and reported S stages. */
static void check_live(const stages_t *k, int S, int M, int f1b1)
{
    HPMLT_CHECK(k->n == S && fabs(k->theory - (double)(S - 1) / (M + S - 1)) < 1e-12,
                "S=%d M=%d: %d stage reports, theory %g", S, M, k->n, k->theory);
    for (int s = 0; s < k->n; s++) {
        int want = f1b1 ? (S - s < M ? S - s : M) : M;
        HPMLT_CHECK(k->st[s].peak_live == want, "S=%d M=%d %s: stage %d kept %d micro-batches", S,
                    M, f1b1 ? "1F1B" : "GPipe", s, k->st[s].peak_live);
    }
}

/* S stages, partition part: against data-parallel for every M; GPipe = 1F1B = recompute. */
static void check_stages(hpml_comm_t *world, const hpml_train_config_t *cfg,
                         const hpml_dataset_t *d, hpml_model_t *data, int S, const char *part)
{
    static const int Ms[] = {1, 2, 5};

    for (size_t k = 0; k < sizeof(Ms) / sizeof(Ms[0]); k++) {
        hpml_train_config_t c = *cfg;
        hpml_model_t *g, *f, *rc;

        stages_t kg, kf;

        c.stages = S;
        c.micro_batches = Ms[k];
        c.partition = part;
        g = run_reported(world, &c, d, &kg);
        c.schedule = HPML_SCHEDULE_1F1B;
        f = run_reported(world, &c, d, &kf);
        check_live(&kg, S, Ms[k], 0);
        check_live(&kf, S, Ms[k], 1);
        c.recompute = 1;
        rc = nnt_run(world, &c, d);
        HPMLT_CHECK(nnt_rel_diff(data, g) <= 1e-5, "S=%d M=%d %s: pipeline vs data-parallel: %g", S,
                    Ms[k], part ? part : "uniform", nnt_rel_diff(data, g));
        HPMLT_CHECK(nnt_same_bits(g, f), "S=%d M=%d: GPipe and 1F1B differ (%g)", S, Ms[k],
                    nnt_rel_diff(g, f));
        HPMLT_CHECK(nnt_same_bits(f, rc), "S=%d M=%d: recompute changes the bits (%g)", S, Ms[k],
                    nnt_rel_diff(f, rc));
        HPMLT_CHECK(g && nnt_same_on_all_ranks(g), "S=%d M=%d: the ranks' models differ", S, Ms[k]);
        hpml_model_destroy(g);
        hpml_model_destroy(f);
        hpml_model_destroy(rc);
    }
}

/* Checkpoint after 3 steps, resume to the end: the uninterrupted run's bits. */
static void check_resume(hpml_comm_t *world, const hpml_train_config_t *cfg,
                         const hpml_dataset_t *d, int S)
{
    hpml_train_config_t c = *cfg;
    hpml_model_t *whole, *first, *rest;
    char dir[256];

    c.stages = S;
    c.micro_batches = 2;
    c.schedule = HPML_SCHEDULE_1F1B;
    c.opt.kind = HPML_OPT_ADAMW; /* moments of every stage gathered */
    c.opt.lr = 0.01;
    whole = nnt_run(world, &c, d);
    nnt_ckpt_dir(dir, sizeof(dir), "pipe");
    c.checkpoint_dir = dir;
    c.checkpoint_every = 3;
    c.max_steps = 3;
    first = nnt_run(world, &c, d);
    c.max_steps = 0;
    c.resume = 1;
    rest = nnt_run(world, &c, d);
    HPMLT_CHECK(nnt_same_bits(whole, rest), "S=%d: resumed run differs (%g)", S,
                nnt_rel_diff(whole, rest));
    nnt_ckpt_remove(dir);
    hpml_model_destroy(whole);
    hpml_model_destroy(first);
    hpml_model_destroy(rest);
}

/* Every cut of L layers into S non-empty stages (bounds b[1..S-1] increasing): the
 * smallest slowest stage within the limit, or -1. */
static double exhaustive(const double *cost, const double *mem, const double *act,
                         const double *edge, int L, int S, const int *keep, double limit, int *b,
                         int s)
{
    double best = -1;

    if (s == S) {
        double slow = 0;
        b[S] = L;
        for (int t = 0; t < S; t++) {
            double c = 0, m = edge[b[t]] + edge[b[t + 1]];
            if (b[t + 1] <= b[t])
                return -1;
            for (int l = b[t]; l < b[t + 1]; l++)
                c += cost[l], m += mem[l] + keep[t] * act[l];
            if (limit > 0 && m > limit)
                return -1;
            slow = c > slow ? c : slow;
        }
        return slow;
    }
    for (int i = b[s - 1] + 1; i < L; i++) {
        double v;
        b[s] = i;
        v = exhaustive(cost, mem, act, edge, L, S, keep, limit, b, s + 1);
        if (v >= 0 && (best < 0 || v < best))
            best = v;
    }
    return best;
}

/* hpml__pipe_balance against the exhaustive search on random layers, with and without a
 * memory limit. Local. */
static void check_balance(void)
{
    hpml_rng_t rng;

    hpml_rng_init(&rng, 5, (uint64_t)hpmlt_rank());
    for (int trial = 0; trial < 300; trial++) {
        const int L = 1 + (int)hpml_rng_below(&rng, 9), S = 1 + (int)hpml_rng_below(&rng, 4);
        double cost[10], mem[10], act[10], edge[11], slow = -1, want, limit = 0;
        int keep[4], b[5] = {0}, got[5] = {0}, rc;

        for (int l = 0; l < L; l++) {
            cost[l] = hpml_rng_uniform(&rng);
            mem[l] = 100 * hpml_rng_uniform(&rng);
            act[l] = 10 * hpml_rng_uniform(&rng);
            edge[l] = l ? 5 * hpml_rng_uniform(&rng) : 0;
        }
        edge[L] = 0;
        for (int t = 0; t < S; t++)
            keep[t] = 1 + (int)hpml_rng_below(&rng, 3);
        if (trial % 2)
            limit = 30 + 200 * hpml_rng_uniform(&rng);
        want = S <= L ? exhaustive(cost, mem, act, edge, L, S, keep, limit, b, 1) : -1;
        rc = hpml__pipe_balance(cost, mem, act, edge, L, S, keep, limit, got, &slow);
        if (want < 0) {
            HPMLT_CHECK(rc == HPML_ERR_INVAL, "L=%d S=%d limit %g: no cut fits, got %d", L, S,
                        limit, rc);
            continue;
        }
        HPMLT_CHECK(rc == 0 && slow == want, "L=%d S=%d limit %g: slowest %g, exhaustive %g", L, S,
                    limit, slow, want);
        for (int t = 0; rc == 0 && t < S; t++)
            HPMLT_CHECK(got[t + 1] > got[t], "L=%d S=%d: stage %d empty", L, S, t);
    }
}

/* Sharded, S = 2 on P ranks (R = P / 2 replicas): replica r's block of the rows, its images
 * on stage 0 only and its labels on stage 1 only (the other parts NULL), against
 * data-parallel training on R ranks holding those blocks whole (the world split in two
 * such groups, each a copy). */
static void check_sharded(hpml_comm_t *world, const hpml_train_config_t *cfg,
                          const hpml_dataset_t *d)
{
    const int P = hpmlt_size(), s = hpmlt_rank() % 2, r = hpmlt_rank() / 2;
    hpml_train_config_t c = *cfg;
    hpml_dataset_t whole = *d, part;
    hpml_comm_t *group = NULL;
    MPI_Comm mg;
    hpml_model_t *a, *b;
    size_t r0, r1;

    hpml_io_partition(d->n, r, P / 2, &r0, &r1);
    whole.x = d->x + r0 * 64;
    whole.y = d->y + r0;
    whole.n = r1 - r0;
    whole.offset = r0;
    part = whole;
    part.x = s == 0 ? whole.x : NULL;
    part.y = s == 1 ? whole.y : NULL;
    MPI_Comm_split(MPI_COMM_WORLD, s, r, &mg);
    HPMLT_CALL(hpml_comm_create(mg, NULL, &group));
    c.parallel = HPML_PARALLEL_DATA;
    a = nnt_run(group, &c, &whole);
    c.parallel = HPML_PARALLEL_AUTO;
    c.stages = 2;
    c.micro_batches = 3;
    b = nnt_run(world, &c, &part);
    nnt_expect_close(a, b, 1e-5, "sharded: S=2 pipeline vs data-parallel on its replicas");
    check_resume(world, cfg, &part, 2); /* on those blocks and parts too */
    hpml_comm_destroy(group);
    MPI_Comm_free(&mg);
}

int main(int argc, char **argv)
{
    hpml_comm_t *world = NULL;
    hpml_train_config_t cfg, c;
    hpml_model_t *data;
    hpml_dataset_t d;
    int P;

    hpmlt_init(&argc, &argv, "nn_pipe");
    P = hpmlt_size();
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &world));
    nnt_make_data(&d, 130, 7);
    hpml_train_config_default(&cfg);
    cfg.spec = SPEC;
    cfg.epochs = 1;
    cfg.batch = 24; /* 130 = 5*24 + 10: the last batch has 10 samples */
    cfg.opt.lr = 0.05;
    cfg.parallel = HPML_PARALLEL_DATA;

    c = cfg;
    data = nnt_run(world, &c, &d);
    cfg.parallel = HPML_PARALLEL_AUTO;
    for (int S = 2; S <= 3; S++) {
        if (P % S != 0)
            continue;
        check_stages(world, &cfg, &d, data, S, NULL);
        check_stages(world, &cfg, &d, data, S, S == 2 ? "1,5" : "3,1,2");
        check_resume(world, &cfg, &d, S);
    }
    /* A batch of P in 5 micro-batches: some are empty (the same on every stage). */
    {
        hpml_model_t *a, *b;
        c = cfg;
        c.batch = (size_t)P; /* data-parallel: a sample on every rank */
        c.max_steps = 4;
        c.parallel = HPML_PARALLEL_DATA;
        a = nnt_run(world, &c, &d);
        c.parallel = HPML_PARALLEL_AUTO;
        c.stages = P % 3 == 0 ? 3 : 2;
        c.micro_batches = 5;
        b = nnt_run(world, &c, &d);
        nnt_expect_close(a, b, 1e-5, "a batch of P in 5 micro-batches");
    }

    if (P % 2 == 0)
        check_sharded(world, &cfg, &d);
    check_balance();
    /* A limit between the pipeline's stages and the whole model of a model whose memory is
     * its parameters (Adam: two moments): data-parallel refuses it, the auto-partitioned
     * pipeline trains the same model. */
    if (P % 2 == 0) {
        hpml_model_t *full = NULL, *a, *b;
        c = cfg;
        c.spec = "dense 256 relu | dense 256 relu | dense 256 relu | dense 3";
        c.opt.kind = HPML_OPT_ADAM;
        c.opt.lr = 0.01;
        c.max_steps = 3;
        c.parallel = HPML_PARALLEL_DATA;
        a = nnt_run(world, &c, &d);
        HPMLT_CALL(hpml_model_create(c.spec, 1, 8, 8, &full));
        c.memory_limit = (size_t)(0.75 * hpml__model_bytes(&c, full, (c.batch + P - 1) / P));
        expect_inval(world, &c, &d, "more than --memory-limit");
        c.parallel = HPML_PARALLEL_AUTO;
        c.stages = 2;
        c.partition = "auto";
        b = nnt_run(world, &c, &d);
        HPMLT_CHECK(nnt_rel_diff(a, b) <= 1e-5, "auto partition under a memory limit: %g",
                    nnt_rel_diff(a, b));
        c.memory_limit = 1000;
        expect_inval(world, &c, &d, "no cut of the 4 layers into 2 pipeline stages");
        hpml_model_destroy(full);
        hpml_model_destroy(a);
        hpml_model_destroy(b);
    }

    /* What cannot work: one error on every rank, before training. */
    c = cfg;
    c.stages = 7;
    expect_inval(world, &c, &d, "7 pipeline stages for a model of 6 layers");
    c.stages = P == 2 ? 3 : 2;
    if (P % c.stages != 0)
        expect_inval(world, &c, &d, "not a multiple of the");
    c.stages = 2;
    c.partition = "2,3";
    if (P % 2 == 0) {
        expect_inval(world, &c, &d, "lists 2 stages of 5 layers");
        c.partition = "0,6";
        expect_inval(world, &c, &d, "each from 1 to 6");
        c.partition = "3,x";
        expect_inval(world, &c, &d, "each from 1 to 6");
        c.partition = "2,2,2";
        expect_inval(world, &c, &d, "more than the 2 stages");
        c.partition = NULL;
        c.parallel = HPML_PARALLEL_HYBRID;
        expect_inval(world, &c, &d, "not with --parallel hybrid");
        c.parallel = HPML_PARALLEL_AUTO;
        c.grad_dtype = HPML_F16;
        expect_inval(world, &c, &d, "sums its gradients in f32");
    }
    hpml_model_destroy(data);
    hpml_dataset_free(&d);
    hpml_comm_destroy(world);
    return hpmlt_finish();
}
