/*
 * hpml predict: class predictions of a saved model (hpml train --save) for the rows of
 * an image file. The rows are split across the ranks (each reads and predicts its block);
 * rank 0 prints one label per line on stdout (the k best with --top-k), or the output set
 * writes an .npy / .csv file with --output; --proba writes the class probabilities
 * (softmax of the outputs); --json a summary record. A warning says when the inputs do
 * not look like the training data after the model's normalisation.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "mlcli.h"
#include "opts.h"
#include "hpml/io.h"
#include "hpml/nn.h"

#define CMD "predict"

typedef struct {
    const char *file, *images, *output, *proba;
    size_t limit, top_k;
    int json;
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
     .help = "write the int32 labels to FILE (.npy or .csv; shape (rows,),\n"
             "or (rows, k) with --top-k) instead of stdout"},
    {.name = "top-k",
     .kind = OPT_SIZE,
     .off = OFF(top_k),
     .arg = "K",
     .help = "the K most probable classes of each row, most probable\n"
             "first (default 1)",
     .min = 1,
     .max = 1 << 20},
    {.name = "proba",
     .kind = OPT_STRING,
     .off = OFF(proba),
     .arg = "FILE",
     .help = "write the class probabilities (rows x classes, float32)"},
    {.name = "json",
     .kind = OPT_FLAG,
     .off = OFF(json),
     .help = "print a JSON summary (docs/json.md); labels need --output"},
    {0},
};
#undef OFF

static const opt_cmd_t command = {
    .name = CMD,
    .usage = "Usage: hpml predict --model-file FILE --images FILE [options]\n\n"
             "Predicted class of each row (IDX or .npy images, scaled as in training).\n",
};

/* For each of the n rows of x (raw pixels of stored type dt, scaled and normalised here
 * in place as in training): the k most probable classes into top (n x k, most probable
 * first, ties to the lower class) and, unless NULL, the softmax probabilities into proba
 * (n x C). *zsum: the sum of the normalised inputs. 0 or an hpml error. */
static int predict_rows(hpml_model_t *m, float *x, size_t n, hpml_dtype_t dt, float mean, float sd,
                        size_t k, int32_t *top, float *proba, double *zsum)
{
    const size_t in = hpml_model_input_size(m), C = hpml_model_output_size(m);
    const float s = dt == HPML_U8 ? 1.0f / 255.0f : 1.0f;
    double sum = 0;
    int err;

    for (size_t i = 0; i < n * in; i++) {
        x[i] = (x[i] * s - mean) / sd;
        sum += x[i];
    }
    *zsum = sum;
    for (size_t i = 0; i < n; i += 1000) {
        size_t nb = n - i < 1000 ? n - i : 1000;
        const float *z;

        if ((err = hpml_model_forward(m, x + i * in, nb, 0, NULL, 0, &z)) != 0)
            return err;
        for (size_t r = 0; r < nb; r++) {
            const float *zr = z + r * C;
            int32_t *t = top + (i + r) * k;

            /* Selection of the k largest: k is small (a handful of classes). */
            for (size_t j = 0; j < k; j++) {
                size_t best = C;

                for (size_t c = 0; c < C; c++) {
                    int taken = 0;

                    for (size_t q = 0; q < j && !taken; q++)
                        taken = (size_t)t[q] == c;
                    if (!taken && (best == C || zr[c] > zr[best]))
                        best = c;
                }
                t[j] = (int32_t)best;
            }
            if (proba != NULL) {
                float *p = proba + (i + r) * C, zmax = zr[t[0]];
                double total = 0;

                for (size_t c = 0; c < C; c++)
                    total += p[c] = expf(zr[c] - zmax);
                for (size_t c = 0; c < C; c++)
                    p[c] = (float)(p[c] / total);
            }
        }
    }
    return 0;
}

static void print_json(const opts_t *o, const hpml_model_t *m, int ranks, size_t rows, size_t k,
                       double zmean, double seconds)
{
    cli_json_begin(CMD);
    printf(", \"model\": ");
    hpml_json_string(stdout, hpml_model_spec(m));
    printf(", \"model_file\": ");
    hpml_json_string(stdout, o->file);
    printf(", \"images\": ");
    hpml_json_string(stdout, o->images);
    printf(", \"ranks\": %d, \"rows\": %zu, \"classes\": %zu, \"top_k\": %zu, "
           "\"input_mean_normalised\": %.6g, \"input_range_warning\": %s, \"output\": ",
           ranks, rows, hpml_model_output_size(m), k, zmean,
           mlcli_input_mismatch(zmean) ? "true" : "false");
    cli_json_str_or_null(o->output);
    printf(", \"proba\": ");
    cli_json_str_or_null(o->proba);
    printf(", \"predict_seconds\": %.6f}\n", seconds);
}

