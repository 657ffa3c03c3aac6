/*
 * The node shared-memory segment (MPI_Win_allocate_shared over the node-local
 * communicator, created on first use) and registered buffers (hpml_comm_alloc_shared).
 * Every local rank owns a part: a control block of step counters, then `nbuf` pipeline
 * buffers of `chunk_bytes`. Synchronisation is by C11 acquire/release on the counters,
 * never by MPI barriers.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "comm/comm_internal.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#define DEFAULT_CHUNK ((size_t)256 << 10)
#define DEFAULT_NBUF  4
/* Up to this many bytes the shm allreduce takes one step in which every rank reduces the
 * whole vector (one synchronisation instead of two per chunk). */
#define DEFAULT_SMALL ((size_t)16 << 10)

int hpml__parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v;
    unsigned shift = 0;

    if (s == NULL || *s == '\0')
        return -1;
    v = strtoull(s, &end, 10);
    if (*end == 'K' || *end == 'k')
        shift = 10, end++;
    else if (*end == 'M' || *end == 'm')
        shift = 20, end++;
    else if (*end == 'G' || *end == 'g')
        shift = 30, end++;
    /* Sizes are rounded up to cache lines: keep far from overflow (at most 2^48 bytes). */
    if (*end != '\0' || v == 0 || v > ((unsigned long long)1 << 48) >> shift)
        return -1;
    *out = (size_t)(v << shift);
    return 0;
}

/* A store mode forced by the environment: plain 0, streaming 1, or -1 (unset, or not 0
 * or 1: warned about, with what happens instead). */
static int env_store_mode(const char *name, const char *otherwise)
{
    const char *v = getenv(name);

    if (v != NULL && (strcmp(v, "0") == 0 || strcmp(v, "1") == 0))
        return *v - '0';
    if (v != NULL && *v != '\0')
        HPML_LOG(HPML_LOG_WARN, "%s='%s' is not 0 or 1; %s", name, v, otherwise);
    return -1;
}

static size_t env_size(const char *name, size_t def)
{
    const char *s = getenv(name);
    size_t v;

    if (s == NULL || *s == '\0')
        return def;
    if (hpml__parse_size(s, &v) != 0) {
        HPML_LOG(HPML_LOG_WARN, "%s='%s' is not a size from 1 byte to 256T; using %zu", name, s,
                 def);
        return def;
    }
    return v;
}

/* Every rank's part starts on a page boundary. MPI only promises the alignment of the
 * datatype: Open MPI 4.1 (osc/sm) returns parts that start 264 bytes into a page, 8 bytes
 * past a cache line, so every pipeline buffer, and every slice of it, straddled cache
 * lines (split vector loads and stores, two lines per line of data moved between the
 * cores); MPICH's are page-aligned. A part is mapped at the same offset within a page in
 * every process (the mappings are page-aligned views of one segment), so each process
 * rounds its view of each part up by the same amount. */
#define SHM_ALIGN ((size_t)4096)

static char *align_up(char *p)
{
    return p + ((SHM_ALIGN - (uintptr_t)p % SHM_ALIGN) % SHM_ALIGN);
}

/* Allocate one shared window over comm->local with `bytes` per rank. Collective. */
static int win_create(hpml_comm_t *comm, size_t bytes, hpml_shm_win_t *w)
{
    MPI_Info info = MPI_INFO_NULL;
    MPI_Aint sz;
    int rc = 0, du;
    char *base;

    w->win = MPI_WIN_NULL;
    w->peer = calloc((size_t)comm->local_size, sizeof(char *));
    if (w->peer == NULL)
        return HPML_ERR_NOMEM;
    w->bytes = bytes;
    /* Each rank's part on its own pages (first touch by its owner). */
    HPML__MPI(MPI_Info_create(&info));
    HPML__MPI(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
    HPML__MPI(MPI_Win_allocate_shared((MPI_Aint)(bytes + SHM_ALIGN - 1), 1, info, comm->local,
                                      &base, &w->win));
    w->base = align_up(base);
    for (int i = 0; i < comm->local_size; i++) {
        void *p;

        HPML__MPI(MPI_Win_shared_query(w->win, i, &sz, &du, &p));
        w->peer[i] = align_up(p);
    }
    /* A passive epoch for the whole lifetime: the counters are accessed with C11
     * atomics, which MPI's unified memory model for shared windows permits. */
    HPML__MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, w->win));
