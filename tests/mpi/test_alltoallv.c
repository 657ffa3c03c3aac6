/*
 * hpml_alltoallv against MPI_Alltoallv (int counts) on MPI_COMM_WORLD: random count
 * matrices shared by every rank (zeros, a zero row and column, blocks of tens of
 * thousands of elements split by HPML_MAX_MSG_BYTES=4099 into many messages), blocks out
 * of rank order with gaps that must stay untouched, one array for sending and receiving,
 * every dtype; all counts zero; the all-gather pattern against MPI_Allgatherv; checking
 * mode's pair comparison; invalid arguments. An alarm turns a hang into a failure.
 *
 * hpml-test: ranks=1 2 3 4 5
 * hpml-test: mpich-ranks=1 2 3
 * hpml-test: timeout=90
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll_util.h"

#define SENTINEL 0xab

static MPI_Datatype mpi_type(hpml_dtype_t dt)
{
    switch (dt) {
    case HPML_F32: return MPI_FLOAT;
    case HPML_F64: return MPI_DOUBLE;
    case HPML_I8: return MPI_INT8_T;
    case HPML_U8: return MPI_UINT8_T;
    case HPML_I32: return MPI_INT32_T;
    case HPML_I64: return MPI_INT64_T;
    default: return MPI_UINT16_T; /* f16, bf16: two bytes each, compared bitwise */
    }
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n > 0 ? n : 1);

    if (p == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    return p;
}

static void fill_random(hpml_rng_t *g, void *buf, size_t bytes)
{
    unsigned char *b = buf;

    for (size_t i = 0; i < bytes; i += 8) {
        uint64_t x = hpml_rng_u64(g);
        memcpy(b + i, &x, bytes - i < 8 ? bytes - i : 8);
    }
}

/* Place n blocks of counts[i] elements in an array in a random order that is not the
 * index order (for n > 1), each after a gap of 0-4 elements, and a tail of 1-4
 * elements; displs[i] gets block i's offset. Returns the array's length in elements. */
static size_t layout(hpml_rng_t *g, size_t n, const size_t *counts, size_t *displs)
{
    size_t *order = xmalloc(n * sizeof(*order)), pos = 0, k;
    int identity = 1;

    for (k = 0; k < n; k++)
        order[k] = k;
    for (k = n; k > 1; k--) {
        size_t j = (size_t)hpml_rng_below(g, k), t = order[k - 1];
        order[k - 1] = order[j];
        order[j] = t;
    }
    for (k = 0; k < n; k++)
        identity &= order[k] == k;
    for (k = 0; identity && k < n / 2; k++) {
        size_t t = order[k];
        order[k] = order[n - 1 - k];
        order[n - 1 - k] = t;
    }
    for (k = 0; k < n; k++) {
        pos += (size_t)hpml_rng_below(g, 5);
        displs[order[k]] = pos;
        pos += counts[order[k]];
    }
    free(order);
    return pos + 1 + (size_t)hpml_rng_below(g, 4);
}

/* The receive block holding element i, or -1 for a gap. */
static int block_of(size_t i, int p, const size_t *rc, const size_t *rd)
{
    for (int q = 0; q < p; q++)
        if (i >= rd[q] && i < rd[q] + rc[q])
            return q;
    return -1;
}

/* Elements outside every receive block that differ from their value before the call. */
static size_t gaps_touched(const char *buf, const char *before, size_t len, size_t es, int p,
                           const size_t *rc, const size_t *rd, size_t *first)
{
    size_t bad = 0;

    for (size_t i = 0; i < len; i++)
        if (block_of(i, p, rc, rd) < 0 && memcmp(buf + i * es, before + i * es, es) != 0 &&
            bad++ == 0)
            *first = i;
    return bad;
}

/*
 * One alltoallv of count matrix C (C[a * p + b]: elements rank a sends to rank b) in
 * dtype dt, compared with MPI_Alltoallv. shared: one array holds this rank's send and
 * receive blocks (disjoint, interleaved in random order), else two arrays.
 */
