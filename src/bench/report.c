/*
 * Printing a benchmark result: OMB-shaped text for one implementation (a left-aligned size
 * of width 10, then right-aligned values of width 18 with 2 decimals, so existing OMB
 * parsers keep working), a compact table per statistic with a speed-up column for several
 * implementations, CSV (one row per implementation and size) and JSON.
 */
#include <math.h>
#include <string.h>

#include "bench/bench_internal.h"

enum {
    ST_AVG,
    ST_MIN,
    ST_MAX,
    ST_ITERS,
    ST_PCT,
    ST_VALID,
    ST_MAXRANK,
    ST_BUSBW,
    ST_BW,
    ST_RATE,
    ST_OVERALL,
    ST_COMPUTE,
    ST_PURE,
    ST_OVERLAP
};

typedef struct {
    int stat, pct;
    const char *hdr;
} stat_t;

/* The statistic columns for the result's case and options, OMB's first, hpml's after. */
static int stat_columns(const hpml_bench_result_t *r, stat_t *st, char pct_hdr[][32])
{
    int n = 0;
    const char *lat = r->kind == HPML_BENCH_KIND_LAT ? "Latency (us)" : "Avg Latency(us)";

    switch (r->kind) {
    case HPML_BENCH_KIND_BW: st[n++] = (stat_t){ST_BW, 0, "Bandwidth (MB/s)"}; break;
    case HPML_BENCH_KIND_MBW:
        st[n++] = (stat_t){ST_BW, 0, "MB/s"};
        st[n++] = (stat_t){ST_RATE, 0, "Messages/s"};
        break;
    case HPML_BENCH_KIND_NBC:
        st[n++] = (stat_t){ST_OVERALL, 0, "Overall(us)"};
        st[n++] = (stat_t){ST_COMPUTE, 0, "Compute(us)"};
        st[n++] = (stat_t){ST_PURE, 0, "Pure Comm.(us)"};
        st[n++] = (stat_t){ST_OVERLAP, 0, "Overlap(%)"};
        break;
    default: st[n++] = (stat_t){ST_AVG, 0, lat}; break;
    }
    if (r->full && r->kind != HPML_BENCH_KIND_BW && r->kind != HPML_BENCH_KIND_MBW) {
        int nbc = r->kind == HPML_BENCH_KIND_NBC;

        st[n++] = (stat_t){ST_MIN, 0, nbc ? "Min Overall(us)" : "Min Latency(us)"};
        st[n++] = (stat_t){ST_MAX, 0, nbc ? "Max Overall(us)" : "Max Latency(us)"};
        st[n++] = (stat_t){ST_ITERS, 0, "Iterations"};
    }
    for (int k = 0; k < r->npct; k++) {
        snprintf(pct_hdr[k], 32, "P%g Tail Lat(us)", r->pct[k]);
        st[n++] = (stat_t){ST_PCT, k, pct_hdr[k]};
    }
    if (r->validate)
        st[n++] = (stat_t){ST_VALID, 0, "Validation"};
    /* hpml's additions, after OMB's columns. With several implementations they come
     * only with -f, so that the default table stays one column per implementation.
     * latency and bw time on one rank only: no maximum across ranks there. */
    if (r->nimpls > 1 && !r->full)
        return n;
    if (r->kind == HPML_BENCH_KIND_COLL || r->kind == HPML_BENCH_KIND_BARRIER ||
        r->kind == HPML_BENCH_KIND_NBC ||
        (r->kind == HPML_BENCH_KIND_LAT && strcmp(r->case_name, "multi_lat") == 0))
        st[n++] = (stat_t){ST_MAXRANK, 0, "MaxRank Lat(us)"};
    if ((r->kind == HPML_BENCH_KIND_COLL || r->kind == HPML_BENCH_KIND_NBC) &&
        !isnan(r->rows[0].busbw))
        st[n++] = (stat_t){ST_BUSBW, 0, "BusBW(MB/s)"};
    return n;
}

static double value(const hpml_bench_row_t *w, int stat, int k)
{
    switch (stat) {
    case ST_AVG: return w->avg;
    case ST_MIN: return w->min;
    case ST_MAX: return w->max;
    case ST_ITERS: return (double)w->iters;
    case ST_PCT: return w->pct[k];
    case ST_MAXRANK: return w->maxrank;
    case ST_BUSBW: return w->busbw;
    case ST_BW: return w->bw;
    case ST_RATE: return w->msg_rate;
    case ST_OVERALL: return w->overall;
    case ST_COMPUTE: return w->compute;
    case ST_PURE: return w->pure;
    case ST_OVERLAP: return w->overlap;
    default: return NAN;
    }
}