out:
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    if (rc != 0) {
        if (w->win != MPI_WIN_NULL)
            MPI_Win_free(&w->win);
        free(w->peer);
        w->peer = NULL;
    }
    return rc;
}

static void win_free(hpml_shm_win_t *w)
{
    if (w->win != MPI_WIN_NULL) {
        MPI_Win_unlock_all(w->win);
        MPI_Win_free(&w->win);
    }
    free(w->peer);
    w->peer = NULL;
}

/* Can every local rank read its neighbour's memory with process_vm_readv (same uid, no
 * ptrace restriction, a kernel with CMA)? Each rank reads the next rank's ctrl block
 * through CMA and compares it with the mapped copy; the answer is agreed on by all local
 * ranks (MPI_MIN) so that they all take the same path. HPML_SHM_CMA=0 turns CMA off.
 * Returns an MPI error code. */
static int cma_probe(hpml_comm_t *comm, hpml_shm_t *s)
{
    const char *env = getenv("HPML_SHM_CMA");
    hpml_shm_ctrl_t *me = hpml__shm_ctrl(s, comm->local_rank), *next, got;
    int ok = env == NULL || strcmp(env, "0") != 0, all = 0, mrc;

    if (comm->local_size == 1)
        ok = 0;
    me->cma_pid = (int64_t)getpid();
    me->cma_addr = (uint64_t)(uintptr_t)me;
    if ((mrc = MPI_Barrier(comm->local)) != MPI_SUCCESS)
        return mrc;
    next = hpml__shm_ctrl(s, (comm->local_rank + 1) % comm->local_size);
    if (ok && (hpml__cma_read(next->cma_pid, &got, next->cma_addr, sizeof(got)) != 0 ||
               got.cma_pid != next->cma_pid))
        ok = 0;
    if ((mrc = MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm->local)) != MPI_SUCCESS)
        return mrc;
    s->cma = all;
    HPML_LOG(HPML_LOG_DEBUG, "cross-memory attach %s", all ? "available" : "not available");
    return MPI_SUCCESS;
}

int hpml__cma_read(int64_t pid, void *local, uint64_t remote, size_t bytes)
{
    char *l = local;

    /* The kernel may copy less than asked (it pins the pages in batches): continue. */
    while (bytes > 0) {
        struct iovec li = {l, bytes}, ri = {(void *)(uintptr_t)remote, bytes};
        ssize_t k = process_vm_readv((pid_t)pid, &li, 1, &ri, 1, 0);

        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            return hpml_set_error(HPML_ERR_STATE, "process_vm_readv: %s",
                                  k < 0 ? strerror(errno) : "no progress");
        }
        l += k, remote += (uint64_t)k, bytes -= (size_t)k;
    }
    return 0;
}

int hpml__cma_write(int64_t pid, uint64_t remote, const void *local, size_t bytes)
{
    const char *l = local;

    while (bytes > 0) {
        struct iovec li = {(void *)(uintptr_t)l, bytes}, ri = {(void *)(uintptr_t)remote, bytes};
        ssize_t k = process_vm_writev((pid_t)pid, &li, 1, &ri, 1, 0);

        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            return hpml_set_error(HPML_ERR_STATE, "process_vm_writev: %s",
                                  k < 0 ? strerror(errno) : "no progress");
        }
        l += k, remote += (uint64_t)k, bytes -= (size_t)k;
    }
    return 0;
}

/* Copy with non-temporal (streaming) stores: whole lines go to memory without first
 * taking them from the cache that holds them (the peer's, after it read them). */
