/*
 * NumPy .npy files: header parsing (format versions 1.0, 2.0, 3.0; the header is a Python
 * dict literal with 'descr', 'fortran_order' and 'shape') and the writer, which produces
 * the bytes np.save does: a v1.0 header padded with spaces so the data starts at a
 * multiple of 64 bytes. Format: numpy/lib/format.py (NEP 1).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "io/io_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HOST_ORDER '>'
#else
#define HOST_ORDER '<'
#endif

#define NPY_MAX_HEADER ((uint32_t)1 << 20)

/* A small cursor over the header text, for error messages with a position. */
typedef struct {
    const char *path;
    const char *s;
    size_t i, n;
} cur_t;

static void skip_ws(cur_t *c)
{
    while (c->i < c->n && isspace((unsigned char)c->s[c->i]))
        c->i++;
}

static int perr(cur_t *c, const char *what)
{
    char shown[121];
    size_t n = c->n, k;

    /* The header quoted on the message's one line: its padding and final newline dropped,
     * other control and non-ASCII bytes shown as '?'. */
    while (n > 0 && isspace((unsigned char)c->s[n - 1]))
        n--;
    if (n > sizeof(shown) - 1)
        n = sizeof(shown) - 1;
    for (k = 0; k < n; k++)
        shown[k] = isprint((unsigned char)c->s[k]) ? c->s[k] : '?';
    shown[n] = '\0';
    return hpml_set_error(HPML_ERR_FORMAT, "%s: bad .npy header: %s at offset %zu of '%s'", c->path,
                          what, c->i, shown);
}

static int expect(cur_t *c, char ch)
{
    skip_ws(c);
    if (c->i >= c->n || c->s[c->i] != ch) {
        char what[32];
        snprintf(what, sizeof(what), "expected '%c'", ch);
        return perr(c, what);
    }
    c->i++;
    return 0;
}

/* A quoted string (either quote); copies at most len-1 bytes. */
static int parse_str(cur_t *c, char *buf, size_t len)
{
    char q;
    size_t k = 0;

    skip_ws(c);
    if (c->i >= c->n || (c->s[c->i] != '\'' && c->s[c->i] != '"'))
        return perr(c, "expected a quoted string");
    q = c->s[c->i++];
    while (c->i < c->n && c->s[c->i] != q) {
        if (k + 1 < len)
            buf[k++] = c->s[c->i];
        c->i++;
    }
    if (c->i >= c->n)
        return perr(c, "unterminated string");
    c->i++;
    buf[k] = '\0';
    return 0;
}

static int parse_descr(cur_t *c, hpml__io_elem_t *el)
{
    char d[32];
    char order, kind;
    long size;
    char *endp;
    int rc;

    skip_ws(c);
    if (c->i < c->n && c->s[c->i] == '[')
        return hpml_set_error(HPML_ERR_UNSUPPORTED,
                              "%s: structured .npy dtypes (descr is a list) are not supported",
                              c->path);
    if ((rc = parse_str(c, d, sizeof(d))) != 0)
        return rc;
    order = d[0];
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return hpml_set_error(HPML_ERR_UNSUPPORTED, "%s: unsupported .npy dtype '%s'", c->path, d);
    kind = d[1];
    errno = 0;
    size = d[1] ? strtol(d + 2, &endp, 10) : 0;
    if (!d[1] || !d[2] || *endp != '\0' || errno != 0)
        return hpml_set_error(HPML_ERR_UNSUPPORTED, "%s: unsupported .npy dtype '%s'", c->path, d);
    el->big_endian = order == '>' || (order == '=' && HOST_ORDER == '>');
    if (kind == 'f' && size == 2)
        el->type = IO_F16;
    else if (kind == 'f' && size == 4)
        el->type = IO_F32;
    else if (kind == 'f' && size == 8)
        el->type = IO_F64;
    else if (kind == 'i' && size == 1)
        el->type = IO_I8;
    else if (kind == 'i' && size == 2)
        el->type = IO_I16;
    else if (kind == 'i' && size == 4)
        el->type = IO_I32;
    else if (kind == 'i' && size == 8)
        el->type = IO_I64;
    else if (kind == 'u' && size == 1)
        el->type = IO_U8;
    else if (kind == 'u' && size == 2)
        el->type = IO_U16;
    else if (kind == 'u' && size == 4)
        el->type = IO_U32;
    else if (kind == 'u' && size == 8)
        el->type = IO_U64;
    else if (kind == 'b' && size == 1)
        el->type = IO_BOOL;
    else
        return hpml_set_error(HPML_ERR_UNSUPPORTED,
                              "%s: unsupported .npy dtype '%s' (f2 f4 f8 i1-i8 u1-u8 b1 only)",
                              c->path, d);
    return 0;
}