static void run_matrix(hpml_comm_t *comm, const char *label, hpml_dtype_t dt, const size_t *C,
                       int shared, uint64_t seed)
{
    int p = hpmlt_size(), me = hpmlt_rank(), rc, bad = 0;
    size_t es = hpml_dtype_size(dt), slen, rlen, d, first = 0, ngap;
    size_t *sc = xmalloc(4 * (size_t)p * sizeof(size_t)), *sd = sc + p, *rcn = sc + 2 * p,
           *rd = sc + 3 * p;
    int *ic = xmalloc(4 * (size_t)p * sizeof(int));
    char *sbuf, *rbuf, *before, *ref, *sref;
    hpml_rng_t g;

    hpml_rng_init(&g, seed, 1 + (uint64_t)me);
    for (int q = 0; q < p; q++) {
        sc[q] = C[(size_t)me * p + q];
        rcn[q] = C[(size_t)q * p + me];
    }
    if (shared) {
        size_t *d2 = xmalloc(2 * (size_t)p * sizeof(size_t));
        size_t *c2 = xmalloc(2 * (size_t)p * sizeof(size_t));
        memcpy(c2, sc, (size_t)p * sizeof(size_t));
        memcpy(c2 + p, rcn, (size_t)p * sizeof(size_t));
        slen = rlen = layout(&g, 2 * (size_t)p, c2, d2);
        memcpy(sd, d2, (size_t)p * sizeof(size_t));
        memcpy(rd, d2 + p, (size_t)p * sizeof(size_t));
        free(d2);
        free(c2);
    } else {
        slen = layout(&g, (size_t)p, sc, sd);
        rlen = layout(&g, (size_t)p, rcn, rd);
    }
    for (int q = 0; q < p; q++) {
        ic[q] = (int)sc[q];
        ic[p + q] = (int)sd[q];
        ic[2 * p + q] = (int)rcn[q];
        ic[3 * p + q] = (int)rd[q];
    }
    /* Reference: MPI on copies (MPI forbids aliased buffers); ref starts as the receive
     * array did, so gaps and (shared) send blocks keep their values in it too. */
    sbuf = xmalloc(slen * es);
    fill_random(&g, sbuf, slen * es);
    rbuf = shared ? sbuf : xmalloc(rlen * es);
    if (!shared)
        memset(rbuf, SENTINEL, rlen * es);
    before = xmalloc(rlen * es);
    memcpy(before, rbuf, rlen * es);
    sref = xmalloc(slen * es);
    memcpy(sref, sbuf, slen * es);
    ref = xmalloc(rlen * es);
    memcpy(ref, rbuf, rlen * es);
    MPI_Alltoallv(sref, ic, ic + p, mpi_type(dt), ref, ic + 2 * p, ic + 3 * p, mpi_type(dt),
                  MPI_COMM_WORLD);

    rc = hpml_alltoallv(sbuf, sc, sd, rbuf, rcn, rd, dt, comm);
    bad += !HPMLT_CHECK(rc == 0, "%s %s%s: rc %d %s", label, hpml_dtype_name(dt),
                        shared ? " shared" : "", rc, hpml_last_error());
    d = tu_first_diff(rbuf, ref, rlen, es);
    bad += !HPMLT_CHECK(d == rlen, "%s %s%s: first difference at element %zu (block from rank %d)",
                        label, hpml_dtype_name(dt), shared ? " shared" : "", d,
                        d < rlen ? block_of(d, p, rcn, rd) : -2);
    ngap = gaps_touched(rbuf, before, rlen, es, p, rcn, rd, &first);
    bad += !HPMLT_CHECK(ngap == 0, "%s %s%s: %zu gap elements changed, first at %zu", label,
                        hpml_dtype_name(dt), shared ? " shared" : "", ngap, first);
    if (!shared)
        bad += !HPMLT_CHECK(memcmp(sbuf, sref, slen * es) == 0, "%s %s: send buffer changed", label,
                            hpml_dtype_name(dt));
    if (bad) {
        fprintf(stderr, "[r%d] %s %s%s: counts (send:displ recv:displ):", me, label,
                hpml_dtype_name(dt), shared ? " shared" : "");
        for (int q = 0; q < p; q++)
            fprintf(stderr, " q%d %zu:%zu %zu:%zu", q, sc[q], sd[q], rcn[q], rd[q]);
        fprintf(stderr, "\n");
    }
    free(sbuf);
    if (!shared)
        free(rbuf);
    free(before);
    free(sref);
    free(ref);
    free(sc);
    free(ic);
}

