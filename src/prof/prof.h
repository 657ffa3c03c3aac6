/*
 * libhpml-prof.so's private interface: the per-thread tables the wrappers fill, the
 * communicator cache that turns a communicator's ranks into world ranks, and the
 * snapshots written to each rank's append-only file (docs/prof.md gives the format).
 */
#ifndef HPML_PROF_H
#define HPML_PROF_H

#include <mpi.h>
#include <stdint.h>
#include <time.h>

/* Every function the library interposes, in report order: X(name, has_bytes). */
#define PROF_CALLS(X)                                                                              \
    X(MPI_Send, 1)                                                                                 \
    X(MPI_Ssend, 1)                                                                                \
    X(MPI_Bsend, 1)                                                                                \
    X(MPI_Rsend, 1)                                                                                \
    X(MPI_Isend, 1)                                                                                \
    X(MPI_Issend, 1)                                                                               \
    X(MPI_Ibsend, 1)                                                                               \
    X(MPI_Irsend, 1)                                                                               \
    X(MPI_Recv, 1)                                                                                 \
    X(MPI_Irecv, 1)                                                                                \
    X(MPI_Sendrecv, 1)                                                                             \
    X(MPI_Sendrecv_replace, 1)                                                                     \
    X(MPI_Probe, 0)                                                                                \
    X(MPI_Iprobe, 0)                                                                               \
    X(MPI_Wait, 0)                                                                                 \
    X(MPI_Waitall, 0)                                                                              \
    X(MPI_Waitany, 0)                                                                              \
    X(MPI_Waitsome, 0)                                                                             \
    X(MPI_Test, 0)                                                                                 \
    X(MPI_Testall, 0)                                                                              \
    X(MPI_Testany, 0)                                                                              \
    X(MPI_Testsome, 0)                                                                             \
    X(MPI_Barrier, 0)                                                                              \
    X(MPI_Bcast, 1)                                                                                \
    X(MPI_Reduce, 1)                                                                               \
    X(MPI_Allreduce, 1)                                                                            \
    X(MPI_Scan, 1)                                                                                 \
    X(MPI_Exscan, 1)                                                                               \
    X(MPI_Gather, 1)                                                                               \
    X(MPI_Gatherv, 1)                                                                              \
    X(MPI_Scatter, 1)                                                                              \
    X(MPI_Scatterv, 1)                                                                             \
    X(MPI_Allgather, 1)                                                                            \
    X(MPI_Allgatherv, 1)                                                                           \
    X(MPI_Alltoall, 1)                                                                             \
    X(MPI_Alltoallv, 1)                                                                            \
    X(MPI_Reduce_scatter, 1)                                                                       \
    X(MPI_Reduce_scatter_block, 1)                                                                 \
    X(MPI_Ibarrier, 0)                                                                             \
    X(MPI_Ibcast, 1)                                                                               \
    X(MPI_Ireduce, 1)                                                                              \
    X(MPI_Iallreduce, 1)                                                                           \
    X(MPI_Iallgather, 1)                                                                           \
    X(MPI_Ialltoall, 1)                                                                            \
    X(MPI_Comm_dup, 0)                                                                             \
    X(MPI_Comm_split, 0)                                                                           \
    X(MPI_Comm_split_type, 0)                                                                      \
    X(MPI_Comm_create, 0)                                                                          \
    X(MPI_Comm_free, 0)                                                                            \
    X(MPI_Win_allocate_shared, 1)                                                                  \
    X(MPI_Win_free, 0)                                                                             \
    X(MPI_Init, 0)

enum {
#define PROF_ENUM(name, b) PROF_##name,
    PROF_CALLS(PROF_ENUM)
#undef PROF_ENUM
        PROF_NCALLS
};

/* POSIX and stdio calls counted per file (dup: dup, dup2, dup3, fcntl F_DUPFD*). */
#define PROF_IO_CALLS(X)                                                                           \
    X(open)                                                                                        \
    X(dup)                                                                                         \
    X(read)                                                                                        \
    X(write)                                                                                       \
    X(pread)                                                                                       \
    X(pwrite)                                                                                      \
    X(fsync)                                                                                       \
    X(close)                                                                                       \
    X(fopen)                                                                                       \
    X(fread)                                                                                       \
    X(fwrite)                                                                                      \
    X(fclose)

enum {
#define PROF_IO_ENUM(name) PROF_IO_##name,
    PROF_IO_CALLS(PROF_IO_ENUM)
#undef PROF_IO_ENUM
        PROF_IO_NCALLS
};

/* Size histograms: bin 0 holds 0 bytes, bin k (1..PROF_HBINS-1) holds [2^(k-1), 2^k),
 * the last bin everything from 2^(PROF_HBINS-2) up. */
