/* Unit tests for `hpml prof merge` (src/prof/report.c) on rank files written here: sums
 * over ranks and threads, the last complete snapshot of each rank, incomplete runs (a
 * snapshot cut short, a rank without a file, a rank stopped by a signal), files of an
 * earlier run, and malformed files refused with HPML_ERR_FORMAT; and the trace's flows
 * (src/prof/trace_json.c) into receives posted with MPI_Irecv, matched in the order
 * posted, and none into a rank whose MPI_Irecv calls outnumber the completions seen. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "hpml/core.h"
#include "hpml/prof.h"

static char dir[64];

static void put(const char *name, const char *text)
{
    char path[128];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void clear(void)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -f %s/*", dir);
    assert_int_equal(system(cmd), 0);
}

/* The JSON report of dir, in a string the caller frees. */
static char *json_of(hpml_prof_report_t *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    assert_non_null(f);
    hpml_prof_write_json(r, f);
    fclose(f);
    return buf;
}

#define HEAD(rank) "hpml-prof 1\nr run1 " #rank " 2 100 host 5000\n"

/* Rank 0: two snapshots (the second final); rank 1: final. */
static const char *rank0 = HEAD(0) "s 1 run 1000\nc MPI_Send 1 10 10 10 8\ne 1\n"
                                   "s 2 final 2000000000\n"
                                   "c MPI_Send 4 400 50 200 32\n"
                                   "c MPI_Allreduce 2 1000 400 600 16\n"
                                   "g 0 2 0 1\n"
                                   "h MPI_Send 0 4:4\n"
                                   "m 1 4 32\n"
                                   "f 0 /data/my%20file.npy\n"
                                   "i 0 read 3 300 50 150 12288\n"
                                   "j 0 13:3\n"
                                   "k MPI_Send 1 /bin/prog 0 1234 main 4 400 50 200 32\n"
                                   "a hpml_allreduce%20ring 2 2000 900 1100 16 6 1500 48 6 48\n"
                                   "e 2\n";
static const char *rank1 = HEAD(1) "s 1 final 1000000000\n"
                                   "c MPI_Send 2 100 40 60 16\n"
                                   "c MPI_Allreduce 2 3000 1000 2000 16\n"
                                   "g 3 2 0 1\n"
                                   "h MPI_Send 3 4:2\n"
                                   "m 0 2 16\n"
                                   "f 7 /data/my%20file.npy\n"
                                   "i 7 read 1 100 100 100 4096\n"
                                   "j 7 13:1\n"
                                   "k MPI_Send 1 /bin/prog 0 1234 main 2 100 40 60 16\n"
                                   "e 1\n";

static void test_complete_run(void **state)
{
    hpml_prof_report_t *r = NULL;
    char *j;

    (void)state;
    clear();
    put("rank-0.prof", rank0);
    put("rank-1.prof", rank1);
    /* An earlier, bigger run's file in the same folder: ignored. */
    put("rank-2.prof", "hpml-prof 1\nr run0 2 3 99 host 4000\ns 1 final 5\ne 1\n");
    assert_int_equal(hpml_prof_load(dir, &r), 0);
    assert_int_equal(hpml_prof_ranks(r), 2);
    assert_true(hpml_prof_complete(r));
    assert_string_equal(hpml_prof_incomplete_why(r), "");
    j = json_of(r);
    assert_non_null(strstr(j, "\"stale_files\": 1"));
    /* Sums over ranks: sends 4 + 2, min over both, the last snapshot of rank 0 only. */
    assert_non_null(strstr(j, "{\"name\": \"MPI_Send\", \"count\": 6, \"total_s\": 0.000000500, "
                              "\"min_s\": 0.000000040, \"max_s\": 0.000000200, \"bytes\": 48"));
    assert_non_null(strstr(j, "\"count\": [4, 2]"));
    /* The groups numbered 0 and 3 in the two files are one communicator: world. */
    assert_non_null(
        strstr(j, "{\"call\": \"MPI_Send\", \"comm\": \"world\", \"world_ranks\": [0, 1],\n"
                  "     \"bins\": [{\"bin\": 4, \"lo\": 8, \"hi\": 15, \"count\": 6}]}"));
    assert_non_null(strstr(j, "\"messages\": [\n      [0, 4],\n      [2, 0]"));
    assert_non_null(strstr(j, "\"path\": \"/data/my file.npy\", \"calls\": [{\"name\": \"read\", "
                              "\"count\": 4"));
    assert_non_null(
        strstr(j, "\"call\": \"hpml_allreduce\", \"algorithm\": \"ring\", \"count\": 2"));
    /* One call site, summed over the ranks; /bin/prog is no ELF file: its symbol. */
    assert_non_null(strstr(j, "{\"call\": \"MPI_Send\", \"count\": 6"));
    assert_non_null(strstr(j, "\"where\": \"main (/bin/prog)\""));
    free(j);
    hpml_prof_report_free(r);
}

