/*
 * The model: a list of layers over one flat parameter buffer, forward and backward.
 * Dense layers are one GEMM with the batch as the long dimension; convolutions im2col
 * the whole batch into one (C*K*K, n*OH*OW) matrix so a single GEMM with a wide N does
 * the work (per-sample GEMMs with 6 or 16 output channels run far below BLAS peak);
 * bias and ReLU are fused into the pass that scatters the GEMM output. Nothing is
 * allocated per step once hpml_model_reserve has sized the buffers.
 */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"

static void free_buffers(hpml_model_t *m)
{
    for (int i = 0; i < m->nlayers; i++) {
        nn_layer_t *l = &m->layers[i];
        hpml_free(l->out);
        hpml_free(l->col);
        hpml_free(l->tmp);
        hpml_free(l->arg);
        hpml_free(l->mask);
        hpml_free(l->scr);
        l->out = l->col = l->tmp = l->mask = l->scr = NULL;
        l->arg = NULL;
    }
    hpml_free(m->dbuf[0]);
    hpml_free(m->dbuf[1]);
    hpml_free(m->probs);
    m->dbuf[0] = m->dbuf[1] = m->probs = NULL;
    m->max_batch = 0;
}

int hpml_model_create(const char *spec, int in_c, int in_h, int in_w, hpml_model_t **out)
{
    hpml_model_t *m = NULL;
    int err;

    *out = NULL;
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return hpml_set_error(HPML_ERR_NOMEM, "nn: cannot allocate a model");
    err = hpml__nn_parse(spec, in_c, in_h, in_w, &m->layers, &m->nlayers, &m->spec);
    if (err)
        goto out;
    m->in_c = in_c;
    m->in_h = in_h;
    m->in_w = in_w;
    for (int i = 0; i < m->nlayers; i++) {
        nn_layer_t *l = &m->layers[i];
        l->w_off = m->nparams;
        m->nparams += l->nw;
        l->b_off = m->nparams;
        m->nparams += l->nb;
        l->direct = hpml__conv_direct_usable(l);
    }
    m->params = hpml_calloc(m->nparams + 1, sizeof(float));
    m->grads = hpml_calloc(m->nparams + 1, sizeof(float));
    if (m->params == NULL || m->grads == NULL) {
        err = hpml_set_error(HPML_ERR_NOMEM,
                             "nn: cannot allocate the model's %zu parameters and their "
                             "gradients (%.1f MiB)",
                             m->nparams, (double)m->nparams * 2 * sizeof(float) / 1048576.0);
        goto out;
    }
    *out = m;
    m = NULL;
out:
    hpml_model_destroy(m);
    return err;
}

void hpml_model_destroy(hpml_model_t *m)
{
    if (m == NULL)
        return;
    if (m->layers)
        free_buffers(m);
    free(m->layers);
    if (!m->borrowed) {
        hpml_free(m->params);
        hpml_free(m->grads);
    }
    free(m->spec);
    free(m);
}

void hpml_model_init(hpml_model_t *m, uint64_t seed)
{
    hpml_rng_t rng;

    hpml_rng_init(&rng, seed, 0);
    for (int i = 0; i < m->nlayers; i++) {
        nn_layer_t *l = &m->layers[i];
        float *w = m->params + l->w_off;
        double fan_in, fan_out;
        if (l->nw == 0)
            continue;
        if (l->kind == NN_CONV) {
            fan_in = (double)l->in_c * l->k * l->k;
            fan_out = (double)l->out_c * l->k * l->k;
        } else {
            fan_in = (double)l->in_size;
            fan_out = (double)l->out_size;
        }
        if (l->relu) { /* He (Kaiming) normal */
            double sd = sqrt(2.0 / fan_in);
            for (size_t j = 0; j < l->nw; j++)
                w[j] = (float)(sd * hpml_rng_normal(&rng));
        } else { /* Glorot (Xavier) uniform */
            double lim = sqrt(6.0 / (fan_in + fan_out));
            for (size_t j = 0; j < l->nw; j++)
                w[j] = (float)(lim * (2.0 * hpml_rng_uniform(&rng) - 1.0));
        }
        memset(m->params + l->b_off, 0, l->nb * sizeof(float));
    }
}

size_t hpml_model_num_params(const hpml_model_t *m)
{
    return m->nparams;
}
float *hpml_model_params(hpml_model_t *m)
{
    return m->params;
}
float *hpml_model_grads(hpml_model_t *m)
{
    return m->grads;
}
size_t hpml_model_input_size(const hpml_model_t *m)
{
    return (size_t)m->in_c * (size_t)m->in_h * (size_t)m->in_w;
}

void hpml_model_input_shape(const hpml_model_t *m, int *c, int *h, int *w)
{
    *c = m->in_c;
    *h = m->in_h;
    *w = m->in_w;
}
size_t hpml_model_output_size(const hpml_model_t *m)
{
    return m->layers[m->nlayers - 1].out_size;
}
const char *hpml_model_spec(const hpml_model_t *m)
{
    return m->spec;
}

