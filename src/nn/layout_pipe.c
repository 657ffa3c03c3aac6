/*
 * The pipeline layout (GPipe, 1F1B; HyPar-Flow's stages x replicas): the layers cut into S
 * contiguous stages, rank p computing stage s = p % S of replica r = p / S. Each replica
 * takes its block of the global batch (hpml_io_partition over the R = P / S replicas) in M
 * micro-batches; stage s receives a micro-batch's inputs from rank p - 1 and sends its
 * outputs to rank p + 1, and the gradients of those back. Only stage 0 gets images and
 * only stage S - 1 labels. The loss gradient is scaled by 1 / global batch, each stage
 * sums its micro-batches' gradients in micro-batch order (the same in both schedules, so
 * GPipe and 1F1B give the same bits), allreduces them over its replicas and updates its
 * parameters; gather broadcasts each stage's parameters from its replica 0.
 *
 * The action table (which micro-batch's forward or backward comes next) depends only on
 * (S, M, s, schedule), so every rank derives it alike. Every receive of the step is posted
 * before the first action and every send is nonblocking, completed at the end of the
 * step; a rank therefore only ever waits for a message its neighbour sends earlier in the
 * neighbour's own table, and the tables' dependencies (forward j on stage s after forward
 * j on s - 1, backward j after backward j on s + 1) have no cycle: no order deadlocks,
 * with M < S too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpml/io.h"
#include "nn/layout.h"

#define MAX_EVENTS 4096 /* actions per rank in --trace */

#define MAX_STAGES 64
#define TAG_ACT    0 /* + 2j: micro-batch j's activations, forward */
#define TAG_GRAD   1 /* + 2j: their gradients, backward */

typedef struct {
    nn_layout_t base;
    hpml_comm_t *comm, *replicas; /* replicas: the ranks of this stage (NULL with R = 1) */
    hpml_model_t *m;              /* the whole model: parameters, gradients, gather */
    hpml_optim_t *o;
    const hpml_train_config_t *cfg;
    int S, R, M, s, r, me, recompute;
    int bounds[MAX_STAGES + 1]; /* stage t has layers [bounds[t], bounds[t+1]) */
    size_t off0, off1;          /* this stage's parameters */
    size_t in_w, out_w;         /* values per sample in and out of this stage */
    size_t mb;                  /* the largest micro-batch */
    int nslots;                 /* stage models, each with one micro-batch's activations */
    hpml_model_t **slot;
    int *busy;               /* per slot: micro-batch + 1 whose activations it holds, or 0 */
    int *acts;               /* 2M actions: j + 1 forward of micro-batch j, -(j + 1) its backward */
    float *in;               /* (M, mb, in_w): received inputs (stage > 0) */
    float *out;              /* (M, mb, out_w): outputs sent (stage < S - 1) */
    float *dy;               /* (M, mb, out_w): their gradients received */
    float *dx;               /* (M, mb, in_w): gradients of the inputs sent */
    float *acc;              /* off1 - off0: the step's gradients summed over its micro-batches */
    hpml_p2p_request_t **rq; /* 2M receives (inputs, output gradients) */
    hpml_p2p_request_t **sq; /* 2M sends */
    double *ev; /* --trace: (start, end, micro-batch, 1 forward / 2 backward) per action */
    int nev, traced;
    double t_base; /* rank 0's clock at open */
    double t_out;  /* when the last action's output was ready, before its send (the
                      trace's end of it: the neighbour may start before the send returns) */
    /* Figures since the last report. */
    double span, busy_s;
    long steps;
    int peak_live;
} pipe_t;

int hpml_schedule_parse(const char *name, hpml_schedule_t *out)
{
    if (name && strcmp(name, "gpipe") == 0)
        *out = HPML_SCHEDULE_GPIPE;
    else if (name && strcmp(name, "1f1b") == 0)
        *out = HPML_SCHEDULE_1F1B;
    else
        return hpml_set_error(HPML_ERR_INVAL, "schedule: expected gpipe or 1f1b, got '%s'",
                              name ? name : "(null)");
    return 0;
}

const char *hpml_schedule_name(hpml_schedule_t s)
{
    return s == HPML_SCHEDULE_1F1B ? "1f1b" : "gpipe";
}

static float *alloc_f(size_t n)
{
    return hpml_malloc((n ? n : 1) * sizeof(float));
}

/* "N,N,...": S positive layer counts adding up to the model's layers. */
static int parse_list(const char *list, int S, int nlayers, int *bounds)
{
    const char *p = list;
    int n = 0, sum = 0;

    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > nlayers || (*end != ',' && *end != '\0'))
            return hpml_set_error(HPML_ERR_INVAL,
                                  "train: --partition takes 'uniform' or layer counts 'N,N,...' "
                                  "each from 1 to %d; got '%s'",
                                  nlayers, list);
        if (n == S)
            return hpml_set_error(HPML_ERR_INVAL,
                                  "train: --partition lists more than the %d stages", S);
        bounds[n + 1] = bounds[n] + (int)v;
        sum += (int)v;
        n++;
        p = *end ? end + 1 : end;
    }
    if (n != S || sum != nlayers)
        return hpml_set_error(HPML_ERR_INVAL,
                              "train: --partition lists %d stages of %d layers in all; the "
                              "pipeline has %d stages and the model %d layers",
                              n, sum, S, nlayers);
    return 0;
}

