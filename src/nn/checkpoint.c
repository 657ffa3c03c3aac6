/*
 * Training checkpoints: the parameters, the optimizer's moments and step count, and where
 * the run is (epoch, step, dropout RNG, the epoch's loss and accuracy so far), with what
 * defines the run (spec, input shape, seed, batch, training-set size, data layout,
 * optimizer), so that a resumed run continues bit for bit or is refused. The format is
 * written field by field, little-endian, versioned and checksummed (docs/nn.md). No MPI
 * here: checkpoint_io.c writes and reads the file for the ranks.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"

#define CKPT_MAGIC   "HPMLCKPT"
#define CKPT_VERSION 2u

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoints store parameters as little-endian floats: a big-endian host needs a swap"
#endif

static void put_u32(nn_buf_t *b, uint32_t v)
{
    hpml__nn_put(b, &v, 4);
}

static void put_u64(nn_buf_t *b, uint64_t v)
{
    hpml__nn_put(b, &v, 8);
}

static void put_f64(nn_buf_t *b, double v)
{
    hpml__nn_put(b, &v, 8);
}

/* Readers: each returns -1 once the image is too short, and keeps returning it. */
typedef struct {
    const unsigned char *p;
    size_t len, off;
    int short_read;
} reader_t;

static uint32_t get_u32(reader_t *r)
{
    uint32_t v = 0;

    if (hpml__nn_get(r->p, r->len, &r->off, &v, 4) != 0)
        r->short_read = 1;
    return v;
}

static uint64_t get_u64(reader_t *r)
{
    uint64_t v = 0;

    if (hpml__nn_get(r->p, r->len, &r->off, &v, 8) != 0)
        r->short_read = 1;
    return v;
}

static double get_f64(reader_t *r)
{
    double v = 0;

    if (hpml__nn_get(r->p, r->len, &r->off, &v, 8) != 0)
        r->short_read = 1;
    return v;
}

int hpml__ckpt_encode(const hpml_model_t *m, hpml_optim_t *o, const nn_ckpt_t *st, nn_buf_t *b)
{
    const size_t np = m->nparams;
    const int ns = hpml_optim_nstate(o);
    uint32_t crc;

    hpml__nn_put(b, CKPT_MAGIC, 8);
    put_u32(b, CKPT_VERSION);
    put_u32(b, (uint32_t)strlen(m->spec));
    hpml__nn_put(b, m->spec, strlen(m->spec));
    put_u32(b, (uint32_t)m->in_c);
    put_u32(b, (uint32_t)m->in_h);
    put_u32(b, (uint32_t)m->in_w);
    put_u64(b, np);
    /* The run. */
    put_u64(b, st->seed);
    put_u64(b, st->batch);
    put_u64(b, st->samples);
    put_u32(b, st->shard_ranks);
    put_u32(b, st->opt_kind);
    /* Where it is. */
    put_u64(b, (uint64_t)st->epoch);
    put_u64(b, (uint64_t)st->step_in_epoch);
    put_u64(b, (uint64_t)st->global_step);
    for (int i = 0; i < 4; i++)
        put_u64(b, st->rng.s[i]);
    put_f64(b, st->train_time);
    put_u32(b, st->nranks);
    for (size_t i = 0; i < 3 * (size_t)st->nranks; i++)
        put_f64(b, st->rank_sums[i]);
    /* The optimizer and the parameters. */
    put_u32(b, (uint32_t)ns);
    put_u64(b, (uint64_t)*hpml_optim_t_ptr(o));
    hpml__nn_put(b, m->params, np * sizeof(float));
    for (int i = 0; i < ns; i++)
        hpml__nn_put(b, hpml_optim_state(o, i), np * sizeof(float));
    crc = hpml__nn_crc(0, b->p, b->len);
    put_u32(b, crc);
    return b->err;
}

/* An optimizer kind's name, for messages. */
static const char *opt_name(uint32_t kind)
{
    switch (kind) {
    case HPML_OPT_SGD: return "sgd";
    case HPML_OPT_ADAM: return "adam";
    case HPML_OPT_ADAMW: return "adamw";
    default: return "an unknown optimizer";
    }
}

