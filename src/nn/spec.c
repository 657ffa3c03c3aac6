/*
 * The model spec parser: "conv 32 5x5 pad2 relu | pool 2 | dense 10". Layers are
 * separated by '|' (or ';' or a newline); errors name the line, column and what was
 * expected, and shapes are checked as the layers are stacked.
 *
 * Sizes are checked before they are used: the values per sample of the input, of every
 * layer's output and of a convolution's input windows (its im2col buffer) at most
 * INT_MAX, as shapes are ints; and the parameter count well inside size_t. So a spec (or
 * a model file's spec and input shape) whose sizes would wrap is an error, not a model
 * with buffers smaller than its loops.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"

/* Parameters of a whole model: far beyond any memory, small enough that the optimizer's
 * buffers (a few per parameter) cannot wrap size_t. */
#define MAX_PARAMS (SIZE_MAX / 64)

typedef struct {
    const char *s; /* whole spec */
    size_t pos;
} lexer_t;

/* a * b, or SIZE_MAX when that overflows. */
static size_t mul_sat(size_t a, size_t b)
{
    return a != 0 && b > SIZE_MAX / a ? SIZE_MAX : a * b;
}

/* The canonical spec, grown as layers are added. */
typedef struct {
    char *p;
    size_t len, cap;
} canon_t;

static int canon_add(canon_t *c, const char *s)
{
    size_t n = strlen(s);

    if (c->len + n + 1 > c->cap) {
        size_t nc = c->cap ? c->cap : 128;
        char *np;
        while (nc < c->len + n + 1)
            nc *= 2;
        np = realloc(c->p, nc);
        if (np == NULL)
            return hpml_set_error(HPML_ERR_NOMEM, "model spec: out of memory");
        c->p = np;
        c->cap = nc;
    }
    memcpy(c->p + c->len, s, n + 1);
    c->len += n;
    return 0;
}

typedef struct {
    const char *p;
    size_t len;
    size_t at; /* offset in spec */
} token_t;

