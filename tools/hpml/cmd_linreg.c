/* `hpml linreg`: linear / ridge regression by the normal equations over MPI. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "hpml/linear.h"
#include "mlcli.h"
#include "opts.h"

#define CMD "linreg"

typedef struct {
    mlcli_opts_t co; /* --data, --target(-col), --test(-target), --out, --threads, ... */
    const char *pred_out, *model; /* --pred-out, --predict */
    hpml_linreg_config_t cfg;
    int no_intercept;
} opts_t;

#define OFF(field) offsetof(opts_t, field)
static const opt_t options[] = {
    MLCLI_OPT_DATA(opts_t, "training rows (.npy, IDX or CSV)"),
    MLCLI_OPT_TARGET(opts_t, "targets, one row per data row; every column is a target"),
    {.name = "alpha",
     .kind = OPT_DOUBLE,
     .off = OFF(cfg.alpha),
     .arg = "A",
     .help = "ridge penalty (default 0: ordinary least squares)",
     .dmin = 0,
     .dmax = HUGE_VAL},
    {.name = "no-intercept",
     .kind = OPT_FLAG,
     .off = OFF(no_intercept),
     .help = "fit without an intercept (no centring)"},
    MLCLI_OPT_TEST(opts_t,
                   "rows to predict (default: the training rows); with\n"
                   "--target-col, a FILE with the target column too is scored",
                   "targets of --test, to score the predictions (R^2)"),
    {.name = "pred-out",
     .kind = OPT_STRING,
     .off = OFF(pred_out),
     .arg = "FILE",
     .help = "write the predictions (.npy or .csv)"},
    MLCLI_OPT_OUT(opts_t, "PATH.npy: write the coefficients (targets x features; one target:\n"
                          "features) there; "
                          "otherwise PATH.coef.npy and PATH.intercept.npy (the model for\n"
                          "--predict PATH)"),
    {.name = "predict",
     .kind = OPT_STRING,
     .off = OFF(model),
     .arg = "PREFIX",
     .help = "no fit: load PREFIX.coef.npy and PREFIX.intercept.npy (a fit's\n"
             "--out PREFIX) and predict --data; with --target-col, a FILE\n"
             "of features only is not scored"},
    MLCLI_OPT_COMMON(opts_t),
    {0},
};
#undef OFF

static const opt_cmd_t command = {
    .name = CMD,
    .usage = "Usage: mpirun -np N hpml linreg --data FILE (--target FILE | --target-col N) "
             "[options]\n"
             "       mpirun -np N hpml linreg --predict PREFIX --data FILE [--target FILE |\n"
             "                    --target-col N] [--pred-out FILE] [--json]\n\n"
             "Fit y = X w + b by least squares, or ridge regression with --alpha (minimise\n"
             "|y - Xw - b|^2 + alpha |w|^2, the intercept unpenalised), as scikit-learn's\n"
             "LinearRegression / Ridge. Each rank reads its block of rows; X'X and X'y are\n"
             "allreduced and solved by Cholesky. With --predict, a model saved by --out PREFIX\n"
             "predicts --data instead, scored (R^2) when it has a target.\n",
    .epilog = "A singular X'X (a constant or collinear feature column, columns counted from 0 "
              "after\n"
              "removing a --target-col) is an error: drop the column or use --alpha.\n",
};

static int parse(int argc, char **argv, opts_t *o)
{
    static const char *const fit_only[] = {"alpha", "no-intercept", NULL};
    int rc;

    memset(o, 0, sizeof(*o));
    o->cfg.alpha = 0.0;
    o->cfg.fit_intercept = 1;
    if ((rc = mlcli_parse(&command, options, o, &o->co, argc, argv)) != 0)
        return rc;
    if (o->no_intercept)
        o->cfg.fit_intercept = 0;
    if (o->model != NULL)
        return mlcli_check_predict(CMD, &o->co, o->model, fit_only);
    return mlcli_check_target(CMD, &o->co, "target");
}

/*
 * --predict PREFIX: the model from a fit's PREFIX.coef.npy and PREFIX.intercept.npy
 * predicts --data, scored by the same hpml_r2_score as the --test path when the data has
 * a target. Returns the exit status.
 */
