/*
 * hpml train's report of a pipeline (docs/nn.md, "Pipeline layout"): per stage its
 * layers, parameters, gradients, optimizer state, peak activation memory, step time and
 * measured idle (bubble) share next to the schedule's (S - 1) / (M + S - 1), and the
 * training data it holds (images on the first stage, labels on the last).
 */
#include <stdio.h>

#include "train_pipe.h"

void train_pipe_text(const hpml_train_config_t *cfg, const hpml_stage_report_t *st, int n,
                     double theory)
{
    printf("# pipeline: %d stages, %d micro-batches, %s schedule%s; bubble theory %.1f%%\n", n,
           cfg->micro_batches > 0 ? cfg->micro_batches : cfg->stages,
           hpml_schedule_name(cfg->schedule), cfg->recompute ? ", recompute" : "", 100 * theory);
    printf("# %5s %7s %10s %10s %10s %10s %11s %5s %9s %8s %9s\n", "stage", "layers", "params",
           "param_MiB", "grad_MiB", "optim_MiB", "act_MiB", "live", "step_ms", "bubble",
           "data_MiB");
    for (int s = 0; s < n; s++) {
        const hpml_stage_report_t *e = &st[s];
        char layers[32];

        snprintf(layers, sizeof(layers), "%d-%d", e->first_layer, e->last_layer);
        printf("  %5d %7s %10zu %10.3f %10.3f %10.3f %11.3f %5d %9.3f %7.1f%% %9.3f\n", s, layers,
               e->params, (double)e->param_bytes / 1048576.0, (double)e->grad_bytes / 1048576.0,
               (double)e->optim_bytes / 1048576.0, (double)e->act_bytes / 1048576.0, e->peak_live,
               1e3 * e->step_s, 100 * e->bubble, (double)e->data_bytes / 1048576.0);
    }
}

void train_pipe_json(const hpml_train_config_t *cfg, const hpml_stage_report_t *st, int n,
                     double theory)
{
    printf(", \"pipeline\": {\"stages\": %d, \"micro_batches\": %d, \"schedule\": \"%s\", "
           "\"recompute\": %s, \"bubble_theory\": %.6f, \"per_stage\": [",
           n, cfg->micro_batches > 0 ? cfg->micro_batches : cfg->stages,
           hpml_schedule_name(cfg->schedule), cfg->recompute ? "true" : "false", theory);
    for (int s = 0; s < n; s++) {
        const hpml_stage_report_t *e = &st[s];
        printf("%s{\"stage\": %d, \"first_layer\": %d, \"last_layer\": %d, \"params\": %zu, "
               "\"param_bytes\": %zu, \"grad_bytes\": %zu, \"optim_bytes\": %zu, "
               "\"activation_bytes\": %zu, \"peak_live_micro_batches\": %d, "
               "\"step_seconds\": %.6f, \"busy_seconds\": %.6f, \"bubble\": %.6f, "
               "\"data_bytes\": %zu}",
               s ? ", " : "", s, e->first_layer, e->last_layer, e->params, e->param_bytes,
               e->grad_bytes, e->optim_bytes, e->act_bytes, e->peak_live, e->step_s, e->busy_s,
               e->bubble, e->data_bytes);
    }
    printf("]}");
}