static int parse_bool(cur_t *c, int *v)
{
    skip_ws(c);
    if (c->n - c->i >= 4 && memcmp(c->s + c->i, "True", 4) == 0) {
        c->i += 4;
        *v = 1;
    } else if (c->n - c->i >= 5 && memcmp(c->s + c->i, "False", 5) == 0) {
        c->i += 5;
        *v = 0;
    } else {
        return perr(c, "expected True or False");
    }
    return 0;
}

static int parse_shape(cur_t *c, hpml__io_dense_t *h)
{
    int rc;

    if ((rc = expect(c, '(')) != 0)
        return rc;
    h->ndim = 0;
    for (;;) {
        uint64_t v = 0;
        skip_ws(c);
        if (c->i < c->n && c->s[c->i] == ')') {
            c->i++;
            return 0;
        }
        if (c->i >= c->n || !isdigit((unsigned char)c->s[c->i]))
            return perr(c, "expected a non-negative integer in the shape");
        while (c->i < c->n && isdigit((unsigned char)c->s[c->i])) {
            unsigned dgt = (unsigned)(c->s[c->i] - '0');
            if (v > (UINT64_MAX - dgt) / 10)
                return perr(c, "shape dimension too large");
            v = v * 10 + dgt;
            c->i++;
        }
        if (c->i < c->n && (c->s[c->i] == 'L' || c->s[c->i] == 'l'))
            c->i++; /* Python 2 long */
        if (h->ndim >= HPML_IO_MAX_DIMS)
            return perr(c, "too many dimensions");
        h->dims[h->ndim++] = v;
        skip_ws(c);
        if (c->i < c->n && c->s[c->i] == ',') {
            c->i++;
            continue;
        }
        if (c->i < c->n && c->s[c->i] == ')') {
            c->i++;
            return 0;
        }
        return perr(c, "expected ',' or ')' in the shape");
    }
}

static int parse_dict(cur_t *c, hpml__io_dense_t *h)
{
    int have_descr = 0, have_order = 0, have_shape = 0, rc;
    char key[32];

    if ((rc = expect(c, '{')) != 0)
        return rc;
    for (;;) {
        skip_ws(c);
        if (c->i < c->n && c->s[c->i] == '}') {
            c->i++;
            break;
        }
        if ((rc = parse_str(c, key, sizeof(key))) != 0)
            return rc;
        if ((rc = expect(c, ':')) != 0)
            return rc;
        if (strcmp(key, "descr") == 0) {
            rc = parse_descr(c, &h->elem);
            have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0) {
            rc = parse_bool(c, &h->fortran);
            have_order = 1;
        } else if (strcmp(key, "shape") == 0) {
            rc = parse_shape(c, h);
            have_shape = 1;
        } else {
            char what[64];
            snprintf(what, sizeof(what), "unexpected key '%s'", key);
            rc = perr(c, what);
        }
        if (rc != 0)
            return rc;
        skip_ws(c);
        if (c->i < c->n && c->s[c->i] == ',') {
            c->i++;
            continue;
        }
        if ((rc = expect(c, '}')) != 0)
            return rc;
        break;
    }
    if (!have_descr || !have_order || !have_shape)
        return hpml_set_error(HPML_ERR_FORMAT, "%s: bad .npy header: no '%s' key", c->path,
                              !have_descr   ? "descr"
                              : !have_order ? "fortran_order"
                                            : "shape");
    return 0;
}

