/*
 * `hpml prof merge`: read the last complete snapshot of every rank file that
 * libhpml-prof.so left in a folder, sum over the ranks, and write the text and JSON
 * reports. A snapshot counts only with its closing "e <seq>" line, so a rank killed in
 * the middle of a write contributes its previous snapshot. Format: docs/prof.md.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpml/core.h"
#include "hpml/prof.h"

#include "prof/report_internal.h"

static int name_index(char **names, int *n, const char *s)
{
    for (int i = 0; i < *n; i++)
        if (strcmp(names[i], s) == 0)
            return i;
    if (*n == MAX_NAMES || (names[*n] = strdup(s)) == NULL)
        return -1;
    return (*n)++;
}

static int group_index(hpml_prof_report_t *r, const int *w, int n)
{
    group_t *g;

    for (int i = 0; i < r->ngroups; i++)
        if (r->groups[i].size == n &&
            (n == 0 || memcmp(r->groups[i].world, w, (size_t)n * sizeof(int)) == 0))
            return i;
    if ((g = realloc(r->groups, (size_t)(r->ngroups + 1) * sizeof(*g))) == NULL)
        return -1;
    r->groups = g;
    g += r->ngroups;
    g->size = n;
    g->world = malloc((size_t)(n ? n : 1) * sizeof(int));
    if (g->world == NULL)
        return -1;
    memcpy(g->world, w, (size_t)n * sizeof(int));
    return r->ngroups++;
}

static hist_t *hist_for(hpml_prof_report_t *r, int call, int group)
{
    hist_t *h;

    for (int i = 0; i < r->nhists; i++)
        if (r->hists[i].call == call && r->hists[i].group == group)
            return &r->hists[i];
    if ((h = realloc(r->hists, (size_t)(r->nhists + 1) * sizeof(*h))) == NULL)
        return NULL;
    r->hists = h;
    h += r->nhists++;
    memset(h, 0, sizeof(*h));
    h->call = call;
    h->group = group;
    return h;
}

static file_t *file_for(hpml_prof_report_t *r, const char *path)
{
    file_t *f;

    for (int i = 0; i < r->nfiles; i++)
        if (strcmp(r->files[i].path, path) == 0)
            return &r->files[i];
    if ((f = realloc(r->files, (size_t)(r->nfiles + 1) * sizeof(*f))) == NULL)
        return NULL;
    r->files = f;
    f += r->nfiles;
    memset(f, 0, sizeof(*f));
    if ((f->path = strdup(path)) == NULL)
        return NULL;
    r->nfiles++;
    return f;
}

static int file_index(const hpml_prof_report_t *r, const char *path)
{
    for (int i = 0; i < r->nfiles; i++)
        if (strcmp(r->files[i].path, path) == 0)
            return i;
    return -1;
}

static void stat_merge(stat_t *a, const stat_t *b)
{
    if (b->count == 0)
        return;
    if (a->count == 0 || b->min_ns < a->min_ns)
        a->min_ns = b->min_ns;
    if (b->max_ns > a->max_ns)
        a->max_ns = b->max_ns;
    a->count += b->count;
    a->total_ns += b->total_ns;
    a->bytes += b->bytes;
}

static int parse_stat(const char *s, stat_t *st)
{
    return sscanf(s, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64, &st->count,
                  &st->total_ns, &st->min_ns, &st->max_ns, &st->bytes) == 5
               ? 0
               : -1;
}

/* "b:c b:c ..." into bins. */
static int parse_bins(const char *s, uint64_t *bins)
{
    int b, n;
    uint64_t c;

    while (sscanf(s, " %d:%" SCNu64 "%n", &b, &c, &n) == 2) {
        if (b < 0 || b >= HB)
            return -1;
        bins[b] += c;
        s += n;
    }
    return 0;
}

/* %XX back to characters. */
static void unescape(char *s)
{
    char *d = s;

    for (; *s; s++) {
        unsigned v;

        if (*s == '%' && sscanf(s + 1, "%2x", &v) == 1) {
            *d++ = (char)v;
            s += 2;
        } else {
            *d++ = *s;
        }
    }
    *d = '\0';
}

/* The text of a file (NUL-terminated), or NULL. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL, *nb;
    size_t cap = 0, n = 0, got;

    if (f == NULL)
        return NULL;
    do {
        if (cap - n < 65536) {
            cap = cap ? cap * 2 : 1 << 17;
            if ((nb = realloc(buf, cap + 1)) == NULL) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* The start of the last complete snapshot ("s N ..." .. "e N") in text, or NULL. */
static char *last_snapshot(char *text, size_t len, unsigned long *seq)
{
    char *p = text + len;

    while (p > text) {
        char *line = p - 1;
        unsigned long n;

        while (line > text && line[-1] != '\n')
            line--;
        if (line[0] == 'e' && line[1] == ' ' && sscanf(line + 2, "%lu", &n) == 1 &&
            (line + 2 + strspn(line + 2, "0123456789"))[0] == '\n') {
            char want[32], *s;

            snprintf(want, sizeof(want), "\ns %lu ", n);
            /* The matching start: the last "s N " before this line. */
            for (s = line - 1; s >= text; s--)
                if (*s == '\n' && strncmp(s, want, strlen(want)) == 0) {
                    *seq = n;
                    *line = '\0';
                    return s + 1;
                }
        }
        p = line;
    }
    return NULL;
}

typedef struct {
    char run[64];
    int rank, size;
    long pid;
    char host[64];
    unsigned long long start;
} header_t;

static int read_header(const char *text, header_t *h)
{
    if (strncmp(text, "hpml-prof 1\nr ", 14) != 0)
        return -1;
    return sscanf(text + 12, "r %63s %d %d %ld %63s %llu", h->run, &h->rank, &h->size, &h->pid,
                  h->host, &h->start) == 6 &&
                   h->rank >= 0 && h->size > 0 && h->rank < h->size
               ? 0
               : -1;
}

