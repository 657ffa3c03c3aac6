/*
 * Option tables: each command declares its options once (name, letter, type, range,
 * destination, help) and one parser reads them, with cli_getopt's diagnostics, converts
 * and range-checks every value with one message style, and writes --help from the same
 * table. A command's options live in a struct of its own; a table names each destination
 * by its offset in that struct, and a command may parse several tables into several
 * structs (its own and the ones it shares with other commands, mlcli.h).
 */
#ifndef HPML_TOOLS_OPTS_H
#define HPML_TOOLS_OPTS_H

#include <stddef.h>
#include <stdio.h>

typedef enum {
    OPT_FLAG,    /* int: set to 1 */
    OPT_STRING,  /* const char *: the argument itself (borrowed from argv) */
    OPT_INT,     /* int in [min, max] */
    OPT_LONG,    /* long in [min, max] */
    OPT_SIZE,    /* size_t: an integer in [min, max] */
    OPT_U64,     /* uint64_t: an integer in [min, max] */
    OPT_BYTES,   /* size_t: a size (4096, 64K, 16M) in [min, max] */
    OPT_DOUBLE,  /* double: a finite number in [dmin, dmax] */
    OPT_FUNC,    /* fn(dest struct, argument or NULL, shown name): its own parsing */
    OPT_SECTION, /* no option: a heading in --help (help is the heading) */
} opt_kind_t;

typedef struct opt {
    const char *name; /* long name without "--"; NULL: the end of the table */
    char letter;      /* short option, or 0 */
    opt_kind_t kind;
    size_t off;      /* the destination: offset in the table's struct */
    const char *arg; /* the value's name in --help ("FILE"); NULL: takes no value */
    const char *help;
    long long min, max; /* OPT_INT, OPT_LONG, OPT_SIZE, OPT_BYTES */
    double dmin, dmax;  /* OPT_DOUBLE (inclusive, but see open_min) */
    int open_min;       /* OPT_DOUBLE: the value must be above dmin */
    int open_max;       /* OPT_DOUBLE: the value must be below dmax */
    const char *shown;  /* how messages name it ("-k"); NULL: "--name" */
    /* OPT_FUNC: parse `arg` into the table's struct `dest`. 0, or CLI_EXIT_USAGE after
     * cli_usage_error. */
    int (*fn)(void *dest, const char *arg, const char *shown);
    int optional; /* the value is optional and, as getopt has it, only ever attached */
} opt_t;

/* A table and the struct its offsets point into. */
typedef struct opt_set {
    const opt_t *opts;
    void *dest;
} opt_set_t;

/* What --help prints around the options, and what the command accepts besides them. */
typedef struct opt_cmd {
    const char *name;   /* "kmeans" */
    const char *usage;  /* the text before "Options:" (usage lines and description) */
    const char *epilog; /* after the options, or NULL */
    int max_operands;   /* words after the options it takes (0: none) */
} opt_cmd_t;

/*
 * Parse argv (argv[0] is the command's name) by the tables of sets (in order; --help
 * lists them in that order, then -h, --help). Returns 0 to run, with *operand the index
 * in argv of the first operand (argc when none; at most max_operands of them); -1 after
 * printing --help on rank 0; or CLI_EXIT_USAGE after one usage error: an unknown or
 * malformed option (cli_getopt's diagnostics, which also compare the options across the
 * ranks), a value out of range ("-k must be an integer from 1 to 2147483647 (got '0')"),
 * or an operand too many ("unexpected argument 'x'"). Not collective beyond cli_getopt's
 * first call. Not thread-safe.
 */
int opts_parse(const opt_cmd_t *cmd, const opt_set_t *sets, int nsets, int argc, char **argv,
               int *operand);

/* After opts_parse: was the option named `name` (long name) given? */
int opts_given(const char *name);

/* Print --help for cmd and its tables to f. */
void opts_help(const opt_cmd_t *cmd, const opt_set_t *sets, int nsets, FILE *f);

#endif
