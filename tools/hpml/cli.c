/* Helpers shared by the hpml subcommands: errors, number parsing. */
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

const char *cli_prog = "hpml";

int cli_rank(void)
{
    int r = 0;

    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

int cli_size(void)
{
    int n = 1;

    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    char msg[512];

    if (cli_rank() != 0)
        return CLI_EXIT_USAGE;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (cmd != NULL) {
        fprintf(stderr, "%s %s: %s\n", cli_prog, cmd, msg);
        fprintf(stderr, "Usage: %s %s [options]  (try '%s %s --help')\n", cli_prog, cmd, cli_prog,
                cmd);
    } else {
        fprintf(stderr, "%s: %s\n", cli_prog, msg);
        fprintf(stderr, "Usage: %s <command> [options]  (commands:", cli_prog);
#define HPML_COMMAND(name, summary) fprintf(stderr, " %s", #name);
#include "commands.h"
#undef HPML_COMMAND
        fprintf(stderr, "; try '%s --help')\n", cli_prog);
    }
    return CLI_EXIT_USAGE;
}

void cli_fatal(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    char msg[1024];

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (cli_size() > 1)
        fprintf(stderr, "%s %s: rank %d: %s\n", cli_prog, cmd, cli_rank(), msg);
    else
        fprintf(stderr, "%s %s: %s\n", cli_prog, cmd, msg);
    fflush(stderr);
    /* An immediate abort can tear the job down before the launcher has forwarded this
     * line (seen with MPICH's Hydra when every rank fails at once): give it a moment. */
    if (cli_size() > 1) {
        struct timespec pause = {0, 300 * 1000 * 1000};

        nanosleep(&pause, NULL);
    }
    MPI_Abort(MPI_COMM_WORLD, CLI_EXIT_FAIL);
    exit(CLI_EXIT_FAIL); /* MPI_Abort does not return; this satisfies noreturn. */
}

int cli_parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    long v;

    if (s == NULL || *s == '\0')
        return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int cli_parse_double(const char *s, double *out)
{
    char *end;
    double v;

    if (s == NULL || *s == '\0')
        return -1;
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

int cli_parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v, mult = 1;

    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0)
        return -1;
    switch (*end) {
    case '\0': break;
    case 'k':
    case 'K':
        mult = 1ull << 10;
        end++;
        break;
    case 'm':
    case 'M':
        mult = 1ull << 20;
        end++;
        break;
    case 'g':
    case 'G':
        mult = 1ull << 30;
        end++;
        break;
    default: return -1;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0' || v > SIZE_MAX / mult)
        return -1;
    *out = (size_t)(v * mult);
    return 0;
}

int cli_tmp_next_to(const char *path, char *tmp, size_t len)
{
    int fd;

    if ((size_t)snprintf(tmp, len, "%s.tmp.XXXXXX", path) >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    fd = mkstemp(tmp);
    if (fd < 0)
        return -1;
    fchmod(fd, 0644);
    close(fd);
    return 0;
}
