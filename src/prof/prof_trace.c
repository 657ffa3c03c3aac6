/*
 * Trace mode of libhpml-prof.so (HPML_PROF_TRACE=1): every MPI and I/O call as an event
 * (start, end, bytes, peers and tags of point-to-point calls, communicator group) in a
 * per-thread buffer, appended to the rank's rank-<r>.trace when full and at each
 * snapshot. The rank records at most HPML_PROF_TRACE_MAX / ranks events, only inside
 * the window HPML_PROF_TRACE_WINDOW (seconds since MPI_Init, "START:END") and the steps
 * HPML_PROF_TRACE_STEPS ("FIRST:LAST", steps counted by MPI_Pcontrol(102)).
 * MPI_Pcontrol(100, "name") and MPI_Pcontrol(101) open and close a region. `hpml prof merge` turns
 * the files into Chrome trace-event JSON (docs/prof.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prof/prof.h"

int hpml__prof_tracing;
PROF_TLS int hpml__prof_tag_s = -1, hpml__prof_peer_r = -1, hpml__prof_tag_r = -1;

static int tfd = -1, nthreads;
static pthread_mutex_t tlock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t win_lo, win_hi = UINT64_MAX, start;
static long step, step_lo, step_hi = LONG_MAX;

/* What a snapshot reports of the trace, in the rank's .live mapping once tracing starts
 * (so that a recovery after SIGKILL reports it too). */
typedef struct {
    uint64_t cap, count, dropped;
    int nregions;
    char *regions[PROF_MAX_REGIONS];
} trace_state_t;
static trace_state_t ts_static = {.cap = 1000000}, *TS = &ts_static;

/* "A:B" as two numbers (B may be empty: no end). */
static int parse_range(const char *s, double *a, double *b)
{
    char *end;

    *a = strtod(s, &end);
    if (end == s || *end != ':' || !(*a >= 0))
        return -1;
    s = end + 1;
    if (*s == '\0') {
        *b = -1;
        return 0;
    }
    *b = strtod(s, &end);
    return *end == '\0' && *b > *a ? 0 : -1;
}

static void settings(int size)
{
    const char *s;
    double a, b;

    if ((s = getenv("HPML_PROF_TRACE_MAX")) != NULL && *s) {
        char *end;
        double v = strtod(s, &end);

        if (*end != '\0' || !(v >= 1) || v > 1e12)
            fprintf(stderr, "[hpml-prof] HPML_PROF_TRACE_MAX must be a count >= 1 (got '%s')\n", s);
        else
            TS->cap = (uint64_t)v;
    }
    TS->cap = TS->cap / (uint64_t)size; /* each rank its share: the job's trace holds <= cap */
    if ((s = getenv("HPML_PROF_TRACE_WINDOW")) != NULL && *s) {
        if (parse_range(s, &a, &b) != 0) {
            fprintf(stderr,
                    "[hpml-prof] HPML_PROF_TRACE_WINDOW must be START:END seconds "
                    "(got '%s')\n",
                    s);
        } else {
            win_lo = (uint64_t)(a * 1e9);
            win_hi = b < 0 ? UINT64_MAX : (uint64_t)(b * 1e9);
        }
    }
    if ((s = getenv("HPML_PROF_TRACE_STEPS")) != NULL && *s) {
        if (parse_range(s, &a, &b) != 0) {
            fprintf(stderr, "[hpml-prof] HPML_PROF_TRACE_STEPS must be FIRST:LAST (got '%s')\n", s);
        } else {
            step_lo = (long)a;
            step_hi = b < 0 ? LONG_MAX : (long)b;
        }
    }
}

