/* CSV reader and writer (placeholder until the real reader lands). */
#include "io/io_internal.h"

int hpml__csv_shape(const char *path, size_t *rows, size_t *cols)
{
    (void)rows;
    (void)cols;
    return hpml_set_error(HPML_ERR_UNSUPPORTED, "%s: CSV reading is not implemented yet", path);
}

int hpml__csv_read(const char *path, hpml_dtype_t want, size_t begin, size_t end,
                   int reject_nonfinite, hpml_array_t *out)
{
    (void)want;
    (void)begin;
    (void)end;
    (void)reject_nonfinite;
    (void)out;
    return hpml_set_error(HPML_ERR_UNSUPPORTED, "%s: CSV reading is not implemented yet", path);
}

int hpml_csv_write(const char *path, const void *data, hpml_dtype_t dtype, size_t rows,
                   size_t cols, const char *header)
{
    (void)data;
    (void)dtype;
    (void)rows;
    (void)cols;
    (void)header;
    return hpml_set_error(HPML_ERR_UNSUPPORTED, "%s: CSV writing is not implemented yet", path);
}
