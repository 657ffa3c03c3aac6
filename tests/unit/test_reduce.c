/*
 * Reduction kernels: every dtype x op x SIMD path against a plain reference loop, at
 * lengths 0, 1, 7, 33 and 1003, at aligned and misaligned addresses, out of place and
 * in place (dst == a, dst == b, all three equal); integer wraparound; fp16/bf16 against
 * the f32 result rounded once; AVG through hpml_reduce_finish; argument errors.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hpml/core.h"

static int npaths(hpml_simd_t ps[2])
{
    ps[0] = HPML_SIMD_PORTABLE;
    ps[1] = HPML_SIMD_AVX2;
    return hpml_cpu_has_avx2() && hpml_cpu_has_f16c() && hpml_cpu_has_fma() ? 2 : 1;
}

/* ---- reference element operations ----------------------------------------------------
 * Written from the documented contract, independently of the kernels' bit tricks:
 * floats MIN/MAX propagate NaN (a's if both), and -0 < +0. */

#define REF_FMINMAX(T, NAME)                                                                       \
    static T NAME##_min(T a, T b)                                                                  \
    {                                                                                              \
        if (isnan(a))                                                                              \
            return a;                                                                              \
        if (isnan(b))                                                                              \
            return b;                                                                              \
        if (a != b)                                                                                \
            return a < b ? a : b;                                                                  \
        return signbit(a) ? a : b;                                                                 \
    }                                                                                              \
    static T NAME##_max(T a, T b)                                                                  \
    {                                                                                              \
        if (isnan(a))                                                                              \
            return a;                                                                              \
        if (isnan(b))                                                                              \
            return b;                                                                              \
        if (a != b)                                                                                \
            return a > b ? a : b;                                                                  \
        return signbit(a) ? b : a;                                                                 \
    }
REF_FMINMAX(float, rf)
REF_FMINMAX(double, rd)

static float ref_f32(float a, float b, hpml_op_t op)
{
    switch (op) {
    case HPML_SUM:
    case HPML_AVG: return a + b;
    case HPML_PROD: return a * b;
    case HPML_MIN: return rf_min(a, b);
    default: return rf_max(a, b);
    }
}

static double ref_f64(double a, double b, hpml_op_t op)
{
    switch (op) {
    case HPML_SUM:
    case HPML_AVG: return a + b;
    case HPML_PROD: return a * b;
    case HPML_MIN: return rd_min(a, b);
    default: return rd_max(a, b);
    }
}

/* Integers: compute exactly in a wide type, then reduce modulo 2^bits by hand. */
static int64_t wrap_bits(int64_t v, int bits, int is_signed)
{
    int64_t m = (int64_t)1 << bits;
    v %= m;
    if (v < 0)
        v += m;
    if (is_signed && v >= m / 2)
        v -= m;
    return v;
}

static int64_t ref_small_int(int64_t a, int64_t b, hpml_op_t op, int bits, int is_signed)
{
    switch (op) {
    case HPML_SUM:
    case HPML_AVG: return wrap_bits(a + b, bits, is_signed);
    case HPML_PROD: return wrap_bits(a * b, bits, is_signed);
    case HPML_MIN: return a < b ? a : b;
    default: return a > b ? a : b;
    }
}

static int64_t ref_i64(int64_t a, int64_t b, hpml_op_t op)
{
    switch (op) {
    case HPML_SUM:
    case HPML_AVG: return (int64_t)((uint64_t)a + (uint64_t)b);
    case HPML_PROD: {
        /* Schoolbook product of the 32-bit halves modulo 2^64. */
        uint64_t x = (uint64_t)a, y = (uint64_t)b;
        uint64_t xl = x & 0xffffffffu, xh = x >> 32, yl = y & 0xffffffffu, yh = y >> 32;
        return (int64_t)(xl * yl + ((xl * yh + xh * yl) << 32));
    }
    case HPML_MIN: return a < b ? a : b;
    default: return a > b ? a : b;
    }
}

