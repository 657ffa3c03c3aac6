/* io: CSV reader and writer: round trips at 1-3 ranks, header and delimiter detection
 * (a mixed first row is an error; nan/inf may be column names), a UTF-8 byte-order mark,
 * blank and comment lines, NumPy savetxt files, line-numbered errors. */
#include <math.h>

#include "test_io_util.h"

#define BOM "\xEF\xBB\xBF" /* UTF-8 byte-order mark, as Excel writes at the start of a CSV */

/* The call failed with code `want` and the message is exactly "<temp dir>/<tail>":
 * expect_error's substring match would also pass a message with a hint appended. */
#define expect_exact(rc, want, tail) expect_exact_at((rc), (want), (tail), __LINE__)
static void expect_exact_at(int rc, int want, const char *tail, int line)
{
    const char *msg = hpml_last_error();
    size_t m = strlen(msg), t = strlen(tail);

    if (rc != want || m <= t || strcmp(msg + m - t, tail) != 0 || msg[m - t - 1] != '/') {
        print_error("%s:%d: got %d '%s', expected %d with '.../%s'\n", __FILE__, line, rc, msg,
                    want, tail);
        fail();
    }
}

static void read_all_blocks_f64(const char *path, int p, double *out, size_t *rows_out,
                                size_t *cols_out)
{
    size_t rows, cols;
    int r;

    assert_int_equal(hpml_io_shape(path, HPML_FMT_AUTO, &rows, &cols, NULL), 0);
    for (r = 0; r < p; r++) {
        hpml_array_t a;
        size_t b, e;
        int rc = hpml_io_read_block(path, HPML_FMT_AUTO, HPML_F64, r, p, 0, &a);
        if (rc != 0)
            print_error("%s\n", hpml_last_error());
        assert_int_equal(rc, 0);
        hpml_io_partition(rows, r, p, &b, &e);
        assert_int_equal(a.row_offset, b);
        assert_int_equal(a.rows, e - b);
        assert_int_equal(a.cols, cols);
        assert_int_equal(a.total_rows, rows);
        memcpy(out + b * cols, a.data, a.rows * cols * sizeof(double));
        hpml_array_free(&a);
    }
    *rows_out = rows;
    *cols_out = cols;
}

static void test_roundtrip(void **state)
{
    enum { R = 2501, C = 3 }; /* more rows than one scan checkpoint (1024) */
    double *d = malloc(R * C * sizeof(double)), *got = malloc(R * C * sizeof(double));
    float *f = malloc(R * C * sizeof(float));
    int32_t iv[6] = {-2147483647 - 1, 2147483647, 0, -1, 5, 7};
    hpml_rng_t rng;
    size_t i, rows, cols;
    int p;

    (void)state;
    hpml_rng_init(&rng, 7, 0);
    for (i = 0; i < R * C; i++) {
        d[i] = (hpml_rng_uniform(&rng) - 0.5) * pow(10.0, (double)hpml_rng_below(&rng, 40) - 20);
        f[i] = (float)d[i];
    }
    d[5] = 1e308;
    d[6] = -4.9e-324;
    assert_int_equal(hpml_csv_write(tp("d.csv"), d, HPML_F64, R, C, "x,y,z"), 0);
    assert_int_equal(hpml_csv_write(tp("f.csv"), f, HPML_F32, R, C, NULL), 0);
    for (p = 1; p <= 3; p++) {
        read_all_blocks_f64(tp("d.csv"), p, got, &rows, &cols);
        assert_int_equal(rows, R);
        assert_int_equal(cols, C);
        assert_memory_equal(got, d, R * C * sizeof(double)); /* %.17g round-trips */
        read_all_blocks_f64(tp("f.csv"), p, got, &rows, &cols);
        assert_int_equal(rows, R);
        for (i = 0; i < R * C; i++)
            assert_true((float)got[i] == f[i]); /* %.9g round-trips f32 */
    }
    /* A block in the middle, as f32, bit exact. */
    hpml_array_t a;
    assert_int_equal(hpml_io_read_rows(tp("f.csv"), HPML_FMT_CSV, HPML_F32, 1023, 2049, 1, &a), 0);
    assert_int_equal(a.rows, 1026);
    assert_memory_equal(a.data, f + 1023 * C, 1026 * C * sizeof(float));
    hpml_array_free(&a);
    /* Integers, exact, including the i32 extremes. */
    assert_int_equal(hpml_csv_write(tp("i.csv"), iv, HPML_I32, 3, 2, "a,b"), 0);
    assert_int_equal(hpml_io_read_rows(tp("i.csv"), HPML_FMT_AUTO, HPML_I32, 0, 3, 0, &a), 0);
    assert_memory_equal(a.data, iv, sizeof(iv));
    hpml_array_free(&a);
    int64_t big[2] = {9007199254740993LL, -9223372036854775807LL - 1};
    assert_int_equal(hpml_csv_write(tp("big.csv"), big, HPML_I64, 2, 1, NULL), 0);
    assert_int_equal(hpml_io_read_rows(tp("big.csv"), HPML_FMT_AUTO, HPML_I64, 0, 2, 0, &a), 0);
    assert_memory_equal(a.data, big, sizeof(big));
    hpml_array_free(&a);
    assert_int_equal(count_entries(".tmp."), 0);
    expect_error(hpml_csv_write(tp("h.csv"), iv, HPML_I32, 3, 2, "a\nb"), HPML_ERR_INVAL,
                 "h.csv: the CSV header must be one line");
    free(d);
    free(got);
    free(f);
}

