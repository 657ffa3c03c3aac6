/*
 * Store modes of the shared-memory allreduce (store_mode.c): plain or streaming stores
 * for the pipeline buffers that peers read and for the caller's output, and the picker
 * that measures which is faster per size class (docs/decisions/store-modes.md).
 */
#ifndef HPML_COMM_STORE_MODE_H
#define HPML_COMM_STORE_MODE_H

#include <stddef.h>
#include <stdint.h>

struct hpml_shm;

/* Size classes: [64K, 256K), [256K, 1M), [1M, 4M), [4M, 16M), 16M and more. */
#define HPML_SHM_MODE_CLASSES 5
/* Knobs: how the pipeline buffers that peers read are written [0], and how the caller's
 * output is [1]. */
#define HPML_SHM_KNOBS 2

/* The store modes of one operation: streaming stores into the pipeline buffers (bit
 * HPML_SHM_MODE_PIPE) and into the caller's output (bit HPML_SHM_MODE_OUT), each plain
 * when its bit is clear. */
#define HPML_SHM_MODE_PIPE 1
#define HPML_SHM_MODE_OUT  2

/* The picker's state, one per node segment (hpml_shm_t.mode). What this rank measured;
 * the figures every rank publishes for the others live in its control block
 * (hpml_shm_ctrl_t.mode_cost). */
typedef struct hpml_store_mode {
    int nt;           /* HPML_SHM_NT: pipeline streamed 1, plain 0, measured -1 */
    int out_nt;       /* HPML_SHM_OUT_NT: outputs streamed 1, plain 0, measured -1 */
    size_t llc_bytes; /* last-level cache of this rank's core (0: unknown) */
    /* Per size class and knob: seconds per byte of plain [0] and streaming [1]
     * operations, the first samples of each, the calls in which the knob was measured,
     * the mode it runs between probes, and its call count when each mode's figure was
     * last measured. */
    double cost[HPML_SHM_MODE_CLASSES][HPML_SHM_KNOBS][2];
    double warm[HPML_SHM_MODE_CLASSES][HPML_SHM_KNOBS][2][3];
    unsigned calls[HPML_SHM_MODE_CLASSES][HPML_SHM_KNOBS];
    int cur[HPML_SHM_MODE_CLASSES][HPML_SHM_KNOBS];
    unsigned seen[HPML_SHM_MODE_CLASSES][HPML_SHM_KNOBS][2];
    /* Per size class: */
    int last[HPML_SHM_MODE_CLASSES];             /* modes of its last call + 1 (0: none yet) */
    uint64_t last_step[HPML_SHM_MODE_CLASSES];   /* the segment's step at its last call */
    unsigned run[HPML_SHM_MODE_CLASSES];         /* its calls since a gap of MODE_STALE steps */
    unsigned class_calls[HPML_SHM_MODE_CLASSES]; /* its calls since its warm-up began */
    /* What the call between hpml__shm_mode_pick and hpml__shm_mode_record measures: its
     * class (-1: nothing), its modes, and per knob its role (ROLE_* in store_mode.c). */
    int pend_class, pend_modes, pend_role[HPML_SHM_KNOBS];
} hpml_store_mode_t;

/* A picker with no figures yet; nt and out_nt as HPML_SHM_NT and HPML_SHM_OUT_NT give
 * them (-1: measured), llc_bytes as hpml_cpu_llc_bytes does. */
void hpml__store_mode_init(hpml_store_mode_t *sm, int nt, int out_nt, size_t llc_bytes);
/* The store modes for an operation of `bytes` on segment s (out_ok: the operation writes
 * the caller's output, so that knob applies; otherwise its bit stays clear), from the
 * measurements that hpml__shm_mode_record collects: the seconds that operation took,
 * recorded before the next pick on this segment. */
int hpml__shm_mode_pick(struct hpml_shm *s, size_t bytes, int out_ok);
void hpml__shm_mode_record(struct hpml_shm *s, size_t bytes, double seconds);
/* memcpy (nt = 0) or a copy with streaming stores (nt = 1). */
void hpml__shm_copy(void *dst, const void *src, size_t n, int nt);

#endif /* HPML_COMM_STORE_MODE_H */
