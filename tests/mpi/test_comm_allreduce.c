/*
 * Every allreduce algorithm × dtype × op × in place or not × counts {0, 1, P−1, P, P+1,
 * 1000, (1<<20)+7}, compared with the MPI library's own MPI_Allreduce on the same data.
 * Data are small integers, so every partial sum, product, min and max is exact in every
 * dtype and in any order (fp16/bf16: the reference is computed in f32 and rounded once,
 * which for such data is exact too); results must match bit for bit. The huge count runs
 * for a subset of dtypes/ops (and only up to 2 ranks under MPICH, which busy-polls).
 * Also, on a subset of dtypes and ops: the chunking path (HPML_MAX_CHUNK_ELEMS lowered),
 * virtual nodes (ranks_per_node 1 and 2, uneven layouts such as 3 ranks as 2+1),
 * registered buffers, determinism (same bits twice and on every rank), the shm
 * algorithm's store modes (HPML_SHM_NT), and exchanges through registered buffers with
 * hpml_comm_node_sync, on one node and on virtual nodes.
 *
 * hpml-test: ranks=1 2 3 4 5
 * hpml-test: mpich-ranks=1 2 3
 * hpml-test: timeout=600
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hpml/comm.h"

#define BIG ((size_t)(1 << 20) + 7)

static int rank, size, is_mpich;
/* MPICH oversubscribed (busy-polling ranks, ~10 ms per collective on 2 cores): in place
 * and out of place alternate over counts and algorithms instead of both every time. */
static int thin;

/* Element i of rank r's input as an integer: in [-8, 8] for SUM/AVG/MIN/MAX, in
 * {1, 2, -1} (mostly 1) for PROD so that products stay within ±2^5. */
static int64_t value(size_t i, int r, hpml_op_t op)
{
    if (op == HPML_PROD) {
        size_t h = i * 2654435761u + (size_t)r * 40503u;
        return (h % 7 == 0) ? 2 : (h % 11 == 0) ? -1 : 1;
    }
    return (int64_t)((i * 7 + (size_t)r * 13 + (i >> 5)) % 17) - 8;
}

static void store(void *buf, size_t i, hpml_dtype_t dt, double v)
{
    switch (dt) {
    case HPML_F32: ((float *)buf)[i] = (float)v; break;
    case HPML_F64: ((double *)buf)[i] = v; break;
    case HPML_F16: ((uint16_t *)buf)[i] = hpml_f32_to_f16((float)v); break;
    case HPML_BF16: ((uint16_t *)buf)[i] = hpml_f32_to_bf16((float)v); break;
    case HPML_I8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case HPML_U8: ((uint8_t *)buf)[i] = (uint8_t)(int8_t)v; break;
    case HPML_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case HPML_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    default: break;
    }
}

static void fill(void *buf, size_t n, hpml_dtype_t dt, hpml_op_t op, int r)
{
    for (size_t i = 0; i < n; i++)
        store(buf, i, dt, (double)value(i, r, op));
}

/* The expected result through MPI's own MPI_Allreduce: on the dtype itself for MPI types,
 * on f32 rounded once for fp16/bf16; AVG is SUM divided by P (C truncation for
 * integers, as hpml_reduce_finish documents). */
