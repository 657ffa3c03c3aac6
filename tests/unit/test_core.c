/* Unit tests for core basics: errors, dtypes/ops tables, aligned memory, timers, JSON. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "hpml/core.h"

static void test_strerror(void **state)
{
    (void)state;
    assert_string_equal(hpml_strerror(HPML_OK), "success");
    assert_string_equal(hpml_strerror(HPML_ERR_INVAL), "invalid argument");
    assert_string_equal(hpml_strerror(HPML_ERR_MISMATCH), "ranks disagree on a collective");
    assert_string_equal(hpml_strerror(12345), "unknown error");
    /* Every defined code has its own text. */
    for (int a = HPML_ERR_STATE; a <= 0; a++)
        for (int b = a + 1; b <= 0; b++)
            assert_string_not_equal(hpml_strerror(a), hpml_strerror(b));
}

static void test_last_error(void **state)
{
    (void)state;
    hpml_clear_error();
    assert_string_equal(hpml_last_error(), "");
    assert_int_equal(hpml_set_error(HPML_ERR_FORMAT, "%s: bad %d", "x.npy", 7), HPML_ERR_FORMAT);
    assert_string_equal(hpml_last_error(), "x.npy: bad 7");
    /* Bytes quoted from a file cannot break the line or reach the terminal. */
    hpml_set_error(HPML_ERR_FORMAT, "%s: word '%s'", "x.csv", "a\nb\r\x1b[2J\x7f\tc");
    assert_string_equal(hpml_last_error(), "x.csv: word 'a?b??[2J??c'");
    hpml_clear_error();
    assert_string_equal(hpml_last_error(), "");
}

static void test_dtypes(void **state)
{
    static const size_t sizes[HPML_DTYPE_COUNT] = {4, 8, 2, 2, 1, 1, 4, 8};
    hpml_dtype_t dt;

    (void)state;
    for (int i = 0; i < HPML_DTYPE_COUNT; i++) {
        assert_int_equal(hpml_dtype_size((hpml_dtype_t)i), sizes[i]);
        assert_int_equal(hpml_dtype_parse(hpml_dtype_name((hpml_dtype_t)i), &dt), 0);
        assert_int_equal(dt, i);
    }
    assert_int_equal(hpml_dtype_size(HPML_DTYPE_COUNT), 0);
    assert_string_equal(hpml_dtype_name((hpml_dtype_t)99), "?");
    assert_int_equal(hpml_dtype_parse("MPI_FLOAT", &dt), 0);
    assert_int_equal(dt, HPML_F32);
    assert_int_equal(hpml_dtype_parse("mpi_char", &dt), 0);
    assert_int_equal(dt, HPML_I8);
    assert_int_equal(hpml_dtype_parse("bf16", &dt), 0);
    assert_int_equal(dt, HPML_BF16);
    assert_int_equal(hpml_dtype_parse("f17", &dt), HPML_ERR_INVAL);
    assert_int_equal(hpml_dtype_parse(NULL, &dt), HPML_ERR_INVAL);
    assert_true(hpml_dtype_is_float(HPML_BF16));
    assert_false(hpml_dtype_is_float(HPML_I64));
}

static void test_ops(void **state)
{
    hpml_op_t op;

    (void)state;
    for (int i = 0; i < HPML_OP_COUNT; i++) {
        assert_int_equal(hpml_op_parse(hpml_op_name((hpml_op_t)i), &op), 0);
        assert_int_equal(op, i);
    }
    assert_int_equal(hpml_op_parse("MAX", &op), 0);
    assert_int_equal(op, HPML_MAX);
    assert_int_equal(hpml_op_parse("mean", &op), HPML_ERR_INVAL);
}

static void test_alloc(void **state)
{
    (void)state;
    for (size_t n = 0; n < 300; n += 7) {
        unsigned char *p = hpml_malloc(n);

        assert_non_null(p);
        assert_int_equal((uintptr_t)p % HPML_ALIGN, 0);
        memset(p, 0xab, n);
        hpml_free(p);
    }
    {
        unsigned char *z = hpml_calloc(1000, 3);

        assert_non_null(z);
        assert_int_equal((uintptr_t)z % HPML_ALIGN, 0);
        for (int i = 0; i < 3000; i++)
            assert_int_equal(z[i], 0);
        hpml_free(z);
    }
    assert_null(hpml_calloc(SIZE_MAX / 2, 4)); /* overflow is caught, not wrapped */
    assert_null(hpml_malloc(SIZE_MAX - 8));
    hpml_free(NULL);
}

static void test_timer(void **state)
{
    struct timespec ten_ms = {0, 10 * 1000 * 1000};
    double t0, t1;
    uint64_t n0, n1;

    (void)state;
    t0 = hpml_time();
    n0 = hpml_time_ns();
    nanosleep(&ten_ms, NULL);
    t1 = hpml_time();
    n1 = hpml_time_ns();
    /* Monotonic and at least the sleep; no upper bound (a loaded machine may stall). */
    assert_true(t1 - t0 >= 0.0095);
    assert_true(n1 - n0 >= 9500000u);
}

static void test_json_string(void **state)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    (void)state;
    assert_non_null(f);
    hpml_json_string(f, "a\"b\\c\nd\te\x01");
    fclose(f);
    assert_string_equal(buf, "\"a\\\"b\\\\c\\nd\\te\\u0001\"");
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strerror),    cmocka_unit_test(test_last_error),
        cmocka_unit_test(test_dtypes),      cmocka_unit_test(test_ops),
        cmocka_unit_test(test_alloc),       cmocka_unit_test(test_timer),
        cmocka_unit_test(test_json_string),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
