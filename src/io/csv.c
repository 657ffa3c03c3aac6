/*
 * CSV: numeric tables, one row per line. A UTF-8 byte-order mark at the start of the file
 * (as Excel writes) is skipped. The first non-blank, non-comment line decides the delimiter
 * (tab, ';', ',' in that order, else runs of spaces as np.savetxt writes) and whether it is
 * a header: a header when none of its fields is a finite number (digits, as strtod reads
 * them; nan, inf and infinity in any case are names there), otherwise a data row, checked
 * as every data row is: an empty field or one that is not a number is an error, so a data
 * row with a typo is not silently dropped as a header. Blank lines and lines starting with
 * '#' are skipped. Fields may be double-quoted; quoted newlines are not supported (the row
 * scan is line based), so a quote still open at the end of its line is an error, as is text
 * after a closing quote. Numeric fields may have any length.
 *
 * A block read scans the file once for line ends only (memchr, no number parsing),
 * remembering the byte offset of every CHECKPOINT-th row, then seeks to the block and
 * parses just its rows.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/io_internal.h"

#define CHECKPOINT 1024
#define SCAN_BUF   ((size_t)1 << 20)

typedef struct {
    char delim; /* ',' ';' '\t', or ' ' for runs of blanks */
    int has_header;
    size_t cols; /* fields in the header (or the first row) */
    size_t rows; /* data rows */
    /* Offset and 1-based line number of data rows 0, CHECKPOINT, 2*CHECKPOINT, ... */
    off_t *cp_off;
    size_t *cp_line;
    size_t ncp, cap;
} scan_t;

static void scan_free(scan_t *sc)
{
    free(sc->cp_off);
    free(sc->cp_line);
    sc->cp_off = NULL;
    sc->cp_line = NULL;
}

/* Kind of a line from its first bytes: 0 blank, 1 comment, 2 content. */
static int line_kind(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r'))
        i++;
    if (i == n || s[i] == '\n')
        return 0;
    return s[i] == '#' ? 1 : 2;
}

/* A quoting error of a line, found by split: the 1-based field (0: none) and what. */
typedef struct {
    size_t field;
    const char *what;
} quote_err_t;

/* Split a line (without its newline) into fields: starts and lengths, trimmed, quotes
 * removed. Returns the field count (may exceed max: then only max are stored). A quote
 * not closed on the line, or text after a closing quote, is reported in *qe (the first
 * one); the field is still counted. */
static size_t split(char *line, char delim, char **fs, size_t *fl, size_t max, quote_err_t *qe)
{
    size_t n = 0, len = strlen(line);
    char *p = line, *end = line + len;

    qe->field = 0;
    qe->what = NULL;
    while (end > line && (end[-1] == '\r' || end[-1] == '\n'))
        *--end = '\0';
    if (delim == ' ') {
        for (;;) {
            while (p < end && (*p == ' ' || *p == '\t'))
                p++;
            if (p >= end)
                break;
            char *q = p;
            while (q < end && *q != ' ' && *q != '\t')
                q++;
            if (n < max) {
                fs[n] = p;
                fl[n] = (size_t)(q - p);
            }
            n++;
            p = q;
        }
        return n;
    }
    for (;;) {
        char *q, *b, *e;
        while (p < end && (*p == ' ' || (*p == '\t' && delim != '\t')))
            p++;
        if (p < end && *p == '"') {
            /* Quoted: up to the closing quote (a doubled "" stays as is: numbers never
             * contain quotes, and header names are not used). */
            b = ++p;
            while (p < end && !(*p == '"' && (p + 1 >= end || p[1] != '"')))
                p += (*p == '"') ? 2 : 1;
            e = p < end ? p : end;
            if (p < end) {
                p++;
            } else if (qe->field == 0) {
                qe->field = n + 1;
                qe->what = "has an unterminated quote";
            }
            q = p;
            while (q < end && (*q == ' ' || (*q == '\t' && delim != '\t')))
                q++;
            if (q < end && *q != delim && qe->field == 0) {
                qe->field = n + 1;
                qe->what = "has text after its closing quote";
            }
            while (q < end && *q != delim)
                q++;
        } else {
            b = p;
            q = p;
            while (q < end && *q != delim)
                q++;
            e = q;
            while (e > b && (e[-1] == ' ' || (e[-1] == '\t' && delim != '\t')))
                e--;
        }
        if (n < max) {
            fs[n] = b;
            fl[n] = (size_t)(e - b);
        }
        n++;
        if (q >= end)
            break;
        p = q + 1;
    }
    return n;
}

