/*
 * Helpers shared by the collectives' multi-rank tests (bcast, reduce, allgather,
 * reduce_scatter, nonblocking, check, fusion): integer-valued data that every dtype holds
 * exactly, so results must be bitwise equal whatever the reduction order, and the count
 * list.
 */
#ifndef HPML_TESTS_COLL_UTIL_H
#define HPML_TESTS_COLL_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hpml/comm.h"

static inline void tu_put(hpml_dtype_t dt, void *buf, size_t i, double v)
{
    switch (dt) {
    case HPML_F32: ((float *)buf)[i] = (float)v; break;
    case HPML_F64: ((double *)buf)[i] = v; break;
    case HPML_F16: ((uint16_t *)buf)[i] = hpml_f32_to_f16((float)v); break;
    case HPML_BF16: ((uint16_t *)buf)[i] = hpml_f32_to_bf16((float)v); break;
    case HPML_I8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case HPML_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case HPML_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case HPML_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    default: break;
    }
}

/* Small integers for which every op stays exact in every dtype over <= 8 ranks. */
static inline double tu_val(int rank, size_t i, hpml_op_t op, hpml_dtype_t dt)
{
    unsigned h = (unsigned)(rank * 7919u + (unsigned)(i % 100003u) * 31u + 11u);
    int neg = dt != HPML_U8;

    switch (op) {
    case HPML_PROD: return (h % 5 == 0) ? 2.0 : (neg && h % 7 == 0) ? -1.0 : 1.0;
    case HPML_MIN:
    case HPML_MAX: return neg ? (double)((int)(h % 101) - 50) : (double)(h % 101);
    default: return neg ? (double)((int)(h % 7) - 3) : (double)(h % 4); /* SUM, AVG */
    }
}

static inline void tu_fill(hpml_dtype_t dt, void *buf, size_t n, int rank, hpml_op_t op)
{
    for (size_t i = 0; i < n; i++)
        tu_put(dt, buf, i, tu_val(rank, i, op, dt));
}

/* Convert a reference reduction computed in f64 to dtype (AVG: divided like hpml). */
static inline void tu_ref(hpml_dtype_t dt, const double *ref, void *out, size_t n, hpml_op_t op,
                          int contributions)
{
    for (size_t i = 0; i < n; i++)
        tu_put(dt, out, i, ref[i]);
    hpml_reduce_finish(out, n, dt, op, contributions);
}

/* Bytes of reference computed by MPI in f64 for n elements at this rank's data. */
static inline MPI_Op tu_mpi_op(hpml_op_t op)
{
    switch (op) {
    case HPML_PROD: return MPI_PROD;
    case HPML_MIN: return MPI_MIN;
    case HPML_MAX: return MPI_MAX;
    default: return MPI_SUM;
    }
}

static inline int tu_is_mpich(void)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;

    MPI_Get_library_version(v, &len);
    return strstr(v, "MPICH") != NULL;
}

/* The counts {0, 1, P-1, P, P+1, 1000, (1<<20)+7}. level 2: all of them;
 * 1: without the big one; 0: only up to P+1 (MPICH oversubscribed busy-polls, so its
 * runs on more ranks than cores are kept small). */
static inline size_t tu_counts(int p, int level, size_t *c)
{
    size_t n = 0;

    c[n++] = 0;
    c[n++] = 1;
    c[n++] = (size_t)p - 1;
    c[n++] = (size_t)p;
    c[n++] = (size_t)p + 1;
    if (level >= 1)
        c[n++] = 1000;
    if (level >= 2)
        c[n++] = ((size_t)1 << 20) + 7;
    return n;
}

/* The level for the default communicator and for the small-chunk one. */
static inline int tu_level(int small)
{
    int crowded = tu_is_mpich() && hpmlt_size() > 2;

    if (small)
        return crowded ? 0 : 1;
    return crowded ? 1 : 2;
}

/* Label of the second communicator of tu_init_comms. */
#define TU_SMALL "rpn=2,chunk=333"

/* Start the test (hpmlt_init) and create the two communicators every collective test
 * runs on: the default one, and TU_SMALL, with virtual nodes of 2 ranks and the internal
 * chunk limit lowered to 333 elements. The message limit is set first, because it is
 * read once: 1 MiB + 3 splits the big count's messages into uneven pieces. */
static inline void tu_init_comms(int *argc, char ***argv, const char *name, hpml_comm_t **comm,
                                 hpml_comm_t **small)
{
    hpml_comm_config_t cfg = {.check = 0, .ranks_per_node = 2};

    *comm = *small = NULL;
    setenv("HPML_MAX_MSG_BYTES", "1048579", 1);
    hpmlt_init(argc, argv, name);
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, NULL, comm));
    setenv("HPML_MAX_CHUNK_ELEMS", "333", 1);
    HPMLT_CALL(hpml_comm_create(MPI_COMM_WORLD, &cfg, small));
    unsetenv("HPML_MAX_CHUNK_ELEMS");
}

/* First index where a and b differ (n elements of es bytes), or n. */
static inline size_t tu_first_diff(const void *a, const void *b, size_t n, size_t es)
{
    if (memcmp(a, b, n * es) == 0)
        return n;
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)a + i * es, (const char *)b + i * es, es) != 0)
            return i;
    return n;
}

/* A call that must fail with HPML_ERR_MISMATCH and a message containing `needle`; rank 0
 * prints the message (what HPML_CHECK users see). */
static inline void tu_expect_mismatch(int rc, const char *what, const char *needle)
{
    const char *msg = hpml_last_error();

    HPMLT_CHECK(rc == HPML_ERR_MISMATCH, "%s: rc %d (%s), expected a mismatch", what, rc,
                hpml_strerror(rc));
    HPMLT_CHECK(strstr(msg, needle) != NULL, "%s: message '%s' lacks '%s'", what, msg, needle);
    if (hpmlt_rank() == 0)
        printf("%s -> %s\n", what, msg);
}

#endif
