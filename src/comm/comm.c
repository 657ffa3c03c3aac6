/*
 * The hpml communicator: a duplicate of the user's communicator with MPI_ERRORS_RETURN,
 * its node-local communicator (real shared-memory domains, optionally cut into virtual
 * nodes of HPML_RANKS_PER_NODE consecutive ranks), the node leaders' communicator, and
 * the lazily created node segment (shm.c).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"

int hpml__mpi_error(int mpi_rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;

    if (MPI_Error_string(mpi_rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof(msg), "MPI error %d", mpi_rc);
    return hpml_set_error(HPML_ERR_MPI, "%s: %s", what, msg);
}

MPI_Datatype hpml__mpi_dtype(hpml_dtype_t dt)
{
    switch (dt) {
    case HPML_F32: return MPI_FLOAT;
    case HPML_F64: return MPI_DOUBLE;
    case HPML_I8: return MPI_INT8_T;
    case HPML_U8: return MPI_UINT8_T;
    case HPML_I32: return MPI_INT32_T;
    case HPML_I64: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL;
    }
}

MPI_Op hpml__mpi_op(hpml_op_t op)
{
    switch (op) {
    case HPML_SUM: return MPI_SUM;
    case HPML_PROD: return MPI_PROD;
    case HPML_MIN: return MPI_MIN;
    case HPML_MAX: return MPI_MAX;
    case HPML_AVG: return MPI_SUM;
    default: return MPI_OP_NULL;
    }
}

/* A non-negative integer from the environment; -1 when unset, -2 when malformed. */
static long env_long(const char *name)
{
    const char *s = getenv(name);
    char *end;
    long v;

    if (s == NULL || *s == '\0')
        return -1;
    v = strtol(s, &end, 10);
    if (*end != '\0' || v < 0)
        return -2;
    return v;
}

/* Settings that change the protocol of the collectives: ranks that read different values
 * would run different algorithms or cut messages differently, and hang or mix up data.
 * hpml_comm_create refuses to start unless every rank has the same value. (HPML_SHM_NT,
 * HPML_SHM_OUT_NT, HPML_SHM_SPIN and HPML_SHM_CMA may differ: they change only how a
 * rank copies or waits, and CMA is agreed on when the segment is created.) */
typedef enum { ENV_SIZE, ENV_COUNT, ENV_MPI } env_kind_t;

static const struct {
    const char *name;
    env_kind_t kind;
    unsigned long long min, max; /* ENV_COUNT: values outside are ignored by the reader */
} agreed_env[] = {
    {"HPML_MAX_MSG_BYTES", ENV_COUNT, 1, INT_MAX},       /* xfer.c */
    {"HPML_BCAST_CHUNK", ENV_COUNT, 1, ULLONG_MAX},      /* bcast_chain.c */
    {"HPML_BCAST_SHM_CHUNK", ENV_COUNT, 64, ULLONG_MAX}, /* bcast_shm.c */
    {"HPML_SHM_CHUNK", ENV_SIZE, 0, 0},
    {"HPML_SHM_NBUF", ENV_SIZE, 0, 0},
    {"HPML_SHM_SMALL", ENV_SIZE, 0, 0},
    {"HPML_PROGRESS", ENV_MPI, 0, 0}, /* nonblocking.c: only "mpi" changes anything */
};
#define N_AGREED_ENV (sizeof(agreed_env) / sizeof(agreed_env[0]))
/* Items compared across ranks: the failure flag, the effective HPML_CHECK,
 * HPML_RANKS_PER_NODE and HPML_MAX_CHUNK_ELEMS, the selection table (HPML_TUNING_FILE's
 * rules and HPML_ALGO_*), then agreed_env. */
enum { AG_FAILED, AG_CHECK, AG_RPN, AG_CHUNK, AG_SELECT, AG_ENV, AG_COUNT = AG_ENV + N_AGREED_ENV };

/* The value of agreed_env[k] as its reader takes it; 0: the default (unset, empty, or a
 * value the reader ignores), so that "64K" and "65536" agree, and so do unset and bad. */
