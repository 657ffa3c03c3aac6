/*
 * The checkpoint file for the ranks of a run: rank 0 writes it (temporary name, fsync,
 * rename) and every rank learns whether it worked; rank 0 reads it and broadcasts the
 * bytes, so every rank decodes the same ones and reaches the same verdict (the ranks
 * need not share a file system). The format is checkpoint.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hpml/comm.h"
#include "nn/nn_internal.h"

#define CKPT_NAME "checkpoint.hpml"

/* "<dir>/checkpoint.hpml", malloc'ed; NULL when out of memory. */
static char *ckpt_path(const char *dir)
{
    char *p = malloc(strlen(dir) + sizeof(CKPT_NAME) + 2);

    if (p != NULL)
        sprintf(p, "%s/%s", dir, CKPT_NAME);
    return p;
}

/* Rank 0's part of a save: encode and write atomically. */
static int ckpt_write(const char *dir, const hpml_model_t *m, hpml_optim_t *o, const nn_ckpt_t *st)
{
    nn_buf_t b = {0};
    char *path = NULL;
    int err;

    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return hpml_set_error(HPML_ERR_IO, "%s: cannot create checkpoint folder: %s", dir,
                              strerror(errno));
    err = hpml__ckpt_encode(m, o, st, &b);
    if (err == 0 && (path = ckpt_path(dir)) == NULL)
        err = HPML_ERR_NOMEM;
    if (err == 0)
        err = hpml__nn_write_atomic(path, b.p, b.len);
    free(b.p);
    free(path);
    return err;
}

int hpml__ckpt_save(hpml_comm_t *comm, const char *dir, const hpml_model_t *m, hpml_optim_t *o,
                    const nn_ckpt_t *st)
{
    int32_t rc = hpml_comm_rank(comm) == 0 ? ckpt_write(dir, m, o, st) : 0;
    int err = hpml_allreduce(HPML_IN_PLACE, &rc, 1, HPML_I32, HPML_MIN, comm);

    if (err != 0)
        return err;
    if (rc != 0 && hpml_comm_rank(comm) != 0)
        hpml_set_error(rc, "%s: rank 0 could not write the checkpoint", dir);
    return rc;
}

int hpml__ckpt_load(hpml_comm_t *comm, const char *dir, hpml_model_t *m, hpml_optim_t *o,
                    const nn_ckpt_t *now, nn_ckpt_t *st)
{
    unsigned char *p = NULL;
    size_t len = 0;
    char *path = ckpt_path(dir);
    int64_t hdr[2] = {0, 0}; /* error, length */
    int err = 0;

    /* Rank 0 reads; every rank parses the same bytes (ranks need not share a file
     * system), so every rank reaches the same verdict. */
    if (hpml_comm_rank(comm) == 0) {
        hdr[0] = path != NULL ? hpml__nn_read_file(path, &p, &len) : HPML_ERR_NOMEM;
        hdr[1] = (int64_t)len;
    }
    if ((err = hpml_bcast(hdr, 2, HPML_I64, 0, comm)) != 0)
        goto out;
    if (hdr[0] != 0) {
        err = (int)hdr[0];
        if (hpml_comm_rank(comm) != 0)
            hpml_set_error(err, "%s/%s: cannot read the checkpoint on rank 0", dir, CKPT_NAME);
        goto out;
    }
    len = (size_t)hdr[1];
    if (hpml_comm_rank(comm) != 0 && (p = malloc(len + 1)) == NULL) {
        err = hpml_set_error(HPML_ERR_NOMEM, "%s: no memory for the %zu-byte checkpoint", dir, len);
        goto out;
    }
    if ((err = hpml_bcast(p, len, HPML_U8, 0, comm)) != 0)
        goto out;
    if ((err = hpml__ckpt_decode(path, p, len, m, o, st)) == 0 &&
        (err = hpml__ckpt_check_run(path, st, now)) != 0) {
        free(st->rank_sums);
        st->rank_sums = NULL;
    }
out:
    free(p);
    free(path);
    return err;
}