int hpml__npy_header(hpml__io_src_t *s, hpml__io_dense_t *h)
{
    unsigned char pre[12];
    uint32_t hlen;
    uint64_t start;
    char *text = NULL;
    cur_t c;
    int rc;

    memset(h, 0, sizeof(*h));
    if (s->size < 10)
        return hpml_set_error(HPML_ERR_FORMAT, "%s: not a .npy file (only %" PRIu64 " bytes)",
                              s->path, s->size);
    if ((rc = hpml__io_src_read(s, 0, pre, 10, "the .npy header")) != 0)
        return rc;
    if (memcmp(pre, "\x93NUMPY", 6) != 0)
        return hpml_set_error(HPML_ERR_FORMAT, "%s: not a .npy file (bad magic)", s->path);
    if (pre[6] == 1) {
        hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8;
        start = 10;
    } else if (pre[6] == 2 || pre[6] == 3) {
        if (s->size < 12)
            return hpml_set_error(HPML_ERR_FORMAT, "%s: truncated .npy header", s->path);
        if ((rc = hpml__io_src_read(s, 0, pre, 12, "the .npy header")) != 0)
            return rc;
        hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8 | (uint32_t)pre[10] << 16 |
               (uint32_t)pre[11] << 24;
        start = 12;
    } else {
        return hpml_set_error(HPML_ERR_UNSUPPORTED,
                              "%s: unsupported .npy format version %u.%u (1.0, 2.0, 3.0 only)",
                              s->path, pre[6], pre[7]);
    }
    if (hlen > NPY_MAX_HEADER)
        return hpml_set_error(HPML_ERR_FORMAT, "%s: .npy header length %" PRIu32 " is too large",
                              s->path, hlen);
    if (start + hlen > s->size)
        return hpml_set_error(HPML_ERR_FORMAT,
                              "%s: .npy header length %" PRIu32
                              " runs past the end of the file (%" PRIu64 " bytes)",
                              s->path, hlen, s->size);
    text = malloc((size_t)hlen + 1);
    if (text == NULL)
        return hpml_set_error(HPML_ERR_NOMEM, "%s: out of memory", s->path);
    if ((rc = hpml__io_src_read(s, start, text, hlen, "the .npy header")) != 0)
        goto out;
    text[hlen] = '\0';
    if (memchr(text, '\0', hlen) != NULL) {
        rc = hpml_set_error(HPML_ERR_FORMAT, "%s: bad .npy header: contains a NUL byte", s->path);
        goto out;
    }
    c.path = s->path;
    c.s = text;
    c.i = 0;
    c.n = hlen;
    if ((rc = parse_dict(&c, h)) != 0)
        goto out;
    skip_ws(&c);
    if (c.i != c.n) {
        rc = perr(&c, "unexpected text after the dict");
        goto out;
    }
    h->data_offset = start + hlen;
    rc = hpml__io_dense_finish(s->path, h, s->size - h->data_offset);
out:
    free(text);
    return rc;
}

/* ---- writer --------------------------------------------------------------------- */