static uint64_t env_value(size_t k)
{
    const char *s = getenv(agreed_env[k].name);
    unsigned long long v;
    size_t z;
    char *end;

    if (s == NULL || *s == '\0')
        return 0;
    switch (agreed_env[k].kind) {
    case ENV_SIZE: return hpml__parse_size(s, &z) == 0 ? (uint64_t)z : 0;
    case ENV_MPI: return strcmp(s, "mpi") == 0;
    default:
        v = strtoull(s, &end, 10);
        return end != s && *end == '\0' && v >= agreed_env[k].min && v <= agreed_env[k].max ? v : 0;
    }
}

/* What item i is on this rank, in words, for the message naming a disagreement. */
static void describe_item(const hpml_comm_t *c, int i, char *buf, size_t size)
{
    const char *v;

    switch (i) {
    case AG_CHECK: snprintf(buf, size, "%d", c->check); break;
    case AG_RPN: snprintf(buf, size, "%d", c->ranks_per_node); break;
    case AG_CHUNK: snprintf(buf, size, "%zu", c->max_chunk_elems); break;
    case AG_SELECT: hpml__select_source(c, buf, size); break;
    default:
        v = getenv(agreed_env[i - AG_ENV].name);
        if (v == NULL || *v == '\0')
            snprintf(buf, size, "no value");
        else
            snprintf(buf, size, "'%s'", v);
    }
}

static const char *item_name(int i)
{
    switch (i) {
    case AG_CHECK: return "HPML_CHECK (hpml_comm_config_t.check)";
    case AG_RPN: return "HPML_RANKS_PER_NODE (hpml_comm_config_t.ranks_per_node)";
    case AG_CHUNK: return "HPML_MAX_CHUNK_ELEMS";
    case AG_SELECT: return "the algorithm selection (HPML_TUNING_FILE's rules, HPML_ALGO_*)";
    default: return agreed_env[i - AG_ENV].name;
    }
}

/* Collective over c->comm: every rank learns whether any rank failed to read its
 * settings (rc), and whether the ranks' protocol settings agree. A rank that failed keeps
 * its own error; the others report the lowest failing rank's message, so that all ranks
 * return an error together rather than some of them waiting in the next collective. */
static int agree_settings(hpml_comm_t *c, int local_rc)
{
    uint64_t mine[AG_COUNT], lo[AG_COUNT], hi[AG_COUNT], ref;
    char msg[512], other[200];
    int rc = 0, first, cand, code, i;

    mine[AG_FAILED] = local_rc != 0;
    mine[AG_CHECK] = (uint64_t)c->check;
    mine[AG_RPN] = (uint64_t)c->ranks_per_node;
    mine[AG_CHUNK] = (uint64_t)c->max_chunk_elems;
    mine[AG_SELECT] = local_rc == 0 ? hpml__select_digest(c) : 0;
    for (size_t k = 0; k < N_AGREED_ENV; k++)
        mine[AG_ENV + k] = env_value(k);
    HPML__MPI(MPI_Allreduce(mine, lo, AG_COUNT, MPI_UINT64_T, MPI_MIN, c->comm));
    HPML__MPI(MPI_Allreduce(mine, hi, AG_COUNT, MPI_UINT64_T, MPI_MAX, c->comm));

    if (hi[AG_FAILED] != 0) {
        /* The lowest failing rank's message and code, to everyone. */
        cand = local_rc != 0 ? c->rank : c->size;
        HPML__MPI(MPI_Allreduce(&cand, &first, 1, MPI_INT, MPI_MIN, c->comm));
        snprintf(msg, sizeof(msg), "%s", local_rc != 0 ? hpml_last_error() : "");
        code = local_rc;
        HPML__MPI(MPI_Bcast(msg, (int)sizeof(msg), MPI_CHAR, first, c->comm));
        HPML__MPI(MPI_Bcast(&code, 1, MPI_INT, first, c->comm));
        return local_rc != 0 ? local_rc : hpml_set_error(code, "rank %d: %s", first, msg);
    }
    for (i = AG_CHECK; i < AG_COUNT && lo[i] == hi[i]; i++)
        ;
    if (i == AG_COUNT)
        return 0;
    /* Rank 0's value against the lowest rank whose value differs from it. */
    ref = mine[i];
    HPML__MPI(MPI_Bcast(&ref, 1, MPI_UINT64_T, 0, c->comm));
    cand = mine[i] != ref ? c->rank : c->size;
    HPML__MPI(MPI_Allreduce(&cand, &first, 1, MPI_INT, MPI_MIN, c->comm));
    describe_item(c, i, msg, sizeof(msg));
    describe_item(c, i, other, sizeof(other));
    HPML__MPI(MPI_Bcast(msg, (int)sizeof(msg), MPI_CHAR, 0, c->comm));
    HPML__MPI(MPI_Bcast(other, (int)sizeof(other), MPI_CHAR, first, c->comm));
    rc = hpml_set_error(HPML_ERR_INVAL,
                        "hpml_comm_create: the ranks disagree on %s: rank 0 has %s, rank %d has "
                        "%s; it must be the same on every rank",
                        item_name(i), msg, first, other);
out:
    return rc;
}

