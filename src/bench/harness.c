/*
 * The one benchmark harness: size sweep, OMB's timing loops (blocking, point-to-point,
 * nonblocking overlap), statistics reduced across ranks, and validation. Each case is a
 * bench_case_t in its own file; nothing here knows which collective it is timing.
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_internal.h"
#include "core/settings_internal.h"

static const bench_case_t *const cases[] = {
    &hpml__bench_latency,
    &hpml__bench_bw,
    &hpml__bench_bibw,
    &hpml__bench_mbw_mr,
    &hpml__bench_multi_lat,
    &hpml__bench_allreduce,
    &hpml__bench_bcast,
    &hpml__bench_reduce,
    &hpml__bench_allgather,
    &hpml__bench_reduce_scatter,
    &hpml__bench_alltoall,
    &hpml__bench_gather,
    &hpml__bench_scatter,
    &hpml__bench_barrier,
    &hpml__bench_iallreduce,
    &hpml__bench_ibcast,
    NULL,
};

#define NCASES        (sizeof(cases) / sizeof(cases[0]) - 1)
#define LARGE_MESSAGE 8192

const bench_case_t *hpml__bench_case_find(const char *name)
{
    for (size_t i = 0; name != NULL && cases[i] != NULL; i++)
        if (strcmp(cases[i]->name, name) == 0)
            return cases[i];
    return NULL;
}

const char *const *hpml_bench_cases(void)
{
    static const char *names[NCASES + 1];

    for (size_t i = 0; i < NCASES; i++)
        names[i] = cases[i]->name;
    names[NCASES] = NULL;
    return names;
}

int hpml_bench_case_exists(const char *name)
{
    return hpml__bench_case_find(name) != NULL;
}

static size_t default_max_size(const bench_case_t *bc)
{
    if (bc->kind == HPML_BENCH_KIND_BARRIER)
        return 0;
    return bc->kind == HPML_BENCH_KIND_COLL || bc->kind == HPML_BENCH_KIND_NBC ? (size_t)1 << 20
                                                                               : (size_t)4 << 20;
}

size_t hpml_bench_default_max_size(const char *name)
{
    const bench_case_t *bc = hpml__bench_case_find(name);

    return bc ? default_max_size(bc) : 0;
}

void hpml_bench_opts_init(hpml_bench_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->warmup = -1;
    o->dtype = HPML_I8; /* OMB's default datatype is MPI_CHAR */
    o->window = 64;
    o->mem_limit = (size_t)512 << 20;
}

/* ---- --impl ------------------------------------------------------------------------ */

static int add_impl(hpml_bench_opts_t *o, int native, hpml_algo_t algo)
{
    hpml_bench_impl_t im = {0};

    im.native = native;
    im.algo = algo;
    if (native)
        snprintf(im.name, sizeof(im.name), "mpi");
    else if (algo == HPML_ALGO_AUTO)
        snprintf(im.name, sizeof(im.name), "hpml");
    else
        snprintf(im.name, sizeof(im.name), "hpml:%s", hpml_algo_name(algo));
    for (int i = 0; i < o->nimpls; i++)
        if (strcmp(o->impls[i].name, im.name) == 0)
            return 0;
    if (o->nimpls == HPML_BENCH_MAX_IMPLS)
        return hpml_set_error(HPML_ERR_INVAL, "too many implementations");
    o->impls[o->nimpls++] = im;
    return 0;
}

static int parse_one_impl(const bench_case_t *bc, const char *tok, hpml_bench_opts_t *o, char *note,
                          size_t note_len)
{
    const hpml_algo_t *algos = NULL;
    size_t nalgos = 0;
    int has_hpml = bc->hpml_coll >= 0 || bc->hpml_plain;
    hpml_algo_t a;

    if (strcmp(tok, "mpi") == 0)
        return add_impl(o, 1, HPML_ALGO_MPI);
    if (bc->hpml_coll >= 0 && hpml_algo_list((hpml_coll_t)bc->hpml_coll, &algos, &nalgos) != 0)
        nalgos = 0;
    if (strcmp(tok, "all") == 0) {
        int rc = add_impl(o, 1, HPML_ALGO_MPI);

        if (!has_hpml) {
            snprintf(note, note_len, "hpml has no %s of its own: native MPI only", bc->name);
            return rc;
        }
        if (rc == 0)
            rc = add_impl(o, 0, HPML_ALGO_AUTO);
        /* hpml:mpi is hpml's pass-through to the same MPI call as "mpi": left out of
         * "all" (ask for it by name to see the wrapper's cost). */
        for (size_t i = 0; rc == 0 && i < nalgos; i++)
            if (algos[i] != HPML_ALGO_MPI && algos[i] != HPML_ALGO_AUTO)
                rc = add_impl(o, 0, algos[i]);
        return rc;
    }
    if (!has_hpml && strncmp(tok, "hpml", 4) == 0)
        return hpml_set_error(HPML_ERR_INVAL, "hpml has no %s of its own; use --impl mpi (or all)",
                              bc->name);
    if (strcmp(tok, "hpml") == 0)
        return add_impl(o, 0, HPML_ALGO_AUTO);
    if (strncmp(tok, "hpml:", 5) == 0) {
        if (bc->hpml_coll < 0)
            return hpml_set_error(HPML_ERR_INVAL, "hpml has no algorithm choice for %s", bc->name);
        if (hpml_algo_parse(tok + 5, &a) == 0) {
            if (a == HPML_ALGO_AUTO)
                return add_impl(o, 0, a);
            for (size_t i = 0; i < nalgos; i++)
                if (algos[i] == a)
                    return add_impl(o, 0, a);
        }
        {
            char list[256] = "";
            size_t len = 0;

            for (size_t i = 0; i < nalgos && len < sizeof(list); i++)
                len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", i ? " " : "",
                                        hpml_algo_name(algos[i]));
            return hpml_set_error(HPML_ERR_INVAL, "unknown %s algorithm '%s' (have: %s)", bc->name,
                                  tok + 5, list);
        }
    }
    return hpml_set_error(HPML_ERR_INVAL, "bad --impl '%s' (mpi, hpml, hpml:<algorithm>, all)",
                          tok);
}

