/*
 * fp16 (IEEE binary16) and bf16 (bfloat16) <-> f32 conversion, round to nearest, ties
 * to even. The portable path works on bit patterns and reproduces x86 F16C exactly,
 * NaNs included (quiet bit set, sign and top payload bits kept), so both paths give
 * identical bits; tests/unit/test_half.c checks all 65,536 patterns on both.
 */
#include <string.h>

#include "core/half_internal.h"
#include "core/simd_internal.h"
#include "hpml/core.h"

/* Type punning through a union: defined in C11 and, unlike memcpy, it keeps GCC's
 * vectoriser happy inside the conversion loops. */
static inline uint32_t f32_bits(float f)
{
    union {
        float f;
        uint32_t u;
    } v = {.f = f};
    return v.u;
}

static inline float bits_f32(uint32_t u)
{
    union {
        uint32_t u;
        float f;
    } v = {.u = u};
    return v.f;
}

/* ---- portable scalar conversions ------------------------------------------------ */

/* Both directions are written as selects between candidate results rather than
 * branches, so GCC vectorises the array loops, and use only exact operations (integer
 * arithmetic, float scaling by powers of two, truncating conversions): the result does
 * not depend on the rounding mode or on FTZ/DAZ. */

static inline uint32_t f16_to_f32_bits(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    /* normal: rebias the exponent 15 -> 127 */
    uint32_t rn = ((e + 112) << 23) | (m << 13);
    /* Inf, or NaN made quiet (F16C sets the quiet bit too) */
    uint32_t ri = 0x7f800000u | (m << 13) | ((0u - (m != 0)) & 0x00400000u);
    /* zero or subnormal m * 2^-24: exact in f32, and a normal f32 unless zero */
    uint32_t rs = f32_bits((float)m * 0x1p-24f);
    uint32_t is_sub = 0u - (e == 0), is_inf = 0u - (e == 0x1f);
    uint32_t r = (rs & is_sub) | (ri & is_inf) | (rn & ~(is_sub | is_inf));
    return sign | r;
}

static inline uint16_t f32_to_f16_bits(uint32_t x)
{
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    /* Normal result (|x| in [2^-14, 65520)): rebias 127 -> 15 and round off 13 bits,
     * adding just under half an ulp plus the kept lsb (ties to even); a carry bumps the
     * exponent, which is right. Garbage outside that range, where it is not selected. */
    uint32_t rn = (ax - 0x38000000u + 0x0fffu + ((ax >> 13) & 1u)) >> 13;
    /* Subnormal or zero result (|x| < 2^-14): in units of 2^-24 the value is below 1024;
     * split it exactly into integer and fraction and round to nearest even. Inputs
     * outside the range are replaced by 0 first so the conversion stays defined. */
    uint32_t sub = 0u - (ax < 0x38800000u);
    float v = bits_f32(ax & sub) * 0x1p24f;
    int32_t t = (int32_t)v;
    /* frac >= 0, so comparing its bits with those of 0.5 (0x3f000000) compares values */
    uint32_t frac = f32_bits(v - (float)t);
    uint32_t rs = (uint32_t)t + (frac > 0x3f000000u) + ((frac == 0x3f000000u) & (uint32_t)t);
    /* NaN: quiet bit, sign and top payload bits, like F16C. >= 65520 (the midpoint
     * above 65504) and Inf give Inf. */
    uint32_t nan = 0x7e00u | ((ax >> 13) & 0x3ffu);
    uint32_t inf = 0u - (ax >= 0x477ff000u), isnan = 0u - (ax > 0x7f800000u);
    uint32_t r = (rs & sub) | (rn & ~sub);
    r = (0x7c00u & inf) | (r & ~inf);
    r = (nan & isnan) | (r & ~isnan);
    return (uint16_t)(sign | r);
}

static inline uint32_t bf16_to_f32_bits(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    /* Quiet a signalling NaN, as the fp16 conversion (and F16C) does. */
    if ((u & 0x7fffffffu) > 0x7f800000u)
        u |= 0x00400000u;
    return u;
}

