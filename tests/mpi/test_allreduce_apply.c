/*
 * hpml_allreduce_apply / hpml_iallreduce_apply against MPI's own MPI_Allreduce.
 *
 * The function the tests pass writes g(x, j) = 2x + j mod 7 for element j and records,
 * per element, that this rank was given it; recvbuf starts filled with a sentinel.
 * 1. Results: recvbuf == g(MPI_Allreduce(sendbuf)) on every rank, bit for bit (small
 *    integers, so every order of reduction is exact; bf16 against f32 rounded once), for
 *    f32 f64 i32 bf16 x SUM MAX AVG (AVG on float types) x counts {0, 1, P-1, P, P+1,
 *    1000, (1<<20)+7} and around 4 KiB and 64 KiB; sendbuf malloc'd and registered
 *    (hpml_comm_alloc_shared); nothing written past the end; sendbuf unchanged.
 *    Nonblocking: several in flight, mixed with plain hpml_iallreduce, waited in order.
 * 2. Coverage: every element is given to fn on at least one rank and at most once per
 *    rank; on one node with no virtual nodes, on exactly one rank, except in pieces of
 *    at most HPML_SHM_SMALL bytes (16 KiB, or the pipeline chunk if smaller; pieces are
 *    HPML_MAX_CHUNK_ELEMS elements), which every rank applies; without a progress
 *    thread (HPML_PROGRESS=mpi), on every rank. A second call with the same count and
 *    dtype gives every rank the same elements (also blocking vs progress thread).
 * 3. Old values: an element's recvbuf entry still holds the sentinel when fn gets it.
 * 4. State gathering, as an optimizer keeps it: fn adds the reduced values into a
 *    per-rank state for the elements it is given; after 3 calls an fn that writes the
 *    state out, on zero input, must gather the sum of the 3 reductions on every rank.
 * 5. Errors: HPML_IN_PLACE, fn == NULL, overlapping buffers -> HPML_ERR_INVAL; when fn
 *    fails on one rank, that rank's call returns its error, every other rank returns (an
 *    error, or 0 with the full result), and the collectives queued after it work.
 * Each on the default communicator, ranks_per_node 1 and 2, a small shm pipeline chunk
 * (HPML_SHM_CHUNK) with a small dispatcher chunk (HPML_MAX_CHUNK_ELEMS), and the
 * nonblocking parts also with HPML_PROGRESS=mpi.
 *
 * hpml-test: ranks=1 2 3 4 5
 * hpml-test: mpich-ranks=1 2 3
 * hpml-test: timeout=180
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_util.h"

#define SENTINEL 0x5a
#define GUARD    64 /* bytes after recvbuf that must stay SENTINEL */
#define BIG      (((size_t)1 << 20) + 7)
#define K_STATE  3

static int rank, nranks;

/* What the checks expect of the elements a rank is given (section 2 above). */
enum { COVER_SOME, COVER_ONCE, COVER_EVERY };

/* A size from the environment as the library reads it ("1K"), or def. */
static size_t env_size(const char *name, size_t def)
{
    const char *v = getenv(name);
    char *end;
    size_t x;

    if (v == NULL || *v == '\0')
        return def;
    x = (size_t)strtoull(v, &end, 10);
    if (*end == 'K' || *end == 'k')
        x <<= 10;
    else if (*end == 'M' || *end == 'm')
        x <<= 20;
    return x > 0 ? x : def;
}

/* COVER_ONCE: is element i of an n-element call in a piece the shm engine takes in one
 * step, so that every rank applies it? */
static int applied_everywhere(size_t i, size_t n, size_t es)
{
    size_t maxc = env_size("HPML_MAX_CHUNK_ELEMS", SIZE_MAX);
    size_t small = env_size("HPML_SHM_SMALL", (size_t)16 << 10);
    size_t chunk = (env_size("HPML_SHM_CHUNK", (size_t)256 << 10) + 63) & ~(size_t)63;
    size_t piece = i / maxc * maxc, len = n - piece < maxc ? n - piece : maxc;

    return len * es <= small && len * es <= chunk;
}