/* "k CALL DEPTH {OBJ BASE OFF SYM}... STATS": summed into r's sites. */
static int parse_site(hpml_prof_report_t *r, const char *line)
{
    char name[64], obj[2][4096] = {"", ""}, sym[2][1024] = {"", ""};
    unsigned long base[2] = {0, 0}, off[2] = {0, 0};
    site_t *st, *ns;
    stat_t stat;
    int k, depth, n, call;

    if (sscanf(line, "k %63s %d%n", name, &depth, &n) != 2 || depth < 1 || depth > 2 ||
        (call = name_index(r->names, &r->nnames, name)) < 0)
        return -1;
    line += n;
    for (k = 0; k < depth; k++) {
        if (sscanf(line, " %4095s %lx %lx %1023s%n", obj[k], &base[k], &off[k], sym[k], &n) != 4)
            return -1;
        unescape(obj[k]);
        unescape(sym[k]);
        line += n;
    }
    if (parse_stat(line, &stat) != 0)
        return -1;
    for (int i = 0; i < r->nsites; i++) {
        st = &r->sites[i];
        if (st->call != call || st->depth != depth)
            continue;
        for (k = 0; k < depth; k++)
            if (st->off[k] != off[k] || strcmp(st->obj[k], obj[k]) != 0)
                break;
        if (k == depth) {
            stat_merge(&st->st, &stat);
            return 0;
        }
    }
    if ((ns = realloc(r->sites, (size_t)(r->nsites + 1) * sizeof(*ns))) == NULL)
        return -1;
    r->sites = ns;
    st = &ns[r->nsites++];
    memset(st, 0, sizeof(*st));
    st->call = call;
    st->depth = depth;
    st->st = stat;
    for (k = 0; k < depth; k++) {
        st->base[k] = base[k];
        st->off[k] = off[k];
        if ((st->obj[k] = strdup(obj[k])) == NULL || (st->sym[k] = strdup(sym[k])) == NULL)
            return -1;
    }
    return 0;
}

/* "a NAME STATS CALLS NS BYTES MSGS P2PBYTES": summed into r's hpml collectives. */
static int parse_hcoll(hpml_prof_report_t *r, const char *line)
{
    char name[256];
    hcoll_t h = {0}, *nh;
    int n;

    if (sscanf(line, "a %255s%n", name, &n) != 1 || parse_stat(line + n, &h.st) != 0 ||
        sscanf(line + n,
               "%*u %*u %*u %*u %*u %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64,
               &h.mpi_calls, &h.mpi_ns, &h.mpi_bytes, &h.p2p_msgs, &h.p2p_bytes) != 5)
        return -1;
    unescape(name);
    for (int i = 0; i < r->nhcolls; i++)
        if (strcmp(r->hcolls[i].name, name) == 0) {
            hcoll_t *a = &r->hcolls[i];

            stat_merge(&a->st, &h.st);
            a->mpi_calls += h.mpi_calls;
            a->mpi_ns += h.mpi_ns;
            a->mpi_bytes += h.mpi_bytes;
            a->p2p_msgs += h.p2p_msgs;
            a->p2p_bytes += h.p2p_bytes;
            return 0;
        }
    if ((nh = realloc(r->hcolls, (size_t)(r->nhcolls + 1) * sizeof(*nh))) == NULL)
        return -1;
    r->hcolls = nh;
    if ((h.name = strdup(name)) == NULL)
        return -1;
    nh[r->nhcolls++] = h;
    return 0;
}

/* Is the ELF file at path a fixed-address executable (ET_EXEC), whose addresses are
 * absolute, unlike a shared object's or a PIE's? */
static int elf_exec(const char *path)
{
    unsigned char h[18];
    FILE *f = fopen(path, "rb");
    int exec = 0;

    if (f != NULL) {
        exec = fread(h, 1, sizeof(h), f) == sizeof(h) && memcmp(h, "\177ELF", 4) == 0 &&
               h[16] == 2 && h[17] == 0;
        fclose(f);
    }
    return exec;
}

/* The frame's name from addr2line's two lines, else the profiler's dladdr symbol, else
 * object+offset. */
static char *frame_name(const site_t *s, int k, FILE *p)
{
    char fn[1024], loc[2048], buf[3200];
    int ok = p != NULL && fgets(fn, sizeof(fn), p) != NULL && fgets(loc, sizeof(loc), p) != NULL;

    if (ok) {
        fn[strcspn(fn, "\n")] = '\0';
        loc[strcspn(loc, "\n")] = '\0';
        ok = strcmp(fn, "??") != 0;
    }
    if (ok && strncmp(loc, "??", 2) != 0)
        snprintf(buf, sizeof(buf), "%s (%s)", fn, loc);
    else if (ok)
        snprintf(buf, sizeof(buf), "%s", fn);
    else if (strcmp(s->sym[k], "?") != 0)
        snprintf(buf, sizeof(buf), "%s (%s)", s->sym[k], s->obj[k]);
    else
        snprintf(buf, sizeof(buf), "%s+0x%" PRIx64, s->obj[k], s->off[k]);
    return strdup(buf);
}

/* Name every call site's frames "function (file:line)" with addr2line (binutils), one
 * run per object and 64 frames; without it, or where it knows nothing, frame_name's
 * fallbacks. */
static void symbolize(hpml_prof_report_t *r)
{
    for (int i = 0; i < r->nsites; i++)
        for (int k = 0; k < r->sites[i].depth; k++) {
            const char *obj = r->sites[i].obj[k];
            char cmd[8192];
            size_t used;
            int exec, nq = 0, qi[64], qk[64];
            FILE *p = NULL;

            if (r->sites[i].where[k] != NULL)
                continue;
            exec = elf_exec(obj);
            used = (size_t)snprintf(cmd, sizeof(cmd), "addr2line -C -f -e '%s'", obj);
            for (int j = i; j < r->nsites && nq < 64; j++)
                for (int kk = 0; kk < r->sites[j].depth && nq < 64; kk++) {
                    const site_t *s = &r->sites[j];
                    uint64_t a = (exec ? s->base[kk] : 0) + s->off[kk] - 1; /* the call */

                    if (s->where[kk] != NULL || strcmp(s->obj[kk], obj) != 0 ||
                        used + 40 >= sizeof(cmd))
                        continue;
                    used += (size_t)snprintf(cmd + used, sizeof(cmd) - used, " 0x%" PRIx64, a);
                    qi[nq] = j;
                    qk[nq++] = kk;
                }
            if (strchr(obj, '\'') == NULL && obj[0] == '/' && used + 16 < sizeof(cmd)) {
                strcat(cmd, " 2>/dev/null");
                p = popen(cmd, "r");
            }
            for (int q = 0; q < nq; q++) {
                site_t *s = &r->sites[qi[q]];

                if ((s->where[qk[q]] = frame_name(s, qk[q], p)) == NULL)
                    s->where[qk[q]] = s->sym[qk[q]]; /* out of memory: a name still */
            }
            if (p != NULL)
                pclose(p);
        }
}

