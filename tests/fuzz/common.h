/*
 * Shared by the fuzz targets (tests/fuzz/fuzz_<name>.c, one per loader): the readers take
 * paths, so each input is written to a file in a folder of this process on a tmpfs, and
 * readers are driven through every conversion and partition so more of them is reached.
 * Broken promises (a message that does not name the file, a success without data, blocks
 * that do not add up to the whole) abort, so the fuzzer reports them as crashes.
 */
#ifndef HPML_FUZZ_COMMON_H
#define HPML_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "hpml/io.h"

/* libFuzzer's entry point, defined by each target; tests/fuzz/replay_main.c calls it too. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Write size bytes to `name` in the process's temporary folder (made on first use under
 * /dev/shm, else $TMPDIR or /tmp, removed at exit) and return its path, valid until the
 * next call with the same name. Aborts when the folder cannot be written. */
const char *fuzz_file(const char *name, const void *data, size_t size);

/* Abort with a message when cond is false: a contract of the library is broken. */
#define FUZZ_CHECK(cond) ((cond) ? (void)0 : fuzz_fail(#cond, __FILE__, __LINE__))
void fuzz_fail(const char *what, const char *file, int line) __attribute__((noreturn));

/* A failed call returned a negative HPML_ERR_* and left a one-line message naming `path`
 * (the caller cleared the message before the call). */
void fuzz_check_error(int rc, const char *path);

/* Read the file at path in format fmt as every type a reader converts to, whole and as
 * blocks of 2 and 3 ranks, and check that the results agree with each other. */
void fuzz_read_all(const char *path, hpml_format_t fmt);

/* The shape and first row of the file at path by format detection (HPML_FMT_AUTO), which
 * may pick another format than its name says: only the error contract is checked. */
void fuzz_detect(const char *path);

#endif /* HPML_FUZZ_COMMON_H */