/* Reference for element i of dtype dt, on raw (possibly unaligned) bytes. */
static void ref_elem(void *d, const void *a, const void *b, hpml_dtype_t dt, hpml_op_t op)
{
    switch (dt) {
    case HPML_F32: {
        float x, y, r;
        memcpy(&x, a, 4);
        memcpy(&y, b, 4);
        r = ref_f32(x, y, op);
        memcpy(d, &r, 4);
        break;
    }
    case HPML_F64: {
        double x, y, r;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        r = ref_f64(x, y, op);
        memcpy(d, &r, 8);
        break;
    }
    case HPML_F16:
    case HPML_BF16: {
        uint16_t x, y, r;
        memcpy(&x, a, 2);
        memcpy(&y, b, 2);
        if (dt == HPML_F16)
            r = hpml_f32_to_f16(ref_f32(hpml_f16_to_f32(x), hpml_f16_to_f32(y), op));
        else
            r = hpml_f32_to_bf16(ref_f32(hpml_bf16_to_f32(x), hpml_bf16_to_f32(y), op));
        memcpy(d, &r, 2);
        break;
    }
    case HPML_I8: {
        int8_t x, y, r;
        memcpy(&x, a, 1);
        memcpy(&y, b, 1);
        r = (int8_t)ref_small_int(x, y, op, 8, 1);
        memcpy(d, &r, 1);
        break;
    }
    case HPML_U8: {
        uint8_t x, y, r;
        memcpy(&x, a, 1);
        memcpy(&y, b, 1);
        r = (uint8_t)ref_small_int(x, y, op, 8, 0);
        memcpy(d, &r, 1);
        break;
    }
    case HPML_I32: {
        int32_t x, y, r;
        memcpy(&x, a, 4);
        memcpy(&y, b, 4);
        r = (int32_t)ref_small_int(x, y, op, 32, 1);
        memcpy(d, &r, 4);
        break;
    }
    case HPML_I64: {
        int64_t x, y, r;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        r = ref_i64(x, y, op);
        memcpy(d, &r, 8);
        break;
    }
    default: fail();
    }
}

/* Is the element a NaN? Sums and products of NaNs may keep either operand's payload
 * (IEEE leaves it open), so there we only compare NaN-ness. */
static int elem_is_nan(const void *p, hpml_dtype_t dt)
{
    switch (dt) {
    case HPML_F32: {
        float x;
        memcpy(&x, p, 4);
        return isnan(x);
    }
    case HPML_F64: {
        double x;
        memcpy(&x, p, 8);
        return isnan(x);
    }
    case HPML_F16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return (h & 0x7fff) > 0x7c00;
    }
    case HPML_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return (h & 0x7fff) > 0x7f80;
    }
    default: return 0;
    }
}

/* ---- test data -------------------------------------------------------------------------- */

static const double specials[] = {0.0, -0.0, INFINITY, -INFINITY, NAN,  -NAN,
                                  1.0, -1.0, 65504.0,  1e-8,      -3.5, 2.0};

/* Fill n elements at p: integers get random bytes (so sums and products overflow);
 * floats get random values of mixed sign and magnitude, and when `special` is set
 * about one in eight is ±0, ±Inf, NaN or a repeated small value (ties for MIN/MAX). */
static void fill(unsigned char *p, size_t n, hpml_dtype_t dt, hpml_rng_t *rng, int special)
{
    size_t sz = hpml_dtype_size(dt);
    for (size_t i = 0; i < n; i++) {
        unsigned char *e = p + i * sz;
        if (!hpml_dtype_is_float(dt)) {
            uint64_t r = hpml_rng_u64(rng);
            memcpy(e, &r, sz);
            continue;
        }
        double v;
        if (special && hpml_rng_below(rng, 8) == 0)
            v = specials[hpml_rng_below(rng, sizeof specials / sizeof specials[0])];
        else
            v = (hpml_rng_uniform(rng) - 0.5) * ldexp(1.0, (int)hpml_rng_below(rng, 20) - 8);
        if (dt == HPML_F64) {
            memcpy(e, &v, 8);
        } else if (dt == HPML_F32) {
            float f = (float)v;
            memcpy(e, &f, 4);
        } else {
            uint16_t h = dt == HPML_F16 ? hpml_f32_to_f16((float)v) : hpml_f32_to_bf16((float)v);
            memcpy(e, &h, 2);
        }
    }
}

