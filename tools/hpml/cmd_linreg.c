/* `hpml linreg`: linear / ridge regression by the normal equations over MPI. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "hpml/linear.h"
#include "mlcli.h"

#define CMD "linreg"

static const char *usage_text =
    "Usage: mpirun -np N hpml linreg --data FILE (--target FILE | --target-col N) [options]\n\n"
    "Fit y = X w + b by least squares, or ridge regression with --alpha (minimise\n"
    "|y - Xw - b|^2 + alpha |w|^2, the intercept unpenalised), as scikit-learn's\n"
    "LinearRegression / Ridge. Each rank reads its block of rows; X'X and X'y are\n"
    "allreduced and solved by Cholesky.\n\n"
    "Options:\n"
    "  --data FILE         training rows (.npy, IDX or CSV)\n"
    "  --target FILE       targets, one row per data row; every column is a target\n"
    "  --target-col N      or: column N of --data is the target, the rest are features\n"
    "                      (counted from 0; negative counts from the end, -1 = last)\n"
    "  --alpha A           ridge penalty (default 0: ordinary least squares)\n"
    "  --no-intercept      fit without an intercept (no centring)\n"
    "  --test FILE         rows to predict (default: the training rows); with\n"
    "                      --target-col, a FILE with the target column too is scored\n"
    "  --test-target FILE  targets of --test, to score the predictions (R^2)\n"
    "  --pred-out FILE     write the predictions (.npy or .csv)\n"
    "  --out PATH          PATH.npy: write the coefficients (targets x features) there;\n"
    "                      otherwise PATH.coef.npy and PATH.intercept.npy\n"
    "  --threads N         BLAS threads per rank (default 1)\n"
    "  --json              print the summary as JSON\n"
    "  -v, --verbose       progress on stderr\n"
    "  -h, --help          this text\n\n"
    "A singular X'X (a constant or collinear feature column, columns counted from 0 after\n"
    "removing a --target-col) is an error: drop the column or use --alpha.\n";

typedef struct {
    mlcli_opts_t co; /* --data, --target(-col), --test(-target), --out, --threads, ... */
    const char *pred_out;
    hpml_linreg_config_t cfg;
} opts_t;

/* This command's own long options; the shared ones come from mlcli. */
enum { O_ALPHA = 256, O_NOINT, O_PRED };

static int own_opt(void *ctx, int c, const char *arg)
{
    opts_t *o = ctx;

    switch (c) {
    case O_ALPHA:
        if (cli_parse_double(arg, &o->cfg.alpha) != 0 || o->cfg.alpha < 0)
            return cli_usage_error(CMD, "--alpha must be a number >= 0 (got '%s')", arg);
        break;
    case O_NOINT: o->cfg.fit_intercept = 0; break;
    case O_PRED: o->pred_out = arg; break;
    }
    return 0;
}

static int parse(int argc, char **argv, opts_t *o)
{
    static const struct option longopts[] = {
        {"alpha", required_argument, NULL, O_ALPHA},
        {"no-intercept", no_argument, NULL, O_NOINT},
        {"pred-out", required_argument, NULL, O_PRED},
        MLCLI_TARGET_LONGOPTS,
        MLCLI_LONGOPTS,
    };
    int rc;

    memset(o, 0, sizeof(*o));
    o->cfg.alpha = 0.0;
    o->cfg.fit_intercept = 1;
    if ((rc = mlcli_parse(CMD, argc, argv, "", longopts, usage_text, &o->co, own_opt, o)) != 0)
        return rc;
    return mlcli_check_target(CMD, &o->co, "target");
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

    if ((rc = parse(argc, argv, &o)) != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    comm = mlcli_start(CMD, &o.co);

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
    if (mlcli_write_rows(CMD, comm, o.pred_out, tpred ? tpred : pred, HPML_F64,
                         tpred ? TX.rows : X.rows, t))
        goto out;
    mlcli_out_path(cpath, sizeof(cpath), o.co.out, "coef", 1);
    mlcli_out_path(ipath, sizeof(ipath), o.co.out, "intercept", 0);
    if (mlcli_write(CMD, comm, cpath, m->coef, HPML_F64, t, d) ||
        mlcli_write(CMD, comm, ipath, m->intercept, HPML_F64, t, 1))
        goto out;

    if (hpml_comm_rank(comm) == 0) {
        if (o.co.json) {
            mlcli_json_head(CMD, o.co.data);
            printf(", \"rows\": %zu, \"features\": %zu, \"targets\": %zu, \"ranks\": %d, "
                   "\"alpha\": %.17g, \"fit_intercept\": %s, \"coef\": ",
                   m->n_samples, d, t, hpml_comm_size(comm), o.cfg.alpha,
                   o.cfg.fit_intercept ? "true" : "false");
            mlcli_json_doubles(m->coef, t * d);
            printf(", \"intercept\": ");
            mlcli_json_doubles(m->intercept, t);
            printf(", \"r2\": %.17g, \"r2_test\": ", r2);
            mlcli_json_double_or_null(have_test_y, r2_test);
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
