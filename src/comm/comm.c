/*
 * The hpml communicator: a duplicate of the user's communicator with MPI_ERRORS_RETURN,
 * its node-local communicator (real shared-memory domains, optionally cut into virtual
 * nodes of HPML_RANKS_PER_NODE consecutive ranks), the node leaders' communicator, and
 * the lazily created node segment (shm.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm_internal.h"
#include "comm/shm_internal.h"
#include "core/settings_internal.h"

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

int hpml_comm_agree_rank(hpml_comm_t *c, int local_rc, int *first)
{
    char msg[1024];
    int rc = 0, cand, lowest, code;

    if (first != NULL)
        *first = -1;
    if (c == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_comm_agree: NULL communicator");
    cand = local_rc != 0 ? c->rank : c->size;
    HPML__MPI(MPI_Allreduce(&cand, &lowest, 1, MPI_INT, MPI_MIN, c->comm));
    if (lowest == c->size)
        return 0;
    /* The lowest failing rank's code and message, to everyone. */
    snprintf(msg, sizeof(msg), "%s", local_rc != 0 ? hpml_last_error() : "");
    code = local_rc;
    HPML__MPI(MPI_Bcast(msg, (int)sizeof(msg), MPI_CHAR, lowest, c->comm));
    HPML__MPI(MPI_Bcast(&code, 1, MPI_INT, lowest, c->comm));
    if (first != NULL)
        *first = lowest;
    return local_rc != 0 ? local_rc : hpml_set_error(code, "%s", msg);
out:
    return rc;
}

int hpml_comm_agree(hpml_comm_t *c, int local_rc)
{
    int first, rc = hpml_comm_agree_rank(c, local_rc, &first);

    if (rc != 0 && local_rc == 0 && first >= 0) {
        char msg[1024];

        snprintf(msg, sizeof(msg), "%s", hpml_last_error());
        return hpml_set_error(rc, "rank %d: %s", first, msg);
    }
    return rc;
}

/* Items compared across ranks: the effective HPML_CHECK and HPML_RANKS_PER_NODE (which a
 * configuration may override), the selection table (HPML_TUNING_FILE's rules and
 * HPML_ALGO_*), then every other agreed setting of the registry, by value (so "64K" and
 * "65536" agree, and so do unset and the default). */
enum { AG_CHECK, AG_RPN, AG_SELECT, AG_REG, AG_COUNT = AG_REG + HPML__S_COUNT };

static int agreed_by_value(int id)
{
    return hpml_setting_at((size_t)id)->agreed &&
           hpml_setting_at((size_t)id)->kind != HPML_SETTING_TEXT && id != HPML__S_CHECK &&
           id != HPML__S_RANKS_PER_NODE;
}

/* What item i is on this rank, in words, for the message naming a disagreement. */
static void describe_item(const hpml_comm_t *c, int i, char *buf, size_t size)
{
    const char *v;

    switch (i) {
    case AG_CHECK: snprintf(buf, size, "%d", c->check); break;
    case AG_RPN: snprintf(buf, size, "%d", c->ranks_per_node); break;
    case AG_SELECT: hpml__select_source(c, buf, size); break;
    default:
        v = c->set.text[i - AG_REG];
        if (v == NULL)
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
    case AG_SELECT: return "the algorithm selection (HPML_TUNING_FILE's rules, HPML_ALGO_*)";
    default: return hpml_setting_at((size_t)(i - AG_REG))->name;
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
    int rc = 0, first, cand, i;

    if ((rc = hpml_comm_agree(c, local_rc)) != 0)
        return rc;
    memset(mine, 0, sizeof(mine));
    mine[AG_CHECK] = (uint64_t)c->check;
    mine[AG_RPN] = (uint64_t)c->ranks_per_node;
    mine[AG_SELECT] = hpml__select_digest(c);
    for (int k = 0; k < HPML__S_COUNT; k++)
        if (agreed_by_value(k))
            mine[AG_REG + k] = hpml__setting_effective(&c->set, (hpml__setting_id_t)k);
    HPML__MPI(MPI_Allreduce(mine, lo, AG_COUNT, MPI_UINT64_T, MPI_MIN, c->comm));
    HPML__MPI(MPI_Allreduce(mine, hi, AG_COUNT, MPI_UINT64_T, MPI_MAX, c->comm));
    for (i = 0; i < AG_COUNT && lo[i] == hi[i]; i++)
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

/* Can this node hold the shared-memory segment the settings ask for (HPML_SHM_NBUF
 * buffers of HPML_SHM_CHUNK per local rank)? Asking MPI for more than the node has does
 * not fail: MPICH spins in MPI_Win_allocate_shared. At most half the node's memory. */
static int check_segment_size(const hpml_comm_t *c)
{
    uint64_t chunk =
        c->set.set[HPML__S_SHM_CHUNK] ? c->set.value[HPML__S_SHM_CHUNK] : hpml__shm_default_chunk();
    uint64_t nbuf = c->set.set[HPML__S_SHM_NBUF] ? c->set.value[HPML__S_SHM_NBUF]
                                                 : (uint64_t)hpml__shm_default_nbuf();
    uint64_t need = (uint64_t)c->local_size * (nbuf * chunk + 2 * HPML_SHM_CTRL_BYTES);
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    uint64_t have = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0;

    if (have == 0 || need <= have / 2)
        return 0;
    return hpml_set_error(HPML_ERR_NOMEM,
                          "HPML_SHM_CHUNK=%llu x HPML_SHM_NBUF=%llu x %d local ranks is %.1f GiB "
                          "of node shared memory, more than half of this node's %.1f GiB",
                          (unsigned long long)chunk, (unsigned long long)nbuf, c->local_size,
                          (double)need / (1 << 30), (double)have / (1 << 30));
}

int hpml_comm_create(MPI_Comm user, const hpml_comm_config_t *cfg, hpml_comm_t **out)
{
    hpml_comm_t *c = NULL, shell;
    MPI_Comm shared = MPI_COMM_NULL;
    int rc = 0, shared_rank, ints[2], maxes[2];

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
    {
        int src = hpml__settings_read(&c->set);

        if (rc == 0)
            rc = src;
    }
    if (cfg != NULL) {
        c->check = cfg->check;
        c->ranks_per_node = cfg->ranks_per_node > 0 ? cfg->ranks_per_node : 0;
    } else {
        c->check = c->set.set[HPML__S_CHECK] && c->set.value[HPML__S_CHECK] == 1;
        c->ranks_per_node = (int)c->set.value[HPML__S_RANKS_PER_NODE];
    }
    c->max_chunk_elems =
        c->set.set[HPML__S_MAX_CHUNK_ELEMS] ? (size_t)c->set.value[HPML__S_MAX_CHUNK_ELEMS] : 0;
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
    if ((rc = hpml_comm_agree(c, check_segment_size(c))) != 0)
        goto out;

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
        hpml__settings_free(&c->set);
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
    hpml_free(comm->hier_buf);
    if (comm->slice_comm != NULL) {
        for (int j = 0; j < comm->max_local_size; j++)
            if (comm->slice_comm[j] != MPI_COMM_NULL)
                MPI_Comm_free(&comm->slice_comm[j]);
        free(comm->slice_comm);
    }
    hpml__select_destroy(comm);
    hpml__settings_free(&comm->set);
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
