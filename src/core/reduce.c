/*
 * Local reduction kernels: dst = a op b element-wise for every dtype and op, used by
 * every comm algorithm. One C body per (dtype, op) is compiled twice, for baseline
 * x86-64 and with target("avx2,f16c,fma"), and GCC vectorises both (`make vec-report`).
 * The float ops are single IEEE operations and MIN/MAX work on bit patterns, so both
 * paths give identical bits. fp16/bf16 go through f32 in stack blocks, rounded once.
 */
#include <stdint.h>
#include <string.h>

#include "core/half_internal.h"
#include "core/simd_internal.h"
#include "hpml/core.h"

/* Element types with alignment 1: callers may hand us any byte address (a slice of a
 * packed fusion buffer, say), and x86 vector loads do not care. may_alias because the
 * float MIN/MAX kernels read float buffers through integer types. */
typedef float f32_ua __attribute__((aligned(1), may_alias));
typedef double f64_ua __attribute__((aligned(1), may_alias));
typedef int8_t i8_ua __attribute__((aligned(1), may_alias));
typedef uint8_t u8_ua __attribute__((aligned(1), may_alias));
typedef int32_t i32_ua __attribute__((aligned(1), may_alias));
typedef uint32_t u32_ua __attribute__((aligned(1), may_alias));
typedef int64_t i64_ua __attribute__((aligned(1), may_alias));
typedef uint64_t u64_ua __attribute__((aligned(1), may_alias));

typedef void (*kern_fn)(void *d, const void *a, const void *b, size_t n);

/* ---- element operations ------------------------------------------------------------ */

static inline float f32_sum(float a, float b)
{
    return a + b;
}
static inline float f32_prod(float a, float b)
{
    return a * b;
}
static inline double f64_sum(double a, double b)
{
    return a + b;
}
static inline double f64_prod(double a, double b)
{
    return a * b;
}

/*
 * Float MIN/MAX follow IEEE 754-2019 minimum/maximum: a NaN operand propagates (a's if
 * both are NaN, payload unchanged), and -0 < +0, so the result does not depend on the
 * order of the operands except for which of two NaNs is kept. They compare keys that
 * order the bit patterns like the values: for negative numbers flip the magnitude bits.
 */
#define FLOAT_MINMAX(NAME, U, S, ABS, INF, SHIFT)                                                  \
    static inline U NAME##_key_le(U a, U b)                                                        \
    {                                                                                              \
        U ka = a ^ ((0 - (a >> SHIFT)) & ABS);                                                     \
        U kb = b ^ ((0 - (b >> SHIFT)) & ABS);                                                     \
        return (S)ka <= (S)kb;                                                                     \
    }                                                                                              \
    static inline U NAME##_min(U a, U b)                                                           \
    {                                                                                              \
        U r = NAME##_key_le(a, b) ? a : b;                                                         \
        r = (b & ABS) > INF ? b : r;                                                               \
        return (a & ABS) > INF ? a : r;                                                            \
    }                                                                                              \
    static inline U NAME##_max(U a, U b)                                                           \
    {                                                                                              \
        U r = NAME##_key_le(a, b) ? b : a;                                                         \
        r = (b & ABS) > INF ? b : r;                                                               \
        return (a & ABS) > INF ? a : r;                                                            \
    }

FLOAT_MINMAX(f32b, uint32_t, int32_t, 0x7fffffffu, 0x7f800000u, 31)
FLOAT_MINMAX(f64b, uint64_t, int64_t, 0x7fffffffffffffffull, 0x7ff0000000000000ull, 63)

/* Integer SUM/PROD in an unsigned type wrap modulo 2^bits; the conversion back to the
 * signed type is GCC's modulo conversion (implementation-defined, never undefined). */