static void where(const char *s, size_t at, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < at && s[i]; i++) {
        if (s[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

static int fail(const char *s, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(const char *s, size_t at, const char *fmt, ...)
{
    int line, col;
    char what[320];
    va_list ap;

    where(s, at, &line, &col);
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (strchr(s, '\n'))
        return hpml_set_error(HPML_ERR_FORMAT, "model spec line %d, column %d: %s", line, col,
                              what);
    return hpml_set_error(HPML_ERR_FORMAT, "model spec column %d: %s", col, what);
}

/* Next word of the current layer; len 0 at a separator or the end. */
static token_t next(lexer_t *lx)
{
    token_t t;
    const char *s = lx->s;

    while (s[lx->pos] == ' ' || s[lx->pos] == '\t' || s[lx->pos] == '\r')
        lx->pos++;
    t.p = s + lx->pos;
    t.at = lx->pos;
    t.len = 0;
    while (s[lx->pos] && !isspace((unsigned char)s[lx->pos]) && s[lx->pos] != '|' &&
           s[lx->pos] != ';')
        lx->pos++;
    t.len = (size_t)(s + lx->pos - t.p);
    return t;
}

static int tok_eq(token_t t, const char *w)
{
    return t.len == strlen(w) && strncmp(t.p, w, t.len) == 0;
}

/* A positive integer filling [p, p+len); -1 if not. */
static long tok_int(const char *p, size_t len)
{
    long v = 0;

    if (len == 0 || len > 9)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

static int tok_float(token_t t, float *out)
{
    char buf[64];
    char *end;
    double v;

    if (t.len == 0 || t.len >= sizeof(buf))
        return -1;
    memcpy(buf, t.p, t.len);
    buf[t.len] = '\0';
    errno = 0;
    v = strtod(buf, &end);
    if (errno || *end)
        return -1;
    *out = (float)v;
    return 0;
}

/* The layer word t and its required argument into l (kind, outputs, kernel). 0 or the
 * spec error. */
static int parse_head(const char *spec, lexer_t *lx, token_t t, nn_layer_t *l)
{
    if (tok_eq(t, "dense") || tok_eq(t, "fc") || tok_eq(t, "linear")) {
        token_t a = next(lx);
        long units = tok_int(a.p, a.len);

        if (units <= 0)
            return fail(spec, a.at,
                        "expected the number of outputs after 'dense' (e.g. 'dense 128'), "
                        "got '%.*s'",
                        (int)a.len, a.p);
        l->kind = NN_DENSE;
        l->out_c = (int)units;
        l->out_h = l->out_w = 1;
    } else if (tok_eq(t, "conv")) {
        token_t a = next(lx), kt;
        long oc = tok_int(a.p, a.len), k1, k2;
        const char *x;

        if (oc <= 0)
            return fail(spec, a.at,
                        "expected the number of output channels after 'conv' (e.g. 'conv "
                        "32 5x5'), got '%.*s'",
                        (int)a.len, a.p);
        kt = next(lx);
        x = kt.len ? memchr(kt.p, 'x', kt.len) : NULL;
        if (x) {
            k1 = tok_int(kt.p, (size_t)(x - kt.p));
            k2 = tok_int(x + 1, kt.len - (size_t)(x - kt.p) - 1);
        } else {
            k1 = k2 = tok_int(kt.p, kt.len);
        }
        if (k1 <= 0 || k2 <= 0)
            return fail(spec, kt.at,
                        "expected a kernel size like '5x5' or '3' after the channel count, "
                        "got '%.*s'",
                        (int)kt.len, kt.p);
        if (k1 != k2)
            return fail(spec, kt.at, "only square kernels are supported, got '%.*s'", (int)kt.len,
                        kt.p);
        l->kind = NN_CONV;
        l->out_c = (int)oc;
        l->k = (int)k1;
    } else if (tok_eq(t, "pool") || tok_eq(t, "maxpool")) {
        token_t a = next(lx);
        long k = tok_int(a.p, a.len);

        if (k <= 0)
            return fail(spec, a.at,
                        "expected the window size after 'pool' (e.g. 'pool 2'), got '%.*s'",
                        (int)a.len, a.p);
        l->kind = NN_POOL;
        l->k = (int)k;
        l->stride = (int)k;
    } else if (tok_eq(t, "relu")) {
        l->kind = NN_RELU;
    } else if (tok_eq(t, "flatten")) {
        l->kind = NN_FLATTEN;
    } else if (tok_eq(t, "dropout")) {
        token_t a = next(lx);

        if (tok_float(a, &l->p) != 0 || !(l->p >= 0.0f && l->p < 1.0f))
            return fail(spec, a.at, "expected a probability in [0, 1) after 'dropout', got '%.*s'",
                        (int)a.len, a.p);
        l->kind = NN_DROPOUT;
    } else {
        return fail(spec, t.at,
                    "expected a layer (dense, conv, pool, relu, flatten, dropout), got "
                    "'%.*s'",
                    (int)t.len, t.p);
    }
    return 0;
}

/* The words after a layer's head up to the separator: relu, sS, padP, pad same. */
static int parse_options(const char *spec, lexer_t *lx, nn_layer_t *l)
{
    for (;;) {
        token_t o = next(lx);
        long v;

        if (o.len == 0)
            return 0;
        if (tok_eq(o, "relu") && (l->kind == NN_DENSE || l->kind == NN_CONV)) {
            l->relu = 1;
        } else if (o.len > 1 && o.p[0] == 's' && (l->kind == NN_CONV || l->kind == NN_POOL) &&
                   (v = tok_int(o.p + 1, o.len - 1)) > 0) {
            l->stride = (int)v;
        } else if (l->kind == NN_CONV && tok_eq(o, "same")) {
            l->pad = l->k / 2;
        } else if (l->kind == NN_CONV && o.len > 3 && strncmp(o.p, "pad", 3) == 0 &&
                   (tok_eq(o, "padsame") || (v = tok_int(o.p + 3, o.len - 3)) >= 0)) {
            l->pad = tok_eq(o, "padsame") ? l->k / 2 : (int)tok_int(o.p + 3, o.len - 3);
        } else if (l->kind == NN_CONV && tok_eq(o, "pad")) {
            token_t a = next(lx);

            v = tok_eq(a, "same") ? l->k / 2 : tok_int(a.p, a.len);
            if (v < 0)
                return fail(spec, a.at,
                            "expected a padding after 'pad' (e.g. 'pad 2' or 'pad same'), "
                            "got '%.*s'",
                            (int)a.len, a.p);
            l->pad = (int)v;
        } else {
            const char *exp = l->kind == NN_CONV    ? "'relu', 'sS' (stride) or 'padP'"
                              : l->kind == NN_DENSE ? "'relu'"
                              : l->kind == NN_POOL  ? "'sS' (stride)"
                                                    : "nothing more";
            return fail(spec, o.at, "expected %s or '|' before the next layer, got '%.*s'", exp,
                        (int)o.len, o.p);
        }
    }
}

/* A convolution's or pool's output shape and, for a convolution, its weights. */
static int window_shapes(const char *spec, token_t t, nn_layer_t *l, char *piece, size_t size)
{
    const int c = l->in_c, h = l->in_h, w = l->in_w, k = l->k, s = l->stride;
    const int p = l->kind == NN_CONV ? l->pad : 0;
    /* In long long: a padding up to 999999999 would overflow int. */
    long long ph = (long long)h + 2LL * p, pw = (long long)w + 2LL * p;

    if (ph < k || pw < k)
        return fail(spec, t.at,
                    "'%.*s' has a %dx%d window but its input is only %dx%dx%d (remove "
                    "a pool or add padding)",
                    (int)t.len, t.p, k, k, c, h, w);
    if (ph > INT_MAX || pw > INT_MAX)
        return fail(spec, t.at, "'%.*s' pads its %dx%d input beyond %d rows or columns", (int)t.len,
                    t.p, h, w, INT_MAX);
    l->out_h = (int)((ph - k) / s + 1);
    l->out_w = (int)((pw - k) / s + 1);
    if (l->kind == NN_POOL) {
        l->out_c = c;
        snprintf(piece, size, "pool %d s%d", k, s);
        return 0;
    }
    {
        size_t win = mul_sat(mul_sat((size_t)c, (size_t)k), (size_t)k);

        if (mul_sat(win, (size_t)l->out_h * (size_t)l->out_w) > INT_MAX)
            return fail(spec, t.at,
                        "'%.*s' has more than %d values per sample in its input windows "
                        "(%dx%dx%d input, %dx%d kernel)",
                        (int)t.len, t.p, INT_MAX, c, h, w, k, k);
        l->nw = mul_sat((size_t)l->out_c, win);
    }
    l->nb = (size_t)l->out_c;
    snprintf(piece, size, "conv %d %dx%d s%d pad%d%s", l->out_c, k, k, s, p,
             l->relu ? " relu" : "");
    return 0;
}

/* l's output shape and parameters from its input shape, its canonical words into piece,
 * and the model's parameter count so far checked against the limit. */
static int layer_shapes(const char *spec, token_t t, nn_layer_t *l, size_t nparams, char *piece,
                        size_t size)
{
    const int c = l->in_c, h = l->in_h, w = l->in_w;
    int err;

    switch (l->kind) {
    case NN_DENSE:
        l->nw = mul_sat((size_t)l->out_c, (size_t)c * (size_t)h * (size_t)w);
        l->nb = (size_t)l->out_c;
        snprintf(piece, size, "dense %d%s", l->out_c, l->relu ? " relu" : "");
        break;
    case NN_CONV:
    case NN_POOL:
        if ((err = window_shapes(spec, t, l, piece, size)) != 0)
            return err;
        break;
    case NN_RELU:
    case NN_DROPOUT:
        l->out_c = c;
        l->out_h = h;
        l->out_w = w;
        if (l->kind == NN_RELU)
            snprintf(piece, size, "relu");
        else
            snprintf(piece, size, "dropout %.9g", (double)l->p); /* exact */
        break;
    case NN_FLATTEN:
        l->out_c = (int)((size_t)c * (size_t)h * (size_t)w); /* at most INT_MAX, checked */
        l->out_h = l->out_w = 1;
        snprintf(piece, size, "flatten");
        break;
    }
    l->in_size = (size_t)c * (size_t)h * (size_t)w;
    l->out_size = mul_sat(mul_sat((size_t)l->out_c, (size_t)l->out_h), (size_t)l->out_w);
    if (l->out_size > INT_MAX)
        return fail(spec, t.at, "'%.*s' gives more than %d values per sample (%dx%dx%d)",
                    (int)t.len, t.p, INT_MAX, l->out_c, l->out_h, l->out_w);
    if (l->nw > MAX_PARAMS - l->nb || nparams > MAX_PARAMS - l->nw - l->nb)
        return fail(spec, t.at, "'%.*s' takes the model past %zu parameters", (int)t.len, t.p,
                    (size_t)MAX_PARAMS);
    return 0;
}

/* The layers parsed so far, and the canonical spec. */
typedef struct {
    nn_layer_t *L;
    int n, cap;
    canon_t canon;
} parsed_t;

/* Append l (piece: its canonical words); a standalone relu right after dense/conv is
 * fused into it instead. */
static int append_layer(parsed_t *ps, const nn_layer_t *l, const char *piece)
{
    if (l->kind == NN_RELU && ps->n > 0 &&
        (ps->L[ps->n - 1].kind == NN_DENSE || ps->L[ps->n - 1].kind == NN_CONV) &&
        !ps->L[ps->n - 1].relu) {
        ps->L[ps->n - 1].relu = 1;
        return canon_add(&ps->canon, " relu");
    }
    if (ps->n == ps->cap) {
        int nc = ps->cap ? ps->cap * 2 : 8;
        nn_layer_t *nl = realloc(ps->L, (size_t)nc * sizeof(*nl));

        if (nl == NULL)
            return hpml_set_error(HPML_ERR_NOMEM, "model spec: out of memory");
        ps->L = nl;
        ps->cap = nc;
    }
    ps->L[ps->n++] = *l;
    if (ps->n > 1) {
        int err = canon_add(&ps->canon, " | ");

        if (err != 0)
            return err;
    }
    return canon_add(&ps->canon, piece);
}

/* After a layer: 1 at the end of the spec, 0 past the separator before the next layer,
 * or a spec error (a separator with nothing after it, but for a trailing newline). */
static int past_separator(const char *spec, lexer_t *lx, int *end)
{
    char sepc;

    *end = spec[lx->pos] == '\0';
    if (*end)
        return 0;
    sepc = spec[lx->pos++];
    while (isspace((unsigned char)spec[lx->pos]))
        lx->pos++;
    if (spec[lx->pos] != '\0')
        return 0;
    if (sepc == '\n') { /* trailing separator: fine after a newline */
        *end = 1;
        return 0;
    }
    return fail(spec, lx->pos, "expected a layer after '%c', got the end of the spec", sepc);
}

int hpml__nn_parse(const char *spec, int in_c, int in_h, int in_w, nn_layer_t **layers,
                   int *nlayers, char **canonical)
{
    lexer_t lx = {spec, 0};
    parsed_t ps = {0};
    int c = in_c, h = in_h, w = in_w, err = 0, end = 0;
    size_t nparams = 0;

    *layers = NULL;
    *nlayers = 0;
    *canonical = NULL;
    if (spec == NULL || in_c <= 0 || in_h <= 0 || in_w <= 0)
        return hpml_set_error(HPML_ERR_INVAL, "model spec: no spec or bad input shape");
    if (mul_sat(mul_sat((size_t)in_c, (size_t)in_h), (size_t)in_w) > INT_MAX)
        return hpml_set_error(HPML_ERR_INVAL,
                              "model spec: the input shape %dx%dx%d has more than %d values "
                              "per sample",
                              in_c, in_h, in_w, INT_MAX);
    if ((err = canon_add(&ps.canon, "")) != 0)
        return err;
    while (!end) {
        token_t t = next(&lx);
        nn_layer_t l;
        char piece[128];

        if (t.len == 0) {
            char sep = spec[lx.pos];

            if (sep == '\0' && ps.n > 0)
                break;
            if (sep == '\n' && ps.n == 0) { /* leading blank lines */
                lx.pos++;
                continue;
            }
            err = sep == '\0' ? fail(spec, t.at,
                                     "expected a layer (dense, conv, pool, relu, "
                                     "flatten, dropout), got the end of the spec")
                              : fail(spec, t.at,
                                     "expected a layer (dense, conv, pool, relu, flatten, "
                                     "dropout) before '%c'",
                                     sep);
            goto out;
        }
        memset(&l, 0, sizeof(l));
        l.in_c = c;
        l.in_h = h;
        l.in_w = w;
        l.stride = 1;
        if ((err = parse_head(spec, &lx, t, &l)) != 0 ||
            (err = parse_options(spec, &lx, &l)) != 0 ||
            (err = layer_shapes(spec, t, &l, nparams, piece, sizeof(piece))) != 0 ||
            (err = append_layer(&ps, &l, piece)) != 0 ||
            (err = past_separator(spec, &lx, &end)) != 0)
            goto out;
        nparams += l.nw + l.nb;
        c = l.out_c;
        h = l.out_h;
        w = l.out_w;
    }
    *layers = ps.L;
    *nlayers = ps.n;
    *canonical = ps.canon.p;
    ps.L = NULL;
    ps.canon.p = NULL;
out:
    free(ps.L);
    free(ps.canon.p);
    return err;
}
