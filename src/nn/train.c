/*
 * Training over an hpml communicator: hpml_train, epochs of steps over a data set, and
 * hpml_train_synthetic, Horovod's synthetic benchmark, are loops around one trainer step
 * (trainer.c); how a step is spread over the ranks is the layout's (layout.h).
 *
 * Each epoch the sample order is a permutation that depends only on (seed, epoch), so the
 * global batches are the same at any rank count, and so is the model; rank r takes its
 * block of each global batch (hpml_io_partition). With row-sharded data each rank shuffles
 * and walks its own rows instead. A pipeline's unit is the replica: every stage of replica
 * r takes the same samples in the same order (the first stage their images, the last their
 * labels), its block of the batch or, sharded, of the rows.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hpml/io.h"
#include "nn/trainer.h"

/* The state of an hpml_train run between its steps. */
typedef struct {
    nn_trainer_t *t;
    const hpml_train_config_t *cfg;
    const hpml_dataset_t *train, *test;
    int shard_rows; /* this rank holds only its block of the training rows */
    uint32_t *perm; /* this epoch's sample order */
    size_t B, lb;   /* global batch, the largest share of one rank */
    size_t stride;  /* sharded: the rows of its block a rank walks per step */
    long steps_per_epoch, total_steps;
    double t_start;    /* when training started, less the evaluations */
    double resumed_at; /* samples of the epoch seen before a resume */
    long start_step;   /* global step at the start of this run (a resume's checkpoint) */
    int start_epoch;   /* its 0-based epoch */
    hpml_report_fn report;
    hpml_progress_fn progress;
    void *ctx;
    hpml_stage_report_t stages[64]; /* the pipeline's, for the report */
} run_t;

static int check_data(const hpml_comm_t *comm, const hpml_train_config_t *cfg,
                      const hpml_dataset_t *train, const hpml_dataset_t *test);
static int blocks(const hpml_train_config_t *cfg, int P);
static int block(const nn_trainer_t *t);
static int open_run(run_t *r, hpml_comm_t *comm);
static int run_epoch(run_t *r, int *stop);
static int end_epoch(run_t *r, double t_epoch, int stop);

int hpml_train(hpml_comm_t *comm, const hpml_train_config_t *cfg, const hpml_dataset_t *train,
               const hpml_dataset_t *test, hpml_report_fn report, hpml_progress_fn progress,
               void *ctx, hpml_model_t **out)
{
    nn_trainer_t t;
    run_t r = {.t = &t,
               .cfg = cfg,
               .train = train,
               .test = test,
               .report = report,
               .progress = progress,
               .ctx = ctx};
    nn_ckpt_t *st = &t.st;
    int err;

    *out = NULL;
    memset(&t, 0, sizeof(t));
    /* Before the first collective, checks of what every rank has (the file's shape, the
     * configuration), so every rank fails the same way. */
    if ((err = check_data(comm, cfg, train, test)) != 0)
        return err;
    if ((err = open_run(&r, comm)) != 0)
        goto out;
    for (; st->epoch < cfg->epochs; st->epoch++, st->step_in_epoch = 0) {
        double t_epoch = hpml_time();
        int stop = 0;

        /* Replicated data: one global permutation. Row-sharded: each rank (a pipeline's
         * replica) permutes its rows (a rank-count-dependent order) and walks them
         * cyclically. */
        hpml_shuffle(r.shard_rows ? cfg->seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(block(&t) + 1))
                                  : cfg->seed,
                     (long)st->epoch, train->n, r.perm);
        if ((err = run_epoch(&r, &stop)) != 0 || (err = end_epoch(&r, t_epoch, stop)) != 0)
            goto out;
        if (stop)
            break;
        if (cfg->checkpoint_dir && cfg->checkpoint_every == 0) {
            nn_ckpt_t at = *st;

            at.epoch++;
            at.step_in_epoch = 0;
            if ((err = hpml__trainer_save(&t, &at)) != 0)
                goto out;
        }
    }
    *out = t.m;
    t.m = NULL;
out:
    free(r.perm);
    hpml__trainer_close(&t, err);
    return err;
}

/* Are d's samples of shape (c, h, w)? Else HPML_ERR_INVAL naming d's file and both shapes:
 * a forward pass over samples of another size reads past them (or computes garbage). */
static int check_shape(const hpml_dataset_t *d, const char *what, int c, int h, int w)
{
    if (d->c == c && d->h == h && d->w == w)
        return 0;
    return hpml_set_error(HPML_ERR_INVAL, "%s %s: samples are %dx%dx%d, the model takes %dx%dx%d",
                          what, d->source[0] ? d->source : "(in memory)", d->c, d->h, d->w, c, h,
                          w);
}

