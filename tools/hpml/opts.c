/* The option-table parser of the hpml commands (opts.h): getopt_long's tables and --help
 * from one declaration per option. */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hpml/core.h"
#include "opts.h"

/* Every option of a parse, flattened: at most this many, as no command has more. */
#define MAX_OPTS 96

static struct {
    const opt_t *o;
    void *dest;
    int code; /* what cli_getopt returns for it */
    int given;
} flat[MAX_OPTS];
static int nflat;

/* The name messages use for o. */
static void shown_name(const opt_t *o, char *buf, size_t size)
{
    if (o->shown != NULL)
        snprintf(buf, size, "%s", o->shown);
    else
        snprintf(buf, size, "--%s", o->name);
}

/* Flatten the tables; build getopt's optstring and long options. -1 if they overflow. */
static int build(const opt_set_t *sets, int nsets, char *spec, size_t spec_size, struct option *lo)
{
    size_t sl = 0, nl = 0;

    nflat = 0;
    spec[0] = '\0';
    for (int s = 0; s < nsets; s++) {
        for (const opt_t *o = sets[s].opts; o->name != NULL || o->kind == OPT_SECTION; o++) {
            if (o->kind == OPT_SECTION)
                continue;
            if (nflat == MAX_OPTS || sl + 4 >= spec_size)
                return -1;
            flat[nflat].o = o;
            flat[nflat].dest = sets[s].dest;
            flat[nflat].code = o->letter ? o->letter : 256 + nflat;
            flat[nflat].given = 0;
            if (o->letter) {
                spec[sl++] = o->letter;
                if (o->arg != NULL)
                    spec[sl++] = ':';
                if (o->arg != NULL && o->optional)
                    spec[sl++] = ':';
                spec[sl] = '\0';
            }
            if (o->name[0] != '\0') {
                lo[nl].name = o->name;
                lo[nl].has_arg = o->arg == NULL ? no_argument
                                 : o->optional  ? optional_argument
                                                : required_argument;
                lo[nl].flag = NULL;
                lo[nl].val = flat[nflat].code;
                nl++;
            }
            nflat++;
        }
    }
    if (sl + 2 >= spec_size)
        return -1;
    strcat(spec, "h");
    lo[nl++] = (struct option){"help", no_argument, NULL, 'h'};
    lo[nl] = (struct option){NULL, 0, NULL, 0};
    return 0;
}

/* Integer option values: the whole argument, in [min, max]. */
static int integer(const char *cmd, const opt_t *o, const char *arg, long long *v)
{
    char name[64];
    long lv;

    shown_name(o, name, sizeof(name));
    if (cli_parse_long(arg, (long)o->min, (long)o->max, &lv) == 0) {
        *v = lv;
        return 0;
    }
    if (o->max == LONG_MAX)
        return cli_usage_error(cmd, "%s must be an integer >= %lld (got '%s')", name, o->min, arg);
    return cli_usage_error(cmd, "%s must be an integer from %lld to %lld (got '%s')", name, o->min,
                           o->max, arg);
}

/* Store the value of option i (argument arg, NULL for a flag). 0 or CLI_EXIT_USAGE. */
static int store(const char *cmd, int i, const char *arg)
{
    const opt_t *o = flat[i].o;
    char *d = (char *)flat[i].dest + o->off, name[64];
    long long v = 0;
    double x;
    size_t z;

    shown_name(o, name, sizeof(name));
    flat[i].given = 1;
    switch (o->kind) {
    case OPT_FLAG: *(int *)(void *)d = 1; return 0;
    case OPT_STRING: *(const char **)(void *)d = arg; return 0;
    case OPT_FUNC: return o->fn(flat[i].dest, arg, name);
    case OPT_BYTES:
        if (cli_parse_size(arg, &z) != 0 || (long long)z < o->min || (long long)z > o->max) {
            char lo[32], hi[32];

            return cli_usage_error(cmd,
                                   "%s must be a size from %s to %s bytes, like 64K or 16M "
                                   "(got '%s')",
                                   name, hpml_size_format((uint64_t)o->min, lo, sizeof(lo)),
                                   hpml_size_format((uint64_t)o->max, hi, sizeof(hi)), arg);
        }
        *(size_t *)(void *)d = z;
        return 0;
    case OPT_DOUBLE:
        if (cli_parse_double(arg, &x) != 0 || x < o->dmin || x > o->dmax ||
            (o->open_min && x == o->dmin) || (o->open_max && x == o->dmax)) {
            if (o->dmax >= HUGE_VAL)
                return cli_usage_error(cmd, "%s must be a number %s %g (got '%s')", name,
                                       o->open_min ? ">" : ">=", o->dmin, arg);
            return cli_usage_error(cmd, "%s must be a number %s %g and %s %g (got '%s')", name,
                                   o->open_min ? ">" : ">=", o->dmin,
                                   o->open_max ? "<" : "<=", o->dmax, arg);
        }
        *(double *)(void *)d = x;
        return 0;
    default: break;
    }
    if (integer(cmd, o, arg, &v) != 0)
        return CLI_EXIT_USAGE;
    if (o->kind == OPT_INT)
        *(int *)(void *)d = (int)v;
    else if (o->kind == OPT_LONG)
        *(long *)(void *)d = (long)v;
    else if (o->kind == OPT_U64)
        *(uint64_t *)(void *)d = (uint64_t)v;
    else
        *(size_t *)(void *)d = (size_t)v;
    return 0;
}