int hpml_bench_parse_impls(const char *case_name, const char *spec, hpml_bench_opts_t *o,
                           char *note, size_t note_len)
{
    const bench_case_t *bc = hpml__bench_case_find(case_name);
    char buf[512], *tok, *save = NULL;
    int rc = 0;

    if (note_len)
        note[0] = '\0';
    if (bc == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "unknown benchmark '%s'", case_name);
    if (spec == NULL || strlen(spec) >= sizeof(buf) || *spec == '\0')
        return hpml_set_error(HPML_ERR_INVAL, "bad --impl");
    o->nimpls = 0;
    strcpy(buf, spec);
    for (tok = strtok_r(buf, ",", &save); tok && rc == 0; tok = strtok_r(NULL, ",", &save))
        rc = parse_one_impl(bc, tok, o, note, note_len);
    if (rc == 0 && o->nimpls == 0)
        rc = hpml_set_error(HPML_ERR_INVAL, "bad --impl '%s'", spec);
    for (int i = 0; rc == 0 && o->in_place && bc->no_in_place && i < o->nimpls; i++)
        if (!o->impls[i].native)
            rc = hpml_set_error(HPML_ERR_INVAL,
                                "-l/--in-place with %s --impl %s: %s (--impl mpi runs in place)",
                                bc->name, o->impls[i].name, bc->no_in_place);
    return rc;
}

/* ---- sweep --------------------------------------------------------------------------- */

/* OMB's iteration counts: (small, warm-up small, large, warm-up large). An explicit -i
 * or -x keeps OMB's ratio between small and large messages. */
static void iterations(const bench_case_t *bc, const hpml_bench_opts_t *o, size_t size, long *iters,
                       long *skip)
{
    long d[4];
    int large = size > LARGE_MESSAGE;

    switch (bc->kind) {
    case HPML_BENCH_KIND_LAT: d[0] = 10000, d[1] = 100, d[2] = 1000, d[3] = 10; break;
    case HPML_BENCH_KIND_BW:
    case HPML_BENCH_KIND_MBW: d[0] = 100, d[1] = 10, d[2] = 20, d[3] = 2; break;
    default: d[0] = 1000, d[1] = 100, d[2] = 100, d[3] = 10; break;
    }
    if (o->iters > 0)
        *iters = large ? (o->iters * d[2] + d[0] - 1) / d[0] : o->iters;
    else
        *iters = large ? d[2] : d[0];
    if (o->warmup >= 0)
        *skip = large ? (o->warmup * d[3] + d[1] - 1) / d[1] : o->warmup;
    else
        *skip = large ? d[3] : d[1];
    if (*iters < 1)
        *iters = 1;
}

static size_t buffer_bytes(const bench_case_t *bc, bench_ctx_t *c, size_t size)
{
    size_t s, r;

    bc->buffers(c, size, &s, &r);
    return s + r;
}

/* Sizes: 0 when the range starts at 0 (OMB skips it; hpml keeps it), then powers of two
 * from the minimum up to the maximum, leaving out sizes below one element. */
static size_t make_sizes(const bench_case_t *bc, bench_ctx_t *c, const hpml_bench_opts_t *o,
                         size_t max, size_t *sizes, size_t cap, char *note, size_t note_len)
{
    size_t n = 0;

    if (bc->kind == HPML_BENCH_KIND_BARRIER) {
        sizes[0] = 0;
        return 1;
    }
    if (o->min_size == 0)
        sizes[n++] = 0;
    for (size_t s = o->min_size ? o->min_size : 1; s <= max && n < cap; s *= 2) {
        if (s < c->esize)
            continue;
        if (buffer_bytes(bc, c, s) > o->mem_limit) {
            snprintf(note, note_len, "sizes above %zu bytes left out: -M %zu bytes per rank", s / 2,
                     o->mem_limit);
            break;
        }
        sizes[n++] = s;
        if (s > SIZE_MAX / 2)
            break;
    }
    return n;
}

/* ---- statistics ------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Between two sizes the ranks exchange only what OMB exchanges: three one-double
 * reductions of the per-rank average to rank 0. The per-iteration times wait in a store
 * and are reduced after the sweep (the slowest rank per iteration, the percentiles):
 * 8 KB more of reductions between sizes moved Open MPI's next small-message times by
 * 1-2% (docs/decisions/omb-compatible-timing.md). A store that would pass
 * HPML_BENCH_STORE doubles (never fewer than one size's) is reduced early, between two
 * sizes. */

typedef struct {
    hpml_bench_row_t *row;
    size_t off; /* its times: t[off .. off + n) */
    long n;
    int rep; /* this rank reports */
} pending_t;

typedef struct {
    double *t, *work; /* cap doubles each: this rank's times; the reductions' scratch */
    size_t cap, used;
    pending_t *pend; /* the rows whose times are in t, in sweep order */
    size_t npend;
    int nrep; /* ranks that report: the divisor of OMB's mean */
} sweep_t;

/* Reduce the stored times into their rows, on every rank: the mean over iterations of
 * the per-iteration maximum across ranks, and OMB's percentiles (element-wise sum across
 * ranks, sorted, / reporting ranks). Every rank stores the same rows in the same order,
 * so the counts agree. */
