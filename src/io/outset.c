/*
 * Output sets: the files one run writes, checked before the run, each written complete
 * into a temporary folder next to its target, and renamed into place together at the end,
 * or not at all. Also the checks any writer makes before a long run (hpml_io_writable).
 * No MPI here: the commands decide which rank writes and agree on the verdicts.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io_internal.h"

#define MAX_FILES 16
#define PATH_LEN  4096
#define TMP_LEN   (PATH_LEN + 40)
/* The file's name inside its temporary folder. */
#define OUT_NAME "out"

struct hpml_io_outset {
    size_t n, nin;
    struct {
        char path[PATH_LEN];
        char name[256];    /* what the columns hold: the CSV header's stem (csv_header_for) */
        char tmp[TMP_LEN]; /* the temporary folder while written, else "" */
    } f[MAX_FILES];
    struct {
        char what[64], path[PATH_LEN];
    } in[MAX_FILES];
};

/* Can path be replaced by a new regular file, as far as its type goes? A FIFO or a device
 * (/dev/null) would be replaced by a plain file, a folder cannot be. */
static int replaceable(const char *path)
{
    struct stat st;

    if (stat(path, &st) != 0 || S_ISREG(st.st_mode))
        return 0;
    return hpml_set_error(HPML_ERR_IO, "%s: %s", path,
                          S_ISDIR(st.st_mode)
                              ? "is a directory"
                              : "is not a regular file (a pipe or a device would be replaced by "
                                "a plain file)");
}

int hpml_io_writable(const char *path)
{
    char tmp[TMP_LEN];
    int rc;

    if (path == NULL || path[0] == '\0')
        return hpml_set_error(HPML_ERR_INVAL, "an output needs a name");
    if ((rc = replaceable(path)) != 0)
        return rc;
    if (hpml_io_temp_next_to(path, 1, tmp, sizeof(tmp)) < 0)
        return hpml_set_error(HPML_ERR_IO, "%s: cannot create a file there: %s", path,
                              strerror(errno));
    rmdir(tmp);
    return 0;
}

