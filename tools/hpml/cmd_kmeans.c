/* `hpml kmeans`: distributed K-Means clustering (fit, or predict with given centroids). */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"
#include "mlcli.h"
#include "opts.h"
#include "hpml/comm.h"
#include "hpml/core.h"
#include "hpml/io.h"
#include "hpml/kmeans.h"

#define CMD "kmeans"

typedef struct opts {
    const char *data, *init_file, *out, *labels, *predict;
    hpml_kmeans_params_t p;
    hpml_dtype_t dtype;
    int json, verbose, threads;
} opts_t;

/* Does s end with suf, in either case (as the readers match names)? */
static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcasecmp(s + a - b, suf) == 0;
}

static int parse_init(void *dest, const char *arg, const char *shown)
{
    opts_t *o = dest;

    if (hpml_kmeans_init_parse(arg, &o->p.init) == 0)
        return 0;
    if (!ends_with(arg, ".npy"))
        return cli_usage_error(
            CMD, "%s must be k-means++, k-means||, random or a .npy file (got '%s')", shown, arg);
    o->init_file = arg;
    o->p.init = HPML_KMEANS_INIT_ARRAY;
    return 0;
}

static int parse_dtype(void *dest, const char *arg, const char *shown)
{
    opts_t *o = dest;

    if (hpml_dtype_parse(arg, &o->dtype) != 0 || (o->dtype != HPML_F32 && o->dtype != HPML_F64))
        return cli_usage_error(CMD, "%s must be f32 or f64 (got '%s')", shown, arg);
    return 0;
}

#define OFF(field) offsetof(opts_t, field)
static const opt_t options[] = {
    {.name = "data",
     .kind = OPT_STRING,
     .off = OFF(data),
     .arg = "FILE",
     .help = "input rows (required)"},
    {.name = "clusters",
     .letter = 'k',
     .kind = OPT_SIZE,
     .off = OFF(p.k),
     .arg = "K",
     .help = "number of clusters (or taken from --init FILE / --predict)",
     .min = 1,
     .max = INT32_MAX,
     .shown = "-k"},
    {.name = "init",
     .kind = OPT_FUNC,
     .arg = "METHOD",
     .fn = parse_init,
     .help = "k-means++ (default), k-means|| (for large data), random,\n"
             "or a .npy file of k initial centroids"},
    {.name = "max-iter",
     .kind = OPT_INT,
     .off = OFF(p.max_iter),
     .arg = "N",
     .help = "Lloyd iterations per run (default 300)",
     .min = 1,
     .max = 1000000000},
    {.name = "tol",
     .kind = OPT_DOUBLE,
     .off = OFF(p.tol),
     .arg = "T",
     .help = "stop when the squared centre shift <= T * mean feature\n"
             "variance (default 1e-4); a run also stops when no label changes",
     .dmin = 0,
     .dmax = HUGE_VAL},
    {.name = "n-init",
     .kind = OPT_INT,
     .off = OFF(p.n_init),
     .arg = "N",
     .help = "runs from different initialisations, best inertia kept\n"
             "(default: 10 for random, 1 otherwise)",
     .min = 1,
     .max = 100000},
    {.name = "seed",
     .kind = OPT_U64,
     .off = OFF(p.seed),
     .arg = "S",
     .help = "random seed (default 0)",
     .min = 0,
     .max = LONG_MAX},
    {.name = "dtype",
     .kind = OPT_FUNC,
     .arg = "f32|f64",
     .fn = parse_dtype,
     .help = "computation type (default f32)"},
    {.name = "out",
     .kind = OPT_STRING,
     .off = OFF(out),
     .arg = "PATH",
     .help = "FILE.npy: write the centroids there; otherwise PATH is a prefix:\n"
             "PATH.centroids.npy and PATH.labels.npy"},
    {.name = "labels",
     .kind = OPT_STRING,
     .off = OFF(labels),
     .arg = "FILE",
     .help = "write the labels (int32 .npy, or .csv) there"},
    {.name = "predict",
     .kind = OPT_STRING,
     .off = OFF(predict),
     .arg = "FILE",
     .help = "centroids (.npy, k x cols): label the data, no fitting"},
    {.name = "threads",
     .kind = OPT_INT,
     .off = OFF(threads),
     .arg = "N",
     .help = "BLAS threads per rank (default 1)",
     .min = 1,
     .max = 1024},
    {.name = "tile",
     .kind = OPT_SIZE,
     .off = OFF(p.tile_rows),
     .arg = "ROWS",
     .help = "rows per distance tile (default: from cols and k)",
     .min = 1,
     .max = 1 << 20},
    {.name = "json", .kind = OPT_FLAG, .off = OFF(json), .help = "print the summary as JSON"},
    {.name = "verbose",
     .letter = 'v',
     .kind = OPT_FLAG,
     .off = OFF(verbose),
     .help = "progress on stderr (default: only when stderr is a terminal)"},
    {0},
};
#undef OFF