/*
 * A count matrix from a seed every rank shares: a quarter zeros, one in eight a big
 * block (20000-39999 elements: many 4099-byte messages), the rest 1-300.
 * Variant 0 also zeroes row zr and column zr + 1 (a rank that sends nothing, one that
 * receives nothing) and forces C[zr + 1][zr], off the diagonal and outside both, big;
 * variant 1 forces the blocks from the last rank to rank 0 and rank 0's to itself big.
 */
static void make_matrix(int p, uint64_t seed, int variant, size_t *C)
{
    hpml_rng_t g;

    hpml_rng_init(&g, seed, 0);
    for (size_t i = 0; i < (size_t)p * p; i++) {
        uint64_t k = hpml_rng_below(&g, 8);
        C[i] = k < 2 ? 0 : k == 2 ? 20000 + hpml_rng_below(&g, 20000) : 1 + hpml_rng_below(&g, 300);
    }
    if (variant == 0) {
        int zr = (int)hpml_rng_below(&g, (uint64_t)p), zc = (zr + 1) % p;
        for (int q = 0; q < p; q++)
            C[(size_t)zr * p + q] = C[(size_t)q * p + zc] = 0;
        if (p > 1)
            C[(size_t)zc * p + zr] = 30011;
    } else {
        C[(size_t)(p - 1) * p] = 25013;
        C[0] = 20021;
    }
}

static void random_matrices(hpml_comm_t *comm, hpml_comm_t *checked)
{
    int p = hpmlt_size();
    size_t *C = xmalloc((size_t)p * p * sizeof(size_t));

    for (int dt = 0; dt < HPML_DTYPE_COUNT; dt++) {
        for (int v = 0; v < 2; v++) {
            uint64_t seed = 0x5eed0000u + 16u * (unsigned)dt + (unsigned)v;
            char label[32];

            make_matrix(p, seed, v, C);
            snprintf(label, sizeof(label), "matrix%d", v);
            run_matrix(comm, label, (hpml_dtype_t)dt, C, 0, seed);
            run_matrix(comm, label, (hpml_dtype_t)dt, C, 1, seed + 1000);
            if (v == 1) {
                snprintf(label, sizeof(label), "matrix%d check", v);
                run_matrix(checked, label, (hpml_dtype_t)dt, C, 0, seed + 2000);
            }
        }
    }
    free(C);
}

/* Every count zero: returns 0 at once, with NULL buffers too, and touches nothing. */
static void all_zero(hpml_comm_t *comm, const char *label)
{
    int p = hpmlt_size();
    size_t *z = xmalloc((size_t)p * sizeof(size_t));
    unsigned char buf[16], want[16];
    int rc;

    memset(z, 0, (size_t)p * sizeof(size_t));
    rc = hpml_alltoallv(NULL, z, z, NULL, z, z, HPML_F32, comm);
    HPMLT_CHECK(rc == 0, "%s zero counts, NULL buffers: rc %d %s", label, rc, hpml_last_error());
    memset(buf, SENTINEL, sizeof(buf));
    memset(want, SENTINEL, sizeof(want));
    rc = hpml_alltoallv(buf, z, z, buf, z, z, HPML_I64, comm);
    HPMLT_CHECK(rc == 0, "%s zero counts: rc %d %s", label, rc, hpml_last_error());
    HPMLT_CHECK(memcmp(buf, want, sizeof(buf)) == 0, "%s zero counts: buffer changed", label);
    free(z);
}

/*
 * All-gather in one array: rank q owns rows [off[q], off[q] + n[q]) of a (rows, w)
 * matrix (some ranks none) and sends them to every other rank; nothing to itself.
 * Compared with MPI_Allgatherv in place on a copy.
 */