/* How many blocks of rows sharded data is cut into: one per rank, or per pipeline replica
 * (its stages hold the same rows). */
static int blocks(const hpml_train_config_t *cfg, int P)
{
    return cfg->stages > 1 && P % cfg->stages == 0 ? P / cfg->stages : P;
}

/* This rank's block (its replica's with a pipeline). */
static int block(const nn_trainer_t *t)
{
    return t->layout->nparts > 0 ? t->layout->part : t->rank;
}

/* Row-sharded data (--shard-data): this rank holds only rows [offset, offset + n). */
static int check_data(const hpml_comm_t *comm, const hpml_train_config_t *cfg,
                      const hpml_dataset_t *train, const hpml_dataset_t *test)
{
    const int P = blocks(cfg, hpml_comm_size(comm));
    const int shard_rows = train->total != train->n || train->offset != 0;
    int err;

    if (shard_rows && train->total < (size_t)P)
        return hpml_set_error(HPML_ERR_INVAL,
                              "train: %s holds %zu samples for %d %s: sharded data needs at "
                              "least one sample per %s",
                              train->source[0] ? train->source : "the training set", train->total,
                              P, cfg->stages > 1 ? "pipeline replicas" : "ranks",
                              cfg->stages > 1 ? "replica" : "rank");
    if (cfg->batch == 0 || train->n == 0 || cfg->epochs <= 0)
        return hpml_set_error(HPML_ERR_INVAL, "train: empty data set, batch or epochs");
    if (test != NULL && (err = check_shape(test, "test images", train->c, train->h, train->w)) != 0)
        return err;
    if (train->n > UINT32_MAX)
        return hpml_set_error(HPML_ERR_RANGE, "train: more than 2^32 samples");
    return 0;
}

/* The trainer for the data set, its permutation, the steps of an epoch. Collective. */
static int open_run(run_t *r, hpml_comm_t *comm)
{
    const hpml_dataset_t *train = r->train;
    const size_t P = (size_t)hpml_comm_size(comm), N = train->n;
    nn_trainer_args_t a;
    int err;

    r->shard_rows = train->total != N || train->offset != 0;
    r->B = r->cfg->batch < N ? r->cfg->batch : N;
    r->lb = r->B / P + 1;
    r->stride = r->B / (size_t)blocks(r->cfg, (int)P) + 1;
    a = (nn_trainer_args_t){.c = train->c,
                            .h = train->h,
                            .w = train->w,
                            .classes = train->classes,
                            .gb = r->B,
                            .lb = r->lb,
                            .per_rank = (r->B + P - 1) / P,
                            .replicated = !r->shard_rows,
                            .samples = train->total,
                            .shard_ranks = r->shard_rows ? (uint32_t)blocks(r->cfg, (int)P) : 0,
                            .resume = r->cfg->resume};
    if ((err = hpml__trainer_open(r->t, comm, r->cfg, &a)) != 0)
        return err;
    if (!(r->perm = malloc(N * sizeof(uint32_t))))
        return HPML_ERR_NOMEM;
    r->resumed_at = r->t->st.seen;
    r->start_step = (long)r->t->st.global_step;
    r->start_epoch = (int)r->t->st.epoch;
    r->steps_per_epoch = (long)((train->total + r->B - 1) / r->B);
    r->total_steps = r->steps_per_epoch * r->cfg->epochs;
    r->t_start = hpml_time() - r->t->st.train_time;
    return 0;
}

/* The next step's samples: this rank's block of the global batch (its labels and ids, and
 * its inputs, or the whole batch's inputs where the layout computes layer 0 for all). */