static const opt_cmd_t command = {
    .name = CMD,
    .usage = "Usage: mpirun -np N hpml kmeans --data FILE -k K [options]\n"
             "       mpirun -np N hpml kmeans --data FILE --predict CENTROIDS.npy [options]\n\n"
             "Cluster the rows of FILE (.npy, IDX or CSV; each rank reads its own block of rows)\n"
             "with Lloyd's K-Means, as scikit-learn's KMeans(algorithm=\"lloyd\") does. With\n"
             "--predict, assign each row to the nearest of the given centroids instead.\n",
    .epilog = "The summary goes to stdout (rank 0). Labels are gathered to rank 0 to be written.\n",
};

static int parse(int argc, char **argv, opts_t *o)
{
    const opt_set_t set = {options, o};
    int rc, operand;

    memset(o, 0, sizeof(*o));
    hpml_kmeans_params_default(&o->p);
    o->dtype = HPML_F32;
    o->threads = 1;
    if ((rc = opts_parse(&command, &set, 1, argc, argv, &operand)) != 0)
        return rc;
    if (o->data == NULL)
        return cli_usage_error(CMD, "--data FILE is required");
    if (cli_check_prefix(CMD, "--out", o->out) != 0)
        return CLI_EXIT_USAGE;
    if (o->predict != NULL) {
        if (o->init_file || o->p.init != HPML_KMEANS_INIT_KMEANSPP)
            return cli_usage_error(CMD, "--predict and --init cannot be combined");
        /* --out FILE.npy names the centroids, which --predict does not write: without
         * this check the run would succeed and write nothing. */
        if (o->out != NULL && ends_with(o->out, ".npy"))
            return cli_usage_error(CMD,
                                   "--predict writes no centroids: --out '%s' would write "
                                   "nothing; use --labels FILE or --out PREFIX",
                                   o->out);
    } else if (!opts_given("clusters") && o->init_file == NULL) {
        return cli_usage_error(CMD, "-k K is required (or --init FILE.npy)");
    }
    return 0;
}

static void progress(const hpml_kmeans_progress_t *p, void *user)
{
    (void)user;
    fprintf(stderr, "[kmeans] run %d iter %4d  inertia %.6e  shift %.3e  changed %zu  %.1f ms\n",
            p->run, p->iter, p->inertia, p->shift, p->changed, p->seconds * 1e3);
}

/* Read a whole small array (centroids) on every rank. */
static int read_all(const char *path, hpml_dtype_t dt, hpml_array_t *a)
{
    size_t rows, cols;
    hpml_dtype_t stored;
    int rc = hpml_io_shape(path, HPML_FMT_AUTO, &rows, &cols, &stored);

    if (rc != 0)
        return rc;
    return hpml_io_read_rows(path, HPML_FMT_AUTO, dt, 0, rows, 1, a);
}

/* One run: its inputs, results and times. */
typedef struct {
    hpml_comm_t *comm;
    hpml_array_t X, C0;
    hpml_kmeans_result_t res;
    int32_t *labels; /* this rank's rows' labels (res.labels when fitted) */
    double inertia, t_read, t_fit;
    char cpath[4096], lpath[4096]; /* outputs, "" for none */
} run_t;

/* The output paths of --out, --labels (--predict fits no centroids to write). */
static void output_paths(const opts_t *o, run_t *r)
{
    r->cpath[0] = r->lpath[0] = '\0';
    if (o->out != NULL) {
        if (ends_with(o->out, ".npy")) {
            snprintf(r->cpath, sizeof(r->cpath), "%s", o->out);
        } else {
            snprintf(r->cpath, sizeof(r->cpath), "%s.centroids.npy", o->out);
            snprintf(r->lpath, sizeof(r->lpath), "%s.labels.npy", o->out);
        }
    }
    if (o->labels != NULL)
        snprintf(r->lpath, sizeof(r->lpath), "%s", o->labels);
    if (o->predict != NULL)
        r->cpath[0] = '\0';
}

/* Centroids given in a file (--init FILE or --predict FILE), on every rank, then this
 * rank's block of the data. Agreed; 0 or CLI_EXIT_FAIL. */