static void copy_nt(char *dst, const char *src, size_t n)
{
#if defined(__x86_64__)
    size_t head = (size_t)(-(uintptr_t)dst & 63); /* whole lines from here on */

    if (n < 256) {
        memcpy(dst, src, n);
        return;
    }
    memcpy(dst, src, head);
    dst += head, src += head, n -= head;
    for (; n >= 64; dst += 64, src += 64, n -= 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)src),
                b = _mm_loadu_si128((const __m128i *)(src + 16)),
                c = _mm_loadu_si128((const __m128i *)(src + 32)),
                d = _mm_loadu_si128((const __m128i *)(src + 48));
        _mm_stream_si128((__m128i *)dst, a);
        _mm_stream_si128((__m128i *)(dst + 16), b);
        _mm_stream_si128((__m128i *)(dst + 32), c);
        _mm_stream_si128((__m128i *)(dst + 48), d);
    }
    memcpy(dst, src, n);
    _mm_sfence(); /* the streaming stores are ordered before the release that follows */
#else
    memcpy(dst, src, n);
#endif
}

/*
 * A pipeline buffer is rewritten while the peers still hold its lines from reading it
 * the last time, so every plain store first has to take its line from their caches. On
 * this project's VMs that costs from almost nothing to most of the time: a 1 MiB 2-rank
 * allreduce took 80 µs one run and 650 µs the next (with MPI_Allreduce going from 190
 * to 800 µs alongside), depending on where the host puts the virtual CPUs and pages.
 * Streaming stores write whole lines without taking them: steady, but the peers then
 * read from memory instead of from the writer's cache (1 MiB 120-155 µs in both
 * states). Timing the copies alone favours streaming even when it loses on the reading
 * side, so a rank times whole operations: per size class it keeps a moving average of
 * seconds per byte in each mode, runs the faster one, and tries the other one every
 * MODE_PROBE calls to follow the machine. The first MODE_WARM calls of a class alternate
 * the modes in pairs and start each average at the median of its 3 counted samples: a
 * single first sample per mode (one page fault, one descheduled peer) used to choose the
 * mode for the next 128 calls, which for `hpml bench`-style runs of 20-30 calls of a size
 * was all of them. The local ranks publish their averages in their control blocks and
 * all choose from the sums, so they agree (each choosing alone, near a tie they could
 * split, with every rank then paying for the other's mode); streaming is chosen only
 * when it is clearly faster (MODE_BIAS), because where plain stores win they win by
 * about 2x (1 MiB: 75-120 µs against 143-169 µs) while where streaming wins it wins by
 * 4-5x, so a near tie is noise. Every local rank makes the same calls in the
 * same order, so they probe together. The mode changes no result. HPML_SHM_NT=0 or 1
 * fixes it.
 * A class that goes unused for MODE_STALE steps (calls of other sizes; the step count is
 * the same on every local rank, so they agree) after a run of at least MODE_RUN calls
 * warms up again: the state of the machine flips within seconds, and a figure from
 * before the gap kept the wrong mode for the next run of calls of a size until its
 * probe, 128 calls on. Blocks of 60 calls of 1 MiB after 20,000 small calls, against
 * both fixed modes in the same rounds (tests/perf/store_mode.c, 6 runs of 200 blocks):
 * the picker's block was more than 1.25x slower than the better fixed mode's in 4-17
 * blocks per run (61 in all) without this rule, 0-8 (23 in all) with it. A class used
 * now and then, in runs shorter than MODE_RUN, keeps its figures: warming up at each of
 * its calls would run half of them in the slower mode.
 */
#define MODE_MIN   ((size_t)64 << 10) /* smaller operations use plain stores */
#define MODE_PROBE 128u
#define MODE_WARM  12u /* P P N N P P N N P P N N: 3 counted samples of each mode */
#define MODE_BIAS  0.8 /* streaming when its cost is below this fraction of plain's */
#define MODE_STALE ((uint64_t)1 << 14)
#define MODE_RUN   (2 * MODE_WARM)

/* My cost of mode m in class c, for the peers' choices. */
static void publish(hpml_shm_t *s, int c, int m, double v)
{
    atomic_store_explicit(&hpml__shm_ctrl(s, s->local_rank)->mode_cost[c][m], (float)v,
                          memory_order_relaxed);
}

