/*
 * Direct convolution (stride 1) for layers whose im2col matrix has few rows (C*K*K <= 32,
 * e.g. LeNet's first layer: 1 channel, 5x5): the GEMM would have only C*K*K-deep dot
 * products and OpenBLAS would spend as long packing the (C*K*K, n*OH*OW) matrix as
 * multiplying it. Instead each output row is computed in AVX2 registers: 16 output
 * pixels x 6 output channels of accumulators, one broadcast weight and one unaligned
 * input load per tap (about 2/3 of FMA peak, loads being the limit). Cost: the same
 * 2*OC*C*K*K*OH*OW flops per sample, no im2col, no packing.
 */
#include <string.h>

#include "nn/nn_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_DIRECT 1
#define AVX2        __attribute__((target("avx2,fma")))
#define INLINE_AVX2 static inline __attribute__((always_inline, target("avx2,fma")))
#else
#define HAVE_DIRECT 0
#endif

/* Geometry of the padded copies: output width rounded up to whole vectors, input padded
 * by pad on every side and wide enough that every vector load stays inside the row. */
typedef struct {
    int C, H, W, OC, OH, OW, k, pad;
    int OWr, Hp, Wp; /* rounded output width; padded input rows and row length */
    size_t xs, ts;   /* floats per sample of the padded input and of the padded dy */
} geom_t;

static geom_t geom(const nn_layer_t *l)
{
    geom_t g;

    g.C = l->in_c;
    g.H = l->in_h;
    g.W = l->in_w;
    g.OC = l->out_c;
    g.OH = l->out_h;
    g.OW = l->out_w;
    g.k = l->k;
    g.pad = l->pad;
    g.OWr = (g.OW + 7) / 8 * 8;
    g.Hp = g.OH + g.k - 1;
    g.Wp = g.OWr + g.k - 1;
    g.xs = (size_t)g.C * (size_t)g.Hp * (size_t)g.Wp;
    g.ts = (size_t)g.OC * (size_t)g.OH * (size_t)g.OWr;
    return g;
}

int hpml__conv_direct_usable(const nn_layer_t *l)
{
    return HAVE_DIRECT && l->kind == NN_CONV && l->stride == 1 && l->in_c * l->k * l->k <= 32 &&
           hpml_simd_active() == HPML_SIMD_AVX2;
}

/* Scratch layout, in floats from its (64-byte aligned) start: the padded inputs of the
 * batch (kept from forward for backward), one sample's padded dy t, one sample's padded
 * dx, the 8-lane partial sums of dw. t and the dw sums start on 32-byte boundaries
 * (aligned loads); the t rows are whole vectors. */
static size_t round8(size_t v)
{
    return (v + 7) / 8 * 8;
}

static void layout(const geom_t *g, size_t n, size_t *ot, size_t *odx, size_t *odw, size_t *end)
{
    *ot = round8(n * g->xs);
    *odx = *ot + g->ts;
    *odw = round8(*odx + g->xs);
    *end = *odw + (size_t)g->OC * (size_t)g->C * (size_t)g->k * (size_t)g->k * 8;
}

size_t hpml__conv_direct_scratch(const nn_layer_t *l, size_t n)
{
    geom_t g = geom(l);
    size_t ot, odx, odw, end;

    layout(&g, n, &ot, &odx, &odw, &end);
    return end;
}

#if HAVE_DIRECT

/* xp (C, Hp, Wp) = x (C, H, W) with zero borders. */
static void pad_input(const geom_t *g, const float *x, float *xp)
{
    memset(xp, 0, g->xs * sizeof(float));
    for (int c = 0; c < g->C; c++)
        for (int iy = 0; iy < g->H; iy++)
            memcpy(xp + ((size_t)c * g->Hp + (size_t)(iy + g->pad)) * g->Wp + g->pad,
                   x + ((size_t)c * g->H + (size_t)iy) * g->W, (size_t)g->W * sizeof(float));
}

/* NB output channels x NV vectors of one output row; NB and NV are constants after
 * inlining, so the accumulators live in registers. */