static int load(opts_t *o, run_t *r)
{
    const char *f = o->init_file ? o->init_file : o->predict;
    int rank = hpml_comm_rank(r->comm), rc;
    double t0;

    if (f != NULL) {
        if (mlcli_check(CMD, r->comm, read_all(f, o->dtype, &r->C0)) != 0 ||
            mlcli_agree(CMD, r->comm, opts_given("clusters") && r->C0.rows != o->p.k,
                        "%s holds %zu centroids but -k is %zu", f, r->C0.rows, o->p.k))
            return CLI_EXIT_FAIL;
        o->p.k = r->C0.rows;
        o->p.init_centroids = r->C0.data;
    }
    t0 = hpml_time();
    rc = hpml_io_read_block(o->data, HPML_FMT_AUTO, o->dtype, rank, hpml_comm_size(r->comm), 1,
                            &r->X);
    if (mlcli_check(CMD, r->comm, rc) != 0)
        return CLI_EXIT_FAIL;
    r->t_read = hpml_time() - t0;
    if (mlcli_agree(CMD, r->comm, r->C0.data != NULL && r->C0.cols != r->X.cols,
                    "%s has %zu columns but %s has %zu", f, r->C0.cols, o->data, r->X.cols) ||
        mlcli_agree(CMD, r->comm, o->p.k > r->X.total_rows,
                    "k=%zu is larger than the %zu rows of %s", o->p.k, r->X.total_rows, o->data))
        return CLI_EXIT_FAIL;
    return 0;
}

/* Fit (the slowest rank's times reported: the job is as fast as it), or predict with
 * the given centroids. Agreed; 0 or CLI_EXIT_FAIL. */
static int compute(opts_t *o, run_t *r)
{
    const hpml_array_t *X = &r->X;
    double t0 = hpml_time(), tmax[4];
    int rc;

    if (o->predict != NULL) {
        r->labels = hpml_malloc((X->rows ? X->rows : 1) * sizeof(int32_t));
        rc = r->labels != NULL ? hpml_kmeans_predict(r->comm, o->dtype, X->data, X->rows, X->cols,
                                                     r->C0.data, o->p.k, r->labels, &r->inertia)
                               : hpml_set_error(HPML_ERR_NOMEM, "out of memory for the labels");
        r->t_fit = hpml_time() - t0;
        return mlcli_check(CMD, r->comm, rc);
    }
    if (o->verbose)
        o->p.progress = progress;
    rc = hpml_kmeans_fit(r->comm, &o->p, o->dtype, X->data, X->rows, X->cols, &r->res);
    r->t_fit = hpml_time() - t0;
    if (mlcli_check(CMD, r->comm, rc) != 0)
        return CLI_EXIT_FAIL;
    r->labels = r->res.labels;
    r->inertia = r->res.inertia;
    tmax[0] = r->res.init_seconds;
    tmax[1] = r->res.lloyd_seconds;
    tmax[2] = r->res.iter_seconds;
    tmax[3] = r->t_fit;
    rc = hpml_allreduce(HPML_IN_PLACE, tmax, 4, HPML_F64, HPML_MAX, r->comm);
    if (mlcli_check(CMD, r->comm, rc) != 0)
        return CLI_EXIT_FAIL;
    r->res.init_seconds = tmax[0];
    r->res.lloyd_seconds = tmax[1];
    r->res.iter_seconds = tmax[2];
    r->t_fit = tmax[3];
    return 0;
}

/* The --init in words, and the runs made (given centroids make one whatever --n-init
 * says; text and JSON agree). */
static const char *init_words(const opts_t *o)
{
    return o->predict ? "-" : o->init_file ? o->init_file : hpml_kmeans_init_name(o->p.init);
}

static int runs_made(const opts_t *o)
{
    if (o->p.init == HPML_KMEANS_INIT_ARRAY)
        return 1;
    return o->p.n_init ? o->p.n_init : o->p.init == HPML_KMEANS_INIT_RANDOM ? 10 : 1;
}

static void json_path_or_null(const char *path)
{
    if (path[0])
        hpml_json_string(stdout, path);
    else
        printf("null");
}

