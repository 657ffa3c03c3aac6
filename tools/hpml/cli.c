/* Helpers shared by the hpml subcommands: errors, option and number parsing. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "hpml/core.h"
#include "hpml/io.h"

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

/* The last usage error, on every rank: cli_exit_agreed says it when this rank had it alone. */
static char usage_msg[512];

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    char *msg = usage_msg;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(usage_msg), fmt, ap);
    va_end(ap);
    if (cli_rank() != 0)
        return CLI_EXIT_USAGE;
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

/* After this rank's last line: end the job with status. An immediate abort can tear the
 * job down before the launcher has forwarded the line (seen with MPICH's Hydra when every
 * rank fails at once): give it a moment first. */
static void __attribute__((noreturn)) abort_job(int status)
{
    fflush(stderr);
    if (cli_size() > 1) {
        struct timespec pause = {0, 500 * 1000 * 1000};

        nanosleep(&pause, NULL);
    }
    MPI_Abort(MPI_COMM_WORLD, status);
    exit(status); /* MPI_Abort does not return; this satisfies noreturn. */
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
    abort_job(CLI_EXIT_FAIL);
}

/* Used by cli_fail_agreed only: no other collective can match its allreduce. Likewise
 * exit_comm for cli_exit_agreed: on one communicator, a rank failing in cli_fail_agreed
 * would meet a rank that finished in cli_exit_agreed and take it for a failed one. */
static MPI_Comm fail_comm = MPI_COMM_NULL, exit_comm = MPI_COMM_NULL;
/* cli_agree_words's: every rank calls it at the same two points before anything else. */
static MPI_Comm agree_comm = MPI_COMM_NULL;

void cli_init_comm(void)
{
    if (MPI_Comm_dup(MPI_COMM_WORLD, &fail_comm) != MPI_SUCCESS)
        fail_comm = MPI_COMM_NULL;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &exit_comm) != MPI_SUCCESS)
        exit_comm = MPI_COMM_NULL;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &agree_comm) != MPI_SUCCESS)
        agree_comm = MPI_COMM_NULL;
}

void cli_free_comm(void)
{
    if (fail_comm != MPI_COMM_NULL)
        MPI_Comm_free(&fail_comm);
    if (exit_comm != MPI_COMM_NULL)
        MPI_Comm_free(&exit_comm);
    if (agree_comm != MPI_COMM_NULL)
        MPI_Comm_free(&agree_comm);
}

/* Every rank arrived in the nonblocking allreduce req within `seconds`? */
static int arrived_within(MPI_Request *req, double seconds)
{
    struct timespec tick = {0, 1000 * 1000};
    double t0 = MPI_Wtime();
    int done = 0;

    while (!done && MPI_Wtime() - t0 < seconds) {
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (!done)
            nanosleep(&tick, NULL);
    }
    return done;
}

int cli_exit_agreed(const char *cmd, int status)
{
    MPI_Request req;
    int one = 1, all = 0;

    if (exit_comm == MPI_COMM_NULL || cli_size() == 1 ||
        MPI_Iallreduce(&one, &all, 1, MPI_INT, MPI_SUM, exit_comm, &req) != MPI_SUCCESS)
        return status;
    if (status == CLI_EXIT_OK) {
        /* Finished: wait for the others however long they take; a rank that fails alone
         * ends the job from here. */
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        return status;
    }
    if (arrived_within(&req, 5.0))
        return status;
    /* The others are still at work, or waiting inside a collective for this rank. */
    fprintf(stderr, "%s%s%s: rank %d: ", cli_prog, cmd ? " " : "", cmd ? cmd : "", cli_rank());
    if (status == CLI_EXIT_USAGE && usage_msg[0] != '\0')
        fprintf(stderr, "%s (this rank alone: the other ranks went on)\n", usage_msg);
    else
        fprintf(stderr, "stopped with exit status %d while the other ranks went on\n", status);
    abort_job(status);
    return status;
}