/* Parse one snapshot (lines from s) of world rank `rank` into r. */
/* A "g G SIZE W..." line: the group's world ranks, its index in the report into lid[G]. */
static int parse_group(hpml_prof_report_t *r, const char *line, int lid[65])
{
    int g, size, n, w[4096], *wp = w, *heap = NULL;
    char *q;

    if (sscanf(line, "g %d %d %n", &g, &size, &n) != 2 || g < 0 || g > 64 || size < 0 ||
        size > r->ranks)
        return -1;
    if (size > 4096 && (wp = heap = malloc((size_t)size * sizeof(int))) == NULL)
        return -1;
    q = (char *)line + n;
    for (int i = 0; i < size; i++) {
        char *end;
        long v = strtol(q, &end, 10);

        if (end == q || v < 0 || v >= r->ranks) {
            free(heap);
            return -1;
        }
        wp[i] = (int)v;
        q = end;
    }
    lid[g] = group_index(r, wp, size);
    free(heap);
    return lid[g] < 0 ? -1 : 0;
}

static int parse_snapshot(hpml_prof_report_t *r, rank_t *rk, char *s)
{
    int lid[64 + 1];      /* the file's group numbers -> the report's */
    int fmap[PROF_FILES]; /* the file's file numbers -> r->files (which may move) */
    int rc = 0;

    for (int i = 0; i <= 64; i++)
        lid[i] = -1;
    for (int i = 0; i < PROF_FILES; i++)
        fmap[i] = -1;
    for (char *line = s, *next; line != NULL && *line; line = next) {
        char name[64];
        int k, n;

        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        switch (line[0]) {
        case 's':
            if (sscanf(line, "s %lu %31s %lf", &rk->seq, rk->state, &rk->elapsed) != 3)
                rc = -1;
            rk->elapsed *= 1e-9;
            break;
        case 'c': {
            stat_t st;

            if (sscanf(line, "c %63s %n", name, &n) != 1 || parse_stat(line + n, &st) != 0 ||
                (k = name_index(r->names, &r->nnames, name)) < 0)
                return -1;
            stat_merge(&rk->call[k], &st);
            break;
        }
        case 'g':
            if (parse_group(r, line, lid) != 0)
                return -1;
            break;
        case 'h': {
            int g;
            hist_t *h;

            if (sscanf(line, "h %63s %d %n", name, &g, &n) != 2 || g < 0 || g > 64 || lid[g] < 0 ||
                (k = name_index(r->names, &r->nnames, name)) < 0 ||
                (h = hist_for(r, k, lid[g])) == NULL || parse_bins(line + n, h->bins) != 0)
                return -1;
            break;
        }
        case 'm': {
            int to;
            uint64_t m, b;

            if (sscanf(line, "m %d %" SCNu64 " %" SCNu64, &to, &m, &b) != 3 || to < 0 ||
                to >= r->ranks)
                return -1;
            rk->msgs[to] += m;
            rk->bytes[to] += b;
            break;
        }
        case 'f': {
            int fi;
            char path[4096];

            if (sscanf(line, "f %d %4095s", &fi, path) != 2 || fi < 0 || fi > 256)
                return -1;
            unescape(path);
            if (file_for(r, path) == NULL)
                return -1;
            fmap[fi] = file_index(r, path);
            break;
        }
        case 'i': {
            int fi;
            stat_t st;

            if (sscanf(line, "i %d %63s %n", &fi, name, &n) != 2 || fi < 0 || fi > 256 ||
                fmap[fi] < 0 || parse_stat(line + n, &st) != 0 ||
                (k = name_index(r->ionames, &r->nionames, name)) < 0)
                return -1;
            stat_merge(&r->files[fmap[fi]].op[k], &st);
            break;
        }
        case 'j': {
            int fi;

            if (sscanf(line, "j %d%n", &fi, &n) != 1 || fi < 0 || fi > 256 || fmap[fi] < 0 ||
                parse_bins(line + n, r->files[fmap[fi]].bins) != 0)
                return -1;
            break;
        }
        case 'k':
            if (parse_site(r, line) != 0)
                return -1;
            break;
        case 'a':
            if (parse_hcoll(r, line) != 0)
                return -1;
            break;
        case 'n': {
            int ri;
            char region[1024];

            if (sscanf(line, "n %d %1023s", &ri, region) != 2 || ri < 0 || ri >= PROF_REGIONS)
                return -1;
            unescape(region);
            free(rk->region[ri]);
            if ((rk->region[ri] = strdup(region)) == NULL)
                return -1;
            break;
        }
        case 'x':
            if (sscanf(line, "x %" SCNu64 " %" SCNu64, &rk->trace_dropped, &rk->trace_cap) != 2)
                return -1;
            break;
        case 'p': {
            uint64_t calls, ns, start, flush, clk;

            if (sscanf(line, "p %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64, &calls,
                       &ns, &start, &flush, &clk) != 5)
                return -1;
            rk->has_self = 1;
            rk->self_calls = calls;
            rk->self_calls_s = ns * 1e-9;
            rk->self_start_s = start * 1e-9;
            rk->self_flush_s = flush * 1e-9;
            rk->self_clock_s = clk * 1e-9;
            break;
        }
        case '\0': break;
        default: return -1;
        }
    }
    for (int g = 0; g < PROF_GROUPS; g++)
        rk->gmap[g] = lid[g];
    for (int f = 0; f < PROF_FILES; f++)
        rk->fpath[f] = fmap[f] >= 0 ? r->files[fmap[f]].path : NULL;
    return rc;
}

