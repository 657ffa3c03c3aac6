/*
 * Fuzz target: CSV files (src/io/csv.c): header and delimiter detection, quoting, the
 * line-end scan with its checkpoints and the block reads, by format and by detection.
 */
#include <stdint.h>

#include "fuzz/common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("in.csv", data, size);

    fuzz_read_all(path, HPML_FMT_CSV);
    fuzz_detect(path);
    return 0;
}
