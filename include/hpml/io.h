/*
 * hpml io: dataset readers and writers. .npy (NumPy), IDX (MNIST family, gzip or not),
 * CSV. Arrays are 2-D row-major blocks of rows: a file of shape (n, d1, d2, ...) is read
 * as n rows of d1*d2*... columns (an IDX image file 60000x28x28 is 60000 rows x 784).
 *
 * Readers read only the requested block of rows, never the whole file on every rank.
 * No MPI here: the caller says which rows it wants (see hpml_io_partition).
 * Errors return HPML_ERR_IO (cannot open/read), HPML_ERR_FORMAT (malformed file),
 * HPML_ERR_UNSUPPORTED (e.g. a complex .npy dtype), HPML_ERR_INVAL, or for conversions
 * HPML_ERR_RANGE (value does not fit `want`) and HPML_ERR_NUMERIC (NaN/Inf), with a
 * detail message naming the file and the problem in hpml_last_error(); on error the
 * output array is left empty. Writers write to a temporary name in the same folder, fsync,
 * then rename; on failure the old file is untouched. All functions are thread-safe (no
 * shared state) and none is collective. Formats and rules: docs/io.md.
 */
#ifndef HPML_IO_H
#define HPML_IO_H

#include <stddef.h>
#include <stdio.h>

#include "hpml/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { HPML_FMT_AUTO = 0, HPML_FMT_NPY, HPML_FMT_IDX, HPML_FMT_CSV } hpml_format_t;

/* A block of rows of a 2-D array; data is hpml_malloc'ed, owned by the array. */
typedef struct hpml_array {
    hpml_dtype_t dtype; /* element type of data */
    size_t rows;        /* rows in this block */
    size_t cols;        /* columns (product of the trailing dimensions) */
    size_t row_offset;  /* index of the first row of this block in the file */
    size_t total_rows;  /* rows in the whole file */
    void *data;         /* rows*cols elements, row-major */
} hpml_array_t;

/* Rows [*begin, *end) of `rows` for `rank` of `nranks`: contiguous blocks, sizes
 * differing by at most one, the first (rows % nranks) ranks one larger. */
void hpml_io_partition(size_t rows, int rank, int nranks, size_t *begin, size_t *end);

/* Shape of a file (format from the extension, or `fmt`): total rows, columns, and the
 * stored element type. */
int hpml_io_shape(const char *path, hpml_format_t fmt, size_t *rows, size_t *cols,
                  hpml_dtype_t *stored);

/* Read rows [begin, end) converted to `want` (HPML_F32, HPML_F64, HPML_I32, HPML_I64 or
 * HPML_U8). Fails on NaN/Inf in float data only if `reject_nonfinite` is set. */
int hpml_io_read_rows(const char *path, hpml_format_t fmt, hpml_dtype_t want, size_t begin,
                      size_t end, int reject_nonfinite, hpml_array_t *out);

/* Read this rank's block (hpml_io_partition of the file's rows). */
int hpml_io_read_block(const char *path, hpml_format_t fmt, hpml_dtype_t want, int rank, int nranks,
                       int reject_nonfinite, hpml_array_t *out);

/* Do paths a and b name the same file: the same file (device and inode) where both
 * exist, however spelled or linked; otherwise the same name in the same folder. 1 or 0
 * (0 for NULL or empty paths). For refusing an output that would overwrite an input. */
int hpml_io_same_file(const char *a, const char *b);

/*
 * A new temporary next to path, in its folder (so that rename(2) onto path is atomic), for
 * a result written there and renamed when complete: "<path>.tmp.<pid>.XXXXXX", a file
 * (mkstemp: mode 0600, returns its open descriptor) or with folder set a folder (mkdtemp:
 * returns 0); the name goes to tmp[len]. Temporaries of path left by an earlier run that
 * was killed before its rename (their process gone, older than this one) are removed
 * first. A negative HPML_ERR_IO with a message (tmp then "", errno kept) otherwise. Not
 * collective.
 */
