/* io: .npy reader and writer, partitioning, conversions, malformed files, truncation fuzz. */
#include <math.h>

#include "test_io_util.h"

static void test_partition(void **state)
{
    size_t rows, b, e, prev_end, q;
    int p, r;

    (void)state;
    for (rows = 0; rows < 40; rows++) {
        for (p = 1; p <= 7; p++) {
            prev_end = 0;
            q = rows / (size_t)p;
            for (r = 0; r < p; r++) {
                hpml_io_partition(rows, r, p, &b, &e);
                assert_int_equal(b, prev_end);
                assert_int_equal(e - b, q + ((size_t)r < rows % (size_t)p ? 1 : 0));
                prev_end = e;
            }
            assert_int_equal(prev_end, rows);
        }
    }
    hpml_io_partition(10, 3, 3, &b, &e); /* bad rank: empty */
    assert_int_equal(b, e);
}

/* Read `path` at 1, 2 and 3 ranks as F64 and compare with ref (rows x cols, C order). */
static void check_blocks_f64(const char *path, const double *ref, size_t rows, size_t cols)
{
    int p, r;

    for (p = 1; p <= 3; p++) {
        size_t seen = 0;
        for (r = 0; r < p; r++) {
            hpml_array_t a;
            size_t b, e, i;
            int rc = hpml_io_read_block(path, HPML_FMT_AUTO, HPML_F64, r, p, 0, &a);
            if (rc != 0)
                print_error("%s: %s\n", path, hpml_last_error());
            assert_int_equal(rc, 0);
            hpml_io_partition(rows, r, p, &b, &e);
            assert_int_equal(a.row_offset, b);
            assert_int_equal(a.rows, e - b);
            assert_int_equal(a.cols, cols);
            assert_int_equal(a.total_rows, rows);
            assert_int_equal(a.dtype, HPML_F64);
            for (i = 0; i < a.rows * cols; i++) {
                double got = ((double *)a.data)[i], want = ref[b * cols + i];
                if (!(got == want || (isnan(got) && isnan(want)))) {
                    print_error("%s: rank %d/%d element %zu: got %.17g want %.17g\n", path, r, p, i,
                                got, want);
                    fail();
                }
            }
            seen += a.rows;
            hpml_array_free(&a);
            assert_null(a.data);
        }
        assert_int_equal(seen, rows);
    }
}

