/* `hpml logreg`: L2-regularised logistic regression (binary / multinomial) by L-BFGS. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "hpml/linear.h"
#include "mlcli.h"
#include "opts.h"

#define CMD "logreg"

typedef struct {
    mlcli_opts_t co; /* --data, --target(-col), --test(-target), --out, --threads, ... */
    const char *pred_out, *proba_out, *model; /* --pred-out, --proba-out, --predict */
    hpml_logreg_config_t cfg;
    int no_intercept;
} opts_t;

#define OFF(field) offsetof(opts_t, field)
static const opt_t options[] = {
    MLCLI_OPT_DATA(opts_t, "training rows (.npy, IDX or CSV)"),
    MLCLI_OPT_TARGET(opts_t, "integer class labels, one per data row (one column)"),
    {.name = "C",
     .kind = OPT_DOUBLE,
     .off = OFF(cfg.C),
     .arg = "C",
     .help = "inverse regularisation strength (default 1)",
     .dmin = 0,
     .dmax = HUGE_VAL,
     .open_min = 1},
    {.name = "no-intercept",
     .kind = OPT_FLAG,
     .off = OFF(no_intercept),
     .help = "fit without an intercept"},
    {.name = "multinomial",
     .kind = OPT_FLAG,
     .off = OFF(cfg.multinomial),
     .help = "softmax model even for two classes (sklearn's\n"
             "multi_class='multinomial'; coef then holds class 1's row)"},
    {.name = "max-iter",
     .kind = OPT_SIZE,
     .off = OFF(cfg.max_iter),
     .arg = "N",
     .help = "L-BFGS iterations (default 100)",
     .min = 0,
     .max = 100000000L},
    {.name = "tol",
     .kind = OPT_DOUBLE,
     .off = OFF(cfg.tol),
     .arg = "T",
     .help = "stop when max |gradient| <= T, gradient of the mean objective\n"
             "(default 1e-4)",
     .dmin = 0,
     .dmax = HUGE_VAL},
    {.name = "ftol",
     .kind = OPT_DOUBLE,
     .off = OFF(cfg.ftol),
     .arg = "F",
     .help = "or when the objective decreases by <= F relative (default\n"
             "64 eps = 1.4e-14, as sklearn; 0 disables it, for --tol to rule)",
     .dmin = 0,
     .dmax = HUGE_VAL},
    MLCLI_OPT_TEST(opts_t,
                   "rows to predict (default: the training rows); with\n"
                   "--target-col, a FILE with the label column too is scored",
                   "labels of --test, to score the predictions"),
    {.name = "pred-out",
     .kind = OPT_STRING,
     .off = OFF(pred_out),
     .arg = "FILE",
     .help = "write the predicted labels (int64 .npy, or .csv)"},
    {.name = "proba-out",
     .kind = OPT_STRING,
     .off = OFF(proba_out),
     .arg = "FILE",
     .help = "write the class probabilities (rows x classes)"},
    MLCLI_OPT_OUT(opts_t, "PATH.npy: write the coefficients (rows x features) there;\n"
                          "otherwise PATH.coef.npy, PATH.intercept.npy, PATH.classes.npy\n"
                          "and PATH.multinomial.npy (the model for --predict PATH)"),
    {.name = "predict",
     .kind = OPT_STRING,
     .off = OFF(model),
     .arg = "PREFIX",
     .help = "no fit: load the model a fit wrote with --out PREFIX and\n"
             "predict --data; with --target-col, a FILE of features only\n"
             "is not scored"},
    MLCLI_OPT_COMMON(opts_t),
    {0},
};
#undef OFF

static const opt_cmd_t command = {
    .name = CMD,
    .usage = "Usage: mpirun -np N hpml logreg --data FILE (--target FILE | --target-col N) "
             "[options]\n"
             "       mpirun -np N hpml logreg --predict PREFIX --data FILE [--target FILE |\n"
             "                    --target-col N] [--pred-out FILE] [--proba-out FILE] "
             "[--json]\n\n"
             "L2-regularised logistic regression on integer class labels, minimising\n"
             "C * sum(log-loss) + |W|^2 / 2 (intercept unpenalised) by L-BFGS on allreduced\n"
             "gradients: scikit-learn's LogisticRegression(solver='lbfgs'). Two classes give a\n"
             "binary (sigmoid) model as sklearn's default; more classes a multinomial "
             "(softmax) one.\n"
             "With --predict, a model saved by --out PREFIX predicts --data instead, scored\n"
             "(accuracy, log-loss) when it has labels.\n",
};