/* Compare n elements; floats under SUM/PROD/AVG compare NaN-ness for NaN results. */
static void check(const unsigned char *got, const unsigned char *want, size_t n, hpml_dtype_t dt,
                  hpml_op_t op, const char *what)
{
    size_t sz = hpml_dtype_size(dt);
    int nan_loose = op != HPML_MIN && op != HPML_MAX;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *g = got + i * sz, *w = want + i * sz;
        if (nan_loose && elem_is_nan(w, dt)) {
            if (!elem_is_nan(g, dt))
                fail_msg("%s %s %s: element %zu should be NaN", what, hpml_dtype_name(dt),
                         hpml_op_name(op), i);
            continue;
        }
        if (memcmp(g, w, sz) != 0) {
            uint64_t gv = 0, wv = 0;
            memcpy(&gv, g, sz);
            memcpy(&wv, w, sz);
            fail_msg("%s %s %s: element %zu of %zu is %#llx, reference %#llx", what,
                     hpml_dtype_name(dt), hpml_op_name(op), i, n, (unsigned long long)gv,
                     (unsigned long long)wv);
        }
    }
}

/* ---- tests ---------------------------------------------------------------------------- */

enum { MODE_OUT, MODE_DST_A, MODE_DST_B, MODE_ALL_SAME, MODE_COUNT };
static const char *mode_names[MODE_COUNT] = {"dst!=a,b", "dst==a", "dst==b", "dst==a==b"};

static void test_all_kernels(void **state)
{
    (void)state;
    static const size_t lens[] = {0, 1, 7, 33, 1003};
    static const size_t offs[] = {0, 1, 3, 8}; /* bytes past a 64-byte boundary */
    enum { CAP = 1003 * 8 + 64 };
    unsigned char *A = hpml_malloc(CAP), *B = hpml_malloc(CAP), *D = hpml_malloc(CAP);
    unsigned char *A0 = malloc(CAP), *B0 = malloc(CAP), *W = malloc(CAP);
    hpml_simd_t ps[2];
    int np = npaths(ps);
    hpml_rng_t rng;
    hpml_rng_init(&rng, 2024, 0);
    size_t combos = 0;
    assert_true(A && B && D && A0 && B0 && W);
    for (int p = 0; p < np; p++) {
        assert_int_equal(hpml_simd_select(ps[p]), 0);
        for (int dt = 0; dt < HPML_DTYPE_COUNT; dt++) {
            size_t sz = hpml_dtype_size((hpml_dtype_t)dt);
            for (int op = 0; op < HPML_OP_COUNT; op++) {
                for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                    for (size_t oi = 0; oi < sizeof offs / sizeof offs[0]; oi++) {
                        for (int mode = 0; mode < MODE_COUNT; mode++) {
                            size_t n = lens[li], off = offs[oi];
                            /* Different misalignments for a, b and dst. */
                            unsigned char *a = A + off, *b = B + (off * 3) % 13,
                                          *d = D + (off + 5) % 11;
                            char what[64];
                            int special = (int)(hpml_rng_u64(&rng) & 1);
                            fill(a, n, (hpml_dtype_t)dt, &rng, special);
                            fill(b, n, (hpml_dtype_t)dt, &rng, special);
                            if (mode == MODE_ALL_SAME)
                                memcpy(b, a, n * sz);
                            memcpy(A0, a, n * sz);
                            memcpy(B0, b, n * sz);
                            for (size_t i = 0; i < n; i++)
                                ref_elem(W + i * sz, A0 + i * sz, B0 + i * sz, (hpml_dtype_t)dt,
                                         (hpml_op_t)op);
                            memset(D, 0xee, CAP);
                            int rc;
                            unsigned char *out;
                            switch (mode) {
                            case MODE_OUT:
                                rc =
                                    hpml_reduce_local3(d, a, b, n, (hpml_dtype_t)dt, (hpml_op_t)op);
                                out = d;
                                /* Nothing written outside [d, d + n*sz). */
                                for (unsigned char *q = D; q < D + CAP; q++)
                                    if (q < d || q >= d + n * sz)
                                        assert_int_equal(*q, 0xee);
                                break;
                            case MODE_DST_A:
                                rc = hpml_reduce_local(a, b, n, (hpml_dtype_t)dt, (hpml_op_t)op);
                                out = a;
                                break;
                            case MODE_DST_B:
                                rc =
                                    hpml_reduce_local3(b, a, b, n, (hpml_dtype_t)dt, (hpml_op_t)op);
                                out = b;
                                break;
                            default:
                                rc =
                                    hpml_reduce_local3(a, a, a, n, (hpml_dtype_t)dt, (hpml_op_t)op);
                                out = a;
                                break;
                            }
                            assert_int_equal(rc, 0);
                            snprintf(what, sizeof what, "%s n=%zu off=%zu %s",
                                     ps[p] == HPML_SIMD_AVX2 ? "avx2" : "portable", n, off,
                                     mode_names[mode]);
                            check(out, W, n, (hpml_dtype_t)dt, (hpml_op_t)op, what);
                            combos++;
                        }
                    }
                }
            }
        }
    }
    print_message("%zu kernel combinations checked\n", combos);
    assert_int_equal(hpml_simd_select(HPML_SIMD_AUTO), 0);
    hpml_free(A);
    hpml_free(B);
    hpml_free(D);
    free(A0);
    free(B0);
    free(W);
}

