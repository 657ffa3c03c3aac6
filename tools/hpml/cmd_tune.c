/* `hpml tune`: time every collective algorithm here and write a tuning file. */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "mlcli.h"
#include "opts.h"
#include "hpml/comm.h"

/* hpml_tune's defaults for --min and --max (hpml/comm.h: 0 means these). */
#define TUNE_MIN ((size_t)8)
#define TUNE_MAX ((size_t)16 << 20)

static int parse_colls(const char *s, unsigned *out)
{
    char buf[256], *tok, *save = NULL;

    if (strlen(s) >= sizeof(buf))
        return -1;
    strcpy(buf, s);
    *out = 0;
    for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        int c;

        for (c = 0; c < HPML_COLL_COUNT; c++)
            if (strcmp(tok, hpml_coll_name((hpml_coll_t)c)) == 0)
                break;
        if (c == HPML_COLL_COUNT)
            return -1;
        *out |= 1u << c;
    }
    return *out ? 0 : -1;
}

typedef struct {
    hpml_tune_options_t t;
    const char *path;
    int quiet;
} opts_t;

static int parse_coll_list(void *dest, const char *arg, const char *shown)
{
    opts_t *o = dest;

    if (parse_colls(arg, &o->t.colls) != 0)
        return cli_usage_error("tune", "%s '%s': unknown collective", shown, arg);
    return 0;
}

#define OFF(field) offsetof(opts_t, field)
static const opt_t options[] = {
    {.name = "output",
     .letter = 'o',
     .kind = OPT_STRING,
     .off = OFF(path),
     .arg = "FILE",
     .help = "tuning file to write (default hpml-tuning.txt; '-' for stdout)"},
    {.name = "min",
     .kind = OPT_BYTES,
     .off = OFF(t.min_bytes),
     .arg = "SIZE",
     .help = "smallest message in bytes (default 8; 4K, 16M accepted)",
     .min = 1,
     .max = 1LL << 40},
    {.name = "max",
     .kind = OPT_BYTES,
     .off = OFF(t.max_bytes),
     .arg = "SIZE",
     .help = "largest message in bytes (default 16M)",
     .min = 1,
     .max = 1LL << 40},
    {.name = "samples",
     .letter = 's',
     .kind = OPT_INT,
     .off = OFF(t.samples),
     .arg = "N",
     .help = "timed samples per point, median taken (default 9)",
     .min = 1,
     .max = 1000,
     .shown = "--samples"},
    {.name = "coll",
     .letter = 'c',
     .kind = OPT_FUNC,
     .arg = "LIST",
     .fn = parse_coll_list,
     .help = "collectives, comma-separated: allreduce,bcast,reduce,allgather,\n"
             "reduce_scatter (default all)"},
    {.name = "quiet",
     .letter = 'q',
     .kind = OPT_FLAG,
     .off = OFF(quiet),
     .help = "do not print the timing table"},
    {0},
};
#undef OFF

static const opt_cmd_t command = {
    .name = "tune",
    .usage = "Usage: mpirun -np N hpml tune [options]\n\n"
             "Time every algorithm of every collective on this communicator layout (f32, sum; "
             "sizes\n"
             "from --min to --max growing by 4x; median of batches, maximum over ranks), print "
             "the\n"
             "table, and write a tuning file choosing the fastest algorithm per size. Load it "
             "with\n"
             "HPML_TUNING_FILE=FILE; `hpml info` shows the table in force.\n",
    .epilog = "Environment: HPML_RANKS_PER_NODE=k tunes for virtual nodes of k ranks.\n",
};