/* Is the field a number (strtod consumes all of it)? Writes the value. The field is
 * ended in place for strtod (its line is ours), so it may have any length: "0." and a
 * thousand digits is a number, as np.loadtxt reads it. */
static int parse_num(char *f, size_t len, double *v)
{
    char *endp, save;
    int whole;

    if (len == 0 || isspace((unsigned char)f[0]))
        return 0;
    save = f[len];
    f[len] = '\0';
    errno = 0;
    *v = strtod(f, &endp);
    whole = endp == f + len;
    f[len] = save;
    /* ERANGE on underflow still gives a usable value; on overflow +-HUGE_VAL is the
     * honest answer (inf), which the conversion then accepts or rejects. */
    return whole;
}

/* Is the field a finite number, i.e. one written with digits? strtod also reads nan, inf
 * and infinity (any case, signed): values in a data row, but plausible column names, so
 * they do not make a first row data. An overflowing literal (1e999) is written with digits
 * and counts, although strtod gives inf for it. */
static int finite_num(char *f, size_t len)
{
    size_t i = (len > 0 && (f[0] == '+' || f[0] == '-')) ? 1 : 0;
    double v;

    return parse_num(f, len, &v) && i < len && !isalpha((unsigned char)f[i]);
}

/* The error for field j that parse_num refused, as every data row reports it (hint is
 * appended to the "not a number" message: "" in data rows). */
static int bad_field(const char *path, size_t lineno, size_t j, const char *f, size_t len,
                     const char *hint)
{
    if (len == 0)
        return hpml_set_error(HPML_ERR_FORMAT, "%s:%zu: field %zu is empty", path, lineno, j + 1);
    return hpml_set_error(HPML_ERR_FORMAT, "%s:%zu: field %zu '%.*s' is not a number%s", path,
                          lineno, j + 1, (int)(len > 40 ? 40 : len), f, hint);
}

static char detect_delim(const char *line)
{
    if (strchr(line, '\t') != NULL)
        return '\t';
    if (strchr(line, ';') != NULL)
        return ';';
    if (strchr(line, ',') != NULL)
        return ',';
    return ' ';
}

static int add_checkpoint(scan_t *sc, const char *path, off_t off, size_t line)
{
    if (sc->ncp == sc->cap) {
        size_t cap = sc->cap ? 2 * sc->cap : 64;
        off_t *o = realloc(sc->cp_off, cap * sizeof(*o));
        if (o == NULL)
            return hpml_set_error(HPML_ERR_NOMEM, "%s: out of memory", path);
        sc->cp_off = o;
        size_t *l = realloc(sc->cp_line, cap * sizeof(*l));
        if (l == NULL)
            return hpml_set_error(HPML_ERR_NOMEM, "%s: out of memory", path);
        sc->cp_line = l;
        sc->cap = cap;
    }
    sc->cp_off[sc->ncp] = off;
    sc->cp_line[sc->ncp] = line;
    sc->ncp++;
    return 0;
}