static void test_dialects(void **state)
{
    static const char *files[][2] = {
        {"plain.csv", "1,2,3\n4,5,6\n7,8,9\n10,11,12\n13,14,15\n"},
        {"header.csv", "a,b,c\n1,2,3\n4,5,6\n7,8,9\n10,11,12\n13,14,15\n"},
        {"crlf.csv", "a,b,c\r\n1,2,3\r\n4,5,6\r\n7,8,9\r\n10,11,12\r\n13,14,15\r\n"},
        {"semi.csv", "1;2;3\n4;5;6\n7;8;9\n10;11;12\n13;14;15"}, /* no final newline */
        {"tab.tsv", "x\ty\tz\n1\t2\t3\n4\t5\t6\n7\t8\t9\n10\t11\t12\n13\t14\t15\n"},
        {"space.txt", "  1 2   3\n4 5 6\n7\t8 9\n10 11 12\n13 14 15 \n"},
        {"quoted.csv", "\"a, 1\",\"b\",c\n\"1\", 2 ,3\n4,5,6\n7,8,9\n10,11,12\n13,14,15\n"},
        {"blank.csv",
         "# comment\n\n  \na,b,c\n1,2,3\n\n4,5,6\n# more\n7,8,9\n   \n10,11,12\n13,14,15\n\n"},
    };
    double got[15];
    size_t k, i, rows, cols;
    int p;

    (void)state;
    for (k = 0; k < sizeof(files) / sizeof(files[0]); k++) {
        write_text(tp(files[k][0]), files[k][1]);
        for (p = 1; p <= 3; p++) {
            memset(got, 0, sizeof(got));
            read_all_blocks_f64(tp(files[k][0]), p, got, &rows, &cols);
            if (rows != 5 || cols != 3)
                print_error("%s: %zu x %zu\n", files[k][0], rows, cols);
            assert_int_equal(rows, 5);
            assert_int_equal(cols, 3);
            for (i = 0; i < 15; i++)
                assert_true(got[i] == (double)(i + 1));
        }
    }
    /* Header only, and empty files: zero rows. */
    write_text(tp("honly.csv"), "a,b\n");
    assert_int_equal(hpml_io_shape(tp("honly.csv"), HPML_FMT_AUTO, &rows, &cols, NULL), 0);
    assert_int_equal(rows, 0);
    assert_int_equal(cols, 2);
    write_text(tp("empty.csv"), "");
    assert_int_equal(hpml_io_shape(tp("empty.csv"), HPML_FMT_AUTO, &rows, &cols, NULL), 0);
    assert_int_equal(rows, 0);
    hpml_array_t a;
    assert_int_equal(hpml_io_read_block(tp("empty.csv"), HPML_FMT_AUTO, HPML_F32, 1, 2, 0, &a), 0);
    assert_int_equal(a.rows, 0);
    hpml_array_free(&a);
}

/* The first content line is a header when none of its fields is a finite number, and
 * otherwise a data row, so a word in it is an error (a data row with a typo is not a
 * header). */
