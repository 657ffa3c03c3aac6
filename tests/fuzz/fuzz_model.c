/*
 * Fuzz target: model files written by `hpml train --save` (src/nn/modelfile.c). Each
 * input is loaded as it is, and again with its last four bytes replaced by the CRC32 of
 * the rest, so mutations get past the checksum to the header, the spec and the
 * parameters. A model that loads is finite, runs forward, and saves to a file that loads
 * back to the same parameters.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fuzz/common.h"
#include "hpml/nn.h"

/* Models above this size are loaded but not run. */
#define MAX_WORK ((size_t)1 << 18)

static void load_one(const char *path)
{
    hpml_model_t *m = NULL, *m2 = NULL;
    float mean = 0, sd = 0, mean2, sd2;
    const float *logits, *p;
    float *x;
    size_t n, in;
    const char *copy;
    int rc;

    hpml_clear_error();
    rc = hpml_model_load(path, &m, &mean, &sd);
    if (rc != 0) {
        fuzz_check_error(rc, path);
        FUZZ_CHECK(m == NULL);
        return;
    }
    FUZZ_CHECK(m != NULL && isfinite(mean) && isfinite(sd));
    n = hpml_model_num_params(m);
    p = hpml_model_params(m);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(isfinite(p[i]));
    in = hpml_model_input_size(m);
    if (in <= MAX_WORK && hpml_model_flops(m) <= (double)MAX_WORK * 64) {
        x = calloc(in, sizeof(float));
        FUZZ_CHECK(x != NULL);
        FUZZ_CHECK(hpml_model_forward(m, x, 1, 0, NULL, 0, &logits) == 0);
        free(x);
    }
    /* What loads saves to a file that loads to the same model. */
    copy = fuzz_file("copy.hpml", "", 0);
    FUZZ_CHECK(hpml_model_save(m, mean, sd, copy) == 0);
    hpml_clear_error();
    rc = hpml_model_load(copy, &m2, &mean2, &sd2);
    FUZZ_CHECK(rc == 0);
    FUZZ_CHECK(mean2 == mean && sd2 == sd && hpml_model_num_params(m2) == n);
    FUZZ_CHECK(memcmp(hpml_model_params(m2), p, n * sizeof(float)) == 0);
    FUZZ_CHECK(strcmp(hpml_model_spec(m2), hpml_model_spec(m)) == 0);
    hpml_model_destroy(m2);
    hpml_model_destroy(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *fixed;
    uint32_t crc;

    load_one(fuzz_file("in.hpml", data, size));
    if (size < 4)
        return 0;
    fixed = malloc(size);
    FUZZ_CHECK(fixed != NULL);
    memcpy(fixed, data, size - 4);
    crc = (uint32_t)crc32(0, fixed, (uInt)(size - 4));
    memcpy(fixed + size - 4, &crc, 4); /* little-endian, as the files are */
    if (memcmp(fixed, data, size) != 0)
        load_one(fuzz_file("fixed.hpml", fixed, size));
    free(fixed);
    return 0;
}
