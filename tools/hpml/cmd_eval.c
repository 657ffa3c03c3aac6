/*
 * hpml eval: accuracy and loss of a saved model (hpml train --save) on a labelled data
 * set, each rank evaluating its block of the rows.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "mlcli.h"
#include "opts.h"
#include "hpml/comm.h"
#include "hpml/io.h"
#include "hpml/nn.h"

#define CMD "eval"

typedef struct {
    const char *file, *data, *images, *labels;
    size_t limit, batch;
    int json;
} opts_t;

#define OFF(field) offsetof(opts_t, field)
static const opt_t options[] = {
    {.name = "model-file",
     .letter = 'f',
     .kind = OPT_STRING,
     .off = OFF(file),
     .arg = "FILE",
     .help = "the model"},
    {.name = "data",
     .kind = OPT_STRING,
     .off = OFF(data),
     .arg = "DIR",
     .help = "MNIST-style folder: its t10k set (default " HPML_NN_DEFAULT_DATA ")"},
    {.name = "images",
     .kind = OPT_STRING,
     .off = OFF(images),
     .arg = "FILE",
     .help = "any IDX/.npy images instead (with --labels)"},
    {.name = "labels",
     .kind = OPT_STRING,
     .off = OFF(labels),
     .arg = "FILE",
     .help = "their labels (with --images)"},
    {.name = "limit",
     .kind = OPT_SIZE,
     .off = OFF(limit),
     .arg = "N",
     .help = "only the first N rows",
     .min = 1,
     .max = 1LL << 40},
    {.name = "batch",
     .kind = OPT_SIZE,
     .off = OFF(batch),
     .arg = "N",
     .help = "evaluation batch (default 1000)",
     .min = 1,
     .max = 1LL << 40},
    {.name = "json", .kind = OPT_FLAG, .off = OFF(json), .help = "one JSON object instead of text"},
    {0},
};
#undef OFF

static const opt_cmd_t command = {
    .name = CMD,
    .usage = "Usage: mpirun -np N hpml eval --model-file FILE [options]\n\n"
             "Accuracy and mean cross-entropy of a model saved by 'hpml train --save'.\n",
};

int cmd_eval(int argc, char **argv)
{
    opts_t o = {.limit = SIZE_MAX, .batch = 1000};
    const opt_set_t set = {options, &o};
    hpml_data_paths_t dp;
    const char *file, *data, *images, *labels;
    size_t limit, batch, rows = 0, cols = 0, b0, b1, outs;
    hpml_dtype_t dt;
    int json, operand, rc, status = CLI_EXIT_FAIL;
    float mean = 0, sd = 1;
    hpml_model_t *m = NULL;
    hpml_comm_t *comm = NULL;
    hpml_dataset_t d = {0};
    double loss = 0, acc = 0, zmean = 0;

    if ((rc = opts_parse(&command, &set, 1, argc, argv, &operand)) != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    file = o.file, data = o.data, images = o.images, labels = o.labels;
    limit = o.limit, batch = o.batch, json = o.json;
    if (file == NULL)
        return cli_usage_error(CMD, "--model-file FILE is required");
    /* Images without their labels would be scored against the default set's labels. */
    if ((images != NULL) != (labels != NULL))
        return cli_usage_error(CMD, "--images and --labels go together (got only %s)",
                               images != NULL ? "--images" : "--labels");
    if (data != NULL && images != NULL)
        return cli_usage_error(CMD, "give --data DIR or --images/--labels, not both");
    hpml_data_paths(data != NULL ? data : HPML_NN_DEFAULT_DATA, &dp);
    if (images != NULL) {
        snprintf(dp.test_images, sizeof(dp.test_images), "%s", images);
        snprintf(dp.test_labels, sizeof(dp.test_labels), "%s", labels);
    }
    hpml_blas_set_threads(1);
    if (mlcli_comm_create(CMD, &comm) != 0)
        return CLI_EXIT_FAIL;

    /* Failures below are agreed across ranks (one line, exit 1); only a failure of one
     * rank inside hpml_evaluate, with the others left in a collective, ends in MPI_Abort. */
    rc = hpml_model_load(file, &m, &mean, &sd);
    if (mlcli_check(CMD, comm, rc))
        goto out;
    rc = hpml_io_shape(dp.test_images, HPML_FMT_AUTO, &rows, &cols, &dt);
    if (mlcli_check(CMD, comm, rc) ||
        mlcli_agree(CMD, comm, cols != hpml_model_input_size(m),
                    "%s has %zu values per row but the model expects %zu", dp.test_images, cols,
                    hpml_model_input_size(m)) ||
        mlcli_agree(CMD, comm, rows == 0, "%s has no rows to evaluate", dp.test_images))
        goto out;
    if (rows > limit)
        rows = limit;
    hpml_io_partition(rows, cli_rank(), cli_size(), &b0, &b1);
    rc = hpml_dataset_load(dp.test_images, dp.test_labels, b0, b1, -1.0f, mean, sd, &d);
    if (mlcli_check(CMD, comm, rc))
        goto out;
    /* The inputs' mean after the model's normalisation, over every rank's rows. */
    {
        const size_t in = hpml_model_input_size(m);
        double z[2] = {0, (double)(d.n * in)};

        for (size_t i = 0; i < d.n * in; i++)
            z[0] += d.x[i];
        rc = hpml_allreduce(HPML_IN_PLACE, z, 2, HPML_F64, HPML_SUM, comm);
        if (mlcli_check(CMD, comm, rc))
            goto out;
        zmean = z[1] > 0 ? z[0] / z[1] : 0.0;
        if (cli_rank() == 0)
            mlcli_warn_input(CMD, dp.test_images, zmean, mean, sd);
    }
    /* Labels the model has no output for, checked here: hpml_evaluate would fail on the
     * ranks holding them only, before its allreduce. */
    outs = hpml_model_output_size(m);
    if (mlcli_agree(CMD, comm, d.n > 0 && (size_t)d.classes > outs,
                    "%s: label %d is out of range: the model has %zu outputs (labels 0..%zu)",
                    dp.test_labels, d.classes - 1, outs, outs - 1))
        goto out;
    rc = hpml_evaluate(comm, m, &d, batch, &loss, &acc);
    if (rc != 0) { /* agreed when every rank failed; else the job ends (cli_fail_agreed) */
        status = cli_fail_agreed(CMD, rc);
        goto out;
    }
    if (cli_rank() == 0) {
        if (json) {
            cli_json_begin(CMD);
            printf(", \"model\": ");
            hpml_json_string(stdout, hpml_model_spec(m));
            printf(", \"ranks\": %d, \"rows\": %zu, \"loss\": %.6f, \"accuracy\": %.6f, "
                   "\"input_mean_normalised\": %.6g, \"input_range_warning\": %s}\n",
                   cli_size(), rows, loss, acc, zmean,
                   mlcli_input_mismatch(zmean) ? "true" : "false");
        } else {
            printf("# model %s: %s\n", file, hpml_model_spec(m));
            printf("rows %zu  loss %.4f  accuracy %.2f%%\n", rows, loss, 100 * acc);
        }
    }
    status = CLI_EXIT_OK;
out:
    hpml_dataset_free(&d);
    hpml_model_destroy(m);
    hpml_comm_destroy(comm);
    return status;
}