int cli_fail_agreed(const char *cmd, int err)
{
    const char *detail = hpml_last_error();
    MPI_Request req;
    int one = 1, all = 0, done = 0;
    char msg[1100];

    if (detail != NULL && detail[0] != '\0')
        snprintf(msg, sizeof(msg), "%s: %s", hpml_strerror(err), detail);
    else
        snprintf(msg, sizeof(msg), "%s", hpml_strerror(err));
    /* On a communicator of its own: on MPI_COMM_WORLD it could match a collective the
     * other ranks are in (Open MPI's MPI_Comm_dup runs one), and this rank would take the
     * peers for failed ones while they wait forever. Agreed only when every rank came. */
    if (fail_comm != MPI_COMM_NULL &&
        MPI_Iallreduce(&one, &all, 1, MPI_INT, MPI_SUM, fail_comm, &req) == MPI_SUCCESS)
        done = arrived_within(&req, 5.0);
    if (done && all == cli_size()) {
        if (cli_rank() == 0) {
            fprintf(stderr, "%s %s: %s\n", cli_prog, cmd, msg);
            fflush(stderr);
        }
        return CLI_EXIT_FAIL;
    }
    fprintf(stderr, "%s %s: rank %d: %s\n", cli_prog, cmd, cli_rank(), msg);
    abort_job(CLI_EXIT_FAIL);
    return CLI_EXIT_FAIL; /* not reached */
}

/*
 * Agreeing on the command line. Ranks started with different commands or options would
 * run different collectives and hang, or run the same ones on different settings and mix
 * their results; so before its first collective every rank compares what it parsed with
 * the others. A run's command line is a list of items: the command, then its options as
 * parsed (each under its canonical long name, sorted by name, so that "-k 3", "--clusters=3"
 * and "--clu 3" are one item and the order of options does not matter), then its operands
 * in order. Each item has a key (what it is) and a text (how it reads in a message).
 */
typedef struct item {
    char *key, *text;
} item_t;

typedef struct items {
    item_t *v;
    size_t n, cap;
    int nomem;
} items_t;

static void items_add(items_t *l, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void items_add(items_t *l, const char *key, const char *fmt, ...)
{
    va_list ap;
    char *text = NULL, *k = strdup(key);
    int n;

    va_start(ap, fmt);
    n = vasprintf(&text, fmt, ap);
    va_end(ap);
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        item_t *v = realloc(l->v, cap * sizeof(*v));

        if (v != NULL) {
            l->v = v;
            l->cap = cap;
        }
    }
    if (n < 0 || k == NULL || l->n == l->cap) {
        l->nomem = 1;
        free(k);
        if (n >= 0)
            free(text);
        return;
    }
    l->v[l->n].key = k;
    l->v[l->n].text = text;
    l->n++;
}

static void items_free(items_t *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].key);
        free(l->v[i].text);
    }
    free(l->v);
    memset(l, 0, sizeof(*l));
}

/* Sort items [from, to) by key, keeping the order of equal keys (a repeated option). */
static void items_sort(items_t *l, size_t from, size_t to)
{
    for (size_t i = from + 1; i < to; i++) {
        item_t t = l->v[i];
        size_t j = i;

        for (; j > from && strcmp(l->v[j - 1].key, t.key) > 0; j--)
            l->v[j] = l->v[j - 1];
        l->v[j] = t;
    }
}

/* The items as bytes: each key and text followed by a NUL. NULL when out of memory. */
static char *items_pack(const items_t *l, size_t *len)
{
    size_t n = 0, at = 0;
    char *buf;

    for (size_t i = 0; i < l->n; i++)
        n += strlen(l->v[i].key) + strlen(l->v[i].text) + 2;
    if (l->nomem || (buf = malloc(n + 1)) == NULL)
        return NULL;
    for (size_t i = 0; i < l->n; i++) {
        size_t a = strlen(l->v[i].key) + 1, b = strlen(l->v[i].text) + 1;

        memcpy(buf + at, l->v[i].key, a);
        memcpy(buf + at + a, l->v[i].text, b);
        at += a + b;
    }
    *len = n;
    return buf;
}