static void reference(void *out, size_t n, hpml_dtype_t dt, hpml_op_t op)
{
    MPI_Op mop = op == HPML_PROD  ? MPI_PROD
                 : op == HPML_MIN ? MPI_MIN
                 : op == HPML_MAX ? MPI_MAX
                                  : MPI_SUM;
    if (dt == HPML_F16 || dt == HPML_BF16) {
        float *f = malloc(n * sizeof(float) + 4);

        for (size_t i = 0; i < n; i++)
            f[i] = (float)value(i, rank, op);
        MPI_Allreduce(MPI_IN_PLACE, f, (int)n, MPI_FLOAT, mop, MPI_COMM_WORLD);
        for (size_t i = 0; i < n; i++) {
            float v = op == HPML_AVG ? f[i] / (float)size : f[i];
            ((uint16_t *)out)[i] = dt == HPML_F16 ? hpml_f32_to_f16(v) : hpml_f32_to_bf16(v);
        }
        free(f);
        return;
    }
    if (dt == HPML_F32 || dt == HPML_F64) {
        fill(out, n, dt, op, rank);
        MPI_Allreduce(MPI_IN_PLACE, out, (int)n, dt == HPML_F32 ? MPI_FLOAT : MPI_DOUBLE, mop,
                      MPI_COMM_WORLD);
        if (op == HPML_AVG)
            for (size_t i = 0; i < n; i++) {
                if (dt == HPML_F32)
                    ((float *)out)[i] /= (float)size;
                else
                    ((double *)out)[i] /= (double)size;
            }
        return;
    }
    /* Integers: reduce the stored values exactly in int64 (MPI's own 8-bit sums are not
     * trusted: Open MPI 4.1 saturates them), then wrap to the dtype as hpml does; AVG
     * divides the wrapped sum, truncating. */
    {
        int64_t *w = malloc(n * sizeof(int64_t) + 8);

        fill(out, n, dt, op, rank);
        for (size_t i = 0; i < n; i++)
            w[i] = dt == HPML_I8    ? ((int8_t *)out)[i]
                   : dt == HPML_U8  ? ((uint8_t *)out)[i]
                   : dt == HPML_I32 ? ((int32_t *)out)[i]
                                    : ((int64_t *)out)[i];
        MPI_Allreduce(MPI_IN_PLACE, w, (int)n, MPI_INT64_T, mop, MPI_COMM_WORLD);
        for (size_t i = 0; i < n; i++) {
            switch (dt) {
            case HPML_I8: {
                int8_t v = (int8_t)w[i];
                ((int8_t *)out)[i] = op == HPML_AVG ? (int8_t)(v / size) : v;
                break;
            }
            case HPML_U8: {
                uint8_t v = (uint8_t)w[i];
                ((uint8_t *)out)[i] = op == HPML_AVG ? (uint8_t)(v / size) : v;
                break;
            }
            case HPML_I32: {
                int32_t v = (int32_t)w[i];
                ((int32_t *)out)[i] = op == HPML_AVG ? v / size : v;
                break;
            }
            default: {
                int64_t v = w[i];
                ((int64_t *)out)[i] = op == HPML_AVG ? v / size : v;
                break;
            }
            }
        }
        free(w);
    }
}

/* Run one case and compare with the reference; returns 1 when it matched. */
static int one_case(hpml_comm_t *c, hpml_algo_t algo, hpml_dtype_t dt, hpml_op_t op, size_t n,
                    int inplace, const void *ref, const char *what)
{
    size_t es = hpml_dtype_size(dt), bad = n;
    char *in = malloc(n * es + 64), *out = malloc(n * es + 64);
    int rc, ok;

    fill(in, n, dt, op, rank);
    if (inplace)
        memcpy(out, in, n * es);
    else
        memset(out, 0x5a, n * es + 64);
    rc = hpml_allreduce_algo(algo, inplace ? HPML_IN_PLACE : in, out, n, dt, op, c);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (memcmp(out + i * es, (const char *)ref + i * es, es) != 0) {
            bad = i;
            break;
        }
    }
    ok = HPMLT_CHECK(rc == 0 && bad == n,
                     "%s algo=%s dtype=%s op=%s count=%zu %s: rc=%d (%s) "
                     "first mismatch at %zu",
                     what, hpml_algo_name(algo), hpml_dtype_name(dt), hpml_op_name(op), n,
                     inplace ? "in place" : "out of place", rc, hpml_last_error(), bad);
    /* Nothing past the end is touched, and out of place the input is left as it was. */
    if (!inplace) {
        for (size_t i = n * es; i < n * es + 64; i++)
            if ((unsigned char)out[i] != 0x5a) {
                ok = HPMLT_CHECK(0, "%s algo=%s wrote past the end at count=%zu", what,
                                 hpml_algo_name(algo), n);
                break;
            }
        fill(out, n, dt, op, rank);
        if (memcmp(in, out, n * es) != 0)
            ok = HPMLT_CHECK(0, "%s algo=%s dtype=%s count=%zu changed its input", what,
                             hpml_algo_name(algo), hpml_dtype_name(dt), n);
    }
    free(in);
    free(out);
    return ok;
}

static int big_ok(hpml_dtype_t dt, hpml_op_t op)
{
    if (size > (is_mpich ? 2 : 3))
        return 0;
    return (op == HPML_SUM &&
            (dt == HPML_F32 || dt == HPML_F16 || dt == HPML_I8 || dt == HPML_BF16)) ||
           (op == HPML_MAX && dt == HPML_F64) || (op == HPML_AVG && dt == HPML_I32);
}

