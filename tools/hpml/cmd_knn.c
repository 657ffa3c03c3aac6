/* `hpml knn`: exact k-nearest-neighbour search and classification over MPI. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "hpml/knn.h"
#include "mlcli.h"
#include "opts.h"

#define CMD "knn"

typedef struct {
    mlcli_opts_t co; /* --data, --out, --threads, --json, -v */
    const char *query, *labels, *qlabels, *pred_out;
    size_t k;
} opts_t;

#define OFF(field) offsetof(opts_t, field)
static const opt_t options[] = {
    MLCLI_OPT_DATA(opts_t, "reference rows (.npy, IDX or CSV; required)"),
    {.name = "query",
     .kind = OPT_STRING,
     .off = OFF(query),
     .arg = "FILE",
     .help = "query rows (default: the reference rows themselves, so each\n"
             "row is its own first neighbour)"},
    {.name = "neighbors",
     .letter = 'k',
     .kind = OPT_SIZE,
     .off = OFF(k),
     .arg = "K",
     .help = "neighbours per query (default 5)",
     .min = 1,
     .max = 1 << 20,
     .shown = "-k"},
    {.name = "labels",
     .kind = OPT_STRING,
     .off = OFF(labels),
     .arg = "FILE",
     .help = "integer class labels of the reference rows (one column)"},
    {.name = "query-labels",
     .kind = OPT_STRING,
     .off = OFF(qlabels),
     .arg = "FILE",
     .help = "true labels of the queries: report the accuracy"},
    MLCLI_OPT_OUT(opts_t, "PATH.npy: write the indices (queries x k, int64) there;\n"
                          "otherwise PATH.indices.npy, PATH.distances.npy and, with\n"
                          "--labels, PATH.predictions.npy"),
    {.name = "pred-out",
     .kind = OPT_STRING,
     .off = OFF(pred_out),
     .arg = "FILE",
     .help = "write the predicted labels (int64 .npy, or .csv)"},
    MLCLI_OPT_COMMON(opts_t),
    {0},
};
#undef OFF

static const opt_cmd_t command = {
    .name = CMD,
    .usage = "Usage: mpirun -np N hpml knn --data REF [--query Q] [-k K] [options]\n\n"
             "Exact k nearest neighbours in Euclidean distance (brute force with BLAS), as\n"
             "scikit-learn's NearestNeighbors(algorithm='brute').kneighbors(Q); with --labels,\n"
             "majority-vote classification as KNeighborsClassifier. Reference and query rows are\n"
             "both distributed over the ranks. Neighbours are sorted by distance; equal\n"
             "distances are ordered by the lower reference index.\n",
};

static int parse(int argc, char **argv, opts_t *o)
{
    int rc;

    memset(o, 0, sizeof(*o));
    o->k = 5;
    if ((rc = mlcli_parse(&command, options, o, &o->co, argc, argv)) != 0)
        return rc;
    if ((o->qlabels || o->pred_out) && o->labels == NULL)
        return cli_usage_error(CMD, "%s needs --labels (the reference labels)",
                               o->qlabels ? "--query-labels" : "--pred-out");
    return 0;
}

typedef struct {
    double t0, last;
} progress_t;

/* Rank 0, at most once a second and at the end: reference rows searched so far. */
static void progress(void *ctx, size_t done, size_t total)
{
    progress_t *p = ctx;
    double now = hpml_time();

    if (done < total && now - p->last < 1.0)
        return;
    p->last = now;
    fprintf(stderr, "[knn] %zu of %zu reference rows searched (%.0f%%)  %.2f s\n", done, total,
            100.0 * (double)done / (double)total, now - p->t0);
}