static double get(hpml_dtype_t dt, const void *buf, size_t i)
{
    switch (dt) {
    case HPML_F32: return ((const float *)buf)[i];
    case HPML_F64: return ((const double *)buf)[i];
    case HPML_BF16: return hpml_bf16_to_f32(((const uint16_t *)buf)[i]);
    case HPML_I32: return ((const int32_t *)buf)[i];
    default: return 0;
    }
}

/* The function applied: computed in double and stored in the dtype (one rounding), the
 * same way in fn and in the reference, so the results must agree bit for bit. */
static double g(double x, size_t j)
{
    return 2 * x + (double)(j % 7);
}

/* fn's context: one per call. */
typedef struct {
    hpml_dtype_t dt;
    size_t n;
    const char *recv; /* the call's recvbuf: elements fn gets must still be SENTINEL */
    int *hits;        /* (n) times this rank was given element j */
    double *state;    /* (n) or NULL: state[j] += reduced value (gather: written out) */
    int gather;       /* out[j] = state[j] instead of g */
    int fail;         /* return HPML_ERR_INVAL */
    size_t calls, out_of_range, not_old;
} actx_t;

static int apply(void *arg, size_t offset, const void *in, void *out, size_t count)
{
    actx_t *a = arg;
    size_t es = hpml_dtype_size(a->dt);

    a->calls++;
    if (offset > a->n || count > a->n - offset) {
        a->out_of_range++;
        return 0;
    }
    /* Check every element before writing any: out may be recvbuf itself. */
    for (size_t i = 0; i < count; i++) {
        const unsigned char *r = (const unsigned char *)a->recv + (offset + i) * es;

        for (size_t b = 0; b < es; b++) {
            if (r[b] != SENTINEL) {
                a->not_old++;
                break;
            }
        }
        a->hits[offset + i]++;
    }
    if (a->fail)
        return hpml_set_error(HPML_ERR_INVAL, "test_allreduce_apply: fn fails on rank %d", rank);
    /* in may be out: element i is read before it is written. */
    for (size_t i = 0; i < count; i++) {
        size_t j = offset + i;
        double x = get(a->dt, in, i);

        if (a->gather) {
            tu_put(a->dt, out, i, a->state[j]);
            continue;
        }
        if (a->state != NULL)
            a->state[j] += x;
        tu_put(a->dt, out, i, g(x, j));
    }
    return 0;
}

/* The reduction of every rank's tu_fill(data_rank + rank) through MPI_Allreduce (f64
 * values, rounded to the dtype once; AVG divided as hpml_reduce_finish documents) into
 * red, and g of it into want (either may be NULL). */
static void expected(hpml_dtype_t dt, hpml_op_t op, size_t n, int data_rank, char *red, char *want)
{
    double *v = malloc((n + 1) * sizeof(double)), *ref = malloc((n + 1) * sizeof(double));
    char *r = red ? red : malloc(n * hpml_dtype_size(dt) + 1);

    for (size_t i = 0; i < n; i++)
        v[i] = tu_val(data_rank + rank, i, op, dt);
    MPI_Allreduce(v, ref, (int)n, MPI_DOUBLE, tu_mpi_op(op), MPI_COMM_WORLD);
    tu_ref(dt, ref, r, n, op, nranks);
    for (size_t i = 0; want != NULL && i < n; i++)
        tu_put(dt, want, i, g(get(dt, r, i), i));
    if (r != red)
        free(r);
    free(v);
    free(ref);
}

/* One hpml_(i)allreduce_apply call and what is needed to check it. */
typedef struct {
    hpml_dtype_t dt;
    hpml_op_t op;
    size_t n;
    char *send, *orig; /* (n) this rank's input and a copy of it */
    char *recv;        /* (n elements + GUARD bytes) */
    int reg;           /* send is in the registered buffer (not freed here) */
    actx_t a;
    hpml_request_t *req;
    int rc;
} call_t;

