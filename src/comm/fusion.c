/*
 * Tensor fusion: many small tensors are packed into one buffer, allreduced once and
 * copied back (Horovod's tensor fusion, PyTorch DDP's gradient buckets). One allreduce
 * of the packed bytes costs one α instead of one per tensor. A tensor larger than the
 * buffer is allreduced in place on its own, in its turn, so the order of operations is
 * the order of hpml_fusion_add on every rank.
 */
#include <stdlib.h>
#include <string.h>

#include "hpml/comm.h"
#include "hpml/core.h"

/* Capacity when the caller passes 0: Horovod's default fusion threshold. */
#define DEFAULT_CAPACITY ((size_t)64 << 20)

typedef struct {
    void *p;
    size_t count;
} entry_t;

struct hpml_fusion {
    hpml_comm_t *comm;
    hpml_dtype_t dtype;
    hpml_op_t op;
    size_t capacity; /* elements of the packing buffer */
    void *buf;
    entry_t *ent;
    size_t n, cap_ent;
};

int hpml_fusion_create(hpml_comm_t *comm, hpml_dtype_t dtype, hpml_op_t op, size_t capacity_bytes,
                       hpml_fusion_t **out)
{
    hpml_fusion_t *f;
    size_t es;

    if (out == NULL || comm == NULL || (unsigned)dtype >= HPML_DTYPE_COUNT ||
        (unsigned)op >= HPML_OP_COUNT)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_fusion_create: invalid argument");
    *out = NULL;
    es = hpml_dtype_size(dtype);
    if (capacity_bytes == 0)
        capacity_bytes = DEFAULT_CAPACITY;
    if (capacity_bytes < es)
        return hpml_set_error(HPML_ERR_INVAL,
                              "hpml_fusion_create: capacity %zu bytes holds no "
                              "%s element",
                              capacity_bytes, hpml_dtype_name(dtype));
    if ((f = calloc(1, sizeof(*f))) == NULL)
        return HPML_ERR_NOMEM;
    f->comm = comm;
    f->dtype = dtype;
    f->op = op;
    f->capacity = capacity_bytes / es;
    if ((f->buf = hpml_malloc(f->capacity * es)) == NULL) {
        free(f);
        return HPML_ERR_NOMEM;
    }
    *out = f;
    return 0;
}

void hpml_fusion_destroy(hpml_fusion_t *f)
{
    if (f == NULL)
        return;
    hpml_free(f->buf);
    free(f->ent);
    free(f);
}

int hpml_fusion_add(hpml_fusion_t *f, void *tensor, size_t count)
{
    if (f == NULL || (tensor == NULL && count > 0))
        return hpml_set_error(HPML_ERR_INVAL, "hpml_fusion_add: NULL argument");
    if (f->n == f->cap_ent) {
        size_t nc = f->cap_ent ? 2 * f->cap_ent : 16;
        entry_t *e = realloc(f->ent, nc * sizeof(*e));

        if (e == NULL)
            return HPML_ERR_NOMEM;
        f->ent = e;
        f->cap_ent = nc;
    }
    f->ent[f->n].p = tensor;
    f->ent[f->n].count = count;
    f->n++;
    return 0;
}

/* Allreduce the packed entries [first, last) (total `count` elements) and unpack. */
static int flush(hpml_fusion_t *f, size_t first, size_t last, size_t count)
{
    size_t es = hpml_dtype_size(f->dtype), off = 0;
    char *b = f->buf;
    int rc;

    if (count == 0)
        return 0;
    for (size_t i = first; i < last; i++, off += f->ent[i - 1].count)
        memcpy(b + off * es, f->ent[i].p, f->ent[i].count * es);
    if ((rc = hpml_allreduce(HPML_IN_PLACE, b, count, f->dtype, f->op, f->comm)) != 0)
        return rc;
    off = 0;
    for (size_t i = first; i < last; i++, off += f->ent[i - 1].count)
        memcpy(f->ent[i].p, b + off * es, f->ent[i].count * es);
    return 0;
}

int hpml_fusion_execute(hpml_fusion_t *f)
{
    size_t first = 0, used = 0;
    int rc = 0;

    if (f == NULL)
        return hpml_set_error(HPML_ERR_INVAL, "hpml_fusion_execute: NULL argument");
    for (size_t i = 0; i < f->n && rc == 0; i++) {
        size_t c = f->ent[i].count;

        if (c > f->capacity) {
            /* Too big to pack: flush what is pending, then reduce it where it is. */
            if ((rc = flush(f, first, i, used)) == 0)
                rc = hpml_allreduce(HPML_IN_PLACE, f->ent[i].p, c, f->dtype, f->op, f->comm);
            first = i + 1;
            used = 0;
        } else if (used + c > f->capacity) {
            rc = flush(f, first, i, used);
            first = i;
            used = c;
        } else {
            used += c;
        }
    }
    if (rc == 0)
        rc = flush(f, first, f->n, used);
    /* Forget the tensors either way: they were borrowed only until this call returns. */
    f->n = 0;
    return rc;
}
