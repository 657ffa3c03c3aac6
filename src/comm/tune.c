/*
 * The measurement behind `hpml tune`: every algorithm of each collective is timed at
 * sizes growing by 4x up to --max itself (batches of back-to-back calls, maximum over
 * ranks; the table shows the median and the fastest sample). The fastest sample is the one
 * least disturbed by other load on a shared machine, but a fastest sample is itself noisy:
 * the algorithm in force (the selection table's) is kept unless another one's fastest
 * sample is faster by more than the noise, max(5%, the two algorithms' median-to-fastest
 * spreads). Multi-node algorithms (hier) are not candidates on one node. Runs of sizes with
 * the same winner become one rule of the tuning file (boundary halfway, in log scale, to
 * the next size measured).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm_internal.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static int run_once(hpml_comm_t *comm, hpml_coll_t coll, hpml_algo_t algo, float *x, float *y,
                    size_t bytes)
{
    size_t n = bytes / 4 ? bytes / 4 : 1, blk = n / (size_t)comm->size ? n / (size_t)comm->size : 1;

    switch (coll) {
    case HPML_COLL_ALLREDUCE: return hpml_allreduce_algo(algo, x, y, n, HPML_F32, HPML_SUM, comm);
    case HPML_COLL_BCAST: return hpml_bcast_algo(algo, x, n, HPML_F32, 0, comm);
    case HPML_COLL_REDUCE: return hpml_reduce_algo(algo, x, y, n, HPML_F32, HPML_SUM, 0, comm);
    case HPML_COLL_ALLGATHER: return hpml_allgather_algo(algo, x, y, blk, HPML_F32, comm);
    case HPML_COLL_REDUCE_SCATTER:
        return hpml_reduce_scatter_algo(algo, x, y, blk, HPML_F32, HPML_SUM, comm);
    default: return HPML_ERR_INVAL;
    }
}

/* Median and fastest sample (seconds per call, maximum over ranks). */
static int measure(hpml_comm_t *comm, hpml_coll_t coll, hpml_algo_t algo, size_t bytes, int samples,
                   double *median, double *fastest)
{
    size_t n = (bytes / 4 ? bytes / 4 : 1) + (size_t)comm->size; /* allgather: size*blk */
    float *x = NULL, *y = NULL;
    double *s = NULL, t, one;
    int rc = 0, batch, err;

    if (samples <= 0)
        samples = 9;
    x = hpml_malloc(n * 4);
    y = hpml_malloc(n * 4);
    s = malloc(sizeof(double) * (size_t)samples);
    if (x == NULL || y == NULL || s == NULL) {
        rc = HPML_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(i % 1000);
    memset(y, 0, n * 4);
    /* Warm up (segment creation, page faults), then size a batch of ~200 µs. */
    for (int i = 0; i < 3 && rc == 0; i++)
        rc = run_once(comm, coll, algo, x, y, bytes);
    /* Size the batch from the fastest of 3 timed groups of 8 calls: one call alone can
     * be stretched by a descheduled peer. */
    err = rc;
    one = 1e30;
    for (int g = 0; g < 3 && err == 0; g++) {
        double d;

        HPML__MPI(MPI_Barrier(comm->comm));
        t = MPI_Wtime();
        for (int i = 0; i < 8 && err == 0; i++)
            err = run_once(comm, coll, algo, x, y, bytes);
        d = (MPI_Wtime() - t) / 8;
        if (d < one)
            one = d;
    }
    /* Every rank learns whether any rank failed, so none is left in a collective. */
    HPML__MPI(MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_DOUBLE, MPI_MAX, comm->comm));
    HPML__MPI(MPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_INT, MPI_MIN, comm->comm));
    if (err != 0) {
        rc = err;
        goto out;
    }
    batch = one > 2e-4 ? 1 : (int)(2e-4 / (one > 1e-7 ? one : 1e-7));
    if (batch > 1000)
        batch = 1000;
    for (int k = 0; k < samples; k++) {
        HPML__MPI(MPI_Barrier(comm->comm));
        t = MPI_Wtime();
        for (int i = 0; i < batch && rc == 0; i++)
            rc = run_once(comm, coll, algo, x, y, bytes);
        s[k] = (MPI_Wtime() - t) / batch;
        HPML__MPI(MPI_Allreduce(MPI_IN_PLACE, &s[k], 1, MPI_DOUBLE, MPI_MAX, comm->comm));
        if (rc != 0)
            goto out;
    }
    qsort(s, (size_t)samples, sizeof(double), cmp_double);
    *median = s[samples / 2];
    *fastest = s[0];
out:
    hpml_free(x);
    hpml_free(y);
    free(s);
    return rc;
}

int hpml_tune_time(hpml_comm_t *comm, hpml_coll_t coll, hpml_algo_t algo, size_t bytes, int samples,
                   double *seconds)
{
    double fastest;

    if (comm == NULL || seconds == NULL || (unsigned)coll >= HPML_COLL_COUNT ||
        (unsigned)algo >= HPML_ALGO_COUNT)
        return HPML_ERR_INVAL;
    return measure(comm, coll, algo, bytes, samples, seconds, &fastest);
}