static double median3(const double *v)
{
    double lo = v[0] < v[1] ? v[0] : v[1], hi = v[0] < v[1] ? v[1] : v[0];

    return v[2] < lo ? lo : v[2] > hi ? hi : v[2];
}

static int mode_class(size_t bytes)
{
    int c = 0;

    for (bytes >>= 18; bytes > 0 && c < HPML_SHM_MODE_CLASSES - 1; bytes >>= 2)
        c++;
    return c; /* [64K, 256K), [256K, 1M), [1M, 4M), [4M, 16M), 16M and more */
}

int hpml__shm_mode_pick(hpml_shm_t *s, size_t bytes)
{
    double *cost;
    unsigned n;
    int c, best;

    if (s->nt >= 0)
        return s->nt;
    if (bytes < MODE_MIN)
        return 0;
    c = mode_class(bytes);
    if (s->mode_calls[c] > 0 && s->step - s->mode_step[c] > MODE_STALE) {
        if (s->mode_run[c] >= MODE_RUN)
            s->mode_calls[c] = 0, s->mode_last[c] = 0; /* warm up again */
        s->mode_run[c] = 0;
    }
    s->mode_run[c]++;
    s->mode_step[c] = s->step;
    cost = s->mode_cost[c];
    n = s->mode_calls[c]++;
    if (n < MODE_WARM)
        return (int)((n >> 1) & 1u);
    {
        double sum[2] = {0, 0};
        int all = 1;

        for (int k = 0; k < s->local_size && all; k++)
            for (int m = 0; m < 2; m++) {
                float v = atomic_load_explicit(&hpml__shm_ctrl(s, k)->mode_cost[c][m],
                                               memory_order_relaxed);
                all &= v > 0;
                sum[m] += v;
            }
        if (!all) /* a peer has not published this class yet */
            sum[0] = cost[0], sum[1] = cost[1];
        best = sum[1] < MODE_BIAS * sum[0];
    }
    /* Two calls of the other mode every MODE_PROBE: the first pays for the change of
     * mode (lines left in the other state) and is not counted. */
    return n % MODE_PROBE < 2 ? !best : best;
}

void hpml__shm_mode_record(hpml_shm_t *s, size_t bytes, int nt, double seconds)
{
    double *cost, v = seconds / (double)bytes;
    int c;

    if (s->nt >= 0 || bytes < MODE_MIN)
        return;
    c = mode_class(bytes);
    cost = s->mode_cost[c];
    nt = nt != 0;
    if (s->mode_last[c] != nt + 1) {
        s->mode_last[c] = nt + 1; /* the first call after a change of mode */
        return;
    }
    if (s->mode_calls[c] <= MODE_WARM) {
        /* Warm-up call n = mode_calls - 1 (odd: the second of its pair) is sample n / 4
         * of its mode; after the last one both averages start at their medians. */
        unsigned k = (s->mode_calls[c] - 1) / 4;

        if (k < 3)
            s->mode_warm[c][nt][k] = v;
        if (s->mode_calls[c] == MODE_WARM)
            for (int m = 0; m < 2; m++) {
                cost[m] = median3(s->mode_warm[c][m]);
                publish(s, c, m, cost[m]);
            }
        return;
    }
    /* The mode in use follows a moving average; a probe of the other one (the second
     * call of a probe pair: the first is not counted) replaces its figure, which is many
     * calls old. */
    if ((s->mode_calls[c] - 1) % MODE_PROBE < 2)
        cost[nt] = v;
    else
        cost[nt] = 0.75 * cost[nt] + 0.25 * v;
    publish(s, c, nt, cost[nt]);
}

/*
 * The caller's output is another matter. Up to a few MiB the local ranks' inputs and
 * outputs stay in the last-level cache from one call to the next, and plain stores keep
 * the output there for whatever reads it next: streaming stores would send it to memory
 * (f32 sum at 2 ranks, 1 MiB: 116-144 µs streaming against 81-109 µs plain). Once the
 * buffers of all local ranks together pass about half that cache, they no longer stay
 * in it: every plain store then first reads its line from memory only to overwrite it,
 * and streaming stores skip that read (16 MiB: 2,566-2,963 µs against 2,974-3,452 µs,
 * 9-15% faster in every pair measured; 6 MiB, 24 MiB of buffers against a 32 MiB
 * cache, 1-9%; 4 MiB, 16 MiB of buffers, 6% faster to 18% slower). The cache size is
 * hpml_cpu_llc_bytes(); unknown, outputs stay plain.
 */