static void allgather_pattern(hpml_comm_t *comm, const char *label)
{
    static const hpml_dtype_t dts[] = {HPML_F32, HPML_U8, HPML_F64};
    static const size_t rows_of[] = {2, 0, 3, 1, 4};
    int p = hpmlt_size(), me = hpmlt_rank();
    size_t *sc = xmalloc(4 * (size_t)p * sizeof(size_t)), *sd = sc + p, *rcn = sc + 2 * p,
           *rd = sc + 3 * p;
    int *ic = xmalloc(2 * (size_t)p * sizeof(int));

    for (size_t t = 0; t < sizeof(dts) / sizeof(dts[0]); t++) {
        hpml_dtype_t dt = dts[t];
        /* rows of just over 4400 bytes: every row is at least two messages */
        size_t es = hpml_dtype_size(dt), w = 4400 / es + 1 + t, rows = 0, total, d;
        char *a, *ref;
        hpml_rng_t g;
        int rc;

        for (int q = 0; q < p; q++) {
            size_t n = rows_of[q % 5];
            rcn[q] = q == me ? 0 : n * w;
            rd[q] = rows * w;
            ic[q] = (int)(n * w);
            ic[p + q] = (int)(rows * w);
            rows += n;
        }
        for (int q = 0; q < p; q++) {
            sc[q] = q == me ? 0 : (size_t)ic[me];
            sd[q] = rd[me];
        }
        total = rows * w;
        a = xmalloc(total * es);
        ref = xmalloc(total * es);
        memset(a, SENTINEL, total * es);
        hpml_rng_init(&g, 0xa11u + t, (uint64_t)me);
        fill_random(&g, a + (size_t)ic[p + me] * es, (size_t)ic[me] * es);
        memcpy(ref, a, total * es);
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ref, ic, ic + p, mpi_type(dt),
                       MPI_COMM_WORLD);
        rc = hpml_alltoallv(a, sc, sd, a, rcn, rd, dt, comm);
        HPMLT_CHECK(rc == 0, "%s allgather pattern %s: rc %d %s", label, hpml_dtype_name(dt), rc,
                    hpml_last_error());
        d = tu_first_diff(a, ref, total, es);
        HPMLT_CHECK(d == total,
                    "%s allgather pattern %s: first difference at element %zu (row %zu)", label,
                    hpml_dtype_name(dt), d, d / w);
        free(a);
        free(ref);
    }
    free(sc);
    free(ic);
}

/* Counts for the error cases: every pair agrees (C[a][b] = 1 + (3a + b) % 5). */
static void small_counts(size_t *sc, size_t *sd, size_t *rcn, size_t *rd, size_t *slen,
                         size_t *rlen)
{
    int p = hpmlt_size(), me = hpmlt_rank();

    *slen = *rlen = 0;
    for (int q = 0; q < p; q++) {
        sc[q] = 1 + (size_t)(3 * me + q) % 5;
        rcn[q] = 1 + (size_t)(3 * q + me) % 5;
        sd[q] = *slen;
        rd[q] = *rlen;
        *slen += sc[q];
        *rlen += rcn[q] + 1; /* room for one element more */
    }
}

/* A correct small call on comm, compared with MPI. */
static void still_works(hpml_comm_t *comm, const char *when)
{
    int p = hpmlt_size();
    size_t *C = xmalloc((size_t)p * p * sizeof(size_t));

    for (size_t i = 0; i < (size_t)p * p; i++)
        C[i] = 1 + i % 7;
    C[0] = 9000; /* rank 0 to itself */
    C[(size_t)p * p - 1 - (p > 1)] = 9001;
    run_matrix(comm, when, HPML_I32, C, 0, 0xf00d);
    free(C);
}

/* Checking mode: a disagreement fails on every rank with a message naming both ranks. */
static void check_mode(hpml_comm_t *checked)
{
    int p = hpmlt_size(), me = hpmlt_rank(), rc;
    size_t *sc = xmalloc(4 * (size_t)p * sizeof(size_t)), *sd = sc + p, *rcn = sc + 2 * p,
           *rd = sc + 3 * p, slen, rlen, sent;
    char want[160];
    float *s, *r;

    small_counts(sc, sd, rcn, rd, &slen, &rlen);
    s = xmalloc(slen * sizeof(float));
    r = xmalloc(rlen * sizeof(float));
    memset(s, 0, slen * sizeof(float));

    /* Rank 0 expects one element more from the last rank than that rank sends. */
    sent = 1 + (size_t)(3 * (p - 1)) % 5;
    if (me == 0)
        rcn[p - 1]++;
    rc = hpml_alltoallv(s, sc, sd, r, rcn, rd, HPML_F32, checked);
    snprintf(want, sizeof(want),
             "alltoallv: ranks disagree on a block: rank %d sends %zu elements to rank 0, "
             "which expects %zu",
             p - 1, sent, sent + 1);
    tu_expect_mismatch(rc, "check: rank 0 expects one more from the last rank", want);
    if (me == 0)
        rcn[p - 1]--;
    still_works(checked, "check after a count mismatch");

    /* Every rank expects one element more from itself than it sends: the first
     * disagreement reported is rank 0's. */
    rcn[me]++;
    rc = hpml_alltoallv(s, sc, sd, r, rcn, rd, HPML_F32, checked);
    rcn[me]--;
    snprintf(want, sizeof(want), "rank 0 sends %zu elements to rank 0, which expects %zu",
             (size_t)1, (size_t)2);
    tu_expect_mismatch(rc, "check: self counts differ", want);
    still_works(checked, "check after a self-count mismatch");
    free(s);
    free(r);
    free(sc);
}