void hpml__prof_trace_start(const char *dir, int rank, int size, const char *run, uint64_t start_ns,
                            const char *const *call_names, int ncalls, const char *const *io_names,
                            int nio)
{
    char path[PATH_MAX], head[8192];
    struct timespec rt;
    int n;
    size_t used;

    if (getenv("HPML_PROF_TRACE") == NULL || strcmp(getenv("HPML_PROF_TRACE"), "1") != 0)
        return;
    settings(size);
    {
        trace_state_t *m = hpml__prof_live_alloc(sizeof(*m));

        if (m != NULL) {
            *m = ts_static;
            TS = m;
        }
    }
    start = start_ns;
    n = snprintf(path, sizeof(path), "%s/rank-%d.trace", dir, rank);
    if (n < 0 || (size_t)n >= sizeof(path))
        return;
    hpml__prof_in_io++;
    tfd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0666);
    hpml__prof_in_io--;
    if (tfd < 0) {
        fprintf(stderr, "[hpml-prof r%d] cannot create %s: %s; not tracing\n", rank, path,
                strerror(errno));
        return;
    }
    /* The header: the run, this rank's clocks at MPI_Init (the real-time clock lines the
     * ranks' timelines up), the names of the call numbers; then fixed-size events. */
    clock_gettime(CLOCK_REALTIME, &rt);
    used = (size_t)snprintf(head, sizeof(head), "hpml-trace 1\nr %s %d %d %llu %zu\nc", run, rank,
                            size,
                            (unsigned long long)rt.tv_sec * 1000000000ull +
                                (unsigned long long)rt.tv_nsec - (hpml__prof_now() - start_ns),
                            sizeof(prof_event_t));
    for (int i = 0; i < ncalls && used < sizeof(head) - 64; i++)
        used += (size_t)snprintf(head + used, sizeof(head) - used, " %s", call_names[i]);
    used += (size_t)snprintf(head + used, sizeof(head) - used, "\no");
    for (int i = 0; i < nio && used < sizeof(head) - 64; i++)
        used += (size_t)snprintf(head + used, sizeof(head) - used, " %s", io_names[i]);
    used += (size_t)snprintf(head + used, sizeof(head) - used, "\ndata\n");
    hpml__prof_in_io++;
    if (write(tfd, head, used) != (ssize_t)used)
        tfd = -1;
    hpml__prof_in_io--;
    hpml__prof_tracing = tfd >= 0;
}

