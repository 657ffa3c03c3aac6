/*
 * Helpers shared by the knn, pca, linreg and logreg commands: agreeing on errors across
 * ranks, loading a data file with its target (a separate file or one of its columns),
 * gathering row-distributed results to rank 0 and writing them, and output naming.
 */
#ifndef HPML_TOOLS_MLCLI_H
#define HPML_TOOLS_MLCLI_H

#include <stddef.h>
#include <stdint.h>

#include "hpml/comm.h"
#include "hpml/io.h"

/* 0 when every rank's rc is 0; otherwise the lowest failing rank prints
 * "hpml <cmd>: <message>" (one line) and every rank gets CLI_EXIT_FAIL. Collective. */
int mlcli_agree(const char *cmd, hpml_comm_t *comm, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The detail message of the last hpml error, or the code's text. */
const char *mlcli_errtext(int rc);

/* Where the target comes from: a file with the same rows, or a column of the data. */
typedef struct mlcli_target {
    const char *file; /* --target FILE */
    long col;         /* --target-col N (negative: from the end) */
    int have_col;
} mlcli_target_t;

/*
 * Read this rank's block of `path` as f64 (NaN/Inf rejected). With tgt != NULL also the
 * target: y gets (rows, t) f64 and x loses the target column when it came from the data.
 * Errors are agreed across ranks (one line printed); returns 0 or CLI_EXIT_FAIL.
 */
int mlcli_load(const char *cmd, hpml_comm_t *comm, const char *path, const mlcli_target_t *tgt,
               hpml_array_t *x, hpml_array_t *y);

/* Gather row blocks (rows x cols of dtype, rank order) and write them at rank 0 as .npy
 * (or .csv by extension). Collective; returns 0 or CLI_EXIT_FAIL (agreed). */
int mlcli_write_rows(const char *cmd, hpml_comm_t *comm, const char *path, const void *local,
                     hpml_dtype_t dtype, size_t rows, size_t cols);
/* Write a replicated array from rank 0 (every rank passes the same data). Collective. */
int mlcli_write(const char *cmd, hpml_comm_t *comm, const char *path, const void *data,
                hpml_dtype_t dtype, size_t rows, size_t cols);

/* `out` ending in .npy names the main output itself; otherwise it is a prefix:
 * "<out>.<what>.npy". An empty string when out is NULL. */
void mlcli_out_path(char *buf, size_t size, const char *out, const char *what, int main_one);

/* Print `n` doubles as a JSON array / as a plain space-separated list. */
void mlcli_json_doubles(const double *v, size_t n);
void mlcli_print_doubles(const double *v, size_t n, size_t max);

/* 1 on rank 0 when stderr is a terminal or verbose is set. */
int mlcli_progress_on(hpml_comm_t *comm, int verbose);

#endif

/* Class labels from a one-column f64 array (a target): every value must be an integer.
 * *out (rows) is hpml_malloc'ed. Agreed across ranks; 0 or CLI_EXIT_FAIL. */
int mlcli_labels(const char *cmd, hpml_comm_t *comm, const char *name, const hpml_array_t *y,
                 int64_t **out);
