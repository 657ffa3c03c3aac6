/*
 * Private to src/io: stored element types, a positioned reader over plain or gzip files,
 * the shared reader for dense binary arrays (.npy, IDX), element conversion and the
 * temp-file-then-rename writer.
 */
#ifndef HPML_IO_INTERNAL_H
#define HPML_IO_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "hpml/io.h"

/* Element types as stored in files (wider than hpml_dtype_t: NumPy and IDX have 16-bit
 * and unsigned 32/64-bit integers, and bool). */
typedef enum {
    IO_I8 = 0,
    IO_U8,
    IO_I16,
    IO_U16,
    IO_I32,
    IO_U32,
    IO_I64,
    IO_U64,
    IO_F16,
    IO_F32,
    IO_F64,
    IO_BOOL,
    IO_STYPE_COUNT
} hpml__io_stype_t;

typedef struct {
    hpml__io_stype_t type;
    int big_endian; /* byte order in the file (ignored for 1-byte types) */
} hpml__io_elem_t;

size_t hpml__io_stype_size(hpml__io_stype_t t);
const char *hpml__io_stype_name(hpml__io_stype_t t);
/* The hpml dtype reported by hpml_io_shape for a stored type: the narrowest hpml type
 * that holds every value (i16/u16 -> i32, u32/u64 -> i64, bool -> u8). */
hpml_dtype_t hpml__io_stype_dtype(hpml__io_stype_t t);
/* 1 for the dtypes readers can convert to. */
int hpml__io_want_ok(hpml_dtype_t want);

/*
 * Convert n stored elements at src (contiguous) to `want` at dst, writing element i at
 * dst + i*dst_stride elements. Integer targets require integral in-range values; float
 * targets reject values beyond their range; NaN/Inf fail if reject_nonfinite (or the
 * target is an integer). On failure returns HPML_ERR_NUMERIC or HPML_ERR_RANGE, sets
 * *bad to the index and writes "is NaN"-style text into why (no error message set:
 * the caller knows the file, row and column).
 */
int hpml__io_convert(void *dst, hpml_dtype_t want, size_t dst_stride, const void *src,
                     hpml__io_elem_t el, size_t n, int reject_nonfinite, size_t *bad, char *why,
                     size_t whylen);
/* 1 if converting el to want is a plain copy (same type, same byte order). */
int hpml__io_is_copy(hpml__io_elem_t el, hpml_dtype_t want);
/* Check n elements of want (f32/f64; others always pass) for NaN/Inf, as convert does. */
int hpml__io_check_finite(const void *p, hpml_dtype_t want, size_t n, size_t *bad, char *why,
                          size_t whylen);
/* Convert one double (CSV fields) with the same rules. */
int hpml__io_convert_double(void *dst, hpml_dtype_t want, double v, int reject_nonfinite, char *why,
                            size_t whylen);

/* A file read at byte offsets of its (uncompressed) content: plain files with pread,
 * gzip files with gzseek (forward seeks are cheap; backward restart decompression). */
typedef struct {
    const char *path;
    int fd;                   /* plain file, or -1 */
    void *gz;                 /* gzFile, or NULL */
    uint64_t size;            /* plain: file size; gzip: uncompressed size from the trailer */
    uint64_t file_size;       /* bytes in the file (compressed, for gzip) */
    const unsigned char *mem; /* a source in memory (hpml__io_src_mem), or NULL */
} hpml__io_src_t;

/* Open path for reading (O_CLOEXEC) when it is a regular file: a fd, or a negative
 * HPML_ERR_IO with a message that says when it is a directory, or a device or pipe (whose
 * size cannot be known: /dev/zero would be read forever). Every reader is checked by it. */
int hpml__io_open_regular(const char *path);
/* Open path; gzip is detected by its magic bytes. Errors set the message. */
int hpml__io_src_open(hpml__io_src_t *s, const char *path);
void hpml__io_src_close(hpml__io_src_t *s);
/* A source over len bytes in memory (borrowed), named path in messages; close is a no-op. */
void hpml__io_src_mem(hpml__io_src_t *s, const char *path, const void *buf, size_t len);
/* Read exactly len bytes at off; a short read is HPML_ERR_FORMAT ("truncated"). */
int hpml__io_src_read(hpml__io_src_t *s, uint64_t off, void *buf, size_t len, const char *what);

#define HPML_IO_MAX_DIMS 32

/* A dense binary array in a file, as parsed from its header. */
typedef struct {
    hpml__io_elem_t elem;
    int ndim;
    uint64_t dims[HPML_IO_MAX_DIMS];
    size_t rows, cols;    /* dims[0] and the product of the rest (1 for 0-D and 1-D) */
    int fortran;          /* column-major (NumPy fortran_order) */
    uint64_t data_offset; /* where the elements start */
} hpml__io_dense_t;