int hpml__pipe_balance(const double *cost, const double *mem, const double *act, const double *edge,
                       int L, int S, const int *keep, double limit, int *bounds, double *slowest)
{
    /* best[s * (L + 1) + j]: the slowest stage of the best cut of layers [0, j) into stages
     * 0..s; cut[...] where stage s starts in it. */
    double *best = malloc((size_t)S * (size_t)(L + 1) * sizeof(double));
    int *cut = malloc((size_t)S * (size_t)(L + 1) * sizeof(int)), err = 0;
    const double inf = 1e300;

    if (best == NULL || cut == NULL) {
        err = hpml_set_error(HPML_ERR_NOMEM, "train: no memory to partition the pipeline");
        goto out;
    }
    for (int k = 0; k < S * (L + 1); k++)
        best[k] = inf, cut[k] = -1;
    for (int s = 0; s < S; s++)
        for (int j = s + 1; j <= L - (S - 1 - s); j++)
            for (int i = s; i < j; i++) { /* stage s = layers [i, j) */
                double c = 0, m = edge[i] + edge[j], prev = s ? best[(s - 1) * (L + 1) + i] : 0;
                if (s == 0 && i > 0)
                    break;
                if (prev >= inf)
                    continue;
                for (int l = i; l < j; l++) {
                    c += cost[l];
                    m += mem[l] + (double)keep[s] * act[l];
                }
                if (limit > 0 && m > limit)
                    continue;
                c = c > prev ? c : prev;
                if (c < best[s * (L + 1) + j]) { /* strictly: the earliest cut wins ties */
                    best[s * (L + 1) + j] = c;
                    cut[s * (L + 1) + j] = i;
                }
            }
    if (S > L || best[(S - 1) * (L + 1) + L] >= inf) {
        err = hpml_set_error(HPML_ERR_INVAL,
                             "train: no cut of the %d layers into %d pipeline stages keeps every "
                             "stage within --memory-limit %.1f MiB",
                             L, S, limit / 1048576.0);
        goto out;
    }
    *slowest = best[(S - 1) * (L + 1) + L];
    bounds[S] = L;
    for (int s = S - 1; s >= 0; s--)
        bounds[s] = cut[s * (L + 1) + bounds[s + 1]];
out:
    free(best);
    free(cut);
    return err;
}

/* What balance needs of model m: per layer its bytes (parameters, gradients, optimizer
 * state) and activation bytes for a micro-batch of mb, and per boundary the bytes of the
 * buffers for its messages (M micro-batches of activations and their gradients, in and
 * out); the micro-batches each stage keeps. Arrays of L, L + 1 and S. */
static void stage_sizes(const hpml_train_config_t *c, const hpml_model_t *m, size_t mb, double *mem,
                        double *act, double *edge, int *keep)
{
    const int nstate =
        (c->opt.kind != HPML_OPT_SGD || c->opt.momentum != 0.0) + (c->opt.kind != HPML_OPT_SGD);
    const int S = c->stages, M = c->micro_batches > 0 ? c->micro_batches : S;

    for (int l = 0; l < m->nlayers; l++) {
        const nn_layer_t *y = &m->layers[l];
        const size_t wide = y->in_size > y->out_size ? y->in_size : y->out_size;
        mem[l] = (double)(y->nw + y->nb) * sizeof(float) * (2 + nstate);
        /* Its buffers, its share of the gradient buffers, the softmax's on the last. */
        act[l] = (double)hpml__nn_layer_act_bytes(y, mb) + 2.0 * (double)(mb * wide) * 4 +
                 (l == m->nlayers - 1 ? (double)(mb * y->out_size) * 4 : 0);
        edge[l] = l == 0 ? 0 : 2.0 * M * (double)(mb * y->in_size) * 4 * 2;
    }
    edge[m->nlayers] = 0;
    for (int s = 0; s < S; s++)
        keep[s] = c->recompute                         ? 1
                  : c->schedule == HPML_SCHEDULE_GPIPE ? M
                                                       : (S - s < M ? S - s : M);
}

