/*
 * Optimizers over a flat parameter vector: SGD with momentum (PyTorch's form:
 * v = mu v + g + wd w; w -= lr v), Adam (L2 weight decay added to the gradient) and AdamW
 * (decoupled decay), with constant / step / cosine learning-rate schedules and an
 * optional linear warm-up. The schedule is a pure function of the step, so a resumed run
 * needs only the step counter.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"

struct hpml_optim {
    hpml_opt_config_t c;
    size_t n;
    long t;
    float *m1, *m2;
};

void hpml_opt_config_default(hpml_opt_config_t *c)
{
    memset(c, 0, sizeof(*c));
    c->kind = HPML_OPT_SGD;
    c->lr = 0.05;
    c->momentum = 0.9;
    c->beta1 = 0.9;
    c->beta2 = 0.999;
    c->eps = 1e-8;
    c->sched = HPML_SCHED_CONST;
    c->step_gamma = 0.1;
    c->step_every = 10;
}

int hpml_opt_parse(const char *name, hpml_opt_kind_t *out)
{
    if (strcmp(name, "sgd") == 0)
        *out = HPML_OPT_SGD;
    else if (strcmp(name, "adam") == 0)
        *out = HPML_OPT_ADAM;
    else if (strcmp(name, "adamw") == 0)
        *out = HPML_OPT_ADAMW;
    else
        return hpml_set_error(HPML_ERR_INVAL, "unknown optimizer '%s' (sgd, adam, adamw)", name);
    return 0;
}

int hpml_sched_parse(const char *name, hpml_sched_t *out)
{
    if (strcmp(name, "const") == 0 || strcmp(name, "constant") == 0 || strcmp(name, "none") == 0)
        *out = HPML_SCHED_CONST;
    else if (strcmp(name, "step") == 0)
        *out = HPML_SCHED_STEP;
    else if (strcmp(name, "cosine") == 0 || strcmp(name, "cos") == 0)
        *out = HPML_SCHED_COSINE;
    else
        return hpml_set_error(HPML_ERR_INVAL, "unknown schedule '%s' (const, step, cosine)", name);
    return 0;
}

double hpml_opt_lr(const hpml_opt_config_t *c, long step, long total, long per_epoch)
{
    double lr = c->lr;

    if (c->sched == HPML_SCHED_STEP && c->step_every > 0 && per_epoch > 0)
        lr *= pow(c->step_gamma, (double)(step / per_epoch / c->step_every));
    else if (c->sched == HPML_SCHED_COSINE && total > 0)
        lr *= 0.5 * (1.0 + cos(M_PI * (double)(step < total ? step : total) / (double)total));
    if (c->warmup_steps > 0 && step < c->warmup_steps)
        lr *= (double)(step + 1) / (double)c->warmup_steps;
    return lr;
}

int hpml_optim_create(const hpml_opt_config_t *c, size_t n, hpml_optim_t **out)
{
    hpml_optim_t *o = calloc(1, sizeof(*o));

    *out = NULL;
    if (o == NULL)
        return HPML_ERR_NOMEM;
    o->c = *c;
    o->n = n;
    if (c->kind != HPML_OPT_SGD || c->momentum != 0.0)
        o->m1 = hpml_calloc(n + 1, sizeof(float));
    if (c->kind != HPML_OPT_SGD)
        o->m2 = hpml_calloc(n + 1, sizeof(float));
    if ((o->m1 == NULL && (c->kind != HPML_OPT_SGD || c->momentum != 0.0)) ||
        (o->m2 == NULL && c->kind != HPML_OPT_SGD)) {
        hpml_optim_destroy(o);
        return HPML_ERR_NOMEM;
    }
    *out = o;
    return 0;
}

void hpml_optim_destroy(hpml_optim_t *o)
{
    if (o == NULL)
        return;
    hpml_free(o->m1);
    hpml_free(o->m2);
    free(o);
}

void hpml_optim_begin(hpml_optim_t *o)
{
    o->t++;
}

/* The update loops. Inlined three times by hpml_optim_update, with out == w, with
 * out == g (apply's hierarchical path hands fn the same memory as in and out) and with
 * neither, so that each copy vectorizes: a loop writing out[i] from w[i] and g[i] through
 * pointers that may overlap runs scalar when they do. */
static inline void update(hpml_optim_t *o, size_t off, size_t n, const float *w, const float *g,
                          float *out, double lr_d)
{
    const float lr = (float)lr_d, wd = (float)o->c.weight_decay;

    if (o->c.kind == HPML_OPT_SGD) {
        const float mu = (float)o->c.momentum;
        float *v = o->m1 ? o->m1 + off : NULL;
        if (v == NULL) {
            for (size_t i = 0; i < n; i++)
                out[i] = w[i] - lr * (g[i] + wd * w[i]);
        } else if (o->t == 1) { /* PyTorch starts the buffer at the first gradient */
            for (size_t i = 0; i < n; i++) {
                v[i] = g[i] + wd * w[i];
                out[i] = w[i] - lr * v[i];
            }
        } else {
            for (size_t i = 0; i < n; i++) {
                v[i] = mu * v[i] + g[i] + wd * w[i];
                out[i] = w[i] - lr * v[i];
            }
        }
    } else {
        const float b1 = (float)o->c.beta1, b2 = (float)o->c.beta2, eps = (float)o->c.eps;
        const double bc1 = 1.0 - pow(o->c.beta1, (double)o->t);
        const double bc2 = 1.0 - pow(o->c.beta2, (double)o->t);
        const float step = (float)(lr_d / bc1), rb2 = (float)(1.0 / sqrt(bc2));
        const int decoupled = o->c.kind == HPML_OPT_ADAMW;
        float *m1 = o->m1 + off, *m2 = o->m2 + off;
        for (size_t i = 0; i < n; i++) {
            float gi = decoupled ? g[i] : g[i] + wd * w[i];
            float wi = decoupled ? w[i] - lr * wd * w[i] : w[i];
            m1[i] = b1 * m1[i] + (1.0f - b1) * gi;
            m2[i] = b2 * m2[i] + (1.0f - b2) * gi * gi;
            out[i] = wi - step * m1[i] / (sqrtf(m2[i]) * rb2 + eps);
        }
    }
}

void hpml_optim_update(hpml_optim_t *o, size_t off, size_t n, const float *w, const float *g,
                       float *out, double lr)
{
    if (out == w)
        update(o, off, n, out, g, out, lr);
    else if (out == g)
        update(o, off, n, w, out, out, lr);
    else
        update(o, off, n, w, g, out, lr);
}

void hpml_optim_step(hpml_optim_t *o, float *w, const float *g, double lr)
{
    hpml_optim_begin(o);
    hpml_optim_update(o, 0, o->n, w, g, w, lr);
}

int hpml_optim_nstate(const hpml_optim_t *o)
{
    return (o->m1 != NULL) + (o->m2 != NULL);
}

float *hpml_optim_state(hpml_optim_t *o, int i)
{
    return i == 0 ? o->m1 : o->m2;
}

long *hpml_optim_t_ptr(hpml_optim_t *o)
{
    return &o->t;
}