static int reduce_pending(bench_ctx_t *c, const hpml_bench_opts_t *o, sweep_t *w)
{
    if (w->used > 0) {
        for (size_t k = 0; k < w->npend; k++) {
            const pending_t *p = &w->pend[k];

            for (long i = 0; i < p->n; i++)
                w->work[p->off + (size_t)i] = p->rep ? w->t[p->off + (size_t)i] : -DBL_MAX;
        }
        if (MPI_Allreduce(MPI_IN_PLACE, w->work, (int)w->used, MPI_DOUBLE, MPI_MAX, c->comm) !=
            MPI_SUCCESS)
            return HPML_ERR_MPI;
        for (size_t k = 0; k < w->npend; k++) {
            const pending_t *p = &w->pend[k];
            double m = 0;

            for (long i = 0; i < p->n; i++)
                m += w->work[p->off + (size_t)i];
            p->row->maxrank = m / (double)p->n;
        }
    }
    if (w->used > 0 && o->npct > 0) {
        for (size_t k = 0; k < w->npend; k++) {
            const pending_t *p = &w->pend[k];

            for (long i = 0; !p->rep && i < p->n; i++)
                w->t[p->off + (size_t)i] = 0;
        }
        if (MPI_Allreduce(MPI_IN_PLACE, w->t, (int)w->used, MPI_DOUBLE, MPI_SUM, c->comm) !=
            MPI_SUCCESS)
            return HPML_ERR_MPI;
        for (size_t k = 0; k < w->npend; k++) {
            const pending_t *p = &w->pend[k];
            double *v = w->t + p->off;

            qsort(v, (size_t)p->n, sizeof(double), cmp_double);
            for (int j = 0; j < o->npct; j++) {
                long idx = lround((double)p->n * o->pct[j] / 100.0) - 1;

                if (idx < 0)
                    idx = 0;
                if (idx >= p->n)
                    idx = p->n - 1;
                p->row->pct[j] = v[idx] / w->nrep;
            }
        }
    }
    w->used = 0;
    w->npend = 0;
    return 0;
}

/* Where the next n per-iteration times go: the store's free end, reduced first when full. */
static int store_slot(bench_ctx_t *c, const hpml_bench_opts_t *o, sweep_t *w, long n, double **t)
{
    int rc;

    if (w->used + (size_t)n > w->cap && (rc = reduce_pending(c, o, w)) != 0)
        return rc;
    *t = w->t + w->used;
    return 0;
}

/* OMB's statistics of one size from the n times at the store's free end: the per-rank
 * averages' minimum, maximum and mean, by three one-double MPI_Reduce to rank 0 in
 * osu_allreduce's order. Until the sweep ends only rank 0's row holds them. The times
 * stay in the store for reduce_pending. */
static int reduce_stats(bench_ctx_t *c, sweep_t *w, int rep, long n, hpml_bench_row_t *row,
                        double *my_avg)
{
    const double *t = w->t + w->used;
    double avg = 0, in, mn, mx, sum;

    for (long i = 0; i < n; i++)
        avg += t[i];
    avg /= (double)n;
    *my_avg = avg;
    in = rep ? avg : DBL_MAX;
    if (MPI_Reduce(&in, &mn, 1, MPI_DOUBLE, MPI_MIN, 0, c->comm) != MPI_SUCCESS)
        return HPML_ERR_MPI;
    in = rep ? avg : -DBL_MAX;
    if (MPI_Reduce(&in, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, c->comm) != MPI_SUCCESS)
        return HPML_ERR_MPI;
    in = rep ? avg : 0;
    if (MPI_Reduce(&in, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, c->comm) != MPI_SUCCESS)
        return HPML_ERR_MPI;
    if (c->rank == 0) {
        row->avg = sum / w->nrep;
        row->min = mn;
        row->max = mx;
    }
    for (int k = 0; k < HPML_BENCH_MAX_PCT; k++)
        row->pct[k] = NAN;
    w->pend[w->npend++] = (pending_t){row, w->used, n, rep};
    w->used += (size_t)n;
    return 0;
}

/* ---- timing loops ------------------------------------------------------------------ */

static void set_root(bench_ctx_t *c, const bench_case_t *bc, const hpml_bench_opts_t *o, long i)
{
    if (bc->rooted)
        c->root = o->root_rotate ? (int)(i % c->size) : o->root;
}

/* Blocking loop (OMB): a barrier per size; each iteration timer, operation, timer;
 * collectives then a barrier outside the timed region. */
static int time_blocking(bench_ctx_t *c, const bench_case_t *bc, const hpml_bench_opts_t *o,
                         long iters, long skip, double *t)
{
    int coll = bc->kind == HPML_BENCH_KIND_COLL || bc->kind == HPML_BENCH_KIND_BARRIER;

    /* The MPI's own call, timed as OMB times it (one root for the whole loop). */
    if (c->impl->native && bc->native_loop != NULL && (!bc->rooted || !o->root_rotate)) {
        set_root(c, bc, o, 0);
        return bc->native_loop(c, iters, skip, t);
    }
    if (MPI_Barrier(c->comm) != MPI_SUCCESS)
        return HPML_ERR_MPI;
    for (long i = 0; i < skip + iters; i++) {
        double t0, t1;
        int rc;

        set_root(c, bc, o, i);
        t0 = MPI_Wtime();
        rc = bc->run(c);
        t1 = MPI_Wtime();
        if (rc != 0)
            return rc;
        if (i >= skip)
            t[i - skip] = (t1 - t0) * 1e6 * bc->time_scale;
        if (coll && MPI_Barrier(c->comm) != MPI_SUCCESS)
            return HPML_ERR_MPI;
    }
    return 0;
}