static int parse(int argc, char **argv, opts_t *o)
{
    static const char *const fit_only[] = {"C",   "no-intercept", "multinomial", "max-iter",
                                           "tol", "ftol",         NULL};
    int rc;

    memset(o, 0, sizeof(*o));
    hpml_logreg_config_init(&o->cfg);
    if ((rc = mlcli_parse(&command, options, o, &o->co, argc, argv)) != 0)
        return rc;
    if (o->no_intercept)
        o->cfg.fit_intercept = 0;
    if (o->model != NULL)
        return mlcli_check_predict(CMD, &o->co, o->model, fit_only);
    return mlcli_check_target(CMD, &o->co, "label");
}

typedef struct {
    double t0;
} progress_t;

static void progress(void *ctx, size_t iter, double objective, double grad_norm)
{
    progress_t *p = ctx;

    fprintf(stderr, "[logreg] iter %4zu  objective %.12e  max|grad| %.3e  %.3f s\n", iter,
            objective, grad_norm, hpml_time() - p->t0);
}

/* Accuracy and mean log-loss (probabilities clipped at 1e-15, as sklearn's log_loss) of
 * the model on (rows) local rows, over all ranks. The rows' labels must be classes of the
 * model for the log-loss; unseen labels count as wrong with the clipped loss. */
static int score(hpml_comm_t *comm, const hpml_logreg_t *m, const double *x, const int64_t *y,
                 size_t rows, const int64_t *pred, double *acc, double *logloss)
{
    size_t K = m->n_classes;
    double s[3] = {0, 0, (double)rows},
           *proba = hpml_malloc((rows ? rows : 1) * K * sizeof(double));
    int rc;

    if (proba == NULL)
        return HPML_ERR_NOMEM;
    hpml_logreg_predict_proba(m, x, rows, proba);
    for (size_t i = 0; i < rows; i++) {
        double p = 1e-15;

        s[0] += pred[i] == y[i];
        for (size_t k = 0; k < K; k++)
            if (m->classes[k] == y[i])
                p = fmax(fmin(proba[i * K + k], 1.0 - 1e-15), 1e-15);
        s[1] -= log(p);
    }
    hpml_free(proba);
    if ((rc = hpml_allreduce(HPML_IN_PLACE, s, 3, HPML_F64, HPML_SUM, comm)) != 0)
        return rc;
    *acc = s[2] > 0 ? s[0] / s[2] : 0.0;
    *logloss = s[2] > 0 ? s[1] / s[2] : 0.0;
    return 0;
}

/* Write the probabilities of x (rows) under m to path (nothing for NULL), a file of the
 * output set os. Collective; 0 or CLI_EXIT_FAIL. */
static int write_proba(mlcli_outset_t *os, const char *path, const hpml_logreg_t *m,
                       const hpml_array_t *x)
{
    double *proba = NULL;
    int rc, status;

    if (path == NULL)
        return 0;
    proba = hpml_malloc((x->rows ? x->rows : 1) * m->n_classes * sizeof(double));
    rc = proba == NULL ? HPML_ERR_NOMEM : hpml_logreg_predict_proba(m, x->data, x->rows, proba);
    status = mlcli_check(CMD, os->comm, rc) ||
             mlcli_outset_write_rows(os, path, proba, HPML_F64, x->rows, m->n_classes);
    hpml_free(proba);
    return status ? CLI_EXIT_FAIL : 0;
}

/* 1 when the model files hold a consistent model: classes sorted and distinct, one row
 * of coefficients per class (a single row for two classes), as hpml_logreg_fit makes. */
static int model_ok(const hpml_logreg_t *m)
{
    size_t K = m->n_classes;

    if (K < 2 || m->n_rows != (K == 2 ? 1 : K) || (K > 2 && !m->multinomial))
        return 0;
    for (size_t k = 1; k < K; k++)
        if (m->classes[k - 1] >= m->classes[k])
            return 0;
    return 1;
}

/*
 * --predict PREFIX: the model from a fit's PREFIX.{coef,intercept,classes,multinomial}.npy
 * predicts --data, scored by the same score() as the --test path when the data has
 * labels. Returns the exit status.
 */
