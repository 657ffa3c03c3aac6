/*
 * `hpml prof`: run a program under libhpml-prof.so and report, or report on a folder a
 * run left (`hpml prof merge DIR`). Runs as one process, not under mpirun: it starts the
 * launcher itself, with the environment it was started with plus the profiler's settings,
 * and the library preloaded into the ranks (launch_argv; docs/prof.md).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "opts.h"
#include "hpml/io.h"
#include "hpml/prof.h"

typedef struct {
    const char *dir, *lib, *window, *steps;
    double period, trace_max;
    int top, quiet, trace, plot;
} opts_t;

#define OFF(field) offsetof(opts_t, field)
static const opt_t run_options[] = {
    {.name = "output",
     .letter = 'o',
     .kind = OPT_STRING,
     .off = OFF(dir),
     .arg = "DIR",
     .help = "folder for the ranks' files and the reports (default hpml-prof)"},
    {.name = "period",
     .kind = OPT_DOUBLE,
     .off = OFF(period),
     .arg = "SEC",
     .help = "seconds between the ranks' periodic snapshots (default 5; 0: only at the end)",
     .dmin = 0,
     .dmax = 86400},
    {.name = "trace",
     .kind = OPT_FLAG,
     .off = OFF(trace),
     .help = "also record every call as an event: DIR/trace.json.gz (Chrome/Perfetto)"},
    {.name = "trace-max",
     .kind = OPT_DOUBLE,
     .off = OFF(trace_max),
     .arg = "N",
     .help = "events in the whole trace at most (default 1000000; each rank its share)",
     .dmin = 1,
     .dmax = 1e12},
    {.name = "trace-window",
     .kind = OPT_STRING,
     .off = OFF(window),
     .arg = "S:E",
     .help = "trace only from S to E seconds after MPI_Init (E may be empty)"},
    {.name = "trace-steps",
     .kind = OPT_STRING,
     .off = OFF(steps),
     .arg = "A:B",
     .help = "trace only steps A to B-1 (a step ends at each MPI_Pcontrol(102))"},
    {.name = "lib",
     .kind = OPT_STRING,
     .off = OFF(lib),
     .arg = "FILE",
     .help = "the profiler library (default: libhpml-prof-<mpi>.so or libhpml-prof.so in ../lib "
             "next to hpml)"},
    {.name = "top",
     .kind = OPT_INT,
     .off = OFF(top),
     .arg = "N",
     .help = "calls shown in the text report's tables (default 20; 0: all)",
     .min = 0,
     .max = 1000},
    {.name = "plot",
     .kind = OPT_FLAG,
     .off = OFF(plot),
     .help = "also draw DIR/matrix.svg (heat map) and DIR/ranks.svg\n"
             "(time per rank) with gnuplot"},
    {.name = "quiet",
     .letter = 'q',
     .kind = OPT_FLAG,
     .off = OFF(quiet),
     .help = "write the reports into DIR without printing the text report"},
    {0},
};
/* merge takes the report options only. */
static const opt_t *const merge_options = run_options + 7;
#undef OFF

static const opt_cmd_t run_command = {
    .name = "prof",
    .usage = "Usage: hpml prof [options] -- LAUNCHER ... PROGRAM [ARGS]\n"
             "       hpml prof merge [options] DIR\n\n"
             "Profile any MPI program without recompiling it: run the launcher command with\n"
             "libhpml-prof.so preloaded (PMPI and POSIX/stdio I/O interposition), then merge the\n"
             "ranks' files in DIR into DIR/report.txt and DIR/report.json (with --trace also\n"
             "DIR/trace.json.gz) and print the text report (docs/prof.md). Run hpml prof\n"
             "itself as one process (not under mpirun). `merge` builds the reports from\n"
             "whatever a run left in DIR, marked incomplete when a rank stopped early.\n",
    .epilog = "Example: hpml prof -o prof-out -- mpirun -np 4 hpml bench allreduce\n"
              "Exit status: the program's (128+N after signal N); 1 when no report could be "
              "made.\n",
    .max_operands = INT_MAX, /* refused below with a message that says where they go */
};