int hpml__pipe_plan(const hpml_train_config_t *c, const hpml_model_t *m, int P, size_t lb,
                    int *bounds)
{
    const int S = c->stages, L = m->nlayers;
    const int M = c->micro_batches > 0 ? c->micro_batches : S;
    int b[MAX_STAGES + 1], keep[MAX_STAGES], err = 0;
    double *mem = NULL, *act = NULL, *edge = NULL, *one = NULL, slowest;

    if (S > MAX_STAGES)
        return hpml_set_error(HPML_ERR_INVAL, "train: at most %d pipeline stages, not %d",
                              MAX_STAGES, S);
    if (S > L)
        return hpml_set_error(HPML_ERR_INVAL,
                              "train: %d pipeline stages for a model of %d layers: a stage needs "
                              "at least one layer",
                              S, L);
    if (P % S != 0)
        return hpml_set_error(HPML_ERR_INVAL,
                              "train: %d ranks are not a multiple of the %d pipeline stages", P, S);
    if (c->micro_batches < 0 || c->micro_batches > HPML_TAG_MAX / 2)
        return hpml_set_error(HPML_ERR_INVAL, "train: micro-batches must be from 1 to %d, not %d",
                              HPML_TAG_MAX / 2, c->micro_batches);
    if (c->parallel == HPML_PARALLEL_HYBRID || c->split_layers != 0)
        return hpml_set_error(HPML_ERR_INVAL,
                              "train: the pipeline is its own layout: not with --parallel "
                              "hybrid or --split-layers");
    if (c->grad_dtype != HPML_F32)
        return hpml_set_error(HPML_ERR_INVAL,
                              "train: the pipeline sums its gradients in f32 (no --grad-dtype %s)",
                              hpml_dtype_name(c->grad_dtype));
    if (!(mem = malloc((size_t)L * sizeof(double))) ||
        !(act = malloc((size_t)L * sizeof(double))) ||
        !(one = malloc((size_t)L * sizeof(double))) ||
        !(edge = malloc((size_t)(L + 1) * sizeof(double)))) {
        err = hpml_set_error(HPML_ERR_NOMEM, "train: no memory to plan the pipeline");
        goto out;
    }
    /* A replica's micro-batch: its lb * S samples of a step in M. */
    stage_sizes(c, m, lb * (size_t)S / (size_t)M + 1, mem, act, edge, keep);
    b[0] = 0;
    if (c->partition == NULL || strcmp(c->partition, "uniform") == 0) {
        for (int t = 0; t < S; t++) {
            size_t lo, hi;
            hpml_io_partition((size_t)L, t, S, &lo, &hi);
            b[t + 1] = (int)hi;
        }
    } else if (strcmp(c->partition, "auto") == 0) {
        /* Any cut within the limit (every layer costing 1); pipe_open measures the times. */
        for (int l = 0; l < L; l++)
            one[l] = 1;
        err = hpml__pipe_balance(one, mem, act, edge, L, S, keep, (double)c->memory_limit, b,
                                 &slowest);
    } else {
        err = parse_list(c->partition, S, L, b);
    }
    for (int s = 0; err == 0 && c->memory_limit > 0 && s < S; s++) {
        double need = edge[b[s]] + edge[b[s + 1]];
        for (int l = b[s]; l < b[s + 1]; l++)
            need += mem[l] + (double)keep[s] * act[l];
        if (need > (double)c->memory_limit)
            err = hpml_set_error(HPML_ERR_INVAL,
                                 "train: pipeline stage %d (layers %d-%d) needs %.1f MiB, more "
                                 "than --memory-limit %.1f MiB (--partition auto finds a cut "
                                 "that fits, if one does)",
                                 s, b[s], b[s + 1] - 1, need / 1048576.0,
                                 (double)c->memory_limit / 1048576.0);
    }
    if (err == 0 && bounds)
        memcpy(bounds, b, (size_t)(S + 1) * sizeof(int));
out:
    free(mem);
    free(act);
    free(edge);
    free(one);
    return err;
}

/* --partition auto: each layer's forward and backward timed on this rank for a micro-batch
 * of mb, then the fastest of the ranks' figures (other work only ever slows a round down;
 * every rank then has the same), and the cut that minimises the slowest stage within the
 * memory limit. Collective. */
/* One layer's model, a micro-batch of inputs and of output gradients, for timing. */
typedef struct {
    hpml_model_t *one;
    float *x, *dy;
} probe_t;

static int probe_open(hpml_model_t *m, int l, size_t mb, hpml_rng_t *rng, probe_t *pr)
{
    const size_t in = m->layers[l].in_size, out = m->layers[l].out_size;
    int err;

    if ((err = hpml__nn_model_stage(m, l, l + 1, &pr->one)) != 0 ||
        (err = hpml_model_reserve(pr->one, mb)) != 0)
        return err;
    if (!(pr->x = alloc_f(mb * in)) || !(pr->dy = alloc_f(mb * out)))
        return hpml_set_error(HPML_ERR_NOMEM, "train: no memory to time layer %d", l);
    for (size_t i = 0; i < mb * in; i++)
        pr->x[i] = (float)hpml_rng_uniform(rng);
    for (size_t i = 0; i < mb * out; i++)
        pr->dy[i] = (float)(hpml_rng_uniform(rng) - 0.5);
    return 0;
}