/* One pass over the file: delimiter, header, columns, row count, checkpoints. */
static int scan(const char *path, FILE *f, scan_t *sc)
{
    char *line = NULL, *buf = NULL;
    size_t cap = 0, lineno = 0, nf;
    ssize_t n;
    off_t off = 0;
    int rc = 0;

    memset(sc, 0, sizeof(*sc));
    /* The first content line, with getline. */
    for (;;) {
        off = ftello(f);
        errno = 0;
        n = getline(&line, &cap, f);
        if (n < 0) {
            /* A line too long for memory is not the end of the table. */
            if (errno == ENOMEM || errno == EOVERFLOW)
                rc = hpml_set_error(HPML_ERR_NOMEM, "%s:%zu: no memory to hold the line", path,
                                    lineno + 1);
            else if (ferror(f))
                rc = hpml_set_error(HPML_ERR_IO, "%s: read error: %s", path, strerror(errno));
            goto out; /* empty table */
        }
        lineno++;
        if (memchr(line, '\0', (size_t)n) != NULL) {
            rc = hpml_set_error(HPML_ERR_FORMAT, "%s:%zu: NUL byte: not a text (CSV) file", path,
                                lineno);
            goto out;
        }
        if (line_kind(line, (size_t)n) == 2)
            break;
    }
    {
        char *copy = strdup(line), **fs = NULL;
        size_t *fl = NULL, k;
        double v;
        if (copy == NULL) {
            rc = hpml_set_error(HPML_ERR_NOMEM, "%s: out of memory", path);
            goto out;
        }
        quote_err_t qe;
        sc->delim = detect_delim(copy);
        nf = split(copy, sc->delim, NULL, NULL, 0, &qe);
        fs = malloc(nf * sizeof(*fs));
        fl = malloc(nf * sizeof(*fl));
        if (fs == NULL || fl == NULL) {
            free(copy);
            free(fs);
            free(fl);
            rc = hpml_set_error(HPML_ERR_NOMEM, "%s: out of memory", path);
            goto out;
        }
        split(copy, sc->delim, fs, fl, nf, &qe);
        sc->cols = nf;
        if (qe.field != 0)
            rc = hpml_set_error(HPML_ERR_FORMAT, "%s:%zu: field %zu %s", path, lineno, qe.field,
                                qe.what);
        /* A header has no finite number (an empty field is a name: ",a,b" has an unnamed
         * first column). Otherwise the line is data and must pass what every data row
         * passes, so its first empty or non-numeric field is reported as parse_field would,
         * and nan/inf fields are left to the conversion, which knows the type wanted. */
        sc->has_header = 1;
        for (k = 0; rc == 0 && k < nf; k++)
            if (finite_num(fs[k], fl[k]))
                sc->has_header = 0;
        for (k = 0; rc == 0 && !sc->has_header && k < nf; k++) {
            if (!parse_num(fs[k], fl[k], &v)) {
                rc = bad_field(path, lineno, k, fs[k], fl[k],
                               " (a header row must have no finite numeric fields)");
                break;
            }
        }
        free(copy);
        free(fs);
        free(fl);
        if (rc != 0)
            goto out;
    }
    if (!sc->has_header) {
        if ((rc = add_checkpoint(sc, path, off, lineno)) != 0)
            goto out;
        sc->rows = 1;
    }

    /* The rest: line ends only. at_start: no non-blank byte seen on this line yet. */
    buf = malloc(SCAN_BUF);
    if (buf == NULL) {
        rc = hpml_set_error(HPML_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    off = ftello(f);
    {
        int at_start = 1;
        off_t line_off = off;
        size_t got;
        lineno++; /* the line now starting */
        while ((got = fread(buf, 1, SCAN_BUF, f)) > 0) {
            size_t i = 0;
            while (i < got) {
                if (at_start) {
                    char ch = buf[i];
                    if (ch == ' ' || ch == '\t' || ch == '\r') {
                        i++;
                        continue;
                    }
                    if (ch == '\n') { /* blank line */
                        i++;
                        lineno++;
                        line_off = off + (off_t)i;
                        continue;
                    }
                    if (ch != '#') {
                        if (sc->rows % CHECKPOINT == 0 &&
                            (rc = add_checkpoint(sc, path, line_off, lineno)) != 0)
                            goto out;
                        sc->rows++;
                    }
                    at_start = 0;
                }
                char *nl = memchr(buf + i, '\n', got - i);
                if (nl == NULL) {
                    i = got;
                    break;
                }
                i = (size_t)(nl - buf) + 1;
                lineno++;
                line_off = off + (off_t)i;
                at_start = 1;
            }
            off += (off_t)got;
        }
        if (ferror(f))
            rc = hpml_set_error(HPML_ERR_IO, "%s: read error: %s", path, strerror(errno));
    }
out:
    free(line);
    free(buf);
    if (rc != 0)
        scan_free(sc);
    return rc;
}

/* Open for reading, refusing gzip, and positioned after a UTF-8 byte-order mark if the
 * file starts with one. The scan takes its offsets from ftello, so they are file offsets
 * past the mark and the block reads' seeks land on the right rows. */
static FILE *open_text(const char *path, int *rc)
{
    FILE *f = fopen(path, "rb");
    unsigned char m[3];
    size_t n;

    if (f == NULL) {
        *rc = hpml_set_error(HPML_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    n = fread(m, 1, 3, f);
    if (n >= 2 && m[0] == 0x1f && m[1] == 0x8b) {
        fclose(f);
        *rc =
            hpml_set_error(HPML_ERR_UNSUPPORTED, "%s: gzip-compressed CSV is not supported", path);
        return NULL;
    }
    if (fseeko(f, n == 3 && m[0] == 0xef && m[1] == 0xbb && m[2] == 0xbf ? 3 : 0, SEEK_SET) != 0) {
        *rc = hpml_set_error(HPML_ERR_IO, "%s: seek failed: %s", path, strerror(errno));
        fclose(f);
        return NULL;
    }
    *rc = 0;
    return f;
}

int hpml__csv_shape(const char *path, size_t *rows, size_t *cols)
{
    scan_t sc;
    FILE *f;
    int rc;

    if ((f = open_text(path, &rc)) == NULL)
        return rc;
    rc = scan(path, f, &sc);
    fclose(f);
    if (rc == 0) {
        *rows = sc.rows;
        *cols = sc.cols;
        scan_free(&sc);
    }
    return rc;
}

/* Parse one field into element j of the output row (f is ended in place, as in
 * parse_num). */
static int parse_field(const char *path, size_t lineno, size_t j, char *f, size_t len,
                       hpml_dtype_t want, int reject, void *dst)
{
    char why[128];
    double v;
    int rc;

    if (!parse_num(f, len, &v))
        return bad_field(path, lineno, j, f, len, "");
    if (want == HPML_I64 && fabs(v) >= 9007199254740992.0) {
        /* Beyond 2^53 a double loses integers: parse those exactly. */
        char *endp, save = f[len];
        long long x;
        int whole;
        f[len] = '\0';
        errno = 0;
        x = strtoll(f, &endp, 10);
        whole = endp == f + len && errno == 0;
        f[len] = save;
        if (whole) {
            int64_t y = x;
            memcpy(dst, &y, sizeof(y));
            return 0;
        }
    }
    rc = hpml__io_convert_double(dst, want, v, reject, why, sizeof(why));
    if (rc != 0)
        return hpml_set_error(rc, "%s:%zu: field %zu %s", path, lineno, j + 1, why);
    return 0;
}

int hpml__csv_read(const char *path, hpml_dtype_t want, size_t begin, size_t end, int rank,
                   int nranks, int reject_nonfinite, hpml_array_t *out)
{
    size_t ws = hpml_dtype_size(want), cols, rows, lineno, r, cap = 0, skip, nf, j;
    unsigned char *data = NULL;
    char *line = NULL, **fs = NULL;
    size_t *fl = NULL;
    quote_err_t qe;
    scan_t sc;
    FILE *f;
    off_t size = 0;
    int rc, have_scan = 0, probe = 0;

    if ((f = open_text(path, &rc)) == NULL)
        return rc;
    if ((rc = scan(path, f, &sc)) != 0)
        goto out;
    have_scan = 1;
    if (nranks > 0)
        hpml_io_partition(sc.rows, rank, nranks, &begin, &end);
    if (begin > end || end > sc.rows) {
        rc = hpml_set_error(HPML_ERR_INVAL,
                            "%s: rows [%zu, %zu) out of range: the file has %zu rows", path, begin,
                            end, sc.rows);
        goto out;
    }
    cols = sc.cols;
    rows = end - begin;
    /* Every field of a data row takes at least one byte, so a block can hold no more
     * fields than the bytes from its first row to the end of the file. The row count is
     * of lines and the column count of the first line: when their product is more, some
     * row is short, and the rows are parsed into one row's room until it is found,
     * instead of allocating what the counts claim. */
    if (rows > 0 && (fseeko(f, 0, SEEK_END) != 0 || (size = ftello(f)) < 0)) {
        rc = hpml_set_error(HPML_ERR_IO, "%s: seek failed: %s", path, strerror(errno));
        goto out;
    }
    if (rows > 0 && cols > (size_t)(size - sc.cp_off[begin / CHECKPOINT]) / rows)
        probe = 1;
    else if (rows != 0 && cols > SIZE_MAX / rows / ws) {
        rc = hpml_set_error(HPML_ERR_NOMEM, "%s: block of %zu rows is too large", path, rows);
        goto out;
    }
    data = hpml_malloc((probe ? 1 : rows) * cols * ws);
    fs = malloc((cols + 1) * sizeof(*fs));
    fl = malloc((cols + 1) * sizeof(*fl));
    if (data == NULL || fs == NULL || fl == NULL) {
        rc = hpml_set_error(HPML_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    if (rows > 0) {
        size_t c = begin / CHECKPOINT;
        if (fseeko(f, sc.cp_off[c], SEEK_SET) != 0) {
            rc = hpml_set_error(HPML_ERR_IO, "%s: seek failed: %s", path, strerror(errno));
            goto out;
        }
        lineno = sc.cp_line[c] - 1;
        skip = begin - c * CHECKPOINT;
        r = 0;
        while (r < rows) {
            ssize_t n = getline(&line, &cap, f);
            if (n < 0) {
                rc =
                    hpml_set_error(HPML_ERR_IO, "%s:%zu: file changed while reading", path, lineno);
                goto out;
            }
            lineno++;
            if (line_kind(line, (size_t)n) != 2)
                continue;
            if (skip > 0) {
                skip--;
                continue;
            }
            if (memchr(line, '\0', (size_t)n) != NULL) {
                rc = hpml_set_error(HPML_ERR_FORMAT, "%s:%zu: NUL byte: not a text (CSV) file",
                                    path, lineno);
                goto out;
            }
            nf = split(line, sc.delim, fs, fl, cols + 1, &qe);
            if (qe.field != 0) {
                rc = hpml_set_error(HPML_ERR_FORMAT, "%s:%zu: field %zu %s", path, lineno, qe.field,
                                    qe.what);
                goto out;
            }
            if (nf != cols) {
                rc = hpml_set_error(HPML_ERR_FORMAT, "%s:%zu: %zu fields, expected %zu", path,
                                    lineno, nf, cols);
                goto out;
            }
            for (j = 0; j < cols; j++) {
                rc = parse_field(path, lineno, j, fs[j], fl[j], want, reject_nonfinite,
                                 data + ((probe ? 0 : r) * cols + j) * ws);
                if (rc != 0)
                    goto out;
            }
            r++;
        }
    }
    if (probe) { /* cannot happen unless the file changed since the scan */
        rc = hpml_set_error(HPML_ERR_FORMAT,
                            "%s: %zu rows of %zu fields do not fit in its %lld bytes", path, rows,
                            cols, (long long)size);
        goto out;
    }
    out->dtype = want;
    out->rows = rows;
    out->cols = cols;
    out->row_offset = begin;
    out->total_rows = sc.rows;
    out->data = data;
    data = NULL;
out:
    if (have_scan)
        scan_free(&sc);
    fclose(f);
    free(line);
    free(fs);
    free(fl);
    hpml_free(data);
    return rc;
}

/* ---- writer --------------------------------------------------------------------- */

static int write_value(FILE *f, const unsigned char *p, hpml_dtype_t dt)
{
    switch (dt) {
    case HPML_F32: {
        float x;
        memcpy(&x, p, 4);
        return fprintf(f, "%.9g", (double)x);
    }
    case HPML_F64: {
        double x;
        memcpy(&x, p, 8);
        return fprintf(f, "%.17g", x);
    }
    case HPML_F16: {
        uint16_t x;
        memcpy(&x, p, 2);
        return fprintf(f, "%.9g", (double)hpml_f16_to_f32(x));
    }
    case HPML_BF16: {
        uint16_t x;
        memcpy(&x, p, 2);
        return fprintf(f, "%.9g", (double)hpml_bf16_to_f32(x));
    }
    case HPML_I8: {
        int8_t x;
        memcpy(&x, p, 1);
        return fprintf(f, "%d", x);
    }
    case HPML_U8: return fprintf(f, "%u", p[0]);
    case HPML_I32: {
        int32_t x;
        memcpy(&x, p, 4);
        return fprintf(f, "%" PRId32, x);
    }
    default: {
        int64_t x;
        memcpy(&x, p, 8);
        return fprintf(f, "%" PRId64, x);
    }
    }
}

int hpml_csv_write(const char *path, const void *data, hpml_dtype_t dtype, size_t rows, size_t cols,
                   const char *header)
{
    const unsigned char *p = data;
    size_t es = hpml_dtype_size(dtype), i, j;
    hpml__io_wfile_t w;
    int rc;

    if (path == NULL || es == 0 || (rows > 0 && cols > 0 && data == NULL))
        return hpml_set_error(HPML_ERR_INVAL, "hpml_csv_write: bad arguments");
    if (header != NULL && strpbrk(header, "\n\r") != NULL)
        return hpml_set_error(HPML_ERR_INVAL, "%s: the CSV header must be one line", path);
    if ((rc = hpml__io_wopen(&w, path)) != 0)
        return rc;
    if (header != NULL)
        fprintf(w.f, "%s\n", header);
    for (i = 0; i < rows && !ferror(w.f); i++) {
        for (j = 0; j < cols; j++) {
            if (j > 0)
                fputc(',', w.f);
            write_value(w.f, p + (i * cols + j) * es, dtype);
        }
        fputc('\n', w.f);
    }
    if (ferror(w.f)) {
        rc = hpml_set_error(HPML_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        hpml__io_wabort(&w);
        return rc;
    }
    return hpml__io_wcommit(&w);
}