static void next_batch(run_t *r, nn_step_t *s)
{
    nn_trainer_t *t = r->t;
    const hpml_dataset_t *d = r->train;
    const size_t in = hpml_model_input_size(t->m), N = d->n, T = d->total;
    const size_t g0 = (size_t)t->st.step_in_epoch * r->B;
    float *x = t->layout->x;
    size_t b0, b1;

    const nn_layout_t *l = t->layout;

    s->gb = T - g0 < r->B ? T - g0 : r->B;
    if (l->nparts > 0) /* the layout's part of the batch (a pipeline's replica) */
        hpml_io_partition(s->gb, l->part, l->nparts, &b0, &b1);
    else
        hpml_io_partition(s->gb, t->rank, t->P, &b0, &b1);
    s->nl = b1 - b0;
    for (size_t j = 0; j < s->nl; j++) {
        uint32_t k = r->shard_rows ? r->perm[((size_t)t->st.step_in_epoch * r->stride + j) % N]
                                   : r->perm[g0 + b0 + j];
        if (!l->whole_batch && !l->skip_x)
            memcpy(x + j * in, d->x + (size_t)k * in, in * sizeof(float));
        t->y[j] = l->skip_y ? 0 : d->y[k];
        t->ids[j] = d->offset + k;
    }
    for (size_t j = 0; t->layout->whole_batch && j < s->gb; j++)
        memcpy(x + j * in, d->x + (size_t)r->perm[g0 + j] * in, in * sizeof(float));
    s->y = t->y;
    s->ids = t->ids;
    s->key = hpml_rng_u64(&t->st.rng);
    s->lr = hpml_opt_lr(&r->cfg->opt, (long)t->st.global_step, r->total_steps, r->steps_per_epoch);
}

/*
 * After step `step`: has training diverged? A non-finite loss on any rank comes from
 * non-finite logits (the inputs are checked finite when loaded), whose gradients are not
 * finite either; the gradients are summed over the ranks, so the output layer's bias is
 * not finite after the update on every rank at the same step. Checking those few values
 * (not the loss, which a rank knows only for its own samples) gives every rank the same
 * verdict without a collective. HPML_ERR_NUMERIC naming the step, before anything is saved.
 */
static int check_diverged(const hpml_model_t *m, int top, int64_t step, int64_t epoch)
{
    const nn_layer_t *l = NULL;
    float acc = 0.0f;

    /* A pipeline stage updates only the layers below top; a non-finite loss reaches them
     * through the gradients of the activations. */
    for (int i = (top > 0 ? top : m->nlayers) - 1; i >= 0 && l == NULL; i--)
        if (m->layers[i].nb > 0)
            l = &m->layers[i];
    if (l == NULL)
        return 0;
    for (size_t j = 0; j < l->nb; j++)
        acc += 0.0f * m->params[l->b_off + j]; /* NaN or Inf makes it NaN */
    if (acc == 0.0f)
        return 0;
    return hpml_set_error(HPML_ERR_NUMERIC,
                          "train: training diverged at step %lld (epoch %lld): the loss and "
                          "the parameters are not finite; nothing was saved (a lower --lr may "
                          "help)",
                          (long long)step, (long long)epoch);
}

/* The rest of the epoch's steps, with their checkpoints; *stop at --max-steps. */
static int run_epoch(run_t *r, int *stop)
{
    const hpml_train_config_t *cfg = r->cfg;
    nn_trainer_t *t = r->t;
    nn_ckpt_t *st = &t->st;
    int err;

    for (; st->step_in_epoch < r->steps_per_epoch; st->step_in_epoch++) {
        double t_step = hpml_time(), loss;
        size_t correct;
        nn_step_t s;

        next_batch(r, &s);
        if ((err = hpml__trainer_step(t, &s, &loss, &correct)) != 0 ||
            (err = check_diverged(t->m, t->layout->top_layer, st->global_step + 1,
                                  st->epoch + 1)) != 0)
            return err;
        st->global_step++;
        st->loss_sum += loss;
        st->correct += (double)correct;
        st->seen += t->layout->skip_y ? 0.0 : (double)s.nl; /* counted where the loss is */
        st->train_time += hpml_time() - t_step;
        if (r->progress) {
            double v[2] = {loss, (double)s.nl};

            if (cfg->progress_mean_every > 0 &&
                (st->step_in_epoch + 1) % cfg->progress_mean_every == 0 &&
                (err = hpml_allreduce(HPML_IN_PLACE, v, 2, HPML_F64, HPML_SUM, t->comm)) != 0)
                return err;
            r->progress(r->ctx, (int)st->epoch + 1, st->step_in_epoch + 1, r->steps_per_epoch,
                        v[1] > 0 ? v[0] / v[1] : 0.0);
        }
        if (cfg->checkpoint_dir && cfg->checkpoint_every > 0 &&
            st->global_step % cfg->checkpoint_every == 0) {
            nn_ckpt_t at = *st;

            at.step_in_epoch++; /* resume after this step */
            if ((err = hpml__trainer_save(t, &at)) != 0)
                return err;
        }
        if (cfg->max_steps > 0 && st->global_step >= cfg->max_steps) {
            st->step_in_epoch++;
            *stop = 1;
            break;
        }
    }
    return 0;
}

/* The bytes of training data (images and labels) each of the nstages stages of replica 0
 * holds, into r->stages. Collective. */
