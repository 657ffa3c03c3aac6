/*
 * The Chrome trace (Trace Event Format, which Perfetto and chrome://tracing open) of a
 * profiled run: the ranks' rank-<r>.trace files as "X" events, one process per rank
 * (pid = world rank on every event, tid = the rank's thread), regions as "B"/"E" pairs,
 * and a flow ("s" then "f") from each send to the blocking receive that matched it. The
 * ranks' clocks are lined up by the real-time clock each read at MPI_Init.
 *
 * A flow's ends are at the middle of its send's and its receive's slices, so that each
 * binds to its slice (the enclosing slice, for both "s" and "f" with "bp": "e").
 *
 * Matching follows MPI's non-overtaking rule: between two ranks on one communicator group
 * and tag, the k-th send (in the order posted) meets the k-th receive (in the order posted,
 * the source and tag of its status). A receive posted with MPI_Irecv is known by the
 * event its completion left (MPI_Wait*, MPI_Test*: PROF_TRACE_RECV, with when it was
 * posted), and its flow ends in the middle of the call that completed it. A rank with
 * more MPI_Irecv events than completions (a receive completed on another thread, never
 * completed, or cut off by the window or the cap) would shift that count: no flow is drawn
 * into that rank on a group and from a source where it posted an MPI_Irecv.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "hpml/core.h"
#include "hpml/io.h"
#include "prof/report_internal.h"

/* Must match libhpml-prof.so's prof_event_t (prof.h); the file's header says its size. */
typedef struct {
    uint64_t t0, t1, bytes;
    int32_t id, gid, speer, stag, rpeer, rtag, tid, pad;
} event_t;

#define IO_BASE      1000
#define REGION_BEGIN 2000
#define REGION_END   2001
#define RECV_DONE    2002

typedef struct {
    int rank;
    uint64_t real0; /* the rank's real-time clock at MPI_Init, ns */
    char *names[MAX_NAMES], *io[MAX_NAMES];
    int nnames, nio;
    event_t *ev;
    size_t nev;
} rtrace_t;

/* A send or receive side of a point-to-point event, for matching: posted at t0, its
 * flow's end at `at`. */
typedef struct {
    int src, dst, group, tag, rank, idx;
    uint64_t t0, at;
} side_t;

static void rtrace_free(rtrace_t *t)
{
    for (int i = 0; i < t->nnames; i++)
        free(t->names[i]);
    for (int i = 0; i < t->nio; i++)
        free(t->io[i]);
    free(t->ev);
}

/* "WORD WORD ..." after the line's key into names. */
static int split_names(char *line, char **names, int *n)
{
    for (char *tok = strtok(line, " "); tok != NULL; tok = strtok(NULL, " ")) {
        if (*n == MAX_NAMES || (names[*n] = strdup(tok)) == NULL)
            return -1;
        (*n)++;
    }
    return 0;
}

/* Read dir/rank-<rank>.trace of run `run`; 1 if there is none (or another run's). */
static int read_trace(const char *dir, int rank, const char *run, rtrace_t *t)
{
    char path[4096], head[16384], frun[64], *nl, *c, *o, *data;
    size_t got, evsize;
    int frank, fsize, rc = -1;
    unsigned long long real0;
    FILE *f;

    memset(t, 0, sizeof(*t));
    t->rank = rank;
    snprintf(path, sizeof(path), "%s/rank-%d.trace", dir, rank);
    if ((f = fopen(path, "rb")) == NULL)
        return 1;
    got = fread(head, 1, sizeof(head) - 1, f);
    head[got] = '\0';
    if (strncmp(head, "hpml-trace 1\nr ", 15) != 0 ||
        sscanf(head + 13, "r %63s %d %d %llu %zu", frun, &frank, &fsize, &real0, &evsize) != 5 ||
        evsize != sizeof(event_t) || (c = strstr(head, "\nc ")) == NULL ||
        (o = strstr(head, "\no ")) == NULL || (data = strstr(head, "\ndata\n")) == NULL) {
        hpml_set_error(HPML_ERR_FORMAT, "%s: not a trace of libhpml-prof.so", path);
        goto out;
    }
    if (strcmp(frun, run) != 0 || frank != rank) {
        rc = 1;
        goto out;
    }
    t->real0 = real0;
    if ((nl = strchr(c + 1, '\n')) != NULL)
        *nl = '\0';
    if ((nl = strchr(o + 1, '\n')) != NULL)
        *nl = '\0';
    if (split_names(c + 3, t->names, &t->nnames) != 0 || split_names(o + 3, t->io, &t->nio) != 0)
        goto nomem;
    /* The events: whole records after the header (a rank killed mid-write leaves a part). */
    if (fseek(f, 0, SEEK_END) != 0) {
        hpml_set_error(HPML_ERR_IO, "%s: %s", path, strerror(errno));
        goto out;
    }
    {
        long end = ftell(f), start = (long)(data + 6 - head);

        t->nev = end > start ? (size_t)(end - start) / sizeof(event_t) : 0;
        if ((t->ev = malloc(t->nev * sizeof(event_t) + 1)) == NULL)
            goto nomem;
        if (fseek(f, start, SEEK_SET) != 0 || fread(t->ev, sizeof(event_t), t->nev, f) != t->nev) {
            hpml_set_error(HPML_ERR_IO, "%s: read failed", path);
            goto out;
        }
    }
    rc = 0;
    goto out;
nomem:
    hpml_set_error(HPML_ERR_NOMEM, "out of memory");
out:
    fclose(f);
    return rc;
}