/* Input tu_fill(data_rank + rank), recvbuf all SENTINEL. regbuf: registered memory to
 * take the input from (NULL: malloc). */
static void call_init(call_t *k, hpml_dtype_t dt, hpml_op_t op, size_t n, char *regbuf,
                      int data_rank)
{
    size_t es = hpml_dtype_size(dt);

    memset(k, 0, sizeof(*k));
    k->dt = dt;
    k->op = op;
    k->n = n;
    k->reg = regbuf != NULL;
    k->send = regbuf ? regbuf : malloc(n * es + 1);
    k->orig = malloc(n * es + 1);
    k->recv = malloc(n * es + GUARD);
    for (size_t i = 0; i < n; i++)
        tu_put(dt, k->send, i, tu_val(data_rank + rank, i, op, dt));
    memcpy(k->orig, k->send, n * es);
    memset(k->recv, SENTINEL, n * es + GUARD);
    k->a.dt = dt;
    k->a.n = n;
    k->a.recv = k->recv;
    k->a.hits = calloc(n + 1, sizeof(int));
}

static void call_free(call_t *k)
{
    if (!k->reg)
        free(k->send);
    free(k->orig);
    free(k->recv);
    free(k->a.hits);
    k->send = k->orig = k->recv = NULL;
    k->a.hits = NULL;
}

/* The call's per-element hits, kept (the caller frees them) as the reference for a later
 * call with the same count. */
static int *take_hits(call_t *k)
{
    int *h = k->a.hits;

    k->a.hits = NULL;
    return h;
}

static int call_blocking(hpml_comm_t *c, call_t *k)
{
    k->rc = hpml_allreduce_apply(k->send, k->recv, k->n, k->dt, k->op, apply, &k->a, c);
    return k->rc;
}

/* Check a completed call against want: result, guard, input, what fn saw, and which
 * elements were given to fn (cover; same as `prev`, a per-rank hits array, if given).
 * Collective over MPI_COMM_WORLD (the coverage sum). */