static int run_predict(const opts_t *o, hpml_comm_t *comm)
{
    hpml_array_t C = {0}, I = {0}, K = {0}, M = {0}, X = {0}, Y = {0};
    hpml_logreg_t m = {0};
    int64_t *y = NULL, *pred = NULL;
    double acc = 0, ll = 0, t0, t_read, t_pred;
    char cpath[4096], ipath[4096], kpath[4096], mpath[4096];
    int rc, status = CLI_EXIT_FAIL, have_y = 0;
    size_t d;
    mlcli_outset_t os;

    mlcli_outset_init(&os, CMD, comm);
    mlcli_outset_inputs(&os, &o->co);
    mlcli_outset_model(&os, o->model, "coef");
    mlcli_outset_model(&os, o->model, "intercept");
    mlcli_outset_model(&os, o->model, "classes");
    mlcli_outset_model(&os, o->model, "multinomial");
    mlcli_outset_add(&os, o->pred_out, "prediction");
    mlcli_outset_add(&os, o->proba_out, "p");
    if (mlcli_outset_check(&os))
        goto out;
    t0 = hpml_time();
    if (mlcli_read_model(CMD, comm, o->model, "coef", HPML_F64, cpath, sizeof(cpath), &C) ||
        mlcli_read_model(CMD, comm, o->model, "intercept", HPML_F64, ipath, sizeof(ipath), &I) ||
        mlcli_read_model(CMD, comm, o->model, "classes", HPML_I64, kpath, sizeof(kpath), &K) ||
        mlcli_read_model(CMD, comm, o->model, "multinomial", HPML_I64, mpath, sizeof(mpath), &M))
        goto out;
    d = C.cols;
    m.n_features = d;
    m.n_rows = C.rows;
    m.n_classes = K.rows;
    m.coef = C.data;
    m.intercept = I.data;
    m.classes = K.data;
    m.multinomial = *(const int64_t *)M.data != 0;
    if (mlcli_agree(CMD, comm,
                    I.rows != C.rows || I.cols != 1 || K.cols != 1 || M.rows * M.cols != 1 ||
                        !model_ok(&m),
                    "model files %s.*.npy do not hold one model: %zu x %zu coefficients, %zu x "
                    "%zu intercepts, %zu x %zu classes (sorted, distinct), multinomial %zu x %zu",
                    o->model, C.rows, C.cols, I.rows, I.cols, K.rows, K.cols, M.rows, M.cols))
        goto out;
    if (mlcli_load_predict(CMD, comm, &o->co, d, &X, &Y, &have_y) ||
        (have_y && mlcli_labels(CMD, comm, o->co.tgt.file ? o->co.tgt.file : o->co.data, &Y, &y)))
        goto out;
    t_read = hpml_time() - t0;

    t0 = hpml_time();
    pred = hpml_malloc((X.rows ? X.rows : 1) * sizeof(int64_t));
    rc = pred == NULL ? HPML_ERR_NOMEM : hpml_logreg_predict(&m, X.data, X.rows, pred);
    if (rc == 0 && have_y)
        rc = score(comm, &m, X.data, y, X.rows, pred, &acc, &ll);
    t_pred = hpml_time() - t0;
    if (mlcli_check(CMD, comm, rc) ||
        mlcli_outset_write_rows(&os, o->pred_out, pred, HPML_I64, X.rows, 0) ||
        write_proba(&os, o->proba_out, &m, &X) || mlcli_outset_commit(&os))
        goto out;

    if (hpml_comm_rank(comm) == 0) {
        if (o->co.json) {
            mlcli_json_head(CMD, o->co.data);
            printf(", \"model_prefix\": ");
            hpml_json_string(stdout, o->model);
            printf(", \"rows\": %zu, \"features\": %zu, \"classes\": [", X.total_rows, d);
            for (size_t k = 0; k < m.n_classes; k++)
                printf("%s%lld", k ? ", " : "", (long long)m.classes[k]);
            printf("], \"multinomial\": %s, \"ranks\": %d, \"accuracy\": ",
                   m.multinomial ? "true" : "false", hpml_comm_size(comm));
            cli_json_num(acc, have_y);
            printf(", \"log_loss\": ");
            cli_json_num(ll, have_y);
            mlcli_json_tail(t_read, "predict", t_pred);
        } else {
            printf("logreg: predict with %s: %zu rows x %zu features, %zu classes (%s), %d "
                   "rank%s\n",
                   o->model, X.total_rows, d, m.n_classes, m.multinomial ? "multinomial" : "binary",
                   hpml_comm_size(comm), mlcli_plural((size_t)hpml_comm_size(comm)));
            if (have_y)
                printf("  score        accuracy %.6f, log-loss %.6g\n", acc, ll);
            mlcli_print_time(t_read, "predict", t_pred);
            if (o->pred_out)
                printf("  predictions -> %s\n", o->pred_out);
            if (o->proba_out)
                printf("  probabilities -> %s\n", o->proba_out);
        }
        fflush(stdout);
    }
    status = CLI_EXIT_OK;
out:
    mlcli_outset_abort(&os);
    hpml_free(y);
    hpml_free(pred);
    hpml_array_free(&C);
    hpml_array_free(&I);
    hpml_array_free(&K);
    hpml_array_free(&M);
    hpml_array_free(&X);
    hpml_array_free(&Y);
    return status;
}

