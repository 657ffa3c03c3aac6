/*
 * Algorithm selection for every collective: HPML_ALGO_<COLL> forces a choice; otherwise
 * the rules of HPML_TUNING_FILE (written by `hpml tune`), then the built-in table,
 * keyed by (collective, ranks, nodes, bytes).
 *
 * Tuning file format (text; '#' starts a comment; blank lines ignored):
 *     hpml-tuning 1
 *     # collective  ranks  nodes  max_bytes  algorithm
 *     allreduce     2      1      4096       shm
 *     allreduce     *      *      inf        ring
 * ranks/nodes "*" match any communicator; a rule applies to messages of at most
 * max_bytes bytes (suffixes K M G, or "inf"). Among the rules whose ranks/nodes match,
 * the most specific (ranks and nodes given > ranks given > nodes given > neither) wins,
 * then the smallest max_bytes that holds the message.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"
#include "comm/shm_internal.h"
#include "core/settings_internal.h"

typedef struct {
    hpml_coll_t coll;
    int ranks;        /* 0: any */
    int nodes;        /* 0: any */
    size_t max_bytes; /* SIZE_MAX: no limit */
    hpml_algo_t algo;
    int lib; /* 0: any MPI library; else the one it holds for (hpml__mpi_lib) */
} rule_t;

struct hpml_select {
    rule_t *rules; /* from the tuning file */
    size_t n;
    char *path;
    hpml_algo_t forced[HPML_COLL_COUNT];
};

static const char *const algo_names[HPML_ALGO_COUNT] = {
    [HPML_ALGO_AUTO] = "auto",
    [HPML_ALGO_MPI] = "mpi",
    [HPML_ALGO_RECURSIVE_DOUBLING] = "recursive_doubling",
    [HPML_ALGO_RING] = "ring",
    [HPML_ALGO_RABENSEIFNER] = "rabenseifner",
    [HPML_ALGO_REDUCE_BCAST] = "reduce_bcast",
    [HPML_ALGO_SHM] = "shm",
    [HPML_ALGO_HIER] = "hier",
    [HPML_ALGO_BINOMIAL] = "binomial",
    [HPML_ALGO_SCATTER_ALLGATHER] = "scatter_allgather",
    [HPML_ALGO_CHAIN] = "chain",
    [HPML_ALGO_BRUCK] = "bruck",
};

static const char *const coll_names[HPML_COLL_COUNT] = {
    [HPML_COLL_ALLREDUCE] = "allreduce",
    [HPML_COLL_BCAST] = "bcast",
    [HPML_COLL_REDUCE] = "reduce",
    [HPML_COLL_ALLGATHER] = "allgather",
    [HPML_COLL_REDUCE_SCATTER] = "reduce_scatter",
};

static const char *const env_names[HPML_COLL_COUNT] = {
    [HPML_COLL_ALLREDUCE] = "HPML_ALGO_ALLREDUCE",
    [HPML_COLL_BCAST] = "HPML_ALGO_BCAST",
    [HPML_COLL_REDUCE] = "HPML_ALGO_REDUCE",
    [HPML_COLL_ALLGATHER] = "HPML_ALGO_ALLGATHER",
    [HPML_COLL_REDUCE_SCATTER] = "HPML_ALGO_REDUCE_SCATTER",
};

static const hpml_algo_t list_allreduce[] = {HPML_ALGO_MPI,          HPML_ALGO_RECURSIVE_DOUBLING,
                                             HPML_ALGO_RING,         HPML_ALGO_RABENSEIFNER,
                                             HPML_ALGO_REDUCE_BCAST, HPML_ALGO_SHM,
                                             HPML_ALGO_HIER};
static const hpml_algo_t list_bcast[] = {
    HPML_ALGO_MPI, HPML_ALGO_BINOMIAL, HPML_ALGO_SCATTER_ALLGATHER, HPML_ALGO_CHAIN, HPML_ALGO_SHM};
static const hpml_algo_t list_reduce[] = {HPML_ALGO_MPI, HPML_ALGO_BINOMIAL, HPML_ALGO_SHM};
static const hpml_algo_t list_allgather[] = {HPML_ALGO_MPI, HPML_ALGO_RING,
                                             HPML_ALGO_RECURSIVE_DOUBLING, HPML_ALGO_BRUCK};
static const hpml_algo_t list_reduce_scatter[] = {HPML_ALGO_MPI, HPML_ALGO_RING};