#define INT_OPS(NAME, T, U)                                                                        \
    static inline T NAME##_sum(T a, T b)                                                           \
    {                                                                                              \
        return (T)((U)a + (U)b);                                                                   \
    }                                                                                              \
    static inline T NAME##_prod(T a, T b)                                                          \
    {                                                                                              \
        return (T)((U)a * (U)b);                                                                   \
    }                                                                                              \
    static inline T NAME##_min(T a, T b)                                                           \
    {                                                                                              \
        return a < b ? a : b;                                                                      \
    }                                                                                              \
    static inline T NAME##_max(T a, T b)                                                           \
    {                                                                                              \
        return a > b ? a : b;                                                                      \
    }

INT_OPS(i8, int8_t, uint32_t)
INT_OPS(u8, uint8_t, uint32_t)
INT_OPS(i32, int32_t, uint32_t)
INT_OPS(i64, int64_t, uint64_t)

/* ---- loops ---------------------------------------------------------------------------
 * dst may equal a or b (then element i is read before it is written and no other
 * iteration touches it) and partial overlap is refused by the caller, so there are no
 * loop-carried dependences: ivdep spares the runtime alias checks that would otherwise
 * send the in-place case down the scalar fallback. */

#define DEF_LOOP(ATTR, FNAME, T, OPFN)                                                             \
    ATTR static void FNAME(void *dv, const void *av, const void *bv, size_t n)                     \
    {                                                                                              \
        T *d = dv;                                                                                 \
        const T *a = av, *b = bv;                                                                  \
        _Pragma("GCC ivdep") for (size_t i = 0; i < n; i++) d[i] = OPFN(a[i], b[i]);               \
    }

/* fp16/bf16: BLK elements at a time into f32 stack buffers, combined with the f32 kernel
 * of the same path, rounded back once. The raw halves are copied through an aligned
 * buffer so the converters never see an odd address. */
#define BLK 512
#define DEF_HALF(ATTR, FNAME, F32FN, CONV_IN, CONV_OUT)                                            \
    ATTR static void FNAME(void *dv, const void *av, const void *bv, size_t n)                     \
    {                                                                                              \
        uint16_t h[BLK];                                                                           \
        float fa[BLK], fb[BLK];                                                                    \
        for (size_t i = 0; i < n; i += BLK) {                                                      \
            size_t m = n - i < BLK ? n - i : BLK;                                                  \
            memcpy(h, (const char *)av + 2 * i, 2 * m);                                            \
            CONV_IN(fa, h, m);                                                                     \
            memcpy(h, (const char *)bv + 2 * i, 2 * m);                                            \
            CONV_IN(fb, h, m);                                                                     \
            F32FN(fa, fa, fb, m);                                                                  \
            CONV_OUT(h, fa, m);                                                                    \
            memcpy((char *)dv + 2 * i, h, 2 * m);                                                  \
        }                                                                                          \
    }

/* AVX2 fp16/bf16: fused, eight elements per step: load and widen both operands,
 * combine in f32, round back and store, with no stack round trip. The ops repeat the
 * scalar definitions above lane by lane (same keys, same NaN rules), so the bits equal
 * the portable path's. The tail goes through zero-padded stack blocks. */