static void test_roundtrip(void **state)
{
    enum { R = 17, C = 5 };
    float f32[R * C];
    double f64[R * C], ref[R * C];
    int32_t i32[R * C];
    int64_t i64[R * C];
    uint8_t u8[R * C];
    size_t i, rows, cols;
    hpml_dtype_t st;

    (void)state;
    for (i = 0; i < R * C; i++) {
        f32[i] = (float)i * 0.37f - 3.1f;
        f64[i] = (double)i / 7.0 - 1e-3;
        i32[i] = (int32_t)i * 1000 - 40000;
        i64[i] = (int64_t)i * 123456789LL - 5000000000LL;
        u8[i] = (uint8_t)(i * 3);
    }
    assert_int_equal(hpml_npy_write(tp("f32.npy"), f32, HPML_F32, R, C), 0);
    assert_int_equal(hpml_npy_write(tp("f64.npy"), f64, HPML_F64, R, C), 0);
    assert_int_equal(hpml_npy_write(tp("i32.npy"), i32, HPML_I32, R, C), 0);
    assert_int_equal(hpml_npy_write(tp("i64.npy"), i64, HPML_I64, R, C), 0);
    assert_int_equal(hpml_npy_write(tp("u8.npy"), u8, HPML_U8, R, C), 0);

    assert_int_equal(hpml_io_shape(tp("i32.npy"), HPML_FMT_AUTO, &rows, &cols, &st), 0);
    assert_int_equal(rows, R);
    assert_int_equal(cols, C);
    assert_int_equal(st, HPML_I32);

    for (i = 0; i < R * C; i++)
        ref[i] = f32[i];
    check_blocks_f64(tp("f32.npy"), ref, R, C);
    check_blocks_f64(tp("f64.npy"), f64, R, C);
    for (i = 0; i < R * C; i++)
        ref[i] = i32[i];
    check_blocks_f64(tp("i32.npy"), ref, R, C);
    for (i = 0; i < R * C; i++)
        ref[i] = (double)i64[i];
    check_blocks_f64(tp("i64.npy"), ref, R, C);
    for (i = 0; i < R * C; i++)
        ref[i] = u8[i];
    check_blocks_f64(tp("u8.npy"), ref, R, C);

    /* Same-type reads are bit exact, and a block in the middle has the right rows. */
    hpml_array_t a;
    assert_int_equal(hpml_io_read_rows(tp("f32.npy"), HPML_FMT_NPY, HPML_F32, 4, 11, 1, &a), 0);
    assert_int_equal(a.rows, 7);
    assert_memory_equal(a.data, f32 + 4 * C, 7 * C * sizeof(float));
    hpml_array_free(&a);
    assert_int_equal(hpml_io_read_rows(tp("i64.npy"), HPML_FMT_NPY, HPML_I64, 0, R, 0, &a), 0);
    assert_memory_equal(a.data, i64, sizeof(i64));
    hpml_array_free(&a);
    assert_int_equal(hpml_io_read_rows(tp("u8.npy"), HPML_FMT_AUTO, HPML_F32, 16, 17, 0, &a), 0);
    assert_true(((float *)a.data)[4] == (float)u8[16 * C + 4]);
    hpml_array_free(&a);
    /* Empty block. */
    assert_int_equal(hpml_io_read_rows(tp("f64.npy"), HPML_FMT_AUTO, HPML_F64, 5, 5, 0, &a), 0);
    assert_int_equal(a.rows, 0);
    hpml_array_free(&a);

    /* N-D writer: a 1-D vector reads as n x 1. */
    size_t shape1[1] = {R};
    assert_int_equal(hpml_npy_write_nd(tp("vec.npy"), i32, HPML_I32, 1, shape1), 0);
    assert_int_equal(hpml_io_shape(tp("vec.npy"), HPML_FMT_AUTO, &rows, &cols, NULL), 0);
    assert_int_equal(rows, R);
    assert_int_equal(cols, 1);

    /* No temporary files left behind. */
    assert_int_equal(count_entries(".tmp."), 0);
}

/* The writer's bytes equal np.save's, and NumPy reads them back. */
static void test_numpy_reads_ours(void **state)
{
    float f32[6] = {1.5f, -2.0f, 3.25f, 1e-7f, 3e38f, 0.0f};
    int64_t i64[3] = {-1, 0, 1LL << 40};
    size_t shape3[3] = {1, 3, 1};

    (void)state;
    assert_int_equal(hpml_npy_write(tp("o_f32.npy"), f32, HPML_F32, 3, 2), 0);
    assert_int_equal(hpml_npy_write_nd(tp("o_i64.npy"), i64, HPML_I64, 3, shape3), 0);
    assert_int_equal(hpml_npy_write_nd(tp("o_scalar.npy"), i64, HPML_I64, 0, NULL), 0);
    assert_int_equal(hpml_npy_write(tp("o_empty.npy"), NULL, HPML_F64, 0, 4), 0);
    assert_int_equal(
        py("import io\n"
           "def same(p, want):\n"
           "    a = np.load(p)\n"
           "    assert a.dtype == want.dtype and a.shape == want.shape, (p, a.dtype, a.shape)\n"
           "    assert np.array_equal(a, want), p\n"
           "    b = io.BytesIO(); np.save(b, a)\n"
           "    assert b.getvalue() == open(p, 'rb').read(), p + ': bytes differ from np.save'\n"
           "    assert (len(open(p,'rb').read()) - a.nbytes) % 64 == 0\n"
           "same('o_f32.npy', np.array([1.5,-2,3.25,1e-7,3e38,0], np.float32).reshape(3,2))\n"
           "same('o_i64.npy', np.array([-1,0,1<<40], np.int64).reshape(1,3,1))\n"
           "same('o_scalar.npy', np.array(-1, np.int64))\n"
           "same('o_empty.npy', np.zeros((0,4)))\n"),
        0);
}

