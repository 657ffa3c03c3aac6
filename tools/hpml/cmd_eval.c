/*
 * hpml eval: accuracy and loss of a saved model (hpml train --save) on a labelled data
 * set, each rank evaluating its block of the rows.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "hpml/comm.h"
#include "hpml/io.h"
#include "hpml/nn.h"

#define CMD "eval"

static void usage(void)
{
    if (cli_rank() == 0)
        printf("Usage: mpirun -np N hpml eval --model-file FILE [options]\n\n"
               "Accuracy and mean cross-entropy of a model saved by 'hpml train --save'.\n\n"
               "  -f, --model-file FILE  the model\n"
               "      --data DIR         MNIST-style folder: its t10k set (default %s)\n"
               "      --images F --labels F   any IDX/.npy images and labels instead\n"
               "      --limit N          only the first N rows\n"
               "      --batch N          evaluation batch (default 1000)\n"
               "      --json             one JSON object instead of text\n",
               HPML_NN_DEFAULT_DATA);
}

int cmd_eval(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, 0, 'h'},
                                         {"model-file", required_argument, 0, 'f'},
                                         {"data", required_argument, 0, 'd'},
                                         {"images", required_argument, 0, 'i'},
                                         {"labels", required_argument, 0, 'l'},
                                         {"limit", required_argument, 0, 'n'},
                                         {"batch", required_argument, 0, 'b'},
                                         {"json", no_argument, 0, 'j'},
                                         {0, 0, 0, 0}};
    hpml_data_paths_t dp;
    const char *file = NULL;
    size_t limit = SIZE_MAX, batch = 1000, rows, cols, b0, b1;
    hpml_dtype_t dt;
    int json = 0, opt, err;
    long v;
    float mean, sd;
    hpml_model_t *m = NULL;
    hpml_comm_t *comm = NULL;
    hpml_dataset_t d = {0};
    double loss, acc;

    hpml_data_paths(HPML_NN_DEFAULT_DATA, &dp);
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "hf:", opts, NULL)) != -1) {
        switch (opt) {
        case 'h': usage(); return CLI_EXIT_OK;
        case 'f': file = optarg; break;
        case 'd': hpml_data_paths(optarg, &dp); break;
        case 'i': snprintf(dp.test_images, sizeof(dp.test_images), "%s", optarg); break;
        case 'l': snprintf(dp.test_labels, sizeof(dp.test_labels), "%s", optarg); break;
        case 'n':
        case 'b':
            if (cli_parse_long(optarg, 1, 1L << 40, &v))
                return cli_usage_error(CMD, "expected a positive integer, got '%s'", optarg);
            *(opt == 'n' ? &limit : &batch) = (size_t)v;
            break;
        case 'j': json = 1; break;
        default:
            return cli_usage_error(CMD, "unknown option or missing value '%s'", argv[optind - 1]);
        }
    }
    if (file == NULL)
        return cli_usage_error(CMD, "--model-file FILE is required");
    hpml_blas_set_threads(1);
    if ((err = hpml_model_load(file, &m, &mean, &sd)) != 0)
        cli_fatal(CMD, "%s", hpml_last_error());
    if ((err = hpml_io_shape(dp.test_images, HPML_FMT_AUTO, &rows, &cols, &dt)) != 0)
        cli_fatal(CMD, "%s", hpml_last_error());
    if (cols != hpml_model_input_size(m))
        cli_fatal(CMD, "%s has %zu values per row but the model expects %zu", dp.test_images, cols,
                  hpml_model_input_size(m));
    if (rows > limit)
        rows = limit;
    hpml_io_partition(rows, cli_rank(), cli_size(), &b0, &b1);
    if ((err = hpml_dataset_load(dp.test_images, dp.test_labels, b0, b1, -1.0f, mean, sd, &d)) != 0)
        cli_fatal(CMD, "%s", hpml_last_error());
    if ((err = hpml_comm_create(MPI_COMM_WORLD, NULL, &comm)) != 0 ||
        (err = hpml_evaluate(comm, m, &d, batch, &loss, &acc)) != 0)
        cli_fatal(CMD, "%s: %s", hpml_strerror(err), hpml_last_error());
    if (cli_rank() == 0) {
        if (json) {
            printf("{\"model\": ");
            hpml_json_string(stdout, hpml_model_spec(m));
            printf(", \"rows\": %zu, \"loss\": %.6f, \"accuracy\": %.6f}\n", rows, loss, acc);
        } else {
            printf("# model %s: %s\n", file, hpml_model_spec(m));
            printf("rows %zu  loss %.4f  accuracy %.2f%%\n", rows, loss, 100 * acc);
        }
    }
    hpml_dataset_free(&d);
    hpml_model_destroy(m);
    hpml_comm_destroy(comm);
    return CLI_EXIT_OK;
}
