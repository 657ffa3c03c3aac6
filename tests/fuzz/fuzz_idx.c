/*
 * Fuzz target: IDX files (src/io/idx.c), plain and gzip-compressed. The input is read as
 * it is (so gzip seeds reach zlib and the trailer check), and an input that is not gzip
 * is also compressed here and read again, so every mutation of a plain header reaches
 * the gzip path too.
 */
#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>

#include "fuzz/common.h"

/* src as a gzip member in a malloc'ed buffer (windowBits 16 + 15: gzip wrapper). */
static unsigned char *gzip(const uint8_t *src, size_t n, size_t *out_len)
{
    z_stream z = {0};
    unsigned char *out;
    uLong cap;

    if (deflateInit2(&z, 6, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    cap = deflateBound(&z, (uLong)n);
    out = malloc(cap);
    if (out != NULL) {
        z.next_in = (Bytef *)(uintptr_t)src;
        z.avail_in = (uInt)n;
        z.next_out = out;
        z.avail_out = (uInt)cap;
        if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
            free(out);
            out = NULL;
        }
        *out_len = z.total_out;
    }
    deflateEnd(&z);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("in-idx3-ubyte", data, size);
    unsigned char *gz;
    size_t gz_len = 0;

    fuzz_read_all(path, HPML_FMT_IDX);
    fuzz_detect(path);
    if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b)
        return 0;
    gz = gzip(data, size, &gz_len);
    if (gz != NULL) {
        fuzz_read_all(fuzz_file("in-idx3-ubyte.gz", gz, gz_len), HPML_FMT_AUTO);
        free(gz);
    }
    return 0;
}
