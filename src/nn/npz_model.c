/*
 * Models as NumPy .npz archives that PyTorch and NumPy read: each parameter is an array
 * named as in the state_dict of the equivalent torch.nn.Sequential ("0.weight" (out, in)
 * for a dense layer, (out, in, kh, kw) for a convolution, "0.bias"), which is how hpml
 * already stores them, so the arrays are the parameter buffer's pieces as they are. The
 * spec, input shape, normalisation and the Sequential's modules ride along as hpml_*
 * members. Reading checks every name and shape against the spec (docs/models.md).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io_internal.h"
#include "nn/nn_internal.h"

/* One parameter tensor of the Sequential. */
typedef struct {
    char name[32];
    int ndim;
    size_t shape[4];
    size_t off, count;
} torch_tensor_t;

/* The nn.Sequential equivalent of m: its tensors (at most 2 per layer) into t, and its
 * modules, one a line ("Linear 784 512", "Conv2d 1 16 5 1 2", "MaxPool2d 2 2", "ReLU",
 * "Flatten", "Dropout 0.5"), into mods. The Sequential takes (N, C, H, W) inputs, or
 * (N, C*H*W) when the spec starts with a dense layer; a Flatten is inserted before a dense
 * layer whose input is an image. */
static int torch_layout(const hpml_model_t *m, torch_tensor_t *t, int *nt, char *mods, size_t len)
{
    size_t used = 0;
    int idx = 0, flat = m->nlayers > 0 && m->layers[0].kind == NN_DENSE;

#define MOD(...)                                                                                   \
    do {                                                                                           \
        used += (size_t)snprintf(mods + used, used < len ? len - used : 0, __VA_ARGS__);           \
        idx++;                                                                                     \
    } while (0)
    *nt = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const nn_layer_t *l = &m->layers[i];
        torch_tensor_t *w = &t[*nt], *b = &t[*nt + 1];

        switch (l->kind) {
        case NN_DENSE:
            if (!flat)
                MOD("Flatten\n");
            flat = 1;
            *w = (torch_tensor_t){.ndim = 2, .shape = {(size_t)l->out_c, l->in_size}};
            MOD("Linear %zu %d\n", l->in_size, l->out_c);
            break;
        case NN_CONV:
        case NN_POOL:
            if (flat)
                return hpml_set_error(HPML_ERR_UNSUPPORTED,
                                      "layer %d (%s) follows a flat layer: no nn.Sequential "
                                      "equivalent without an Unflatten",
                                      i + 1, hpml__nn_kind_name(l->kind));
            if (l->kind == NN_POOL) {
                MOD("MaxPool2d %d %d\n", l->k, l->stride);
                continue;
            }
            *w = (torch_tensor_t){
                .ndim = 4,
                .shape = {(size_t)l->out_c, (size_t)l->in_c, (size_t)l->k, (size_t)l->k}};
            MOD("Conv2d %d %d %d %d %d\n", l->in_c, l->out_c, l->k, l->stride, l->pad);
            break;
        case NN_RELU: MOD("ReLU\n"); continue;
        case NN_FLATTEN:
            MOD("Flatten\n");
            flat = 1;
            continue;
        case NN_DROPOUT: MOD("Dropout %.9g\n", (double)l->p); continue;
        }
        /* A dense or conv layer: its weight and bias are the module just added. */
        snprintf(w->name, sizeof(w->name), "%d.weight", idx - 1);
        w->off = l->w_off;
        w->count = l->nw;
        *b = (torch_tensor_t){
            .ndim = 1, .shape = {(size_t)l->out_c}, .off = l->b_off, .count = l->nb};
        snprintf(b->name, sizeof(b->name), "%d.bias", idx - 1);
        *nt += 2;
        if (l->relu)
            MOD("ReLU\n");
    }
#undef MOD
    if (used >= len)
        return hpml_set_error(HPML_ERR_NOMEM, "the model has too many modules");
    return 0;
}

static void shape_str(const size_t *shape, int ndim, char *buf, size_t len)
{
    size_t u = (size_t)snprintf(buf, len, "(");

    for (int i = 0; i < ndim && u < len; i++)
        u += (size_t)snprintf(buf + u, len - u, "%s%zu", i ? ", " : "", shape[i]);
    if (u < len)
        snprintf(buf + u, len - u, "%s)", ndim == 1 ? "," : "");
}

/* Room for the tensors of m (two per layer) and its module lines. */
static int layout_alloc(const hpml_model_t *m, torch_tensor_t **t, char **mods, size_t *mlen)
{
    *mlen = 64 * (size_t)(2 * m->nlayers + 1);
    *t = calloc(2 * (size_t)m->nlayers + 1, sizeof(**t));
    *mods = malloc(*mlen);
    if (*t == NULL || *mods == NULL)
        return hpml_set_error(HPML_ERR_NOMEM, "out of memory");
    return 0;
}

