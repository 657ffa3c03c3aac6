/*
 * The communicator and the selection table: accessors and virtual nodes, barrier,
 * algorithm names, HPML_ALGO_<COLL> forcing, the built-in allreduce table across virtual
 * nodes, tuning files (valid ones change the choice, malformed ones fail hpml_comm_create
 * with HPML_ERR_FORMAT naming the file and line),
 * hpml_select_describe, create/destroy with a registered buffer still allocated, and
 * ranks whose settings disagree (every rank fails hpml_comm_create with one message
 * naming the setting and two ranks, instead of hanging in a later collective).
 *
 * hpml-test: ranks=1 2 3
 * hpml-test: mpich-ranks=1 2
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hpml/comm.h"

static int rank, size;
static char path[256];

/* Rank 0 writes `text` to the shared temporary tuning file; everyone waits. The first
 * barrier keeps rank 0 from rewriting the file while a peer still reads the last one. */
static void write_file(const char *text)
{
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        FILE *f = fopen(path, "w");

        if (f != NULL) {
            fputs(text, f);
            fclose(f);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* hpml_comm_create with HPML_TUNING_FILE=path must fail with `code` and a message
 * containing `needle`. */
static void expect_bad(const char *text, int code, const char *needle)
{
    hpml_comm_t *c = NULL;
    int rc;

    write_file(text);
    setenv("HPML_TUNING_FILE", path, 1);
    rc = hpml_comm_create(MPI_COMM_WORLD, NULL, &c);
    HPMLT_CHECK(rc == code && c == NULL, "tuning file '%s': rc=%d, expected %d", text, rc, code);
    HPMLT_CHECK(strstr(hpml_last_error(), needle) != NULL && strstr(hpml_last_error(), path),
                "tuning file '%s': message '%s' lacks '%s' or the path", text, hpml_last_error(),
                needle);
    if (c != NULL)
        hpml_comm_destroy(c);
    unsetenv("HPML_TUNING_FILE");
}

static void basics(void)
{
    hpml_comm_t *c = NULL;
    hpml_comm_config_t cfg = {0, 2};
    int cmp;

    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &c));
    HPMLT_OK(hpml_comm_rank(c) == rank && hpml_comm_size(c) == size);
    HPMLT_OK(hpml_comm_nodes(c) == 1 && hpml_comm_node(c) == 0); /* one machine */
    HPMLT_OK(hpml_comm_local_rank(c) == rank && hpml_comm_local_size(c) == size);
    MPI_Comm_compare(hpml_comm_mpi(c), MPI_COMM_WORLD, &cmp);
    HPMLT_CHECK(cmp == MPI_CONGRUENT, "the communicator is a duplicate (compare=%d)", cmp);
    HPMLT_CALL(hpml_barrier(c));
    /* A registered buffer still allocated at destroy is freed by destroy. */
    HPMLT_OK(hpml_comm_alloc_shared(c, 1000) != NULL);
    hpml_comm_destroy(c);
    hpml_comm_destroy(NULL);

    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, &cfg, &c));
    HPMLT_CHECK(hpml_comm_nodes(c) == (size + 1) / 2 && hpml_comm_node(c) == rank / 2 &&
                    hpml_comm_local_rank(c) == rank % 2,
                "virtual nodes of 2: nodes=%d node=%d local=%d", hpml_comm_nodes(c),
                hpml_comm_node(c), hpml_comm_local_rank(c));
    hpml_comm_destroy(c);

    HPMLT_OK(hpml_comm_create(MPI_COMM_NULL, NULL, &c) == HPML_ERR_INVAL);
}

static void names(void)
{
    const hpml_algo_t *l;
    hpml_algo_t a;
    size_t n;

    for (int i = 0; i < HPML_ALGO_COUNT; i++) {
        HPMLT_CHECK(hpml_algo_parse(hpml_algo_name((hpml_algo_t)i), &a) == 0 && (int)a == i,
                    "round trip of '%s'", hpml_algo_name((hpml_algo_t)i));
    }
    HPMLT_OK(hpml_algo_parse("rd", &a) == 0 && a == HPML_ALGO_RECURSIVE_DOUBLING);
    HPMLT_OK(hpml_algo_parse("Reduce-Bcast", &a) == 0 && a == HPML_ALGO_REDUCE_BCAST);
    HPMLT_OK(hpml_algo_parse("nope", &a) == HPML_ERR_INVAL);
    HPMLT_OK(strcmp(hpml_coll_name(HPML_COLL_REDUCE_SCATTER), "reduce_scatter") == 0);
    HPMLT_OK(strcmp(hpml_algo_name(HPML_ALGO_COUNT), "?") == 0);
    for (int c = 0; c < HPML_COLL_COUNT; c++) {
        HPMLT_OK(hpml_algo_list((hpml_coll_t)c, &l, &n) == 0 && n >= 1 && l[0] == HPML_ALGO_MPI);
    }
    HPMLT_OK(hpml_algo_list(HPML_COLL_ALLREDUCE, &l, &n) == 0 && n == 7);
}