static const opt_cmd_t merge_command = {
    .name = "prof merge",
    .usage = "Usage: hpml prof merge [options] DIR\n\n"
             "Build DIR/report.txt and DIR/report.json (and DIR/trace.json.gz from a traced\n"
             "run) from the rank files libhpml-prof.so left in DIR and print the text report.\n"
             "A rank killed by SIGKILL left its counters in DIR/rank-N.live: the snapshot it\n"
             "could not write is first appended to its rank-N.prof from that mapping.\n",
    .epilog = "Exit status: 0 with a complete report, 3 with an incomplete one (a rank\n"
              "stopped early or left no file), 1 when no report could be made.\n",
    .max_operands = 1,
};

/* Write one report into dir/name through a temporary file and a rename. */
static int write_report(const hpml_prof_report_t *r, const char *dir, const char *name, int json,
                        int top)
{
    char path[PATH_MAX];
    hpml_io_file_t *w;
    FILE *f;
    int rc;

    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
        return hpml_set_error(HPML_ERR_INVAL, "%s: path too long", dir);
    if ((rc = hpml_io_file_open(path, &w, &f)) != 0)
        return rc;
    if (json)
        hpml_prof_write_json(r, f);
    else
        hpml_prof_write_text(r, f, top);
    return hpml_io_file_commit(w);
}

/* dir/trace.json.gz when the run was traced: 0 (or 1: not traced), or an hpml error. */
static int write_trace(const hpml_prof_report_t *r, const char *dir)
{
    char path[PATH_MAX];
    unsigned long long n;
    int rc;

    if (snprintf(path, sizeof(path), "%s/trace.json.gz", dir) >= (int)sizeof(path))
        return hpml_set_error(HPML_ERR_INVAL, "%s: path too long", dir);
    if ((rc = hpml_prof_write_trace(r, dir, path, &n)) == 0)
        fprintf(stderr, "hpml prof: wrote %s (%llu events)\n", path, n);
    return rc;
}

/* Has gnuplot finished the SVG at path (its closing tag)? gnuplot exits 0 even when a
 * write fails, so this tells a whole picture from a cut one. */
static int svg_complete(const char *path)
{
    char tail[32] = "";
    FILE *f = fopen(path, "rb");
    int ok = 0;

    if (f != NULL) {
        if (fseek(f, -(long)sizeof(tail) + 1, SEEK_END) == 0) {
            size_t n = fread(tail, 1, sizeof(tail) - 1, f);

            tail[n] = '\0';
            ok = strstr(tail, "</svg>") != NULL;
        }
        fclose(f);
    }
    return ok;
}

/* One picture: gnuplot draws `script` (which plots $data) with data inline into a
 * temporary next to dir/name, renamed into place when whole. 0, or -1 after a message. */
static int plot_one(const char *dir, const char *name, const char *data, const char *script)
{
    char path[PATH_MAX], tmp[PATH_MAX + 64];
    FILE *g;
    int fd, rc;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if ((fd = hpml_io_temp_next_to(path, 0, tmp, sizeof(tmp))) < 0) {
        fprintf(stderr, "hpml prof: %s\n", hpml_last_error());
        return -1;
    }
    /* mkstemp made it 0600: a picture is readable as any file this process writes. */
    {
        mode_t mask = umask(0);

        umask(mask);
        fchmod(fd, 0666 & ~mask);
    }
    close(fd);
    /* gnuplot writes the picture to its stdout when it cannot open the output. */
    if ((g = popen("gnuplot >/dev/null", "w")) == NULL) {
        fprintf(stderr, "hpml prof: cannot run gnuplot\n");
        unlink(tmp);
        return -1;
    }
    fprintf(g,
            "set terminal svg size 900,600 dynamic noenhanced\nset output '%s'\n$data << "
            "EOD\n%sEOD\n%s",
            tmp, data, script);
    rc = pclose(g);
    if (rc != 0 || !svg_complete(tmp) || rename(tmp, path) != 0) {
        fprintf(stderr, "hpml prof: gnuplot could not draw %s (status %d)\n", path, rc);
        unlink(tmp);
        return -1;
    }
    fprintf(stderr, "hpml prof: wrote %s\n", path);
    return 0;
}