static inline uint16_t f32_to_bf16_bits(uint32_t x)
{
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign and top payload, set quiet */
        return (uint16_t)((x >> 16) | 0x0040u);
    /* Add just under half an ulp, plus one if the kept part is odd (ties to even). Big
     * finite values carry into the exponent and become Inf, which is RNE's answer. */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float hpml_f16_to_f32(uint16_t h)
{
    return bits_f32(f16_to_f32_bits(h));
}

uint16_t hpml_f32_to_f16(float f)
{
    return f32_to_f16_bits(f32_bits(f));
}

float hpml_bf16_to_f32(uint16_t h)
{
    return bits_f32(bf16_to_f32_bits(h));
}

uint16_t hpml_f32_to_bf16(float f)
{
    return f32_to_bf16_bits(f32_bits(f));
}

/* ---- portable arrays -------------------------------------------------------------- */

void hpml__f16_to_f32_portable(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = bits_f32(f16_to_f32_bits(src[i]));
}

void hpml__f32_to_f16_portable(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = f32_to_f16_bits(f32_bits(src[i]));
}

void hpml__bf16_to_f32_portable(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = bits_f32(bf16_to_f32_bits(src[i]));
}

void hpml__f32_to_bf16_portable(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = f32_to_bf16_bits(f32_bits(src[i]));
}

/* ---- F16C / AVX2 arrays -------------------------------------------------------------
 * Eight elements per step; the tail (n % 8) goes through a zero-padded stack block so
 * every element takes the same instructions. */

HPML_AVX2_TARGET void hpml__f16_to_f32_avx2(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    if (i < n) {
        uint16_t hb[8] = {0};
        float fb[8];
        memcpy(hb, src + i, (n - i) * sizeof *src);
        _mm256_storeu_ps(fb, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(void *)hb)));
        memcpy(dst + i, fb, (n - i) * sizeof *dst);
    }
}

HPML_AVX2_TARGET void hpml__f32_to_f16_avx2(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(void *)(dst + i), h);
    }
    if (i < n) {
        float fb[8] = {0};
        uint16_t hb[8];
        memcpy(fb, src + i, (n - i) * sizeof *src);
        _mm_storeu_si128((__m128i *)(void *)hb,
                         _mm256_cvtps_ph(_mm256_loadu_ps(fb), _MM_FROUND_TO_NEAREST_INT));
        memcpy(dst + i, hb, (n - i) * sizeof *dst);
    }
}

HPML_AVX2_TARGET void hpml__bf16_to_f32_avx2(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
        _mm256_storeu_ps(dst + i, hpml__bf16x8_to_f32(h));
    }
    if (i < n) {
        uint16_t hb[8] = {0};
        float fb[8];
        memcpy(hb, src + i, (n - i) * sizeof *src);
        _mm256_storeu_ps(fb, hpml__bf16x8_to_f32(_mm_loadu_si128((const __m128i *)(void *)hb)));
        memcpy(dst + i, fb, (n - i) * sizeof *dst);
    }
}

HPML_AVX2_TARGET void hpml__f32_to_bf16_avx2(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(dst + i),
                         hpml__f32x8_to_bf16(_mm256_loadu_ps(src + i)));
    if (i < n) {
        float fb[8] = {0};
        uint16_t hb[8];
        memcpy(fb, src + i, (n - i) * sizeof *src);
        _mm_storeu_si128((__m128i *)(void *)hb, hpml__f32x8_to_bf16(_mm256_loadu_ps(fb)));
        memcpy(dst + i, hb, (n - i) * sizeof *dst);
    }
}

/* ---- public array dispatchers ------------------------------------------------------ */

void hpml_f16_to_f32_array(float *dst, const uint16_t *src, size_t n)
{
    if (hpml__simd_path() == HPML_SIMD_AVX2)
        hpml__f16_to_f32_avx2(dst, src, n);
    else
        hpml__f16_to_f32_portable(dst, src, n);
}

void hpml_f32_to_f16_array(uint16_t *dst, const float *src, size_t n)
{
    if (hpml__simd_path() == HPML_SIMD_AVX2)
        hpml__f32_to_f16_avx2(dst, src, n);
    else
        hpml__f32_to_f16_portable(dst, src, n);
}

void hpml_bf16_to_f32_array(float *dst, const uint16_t *src, size_t n)
{
    if (hpml__simd_path() == HPML_SIMD_AVX2)
        hpml__bf16_to_f32_avx2(dst, src, n);
    else
        hpml__bf16_to_f32_portable(dst, src, n);
}

void hpml_f32_to_bf16_array(uint16_t *dst, const float *src, size_t n)
{
    if (hpml__simd_path() == HPML_SIMD_AVX2)
        hpml__f32_to_bf16_avx2(dst, src, n);
    else
        hpml__f32_to_bf16_portable(dst, src, n);
}
