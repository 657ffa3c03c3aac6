/*
 * The bench library API (include/hpml/bench.h): --impl resolution for every case, a
 * small validated run of every collective with every implementation, the statistics'
 * invariants (min <= avg <= max <= per-iteration max across ranks, busbw = algbw *
 * factor), HPML_BENCH_BREAK=drop-last turning every non-empty hpml row into a
 * validation failure while native MPI rows still pass, and alltoall's hpml implementation
 * refusing -l (hpml_alltoallv has no in-place form); hpml_bench_time_blocking on the
 * caller's buffers against MPI_Allreduce and MPI_Bcast, and its refusals; the statistics
 * reduced after the sweep, from one store and from a store reduced between sizes.
 *
 * hpml-test: ranks=2 3 4
 * hpml-test: mpich-ranks=2
 * hpml-test: timeout=300
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hpml/bench.h"

static void check_rows(const hpml_bench_result_t *r, int expect_break)
{
    for (int i = 0; i < r->nimpls; i++)
        for (size_t z = 0; z < r->nsizes; z++) {
            const hpml_bench_row_t *w = &r->rows[(size_t)i * r->nsizes + z];
            int hpml_row = !r->impls[i].native;

            HPMLT_CHECK(w->avg >= 0 && w->min >= 0, "%s %s size %zu: avg %g min %g", r->case_name,
                        r->impls[i].name, w->size, w->avg, w->min);
            HPMLT_CHECK(w->min <= w->avg * (1 + 1e-12) && w->avg <= w->max * (1 + 1e-12),
                        "%s %s size %zu: min %g avg %g max %g", r->case_name, r->impls[i].name,
                        w->size, w->min, w->avg, w->max);
            HPMLT_CHECK(w->maxrank >= w->max * (1 - 1e-12), "%s %s size %zu: maxrank %g < max %g",
                        r->case_name, r->impls[i].name, w->size, w->maxrank, w->max);
            if (!isnan(w->busbw) && r->kind == HPML_BENCH_KIND_COLL && w->avg > 0)
                HPMLT_CHECK(w->busbw >= 0 && w->algbw >= w->size / w->avg * (1 - 1e-9),
                            "%s size %zu: algbw %g busbw %g", r->case_name, w->size, w->algbw,
                            w->busbw);
            if (expect_break && hpml_row && w->size < (size_t)r->ranks * 4)
                continue; /* small sizes may leave some ranks an empty result */
            if (expect_break && hpml_row)
                HPMLT_CHECK(w->valid == 0, "%s %s size %zu: broken result passed validation",
                            r->case_name, r->impls[i].name, w->size);
            else
                HPMLT_CHECK(w->valid == 1, "%s %s size %zu: validation %d (%s)", r->case_name,
                            r->impls[i].name, w->size, w->valid, w->note);
        }
}

/* The statistics reduced after the sweep (slowest rank per iteration, percentiles), with
 * the whole sweep's times in one store and with HPML_BENCH_STORE=40 (two sizes' 16
 * iterations fit, so the store is reduced between sizes): every row lands where it
 * belongs, on every rank alike. 16 percentiles at 6.25, 12.5, ..., 100 are the 16 sorted
 * per-iteration means across ranks, so their mean is avg exactly; a row given another
 * row's times breaks that. The slowest rank's mean lies between max and ranks * p100. */
