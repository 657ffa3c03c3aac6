/*
 * The registry of every HPML_* setting: its name, kind, default, accepted values, whether
 * the ranks must agree on it, and a one-line description. Every reader parses through
 * here, so one grammar holds everywhere (sizes: hpml_size_parse), `hpml info` lists what
 * is in force, and a malformed value is one message naming the variable and what it
 * accepts. hpml_comm_create reads the whole registry once into the communicator and
 * fails on every rank when any value is malformed or the agreed ones differ.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/settings_internal.h"

#define K ((uint64_t)1 << 10)
#define G ((uint64_t)1 << 30)

/* In the order of hpml__setting_id_t. */
static const hpml_setting_t registry[HPML__S_COUNT] = {
    [HPML__S_LOG_LEVEL] = {"HPML_LOG_LEVEL", HPML_SETTING_CHOICE, "warn", 0, 0,
                           "error|warn|info|debug|0|1|2|3|warning", 0,
                           "diagnostics on stderr, prefixed [hpml r<rank>] (0-3: error-debug)"},
    [HPML__S_SIMD] = {"HPML_SIMD", HPML_SETTING_CHOICE, "auto", 0, 0, "auto|avx2|portable", 0,
                      "SIMD kernels: auto = the widest the CPU has (AVX-512 for K-Means), "
                      "avx2 = at most AVX2/F16C/FMA, portable = plain C (K-Means via BLAS)"},
    [HPML__S_CHECK] = {"HPML_CHECK", HPML_SETTING_CHOICE, "0", 0, 0, "0|1", 1,
                       "1: compare every collective's signature across ranks; ranks that "
                       "disagree get an error naming them instead of a hang"},
    [HPML__S_RANKS_PER_NODE] = {"HPML_RANKS_PER_NODE", HPML_SETTING_COUNT, "0", 0, INT_MAX, NULL, 1,
                                "treat consecutive groups of this many ranks as separate "
                                "nodes (0: the real nodes)"},
    [HPML__S_TUNING_FILE] = {"HPML_TUNING_FILE", HPML_SETTING_TEXT, "", 0, 0, NULL, 1,
                             "selection table written by `hpml tune` (its rules must agree "
                             "across ranks)"},
    [HPML__S_ALGO_ALLREDUCE] = {"HPML_ALGO_ALLREDUCE", HPML_SETTING_TEXT, "", 0, 0, NULL, 1,
                                "force the allreduce algorithm (mpi, ring, recursive_doubling, "
                                "rabenseifner, reduce_bcast, shm, hier)"},
    [HPML__S_ALGO_BCAST] = {"HPML_ALGO_BCAST", HPML_SETTING_TEXT, "", 0, 0, NULL, 1,
                            "force the bcast algorithm (mpi, binomial, scatter_allgather, "
                            "chain, shm)"},
    [HPML__S_ALGO_REDUCE] = {"HPML_ALGO_REDUCE", HPML_SETTING_TEXT, "", 0, 0, NULL, 1,
                             "force the reduce algorithm (mpi, binomial, shm)"},
    [HPML__S_ALGO_ALLGATHER] = {"HPML_ALGO_ALLGATHER", HPML_SETTING_TEXT, "", 0, 0, NULL, 1,
                                "force the allgather algorithm (mpi, ring, recursive_doubling, "
                                "bruck)"},
    [HPML__S_ALGO_REDUCE_SCATTER] = {"HPML_ALGO_REDUCE_SCATTER", HPML_SETTING_TEXT, "", 0, 0, NULL,
                                     1, "force the reduce_scatter algorithm (mpi, ring)"},
    [HPML__S_PROGRESS] = {"HPML_PROGRESS", HPML_SETTING_CHOICE, "thread", 0, 0, "thread|mpi", 1,
                          "nonblocking collectives: hpml's progress thread (where MPI gives "
                          "THREAD_MULTIPLE) or MPI's own nonblocking collectives"},
    [HPML__S_MAX_CHUNK_ELEMS] = {"HPML_MAX_CHUNK_ELEMS", HPML_SETTING_COUNT, "unlimited", 1,
                                 (uint64_t)1 << 62, NULL, 1,
                                 "elements one algorithm call handles; larger calls are cut "
                                 "(tests lower it)"},
    [HPML__S_MAX_MSG_BYTES] = {"HPML_MAX_MSG_BYTES", HPML_SETTING_SIZE, "2147483647", 1, INT_MAX,
                               NULL, 1,
                               "bytes of one MPI message; larger ones are split (tests lower "
                               "it)"},
    [HPML__S_BCAST_CHUNK] = {"HPML_BCAST_CHUNK", HPML_SETTING_SIZE, "64K", 1, (uint64_t)1 << 48,
                             NULL, 1, "pipeline chunk of the chain bcast"},
    [HPML__S_BCAST_SHM_CHUNK] = {"HPML_BCAST_SHM_CHUNK", HPML_SETTING_SIZE, "the shm chunk", 64,
                                 (uint64_t)1 << 48, NULL, 1,
                                 "step of the shared-memory bcast (at most HPML_SHM_CHUNK)"},
    [HPML__S_SHM_CHUNK] = {"HPML_SHM_CHUNK", HPML_SETTING_SIZE, "256K", 64, G, NULL, 1,
                           "shared-memory pipeline buffer (the node segment holds HPML_SHM_NBUF "
                           "of them per local rank)"},
    [HPML__S_SHM_NBUF] = {"HPML_SHM_NBUF", HPML_SETTING_COUNT, "4", 3, 64, NULL, 1,
                          "shared-memory pipeline buffers per local rank"},
    [HPML__S_SHM_SMALL] = {"HPML_SHM_SMALL", HPML_SETTING_SIZE, "16K", 1, G, NULL, 1,
                           "up to this size the shm allreduce takes one step"},
    [HPML__S_SHM_NT] = {"HPML_SHM_NT", HPML_SETTING_CHOICE, "measured", 0, 0, "0|1", 0,
                        "shm allreduce writes its buffers with plain (0) or streaming (1) "
                        "stores; unset, the local ranks measure both"},
    [HPML__S_SHM_OUT_NT] = {"HPML_SHM_OUT_NT", HPML_SETTING_CHOICE, "measured", 0, 0, "0|1", 0,
                            "shm allreduce writes the caller's output with plain (0) or "
                            "streaming (1) stores; unset, measured where outputs are large"},
    [HPML__S_SHM_SPIN] =
        {"HPML_SHM_SPIN", HPML_SETTING_COUNT, "20000, 256 oversubscribed", 0, UINT32_MAX, NULL, 0,
         "polls of a shared-memory flag before a rank waiting in the shm allreduce or "
         "reduce yields its core"},
    [HPML__S_SHM_CMA] = {"HPML_SHM_CMA", HPML_SETTING_CHOICE, "1", 0, 0, "0|1", 0,
                         "0: never read peers' buffers with cross-memory attach "
                         "(process_vm_readv); the local ranks agree when the segment is made"},
    [HPML__S_KMEANS_GEMM] = {"HPML_KMEANS_GEMM", HPML_SETTING_CHOICE, "0", 0, 0, "0|1", 0,
                             "1: K-Means distances through BLAS GEMM tiles instead of the "
                             "fused AVX2/AVX-512 kernel"},
    [HPML__S_KNN_DGEMM] = {"HPML_KNN_DGEMM", HPML_SETTING_CHOICE, "0", 0, 0, "0|1", 0,
                           "1: k-NN distances through DGEMM even where SGEMM with exact "
                           "rescoring applies"},
    [HPML__S_BENCH_BREAK] = {"HPML_BENCH_BREAK", HPML_SETTING_CHOICE, "", 0, 0, "drop-last", 0,
                             "test aid: `hpml bench` corrupts the last element of hpml's "
                             "results, to show that -c validation catches it"},
    [HPML__S_BENCH_STORE] = {"HPML_BENCH_STORE", HPML_SETTING_COUNT, "2097152", 1, INT32_MAX, NULL,
                             1,
                             "per-iteration times (doubles) `hpml bench` keeps across sizes "
                             "before it reduces them between two sizes (at least one size's)"},
};