/* hpml_bench_time_blocking: time_blocking on the caller's communicators and buffers. */
int hpml_bench_time_blocking(MPI_Comm comm, hpml_comm_t *hcomm, const char *case_name,
                             const char *impl, const void *sendbuf, void *recvbuf, size_t bytes,
                             hpml_dtype_t dtype, long iters, long skip, double *t)
{
    const bench_case_t *bc = hpml__bench_case_find(case_name ? case_name : "");
    hpml_bench_opts_t o;
    bench_ctx_t c;
    char note[160];
    int rc;

    if (bc != &hpml__bench_allreduce && bc != &hpml__bench_bcast)
        return hpml_set_error(HPML_ERR_INVAL,
                              "hpml_bench_time_blocking: case '%s' is not allreduce or bcast",
                              case_name ? case_name : "(null)");
    hpml_bench_opts_init(&o);
    if ((rc = hpml_bench_parse_impls(bc->name, impl, &o, note, sizeof(note))) != 0)
        return rc;
    if (o.nimpls != 1)
        return hpml_set_error(HPML_ERR_INVAL,
                              "hpml_bench_time_blocking: '%s' is not one "
                              "implementation",
                              impl);
    if (hpml_dtype_size(dtype) == 0 || bytes % hpml_dtype_size(dtype) != 0)
        return hpml_set_error(HPML_ERR_INVAL,
                              "hpml_bench_time_blocking: %zu bytes are not "
                              "whole elements of the dtype",
                              bytes);
    if (iters < 1 || skip < 0 || t == NULL || recvbuf == NULL ||
        (bc == &hpml__bench_allreduce && sendbuf == NULL) || (!o.impls[0].native && !hcomm))
        return hpml_set_error(HPML_ERR_INVAL, "hpml_bench_time_blocking: bad argument");
    memset(&c, 0, sizeof(c));
    c.comm = comm;
    c.hcomm = hcomm;
    MPI_Comm_rank(comm, &c.rank);
    MPI_Comm_size(comm, &c.size);
    c.dtype = dtype;
    c.esize = hpml_dtype_size(dtype);
    c.impl = &o.impls[0];
    c.bytes = bytes;
    c.count = bytes / c.esize;
    c.in_place = sendbuf == HPML_IN_PLACE;
    c.sbuf = c.in_place ? NULL : (void *)(uintptr_t)sendbuf; /* the cases only read it */
    c.rbuf = recvbuf;
    c.msum = MPI_OP_NULL;
    if ((rc = hpml__bench_mpi_type(dtype, &c.mdt, &c.msum)) != 0)
        return rc;
    rc = time_blocking(&c, bc, &o, iters, skip, t);
    hpml__bench_mpi_type_free(&c.msum);
    return rc;
}

/* A compute kernel that runs for `seconds` of wall time, calling the case's test
 * `ntest` times at even intervals (OMB's dummy compute with MPI_Test calls). Returns the
 * time spent computing, excluding the test calls. */
static double compute(bench_ctx_t *c, const bench_case_t *bc, double seconds, int ntest, int *rc)
{
    volatile double x = 1.0;
    double t0 = MPI_Wtime(), spent_testing = 0;
    int done = 0;

    for (int s = 0; s <= ntest; s++) {
        double until = t0 + seconds * (s + 1) / (ntest + 1);

        while (MPI_Wtime() < until)
            for (int k = 0; k < 64; k++)
                x = x * 1.0000001 + 1e-9;
        if (s < ntest && !done && *rc == 0) {
            double a = MPI_Wtime();

            *rc = bc->test(c, &done);
            spent_testing += MPI_Wtime() - a;
        }
    }
    return MPI_Wtime() - t0 - spent_testing;
}

/* OMB's overlap method: the pure communication time (start + wait), then each
 * iteration starts the operation, computes for as long as the mean pure time, waits. */
static int time_nonblocking(bench_ctx_t *c, const bench_case_t *bc, const hpml_bench_opts_t *o,
                            long iters, long skip, double *t, sweep_t *w, hpml_bench_row_t *row)
{
    double pure_local = 0, comp_local = 0, target, sums[3], in[3], my_avg;
    int rc = 0;

    if (MPI_Barrier(c->comm) != MPI_SUCCESS)
        return HPML_ERR_MPI;
    for (long i = 0; i < skip + iters; i++) {
        double t0;

        set_root(c, bc, o, i);
        t0 = MPI_Wtime();
        if ((rc = bc->start(c)) != 0 || (rc = bc->wait(c)) != 0)
            return rc;
        if (i >= skip)
            pure_local += MPI_Wtime() - t0;
        if (MPI_Barrier(c->comm) != MPI_SUCCESS)
            return HPML_ERR_MPI;
    }
    pure_local /= (double)iters;
    if (MPI_Allreduce(&pure_local, &target, 1, MPI_DOUBLE, MPI_SUM, c->comm) != MPI_SUCCESS)
        return HPML_ERR_MPI;
    target /= c->size;

    for (long i = 0; i < skip + iters; i++) {
        double t0, cp;

        set_root(c, bc, o, i);
        t0 = MPI_Wtime();
        if ((rc = bc->start(c)) != 0)
            return rc;
        cp = compute(c, bc, target, o->test_calls, &rc);
        if (rc != 0 || (rc = bc->wait(c)) != 0)
            return rc;
        if (i >= skip) {
            t[i - skip] = (MPI_Wtime() - t0) * 1e6;
            comp_local += cp;
        }
        if (MPI_Barrier(c->comm) != MPI_SUCCESS)
            return HPML_ERR_MPI;
    }
    comp_local /= (double)iters;
    if ((rc = reduce_stats(c, w, 1, iters, row, &my_avg)) != 0)
        return rc;
    in[0] = my_avg;
    in[1] = comp_local * 1e6;
    in[2] = pure_local * 1e6;
    if (MPI_Reduce(in, sums, 3, MPI_DOUBLE, MPI_SUM, 0, c->comm) != MPI_SUCCESS)
        return HPML_ERR_MPI;
    if (c->rank != 0)
        return 0; /* rank 0's row reaches every rank after the sweep */
    row->overall = sums[0] / c->size;
    row->compute = sums[1] / c->size;
    row->pure = sums[2] / c->size;
    row->overlap =
        row->pure > 0 ? fmax(0.0, 100.0 - (row->overall - row->compute) / row->pure * 100.0) : 0;
    return 0;
}