INLINE_AVX2 void fwd_block(const geom_t *g, const float *xp, const float *w, const float *b,
                           int relu, float *y, int oc0, int oy, int ox, const int NB, const int NV)
{
    __m256 acc[6][2];
    const int kk = g->k * g->k;

    for (int i = 0; i < NB; i++)
        for (int v = 0; v < NV; v++)
            acc[i][v] = _mm256_setzero_ps();
    for (int c = 0; c < g->C; c++)
        for (int ki = 0; ki < g->k; ki++) {
            const float *xr = xp + ((size_t)c * g->Hp + (size_t)(oy + ki)) * g->Wp + ox;
            const float *wr = w + ((size_t)oc0 * g->C + (size_t)c) * kk + ki * g->k;
            for (int kj = 0; kj < g->k; kj++) {
                __m256 xv[2];
                for (int v = 0; v < NV; v++)
                    xv[v] = _mm256_loadu_ps(xr + kj + 8 * v);
                for (int i = 0; i < NB; i++) {
                    __m256 wv = _mm256_broadcast_ss(wr + (size_t)i * g->C * kk + kj);
                    for (int v = 0; v < NV; v++)
                        acc[i][v] = _mm256_fmadd_ps(wv, xv[v], acc[i][v]);
                }
            }
        }
    for (int i = 0; i < NB; i++) {
        __m256 bv = _mm256_set1_ps(b[oc0 + i]);
        float *yr = y + ((size_t)(oc0 + i) * g->OH + (size_t)oy) * g->OW + ox;
        for (int v = 0; v < NV; v++) {
            __m256 r = _mm256_add_ps(acc[i][v], bv);
            int left = g->OW - ox - 8 * v;
            if (relu)
                r = _mm256_max_ps(r, _mm256_setzero_ps());
            if (left >= 8) {
                _mm256_storeu_ps(yr + 8 * v, r);
            } else {
                __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(left),
                                               _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
                _mm256_maskstore_ps(yr + 8 * v, m, r);
            }
        }
    }
}

#define FWD_NB(NV)                                                                                 \
    switch (nb) {                                                                                  \
    case 6: fwd_block(g, xp, w, b, relu, y, oc0, oy, ox, 6, NV); break;                            \
    case 5: fwd_block(g, xp, w, b, relu, y, oc0, oy, ox, 5, NV); break;                            \
    case 4: fwd_block(g, xp, w, b, relu, y, oc0, oy, ox, 4, NV); break;                            \
    case 3: fwd_block(g, xp, w, b, relu, y, oc0, oy, ox, 3, NV); break;                            \
    case 2: fwd_block(g, xp, w, b, relu, y, oc0, oy, ox, 2, NV); break;                            \
    default: fwd_block(g, xp, w, b, relu, y, oc0, oy, ox, 1, NV); break;                           \
    }

AVX2 static void fwd_sample(const geom_t *g, const float *xp, const float *w, const float *b,
                            int relu, float *y)
{
    for (int oc0 = 0; oc0 < g->OC; oc0 += 6) {
        int nb = g->OC - oc0 < 6 ? g->OC - oc0 : 6;
        for (int oy = 0; oy < g->OH; oy++) {
            int ox = 0;
            for (; ox + 16 <= g->OWr; ox += 16)
                FWD_NB(2)
            if (ox < g->OWr)
                FWD_NB(1)
        }
    }
}

/* dw partial sums for NO output channels x KB taps (kj0 .. kj0+KB-1) of row ki of
 * channel c, over one sample: dwv[oc][c][ki][kj][8] += sum over (oy, ox) of
 * t[oc][oy][ox] * xp[c][oy+ki][ox+kj], 8 lanes kept apart until the end. */