/* The pictures: the matrix as a heat map (bytes, sender by receiver) and each rank's
 * time split into time outside MPI and the top calls. 0, or -1 after a message. */
static int plot(const hpml_prof_report_t *r, const char *dir)
{
    char *data = NULL, script[1024];
    size_t len = 0;
    FILE *m;
    int rc = 0, ncalls = 6, ncols = 0, empty = 1;
    int tics = hpml_prof_ranks(r) > 16 ? hpml_prof_ranks(r) / 16 : 1;

    if ((m = open_memstream(&data, &len)) == NULL)
        return -1;
    hpml_prof_write_matrix_dat(r, m);
    fclose(m);
    /* No point-to-point bytes at all: a colour range gnuplot can draw. */
    for (const char *l = strchr(data, '\n'); l != NULL && empty; l = strchr(l + 1, '\n')) {
        unsigned long long bytes = 0;

        if (sscanf(l + 1, "%*d %*d %llu", &bytes) == 1 && bytes > 0)
            empty = 0;
    }
    snprintf(script, sizeof(script), "%s", empty ? "set cbrange [0:1]\n" : "");
    snprintf(script + strlen(script), sizeof(script) - strlen(script),
             "set title 'Point-to-point bytes sent (world ranks)'\n"
             "set xlabel 'receiver'\nset ylabel 'sender'\nset cblabel 'bytes'\n"
             "set xrange [-0.5:%d.5]\nset yrange [%d.5:-0.5]\nset palette rgb 21,22,23\n"
             "set xtics %d\nset ytics %d\nplot $data using 2:1:3 with image notitle\n",
             hpml_prof_ranks(r) - 1, hpml_prof_ranks(r) - 1, tics, tics);
    rc |= plot_one(dir, "matrix.svg", data, script);
    free(data);
    data = NULL;
    if ((m = open_memstream(&data, &len)) == NULL)
        return -1;
    hpml_prof_write_ranks_dat(r, m, ncalls);
    fclose(m);
    /* The columns: the words of the first line (fewer calls than ncalls, fewer columns). */
    for (const char *c = data; *c && *c != '\n'; c++)
        ncols += (c == data || c[-1] == ' ') && *c != ' ';
    snprintf(script, sizeof(script),
             "set title 'Time per rank (seconds)'\nset xlabel 'rank'\nset ylabel 'seconds'\n"
             "set style data histograms\nset style histogram rowstacked\n"
             "set style fill solid border -1\nset key outside right autotitle columnheader\n"
             "plot for [i=2:%d] $data using i:xtic(1)\n",
             ncols);
    rc |= plot_one(dir, "ranks.svg", data, script);
    free(data);
    return rc;
}

static int default_lib(char *out, size_t len);

/* Recover rank's snapshot from dir/rank-<rank>.live with lib, in a child process (a
 * mapping that is not what it should be must not take the report down): 0 recovered, 1
 * nothing to do, 2 not recoverable (said why), 3 the child failed. */
static int recover_one(const char *lib, const char *dir, int rank)
{
    int status = 0;
    pid_t pid;

    fflush(NULL);
    if ((pid = fork()) < 0)
        return 3;
    if (pid == 0) {
        int (*recover)(const char *, int, char *, size_t) = NULL;
        char err[PATH_MAX + 128];
        void *h;
        int rc;

        signal(SIGSEGV, SIG_DFL); /* no crash report of the MPI library's: the parent says it */
        signal(SIGBUS, SIG_DFL);
        if ((h = dlopen(lib, RTLD_LAZY | RTLD_LOCAL)) == NULL) {
            fprintf(stderr, "hpml prof: cannot open %s: %s\n", lib, dlerror());
            _exit(3);
        }
        *(void **)&recover = dlsym(h, "hpml_prof_recover");
        if (recover == NULL) {
            fprintf(stderr, "hpml prof: %s has no hpml_prof_recover\n", lib);
            _exit(3);
        }
        if ((rc = recover(dir, rank, err, sizeof(err))) < 0)
            fprintf(stderr, "hpml prof: rank %d: %s\n", rank, err);
        fflush(stderr);
        _exit(rc < 0 ? 2 : rc);
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFSIGNALED(status))
        fprintf(stderr, "hpml prof: rank %d: recovering rank-%d.live failed (signal %d)\n", rank,
                rank, WTERMSIG(status));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 3;
}