int hpml_model_torch_modules(const hpml_model_t *m, char *buf, size_t len)
{
    torch_tensor_t *t = NULL;
    char *mods = NULL;
    size_t mlen;
    int nt, err;

    if ((err = layout_alloc(m, &t, &mods, &mlen)) == 0 &&
        (err = torch_layout(m, t, &nt, mods, mlen)) == 0)
        snprintf(buf, len, "%s", mods);
    free(t);
    free(mods);
    return err;
}

int hpml_model_export_npz(const hpml_model_t *m, float mean, float std, const char *path)
{
    hpml__npz_writer_t w = {0};
    torch_tensor_t *t = NULL;
    char *mods = NULL;
    size_t mlen, three = 3;
    int32_t shape[3] = {m->in_c, m->in_h, m->in_w};
    int nt, err;

    if ((err = layout_alloc(m, &t, &mods, &mlen)) != 0 ||
        (err = torch_layout(m, t, &nt, mods, mlen)) != 0) {
        err = hpml_set_error(err, "%s: %s", path, hpml_last_error());
        goto out;
    }
    for (int i = 0; i < nt; i++)
        hpml__npz_add(&w, t[i].name, HPML_F32, t[i].ndim, t[i].shape, m->params + t[i].off);
    hpml__npz_add_str(&w, "hpml_spec", m->spec);
    hpml__npz_add(&w, "hpml_input_shape", HPML_I32, 1, &three, shape);
    hpml__npz_add(&w, "hpml_mean", HPML_F32, 0, NULL, &mean);
    hpml__npz_add(&w, "hpml_std", HPML_F32, 0, NULL, &std);
    hpml__npz_add_str(&w, "hpml_modules", mods);
    err = hpml__npz_commit(&w, path);
out:
    hpml__npz_free(&w);
    free(t);
    free(mods);
    return err;
}

/* A member that must hold exactly n floats (a 0-d scalar for n = 1). */
static int read_floats(const hpml__npz_t *z, const hpml__npz_entry_t *e, float *dst, size_t n)
{
    hpml__io_dense_t h;
    hpml_array_t a;
    int err;

    if ((err = hpml__npz_read_f32(z, e, &h, &a)) != 0)
        return err;
    if (a.rows * a.cols != n)
        err = hpml_set_error(HPML_ERR_FORMAT, "%s: '%s' holds %zu values, not %zu", z->path,
                             e->name, a.rows * a.cols, n);
    else
        memcpy(dst, a.data, n * sizeof(float));
    hpml_array_free(&a);
    return err;
}

/* The file's spec and input shape (*have = 0 when it has none), as hpml_model_create
 * would take them. */
static int file_spec(const hpml__npz_t *z, char *spec, size_t len, int32_t shape[3], int *have)
{
    const hpml__npz_entry_t *es = hpml__npz_find(z, "hpml_spec"),
                            *ei = hpml__npz_find(z, "hpml_input_shape");
    float f[3];
    int err;

    *have = 0;
    if (es == NULL && ei == NULL)
        return 0;
    if (es == NULL || ei == NULL)
        return hpml_set_error(HPML_ERR_FORMAT, "%s: has %s but not %s", z->path,
                              es ? "hpml_spec" : "hpml_input_shape",
                              es ? "hpml_input_shape" : "hpml_spec");
    if ((err = hpml__npz_read_str(z, es, spec, len)) != 0 || (err = read_floats(z, ei, f, 3)) != 0)
        return err;
    for (int i = 0; i < 3; i++) {
        if (!(f[i] >= 1 && f[i] <= 1 << 24 && f[i] == floorf(f[i])))
            return hpml_set_error(HPML_ERR_FORMAT,
                                  "%s: hpml_input_shape is not 3 positive integers", z->path);
        shape[i] = (int32_t)f[i];
    }
    *have = 1;
    return 0;
}

/* Fill m's parameters from z's arrays: every tensor of the Sequential present with its
 * shape, and no other array besides the hpml_* members. */