/* Files written by NumPy in every supported layout read identically. Each X.npy comes with
 * X.ref: the array as float64, reshaped to (rows, -1) in C order, raw bytes. */
static void test_numpy_files(void **state)
{
    static const char *names[] = {"c_f8", "f_f4", "f3_i2", "be_i4", "be_f8", "f_be_f4", "u2",
                                  "u4",   "i8",   "u8",    "i1",    "b1",    "f2",      "vec",
                                  "scal", "v2",   "v3",    "big_f", "f4d",   "zero_c",  "u1"};
    size_t k;

    (void)state;
    int rc =
        py("rng = np.random.default_rng(5)\n"
           "def save(name, a, version=None):\n"
           "    if version is None:\n"
           "        np.save(name + '.npy', a)\n"
           "    else:\n"
           "        with open(name + '.npy', 'wb') as f:\n"
           "            np.lib.format.write_array(f, a, version=version)\n"
           "    n = a.shape[0] if a.ndim else 1\n"
           "    np.ascontiguousarray(a.astype('<f8').reshape(n, -1)).tofile(name + '.ref')\n"
           "save('c_f8', rng.standard_normal((13, 4)))\n"
           "save('f_f4', np.asfortranarray(rng.standard_normal((13, 4)).astype('f4')))\n"
           "save('f3_i2', np.asfortranarray(np.arange(-30, 36, dtype='i2').reshape(11, 3, 2)))\n"
           "save('be_i4', (np.arange(7*2*3, dtype='>i4') * -99991).reshape(7, 2, 3))\n"
           "save('be_f8', rng.standard_normal((5, 3)).astype('>f8'))\n"
           "save('f_be_f4', np.asfortranarray(rng.standard_normal((7, 3, 4)).astype('>f4')))\n"
           "save('u2', np.arange(0, 65535, 4099, dtype='u2').reshape(-1, 2))\n"
           "save('u4', (np.arange(10, dtype='u4') * 429496729).reshape(5, 2))\n"
           "save('i8', (np.arange(9, dtype='i8') - 4) * (1 << 40))\n"
           "save('u8', np.arange(12, dtype='u8').reshape(4, 3) * 1000003)\n"
           "save('i1', np.arange(-128, 128, 16, dtype='i1').reshape(8, 2))\n"
           "save('b1', np.array([[True, False], [False, True], [True, True]]))\n"
           "save('f2', rng.standard_normal((6, 2)).astype('f2'))\n"
           "save('vec', rng.standard_normal(11))\n"
           "save('scal', np.array(3.5))\n"
           "save('v2', rng.standard_normal((7, 2)), version=(2, 0))\n"
           "save('v3', rng.standard_normal((7, 2)).astype('f4'), version=(3, 0))\n"
           "save('big_f', np.asfortranarray(rng.standard_normal((300, 7))))\n"
           "save('f4d', np.asfortranarray(np.arange(5*2*3*4, dtype='f8').reshape(5, 2, 3, 4)))\n"
           "save('zero_c', np.zeros((4, 0)))\n"
           "save('u1', np.arange(40, dtype='u1').reshape(10, 4))\n");
    if (rc != 0) {
        print_message("python3 with numpy not available; skipping\n");
        skip();
    }
    for (k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        char npy[64], ref[64];
        size_t rows, cols, n;
        snprintf(npy, sizeof(npy), "%s.npy", names[k]);
        snprintf(ref, sizeof(ref), "%s.ref", names[k]);
        rc = hpml_io_shape(tp(npy), HPML_FMT_AUTO, &rows, &cols, NULL);
        if (rc != 0)
            print_error("%s: %s\n", npy, hpml_last_error());
        assert_int_equal(rc, 0);
        double *r = (double *)read_all(tp(ref), &n);
        assert_int_equal(n, rows * cols * sizeof(double));
        check_blocks_f64(tp(npy), r, rows, cols);
        free(r);
    }

    /* Fortran order read as f32 (strided path with conversion). */
    hpml_array_t a;
    size_t n;
    double *r = (double *)read_all(tp("f_f4.ref"), &n);
    assert_int_equal(hpml_io_read_rows(tp("f_f4.npy"), HPML_FMT_AUTO, HPML_F32, 3, 9, 0, &a), 0);
    for (k = 0; k < 6 * 4; k++)
        assert_true(((float *)a.data)[k] == (float)r[3 * 4 + k]);
    hpml_array_free(&a);
    free(r);
    /* Stored types reported by shape. */
    hpml_dtype_t st;
    assert_int_equal(hpml_io_shape(tp("u4.npy"), HPML_FMT_AUTO, NULL, NULL, &st), 0);
    assert_int_equal(st, HPML_I64);
    assert_int_equal(hpml_io_shape(tp("f3_i2.npy"), HPML_FMT_AUTO, NULL, NULL, &st), 0);
    assert_int_equal(st, HPML_I32);
}