int hpml_tune(hpml_comm_t *comm, const hpml_tune_options_t *opt, FILE *out, FILE *report)
{
    hpml_tune_options_t o = {0};
    size_t nsizes = 0, sizes[40];
    char ver[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0, rc = 0;
    time_t now = time(NULL);
    char date[64];

    if (comm == NULL)
        return HPML_ERR_INVAL;
    if (opt != NULL)
        o = *opt;
    if (o.min_bytes == 0)
        o.min_bytes = 8;
    if (o.max_bytes == 0)
        o.max_bytes = (size_t)16 << 20;
    if (o.colls == 0)
        o.colls = (1u << HPML_COLL_COUNT) - 1;
    if (o.min_bytes > o.max_bytes)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_tune: min_bytes %zu > max_bytes %zu",
                              o.min_bytes, o.max_bytes);
    for (size_t b = o.min_bytes; b <= o.max_bytes && nsizes < 39; b *= 4)
        sizes[nsizes++] = b;
    if (sizes[nsizes - 1] < o.max_bytes) /* --max is measured, not only approached */
        sizes[nsizes++] = o.max_bytes;
    MPI_Get_library_version(ver, &len);
    strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", gmtime(&now));
    if (comm->rank == 0 && out != NULL) {
        fprintf(out, "hpml-tuning 1\n");
        fprintf(out, "# written by hpml tune (hpml %s) on %s: %d rank%s, %d node%s\n",
                hpml_version(), date, comm->size, comm->size == 1 ? "" : "s", comm->nodes,
                comm->nodes == 1 ? "" : "s");
        fprintf(out, "# MPI: %.*s\n", (int)strcspn(ver, "\n"), ver);
        fprintf(out, "# collective  ranks nodes max_bytes algorithm\n");
    }
    for (int c = 0; c < HPML_COLL_COUNT; c++) {
        const hpml_algo_t *algos;
        size_t nalgos;
        hpml_algo_t best[40];

        if (!(o.colls >> c & 1))
            continue;
        hpml_algo_list((hpml_coll_t)c, &algos, &nalgos);
        if (comm->rank == 0 && report != NULL) {
            fprintf(report, "# %s: µs per call, %d rank%s, %d node%s\n# %10s",
                    hpml_coll_name((hpml_coll_t)c), comm->size, comm->size == 1 ? "" : "s",
                    comm->nodes, comm->nodes == 1 ? "" : "s", "bytes");
            for (size_t a = 0; a < nalgos; a++)
                fprintf(report, " %18s", hpml_algo_name(algos[a]));
            fprintf(report, "\n# %10s", "");
            for (size_t a = 0; a < nalgos; a++)
                fprintf(report, " %8s %9s", "median", "fastest");
            fprintf(report, "  best\n");
        }
        for (size_t k = 0; k < nsizes; k++) {
            hpml_algo_t cur = hpml_algo_selected(comm, (hpml_coll_t)c, sizes[k]), fast = cur;
            double tf = 0, sf = 0, tc = 0, sc = 0, noise;

            if (comm->rank == 0 && report != NULL)
                fprintf(report, "  %10zu", sizes[k]);
            for (size_t a = 0; a < nalgos; a++) {
                double med = 0, t = 0;
                int r;

                if (algos[a] == HPML_ALGO_HIER && comm->nodes == 1) {
                    if (comm->rank == 0 && report != NULL)
                        fprintf(report, " %18s", "(one node)");
                    continue;
                }
                r = measure(comm, (hpml_coll_t)c, algos[a], sizes[k], o.samples, &med, &t);
                if (r == HPML_ERR_NOMEM || r == HPML_ERR_MPI) {
                    rc = r;
                    goto out;
                }
                /* An algorithm that fails here (unsupported layout) is simply not chosen. */
                if (r == 0 && (tf == 0 || t < tf)) {
                    tf = t;
                    sf = med > 0 ? (med - t) / med : 0;
                    fast = algos[a];
                }
                if (r == 0 && algos[a] == cur) {
                    tc = t;
                    sc = med > 0 ? (med - t) / med : 0;
                }
                if (comm->rank == 0 && report != NULL) {
                    if (r == 0)
                        fprintf(report, " %8.2f %9.2f", med * 1e6, t * 1e6);
                    else
                        fprintf(report, " %18s", "n/a");
                }
            }
            /* Keep the algorithm in force unless the fastest beats it by more than the
             * noise; one that was not measured (failed here) is replaced. */
            noise = sf + sc > 0.05 ? sf + sc : 0.05;
            best[k] = tc > 0 && fast != cur && tf > tc * (1 - noise) ? cur : fast;
            if (comm->rank == 0 && report != NULL) {
                if (best[k] != fast)
                    fprintf(report, "  %s (kept: %s only %.0f%% faster, noise %.0f%%)\n",
                            hpml_algo_name(best[k]), hpml_algo_name(fast), 100 * (1 - tf / tc),
                            100 * noise);
                else if (fast != cur && tc > 0)
                    fprintf(report, "  %s (%.0f%% faster than %s, noise %.0f%%)\n",
                            hpml_algo_name(best[k]), 100 * (1 - tf / tc), hpml_algo_name(cur),
                            100 * noise);
                else
                    fprintf(report, "  %s\n", hpml_algo_name(best[k]));
                fflush(report);
            }
        }
        if (comm->rank == 0 && out != NULL) {
            for (size_t k = 0; k < nsizes; k++) {
                if (k + 1 < nsizes && best[k + 1] == best[k])
                    continue;
                fprintf(out, "%-14s %d %d ", hpml_coll_name((hpml_coll_t)c), comm->size,
                        comm->nodes);
                if (k + 1 < nsizes) /* halfway in log scale: 2x below the next 4x size */
                    fprintf(out, "%zu", sizes[k + 1] / 2 > sizes[k] ? sizes[k + 1] / 2 : sizes[k]);
                else
                    fprintf(out, "inf");
                fprintf(out, " %s\n", hpml_algo_name(best[k]));
            }
        }
    }
out:
    return rc;
}