static void test_header(void **state)
{
    static const char *headers[][2] = {
        {"names.csv", "x1,x2,label\n1,2,3\n4,5,6\n"},
        {"unnamed.csv", ",a,b\n1,2,3\n4,5,6\n"},
        {"qnames.csv", "\"x 1\";\"x2\";y\n1;2;3\n4;5;6\n"},
        {"late.csv", "# comment\n\nx1,x2,label\n1,2,3\n4,5,6\n"},
    };
    static const char *data[][2] = {
        {"num.csv", "1,2,3\n4,5,6\n"},
        {"exp.csv", "1e0,2.0,0x3p0\n4,5,6\n"},
        {"nonfin.csv", "nan,-inf,3\n4,5,6\n"},
    };
    size_t k, rows, cols;
    hpml_array_t a;
    double got[6];

    (void)state;
    for (k = 0; k < sizeof(headers) / sizeof(headers[0]); k++) {
        write_text(tp(headers[k][0]), headers[k][1]);
        read_all_blocks_f64(tp(headers[k][0]), 2, got, &rows, &cols);
        if (rows != 2 || cols != 3)
            print_error("%s: %zu x %zu\n", headers[k][0], rows, cols);
        assert_int_equal(rows, 2);
        assert_int_equal(cols, 3);
        for (size_t i = 0; i < 6; i++)
            assert_true(got[i] == (double)(i + 1));
    }
    /* A first row of numbers is data (with one finite number, nan and inf are values). */
    for (k = 0; k < sizeof(data) / sizeof(data[0]); k++) {
        write_text(tp(data[k][0]), data[k][1]);
        read_all_blocks_f64(tp(data[k][0]), 1, got, &rows, &cols);
        assert_int_equal(rows, 2);
        assert_int_equal(cols, 3);
        assert_true(got[2] == 3.0 && got[5] == 6.0);
    }
    assert_true(isnan(got[0]) && isinf(got[1]) && got[1] < 0);
    /* Mixed: an error on every call and every rank, naming line and field. */
    write_text(tp("typo.csv"), "1.5,abc,3\n4,5,6\n7,8,9\n");
    expect_error(hpml_io_shape(tp("typo.csv"), HPML_FMT_AUTO, &rows, &cols, NULL), HPML_ERR_FORMAT,
                 "typo.csv:1: field 2 'abc' is not a number (a header row must have no finite "
                 "numeric fields)");
    for (int r = 0; r < 2; r++) {
        expect_error(hpml_io_read_block(tp("typo.csv"), HPML_FMT_AUTO, HPML_F64, r, 2, 0, &a),
                     HPML_ERR_FORMAT, "typo.csv:1: field 2 'abc' is not a number");
        assert_null(a.data);
    }
    write_text(tp("typo2.csv"), "# x\n\nx1,2,label\n1,2,3\n");
    expect_error(hpml_io_shape(tp("typo2.csv"), HPML_FMT_AUTO, &rows, &cols, NULL), HPML_ERR_FORMAT,
                 "typo2.csv:3: field 1 'x1' is not a number (a header row");
}

/* A UTF-8 byte-order mark at the start is skipped: it is not part of field 1, nor a line of
 * its own. Block reads seek to the scan's offsets, so those must count its three bytes. */
