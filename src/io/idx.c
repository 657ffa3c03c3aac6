/*
 * IDX files (the MNIST family): magic 0x00 0x00 <type> <ndim>, then ndim big-endian
 * 32-bit dimensions, then big-endian data. Types 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32,
 * 0x0D f32, 0x0E f64. Reference: http://yann.lecun.com/exdb/mnist/ ("file formats").
 * gzip-compressed files are read through zlib (see hpml__io_src_open).
 */
#include <inttypes.h>
#include <string.h>

#include "io/io_internal.h"

int hpml__idx_header(hpml__io_src_t *s, hpml__io_dense_t *h)
{
    unsigned char m[4], d[4 * 255];
    const char *kind = s->gz != NULL ? "a gzip-compressed IDX" : "an IDX";
    int i, rc;

    memset(h, 0, sizeof(*h));
    if (s->size < 4)
        return hpml_set_error(HPML_ERR_FORMAT, "%s: not %s file (only %" PRIu64 " bytes)", s->path,
                              kind, s->size);
    if ((rc = hpml__io_src_read(s, 0, m, 4, "the IDX magic")) != 0)
        return rc;
    if (m[0] != 0 || m[1] != 0)
        return hpml_set_error(HPML_ERR_FORMAT,
                              "%s: not %s file (magic bytes 0x%02x 0x%02x, expected 0x00 0x00)",
                              s->path, kind, m[0], m[1]);
    switch (m[2]) {
    case 0x08: h->elem.type = IO_U8; break;
    case 0x09: h->elem.type = IO_I8; break;
    case 0x0b: h->elem.type = IO_I16; break;
    case 0x0c: h->elem.type = IO_I32; break;
    case 0x0d: h->elem.type = IO_F32; break;
    case 0x0e: h->elem.type = IO_F64; break;
    default:
        return hpml_set_error(HPML_ERR_FORMAT, "%s: unknown IDX data type 0x%02x", s->path, m[2]);
    }
    h->elem.big_endian = 1;
    if (m[3] == 0)
        return hpml_set_error(HPML_ERR_FORMAT, "%s: IDX header declares 0 dimensions", s->path);
    if (m[3] > HPML_IO_MAX_DIMS)
        return hpml_set_error(HPML_ERR_FORMAT, "%s: IDX header declares %u dimensions (max %d)",
                              s->path, m[3], HPML_IO_MAX_DIMS);
    h->ndim = m[3];
    if (4 + 4 * (uint64_t)h->ndim > s->size)
        return hpml_set_error(HPML_ERR_FORMAT,
                              "%s: truncated IDX header: %d dimensions need %d bytes, the file "
                              "has %" PRIu64,
                              s->path, h->ndim, 4 + 4 * h->ndim, s->size);
    if ((rc = hpml__io_src_read(s, 4, d, 4 * (size_t)h->ndim, "the IDX dimensions")) != 0)
        return rc;
    for (i = 0; i < h->ndim; i++)
        h->dims[i] = (uint64_t)d[4 * i] << 24 | (uint64_t)d[4 * i + 1] << 16 |
                     (uint64_t)d[4 * i + 2] << 8 | d[4 * i + 3];
    h->data_offset = 4 + 4 * (uint64_t)h->ndim;
    if (s->gz != NULL) {
        /* The size comes from the gzip trailer, modulo 2^32. */
        hpml__io_dense_t t = *h;
        uint64_t need, es = hpml__io_stype_size(h->elem.type), count = 1;
        int overflow = 0;
        char shape[256];
        for (i = 0; i < h->ndim; i++) {
            if (h->dims[i] != 0 && count > UINT64_MAX / h->dims[i] / es)
                overflow = 1;
            else
                count *= h->dims[i];
        }
        hpml__io_shape_str(h, shape, sizeof(shape));
        need = h->data_offset + count * es;
        if (!overflow && (need & 0xffffffffu) != s->size)
            return hpml_set_error(HPML_ERR_FORMAT,
                                  "%s: shape %s needs %" PRIu64
                                  " bytes uncompressed but the gzip trailer says %" PRIu64
                                  " (truncated or corrupt file)",
                                  s->path, shape, need, s->size);
        /* The trailer holds the size modulo 2^32, so a header can claim 2^32 bytes more
         * than the data and still match it. Deflate compresses at most 1032:1, which
         * bounds what the file can hold before anything is allocated for it. */
        if (!overflow && need / 1032 > s->file_size)
            return hpml_set_error(HPML_ERR_FORMAT,
                                  "%s: shape %s needs %" PRIu64
                                  " bytes uncompressed, more than a gzip file of %" PRIu64
                                  " bytes can hold",
                                  s->path, shape, need, s->file_size);
        rc = hpml__io_dense_finish(s->path, &t, overflow ? 0 : count * es);
        *h = t;
        return rc;
    }
    return hpml__io_dense_finish(s->path, h, s->size - h->data_offset);
}