static int auto_partition(pipe_t *p, size_t mb)
{
    hpml_model_t *m = p->m;
    const int L = m->nlayers, S = p->S;
    double *cost = calloc((size_t)L, sizeof(double)), *mem = malloc((size_t)L * sizeof(double)),
           *act = malloc((size_t)L * sizeof(double)),
           *edge = malloc((size_t)(L + 1) * sizeof(double)), slowest;
    probe_t *pr = calloc((size_t)L, sizeof(*pr));
    int keep[MAX_STAGES], err = 0;
    hpml_rng_t rng;

    if (!cost || !mem || !act || !edge || !pr) {
        err = hpml_set_error(HPML_ERR_NOMEM, "train: no memory to partition the pipeline");
        goto out;
    }
    hpml_rng_init(&rng, 1, 0x50495045ull); /* "PIPE" */
    for (int l = 0; l < L && err == 0; l++)
        err = probe_open(m, l, mb, &rng, &pr[l]);
    /* One untimed round, then the fastest of five; each round times every layer in turn,
     * so a slow spell (other work on the core) slows all layers alike, not a few. */
    for (int k = 0; k < 6 && err == 0; k++)
        for (int l = 0; l < L && err == 0; l++) {
            double t0 = hpml_time(), t;
            const float *z, *dx;
            if ((err = hpml_model_forward(pr[l].one, pr[l].x, mb, 1, NULL, 0, &z)) == 0)
                err = hpml__nn_backward_stage(pr[l].one, NULL, 1.0f, pr[l].dy, l > 0, NULL, NULL,
                                              &dx);
            t = hpml_time() - t0;
            if (k == 1 || (k > 1 && t < cost[l]))
                cost[l] = t;
        }
    err = hpml_comm_agree(p->comm, err);
    if (err == 0)
        err = hpml_allreduce(HPML_IN_PLACE, cost, (size_t)L, HPML_F64, HPML_MIN, p->comm);
    if (err != 0)
        goto out;
    stage_sizes(p->cfg, m, mb, mem, act, edge, keep);
    err = hpml__pipe_balance(cost, mem, act, edge, L, S, keep, (double)p->cfg->memory_limit,
                             p->bounds, &slowest);
    for (int l = 0; l < L && p->me == 0; l++)
        HPML_LOG(HPML_LOG_DEBUG, "pipeline: layer %d: %.3f ms forward+backward of %zu samples", l,
                 1e3 * cost[l], mb);
out:
    for (int l = 0; pr && l < L; l++) {
        hpml_model_destroy(pr[l].one);
        hpml_free(pr[l].x);
        hpml_free(pr[l].dy);
    }
    free(pr);
    free(cost);
    free(mem);
    free(act);
    free(edge);
    return err;
}

/* Stage s's actions for M micro-batches of S stages: GPipe every forward then every
 * backward; 1F1B min(S - 1 - s, M) forwards, then one forward and one backward in turn,
 * then the remaining backwards. Backwards run in micro-batch order in both. */
static void schedule(hpml_schedule_t kind, int S, int M, int s, int *a)
{
    int k = 0, f = 0, b = 0;
    int warm = kind == HPML_SCHEDULE_GPIPE ? M : (S - 1 - s < M ? S - 1 - s : M);

    while (f < warm)
        a[k++] = ++f;
    while (f < M) {
        a[k++] = ++f;
        a[k++] = -++b;
    }
    while (b < M)
        a[k++] = -++b;
}

/* Most micro-batches stage s keeps at once under its actions. */
static int live_peak(const int *a, int M)
{
    int live = 0, peak = 0;

    for (int k = 0; k < 2 * M; k++) {
        live += a[k] > 0 ? 1 : -1;
        peak = live > peak ? live : peak;
    }
    return peak;
}

static void pipe_close(nn_layout_t *l, int err)
{
    pipe_t *p = (pipe_t *)l;

    if (p == NULL)
        return;
    if (p->rq && p->sq) /* requests of a failed step: wait only when the run is healthy */
        for (int i = 0; i < 2 * p->M; i++) {
            if (err == 0) {
                hpml_p2p_wait(p->rq[i]);
                hpml_p2p_wait(p->sq[i]);
            }
        }
    for (int i = 0; p->slot && i < p->nslots; i++)
        hpml_model_destroy(p->slot[i]);
    if (err == 0)
        hpml_comm_destroy(p->replicas);
    free(p->slot);
    free(p->busy);
    free(p->acts);
    free(p->rq);
    free(p->sq);
    hpml_free(p->in);
    hpml_free(p->out);
    hpml_free(p->dy);
    hpml_free(p->dx);
    hpml_free(p->acc);
    hpml_free(p->base.x);
    free(p->ev);
    free(p);
}