static int cmp_side(const void *a, const void *b)
{
    const side_t *x = a, *y = b;

    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst)
        return x->dst < y->dst ? -1 : 1;
    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    if (x->tag != y->tag)
        return x->tag < y->tag ? -1 : 1;
    return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

static int is_recv(const rtrace_t *t, const event_t *e)
{
    const char *n = e->id >= 0 && e->id < t->nnames ? t->names[e->id] : "";

    return e->rpeer >= 0 && e->rtag >= 0 && strcmp(n, "MPI_Irecv") != 0;
}

static int is_irecv(const rtrace_t *t, const event_t *e)
{
    return e->id >= 0 && e->id < t->nnames && strcmp(t->names[e->id], "MPI_Irecv") == 0;
}

static double us(const rtrace_t *t, uint64_t base, uint64_t ns)
{
    return (double)(t->real0 + ns - base) * 1e-3;
}

static void event_json(gzFile gz, const hpml_prof_report_t *r, const rtrace_t *t, const event_t *e,
                       uint64_t base, int first)
{
    const rank_t *rk = &r->rank[t->rank];
    const char *name = "?", *cat = "mpi";
    char buf[1400], *p = buf;
    size_t left = sizeof(buf);

    if (e->id >= 0 && e->id < t->nnames) {
        name = t->names[e->id];
    } else if (e->id >= IO_BASE && e->id - IO_BASE < t->nio) {
        name = t->io[e->id - IO_BASE];
        cat = "io";
    } else if (e->id == REGION_BEGIN || e->id == REGION_END) {
        name = e->gid >= 0 && e->gid < PROF_REGIONS && rk->region[e->gid] ? rk->region[e->gid]
                                                                          : "region";
        cat = "region";
    }
    gzprintf(gz, "%s\n{\"name\": ", first ? "" : ",");
    /* Names are the profiler's identifiers or region names: escape the latter. */
    for (const char *s = name; *s && left > 8; s++) {
        if (*s == '"' || *s == '\\')
            *p++ = '\\', left--;
        if ((unsigned char)*s < 0x20)
            continue;
        *p++ = *s;
        left--;
    }
    *p = '\0';
    gzprintf(gz, "\"%s\", \"cat\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f", buf, cat,
             t->rank, e->tid, us(t, base, e->t0));
    if (e->id == REGION_BEGIN || e->id == REGION_END) {
        gzprintf(gz, ", \"ph\": \"%s\"}", e->id == REGION_BEGIN ? "B" : "E");
        return;
    }
    gzprintf(gz, ", \"ph\": \"X\", \"dur\": %.3f, \"args\": {\"bytes\": %" PRIu64,
             (double)(e->t1 - e->t0) * 1e-3, e->bytes);
    if (e->speer >= 0)
        gzprintf(gz, ", \"to\": %d, \"tag\": %d", e->speer, e->stag);
    if (e->rpeer >= 0)
        gzprintf(gz, ", \"from\": %d, \"recv_tag\": %d", e->rpeer, e->rtag);
    if (e->id >= IO_BASE && e->gid >= 0 && e->gid < PROF_FILES && rk->fpath[e->gid] != NULL) {
        gzprintf(gz, ", \"file\": \"");
        for (const char *s = rk->fpath[e->gid]; *s; s++)
            if ((unsigned char)*s >= 0x20)
                gzprintf(gz, (*s == '"' || *s == '\\') ? "\\%c" : "%c", *s);
        gzprintf(gz, "\"");
    }
    gzprintf(gz, "}}");
}