INLINE_AVX2 void dw_block(const geom_t *g, const float *xp, const float *t, float *dwv, int oc0,
                          int c, int ki, int kj0, const int NO, const int KB)
{
    __m256 acc[2][6];
    const int nv = g->OWr / 8;

    for (int o = 0; o < NO; o++)
        for (int j = 0; j < KB; j++)
            acc[o][j] = _mm256_setzero_ps();
    for (int oy = 0; oy < g->OH; oy++) {
        const float *xr = xp + ((size_t)c * g->Hp + (size_t)(oy + ki)) * g->Wp + kj0;
        const float *tr = t + ((size_t)oc0 * g->OH + (size_t)oy) * g->OWr;
        for (int v = 0; v < nv; v++) {
            __m256 tv[2];
            for (int o = 0; o < NO; o++)
                tv[o] = _mm256_load_ps(tr + (size_t)o * g->OH * g->OWr + 8 * v);
            for (int j = 0; j < KB; j++) {
                __m256 xv = _mm256_loadu_ps(xr + j + 8 * v);
                for (int o = 0; o < NO; o++)
                    acc[o][j] = _mm256_fmadd_ps(tv[o], xv, acc[o][j]);
            }
        }
    }
    for (int o = 0; o < NO; o++)
        for (int j = 0; j < KB; j++) {
            float *d = dwv + ((((size_t)(oc0 + o) * g->C + (size_t)c) * g->k + (size_t)ki) * g->k +
                              (size_t)(kj0 + j)) *
                                 8;
            _mm256_store_ps(d, _mm256_add_ps(_mm256_load_ps(d), acc[o][j]));
        }
}

#define DW_KB(NO)                                                                                  \
    switch (kb) {                                                                                  \
    case 6: dw_block(g, xp, t, dwv, oc0, c, ki, kj0, NO, 6); break;                                \
    case 5: dw_block(g, xp, t, dwv, oc0, c, ki, kj0, NO, 5); break;                                \
    case 4: dw_block(g, xp, t, dwv, oc0, c, ki, kj0, NO, 4); break;                                \
    case 3: dw_block(g, xp, t, dwv, oc0, c, ki, kj0, NO, 3); break;                                \
    case 2: dw_block(g, xp, t, dwv, oc0, c, ki, kj0, NO, 2); break;                                \
    default: dw_block(g, xp, t, dwv, oc0, c, ki, kj0, NO, 1); break;                               \
    }

AVX2 static void dw_sample(const geom_t *g, const float *xp, const float *t, float *dwv)
{
    for (int oc0 = 0; oc0 < g->OC; oc0 += 2)
        for (int c = 0; c < g->C; c++)
            for (int ki = 0; ki < g->k; ki++)
                for (int kj0 = 0; kj0 < g->k; kj0 += 6) {
                    int kb = g->k - kj0 < 6 ? g->k - kj0 : 6;
                    if (g->OC - oc0 >= 2)
                        DW_KB(2)
                    else
                        DW_KB(1)
                }
}

/* dxp (C, Hp, Wp) = sum over oc, taps of w * t shifted back (the transposed convolution),
 * then the interior copied to dx (C, H, W). */
AVX2 static void dx_sample(const geom_t *g, const float *w, const float *t, float *dxp, float *dx)
{
    const int kk = g->k * g->k, nv = g->OWr / 8;

    memset(dxp, 0, g->xs * sizeof(float));
    for (int c = 0; c < g->C; c++)
        for (int oy = 0; oy < g->OH; oy++)
            for (int ki = 0; ki < g->k; ki++)
                for (int kj = 0; kj < g->k; kj++) {
                    float *d = dxp + ((size_t)c * g->Hp + (size_t)(oy + ki)) * g->Wp + kj;
                    for (int v = 0; v < nv; v++) {
                        __m256 s = _mm256_loadu_ps(d + 8 * v);
                        for (int oc = 0; oc < g->OC; oc++) {
                            __m256 wv = _mm256_broadcast_ss(
                                w + ((size_t)oc * g->C + (size_t)c) * kk + ki * g->k + kj);
                            const float *tr = t + ((size_t)oc * g->OH + (size_t)oy) * g->OWr;
                            s = _mm256_fmadd_ps(wv, _mm256_load_ps(tr + 8 * v), s);
                        }
                        _mm256_storeu_ps(d + 8 * v, s);
                    }
                }
    for (int c = 0; c < g->C; c++)
        for (int iy = 0; iy < g->H; iy++)
            memcpy(dx + ((size_t)c * g->H + (size_t)iy) * g->W,
                   dxp + ((size_t)c * g->Hp + (size_t)(iy + g->pad)) * g->Wp + g->pad,
                   (size_t)g->W * sizeof(float));
}

