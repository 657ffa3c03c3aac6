/*
 * Fuzz target: tuning files (HPML_TUNING_FILE, written by `hpml tune`), parsed by
 * hpml__select_load in src/comm/select.c without MPI. A file that loads is used as a
 * communicator's table (a zeroed one: no MPI call is made) for a few rank and node counts,
 * and described as `hpml info` does, in text and JSON.
 */
#include <stdio.h>
#include <stdlib.h>

#include "comm/comm_internal.h"
#include "fuzz/common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int shapes[][2] = {{1, 1}, {2, 1}, {4, 2}, {7, 3}};
    static FILE *devnull;
    const char *path = fuzz_file("tuning.txt", data, size);
    struct hpml_select *s = NULL;
    hpml_comm_t comm = {0};
    int rc;

    hpml_clear_error();
    rc = hpml__select_load(&s, path);
    if (rc != 0) {
        fuzz_check_error(rc, path);
        FUZZ_CHECK(s == NULL);
        return 0;
    }
    if (devnull == NULL)
        devnull = fopen("/dev/null", "w");
    FUZZ_CHECK(devnull != NULL);
    comm.select = s;
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        comm.size = shapes[i][0];
        comm.nodes = shapes[i][1];
        for (int c = 0; c < HPML_COLL_COUNT; c++)
            for (size_t bytes = 0; bytes < ((size_t)1 << 40); bytes = bytes * 8 + 1)
                FUZZ_CHECK((unsigned)hpml__select(&comm, (hpml_coll_t)c, bytes) < HPML_ALGO_COUNT);
        FUZZ_CHECK(hpml_select_describe(&comm, devnull, 0) == 0);
        FUZZ_CHECK(hpml_select_describe(&comm, devnull, 1) == 0);
    }
    hpml__select_free(s);
    return 0;
}