static void call_verify(call_t *k, const char *want, int cover, const int *prev, const char *what)
{
    size_t es = hpml_dtype_size(k->dt), n = k->n, d, bad = n;
    int *tot = malloc((n + 1) * sizeof(int)), maxhits = 0;
    char desc[160];

    snprintf(desc, sizeof(desc), "%s %s %s n=%zu%s", what, hpml_dtype_name(k->dt),
             hpml_op_name(k->op), n, k->reg ? " (registered sendbuf)" : "");
    HPMLT_CHECK(k->rc == 0, "%s: returned %d (%s) %s", desc, k->rc, hpml_strerror(k->rc),
                hpml_last_error());
    d = tu_first_diff(k->recv, want, n, es);
    HPMLT_CHECK(d == n, "%s: recvbuf[%zu] = %g, expected g(allreduce) = %g", desc, d,
                d < n ? get(k->dt, k->recv, d) : 0.0, d < n ? get(k->dt, want, d) : 0.0);
    for (size_t i = n * es; i < n * es + GUARD; i++) {
        if ((unsigned char)k->recv[i] != SENTINEL) {
            HPMLT_CHECK(0, "%s: byte %zu past the end of recvbuf written", desc, i - n * es);
            break;
        }
    }
    d = tu_first_diff(k->send, k->orig, n, es);
    HPMLT_CHECK(d == n, "%s: sendbuf changed at element %zu", desc, d);
    HPMLT_CHECK(k->a.out_of_range == 0, "%s: fn called %zu times outside [0, count)", desc,
                k->a.out_of_range);
    HPMLT_CHECK(k->a.not_old == 0,
                "%s: %zu elements given to fn no longer held their old recvbuf value", desc,
                k->a.not_old);

    for (size_t i = 0; i < n; i++) {
        if (k->a.hits[i] > maxhits) {
            maxhits = k->a.hits[i];
            bad = i;
        }
    }
    HPMLT_CHECK(maxhits <= 1, "%s: element %zu given to fn %d times on this rank", desc, bad,
                maxhits);
    if (cover == COVER_EVERY) {
        for (bad = 0; bad < n && k->a.hits[bad] == 1; bad++)
            ;
        HPMLT_CHECK(bad == n,
                    "%s: element %zu not given to fn on this rank (expected every "
                    "element on every rank)",
                    desc, bad);
    }
    MPI_Allreduce(k->a.hits, tot, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (bad = 0; bad < n && tot[bad] >= 1; bad++) {
        if (cover == COVER_ONCE && tot[bad] != (applied_everywhere(bad, n, es) ? nranks : 1))
            break;
    }
    HPMLT_CHECK(bad == n, "%s: element %zu given to fn on %d ranks (expected %s)", desc, bad,
                bad < n ? tot[bad] : 0,
                cover != COVER_ONCE              ? "at least one"
                : applied_everywhere(bad, n, es) ? "every rank: a one-step piece"
                                                 : "exactly one");
    if (prev != NULL) {
        for (bad = 0; bad < n && (prev[bad] != 0) == (k->a.hits[bad] != 0); bad++)
            ;
        HPMLT_CHECK(bad == n,
                    "%s: element %zu %s to fn on this rank by the earlier call with "
                    "the same count, %s now",
                    desc, bad, bad < n && prev[bad] ? "given" : "not given",
                    bad < n && k->a.hits[bad] ? "given" : "not given");
    }
    free(tot);
}

/* ---- 1-3: results, coverage, old values ------------------------------------------ */

/* Every dtype x op x count, each twice: from malloc'd and from registered memory; the
 * second call must give this rank the same elements as the first. */
static void blocking(hpml_comm_t *c, char *regbuf, const char *label, int cover, int full, int big)
{
    static const hpml_dtype_t dts[] = {HPML_F32, HPML_F64, HPML_I32, HPML_BF16};
    static const hpml_op_t ops[] = {HPML_SUM, HPML_MAX, HPML_AVG};
    char what[96];

    snprintf(what, sizeof(what), "%s: blocking", label);
    for (size_t t = 0; t < sizeof(dts) / sizeof(dts[0]); t++) {
        hpml_dtype_t dt = dts[t];
        size_t es = hpml_dtype_size(dt);

        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            hpml_op_t op = ops[o];
            size_t counts[16], nc = 0, p = (size_t)nranks;

            if (op == HPML_AVG && !hpml_dtype_is_float(dt))
                continue;
            if (full) {
                nc = tu_counts(nranks, 1, counts);
            } else {
                counts[nc++] = 0;
                counts[nc++] = 1;
                counts[nc++] = p + 1;
                counts[nc++] = 1000;
            }
            counts[nc++] = 4096 / es + 1;
            counts[nc++] = 65536 / es + 3;
            if (full) {
                counts[nc++] = 4096 / es - 1;
                counts[nc++] = 65536 / es;
            }
            /* The big count for a few dtype/op pairs: busy-polling MPI is slow at it. */
            if (big && ((dt == HPML_F32 && op == HPML_SUM) || (dt == HPML_BF16 && op == HPML_AVG) ||
                        (dt == HPML_I32 && op == HPML_MAX) || (dt == HPML_F64 && op == HPML_SUM)))
                counts[nc++] = BIG;
            for (size_t i = 0; i < nc; i++) {
                size_t n = counts[i];
                char *want = malloc(n * es + 1);
                int *first = NULL;

                expected(dt, op, n, 0, NULL, want);
                for (int r = 0; r < 2; r++) {
                    call_t k;

                    call_init(&k, dt, op, n, r ? regbuf : NULL, 0);
                    call_blocking(c, &k);
                    call_verify(&k, want, cover, first, what);
                    if (r == 0)
                        first = take_hits(&k);
                    call_free(&k);
                }
                free(first);
                free(want);
            }
        }
    }
}

/* Several operations in flight, apply and plain, waited for in submission order. With a
 * progress thread, fn runs there on the same elements as the blocking call. */