/* The next item of a packed list at *at (key, text), or 0 at its end. */
static int items_next(const char *buf, size_t len, size_t *at, const char **key, const char **text)
{
    if (*at >= len)
        return 0;
    *key = buf + *at;
    *at += strlen(*key) + 1;
    *text = *at < len ? buf + *at : "";
    *at += strlen(*text) + 1;
    return 1;
}

/* Rank 0's packed list a against rank r's b: the first item that differs, in words. */
static void items_diff(const char *a, size_t alen, const char *b, size_t blen, int r, char *msg,
                       size_t size)
{
    size_t i = 0, j = 0;
    const char *ka = NULL, *ta = NULL, *kb = NULL, *tb = NULL;
    int more_a, more_b, c;

    for (;;) {
        more_a = items_next(a, alen, &i, &ka, &ta);
        more_b = items_next(b, blen, &j, &kb, &tb);
        if (!more_a && !more_b) {
            snprintf(msg, size, "rank 0 and rank %d differ", r); /* a hash collision */
            return;
        }
        c = !more_a ? 1 : !more_b ? -1 : strcmp(ka, kb);
        if (c == 0 && strcmp(ta, tb) == 0)
            continue;
        if (c == 0)
            snprintf(msg, size, "rank 0 has %s, rank %d has %s", ta, r, tb);
        else if (c < 0)
            snprintf(msg, size, "rank 0 has %s, rank %d does not", ta, r);
        else
            snprintf(msg, size, "rank %d has %s, rank 0 does not", r, tb);
        return;
    }
}

