/*
 * Helpers of the fuzz targets: the temporary folder their inputs are written to, the
 * contract checks, and a reader driver shared by the .npy, IDX and CSV targets.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz/common.h"

/* Reads of more elements than this are cut to fewer rows: a gzip file can claim a
 * thousand times its size, and a slow input only slows the fuzzer down. */
#define MAX_ELEMS ((size_t)1 << 20)

static char dir[256];
static char paths[16][320];
static int npaths;

static void remove_dir(void)
{
    for (int i = 0; i < npaths; i++)
        unlink(paths[i]);
    rmdir(dir);
}

/* A folder of this process on a tmpfs: inputs never touch a disk, and the readers get a
 * regular file, as they require. */
static void make_dir(void)
{
    const char *bases[3] = {"/dev/shm", getenv("TMPDIR"), "/tmp"};

    for (int i = 0; i < 3 && dir[0] == '\0'; i++) {
        if (bases[i] == NULL || *bases[i] == '\0')
            continue;
        snprintf(dir, sizeof(dir), "%s/hpml-fuzz-XXXXXX", bases[i]);
        if (mkdtemp(dir) == NULL)
            dir[0] = '\0';
    }
    if (dir[0] == '\0') {
        fprintf(stderr, "fuzz: cannot make a temporary folder: %s\n", strerror(errno));
        abort();
    }
    atexit(remove_dir);
}