void hpml_prof_report_free(hpml_prof_report_t *r)
{
    if (r == NULL)
        return;
    for (int i = 0; r->rank != NULL && i < r->ranks; i++) {
        free(r->rank[i].msgs);
        free(r->rank[i].bytes);
        for (int k = 0; k < PROF_REGIONS; k++)
            free(r->rank[i].region[k]);
    }
    free(r->rank);
    for (int i = 0; i < r->nnames; i++)
        free(r->names[i]);
    for (int i = 0; i < r->nionames; i++)
        free(r->ionames[i]);
    for (int i = 0; i < r->ngroups; i++)
        free(r->groups[i].world);
    free(r->groups);
    free(r->hists);
    for (int i = 0; i < r->nfiles; i++)
        free(r->files[i].path);
    free(r->files);
    for (int i = 0; i < r->nsites; i++)
        for (int k = 0; k < r->sites[i].depth; k++) {
            if (r->sites[i].where[k] != r->sites[i].sym[k])
                free(r->sites[i].where[k]);
            free(r->sites[i].obj[k]);
            free(r->sites[i].sym[k]);
        }
    free(r->sites);
    for (int i = 0; i < r->nhcolls; i++)
        free(r->hcolls[i].name);
    free(r->hcolls);
    free(r);
}

/* The rank files' names in dir (rank-N.prof), in *names[0..*n). */
static int list_files(const char *dir, char ***names, int *n)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int cap = 0;

    *names = NULL;
    *n = 0;
    if (d == NULL)
        return hpml_set_error(HPML_ERR_IO, "%s: %s", dir, strerror(errno));
    while ((e = readdir(d)) != NULL) {
        int rank, len = 0;
        char **nn;

        if (sscanf(e->d_name, "rank-%d.prof%n", &rank, &len) != 1 || e->d_name[len] != '\0')
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            if ((nn = realloc(*names, (size_t)cap * sizeof(char *))) == NULL)
                goto nomem;
            *names = nn;
        }
        if (((*names)[*n] = strdup(e->d_name)) == NULL)
            goto nomem;
        (*n)++;
    }
    closedir(d);
    if (*n == 0)
        return hpml_set_error(HPML_ERR_IO, "%s: no profiler files (rank-N.prof) in it", dir);
    return 0;
nomem:
    closedir(d);
    return hpml_set_error(HPML_ERR_NOMEM, "out of memory");
}

static int load_rank(hpml_prof_report_t *r, const char *path, char *text, size_t len,
                     const header_t *h)
{
    rank_t *rk = &r->rank[h->rank];
    char *snap;

    if (rk->present)
        return hpml_set_error(HPML_ERR_FORMAT, "%s: rank %d appears twice", path, h->rank);
    rk->present = 1;
    rk->pid = h->pid;
    snprintf(rk->host, sizeof(rk->host), "%s", h->host);
    snprintf(rk->state, sizeof(rk->state), "started");
    rk->msgs = calloc((size_t)r->ranks, sizeof(uint64_t));
    rk->bytes = calloc((size_t)r->ranks, sizeof(uint64_t));
    if (rk->msgs == NULL || rk->bytes == NULL)
        return hpml_set_error(HPML_ERR_NOMEM, "out of memory");
    if ((snap = last_snapshot(text, len, &rk->seq)) == NULL)
        return 0; /* the header only: killed before its first snapshot */
    rk->has_snap = 1;
    if (parse_snapshot(r, rk, snap) != 0)
        return hpml_set_error(HPML_ERR_FORMAT, "%s: malformed snapshot %lu", path, rk->seq);
    return 0;
}

static void explain(hpml_prof_report_t *r)
{
    size_t used = 0;

    r->why[0] = '\0';
    for (int i = 0; i < r->ranks && used < sizeof(r->why) - 64; i++) {
        rank_t *rk = &r->rank[i];
        int n = 0, sig;

        if (!rk->present)
            n = snprintf(r->why + used, sizeof(r->why) - used, "%srank %d: no file",
                         used ? "; " : "", i);
        else if (!rk->has_snap)
            n = snprintf(r->why + used, sizeof(r->why) - used, "%srank %d: no snapshot",
                         used ? "; " : "", i);
        else if (sscanf(rk->state, "signal:%d", &sig) == 1)
            n = snprintf(r->why + used, sizeof(r->why) - used, "%srank %d: signal %d after %.1f s",
                         used ? "; " : "", i, sig, rk->elapsed);
        else if (strcmp(rk->state, "final") != 0)
            n = snprintf(r->why + used, sizeof(r->why) - used, "%srank %d: %s after %.1f s%s",
                         used ? "; " : "", i,
                         strcmp(rk->state, "run") == 0     ? "last periodic snapshot"
                         : strcmp(rk->state, "exit") == 0  ? "exit without MPI_Finalize"
                         : strcmp(rk->state, "abort") == 0 ? "MPI_Abort"
                         : strcmp(rk->state, "killed") == 0
                             ? "killed (counts to its last call, from its mapping)"
                             : rk->state,
                         rk->elapsed, strcmp(rk->state, "run") == 0 ? " (stopped early)" : "");
        if (n > 0)
            used += (size_t)n < sizeof(r->why) - used ? (size_t)n : sizeof(r->why) - used - 1;
    }
}