/* HPML_PROF_SELF's 'p' line: the last snapshot's, in rank_info and the text report's prof
 * column; a rank without one has null and '-'. */
static void test_self_time(void **state)
{
    hpml_prof_report_t *r = NULL;
    char *j, *t = NULL;
    size_t len = 0;
    FILE *f;

    (void)state;
    clear();
    put("rank-0.prof", HEAD(0) "s 1 run 1000\np 1 10 20 30 22\ne 1\n"
                               "s 2 final 2000000000\np 12 1500000 400000 200000 22\ne 2\n");
    put("rank-1.prof", HEAD(1) "s 1 final 1000000000\ne 1\n");
    assert_int_equal(hpml_prof_load(dir, &r), 0);
    j = json_of(r);
    assert_non_null(strstr(j, "\"profiler_self\": {\"s\": 0.002100000, \"calls\": 12, "
                              "\"calls_s\": 0.001500000, \"start_s\": 0.000400000, "
                              "\"snapshots_s\": 0.000200000, \"clock_read_s\": 0.000000022}}"));
    assert_non_null(strstr(j, "\"host\": \"host\", \"profiler_self\": null}"));
    free(j);
    f = open_memstream(&t, &len);
    assert_non_null(f);
    hpml_prof_write_text(r, f, 0);
    fclose(f);
    /* 2.1 ms of 2 s: 0.105% */
    assert_non_null(strstr(t, "prof   prof%  host\n"));
    assert_non_null(strstr(t, "   0.002100  0.105%  host\n"));
    assert_non_null(strstr(t, "          -       -  host\n"));
    free(t);
    hpml_prof_report_free(r);
}

static void test_incomplete_runs(void **state)
{
    hpml_prof_report_t *r = NULL;
    char *cut, *j;

    (void)state;
    /* Rank 1 stopped by SIGTERM; rank 0's final snapshot cut short: its first counts. */
    clear();
    cut = strdup(rank0);
    assert_non_null(cut);
    *strstr(cut, "e 2\n") = '\0';
    put("rank-0.prof", cut);
    free(cut);
    put("rank-1.prof", HEAD(1) "s 1 signal:15 1500000000\nc MPI_Recv 1 5 5 5 0\ne 1\n");
    assert_int_equal(hpml_prof_load(dir, &r), 0);
    assert_false(hpml_prof_complete(r));
    assert_string_equal(hpml_prof_incomplete_why(r),
                        "rank 0: last periodic snapshot after 0.0 s (stopped early); "
                        "rank 1: signal 15 after 1.5 s");
    j = json_of(r);
    assert_non_null(strstr(j, "\"count\": [1, 0]"));
    assert_non_null(strstr(j, "\"state\": \"signal:15\""));
    free(j);
    hpml_prof_report_free(r);

    /* A rank without a file, one with its header only. */
    clear();
    put("rank-1.prof", HEAD(1));
    assert_int_equal(hpml_prof_load(dir, &r), 0);
    assert_string_equal(hpml_prof_incomplete_why(r), "rank 0: no file; rank 1: no snapshot");
    hpml_prof_report_free(r);
}

static void test_malformed(void **state)
{
    static const char *bad[] = {
        "hpml-prof 2\nr run1 0 2 1 h 1\n",         /* another version */
        "hpml-prof 1\nr run1 2 2 1 h 1\n",         /* rank >= size */
        HEAD(0) "s 1 final 1\nm 2 1 1\ne 1\n",     /* a peer past the ranks */
        HEAD(0) "s 1 final 1\ng 0 3 0 1 2\ne 1\n", /* a group larger than the job */
        HEAD(0) "s 1 final 1\ng 0 2 0 1\nh MPI_Send 0 99:1\ne 1\n", /* a bin past the last */
        HEAD(0) "s 1 final 1\nh MPI_Send 5 1:1\ne 1\n",             /* an undefined group */
        HEAD(0) "s 1 final 1\ni 0 read 1 1 1 1 1\ne 1\n",           /* an undefined file */
        HEAD(0) "s 1 final 1\nc MPI_Send 1 2\ne 1\n",               /* a short line */
        HEAD(0) "s 1 final 1\nz what\ne 1\n",                       /* an unknown line */
        HEAD(0) "s 1 final 1\np 1 2 3\ne 1\n",                      /* a short self-time line */
        HEAD(0) "s 1 final 1\nk MPI_Send 3 a 0 0 b\ne 1\n",         /* a call site 3 deep */
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hpml_prof_report_t *r = (hpml_prof_report_t *)&r;

        clear();
        put("rank-0.prof", bad[i]);
        put("rank-1.prof", rank1);
        assert_int_equal(hpml_prof_load(dir, &r), HPML_ERR_FORMAT);
        assert_null(r);
    }
    clear();
    {
        hpml_prof_report_t *r = NULL;

        assert_int_equal(hpml_prof_load(dir, &r), HPML_ERR_IO);
        assert_non_null(strstr(hpml_last_error(), "no profiler files"));
    }
}

