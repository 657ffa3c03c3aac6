/*
 * fp16 (IEEE binary16) and bf16 (bfloat16) <-> f32 conversion, round to nearest, ties
 * to even. The portable path works on bit patterns and reproduces x86 F16C exactly,
 * NaNs included (quiet bit set, sign and top payload bits kept), so both paths give
 * identical bits; tests/unit/test_half.c checks all 65,536 patterns on both.
 */
#include <immintrin.h>
#include <string.h>

#include "core/simd_internal.h"
#include "hpml/core.h"

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- portable scalar conversions ------------------------------------------------ */

static inline uint32_t f16_to_f32_bits(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;

    if (e == 0x1f) /* Inf, or NaN made quiet (F16C sets the quiet bit too) */
        return sign | 0x7f800000u | (m << 13) | (m ? 0x00400000u : 0);
    if (e != 0) /* normal: rebias 15 -> 127 */
        return sign | ((e + 112) << 23) | (m << 13);
    if (m == 0)
        return sign;
    /* Subnormal m * 2^-24: normalise so the leading 1 lands on bit 10 (the implicit
     * bit). m has its top bit at position p = 31 - clz(m) < 10. */
    int p = 31 - __builtin_clz(m);
    return sign | ((uint32_t)(p + 103) << 23) | ((m << (10 - p) & 0x3ffu) << 13);
}

static inline uint16_t f32_to_f16_bits(uint32_t x)
{
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;

    if (ax > 0x7f800000u) /* NaN: quiet bit, sign and top 9 payload bits, like F16C */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) /* >= 65520 (the midpoint above 65504) and Inf -> Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* normal f16: rebias 127 -> 15, round off 13 bits */
        uint32_t r = ax - 0x38000000u;
        r = (r + 0x0fffu + ((r >> 13) & 1u)) >> 13; /* a carry bumps the exponent */
        return (uint16_t)(sign | r);
    }
    if (ax < 0x33000000u) /* <= 2^-25 (half the smallest subnormal; the tie goes to 0) */
        return (uint16_t)sign;
    /* Subnormal result: value = m * 2^(e-150); in units of 2^-24 that is
     * m >> (126 - e), rounded to nearest even. The result may round up to 0x400, the
     * smallest normal, which is the right encoding. */
    uint32_t e = ax >> 23; /* 102 .. 112 */
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14 .. 24 */
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return (uint16_t)(sign | q);
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

#define AVX2_TARGET __attribute__((target("avx2,f16c,fma")))

AVX2_TARGET void hpml__f16_to_f32_avx2(float *dst, const uint16_t *src, size_t n)
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

AVX2_TARGET void hpml__f32_to_f16_avx2(uint16_t *dst, const float *src, size_t n)
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

AVX2_TARGET static inline __m256 bf16x8_to_f32(__m128i h)
{
    const __m256i inf = _mm256_set1_epi32(0x7f800000);
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
    const __m256i quiet = _mm256_set1_epi32(0x00400000);
    __m256i u = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    /* |u| fits in 31 bits, so the signed compare is an unsigned one. */
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absmask), inf);
    return _mm256_castsi256_ps(_mm256_or_si256(u, _mm256_and_si256(nan, quiet)));
}

AVX2_TARGET static inline __m128i f32x8_to_bf16(__m256 f)
{
    const __m256i inf = _mm256_set1_epi32(0x7f800000);
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
    const __m256i bias = _mm256_set1_epi32(0x7fff);
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i quiet = _mm256_set1_epi32(0x0040);
    __m256i x = _mm256_castps_si256(f);
    __m256i hi = _mm256_srli_epi32(x, 16);
    __m256i r = _mm256_add_epi32(x, _mm256_add_epi32(bias, _mm256_and_si256(hi, one)));
    r = _mm256_srli_epi32(r, 16);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, absmask), inf);
    r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, quiet), nan);
    /* All lanes are <= 0xffff, so the unsigned-saturating pack is exact; it packs within
     * 128-bit halves, hence the cross-lane permute. */
    __m256i p = _mm256_packus_epi32(r, r);
    p = _mm256_permute4x64_epi64(p, 0x08); /* qwords 0 and 2 to the low half */
    return _mm256_castsi256_si128(p);
}

AVX2_TARGET void hpml__bf16_to_f32_avx2(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
        _mm256_storeu_ps(dst + i, bf16x8_to_f32(h));
    }
    if (i < n) {
        uint16_t hb[8] = {0};
        float fb[8];
        memcpy(hb, src + i, (n - i) * sizeof *src);
        _mm256_storeu_ps(fb, bf16x8_to_f32(_mm_loadu_si128((const __m128i *)(void *)hb)));
        memcpy(dst + i, fb, (n - i) * sizeof *dst);
    }
}

AVX2_TARGET void hpml__f32_to_bf16_avx2(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(dst + i), f32x8_to_bf16(_mm256_loadu_ps(src + i)));
    if (i < n) {
        float fb[8] = {0};
        uint16_t hb[8];
        memcpy(fb, src + i, (n - i) * sizeof *src);
        _mm_storeu_si128((__m128i *)(void *)hb, f32x8_to_bf16(_mm256_loadu_ps(fb)));
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