#define KB  ((size_t)1024)
#define ANY 0
#define INF SIZE_MAX

/*
 * Built-in table: on one node the shared-memory allreduce and bcast at every size (bcast
 * of private buffers >= 64 KiB only with Cross-Memory Attach: see hpml__select); on 2
 * nodes the hierarchical allreduce from HIER_MIN_BYTES where a node holds several ranks
 * (the network overlaps the node's work; measured), and with 1 rank on each from
 * PAIR_MIN_BYTES to PAIR_MAX_BYTES, where the libraries mostly run two exchanges of half
 * the vector (Open MPI's ring, MPICH's reduce-scatter + allgather) and hier one of the
 * whole (at 32 KiB MPICH's halves were faster), but for Open MPI from OMPI_RD_MIN_BYTES
 * to OMPI_RD_MAX_BYTES, where its fixed rules for 2 ranks run recursive doubling (one
 * exchange, as hier: nothing to save; measured no faster); on more nodes the library
 * (the cost model with the library's Rabenseifner gives hier no lead there:
 * docs/scaling.md); else the MPI library, as for the collectives without a measured hpml
 * win. Why: docs/decisions/builtin-selection.md, docs/scaling.md.
 */
#define HIER_MIN_BYTES    (1024 * KB)
#define PAIR_MIN_BYTES    (4 * KB)
#define PAIR_MAX_BYTES    (32 * KB - 1)
#define OMPI_RD_MIN_BYTES (8 * KB)
#define OMPI_RD_MAX_BYTES (16 * KB - 1)
#define OMPI              HPML__LIB_OPENMPI
static const rule_t builtin[] = {
    {HPML_COLL_ALLREDUCE, 1, ANY, INF, HPML_ALGO_MPI, ANY},
    {HPML_COLL_ALLREDUCE, ANY, 1, INF, HPML_ALGO_SHM, ANY},
    {HPML_COLL_ALLREDUCE, ANY, ANY, INF, HPML_ALGO_MPI, ANY},
    {HPML_COLL_ALLREDUCE, ANY, 2, HIER_MIN_BYTES - 1, HPML_ALGO_MPI, ANY},
    {HPML_COLL_ALLREDUCE, ANY, 2, INF, HPML_ALGO_HIER, ANY},
    {HPML_COLL_ALLREDUCE, 2, 2, PAIR_MIN_BYTES - 1, HPML_ALGO_MPI, ANY},
    {HPML_COLL_ALLREDUCE, 2, 2, OMPI_RD_MIN_BYTES - 1, HPML_ALGO_HIER, OMPI},
    {HPML_COLL_ALLREDUCE, 2, 2, OMPI_RD_MAX_BYTES, HPML_ALGO_MPI, OMPI},
    {HPML_COLL_ALLREDUCE, 2, 2, PAIR_MAX_BYTES, HPML_ALGO_HIER, ANY},
    {HPML_COLL_ALLREDUCE, 2, 2, INF, HPML_ALGO_MPI, ANY},
    {HPML_COLL_BCAST, ANY, 1, INF, HPML_ALGO_SHM, ANY},
    {HPML_COLL_BCAST, ANY, ANY, INF, HPML_ALGO_MPI, ANY},
    {HPML_COLL_REDUCE, ANY, ANY, INF, HPML_ALGO_MPI, ANY},
    {HPML_COLL_ALLGATHER, ANY, ANY, INF, HPML_ALGO_MPI, ANY},
    {HPML_COLL_REDUCE_SCATTER, ANY, ANY, INF, HPML_ALGO_MPI, ANY},
};

const char *hpml_algo_name(hpml_algo_t algo)
{
    if ((unsigned)algo >= HPML_ALGO_COUNT)
        return "?";
    return algo_names[algo];
}

const char *hpml_coll_name(hpml_coll_t coll)
{
    if ((unsigned)coll >= HPML_COLL_COUNT)
        return "?";
    return coll_names[coll];
}

int hpml_algo_parse(const char *name, hpml_algo_t *out)
{
    char buf[32];
    size_t i;

    if (name == NULL || out == NULL)
        return HPML_ERR_INVAL;
    for (i = 0; name[i] != '\0' && i + 1 < sizeof(buf); i++)
        buf[i] = name[i] == '-' ? '_' : (char)tolower((unsigned char)name[i]);
    buf[i] = '\0';
    if (name[i] != '\0')
        return HPML_ERR_INVAL;
    if (strcmp(buf, "rd") == 0) {
        *out = HPML_ALGO_RECURSIVE_DOUBLING;
        return 0;
    }
    for (int a = 0; a < HPML_ALGO_COUNT; a++) {
        if (strcmp(buf, algo_names[a]) == 0) {
            *out = (hpml_algo_t)a;
            return 0;
        }
    }
    return HPML_ERR_INVAL;
}