int cmd_knn(int argc, char **argv);
int cmd_knn(int argc, char **argv)
{
    opts_t o;
    hpml_comm_t *comm = NULL;
    hpml_array_t R = {0}, RL = {0}, Q = {0}, QL = {0};
    mlcli_target_t lt = {0}, qt = {0};
    int64_t *rlab = NULL, *qlab = NULL, *idx = NULL, *pred = NULL, correct[2] = {0, 0};
    double *dist = NULL, t0, t_read, t_search;
    char ipath[4096], dpath[4096], ppath[4096];
    int rc, status = CLI_EXIT_FAIL;
    const hpml_array_t *q;
    progress_t pg;
    mlcli_outset_t os;

    if ((rc = parse(argc, argv, &o)) != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if ((comm = mlcli_start(CMD, &o.co)) == NULL)
        return CLI_EXIT_FAIL;
    /* The outputs are one set: checked now, replaced together after the search. */
    mlcli_out_path(ipath, sizeof(ipath), o.co.out, "indices", 1);
    mlcli_out_path(dpath, sizeof(dpath), o.co.out, "distances", 0);
    mlcli_out_path(ppath, sizeof(ppath), o.labels ? o.co.out : NULL, "predictions", 0);
    if (o.pred_out != NULL)
        snprintf(ppath, sizeof(ppath), "%s", o.pred_out);
    mlcli_outset_init(&os, CMD, comm);
    mlcli_outset_inputs(&os, &o.co);
    mlcli_outset_input(&os, "--query", o.query);
    mlcli_outset_input(&os, "--labels", o.labels);
    mlcli_outset_input(&os, "--query-labels", o.qlabels);
    mlcli_outset_add(&os, ipath, "neighbor");
    mlcli_outset_add(&os, dpath, "distance");
    mlcli_outset_add(&os, ppath, "prediction");
    if (mlcli_outset_check(&os))
        goto out;

    t0 = hpml_time();
    lt.file = o.labels;
    if (mlcli_load(CMD, comm, o.co.data, o.labels ? &lt : NULL, &R, &RL))
        goto out;
    if (o.labels && mlcli_labels(CMD, comm, o.labels, &RL, &rlab))
        goto out;
    q = &R;
    if (o.query != NULL) {
        qt.file = o.qlabels;
        if (mlcli_load(CMD, comm, o.query, o.qlabels ? &qt : NULL, &Q, &QL))
            goto out;
        if (mlcli_agree(CMD, comm, Q.cols != R.cols, "%s has %zu columns but %s has %zu", o.query,
                        Q.cols, o.co.data, R.cols))
            goto out;
        q = &Q;
    } else if (o.qlabels != NULL) {
        size_t rows, cols;
        hpml_dtype_t st;

        /* Queries are the reference rows: their labels must have as many rows. */
        rc = hpml_io_shape(o.qlabels, HPML_FMT_AUTO, &rows, &cols, &st);
        if (mlcli_check(CMD, comm, rc) ||
            mlcli_agree(CMD, comm, rows != R.total_rows, "%s has %zu rows but %s has %zu",
                        o.qlabels, rows, o.co.data, R.total_rows))
            goto out;
        rc = hpml_io_read_block(o.qlabels, HPML_FMT_AUTO, HPML_F64, hpml_comm_rank(comm),
                                hpml_comm_size(comm), 1, &QL);
        if (mlcli_check(CMD, comm, rc))
            goto out;
    }
    if (o.qlabels && mlcli_labels(CMD, comm, o.qlabels, &QL, &qlab))
        goto out;
    t_read = hpml_time() - t0;
    if (mlcli_agree(CMD, comm, o.k > R.total_rows,
                    "-k %zu is larger than the %zu reference rows of %s", o.k, R.total_rows,
                    o.co.data))
        goto out;
    if (o.co.verbose)
        fprintf(stderr, "[knn] %zu references x %zu queries x %zu cols, k=%zu, read %.3f s\n",
                R.total_rows, q->total_rows, R.cols, o.k, t_read);

    idx = hpml_malloc((q->rows ? q->rows : 1) * o.k * sizeof(int64_t));
    dist = hpml_malloc((q->rows ? q->rows : 1) * o.k * sizeof(double));
    pred = hpml_malloc((q->rows ? q->rows : 1) * sizeof(int64_t));
    rc = idx && dist && pred ? 0 : HPML_ERR_NOMEM;
    t0 = hpml_time();
    pg.t0 = pg.last = t0;
    if (rc == 0)
        rc = hpml_knn_search(comm, R.data, rlab, R.rows, q->data, q->rows, R.cols, o.k, idx, dist,
                             rlab ? pred : NULL, o.co.verbose ? progress : NULL, &pg);
    t_search = hpml_time() - t0;
    if (mlcli_check(CMD, comm, rc))
        goto out;
    if (o.co.verbose)
        fprintf(stderr, "[knn] searched in %.3f s\n", t_search);
    if (qlab != NULL) {
        for (size_t i = 0; i < q->rows; i++)
            correct[0] += pred[i] == qlab[i];
        correct[1] = (int64_t)q->rows;
        rc = hpml_allreduce(HPML_IN_PLACE, correct, 2, HPML_I64, HPML_SUM, comm);
        if (mlcli_check(CMD, comm, rc))
            goto out;
    }

    if (mlcli_outset_write_rows(&os, ipath, idx, HPML_I64, q->rows, o.k) ||
        mlcli_outset_write_rows(&os, dpath, dist, HPML_F64, q->rows, o.k) ||
        mlcli_outset_write_rows(&os, ppath, pred, HPML_I64, q->rows, 0) || mlcli_outset_commit(&os))
        goto out;

    if (hpml_comm_rank(comm) == 0) {
        double acc = correct[1] ? (double)correct[0] / (double)correct[1] : 0.0;

        if (o.co.json) {
            mlcli_json_head(CMD, o.co.data);
            printf(", \"references\": %zu, \"queries\": %zu, \"features\": %zu, \"k\": %zu, "
                   "\"ranks\": %d, \"accuracy\": ",
                   R.total_rows, q->total_rows, R.cols, o.k, hpml_comm_size(comm));
            cli_json_num(acc, qlab != NULL);
            mlcli_json_tail(t_read, "search", t_search);
        } else {
            printf("knn: %zu queries x %zu references x %zu cols, k=%zu, %d rank%s\n",
                   q->total_rows, R.total_rows, R.cols, o.k, hpml_comm_size(comm),
                   mlcli_plural((size_t)hpml_comm_size(comm)));
            if (qlab)
                printf("  accuracy     %.6f (%lld of %lld)\n", acc, (long long)correct[0],
                       (long long)correct[1]);
            mlcli_print_time(t_read, "search", t_search);
            if (ipath[0])
                printf("  indices     -> %s\n", ipath);
            if (dpath[0])
                printf("  distances   -> %s\n", dpath);
            if (ppath[0])
                printf("  predictions -> %s\n", ppath);
        }
        fflush(stdout);
    }
    status = CLI_EXIT_OK;
out:
    mlcli_outset_abort(&os);
    hpml_free(rlab);
    hpml_free(qlab);
    hpml_free(idx);
    hpml_free(dist);
    hpml_free(pred);
    hpml_array_free(&R);
    hpml_array_free(&RL);
    hpml_array_free(&Q);
    hpml_array_free(&QL);
    hpml_comm_destroy(comm);
    return status;
}