/* Set rows/cols from dims with overflow checks, and check the data size against
 * `avail` bytes after data_offset (exact match required). */
int hpml__io_dense_finish(const char *path, hpml__io_dense_t *h, uint64_t avail);
/* "(100, 3)" or "(100,)" like Python. */
void hpml__io_shape_str(const hpml__io_dense_t *h, char *buf, size_t len);
/* Read rows [begin, end) of a dense array converted to want. */
int hpml__io_dense_read(hpml__io_src_t *s, const hpml__io_dense_t *h, hpml_dtype_t want,
                        size_t begin, size_t end, int reject_nonfinite, hpml_array_t *out);

/* The bytes np.save writes before the data of a C-order array of dtype descr ("<f4",
 * "<U12"), ndim dims of shape, es bytes per element: magic, version, length and the
 * header padded to a multiple of 64. Into out (cap bytes, HPML_NPY_HEADER_MAX is enough),
 * *len its bytes, *count the elements. HPML_ERR_INVAL (no message) when the shape
 * overflows. */
#define HPML_NPY_HEADER_MAX 1280
int hpml__npy_header_make(const char *descr, int ndim, const size_t *shape, size_t es,
                          unsigned char *out, size_t cap, size_t *len, size_t *count);

/* Format back ends. */
int hpml__npy_header(hpml__io_src_t *s, hpml__io_dense_t *h);
int hpml__idx_header(hpml__io_src_t *s, hpml__io_dense_t *h);
int hpml__csv_shape(const char *path, size_t *rows, size_t *cols);
/* Rows [begin, end), or, if nranks > 0, rank's block of hpml_io_partition (one scan). */
int hpml__csv_read(const char *path, hpml_dtype_t want, size_t begin, size_t end, int rank,
                   int nranks, int reject_nonfinite, hpml_array_t *out);

/* Writing through a temporary file in the same folder: open gives a FILE* on a
 * mkstemp name; commit flushes, fsyncs, renames over path and fsyncs the folder;
 * abort closes and removes the temporary. Either of commit/abort must be called. */
typedef struct {
    const char *path;
    char *tmp;
    FILE *f;
} hpml__io_wfile_t;

int hpml__io_wopen(hpml__io_wfile_t *w, const char *path);
int hpml__io_wcommit(hpml__io_wfile_t *w);
void hpml__io_wabort(hpml__io_wfile_t *w);

/* ---- .npz: a zip archive of .npy files (npz.c) ---- */

/* One member: its name without ".npy", and its .npy bytes (uncompressed). */
typedef struct {
    char *name;
    unsigned char *data;
    size_t len;
} hpml__npz_entry_t;

typedef struct {
    const char *path;
    int n;
    hpml__npz_entry_t *e;
} hpml__npz_t;

/* Read an .npz as np.savez and np.savez_compressed write it (stored or deflated members,
 * ZIP64 extra fields and end records), every member's CRC-32 checked. HPML_ERR_FORMAT
 * with a message naming path for anything else; close frees (also after a failure). */
int hpml__npz_open(hpml__npz_t *z, const char *path);
void hpml__npz_close(hpml__npz_t *z);
const hpml__npz_entry_t *hpml__npz_find(const hpml__npz_t *z, const char *name);
/* A numeric member as float32 (any dtype .npy readers take; NaN/Inf refused): *out
 * (hpml_array_free), its shape in h. */
int hpml__npz_read_f32(const hpml__npz_t *z, const hpml__npz_entry_t *e, hpml__io_dense_t *h,
                       hpml_array_t *out);
/* A 0-d string member ('<U' or '|S', ASCII) into buf (cap bytes with the NUL). */
int hpml__npz_read_str(const hpml__npz_t *z, const hpml__npz_entry_t *e, char *buf, size_t cap);

/* Writing: members are added in memory, then commit writes the archive (stored members,
 * as np.savez) through a temporary file and rename. */
typedef struct {
    unsigned char *p, *cd; /* the local records and data; the central directory */
    size_t len, cap, cdlen, cdcap;
    unsigned n;
    int err;
} hpml__npz_writer_t;

/* A C-order array member: dtype HPML_F32 or HPML_I32. */
void hpml__npz_add(hpml__npz_writer_t *w, const char *name, hpml_dtype_t dtype, int ndim,
                   const size_t *shape, const void *data);
/* A 0-d str member ('<U', what str() of the loaded value gives back). */
void hpml__npz_add_str(hpml__npz_writer_t *w, const char *name, const char *text);
/* Write the archive to path (or the first error of the adds); frees the writer. */
int hpml__npz_commit(hpml__npz_writer_t *w, const char *path);
void hpml__npz_free(hpml__npz_writer_t *w);

#endif /* HPML_IO_INTERNAL_H */