int hpml__npy_header_make(const char *descr, int ndim, const size_t *shape, size_t es,
                          unsigned char *out, size_t cap, size_t *len, size_t *count)
{
    char hdr[1200];
    size_t hl, n = 1, pre_len, pad;
    int i;

    hl = (size_t)snprintf(hdr, sizeof(hdr), "{'descr': '%s', 'fortran_order': False, 'shape': (",
                          descr);
    for (i = 0; i < ndim; i++) {
        if (shape[i] != 0 && n > SIZE_MAX / shape[i])
            return HPML_ERR_INVAL;
        n *= shape[i];
        hl += (size_t)snprintf(hdr + hl, sizeof(hdr) - hl, "%s%zu", i ? ", " : "", shape[i]);
    }
    if (n > SIZE_MAX / es)
        return HPML_ERR_INVAL;
    hl += (size_t)snprintf(hdr + hl, sizeof(hdr) - hl, "%s), }", ndim == 1 ? "," : "");
    if (hl > sizeof(hdr) - 80) /* cannot happen with <= 32 dims; keeps the pad in bounds */
        return HPML_ERR_INVAL;
    /* Pad with spaces and end with '\n' so magic + version + length + header is a
     * multiple of 64, as np.save does. v1.0 holds headers up to 65535 bytes. */
    pre_len = hl + 1 + 10 <= 65535 ? 10 : 12;
    pad = (64 - (pre_len + hl + 1) % 64) % 64;
    memset(hdr + hl, ' ', pad);
    hl += pad;
    hdr[hl++] = '\n';
    if (pre_len + hl > cap)
        return HPML_ERR_INVAL;
    memcpy(out, "\x93NUMPY", 6);
    out[6] = pre_len == 10 ? 1 : 2;
    out[7] = 0;
    out[8] = (unsigned char)(hl & 0xff);
    out[9] = (unsigned char)(hl >> 8 & 0xff);
    if (pre_len == 12) {
        out[10] = (unsigned char)(hl >> 16 & 0xff);
        out[11] = (unsigned char)(hl >> 24 & 0xff);
    }
    memcpy(out + pre_len, hdr, hl);
    *len = pre_len + hl;
    *count = n;
    return 0;
}

int hpml_npy_write_nd(const char *path, const void *data, hpml_dtype_t dtype, int ndim,
                      const size_t *shape)
{
    char descr[8];
    unsigned char hdr[HPML_NPY_HEADER_MAX];
    size_t len, count, es;
    hpml__io_wfile_t w;
    int rc;

    if (path == NULL || ndim < 0 || ndim > HPML_IO_MAX_DIMS || (ndim > 0 && shape == NULL))
        return hpml_set_error(HPML_ERR_INVAL, "hpml_npy_write: bad arguments");
    switch (dtype) {
    case HPML_F32: snprintf(descr, sizeof(descr), "%cf4", HOST_ORDER); break;
    case HPML_F64: snprintf(descr, sizeof(descr), "%cf8", HOST_ORDER); break;
    case HPML_F16: snprintf(descr, sizeof(descr), "%cf2", HOST_ORDER); break;
    case HPML_I32: snprintf(descr, sizeof(descr), "%ci4", HOST_ORDER); break;
    case HPML_I64: snprintf(descr, sizeof(descr), "%ci8", HOST_ORDER); break;
    case HPML_I8: snprintf(descr, sizeof(descr), "|i1"); break;
    case HPML_U8: snprintf(descr, sizeof(descr), "|u1"); break;
    default:
        return hpml_set_error(HPML_ERR_UNSUPPORTED, "%s: .npy has no %s dtype", path,
                              hpml_dtype_name(dtype));
    }
    es = hpml_dtype_size(dtype);
    if (hpml__npy_header_make(descr, ndim, shape, es, hdr, sizeof(hdr), &len, &count) != 0)
        return hpml_set_error(HPML_ERR_INVAL, "%s: shape too large", path);
    if (count > 0 && data == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "%s: data is NULL", path);
    if ((rc = hpml__io_wopen(&w, path)) != 0)
        return rc;
    if (fwrite(hdr, 1, len, w.f) != len || (count > 0 && fwrite(data, es, count, w.f) != count)) {
        rc = hpml_set_error(HPML_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        hpml__io_wabort(&w);
        return rc;
    }
    return hpml__io_wcommit(&w);
}

int hpml_npy_write(const char *path, const void *data, hpml_dtype_t dtype, size_t rows, size_t cols)
{
    size_t shape[2] = {rows, cols};
    return hpml_npy_write_nd(path, data, dtype, 2, shape);
}