static int coll_parse(const char *name, hpml_coll_t *out)
{
    for (int c = 0; c < HPML_COLL_COUNT; c++) {
        if (strcmp(name, coll_names[c]) == 0) {
            *out = (hpml_coll_t)c;
            return 0;
        }
    }
    return HPML_ERR_INVAL;
}

int hpml_algo_list(hpml_coll_t coll, const hpml_algo_t **algos, size_t *n)
{
    if (algos == NULL || n == NULL)
        return HPML_ERR_INVAL;
    switch (coll) {
#define L(c, a)                                                                                    \
    case c:                                                                                        \
        *algos = a;                                                                                \
        *n = sizeof(a) / sizeof(a[0]);                                                             \
        return 0;
        L(HPML_COLL_ALLREDUCE, list_allreduce)
        L(HPML_COLL_BCAST, list_bcast)
        L(HPML_COLL_REDUCE, list_reduce)
        L(HPML_COLL_ALLGATHER, list_allgather)
        L(HPML_COLL_REDUCE_SCATTER, list_reduce_scatter)
#undef L
    default: return HPML_ERR_INVAL;
    }
}

static int algo_applies(hpml_coll_t coll, hpml_algo_t algo)
{
    const hpml_algo_t *l;
    size_t n;

    if (hpml_algo_list(coll, &l, &n) != 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (l[i] == algo)
            return 1;
    return 0;
}

/* "inf", or a size in hpml's one grammar (hpml_size_parse: "4096", "64K", "16MB"). */
static int parse_bytes(const char *s, size_t *out)
{
    uint64_t v;

    if (strcmp(s, "inf") == 0) {
        *out = INF;
        return 0;
    }
    if (hpml_size_parse(s, &v) != 0 || v >= INF)
        return -1;
    *out = (size_t)v;
    return 0;
}

static int parse_count(const char *s, int *out)
{
    char *end;
    long v;

    if (strcmp(s, "*") == 0) {
        *out = ANY;
        return 0;
    }
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || end == s || v < 1 || v > INT_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

void hpml__select_free(struct hpml_select *s)
{
    if (s == NULL)
        return;
    free(s->rules);
    free(s->path);
    free(s);
}

int hpml__select_load(struct hpml_select **out, const char *path)
{
    struct hpml_select *s = NULL;
    FILE *f = NULL;
    char line[512];
    int rc = 0, lineno = 0, header = 0;
    size_t cap = 0;

    *out = NULL;
    s = calloc(1, sizeof(*s));
    if (s == NULL || (s->path = strdup(path)) == NULL) {
        rc = HPML_ERR_NOMEM;
        goto out;
    }
    f = fopen(path, "r");
    if (f == NULL) {
        rc = hpml_set_error(HPML_ERR_IO, "tuning file %s: %s", path, strerror(errno));
        goto out;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        char *tok[6], *save = NULL, *p;
        int nt = 0;
        rule_t r = {.lib = ANY};

        lineno++;
        if (strchr(line, '\n') == NULL && !feof(f)) {
            rc = hpml_set_error(HPML_ERR_FORMAT, "tuning file %s:%d: line too long", path, lineno);
            goto out;
        }
        if ((p = strchr(line, '#')) != NULL)
            *p = '\0';
        for (p = strtok_r(line, " \t\r\n", &save); p != NULL && nt < 6;
             p = strtok_r(NULL, " \t\r\n", &save))
            tok[nt++] = p;
        if (nt == 0)
            continue;
        if (!header) {
            if (nt != 2 || strcmp(tok[0], "hpml-tuning") != 0 || strcmp(tok[1], "1") != 0) {
                rc = hpml_set_error(HPML_ERR_FORMAT,
                                    "tuning file %s:%d: expected the header 'hpml-tuning 1'", path,
                                    lineno);
                goto out;
            }
            header = 1;
            continue;
        }
        if (nt != 5) {
            rc = hpml_set_error(HPML_ERR_FORMAT,
                                "tuning file %s:%d: expected 5 fields 'collective ranks nodes "
                                "max_bytes algorithm', found %d",
                                path, lineno, nt);
            goto out;
        }
        if (coll_parse(tok[0], &r.coll) != 0) {
            rc = hpml_set_error(HPML_ERR_FORMAT, "tuning file %s:%d: unknown collective '%s'", path,
                                lineno, tok[0]);
            goto out;
        }
        if (parse_count(tok[1], &r.ranks) != 0 || parse_count(tok[2], &r.nodes) != 0) {
            rc = hpml_set_error(HPML_ERR_FORMAT,
                                "tuning file %s:%d: ranks and nodes must be positive integers "
                                "or '*' (got '%s' '%s')",
                                path, lineno, tok[1], tok[2]);
            goto out;
        }
        if (parse_bytes(tok[3], &r.max_bytes) != 0) {
            rc = hpml_set_error(HPML_ERR_FORMAT,
                                "tuning file %s:%d: max_bytes '%s' is not a size (e.g. 4096, "
                                "64K, 16M, inf)",
                                path, lineno, tok[3]);
            goto out;
        }
        if (hpml_algo_parse(tok[4], &r.algo) != 0 || r.algo == HPML_ALGO_AUTO ||
            !algo_applies(r.coll, r.algo)) {
            rc = hpml_set_error(HPML_ERR_FORMAT,
                                "tuning file %s:%d: '%s' is not an algorithm for %s", path, lineno,
                                tok[4], tok[0]);
            goto out;
        }
        if (s->n == cap) {
            rule_t *nr;

            cap = cap ? 2 * cap : 16;
            nr = realloc(s->rules, cap * sizeof(*nr));
            if (nr == NULL) {
                rc = HPML_ERR_NOMEM;
                goto out;
            }
            s->rules = nr;
        }
        s->rules[s->n++] = r;
    }
    if (ferror(f)) {
        rc = hpml_set_error(HPML_ERR_IO, "tuning file %s: read error", path);
        goto out;
    }
    if (!header) {
        rc = hpml_set_error(HPML_ERR_FORMAT,
                            "tuning file %s: empty (expected the header 'hpml-tuning 1')", path);
        goto out;
    }
    *out = s;
    s = NULL;
out:
    if (f != NULL)
        fclose(f);
    hpml__select_free(s);
    return rc;
}

int hpml__select_init(hpml_comm_t *comm)
{
    struct hpml_select *s = NULL;
    const char *path = comm->set.text[HPML__S_TUNING_FILE];
    int rc = 0;

    if (path != NULL && *path != '\0') {
        rc = hpml__select_load(&s, path);
        if (rc != 0)
            return rc;
    } else {
        s = calloc(1, sizeof(*s));
        if (s == NULL)
            return hpml_set_error(HPML_ERR_NOMEM, "hpml_comm_create: out of memory");
    }
    for (int c = 0; c < HPML_COLL_COUNT; c++) {
        const char *v = comm->set.text[HPML__S_ALGO_ALLREDUCE + c];
        hpml_algo_t a = HPML_ALGO_AUTO;

        if (v != NULL && *v != '\0') {
            if (hpml_algo_parse(v, &a) != 0 ||
                (a != HPML_ALGO_AUTO && !algo_applies((hpml_coll_t)c, a))) {
                rc = hpml_set_error(HPML_ERR_INVAL, "%s='%s' is not an algorithm for %s",
                                    env_names[c], v, coll_names[c]);
                hpml__select_free(s);
                return rc;
            }
        }
        s->forced[c] = a;
    }
    comm->select = s;
    return 0;
}

/* A fingerprint of what the table selects: the rules (not the file's path or layout)
 * and the forced algorithms. Ranks with equal fingerprints choose alike. */
uint64_t hpml__select_digest(const hpml_comm_t *comm)
{
    const struct hpml_select *s = comm->select;
    uint64_t h = 1469598103934665603u;
    uint64_t v[5];

    if (s == NULL)
        return 0;
    for (int c = 0; c < HPML_COLL_COUNT; c++) {
        v[0] = (uint64_t)s->forced[c];
        h = (h ^ v[0]) * 1099511628211u;
    }
    for (size_t i = 0; i < s->n; i++) {
        v[0] = (uint64_t)s->rules[i].coll;
        v[1] = (uint64_t)s->rules[i].ranks;
        v[2] = (uint64_t)s->rules[i].nodes;
        v[3] = (uint64_t)s->rules[i].max_bytes;
        v[4] = (uint64_t)s->rules[i].algo;
        for (int k = 0; k < 5; k++)
            h = (h ^ v[k]) * 1099511628211u;
    }
    return h;
}

/* Where this rank's table comes from, in words: the tuning file and the forced
 * algorithms. */
void hpml__select_source(const hpml_comm_t *comm, char *buf, size_t size)
{
    const struct hpml_select *s = comm->select;
    size_t len;

    if (s == NULL) {
        snprintf(buf, size, "no table");
        return;
    }
    if (s->path != NULL) /* the fingerprint tells files of the same name apart */
        snprintf(buf, size, "%zu rule%s from '%s' (fingerprint %08x)", s->n, s->n == 1 ? "" : "s",
                 s->path, (unsigned)(hpml__select_digest(comm) & 0xffffffffu));
    else
        snprintf(buf, size, "the built-in table");
    for (int c = 0; c < HPML_COLL_COUNT; c++) {
        len = strlen(buf);
        if (s->forced[c] != HPML_ALGO_AUTO && len < size)
            snprintf(buf + len, size - len, ", %s=%s", env_names[c], algo_names[s->forced[c]]);
    }
}

void hpml__select_destroy(hpml_comm_t *comm)
{
    hpml__select_free(comm->select);
    comm->select = NULL;
}

int hpml__mpi_lib(void)
{
    /* 0: not probed. Benign race: every thread computes the same value. */
    static int lib = 0;

    if (lib == 0) {
        char v[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0, l = HPML__LIB_OTHER;

        if (MPI_Get_library_version(v, &len) == MPI_SUCCESS) {
            if (strstr(v, "Open MPI"))
                l = HPML__LIB_OPENMPI;
            else if (strstr(v, "MPICH"))
                l = HPML__LIB_MPICH;
        }
        lib = l;
    }
    return lib;
}

/* Index of the best rule in r[0..n) for the communicator and size, or -1. */
static long best_rule(const rule_t *r, size_t n, hpml_coll_t coll, int ranks, int nodes,
                      size_t bytes)
{
    long best = -1;
    int best_spec = -1;

    for (size_t i = 0; i < n; i++) {
        int spec;

        if (r[i].coll != coll || (r[i].ranks != ANY && r[i].ranks != ranks) ||
            (r[i].nodes != ANY && r[i].nodes != nodes) || bytes > r[i].max_bytes ||
            (r[i].lib != ANY && r[i].lib != hpml__mpi_lib()))
            continue;
        spec = (r[i].ranks != ANY) * 2 + (r[i].nodes != ANY);
        if (spec > best_spec || (spec == best_spec && r[i].max_bytes < r[best].max_bytes)) {
            best = (long)i;
            best_spec = spec;
        }
    }
    return best;
}

hpml_algo_t hpml__select(hpml_comm_t *comm, hpml_coll_t coll, size_t bytes)
{
    struct hpml_select *s = comm->select;
    long i;

    if ((unsigned)coll >= HPML_COLL_COUNT)
        return HPML_ALGO_MPI;
    if (s != NULL && s->forced[coll] != HPML_ALGO_AUTO)
        return s->forced[coll];
    if (s != NULL && s->n > 0) {
        i = best_rule(s->rules, s->n, coll, comm->size, comm->nodes, bytes);
        if (i >= 0)
            return s->rules[i].algo;
    }
    i = best_rule(builtin, sizeof(builtin) / sizeof(builtin[0]), coll, comm->size, comm->nodes,
                  bytes);
    if (i < 0)
        return HPML_ALGO_MPI;
    /* Without Cross-Memory Attach the shared-memory bcast copies large private buffers
     * twice and loses to the libraries' single copy (docs/decisions/cross-memory-attach.md).
     * The segment and its CMA probe are the same on every local rank (created
     * collectively), and the rule applies to one node only, so all ranks still choose
     * alike. */
    if (coll == HPML_COLL_BCAST && builtin[i].algo == HPML_ALGO_SHM && comm->shm != NULL &&
        !comm->shm->cma && bytes >= ((size_t)64 << 10))
        return HPML_ALGO_MPI;
    /* With one rank per node the hierarchical allreduce has no node work to overlap: the
     * library's own is kept, except where the 2 x 1 rules (which name their ranks) choose
     * it. max_local_size is the same on every rank. */
    if (builtin[i].algo == HPML_ALGO_HIER && comm->max_local_size < 2 && builtin[i].ranks == ANY)
        return HPML_ALGO_MPI;
    return builtin[i].algo;
}

hpml_algo_t hpml_algo_selected(hpml_comm_t *comm, hpml_coll_t coll, size_t bytes)
{
    if (comm == NULL)
        return HPML_ALGO_MPI;
    return hpml__select(comm, coll, bytes);
}

static void print_bytes(FILE *f, size_t b)
{
    if (b == INF)
        fprintf(f, "inf");
    else if (b >= KB * KB && b % (KB * KB) == 0)
        fprintf(f, "%zuM", b / (KB * KB));
    else if (b >= KB && b % KB == 0)
        fprintf(f, "%zuK", b / KB);
    else
        fprintf(f, "%zu", b);
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;

    return x < y ? -1 : x > y;
}

/* The sizes where the choice for `coll` may change: 0 and one past every rule's
 * max_bytes (file and built-in); sorted, unique. Returns the count (<= cap). */
static size_t boundaries(const struct hpml_select *s, hpml_coll_t coll, size_t *b, size_t cap)
{
    size_t n = 0, m = 0;

    b[n++] = 0;
    for (size_t i = 0; s != NULL && i < s->n && n < cap; i++)
        if (s->rules[i].coll == coll && s->rules[i].max_bytes != INF)
            b[n++] = s->rules[i].max_bytes + 1;
    for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]) && n < cap; i++)
        if (builtin[i].coll == coll && builtin[i].max_bytes != INF)
            b[n++] = builtin[i].max_bytes + 1;
    qsort(b, n, sizeof(size_t), cmp_size);
    for (size_t i = 0; i < n; i++)
        if (m == 0 || b[i] != b[m - 1])
            b[m++] = b[i];
    return m;
}

