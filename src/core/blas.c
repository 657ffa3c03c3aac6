/* Which BLAS hpml is linked with, and its thread count (OpenBLAS's own queries). */
#include <cblas.h>

#include "hpml/core.h"

const char *hpml_blas_config(void)
{
    return openblas_get_config();
}

int hpml_blas_threads(void)
{
    return openblas_get_num_threads();
}

void hpml_blas_set_threads(int n)
{
    openblas_set_num_threads(n);
}