/* Both paths give identical bits on the same large input (NaN-free so that even the
 * sums' payloads cannot differ), for every dtype and op. */
static void test_paths_agree(void **state)
{
    (void)state;
    hpml_simd_t ps[2];
    if (npaths(ps) < 2)
        skip();
    enum { N = 100003 };
    unsigned char *a = malloc(N * 8), *b = malloc(N * 8), *d0 = malloc(N * 8), *d1 = malloc(N * 8);
    hpml_rng_t rng;
    hpml_rng_init(&rng, 7, 3);
    assert_true(a && b && d0 && d1);
    for (int dt = 0; dt < HPML_DTYPE_COUNT; dt++) {
        size_t sz = hpml_dtype_size((hpml_dtype_t)dt);
        fill(a, N, (hpml_dtype_t)dt, &rng, 0);
        fill(b, N, (hpml_dtype_t)dt, &rng, 0);
        for (int op = 0; op < HPML_OP_COUNT; op++) {
            assert_int_equal(hpml_simd_select(HPML_SIMD_PORTABLE), 0);
            assert_int_equal(hpml_reduce_local3(d0, a, b, N, (hpml_dtype_t)dt, (hpml_op_t)op), 0);
            assert_int_equal(hpml_reduce_finish(d0, N, (hpml_dtype_t)dt, (hpml_op_t)op, 3), 0);
            assert_int_equal(hpml_simd_select(HPML_SIMD_AVX2), 0);
            assert_int_equal(hpml_reduce_local3(d1, a, b, N, (hpml_dtype_t)dt, (hpml_op_t)op), 0);
            assert_int_equal(hpml_reduce_finish(d1, N, (hpml_dtype_t)dt, (hpml_op_t)op, 3), 0);
            assert_memory_equal(d0, d1, N * sz);
        }
    }
    assert_int_equal(hpml_simd_select(HPML_SIMD_AUTO), 0);
    free(a);
    free(b);
    free(d0);
    free(d1);
}

static void test_integer_wrap(void **state)
{
    (void)state;
    hpml_simd_t ps[2];
    int np = npaths(ps);
    for (int p = 0; p < np; p++) {
        assert_int_equal(hpml_simd_select(ps[p]), 0);
        int8_t a8[3] = {127, -128, -128}, b8[3] = {1, -1, -1};
        assert_int_equal(hpml_reduce_local(a8, b8, 3, HPML_I8, HPML_SUM), 0);
        assert_int_equal(a8[0], -128);
        assert_int_equal(a8[1], 127);
        int8_t c8[2] = {-128, 16}, e8[2] = {-1, 16};
        assert_int_equal(hpml_reduce_local(c8, e8, 2, HPML_I8, HPML_PROD), 0);
        assert_int_equal(c8[0], -128);
        assert_int_equal(c8[1], 0);
        uint8_t u[2] = {255, 200}, v[2] = {1, 100};
        assert_int_equal(hpml_reduce_local(u, v, 2, HPML_U8, HPML_SUM), 0);
        assert_int_equal(u[0], 0);
        assert_int_equal(u[1], 44);
        int32_t x[2] = {INT32_MAX, INT32_MIN}, y[2] = {1, -1};
        assert_int_equal(hpml_reduce_local(x, y, 2, HPML_I32, HPML_SUM), 0);
        assert_int_equal(x[0], INT32_MIN);
        assert_int_equal(x[1], INT32_MAX);
        int32_t m[1] = {65536}, k[1] = {65536};
        assert_int_equal(hpml_reduce_local(m, k, 1, HPML_I32, HPML_PROD), 0);
        assert_int_equal(m[0], 0);
        int64_t X[2] = {INT64_MAX, INT64_MIN}, Y[2] = {2, -1};
        assert_int_equal(hpml_reduce_local(X, Y, 2, HPML_I64, HPML_PROD), 0);
        assert_true(X[0] == -2);
        assert_true(X[1] == INT64_MIN);
        int64_t S[1] = {INT64_MAX}, T[1] = {1};
        assert_int_equal(hpml_reduce_local(S, T, 1, HPML_I64, HPML_SUM), 0);
        assert_true(S[0] == INT64_MIN);
    }
    assert_int_equal(hpml_simd_select(HPML_SIMD_AUTO), 0);
}

