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
    const char *data, *test, *test_target, *pred_out, *out;
    mlcli_target_t tgt;
    hpml_linreg_config_t cfg;
    int threads, json, verbose;
} opts_t;

static int parse(int argc, char **argv, opts_t *o)
{
    enum {
        O_DATA = 256,
        O_TARGET,
        O_TCOL,
        O_ALPHA,
        O_NOINT,
        O_TEST,
        O_TTARGET,
        O_PRED,
        O_OUT,
        O_THREADS,
        O_JSON
    };
    static const struct option longopts[] = {
        {"data", required_argument, NULL, O_DATA},
        {"target", required_argument, NULL, O_TARGET},
        {"target-col", required_argument, NULL, O_TCOL},
        {"alpha", required_argument, NULL, O_ALPHA},
        {"no-intercept", no_argument, NULL, O_NOINT},
        {"test", required_argument, NULL, O_TEST},
        {"test-target", required_argument, NULL, O_TTARGET},
        {"pred-out", required_argument, NULL, O_PRED},
        {"out", required_argument, NULL, O_OUT},
        {"threads", required_argument, NULL, O_THREADS},
        {"json", no_argument, NULL, O_JSON},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    long v;
    int c;

    memset(o, 0, sizeof(*o));
    o->cfg.alpha = 0.0;
    o->cfg.fit_intercept = 1;
    o->threads = 1;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vh", longopts, NULL)) != -1) {
        switch (c) {
        case O_DATA: o->data = optarg; break;
        case O_TARGET: o->tgt.file = optarg; break;
        case O_TCOL:
            if (cli_parse_long(optarg, -1000000000L, 1000000000L, &v) != 0)
                return cli_usage_error(CMD, "--target-col must be an integer (got '%s')", optarg);
            o->tgt.col = v;
            o->tgt.have_col = 1;
            break;
        case O_ALPHA:
            if (cli_parse_double(optarg, &o->cfg.alpha) != 0 || o->cfg.alpha < 0)
                return cli_usage_error(CMD, "--alpha must be a number >= 0 (got '%s')", optarg);
            break;
        case O_NOINT: o->cfg.fit_intercept = 0; break;
        case O_TEST: o->test = optarg; break;
        case O_TTARGET: o->test_target = optarg; break;
        case O_PRED: o->pred_out = optarg; break;
        case O_OUT: o->out = optarg; break;
        case O_THREADS:
            if (cli_parse_long(optarg, 1, 1024, &v) != 0)
                return cli_usage_error(CMD, "--threads must be an integer >= 1 (got '%s')", optarg);
            o->threads = (int)v;
            break;
        case O_JSON: o->json = 1; break;
        case 'v': o->verbose = 1; break;
        case 'h':
            if (cli_rank() == 0)
                fputs(usage_text, stdout);
            return -1;
        case ':': return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (o->data == NULL)
        return cli_usage_error(CMD, "--data FILE is required");
    if ((o->tgt.file != NULL) == (o->tgt.have_col != 0))
        return cli_usage_error(CMD, "give exactly one of --target FILE and --target-col N");
    if (o->test_target != NULL && o->test == NULL)
        return cli_usage_error(CMD, "--test-target needs --test");
    if (o->test_target != NULL && o->tgt.have_col)
        return cli_usage_error(CMD, "--test-target goes with --target FILE; with --target-col "
                                    "the --test file holds its target column");
    return 0;
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
    if ((rc = hpml_comm_create(MPI_COMM_WORLD, NULL, &comm)) != 0)
        cli_fatal(CMD, "cannot create the communicator: %s", mlcli_errtext(rc));
    hpml_blas_set_threads(o.threads);
    o.verbose = mlcli_progress_on(comm, o.verbose);

    t0 = hpml_time();
    if (mlcli_load(CMD, comm, o.data, &o.tgt, &X, &Y))
        goto out;
    t_read = hpml_time() - t0;
    d = X.cols;
    t = Y.cols;
    if (o.verbose)
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
    if (mlcli_agree(CMD, comm, rc, "%s", mlcli_errtext(rc)))
        goto out;

    if (o.test != NULL) {
        mlcli_target_t tt = {o.test_target, o.tgt.col, o.tgt.have_col};
        size_t tc, tr;
        hpml_dtype_t st;

        /* With --target-col the test file may hold the target column or only features. */
        rc = hpml_io_shape(o.test, HPML_FMT_AUTO, &tr, &tc, &st);
        if (mlcli_agree(CMD, comm, rc, "%s", mlcli_errtext(rc)))
            goto out;
        if (o.tgt.have_col && tc == d)
            tt.have_col = 0;
        have_test_y = tt.file != NULL || tt.have_col;
        if (mlcli_load(CMD, comm, o.test, have_test_y ? &tt : NULL, &TX, &TY))
            goto out;
        if (mlcli_agree(CMD, comm, TX.cols != d, "%s has %zu feature columns but the model has %zu",
                        o.test, TX.cols, d) ||
            mlcli_agree(CMD, comm, have_test_y && TY.cols != t,
                        "%s has %zu target columns but the model has %zu",
                        o.test_target ? o.test_target : o.test, TY.cols, t))
            goto out;
        tpred = hpml_malloc((TX.rows ? TX.rows : 1) * t * sizeof(double));
        rc = tpred == NULL ? HPML_ERR_NOMEM : hpml_linreg_predict(m, TX.data, TX.rows, tpred);
        if (rc == 0 && have_test_y)
            rc = hpml_r2_score(comm, TY.data, tpred, TX.rows, t, &r2_test);
        if (mlcli_agree(CMD, comm, rc, "%s", mlcli_errtext(rc)))
            goto out;
    }
    if (o.pred_out != NULL && mlcli_write_rows(CMD, comm, o.pred_out, tpred ? tpred : pred,
                                               HPML_F64, tpred ? TX.rows : X.rows, t))
        goto out;
    mlcli_out_path(cpath, sizeof(cpath), o.out, "coef", 1);
    mlcli_out_path(ipath, sizeof(ipath), o.out, "intercept", 0);
    if (cpath[0] && mlcli_write(CMD, comm, cpath, m->coef, HPML_F64, t, d))
        goto out;
    if (ipath[0] && mlcli_write(CMD, comm, ipath, m->intercept, HPML_F64, t, 1))
        goto out;

    if (hpml_comm_rank(comm) == 0) {
        if (o.json) {
            printf("{\"command\": \"linreg\", \"data\": ");
            hpml_json_string(stdout, o.data);
            printf(", \"rows\": %zu, \"features\": %zu, \"targets\": %zu, \"ranks\": %d, "
                   "\"alpha\": %.17g, \"fit_intercept\": %s, \"coef\": ",
                   m->n_samples, d, t, hpml_comm_size(comm), o.cfg.alpha,
                   o.cfg.fit_intercept ? "true" : "false");
            mlcli_json_doubles(m->coef, t * d);
            printf(", \"intercept\": ");
            mlcli_json_doubles(m->intercept, t);
            printf(", \"r2\": %.17g, \"r2_test\": ", r2);
            if (have_test_y)
                printf("%.17g", r2_test);
            else
                printf("null");
            printf(", \"read_seconds\": %.6f, \"fit_seconds\": %.6f}\n", t_read, t_fit);
        } else {
            printf("linreg: %zu rows x %zu features, %zu target%s, %s, %d rank%s\n", m->n_samples,
                   d, t, t == 1 ? "" : "s", o.cfg.alpha > 0 ? "ridge" : "least squares",
                   hpml_comm_size(comm), hpml_comm_size(comm) == 1 ? "" : "s");
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
            printf("  time         read %.3f s, fit %.3f s\n", t_read, t_fit);
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