int hpml__shm_out_nt(const hpml_shm_t *s, size_t touched)
{
    if (s->out_nt >= 0)
        return s->out_nt;
    return s->llc_bytes > 0 && touched > s->llc_bytes / 2 / (size_t)s->local_size;
}

void hpml__shm_copy(void *dst, const void *src, size_t n, int nt)
{
    if (nt)
        copy_nt(dst, src, n);
    else
        memcpy(dst, src, n);
}

int hpml__shm_get(hpml_comm_t *comm, hpml_shm_t **out)
{
    hpml_shm_t *s = NULL;
    int rc = 0;

    if (comm->shm != NULL) {
        *out = comm->shm;
        return 0;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return HPML_ERR_NOMEM;
    /* Same environment on every rank, so the same sizes. */
    s->local_size = comm->local_size;
    s->local_rank = comm->local_rank;
    s->chunk_bytes = (env_size("HPML_SHM_CHUNK", DEFAULT_CHUNK) + 63) & ~(size_t)63;
    s->nbuf = (int)env_size("HPML_SHM_NBUF", DEFAULT_NBUF);
    s->small_bytes = env_size("HPML_SHM_SMALL", DEFAULT_SMALL);
    s->nt = env_store_mode("HPML_SHM_NT", "measuring both");
    s->out_nt = env_store_mode("HPML_SHM_OUT_NT", "choosing by size");
    s->llc_bytes = hpml_cpu_llc_bytes();
    if (s->nbuf < 3) /* allreduce_shm.c relies on 3 buffers to skip "buffer free" waits */
        s->nbuf = 3;
    {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);

        s->spin =
            (unsigned)env_size("HPML_SHM_SPIN", cpus > 0 && comm->local_size > cpus ? 256 : 20000);
    }
    rc = win_create(comm, HPML_SHM_CTRL_BYTES + (size_t)s->nbuf * s->chunk_bytes, &s->w);
    if (rc != 0)
        goto out;
    s->w.id = -1;
    /* The whole part, not only the control block: the owner's first touch places its
     * pages, and after the barrier every rank maps every peer's pages now rather than by
     * page faults inside the first collectives (allreduce_shm.c spreads small calls over
     * the whole scratch space). */
    memset(s->w.base, 0, s->w.bytes);
    atomic_thread_fence(memory_order_seq_cst);
    HPML__MPI(MPI_Win_sync(s->w.win));
    HPML__MPI(MPI_Barrier(comm->local));
    HPML__MPI(MPI_Win_sync(s->w.win));
    for (int i = 0; i < comm->local_size; i++)
        for (size_t o = 0; i != comm->local_rank && o < s->w.bytes; o += 4096)
            (void)*(volatile char *)(s->w.peer[i] + o);
    HPML__MPI(cma_probe(comm, s));
    comm->shm = s;
    *out = s;
    s = NULL;
out:
    if (s != NULL) {
        if (s->w.peer != NULL)
            win_free(&s->w);
        free(s);
    }
    return rc;
}