double hpml_model_flops(const hpml_model_t *m)
{
    double f = 0;

    for (int i = 0; i < m->nlayers; i++) {
        const nn_layer_t *l = &m->layers[i];
        if (l->kind == NN_DENSE)
            f += 2.0 * (double)l->in_size * (double)l->out_size;
        else if (l->kind == NN_CONV)
            f += 2.0 * (double)l->nw * l->out_h * l->out_w;
    }
    return f;
}

const char *hpml__nn_kind_name(nn_kind_t kind)
{
    static const char *const names[] = {"dense", "conv", "pool", "relu", "flatten", "dropout"};

    return (unsigned)kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "?";
}

void hpml_model_describe(const hpml_model_t *m, char *buf, size_t len)
{
    size_t used = 0;

    if (len == 0)
        return;
    buf[0] = '\0';
    used += (size_t)snprintf(buf, len, "input %dx%dx%d\n", m->in_c, m->in_h, m->in_w);
    for (int i = 0; i < m->nlayers && used < len; i++) {
        const nn_layer_t *l = &m->layers[i];
        used += (size_t)snprintf(buf + used, len - used, "%2d %-8s -> %dx%dx%d%s  params %zu\n", i,
                                 hpml__nn_kind_name(l->kind), l->out_c, l->out_h, l->out_w,
                                 l->relu ? " relu" : "", l->nw + l->nb);
    }
    if (used < len)
        snprintf(buf + used, len - used, "total params %zu\n", m->nparams);
}

/* The most values per sample any of the model's buffers holds (activations, a
 * convolution's im2col columns and GEMM output). */
static size_t largest_per_sample(const hpml_model_t *m)
{
    size_t most = hpml_model_input_size(m);

    for (int i = 0; i < m->nlayers; i++) {
        const nn_layer_t *l = &m->layers[i];
        size_t P = (size_t)l->out_h * (size_t)l->out_w, K = (size_t)l->in_c * l->k * l->k;

        most = l->out_size > most ? l->out_size : most;
        if (l->kind == NN_CONV) {
            most = K * P > most ? K * P : most;
            most = (size_t)l->out_c * P > most ? (size_t)l->out_c * P : most;
        }
    }
    return most;
}

int hpml_model_reserve(hpml_model_t *m, size_t nb)
{
    size_t maxact = hpml_model_input_size(m);

    if (nb <= m->max_batch)
        return 0;
    /* A batch whose buffers' sizes do not fit a size_t would wrap into small ones. */
    if (nb > SIZE_MAX / sizeof(double) / largest_per_sample(m))
        return hpml_set_error(HPML_ERR_NOMEM,
                              "nn: cannot allocate activations for batch %zu: more bytes than "
                              "the address space holds",
                              nb);
    free_buffers(m);
    for (int i = 0; i < m->nlayers; i++) {
        nn_layer_t *l = &m->layers[i];
        size_t P = (size_t)l->out_h * (size_t)l->out_w;
        if (l->out_size > maxact)
            maxact = l->out_size;
        if (l->kind != NN_FLATTEN && !(l->out = hpml_malloc(nb * l->out_size * sizeof(float))))
            goto nomem;
        if (l->kind == NN_CONV && hpml__conv_direct_usable(l) &&
            !(l->scr = hpml_malloc(hpml__conv_direct_scratch(l, nb) * sizeof(float))))
            goto nomem;
        if (l->kind == NN_CONV) {
            size_t K = (size_t)l->in_c * l->k * l->k;
            if (!(l->col = hpml_malloc(K * nb * P * sizeof(float))) ||
                !(l->tmp = hpml_malloc((size_t)l->out_c * nb * P * sizeof(float))))
                goto nomem;
        }
        if (l->kind == NN_POOL && !(l->arg = hpml_malloc(nb * l->out_size * sizeof(int32_t))))
            goto nomem;
        if (l->kind == NN_DROPOUT && !(l->mask = hpml_malloc(nb * l->out_size * sizeof(float))))
            goto nomem;
    }
    if (!(m->dbuf[0] = hpml_malloc(nb * maxact * sizeof(float))) ||
        !(m->dbuf[1] = hpml_malloc(nb * maxact * sizeof(float))) ||
        !(m->probs = hpml_malloc(nb * hpml_model_output_size(m) * sizeof(float))))
        goto nomem;
    m->max_batch = nb;
    return 0;
nomem:
    free_buffers(m);
    return hpml_set_error(HPML_ERR_NOMEM, "nn: cannot allocate activations for batch %zu", nb);
}