/* One implementation: OMB's own layout, one column per statistic. */
static void print_single(FILE *f, const hpml_bench_result_t *r)
{
    stat_t st[32];
    char pct_hdr[HPML_BENCH_MAX_PCT][32];
    int ns = stat_columns(r, st, pct_hdr), sized = r->kind != HPML_BENCH_KIND_BARRIER;
    int width[32];

    if (sized)
        fprintf(f, "%-10s", "# Size");
    else
        fprintf(f, "#");
    for (int s = 0; s < ns; s++) {
        int w = (int)strlen(st[s].hdr) + 2;

        width[s] = w > 18 ? w : 18;
        fprintf(f, "%*s", width[s] - (!sized && s == 0), st[s].hdr);
    }
    fprintf(f, "\n");
    for (size_t z = 0; z < r->nsizes; z++) {
        const hpml_bench_row_t *w = &r->rows[z];

        if (sized)
            fprintf(f, "%-10zu", w->size);
        for (int s = 0; s < ns; s++) {
            if (st[s].stat == ST_VALID)
                fprintf(f, "%*s", width[s], w->valid == 1 ? "Pass" : "Fail");
            else if (st[s].stat == ST_ITERS)
                fprintf(f, "%*ld", width[s], w->iters);
            else
                fprintf(f, "%*.2f", width[s], value(w, st[s].stat, st[s].pct));
        }
        fprintf(f, "\n");
    }
}

/* A short column name for an implementation: "hpml:" dropped, long algorithm names cut
 * to 9 characters (the legend line spells them out). */
static void short_name(const char *impl, char *out, size_t len)
{
    static const char *const abbrev[][2] = {{"recursive_doubling", "rec_dbl"},
                                            {"rabenseifner", "rabenseif"},
                                            {"reduce_bcast", "red_bcast"},
                                            {"scatter_allgather", "scat_allg"}};
    const char *n = strncmp(impl, "hpml:", 5) == 0 ? impl + 5 : impl;

    for (size_t a = 0; a < sizeof(abbrev) / sizeof(abbrev[0]); a++)
        if (strcmp(n, abbrev[a][0]) == 0)
            n = abbrev[a][1];
    snprintf(out, len, "%.9s", n);
}

/* The speed-up column of a statistic: +1 when lower is better (times), -1 when higher is
 * better (bandwidths, rates), 0 for none (counts, validation, compute alone, overlap). */
static int better(int stat)
{
    switch (stat) {
    case ST_AVG:
    case ST_MIN:
    case ST_MAX:
    case ST_PCT:
    case ST_MAXRANK:
    case ST_OVERALL:
    case ST_PURE: return 1;
    case ST_BUSBW:
    case ST_BW:
    case ST_RATE: return -1;
    default: return 0;
    }
}

/* Print word after the text already on the line (at characters; 0: a new line, begun with
 * head), wrapping at 100 columns onto "#   " lines; returns the new line length. A word
 * ending in a newline ends the line. */
static int words(FILE *f, int at, const char *head, const char *word)
{
    int n = (int)strlen(word);

    if (at == 0 && head != NULL)
        at = fprintf(f, "%s", head);
    if (at + 1 + n > 100 + (word[n - 1] == '\n'))
        at = fprintf(f, "\n#  ");
    at += fprintf(f, " %s", word);
    return word[n - 1] == '\n' ? 0 : at;
}

/*
 * Several implementations: one table per statistic, a column of width 10 per
 * implementation (short names, spelled out in a legend line) and, where native MPI is
 * one of them, a speed-up column: MPI's value over the best hpml implementation's for
 * times, the inverse for bandwidths. Eight implementations fit in 100 columns.
 */
