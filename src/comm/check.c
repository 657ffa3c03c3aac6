/*
 * Checking mode (HPML_CHECK=1 or config.check): before every collective the ranks
 * compare a signature (kind, count, dtype, op, root, sequence number). One allreduce of
 * (min, −max) on a dedicated duplicate communicator finds a disagreement; only then are
 * the signatures allgathered so that every rank can name the ranks that differ. The
 * check runs on its own communicator so it always matches even when the ranks called
 * different collectives, and fails within one round trip instead of hanging.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"

enum { SIG_KIND, SIG_COUNT, SIG_DTYPE, SIG_OP, SIG_ROOT, SIG_SEQ, SIG_N };

static const char *kind_name(int64_t k)
{
    static const char *const names[HPML__KIND_COUNT] = {
        [HPML__KIND_ALLREDUCE] = "allreduce",
        [HPML__KIND_BCAST] = "bcast",
        [HPML__KIND_REDUCE] = "reduce",
        [HPML__KIND_ALLGATHER] = "allgather",
        [HPML__KIND_REDUCE_SCATTER] = "reduce_scatter",
        [HPML__KIND_BARRIER] = "barrier",
        [HPML__KIND_IALLREDUCE] = "iallreduce",
        [HPML__KIND_IBCAST] = "ibcast",
        [HPML__KIND_ALLOC_SHARED] = "alloc_shared",
        [HPML__KIND_ALLREDUCE_APPLY] = "allreduce_apply",
        [HPML__KIND_IALLREDUCE_APPLY] = "iallreduce_apply",
        [HPML__KIND_ALLTOALLV] = "alltoallv",
        [HPML__KIND_NODE_SYNC] = "node_sync",
    };
    return k >= 0 && k < HPML__KIND_COUNT && names[k] ? names[k] : "?";
}

/* "allreduce(count=100, f32, sum)" or "bcast(count=8, u8, root=2)" into out. */
static void describe(char *out, size_t n, const int64_t *s)
{
    /* An alltoallv's counts differ from rank to rank: hpml_alltoallv checks them itself. */
    int w =
        s[SIG_KIND] == HPML__KIND_ALLTOALLV
            ? snprintf(out, n, "%s(", kind_name(s[SIG_KIND]))
            : snprintf(out, n, "%s(count=%lld", kind_name(s[SIG_KIND]), (long long)s[SIG_COUNT]);

    if (w > 0 && (size_t)w < n && s[SIG_DTYPE] >= 0)
        w += snprintf(out + w, n - (size_t)w, "%s%s",
                      s[SIG_KIND] == HPML__KIND_ALLTOALLV ? "" : ", ",
                      hpml_dtype_name((hpml_dtype_t)s[SIG_DTYPE]));
    if (w > 0 && (size_t)w < n && s[SIG_OP] >= 0)
        w += snprintf(out + w, n - (size_t)w, ", %s", hpml_op_name((hpml_op_t)s[SIG_OP]));
    if (w > 0 && (size_t)w < n && s[SIG_ROOT] >= 0)
        w += snprintf(out + w, n - (size_t)w, ", root=%lld", (long long)s[SIG_ROOT]);
    if (w > 0 && (size_t)w < n)
        snprintf(out + w, n - (size_t)w, ")");
}

/* printf at msg + *w, never past cap (snprintf returns the untruncated length). */
__attribute__((format(printf, 4, 5))) static void append(char *msg, size_t cap, size_t *w,
                                                         const char *fmt, ...)
{
    va_list ap;
    int n;

    if (*w + 1 >= cap)
        return;
    va_start(ap, fmt);
    n = vsnprintf(msg + *w, cap - *w, fmt, ap);
    va_end(ap);
    if (n > 0)
        *w = *w + (size_t)n < cap ? *w + (size_t)n : cap - 1;
}

/* Build the message from every rank's signature: the fields that differ, then each
 * distinct signature with the ranks that used it (a few groups at most). */