size_t hpml__nn_layer_act_bytes(const nn_layer_t *l, size_t nb)
{
    size_t P = (size_t)l->out_h * (size_t)l->out_w, b = 0;

    /* As hpml_model_reserve allocates them. */
    b += l->kind != NN_FLATTEN ? nb * l->out_size * sizeof(float) : 0;
    if (l->kind == NN_CONV) {
        b += (size_t)l->in_c * l->k * l->k * nb * P * sizeof(float);
        b += (size_t)l->out_c * nb * P * sizeof(float);
        if (hpml__conv_direct_usable(l))
            b += hpml__conv_direct_scratch(l, nb) * sizeof(float);
    }
    b += l->kind == NN_POOL ? nb * l->out_size * sizeof(int32_t) : 0;
    b += l->kind == NN_DROPOUT ? nb * l->out_size * sizeof(float) : 0;
    return b;
}

size_t hpml__nn_act_bytes(const hpml_model_t *m, size_t nb)
{
    size_t maxact = hpml_model_input_size(m), b = 0;

    for (int i = 0; i < m->nlayers; i++) {
        const nn_layer_t *l = &m->layers[i];
        maxact = l->out_size > maxact ? l->out_size : maxact;
        b += hpml__nn_layer_act_bytes(l, nb);
    }
    return b + 2 * nb * maxact * sizeof(float) + nb * hpml_model_output_size(m) * sizeof(float);
}

/* ---- layer kernels -------------------------------------------------------------- */

static void bias_act(float *y, const float *b, size_t rows, size_t cols, int relu)
{
    for (size_t r = 0; r < rows; r++) {
        float *yr = y + r * cols;
        if (relu) {
            for (size_t j = 0; j < cols; j++) {
                float v = yr[j] + b[j];
                yr[j] = v > 0.0f ? v : 0.0f;
            }
        } else {
            for (size_t j = 0; j < cols; j++)
                yr[j] += b[j];
        }
    }
}

/* db (cols) = the column sums of g (rows, cols). */
static void col_sums(float *restrict db, const float *restrict g, size_t rows, size_t cols)
{
    for (size_t j = 0; j < cols; j++)
        db[j] = 0.0f;
    for (size_t s = 0; s < rows; s++)
        for (size_t j = 0; j < cols; j++)
            db[j] += g[s * cols + j];
}

void hpml__nn_dense_rows_forward(const hpml_model_t *m, int li, const float *x, size_t n, size_t o0,
                                 size_t o1, float *y)
{
    const nn_layer_t *l = &m->layers[li];
    const size_t in = l->in_size, no = o1 - o0;

    if (n == 0 || no == 0)
        return;
    /* y (n, no) = x (n, in) * w[o0:o1]^T, w stored (out, in) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)no, (int)in, 1.0f, x, (int)in,
                m->params + l->w_off + o0 * in, (int)in, 0.0f, y, (int)no);
    bias_act(y, m->params + l->b_off + o0, n, no, l->relu);
}

void hpml__nn_dense_rows_backward(hpml_model_t *m, int li, const float *x, size_t n, size_t o0,
                                  size_t o1, const float *y, float *g)
{
    const nn_layer_t *l = &m->layers[li];
    const size_t in = l->in_size, no = o1 - o0;
    float *dw = m->grads + l->w_off + o0 * in, *db = m->grads + l->b_off + o0;

    if (no == 0)
        return;
    if (n == 0) {
        memset(dw, 0, no * in * sizeof(float));
        memset(db, 0, no * sizeof(float));
        return;
    }
    if (l->relu)
        for (size_t j = 0; j < n * no; j++) {
            float gv = g[j];
            g[j] = y[j] > 0.0f ? gv : 0.0f;
        }
    /* dw (no, in) = g^T (no, n) * x (n, in) */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)no, (int)in, (int)n, 1.0f, g, (int)no,
                x, (int)in, 0.0f, dw, (int)in);
    col_sums(db, g, n, no);
}