/* A rank killed by SIGKILL left its counters in dir/rank-<r>.live (docs/prof.md, "How
 * data survives the end of a job"): libhpml-prof.so (run_lib, the one the run preloaded,
 * or the default one) appends the snapshot the rank could not write. A rank that still
 * runs holds its file and is left alone. */
static void recover_live(const char *dir, int quiet, const char *run_lib)
{
    char lib[PATH_MAX] = "";
    DIR *d;
    struct dirent *e;

    if (run_lib != NULL)
        snprintf(lib, sizeof(lib), "%s", run_lib);
    if ((d = opendir(dir)) == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        int rank, len = 0;

        if (sscanf(e->d_name, "rank-%d.live%n", &rank, &len) != 1 || e->d_name[len] != '\0')
            continue;
        if (lib[0] == '\0' && (default_lib(lib, sizeof(lib)) != 0 || access(lib, R_OK) != 0)) {
            fprintf(stderr,
                    "hpml prof: %s/%s left by a killed rank: no libhpml-prof.so to read it\n", dir,
                    e->d_name);
            break;
        }
        if (recover_one(lib, dir, rank) == 0 && !quiet)
            fprintf(stderr,
                    "hpml prof: rank %d was killed: its counts up to its last call come from %s\n",
                    rank, e->d_name);
    }
    closedir(d);
}

/* Load dir (after recovering killed ranks with lib, NULL for the default one), write both
 * reports, print the text one. 0 complete, 3 incomplete, 1 error. */
static int report(const char *dir, int top, int quiet, int pictures, const char *lib)
{
    hpml_prof_report_t *r = NULL;
    int rc;

    recover_live(dir, quiet, lib);
    if ((rc = hpml_prof_load(dir, &r)) != 0 || (rc = write_report(r, dir, "report.json", 1, 0)) ||
        (rc = write_report(r, dir, "report.txt", 0, top)) || (rc = write_trace(r, dir)) < 0) {
        fprintf(stderr, "hpml prof: %s\n",
                hpml_last_error()[0] ? hpml_last_error() : hpml_strerror(rc));
        hpml_prof_report_free(r);
        return CLI_EXIT_FAIL;
    }
    if (pictures && plot(r, dir) != 0) {
        hpml_prof_report_free(r);
        return CLI_EXIT_FAIL;
    }
    if (!quiet) {
        hpml_prof_write_text(r, stdout, top);
        fflush(stdout);
    }
    rc = hpml_prof_complete(r) ? 0 : 3;
    if (rc)
        fprintf(stderr, "hpml prof: report incomplete: %s\n", hpml_prof_incomplete_why(r));
    fprintf(stderr, "hpml prof: wrote %s/report.txt and %s/report.json\n", dir, dir);
    hpml_prof_report_free(r);
    return rc;
}

/* The environment this process started with: MPI_Init (a singleton's) has added
 * variables of its own, which must not reach the launcher. NULL-terminated, in *buf. */
static char **start_env(char **buf, size_t *buflen, size_t extra)
{
    FILE *f = fopen("/proc/self/environ", "rb");
    size_t len = 0, n = 0, cap = 0;
    char **env = NULL, *b = NULL;
    int c;

    *buf = NULL;
    *buflen = 0;
    if (f == NULL)
        return NULL;
    while ((c = fgetc(f)) != EOF) {
        if (len + 2 > cap) {
            char *nb = realloc(b, cap = cap ? 2 * cap : 4096);

            if (nb == NULL)
                goto fail;
            b = nb;
        }
        b[len++] = (char)c;
    }
    fclose(f);
    f = NULL;
    if (b == NULL)
        return calloc(extra + 1, sizeof(char *));
    b[len] = '\0';
    for (size_t i = 0; i < len; i++)
        n += b[i] == '\0';
    if ((env = calloc(n + extra + 1, sizeof(char *))) == NULL)
        goto fail;
    n = 0;
    for (size_t i = 0; i < len; i += strlen(b + i) + 1)
        env[n++] = b + i;
    *buf = b;
    *buflen = len;
    return env;
fail:
    if (f != NULL)
        fclose(f);
    free(b);
    return NULL;
}

