/* io: IDX reader on the real Fashion-MNIST files (gzip) and on generated plain files of every
 * IDX type; malformed and truncated files. References come from Python's gzip + struct. */
#include "test_io_util.h"

#define FMNIST "/usr/share/datasets/fashion-mnist"

/* Python writes, for the t10k files: the raw pixels of a few rows (ref_rows.bin, 784 bytes
 * each, rows listed in ROWS), all labels (ref_labels.bin) and a plain copy of both files. */
#define ROWS "0, 1, 2, 3333, 3334, 5000, 6666, 6667, 9998, 9999"
static const size_t ref_rows[] = {0, 1, 2, 3333, 3334, 5000, 6666, 6667, 9998, 9999};

static int have_fmnist(void)
{
    return access(FMNIST "/t10k-images-idx3-ubyte.gz", R_OK) == 0 &&
           access(FMNIST "/t10k-labels-idx1-ubyte.gz", R_OK) == 0;
}

static void test_fashion_mnist(void **state)
{
    const char *img = FMNIST "/t10k-images-idx3-ubyte.gz",
               *lab = FMNIST "/t10k-labels-idx1-ubyte.gz";
    size_t rows, cols, n, k;
    hpml_dtype_t st;
    unsigned char *pix, *labels;
    int p, r;

    (void)state;
    if (!have_fmnist()) {
        print_message("Fashion-MNIST not installed; skipping\n");
        skip();
    }
    assert_int_equal(py("d = '" FMNIST "'\n"
                        "img = gzip.open(d + '/t10k-images-idx3-ubyte.gz').read()\n"
                        "lab = gzip.open(d + '/t10k-labels-idx1-ubyte.gz').read()\n"
                        "assert struct.unpack('>BBBB', img[:4]) == (0, 0, 8, 3)\n"
                        "n, h, w = struct.unpack('>III', img[4:16])\n"
                        "assert (n, h, w) == (10000, 28, 28)\n"
                        "rows = [" ROWS "]\n"
                        "open('ref_rows.bin', 'wb').write(b''.join(img[16 + 784*r:16 + 784*(r+1)] "
                        "for r in rows))\n"
                        "open('ref_labels.bin', 'wb').write(lab[8:])\n"
                        "open('images.idx', 'wb').write(img)\n"
                        "open('labels-idx1-ubyte', 'wb').write(lab)\n"),
                     0);
    pix = read_all(tp("ref_rows.bin"), &n);
    assert_int_equal(n, 10 * 784);
    labels = read_all(tp("ref_labels.bin"), &n);
    assert_int_equal(n, 10000);

    assert_int_equal(hpml_io_shape(img, HPML_FMT_AUTO, &rows, &cols, &st), 0);
    assert_int_equal(rows, 10000);
    assert_int_equal(cols, 784);
    assert_int_equal(st, HPML_U8);
    assert_int_equal(hpml_io_shape(lab, HPML_FMT_IDX, &rows, &cols, &st), 0);
    assert_int_equal(rows, 10000);
    assert_int_equal(cols, 1);

    /* gzip and plain copies, at 1, 2 and 3 ranks: every reference row lands in exactly one
     * block with the right pixels, as u8 and as f32. */
    const char *files[2] = {img, tp("images.idx")};
    for (k = 0; k < 2; k++) {
        for (p = 1; p <= 3; p++) {
            size_t found = 0, j, q;
            for (r = 0; r < p; r++) {
                hpml_array_t a, f;
                int rc = hpml_io_read_block(files[k], HPML_FMT_AUTO, HPML_U8, r, p, 0, &a);
                if (rc != 0)
                    print_error("%s\n", hpml_last_error());
                assert_int_equal(rc, 0);
                assert_int_equal(a.cols, 784);
                assert_int_equal(a.total_rows, 10000);
                assert_int_equal(hpml_io_read_block(files[k], HPML_FMT_AUTO, HPML_F32, r, p, 1, &f),
                                 0);
                for (j = 0; j < 10; j++) {
                    size_t row = ref_rows[j];
                    if (row < a.row_offset || row >= a.row_offset + a.rows)
                        continue;
                    found++;
                    const unsigned char *got = (unsigned char *)a.data + (row - a.row_offset) * 784;
                    assert_memory_equal(got, pix + j * 784, 784);
                    for (q = 0; q < 784; q++)
                        assert_true(((float *)f.data)[(row - a.row_offset) * 784 + q] ==
                                    (float)pix[j * 784 + q]);
                }
                hpml_array_free(&a);
                hpml_array_free(&f);
            }
            assert_int_equal(found, 10);
        }
    }
    /* Labels, gzip and plain, as i32 in three blocks. */
    const char *lfiles[2] = {lab, tp("labels-idx1-ubyte")};
    for (k = 0; k < 2; k++) {
        for (r = 0; r < 3; r++) {
            hpml_array_t a;
            size_t j;
            assert_int_equal(hpml_io_read_block(lfiles[k], HPML_FMT_AUTO, HPML_I32, r, 3, 0, &a),
                             0);
            assert_int_equal(a.cols, 1);
            for (j = 0; j < a.rows; j++)
                assert_int_equal(((int32_t *)a.data)[j], labels[a.row_offset + j]);
            hpml_array_free(&a);
        }
    }
    /* Fashion-MNIST's first test labels are well known: ankle boot, pullover, trouser. */
    assert_int_equal(labels[0], 9);
    assert_int_equal(labels[1], 2);
    assert_int_equal(labels[2], 1);
    free(pix);
    free(labels);
}

