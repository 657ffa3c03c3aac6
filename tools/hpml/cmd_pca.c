/* `hpml pca`: PCA / truncated SVD of row-distributed data. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "hpml/decomp.h"
#include "mlcli.h"
#include "opts.h"

#define CMD "pca"

typedef struct {
    mlcli_opts_t co; /* --data, --out, --threads, --json, -v */
    const char *transform_out;
    hpml_pca_config_t cfg;
    int no_center;
} opts_t;

static int parse_solver(void *dest, const char *arg, const char *shown)
{
    opts_t *o = dest;

    if (strcmp(arg, "full") == 0)
        o->cfg.solver = HPML_PCA_FULL;
    else if (strcmp(arg, "randomized") == 0)
        o->cfg.solver = HPML_PCA_RANDOMIZED;
    else
        return cli_usage_error(CMD, "%s must be full or randomized (got '%s')", shown, arg);
    return 0;
}

#define OFF(field) offsetof(opts_t, field)
static const opt_t options[] = {
    MLCLI_OPT_DATA(opts_t, "input rows (required)"),
    {.name = "n-components",
     .letter = 'k',
     .kind = OPT_SIZE,
     .off = OFF(cfg.n_components),
     .arg = "K",
     .help = "components to keep (default 2)",
     .min = 1,
     .max = 1L << 30,
     .shown = "-k"},
    {.name = "solver",
     .kind = OPT_FUNC,
     .arg = "S",
     .fn = parse_solver,
     .help = "full (default): allreduced d x d covariance + LAPACK dsyevr;\n"
             "randomized: randomized SVD (Halko et al.), never forms a\n"
             "d x d matrix: for wide data"},
    {.name = "no-center",
     .kind = OPT_FLAG,
     .off = OFF(no_center),
     .help = "truncated SVD: do not subtract the mean"},
    {.name = "oversample",
     .kind = OPT_SIZE,
     .off = OFF(cfg.oversample),
     .arg = "N",
     .help = "randomized: extra columns (default 10)",
     .min = 0,
     .max = 1 << 20},
    {.name = "n-iter",
     .kind = OPT_INT,
     .off = OFF(cfg.n_iter),
     .arg = "N",
     .help = "randomized: power iterations (default: 7 if k < 0.1 min(n, d),\n"
             "else 4, as sklearn)",
     .min = 0,
     .max = 1000},
    {.name = "seed",
     .kind = OPT_U64,
     .off = OFF(cfg.seed),
     .arg = "S",
     .help = "randomized: seed of the Gaussian test matrix (default 0)",
     .min = 0,
     .max = LONG_MAX},
    MLCLI_OPT_OUT(opts_t, "PATH.npy: write the components (k x d) there; otherwise\n"
                          "PATH.{components,explained_variance,explained_variance_ratio,\n"
                          "singular_values,mean}.npy"),
    {.name = "transform-out",
     .kind = OPT_STRING,
     .off = OFF(transform_out),
     .arg = "FILE",
     .help = "write the data projected on the components (n x k)"},
    MLCLI_OPT_COMMON(opts_t),
    {0},
};
#undef OFF

static const opt_cmd_t command = {
    .name = CMD,
    .usage = "Usage: mpirun -np N hpml pca --data FILE [-k K] [options]\n\n"
             "Principal component analysis of the rows of FILE (.npy, IDX or CSV), as\n"
             "scikit-learn's PCA; with --no-center, truncated SVD as TruncatedSVD. Components\n"
             "follow sklearn's svd_flip sign convention, so they match entry by entry.\n",
};

static int parse(int argc, char **argv, opts_t *o)
{
    int rc;

    memset(o, 0, sizeof(*o));
    hpml_pca_config_init(&o->cfg);
    if ((rc = mlcli_parse(&command, options, o, &o->co, argc, argv)) != 0)
        return rc;
    if (o->no_center)
        o->cfg.center = 0;
    return 0;
}