void hpml__nn_dense_cols_forward(const hpml_model_t *m, int li, const float *x, size_t n, size_t i0,
                                 size_t i1, float *z)
{
    const nn_layer_t *l = &m->layers[li];
    const size_t in = l->in_size, ni = i1 - i0, out = l->out_size;

    if (n == 0)
        return;
    if (ni == 0) {
        memset(z, 0, n * out * sizeof(float));
        return;
    }
    /* z (n, out) = x (n, ni) * w[:, i0:i1]^T, w stored (out, in) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)out, (int)ni, 1.0f, x,
                (int)ni, m->params + l->w_off + i0, (int)in, 0.0f, z, (int)out);
}

float *hpml__nn_dense_sums(hpml_model_t *m, int li)
{
    return m->layers[li].out;
}

void hpml__nn_dense_finish_forward(hpml_model_t *m, int li, size_t n)
{
    nn_layer_t *l = &m->layers[li];

    bias_act(l->out, m->params + l->b_off, n, l->out_size, l->relu);
    l->y = l->out;
}

void hpml__nn_dense_act_backward(hpml_model_t *m, int li, const float *dy, size_t n, float *g)
{
    const nn_layer_t *l = &m->layers[li];
    const size_t k = n * l->out_size;

    for (size_t j = 0; j < k; j++)
        g[j] = !l->relu || l->out[j] > 0.0f ? dy[j] : 0.0f;
    col_sums(m->grads + l->b_off, g, n, l->out_size);
}

void hpml__nn_dense_cols_backward(hpml_model_t *m, int li, const float *x, size_t n, size_t i0,
                                  size_t i1, const float *g, float *dx)
{
    const nn_layer_t *l = &m->layers[li];
    const size_t in = l->in_size, ni = i1 - i0, out = l->out_size;
    float *dw = m->grads + l->w_off + i0;

    if (ni == 0)
        return;
    if (n == 0) {
        for (size_t r = 0; r < out; r++)
            memset(dw + r * in, 0, ni * sizeof(float));
        return;
    }
    /* dw[:, i0:i1] (out, ni) = g^T (out, n) * x (n, ni) */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)out, (int)ni, (int)n, 1.0f, g,
                (int)out, x, (int)ni, 0.0f, dw, (int)in);
    /* dx (n, ni) = g (n, out) * w[:, i0:i1] (out, ni) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)ni, (int)out, 1.0f, g,
                (int)out, m->params + l->w_off + i0, (int)in, 0.0f, dx, (int)ni);
}

/* col (K = C*k*k rows, n*OH*OW columns) from x (n, C, H, W). */
static void im2col(const nn_layer_t *l, const float *x, size_t n, float *col)
{
    const int C = l->in_c, H = l->in_h, W = l->in_w, k = l->k, st = l->stride, pad = l->pad;
    const int OH = l->out_h, OW = l->out_w;
    const size_t P = (size_t)OH * OW, ld = n * P;

    for (int c = 0; c < C; c++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                float *row = col + ((size_t)(c * k + ki) * k + kj) * ld;
                /* ox range where ix = ox*st + kj - pad is inside [0, W) */
                int ox0 = 0, ox1 = OW;
                while (ox0 < OW && ox0 * st + kj - pad < 0)
                    ox0++;
                while (ox1 > ox0 && (ox1 - 1) * st + kj - pad >= W)
                    ox1--;
                for (size_t s = 0; s < n; s++) {
                    const float *xs = x + (s * (size_t)C + (size_t)c) * (size_t)H * W;
                    float *d = row + s * P;
                    for (int oy = 0; oy < OH; oy++, d += OW) {
                        int iy = oy * st + ki - pad;
                        if (iy < 0 || iy >= H) {
                            memset(d, 0, (size_t)OW * sizeof(float));
                            continue;
                        }
                        const float *xr = xs + (size_t)iy * W + kj - pad;
                        for (int ox = 0; ox < ox0; ox++)
                            d[ox] = 0.0f;
                        if (st == 1) { /* rows are short: a loop beats a memcpy call */
                            for (int ox = ox0; ox < ox1; ox++)
                                d[ox] = xr[ox];
                        } else {
                            for (int ox = ox0; ox < ox1; ox++)
                                d[ox] = xr[ox * st];
                        }
                        for (int ox = ox1; ox < OW; ox++)
                            d[ox] = 0.0f;
                    }
                }
            }
}

/* dx (n, C, H, W) = sum of the columns of col back into their pixels. */
static void col2im(const nn_layer_t *l, const float *col, size_t n, float *dx)
{
    const int C = l->in_c, H = l->in_h, W = l->in_w, k = l->k, st = l->stride, pad = l->pad;
    const int OH = l->out_h, OW = l->out_w;
    const size_t P = (size_t)OH * OW, ld = n * P;

    memset(dx, 0, n * l->in_size * sizeof(float));
    for (int c = 0; c < C; c++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                const float *row = col + ((size_t)(c * k + ki) * k + kj) * ld;
                int ox0 = 0, ox1 = OW;
                while (ox0 < OW && ox0 * st + kj - pad < 0)
                    ox0++;
                while (ox1 > ox0 && (ox1 - 1) * st + kj - pad >= W)
                    ox1--;
                for (size_t s = 0; s < n; s++) {
                    float *xs = dx + (s * (size_t)C + (size_t)c) * (size_t)H * W;
                    const float *d = row + s * P;
                    for (int oy = 0; oy < OH; oy++, d += OW) {
                        int iy = oy * st + ki - pad;
                        if (iy < 0 || iy >= H)
                            continue;
                        float *xr = xs + (size_t)iy * W + kj - pad;
                        if (st == 1) /* a constant stride lets the loop vectorise */
                            for (int ox = ox0; ox < ox1; ox++)
                                xr[ox] += d[ox];
                        else
                            for (int ox = ox0; ox < ox1; ox++)
                                xr[ox * st] += d[ox];
                    }
                }
            }
}