/* Generated IDX files of every type (plain and gzip) against NumPy's reading of them. */
static void test_idx_types(void **state)
{
    static const char *names[] = {"u8", "i8", "i16", "i32", "f32", "f64"};
    size_t k;
    int gz, p, r;

    (void)state;
    int rc =
        py("codes = {'u8': (8, '>u1'), 'i8': (9, '>i1'), 'i16': (11, '>i2'), 'i32': (12, '>i4'),\n"
           "         'f32': (13, '>f4'), 'f64': (14, '>f8')}\n"
           "rng = np.random.default_rng(3)\n"
           "for name, (code, dt) in codes.items():\n"
           "    shape = (11, 3, 2)\n"
           "    if dt[1] in 'iu':\n"
           "        info = np.iinfo(dt)\n"
           "        a = rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dt)\n"
           "    else:\n"
           "        a = rng.standard_normal(shape).astype(dt)\n"
           "    raw = struct.pack('>BBBB', 0, 0, code, 3) + struct.pack('>III', *shape) + "
           "a.tobytes()\n"
           "    open(name + '.idx', 'wb').write(raw)\n"
           "    gzip.open(name + '.idx.gz', 'wb').write(raw)\n"
           "    a.astype('<f8').reshape(11, -1).tofile(name + '.ref')\n");
    if (rc != 0) {
        print_message("python3 with numpy not available; skipping\n");
        skip();
    }
    for (k = 0; k < 6; k++) {
        char fn[64], ref[64];
        size_t n;
        snprintf(ref, sizeof(ref), "%s.ref", names[k]);
        double *want = (double *)read_all(tp(ref), &n);
        assert_int_equal(n, 11 * 6 * sizeof(double));
        for (gz = 0; gz < 2; gz++) {
            snprintf(fn, sizeof(fn), "%s.idx%s", names[k], gz ? ".gz" : "");
            for (p = 1; p <= 3; p++) {
                for (r = 0; r < p; r++) {
                    hpml_array_t a;
                    size_t i;
                    rc = hpml_io_read_block(tp(fn), HPML_FMT_AUTO, HPML_F64, r, p, 0, &a);
                    if (rc != 0)
                        print_error("%s\n", hpml_last_error());
                    assert_int_equal(rc, 0);
                    assert_int_equal(a.cols, 6);
                    for (i = 0; i < a.rows * 6; i++)
                        assert_true(((double *)a.data)[i] == want[a.row_offset * 6 + i]);
                    hpml_array_free(&a);
                }
            }
        }
        free(want);
    }
}

