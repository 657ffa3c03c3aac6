/* Diagnostics on stderr, one line each, prefixed "[hpml r<rank>]". */
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/settings_internal.h"
#include "hpml/core.h"

/* -1 until read from HPML_LOG_LEVEL; a plain int is fine: every thread computes the
 * same value, so a race only repeats the parse. */
static int level_cache = -1;

/* The level HPML_LOG_LEVEL names (its registry choices: error, warn, info, debug, 0-3,
 * warning), warn when unset, -1 when malformed. */
static int parse_level(const char *s)
{
    uint64_t v;
    char why[8];

    if (s == NULL || *s == '\0')
        return HPML_LOG_WARN;
    if (hpml__setting_parse(HPML__S_LOG_LEVEL, s, &v, why, sizeof(why)) != 0)
        return -1;
    return v == 8 ? HPML_LOG_WARN : (int)(v % 4);
}

hpml_log_level_t hpml_log_level(void)
{
    if (level_cache < 0) {
        const char *s = getenv("HPML_LOG_LEVEL");
        int v = parse_level(s);

        /* A malformed value is hpml_comm_create's error on every rank; until then, warn. */
        level_cache = v < 0 ? HPML_LOG_WARN : v;
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
