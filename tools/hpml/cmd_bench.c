/*
 * `hpml bench <case> [options]`: OSU-micro-benchmark-compatible benchmarks comparing
 * native MPI with hpml's algorithms. Parses options (OMB's letters and meanings), runs
 * hpml_bench_run, prints text/CSV/JSON on rank 0 and optionally plots with gnuplot.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "opts.h"
#include "hpml/bench.h"
#include "hpml/io.h"

#define CMD "bench"

/* "50,90,99" into pct[]; 0 or -1. */
static int parse_pcts(const char *s, hpml_bench_opts_t *o)
{
    char buf[256], *tok, *save = NULL;

    if (strlen(s) >= sizeof(buf))
        return -1;
    strcpy(buf, s);
    o->npct = 0;
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        double v;

        if (o->npct == HPML_BENCH_MAX_PCT || cli_parse_double(tok, &v) != 0 || v <= 0 || v > 100)
            return -1;
        o->pct[o->npct++] = v;
    }
    return o->npct > 0 ? 0 : -1;
}

/* "[MIN:]MAX" into o; 0, or -1 for a malformed range. An explicit MAX of 0 is refused:
 * max_size 0 means "the case's default", so it would silently run the whole sweep. */
static int parse_range(const char *s, hpml_bench_opts_t *o)
{
    const char *colon = strchr(s, ':');
    char lo[64];

    if (colon == NULL) {
        o->min_size = 0;
        return cli_parse_size(s, &o->max_size) || o->max_size == 0 ? -1 : 0;
    }
    if ((size_t)(colon - s) >= sizeof(lo))
        return -1;
    memcpy(lo, s, (size_t)(colon - s));
    lo[colon - s] = '\0';
    if (cli_parse_size(lo, &o->min_size) != 0)
        return -1;
    if (colon[1] == '\0') /* "MIN:" keeps the default maximum */
        return 0;
    return cli_parse_size(colon + 1, &o->max_size) || o->max_size == 0 || o->max_size < o->min_size
               ? -1
               : 0;
}

static int parse_root(const char *s, hpml_bench_opts_t *o)
{
    long v;

    if (strcmp(s, "rotate") == 0) {
        o->root_rotate = 1;
        return 0;
    }
    if (strncmp(s, "fixed:", 6) == 0 && cli_parse_long(s + 6, 0, 1 << 30, &v) == 0) {
        o->root_rotate = 0;
        o->root = (int)v;
        return 0;
    }
    return -1;
}

static void progress(void *arg, const char *impl, size_t size, int done, int total)
{
    const char *name = arg;

    fprintf(stderr, "\r\033[K[hpml bench] %s %s %zu B (%d/%d)", name, impl, size, done + 1, total);
    fflush(stderr);
}

/* Does the plot gnuplot wrote end as a whole file does (SVG's closing tag, PNG's IEND
 * chunk)? gnuplot exits 0 even when its writes fail (a full disk leaves an empty or cut
 * file), so this is what tells a finished plot from a broken one. */
static int plot_complete(const char *path, int png)
{
    static const char png_end[] = "IEND\xae\x42\x60\x82";
    char tail[64];
    size_t n = 0;
    long size;
    FILE *f = fopen(path, "rb");

    if (f == NULL)
        return 0;
    if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) > 0 &&
        fseek(f, size > (long)sizeof(tail) ? size - (long)sizeof(tail) : 0, SEEK_SET) == 0)
        n = fread(tail, 1, sizeof(tail), f);
    fclose(f);
    if (png)
        return n >= 8 && memcmp(tail + n - 8, png_end, 8) == 0;
    while (n > 0 && (tail[n - 1] == '\n' || tail[n - 1] == '\r' || tail[n - 1] == ' '))
        n--;
    return n >= 6 && memcmp(tail + n - 6, "</svg>", 6) == 0;
}

/* One gnuplot script with the data inline: latency (left) and bandwidth (right) against
 * size, log-log, one line per implementation. Returns 0 or -1 with a message printed. */