HPML_AVX2_TARGET static inline __m256 ld_f16(const void *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

HPML_AVX2_TARGET static inline void st_f16(void *p, __m256 v)
{
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

HPML_AVX2_TARGET static inline __m256 ld_bf16(const void *p)
{
    return hpml__bf16x8_to_f32(_mm_loadu_si128((const __m128i *)p));
}

HPML_AVX2_TARGET static inline void st_bf16(void *p, __m256 v)
{
    _mm_storeu_si128((__m128i *)p, hpml__f32x8_to_bf16(v));
}

HPML_AVX2_TARGET static inline __m256 v_sum(__m256 a, __m256 b)
{
    return _mm256_add_ps(a, b);
}

HPML_AVX2_TARGET static inline __m256 v_prod(__m256 a, __m256 b)
{
    return _mm256_mul_ps(a, b);
}

/* 1s where key(a) > key(b), the lanewise f32b_key_le negated */
HPML_AVX2_TARGET static inline __m256i v_key_gt(__m256i a, __m256i b)
{
    const __m256i abs = _mm256_set1_epi32(0x7fffffff);
    __m256i ka = _mm256_xor_si256(a, _mm256_and_si256(_mm256_srai_epi32(a, 31), abs));
    __m256i kb = _mm256_xor_si256(b, _mm256_and_si256(_mm256_srai_epi32(b, 31), abs));
    return _mm256_cmpgt_epi32(ka, kb);
}

HPML_AVX2_TARGET static inline __m256i v_isnan(__m256i x)
{
    return _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
                              _mm256_set1_epi32(0x7f800000));
}

HPML_AVX2_TARGET static inline __m256 v_min(__m256 af, __m256 bf)
{
    __m256i a = _mm256_castps_si256(af), b = _mm256_castps_si256(bf);
    __m256i r = _mm256_blendv_epi8(a, b, v_key_gt(a, b));
    r = _mm256_blendv_epi8(r, b, v_isnan(b));
    return _mm256_castsi256_ps(_mm256_blendv_epi8(r, a, v_isnan(a)));
}

HPML_AVX2_TARGET static inline __m256 v_max(__m256 af, __m256 bf)
{
    __m256i a = _mm256_castps_si256(af), b = _mm256_castps_si256(bf);
    __m256i r = _mm256_blendv_epi8(b, a, v_key_gt(a, b));
    r = _mm256_blendv_epi8(r, b, v_isnan(b));
    return _mm256_castsi256_ps(_mm256_blendv_epi8(r, a, v_isnan(a)));
}

#define DEF_HALF_AVX2(FNAME, LD, ST, OPV)                                                          \
    HPML_AVX2_TARGET static void FNAME(void *dv, const void *av, const void *bv, size_t n)         \
    {                                                                                              \
        char *d = dv;                                                                              \
        const char *a = av, *b = bv;                                                               \
        size_t i = 0;                                                                              \
        for (; i + 8 <= n; i += 8)                                                                 \
            ST(d + 2 * i, OPV(LD(a + 2 * i), LD(b + 2 * i)));                                      \
        if (i < n) {                                                                               \
            uint16_t ta[8] = {0}, tb[8] = {0}, td[8];                                              \
            memcpy(ta, a + 2 * i, 2 * (n - i));                                                    \
            memcpy(tb, b + 2 * i, 2 * (n - i));                                                    \
            ST(td, OPV(LD(ta), LD(tb)));                                                           \
            memcpy(d + 2 * i, td, 2 * (n - i));                                                    \
        }                                                                                          \
    }

/* Each line defines one kernel for both paths, so `make vec-report` names it by line:
 * expect "16 byte vectors" (baseline SSE2) and "32 byte vectors" (AVX2) on each. The
 * fp16/bf16 lines vectorise by hand (AVX2) or in the converters (portable). */
#define AVX2 HPML_AVX2_TARGET
#define LOOP2(NAME, T, OPFN)                                                                       \
    DEF_LOOP(, NAME##_portable, T, OPFN) DEF_LOOP(AVX2, NAME##_avx2, T, OPFN)
#define HALF2(NAME, FMT, OP)                                                                       \
    DEF_HALF(, NAME##_portable, f32_##OP##_portable, hpml__##FMT##_to_f32_portable,                \
             hpml__f32_to_##FMT##_portable)                                                        \
    DEF_HALF_AVX2(NAME##_avx2, ld_##FMT, st_##FMT, v_##OP)

LOOP2(f32_sum, f32_ua, f32_sum)
LOOP2(f32_prod, f32_ua, f32_prod)
LOOP2(f32_min, u32_ua, f32b_min)
LOOP2(f32_max, u32_ua, f32b_max)
LOOP2(f64_sum, f64_ua, f64_sum)
LOOP2(f64_prod, f64_ua, f64_prod)
LOOP2(f64_min, u64_ua, f64b_min)
LOOP2(f64_max, u64_ua, f64b_max)
LOOP2(i8_sum, i8_ua, i8_sum)
LOOP2(i8_prod, i8_ua, i8_prod)
LOOP2(i8_min, i8_ua, i8_min)
LOOP2(i8_max, i8_ua, i8_max)
LOOP2(u8_sum, u8_ua, u8_sum)
LOOP2(u8_prod, u8_ua, u8_prod)
LOOP2(u8_min, u8_ua, u8_min)
LOOP2(u8_max, u8_ua, u8_max)
LOOP2(i32_sum, i32_ua, i32_sum)
LOOP2(i32_prod, i32_ua, i32_prod)
LOOP2(i32_min, i32_ua, i32_min)
LOOP2(i32_max, i32_ua, i32_max)
LOOP2(i64_sum, i64_ua, i64_sum)
LOOP2(i64_prod, i64_ua, i64_prod)
LOOP2(i64_min, i64_ua, i64_min)
LOOP2(i64_max, i64_ua, i64_max)
HALF2(f16_sum, f16, sum)
HALF2(f16_prod, f16, prod)
HALF2(f16_min, f16, min)
HALF2(f16_max, f16, max)
HALF2(bf16_sum, bf16, sum)
HALF2(bf16_prod, bf16, prod)
HALF2(bf16_min, bf16, min)
HALF2(bf16_max, bf16, max)

#define ROW(D, P)                                                                                  \
    {                                                                                              \
        D##_sum_##P, D##_prod_##P, D##_min_##P, D##_max_##P                                        \
    }
#define TABLE(P)                                                                                   \
    {                                                                                              \
        [HPML_F32] = ROW(f32, P), [HPML_F64] = ROW(f64, P), [HPML_F16] = ROW(f16, P),              \
        [HPML_BF16] = ROW(bf16, P), [HPML_I8] = ROW(i8, P), [HPML_U8] = ROW(u8, P),                \
        [HPML_I32] = ROW(i32, P), [HPML_I64] = ROW(i64, P),                                        \
    }

/* [path: 0 portable, 1 avx2][dtype][op: sum prod min max; AVG reduces as SUM] */
static const kern_fn kernels[2][HPML_DTYPE_COUNT][4] = {TABLE(portable), TABLE(avx2)};

/* Nonzero if [p, p+len) and [q, q+len) overlap without being the same range. */
static int partial_overlap(const void *p, const void *q, size_t len)
{
    uintptr_t x = (uintptr_t)p, y = (uintptr_t)q;
    if (x == y)
        return 0;
    return x < y ? y - x < len : x - y < len;
}

int hpml_reduce_local3(void *dst, const void *a, const void *b, size_t n, hpml_dtype_t dt,
                       hpml_op_t op)
{
    if ((unsigned)dt >= HPML_DTYPE_COUNT || (unsigned)op >= HPML_OP_COUNT)
        return hpml_set_error(HPML_ERR_INVAL, "reduce: bad dtype %d or op %d", (int)dt, (int)op);
    if (n == 0)
        return 0;
    if (!dst || !a || !b)
        return hpml_set_error(HPML_ERR_INVAL, "reduce: NULL buffer");
    size_t len = n * hpml_dtype_size(dt);
    if (len / hpml_dtype_size(dt) != n)
        return hpml_set_error(HPML_ERR_INVAL, "reduce: %zu elements overflow size_t", n);
    if (partial_overlap(dst, a, len) || partial_overlap(dst, b, len))
        return hpml_set_error(HPML_ERR_INVAL, "reduce: dst partially overlaps a source");
    int path = hpml__simd_path() == HPML_SIMD_AVX2;
    int k = op == HPML_AVG ? HPML_SUM : (int)op;
    kernels[path][dt][k](dst, a, b, n);
    return 0;
}

int hpml_reduce_local(void *dst, const void *src, size_t n, hpml_dtype_t dt, hpml_op_t op)
{
    return hpml_reduce_local3(dst, dst, src, n, dt, op);
}

/* ---- AVG finish ------------------------------------------------------------------------
 * Floats divide by P (correctly rounded, hence deterministic and never worse than a
 * multiply by a rounded 1/P). When P is a power of two, 1/P is exact and x * (1/P) rounds
 * the same real number as x / P, so the multiply gives the same bits (subnormals, zeros,
 * infinities and NaNs included) at the speed of memory, where the division is bound by
 * the divider (docs/decisions/torch-exchange.md). fp16/bf16 divide in f32 and
 * round once more: f32 carries more than 2p+2 bits of either format, so the double
 * rounding gives the correctly rounded quotient. Integers use C division, truncating
 * toward zero. */

#define DEF_DIVF(NAME, T, W)                                                                       \
    static void NAME(void *bv, size_t n, int p)                                                    \
    {                                                                                              \
        T *d = bv;                                                                                 \
        if ((p & (p - 1)) == 0) {                                                                  \
            const W r = (W)1 / (W)p;                                                               \
            for (size_t i = 0; i < n; i++)                                                         \
                d[i] = d[i] * r;                                                                   \
        } else {                                                                                   \
            const W q = (W)p;                                                                      \
            for (size_t i = 0; i < n; i++)                                                         \
                d[i] = d[i] / q;                                                                   \
        }                                                                                          \
    }

#define DEF_DIV(NAME, T, W)                                                                        \
    static void NAME(void *bv, size_t n, W p)                                                      \
    {                                                                                              \
        T *d = bv;                                                                                 \
        for (size_t i = 0; i < n; i++)                                                             \
            d[i] = d[i] / p;                                                                       \
    }

DEF_DIVF(div_f32, f32_ua, float)
DEF_DIVF(div_f64, f64_ua, double)
DEF_DIV(div_i8, i8_ua, int)
DEF_DIV(div_u8, u8_ua, int)
DEF_DIV(div_i32, i32_ua, int32_t)
DEF_DIV(div_i64, i64_ua, int64_t)

static void div_half(void *bv, size_t n, int p, int bf16)
{
    uint16_t h[BLK];
    float f[BLK];
    for (size_t i = 0; i < n; i += BLK) {
        size_t m = n - i < BLK ? n - i : BLK;
        memcpy(h, (char *)bv + 2 * i, 2 * m);
        if (bf16)
            hpml_bf16_to_f32_array(f, h, m);
        else
            hpml_f16_to_f32_array(f, h, m);
        div_f32(f, m, p);
        if (bf16)
            hpml_f32_to_bf16_array(h, f, m);
        else
            hpml_f32_to_f16_array(h, f, m);
        memcpy((char *)bv + 2 * i, h, 2 * m);
    }
}

int hpml_reduce_finish(void *buf, size_t n, hpml_dtype_t dt, hpml_op_t op, int contributions)
{
    if ((unsigned)dt >= HPML_DTYPE_COUNT || (unsigned)op >= HPML_OP_COUNT)
        return hpml_set_error(HPML_ERR_INVAL, "reduce_finish: bad dtype %d or op %d", (int)dt,
                              (int)op);
    if (op != HPML_AVG)
        return 0;
    if (contributions <= 0)
        return hpml_set_error(HPML_ERR_INVAL, "reduce_finish: %d contributions", contributions);
    if (n == 0 || contributions == 1)
        return 0;
    if (!buf)
        return hpml_set_error(HPML_ERR_INVAL, "reduce_finish: NULL buffer");
    switch (dt) {
    case HPML_F32: div_f32(buf, n, contributions); break;
    case HPML_F64: div_f64(buf, n, contributions); break;
    case HPML_F16: div_half(buf, n, contributions, 0); break;
    case HPML_BF16: div_half(buf, n, contributions, 1); break;
    case HPML_I8: div_i8(buf, n, contributions); break;
    case HPML_U8: div_u8(buf, n, contributions); break;
    case HPML_I32: div_i32(buf, n, contributions); break;
    case HPML_I64: div_i64(buf, n, contributions); break;
    default: break;
    }
    return 0;
}