static void print_multi(FILE *f, const hpml_bench_result_t *r)
{
    stat_t st[32];
    char pct_hdr[HPML_BENCH_MAX_PCT][32], name[16];
    int ns = stat_columns(r, st, pct_hdr), sized = r->kind != HPML_BENCH_KIND_BARRIER;
    int mpi = -1, legend = 0, at = 0;

    for (int i = 0; i < r->nimpls; i++)
        if (r->impls[i].native && mpi < 0)
            mpi = i;
    for (int i = 0; i < r->nimpls; i++) {
        const char *full = r->impls[i].name;
        char item[80];

        short_name(full, name, sizeof(name));
        if (strcmp(name, full) != 0 && strcmp(full + 5, name) != 0) {
            snprintf(item, sizeof(item), "%s = %s,", name, full);
            at = words(f, at, legend++ ? NULL : "# Columns:", item);
        }
    }
    if (legend)
        words(f, at, NULL, "the rest without hpml:.\n");
    for (int s = 0; s < ns; s++) {
        int up = mpi >= 0 && r->nimpls > 1 ? better(st[s].stat) : 0;

        fprintf(f, "# %s%s\n", st[s].hdr,
                up > 0   ? "; speed-up = mpi / fastest hpml"
                : up < 0 ? "; speed-up = best hpml / mpi"
                         : "");
        fprintf(f, sized ? "%-8s" : "#", sized ? "# Size" : "");
        for (int i = 0; i < r->nimpls; i++) {
            short_name(r->impls[i].name, name, sizeof(name));
            fprintf(f, "%*s", !sized && i == 0 ? 9 : 10, name);
        }
        fprintf(f, "%s\n", up ? "  speed-up" : "");
        for (size_t z = 0; z < r->nsizes; z++) {
            double best = NAN, base = NAN;

            if (sized)
                fprintf(f, "%-8zu", r->rows[z].size);
            for (int i = 0; i < r->nimpls; i++) {
                const hpml_bench_row_t *w = &r->rows[(size_t)i * r->nsizes + z];
                double v = value(w, st[s].stat, st[s].pct);

                if (st[s].stat == ST_VALID)
                    fprintf(f, "%10s", w->valid == 1 ? "Pass" : "Fail");
                else if (st[s].stat == ST_ITERS)
                    fprintf(f, "%10ld", w->iters);
                else
                    fprintf(f, "%10.2f", v);
                if (i == mpi)
                    base = v;
                else if (!isnan(v) && (isnan(best) || (up > 0 ? v < best : v > best)))
                    best = v;
            }
            if (up) {
                double x = up > 0 ? base / best : best / base;

                if (isfinite(x))
                    fprintf(f, "  %7.2fx", x);
                else
                    fprintf(f, "  %8s", "-");
            }
            fprintf(f, "\n");
        }
    }
}

void hpml_bench_print_text(FILE *f, const hpml_bench_result_t *r)
{
    fprintf(f, "# OSU MPI %s (hpml %s)\n", r->title, hpml_version());
    fprintf(f, "# Datatype: %s.\n", r->dtype_label);
    {
        char head[64], last[40];
        int at = 0;

        snprintf(head, sizeof(head), "# Ranks: %d. Implementations:", r->ranks);

        for (int i = 0; i + 1 < r->nimpls; i++)
            at = words(f, at, head, r->impls[i].name);
        snprintf(last, sizeof(last), "%s.\n", r->impls[r->nimpls - 1].name);
        words(f, at, head, last);
    }
    if (r->note[0])
        fprintf(f, "# Note: %s.\n", r->note);
    if (r->nimpls > 1)
        print_multi(f, r);
    else
        print_single(f, r);
    fflush(f);
}

static void csv_num(FILE *f, double v)
{
    if (isnan(v))
        fprintf(f, ",");
    else
        fprintf(f, ",%.4f", v);
}

void hpml_bench_print_csv(FILE *f, const hpml_bench_result_t *r, int header)
{
    if (header) {
        fprintf(f, "case,impl,dtype,ranks,size,iterations,avg_us,min_us,max_us,maxrank_us,"
                   "bw_MBps,msg_rate,algbw_MBps,busbw_MBps,overall_us,compute_us,pure_us,"
                   "overlap_pct,validation");
        for (int k = 0; k < r->npct; k++)
            fprintf(f, ",p%g_us", r->pct[k]);
        fprintf(f, "\n");
    }
    for (int i = 0; i < r->nimpls; i++)
        for (size_t z = 0; z < r->nsizes; z++) {
            const hpml_bench_row_t *w = &r->rows[(size_t)i * r->nsizes + z];

            fprintf(f, "%s,%s,%s,%d,%zu,%ld", r->case_name, r->impls[i].name,
                    hpml_dtype_name(r->dtype), r->ranks, w->size, w->iters);
            csv_num(f, w->avg);
            csv_num(f, w->min);
            csv_num(f, w->max);
            csv_num(f, w->maxrank);
            csv_num(f, w->bw);
            csv_num(f, w->msg_rate);
            csv_num(f, w->algbw);
            csv_num(f, w->busbw);
            csv_num(f, w->overall);
            csv_num(f, w->compute);
            csv_num(f, w->pure);
            csv_num(f, w->overlap);
            fprintf(f, ",%s", w->valid < 0 ? "" : w->valid ? "pass" : "fail");
            for (int k = 0; k < r->npct; k++)
                csv_num(f, w->pct[k]);
            fprintf(f, "\n");
        }
    fflush(f);
}