static void test_float_minmax_semantics(void **state)
{
    (void)state;
    hpml_simd_t ps[2];
    int np = npaths(ps);
    for (int p = 0; p < np; p++) {
        assert_int_equal(hpml_simd_select(ps[p]), 0);
        float a[5] = {0.0f, -0.0f, NAN, 1.0f, -INFINITY};
        float b[5] = {-0.0f, 0.0f, 1.0f, NAN, -INFINITY};
        float mn[5], mx[5];
        assert_int_equal(hpml_reduce_local3(mn, a, b, 5, HPML_F32, HPML_MIN), 0);
        assert_int_equal(hpml_reduce_local3(mx, a, b, 5, HPML_F32, HPML_MAX), 0);
        assert_true(mn[0] == 0.0f && signbit(mn[0]));
        assert_true(mn[1] == 0.0f && signbit(mn[1]));
        assert_true(mx[0] == 0.0f && !signbit(mx[0]));
        assert_true(mx[1] == 0.0f && !signbit(mx[1]));
        assert_true(isnan(mn[2]) && isnan(mn[3]) && isnan(mx[2]) && isnan(mx[3]));
        assert_true(isinf(mn[4]) && mn[4] < 0);
        double da[2] = {NAN, -0.0}, db[2] = {-1.0, 0.0}, dm[2];
        assert_int_equal(hpml_reduce_local3(dm, da, db, 2, HPML_F64, HPML_MIN), 0);
        assert_true(isnan(dm[0]) && signbit(dm[1]));
    }
    assert_int_equal(hpml_simd_select(HPML_SIMD_AUTO), 0);
}

/* fp16 sum is rounded once per call: 2048 + 1 + 1 in one call each step equals the f32
 * result rounded, while the f16 grid there has spacing 2 (ties to even). */
static void test_half_rounded_once(void **state)
{
    (void)state;
    uint16_t d = hpml_f32_to_f16(2048.0f), one = hpml_f32_to_f16(1.0f);
    assert_int_equal(hpml_reduce_local(&d, &one, 1, HPML_F16, HPML_SUM), 0);
    assert_true(hpml_f16_to_f32(d) == 2048.0f); /* 2049 ties to even 2048 */
    uint16_t three = hpml_f32_to_f16(3.0f);
    assert_int_equal(hpml_reduce_local(&d, &three, 1, HPML_F16, HPML_SUM), 0);
    assert_true(hpml_f16_to_f32(d) == 2052.0f); /* 2051 ties to even 2052 */
    uint16_t b = hpml_f32_to_bf16(256.0f), bo = hpml_f32_to_bf16(1.5f);
    assert_int_equal(hpml_reduce_local(&b, &bo, 1, HPML_BF16, HPML_SUM), 0);
    assert_true(hpml_bf16_to_f32(b) == 258.0f); /* 257.5 rounds to 258 */
}