/* The model and the images' shape, checked against each other (every rank). */
static int open_inputs(const opts_t *o, hpml_model_t **m, float *mean, float *sd, size_t *rows,
                       hpml_dtype_t *dt)
{
    size_t cols, C;
    int err;

    if ((err = hpml_model_load(o->file, m, mean, sd)) != 0 ||
        (err = hpml_io_shape(o->images, HPML_FMT_AUTO, rows, &cols, dt)) != 0)
        return err;
    C = hpml_model_output_size(*m);
    if (cols != hpml_model_input_size(*m))
        return hpml_set_error(HPML_ERR_INVAL, "%s has %zu values per row but the model expects %zu",
                              o->images, cols, hpml_model_input_size(*m));
    if (o->top_k > C)
        return hpml_set_error(HPML_ERR_INVAL, "--top-k %zu: the model has only %zu classes",
                              o->top_k, C);
    if (*rows > o->limit)
        *rows = o->limit;
    return 0;
}

/* The labels on stdout: every rank's gathered to rank 0, printed in row order. */
static int print_labels(hpml_comm_t *comm, const int32_t *pred, size_t n, size_t k)
{
    int32_t *all = NULL;
    size_t total;

    if (mlcli_gather_rows(CMD, comm, pred, HPML_I32, n, k, (void **)&all, &total) != 0)
        return CLI_EXIT_FAIL;
    if (hpml_comm_rank(comm) == 0)
        for (size_t i = 0; i < total; i++)
            for (size_t j = 0; j < k; j++)
                printf("%d%c", (int)all[i * k + j], j + 1 < k ? ' ' : '\n');
    hpml_free(all);
    return 0;
}

int cmd_predict(int argc, char **argv)
{
    opts_t o = {.limit = SIZE_MAX, .top_k = 1};
    const opt_set_t set = {options, &o};
    size_t rows = 0, b, e, n, k, C;
    hpml_dtype_t dt = HPML_F32;
    hpml_array_t a = {0};
    hpml_model_t *m = NULL;
    hpml_comm_t *comm = NULL;
    mlcli_outset_t os;
    int32_t *pred = NULL;
    float *proba = NULL, mean = 0, sd = 1;
    double z[2] = {0, 0}, t0;
    int err, operand, status = CLI_EXIT_FAIL;

    if ((err = opts_parse(&command, &set, 1, argc, argv, &operand)) != 0)
        return err < 0 ? CLI_EXIT_OK : err;
    if (o.file == NULL || o.images == NULL)
        return cli_usage_error(CMD, "--model-file and --images are required");
    if (o.json && o.output == NULL)
        return cli_usage_error(CMD, "--json prints a summary: give --output FILE for the labels");
    hpml_blas_set_threads(1);
    if (mlcli_comm_create(CMD, &comm) != 0)
        return CLI_EXIT_FAIL;
    /* Before any work, a name the set cannot write or an input it would destroy is
     * refused. */
    mlcli_outset_init(&os, CMD, comm);
    mlcli_outset_input(&os, "--model-file", o.file);
    mlcli_outset_input(&os, "--images", o.images);
    mlcli_outset_add(&os, o.output, "label");
    mlcli_outset_add(&os, o.proba, "p");
    if (mlcli_outset_check(&os) ||
        mlcli_check(CMD, comm, open_inputs(&o, &m, &mean, &sd, &rows, &dt)))
        goto out;
    k = o.top_k;
    C = hpml_model_output_size(m);
    hpml_io_partition(rows, hpml_comm_rank(comm), hpml_comm_size(comm), &b, &e);
    n = e - b;
    t0 = hpml_time();
    err = hpml_io_read_rows(o.images, HPML_FMT_AUTO, HPML_F32, b, e, 1, &a);
    pred = malloc((n * k + 1) * sizeof(int32_t));
    proba = o.proba != NULL ? malloc((n * C + 1) * sizeof(float)) : NULL;
    if (err == 0 && (pred == NULL || (o.proba != NULL && proba == NULL)))
        err = hpml_set_error(HPML_ERR_NOMEM, "out of memory for %zu predictions", n);
    if (err == 0)
        err = predict_rows(m, a.data, n, dt, mean, sd, k, pred, proba, &z[0]);
    /* The mean of all the normalised inputs, for the warning. */
    z[1] = (double)n * (double)hpml_model_input_size(m);
    if (mlcli_check(CMD, comm, err) ||
        mlcli_check(CMD, comm, hpml_allreduce(HPML_IN_PLACE, z, 2, HPML_F64, HPML_SUM, comm)))
        goto out;
    z[0] = z[1] > 0 ? z[0] / z[1] : 0.0;
    if (hpml_comm_rank(comm) == 0)
        mlcli_warn_input(CMD, o.images, z[0], mean, sd);
    if (o.output == NULL ? print_labels(comm, pred, n, k)
                         : mlcli_outset_write_rows(&os, o.output, pred, HPML_I32, n, k > 1 ? k : 0))
        goto out;
    if (mlcli_outset_write_rows(&os, o.proba, proba, HPML_F32, n, C) || mlcli_outset_commit(&os))
        goto out;
    if (o.json && hpml_comm_rank(comm) == 0)
        print_json(&o, m, hpml_comm_size(comm), rows, k, z[0], hpml_time() - t0);
    status = CLI_EXIT_OK;
out:
    mlcli_outset_abort(&os);
    free(pred);
    free(proba);
    hpml_array_free(&a);
    hpml_model_destroy(m);
    hpml_comm_destroy(comm);
    return status;
}