static int pipe_open(const nn_layout_args_t *a, nn_layout_t **out)
{
    const int P = hpml_comm_size(a->comm);
    pipe_t *p = calloc(1, sizeof(*p));
    hpml_model_t *m = a->m;
    int err = HPML_ERR_NOMEM, l0, l1;
    size_t rows;

    *out = NULL;
    if (p == NULL)
        return err;
    p->base.ops = &hpml__layout_pipe;
    p->comm = a->comm;
    p->m = m;
    p->o = a->o;
    p->cfg = a->cfg;
    p->S = a->cfg->stages;
    p->R = P / p->S;
    p->M = a->cfg->micro_batches > 0 ? a->cfg->micro_batches : p->S;
    p->me = hpml_comm_rank(a->comm);
    p->s = p->me % p->S;
    p->r = p->me / p->S;
    p->recompute = a->cfg->recompute;
    if ((err = hpml__pipe_plan(a->cfg, m, P, a->lb, p->bounds)) != 0)
        goto out;
    rows = a->gb / (size_t)p->R + 1; /* the largest share of one replica */
    p->mb = rows / (size_t)p->M + 1;
    if (a->cfg->partition && strcmp(a->cfg->partition, "auto") == 0 &&
        (err = auto_partition(p, p->mb)) != 0)
        goto out;
    /* Every rank takes part in the split, also with one replica. */
    if ((err = hpml_comm_split(a->comm, p->s, p->r, &p->replicas)) != 0)
        goto out;
    l0 = p->bounds[p->s];
    l1 = p->bounds[p->s + 1];
    p->off0 = m->layers[l0].w_off;
    p->off1 = l1 < m->nlayers ? m->layers[l1].w_off : m->nparams;
    p->in_w = m->layers[l0].in_size;
    p->out_w = m->layers[l1 - 1].out_size;
    p->base.nparts = p->R;
    p->base.part = p->r;
    p->base.skip_x = p->s > 0;
    p->base.skip_y = p->s < p->S - 1;
    p->base.top_layer = l1;
    err = HPML_ERR_NOMEM;
    if (!(p->acts = malloc(2 * (size_t)p->M * sizeof(int))) ||
        !(p->rq = calloc(2 * (size_t)p->M, sizeof(*p->rq))) ||
        !(p->sq = calloc(2 * (size_t)p->M, sizeof(*p->sq))))
        goto out;
    schedule(a->cfg->schedule, p->S, p->M, p->s, p->acts);
    p->nslots = p->recompute ? 1 : live_peak(p->acts, p->M);
    if (!(p->slot = calloc((size_t)p->nslots, sizeof(*p->slot))) ||
        !(p->busy = calloc((size_t)p->nslots, sizeof(int))))
        goto out;
    for (int i = 0; i < p->nslots; i++)
        if ((err = hpml__nn_model_stage(m, l0, l1, &p->slot[i])) != 0 ||
            (err = hpml_model_reserve(p->slot[i], p->mb)) != 0)
            goto out;
    err = HPML_ERR_NOMEM;
    if (!(p->acc = alloc_f(p->off1 - p->off0)) ||
        !(p->base.x = alloc_f(p->s == 0 ? rows * p->in_w : 0)) ||
        !(p->in = alloc_f(p->s > 0 ? (size_t)p->M * p->mb * p->in_w : 0)) ||
        !(p->dx = alloc_f(p->s > 0 ? (size_t)p->M * p->mb * p->in_w : 0)) ||
        !(p->out = alloc_f(p->s < p->S - 1 ? (size_t)p->M * p->mb * p->out_w : 0)) ||
        !(p->dy = alloc_f(p->s < p->S - 1 ? (size_t)p->M * p->mb * p->out_w : 0)))
        goto out;
    if (a->cfg->trace && !(p->ev = malloc(MAX_EVENTS * 4 * sizeof(double))))
        goto out;
    /* The trace's times count from rank 0's clock now: the ranks of one node share the
     * monotonic clock, so their events line up (across nodes only roughly). */
    p->t_base = hpml_time();
    if ((err = hpml_bcast(&p->t_base, 1, HPML_F64, 0, a->comm)) != 0)
        goto out;
    *out = &p->base;
    p = NULL;
    err = 0;
out:
    pipe_close(p ? &p->base : NULL, err ? err : 0);
    return err;
}

/* The forward pass is part of the schedule (backward below). */
static int pipe_forward(nn_layout_t *l, const nn_step_t *s)
{
    (void)l;
    (void)s;
    return 0;
}

/* Micro-batch j's rows of the replica's nl: [*r0, *r0 + *n). */
static void micro_rows(const pipe_t *p, size_t nl, int j, size_t *r0, size_t *n)
{
    size_t hi;

    hpml_io_partition(nl, j, p->M, r0, &hi);
    *n = hi - *r0;
}