static int plot(const char *file, const char *tmp, hpml_bench_result_t *const *res, int nres)
{
    const hpml_bench_result_t *r = res[0];
    const char *ext = strrchr(file, '.');
    const char *bwname;
    int png = ext && strcmp(ext, ".png") == 0, bwcol, rc;
    FILE *g;

    if (ext == NULL || (!png && strcmp(ext, ".svg") != 0)) {
        fprintf(stderr, "hpml bench: --plot wants a .svg or .png file name\n");
        return -1;
    }
    if (r->kind == HPML_BENCH_KIND_BARRIER) {
        fprintf(stderr, "hpml bench: barrier has no sizes to plot\n");
        return -1;
    }
    switch (r->kind) {
    case HPML_BENCH_KIND_BW:
    case HPML_BENCH_KIND_MBW:
        bwname = "Bandwidth (MB/s)";
        bwcol = 1;
        break;
    case HPML_BENCH_KIND_LAT:
        bwname = "Size / latency (MB/s)";
        bwcol = 2;
        break;
    default:
        bwname = "Bus bandwidth (MB/s, nccl-tests busbw)";
        bwcol = 3;
        break;
    }
    /* gnuplot writes the plot to its stdout when it cannot open the output: never into
     * hpml's results. */
    g = popen("gnuplot >/dev/null", "w");
    if (g == NULL) {
        fprintf(stderr, "hpml bench: cannot run gnuplot\n");
        return -1;
    }
    /* noenhanced: algorithm names hold underscores, which enhanced text would turn into
     * subscripts. */
    fprintf(g, "set terminal %s size 1200,560 noenhanced %s\n", png ? "pngcairo" : "svg",
            png ? "font ',10'" : "dynamic");
    fprintf(g, "set output '%s'\n", tmp); /* renamed to `file` when complete */
    for (int d = 0; d < nres; d++)
        for (int i = 0; i < r->nimpls; i++) {
            fprintf(g, "$D%d_%d << EOD\n", d, i);
            for (size_t z = 0; z < res[d]->nsizes; z++) {
                const hpml_bench_row_t *w = &res[d]->rows[(size_t)i * res[d]->nsizes + z];
                double lat = r->kind == HPML_BENCH_KIND_NBC ? w->overall : w->avg;
                double bw = bwcol == 1 ? w->bw : bwcol == 2 ? w->size / w->avg : w->busbw;

                if (w->size == 0) /* no place on a log axis */
                    continue;
                fprintf(g, "%zu %.6g %.6g\n", w->size, lat, bw);
            }
            fprintf(g, "EOD\n");
        }
    fprintf(g, "set multiplot layout 1,2 title \"hpml bench %s: %d ranks, %s\"\n", r->case_name,
            r->ranks, r->dtype_label);
    fprintf(g, "set logscale x 2\nset logscale y 10\nset grid\nset key below\n"
               "set xlabel 'Message size (bytes)'\n");
    /* Size ticks at powers of 4 with binary suffixes (1K = 1024), as OMB users read them. */
    fprintf(g, "set xtics (");
    for (size_t s = 1, first = 1; s <= ((size_t)1 << 40); s *= 4) {
        const char *suffix[] = {"", "K", "M", "G", "T"};
        size_t v = s;
        int k = 0;

        while (v >= 1024 && k < 4)
            v /= 1024, k++;
        fprintf(g, "%s\"%zu%s\" %zu", first ? "" : ", ", v, suffix[k], s);
        first = 0;
    }
    fprintf(g, ")\n");
    for (int panel = 0; panel < 2; panel++) {
        int col = panel == 0 ? 2 : 3;

        if (panel == 0 && (r->kind == HPML_BENCH_KIND_BW || r->kind == HPML_BENCH_KIND_MBW))
            fprintf(g, "set ylabel 'Time per window (us)'\n");
        else if (panel == 0)
            fprintf(g, "set ylabel '%s'\n",
                    r->kind == HPML_BENCH_KIND_NBC ? "Overall latency (us)" : "Latency (us)");
        else
            fprintf(g, "set ylabel '%s'\n", bwname);
        fprintf(g, "plot ");
        for (int d = 0; d < nres; d++)
            for (int i = 0; i < r->nimpls; i++)
                fprintf(g, "%s$D%d_%d using 1:%d with linespoints lw 2 title '%s%s%s'",
                        d || i ? ", " : "", d, i, col, r->impls[i].name, nres > 1 ? " " : "",
                        nres > 1 ? res[d]->dtype_label : "");
        fprintf(g, "\n");
    }
    fprintf(g, "unset multiplot\n");
    rc = pclose(g);
    if (rc != 0) {
        fprintf(stderr, "hpml bench: gnuplot failed (status %d)\n", rc);
        return -1;
    }
    if (!plot_complete(tmp, png)) {
        fprintf(stderr, "hpml bench: --plot %s: gnuplot's file is incomplete (is the disk full?)\n",
                file);
        return -1;
    }
    if (rename(tmp, file) != 0) {
        fprintf(stderr, "hpml bench: cannot rename %s to %s: %s\n", tmp, file, strerror(errno));
        return -1;
    }
    return 0;
}