/* AVG: reduce P buffers as SUM, then hpml_reduce_finish divides by P. */
static void test_avg(void **state)
{
    (void)state;
    hpml_simd_t ps[2];
    int np = npaths(ps);
    for (int p = 0; p < np; p++) {
        assert_int_equal(hpml_simd_select(ps[p]), 0);
        int32_t i32[4] = {7, -7, 8, INT32_MAX};
        assert_int_equal(hpml_reduce_finish(i32, 4, HPML_I32, HPML_AVG, 2), 0);
        assert_int_equal(i32[0], 3);
        assert_int_equal(i32[1], -3); /* truncation toward zero */
        assert_int_equal(i32[2], 4);
        assert_int_equal(i32[3], INT32_MAX / 2);
        int8_t i8[2] = {-128, 127};
        assert_int_equal(hpml_reduce_finish(i8, 2, HPML_I8, HPML_AVG, 3), 0);
        assert_int_equal(i8[0], -42);
        assert_int_equal(i8[1], 42);
        uint8_t u8[1] = {255};
        assert_int_equal(hpml_reduce_finish(u8, 1, HPML_U8, HPML_AVG, 4), 0);
        assert_int_equal(u8[0], 63);
        int64_t i64[1] = {-((int64_t)1 << 62)};
        assert_int_equal(hpml_reduce_finish(i64, 1, HPML_I64, HPML_AVG, 3), 0);
        assert_true(i64[0] == (-((int64_t)1 << 62)) / 3);

        /* Floats: a full AVG over P contributions against sum-then-divide. */
        enum { N = 37, P = 7 };
        float f[N], g[N], want[N];
        double dd[N], dwant[N];
        uint16_t h[N], hb[N], hw[N], hbw[N];
        hpml_rng_t rng;
        hpml_rng_init(&rng, 99, 0);
        for (int i = 0; i < N; i++) {
            want[i] = f[i] = (float)hpml_rng_normal(&rng);
            dwant[i] = dd[i] = hpml_rng_normal(&rng);
            h[i] = hw[i] = hpml_f32_to_f16(f[i]);
            hb[i] = hbw[i] = hpml_f32_to_bf16(f[i]);
        }
        for (int r = 1; r < P; r++) {
            for (int i = 0; i < N; i++) {
                g[i] = (float)hpml_rng_normal(&rng);
                double gd = hpml_rng_normal(&rng);
                uint16_t gh = hpml_f32_to_f16(g[i]), gb = hpml_f32_to_bf16(g[i]);
                want[i] += g[i];
                dwant[i] += gd;
                hw[i] = hpml_f32_to_f16(hpml_f16_to_f32(hw[i]) + hpml_f16_to_f32(gh));
                hbw[i] = hpml_f32_to_bf16(hpml_bf16_to_f32(hbw[i]) + hpml_bf16_to_f32(gb));
                assert_int_equal(hpml_reduce_local(dd + i, &gd, 1, HPML_F64, HPML_AVG), 0);
                assert_int_equal(hpml_reduce_local(h + i, &gh, 1, HPML_F16, HPML_AVG), 0);
                assert_int_equal(hpml_reduce_local(hb + i, &gb, 1, HPML_BF16, HPML_AVG), 0);
            }
            assert_int_equal(hpml_reduce_local(f, g, N, HPML_F32, HPML_AVG), 0);
        }
        assert_int_equal(hpml_reduce_finish(f, N, HPML_F32, HPML_AVG, P), 0);
        assert_int_equal(hpml_reduce_finish(dd, N, HPML_F64, HPML_AVG, P), 0);
        assert_int_equal(hpml_reduce_finish(h, N, HPML_F16, HPML_AVG, P), 0);
        assert_int_equal(hpml_reduce_finish(hb, N, HPML_BF16, HPML_AVG, P), 0);
        for (int i = 0; i < N; i++) {
            assert_true(f[i] == want[i] / (float)P);
            assert_true(dd[i] == dwant[i] / (double)P);
            /* The f16 quotient is correctly rounded: computed here in double. */
            assert_int_equal(h[i], hpml_f32_to_f16((float)((double)hpml_f16_to_f32(hw[i]) / P)));
            assert_int_equal(hb[i],
                             hpml_f32_to_bf16((float)((double)hpml_bf16_to_f32(hbw[i]) / P)));
        }
        /* Non-AVG ops: finish is a no-op. */
        float keep[2] = {1.5f, -2.0f};
        assert_int_equal(hpml_reduce_finish(keep, 2, HPML_F32, HPML_SUM, 4), 0);
        assert_true(keep[0] == 1.5f && keep[1] == -2.0f);
    }
    assert_int_equal(hpml_simd_select(HPML_SIMD_AUTO), 0);
}

/* AVG over a power of two of contributions is a multiply by the exact reciprocal: the
 * same bits as the division, over the whole range (random bit patterns, subnormals whose
 * halving rounds, zeros, infinities, the largest values); NaNs stay NaNs. Three
 * contributions keep the division. */