static void nonblocking(hpml_comm_t *c, char *regbuf, const char *label, int cover, int thread)
{
    enum { NOPS = 8 };
    static const hpml_dtype_t dts[NOPS] = {HPML_F32, HPML_I32, HPML_BF16, HPML_F64,
                                           HPML_F32, HPML_I32, HPML_F32,  HPML_I32};
    static const hpml_op_t ops[NOPS] = {HPML_SUM, HPML_SUM, HPML_MAX, HPML_AVG,
                                        HPML_SUM, HPML_SUM, HPML_AVG, HPML_MAX};
    /* Plain hpml_iallreduce at 1 (out of place) and 4 (in place). */
    static const int plain[NOPS] = {0, 1, 0, 0, 1, 0, 0, 0};
    size_t p = (size_t)nranks;
    const size_t ns[NOPS] = {70001, 1000, 4097, p + 1, 5000, 0, 1000, 65536 / 4 + 3};
    call_t k[NOPS];
    char *want[NOPS], what[96];
    int fallback = cover == COVER_EVERY && nranks > 1;

    snprintf(what, sizeof(what), "%s: nonblocking", label);
    for (int i = 0; i < NOPS; i++) {
        size_t es = hpml_dtype_size(dts[i]);

        want[i] = malloc(ns[i] * es + 1);
        if (plain[i]) {
            expected(dts[i], ops[i], ns[i], 0, want[i], NULL);
        } else {
            expected(dts[i], ops[i], ns[i], 0, NULL, want[i]);
        }
        call_init(&k[i], dts[i], ops[i], ns[i], i == 6 ? regbuf : NULL, 0);
    }
    for (int i = 0; i < NOPS; i++) {
        call_t *q = &k[i];

        if (plain[i] && i == 4) {
            memcpy(q->recv, q->send, q->n * hpml_dtype_size(q->dt));
            q->rc = hpml_iallreduce(HPML_IN_PLACE, q->recv, q->n, q->dt, q->op, c, &q->req);
        } else if (plain[i]) {
            q->rc = hpml_iallreduce(q->send, q->recv, q->n, q->dt, q->op, c, &q->req);
        } else {
            q->rc = hpml_iallreduce_apply(q->send, q->recv, q->n, q->dt, q->op, apply, &q->a, c,
                                          &q->req);
        }
        HPMLT_CHECK(q->rc == 0, "%s: submitting operation %d returned %d (%s)", what, i, q->rc,
                    hpml_last_error());
        /* Without a progress thread fn runs inside hpml_test/hpml_wait only. */
        if (fallback && !plain[i])
            HPMLT_CHECK(q->a.calls == 0, "%s: operation %d: fn ran before hpml_wait", what, i);
    }
    for (int i = 0; i < NOPS; i++) {
        if (k[i].req == NULL)
            continue;
        if (i == 2) { /* polled */
            int done = 0;

            while (!done && (k[i].rc = hpml_test(k[i].req, &done)) == 0)
                ;
        } else {
            k[i].rc = hpml_wait(k[i].req);
        }
        k[i].req = NULL;
    }
    for (int i = 0; i < NOPS; i++) {
        size_t es = hpml_dtype_size(dts[i]), d;

        if (plain[i]) {
            d = tu_first_diff(k[i].recv, want[i], ns[i], es);
            HPMLT_CHECK(k[i].rc == 0 && d == ns[i],
                        "%s: plain hpml_iallreduce %d (%s %s n=%zu) rc=%d, first difference at "
                        "%zu",
                        what, i, hpml_dtype_name(dts[i]), hpml_op_name(ops[i]), ns[i], k[i].rc, d);
        } else {
            call_verify(&k[i], want[i], cover, NULL, what);
        }
    }
    /* The progress thread gives fn the elements the blocking call gives it. */
    for (int i = 0; thread && i < NOPS; i++) {
        call_t b;
        char bwhat[128];

        if (plain[i] || ns[i] == 0)
            continue;
        snprintf(bwhat, sizeof(bwhat), "%s: blocking after nonblocking", label);
        call_init(&b, dts[i], ops[i], ns[i], NULL, 0);
        call_blocking(c, &b);
        call_verify(&b, want[i], cover, k[i].a.hits, bwhat);
        call_free(&b);
    }
    for (int i = 0; i < NOPS; i++) {
        call_free(&k[i]);
        free(want[i]);
    }
}