/* Set (replace) NAME=value in env (room for it was reserved). */
static int env_set(char **env, const char *name, const char *value)
{
    size_t nl = strlen(name), i;
    char *s = malloc(nl + strlen(value) + 2);

    if (s == NULL)
        return -1;
    sprintf(s, "%s=%s", name, value);
    for (i = 0; env[i] != NULL; i++)
        if (strncmp(env[i], name, nl) == 0 && env[i][nl] == '=')
            break;
    env[i] = s; /* replaces, or appends before the NULL that follows */
    return 0;
}

static const char *env_get(char **env, const char *name)
{
    size_t nl = strlen(name);

    for (size_t i = 0; env[i] != NULL; i++)
        if (strncmp(env[i], name, nl) == 0 && env[i][nl] == '=')
            return env[i] + nl + 1;
    return NULL;
}

/* The default library, in ../lib from this executable's folder: libhpml-prof-<mpi>.so, the
 * name `make install` gives it (both MPIs' profilers install side by side), or else
 * libhpml-prof.so, its name in the build tree. */
static int default_lib(char *out, size_t len)
{
    char exe[PATH_MAX], *slash;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

    if (n <= 0)
        return -1;
    exe[n] = '\0';
    if ((slash = strrchr(exe, '/')) == NULL)
        return -1;
    *slash = '\0';
    if (snprintf(out, len, "%s/../lib/libhpml-prof-%s.so", exe, HPML_BUILD_MPI) < (int)len &&
        access(out, R_OK) == 0)
        return 0;
    return snprintf(out, len, "%s/../lib/libhpml-prof.so", exe) < (int)len ? 0 : -1;
}

/* "A:B" with numbers A >= 0 and B > A, or B empty; usage error otherwise. */
static int check_range(const char *opt, const char *s)
{
    char *end;
    double a = strtod(s, &end), b;

    if (end == s || *end != ':' || !(a >= 0))
        return cli_usage_error("prof", "%s must be START:END (got '%s')", opt, s);
    if (end[1] == '\0')
        return 0;
    b = strtod(end + 1, &end);
    if (*end != '\0' || !(b > a))
        return cli_usage_error("prof", "%s must be START:END with END > START (got '%s')", opt, s);
    return 0;
}

static volatile pid_t child_pid;

static void forward(int sig)
{
    if (child_pid > 0)
        kill(child_pid, sig);
}

