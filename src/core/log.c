/* Diagnostics on stderr, one line each, prefixed "[hpml r<rank>]". */
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hpml/core.h"

/* -1 until read from HPML_LOG_LEVEL; a plain int is fine: every thread computes the
 * same value, so a race only repeats the parse. */
static int level_cache = -1;

static int parse_level(const char *s)
{
    static const char *names[] = {"error", "warn", "info", "debug"};

    if (s == NULL || *s == '\0')
        return HPML_LOG_WARN;
    for (int i = 0; i < 4; i++)
        if (strcasecmp(s, names[i]) == 0)
            return i;
    if (strcasecmp(s, "warning") == 0)
        return HPML_LOG_WARN;
    if (s[0] >= '0' && s[0] <= '3' && s[1] == '\0')
        return s[0] - '0';
    return -1;
}

hpml_log_level_t hpml_log_level(void)
{
    if (level_cache < 0) {
        const char *s = getenv("HPML_LOG_LEVEL");
        int v = parse_level(s);

        level_cache = v < 0 ? HPML_LOG_WARN : v; /* set before logging through it */
        if (v < 0)
            hpml_log_write(HPML_LOG_WARN,
                           "HPML_LOG_LEVEL='%s' is not error, warn, info, debug or 0-3; using warn",
                           s);
    }
    return (hpml_log_level_t)level_cache;
}

void hpml_log_set_level(hpml_log_level_t level)
{
    level_cache = (int)level;
}

void hpml_log_write(hpml_log_level_t level, const char *fmt, ...)
{
    static const char *tags[] = {"error", "warn", "info", "debug"};
    char msg[1024];
    int initialized = 0, finalized = 0, rank = -1;
    va_list ap;

    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized)
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* One fprintf per line so lines from different ranks do not interleave mid-line. */
    if (rank >= 0)
        fprintf(stderr, "[hpml r%d] %s: %s\n", rank, tags[level & 3], msg);
    else
        fprintf(stderr, "[hpml] %s: %s\n", tags[level & 3], msg);
}