int hpml__ckpt_decode(const char *path, const unsigned char *p, size_t len, hpml_model_t *m,
                      hpml_optim_t *o, nn_ckpt_t *st)
{
    reader_t r = {p, 0, 8, 0};
    uint32_t crc, v, sl, shape[3], ns;
    uint64_t np, t;
    size_t rest;
    double *sums = NULL;
    int err = 0;

    if (len < 8 || memcmp(p, CKPT_MAGIC, 8) != 0)
        return hpml_set_error(HPML_ERR_FORMAT, "%s: not an hpml checkpoint (bad magic)", path);
    if (len < 16 || (memcpy(&crc, p + len - 4, 4), hpml__nn_crc(0, p, len - 4) != crc))
        return hpml_set_error(HPML_ERR_FORMAT,
                              "%s: checksum mismatch: the checkpoint is truncated or corrupt "
                              "(%zu bytes)",
                              path, len);
    r.len = len - 4;
    if ((v = get_u32(&r)) != CKPT_VERSION)
        return hpml_set_error(HPML_ERR_FORMAT,
                              "%s: checkpoint format version %u; this hpml reads version %u", path,
                              v, CKPT_VERSION);
    sl = get_u32(&r);
    if (r.short_read || sl > r.len - r.off)
        return hpml_set_error(HPML_ERR_FORMAT, "%s: truncated checkpoint header", path);
    if (sl != strlen(m->spec) || memcmp(p + r.off, m->spec, sl) != 0)
        return hpml_set_error(HPML_ERR_FORMAT, "%s: the checkpoint is of model '%.*s', not '%s'",
                              path, (int)sl, (const char *)p + r.off, m->spec);
    r.off += sl;
    for (int i = 0; i < 3; i++)
        shape[i] = get_u32(&r);
    np = get_u64(&r);
    if (!r.short_read && (shape[0] != (uint32_t)m->in_c || shape[1] != (uint32_t)m->in_h ||
                          shape[2] != (uint32_t)m->in_w))
        return hpml_set_error(HPML_ERR_FORMAT,
                              "%s: the checkpoint's model takes %ux%ux%u samples, this run's "
                              "%dx%dx%d",
                              path, shape[0], shape[1], shape[2], m->in_c, m->in_h, m->in_w);
    st->seed = get_u64(&r);
    st->batch = get_u64(&r);
    st->samples = get_u64(&r);
    st->shard_ranks = get_u32(&r);
    st->opt_kind = get_u32(&r);
    st->epoch = (int64_t)get_u64(&r);
    st->step_in_epoch = (int64_t)get_u64(&r);
    st->global_step = (int64_t)get_u64(&r);
    for (int i = 0; i < 4; i++)
        st->rng.s[i] = get_u64(&r);
    st->train_time = get_f64(&r);
    st->nranks = get_u32(&r);
    st->rank_sums = NULL;
    if (r.short_read || st->nranks == 0 || st->nranks > (r.len - r.off) / 24)
        return hpml_set_error(HPML_ERR_FORMAT, "%s: truncated checkpoint header", path);
    sums = malloc(3 * (size_t)st->nranks * sizeof(double));
    if (sums == NULL)
        return hpml_set_error(HPML_ERR_NOMEM, "%s: no memory for %u ranks' sums", path, st->nranks);
    for (size_t i = 0; i < 3 * (size_t)st->nranks; i++)
        sums[i] = get_f64(&r);
    ns = get_u32(&r);
    t = get_u64(&r);
    if (r.short_read) {
        err = hpml_set_error(HPML_ERR_FORMAT, "%s: truncated checkpoint header", path);
        goto out;
    }
    rest = r.len - r.off;
    if (np != m->nparams || ns != (uint32_t)hpml_optim_nstate(o) ||
        rest / sizeof(float) / (1 + (size_t)ns) != np || rest % ((1 + (size_t)ns) * 4) != 0) {
        err = hpml_set_error(HPML_ERR_FORMAT,
                             "%s: the checkpoint holds %llu parameters and %u optimizer moments; "
                             "this model has %zu and its optimizer %d",
                             path, (unsigned long long)np, ns, m->nparams, hpml_optim_nstate(o));
        goto out;
    }
    if (st->epoch < 0 || st->step_in_epoch < 0 || st->global_step < 0 || t > (uint64_t)LONG_MAX) {
        err = hpml_set_error(HPML_ERR_FORMAT, "%s: negative step counts in the checkpoint", path);
        goto out;
    }
    for (size_t i = 0; i < 3 * (size_t)st->nranks; i++) {
        if (!isfinite(sums[i])) {
            err = hpml_set_error(HPML_ERR_FORMAT, "%s: a non-finite loss sum in the checkpoint",
                                 path);
            goto out;
        }
    }
    memcpy(m->params, p + r.off, np * sizeof(float));
    r.off += np * sizeof(float);
    for (uint32_t i = 0; i < ns; i++, r.off += np * sizeof(float))
        memcpy(hpml_optim_state(o, (int)i), p + r.off, np * sizeof(float));
    *hpml_optim_t_ptr(o) = (long)t;
    st->rank_sums = sums;
    sums = NULL;
out:
    free(sums);
    return err;
}

/* How the training data was laid out, in words. */
static const char *layout_words(uint32_t shard_ranks, char *buf, size_t size)
{
    if (shard_ranks == 0)
        snprintf(buf, size, "the whole training set on every rank");
    else
        snprintf(buf, size, "the training set sharded in %u blocks (ranks or pipeline replicas)",
                 shard_ranks);
    return buf;
}

int hpml__ckpt_check_run(const char *path, const nn_ckpt_t *saved, const nn_ckpt_t *now)
{
    if (saved->samples != now->samples)
        return hpml_set_error(HPML_ERR_INVAL,
                              "%s: the checkpoint was made on %llu training samples, this run "
                              "has %llu (another file or --train-limit?)",
                              path, (unsigned long long)saved->samples,
                              (unsigned long long)now->samples);
    if (saved->batch != now->batch || saved->seed != now->seed)
        return hpml_set_error(HPML_ERR_INVAL,
                              "%s: the checkpoint was made with batch %llu seed %llu, not batch "
                              "%llu seed %llu",
                              path, (unsigned long long)saved->batch,
                              (unsigned long long)saved->seed, (unsigned long long)now->batch,
                              (unsigned long long)now->seed);
    if (saved->shard_ranks != now->shard_ranks) {
        char a[96], b[96];

        return hpml_set_error(HPML_ERR_INVAL,
                              "%s: the checkpoint was made with %s, this run has %s", path,
                              layout_words(saved->shard_ranks, a, sizeof(a)),
                              layout_words(now->shard_ranks, b, sizeof(b)));
    }
    if (saved->opt_kind != now->opt_kind)
        return hpml_set_error(HPML_ERR_INVAL,
                              "%s: the checkpoint was made with the %s optimizer, this run uses %s",
                              path, opt_name(saved->opt_kind), opt_name(now->opt_kind));
    return 0;
}