/* ---- 4: state gathering ------------------------------------------------------------- */

/* K_STATE calls on different data accumulate state[j] on the ranks fn gives j to; a
 * call on zeros that writes the state out gathers their sum on every rank. */
static void state(hpml_comm_t *c, const char *label, hpml_dtype_t dt, size_t n, int nb, int cover)
{
    size_t es = hpml_dtype_size(dt);
    double *st = calloc(n + 1, sizeof(double)), *sum = calloc(n + 1, sizeof(double));
    char *red = malloc(n * es + 1), *want = malloc(n * es + 1), what[96];
    int *first = NULL;

    snprintf(what, sizeof(what), "%s: state%s", label, nb ? " (nonblocking)" : "");
    for (int it = 0; it <= K_STATE; it++) {
        int gather = it == K_STATE;
        call_t k;

        if (gather) {
            for (size_t j = 0; j < n; j++)
                tu_put(dt, want, j, sum[j]);
        } else {
            expected(dt, HPML_SUM, n, 16 * it, red, want);
            for (size_t j = 0; j < n; j++)
                sum[j] += get(dt, red, j);
        }
        call_init(&k, dt, HPML_SUM, n, NULL, 16 * it);
        if (gather)
            memset(k.send, 0, n * es);
        memcpy(k.orig, k.send, n * es);
        k.a.state = st;
        k.a.gather = gather;
        if (nb) {
            k.rc = hpml_iallreduce_apply(k.send, k.recv, n, dt, HPML_SUM, apply, &k.a, c, &k.req);
            if (k.rc == 0)
                k.rc = hpml_wait(k.req);
        } else {
            call_blocking(c, &k);
        }
        call_verify(&k, want, cover, first, what);
        if (it == 0)
            first = take_hits(&k);
        call_free(&k);
    }
    free(first);
    free(st);
    free(sum);
    free(red);
    free(want);
}

/* ---- 5: errors ----------------------------------------------------------------------- */

static void bad_arguments(hpml_comm_t *c, const char *label)
{
    float x[8] = {0}, y[8] = {0};
    actx_t a = {.dt = HPML_F32, .n = 8, .recv = (const char *)y};
    int hits[8] = {0}, rc;
    hpml_request_t *req = NULL;

    a.hits = hits;
    rc = hpml_allreduce_apply(HPML_IN_PLACE, y, 8, HPML_F32, HPML_SUM, apply, &a, c);
    HPMLT_CHECK(rc == HPML_ERR_INVAL, "%s: HPML_IN_PLACE returned %d", label, rc);
    rc = hpml_allreduce_apply(x, y, 8, HPML_F32, HPML_SUM, NULL, &a, c);
    HPMLT_CHECK(rc == HPML_ERR_INVAL, "%s: fn NULL returned %d", label, rc);
    rc = hpml_allreduce_apply(y, y, 8, HPML_F32, HPML_SUM, apply, &a, c);
    HPMLT_CHECK(rc == HPML_ERR_INVAL, "%s: sendbuf == recvbuf returned %d", label, rc);
    rc = hpml_allreduce_apply(y + 1, y, 4, HPML_F32, HPML_SUM, apply, &a, c);
    HPMLT_CHECK(rc == HPML_ERR_INVAL, "%s: overlapping buffers returned %d", label, rc);
    rc = hpml_iallreduce_apply(HPML_IN_PLACE, y, 8, HPML_F32, HPML_SUM, apply, &a, c, &req);
    HPMLT_CHECK(rc == HPML_ERR_INVAL, "%s: nonblocking HPML_IN_PLACE returned %d", label, rc);
    if (rc == 0 && req != NULL)
        hpml_wait(req);
    req = NULL;
    rc = hpml_iallreduce_apply(x, y, 8, HPML_F32, HPML_SUM, NULL, &a, c, &req);
    HPMLT_CHECK(rc == HPML_ERR_INVAL, "%s: nonblocking fn NULL returned %d", label, rc);
    if (rc == 0 && req != NULL)
        hpml_wait(req);
    HPMLT_CHECK(a.calls == 0, "%s: fn called %zu times by rejected calls", label, a.calls);
}