/* Post the step's receives: every non-empty micro-batch's inputs and output gradients. */
static int post_receives(pipe_t *p, size_t nl)
{
    for (int j = 0; j < p->M; j++) {
        size_t r0, n;
        int err;
        micro_rows(p, nl, j, &r0, &n);
        if (n == 0)
            continue;
        if (p->s > 0 &&
            (err = hpml_irecv(p->in + (size_t)j * p->mb * p->in_w, n * p->in_w, HPML_F32, p->me - 1,
                              TAG_ACT + 2 * j, p->comm, &p->rq[2 * j])) != 0)
            return err;
        if (p->s < p->S - 1 &&
            (err = hpml_irecv(p->dy + (size_t)j * p->mb * p->out_w, n * p->out_w, HPML_F32,
                              p->me + 1, TAG_GRAD + 2 * j, p->comm, &p->rq[2 * j + 1])) != 0)
            return err;
    }
    return 0;
}

/* A free slot for micro-batch j (its activations until its backward). */
static hpml_model_t *take_slot(pipe_t *p, int j)
{
    for (int i = 0; i < p->nslots; i++)
        if (p->recompute || p->busy[i] == 0) {
            p->busy[i] = j + 1;
            return p->slot[i];
        }
    return NULL;
}

static hpml_model_t *slot_of(pipe_t *p, int j)
{
    if (p->recompute) /* one model, its activations recomputed */
        return p->slot[0];
    for (int i = 0; i < p->nslots; i++)
        if (p->busy[i] == j + 1) {
            p->busy[i] = 0;
            return p->slot[i];
        }
    return NULL;
}

/* Micro-batch j's input: the trainer's rows on stage 0, else the received ones. */
static const float *input_of(pipe_t *p, int j, size_t r0, double *wait)
{
    double t0 = hpml_time();
    const float *x;

    if (p->s == 0)
        return p->base.x + r0 * p->in_w;
    x = p->in + (size_t)j * p->mb * p->in_w;
    if (hpml_p2p_wait(p->rq[2 * j]) != 0)
        x = NULL;
    p->rq[2 * j] = NULL;
    *wait += hpml_time() - t0;
    return x;
}

static int forward_one(pipe_t *p, const nn_step_t *s, int j, size_t r0, size_t n, double *wait)
{
    const float *x = input_of(p, j, r0, wait), *z;
    hpml_model_t *sm = take_slot(p, j);
    int err;

    if (x == NULL)
        return HPML_ERR_MPI;
    if (sm == NULL) /* the slots are counted from the same table */
        return hpml_set_error(HPML_ERR_STATE, "train: pipeline stage %d has no free slot", p->s);
    if ((err = hpml_model_forward(sm, x, n, 1, s->ids ? s->ids + r0 : NULL, s->key, &z)) != 0)
        return err;
    if (p->s == p->S - 1)
        return 0;
    float *o = p->out + (size_t)j * p->mb * p->out_w;
    memcpy(o, z, n * p->out_w * sizeof(float));
    p->t_out = hpml_time();
    return hpml_isend(o, n * p->out_w, HPML_F32, p->me + 1, TAG_ACT + 2 * j, p->comm,
                      &p->sq[2 * j]);
}

static int backward_one(pipe_t *p, const nn_step_t *s, int j, size_t r0, size_t n, int first,
                        double *loss, size_t *correct, double *wait)
{
    const size_t np = p->off1 - p->off0;
    const int last = p->s == p->S - 1;
    hpml_model_t *sm = slot_of(p, j);
    const float *dy = NULL, *dx = NULL, *z;
    double l = 0;
    size_t ok = 0;
    int err;

    if (sm == NULL)
        return hpml_set_error(HPML_ERR_STATE, "train: pipeline stage %d lost micro-batch %d", p->s,
                              j);
    if (p->recompute) { /* the same inputs, ids and key: the same activations, bit for bit */
        const float *x = p->s == 0 ? p->base.x + r0 * p->in_w : p->in + (size_t)j * p->mb * p->in_w;
        if ((err = hpml_model_forward(sm, x, n, 1, s->ids ? s->ids + r0 : NULL, s->key, &z)) != 0)
            return err;
    }
    if (!last) {
        double t0 = hpml_time();
        err = hpml_p2p_wait(p->rq[2 * j + 1]);
        p->rq[2 * j + 1] = NULL;
        *wait += hpml_time() - t0;
        if (err != 0)
            return err;
        dy = p->dy + (size_t)j * p->mb * p->out_w;
    }
    if ((err = hpml__nn_backward_stage(sm, last ? s->y + r0 : NULL, 1.0f / (float)s->gb, dy,
                                       p->s > 0, &l, &ok, &dx)) != 0)
        return err;
    *loss += l;
    *correct += ok;
    if (first)
        memcpy(p->acc, p->m->grads + p->off0, np * sizeof(float));
    else
        for (size_t i = 0; i < np; i++)
            p->acc[i] += p->m->grads[p->off0 + i];
    if (p->s == 0)
        return 0;
    float *g = p->dx + (size_t)j * p->mb * p->in_w;
    memcpy(g, dx, n * p->in_w * sizeof(float));
    p->t_out = hpml_time();
    return hpml_isend(g, n * p->in_w, HPML_F32, p->me - 1, TAG_GRAD + 2 * j, p->comm,
                      &p->sq[2 * j + 1]);
}

