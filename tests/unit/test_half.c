/*
 * fp16/bf16 <-> f32 conversion against an independent reference (NumPy float16, and a
 * float64 nearest-value search for bf16: tests/ref/half_ref.py, run at test time), on
 * both the portable and the F16C/AVX2 path, plus a strided sweep over all 2^32 f32
 * patterns checking that the two paths agree bit for bit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "hpml/core.h"

struct ref {
    uint32_t *f16_to_f32; /* [65536] */
    uint32_t *f32_to_f16; /* pairs (f32 bits, f16 bits) */
    size_t n_f32_to_f16;
    uint32_t *bf16_to_f32; /* [65536] */
    uint32_t *f32_to_bf16; /* pairs (f32 bits, bf16 bits) */
    size_t n_f32_to_bf16;
    uint32_t *blob;
};

static struct ref ref;
static int have_avx2;

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The repository: $HPML_TEST_REPO (set by tests/run.sh), else the first ancestor of the
 * binary's directory that holds tests/ref/half_ref.py. */
static int find_script(char *out, size_t len)
{
    const char *env = getenv("HPML_TEST_REPO");
    if (env && *env) {
        snprintf(out, len, "%s/tests/ref/half_ref.py", env);
        if (access(out, R_OK) == 0)
            return 0;
    }
    char dir[4096];
    ssize_t k = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (k <= 0)
        return -1;
    dir[k] = '\0';
    for (char *slash = strrchr(dir, '/'); slash; slash = strrchr(dir, '/')) {
        *slash = '\0';
        snprintf(out, len, "%s/tests/ref/half_ref.py", dir);
        if (access(out, R_OK) == 0)
            return 0;
    }
    return -1;
}

static int read_section(FILE *f, uint32_t **p, size_t *n, size_t words_per_rec, uint32_t **cursor)
{
    uint32_t cnt;
    if (fread(&cnt, 4, 1, f) != 1)
        return -1;
    size_t words = (size_t)cnt * words_per_rec;
    if (fread(*cursor, 4, words, f) != words)
        return -1;
    *p = *cursor;
    *n = cnt;
    *cursor += words;
    return 0;
}

static int load_ref(void **state)
{
    (void)state;
    char script[4200], tmpl[] = "/tmp/hpml_half_ref_XXXXXX", cmd[8600];
    if (find_script(script, sizeof script) != 0) {
        fprintf(stderr, "test_half: cannot find tests/ref/half_ref.py (set HPML_TEST_REPO)\n");
        return -1;
    }
    int fd = mkstemp(tmpl);
    if (fd < 0)
        return -1;
    close(fd);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s'", script, tmpl);
    if (system(cmd) != 0) {
        fprintf(stderr, "test_half: '%s' failed (needs /usr/bin/python3 with numpy)\n", cmd);
        unlink(tmpl);
        return -1;
    }
    FILE *f = fopen(tmpl, "rb");
    unlink(tmpl);
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    ref.blob = malloc((size_t)size);
    uint32_t magic, *cur = ref.blob;
    size_t n;
    int rc = -1;
    if (!ref.blob || fread(&magic, 4, 1, f) != 1 || magic != 0x46455248u)
        goto out;
    if (read_section(f, &ref.f16_to_f32, &n, 1, &cur) || n != 65536 ||
        read_section(f, &ref.f32_to_f16, &ref.n_f32_to_f16, 2, &cur) ||
        read_section(f, &ref.bf16_to_f32, &n, 1, &cur) || n != 65536 ||
        read_section(f, &ref.f32_to_bf16, &ref.n_f32_to_bf16, 2, &cur))
        goto out;
    rc = 0;
out:
    fclose(f);
    if (rc)
        fprintf(stderr, "test_half: malformed reference file\n");
    have_avx2 = hpml_cpu_has_avx2() && hpml_cpu_has_f16c() && hpml_cpu_has_fma();
    return rc;
}

static int free_ref(void **state)
{
    (void)state;
    free(ref.blob);
    hpml_simd_select(HPML_SIMD_AUTO);
    return 0;
}