int hpml_io_temp_next_to(const char *path, int folder, char *tmp, size_t len);

/* ---- writing results -------------------------------------------------------------- */

/* Can a result be written to path and renamed into place: not a folder, pipe or device,
 * and a temporary can be made next to it? 0, or HPML_ERR_IO naming path ("<path>: is a
 * directory", "<path>: cannot create a file there: <why>"). For checking an output before
 * a long run. Not collective. */
int hpml_io_writable(const char *path);

/* One file written in place of path: *f is a stream on a temporary next to it (0644, or
 * the old file's mode); commit flushes, fsyncs, renames it onto path and fsyncs the
 * folder; abort removes it. Both free w (abort is NULL-safe). 0 or HPML_ERR_IO naming path. */
typedef struct hpml_io_file hpml_io_file_t;
int hpml_io_file_open(const char *path, hpml_io_file_t **w, FILE **f);
int hpml_io_file_commit(hpml_io_file_t *w);
void hpml_io_file_abort(hpml_io_file_t *w);

/*
 * An output set: the files one run writes, replaced together or not at all.
 *   create; add each output with the name of what its columns hold (its CSV header), and
 *   input_ each input (what: how the user named it, "--data"); check before the run: no
 *   output an input (however spelled or linked), every output .npy or .csv, none named
 *   twice, each writable; write each (.npy, or CSV for a .csv name) complete into a
 *   temporary folder next to it; commit renames them all into place (a rename failing
 *   midway says which are replaced already); destroy removes what is not committed (call
 *   it on every way out).
 * Paths are copied. Errors: HPML_ERR_* naming the path. Not collective, not thread-safe.
 */
typedef struct hpml_io_outset hpml_io_outset_t;
int hpml_io_outset_create(hpml_io_outset_t **out);
void hpml_io_outset_destroy(hpml_io_outset_t *os);
int hpml_io_outset_add(hpml_io_outset_t *os, const char *path, const char *name);
int hpml_io_outset_input(hpml_io_outset_t *os, const char *what, const char *path);
int hpml_io_outset_check(const hpml_io_outset_t *os);
int hpml_io_outset_write(hpml_io_outset_t *os, const char *path, const void *data,
                         hpml_dtype_t dtype, size_t rows, size_t cols);
/* The same for an array of any shape (ndim 0..32, C order): a vector is {n}, a scalar
 * ndim 0. .npy keeps the shape; CSV has shape[0] rows (1 for a scalar), the rest flattened.
 * Every CSV output starts with one header line: a name containing a comma is the whole
 * line; otherwise a vector, a scalar or a one-column matrix is headed by the name, the
 * columns of a wider matrix by the name and the column's index ("x0,x1,x2"). */
int hpml_io_outset_write_nd(hpml_io_outset_t *os, const char *path, const void *data,
                            hpml_dtype_t dtype, int ndim, const size_t *shape);
int hpml_io_outset_commit(hpml_io_outset_t *os);

/* Free the data of an array (the struct itself is the caller's); NULL-safe. */
void hpml_array_free(hpml_array_t *a);

/* Write a rows x cols array as .npy (C order) / CSV (optional header line, NULL for
 * none), via a temporary file and rename. dtype: f32 f64 f16 i8 u8 i32 i64 (npy), any
 * (CSV; floats printed with enough digits to read back exactly). */
int hpml_npy_write(const char *path, const void *data, hpml_dtype_t dtype, size_t rows,
                   size_t cols);
/* Write an N-D array (ndim 0..32, C order), e.g. a 1-D label vector: shape = {n}.
 * dtype: f32 f64 f16 i8 u8 i32 i64. The file is byte-identical to np.save's. */
int hpml_npy_write_nd(const char *path, const void *data, hpml_dtype_t dtype, int ndim,
                      const size_t *shape);
int hpml_csv_write(const char *path, const void *data, hpml_dtype_t dtype, size_t rows, size_t cols,
                   const char *header);

#ifdef __cplusplus
}
#endif

#endif /* HPML_IO_H */