static void idx_bytes(const char *name, const unsigned char *hdr, size_t hn, size_t data_bytes)
{
    unsigned char buf[256] = {0};
    memcpy(buf, hdr, hn);
    write_bytes(tp(name), buf, hn + data_bytes);
}

static void test_malformed(void **state)
{
    static const unsigned char ok[] = {0, 0, 8, 2, 0, 0, 0, 10, 0, 0, 0, 4};
    static const unsigned char magic[] = {1, 2, 8, 2, 0, 0, 0, 10, 0, 0, 0, 4};
    static const unsigned char type[] = {0, 0, 0x0a, 2, 0, 0, 0, 10, 0, 0, 0, 4};
    static const unsigned char zero[] = {0, 0, 8, 0};
    static const unsigned char dims[] = {0, 0, 8, 3, 0, 0, 0, 10};
    hpml_array_t a;
    size_t rows, cols;

    (void)state;
    idx_bytes("ok-ubyte", ok, sizeof(ok), 40);
    assert_int_equal(hpml_io_shape(tp("ok-ubyte"), HPML_FMT_AUTO, &rows, &cols, NULL), 0);
    assert_int_equal(rows, 10);
    assert_int_equal(cols, 4);
    idx_bytes("short-ubyte", ok, sizeof(ok), 39);
    expect_error(hpml_io_read_block(tp("short-ubyte"), HPML_FMT_AUTO, HPML_U8, 0, 2, 0, &a),
                 HPML_ERR_FORMAT,
                 "short-ubyte: shape (10, 4) needs 40 bytes of data but the file has 39");
    assert_null(a.data);
    idx_bytes("long.idx", ok, sizeof(ok), 41);
    expect_error(hpml_io_shape(tp("long.idx"), HPML_FMT_AUTO, &rows, &cols, NULL), HPML_ERR_FORMAT,
                 "long.idx: shape (10, 4) needs 40 bytes of data but the file has 41");
    idx_bytes("magic.idx", magic, sizeof(magic), 40);
    expect_error(hpml_io_shape(tp("magic.idx"), HPML_FMT_AUTO, &rows, &cols, NULL), HPML_ERR_FORMAT,
                 "magic.idx: not an IDX file (magic bytes 0x01 0x02, expected 0x00 0x00)");
    idx_bytes("type.idx", type, sizeof(type), 40);
    expect_error(hpml_io_shape(tp("type.idx"), HPML_FMT_IDX, &rows, &cols, NULL), HPML_ERR_FORMAT,
                 "type.idx: unknown IDX data type 0x0a");
    idx_bytes("zero.idx", zero, sizeof(zero), 0);
    expect_error(hpml_io_shape(tp("zero.idx"), HPML_FMT_IDX, &rows, &cols, NULL), HPML_ERR_FORMAT,
                 "zero.idx: IDX header declares 0 dimensions");
    idx_bytes("dims.idx", dims, sizeof(dims), 0);
    expect_error(hpml_io_shape(tp("dims.idx"), HPML_FMT_IDX, &rows, &cols, NULL), HPML_ERR_FORMAT,
                 "dims.idx: truncated IDX header: 3 dimensions need 16 bytes, the file has 8");

    /* gzip: truncated, wrong content, corrupt data with a matching trailer. */
    assert_int_equal(
        py("raw = struct.pack('>BBBBII', 0, 0, 8, 2, 200, 50) + bytes(range(256)) * 39 + "
           "bytes(16)\n"
           "z = gzip.compress(raw)\n"
           "open('t.idx.gz', 'wb').write(z)\n"
           "open('cut.idx.gz', 'wb').write(z[:len(z) // 2])\n"
           "open('notidx.gz', 'wb').write(gzip.compress(b'hello world, not idx'))\n"
           "bad = bytearray(z); bad[len(z) // 2] ^= 0xff; bad[len(z) // 2 + 1] ^= 0x55\n"
           "open('corrupt.idx.gz', 'wb').write(bytes(bad))\n"),
        0);
    assert_int_equal(hpml_io_read_block(tp("t.idx.gz"), HPML_FMT_AUTO, HPML_U8, 1, 2, 0, &a), 0);
    assert_int_equal(((unsigned char *)a.data)[0], (100 * 50) % 256);
    hpml_array_free(&a);
    expect_error(
        hpml_io_read_block(tp("cut.idx.gz"), HPML_FMT_AUTO, HPML_U8, 0, 2, 0, &a), HPML_ERR_FORMAT,
        "cut.idx.gz: shape (200, 50) needs 10012 bytes uncompressed but the gzip trailer says");
    expect_error(hpml_io_shape(tp("notidx.gz"), HPML_FMT_AUTO, &rows, &cols, NULL), HPML_ERR_FORMAT,
                 "notidx.gz: not a gzip-compressed IDX file (magic bytes 0x68 0x65");
    /* The trailer has the size modulo 2^32: 65536 x 65536 bytes and none match a file of
     * the 12 header bytes, but no gzip file of this size can hold them. */
    assert_int_equal(py("raw = struct.pack('>BBBBII', 0, 0, 8, 2, 65536, 65536)\n"
                        "open('claim.idx.gz', 'wb').write(gzip.compress(raw))\n"),
                     0);
    expect_error(hpml_io_shape(tp("claim.idx.gz"), HPML_FMT_AUTO, &rows, &cols, NULL),
                 HPML_ERR_FORMAT,
                 "claim.idx.gz: shape (65536, 65536) needs 4294967308 bytes uncompressed, more "
                 "than a gzip file of ");
    int rc = hpml_io_read_block(tp("corrupt.idx.gz"), HPML_FMT_AUTO, HPML_U8, 0, 1, 0, &a);
    if (rc != 0)
        expect_error(rc, HPML_ERR_FORMAT, "corrupt.idx.gz: ");
    else
        hpml_array_free(&a); /* a flipped bit may still decode: fine, as long as nothing crashes */
}