static int run_predict(const opts_t *o, hpml_comm_t *comm)
{
    hpml_array_t C = {0}, I = {0}, X = {0}, Y = {0};
    hpml_linreg_t m = {0};
    double *pred = NULL, r2 = 0.0, t0, t_read, t_pred;
    char cpath[4096], ipath[4096];
    int rc, status = CLI_EXIT_FAIL, have_y = 0;
    size_t d, t;
    mlcli_outset_t os;

    mlcli_outset_init(&os, CMD, comm);
    mlcli_outset_inputs(&os, &o->co);
    mlcli_outset_model(&os, o->model, "coef");
    mlcli_outset_model(&os, o->model, "intercept");
    mlcli_outset_add(&os, o->pred_out, "prediction");
    if (mlcli_outset_check(&os))
        goto out;
    t0 = hpml_time();
    if (mlcli_read_model(CMD, comm, o->model, "coef", HPML_F64, cpath, sizeof(cpath), &C) ||
        mlcli_read_model(CMD, comm, o->model, "intercept", HPML_F64, ipath, sizeof(ipath), &I))
        goto out;
    /* One intercept per target; coef is (targets, features), or (features,) for one
     * target as the fit writes it (a 1-D file reads as one column). */
    t = I.rows;
    d = C.rows == t ? C.cols : C.rows;
    if (mlcli_agree(CMD, comm, I.cols != 1 || !(C.rows == t || (t == 1 && C.cols == 1)),
                    "model files %s and %s do not hold one model: %zu x %zu coefficients, %zu x "
                    "%zu intercepts (expected one intercept per row of coefficients)",
                    cpath, ipath, C.rows, C.cols, I.rows, I.cols))
        goto out;
    m.n_features = d;
    m.n_targets = t;
    m.coef = C.data;
    m.intercept = I.data;
    if (mlcli_load_predict(CMD, comm, &o->co, d, &X, &Y, &have_y) ||
        mlcli_agree(CMD, comm, have_y && Y.cols != t,
                    "%s has %zu target columns but the model has %zu",
                    o->co.tgt.file ? o->co.tgt.file : o->co.data, Y.cols, t))
        goto out;
    t_read = hpml_time() - t0;

    t0 = hpml_time();
    pred = hpml_malloc((X.rows ? X.rows : 1) * t * sizeof(double));
    rc = pred == NULL ? HPML_ERR_NOMEM : hpml_linreg_predict(&m, X.data, X.rows, pred);
    if (rc == 0 && have_y)
        rc = hpml_r2_score(comm, Y.data, pred, X.rows, t, &r2);
    t_pred = hpml_time() - t0;
    if (mlcli_check(CMD, comm, rc) ||
        mlcli_outset_write_rows(&os, o->pred_out, pred, HPML_F64, X.rows, t > 1 ? t : 0) ||
        mlcli_outset_commit(&os))
        goto out;

    if (hpml_comm_rank(comm) == 0) {
        if (o->co.json) {
            mlcli_json_head(CMD, o->co.data);
            printf(", \"model_prefix\": ");
            hpml_json_string(stdout, o->model);
            printf(", \"rows\": %zu, \"features\": %zu, \"targets\": %zu, \"ranks\": %d, "
                   "\"r2\": ",
                   X.total_rows, d, t, hpml_comm_size(comm));
            cli_json_num(r2, have_y);
            mlcli_json_tail(t_read, "predict", t_pred);
        } else {
            printf("linreg: predict with %s: %zu rows x %zu features, %zu target%s, %d rank%s\n",
                   o->model, X.total_rows, d, t, mlcli_plural(t), hpml_comm_size(comm),
                   mlcli_plural((size_t)hpml_comm_size(comm)));
            if (have_y)
                printf("  r2           %.10g\n", r2);
            mlcli_print_time(t_read, "predict", t_pred);
            if (o->pred_out)
                printf("  predictions -> %s\n", o->pred_out);
        }
        fflush(stdout);
    }
    status = CLI_EXIT_OK;
out:
    mlcli_outset_abort(&os);
    hpml_free(pred);
    hpml_array_free(&C);
    hpml_array_free(&I);
    hpml_array_free(&X);
    hpml_array_free(&Y);
    return status;
}