size_t hpml_settings_count(void)
{
    return HPML__S_COUNT;
}

const hpml_setting_t *hpml_setting_at(size_t i)
{
    return i < HPML__S_COUNT ? &registry[i] : NULL;
}

int hpml_size_parse(const char *s, uint64_t *out)
{
    unsigned long long v;
    unsigned shift = 0;
    char *end;

    /* strtoull would take blanks and a sign: digits only. */
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0)
        return -1;
    switch (*end) {
    case 'k':
    case 'K': shift = 10; break;
    case 'm':
    case 'M': shift = 20; break;
    case 'g':
    case 'G': shift = 30; break;
    case 't':
    case 'T': shift = 40; break;
    default: break;
    }
    if (shift != 0) {
        end++;
        if (end[0] == 'i' && end[1] == 'B') /* "KiB" */
            end++;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0' || (shift != 0 && v > (UINT64_MAX >> shift)))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

/* The index of word in the '|'-separated list, or -1. */
static int choice_index(const char *list, const char *word)
{
    size_t n = strlen(word);
    int i = 0;

    for (const char *p = list; *p != '\0'; i++) {
        size_t len = strcspn(p, "|");

        if (len == n && strncasecmp(p, word, n) == 0)
            return i;
        p += len;
        if (*p == '|')
            p++;
    }
    return -1;
}

const char *hpml_size_format(uint64_t v, char *buf, size_t size)
{
    static const char units[] = "KMGT";
    int u = -1;

    while (u < 3 && v != 0 && v % 1024 == 0) {
        v /= 1024;
        u++;
    }
    snprintf(buf, size, "%llu%.*s", (unsigned long long)v, u >= 0 ? 1 : 0, u >= 0 ? &units[u] : "");
    return buf;
}

/* The value of entry e given as text s (not empty): 0, or -1 with why. */
static int parse_value(const hpml_setting_t *e, const char *s, uint64_t *v, char *why, size_t size)
{
    char lo[32], hi[32];
    int i;

    switch (e->kind) {
    case HPML_SETTING_SIZE:
        if (hpml_size_parse(s, v) == 0 && *v >= e->min && *v <= e->max)
            return 0;
        snprintf(why, size, "%s='%s' is not a size from %s to %s bytes (like 4096, 64K, 16M)",
                 e->name, s, hpml_size_format(e->min, lo, sizeof(lo)),
                 hpml_size_format(e->max, hi, sizeof(hi)));
        return -1;
    case HPML_SETTING_COUNT: {
        char *end;

        errno = 0;
        *v = *s >= '0' && *s <= '9' ? strtoull(s, &end, 10) : 0;
        if (*s >= '0' && *s <= '9' && errno == 0 && *end == '\0' && *v >= e->min && *v <= e->max)
            return 0;
        snprintf(why, size, "%s='%s' is not an integer from %llu to %llu", e->name, s,
                 (unsigned long long)e->min, (unsigned long long)e->max);
        return -1;
    }
    case HPML_SETTING_CHOICE:
        if ((i = choice_index(e->choices, s)) >= 0) {
            *v = (uint64_t)i;
            return 0;
        }
        snprintf(why, size, "%s='%s' is not one of %s", e->name, s, e->choices);
        return -1;
    default: /* TEXT: checked by its reader */ *v = 0; return 0;
    }
}

int hpml__setting_parse(hpml__setting_id_t id, const char *text, uint64_t *v, char *why,
                        size_t size)
{
    return parse_value(&registry[id], text, v, why, size);
}

int hpml__settings_read(hpml__settings_t *out)
{
    char why[512];
    int rc = 0;

    memset(out, 0, sizeof(*out));
    for (int i = 0; i < HPML__S_COUNT; i++) {
        const char *s = getenv(registry[i].name);

        if (s == NULL || *s == '\0')
            continue;
        if ((out->text[i] = strdup(s)) == NULL) {
            if (rc == 0)
                rc = hpml_set_error(HPML_ERR_NOMEM, "out of memory reading %s", registry[i].name);
            continue;
        }
        if (parse_value(&registry[i], s, &out->value[i], why, sizeof(why)) == 0) {
            out->set[i] = 1;
        } else if (rc == 0) {
            rc = hpml_set_error(HPML_ERR_INVAL, "%s", why);
        }
    }
    return rc;
}

void hpml__settings_free(hpml__settings_t *s)
{
    if (s == NULL)
        return;
    for (int i = 0; i < HPML__S_COUNT; i++) {
        free(s->text[i]);
        s->text[i] = NULL;
    }
}

uint64_t hpml__setting_effective(const hpml__settings_t *s, hpml__setting_id_t id)
{
    char why[8];
    uint64_t v;

    if (s->set[id])
        return s->value[id];
    return parse_value(&registry[id], registry[id].def, &v, why, sizeof(why)) == 0 &&
                   registry[id].def[0] != '\0'
               ? v
               : UINT64_MAX;
}

int hpml__setting_env(hpml__setting_id_t id, uint64_t *v)
{
    const char *s = getenv(registry[id].name);
    char why[8];

    if (s == NULL || *s == '\0')
        return 0;
    return parse_value(&registry[id], s, v, why, sizeof(why)) == 0;
}
