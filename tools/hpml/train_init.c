/*
 * hpml train --init-from FILE: the starting parameters of a run from a model file or an
 * .npz (docs/models.md). The model is the run's --model on the data's input shape; the
 * file must hold exactly its parameters. A file with a normalisation (every model file;
 * an .npz with hpml_mean and hpml_std) brings it along: the run's data is re-normalised
 * to it, since the parameters were fitted to inputs normalised that way, and the saved
 * model keeps it.
 */
#include <stdio.h>
#include <string.h>

#include "mlcli.h"
#include "hpml/nn.h"

int train_init_from(const char *path, hpml_train_config_t *cfg, hpml_dataset_t *train,
                    hpml_dataset_t *test, hpml_model_t **init)
{
    hpml_model_t *want = NULL;
    unsigned char magic[4] = {0};
    float mean = 0, sd = 1;
    int has_norm = 1, err;
    FILE *f;

    *init = NULL;
    if ((f = fopen(path, "rb")) != NULL) {
        if (fread(magic, 1, 4, f) != 4)
            memset(magic, 0, sizeof(magic));
        fclose(f);
    }
    if (memcmp(magic, "PK\x03\x04", 4) == 0)
        err = hpml_model_load_npz(path, cfg->spec, train->c, train->h, train->w, init, &mean, &sd,
                                  &has_norm);
    else if ((err = hpml_model_load(path, init, &mean, &sd)) == 0 &&
             (err = hpml_model_create(cfg->spec, train->c, train->h, train->w, &want)) == 0) {
        int c, h, w;

        hpml_model_input_shape(*init, &c, &h, &w);
        if (c != train->c || h != train->h || w != train->w ||
            strcmp(hpml_model_spec(*init), hpml_model_spec(want)) != 0)
            err = hpml_set_error(HPML_ERR_INVAL,
                                 "--init-from %s: holds the model '%s' for %dx%dx%d inputs, the "
                                 "run trains '%s' on %dx%dx%d",
                                 path, hpml_model_spec(*init), c, h, w, hpml_model_spec(want),
                                 train->c, train->h, train->w);
    }
    hpml_model_destroy(want);
    if (err != 0) {
        hpml_model_destroy(*init);
        *init = NULL;
        return err;
    }
    if (has_norm) {
        /* x1 = (x - m1) / s1 as loaded; the model wants (x - m0) / s0 = (x1 - (m0 - m1) / s1)
         * / (s0 / s1). */
        float shift = (mean - cfg->mean) / cfg->std, scale = sd / cfg->std;

        hpml_dataset_normalize(train, shift, scale);
        if (test->x != NULL)
            hpml_dataset_normalize(test, shift, scale);
        cfg->mean = mean;
        cfg->std = sd;
    }
    cfg->init_params = hpml_model_params(*init);
    cfg->init_count = hpml_model_num_params(*init);
    return 0;
}