/* The paths to test: portable always, AVX2 when the CPU has it. */
static int paths(hpml_simd_t out[2])
{
    out[0] = HPML_SIMD_PORTABLE;
    out[1] = HPML_SIMD_AVX2;
    return have_avx2 ? 2 : 1;
}

static void use(hpml_simd_t p)
{
    assert_int_equal(hpml_simd_select(p), 0);
    assert_int_equal(hpml_simd_active(), p);
}

static int is_nan32(uint32_t u)
{
    return (u & 0x7fffffffu) > 0x7f800000u;
}

/* ---- f16 -> f32 ---------------------------------------------------------------------- */

static void test_f16_to_f32_all(void **state)
{
    (void)state;
    static uint16_t h[65536];
    static float out[2][65536];
    hpml_simd_t ps[2];
    int np = paths(ps);
    for (int i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    for (int p = 0; p < np; p++) {
        use(ps[p]);
        hpml_f16_to_f32_array(out[p], h, 65536);
        for (int i = 0; i < 65536; i++) {
            uint32_t got = fbits(out[p][i]), want = ref.f16_to_f32[i];
            assert_int_equal(got, fbits(hpml_f16_to_f32((uint16_t)i)));
            if ((i & 0x7c00) == 0x7c00 && (i & 0x3ff)) {
                /* NumPy leaves the quiet bit alone; hpml sets it, as F16C does. */
                assert_true(is_nan32(got) && is_nan32(want));
                assert_int_equal(got >> 31, want >> 31);
                uint32_t doc =
                    ((uint32_t)(i & 0x8000) << 16) | 0x7fc00000u | ((uint32_t)(i & 0x3ff) << 13);
                assert_int_equal(got, doc);
            } else if (got != want) {
                fail_msg("f16 %04x -> f32 %08x, NumPy says %08x (path %d)", i, got, want,
                         (int)ps[p]);
            }
        }
    }
    if (np == 2)
        assert_memory_equal(out[0], out[1], sizeof out[0]);
}

/* ---- f32 -> f16 ---------------------------------------------------------------------- */

static void check_pairs(const uint32_t *pairs, size_t n, int bf16)
{
    hpml_simd_t ps[2];
    int np = paths(ps);
    float *x = malloc(n * sizeof *x);
    uint16_t *y = malloc(n * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    for (size_t i = 0; i < n; i++)
        x[i] = bitsf(pairs[2 * i]);
    for (int p = 0; p < np; p++) {
        use(ps[p]);
        memset(y, 0xa5, n * sizeof *y);
        if (bf16)
            hpml_f32_to_bf16_array(y, x, n);
        else
            hpml_f32_to_f16_array(y, x, n);
        for (size_t i = 0; i < n; i++) {
            uint16_t s = bf16 ? hpml_f32_to_bf16(x[i]) : hpml_f32_to_f16(x[i]);
            if (y[i] != pairs[2 * i + 1] || s != y[i])
                fail_msg("%s: f32 %08x (%.9g) -> array %04x scalar %04x, reference %04x "
                         "(path %d)",
                         bf16 ? "bf16" : "f16", pairs[2 * i], (double)x[i], y[i], s,
                         pairs[2 * i + 1], (int)ps[p]);
        }
    }
    free(x);
    free(y);
}

static void test_f32_to_f16_reference(void **state)
{
    (void)state;
    /* The reference holds every f16 round trip, every midpoint and its f32 neighbours. */
    assert_true(ref.n_f32_to_f16 > 6 * 0x7bff);
    check_pairs(ref.f32_to_f16, ref.n_f32_to_f16, 0);
}

static void test_f32_to_f16_boundaries(void **state)
{
    (void)state;
    static const struct {
        float x;
        uint16_t h;
    } cases[] = {
        {65504.0f, 0x7bff},     {65519.996f, 0x7bff},      {65520.0f, 0x7c00},
        {1e30f, 0x7c00},        {-65520.0f, 0xfc00},       {0x1p-24f, 0x0001},
        {0x1p-25f, 0x0000},     {0x1.000002p-25f, 0x0001}, {0x1.8p-24f, 0x0002},
        {0x1p-14f, 0x0400},     {0x1.ffcp-15f, 0x0400},    {0x1.ffbffep-15f, 0x03ff},
        {0x1.ff8p-15f, 0x03ff}, {-0.0f, 0x8000},           {0x1p-149f, 0x0000},
        {-0x1p-149f, 0x8000},
    };
    hpml_simd_t ps[2];
    int np = paths(ps);
    for (int p = 0; p < np; p++) {
        use(ps[p]);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            uint16_t y;
            hpml_f32_to_f16_array(&y, &cases[i].x, 1);
            if (y != cases[i].h || hpml_f32_to_f16(cases[i].x) != cases[i].h)
                fail_msg("%a -> %04x, want %04x", (double)cases[i].x, y, cases[i].h);
        }
    }
}

/* NaN: quiet bit set, sign and the top payload bits kept (both formats), on both paths. */
static void test_nan(void **state)
{
    (void)state;
    hpml_simd_t ps[2];
    int np = paths(ps);
    for (int p = 0; p < np; p++) {
        use(ps[p]);
        for (uint32_t m = 1; m < 0x800000u; m = m * 3 + 1) {
            for (uint32_t s = 0; s < 2; s++) {
                uint32_t u = (s << 31) | 0x7f800000u | m;
                float x = bitsf(u);
                uint16_t h, b;
                hpml_f32_to_f16_array(&h, &x, 1);
                hpml_f32_to_bf16_array(&b, &x, 1);
                assert_int_equal(h, (uint16_t)((s << 15) | 0x7e00u | (m >> 13)));
                assert_int_equal(b, (uint16_t)((u >> 16) | 0x40u));
            }
        }
    }
}

/* Array functions: every length 0..40, start at odd element offsets, nothing written
 * past the end, same bits as the scalar function. */
static void test_array_tails(void **state)
{
    (void)state;
    hpml_simd_t ps[2];
    int np = paths(ps);
    float src[64], back[64];
    uint16_t h[64];
    for (int i = 0; i < 64; i++)
        src[i] = (float)(i * 1234.567 - 30000.0) * (i & 1 ? 1.0f : 1e-6f);
    for (int p = 0; p < np; p++) {
        use(ps[p]);
        for (size_t n = 0; n <= 40; n++) {
            for (size_t off = 0; off < 3; off++) {
                memset(h, 0x5a, sizeof h);
                hpml_f32_to_f16_array(h + off, src + off, n);
                for (size_t i = 0; i < 64; i++) {
                    if (i >= off && i < off + n)
                        assert_int_equal(h[i], hpml_f32_to_f16(src[i]));
                    else
                        assert_int_equal(h[i], 0x5a5a);
                }
                memset(back, 0x5a, sizeof back);
                hpml_f16_to_f32_array(back + off, h + off, n);
                for (size_t i = off; i < off + n; i++)
                    assert_int_equal(fbits(back[i]), fbits(hpml_f16_to_f32(h[i])));
                assert_int_equal(fbits(back[off + n]), 0x5a5a5a5au);
                memset(h, 0x5a, sizeof h);
                hpml_f32_to_bf16_array(h + off, src + off, n);
                for (size_t i = 0; i < 64; i++) {
                    if (i >= off && i < off + n)
                        assert_int_equal(h[i], hpml_f32_to_bf16(src[i]));
                    else
                        assert_int_equal(h[i], 0x5a5a);
                }
                memset(back, 0x5a, sizeof back);
                hpml_bf16_to_f32_array(back + off, h + off, n);
                for (size_t i = off; i < off + n; i++)
                    assert_int_equal(fbits(back[i]), fbits(hpml_bf16_to_f32(h[i])));
                assert_int_equal(fbits(back[off + n]), 0x5a5a5a5au);
            }
        }
    }
}

/* ---- bf16 ---------------------------------------------------------------------------- */

static void test_bf16_to_f32_all(void **state)
{
    (void)state;
    static uint16_t h[65536];
    static float out[2][65536];
    hpml_simd_t ps[2];
    int np = paths(ps);
    for (int i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    for (int p = 0; p < np; p++) {
        use(ps[p]);
        hpml_bf16_to_f32_array(out[p], h, 65536);
        for (int i = 0; i < 65536; i++) {
            uint32_t got = fbits(out[p][i]);
            assert_int_equal(got, fbits(hpml_bf16_to_f32((uint16_t)i)));
            if (got != ref.bf16_to_f32[i])
                fail_msg("bf16 %04x -> %08x, reference %08x", i, got, ref.bf16_to_f32[i]);
        }
    }
}

static void test_f32_to_bf16_reference(void **state)
{
    (void)state;
    assert_true(ref.n_f32_to_bf16 > 6 * 0x7f80);
    check_pairs(ref.f32_to_bf16, ref.n_f32_to_bf16, 1);
}

/* ---- path agreement over all of f32 --------------------------------------------------- */

/* Every 7th f32 bit pattern (613M of them, every residue of the low bits is visited),
 * converted by both paths to f16 and bf16; the results must be identical. */
static void test_sweep_paths_agree(void **state)
{
    (void)state;
    if (!have_avx2)
        skip();
    enum { N = 1 << 16, STRIDE = 7 };
    static float x[N];
    static uint16_t a[N], b[N];
    uint64_t mism_h = 0, mism_b = 0, total = 0;
    for (uint64_t base = 0; base < (1ull << 32); base += (uint64_t)N * STRIDE) {
        size_t n = 0;
        for (; n < N && base + n * STRIDE < (1ull << 32); n++)
            x[n] = bitsf((uint32_t)(base + n * STRIDE));
        total += n;
        hpml_simd_select(HPML_SIMD_PORTABLE);
        hpml_f32_to_f16_array(a, x, n);
        hpml_simd_select(HPML_SIMD_AVX2);
        hpml_f32_to_f16_array(b, x, n);
        for (size_t i = 0; i < n; i++)
            if (a[i] != b[i] && mism_h++ < 5)
                print_error("f16: %08x portable %04x avx2 %04x\n", fbits(x[i]), a[i], b[i]);
        hpml_simd_select(HPML_SIMD_PORTABLE);
        hpml_f32_to_bf16_array(a, x, n);
        hpml_simd_select(HPML_SIMD_AVX2);
        hpml_f32_to_bf16_array(b, x, n);
        for (size_t i = 0; i < n; i++)
            if (a[i] != b[i] && mism_b++ < 5)
                print_error("bf16: %08x portable %04x avx2 %04x\n", fbits(x[i]), a[i], b[i]);
    }
    print_message("swept %llu f32 patterns\n", (unsigned long long)total);
    assert_true(total > (1ull << 32) / STRIDE - 1);
    assert_int_equal(mism_h, 0);
    assert_int_equal(mism_b, 0);
}

static void test_simd_select(void **state)
{
    (void)state;
    assert_int_equal(hpml_simd_select(HPML_SIMD_PORTABLE), 0);
    assert_int_equal(hpml_simd_active(), HPML_SIMD_PORTABLE);
    assert_int_equal(hpml_simd_select((hpml_simd_t)42), HPML_ERR_INVAL);
    assert_int_equal(hpml_simd_active(), HPML_SIMD_PORTABLE);
    if (have_avx2) {
        assert_int_equal(hpml_simd_select(HPML_SIMD_AVX2), 0);
        assert_int_equal(hpml_simd_active(), HPML_SIMD_AVX2);
    } else {
        assert_int_equal(hpml_simd_select(HPML_SIMD_AVX2), HPML_ERR_UNSUPPORTED);
    }
    assert_int_equal(hpml_simd_select(HPML_SIMD_AUTO), 0);
    assert_int_not_equal(hpml_simd_active(), HPML_SIMD_AUTO);
    if (have_avx2 && !getenv("HPML_SIMD"))
        assert_int_equal(hpml_simd_active(), HPML_SIMD_AVX2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simd_select),
        cmocka_unit_test(test_f16_to_f32_all),
        cmocka_unit_test(test_f32_to_f16_reference),
        cmocka_unit_test(test_f32_to_f16_boundaries),
        cmocka_unit_test(test_nan),
        cmocka_unit_test(test_array_tails),
        cmocka_unit_test(test_bf16_to_f32_all),
        cmocka_unit_test(test_f32_to_bf16_reference),
        cmocka_unit_test(test_sweep_paths_agree),
    };
    return cmocka_run_group_tests(tests, load_ref, free_ref);
}