int cmd_pca(int argc, char **argv);
int cmd_pca(int argc, char **argv)
{
    static const char *names[] = {"components", "explained_variance", "explained_variance_ratio",
                                  "singular_values", "mean"};
    /* The CSV headers: components and mean have a column per feature. */
    static const char *heads[] = {"x", "explained_variance", "explained_variance_ratio",
                                  "singular_value", "x"};
    opts_t o;
    hpml_comm_t *comm = NULL;
    hpml_array_t X = {0};
    hpml_pca_t *p = NULL;
    double *tr = NULL, t0, t_read, t_fit;
    char path[5][4096];
    mlcli_outset_t os;
    int rc, status = CLI_EXIT_FAIL;
    size_t k, d, n;

    if ((rc = parse(argc, argv, &o)) != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if ((comm = mlcli_start(CMD, &o.co)) == NULL)
        return CLI_EXIT_FAIL;
    /* The outputs are one set: checked now, replaced together after the fit. */
    mlcli_outset_init(&os, CMD, comm);
    mlcli_outset_inputs(&os, &o.co);
    for (int i = 0; i < 5; i++) {
        mlcli_out_path(path[i], sizeof(path[i]), o.co.out, names[i], i == 0);
        mlcli_outset_add(&os, path[i], heads[i]);
    }
    mlcli_outset_add(&os, o.transform_out, "pc");
    if (mlcli_outset_check(&os))
        goto out;

    t0 = hpml_time();
    if (mlcli_load(CMD, comm, o.co.data, NULL, &X, NULL))
        goto out;
    t_read = hpml_time() - t0;
    n = X.total_rows;
    d = X.cols;
    k = o.cfg.n_components;
    if (mlcli_agree(CMD, comm, k > (n < d ? n : d),
                    "-k %zu is too large: %s has %zu rows x %zu columns (k <= min of both)", k,
                    o.co.data, n, d))
        goto out;
    if (o.co.verbose)
        fprintf(stderr, "[pca] read %zu rows x %zu cols in %.3f s; %s solver, k=%zu\n", n, d,
                t_read, o.cfg.solver == HPML_PCA_RANDOMIZED ? "randomized" : "full", k);
    t0 = hpml_time();
    rc = hpml_pca_fit(comm, X.data, X.rows, d, &o.cfg, &p);
    t_fit = hpml_time() - t0;
    if (mlcli_check(CMD, comm, rc))
        goto out;
    if (o.co.verbose)
        fprintf(stderr, "[pca] fitted in %.3f s\n", t_fit);

    if (mlcli_outset_write(&os, path[0], p->components, HPML_F64, k, d) ||
        mlcli_outset_write_vec(&os, path[1], p->explained_variance, HPML_F64, k) ||
        mlcli_outset_write_vec(&os, path[2], p->explained_variance_ratio, HPML_F64, k) ||
        mlcli_outset_write_vec(&os, path[3], p->singular_values, HPML_F64, k) ||
        mlcli_outset_write_vec(&os, path[4], p->mean, HPML_F64, d))
        goto out;
    if (o.transform_out != NULL) {
        tr = hpml_malloc((X.rows ? X.rows : 1) * k * sizeof(double));
        rc = tr == NULL ? HPML_ERR_NOMEM : hpml_pca_transform(p, X.data, X.rows, tr);
        if (mlcli_check(CMD, comm, rc) ||
            mlcli_outset_write_rows(&os, o.transform_out, tr, HPML_F64, X.rows, k))
            goto out;
    }
    if (mlcli_outset_commit(&os))
        goto out;

    if (hpml_comm_rank(comm) == 0) {
        double cum = 0.0;

        for (size_t j = 0; j < k; j++)
            cum += p->explained_variance_ratio[j];
        if (o.co.json) {
            mlcli_json_head(CMD, o.co.data);
            printf(", \"rows\": %zu, \"features\": %zu, \"n_components\": %zu, \"ranks\": %d, "
                   "\"solver\": \"%s\", \"center\": %s, \"explained_variance\": ",
                   n, d, k, hpml_comm_size(comm),
                   o.cfg.solver == HPML_PCA_RANDOMIZED ? "randomized" : "full",
                   o.cfg.center ? "true" : "false");
            mlcli_json_doubles(p->explained_variance, k);
            printf(", \"explained_variance_ratio\": ");
            mlcli_json_doubles(p->explained_variance_ratio, k);
            printf(", \"singular_values\": ");
            mlcli_json_doubles(p->singular_values, k);
            printf(", \"total_variance\": %.17g", p->total_variance);
            mlcli_json_tail(t_read, "fit", t_fit);
        } else {
            printf("pca: %zu rows x %zu cols, %zu components, %s solver%s, %d rank%s\n", n, d, k,
                   o.cfg.solver == HPML_PCA_RANDOMIZED ? "randomized" : "full",
                   o.cfg.center ? "" : " (truncated SVD, not centred)", hpml_comm_size(comm),
                   mlcli_plural((size_t)hpml_comm_size(comm)));
            printf("  explained variance      ");
            mlcli_print_doubles(p->explained_variance, k, 10);
            printf("\n  explained variance ratio");
            mlcli_print_doubles(p->explained_variance_ratio, k, 10);
            printf("\n  (cumulative %.6g)\n  singular values         ", cum);
            mlcli_print_doubles(p->singular_values, k, 10);
            putchar('\n');
            mlcli_print_time(t_read, "fit", t_fit);
            for (int i = 0; i < 5; i++)
                if (path[i][0])
                    printf("  %-24s -> %s\n", names[i], path[i]);
            if (o.transform_out)
                printf("  %-24s -> %s\n", "transform", o.transform_out);
        }
        fflush(stdout);
    }
    status = CLI_EXIT_OK;
out:
    mlcli_outset_abort(&os);
    hpml_pca_destroy(p);
    hpml_free(tr);
    hpml_array_free(&X);
    hpml_comm_destroy(comm);
    return status;
}