static int report(hpml_comm_t *comm, const int64_t *all, const int64_t *mine)
{
    static const char *const field[SIG_N] = {"operation", "count", "dtype",
                                             "op",        "root",  "call sequence"};
    int p = comm->size, ngroups = 0;
    char msg[480], desc[96];
    size_t w = 0;

    msg[0] = '\0';
    int *group = NULL;

    append(msg, sizeof(msg), &w, "collective #%llu (this rank: %s): ranks disagree on",
           (unsigned long long)mine[SIG_SEQ], kind_name(mine[SIG_KIND]));
    for (int f = 0, nf = 0; f < SIG_N; f++) {
        for (int q = 1; q < p; q++) {
            if (all[q * SIG_N + f] != all[f]) {
                append(msg, sizeof(msg), &w, "%s%s", nf++ ? ", " : " ", field[f]);
                break;
            }
        }
    }
    group = malloc((size_t)p * sizeof(int));
    if (group != NULL) {
        /* group[q]: the first rank with q's signature. */
        for (int q = 0; q < p; q++) {
            group[q] = q;
            for (int r = 0; r < q; r++) {
                if (memcmp(all + r * SIG_N, all + q * SIG_N, SIG_N * sizeof(int64_t)) == 0) {
                    group[q] = r;
                    break;
                }
            }
        }
        for (int g = 0; g < p && w < sizeof(msg); g++) {
            int members = 0, shown = 0;

            if (group[g] != g)
                continue;
            if (++ngroups > 4) {
                append(msg, sizeof(msg), &w, "; ...");
                break;
            }
            for (int q = g; q < p; q++)
                members += group[q] == g;
            append(msg, sizeof(msg), &w, "%s rank%s", ngroups == 1 ? ":" : ";",
                   members > 1 ? "s" : "");
            for (int q = g; q < p && w < sizeof(msg); q++) {
                if (group[q] != g)
                    continue;
                if (shown < 8)
                    append(msg, sizeof(msg), &w, "%s%d", shown ? "," : " ", q);
                else if (shown == 8)
                    append(msg, sizeof(msg), &w, ",...");
                shown++;
            }
            describe(desc, sizeof(desc), all + g * SIG_N);
            if (w < sizeof(msg))
                append(msg, sizeof(msg), &w, " called %s", desc);
        }
        free(group);
    }
    if (comm->rank == 0)
        HPML_LOG(HPML_LOG_ERROR, "HPML_CHECK: %s", msg);
    return hpml_set_error(HPML_ERR_MISMATCH, "%s", msg);
}

int hpml__check(hpml_comm_t *comm, int kind, size_t count, int dtype, int op, int root)
{
    int64_t sig[SIG_N] = {kind, (int64_t)count, dtype, op, root, (int64_t)comm->seq};
    int64_t mm[2 * SIG_N], *all = NULL;
    MPI_Comm cc;
    int rc = 0, differ = 0;

    comm->seq++;
    if ((rc = hpml__check_comm(comm, &cc)) != 0)
        return rc;
    for (int i = 0; i < SIG_N; i++) {
        mm[i] = sig[i];
        mm[SIG_N + i] = -sig[i];
    }
    HPML__MPI(MPI_Allreduce(MPI_IN_PLACE, mm, 2 * SIG_N, MPI_INT64_T, MPI_MIN, cc));
    for (int i = 0; i < SIG_N; i++)
        differ |= mm[i] != -mm[SIG_N + i];
    if (!differ)
        return 0;
    /* Every rank saw the same min/max, so every rank takes this branch together. */
    if ((all = malloc((size_t)comm->size * sizeof(sig))) == NULL) {
        rc = hpml_set_error(HPML_ERR_MISMATCH,
                            "collective #%llu: ranks disagree on the "
                            "operation's arguments",
                            (unsigned long long)sig[SIG_SEQ]);
        /* The peers now wait in the allgather we skip: only if a few bytes cannot be
         * allocated, when the job is lost anyway. */
        goto out;
    }
    HPML__MPI(MPI_Allgather(sig, SIG_N, MPI_INT64_T, all, SIG_N, MPI_INT64_T, cc));
    rc = report(comm, all, sig);
out:
    free(all);
    return rc;
}