static void test_bom(void **state)
{
    enum { R = 2500 }; /* more rows than one scan checkpoint (1024) */
    static const char *files[][2] = {
        {"bom_num.csv", BOM "1,2,3\n4,5,6\n"},
        {"bom_head.csv", BOM "x1,x2,label\n1,2,3\n4,5,6\n"},
        {"bom_quoted.csv", BOM "\"x1\";\"x2\";\"y\"\n1;2;3\n4;5;6\n"},
        {"bom_comment.csv", BOM "# written by Excel\nx1,x2,label\n1,2,3\n4,5,6\n"},
        {"bom_blank.csv", BOM "\r\n1,2,3\r\n\r\n4,5,6\r\n"},
    };
    char *text = malloc(64 * 1024);
    double got[2 * R];
    size_t k, i, len, rows, cols;
    hpml_array_t a;
    int p, head;

    (void)state;
    assert_non_null(text);
    for (k = 0; k < sizeof(files) / sizeof(files[0]); k++) {
        write_text(tp(files[k][0]), files[k][1]);
        for (p = 1; p <= 2; p++) {
            memset(got, 0, sizeof(got));
            read_all_blocks_f64(tp(files[k][0]), p, got, &rows, &cols);
            assert_int_equal(rows, 2);
            assert_int_equal(cols, 3);
            for (i = 0; i < 6; i++)
                assert_true(got[i] == (double)(i + 1));
        }
    }
    /* Past the first checkpoint, with and without a header, at 1-3 ranks and one block in
     * the middle. */
    for (head = 0; head <= 1; head++) {
        len = (size_t)snprintf(text, 64, BOM "%s", head ? "x,y\n" : "");
        for (i = 0; i < R; i++)
            len += (size_t)snprintf(text + len, 64 * 1024 - len, "%zu,%zu\n", i, 2 * i);
        write_text(tp("bom_big.csv"), text);
        for (p = 1; p <= 3; p++) {
            read_all_blocks_f64(tp("bom_big.csv"), p, got, &rows, &cols);
            assert_int_equal(rows, R);
            assert_int_equal(cols, 2);
            for (i = 0; i < R; i++)
                assert_true(got[2 * i] == (double)i && got[2 * i + 1] == (double)(2 * i));
        }
        assert_int_equal(
            hpml_io_read_rows(tp("bom_big.csv"), HPML_FMT_CSV, HPML_F64, 1023, 2049, 1, &a), 0);
        assert_int_equal(a.rows, 1026);
        assert_true(((double *)a.data)[0] == 1023.0 && ((double *)a.data)[2051] == 4096.0);
        hpml_array_free(&a);
    }
    /* A mark and nothing else is an empty table, as an empty file is. */
    write_text(tp("bom_only.csv"), BOM);
    assert_int_equal(hpml_io_shape(tp("bom_only.csv"), HPML_FMT_AUTO, &rows, &cols, NULL), 0);
    assert_int_equal(rows, 0);
    assert_int_equal(cols, 0);
    /* Errors still name line 1 and the field, without the mark. */
    write_text(tp("bom_typo.csv"), BOM "1,abc\n");
    expect_exact(hpml_io_shape(tp("bom_typo.csv"), HPML_FMT_AUTO, &rows, &cols, NULL),
                 HPML_ERR_FORMAT,
                 "bom_typo.csv:1: field 2 'abc' is not a number (a header row must have no finite "
                 "numeric fields)");
    free(text);
}

/* strtod reads nan, inf and infinity (any case, signed) as numbers, but as names of columns
 * they do not make a first row data: only a finite number does. A first row with one is
 * data, and its nan/inf fields get what they get on any other data line. */
static void test_header_nonfinite(void **state)
{
    static const char *headers[][2] = {
        {"h_nan.csv", "x,nan\n1,2\n3,4\n"},
        {"h_inf.csv", "inf,y\n1,2\n3,4\n"},
        {"h_case.csv", "NaN,Infinity\n1,2\n3,4\n"},
        {"h_signed.csv", "-inf;+NAN\n1;2\n3;4\n"},
    };
    size_t k, i, rows, cols;
    hpml_array_t a;
    double got[4];
    int p;

    (void)state;
    for (k = 0; k < sizeof(headers) / sizeof(headers[0]); k++) {
        write_text(tp(headers[k][0]), headers[k][1]);
        for (p = 1; p <= 2; p++) {
            read_all_blocks_f64(tp(headers[k][0]), p, got, &rows, &cols);
            if (rows != 2 || cols != 2)
                print_error("%s: %zu x %zu\n", headers[k][0], rows, cols);
            assert_int_equal(rows, 2);
            assert_int_equal(cols, 2);
            for (i = 0; i < 4; i++)
                assert_true(got[i] == (double)(i + 1));
        }
    }
    /* Data: the same message on line 1 as on line 2 after a header. */
    write_text(tp("d_nan1.csv"), "1,nan\n2,3\n");
    write_text(tp("d_nan2.csv"), "a,b\n1,nan\n2,3\n");
    assert_int_equal(hpml_io_shape(tp("d_nan1.csv"), HPML_FMT_AUTO, &rows, &cols, NULL), 0);
    assert_int_equal(rows, 2);
    expect_exact(hpml_io_read_block(tp("d_nan1.csv"), HPML_FMT_AUTO, HPML_F64, 0, 1, 1, &a),
                 HPML_ERR_NUMERIC, "d_nan1.csv:1: field 2 is NaN");
    expect_exact(hpml_io_read_block(tp("d_nan2.csv"), HPML_FMT_AUTO, HPML_F64, 0, 1, 1, &a),
                 HPML_ERR_NUMERIC, "d_nan2.csv:2: field 2 is NaN");
    assert_int_equal(hpml_io_read_block(tp("d_nan1.csv"), HPML_FMT_AUTO, HPML_F64, 0, 1, 0, &a), 0);
    assert_true(((double *)a.data)[0] == 1.0 && isnan(((double *)a.data)[1]));
    hpml_array_free(&a);
    write_text(tp("d_inf1.csv"), "-Infinity,7\n");
    write_text(tp("d_inf2.csv"), "a,b\n-Infinity,7\n");
    expect_exact(hpml_io_read_block(tp("d_inf1.csv"), HPML_FMT_AUTO, HPML_I32, 0, 1, 0, &a),
                 HPML_ERR_NUMERIC, "d_inf1.csv:1: field 1 is -Inf (cannot be read as i32)");
    expect_exact(hpml_io_read_block(tp("d_inf2.csv"), HPML_FMT_AUTO, HPML_I32, 0, 1, 0, &a),
                 HPML_ERR_NUMERIC, "d_inf2.csv:2: field 1 is -Inf (cannot be read as i32)");
    /* A finite number makes the row data, so a word next to it is a typo, nan or not. */
    write_text(tp("d_mixed.csv"), "nan,abc,1\n");
    expect_exact(hpml_io_shape(tp("d_mixed.csv"), HPML_FMT_AUTO, &rows, &cols, NULL),
                 HPML_ERR_FORMAT,
                 "d_mixed.csv:1: field 2 'abc' is not a number (a header row must have no finite "
                 "numeric fields)");
    /* Overflow is still a number written in digits (read as inf), not a name. */
    write_text(tp("d_big.csv"), "1e999,x\n");
    expect_exact(hpml_io_shape(tp("d_big.csv"), HPML_FMT_AUTO, &rows, &cols, NULL), HPML_ERR_FORMAT,
                 "d_big.csv:1: field 2 'x' is not a number (a header row must have no finite "
                 "numeric fields)");
}