#define PROF_HBINS 40
/* Communicator groups with a histogram of their own; later ones share the last. */
#define PROF_MAX_GROUPS 64
/* Files with statistics of their own; later ones share the last ("(other files)"). */
#define PROF_MAX_FILES 256

typedef struct {
    uint64_t count, total_ns, min_ns, max_ns, bytes;
} prof_stat_t;

typedef struct {
    prof_stat_t call[PROF_IO_NCALLS];
    uint64_t hist[PROF_HBINS]; /* read and write sizes together */
} prof_file_stat_t;

/* Call sites per thread (open addressing; later sites are counted in the calls only). */
#define PROF_MAX_SITES 2048

/* A call site: the MPI call and one or two return addresses (the caller of MPI_X and,
 * at depth 2, its caller), with the objects they are in, resolved when first seen. */
typedef struct {
    int id, depth;
    void *pc[2];
    const char *obj[2], *sym[2];
    uintptr_t base[2];
    prof_stat_t st;
} prof_site_t;

/* An hpml collective (hpml_prof_coll_enter/leave, called by libhpml's dispatchers): the
 * collective and the algorithm it chose, and the MPI calls made inside it. */
#define PROF_MAX_HCOLL 64
#define PROF_HC_CACHE  4
typedef struct {
    prof_stat_t st;             /* the hpml call: time from enter to leave, its bytes */
    uint64_t mpi_calls, mpi_ns; /* MPI calls made inside, their time */
    uint64_t mpi_bytes, p2p_msgs, p2p_bytes;
} prof_hcoll_t;

/* A trace event (trace mode): times from MPI_Init, the call (an MPI call number, or
 * PROF_TRACE_IO + an I/O call number, or a region's begin or end), the communicator
 * group (the file index for I/O, the region's name index for regions), the world ranks
 * and tags of a point-to-point call's send and receive sides (-1: none). */
typedef struct {
    uint64_t t0, t1, bytes;
    int32_t id, gid, speer, stag, rpeer, rtag, tid, pad;
} prof_event_t;
#define PROF_TRACE_BUF   4096 /* events per thread between writes */
#define PROF_TRACE_IO    1000
#define PROF_TRACE_BEGIN 2000
#define PROF_TRACE_END   2001
/* A receive posted with MPI_Irecv has completed (in MPI_Wait*, MPI_Test*): t0 when it was
 * posted, t1 the middle of the call that completed it, the bytes received, the world
 * rank and tag of the status (rpeer, rtag). Not drawn: `hpml prof merge` matches it. */
#define PROF_TRACE_RECV  2002
#define PROF_MAX_REGIONS 256

/* One thread's counters. Only its thread writes them; a snapshot reads them unlocked
 * (every field only grows, so a snapshot taken meanwhile is at worst a call behind). */
typedef struct prof_thread {
    prof_stat_t call[PROF_NCALLS];
    uint64_t *hist[PROF_MAX_GROUPS]; /* [PROF_NCALLS][PROF_HBINS] each, made when first used */
    uint64_t *msgs, *bytes;          /* [world size]: point-to-point sent to each world rank */
    prof_file_stat_t *files[PROF_MAX_FILES];
    prof_site_t *sites; /* [PROF_MAX_SITES], made when first used */
    prof_hcoll_t hcoll[PROF_MAX_HCOLL];
    int in_hcoll, hcoll_depth; /* the hpml collective being run (index), nesting */
    /* The last hpml collectives entered: their name pointers and index (hcoll_cached). */
    const char *hc_coll[PROF_HC_CACHE], *hc_algo[PROF_HC_CACHE];
    int hc_index[PROF_HC_CACHE], hc_next;
    uint64_t hcoll_t0;
    prof_event_t *ev; /* trace mode: [PROF_TRACE_BUF] */
    int nev, tid;
    struct prof_pending *pending; /* trace mode: receives posted with MPI_Irecv, by request */
    int npending;
    uint64_t self_ns, self_calls; /* HPML_PROF_SELF=1: the bookkeeping's own time, its calls */
    uint64_t last_ns; /* hpml__prof_now() at the end of its last counted call or collective */
    struct prof_thread *next;
} prof_thread_t;

/* A communicator seen by a wrapper: its group (an index into the groups) and, for each
 * of its ranks (the remote group's, for an intercommunicator), the world rank. */
typedef struct prof_comm {
    MPI_Comm handle;
    int gid, size, dead;
    int *world;
    struct prof_comm *next;
} prof_comm_t;

/* Thread-local state in the initial-exec model: the library is always loaded at start-up
 * (LD_PRELOAD), so its TLS sits in the static block and an access is one instruction,
 * not a call to __tls_get_addr on every MPI call. */
#define PROF_TLS __thread __attribute__((tls_model("initial-exec")))

extern int hpml__prof_on;              /* from MPI_Init (the file open) to the last snapshot */
extern uint64_t hpml__prof_next_flush; /* the periodic flush's due time (hpml__prof_now) */
extern int hpml__prof_world_size;

