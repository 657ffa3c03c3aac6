/*
 * Helpers shared by the hpml subcommands. A subcommand runs after MPI_Init on every
 * rank, parses its options identically on every rank (so a usage error is seen by all
 * ranks and none hangs) and returns the process exit status: 0 success, 1 failure,
 * 2 usage error.
 */
#ifndef HPML_TOOLS_CLI_H
#define HPML_TOOLS_CLI_H

#include <getopt.h>
#include <stddef.h>

#define CLI_EXIT_OK    0
#define CLI_EXIT_FAIL  1
#define CLI_EXIT_USAGE 2

int cli_rank(void);
int cli_size(void);

/* Rank 0 prints "hpml <cmd>: <message>" and a usage line on stderr (every rank keeps
 * the message for cli_exit_agreed); returns CLI_EXIT_USAGE for the caller to return. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A failure only this rank may have seen (a file that will not open, an hpml error):
 * print "hpml <cmd>: <message>" with the rank and abort the whole job with MPI_Abort,
 * so that no other rank is left waiting in a collective. Does not return. */
void cli_fatal(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/*
 * A library call failed with err (its text from hpml_strerror and hpml_last_error) at a
 * point every rank reaches, where the others may have failed the same way (a setting the
 * ranks disagree on, a corrupt checkpoint) or not (a failure of this rank alone, the
 * others left inside a collective). The failing ranks meet in a nonblocking allreduce
 * over a duplicate of MPI_COMM_WORLD that nothing else uses (cli_init_comm) with a
 * 5-second deadline: when every rank arrives, rank 0 prints "hpml <cmd>: <error>" (one
 * line) and every rank gets CLI_EXIT_FAIL to return; when not, this rank prints the
 * error with its rank and ends the job with MPI_Abort.
 */
int cli_fail_agreed(const char *cmd, int err);
/*
 * main.c, before MPI_Finalize, with the command's exit status: every rank meets the
 * others in a nonblocking allreduce over a communicator of its own. A rank that
 * finished (status 0) waits for them. A rank that failed waits 5 seconds: when the
 * others come (they failed too, the usual case, as every rank parses the same options)
 * it returns status; when not, it failed alone (out of memory, say, before the first
 * collective; a launch that gave the ranks different options) and the others are at
 * work or waiting for it inside a collective, so it prints "hpml <cmd>: rank R: " and
 * its usage error, or "stopped with exit status S ...", and ends the job with MPI_Abort
 * instead of hanging in MPI_Finalize. cmd may be NULL.
 */
int cli_exit_agreed(const char *cmd, int status);
/*
 * main.c, before running anything: every rank compares its command word with the others
 * (is_command: argv[1] names a command; otherwise the whole argv is compared, as for
 * "hpml --version"). cli_getopt's first call compares the command's options as parsed.
 * Ranks started differently would hang or mix results: rank 0 prints one line naming the
 * first difference and two ranks' values, and every rank gets CLI_EXIT_USAGE. Collective
 * over MPI_COMM_WORLD (a communicator of its own); 0 when they agree.
 */
int cli_agree_command(int argc, char **argv, int is_command);
/* main.c: make the communicators of cli_fail_agreed and cli_exit_agreed after MPI_Init,
 * free them before Finalize. */
void cli_init_comm(void);
void cli_free_comm(void);

/*
 * getopt_long with hpml's diagnostics, for a subcommand's option loop (set optind = 1
 * before the first call). `optstring` gets the leading ':' added; `longopts` may be NULL.
 * Returns the next option's code, -1 after the last option, or '?' (return
 * CLI_EXIT_USAGE) once rank 0 has printed a usage error: an unknown option, an
 * ambiguous prefix (the options it could be are named), a value given to a long option
 * that takes none ("--json=1"), a missing value, an empty value ("--out ''") and, for a
 * value in a word of its own, one that is an option of this command ("--out --json":
 * the value was forgotten; "--out=--json" is taken as given), and a short option's value
 * written with '=' ("-o=x": "-o x" is suggested, or "-z50" for an optional value, which
 * is only ever attached). Every rank parses the same argv and returns the same codes:
 * the first call of a run compares the parsed options across the ranks first (see
 * cli_agree_command) and returns '?' when they differ. Not thread-safe (getopt's globals).
 */
int cli_getopt(const char *cmd, int argc, char **argv, const char *optstring,
               const struct option *longopts);

/* After cli_getopt: when `word` (an operand, by its address in argv) came right after a
 * short option whose value is optional and so only ever attached ("z::": "-z 50" is -z
 * without a value, then the operand 50), that option's letter; else 0. For a usage error
 * that tells why the word was not taken as the value. */
int cli_bare_optional(const char *word);

/* The value `arg` of option `opt` as an integer in min..max (LONG_MAX: no upper limit):
 * 0, or CLI_EXIT_USAGE after "<opt> must be an integer from <min> to <max> (got '<arg>')". */
int cli_opt_long(const char *cmd, const char *opt, const char *arg, long min, long max, long *out);

/* Number parsers: the whole string must be a number in range (no leading blanks); return
 * 0 or -1. */
int cli_parse_long(const char *s, long min, long max, long *out);
int cli_parse_double(const char *s, double *out);
/* Sizes, as hpml_size_parse reads them everywhere: "4096", "4K", "16M", "1G", "64KB". */
int cli_parse_size(const char *s, size_t *out);

/* A file a command reads or writes, and the option that named it (for messages). */
typedef struct cli_path {
    const char *opt;
    const char *path;
} cli_path_t;

/* Would writing `out` overwrite one of the n inputs (the same file, however spelled or
 * linked: hpml_io_same_file)? 0, or -1 with "<out> is the input <opt> <path>: writing
 * there would destroy it; choose another name" in why. NULL or empty paths are skipped.
 * Not collective. */
int cli_clobbers(const char *out, const cli_path_t *in, size_t n, char *why, size_t size);

/* The value of a prefix option (--out PREFIX: PREFIX.<what>.npy) names a file to be, not
 * a folder ("dir/" would write the hidden "dir/.<what>.npy"): 0, or CLI_EXIT_USAGE after
 * saying so. */
int cli_check_prefix(const char *cmd, const char *opt, const char *value);

/* --json records (docs/json.md, docs/hpml.schema.json): one object per run on stdout,
 * opened by cli_json_begin as {"schema_version": N, "command": "<cmd>"; the caller adds
 * ", \"key\": value" pairs and the closing brace. cli_json_num prints a number with
 * 17 significant digits, or null when have is 0 (not reached, not measured). */
void cli_json_begin(const char *cmd);
void cli_json_num(double v, int have);
/* A JSON string, or null for NULL. */
void cli_json_str_or_null(const char *s);

/* The command to use in messages: "hpml" (argv[0] basename). */
extern const char *cli_prog;

/* Every subcommand: int cmd_<name>(int argc, char **argv), listed in commands.h. */
#define HPML_COMMAND(name, summary) int cmd_##name(int argc, char **argv);
#include "commands.h"
#undef HPML_COMMAND

#endif
