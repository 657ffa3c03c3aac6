/* Helpers shared by the ML commands (see mlcli.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "mlcli.h"

const char *mlcli_errtext(int rc)
{
    const char *d = hpml_last_error();
    return d != NULL && *d != '\0' ? d : hpml_strerror(rc);
}

int mlcli_check(const char *cmd, hpml_comm_t *comm, int rc)
{
    return mlcli_agree(cmd, comm, rc, "%s", mlcli_errtext(rc));
}

int mlcli_agree(const char *cmd, hpml_comm_t *comm, int rc, const char *fmt, ...)
{
    size_t cl = strlen(cmd);
    char msg[1024];
    const char *m = msg;
    int err, first;
    va_list ap;

    if (rc != 0) {
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        /* The library's "pca: ..." after "hpml pca: " says the command twice. */
        if (strncmp(m, cmd, cl) == 0 && m[cl] == ':' && m[cl + 1] == ' ')
            m += cl + 2;
        hpml_set_error(HPML_ERR_INVAL, "%s", m);
    }
    err = hpml_comm_agree_rank(comm, rc != 0 ? HPML_ERR_INVAL : 0, &first);
    if (err == 0)
        return 0;
    if (first < 0) /* the agreement itself failed: no rank can trust the others */
        cli_fatal(cmd, "%s", hpml_last_error());
    /* The lowest failing rank says it, once. */
    if (first == hpml_comm_rank(comm)) {
        fprintf(stderr, "%s %s: %s\n", cli_prog, cmd, hpml_last_error());
        fflush(stderr);
    }
    return CLI_EXIT_FAIL;
}

int mlcli_parse(const opt_cmd_t *cmd, const opt_t *table, void *opts, mlcli_opts_t *co, int argc,
                char **argv)
{
    const opt_set_t set = {table, opts};
    int rc, operand;

    memset(co, 0, sizeof(*co));
    co->threads = 1;
    if ((rc = opts_parse(cmd, &set, 1, argc, argv, &operand)) != 0)
        return rc;
    co->tgt.have_col = opts_given("target-col");
    if (co->data == NULL)
        return cli_usage_error(cmd->name, "--data FILE is required");
    return cli_check_prefix(cmd->name, "--out", co->out);
}

int mlcli_check_target(const char *cmd, const mlcli_opts_t *co, const char *what)
{
    if ((co->tgt.file != NULL) == (co->tgt.have_col != 0))
        return cli_usage_error(cmd, "give exactly one of --target FILE and --target-col N");
    if (co->test_target != NULL && co->test == NULL)
        return cli_usage_error(cmd, "--test-target needs --test");
    if (co->test_target != NULL && co->tgt.have_col)
        return cli_usage_error(cmd,
                               "--test-target goes with --target FILE; with --target-col "
                               "the --test file holds its %s column",
                               what);
    return 0;
}