/* Every algorithm × dtype × op × in place × count on communicator c. */
static void matrix(hpml_comm_t *c, const size_t *counts, size_t ncounts, int with_big,
                   unsigned dtypes, unsigned ops, const char *what)
{
    const hpml_algo_t *algos;
    size_t nalgos;

    hpml_algo_list(HPML_COLL_ALLREDUCE, &algos, &nalgos);
    for (int dt = 0; dt < HPML_DTYPE_COUNT; dt++) {
        if (!(dtypes >> dt & 1))
            continue;
        for (int op = 0; op < HPML_OP_COUNT; op++) {
            if (!(ops >> op & 1))
                continue;
            for (size_t k = 0; k < ncounts + 1; k++) {
                size_t n = k < ncounts ? counts[k] : BIG;
                size_t es = hpml_dtype_size((hpml_dtype_t)dt);
                void *ref;

                if (k == ncounts && (!with_big || !big_ok((hpml_dtype_t)dt, (hpml_op_t)op)))
                    continue;
                ref = malloc(n * es + 8);
                reference(ref, n, (hpml_dtype_t)dt, (hpml_op_t)op);
                for (size_t a = 0; a < nalgos + (thin ? 0 : 1); a++) {
                    hpml_algo_t algo = a < nalgos ? algos[a] : HPML_ALGO_AUTO;

                    for (int ip = 0; ip < 2; ip++)
                        if (!thin || (size_t)ip == (k + a) % 2)
                            one_case(c, algo, (hpml_dtype_t)dt, (hpml_op_t)op, n, ip, ref, what);
                }
                free(ref);
            }
        }
    }
}

/* Same bits twice, and the same bits on every rank, for data that rounds. */
static void determinism(hpml_comm_t *c)
{
    const hpml_algo_t *algos;
    size_t nalgos, n = 100003;
    float *x = malloc(n * 4), *y1 = malloc(n * 4), *y2 = malloc(n * 4), *y0 = malloc(n * 4);
    hpml_rng_t rng;

    hpml_rng_init(&rng, 42, (uint64_t)rank);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)hpml_rng_normal(&rng) * 1e3f;
    hpml_algo_list(HPML_COLL_ALLREDUCE, &algos, &nalgos);
    for (size_t a = 0; a < nalgos; a++) {
        for (int dt = 0; dt < 2; dt++) {
            hpml_dtype_t t = dt ? HPML_BF16 : HPML_F32;
            size_t m = dt ? n * 2 / 2 : n;
            void *in = x;

            if (dt) {
                hpml_f32_to_bf16_array((uint16_t *)y0, x, n);
                in = y0;
            }
            HPMLT_CALL(hpml_allreduce_algo(algos[a], in, y1, m, t, HPML_SUM, c));
            HPMLT_CALL(hpml_allreduce_algo(algos[a], in, y2, m, t, HPML_SUM, c));
            HPMLT_CHECK(memcmp(y1, y2, m * hpml_dtype_size(t)) == 0,
                        "algo=%s dtype=%s: two runs differ", hpml_algo_name(algos[a]),
                        hpml_dtype_name(t));
            memcpy(y2, y1, m * hpml_dtype_size(t));
            MPI_Bcast(y2, (int)(m * hpml_dtype_size(t)), MPI_BYTE, 0, MPI_COMM_WORLD);
            HPMLT_CHECK(memcmp(y1, y2, m * hpml_dtype_size(t)) == 0,
                        "algo=%s dtype=%s: ranks hold different bits", hpml_algo_name(algos[a]),
                        hpml_dtype_name(t));
        }
    }
    free(x);
    free(y0);
    free(y1);
    free(y2);
}

