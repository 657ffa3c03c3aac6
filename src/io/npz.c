/*
 * NumPy .npz archives: a zip file of .npy members ("name.npy"), as np.savez (stored) and
 * np.savez_compressed (deflate) write them. The reader takes what Python's zipfile writes
 * for NumPy: ZIP64 extra fields in local and central records (NumPy forces them), the
 * ZIP64 end records of archives past 4 GiB, data descriptors; it checks every member's
 * CRC-32. The writer stores members uncompressed with exact sizes, as np.savez does.
 * Format: PKWARE APPNOTE.TXT 6.3 (sections 4.3, 4.4.3, 4.5.3).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "io/io_internal.h"

#define SIG_LOCAL     0x04034b50u
#define SIG_CENTRAL   0x02014b50u
#define SIG_END       0x06054b50u
#define SIG_END64     0x06064b50u
#define SIG_END64_LOC 0x07064b50u
#define U32_MAX       0xffffffffu

static uint32_t rd16(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t rd32(const unsigned char *p)
{
    return rd16(p) | rd16(p + 2) << 16;
}

static uint64_t rd64(const unsigned char *p)
{
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static uint32_t crc_of(const unsigned char *p, size_t n)
{
    uLong crc = crc32(0L, Z_NULL, 0);

    while (n > 0) {
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = crc32(crc, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return (uint32_t)crc;
}

static int bad(const char *path, const char *what)
{
    return hpml_set_error(HPML_ERR_FORMAT, "%s: not a valid .npz (zip) file: %s", path, what);
}

/* The ZIP64 extra field (id 1) of a record: the 64-bit values of the fields that are
 * 0xffffffff, in the order uncompressed size, compressed size, local header offset. */
static int zip64_extra(const unsigned char *x, size_t xlen, uint64_t *usize, uint64_t *csize,
                       uint64_t *off)
{
    while (xlen >= 4) {
        uint32_t id = rd16(x), sz = rd16(x + 2);
        size_t k = 4;

        if (sz > xlen - 4)
            return -1;
        if (id == 1) {
            uint64_t *v[3] = {usize, csize, off};

            for (int i = 0; i < 3; i++) {
                if (v[i] == NULL || *v[i] != U32_MAX)
                    continue;
                if (k + 8 > 4 + (size_t)sz)
                    return -1;
                *v[i] = rd64(x + k);
                k += 8;
            }
            return 0;
        }
        x += 4 + sz;
        xlen -= 4 + sz;
    }
    return 0;
}

/* Where the central directory is and how many records it has, from the end records. */
static int find_directory(const char *path, const unsigned char *f, size_t len, uint64_t *cd_off,
                          uint64_t *cd_size, uint64_t *count)
{
    size_t e;

    if (len < 22)
        return bad(path, "too short for its end record");
    /* The end record is 22 bytes plus a comment of at most 65535. */
    for (e = len - 22;; e--) {
        if (rd32(f + e) == SIG_END && e + 22 + rd16(f + e + 20) == len)
            break;
        if (e == 0 || len - e > 22 + 65535)
            return bad(path, "no end-of-central-directory record (truncated?)");
    }
    *count = rd16(f + e + 10);
    *cd_size = rd32(f + e + 12);
    *cd_off = rd32(f + e + 16);
    if (*count == 0xffff || *cd_size == U32_MAX || *cd_off == U32_MAX) {
        uint64_t e64;

        if (e < 20 || rd32(f + e - 20) != SIG_END64_LOC)
            return bad(path, "a ZIP64 end record is announced but missing");
        e64 = rd64(f + e - 20 + 8);
        if (e64 > len || len - e64 < 56 || rd32(f + e64) != SIG_END64)
            return bad(path, "the ZIP64 end record is out of the file");
        *count = rd64(f + e64 + 32);
        *cd_size = rd64(f + e64 + 40);
        *cd_off = rd64(f + e64 + 48);
    }
    if (*cd_off > len || len - *cd_off < *cd_size)
        return bad(path, "the central directory lies outside the file");
    return 0;
}