static void test_conversion_errors(void **state)
{
    int32_t v[6] = {1, 2, 3, 300, -5, 6};
    double d[6] = {1, 2.5, 3, 4, 5, 6};
    double nan_data[6] = {1, 2, 3, 4, NAN, 6};
    double inf_data[4] = {1, 2, -INFINITY, 3};
    hpml_array_t a;

    (void)state;
    assert_int_equal(hpml_npy_write(tp("cv_i.npy"), v, HPML_I32, 3, 2), 0);
    assert_int_equal(hpml_npy_write(tp("cv_d.npy"), d, HPML_F64, 3, 2), 0);
    assert_int_equal(hpml_npy_write(tp("cv_nan.npy"), nan_data, HPML_F64, 3, 2), 0);
    assert_int_equal(hpml_npy_write(tp("cv_inf.npy"), inf_data, HPML_F64, 4, 1), 0);

    expect_error(hpml_io_read_rows(tp("cv_i.npy"), HPML_FMT_AUTO, HPML_U8, 0, 3, 0, &a),
                 HPML_ERR_RANGE, "cv_i.npy: row 1 column 1 value 300 is out of range for u8");
    assert_null(a.data);
    expect_error(hpml_io_read_rows(tp("cv_i.npy"), HPML_FMT_AUTO, HPML_U8, 2, 3, 0, &a),
                 HPML_ERR_RANGE, "row 2 column 0 value -5 is out of range for u8");
    expect_error(hpml_io_read_rows(tp("cv_d.npy"), HPML_FMT_AUTO, HPML_I32, 0, 3, 0, &a),
                 HPML_ERR_RANGE, "row 0 column 1 value 2.5 is not an integer (reading as i32)");
    expect_error(hpml_io_read_rows(tp("cv_nan.npy"), HPML_FMT_AUTO, HPML_F64, 0, 3, 1, &a),
                 HPML_ERR_NUMERIC, "cv_nan.npy: row 2 column 0 is NaN");
    expect_error(hpml_io_read_rows(tp("cv_nan.npy"), HPML_FMT_AUTO, HPML_F32, 0, 3, 1, &a),
                 HPML_ERR_NUMERIC, "row 2 column 0 is NaN");
    expect_error(hpml_io_read_block(tp("cv_inf.npy"), HPML_FMT_AUTO, HPML_F64, 1, 2, 1, &a),
                 HPML_ERR_NUMERIC, "row 2 column 0 is -Inf");
    expect_error(hpml_io_read_rows(tp("cv_nan.npy"), HPML_FMT_AUTO, HPML_I64, 0, 3, 0, &a),
                 HPML_ERR_NUMERIC, "row 2 column 0 is NaN (cannot be read as i64)");
    /* Without rejection NaN passes through; the first rows alone are fine. */
    assert_int_equal(hpml_io_read_rows(tp("cv_nan.npy"), HPML_FMT_AUTO, HPML_F64, 0, 3, 0, &a), 0);
    assert_true(isnan(((double *)a.data)[4]));
    hpml_array_free(&a);
    assert_int_equal(hpml_io_read_rows(tp("cv_i.npy"), HPML_FMT_AUTO, HPML_U8, 0, 1, 0, &a), 0);
    hpml_array_free(&a);
    /* Bad requests. */
    expect_error(hpml_io_read_rows(tp("cv_i.npy"), HPML_FMT_AUTO, HPML_F32, 2, 4, 0, &a),
                 HPML_ERR_INVAL, "rows [2, 4) out of range: the file has 3 rows");
    expect_error(hpml_io_read_rows(tp("cv_i.npy"), HPML_FMT_AUTO, HPML_BF16, 0, 1, 0, &a),
                 HPML_ERR_INVAL, "cannot read as bf16");
    expect_error(hpml_io_read_block(tp("cv_i.npy"), HPML_FMT_AUTO, HPML_F32, 2, 2, 0, &a),
                 HPML_ERR_INVAL, "rank 2 of 2");
    expect_error(hpml_io_read_rows(tp("missing.npy"), HPML_FMT_AUTO, HPML_F32, 0, 1, 0, &a),
                 HPML_ERR_IO, "missing.npy: cannot open: No such file or directory");
}

