/*
 * Which layout a run uses (layout.h): the data-parallel one, or the hybrid one with one or
 * two dense layers split, chosen from the configuration, the model, the rank count and the
 * samples per rank by the data a rank sends per step (docs/nn.md, "Hybrid layout").
 */
#include <string.h>

#include "nn/layout.h"

int hpml_parallel_parse(const char *name, hpml_parallel_t *out)
{
    static const char *const names[] = {"auto", "data", "hybrid"};

    for (int i = 0; i < 3; i++)
        if (name && strcmp(name, names[i]) == 0) {
            *out = (hpml_parallel_t)i;
            return 0;
        }
    return hpml_set_error(HPML_ERR_INVAL,
                          "parallel layout: expected auto, data or hybrid, got '%s'",
                          name ? name : "(null)");
}

const char *hpml_parallel_name(hpml_parallel_t p)
{
    return p == HPML_PARALLEL_PIPELINE ? "pipeline"
           : p == HPML_PARALLEL_HYBRID ? "hybrid"
           : p == HPML_PARALLEL_DATA   ? "data"
                                       : "auto";
}

/* What a rank sends per step with `layers` layers split (lb samples per rank, an even
 * split), in units of 2 (P-1)/P floats: the exchanges of activations (one layer: its
 * outputs for the other ranks' samples, forward and backward) or of partial sums (two
 * layers: layer 1's pre-activations), and the gradients of the parameters above the split
 * (reduce-scattered and all-gathered, or allreduced). */
static double split_cost(const hpml_model_t *m, int P, size_t lb, int layers)
{
    const size_t n = m->nparams;

    if (layers == 1)
        return (double)lb * (double)m->layers[0].out_size +
               (double)(m->nlayers > 1 ? n - m->layers[1].w_off : 0);
    return (double)P * (double)lb * (double)m->layers[1].out_size +
           (double)(n - m->layers[1].b_off);
}

/* Can the hybrid layout split model m's first layer on P ranks (replicated: every rank can
 * read every sample)? 1 yes, 0 no, or when it was asked for (forced) HPML_ERR_INVAL saying
 * why not. */
static int hybrid_usable(const hpml_model_t *m, int P, int replicated, int forced)
{
    const nn_layer_t *l = &m->layers[0];

    if (l->kind != NN_DENSE)
        return forced ? hpml_set_error(HPML_ERR_INVAL,
                                       "train: the hybrid layout splits a first 'dense' layer; "
                                       "this model starts with '%s'",
                                       hpml__nn_kind_name(l->kind))
                      : 0;
    if (!replicated)
        return forced ? hpml_set_error(HPML_ERR_INVAL,
                                       "train: the hybrid layout needs the whole training set "
                                       "on every rank (not sharded data)")
                      : 0;
    if (l->out_size < (size_t)P)
        return forced ? hpml_set_error(HPML_ERR_INVAL,
                                       "train: the hybrid layout needs an output of the first "
                                       "layer per rank (it has %zu, for %d ranks)",
                                       l->out_size, P)
                      : 0;
    return 1;
}

/* How many layers model m has split on P ranks: 0 (the data-parallel layout), 1 or 2, or
 * an error when the hybrid layout or a number of split layers was asked for and cannot be
 * used. */
static int split_layers(const hpml_train_config_t *c, const hpml_model_t *m, int P, int replicated,
                        size_t lb)
{
    const int forced = c->parallel == HPML_PARALLEL_HYBRID || c->split_layers != 0;
    const int pair_ok = m->nlayers > 1 && m->layers[1].kind == NN_DENSE;
    int err;

    if (c->split_layers < 0 || c->split_layers > 2)
        return hpml_set_error(HPML_ERR_INVAL,
                              "train: split layers must be 0 (auto), 1 or 2, not %d",
                              c->split_layers);
    if (c->split_layers != 0 && c->parallel == HPML_PARALLEL_DATA)
        return hpml_set_error(HPML_ERR_INVAL,
                              "train: splitting layers is the hybrid layout, not the data-parallel "
                              "one");
    if (P == 1 || c->parallel == HPML_PARALLEL_DATA)
        return 0;
    if ((err = hybrid_usable(m, P, replicated, forced)) <= 0)
        return err;
    if (c->split_layers == 2 && !pair_ok)
        return hpml_set_error(
            HPML_ERR_INVAL,
            "train: splitting 2 layers needs a second 'dense' layer; this model's "
            "second layer is '%s'",
            m->nlayers > 1 ? hpml__nn_kind_name(m->layers[1].kind) : "(none)");
    if (!forced && lb > m->layers[0].in_size)
        return 0;
    if (c->split_layers != 0)
        return c->split_layers;
    return pair_ok && split_cost(m, P, lb, 2) < split_cost(m, P, lb, 1) ? 2 : 1;
}

double hpml__model_bytes(const hpml_train_config_t *c, const hpml_model_t *m, size_t n)
{
    const int nstate =
        (c->opt.kind != HPML_OPT_SGD || c->opt.momentum != 0.0) + (c->opt.kind != HPML_OPT_SGD);

    return (double)m->nparams * sizeof(float) * (2 + nstate) + (double)hpml__nn_act_bytes(m, n);
}

int hpml__layout_pick(const hpml_train_config_t *c, const hpml_model_t *m, int P, int replicated,
                      size_t lb, const nn_layout_ops_t **out)
{
    static const nn_layout_ops_t *const by_split[] = {&hpml__layout_data, &hpml__layout_split1,
                                                      &hpml__layout_split2};
    int n;

    if (c->stages > 1) {
        if ((n = hpml__pipe_plan(c, m, P, lb, NULL)) != 0)
            return n;
        *out = &hpml__layout_pipe;
        return 0;
    }
    n = split_layers(c, m, P, replicated, lb);
    if (n < 0)
        return n;
    /* Every rank holds the whole model here (the split layers' rows aside): the estimate
     * is the data layout's. */
    if (c->memory_limit > 0 && hpml__model_bytes(c, m, lb) > (double)c->memory_limit)
        return hpml_set_error(HPML_ERR_INVAL,
                              "train: the %s layout needs %.1f MiB per rank (parameters, "
                              "gradients, optimizer state, activations of %zu samples), more "
                              "than --memory-limit %.1f MiB; --pipeline S spreads the layers",
                              n ? "hybrid" : "data-parallel",
                              hpml__model_bytes(c, m, lb) / 1048576.0, lb,
                              (double)c->memory_limit / 1048576.0);
    *out = by_split[n];
    return 0;
}

int hpml_train_layout(const hpml_train_config_t *c, int nranks, int in_c, int in_h, int in_w,
                      int replicated, size_t local_batch, hpml_parallel_t *out, int *split_layers)
{
    const nn_layout_ops_t *l = NULL;
    hpml_model_t *m = NULL;
    int rc;

    if ((rc = hpml_model_create(c->spec, in_c, in_h, in_w, &m)) != 0)
        return rc;
    rc = hpml__layout_pick(c, m, nranks, replicated, local_batch, &l);
    hpml_model_destroy(m);
    if (rc < 0)
        return rc;
    *out = l == &hpml__layout_pipe ? HPML_PARALLEL_PIPELINE
           : l->split              ? HPML_PARALLEL_HYBRID
                                   : HPML_PARALLEL_DATA;
    if (split_layers)
        *split_layers = l->split;
    return 0;
}
