/* `hpml tune`: time every collective algorithm here and write a tuning file. */
#include <errno.h>
#include <getopt.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "hpml/comm.h"

static const char *usage_text =
    "Usage: mpirun -np N hpml tune [options]\n\n"
    "Time every algorithm of every collective on this communicator layout (f32, sum; sizes\n"
    "from --min to --max growing by 4x; median of batches, maximum over ranks), print the\n"
    "table, and write a tuning file choosing the fastest algorithm per size. Load it with\n"
    "HPML_TUNING_FILE=FILE; `hpml info` shows the table in force.\n\n"
    "Options:\n"
    "  -o, --output FILE   tuning file to write (default hpml-tuning.txt; '-' for stdout)\n"
    "      --min SIZE      smallest message in bytes (default 8; 4K, 16M accepted)\n"
    "      --max SIZE      largest message in bytes (default 16M)\n"
    "  -s, --samples N     timed samples per point, median taken (default 9)\n"
    "  -c, --coll LIST     collectives, comma-separated: allreduce,bcast,reduce,allgather,\n"
    "                      reduce_scatter (default all)\n"
    "  -q, --quiet         do not print the timing table\n"
    "  -h, --help          this text\n\n"
    "Environment: HPML_RANKS_PER_NODE=k tunes for virtual nodes of k ranks.\n";

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

int cmd_tune(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'}, {"min", required_argument, NULL, 'm'},
        {"max", required_argument, NULL, 'M'},    {"samples", required_argument, NULL, 's'},
        {"coll", required_argument, NULL, 'c'},   {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    hpml_tune_options_t o = {0};
    const char *path = "hpml-tuning.txt";
    char *tmp = NULL;
    hpml_comm_t *comm = NULL;
    FILE *f = NULL;
    long v;
    int quiet = 0, c, rc;

    opterr = 0;
    optind = 0;
    while ((c = getopt_long(argc, argv, ":o:s:c:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'o': path = optarg; break;
        case 'm':
            if (cli_parse_size(optarg, &o.min_bytes) != 0 || o.min_bytes == 0)
                return cli_usage_error("tune", "--min '%s' is not a size", optarg);
            break;
        case 'M':
            if (cli_parse_size(optarg, &o.max_bytes) != 0 || o.max_bytes == 0)
                return cli_usage_error("tune", "--max '%s' is not a size", optarg);
            break;
        case 's':
            if (cli_parse_long(optarg, 1, 1000, &v) != 0)
                return cli_usage_error("tune", "--samples '%s' is not in 1..1000", optarg);
            o.samples = (int)v;
            break;
        case 'c':
            if (parse_colls(optarg, &o.colls) != 0)
                return cli_usage_error("tune", "--coll '%s': unknown collective", optarg);
            break;
        case 'q': quiet = 1; break;
        case 'h':
            if (cli_rank() == 0)
                fputs(usage_text, stdout);
            return CLI_EXIT_OK;
        case ':': return cli_usage_error("tune", "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error("tune", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("tune", "unexpected argument '%s'", argv[optind]);
    if (o.max_bytes != 0 && o.min_bytes > (o.max_bytes ? o.max_bytes : 0))
        return cli_usage_error("tune", "--min is larger than --max");

    /* Tune the built-in choices, not an earlier tuning file's. */
    unsetenv("HPML_TUNING_FILE");
    rc = hpml_comm_create(MPI_COMM_WORLD, NULL, &comm);
    if (rc != 0)
        cli_fatal("tune", "%s: %s", hpml_strerror(rc), hpml_last_error());

    if (cli_rank() == 0) {
        if (strcmp(path, "-") == 0) {
            f = stdout;
        } else {
            /* Written under a temporary name, renamed when complete. */
            tmp = malloc(strlen(path) + 16);
            if (tmp == NULL)
                cli_fatal("tune", "out of memory");
            sprintf(tmp, "%s.tmp%d", path, (int)getpid());
            f = fopen(tmp, "w");
            if (f == NULL)
                cli_fatal("tune", "%s: %s", tmp, strerror(errno));
        }
    }
    rc = hpml_tune(comm, &o, f, quiet || f == stdout ? NULL : stdout);
    if (rc != 0)
        cli_fatal("tune", "%s: %s", hpml_strerror(rc), hpml_last_error());
    if (cli_rank() == 0 && f != stdout) {
        if (fclose(f) != 0 || rename(tmp, path) != 0)
            cli_fatal("tune", "%s: %s", path, strerror(errno));
        fprintf(stderr, "hpml tune: wrote %s (use HPML_TUNING_FILE=%s)\n", path, path);
    }
    free(tmp);
    hpml_comm_destroy(comm);
    return CLI_EXIT_OK;
}