/* The flows: pair sends and blocking receives; write "s"/"f" events while the total
 * stays within cap. Returns the events written, or -1 when out of memory. */
static long flows(gzFile gz, const hpml_prof_report_t *r, rtrace_t *tr, int nt, uint64_t base,
                  uint64_t room)
{
    side_t *s = NULL, *v = NULL;
    size_t ns = 0, nv = 0, cs = 0, cv = 0, i, j;
    unsigned char *noflow = NULL; /* [src][dst] pairs with an MPI_Irecv on the receiver */
    long written = 0, id = 0;
    int P = r->ranks;

    if ((noflow = calloc((size_t)P * (size_t)P, 1)) == NULL)
        return -1;
    for (int k = 0; k < nt; k++) {
        size_t posted = 0, done = 0;

        for (i = 0; i < tr[k].nev; i++) {
            posted += is_irecv(&tr[k], &tr[k].ev[i]);
            done += tr[k].ev[i].id == RECV_DONE;
        }
        for (i = 0; i < tr[k].nev; i++) {
            const event_t *e = &tr[k].ev[i];
            int g = e->gid >= 0 && e->gid < PROF_GROUPS ? r->rank[tr[k].rank].gmap[e->gid] : -1;
            uint64_t mid = e->t0 + (e->t1 - e->t0) / 2; /* where a flow meets the slice */

            if (e->id == RECV_DONE) {
                if (posted == done && e->rpeer >= 0 && e->rpeer < P && e->rtag >= 0) {
                    if (nv == cv &&
                        (v = realloc(v, (cv = cv ? 2 * cv : 1024) * sizeof(*v))) == NULL)
                        goto nomem;
                    v[nv++] = (side_t){e->rpeer, tr[k].rank, g, e->rtag, k, (int)i, e->t0, e->t1};
                }
                continue;
            }
            if (is_irecv(&tr[k], e)) {
                if (posted == done)
                    continue;
                for (int src = 0; src < P; src++)
                    if (e->rpeer < 0 || e->rpeer == src)
                        noflow[(size_t)src * (size_t)P + (size_t)tr[k].rank] = 1;
                continue;
            }
            if (e->speer >= 0 && e->speer < P && e->stag >= 0 && e->id < IO_BASE) {
                if (ns == cs && (s = realloc(s, (cs = cs ? 2 * cs : 1024) * sizeof(*s))) == NULL)
                    goto nomem;
                s[ns++] = (side_t){tr[k].rank, e->speer, g, e->stag, k, (int)i, e->t0, mid};
            }
            if (is_recv(&tr[k], e) && e->rpeer < P && e->id < IO_BASE) {
                if (nv == cv && (v = realloc(v, (cv = cv ? 2 * cv : 1024) * sizeof(*v))) == NULL)
                    goto nomem;
                v[nv++] = (side_t){e->rpeer, tr[k].rank, g, e->rtag, k, (int)i, e->t0, mid};
            }
        }
    }
    if (ns > 0)
        qsort(s, ns, sizeof(*s), cmp_side);
    if (nv > 0)
        qsort(v, nv, sizeof(*v), cmp_side);
    /* Walk both sorted lists channel by channel; the k-th of each channel pair up. */
    for (i = 0, j = 0; i < ns && j < nv && (uint64_t)written + 2 <= room;) {
        int c = cmp_side(&(side_t){s[i].src, s[i].dst, s[i].group, s[i].tag, 0, 0, 0, 0},
                         &(side_t){v[j].src, v[j].dst, v[j].group, v[j].tag, 0, 0, 0, 0});

        if (c < 0) {
            i++;
        } else if (c > 0) {
            j++;
        } else {
            const rtrace_t *ts = &tr[s[i].rank], *tv = &tr[v[j].rank];
            const event_t *es = &ts->ev[s[i].idx], *ev = &tv->ev[v[j].idx];

            if (!noflow[(size_t)s[i].src * (size_t)P + (size_t)s[i].dst]) {
                gzprintf(
                    gz,
                    ",\n{\"name\": \"message\", \"cat\": \"flow\", \"ph\": \"s\", \"id\": %ld, "
                    "\"pid\": %d, \"tid\": %d, \"ts\": %.3f}",
                    id, ts->rank, es->tid, us(ts, base, s[i].at));
                gzprintf(gz,
                         ",\n{\"name\": \"message\", \"cat\": \"flow\", \"ph\": \"f\", \"bp\": "
                         "\"e\", \"id\": %ld, \"pid\": %d, \"tid\": %d, \"ts\": %.3f}",
                         id, tv->rank, ev->tid, us(tv, base, v[j].at));
                id++;
                written += 2;
            }
            i++;
            j++;
        }
    }
    free(s);
    free(v);
    free(noflow);
    return written;
nomem:
    free(s);
    free(v);
    free(noflow);
    return -1;
}