void hpml__nn_set_conv_direct(hpml_model_t *m, int on)
{
    for (int i = 0; i < m->nlayers; i++)
        m->layers[i].direct = on && hpml__conv_direct_usable(&m->layers[i]);
}

static void conv_forward(hpml_model_t *m, nn_layer_t *l, const float *x, size_t n)
{
    const size_t P = (size_t)l->out_h * l->out_w, K = (size_t)l->in_c * l->k * l->k;
    const size_t OC = (size_t)l->out_c;
    const float *w = m->params + l->w_off, *b = m->params + l->b_off;

    if (l->direct) {
        hpml__conv_direct_forward(l, w, b, x, n, l->scr);
        return;
    }
    im2col(l, x, n, l->col);
    /* tmp (OC, n*P) = w (OC, K) * col (K, n*P) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)OC, (int)(n * P), (int)K, 1.0f, w,
                (int)K, l->col, (int)(n * P), 0.0f, l->tmp, (int)(n * P));
    for (size_t s = 0; s < n; s++)
        for (size_t oc = 0; oc < OC; oc++) {
            const float *t = l->tmp + oc * n * P + s * P;
            float *y = l->out + (s * OC + oc) * P, bb = b[oc];
            if (l->relu) {
                for (size_t p = 0; p < P; p++) {
                    float v = t[p] + bb;
                    y[p] = v > 0.0f ? v : 0.0f;
                }
            } else {
                for (size_t p = 0; p < P; p++)
                    y[p] = t[p] + bb;
            }
        }
}

static void conv_backward(hpml_model_t *m, nn_layer_t *l, const float *dy, size_t n, float *dx)
{
    const size_t P = (size_t)l->out_h * l->out_w, K = (size_t)l->in_c * l->k * l->k;
    const size_t OC = (size_t)l->out_c;
    const float *w = m->params + l->w_off;
    float *dw = m->grads + l->w_off, *db = m->grads + l->b_off;

    if (l->direct) {
        hpml__conv_direct_backward(l, w, dy, n, dw, db, dx, l->scr);
        return;
    }
    /* tmp (OC, n*P) = dy through the ReLU, gathered from (n, OC, P); db = its row sums.
     * Branch-free selects and 8 partial sums let the compiler vectorise both loops. */
    for (size_t oc = 0; oc < OC; oc++) {
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (size_t s = 0; s < n; s++) {
            const float *g = dy + (s * OC + oc) * P, *y = l->out + (s * OC + oc) * P;
            float *t = l->tmp + oc * n * P + s * P;
            size_t p = 0;
            if (l->relu)
                for (p = 0; p < P; p++) {
                    float gv = g[p]; /* unconditional load: lets the loop vectorise */
                    t[p] = y[p] > 0.0f ? gv : 0.0f;
                }
            else
                memcpy(t, g, P * sizeof(float));
            for (p = 0; p + 8 <= P; p += 8)
                for (int q = 0; q < 8; q++)
                    acc[q] += t[p + (size_t)q];
            for (; p < P; p++)
                acc[0] += t[p];
        }
        db[oc] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
    /* dw (OC, K) = tmp (OC, nP) * col^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)OC, (int)K, (int)(n * P), 1.0f,
                l->tmp, (int)(n * P), l->col, (int)(n * P), 0.0f, dw, (int)K);
    if (dx) {
        /* col (K, nP) = w^T (K, OC) * tmp (OC, nP), then scatter back */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)K, (int)(n * P), (int)OC, 1.0f, w,
                    (int)K, l->tmp, (int)(n * P), 0.0f, l->col, (int)(n * P));
        col2im(l, l->col, n, dx);
    }
}

static void pool_forward(nn_layer_t *l, const float *x, size_t n)
{
    const int C = l->in_c, H = l->in_h, W = l->in_w, k = l->k, st = l->stride;
    const int OH = l->out_h, OW = l->out_w;

    for (size_t s = 0; s < n; s++)
        for (int c = 0; c < C; c++) {
            const float *xp = x + s * l->in_size + (size_t)c * H * W;
            float *y = l->out + s * l->out_size + (size_t)c * OH * OW;
            int32_t *a = l->arg + s * l->out_size + (size_t)c * OH * OW;
            int32_t base = (int32_t)((size_t)c * H * W);
            if (k == 2 && st == 2) { /* the common case, without the inner loops */
                for (int oy = 0; oy < OH; oy++)
                    for (int ox = 0; ox < OW; ox++) {
                        int i0 = 2 * oy * W + 2 * ox, i1 = i0 + 1, i2 = i0 + W, i3 = i2 + 1;
                        int ia = xp[i1] > xp[i0] ? i1 : i0, ib = xp[i3] > xp[i2] ? i3 : i2;
                        int im = xp[ib] > xp[ia] ? ib : ia;
                        y[oy * OW + ox] = xp[im];
                        a[oy * OW + ox] = base + im;
                    }
                continue;
            }
            for (int oy = 0; oy < OH; oy++)
                for (int ox = 0; ox < OW; ox++) {
                    int iy0 = oy * st, ix0 = ox * st, bi = iy0 * W + ix0;
                    float bv = xp[bi];
                    for (int i = 0; i < k; i++)
                        for (int j = 0; j < k; j++) {
                            int idx = (iy0 + i) * W + ix0 + j;
                            if (xp[idx] > bv) {
                                bv = xp[idx];
                                bi = idx;
                            }
                        }
                    y[oy * OW + ox] = bv;
                    a[oy * OW + ox] = base + bi;
                }
        }
}

