/*
 * Helpers shared by the io unit tests (header-only: every tests/unit/test_*.c is its own
 * binary). A temporary folder per test binary, Python (/usr/bin/python3 with NumPy) to
 * make reference files at test time, and error-message checks.
 */
#ifndef HPML_TEST_IO_UTIL_H
#define HPML_TEST_IO_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "hpml/io.h"

static char io_tdir[256];

static inline int io_setup(void **state)
{
    (void)state;
    snprintf(io_tdir, sizeof(io_tdir), "/tmp/hpml-io-test-XXXXXX");
    return mkdtemp(io_tdir) != NULL ? 0 : -1;
}

static inline int io_teardown(void **state)
{
    char cmd[512];
    (void)state;
    if (getenv("HPML_TEST_KEEP") == NULL) {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", io_tdir);
        if (system(cmd) != 0)
            return -1;
    }
    return 0;
}

/* tdir/name in a static rotating buffer (a few at a time are enough). */
static inline const char *tp(const char *name)
{
    static char bufs[8][512];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, 512, "%s/%s", io_tdir, name);
    return b;
}

/* Run Python code with the temp folder as the working directory; 0 if it succeeded. */
static inline int py(const char *code)
{
    const char *script = tp("script.py");
    char cmd[1024];
    FILE *f = fopen(script, "w");
    int st;

    if (f == NULL)
        return -1;
    fputs("import sys, os, struct, gzip\nimport numpy as np\n", f);
    fputs(code, f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "cd '%s' && /usr/bin/python3 '%s'", io_tdir, script);
    st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static inline void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static inline void write_text(const char *path, const char *s)
{
    write_bytes(path, s, strlen(s));
}

/* Whole file into malloc'ed memory. */
static inline unsigned char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    unsigned char *p;
    long len;

    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    fseek(f, 0, SEEK_SET);
    p = malloc((size_t)len + 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return p;
}

/* The call failed with code `want` and a message containing `sub`. */
#define expect_error(rc, want, sub) expect_error_at((rc), (want), (sub), __FILE__, __LINE__)
static inline void expect_error_at(int rc, int want, const char *sub, const char *file, int line)
{
    const char *msg = hpml_last_error();
    if (rc != want || strstr(msg, sub) == NULL) {
        print_error("%s:%d: got %d '%s', expected %d with '%s'\n", file, line, rc, msg, want, sub);
        fail();
    }
}

/* Count directory entries whose name contains `sub` (left-over temp files). */
static inline int count_entries(const char *sub)
{
    char cmd[600];
    FILE *p;
    int n = -1;

    snprintf(cmd, sizeof(cmd), "ls -a '%s' | grep -c -- '%s'", io_tdir, sub);
    p = popen(cmd, "r");
    if (p != NULL) {
        if (fscanf(p, "%d", &n) != 1)
            n = -1;
        pclose(p);
    }
    return n;
}

#endif /* HPML_TEST_IO_UTIL_H */