/* The fit's output set: the predictions and probabilities asked for, and the model's four
 * arrays under --out (each path buffer 4096 bytes), with the inputs they must not replace. */
static void fit_outputs(const opts_t *o, mlcli_outset_t *os, char *cpath, char *ipath, char *kpath,
                        char *mpath)
{
    mlcli_out_path(cpath, 4096, o->co.out, "coef", 1);
    mlcli_out_path(ipath, 4096, o->co.out, "intercept", 0);
    mlcli_out_path(kpath, 4096, o->co.out, "classes", 0);
    mlcli_out_path(mpath, 4096, o->co.out, "multinomial", 0);
    mlcli_outset_inputs(os, &o->co);
    mlcli_outset_add(os, o->pred_out, "prediction");
    mlcli_outset_add(os, o->proba_out, "p");
    mlcli_outset_add(os, cpath, "x");
    mlcli_outset_add(os, ipath, "intercept");
    mlcli_outset_add(os, kpath, "class");
    mlcli_outset_add(os, mpath, "multinomial");
}

int cmd_logreg(int argc, char **argv);
int cmd_logreg(int argc, char **argv)
{
    opts_t o;
    hpml_comm_t *comm = NULL;
    hpml_array_t X = {0}, Y = {0}, TX = {0}, TY = {0};
    hpml_logreg_t *m = NULL;
    int64_t *y = NULL, *ty = NULL, *pred = NULL, *tpred = NULL;
    double acc = 0, ll = 0, tacc = 0, tll = 0, t0, t_read, t_fit;
    char cpath[4096], ipath[4096], kpath[4096], mpath[4096];
    int64_t multi;
    progress_t pg;
    int rc, status = CLI_EXIT_FAIL, have_test_y = 0;
    size_t d;
    const hpml_array_t *px;
    const int64_t *ppred;
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
    fit_outputs(&o, &os, cpath, ipath, kpath, mpath);
    if (mlcli_outset_check(&os))
        goto out;

    t0 = hpml_time();
    if (mlcli_load(CMD, comm, o.co.data, &o.co.tgt, &X, &Y) ||
        mlcli_labels(CMD, comm, o.co.tgt.file ? o.co.tgt.file : o.co.data, &Y, &y))
        goto out;
    t_read = hpml_time() - t0;
    d = X.cols;
    if (o.co.verbose)
        fprintf(stderr, "[logreg] read %zu rows x %zu features in %.3f s\n", X.total_rows, d,
                t_read);

    pg.t0 = hpml_time();
    if (o.co.verbose) {
        o.cfg.progress = progress;
        o.cfg.progress_ctx = &pg;
    }
    t0 = hpml_time();
    rc = hpml_logreg_fit(comm, X.data, y, X.rows, d, &o.cfg, &m);
    t_fit = hpml_time() - t0;
    if (mlcli_check(CMD, comm, rc))
        goto out;
    pred = hpml_malloc((X.rows ? X.rows : 1) * sizeof(int64_t));
    rc = pred == NULL ? HPML_ERR_NOMEM : hpml_logreg_predict(m, X.data, X.rows, pred);
    if (rc == 0)
        rc = score(comm, m, X.data, y, X.rows, pred, &acc, &ll);
    if (mlcli_check(CMD, comm, rc))
        goto out;
    px = &X;
    ppred = pred;

    if (o.co.test != NULL) {
        if (mlcli_load_test(CMD, comm, &o.co, d, &TX, &TY, &have_test_y))
            goto out;
        if (have_test_y &&
            mlcli_labels(CMD, comm, o.co.test_target ? o.co.test_target : o.co.test, &TY, &ty))
            goto out;
        tpred = hpml_malloc((TX.rows ? TX.rows : 1) * sizeof(int64_t));
        rc = tpred == NULL ? HPML_ERR_NOMEM : hpml_logreg_predict(m, TX.data, TX.rows, tpred);
        if (rc == 0 && have_test_y)
            rc = score(comm, m, TX.data, ty, TX.rows, tpred, &tacc, &tll);
        if (mlcli_check(CMD, comm, rc))
            goto out;
        px = &TX;
        ppred = tpred;
    }
    multi = m->multinomial;
    if (mlcli_outset_write_rows(&os, o.pred_out, ppred, HPML_I64, px->rows, 0) ||
        write_proba(&os, o.proba_out, m, px) ||
        mlcli_outset_write(&os, cpath, m->coef, HPML_F64, m->n_rows, d) ||
        mlcli_outset_write_vec(&os, ipath, m->intercept, HPML_F64, m->n_rows) ||
        mlcli_outset_write_vec(&os, kpath, m->classes, HPML_I64, m->n_classes) ||
        mlcli_outset_write_vec(&os, mpath, &multi, HPML_I64, 1) || mlcli_outset_commit(&os))
        goto out;

    if (hpml_comm_rank(comm) == 0) {
        if (o.co.json) {
            mlcli_json_head(CMD, o.co.data);
            printf(", \"rows\": %zu, \"features\": %zu, \"classes\": [", m->n_samples, d);
            for (size_t k = 0; k < m->n_classes; k++)
                printf("%s%lld", k ? ", " : "", (long long)m->classes[k]);
            printf("], \"multinomial\": %s, \"ranks\": %d, \"C\": %.17g, \"n_iter\": %zu, "
                   "\"converged\": %s, \"objective\": %.17g, \"coef\": ",
                   m->multinomial ? "true" : "false", hpml_comm_size(comm), o.cfg.C, m->n_iter,
                   m->converged ? "true" : "false", m->objective);
            mlcli_json_matrix(m->coef, m->n_rows, d);
            printf(", \"intercept\": ");
            mlcli_json_doubles(m->intercept, m->n_rows);
            printf(", \"accuracy\": %.17g, \"log_loss\": %.17g", acc, ll);
            printf(", \"test_accuracy\": ");
            cli_json_num(tacc, have_test_y);
            printf(", \"test_log_loss\": ");
            cli_json_num(tll, have_test_y);
            mlcli_json_tail(t_read, "fit", t_fit);
        } else {
            printf("logreg: %zu rows x %zu features, %zu classes (%s), C=%g, %d rank%s\n",
                   m->n_samples, d, m->n_classes, m->multinomial ? "multinomial" : "binary",
                   o.cfg.C, hpml_comm_size(comm), mlcli_plural((size_t)hpml_comm_size(comm)));
            printf("  iterations   %zu (%s)\n", m->n_iter,
                   m->converged ? "converged" : "max-iter reached, not converged");
            printf("  objective    %.12g (mean log-loss + |W|^2/(2Cn))\n", m->objective);
            printf("  train        accuracy %.6f, log-loss %.6g\n", acc, ll);
            if (have_test_y)
                printf("  test         accuracy %.6f, log-loss %.6g\n", tacc, tll);
            mlcli_print_time(t_read, "fit", t_fit);
            if (cpath[0])
                printf("  coef      -> %s\n", cpath);
            if (ipath[0])
                printf("  intercept -> %s\n", ipath);
            if (kpath[0])
                printf("  classes   -> %s\n", kpath);
            if (o.pred_out)
                printf("  predictions -> %s\n", o.pred_out);
            if (o.proba_out)
                printf("  probabilities -> %s\n", o.proba_out);
        }
        fflush(stdout);
    }
    status = CLI_EXIT_OK;
out:
    mlcli_outset_abort(&os);
    hpml_logreg_destroy(m);
    hpml_free(y);
    hpml_free(ty);
    hpml_free(pred);
    hpml_free(tpred);
    hpml_array_free(&X);
    hpml_array_free(&Y);
    hpml_array_free(&TX);
    hpml_array_free(&TY);
    hpml_comm_destroy(comm);
    return status;
}