static void forcing(void)
{
    hpml_comm_t *c = NULL;
    int rc;

    setenv("HPML_ALGO_ALLREDUCE", "ring", 1);
    setenv("HPML_ALGO_BCAST", "chain", 1);
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &c));
    if (c != NULL) {
        HPMLT_OK(hpml_algo_selected(c, HPML_COLL_ALLREDUCE, 8) == HPML_ALGO_RING);
        HPMLT_OK(hpml_algo_selected(c, HPML_COLL_ALLREDUCE, 1 << 24) == HPML_ALGO_RING);
        HPMLT_OK(hpml_algo_selected(c, HPML_COLL_BCAST, 100) == HPML_ALGO_CHAIN);
        hpml_comm_destroy(c);
        c = NULL;
    }
    /* An algorithm that does not do the collective is refused up front. */
    setenv("HPML_ALGO_ALLREDUCE", "bruck", 1);
    rc = hpml_comm_create(MPI_COMM_WORLD, NULL, &c);
    HPMLT_CHECK(rc == HPML_ERR_INVAL && strstr(hpml_last_error(), "HPML_ALGO_ALLREDUCE"),
                "HPML_ALGO_ALLREDUCE=bruck: rc=%d '%s'", rc, hpml_last_error());
    setenv("HPML_ALGO_ALLREDUCE", "fastest", 1);
    rc = hpml_comm_create(MPI_COMM_WORLD, NULL, &c);
    HPMLT_CHECK(rc == HPML_ERR_INVAL, "HPML_ALGO_ALLREDUCE=fastest: rc=%d", rc);
    unsetenv("HPML_ALGO_ALLREDUCE");
    unsetenv("HPML_ALGO_BCAST");
}

/* The built-in allreduce table across (virtual) nodes: 2 nodes of 1 rank each run hier
 * from 4 KiB to 32 KiB - 1 and the library elsewhere, but with Open MPI the library from
 * 8 KiB to 16 KiB - 1 (its fixed rules for 2 ranks run recursive doubling there, one
 * exchange as hier: coll_tuned_decision_fixed.c in Open MPI 4.1); more nodes of 1 rank
 * the library at every size; 2 nodes, one of 2 ranks, the library below 1 MiB and hier
 * from 1 MiB (at 4 ranks and more, tests/cli/cluster.sh's `hpml info` shows the table on
 * real nodes). */
static void builtin_across_nodes(void)
{
    const size_t sizes[] = {8,     4095,  4096,  8191,    8192,   16383,
                            16384, 32767, 32768, 1 << 20, 1 << 24};
    hpml_comm_config_t one = {0, 1}, two = {0, 2};
    hpml_comm_t *c = NULL;
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0, ompi;

    MPI_Get_library_version(version, &len);
    ompi = strstr(version, "Open MPI") != NULL;

    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, &one, &c));
    for (size_t i = 0; c != NULL && i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = sizes[i];
        int pair = size == 2 && n >= 4096 && n < 32768 && !(ompi && n >= 8192 && n < 16384);
        hpml_algo_t want = pair ? HPML_ALGO_HIER : HPML_ALGO_MPI;
        hpml_algo_t got = hpml_algo_selected(c, HPML_COLL_ALLREDUCE, n);

        HPMLT_CHECK(got == want, "%d nodes of 1 rank, %zu bytes: %s, expected %s", size, n,
                    hpml_algo_name(got), hpml_algo_name(want));
    }
    hpml_comm_destroy(c);
    c = NULL;
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, &two, &c));
    for (size_t i = 0; c != NULL && i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = sizes[i];
        hpml_algo_t want = size == 1        ? HPML_ALGO_MPI
                           : size == 2      ? HPML_ALGO_SHM
                           : n >= (1 << 20) ? HPML_ALGO_HIER
                                            : HPML_ALGO_MPI;
        hpml_algo_t got = hpml_algo_selected(c, HPML_COLL_ALLREDUCE, n);

        HPMLT_CHECK(got == want, "%d ranks in nodes of 2, %zu bytes: %s, expected %s", size, n,
                    hpml_algo_name(got), hpml_algo_name(want));
    }
    hpml_comm_destroy(c);
}