static int stage_data(run_t *r, int nstages)
{
    const nn_trainer_t *t = r->t;
    const hpml_dataset_t *d = r->train;
    int64_t held[64] = {0};
    int err;

    if (t->layout->part == 0)
        held[t->rank % nstages] =
            (int64_t)((d->x ? d->n * hpml_model_input_size(t->m) * sizeof(float) : 0) +
                      (d->y ? d->n * sizeof(int32_t) : 0));
    if ((err = hpml_allreduce(HPML_IN_PLACE, held, (size_t)nstages, HPML_I64, HPML_MAX, t->comm)) !=
        0)
        return err;
    for (int s = 0; s < nstages; s++)
        r->stages[s].data_bytes = (size_t)held[s];
    return 0;
}

/* The epoch's report: sums over the ranks, the whole model evaluated on the test set. */
static int end_epoch(run_t *r, double t_epoch, int stop)
{
    nn_trainer_t *t = r->t;
    nn_ckpt_t *st = &t->st;
    /* Throughput counts the samples of this run only, not those before a resume. */
    const double seen_here = st->seen - r->resumed_at;
    double s[4] = {st->loss_sum, st->correct, st->seen, seen_here};
    hpml_epoch_report_t rep;
    int err;

    memset(&rep, 0, sizeof(rep));
    if ((err = hpml_allreduce(HPML_IN_PLACE, s, 4, HPML_F64, HPML_SUM, t->comm)) != 0)
        return err;
    rep.epoch = (int)st->epoch + 1;
    rep.steps = (long)st->global_step;
    rep.train_loss = s[2] > 0 ? s[0] / s[2] : 0;
    rep.train_acc = s[2] > 0 ? s[1] / s[2] : 0;
    rep.seconds = hpml_time() - t_epoch;
    rep.images_per_s = rep.seconds > 0 ? s[3] / rep.seconds : 0;
    rep.images_per_s_rank = rep.seconds > 0 ? seen_here / rep.seconds : 0;
    if (t->layout->nparts > 0) /* counted on the last stages only: the mean over the ranks */
        rep.images_per_s_rank = rep.images_per_s / (double)t->P;
    rep.comm_exposed_s = t->layout->exposed;
    rep.lr =
        hpml_opt_lr(&r->cfg->opt, (long)st->global_step - 1, r->total_steps, r->steps_per_epoch);
    rep.elapsed = hpml_time() - r->t_start;
    rep.test_loss = rep.test_acc = -1;
    rep.resumed_step = r->cfg->resume ? r->start_step : -1;
    rep.resumed_epoch = r->cfg->resume ? r->start_epoch + 1 : 0;
    rep.run_steps = (long)st->global_step - r->start_step;
    if (t->layout->ops->stages != NULL) {
        if ((err = t->layout->ops->stages(t->layout, r->stages, &rep.nstages,
                                          &rep.bubble_theory)) != 0 ||
            (err = stage_data(r, rep.nstages)) != 0)
            return err;
        rep.stages = r->stages;
    }
    if ((err = hpml__trainer_gather(t)) != 0 ||
        (r->test && (err = hpml_evaluate(t->comm, t->m, r->test, r->cfg->eval_batch, &rep.test_loss,
                                         &rep.test_acc)) != 0))
        return err;
    rep.last = stop || st->epoch + 1 == r->cfg->epochs;
    r->t_start += hpml_time() - t_epoch - rep.seconds; /* exclude evaluation */
    if (r->report)
        r->report(r->ctx, &rep);
    st->loss_sum = st->correct = st->seen = r->resumed_at = 0;
    t->layout->exposed = 0;
    return 0;
}

int hpml_evaluate(hpml_comm_t *comm, hpml_model_t *m, const hpml_dataset_t *d, size_t batch,
                  double *loss, double *acc)
{
    double s[3] = {0, 0, 0}; /* loss sum, correct, count */
    const size_t in = hpml_model_input_size(m);
    int err;

    if ((err = check_shape(d, "images", m->in_c, m->in_h, m->in_w)) != 0)
        return err;
    if (batch == 0)
        batch = 1000;
    for (size_t i = 0; i < d->n; i += batch) {
        size_t nb = d->n - i < batch ? d->n - i : batch, ok;
        const float *z;
        double l;
        if ((err = hpml_model_forward(m, d->x + i * in, nb, 0, NULL, 0, &z)) != 0 ||
            (err = hpml_model_loss(m, d->y + i, &l, &ok)) != 0)
            return err;
        s[0] += l;
        s[1] += (double)ok;
        s[2] += (double)nb;
    }
    if (comm && (err = hpml_allreduce(HPML_IN_PLACE, s, 3, HPML_F64, HPML_SUM, comm)) != 0)
        return err;
    *loss = s[2] > 0 ? s[0] / s[2] : 0.0;
    *acc = s[2] > 0 ? s[1] / s[2] : 0.0;
    return 0;
}