/* fn fails on the last rank: its call returns the error, every rank returns (an error,
 * or 0 with the full result), and the operations after it (already queued, for the
 * nonblocking form) are correct. */
static void failing_fn(hpml_comm_t *c, const char *label, int cover, int nb)
{
    static const size_t ns[] = {100, 20000};
    char what[96];

    snprintf(what, sizeof(what), "%s: after a failing fn%s", label, nb ? " (nonblocking)" : "");
    for (size_t t = 0; t < sizeof(ns) / sizeof(ns[0]); t++) {
        size_t n = ns[t], m = n + 77;
        float *want = malloc(n * 4), *want2 = malloc(m * 4), *plain = malloc(m * 4);
        float *plain_want = malloc(m * 4);
        call_t bad, next;
        hpml_request_t *rp = NULL;
        int rcp = 0;
        size_t d;

        expected(HPML_F32, HPML_SUM, n, 0, NULL, (char *)want);
        expected(HPML_F32, HPML_SUM, m, 3, NULL, (char *)want2);
        expected(HPML_F32, HPML_SUM, m, 5, (char *)plain_want, NULL);
        call_init(&bad, HPML_F32, HPML_SUM, n, NULL, 0);
        bad.a.fail = rank == nranks - 1;
        call_init(&next, HPML_F32, HPML_SUM, m, NULL, 3);
        tu_fill(HPML_F32, plain, m, rank + 5, HPML_SUM);
        if (nb) {
            bad.rc = hpml_iallreduce_apply(bad.send, bad.recv, n, HPML_F32, HPML_SUM, apply, &bad.a,
                                           c, &bad.req);
            next.rc = hpml_iallreduce_apply(next.send, next.recv, m, HPML_F32, HPML_SUM, apply,
                                            &next.a, c, &next.req);
            rcp = hpml_iallreduce(HPML_IN_PLACE, plain, m, HPML_F32, HPML_SUM, c, &rp);
            if (bad.rc == 0)
                bad.rc = hpml_wait(bad.req);
            if (next.rc == 0)
                next.rc = hpml_wait(next.req);
            if (rcp == 0)
                rcp = hpml_wait(rp);
        } else {
            call_blocking(c, &bad);
            call_blocking(c, &next);
            rcp = hpml_allreduce(HPML_IN_PLACE, plain, m, HPML_F32, HPML_SUM, c);
        }
        if (bad.a.fail)
            HPMLT_CHECK(bad.rc == (bad.a.calls > 0 ? HPML_ERR_INVAL : 0),
                        "%s: n=%zu: the failing rank's call returned %d (%s) after %zu calls of "
                        "fn",
                        what, n, bad.rc, hpml_last_error(), bad.a.calls);
        else if (bad.rc == 0)
            HPMLT_CHECK(tu_first_diff(bad.recv, want, n, 4) == n,
                        "%s: n=%zu: a peer of the failing rank returned 0 without the result", what,
                        n);
        else
            HPMLT_CHECK(bad.rc < 0, "%s: n=%zu: a peer of the failing rank returned %d", what, n,
                        bad.rc);
        call_verify(&next, (const char *)want2, cover, NULL, what);
        d = tu_first_diff(plain, plain_want, m, 4);
        HPMLT_CHECK(rcp == 0 && d == m, "%s: n=%zu: plain allreduce rc=%d, first difference at %zu",
                    what, m, rcp, d);
        call_free(&bad);
        call_free(&next);
        free(want);
        free(want2);
        free(plain);
        free(plain_want);
    }
}