static uint64_t fnv1a(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;

    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

/*
 * Collective over every rank: 0 when all ranks' item lists are the same; otherwise rank
 * 0 prints one line naming the first item in which it differs from the lowest rank that
 * differs, and every rank gets CLI_EXIT_USAGE.
 */
static int agree_items(const char *cmd, const items_t *l)
{
    uint64_t mine[2], hi[2], h0;
    unsigned long long n = 0;
    char *buf = NULL, *other = NULL, msg[1024];
    size_t len = 0;
    int rank = cli_rank(), size = cli_size(), cand, first;

    if (size == 1 || agree_comm == MPI_COMM_NULL)
        return 0;
    buf = items_pack(l, &len);
    if (buf == NULL) { /* differs from every list: the message says so */
        len = 0;
        mine[0] = 0;
    } else {
        mine[0] = fnv1a(buf, len) | 1;
    }
    mine[1] = ~mine[0];
    /* The largest hash and the complement of the smallest: equal when all are one. */
    MPI_Allreduce(mine, hi, 2, MPI_UINT64_T, MPI_MAX, agree_comm);
    if (hi[0] == ~hi[1]) {
        free(buf);
        return 0;
    }
    h0 = mine[0];
    MPI_Bcast(&h0, 1, MPI_UINT64_T, 0, agree_comm);
    cand = mine[0] != h0 ? rank : size;
    MPI_Allreduce(&cand, &first, 1, MPI_INT, MPI_MIN, agree_comm);
    if (len > INT_MAX) /* not a command line anyone types: compare the first 2 GB */
        len = INT_MAX;
    if (rank == first) {
        n = len;
        MPI_Send(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, 0, agree_comm);
        MPI_Send(buf, (int)len, MPI_CHAR, 0, 1, agree_comm);
    } else if (rank == 0) {
        MPI_Recv(&n, 1, MPI_UNSIGNED_LONG_LONG, first, 0, agree_comm, MPI_STATUS_IGNORE);
        other = malloc(n + 1);
        MPI_Recv(other, other != NULL ? (int)n : 0, MPI_CHAR, first, 1, agree_comm,
                 MPI_STATUS_IGNORE);
        if (buf == NULL || other == NULL)
            snprintf(msg, sizeof(msg), "rank 0 and rank %d differ (out of memory to say how)",
                     first);
        else
            items_diff(buf, len, other, (size_t)n, first, msg, sizeof(msg));
        fprintf(stderr, "%s%s%s: the ranks were started with different %s: %s\n", cli_prog,
                cmd != NULL ? " " : "", cmd != NULL ? cmd : "",
                cmd != NULL ? "options" : "commands", msg);
        fflush(stderr);
    }
    free(other);
    free(buf);
    snprintf(usage_msg, sizeof(usage_msg), "the ranks were started with different %s",
             cmd != NULL ? "options" : "commands");
    return CLI_EXIT_USAGE;
}

int cli_agree_command(int argc, char **argv, int is_command)
{
    items_t l = {0};
    char *line = NULL;
    size_t n = 0;
    FILE *f;
    int rc;

    /* One item: the command, or the whole line when it names none ("--version"). */
    if (argc >= 2 && is_command) {
        items_add(&l, "command", "the command '%s'", argv[1]);
    } else if ((f = open_memstream(&line, &n)) != NULL) {
        for (int i = 1; i < argc; i++)
            fprintf(f, "%s%s", i > 1 ? " " : "", argv[i]);
        if (fclose(f) == 0)
            items_add(&l, "command", argc >= 2 ? "'%s'" : "no command%s", line);
        else
            l.nomem = 1;
        free(line);
    } else {
        l.nomem = 1;
    }
    rc = agree_items(NULL, &l);
    items_free(&l);
    return rc;
}

/* The name under which option (c, li) is compared: its first long name for the same code
 * (so aliases agree), else "-c". */
static void canonical_name(int c, int li, const struct option *lo, char *name, size_t size)
{
    if (li >= 0 && lo[li].flag != NULL) {
        snprintf(name, size, "--%s", lo[li].name);
        return;
    }
    for (const struct option *o = lo; o->name != NULL; o++) {
        if (o->flag == NULL && o->val == c) {
            snprintf(name, size, "--%s", o->name);
            return;
        }
    }
    snprintf(name, size, "-%c", c);
}

/* Parse a copy of argv as cli_getopt will, silently, into items; leaves getopt reset. */
static void parsed_items(const char *cmd, int argc, char **argv, const char *spec,
                         const struct option *lo, items_t *l)
{
    char **copy = malloc(((size_t)argc + 1) * sizeof(*copy));
    char name[80];
    int c, li = -1;

    items_add(l, "command", "the command '%s'", cmd);
    if (copy == NULL) {
        l->nomem = 1;
        return;
    }
    memcpy(copy, argv, (size_t)argc * sizeof(*copy));
    copy[argc] = NULL;
    opterr = 0;
    optind = 0; /* glibc: start afresh, forgetting a cluster left half read */
    while ((c = getopt_long(argc, copy, spec, lo, &li)) != -1) {
        if (c == '?' || c == ':') {
            const char *w = optind >= 1 && optind <= argc ? copy[optind - 1] : "";

            items_add(l, w, "'%s'", w);
        } else {
            canonical_name(c, li, lo, name, sizeof(name));
            if (optarg != NULL)
                items_add(l, name, "'%s %s'", name, optarg);
            else
                items_add(l, name, "'%s'", name);
        }
        li = -1;
    }
    items_sort(l, 1, l->n);
    for (int i = optind; i < argc; i++) {
        char key[32];

        snprintf(key, sizeof(key), "~argument %03d", i - optind + 1);
        items_add(l, key, "the argument '%s'", copy[i]);
    }
    free(copy);
    optind = 0;
}

/* The long option `name` (len characters, without "--" and "=value") names, as
 * getopt_long matches: exactly, or as the prefix of one option (or of several that do the
 * same thing). NULL when none matches, with *ambiguous set when several different ones do. */
static const struct option *long_match(const struct option *lo, const char *name, size_t len,
                                       int *ambiguous)
{
    const struct option *o, *found = NULL;

    *ambiguous = 0;
    for (o = lo; o->name != NULL; o++) {
        if (strncmp(o->name, name, len) != 0)
            continue;
        if (o->name[len] == '\0')
            return o;
        if (found == NULL)
            found = o;
        else if (found->has_arg != o->has_arg || found->flag != o->flag || found->val != o->val)
            *ambiguous = 1;
    }
    return *ambiguous ? NULL : found;
}

/* Is s a cluster of short options ("-vk", not "-" or "--x") holding ch after the dash? */
static int short_group_has(const char *s, int ch)
{
    return ch != 0 && s[0] == '-' && s[1] != '-' && s[1] != '\0' && strchr(s + 1, ch) != NULL;
}

/* An unknown or ambiguous "--name[=value]", or a value given to a long option that
 * takes none: arg is the word getopt_long stopped at. */
static int long_error(const char *cmd, int c, const char *arg, const struct option *lo)
{
    const char *name = arg + 2;
    size_t len = strcspn(name, "=");
    const struct option *o;
    char list[400];
    size_t n = 0;
    int ambiguous;

    o = long_match(lo, name, len, &ambiguous);
    if (c == ':')
        return cli_usage_error(cmd, "option '--%s' needs a value", o != NULL ? o->name : name);
    if (o != NULL && o->has_arg == no_argument && name[len] == '=')
        return cli_usage_error(cmd, "option '--%s' takes no value (got '%s')", o->name, arg);
    if (len == 0) /* "--=x": every name starts with "" */
        return cli_usage_error(cmd, "unknown option '%s'", arg);
    if (!ambiguous)
        return cli_usage_error(cmd, "unknown option '--%.*s'", (int)len, name);
    list[0] = '\0';
    for (o = lo; o->name != NULL && n < sizeof(list); o++)
        if (strncmp(o->name, name, len) == 0)
            n += (size_t)snprintf(list + n, sizeof(list) - n, "%s--%s", n ? ", " : "", o->name);
    return cli_usage_error(cmd, "option '--%.*s' is ambiguous: it could be %s", (int)len, name,
                           list);
}

/*
 * getopt_long (':' first, opterr 0) returned c, '?' or ':'. getopt keeps where it stopped
 * to itself, so the word is worked out from optind and optopt as glibc leaves them: after
 * a long option, argv[optind - 1] is its word and optopt is 0 (unknown or ambiguous) or
 * the option's code (a value it does not take, a missing value); after a short option,
 * optopt is the letter and argv[optind - 1] is its cluster only when the letter ended it.
 */
static int getopt_error(const char *cmd, int c, int argc, char **argv, const struct option *lo)
{
    const char *arg = optind >= 1 && optind <= argc ? argv[optind - 1] : "";
    const char *group = NULL;
    const struct option *o;
    int ambiguous;
    size_t len;

    if (arg[0] == '-' && arg[1] == '-' && arg[2] != '\0') {
        const char *name = arg + 2;

        len = strcspn(name, "=");
        o = long_match(lo, name, len, &ambiguous);
        /* optopt != 0 with '?' is a value a long option does not take, or an unknown
         * letter in a cluster after this word: the word tells which. */
        if (c == ':' || optopt == 0 ||
            (o != NULL && o->has_arg == no_argument && name[len] == '=' && o->val == optopt))
            return long_error(cmd, c, arg, lo);
    }
    /* The cluster holding the letter: this word when the letter ended it, else the next. */
    if (short_group_has(arg, optopt) && arg[strlen(arg) - 1] == (char)optopt)
        group = arg;
    else if (optind < argc && short_group_has(argv[optind], optopt))
        group = argv[optind];
    /* A byte of a multibyte character, say: name the word instead. */
    if (optopt <= 0 || optopt > SCHAR_MAX || !isprint(optopt))
        return cli_usage_error(cmd, "unknown option '%s'", group != NULL ? group : arg);
    if (c == ':')
        return cli_usage_error(cmd, "option '-%c' needs a value", optopt);
    if (group == NULL || strlen(group) <= 2)
        return cli_usage_error(cmd, "unknown option '-%c'", optopt);
    /* "-json" for "--json" is a common slip: getopt reads it as -j -s -o -n. */
    len = strcspn(group + 1, "=");
    o = long_match(lo, group + 1, len, &ambiguous);
    if (o != NULL && o->name[len] == '\0')
        return cli_usage_error(cmd, "unknown option '-%c' in '%s' (did you mean '--%s'?)", optopt,
                               group, o->name);
    return cli_usage_error(cmd, "unknown option '-%c' in '%s'", optopt, group);
}

/* Does the short option ch take an optional value ("z::" in optstring)? */
static int short_optional(const char *optstring, int ch)
{
    const char *p = ch != ':' ? strchr(optstring, ch) : NULL;

    return p != NULL && p[1] == ':' && p[2] == ':';
}

/* Words that followed an option taking its value only attached, given bare ("-z 50"):
 * the word (by address, as getopt leaves it in argv) and the option's letter. */
static struct {
    const char *word;
    int letter;
} bare[8];
static size_t nbare;
/* Has this run's command line been compared across the ranks (cli_getopt's first call)? */
static int agreed;

int cli_getopt(const char *cmd, int argc, char **argv, const char *optstring,
               const struct option *longopts)
{
    static const struct option none[] = {{NULL, 0, NULL, 0}};
    char spec[128];
    const struct option *o;
    char name[64];
    int c, li = -1, ambiguous;

    if (longopts == NULL)
        longopts = none;
    if (optind <= 1) /* a new parse */
        nbare = 0;
    /* ':' first: a missing value comes back as ':', told apart from an unknown option. */
    snprintf(spec, sizeof(spec), "%s%s", optstring[0] == ':' ? "" : ":", optstring);
    /* Before the first option of the run, the ranks compare what they were given. */
    if (!agreed) {
        items_t l = {0};
        int rc;

        agreed = 1;
        parsed_items(cmd, argc, argv, spec, longopts, &l);
        rc = agree_items(cmd, &l);
        items_free(&l);
        if (rc != 0)
            return '?';
    }
    opterr = 0;
    c = getopt_long(argc, argv, spec, longopts, &li);
    if (c == -1)
        return -1;
    if (c == '?' || c == ':') {
        getopt_error(cmd, c, argc, argv, longopts);
        return '?';
    }
    /* "-z 50": getopt gives -z no value and 50 becomes an operand. Remember the word, so
     * that the command can say why when the operand does not fit (cli_bare_optional).
     * The words after optind are still in their original order. */
    if (optarg == NULL && li < 0 && short_optional(spec, c) && optind < argc &&
        argv[optind][0] != '-' && nbare < sizeof(bare) / sizeof(bare[0])) {
        bare[nbare].word = argv[optind];
        bare[nbare].letter = c;
        nbare++;
    }
    if (optarg == NULL)
        return c;
    if (li >= 0)
        snprintf(name, sizeof(name), "--%s", longopts[li].name);
    else
        snprintf(name, sizeof(name), "-%c", c);
    /* An empty value names no file and no number: "--out ''" is a slip, not a request. */
    if (optarg[0] == '\0') {
        cli_usage_error(cmd, "option '%s' has an empty value", name);
        return '?';
    }
    /* "-o=x" is "-o" with the value "=x" to getopt, but a slip for "-o x" to a person.
     * An optional value is only ever attached: "-z=50" is a slip for "-z50". */
    if (li < 0 && optarg[0] == '=' && optind >= 1 && optarg != argv[optind - 1]) {
        if (short_optional(spec, c))
            cli_usage_error(cmd, "option '%s' takes no '=': write '%s%s' (its value attached)",
                            name, name, optarg + 1);
        else
            cli_usage_error(cmd, "option '%s' takes no '=': write '%s %s'", name, name, optarg + 1);
        return '?';
    }
    /* "--out --json": the value was forgotten and the next option taken in its place.
     * Only a value in a word of its own (not "--out=--json") is questioned. */
    if (optind >= 1 && optarg == argv[optind - 1] && optarg[0] == '-' && optarg[1] == '-') {
        size_t len = strcspn(optarg + 2, "=");

        o = long_match(longopts, optarg + 2, len, &ambiguous);
        if (optarg[2] == '\0' || o != NULL) {
            cli_usage_error(cmd, "option '%s' needs a value (got the option '%s')", name, optarg);
            return '?';
        }
    }
    /* "-o -q" likewise, when the letter is one of this command's options. A negative
     * number ("-3") starts with a digit and stays a value; so does "-" (stdin/stdout). */
    if (optind >= 1 && optarg == argv[optind - 1] && optarg[0] == '-' && optarg[1] != '-' &&
        optarg[1] != '\0' && optarg[1] != ':' && strchr(spec, optarg[1]) != NULL) {
        cli_usage_error(cmd, "option '%s' needs a value (got the option '-%c')", name, optarg[1]);
        return '?';
    }
    return c;
}

int cli_bare_optional(const char *word)
{
    for (size_t i = 0; i < nbare; i++)
        if (bare[i].word == word)
            return bare[i].letter;
    return 0;
}

int cli_opt_long(const char *cmd, const char *opt, const char *arg, long min, long max, long *out)
{
    if (cli_parse_long(arg, min, max, out) == 0)
        return 0;
    if (max == LONG_MAX)
        return cli_usage_error(cmd, "%s must be an integer >= %ld (got '%s')", opt, min, arg);
    return cli_usage_error(cmd, "%s must be an integer from %ld to %ld (got '%s')", opt, min, max,
                           arg);
}

int cli_parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    long v;

    /* strtol skips leading blanks; the whole string must be the number. */
    if (s == NULL || *s == '\0' || isspace((unsigned char)*s))
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

    if (s == NULL || *s == '\0' || isspace((unsigned char)*s))
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
    uint64_t v;

    if (hpml_size_parse(s, &v) != 0 || v > SIZE_MAX)
        return -1;
    *out = (size_t)v;
    return 0;
}