/* Decompress a deflated member (raw deflate) of csize bytes into exactly usize bytes. */
static int inflate_member(const char *path, const char *name, const unsigned char *src,
                          uint64_t csize, unsigned char *dst, uint64_t usize)
{
    uint64_t in_left = csize, out_left = usize;
    z_stream zs;
    int zr;

    memset(&zs, 0, sizeof(zs));
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK)
        return hpml_set_error(HPML_ERR_NOMEM, "%s: cannot start inflating '%s'", path, name);
    zs.next_in = (unsigned char *)(uintptr_t)src;
    zs.next_out = dst;
    for (;;) { /* zlib counts in uInt: feed both sides in pieces of at most 1 GiB */
        if (zs.avail_in == 0 && in_left > 0) {
            zs.avail_in = in_left > (1u << 30) ? (1u << 30) : (uInt)in_left;
            in_left -= zs.avail_in;
        }
        if (zs.avail_out == 0 && out_left > 0) {
            zs.avail_out = out_left > (1u << 30) ? (1u << 30) : (uInt)out_left;
            out_left -= zs.avail_out;
        }
        zr = inflate(&zs, Z_NO_FLUSH);
        if (zr != Z_OK || (zs.avail_in == 0 && in_left == 0) ||
            (zs.avail_out == 0 && out_left == 0))
            break;
    }
    inflateEnd(&zs);
    if (zr != Z_STREAM_END || (uint64_t)(zs.next_out - dst) != usize)
        return hpml_set_error(HPML_ERR_FORMAT, "%s: member '%s': corrupt deflate data", path, name);
    return 0;
}

/* Central record at *pos: the member's name, method, sizes and data, copied out. */
static int read_member(const char *path, const unsigned char *f, size_t len, uint64_t *pos,
                       uint64_t cd_end, hpml__npz_entry_t *e)
{
    const unsigned char *c = f + *pos, *l;
    uint64_t usize, csize, off, data;
    uint32_t method, flags, crc, nlen, xlen, clen;
    int err;

    if (cd_end - *pos < 46 || rd32(c) != SIG_CENTRAL)
        return bad(path, "a central directory record is malformed");
    flags = rd16(c + 8);
    method = rd16(c + 10);
    crc = rd32(c + 16);
    csize = rd32(c + 20);
    usize = rd32(c + 24);
    nlen = rd16(c + 28);
    xlen = rd16(c + 30);
    clen = rd16(c + 32);
    off = rd32(c + 42);
    if (cd_end - *pos - 46 < (uint64_t)nlen + xlen + clen)
        return bad(path, "a central directory record runs past the directory");
    if (zip64_extra(c + 46 + nlen, xlen, &usize, &csize, &off) != 0)
        return bad(path, "a malformed ZIP64 extra field");
    *pos += 46 + (uint64_t)nlen + xlen + clen;
    if ((e->name = malloc(nlen + 1)) == NULL)
        return hpml_set_error(HPML_ERR_NOMEM, "%s: out of memory", path);
    memcpy(e->name, c + 46, nlen);
    e->name[nlen] = '\0';
    if (nlen > 4 && strcmp(e->name + nlen - 4, ".npy") == 0)
        e->name[nlen - 4] = '\0';
    if (memchr(c + 46, '\0', nlen) != NULL)
        return bad(path, "a member name holds a NUL byte");
    if (flags & 1)
        return hpml_set_error(HPML_ERR_UNSUPPORTED, "%s: member '%s' is encrypted", path, e->name);
    if (method != 0 && method != 8)
        return hpml_set_error(HPML_ERR_UNSUPPORTED,
                              "%s: member '%s' uses zip method %u (stored and deflate only)", path,
                              e->name, (unsigned)method);
    if (off > len || len - off < 30 || rd32(f + off) != SIG_LOCAL)
        return bad(path, "a member's local header is out of the file");
    l = f + off;
    data = off + 30 + rd16(l + 26) + rd16(l + 28);
    if (data > len || len - data < csize || (method == 0 && csize != usize))
        return hpml_set_error(HPML_ERR_FORMAT, "%s: member '%s' is truncated", path, e->name);
    if (usize > SIZE_MAX - 1 || (method == 8 && usize / 1032 > csize + 1))
        return bad(path, "a member's size is impossible");
    if ((e->data = malloc(usize + 1)) == NULL)
        return hpml_set_error(HPML_ERR_NOMEM, "%s: no memory for member '%s' (%" PRIu64 " bytes)",
                              path, e->name, usize);
    e->len = usize;
    if (method == 0)
        memcpy(e->data, f + data, usize);
    else if ((err = inflate_member(path, e->name, f + data, csize, e->data, usize)) != 0)
        return err;
    if (crc_of(e->data, e->len) != crc)
        return hpml_set_error(HPML_ERR_FORMAT, "%s: member '%s': CRC-32 mismatch (corrupt file)",
                              path, e->name);
    return 0;
}