/* Build a v1.0 .npy from a header dict and data bytes. */
static void make_npy(const char *name, const char *dict, const void *data, size_t n, int version)
{
    unsigned char buf[4096];
    size_t hl = strlen(dict), pre = version == 1 ? 10 : 12;

    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)version;
    buf[7] = 0;
    buf[8] = (unsigned char)(hl & 0xff);
    buf[9] = (unsigned char)(hl >> 8);
    buf[10] = buf[11] = 0;
    memcpy(buf + pre, dict, hl);
    memcpy(buf + pre + hl, data, n);
    write_bytes(tp(name), buf, pre + hl + n);
}

static void test_malformed(void **state)
{
    static double data[400];
    hpml_array_t a;
    size_t rows;
    const char *d100x3 = "{'descr': '<f8', 'fortran_order': False, 'shape': (100, 3), }\n";

    (void)state;
    make_npy("data.npy", d100x3, data, 2396, 1);
    expect_error(hpml_io_read_block(tp("data.npy"), HPML_FMT_AUTO, HPML_F64, 0, 1, 0, &a),
                 HPML_ERR_FORMAT,
                 "data.npy: shape (100, 3) needs 2400 bytes of data but the file has 2396");
    assert_null(a.data);
    expect_error(hpml_io_shape(tp("data.npy"), HPML_FMT_AUTO, &rows, NULL, NULL), HPML_ERR_FORMAT,
                 "needs 2400 bytes of data but the file has 2396");
    make_npy("long.npy", d100x3, data, 2401, 1);
    expect_error(hpml_io_shape(tp("long.npy"), HPML_FMT_AUTO, &rows, NULL, NULL), HPML_ERR_FORMAT,
                 "needs 2400 bytes of data but the file has 2401");
    make_npy("ok.npy", d100x3, data, 2400, 1);
    assert_int_equal(hpml_io_shape(tp("ok.npy"), HPML_FMT_AUTO, &rows, NULL, NULL), 0);
    make_npy("ok2.npy", d100x3, data, 2400, 2);
    assert_int_equal(hpml_io_shape(tp("ok2.npy"), HPML_FMT_AUTO, &rows, NULL, NULL), 0);
    assert_int_equal(rows, 100);

    static const char bad_magic[] = "\x93NUMPX\x01\x00\x10\x00{'descr': '<f8'}";
    write_bytes(tp("magic.npy"), bad_magic, sizeof(bad_magic) - 1);
    expect_error(hpml_io_shape(tp("magic.npy"), HPML_FMT_AUTO, &rows, NULL, NULL), HPML_ERR_FORMAT,
                 "magic.npy: not a .npy file (bad magic)");
    write_text(tp("tiny.npy"), "\x93NUM");
    expect_error(hpml_io_shape(tp("tiny.npy"), HPML_FMT_AUTO, &rows, NULL, NULL), HPML_ERR_FORMAT,
                 "tiny.npy: not a .npy file (only 4 bytes)");
    make_npy("ver.npy", d100x3, data, 2400, 9);
    expect_error(hpml_io_shape(tp("ver.npy"), HPML_FMT_AUTO, &rows, NULL, NULL),
                 HPML_ERR_UNSUPPORTED, "ver.npy: unsupported .npy format version 9.0");
    write_bytes(tp("hlen.npy"), "\x93NUMPY\x01\x00\xff\x00{'descr'", 18);
    expect_error(hpml_io_shape(tp("hlen.npy"), HPML_FMT_AUTO, &rows, NULL, NULL), HPML_ERR_FORMAT,
                 "hlen.npy: .npy header length 255 runs past the end of the file");
    make_npy("noshape.npy", "{'descr': '<f8', 'fortran_order': False}\n", data, 8, 1);
    expect_error(hpml_io_shape(tp("noshape.npy"), HPML_FMT_AUTO, &rows, NULL, NULL),
                 HPML_ERR_FORMAT, "noshape.npy: bad .npy header: no 'shape' key");
    make_npy("cplx.npy", "{'descr': '<c16', 'fortran_order': False, 'shape': (1,)}", data, 16, 1);
    expect_error(hpml_io_shape(tp("cplx.npy"), HPML_FMT_AUTO, &rows, NULL, NULL),
                 HPML_ERR_UNSUPPORTED, "cplx.npy: unsupported .npy dtype '<c16'");
    make_npy("rec.npy", "{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (1,)}", data, 8,
             1);
    expect_error(hpml_io_shape(tp("rec.npy"), HPML_FMT_AUTO, &rows, NULL, NULL),
                 HPML_ERR_UNSUPPORTED, "structured .npy dtypes");
    make_npy("fo.npy", "{'descr': '<f8', 'fortran_order': Maybe, 'shape': (1,)}", data, 8, 1);
    expect_error(hpml_io_shape(tp("fo.npy"), HPML_FMT_AUTO, &rows, NULL, NULL), HPML_ERR_FORMAT,
                 "fo.npy: bad .npy header: expected True or False");
    make_npy("neg.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (-1,)}", data, 8, 1);
    expect_error(hpml_io_shape(tp("neg.npy"), HPML_FMT_AUTO, &rows, NULL, NULL), HPML_ERR_FORMAT,
                 "neg.npy: bad .npy header: expected a non-negative integer in the shape");
    make_npy("huge.npy",
             "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 2)}", data,
             8, 1);
    expect_error(hpml_io_shape(tp("huge.npy"), HPML_FMT_AUTO, &rows, NULL, NULL), HPML_ERR_FORMAT,
                 "huge.npy: shape (4294967296, 4294967296, 2) is too large");
    make_npy("key.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'x': 1}", data, 8,
             1);
    expect_error(hpml_io_shape(tp("key.npy"), HPML_FMT_AUTO, &rows, NULL, NULL), HPML_ERR_FORMAT,
                 "key.npy: bad .npy header: unexpected key 'x'");
    make_npy("trail.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (1,)} xx", data, 8, 1);
    expect_error(hpml_io_shape(tp("trail.npy"), HPML_FMT_AUTO, &rows, NULL, NULL), HPML_ERR_FORMAT,
                 "trail.npy: bad .npy header: unexpected text after the dict");
    /* The header is quoted on the message's one line, without its padding and newline. */
    make_npy("nl.npy", "{'descr': '<f8', 'fortran_order': False, 'shapf': (1,), }      \n", data, 8,
             1);
    expect_error(hpml_io_shape(tp("nl.npy"), HPML_FMT_AUTO, &rows, NULL, NULL), HPML_ERR_FORMAT,
                 "'shapf': (1,), }'");
    assert_null(strchr(hpml_last_error(), '\n'));
    make_npy("ctl.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (1,)\n\t}x", data, 8, 1);
    expect_error(hpml_io_shape(tp("ctl.npy"), HPML_FMT_AUTO, &rows, NULL, NULL), HPML_ERR_FORMAT,
                 "(1,)??}x'");
    /* Forcing the format on a CSV file gives the .npy message. */
    write_text(tp("text.csv"), "1,2\n");
    expect_error(hpml_io_shape(tp("text.csv"), HPML_FMT_NPY, &rows, NULL, NULL), HPML_ERR_FORMAT,
                 "text.csv: not a .npy file");
}