static void check_deferred_stats(void)
{
    for (int cap = 0; cap < 2; cap++) {
        hpml_bench_opts_t o;
        hpml_bench_result_t *r = NULL;
        char note[160];

        if (cap)
            setenv("HPML_BENCH_STORE", "40", 1);
        hpml_bench_opts_init(&o);
        o.case_name = "allreduce";
        o.dtype = HPML_F32;
        o.min_size = 4;
        o.max_size = 8192; /* every size small: 16 iterations each */
        o.iters = 16;
        o.warmup = 2;
        o.npct = 16;
        for (int j = 0; j < 16; j++)
            o.pct[j] = 6.25 * (j + 1);
        HPMLT_CALL(hpml_bench_parse_impls("allreduce", "mpi,hpml", &o, note, sizeof(note)));
        HPMLT_CALL(hpml_bench_run(MPI_COMM_WORLD, &o, &r));
        unsetenv("HPML_BENCH_STORE");
        if (r == NULL)
            continue;
        HPMLT_CHECK(r->nsizes == 12, "%zu sizes", r->nsizes);
        for (size_t k = 0; k < r->nsizes * (size_t)r->nimpls; k++) {
            const hpml_bench_row_t *w = &r->rows[k];
            const double e = 1e-9;
            double mean = 0;
            int sorted = 1;

            for (int j = 0; j < 16; j++) {
                mean += w->pct[j] / 16;
                sorted &= j == 0 || w->pct[j - 1] <= w->pct[j];
            }
            HPMLT_CHECK(
                w->iters == 16 && sorted && fabs(mean - w->avg) <= e * w->avg,
                "store %d size %zu: %ld iterations, percentiles sorted %d, their mean %.17g "
                "against avg %.17g",
                cap, w->size, w->iters, sorted, mean, w->avg);
            HPMLT_CHECK(w->max <= w->maxrank * (1 + e) &&
                            w->maxrank <= r->ranks * w->pct[15] * (1 + e),
                        "store %d size %zu: max %g maxrank %g p100 %g", cap, w->size, w->max,
                        w->maxrank, w->pct[15]);
        }
        /* Every rank holds rank 0's rows. */
        {
            size_t bytes = r->nsizes * (size_t)r->nimpls * sizeof(*r->rows);
            hpml_bench_row_t *root = malloc(bytes);

            if (hpmlt_rank() == 0)
                memcpy(root, r->rows, bytes);
            MPI_Bcast(root, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
            HPMLT_CHECK(memcmp(root, r->rows, bytes) == 0, "store %d: rows differ from rank 0's",
                        cap);
            free(root);
        }
        hpml_bench_result_free(r);
    }
}

/* hpml_bench_time_blocking: allreduce (out of place and in place, hpml and mpi) and bcast
 * on this test's own buffers and communicators give MPI's own results, with one positive
 * time per timed iteration; unknown cases, several implementations and bad sizes are
 * refused with a message. */
static void check_time_blocking(void)
{
    enum { N = 1000, ITERS = 4 };
    float *s = malloc(N * sizeof(float)), *r = malloc(N * sizeof(float)),
          *want = malloc(N * sizeof(float));
    double t[ITERS + 1];
    hpml_comm_t *hc = NULL;
    int rank = hpmlt_rank(), rc;

    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &hc));
    if (hc == NULL || s == NULL || r == NULL || want == NULL) {
        HPMLT_CHECK(0, "%s", "allocation");
        goto out;
    }
    for (int i = 0; i < N; i++)
        s[i] = (float)((rank + 1) * (i % 7));
    MPI_Allreduce(s, want, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int k = 0; k < 3; k++) {
        const char *impl = k == 1 ? "mpi" : "hpml";

        memset(r, 0, N * sizeof(float));
        if (k == 2)
            memcpy(r, s, N * sizeof(float));
        t[ITERS] = -1;
        /* In place repeats the sum: one timed iteration, no warm-up. */
        HPMLT_CALL(hpml_bench_time_blocking(MPI_COMM_WORLD, hc, "allreduce", impl,
                                            k == 2 ? HPML_IN_PLACE : s, r, N * sizeof(float),
                                            HPML_F32, k == 2 ? 1 : ITERS, k == 2 ? 0 : 2, t));
        HPMLT_CHECK(memcmp(r, want, N * sizeof(float)) == 0, "time_blocking allreduce %s%s", impl,
                    k == 2 ? " in place" : "");
        for (int i = 0; i < (k == 2 ? 1 : ITERS); i++)
            HPMLT_CHECK(t[i] > 0 && t[i] < 1e7, "time_blocking: t[%d] = %g us", i, t[i]);
        HPMLT_CHECK(t[ITERS] == -1, "%s", "time_blocking wrote past iters");
    }
    for (int i = 0; i < N; i++)
        r[i] = rank == 0 ? s[i] : 0;
    MPI_Bcast(s, N, MPI_FLOAT, 0, MPI_COMM_WORLD);
    HPMLT_CALL(hpml_bench_time_blocking(MPI_COMM_WORLD, hc, "bcast", "hpml", NULL, r,
                                        N * sizeof(float), HPML_F32, ITERS, 1, t));
    HPMLT_CHECK(memcmp(r, s, N * sizeof(float)) == 0, "%s", "time_blocking bcast");
    rc =
        hpml_bench_time_blocking(MPI_COMM_WORLD, hc, "reduce", "hpml", s, r, 64, HPML_F32, 1, 0, t);
    HPMLT_CHECK(rc == HPML_ERR_INVAL && strstr(hpml_last_error(), "'reduce'") != NULL,
                "time_blocking reduce: %d '%s'", rc, hpml_last_error());
    rc = hpml_bench_time_blocking(MPI_COMM_WORLD, hc, "allreduce", "mpi,hpml", s, r, 64, HPML_F32,
                                  1, 0, t);
    HPMLT_CHECK(rc == HPML_ERR_INVAL && strstr(hpml_last_error(), "not one") != NULL,
                "time_blocking two impls: %d '%s'", rc, hpml_last_error());
    rc = hpml_bench_time_blocking(MPI_COMM_WORLD, hc, "allreduce", "hpml", s, r, 6, HPML_F32, 1, 0,
                                  t);
    HPMLT_CHECK(rc == HPML_ERR_INVAL && strstr(hpml_last_error(), "6 bytes") != NULL,
                "time_blocking 6 bytes: %d '%s'", rc, hpml_last_error());
    rc = hpml_bench_time_blocking(MPI_COMM_WORLD, NULL, "allreduce", "hpml", s, r, 64, HPML_F32, 1,
                                  0, t);
    HPMLT_CHECK(rc == HPML_ERR_INVAL, "time_blocking hpml without hcomm: %d", rc);