/* ---- the synthetic benchmark ---------------------------------------------------------- */

static double cpu_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Random inputs and labels: rank q's B samples come from stream q + 1; a layout that
 * computes layer 0 for the whole batch gets every rank's inputs. */
static void synthetic_data(nn_trainer_t *t, size_t B)
{
    const size_t in = hpml_model_input_size(t->m), classes = hpml_model_output_size(t->m);
    const int whole = t->layout->whole_batch;
    const nn_layout_t *l = t->layout;
    hpml_rng_t rng;

    if (l->nparts > 0) { /* a pipeline: the replica's B * P / nparts samples, stream part + 1 */
        const size_t rows = B * (size_t)t->P / (size_t)l->nparts;
        hpml_rng_init(&rng, t->cfg->seed, (uint64_t)l->part + 1);
        for (size_t i = 0; i < rows * in; i++) {
            float v = (float)hpml_rng_uniform(&rng);
            if (!l->skip_x)
                l->x[i] = v;
        }
        for (size_t i = 0; i < rows; i++)
            t->y[i] = (int32_t)hpml_rng_below(&rng, classes);
        return;
    }

    for (int q = 0; q < t->P; q++) {
        if (!whole && q != t->rank)
            continue;
        float *xq = whole ? t->layout->x + (size_t)q * B * in : t->layout->x;
        hpml_rng_init(&rng, t->cfg->seed, (uint64_t)q + 1);
        for (size_t i = 0; i < B * in; i++)
            xq[i] = (float)hpml_rng_uniform(&rng);
        for (size_t i = 0; q == t->rank && i < B; i++)
            t->y[i] = (int32_t)hpml_rng_below(&rng, classes);
    }
}

int hpml_train_synthetic(hpml_comm_t *comm, const hpml_train_config_t *cfg, int in_c, int in_h,
                         int in_w, int iters, int warmup, hpml_synth_result_t *res)
{
    nn_trainer_t t;
    const size_t P = (size_t)hpml_comm_size(comm), B = cfg->batch; /* per rank (Horovod) */
    /* Synthetic data counts as on every rank: each rank can generate every rank's. */
    const nn_trainer_args_t a = {
        .c = in_c, .h = in_h, .w = in_w, .gb = B * P, .lb = B, .per_rank = B, .replicated = 1};
    double t0 = 0, cpu0 = 0, s[3];
    int err;

    memset(&t, 0, sizeof(t));
    memset(res, 0, sizeof(*res));
    if (B == 0 || iters <= 0)
        return hpml_set_error(HPML_ERR_INVAL, "synthetic: batch and iterations must be > 0");
    if ((err = hpml__trainer_open(&t, comm, cfg, &a)) != 0)
        goto out;
    synthetic_data(&t, B);
    for (int it = 0; it < warmup + iters; it++) {
        const size_t nl = t.layout->nparts > 0 ? B * P / (size_t)t.layout->nparts : B;
        const nn_step_t st = {
            .gb = B * P, .nl = nl, .y = t.y, .key = (uint64_t)it, .lr = cfg->opt.lr * 0.01};
        double loss;
        size_t correct;

        if (it == warmup) {
            if ((err = hpml_barrier(comm)) != 0)
                goto out;
            t.layout->exposed = 0;
            t0 = hpml_time();
            cpu0 = cpu_seconds();
        }
        if ((err = hpml__trainer_step(&t, &st, &loss, &correct)) != 0)
            goto out;
    }
    s[0] = hpml_time() - t0;
    s[1] = t.layout->exposed;
    s[2] = cpu_seconds() - cpu0;
    if ((err = hpml_allreduce(HPML_IN_PLACE, s, 3, HPML_F64, HPML_MAX, comm)) != 0)
        goto out;
    res->cpu_s = s[2] / iters;
    res->step_s = s[0] / iters;
    res->comm_exposed_s = s[1] / iters;
    res->compute_s = res->step_s - res->comm_exposed_s;
    res->images_per_s_rank = (double)B / res->step_s;
    res->images_per_s_total = res->images_per_s_rank * (double)P;
out:
    hpml__trainer_close(&t, err);
    return err;
}
