/*
 * hpml predict: class predictions of a saved model (hpml train --save) for the rows of
 * an image file. Runs on rank 0 (other ranks idle): one label per line on stdout, or an
 * .npy / .csv file of int32 labels with --output.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "opts.h"
#include "hpml/io.h"
#include "hpml/nn.h"

#define CMD "predict"

typedef struct {
    const char *file, *images, *output;
    size_t limit;
} opts_t;

#define OFF(field) offsetof(opts_t, field)
static const opt_t options[] = {
    {.name = "model-file",
     .letter = 'f',
     .kind = OPT_STRING,
     .off = OFF(file),
     .arg = "FILE",
     .help = "the model saved by 'hpml train --save'"},
    {.name = "images",
     .letter = 'i',
     .kind = OPT_STRING,
     .off = OFF(images),
     .arg = "FILE",
     .help = "the inputs"},
    {.name = "limit",
     .kind = OPT_SIZE,
     .off = OFF(limit),
     .arg = "N",
     .help = "only the first N rows",
     .min = 1,
     .max = 1LL << 40},
    {.name = "output",
     .letter = 'o',
     .kind = OPT_STRING,
     .off = OFF(output),
     .arg = "FILE",
     .help = "write int32 labels to FILE (.npy or .csv) instead of stdout"},
    {0},
};
#undef OFF

static const opt_cmd_t command = {
    .name = CMD,
    .usage = "Usage: hpml predict --model-file FILE --images FILE [options]\n\n"
             "Predicted class of each row (IDX or .npy images, scaled as in training).\n",
};

/* Rank 0 alone works, so a failure is its own: one line and exit 1, no MPI_Abort (whose
 * banner would bury the line). */
static int fail(const char *msg)
{
    fprintf(stderr, "%s %s: %s\n", cli_prog, CMD, msg);
    return CLI_EXIT_FAIL;
}

/* The predicted class of each of the n rows of x (raw pixels of stored type dt, scaled
 * and normalised here in place as in training) into pred. 0 or an hpml error. */
static int predict_rows(hpml_model_t *m, float *x, size_t n, hpml_dtype_t dt, float mean, float sd,
                        int32_t *pred)
{
    const size_t in = hpml_model_input_size(m), C = hpml_model_output_size(m);
    const float s = dt == HPML_U8 ? 1.0f / 255.0f : 1.0f;
    int err;

    for (size_t i = 0; i < n * in; i++)
        x[i] = (x[i] * s - mean) / sd;
    for (size_t i = 0; i < n; i += 1000) {
        size_t nb = n - i < 1000 ? n - i : 1000;
        const float *z;

        if ((err = hpml_model_forward(m, x + i * in, nb, 0, NULL, 0, &z)) != 0)
            return err;
        for (size_t r = 0; r < nb; r++) {
            size_t am = 0;

            for (size_t j = 1; j < C; j++)
                if (z[r * C + j] > z[r * C + am])
                    am = j;
            pred[i + r] = (int32_t)am;
        }
    }
    return 0;
}

/* The output set of --output: before any work, a name it cannot write or an input it
 * would destroy is refused. 0 or an hpml error. */
static int open_output(const opts_t *o, hpml_io_outset_t **os)
{
    int err;

    *os = NULL;
    if (o->output == NULL)
        return 0;
    if ((err = hpml_io_outset_create(os)) != 0 ||
        (err = hpml_io_outset_input(*os, "--model-file", o->file)) != 0 ||
        (err = hpml_io_outset_input(*os, "--images", o->images)) != 0 ||
        (err = hpml_io_outset_add(*os, o->output, "label")) != 0)
        return err;
    return hpml_io_outset_check(*os);
}

int cmd_predict(int argc, char **argv)
{
    opts_t o = {.limit = SIZE_MAX};
    const opt_set_t set = {options, &o};
    size_t rows, cols;
    hpml_dtype_t dt;
    hpml_array_t a = {0};
    hpml_model_t *m = NULL;
    hpml_io_outset_t *os = NULL;
    int32_t *pred = NULL;
    float mean, sd;
    int err, operand, status = CLI_EXIT_FAIL;

    if ((err = opts_parse(&command, &set, 1, argc, argv, &operand)) != 0)
        return err < 0 ? CLI_EXIT_OK : err;
    if (o.file == NULL || o.images == NULL)
        return cli_usage_error(CMD, "--model-file and --images are required");
    if (cli_rank() != 0)
        return CLI_EXIT_OK;
    hpml_blas_set_threads(1);
    if ((err = open_output(&o, &os)) != 0 || (err = hpml_model_load(o.file, &m, &mean, &sd)) != 0 ||
        (err = hpml_io_shape(o.images, HPML_FMT_AUTO, &rows, &cols, &dt)) != 0)
        goto out;
    if (cols != hpml_model_input_size(m)) {
        err = hpml_set_error(HPML_ERR_INVAL, "%s has %zu values per row but the model expects %zu",
                             o.images, cols, hpml_model_input_size(m));
        goto out;
    }
    if (rows > o.limit)
        rows = o.limit;
    if ((err = hpml_io_read_rows(o.images, HPML_FMT_AUTO, HPML_F32, 0, rows, 1, &a)) != 0)
        goto out;
    if ((pred = malloc((rows + 1) * sizeof(int32_t))) == NULL) {
        err = hpml_set_error(HPML_ERR_NOMEM, "out of memory for %zu predictions", rows);
        goto out;
    }
    if ((err = predict_rows(m, a.data, rows, dt, mean, sd, pred)) != 0)
        goto out;
    if (os != NULL) {
        if ((err = hpml_io_outset_write_nd(os, o.output, pred, HPML_I32, 1, &rows)) != 0 ||
            (err = hpml_io_outset_commit(os)) != 0)
            goto out;
    } else {
        for (size_t i = 0; i < rows; i++)
            printf("%d\n", (int)pred[i]);
    }
    status = CLI_EXIT_OK;
out:
    if (status != CLI_EXIT_OK)
        status = fail(hpml_last_error());
    hpml_io_outset_destroy(os);
    free(pred);
    hpml_array_free(&a);
    hpml_model_destroy(m);
    return status;
}