/* Without checking: invalid arguments, every rank alike so none waits for a peer. */
static void invalid(hpml_comm_t *comm)
{
    int p = hpmlt_size(), me = hpmlt_rank(), rc;
    size_t *sc = xmalloc(4 * (size_t)p * sizeof(size_t)), *sd = sc + p, *rcn = sc + 2 * p,
           *rd = sc + 3 * p, slen, rlen;
    float *s, *r;

    small_counts(sc, sd, rcn, rd, &slen, &rlen);
    s = xmalloc(slen * sizeof(float));
    r = xmalloc(rlen * sizeof(float));
    memset(s, 0, slen * sizeof(float));

    rcn[me]++;
    rc = hpml_alltoallv(s, sc, sd, r, rcn, rd, HPML_F32, comm);
    rcn[me]--;
    HPMLT_CHECK(rc == HPML_ERR_INVAL, "scounts[me] != rcounts[me]: rc %d %s", rc,
                hpml_last_error());
    rc = hpml_alltoallv(s, NULL, sd, r, rcn, rd, HPML_F32, comm);
    HPMLT_CHECK(rc == HPML_ERR_INVAL, "NULL scounts: rc %d", rc);
    rc = hpml_alltoallv(s, sc, NULL, r, rcn, rd, HPML_F32, comm);
    HPMLT_CHECK(rc == HPML_ERR_INVAL, "NULL sdispls: rc %d", rc);
    rc = hpml_alltoallv(s, sc, sd, r, NULL, rd, HPML_F32, comm);
    HPMLT_CHECK(rc == HPML_ERR_INVAL, "NULL rcounts: rc %d", rc);
    rc = hpml_alltoallv(s, sc, sd, r, rcn, NULL, HPML_F32, comm);
    HPMLT_CHECK(rc == HPML_ERR_INVAL, "NULL rdispls: rc %d", rc);
    rc = hpml_alltoallv(NULL, sc, sd, r, rcn, rd, HPML_F32, comm);
    HPMLT_CHECK(rc == HPML_ERR_INVAL, "NULL sendbuf with counts: rc %d", rc);
    rc = hpml_alltoallv(s, sc, sd, NULL, rcn, rd, HPML_F32, comm);
    HPMLT_CHECK(rc == HPML_ERR_INVAL, "NULL recvbuf with counts: rc %d", rc);
    rc = hpml_alltoallv(s, sc, sd, r, rcn, rd, HPML_DTYPE_COUNT, comm);
    HPMLT_CHECK(rc == HPML_ERR_INVAL, "bad dtype: rc %d", rc);
    rc = hpml_alltoallv(s, sc, sd, r, rcn, rd, HPML_F32, NULL);
    HPMLT_CHECK(rc == HPML_ERR_INVAL, "NULL comm: rc %d", rc);
    still_works(comm, "after invalid arguments");
    free(s);
    free(r);
    free(sc);
}

int main(int argc, char **argv)
{
    hpml_comm_config_t plain = {.check = 0, .ranks_per_node = 0};
    hpml_comm_config_t check = {.check = 1, .ranks_per_node = 0};
    hpml_comm_t *comm = NULL, *checked = NULL;

    /* Read once, on first use: set before any hpml call. Odd, so pieces end mid-element. */
    setenv("HPML_MAX_MSG_BYTES", "4099", 1);
    hpmlt_init(&argc, &argv, "test_alltoallv");
    alarm(60); /* a hang becomes a failure, well before the runner's timeout */
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, &plain, &comm));
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, &check, &checked));
    if (comm != NULL && checked != NULL) {
        random_matrices(comm, checked);
        all_zero(comm, "plain");
        all_zero(checked, "check");
        allgather_pattern(comm, "plain");
        allgather_pattern(checked, "check");
        check_mode(checked);
        invalid(comm);
    }
    hpml_comm_destroy(checked);
    hpml_comm_destroy(comm);
    alarm(0);
    return hpmlt_finish();
}
