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
     .help = "tuning file to write (default hpml-tuning.txt; '-' for stdout,\n"
             "the table then on stderr)"},
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
             "Time every algorithm of every collective on this communicator layout (f32,\n"
             "sum; sizes from --min growing by 4x, and --max itself; median and fastest of\n"
             "batches, maximum over ranks), print the table, and write a tuning file. The\n"
             "algorithm in force is kept unless another is faster by more than the noise\n"
             "(5%, or the spread of the two algorithms' samples); hier is not tried on one\n"
             "node. Load the file with HPML_TUNING_FILE=FILE; `hpml info` shows the table\n"
             "in force.\n",
    .epilog = "Environment: HPML_RANKS_PER_NODE=k tunes for virtual nodes of k ranks.\n",
};

/* Rank 0: the table kept in memory during the run, written to path at the end (through a
 * temporary file and a rename: a job torn down meanwhile leaves no temporary behind). */
static int write_table(const char *path, const char *table, size_t len)
{
    hpml_io_file_t *w;
    FILE *out;
    int rc;

    if ((rc = hpml_io_file_open(path, &w, &out)) != 0)
        return rc;
    if (fwrite(table, 1, len, out) != len) {
        hpml_io_file_abort(w);
        return hpml_set_error(HPML_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    }
    return hpml_io_file_commit(w);
}

/* Rank 0, before the (long) timing run: where the table goes, checked now. *f is stdout,
 * or a stream into memory for write_table. 0 or an hpml error. */
static int open_table(const char *path, FILE **f, char **table, size_t *len)
{
    int rc;

    *f = NULL;
    if (strcmp(path, "-") == 0) {
        *f = stdout;
        return 0;
    }
    if ((rc = hpml_io_writable(path)) != 0) {
        char why[1200];

        snprintf(why, sizeof(why), "%s", hpml_last_error());
        return hpml_set_error(rc, "cannot create the tuning file: %s", why);
    }
    if ((*f = open_memstream(table, len)) == NULL)
        return hpml_set_error(HPML_ERR_NOMEM, "tune: out of memory");
    return 0;
}

int cmd_tune(int argc, char **argv)
{
    opts_t opts = {.path = "hpml-tuning.txt"};
    const opt_set_t set = {options, &opts};
    hpml_tune_options_t o;
    char *table = NULL;
    size_t table_len = 0;
    hpml_comm_t *comm = NULL;
    FILE *f = NULL;
    int operand, rc, status = CLI_EXIT_FAIL;

    if ((rc = opts_parse(&command, &set, 1, argc, argv, &operand)) != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    o = opts.t;
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
    /* Every rank learns whether rank 0 can write the table: an unwritable path is one line
     * and exit 1 on every rank, before the timing run. */
    rc = cli_rank() == 0 ? open_table(opts.path, &f, &table, &table_len) : 0;
    if (mlcli_check("tune", comm, rc) != 0)
        goto out;
    /* With -o - the tuning file is stdout, so the table goes to stderr. */
    rc = hpml_tune(comm, &o, f, opts.quiet ? NULL : f == stdout ? stderr : stdout);
    if (rc != 0) {
        /* The same error on every rank (options hpml_tune refuses) is one line and exit 1;
         * a failure of this rank alone, the others inside a collective, ends the job. */
        status = cli_fail_agreed("tune", rc);
        goto out;
    }
    rc = 0;
    if (f != NULL && f != stdout) {
        rc = fclose(f) != 0 ? hpml_set_error(HPML_ERR_NOMEM, "tune: out of memory")
                            : write_table(opts.path, table, table_len);
        f = NULL;
    }
    if (mlcli_check("tune", comm, rc) != 0)
        goto out;
    if (cli_rank() == 0 && strcmp(opts.path, "-") != 0)
        fprintf(stderr, "hpml tune: wrote %s (use HPML_TUNING_FILE=%s)\n", opts.path, opts.path);
    status = CLI_EXIT_OK;
out:
    if (f != NULL && f != stdout)
        fclose(f);
    free(table);
    hpml_comm_destroy(comm);
    return status;
}