/* Registered buffers: inputs in the node segment are read in place. */
static void registered(hpml_comm_t *c)
{
    size_t sizes[] = {5, 4099, 300001};

    for (size_t k = 0; k < 3; k++) {
        size_t n = sizes[k];
        float *in = hpml_comm_alloc_shared(c, n * 4), *out = hpml_comm_alloc_shared(c, n * 4);
        float *ref = malloc(n * 4);

        HPMLT_CHECK(in != NULL && out != NULL, "hpml_comm_alloc_shared(%zu) failed", n * 4);
        if (in == NULL || out == NULL)
            return;
        reference(ref, n, HPML_F32, HPML_SUM);
        for (int algo = HPML_ALGO_SHM; algo <= HPML_ALGO_HIER; algo++) {
            for (int ip = 0; ip < 2; ip++) {
                fill(in, n, HPML_F32, HPML_SUM, rank);
                HPMLT_CALL(hpml_allreduce_algo((hpml_algo_t)algo, ip ? HPML_IN_PLACE : in,
                                               ip ? in : out, n, HPML_F32, HPML_SUM, c));
                HPMLT_CHECK(memcmp(ip ? in : out, ref, n * 4) == 0,
                            "registered algo=%s count=%zu %s", hpml_algo_name((hpml_algo_t)algo), n,
                            ip ? "in place" : "");
            }
        }
        /* Mixed: one rank registered, the others not. */
        fill(in, n, HPML_F32, HPML_SUM, rank);
        {
            float *priv = malloc(n * 4);

            memcpy(priv, in, n * 4);
            HPMLT_CALL(hpml_allreduce_algo(HPML_ALGO_SHM, rank % 2 ? (void *)in : (void *)priv, out,
                                           n, HPML_F32, HPML_SUM, c));
            HPMLT_CHECK(memcmp(out, ref, n * 4) == 0, "mixed registered count=%zu", n);
            free(priv);
        }
        hpml_comm_free_shared(c, out);
        hpml_comm_free_shared(c, in);
        free(ref);
    }
}

/* Exchanges through registered buffers (hpml_comm_shared_peer, hpml_comm_node_sync), as
 * the split layers of nn use them: every round each rank writes its own buffer and its
 * row of local rank 0's, syncs, checks what every rank of its node wrote, and syncs again
 * before the next round writes over it. A sync that did not wait for the node's ranks
 * would let reads see another round's values. Shm allreduces and bcasts in between share
 * the segment's step counters with the syncs. */
static void node_exchange(hpml_comm_t *c, const char *what)
{
    const size_t n = 20000; /* floats per buffer; a row of the shared matrix is 64 */
    const int lr = hpml_comm_local_rank(c), ls = hpml_comm_local_size(c);
    const int first = rank - lr; /* the node's ranks are consecutive */
    float *mine = hpml_comm_alloc_shared(c, n * 4), *mat = hpml_comm_alloc_shared(c, n * 4);
    float *m0 = mat ? hpml_comm_shared_peer(c, mat, 0) : NULL;
    int bad = 0, x = 0;

    HPMLT_CHECK(mine != NULL && m0 != NULL, "%s: registered buffers", what);
    if (mine == NULL || m0 == NULL)
        return;
    HPMLT_CHECK(hpml_comm_shared_peer(c, mine, lr) == mine, "%s: my own copy", what);
    HPMLT_CHECK(hpml_comm_shared_peer(c, mine + 5, ls - 1) ==
                    (float *)hpml_comm_shared_peer(c, mine, ls - 1) + 5,
                "%s: a pointer into the buffer", what);
    HPMLT_CHECK(
        hpml_comm_shared_peer(c, mine, ls) == NULL && hpml_comm_shared_peer(c, mine, -1) == NULL &&
            hpml_comm_shared_peer(c, &x, 0) == NULL && hpml_comm_shared_peer(c, NULL, 0) == NULL &&
            hpml_comm_shared_peer(NULL, mine, 0) == NULL,
        "%s: NULL for a rank outside the node or memory not registered", what);
    for (int it = 0; it < 120 && !bad; it++) {
        for (size_t i = 0; i < n; i++)
            mine[i] = (float)(it * 1000 + rank) + (float)(i % 7);
        for (size_t i = 0; i < 64; i++)
            m0[(size_t)lr * 64 + i] = (float)(it * 1000 + rank);
        HPMLT_CALL(hpml_comm_node_sync(c));
        for (int k = 0; k < ls && !bad; k++) {
            const float *p = hpml_comm_shared_peer(c, mine, k);
            for (size_t i = 0; i < n && !bad; i += 997)
                bad = p[i] != (float)(it * 1000 + first + k) + (float)(i % 7);
            for (size_t i = 0; i < 64 && !bad; i++)
                bad = m0[(size_t)k * 64 + i] != (float)(it * 1000 + first + k);
            HPMLT_CHECK(!bad, "%s: round %d: local rank %d's values not seen", what, it, k);
        }
        if (it % 10 == 3) { /* the segment's other users in between */
            float v[3000];
            for (int i = 0; i < 3000; i++)
                v[i] = (float)(rank + i % 5);
            HPMLT_CALL(hpml_allreduce_algo(HPML_ALGO_SHM, HPML_IN_PLACE, v, it % 20 == 3 ? 3 : 3000,
                                           HPML_F32, HPML_SUM, c));
            HPMLT_CHECK(v[0] == (float)(size * (size - 1) / 2), "%s: allreduce between syncs: %g",
                        what, v[0]);
            HPMLT_CALL(hpml_bcast_algo(HPML_ALGO_SHM, v, 2000, HPML_F32, it % size, c));
        }
        HPMLT_CALL(hpml_comm_node_sync(c));
    }
    hpml_comm_free_shared(c, mat);
    hpml_comm_free_shared(c, mine);
}

