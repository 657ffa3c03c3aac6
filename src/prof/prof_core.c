/*
 * libhpml-prof.so's state: per-thread counters (no lock on the hot path), the
 * communicator cache (world ranks of every communicator's ranks), and each rank's
 * append-only file, to which a whole snapshot of the counters is appended periodically
 * and when the job ends (MPI_Finalize, exit, SIGTERM/SIGINT, MPI_Abort). A snapshot is
 * complete only when its "e" line is there, so a rank killed mid-write leaves the
 * previous one to read. Format: docs/prof.md.
 *
 * The tables a snapshot reads live in DIR/rank-<r>.live, a MAP_SHARED mapping of a sparse
 * file (HPML_PROF_LIVE=0 keeps them in ordinary memory): what the rank last wrote there
 * survives its SIGKILL in the page cache, and `hpml prof merge` has the missing snapshot
 * written from it by hpml_prof_recover, which maps the file at the address the rank had,
 * so that its pointers hold. The rank holds a lock on the file while it lives and
 * removes it when it ends through any of the ways the snapshots above are taken.
 */
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prof/prof.h"

int hpml__prof_on;
uint64_t hpml__prof_next_flush = UINT64_MAX;
int hpml__prof_world_size;
PROF_TLS int hpml__prof_in_io;