/* Run argv with env; its exit status (128+N after signal N), or -1 if it did not start. */
static int run_child(char **argv, char **env)
{
    struct sigaction sa = {0}, old_int, old_term;
    int status = 0;
    pid_t pid;

    fflush(NULL);
    if ((pid = fork()) < 0) {
        fprintf(stderr, "hpml prof: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        execvpe(argv[0], argv, env);
        fprintf(stderr, "hpml prof: cannot run '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    /* Ctrl-C reaches the launcher from the terminal; this process stays to report. A
     * SIGTERM sent to it alone is passed on. */
    child_pid = pid;
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old_term);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGINT, &sa, &old_int);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGINT, &old_int, NULL);
    child_pid = 0;
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

/* The launcher prog names, resolved through PATH and symbolic links: 'h' for MPICH's
 * Hydra (mpiexec.hydra, which mpirun.mpich links to), 'o' for Open MPI's (orterun,
 * prterun), 0 for anything else. */
static int launcher_kind(const char *prog)
{
    char path[PATH_MAX], real[PATH_MAX];
    const char *base, *p = getenv("PATH");

    if (strchr(prog, '/') != NULL) {
        snprintf(path, sizeof(path), "%s", prog);
    } else {
        path[0] = '\0';
        while (p != NULL && *p) {
            size_t n = strcspn(p, ":");

            snprintf(path, sizeof(path), "%.*s/%s", (int)n, p, prog);
            if (n > 0 && access(path, X_OK) == 0)
                break;
            path[0] = '\0';
            p += n + (p[n] == ':');
        }
    }
    if (path[0] == '\0' || realpath(path, real) == NULL)
        return 0;
    base = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
    if (strcmp(base, "mpiexec.hydra") == 0)
        return 'h';
    if (strcmp(base, "orterun") == 0 || strcmp(base, "prterun") == 0)
        return 'o';
    return 0;
}

/* The profiler's settings, passed on by name to Open MPI's ranks when set: its launcher
 * gives remote ranks only the variables named with -x. */
static const char *const prof_vars[] = {
    "HPML_PROF_DIR",       "HPML_PROF_PERIOD",       "HPML_PROF_TRACE",
    "HPML_PROF_TRACE_MAX", "HPML_PROF_TRACE_WINDOW", "HPML_PROF_TRACE_STEPS",
    "HPML_PROF_SELF",      "HPML_PROF_CALLSITES",    "HPML_PROF_LIVE"};
#define NPROF_VARS (sizeof(prof_vars) / sizeof(prof_vars[0]))

/* The launcher command to run: cmd itself, or, for a launcher whose option gives the
 * ranks an environment variable (-genv NAME VALUE for Hydra, -x NAME=VALUE for Open
 * MPI), cmd with that option for LD_PRELOAD=pl after its name (*rank_only set); for Open
 * MPI also -x NAME for each profiler setting set in env (Hydra passes the whole
 * environment on). Then the launcher's own processes (Hydra's mpiexec and proxies, Open
 * MPI's mpirun) do not load the library and with it the MPI library's dependencies (UCX,
 * hwloc): about 5 ms per process under MPICH. NULL when out of memory. */
static char **launch_argv(char **cmd, const char *pl, char **env, int *rank_only, char **xopt)
{
    int kind = launcher_kind(cmd[0]), n = 0, k = 0;
    char **v;

    *rank_only = 0;
    *xopt = NULL;
    while (cmd[n] != NULL)
        n++;
    if ((v = calloc((size_t)n + 4 + 2 * NPROF_VARS, sizeof(*v))) == NULL)
        return NULL;
    v[k++] = cmd[0];
    if (kind == 'h') {
        v[k++] = "-genv";
        v[k++] = "LD_PRELOAD";
        v[k++] = (char *)pl;
    } else if (kind == 'o') {
        if ((*xopt = malloc(strlen(pl) + sizeof("LD_PRELOAD="))) == NULL) {
            free(v);
            return NULL;
        }
        sprintf(*xopt, "LD_PRELOAD=%s", pl);
        v[k++] = "-x";
        v[k++] = *xopt;
        for (size_t i = 0; i < NPROF_VARS; i++)
            if (env_get(env, prof_vars[i]) != NULL) {
                v[k++] = "-x";
                v[k++] = (char *)prof_vars[i];
            }
    }
    *rank_only = kind != 0;
    for (int i = 1; i < n; i++)
        v[k++] = cmd[i];
    return v;
}

static int cmd_prof_merge(int argc, char **argv)
{
    opts_t o = {.top = 20};
    const opt_set_t set = {merge_options, &o};
    int operand, rc;

    if ((rc = opts_parse(&merge_command, &set, 1, argc, argv, &operand)) != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (operand >= argc)
        return cli_usage_error("prof merge", "missing the folder to merge (hpml prof merge DIR)");
    return report(argv[operand], o.top, o.quiet, o.plot, NULL);
}

int cmd_prof(int argc, char **argv)
{
    opts_t o = {.dir = "hpml-prof", .period = 5, .top = 20};
    const opt_set_t set = {run_options, &o};
    size_t envlen = 0;
    char given[PATH_MAX], lib[PATH_MAX], dir[PATH_MAX], period[32], *envbuf = NULL, **env = NULL;
    char *pl = NULL, *xopt = NULL, **launch = NULL;
    const char *preload;
    int dd, operand, rc, status, rank_only = 0;
    struct stat st;

    if (argc >= 2 && strcmp(argv[1], "merge") == 0)
        return cmd_prof_merge(argc - 1, argv + 1);
    for (dd = 1; dd < argc && strcmp(argv[dd], "--") != 0; dd++)
        ;
    if ((rc = opts_parse(&run_command, &set, 1, dd, argv, &operand)) != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (dd >= argc - 1 || operand < dd)
        return cli_usage_error("prof", "give the command to profile after '--' "
                                       "(hpml prof [options] -- mpirun -np N PROGRAM)");
    if (cli_size() != 1)
        return cli_usage_error("prof", "run hpml prof as one process, not under mpirun: it "
                                       "starts the launcher given after '--'");
    if (o.lib != NULL)
        snprintf(given, sizeof(given), "%s", o.lib);
    else if (default_lib(given, sizeof(given)) != 0)
        return fprintf(stderr, "hpml prof: cannot find libhpml-prof.so (use --lib)\n"),
               CLI_EXIT_FAIL;
    if (realpath(given, lib) == NULL || access(lib, R_OK) != 0) {
        fprintf(stderr, "hpml prof: %s: %s\n", given, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    if (mkdir(o.dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "hpml prof: cannot create %s: %s\n", o.dir, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    if (stat(o.dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(o.dir, W_OK) != 0 ||
        realpath(o.dir, dir) == NULL) {
        fprintf(stderr, "hpml prof: -o %s: not a writable folder\n", o.dir);
        return CLI_EXIT_FAIL;
    }
    if (o.window != NULL && check_range("--trace-window", o.window) != 0)
        return CLI_EXIT_USAGE;
    if (o.steps != NULL && check_range("--trace-steps", o.steps) != 0)
        return CLI_EXIT_USAGE;
    if ((env = start_env(&envbuf, &envlen, 7)) == NULL) {
        fprintf(stderr, "hpml prof: cannot read this process's environment\n");
        return CLI_EXIT_FAIL;
    }
    snprintf(period, sizeof(period), "%g", o.period);
    preload = env_get(env, "LD_PRELOAD");
    if ((pl = malloc(strlen(lib) + (preload ? strlen(preload) : 0) + 2)) == NULL) {
        status = CLI_EXIT_FAIL;
        goto out;
    }
    sprintf(pl, "%s%s%s", lib, preload && *preload ? ":" : "", preload ? preload : "");
    if (env_set(env, "HPML_PROF_DIR", dir) != 0 || env_set(env, "HPML_PROF_PERIOD", period) != 0) {
        status = CLI_EXIT_FAIL;
        goto out;
    }
    if (o.trace) {
        char max[32];

        snprintf(max, sizeof(max), "%.0f", o.trace_max > 0 ? o.trace_max : 1e6);
        if (env_set(env, "HPML_PROF_TRACE", "1") != 0 || env_set(env, "HPML_PROF_TRACE_MAX", max) ||
            (o.window && env_set(env, "HPML_PROF_TRACE_WINDOW", o.window)) ||
            (o.steps && env_set(env, "HPML_PROF_TRACE_STEPS", o.steps))) {
            status = CLI_EXIT_FAIL;
            goto out;
        }
    } else if (o.trace_max > 0 || o.window != NULL || o.steps != NULL) {
        status = cli_usage_error("prof", "--trace-max, --trace-window and --trace-steps need "
                                         "--trace");
        goto out;
    }
    if ((launch = launch_argv(argv + dd + 1, pl, env, &rank_only, &xopt)) == NULL ||
        (!rank_only && env_set(env, "LD_PRELOAD", pl) != 0)) {
        status = CLI_EXIT_FAIL;
        goto out;
    }
    status = run_child(launch, env);
    if (status < 0) {
        status = CLI_EXIT_FAIL;
        goto out;
    }
    rc = report(o.dir, o.top, o.quiet, o.plot, lib);
    if (rc == CLI_EXIT_FAIL && status == 0)
        status = CLI_EXIT_FAIL;
out:
    free(launch);
    free(xopt);
    free(pl);
    /* The strings env_set made are the ones outside the environment's buffer. */
    for (size_t i = 0; env != NULL && env[i] != NULL; i++)
        if (env[i] < envbuf || env[i] >= envbuf + envlen)
            free(env[i]);
    free(envbuf);
    free(env);
    return status;
}