/* The whole schedule of the step. */
static int pipe_backward(nn_layout_t *l, const nn_step_t *s, double *loss_sum, size_t *correct)
{
    pipe_t *p = (pipe_t *)l;
    double t0 = hpml_time(), wait = 0;
    int err, first = 1, live = 0;

    if ((err = post_receives(p, s->nl)) != 0)
        return err;
    for (int k = 0; k < 2 * p->M; k++) {
        const int j = (p->acts[k] > 0 ? p->acts[k] : -p->acts[k]) - 1;
        size_t r0, n;
        micro_rows(p, s->nl, j, &r0, &n);
        if (n == 0)
            continue;
        const double w0 = wait, t0a = hpml_time();
        p->t_out = 0;
        if (p->acts[k] > 0) {
            err = forward_one(p, s, j, r0, n, &wait);
            live++;
            p->peak_live = live > p->peak_live ? live : p->peak_live;
        } else {
            err = backward_one(p, s, j, r0, n, first, loss_sum, correct, &wait);
            first = 0;
            live--;
        }
        if (err != 0)
            return err;
        if (p->ev && p->nev < MAX_EVENTS) { /* the compute, after the wait for its input */
            double *e = p->ev + 4 * p->nev++;
            e[0] = t0a + (wait - w0) - p->t_base;
            e[1] = (p->t_out > 0 ? p->t_out : hpml_time()) - p->t_base;
            e[2] = j;
            e[3] = p->acts[k] > 0 ? 1 : 2;
        }
    }
    if (first) /* no sample in this replica: it adds nothing to the sums */
        memset(p->acc, 0, (p->off1 - p->off0) * sizeof(float));
    /* Busy: computing; the sends' completion below counts as the schedule's time. */
    {
        double t1 = hpml_time();
        err = hpml_p2p_waitall(2 * (size_t)p->M, p->sq);
        wait += hpml_time() - t1;
        p->span += hpml_time() - t0;
        p->busy_s += hpml_time() - t0 - wait;
        p->steps++;
        l->exposed += wait;
    }
    return err;
}

static int pipe_update(nn_layout_t *l, const nn_step_t *s)
{
    pipe_t *p = (pipe_t *)l;
    const size_t np = p->off1 - p->off0;
    float *w = p->m->params + p->off0;
    int err;

    if (p->R > 1) {
        double t0 = hpml_time();
        err = hpml_allreduce(HPML_IN_PLACE, p->acc, np, HPML_F32, HPML_SUM, p->replicas);
        l->exposed += hpml_time() - t0;
        if (err != 0)
            return err;
    }
    hpml_optim_update(p->o, p->off0, np, w, p->acc, w, s->lr);
    return 0;
}

/* Each stage's parameters (and moments) from its replica 0, rank t, to every rank. */
static int pipe_gather(nn_layout_t *l, int moments)
{
    pipe_t *p = (pipe_t *)l;
    const int nst = moments ? hpml_optim_nstate(p->o) : 0;
    int err;

    for (int t = 0; t < p->S; t++) {
        const hpml_model_t *m = p->m;
        const int l0 = p->bounds[t], l1 = p->bounds[t + 1];
        const size_t a = m->layers[l0].w_off,
                     b = l1 < m->nlayers ? m->layers[l1].w_off : m->nparams;
        if ((err = hpml_bcast(p->m->params + a, b - a, HPML_F32, t, p->comm)) != 0)
            return err;
        for (int i = 0; i < nst; i++)
            if ((err = hpml_bcast(hpml_optim_state(p->o, i) + a, b - a, HPML_F32, t, p->comm)) != 0)
                return err;
    }
    return 0;
}

/* Rank 0 writes every rank's actions as a Chrome trace: a process per replica, a thread per
 * stage, an event per forward (F j) or backward (B j); the gaps are the bubble. Collective. */
