/*
 * Fuzz target: training checkpoints (src/nn/checkpoint.c, the format of docs/nn.md). Each
 * input is decoded for a small model with SGD (one moment) and with Adam (two), as it is
 * and again with its last four bytes replaced by the CRC32 of the rest, so mutations get
 * past the checksum to the fields. A checkpoint that decodes has finite sums, encodes back
 * to the very same bytes, and is refused by the run check when its run differs; one that
 * does not leaves a one-line message and nothing to free.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fuzz/common.h"
#include "hpml/nn.h"
#include "nn/nn_internal.h"

/* The model of the seed corpus (tests/fuzz/make-corpus.sh): 1x2x2 samples. */
#define SPEC "dense 3 relu | dense 2"

static void decode_one(const unsigned char *data, size_t size, hpml_opt_kind_t kind)
{
    hpml_opt_config_t oc;
    hpml_model_t *m = NULL;
    hpml_optim_t *o = NULL;
    nn_ckpt_t st, other;
    nn_buf_t b = {0};
    int rc;

    hpml_opt_config_default(&oc);
    oc.kind = kind;
    FUZZ_CHECK(hpml_model_create(SPEC, 1, 2, 2, &m) == 0);
    FUZZ_CHECK(hpml_optim_create(&oc, hpml_model_num_params(m), &o) == 0);
    memset(&st, 0, sizeof(st));
    hpml_clear_error();
    rc = hpml__ckpt_decode("fuzz.ckpt", data, size, m, o, &st);
    if (rc != 0) {
        fuzz_check_error(rc, "fuzz.ckpt");
        FUZZ_CHECK(st.rank_sums == NULL);
        goto out;
    }
    FUZZ_CHECK(st.nranks > 0 && st.rank_sums != NULL);
    for (size_t i = 0; i < 3 * (size_t)st.nranks; i++)
        FUZZ_CHECK(isfinite(st.rank_sums[i]));
    /* What decodes encodes to the same bytes: the format has one spelling of a state. */
    FUZZ_CHECK(hpml__ckpt_encode(m, o, &st, &b) == 0);
    FUZZ_CHECK(b.len == size && memcmp(b.p, data, size) == 0);
    /* A run of another size, batch, layout or optimizer is refused, with a message. */
    other = st;
    other.samples = st.samples + 1;
    hpml_clear_error();
    rc = hpml__ckpt_check_run("fuzz.ckpt", &st, &other);
    FUZZ_CHECK(rc != 0);
    fuzz_check_error(rc, "fuzz.ckpt");
    FUZZ_CHECK(hpml__ckpt_check_run("fuzz.ckpt", &st, &st) == 0);
out:
    free(st.rank_sums);
    free(b.p);
    hpml_optim_destroy(o);
    hpml_model_destroy(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *fixed;
    uint32_t crc;

    decode_one(data, size, HPML_OPT_SGD);
    decode_one(data, size, HPML_OPT_ADAM);
    if (size < 8)
        return 0;
    /* The same bytes with a checksum that holds. */
    fixed = malloc(size);
    FUZZ_CHECK(fixed != NULL);
    memcpy(fixed, data, size);
    crc = (uint32_t)crc32(0, fixed, (uInt)(size - 4));
    memcpy(fixed + size - 4, &crc, 4);
    decode_one(fixed, size, HPML_OPT_SGD);
    decode_one(fixed, size, HPML_OPT_ADAM);
    free(fixed);
    return 0;
}