/* The plot's temporary file next to FILE: made on rank 0 (and removed) before the
 * benchmark runs, so that an unwritable path fails at once, and made again for the plot
 * at the end, so that a job torn down during the run leaves no temporary file. 0, or -1
 * with the message printed. */
static int plot_tmp(const char *file, char *tmp, size_t len)
{
    int fd = hpml_io_temp_next_to(file, 0, tmp, len);

    if (fd < 0) {
        fprintf(stderr, "hpml bench: --plot %s: cannot create a file there: %s\n", file,
                strerror(errno));
        return -1;
    }
    fchmod(fd, 0644);
    close(fd);
    return 0;
}

/* A word that is no benchmark name or one too many: "<what> '<word>'", and why when it
 * followed an option whose value must be attached and would be one ("-z 50"). Returns
 * CLI_EXIT_USAGE. */
static int operand_error(const char *word, const char *what)
{
    int letter = cli_bare_optional(word);
    hpml_bench_opts_t scratch;

    /* Only -z takes an optional value: a hint only for a word that would be its value. */
    if (letter == 'z' && parse_pcts(word, &scratch) == 0)
        return cli_usage_error(CMD, "%s '%s' (-%c takes its value attached: -%c%s)", what, word,
                               letter, letter, word);
    return cli_usage_error(CMD, "%s '%s'", what, word);
}

typedef struct {
    hpml_bench_opts_t b;
    hpml_dtype_t dtypes[3];
    const char *labels[3];
    int ndt;
    const char *impl, *plotfile, *case_name;
    int csv, json, force_progress;
    char note[200];
} opts_t;

static int opt_range(void *dest, const char *arg, const char *shown)
{
    if (parse_range(arg, &((opts_t *)dest)->b) != 0)
        return cli_usage_error(CMD, "bad %s '%s' (want [MIN:]MAX bytes, MAX >= 1)", shown, arg);
    return 0;
}

static int opt_type(void *dest, const char *arg, const char *shown)
{
    opts_t *o = dest;

    if (strcmp(arg, "all") == 0) {
        o->dtypes[0] = HPML_I8, o->dtypes[1] = HPML_I32, o->dtypes[2] = HPML_F32;
        o->labels[0] = "MPI_CHAR", o->labels[1] = "MPI_INT", o->labels[2] = "MPI_FLOAT";
        o->ndt = 3;
        return 0;
    }
    if (hpml_dtype_parse(arg, &o->dtypes[0]) != 0)
        return cli_usage_error(CMD,
                               "bad %s '%s' (mpi_char mpi_int mpi_float all "
                               "f32 f64 f16 bf16 i8 u8 i32 i64)",
                               shown, arg);
    o->ndt = 1;
    o->labels[0] = NULL;
    if (strcmp(arg, "mpi_char") == 0 || strcmp(arg, "char") == 0)
        o->labels[0] = "MPI_CHAR";
    return 0;
}

static int opt_pcts(void *dest, const char *arg, const char *shown)
{
    (void)shown;
    if (parse_pcts(arg ? arg : "50,90,99", &((opts_t *)dest)->b) != 0)
        return cli_usage_error(CMD, "bad -z '%s' (want percentiles like 50,90,99)", arg);
    return 0;
}

static int opt_root(void *dest, const char *arg, const char *shown)
{
    if (parse_root(arg, &((opts_t *)dest)->b) != 0)
        return cli_usage_error(CMD, "bad %s '%s' (want fixed:N or rotate)", shown, arg);
    return 0;
}

static int opt_mem(void *dest, const char *arg, const char *shown)
{
    opts_t *o = dest;

    if (cli_parse_size(arg, &o->b.mem_limit) != 0 || o->b.mem_limit == 0)
        return cli_usage_error(CMD, "bad %s '%s' (want bytes, e.g. 512M)", shown, arg);
    return 0;
}

/* OMB's options and meanings first, in OMB's order; then hpml's. The order of the long
 * names is getopt's too: an ambiguous prefix lists them in it. */