/* Every truncation of a valid file is an error with a message naming the file; random
 * byte changes never crash. */
static void test_fuzz(void **state)
{
    float x[15];
    size_t n, cut, i, k;
    unsigned char *full;
    hpml_array_t a;
    hpml_rng_t rng;
    int rc;

    (void)state;
    for (i = 0; i < 15; i++)
        x[i] = (float)i;
    assert_int_equal(hpml_npy_write(tp("fz.npy"), x, HPML_F32, 5, 3), 0);
    full = read_all(tp("fz.npy"), &n);
    for (cut = 0; cut < n; cut++) {
        write_bytes(tp("cut.npy"), full, cut);
        rc = hpml_io_read_block(tp("cut.npy"), HPML_FMT_AUTO, HPML_F32, 0, 1, 0, &a);
        assert_int_not_equal(rc, 0);
        assert_null(a.data);
        assert_non_null(strstr(hpml_last_error(), "cut.npy: "));
    }
    hpml_rng_init(&rng, 42, 0);
    for (k = 0; k < 1000; k++) {
        unsigned char *m = malloc(n);
        memcpy(m, full, n);
        for (i = 0; i < 1 + hpml_rng_below(&rng, 4); i++)
            m[hpml_rng_below(&rng, 128)] = (unsigned char)hpml_rng_below(&rng, 256);
        write_bytes(tp("mut.npy"), m, n);
        rc = hpml_io_read_block(tp("mut.npy"), HPML_FMT_NPY, HPML_F64, 1, 2, 0, &a);
        if (rc != 0)
            assert_true(strlen(hpml_last_error()) > 0);
        hpml_array_free(&a);
        free(m);
    }
    free(full);
}