static void test_avg_pow2(void **state)
{
    (void)state;
    enum { N = 4096 };
    static float f[N], fw[N];
    static double d[N], dw[N];
    static const int ps[] = {2, 4, 8, 1024, 3};
    hpml_rng_t rng;

    hpml_rng_init(&rng, 7, 0);
    for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++) {
        volatile float pf = (float)ps[k];
        volatile double pd = (double)ps[k];
        for (int i = 0; i < N; i++) {
            uint64_t bits = hpml_rng_u64(&rng);
            uint32_t b32 = (uint32_t)bits;
            if (i < 8) /* odd multiples of the smallest subnormal: halving them rounds */
                b32 = (uint32_t)(2 * i + 1);
            memcpy(&f[i], &b32, 4);
            memcpy(&d[i], &bits, 8);
        }
        f[8] = -0.0f, f[9] = INFINITY, f[10] = -INFINITY, f[11] = FLT_MAX, f[12] = FLT_MIN;
        d[8] = -0.0, d[9] = INFINITY, d[10] = DBL_MIN, d[11] = DBL_MAX, d[12] = 5e-324;
        for (int i = 0; i < N; i++) {
            fw[i] = f[i] / pf;
            dw[i] = d[i] / pd;
        }
        assert_int_equal(hpml_reduce_finish(f, N, HPML_F32, HPML_AVG, ps[k]), 0);
        assert_int_equal(hpml_reduce_finish(d, N, HPML_F64, HPML_AVG, ps[k]), 0);
        for (int i = 0; i < N; i++) {
            if (isnan(fw[i]))
                assert_true(isnan(f[i]));
            else
                assert_memory_equal(&f[i], &fw[i], 4);
            if (isnan(dw[i]))
                assert_true(isnan(d[i]));
            else
                assert_memory_equal(&d[i], &dw[i], 8);
        }
    }
}

static void test_errors(void **state)
{
    (void)state;
    float a[8] = {0}, b[8] = {0};
    assert_int_equal(hpml_reduce_local(a, b, 8, HPML_DTYPE_COUNT, HPML_SUM), HPML_ERR_INVAL);
    assert_int_equal(hpml_reduce_local(a, b, 8, HPML_F32, HPML_OP_COUNT), HPML_ERR_INVAL);
    assert_int_equal(hpml_reduce_local(a, b, 8, (hpml_dtype_t)-1, HPML_SUM), HPML_ERR_INVAL);
    assert_int_equal(hpml_reduce_local(NULL, b, 8, HPML_F32, HPML_SUM), HPML_ERR_INVAL);
    assert_int_equal(hpml_reduce_local3(a, NULL, b, 8, HPML_F32, HPML_SUM), HPML_ERR_INVAL);
    assert_int_equal(hpml_reduce_local(NULL, NULL, 0, HPML_F32, HPML_SUM), 0);
    /* Partial overlap is refused; exact aliasing is fine. */
    assert_int_equal(hpml_reduce_local(a + 1, a, 4, HPML_F32, HPML_SUM), HPML_ERR_INVAL);
    assert_int_equal(hpml_reduce_local3(a, b, a + 3, 4, HPML_F32, HPML_MAX), HPML_ERR_INVAL);
    assert_int_equal(hpml_reduce_local(a + 4, a, 4, HPML_F32, HPML_SUM), 0);
    assert_int_equal(hpml_reduce_finish(a, 8, HPML_F32, HPML_AVG, 0), HPML_ERR_INVAL);
    assert_int_equal(hpml_reduce_finish(a, 8, HPML_F32, HPML_AVG, -2), HPML_ERR_INVAL);
    assert_int_equal(hpml_reduce_finish(NULL, 8, HPML_F32, HPML_AVG, 2), HPML_ERR_INVAL);
    assert_int_equal(hpml_reduce_finish(a, 8, HPML_BF16 + 100, HPML_AVG, 2), HPML_ERR_INVAL);
    assert_int_equal(hpml_reduce_finish(NULL, 0, HPML_F32, HPML_AVG, 2), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_kernels),       cmocka_unit_test(test_paths_agree),
        cmocka_unit_test(test_integer_wrap),      cmocka_unit_test(test_float_minmax_semantics),
        cmocka_unit_test(test_half_rounded_once), cmocka_unit_test(test_avg),
        cmocka_unit_test(test_avg_pow2),          cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
