/*
 * Fuzz target: the model spec text (src/nn/spec.c), e.g. "conv 6 5x5 pad2 relu | pool 2 |
 * dense 10" or a preset name ("lenet"), stacked on a few input shapes. A spec that parses
 * gives a canonical form that parses to itself; one small enough is built and run forward
 * and backward on two samples, so a wrong shape shows as an out-of-bounds access.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz/common.h"
#include "nn/nn_internal.h"

/* Models above these sizes are parsed but not built: parsing is the target. */
#define MAX_PARAMS ((size_t)1 << 18)
#define MAX_ACT    ((size_t)1 << 16)

static void run_model(const char *spec, int c, int h, int w, size_t nparams)
{
    hpml_model_t *m = NULL;
    float *x = NULL;
    const float *logits;
    int32_t labels[2] = {0, 0};
    double loss;
    size_t correct, in;
    char desc[4096];
    int rc;

    hpml_clear_error();
    rc = hpml_model_create(spec, c, h, w, &m);
    FUZZ_CHECK(rc == 0);
    FUZZ_CHECK(hpml_model_num_params(m) == nparams);
    hpml_model_init(m, 1);
    hpml_model_describe(m, desc, sizeof(desc));
    in = hpml_model_input_size(m);
    x = calloc(2 * in, sizeof(float));
    FUZZ_CHECK(x != NULL);
    for (size_t i = 0; i < 2 * in; i++)
        x[i] = (float)(i % 7) - 3.0f;
    labels[1] = (int32_t)(hpml_model_output_size(m) - 1);
    FUZZ_CHECK(hpml_model_forward(m, x, 2, 1, NULL, 7, &logits) == 0);
    FUZZ_CHECK(hpml_model_backward(m, labels, 0.5f, NULL, NULL, &loss, &correct) == 0);
    FUZZ_CHECK(correct <= 2);
    free(x);
    hpml_model_destroy(m);
}

static void try_shape(const char *spec, int c, int h, int w)
{
    nn_layer_t *layers = NULL, *again = NULL;
    char *canon = NULL, *canon2 = NULL;
    int n = 0, n2 = 0, rc;
    size_t nparams = 0, act = (size_t)c * h * w;

    hpml_clear_error();
    rc = hpml__nn_parse(spec, c, h, w, &layers, &n, &canon);
    if (rc != 0) {
        FUZZ_CHECK(rc == HPML_ERR_FORMAT || rc == HPML_ERR_NOMEM);
        FUZZ_CHECK(strncmp(hpml_last_error(), "model spec", 10) == 0);
        for (const char *p = hpml_last_error(); *p != '\0'; p++)
            FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
        FUZZ_CHECK(layers == NULL && canon == NULL);
        return;
    }
    FUZZ_CHECK(n > 0 && layers != NULL && canon != NULL);
    for (int i = 0; i < n; i++) {
        const nn_layer_t *l = &layers[i];
        FUZZ_CHECK(l->out_c > 0 && l->out_h > 0 && l->out_w > 0);
        FUZZ_CHECK(l->out_size == (size_t)l->out_c * l->out_h * l->out_w);
        FUZZ_CHECK(l->in_size == (size_t)l->in_c * l->in_h * l->in_w);
        FUZZ_CHECK(i == 0 || l->in_size == layers[i - 1].out_size);
        nparams += l->nw + l->nb;
        if (l->out_size > act)
            act = l->out_size;
        if (l->kind == NN_CONV && l->nw / l->out_c * l->out_h * l->out_w > act)
            act = l->nw / l->out_c * l->out_h * l->out_w; /* its im2col buffer */
    }
    /* The canonical form (saved in model files) means the same model. */
    rc = hpml__nn_parse(canon, c, h, w, &again, &n2, &canon2);
    FUZZ_CHECK(rc == 0);
    FUZZ_CHECK(n2 == n && strcmp(canon, canon2) == 0);
    for (int i = 0; i < n; i++)
        FUZZ_CHECK(again[i].kind == layers[i].kind && again[i].out_size == layers[i].out_size &&
                   again[i].nw == layers[i].nw && again[i].relu == layers[i].relu);
    free(again);
    free(canon2);
    free(layers);
    free(canon);
    if (nparams <= MAX_PARAMS && act <= MAX_ACT)
        run_model(spec, c, h, w, nparams);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    const char *spec;

    FUZZ_CHECK(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    spec = hpml_model_preset(text);
    try_shape(spec, 1, 28, 28);
    try_shape(spec, 3, 8, 8);
    try_shape(spec, 1, 1, 5);
    free(text);
    return 0;
}