int hpml_prof_write_trace(const hpml_prof_report_t *r, const char *dir, const char *path,
                          unsigned long long *events)
{
    rtrace_t *tr = NULL;
    hpml_io_file_t *w = NULL;
    FILE *f = NULL;
    gzFile gz = NULL;
    uint64_t base = UINT64_MAX, cap = 0, total = 0;
    int nt = 0, rc = 0, fd;
    long fl;

    *events = 0;
    if ((tr = calloc((size_t)r->ranks, sizeof(*tr))) == NULL)
        return hpml_set_error(HPML_ERR_NOMEM, "out of memory");
    for (int k = 0; k < r->ranks; k++) {
        int got = r->rank[k].present ? read_trace(dir, k, r->run, &tr[nt]) : 1;

        if (got < 0) {
            rc = HPML_ERR_FORMAT;
            rtrace_free(&tr[nt]);
            goto out;
        }
        if (got > 0) {
            rtrace_free(&tr[nt]);
            continue;
        }
        if (tr[nt].real0 < base)
            base = tr[nt].real0;
        cap += r->rank[k].trace_cap;
        for (size_t i = 0; i < tr[nt].nev; i++)
            total += tr[nt].ev[i].id != RECV_DONE; /* completions are not drawn */
        nt++;
    }
    if (nt == 0) {
        rc = 1; /* no trace in this run */
        goto out;
    }
    if ((rc = hpml_io_file_open(path, &w, &f)) != 0)
        goto out;
    if ((fd = dup(fileno(f))) < 0 || (gz = gzdopen(fd, "wb")) == NULL) {
        rc = hpml_set_error(HPML_ERR_IO, "%s: cannot start gzip", path);
        goto out;
    }
    /* No "displayTimeUnit": a display hint in the format's specification (ts and dur are
     * µs whatever it says), but Perfetto's trace processor once read it as the unit of
     * ts and dur (its stat json_display_time_unit says so; now it ignores the key). */
    gzprintf(gz, "{\"otherData\": {\"run\": \"%s\", \"ranks\": %d},\n\"traceEvents\": [", r->run,
             r->ranks);
    for (int k = 0; k < nt; k++) {
        const rank_t *rk = &r->rank[tr[k].rank];

        gzprintf(gz,
                 "%s\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, "
                 "\"args\": {\"name\": \"rank %d (%s)\"}}",
                 k ? "," : "", tr[k].rank, tr[k].rank, rk->host);
        gzprintf(gz,
                 ",\n{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, "
                 "\"args\": {\"sort_index\": %d}}",
                 tr[k].rank, tr[k].rank);
    }
    for (int k = 0; k < nt; k++)
        for (size_t i = 0; i < tr[k].nev; i++)
            if (tr[k].ev[i].id != RECV_DONE)
                event_json(gz, r, &tr[k], &tr[k].ev[i], base, 0);
    if ((fl = flows(gz, r, tr, nt, base, cap > total ? cap - total : 0)) < 0) {
        rc = hpml_set_error(HPML_ERR_NOMEM, "out of memory");
        goto out;
    }
    gzprintf(gz, "\n]}\n");
    if (gzclose(gz) != Z_OK) {
        gz = NULL;
        rc = hpml_set_error(HPML_ERR_IO, "%s: write failed", path);
        goto out;
    }
    gz = NULL;
    rc = hpml_io_file_commit(w);
    w = NULL;
    *events = total + (uint64_t)fl;
out:
    if (gz != NULL)
        gzclose(gz);
    if (w != NULL)
        hpml_io_file_abort(w);
    for (int k = 0; k < nt; k++)
        rtrace_free(&tr[k]);
    free(tr);
    return rc;
}