/* An empty field in a first row that has numbers is a missing value of a data row, and is
 * reported exactly as on any other line: not as a header with a number in it. */
static void test_first_row_empty(void **state)
{
    size_t rows, cols;
    hpml_array_t a;

    (void)state;
    write_text(tp("hole.csv"), "1.5,,3\n4,5,6\n");
    expect_exact(hpml_io_shape(tp("hole.csv"), HPML_FMT_AUTO, &rows, &cols, NULL), HPML_ERR_FORMAT,
                 "hole.csv:1: field 2 is empty");
    for (int r = 0; r < 2; r++) {
        expect_exact(hpml_io_read_block(tp("hole.csv"), HPML_FMT_AUTO, HPML_F64, r, 2, 0, &a),
                     HPML_ERR_FORMAT, "hole.csv:1: field 2 is empty");
        assert_null(a.data);
    }
    write_text(tp("hole2.csv"), "a,b,c\n1.5,,3\n");
    expect_exact(hpml_io_read_block(tp("hole2.csv"), HPML_FMT_AUTO, HPML_F64, 0, 1, 0, &a),
                 HPML_ERR_FORMAT, "hole2.csv:2: field 2 is empty");
    /* A trailing delimiter; and the first bad field wins, as in a data row. */
    write_text(tp("tail.csv"), "1,2,\n");
    expect_exact(hpml_io_shape(tp("tail.csv"), HPML_FMT_AUTO, &rows, &cols, NULL), HPML_ERR_FORMAT,
                 "tail.csv:1: field 3 is empty");
    write_text(tp("first.csv"), "1;;abc\n");
    expect_exact(hpml_io_shape(tp("first.csv"), HPML_FMT_AUTO, &rows, &cols, NULL), HPML_ERR_FORMAT,
                 "first.csv:1: field 2 is empty");
}

/* np.savetxt files (default: spaces and %.18e; with delimiter and a '# ' header). */
static void test_numpy_savetxt(void **state)
{
    size_t rows, cols, n, i;
    double got[64 * 5];

    (void)state;
    if (py("rng = np.random.default_rng(1)\n"
           "a = rng.standard_normal((64, 5))\n"
           "np.savetxt('np_default.txt', a)\n"
           "np.savetxt('np_comma.csv', a, delimiter=',', header='a,b,c,d,e')\n"
           "a.tofile('np.ref')\n") != 0) {
        print_message("python3 with numpy not available; skipping\n");
        skip();
    }
    double *ref = (double *)read_all(tp("np.ref"), &n);
    read_all_blocks_f64(tp("np_default.txt"), 3, got, &rows, &cols);
    assert_int_equal(rows, 64);
    assert_int_equal(cols, 5);
    for (i = 0; i < 64 * 5; i++)
        assert_true(got[i] == ref[i]); /* %.18e is exact */
    read_all_blocks_f64(tp("np_comma.csv"), 2, got, &rows, &cols);
    assert_int_equal(rows, 64);
    for (i = 0; i < 64 * 5; i++)
        assert_true(got[i] == ref[i]);
    free(ref);
}