static void tuning_files(void)
{
    hpml_comm_t *c = NULL;
    char text[512];

    /* Rules: the most specific match wins, then the smallest max_bytes that holds. */
    snprintf(text, sizeof(text),
             "# a comment\n\nhpml-tuning 1\n"
             "allreduce * * inf mpi\n"
             "allreduce %d * 1K ring   # trailing comment\n"
             "allreduce %d * 64K rabenseifner\n"
             "allreduce %d 1 inf reduce_bcast\n"
             "bcast * * 4K binomial\n",
             size, size, size + 1);
    write_file(text);
    setenv("HPML_TUNING_FILE", path, 1);
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &c));
    unsetenv("HPML_TUNING_FILE");
    if (c != NULL) {
        HPMLT_OK(hpml_algo_selected(c, HPML_COLL_ALLREDUCE, 1024) == HPML_ALGO_RING);
        HPMLT_OK(hpml_algo_selected(c, HPML_COLL_ALLREDUCE, 1025) == HPML_ALGO_RABENSEIFNER);
        HPMLT_OK(hpml_algo_selected(c, HPML_COLL_ALLREDUCE, 1 << 20) == HPML_ALGO_MPI);
        HPMLT_OK(hpml_algo_selected(c, HPML_COLL_BCAST, 4096) == HPML_ALGO_BINOMIAL);
        /* Sizes no rule covers fall back to the built-in table. */
        HPMLT_OK(hpml_algo_selected(c, HPML_COLL_BCAST, 4097) != HPML_ALGO_AUTO);
        if (rank == 0) {
            char *buf = NULL;
            size_t len = 0;
            FILE *m = open_memstream(&buf, &len);

            HPMLT_CALL(hpml_select_describe(c, m, 0));
            fclose(m);
            HPMLT_CHECK(strstr(buf, path) && strstr(buf, "ring") && strstr(buf, "rabenseifner"),
                        "describe: %s", buf);
            free(buf);
            buf = NULL;
            m = open_memstream(&buf, &len);
            HPMLT_CALL(hpml_select_describe(c, m, 1));
            fclose(m);
            HPMLT_CHECK(buf[0] == '{' && strstr(buf, "\"allreduce\"") && strstr(buf, "\"ring\""),
                        "describe json: %s", buf);
            free(buf);
        }
        hpml_comm_destroy(c);
    }

    expect_bad("", HPML_ERR_FORMAT, "header");
    expect_bad("allreduce * * inf mpi\n", HPML_ERR_FORMAT, ":1:");
    expect_bad("hpml-tuning 2\n", HPML_ERR_FORMAT, ":1:");
    expect_bad("hpml-tuning 1\nallreduce * * inf\n", HPML_ERR_FORMAT, ":2:");
    expect_bad("hpml-tuning 1\nallreduce * * inf mpi\nallgatherv * * inf mpi\n", HPML_ERR_FORMAT,
               ":3: unknown collective");
    expect_bad("hpml-tuning 1\nallreduce 0 * inf mpi\n", HPML_ERR_FORMAT, ":2:");
    expect_bad("hpml-tuning 1\nallreduce two * inf mpi\n", HPML_ERR_FORMAT, ":2:");
    expect_bad("hpml-tuning 1\nallreduce * * 12Q mpi\n", HPML_ERR_FORMAT, "max_bytes");
    expect_bad("hpml-tuning 1\nallreduce * * -5 mpi\n", HPML_ERR_FORMAT, "max_bytes");
    expect_bad("hpml-tuning 1\nallreduce * * inf bruck\n", HPML_ERR_FORMAT,
               "not an algorithm for allreduce");
    expect_bad("hpml-tuning 1\nbcast * * inf warp\n", HPML_ERR_FORMAT, ":2:");
    {
        /* A line longer than the reader's buffer. */
        char longline[1200];

        memcpy(longline, "hpml-tuning 1\n", 14);
        memset(longline + 14, 'x', sizeof(longline) - 16);
        longline[sizeof(longline) - 2] = '\n';
        longline[sizeof(longline) - 1] = '\0';
        expect_bad(longline, HPML_ERR_FORMAT, "too long");
    }
    /* A file that is not there. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        unlink(path);
    MPI_Barrier(MPI_COMM_WORLD);
    setenv("HPML_TUNING_FILE", path, 1);
    {
        int rc = hpml_comm_create(MPI_COMM_WORLD, NULL, &c);

        HPMLT_CHECK(rc == HPML_ERR_IO && strstr(hpml_last_error(), path),
                    "missing tuning file: rc=%d '%s'", rc, hpml_last_error());
    }
    unsetenv("HPML_TUNING_FILE");
}

/* hpml_comm_create must fail on every rank with `code` and a message containing both
 * needles (NULL: not checked); nobody hangs. Environment changes are made and undone by
 * the caller. */
