/*
 * io front end: row partitioning, format detection and dispatch, the positioned reader
 * over plain and gzip files, the dense-array block reader shared by .npy and IDX, and
 * the temp-file-then-rename writer.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "io/io_internal.h"

void hpml_io_partition(size_t rows, int rank, int nranks, size_t *begin, size_t *end)
{
    size_t p, r, q, rem;

    if (nranks < 1 || rank < 0 || rank >= nranks) {
        *begin = *end = 0;
        return;
    }
    p = (size_t)nranks;
    r = (size_t)rank;
    q = rows / p;
    rem = rows % p;
    *begin = r * q + (r < rem ? r : rem);
    *end = *begin + q + (r < rem ? 1 : 0);
}

void hpml_array_free(hpml_array_t *a)
{
    if (a == NULL)
        return;
    hpml_free(a->data);
    a->data = NULL;
    a->rows = 0;
}

/* ---- file identity ----------------------------------------------------------------- */

/* The folder of path and its last name, stat'ed: 0, or -1 when the folder is not there. */
static int parent_of(const char *path, struct stat *st, const char **base)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    size_t n;

    if (slash == NULL) {
        *base = path;
        return stat(".", st);
    }
    *base = slash + 1;
    n = (size_t)(slash - path);
    if (n >= sizeof(dir))
        return -1;
    memcpy(dir, path, n);
    dir[n] = '\0';
    return stat(n == 0 ? "/" : dir, st);
}

int hpml_io_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    const char *ba, *bb;

    if (a == NULL || b == NULL || a[0] == '\0' || b[0] == '\0')
        return 0;
    if (strcmp(a, b) == 0)
        return 1;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0) /* links and other spellings of one file */
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    /* A file yet to be made: the same name in the same folder. */
    return parent_of(a, &sa, &ba) == 0 && parent_of(b, &sb, &bb) == 0 && strcmp(ba, bb) == 0 &&
           sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* ---- positioned reader ---------------------------------------------------------- */