#define OFF(field) offsetof(opts_t, field)
static const opt_t options[] = {
    {.name = "message-size",
     .letter = 'm',
     .kind = OPT_FUNC,
     .arg = "[MIN:]MAX",
     .fn = opt_range,
     .shown = "-m/--message-size",
     .help = "sizes in bytes, powers of two (4K, 1M accepted;\n"
             "default 0:1M collectives, 0:4M point-to-point; 0 is kept;\n"
             "MAX >= 1; MIN: keeps the default maximum)"},
    {.name = "iterations",
     .letter = 'i',
     .kind = OPT_LONG,
     .off = OFF(b.iters),
     .arg = "N",
     .min = 1,
     .max = 100000000,
     .shown = "-i/--iterations",
     .help = "timed iterations for sizes <= 8 KiB (default 1000\n"
             "collectives, 10000 latency, 100 bandwidth); larger sizes\n"
             "use OMB's smaller share (1/10, bandwidth 1/5)"},
    {.name = "warmup",
     .letter = 'x',
     .kind = OPT_LONG,
     .off = OFF(b.warmup),
     .arg = "N",
     .min = 0,
     .max = 100000000,
     .shown = "-x/--warmup",
     .help = "warm-up iterations, same rule (default 100, bandwidth 10)"},
    {.name = "full",
     .letter = 'f',
     .kind = OPT_FLAG,
     .off = OFF(b.full),
     .help = "add Min/Max (of per-rank averages) and Iterations"},
    {.name = "validation",
     .letter = 'c',
     .kind = OPT_FLAG,
     .off = OFF(b.validate),
     .help = "check every result exactly; add a Validation column"},
    {.name = "type",
     .letter = 'T',
     .kind = OPT_FUNC,
     .arg = "TYPE",
     .fn = opt_type,
     .shown = "-T/--type",
     .help = "mpi_char (default) mpi_int mpi_float all, or\n"
             "f32 f64 f16 bf16 i8 u8 i32 i64"},
    {.name = "",
     .letter = 'z',
     .kind = OPT_FUNC,
     .arg = "P1,P2,...",
     .fn = opt_pcts,
     .optional = 1,
     .help = "tail-latency percentiles (default 50,90,99)"},
    {.name = "in-place",
     .letter = 'l',
     .kind = OPT_FLAG,
     .off = OFF(b.in_place),
     .help = "use MPI_IN_PLACE / HPML_IN_PLACE"},
    {.name = "root",
     .letter = 'k',
     .kind = OPT_FUNC,
     .arg = "fixed:N|rotate",
     .fn = opt_root,
     .shown = "-k/--root",
     .help = "root of rooted collectives (default fixed:0)"},
    {.name = "window",
     .letter = 'W',
     .kind = OPT_INT,
     .off = OFF(b.window),
     .arg = "N",
     .min = 1,
     .max = 100000,
     .shown = "-W/--window",
     .help = "window of bw/bibw/mbw_mr (default 64)"},
    {.name = "mem-limit",
     .letter = 'M',
     .kind = OPT_FUNC,
     .arg = "B",
     .fn = opt_mem,
     .shown = "-M/--mem-limit",
     .help = "per-rank buffer limit (default 512M)"},
    {.name = "num-test-calls",
     .letter = 't',
     .kind = OPT_INT,
     .off = OFF(b.test_calls),
     .arg = "N",
     .min = 0,
     .max = 1000000,
     .shown = "-t/--num-test-calls",
     .help = "test calls during compute (iallreduce, ibcast)"},
    {.kind = OPT_SECTION, .help = "hpml's additions:"},
    {.name = "impl",
     .kind = OPT_STRING,
     .off = OFF(impl),
     .arg = "LIST",
     .help = "mpi (default), hpml, hpml:<algorithm>, all; comma list"},
    {.name = "csv",
     .kind = OPT_FLAG,
     .off = OFF(csv),
     .help = "CSV instead of text (one row per implementation and size)"},
    {.name = "json",
     .kind = OPT_FLAG,
     .off = OFF(json),
     .help = "JSON instead of text (not with --csv)"},
    {.name = "plot",
     .kind = OPT_STRING,
     .off = OFF(plotfile),
     .arg = "FILE",
     .help = "latency and bandwidth against size through gnuplot\n"
             "(FILE.svg or FILE.png), one line per implementation"},
    {.name = "progress",
     .kind = OPT_FLAG,
     .off = OFF(force_progress),
     .help = "progress line on stderr even when it is not a terminal\n"
             "(under mpirun the ranks' stderr never is one)"},
    {0},
};
#undef OFF