int hpml_io_outset_create(hpml_io_outset_t **out)
{
    if (out == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_io_outset_create: NULL argument");
    *out = calloc(1, sizeof(**out));
    return *out != NULL ? 0 : hpml_set_error(HPML_ERR_NOMEM, "out of memory for an output set");
}

/* Remove a temporary folder and whatever the writers left in it. */
static void remove_tmpdir(const char *dir)
{
    char name[TMP_LEN + sizeof(OUT_NAME) + 1];

    if ((size_t)snprintf(name, sizeof(name), "%s/" OUT_NAME, dir) < sizeof(name))
        unlink(name);
    rmdir(dir);
}

void hpml_io_outset_destroy(hpml_io_outset_t *os)
{
    if (os == NULL)
        return;
    for (size_t i = 0; i < os->n; i++)
        if (os->f[i].tmp[0] != '\0')
            remove_tmpdir(os->f[i].tmp);
    free(os);
}

int hpml_io_outset_input(hpml_io_outset_t *os, const char *what, const char *path)
{
    if (path == NULL || path[0] == '\0')
        return 0;
    if (os->nin == MAX_FILES)
        return hpml_set_error(HPML_ERR_INVAL, "more than %d inputs in an output set", MAX_FILES);
    snprintf(os->in[os->nin].what, sizeof(os->in[0].what), "%s", what);
    if ((size_t)snprintf(os->in[os->nin].path, PATH_LEN, "%s", path) >= PATH_LEN)
        return hpml_set_error(HPML_ERR_INVAL, "%.64s...: path too long", path);
    os->nin++;
    return 0;
}

int hpml_io_outset_add(hpml_io_outset_t *os, const char *path, const char *name)
{
    if (path == NULL || path[0] == '\0')
        return 0;
    if (name == NULL || name[0] == '\0' || strpbrk(name, "\n\r") != NULL ||
        strlen(name) >= sizeof(os->f[0].name))
        return hpml_set_error(HPML_ERR_INVAL, "%s: an output needs a one-line column name", path);
    if (os->n == MAX_FILES)
        return hpml_set_error(HPML_ERR_INVAL, "more than %d files in an output set", MAX_FILES);
    if ((size_t)snprintf(os->f[os->n].path, PATH_LEN, "%s", path) >= PATH_LEN)
        return hpml_set_error(HPML_ERR_INVAL, "%.64s...: path too long", path);
    snprintf(os->f[os->n].name, sizeof(os->f[0].name), "%s", name);
    os->f[os->n].tmp[0] = '\0';
    os->n++;
    return 0;
}

/* Does path end in suf, in either case? */
static int ends_with(const char *path, const char *suf)
{
    size_t n = strlen(path), m = strlen(suf);

    return n > m && strcasecmp(path + n - m, suf) == 0;
}

/* File i against the inputs and the files before it: 0 or an error naming both. */
static int check_names(const hpml_io_outset_t *os, size_t i)
{
    const char *path = os->f[i].path;

    for (size_t j = 0; j < os->nin; j++) {
        if (!hpml_io_same_file(path, os->in[j].path))
            continue;
        if (strcmp(path, os->in[j].path) == 0)
            return hpml_set_error(HPML_ERR_INVAL,
                                  "%s is the input %s %s: writing there would destroy it; "
                                  "choose another name",
                                  path, os->in[j].what, os->in[j].path);
        return hpml_set_error(HPML_ERR_INVAL,
                              "%s is the same file as the input %s %s: writing there would "
                              "destroy it; choose another name",
                              path, os->in[j].what, os->in[j].path);
    }
    if (!ends_with(path, ".npy") && !ends_with(path, ".csv"))
        return hpml_set_error(HPML_ERR_INVAL,
                              "%s: an output is written as .npy or .csv: give the name one of "
                              "them",
                              path);
    for (size_t j = 0; j < i; j++) {
        if (!hpml_io_same_file(os->f[j].path, path))
            continue;
        if (strcmp(os->f[j].path, path) == 0)
            return hpml_set_error(HPML_ERR_INVAL, "%s is named for two outputs", path);
        return hpml_set_error(HPML_ERR_INVAL, "%s and %s are the same file, named for two outputs",
                              os->f[j].path, path);
    }
    return 0;
}

int hpml_io_outset_check(const hpml_io_outset_t *os)
{
    int rc;

    for (size_t i = 0; i < os->n; i++)
        if ((rc = check_names(os, i)) != 0 || (rc = hpml_io_writable(os->f[i].path)) != 0)
            return rc;
    return 0;
}

/* The message of a failed write into file (the temporary), said of path instead: those
 * temporary names are gone once the set is removed. */
static int restate(int rc, const char *path, const char *file, const char *tmpdir)
{
    char msg[1200];
    const char *m = hpml_last_error();
    size_t n = strlen(file);

    if (strncmp(m, file, n) == 0 && strncmp(m + n, ": ", 2) == 0)
        m += n + 2;
    if (strstr(m, tmpdir) != NULL) {
        const char *reason = strrchr(m, ':');

        snprintf(msg, sizeof(msg), "%s: cannot write it%s", path, reason != NULL ? reason : "");
    } else {
        snprintf(msg, sizeof(msg), "%s: %s", path, m);
    }
    return hpml_set_error(rc, "%s", msg);
}

/* The header line of a CSV output (malloc'd, NULL when out of memory): a name with a comma
 * is the whole header; otherwise a vector or one column is headed by the name, and the
 * columns of a matrix by the name and their index (x0,x1,...). */
static char *csv_header_for(const char *name, int ndim, size_t cols)
{
    size_t len = strlen(name), at = 0, need;
    char *h;

    if (strchr(name, ',') != NULL || ndim < 2 || cols == 1)
        return strdup(name);
    need = cols * (len + 22) + 1;
    if ((h = malloc(need)) == NULL)
        return NULL;
    for (size_t j = 0; j < cols; j++)
        at += (size_t)snprintf(h + at, need - at, "%s%s%zu", j > 0 ? "," : "", name, j);
    return h;
}

int hpml_io_outset_write(hpml_io_outset_t *os, const char *path, const void *data,
                         hpml_dtype_t dtype, size_t rows, size_t cols)
{
    size_t shape[2] = {rows, cols};

    return hpml_io_outset_write_nd(os, path, data, dtype, 2, shape);
}

int hpml_io_outset_write_nd(hpml_io_outset_t *os, const char *path, const void *data,
                            hpml_dtype_t dtype, int ndim, const size_t *shape)
{
    char file[TMP_LEN + sizeof(OUT_NAME) + 1], *header = NULL;
    struct stat st;
    size_t i, rows = 1, cols = 1;
    int rc;

    if (path == NULL || path[0] == '\0')
        return 0;
    if (ndim < 0 || ndim > HPML_IO_MAX_DIMS || (ndim > 0 && shape == NULL))
        return hpml_set_error(HPML_ERR_INVAL, "%s: bad shape", path);
    /* CSV: rows along the first axis, everything else flattened into the columns. */
    if (ndim > 0)
        rows = shape[0];
    for (int k = 1; k < ndim; k++)
        cols *= shape[k];
    for (i = 0; i < os->n && strcmp(os->f[i].path, path) != 0; i++)
        ;
    if (i == os->n || os->f[i].tmp[0] != '\0')
        return hpml_set_error(HPML_ERR_STATE, "internal error: %s is %s", path,
                              i == os->n ? "not in the output set" : "written twice");
    if ((rc = replaceable(path)) != 0)
        return rc;
    if (hpml_io_temp_next_to(path, 1, os->f[i].tmp, sizeof(os->f[i].tmp)) < 0)
        return hpml_set_error(HPML_ERR_IO, "%s: cannot create a file there: %s", path,
                              strerror(errno));
    snprintf(file, sizeof(file), "%s/" OUT_NAME, os->f[i].tmp);
    if (ends_with(path, ".csv")) {
        if ((header = csv_header_for(os->f[i].name, ndim, cols)) == NULL)
            return hpml_set_error(HPML_ERR_NOMEM, "%s: out of memory for its header", path);
        rc = hpml_csv_write(file, data, dtype, rows, cols, header);
        free(header);
    } else {
        rc = hpml_npy_write_nd(file, data, dtype, ndim, shape);
    }
    if (rc != 0)
        return restate(rc, path, file, os->f[i].tmp);
    /* As the io writers do: a replaced file keeps its mode (a new one has 0644). */
    if (stat(path, &st) == 0)
        chmod(file, st.st_mode & 07777);
    return 0;
}

/* fsync the folder of path, so that a rename into it is durable. */
static void sync_folder(const char *path)
{
    char *dir = strdup(path);
    int fd;

    if (dir == NULL)
        return;
    if ((fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

int hpml_io_outset_commit(hpml_io_outset_t *os)
{
    char file[TMP_LEN + sizeof(OUT_NAME) + 1], done[1024] = "";
    size_t i, at = 0;
    int rc;

    /* Everything that can be checked is checked before the first rename. */
    for (i = 0; i < os->n; i++) {
        if (os->f[i].tmp[0] == '\0')
            return hpml_set_error(HPML_ERR_STATE, "internal error: %s was not written",
                                  os->f[i].path);
        if ((rc = replaceable(os->f[i].path)) != 0)
            return rc;
    }
    for (i = 0; i < os->n; i++) {
        snprintf(file, sizeof(file), "%s/" OUT_NAME, os->f[i].tmp);
        if (rename(file, os->f[i].path) != 0)
            return hpml_set_error(HPML_ERR_IO, "%s: cannot rename the new file to it: %s%s%s",
                                  os->f[i].path, strerror(errno),
                                  done[0] ? "; already replaced: " : "", done);
        rmdir(os->f[i].tmp);
        os->f[i].tmp[0] = '\0';
        if (at < sizeof(done))
            at += (size_t)snprintf(done + at, sizeof(done) - at, "%s%s", at ? ", " : "",
                                   os->f[i].path);
        sync_folder(os->f[i].path);
    }
    return 0;
}