static void json_num(FILE *f, const char *key, double v)
{
    if (!isnan(v))
        fprintf(f, ", \"%s\": %.4f", key, v);
}

void hpml_bench_print_json(FILE *f, const hpml_bench_result_t *r)
{
    fprintf(f,
            "{\"schema_version\": %d, \"command\": \"bench\", \"benchmark\": \"%s\", "
            "\"title\": ",
            HPML_JSON_SCHEMA_VERSION, r->case_name);
    hpml_json_string(f, r->title);
    fprintf(f, ", \"timestamp\": \"%s\", \"hpml_version\": \"%s\", \"hpml_commit\": ", r->timestamp,
            hpml_version());
    hpml_json_string(f, hpml_build_commit());
    fprintf(f, ", \"mpi_library\": ");
    hpml_json_string(f, r->mpi_library);
    fprintf(f, ", \"mpi_standard\": \"%d.%d\", \"ranks\": %d, \"nodes\": %d, \"hosts\": [",
            r->mpi_version[0], r->mpi_version[1], r->ranks, r->nhosts);
    for (int i = 0; i < r->nhosts; i++) {
        fprintf(f, "%s{\"host\": ", i ? ", " : "");
        hpml_json_string(f, r->hosts[i]);
        fprintf(f, ", \"ranks\": %d}", r->host_ranks[i]);
    }
    fprintf(f,
            "], \"dtype\": \"%s\", \"mpi_datatype\": \"%s\", \"op\": ", hpml_dtype_name(r->dtype),
            r->dtype_label);
    if (r->op != NULL)
        fprintf(f, "\"%s\"", r->op);
    else
        fprintf(f, "null");
    fprintf(f, ", \"in_place\": %s, \"root_mode\": %s, \"root\": ", r->in_place ? "true" : "false",
            !r->rooted       ? "null"
            : r->root_rotate ? "\"rotate\""
                             : "\"fixed\"");
    if (r->rooted && !r->root_rotate)
        fprintf(f, "%d", r->root);
    else
        fprintf(f, "null");
    fprintf(f, ", \"iterations_requested\": ");
    if (r->iters_opt > 0)
        fprintf(f, "%ld", r->iters_opt);
    else
        fprintf(f, "null");
    fprintf(f, ", \"warmup_requested\": ");
    if (r->warmup_opt >= 0)
        fprintf(f, "%ld", r->warmup_opt);
    else
        fprintf(f, "null");
    fprintf(f, ", \"implementations\": [");
    for (int i = 0; i < r->nimpls; i++)
        fprintf(f, "%s\"%s\"", i ? ", " : "", r->impls[i].name);
    fprintf(f, "], \"note\": ");
    hpml_json_string(f, r->note);
    fprintf(f, ", \"results\": [");
    for (int i = 0; i < r->nimpls; i++)
        for (size_t z = 0; z < r->nsizes; z++) {
            const hpml_bench_row_t *w = &r->rows[(size_t)i * r->nsizes + z];

            fprintf(f,
                    "%s\n  {\"impl\": \"%s\", \"size\": %zu, \"iterations\": %ld, "
                    "\"warmup\": %ld",
                    i || z ? "," : "", r->impls[i].name, w->size, w->iters, w->warmup);
            json_num(f, "avg_us", w->avg);
            json_num(f, "min_us", w->min);
            json_num(f, "max_us", w->max);
            json_num(f, "maxrank_us", w->maxrank);
            json_num(f, "bw_MBps", w->bw);
            json_num(f, "msg_rate", w->msg_rate);
            json_num(f, "algbw_MBps", w->algbw);
            json_num(f, "busbw_MBps", w->busbw);
            json_num(f, "overall_us", w->overall);
            json_num(f, "compute_us", w->compute);
            json_num(f, "pure_us", w->pure);
            json_num(f, "overlap_pct", w->overlap);
            if (r->npct > 0) {
                fprintf(f, ", \"percentiles_us\": {");
                for (int k = 0; k < r->npct; k++)
                    fprintf(f, "%s\"p%g\": %.4f", k ? ", " : "", r->pct[k], w->pct[k]);
                fprintf(f, "}");
            }
            if (w->valid >= 0) {
                fprintf(f, ", \"validation\": \"%s\"", w->valid ? "pass" : "fail");
                if (!w->valid) {
                    fprintf(f, ", \"validation_detail\": ");
                    hpml_json_string(f, w->note);
                }
            }
            fprintf(f, "}");
        }
    fprintf(f, "\n]}\n");
    fflush(f);
}