const char *fuzz_file(const char *name, const void *data, size_t size)
{
    char path[320];
    const char *p = data;
    int fd, i;

    if (dir[0] == '\0')
        make_dir();
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    for (i = 0; i < npaths && strcmp(paths[i], path) != 0; i++)
        ;
    if (i == npaths) {
        if (npaths == (int)(sizeof(paths) / sizeof(paths[0])))
            fuzz_fail("more than 16 file names", __FILE__, __LINE__);
        snprintf(paths[npaths++], sizeof(paths[0]), "%s", path);
    }
    fd = open(paths[i], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        fuzz_fail("open of the input file", __FILE__, __LINE__);
    while (size > 0) {
        ssize_t n = write(fd, p, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            fuzz_fail("write of the input file", __FILE__, __LINE__);
        p += n;
        size -= (size_t)n;
    }
    close(fd);
    return paths[i];
}

void fuzz_fail(const char *what, const char *file, int line)
{
    fprintf(stderr, "%s:%d: fuzz check failed: %s\n  last error: '%s'\n", file, line, what,
            hpml_last_error());
    abort();
}

void fuzz_check_error(int rc, const char *path)
{
    const char *msg = hpml_last_error(), *base = strrchr(path, '/');

    FUZZ_CHECK(rc < 0 && rc >= HPML_ERR_STATE);
    FUZZ_CHECK(strstr(msg, base != NULL ? base + 1 : path) != NULL);
    for (const char *p = msg; *p != '\0'; p++) /* one line, no control characters */
        FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
}

/* Element i of a read array as a double (every type a reader gives is exact in one,
 * except i64 beyond 2^53, rounded as the f64 read rounds it). */
static double value(const hpml_array_t *a, size_t i)
{
    switch (a->dtype) {
    case HPML_F32: return ((const float *)a->data)[i];
    case HPML_F64: return ((const double *)a->data)[i];
    case HPML_I32: return ((const int32_t *)a->data)[i];
    case HPML_I64: return (double)((const int64_t *)a->data)[i];
    case HPML_U8: return ((const uint8_t *)a->data)[i];
    case HPML_I8: return ((const int8_t *)a->data)[i];
    default: fuzz_fail("unexpected dtype", __FILE__, __LINE__);
    }
}

/* A read of rows [begin, end) that succeeded has them all, and one that failed has no
 * data and a message naming the file. */
static int checked_read(const char *path, hpml_format_t fmt, hpml_dtype_t want, size_t begin,
                        size_t end, int reject, size_t cols, hpml_array_t *a)
{
    int rc;

    hpml_clear_error();
    rc = hpml_io_read_rows(path, fmt, want, begin, end, reject, a);
    if (rc != 0) {
        fuzz_check_error(rc, path);
        FUZZ_CHECK(a->data == NULL && a->rows == 0);
        return rc;
    }
    FUZZ_CHECK(a->data != NULL && a->dtype == want && a->rows == end - begin && a->cols == cols &&
               a->row_offset == begin);
    return 0;
}

void fuzz_read_all(const char *path, hpml_format_t fmt)
{
    static const hpml_dtype_t wants[] = {HPML_F32, HPML_I64, HPML_I32, HPML_U8, HPML_I8};
    size_t rows = 0, cols = 0, end, n, b, e;
    hpml_dtype_t stored;
    hpml_array_t whole = {0}, a = {0};
    int rc, whole_ok;

    hpml_clear_error();
    rc = hpml_io_shape(path, fmt, &rows, &cols, &stored);
    if (rc != 0) {
        fuzz_check_error(rc, path);
        /* What has no shape cannot be read either. */
        rc = checked_read(path, fmt, HPML_F64, 0, 0, 0, 0, &a);
        FUZZ_CHECK(rc != 0);
        return;
    }
    end = cols == 0 || rows <= MAX_ELEMS / cols ? rows : MAX_ELEMS / cols;
    n = end * cols;
    whole_ok = checked_read(path, fmt, HPML_F64, 0, end, 0, cols, &whole) == 0;
    for (size_t k = 0; k < sizeof(wants) / sizeof(wants[0]); k++) {
        if (checked_read(path, fmt, wants[k], 0, end, 0, cols, &a) != 0)
            continue;
        /* Every conversion agrees with the f64 one (NaN with NaN). */
        FUZZ_CHECK(whole_ok);
        for (size_t i = 0; i < n; i++) {
            double d = ((const double *)whole.data)[i], v = value(&a, i);
            if (wants[k] == HPML_F32)
                FUZZ_CHECK((float)d == (float)v || (isnan(d) && isnan(v)));
            else
                FUZZ_CHECK(d == v);
        }
        hpml_array_free(&a);
    }
    /* reject_nonfinite: either an error or only finite values. */
    if (checked_read(path, fmt, HPML_F32, 0, end, 1, cols, &a) == 0) {
        for (size_t i = 0; i < n; i++)
            FUZZ_CHECK(isfinite(value(&a, i)));
        hpml_array_free(&a);
    }
    /* Blocks of 2 and 3 ranks: each is the same as its rows of the whole read. */
    for (int p = 2; p <= 3 && end == rows; p++) {
        for (int r = 0; r < p; r++) {
            hpml_io_partition(rows, r, p, &b, &e);
            hpml_clear_error();
            rc = hpml_io_read_block(path, fmt, HPML_F64, r, p, 0, &a);
            if (rc != 0) {
                fuzz_check_error(rc, path);
                FUZZ_CHECK(!whole_ok && a.data == NULL);
                continue;
            }
            FUZZ_CHECK(a.data != NULL && a.row_offset == b && a.rows == e - b && a.cols == cols &&
                       a.total_rows == rows);
            if (whole_ok)
                FUZZ_CHECK(memcmp(a.data, (const double *)whole.data + b * cols,
                                  (e - b) * cols * sizeof(double)) == 0);
            hpml_array_free(&a);
        }
    }
    /* Rows past the end are the caller's error. */
    if (checked_read(path, fmt, HPML_F64, rows / 2, rows + 1, 0, cols, &a) == 0)
        fuzz_fail("rows past the end were read", __FILE__, __LINE__);
    hpml_array_free(&whole);
}

void fuzz_detect(const char *path)
{
    size_t rows = 0, cols = 0;
    hpml_array_t a = {0};
    int rc;

    hpml_clear_error();
    rc = hpml_io_shape(path, HPML_FMT_AUTO, &rows, &cols, NULL);
    if (rc != 0) {
        fuzz_check_error(rc, path);
        return;
    }
    if (rows > 0 && checked_read(path, HPML_FMT_AUTO, HPML_F64, 0, 1, 0, cols, &a) == 0)
        hpml_array_free(&a);
}