int hpml_comm_create(MPI_Comm user, const hpml_comm_config_t *cfg, hpml_comm_t **out)
{
    hpml_comm_t *c = NULL, shell;
    MPI_Comm shared = MPI_COMM_NULL;
    int rc = 0, shared_rank, ints[2], maxes[2];
    long v;

    if (out == NULL || user == MPI_COMM_NULL)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_comm_create: NULL argument");
    *out = NULL;
    c = calloc(1, sizeof(*c));
    if (c == NULL) { /* a stand-in meets the other ranks, which then fail with this one */
        memset(&shell, 0, sizeof(shell));
        c = &shell;
        rc = hpml_set_error(HPML_ERR_NOMEM, "hpml_comm_create: out of memory");
    }
    c->comm = c->local = c->leaders = MPI_COMM_NULL;

    HPML__MPI(MPI_Comm_dup(user, &c->comm));
    HPML__MPI(MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN));
    HPML__MPI(MPI_Comm_rank(c->comm, &c->rank));
    HPML__MPI(MPI_Comm_size(c->comm, &c->size));

    /* Read every setting first, without leaving: agree_settings is collective. */
    if (cfg != NULL) {
        c->check = cfg->check;
        c->ranks_per_node = cfg->ranks_per_node > 0 ? cfg->ranks_per_node : 0;
    } else {
        v = env_long("HPML_CHECK");
        c->check = v > 0;
        v = env_long("HPML_RANKS_PER_NODE");
        if (rc == 0 && v == -2)
            rc = hpml_set_error(HPML_ERR_INVAL,
                                "HPML_RANKS_PER_NODE='%s' is not a non-negative integer",
                                getenv("HPML_RANKS_PER_NODE"));
        c->ranks_per_node = v > 0 ? (int)v : 0;
    }
    v = env_long("HPML_MAX_CHUNK_ELEMS");
    if (rc == 0 && (v == -2 || v == 0))
        rc = hpml_set_error(HPML_ERR_INVAL, "HPML_MAX_CHUNK_ELEMS='%s' is not a positive integer",
                            getenv("HPML_MAX_CHUNK_ELEMS"));
    c->max_chunk_elems = v > 0 ? (size_t)v : 0;
    if (rc == 0)
        rc = hpml__select_init(c);
    rc = agree_settings(c, rc);
    if (rc != 0)
        goto out;

    /* Real shared-memory domain, then virtual nodes inside it: a virtual node never
     * spans two real nodes, so its ranks can always share memory. */
    HPML__MPI(MPI_Comm_split_type(c->comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &shared));
    HPML__MPI(MPI_Comm_rank(shared, &shared_rank));
    if (c->ranks_per_node > 0) {
        HPML__MPI(MPI_Comm_split(shared, c->rank / c->ranks_per_node, c->rank, &c->local));
    } else {
        HPML__MPI(MPI_Comm_dup(shared, &c->local));
    }
    HPML__MPI(MPI_Comm_set_errhandler(c->local, MPI_ERRORS_RETURN));
    HPML__MPI(MPI_Comm_rank(c->local, &c->local_rank));
    HPML__MPI(MPI_Comm_size(c->local, &c->local_size));

    HPML__MPI(
        MPI_Comm_split(c->comm, c->local_rank == 0 ? 0 : MPI_UNDEFINED, c->rank, &c->leaders));
    if (c->leaders != MPI_COMM_NULL) {
        HPML__MPI(MPI_Comm_set_errhandler(c->leaders, MPI_ERRORS_RETURN));
        HPML__MPI(MPI_Comm_rank(c->leaders, &ints[0]));
        HPML__MPI(MPI_Comm_size(c->leaders, &ints[1]));
    }
    HPML__MPI(MPI_Bcast(ints, 2, MPI_INT, 0, c->local));
    c->node = ints[0];
    c->nodes = ints[1];
    ints[0] = c->local_size;
    ints[1] = shared_rank == 0;
    HPML__MPI(MPI_Allreduce(ints, maxes, 1, MPI_INT, MPI_MAX, c->comm));
    c->max_local_size = maxes[0];
    HPML__MPI(MPI_Allreduce(&ints[1], &maxes[1], 1, MPI_INT, MPI_SUM, c->comm));
    c->real_nodes = maxes[1];

    *out = c;
    c = NULL;