static void test_write_failures(void **state)
{
    float x[4] = {1, 2, 3, 4};
    hpml_array_t a;
    char dir[600];

    (void)state;
    assert_int_equal(hpml_npy_write(tp("keep.npy"), x, HPML_F32, 2, 2), 0);
    /* Unsupported dtype: nothing created, the old file untouched. */
    expect_error(hpml_npy_write(tp("keep.npy"), x, HPML_BF16, 2, 2), HPML_ERR_UNSUPPORTED,
                 "keep.npy: .npy has no bf16 dtype");
    assert_int_equal(hpml_io_read_rows(tp("keep.npy"), HPML_FMT_AUTO, HPML_F32, 0, 2, 0, &a), 0);
    assert_memory_equal(a.data, x, sizeof(x));
    hpml_array_free(&a);
    /* Missing folder. */
    expect_error(hpml_npy_write(tp("nodir/x.npy"), x, HPML_F32, 2, 2), HPML_ERR_IO,
                 "nodir/x.npy: cannot create a temporary file");
    /* The rename fails (the target is a folder): the temporary is removed. */
    snprintf(dir, sizeof(dir), "%s", tp("isdir.npy"));
    assert_int_equal(mkdir(dir, 0755), 0);
    expect_error(hpml_npy_write(dir, x, HPML_F32, 2, 2), HPML_ERR_IO, "isdir.npy: cannot rename");
    assert_int_equal(count_entries(".tmp."), 0);
    /* Overwriting keeps the old mode. */
    assert_int_equal(chmod(tp("keep.npy"), 0640), 0);
    assert_int_equal(hpml_npy_write(tp("keep.npy"), x, HPML_F32, 4, 1), 0);
    struct stat st;
    assert_int_equal(stat(tp("keep.npy"), &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partition),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_numpy_reads_ours),
        cmocka_unit_test(test_numpy_files),
        cmocka_unit_test(test_conversion_errors),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_fuzz),
        cmocka_unit_test(test_write_failures),
    };
    return cmocka_run_group_tests_name("io_npy", tests, io_setup, io_teardown);
}