int opts_parse(const opt_cmd_t *cmd, const opt_set_t *sets, int nsets, int argc, char **argv,
               int *operand)
{
    struct option lo[MAX_OPTS + 2];
    char spec[3 * MAX_OPTS + 4];
    int c, rc;

    if (build(sets, nsets, spec, sizeof(spec), lo) != 0)
        return cli_usage_error(cmd->name, "internal error: too many options");
    optind = 1;
    while ((c = cli_getopt(cmd->name, argc, argv, spec, lo)) != -1) {
        int i;

        if (c == 'h') {
            if (cli_rank() == 0)
                opts_help(cmd, sets, nsets, stdout);
            return -1;
        }
        if (c == '?')
            return CLI_EXIT_USAGE; /* cli_getopt has said what is wrong */
        for (i = 0; i < nflat && flat[i].code != c; i++)
            ;
        if (i == nflat)
            return cli_usage_error(cmd->name, "internal error: option code %d", c);
        if ((rc = store(cmd->name, i, optarg)) != 0)
            return rc;
    }
    if (argc - optind > cmd->max_operands) {
        const char *w = argv[optind + cmd->max_operands];
        int letter = cli_bare_optional(w);

        if (letter != 0)
            return cli_usage_error(cmd->name,
                                   "unexpected argument '%s' (-%c takes its value attached: -%c%s)",
                                   w, letter, letter, w);
        return cli_usage_error(cmd->name, "unexpected argument '%s'", w);
    }
    *operand = optind;
    return 0;
}

int opts_given(const char *name)
{
    for (int i = 0; i < nflat; i++)
        if (strcmp(flat[i].o->name, name) == 0)
            return flat[i].given;
    return 0;
}

/* "  -k, --clusters K" as --help starts an option's line. */
static void left_column(const opt_t *o, char *buf, size_t size)
{
    const char *arg = o->arg != NULL ? o->arg : "";

    if (o->letter && o->name[0] == '\0')
        snprintf(buf, size, "  -%c%s%s%s", o->letter, o->optional ? "[" : " ", arg,
                 o->optional ? "]" : "");
    else if (o->letter)
        snprintf(buf, size, "  -%c, --%s%s%s", o->letter, o->name, o->arg ? " " : "", arg);
    else
        snprintf(buf, size, "      --%s%s%s", o->name, o->arg ? " " : "", arg);
    if (o->letter && o->name[0] == '\0' && o->arg == NULL)
        snprintf(buf, size, "  -%c", o->letter);
}

/* One option's help: the left column, then its text, each line after the first indented
 * to the text's column. */
static void help_line(FILE *f, const char *left, const char *help, int col)
{
    int n = (int)strlen(left);

    fputs(left, f);
    if (n + 2 > col) { /* a long left column: the text on the next line */
        fputc('\n', f);
        n = 0;
    }
    for (const char *p = help; *p != '\0';) {
        size_t len = strcspn(p, "\n");

        fprintf(f, "%*s", col - n, "");
        fwrite(p, 1, len, f);
        fputc('\n', f);
        n = 0;
        p += len;
        if (*p == '\n')
            p++;
    }
}

void opts_help(const opt_cmd_t *cmd, const opt_set_t *sets, int nsets, FILE *f)
{
    char left[128];
    int col = 0;

    /* The text column: after the longest left column that is not too long. */
    for (int s = 0; s < nsets; s++) {
        for (const opt_t *o = sets[s].opts; o->name != NULL || o->kind == OPT_SECTION; o++) {
            int n;

            if (o->kind == OPT_SECTION)
                continue;
            left_column(o, left, sizeof(left));
            n = (int)strlen(left) + 2;
            if (n > col && n <= 24)
                col = n;
        }
    }
    if (col < 16)
        col = 16;
    fputs(cmd->usage, f);
    fputs("\nOptions:\n", f);
    for (int s = 0; s < nsets; s++) {
        for (const opt_t *o = sets[s].opts; o->name != NULL || o->kind == OPT_SECTION; o++) {
            if (o->kind == OPT_SECTION) {
                fprintf(f, "%s\n", o->help);
                continue;
            }
            left_column(o, left, sizeof(left));
            help_line(f, left, o->help, col);
        }
    }
    help_line(f, "  -h, --help", "this text", col);
    if (cmd->epilog != NULL)
        fprintf(f, "\n%s", cmd->epilog);
}
