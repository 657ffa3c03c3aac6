/* The `hpml` command: initialise MPI, dispatch to a subcommand, finalise. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "hpml/core.h"

static const struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} commands[] = {
#define HPML_COMMAND(name, summary) {#name, summary, cmd_##name},
#include "commands.h"
#undef HPML_COMMAND
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
    fprintf(f, "Usage: hpml <command> [options]\n"
               "       mpirun -np N hpml <command> [options]\n\n"
               "High-performance machine learning, deep learning and data science on MPI.\n\n"
               "Commands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'hpml <command> --help' or 'hpml help <command>' describes a command's options.\n"
               "Options: -h, --help  this text;  -V, --version  print the version.\n"
               "Exit status: 0 success, 1 failure, 2 usage error. A rank that fails alone\n"
               "prints its line with its rank and ends the job (MPI_Abort) within about 5 s.\n");
}

typedef int (*command_fn)(int argc, char **argv);

/* The command named `name`, or NULL. */
static command_fn find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(name, commands[i].name) == 0)
            return commands[i].run;
    return NULL;
}

/* The thread level to ask MPI for. THREAD_MULTIPLE lets comm run its progress thread
 * (hpml falls back to MPI's nonblocking collectives when the library provides less). A
 * benchmark of MPI's own calls only (`hpml bench` whose --impl, default mpi, lists only
 * mpi) asks for THREAD_SINGLE, as OMB's MPI_Init does: under THREAD_MULTIPLE Open MPI
 * takes locks in every call, which read as +0.08 us on a small allreduce against
 * osu_allreduce (docs/benchmarks.md). argv is the same on every rank (compared right
 * after), so every rank asks for the same level. */
static int thread_level(int argc, char **argv)
{
    const char *impl = "mpi";

    if (argc < 2 || strcmp(argv[1], "bench") != 0)
        return MPI_THREAD_MULTIPLE;
    for (int i = 2; i < argc; i++) {
        /* --impl, or what getopt_long takes for it: --im and --imp (--i is ambiguous) */
        size_t n = strcspn(argv[i], "=");

        if (strcmp(argv[i], "--") == 0)
            break;
        if (n < 4 || strncmp(argv[i], "--impl", n) != 0)
            continue;
        if (argv[i][n] == '=')
            impl = argv[i] + n + 1;
        else if (i + 1 < argc)
            impl = argv[++i];
    }
    /* "mpi", "mpi,mpi": nothing of hpml's runs */
    for (const char *p = impl; *p != '\0'; p += *p == ',') {
        size_t n = strcspn(p, ",");

        if (n != 3 || strncmp(p, "mpi", 3) != 0)
            return MPI_THREAD_MULTIPLE;
        p += n;
    }
    return MPI_THREAD_SINGLE;
}

int main(int argc, char **argv)
{
    command_fn run;
    int provided, rank, status = CLI_EXIT_USAGE;

    MPI_Init_thread(&argc, &argv, thread_level(argc, argv), &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    cli_init_comm();

    if (cli_agree_command(argc, argv, argc >= 2 && find_command(argv[1]) != NULL) != 0) {
        /* said by rank 0 */
    } else if (argc < 2) {
        cli_usage_error(NULL, "missing command");
    } else if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
               strcmp(argv[1], "help") == 0) {
        /* "hpml help CMD" is "hpml CMD --help". */
        if (argc > 3) {
            cli_usage_error(NULL, "unexpected argument '%s'", argv[3]);
        } else if (argc == 3) {
            char *help_argv[] = {argv[2], "--help", NULL};

            if ((run = find_command(argv[2])) == NULL)
                cli_usage_error(NULL, "unknown command '%s'", argv[2]);
            else
                status = run(2, help_argv);
        } else {
            if (rank == 0)
                usage(stdout);
            status = CLI_EXIT_OK;
        }
    } else if (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0) {
        if (argc > 2) {
            cli_usage_error(NULL, "unexpected argument '%s'", argv[2]);
        } else {
            if (rank == 0)
                printf("hpml %s\n", hpml_version());
            status = CLI_EXIT_OK;
        }
    } else if ((run = find_command(argv[1])) != NULL) {
        status = run(argc - 1, argv + 1);
    } else if (argv[1][0] == '-' && argv[1][1] != '\0') {
        /* Options go after the command; the only ones before it are --help, --version. */
        cli_usage_error(NULL, "unknown option '%s' (options go after the command)", argv[1]);
    } else {
        cli_usage_error(NULL, "unknown command '%s'", argv[1]);
    }
    fflush(stdout);
    status = cli_exit_agreed(argc >= 2 && find_command(argv[1]) ? argv[1] : NULL, status);
    cli_free_comm();
    MPI_Finalize();
    return status;
}