/* Append t's buffered events to the file. */
static void flush_thread(prof_thread_t *t)
{
    size_t len = (size_t)t->nev * sizeof(prof_event_t), off = 0;

    if (len == 0 || tfd < 0)
        return;
    hpml__prof_in_io++;
    pthread_mutex_lock(&tlock);
    while (off < len) {
        ssize_t n = write(tfd, (char *)t->ev + off, len - off);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    pthread_mutex_unlock(&tlock);
    hpml__prof_in_io--;
    t->nev = 0;
}

void hpml__prof_trace_flush(prof_thread_t *head, prof_thread_t *self, int all)
{
    if (!hpml__prof_tracing)
        return;
    if (!all) {
        if (self != NULL)
            flush_thread(self);
        return;
    }
    for (prof_thread_t *t = head; t != NULL; t = t->next)
        flush_thread(t);
}

void hpml__prof_trace_event(prof_thread_t *t, int id, uint64_t t0, uint64_t t1, uint64_t bytes,
                            int gid, int speer)
{
    prof_event_t *e;

    if (t0 - start < win_lo || t0 - start >= win_hi || step < step_lo || step >= step_hi)
        goto reset;
    if (__atomic_fetch_add(&TS->count, 1, __ATOMIC_RELAXED) >= TS->cap) {
        __atomic_fetch_add(&TS->dropped, 1, __ATOMIC_RELAXED);
        goto reset;
    }
    if (t->ev == NULL) {
        if ((t->ev = hpml__prof_live_alloc(PROF_TRACE_BUF * sizeof(prof_event_t))) == NULL)
            goto reset;
        pthread_mutex_lock(&tlock);
        t->tid = nthreads++;
        pthread_mutex_unlock(&tlock);
    }
    e = &t->ev[t->nev++];
    e->t0 = t0 - start;
    e->t1 = t1 - start;
    e->bytes = bytes;
    e->id = id;
    e->gid = gid;
    e->speer = speer;
    e->stag = hpml__prof_tag_s;
    e->rpeer = hpml__prof_peer_r;
    e->rtag = hpml__prof_tag_r;
    e->tid = t->tid;
    if (t->nev == PROF_TRACE_BUF)
        flush_thread(t);
reset:
    hpml__prof_tag_s = hpml__prof_peer_r = hpml__prof_tag_r = -1;
}

void hpml__prof_trace_pcontrol(prof_thread_t *t, int level, const char *name)
{
    uint64_t now = hpml__prof_now();
    int r = 0;

    if (level == PROF_PCONTROL_STEP) {
        step++;
        return;
    }
    if (level == PROF_PCONTROL_BEGIN) {
        pthread_mutex_lock(&tlock);
        const char *n = name ? name : "region";

        for (r = 0; r < TS->nregions; r++)
            if (strcmp(TS->regions[r], n) == 0)
                break;
        if (r == TS->nregions && TS->nregions < PROF_MAX_REGIONS &&
            (TS->regions[r] = hpml__prof_live_alloc(strlen(n) + 1)) != NULL) {
            strcpy(TS->regions[r], n);
            TS->nregions++;
        }
        pthread_mutex_unlock(&tlock);
        if (r >= TS->nregions)
            return;
    }
    if (t != NULL)
        hpml__prof_trace_event(t, level == PROF_PCONTROL_BEGIN ? PROF_TRACE_BEGIN : PROF_TRACE_END,
                               now, now, 0, r, -1);
}

int hpml__prof_trace_regions(const char ***names, uint64_t *n_dropped, uint64_t *n_cap)
{
    *names = (const char **)TS->regions;
    *n_dropped = TS->dropped;
    *n_cap = TS->cap;
    return TS->nregions;
}

void *hpml__prof_trace_state(void *adopt)
{
    if (adopt != NULL)
        TS = adopt;
    return TS;
}

/* ---- receives posted with MPI_Irecv ------------------------------------------------- */

/* The pending receives of a thread: open addressing on the request handle, linear
 * probing, deletion by moving later entries of the run back. A table full of receives
 * never completed (cancelled, freed) takes no more: those receives get no event. */
#define PROF_PENDING 4096
typedef struct prof_pending {
    uint64_t key, t0; /* the handle's bits (0: empty slot), when posted */
    const prof_comm_t *comm;
} prof_pending_t;

static uint64_t req_key(MPI_Request req)
{
    uint64_t k = 0;

    memcpy(&k, &req, sizeof(req) < sizeof(k) ? sizeof(req) : sizeof(k));
    return k;
}

static size_t slot_of(uint64_t k)
{
    return (size_t)((k * 0x9E3779B97F4A7C15ull) >> 52) & (PROF_PENDING - 1);
}

void hpml__prof_irecv_posted(prof_thread_t *t, MPI_Request req, const prof_comm_t *c, uint64_t t0)
{
    uint64_t k = req_key(req);
    size_t i;

    if (k == 0 || req == MPI_REQUEST_NULL || t->npending >= PROF_PENDING * 3 / 4)
        return;
    if (t->pending == NULL && (t->pending = calloc(PROF_PENDING, sizeof(prof_pending_t))) == NULL)
        return;
    for (i = slot_of(k); t->pending[i].key != 0 && t->pending[i].key != k;)
        i = (i + 1) & (PROF_PENDING - 1);
    if (t->pending[i].key == 0)
        t->npending++;
    t->pending[i] = (prof_pending_t){k, t0, c};
}

void hpml__prof_irecv_done(prof_thread_t *t, MPI_Request req, const MPI_Status *st, uint64_t t0,
                           uint64_t t1)
{
    uint64_t k = req_key(req), bytes = 0;
    prof_pending_t e;
    size_t i, j;
    int n = 0, cancelled = 0;

    if (k == 0 || t->npending == 0 || t->pending == NULL)
        return;
    for (i = slot_of(k); t->pending[i].key != k; i = (i + 1) & (PROF_PENDING - 1))
        if (t->pending[i].key == 0)
            return; /* not a receive posted with MPI_Irecv (or not kept) */
    e = t->pending[i];
    /* Remove slot i: move back each later entry of the run whose home is not in (i, j]. */
    for (j = i;;) {
        size_t h;

        j = (j + 1) & (PROF_PENDING - 1);
        if (t->pending[j].key == 0)
            break;
        h = slot_of(t->pending[j].key);
        if (((j - h) & (PROF_PENDING - 1)) >= ((j - i) & (PROF_PENDING - 1))) {
            t->pending[i] = t->pending[j];
            i = j;
        }
    }
    t->pending[i].key = 0;
    t->npending--;
    if (st == NULL)
        return;
    if (PMPI_Test_cancelled(st, &cancelled) == MPI_SUCCESS && cancelled)
        return;
    if (PMPI_Get_count(st, MPI_BYTE, &n) == MPI_SUCCESS && n != MPI_UNDEFINED && n > 0)
        bytes = (uint64_t)n;
    hpml__prof_peer_r = e.comm != NULL && st->MPI_SOURCE >= 0 && st->MPI_SOURCE < e.comm->size
                            ? e.comm->world[st->MPI_SOURCE]
                            : -1;
    hpml__prof_tag_r = st->MPI_TAG;
    hpml__prof_trace_event(t, PROF_TRACE_RECV, e.t0, t0 + (t1 - t0) / 2, bytes,
                           e.comm != NULL ? e.comm->gid : -1, -1);
}