int hpml__io_open_regular(const char *path)
{
    struct stat st;
    int fd, rc;

    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return hpml_set_error(HPML_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0) {
        rc = hpml_set_error(HPML_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        rc = hpml_set_error(HPML_ERR_IO, "%s: is a directory", path);
    } else if (!S_ISREG(st.st_mode)) {
        /* A device or a pipe has no size to read rows by: /dev/zero would be read forever. */
        rc = hpml_set_error(HPML_ERR_IO,
                            "%s: not a regular file (a device, pipe or socket); give a file", path);
    } else {
        int fl = fcntl(fd, F_GETFL);

        if (fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0)
            return fd;
        rc = hpml_set_error(HPML_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    close(fd);
    return rc;
}

int hpml__io_src_open(hpml__io_src_t *s, const char *path)
{
    unsigned char m[4];
    struct stat st;
    ssize_t n;

    s->path = path;
    s->fd = -1;
    s->gz = NULL;
    s->size = s->file_size = 0;
    s->mem = NULL;
    if ((s->fd = hpml__io_open_regular(path)) < 0) {
        int rc = s->fd;

        s->fd = -1;
        return rc;
    }
    if (fstat(s->fd, &st) != 0) {
        int rc = hpml_set_error(HPML_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        hpml__io_src_close(s);
        return rc;
    }
    s->size = s->file_size = (uint64_t)st.st_size;
    n = pread(s->fd, m, 2, 0);
    if (n == 2 && m[0] == 0x1f && m[1] == 0x8b) {
        /* gzip: ISIZE, the last four bytes, is the uncompressed size mod 2^32. A truncated
         * file almost surely has a wrong one, which is how truncation is caught before
         * decompressing everything. */
        int fd2;
        if (s->size < 18 || pread(s->fd, m, 4, (off_t)(s->size - 4)) != 4) {
            hpml__io_src_close(s);
            return hpml_set_error(HPML_ERR_FORMAT, "%s: truncated gzip file", path);
        }
        s->size =
            (uint64_t)m[0] | (uint64_t)m[1] << 8 | (uint64_t)m[2] << 16 | (uint64_t)m[3] << 24;
        fd2 = dup(s->fd);
        if (fd2 < 0 || (s->gz = gzdopen(fd2, "rb")) == NULL) {
            if (fd2 >= 0)
                close(fd2);
            hpml__io_src_close(s);
            return hpml_set_error(HPML_ERR_NOMEM, "%s: cannot start gzip decompression", path);
        }
        gzbuffer((gzFile)s->gz, 256 * 1024);
    }
    return 0;
}

void hpml__io_src_close(hpml__io_src_t *s)
{
    if (s->gz != NULL)
        gzclose((gzFile)s->gz);
    if (s->fd >= 0)
        close(s->fd);
    s->gz = NULL;
    s->fd = -1;
}

void hpml__io_src_mem(hpml__io_src_t *s, const char *path, const void *buf, size_t len)
{
    s->path = path;
    s->fd = -1;
    s->gz = NULL;
    s->size = s->file_size = len;
    s->mem = buf;
}

int hpml__io_src_read(hpml__io_src_t *s, uint64_t off, void *buf, size_t len, const char *what)
{
    unsigned char *p = buf;
    size_t got = 0;

    if (s->mem != NULL) {
        if (off > s->size || s->size - off < len)
            goto short_read;
        memcpy(p, s->mem + off, len);
        return 0;
    }

    if (s->gz != NULL) {
        gzFile g = (gzFile)s->gz;
        if (gzseek(g, (z_off_t)off, SEEK_SET) != (z_off_t)off)
            goto short_read;
        while (got < len) {
            unsigned chunk = len - got > (1u << 30) ? (1u << 30) : (unsigned)(len - got);
            int n = gzread(g, p + got, chunk);
            if (n <= 0)
                goto short_read;
            got += (size_t)n;
        }
        return 0;
    }
    while (got < len) {
        ssize_t n = pread(s->fd, p + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return hpml_set_error(HPML_ERR_IO, "%s: read error at byte %" PRIu64 ": %s", s->path,
                                  off + got, strerror(errno));
        if (n == 0)
            goto short_read;
        got += (size_t)n;
    }
    return 0;

short_read:
    if (s->gz != NULL) {
        int zerr = Z_OK;
        const char *msg = gzerror((gzFile)s->gz, &zerr);
        if (zerr != Z_OK && zerr != Z_STREAM_END && msg != NULL && *msg)
            return hpml_set_error(HPML_ERR_FORMAT,
                                  "%s: truncated or corrupt gzip data reading %s at byte %" PRIu64
                                  ": %s",
                                  s->path, what, off + got, msg);
    }
    return hpml_set_error(HPML_ERR_FORMAT,
                          "%s: truncated: %s needs %zu bytes at byte %" PRIu64 ", only %zu there",
                          s->path, what, len, off, got);
}

/* ---- dense arrays (.npy, IDX) ---------------------------------------------------- */

void hpml__io_shape_str(const hpml__io_dense_t *h, char *buf, size_t len)
{
    size_t used = 0;
    int i;

    used += (size_t)snprintf(buf, len, "(");
    for (i = 0; i < h->ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%" PRIu64, i ? ", " : "", h->dims[i]);
    if (used < len)
        snprintf(buf + used, len - used, h->ndim == 1 ? ",)" : ")");
}

int hpml__io_dense_finish(const char *path, hpml__io_dense_t *h, uint64_t avail)
{
    uint64_t count = 1, cols = 1, es = hpml__io_stype_size(h->elem.type), need;
    int i, overflow = 0;
    char shape[256];

    for (i = 0; i < h->ndim; i++) {
        if (h->dims[i] != 0 && count > UINT64_MAX / h->dims[i])
            overflow = 1;
        else
            count *= h->dims[i];
        if (i > 0) {
            if (h->dims[i] != 0 && cols > UINT64_MAX / h->dims[i])
                overflow = 1;
            else
                cols *= h->dims[i];
        }
    }
    hpml__io_shape_str(h, shape, sizeof(shape));
    if (overflow || count > UINT64_MAX / es || count * es > (uint64_t)SIZE_MAX ||
        (h->ndim > 0 && h->dims[0] > SIZE_MAX) || cols > SIZE_MAX)
        return hpml_set_error(HPML_ERR_FORMAT, "%s: shape %s is too large", path, shape);
    h->rows = h->ndim > 0 ? (size_t)h->dims[0] : 1;
    h->cols = (size_t)cols;
    need = count * es;
    if (avail != need)
        return hpml_set_error(HPML_ERR_FORMAT,
                              "%s: shape %s needs %" PRIu64
                              " bytes of data but the file has %" PRIu64,
                              path, shape, need, avail);
    return 0;
}

/* Column c of the C-order flattening of the trailing dims, as its index in the
 * Fortran-order flattening (first trailing dim fastest). */
static uint64_t fortran_col(const hpml__io_dense_t *h, uint64_t c)
{
    uint64_t f = 0, stride = 1;
    uint64_t idx[HPML_IO_MAX_DIMS];
    int i;

    for (i = h->ndim - 1; i >= 1; i--) {
        idx[i] = c % h->dims[i];
        c /= h->dims[i];
    }
    for (i = 1; i < h->ndim; i++) {
        f += idx[i] * stride;
        stride *= h->dims[i];
    }
    return f;
}

#define CHUNK_BYTES ((size_t)4 << 20)

int hpml__io_dense_read(hpml__io_src_t *s, const hpml__io_dense_t *h, hpml_dtype_t want,
                        size_t begin, size_t end, int reject_nonfinite, hpml_array_t *out)
{
    size_t es = hpml__io_stype_size(h->elem.type), ws = hpml_dtype_size(want);
    size_t rows = end - begin, cols = h->cols, bad = 0;
    unsigned char *scratch = NULL, *data = NULL;
    char why[128];
    int rc = 0;

    if (rows != 0 && cols > SIZE_MAX / rows / (ws > es ? ws : es))
        return hpml_set_error(HPML_ERR_NOMEM, "%s: block of %zu rows is too large", s->path, rows);
    data = hpml_malloc(rows * cols * ws);
    if (data == NULL)
        return hpml_set_error(HPML_ERR_NOMEM, "%s: cannot allocate %zu x %zu %s", s->path, rows,
                              cols, hpml_dtype_name(want));
    if (rows == 0 || cols == 0)
        goto done;

    if (!h->fortran && hpml__io_is_copy(h->elem, want)) {
        /* Stored as wanted: read straight into the result, no staging copy. */
        rc = hpml__io_src_read(s, h->data_offset + (uint64_t)begin * cols * es, data,
                               rows * cols * es, "the data");
        if (rc != 0)
            goto out;
        if (reject_nonfinite &&
            (rc = hpml__io_check_finite(data, want, rows * cols, &bad, why, sizeof(why))) != 0) {
            rc = hpml_set_error(rc, "%s: row %zu column %zu %s", s->path, begin + bad / cols,
                                bad % cols, why);
            goto out;
        }
    } else if (!h->fortran) {
        size_t row_bytes = cols * es, chunk_rows = CHUNK_BYTES / row_bytes, r0;
        if (chunk_rows == 0)
            chunk_rows = 1;
        if (chunk_rows > rows)
            chunk_rows = rows;
        scratch = hpml_malloc(chunk_rows * row_bytes);
        if (scratch == NULL) {
            rc = hpml_set_error(HPML_ERR_NOMEM, "%s: out of memory", s->path);
            goto out;
        }
        for (r0 = 0; r0 < rows; r0 += chunk_rows) {
            size_t nr = rows - r0 < chunk_rows ? rows - r0 : chunk_rows;
            rc = hpml__io_src_read(s, h->data_offset + (uint64_t)(begin + r0) * row_bytes, scratch,
                                   nr * row_bytes, "the data");
            if (rc != 0)
                goto out;
            rc = hpml__io_convert(data + r0 * cols * ws, want, 1, scratch, h->elem, nr * cols,
                                  reject_nonfinite, &bad, why, sizeof(why));
            if (rc != 0) {
                rc = hpml_set_error(rc, "%s: row %zu column %zu %s", s->path,
                                    begin + r0 + bad / cols, bad % cols, why);
                goto out;
            }
        }
    } else {
        /* Column-major: each column's block of rows is one contiguous segment. */
        size_t chunk = CHUNK_BYTES / es < rows ? CHUNK_BYTES / es : rows, c, r0;
        scratch = hpml_malloc(chunk * es);
        if (scratch == NULL) {
            rc = hpml_set_error(HPML_ERR_NOMEM, "%s: out of memory", s->path);
            goto out;
        }
        for (c = 0; c < cols; c++) {
            uint64_t f = fortran_col(h, c);
            for (r0 = 0; r0 < rows; r0 += chunk) {
                size_t nr = rows - r0 < chunk ? rows - r0 : chunk;
                uint64_t off = h->data_offset + (f * h->rows + begin + r0) * es;
                rc = hpml__io_src_read(s, off, scratch, nr * es, "the data");
                if (rc != 0)
                    goto out;
                rc = hpml__io_convert(data + (r0 * cols + c) * ws, want, cols, scratch, h->elem, nr,
                                      reject_nonfinite, &bad, why, sizeof(why));
                if (rc != 0) {
                    rc = hpml_set_error(rc, "%s: row %zu column %zu %s", s->path, begin + r0 + bad,
                                        c, why);
                    goto out;
                }
            }
        }
    }
done:
    out->dtype = want;
    out->rows = rows;
    out->cols = cols;
    out->row_offset = begin;
    out->total_rows = h->rows;
    out->data = data;
    data = NULL;
out:
    hpml_free(scratch);
    hpml_free(data);
    return rc;
}

/* ---- dispatch ------------------------------------------------------------------- */

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

/* AUTO: the content's magic bytes first (.npy magic, gzip, IDX's 0 0 type ndim), then
 * the name (so a damaged .npy still gets the .npy parser's message), else CSV. */
static int detect(const char *path, hpml_format_t fmt, hpml_format_t *out)
{
    unsigned char m[6] = {0};
    ssize_t n = 0;
    int fd;

    if (fmt == HPML_FMT_NPY || fmt == HPML_FMT_IDX || fmt == HPML_FMT_CSV) {
        if ((fd = hpml__io_open_regular(path)) < 0)
            return fd;
        close(fd);
        *out = fmt;
        return 0;
    }
    if (fmt != HPML_FMT_AUTO)
        return hpml_set_error(HPML_ERR_INVAL, "%s: unknown format %d", path, (int)fmt);
    if ((fd = hpml__io_open_regular(path)) < 0)
        return fd;
    n = pread(fd, m, sizeof(m), 0);
    close(fd);
    if (n == 6 && memcmp(m, "\x93NUMPY", 6) == 0)
        *out = HPML_FMT_NPY;
    else if (n >= 2 && m[0] == 0x1f && m[1] == 0x8b)
        *out = HPML_FMT_IDX;
    else if (n >= 4 && m[0] == 0 && m[1] == 0 &&
             (m[2] == 0x08 || m[2] == 0x09 || (m[2] >= 0x0b && m[2] <= 0x0e)) && m[3] >= 1)
        *out = HPML_FMT_IDX;
    else if (ends_with(path, ".npy"))
        *out = HPML_FMT_NPY;
    else if (ends_with(path, "-ubyte") || ends_with(path, ".idx") || ends_with(path, ".gz") ||
             strstr(path, "-idx") != NULL)
        *out = HPML_FMT_IDX;
    else
        *out = HPML_FMT_CSV;
    return 0;
}

static int dense_open(const char *path, hpml_format_t fmt, hpml__io_src_t *s, hpml__io_dense_t *h)
{
    int rc = hpml__io_src_open(s, path);
    if (rc != 0)
        return rc;
    if (fmt == HPML_FMT_NPY) {
        if (s->gz != NULL) {
            hpml__io_src_close(s);
            return hpml_set_error(HPML_ERR_UNSUPPORTED,
                                  "%s: gzip-compressed .npy is not supported (only IDX)", path);
        }
        rc = hpml__npy_header(s, h);
    } else {
        rc = hpml__idx_header(s, h);
    }
    if (rc != 0)
        hpml__io_src_close(s);
    return rc;
}

int hpml_io_shape(const char *path, hpml_format_t fmt, size_t *rows, size_t *cols,
                  hpml_dtype_t *stored)
{
    hpml__io_src_t s;
    hpml__io_dense_t h;
    hpml_format_t f = HPML_FMT_AUTO;
    int rc;

    if (path == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_io_shape: path is NULL");
    rc = detect(path, fmt, &f);
    if (rc != 0)
        return rc;
    if (f == HPML_FMT_CSV) {
        size_t r = 0, c = 0;
        rc = hpml__csv_shape(path, &r, &c);
        if (rc == 0) {
            if (rows != NULL)
                *rows = r;
            if (cols != NULL)
                *cols = c;
            if (stored != NULL)
                *stored = HPML_F64;
        }
        return rc;
    }
    rc = dense_open(path, f, &s, &h);
    if (rc != 0)
        return rc;
    hpml__io_src_close(&s);
    if (rows != NULL)
        *rows = h.rows;
    if (cols != NULL)
        *cols = h.cols;
    if (stored != NULL)
        *stored = hpml__io_stype_dtype(h.elem.type);
    return 0;
}

static int read_rows(const char *path, hpml_format_t fmt, hpml_dtype_t want, int by_rank,
                     size_t begin, size_t end, int rank, int nranks, int reject_nonfinite,
                     hpml_array_t *out)
{
    hpml__io_src_t s;
    hpml__io_dense_t h;
    hpml_format_t f = HPML_FMT_AUTO;
    int rc;

    if (out == NULL || path == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_io_read: NULL path or output");
    memset(out, 0, sizeof(*out));
    if (!hpml__io_want_ok(want))
        return hpml_set_error(HPML_ERR_INVAL, "%s: cannot read as %s (f32 f64 i32 i64 u8 i8 only)",
                              path, hpml_dtype_name(want));
    if (by_rank && (nranks < 1 || rank < 0 || rank >= nranks))
        return hpml_set_error(HPML_ERR_INVAL, "%s: rank %d of %d is not valid", path, rank, nranks);
    rc = detect(path, fmt, &f);
    if (rc != 0)
        return rc;
    if (f == HPML_FMT_CSV)
        return hpml__csv_read(path, want, begin, end, rank, by_rank ? nranks : 0, reject_nonfinite,
                              out);
    rc = dense_open(path, f, &s, &h);
    if (rc != 0)
        return rc;
    if (by_rank)
        hpml_io_partition(h.rows, rank, nranks, &begin, &end);
    if (begin > end || end > h.rows)
        rc = hpml_set_error(HPML_ERR_INVAL,
                            "%s: rows [%zu, %zu) out of range: the file has %zu rows", path, begin,
                            end, h.rows);
    else
        rc = hpml__io_dense_read(&s, &h, want, begin, end, reject_nonfinite, out);
    hpml__io_src_close(&s);
    return rc;
}

int hpml_io_read_rows(const char *path, hpml_format_t fmt, hpml_dtype_t want, size_t begin,
                      size_t end, int reject_nonfinite, hpml_array_t *out)
{
    return read_rows(path, fmt, want, 0, begin, end, 0, 1, reject_nonfinite, out);
}

int hpml_io_read_block(const char *path, hpml_format_t fmt, hpml_dtype_t want, int rank, int nranks,
                       int reject_nonfinite, hpml_array_t *out)
{
    return read_rows(path, fmt, want, 1, 0, 0, rank, nranks, reject_nonfinite, out);
}

/* ---- writing via a temporary file ---------------------------------------------- */

/* When this process started (the library's load): a temporary older than that, by more
 * than STALE_MARGIN seconds, was left by an earlier run. The margin keeps the rule clear of
 * one-second file times and of clocks a little apart on hosts sharing a folder. */
static time_t process_start;
#define STALE_MARGIN 60

__attribute__((constructor)) static void note_start(void)
{
    process_start = time(NULL);
}

/* Remove path (a file, or a folder and the files in it). */
static void remove_tree(const char *path)
{
    char name[8192];
    struct dirent *e;
    DIR *d = opendir(path);

    if (d == NULL) {
        unlink(path);
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if ((size_t)snprintf(name, sizeof(name), "%s/%s", path, e->d_name) < sizeof(name))
            unlink(name);
    }
    closedir(d);
    rmdir(path);
}

/* Is name "<base>.tmp.<pid>.<mkstemp's 6 characters>" of a process that is gone, and
 * over STALE_MARGIN seconds older than this run? A writer killed between writing and
 * renaming leaves one; a live writer (this host) or a fresh one (another host sharing the
 * folder) is left alone. */
static int stale_temp(const char *dir, const char *base, const char *name)
{
    size_t n = strlen(base);
    char *end, full[8192];
    unsigned long pid;
    struct stat st;

    if (strncmp(name, base, n) != 0 || strncmp(name + n, ".tmp.", 5) != 0)
        return 0;
    errno = 0;
    pid = strtoul(name + n + 5, &end, 10);
    if (end == name + n + 5 || *end != '.' || strlen(end + 1) != 6 || errno != 0 || pid > INT_MAX)
        return 0;
    if (pid == (unsigned long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
        return 0;
    return (size_t)snprintf(full, sizeof(full), "%s/%s", dir, name) < sizeof(full) &&
           lstat(full, &st) == 0 && st.st_mtime < process_start - STALE_MARGIN;
}

/* Remove the stale temporaries of path's earlier writers (stale_temp). */
static void clean_stale(const char *path)
{
    char dir[4096], full[8192];
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    struct dirent *e;
    DIR *d;

    if (slash == NULL)
        snprintf(dir, sizeof(dir), ".");
    else if ((size_t)snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path) >= sizeof(dir))
        return;
    if (dir[0] == '\0')
        snprintf(dir, sizeof(dir), "/");
    if (*base == '\0' || (d = opendir(dir)) == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        if (stale_temp(dir, base, e->d_name) &&
            (size_t)snprintf(full, sizeof(full), "%s/%s", dir, e->d_name) < sizeof(full)) {
            HPML_LOG(HPML_LOG_INFO, "removing %s, left by an earlier run", full);
            remove_tree(full);
        }
    }
    closedir(d);
}

int hpml_io_temp_next_to(const char *path, int folder, char *tmp, size_t len)
{
    int fd;

    if (path == NULL || tmp == NULL || len == 0)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_io_temp_next_to: NULL argument");
    tmp[0] = '\0';
    if ((size_t)snprintf(tmp, len, "%s.tmp.%ld.XXXXXX", path, (long)getpid()) >= len) {
        tmp[0] = '\0';
        fd = hpml_set_error(HPML_ERR_IO, "%s: %s", path, strerror(ENAMETOOLONG));
        errno = ENAMETOOLONG;
        return fd;
    }
    clean_stale(path);
    if (folder) {
        if (mkdtemp(tmp) != NULL)
            return 0;
    } else if ((fd = mkstemp(tmp)) >= 0) {
        return fd;
    }
    {
        int e = errno; /* kept for the caller */

        fd = hpml_set_error(HPML_ERR_IO, "%s: cannot create a temporary %s %s: %s", path,
                            folder ? "folder" : "file", tmp, strerror(e));
        errno = e;
    }
    tmp[0] = '\0';
    return fd;
}

int hpml__io_wopen(hpml__io_wfile_t *w, const char *path)
{
    size_t n = strlen(path);
    struct stat st;
    int fd;

    w->path = path;
    w->f = NULL;
    w->tmp = malloc(n + 40);
    if (w->tmp == NULL)
        return hpml_set_error(HPML_ERR_NOMEM, "%s: out of memory", path);
    /* Same folder as the target so rename(2) is atomic. */
    fd = hpml_io_temp_next_to(path, 0, w->tmp, n + 40);
    if (fd < 0) {
        free(w->tmp);
        w->tmp = NULL;
        return fd;
    }
    /* mkstemp makes 0600; give the file the mode the old one had, or a usual 0644. */
    fchmod(fd, stat(path, &st) == 0 ? (st.st_mode & 07777) : 0644);
    w->f = fdopen(fd, "wb");
    if (w->f == NULL) {
        close(fd);
        hpml__io_wabort(w);
        return hpml_set_error(HPML_ERR_NOMEM, "%s: out of memory", path);
    }
    return 0;
}

void hpml__io_wabort(hpml__io_wfile_t *w)
{
    if (w->f != NULL)
        fclose(w->f);
    if (w->tmp != NULL)
        unlink(w->tmp);
    free(w->tmp);
    w->f = NULL;
    w->tmp = NULL;
}

int hpml__io_wcommit(hpml__io_wfile_t *w)
{
    int rc = 0, dfd;
    char *dir = NULL;

    if (ferror(w->f) || fflush(w->f) != 0 || fsync(fileno(w->f)) != 0) {
        rc = hpml_set_error(HPML_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
        goto out;
    }
    if (fclose(w->f) != 0) {
        w->f = NULL;
        rc = hpml_set_error(HPML_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
        goto out;
    }
    w->f = NULL;
    if (rename(w->tmp, w->path) != 0) {
        rc = hpml_set_error(HPML_ERR_IO, "%s: cannot rename %s to it: %s", w->path, w->tmp,
                            strerror(errno));
        goto out;
    }
    free(w->tmp);
    w->tmp = NULL;
    /* Make the rename itself durable. */
    dir = strdup(w->path);
    if (dir != NULL) {
        dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
    }
out:
    free(dir);
    if (rc != 0)
        hpml__io_wabort(w);
    return rc;
}

/* ---- one file, public -------------------------------------------------------------- */

struct hpml_io_file {
    hpml__io_wfile_t w;
    char *path; /* the target, copied: w borrows it */
};

int hpml_io_file_open(const char *path, hpml_io_file_t **out, FILE **f)
{
    hpml_io_file_t *w;
    int rc;

    *out = NULL;
    *f = NULL;
    if ((w = calloc(1, sizeof(*w))) == NULL || (w->path = strdup(path)) == NULL) {
        free(w);
        return hpml_set_error(HPML_ERR_NOMEM, "%s: out of memory", path);
    }
    if ((rc = hpml__io_wopen(&w->w, w->path)) != 0) {
        free(w->path);
        free(w);
        return rc;
    }
    *out = w;
    *f = w->w.f;
    return 0;
}

int hpml_io_file_commit(hpml_io_file_t *w)
{
    int rc = hpml__io_wcommit(&w->w);

    free(w->path);
    free(w);
    return rc;
}

void hpml_io_file_abort(hpml_io_file_t *w)
{
    if (w == NULL)
        return;
    hpml__io_wabort(&w->w);
    free(w->path);
    free(w);
}