int mlcli_comm_create(const char *cmd, hpml_comm_t **comm)
{
    int rank = cli_rank(), size = cli_size(), rc, who;

    *comm = NULL;
    rc = hpml_comm_create(MPI_COMM_WORLD, NULL, comm);
    /* Without hpml's communicator (on some rank) the agreement goes through MPI's own. */
    who = rc != 0 ? rank : size;
    if (MPI_Allreduce(MPI_IN_PLACE, &who, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS)
        cli_fatal(cmd, "MPI_Allreduce failed");
    if (who == size)
        return 0;
    if (who == rank) {
        fprintf(stderr, "%s %s: cannot create the communicator: %s\n", cli_prog, cmd,
                mlcli_errtext(rc));
        fflush(stderr);
    }
    hpml_comm_destroy(*comm);
    *comm = NULL;
    return CLI_EXIT_FAIL;
}

hpml_comm_t *mlcli_start(const char *cmd, mlcli_opts_t *co)
{
    hpml_comm_t *comm = NULL;

    if (mlcli_comm_create(cmd, &comm) != 0)
        return NULL;
    hpml_blas_set_threads(co->threads);
    co->verbose = mlcli_progress_on(comm, co->verbose);
    return comm;
}

int mlcli_load(const char *cmd, hpml_comm_t *comm, const char *path, const mlcli_target_t *tgt,
               hpml_array_t *x, hpml_array_t *y)
{
    int rank = hpml_comm_rank(comm), P = hpml_comm_size(comm), rc;
    size_t rows, cols, trows, tcols;
    hpml_dtype_t st;

    memset(x, 0, sizeof(*x));
    if (y != NULL)
        memset(y, 0, sizeof(*y));
    /* Shapes first, on every rank: mismatches are then reported once and identically. */
    rc = hpml_io_shape(path, HPML_FMT_AUTO, &rows, &cols, &st);
    if (mlcli_check(cmd, comm, rc))
        return CLI_EXIT_FAIL;
    if (mlcli_agree(cmd, comm, rows == 0 || cols == 0, "%s: no data (%zu rows x %zu columns)", path,
                    rows, cols))
        return CLI_EXIT_FAIL;
    if (tgt != NULL && tgt->file != NULL) {
        rc = hpml_io_shape(tgt->file, HPML_FMT_AUTO, &trows, &tcols, &st);
        if (mlcli_check(cmd, comm, rc))
            return CLI_EXIT_FAIL;
        if (mlcli_agree(cmd, comm, trows != rows, "%s has %zu rows but %s has %zu", tgt->file,
                        trows, path, rows))
            return CLI_EXIT_FAIL;
    }
    if (tgt != NULL && tgt->file == NULL) {
        long c = tgt->col < 0 ? (long)cols + tgt->col : tgt->col;

        if (mlcli_agree(cmd, comm, c < 0 || c >= (long)cols || cols < 2,
                        "--target-col %ld is out of range: %s has %zu columns (need the target "
                        "and at least one feature)",
                        tgt->col, path, cols))
            return CLI_EXIT_FAIL;
    }
    rc = hpml_io_read_block(path, HPML_FMT_AUTO, HPML_F64, rank, P, 1, x);
    if (mlcli_check(cmd, comm, rc))
        return CLI_EXIT_FAIL;
    if (tgt == NULL)
        return 0;
    if (tgt->file != NULL) {
        rc = hpml_io_read_block(tgt->file, HPML_FMT_AUTO, HPML_F64, rank, P, 1, y);
        return mlcli_check(cmd, comm, rc);
    }
    /* Split column c out of x, in place. */
    {
        size_t c = (size_t)(tgt->col < 0 ? (long)cols + tgt->col : tgt->col);
        double *d = x->data, *t = hpml_malloc((x->rows ? x->rows : 1) * sizeof(double));

        if (mlcli_agree(cmd, comm, t == NULL, "out of memory"))
            return CLI_EXIT_FAIL;
        for (size_t i = 0, k = 0; i < x->rows; i++)
            for (size_t j = 0; j < cols; j++) {
                if (j == c)
                    t[i] = d[i * cols + j];
                else
                    d[k++] = d[i * cols + j];
            }
        *y = *x;
        y->cols = 1;
        y->data = t;
        x->cols = cols - 1;
    }
    return 0;
}

int mlcli_load_test(const char *cmd, hpml_comm_t *comm, const mlcli_opts_t *co, size_t d,
                    hpml_array_t *tx, hpml_array_t *ty, int *have_y)
{
    mlcli_target_t tt = {co->test_target, co->tgt.col, co->tgt.have_col};
    size_t tc, tr;
    hpml_dtype_t st;
    int rc;

    memset(tx, 0, sizeof(*tx));
    memset(ty, 0, sizeof(*ty));
    *have_y = 0;
    /* With --target-col the test file may hold the target column or only features. */
    rc = hpml_io_shape(co->test, HPML_FMT_AUTO, &tr, &tc, &st);
    if (mlcli_check(cmd, comm, rc))
        return CLI_EXIT_FAIL;
    if (co->tgt.have_col && tc == d)
        tt.have_col = 0;
    *have_y = tt.file != NULL || tt.have_col;
    if (mlcli_load(cmd, comm, co->test, *have_y ? &tt : NULL, tx, ty))
        return CLI_EXIT_FAIL;
    return mlcli_agree(cmd, comm, tx->cols != d,
                       "%s has %zu feature columns but the model has %zu features", co->test,
                       tx->cols, d);
}

int mlcli_load_predict(const char *cmd, hpml_comm_t *comm, const mlcli_opts_t *co, size_t d,
                       hpml_array_t *x, hpml_array_t *y, int *have_y)
{
    mlcli_opts_t pc = *co;

    /* The data plays the part of a --test file with --target as its --test-target. */
    pc.test = co->data;
    pc.test_target = co->tgt.file;
    return mlcli_load_test(cmd, comm, &pc, d, x, y, have_y);
}

int mlcli_check_predict(const char *cmd, const mlcli_opts_t *co, const char *prefix,
                        const char *const *fit_only)
{
    size_t n = strlen(prefix);
    const char *fit_opt = NULL;

    if (n == 0 || (n >= 4 && strcmp(prefix + n - 4, ".npy") == 0))
        return cli_usage_error(cmd,
                               "--predict takes the PREFIX a fit wrote with --out PREFIX "
                               "(PREFIX.coef.npy, ...), not '%s'",
                               prefix);
    for (; fit_only != NULL && *fit_only != NULL && fit_opt == NULL; fit_only++)
        if (opts_given(*fit_only))
            fit_opt = *fit_only;
    if (fit_opt != NULL)
        return cli_usage_error(cmd, "--%s goes with a fit, not with --predict", fit_opt);
    if (co->out != NULL || co->test != NULL || co->test_target != NULL)
        return cli_usage_error(cmd, "%s goes with a fit, not with --predict",
                               co->out != NULL    ? "--out"
                               : co->test != NULL ? "--test"
                                                  : "--test-target");
    if (co->tgt.file != NULL && co->tgt.have_col)
        return cli_usage_error(cmd, "give at most one of --target FILE and --target-col N");
    return 0;
}

int mlcli_read_model(const char *cmd, hpml_comm_t *comm, const char *prefix, const char *what,
                     hpml_dtype_t dtype, char *path, size_t size, hpml_array_t *a)
{
    const char *why = "";
    size_t n;
    int rc;

    memset(a, 0, sizeof(*a));
    mlcli_out_path(path, size, prefix, what, 0);
    /* Every rank reads the whole (small) file: the model is replicated. */
    rc = hpml_io_read_block(path, HPML_FMT_NPY, dtype, 0, 1, dtype == HPML_F64, a);
    if (rc != 0) {
        /* The io error text starts with the path already: name the file once. */
        why = mlcli_errtext(rc);
        n = strlen(path);
        if (strncmp(why, path, n) == 0 && strncmp(why + n, ": ", 2) == 0)
            why += n + 2;
    }
    if (mlcli_agree(cmd, comm, rc, "model file %s: %s", path, why))
        return CLI_EXIT_FAIL;
    return mlcli_agree(cmd, comm, a->rows == 0 || a->cols == 0, "model file %s is empty", path);
}

/* ---- output sets ---------------------------------------------------------------- */

/*
 * Each file is written into a temporary folder next to its target rather than to a
 * temporary file: the io writers themselves write through "<name>.tmp." and six random
 * characters next to the name they are given, and inside a folder that name is short, so
 * a target name that the single-file writers accept is accepted here too. The folder is
 * on the target's file system (same parent), so the final rename is atomic per file.
 */

void mlcli_outset_init(mlcli_outset_t *os, const char *cmd, hpml_comm_t *comm)
{
    memset(os, 0, sizeof(*os));
    os->cmd = cmd;
    os->comm = comm;
    os->err = hpml_io_outset_create(&os->io);
}

/* Keep the first failure of a non-collective step for the next collective one. */
static void note(mlcli_outset_t *os, int rc)
{
    if (rc != 0 && os->err == 0)
        os->err = rc;
}

void mlcli_outset_input(mlcli_outset_t *os, const char *opt, const char *path)
{
    if (os->io != NULL)
        note(os, hpml_io_outset_input(os->io, opt, path));
}

void mlcli_outset_model(mlcli_outset_t *os, const char *prefix, const char *what)
{
    char path[4096];

    mlcli_out_path(path, sizeof(path), prefix, what, 0);
    mlcli_outset_input(os, "--predict", path);
}

void mlcli_outset_inputs(mlcli_outset_t *os, const mlcli_opts_t *co)
{
    mlcli_outset_input(os, "--data", co->data);
    mlcli_outset_input(os, "--target", co->tgt.file);
    mlcli_outset_input(os, "--test", co->test);
    mlcli_outset_input(os, "--test-target", co->test_target);
}

void mlcli_outset_add(mlcli_outset_t *os, const char *path, const char *name)
{
    if (os->io != NULL)
        note(os, hpml_io_outset_add(os->io, path, name));
}

void mlcli_outset_abort(mlcli_outset_t *os)
{
    if (os == NULL)
        return;
    hpml_io_outset_destroy(os->io);
    os->io = NULL;
}

/* Agree on rank 0's result rc (an io error, its message set); abort the set on failure. */
static int outset_agree(mlcli_outset_t *os, int rc)
{
    if (mlcli_agree(os->cmd, os->comm, rc, "%s", rc != 0 ? hpml_last_error() : "") == 0)
        return 0;
    mlcli_outset_abort(os);
    return CLI_EXIT_FAIL;
}

int mlcli_outset_check(mlcli_outset_t *os)
{
    int rc = 0;

    if (hpml_comm_rank(os->comm) == 0)
        rc = os->err != 0 ? os->err : hpml_io_outset_check(os->io);
    return outset_agree(os, rc);
}

/* write and write_vec: an array of ndim 1 or 2. */
static int outset_write_nd(mlcli_outset_t *os, const char *path, const void *data,
                           hpml_dtype_t dtype, int ndim, const size_t *shape)
{
    int rc = 0;

    if (path == NULL || *path == '\0')
        return 0;
    if (hpml_comm_rank(os->comm) == 0)
        rc = os->io != NULL ? hpml_io_outset_write_nd(os->io, path, data, dtype, ndim, shape)
                            : hpml_set_error(HPML_ERR_STATE, "internal error: no output set");
    return outset_agree(os, rc);
}

int mlcli_outset_write(mlcli_outset_t *os, const char *path, const void *data, hpml_dtype_t dtype,
                       size_t rows, size_t cols)
{
    size_t shape[2] = {rows, cols};

    return outset_write_nd(os, path, data, dtype, 2, shape);
}

int mlcli_outset_write_vec(mlcli_outset_t *os, const char *path, const void *data,
                           hpml_dtype_t dtype, size_t n)
{
    return outset_write_nd(os, path, data, dtype, 1, &n);
}

int mlcli_gather_rows(const char *cmd, hpml_comm_t *comm, const void *local, hpml_dtype_t dtype,
                      size_t rows, size_t cols, void **out, size_t *total)
{
    int P = hpml_comm_size(comm), rc;
    size_t es = hpml_dtype_size(dtype), maxr = 0, at = 0;
    int64_t me = (int64_t)rows, *cnt = NULL;
    char *pad = NULL, *all = NULL;

    *out = NULL;
    *total = 0;
    cnt = hpml_malloc((size_t)P * sizeof(int64_t));
    rc = cnt == NULL ? HPML_ERR_NOMEM : hpml_allgather(&me, cnt, 1, HPML_I64, comm);
    if (mlcli_agree(cmd, comm, rc, "gathering the rows: %s", mlcli_errtext(rc)))
        goto out;
    for (int q = 0; q < P; q++) {
        *total += (size_t)cnt[q];
        if ((size_t)cnt[q] > maxr)
            maxr = (size_t)cnt[q];
    }
    /* comm has no gatherv: blocks are padded to the largest (they differ by one row). */
    pad = hpml_calloc(maxr * cols + 1, es);
    all = hpml_malloc(((size_t)P * maxr * cols + 1) * es);
    rc = pad && all ? 0 : HPML_ERR_NOMEM;
    if (rc == 0) {
        if (rows > 0)
            memcpy(pad, local, rows * cols * es);
        rc = hpml_allgather(pad, all, maxr * cols, dtype, comm);
    }
    if (mlcli_agree(cmd, comm, rc, "gathering the rows: %s", mlcli_errtext(rc)))
        goto out;
    for (int q = 0; q < P; q++) {
        memmove(all + at, all + (size_t)q * maxr * cols * es, (size_t)cnt[q] * cols * es);
        at += (size_t)cnt[q] * cols * es;
    }
    *out = all;
    all = NULL;
out:
    hpml_free(cnt);
    hpml_free(pad);
    hpml_free(all);
    return *out != NULL ? 0 : CLI_EXIT_FAIL;
}

int mlcli_outset_write_rows(mlcli_outset_t *os, const char *path, const void *local,
                            hpml_dtype_t dtype, size_t rows, size_t ncols)
{
    size_t cols = ncols > 0 ? ncols : 1, total;
    void *all = NULL;
    int status;

    if (path == NULL || *path == '\0')
        return 0;
    status = mlcli_gather_rows(os->cmd, os->comm, local, dtype, rows, cols, &all, &total);
    if (status == 0)
        status = ncols > 0 ? mlcli_outset_write(os, path, all, dtype, total, cols)
                           : mlcli_outset_write_vec(os, path, all, dtype, total);
    if (status != 0)
        mlcli_outset_abort(os);
    hpml_free(all);
    return status;
}

int mlcli_outset_commit(mlcli_outset_t *os)
{
    int rc = 0;

    if (hpml_comm_rank(os->comm) == 0)
        rc = os->io != NULL ? hpml_io_outset_commit(os->io)
                            : hpml_set_error(HPML_ERR_STATE, "internal error: no output set");
    return outset_agree(os, rc);
}

void mlcli_out_path(char *buf, size_t size, const char *out, const char *what, int main_one)
{
    size_t n;

    buf[0] = '\0';
    if (out == NULL)
        return;
    n = strlen(out);
    if (n >= 4 && strcmp(out + n - 4, ".npy") == 0) {
        if (main_one)
            snprintf(buf, size, "%s", out);
        return;
    }
    snprintf(buf, size, "%s.%s.npy", out, what);
}

void mlcli_json_doubles(const double *v, size_t n)
{
    putchar('[');
    for (size_t i = 0; i < n; i++)
        printf("%s%.17g", i ? ", " : "", v[i]);
    putchar(']');
}

void mlcli_print_doubles(const double *v, size_t n, size_t max)
{
    for (size_t i = 0; i < n && i < max; i++)
        printf(" %.6g", v[i]);
    if (n > max)
        printf(" ... (%zu more)", n - max);
}

int mlcli_progress_on(hpml_comm_t *comm, int verbose)
{
    return hpml_comm_rank(comm) == 0 && (verbose || isatty(2));
}

int mlcli_labels(const char *cmd, hpml_comm_t *comm, const char *name, const hpml_array_t *y,
                 int64_t **out)
{
    const double *v = y->data;
    int64_t *l;
    size_t bad = (size_t)-1;

    *out = NULL;
    if (mlcli_agree(cmd, comm, y->cols != 1, "%s: class labels must be one column (got %zu)", name,
                    y->cols))
        return CLI_EXIT_FAIL;
    l = hpml_malloc((y->rows ? y->rows : 1) * sizeof(int64_t));
    if (mlcli_agree(cmd, comm, l == NULL, "out of memory"))
        return CLI_EXIT_FAIL;
    for (size_t i = 0; i < y->rows && bad == (size_t)-1; i++) {
        if (v[i] != (double)(int64_t)v[i] || v[i] < -9.0e15 || v[i] > 9.0e15)
            bad = i;
        l[i] = (int64_t)v[i];
    }
    if (mlcli_agree(cmd, comm, bad != (size_t)-1,
                    "%s: row %zu: class label %.17g is not an integer", name, y->row_offset + bad,
                    bad != (size_t)-1 ? v[bad] : 0.0)) {
        hpml_free(l);
        return CLI_EXIT_FAIL;
    }
    *out = l;
    return 0;
}

void mlcli_json_matrix(const double *v, size_t rows, size_t cols)
{
    putchar('[');
    for (size_t i = 0; i < rows; i++) {
        printf("%s", i ? ", " : "");
        mlcli_json_doubles(v + i * cols, cols);
    }
    putchar(']');
}

void mlcli_json_head(const char *cmd, const char *data)
{
    cli_json_begin(cmd);
    printf(", \"data\": ");
    hpml_json_string(stdout, data);
}

void mlcli_json_tail(double t_read, const char *what, double t)
{
    printf(", \"read_seconds\": %.6f, \"%s_seconds\": %.6f}\n", t_read, what, t);
}

void mlcli_print_time(double t_read, const char *what, double t)
{
    printf("  time         read %.3f s, %s %.3f s\n", t_read, what, t);
}

const char *mlcli_plural(size_t n)
{
    return n == 1 ? "" : "s";
}

int mlcli_input_mismatch(double zmean)
{
    return !(fabs(zmean) <= 3.0);
}

void mlcli_warn_input(const char *cmd, const char *file, double zmean, float mean, float sd)
{
    if (!mlcli_input_mismatch(zmean))
        return;
    fprintf(stderr,
            "%s %s: warning: %s does not look like the training data: its mean after the "
            "model's normalisation is %.3g, not near 0 (training pixels: mean %.3g, std "
            "%.3g); were its values scaled another way (0..255 for 0..1)?\n",
            cli_prog, cmd, file, zmean, (double)mean, (double)sd);
}
