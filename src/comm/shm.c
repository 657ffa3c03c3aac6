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
#include "comm/shm_internal.h"
#include "core/settings_internal.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#define DEFAULT_CHUNK ((size_t)256 << 10)
#define DEFAULT_NBUF  4
/* Up to this many bytes the shm allreduce takes one step in which every rank reduces the
 * whole vector (one synchronisation instead of two per chunk). */
#define DEFAULT_SMALL ((size_t)16 << 10)

size_t hpml__shm_default_chunk(void)
{
    return DEFAULT_CHUNK;
}

int hpml__shm_default_nbuf(void)
{
    return DEFAULT_NBUF;
}

/* A setting of the communicator's, or def when unset. */
static uint64_t setting(const hpml_comm_t *comm, hpml__setting_id_t id, uint64_t def)
{
    return comm->set.set[id] ? comm->set.value[id] : def;
}

/* A store mode forced by the environment: plain 0, streaming 1, or -1 (unset: measured). */
static int store_mode(const hpml_comm_t *comm, hpml__setting_id_t id)
{
    return comm->set.set[id] ? (int)comm->set.value[id] : -1;
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
    hpml_shm_ctrl_t *me = hpml__shm_ctrl(s, comm->local_rank), *next, got;
    int ok = setting(comm, HPML__S_SHM_CMA, 1) != 0, all = 0, mrc;

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
 * Store modes: an shm allreduce writes the pipeline buffers that peers read (knob 0) and,
 * in large size classes, the caller's output (knob 1) with plain stores or with streaming
 * stores, which write whole lines without first taking them from the peer's cache or
 * reading them from memory. Which is faster depends on the host and changes within
 * minutes, so each knob is measured per size class (docs/decisions/store-modes.md):
 * - whole operations are timed, not the copies (streaming copies look fast even when the
 *   reader then loses); knob 1 only where the node's outputs reach an eighth of the
 *   last-level cache, and only from the class's call OUT_START;
 * - MODE_WARM calls alternate the modes in pairs (the first call after a change of modes
 *   is never counted), then a moving average of the mode in use, with the other mode
 *   probed every MODE_PROBE calls; only one knob is off its choice in any call;
 * - a mode changes only after both are measured anew side by side, since a passing
 *   slowdown lands in the average of the mode in use alone;
 * - the local ranks choose together from the sums of their published figures, streaming
 *   only below mode_bias of plain;
 * - a class idle for MODE_STALE steps after a run of MODE_RUN calls warms up again.
 * HPML_SHM_NT and HPML_SHM_OUT_NT fix either knob. No mode changes a result.
 */
#define MODE_MIN   ((size_t)64 << 10) /* smaller operations use plain stores */
#define MODE_PROBE 128u
#define MODE_WARM  12u /* P P N N P P N N P P N N: 3 counted samples of each mode */
#define MODE_STALE ((uint64_t)1 << 14)
#define MODE_RUN   (2 * MODE_WARM)
#define MODE_FRESH 4u /* a figure measured within this many calls of its knob is current */
#define OUT_START  (MODE_PROBE / 2) /* the output's knob waits for this many calls */

/* Streaming when its cost is below this fraction of plain's: pipeline, output. */
static const double mode_bias[HPML_SHM_KNOBS] = {0.8, 0.95};

/* What one call measures for a knob (pend_role). */
enum { ROLE_NONE, ROLE_WARM, ROLE_PROBE, ROLE_AVG };

/* My cost of mode m of knob k in class c, for the peers' choices. */
static void publish(hpml_shm_t *s, int c, int k, int m)
{
    atomic_store_explicit(&hpml__shm_ctrl(s, s->local_rank)->mode_cost[c][k][m],
                          (float)s->mode_cost[c][k][m], memory_order_relaxed);
}

/* The median of the warm-up samples that were taken (0 when none was: a call that came
 * right after a change of modes, such as a probe of the other knob, is not a sample). */
static double warm_value(const double *v)
{
    double a[3];
    int n = 0;

    for (int i = 0; i < 3; i++)
        if (v[i] > 0)
            a[n++] = v[i];
    if (n == 3) {
        double lo = a[0] < a[1] ? a[0] : a[1], hi = a[0] < a[1] ? a[1] : a[0];

        return a[2] < lo ? lo : a[2] > hi ? hi : a[2];
    }
    return n == 2 ? (a[0] + a[1]) / 2 : n == 1 ? a[0] : 0;
}

static int mode_class(size_t bytes)
{
    int c = 0;

    for (bytes >>= 18; bytes > 0 && c < HPML_SHM_MODE_CLASSES - 1; bytes >>= 2)
        c++;
    return c; /* [64K, 256K), [256K, 1M), [1M, 4M), [4M, 16M), 16M and more */
}

/* Is the output's knob measured in class c (see above)? */
static int out_class(const hpml_shm_t *s, int c)
{
    size_t lo = MODE_MIN << (2 * c); /* the class's smallest operation */

    if (s->llc_bytes == 0)
        return lo >= ((size_t)4 << 20);
    return lo * (size_t)s->local_size >= s->llc_bytes / 8;
}

/* The local ranks' choice for knob k of class c, from the sums of their costs, or from
 * mine while a peer has not published its own; plain while a mode has no figure. */
static int knob_best(hpml_shm_t *s, int c, int k)
{
    double sum[2] = {0, 0};
    int all = 1;

    for (int r = 0; r < s->local_size && all; r++)
        for (int m = 0; m < 2; m++) {
            float v = atomic_load_explicit(&hpml__shm_ctrl(s, r)->mode_cost[c][k][m],
                                           memory_order_relaxed);
            all &= v > 0;
            sum[m] += v;
        }
    if (!all) /* a peer has not published this class yet */
        sum[0] = s->mode_cost[c][k][0], sum[1] = s->mode_cost[c][k][1];
    return sum[0] > 0 && sum[1] > 0 && sum[1] < mode_bias[k] * sum[0];
}

int hpml__shm_mode_pick(hpml_shm_t *s, size_t bytes, int out_ok)
{
    int live[HPML_SHM_KNOBS], modes = 0, active = -1, c;
    unsigned calls;

    s->pend_class = -1;
    if (s->nt > 0)
        modes |= HPML_SHM_MODE_PIPE;
    if (out_ok && s->out_nt > 0)
        modes |= HPML_SHM_MODE_OUT;
    if (bytes < MODE_MIN)
        return modes;
    c = mode_class(bytes);
    live[0] = s->nt < 0;
    live[1] = out_ok && s->out_nt < 0 && out_class(s, c);
    if (!live[0] && !live[1])
        return modes;
    if (s->mode_last[c] != 0 && s->step - s->mode_step[c] > MODE_STALE) {
        if (s->mode_run[c] >= MODE_RUN) { /* warm up again */
            memset(s->mode_calls[c], 0, sizeof(s->mode_calls[c]));
            memset(s->mode_cur[c], 0, sizeof(s->mode_cur[c]));
            s->mode_class_calls[c] = 0;
            s->mode_last[c] = 0;
        }
        s->mode_run[c] = 0;
    }
    s->mode_run[c]++;
    s->mode_step[c] = s->step;
    calls = s->mode_class_calls[c]++;
    /* Knob 0 first. Knob 1 waits at its choice (plain before it has one), its count
     * standing still, until the class's call OUT_START and while knob 0 warms up or
     * probes. */
    for (int k = 0; k < HPML_SHM_KNOBS; k++) {
        unsigned n;
        int m = 0;

        s->pend_role[k] = ROLE_NONE;
        if (!live[k])
            continue;
        if (active >= 0 || (k == 1 && calls < OUT_START)) {
            m = s->mode_cur[c][k];
        } else if ((n = s->mode_calls[c][k]++) < MODE_WARM) {
            if (n == 0)
                memset(s->mode_warm[c][k], 0, sizeof(s->mode_warm[c][k]));
            m = (int)((n >> 1) & 1u);
            s->pend_role[k] = ROLE_WARM;
            active = k;
        } else {
            int cur = s->mode_cur[c][k], best = knob_best(s, c, k);
            const unsigned *seen = s->mode_seen[c][k];

            /* Two calls of the other mode every MODE_PROBE (the first pays for the change
             * of mode and is not counted); and before changing, both modes measured anew,
             * the other one first (see above). */
            if (n % MODE_PROBE < 2)
                m = !cur;
            else if (best != cur && n - seen[best] > MODE_FRESH)
                m = best;
            else if (best != cur && seen[cur] < seen[best])
                m = cur;
            else
                m = -1;
            if (m >= 0) {
                s->pend_role[k] = ROLE_PROBE;
                active = k;
            } else {
                m = s->mode_cur[c][k] = best;
                s->pend_role[k] = ROLE_AVG;
            }
        }
        if (m)
            modes |= k == 0 ? HPML_SHM_MODE_PIPE : HPML_SHM_MODE_OUT;
    }
    for (int k = 0; k < HPML_SHM_KNOBS; k++)
        if (active >= 0 && k != active)
            s->pend_role[k] = ROLE_NONE; /* the other knob is off its choice */
    s->pend_class = c;
    s->pend_modes = modes;
    return modes;
}

void hpml__shm_mode_record(hpml_shm_t *s, size_t bytes, double seconds)
{
    int c = s->pend_class, changed;
    double v = seconds / (double)bytes;

    s->pend_class = -1;
    if (c < 0)
        return;
    changed = s->mode_last[c] != s->pend_modes + 1;
    s->mode_last[c] = s->pend_modes + 1;
    for (int k = 0; k < HPML_SHM_KNOBS; k++) {
        double *cost = s->mode_cost[c][k];
        unsigned *seen = s->mode_seen[c][k];
        int m = (s->pend_modes >> k) & 1; /* HPML_SHM_MODE_PIPE is bit 0, _OUT bit 1 */

        switch (s->pend_role[k]) {
        case ROLE_WARM:
            /* Warm-up call n (the second of its pair; the knob's count went up at the
             * pick) is sample n / 4 of its mode; after the last one both averages start
             * at their medians. */
            if (!changed)
                s->mode_warm[c][k][m][(s->mode_calls[c][k] - 1) / 4] = v;
            if (s->mode_calls[c][k] == MODE_WARM)
                for (int q = 0; q < 2; q++) {
                    cost[q] = warm_value(s->mode_warm[c][k][q]);
                    seen[q] = s->mode_calls[c][k];
                    publish(s, c, k, q);
                }
            break;
        case ROLE_PROBE:
            /* A probe replaces the mode's figure, which is many calls old. */
            if (!changed) {
                cost[m] = v;
                seen[m] = s->mode_calls[c][k];
                publish(s, c, k, m);
            }
            break;
        case ROLE_AVG:
            /* The mode in use follows a moving average (which a passing slowdown can
             * raise: it is not a measurement that may change the mode). */
            if (!changed) {
                cost[m] = cost[m] > 0 ? 0.75 * cost[m] + 0.25 * v : v;
                publish(s, c, k, m);
            }
            break;
        default: break;
        }
    }
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
    s->chunk_bytes = (setting(comm, HPML__S_SHM_CHUNK, DEFAULT_CHUNK) + 63) & ~(size_t)63;
    /* At least 3 (the registry's minimum): allreduce_shm.c relies on 3 buffers to skip
     * "buffer free" waits. */
    s->nbuf = (int)setting(comm, HPML__S_SHM_NBUF, DEFAULT_NBUF);
    s->small_bytes = setting(comm, HPML__S_SHM_SMALL, DEFAULT_SMALL);
    s->nt = store_mode(comm, HPML__S_SHM_NT);
    s->out_nt = store_mode(comm, HPML__S_SHM_OUT_NT);
    s->llc_bytes = hpml_cpu_llc_bytes();
    s->pend_class = -1;
    {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);

        s->spin = (unsigned)setting(comm, HPML__S_SHM_SPIN,
                                    cpus > 0 && comm->local_size > cpus ? 256 : 20000);
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
