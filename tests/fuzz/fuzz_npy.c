/*
 * Fuzz target: NumPy .npy files (src/io/npy.c and the dense reader of src/io/io.c),
 * through the public hpml_io_shape / hpml_io_read_rows / hpml_io_read_block, by format
 * and by format detection, and as the images and labels of hpml_dataset_load.
 */
#include <stdint.h>

#include "fuzz/common.h"
#include "hpml/nn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("in.npy", data, size);
    hpml_dataset_t d;
    int rc;

    fuzz_read_all(path, HPML_FMT_NPY);
    fuzz_detect(path);
    /* A 1-D or (N, 1) file is both images and labels of a data set. */
    hpml_clear_error();
    rc = hpml_dataset_load(path, path, 0, SIZE_MAX, -1.0f, 0.5f, 2.0f, &d);
    if (rc != 0)
        fuzz_check_error(rc, path);
    else
        FUZZ_CHECK(d.n == 0 || (d.x != NULL && d.y != NULL));
    hpml_dataset_free(&d);
    return 0;
}