int cli_clobbers(const char *out, const cli_path_t *in, size_t n, char *why, size_t size)
{
    if (out == NULL || out[0] == '\0')
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (hpml_io_same_file(out, in[i].path)) {
            if (strcmp(out, in[i].path) == 0)
                snprintf(why, size,
                         "%s is the input %s %s: writing there would destroy it; choose another "
                         "name",
                         out, in[i].opt, in[i].path);
            else
                snprintf(why, size,
                         "%s is the same file as the input %s %s: writing there would destroy "
                         "it; choose another name",
                         out, in[i].opt, in[i].path);
            return -1;
        }
    }
    return 0;
}

int cli_check_prefix(const char *cmd, const char *opt, const char *value)
{
    struct stat st;
    size_t n = value != NULL ? strlen(value) : 0;

    if (n == 0)
        return 0;
    if (value[n - 1] == '/' || (stat(value, &st) == 0 && S_ISDIR(st.st_mode)))
        return cli_usage_error(cmd,
                               "%s %s names a folder: give a file name, or a prefix in the folder "
                               "(%s%srun)",
                               opt, value, value, value[n - 1] == '/' ? "" : "/");
    return 0;
}

void cli_json_begin(const char *cmd)
{
    printf("{\"schema_version\": %d, \"command\": ", HPML_JSON_SCHEMA_VERSION);
    hpml_json_string(stdout, cmd);
}

void cli_json_num(double v, int have)
{
    if (have && isfinite(v))
        printf("%.17g", v);
    else
        printf("null");
}

void cli_json_str_or_null(const char *s)
{
    if (s != NULL)
        hpml_json_string(stdout, s);
    else
        printf("null");
}
