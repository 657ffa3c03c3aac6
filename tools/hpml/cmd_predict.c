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

int cmd_predict(int argc, char **argv)
{
    opts_t o = {.limit = SIZE_MAX};
    const opt_set_t set = {options, &o};
    const char *file, *images, *output;
    size_t limit, rows, cols, in, C;
    hpml_dtype_t dt;
    hpml_array_t a = {0};
    hpml_model_t *m = NULL;
    int32_t *pred = NULL;
    float mean, sd;
    int err, operand, status = CLI_EXIT_FAIL;

    if ((err = opts_parse(&command, &set, 1, argc, argv, &operand)) != 0)
        return err < 0 ? CLI_EXIT_OK : err;
    file = o.file, images = o.images, output = o.output, limit = o.limit;
    if (file == NULL || images == NULL)
        return cli_usage_error(CMD, "--model-file and --images are required");
    if (cli_rank() != 0)
        return CLI_EXIT_OK;
    if (output != NULL) { /* before any work: a name it cannot write, an input it would destroy */
        const cli_path_t inputs[] = {{"--model-file", file}, {"--images", images}};
        char why[9000];

        if (cli_out_format(output, why, sizeof(why)) != 0 ||
            cli_clobbers(output, inputs, 2, why, sizeof(why)) != 0)
            return fail(why);
    }
    hpml_blas_set_threads(1);
    if ((err = hpml_model_load(file, &m, &mean, &sd)) != 0 ||
        (err = hpml_io_shape(images, HPML_FMT_AUTO, &rows, &cols, &dt)) != 0) {
        status = fail(hpml_last_error());
        goto out;
    }
    in = hpml_model_input_size(m);
    C = hpml_model_output_size(m);
    if (cols != in) {
        char msg[1200];

        snprintf(msg, sizeof(msg), "%s has %zu values per row but the model expects %zu", images,
                 cols, in);
        status = fail(msg);
        goto out;
    }
    if (rows > limit)
        rows = limit;
    if ((err = hpml_io_read_rows(images, HPML_FMT_AUTO, HPML_F32, 0, rows, 1, &a)) != 0) {
        status = fail(hpml_last_error());
        goto out;
    }
    pred = malloc((rows + 1) * sizeof(int32_t));
    if (pred == NULL) {
        status = fail("out of memory");
        goto out;
    }
    {
        float *x = a.data, s = dt == HPML_U8 ? 1.0f / 255.0f : 1.0f;
        for (size_t i = 0; i < rows * in; i++)
            x[i] = (x[i] * s - mean) / sd;
        for (size_t i = 0; i < rows; i += 1000) {
            size_t nb = rows - i < 1000 ? rows - i : 1000;
            const float *z;
            if ((err = hpml_model_forward(m, x + i * in, nb, 0, NULL, 0, &z)) != 0) {
                status = fail(hpml_last_error());
                goto out;
            }
            for (size_t s2 = 0; s2 < nb; s2++) {
                size_t am = 0;
                for (size_t j = 1; j < C; j++)
                    if (z[s2 * C + j] > z[s2 * C + am])
                        am = j;
                pred[i + s2] = (int32_t)am;
            }
        }
    }
    if (output) {
        size_t len = strlen(output);
        if (len > 4 && strcasecmp(output + len - 4, ".csv") == 0)
            err = hpml_csv_write(output, pred, HPML_I32, rows, 1, "label");
        else
            err = hpml_npy_write(output, pred, HPML_I32, rows, 1);
        if (err) {
            status = fail(hpml_last_error());
            goto out;
        }
    } else {
        for (size_t i = 0; i < rows; i++)
            printf("%d\n", (int)pred[i]);
    }
    status = CLI_EXIT_OK;
out:
    free(pred);
    hpml_array_free(&a);
    hpml_model_destroy(m);
    return status;
}