static void expect_disagree(const char *what, const hpml_comm_config_t *cfg, int code,
                            const char *n1, const char *n2)
{
    hpml_comm_t *c = NULL;
    int rc = hpml_comm_create(MPI_COMM_WORLD, cfg, &c);
    const char *msg = hpml_last_error();

    HPMLT_CHECK(rc == code && c == NULL, "%s: rc=%d, expected %d ('%s')", what, rc, code, msg);
    HPMLT_CHECK((n1 == NULL || strstr(msg, n1)) && (n2 == NULL || strstr(msg, n2)),
                "%s: message '%s' lacks '%s' or '%s'", what, msg, n1 ? n1 : "", n2 ? n2 : "");
    if (c != NULL)
        hpml_comm_destroy(c);
}

static void disagreement(void)
{
    hpml_comm_config_t cfg = {0, 0};
    char needle[64];
    hpml_comm_t *c = NULL;

    if (size < 2)
        return;
    /* A protocol setting on the last rank only. */
    if (rank == size - 1)
        setenv("HPML_SHM_CHUNK", "65536", 1);
    snprintf(needle, sizeof(needle), "rank %d has '65536'", size - 1);
    expect_disagree("HPML_SHM_CHUNK on one rank", NULL, HPML_ERR_INVAL, "HPML_SHM_CHUNK", needle);
    /* The same value everywhere is fine, however it is written, and so are values the
     * reader treats alike (only "mpi" changes HPML_PROGRESS). */
    setenv("HPML_SHM_CHUNK", rank == 0 ? "64K" : "65536", 1);
    if (rank == 1)
        setenv("HPML_PROGRESS", "thread", 1);
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &c));
    hpml_comm_destroy(c);
    c = NULL;
    unsetenv("HPML_SHM_CHUNK");
    unsetenv("HPML_PROGRESS");

    /* A forced algorithm on rank 0 only. */
    if (rank == 0)
        setenv("HPML_ALGO_ALLREDUCE", "ring", 1);
    expect_disagree("HPML_ALGO_ALLREDUCE on rank 0", NULL, HPML_ERR_INVAL,
                    "HPML_ALGO_ALLREDUCE=ring", "rank 1 has the built-in table");
    unsetenv("HPML_ALGO_ALLREDUCE");

    /* Configurations that differ. */
    cfg.check = rank == 1;
    expect_disagree("check on rank 1", &cfg, HPML_ERR_INVAL, "HPML_CHECK", "rank 1 has 1");
    cfg.check = 0;

    /* A malformed value on the last rank only: that rank's error reaches everyone. */
    if (rank == size - 1)
        setenv("HPML_RANKS_PER_NODE", "two", 1);
    snprintf(needle, sizeof(needle), "rank %d: HPML_RANKS_PER_NODE", size - 1);
    expect_disagree("bad HPML_RANKS_PER_NODE on one rank", NULL, HPML_ERR_INVAL,
                    rank == size - 1 ? "HPML_RANKS_PER_NODE='two'" : needle, NULL);
    unsetenv("HPML_RANKS_PER_NODE");

    /* A tuning file only rank 0 cannot read. */
    if (rank == 0)
        setenv("HPML_TUNING_FILE", "/nonexistent/hpml-tuning.txt", 1);
    expect_disagree("unreadable tuning file on rank 0", NULL, HPML_ERR_IO,
                    "/nonexistent/hpml-tuning.txt", rank == 0 ? NULL : "rank 0: ");
    unsetenv("HPML_TUNING_FILE");

    /* After all that, a plain communicator still works. */
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, &c));
    HPMLT_CALL(hpml_barrier(c));
    hpml_comm_destroy(c);
}

int main(int argc, char **argv)
{
    int pid;

    hpmlt_init(&argc, &argv, "test_comm_select");
    rank = hpmlt_rank();
    size = hpmlt_size();
    pid = (int)getpid();
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    snprintf(path, sizeof(path), "/tmp/hpml-test-tuning-%d.txt", pid);
    unsetenv("HPML_TUNING_FILE");
    unsetenv("HPML_RANKS_PER_NODE");

    basics();
    names();
    forcing();
    builtin_across_nodes();
    tuning_files();
    disagreement();
    if (rank == 0)
        unlink(path);
    return hpmlt_finish();
}
