/*
 * Model files and the file helpers shared with checkpoints: atomic writes (temporary
 * file, fsync, rename, fsync of the folder) and a CRC32 (zlib) over the whole content,
 * checked before anything is parsed, so a truncated or corrupted file is reported instead
 * of loading a silently wrong model.
 *
 * Model file: "HPMLMODL" u32 version, i32 c h w, f32 mean std, u32 spec length, spec,
 * u64 nparams, nparams f32, u32 crc32 of everything before it. Little-endian hosts.
 * A valid checksum says nothing of what was written, so loading also checks the contents:
 * sizes that fit (input shape, spec), the parameters the spec needs present in the file
 * before they are allocated, and every value finite.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "io/io_internal.h"
#include "nn/nn_internal.h"

#define MODEL_MAGIC   "HPMLMODL"
#define MODEL_VERSION 1u

uint32_t hpml__nn_crc(uint32_t crc, const void *p, size_t n)
{
    const unsigned char *b = p;

    while (n > 0) { /* zlib takes uInt lengths */
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = (uint32_t)crc32(crc, b, chunk);
        b += chunk;
        n -= chunk;
    }
    return crc;
}

void hpml__nn_put(nn_buf_t *b, const void *p, size_t n)
{
    if (b->err)
        return;
    if (b->len + n > b->cap) {
        size_t nc = (b->cap ? b->cap * 2 : 4096);
        unsigned char *np;
        while (nc < b->len + n)
            nc *= 2;
        np = realloc(b->p, nc);
        if (np == NULL) {
            b->err = HPML_ERR_NOMEM;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

int hpml__nn_get(const unsigned char *p, size_t len, size_t *off, void *dst, size_t n)
{
    if (*off > len || len - *off < n)
        return -1;
    memcpy(dst, p + *off, n);
    *off += n;
    return 0;
}

int hpml__nn_write_atomic(const char *path, const void *buf, size_t len)
{
    hpml__io_wfile_t w;
    int rc = hpml__io_wopen(&w, path);

    if (rc != 0)
        return rc;
    if (len > 0 && fwrite(buf, 1, len, w.f) != len) {
        rc = hpml_set_error(HPML_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        hpml__io_wabort(&w);
        return rc;
    }
    return hpml__io_wcommit(&w);
}

int hpml__nn_read_file(const char *path, unsigned char **buf, size_t *len)
{
    unsigned char *p = NULL;
    struct stat st;
    size_t sz, got = 0;
    int fd, rc = 0;

    *buf = NULL;
    *len = 0;
    if ((fd = hpml__io_open_regular(path)) < 0)
        return fd;
    if (fstat(fd, &st) != 0) {
        rc = hpml_set_error(HPML_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        goto out;
    }
    sz = (size_t)st.st_size;
    if ((p = malloc(sz + 1)) == NULL) {
        rc = hpml_set_error(HPML_ERR_NOMEM, "%s: no memory to read its %zu bytes", path, sz);
        goto out;
    }
    while (got < sz) {
        ssize_t n = read(fd, p + got, sz - got);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = hpml_set_error(HPML_ERR_IO, "%s: read failed after %zu of %zu bytes: %s", path,
                                got, sz, n < 0 ? strerror(errno) : "the file shrank");
            goto out;
        }
        got += (size_t)n;
    }
    *buf = p;
    *len = sz;
    p = NULL;
out:
    free(p);
    close(fd);
    return rc;
}

int hpml_model_save(const hpml_model_t *m, float mean, float std, const char *path)
{
    nn_buf_t b = {0};
    uint32_t v = MODEL_VERSION, sl = (uint32_t)strlen(m->spec), crc;
    int32_t shape[3] = {m->in_c, m->in_h, m->in_w};
    uint64_t np = m->nparams;
    int err;

    hpml__nn_put(&b, MODEL_MAGIC, 8);
    hpml__nn_put(&b, &v, 4);
    hpml__nn_put(&b, shape, sizeof(shape));
    hpml__nn_put(&b, &mean, 4);
    hpml__nn_put(&b, &std, 4);
    hpml__nn_put(&b, &sl, 4);
    hpml__nn_put(&b, m->spec, sl);
    hpml__nn_put(&b, &np, 8);
    hpml__nn_put(&b, m->params, m->nparams * sizeof(float));
    if (b.err) {
        free(b.p);
        return b.err;
    }
    crc = hpml__nn_crc(0, b.p, b.len);
    hpml__nn_put(&b, &crc, 4);
    err = b.err ? b.err : hpml__nn_write_atomic(path, b.p, b.len);
    free(b.p);
    return err;
}

/* The parameter count of spec on inputs (c, h, w), without allocating the model: a file
 * must hold them before its spec makes us allocate them. Errors name the file. */
static int spec_params(const char *path, const char *spec, const int32_t shape[3], size_t *count)
{
    nn_layer_t *layers = NULL;
    char *canon = NULL, msg[400];
    int nl = 0, err;

    *count = 0;
    err = hpml__nn_parse(spec, shape[0], shape[1], shape[2], &layers, &nl, &canon);
    if (err != 0) {
        /* The parser's message says what is wrong with the spec, not in which file. */
        snprintf(msg, sizeof(msg), "%s", hpml_last_error());
        return hpml_set_error(err == HPML_ERR_NOMEM ? err : HPML_ERR_FORMAT, "%s: %s", path, msg);
    }
    for (int i = 0; i < nl; i++)
        *count += layers[i].nw + layers[i].nb; /* the parser bounds the sum */
    free(layers);
    free(canon);
    return 0;
}

int hpml_model_load(const char *path, hpml_model_t **out, float *mean, float *std)
{
    unsigned char *p = NULL;
    size_t len, off = 0, need;
    uint32_t v = 0, sl, crc;
    int32_t shape[3];
    uint64_t np;
    char *spec = NULL;
    hpml_model_t *m = NULL;
    const float *w;
    int err;

    *out = NULL;
    if ((err = hpml__nn_read_file(path, &p, &len)) != 0)
        return err;
    if (len >= 4 && memcmp(p, "PK\x03\x04", 4) == 0) { /* a zip: an .npz */
        free(p);
        return hpml_model_load_npz(path, NULL, 0, 0, 0, out, mean, std, NULL);
    }
    if (len < 8 + 4 || memcmp(p, MODEL_MAGIC, 8) != 0) {
        err = hpml_set_error(HPML_ERR_FORMAT, "%s: not an hpml model file (bad magic)", path);
        goto out;
    }
    memcpy(&crc, p + len - 4, 4);
    if (len < 40 || hpml__nn_crc(0, p, len - 4) != crc) {
        err = hpml_set_error(HPML_ERR_FORMAT,
                             "%s: checksum mismatch: the model file is truncated or corrupt", path);
        goto out;
    }
    off = 8;
    if (hpml__nn_get(p, len, &off, &v, 4) || v != MODEL_VERSION ||
        hpml__nn_get(p, len, &off, shape, sizeof(shape)) || hpml__nn_get(p, len, &off, mean, 4) ||
        hpml__nn_get(p, len, &off, std, 4) || hpml__nn_get(p, len, &off, &sl, 4) || sl > len ||
        !(spec = calloc(sl + 1, 1)) || hpml__nn_get(p, len, &off, spec, sl) ||
        hpml__nn_get(p, len, &off, &np, 8) || off > len - 4) {
        err = hpml_set_error(HPML_ERR_FORMAT, "%s: malformed model header (version %u)", path, v);
        goto out;
    }
    /* Shapes are ints and the input is one sample's values: c*h*w must fit (a product
     * that wraps would give a model smaller than its input). */
    if (shape[0] <= 0 || shape[1] <= 0 || shape[2] <= 0 ||
        (uint64_t)shape[0] * (uint64_t)shape[1] > INT_MAX ||
        (uint64_t)shape[0] * (uint64_t)shape[1] * (uint64_t)shape[2] > INT_MAX) {
        err = hpml_set_error(HPML_ERR_FORMAT,
                             "%s: input shape %" PRId32 "x%" PRId32 "x%" PRId32
                             " is not valid (positive, at most %d values)",
                             path, shape[0], shape[1], shape[2], INT_MAX);
        goto out;
    }
    if (memchr(spec, '\0', sl) != NULL) {
        err = hpml_set_error(HPML_ERR_FORMAT, "%s: the model spec holds a NUL byte", path);
        goto out;
    }
    /* Inputs are normalised as (x - mean) / std: NaN or Inf there would make every
     * prediction NaN without an error. */
    if (!isfinite(*mean) || !isfinite(*std)) {
        err = hpml_set_error(HPML_ERR_FORMAT,
                             "%s: non-finite parameter: the normalisation is mean %g, std %g", path,
                             (double)*mean, (double)*std);
        goto out;
    }
    if (*std == 0.0f) {
        err = hpml_set_error(HPML_ERR_FORMAT, "%s: the normalisation std is 0", path);
        goto out;
    }
    if ((err = spec_params(path, spec, shape, &need)) != 0)
        goto out;
    if (np != need || (len - 4 - off) / sizeof(float) != np || (len - 4 - off) % sizeof(float)) {
        err = hpml_set_error(HPML_ERR_FORMAT,
                             "%s: holds %zu bytes for %" PRIu64 " parameters, its spec needs %zu",
                             path, len - 4 - off, np, need);
        goto out;
    }
    /* Only now allocate what the spec asks for: the file holds it. */
    if ((err = hpml_model_create(spec, shape[0], shape[1], shape[2], &m)) != 0)
        goto out;
    memcpy(m->params, p + off, np * sizeof(float));
    w = m->params;
    for (size_t i = 0; i < np; i++) {
        if (!isfinite(w[i])) {
            err = hpml_set_error(HPML_ERR_FORMAT,
                                 "%s: non-finite parameter: parameter %zu of %" PRIu64 " is %g",
                                 path, i, np, (double)w[i]);
            goto out;
        }
    }
    *out = m;
    m = NULL;
out:
    hpml_model_destroy(m);
    free(spec);
    free(p);
    return err;
}