int hpml_prof_load(const char *dir, hpml_prof_report_t **out)
{
    hpml_prof_report_t *r = NULL;
    char **names = NULL, path[4096];
    header_t *hs = NULL, best = {0};
    int n = 0, rc, have = 0;

    *out = NULL;
    if ((rc = list_files(dir, &names, &n)) != 0)
        goto out;
    /* The newest run's id, from every file's header. */
    if ((hs = calloc((size_t)n, sizeof(*hs))) == NULL) {
        rc = hpml_set_error(HPML_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        FILE *f;
        char head[512] = "";
        size_t got;

        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        if ((f = fopen(path, "rb")) == NULL) {
            rc = hpml_set_error(HPML_ERR_IO, "%s: %s", path, strerror(errno));
            goto out;
        }
        got = fread(head, 1, sizeof(head) - 1, f);
        fclose(f);
        head[got] = '\0';
        if (read_header(head, &hs[i]) != 0) {
            rc = hpml_set_error(HPML_ERR_FORMAT, "%s: not a file of libhpml-prof.so", path);
            goto out;
        }
        if (!have || hs[i].start > best.start) {
            best = hs[i];
            have = 1;
        }
    }
    if ((r = calloc(1, sizeof(*r))) == NULL ||
        (r->rank = calloc((size_t)best.size, sizeof(*r->rank))) == NULL) {
        rc = hpml_set_error(HPML_ERR_NOMEM, "out of memory");
        goto out;
    }
    snprintf(r->run, sizeof(r->run), "%s", best.run);
    r->ranks = best.size;
    for (int i = 0; i < n; i++) {
        char *text;
        size_t len;

        if (strcmp(hs[i].run, best.run) != 0 || hs[i].size != best.size) {
            r->stale++;
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        if ((text = slurp(path, &len)) == NULL) {
            rc = hpml_set_error(HPML_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
            goto out;
        }
        rc = load_rank(r, path, text, len, &hs[i]);
        free(text);
        if (rc != 0)
            goto out;
    }
    explain(r);
    symbolize(r);
    *out = r;
    r = NULL;
    rc = 0;
out:
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(hs);
    hpml_prof_report_free(r);
    return rc;
}

int hpml_prof_ranks(const hpml_prof_report_t *r)
{
    return r->ranks;
}

int hpml_prof_complete(const hpml_prof_report_t *r)
{
    return r->why[0] == '\0';
}

const char *hpml_prof_incomplete_why(const hpml_prof_report_t *r)
{
    return r->why;
}

/* ---- sums and orders ------------------------------------------------------------------ */

static stat_t call_total(const hpml_prof_report_t *r, int k)
{
    stat_t s = {0};

    for (int i = 0; i < r->ranks; i++)
        stat_merge(&s, &r->rank[i].call[k]);
    return s;
}

/* Call indices by total time, largest first. */
static void calls_by_time(const hpml_prof_report_t *r, int *order)
{
    uint64_t t[MAX_NAMES];

    for (int k = 0; k < r->nnames; k++) {
        order[k] = k;
        t[k] = call_total(r, k).total_ns;
    }
    for (int i = 1; i < r->nnames; i++)
        for (int j = i; j > 0 && t[order[j]] > t[order[j - 1]]; j--) {
            int x = order[j];

            order[j] = order[j - 1];
            order[j - 1] = x;
        }
}

/* The profiler's own time on a rank (HPML_PROF_SELF=1), seconds. */
static double self_s(const rank_t *rk)
{
    return rk->self_calls_s + rk->self_start_s + rk->self_flush_s;
}

static double rank_mpi_s(const hpml_prof_report_t *r, int i)
{
    uint64_t t = 0;

    for (int k = 0; k < r->nnames; k++)
        t += r->rank[i].call[k].total_ns;
    return t * 1e-9;
}

static void group_label(const hpml_prof_report_t *r, int g, char *buf, size_t len)
{
    const group_t *gr = &r->groups[g];
    size_t used;
    int n;

    if (gr->size == 0) {
        snprintf(buf, len, "other communicators");
        return;
    }
    if (gr->size == r->ranks) {
        int ident = 1;

        for (int i = 0; i < gr->size; i++)
            ident &= gr->world[i] == i;
        if (ident) {
            snprintf(buf, len, "world");
            return;
        }
    }
    n = snprintf(buf, len, "%d ranks {", gr->size);
    used = n > 0 ? (size_t)n : 0;
    for (int i = 0; i < gr->size && used + 16 < len; i++) {
        n = snprintf(buf + used, len - used, "%s%d", i ? "," : "", gr->world[i]);
        used += n > 0 ? (size_t)n : 0;
        if (i == 7 && gr->size > 9) {
            n = snprintf(buf + used, len - used, ",...");
            used += n > 0 ? (size_t)n : 0;
            break;
        }
    }
    snprintf(buf + used, len - used, "}");
}

static void bin_range(int b, char *buf, size_t len)
{
    if (b == 0)
        snprintf(buf, len, "0");
    else if (b == 1)
        snprintf(buf, len, "1");
    else
        snprintf(buf, len, "%" PRIu64 "-%" PRIu64, (uint64_t)1 << (b - 1), ((uint64_t)1 << b) - 1);
}

/* ---- text ------------------------------------------------------------------------------ */

/* The `top` call sites by total time (0: all). */
static void write_sites(const hpml_prof_report_t *r, FILE *f, int top)
{
    int *so, ns;

    if (r->nsites == 0 || (so = malloc((size_t)r->nsites * sizeof(int))) == NULL)
        return;
    for (int i = 0; i < r->nsites; i++)
        so[i] = i;
    for (int i = 1; i < r->nsites; i++)
        for (int j = i; j > 0 && r->sites[so[j]].st.total_ns > r->sites[so[j - 1]].st.total_ns;
             j--) {
            int x = so[j];

            so[j] = so[j - 1];
            so[j - 1] = x;
        }
    ns = top > 0 && top < r->nsites ? top : r->nsites;
    fprintf(f, "\n## Call sites by total time (all ranks; the caller <- its caller)\n");
    fprintf(f, "%-22s %10s %12s %16s  %s\n", "call", "count", "total_s", "bytes", "site");
    for (int j = 0; j < ns; j++) {
        const site_t *s = &r->sites[so[j]];

        fprintf(f, "%-22s %10" PRIu64 " %12.6f %16" PRIu64 "  %s%s%s\n", r->names[s->call],
                s->st.count, s->st.total_ns * 1e-9, s->st.bytes, s->where[0],
                s->depth > 1 ? " <- " : "", s->depth > 1 ? s->where[1] : "");
    }
    free(so);
}

/* The text report's point-to-point matrix (world ranks; only up to 32 of them). */
static void write_text_matrix(const hpml_prof_report_t *r, FILE *f)
{
    fprintf(f, "\n## Point-to-point matrix: bytes / messages sent (row: sender, column: "
               "receiver; world ranks)\n");
    if (r->ranks > 32) {
        fprintf(f, "(%d ranks: see the JSON report or the heat map)\n", r->ranks);
    } else {
        fprintf(f, "%6s", "");
        for (int c = 0; c < r->ranks; c++)
            fprintf(f, " %21d", c);
        fprintf(f, "\n");
        for (int i = 0; i < r->ranks; i++) {
            fprintf(f, "%6d", i);
            for (int c = 0; c < r->ranks; c++) {
                char cell[48];

                if (r->rank[i].msgs == NULL || r->rank[i].msgs[c] == 0)
                    snprintf(cell, sizeof(cell), "-");
                else
                    snprintf(cell, sizeof(cell), "%" PRIu64 "/%" PRIu64, r->rank[i].bytes[c],
                             r->rank[i].msgs[c]);
                fprintf(f, " %21s", cell);
            }
            fprintf(f, "\n");
        }
    }
}

void hpml_prof_write_text(const hpml_prof_report_t *r, FILE *f, int top)
{
    int order[MAX_NAMES], shown, present = 0, any_self = 0;
    double wall_max = 0, mpi_all = 0;

    for (int i = 0; i < r->ranks; i++) {
        present += r->rank[i].present;
        if (r->rank[i].elapsed > wall_max)
            wall_max = r->rank[i].elapsed;
        mpi_all += rank_mpi_s(r, i);
    }
    fprintf(f, "# hpml prof report: run %s, %d ranks (%d files)\n", r->run, r->ranks, present);
    if (hpml_prof_complete(r))
        fprintf(f, "# complete: every rank reached MPI_Finalize\n");
    else
        fprintf(f, "# INCOMPLETE: %s\n", r->why);
    if (r->stale)
        fprintf(f, "# ignored %d file(s) of an earlier run in the same folder\n", r->stale);

    for (int i = 0; i < r->ranks; i++)
        any_self |= r->rank[i].has_self;
    fprintf(f, "\n## Time per rank (seconds)\n%-6s %-10s %10s %10s %7s", "rank", "state", "wall",
            "mpi", "mpi%");
    if (any_self)
        fprintf(f, " %10s %7s", "prof", "prof%");
    fprintf(f, "  %s\n", "host");
    for (int i = 0; i < r->ranks; i++) {
        const rank_t *rk = &r->rank[i];
        double m = rank_mpi_s(r, i), p = self_s(rk);

        if (!rk->present) {
            fprintf(f, "%-6d %-10s\n", i, "no-file");
            continue;
        }
        fprintf(f, "%-6d %-10s %10.3f %10.3f %6.1f%%", i, rk->has_snap ? rk->state : "none",
                rk->elapsed, m, rk->elapsed > 0 ? 100 * m / rk->elapsed : 0.0);
        if (any_self && rk->has_self)
            fprintf(f, " %10.6f %6.3f%%", p, rk->elapsed > 0 ? 100 * p / rk->elapsed : 0.0);
        else if (any_self)
            fprintf(f, " %10s %7s", "-", "-");
        fprintf(f, "  %s\n", rk->host);
    }
    if (any_self)
        fprintf(f, "# prof: the profiler's own time (HPML_PROF_SELF=1): its bookkeeping in the "
                   "wrappers, its start and its snapshots\n");

    calls_by_time(r, order);
    shown = top > 0 && top < r->nnames ? top : r->nnames;
    fprintf(f, "\n## MPI calls by total time (all ranks)\n");
    fprintf(f, "%-26s %12s %12s %6s %11s %11s %11s %16s\n", "call", "count", "total_s", "mpi%",
            "min_us", "avg_us", "max_us", "bytes");
    for (int j = 0; j < shown; j++) {
        stat_t s = call_total(r, order[j]);

        if (s.count == 0)
            continue;
        fprintf(f, "%-26s %12" PRIu64 " %12.6f %5.1f%% %11.3f %11.3f %11.3f %16" PRIu64 "\n",
                r->names[order[j]], s.count, s.total_ns * 1e-9,
                mpi_all > 0 ? 100 * s.total_ns * 1e-9 / mpi_all : 0.0, s.min_ns * 1e-3,
                s.total_ns * 1e-3 / (double)s.count, s.max_ns * 1e-3, s.bytes);
    }

    fprintf(f, "\n## Imbalance: time per rank in each call (seconds)\n");
    fprintf(f, "%-26s %11s %6s %11s %11s %6s %9s\n", "call", "min", "rank", "mean", "max", "rank",
            "max/mean");
    for (int j = 0; j < shown; j++) {
        int k = order[j], rmin = -1, rmax = -1, n = 0;
        double mn = 0, mx = 0, sum = 0;

        for (int i = 0; i < r->ranks; i++) {
            double t;

            if (!r->rank[i].present)
                continue;
            t = r->rank[i].call[k].total_ns * 1e-9;
            if (rmin < 0 || t < mn)
                mn = t, rmin = i;
            if (rmax < 0 || t > mx)
                mx = t, rmax = i;
            sum += t;
            n++;
        }
        if (n == 0 || sum == 0)
            continue;
        fprintf(f, "%-26s %11.6f %6d %11.6f %11.6f %6d %9.2f\n", r->names[k], mn, rmin, sum / n, mx,
                rmax, mx / (sum / n));
    }

    if (r->nhcolls > 0) {
        fprintf(f, "\n## hpml collectives (all ranks): the algorithm chosen and the MPI calls "
                   "made inside\n");
        fprintf(f, "%-34s %10s %12s %16s %10s %12s %12s %16s\n", "collective algorithm", "count",
                "total_s", "bytes", "mpi_calls", "mpi_s", "p2p_msgs", "p2p_bytes");
        for (int i = 0; i < r->nhcolls; i++) {
            const hcoll_t *h = &r->hcolls[i];

            fprintf(f,
                    "%-34s %10" PRIu64 " %12.6f %16" PRIu64 " %10" PRIu64 " %12.6f %12" PRIu64
                    " %16" PRIu64 "\n",
                    h->name, h->st.count, h->st.total_ns * 1e-9, h->st.bytes, h->mpi_calls,
                    h->mpi_ns * 1e-9, h->p2p_msgs, h->p2p_bytes);
        }
    }
    write_sites(r, f, top);

    write_text_matrix(r, f);

    fprintf(f, "\n## Message sizes (bytes, log2 bins): calls per call and communicator\n");
    for (int j = 0; j < r->nnames; j++)
        for (int h = 0; h < r->nhists; h++) {
            char label[160];

            if (r->hists[h].call != order[j])
                continue;
            group_label(r, r->hists[h].group, label, sizeof(label));
            fprintf(f, "%s on %s:", r->names[order[j]], label);
            for (int b = 0; b < HB; b++)
                if (r->hists[h].bins[b]) {
                    char range[64];

                    bin_range(b, range, sizeof(range));
                    fprintf(f, " [%s]=%" PRIu64, range, r->hists[h].bins[b]);
                }
            fprintf(f, "\n");
        }

    if (r->nfiles > 0) {
        fprintf(f, "\n## I/O per file (all ranks)\n%-10s %12s %12s %16s  %s\n", "call", "count",
                "time_s", "bytes", "file");
        for (int i = 0; i < r->nfiles; i++)
            for (int k = 0; k < r->nionames; k++) {
                const stat_t *s = &r->files[i].op[k];

                if (s->count)
                    fprintf(f, "%-10s %12" PRIu64 " %12.6f %16" PRIu64 "  %s\n", r->ionames[k],
                            s->count, s->total_ns * 1e-9, s->bytes, r->files[i].path);
            }
    }
}

/* ---- JSON ------------------------------------------------------------------------------ */

static void json_stat(FILE *f, const stat_t *s)
{
    fprintf(f,
            "\"count\": %" PRIu64 ", \"total_s\": %.9f, \"min_s\": %.9f, \"max_s\": %.9f, "
            "\"bytes\": %" PRIu64,
            s->count, s->total_ns * 1e-9, s->min_ns * 1e-9, s->max_ns * 1e-9, s->bytes);
}

static void json_bins(FILE *f, const uint64_t *bins)
{
    int first = 1;

    fprintf(f, "[");
    for (int b = 0; b < HB; b++) {
        if (!bins[b])
            continue;
        fprintf(f,
                "%s{\"bin\": %d, \"lo\": %" PRIu64 ", \"hi\": %" PRIu64 ", \"count\": %" PRIu64 "}",
                first ? "" : ", ", b, b ? (uint64_t)1 << (b - 1) : 0,
                b ? ((uint64_t)1 << b) - 1 : 0, bins[b]);
        first = 0;
    }
    fprintf(f, "]");
}

static void json_u64_row(FILE *f, const uint64_t *v, int n)
{
    fprintf(f, "[");
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%" PRIu64, i ? ", " : "", v ? v[i] : 0);
    fprintf(f, "]");
}

void hpml_prof_write_json(const hpml_prof_report_t *r, FILE *f)
{
    int order[MAX_NAMES];

    fprintf(f, "{\n  \"format\": \"hpml-prof-report\",\n  \"version\": 1,\n  \"run\": ");
    hpml_json_string(f, r->run);
    fprintf(f, ",\n  \"ranks\": %d,\n  \"complete\": %s,\n  \"incomplete\": ", r->ranks,
            hpml_prof_complete(r) ? "true" : "false");
    hpml_json_string(f, r->why);
    fprintf(f, ",\n  \"stale_files\": %d,\n  \"rank_info\": [", r->stale);
    for (int i = 0; i < r->ranks; i++) {
        const rank_t *rk = &r->rank[i];

        fprintf(f, "%s\n    {\"rank\": %d, \"file\": %s, \"state\": ", i ? "," : "", i,
                rk->present ? "true" : "false");
        hpml_json_string(f, rk->has_snap ? rk->state : rk->present ? "started" : "missing");
        fprintf(f,
                ", \"snapshot\": %lu, \"wall_s\": %.9f, \"mpi_s\": %.9f, \"pid\": %ld, \"host\": ",
                rk->seq, rk->elapsed, rank_mpi_s(r, i), rk->pid);
        hpml_json_string(f, rk->host);
        fprintf(f, ", \"profiler_self\": ");
        if (rk->has_self)
            fprintf(f,
                    "{\"s\": %.9f, \"calls\": %" PRIu64 ", \"calls_s\": %.9f, \"start_s\": %.9f, "
                    "\"snapshots_s\": %.9f, \"clock_read_s\": %.9f}",
                    self_s(rk), rk->self_calls, rk->self_calls_s, rk->self_start_s,
                    rk->self_flush_s, rk->self_clock_s);
        else
            fprintf(f, "null");
        fprintf(f, "}");
    }
    fprintf(f, "\n  ],\n  \"calls\": [");
    calls_by_time(r, order);
    for (int j = 0; j < r->nnames; j++) {
        int k = order[j];
        stat_t s = call_total(r, k);

        fprintf(f, "%s\n    {\"name\": ", j ? "," : "");
        hpml_json_string(f, r->names[k]);
        fprintf(f, ", ");
        json_stat(f, &s);
        fprintf(f, ",\n     \"per_rank\": {\"count\": [");
        for (int i = 0; i < r->ranks; i++)
            fprintf(f, "%s%" PRIu64, i ? ", " : "", r->rank[i].call[k].count);
        fprintf(f, "], \"total_s\": [");
        for (int i = 0; i < r->ranks; i++)
            fprintf(f, "%s%.9f", i ? ", " : "", r->rank[i].call[k].total_ns * 1e-9);
        fprintf(f, "], \"bytes\": [");
        for (int i = 0; i < r->ranks; i++)
            fprintf(f, "%s%" PRIu64, i ? ", " : "", r->rank[i].call[k].bytes);
        fprintf(f, "]}}");
    }
    fprintf(f, "\n  ],\n  \"hpml_collectives\": [");
    for (int i = 0; i < r->nhcolls; i++) {
        const hcoll_t *h = &r->hcolls[i];
        const char *sp = strchr(h->name, ' ');

        fprintf(f, "%s\n    {\"call\": ", i ? "," : "");
        fprintf(f, "\"%.*s\", \"algorithm\": ", sp ? (int)(sp - h->name) : (int)strlen(h->name),
                h->name); /* hpml_<collective>: no character JSON escapes */
        hpml_json_string(f, sp ? sp + 1 : "");
        fprintf(f, ", ");
        json_stat(f, &h->st);
        fprintf(f,
                ", \"mpi_calls\": %" PRIu64 ", \"mpi_s\": %.9f, \"mpi_bytes\": %" PRIu64
                ", \"p2p_messages\": %" PRIu64 ", \"p2p_bytes\": %" PRIu64 "}",
                h->mpi_calls, h->mpi_ns * 1e-9, h->mpi_bytes, h->p2p_msgs, h->p2p_bytes);
    }
    fprintf(f, "\n  ],\n  \"callsites\": [");
    for (int i = 0; i < r->nsites; i++) {
        const site_t *s = &r->sites[i];

        fprintf(f, "%s\n    {\"call\": ", i ? "," : "");
        hpml_json_string(f, r->names[s->call]);
        fprintf(f, ", ");
        json_stat(f, &s->st);
        fprintf(f, ", \"frames\": [");
        for (int k = 0; k < s->depth; k++) {
            fprintf(f, "%s{\"where\": ", k ? ", " : "");
            hpml_json_string(f, s->where[k]);
            fprintf(f, ", \"object\": ");
            hpml_json_string(f, s->obj[k]);
            fprintf(f, ", \"offset\": %" PRIu64 "}", s->off[k]);
        }
        fprintf(f, "]}");
    }

    fprintf(f, "\n  ],\n  \"histograms\": [");
    for (int h = 0; h < r->nhists; h++) {
        const group_t *g = &r->groups[r->hists[h].group];
        char label[160];

        group_label(r, r->hists[h].group, label, sizeof(label));
        fprintf(f, "%s\n    {\"call\": ", h ? "," : "");
        hpml_json_string(f, r->names[r->hists[h].call]);
        fprintf(f, ", \"comm\": ");
        hpml_json_string(f, label);
        fprintf(f, ", \"world_ranks\": [");
        for (int i = 0; i < g->size; i++)
            fprintf(f, "%s%d", i ? ", " : "", g->world[i]);
        fprintf(f, "],\n     \"bins\": ");
        json_bins(f, r->hists[h].bins);
        fprintf(f, "}");
    }
    fprintf(f, "\n  ],\n  \"matrix\": {\n    \"messages\": [");
    for (int i = 0; i < r->ranks; i++) {
        fprintf(f, "%s\n      ", i ? "," : "");
        json_u64_row(f, r->rank[i].msgs, r->ranks);
    }
    fprintf(f, "\n    ],\n    \"bytes\": [");
    for (int i = 0; i < r->ranks; i++) {
        fprintf(f, "%s\n      ", i ? "," : "");
        json_u64_row(f, r->rank[i].bytes, r->ranks);
    }
    fprintf(f, "\n    ]\n  },\n  \"io\": [");
    for (int i = 0; i < r->nfiles; i++) {
        int first = 1;

        fprintf(f, "%s\n    {\"path\": ", i ? "," : "");
        hpml_json_string(f, r->files[i].path);
        fprintf(f, ", \"calls\": [");
        for (int k = 0; k < r->nionames; k++) {
            if (!r->files[i].op[k].count)
                continue;
            fprintf(f, "%s{\"name\": ", first ? "" : ", ");
            hpml_json_string(f, r->ionames[k]);
            fprintf(f, ", ");
            json_stat(f, &r->files[i].op[k]);
            fprintf(f, "}");
            first = 0;
        }
        fprintf(f, "],\n     \"sizes\": ");
        json_bins(f, r->files[i].bins);
        fprintf(f, "}");
    }
    fprintf(f, "\n  ]\n}\n");
}

/* ---- gnuplot data ------------------------------------------------------------------------ */

void hpml_prof_write_matrix_dat(const hpml_prof_report_t *r, FILE *f)
{
    fprintf(f, "# sender receiver bytes messages\n");
    for (int i = 0; i < r->ranks; i++) {
        for (int c = 0; c < r->ranks; c++)
            fprintf(f, "%d %d %" PRIu64 " %" PRIu64 "\n", i, c,
                    r->rank[i].bytes ? r->rank[i].bytes[c] : 0,
                    r->rank[i].msgs ? r->rank[i].msgs[c] : 0);
        fprintf(f, "\n");
    }
}

void hpml_prof_write_ranks_dat(const hpml_prof_report_t *r, FILE *f, int ncalls)
{
    int order[MAX_NAMES];

    calls_by_time(r, order);
    if (ncalls > r->nnames)
        ncalls = r->nnames;
    fprintf(f, "rank not_in_MPI");
    for (int j = 0; j < ncalls; j++)
        fprintf(f, " %s", r->names[order[j]]);
    fprintf(f, " other_MPI\n");
    for (int i = 0; i < r->ranks; i++) {
        double m = rank_mpi_s(r, i), shown = 0, other = r->rank[i].elapsed - m;

        fprintf(f, "%d %.9f", i, other > 0 ? other : 0.0);
        for (int j = 0; j < ncalls; j++) {
            double t = r->rank[i].call[order[j]].total_ns * 1e-9;

            shown += t;
            fprintf(f, " %.9f", t);
        }
        fprintf(f, " %.9f\n", m - shown > 0 ? m - shown : 0.0);
    }
}