int cmd_linreg(int argc, char **argv);
int cmd_linreg(int argc, char **argv)
{
    opts_t o;
    hpml_comm_t *comm = NULL;
    hpml_array_t X = {0}, Y = {0}, TX = {0}, TY = {0};
    hpml_linreg_t *m = NULL;
    double *pred = NULL, *tpred = NULL, r2 = 0.0, r2_test = 0.0, t0, t_read, t_fit;
    char cpath[4096], ipath[4096];
    int rc, status = CLI_EXIT_FAIL, have_test_y = 0;
    size_t d, t;
    mlcli_outset_t os;

    if ((rc = parse(argc, argv, &o)) != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if ((comm = mlcli_start(CMD, &o.co)) == NULL)
        return CLI_EXIT_FAIL;
    mlcli_outset_init(&os, CMD, comm);
    if (o.model != NULL) {
        status = run_predict(&o, comm);
        goto out;
    }
    /* The outputs are one set: checked now, replaced together after the fit. */
    mlcli_out_path(cpath, sizeof(cpath), o.co.out, "coef", 1);
    mlcli_out_path(ipath, sizeof(ipath), o.co.out, "intercept", 0);
    mlcli_outset_inputs(&os, &o.co);
    mlcli_outset_add(&os, o.pred_out, "prediction");
    mlcli_outset_add(&os, cpath, "x");
    mlcli_outset_add(&os, ipath, "intercept");
    if (mlcli_outset_check(&os))
        goto out;

    t0 = hpml_time();
    if (mlcli_load(CMD, comm, o.co.data, &o.co.tgt, &X, &Y))
        goto out;
    t_read = hpml_time() - t0;
    d = X.cols;
    t = Y.cols;
    if (o.co.verbose)
        fprintf(stderr, "[linreg] read %zu rows x %zu features, %zu target%s in %.3f s\n",
                X.total_rows, d, t, t == 1 ? "" : "s", t_read);

    t0 = hpml_time();
    rc = hpml_linreg_fit(comm, X.data, Y.data, X.rows, d, t, &o.cfg, &m);
    t_fit = hpml_time() - t0;
    if (mlcli_agree(CMD, comm, rc, "%s%s", mlcli_errtext(rc),
                    rc == HPML_ERR_NUMERIC && o.cfg.alpha == 0 ? "; use --alpha" : ""))
        goto out;
    pred = hpml_malloc((X.rows ? X.rows : 1) * t * sizeof(double));
    rc = pred == NULL ? HPML_ERR_NOMEM : hpml_linreg_predict(m, X.data, X.rows, pred);
    if (rc == 0)
        rc = hpml_r2_score(comm, Y.data, pred, X.rows, t, &r2);
    if (mlcli_check(CMD, comm, rc))
        goto out;

    if (o.co.test != NULL) {
        if (mlcli_load_test(CMD, comm, &o.co, d, &TX, &TY, &have_test_y) ||
            mlcli_agree(CMD, comm, have_test_y && TY.cols != t,
                        "%s has %zu target columns but the model has %zu",
                        o.co.test_target ? o.co.test_target : o.co.test, TY.cols, t))
            goto out;
        tpred = hpml_malloc((TX.rows ? TX.rows : 1) * t * sizeof(double));
        rc = tpred == NULL ? HPML_ERR_NOMEM : hpml_linreg_predict(m, TX.data, TX.rows, tpred);
        if (rc == 0 && have_test_y)
            rc = hpml_r2_score(comm, TY.data, tpred, TX.rows, t, &r2_test);
        if (mlcli_check(CMD, comm, rc))
            goto out;
    }
    if (mlcli_outset_write_rows(&os, o.pred_out, tpred ? tpred : pred, HPML_F64,
                                tpred ? TX.rows : X.rows, t > 1 ? t : 0) ||
        (t > 1 ? mlcli_outset_write(&os, cpath, m->coef, HPML_F64, t, d)
               : mlcli_outset_write_vec(&os, cpath, m->coef, HPML_F64, d)) ||
        mlcli_outset_write_vec(&os, ipath, m->intercept, HPML_F64, t) || mlcli_outset_commit(&os))
        goto out;

    if (hpml_comm_rank(comm) == 0) {
        if (o.co.json) {
            mlcli_json_head(CMD, o.co.data);
            printf(", \"rows\": %zu, \"features\": %zu, \"targets\": %zu, \"ranks\": %d, "
                   "\"alpha\": %.17g, \"fit_intercept\": %s, \"coef\": ",
                   m->n_samples, d, t, hpml_comm_size(comm), o.cfg.alpha,
                   o.cfg.fit_intercept ? "true" : "false");
            if (t > 1) /* the shape of PREFIX.coef.npy: (targets, features) or (features,) */
                mlcli_json_matrix(m->coef, t, d);
            else
                mlcli_json_doubles(m->coef, d);
            printf(", \"intercept\": ");
            mlcli_json_doubles(m->intercept, t);
            printf(", \"r2\": %.17g, \"r2_test\": ", r2);
            cli_json_num(r2_test, have_test_y);
            mlcli_json_tail(t_read, "fit", t_fit);
        } else {
            printf("linreg: %zu rows x %zu features, %zu target%s, %s, %d rank%s\n", m->n_samples,
                   d, t, t == 1 ? "" : "s", o.cfg.alpha > 0 ? "ridge" : "least squares",
                   hpml_comm_size(comm), mlcli_plural((size_t)hpml_comm_size(comm)));
            if (o.cfg.alpha > 0)
                printf("  alpha        %g\n", o.cfg.alpha);
            for (size_t j = 0; j < t; j++) {
                if (t > 1)
                    printf("  target %zu\n", j);
                printf("  coef         ");
                mlcli_print_doubles(m->coef + j * d, d, 8);
                printf("\n  intercept    %.10g\n", m->intercept[j]);
            }
            printf("  r2 (train)   %.10g\n", r2);
            if (have_test_y)
                printf("  r2 (test)    %.10g\n", r2_test);
            mlcli_print_time(t_read, "fit", t_fit);
            if (cpath[0])
                printf("  coef      -> %s\n", cpath);
            if (ipath[0])
                printf("  intercept -> %s\n", ipath);
            if (o.pred_out)
                printf("  predictions -> %s\n", o.pred_out);
        }
        fflush(stdout);
    }
    status = CLI_EXIT_OK;
out:
    mlcli_outset_abort(&os);
    hpml_linreg_destroy(m);
    hpml_free(pred);
    hpml_free(tpred);
    hpml_array_free(&X);
    hpml_array_free(&Y);
    hpml_array_free(&TX);
    hpml_array_free(&TY);
    hpml_comm_destroy(comm);
    return status;
}
