/*
 * Private to src/ml (knn, pca, linreg, logreg): agree on a local failure before the next
 * collective, so that a rank that failed (e.g. an allocation) does not leave the others
 * waiting in a collective it will never join.
 */
#ifndef HPML_ML_AGREE_H
#define HPML_ML_AGREE_H

#include "hpml/comm.h"

/* Collective. Returns this rank's rc if non-zero; HPML_ERR_NOMEM-style codes of other
 * ranks are reported as the smallest (most negative) rc of any rank; 0 if all were 0.
 * A failure of the allreduce itself is returned as is. */
static inline int hpml__ml_agree(hpml_comm_t *comm, int rc)
{
    int32_t v = rc;
    int err;

    if ((err = hpml_allreduce(HPML_IN_PLACE, &v, 1, HPML_I32, HPML_MIN, comm)) != 0)
        return err;
    if (rc != 0)
        return rc;
    if (v != 0)
        return hpml_set_error(v, "failed on another rank (%s)", hpml_strerror(v));
    return 0;
}

#endif