static char bench_usage[1024];

static const opt_cmd_t command = {
    .name = CMD,
    .usage = bench_usage,
    .epilog = "Exit status: 0 ok, 1 a validation failure or error, 2 bad options.\n"
              "See docs/benchmarks.md for how each statistic is computed.\n",
    .max_operands = INT_MAX, /* parse says which word is one too many, and why */
};

/* The usage lines and the benchmarks' names, before the options in --help. */
static void make_usage(void)
{
    const char *const *names = hpml_bench_cases();
    size_t n = (size_t)snprintf(bench_usage, sizeof(bench_usage),
                                "Usage: hpml bench <benchmark> [options]\n"
                                "OSU-micro-benchmark-compatible benchmarks: native MPI and hpml "
                                "side by side.\n\nBenchmarks:");

    for (int i = 0; names[i] != NULL && n < sizeof(bench_usage); i++)
        n += (size_t)snprintf(bench_usage + n, sizeof(bench_usage) - n, " %s", names[i]);
    if (n < sizeof(bench_usage))
        snprintf(bench_usage + n, sizeof(bench_usage) - n,
                 "\n(Options: OMB's meaning and defaults.)\n");
}

/* Checks of the options against each other, the benchmark and the job. */
static int check(const opts_t *o)
{
    if (o->b.max_size == 0 && hpml_bench_default_max_size(o->case_name) != 0 &&
        o->b.min_size > hpml_bench_default_max_size(o->case_name))
        return cli_usage_error(CMD, "-m %zu: above %s's default maximum %zu (give -m MIN:MAX)",
                               o->b.min_size, o->case_name,
                               hpml_bench_default_max_size(o->case_name));
    if (o->plotfile != NULL) {
        const char *ext = strrchr(o->plotfile, '.');

        if (ext == NULL || (strcmp(ext, ".svg") != 0 && strcmp(ext, ".png") != 0))
            return cli_usage_error(CMD, "--plot wants FILE.svg or FILE.png");
        if (strpbrk(o->plotfile, "'\"\n") != NULL)
            return cli_usage_error(CMD, "--plot file name may not contain quotes");
        if (strcmp(o->case_name, "barrier") == 0)
            return cli_usage_error(CMD, "--plot: barrier has no sizes to plot");
    }
    if (cli_size() < 2)
        return cli_usage_error(CMD, "%s needs at least 2 ranks (mpirun -np 2 hpml bench ...)",
                               o->case_name);
    if ((strcmp(o->case_name, "mbw_mr") == 0 || strcmp(o->case_name, "multi_lat") == 0) &&
        cli_size() % 2 != 0)
        return cli_usage_error(CMD, "%s needs an even number of ranks", o->case_name);
    {
        int mx = o->b.root_rotate ? 0 : o->b.root, ok;

        ok = mx < cli_size();
        if (!ok)
            return cli_usage_error(CMD, "-k fixed:%d: root out of range (0..%d)", o->b.root,
                                   cli_size() - 1);
    }
    return 0;
}

/* Parse and check the command line: 0 to run, -1 after --help, or CLI_EXIT_USAGE. */
static int parse(int argc, char **argv, opts_t *o)
{
    const opt_set_t set = {options, o};
    int rc, operand;

    memset(o, 0, sizeof(*o));
    hpml_bench_opts_init(&o->b);
    o->dtypes[0] = o->b.dtype;
    o->labels[0] = "MPI_CHAR";
    o->ndt = 1;
    o->impl = "mpi";
    make_usage();
    /* -z's value is optional, so (as in OMB) only ever attached: "-z50,90". */
    if ((rc = opts_parse(&command, &set, 1, argc, argv, &operand)) != 0)
        return rc;
    if (o->csv && o->json)
        return cli_usage_error(CMD, "--csv and --json cannot be combined");
    if (operand >= argc)
        return cli_usage_error(CMD, "missing benchmark name");
    o->case_name = argv[operand];
    /* "-z 50 allreduce": -z took no value and 50 became the benchmark's name. */
    if (!hpml_bench_case_exists(o->case_name))
        return operand_error(o->case_name, "unknown benchmark");
    if (operand + 1 < argc)
        return operand_error(argv[operand + 1], "unexpected argument");
    o->b.case_name = o->case_name;
    if (hpml_bench_parse_impls(o->case_name, o->impl, &o->b, o->note, sizeof(o->note)) != 0)
        return cli_usage_error(CMD, "%s", hpml_last_error());
    return check(o);
}