static void pool_backward(nn_layer_t *l, const float *dy, size_t n, float *dx)
{
    if (l->k == 2 && l->stride == 2 && l->in_h == 2 * l->out_h && l->in_w == 2 * l->out_w) {
        /* The windows tile dx exactly: write each window whole (the gradient at its
         * maximum, zeros elsewhere) instead of clearing dx first and adding. */
        const size_t OW = (size_t)l->out_w, W = (size_t)l->in_w, OHW = (size_t)l->out_h * OW;
        for (size_t s = 0; s < n; s++) {
            const float *g = dy + s * l->out_size;
            const int32_t *a = l->arg + s * l->out_size;
            float *d = dx + s * l->in_size;
            for (size_t j = 0; j < l->out_size; j += OW) { /* one output row */
                float *d0 = d + (j / OHW) * OHW * 4 + (j % OHW / OW) * 2 * W;
                for (size_t ox = 0; ox < OW; ox++) {
                    d0[2 * ox] = d0[2 * ox + 1] = d0[W + 2 * ox] = d0[W + 2 * ox + 1] = 0.0f;
                    d[a[j + ox]] = g[j + ox];
                }
            }
        }
        return;
    }
    memset(dx, 0, n * l->in_size * sizeof(float));
    for (size_t s = 0; s < n; s++) {
        const float *g = dy + s * l->out_size;
        const int32_t *a = l->arg + s * l->out_size;
        float *d = dx + s * l->in_size;
        for (size_t j = 0; j < l->out_size; j++)
            d[a[j]] += g[j];
    }
}

static inline uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void dropout_forward(nn_layer_t *l, int li, const float *x, size_t n, const uint64_t *ids,
                            uint64_t key)
{
    const float keep = 1.0f / (1.0f - l->p);
    const uint64_t thr = (uint64_t)((double)l->p * 18446744073709551616.0);

    for (size_t s = 0; s < n; s++) {
        uint64_t hs = mix64(mix64(key ^ mix64(ids ? ids[s] : s)) + (uint64_t)li);
        float *mk = l->mask + s * l->out_size, *y = l->out + s * l->out_size;
        const float *xs = x + s * l->in_size;
        for (size_t j = 0; j < l->out_size; j++) {
            mk[j] = mix64(hs + j * 0x9e3779b97f4a7c15ull) < thr ? 0.0f : keep;
            y[j] = xs[j] * mk[j];
        }
    }
}

/* ---- forward / backward ---------------------------------------------------------- */