static void test_errors(void **state)
{
    char text[2048];
    size_t len = 0;
    hpml_array_t a;
    int line;

    (void)state;
    /* Line 17 (1-based) has 'abc' in field 3; header on line 1. */
    len += (size_t)snprintf(text + len, sizeof(text) - len, "a,b,c,d\n");
    for (line = 2; line <= 20; line++)
        len += (size_t)snprintf(text + len, sizeof(text) - len, "%d,2,%s,4\n", line,
                                line == 17 ? "abc" : "3");
    write_text(tp("x.csv"), text);
    expect_error(hpml_io_read_rows(tp("x.csv"), HPML_FMT_AUTO, HPML_F64, 0, 19, 0, &a),
                 HPML_ERR_FORMAT, "x.csv:17: field 3 'abc' is not a number");
    assert_null(a.data);
    /* Only the block is parsed: rows before the bad one are fine. */
    assert_int_equal(hpml_io_read_rows(tp("x.csv"), HPML_FMT_AUTO, HPML_F64, 0, 15, 0, &a), 0);
    hpml_array_free(&a);
    assert_int_equal(hpml_io_read_block(tp("x.csv"), HPML_FMT_AUTO, HPML_F64, 0, 2, 0, &a), 0);
    hpml_array_free(&a);
    expect_error(hpml_io_read_block(tp("x.csv"), HPML_FMT_AUTO, HPML_F64, 1, 2, 0, &a),
                 HPML_ERR_FORMAT, "x.csv:17: field 3 'abc' is not a number");

    write_text(tp("y.csv"), "1,2,3,4\n5,6,7,8\n\n9,10,11\n1,2,3,4\n");
    expect_error(hpml_io_read_block(tp("y.csv"), HPML_FMT_AUTO, HPML_F32, 0, 1, 0, &a),
                 HPML_ERR_FORMAT, "y.csv:4: 3 fields, expected 4");
    write_text(tp("z.csv"), "1,2\n3,4,\n");
    expect_error(hpml_io_read_block(tp("z.csv"), HPML_FMT_AUTO, HPML_F32, 0, 1, 0, &a),
                 HPML_ERR_FORMAT, "z.csv:2: 3 fields, expected 2");
    write_text(tp("e.csv"), "1,2\n3,\n");
    expect_error(hpml_io_read_block(tp("e.csv"), HPML_FMT_AUTO, HPML_F32, 0, 1, 0, &a),
                 HPML_ERR_FORMAT, "e.csv:2: field 2 is empty");
    write_text(tp("nan.csv"), "h1,h2\n1,2\n3,nan\n");
    expect_error(hpml_io_read_block(tp("nan.csv"), HPML_FMT_AUTO, HPML_F64, 0, 1, 1, &a),
                 HPML_ERR_NUMERIC, "nan.csv:3: field 2 is NaN");
    assert_int_equal(hpml_io_read_block(tp("nan.csv"), HPML_FMT_AUTO, HPML_F64, 0, 1, 0, &a), 0);
    assert_true(isnan(((double *)a.data)[3]));
    hpml_array_free(&a);
    write_text(tp("inf.csv"), "1,-inf\n");
    expect_error(hpml_io_read_block(tp("inf.csv"), HPML_FMT_AUTO, HPML_F32, 0, 1, 1, &a),
                 HPML_ERR_NUMERIC, "inf.csv:1: field 2 is -Inf");
    write_text(tp("frac.csv"), "1,2.5\n");
    expect_error(hpml_io_read_block(tp("frac.csv"), HPML_FMT_AUTO, HPML_I32, 0, 1, 0, &a),
                 HPML_ERR_RANGE,
                 "frac.csv:1: field 2 value 2.5 is not an integer (reading as i32)");
    write_text(tp("u8.csv"), "1,256\n");
    expect_error(hpml_io_read_block(tp("u8.csv"), HPML_FMT_AUTO, HPML_U8, 0, 1, 0, &a),
                 HPML_ERR_RANGE, "u8.csv:1: field 2 value 256 is out of range for u8");
    write_text(tp("f32.csv"), "1,1e39\n");
    expect_error(hpml_io_read_block(tp("f32.csv"), HPML_FMT_AUTO, HPML_F32, 0, 1, 0, &a),
                 HPML_ERR_RANGE, "f32.csv:1: field 2 value 1e+39 is out of range for f32");
    write_bytes(tp("bin.csv"), "1,2\n\0\0\x01", 7);
    expect_error(hpml_io_read_block(tp("bin.csv"), HPML_FMT_CSV, HPML_F32, 0, 1, 0, &a),
                 HPML_ERR_FORMAT, "bin.csv:");
    expect_error(hpml_io_read_rows(tp("y.csv"), HPML_FMT_AUTO, HPML_F32, 3, 5, 0, &a),
                 HPML_ERR_INVAL, "y.csv: rows [3, 5) out of range: the file has 4 rows");
    expect_error(hpml_io_read_rows(tp("nope.csv"), HPML_FMT_AUTO, HPML_F32, 0, 1, 0, &a),
                 HPML_ERR_IO, "nope.csv: cannot open");
}