/* Rank 0 prints result r (of the d-th of ndt types) as text, CSV or JSON. */
static void print_result(const hpml_bench_result_t *r, int fmt, int d, int ndt)
{
    if (fmt == 1) {
        hpml_bench_print_csv(stdout, r, d == 0);
    } else if (fmt == 2) {
        /* -T all: one valid JSON document, an array of the three results. */
        if (ndt > 1)
            printf(d == 0 ? "[\n" : ",\n");
        hpml_bench_print_json(stdout, r);
        if (ndt > 1 && d == ndt - 1)
            printf("]\n");
    } else {
        if (d > 0)
            printf("\n");
        hpml_bench_print_text(stdout, r);
    }
    /* Every failing size is reported, not just the first. */
    for (int i = 0; i < r->nimpls; i++)
        for (size_t z = 0; z < r->nsizes; z++) {
            const hpml_bench_row_t *w = &r->rows[(size_t)i * r->nsizes + z];

            if (w->valid == 0)
                fprintf(stderr, "hpml bench: %s %s %s size %zu: validation failed: %s\n",
                        r->case_name, r->dtype_label, r->impls[i].name, w->size, w->note);
        }
}

/* Can rank 0 write the plot? Checked before the run so that an unwritable path fails at
 * once (every rank learns it). 0 or CLI_EXIT_FAIL. */
static int plot_writable(const char *plotfile)
{
    int ok = cli_rank() != 0 || hpml_io_writable(plotfile) == 0;

    if (!ok)
        fprintf(stderr, "hpml bench: --plot %s\n", hpml_last_error());
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return ok ? 0 : CLI_EXIT_FAIL;
}

int cmd_bench(int argc, char **argv)
{
    opts_t o;
    hpml_bench_result_t *res[3] = {NULL, NULL, NULL};
    char ptmp[4200] = "";
    int fmt, status = CLI_EXIT_OK, rank = cli_rank(), rc;

    if ((rc = parse(argc, argv, &o)) != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    fmt = o.csv ? 1 : o.json ? 2 : 0;
    if (o.plotfile != NULL && plot_writable(o.plotfile) != 0)
        return CLI_EXIT_FAIL;
    /* The progress line only when a person watches stderr, never into logs or pipes.
     * Neither Open MPI's nor MPICH's launcher gives the ranks a terminal on stderr (Open
     * MPI gives stdout a pty even when it is redirected, so that is no hint either):
     * --progress asks for the line explicitly. */
    if (rank == 0 && (isatty(STDERR_FILENO) || o.force_progress)) {
        o.b.progress = progress;
        o.b.progress_arg = (void *)o.case_name;
    }
    for (int d = 0; d < o.ndt; d++) {
        o.b.dtype = o.dtypes[d];
        o.b.dtype_label = o.labels[d];
        rc = hpml_bench_run(MPI_COMM_WORLD, &o.b, &res[d]);
        if (o.b.progress) {
            fprintf(stderr, "\r\033[K");
            fflush(stderr);
        }
        if (rc != 0) {
            /* Often the same error on every rank (hpml_comm_create refusing settings the
             * ranks disagree on): one line and exit 1, not an abort. -T all --json: keep
             * stdout one valid document, the types done so far. */
            if (rank == 0 && fmt == 2 && o.ndt > 1 && d > 0)
                printf("]\n");
            status = cli_fail_agreed(CMD, rc);
            goto out;
        }
        if (o.note[0] && res[d]->note[0] == '\0')
            snprintf(res[d]->note, sizeof(res[d]->note), "%s", o.note);
        if (rank == 0)
            print_result(res[d], fmt, d, o.ndt);
    }
    for (int d = 0; d < o.ndt; d++)
        if (hpml_bench_failures(res[d]) > 0)
            status = CLI_EXIT_FAIL;
    if (rank == 0 && o.plotfile != NULL &&
        (plot_tmp(o.plotfile, ptmp, sizeof(ptmp)) != 0 ||
         plot(o.plotfile, ptmp, res, o.ndt) != 0)) {
        if (ptmp[0] != '\0')
            unlink(ptmp);
        status = CLI_EXIT_FAIL;
    }
out:
    for (int d = 0; d < o.ndt; d++)
        hpml_bench_result_free(res[d]);
    return status;
}