/* A trace event as libhpml-prof.so writes it (src/prof/prof.h, prof_event_t). */
typedef struct {
    uint64_t t0, t1, bytes;
    int32_t id, gid, speer, stag, rpeer, rtag, tid, pad;
} event_t;

enum { SEND, RECV, IRECV, WAIT, RECV_DONE = 2002 };

/* dir/rank-<rank>.trace of run1 with the events ev[0..n). */
static void put_trace(int rank, const event_t *ev, size_t n)
{
    char path[128];
    FILE *f;

    snprintf(path, sizeof(path), "%s/rank-%d.trace", dir, rank);
    f = fopen(path, "wb");
    assert_non_null(f);
    fprintf(f,
            "hpml-trace 1\nr run1 %d 2 1000000 %zu\nc MPI_Send MPI_Recv MPI_Irecv MPI_Wait\n"
            "o read\ndata\n",
            rank, sizeof(event_t));
    assert_int_equal(fwrite(ev, sizeof(event_t), n, f), n);
    fclose(f);
}

/* The "ts" of the flow ends ("f") in dir/trace.json.gz, in the file's order. */
static int flow_ends(double *ts, int max)
{
    char path[128], buf[1 << 16], *p;
    gzFile gz;
    int n = 0, len;

    snprintf(path, sizeof(path), "%s/trace.json.gz", dir);
    assert_non_null(gz = gzopen(path, "rb"));
    len = gzread(gz, buf, sizeof(buf) - 1);
    gzclose(gz);
    assert_true(len > 0);
    buf[len] = '\0';
    for (p = buf; (p = strstr(p, "\"ph\": \"f\"")) != NULL && n < max; p++) {
        char *t = strstr(p, "\"ts\": ");

        assert_non_null(t);
        ts[n++] = strtod(t + 6, NULL);
    }
    return n;
}

static void test_irecv_flows(void **state)
{
    /* Rank 0 sends 8 then 16 bytes (tag 1) to rank 1, which posted two MPI_Irecv (from
     * 0, tag 1) before, and waited for the second first: the first send's flow ends in
     * the second MPI_Wait (55 us), the second's in the first (35 us). */
    const event_t sends[] = {
        {10000, 11000, 8, SEND, 0, 1, 1, -1, -1, 0, 0},
        {20000, 21000, 16, SEND, 0, 1, 1, -1, -1, 0, 0},
    };
    event_t recvs[] = {
        {5000, 5100, 64, IRECV, 0, -1, -1, 0, 1, 0, 0},
        {6000, 6100, 64, IRECV, 0, -1, -1, 0, 1, 0, 0},
        {30000, 40000, 0, WAIT, -1, -1, -1, -1, -1, 0, 0},
        {6000, 35000, 16, RECV_DONE, 0, -1, -1, 0, 1, 0, 0},
        {50000, 60000, 0, WAIT, -1, -1, -1, -1, -1, 0, 0},
        {5000, 55000, 8, RECV_DONE, 0, -1, -1, 0, 1, 0, 0},
        {70000, 70100, 64, IRECV, 0, -1, -1, 0, 1, 0, 0}, /* never completed (case 2) */
    };
    static const char *snap = "s 1 final 1000000\ng 0 2 0 1\nx 0 1000\ne 1\n";
    hpml_prof_report_t *r = NULL;
    unsigned long long events = 0;
    char path[128], text[256];
    double ts[4];

    (void)state;
    snprintf(path, sizeof(path), "%s/trace.json.gz", dir);
    for (int c = 0; c < 2; c++) {
        clear();
        for (int k = 0; k < 2; k++) {
            snprintf(text, sizeof(text), "hpml-prof 1\nr run1 %d 2 100 host 5000\n%s", k, snap);
            put(k ? "rank-1.prof" : "rank-0.prof", text);
        }
        put_trace(0, sends, 2);
        put_trace(1, recvs, c == 0 ? 6 : 7);
        assert_int_equal(hpml_prof_load(dir, &r), 0);
        assert_int_equal(hpml_prof_write_trace(r, dir, path, &events), 0);
        hpml_prof_report_free(r);
        if (c == 0) {
            /* 2 + 6 events, less the 2 completions (not drawn), and 2 flows of 2 events. */
            assert_int_equal(events, 2 + 4 + 4);
            assert_int_equal(flow_ends(ts, 4), 2);
            assert_true(ts[0] > 54.9 && ts[0] < 55.1);
            assert_true(ts[1] > 34.9 && ts[1] < 35.1);
        } else {
            assert_int_equal(events, 2 + 5);
            assert_int_equal(flow_ends(ts, 4), 0);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_complete_run),    cmocka_unit_test(test_self_time),
        cmocka_unit_test(test_incomplete_runs), cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_irecv_flows),
    };
    int rc;

    snprintf(dir, sizeof(dir), "/tmp/hpml-prof-unit.XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    clear();
    rmdir(dir);
    return rc;
}
