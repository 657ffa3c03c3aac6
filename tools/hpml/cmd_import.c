/*
 * hpml import: a model file from an .npz, such as hpml export writes or numpy.savez
 * writes from a PyTorch state_dict (docs/models.md). The spec and input shape come from
 * the file's hpml_spec and hpml_input_shape, or --model and --input-shape; every array is
 * checked against them by name and shape. Runs on rank 0.
 */
#include <stdio.h>

#include "cli.h"
#include "opts.h"
#include "hpml/io.h"
#include "hpml/nn.h"

#define CMD "import"

typedef struct {
    const char *npz, *file, *model, *shape;
    double mean, std;
} opts_t;

#define OFF(field) offsetof(opts_t, field)
static const opt_t options[] = {
    {.name = "npz", .kind = OPT_STRING, .off = OFF(npz), .arg = "FILE", .help = "the .npz to read"},
    {.name = "model-file",
     .letter = 'f',
     .kind = OPT_STRING,
     .off = OFF(file),
     .arg = "FILE",
     .help = "the model file to write (for hpml eval, predict, export)"},
    {.name = "model",
     .letter = 'm',
     .kind = OPT_STRING,
     .off = OFF(model),
     .arg = "SPEC",
     .help = "the model spec or preset, when the .npz has no hpml_spec"},
    {.name = "input-shape",
     .kind = OPT_STRING,
     .off = OFF(shape),
     .arg = "CxHxW",
     .help = "the input shape with --model (default 1x28x28)"},
    {.name = "mean",
     .kind = OPT_DOUBLE,
     .off = OFF(mean),
     .arg = "X",
     .help = "the input normalisation's mean, when the .npz has no hpml_mean\n"
             "(default 0)",
     .dmin = -1e30,
     .dmax = 1e30},
    {.name = "std",
     .kind = OPT_DOUBLE,
     .off = OFF(std),
     .arg = "X",
     .help = "its standard deviation (default 1)",
     .dmin = 0,
     .dmax = 1e30,
     .open_min = 1},
    {0},
};
#undef OFF

static const opt_cmd_t command = {
    .name = CMD,
    .usage = "Usage: hpml import --npz M.npz --model-file M.hpml [--model SPEC "
             "[--input-shape CxHxW]]\n\n"
             "Make a model file from an .npz of arrays named as a torch.nn.Sequential's\n"
             "state_dict ('0.weight', '0.bias', ...): one 'hpml export' wrote, or\n"
             "numpy.savez(f, **{k: v.numpy() for k, v in model.state_dict().items()}).\n",
};

int cmd_import(int argc, char **argv)
{
    opts_t o = {.mean = 0, .std = 1};
    const opt_set_t set = {options, &o};
    hpml_model_t *m = NULL;
    int c = 1, h = 28, w = 28, has_norm = 0, err, operand;
    float mean, sd;
    char end;

    if ((err = opts_parse(&command, &set, 1, argc, argv, &operand)) != 0)
        return err < 0 ? CLI_EXIT_OK : err;
    if (o.npz == NULL || o.file == NULL)
        return cli_usage_error(CMD, "--npz and --model-file are required");
    if (o.shape != NULL && o.model == NULL)
        return cli_usage_error(CMD, "--input-shape goes with --model");
    if (o.shape != NULL &&
        (sscanf(o.shape, "%dx%dx%d%c", &c, &h, &w, &end) != 3 || c < 1 || h < 1 || w < 1))
        return cli_usage_error(CMD,
                               "--input-shape must be CxHxW, three positive integers (got "
                               "'%s')",
                               o.shape);
    if (hpml_io_same_file(o.npz, o.file))
        return cli_usage_error(CMD, "--model-file %s would overwrite the .npz", o.file);
    if (cli_rank() != 0)
        return CLI_EXIT_OK;
    err = hpml_model_load_npz(o.npz, o.model ? hpml_model_preset(o.model) : NULL, c, h, w, &m,
                              &mean, &sd, &has_norm);
    if (err == 0 && has_norm && (opts_given("mean") || opts_given("std")))
        err = hpml_set_error(HPML_ERR_INVAL,
                             "%s has its normalisation (hpml_mean, hpml_std): "
                             "--mean and --std are for files without one",
                             o.npz);
    if (err == 0 && !has_norm) {
        mean = (float)o.mean;
        sd = (float)o.std;
    }
    if (err == 0)
        err = hpml_model_save(m, mean, sd, o.file);
    hpml_model_destroy(m);
    if (err != 0) {
        fprintf(stderr, "%s %s: %s\n", cli_prog, CMD, hpml_last_error());
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}