int hpml__nn_forward_from(hpml_model_t *m, int first, const float *x, size_t n, int training,
                          const uint64_t *ids, uint64_t key, const float **logits)
{
    const float *in = x;
    int err;

    if (n == 0 || x == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "nn: forward of an empty batch");
    if ((err = hpml_model_reserve(m, n)) != 0)
        return err;
    m->n = n;
    m->input = first == 0 ? x : NULL;
    m->training = training;
    if (first > 0) /* what backward reads as layer `first`'s input */
        m->layers[first - 1].y = (float *)x;
    for (int i = first; i < m->nlayers; i++) {
        nn_layer_t *l = &m->layers[i];
        switch (l->kind) {
        case NN_DENSE: {
            const float *w = m->params + l->w_off;
            /* y (n, out) = x (n, in) * w^T, w stored (out, in) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)l->out_size,
                        (int)l->in_size, 1.0f, in, (int)l->in_size, w, (int)l->in_size, 0.0f,
                        l->out, (int)l->out_size);
            bias_act(l->out, m->params + l->b_off, n, l->out_size, l->relu);
            l->y = l->out;
            break;
        }
        case NN_CONV:
            conv_forward(m, l, in, n);
            l->y = l->out;
            break;
        case NN_POOL:
            pool_forward(l, in, n);
            l->y = l->out;
            break;
        case NN_RELU:
            for (size_t j = 0; j < n * l->out_size; j++)
                l->out[j] = in[j] > 0.0f ? in[j] : 0.0f;
            l->y = l->out;
            break;
        case NN_FLATTEN: l->y = (float *)in; break;
        case NN_DROPOUT:
            if (training && l->p > 0.0f) {
                dropout_forward(l, i + m->layer_base, in, n, ids, key);
                l->y = l->out;
            } else {
                l->y = (float *)in;
            }
            break;
        }
        in = l->y;
    }
    *logits = in;
    return 0;
}

int hpml_model_forward(hpml_model_t *m, const float *x, size_t n, int training, const uint64_t *ids,
                       uint64_t key, const float **logits)
{
    return hpml__nn_forward_from(m, 0, x, n, training, ids, key, logits);
}

/* Softmax of the logits into probs; loss sum and correct count. */
static int softmax_loss(const hpml_model_t *m, const int32_t *labels, float *probs,
                        double *loss_sum, size_t *correct)
{
    const size_t C = hpml_model_output_size(m);
    const float *z = m->layers[m->nlayers - 1].y;
    double loss = 0;
    size_t ok = 0;

    for (size_t s = 0; s < m->n; s++) {
        const float *zs = z + s * C;
        float mx = zs[0];
        size_t am = 0;
        double sum = 0;
        int32_t y = labels[s];
        if (y < 0 || (size_t)y >= C)
            return hpml_set_error(HPML_ERR_INVAL, "nn: label %d outside [0, %zu)", (int)y, C);
        for (size_t j = 1; j < C; j++)
            if (zs[j] > mx) {
                mx = zs[j];
                am = j;
            }
        for (size_t j = 0; j < C; j++) {
            float e = expf(zs[j] - mx);
            if (probs)
                probs[s * C + j] = e;
            sum += e;
        }
        if (probs) {
            float inv = (float)(1.0 / sum);
            for (size_t j = 0; j < C; j++)
                probs[s * C + j] *= inv;
        }
        loss += log(sum) - (double)(zs[y] - mx);
        ok += am == (size_t)y;
    }
    if (loss_sum)
        *loss_sum = loss;
    if (correct)
        *correct = ok;
    return 0;
}

int hpml_model_loss(const hpml_model_t *m, const int32_t *labels, double *loss_sum, size_t *correct)
{
    return softmax_loss(m, labels, NULL, loss_sum, correct);
}

/* The layers from the top down to `stop`, g (in m->dbuf[0]) the gradient of the output:
 * each layer's gradients, and the gradient of layer i's input while i > first_param
 * (returned: the last one computed). */
static const float *backward_layers(hpml_model_t *m, float *g, int stop, int first_param,
                                    hpml_grad_ready_fn ready, void *ctx)
{
    const size_t n = m->n;
    int cur = 0;

    for (int i = m->nlayers - 1; i >= stop; i--) {
        nn_layer_t *l = &m->layers[i];
        const float *in = i == 0 ? m->input : m->layers[i - 1].y;
        float *dx = i > first_param ? m->dbuf[1 - cur] : NULL;
        switch (l->kind) {
        case NN_DENSE: {
            float *dw = m->grads + l->w_off, *db = m->grads + l->b_off;
            const float *w = m->params + l->w_off;
            if (l->relu)
                for (size_t j = 0; j < n * l->out_size; j++) {
                    float gv = g[j];
                    g[j] = l->out[j] > 0.0f ? gv : 0.0f;
                }
            /* dw (out, in) = g^T (out, n) * x (n, in) */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)l->out_size, (int)l->in_size,
                        (int)n, 1.0f, g, (int)l->out_size, in, (int)l->in_size, 0.0f, dw,
                        (int)l->in_size);
            col_sums(db, g, n, l->out_size);
            if (dx)
                /* dx (n, in) = g (n, out) * w (out, in) */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)l->in_size,
                            (int)l->out_size, 1.0f, g, (int)l->out_size, w, (int)l->in_size, 0.0f,
                            dx, (int)l->in_size);
            /* Only now: with the sharded update the allreduce started here rewrites w. */
            if (ready)
                ready(ctx, l->w_off);
            break;
        }
        case NN_CONV:
            /* dx is computed inside after dw: report readiness after the whole layer
             * (the layer's gradients go out together with the next ones' anyway). */
            conv_backward(m, l, g, n, dx);
            if (ready)
                ready(ctx, l->w_off);
            break;
        case NN_POOL:
            if (dx)
                pool_backward(l, g, n, dx);
            break;
        case NN_RELU:
            if (dx)
                for (size_t j = 0; j < n * l->out_size; j++) {
                    float gv = g[j];
                    dx[j] = l->out[j] > 0.0f ? gv : 0.0f;
                }
            break;
        case NN_FLATTEN: dx = dx ? g : NULL; break;
        case NN_DROPOUT:
            if (dx) {
                if (m->training && l->p > 0.0f)
                    for (size_t j = 0; j < n * l->out_size; j++)
                        dx[j] = g[j] * l->mask[j];
                else
                    dx = g;
            }
            break;
        }
        if (dx == NULL)
            break;
        if (dx != g)
            cur = 1 - cur;
        g = dx;
    }
    return g;
}

/* The lowest layer with parameters (nlayers: none), below which backward stops. */
static int first_with_params(const hpml_model_t *m)
{
    for (int i = 0; i < m->nlayers; i++)
        if (m->layers[i].nw + m->layers[i].nb > 0)
            return i;
    return m->nlayers;
}