int hpml__npz_open(hpml__npz_t *z, const char *path)
{
    unsigned char *f = NULL;
    uint64_t cd_off = 0, cd_size = 0, count = 0, pos;
    hpml__io_src_t s;
    size_t len = 0;
    int err = 0;

    memset(z, 0, sizeof(*z));
    z->path = path;
    if ((err = hpml__io_src_open(&s, path)) != 0)
        return err;
    if (s.gz != NULL) {
        hpml__io_src_close(&s);
        return bad(path, "it is gzip-compressed");
    }
    len = (size_t)s.size;
    if ((f = malloc(len + 1)) == NULL) {
        hpml__io_src_close(&s);
        return hpml_set_error(HPML_ERR_NOMEM, "%s: no memory to read its %zu bytes", path, len);
    }
    err = hpml__io_src_read(&s, 0, f, len, "the archive");
    hpml__io_src_close(&s);
    if (err != 0)
        goto out;
    if (len < 4 || rd32(f) != SIG_LOCAL) {
        err = bad(path, "it does not start with a zip header");
        goto out;
    }
    if ((err = find_directory(path, f, len, &cd_off, &cd_size, &count)) != 0)
        goto out;
    if (count > cd_size / 46 || count > INT_MAX) {
        err = bad(path, "the member count does not fit the central directory");
        goto out;
    }
    if ((z->e = calloc(count + 1, sizeof(*z->e))) == NULL) {
        err = hpml_set_error(HPML_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    pos = cd_off;
    for (uint64_t i = 0; i < count; i++) {
        z->n++;
        if ((err = read_member(path, f, len, &pos, cd_off + cd_size, &z->e[i])) != 0)
            goto out;
    }
out:
    free(f);
    return err;
}

void hpml__npz_close(hpml__npz_t *z)
{
    for (int i = 0; i < z->n; i++) {
        free(z->e[i].name);
        free(z->e[i].data);
    }
    free(z->e);
    z->e = NULL;
    z->n = 0;
}

const hpml__npz_entry_t *hpml__npz_find(const hpml__npz_t *z, const char *name)
{
    for (int i = 0; i < z->n; i++)
        if (strcmp(z->e[i].name, name) == 0)
            return &z->e[i];
    return NULL;
}

int hpml__npz_read_f32(const hpml__npz_t *z, const hpml__npz_entry_t *e, hpml__io_dense_t *h,
                       hpml_array_t *out)
{
    char where[1200];
    hpml__io_src_t s;
    int err;

    memset(out, 0, sizeof(*out));
    snprintf(where, sizeof(where), "%s: member '%s'", z->path, e->name);
    hpml__io_src_mem(&s, where, e->data, e->len);
    if ((err = hpml__npy_header(&s, h)) != 0)
        return err;
    return hpml__io_dense_read(&s, h, HPML_F32, 0, h->rows, 1, out);
}

int hpml__npz_read_str(const hpml__npz_t *z, const hpml__npz_entry_t *e, char *buf, size_t cap)
{
    const unsigned char *p = e->data;
    char *t = NULL;
    const char *d;
    size_t hl, start, n = 0, es;
    int err = 0;

    if (e->len < 10 || memcmp(p, "\x93NUMPY", 6) != 0)
        return hpml_set_error(HPML_ERR_FORMAT, "%s: member '%s' is not a .npy array", z->path,
                              e->name);
    start = p[6] == 1 ? 10 : 12;
    hl = p[6] == 1 ? rd16(p + 8) : rd32(p + 8);
    if (start > e->len || e->len - start < hl)
        return hpml_set_error(HPML_ERR_FORMAT, "%s: member '%s' is truncated", z->path, e->name);
    if ((t = malloc(hl + 1)) == NULL)
        return hpml_set_error(HPML_ERR_NOMEM, "%s: out of memory", z->path);
    memcpy(t, p + start, hl);
    t[hl] = '\0';
    /* A 0-d str array: {'descr': '<U12', 'fortran_order': False, 'shape': (), } */
    d = strstr(t, "'descr': '");
    if (d == NULL || (d[10] != '<' && d[10] != '|') || (d[11] != 'U' && d[11] != 'S') ||
        strstr(t, "'shape': ()") == NULL) {
        err = hpml_set_error(HPML_ERR_FORMAT,
                             "%s: member '%s' should be a string (a 0-d '<U' array, as "
                             "np.savez writes a str)",
                             z->path, e->name);
        goto out;
    }
    es = d[11] == 'U' ? 4 : 1;
    n = strtoul(d + 12, NULL, 10);
    if (n >= cap || e->len - start - hl != n * es) {
        err = hpml_set_error(HPML_ERR_FORMAT,
                             "%s: member '%s': a string of %zu characters (at most %zu, and the "
                             "data must hold it)",
                             z->path, e->name, n, cap - 1);
        goto out;
    }
    p += start + hl;
    for (size_t i = 0; i < n; i++) {
        uint32_t ch = es == 4 ? rd32(p + 4 * i) : p[i];

        if (ch == 0) { /* NumPy pads shorter strings with NULs */
            n = i;
            break;
        }
        if (ch > 126 || ch < 9) {
            err = hpml_set_error(HPML_ERR_FORMAT,
                                 "%s: member '%s': character %zu is not printable ASCII", z->path,
                                 e->name, i);
            goto out;
        }
        buf[i] = (char)ch;
    }
    buf[n] = '\0';
out:
    free(t);
    return err;
}

/* ---- writer --------------------------------------------------------------------- */

static void put(hpml__npz_writer_t *w, unsigned char **p, size_t *len, size_t *cap, const void *src,
                size_t n)
{
    if (w->err)
        return;
    if (*len + n > *cap) {
        size_t nc = *cap ? *cap : 4096;
        unsigned char *np;

        while (nc < *len + n)
            nc *= 2;
        if ((np = realloc(*p, nc)) == NULL) {
            w->err = hpml_set_error(HPML_ERR_NOMEM, "out of memory writing an .npz");
            return;
        }
        *p = np;
        *cap = nc;
    }
    memcpy(*p + *len, src, n);
    *len += n;
}

static void le16(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v & 0xff);
    p[1] = (unsigned char)(v >> 8 & 0xff);
}

static void le32(unsigned char *p, uint32_t v)
{
    le16(p, v & 0xffff);
    le16(p + 2, v >> 16);
}

/* One member of npy header + data, stored, with its local and central records. Fixed
 * date 1980-01-01 00:00, so that the same model gives the same bytes. */
static void add_member(hpml__npz_writer_t *w, const char *name, const unsigned char *hdr,
                       size_t hlen, const void *data, size_t dlen)
{
    unsigned char lh[30] = {0}, ch[46] = {0};
    size_t nlen = strlen(name) + 4, off = w->len, size = hlen + dlen;
    uLong crc = crc32(0L, Z_NULL, 0);
    char fname[300];

    if (w->err)
        return;
    if (nlen >= sizeof(fname) || size > U32_MAX - 1 || off > U32_MAX - 1 - size - 30 - nlen ||
        w->n >= 0xfffe) {
        w->err = hpml_set_error(HPML_ERR_UNSUPPORTED,
                                "member '%s': the .npz writer is limited to 4 GiB and 65534 "
                                "members",
                                name);
        return;
    }
    snprintf(fname, sizeof(fname), "%s.npy", name);
    crc = crc32(crc, hdr, (uInt)hlen);
    if (dlen > 0)
        crc = crc32(crc, data, (uInt)dlen);
    le32(lh, SIG_LOCAL);
    le16(lh + 4, 20);    /* version needed: 2.0 */
    le16(lh + 12, 0x21); /* 1980-01-01 */
    le32(lh + 14, (uint32_t)crc);
    le32(lh + 18, (uint32_t)size);
    le32(lh + 22, (uint32_t)size);
    le16(lh + 26, (uint32_t)nlen);
    put(w, &w->p, &w->len, &w->cap, lh, 30);
    put(w, &w->p, &w->len, &w->cap, fname, nlen);
    put(w, &w->p, &w->len, &w->cap, hdr, hlen);
    put(w, &w->p, &w->len, &w->cap, data, dlen);
    le32(ch, SIG_CENTRAL);
    memcpy(ch + 6, lh + 4, 26); /* version needed .. name length, as in the local record */
    le32(ch + 42, (uint32_t)off);
    le32(ch + 38, 0x81a40000u); /* external attributes: a regular file, rw-r--r-- */
    le16(ch + 4, 0x0314);       /* made by: Unix, 2.0 */
    put(w, &w->cd, &w->cdlen, &w->cdcap, ch, 46);
    put(w, &w->cd, &w->cdlen, &w->cdcap, fname, nlen);
    w->n++;
}

void hpml__npz_add(hpml__npz_writer_t *w, const char *name, hpml_dtype_t dtype, int ndim,
                   const size_t *shape, const void *data)
{
    unsigned char hdr[HPML_NPY_HEADER_MAX];
    size_t hlen, count;
    const char *descr = dtype == HPML_F32 ? "<f4" : "<i4";

    if (w->err)
        return;
    if (dtype != HPML_F32 && dtype != HPML_I32) {
        w->err = hpml_set_error(HPML_ERR_UNSUPPORTED, "member '%s': f32 or i32 only", name);
        return;
    }
    if (hpml__npy_header_make(descr, ndim, shape, 4, hdr, sizeof(hdr), &hlen, &count) != 0) {
        w->err = hpml_set_error(HPML_ERR_INVAL, "member '%s': shape too large", name);
        return;
    }
    add_member(w, name, hdr, hlen, data, count * 4);
}

void hpml__npz_add_str(hpml__npz_writer_t *w, const char *name, const char *text)
{
    unsigned char hdr[HPML_NPY_HEADER_MAX], *u;
    size_t n = strlen(text), hlen, count;
    char descr[32];

    if (w->err)
        return;
    snprintf(descr, sizeof(descr), "<U%zu", n ? n : 1);
    if ((u = calloc(n ? n : 1, 4)) == NULL) {
        w->err = hpml_set_error(HPML_ERR_NOMEM, "out of memory writing an .npz");
        return;
    }
    for (size_t i = 0; i < n; i++)
        le32(u + 4 * i, (unsigned char)text[i]);
    if (hpml__npy_header_make(descr, 0, NULL, 4, hdr, sizeof(hdr), &hlen, &count) == 0)
        add_member(w, name, hdr, hlen, u, 4 * (n ? n : 1));
    free(u);
}

void hpml__npz_free(hpml__npz_writer_t *w)
{
    free(w->p);
    free(w->cd);
    memset(w, 0, sizeof(*w));
}

int hpml__npz_commit(hpml__npz_writer_t *w, const char *path)
{
    unsigned char end[22] = {0};
    hpml__io_wfile_t f;
    int err = w->err;

    if (err == 0 && w->len > U32_MAX - 1 - w->cdlen)
        err = hpml_set_error(HPML_ERR_UNSUPPORTED, "%s: the .npz writer is limited to 4 GiB", path);
    if (err != 0)
        goto out;
    le32(end, SIG_END);
    le16(end + 8, w->n);
    le16(end + 10, w->n);
    le32(end + 12, (uint32_t)w->cdlen);
    le32(end + 16, (uint32_t)w->len);
    if ((err = hpml__io_wopen(&f, path)) != 0)
        goto out;
    if (fwrite(w->p, 1, w->len, f.f) != w->len || fwrite(w->cd, 1, w->cdlen, f.f) != w->cdlen ||
        fwrite(end, 1, sizeof(end), f.f) != sizeof(end)) {
        err = hpml_set_error(HPML_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        hpml__io_wabort(&f);
        goto out;
    }
    err = hpml__io_wcommit(&f);
out:
    hpml__npz_free(w);
    return err;
}