out:
    hpml_comm_destroy(hc);
    free(s);
    free(r);
    free(want);
}

int main(int argc, char **argv)
{
    static const char *const colls[] = {"allreduce",      "bcast",    "reduce", "allgather",
                                        "reduce_scatter", "alltoall", "gather", "scatter",
                                        "iallreduce",     "ibcast",   NULL};
    const char *const *names;
    hpml_bench_opts_t o;
    hpml_bench_result_t *r = NULL;
    char note[200];
    int n = 0, rc;

    hpmlt_init(&argc, &argv, "test_bench");

    names = hpml_bench_cases();
    while (names[n] != NULL)
        n++;
    HPMLT_CHECK(n == 16, "%d cases", n);
    HPMLT_OK(!hpml_bench_case_exists("allreduz"));

    /* --impl resolution. */
    hpml_bench_opts_init(&o);
    HPMLT_CALL(hpml_bench_parse_impls("allreduce", "all", &o, note, sizeof(note)));
    HPMLT_CHECK(o.nimpls >= 4 && o.impls[0].native && strcmp(o.impls[1].name, "hpml") == 0,
                "allreduce all: %d impls", o.nimpls);
    /* alltoall: one hpml implementation (hpml_alltoallv) and no algorithm choice. */
    HPMLT_CALL(hpml_bench_parse_impls("alltoall", "all", &o, note, sizeof(note)));
    HPMLT_CHECK(o.nimpls == 2 && o.impls[0].native && !o.impls[1].native &&
                    strcmp(o.impls[1].name, "hpml") == 0 && note[0] == '\0',
                "alltoall all: %d, '%s'", o.nimpls, note);
    HPMLT_CALL(hpml_bench_parse_impls("alltoall", "hpml", &o, note, sizeof(note)));
    HPMLT_CHECK(o.nimpls == 1 && !o.impls[0].native, "alltoall hpml: %d", o.nimpls);
    HPMLT_OK(hpml_bench_parse_impls("alltoall", "hpml:ring", &o, note, sizeof(note)) ==
             HPML_ERR_INVAL);
    /* gather: no hpml implementation at all. */
    HPMLT_CALL(hpml_bench_parse_impls("gather", "all", &o, note, sizeof(note)));
    HPMLT_CHECK(o.nimpls == 1 && o.impls[0].native && note[0] != '\0', "gather all: %d, '%s'",
                o.nimpls, note);
    HPMLT_OK(hpml_bench_parse_impls("gather", "hpml", &o, note, sizeof(note)) == HPML_ERR_INVAL);
    HPMLT_OK(hpml_bench_parse_impls("allreduce", "hpml:nope", &o, note, sizeof(note)) ==
             HPML_ERR_INVAL);
    HPMLT_CALL(hpml_bench_parse_impls("allreduce", "mpi,hpml:ring,mpi", &o, note, sizeof(note)));
    HPMLT_CHECK(o.nimpls == 2, "duplicates kept: %d", o.nimpls);

    /* Every collective, every implementation, validated, in place on odd rank counts,
     * a rotating root on even ones. */
    for (int b = 0; b < 2; b++) {
        if (b == 1)
            setenv("HPML_BENCH_BREAK", "drop-last", 1);
        for (int c = 0; colls[c] != NULL; c++) {
            hpml_bench_opts_init(&o);
            o.case_name = colls[c];
            o.max_size = 256;
            o.iters = 3;
            o.warmup = 1;
            o.validate = 1;
            o.dtype = b ? HPML_BF16 : HPML_F32;
            o.in_place = hpmlt_size() % 2 == 1 && b == 0;
            o.root_rotate = hpmlt_size() % 2 == 0;
            /* hpml_alltoallv has no in-place form: in place, alltoall is native MPI's alone
             * (hpml's in-place refusal and its out-of-place run follow the loop). */
            HPMLT_CALL(hpml_bench_parse_impls(
                colls[c], o.in_place && strcmp(colls[c], "alltoall") == 0 ? "mpi" : "all", &o, note,
                sizeof(note)));
            HPMLT_CALL(hpml_bench_run(MPI_COMM_WORLD, &o, &r));
            if (r == NULL)
                continue;
            /* 0, then powers of two from one element (4 B f32, 2 B bf16) to 256. */
            HPMLT_CHECK(r->nsizes == (size_t)(b ? 9 : 8), "%s: %zu sizes", colls[c], r->nsizes);
            HPMLT_CHECK(r->rows[0].size == 0, "%s: size 0 not first", colls[c]);
            check_rows(r, b);
            if (b == 0)
                HPMLT_CHECK(hpml_bench_failures(r) == 0, "%s: %d failures", colls[c],
                            hpml_bench_failures(r));
            hpml_bench_result_free(r);
            r = NULL;
        }
    }
    unsetenv("HPML_BENCH_BREAK");

    /* alltoall in place with the hpml implementation: refused by hpml_bench_parse_impls,
     * and by the run when the options were set another way, alike on every rank, with a
     * message naming the option and the case; out of place, hpml's runs and validates at
     * every rank count, next to MPI's. */
    hpml_bench_opts_init(&o);
    o.case_name = "alltoall";
    o.max_size = 64;
    o.iters = 2;
    o.warmup = 1;
    o.validate = 1;
    o.dtype = HPML_I32;
    o.in_place = 1;
    rc = hpml_bench_parse_impls("alltoall", "mpi,hpml", &o, note, sizeof(note));
    HPMLT_CHECK(rc == HPML_ERR_INVAL &&
                    strstr(hpml_last_error(), "-l/--in-place with alltoall --impl hpml") != NULL,
                "alltoall in place with hpml, parsing: rc %d, '%s'", rc, hpml_last_error());
    o.in_place = 0;
    HPMLT_CALL(hpml_bench_parse_impls("alltoall", "mpi,hpml", &o, note, sizeof(note)));
    o.in_place = 1;
    rc = hpml_bench_run(MPI_COMM_WORLD, &o, &r);
    HPMLT_CHECK(rc == HPML_ERR_UNSUPPORTED && r == NULL &&
                    strstr(hpml_last_error(), "-l/--in-place") != NULL &&
                    strstr(hpml_last_error(), "alltoall") != NULL,
                "alltoall in place with hpml: rc %d, '%s'", rc, hpml_last_error());
    hpml_bench_result_free(r);
    r = NULL;
    o.in_place = 0;
    HPMLT_CALL(hpml_bench_run(MPI_COMM_WORLD, &o, &r));
    if (r != NULL) {
        HPMLT_CHECK(r->nimpls == 2 && r->nsizes == 6, "alltoall: %d impls, %zu sizes", r->nimpls,
                    r->nsizes);
        check_rows(r, 0);
        HPMLT_CHECK(hpml_bench_failures(r) == 0, "alltoall: %d failures", hpml_bench_failures(r));
    }
    hpml_bench_result_free(r);
    r = NULL;
    hpml_bench_result_free(NULL);
    check_time_blocking();
    check_deferred_stats();
    return hpmlt_finish();
}