static inline uint64_t hpml__prof_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The calling thread's table (made on first use; NULL only when out of memory). */
prof_thread_t *hpml__prof_thread(void);
/* The cached facts of comm (NULL for MPI_COMM_NULL or when out of memory). */
prof_comm_t *hpml__prof_comm(MPI_Comm comm);
/* comm is being freed: forget its handle. */
void hpml__prof_comm_forget(MPI_Comm comm);

/* Add one call made from return address ra (its call site): its time, its bytes (histogram of
 * comm's group when c != NULL and the call has bytes), and a message of `bytes` to world rank wpeer
 * when wpeer >= 0. */
void hpml__prof_record(void *ra, int id, uint64_t t0, uint64_t t1, uint64_t bytes,
                       const prof_comm_t *c, int wpeer);
/* Add one I/O call on file index fi (hpml__prof_file_index). */
void hpml__prof_io_record(int fi, int op, uint64_t t0, uint64_t t1, uint64_t bytes);
/* The index of path in the file table (made on first use). */
int hpml__prof_file_index(const char *path);

/* After PMPI_Init (called at t_init): open this rank's file and write its header and a
 * first snapshot. Wall times count from t_init. */
void hpml__prof_start(uint64_t t_init);
/* Append a snapshot with state ("run", "final", "abort", "exit", "signal"). Safe to call
 * from a signal handler that interrupted anything but another snapshot. */
void hpml__prof_flush(const char *state, int sig);
/* MPI_Pcontrol levels of hpml's own, far above those of other profilers (mpiP's 2 to 4
 * take no arguments): a region begins (with its name), ends, a step ends. */
#define PROF_PCONTROL_BEGIN 100
#define PROF_PCONTROL_END   101
#define PROF_PCONTROL_STEP  102

/* MPI_Pcontrol(level, name): 0 pauses counting, 1 resumes it; PROF_PCONTROL_*: trace
 * regions and steps (hpml__prof_trace_pcontrol); other levels are ignored. */
void hpml__prof_pcontrol(int level, const char *name);

/* Trace mode (prof_trace.c). A wrapper with a message's tags sets hpml__prof_tag_s (the
 * send's tag), hpml__prof_peer_r and hpml__prof_tag_r (the world rank and tag received)
 * before recording; the next event takes them and resets them to -1. */
extern int hpml__prof_tracing;
extern PROF_TLS int hpml__prof_tag_s, hpml__prof_peer_r, hpml__prof_tag_r;
void hpml__prof_trace_start(const char *dir, int rank, int size, const char *run, uint64_t start_ns,
                            const char *const *call_names, int ncalls, const char *const *io_names,
                            int nio);
void hpml__prof_trace_event(prof_thread_t *t, int id, uint64_t t0, uint64_t t1, uint64_t bytes,
                            int gid, int speer);
/* Write out the calling thread's buffer (self), or every thread's (all). */
void hpml__prof_trace_flush(prof_thread_t *head, prof_thread_t *self, int all);
/* MPI_Pcontrol levels PROF_PCONTROL_BEGIN (region `name`), _END, _STEP. */
void hpml__prof_trace_pcontrol(prof_thread_t *t, int level, const char *name);
/* The region names (for the snapshot), the events dropped past the cap, the cap. */
int hpml__prof_trace_regions(const char ***names, uint64_t *n_dropped, uint64_t *n_cap);
/* The trace's counts and region names: where they are (adopt NULL), or, in a recovery,
 * from now on those at adopt, a pointer the rank had been given. */
void *hpml__prof_trace_state(void *adopt);

/* Trace mode: a receive on c was posted with MPI_Irecv at t0 and returned req; req,
 * held by the caller before a completion call made between t0 and t1, completed with
 * status st (a PROF_TRACE_RECV event when req was such a receive; st NULL: forget req, freed
 * with MPI_Request_free or now another request's handle). Requests are kept
 * per thread: one completed on another thread than posted it is not matched. */
void hpml__prof_irecv_posted(prof_thread_t *t, MPI_Request req, const prof_comm_t *c, uint64_t t0);
void hpml__prof_irecv_done(prof_thread_t *t, MPI_Request req, const MPI_Status *st, uint64_t t0,
                           uint64_t t1);

/* HPML_PROF_SELF=1 (hpml__prof_self): add the time since t0 to t's own time, as part of
 * a call already counted (trace mode's request matching in the wrappers). */
extern int hpml__prof_self;
void hpml__prof_self_extra(prof_thread_t *t, uint64_t t0);

/* n zeroed bytes in the rank's .live mapping (else on the heap): tables that a recovery
 * after SIGKILL reads (prof_core.c). */
void *hpml__prof_live_alloc(size_t n);

/* I/O wrappers are off inside the profiler's own writes. */
extern PROF_TLS int hpml__prof_in_io;

#endif