/* The node segment is shared with bcast_shm: mixed sequences of shm allreduce
 * and shm bcast of different sizes and roots must neither hang nor corrupt data. */
static void mixed_with_bcast(hpml_comm_t *c)
{
    size_t sizes[] = {3, 5000, 70001, 300007};

    for (int it = 0; it < 24; it++) {
        size_t n = sizes[it % 4], m = sizes[(it * 7 + 1) % 4];
        float *x = malloc(n * 4), *ref = malloc(n * 4), *b = malloc(m * 4);
        int root = it % size, bad = 0;

        fill(x, n, HPML_F32, HPML_SUM, rank);
        reference(ref, n, HPML_F32, HPML_SUM);
        HPMLT_CALL(hpml_allreduce_algo(HPML_ALGO_SHM, HPML_IN_PLACE, x, n, HPML_F32, HPML_SUM, c));
        HPMLT_CHECK(memcmp(x, ref, n * 4) == 0, "mixed: allreduce %zu at iteration %d", n, it);
        for (size_t i = 0; i < m; i++)
            b[i] = rank == root ? (float)(i % 977) + (float)it : -1.0f;
        HPMLT_CALL(hpml_bcast_algo(HPML_ALGO_SHM, b, m, HPML_F32, root, c));
        for (size_t i = 0; i < m && !bad; i++)
            bad = b[i] != (float)(i % 977) + (float)it;
        HPMLT_CHECK(!bad, "mixed: bcast %zu from %d at iteration %d", m, root, it);
        free(x);
        free(ref);
        free(b);
    }
}

/* The shm algorithm writes its pipeline buffers with plain or streaming stores, chosen by
 * each rank on its own from timings (HPML_SHM_NT unset) or fixed (0, 1), possibly
 * differently on different ranks: every choice gives the same bits. Unset, 300 calls of
 * one size class make every rank measure both modes and probe the slower one again.
 * The outputs (HPML_SHM_OUT_NT) go with them: streamed with "1", and with "rank" on the
 * ranks whose buffers are plain, so that both stores of the output are covered in and
 * out of place at these sizes, which are below the size that streams by default. */
static void store_modes(void)
{
    const char *modes[] = {"0", "1", "rank", NULL};
    size_t counts[] = {70001, 300007}, n = 70001;
    hpml_comm_t *c = NULL;

    for (int m = 0; m < 4; m++) {
        char what[64];
        const char *out;

        if (modes[m] == NULL)
            unsetenv("HPML_SHM_NT");
        else
            setenv("HPML_SHM_NT", strcmp(modes[m], "rank") == 0 ? (rank % 2 ? "1" : "0") : modes[m],
                   1);
        if (modes[m] == NULL || strcmp(modes[m], "0") == 0)
            unsetenv("HPML_SHM_OUT_NT");
        else
            setenv("HPML_SHM_OUT_NT", strcmp(modes[m], "rank") == 0 ? (rank % 2 ? "0" : "1") : "1",
                   1);
        out = getenv("HPML_SHM_OUT_NT");
        snprintf(what, sizeof(what), "HPML_SHM_NT=%s HPML_SHM_OUT_NT=%s",
                 modes[m] ? modes[m] : "(unset)", out ? out : "(unset)");
        HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &c));
        matrix(c, counts, 2, 0, 1u << HPML_F32 | 1u << HPML_BF16 | 1u << HPML_I8,
               1u << HPML_SUM | 1u << HPML_MAX, what);
        /* AVG, which the shm algorithm divides as each slice is reduced (in L1 before a
         * streamed output): every store path, f32 quotients that round at 3 ranks. */
        for (size_t k = 0; k < 2; k++) {
            float *ref = malloc(counts[k] * 4);

            reference(ref, counts[k], HPML_F32, HPML_AVG);
            for (int ip = 0; ip < 2; ip++)
                one_case(c, HPML_ALGO_SHM, HPML_F32, HPML_AVG, counts[k], ip, ref, what);
            free(ref);
        }
        if (modes[m] == NULL) {
            float *x = malloc(n * 4), *ref = malloc(n * 4);
            int bad = -1;

            reference(ref, n, HPML_F32, HPML_SUM);
            for (int it = 0; it < 300 && bad < 0; it++) {
                fill(x, n, HPML_F32, HPML_SUM, rank);
                HPMLT_CALL(
                    hpml_allreduce_algo(HPML_ALGO_SHM, HPML_IN_PLACE, x, n, HPML_F32, HPML_SUM, c));
                if (memcmp(x, ref, n * 4) != 0)
                    bad = it;
            }
            HPMLT_CHECK(bad < 0, "%s: call %d of 300 differs from MPI_Allreduce", what, bad);
            free(x);
            free(ref);
        }
        hpml_comm_destroy(c);
        c = NULL;
    }
}