static const char *const call_names[PROF_NCALLS] = {
#define PROF_NAME(name, b) #name,
    PROF_CALLS(PROF_NAME)
#undef PROF_NAME
};
static const char *const io_names[PROF_IO_NCALLS] = {
#define PROF_IO_NAME(name) #name,
    PROF_IO_CALLS(PROF_IO_NAME)
#undef PROF_IO_NAME
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* threads, comms, groups, files */
static PROF_TLS prof_thread_t *mine;

static int world_rank = -1, fd = -1, paused, ended, site_depth = 1;
int hpml__prof_self;
static pid_t start_pid;
static uint64_t start_ns, period_ns, fixed_elapsed;
static volatile sig_atomic_t flushing;
static uint64_t flush_t0; /* HPML_PROF_SELF=1: when the snapshot being written began */

/* ---- the live mapping ---------------------------------------------------------------- */

#define LIVE_SIZE  ((size_t)256 << 20)         /* sparse: only the pages used take room */
#define LIVE_ADDR  ((void *)0x5e0000000000ull) /* asked for, so a recovery finds it free */
#define LIVE_MAGIC "hpml-live 1"

typedef struct {
    int size;
    int *world;
} group_t;

/* Everything a snapshot reads, at the start of the mapping (or in live_static). */
typedef struct {
    char magic[16];
    uint64_t base, used; /* the mapping's address; bytes handed out from it */
    uint32_t sizes[4];   /* of this, prof_thread_t, prof_site_t, prof_file_stat_t */
    int spilled;         /* a table was made outside the mapping (it was full) */
    int rank, size;
    char run[64];        /* the run's id, as in the rank file's header */
    uint64_t start_real; /* CLOCK_REALTIME at MPI_Init, ns */
    uint64_t start_mono; /* hpml__prof_now() at MPI_Init: the threads' last_ns count from it */
    prof_thread_t *threads;
    group_t groups[PROF_MAX_GROUPS];
    int ngroups, nfiles, nhcoll;
    char *file_paths[PROF_MAX_FILES];
    char *hcoll_names[PROF_MAX_HCOLL];
    unsigned long seq;
    void *trace; /* trace mode: its counts and region names (prof_trace.c) */
    /* HPML_PROF_SELF=1: the profiler times itself (self_add); the time of its start, of its
     * snapshots, and of one clock read */
    int self_on;
    uint64_t self_start_ns, self_flush_ns, self_clock_ns;
    char exe[PATH_MAX]; /* the program's absolute path: dladdr names it as started */
} live_t;

static live_t live_static, *L = &live_static;
static char live_path[PATH_MAX];
static int live_fd = -1;

/* n zeroed bytes from the mapping (else from the heap, and the rank is not recoverable). */
static void *live_alloc(size_t n)
{
    if (L != &live_static) {
        size_t need = (n + 63) & ~(size_t)63;
        uint64_t off = __atomic_fetch_add(&L->used, need, __ATOMIC_RELAXED);

        if (off + need <= LIVE_SIZE)
            return (char *)L + off; /* a sparse file's pages read as zeros */
        L->spilled = 1;
    }
    return calloc(1, n);
}

void *hpml__prof_live_alloc(size_t n)
{
    return live_alloc(n);
}

/* A copy of s in the mapping; s itself when there is no mapping or no room. */
static const char *live_str(const char *s)
{
    char *p;

    if (s == NULL || L == &live_static)
        return s;
    if ((p = live_alloc(strlen(s) + 1)) == NULL) {
        L->spilled = 1;
        return s;
    }
    return strcpy(p, s);
}

/* A copy of s: in the mapping, else on the heap (NULL when out of memory). */
static char *live_dup(const char *s)
{
    const char *p = live_str(s);

    return p != s ? (char *)p : strdup(s);
}

/* The first LIVE_PREFILL bytes of the mapping (the tables of a run of a few threads) are
 * written with zeros through the file before it is mapped. On ext4 the first write fault
 * on a page of a hole waited 3-15 ms for the journal on a machine with other I/O, once
 * per run and inside MPI_Init; pages written this way first fault in microseconds. A
 * failure only leaves the faults as they were. */
#define LIVE_PREFILL ((off_t)512 << 10)
static void live_prefill(int lfd)
{
    static const char zeros[65536];

    hpml__prof_in_io++;
    for (off_t off = 0; off < LIVE_PREFILL; off += (off_t)sizeof(zeros))
        if (pwrite(lfd, zeros, sizeof(zeros), off) != (ssize_t)sizeof(zeros))
            break;
    hpml__prof_in_io--;
}

/* Empty the file lfd (an earlier run's left behind). A new file is left alone: ext4 marks
 * a file truncated to size 0 for a flush of its dirty pages when it is closed, which made
 * the rank's exit wait for their write-back (see live_end). */
static int live_empty(int lfd)
{
    struct stat st;

    if (fstat(lfd, &st) != 0)
        return -1;
    return st.st_size == 0 ? 0 : ftruncate(lfd, 0);
}

/* Map DIR/rank-<r>.live (unless HPML_PROF_LIVE=0); on any failure the tables stay in
 * live_static and the heap. */
static void live_start(const char *dir)
{
    const char *env = getenv("HPML_PROF_LIVE");
    void *m;
    int n = snprintf(live_path, sizeof(live_path), "%s/rank-%d.live", dir, world_rank);

    if ((env != NULL && strcmp(env, "0") == 0) || n < 0 || (size_t)n >= sizeof(live_path)) {
        live_path[0] = '\0';
        return;
    }
    hpml__prof_in_io++;
    live_fd = open(live_path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    hpml__prof_in_io--;
    /* Locked first: a file another live rank holds (a second run in the same folder) is
     * neither emptied nor removed. Then emptied: no page of an earlier run is left. */
    if (live_fd >= 0 && flock(live_fd, LOCK_EX | LOCK_NB) != 0) {
        fprintf(stderr, "[hpml-prof r%d] %s is in use by another run; no mapping\n", world_rank,
                live_path);
        close(live_fd);
        live_fd = -1;
        live_path[0] = '\0';
        return;
    }
    if (live_fd < 0 || live_empty(live_fd) != 0 || ftruncate(live_fd, (off_t)LIVE_SIZE) != 0 ||
        (live_prefill(live_fd), 0) ||
        (m = mmap(LIVE_ADDR, LIVE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, live_fd, 0)) ==
            MAP_FAILED) {
        fprintf(stderr,
                "[hpml-prof r%d] cannot map %s: %s; a SIGKILL loses the counts since "
                "the last snapshot\n",
                world_rank, live_path, strerror(errno));
        if (live_fd >= 0)
            close(live_fd);
        unlink(live_path);
        live_fd = -1;
        live_path[0] = '\0';
        return;
    }
    L = m;
    memcpy(L->magic, LIVE_MAGIC, sizeof(LIVE_MAGIC));
    L->base = (uint64_t)(uintptr_t)m;
    L->used = (sizeof(live_t) + 63) & ~(size_t)63;
    L->sizes[0] = sizeof(live_t);
    L->sizes[1] = sizeof(prof_thread_t);
    L->sizes[2] = sizeof(prof_site_t);
    L->sizes[3] = sizeof(prof_file_stat_t);
}

/* The rank has ended through a snapshot: its file says everything, the mapping is not
 * needed (async-signal-safe). The file is removed, then its pages are dropped while it is
 * still mapped, by punching a hole over the part in use: an unlinked ext4 file that still
 * had dirty pages when the process exited (and had been truncated: live_empty) was freed
 * at exit, which waited for the pages' write-back, 1-8 ms on a machine with other I/O.
 * The mapping stays, so a thread still inside a wrapper faults in a zero page (its count
 * is lost: the last snapshot is taken) instead of a SIGBUS. Where holes cannot be
 * punched the pages go at exit, as before. */
static void live_end(void)
{
    if (live_path[0] != '\0') {
        uint64_t used = L != &live_static ? L->used : 0;
        off_t len = used < (uint64_t)LIVE_PREFILL ? LIVE_PREFILL
                    : used < LIVE_SIZE            ? (off_t)((used + 4095) & ~(uint64_t)4095)
                                                  : (off_t)LIVE_SIZE;

        unlink(live_path);
        if (live_fd >= 0)
            (void)fallocate(live_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, len);
    }
    live_path[0] = '\0';
}

/* A process forked by a rank shares the mapping: it must not count into it. */
static void live_child(void)
{
    hpml__prof_on = 0;
    hpml__prof_tracing = 0;
}

/* ---- per-thread tables --------------------------------------------------------------- */

prof_thread_t *hpml__prof_thread(void)
{
    prof_thread_t *t;

    if (mine != NULL)
        return mine;
    if ((t = live_alloc(sizeof(*t))) == NULL)
        return NULL;
    for (int i = 0; i < PROF_NCALLS; i++)
        t->call[i].min_ns = UINT64_MAX;
    pthread_mutex_lock(&lock);
    t->next = L->threads;
    __atomic_store_n(&L->threads, t, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&lock);
    return mine = t;
}

static inline void stat_add(prof_stat_t *s, uint64_t d, uint64_t bytes)
{
    s->count++;
    s->total_ns += d;
    s->bytes += bytes;
    if (d < s->min_ns)
        s->min_ns = d;
    if (d > s->max_ns)
        s->max_ns = d;
}

static inline int hbin(uint64_t bytes)
{
    int b = bytes ? 64 - __builtin_clzll(bytes) : 0;

    return b < PROF_HBINS ? b : PROF_HBINS - 1;
}

/* The site's slot for (id, pc) in t's table, made on first use; NULL when full. */
static prof_site_t *site_slot(prof_thread_t *t, int id, void *const *pc, int depth)
{
    uintptr_t h =
        ((uintptr_t)pc[0] >> 2) * 0x9E3779B97F4A7C15ull ^ (uintptr_t)pc[1] ^ (uintptr_t)id;

    if (t->sites == NULL && (t->sites = live_alloc(PROF_MAX_SITES * sizeof(prof_site_t))) == NULL)
        return NULL;
    for (int probe = 0; probe < 16; probe++) {
        prof_site_t *s = &t->sites[(h + (uintptr_t)probe) % PROF_MAX_SITES];

        if (s->depth == 0) {
            Dl_info info;

            s->id = id;
            for (int k = 0; k < depth; k++) {
                s->pc[k] = pc[k];
                if (dladdr(pc[k], &info) != 0) {
                    s->obj[k] = info.dli_fname != NULL && info.dli_fname[0] == '/'
                                    ? live_str(info.dli_fname)
                                    : L->exe;
                    s->sym[k] = live_str(info.dli_sname);
                    s->base[k] = (uintptr_t)info.dli_fbase;
                }
            }
            s->st.min_ns = UINT64_MAX;
            __atomic_store_n(&s->depth, depth, __ATOMIC_RELEASE); /* published last */
            return s;
        }
        if (s->id == id && s->pc[0] == pc[0] && s->pc[1] == pc[1])
            return s;
    }
    return NULL;
}

/* The call site of a call whose wrapper returns to ra: ra, and at depth 2 the frame
 * above it (found by unwinding, whatever the wrappers inlined). */
static void record_site(prof_thread_t *t, void *ra, int id, uint64_t d, uint64_t bytes)
{
    void *pc[2] = {ra, NULL};
    prof_site_t *s;

    if (site_depth == 2) {
        void *bt[8];
        int n = backtrace(bt, 8);

        for (int i = 0; i + 1 < n; i++)
            if (bt[i] == ra) {
                pc[1] = bt[i + 1];
                break;
            }
    }
    if ((s = site_slot(t, id, pc, pc[1] != NULL ? 2 : 1)) != NULL)
        stat_add(&s->st, d, bytes);
}

/* HPML_PROF_SELF=1: a wrapper's bookkeeping ended; it began at t1, the clock read after
 * the real call, and a clock read before the call (self_clock_ns) is the rest of it. */
static inline void self_add(prof_thread_t *t, uint64_t t1)
{
    t->self_ns += hpml__prof_now() - t1 + L->self_clock_ns;
    t->self_calls++;
}

void hpml__prof_self_extra(prof_thread_t *t, uint64_t t0)
{
    t->self_ns += hpml__prof_now() - t0;
}

static void record_body(prof_thread_t *t, void *ra, int id, uint64_t t0, uint64_t now,
                        uint64_t bytes, const prof_comm_t *c, int wpeer);

void hpml__prof_record(void *ra, int id, uint64_t t0, uint64_t now, uint64_t bytes,
                       const prof_comm_t *c, int wpeer)
{
    prof_thread_t *t = mine ? mine : hpml__prof_thread();

    if (t == NULL || paused) {
        hpml__prof_tag_s = hpml__prof_peer_r = hpml__prof_tag_r = -1;
        return;
    }
    record_body(t, ra, id, t0, now, bytes, c, wpeer);
    if (hpml__prof_self)
        self_add(t, now);
    if (now >= hpml__prof_next_flush)
        hpml__prof_flush("run", 0);
}

static void record_body(prof_thread_t *t, void *ra, int id, uint64_t t0, uint64_t now,
                        uint64_t bytes, const prof_comm_t *c, int wpeer)
{
    stat_add(&t->call[id], now - t0, bytes);
    t->last_ns = now;
    if (hpml__prof_tracing)
        hpml__prof_trace_event(t, id, t0, now, bytes, c != NULL ? c->gid : -1, wpeer);
    if (site_depth > 0 && ra != NULL)
        record_site(t, ra, id, now - t0, bytes);
    if (t->hcoll_depth > 0) {
        prof_hcoll_t *h = &t->hcoll[t->in_hcoll];

        h->mpi_calls++;
        h->mpi_ns += now - t0;
        h->mpi_bytes += bytes;
        if (wpeer >= 0) {
            h->p2p_msgs++;
            h->p2p_bytes += bytes;
        }
    }
    if (c != NULL) {
        uint64_t *h = t->hist[c->gid];

        if (h == NULL) {
            if ((h = live_alloc(PROF_NCALLS * PROF_HBINS * 8)) == NULL)
                return;
            __atomic_store_n(&t->hist[c->gid], h, __ATOMIC_RELEASE);
        }
        h[id * PROF_HBINS + hbin(bytes)]++;
    }
    if (wpeer >= 0 && wpeer < hpml__prof_world_size) {
        if (t->msgs == NULL) {
            uint64_t *m = live_alloc((size_t)hpml__prof_world_size * 8);
            uint64_t *b = live_alloc((size_t)hpml__prof_world_size * 8);

            if (m == NULL || b == NULL)
                return; /* out of memory: those made are left */
            /* A snapshot in another thread reads bytes once it sees msgs. */
            t->bytes = b;
            __atomic_store_n(&t->msgs, m, __ATOMIC_RELEASE);
        }
        t->msgs[wpeer]++;
        t->bytes[wpeer] += bytes;
    }
}

/* ---- hpml's collectives ------------------------------------------------------------- */

/* The index of "coll algo" (made on first use; the last slot is shared when full). */
static int hcoll_index(const char *coll, const char *algo)
{
    char name[128];
    int i;

    snprintf(name, sizeof(name), "hpml_%s %s", coll ? coll : "?", algo ? algo : "?");
    for (i = 0; i < PROF_MAX_HCOLL; i++) {
        const char *n = __atomic_load_n(&L->hcoll_names[i], __ATOMIC_ACQUIRE);

        if (n == NULL)
            break;
        if (strcmp(n, name) == 0)
            return i;
    }
    pthread_mutex_lock(&lock);
    for (i = 0; i < L->nhcoll; i++)
        if (strcmp(L->hcoll_names[i], name) == 0)
            break;
    if (i == L->nhcoll && L->nhcoll < PROF_MAX_HCOLL - 1) {
        char *copy = live_dup(name);

        if (copy != NULL) {
            __atomic_store_n(&L->hcoll_names[i], copy, __ATOMIC_RELEASE);
            L->nhcoll++;
        } else {
            i = PROF_MAX_HCOLL - 1;
        }
    } else if (i == L->nhcoll) {
        i = PROF_MAX_HCOLL - 1;
        if (L->hcoll_names[i] == NULL)
            L->hcoll_names[i] = live_dup("hpml_(other collectives) -");
    }
    pthread_mutex_unlock(&lock);
    return i;
}

/* The index of (coll, algo) from the thread's cache of the last ones entered, compared by
 * pointer: libhpml passes the same static strings (hpml_coll_name, hpml_algo_name) on
 * every call, and the cache keeps the formatting and string comparisons of hcoll_index,
 * whose code and data are cold after a compute phase (about 10 µs each in a KVM guest),
 * off the path of every collective. */
static int hcoll_cached(prof_thread_t *t, const char *coll, const char *algo)
{
    int i;

    for (i = 0; i < PROF_HC_CACHE; i++)
        if (t->hc_coll[i] == coll && t->hc_algo[i] == algo && coll != NULL)
            return t->hc_index[i];
    i = t->hc_next;
    t->hc_next = (i + 1) % PROF_HC_CACHE;
    t->hc_coll[i] = coll;
    t->hc_algo[i] = algo;
    return t->hc_index[i] = hcoll_index(coll, algo);
}

/* Called by libhpml's dispatchers (src/comm/prof_hook.c finds these by name): the MPI
 * calls until the matching leave belong to this hpml collective. Nested calls (an
 * algorithm that runs another collective) count in the outermost. */
void hpml_prof_coll_enter(const char *coll, const char *algo, size_t bytes);
void hpml_prof_coll_leave(void);

void hpml_prof_coll_enter(const char *coll, const char *algo, size_t bytes)
{
    prof_thread_t *t;
    uint64_t t_in;

    if (!hpml__prof_on || paused || (t = mine ? mine : hpml__prof_thread()) == NULL)
        return;
    t_in = hpml__prof_self ? hpml__prof_now() : 0;
    if (t->hcoll_depth++ > 0) {
        if (hpml__prof_self)
            t->self_ns += hpml__prof_now() - t_in + L->self_clock_ns;
        return;
    }
    t->in_hcoll = hcoll_cached(t, coll, algo);
    t->hcoll[t->in_hcoll].st.bytes += bytes;
    t->hcoll_t0 = hpml__prof_now();
    if (hpml__prof_self) /* from t_in to the clock read above, and t_in's own read */
        t->self_ns += t->hcoll_t0 - t_in + L->self_clock_ns;
}

void hpml_prof_coll_leave(void)
{
    prof_thread_t *t = mine;
    prof_hcoll_t *h;
    uint64_t d, now;

    if (t == NULL || t->hcoll_depth == 0)
        return;
    now = hpml__prof_now();
    if (--t->hcoll_depth > 0) {
        if (hpml__prof_self) /* its time, not a call: the outermost leave counts the collective */
            t->self_ns += hpml__prof_now() - now + L->self_clock_ns;
        return;
    }
    h = &t->hcoll[t->in_hcoll];
    d = now - t->hcoll_t0;
    if (h->st.count == 0 || d < h->st.min_ns)
        h->st.min_ns = d;
    if (d > h->st.max_ns)
        h->st.max_ns = d;
    h->st.count++;
    h->st.total_ns += d;
    t->last_ns = now;
    if (hpml__prof_self)
        self_add(t, now);
}

/* ---- files (I/O statistics) --------------------------------------------------------- */

int hpml__prof_file_index(const char *path)
{
    int i;

    pthread_mutex_lock(&lock);
    for (i = 0; i < L->nfiles; i++)
        if (strcmp(L->file_paths[i], path) == 0)
            goto out;
    if (L->nfiles == PROF_MAX_FILES - 1) {
        if (L->file_paths[i] == NULL)
            L->file_paths[i] = live_dup("(other files)");
        goto out;
    }
    if ((L->file_paths[i] = live_dup(path)) == NULL) {
        i = -1;
        goto out;
    }
    L->nfiles++;
out:
    pthread_mutex_unlock(&lock);
    return i;
}

void hpml__prof_io_record(int fi, int op, uint64_t t0, uint64_t now, uint64_t bytes)
{
    prof_thread_t *t = mine ? mine : hpml__prof_thread();
    prof_file_stat_t *f;

    if (t == NULL || paused || fi < 0)
        return;
    f = t->files[fi];
    if (f == NULL) {
        if ((f = live_alloc(sizeof(*f))) == NULL) {
            if (hpml__prof_self)
                self_add(t, now);
            return;
        }
        for (int i = 0; i < PROF_IO_NCALLS; i++)
            f->call[i].min_ns = UINT64_MAX;
        __atomic_store_n(&t->files[fi], f, __ATOMIC_RELEASE); /* complete before seen */
    }
    stat_add(&f->call[op], now - t0, bytes);
    t->last_ns = now;
    if (hpml__prof_tracing)
        hpml__prof_trace_event(t, PROF_TRACE_IO + op, t0, now, bytes, fi, -1);
    if (op == PROF_IO_read || op == PROF_IO_write || op == PROF_IO_pread || op == PROF_IO_pwrite ||
        op == PROF_IO_fread || op == PROF_IO_fwrite)
        f->hist[hbin(bytes)]++;
    if (hpml__prof_self)
        self_add(t, now);
    if (hpml__prof_on && now >= hpml__prof_next_flush)
        hpml__prof_flush("run", 0);
}

/* ---- communicators and their groups ------------------------------------------------ */

static prof_comm_t *comms;
static unsigned comm_gen; /* bumped when a communicator is freed: per-thread caches drop */

#define TL_CACHE 4
static PROF_TLS struct {
    MPI_Comm h;
    prof_comm_t *c;
} tl_cache[TL_CACHE];
static PROF_TLS unsigned tl_gen, tl_next;

/* The group index of the world ranks w[0..n) (under lock). */
static int group_of(const int *w, int n)
{
    int g;

    for (g = 0; g < L->ngroups; g++)
        if (L->groups[g].size == n && memcmp(L->groups[g].world, w, (size_t)n * sizeof(int)) == 0)
            return g;
    if (L->ngroups == PROF_MAX_GROUPS - 1)
        return PROF_MAX_GROUPS - 1; /* the shared last group, printed as "other" */
    if ((L->groups[g].world = live_alloc((size_t)n * sizeof(int))) == NULL)
        return PROF_MAX_GROUPS - 1;
    memcpy(L->groups[g].world, w, (size_t)n * sizeof(int));
    L->groups[g].size = n;
    L->ngroups++;
    return g;
}

static prof_comm_t *comm_make(MPI_Comm comm)
{
    prof_comm_t *c = calloc(1, sizeof(*c));
    MPI_Group g = MPI_GROUP_NULL, wg = MPI_GROUP_NULL;
    int inter = 0, *idx = NULL;

    if (c == NULL)
        return NULL;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter)
        PMPI_Comm_remote_group(comm, &g);
    else
        PMPI_Comm_group(comm, &g);
    PMPI_Group_size(g, &c->size);
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    c->world = malloc((size_t)c->size * sizeof(int));
    idx = malloc((size_t)c->size * sizeof(int));
    if (c->world == NULL || idx == NULL) {
        free(c->world);
        free(c);
        c = NULL;
        goto out;
    }
    for (int i = 0; i < c->size; i++)
        idx[i] = i;
    PMPI_Group_translate_ranks(g, c->size, idx, wg, c->world);
    c->handle = comm;
    c->gid = group_of(c->world, c->size);
out:
    free(idx);
    if (g != MPI_GROUP_NULL)
        PMPI_Group_free(&g);
    if (wg != MPI_GROUP_NULL)
        PMPI_Group_free(&wg);
    return c;
}

prof_comm_t *hpml__prof_comm(MPI_Comm comm)
{
    unsigned gen = __atomic_load_n(&comm_gen, __ATOMIC_ACQUIRE);
    prof_comm_t *c;

    if (comm == MPI_COMM_NULL)
        return NULL;
    if (tl_gen == gen) {
        for (int i = 0; i < TL_CACHE; i++)
            if (tl_cache[i].c != NULL && tl_cache[i].h == comm)
                return tl_cache[i].c;
    } else {
        memset(tl_cache, 0, sizeof(tl_cache));
        tl_gen = gen;
    }
    pthread_mutex_lock(&lock);
    for (c = comms; c != NULL; c = c->next)
        if (!c->dead && c->handle == comm)
            break;
    if (c == NULL && (c = comm_make(comm)) != NULL) {
        c->next = comms;
        comms = c;
    }
    pthread_mutex_unlock(&lock);
    if (c != NULL) {
        tl_cache[tl_next].h = comm;
        tl_cache[tl_next].c = c;
        tl_next = (tl_next + 1) % TL_CACHE;
    }
    return c;
}

void hpml__prof_comm_forget(MPI_Comm comm)
{
    pthread_mutex_lock(&lock);
    for (prof_comm_t *c = comms; c != NULL; c = c->next)
        if (!c->dead && c->handle == comm)
            c->dead = 1; /* kept: other threads may still hold the pointer */
    __atomic_add_fetch(&comm_gen, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&lock);
}

/* ---- snapshots ----------------------------------------------------------------------- */

/* The output buffer: filled, written out whenever it nears full. No allocation, so a
 * snapshot can be taken in a signal handler. */
static char obuf[1 << 16];
static size_t olen;

static void out_flush(void)
{
    size_t off = 0;

    while (off < olen) {
        ssize_t n = write(fd, obuf + off, olen - off);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    olen = 0;
}

static void outf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void outf(const char *fmt, ...)
{
    va_list ap;
    int n;

    if (olen > sizeof(obuf) - 4096)
        out_flush();
    va_start(ap, fmt);
    n = vsnprintf(obuf + olen, sizeof(obuf) - olen, fmt, ap);
    va_end(ap);
    if (n > 0)
        olen += (size_t)n < sizeof(obuf) - olen ? (size_t)n : sizeof(obuf) - olen - 1;
}

/* A path with space, '%' and control characters as %XX, so it is one word. */
static void out_path(const char *p)
{
    outf(" ");
    for (; *p; p++) {
        unsigned char ch = (unsigned char)*p;

        if (ch <= ' ' || ch == '%' || ch == 127)
            outf("%%%02X", ch);
        else
            outf("%c", ch);
    }
}

static void out_stat(const prof_stat_t *s)
{
    outf(" %llu %llu %llu %llu %llu", (unsigned long long)s->count, (unsigned long long)s->total_ns,
         (unsigned long long)(s->count ? s->min_ns : 0), (unsigned long long)s->max_ns,
         (unsigned long long)s->bytes);
}

static void sum_stat(prof_stat_t *a, const prof_stat_t *b)
{
    if (b->count == 0)
        return;
    a->count += b->count;
    a->total_ns += b->total_ns;
    a->bytes += b->bytes;
    if (b->min_ns < a->min_ns)
        a->min_ns = b->min_ns;
    if (b->max_ns > a->max_ns)
        a->max_ns = b->max_ns;
}

static void out_hist(const uint64_t *h)
{
    for (int b = 0; b < PROF_HBINS; b++)
        if (h[b])
            outf(" %d:%llu", b, (unsigned long long)h[b]);
}

/* Sums over threads go through these (static: no allocation in a signal handler). */
static prof_stat_t sum_calls[PROF_NCALLS];
static uint64_t sum_hist[PROF_NCALLS * PROF_HBINS];
static prof_file_stat_t sum_file;

/* One line per call site and thread (merge sums the same site over threads and ranks):
 * "k CALL DEPTH {OBJECT BASE OFFSET SYMBOL}... STATS", addresses in hex. */
static void snapshot_sites(prof_thread_t *head)
{
    for (prof_thread_t *t = head; t != NULL; t = t->next) {
        if (t->sites == NULL)
            continue;
        for (int i = 0; i < PROF_MAX_SITES; i++) {
            const prof_site_t *s = &t->sites[i];
            int depth = __atomic_load_n(&s->depth, __ATOMIC_ACQUIRE);

            if (depth == 0 || s->st.count == 0)
                continue;
            outf("k %s %d", call_names[s->id], depth);
            for (int k = 0; k < depth; k++) {
                out_path(s->obj[k] != NULL ? s->obj[k] : "?");
                outf(" %lx %lx", (unsigned long)s->base[k],
                     (unsigned long)((uintptr_t)s->pc[k] - s->base[k]));
                out_path(s->sym[k] != NULL ? s->sym[k] : "?");
            }
            out_stat(&s->st);
            outf("\n");
        }
    }
}

/* The "a" lines: hpml's collectives summed over the threads. */
static void snapshot_hcoll(prof_thread_t *head)
{
    for (int i = 0; i < PROF_MAX_HCOLL; i++) {
        prof_hcoll_t sum = {.st = {.min_ns = UINT64_MAX}};

        if (L->hcoll_names[i] == NULL)
            continue;
        for (prof_thread_t *t = head; t != NULL; t = t->next) {
            const prof_hcoll_t *h = &t->hcoll[i];

            sum_stat(&sum.st, &h->st);
            if (h->st.count == 0)
                sum.st.bytes += h->st.bytes; /* entered, not yet left */
            sum.mpi_calls += h->mpi_calls;
            sum.mpi_ns += h->mpi_ns;
            sum.mpi_bytes += h->mpi_bytes;
            sum.p2p_msgs += h->p2p_msgs;
            sum.p2p_bytes += h->p2p_bytes;
        }
        if (sum.st.count == 0)
            continue;
        outf("a");
        out_path(L->hcoll_names[i]);
        out_stat(&sum.st);
        outf(" %llu %llu %llu %llu %llu\n", (unsigned long long)sum.mpi_calls,
             (unsigned long long)sum.mpi_ns, (unsigned long long)sum.mpi_bytes,
             (unsigned long long)sum.p2p_msgs, (unsigned long long)sum.p2p_bytes);
    }
}

static void snapshot(const char *state, int sig)
{
    prof_thread_t *head = __atomic_load_n(&L->threads, __ATOMIC_ACQUIRE);
    int ng = L->ngroups;
    unsigned long long elapsed = fixed_elapsed ? fixed_elapsed : hpml__prof_now() - start_ns;

    L->seq++;
    if (sig)
        outf("s %lu %s:%d %llu\n", L->seq, state, sig, elapsed);
    else
        outf("s %lu %s %llu\n", L->seq, state, elapsed);
    for (int i = 0; i < PROF_NCALLS; i++) {
        sum_calls[i] = (prof_stat_t){.min_ns = UINT64_MAX};
        for (prof_thread_t *t = head; t != NULL; t = t->next)
            sum_stat(&sum_calls[i], &t->call[i]);
        if (sum_calls[i].count) {
            outf("c %s", call_names[i]);
            out_stat(&sum_calls[i]);
            outf("\n");
        }
    }
    for (int g = 0; g < PROF_MAX_GROUPS; g++) {
        int used = 0;

        memset(sum_hist, 0, sizeof(sum_hist));
        for (prof_thread_t *t = head; t != NULL; t = t->next) {
            const uint64_t *th = __atomic_load_n(&t->hist[g], __ATOMIC_ACQUIRE);

            if (th == NULL)
                continue;
            used = 1;
            for (int k = 0; k < PROF_NCALLS * PROF_HBINS; k++)
                sum_hist[k] += th[k];
        }
        if (!used)
            continue;
        if (g < ng) {
            outf("g %d %d", g, L->groups[g].size);
            for (int r = 0; r < L->groups[g].size; r++)
                outf(" %d", L->groups[g].world[r]);
            outf("\n");
        } else {
            outf("g %d 0\n", g);
        }
        for (int i = 0; i < PROF_NCALLS; i++) {
            const uint64_t *h = sum_hist + i * PROF_HBINS;
            int any = 0;

            for (int b = 0; b < PROF_HBINS; b++)
                any |= h[b] != 0;
            if (!any)
                continue;
            outf("h %s %d", call_names[i], g);
            out_hist(h);
            outf("\n");
        }
    }
    for (int r = 0; r < hpml__prof_world_size; r++) {
        uint64_t m = 0, b = 0;

        for (prof_thread_t *t = head; t != NULL; t = t->next) {
            const uint64_t *tm = __atomic_load_n(&t->msgs, __ATOMIC_ACQUIRE);

            if (tm != NULL) {
                m += tm[r];
                b += t->bytes[r];
            }
        }
        if (m)
            outf("m %d %llu %llu\n", r, (unsigned long long)m, (unsigned long long)b);
    }
    for (int f = 0; f < PROF_MAX_FILES; f++) {
        int used = 0;

        if (L->file_paths[f] == NULL)
            continue;
        memset(&sum_file, 0, sizeof(sum_file));
        for (int i = 0; i < PROF_IO_NCALLS; i++)
            sum_file.call[i].min_ns = UINT64_MAX;
        for (prof_thread_t *t = head; t != NULL; t = t->next) {
            const prof_file_stat_t *tf = __atomic_load_n(&t->files[f], __ATOMIC_ACQUIRE);

            if (tf == NULL)
                continue;
            used = 1;
            for (int i = 0; i < PROF_IO_NCALLS; i++)
                sum_stat(&sum_file.call[i], &tf->call[i]);
            for (int b = 0; b < PROF_HBINS; b++)
                sum_file.hist[b] += tf->hist[b];
        }
        if (!used)
            continue;
        outf("f %d", f);
        out_path(L->file_paths[f]);
        outf("\n");
        for (int i = 0; i < PROF_IO_NCALLS; i++)
            if (sum_file.call[i].count) {
                outf("i %d %s", f, io_names[i]);
                out_stat(&sum_file.call[i]);
                outf("\n");
            }
        outf("j %d", f);
        out_hist(sum_file.hist);
        outf("\n");
    }
    snapshot_sites(head);
    if (hpml__prof_tracing) {
        const char **names;
        uint64_t dropped, cap;
        int n = hpml__prof_trace_regions(&names, &dropped, &cap);

        for (int i = 0; i < n; i++) {
            outf("n %d", i);
            out_path(names[i]);
            outf("\n");
        }
        outf("x %llu %llu\n", (unsigned long long)dropped, (unsigned long long)cap);
    }
    snapshot_hcoll(head);
    if (L->self_on) {
        uint64_t ns = 0, calls = 0;

        for (prof_thread_t *t = head; t != NULL; t = t->next) {
            ns += t->self_ns;
            calls += t->self_calls;
        }
        /* This snapshot so far counts among the snapshots' time (not in a recovery). */
        outf("p %llu %llu %llu %llu %llu\n", (unsigned long long)calls, (unsigned long long)ns,
             (unsigned long long)L->self_start_ns,
             (unsigned long long)(L->self_flush_ns +
                                  (flushing && flush_t0 ? hpml__prof_now() - flush_t0 : 0)),
             (unsigned long long)L->self_clock_ns);
    }
    outf("e %lu\n", L->seq);
    out_flush();
}

void hpml__prof_flush(const char *state, int sig)
{
    if (fd < 0 || ended || getpid() != start_pid) /* a child forked after MPI_Init: not a rank */
        return;
    /* One snapshot at a time: a periodic one in another thread, or the one a signal
     * interrupted, is left to finish (or, interrupted for good, to be ignored). */
    if (__atomic_exchange_n(&flushing, 1, __ATOMIC_ACQUIRE))
        return;
    hpml__prof_in_io++;
    flush_t0 = hpml__prof_self ? hpml__prof_now() : 0;
    hpml__prof_trace_flush(L->threads, mine, strcmp(state, "run") != 0);
    snapshot(state, sig);
    if (hpml__prof_self)
        L->self_flush_ns += hpml__prof_now() - flush_t0;
    hpml__prof_in_io--;
    if (strcmp(state, "run") == 0)
        hpml__prof_next_flush = hpml__prof_now() + period_ns;
    else {
        ended = 1; /* final, abort, exit or signal: the last word */
        /* Nothing is counted after it (no snapshot would report it), and nothing writes to
         * the mapping that live_end releases. */
        hpml__prof_on = 0;
        live_end();
    }
    __atomic_store_n(&flushing, 0, __ATOMIC_RELEASE);
}

void hpml__prof_pcontrol(int level, const char *name)
{
    if (level == 0 || level == 1)
        paused = level == 0;
    else if (level >= PROF_PCONTROL_BEGIN && level <= PROF_PCONTROL_STEP && hpml__prof_tracing)
        hpml__prof_trace_pcontrol(mine ? mine : hpml__prof_thread(), level, name);
}

/* ---- the end of a job ------------------------------------------------------------- */

static struct sigaction old_term, old_int;

static void on_signal(int sig)
{
    struct sigaction *old = sig == SIGTERM ? &old_term : &old_int;

    hpml__prof_flush("signal", sig);
    /* Then what the program would have done without the profiler. */
    if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN && !(old->sa_flags & SA_SIGINFO)) {
        old->sa_handler(sig);
        return;
    }
    if (old->sa_handler == SIG_IGN)
        return;
    sigaction(sig, old, NULL);
    raise(sig);
}

static void on_exit_flush(void)
{
    hpml__prof_flush("exit", 0);
}

/* Seconds from HPML_PROF_PERIOD (default 5; 0 turns periodic snapshots off). */
static uint64_t period_from_env(void)
{
    const char *s = getenv("HPML_PROF_PERIOD");
    char *end;
    double v;

    if (s == NULL || *s == '\0')
        return 5000000000ull;
    v = strtod(s, &end);
    if (*end != '\0' || !(v >= 0) || v > 1e6) {
        fprintf(stderr, "[hpml-prof] HPML_PROF_PERIOD must be seconds >= 0 (got '%s'); using 5\n",
                s);
        return 5000000000ull;
    }
    return v == 0 ? UINT64_MAX / 2 : (uint64_t)(v * 1e9);
}

/* HPML_PROF_CALLSITES: 0 (off), 1 (the caller of each MPI call, default), 2 (and its
 * caller, by unwinding: slower). */
static int callsites_from_env(void)
{
    const char *s = getenv("HPML_PROF_CALLSITES");

    if (s == NULL || *s == '\0')
        return 1;
    if ((s[0] == '0' || s[0] == '1' || s[0] == '2') && s[1] == '\0')
        return s[0] - '0';
    fprintf(stderr, "[hpml-prof] HPML_PROF_CALLSITES must be 0, 1 or 2 (got '%s'); using 1\n", s);
    return 1;
}

/* HPML_PROF_SELF=1: the profiler times its own work (docs/prof.md, "Overhead"). */
static int self_from_env(void)
{
    const char *s = getenv("HPML_PROF_SELF");

    if (s == NULL || *s == '\0' || strcmp(s, "0") == 0)
        return 0;
    if (strcmp(s, "1") == 0)
        return 1;
    fprintf(stderr, "[hpml-prof] HPML_PROF_SELF must be 0 or 1 (got '%s'); using 0\n", s);
    return 0;
}

/* The mean time of one hpml__prof_now, over 1000 reads. */
static uint64_t clock_cost(void)
{
    uint64_t a = hpml__prof_now(), b;

    for (int i = 0; i < 999; i++)
        (void)hpml__prof_now();
    b = hpml__prof_now();
    return (b - a + 500) / 1000;
}

void hpml__prof_start(uint64_t t_init)
{
    uint64_t t_in = hpml__prof_now(), t_bcast;
    const char *dir = getenv("HPML_PROF_DIR");
    char path[PATH_MAX], host[256] = "?", run[64];
    unsigned long long id[2] = {0, 0};
    struct sigaction sa;
    int n;

    if (dir == NULL || *dir == '\0')
        dir = "hpml-prof";
    MPI_Comm parent = MPI_COMM_NULL;

    /* Processes started by MPI_Comm_spawn have world ranks of their own, which would take
     * the parent job's file names: they are not profiled. */
    PMPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL)
        return;
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &hpml__prof_world_size);
    /* One run id for every rank (rank 0's clock and pid): merge tells this run's files
     * from an earlier run's left in the same folder. */
    if (world_rank == 0) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        id[0] = (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
        id[1] = (unsigned long long)getpid();
    }
    t_bcast = hpml__prof_now();
    PMPI_Bcast(id, 2, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    t_bcast = hpml__prof_now() - t_bcast;
    snprintf(run, sizeof(run), "%llx-%llx", id[0], id[1]);
    mkdir(dir, 0777); /* usually made by `hpml prof`; all ranks may race to make it */
    n = snprintf(path, sizeof(path), "%s/rank-%d.prof", dir, world_rank);
    if (n < 0 || (size_t)n >= sizeof(path)) {
        fprintf(stderr, "[hpml-prof r%d] HPML_PROF_DIR too long; not profiling\n", world_rank);
        return;
    }
    hpml__prof_in_io++;
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0666);
    hpml__prof_in_io--;
    if (fd < 0) {
        fprintf(stderr, "[hpml-prof r%d] cannot create %s: %s; not profiling\n", world_rank, path,
                strerror(errno));
        return;
    }
    gethostname(host, sizeof(host) - 1);
    period_ns = period_from_env();
    start_pid = getpid();
    live_start(dir);
    {
        ssize_t len = readlink("/proc/self/exe", L->exe, sizeof(L->exe) - 1);
        struct timespec rt;

        L->exe[len > 0 ? len : 0] = '\0';
        clock_gettime(CLOCK_REALTIME, &rt);
        L->start_real =
            (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec - (hpml__prof_now() - t_init);
        L->start_mono = t_init;
        L->rank = world_rank;
        L->size = hpml__prof_world_size;
        snprintf(L->run, sizeof(L->run), "%s", run);
    }
    pthread_atfork(NULL, NULL, live_child);
    site_depth = callsites_from_env();
    if (site_depth == 2) {
        void *bt[2];

        backtrace(bt, 2); /* loads the unwinder now, not inside a wrapper or a signal */
    }
    start_ns = t_init;
    outf("hpml-prof 1\nr %s %d %d %ld %s %llu\n", run, world_rank, hpml__prof_world_size,
         (long)getpid(), host, id[0]);
    hpml__prof_trace_start(dir, world_rank, hpml__prof_world_size, run, start_ns, call_names,
                           PROF_NCALLS, io_names, PROF_IO_NCALLS);
    if (hpml__prof_tracing)
        L->trace = hpml__prof_trace_state(NULL);
    hpml__prof_on = 1;
    atexit(on_exit_flush);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGINT, &sa, &old_int);
    if ((hpml__prof_self = self_from_env()) != 0) {
        L->self_clock_ns = clock_cost();
        L->self_on = 1;
        /* The first snapshot counts apart. The run id's broadcast is left out: it waits
         * for the last rank to leave MPI_Init, as the program's first collective would
         * (its own cost is that of a 16-byte broadcast, a few µs). */
        L->self_start_ns = hpml__prof_now() - t_in - t_bcast;
    }
    hpml__prof_flush("run", 0);
}