/* The rules in force for this communicator, collapsed to byte ranges. */
int hpml_select_describe(hpml_comm_t *comm, FILE *f, int json)
{
    struct hpml_select *s;
    size_t b[256];

    if (comm == NULL || f == NULL)
        return HPML_ERR_INVAL;
    s = comm->select;
    if (json) {
        fprintf(f, "{\"source\": ");
        hpml_json_string(f, s && s->path ? s->path : "built-in");
        fprintf(f, ", \"ranks\": %d, \"nodes\": %d, \"collectives\": {", comm->size, comm->nodes);
    } else {
        fprintf(f, "selection table (%s) for %d rank%s on %d node%s:\n",
                s && s->path ? s->path : "built-in", comm->size, comm->size == 1 ? "" : "s",
                comm->nodes, comm->nodes == 1 ? "" : "s");
    }
    for (int c = 0; c < HPML_COLL_COUNT; c++) {
        int forced = s && s->forced[c] != HPML_ALGO_AUTO;
        size_t nb = boundaries(s, (hpml_coll_t)c, b, sizeof(b) / sizeof(b[0]));

        if (json)
            fprintf(f, "%s\"%s\": {\"forced\": %s, \"ranges\": [", c ? ", " : "", coll_names[c],
                    forced ? "true" : "false");
        else
            fprintf(f, "  %-15s", coll_names[c]);
        /* Consecutive ranges with the same algorithm are merged. */
        for (size_t i = 0, first = 1; i < nb;) {
            hpml_algo_t a = hpml__select(comm, (hpml_coll_t)c, b[i]);
            size_t j = i + 1;

            while (j < nb && hpml__select(comm, (hpml_coll_t)c, b[j]) == a)
                j++;
            if (json) {
                fprintf(f, "%s{\"from_bytes\": %zu, \"to_bytes\": ", first ? "" : ", ", b[i]);
                if (j < nb)
                    fprintf(f, "%zu", b[j] - 1);
                else
                    fprintf(f, "null");
                fprintf(f, ", \"algorithm\": \"%s\"}", hpml_algo_name(a));
            } else {
                fprintf(f, "%s", first ? "" : ", ");
                print_bytes(f, b[i]);
                fprintf(f, "..");
                if (j < nb)
                    print_bytes(f, b[j] - 1);
                fprintf(f, " %s", hpml_algo_name(a));
            }
            first = 0;
            i = j;
        }
        if (json)
            fprintf(f, "]}");
        else
            fprintf(f, "%s\n", forced ? "  (forced by environment)" : "");
    }
    if (json)
        fprintf(f, "}}\n");
    return 0;
}
