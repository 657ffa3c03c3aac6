/*
 * Helpers shared by the ML commands (kmeans uses the error agreement and the output set;
 * knn, pca, linreg and logreg all of it): agreeing on errors across ranks, loading a data file
 * with its target (a separate file or one of its columns), writing a run's output files as one
 * set (row-distributed results gathered to rank 0), and output naming.
 */
#ifndef HPML_TOOLS_MLCLI_H
#define HPML_TOOLS_MLCLI_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "opts.h"
#include "hpml/comm.h"
#include "hpml/io.h"
#include "hpml/nn.h"

/* 0 when every rank's rc is 0; otherwise the lowest failing rank prints
 * "hpml <cmd>: <message>" (one line) and every rank gets CLI_EXIT_FAIL. Collective. */
int mlcli_agree(const char *cmd, hpml_comm_t *comm, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The detail message of the last hpml error, or the code's text. */
const char *mlcli_errtext(int rc);
/* mlcli_agree with the error's own text as the message: the common case. Collective. */
int mlcli_check(const char *cmd, hpml_comm_t *comm, int rc);

/* Where the target comes from: a file with the same rows, or a column of the data. */
typedef struct mlcli_target {
    const char *file; /* --target FILE */
    long col;         /* --target-col N (negative: from the end) */
    int have_col;
} mlcli_target_t;

typedef struct mlcli_opts {
    const char *data, *out;
    int threads, json, verbose;
    mlcli_target_t tgt;             /* --target / --target-col */
    const char *test, *test_target; /* --test / --test-target */
} mlcli_opts_t;

/*
 * Table entries (opts.h) of the options the ML commands share, for a command whose
 * options struct T holds an mlcli_opts_t named co. --data and --out say what they are
 * for in each command, so their help is the command's.
 */
#define MLCLI_OPT_DATA(T, text)                                                                    \
    {                                                                                              \
        .name = "data", .kind = OPT_STRING, .off = offsetof(T, co.data), .arg = "FILE",            \
        .help = text                                                                               \
    }
#define MLCLI_OPT_OUT(T, text)                                                                     \
    {                                                                                              \
        .name = "out", .kind = OPT_STRING, .off = offsetof(T, co.out), .arg = "PATH", .help = text \
    }
/* --target FILE and --target-col N; `what` ends --target's help ("targets, one row per..."). */
#define MLCLI_OPT_TARGET(T, text)                                                                  \
    {.name = "target",                                                                             \
     .kind = OPT_STRING,                                                                           \
     .off = offsetof(T, co.tgt.file),                                                              \
     .arg = "FILE",                                                                                \
     .help = text},                                                                                \
    {                                                                                              \
        .name = "target-col", .kind = OPT_LONG, .off = offsetof(T, co.tgt.col), .arg = "N",        \
        .min = -1000000000L, .max = 1000000000L,                                                   \
        .help = "or: column N of --data is the target, the rest are features\n"                    \
                "(counted from 0; negative counts from the end, -1 = last)"                        \
    }
#define MLCLI_OPT_TEST(T, text, target_text)                                                       \
    {.name = "test",                                                                               \
     .kind = OPT_STRING,                                                                           \
     .off = offsetof(T, co.test),                                                                  \
     .arg = "FILE",                                                                                \
     .help = text},                                                                                \
    {                                                                                              \
        .name = "test-target", .kind = OPT_STRING, .off = offsetof(T, co.test_target),             \
        .arg = "FILE", .help = target_text                                                         \
    }
/* --threads, --json, -v: the last entries of every ML command's table. */
#define MLCLI_OPT_COMMON(T)                                                                        \
    {.name = "threads",                                                                            \
     .kind = OPT_INT,                                                                              \
     .off = offsetof(T, co.threads),                                                               \
     .arg = "N",                                                                                   \
     .help = "BLAS threads per rank (default 1)",                                                  \
     .min = 1,                                                                                     \
     .max = 1024},                                                                                 \
        {.name = "json",                                                                           \
         .kind = OPT_FLAG,                                                                         \
         .off = offsetof(T, co.json),                                                              \
         .help = "print the summary as JSON"},                                                     \
    {                                                                                              \
        .name = "verbose", .letter = 'v', .kind = OPT_FLAG, .off = offsetof(T, co.verbose),        \
        .help = "progress on stderr (default: only when stderr is a terminal)"                     \
    }

/*
 * Parse argv by the command's table (opts.h), whose shared entries point into co (inside
 * the struct `opts` the table's offsets are into; the caller has set its own defaults):
 * co is reset first (threads 1). Checks that there are no operands, that --data was
 * given and that --out names a file prefix, not a folder. Returns 0 to run, -1 after
 * printing --help (exit 0), or CLI_EXIT_USAGE. Not collective beyond cli_getopt.
 */
int mlcli_parse(const opt_cmd_t *cmd, const opt_t *table, void *opts, mlcli_opts_t *co, int argc,
                char **argv);
/* After mlcli_parse, for commands with MLCLI_OPT_TARGET: exactly one of --target and
 * --target-col, and --test-target only with --test and --target. `what` names the target
 * in the message ("target", "label"). 0 or CLI_EXIT_USAGE. */
int mlcli_check_target(const char *cmd, const mlcli_opts_t *co, const char *what);

/* Create hpml's communicator over MPI_COMM_WORLD. A failure (a malformed HPML_TUNING_FILE,
 * a bad HPML_ALGO_* or HPML_RANKS_PER_NODE) is agreed over MPI_COMM_WORLD: the lowest failing
 * rank prints "hpml <cmd>: cannot create the communicator: <why>" (one line) and every rank
 * gets NULL and CLI_EXIT_FAIL, without aborting the job. Collective; 0 or CLI_EXIT_FAIL. */
int mlcli_comm_create(const char *cmd, hpml_comm_t **comm);

/* mlcli_comm_create, then set the BLAS threads and resolve co->verbose with
 * mlcli_progress_on. NULL (the error printed once) when the communicator cannot be made:
 * return CLI_EXIT_FAIL. Collective. */
hpml_comm_t *mlcli_start(const char *cmd, mlcli_opts_t *co);

/*
 * Read this rank's block of `path` as f64 (NaN/Inf rejected). With tgt != NULL also the
 * target: y gets (rows, t) f64 and x loses the target column when it came from the data.
 * Errors are agreed across ranks (one line printed); returns 0 or CLI_EXIT_FAIL.
 */
int mlcli_load(const char *cmd, hpml_comm_t *comm, const char *path, const mlcli_target_t *tgt,
               hpml_array_t *x, hpml_array_t *y);

/*
 * Load co->test for a model of d features. Its target comes from --test-target, or with
 * --target-col from that column when the file has one more column than d (a file of d
 * columns is features only). *have_y says whether ty was loaded. The feature count is
 * checked against d. Agreed across ranks; 0 or CLI_EXIT_FAIL.
 */
int mlcli_load_test(const char *cmd, hpml_comm_t *comm, const mlcli_opts_t *co, size_t d,
                    hpml_array_t *tx, hpml_array_t *ty, int *have_y);

/*
 * For --predict: load co->data as a test file of a saved model of d features, its target
 * from --target, or with --target-col from that column when the file has d + 1 columns
 * (d columns: features only, nothing to score). As mlcli_load_test otherwise.
 */
int mlcli_load_predict(const char *cmd, hpml_comm_t *comm, const mlcli_opts_t *co, size_t d,
                       hpml_array_t *x, hpml_array_t *y, int *have_y);

/*
 * Parse-time checks of --predict PREFIX (after mlcli_parse): PREFIX is the --out PREFIX
 * of a fit, not a .npy file; --out, --test, --test-target and the command's fit-only
 * options (fit_only: long names, NULL-terminated) are usage errors; at most one of
 * --target and --target-col. 0 or CLI_EXIT_USAGE.
 */
int mlcli_check_predict(const char *cmd, const mlcli_opts_t *co, const char *prefix,
                        const char *const *fit_only);
/*
 * Read a saved model's part PREFIX.<what>.npy whole on every rank as dtype (f64: NaN/Inf
 * rejected), its name in path (size bytes). Agreed across ranks; 0 or CLI_EXIT_FAIL.
 */
int mlcli_read_model(const char *cmd, hpml_comm_t *comm, const char *prefix, const char *what,
                     hpml_dtype_t dtype, char *path, size_t size, hpml_array_t *a);

/*
 * An output set: the files one run writes, replaced together or not at all.
 *
 *     mlcli_outset_init(&os, cmd, comm);
 *     mlcli_outset_add(&os, path, "label");        each output (path NULL or "": none)
 *     if (mlcli_outset_check(&os)) goto out;       before the long computation
 *     ...
 *     if (mlcli_outset_write(&os, path, ...) || ... || mlcli_outset_commit(&os)) goto out;
 *   out:
 *     mlcli_outset_abort(&os);
 *
 * The collective face of io's output set (hpml_io_outset_*, where the rules are): rank 0
 * does the file work, every rank learns the verdict.
 * check: rank 0 checks every path (not an input of the run, .npy or .csv, not named twice,
 * not a folder, its folder there and writable), so a bad --out fails at once, not after
 * the run.
 * add: name is what the columns hold, the CSV header's stem ("label"; "x" heads a matrix's
 * columns x0,x1,...; a name with a comma is the whole header line).
 * write / write_vec / write_rows: rank 0 writes one file of the set complete into a
 * temporary folder next to it; nothing is replaced yet. write takes a replicated rows x cols
 * matrix, write_vec a replicated vector of n values, written with shape (n,) (only rank 0's
 * is read). write_rows first gathers row blocks (rows x cols of dtype on each rank, in rank
 * order); cols 0 means one value per row, written as a vector of shape (n,) as labels and
 * predictions are.
 * commit: renames each file into place. Any failure before the commit removes every
 * temporary and leaves each old file as it was.
 *
 * All but init, add, input and abort are collective (every rank passes the same paths)
 * and return 0 or CLI_EXIT_FAIL: the error is agreed, one line naming the path is printed
 * and the set is aborted. A NULL or empty path is no file. Paths are copied. abort removes
 * what is left (nothing after a commit); call it on every way out. It is not collective,
 * cannot fail and may be called again.
 */
typedef struct mlcli_outset {
    const char *cmd;
    hpml_comm_t *comm;
    hpml_io_outset_t *io; /* the set itself (io.h) */
    int err;              /* the first failure of a step before check */
} mlcli_outset_t;

void mlcli_outset_init(mlcli_outset_t *os, const char *cmd, hpml_comm_t *comm);
void mlcli_outset_add(mlcli_outset_t *os, const char *path, const char *name);
/* Inputs of the run (opt names the option in messages; the path is copied): check fails,
 * before any work, when an output would overwrite one. _inputs adds co's --data,
 * --target, --test and --test-target. Not collective. */
void mlcli_outset_input(mlcli_outset_t *os, const char *opt, const char *path);
void mlcli_outset_inputs(mlcli_outset_t *os, const mlcli_opts_t *co);
/* The part PREFIX.<what>.npy of a saved model read by --predict PREFIX, as an input. */
void mlcli_outset_model(mlcli_outset_t *os, const char *prefix, const char *what);
int mlcli_outset_check(mlcli_outset_t *os);
int mlcli_outset_write(mlcli_outset_t *os, const char *path, const void *data, hpml_dtype_t dtype,
                       size_t rows, size_t cols);
int mlcli_outset_write_vec(mlcli_outset_t *os, const char *path, const void *data,
                           hpml_dtype_t dtype, size_t n);
int mlcli_outset_write_rows(mlcli_outset_t *os, const char *path, const void *local,
                            hpml_dtype_t dtype, size_t rows, size_t cols);
int mlcli_outset_commit(mlcli_outset_t *os);
/* Every rank's rows x cols block of dtype, in rank order, into *out (hpml_malloc'ed, on
 * every rank; hpml_free it) of *total rows. Collective; errors agreed: 0 or
 * CLI_EXIT_FAIL. */
int mlcli_gather_rows(const char *cmd, hpml_comm_t *comm, const void *local, hpml_dtype_t dtype,
                      size_t rows, size_t cols, void **out, size_t *total);
void mlcli_outset_abort(mlcli_outset_t *os);

/* `out` ending in .npy names the main output itself; otherwise it is a prefix:
 * "<out>.<what>.npy". An empty string when out is NULL. */
void mlcli_out_path(char *buf, size_t size, const char *out, const char *what, int main_one);

/* Print `n` doubles as a JSON array / as a plain space-separated list. */
void mlcli_json_doubles(const double *v, size_t n);
/* A rows x cols matrix as a list of rows, [[...], [...]], as np.array() reads it. */
void mlcli_json_matrix(const double *v, size_t rows, size_t cols);
void mlcli_print_doubles(const double *v, size_t n, size_t max);

/* 1 on rank 0 when stderr is a terminal or verbose is set. */
int mlcli_progress_on(hpml_comm_t *comm, int verbose);

/* Class labels from a one-column f64 array (a target): every value must be an integer.
 * *out (rows) is hpml_malloc'ed. Agreed across ranks; 0 or CLI_EXIT_FAIL. */
int mlcli_labels(const char *cmd, hpml_comm_t *comm, const char *name, const hpml_array_t *y,
                 int64_t **out);

/* Summary pieces every command prints the same way (rank 0, stdout):
 * `{"schema_version": N, "command": "<cmd>", "data": "<data>"` opening the JSON object
 * (cli_json_begin); its closing `, "read_seconds": R, "<what>_seconds": T}` line; the text
 * summary's time line; and the plural "s" for a count. */
void mlcli_json_head(const char *cmd, const char *data);
void mlcli_json_tail(double t_read, const char *what, double t);
void mlcli_print_time(double t_read, const char *what, double t);
const char *mlcli_plural(size_t n);

/*
 * Inputs unlike the training data: after the model's normalisation ((x - mean) / std,
 * mean and std of the training pixels) the training data has mean 0, so a mean of the
 * normalised inputs beyond +-3 means another scale (float pixels 0..255 given to a model
 * trained on 0..1 reach ~200). mismatch: that test; warn: rank 0's one-line warning on
 * stderr naming the file, when the test holds. Not collective.
 */
int mlcli_input_mismatch(double zmean);
void mlcli_warn_input(const char *cmd, const char *file, double zmean, float mean, float sd);

/* hpml train --init-from (train_init.c): load path (a model file or an .npz) as the
 * model cfg->spec on train's input shape into *init and point cfg->init_params at its
 * parameters; with the file's normalisation, re-normalise train and test to it and set
 * cfg->mean and cfg->std. Not collective (every rank reads the file): agree on the result.
 * The caller destroys *init after training. */
int train_init_from(const char *path, hpml_train_config_t *cfg, hpml_dataset_t *train,
                    hpml_dataset_t *test, hpml_model_t **init);

#endif
