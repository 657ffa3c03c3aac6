/*
 * hpml export: a model file (hpml train --save) as a NumPy .npz whose arrays are the
 * state_dict of the equivalent torch.nn.Sequential, with the spec, input shape,
 * normalisation and the Sequential's modules (docs/models.md). Runs on rank 0.
 */
#include <stdio.h>

#include "cli.h"
#include "opts.h"
#include "hpml/io.h"
#include "hpml/nn.h"

#define CMD "export"

typedef struct {
    const char *file, *out;
} opts_t;

#define OFF(field) offsetof(opts_t, field)
static const opt_t options[] = {
    {.name = "model-file",
     .letter = 'f',
     .kind = OPT_STRING,
     .off = OFF(file),
     .arg = "FILE",
     .help = "the model saved by 'hpml train --save'"},
    {.name = "out",
     .letter = 'o',
     .kind = OPT_STRING,
     .off = OFF(out),
     .arg = "FILE",
     .help = "the .npz to write (through a temporary file and rename)"},
    {0},
};
#undef OFF

static const opt_cmd_t command = {
    .name = CMD,
    .usage = "Usage: hpml export --model-file M.hpml --out M.npz\n\n"
             "Write a model as a NumPy .npz: its parameters named and shaped as the state_dict\n"
             "of the equivalent torch.nn.Sequential ('0.weight' (out, in), conv weights\n"
             "(out, in, kh, kw), '0.bias'), and hpml_spec, hpml_input_shape, hpml_mean,\n"
             "hpml_std, hpml_modules. 'hpml import' and 'hpml train --init-from' read it back.\n",
};

int cmd_export(int argc, char **argv)
{
    opts_t o = {0};
    const opt_set_t set = {options, &o};
    hpml_model_t *m = NULL;
    float mean, sd;
    int err, operand;

    if ((err = opts_parse(&command, &set, 1, argc, argv, &operand)) != 0)
        return err < 0 ? CLI_EXIT_OK : err;
    if (o.file == NULL || o.out == NULL)
        return cli_usage_error(CMD, "--model-file and --out are required");
    if (hpml_io_same_file(o.file, o.out))
        return cli_usage_error(CMD, "--out %s would overwrite the model file", o.out);
    if (cli_rank() != 0)
        return CLI_EXIT_OK;
    if ((err = hpml_model_load(o.file, &m, &mean, &sd)) == 0)
        err = hpml_model_export_npz(m, mean, sd, o.out);
    hpml_model_destroy(m);
    if (err != 0) {
        fprintf(stderr, "%s %s: %s\n", cli_prog, CMD, hpml_last_error());
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}