int cmd_tune(int argc, char **argv)
{
    opts_t opts = {.path = "hpml-tuning.txt"};
    const opt_set_t set = {options, &opts};
    hpml_tune_options_t o;
    const char *path;
    char tmp[4200] = "", *table = NULL; /* tmp: the temporary file, once made */
    size_t table_len = 0;
    hpml_comm_t *comm = NULL;
    FILE *f = NULL, *out;
    int quiet, to_file = 0, operand, rc, status = CLI_EXIT_FAIL;

    if ((rc = opts_parse(&command, &set, 1, argc, argv, &operand)) != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    o = opts.t;
    path = opts.path;
    quiet = opts.quiet;
    /* Against the defaults too (hpml_tune's: 8 bytes, 16M), so that '--max 4' or
     * '--min 32M' is a usage error before anything is created. */
    if ((o.min_bytes ? o.min_bytes : TUNE_MIN) > (o.max_bytes ? o.max_bytes : TUNE_MAX))
        return cli_usage_error("tune", "--min (%zu) is larger than --max (%zu)",
                               o.min_bytes ? o.min_bytes : TUNE_MIN,
                               o.max_bytes ? o.max_bytes : TUNE_MAX);

    /* Tune the built-in choices, not an earlier tuning file's. */
    unsetenv("HPML_TUNING_FILE");
    if (mlcli_comm_create("tune", &comm) != 0)
        return CLI_EXIT_FAIL;

    /* Rank 0 checks the output before the (long) timing run, by creating and removing its
     * temporary file; every rank learns whether it could, so an unwritable path is one
     * line and exit 1 on every rank. The table is kept in memory during the run and
     * written under the temporary name only at the end: a job torn down meanwhile (another
     * rank's MPI_Abort, a kill) leaves no temporary file behind. */
    rc = 0;
    if (cli_rank() == 0) {
        struct stat st;

        if (strcmp(path, "-") == 0) {
            f = stdout;
        } else if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            /* The rename at the end would fail, after the whole timing run. */
            rc = hpml_set_error(HPML_ERR_IO, "%s: cannot create the tuning file: is a directory",
                                path);
        } else if (cli_tmp_next_to(path, tmp, sizeof(tmp)) != 0) {
            rc = hpml_set_error(HPML_ERR_IO, "%s: cannot create a file there: %s", path,
                                strerror(errno));
            tmp[0] = '\0';
        } else {
            /* Written under a temporary name at the end, renamed when complete. */
            unlink(tmp);
            tmp[0] = '\0';
            to_file = 1;
            f = open_memstream(&table, &table_len);
            if (f == NULL)
                rc = hpml_set_error(HPML_ERR_NOMEM, "tune: out of memory");
        }
    }
    if (mlcli_check("tune", comm, rc) != 0)
        goto out;
    rc = hpml_tune(comm, &o, f, quiet || f == stdout ? NULL : stdout);
    if (rc != 0) {
        /* The same error on every rank (options hpml_tune refuses) is one line and exit 1;
         * a failure of this rank alone, the others inside a collective, ends the job. */
        status = cli_fail_agreed("tune", rc);
        goto out;
    }
    rc = 0;
    if (f != NULL && f != stdout) {
        /* The table, from memory to the temporary file, then renamed. */
        int closed = fclose(f);

        f = NULL;
        if (closed != 0) {
            rc = hpml_set_error(HPML_ERR_NOMEM, "tune: out of memory");
        } else if (cli_tmp_next_to(path, tmp, sizeof(tmp)) != 0) {
            rc = hpml_set_error(HPML_ERR_IO, "%s: cannot create a file there: %s", path,
                                strerror(errno));
            tmp[0] = '\0';
        } else if (!(out = fopen(tmp, "w"))) {
            rc =
                hpml_set_error(HPML_ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(errno));
        } else {
            int bad = fwrite(table, 1, table_len, out) != table_len;

            bad |= fclose(out) != 0;
            if (bad || rename(tmp, path) != 0)
                rc = hpml_set_error(HPML_ERR_IO, "%s: %s", path, strerror(errno));
        }
    }
    if (mlcli_check("tune", comm, rc) != 0)
        goto out;
    if (cli_rank() == 0 && to_file)
        fprintf(stderr, "hpml tune: wrote %s (use HPML_TUNING_FILE=%s)\n", path, path);
    status = CLI_EXIT_OK;
out:
    /* A failed run leaves no temporary file behind. */
    if (f != NULL && f != stdout)
        fclose(f);
    if (status != CLI_EXIT_OK && tmp[0] != '\0')
        unlink(tmp);
    free(table);
    hpml_comm_destroy(comm);
    return status;
}