void hpml__shm_destroy(hpml_comm_t *comm)
{
    if (comm->shm == NULL)
        return;
    win_free(&comm->shm->w);
    free(comm->shm);
    comm->shm = NULL;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

_Thread_local int (*hpml__shm_urgent)(void *arg);
_Thread_local void *hpml__shm_urgent_arg;

void hpml__shm_wait(_Atomic uint64_t *c, uint64_t v, unsigned spin)
{
    unsigned spins = 0;

    while (atomic_load_explicit(c, memory_order_acquire) < v) {
        /* Spin (a peer on another core answers within a microsecond), then yield so an
         * oversubscribed peer can run. Yielding early costs a time slice whenever another
         * process shares the core, so only oversubscribed nodes yield early, and progress
         * threads while nobody waits for them: a slow peer then costs their caller's
         * computation nothing. */
        if (++spins < spin && !(spins > HPML_SHM_LAZY_SPIN && hpml__shm_lazy()))
            cpu_relax();
        else
            sched_yield();
    }
}

void hpml__shm_wait_all(hpml_comm_t *comm, hpml_shm_t *s, size_t which, uint64_t v)
{
    for (int i = 0; i < comm->local_size; i++)
        if (i != comm->local_rank)
            hpml__shm_wait((_Atomic uint64_t *)((char *)hpml__shm_ctrl(s, i) + which), v, s->spin);
}

int hpml__shm_lookup(hpml_comm_t *comm, const void *p, size_t bytes, int *win, size_t *off)
{
    const char *c = p;

    for (hpml_shm_win_t *w = comm->registered; w != NULL; w = w->next) {
        if (c >= w->base && c <= w->base + w->bytes && bytes <= (size_t)(w->base + w->bytes - c)) {
            *win = w->id;
            *off = (size_t)(c - w->base);
            return 1;
        }
    }
    return 0;
}

char *hpml__shm_addr(hpml_comm_t *comm, int win, int lr, size_t off)
{
    for (hpml_shm_win_t *w = comm->registered; w != NULL; w = w->next)
        if (w->id == win)
            return w->peer[lr] + off;
    return NULL;
}

void *hpml_comm_alloc_shared(hpml_comm_t *comm, size_t bytes)
{
    hpml_shm_win_t *w;

    if (comm == NULL)
        return NULL;
    if (comm->check && hpml__check(comm, HPML__KIND_ALLOC_SHARED, bytes, -1, -1, -1) != 0)
        return NULL;
    w = calloc(1, sizeof(*w));
    if (w == NULL)
        return NULL;
    /* At least one cache line so that every buffer has a distinct address. */
    if (win_create(comm, bytes < 64 ? 64 : (bytes + 63) & ~(size_t)63, w) != 0) {
        free(w);
        return NULL;
    }
    w->id = comm->nregistered++;
    w->next = comm->registered;
    comm->registered = w;
    return w->base;
}

void hpml_comm_free_shared(hpml_comm_t *comm, void *p)
{
    hpml_shm_win_t **pp;

    if (comm == NULL || p == NULL)
        return;
    for (pp = &comm->registered; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->base == p) {
            hpml_shm_win_t *w = *pp;

            *pp = w->next;
            win_free(w);
            free(w);
            return;
        }
    }
}

void *hpml_comm_shared_peer(hpml_comm_t *comm, const void *p, int local_rank)
{
    int win;
    size_t off;

    if (comm == NULL || p == NULL || local_rank < 0 || local_rank >= comm->local_size ||
        !hpml__shm_lookup(comm, p, 1, &win, &off))
        return NULL;
    return hpml__shm_addr(comm, win, local_rank, off);
}

int hpml_comm_node_sync(hpml_comm_t *comm)
{
    hpml_shm_t *s;
    hpml_shm_ctrl_t *me;
    uint64_t g;
    int rc;

    if (comm == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_comm_node_sync: NULL communicator");
    if (comm->check && (rc = hpml__check(comm, HPML__KIND_NODE_SYNC, 0, -1, -1, -1)) != 0)
        return rc;
    if (comm->local_size == 1)
        return 0;
    if ((rc = hpml__shm_get(comm, &s)) != 0)
        return rc;
    /* One step of the segment's protocol that reads no pipeline buffer, so this rank is
     * done with it as soon as it starts: `done` goes up with `arrived`, and the release of
     * `arrived` publishes every store this rank made before. */
    g = s->step;
    me = hpml__shm_ctrl(s, comm->local_rank);
    atomic_store_explicit(&me->done, g + 1, memory_order_release);
    atomic_store_explicit(&me->arrived, g + 1, memory_order_release);
    hpml__shm_wait_all(comm, s, offsetof(hpml_shm_ctrl_t, arrived), g + 1);
    s->synced = g + 1;
    s->step = g + 1;
    return 0;
}