/* Every truncation and random damage of a CSV: an error or a valid read, never a crash. */
static void test_fuzz(void **state)
{
    const char *csv = "a,b,c\n1.5,-2,3e4\n\"4\",5,6\n# x\n7,8,9\n";
    size_t n = strlen(csv), cut, k, i;
    hpml_rng_t rng;
    hpml_array_t a;
    char m[64];

    (void)state;
    for (cut = 0; cut < n; cut++) {
        write_bytes(tp("fz.csv"), csv, cut);
        if (hpml_io_read_block(tp("fz.csv"), HPML_FMT_CSV, HPML_F64, 0, 1, 1, &a) == 0)
            hpml_array_free(&a);
        else
            assert_non_null(strstr(hpml_last_error(), "fz.csv"));
    }
    hpml_rng_init(&rng, 9, 0);
    for (k = 0; k < 600; k++) {
        memcpy(m, csv, n);
        for (i = 0; i < 1 + hpml_rng_below(&rng, 3); i++)
            m[hpml_rng_below(&rng, n)] = ",;\t\n\r\" #ax0.-e\0"[hpml_rng_below(&rng, 16)];
        write_bytes(tp("fz.csv"), m, n);
        if (hpml_io_read_block(tp("fz.csv"), HPML_FMT_CSV, HPML_F32, 1, 2, 0, &a) == 0)
            hpml_array_free(&a);
        else
            assert_true(strlen(hpml_last_error()) > 0);
    }
}

/* A numeric field of any length is a number, as np.loadtxt reads it: a first row of
 * 128-character fields is data, not a header dropped in silence. */
static void test_long_fields(void **state)
{
    char text[2600], digits[1001], ref[1100];
    hpml_array_t a;
    size_t rows, cols;

    (void)state;
    memset(digits, '1', 1000);
    digits[1000] = '\0';
    snprintf(text, sizeof(text), "0.%.126s\n0.5\n0.25\n", digits); /* 128 characters */
    write_text(tp("long.csv"), text);
    assert_int_equal(hpml_io_shape(tp("long.csv"), HPML_FMT_AUTO, &rows, &cols, NULL), 0);
    assert_int_equal(rows, 3);
    assert_int_equal(cols, 1);
    assert_int_equal(hpml_io_read_rows(tp("long.csv"), HPML_FMT_AUTO, HPML_F64, 0, 3, 0, &a), 0);
    snprintf(ref, sizeof(ref), "0.%.126s", digits);
    assert_true(((double *)a.data)[0] == strtod(ref, NULL));
    assert_true(((double *)a.data)[2] == 0.25);
    hpml_array_free(&a);
    /* 1002 characters, in a data row and next to a short field. */
    snprintf(text, sizeof(text), "x,y\n1,2\n0.%s,3\n", digits);
    write_text(tp("long2.csv"), text);
    assert_int_equal(hpml_io_read_rows(tp("long2.csv"), HPML_FMT_AUTO, HPML_F32, 0, 2, 0, &a), 0);
    assert_true(((float *)a.data)[2] == (float)(1.0 / 9.0));
    assert_true(((float *)a.data)[3] == 3.0f);
    hpml_array_free(&a);
    /* An integer beyond 2^53 with 200 leading zeros is still read exactly as i64. */
    snprintf(text, sizeof(text), "%.200s9007199254740993\n",
             "0000000000000000000000000000000000000000"
             "0000000000000000000000000000000000000000"
             "0000000000000000000000000000000000000000"
             "0000000000000000000000000000000000000000"
             "0000000000000000000000000000000000000000");
    write_text(tp("bigint.csv"), text);
    assert_int_equal(hpml_io_read_rows(tp("bigint.csv"), HPML_FMT_AUTO, HPML_I64, 0, 1, 0, &a), 0);
    assert_true(((int64_t *)a.data)[0] == 9007199254740993LL);
    hpml_array_free(&a);
    /* A long word is still not a number, and its message is cut to 40 characters. */
    snprintf(text, sizeof(text), "1,2\n3,%s\n", "abcdefghijabcdefghijabcdefghijabcdefghij-more");
    write_text(tp("word.csv"), text);
    expect_error(hpml_io_read_rows(tp("word.csv"), HPML_FMT_AUTO, HPML_F64, 0, 2, 0, &a),
                 HPML_ERR_FORMAT,
                 "word.csv:2: field 2 'abcdefghijabcdefghijabcdefghijabcdefghij' is");
}