static int fill_params(const hpml__npz_t *z, hpml_model_t *m)
{
    torch_tensor_t *t = NULL;
    char *mods = NULL, want[128], got[128];
    size_t mlen;
    int nt, err;

    if ((err = layout_alloc(m, &t, &mods, &mlen)) != 0 ||
        (err = torch_layout(m, t, &nt, mods, mlen)) != 0) {
        err = hpml_set_error(err, "%s: %s", z->path, hpml_last_error());
        goto out;
    }
    for (int i = 0; i < z->n; i++) {
        int known = strncmp(z->e[i].name, "hpml_", 5) == 0;

        for (int j = 0; j < nt && !known; j++)
            known = strcmp(z->e[i].name, t[j].name) == 0;
        if (!known) {
            err = hpml_set_error(HPML_ERR_FORMAT,
                                 "%s: array '%s' is not a parameter of the model '%s' (its "
                                 "parameters are %s .. %s)",
                                 z->path, z->e[i].name, m->spec, nt ? t[0].name : "none",
                                 nt ? t[nt - 1].name : "none");
            goto out;
        }
    }
    for (int j = 0; j < nt; j++) {
        const hpml__npz_entry_t *e = hpml__npz_find(z, t[j].name);
        hpml__io_dense_t h;
        hpml_array_t a;
        int same;

        shape_str(t[j].shape, t[j].ndim, want, sizeof(want));
        if (e == NULL) {
            err = hpml_set_error(HPML_ERR_FORMAT, "%s: no array '%s' %s for the model '%s'",
                                 z->path, t[j].name, want, m->spec);
            goto out;
        }
        if ((err = hpml__npz_read_f32(z, e, &h, &a)) != 0)
            goto out;
        same = h.ndim == t[j].ndim;
        for (int d = 0; same && d < h.ndim; d++)
            same = h.dims[d] == t[j].shape[d];
        if (!same) {
            hpml__io_shape_str(&h, got, sizeof(got));
            hpml_array_free(&a);
            err = hpml_set_error(HPML_ERR_FORMAT, "%s: '%s' has shape %s, the model '%s' needs %s",
                                 z->path, t[j].name, got, m->spec, want);
            goto out;
        }
        memcpy(m->params + t[j].off, a.data, t[j].count * sizeof(float));
        hpml_array_free(&a);
    }
out:
    free(t);
    free(mods);
    return err;
}

int hpml_model_load_npz(const char *path, const char *spec, int c, int h, int w, hpml_model_t **out,
                        float *mean, float *std, int *has_norm)
{
    hpml__npz_t z;
    hpml_model_t *m = NULL, *fm = NULL;
    const hpml__npz_entry_t *em, *esd;
    char fspec[4096];
    int32_t fshape[3];
    int have, err;

    *out = NULL;
    *mean = 0.0f;
    *std = 1.0f;
    if (has_norm)
        *has_norm = 0;
    if ((err = hpml__npz_open(&z, path)) != 0 ||
        (err = file_spec(&z, fspec, sizeof(fspec), fshape, &have)) != 0)
        goto out;
    if (spec == NULL && !have) {
        err = hpml_set_error(HPML_ERR_FORMAT,
                             "%s: has no hpml_spec and hpml_input_shape: give the model (hpml "
                             "import --model SPEC --input-shape CxHxW, or hpml train --model "
                             "SPEC --init-from)",
                             path);
        goto out;
    }
    if (spec == NULL) {
        spec = fspec;
        c = fshape[0];
        h = fshape[1];
        w = fshape[2];
    }
    if ((err = hpml_model_create(spec, c, h, w, &m)) != 0) {
        err = hpml_set_error(err, "%s: %s", path, hpml_last_error());
        goto out;
    }
    if (have && spec != fspec) {
        /* The file says what it is: a different model is refused, not reinterpreted. */
        if (fshape[0] != c || fshape[1] != h || fshape[2] != w) {
            err = hpml_set_error(HPML_ERR_INVAL,
                                 "%s: holds a model for %dx%dx%d inputs, not %dx%dx%d", path,
                                 fshape[0], fshape[1], fshape[2], c, h, w);
            goto out;
        }
        if ((err = hpml_model_create(fspec, c, h, w, &fm)) != 0) {
            err = hpml_set_error(err, "%s: hpml_spec: %s", path, hpml_last_error());
            goto out;
        }
        if (strcmp(fm->spec, m->spec) != 0) {
            err = hpml_set_error(HPML_ERR_INVAL, "%s: holds the model '%s', not '%s'", path,
                                 fm->spec, m->spec);
            goto out;
        }
    }
    if ((err = fill_params(&z, m)) != 0)
        goto out;
    em = hpml__npz_find(&z, "hpml_mean");
    esd = hpml__npz_find(&z, "hpml_std");
    if ((em == NULL) != (esd == NULL)) {
        err = hpml_set_error(HPML_ERR_FORMAT, "%s: has one of hpml_mean and hpml_std only", path);
        goto out;
    }
    if (em != NULL) {
        if ((err = read_floats(&z, em, mean, 1)) != 0 || (err = read_floats(&z, esd, std, 1)) != 0)
            goto out;
        if (!(*std > 0.0f) || !isfinite(*std)) {
            err = hpml_set_error(HPML_ERR_FORMAT, "%s: hpml_std is %g (must be positive)", path,
                                 (double)*std);
            goto out;
        }
        if (has_norm)
            *has_norm = 1;
    }
    *out = m;
    m = NULL;
out:
    hpml__npz_close(&z);
    hpml_model_destroy(m);
    hpml_model_destroy(fm);
    return err;
}