/* t (OC, OH, OWr) = dy (OC, OH, OW) through the ReLU (y > 0), zero beyond OW so that
 * whole vectors can be used; db += its sums (8 lanes, then added in a fixed order). */
AVX2 static void mask_dy(const geom_t *g, const float *dy, const float *y, int relu, float *t,
                         float *db)
{
    const __m256 zero = _mm256_setzero_ps();
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    float lanes[8];

    for (int oc = 0; oc < g->OC; oc++) {
        __m256 acc = zero;
        for (int oy = 0; oy < g->OH; oy++) {
            size_t o = ((size_t)oc * g->OH + (size_t)oy) * (size_t)g->OW;
            float *tr = t + ((size_t)oc * g->OH + (size_t)oy) * g->OWr;
            for (int ox = 0; ox < g->OWr; ox += 8) {
                __m256 gv, yv;
                int left = g->OW - ox;
                if (left >= 8) {
                    gv = _mm256_loadu_ps(dy + o + ox);
                    yv = _mm256_loadu_ps(y + o + ox);
                } else {
                    __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), lane);
                    gv = _mm256_maskload_ps(dy + o + ox, m);
                    yv = _mm256_maskload_ps(y + o + ox, m);
                }
                if (relu)
                    gv = _mm256_and_ps(gv, _mm256_cmp_ps(yv, zero, _CMP_GT_OQ));
                _mm256_store_ps(tr + ox, gv);
                acc = _mm256_add_ps(acc, gv);
            }
        }
        _mm256_storeu_ps(lanes, acc);
        db[oc] += ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                  ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    }
}

void hpml__conv_direct_forward(const nn_layer_t *l, const float *w, const float *b, const float *x,
                               size_t n, float *scratch)
{
    geom_t g = geom(l);

    for (size_t s = 0; s < n; s++) {
        float *xp = scratch + s * g.xs;
        pad_input(&g, x + s * l->in_size, xp);
        fwd_sample(&g, xp, w, b, l->relu, l->out + s * l->out_size);
    }
}

void hpml__conv_direct_backward(const nn_layer_t *l, const float *w, const float *dy, size_t n,
                                float *dw, float *db, float *dx, float *scratch)
{
    geom_t g = geom(l);
    const size_t nw = (size_t)g.OC * (size_t)g.C * (size_t)g.k * (size_t)g.k;
    size_t ot, odx, odw, end;
    float *t, *dxp, *dwv;

    layout(&g, n, &ot, &odx, &odw, &end);
    t = scratch + ot;
    dxp = scratch + odx;
    dwv = scratch + odw;
    memset(dwv, 0, nw * 8 * sizeof(float));
    for (int oc = 0; oc < g.OC; oc++)
        db[oc] = 0.0f;
    for (size_t s = 0; s < n; s++) {
        const float *xp = scratch + s * g.xs;
        /* t (OC, OH, OWr) = dy through the ReLU, zero beyond OW so that whole vectors
         * can be used; db += its sums. */
        mask_dy(&g, dy + s * l->out_size, l->out + s * l->out_size, l->relu, t, db);
        dw_sample(&g, xp, t, dwv);
        if (dx)
            dx_sample(&g, w, t, dxp, dx + s * l->in_size);
    }
    for (size_t i = 0; i < nw; i++) {
        const float *d = dwv + i * 8;
        dw[i] = ((d[0] + d[1]) + (d[2] + d[3])) + ((d[4] + d[5]) + (d[6] + d[7]));
    }
}

#else

/* Without x86 there is no direct kernel: hpml__conv_direct_usable() is 0, so model.c
 * never calls these; they exist only so that the layer code links everywhere. */
void hpml__conv_direct_forward(const nn_layer_t *l, const float *w, const float *b, const float *x,
                               size_t n, float *scratch)
{
    (void)l, (void)w, (void)b, (void)x, (void)n, (void)scratch;
}

void hpml__conv_direct_backward(const nn_layer_t *l, const float *w, const float *dy, size_t n,
                                float *dw, float *db, float *dx, float *scratch)
{
    (void)l, (void)w, (void)dy, (void)n, (void)dw, (void)db, (void)dx, (void)scratch;
}

#endif