out:
    if (shared != MPI_COMM_NULL)
        MPI_Comm_free(&shared);
    if (c != NULL) {
        hpml__select_destroy(c);
        if (c->leaders != MPI_COMM_NULL)
            MPI_Comm_free(&c->leaders);
        if (c->local != MPI_COMM_NULL)
            MPI_Comm_free(&c->local);
        if (c->comm != MPI_COMM_NULL)
            MPI_Comm_free(&c->comm);
        if (c != &shell)
            free(c);
    }
    return rc;
}

void hpml_comm_destroy(hpml_comm_t *comm)
{
    if (comm == NULL)
        return;
    hpml__progress_destroy(comm);
    while (comm->registered != NULL)
        hpml_comm_free_shared(comm, comm->registered->base);
    hpml__shm_destroy(comm);
    if (comm->slice_comm != NULL) {
        for (int j = 0; j < comm->max_local_size; j++)
            if (comm->slice_comm[j] != MPI_COMM_NULL)
                MPI_Comm_free(&comm->slice_comm[j]);
        free(comm->slice_comm);
    }
    hpml__select_destroy(comm);
    if (comm->leaders != MPI_COMM_NULL)
        MPI_Comm_free(&comm->leaders);
    MPI_Comm_free(&comm->local);
    MPI_Comm_free(&comm->comm);
    free(comm);
}

int hpml_comm_rank(const hpml_comm_t *comm)
{
    return comm->rank;
}

int hpml_comm_size(const hpml_comm_t *comm)
{
    return comm->size;
}

int hpml_comm_nodes(const hpml_comm_t *comm)
{
    return comm->nodes;
}

int hpml_comm_node(const hpml_comm_t *comm)
{
    return comm->node;
}

int hpml_comm_local_rank(const hpml_comm_t *comm)
{
    return comm->local_rank;
}

int hpml_comm_local_size(const hpml_comm_t *comm)
{
    return comm->local_size;
}

MPI_Comm hpml_comm_mpi(const hpml_comm_t *comm)
{
    return comm->comm;
}

int hpml_barrier(hpml_comm_t *comm)
{
    int rc = 0;

    if (comm == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_barrier: NULL communicator");
    if (comm->check && (rc = hpml__check(comm, HPML__KIND_BARRIER, 0, -1, -1, -1)) != 0)
        return rc;
    HPML__MPI(MPI_Barrier(comm->comm));
out:
    return rc;
}
