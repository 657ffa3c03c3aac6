/*
 * The settings registry inside the library (settings.c): the identifiers of the HPML_*
 * settings, in the order of the registry, and their values as read from the environment.
 */
#ifndef HPML_CORE_SETTINGS_INTERNAL_H
#define HPML_CORE_SETTINGS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hpml/core.h"

typedef enum {
    HPML__S_LOG_LEVEL,
    HPML__S_SIMD,
    HPML__S_CHECK,
    HPML__S_RANKS_PER_NODE,
    HPML__S_TUNING_FILE,
    HPML__S_ALGO_ALLREDUCE, /* the five HPML_ALGO_* in hpml_coll_t order */
    HPML__S_ALGO_BCAST,
    HPML__S_ALGO_REDUCE,
    HPML__S_ALGO_ALLGATHER,
    HPML__S_ALGO_REDUCE_SCATTER,
    HPML__S_PROGRESS,
    HPML__S_MAX_CHUNK_ELEMS,
    HPML__S_MAX_MSG_BYTES,
    HPML__S_BCAST_CHUNK,
    HPML__S_BCAST_SHM_CHUNK,
    HPML__S_SHM_CHUNK,
    HPML__S_SHM_NBUF,
    HPML__S_SHM_SMALL,
    HPML__S_SHM_NT,
    HPML__S_SHM_OUT_NT,
    HPML__S_SHM_SPIN,
    HPML__S_SHM_CMA,
    HPML__S_KMEANS_GEMM,
    HPML__S_KNN_DGEMM,
    HPML__S_BENCH_BREAK,
    HPML__S_BENCH_STORE,
    HPML__S_COUNT
} hpml__setting_id_t;

/* Every setting as read from the environment at one moment: set[i] when given and
 * well-formed; value[i] its number (sizes and counts) or its index in the choices
 * (CHOICE); text[i] the value as given (malloc'ed copy; NULL when unset). */
typedef struct hpml__settings {
    unsigned char set[HPML__S_COUNT];
    uint64_t value[HPML__S_COUNT];
    char *text[HPML__S_COUNT];
} hpml__settings_t;

/* Read the whole registry now. 0, or HPML_ERR_INVAL naming the first malformed variable,
 * its value and what it accepts ("HPML_SHM_CHUNK='0' is not a size from 64 to ...");
 * every other setting is read all the same. Free with hpml__settings_free. */
int hpml__settings_read(hpml__settings_t *out);
void hpml__settings_free(hpml__settings_t *s);

/* The value in force of setting id in s: its value when set, else its default's (the
 * registry's text, parsed), else UINT64_MAX (a default that is not a value: "measured",
 * "unlimited"). So that "64K" and "65536" are one value, and unset and the default too. */
uint64_t hpml__setting_effective(const hpml__settings_t *s, hpml__setting_id_t id);

/* One setting from the environment now: 1 and *v when given and well-formed, else 0
 * (*v untouched: the caller's default). For readers outside a communicator; a malformed
 * value is refused by every hpml_comm_create. */
int hpml__setting_env(hpml__setting_id_t id, uint64_t *v);

/* Parse text as setting id would be: 0, or -1 with why. */
int hpml__setting_parse(hpml__setting_id_t id, const char *text, uint64_t *v, char *why,
                        size_t size);

#endif
