/* hpml train's pipeline report (train_pipe.c). */
#ifndef HPML_TOOLS_TRAIN_PIPE_H
#define HPML_TOOLS_TRAIN_PIPE_H

#include "hpml/hpml.h"

/* The per-stage table after the run (text), and the "pipeline" member of --json's record
 * (printed after a previous member: it starts with ", "). */
void train_pipe_text(const hpml_train_config_t *cfg, const hpml_stage_report_t *st, int n,
                     double theory);
void train_pipe_json(const hpml_train_config_t *cfg, const hpml_stage_report_t *st, int n,
                     double theory);

#endif