/* Quotes must close on their line, with nothing but blanks after them; a NUL byte in any
 * parsed line is refused. */
static void test_quotes_and_nul(void **state)
{
    hpml_array_t a;
    size_t rows, cols;

    (void)state;
    write_text(tp("open.csv"), "1,2\n3,\"4\n");
    expect_error(hpml_io_read_rows(tp("open.csv"), HPML_FMT_AUTO, HPML_F64, 0, 2, 0, &a),
                 HPML_ERR_FORMAT, "open.csv:2: field 2 has an unterminated quote");
    assert_null(a.data);
    write_text(tp("open1.csv"), "\"abc,x\n1\n");
    expect_error(hpml_io_shape(tp("open1.csv"), HPML_FMT_AUTO, &rows, &cols, NULL), HPML_ERR_FORMAT,
                 "open1.csv:1: field 1 has an unterminated quote");
    write_text(tp("after.csv"), "1,\"2\"x,3\n");
    expect_error(hpml_io_read_rows(tp("after.csv"), HPML_FMT_AUTO, HPML_F64, 0, 1, 0, &a),
                 HPML_ERR_FORMAT, "after.csv:1: field 2 has text after its closing quote");
    write_text(tp("blanks.csv"), "1, \"2\" ,\"3\" \n\"\"\"\",5,6\n");
    expect_error(hpml_io_read_rows(tp("blanks.csv"), HPML_FMT_AUTO, HPML_F64, 0, 2, 0, &a),
                 HPML_ERR_FORMAT, "blanks.csv:2: field 1 '\"\"' is not a number");
    assert_int_equal(hpml_io_read_rows(tp("blanks.csv"), HPML_FMT_AUTO, HPML_F64, 0, 1, 0, &a), 0);
    assert_true(((double *)a.data)[1] == 2.0 && ((double *)a.data)[2] == 3.0);
    hpml_array_free(&a);
    write_bytes(tp("nul2.csv"), "1,2\n3,4\0\n", 9);
    expect_error(hpml_io_read_rows(tp("nul2.csv"), HPML_FMT_AUTO, HPML_F64, 0, 2, 0, &a),
                 HPML_ERR_FORMAT, "nul2.csv:2: NUL byte");
}

/* The rows of a block are counted by lines and its columns by the first line: a file
 * whose counts multiply past what its bytes can hold gets the short row's error, not an
 * allocation of the claimed size (here 160 GB). */
static void test_size_claim(void **state)
{
    enum { COLS = 40000, ROWS = 500000 };
    char *text = malloc(2 * COLS + 2 * ROWS + 1), *p = text;
    hpml_array_t a;

    (void)state;
    assert_non_null(text);
    for (int j = 0; j < COLS; j++) {
        *p++ = '1';
        *p++ = j + 1 < COLS ? ',' : '\n';
    }
    for (int i = 0; i < ROWS; i++) {
        *p++ = '1';
        *p++ = '\n';
    }
    write_bytes(tp("claim.csv"), text, (size_t)(p - text));
    free(text);
    expect_error(hpml_io_read_rows(tp("claim.csv"), HPML_FMT_AUTO, HPML_F64, 0, ROWS + 1, 0, &a),
                 HPML_ERR_FORMAT, "claim.csv:2: 1 fields, expected 40000");
    assert_null(a.data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_dialects),
        cmocka_unit_test(test_numpy_savetxt),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_fuzz),
        cmocka_unit_test(test_header),
        cmocka_unit_test(test_bom),
        cmocka_unit_test(test_header_nonfinite),
        cmocka_unit_test(test_first_row_empty),
        cmocka_unit_test(test_long_fields),
        cmocka_unit_test(test_quotes_and_nul),
        cmocka_unit_test(test_size_claim),
    };
    return cmocka_run_group_tests_name("io_csv", tests, io_setup, io_teardown);
}