static int write_trace(pipe_t *p)
{
    const int P = hpml_comm_size(p->comm);
    double *buf = NULL;
    hpml_io_file_t *w = NULL;
    FILE *f = NULL;
    int err = 0;

    p->traced = 1;
    if (p->me != 0) {
        int64_t cnt = p->nev;
        if ((err = hpml_send(&cnt, 1, HPML_I64, 0, 0, p->comm)) == 0)
            err = hpml_send(p->ev, 4 * (size_t)p->nev, HPML_F64, 0, 1, p->comm);
        return hpml_comm_agree(p->comm, err);
    }
    if (!(buf = malloc(MAX_EVENTS * 4 * sizeof(double))))
        err = hpml_set_error(HPML_ERR_NOMEM, "train: no memory for the trace");
    if (err == 0 && (err = hpml_io_file_open(p->cfg->trace, &w, &f)) != 0)
        w = NULL, f = NULL;
    if (f)
        fprintf(f, "{\"traceEvents\": [");
    for (int q = 0; q < P; q++) {
        int64_t cnt = p->nev;
        const double *e = p->ev;
        if (q > 0) { /* every rank's messages are received, even after a failure */
            int rc = hpml_recv(&cnt, 1, HPML_I64, q, 0, p->comm);
            if (rc == 0 && (cnt < 0 || cnt > MAX_EVENTS))
                rc = hpml_set_error(HPML_ERR_STATE, "train: rank %d traced %lld actions", q,
                                    (long long)cnt);
            if (rc == 0)
                rc = hpml_recv(buf ? buf : p->ev, 4 * (size_t)cnt, HPML_F64, q, 1, p->comm);
            err = err ? err : rc;
            e = buf;
        }
        if (f == NULL || err != 0)
            continue;
        fprintf(f,
                "%s{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, "
                "\"args\": {\"name\": \"stage %d (rank %d)\"}}",
                q ? ", " : "", q / p->S, q % p->S, q % p->S, q);
        for (int64_t n = 0; n < cnt; n++, e += 4)
            fprintf(f,
                    ", {\"name\": \"%c%d\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, "
                    "\"tid\": %d, \"ts\": %.3f, \"dur\": %.3f}",
                    e[3] == 1 ? 'F' : 'B', (int)e[2], e[3] == 1 ? "forward" : "backward", q / p->S,
                    q % p->S, 1e6 * e[0], 1e6 * (e[1] - e[0]));
    }
    if (f)
        fprintf(f, "]}\n");
    if (w != NULL) {
        if (err != 0)
            hpml_io_file_abort(w);
        else
            err = hpml_io_file_commit(w);
    }
    free(buf);
    return hpml_comm_agree(p->comm, err);
}

/* Replica 0's figures of every stage: rank t's, allgathered. */
static int pipe_stages(nn_layout_t *l, hpml_stage_report_t *out, int *n, double *theory)
{
    enum { K = 8 };
    pipe_t *p = (pipe_t *)l;
    const int P = hpml_comm_size(p->comm);
    const size_t np = p->off1 - p->off0;
    const double steps = p->steps > 0 ? (double)p->steps : 1;
    const size_t per_mb =
        p->recompute ? p->mb * p->in_w * sizeof(float) : hpml__nn_act_bytes(p->slot[0], p->mb);
    double mine[K], *all = malloc((size_t)P * K * sizeof(double));
    int err;

    if (p->ev && !p->traced && (err = write_trace(p)) != 0) {
        free(all);
        return err;
    }
    if (all == NULL)
        return hpml_set_error(HPML_ERR_NOMEM, "train: no memory for the pipeline's report");
    mine[0] = (double)np;
    mine[1] = (double)(per_mb * (size_t)p->peak_live +
                       (p->recompute ? hpml__nn_act_bytes(p->slot[0], p->mb) : 0));
    mine[2] = (double)p->peak_live;
    mine[3] = p->span / steps;
    mine[4] = p->busy_s / steps;
    mine[5] = (double)hpml_optim_nstate(p->o);
    mine[6] = mine[7] = 0;
    err = hpml_allgather(mine, all, K, HPML_F64, p->comm);
    for (int t = 0; err == 0 && t < p->S; t++) {
        const double *v = all + (size_t)t * K;
        hpml_stage_report_t *e = &out[t];
        e->first_layer = p->bounds[t];
        e->last_layer = p->bounds[t + 1] - 1;
        e->params = (size_t)v[0];
        e->param_bytes = e->grad_bytes = e->params * sizeof(float);
        e->optim_bytes = (size_t)v[5] * e->params * sizeof(float);
        e->act_bytes = (size_t)v[1];
        e->peak_live = (int)v[2];
        e->step_s = v[3];
        e->busy_s = v[4];
        e->bubble = v[3] > 0 ? 1.0 - v[4] / v[3] : 0;
    }
    free(all);
    *n = p->S;
    *theory = (double)(p->S - 1) / (double)(p->M + p->S - 1);
    p->span = p->busy_s = 0;
    p->steps = 0;
    p->peak_live = 0;
    return err;
}

const nn_layout_ops_t hpml__layout_pipe = {
    .name = "pipeline",
    .split = 0,
    .open = pipe_open,
    .forward = pipe_forward,
    .backward = pipe_backward,
    .update = pipe_update,
    .gather = pipe_gather,
    .close = pipe_close,
    .stages = pipe_stages,
};