static void print_json(const opts_t *o, const run_t *r)
{
    const hpml_kmeans_result_t *res = &r->res;
    double per_iter = res->total_iter ? res->iter_seconds / res->total_iter : 0.0;

    cli_json_begin(CMD);
    printf(", \"mode\": \"%s\", \"data\": ", o->predict ? "predict" : "fit");
    hpml_json_string(stdout, o->data);
    printf(", \"rows\": %zu, \"features\": %zu, \"k\": %zu, \"ranks\": %d, \"dtype\": \"%s\", "
           "\"init\": ",
           r->X.total_rows, r->X.cols, o->p.k, hpml_comm_size(r->comm), hpml_dtype_name(o->dtype));
    hpml_json_string(stdout, init_words(o));
    printf(", \"inertia\": %.17g", r->inertia);
    if (!o->predict)
        printf(", \"n_iter\": %d, \"converged\": %s, \"strict_convergence\": %s, "
               "\"n_init\": %d, \"best_run\": %d, \"total_iter\": %d, "
               "\"relocated\": %zu, \"empty_clusters\": %zu, \"init_seconds\": %.6f, "
               "\"lloyd_seconds\": %.6f, \"iterations\": %d, "
               "\"lloyd_iter_seconds\": %.6f, \"per_iter_seconds\": %.6f",
               res->n_iter, res->converged ? "true" : "false", res->strict ? "true" : "false",
               runs_made(o), res->best_run, res->total_iter, res->relocated, res->empty,
               res->init_seconds, res->lloyd_seconds, res->total_iter, res->iter_seconds, per_iter);
    printf(", \"read_seconds\": %.6f, \"compute_seconds\": %.6f, \"centroids\": ", r->t_read,
           r->t_fit);
    json_path_or_null(r->cpath);
    printf(", \"labels\": ");
    json_path_or_null(r->lpath);
    printf("}\n");
}

static void print_text(const opts_t *o, const run_t *r)
{
    const hpml_kmeans_result_t *res = &r->res;
    double per_iter = res->total_iter ? res->iter_seconds / res->total_iter : 0.0;
    int P = hpml_comm_size(r->comm);

    printf("kmeans %s: %zu rows x %zu cols, k=%zu, %d rank%s, %s, init %s\n",
           o->predict ? "predict" : "fit", r->X.total_rows, r->X.cols, o->p.k, P, P == 1 ? "" : "s",
           hpml_dtype_name(o->dtype), init_words(o));
    printf("  inertia      %.10g\n", r->inertia);
    if (!o->predict) {
        printf("  iterations   %d (%s)\n", res->n_iter,
               res->strict      ? "converged: labels unchanged"
               : res->converged ? "converged: centre shift within tol"
                                : "max-iter reached");
        printf("  runs         %d (best %d), %d iterations in all\n", runs_made(o), res->best_run,
               res->total_iter);
        if (res->relocated || res->empty)
            printf("  empty        %zu refilled, %zu left empty\n", res->relocated, res->empty);
        printf("  time         read %.3f s, init %.3f s, lloyd %.3f s (%.2f ms per "
               "iteration, final pass excluded; slowest rank)\n",
               r->t_read, res->init_seconds, res->lloyd_seconds, per_iter * 1e3);
    } else {
        printf("  time         read %.3f s, predict %.3f s\n", r->t_read, r->t_fit);
    }
    if (r->cpath[0])
        printf("  centroids -> %s\n", r->cpath);
    if (r->lpath[0])
        printf("  labels    -> %s\n", r->lpath);
}

int cmd_kmeans(int argc, char **argv)
{
    opts_t o;
    run_t r;
    mlcli_outset_t os;
    int rc, status = CLI_EXIT_FAIL;

    memset(&r, 0, sizeof(r));
    if ((rc = parse(argc, argv, &o)) != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (mlcli_comm_create(CMD, &r.comm) != 0)
        return CLI_EXIT_FAIL;
    hpml_blas_set_threads(o.threads);
    o.verbose = hpml_comm_rank(r.comm) == 0 && (isatty(2) || o.verbose);
    /* The outputs are one set: checked now, replaced together after the run. */
    output_paths(&o, &r);
    mlcli_outset_init(&os, CMD, r.comm);
    mlcli_outset_input(&os, "--data", o.data);
    mlcli_outset_input(&os, "--init", o.init_file);
    mlcli_outset_input(&os, "--predict", o.predict);
    mlcli_outset_add(&os, r.cpath, "x");
    mlcli_outset_add(&os, r.lpath, "label");
    if (mlcli_outset_check(&os) != 0 || load(&o, &r) != 0 || compute(&o, &r) != 0)
        goto out;
    if (mlcli_outset_write(&os, r.cpath, r.res.centroids, o.dtype, o.p.k, r.X.cols) != 0 ||
        mlcli_outset_write_rows(&os, r.lpath, r.labels, HPML_I32, r.X.rows, 0) != 0 ||
        mlcli_outset_commit(&os) != 0)
        goto out;
    if (hpml_comm_rank(r.comm) == 0) {
        if (o.json)
            print_json(&o, &r);
        else
            print_text(&o, &r);
        fflush(stdout);
    }
    status = CLI_EXIT_OK;
out:
    mlcli_outset_abort(&os);
    if (r.labels != r.res.labels)
        hpml_free(r.labels);
    hpml_kmeans_result_free(&r.res);
    hpml_array_free(&r.X);
    hpml_array_free(&r.C0);
    hpml_comm_destroy(r.comm);
    return status;
}