static void test_truncation_fuzz(void **state)
{
    unsigned char *plain, *z;
    size_t np_, nz, cut;
    hpml_array_t a;
    int rc;

    (void)state;
    assert_int_equal(py("raw = struct.pack('>BBBBIII', 0, 0, 0x0d, 3, 3, 2, 2) + "
                        "np.arange(12, dtype='>f4').tobytes()\n"
                        "open('small.idx', 'wb').write(raw)\n"
                        "open('small.idx.gz', 'wb').write(gzip.compress(raw))\n"),
                     0);
    plain = read_all(tp("small.idx"), &np_);
    z = read_all(tp("small.idx.gz"), &nz);
    assert_int_equal(hpml_io_read_block(tp("small.idx"), HPML_FMT_AUTO, HPML_F32, 0, 1, 0, &a), 0);
    assert_true(((float *)a.data)[11] == 11.0f);
    hpml_array_free(&a);
    for (cut = 0; cut < np_; cut++) {
        write_bytes(tp("c.idx"), plain, cut);
        rc = hpml_io_read_block(tp("c.idx"), HPML_FMT_IDX, HPML_F32, 0, 1, 0, &a);
        assert_int_not_equal(rc, 0);
        assert_null(a.data);
        assert_non_null(strstr(hpml_last_error(), "c.idx: "));
    }
    for (cut = 0; cut < nz; cut++) {
        write_bytes(tp("c.gz"), z, cut);
        rc = hpml_io_read_block(tp("c.gz"), HPML_FMT_AUTO, HPML_F32, 1, 2, 0, &a);
        assert_int_not_equal(rc, 0);
        assert_null(a.data);
        assert_non_null(strstr(hpml_last_error(), "c.gz: "));
    }
    free(plain);
    free(z);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fashion_mnist),
        cmocka_unit_test(test_idx_types),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_truncation_fuzz),
    };
    return cmocka_run_group_tests_name("io_idx", tests, io_setup, io_teardown);
}