/* ---- validation ------------------------------------------------------------------- */

static int break_mode(void)
{
    uint64_t v;

    return hpml__setting_env(HPML__S_BENCH_BREAK, &v); /* its one choice: drop-last */
}

/* Fresh inputs, one more operation, compare every element with its exact expected
 * value. Every size is checked; the result records failures, the sweep goes on. */
static int validate(bench_ctx_t *c, const bench_case_t *bc, const hpml_bench_opts_t *o,
                    hpml_bench_row_t *row)
{
    long bad = 0, total = 0;
    size_t n = 0, first = 0;
    double got = 0, want = 0;
    void *res;
    int rc, who, first_rank;

    if (bc->fill == NULL) {
        row->valid = -1;
        return 0;
    }
    c->root = bc->rooted ? (o->root_rotate ? c->size - 1 : o->root) : 0;
    bc->fill(c);
    if (MPI_Barrier(c->comm) != MPI_SUCCESS)
        return HPML_ERR_MPI;
    if (bc->run != NULL)
        rc = bc->run(c);
    else if ((rc = bc->start(c)) == 0)
        rc = bc->wait(c);
    if (rc != 0)
        return rc;
    res = bc->result(c, &n);
    if (res != NULL && n > 0 && !c->impl->native && break_mode())
        memset((char *)res + (n - 1) * c->esize, 0, c->esize);
    for (size_t i = 0; res != NULL && i < n; i++) {
        double g = hpml__bench_get(res, c->dtype, i), w = bc->expect(c, i);

        if (g != w) { /* exact: every expected value is a small integer */
            if (bad == 0) {
                first = i;
                got = g;
                want = w;
            }
            bad++;
        }
    }
    if (MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, c->comm) != MPI_SUCCESS)
        return HPML_ERR_MPI;
    row->bad = total;
    row->valid = total == 0;
    row->note[0] = '\0';
    if (total == 0)
        return 0;
    who = bad ? c->rank : c->size;
    if (MPI_Allreduce(&who, &first_rank, 1, MPI_INT, MPI_MIN, c->comm) != MPI_SUCCESS)
        return HPML_ERR_MPI;
    if (c->rank == first_rank)
        snprintf(row->note, sizeof(row->note),
                 "%ld wrong element(s); first on rank %d: element %zu is %g, expected %g", total,
                 c->rank, first, got, want);
    return BENCH_MPI(MPI_Bcast(row->note, (int)sizeof(row->note), MPI_CHAR, first_rank, c->comm));
}

/* ---- one measurement -------------------------------------------------------------- */

static int measure(bench_ctx_t *c, const bench_case_t *bc, const hpml_bench_opts_t *o, size_t size,
                   sweep_t *w, hpml_bench_row_t *row)
{
    long iters, skip;
    double my_avg = 0, *t;
    int rc, p = c->size;

    row->size = size;
    c->bytes = size;
    c->count = size / c->esize;
    iterations(bc, o, size, &iters, &skip);
    row->iters = iters;
    row->warmup = skip;
    row->bw = row->msg_rate = row->algbw = row->busbw = NAN;
    row->overall = row->compute = row->pure = row->overlap = NAN;
    row->valid = -1;
    if ((rc = store_slot(c, o, w, iters, &t)) != 0)
        return rc;

    if (bc->kind == HPML_BENCH_KIND_NBC) {
        rc = time_nonblocking(c, bc, o, iters, skip, t, w, row);
    } else {
        int rep = bc->reports(c);

        if ((rc = time_blocking(c, bc, o, iters, skip, t)) != 0)
            return rc;
        rc = reduce_stats(c, w, rep, iters, row, &my_avg);
        /* OMB's collective benchmarks close each size with a barrier. */
        if (rc == 0 && (bc->kind == HPML_BENCH_KIND_COLL || bc->kind == HPML_BENCH_KIND_BARRIER) &&
            MPI_Barrier(c->comm) != MPI_SUCCESS)
            return HPML_ERR_MPI;
        if (rc == 0 && bc->iter_bytes != NULL) {
            /* Bandwidth: bytes per timed iteration over the time of one iteration, summed
             * over the reporting ranks (one sender for bw/bibw, every sender for mbw_mr). */
            double in[2] = {0, 0}, out[2];

            if (rep && my_avg > 0) {
                in[0] = bc->iter_bytes(c) / my_avg; /* bytes/us = MB/s */
                in[1] = c->window / (my_avg * 1e-6);
            }
            if (MPI_Reduce(in, out, 2, MPI_DOUBLE, MPI_SUM, 0, c->comm) != MPI_SUCCESS)
                return HPML_ERR_MPI;
            if (c->rank == 0) {
                row->bw = out[0];
                row->msg_rate = out[1];
            }
        }
    }
    if (rc != 0)
        return rc;
    if (bc->bus_factor != NULL && c->rank == 0) {
        double lat = bc->kind == HPML_BENCH_KIND_NBC ? row->pure : row->avg;

        row->algbw = lat > 0 ? (double)size * bc->total_mult(p) / lat : 0;
        row->busbw = row->algbw * bc->bus_factor(p);
    }
    return o->validate ? validate(c, bc, o, row) : 0;
}