/* ---- layouts ------------------------------------------------------------------------- */

enum { RUN_BLOCKING = 1, RUN_BIG = 2, RUN_FULL = 4 };

/* Everything on one communicator. rpn: hpml_comm_config_t.ranks_per_node (0: NULL
 * config, the environment decides). */
static void run(const char *label, int rpn, unsigned what)
{
    hpml_comm_config_t cfg = {.check = 0, .ranks_per_node = rpn};
    hpml_comm_t *c = NULL;
    const char *force = getenv("HPML_PROGRESS");
    char *regbuf;
    int provided, thread, cover, nb_cover;
    size_t big = what & RUN_BIG ? BIG : 65536;

    if (rank == 0)
        printf("%s\n", label);
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, rpn > 0 ? &cfg : NULL, &c));
    if (c == NULL)
        return;
    MPI_Query_thread(&provided);
    thread = provided == MPI_THREAD_MULTIPLE && !(force && strcmp(force, "mpi") == 0);
    /* One rank per element on a single node without virtual nodes (the shm engine's
     * slice owner); anywhere else at least one. */
    cover = rpn == 0 && hpml_comm_nodes(c) == 1 && getenv("HPML_RANKS_PER_NODE") == NULL
                ? COVER_ONCE
                : COVER_SOME;
    nb_cover = thread ? cover : COVER_EVERY;
    regbuf = hpml_comm_alloc_shared(c, big * sizeof(double));
    HPMLT_CHECK(regbuf != NULL, "%s: hpml_comm_alloc_shared(%zu) failed", label,
                big * sizeof(double));
    if (regbuf != NULL) {
        if (what & RUN_BLOCKING) {
            blocking(c, regbuf, label, cover, what & RUN_FULL, what & RUN_BIG);
            state(c, label, HPML_F32, 70001, 0, cover);
            state(c, label, HPML_BF16, 1000, 0, cover);
            state(c, label, HPML_F64, (size_t)nranks + 1, 0, cover);
        }
        nonblocking(c, regbuf, label, nb_cover, thread);
        state(c, label, HPML_F32, 30001, 1, nb_cover);
        bad_arguments(c, label);
        if (what & RUN_BLOCKING)
            failing_fn(c, label, cover, 0);
        failing_fn(c, label, nb_cover, 1);
        hpml_comm_free_shared(c, regbuf);
    }
    hpml_comm_destroy(c);
}

int main(int argc, char **argv)
{
    int crowded;

    hpmlt_init(&argc, &argv, "test_allreduce_apply");
    rank = hpmlt_rank();
    nranks = hpmlt_size();
    /* MPICH oversubscribed busy-polls: no big count there. */
    crowded = tu_is_mpich() && nranks > 2;

    run("default communicator", 0, RUN_BLOCKING | RUN_FULL | (crowded ? 0 : RUN_BIG));
    run("ranks_per_node=1", 1, RUN_BLOCKING);
    run("ranks_per_node=2", 2, RUN_BLOCKING);
    /* Read when the node segment and the communicators (also the progress thread's) are
     * created: set for the whole life of the communicator. 1 KiB chunks take every count
     * above 1 KiB through the multi-chunk pipeline; the dispatcher's pieces of 2999
     * elements make fn's offsets start at odd places. */
    setenv("HPML_SHM_CHUNK", "1K", 1);
    setenv("HPML_MAX_CHUNK_ELEMS", "2999", 1);
    run("HPML_SHM_CHUNK=1K HPML_MAX_CHUNK_ELEMS=2999", 0, RUN_BLOCKING);
    unsetenv("HPML_SHM_CHUNK");
    unsetenv("HPML_MAX_CHUNK_ELEMS");
    setenv("HPML_PROGRESS", "mpi", 1);
    run("HPML_PROGRESS=mpi (nonblocking only)", 0, 0);
    unsetenv("HPML_PROGRESS");
    return hpmlt_finish();
}