/* The gradient of the mean loss of labels (times scale) in m->dbuf[0]. */
static int loss_grad(hpml_model_t *m, const int32_t *labels, float scale, double *loss_sum,
                     size_t *correct)
{
    const size_t n = m->n, C = hpml_model_output_size(m);
    float *g = m->dbuf[0];
    int err;

    if ((err = softmax_loss(m, labels, m->probs, loss_sum, correct)) != 0)
        return err;
    for (size_t s = 0; s < n; s++) {
        for (size_t j = 0; j < C; j++)
            g[s * C + j] = m->probs[s * C + j] * scale;
        g[s * C + (size_t)labels[s]] -= scale;
    }
    return 0;
}

int hpml__nn_backward_to(hpml_model_t *m, int stop, const int32_t *labels, float scale,
                         hpml_grad_ready_fn ready, void *ctx, double *loss_sum, size_t *correct,
                         const float **dx_out)
{
    int err, first_param = first_with_params(m);
    const float *dx;

    if ((err = loss_grad(m, labels, scale, loss_sum, correct)) != 0)
        return err;
    if (stop > 0) /* the caller wants the gradient of layer `stop`'s input */
        first_param = stop - 1;
    dx = backward_layers(m, m->dbuf[0], stop, first_param, ready, ctx);
    if (dx_out)
        *dx_out = stop > 0 ? dx : NULL;
    return 0;
}

int hpml__nn_backward_stage(hpml_model_t *m, const int32_t *labels, float scale, const float *dy,
                            int want_dx, double *loss_sum, size_t *correct, const float **dx_out)
{
    const float *dx;
    int err;

    if (m->n == 0 || (labels == NULL && dy == NULL))
        return hpml_set_error(HPML_ERR_INVAL, "nn: backward without a forward");
    if (labels != NULL) {
        if ((err = loss_grad(m, labels, scale, loss_sum, correct)) != 0)
            return err;
    } else { /* the layers change the gradient in place (the ReLU): a copy */
        memcpy(m->dbuf[0], dy, m->n * hpml_model_output_size(m) * sizeof(float));
    }
    dx = backward_layers(m, m->dbuf[0], 0, want_dx ? -1 : first_with_params(m), NULL, NULL);
    if (dx_out)
        *dx_out = want_dx ? dx : NULL;
    return 0;
}

int hpml__nn_model_stage(hpml_model_t *full, int l0, int l1, hpml_model_t **out)
{
    const nn_layer_t *first = &full->layers[l0];
    hpml_model_t *m = NULL;
    const char *p = full->spec;
    char *spec = NULL;
    size_t a = 0, b;
    int err;

    *out = NULL;
    if (l0 < 0 || l1 <= l0 || l1 > full->nlayers)
        return hpml_set_error(HPML_ERR_INVAL, "nn: no layers [%d, %d) in a model of %d", l0, l1,
                              full->nlayers);
    /* The canonical spec has one " | " between layers: cut layers [l0, l1) out of it. */
    for (int i = 0; i < l0; i++)
        a = (size_t)(strstr(p + a, " | ") - p) + 3;
    b = a;
    for (int i = l0; i < l1; i++) {
        const char *e = strstr(p + b, " | ");
        b = e ? (size_t)(e - p) + (i + 1 < l1 ? 3 : 0) : strlen(p);
    }
    if ((spec = malloc(b - a + 1)) == NULL)
        return hpml_set_error(HPML_ERR_NOMEM, "nn: out of memory");
    memcpy(spec, p + a, b - a);
    spec[b - a] = '\0';
    err = hpml_model_create(spec, first->in_c, first->in_h, first->in_w, &m);
    free(spec);
    if (err != 0)
        return err;
    if (m->nlayers != l1 - l0 ||
        m->nparams != (l1 < full->nlayers ? full->layers[l1].w_off : full->nparams) -
                          first->w_off) { /* the canonical spec does not re-parse as itself */
        hpml_model_destroy(m);
        return hpml_set_error(HPML_ERR_STATE, "nn: layers %d..%d do not make a model of their own",
                              l0, l1 - 1);
    }
    hpml_free(m->params);
    hpml_free(m->grads);
    m->params = full->params + first->w_off;
    m->grads = full->grads + first->w_off;
    m->borrowed = 1;
    m->layer_base = l0;
    for (int i = 0; i < m->nlayers; i++)
        m->layers[i].direct = full->layers[l0 + i].direct;
    *out = m;
    return 0;
}

int hpml_model_backward(hpml_model_t *m, const int32_t *labels, float scale,
                        hpml_grad_ready_fn ready, void *ctx, double *loss_sum, size_t *correct)
{
    return hpml__nn_backward_to(m, 0, labels, scale, ready, ctx, loss_sum, correct, NULL);
}