int main(int argc, char **argv)
{
    hpml_comm_t *c = NULL;
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;

    hpmlt_init(&argc, &argv, "test_comm_allreduce");
    rank = hpmlt_rank();
    size = hpmlt_size();
    MPI_Get_library_version(ver, &len);
    is_mpich = strstr(ver, "MPICH") != NULL;
    thin = is_mpich && size > 2;
    {
        size_t p = (size_t)size;
        size_t counts[] = {0, 1, p > 1 ? p - 1 : 2, p, p + 1, 1000};

        HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &c));
        if (is_mpich && size > 2) {
            /* MPICH busy-polls: oversubscribed it is slow, so cover every dtype with two
             * ops and every op with three dtypes. */
            matrix(c, counts, 6, 0, ~0u, 1u << HPML_SUM | 1u << HPML_MAX, "default");
            matrix(c, counts, 6, 0, 1u << HPML_F32 | 1u << HPML_BF16 | 1u << HPML_U8,
                   1u << HPML_PROD | 1u << HPML_MIN | 1u << HPML_AVG, "default");
        } else {
            matrix(c, counts, 6, 1, ~0u, ~0u, "default");
        }
        determinism(c);
        registered(c);
        mixed_with_bcast(c);
        node_exchange(c, "one node");
        hpml_comm_destroy(c);
        c = NULL;
    }
    /* Virtual nodes: every algorithm, fewer dtypes through the size list. */
    for (int k = is_mpich && size > 2 ? 2 : 1; k <= 2; k++) {
        hpml_comm_config_t cfg = {0, k};
        size_t counts[] = {1, (size_t)size + 1, 1000, 70001};

        HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, &cfg, &c));
        HPMLT_CHECK(hpml_comm_nodes(c) == (size + k - 1) / k, "ranks_per_node=%d: %d nodes", k,
                    hpml_comm_nodes(c));
        HPMLT_CHECK(hpml_comm_local_size(c) == (rank / k == size / k ? size - size / k * k : k),
                    "ranks_per_node=%d: local size %d", k, hpml_comm_local_size(c));
        matrix(c, counts, sizeof(counts) / sizeof(counts[0]), 0,
               1u << HPML_F32 | 1u << HPML_BF16 | 1u << HPML_I8,
               1u << HPML_SUM | 1u << HPML_MAX | 1u << HPML_AVG, k == 1 ? "rpn=1" : "rpn=2");
        registered(c);
        node_exchange(c, k == 1 ? "rpn=1" : "rpn=2");
        hpml_comm_destroy(c);
        c = NULL;
    }
    /* Counts above the internal chunk limit are split into several algorithm calls. */
    setenv("HPML_MAX_CHUNK_ELEMS", "100", 1);
    {
        size_t counts[] = {99, 100, 101, 1000, 4097};

        HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &c));
        matrix(c, counts, sizeof(counts) / sizeof(counts[0]), 0,
               1u << HPML_F32 | 1u << HPML_F16 | 1u << HPML_I64, 1u << HPML_SUM | 1u << HPML_PROD,
               "chunked");
        hpml_comm_destroy(c);
    }
    unsetenv("HPML_MAX_CHUNK_ELEMS");
    store_modes();
    return hpmlt_finish();
}