/* ---- recovery (hpml prof merge) ------------------------------------------------------ */

/* Trace mode: append the events still in the threads' buffers (in the mapping) to
 * DIR/rank-<rank>.trace, after cutting off a record the rank was killed in the middle of. */
static void recover_trace(const char *dir, int rank)
{
    char path[PATH_MAX], head[8192 + 64], *data;
    uintptr_t lo = (uintptr_t)L, hi = lo + LIVE_SIZE;
    struct stat st;
    ssize_t got;
    int tf;

    if (snprintf(path, sizeof(path), "%s/rank-%d.trace", dir, rank) >= (int)sizeof(path) ||
        (tf = open(path, O_RDWR | O_CLOEXEC)) < 0)
        return;
    if ((got = pread(tf, head, sizeof(head) - 1, 0)) > 0 && fstat(tf, &st) == 0) {
        head[got] = '\0';
        if ((data = strstr(head, "\ndata\n")) != NULL) {
            off_t start = (off_t)(data + 6 - head), whole = st.st_size - start;

            whole -= whole % (off_t)sizeof(prof_event_t);
            if (ftruncate(tf, start + whole) == 0 && lseek(tf, 0, SEEK_END) >= 0)
                for (prof_thread_t *t = L->threads; t != NULL; t = t->next) {
                    size_t len = (size_t)t->nev * sizeof(prof_event_t);

                    if ((uintptr_t)t->ev >= lo && (uintptr_t)t->ev + len <= hi && len > 0 &&
                        write(tf, t->ev, len) != (ssize_t)len)
                        break;
                }
        }
    }
    close(tf);
}