/* Touch every pair of ranks once, so that connection set-up (lazy in many MPI
 * libraries) happens before any warm-up, never inside a timed region. */
static int connect_all(bench_ctx_t *c)
{
    for (int k = 1; k < c->size; k++) {
        int to = (c->rank + k) % c->size, from = (c->rank - k + c->size) % c->size;
        char s = 0, r;

        if (MPI_Sendrecv(&s, 1, MPI_CHAR, to, 9, &r, 1, MPI_CHAR, from, 9, c->comm,
                         MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return HPML_ERR_MPI;
    }
    return BENCH_MPI(MPI_Barrier(c->comm));
}

static const char *dtype_label(hpml_dtype_t dt)
{
    switch (dt) {
    case HPML_F32: return "MPI_FLOAT";
    case HPML_F64: return "MPI_DOUBLE";
    case HPML_I8: return CHAR_MIN < 0 ? "MPI_CHAR" : "MPI_SIGNED_CHAR"; /* hpml__bench_mpi_type */
    case HPML_U8: return "MPI_UNSIGNED_CHAR";
    case HPML_I32: return sizeof(int) == 4 ? "MPI_INT" : "MPI_INT32_T";
    case HPML_I64: return "MPI_INT64_T";
    case HPML_F16: return "HPML_F16";
    case HPML_BF16: return "HPML_BF16";
    default: return "?";
    }
}

static int check_opts(const bench_case_t *bc, const hpml_bench_opts_t *o, int p)
{
    if (bc == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "unknown benchmark '%s'",
                              o->case_name ? o->case_name : "(null)");
    if (p < 2)
        return hpml_set_error(HPML_ERR_INVAL, "%s needs at least 2 ranks", bc->name);
    if (bc->even_ranks && p % 2 != 0)
        return hpml_set_error(HPML_ERR_INVAL, "%s needs an even number of ranks", bc->name);
    if (hpml_dtype_size(o->dtype) == 0)
        return hpml_set_error(HPML_ERR_INVAL, "bad datatype");
    if (o->nimpls < 1)
        return hpml_set_error(HPML_ERR_INVAL, "no implementation to run");
    if (bc->rooted && !o->root_rotate && (o->root < 0 || o->root >= p))
        return hpml_set_error(HPML_ERR_INVAL, "root %d out of range (0..%d)", o->root, p - 1);
    if (o->window < 1 || o->npct < 0 || o->npct > HPML_BENCH_MAX_PCT || o->test_calls < 0)
        return hpml_set_error(HPML_ERR_INVAL, "bad option value");
    /* Against the default maximum too: a minimum above it would sweep no size at all. */
    if (bc->kind != HPML_BENCH_KIND_BARRIER &&
        o->min_size > (o->max_size ? o->max_size : default_max_size(bc)))
        return hpml_set_error(HPML_ERR_INVAL, "minimum size %zu above the maximum size %zu",
                              o->min_size, o->max_size ? o->max_size : default_max_size(bc));
    return 0;
}

/* The record's provenance: options that shape the numbers, the MPI library, the hosts
 * (one allgather of the processor names over comm) and the start time. */
static int provenance(bench_ctx_t *c, const bench_case_t *bc, const hpml_bench_opts_t *o,
                      hpml_bench_result_t *r)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING], me[MPI_MAX_PROCESSOR_NAME] = "", *all = NULL;
    const size_t w = MPI_MAX_PROCESSOR_NAME;
    int len = 0, rc = 0;
    time_t now = time(NULL);
    struct tm tm;

    r->op = bc->op;
    r->in_place = o->in_place;
    r->rooted = bc->rooted;
    r->root_rotate = o->root_rotate;
    r->root = o->root;
    r->iters_opt = o->iters;
    r->warmup_opt = o->warmup;
    MPI_Get_version(&r->mpi_version[0], &r->mpi_version[1]);
    if (MPI_Get_library_version(lib, &len) == MPI_SUCCESS) {
        lib[len > 0 && len < (int)sizeof(lib) ? len : (int)sizeof(lib) - 1] = '\0';
        lib[strcspn(lib, "\r\n")] = '\0';
        snprintf(r->mpi_library, sizeof(r->mpi_library), "%.*s", (int)sizeof(r->mpi_library) - 1,
                 lib);
    }
    if (gmtime_r(&now, &tm) != NULL)
        strftime(r->timestamp, sizeof(r->timestamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
    MPI_Get_processor_name(me, &len);
    all = calloc((size_t)c->size, w);
    r->hosts = calloc((size_t)c->size, sizeof(*r->hosts));
    r->host_ranks = calloc((size_t)c->size, sizeof(*r->host_ranks));
    if (all == NULL || r->hosts == NULL || r->host_ranks == NULL)
        rc = HPML_ERR_NOMEM;
    /* Every rank takes part even when its allocation failed: the others are waiting. */
    if (MPI_Allgather(me, (int)w, MPI_CHAR, all != NULL ? all : me, all != NULL ? (int)w : 0,
                      MPI_CHAR, c->comm) != MPI_SUCCESS &&
        rc == 0)
        rc = HPML_ERR_MPI;
    for (int q = 0; rc == 0 && q < c->size; q++) {
        const char *h = all + (size_t)q * w;
        int k = 0;

        while (k < r->nhosts && strcmp(r->hosts[k], h) != 0)
            k++;
        if (k == r->nhosts)
            snprintf(r->hosts[r->nhosts++], w, "%s", h);
        r->host_ranks[k]++;
    }
    free(all);
    return rc;
}

/* Message buffers start on a page, as OMB's (posix_memalign to the page size): the MPI's
 * copy and zero-copy paths (CMA, registration caches) then see the same page offsets in
 * both programs. The size is rounded up as hpml_malloc's (hpml's vector loops may read a
 * whole line past the end of a tiny buffer). Freed with free(). */
static void *page_alloc(size_t bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    void *p = NULL;

    if (page < HPML_ALIGN)
        page = HPML_ALIGN;
    if (bytes > SIZE_MAX - HPML_ALIGN)
        return NULL;
    bytes = bytes ? (bytes + HPML_ALIGN - 1) / HPML_ALIGN * HPML_ALIGN : HPML_ALIGN;
    if (posix_memalign(&p, (size_t)page, bytes) != 0)
        return NULL;
    return p;
}

/* The store for a sweep of `total` per-iteration times (at most maxit per size, nrows
 * rows), agreed before the sweep so that no rank stops alone and leaves the others in a
 * collective: its size (the smallest: the reductions' counts must match), that every
 * rank's HPML_BENCH_STORE is well-formed, and that every rank has its buffers (bufs_ok:
 * the caller's message buffers; maxbuf their size, for the message). Then the reporting
 * ranks are counted. Collective; 0 or an error set on every rank. */
static int sweep_init(bench_ctx_t *c, const bench_case_t *bc, sweep_t *w, size_t total, long maxit,
                      size_t nrows, int bufs_ok, size_t maxbuf)
{
    const hpml__setting_id_t id = HPML__S_BENCH_STORE;
    const char *env = getenv(hpml_setting_at(id)->name);
    uint64_t cap = 0;
    unsigned long long agreed[3]; /* the store; 1: the setting is well-formed; 1: memory */
    char why[160] = "";
    int mine, rep;

    hpml__setting_parse(id, hpml_setting_at(id)->def, &cap, why, sizeof(why));
    agreed[1] =
        env == NULL || *env == '\0' || hpml__setting_parse(id, env, &cap, why, sizeof(why)) == 0;
    if (cap < (uint64_t)maxit)
        cap = (uint64_t)maxit;
    if (cap > total)
        cap = total;
    w->t = malloc((cap ? cap : 1) * sizeof(double));
    w->work = malloc((cap ? cap : 1) * sizeof(double));
    w->pend = malloc((nrows + 1) * sizeof(*w->pend));
    mine = bufs_ok && w->t != NULL && w->work != NULL && w->pend != NULL;
    agreed[0] = cap;
    agreed[2] = (unsigned long long)mine;
    if (MPI_Allreduce(MPI_IN_PLACE, agreed, 3, MPI_UNSIGNED_LONG_LONG, MPI_MIN, c->comm) !=
        MPI_SUCCESS)
        return HPML_ERR_MPI;
    if (!agreed[1])
        return hpml_set_error(HPML_ERR_INVAL, "%s",
                              why[0] ? why : "HPML_BENCH_STORE is malformed on another rank");
    if (!agreed[2])
        return mine ? hpml_set_error(HPML_ERR_NOMEM, "another rank could not allocate its "
                                                     "message buffers or its store of times")
                    : hpml_set_error(HPML_ERR_NOMEM,
                                     "cannot allocate two %zu-byte message buffers and two "
                                     "%llu-byte stores of times",
                                     maxbuf, (unsigned long long)(cap * sizeof(double)));
    w->cap = (size_t)agreed[0];
    /* Touched now, so that no size's loop takes the page faults of its first writes (OMB
     * keeps no per-iteration times; fresh pages there read 1-2% higher at 4-256 B). */
    memset(w->t, 0, w->cap * sizeof(double));
    memset(w->work, 0, w->cap * sizeof(double));
    rep = bc->reports(c);
    return BENCH_MPI(MPI_Allreduce(&rep, &w->nrep, 1, MPI_INT, MPI_SUM, c->comm));
}

int hpml_bench_run(MPI_Comm comm, const hpml_bench_opts_t *o, hpml_bench_result_t **out)
{
    const bench_case_t *bc = hpml__bench_case_find(o->case_name);
    bench_ctx_t c = {0};
    hpml_bench_result_t *r = NULL;
    size_t sizes[80], nsizes, max, maxbuf = 0, total = 0;
    long maxit = 1;
    sweep_t w = {0};
    int rc, p, need_hpml = 0;

    *out = NULL;
    c.comm = MPI_COMM_NULL;
    c.msum = MPI_OP_NULL;
    MPI_Comm_size(comm, &p);
    if ((rc = check_opts(bc, o, p)) != 0)
        return rc;
    if (MPI_Comm_dup(comm, &c.comm) != MPI_SUCCESS)
        return HPML_ERR_MPI;
    MPI_Comm_set_errhandler(c.comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c.comm, &c.rank);
    c.size = p;
    c.dtype = o->dtype;
    c.esize = hpml_dtype_size(o->dtype);
    c.window = o->window;
    c.in_place = o->in_place;
    c.root = o->root;
    if ((rc = hpml__bench_mpi_type(o->dtype, &c.mdt, &c.msum)) != 0)
        goto out;
    for (int i = 0; i < o->nimpls; i++)
        need_hpml |= !o->impls[i].native;
    if (need_hpml && (rc = hpml_comm_create(comm, NULL, &c.hcomm)) != 0)
        goto out;

    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        rc = HPML_ERR_NOMEM;
        goto out;
    }
    max = o->max_size ? o->max_size : default_max_size(bc);
    nsizes = make_sizes(bc, &c, o, max, sizes, sizeof(sizes) / sizeof(sizes[0]), r->note,
                        sizeof(r->note));
    for (size_t i = 0; i < nsizes; i++) {
        long it, sk;
        size_t s, rb;

        bc->buffers(&c, sizes[i], &s, &rb);
        if (s > maxbuf)
            maxbuf = s;
        if (rb > maxbuf)
            maxbuf = rb;
        iterations(bc, o, sizes[i], &it, &sk);
        if (it > maxit)
            maxit = it;
        total += (size_t)it * (size_t)o->nimpls;
        /* MPI counts are int: refuse sizes whose counts would not fit. */
        if ((s > rb ? s : rb) / c.esize > (size_t)INT32_MAX) {
            rc = hpml_set_error(HPML_ERR_RANGE, "size %zu too large for an MPI count", sizes[i]);
            goto out;
        }
    }
    r->case_name = bc->name;
    r->title = bc->title;
    r->kind = bc->kind;
    r->ranks = p;
    r->dtype = o->dtype;
    snprintf(r->dtype_label, sizeof(r->dtype_label), "%s",
             o->dtype_label ? o->dtype_label : dtype_label(o->dtype));
    r->npct = o->npct;
    memcpy(r->pct, o->pct, sizeof(r->pct));
    r->full = o->full;
    r->validate = o->validate && bc->fill != NULL;
    r->nimpls = o->nimpls;
    memcpy(r->impls, o->impls, sizeof(r->impls));
    r->nsizes = nsizes;
    if ((rc = provenance(&c, bc, o, r)) != 0)
        goto out;
    r->rows = calloc(nsizes * (size_t)o->nimpls + 1, sizeof(*r->rows));
    c.sbuf = page_alloc(maxbuf);
    c.rbuf = page_alloc(maxbuf);
    c.reqs = calloc(2 * (size_t)c.window, sizeof(*c.reqs));
    c.stats = calloc(2 * (size_t)c.window, sizeof(*c.stats));
    rc = sweep_init(&c, bc, &w, total, maxit, nsizes * (size_t)o->nimpls,
                    r->rows != NULL && c.sbuf != NULL && c.rbuf != NULL && c.reqs != NULL &&
                        c.stats != NULL,
                    maxbuf);
    if (rc != 0)
        goto out;
    /* OMB's inputs: bytes of 1 to send, zeros to receive into, so that both programs
     * reduce the same data. Every dtype reads them as a small finite value (f32 2.4e-38,
     * f64 7.8e-304 and bf16 are normal; f16 0x0101 is the subnormal 1.5e-5), and sums of
     * them stay finite. */
    memset(c.sbuf, 1, maxbuf);
    memset(c.rbuf, 0, maxbuf);
    if ((rc = connect_all(&c)) != 0)
        goto out;

    /* Sizes outer, implementations inner: every implementation of one size is timed
     * under the same machine conditions, which matters on a shared machine. */
    for (size_t s = 0; s < nsizes; s++) {
        for (int i = 0; i < o->nimpls; i++) {
            c.impl = &o->impls[i];
            if (o->progress)
                o->progress(o->progress_arg, c.impl->name, sizes[s],
                            (int)(s * (size_t)o->nimpls + (size_t)i),
                            (int)(nsizes * (size_t)o->nimpls));
            rc = measure(&c, bc, o, sizes[s], &w, &r->rows[(size_t)i * nsizes + s]);
            if (rc != 0) {
                if (hpml_last_error()[0] == '\0')
                    hpml_set_error(rc, "%s %s size %zu: %s", bc->name, c.impl->name, sizes[s],
                                   hpml_strerror(rc));
                goto out;
            }
        }
    }
    /* The statistics only rank 0 holds so far reach every rank. */
    if ((rc = reduce_pending(&c, o, &w)) != 0 ||
        (rc = BENCH_MPI(MPI_Bcast(r->rows, (int)(nsizes * (size_t)o->nimpls * sizeof(*r->rows)),
                                  MPI_BYTE, 0, c.comm))) != 0)
        goto out;
    *out = r;
    r = NULL;
out:
    free(w.t);
    free(w.work);
    free(w.pend);
    free(c.reqs);
    free(c.stats);
    free(c.sbuf);
    free(c.rbuf);
    hpml_bench_result_free(r);
    hpml_comm_destroy(c.hcomm);
    hpml__bench_mpi_type_free(&c.msum);
    if (c.comm != MPI_COMM_NULL)
        MPI_Comm_free(&c.comm);
    return rc;
}

void hpml_bench_result_free(hpml_bench_result_t *r)
{
    if (r == NULL)
        return;
    free(r->rows);
    free(r->hosts);
    free(r->host_ranks);
    free(r);
}

int hpml_bench_failures(const hpml_bench_result_t *r)
{
    int n = 0;

    for (size_t i = 0; i < r->nsizes * (size_t)r->nimpls; i++)
        n += r->rows[i].valid == 0;
    return n;
}

int hpml__bench_nb_test(bench_ctx_t *c, int *done)
{
    int rc;

    if (c->impl->native)
        return BENCH_MPI(MPI_Test(&c->mreq, done, MPI_STATUS_IGNORE));
    if (c->hreq == NULL) {
        *done = 1;
        return 0;
    }
    rc = hpml_test(c->hreq, done);
    if (*done)
        c->hreq = NULL; /* hpml_test freed it */
    return rc;
}

int hpml__bench_nb_wait(bench_ctx_t *c)
{
    hpml_request_t *r = c->hreq;

    if (c->impl->native)
        return BENCH_MPI(MPI_Wait(&c->mreq, MPI_STATUS_IGNORE));
    c->hreq = NULL;
    return r ? hpml_wait(r) : 0;
}