int hpml_prof_recover(const char *dir, int rank, char *err, size_t errlen);

/* Append to DIR/rank-<rank>.prof the snapshot ("killed") of what DIR/rank-<rank>.live
 * holds, then remove the latter. Called by `hpml prof merge` in its own process (the
 * library opened with dlopen, never preloaded there). Returns 0 when done, 1 when there is
 * nothing to do (no such file, or its rank still holds it: it runs), -1 with a message in
 * err when the file cannot be used. */
int hpml_prof_recover(const char *dir, int rank, char *err, size_t errlen)
{
    char path[PATH_MAX], ppath[PATH_MAX], head[512], want[96];
    live_t h;
    struct stat st;
    void *m = MAP_FAILED;
    int lfd, rc = -1;
    ssize_t got;

    if (snprintf(path, sizeof(path), "%s/rank-%d.live", dir, rank) >= (int)sizeof(path) ||
        snprintf(ppath, sizeof(ppath), "%s/rank-%d.prof", dir, rank) >= (int)sizeof(ppath))
        return snprintf(err, errlen, "%s: path too long", dir), -1;
    if ((lfd = open(path, O_RDWR | O_CLOEXEC)) < 0)
        return 1;
    if (flock(lfd, LOCK_EX | LOCK_NB) != 0) {
        close(lfd);
        return 1;
    }
    if (pread(lfd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
        memcmp(h.magic, LIVE_MAGIC, sizeof(LIVE_MAGIC)) != 0 || h.sizes[0] != sizeof(live_t) ||
        h.sizes[1] != sizeof(prof_thread_t) || h.sizes[2] != sizeof(prof_site_t) ||
        h.sizes[3] != sizeof(prof_file_stat_t) || h.rank != rank || fstat(lfd, &st) != 0) {
        snprintf(err, errlen, "%s: not a mapping of this libhpml-prof.so", path);
        goto out;
    }
    if (h.spilled) {
        snprintf(err, errlen, "%s: the mapping was full; the last snapshot stands", path);
        goto out;
    }
    /* The rank file must be this run's: its header names the run. */
    if ((fd = open(ppath, O_RDWR | O_APPEND | O_CLOEXEC)) < 0 ||
        (got = pread(fd, head, sizeof(head) - 1, 0)) <= 0) {
        snprintf(err, errlen, "%s: %s", ppath, strerror(errno));
        goto out;
    }
    head[got] = '\0';
    snprintf(want, sizeof(want), "hpml-prof 1\nr %s %d ", h.run, rank);
    if (strncmp(head, want, strlen(want)) != 0) {
        snprintf(err, errlen, "%s: another run's mapping", path);
        goto out;
    }
    m = mmap((void *)(uintptr_t)h.base, LIVE_SIZE, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_FIXED_NOREPLACE, lfd, 0);
    if (m != (void *)(uintptr_t)h.base) {
        snprintf(err, errlen, "%s: cannot map it at its address", path);
        goto out;
    }
    L = m;
    world_rank = rank;
    hpml__prof_world_size = h.size;
    /* Trace mode: the snapshot reports its counts and region names (no event is recorded
     * here: snapshot() only reads them). */
    hpml__prof_tracing = L->trace != NULL;
    if (L->trace != NULL)
        hpml__prof_trace_state(L->trace);
    /* The time of its last count: the latest thread's last call, on the rank's own clock.
     * Without one (no call counted), the mapping's last write: the kernel updates the
     * file's time at the first write to a page after each write-back, so that is early. */
    {
        uint64_t mt = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec,
                 last = 0;

        for (prof_thread_t *t = L->threads; t != NULL; t = t->next)
            last = t->last_ns > last ? t->last_ns : last;
        fixed_elapsed = last > L->start_mono ? last - L->start_mono
                        : mt > h.start_real  ? mt - h.start_real
                                             : 1;
    }
    /* A snapshot cut off mid-line: start on a line of its own. */
    if (fstat(fd, &st) == 0 && st.st_size > 0 && pread(fd, head, 1, st.st_size - 1) == 1 &&
        head[0] != '\n')
        outf("\n");
    snapshot("killed", 0);
    recover_trace(dir, rank);
    unlink(path);
    rc = 0;
out:
    if (m != MAP_FAILED && m != NULL)
        munmap(m, LIVE_SIZE);
    L = &live_static;
    fixed_elapsed = 0;
    hpml__prof_tracing = 0; /* the adopted trace state is not read again */
    if (fd >= 0)
        close(fd);
    fd = -1;
    close(lfd);
    return rc;
}
